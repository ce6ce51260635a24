/* crbench --overlap: how much of a nonblocking collective hides behind
 * computation that makes no crnet call, the case a progress thread
 * (CRNET_PROGRESS_THREAD, crnet_config.progress_thread) is for.
 *
 * For each size of the sweep and each kind of work, three times, each the
 * median over repetitions of the slowest rank's time:
 *
 *   t_comm  one blocking call, crnet_X;
 *   t_work  the work alone, sized to last t_comm;
 *   t_over  crnet_iX (start), the same work, crnet_wait;
 *
 *   overlap = 1 - (t_over - max(t_comm, t_work)) / min(t_comm, t_work)
 *
 * 1: the shorter of the two hid entirely behind the longer; 0: they ran
 * one after the other; below 0: together they took longer than in turn
 * (contention for the cores); above 1: the overlapped run beat the longer
 * alone. The value is printed raw, not clamped, so such cases show.
 *
 * The work lasts what the call does, because overlap is then as hard to
 * get as it gets: a call that is longer than the work needs progress only
 * while the work runs, one that is shorter only until it is done. Its
 * length: a first pass times the blocking call (barrier, call; the slowest
 * rank's time per repetition, through one allreduce MAX of the array, so
 * every rank gets the same median and does the same work).
 *
 * Repetitions interleave the three: barrier, timed blocking call,
 * barrier, timed work, barrier, timed overlapped run; so whatever the
 * machine does meanwhile (another job, a frequency change) falls on all
 * three alike and no median sees a quieter moment than the others. One
 * allreduce MAX of the three arrays at the end of the row gives each
 * repetition's slowest rank, as crbench's rows do.
 *
 * The kinds of work (--work):
 *   sleep  nanosleep for the duration: the core is free, as for a program
 *          that waits on a device or a disk; what is measured is whether
 *          anything moves the request on while nobody calls crnet;
 *   cpu    multiply-adds over a small array (CPU_LANES doubles, in L1),
 *          a number of passes calibrated per rank to last the duration,
 *          the result stored to a volatile so the compiler keeps it;
 *          what is measured is also what a progress thread costs when it
 *          has to share the core with the computation.
 * Neither makes a crnet call: that is the point.
 *
 * The calibration of the cpu work runs on every rank at once (after a
 * barrier), so where ranks outnumber cores it measures the share of a
 * core each rank gets while all compute, as in the timed runs; each size
 * corrects it once more, by timing the work it is about to do. t_work is
 * measured anyway, so the formula uses what the work took, not what it
 * was meant to take.
 *
 * Sizes, counts and buffers are crbench's (see SIZES in `crbench -h`):
 * allocated once for the largest size, 64-byte aligned, filled with small
 * integers every datatype holds (ordinary finite values: no subnormal
 * slows a kernel down), and never changed by a call (all out of place).
 * Bookkeeping (the barriers, the allreduces of times) runs on `auto`, as
 * in crbench.c; the schedule under test is set for its collective on
 * every row.
 *
 * Before anything is timed, one ibarrier starts the progress thread (the
 * library starts it at the first nonblocking call), so that no timed run
 * pays for creating it.
 */
#include "crbench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_ALIGN 64
/* Repetitions of the first pass that sizes the work (fewer if -n is). */
#define SIZING_REPS 5
/* The cpu work: passes of a multiply-add over CPU_LANES doubles (2 KiB,
 * in any L1). x = x·m + a converges to 1 and stays there, so the values
 * never overflow nor turn subnormal, whatever the number of passes. */
#define CPU_LANES 256
#define CPU_MUL 0.999
#define CPU_ADD 0.001
/* Calibration: each of CPU_CALIBRATE_RUNS runs at least this long; the
 * median rate counts. */
#define CPU_CALIBRATE_S 0.02
#define CPU_CALIBRATE_RUNS 3
/* A size's own correction of the rate runs its work this long at least:
 * shorter runs say more about the timer and the scheduler than the core. */
#define CPU_CORRECT_MIN_S 0.005
/* Progress on stderr for a size that took longer than this. */
#define PROGRESS_SECONDS 1.0

enum ocoll {
  O_ALLREDUCE,
  O_REDUCE_SCATTER,
  O_ALLGATHER,
  O_ALLTOALL,
  O_BCAST,
  O_REDUCE,
  O_SCAN,
  O_EXSCAN,
};

