/* Real ranks on loopback, started without crlaunch: each test forks the
 * ranks of a job with the environment contract set, rank 0 serving the
 * rendezvous. Covers what can go wrong at the edges of a job: wrong keys,
 * strangers on the rendezvous port, ranks that never come, a rank killed
 * mid-collective, an abort, mismatched calls, bad settings, and a message
 * larger than 2 GiB. Every wait is bounded; a child that outlives its
 * deadline is killed and the test fails saying so. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "crnet.h"
#include "handshake.h"

#define MAX_RANKS 16

/* Exit codes a rank reports to the test. */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_ERR_BASE 20 /* 20 + (-crnet error) */

typedef int (*rank_fn)(int rank, int size, void *arg);

typedef struct job {
  int size;
  int port;
  char key[2 * CRNET__KEY_BYTES + 1];
  double init_timeout;
  bool slurm; /* rank and size in Slurm's variables, not crnet's */
  pid_t pids[MAX_RANKS];
  int status[MAX_RANKS];
  double exit_time[MAX_RANKS];
} job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static void job_init(job *j, int size, double init_timeout) {
  uint8_t key[CRNET__KEY_BYTES];
  memset(j, 0, sizeof *j);
  j->size = size;
  j->port = free_port();
  j->init_timeout = init_timeout;
  crnet__key_generate(key);
  crnet__key_to_hex(key, j->key);
}

static void rank_env(const job *j, int rank, const char *key) {
  char v[64];
  snprintf(v, sizeof v, "%d", rank);
  setenv(j->slurm ? "SLURM_PROCID" : "CRNET_RANK", v, 1);
  snprintf(v, sizeof v, "%d", j->size);
  setenv(j->slurm ? "SLURM_NTASKS" : "CRNET_SIZE", v, 1);
  if (j->slurm) {
    unsetenv("CRNET_RANK");
    unsetenv("CRNET_SIZE");
  }
  snprintf(v, sizeof v, "127.0.0.1:%d", j->port);
  setenv("CRNET_RENDEZVOUS", v, 1);
  snprintf(v, sizeof v, "%g", j->init_timeout);
  setenv("CRNET_INIT_TIMEOUT", v, 1);
  setenv("CRNET_JOB_KEY", key != NULL ? key : j->key, 1);
  unsetenv("CRNET_LAUNCHER");
  unsetenv("CRNET_JOB_KEY_FILE");
}

static void start_rank(job *j, int rank, rank_fn fn, void *arg,
                       const char *key) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* If the test process dies (Check's timeout), take the ranks along. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rank_env(j, rank, key);
    _exit(fn(rank, j->size, arg));
  }
  j->pids[rank] = pid;
}

/* A rank of j that has exited, or 0. */
static pid_t reap_rank(const job *j, int *st) {
  for (int r = 0; r < j->size; r++)
    if (j->pids[r] > 0 && waitpid(j->pids[r], st, WNOHANG) == j->pids[r])
      return j->pids[r];
  return 0;
}

/* Waits for every started rank, up to timeout_s; kills and fails on expiry.
 * any: reap any child meanwhile (the tests' usual case), else only j's. */
static void wait_ranks(job *j, double timeout_s, bool any) {
  double deadline = now_s() + timeout_s;
  int left = 0;
  for (int r = 0; r < j->size; r++)
    left += j->pids[r] > 0;
  while (left > 0) {
    int st;
    pid_t pid = any ? waitpid(-1, &st, WNOHANG) : reap_rank(j, &st);
    if (pid > 0) {
      for (int r = 0; r < j->size; r++) {
        if (j->pids[r] == pid) {
          j->status[r] = st;
          j->exit_time[r] = now_s();
          j->pids[r] = -1;
          left--;
        }
      }
      continue;
    }
    if (now_s() > deadline) {
      for (int r = 0; r < j->size; r++)
        if (j->pids[r] > 0)
          kill(j->pids[r], SIGKILL);
      for (int r = 0; r < j->size; r++)
        if (j->pids[r] > 0)
          waitpid(j->pids[r], NULL, 0);
      ck_abort_msg("%d rank(s) still running after %g s: hung", left,
                   timeout_s);
    }
    usleep(2000);
  }
}

static void wait_job(job *j, double timeout_s) {
  wait_ranks(j, timeout_s, true);
}

/* As wait_job, leaving other children (a capturer) alone. */
static void wait_job_only(job *j, double timeout_s) {
  wait_ranks(j, timeout_s, false);
}

