/* board_check: small blocking collectives on one host go through the
 * shared-memory boards (docs/ARCHITECTURE.md, "Boards"), and what can go
 * wrong there ends as it does elsewhere.
 *
 *   crlaunch -n P ./board_check MODE
 *
 * MODE:
 *   use       the calls that should take the boards do (their
 *             crnet_comm_last_schedule says "board" once the ranks agreed),
 *             those that should not do not, on the world comm, a dup and
 *             the halves of a split, and every result is right
 *   nonblock  rank 0 calls a blocking allreduce where the others call a
 *             nonblocking one of the same shape: they match, as any
 *             blocking call matches its nonblocking twin in crnet
 *   named     the ranks but 0 choose the ring schedule for allreduce: rank
 *             0's board call meets their frames, CRNET_EMISMATCH everywhere
 *   count     rank 0 calls an allreduce of 3 ints, the others of 2: the same
 *   bigger    rank 0's allreduce is over the board's bytes, the others' under
 *   die       the last rank exits before an allreduce: the others fail with
 *             CRNET_EPEER (or CRNET_EABORTED, relayed)
 *   die-nb    the same with nonblocking board calls in flight (a bcast, an
 *             allreduce, a barrier), waited for together
 *   die-dup   the last rank exits before crnet_comm_dup, whose agreement on
 *             the boards is the new comm's first call: the others' dup, or
 *             their first call on the new comm, fails; none hangs
 *   interleave  board calls with nonblocking calls between them, the ranks
 *             at different paces (run it with more ranks than cores): a
 *             cell is never rewritten before a slow peer has read it
 *   threads   three threads, each on a comm of its own, blocking and
 *             nonblocking board calls at once: a call waiting with the loop
 *             held must not hold back another thread's, which a peer's call
 *             may wait for (the ranks' threads run in different orders)
 *   rooted    bcast, reduce and scan (which wait for some peers only: a
 *             bcast's root for nobody) in a row without a barrier, blocking
 *             and nonblocking, from every root, the ranks at different
 *             paces: the next board call must wait for the posts the last
 *             did not, or a root would rewrite a cell still being read
 *   roots     ranks 0 and 1 both call bcast as its root (rank 1 alone
 *             is wrong), then a barrier: nobody waits for the other in the
 *             bcast, so the barrier fails everywhere with CRNET_EMISMATCH
 *   sleep     rank 0 computes 400 ms before a barrier: the others wait in it
 *             and must not use more than half of that time of CPU; then the
 *             last rank computes before a bcast from rank 0, and the others,
 *             through with the bcast, wait in a barrier for its post
 * With "off" after MODE (use, interleave), no call may take the boards
 * (CRNET_TRANSPORT=tcp, CRNET_SHM_BOARD_BYTES=0) and every result holds.
 * Every mode prints "board_check MODE: ok" on rank 0 and exits 0. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "crnet.h"

static int me, p;
/* "off" as the second argument: no call may take the boards
 * (CRNET_TRANSPORT=tcp, CRNET_SHM_BOARD_BYTES=0), every result the same. */
static bool boards_on = true;

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "board_check rank %d: ", me);                              \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)

#define CHECK(call)                                                            \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != 0)                                                              \
      FAIL("%s: %s", #call, crnet_strerror(rc_));                              \
  } while (0)

static void expect_schedule(crnet_comm *c, crnet_collective coll,
                            const char *want) {
  if (!boards_on)
    want = "other";
  const char *got = crnet_comm_last_schedule(c, coll);
  if (got == NULL ||
      (strcmp(want, "board") == 0) != (strcmp(got, "board") == 0))
    FAIL("%s ran on %s, expected %s%s", crnet_collective_name(coll),
         got != NULL ? got : "nothing", strcmp(want, "board") ? "not " : "",
         "board");
}

/* A non-commutative, associative operator: pairs (a, b) are the maps
 * x -> a x + b, composed (in after inout), so the order shows. */
static void affine(const void *in, void *inout, size_t n, crnet_datatype dt,
                   void *arg) {
  const int64_t *f = in;
  int64_t *g = inout;
  (void)dt;
  (void)arg;
  for (size_t i = 0; i + 1 < n; i += 2) {
    int64_t a = f[i] * g[i], b = f[i] * g[i + 1] + f[i + 1];
    g[i] = a;
    g[i + 1] = b;
  }
}

