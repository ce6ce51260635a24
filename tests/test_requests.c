/* Nonblocking calls and requests (crnet_iX, crnet_wait and friends), in a
 * job of one and in real jobs of forked ranks on loopback (tests/netjob.h).
 *
 *   args      every misuse of a request gets CRNET_EINVAL and changes
 *             nothing: NULL pointers, a freed request, a callback set twice,
 *             a request given twice to one wait; callbacks run once.
 *   flight    every collective started at once and waited for in a random
 *             order equals the blocking call bit for bit; 16 allreduces of
 *             mixed sizes and schedules in flight complete exactly, waited
 *             for by crnet_test, crnet_waitany and crnet_waitall.
 *   progress  with the progress thread a request completes while its rank
 *             computes and calls nothing (its callback says when); without
 *             one it does not.
 *   failure   a rank SIGKILLed with requests in flight fails every
 *             survivor's requests with CRNET_EPEER naming it within 2 s; a
 *             mismatch between calls in flight, CRNET_TIMEOUT counted from
 *             a request's start, an abort; destroy refuses while requests
 *             are in flight.
 *   threads   one thread starts requests, another waits for them, a third
 *             reads the comm's state, on every rank at once (run under
 *             ThreadSanitizer in CI).
 *
 * `test_requests unit` runs the job of one only.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "comm.h"
#include "crnet.h"
#include "netjob.h"

/* What each rank reports to the test (netjob.h). */
typedef rank_report report;
static report *reports;

/* Destroys the comm; the call's own error, if any, stays the result (a
 * failed comm's destroy returns the sticky error again). */
static int destroy_keeping(crnet_comm *c, int rc) {
  int d = crnet_comm_destroy(c);
  return rc != 0 ? rc : d;
}

/* --- args: a job of one ------------------------------------------------------ */

static void count_calls(crnet_request *req, int status, void *arg) {
  (void)req;
  (void)status;
  ++*(int *)arg;
}

/* A completion callback that calls again: a blocking call is refused (it
 * would wait for the engine running the callback), a nonblocking one
 * starts. */
typedef struct nested {
  crnet_comm *c;
  int blocking_rc, start_rc, wait_rc;
  crnet_request *inner;
} nested;

static void call_again(crnet_request *req, int status, void *arg) {
  nested *n = arg;
  (void)status;
  n->blocking_rc = crnet_barrier(n->c);
  n->start_rc = crnet_ibarrier(n->c, &n->inner);
  n->wait_rc = crnet_wait(&req); /* its own request: refused */
}