static void run_job(job *j, rank_fn fn, void *arg, double timeout_s) {
  for (int r = 0; r < j->size; r++)
    start_rank(j, r, fn, arg, NULL);
  wait_job(j, timeout_s);
}

static int exit_code(const job *j, int rank) {
  return WIFEXITED(j->status[rank]) ? WEXITSTATUS(j->status[rank]) : -1;
}

static int err_exit(int rc) { return rc == 0 ? EXIT_OK : EXIT_ERR_BASE - rc; }

/* --- rank programs ----------------------------------------------------------- */

static int rank_allreduce(int rank, int size, void *arg) {
  crnet_comm *c;
  int64_t v = rank + 1, sum = 0;
  int rc;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT64, CRNET_SUM);
  if (rc == 0 && sum != (int64_t)size * (size + 1) / 2)
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  return err_exit(rc);
}

/* Init must fail; the message must contain `arg` (if given). */
static int rank_init_fails(int rank, int size, void *arg) {
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)size;
  if (rc == 0) {
    crnet_comm_destroy(c);
    return EXIT_FAIL;
  }
  fprintf(stderr, "rank %d: init failed as expected: %s: %s\n", rank,
          crnet_err_name(rc), crnet_init_errmsg());
  if (arg != NULL && strstr(crnet_init_errmsg(), (const char *)arg) == NULL)
    return EXIT_FAIL;
  return err_exit(rc);
}

static int rank_skip(int rank, int size, void *arg) {
  (void)rank;
  (void)size;
  (void)arg;
  return EXIT_OK;
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(job_without_launcher) {
  static const int sizes[] = {2, 3, 5};
  job j;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job_init(&j, sizes[i], 20);
    run_job(&j, rank_allreduce, NULL, 30);
    for (int r = 0; r < j.size; r++)
      ck_assert_msg(exit_code(&j, r) == EXIT_OK, "p=%d rank %d exited %d",
                    j.size, r, exit_code(&j, r));
  }
}
END_TEST

/* srun ./app: Slurm's SLURM_PROCID and SLURM_NTASKS give rank and size
 * (the rendezvous address and the key come from the environment as
 * without a launcher). */
START_TEST(job_under_slurm) {
  static const int sizes[] = {2, 3};
  job j;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job_init(&j, sizes[i], 20);
    j.slurm = true;
    run_job(&j, rank_allreduce, NULL, 30);
    for (int r = 0; r < j.size; r++)
      ck_assert_msg(exit_code(&j, r) == EXIT_OK, "p=%d rank %d exited %d",
                    j.size, r, exit_code(&j, r));
  }
}
END_TEST

START_TEST(singleton_without_environment) {
  crnet_comm *c;
  double x = 2.5, y = 0;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_comm_rank(c), 0);
  ck_assert_int_eq(crnet_comm_size(c), 1);
  ck_assert_int_eq(crnet_allreduce(c, &x, &y, 1, CRNET_DOUBLE, CRNET_SUM), 0);
  ck_assert(y == 2.5);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

#define HEX_KEY_FOR_SETTINGS                                                   \
  "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