struct ocoll_desc {
  const char *name; /* crbench's -c */
  enum ocoll id;
  crnet_collective schedule_of;
  bool reduces, rooted;
};

/* A barrier moves no data and has no size to sweep: nothing to overlap
 * that crbench's plain rows do not show already. */
static const struct ocoll_desc ocolls[] = {
    {"allreduce", O_ALLREDUCE, CRNET_COLL_ALLREDUCE, true, false},
    {"reduce_scatter", O_REDUCE_SCATTER, CRNET_COLL_REDUCE_SCATTER, true,
     false},
    {"allgather", O_ALLGATHER, CRNET_COLL_ALLGATHER, false, false},
    {"alltoall", O_ALLTOALL, CRNET_COLL_ALLTOALL, false, false},
    {"bcast", O_BCAST, CRNET_COLL_BCAST, false, true},
    {"reduce", O_REDUCE, CRNET_COLL_REDUCE, true, true},
    {"scan", O_SCAN, CRNET_COLL_SCAN, true, false},
    {"exscan", O_EXSCAN, CRNET_COLL_SCAN, true, false},
};
#define NOCOLLS (sizeof ocolls / sizeof ocolls[0])

static const struct ocoll_desc *find_coll(const char *name) {
  for (size_t k = 0; k < NOCOLLS; k++)
    if (strcmp(ocolls[k].name, name) == 0)
      return &ocolls[k];
  return NULL;
}

bool crbench_overlap_supports(const char *coll) {
  return find_coll(coll) != NULL;
}

struct ovl {
  crnet_comm *comm;
  const struct crbench_overlap *o;
  const struct ocoll_desc *coll;
  int rank, p;
  size_t ts;
  unsigned char *send, *recv; /* the largest size, BUF_ALIGN aligned */
  double *times;              /* 3 · iters: t_comm, t_work, t_over */
  double cpu_rate;            /* cpu passes per second on this rank */
  double lanes[CPU_LANES];    /* the cpu work's state */
};

/* One row's shape, as crbench.c's layout_of: bytes is the size column,
 * count the count argument. */
struct shape {
  size_t bytes, count;
};

static struct shape shape_of(const struct ovl *v, size_t size) {
  struct shape s;
  size_t p = (size_t)v->p;
  switch (v->coll->id) {
  case O_REDUCE_SCATTER:
  case O_ALLGATHER:
  case O_ALLTOALL:
    s.count = size / v->ts / p;
    s.bytes = s.count * p * v->ts;
    break;
  default:
    s.count = size / v->ts;
    s.bytes = s.count * v->ts;
    break;
  }
  return s;
}

/* --- the calls ------------------------------------------------------------ */

static int call_blocking(struct ovl *v, const struct shape *s) {
  crnet_datatype dt = v->o->dt;
  crnet_op op = v->o->op;
  switch (v->coll->id) {
  case O_ALLREDUCE:
    return crnet_allreduce(v->comm, v->send, v->recv, s->count, dt, op);
  case O_REDUCE_SCATTER:
    return crnet_reduce_scatter_block(v->comm, v->send, v->recv, s->count, dt,
                                      op);
  case O_ALLGATHER:
    return crnet_allgather(v->comm, v->send, v->recv, s->count, dt);
  case O_ALLTOALL:
    return crnet_alltoall(v->comm, v->send, v->recv, s->count, dt);
  case O_BCAST:
    return crnet_bcast(v->comm, v->recv, s->count, dt, v->o->root);
  case O_REDUCE:
    return crnet_reduce(v->comm, v->send, v->recv, s->count, dt, op,
                        v->o->root);
  case O_SCAN:
    return crnet_scan(v->comm, v->send, v->recv, s->count, dt, op);
  case O_EXSCAN:
    return crnet_exscan(v->comm, v->send, v->recv, s->count, dt, op);
  }
  return CRNET_EINVAL;
}

