/* Sub-communicators through real ranks on loopback (netjob.h):
 * crnet_comm_split and crnet_comm_dup, collectives on several comms in
 * flight at once and in different orders on different ranks, the scope of
 * a failure (a lost rank fails the comms that have it, and only those),
 * frames of a comm the receiver does not have, and misuse.
 *
 * Cases (CK_RUN_CASE): "split", "interleave", "scope", "timeout-scope" (a
 * CRNET_TIMEOUT fails only the comm of its call), "misuse", "threads"
 * (comms driven by threads of their own) and "p2p-threads" (messages with
 * the progress thread on, and on dups driven by threads of their own
 * beside the world's collectives), the last two for ThreadSanitizer;
 * argument "unit" runs only the job of one. Run with CRNET_LAZY_LINKS=1 too
 * (meson: comms-lazy): a sub-comm's calls open only the links they use.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "crnet.h"
#include "netjob.h"

static rank_report *reports;

#define FAIL_IF(cond, ...)                                                     \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "rank %d, line %d: ", rank, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      return EXIT_FAIL;                                                        \
    }                                                                          \
  } while (0)

static crnet_comm *init_or_die(int rank) {
  crnet_comm *c = NULL;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    exit(EXIT_FAIL);
  }
  return c;
}

/* The sum over the comm's members of (job rank + 1) * (i + 1), for a
 * member's element i. */
static int64_t expected_sum(const int *members, int n, int i) {
  int64_t s = 0;
  for (int k = 0; k < n; k++)
    s += (int64_t)(members[k] + 1) * (i + 1);
  return s;
}

/* An allreduce on c whose members are the job ranks members[0..n). */
static int check_allreduce(crnet_comm *c, int rank, const int *members, int n,
                           size_t count) {
  int64_t *v = malloc(sizeof *v * count);
  int rc;
  FAIL_IF(v == NULL, "out of memory");
  for (size_t i = 0; i < count; i++)
    v[i] = (int64_t)(rank + 1) * (int64_t)(i + 1);
  rc = crnet_allreduce(c, CRNET_IN_PLACE, v, count, CRNET_INT64, CRNET_SUM);
  if (rc != 0) {
    free(v);
    FAIL_IF(true, "allreduce: %s: %s", crnet_err_name(rc),
            crnet_comm_errmsg(c));
  }
  for (size_t i = 0; i < count; i++)
    if (v[i] != expected_sum(members, n, (int)i)) {
      free(v);
      FAIL_IF(true, "allreduce element %zu wrong", i);
    }
  free(v);
  return EXIT_OK;
}

/* --- split: MPI's semantics ------------------------------------------------ */

static int rank_split(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *half = NULL, *rev = NULL, *dup = NULL;
  crnet_comm *row = NULL, *col = NULL, *none = NULL;
  int members[MAX_RANKS], n = 0, rc;
  (void)arg;
  /* Two colors by parity; keys reverse the order within each. */
  rc = crnet_comm_split(c, rank % 2, -rank, &half);
  FAIL_IF(rc != 0, "split: %s: %s", crnet_err_name(rc), crnet_comm_errmsg(c));
  for (int r = size - 1; r >= 0; r--)
    if (r % 2 == rank % 2)
      members[n++] = r;
  FAIL_IF(crnet_comm_size(half) != n, "half size %d, want %d",
          crnet_comm_size(half), n);
  FAIL_IF(members[crnet_comm_rank(half)] != rank, "half rank %d is not job "
          "rank %d", crnet_comm_rank(half), rank);
  /* Every rank of it names its job rank, the others -1. */
  for (int r = 0; r < n; r++)
    FAIL_IF(crnet_comm_job_rank(half, r) != members[r],
            "half's rank %d is job rank %d, want %d", r,
            crnet_comm_job_rank(half, r), members[r]);
  FAIL_IF(crnet_comm_job_rank(half, n) != -1 ||
              crnet_comm_job_rank(half, -1) != -1 ||
              crnet_comm_job_rank(NULL, 0) != -1,
          "job rank of no rank");
  FAIL_IF(crnet_comm_job_rank(c, size - 1) != size - 1, "the world's own");
  if (check_allreduce(half, rank, members, n, 1000) != EXIT_OK)
    return EXIT_FAIL;
  /* Equal keys: ordered by parent rank. A split of a split. */
  rc = crnet_comm_split(half, 0, 7, &rev);
  FAIL_IF(rc != 0, "split of split: %s", crnet_err_name(rc));
  FAIL_IF(crnet_comm_rank(rev) != crnet_comm_rank(half), "tie not by rank");
  for (int r = 0; r < n; r++)
    FAIL_IF(crnet_comm_job_rank(rev, r) != members[r],
            "a split of a split: rank %d is job rank %d, want %d", r,
            crnet_comm_job_rank(rev, r), members[r]);
  /* Dup: the same ranks, the same order, another comm. */
  rc = crnet_comm_dup(c, &dup);
  FAIL_IF(rc != 0, "dup: %s", crnet_err_name(rc));
  FAIL_IF(crnet_comm_rank(dup) != rank || crnet_comm_size(dup) != size,
          "dup is not the same ranks");
  /* A grid of 2 rows: rows and columns (the Jacobi example's comms). */
  rc = crnet_comm_split(dup, rank / ((size + 1) / 2), rank, &row);
  FAIL_IF(rc != 0, "rows: %s", crnet_err_name(rc));
  rc = crnet_comm_split(dup, rank % ((size + 1) / 2), rank, &col);
  FAIL_IF(rc != 0, "cols: %s", crnet_err_name(rc));
  n = 0;
  for (int r = 0; r < size; r++)
    if (r / ((size + 1) / 2) == rank / ((size + 1) / 2))
      members[n++] = r;
  if (check_allreduce(row, rank, members, n, 3) != EXIT_OK)
    return EXIT_FAIL;
  n = 0;
  for (int r = 0; r < size; r++)
    if (r % ((size + 1) / 2) == rank % ((size + 1) / 2))
      members[n++] = r;
  if (check_allreduce(col, rank, members, n, 70000) != EXIT_OK)
    return EXIT_FAIL;
  /* CRNET_UNDEFINED: no comm for rank 0, the others get one. */
  rc = crnet_comm_split(c, rank == 0 ? CRNET_UNDEFINED : 5, 0, &none);
  FAIL_IF(rc != 0, "undefined: %s", crnet_err_name(rc));
  FAIL_IF((rank == 0) != (none == NULL), "CRNET_UNDEFINED gave %p", none);
  if (none != NULL) {
    n = 0;
    for (int r = 1; r < size; r++)
      members[n++] = r;
    if (check_allreduce(none, rank, members, n, 5) != EXIT_OK)
      return EXIT_FAIL;
  }
  /* The world still works among them. */
  for (int r = 0; r < size; r++)
    members[r] = r;
  if (check_allreduce(c, rank, members, size, 17) != EXIT_OK)
    return EXIT_FAIL;
  /* Destroyed in any order, the world last. */
  FAIL_IF(crnet_comm_destroy(dup) != 0, "destroy dup");
  FAIL_IF(crnet_comm_destroy(half) != 0, "destroy half");
  FAIL_IF(crnet_comm_destroy(none) != 0, "destroy none");
  FAIL_IF(crnet_comm_destroy(col) != 0, "destroy col");
  FAIL_IF(crnet_comm_destroy(rev) != 0, "destroy rev");
  FAIL_IF(crnet_comm_destroy(row) != 0, "destroy row");
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != 0, "destroy world: %s", crnet_err_name(rc));
  return EXIT_OK;
}