START_TEST(bad_settings_fail_at_once) {
  static const struct {
    const char *rank, *size, *rdv, *key, *expect;
  } cases[] = {
      {"5", "3", "127.0.0.1:1", NULL, "do not make a job"},
      {"x", "3", "127.0.0.1:1", NULL, "CRNET_RANK"},
      {"0", "0", "127.0.0.1:1", NULL, "CRNET_SIZE"},
      {"0", "2", NULL, NULL, "CRNET_RENDEZVOUS"},
      {"0", "2", "nohostport", NULL, "not host:port"},
      {"0", "2", "127.0.0.1:99999", NULL, "not host:port"},
      {"0", "2", "127.0.0.1:1", "abc", "64 hex"},
      {"0", "2", "127.0.0.1:1", "", "no job key"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    crnet_comm *c = (crnet_comm *)&c;
    double t0 = now_s();
    int rc;
    setenv("CRNET_RANK", cases[i].rank, 1);
    setenv("CRNET_SIZE", cases[i].size, 1);
    if (cases[i].rdv != NULL)
      setenv("CRNET_RENDEZVOUS", cases[i].rdv, 1);
    else
      unsetenv("CRNET_RENDEZVOUS");
    unsetenv("CRNET_JOB_KEY_FILE");
    if (cases[i].key != NULL && cases[i].key[0] != '\0')
      setenv("CRNET_JOB_KEY", cases[i].key, 1);
    else
      unsetenv("CRNET_JOB_KEY");
    rc = crnet_comm_init(&c, NULL);
    ck_assert_msg(rc == CRNET_EINVAL, "case %zu: %s", i, crnet_err_name(rc));
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(crnet_init_errmsg(), cases[i].expect) != NULL,
                  "case %zu: message '%s' lacks '%s'", i, crnet_init_errmsg(),
                  cases[i].expect);
    ck_assert(now_s() - t0 < 1.0);
  }
  ck_assert_int_eq(crnet_comm_init(NULL, NULL), CRNET_EINVAL);

  /* CRNET_ENCRYPT takes 0 or 1 only. */
  static const char *const bad_encrypt[] = {"2", "yes", "true", " 1", "01"};
  setenv("CRNET_RANK", "0", 1);
  setenv("CRNET_SIZE", "2", 1);
  setenv("CRNET_RENDEZVOUS", "127.0.0.1:1", 1);
  setenv("CRNET_JOB_KEY", HEX_KEY_FOR_SETTINGS, 1);
  for (size_t i = 0; i < sizeof bad_encrypt / sizeof bad_encrypt[0]; i++) {
    crnet_comm *c = (crnet_comm *)&c;
    setenv("CRNET_ENCRYPT", bad_encrypt[i], 1);
    ck_assert_int_eq(crnet_comm_init(&c, NULL), CRNET_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(crnet_init_errmsg(), "CRNET_ENCRYPT") != NULL &&
                      strstr(crnet_init_errmsg(), "0 or 1") != NULL,
                  "'%s': message '%s'", bad_encrypt[i], crnet_init_errmsg());
  }
  unsetenv("CRNET_ENCRYPT");
  unsetenv("CRNET_JOB_KEY");
}
END_TEST

START_TEST(wrong_key_fails_fast) {
  job j;
  char other[2 * CRNET__KEY_BYTES + 1];
  uint8_t key[CRNET__KEY_BYTES];
  double t0;
  job_init(&j, 3, 3);
  crnet__key_generate(key);
  crnet__key_to_hex(key, other);
  t0 = now_s();
  start_rank(&j, 0, rank_init_fails, "rank 2", NULL);
  start_rank(&j, 1, rank_init_fails, "rank 2", NULL);
  start_rank(&j, 2, rank_init_fails, "job key", other);
  wait_job(&j, 15);
  ck_assert_int_eq(exit_code(&j, 2), err_exit(CRNET_EAUTH));
  /* The impostor is refused at once, not after the timeout. */
  ck_assert_msg(j.exit_time[2] - t0 < 2.0, "impostor took %.2f s",
                j.exit_time[2] - t0);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
}
END_TEST

START_TEST(missing_rank_is_named) {
  job j;
  double t0;
  job_init(&j, 3, 2);
  t0 = now_s();
  start_rank(&j, 0, rank_init_fails, "rank 1 never reached", NULL);
  start_rank(&j, 1, rank_skip, NULL, NULL);
  start_rank(&j, 2, rank_init_fails, "rank 1 never reached", NULL);
  wait_job(&j, 15);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  ck_assert_int_eq(exit_code(&j, 2), err_exit(CRNET_ETIMEDOUT));
  ck_assert_msg(now_s() - t0 < 6.0, "took %.2f s for a 2 s timeout",
                now_s() - t0);
}
END_TEST

static int connect_loopback(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

START_TEST(strangers_do_not_stop_the_job) {
  job j;
  int fds[4], fd = -1;
  uint8_t junk[1024], hello[CRNET__HS_HELLO_SIZE], key[CRNET__KEY_BYTES];
  crnet__handshake hs;
  double deadline;
  job_init(&j, 3, 20);
  start_rank(&j, 0, rank_allreduce, NULL, NULL);
  /* Wait for rank 0's rendezvous to listen. */
  deadline = now_s() + 10;
  while (fd < 0 && now_s() < deadline) {
    fd = connect_loopback(j.port);
    if (fd < 0)
      usleep(10000);
  }
  ck_assert_msg(fd >= 0, "rank 0 never served the rendezvous");
  fds[0] = fd; /* silent: connects and says nothing */
  fds[1] = connect_loopback(j.port);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(i * 131 + 7);
  ck_assert_int_eq(write(fds[1], junk, sizeof junk), (ssize_t)sizeof junk);
  /* A well-formed HELLO under another job's key, claiming rank 1. */
  fds[2] = connect_loopback(j.port);
  crnet__key_generate(key);
  crnet__hs_init_initiator(&hs, key, CRNET__HS_RENDEZVOUS, 1,
                           CRNET__RANK_RENDEZVOUS, 3);
  crnet__hs_write_hello(&hs, hello);
  ck_assert_int_eq(write(fds[2], hello, sizeof hello), (ssize_t)sizeof hello);
  crnet__hs_wipe(&hs);
  /* Half a HELLO, then silence. */
  fds[3] = connect_loopback(j.port);
  ck_assert_int_eq(write(fds[3], hello, 10), 10);
  start_rank(&j, 1, rank_allreduce, NULL, NULL);
  start_rank(&j, 2, rank_allreduce, NULL, NULL);
  wait_job(&j, 30);
  for (int i = 0; i < 4; i++)
    close(fds[i]);
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d", r,
                  exit_code(&j, r));
}
END_TEST

