/* Lazy links (CRNET_LAZY_LINKS, src/runtime/lazy.c) through real forked
 * ranks on loopback:
 *
 *   links     p = 16, circulant allreduce: with lazy links each rank has
 *             links to the peers the schedule names (7 here), not p - 1 =
 *             15 as with the full mesh, which the same job without lazy
 *             links shows (so the count can fail); ring at p = 6 with only
 *             rank 0 asking for lazy links: rank 0's choice is the job's.
 *   results   every collective at p = 7 gives exact results.
 *   listener  open after init: a stranger that connects to a rank between
 *             calls is dropped and the job goes on.
 *   busy      a rank that makes its first call three handshake timeouts
 *             late (CRNET_HANDSHAKE_TIMEOUT=1) is waited for, not taken
 *             for lost.
 *   early     a rank that dies before any link to it: every other rank
 *             fails with CRNET_EPEER within 2 s.
 *   settings  CRNET_LAZY_LINKS=yes and crnet_config.lazy_links = 7 fail
 *             init with CRNET_EINVAL and a message naming the setting.
 *
 * The dead-peer case with lazy links is test_reliability's `dead` case run
 * with CRNET_LAZY_LINKS=1 (meson test reliability-lazy).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "comm.h"
#include "crnet.h"
#include "netjob.h"

/* What each rank tells the test, in shared memory. */
typedef struct lazy_report {
  int rc;
  int peers_linked;   /* ranks with a link in c->w->peers */
  int links;          /* links in c->w->peers, streams counted */
  uint64_t opened;    /* c->w->links_opened */
  int sockets;        /* TCP/Unix sockets among the process's descriptors */
  bool lazy;          /* the job's choice */
  int pid;            /* the rank's process */
  char errmsg[512];
} report;

static report *reports;

static void lazy_reports_map(void) {
  if (reports == NULL) {
    reports = mmap(NULL, sizeof *reports * MAX_RANKS, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(reports != MAP_FAILED, "mmap failed");
  }
  memset(reports, 0, sizeof *reports * MAX_RANKS);
}

static int count_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[64];
    ssize_t len;
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = '\0';
      n += strncmp(target, "socket:", 7) == 0;
    }
  }
  closedir(d);
  return n;
}

static void report_links(int rank, crnet_comm *c, int rc) {
  report *r = &reports[rank];
  r->rc = rc;
  r->lazy = c->w->lazy;
  r->opened = c->w->links_opened;
  for (int q = 0; q < c->size; q++) {
    bool any = false;
    for (int k = 0; k < (int)c->w->streams; k++) {
      bool up = *crnet__comm_link(c, q, k) != NULL;
      r->links += up;
      any = any || up;
    }
    r->peers_linked += any;
  }
  r->sockets = count_sockets();
  snprintf(r->errmsg, sizeof r->errmsg, "%s", crnet_comm_errmsg(c));
}

/* A rank's end: its result and message to the test, then an orderly
 * destroy, which must succeed too. */
static int finish_rank(int rank, crnet_comm *c, int rc) {
  reports[rank].rc = rc;
  snprintf(reports[rank].errmsg, sizeof reports[rank].errmsg, "%s",
           crnet_comm_errmsg(c));
  if (crnet_comm_destroy(c) != 0 && rc == 0)
    rc = CRNET_EIO;
  return err_exit(rc);
}

/* --- links ------------------------------------------------------------------ */

typedef struct links_case {
  const char *lazy_rank0, *lazy_others; /* CRNET_LAZY_LINKS; NULL: unset */
  const char *schedule;
} links_case;

/* Allreduce of rank-dependent integers a few times, checked exactly. */
static int rank_allreduce(int rank, int size, void *arg) {
  const links_case *lc = arg;
  const char *v = rank == 0 ? lc->lazy_rank0 : lc->lazy_others;
  int32_t send[1000], recv[1000];
  crnet_comm *c;
  int rc;
  if (v != NULL)
    setenv("CRNET_LAZY_LINKS", v, 1);
  else
    unsetenv("CRNET_LAZY_LINKS");
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return err_exit(rc);
  rc = crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, lc->schedule);
  for (int it = 0; rc == 0 && it < 3; it++) {
    for (int i = 0; i < 1000; i++)
      send[i] = rank * 1000 + i + it;
    rc = crnet_allreduce(c, send, recv, 1000, CRNET_INT32, CRNET_SUM);
    for (int i = 0; rc == 0 && i < 1000; i++)
      if (recv[i] != 1000 * size * (size - 1) / 2 + size * (i + it))
        rc = CRNET_EMISMATCH; /* wrong result: reported as such */
  }
  report_links(rank, c, rc);
  if (crnet_comm_destroy(c) != 0 && rc == 0)
    rc = CRNET_EIO;
  return err_exit(rc);
}