START_TEST(misuse_is_refused) {
  crnet_comm *c;
  crnet_request *r, *stale, *set[3];
  int v = 5, out = 0, calls = 0, done = -1, index = 7;
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);

  /* A NULL request pointer: refused before anything starts. */
  ck_assert_int_eq(crnet_iallreduce(c, &v, &out, 1, CRNET_INT32, CRNET_SUM,
                                    NULL),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(crnet_comm_errmsg(c), "request pointer is NULL"),
                "%s", crnet_comm_errmsg(c));
  /* Bad arguments: no request, and the handle says so. */
  r = (crnet_request *)&v;
  ck_assert_int_eq(crnet_iallreduce(c, &v, &out, 1, (crnet_datatype)99,
                                    CRNET_SUM, &r),
                   CRNET_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(crnet_ibcast(c, &v, 1, CRNET_INT32, 3, &r), CRNET_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(crnet_wait(NULL), CRNET_EINVAL);
  ck_assert_int_eq(crnet_wait(&r), CRNET_EINVAL);
  ck_assert_int_eq(crnet_test(&r, &done), CRNET_EINVAL);
  ck_assert_int_eq(done, 0);

  /* A good one; its callback once, set once. */
  ck_assert_int_eq(
      crnet_iallreduce(c, &v, &out, 1, CRNET_INT32, CRNET_SUM, &r), 0);
  ck_assert_ptr_nonnull(r);
  ck_assert_int_eq(crnet_request_on_complete(r, NULL, NULL), CRNET_EINVAL);
  ck_assert_int_eq(crnet_request_on_complete(r, count_calls, &calls), 0);
  ck_assert_int_eq(crnet_request_on_complete(r, count_calls, &calls),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_test(&r, NULL), CRNET_EINVAL);
  stale = r;
  ck_assert_int_eq(crnet_wait(&r), 0);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(out, 5);
  ck_assert_int_eq(calls, 1);
  /* Its handle, kept after the wait freed it. */
  ck_assert_int_eq(crnet_wait(&stale), CRNET_EINVAL);
  ck_assert_msg(strstr(crnet_comm_errmsg(c), "freed") != NULL, "%s",
                crnet_comm_errmsg(c));

  /* One request twice in a wait: refused, both still waitable. */
  ck_assert_int_eq(crnet_ibarrier(c, &set[0]), 0);
  set[1] = set[0];
  set[2] = NULL;
  ck_assert_int_eq(crnet_waitall(3, set), CRNET_EINVAL);
  ck_assert_int_eq(crnet_waitany(2, set, &index), CRNET_EINVAL);
  ck_assert_ptr_nonnull(set[0]);
  set[1] = NULL;
  ck_assert_int_eq(crnet_waitany(3, set, &index), 0);
  ck_assert_int_eq(index, 0);
  ck_assert_ptr_null(set[0]);
  /* Nothing to wait for. */
  ck_assert_int_eq(crnet_waitany(3, set, &index), 0);
  ck_assert_int_eq(index, -1);
  ck_assert_int_eq(crnet_waitall(3, set), 0);
  ck_assert_int_eq(crnet_waitany(-1, set, &index), CRNET_EINVAL);
  ck_assert_int_eq(crnet_waitany(1, set, NULL), CRNET_EINVAL);

  /* A callback set on a complete request (a job of one completes at the
   * start) runs at once. */
  ck_assert_int_eq(crnet_ibarrier(c, &r), 0);
  ck_assert_int_eq(crnet_request_on_complete(r, count_calls, &calls), 0);
  ck_assert_int_eq(calls, 2);
  ck_assert_int_eq(crnet_test(&r, &done), 0);
  ck_assert_int_eq(done, 1);
  ck_assert_ptr_null(r);

  /* A callback set on a complete request runs on this thread, outside
   * the engine: it may make any call, but not wait for its own request.
   * (callback_calls_again tests one run by the engine.) */
  {
    nested n = {.c = c};
    ck_assert_int_eq(crnet_ibarrier(c, &r), 0);
    ck_assert_int_eq(crnet_request_on_complete(r, call_again, &n), 0);
    ck_assert_int_eq(n.blocking_rc, 0);
    ck_assert_int_eq(n.start_rc, 0);
    ck_assert_int_eq(n.wait_rc, CRNET_EINVAL);
    ck_assert_int_eq(crnet_wait(&r), 0);
    ck_assert_ptr_nonnull(n.inner);
    ck_assert_int_eq(crnet_wait(&n.inner), 0);
  }

  /* One operand: the logical operators still give 0 or 1. */
  ck_assert_int_eq(crnet_iallreduce(c, &v, &out, 1, CRNET_INT32, CRNET_LAND,
                                    &r),
                   0);
  ck_assert_int_eq(crnet_wait(&r), 0);
  ck_assert_int_eq(out, 1);

  /* A complete request nobody waited for is freed by destroy (ASan and
   * valgrind see a leak otherwise). */
  ck_assert_int_eq(crnet_ibarrier(c, &r), 0);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

/* --- flight: every collective at once ------------------------------------ */

#define NCOLL 11
#define ELEMS 1031 /* per block: odd, so blocks split unevenly */

typedef struct bufs {
  double *send[NCOLL], *got[NCOLL], *want[NCOLL];
  size_t counts[MAX_RANKS];
} bufs;

/* Call i of the set, nonblocking (req != NULL) or blocking, into out. */
static int coll_call(crnet_comm *c, int i, const double *send, double *out,
                     const size_t *counts, crnet_request **req) {
  int p = crnet_comm_size(c);
  switch (i) {
  case 0:
    return req ? crnet_iallreduce(c, send, out, ELEMS, CRNET_DOUBLE,
                                  CRNET_SUM, req)
               : crnet_allreduce(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_SUM);
  case 1:
    return req ? crnet_ireduce_scatter_block(c, send, out, ELEMS,
                                             CRNET_DOUBLE, CRNET_SUM, req)
               : crnet_reduce_scatter_block(c, send, out, ELEMS, CRNET_DOUBLE,
                                            CRNET_SUM);
  case 2:
    return req ? crnet_ireduce_scatter(c, send, out, counts, CRNET_DOUBLE,
                                       CRNET_MAX, req)
               : crnet_reduce_scatter(c, send, out, counts, CRNET_DOUBLE,
                                      CRNET_MAX);
  case 3:
    return req ? crnet_iscan(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_SUM, req)
               : crnet_scan(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_SUM);
  case 4:
    return req ? crnet_iexscan(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_PROD,
                               req)
               : crnet_exscan(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_PROD);
  case 5:
    return req ? crnet_ialltoall(c, send, out, ELEMS, CRNET_DOUBLE, req)
               : crnet_alltoall(c, send, out, ELEMS, CRNET_DOUBLE);
  case 6:
    return req ? crnet_iallgather(c, send, out, ELEMS, CRNET_DOUBLE, req)
               : crnet_allgather(c, send, out, ELEMS, CRNET_DOUBLE);
  case 7:
    memcpy(out, send, sizeof(double) * ELEMS);
    return req ? crnet_ibcast(c, out, ELEMS, CRNET_DOUBLE, p - 1, req)
               : crnet_bcast(c, out, ELEMS, CRNET_DOUBLE, p - 1);
  case 8:
    return req ? crnet_ireduce(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_MIN,
                               p / 2, req)
               : crnet_reduce(c, send, out, ELEMS, CRNET_DOUBLE, CRNET_MIN,
                              p / 2);
  case 9:
    return req ? crnet_ibarrier(c, req) : crnet_barrier(c);
  default: /* in place, large enough for several rounds of pieces */
    memcpy(out, send, sizeof(double) * ELEMS * (size_t)p);
    return req ? crnet_iallreduce(c, CRNET_IN_PLACE, out, ELEMS * (size_t)p,
                                  CRNET_DOUBLE, CRNET_SUM, req)
               : crnet_allreduce(c, CRNET_IN_PLACE, out, ELEMS * (size_t)p,
                                 CRNET_DOUBLE, CRNET_SUM);
  }
}

static int rank_every_collective(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *reqs[NCOLL];
  int order[NCOLL], rc;
  size_t n = (size_t)ELEMS * (size_t)size, counts[MAX_RANKS];
  double *send, *got[NCOLL], *want[NCOLL];
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  srand(1000u + (unsigned)rank);
  send = malloc(sizeof *send * n);
  for (size_t i = 0; i < n; i++)
    send[i] = (double)rand() / RAND_MAX + 0.5; /* products stay finite */
  for (int r = 0; r < size; r++)
    counts[r] = (size_t)(r * 7 % 11) * 13;
  for (int i = 0; i < NCOLL; i++) {
    got[i] = calloc(n, sizeof(double));
    want[i] = calloc(n, sizeof(double));
  }
  /* Every call in flight at once, started in the same order everywhere... */
  for (int i = 0; i < NCOLL && rc == 0; i++)
    rc = coll_call(c, i, send, got[i], counts, &reqs[i]);
  /* ... and waited for in an order of this rank's own. */
  for (int i = 0; i < NCOLL; i++)
    order[i] = i;
  for (int i = NCOLL - 1; i > 0; i--) {
    int k = rand() % (i + 1), t = order[i];
    order[i] = order[k];
    order[k] = t;
  }
  for (int i = 0; i < NCOLL && rc == 0; i++)
    rc = crnet_wait(&reqs[order[i]]);
  for (int i = 0; i < NCOLL && rc == 0; i++)
    rc = coll_call(c, i, send, want[i], counts, NULL);
  report_call(rank, c, rc);
  for (int i = 0; i < NCOLL && rc == 0; i++)
    if (memcmp(got[i], want[i], sizeof(double) * n) != 0) {
      fprintf(stderr, "rank %d: call %d in flight differs from blocking\n",
              rank, i);
      rc = CRNET_EIO;
    }
  rc = destroy_keeping(c, rc);
  for (int i = 0; i < NCOLL; i++) {
    free(got[i]);
    free(want[i]);
  }
  free(send);
  return err_exit(rc);
}

START_TEST(every_collective_in_flight) {
  int p = 2 + _i; /* 2 .. 5 */
  job j;
  reports = reports_map();
  job_init(&j, p, 20);
  run_job(&j, rank_every_collective, NULL, 120);
  for (int r = 0; r < p; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "p = %d: rank %d exited %d: %s", p,
                  r, exit_code(&j, r), reports[r].errmsg);
}
END_TEST

/* 16 allreduces in flight, of sizes from 1 to 2^20 elements and of every
 * schedule, waited for by test, waitany and waitall. */
#define NMIXED 16
static const char *const mixed_schedules[] = {
    "auto", "circulant", "ring", "hypercube", "rabenseifner",
    "circulant-doubling", "circulant-linear", "allgather-reduce"};

static int rank_mixed(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *reqs[NMIXED];
  int64_t *buf[NMIXED];
  size_t len[NMIXED];
  int rc, left = NMIXED, bad = 0;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  for (int i = 0; i < NMIXED && rc == 0; i++) {
    len[i] = (size_t)1 << ((i * 7) % 21);
    buf[i] = malloc(sizeof(int64_t) * len[i]);
    for (size_t k = 0; k < len[i]; k++)
      buf[i][k] = (int64_t)(k * 3 + (size_t)i) * (rank + 1);
    rc = crnet_comm_set_schedule(
        c, CRNET_COLL_ALLREDUCE,
        mixed_schedules[i % (int)(sizeof mixed_schedules /
                                  sizeof mixed_schedules[0])]);
    if (rc == 0)
      rc = crnet_iallreduce(c, CRNET_IN_PLACE, buf[i], len[i], CRNET_INT64,
                            CRNET_SUM, &reqs[i]);
  }
  /* A few tested to completion from the back, a few by waitany, the rest
   * by waitall. */
  for (int i = NMIXED - 1; i >= NMIXED - 4 && rc == 0; i--) {
    int done = 0;
    while (rc == 0 && !done)
      rc = crnet_test(&reqs[i], &done);
    left--;
  }
  while (rc == 0 && left > NMIXED / 2) {
    int index;
    rc = crnet_waitany(NMIXED, reqs, &index);
    if (rc == 0 && (index < 0 || reqs[index] != NULL))
      rc = CRNET_EIO;
    left--;
  }
  if (rc == 0)
    rc = crnet_waitall(NMIXED, reqs);
  report_call(rank, c, rc);
  for (int i = 0; i < NMIXED && rc == 0; i++)
    for (size_t k = 0; k < len[i]; k++)
      if (buf[i][k] !=
          (int64_t)(k * 3 + (size_t)i) * (int64_t)size * (size + 1) / 2) {
        if (bad++ == 0)
          fprintf(stderr, "rank %d: allreduce %d (%zu elements) wrong at %zu\n",
                  rank, i, len[i], k);
        rc = CRNET_EIO;
      }
  rc = destroy_keeping(c, rc);
  for (int i = 0; i < NMIXED; i++)
    free(buf[i]);
  return err_exit(rc);
}

START_TEST(sixteen_mixed_in_flight) {
  int p = _i == 0 ? 4 : 3;
  job j;
  reports = reports_map();
  job_init(&j, p, 20);
  run_job(&j, rank_mixed, NULL, 120);
  for (int r = 0; r < p; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "p = %d: rank %d exited %d: %s", p,
                  r, exit_code(&j, r), reports[r].errmsg);
}
END_TEST

/* --- progress: completion while the program computes -------------------- */

#define PROGRESS_ELEMS (1u << 20) /* 8 MiB of doubles: many frames */

typedef struct progress_case {
  bool thread;
  double compute_s;
} progress_case;

static atomic_int completed;
static double completed_at;

static void note_completion(crnet_request *req, int status, void *arg) {
  (void)req;
  (void)arg;
  completed_at = now_s();
  atomic_store(&completed, status == 0 ? 1 : -1);
}

/* Pure computation for up to `s` seconds, or until the callback has said
 * the request completed: no crnet call. Returns the volatile sum so the
 * work is not optimised away. */
static double compute(double s) {
  volatile double acc = 0;
  double until = now_s() + s;
  while (now_s() < until && atomic_load(&completed) == 0)
    for (int k = 0; k < 10000; k++)
      acc = acc * 0.999 + 1.0;
  return acc;
}

static int rank_progress(int rank, int size, void *arg) {
  const progress_case *pc = arg;
  crnet_config cfg;
  crnet_comm *c;
  crnet_request *r;
  double *v = malloc(sizeof *v * PROGRESS_ELEMS);
  int rc;
  crnet_config_init(&cfg);
  cfg.progress_thread = pc->thread ? CRNET_PROGRESS_THREAD_ON
                                   : CRNET_PROGRESS_THREAD_OFF;
  rc = crnet_comm_init(&c, &cfg);
  if (rc != 0)
    return err_exit(rc);
  for (size_t i = 0; i < PROGRESS_ELEMS; i++)
    v[i] = (double)(i % 1000) + rank;
  /* Everyone in step first, so nobody's start waits for a late peer. */
  rc = crnet_barrier(c);
  if (rc == 0)
    rc = crnet_iallreduce(c, CRNET_IN_PLACE, v, PROGRESS_ELEMS, CRNET_DOUBLE,
                          CRNET_SUM, &r);
  if (rc == 0)
    rc = crnet_request_on_complete(r, note_completion, NULL);
  if (rc == 0) {
    double t0 = now_s();
    (void)compute(pc->compute_s);
    reports[rank].flag = atomic_load(&completed);
    reports[rank].t_event = atomic_load(&completed) ? completed_at - t0 : -1;
    rc = crnet_wait(&r);
  }
  for (size_t i = 0; rc == 0 && i < PROGRESS_ELEMS; i++)
    if (v[i] != (double)(i % 1000) * size + size * (size - 1) / 2.0)
      rc = CRNET_EIO;
  report_call(rank, c, rc);
  rc = destroy_keeping(c, rc);
  free(v);
  return err_exit(rc);
}

START_TEST(progress_thread_completes_while_computing) {
  progress_case pc = {.thread = true, .compute_s = 10};
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_progress, &pc, 60);
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
    ck_assert_msg(reports[r].flag == 1,
                  "rank %d: the request did not complete in %.0f s of "
                  "computation with the progress thread",
                  r, pc.compute_s);
    printf("progress thread: rank %d's 8 MiB allreduce completed %.1f ms "
           "into its computation\n",
           r, reports[r].t_event * 1e3);
  }
}
END_TEST