/* Loops allreduces; the victim kills itself in the middle. The others must
 * fail with CRNET_EPEER naming the victim. */
static int rank_victim(int rank, int size, void *arg) {
  int victim = *(int *)arg;
  size_t count = 1 << 18;
  float *v = malloc(count * sizeof *v);
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)size;
  if (rc != 0 || v == NULL)
    return EXIT_FAIL;
  for (size_t i = 0; i < count; i++)
    v[i] = 1.0f;
  for (int it = 0; it < 100000; it++) {
    if (rank == victim && it == 20)
      raise(SIGKILL);
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, count, CRNET_FLOAT, CRNET_MAX);
    if (rc != 0)
      break;
  }
  fprintf(stderr, "rank %d: %s: %s\n", rank, crnet_err_name(rc),
          crnet_comm_errmsg(c));
  if (rc != 0 && strstr(crnet_comm_errmsg(c), "rank 1") == NULL)
    rc = CRNET_EIO; /* the message must name the lost rank */
  /* The error is sticky. */
  if (rc != 0 && crnet_allreduce(c, CRNET_IN_PLACE, v, 1, CRNET_FLOAT,
                                 CRNET_MAX) != rc)
    rc = CRNET_EIO;
  crnet_comm_destroy(c);
  free(v);
  return err_exit(rc);
}

static void victim_job(void) {
  job j;
  int victim = 1;
  job_init(&j, 4, 20);
  run_job(&j, rank_victim, &victim, 30);
  ck_assert(WIFSIGNALED(j.status[1]) && WTERMSIG(j.status[1]) == SIGKILL);
  for (int r = 0; r < 4; r++) {
    if (r == victim)
      continue;
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EPEER),
                  "rank %d exited %d", r, exit_code(&j, r));
    ck_assert_msg(j.exit_time[r] - j.exit_time[victim] < 2.0,
                  "rank %d needed %.2f s to notice", r,
                  j.exit_time[r] - j.exit_time[victim]);
  }
}

START_TEST(killed_rank_fails_the_others) { victim_job(); }
END_TEST

/* The same with three TCP streams per peer and 1 MiB vectors split into
 * parts across them: a peer dies while parts of a message are still on
 * the way on several links. */
START_TEST(killed_rank_fails_the_others_streams) {
  setenv("CRNET_STREAMS", "3", 1);
  setenv("CRNET_STREAMS_MIN_BYTES", "16384", 1);
  victim_job();
  unsetenv("CRNET_STREAMS");
  unsetenv("CRNET_STREAMS_MIN_BYTES");
}
END_TEST

static int rank_aborter(int rank, int size, void *arg) {
  float v[64] = {0};
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)size;
  (void)arg;
  if (rc != 0)
    return EXIT_FAIL;
  for (int it = 0; it < 1000000; it++) {
    if (rank == 2 && it == 10) {
      crnet_comm_abort(c, 42);
      rc = crnet_allreduce(c, CRNET_IN_PLACE, v, 64, CRNET_FLOAT, CRNET_SUM);
      crnet_comm_destroy(c);
      return rc == CRNET_EABORTED ? EXIT_OK : EXIT_FAIL;
    }
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, 64, CRNET_FLOAT, CRNET_SUM);
    if (rc != 0)
      break;
  }
  fprintf(stderr, "rank %d: %s (code %d): %s\n", rank, crnet_err_name(rc),
          crnet_comm_abort_code(c), crnet_comm_errmsg(c));
  if (crnet_comm_abort_code(c) != 42)
    rc = CRNET_EIO;
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(abort_reaches_everyone) {
  job j;
  job_init(&j, 4, 20);
  run_job(&j, rank_aborter, NULL, 30);
  ck_assert_int_eq(exit_code(&j, 2), EXIT_OK);
  for (int r = 0; r < 4; r++)
    if (r != 2)
      ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EABORTED),
                    "rank %d exited %d", r, exit_code(&j, r));
}
END_TEST

