/* mpi_bench: a standard-MPI collective benchmark with the methodology and the
 * JSON rows of crbench (tools/crbench.c), so that crnet can be compared with
 * any MPI library on the same terms. MPI only; nothing of crnet.
 *
 *   mpirun -n P mpi_bench -c allreduce -b 8 -e 64M -f 4 -l openmpi --json
 *
 * Per (size) row: WARMUP untimed calls, then ITERS repetitions of
 * (MPI_Barrier; one call timed with CLOCK_MONOTONIC); MPI_Allreduce(MAX)
 * over the array of repetition times gives each repetition's slowest rank;
 * the row shows the median. Sizes, counts and busbw factors are those of
 * nccl-tests and crbench. Datatype float, operator sum.
 *
 * --budget SEC bounds a row: after the warm-up, ITERS is cut so that the
 * repetitions should take about SEC seconds (at least MIN_ITERS, or ITERS if
 * smaller); the "iters" key says how many ran. All ranks take the same
 * decision, from the slowest rank's warm-up time.
 *
 * --check runs one more call per row on an exact integer pattern, with the
 * receive buffer preset to -1 (never a right value), and counts wrong
 * elements over all ranks. MPI_BENCH_CORRUPT=R makes rank R spoil one
 * checked element, to test the check itself.
 *
 * --overlap (allreduce only) asks instead how much of a nonblocking
 * allreduce hides behind work that makes no MPI call, i.e. whether the
 * library progresses in the background. Per (size, kind) row, each
 * repetition times four series, each after its own barrier and with the
 * slowest rank taken as above: a blocking MPI_Allreduce (t_comm);
 * MPI_Iallreduce then MPI_Wait with nothing between (t_nb); the work alone
 * (t_work); MPI_Iallreduce, the work, MPI_Wait (t_over). They are
 * interleaved repetition by repetition so that noise on a shared machine
 * falls on all of them alike. The row gives their medians and
 *   overlap = 1 - (t_over - max(t_comm, t_work)) / min(t_comm, t_work),
 * unclamped: 1 when the collective hides entirely behind the work, 0 when
 * the two simply add up; t_nb tells a nonblocking algorithm slower than the
 * blocking one (overlap below 0) from a lack of background progress.
 *
 * The work (--work sleep, cpu or both, the default; the flags and the JSON
 * keys are those of crbench --overlap) is sized to take t_comm as measured
 * just before (a first, shorter series of blocking calls): "sleep" sleeps
 * that long (the core is
 * free, as for a program waiting on a device), "cpu" runs floating-point
 * multiply-adds over a small array, calibrated with every rank working at
 * once, as they do in the timed repetitions. A row whose t_work comes out
 * more than 20 % off t_comm is run again with the work resized (up to 3
 * tries; "tries" says how many). With --check, the overlapped call is the
 * one checked.
 *
 * gather and scatter (root 0 unless -r), allgatherv and alltoallv follow
 * crbench: gather receives size bytes at the root, size / 4 / p floats from
 * each rank; scatter sends size bytes from the root, size / 4 / p to each
 * rank; allgatherv and alltoallv are allgather and alltoall through the
 * v-interface with equal counts (that count for every rank, displacements
 * r * count), the arrays set once per size, outside the timed call. busbw
 * factor (p-1)/p for all four, as crbench.
 *
 * --p2p latency|bw times point-to-point between ranks 0 and 1 instead, as
 * crbench --p2p (tools/crbench_p2p.c) and the OSU micro-benchmarks do:
 * latency is half the average round trip of a blocking ping-pong
 * (MPI_Send, MPI_Recv); bw is a window of 64 MPI_Isend (MPI_Irecv at rank
 * 1), MPI_Waitall, then a 4-byte MPI_Send back from rank 1, MB/s = 10^6
 * bytes per second of the timed windows. OSU's counts: latency 10000
 * iterations and 100 of warm-up up to 8 KiB, 1000 and 10 above; bw 100
 * windows and 10 of warm-up up to 8 KiB, 20 and 2 above (-n and -w set
 * both). Sizes 0 (1 for bw) to 4M by 2 unless -b -e -f say otherwise; the
 * sweep goes 0, 1, F, F^2... The rows are crbench's: {"mode", "bytes",
 * "iters", "latency_us" or "bandwidth_MBps"} plus "lib". --budget cuts the
 * timed iterations of a size as for the collectives, judged from rank 0's
 * warm-up (ranks 0 and 1 agree with one message after it). The other ranks
 * wait at a barrier. No --check (crbench has none for --p2p). */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "mpi_bench"
#define EXIT_WRONG 1
#define EXIT_USAGE 2
#define BUF_ALIGN 64
#define MIN_ITERS 3
#define PRESET (-1.0f)

/* The "cpu" work: multiply-adds over an array small enough to stay in L1,
 * so that it is bound by arithmetic, not by memory traffic that would
 * compete with the collective's copies. One unit = CPU_SWEEPS sweeps. */
#define CPU_ELEMS 256
#define CPU_SWEEPS 16
/* Repetitions of the blocking call that size the work (fewer than ITERS:
 * only the order of magnitude must be right, t_work is measured anyway). */
#define OV_PROBE_ITERS 5
/* A row is run again (OV_TRIES in all) while t_work is further than this
 * fraction from t_comm. */
#define OV_TRIES 3
#define OV_TOLERANCE 0.2

enum work_kind { W_SLEEP = 1, W_CPU = 2 };

enum coll_id {
  C_ALLREDUCE,
  C_REDUCE_SCATTER,
  C_ALLGATHER,
  C_ALLTOALL,
  C_BCAST,
  C_REDUCE,
  C_SCAN,
  C_GATHER,
  C_SCATTER,
  C_ALLGATHERV,
  C_ALLTOALLV,
};

enum p2p_mode { P2P_NONE, P2P_LATENCY, P2P_BW };
/* --p2p: the window of osu_bw, and OSU's boundary between its small and
 * large counts. */
#define P2P_WINDOW 64
#define P2P_LARGE 8192

enum bus { BUS_ALLREDUCE, BUS_SPREAD, BUS_ONE };

struct coll_desc {
  const char *name;
  enum coll_id id;
  enum bus factor;
  bool reduces, rooted;
};