static void run_links(int p, const links_case *lc, int *max_peers,
                      bool *lazy) {
  job j;
  lazy_reports_map();
  job_init(&j, p, 30);
  run_job(&j, rank_allreduce, (void *)lc, 60);
  *max_peers = 0;
  for (int r = 0; r < p; r++) {
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
    /* Every link came up once: no duplicate was ever put in place. */
    ck_assert_int_eq(reports[r].opened, (uint64_t)reports[r].links *
                                            (lc->lazy_rank0 != NULL &&
                                             strcmp(lc->lazy_rank0, "1") == 0));
    if (reports[r].peers_linked > *max_peers)
      *max_peers = reports[r].peers_linked;
  }
  *lazy = reports[0].lazy;
  for (int r = 1; r < p; r++)
    ck_assert_int_eq(reports[r].lazy, reports[0].lazy);
}

START_TEST(circulant_links_only_its_peers) {
  static const links_case lazy = {"1", "1", "circulant"};
  static const links_case full = {"0", "0", "circulant"};
  int max_lazy, max_full;
  bool on;
  run_links(16, &lazy, &max_lazy, &on);
  ck_assert(on);
  /* Circulant halving at p = 16: skips 8, 4, 2, 1 both ways, 7 peers. */
  ck_assert_msg(max_lazy <= 8, "a rank linked %d peers of 15", max_lazy);
  for (int r = 0; r < 16; r++)
    ck_assert_msg(reports[r].sockets <= reports[r].links + 4,
                  "rank %d holds %d sockets for %d links", r,
                  reports[r].sockets, reports[r].links);
  printf("lazy links, p = 16, circulant allreduce: at most %d peers linked "
         "per rank, rank 0 holding %d sockets\n",
         max_lazy, reports[0].sockets);
  run_links(16, &full, &max_full, &on);
  ck_assert(!on);
  ck_assert_int_eq(max_full, 15);
  for (int r = 0; r < 16; r++)
    ck_assert_int_eq(reports[r].peers_linked, 15);
}
END_TEST

START_TEST(rank0_decides) {
  static const links_case mixed = {"1", "0", "ring"};
  static const links_case mixed_off = {"0", "1", "ring"};
  int max_peers;
  bool on;
  run_links(6, &mixed, &max_peers, &on);
  ck_assert(on);
  ck_assert_int_eq(max_peers, 2); /* the ring's two neighbours */
  run_links(6, &mixed_off, &max_peers, &on);
  ck_assert(!on);
  ck_assert_int_eq(max_peers, 5);
}
END_TEST

/* --- results ------------------------------------------------------------------ */

#define N 37