START_TEST(split_like_mpi) {
  static const int sizes[] = {2, 3, 5, 6};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job j;
    job_init(&j, sizes[i], 30);
    run_job(&j, rank_split, NULL, 120);
    expect_all_ok(&j, __func__);
  }
}
END_TEST

/* --- interleave: comms in flight in different orders --------------------- */

#define NCOMMS 3
#define BIG (1u << 18) /* elements: 2 MiB of int64, many frames */

/* Every rank starts an allreduce on each of three dups of the world; the
 * even ranks in one order, the odd ranks in the other, and the odd ranks
 * wait for each call before starting the next, so frames of comms they have
 * not called yet reach them first and must not hold back the one they wait
 * for. Large and small vectors; every result checked. */
static int rank_interleave(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *d[NCOMMS];
  crnet_request *req[NCOMMS];
  int64_t *v[NCOMMS];
  size_t count[NCOMMS] = {BIG, 3, BIG / 2 + 1};
  int rc;
  (void)arg;
  for (int k = 0; k < NCOMMS; k++) {
    rc = crnet_comm_dup(c, &d[k]);
    FAIL_IF(rc != 0, "dup: %s", crnet_err_name(rc));
    v[k] = malloc(sizeof *v[k] * count[k]);
    FAIL_IF(v[k] == NULL, "out of memory");
  }
  for (int round = 0; round < 4; round++) {
    for (int k = 0; k < NCOMMS; k++)
      for (size_t i = 0; i < count[k]; i++)
        v[k][i] = (int64_t)(rank + 1) * (int64_t)(i + 1) + round + k;
    for (int n = 0; n < NCOMMS; n++) {
      int k = rank % 2 == 0 ? n : NCOMMS - 1 - n;
      rc = crnet_iallreduce(d[k], CRNET_IN_PLACE, v[k], count[k], CRNET_INT64,
                            CRNET_SUM, &req[k]);
      FAIL_IF(rc != 0, "iallreduce: %s", crnet_err_name(rc));
      if (rank % 2 == 1) {
        rc = crnet_wait(&req[k]);
        FAIL_IF(rc != 0, "wait comm %d: %s: %s", k, crnet_err_name(rc),
                crnet_comm_errmsg(d[k]));
      }
    }
    if (rank % 2 == 0) {
      rc = crnet_waitall(NCOMMS, req);
      FAIL_IF(rc != 0, "waitall: %s", crnet_err_name(rc));
    }
    for (int k = 0; k < NCOMMS; k++)
      for (size_t i = 0; i < count[k]; i++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++)
          want += (int64_t)(r + 1) * (int64_t)(i + 1) + round + k;
        FAIL_IF(v[k][i] != want, "comm %d round %d element %zu: %lld, want "
                "%lld", k, round, i, (long long)v[k][i], (long long)want);
      }
  }
  for (int k = 0; k < NCOMMS; k++) {
    FAIL_IF(crnet_comm_destroy(d[k]) != 0, "destroy");
    free(v[k]);
  }
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != 0, "destroy world: %s", crnet_err_name(rc));
  return EXIT_OK;
}

START_TEST(comms_interleave_in_any_order) {
  static const int sizes[] = {2, 3, 4};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job j;
    job_init(&j, sizes[i], 30);
    run_job(&j, rank_interleave, NULL, 180);
    expect_all_ok(&j, __func__);
  }
}
END_TEST

/* --- scope: a lost rank fails only the comms that have it ---------------- */

#define SCOPE_CALLS 100

/* p = 6 in two groups of 3. Job rank 1 (group A) dies; A's other ranks
 * fail on their comm and on the world within 2 s, naming it; group B
 * completes 100 more allreduces on its own comm and then finds the world
 * failed too. */
static int rank_scope(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *g = NULL;
  int group = rank < size / 2 ? 0 : 1;
  int members[MAX_RANKS], n = 0, rc;
  int64_t x = 1;
  (void)arg;
  for (int r = 0; r < size; r++)
    if ((r < size / 2 ? 0 : 1) == group)
      members[n++] = r;
  rc = crnet_comm_split(c, group, rank, &g);
  FAIL_IF(rc != 0, "split: %s", crnet_err_name(rc));
  if (check_allreduce(g, rank, members, n, 10) != EXIT_OK)
    return EXIT_FAIL;
  rc = crnet_barrier(c);
  FAIL_IF(rc != 0, "barrier: %s", crnet_err_name(rc));
  reports[rank].flag = 1;
  if (rank == 1) {
    /* Only once every rank is out of the barrier: a rank still reading
     * its last frame of it would lose that frame to the reset. */
    double until = now_s() + test_seconds(20);
    for (int r = 0; r < size; r++)
      while (__atomic_load_n(&reports[r].flag, __ATOMIC_ACQUIRE) == 0 &&
             now_s() < until)
        usleep(1000);
    reports[rank].t_event = now_s();
    raise(SIGKILL);
  }
  if (group == 0) {
    /* Its comm: fails, naming job rank 1. */
    rc = crnet_allreduce(g, CRNET_IN_PLACE, &x, 1, CRNET_INT64, CRNET_SUM);
    report_call(rank, g, rc);
    FAIL_IF(rc != CRNET_EPEER, "group A allreduce: %s, want CRNET_EPEER",
            crnet_err_name(rc));
    rc = crnet_barrier(c);
    FAIL_IF(rc != CRNET_EPEER, "group A world barrier: %s",
            crnet_err_name(rc));
    crnet_comm_destroy(g);
    crnet_comm_destroy(c);
    return EXIT_OK;
  }
  for (int i = 0; i < SCOPE_CALLS; i++)
    if (check_allreduce(g, rank, members, n, 1 + (size_t)(i % 7) * 1000) !=
        EXIT_OK)
      return EXIT_FAIL;
  report_call(rank, g, 0);
  rc = crnet_barrier(c);
  FAIL_IF(rc != CRNET_EPEER, "group B world barrier: %s, want CRNET_EPEER",
          crnet_err_name(rc));
  rc = crnet_comm_destroy(g);
  FAIL_IF(rc != 0, "destroy group B's comm: %s", crnet_err_name(rc));
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(lost_rank_fails_only_its_comms) {
  job j;
  reports = reports_map();
  job_init(&j, 6, 30);
  run_job(&j, rank_scope, NULL, 120);
  for (int r = 0; r < j.size; r++) {
    if (r == 1) {
      ck_assert_msg(exit_code(&j, r) == -1, "rank 1 was to die");
      continue;
    }
    ck_assert_msg(exit_code(&j, r) == EXIT_OK,
                  "rank %d exited %d (its stderr says why)", r,
                  exit_code(&j, r));
  }
  for (int r = 0; r < 3; r++) {
    double took = reports[r].returned - reports[1].t_event;
    if (r == 1)
      continue;
    ck_assert_msg(strstr(reports[r].errmsg, "rank 1") != NULL,
                  "rank %d's message does not name rank 1: %s", r,
                  reports[r].errmsg);
    ck_assert_msg(took < 2.0, "rank %d took %.3f s to notice", r, took);
    printf("group A rank %d noticed in %.3f s: %s\n", r, took,
           reports[r].errmsg);
  }
  for (int r = 3; r < 6; r++)
    ck_assert_msg(reports[r].rc == 0 && reports[r].returned > 0,
                  "group B rank %d did not complete its %d calls", r,
                  SCOPE_CALLS);
}
END_TEST

/* --- scope of a timeout: the comm of the call that ran out of time ------- */

#define TO_SECONDS 2.0 /* CRNET_TIMEOUT of every rank */
#define TO_CALLS 20

/* An alltoall on the world, pairwise: every rank receives from every
 * other directly (so rank 1 reads what rank 0 sent it before, see below). */
static int check_alltoall(crnet_comm *c, int rank, int size) {
  int64_t out[MAX_RANKS], in[MAX_RANKS];
  int rc = crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALL, "pairwise");
  FAIL_IF(rc != 0, "pairwise: %s", crnet_err_name(rc));
  for (int r = 0; r < size; r++) {
    out[r] = rank * 100 + r;
    in[r] = -1;
  }
  rc = crnet_alltoall(c, out, in, 1, CRNET_INT64);
  FAIL_IF(rc != 0, "world alltoall: %s: %s", crnet_err_name(rc),
          crnet_comm_errmsg(c));
  for (int r = 0; r < size; r++)
    FAIL_IF(in[r] != r * 100 + rank, "alltoall from %d: %lld", r,
            (long long)in[r]);
  return EXIT_OK;
}

