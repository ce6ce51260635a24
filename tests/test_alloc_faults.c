/* Allocation failures (src/base/alloc.h): the hook fails the Nth
 * allocation from now, and a call is run with N = 1, 2, 3, ... until it
 * makes fewer than N allocations and succeeds untouched. At every N the
 * call must fail cleanly:
 *
 *   - the builders (every registry row x collective, flat and on hosts):
 *     CRNET_ENOMEM, and the schedule left empty (nothing leaks);
 *   - crnet_comm_init, in a job of one: CRNET_ENOMEM with a reason, no comm,
 *     and the next init works;
 *   - the collectives, split and dup, in a job of one (suite unit) and in a
 *     job of 3 forked ranks where one rank's allocations fail (suite net).
 *
 * What "cleanly" means for a call depends on where the failure hits, and
 * the test accepts exactly these outcomes:
 *   1. before the call is numbered (arguments, counts, schedule, request,
 *      scratch): CRNET_ENOMEM, the comm not failed, no sequence number
 *      taken, the receive buffer not written. The call did not happen on
 *      this rank: the other ranks wait in it, and when this rank calls again
 *      (as a program that freed memory would) everyone completes it;
 *   2. a failure the call works around (a cache or a memo it does without):
 *      success and the right result;
 *   3. after the call began (its frames may be on the wire): the comm fails
 *      on this rank with CRNET_ENOMEM and "out of memory" in its message,
 *      and every other rank's call fails too (never hangs), naming the
 *      failure. The job is over; the test starts a new one at N + 1.
 * After 1 and 2 a following allreduce must give the right answer on every
 * rank. With the sanitizers (the ASan pass runs every test) each rank also
 * checks for leaks once its comm is destroyed: forked ranks end with
 * _exit, where LeakSanitizer would not look.
 *
 *   ./test_alloc_faults        suite 'unit'
 *   ./test_alloc_faults net    suite 'net'
 */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "check_main.h"
#include "comm.h"
#include "crnet.h"
#include "netjob.h"
#include "select.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* No call makes this many allocations: a loop that gets here is stuck. */
#define MAX_N 10000

/* Leaks so far (LeakSanitizer's report on stderr), or false without it. */
static bool leaks_found(void) {
#ifdef HAVE_LSAN
  return __lsan_do_recoverable_leak_check() != 0;
#else
  return false;
#endif
}

static long failures_before;

static void arm(long n) {
  failures_before = crnet__alloc_failures();
  crnet__alloc_fail_after(n);
}

/* Disarms the hook; true if it failed an allocation since arm(). */
static bool disarm(void) {
  crnet__alloc_fail_after(0);
  return crnet__alloc_failures() > failures_before;
}

/* --- the builders ----------------------------------------------------------- */

static const crnet_collective built_colls[] = {
    CRNET_COLL_ALLREDUCE, CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_ALLGATHER,
    CRNET_COLL_ALLTOALL,  CRNET_COLL_BCAST,          CRNET_COLL_REDUCE,
    CRNET_COLL_SCAN,      CRNET_COLL_BARRIER,        CRNET_COLL_GATHER,
    CRNET_COLL_SCATTER};

/* A call of coll at p for rank, as the entry points fill it; host: a
 * layout of nhosts hosts, or NULL. */
static crnet__call make_call(crnet_collective coll, int32_t p, int32_t rank,
                             const uint64_t *counts, const int32_t *host,
                             int32_t nhosts) {
  crnet__call call = {.coll = coll, .p = p, .rank = rank, .count = 1000,
                      .commutative = true, .esize = 8, .root = p / 2,
                      .host = host, .nhosts = nhosts};
  if (coll == CRNET_COLL_REDUCE_SCATTER || coll == CRNET_COLL_ALLGATHER)
    call.counts = counts;
  if (coll == CRNET_COLL_GATHER || coll == CRNET_COLL_SCATTER) {
    call.count = 3;
    call.counts = counts + p; /* p threes */
    call.uniform = true;
  }
  if (coll == CRNET_COLL_ALLTOALL)
    call.count = 5;
  return call;
}

/* Every row that can do the call, built under the hook until it builds:
 * each failure must be CRNET_ENOMEM with the schedule freed. Returns the
 * builds run. */