/* Every collective once, with exact results. */
static int rank_all(int rank, int p, void *arg) {
  double in[N * 8], out[N * 8 * 8];
  size_t counts[8];
  crnet_comm *c;
  int rc, bad = 0;
  (void)arg;
  setenv("CRNET_LAZY_LINKS", "1", 1);
  if ((rc = crnet_comm_init(&c, NULL)) != 0)
    return err_exit(rc);
  for (int i = 0; i < N * p; i++)
    in[i] = rank + 1 + i;
  /* allreduce: sum over ranks of (r + 1 + i) */
  rc = crnet_allreduce(c, in, out, N, CRNET_DOUBLE, CRNET_SUM);
  for (int i = 0; rc == 0 && i < N; i++)
    bad += out[i] != p * (p + 1) / 2.0 + p * i;
  /* reduce_scatter_block: block `rank` of the sum */
  if (rc == 0)
    rc = crnet_reduce_scatter_block(c, in, out, N, CRNET_DOUBLE, CRNET_SUM);
  for (int i = 0; rc == 0 && i < N; i++)
    bad += out[i] != p * (p + 1) / 2.0 + p * (rank * N + i);
  /* reduce_scatter, irregular counts: rank q gets q + 1 elements */
  for (int q = 0; q < p; q++)
    counts[q] = (size_t)q + 1;
  if (rc == 0)
    rc = crnet_reduce_scatter(c, in, out, counts, CRNET_DOUBLE, CRNET_SUM);
  for (int i = 0; rc == 0 && i <= rank; i++)
    bad += out[i] != p * (p + 1) / 2.0 + p * (rank * (rank + 1) / 2 + i);
  /* scan and exscan */
  if (rc == 0)
    rc = crnet_scan(c, in, out, N, CRNET_DOUBLE, CRNET_SUM);
  for (int i = 0; rc == 0 && i < N; i++)
    bad += out[i] != (rank + 1) * (rank + 2) / 2.0 + (rank + 1) * i;
  if (rc == 0)
    rc = crnet_exscan(c, in, out, N, CRNET_DOUBLE, CRNET_SUM);
  for (int i = 0; rc == 0 && rank > 0 && i < N; i++)
    bad += out[i] != rank * (rank + 1) / 2.0 + rank * i;
  /* alltoall: block q of rank r's send is r * 100 + q */
  for (int q = 0; q < p; q++)
    for (int i = 0; i < N; i++)
      in[q * N + i] = rank * 100 + q + i;
  if (rc == 0)
    rc = crnet_alltoall(c, in, out, N, CRNET_DOUBLE);
  for (int q = 0; rc == 0 && q < p; q++)
    for (int i = 0; i < N; i++)
      bad += out[q * N + i] != q * 100 + rank + i;
  /* allgather */
  if (rc == 0)
    rc = crnet_allgather(c, in, out, N, CRNET_DOUBLE);
  for (int q = 0; rc == 0 && q < p; q++)
    for (int i = 0; i < N; i++)
      bad += out[q * N + i] != q * 100 + i;
  /* bcast from the last rank */
  for (int i = 0; i < N; i++)
    out[i] = rank == p - 1 ? 7.0 * i : -1;
  if (rc == 0)
    rc = crnet_bcast(c, out, N, CRNET_DOUBLE, p - 1);
  for (int i = 0; rc == 0 && i < N; i++)
    bad += out[i] != 7.0 * i;
  /* reduce to rank 2 */
  for (int i = 0; i < N; i++)
    in[i] = rank + i;
  if (rc == 0)
    rc = crnet_reduce(c, in, out, N, CRNET_DOUBLE, CRNET_MAX, 2);
  for (int i = 0; rc == 0 && rank == 2 && i < N; i++)
    bad += out[i] != p - 1 + i;
  if (rc == 0)
    rc = crnet_barrier(c);
  reports[rank].rc = rc;
  snprintf(reports[rank].errmsg, sizeof reports[rank].errmsg, "%s%s",
           bad ? "wrong results; " : "", crnet_comm_errmsg(c));
  if (crnet_comm_destroy(c) != 0 && rc == 0)
    rc = CRNET_EIO;
  return bad ? EXIT_FAIL : err_exit(rc);
}