/* Ranks 0..last's maps (r + 2, r + 1) composed in rank order. */
static void composed(int last, int64_t out[2]) {
  out[0] = 1;
  out[1] = 0;
  for (int k = 0; k <= last; k++) {
    out[1] = out[0] * (k + 1) + out[1];
    out[0] *= k + 2;
  }
}

/* Every collective the boards do, checked, on comm c; calls each at least
 * `rounds` times so that the ranks have agreed on the boards by the last. */
static void use_on(crnet_comm *c, crnet_op affine_op, int rounds) {
  int r = crnet_comm_rank(c), n = crnet_comm_size(c);
  for (int round = 0; round < rounds; round++) {
    int32_t v[64], out[64];
    for (int i = 0; i < 64; i++)
      v[i] = r * 1000 + i + round;
    CHECK(crnet_allreduce(c, v, out, 64, CRNET_INT32, CRNET_SUM));
    for (int i = 0; i < 64; i++)
      if (out[i] != 1000 * n * (n - 1) / 2 + n * (i + round))
        FAIL("allreduce[%d] = %d", i, (int)out[i]);
    int64_t x[2] = {r + 2, r + 1}, y[2] = {-1, -1}, want[2];
    CHECK(crnet_allreduce(c, x, y, 2, CRNET_INT64, affine_op));
    composed(n - 1, want);
    if (y[0] != want[0] || y[1] != want[1])
      FAIL("non-commutative allreduce = (%lld, %lld), expected (%lld, %lld)",
           (long long)y[0], (long long)y[1], (long long)want[0],
           (long long)want[1]);
    CHECK(crnet_scan(c, x, y, 2, CRNET_INT64, affine_op));
    composed(r, want);
    if (y[0] != want[0] || y[1] != want[1])
      FAIL("scan = (%lld, %lld), expected (%lld, %lld)", (long long)y[0],
           (long long)y[1], (long long)want[0], (long long)want[1]);
    int root = round % n;
    int32_t b[100];
    for (int i = 0; i < 100; i++)
      b[i] = r == root ? i * 7 + root : -1;
    CHECK(crnet_bcast(c, b, 100, CRNET_INT32, root));
    for (int i = 0; i < 100; i++)
      if (b[i] != i * 7 + root)
        FAIL("bcast[%d] = %d", i, (int)b[i]);
    int32_t red = -7;
    int32_t one = r + 1;
    CHECK(crnet_reduce(c, &one, &red, 1, CRNET_INT32, CRNET_SUM, root));
    if ((r == root && red != n * (n + 1) / 2) || (r != root && red != -7))
      FAIL("reduce at root %d: %d", root, (int)red);
    int32_t all[64 * 4];
    int32_t mine[4] = {r, r * 2, r * 3, round};
    CHECK(crnet_allgather(c, mine, all, 4, CRNET_INT32));
    for (int j = 0; j < n; j++)
      if (all[4 * j] != j || all[4 * j + 1] != 2 * j ||
          all[4 * j + 2] != 3 * j || all[4 * j + 3] != round)
        FAIL("allgather block %d", j);
    int32_t to[64 * 2], from[64 * 2];
    for (int j = 0; j < n; j++) {
      to[2 * j] = r * 100 + j;
      to[2 * j + 1] = round;
    }
    CHECK(crnet_alltoall(c, to, from, 2, CRNET_INT32));
    for (int j = 0; j < n; j++)
      if (from[2 * j] != j * 100 + r || from[2 * j + 1] != round)
        FAIL("alltoall block %d", j);
    CHECK(crnet_barrier(c));
  }
  crnet_collective board[] = {CRNET_COLL_ALLREDUCE, CRNET_COLL_SCAN,
                              CRNET_COLL_BCAST,     CRNET_COLL_REDUCE,
                              CRNET_COLL_ALLGATHER, CRNET_COLL_ALLTOALL,
                              CRNET_COLL_BARRIER};
  for (size_t k = 0; k < sizeof board / sizeof board[0]; k++)
    expect_schedule(c, board[k], "board");
  /* Nonblocking calls take the boards too, several in flight. */
  crnet_request *q[8];
  int32_t v = 1, s = 0, sums[6], bc[2] = {r, r};
  int32_t g[64];
  CHECK(crnet_iallreduce(c, &v, &s, 1, CRNET_INT32, CRNET_SUM, &q[0]));
  CHECK(crnet_ibcast(c, bc, 2, CRNET_INT32, n - 1, &q[1]));
  CHECK(crnet_iallgather(c, &v, g, 1, CRNET_INT32, &q[2]));
  CHECK(crnet_ibarrier(c, &q[3]));
  for (int k = 0; k < 4; k++) {
    sums[k] = r + k;
    CHECK(crnet_iallreduce(c, CRNET_IN_PLACE, &sums[k], 1, CRNET_INT32,
                           CRNET_MAX, &q[4 + k]));
  }
  CHECK(crnet_waitall(8, q));
  expect_schedule(c, CRNET_COLL_ALLREDUCE, "board");
  if (s != n || bc[0] != n - 1 || bc[1] != n - 1)
    FAIL("iallreduce = %d, ibcast = %d %d", (int)s, (int)bc[0], (int)bc[1]);
  for (int j = 0; j < n; j++)
    if (g[j] != 1)
      FAIL("iallgather[%d] = %d", j, (int)g[j]);
  for (int k = 0; k < 4; k++)
    if (sums[k] != n - 1 + k)
      FAIL("iallreduce %d in flight = %d", k, (int)sums[k]);
  /* Not on the boards: larger than the bytes, or a named schedule. */
  static int32_t big[4096], bigout[4096];
  CHECK(crnet_allreduce(c, big, bigout, 4096, CRNET_INT32, CRNET_SUM));
  expect_schedule(c, CRNET_COLL_ALLREDUCE, "other");
  CHECK(crnet_comm_set_schedule(c, CRNET_COLL_BCAST, "knomial"));
  CHECK(crnet_bcast(c, &v, 1, CRNET_INT32, 0));
  expect_schedule(c, CRNET_COLL_BCAST, "knomial");
  CHECK(crnet_comm_set_schedule(c, CRNET_COLL_BCAST, "auto"));
  CHECK(crnet_bcast(c, &v, 1, CRNET_INT32, 0));
  expect_schedule(c, CRNET_COLL_BCAST, "board");
}