static int build_all(const crnet__call *call, const char *what) {
  int builds = 0;
  for (size_t i = 0; crnet__schedule_name(i) != NULL; i++) {
    const char *name = crnet__schedule_name(i), *chosen;
    uint32_t id;
    char why[256];
    long n;
    if (!crnet__schedule_known(name, call->coll) ||
        crnet__select(name, call, &chosen, &id, why, sizeof why) != 0)
      continue;
    for (n = 1; n < MAX_N; n++) {
      crnet__schedule s;
      bool fired;
      int rc;
      memset(&s, 0, sizeof s);
      arm(n);
      rc = crnet__build(name, call, &s);
      fired = disarm();
      builds++;
      if (!fired) {
        ck_assert_msg(rc == 0, "%s, %s: built unhindered: %s", what, name,
                      crnet_err_name(rc));
        crnet__sched_free(&s);
        break;
      }
      ck_assert_msg(rc == CRNET_ENOMEM,
                    "%s, %s: allocation %ld failed, the build returned %s",
                    what, name, n, crnet_err_name(rc));
      ck_assert_msg(s.rounds == NULL && s.segs == NULL && s.steps == NULL,
                    "%s, %s: allocation %ld failed and the schedule kept "
                    "memory",
                    what, name, n);
    }
    ck_assert_msg(n < MAX_N, "%s, %s: still allocating after %d", what, name,
                  MAX_N);
  }
  return builds;
}

START_TEST(builders) {
  enum { PMAX = 10 };
  /* counts: reduce-scatter's uneven blocks, then p threes */
  uint64_t counts[2 * PMAX];
  static const int32_t hosts[PMAX] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
  int builds = 0;
  for (int r = 0; r < PMAX; r++) {
    counts[r] = (uint64_t)(r % 3) * 7 + 1;
    counts[PMAX + r] = 3;
  }
  for (size_t ci = 0; ci < sizeof built_colls / sizeof built_colls[0]; ci++) {
    const struct {
      int32_t p, rank;
      const int32_t *host;
      int32_t nhosts;
    } shapes[] = {{7, 0, NULL, 0}, {7, 4, NULL, 0}, {8, 5, NULL, 0},
                  {PMAX, 4, hosts, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
      uint64_t *cs = counts;
      char what[96];
      crnet__call call;
      /* make_call takes the threes at counts + p */
      if (shapes[k].p != PMAX)
        cs = counts + PMAX - shapes[k].p;
      call = make_call(built_colls[ci], shapes[k].p, shapes[k].rank, cs,
                       shapes[k].host, shapes[k].nhosts);
      snprintf(what, sizeof what, "%s at p = %d, rank %d%s",
               crnet_collective_name(built_colls[ci]), shapes[k].p,
               shapes[k].rank, shapes[k].host != NULL ? " on 3 hosts" : "");
      builds += build_all(&call, what);
    }
  }
  ck_assert_int_gt(builds, 100);
  ck_assert_msg(!leaks_found(), "the builders leaked (report above)");
}
END_TEST

/* auto's choice prices every candidate, which may allocate: it fails with
 * CRNET_ENOMEM or chooses, never chooses wrong. */
START_TEST(auto_choice) {
  uint64_t counts[16]; /* p blocks, then p threes (make_call) */
  for (int r = 0; r < 16; r++)
    counts[r] = r < 8 ? (uint64_t)r * 5 : 3;
  for (size_t ci = 0; ci < sizeof built_colls / sizeof built_colls[0]; ci++) {
    crnet__call call = make_call(built_colls[ci], 8, 3, counts, NULL, 0);
    const char *want, *name;
    uint32_t want_id, id;
    char why[256];
    long n;
    ck_assert_int_eq(crnet__select("auto", &call, &want, &want_id, why,
                                   sizeof why),
                     0);
    for (n = 1; n < MAX_N; n++) {
      int rc;
      bool fired;
      arm(n);
      rc = crnet__select("auto", &call, &name, &id, why, sizeof why);
      fired = disarm();
      ck_assert_msg(rc == 0 || (fired && rc == CRNET_ENOMEM),
                    "auto for %s, allocation %ld failing: %s",
                    crnet_collective_name(built_colls[ci]), n,
                    crnet_err_name(rc));
      if (rc == 0)
        ck_assert_msg(strcmp(name, want) == 0 && id == want_id,
                      "auto for %s chose %s with allocation %ld failing, "
                      "%s without",
                      crnet_collective_name(built_colls[ci]), name, n, want);
      if (!fired)
        break;
    }
    ck_assert_int_lt(n, MAX_N);
  }
}
END_TEST

/* --- calls on a comm ---------------------------------------------------------
 *
 * Each operation makes one call on the comm with rank x's input depending
 * on x and the iteration `it` (whose parity also changes the count, so
 * that the comm's memo of the last schedule does not hide the builder),
 * and says whether the result is right and, when it failed, whether the
 * output is as it was. */

typedef struct op_result {
  int rc;
  bool right;     /* rc == 0 and the result is the expected one */
  bool untouched; /* the output buffer still holds what it held before */
  /* split, dup: the new comm, checked (check_new_comm) once the hook is
   * disarmed, with the members it should have */
  crnet_comm *made;
  int members;
} op_result;

typedef void op_fn(crnet_comm *c, int it, op_result *out);

#define FILL INT64_C(-7777777)
#define BIG 40000 /* elements: a receive reduced as it lands */

static int64_t value(int rank, int64_t e, int it) {
  return (int64_t)(rank + 1) * 1000 + e + it;
}

static int64_t sum_over(int p, int64_t e, int it) {
  int64_t s = 0;
  for (int r = 0; r < p; r++)
    s += value(r, e, it);
  return s;
}

static bool all_fill(const int64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i] != FILL)
      return false;
  return true;
}