/* Runs a job of p ranks of fn; every rank must succeed. */
static void run_all_ok(int p, rank_fn fn) {
  job j;
  lazy_reports_map();
  job_init(&j, p, 30);
  run_job(&j, fn, NULL, 60);
  for (int r = 0; r < p; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
}

START_TEST(every_collective_is_exact) { run_all_ok(7, rank_all); }
END_TEST

/* --- listener ----------------------------------------------------------------- */

/* Between two calls, rank 1 connects to its own listener as a stranger and
 * sends garbage: it is dropped (the socket is closed within the handshake
 * timeout) and the next calls work. */
static int rank_stranger(int rank, int p, void *arg) {
  crnet_comm *c;
  int rc, fd = -1;
  int32_t closed = 0, all_closed = 0;
  int32_t x = rank, y = 0;
  (void)arg;
  setenv("CRNET_LAZY_LINKS", "1", 1);
  if ((rc = crnet_comm_init(&c, NULL)) != 0)
    return err_exit(rc);
  rc = crnet_allreduce(c, &x, &y, 1, CRNET_INT32, CRNET_SUM);
  if (rc == 0 && rank == 1) {
    /* A whole HELLO's worth, so that the handshake judges it at once
     * instead of waiting for more until its timeout. */
    uint8_t junk[CRNET__HS_HELLO_SIZE];
    memset(junk, 'x', sizeof junk);
    fd = connect_loopback(c->w->table[rank].port);
    if (fd < 0 || write(fd, junk, sizeof junk) != (ssize_t)sizeof junk)
      rc = CRNET_EIO;
  }
  for (int i = 0; rc == 0 && i < 3; i++)
    rc = crnet_allreduce(c, &x, &y, 1, CRNET_INT32, CRNET_SUM);
  if (rc == 0 && y != p * (p - 1) / 2)
    rc = CRNET_EMISMATCH;
  /* Rank 1's loop reads the garbage while it runs: during the calls above
   * or the barriers here, which every rank makes (a collective only rank 1
   * made would be a mismatch), until rank 1 sees the stranger closed. The
   * others learn that from the allreduce, so all leave the loop together.
   * Between turns rank 1 waits up to 10 ms for the stranger's socket to
   * say something (its close ends the wait at once); the others wait in
   * the next allreduce. */
  for (int i = 0; rc == 0 && !all_closed; i++) {
    if (fd >= 0 && !closed) {
      char buf[64];
      ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    if (fd < 0 || closed || i == 1000)
      closed = 1; /* after 1000 turns: rank 1 stops the loop, and fails */
    rc = crnet_allreduce(c, &closed, &all_closed, 1, CRNET_INT32, CRNET_MIN);
    if (rc == 0 && !all_closed) {
      rc = crnet_barrier(c);
      if (fd >= 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        (void)poll(&pfd, 1, 10);
      }
    }
  }
  if (fd >= 0) {
    char buf[1];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    close(fd);
    if (rc == 0 && !gone)
      rc = CRNET_ETIMEDOUT;
  }
  return finish_rank(rank, c, rc);
}

START_TEST(stranger_after_init_is_dropped) { run_all_ok(4, rank_stranger); }
END_TEST

/* --- a rank busy between calls ------------------------------------------------ */

/* Rank 2 computes for three handshake timeouts (CRNET_HANDSHAKE_TIMEOUT,
 * 1 s here, scaled with the pass) after init, past the deadline of the
 * connections the others make to it meanwhile (its kernel accepts them,
 * its process does not answer): that is a busy peer, not a lost one, so
 * they connect again, twice or more, and the call completes once rank 2
 * makes it. */
static int rank_busy(int rank, int p, void *arg) {
  const double *busy_s = arg;
  int32_t v = rank, sum = 0;
  crnet_comm *c;
  int rc;
  setenv("CRNET_LAZY_LINKS", "1", 1);
  if ((rc = crnet_comm_init(&c, NULL)) != 0)
    return err_exit(rc);
  if (rank == 2)
    for (double end = now_s() + *busy_s; now_s() < end;)
      usleep(10000);
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  if (rc == 0 && sum != p * (p - 1) / 2)
    rc = CRNET_EMISMATCH;
  return finish_rank(rank, c, rc);
}

START_TEST(busy_peer_is_waited_for) {
  job j;
  double busy_s;
  lazy_reports_map();
  job_init(&j, 3, 30);
  j.handshake_timeout = test_seconds(1);
  busy_s = 3 * j.handshake_timeout;
  run_job(&j, rank_busy, &busy_s, 60);
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d: %s", r,
                  exit_code(&j, r), reports[r].errmsg);
}
END_TEST

/* --- a rank dead before any link to it -------------------------------------- */

#define EARLY_SIZE 8
#define EARLY_DEAD 5

/* Rank 5 leaves right after init, without crnet_comm_destroy, before any
 * link to it exists; the others loop allreduce and must all fail with
 * CRNET_EPEER within 2 s of their first call, each through its own
 * refused connection or a peer's ABORT. */
static int rank_early_death(int rank, int p, void *arg) {
  float v[4096] = {0};
  crnet_comm *c;
  int rc;
  (void)p;
  (void)arg;
  setenv("CRNET_LAZY_LINKS", "1", 1);
  /* Before init, which no rank leaves before every rank has begun it. */
  __atomic_store_n(&reports[rank].pid, (int)getpid(), __ATOMIC_RELEASE);
  if ((rc = crnet_comm_init(&c, NULL)) != 0)
    return err_exit(rc);
  if (rank == EARLY_DEAD)
    _exit(EXIT_OK);
  /* Until rank 5's process is gone: its listener is closed then, and a
   * connection to it is refused. */
  int dead = __atomic_load_n(&reports[EARLY_DEAD].pid, __ATOMIC_ACQUIRE);
  if (dead <= 0 || !process_gone_await(dead, 30)) {
    fprintf(stderr, "rank %d: rank %d (pid %d) still runs 30 s after init\n",
            rank, EARLY_DEAD, dead);
    crnet_comm_destroy(c);
    return EXIT_FAIL;
  }
  double t0 = now_s();
  for (int i = 0; rc == 0 && i < 1000; i++)
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, 4096, CRNET_FLOAT, CRNET_SUM);
  reports[rank].rc = rc;
  reports[rank].opened = (uint64_t)((now_s() - t0) * 1e6);
  snprintf(reports[rank].errmsg, sizeof reports[rank].errmsg, "%s",
           crnet_comm_errmsg(c));
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(rank_dead_before_first_use) {
  job j;
  int naming = 0;
  double worst = 0;
  lazy_reports_map();
  job_init(&j, EARLY_SIZE, 30);
  run_job(&j, rank_early_death, NULL, 60);
  for (int r = 0; r < EARLY_SIZE; r++) {
    double dt = (double)reports[r].opened / 1e6;
    if (r == EARLY_DEAD)
      continue;
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EPEER),
                  "rank %d exited %d: %s", r, exit_code(&j, r),
                  reports[r].errmsg);
    ck_assert_msg(strstr(reports[r].errmsg, "lost rank ") != NULL &&
                      strstr(reports[r].errmsg, "allreduce #1") != NULL,
                  "rank %d: %s", r, reports[r].errmsg);
    ck_assert_msg(dt < test_seconds(2.0),
                  "rank %d failed %.3f s after its first call", r, dt);
    naming += strstr(reports[r].errmsg, "lost rank 5 ") != NULL;
    worst = dt > worst ? dt : worst;
  }
  for (int r = 0; r < EARLY_SIZE; r++)
    if (r != EARLY_DEAD && getenv("LAZY_TEST_VERBOSE") != NULL)
      printf("  rank %d: %s\n", r, reports[r].errmsg);
  printf("rank dead before first use: every survivor failed within %.3f s, "
         "%d of %d naming rank %d\n",
         worst, naming, EARLY_SIZE - 1, EARLY_DEAD);
}
END_TEST