static void mode_use(crnet_comm *w) {
  crnet_op affine_op;
  crnet_comm *d, *half;
  CHECK(crnet_op_create(&affine_op, affine, NULL, 0));
  use_on(w, affine_op, 12);
  CHECK(crnet_comm_dup(w, &d));
  use_on(d, affine_op, 12);
  CHECK(crnet_comm_split(w, me % 2, me, &half));
  if (crnet_comm_size(half) >= 2)
    use_on(half, affine_op, 12);
  CHECK(crnet_comm_destroy(half));
  /* A comm made after one was destroyed may get its context id: the slot
   * must start clean. */
  CHECK(crnet_comm_split(w, me % 2, p - me, &half));
  if (crnet_comm_size(half) >= 2)
    use_on(half, affine_op, 12);
  CHECK(crnet_comm_destroy(half));
  CHECK(crnet_comm_destroy(d));
  CHECK(crnet_op_free(&affine_op));
}

/* Calls that cannot match: the call must fail everywhere, in time. */
static void expect_mismatch(int rc, const char *what) {
  if (rc != CRNET_EMISMATCH && rc != CRNET_EABORTED)
    FAIL("%s returned %s, expected a mismatch", what, crnet_strerror(rc));
}

/* Rank r works a while now and then, a different rank each time, so that
 * roots run ahead of readers and readers ahead of roots. */
static void pace(int32_t i) {
  if ((i + me * 7) % 97 == 0) {
    struct timespec t = {0, 100 * 1000};
    nanosleep(&t, NULL);
  }
}

/* Rooted calls in a row (mode rooted): every root, blocking and
 * nonblocking, with a call on frames now and then. */