static int rank_mismatch(int rank, int size, void *arg) {
  int32_t v[32] = {0};
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)size;
  (void)arg;
  if (rc != 0)
    return EXIT_FAIL;
  rc = crnet_allreduce(c, CRNET_IN_PLACE, v, rank == 0 ? 10 : 11, CRNET_INT32,
                       CRNET_SUM);
  fprintf(stderr, "rank %d: %s: %s\n", rank, crnet_err_name(rc),
          crnet_comm_errmsg(c));
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(mismatched_calls_fail) {
  job j;
  job_init(&j, 3, 20);
  run_job(&j, rank_mismatch, NULL, 30);
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_EMISMATCH),
                  "rank %d exited %d", r, exit_code(&j, r));
}
END_TEST

/* One exchange larger than 2^31 bytes each way (the classic int overflow),
 * and zero bytes, through the runtime's send+receive primitive. */
static int rank_huge(int rank, int size, void *arg) {
  uint64_t n = *(uint64_t *)arg;
  uint8_t *s = malloc(n), *r = malloc(n);
  crnet_comm *c;
  int rc, peer = 1 - rank;
  (void)size;
  if (s == NULL || r == NULL)
    return EXIT_FAIL;
  for (uint64_t i = 0; i < n; i += 4096)
    s[i] = (uint8_t)(i / 4096 * 31 + (uint64_t)rank);
  s[n - 1] = (uint8_t)(0xa5 + rank);
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return EXIT_FAIL;
  crnet__coll_begin(c, CRNET_COLL_ALLREDUCE);
  rc = crnet__sendrecv(c, peer, s, 0, peer, r, 0, 0, 7);
  if (rc == 0)
    rc = crnet__sendrecv(c, peer, s, n, peer, r, n, 1, 7);
  crnet__coll_end(c);
  if (rc == 0) {
    for (uint64_t i = 0; i < n; i += 4096)
      if (r[i] != (uint8_t)(i / 4096 * 31 + (uint64_t)peer))
        rc = CRNET_EIO;
    if (r[n - 1] != (uint8_t)(0xa5 + peer))
      rc = CRNET_EIO;
  }
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  free(s);
  free(r);
  return err_exit(rc);
}

START_TEST(exchange_beyond_2gib) {
  uint64_t n = ((uint64_t)1 << 31) + 17;
  const char *env = getenv("CRNET_TEST_HUGE_BYTES");
  job j;
#if defined(__SANITIZE_ADDRESS__)
  printf("exchange_beyond_2gib: reduced to 64 MiB under AddressSanitizer\n");
  n = ((uint64_t)64 << 20) + 17;
#endif
  if (env != NULL)
    n = strtoull(env, NULL, 10);
  job_init(&j, 2, 20);
  run_job(&j, rank_huge, &n, 120);
  ck_assert_int_eq(exit_code(&j, 0), EXIT_OK);
  ck_assert_int_eq(exit_code(&j, 1), EXIT_OK);
}
END_TEST

/* The kernel's count of TCP resets sent, from /proc/net/snmp. */
static long tcp_out_resets(void) {
  FILE *f = fopen("/proc/net/snmp", "r");
  char names[1024], values[1024];
  long result = -1;
  if (f == NULL)
    return -1;
  while (fgets(names, sizeof names, f) != NULL &&
         fgets(values, sizeof values, f) != NULL) {
    char *sn, *sv;
    char *n = strtok_r(names, " \n", &sn), *v = strtok_r(values, " \n", &sv);
    if (n == NULL || strcmp(n, "Tcp:") != 0)
      continue;
    while ((n = strtok_r(NULL, " \n", &sn)) != NULL &&
           (v = strtok_r(NULL, " \n", &sv)) != NULL)
      if (strcmp(n, "OutRsts") == 0)
        result = atol(v);
  }
  fclose(f);
  return result;
}

