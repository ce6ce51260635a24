/* Point-to-point messages through real ranks on loopback (netjob.h): order,
 * tags and wildcards, statuses, messages that come before their receive
 * (eager and rendezvous), truncation, messages to oneself, sendrecv,
 * messages on sub-communicators and beside collectives, the memory a
 * flood of unexpected messages takes, probes, a lost peer, and misuse.
 *
 * Cases (CK_RUN_CASE): "order", "unexpected", "edges", "comms", "memory",
 * "failure", "abort-write", "probe", "ssend", "left"; argument "unit" runs the
 * argument checks in a job of one. Messages with the progress thread, and from
 * threads of their own beside the world's collectives (for ThreadSanitizer,
 * suite `threads`): the case "p2p-threads" of test_comms.c.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "comm.h" /* the left case reads whether a goodbye came */
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

#define CALL(expr)                                                             \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    FAIL_IF(rc_ != 0, "%s: %s: %s", #expr, crnet_err_name(rc_),                \
            crnet_comm_errmsg(c));                                             \
  } while (0)

static crnet_comm *init_or_die(int rank) {
  crnet_comm *c = NULL;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    exit(EXIT_FAIL);
  }
  return c;
}

/* Byte i of message `id` from rank `src`. */
static uint8_t pattern(int src, int id, size_t i) {
  return (uint8_t)(src * 131 + id * 31 + i * 7 + (i >> 9));
}

static void fill(uint8_t *b, size_t n, int src, int id) {
  for (size_t i = 0; i < n; i++)
    b[i] = pattern(src, id, i);
}

static bool check(const uint8_t *b, size_t n, int src, int id) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pattern(src, id, i))
      return false;
  return true;
}

/* Sizes across the eager bound and beyond. */
static const size_t sizes[] = {
    0, 1, 1000, CRNET_EAGER_BYTES, CRNET_EAGER_BYTES + 1, 3 << 20, 17};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* --- order: non-overtaking, tags, wildcards, statuses ----------------------
 */

static int rank_order(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  uint8_t *buf = malloc(3 << 20);
  crnet_status st;
  (void)arg;
  FAIL_IF(buf == NULL, "out of memory");
  if (rank == 0) {
    /* Every size, twice, alternating two tags: nonblocking, since rank 1
     * receives them out of order (a blocking send of a rendezvous size
     * would wait for its receive, as in MPI). */
    enum { M = 2 * NSIZES };
    crnet_request *r[M];
    uint8_t *b[M];
    for (int k = 0; k < M; k++) {
      b[k] = malloc(sizes[k % NSIZES] + 1);
      FAIL_IF(b[k] == NULL, "out of memory");
      fill(b[k], sizes[k % NSIZES], 0, k);
      CALL(crnet_isend(c, b[k], sizes[k % NSIZES], CRNET_UINT8, 1, k % 2,
                       &r[k]));
    }
    CALL(crnet_waitall(M, r));
    for (int k = 0; k < M; k++)
      free(b[k]);
  } else if (rank == 1) {
    /* Tag 1 first: the tag-0 messages before them wait, in order. */
    for (int k = 1; k < 2 * (int)NSIZES; k += 2) {
      CALL(crnet_recv(c, buf, 3 << 20, CRNET_UINT8, 0, 1, &st));
      FAIL_IF(st.source != 0 || st.tag != 1 || st.bytes != sizes[k % NSIZES] ||
                  st.error != 0,
              "status %d/%d/%zu/%d for message %d", st.source, st.tag, st.bytes,
              st.error, k);
      FAIL_IF(!check(buf, st.bytes, 0, k), "message %d's bytes", k);
    }
    for (int k = 0; k < 2 * (int)NSIZES; k += 2) {
      CALL(crnet_recv(c, buf, 3 << 20, CRNET_UINT8, CRNET_ANY_SOURCE,
                      CRNET_ANY_TAG, &st));
      FAIL_IF(st.source != 0 || st.tag != 0 || st.bytes != sizes[k % NSIZES],
              "wildcard status %d/%d/%zu for message %d", st.source, st.tag,
              st.bytes, k);
      FAIL_IF(!check(buf, st.bytes, 0, k), "message %d's bytes", k);
    }
  }
  /* Every rank but 0 sends rank 0 one message, tag = its rank; rank 0
   * takes them from any source and checks each status. */
  if (rank != 0) {
    fill(buf, 100 + (size_t)rank, rank, 1000);
    CALL(crnet_send(c, buf, 100 + (size_t)rank, CRNET_UINT8, 0, rank));
  } else {
    int seen = 0;
    for (int k = 1; k < size; k++) {
      CALL(crnet_recv(c, buf, 4096, CRNET_UINT8, CRNET_ANY_SOURCE,
                      CRNET_ANY_TAG, &st));
      FAIL_IF(st.tag != st.source || st.bytes != 100 + (size_t)st.source,
              "status %d/%d/%zu", st.source, st.tag, st.bytes);
      FAIL_IF(!check(buf, st.bytes, st.source, 1000), "bytes of %d", st.source);
      seen |= 1 << st.source;
    }
    FAIL_IF(seen != (1 << size) - 2, "sources seen %x", seen);
  }
  /* A ring shift with sendrecv (after a barrier: rank 0's wildcards above
   * would take its message). */
  CALL(crnet_barrier(c));
  {
    int64_t out[3] = {rank, rank * 2, rank * 3}, in[3] = {-1, -1, -1};
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    CALL(crnet_sendrecv(c, out, 3, CRNET_INT64, right, 7, in, 3, CRNET_INT64,
                        left, 7, &st));
    FAIL_IF(in[0] != left || in[2] != 3 * left || st.source != left,
            "sendrecv got %lld from %d", (long long)in[0], st.source);
  }
  free(buf);
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(order_tags_wildcards) {
  static const int ps[] = {2, 3, 5};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    job j;
    job_init(&j, ps[i], 30);
    run_job(&j, rank_order, NULL, 120);
    expect_all_ok(&j, __func__);
  }
}
END_TEST