static int call_start(struct ovl *v, const struct shape *s,
                      crnet_request **req) {
  crnet_datatype dt = v->o->dt;
  crnet_op op = v->o->op;
  switch (v->coll->id) {
  case O_ALLREDUCE:
    return crnet_iallreduce(v->comm, v->send, v->recv, s->count, dt, op, req);
  case O_REDUCE_SCATTER:
    return crnet_ireduce_scatter_block(v->comm, v->send, v->recv, s->count, dt,
                                       op, req);
  case O_ALLGATHER:
    return crnet_iallgather(v->comm, v->send, v->recv, s->count, dt, req);
  case O_ALLTOALL:
    return crnet_ialltoall(v->comm, v->send, v->recv, s->count, dt, req);
  case O_BCAST:
    return crnet_ibcast(v->comm, v->recv, s->count, dt, v->o->root, req);
  case O_REDUCE:
    return crnet_ireduce(v->comm, v->send, v->recv, s->count, dt, op,
                         v->o->root, req);
  case O_SCAN:
    return crnet_iscan(v->comm, v->send, v->recv, s->count, dt, op, req);
  case O_EXSCAN:
    return crnet_iexscan(v->comm, v->send, v->recv, s->count, dt, op, req);
  }
  return CRNET_EINVAL;
}

/* A failed call: say what and why on this rank. The caller aborts the job,
 * which fails every other rank's calls too. */
static int fail(struct ovl *v, const char *what, size_t bytes, int rc) {
  fprintf(stderr, PROG ": rank %d: --overlap: %s (%s, %s, %zu B): %s: %s\n",
          v->rank, what, v->coll->name, v->o->schedule, bytes,
          crnet_err_name(rc), crnet_comm_errmsg(v->comm));
  return 1;
}

/* The slowest rank's value of each element of a[0..n), on every rank. The
 * allreduce runs on "auto" even when allreduce is under test (crbench.c's
 * bookkeeping rule), and the schedule under test is set back after. */
static int slowest(struct ovl *v, double *a, size_t n, size_t bytes) {
  bool own = v->coll->schedule_of == CRNET_COLL_ALLREDUCE;
  int rc =
      own ? crnet_comm_set_schedule(v->comm, CRNET_COLL_ALLREDUCE, "auto") : 0;
  if (rc == 0)
    rc =
        crnet_allreduce(v->comm, CRNET_IN_PLACE, a, n, CRNET_DOUBLE, CRNET_MAX);
  if (rc == 0 && own)
    rc = crnet_comm_set_schedule(v->comm, CRNET_COLL_ALLREDUCE, v->o->schedule);
  return rc == 0 ? 0 : fail(v, "bookkeeping allreduce", bytes, rc);
}

/* --- the work ------------------------------------------------------------- */

/* Sink of the cpu work's result: a store the compiler must make, so it
 * cannot drop the arithmetic that feeds it. */
static volatile double cpu_sink;

static void cpu_work(struct ovl *v, uint64_t passes) {
  double *x = v->lanes, sum = 0;
  for (uint64_t k = 0; k < passes; k++)
    for (size_t i = 0; i < CPU_LANES; i++)
      x[i] = x[i] * CPU_MUL + CPU_ADD;
  for (size_t i = 0; i < CPU_LANES; i++)
    sum += x[i];
  cpu_sink = sum;
}

static void sleep_for(double seconds) {
  struct timespec ts;
  if (!(seconds > 0))
    return;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  /* nanosleep leaves the time still to sleep in ts when a signal cut it
   * short */
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    continue;
}

/* The work of one kind: `seconds` of sleep, or `passes` of arithmetic. */
static void work(struct ovl *v, unsigned kind, double seconds,
                 uint64_t passes) {
  if (kind == CRBENCH_WORK_SLEEP)
    sleep_for(seconds);
  else
    cpu_work(v, passes);
}

static uint64_t passes_for(const struct ovl *v, double seconds) {
  double n = v->cpu_rate * seconds;
  return n < 1 ? 1 : (uint64_t)llround(n);
}

/* This rank's cpu passes per second while every rank computes (see the
 * file comment): the median of CPU_CALIBRATE_RUNS runs of at least
 * CPU_CALIBRATE_S each. */