/* p = 4 in two comms, A = {0, 1} and B = {2, 3}, every rank with
 * CRNET_TIMEOUT = 2 s. Rank 1 never makes A's second call, so rank 0's
 * times out: CRNET_ETIMEDOUT, naming rank 1. docs/RELIABILITY.md
 * ("Sub-communicators"): a timeout fails the comm of the call that ran out
 * of time, and only it. So B completes its calls (during and after), the
 * world comm works on every rank (collectives and messages; destroy
 * returns 0), and rank 1 finds A failed with rank 0's reason, relayed.
 *
 * The others wait for rank 0's timeout outside crnet, on the test's shared
 * memory, and only then call on the world: a world collective of theirs
 * started earlier would run out of time itself (it needs rank 0). A
 * message from rank 0 would not do either, today: it would queue behind
 * the frame of A's call that waits, parked, at the head of rank 1's link
 * from rank 0 until rank 1 posts a collective receive from rank 0 on
 * another comm (the world alltoall below); the ABORT that fails A on rank
 * 1 comes behind that frame too. */
static int rank_timeout_scope(int rank, int size, void *arg) {
  crnet_config cfg;
  crnet_comm *c = NULL, *g = NULL;
  int group = rank < 2 ? 0 : 1;
  int members[2] = {2 * group, 2 * group + 1}, world[MAX_RANKS], rc;
  int64_t x = 1;
  (void)arg;
  crnet_config_init(&cfg);
  cfg.timeout = TO_SECONDS;
  if (crnet_comm_init(&c, &cfg) != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return EXIT_FAIL;
  }
  for (int r = 0; r < size; r++)
    world[r] = r;
  rc = crnet_comm_split(c, group, rank, &g);
  FAIL_IF(rc != 0, "split: %s", crnet_err_name(rc));
  if (check_allreduce(g, rank, members, 2, 10) != EXIT_OK ||
      check_allreduce(c, rank, world, size, 10) != EXIT_OK)
    return EXIT_FAIL;
  if (rank == 0) {
    double t0 = now_s();
    rc = crnet_allreduce(g, CRNET_IN_PLACE, &x, 1, CRNET_INT64, CRNET_SUM);
    report_call(rank, g, rc);
    reports[rank].t_event = now_s() - t0;
    FAIL_IF(rc != CRNET_ETIMEDOUT, "A's allreduce: %s, want CRNET_ETIMEDOUT",
            crnet_err_name(rc));
    /* A stays failed: its next call is refused with the same error. */
    rc = crnet_barrier(g);
    FAIL_IF(rc != CRNET_ETIMEDOUT, "A's barrier after the timeout: %s",
            crnet_err_name(rc));
    __atomic_store_n(&reports[rank].flag, 1, __ATOMIC_RELEASE);
  } else {
    double until = now_s() + test_seconds(60);
    /* B meanwhile: its calls complete while A's runs out of time. */
    for (int i = 0; i < TO_CALLS && group == 1; i++)
      if (check_allreduce(g, rank, members, 2, 1 + (size_t)i * 100) !=
          EXIT_OK)
        return EXIT_FAIL;
    while (__atomic_load_n(&reports[0].flag, __ATOMIC_ACQUIRE) == 0 &&
           now_s() < until)
      usleep(1000);
    FAIL_IF(reports[0].flag == 0, "rank 0 never returned from A's call");
  }
  /* The world comm works on every rank: collectives and messages. */
  if (check_alltoall(c, rank, size) != EXIT_OK ||
      check_allreduce(c, rank, world, size, 1000) != EXIT_OK)
    return EXIT_FAIL;
  {
    int64_t out = rank, in = -1;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    rc = crnet_sendrecv(c, &out, 1, CRNET_INT64, right, 3, &in, 1,
                        CRNET_INT64, left, 3, NULL);
    FAIL_IF(rc != 0 || in != left, "world sendrecv: %s: %s",
            crnet_err_name(rc), crnet_comm_errmsg(c));
  }
  if (rank == 1) {
    /* A has failed here too, with rank 0's reason: refused at once. */
    rc = crnet_allreduce(g, CRNET_IN_PLACE, &x, 1, CRNET_INT64, CRNET_SUM);
    report_call(rank, g, rc);
    FAIL_IF(rc != CRNET_ETIMEDOUT, "A's allreduce on rank 1: %s, want "
            "CRNET_ETIMEDOUT", crnet_err_name(rc));
  }
  /* B completes 20 more calls after A's failure. */
  for (int i = 0; i < TO_CALLS && group == 1; i++)
    if (check_allreduce(g, rank, members, 2, 1 + (size_t)i * 1000) != EXIT_OK)
      return EXIT_FAIL;
  if (group == 1)
    report_call(rank, g, 0);
  rc = crnet_barrier(c);
  FAIL_IF(rc != 0, "world barrier: %s: %s", crnet_err_name(rc),
          crnet_comm_errmsg(c));
  rc = crnet_comm_destroy(g);
  FAIL_IF(rc != (group == 0 ? CRNET_ETIMEDOUT : 0), "destroy %s: %s",
          group == 0 ? "A" : "B", crnet_err_name(rc));
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != 0, "destroy world: %s: %s", crnet_err_name(rc),
          crnet_comm_errmsg(c));
  return EXIT_OK;
}