static void rooted(crnet_comm *w) {
  static int32_t t[2048], u[2048];
  for (int32_t i = 0; i < 3000; i++) {
    int root = i % p, other = (i / p + 1) % p;
    int32_t b[6], red = -1, one = me + i, sc = -1;
    crnet_request *q[3];
    pace(i);
    for (int k = 0; k < 6; k++)
      b[k] = me == root ? i * 6 + k : -1;
    if (i % 4 == me % 4) {
      CHECK(crnet_ibcast(w, b, 6, CRNET_INT32, root, &q[0]));
      CHECK(crnet_ireduce(w, &one, &red, 1, CRNET_INT32, CRNET_SUM, other,
                          &q[1]));
      CHECK(crnet_iscan(w, &one, &sc, 1, CRNET_INT32, CRNET_SUM, &q[2]));
      CHECK(crnet_waitall(3, q));
    } else {
      CHECK(crnet_bcast(w, b, 6, CRNET_INT32, root));
      CHECK(crnet_reduce(w, &one, &red, 1, CRNET_INT32, CRNET_SUM, other));
      CHECK(crnet_scan(w, &one, &sc, 1, CRNET_INT32, CRNET_SUM));
    }
    for (int k = 0; k < 6; k++)
      if (b[k] != i * 6 + k)
        FAIL("call %d: bcast from %d [%d] = %d", (int)i, root, k, (int)b[k]);
    if (me == other ? red != p * (p - 1) / 2 + p * i : red != -1)
      FAIL("call %d: reduce to %d = %d", (int)i, other, (int)red);
    if (sc != me * (me + 1) / 2 + (me + 1) * i)
      FAIL("call %d: scan = %d", (int)i, (int)sc);
    if (i % 100 == 0) { /* larger than the boards take: frames */
      t[0] = me + i;
      CHECK(crnet_allreduce(w, t, u, 2048, CRNET_INT32, CRNET_MAX));
      if (u[0] != p - 1 + i)
        FAIL("call %d: allreduce on frames = %d", (int)i, (int)u[0]);
    }
  }
  expect_schedule(w, CRNET_COLL_BCAST, "board");
  expect_schedule(w, CRNET_COLL_REDUCE, "board");
  expect_schedule(w, CRNET_COLL_SCAN, "board");
}

/* 40 allreduces on the boards; the first error. In the modes where a
 * call goes wrong after them, a rank a little behind may get that failure
 * (relayed by a rank that saw it) in its last one: any call after the
 * fault may fail, and must. */
static int warm_rc(crnet_comm *w) {
  int32_t v = 1, s;
  int rc = 0;
  for (int i = 0; i < 40 && rc == 0; i++)
    rc = crnet_allreduce(w, &v, &s, 1, CRNET_INT32, CRNET_SUM);
  if (rc == 0)
    expect_schedule(w, CRNET_COLL_ALLREDUCE, "board");
  return rc;
}

static void warm(crnet_comm *w) { CHECK(warm_rc(w)); }