static int calibrate_cpu(struct ovl *v) {
  double rates[CPU_CALIBRATE_RUNS];
  uint64_t passes = 64;
  int rc;
  for (size_t i = 0; i < CPU_LANES; i++)
    v->lanes[i] = (double)i / CPU_LANES;
  rc = crnet_barrier(v->comm);
  if (rc != 0)
    return fail(v, "calibration barrier", 0, rc);
  for (int k = 0; k < CPU_CALIBRATE_RUNS; k++) {
    for (;;) {
      double t0 = crbench_now(), t;
      cpu_work(v, passes);
      t = crbench_now() - t0;
      if (t >= CPU_CALIBRATE_S) {
        rates[k] = (double)passes / t;
        break;
      }
      /* from a run long enough to tell, aim just past the bound rather
       * than doubling many times more */
      passes =
          t < CPU_CALIBRATE_S / 8
              ? passes * 8
              : (uint64_t)((double)passes * 1.25 * CPU_CALIBRATE_S / t) + 1;
    }
  }
  v->cpu_rate = crbench_median(rates, CPU_CALIBRATE_RUNS);
  return 0;
}

/* --- the rows ------------------------------------------------------------- */

static const char *progress_env(void) {
  const char *s = getenv("CRNET_PROGRESS_THREAD");
  /* the library reads an empty value as unset, and so does this */
  return s != NULL && s[0] != '\0' ? s : NULL;
}

static const char *progress_option_name(int mode) {
  switch (mode) {
  case CRNET_PROGRESS_THREAD_OFF:
    return "off";
  case CRNET_PROGRESS_THREAD_ON:
    return "on";
  default:
    return "auto";
  }
}

/* The setting in --progress-thread's words, as this rank saw it: the
 * option, else CRNET_PROGRESS_THREAD (0 off, 1 on), else "default". */
static const char *progress_setting(const struct crbench_overlap *o) {
  const char *env = progress_env();
  if (o->progress_thread >= 0)
    return progress_option_name(o->progress_thread);
  if (env == NULL)
    return "default";
  if (strcmp(env, "0") == 0)
    return "off";
  if (strcmp(env, "1") == 0)
    return "on";
  return env; /* auto: anything else failed init already */
}

static const char *work_name(unsigned kind) {
  return kind == CRBENCH_WORK_SLEEP ? "sleep" : "cpu";
}

static const char *type_column(const struct ovl *v) {
  return crnet_datatype_name(v->o->dt);
}

static const char *op_column(const struct ovl *v) {
  return v->coll->reduces ? crnet_op_name(v->o->op) : "none";
}

static void print_header(const struct ovl *v) {
  const struct crbench_overlap *o = v->o;
  const char *env = progress_env();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("# crbench --overlap: %s, p = %d, type %s, op %s, schedule %s",
         v->coll->name, v->p, type_column(v), op_column(v), o->schedule);
  if (v->coll->rooted)
    printf(", root %d", o->root);
  printf(", iters %d, warmup %d\n", o->iters, o->warmup);
  if (o->progress_thread >= 0)
    printf("# progress thread: %s (--progress-thread; CRNET_PROGRESS_THREAD "
           "not read)\n",
           progress_setting(o));
  else if (env != NULL)
    printf("# progress thread: %s (CRNET_PROGRESS_THREAD=%s)\n",
           progress_setting(o), env);
  else
    printf("# progress thread: default (CRNET_PROGRESS_THREAD unset: the "
           "library's auto, on where a host has more cores than ranks)\n");
  printf("# this host: %ld cores online\n", cores);
  printf(
      "# work: %s%s%s; as long as the blocking call, no crnet call\n",
      o->work & CRBENCH_WORK_SLEEP ? "sleep (nanosleep: core left free)" : "",
      o->work == (CRBENCH_WORK_SLEEP | CRBENCH_WORK_CPU) ? ", " : "",
      o->work & CRBENCH_WORK_CPU ? "cpu (multiply-adds in L1: core busy)" : "");
  printf("# overlap = 1 - (t_over - max(t_comm, t_work)) / min(t_comm, "
         "t_work): 1 hidden, 0 in turn\n");
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %18s  %10s  %10s  %10s  %8s  %5s\n", "size",
         "count", "type", "redop", "schedule", "t_comm", "t_work", "t_over",
         "overlap", "work");
  printf("# %10s  %12s  %8s  %6s  %18s  %10s  %10s  %10s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(us)", "(us)");
  fflush(stdout);
}

/* nccl-tests' precision, as crbench prints its times. */
static void format_us(char *buf, size_t n, double us) {
  snprintf(buf, n, us >= 10000 ? "%.0f" : us >= 100 ? "%.1f" : "%.2f", us);
}

struct result {
  struct shape s;
  unsigned kind;
  double t_comm, t_work, t_over; /* seconds */
  double overlap;                /* NAN when min(t_comm, t_work) is 0 */
};