START_TEST(no_progress_thread_no_progress_outside_calls) {
  progress_case pc = {.thread = false, .compute_s = 0.5};
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_progress, &pc, 60);
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
    ck_assert_msg(reports[r].flag == 0,
                  "rank %d: 8 MiB completed outside crnet calls without a "
                  "progress thread (the test above proves nothing)",
                  r);
  }
}
END_TEST

/* The progress thread sleeps while it waits: rank 0 starts a call and
 * sleeps a second; rank 1 joins only once that second is over (rank 0's
 * signal), so nothing arrives in it; the CPU time rank 0's process spends
 * in that second (both threads) stays near zero. */
static int rank_idle(int rank, int size, void *arg) {
  crnet_config cfg;
  crnet_comm *c;
  crnet_request *r;
  int rc, v = 1, sum = 0;
  (void)arg;
  crnet_config_init(&cfg);
  cfg.progress_thread = CRNET_PROGRESS_THREAD_ON;
  rc = crnet_comm_init(&c, &cfg);
  if (rc != 0)
    return err_exit(rc);
  rc = crnet_barrier(c);
  if (rc == 0 && rank == 1 && !report_await(0, 30)) {
    fprintf(stderr, "rank 1: rank 0's second never ended\n");
    rc = CRNET_EIO;
  }
  if (rc == 0)
    rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0 && rank == 0) {
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    usleep(1000000);
    getrusage(RUSAGE_SELF, &b);
    reports[rank].t_event =
        (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) +
        (double)(b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
        (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec) / 1e6 +
        (double)(b.ru_stime.tv_usec - a.ru_stime.tv_usec) / 1e6;
    report_raise(0);
  }
  if (rank == 0 && rc != 0)
    report_raise(0); /* rank 1 need not wait 30 s to fail too */
  if (rc == 0)
    rc = crnet_wait(&r);
  if (rc == 0 && sum != size)
    rc = CRNET_EIO;
  report_call(rank, c, rc);
  rc = destroy_keeping(c, rc);
  return err_exit(rc);
}