static const struct coll_desc colls[] = {
    {"allreduce", C_ALLREDUCE, BUS_ALLREDUCE, true, false},
    {"reduce_scatter", C_REDUCE_SCATTER, BUS_SPREAD, true, false},
    {"allgather", C_ALLGATHER, BUS_SPREAD, false, false},
    {"alltoall", C_ALLTOALL, BUS_SPREAD, false, false},
    {"bcast", C_BCAST, BUS_ONE, false, true},
    {"reduce", C_REDUCE, BUS_ONE, true, true},
    {"scan", C_SCAN, BUS_ONE, true, false},
    {"gather", C_GATHER, BUS_SPREAD, false, true},
    {"scatter", C_SCATTER, BUS_SPREAD, false, true},
    {"allgatherv", C_ALLGATHERV, BUS_SPREAD, false, false},
    {"alltoallv", C_ALLTOALLV, BUS_SPREAD, false, false},
};

struct options {
  const struct coll_desc *coll;
  size_t min_bytes, max_bytes, factor, step;
  int iters, warmup, root;
  double budget;
  const char *lib;
  bool check, json, help;
  bool overlap; /* --overlap: overlap rows instead of the plain ones */
  int work;     /* --work: a mask of enum work_kind */
  bool have_work;
  enum p2p_mode p2p;             /* --p2p */
  bool have_iters, have_warmup;  /* -n, -w given (--p2p: override OSU's) */
};

struct layout {
  size_t count;      /* the count argument of the call */
  size_t send_elems; /* elements of the send buffer */
  size_t recv_elems; /* elements of the receive buffer */
  size_t bytes;      /* the size column */
};

struct bench {
  const struct options *o;
  int rank, p;
  float *send, *recv;
  double *times;
  int corrupt; /* MPI_BENCH_CORRUPT: this rank spoils a checked result */
  int *counts, *displs; /* allgatherv, alltoallv: p entries, set per size */
};

static const char usage_text[] =
    "Usage: mpirun -n P " PROG " [options]\n"
    "\n"
    "Times MPI collectives in the conventions of nccl-tests and crbench\n"
    "(float, sum). Rank 0 prints one row per size.\n"
    "\n"
    "Options:\n"
    "  -c, --coll COLL      allreduce (default), reduce_scatter, allgather,\n"
    "                       alltoall, bcast, reduce, scan, gather, scatter,\n"
    "                       allgatherv, alltoallv (equal counts, as crbench)\n"
    "  -b, --minbytes N     smallest size (default 32M); K, M, G suffixes\n"
    "                       are powers of 1024\n"
    "  -e, --maxbytes N     largest size (default: MIN)\n"
    "  -f, --stepfactor F   multiply the size by F (>= 2) each step (2)\n"
    "  -i, --stepbytes N    add N bytes each step instead\n"
    "  -n, --iters N        timed repetitions per size (default 20)\n"
    "  -w, --warmup_iters N untimed calls per size first (default 5)\n"
    "  -r, --root R         root of bcast, reduce, gather, scatter\n"
    "                       (default 0)\n"
    "  -l, --lib NAME       the name for the schedule and lib columns\n"
    "                       (default mpi)\n"
    "  -t, --budget SEC     cut the repetitions of a size to about SEC\n"
    "                       seconds, judged from the warm-up (at least 3)\n"
    "      --check          check every size's result (one more call)\n"
    "      --json           one JSON object per row, as crbench --json,\n"
    "                       plus \"lib\"\n"
    "      --overlap        allreduce only: time the overlap of\n"
    "                       MPI_Iallreduce with work that makes no MPI call.\n"
    "                       Rows give t_comm, t_work, t_over (medians) and\n"
    "                       overlap = 1 - (t_over - max(t_comm, t_work)) /\n"
    "                       min(t_comm, t_work) (1 hidden, 0 serial), and\n"
    "                       t_nb (MPI_Iallreduce; MPI_Wait alone)\n"
    "      --work W         --overlap's work: sleep, cpu or both (default)\n"
    "      --p2p latency|bw point-to-point between ranks 0 and 1 instead, as\n"
    "                       crbench --p2p and OSU's osu_latency (half a\n"
    "                       ping-pong round trip, us) and osu_bw (windows of\n"
    "                       64 messages, MB/s = 10^6 B/s); OSU's counts\n"
    "                       unless -n, -w; sizes 0 (1 for bw) to 4M by 2\n"
    "                       unless -b, -e, -f\n"
    "  -h, --help           print this text and exit\n"
    "\n"
    "Exit status: 0 right (or unchecked), 1 a wrong result or a failed\n"
    "call, 2 bad usage.\n";

/* ------------------------------------------------------------------------
 * Options
 */

static bool parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v;
  unsigned long long mul = 1;
  if (s[0] == '\0' || s[0] == '-')
    return false;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || end == s)
    return false;
  switch (*end) {
  case 'K': case 'k': mul = 1ULL << 10; end++; break;
  case 'M': case 'm': mul = 1ULL << 20; end++; break;
  case 'G': case 'g': mul = 1ULL << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v > SIZE_MAX / mul)
    return false;
  *out = (size_t)(v * mul);
  return true;
}

static bool parse_int(const char *s, int lo, int *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > 1000000000L)
    return false;
  *out = (int)v;
  return true;
}