/* --- unexpected: messages that come before their receive ------------------ */

static int rank_unexpected(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  enum { N = 64 };
  uint8_t *bufs[N];
  crnet_request *req[N];
  int done = 0;
  crnet_status st;
  (void)arg;
  (void)size;
  for (int k = 0; k < N; k++) {
    bufs[k] = malloc(sizes[k % NSIZES] + 1);
    FAIL_IF(bufs[k] == NULL, "out of memory");
  }
  if (rank == 0) {
    for (int k = 0; k < N; k++) {
      fill(bufs[k], sizes[k % NSIZES], 0, k);
      CALL(crnet_isend(c, bufs[k], sizes[k % NSIZES], CRNET_UINT8, 1, k,
                       &req[k]));
    }
    CALL(crnet_barrier(c));
    /* Rank 1 has posted nothing yet: a rendezvous send cannot be done. */
    CALL(crnet_test(&req[5], &done));
    FAIL_IF(done, "a 3 MiB send completed before its receive was posted");
    CALL(crnet_barrier(c));
    CALL(crnet_waitall(N, req));
  } else if (rank == 1) {
    CALL(crnet_barrier(c));
    CALL(crnet_barrier(c));
    /* In reverse order of tags: everything waits unexpected. */
    for (int k = N - 1; k >= 0; k--) {
      CALL(crnet_recv(c, bufs[k], sizes[k % NSIZES], CRNET_UINT8, 0, k, &st));
      FAIL_IF(st.bytes != sizes[k % NSIZES] || !check(bufs[k], st.bytes, 0, k),
              "message %d", k);
    }
  } else {
    CALL(crnet_barrier(c));
    CALL(crnet_barrier(c));
  }
  /* Collectives and messages in between: an isend before an allreduce,
   * received after it. */
  {
    int64_t v = rank, x = 42 + rank, y = -1;
    crnet_request *s = NULL;
    if (rank == 0)
      CALL(crnet_isend(c, &x, 1, CRNET_INT64, 1, 3, &s));
    CALL(crnet_allreduce(c, CRNET_IN_PLACE, &v, 1, CRNET_INT64, CRNET_SUM));
    if (rank == 1) {
      CALL(crnet_recv(c, &y, 1, CRNET_INT64, 0, 3, NULL));
      FAIL_IF(y != 42, "got %lld", (long long)y);
    }
    if (rank == 0)
      CALL(crnet_wait(&s));
  }
  for (int k = 0; k < N; k++)
    free(bufs[k]);
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(unexpected_messages) {
  job j;
  job_init(&j, 3, 30);
  run_job(&j, rank_unexpected, NULL, 120);
  expect_all_ok(&j, __func__);
}
END_TEST

/* --- edges: truncation, oneself ----------------------------------------------
 */

static int rank_edges(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  uint8_t small[10], *big = malloc(1 << 20), *out = malloc(1 << 20);
  crnet_status st;
  crnet_request *r;
  int rc;
  (void)arg;
  (void)size;
  FAIL_IF(big == NULL || out == NULL, "out of memory");
  if (rank == 0) {
    fill(out, 1 << 20, 0, 1);
    CALL(crnet_send(c, out, 100, CRNET_UINT8, 1, 1));     /* eager */
    CALL(crnet_send(c, out, 1 << 20, CRNET_UINT8, 1, 1)); /* rendezvous */
    CALL(crnet_send(c, out, 5, CRNET_UINT8, 1, 1));       /* intact */
    CALL(crnet_send(c, out, 1 << 20, CRNET_UINT8, 1, 2)); /* intact */
  } else if (rank == 1) {
    for (int k = 0; k < 2; k++) {
      rc = crnet_recv(c, small, sizeof small, CRNET_UINT8, 0, 1, &st);
      FAIL_IF(rc != CRNET_ETRUNCATE || st.error != CRNET_ETRUNCATE,
              "recv %d: %s, want CRNET_ETRUNCATE", k, crnet_err_name(rc));
      FAIL_IF(st.bytes != (k == 0 ? 100u : 1u << 20), "truncated size %zu",
              st.bytes);
      FAIL_IF(strstr(crnet_comm_errmsg(c),
                     k == 0 ? "100 bytes" : "1048576 bytes") == NULL ||
                  strstr(crnet_comm_errmsg(c), "the 10 of") == NULL,
              "message: %s", crnet_comm_errmsg(c));
    }
    CALL(crnet_recv(c, small, sizeof small, CRNET_UINT8, 0, 1, &st));
    FAIL_IF(st.bytes != 5 || !check(small, 5, 0, 1), "after truncation");
    CALL(crnet_recv(c, big, 1 << 20, CRNET_UINT8, 0, 2, &st));
    FAIL_IF(!check(big, 1 << 20, 0, 1), "large after truncation");
  }
  /* To oneself: small blocking (kept), large nonblocking (in place). */
  fill(out, 1 << 20, rank, 9);
  CALL(crnet_send(c, out, 300, CRNET_UINT8, rank, 4));
  CALL(crnet_recv(c, big, 1 << 20, CRNET_UINT8, rank, 4, &st));
  FAIL_IF(st.bytes != 300 || st.source != rank || !check(big, 300, rank, 9),
          "small to self");
  CALL(crnet_isend(c, out, 1 << 20, CRNET_UINT8, rank, 5, &r));
  CALL(crnet_recv(c, big, 1 << 20, CRNET_UINT8, CRNET_ANY_SOURCE, 5, &st));
  CALL(crnet_wait(&r));
  FAIL_IF(!check(big, 1 << 20, rank, 9), "large to self");
  free(big);
  free(out);
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(truncation_and_self) {
  job j;
  job_init(&j, 2, 30);
  run_job(&j, rank_edges, NULL, 120);
  expect_all_ok(&j, __func__);
}
END_TEST

/* --- comms: messages of a sub-comm and of the world never meet ------------ */

static int rank_comms(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank), *d = NULL, *rev = NULL;
  int64_t a = -1, b = -1;
  crnet_request *r[2];
  (void)arg;
  CALL(crnet_comm_dup(c, &d));
  CALL(crnet_comm_split(c, 0, size - rank, &rev)); /* ranks reversed */
  /* The same tag on the world and on the dup: each gets its own. */
  if (rank == 0) {
    int64_t x = 100, y = 200;
    CALL(crnet_send(c, &x, 1, CRNET_INT64, 1, 9));
    CALL(crnet_send(d, &y, 1, CRNET_INT64, 1, 9));
  } else if (rank == 1) {
    CALL(crnet_irecv(d, &b, 1, CRNET_INT64, 0, 9, NULL, &r[0]));
    CALL(crnet_irecv(c, &a, 1, CRNET_INT64, 0, 9, NULL, &r[1]));
    CALL(crnet_waitall(2, r));
    FAIL_IF(a != 100 || b != 200, "world got %lld, dup %lld", (long long)a,
            (long long)b);
  }
  /* On the reversed comm, rank numbers are its own. */
  {
    int me = crnet_comm_rank(rev), n = crnet_comm_size(rev);
    int64_t v = me, got = -1;
    crnet_status st;
    CALL(crnet_sendrecv(rev, &v, 1, CRNET_INT64, (me + 1) % n, 0, &got, 1,
                        CRNET_INT64, (me + n - 1) % n, 0, &st));
    FAIL_IF(got != (me + n - 1) % n || st.source != (me + n - 1) % n,
            "reversed comm: got %lld from %d", (long long)got, st.source);
  }
  CALL(crnet_comm_destroy(rev));
  CALL(crnet_comm_destroy(d));
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(messages_keep_to_their_comm) {
  job j;
  job_init(&j, 4, 30);
  run_job(&j, rank_comms, NULL, 60);
  expect_all_ok(&j, __func__);
}
END_TEST

/* --- memory: a flood of unexpected messages ------------------------------- */

#define FLOOD 2000
#define FLOOD_BYTES (32 * 1024) /* 62.5 MiB in all */

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return v;
}

/* Rank 0 sends 2000 messages of 32 KiB that rank 1 receives only after a
 * last message it waits for: they all come unexpected. What rank 1 holds
 * meanwhile is bounded by the eager budget, not by the 62.5 MiB sent. */
static int rank_memory(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  uint8_t *buf = malloc(FLOOD_BYTES);
  (void)arg;
  (void)size;
  FAIL_IF(buf == NULL, "out of memory");
  if (rank == 0) {
    crnet_request **r = calloc(FLOOD, sizeof *r);
    FAIL_IF(r == NULL, "out of memory");
    fill(buf, FLOOD_BYTES, 0, 0);
    for (int k = 0; k < FLOOD; k++)
      CALL(crnet_isend(c, buf, FLOOD_BYTES, CRNET_UINT8, 1, 1, &r[k]));
    CALL(crnet_send(c, buf, 1, CRNET_UINT8, 1, 2));
    CALL(crnet_waitall(FLOOD, r));
    free(r);
  } else {
    long before = rss_kib(), after;
    CALL(crnet_recv(c, buf, 1, CRNET_UINT8, 0, 2, NULL));
    after = rss_kib();
    reports[rank].flag = (int)(after - before);
    for (int k = 0; k < FLOOD; k++) {
      crnet_status st;
      CALL(crnet_recv(c, buf, FLOOD_BYTES, CRNET_UINT8, 0, 1, &st));
      FAIL_IF(st.bytes != FLOOD_BYTES || !check(buf, FLOOD_BYTES, 0, 0),
              "message %d", k);
    }
  }
  free(buf);
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(unexpected_memory_is_bounded) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 30);
  run_job(&j, rank_memory, NULL, 120);
  expect_all_ok(&j, __func__);
  printf("rank 1 grew by %d KiB holding 2000 unexpected 32 KiB messages "
         "(62.5 MiB sent)\n",
         reports[1].flag);
  /* The budget (4 MiB) plus an announcement per message and the
   * allocator's slack; far below what was sent. */
  ck_assert_msg(reports[1].flag < 16 * 1024, "rank 1 grew by %d KiB",
                reports[1].flag);
}
END_TEST