START_TEST(timeout_fails_only_its_comm) {
  job j;
  reports = reports_map();
  job_init(&j, 4, 30);
  run_job(&j, rank_timeout_scope, NULL, 120);
  expect_all_ok(&j, __func__);
  ck_assert_msg(reports[0].rc == CRNET_ETIMEDOUT, "rank 0: %s",
                crnet_err_name(reports[0].rc));
  /* The limit is a lower bound: never before it. */
  ck_assert_msg(reports[0].t_event >= TO_SECONDS - 0.01,
                "rank 0 timed out after %.3f s, before CRNET_TIMEOUT = %g s",
                reports[0].t_event, TO_SECONDS);
  ck_assert_msg(strstr(reports[0].errmsg, "timed out") != NULL &&
                    strstr(reports[0].errmsg, "waiting for rank 1") != NULL,
                "rank 0's message does not name rank 1: %s",
                reports[0].errmsg);
  ck_assert_msg(reports[1].rc == CRNET_ETIMEDOUT &&
                    strstr(reports[1].errmsg, "rank 0 timed out") != NULL &&
                    strstr(reports[1].errmsg, "relayed by rank 0") != NULL,
                "rank 1: %s: %s", crnet_err_name(reports[1].rc),
                reports[1].errmsg);
  for (int r = 2; r < 4; r++)
    ck_assert_msg(reports[r].rc == 0 && reports[r].returned > 0,
                  "B's rank %d did not complete its calls", r);
  printf("rank 0 timed out after %.3f s: %s\nrank 1: %s\n",
         reports[0].t_event, reports[0].errmsg, reports[1].errmsg);
}
END_TEST

/* --- threads: comms driven by threads of their own ------------------------ */

#define THREAD_CALLS 200

typedef struct worker {
  crnet_comm *comm;
  int rank, size, rc;
} worker;

/* 200 allreduces of a size that varies, checked, on this thread's comm. */
static void *work(void *arg) {
  worker *wk = arg;
  int64_t v[300];
  for (int i = 0; i < THREAD_CALLS && wk->rc == 0; i++) {
    size_t n = 1 + (size_t)(i * 37) % 300;
    for (size_t k = 0; k < n; k++)
      v[k] = (int64_t)(wk->rank + 1) * (int64_t)(k + i);
    wk->rc = crnet_allreduce(wk->comm, CRNET_IN_PLACE, v, n, CRNET_INT64,
                             CRNET_SUM);
    for (size_t k = 0; k < n && wk->rc == 0; k++)
      if (v[k] != (int64_t)wk->size * (wk->size + 1) / 2 * (int64_t)(k + i))
        wk->rc = -100;
  }
  return NULL;
}

/* Two threads, each with its own dup, call at once; the main thread calls
 * on the world meanwhile. The three comms' calls interleave on the same
 * links in whatever order the threads make them on each rank. */
static int rank_threads(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  pthread_t t[2];
  worker wk[2];
  int64_t x;
  (void)arg;
  for (int k = 0; k < 2; k++) {
    wk[k] = (worker){NULL, rank, size, 0};
    FAIL_IF(crnet_comm_dup(c, &wk[k].comm) != 0, "dup");
  }
  for (int k = 0; k < 2; k++)
    FAIL_IF(pthread_create(&t[k], NULL, work, &wk[k]) != 0, "thread");
  for (int i = 0; i < 50; i++) {
    x = rank;
    FAIL_IF(crnet_allreduce(c, CRNET_IN_PLACE, &x, 1, CRNET_INT64,
                            CRNET_SUM) != 0 ||
                x != (int64_t)size * (size - 1) / 2,
            "world allreduce %d: %s", i, crnet_comm_errmsg(c));
  }
  for (int k = 0; k < 2; k++) {
    pthread_join(t[k], NULL);
    FAIL_IF(wk[k].rc != 0, "thread %d: %d: %s", k, wk[k].rc,
            crnet_comm_errmsg(wk[k].comm));
    FAIL_IF(crnet_comm_destroy(wk[k].comm) != 0, "destroy");
  }
  FAIL_IF(crnet_comm_destroy(c) != 0, "destroy world");
  return EXIT_OK;
}

START_TEST(comms_on_threads) {
  static const int sizes[] = {2, 3};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job j;
    job_init(&j, sizes[i], 30);
    run_job(&j, rank_threads, NULL, 200);
    expect_all_ok(&j, __func__);
  }
}
END_TEST

/* --- p2p-threads: messages with the progress thread, and threads of their
 * own, for ThreadSanitizer ------------------------------------------------ */

/* Message sizes on both sides of the eager bound (CRNET_EAGER_BYTES: up to
 * it a message goes at once, beyond it a rendezvous waits for the
 * receive). */
static const size_t pt_sizes[] = {0,
                                  1,
                                  1000,
                                  CRNET_EAGER_BYTES,
                                  CRNET_EAGER_BYTES + 1,
                                  200000,
                                  1 << 20};
#define PT_NSIZES (sizeof pt_sizes / sizeof pt_sizes[0])
#define PT_ROUNDS 12

/* Byte i of a message: its sender (job rank), its comm's thread, its
 * round and its number. */
static uint8_t pt_byte(int src, int thread, int round, int k, size_t i) {
  return (uint8_t)(src * 131 + thread * 71 + round * 37 + k * 17 + i * 7 +
                   (i >> 11));
}

static void pt_fill(uint8_t *b, size_t n, int src, int thread, int round,
                    int k) {
  for (size_t i = 0; i < n; i++)
    b[i] = pt_byte(src, thread, round, k, i);
}

static bool pt_check(const uint8_t *b, size_t n, int src, int thread,
                     int round, int k) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pt_byte(src, thread, round, k, i))
      return false;
  return true;
}

/* Work that makes no crnet call: a result the compiler cannot drop. */
static double pt_compute(double *v, size_t n, int steps) {
  double s = 0;
  for (int t = 0; t < steps; t++)
    for (size_t i = 0; i < n; i++) {
      v[i] = v[i] * 0.999 + (double)(i % 13) * 1e-3;
      s += v[i];
    }
  return s;
}

/* Completions the callbacks saw, and how many on a thread other than the
 * one that started the requests. */
typedef struct pt_seen {
  pthread_t starter;
  int done, elsewhere;
} pt_seen;

static void pt_on_complete(crnet_request *req, int status, void *arg) {
  pt_seen *seen = arg;
  (void)req;
  (void)status;
  if (!pthread_equal(pthread_self(), seen->starter))
    __atomic_fetch_add(&seen->elsewhere, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&seen->done, 1, __ATOMIC_RELEASE);
}