/* --- settings ----------------------------------------------------------------- */

typedef struct bad_case {
  const char *env;
  int cfg; /* crnet_config.lazy_links */
  const char *want;
} bad_case;

static int rank_bad(int rank, int p, void *arg) {
  const bad_case *b = arg;
  crnet_config cfg;
  crnet_comm *c;
  int rc;
  (void)p;
  crnet_config_init(&cfg);
  cfg.lazy_links = b->cfg;
  if (b->env != NULL)
    setenv("CRNET_LAZY_LINKS", b->env, 1);
  rc = crnet_comm_init(&c, &cfg);
  reports[rank].rc = rc;
  snprintf(reports[rank].errmsg, sizeof reports[rank].errmsg, "%s",
           crnet_init_errmsg());
  if (rc == 0)
    crnet_comm_destroy(c);
  return err_exit(rc);
}

static const bad_case bad_cases[] = {
    {"yes", -1, "CRNET_LAZY_LINKS='yes' is not 0, 1 or auto"},
    {"2", -1, "CRNET_LAZY_LINKS='2' is not 0, 1 or auto"},
    {NULL, 7, "crnet_config.lazy_links 7 is not"},
    {NULL, -2, "crnet_config.lazy_links -2 is not"},
};

START_TEST(bad_setting_fails_init) {
  const bad_case *b = &bad_cases[_i];
  job j;
  lazy_reports_map();
  job_init(&j, 2, 10);
  run_job(&j, rank_bad, (void *)b, 20);
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EINVAL),
                  "rank %d exited %d: %s", r, exit_code(&j, r),
                  reports[r].errmsg);
    ck_assert_msg(strstr(reports[r].errmsg, b->want) != NULL,
                  "rank %d: '%s' does not say '%s'", r, reports[r].errmsg,
                  b->want);
  }
}
END_TEST

static Suite *lazy_suite(void) {
  Suite *s = suite_create("lazy");
  TCase *t = tcase_create("links");
  tcase_set_timeout(t, 150);
  tcase_add_test(t, circulant_links_only_its_peers);
  tcase_add_test(t, rank0_decides);
  suite_add_tcase(s, t);
  t = tcase_create("results");
  tcase_set_timeout(t, 90);
  tcase_add_test(t, every_collective_is_exact);
  tcase_add_test(t, stranger_after_init_is_dropped);
  tcase_add_test(t, rank_dead_before_first_use);
  suite_add_tcase(s, t);
  t = tcase_create("busy");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, busy_peer_is_waited_for);
  suite_add_tcase(s, t);
  t = tcase_create("settings");
  tcase_set_timeout(t, 30);
  tcase_add_loop_test(t, bad_setting_fails_init, 0,
                      (int)(sizeof bad_cases / sizeof bad_cases[0]));
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return check_run(lazy_suite()); }