START_TEST(progress_thread_sleeps_while_waiting) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_idle, NULL, 30);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
  printf("progress thread waiting 1 s for a peer: %.1f ms of CPU\n",
         reports[0].t_event * 1e3);
  ck_assert_msg(reports[0].t_event < test_seconds(0.05),
                "rank 0 used %.3f s of CPU in 1 s with a request in flight "
                "and nothing arriving",
                reports[0].t_event);
}
END_TEST

/* A callback run by the engine (rank 0's request completes while it waits
 * for another) calls again: its blocking call is refused, its nonblocking
 * one starts as call #3 and completes. Rank 1 makes the same calls without
 * a callback (calls a callback starts are numbered when it runs: the
 * program keeps the order the same on every rank). */
static int rank_callback_again(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *r, *other;
  int rc, v = rank + 1, sum = 0;
  nested n = {.blocking_rc = 1, .start_rc = 1, .wait_rc = 1};
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  n.c = c;
  /* Rank 1 starts only once rank 0's callback is set, so rank 0's request
   * is surely in flight then (its callback runs from the engine, not at
   * once on this thread, where a blocking call would be allowed). */
  if (rank == 1 && !report_await(0, 30))
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0 && rank == 0) {
    rc = crnet_request_on_complete(r, call_again, &n);
    report_raise(0);
  }
  if (rc == 0)
    rc = crnet_ibarrier(c, &other);
  if (rc == 0 && rank == 1) {
    n.blocking_rc = n.wait_rc = CRNET_EINVAL; /* as rank 0's callback */
    n.start_rc = crnet_ibarrier(c, &n.inner);
  }
  if (rc == 0)
    rc = crnet_wait(&other);
  if (rc == 0)
    rc = crnet_wait(&r);
  if (rc == 0 && n.start_rc == 0)
    rc = crnet_wait(&n.inner);
  report_call(rank, c, rc);
  if (rc == 0 && (sum != size * (size + 1) / 2 || n.start_rc != 0 ||
                  n.wait_rc != CRNET_EINVAL)) {
    fprintf(stderr, "rank %d: sum %d, in the callback: start %d, wait %d\n",
            rank, sum, n.start_rc, n.wait_rc);
    rc = CRNET_EIO;
  }
  /* The engine ran the callback (rank 0's request was in flight when the
   * callback was set): the blocking call in it was refused. */
  reports[rank].flag = n.blocking_rc;
  rc = destroy_keeping(c, rc);
  return err_exit(rc);
}

