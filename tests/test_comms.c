/* Sub-communicators through real ranks on loopback (netjob.h):
 * crnet_comm_split and crnet_comm_dup, collectives on several comms in
 * flight at once and in different orders on different ranks, the scope of
 * a failure (a lost rank fails the comms that have it, and only those),
 * frames of a comm the receiver does not have, and misuse.
 *
 * Cases (CK_RUN_CASE): "split", "interleave", "scope", "misuse", "threads"
 * (comms driven by threads of their own, for ThreadSanitizer); argument
 * "unit" runs only the job of one. Run with CRNET_LAZY_LINKS=1 too
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
  if (check_allreduce(half, rank, members, n, 1000) != EXIT_OK)
    return EXIT_FAIL;
  /* Equal keys: ordered by parent rank. A split of a split. */
  rc = crnet_comm_split(half, 0, 7, &rev);
  FAIL_IF(rc != 0, "split of split: %s", crnet_err_name(rc));
  FAIL_IF(crnet_comm_rank(rev) != crnet_comm_rank(half), "tie not by rank");
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
    double until = now_s() + 20;
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
  SRunner *sr;
  int failed;
  if (unit) {
    t = tcase_create("one");
    tcase_add_test(t, job_of_one);
    suite_add_tcase(s, t);
  } else {
    t = tcase_create("split");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, split_like_mpi);
    suite_add_tcase(s, t);
    t = tcase_create("interleave");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, comms_interleave_in_any_order);
    suite_add_tcase(s, t);
    t = tcase_create("scope");
    tcase_set_timeout(t, 200);
    tcase_add_test(t, lost_rank_fails_only_its_comms);
    suite_add_tcase(s, t);
    t = tcase_create("threads");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, comms_on_threads);
    suite_add_tcase(s, t);
    t = tcase_create("misuse");
    tcase_set_timeout(t, 200);
    tcase_add_test(t, misuse_is_refused);
    tcase_add_test(t, frame_of_unknown_comm_is_a_mismatch);
    suite_add_tcase(s, t);
  }
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