typedef struct pt_worker {
  crnet_comm *comm;
  int rank, size, thread, failed_line;
  char why[256];
} pt_worker;

#define PT_FAIL(wk, ...)                                                       \
  do {                                                                         \
    (wk)->failed_line = __LINE__;                                              \
    snprintf((wk)->why, sizeof (wk)->why, __VA_ARGS__);                        \
    goto out;                                                                  \
  } while (0)

/* A user thread's messages on its own dup of the world: per round, four
 * sizes to the right neighbour and from the left one (isend and irecv,
 * some computation, then waitall, or crnet_test until done for thread
 * 1), and a sendrecv of a rendezvous size the other way round. Every
 * byte and status checked. */
static void *pt_work(void *arg) {
  pt_worker *wk = arg;
  int rank = wk->rank, size = wk->size, th = wk->thread;
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  uint8_t *sb[4] = {NULL}, *rb[4] = {NULL}, *sr_out = NULL, *sr_in = NULL;
  double v[512] = {0};
  size_t sr_bytes = CRNET_EAGER_BYTES + 4096;
  for (int k = 0; k < 4; k++) {
    sb[k] = malloc(1 << 20);
    rb[k] = malloc(1 << 20);
    if (sb[k] == NULL || rb[k] == NULL)
      PT_FAIL(wk, "out of memory");
  }
  sr_out = malloc(sr_bytes);
  sr_in = malloc(sr_bytes);
  if (sr_out == NULL || sr_in == NULL)
    PT_FAIL(wk, "out of memory");
  for (int round = 0; round < PT_ROUNDS; round++) {
    crnet_request *req[8] = {NULL};
    crnet_status st[4];
    int rc;
    for (int k = 0; k < 4; k++) {
      size_t n = pt_sizes[(size_t)(round + k) % PT_NSIZES];
      rc = crnet_irecv(wk->comm, rb[k], n, CRNET_UINT8, left, round * 4 + k,
                       &st[k], &req[k]);
      if (rc != 0)
        PT_FAIL(wk, "round %d irecv %d: %s", round, k, crnet_err_name(rc));
      pt_fill(sb[k], n, rank, th, round, k);
      rc = crnet_isend(wk->comm, sb[k], n, CRNET_UINT8, right, round * 4 + k,
                       &req[4 + k]);
      if (rc != 0)
        PT_FAIL(wk, "round %d isend %d: %s", round, k, crnet_err_name(rc));
    }
    (void)pt_compute(v, 512, 20);
    if (th == 0) {
      rc = crnet_waitall(8, req);
      if (rc != 0)
        PT_FAIL(wk, "round %d waitall: %s: %s", round, crnet_err_name(rc),
                crnet_comm_errmsg(wk->comm));
    } else {
      double until = now_s() + test_seconds(60);
      for (int k = 0; k < 8; k++)
        while (req[k] != NULL) {
          int done = 0;
          rc = crnet_test(&req[k], &done);
          if (rc != 0)
            PT_FAIL(wk, "round %d test %d: %s: %s", round, k,
                    crnet_err_name(rc), crnet_comm_errmsg(wk->comm));
          if (!done && now_s() > until)
            PT_FAIL(wk, "round %d: request %d not done after 60 s", round, k);
          if (!done)
            (void)pt_compute(v, 512, 1);
        }
    }
    for (int k = 0; k < 4; k++) {
      size_t n = pt_sizes[(size_t)(round + k) % PT_NSIZES];
      if (st[k].source != left || st[k].tag != round * 4 + k ||
          st[k].bytes != n || st[k].error != 0)
        PT_FAIL(wk, "round %d message %d: status %d/%d/%zu/%d", round, k,
                st[k].source, st[k].tag, st[k].bytes, st[k].error);
      if (!pt_check(rb[k], n, left, th, round, k))
        PT_FAIL(wk, "round %d message %d (%zu bytes): wrong bytes", round, k,
                n);
    }
    /* The other way round, blocking: to the left, from the right. */
    pt_fill(sr_out, sr_bytes, rank, th, round, 9);
    rc = crnet_sendrecv(wk->comm, sr_out, sr_bytes, CRNET_UINT8, left, 1000,
                        sr_in, sr_bytes, CRNET_UINT8, right, 1000, &st[0]);
    if (rc != 0)
      PT_FAIL(wk, "round %d sendrecv: %s: %s", round, crnet_err_name(rc),
              crnet_comm_errmsg(wk->comm));
    if (st[0].source != right || st[0].bytes != sr_bytes ||
        !pt_check(sr_in, sr_bytes, right, th, round, 9))
      PT_FAIL(wk, "round %d sendrecv: wrong message", round);
  }
out:
  for (int k = 0; k < 4; k++) {
    free(sb[k]);
    free(rb[k]);
  }
  free(sr_out);
  free(sr_in);
  return NULL;
}

/* The world's calls beside the threads: allreduces of int64, one in four
 * of 100000 elements (several rounds and frames), the others small. */
#define PT_WORLD_CALLS 8

static size_t pt_world_count(int i) {
  return i % 4 == 3 ? 100000 : 1 + (size_t)(i * 37) % 300;
}

static void pt_world_fill(int64_t *b, size_t n, int rank, int i) {
  for (size_t e = 0; e < n; e++)
    b[e] = (int64_t)(rank + 1) * (int64_t)(e + (size_t)i);
}

static int pt_world_check(const int64_t *b, size_t n, int size, int i) {
  for (size_t e = 0; e < n; e++)
    if (b[e] != (int64_t)size * (size + 1) / 2 * (int64_t)(e + (size_t)i))
      return -1;
  return 0;
}

/* The main thread's side while the threads send messages: waits for the
 * world's calls started before them, in an order of this rank's own, or
 * (world_loop) makes its calls one after another. */
static int pt_world_side(crnet_comm *c, int rank, int size, int world_loop,
                         crnet_request **wreq, int64_t **wbuf, double *v) {
  double sink = 0;
  int rc;
  if (!world_loop) {
    sink += pt_compute(v, 4096, 20);
    for (int i = 0; i < PT_WORLD_CALLS; i++) {
      int at = -1;
      rc = crnet_waitany(PT_WORLD_CALLS, wreq, &at);
      FAIL_IF(rc != 0 || at < 0, "world waitany: %s: %s", crnet_err_name(rc),
              crnet_comm_errmsg(c));
      FAIL_IF(pt_world_check(wbuf[at], pt_world_count(at), size, at) != 0,
              "world allreduce %d: wrong result", at);
      free(wbuf[at]);
    }
    (void)sink;
    return EXIT_OK;
  }
  for (int i = 0; i < 5 * PT_WORLD_CALLS; i++) {
    size_t n = pt_world_count(i);
    crnet_request *r = NULL;
    int64_t *b = malloc(sizeof *b * n);
    FAIL_IF(b == NULL, "out of memory");
    pt_world_fill(b, n, rank, i);
    if (i % 2 == 0) {
      rc = crnet_allreduce(c, CRNET_IN_PLACE, b, n, CRNET_INT64, CRNET_SUM);
    } else {
      rc = crnet_iallreduce(c, CRNET_IN_PLACE, b, n, CRNET_INT64, CRNET_SUM,
                            &r);
      if (rc == 0) {
        sink += pt_compute(v, 4096, 2);
        rc = crnet_wait(&r);
      }
    }
    if (rc == 0 && pt_world_check(b, n, size, i) != 0)
      rc = -100;
    free(b);
    FAIL_IF(rc != 0, "world allreduce %d: %s: %s", i, crnet_err_name(rc),
            crnet_comm_errmsg(c));
  }
  (void)sink;
  return EXIT_OK;
}