/* Seconds of the clock, and of this process's CPU (user and system). */
static double wall_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_now(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
         (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

typedef struct worker {
  crnet_comm *c;
  int k;
  int failed;
} worker;

static void *work(void *arg) {
  worker *wk = arg;
  int n = crnet_comm_size(wk->c);
  for (int32_t i = 0; i < 2000 && !wk->failed; i++) {
    int32_t v[4] = {me + i, wk->k, i, 1}, s[4];
    crnet_request *q;
    int rc;
    /* The ranks' threads go at different paces: the order of the calls
     * across threads differs from rank to rank. */
    if ((i + me + wk->k) % 3 == 0) {
      rc = crnet_iallreduce(wk->c, v, s, 4, CRNET_INT32, CRNET_MAX, &q);
      if (rc == 0)
        rc = crnet_wait(&q);
    } else {
      rc = crnet_allreduce(wk->c, v, s, 4, CRNET_INT32, CRNET_MAX);
    }
    if (rc != 0 || s[0] != n - 1 + i || s[1] != wk->k || s[2] != i) {
      fprintf(stderr, "board_check rank %d: thread %d call %d: %s\n", me, wk->k,
              (int)i, rc != 0 ? crnet_strerror(rc) : "wrong result");
      wk->failed = 1;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  crnet_comm *w;
  const char *mode = argc > 1 ? argv[1] : "use";
  CHECK(crnet_comm_init(&w, NULL));
  boards_on = !(argc > 2 && strcmp(argv[2], "off") == 0);
  me = crnet_comm_rank(w);
  p = crnet_comm_size(w);
  if (strcmp(mode, "use") == 0) {
    mode_use(w);
  } else if (strcmp(mode, "nonblock") == 0) {
    warm(w);
    for (int32_t i = 0; i < 200; i++) {
      int32_t v = me + i, s = -1;
      if ((me + i) % 2 == 0) {
        CHECK(crnet_allreduce(w, &v, &s, 1, CRNET_INT32, CRNET_MAX));
      } else {
        crnet_request *q;
        CHECK(crnet_iallreduce(w, &v, &s, 1, CRNET_INT32, CRNET_MAX, &q));
        CHECK(crnet_wait(&q));
      }
      if (s != p - 1 + i)
        FAIL("call %d: %d", (int)i, (int)s);
    }
    expect_schedule(w, CRNET_COLL_ALLREDUCE, "board");
  } else if (strcmp(mode, "count") == 0 || strcmp(mode, "bigger") == 0 ||
             strcmp(mode, "named") == 0) {
    static int32_t v[8192], s[8192];
    int rc = warm_rc(w);
    if (rc == 0 && strcmp(mode, "named") == 0 && me != 0)
      CHECK(crnet_comm_set_schedule(w, CRNET_COLL_ALLREDUCE, "ring"));
    if (rc == 0) {
      size_t n = 1;
      if (strcmp(mode, "count") == 0)
        n = me == 0 ? 3 : 2;
      else if (strcmp(mode, "bigger") == 0)
        n = me == 0 ? 8192 : 2;
      rc = crnet_allreduce(w, v, s, n, CRNET_INT32, CRNET_SUM);
    }
    expect_mismatch(rc, mode);
    if (me == 0)
      printf("board_check %s: ok (%s)\n", mode, crnet_comm_errmsg(w));
    fflush(stdout);
    crnet_comm_destroy(w);
    return 0;
  } else if (strcmp(mode, "rooted") == 0) {
    warm(w);
    rooted(w);
  } else if (strcmp(mode, "roots") == 0) {
    int32_t b = me;
    int rc = warm_rc(w);
    if (rc == 0)
      rc = crnet_bcast(w, &b, 1, CRNET_INT32, me == 1 ? 1 : 0);
    if (rc == 0)
      rc = crnet_barrier(w);
    expect_mismatch(rc, "bcast from two roots, then a barrier");
    if (me == 0)
      printf("board_check %s: ok (%s)\n", mode, crnet_comm_errmsg(w));
    fflush(stdout);
    crnet_comm_destroy(w);
    return 0;
  } else if (strcmp(mode, "interleave") == 0) {
    warm(w);
    /* The call between is larger than the boards take: frames. */
    static int32_t t[2048], u[2048];
    for (int32_t i = 0; i < 3000; i++) {
      int32_t v[2] = {i, me}, s[2];
      crnet_request *q;
      t[0] = me + i;
      u[0] = -1;
      CHECK(crnet_allreduce(w, v, s, 2, CRNET_INT32, CRNET_MAX));
      CHECK(crnet_iallreduce(w, t, u, 2048, CRNET_INT32, CRNET_MAX, &q));
      v[0] = -i;
      CHECK(crnet_allreduce(w, v, s + 1, 1, CRNET_INT32, CRNET_MIN));
      if (s[0] != i || s[1] != -i)
        FAIL("call %d: %d and %d", (int)i, (int)s[0], (int)s[1]);
      CHECK(crnet_wait(&q));
      if (u[0] != p - 1 + i)
        FAIL("iallreduce %d: %d", (int)i, (int)u[0]);
    }
    expect_schedule(w, CRNET_COLL_ALLREDUCE, "board");
  } else if (strcmp(mode, "threads") == 0) {
    worker wk[3];
    pthread_t t[3];
    for (int k = 0; k < 3; k++) {
      wk[k].k = k;
      wk[k].failed = 0;
      CHECK(crnet_comm_dup(w, &wk[k].c));
    }
    for (int k = 0; k < 3; k++)
      if (pthread_create(&t[k], NULL, work, &wk[k]) != 0)
        FAIL("pthread_create");
    for (int k = 0; k < 3; k++)
      pthread_join(t[k], NULL);
    for (int k = 0; k < 3; k++) {
      if (wk[k].failed)
        FAIL("thread %d failed", k);
      expect_schedule(wk[k].c, CRNET_COLL_ALLREDUCE, "board");
      CHECK(crnet_comm_destroy(wk[k].c));
    }
  } else if (strcmp(mode, "die") == 0) {
    int32_t v = 1, s;
    int rc = warm_rc(w);
    if (me == p - 1)
      _exit(0);
    if (rc == 0)
      rc = crnet_allreduce(w, &v, &s, 1, CRNET_INT32, CRNET_SUM);
    if (rc != CRNET_EPEER && rc != CRNET_EABORTED)
      FAIL("allreduce with a dead peer returned %s", crnet_strerror(rc));
    if (me == 0)
      printf("board_check die: ok (%s)\n", crnet_comm_errmsg(w));
    fflush(stdout);
    crnet_comm_destroy(w);
    return 0;
  } else if (strcmp(mode, "die-nb") == 0 || strcmp(mode, "die-dup") == 0) {
    int32_t v = 1, s, b = 7;
    int rc = warm_rc(w);
    if (me == p - 1)
      _exit(0);
    if (rc != 0) {
      /* The loss came during the last allreduce: nothing more to do. */
    } else if (strcmp(mode, "die-nb") == 0) {
      crnet_request *q[3] = {NULL, NULL, NULL};
      int rcs[3];
      /* A start on a comm that has already failed returns its error. */
      rcs[0] = crnet_ibcast(w, &b, 1, CRNET_INT32, 0, &q[0]);
      rcs[1] = crnet_iallreduce(w, &v, &s, 1, CRNET_INT32, CRNET_SUM, &q[1]);
      rcs[2] = crnet_ibarrier(w, &q[2]);
      rc = 0;
      for (int k = 0; k < 3; k++) {
        if (rcs[k] == 0)
          rcs[k] = crnet_wait(&q[k]);
        if (rcs[k] != 0 && rc == 0)
          rc = rcs[k];
      }
      /* The bcast may complete first (its root waits for nobody, its
       * readers for rank 0): the others must not. */
      if (rcs[1] == 0 || rcs[2] == 0)
        FAIL("a call with a dead peer completed (%s, %s)",
             crnet_strerror(rcs[1]), crnet_strerror(rcs[2]));
    } else {
      crnet_comm *d = NULL;
      rc = crnet_comm_dup(w, &d);
      if (rc == 0) {
        rc = crnet_allreduce(d, &v, &s, 1, CRNET_INT32, CRNET_SUM);
        if (rc == 0)
          FAIL("an allreduce on a dup without the dead rank completed");
        crnet_comm_destroy(d);
      }
    }
    if (rc != CRNET_EPEER && rc != CRNET_EABORTED)
      FAIL("%s: returned %s", mode, crnet_strerror(rc));
    if (me == 0)
      printf("board_check %s: ok (%s)\n", mode, crnet_comm_errmsg(w));
    fflush(stdout);
    crnet_comm_destroy(w);
    return 0;
  } else if (strcmp(mode, "sleep") == 0) {
    warm(w);
    /* A blocking barrier, then a nonblocking one waited for (the engine's
     * sleep then announces it: board.h). */
    for (int form = 0; form < 2; form++) {
      CHECK(crnet_barrier(w));
      if (me == 0) {
        struct timespec t = {0, 400 * 1000 * 1000};
        nanosleep(&t, NULL);
      }
      double wall = wall_now(), cpu = cpu_now();
      if (form == 0) {
        CHECK(crnet_barrier(w));
      } else {
        crnet_request *q;
        CHECK(crnet_ibarrier(w, &q));
        CHECK(crnet_wait(&q));
      }
      wall = wall_now() - wall;
      cpu = cpu_now() - cpu;
      expect_schedule(w, CRNET_COLL_BARRIER, "board");
      if (me != 0 && wall > 0.2 && cpu > 0.5 * wall)
        FAIL("waited %.3f s in a %sbarrier using %.3f s of CPU", wall,
             form ? "nonblocking " : "", cpu);
      if (me != 0 && wall < 0.2)
        FAIL("the %sbarrier returned after %.3f s, before rank 0 came",
             form ? "nonblocking " : "", wall);
    }
    /* A bcast's root and readers go on without the last rank: the barrier
     * after it waits for that rank's post of the bcast (the owed post,
     * board.h), asleep too. */
    {
      int32_t b = me == 0 ? 42 : -1;
      CHECK(crnet_barrier(w));
      if (me == p - 1) {
        struct timespec t = {0, 400 * 1000 * 1000};
        nanosleep(&t, NULL);
      }
      double wall = wall_now(), cpu = cpu_now();
      CHECK(crnet_bcast(w, &b, 1, CRNET_INT32, 0));
      CHECK(crnet_barrier(w));
      wall = wall_now() - wall;
      cpu = cpu_now() - cpu;
      expect_schedule(w, CRNET_COLL_BCAST, "board");
      if (b != 42)
        FAIL("bcast = %d", (int)b);
      if (me != p - 1 && wall > 0.2 && cpu > 0.5 * wall)
        FAIL("waited %.3f s in a bcast and a barrier using %.3f s of CPU", wall,
             cpu);
      if (me != p - 1 && wall < 0.2)
        FAIL("the barrier after the bcast returned after %.3f s, before "
             "rank %d came",
             wall, p - 1);
    }
  } else {
    FAIL("unknown mode %s", mode);
  }
  CHECK(crnet_comm_destroy(w));
  if (me == 0)
    printf("board_check %s: ok\n", mode);
  return 0;
}