static void fill(int64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    v[i] = FILL;
}

static void op_allreduce_n(crnet_comm *c, int it, op_result *o, size_t n) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  int64_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
  ck_assert(in != NULL && out != NULL);
  for (size_t e = 0; e < n; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, n);
  o->rc = crnet_allreduce(c, in, out, n, CRNET_INT64, CRNET_SUM);
  o->right = o->rc == 0;
  for (size_t e = 0; e < n && o->right; e++)
    o->right = out[e] == sum_over(p, (int64_t)e, it);
  o->untouched = all_fill(out, n);
  free(in);
  free(out);
}

static void op_allreduce(crnet_comm *c, int it, op_result *o) {
  op_allreduce_n(c, it, o, 5 + (size_t)(it & 1));
}

static void op_allreduce_big(crnet_comm *c, int it, op_result *o) {
  op_allreduce_n(c, it, o, BIG + (size_t)(it & 1));
}

static void op_iallreduce(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  int64_t in[3], out[3];
  crnet_request *r = NULL;
  for (int e = 0; e < 3; e++)
    in[e] = value(me, e, it);
  fill(out, 3);
  o->rc = crnet_iallreduce(c, in, out, 2 + (size_t)(it & 1), CRNET_INT64,
                           CRNET_SUM, &r);
  if (o->rc == 0)
    o->rc = crnet_wait(&r);
  o->right = o->rc == 0 && out[0] == sum_over(p, 0, it) &&
             out[1] == sum_over(p, 1, it);
  o->untouched = all_fill(out, 3);
}

static void op_reduce_scatter(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  size_t counts[MAX_RANKS], total = 0, at = 0;
  int64_t in[64], out[16];
  for (int r = 0; r < p; r++) {
    counts[r] = (size_t)(r + 1 + (it & 1));
    if (r < me)
      at += counts[r];
    total += counts[r];
  }
  for (size_t e = 0; e < total; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, 16);
  o->rc = crnet_reduce_scatter(c, in, out, counts, CRNET_INT64, CRNET_SUM);
  o->right = o->rc == 0;
  for (size_t e = 0; e < counts[me] && o->right; e++)
    o->right = out[e] == sum_over(p, (int64_t)(at + e), it);
  o->untouched = all_fill(out, 16);
}