/* --- failure: a lost peer ends a receive -------------------------------------
 */

static int rank_failure(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  int64_t x = 0;
  int rc;
  (void)arg;
  (void)size;
  CALL(crnet_barrier(c));
  report_raise(rank);
  if (rank == 1) {
    FAIL_IF(!report_await(0, 30), "rank 0 never left its barrier");
    reports[rank].t_event = now_s();
    raise(SIGKILL);
  }
  rc = crnet_recv(c, &x, 1, CRNET_INT64, 1, 0, NULL);
  report_call(rank, c, rc);
  FAIL_IF(rc != CRNET_EPEER, "recv: %s, want CRNET_EPEER", crnet_err_name(rc));
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(lost_peer_ends_a_receive) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 30);
  run_job(&j, rank_failure, NULL, 60);
  ck_assert_msg(exit_code(&j, 0) == EXIT_OK, "rank 0 exited %d",
                exit_code(&j, 0));
  ck_assert_msg(reports[0].returned - reports[1].t_event < test_seconds(2.0),
                "rank 0 took %.3f s", reports[0].returned - reports[1].t_event);
  ck_assert_msg(strstr(reports[0].errmsg, "rank 1") != NULL, "%s",
                reports[0].errmsg);
}
END_TEST

/* --- failure: the peer's own reason, though a write meets its end first ------
 */