/* Returns 0, or EXIT_USAGE after a message (rank 0 only speaks). */
static int parse_options(int argc, char **argv, struct options *o, bool speak) {
  static const struct option longopts[] = {
      {"coll", required_argument, NULL, 'c'},
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"stepbytes", required_argument, NULL, 'i'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"root", required_argument, NULL, 'r'},
      {"lib", required_argument, NULL, 'l'},
      {"budget", required_argument, NULL, 't'},
      {"check", no_argument, NULL, 'C'},
      {"json", no_argument, NULL, 'J'},
      {"overlap", no_argument, NULL, 'O'},
      {"work", required_argument, NULL, 'W'},
      {"p2p", required_argument, NULL, 'P'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool have_max = false, have_min = false;
  int c;
  o->coll = &colls[0];
  o->min_bytes = 32u << 20;
  o->max_bytes = 0;
  o->factor = 2;
  o->step = 0;
  o->iters = 20;
  o->warmup = 5;
  o->root = 0;
  o->budget = 0;
  o->lib = "mpi";
  o->check = o->json = o->help = false;
  o->overlap = o->have_work = false;
  o->work = W_SLEEP | W_CPU;
  o->p2p = P2P_NONE;
  o->have_iters = o->have_warmup = false;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":c:b:e:f:i:n:w:r:l:t:h", longopts,
                          NULL)) != -1) {
    const char *bad = NULL;
    switch (c) {
    case 'c': {
      size_t k;
      for (k = 0; k < sizeof colls / sizeof colls[0]; k++)
        if (strcmp(optarg, colls[k].name) == 0)
          break;
      if (k == sizeof colls / sizeof colls[0])
        bad = "unknown collective";
      else
        o->coll = &colls[k];
      break;
    }
    case 'b':
      if (!parse_size(optarg, &o->min_bytes))
        bad = "bad size";
      have_min = true;
      break;
    case 'e':
      if (!parse_size(optarg, &o->max_bytes))
        bad = "bad size";
      have_max = true;
      break;
    case 'f': {
      int f;
      if (!parse_int(optarg, 2, &f))
        bad = "bad factor (an integer >= 2)";
      else {
        o->factor = (size_t)f;
        o->step = 0;
      }
      break;
    }
    case 'i':
      if (!parse_size(optarg, &o->step) || o->step == 0)
        bad = "bad step";
      else
        o->factor = 0;
      break;
    case 'n':
      if (!parse_int(optarg, 1, &o->iters))
        bad = "bad repetition count";
      o->have_iters = true;
      break;
    case 'w':
      if (!parse_int(optarg, 0, &o->warmup))
        bad = "bad warm-up count";
      o->have_warmup = true;
      break;
    case 'r':
      if (!parse_int(optarg, 0, &o->root))
        bad = "bad root";
      break;
    case 'l':
      o->lib = optarg;
      break;
    case 't': {
      char *end;
      errno = 0;
      o->budget = strtod(optarg, &end);
      if (errno != 0 || end == optarg || *end != '\0' || !(o->budget > 0))
        bad = "bad budget (seconds > 0)";
      break;
    }
    case 'C':
      o->check = true;
      break;
    case 'J':
      o->json = true;
      break;
    case 'O':
      o->overlap = true;
      break;
    case 'W':
      if (strcmp(optarg, "sleep") == 0)
        o->work = W_SLEEP;
      else if (strcmp(optarg, "cpu") == 0)
        o->work = W_CPU;
      else if (strcmp(optarg, "both") == 0)
        o->work = W_SLEEP | W_CPU;
      else
        bad = "bad work (sleep, cpu or both)";
      o->have_work = true;
      break;
    case 'P':
      if (strcmp(optarg, "latency") == 0)
        o->p2p = P2P_LATENCY;
      else if (strcmp(optarg, "bw") == 0)
        o->p2p = P2P_BW;
      else
        bad = "bad --p2p (latency or bw)";
      break;
    case 'h':
      o->help = true;
      break;
    case ':':
      bad = "missing argument";
      break;
    default:
      bad = "unknown option";
      break;
    }
    if (bad != NULL) {
      if (speak)
        fprintf(stderr, PROG ": %s: %s (" PROG " -h for help)\n",
                optind > 1 ? argv[optind - 1] : "", bad);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    if (speak)
      fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
    return EXIT_USAGE;
  }
  if (o->p2p != P2P_NONE) {
    /* crbench --p2p's (OSU's) sweep unless -b, -e say otherwise. */
    if (!have_min)
      o->min_bytes = o->p2p == P2P_LATENCY ? 0 : 1;
    if (!have_max)
      o->max_bytes = (size_t)4 << 20;
    have_max = true;
    if (o->check || o->overlap) {
      if (speak)
        fprintf(stderr, PROG ": --p2p goes without --check and --overlap\n");
      return EXIT_USAGE;
    }
  }
  if (!have_max)
    o->max_bytes = o->min_bytes;
  if (o->max_bytes < o->min_bytes) {
    if (speak)
      fprintf(stderr, PROG ": -e is smaller than -b\n");
    return EXIT_USAGE;
  }
  if (o->overlap && o->coll->id != C_ALLREDUCE) {
    if (speak)
      fprintf(stderr, PROG ": --overlap measures allreduce only\n");
    return EXIT_USAGE;
  }
  if (o->have_work && !o->overlap) {
    if (speak)
      fprintf(stderr, PROG ": --work goes with --overlap\n");
    return EXIT_USAGE;
  }
  return 0;
}

/* ------------------------------------------------------------------------
 * Sizes and patterns
 */

static struct layout layout_of(const struct bench *b, size_t size) {
  struct layout l = {0, 0, 0, 0};
  size_t ts = sizeof(float), p = (size_t)b->p;
  switch (b->o->coll->id) {
  case C_ALLREDUCE:
  case C_BCAST:
  case C_REDUCE:
  case C_SCAN:
    l.count = size / ts;
    l.send_elems = l.recv_elems = l.count;
    l.bytes = l.count * ts;
    break;
  case C_REDUCE_SCATTER:
    l.count = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case C_ALLGATHER:
  case C_ALLGATHERV:
  case C_GATHER:
    /* gather: the root receives size bytes (every rank has the buffer, and
     * at the others it must stay preset). */
    l.count = size / ts / p;
    l.send_elems = l.count;
    l.recv_elems = l.count * p;
    l.bytes = l.recv_elems * ts;
    break;
  case C_SCATTER:
    l.count = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case C_ALLTOALL:
  case C_ALLTOALLV:
    l.count = size / ts / p;
    l.send_elems = l.recv_elems = l.count * p;
    l.bytes = l.send_elems * ts;
    break;
  }
  return l;
}

static double bus_factor(const struct bench *b) {
  double p = b->p;
  switch (b->o->coll->factor) {
  case BUS_ALLREDUCE:
    return 2.0 * (p - 1) / p;
  case BUS_SPREAD:
    return (p - 1) / p;
  case BUS_ONE:
    break;
  }
  return 1.0;
}

/* Reduction input of rank r at index i: 0..3, so that any sum over up to
 * 4 million ranks is exact in float. */
static float red_in(int r, size_t i) {
  return (float)((i * 7u + (size_t)r * 13u) % 4u);
}