/* Displacements in reverse rank order with gaps: the result is unpacked. */
static void op_allgatherv(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  size_t counts[MAX_RANKS], displs[MAX_RANKS], at = 1;
  int64_t in[8], out[96];
  for (int r = p - 1; r >= 0; r--) {
    counts[r] = (size_t)(1 + r % 3 + (it & 1));
    displs[r] = at;
    at += counts[r] + 2;
  }
  for (size_t e = 0; e < counts[me]; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, 96);
  o->rc = crnet_allgatherv(c, in, counts[me], out, counts, displs,
                           CRNET_INT64);
  o->right = o->rc == 0;
  for (int r = 0; r < p && o->right; r++)
    for (size_t e = 0; e < counts[r]; e++)
      o->right = o->right && out[displs[r] + e] == value(r, (int64_t)e, it);
  o->untouched = all_fill(out, 96);
}

static void op_alltoall(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  size_t n = 1 + (size_t)(it & 1);
  int64_t in[2 * MAX_RANKS], out[2 * MAX_RANKS];
  for (int r = 0; r < p; r++)
    for (size_t e = 0; e < n; e++)
      in[(size_t)r * n + e] = value(me, r * 10 + (int64_t)e, it);
  fill(out, 2 * MAX_RANKS);
  o->rc = crnet_alltoall(c, in, out, n, CRNET_INT64);
  o->right = o->rc == 0;
  for (int r = 0; r < p && o->right; r++)
    for (size_t e = 0; e < n; e++)
      o->right = o->right &&
                 out[(size_t)r * n + e] == value(r, me * 10 + (int64_t)e, it);
  o->untouched = all_fill(out, 2 * MAX_RANKS);
}

static void op_bcast(crnet_comm *c, int it, op_result *o) {
  int me = crnet_comm_rank(c);
  int64_t buf[4];
  size_t n = 3 + (size_t)(it & 1);
  for (size_t e = 0; e < 4; e++)
    buf[e] = me == 0 ? value(0, (int64_t)e, it) : FILL;
  o->rc = crnet_bcast(c, buf, n, CRNET_INT64, 0);
  o->right = o->rc == 0;
  for (size_t e = 0; e < n && o->right; e++)
    o->right = buf[e] == value(0, (int64_t)e, it);
  o->untouched = me == 0 || all_fill(buf, 4);
}

static void op_reduce(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c), root = p - 1;
  int64_t in[4], out[4];
  size_t n = 3 + (size_t)(it & 1);
  for (size_t e = 0; e < 4; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, 4);
  o->rc = crnet_reduce(c, in, out, n, CRNET_INT64, CRNET_SUM, root);
  o->right = o->rc == 0;
  for (size_t e = 0; e < n && o->right && me == root; e++)
    o->right = out[e] == sum_over(p, (int64_t)e, it);
  o->untouched = all_fill(out, 4);
}

static void op_scan(crnet_comm *c, int it, op_result *o) {
  int me = crnet_comm_rank(c);
  int64_t in[4], out[4];
  size_t n = 3 + (size_t)(it & 1);
  for (size_t e = 0; e < 4; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, 4);
  o->rc = crnet_scan(c, in, out, n, CRNET_INT64, CRNET_SUM);
  o->right = o->rc == 0;
  for (size_t e = 0; e < n && o->right; e++)
    o->right = out[e] == sum_over(me + 1, (int64_t)e, it);
  o->untouched = all_fill(out, 4);
}

static void op_gather(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  size_t n = 1 + (size_t)(it & 1);
  int64_t in[2], out[2 * MAX_RANKS];
  for (size_t e = 0; e < n; e++)
    in[e] = value(me, (int64_t)e, it);
  fill(out, 2 * MAX_RANKS);
  o->rc = crnet_gather(c, in, out, n, CRNET_INT64, 0);
  o->right = o->rc == 0;
  for (int r = 0; r < p && o->right && me == 0; r++)
    for (size_t e = 0; e < n; e++)
      o->right = o->right && out[(size_t)r * n + e] == value(r, (int64_t)e, it);
  o->untouched = all_fill(out, 2 * MAX_RANKS);
}

static void op_barrier(crnet_comm *c, int it, op_result *o) {
  (void)it;
  o->rc = crnet_barrier(c);
  o->right = o->rc == 0;
  o->untouched = true;
}

/* The new comm of a split or dup must compute over its members, and is
 * destroyed. */