/* --- messages behind a collective's early frame -------------------------- */

/* Rank 0 starts a collective (on the world, or on a dup), then sends rank 1
 * messages on the world: `nmsg` of `bytes` each (eager, or rendezvous
 * above 64 KiB). Rank 1 receives them all first and only then joins the
 * collective, so the collective's frame (400 KB: more than the link reads
 * ahead) reaches rank 1 before its call and waits at the head of the link
 * with the messages behind it. A valid program: the messages must come
 * through (once the frame parked for good there, and 4 KiB of messages
 * behind it stopped the link; the wait then failed every comm with "a bug
 * in crnet"). */
typedef struct behind_case {
  bool dup;
  int nmsg;
  size_t bytes;
} behind_case;

static int rank_behind_parked(int rank, int size, void *arg) {
  const behind_case *bc = arg;
  crnet_comm *c = init_or_die(rank), *d = c;
  enum { N = 50000 };
  int64_t *v = malloc(sizeof *v * N);
  uint8_t *m = malloc(bc->bytes > 0 ? bc->bytes : 1);
  crnet_request *r = NULL;
  (void)size;
  FAIL_IF(v == NULL || m == NULL, "out of memory");
  if (bc->dup)
    FAIL_IF(crnet_comm_dup(c, &d) != 0, "dup: %s", crnet_comm_errmsg(c));
  for (int i = 0; i < N; i++)
    v[i] = (int64_t)(rank + 1) * i;
  if (rank == 0) {
    FAIL_IF(crnet_iallreduce(d, CRNET_IN_PLACE, v, N, CRNET_INT64, CRNET_SUM,
                             &r) != 0,
            "iallreduce: %s", crnet_comm_errmsg(d));
    for (int k = 0; k < bc->nmsg; k++) {
      memset(m, k & 0xff, bc->bytes);
      FAIL_IF(crnet_send(c, m, bc->bytes, CRNET_BYTE, 1, k) != 0,
              "send %d: %s", k, crnet_comm_errmsg(c));
    }
    FAIL_IF(crnet_wait(&r) != 0, "wait: %s", crnet_comm_errmsg(d));
  } else if (rank == 1) {
    for (int k = 0; k < bc->nmsg; k++) {
      crnet_status st;
      FAIL_IF(crnet_recv(c, m, bc->bytes, CRNET_BYTE, 0, k, &st) != 0,
              "recv %d: %s", k, crnet_comm_errmsg(c));
      FAIL_IF(st.bytes != bc->bytes || (bc->bytes > 0 && (m[0] != (k & 0xff) ||
                                                          m[bc->bytes - 1] !=
                                                              (k & 0xff))),
              "message %d wrong", k);
    }
    FAIL_IF(crnet_allreduce(d, CRNET_IN_PLACE, v, N, CRNET_INT64,
                            CRNET_SUM) != 0,
            "allreduce: %s", crnet_comm_errmsg(d));
  } else {
    FAIL_IF(crnet_allreduce(d, CRNET_IN_PLACE, v, N, CRNET_INT64,
                            CRNET_SUM) != 0,
            "allreduce: %s", crnet_comm_errmsg(d));
  }
  for (int i = 0; i < N; i++)
    FAIL_IF(v[i] != (int64_t)size * (size + 1) / 2 * i,
            "element %d: %lld", i, (long long)v[i]);
  if (d != c)
    FAIL_IF(crnet_comm_destroy(d) != 0, "destroy dup");
  FAIL_IF(crnet_comm_destroy(c) != 0, "destroy world");
  free(v);
  free(m);
  return EXIT_OK;
}

START_TEST(messages_pass_a_parked_collective_frame) {
  static const behind_case cases[] = {
      {false, 1, 8},      {true, 1, 8},       {false, 200, 64},
      {true, 200, 64},    {false, 2, 1 << 20}, {true, 2, 1 << 20}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int size = 2; size <= 3; size++) {
      job j;
      job_init(&j, size, 60);
      run_job(&j, rank_behind_parked, (void *)&cases[i], 120);
      expect_all_ok(&j, __func__);
    }
}
END_TEST

/* With the progress thread on (crnet_config.progress_thread): first the
 * main thread's isend and irecv of every size, to the right and from the
 * left on the world, complete while it computes and makes no crnet call
 * (their callbacks say so, at least one on another thread: the progress
 * thread's), then it waits for them. Then two user threads each drive
 * messages on their own dup of the world (pt_work) while the world's
 * collectives run beside them: eight allreduces the main thread starts
 * before it starts the threads, computes, then waits for in any order.
 *
 * *arg != 0 (the case "p2p-threads-world-loop") starts the world's calls
 * one after another while the threads' messages are under way instead, so
 * that a collective's frame often reaches a rank before that rank has
 * started the call, with the threads' messages behind it: they must come
 * through (see rank_behind_parked; once, the link stopped there and a
 * waiting thread failed every comm with CRNET_EIO, "... in flight but
 * nothing left to wait for (a bug in crnet)"). */