/* Moved data of rank r at index i: positive and exact in float. */
static float mov_in(int r, size_t i) {
  return (float)(((size_t)r * 4099u + i) % 8388593u + 1u);
}

static void fill_inputs(const struct bench *b, const struct layout *l) {
  /* The v-variants' counts: equal blocks, as crbench's, set once per size
   * (not in the timed call). */
  for (int r = 0; r < b->p; r++) {
    b->counts[r] = (int)l->count;
    b->displs[r] = (int)((size_t)r * l->count);
  }
  for (size_t i = 0; i < l->send_elems; i++)
    b->send[i] = b->o->coll->reduces ? red_in(b->rank, i) : mov_in(b->rank, i);
  if (b->o->coll->id == C_BCAST)
    for (size_t i = 0; i < l->recv_elems; i++)
      b->recv[i] = b->rank == b->o->root ? mov_in(b->rank, i) : PRESET;
  else
    for (size_t i = 0; i < l->recv_elems; i++)
      b->recv[i] = PRESET;
}

/* The sum over ranks lo..hi-1 of red_in(r, i). */
static float red_sum(int lo, int hi, size_t i) {
  float s = 0;
  for (int r = lo; r < hi; r++)
    s += red_in(r, i);
  return s;
}

static uint64_t count_wrong(const struct bench *b, const struct layout *l) {
  const struct options *o = b->o;
  uint64_t wrong = 0;
  size_t n = l->count, p = (size_t)b->p;
  switch (o->coll->id) {
  case C_ALLREDUCE:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != red_sum(0, b->p, i);
    break;
  case C_REDUCE:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != (b->rank == o->root ? red_sum(0, b->p, i) : PRESET);
    break;
  case C_SCAN:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != red_sum(0, b->rank + 1, i);
    break;
  case C_REDUCE_SCATTER:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != red_sum(0, b->p, (size_t)b->rank * n + i);
    break;
  case C_ALLGATHER:
  case C_ALLGATHERV:
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += b->recv[j * n + i] != mov_in((int)j, i);
    break;
  case C_GATHER:
    /* The root holds every rank's block; the others' buffers stay preset. */
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += b->recv[j * n + i] !=
                 (b->rank == o->root ? mov_in((int)j, i) : PRESET);
    break;
  case C_SCATTER:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != mov_in(o->root, (size_t)b->rank * n + i);
    break;
  case C_ALLTOALL:
  case C_ALLTOALLV:
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += b->recv[j * n + i] != mov_in((int)j, (size_t)b->rank * n + i);
    break;
  case C_BCAST:
    for (size_t i = 0; i < n; i++)
      wrong += b->recv[i] != mov_in(o->root, i);
    break;
  }
  return wrong;
}

/* ------------------------------------------------------------------------
 * Timing
 */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int call(const struct bench *b, const struct layout *l) {
  int n = (int)l->count;
  switch (b->o->coll->id) {
  case C_ALLREDUCE:
    return MPI_Allreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD);
  case C_REDUCE_SCATTER:
    return MPI_Reduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD);
  case C_ALLGATHER:
    return MPI_Allgather(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT,
                         MPI_COMM_WORLD);
  case C_ALLTOALL:
    return MPI_Alltoall(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT,
                        MPI_COMM_WORLD);
  case C_BCAST:
    return MPI_Bcast(b->recv, n, MPI_FLOAT, b->o->root, MPI_COMM_WORLD);
  case C_REDUCE:
    return MPI_Reduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, b->o->root,
                      MPI_COMM_WORLD);
  case C_SCAN:
    return MPI_Scan(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  case C_GATHER:
    return MPI_Gather(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT, b->o->root,
                      MPI_COMM_WORLD);
  case C_SCATTER:
    return MPI_Scatter(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT,
                       b->o->root, MPI_COMM_WORLD);
  case C_ALLGATHERV:
    return MPI_Allgatherv(b->send, n, MPI_FLOAT, b->recv, b->counts, b->displs,
                          MPI_FLOAT, MPI_COMM_WORLD);
  case C_ALLTOALLV:
    return MPI_Alltoallv(b->send, b->counts, b->displs, MPI_FLOAT, b->recv,
                         b->counts, b->displs, MPI_FLOAT, MPI_COMM_WORLD);
  }
  return MPI_ERR_OTHER;
}

static void fail(const struct bench *b, const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error %d", rc);
  fprintf(stderr, PROG ": rank %d: %s: %s\n", b->rank, what, msg);
  MPI_Abort(MPI_COMM_WORLD, EXIT_WRONG);
}