static int rank_many_then_destroy(int rank, int size, void *arg) {
  size_t count = 100003;
  double *v = malloc(count * sizeof *v);
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)arg;
  if (rc != 0 || v == NULL)
    return EXIT_FAIL;
  for (int it = 0; it < 20 && rc == 0; it++) {
    for (size_t i = 0; i < count; i++)
      v[i] = rank + it;
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, count, CRNET_DOUBLE, CRNET_SUM);
    for (size_t i = 0; rc == 0 && i < count; i++)
      if (v[i] != (double)size * (size - 1) / 2 + (double)size * it)
        rc = CRNET_EIO;
  }
  free(v);
  if (rc != 0) {
    crnet_comm_destroy(c);
    return err_exit(rc);
  }
  return err_exit(crnet_comm_destroy(c));
}

/* True once something listens on 127.0.0.1:port (from /proc/net/tcp, so
 * without connecting). */
static bool listening_on(int port) {
  FILE *f = fopen("/proc/net/tcp", "r");
  char line[512], want[32];
  bool found = false;
  if (f == NULL)
    return false;
  snprintf(want, sizeof want, "0100007F:%04X", port);
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char local[64], remote[64];
    unsigned state;
    if (sscanf(line, "%*d: %63s %63s %x", local, remote, &state) == 3 &&
        strcmp(local, want) == 0 && state == 0x0A)
      found = true;
  }
  fclose(f);
  return found;
}

START_TEST(destroy_is_orderly) {
  job j;
  long before, after;
  double deadline;
  before = tcp_out_resets();
  if (before < 0) {
    printf("destroy_is_orderly: /proc/net/snmp unreadable; reset count not "
           "checked\n");
  }
  job_init(&j, 5, 20);
  /* Others start once rank 0's rendezvous listens: a connection attempt
   * before that is refused with a reset, by design (they retry). */
  start_rank(&j, 0, rank_many_then_destroy, NULL, NULL);
  deadline = now_s() + 10;
  while (!listening_on(j.port) && now_s() < deadline)
    usleep(2000);
  for (int r = 1; r < 5; r++)
    start_rank(&j, r, rank_many_then_destroy, NULL, NULL);
  wait_job(&j, 60);
  after = tcp_out_resets();
  for (int r = 0; r < 5; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d", r,
                  exit_code(&j, r));
  /* The rendezvous, the mesh and the goodbyes: not one reset. (Assumes
   * nothing else on the machine resets connections meanwhile, as in CI.) */
  if (before >= 0)
    ck_assert_msg(after == before, "%ld TCP resets sent during the job",
                  after - before);
}
END_TEST

/* Every rank's mesh port must lie in the range given. */
static int rank_port_range(int rank, int size, void *arg) {
  const int *range = arg;
  crnet_comm *c;
  int rc = crnet_comm_init(&c, NULL);
  (void)size;
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  for (int r = 0; r < c->size; r++)
    if (c->table[r].port < range[0] || c->table[r].port > range[1])
      rc = CRNET_EIO;
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(port_range_is_honoured) {
  int range[2];
  char v[32];
  job j;
  job_init(&j, 3, 20);
  /* A range just above the rendezvous port, which is known to be free. */
  range[0] = j.port + 1;
  range[1] = j.port + 40;
  snprintf(v, sizeof v, "%d-%d", range[0], range[1]);
  setenv("CRNET_PORT_RANGE", v, 1);
  run_job(&j, rank_port_range, range, 30);
  unsetenv("CRNET_PORT_RANGE");
  for (int r = 0; r < 3; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited %d", r,
                  exit_code(&j, r));
}
END_TEST

START_TEST(busy_port_range_fails_clearly) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;
  socklen_t len = sizeof a;
  char v[32];
  job j;
  /* Hold the only port of the range. */
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(fd, 1), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  port = ntohs(a.sin_port);
  snprintf(v, sizeof v, "%d-%d", port, port);
  setenv("CRNET_PORT_RANGE", v, 1);
  job_init(&j, 2, 3);
  /* Rank 0 certainly meets the busy range itself. Rank 1 may meet it too, or
   * may first lose the rendezvous that rank 0 served: either way it fails. */
  start_rank(&j, 0, rank_init_fails, "no free port in CRNET_PORT_RANGE", NULL);
  start_rank(&j, 1, rank_init_fails, NULL, NULL);
  wait_job(&j, 20);
  unsetenv("CRNET_PORT_RANGE");
  close(fd);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_EIO));
  ck_assert_int_ge(exit_code(&j, 1), EXIT_ERR_BASE);
}
END_TEST