START_TEST(callback_calls_again) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_callback_again, NULL, 30);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
  ck_assert_msg(reports[0].flag == CRNET_EINVAL,
                "rank 0's blocking call in a callback the engine ran "
                "returned %d",
                reports[0].flag);
}
END_TEST

/* --- failure -------------------------------------------------------------- */

#define KILLED 3
#define NKILL 4

static int rank_killed(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *reqs[NKILL];
  static double buf[NKILL][1 << 16];
  int rc;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  rc = crnet_barrier(c);
  for (int i = 0; i < NKILL && rc == 0; i++)
    rc = crnet_iallreduce(c, CRNET_IN_PLACE, buf[i], 1 << 16, CRNET_DOUBLE,
                          CRNET_SUM, &reqs[i]);
  if (rc == 0 && rank != KILLED)
    report_raise(rank);
  if (rank == KILLED) {
    /* Dies with its requests and everyone else's in flight: once every
     * other rank has started all of its own (none can complete without
     * this rank). */
    for (int r = 0; r < size; r++)
      if (r != KILLED && !report_await(r, 30)) {
        fprintf(stderr, "rank %d: rank %d never started its requests\n", rank,
                r);
        _exit(EXIT_FAIL);
      }
    reports[rank].t_event = now_s();
    raise(SIGKILL);
  }
  if (rc == 0)
    rc = crnet_waitall(NKILL, reqs);
  report_call(rank, c, rc);
  for (int i = 0; i < NKILL; i++)
    if (reqs[i] != NULL)
      rc = CRNET_EIO; /* waitall frees them all */
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(killed_rank_fails_every_request) {
  job j;
  reports = reports_map();
  job_init(&j, 4, 20);
  run_job(&j, rank_killed, NULL, 30);
  ck_assert_msg(WIFSIGNALED(j.status[KILLED]) &&
                    WTERMSIG(j.status[KILLED]) == SIGKILL,
                "rank %d was not killed (exited %d): the others' requests "
                "were never all in flight",
                KILLED, exit_code(&j, KILLED));
  for (int r = 0; r < 4; r++) {
    const char *m = reports[r].errmsg;
    double dt = reports[r].returned - reports[KILLED].t_event;
    if (r == KILLED)
      continue;
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EPEER),
                  "rank %d exited %d: %s", r, exit_code(&j, r), m);
    ck_assert_msg(strstr(m, "rank 3") != NULL, "rank %d: %s", r, m);
    ck_assert_msg(dt < test_seconds(2.0),
                  "rank %d returned %.3f s after the kill", r, dt);
  }
}
END_TEST

/* Ranks 0 and 1 start an allreduce and a bcast; rank 2 an allreduce and a
 * reduce: the second calls in flight mismatch. */
static int rank_mismatch(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *reqs[2];
  int v[16] = {0}, w[16] = {0}, rc;
  (void)size;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  rc = crnet_iallreduce(c, CRNET_IN_PLACE, v, 16, CRNET_INT32, CRNET_SUM,
                        &reqs[0]);
  if (rc == 0)
    rc = rank == 2 ? crnet_ireduce(c, CRNET_IN_PLACE, w, 16, CRNET_INT32,
                                   CRNET_SUM, 2, &reqs[1])
                   : crnet_ibcast(c, w, 16, CRNET_INT32, 0, &reqs[1]);
  if (rc == 0) {
    int rc0 = crnet_wait(&reqs[0]);
    rc = crnet_wait(&reqs[1]);
    (void)rc0; /* the first may well have completed before */
  }
  /* The bcast's root may have finished its part, all sends, before the
   * mismatch was seen: its next call meets the sticky error. */
  if (rc == 0)
    rc = crnet_barrier(c);
  report_call(rank, c, rc);
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(mismatch_between_calls_in_flight) {
  job j;
  reports = reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_mismatch, NULL, 30);
  for (int r = 0; r < 3; r++) {
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EMISMATCH),
                  "rank %d exited %d: %s", r, exit_code(&j, r),
                  reports[r].errmsg);
    ck_assert_msg(strstr(reports[r].errmsg, "#2") != NULL,
                  "rank %d: the message names no second call: %s", r,
                  reports[r].errmsg);
  }
}
END_TEST

static int rank_destroy_early(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *r;
  int rc, v = rank + 1, sum = 0;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  /* Rank 1 starts only once rank 0 tried to destroy: rank 0's request is
   * surely in flight then. */
  if (rank == 1 && !report_await(0, 30))
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0 && rank == 0) {
    int d = crnet_comm_destroy(c);
    if (d != CRNET_EINVAL ||
        strstr(crnet_comm_errmsg(c), "in flight") == NULL) {
      fprintf(stderr, "destroy with a request in flight: %d (%s)\n", d,
              crnet_comm_errmsg(c));
      rc = CRNET_EIO;
    }
    report_raise(0);
  }
  if (rc == 0)
    rc = crnet_wait(&r);
  if (rc == 0 && sum != size * (size + 1) / 2)
    rc = CRNET_EIO;
  report_call(rank, c, rc);
  rc = destroy_keeping(c, rc);
  return err_exit(rc);
}

START_TEST(destroy_refuses_while_in_flight) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_destroy_early, NULL, 30);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
}
END_TEST

/* CRNET_TIMEOUT=1: rank 1 starts its call only once rank 0's has timed
 * out (rank 0's signal); rank 0's request, started at once and then left
 * alone while rank 0 computes for 1.5 s, times out counted from its
 * start. */