static void check_new_comm(int it, op_result *o) {
  crnet_comm *nc = o->made;
  int members = o->members;
  int64_t in = it, out = -1;
  o->made = NULL;
  if (!o->right)
    return;
  o->right = crnet_comm_size(nc) == members &&
             crnet_allreduce(nc, &in, &out, 1, CRNET_INT64, CRNET_SUM) == 0 &&
             out == (int64_t)it * members;
  if (!o->right)
    fprintf(stderr, "the new comm: size %d (want %d), allreduce %" PRId64
                    ": %s\n",
            crnet_comm_size(nc), members, out, crnet_comm_errmsg(nc));
  ck_assert_int_eq(crnet_comm_destroy(nc), 0);
}

static void op_split(crnet_comm *c, int it, op_result *o) {
  int p = crnet_comm_size(c), me = crnet_comm_rank(c);
  crnet_comm *nc = NULL;
  (void)it;
  o->rc = crnet_comm_split(c, me % 2, -me, &nc);
  o->made = nc;
  o->members = me % 2 == 0 ? (p + 1) / 2 : p / 2;
  o->untouched = nc == NULL;
  o->right = o->rc == 0 && nc != NULL;
}

static void op_dup(crnet_comm *c, int it, op_result *o) {
  crnet_comm *nc = NULL;
  (void)it;
  o->rc = crnet_comm_dup(c, &nc);
  o->made = nc;
  o->members = crnet_comm_size(c);
  o->untouched = nc == NULL;
  o->right = o->rc == 0 && nc != NULL;
}

typedef struct fault_case {
  const char *name;
  op_fn *fn;
  int victim; /* the rank whose allocations fail */
  /* Only in a job of one: dup is split's code with one color, and a job
   * of ranks checking their leaks costs a fair part of a second under
   * the sanitizers. */
  bool alone;
} fault_case;