/* Rank 0 aborts and leaves while rank 1 is not looking (its loop does not
 * run). Rank 1's sends then meet a closed connection: the first write
 * still goes out, the next fails at once with a broken pipe, before the
 * loop has read rank 0's ABORT, which waits in the socket. The send must
 * end with the abort (CRNET_EABORTED, code 9), not a lost peer.
 *
 * With *arg true, on shared memory: the ranks first agree that their link
 * has moved there (CRNET_TRANSPORT=shm). A write into the ring cannot
 * fail, so only a turn of the loop finds the ABORT: small sends once
 * succeeded until the eager budget ran out (58254 of 8 bytes). */
static int rank_abort_then_write(int rank, int size, void *arg) {
  const bool on_shm = *(const bool *)arg;
  crnet_comm *c;
  int64_t x = 7;
  int rc = 0;
  (void)size;
  if (on_shm)
    setenv("CRNET_TRANSPORT", "shm", 1);
  c = init_or_die(rank);
  for (int turn = 0; on_shm; turn++) {
    crnet_link_kind k;
    int32_t mine = crnet_comm_peer_link(c, 1 - rank, &k) == 0 &&
                   k == CRNET_LINK_SHM,
            both = 0;
    CALL(crnet_allreduce(c, &mine, &both, 1, CRNET_INT32, CRNET_MIN));
    if (both)
      break;
    /* Every rank counts the same turns: they stop together. */
    FAIL_IF(turn == 100000, "the link never moved to shared memory");
  }
  reports[rank].pid = (int)getpid();
  CALL(crnet_barrier(c));
  if (rank == 1)
    report_raise(1);
  if (rank == 0) {
    FAIL_IF(!report_await(1, 30), "rank 1 never left its barrier");
    crnet_comm_abort(c, 9);
    crnet_comm_destroy(c);
    return EXIT_OK;
  }
  /* Once rank 0's process is gone, its ABORT (written before its destroy
   * returned) is in this rank's socket or ring, unread, and its end of the
   * connection is closed. */
  FAIL_IF(reports[0].pid <= 0 || !process_gone_await(reports[0].pid, 30),
          "rank 0 (pid %d) still runs 30 s after its barrier", reports[0].pid);
  /* Until a write meets the closed connection (the first may still go
   * out, the reset comes back): up to 5 s. */
  for (int i = 0; i < 500 && rc == 0; i++) {
    rc = crnet_send(c, &x, 1, CRNET_INT64, 0, 0);
    if (rc == 0)
      usleep(10000);
  }
  report_call(rank, c, rc);
  reports[rank].flag = crnet_comm_abort_code(c);
  crnet_comm_destroy(c);
  FAIL_IF(rc != CRNET_EABORTED, "send: %s, want CRNET_EABORTED",
          crnet_err_name(rc));
  return EXIT_OK;
}

static void abort_then_write(bool on_shm) {
  job j;
  reports = reports_map();
  job_init(&j, 2, 30);
  run_job(&j, rank_abort_then_write, (void *)&on_shm, 60);
  ck_assert_msg(exit_code(&j, 1) == EXIT_OK, "rank 1 exited %d: %s",
                exit_code(&j, 1), reports[1].errmsg);
  ck_assert_int_eq(reports[1].flag, 9);
}

START_TEST(abort_reaches_a_sender_whose_write_fails) {
  abort_then_write(false);
}
END_TEST

START_TEST(abort_reaches_a_sender_on_shared_memory) {
  abort_then_write(true);
}
END_TEST

/* --- failure: a rank that left ends the messages awaited from it -------------
 */

/* p = 3. Rank 2 leaves (crnet_comm_destroy) after a split that leaves it
 * out. Rank 1's receive from it was posted before it left (*arg true), or
 * both ask for a message from it only once its goodbye has been read.
 * They fail with CRNET_EPEER saying it left (they waited until the job's
 * timeout before), and the comm without rank 2 keeps working. */