static int rank_timeout(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *r;
  int rc, v = 1, sum = 0;
  (void)size;
  (void)arg;
  setenv("CRNET_TIMEOUT", "1", 1);
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  if (rank == 1 && !report_await(0, 30)) {
    fprintf(stderr, "rank 1: rank 0's wait never returned\n");
    crnet_comm_destroy(c);
    return EXIT_FAIL;
  }
  reports[rank].t_event = now_s();
  rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0 && rank == 0)
    usleep(1500000);
  if (rc == 0)
    rc = crnet_wait(&r);
  report_call(rank, c, rc);
  if (rank == 0)
    report_raise(0);
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(timeout_counts_from_the_start) {
  job j;
  double dt;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_timeout, NULL, 30);
  dt = reports[0].returned - reports[0].t_event;
  ck_assert_msg(exit_code(&j, 0) == err_exit(CRNET_ETIMEDOUT),
                "rank 0 exited %d: %s", exit_code(&j, 0), reports[0].errmsg);
  ck_assert_msg(strstr(reports[0].errmsg, "waiting for rank 1") != NULL,
                "%s", reports[0].errmsg);
  ck_assert_msg(dt >= 1.4 && dt < 1.5 + test_seconds(1.5),
                "rank 0's wait returned %.3f s after the start", dt);
}
END_TEST

static int rank_abort(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *r;
  int rc, v = 1, sum = 0;
  (void)size;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  if (rank == 2) {
    /* Once the others' requests are in flight (they cannot complete
     * without this rank). */
    for (int q = 0; q < 2; q++)
      if (!report_await(q, 30)) {
        fprintf(stderr, "rank 2: rank %d never started its call\n", q);
        _exit(EXIT_FAIL);
      }
    crnet_comm_abort(c, 5);
    crnet_comm_destroy(c);
    return EXIT_OK;
  }
  rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0)
    report_raise(rank);
  if (rc == 0)
    rc = crnet_wait(&r);
  report_call(rank, c, rc);
  reports[rank].flag = crnet_comm_abort_code(c);
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(abort_completes_requests) {
  job j;
  reports = reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_abort, NULL, 30);
  ck_assert_msg(exit_code(&j, 2) == EXIT_OK, "rank 2 exited %d",
                exit_code(&j, 2));
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EABORTED),
                  "rank %d exited %d: %s", r, exit_code(&j, r),
                  reports[r].errmsg);
    ck_assert_int_eq(reports[r].flag, 5);
  }
}
END_TEST

/* Rank 0 aborts with its own request in flight: the abort completes it. */
static int rank_abort_own(int rank, int size, void *arg) {
  crnet_comm *c;
  crnet_request *r;
  int rc, v = 1, sum = 0;
  (void)size;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  /* Rank 1 starts only once rank 0 has aborted: rank 0's request is surely
   * in flight at its abort. */
  if (rank == 1 && !report_await(0, 30))
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0 && rank == 0) {
    crnet_comm_abort(c, 9);
    report_raise(0);
  }
  if (rc == 0)
    rc = crnet_wait(&r);
  /* Rank 1's call may have been done whole before the ABORT came behind
   * rank 0's data: then its next one fails. Rank 0's cannot have been
   * (rank 1 had not started). */
  if (rc == 0 && rank == 1)
    rc = crnet_barrier(c);
  report_call(rank, c, rc);
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(abort_completes_own_requests) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_abort_own, NULL, 30);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EABORTED),
                  "rank %d exited %d: %s", r, exit_code(&j, r),
                  reports[r].errmsg);
}
END_TEST

/* A watchdog thread aborts while the main thread waits for a peer that
 * does not come (rank 1 starts its call only once rank 0's wait has
 * returned): the wait returns CRNET_EABORTED at once, whoever runs the
 * loop. The watchdog aborts once the main thread is seen asleep in its
 * wait (it notes in `seen` whether it was). */
typedef struct watched {
  crnet_comm *c;
  pid_t waiter; /* the main thread */
  int seen;
  double t_abort;
} watched;

static void *watchdog(void *arg) {
  watched *w = arg;
  w->seen = thread_asleep_await(w->waiter, 30);
  w->t_abort = now_s();
  crnet_comm_abort(w->c, 7);
  return NULL;
}

static int rank_watchdog(int rank, int size, void *arg) {
  const bool *thread = arg;
  crnet_config cfg;
  crnet_comm *c;
  crnet_request *r;
  pthread_t t;
  int rc, v = 1, sum = 0;
  double returned;
  (void)size;
  crnet_config_init(&cfg);
  cfg.progress_thread =
      *thread ? CRNET_PROGRESS_THREAD_ON : CRNET_PROGRESS_THREAD_OFF;
  rc = crnet_comm_init(&c, &cfg);
  if (rc != 0)
    return err_exit(rc);
  if (rank == 1) {
    if (!report_await(0, 60)) {
      fprintf(stderr, "rank 1: rank 0's wait never returned\n");
      crnet_comm_destroy(c);
      return EXIT_FAIL;
    }
    /* Rank 0's frame and then its ABORT wait for rank 1. If its init
     * read the frame already (parked), the call completes from it before
     * the loop reads the ABORT behind: then the next call meets it. */
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    if (rc == 0)
      rc = crnet_barrier(c);
    report_call(rank, c, rc);
    crnet_comm_destroy(c);
    return err_exit(rc);
  }
  rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &r);
  if (rc == 0) {
    watched w = {c, thread_id(), 0, 0};
    pthread_create(&t, NULL, watchdog, &w);
    rc = crnet_wait(&r);
    returned = now_s();
    pthread_join(t, NULL);
    reports[rank].seen = w.seen;
    reports[rank].t_event = returned - w.t_abort;
  }
  report_call(rank, c, rc);
  report_raise(rank);
  reports[rank].flag = crnet_comm_abort_code(c);
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(watchdog_thread_aborts_a_wait) {
  bool thread = _i == 0;
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_watchdog, &thread, 30);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EABORTED),
                  "progress thread %s: rank %d exited %d: %s",
                  thread ? "on" : "off", r, exit_code(&j, r),
                  reports[r].errmsg);
  ck_assert_int_eq(reports[0].flag, 7);
  ck_assert_msg(reports[0].seen,
                "the watchdog never saw rank 0's main thread asleep in its "
                "wait (it aborted after 30 s)");
  /* Nothing but the abort ends the wait (rank 1 comes after it). */
  ck_assert_msg(reports[0].t_event < test_seconds(5.0),
                "rank 0's wait returned %.2f s after the abort",
                reports[0].t_event);
}
END_TEST