static int rank_p2p_threads(int rank, int size, void *arg) {
  crnet_config cfg;
  crnet_comm *c = NULL;
  int left = (rank + size - 1) % size, right = (rank + 1) % size, rc;
  int world_loop = *(const int *)arg, world_rc;
  uint8_t *sb[PT_NSIZES], *rb[PT_NSIZES];
  crnet_request *req[2 * PT_NSIZES], *wreq[PT_WORLD_CALLS];
  int64_t *wbuf[PT_WORLD_CALLS];
  crnet_status st[PT_NSIZES];
  pt_seen seen = {pthread_self(), 0, 0};
  int at_registration;
  double v[4096], until, sink;
  pthread_t t[2];
  pt_worker wk[2];
  crnet_config_init(&cfg);
  cfg.progress_thread = CRNET_PROGRESS_THREAD_ON;
  if (crnet_comm_init(&c, &cfg) != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return EXIT_FAIL;
  }
  for (size_t i = 0; i < 4096; i++)
    v[i] = (double)i;
  for (size_t k = 0; k < PT_NSIZES; k++) {
    sb[k] = malloc(pt_sizes[k] + 1);
    rb[k] = malloc(pt_sizes[k] + 1);
    FAIL_IF(sb[k] == NULL || rb[k] == NULL, "out of memory");
    pt_fill(sb[k], pt_sizes[k], rank, 9, 0, (int)k);
  }
  for (size_t k = 0; k < PT_NSIZES; k++) {
    rc = crnet_irecv(c, rb[k], pt_sizes[k], CRNET_UINT8, left, (int)k, &st[k],
                     &req[k]);
    FAIL_IF(rc != 0, "irecv %zu: %s", k, crnet_err_name(rc));
    rc = crnet_isend(c, sb[k], pt_sizes[k], CRNET_UINT8, right, (int)k,
                     &req[PT_NSIZES + k]);
    FAIL_IF(rc != 0, "isend %zu: %s", k, crnet_err_name(rc));
  }
  for (size_t k = 0; k < 2 * PT_NSIZES; k++) {
    rc = crnet_request_on_complete(req[k], pt_on_complete, &seen);
    FAIL_IF(rc != 0, "on_complete %zu: %s", k, crnet_err_name(rc));
  }
  /* A request complete before its callback was set runs the callback at
   * once, here: if the main thread was kept off the CPU that long, all of
   * them may have, and none can be seen completing elsewhere. */
  at_registration = __atomic_load_n(&seen.done, __ATOMIC_ACQUIRE);
  /* Compute, no crnet call, until the progress thread has completed them
   * all (bounded: it must not take a minute even on a loaded machine). */
  until = now_s() + test_seconds(60);
  sink = 0;
  while (__atomic_load_n(&seen.done, __ATOMIC_ACQUIRE) <
             (int)(2 * PT_NSIZES) &&
         now_s() < until)
    sink += pt_compute(v, 4096, 4);
  FAIL_IF(__atomic_load_n(&seen.done, __ATOMIC_ACQUIRE) !=
              (int)(2 * PT_NSIZES),
          "%d of %zu requests completed while the main thread computed for "
          "60 s (%g)", seen.done, 2 * PT_NSIZES, sink);
  FAIL_IF(__atomic_load_n(&seen.elsewhere, __ATOMIC_RELAXED) == 0 &&
              at_registration < (int)(2 * PT_NSIZES),
          "no request completed on the progress thread (%d of %zu were "
          "complete when their callbacks were set)",
          at_registration, 2 * PT_NSIZES);
  rc = crnet_waitall((int)(2 * PT_NSIZES), req);
  FAIL_IF(rc != 0, "waitall: %s: %s", crnet_err_name(rc),
          crnet_comm_errmsg(c));
  for (size_t k = 0; k < PT_NSIZES; k++) {
    FAIL_IF(st[k].source != left || st[k].tag != (int)k ||
                st[k].bytes != pt_sizes[k] || st[k].error != 0,
            "message %zu: status %d/%d/%zu/%d", k, st[k].source, st[k].tag,
            st[k].bytes, st[k].error);
    FAIL_IF(!pt_check(rb[k], pt_sizes[k], left, 9, 0, (int)k),
            "message %zu (%zu bytes): wrong bytes", k, pt_sizes[k]);
    free(sb[k]);
    free(rb[k]);
  }
  /* Two threads, a dup each, messages; the world's collectives here. */
  for (int k = 0; k < 2; k++) {
    wk[k] = (pt_worker){NULL, rank, size, k, 0, ""};
    rc = crnet_comm_dup(c, &wk[k].comm);
    FAIL_IF(rc != 0, "dup: %s", crnet_err_name(rc));
  }
  if (!world_loop) {
    /* Every world call is started before this rank's threads send a
     * message (see above); they run while the threads do. */
    for (int i = 0; i < PT_WORLD_CALLS; i++) {
      size_t n = pt_world_count(i);
      wbuf[i] = malloc(sizeof *wbuf[i] * n);
      FAIL_IF(wbuf[i] == NULL, "out of memory");
      pt_world_fill(wbuf[i], n, rank, i);
      rc = crnet_iallreduce(c, CRNET_IN_PLACE, wbuf[i], n, CRNET_INT64,
                            CRNET_SUM, &wreq[i]);
      FAIL_IF(rc != 0, "world iallreduce %d: %s", i, crnet_err_name(rc));
    }
  }
  for (int k = 0; k < 2; k++)
    FAIL_IF(pthread_create(&t[k], NULL, pt_work, &wk[k]) != 0, "thread");
  /* The threads are joined whatever the world's calls gave. */
  world_rc = pt_world_side(c, rank, size, world_loop, wreq, wbuf, v);
  for (int k = 0; k < 2; k++) {
    pthread_join(t[k], NULL);
    if (wk[k].failed_line != 0) {
      fprintf(stderr, "rank %d, thread %d, line %d: %s\n", rank, k,
              wk[k].failed_line, wk[k].why);
      world_rc = EXIT_FAIL;
    }
  }
  if (world_rc != EXIT_OK)
    return EXIT_FAIL;
  for (int k = 0; k < 2; k++) {
    rc = crnet_comm_destroy(wk[k].comm);
    FAIL_IF(rc != 0, "destroy dup %d: %s", k, crnet_err_name(rc));
  }
  /* The world after it all. */
  {
    int64_t x = rank;
    rc = crnet_allreduce(c, CRNET_IN_PLACE, &x, 1, CRNET_INT64, CRNET_SUM);
    FAIL_IF(rc != 0 || x != (int64_t)size * (size - 1) / 2,
            "last world allreduce: %s", crnet_err_name(rc));
  }
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != 0, "destroy world: %s", crnet_err_name(rc));
  (void)sink;
  return EXIT_OK;
}

static void run_p2p_threads(int world_loop, const char *what) {
  static const int ps[] = {2, 3};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    job j;
    job_init(&j, ps[i], 30);
    run_job(&j, rank_p2p_threads, &world_loop, 300);
    expect_all_ok(&j, what);
  }
}

START_TEST(p2p_with_progress_thread_and_threads) {
  run_p2p_threads(0, __func__);
}
END_TEST

START_TEST(p2p_threads_beside_world_calls_started_meanwhile) {
  run_p2p_threads(1, __func__);
}
END_TEST

/* --- misuse ------------------------------------------------------------------ */