/* Times one size; returns the number of wrong elements over all ranks. */
static uint64_t run_row(struct bench *b, const struct layout *l, double *time_s,
                        int *iters_run) {
  const struct options *o = b->o;
  int rc, iters = o->iters;
  uint64_t wrong = 0;
  double t0, warm;

  MPI_Barrier(MPI_COMM_WORLD);
  t0 = now_s();
  for (int k = 0; k < o->warmup; k++)
    if ((rc = call(b, l)) != MPI_SUCCESS)
      fail(b, "warm-up call", rc);
  warm = now_s() - t0;
  if (o->budget > 0 && o->warmup > 0) {
    MPI_Allreduce(MPI_IN_PLACE, &warm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double per_call = warm / o->warmup;
    if (per_call * iters > o->budget) {
      int cut = (int)(o->budget / per_call);
      int floor_iters = iters < MIN_ITERS ? iters : MIN_ITERS;
      iters = cut < floor_iters ? floor_iters : cut;
    }
  }
  for (int k = 0; k < iters; k++) {
    if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
      fail(b, "timing barrier", rc);
    t0 = now_s();
    rc = call(b, l);
    b->times[k] = now_s() - t0;
    if (rc != MPI_SUCCESS)
      fail(b, "timed call", rc);
  }
  if (o->check) {
    fill_inputs(b, l);
    if ((rc = call(b, l)) != MPI_SUCCESS)
      fail(b, "checked call", rc);
    if (b->corrupt == b->rank && l->recv_elems > 0)
      b->recv[l->recv_elems - 1] += 0.5f; /* self-test of the check */
    wrong = count_wrong(b, l);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  MPI_Allreduce(MPI_IN_PLACE, b->times, iters, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
  *time_s = iters % 2 ? b->times[iters / 2]
                      : (b->times[iters / 2 - 1] + b->times[iters / 2]) / 2;
  *iters_run = iters;
  return wrong;
}

static void print_row(const struct bench *b, const struct layout *l,
                      double time_s, uint64_t wrong, int iters) {
  const struct options *o = b->o;
  double us = time_s * 1e6;
  double algbw = time_s > 0 ? (double)l->bytes / time_s / 1e9 : 0;
  double busbw = algbw * bus_factor(b);
  const char *op = o->coll->reduces ? "sum" : "none";
  int root = o->coll->rooted ? o->root : -1;
  if (o->json) {
    printf("{\"coll\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": "
           "\"float\", \"op\": \"%s\", \"schedule\": \"%s\", \"root\": %d, "
           "\"p\": %d, \"time_us\": %.9g, \"algbw_gbps\": %.9g, "
           "\"busbw_gbps\": %.9g, ",
           o->coll->name, l->bytes, l->count, op, o->lib, root, b->p, us, algbw,
           busbw);
    if (o->check)
      printf("\"wrong\": %" PRIu64, wrong);
    else
      printf("\"wrong\": null");
    printf(", \"iters\": %d, \"lib\": \"%s\"}\n", iters, o->lib);
  } else {
    char w[32];
    if (o->check)
      snprintf(w, sizeof w, "%" PRIu64, wrong);
    else
      snprintf(w, sizeof w, "N/A");
    printf("  %10zu  %12zu  %6s  %5s  %12s  %4d  %10.2f  %8.3f  %8.3f  %6s"
           "  %5d\n",
           l->bytes, l->count, "float", op, o->lib, root, us, algbw, busbw, w,
           iters);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------------
 * Overlap (--overlap)
 */

static float cpu_buf[CPU_ELEMS];
/* The cpu work leaves its result here, so that the compiler must compute
 * it. */
static volatile float cpu_sink;

/* CPU-bound work: units * CPU_SWEEPS sweeps of x = x * a + c. The fixed
 * point is 1, so the values stay normal floats (no subnormal slow path)
 * however long it runs. No MPI call: whatever the collective does meanwhile
 * is the library's own background progress. */
static void work_cpu(int64_t units) {
  float acc = 0;
  for (int64_t u = 0; u < units; u++)
    for (int s = 0; s < CPU_SWEEPS; s++)
      for (int i = 0; i < CPU_ELEMS; i++)
        cpu_buf[i] = cpu_buf[i] * 0.9999f + 0.0001f;
  for (int i = 0; i < CPU_ELEMS; i++)
    acc += cpu_buf[i];
  cpu_sink = acc;
}

/* Work that leaves the core free: sleeps until secs after the call, to an
 * absolute deadline so that a signal cannot lengthen it. */
static void work_sleep(double secs) {
  struct timespec t;
  long long ns;
  clock_gettime(CLOCK_MONOTONIC, &t);
  ns = (long long)t.tv_nsec + (long long)(secs * 1e9);
  t.tv_sec += (time_t)(ns / 1000000000);
  t.tv_nsec = (long)(ns % 1000000000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
    ;
}

struct work {
  enum work_kind kind;
  double secs;   /* sleep: how long */
  int64_t units; /* cpu: how many units */
};

static void do_work(const struct work *w) {
  if (w->kind == W_SLEEP)
    work_sleep(w->secs);
  else
    work_cpu(w->units);
}

/* The median of v[0..n), which it sorts. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds that units of cpu work take with every rank working at once, as
 * in the timed repetitions (where, with more ranks than cores, the ranks
 * share the cores); the slowest rank's. */
static double cpu_time(const struct bench *b, int64_t units) {
  int rc;
  double t0, dt;
  if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
    fail(b, "calibration barrier", rc);
  t0 = now_s();
  work_cpu(units);
  dt = now_s() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

/* The number of cpu units that takes about target seconds: doubles a trial
 * count until it takes a measurable time, scales it to the target, then
 * corrects twice on the median of a few runs of the scaled count (a short
 * trial scales badly: timer resolution, caches, clock ramp-up). Every rank
 * gets the same count, as every step uses the slowest rank's time. */
static int64_t calibrate_cpu(const struct bench *b, double target) {
  double floor_s = target / 4 < 0.01 ? target / 4 : 0.01, dt, t[OV_PROBE_ITERS];
  int64_t units = 1;
  while ((dt = cpu_time(b, units)) < floor_s && units < (INT64_C(1) << 40))
    units *= 2;
  for (int pass = 0; pass < 3; pass++) {
    double scaled = (double)units * target / (dt > 0 ? dt : 1e-9);
    units = scaled < 1 ? 1 : (int64_t)(scaled + 0.5);
    if (pass == 2)
      break;
    for (int k = 0; k < OV_PROBE_ITERS; k++)
      t[k] = cpu_time(b, units);
    dt = median(t, OV_PROBE_ITERS);
  }
  return units;
}

static void overlapped_call(const struct bench *b, const struct layout *l,
                            const struct work *w) {
  MPI_Request req;
  int rc = MPI_Iallreduce(b->send, b->recv, (int)l->count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS)
    fail(b, "MPI_Iallreduce", rc);
  do_work(w);
  if ((rc = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
    fail(b, "MPI_Wait", rc);
}

/* The time the work of a row is sized to: warm-up calls (blocking and
 * nonblocking, as a library may set up its nonblocking schedules on first
 * use), then the median of OV_PROBE_ITERS timed blocking calls. */
static double probe_comm(struct bench *b, const struct layout *l) {
  const struct work none = {W_SLEEP, 0, 0};
  double t0;
  int rc, warm = b->o->warmup > 0 ? b->o->warmup : 1;
  for (int k = 0; k < warm; k++) {
    if ((rc = call(b, l)) != MPI_SUCCESS)
      fail(b, "warm-up call", rc);
    overlapped_call(b, l, &none);
  }
  for (int k = 0; k < OV_PROBE_ITERS; k++) {
    if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
      fail(b, "timing barrier", rc);
    t0 = now_s();
    rc = call(b, l);
    b->times[k] = now_s() - t0;
    if (rc != MPI_SUCCESS)
      fail(b, "timed call", rc);
  }
  MPI_Allreduce(MPI_IN_PLACE, b->times, OV_PROBE_ITERS, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  return median(b->times, OV_PROBE_ITERS);
}

struct overlap_row {
  /* Medians, seconds: the blocking call, MPI_Iallreduce + MPI_Wait with
   * nothing between, the work alone, and the call with the work between. */
  double t_comm, t_nb, t_work, t_over;
  double overlap;
  uint64_t wrong;
  int iters, tries;
};

enum ov_series { S_COMM, S_NB, S_WORK, S_OVER, S_COUNT };

/* One timed repetition of one series on this rank, after a barrier. */
static double time_one(const struct bench *b, const struct layout *l,
                       const struct work *w, enum ov_series what) {
  static const struct work none = {W_SLEEP, 0, 0};
  double t0, dt;
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS)
    fail(b, "timing barrier", rc);
  t0 = now_s();
  switch (what) {
  case S_COMM:
    if ((rc = call(b, l)) != MPI_SUCCESS)
      fail(b, "timed call", rc);
    break;
  case S_NB:
    overlapped_call(b, l, &none);
    break;
  case S_WORK:
    do_work(w);
    break;
  case S_OVER:
  case S_COUNT:
    overlapped_call(b, l, w);
    break;
  }
  dt = now_s() - t0;
  return dt;
}

/* Times one (size, work) row: repetitions of the four series, interleaved,
 * each repetition's slowest rank, medians. est is about t_comm. */
static void run_overlap_row(struct bench *b, const struct layout *l,
                            const struct work *w, double est,
                            struct overlap_row *r) {
  const struct options *o = b->o;
  int iters = o->iters;
  double lo, hi;

  /* A repetition takes about 4 est: the work is sized to est, and the
   * nonblocking call alone should take about as long as the blocking one. */
  if (o->budget > 0 && 4 * est * iters > o->budget) {
    int cut = (int)(o->budget / (4 * est));
    int floor_iters = iters < MIN_ITERS ? iters : MIN_ITERS;
    iters = cut < floor_iters ? floor_iters : cut;
  }
  for (int k = 0; k < iters; k++)
    for (int s = 0; s < S_COUNT; s++)
      b->times[s * iters + k] = time_one(b, l, w, (enum ov_series)s);
  r->wrong = 0;
  if (o->check) {
    /* The nonblocking call is the one under test here: check it with the
     * work running, as it was timed. */
    fill_inputs(b, l);
    overlapped_call(b, l, w);
    if (b->corrupt == b->rank && l->recv_elems > 0)
      b->recv[l->recv_elems - 1] += 0.5f; /* self-test of the check */
    r->wrong = count_wrong(b, l);
    MPI_Allreduce(MPI_IN_PLACE, &r->wrong, 1, MPI_UINT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  MPI_Allreduce(MPI_IN_PLACE, b->times, S_COUNT * iters, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  r->t_comm = median(b->times + S_COMM * iters, iters);
  r->t_nb = median(b->times + S_NB * iters, iters);
  r->t_work = median(b->times + S_WORK * iters, iters);
  r->t_over = median(b->times + S_OVER * iters, iters);
  lo = r->t_comm < r->t_work ? r->t_comm : r->t_work;
  hi = r->t_comm < r->t_work ? r->t_work : r->t_comm;
  /* Unclamped on purpose: below 0, the overlapped call cost more than the
   * two in series; above 1, less than the longer of the two alone. NAN
   * (null in JSON) when there is nothing to hide. */
  r->overlap = lo > 0 ? 1 - (r->t_over - hi) / lo : NAN;
  r->iters = iters;
}

static void print_overlap_row(const struct bench *b, const struct layout *l,
                              const struct work *w,
                              const struct overlap_row *r) {
  const struct options *o = b->o;
  const char *kind = w->kind == W_SLEEP ? "sleep" : "cpu";
  if (o->json) {
    printf("{\"coll\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": "
           "\"float\", \"op\": \"sum\", \"schedule\": \"%s\", \"root\": -1, "
           "\"p\": %d, \"mode\": \"overlap\", \"work\": \"%s\", "
           "\"t_comm_us\": %.9g, \"t_work_us\": %.9g, \"t_over_us\": %.9g, "
           "\"t_nb_us\": %.9g, ",
           o->coll->name, l->bytes, l->count, o->lib, b->p, kind,
           r->t_comm * 1e6, r->t_work * 1e6, r->t_over * 1e6, r->t_nb * 1e6);
    if (isnan(r->overlap))
      printf("\"overlap\": null, ");
    else
      printf("\"overlap\": %.9g, ", r->overlap);
    if (w->kind == W_CPU)
      printf("\"work_units\": %" PRId64 ", ", w->units);
    else
      printf("\"work_units\": null, ");
    if (o->check)
      printf("\"wrong\": %" PRIu64, r->wrong);
    else
      printf("\"wrong\": null");
    printf(", \"iters\": %d, \"tries\": %d, \"lib\": \"%s\"}\n", r->iters,
           r->tries, o->lib);
  } else {
    char w_s[32];
    if (o->check)
      snprintf(w_s, sizeof w_s, "%" PRIu64, r->wrong);
    else
      snprintf(w_s, sizeof w_s, "N/A");
    printf("  %10zu  %12zu  %12s  %5s  %10.2f  %10.2f  %10.2f  %8.3f  %10.2f"
           "  %6s  %5d  %5d\n",
           l->bytes, l->count, o->lib, kind, r->t_comm * 1e6, r->t_work * 1e6,
           r->t_over * 1e6, r->overlap, r->t_nb * 1e6, w_s, r->iters,
           r->tries);
  }
  fflush(stdout);
}

/* One size of --overlap: sizes the work from a probe of the blocking call,
 * then a row per work kind. A row whose t_work is off t_comm by more than
 * OV_TOLERANCE (the probe was few calls on a noisy machine, nanosleep
 * overshoots by tens of microseconds) is run again with the work resized
 * from that row's own figures, up to OV_TRIES times in all; the last try
 * is the row. Every rank takes the same decisions: the medians come from
 * the same reduced times. Returns the number of wrong elements. */
static uint64_t run_overlap_size(struct bench *b, const struct layout *l) {
  static const enum work_kind kinds[] = {W_SLEEP, W_CPU};
  uint64_t wrong = 0;
  double est = probe_comm(b, l);
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    struct work w = {kinds[k], est, 0};
    struct overlap_row r;
    if (!(b->o->work & (int)kinds[k]))
      continue;
    if (w.kind == W_CPU)
      w.units = calibrate_cpu(b, est);
    for (int tries = 1;; tries++) {
      double ratio;
      run_overlap_row(b, l, &w, est, &r);
      r.tries = tries;
      wrong += r.wrong;
      ratio = r.t_comm > 0 ? r.t_work / r.t_comm : 1;
      if (tries == OV_TRIES ||
          (ratio > 1 - OV_TOLERANCE && ratio < 1 + OV_TOLERANCE))
        break;
      est = r.t_comm;
      if (w.kind == W_SLEEP) {
        /* The overshoot is about constant: aim below by that much. */
        w.secs += r.t_comm - r.t_work;
        if (w.secs < 0)
          w.secs = 0;
      } else {
        double units = (double)w.units / ratio;
        w.units = units < 1 ? 1 : (int64_t)(units + 0.5);
      }
    }
    if (b->rank == 0)
      print_overlap_row(b, l, &w, &r);
  }
  return wrong;
}

/* ------------------------------------------------------------------------
 * Point-to-point (--p2p), as crbench --p2p and the OSU micro-benchmarks
 */

/* OSU's counts for a size, unless -n, -w set them. */
static void p2p_counts(const struct options *o, size_t bytes, int *iters,
                       int *warmup) {
  bool large = bytes > P2P_LARGE;
  if (o->p2p == P2P_LATENCY) {
    *iters = large ? 1000 : 10000;
    *warmup = large ? 10 : 100;
  } else {
    *iters = large ? 20 : 100;
    *warmup = large ? 2 : 10;
  }
  if (o->have_iters)
    *iters = o->iters;
  if (o->have_warmup)
    *warmup = o->warmup;
}

/* One iteration: a ping-pong round trip (latency), or a window of
 * P2P_WINDOW messages and the 4-byte ack (bw). Ranks 0 and 1 only. */
static void p2p_step(const struct bench *b, char *s, char *r, size_t bytes) {
  int n = (int)bytes, rc = MPI_SUCCESS, peer = 1 - b->rank;
  if (b->o->p2p == P2P_LATENCY) {
    if (b->rank == 0) {
      rc = MPI_Send(s, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
      if (rc == MPI_SUCCESS)
        rc = MPI_Recv(r, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
    } else {
      rc = MPI_Recv(r, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS)
        rc = MPI_Send(s, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
    }
  } else {
    MPI_Request req[P2P_WINDOW];
    /* A status array, as osu_bw's (MPI_STATUSES_IGNORE trips GCC 12's
     * -Wstringop-overflow on MPICH's header). */
    MPI_Status st[P2P_WINDOW];
    uint32_t ack = 0;
    for (int k = 0; k < P2P_WINDOW && rc == MPI_SUCCESS; k++)
      rc = b->rank == 0
               ? MPI_Isend(s, n, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[k])
               : MPI_Irecv(r, n, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[k]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Waitall(P2P_WINDOW, req, st);
    if (rc == MPI_SUCCESS)
      rc = b->rank == 0 ? MPI_Recv(&ack, 4, MPI_CHAR, peer, 101,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE)
                        : MPI_Send(&ack, 4, MPI_CHAR, peer, 101,
                                   MPI_COMM_WORLD);
  }
  if (rc != MPI_SUCCESS)
    fail(b, b->o->p2p == P2P_LATENCY ? "ping-pong" : "window", rc);
}

/* One size between ranks 0 and 1: the warm-up, the budget's cut (rank 0
 * decides from its warm-up and tells rank 1), the timed iterations.
 * Returns rank 0's figure: seconds of half a round trip, or bytes per
 * second; *iters_run the iterations timed. */
static double p2p_size(const struct bench *b, char *s, char *r, size_t bytes,
                       int *iters_run) {
  const struct options *o = b->o;
  int iters, warmup, rc;
  double t0;
  p2p_counts(o, bytes, &iters, &warmup);
  t0 = now_s();
  for (int i = 0; i < warmup; i++)
    p2p_step(b, s, r, bytes);
  if (o->budget > 0 && warmup > 0) {
    if (b->rank == 0) {
      double per = (now_s() - t0) / warmup;
      if (per * iters > o->budget) {
        int cut = (int)(o->budget / per);
        int floor_iters = iters < MIN_ITERS ? iters : MIN_ITERS;
        iters = cut < floor_iters ? floor_iters : cut;
      }
      rc = MPI_Send(&iters, 1, MPI_INT, 1, 102, MPI_COMM_WORLD);
    } else {
      rc = MPI_Recv(&iters, 1, MPI_INT, 0, 102, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS)
      fail(b, "budget message", rc);
  }
  t0 = now_s();
  for (int i = 0; i < iters; i++)
    p2p_step(b, s, r, bytes);
  t0 = now_s() - t0;
  *iters_run = iters;
  if (o->p2p == P2P_LATENCY)
    return t0 / (2.0 * iters);
  return t0 > 0 ? (double)bytes * P2P_WINDOW * iters / t0 : 0;
}

static int run_p2p(struct bench *b) {
  const struct options *o = b->o;
  bool lat = o->p2p == P2P_LATENCY;
  size_t max = o->max_bytes > 4 ? o->max_bytes : 4;
  char *s = NULL, *r = NULL;
  int rc;
  if (b->p < 2) {
    if (b->rank == 0)
      fprintf(stderr, PROG ": --p2p needs 2 ranks or more (ranks 0 and 1 "
                      "talk, the others wait)\n");
    return EXIT_USAGE;
  }
  if (max > (size_t)INT32_MAX) {
    if (b->rank == 0)
      fprintf(stderr, PROG ": --p2p: %zu B is more than an int count\n", max);
    return EXIT_USAGE;
  }
  if (posix_memalign((void **)&s, 4096, max) != 0 ||
      posix_memalign((void **)&r, 4096, max) != 0) {
    fprintf(stderr, PROG ": rank %d: out of memory\n", b->rank);
    MPI_Abort(MPI_COMM_WORLD, EXIT_WRONG);
  }
  memset(s, 'a', max);
  memset(r, 'b', max);
  if (b->rank == 0 && !o->json) {
    printf("# " PROG " --p2p %s: ranks 0 and 1 of %d, %s (OSU %s "
           "conventions)\n# %-10s %s\n",
           lat ? "latency" : "bw", b->p, o->lib,
           lat ? "osu_latency" : "osu_bw", "Size",
           lat ? "Latency (us)" : "Bandwidth (MB/s)");
    fflush(stdout);
  }
  for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
    int iters = 0;
    double v = 0;
    if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
      fail(b, "barrier", rc);
    if (b->rank < 2)
      v = p2p_size(b, s, r, bytes, &iters);
    if (b->rank == 0) {
      if (o->json)
        printf("{\"mode\": \"%s\", \"bytes\": %zu, \"iters\": %d, \"%s\": "
               "%.3f, \"lib\": \"%s\"}\n",
               lat ? "latency" : "bw", bytes, iters,
               lat ? "latency_us" : "bandwidth_MBps", lat ? v * 1e6 : v / 1e6,
               o->lib);
      else
        printf("%-12zu %.2f\n", bytes, lat ? v * 1e6 : v / 1e6);
      fflush(stdout);
    }
    if (o->factor == 0) {
      if (bytes > o->max_bytes - o->step)
        break;
      bytes += o->step;
    } else if (bytes == 0) {
      bytes = 1;
    } else {
      if (bytes > o->max_bytes / o->factor)
        break;
      bytes *= o->factor;
    }
  }
  if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
    fail(b, "barrier", rc);
  free(s);
  free(r);
  return 0;
}

static void *alloc_buffer(size_t elems) {
  size_t bytes = elems * sizeof(float);
  size_t n = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
  return aligned_alloc(BUF_ALIGN, n == 0 ? BUF_ALIGN : n);
}

int main(int argc, char **argv) {
  struct options o;
  struct bench b;
  int status, any_wrong = 0, version, subversion;
  char libname[MPI_MAX_LIBRARY_VERSION_STRING];
  int liblen;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.p);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  b.o = &o;
  b.corrupt = getenv("MPI_BENCH_CORRUPT") ? atoi(getenv("MPI_BENCH_CORRUPT")) : -1;
  status = parse_options(argc, argv, &o, b.rank == 0);
  if (status != 0 || o.help) {
    if (o.help && b.rank == 0)
      fputs(usage_text, stdout);
    MPI_Finalize();
    return status;
  }
  if (o.p2p != P2P_NONE) {
    status = run_p2p(&b);
    MPI_Finalize();
    return status;
  }
  if (o.coll->rooted && o.root >= b.p) {
    if (b.rank == 0)
      fprintf(stderr, PROG ": root %d is not a rank (p = %d)\n", o.root, b.p);
    MPI_Finalize();
    return EXIT_USAGE;
  }

  /* The largest row decides the buffers; counts must fit an int. */
  {
    struct layout big = layout_of(&b, o.max_bytes);
    /* The v-variants' displacements reach the whole buffer. */
    bool vee = o.coll->id == C_ALLGATHERV || o.coll->id == C_ALLTOALLV;
    int bad = big.count > (size_t)INT32_MAX ||
              (vee && (big.send_elems > (size_t)INT32_MAX ||
                       big.recv_elems > (size_t)INT32_MAX));
    b.counts = malloc((size_t)b.p * sizeof *b.counts);
    b.displs = malloc((size_t)b.p * sizeof *b.displs);
    b.send = alloc_buffer(big.send_elems);
    b.recv = alloc_buffer(big.recv_elems);
    /* --overlap keeps S_COUNT series per row, its probe OV_PROBE_ITERS. */
    size_t n_times = o.overlap ? S_COUNT * (size_t)o.iters : (size_t)o.iters;
    if (n_times < OV_PROBE_ITERS)
      n_times = OV_PROBE_ITERS;
    b.times = malloc(n_times * sizeof *b.times);
    int failed = bad || b.send == NULL || b.recv == NULL ||
                 b.times == NULL || b.counts == NULL || b.displs == NULL;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (failed) {
      if (b.rank == 0)
        fprintf(stderr, PROG ": cannot allocate the buffers for %zu B\n",
                o.max_bytes);
      MPI_Finalize();
      return EXIT_WRONG;
    }
  }

  if (b.rank == 0 && !o.json) {
    MPI_Get_version(&version, &subversion);
    MPI_Get_library_version(libname, &liblen);
    libname[strcspn(libname, "\n")] = '\0';
    printf("# " PROG ": %s%s, p = %d, float sum, iters %d, warmup %d, "
           "check %s\n# %s (MPI %d.%d)\n#\n",
           o.coll->name, o.overlap ? " overlap" : "", b.p, o.iters, o.warmup,
           o.check ? "yes" : "no", libname, version, subversion);
    if (o.overlap)
      printf("# %10s  %12s  %12s  %5s  %10s  %10s  %10s  %8s  %10s  %6s  %5s"
             "  %5s\n",
             "size(B)", "count", "lib", "work", "t_comm(us)", "t_work(us)",
             "t_over(us)", "overlap", "t_nb(us)", "#wrong", "iters", "tries");
    else
      printf("# %10s  %12s  %6s  %5s  %12s  %4s  %10s  %8s  %8s  %6s  %5s\n",
             "size(B)", "count", "type", "redop", "lib", "root", "time(us)",
             "algbw", "busbw", "#wrong", "iters");
    fflush(stdout);
  }

  for (size_t s = o.min_bytes;;) {
    struct layout l = layout_of(&b, s);
    double t;
    int iters;
    uint64_t wrong;
    fill_inputs(&b, &l);
    if (o.overlap) {
      wrong = run_overlap_size(&b, &l);
    } else {
      wrong = run_row(&b, &l, &t, &iters);
      if (b.rank == 0)
        print_row(&b, &l, t, wrong, iters);
    }
    if (wrong != 0)
      any_wrong = 1;
    if (o.factor != 0) {
      if (s > o.max_bytes / o.factor)
        break;
      s *= o.factor;
    } else {
      if (s > o.max_bytes - o.step)
        break;
      s += o.step;
    }
    if (s == 0)
      break;
  }

  free(b.send);
  free(b.recv);
  free(b.times);
  free(b.counts);
  free(b.displs);
  MPI_Finalize();
  return any_wrong ? EXIT_WRONG : 0;
}