static const fault_case cases[] = {
    {"allreduce", op_allreduce, 1, false},
    {"allreduce (large)", op_allreduce_big, 1, false},
    {"iallreduce", op_iallreduce, 1, false},
    {"reduce_scatter", op_reduce_scatter, 1, false},
    {"allgatherv", op_allgatherv, 1, false},
    {"alltoall", op_alltoall, 1, false},
    {"bcast", op_bcast, 1, false},
    {"bcast (at the root)", op_bcast, 0, false},
    {"reduce", op_reduce, 1, false},
    {"scan", op_scan, 1, false},
    {"gather", op_gather, 1, false},
    {"barrier", op_barrier, 1, false},
    {"split", op_split, 1, false},
    {"dup", op_dup, 1, true},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* What the ranks of a job tell the test, in memory shared with it. */
typedef struct progress {
  int start;    /* the N the job begins with */
  int next;     /* the N the next job begins with (after a failed comm) */
  int done;     /* the victim's call ran without meeting the failure */
  int clean;    /* outcome 1 (see the top), over the case */
  int survived; /* outcome 2 */
  int failed;   /* outcome 3 (jobs that ended with a failed comm) */
  int last;     /* the N at which the victim's call ran untouched */
} progress;

static progress *shared_progress(void) {
  static progress *p;
  if (p == NULL) {
    void *m = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(m != MAP_FAILED);
    p = m;
  }
  return p;
}

#define RANK_FAIL(...)                                                         \
  do {                                                                         \
    fprintf(stderr, "%s, N = %d, rank %d: ", k->name, n, me);                  \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    return EXIT_FAIL;                                                          \
  } while (0)

static void call_unarmed(crnet_comm *c, const fault_case *k, int it,
                         op_result *o) {
  o->made = NULL;
  k->fn(c, it, o);
  if (o->made != NULL)
    check_new_comm(it, o);
}

/* The loop of one job: N from pr->start until the victim's call succeeds
 * without meeting the failure, or the comm fails (outcome 3). Returns an
 * exit status. */
static int fault_loop(crnet_comm *c, const fault_case *k, progress *pr) {
  int me = crnet_comm_rank(c), p = crnet_comm_size(c), n = pr->start;
  int victim = k->victim < p ? k->victim : 0;
  op_result o;
  /* A first call, unarmed. Another rank may be past it already and fail
   * the comm in the loop: then this one fails too (outcome 3). */
  op_allreduce(c, 0, &o);
  if (o.rc != 0 && (me == victim || c->err == 0))
    RANK_FAIL("the first allreduce: %s", crnet_err_name(o.rc));
  if (o.rc == 0 && !o.right)
    RANK_FAIL("the first allreduce: wrong result");
  for (; n < MAX_N && o.rc == 0; n++) {
    uint64_t seq0 = c->seq_issued;
    bool fired = false;
    int64_t v[2];
    if (me == victim)
      arm(n);
    o.made = NULL;
    k->fn(c, n, &o);
    if (me == victim)
      fired = disarm();
    if (o.made != NULL)
      check_new_comm(n, &o);
    if (o.rc == 0 && !o.right)
      RANK_FAIL("wrong result (allocation failed: %d)", fired);
    if (o.rc != 0 && c->err != 0)
      break; /* outcome 3 */
    if (o.rc != 0) {
      /* Outcome 1, or a failure the test does not accept: the call began
       * (took a sequence number) and failed here alone, leaving the
       * others in it, or failed where no allocation did. */
      if (o.rc != CRNET_ENOMEM || me != victim || !fired ||
          c->seq_issued != seq0)
        RANK_FAIL("%s on a comm that has not failed (allocation failed: "
                  "%d, sequence %" PRIu64 " -> %" PRIu64 "): %s",
                  crnet_err_name(o.rc), fired, seq0, c->seq_issued,
                  crnet_comm_errmsg(c));
      if (!o.untouched)
        RANK_FAIL("CRNET_ENOMEM, and the output was written");
      /* The call did not happen here, and the others wait in it. */
      call_unarmed(c, k, n, &o);
      if (o.rc != 0 || !o.right)
        RANK_FAIL("called again: %s, %s: %s", crnet_err_name(o.rc),
                  o.right ? "right" : "wrong", crnet_comm_errmsg(c));
      pr->clean++;
    } else if (fired) {
      pr->survived++; /* outcome 2 */
    }
    v[0] = me == victim && !fired; /* the last N */
    v[1] = me + n;
    o.rc = crnet_allreduce(c, CRNET_IN_PLACE, v, 2, CRNET_INT64, CRNET_SUM);
    if (o.rc != 0 && c->err != 0)
      break; /* outcome 3, seen after the call */
    if (o.rc != 0 || v[1] != (int64_t)p * (p - 1) / 2 + (int64_t)p * n)
      RANK_FAIL("the allreduce after: %s, %" PRId64, crnet_err_name(o.rc),
                v[1]);
    if (v[0] != 0) {
      if (me == victim) {
        pr->last = n;
        pr->done = 1;
      }
      return EXIT_OK;
    }
  }
  if (n >= MAX_N)
    RANK_FAIL("still allocating after %d", MAX_N);
  if (c->err == 0)
    RANK_FAIL("left the loop, and the comm has not failed");
  /* Outcome 3: failed, with a reason; where the failure was ours, it was
   * the memory. */
  if (me == victim) {
    if (c->err != CRNET_ENOMEM || strstr(crnet_comm_errmsg(c), "memory") == NULL)
      RANK_FAIL("the comm failed with %s: '%s', not for the memory",
                crnet_err_name(c->err), crnet_comm_errmsg(c));
    pr->next = n + 1;
    pr->failed++;
  } else if (strstr(crnet_comm_errmsg(c), "memory") == NULL) {
    RANK_FAIL("the comm failed with %s: '%s', which does not say it was the "
              "memory",
              crnet_err_name(c->err), crnet_comm_errmsg(c));
  }
  if (getenv("ALLOC_FAULTS_VERBOSE") != NULL)
    fprintf(stderr, "%s, N = %d, rank %d: %s: %s\n", k->name, n, me,
            crnet_err_name(c->err), crnet_comm_errmsg(c));
  return EXIT_OK;
}

/* A rank of the job (or the job of one): init, a first allreduce, the
 * loop, destroy, and a leak check. */
static int fault_rank(int rank, int size, void *arg) {
  const fault_case *k = arg;
  progress *pr = shared_progress();
  crnet_comm *c;
  int n = pr->start, me = rank, rc;
  (void)size;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    RANK_FAIL("init: %s: %s", crnet_err_name(rc), crnet_init_errmsg());
  rc = fault_loop(c, k, pr);
  crnet_comm_destroy(c);
  if (rc == EXIT_OK && leaks_found())
    RANK_FAIL("leaks after destroy (report above)");
  return rc;
}

/* Every case, N from 1 until the victim's call succeeds untouched, in
 * jobs of `size` (1: in this process). */
static void run_cases(int size) {
  progress *pr = shared_progress();
  for (size_t i = 0; i < NCASES; i++) {
    int jobs = 0;
    if (cases[i].alone && size > 1)
      continue;
    memset(pr, 0, sizeof *pr);
    pr->start = 1;
    while (!pr->done) {
      ck_assert_msg(++jobs <= 400, "%s: more than 400 jobs", cases[i].name);
      pr->next = 0;
      if (size == 1) {
        ck_assert_msg(fault_rank(0, 1, (void *)&cases[i]) == EXIT_OK,
                      "%s, from N = %d: failed (see above)", cases[i].name,
                      pr->start);
      } else {
        job j;
        job_init(&j, size, 20);
        run_job(&j, fault_rank, (void *)&cases[i], 60);
        expect_all_ok(&j, cases[i].name);
      }
      if (!pr->done) {
        ck_assert_msg(pr->next > pr->start,
                      "%s: the job from N = %d ended without finishing",
                      cases[i].name, pr->start);
        pr->start = pr->next;
      }
    }
    fprintf(stderr,
            "%-20s p = %d: %d jobs, up to N = %d: %d clean failures, %d "
            "worked around, %d comms failed\n",
            cases[i].name, size, jobs, pr->last, pr->clean, pr->survived,
            pr->failed);
  }
}

static void singleton_env(void) {
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
}

START_TEST(calls_in_a_job_of_one) {
  singleton_env();
  run_cases(1);
}
END_TEST

/* crnet_comm_init in a job of one: every failure is CRNET_ENOMEM with a
 * reason and no comm, and leaves nothing behind that stops the next init. */
START_TEST(init_in_a_job_of_one) {
  long n;
  singleton_env();
  for (n = 1; n < MAX_N; n++) {
    crnet_comm *c = NULL;
    bool fired;
    int rc;
    arm(n);
    rc = crnet_comm_init(&c, NULL);
    fired = disarm();
    if (rc == 0) {
      op_result o;
      op_allreduce(c, (int)n, &o);
      ck_assert_msg(o.right, "N = %ld: the comm made computes wrong: %s", n,
                    crnet_err_name(o.rc));
      ck_assert_int_eq(crnet_comm_destroy(c), 0);
      if (!fired)
        break;
      continue;
    }
    ck_assert_msg(fired && rc == CRNET_ENOMEM,
                  "N = %ld: init returned %s (allocation failed: %d): %s", n,
                  crnet_err_name(rc), fired, crnet_init_errmsg());
    ck_assert_msg(c == NULL, "N = %ld: a failed init set the comm", n);
    ck_assert_msg(crnet_init_errmsg()[0] != '\0',
                  "N = %ld: a failed init gave no reason", n);
  }
  ck_assert_int_lt(n, MAX_N);
  ck_assert_msg(n > 3, "init made only %ld allocations", n - 1);
  ck_assert_msg(!leaks_found(), "init leaked (report above)");
}
END_TEST

START_TEST(calls_in_a_job_of_three) { run_cases(3); }
END_TEST

int main(int argc, char **argv) {
  bool net = argc > 1 && strcmp(argv[1], "net") == 0;
  Suite *s = suite_create(net ? "alloc-faults-net" : "alloc-faults");
  TCase *t = tcase_create(net ? "net" : "unit");
  tcase_set_timeout(t, net ? 280 : 110);
  if (net) {
    tcase_add_test(t, calls_in_a_job_of_three);
  } else {
    tcase_add_test(t, builders);
    tcase_add_test(t, auto_choice);
    tcase_add_test(t, init_in_a_job_of_one);
    tcase_add_test(t, calls_in_a_job_of_one);
  }
  suite_add_tcase(s, t);
  return check_run(s);
}