static int rank_misuse(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *d = NULL, *bad = (crnet_comm *)1;
  crnet_request *req[2];
  int idx = -1, rc;
  int64_t a = rank, b = 2 * rank;
  (void)arg;
  FAIL_IF(crnet_comm_split(NULL, 0, 0, &d) != CRNET_EINVAL, "NULL comm");
  FAIL_IF(crnet_comm_split(c, 0, 0, NULL) != CRNET_EINVAL, "NULL out");
  FAIL_IF(crnet_comm_dup(c, NULL) != CRNET_EINVAL, "dup NULL out");
  rc = crnet_comm_split(c, -5, 0, &bad);
  FAIL_IF(rc != CRNET_EINVAL || bad != NULL, "color -5: %s",
          crnet_err_name(rc));
  FAIL_IF(strstr(crnet_comm_errmsg(c), "negative") == NULL, "message: %s",
          crnet_comm_errmsg(c));
  rc = crnet_comm_dup(c, &d);
  FAIL_IF(rc != 0, "dup: %s", crnet_err_name(rc));
  /* The world goes last: refused, and nothing changes. */
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != CRNET_EINVAL, "destroy world first: %s", crnet_err_name(rc));
  FAIL_IF(strstr(crnet_comm_errmsg(c), "destroy them first") == NULL,
          "message: %s", crnet_comm_errmsg(c));
  /* Requests of two comms of one world: one waitany. */
  rc = crnet_iallreduce(c, CRNET_IN_PLACE, &a, 1, CRNET_INT64, CRNET_SUM,
                        &req[0]);
  FAIL_IF(rc != 0, "iallreduce world: %s", crnet_err_name(rc));
  rc = crnet_iallreduce(d, CRNET_IN_PLACE, &b, 1, CRNET_INT64, CRNET_SUM,
                        &req[1]);
  FAIL_IF(rc != 0, "iallreduce dup: %s", crnet_err_name(rc));
  rc = crnet_waitany(2, req, &idx);
  FAIL_IF(rc != 0 || idx < 0, "waitany: %s", crnet_err_name(rc));
  rc = crnet_waitall(2, req);
  FAIL_IF(rc != 0, "waitall: %s", crnet_err_name(rc));
  FAIL_IF(a != (int64_t)size * (size - 1) / 2 || b != 2 * a, "sums");
  /* A comm with a request in flight is not destroyed: a receive whose
   * message comes only after the refusal. */
  {
    crnet_request *rr = NULL;
    int64_t got = -1, mine = rank;
    rc = crnet_irecv(d, &got, 1, CRNET_INT64, (rank + size - 1) % size, 999,
                     NULL, &rr);
    FAIL_IF(rc != 0, "irecv: %s", crnet_err_name(rc));
    rc = crnet_comm_destroy(d);
    FAIL_IF(rc != CRNET_EINVAL, "destroy with a request in flight: %s",
            crnet_err_name(rc));
    /* Every rank has tried before any message goes. */
    FAIL_IF(crnet_barrier(c) != 0, "barrier");
    rc = crnet_send(d, &mine, 1, CRNET_INT64, (rank + 1) % size, 999);
    FAIL_IF(rc != 0, "send: %s", crnet_err_name(rc));
    rc = crnet_wait(&rr);
    FAIL_IF(rc != 0 || got != (rank + size - 1) % size, "recv: %s",
            crnet_err_name(rc));
  }
  FAIL_IF(crnet_comm_destroy(d) != 0, "destroy dup");
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != 0, "destroy world: %s", crnet_err_name(rc));
  return EXIT_OK;
}

START_TEST(misuse_is_refused) {
  job j;
  job_init(&j, 3, 30);
  run_job(&j, rank_misuse, NULL, 60);
  expect_all_ok(&j, __func__);
}
END_TEST

/* A frame of a comm the receiver has destroyed: rank 1 calls on a dup that
 * rank 0 has let go of. Rank 0 names the unknown communicator; nobody
 * hangs. */
static int rank_unknown(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *d = NULL;
  int64_t x = 1;
  int rc;
  (void)arg;
  (void)size;
  rc = crnet_comm_dup(c, &d);
  FAIL_IF(rc != 0, "dup: %s", crnet_err_name(rc));
  if (rank == 0) {
    FAIL_IF(crnet_comm_destroy(d) != 0, "destroy dup");
    rc = crnet_barrier(c);
    report_call(rank, c, rc);
    FAIL_IF(rc != CRNET_EMISMATCH, "barrier: %s, want CRNET_EMISMATCH",
            crnet_err_name(rc));
  } else {
    rc = crnet_allreduce(d, CRNET_IN_PLACE, &x, 1, CRNET_INT64, CRNET_SUM);
    report_call(rank, d, rc);
    FAIL_IF(rc == 0, "allreduce on a comm rank 0 destroyed succeeded");
    crnet_comm_destroy(d);
  }
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(frame_of_unknown_comm_is_a_mismatch) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 30);
  run_job(&j, rank_unknown, NULL, 60);
  expect_all_ok(&j, __func__);
  ck_assert_msg(strstr(reports[0].errmsg, "no longer") != NULL &&
                    strstr(reports[1].errmsg, "no longer") != NULL,
                "rank 0: %s; rank 1: %s", reports[0].errmsg,
                reports[1].errmsg);
}
END_TEST

/* A job of one: a split and a dup of a comm of one rank. */
START_TEST(job_of_one) {
  crnet_comm *c = NULL, *d = NULL, *e = NULL;
  int64_t x = 5;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_comm_split(c, 3, 0, &d), 0);
  ck_assert_int_eq(crnet_comm_size(d), 1);
  ck_assert_int_eq(crnet_comm_dup(d, &e), 0);
  ck_assert_int_eq(crnet_allreduce(e, CRNET_IN_PLACE, &x, 1, CRNET_INT64,
                                   CRNET_SUM),
                   0);
  ck_assert_int_eq(x, 5);
  ck_assert_int_eq(crnet_comm_destroy(c), CRNET_EINVAL);
  ck_assert_int_eq(crnet_comm_destroy(d), 0);
  ck_assert_int_eq(crnet_comm_destroy(e), 0);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

int main(int argc, char **argv) {
  bool unit = argc > 1 && strcmp(argv[1], "unit") == 0;
  Suite *s = suite_create(unit ? "comms-unit" : "comms");
  TCase *t;
  if (unit) {
    t = tcase_create("one");
    tcase_add_test(t, job_of_one);
    suite_add_tcase(s, t);
  } else {
    t = tcase_create("split");
    tcase_set_timeout(t, 200);
    tcase_add_test(t, split_like_mpi);
    suite_add_tcase(s, t);
    t = tcase_create("interleave");
    tcase_set_timeout(t, 200);
    tcase_add_test(t, comms_interleave_in_any_order);
    suite_add_tcase(s, t);
    t = tcase_create("scope");
    tcase_set_timeout(t, 100);
    tcase_add_test(t, lost_rank_fails_only_its_comms);
    suite_add_tcase(s, t);
    t = tcase_create("timeout-scope");
    tcase_set_timeout(t, 100);
    tcase_add_test(t, timeout_fails_only_its_comm);
    suite_add_tcase(s, t);
    t = tcase_create("threads");
    tcase_set_timeout(t, 200);
    tcase_add_test(t, comms_on_threads);
    suite_add_tcase(s, t);
    t = tcase_create("p2p-threads");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, p2p_with_progress_thread_and_threads);
    suite_add_tcase(s, t);
    t = tcase_create("p2p-threads-world-loop");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, p2p_threads_beside_world_calls_started_meanwhile);
    suite_add_tcase(s, t);
    t = tcase_create("p2p-behind-parked");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, messages_pass_a_parked_collective_frame);
    suite_add_tcase(s, t);
    t = tcase_create("misuse");
    tcase_set_timeout(t, 100);
    tcase_add_test(t, misuse_is_refused);
    tcase_add_test(t, frame_of_unknown_comm_is_a_mismatch);
    suite_add_tcase(s, t);
  }
  return check_run(s);
}