static int rank_left(int rank, int size, void *arg) {
  const bool posted_before = *(const bool *)arg;
  crnet_comm *c = init_or_die(rank), *sub = NULL;
  int64_t x = 0, v = 1, sum = 0;
  crnet_request *r = NULL;
  int rc;
  (void)size;
  CALL(crnet_comm_split(c, rank < 2 ? 0 : CRNET_UNDEFINED, rank, &sub));
  if (rank == 1 && posted_before)
    CALL(crnet_irecv(c, &x, 1, CRNET_INT64, 2, 4, NULL, &r));
  CALL(crnet_barrier(c));
  if (rank == 2) {
    /* Only once the others are out of the barrier: leaving while one of
     * them is still in it, a receive from rank 2 posted, fails their
     * world there (rightly), not in the calls this test looks at. */
    FAIL_IF(!report_await(0, 30) || !report_await(1, 30),
            "ranks 0 and 1 never left their barrier");
    crnet_comm_destroy(c);
    return EXIT_OK;
  }
  report_raise(rank);
  /* Posted after the goodbye: only once both have read it (the loop runs
   * in the calls on sub), so that the receive cannot be posted before it
   * came. They count the same turns and stop together. (A receive posted
   * before fails the world at the goodbye, which may close the link the
   * flag is on: that case needs no wait.) */
  for (int turn = 0; !posted_before; turn++) {
    const crnet__peer *p2 = *crnet__comm_link(c, 2, 0);
    int64_t both = 0;
    int64_t mine =
        p2 != NULL && __atomic_load_n(&p2->got_bye, __ATOMIC_ACQUIRE);
    CALL(crnet_allreduce(sub, &mine, &both, 1, CRNET_INT64, CRNET_MIN));
    if (both)
      break;
    FAIL_IF(turn == 100000, "rank 2's goodbye never came");
  }
  reports[rank].t_event = now_s();
  rc = r != NULL ? crnet_wait(&r)
                 : crnet_recv(c, &x, 1, CRNET_INT64, 2, 4, NULL);
  report_call(rank, c, rc);
  FAIL_IF(rc != CRNET_EPEER, "receive from the rank that left: %s",
          crnet_err_name(rc));
  FAIL_IF(strstr(crnet_comm_errmsg(c), "left the job") == NULL, "%s",
          crnet_comm_errmsg(c));
  CALL(crnet_allreduce(sub, &v, &sum, 1, CRNET_INT64, CRNET_SUM));
  FAIL_IF(sum != 2, "allreduce on the comm without rank 2: %lld",
          (long long)sum);
  crnet_comm_destroy(sub);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(receive_from_a_rank_that_left_fails) {
  bool posted_before = _i == 0;
  job j;
  reports = reports_map();
  job_init(&j, 3, 30);
  run_job(&j, rank_left, &posted_before, 60);
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(reports[r].returned - reports[r].t_event < test_seconds(2.0),
                  "rank %d took %.3f s", r,
                  reports[r].returned - reports[r].t_event);
}
END_TEST

/* --- probe: looking at a message before receiving it ------------------------
 */

/* Waits (iprobe in a loop, nothing else) until a message of (src, tag)
 * has come: a loop of iprobe calls must move messages on by itself. */
static int iprobe_until(crnet_comm *c, int src, int tag, crnet_status *st) {
  double give_up = now_s() + test_seconds(20);
  int flag = 0, rc;
  while ((rc = crnet_iprobe(c, src, tag, &flag, st)) == 0 && !flag &&
         now_s() < give_up)
    ;
  return rc != 0 ? rc : flag ? 0 : CRNET_ETIMEDOUT;
}

/* Rank 1 receives everything the others send it through probes: first
 * the sizes a probe must report (0, eager, rendezvous, to itself), then
 * the pattern of a program that receives messages of unknown size from
 * anyone: probe, allocate what the status says, receive that message. */
static int rank_probe(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  enum { K = 12 };
  crnet_status st = {.source = -5, .tag = -5, .bytes = 99};
  int flag = -1;
  (void)arg;
  if (rank == 1) {
    /* Nothing sent yet: the flag is 0 and the status untouched. */
    CALL(crnet_iprobe(c, 2, 999, &flag, &st));
    FAIL_IF(flag != 0 || st.source != -5 || st.bytes != 99,
            "iprobe before any send: flag %d, source %d", flag, st.source);
  }
  CALL(crnet_barrier(c));
  if (rank == 2) {
    uint8_t b[100];
    fill(b, sizeof b, 2, 999);
    CALL(crnet_send(c, b, sizeof b, CRNET_UINT8, 1, 999));
  } else if (rank == 0) {
    size_t n = 3 << 20;
    uint8_t *b = malloc(n);
    FAIL_IF(b == NULL, "out of memory");
    fill(b, n, 0, 7);
    CALL(crnet_send(c, b, n, CRNET_UINT8, 1, 7)); /* waits for the receive */
    CALL(crnet_send(c, b, 0, CRNET_UINT8, 1, 8));
    free(b);
  } else if (rank == 1) {
    uint8_t small[100], *big;
    crnet_status again;
    CALL(iprobe_until(c, 2, 999, &st));
    FAIL_IF(st.source != 2 || st.tag != 999 || st.bytes != 100,
            "iprobe: source %d tag %d bytes %zu", st.source, st.tag, st.bytes);
    /* A rendezvous message: announced, its size known before its data. */
    CALL(iprobe_until(c, CRNET_ANY_SOURCE, 7, &st));
    FAIL_IF(st.source != 0 || st.bytes != (size_t)3 << 20,
            "iprobe of the large message: source %d bytes %zu", st.source,
            st.bytes);
    /* A probe takes nothing: the same message again. */
    CALL(crnet_probe(c, CRNET_ANY_SOURCE, 7, &again));
    FAIL_IF(again.source != 0 || again.bytes != st.bytes, "probe again");
    big = malloc(st.bytes);
    FAIL_IF(big == NULL, "out of memory");
    CALL(crnet_recv(c, big, st.bytes, CRNET_UINT8, st.source, st.tag, NULL));
    FAIL_IF(!check(big, st.bytes, 0, 7), "the large message");
    free(big);
    CALL(crnet_recv(c, small, sizeof small, CRNET_UINT8, 2, 999, &st));
    FAIL_IF(!check(small, st.bytes, 2, 999), "the small message");
    CALL(crnet_probe(c, 0, CRNET_ANY_TAG, &st));
    FAIL_IF(st.tag != 8 || st.bytes != 0,
            "the empty message: tag %d, %zu "
            "bytes",
            st.tag, st.bytes);
    CALL(crnet_recv(c, NULL, 0, CRNET_UINT8, 0, 8, NULL));
    /* To oneself. */
    {
      int64_t x = 77, y = 0;
      crnet_request *r;
      CALL(crnet_isend(c, &x, 1, CRNET_INT64, 1, 5, &r));
      CALL(crnet_probe(c, 1, 5, &st));
      FAIL_IF(st.source != 1 || st.bytes != 8, "probe of a message to self");
      CALL(crnet_recv(c, &y, 1, CRNET_INT64, 1, 5, NULL));
      CALL(crnet_wait(&r));
      FAIL_IF(y != 77, "message to self: %lld", (long long)y);
    }
  }
  CALL(crnet_barrier(c));
  /* Unknown sizes from anyone, in each sender's order. */
  if (rank == 1) {
    int next[3] = {0, 0, 0};
    for (int k = 0; k < 2 * K; k++) {
      uint8_t *b;
      CALL(crnet_probe(c, CRNET_ANY_SOURCE, CRNET_ANY_TAG, &st));
      FAIL_IF(st.source == 1 || st.tag != next[st.source],
              "message %d: source %d tag %d, expected tag %d", k, st.source,
              st.tag, st.source == 1 ? -1 : next[st.source]);
      FAIL_IF(st.bytes != sizes[st.tag % NSIZES], "message %d: %zu bytes", k,
              st.bytes);
      b = malloc(st.bytes + 1);
      FAIL_IF(b == NULL, "out of memory");
      CALL(crnet_recv(c, b, st.bytes, CRNET_UINT8, st.source, st.tag, NULL));
      FAIL_IF(!check(b, st.bytes, st.source, st.tag), "message %d", k);
      free(b);
      next[st.source]++;
    }
  } else if (rank == 0 || rank == 2) {
    for (int k = 0; k < K; k++) {
      uint8_t *b = malloc(sizes[k % NSIZES] + 1);
      FAIL_IF(b == NULL, "out of memory");
      fill(b, sizes[k % NSIZES], rank, k);
      CALL(crnet_send(c, b, sizes[k % NSIZES], CRNET_UINT8, 1, k));
      free(b);
    }
  }
  (void)size;
  CALL(crnet_barrier(c));
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

/* --- synchronous sends -------------------------------------------------------
 * An issend completes only once its receive is posted, whatever its size:
 * rank 0's 8-byte and 0-byte issends to rank 1 stay incomplete through
 * 100 ms of tests while rank 1 has posted nothing, then complete once it
 * receives them (told by a barrier). A blocking ssend meets a receive
 * posted first; one to oneself completes when this rank's receive takes
 * it; and every message arrives whole and in order. */

static int rank_ssend(int rank, int size, void *arg) {
  crnet_comm *c = init_or_die(rank);
  uint8_t b[3][64], got[3][64];
  size_t len[3] = {8, 0, 64};
  crnet_request *r[3] = {NULL, NULL, NULL};
  crnet_status st;
  int done = 0;
  (void)arg;
  (void)size;
  if (rank == 0) {
    for (int k = 0; k < 3; k++) {
      fill(b[k], len[k], 0, k);
      CALL(crnet_issend(c, b[k], len[k], CRNET_UINT8, 1, k, &r[k]));
    }
    /* Rank 1 receives nothing before the barrier. */
    for (double end = now_s() + 0.1; now_s() < end;)
      for (int k = 0; k < 3; k++) {
        CALL(crnet_test(&r[k], &done));
        FAIL_IF(done,
                "issend %d (%zu bytes) completed before its receive "
                "was posted",
                k, len[k]);
      }
    CALL(crnet_barrier(c));
    for (int k = 0; k < 3; k++)
      CALL(crnet_wait(&r[k]));
    /* A blocking ssend to a receive posted first (after the barrier). */
    CALL(crnet_barrier(c));
    fill(b[0], 8, 0, 9);
    CALL(crnet_ssend(c, b[0], 8, CRNET_UINT8, 1, 9));
    /* To oneself: complete when this rank's own receive takes it. */
    fill(b[1], 20, 0, 10);
    CALL(crnet_issend(c, b[1], 20, CRNET_UINT8, 0, 10, &r[0]));
    CALL(crnet_test(&r[0], &done));
    FAIL_IF(done, "an issend to oneself completed with no receive posted");
    CALL(crnet_recv(c, got[0], 20, CRNET_UINT8, 0, 10, &st));
    CALL(crnet_wait(&r[0]));
    FAIL_IF(st.bytes != 20 || !check(got[0], 20, 0, 10), "to oneself");
  } else if (rank == 1) {
    CALL(crnet_barrier(c));
    for (int k = 0; k < 3; k++) {
      CALL(crnet_recv(c, got[k], sizeof got[k], CRNET_UINT8, 0, k, &st));
      FAIL_IF(st.bytes != len[k] || !check(got[k], len[k], 0, k),
              "issend %d arrived as %zu bytes, or wrong", k, st.bytes);
    }
    CALL(crnet_irecv(c, got[0], 8, CRNET_UINT8, 0, 9, &st, &r[0]));
    CALL(crnet_barrier(c));
    CALL(crnet_wait(&r[0]));
    FAIL_IF(st.bytes != 8 || !check(got[0], 8, 0, 9), "ssend");
  } else {
    CALL(crnet_barrier(c));
    CALL(crnet_barrier(c));
  }
  /* Misuse: as a send's. */
  FAIL_IF(crnet_issend(c, b[0], 1, CRNET_UINT8, CRNET_ANY_SOURCE, 0, &r[0]) !=
              CRNET_EINVAL,
          "issend to CRNET_ANY_SOURCE");
  FAIL_IF(crnet_ssend(c, b[0], 1, CRNET_UINT8, 0, -1) != CRNET_EINVAL,
          "ssend with tag -1");
  CALL(crnet_barrier(c));
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(ssend_waits_for_its_receive) {
  job j;
  job_init(&j, 3, 30);
  run_job(&j, rank_ssend, NULL, 120);
  expect_all_ok(&j, __func__);
}
END_TEST

START_TEST(probe_sees_without_taking) {
  job j;
  job_init(&j, 3, 30);
  run_job(&j, rank_probe, NULL, 120);
  expect_all_ok(&j, __func__);
}
END_TEST

/* --- misuse, in a job of one -------------------------------------------------
 */

START_TEST(misuse_is_refused) {
  crnet_comm *c = NULL;
  crnet_request *r = (crnet_request *)1;
  int64_t x = 0;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_send(NULL, &x, 1, CRNET_INT64, 0, 0), CRNET_EINVAL);
  ck_assert_int_eq(crnet_send(c, &x, 1, CRNET_INT64, 1, 0), CRNET_EINVAL);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "not a rank"));
  ck_assert_int_eq(crnet_send(c, &x, 1, CRNET_INT64, 0, -1), CRNET_EINVAL);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "negative"));
  ck_assert_int_eq(crnet_send(c, &x, 1, CRNET_INT64, CRNET_ANY_SOURCE, 0),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_send(c, NULL, 1, CRNET_INT64, 0, 0), CRNET_EINVAL);
  ck_assert_int_eq(crnet_send(c, &x, 1, (crnet_datatype)99, 0, 0),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_recv(c, &x, 1, CRNET_INT64, 3, 0, NULL), CRNET_EINVAL);
  ck_assert_int_eq(crnet_recv(c, &x, 1, CRNET_INT64, 0, -7, NULL),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_isend(c, &x, 1, CRNET_INT64, 0, 0, NULL),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_irecv(c, &x, 1, CRNET_INT64, 5, 0, NULL, &r),
                   CRNET_EINVAL);
  ck_assert_ptr_null(r);
  {
    int flag = 3;
    ck_assert_int_eq(crnet_iprobe(c, 0, 0, NULL, NULL), CRNET_EINVAL);
    ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "flag is NULL"));
    ck_assert_int_eq(crnet_iprobe(c, 1, 0, &flag, NULL), CRNET_EINVAL);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(crnet_probe(c, 0, -2, NULL), CRNET_EINVAL);
    ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "negative"));
    ck_assert_int_eq(crnet_probe(NULL, 0, 0, NULL), CRNET_EINVAL);
    /* Nothing to see in a job of one with nothing sent. */
    ck_assert_int_eq(
        crnet_iprobe(c, CRNET_ANY_SOURCE, CRNET_ANY_TAG, &flag, NULL), 0);
    ck_assert_int_eq(flag, 0);
  }
  /* A sendrecv with one bad half starts nothing. */
  ck_assert_int_eq(crnet_sendrecv(c, &x, 1, CRNET_INT64, 0, 0, &x, 1,
                                  CRNET_INT64, 0, -3, NULL),
                   CRNET_EINVAL);
  /* Nothing was left in flight: the comm goes. */
  x = 5;
  ck_assert_int_eq(crnet_sendrecv(c, &x, 1, CRNET_INT64, 0, 0, &x, 1,
                                  CRNET_INT64, 0, 0, NULL),
                   0);
  ck_assert_int_eq(x, 5);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