static void print_row(const struct ovl *v, const struct result *r) {
  const struct crbench_overlap *o = v->o;
  if (o->json) {
    const char *env = progress_env();
    printf("{\"mode\": \"overlap\", \"coll\": \"%s\", \"size\": %zu, "
           "\"count\": %zu, \"type\": \"%s\", \"op\": \"%s\", "
           "\"schedule\": \"%s\", \"root\": %d, \"p\": %d, \"work\": \"%s\", "
           "\"t_comm_us\": %.9g, \"t_work_us\": %.9g, \"t_over_us\": %.9g, ",
           v->coll->name, r->s.bytes, r->s.count, type_column(v), op_column(v),
           o->schedule, v->coll->rooted ? o->root : -1, v->p,
           work_name(r->kind), r->t_comm * 1e6, r->t_work * 1e6,
           r->t_over * 1e6);
    if (isnan(r->overlap))
      printf("\"overlap\": null, ");
    else
      printf("\"overlap\": %.9g, ", r->overlap);
    printf("\"progress_thread\": \"%s\", \"progress_thread_from\": %s, "
           "\"iters\": %d, \"warmup\": %d}\n",
           progress_setting(o),
           o->progress_thread >= 0 ? "\"--progress-thread\""
           : env != NULL           ? "\"CRNET_PROGRESS_THREAD\""
                                   : "null",
           o->iters, o->warmup);
  } else {
    char comm[32], wk[32], over[32];
    format_us(comm, sizeof comm, r->t_comm * 1e6);
    format_us(wk, sizeof wk, r->t_work * 1e6);
    format_us(over, sizeof over, r->t_over * 1e6);
    printf("  %10zu  %12zu  %8s  %6s  %18s  %10s  %10s  %10s  ", r->s.bytes,
           r->s.count, type_column(v), op_column(v), o->schedule, comm, wk,
           over);
    if (isnan(r->overlap))
      printf("%8s", "-");
    else
      printf("%8.3f", r->overlap);
    printf("  %5s\n", work_name(r->kind));
  }
  fflush(stdout);
}

/* The three timed runs of one repetition, into times[k], times[iters + k]
 * and times[2·iters + k]. */
static int repetition(struct ovl *v, const struct shape *s, unsigned kind,
                      double seconds, uint64_t passes, int k) {
  int iters = v->o->iters, rc;
  crnet_request *req = NULL;
  double t0;

  rc = crnet_barrier(v->comm);
  if (rc != 0)
    return fail(v, "timing barrier", s->bytes, rc);
  t0 = crbench_now();
  rc = call_blocking(v, s);
  v->times[k] = crbench_now() - t0;
  if (rc != 0)
    return fail(v, "blocking call", s->bytes, rc);

  rc = crnet_barrier(v->comm);
  if (rc != 0)
    return fail(v, "timing barrier", s->bytes, rc);
  t0 = crbench_now();
  work(v, kind, seconds, passes);
  v->times[iters + k] = crbench_now() - t0;

  rc = crnet_barrier(v->comm);
  if (rc != 0)
    return fail(v, "timing barrier", s->bytes, rc);
  t0 = crbench_now();
  rc = call_start(v, s, &req);
  if (rc == 0) {
    work(v, kind, seconds, passes);
    rc = crnet_wait(&req);
  }
  v->times[2 * iters + k] = crbench_now() - t0;
  if (rc != 0)
    return fail(v, "nonblocking call", s->bytes, rc);
  return 0;
}

static int run_kind(struct ovl *v, const struct shape *s, unsigned kind,
                    double seconds) {
  int iters = v->o->iters;
  uint64_t passes = kind == CRBENCH_WORK_CPU ? passes_for(v, seconds) : 0;
  struct result r;
  double lo, hi;

  for (int k = 0; k < iters; k++)
    if (repetition(v, s, kind, seconds, passes, k) != 0)
      return 1;
  if (slowest(v, v->times, 3 * (size_t)iters, s->bytes) != 0)
    return 1;
  r.s = *s;
  r.kind = kind;
  r.t_comm = crbench_median(v->times, (size_t)iters);
  r.t_work = crbench_median(v->times + iters, (size_t)iters);
  r.t_over = crbench_median(v->times + 2 * iters, (size_t)iters);
  lo = r.t_comm < r.t_work ? r.t_comm : r.t_work;
  hi = r.t_comm < r.t_work ? r.t_work : r.t_comm;
  r.overlap = lo > 0 ? 1 - (r.t_over - hi) / lo : NAN;
  if (v->rank == 0)
    print_row(v, &r);
  return 0;
}