/* --- encryption on the wire ------------------------------------------------
 *
 * A raw AF_PACKET socket on the loopback interface sees every byte the
 * ranks send each other. Rank 0 broadcasts a buffer filled with a 16-byte
 * ASCII marker: without encryption the marker must be on the wire (so the
 * capture is known to work), with encryption it must not be, although as
 * many bytes go by. A machine where the raw socket cannot be opened (no
 * CAP_NET_RAW) skips with one line. */

#define MARKER "crnet:capture:16"
#define MARKER_BYTES 16
#define MARKER_BUF ((size_t)1 << 20)

static int rank_bcast_marker(int rank, int size, void *arg) {
  crnet_comm *c;
  char *buf = malloc(MARKER_BUF);
  int rc;
  (void)size;
  (void)arg;
  if (buf == NULL)
    return EXIT_FAIL;
  for (size_t k = 0; k < MARKER_BUF; k++)
    buf[k] = rank == 0 ? MARKER[k % MARKER_BYTES] : 0;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    free(buf);
    return err_exit(rc);
  }
  rc = crnet_bcast(c, buf, MARKER_BUF, CRNET_UINT8, 0);
  for (size_t k = 0; rc == 0 && k < MARKER_BUF; k++)
    if (buf[k] != MARKER[k % MARKER_BYTES])
      rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  free(buf);
  return err_exit(rc);
}

/* What the capture saw: packets holding the marker, and all bytes. */
typedef struct capture_result {
  uint64_t marked_packets;
  uint64_t bytes;
} capture_result;

/* The capturing child: reads lo until a byte arrives on `stop`, then writes
 * its result to `out`. */
static void capture_loop(int fd, int stop, int out) {
  static uint8_t pkt[1 << 17];
  capture_result res = {0, 0};
  struct pollfd pf[2] = {{.fd = fd, .events = POLLIN},
                         {.fd = stop, .events = POLLIN}};
  double deadline = now_s() + 120;
  while (now_s() < deadline) {
    if (poll(pf, 2, 50) < 0 && errno != EINTR)
      break;
    if (pf[1].revents != 0)
      break;
    for (;;) {
      ssize_t n = recv(fd, pkt, sizeof pkt, MSG_DONTWAIT);
      if (n <= 0)
        break;
      res.bytes += (uint64_t)n;
      if (memmem(pkt, (size_t)n, MARKER, MARKER_BYTES) != NULL)
        res.marked_packets++;
    }
  }
  if (write(out, &res, sizeof res) != (ssize_t)sizeof res)
    _exit(1);
  _exit(0);
}

/* Runs a 3-rank bcast of the marker while capturing lo. False if no raw
 * socket could be opened. */