/* A job of one: a receive from oneself whose send another thread makes
 * later. The loop has no link, and nothing but that thread's call can
 * complete the receive: the wait must sleep until it comes (once it failed
 * every comm with "nothing left to wait for (a bug in crnet)"). */
typedef struct late_send {
  crnet_comm *c;
  size_t bytes;
  int tag;
  int rc;
  pid_t receiver; /* the thread in crnet_recv */
  bool asleep;    /* it was seen asleep there before the send */
} late_send;

/* Sends once the receiving thread is asleep in crnet_recv, which posts the
 * receive before it waits (not after a guessed pause: then the send might
 * come first, and the case would test a message that came before its
 * receive). In a job of one nothing else of crnet runs, and nothing else
 * puts that thread to sleep. */
static void *send_later(void *arg) {
  late_send *ls = arg;
  uint8_t *b = malloc(ls->bytes);
  if (b == NULL) {
    ls->rc = CRNET_ENOMEM;
    return NULL;
  }
  memset(b, 0x5c, ls->bytes);
  ls->asleep = thread_asleep_await(ls->receiver, 30);
  ls->rc = crnet_send(ls->c, b, ls->bytes, CRNET_BYTE, 0, ls->tag);
  free(b);
  return NULL;
}

START_TEST(receive_from_oneself_waits_for_another_thread) {
  static const size_t sizes[] = {8, 1 << 20};
  crnet_comm *c = NULL;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  for (size_t i = 0; i < 2; i++)
    for (int any = 0; any < 2; any++) {
      late_send ls = {.c = c,
                      .bytes = sizes[i],
                      .tag = (int)(2 * i + (size_t)any),
                      .rc = -1,
                      .receiver = thread_id()};
      uint8_t *b = calloc(1, sizes[i]);
      crnet_status st;
      pthread_t t;
      ck_assert_ptr_nonnull(b);
      ck_assert_int_eq(pthread_create(&t, NULL, send_later, &ls), 0);
      ck_assert_msg(crnet_recv(c, b, sizes[i], CRNET_BYTE,
                               any ? CRNET_ANY_SOURCE : 0,
                               any ? CRNET_ANY_TAG : ls.tag, &st) == 0,
                    "%zu bytes%s: %s", sizes[i], any ? " (any source)" : "",
                    crnet_comm_errmsg(c));
      pthread_join(t, NULL);
      ck_assert_msg(ls.asleep,
                    "%zu bytes: the receiving thread was not seen asleep "
                    "in crnet_recv within 30 s",
                    sizes[i]);
      ck_assert_int_eq(ls.rc, 0);
      ck_assert_int_eq(st.source, 0);
      ck_assert_int_eq(st.tag, ls.tag);
      ck_assert(b[0] == 0x5c && b[sizes[i] - 1] == 0x5c);
      free(b);
    }
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

/* A job of one: crnet_cancel. A receive no message matched ends with
 * CRNET_ECANCELED and leaves the next message to a later receive; a send
 * and a collective are not cancelled; another thread's cancel wakes a
 * wait that nothing else would end. */
typedef struct late_cancel {
  crnet_request *r;
  int rc;
  pid_t waiter; /* the thread in crnet_wait */
  bool asleep;  /* it was seen asleep there before the cancel */
} late_cancel;

static void *cancel_later(void *arg) {
  late_cancel *lc = arg;
  lc->asleep = thread_asleep_await(lc->waiter, 30);
  lc->rc = crnet_cancel(lc->r);
  return NULL;
}

START_TEST(cancel_ends_an_unmatched_receive) {
  crnet_comm *c = NULL;
  crnet_request *r = NULL, *s = NULL;
  crnet_status st;
  int64_t x = 7, y = -1;
  int done = 0;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_cancel(NULL), CRNET_EINVAL);
  /* Posted, then cancelled: CRNET_ECANCELED, the buffer untouched. */
  ck_assert_int_eq(crnet_irecv(c, &y, 1, CRNET_INT64, 0, 1, &st, &r), 0);
  ck_assert_int_eq(crnet_test(&r, &done), 0);
  ck_assert_int_eq(done, 0);
  ck_assert_int_eq(crnet_cancel(r), 0);
  ck_assert_int_eq(crnet_cancel(r), 0); /* twice is harmless */
  ck_assert_int_eq(crnet_wait(&r), CRNET_ECANCELED);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(st.error, CRNET_ECANCELED);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "cancelled"));
  ck_assert(y == -1);
  /* Cancelled before it began: the same. */
  ck_assert_int_eq(crnet_irecv(c, &y, 1, CRNET_INT64, CRNET_ANY_SOURCE,
                               CRNET_ANY_TAG, NULL, &r),
                   0);
  ck_assert_int_eq(crnet_cancel(r), 0);
  ck_assert_int_eq(crnet_wait(&r), CRNET_ECANCELED);
  /* The message sent after goes to the next receive, not the cancelled
   * ones; cancelling its send changes nothing. */
  ck_assert_int_eq(crnet_isend(c, &x, 1, CRNET_INT64, 0, 1, &s), 0);
  ck_assert_int_eq(crnet_cancel(s), 0);
  ck_assert_int_eq(crnet_recv(c, &y, 1, CRNET_INT64, 0, 1, &st), 0);
  ck_assert(y == 7);
  ck_assert_int_eq(st.error, 0);
  ck_assert_int_eq(crnet_wait(&s), 0);
  /* A completed and freed request is no longer one. */
  ck_assert_int_eq(crnet_irecv(c, &y, 1, CRNET_INT64, 0, 2, NULL, &r), 0);
  {
    crnet_request *stale = r;
    ck_assert_int_eq(crnet_isend(c, &x, 1, CRNET_INT64, 0, 2, &s), 0);
    ck_assert_int_eq(crnet_wait(&r), 0);
    ck_assert_int_eq(crnet_wait(&s), 0);
    ck_assert_int_eq(crnet_cancel(stale), CRNET_EINVAL);
  }
  /* A collective cannot be cancelled. */
  ck_assert_int_eq(crnet_ibarrier(c, &r), 0);
  ck_assert_int_eq(crnet_cancel(r), CRNET_EINVAL);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "cannot be cancelled"));
  ck_assert_int_eq(crnet_wait(&r), 0);
  /* Another thread's cancel ends a wait that nothing else would. */
  {
    late_cancel lc = {NULL, -1, thread_id(), false};
    pthread_t t;
    ck_assert_int_eq(
        crnet_irecv(c, &y, 1, CRNET_INT64, CRNET_ANY_SOURCE, 3, &st, &lc.r), 0);
    r = lc.r;
    ck_assert_int_eq(pthread_create(&t, NULL, cancel_later, &lc), 0);
    ck_assert_int_eq(crnet_wait(&r), CRNET_ECANCELED);
    pthread_join(t, NULL);
    ck_assert_msg(lc.asleep, "the wait was not seen asleep within 30 s");
    ck_assert_int_eq(lc.rc, 0);
  }
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