/* --- threads --------------------------------------------------------------- */

#define NTHREADED 200

typedef struct handoff {
  crnet_comm *c;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  crnet_request *reqs[NTHREADED];
  int64_t *bufs[NTHREADED];
  int started, waited, rc;
  atomic_int stop;
} handoff;

static size_t threaded_len(int i) { return (size_t)1 << (i % 5 * 3); }

static void *starter(void *arg) {
  handoff *h = arg;
  for (int i = 0; i < NTHREADED; i++) {
    crnet_request *r;
    int rc = crnet_iallreduce(h->c, CRNET_IN_PLACE, h->bufs[i],
                              threaded_len(i), CRNET_INT64, CRNET_SUM, &r);
    pthread_mutex_lock(&h->mu);
    if (rc != 0 && h->rc == 0)
      h->rc = rc;
    h->reqs[i] = r;
    h->started = i + 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (rc != 0)
      break;
  }
  return NULL;
}

static void *waiter(void *arg) {
  handoff *h = arg;
  for (int i = 0; i < NTHREADED; i++) {
    crnet_request *r;
    int rc;
    pthread_mutex_lock(&h->mu);
    while (h->started <= i && h->rc == 0)
      pthread_cond_wait(&h->cv, &h->mu);
    r = h->started > i ? h->reqs[i] : NULL;
    pthread_mutex_unlock(&h->mu);
    if (r == NULL)
      break;
    rc = crnet_wait(&r);
    pthread_mutex_lock(&h->mu);
    if (rc != 0 && h->rc == 0)
      h->rc = rc;
    h->waited = i + 1;
    pthread_mutex_unlock(&h->mu);
  }
  atomic_store(&h->stop, 1);
  return NULL;
}

static void *reader(void *arg) {
  handoff *h = arg;
  while (!atomic_load(&h->stop)) {
    crnet_coll_stats st;
    crnet_peer_stats ps;
    (void)crnet_comm_errmsg(h->c);
    (void)crnet_comm_coll_stats(h->c, CRNET_COLL_ALLREDUCE, &st);
    (void)crnet_comm_peer_stats(h->c, 0, &ps);
    (void)crnet_comm_abort_code(h->c);
    usleep(100);
  }
  return NULL;
}

static int rank_threads(int rank, int size, void *arg) {
  const bool *thread = arg;
  crnet_config cfg;
  handoff h;
  pthread_t t[3];
  int rc;
  memset(&h, 0, sizeof h);
  pthread_mutex_init(&h.mu, NULL);
  pthread_cond_init(&h.cv, NULL);
  crnet_config_init(&cfg);
  cfg.progress_thread =
      *thread ? CRNET_PROGRESS_THREAD_ON : CRNET_PROGRESS_THREAD_OFF;
  rc = crnet_comm_init(&h.c, &cfg);
  if (rc != 0)
    return err_exit(rc);
  for (int i = 0; i < NTHREADED; i++) {
    h.bufs[i] = malloc(sizeof(int64_t) * threaded_len(i));
    for (size_t k = 0; k < threaded_len(i); k++)
      h.bufs[i][k] = (int64_t)(k + (size_t)i) * (rank + 1);
  }
  pthread_create(&t[0], NULL, starter, &h);
  pthread_create(&t[1], NULL, waiter, &h);
  pthread_create(&t[2], NULL, reader, &h);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  rc = h.rc;
  if (rc == 0 && h.waited != NTHREADED)
    rc = CRNET_EIO;
  for (int i = 0; i < NTHREADED && rc == 0; i++)
    for (size_t k = 0; k < threaded_len(i); k++)
      if (h.bufs[i][k] != (int64_t)(k + (size_t)i) * size * (size + 1) / 2) {
        fprintf(stderr, "rank %d: allreduce %d wrong at %zu\n", rank, i, k);
        rc = CRNET_EIO;
        break;
      }
  report_call(rank, h.c, rc);
  rc = destroy_keeping(h.c, rc);
  for (int i = 0; i < NTHREADED; i++)
    free(h.bufs[i]);
  return err_exit(rc);
}

START_TEST(threads_share_a_comm) {
  bool thread = _i == 0;
  job j;
  reports = reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_threads, &thread, 120);
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == 0,
                  "progress thread %s: rank %d exited %d: %s",
                  thread ? "on" : "off", r, exit_code(&j, r),
                  reports[r].errmsg);
}
END_TEST

/* A request in flight on the progress thread while the program waits for
 * another: a wait that finds its request complete but its callback still
 * running asks the thread for the loop and sleeps; the thread gives the
 * loop up for it after the callback, and the waiter, its request now
 * complete and idle, returns without taking the loop. The thread must get
 * the loop back then: the program here never calls crnet while it waits
 * for the first request, so only the progress thread can complete it
 * (before the fix it slept on, and the request never completed). */
#define HANDBACK_ROUNDS 50