static bool capture_job(capture_result *res) {
  int stop[2], out[2];
  int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  struct sockaddr_ll sll = {.sll_family = AF_PACKET,
                            .sll_protocol = htons(ETH_P_ALL),
                            .sll_ifindex = (int)if_nametoindex("lo")};
  int rcvbuf = 16 << 20;
  job j;
  if (fd < 0 || sll.sll_ifindex == 0 ||
      bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  ck_assert_int_eq(pipe(stop), 0);
  ck_assert_int_eq(pipe(out), 0);
  pid_t cap = fork();
  ck_assert_int_ge(cap, 0);
  if (cap == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    capture_loop(fd, stop[0], out[1]);
  }
  close(fd);
  job_init(&j, 3, 30);
  /* wait_job reaps any child; the capturer must not be among them. */
  for (int r = 0; r < j.size; r++)
    start_rank(&j, r, rank_bcast_marker, NULL, NULL);
  wait_job_only(&j, 60);
  ck_assert_int_eq(write(stop[1], "x", 1), 1);
  ck_assert_int_eq(read(out[0], res, sizeof *res), (ssize_t)sizeof *res);
  ck_assert_int_eq(waitpid(cap, NULL, 0), cap);
  close(stop[0]), close(stop[1]), close(out[0]), close(out[1]);
  for (int r = 0; r < j.size; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited with %d", r,
                  exit_code(&j, r));
  return true;
}

/* capture_job with CRNET_ENCRYPT=encrypt; false (after saying so once) if
 * the capture cannot be done here. */
static bool capture_with(const char *encrypt, capture_result *res) {
  setenv("CRNET_ENCRYPT", encrypt, 1);
  bool ran = capture_job(res);
  unsetenv("CRNET_ENCRYPT");
  if (!ran)
    printf("capture test skipped: cannot open a raw socket on lo\n");
  return ran;
}

START_TEST(capture_plaintext_shows_marker) {
  capture_result res;
  if (!capture_with("0", &res))
    return;
  ck_assert_msg(res.marked_packets > 0,
                "the marker never showed in %llu bytes captured in the clear",
                (unsigned long long)res.bytes);
}
END_TEST

START_TEST(capture_encrypted_hides_marker) {
  capture_result res;
  if (!capture_with("1", &res))
    return;
  /* The bcast moves at least 2 MiB (1 MiB to each of two ranks): proof that
   * the capture saw the job's traffic. */
  ck_assert_uint_ge(res.bytes, 2 * MARKER_BUF);
  ck_assert_msg(res.marked_packets == 0,
                "%llu packets carried the plaintext marker with encryption on",
                (unsigned long long)res.marked_packets);
}
END_TEST

static int rank_encrypted_allreduce(int rank, int size, void *arg) {
  setenv("CRNET_ENCRYPT", "1", 1);
  return rank_allreduce(rank, size, arg);
}

/* Encryption on over several streams per peer, started without crlaunch
 * (rank 0 serves an encrypted rendezvous). */
START_TEST(encrypted_job_without_launcher) {
  job j;
  setenv("CRNET_STREAMS", "2", 1);
  job_init(&j, 4, 30);
  run_job(&j, rank_encrypted_allreduce, NULL, 60);
  unsetenv("CRNET_STREAMS");
  for (int r = 0; r < j.size; r++)
    ck_assert_int_eq(exit_code(&j, r), EXIT_OK);
}
END_TEST

static int rank_encrypting_init_fails(int rank, int size, void *arg) {
  setenv("CRNET_ENCRYPT", "1", 1);
  return rank_init_fails(rank, size, arg);
}

/* Rank 0 encrypts, ranks 1 and 2 do not: rank 0 answers their handshakes
 * saying it encrypts, and they give up at once, rank 1 (which connects to
 * rank 0 only) naming the setting; rank 0 waits for them until its
 * timeout. Run
 * several times: the links between 1 and 2 may still be in their
 * handshake when the job fails, and must not keep a rank alive. */
START_TEST(encrypt_mismatch_fails_fast) {
  for (int round = 0; round < 5; round++) {
    job j;
    double t0 = now_s();
    job_init(&j, 3, 3);
    start_rank(&j, 0, rank_encrypting_init_fails, NULL, NULL);
    start_rank(&j, 1, rank_init_fails,
               "peer encrypts (CRNET_ENCRYPT=1), we do not", NULL);
    /* Rank 2 may hear it from rank 1 first, which cut their handshake. */
    start_rank(&j, 2, rank_init_fails, NULL, NULL);
    wait_job(&j, 15);
    for (int r = 1; r < 3; r++) {
      ck_assert_int_eq(exit_code(&j, r), err_exit(CRNET_EAUTH));
      ck_assert_msg(j.exit_time[r] - t0 < 2.0, "rank %d took %.2f s", r,
                    j.exit_time[r] - t0);
    }
    ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  }
}
END_TEST

static Suite *net_suite(void) {
  Suite *s = suite_create("net");
  TCase *t = tcase_create("net");
  tcase_set_timeout(t, 150);
  tcase_add_test(t, singleton_without_environment);
  tcase_add_test(t, bad_settings_fail_at_once);
  tcase_add_test(t, job_without_launcher);
  tcase_add_test(t, job_under_slurm);
  tcase_add_test(t, destroy_is_orderly);
  tcase_add_test(t, port_range_is_honoured);
  tcase_add_test(t, busy_port_range_fails_clearly);
  tcase_add_test(t, wrong_key_fails_fast);
  tcase_add_test(t, missing_rank_is_named);
  tcase_add_test(t, strangers_do_not_stop_the_job);
  tcase_add_test(t, killed_rank_fails_the_others);
  tcase_add_test(t, killed_rank_fails_the_others_streams);
  tcase_add_test(t, abort_reaches_everyone);
  tcase_add_test(t, mismatched_calls_fail);
  tcase_add_test(t, exchange_beyond_2gib);
  suite_add_tcase(s, t);

  t = tcase_create("encrypt");
  tcase_set_timeout(t, 150);
  tcase_add_test(t, encrypted_job_without_launcher);
  tcase_add_test(t, encrypt_mismatch_fails_fast);
  tcase_add_test(t, capture_plaintext_shows_marker);
  tcase_add_test(t, capture_encrypted_hides_marker);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(net_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