int main(int argc, char **argv) {
  bool unit = argc > 1 && strcmp(argv[1], "unit") == 0;
  Suite *s = suite_create(unit ? "p2p-unit" : "p2p");
  TCase *t;
  if (unit) {
    t = tcase_create("misuse");
    tcase_add_test(t, misuse_is_refused);
    suite_add_tcase(s, t);
    t = tcase_create("self-thread");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, receive_from_oneself_waits_for_another_thread);
    suite_add_tcase(s, t);
    t = tcase_create("cancel");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, cancel_ends_an_unmatched_receive);
    suite_add_tcase(s, t);
  } else {
    const struct {
      const char *name;
      const TTest *test;
    } cases[] = {
        {"order", order_tags_wildcards},
        {"unexpected", unexpected_messages},
        {"edges", truncation_and_self},
        {"comms", messages_keep_to_their_comm},
        {"memory", unexpected_memory_is_bounded},
        {"failure", lost_peer_ends_a_receive},
        {"abort-write", abort_reaches_a_sender_whose_write_fails},
        {"abort-write-shm", abort_reaches_a_sender_on_shared_memory},
        {"probe", probe_sees_without_taking},
        {"ssend", ssend_waits_for_its_receive},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      t = tcase_create(cases[i].name);
      tcase_set_timeout(t, 300);
      tcase_add_test(t, cases[i].test);
      suite_add_tcase(s, t);
    }
    t = tcase_create("left");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, receive_from_a_rank_that_left_fails, 0, 2);
    suite_add_tcase(s, t);
  }
  return check_run(s);
}
