/* Real ranks on loopback, started without crlaunch: each test forks the
 * ranks of a job with the environment contract set, rank 0 serving the
 * rendezvous. Covers what can go wrong at the edges of a job: wrong keys,
 * strangers on the rendezvous port, ranks that never come, a rank killed
 * mid-collective, an abort, mismatched calls, bad settings, and a message
 * larger than 2 GiB. Every wait is bounded; a child that outlives its
 * deadline is killed and the test fails saying so. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
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
#include "netjob.h"

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