/* One size: warm-up, the first pass that sizes the work, the cpu rate's
 * correction, then a row per kind of work. A schedule that cannot serve
 * the call (every rank refuses alike, before sending anything) skips the
 * size with a note. */
static int run_size(struct ovl *v, size_t size, bool *noted) {
  const struct crbench_overlap *o = v->o;
  struct shape s = shape_of(v, size);
  int reps = o->iters < SIZING_REPS ? o->iters : SIZING_REPS, rc;
  double seconds;

  rc = crnet_comm_set_schedule(v->comm, v->coll->schedule_of, o->schedule);
  if (rc != 0)
    return fail(v, "crnet_comm_set_schedule", s.bytes, rc);
  rc = call_blocking(v, &s);
  if (rc == CRNET_EUNSUPPORTED) {
    if (v->rank == 0 && !*noted)
      fprintf(stderr, PROG ": --overlap: skipping %s for %s at p = %d: %s\n",
              o->schedule, v->coll->name, v->p, crnet_comm_errmsg(v->comm));
    *noted = true;
    return 0;
  }
  if (rc != 0)
    return fail(v, "blocking call", s.bytes, rc);
  /* Warm-up of both paths (the first blocking call above counts). */
  for (int k = 0; k < o->warmup; k++) {
    crnet_request *req = NULL;
    rc = k > 0 ? call_blocking(v, &s) : 0;
    if (rc == 0)
      rc = call_start(v, &s, &req);
    if (rc == 0)
      rc = crnet_wait(&req);
    if (rc != 0)
      return fail(v, "warm-up call", s.bytes, rc);
  }

  for (int k = 0; k < reps; k++) {
    double t0;
    rc = crnet_barrier(v->comm);
    if (rc != 0)
      return fail(v, "timing barrier", s.bytes, rc);
    t0 = crbench_now();
    rc = call_blocking(v, &s);
    v->times[k] = crbench_now() - t0;
    if (rc != 0)
      return fail(v, "blocking call", s.bytes, rc);
  }
  if (slowest(v, v->times, (size_t)reps, s.bytes) != 0)
    return 1;
  seconds = crbench_median(v->times, (size_t)reps);

  if (o->work & CRBENCH_WORK_CPU) {
    /* The work this size will do, all ranks at once, as often as it takes
     * to last CPU_CORRECT_MIN_S: corrects the rate where it drifted since
     * the calibration (another frequency, another share of the core), and
     * warms the work up. */
    uint64_t passes = passes_for(v, seconds);
    int times = seconds > 0 && seconds < CPU_CORRECT_MIN_S
                    ? (int)ceil(CPU_CORRECT_MIN_S / seconds)
                    : 1;
    double t0, t;
    rc = crnet_barrier(v->comm);
    if (rc != 0)
      return fail(v, "timing barrier", s.bytes, rc);
    t0 = crbench_now();
    for (int k = 0; k < times; k++)
      cpu_work(v, passes);
    t = crbench_now() - t0;
    if (t > 0)
      v->cpu_rate = (double)passes * times / t;
  }

  if ((o->work & CRBENCH_WORK_SLEEP) &&
      run_kind(v, &s, CRBENCH_WORK_SLEEP, seconds) != 0)
    return 1;
  if ((o->work & CRBENCH_WORK_CPU) &&
      run_kind(v, &s, CRBENCH_WORK_CPU, seconds) != 0)
    return 1;
  return 0;
}

/* Small integers (0..3) in every datatype, exactly: ordinary values for
 * every operator and kernel. */