static void flag_done(crnet_request *r, int status, void *arg) {
  (void)r;
  (void)status;
  __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

/* The send's callback. The program waits for the send only once it has
 * begun (`entered`). On the progress thread it returns only once that wait
 * has met the send complete and this callback busy, and gone to sleep
 * asking for the loop (w->wanting, or leaning on the thread), or after
 * 10 s; `met` counts the rounds where it did, `on_thread` those where it
 * ran on the progress thread, so the test knows that the path it is about
 * ran. Where the send was complete when the program set the callback (it
 * runs at once, on the program's thread), it returns at once. */
typedef struct handback {
  crnet_comm *c;
  pthread_t program;
  atomic_int entered;
  int met, on_thread;
} handback;

static void slow_callback(crnet_request *r, int status, void *arg) {
  handback *h = arg;
  double until = now_s() + test_seconds(10);
  (void)r;
  (void)status;
  atomic_store(&h->entered, 1);
  if (pthread_equal(pthread_self(), h->program))
    return;
  h->on_thread++;
  while (now_s() < until) {
    bool asleep;
    pthread_mutex_lock(&h->c->w->mu);
    asleep = h->c->w->wanting > 0 || atomic_load(&h->c->w->leaning) > 0;
    pthread_mutex_unlock(&h->c->w->mu);
    if (asleep) {
      h->met++;
      return;
    }
    usleep(100);
  }
}

static int rank_handback(int rank, int size, void *arg) {
  crnet_config cfg;
  crnet_comm *c;
  handback h;
  int rc;
  (void)size;
  (void)arg;
  setenv("CRNET_SPIN_US", "1000", 1); /* a wait asks for the loop */
  crnet_config_init(&cfg);
  cfg.progress_thread = CRNET_PROGRESS_THREAD_ON;
  rc = crnet_comm_init(&c, &cfg);
  if (rc != 0)
    return err_exit(rc);
  h.c = c;
  h.program = pthread_self();
  atomic_init(&h.entered, 0);
  h.met = h.on_thread = 0;
  for (int i = 0; i < HANDBACK_ROUNDS && rc == 0; i++) {
    int64_t x = i, late = -1;
    if (rank == 0) {
      crnet_request *r, *s;
      int done = 0;
      double t0;
      rc = crnet_irecv(c, &late, 1, CRNET_INT64, 1, 3, NULL, &r);
      if (rc == 0)
        rc = crnet_request_on_complete(r, flag_done, &done);
      if (rc == 0)
        rc = crnet_isend(c, &x, 1, CRNET_INT64, 1, 1, &s);
      if (rc == 0)
        rc = crnet_request_on_complete(s, slow_callback, &h);
      t0 = now_s();
      while (rc == 0 && !atomic_load(&h.entered)) {
        if (now_s() - t0 > test_seconds(10.0)) {
          fprintf(stderr,
                  "rank 0: round %d: an 8-byte send was not "
                  "complete 10 s later\n",
                  i);
          return err_exit(CRNET_ETIMEDOUT);
        }
        usleep(100);
      }
      atomic_store(&h.entered, 0);
      if (rc == 0)
        rc = crnet_wait(&s);
      t0 = now_s();
      while (rc == 0 && !__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        if (now_s() - t0 > test_seconds(10.0)) {
          fprintf(stderr, "rank 0: round %d: a receive whose message came "
                          "was not complete 10 s later\n", i);
          return err_exit(CRNET_ETIMEDOUT);
        }
        usleep(100);
      }
      if (rc == 0)
        rc = crnet_wait(&r);
      if (rc == 0 && late != i)
        rc = CRNET_EIO;
    } else {
      rc = crnet_recv(c, &x, 1, CRNET_INT64, 0, 1, NULL);
      if (rc == 0)
        rc = crnet_send(c, &x, 1, CRNET_INT64, 0, 3);
    }
  }
  reports[rank].flag = h.met;
  reports[rank].seen = h.on_thread;
  report_call(rank, c, rc);
  rc = destroy_keeping(c, rc);
  return err_exit(rc);
}

START_TEST(progress_thread_gets_the_loop_back) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_handback, NULL, 120);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(exit_code(&j, r) == 0, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
  printf("loop handed back: in %d of %d rounds the wait met the send "
         "complete, its callback busy on the progress thread\n",
         reports[0].flag, HANDBACK_ROUNDS);
  ck_assert_msg(reports[0].flag == reports[0].seen,
                "the callback ran on the progress thread in %d rounds, and "
                "the wait met it busy in only %d",
                reports[0].seen, reports[0].flag);
  ck_assert_msg(reports[0].flag > 0,
                "in none of %d rounds did the send's callback run on the "
                "progress thread (the case never ran)",
                HANDBACK_ROUNDS);
}
END_TEST

static Suite *requests_suite(bool unit_only) {
  Suite *s = suite_create("requests");
  TCase *t = tcase_create("args");
  tcase_add_test(t, misuse_is_refused);
  suite_add_tcase(s, t);
  if (unit_only)
    return s;

  t = tcase_create("flight");
  tcase_set_timeout(t, 240);
  tcase_add_loop_test(t, every_collective_in_flight, 0, 4);
  tcase_add_loop_test(t, sixteen_mixed_in_flight, 0, 2);
  suite_add_tcase(s, t);

  t = tcase_create("progress");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, progress_thread_completes_while_computing);
  tcase_add_test(t, no_progress_thread_no_progress_outside_calls);
  tcase_add_test(t, callback_calls_again);
  tcase_add_test(t, progress_thread_sleeps_while_waiting);
  tcase_add_test(t, progress_thread_gets_the_loop_back);
  suite_add_tcase(s, t);

  t = tcase_create("failure");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, killed_rank_fails_every_request);
  tcase_add_test(t, mismatch_between_calls_in_flight);
  tcase_add_test(t, destroy_refuses_while_in_flight);
  tcase_add_test(t, timeout_counts_from_the_start);
  tcase_add_test(t, abort_completes_requests);
  tcase_add_test(t, abort_completes_own_requests);
  suite_add_tcase(s, t);

  t = tcase_create("threads");
  tcase_set_timeout(t, 240);
  tcase_add_loop_test(t, threads_share_a_comm, 0, 2);
  tcase_add_loop_test(t, watchdog_thread_aborts_a_wait, 0, 2);
  suite_add_tcase(s, t);
  return s;
}

int main(int argc, char **argv) {
  bool unit_only = argc > 1 && strcmp(argv[1], "unit") == 0;
  return check_run(requests_suite(unit_only));
}