static void encode_small(crnet_datatype dt, size_t ts, unsigned x,
                         unsigned char *out) {
  static const uint16_t half[4] = {0x0000, 0x3c00, 0x4000, 0x4200};
  static const uint16_t bf16[4] = {0x0000, 0x3f80, 0x4000, 0x4040};
  x &= 3;
  if (dt == CRNET_FLOAT16) {
    memcpy(out, &half[x], 2);
  } else if (dt == CRNET_BFLOAT16) {
    memcpy(out, &bf16[x], 2);
  } else if (dt == CRNET_FLOAT) {
    float f = (float)x;
    memcpy(out, &f, sizeof f);
  } else if (dt == CRNET_DOUBLE) {
    double d = (double)x;
    memcpy(out, &d, sizeof d);
  } else if (ts == 1) {
    uint8_t y = (uint8_t)x;
    memcpy(out, &y, 1);
  } else if (ts == 2) {
    uint16_t y = (uint16_t)x;
    memcpy(out, &y, 2);
  } else if (ts == 4) {
    uint32_t y = x;
    memcpy(out, &y, 4);
  } else {
    uint64_t y = x;
    memcpy(out, &y, 8);
  }
}

static void fill(const struct ovl *v, unsigned char *buf, size_t bytes) {
  unsigned char proto[4][8];
  for (unsigned x = 0; x < 4; x++)
    encode_small(v->o->dt, v->ts, x, proto[x]);
  for (size_t i = 0; i < bytes / v->ts; i++)
    memcpy(buf + i * v->ts, proto[(i + (size_t)v->rank) % 4], v->ts);
}

static void *alloc_buffer(size_t bytes) {
  size_t n = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
  return aligned_alloc(BUF_ALIGN, n == 0 ? BUF_ALIGN : n);
}

int crbench_overlap(crnet_comm *comm, const struct crbench_overlap *o) {
  struct ovl *v;
  size_t max_bytes = o->nsizes > 0 ? o->sizes[o->nsizes - 1] : 0;
  int32_t alloc_failed;
  bool noted = false;
  int rc, status = 0;

  /* The state lives on the heap: the cpu work's lanes are 2 KiB. */
  v = calloc(1, sizeof *v);
  if (v != NULL) {
    v->comm = comm;
    v->o = o;
    v->coll = find_coll(o->coll);
    v->rank = crnet_comm_rank(comm);
    v->p = crnet_comm_size(comm);
    v->ts = crnet_datatype_size(o->dt);
    v->send = alloc_buffer(max_bytes);
    v->recv = alloc_buffer(max_bytes);
    v->times =
        calloc(3 * (size_t)(o->iters > 0 ? o->iters : 1), sizeof *v->times);
  }
  alloc_failed = v == NULL || v->send == NULL || v->recv == NULL ||
                 v->times == NULL || v->coll == NULL || v->ts == 0;
  /* Every rank must know before anyone starts calling collectives. */
  rc = crnet_allreduce(comm, CRNET_IN_PLACE, &alloc_failed, 1, CRNET_INT32,
                       CRNET_MAX);
  if (rc != 0 || alloc_failed) {
    if (rc != 0)
      fprintf(stderr, PROG ": rank %d: --overlap: allreduce: %s\n",
              crnet_comm_rank(comm), crnet_comm_errmsg(comm));
    else if (crnet_comm_rank(comm) == 0)
      fprintf(stderr,
              PROG ": --overlap: cannot allocate 2 x %zu bytes on "
                   "some rank\n",
              max_bytes);
    status = 1;
    goto done;
  }
  /* Touch every page now, not in the first timed call. */
  fill(v, v->send, max_bytes);
  fill(v, v->recv, max_bytes);

  /* The library starts its progress thread at the first nonblocking call
   * (if it has one): start it here, before anything is timed. */
  {
    crnet_request *req = NULL;
    rc = crnet_ibarrier(comm, &req);
    if (rc == 0)
      rc = crnet_wait(&req);
    if (rc != 0) {
      status = fail(v, "ibarrier", 0, rc);
      goto done;
    }
  }
  if ((o->work & CRBENCH_WORK_CPU) && calibrate_cpu(v) != 0) {
    status = 1;
    goto done;
  }
  if (v->rank == 0 && !o->json)
    print_header(v);
  for (size_t k = 0; k < o->nsizes; k++) {
    double t0 = crbench_now();
    if (run_size(v, o->sizes[k], &noted) != 0) {
      status = 1;
      goto done;
    }
    if (v->rank == 0 && (o->verbose || crbench_now() - t0 > PROGRESS_SECONDS))
      fprintf(stderr, PROG ": --overlap: %zu B done (%zu/%zu)\n", o->sizes[k],
              k + 1, o->nsizes);
  }
done:
  if (v != NULL) {
    free(v->send);
    free(v->recv);
    free(v->times);
  }
  free(v);
  return status;
}
