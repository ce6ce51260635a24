/* Real ranks on loopback, started without crlaunch: each test forks the
 * ranks of a job with the environment contract set, rank 0 serving the
 * rendezvous (or the test itself, as crlaunch would). Covers what can go wrong at the edges of a job: wrong keys,
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "comm.h"
#include "crnet.h"
#include "handshake.h"
#include "netjob.h"
#include "rendezvous.h"
#include "skip.h"

/* --- rank programs ----------------------------------------------------------- */

/* One allreduce of rank + 1 on a comm just joined, checked, then the comm
 * destroyed: the exit status of a rank of a job that must pass. */
static int allreduce_and_leave(crnet_comm *c, int rank, int size) {
  int64_t v = rank + 1, sum = 0;
  int rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT64, CRNET_SUM);
  if (rc == 0 && sum != (int64_t)size * (size + 1) / 2)
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  return err_exit(rc);
}

static int rank_allreduce(int rank, int size, void *arg) {
  crnet_comm *c;
  int rc;
  (void)arg;
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  return allreduce_and_leave(c, rank, size);
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

/* A directory (crnet_config.directory) kept in files of a directory every
 * rank sees, as a program's own store would keep it: publish writes a file
 * under the key's name (whole, by a rename), lookup polls for it. */
static int files_publish(void *arg, const char *key, const char *value) {
  char path[512], tmp[520];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", (const char *)arg, key);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "w");
  if (f == NULL)
    return -1;
  fputs(value, f);
  if (fclose(f) != 0)
    return -1;
  return rename(tmp, path);
}

static int files_lookup(void *arg, const char *key, char *value,
                        size_t capacity, double timeout) {
  char path[512];
  double until = now_s() + timeout;
  snprintf(path, sizeof path, "%s/%s", (const char *)arg, key);
  for (;;) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      size_t n = fread(value, 1, capacity - 1, f);
      int more = fgetc(f);
      fclose(f);
      value[n] = '\0';
      return more == EOF ? 0 : -1;
    }
    if (now_s() > until)
      return -1;
    usleep(10000);
  }
}

/* A rank started with none of crnet's variables but its rank and size,
 * meeting the others through a directory: rank 0 publishes the rendezvous
 * and a fresh key there. */
typedef struct directory_job {
  const char *dir;
  bool encrypt;
  rank_report *reports; /* NULL, or where a failed init's message goes */
} directory_job;

static int rank_directory(int rank, int size, void *arg) {
  const directory_job *dj = arg;
  crnet_directory d = {files_publish, files_lookup, (void *)dj->dir};
  crnet_config cfg;
  crnet_comm *c;
  int rc;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  unsetenv("CRNET_RENDEZVOUS");
  unsetenv("CRNET_JOB_KEY");
  if (dj->encrypt)
    setenv("CRNET_ENCRYPT", "1", 1);
  crnet_config_init(&cfg);
  cfg.rank = rank;
  cfg.size = size;
  cfg.directory = &d;
  rc = crnet_comm_init(&c, &cfg);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s: %s\n", rank, crnet_err_name(rc),
            crnet_init_errmsg());
    if (dj->reports != NULL) {
      rank_report *r = &dj->reports[rank];
      r->rc = rc;
      snprintf(r->errmsg, sizeof r->errmsg, "%s", crnet_init_errmsg());
    }
    return err_exit(rc);
  }
  return allreduce_and_leave(c, rank, size);
}

/* The files hold what rank 0 published: its addresses with the port it
 * listens on, and a key of 64 hex digits that no rank had before. */
static void check_published(const char *dir) {
  char path[512], text[1024] = "";
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "%s/crnet.key", dir);
  f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no crnet.key published");
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  ck_assert_msg(n == 64 && strspn(text, "0123456789abcdef") == 64,
                "published key '%s'", text);
  snprintf(path, sizeof path, "%s/crnet.rendezvous", dir);
  f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no crnet.rendezvous published");
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  ck_assert_msg(n > 0 && strchr(text, ':') != NULL, "published rendezvous '%s'",
                text);
  printf("published rendezvous: %s\n", text);
}

/* --- tests ------------------------------------------------------------------
 */

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

/* Started by a launcher crnet cannot join, with none of crnet's variables:
 * init fails naming the launcher, never a silent job of one; a launcher's
 * job of one stays a job of one. */
START_TEST(foreign_launcher_is_refused) {
  static const struct {
    const char *var, *value, *who; /* who NULL: a job of one */
  } cases[] = {
      {"OMPI_COMM_WORLD_SIZE", "4", "Open MPI's mpirun"},
      {"OMPI_COMM_WORLD_SIZE", "1", NULL},
      {"PMI_SIZE", "3", "MPICH (Hydra)"},
      {"MPI_LOCALNRANKS", "2", "MPICH's mpiexec"},
      {"PMIX_RANK", "0", "PMIx launcher"},
      {"WORLD_SIZE", "2", "torchrun"},
      {"WORLD_SIZE", "1", NULL},
  };
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    crnet_comm *c = NULL;
    int rc;
    setenv(cases[i].var, cases[i].value, 1);
    rc = crnet_comm_init(&c, NULL);
    unsetenv(cases[i].var);
    if (cases[i].who == NULL) {
      ck_assert_msg(rc == 0, "%s=%s: %s", cases[i].var, cases[i].value,
                    crnet_init_errmsg());
      ck_assert_int_eq(crnet_comm_size(c), 1);
      ck_assert_int_eq(crnet_comm_destroy(c), 0);
      continue;
    }
    ck_assert_msg(rc == CRNET_EINVAL && c == NULL, "%s=%s: init returned %d",
                  cases[i].var, cases[i].value, rc);
    ck_assert_msg(strstr(crnet_init_errmsg(), cases[i].who) != NULL &&
                      strstr(crnet_init_errmsg(), cases[i].var) != NULL &&
                      strstr(crnet_init_errmsg(), "crlaunch") != NULL,
                  "%s=%s: %s", cases[i].var, cases[i].value,
                  crnet_init_errmsg());
  }
  /* crnet's own variables win over any launcher's. */
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("CRNET_RANK", "0", 1);
  setenv("CRNET_SIZE", "1", 1);
  {
    crnet_comm *c = NULL;
    ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
    ck_assert_int_eq(crnet_comm_destroy(c), 0);
  }
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
}
END_TEST

/* Removes a test's directory store and what it holds. */
static void remove_directory(const char *dir) {
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* crnet_config.directory: no CRNET_RENDEZVOUS, no key; rank 0 publishes
 * both (plain and encrypted jobs). A rank whose lookup never finds the
 * rendezvous fails within the init timeout naming the directory. */
START_TEST(job_through_a_directory) {
  for (int k = 0; k < 2; k++) {
    char dir[] = "/tmp/crnet-directory.XXXXXX";
    directory_job dj = {dir, k == 1, NULL};
    job j;
    ck_assert(mkdtemp(dir) != NULL);
    job_init(&j, 3 + k, 20);
    run_job(&j, rank_directory, &dj, 60);
    expect_all_ok(&j, k == 0 ? "directory" : "directory, encrypted");
    check_published(dir);
    remove_directory(dir);
  }
  {
    char dir[] = "/tmp/crnet-directory.XXXXXX";
    directory_job dj = {dir, false, NULL};
    job j;
    ck_assert(mkdtemp(dir) != NULL);
    job_init_exact(&j, 2, 1);
    /* Rank 0 never comes: rank 1 waits for the published key in vain. */
    start_rank(&j, 1, rank_directory, &dj, NULL);
    wait_job(&j, 30);
    ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
    remove_directory(dir);
  }
}
END_TEST

static int failing_lookup(void *arg, const char *key, char *value,
                          size_t capacity, double timeout) {
  (void)arg;
  (void)key;
  (void)value;
  (void)capacity;
  (void)timeout;
  return CRNET_EIO;
}

/* A directory that fails (torch's store gone with its rank 0) fails the
 * init at once, saying so, and not as a wait for rank 0 that timed out. */
START_TEST(failed_directory_is_named) {
  crnet_directory d = {files_publish, failing_lookup, (void *)"/nonexistent"};
  crnet_config cfg;
  crnet_comm *c = (crnet_comm *)&c;
  double t0 = now_s();
  unsetenv("CRNET_RENDEZVOUS");
  unsetenv("CRNET_JOB_KEY");
  unsetenv("CRNET_JOB_KEY_FILE");
  crnet_config_init(&cfg);
  cfg.rank = 1;
  cfg.size = 2;
  cfg.directory = &d;
  cfg.init_timeout = 30;
  ck_assert_int_eq(crnet_comm_init(&c, &cfg), CRNET_EIO);
  ck_assert(c == NULL);
  ck_assert_msg(
      strstr(crnet_init_errmsg(), "failed while looking up crnet.key") != NULL,
      "%s", crnet_init_errmsg());
  ck_assert_msg(now_s() - t0 < 5, "failed after %.1f s", now_s() - t0);
}
END_TEST

/* What the directory may hold when rank 0 published garbage, or published
 * and then died: the other ranks fail within the init timeout, saying
 * what was wrong with it and where it came from, and never hang. And a
 * rank that never comes fails the ranks that did, naming it. */
START_TEST(directory_start_failures) {
  static const char key[] =
      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
  char closed[32];
  snprintf(closed, sizeof closed, "127.0.0.1:%d", free_port());
  const struct {
    const char *key, *list; /* NULL: not published */
    int rc;
    const char *says;
  } cases[] = {
      {"not a key", "127.0.0.1:1", CRNET_EIO, "is not 64 hex digits"},
      {key, "garbage", CRNET_EIO, "garbage"},
      {key, "", CRNET_EIO, "rendezvous"},
      {key, "127.0.0.1:99999", CRNET_EIO, "127.0.0.1:99999"},
      /* Rank 0 published and is gone: nobody listens there. */
      {key, closed, CRNET_ETIMEDOUT, "published through"},
      /* Rank 0 died after publishing the key, before the rendezvous. */
      {key, NULL, CRNET_ETIMEDOUT, "crnet.rendezvous"},
  };
  rank_report *reports = reports_map();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dir[] = "/tmp/crnet-directory.XXXXXX";
    directory_job dj = {dir, false, reports};
    job j;
    ck_assert(mkdtemp(dir) != NULL);
    if (cases[i].key != NULL)
      ck_assert_int_eq(files_publish(dir, "crnet.key", cases[i].key), 0);
    if (cases[i].list != NULL)
      ck_assert_int_eq(files_publish(dir, "crnet.rendezvous", cases[i].list),
                       0);
    memset(reports, 0, sizeof *reports * MAX_RANKS);
    job_init_exact(&j, 2, 1);
    start_rank(&j, 1, rank_directory, &dj, NULL);
    wait_job(&j, 30);
    ck_assert_msg(exit_code(&j, 1) == err_exit(cases[i].rc),
                  "case %zu: rank 1 exited %d, not %d (%s): %s", i,
                  exit_code(&j, 1), err_exit(cases[i].rc),
                  crnet_err_name(cases[i].rc), reports[1].errmsg);
    ck_assert_msg(strstr(reports[1].errmsg, cases[i].says) != NULL,
                  "case %zu: '%s' not in: %s", i, cases[i].says,
                  reports[1].errmsg);
    remove_directory(dir);
  }
  {
    /* Rank 2 of 3 never comes: ranks 0 and 1 fail, rank 0 naming it. */
    char dir[] = "/tmp/crnet-directory.XXXXXX";
    directory_job dj = {dir, false, reports};
    job j;
    ck_assert(mkdtemp(dir) != NULL);
    memset(reports, 0, sizeof *reports * MAX_RANKS);
    job_init_exact(&j, 3, 1);
    start_rank(&j, 0, rank_directory, &dj, NULL);
    start_rank(&j, 1, rank_directory, &dj, NULL);
    wait_ranks(&j, 0, 2, 30);
    for (int r = 0; r < 2; r++)
      ck_assert_msg(exit_code(&j, r) == err_exit(CRNET_ETIMEDOUT),
                    "rank %d exited %d: %s", r, exit_code(&j, r),
                    reports[r].errmsg);
    ck_assert_msg(strstr(reports[0].errmsg, "2") != NULL &&
                      strstr(reports[0].errmsg, "never") != NULL,
                  "rank 0 does not name rank 2: %s", reports[0].errmsg);
    remove_directory(dir);
  }
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
    ck_assert(now_s() - t0 < test_seconds(1.0));
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

  /* CRNET_HOST_CPUS (crlaunch's) is a number of CPUs, at least 1. */
  static const char *const bad_cpus[] = {"0", "-2", "two", "4x", "99999"};
  for (size_t i = 0; i < sizeof bad_cpus / sizeof bad_cpus[0]; i++) {
    crnet_comm *c = (crnet_comm *)&c;
    setenv("CRNET_HOST_CPUS", bad_cpus[i], 1);
    ck_assert_int_eq(crnet_comm_init(&c, NULL), CRNET_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(crnet_init_errmsg(), "CRNET_HOST_CPUS") != NULL,
                  "'%s': message '%s'", bad_cpus[i], crnet_init_errmsg());
  }
  unsetenv("CRNET_HOST_CPUS");
  unsetenv("CRNET_JOB_KEY");
}
END_TEST

START_TEST(wrong_key_fails_fast) {
  job j;
  char other[2 * CRNET__KEY_BYTES + 1];
  uint8_t key[CRNET__KEY_BYTES];
  double t0;
  job_init_exact(&j, 3, 3);
  crnet__key_generate(key);
  crnet__key_to_hex(key, other);
  t0 = now_s();
  start_rank(&j, 0, rank_init_fails, "rank 2", NULL);
  start_rank(&j, 1, rank_init_fails, "rank 2", NULL);
  start_rank(&j, 2, rank_init_fails, "job key", other);
  wait_job(&j, 15);
  ck_assert_int_eq(exit_code(&j, 2), err_exit(CRNET_EAUTH));
  /* The impostor is refused at once, not after the timeout. */
  ck_assert_msg(j.exit_time[2] - t0 < test_seconds(2.0), "impostor took %.2f s",
                j.exit_time[2] - t0);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
}
END_TEST

START_TEST(missing_rank_is_named) {
  job j;
  double t0;
  job_init_exact(&j, 3, 2);
  t0 = now_s();
  start_rank(&j, 0, rank_init_fails, "rank 1 never reached", NULL);
  start_rank(&j, 1, rank_skip, NULL, NULL);
  start_rank(&j, 2, rank_init_fails, "rank 1 never reached", NULL);
  wait_job(&j, 15);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  ck_assert_int_eq(exit_code(&j, 2), err_exit(CRNET_ETIMEDOUT));
  ck_assert_msg(now_s() - t0 < 2 + test_seconds(4.0),
                "took %.2f s for a 2 s timeout", now_s() - t0);
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
  deadline = now_s() + test_seconds(10);
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
/* n bytes of fresh memory in transparent huge pages where the kernel has
 * them: a page fault per 4 KiB page is most of the case's time on a
 * virtual machine (a million of them per rank, each a trap to the
 * hypervisor), and the case is about the exchange, not about faults. */
static uint8_t *huge_alloc(uint64_t n) {
  void *p =
      mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  (void)madvise(p, n, MADV_HUGEPAGE); /* a hint; without THP, 4 KiB pages */
  return p;
}

static int rank_huge(int rank, int size, void *arg) {
  uint64_t n = *(uint64_t *)arg;
  uint8_t *s = huge_alloc(n), *r = huge_alloc(n);
  crnet_comm *c;
  uint64_t seq;
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
  /* The call after the library's own (the boards' agreement, when the
   * ranks share a host), alike on both ranks. */
  seq = c->seq_issued + 1;
  rc = crnet__sendrecv(c, seq, peer, s, 0, peer, r, 0, 0, 7);
  if (rc == 0)
    rc = crnet__sendrecv(c, seq, peer, s, n, peer, r, n, 1, 7);
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
  munmap(s, n);
  munmap(r, n);
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
  run_job(&j, rank_huge, &n, 260);
  ck_assert_int_eq(exit_code(&j, 0), EXIT_OK);
  ck_assert_int_eq(exit_code(&j, 1), EXIT_OK);
}
END_TEST

/* A large receive into memory the program never touched has its pages
 * faulted in when it is posted, before any byte arrives (link.c,
 * prefault), and the memory around it keeps its contents. Rank 0 begins
 * the bcast into the second half of a fresh mapping whose first half
 * holds data, and looks at once (mincore) whether the pages are there;
 * rank 1 (the root) sends only once rank 0 has looked (its signal), so no
 * byte can have arrived before. */
static int rank_cold_receive(int rank, int size, void *arg) {
  const size_t n = (size_t)32 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = n / page;
  uint8_t *buf = mmap(NULL, 2 * n, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char *in_core = malloc(pages);
  crnet_request *req = NULL;
  crnet_comm *c;
  size_t resident = 0;
  int rc;
  (void)size;
  (void)arg;
  if (buf == MAP_FAILED || in_core == NULL)
    return EXIT_FAIL;
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)(i * 13);
  /* The call begins in crnet_ibcast itself, not later on a thread. */
  setenv("CRNET_PROGRESS_THREAD", "0", 1);
  if (rank == 1)
    for (size_t i = 0; i < n; i++)
      buf[n + i] = (uint8_t)(i * 7 + 1);
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0)
    return EXIT_FAIL;
  rc = crnet_barrier(c);
  if (rc == 0 && rank == 1) {
    if (!report_await(0, 30)) {
      fprintf(stderr, "rank 1: rank 0 never posted its receive\n");
      rc = CRNET_EIO;
    }
    if (rc == 0)
      rc = crnet_bcast(c, buf + n, n, CRNET_BYTE, 1);
  } else if (rc == 0) {
    rc = crnet_ibcast(c, buf + n, n, CRNET_BYTE, 1, &req);
    if (rc == 0 && mincore(buf + n, n, in_core) == 0)
      for (size_t i = 0; i < pages; i++)
        resident += in_core[i] & 1;
    report_raise(0);
    if (rc == 0)
      rc = crnet_wait(&req);
    if (rc == 0 && resident < pages - 2) {
      fprintf(stderr, "rank 0: %zu of %zu pages of a posted receive were "
                      "there before its data\n", resident, pages);
      rc = CRNET_EIO;
    }
  }
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (buf[n + i] != (uint8_t)(i * 7 + 1) || buf[i] != (uint8_t)(i * 13))
      rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  free(in_core);
  munmap(buf, 2 * n);
  return err_exit(rc);
}

START_TEST(cold_receive_is_faulted_in_first) {
  job j;
  reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_cold_receive, NULL, 60);
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
  deadline = now_s() + test_seconds(10);
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
    if (c->w->table[r].port < range[0] || c->w->table[r].port > range[1])
      rc = CRNET_EIO;
  crnet_comm_destroy(c);
  return err_exit(rc);
}

START_TEST(port_range_is_honoured) {
  int range[2];
  char v[32];
  job j;
  job_init(&j, 3, 20);
  /* From the rendezvous port, which rank 0 serves inside the range too, up
   * to a range of ports that are very likely free. */
  range[0] = j.port;
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

/* --- network settings: CRNET_IFACE, IPv6, host names, busy ports ---------- */

/* A socket listening on 127.0.0.1:port, or -1 if the port is taken. */
static int listen_loopback(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Occupies n consecutive loopback ports (fds[i] listens on base + i) and
 * returns base. */
static int hold_ports(int n, int *fds) {
  for (int attempt = 0; attempt < 50; attempt++) {
    int base = free_port(), got = 0;
    if (base + n > 65535)
      continue;
    while (got < n && (fds[got] = listen_loopback(base + got)) >= 0)
      got++;
    if (got == n)
      return base;
    while (got > 0)
      close(fds[--got]);
  }
  ck_abort_msg("found no %d consecutive free ports", n);
  return -1;
}

static bool have_ipv6_loopback(void) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                           .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

/* 0 if every rank registered the mesh address ip, else CRNET_EIO. */
static int table_is(crnet_comm *c, const char *ip) {
  char got[64];
  int rc = 0;
  for (int r = 0; r < c->size; r++) {
    uv_inet_ntop(c->w->table[r].family == 6 ? AF_INET6 : AF_INET,
                 c->w->table[r].addr, got, sizeof got);
    if (strcmp(got, ip) != 0) {
      fprintf(stderr, "rank %d: rank %d registered %s, not %s\n", c->rank, r,
                got, ip);
      rc = CRNET_EIO;
    }
  }
  return rc;
}

/* Joins, checks the registered addresses (arg), runs one allreduce. */
static int rank_registered(int rank, int size, void *arg) {
  crnet_comm *c;
  int64_t v = 1, sum = 0;
  int rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  rc = table_is(c, arg);
  if (rc == 0)
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT64, CRNET_SUM);
  if (rc == 0 && sum != size)
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  return err_exit(rc);
}

/* A whole job over IPv6: the rendezvous at [::1]:port, so every rank
 * registers an IPv6 mesh address. */
START_TEST(job_over_ipv6) {
  job j;
  if (!have_ipv6_loopback()) {
    test_require("job_over_ipv6", "::1 cannot be bound on this host");
    return;
  }
  job_init(&j, 3, 20);
  j.host = "[::1]";
  run_job(&j, rank_registered, "::1", 30);
  expect_all_ok(&j, "[::1]");
}
END_TEST

/* CRNET_RENDEZVOUS=localhost:port: the name is resolved once; rank 0
 * serves on the first of its addresses, and the others reach it whichever
 * address (IPv6 or IPv4) they try first. */
START_TEST(job_by_host_name) {
  job j;
  job_init(&j, 3, 20);
  j.host = "localhost";
  run_job(&j, rank_allreduce, NULL, 30);
  expect_all_ok(&j, "localhost");
}
END_TEST

/* Settings that are wrong for this host fail init at once, with
 * CRNET_EINVAL and a message naming the setting. */
START_TEST(network_settings_fail_clearly) {
  static const struct {
    const char *iface, *range, *host, *expect;
  } cases[] = {
      {"eth9", NULL, NULL, "CRNET_IFACE=eth9: no such interface"},
      {"198.51.100.0/24", NULL, NULL,
       "CRNET_IFACE=198.51.100.0/24: no local address in this network"},
      {"10.9.0.0/33", NULL, NULL,
       "CRNET_IFACE=10.9.0.0/33: not an interface name or a network"},
      {"fd77::/x", NULL, NULL, "CRNET_IFACE=fd77::/x: not an interface name"},
      {"127.0.0.0/8", NULL, "[::1]",
       "CRNET_IFACE=127.0.0.0/8: not an IPv6 network (the rendezvous at "
       "[::1]:"},
      /* Rank 0 cannot serve on 127.0.0.2 what the others look for at
       * 127.0.0.1. */
      {"127.0.0.2/32", NULL, NULL,
       "CRNET_IFACE=127.0.0.2/32 selects 127.0.0.2, but rank 0 is to serve "
       "the rendezvous at 127.0.0.1:"},
      {NULL, "1-2", NULL, "CRNET_PORT_RANGE=1-2 does not hold port"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    crnet_comm *c = (crnet_comm *)&c;
    double t0 = now_s();
    job j;
    int rc;
    if (cases[i].host != NULL && !have_ipv6_loopback()) {
      test_require("network_settings_fail_clearly (an IPv6 rendezvous)",
                   "::1 cannot be bound on this host");
      continue;
    }
    job_init(&j, 2, 5);
    j.host = cases[i].host;
    rank_env(&j, 0, NULL);
    if (cases[i].iface != NULL)
      setenv("CRNET_IFACE", cases[i].iface, 1);
    else
      unsetenv("CRNET_IFACE");
    if (cases[i].range != NULL)
      setenv("CRNET_PORT_RANGE", cases[i].range, 1);
    else
      unsetenv("CRNET_PORT_RANGE");
    rc = crnet_comm_init(&c, NULL);
    ck_assert_msg(rc == CRNET_EINVAL, "case %zu: %s: %s", i,
                  crnet_err_name(rc), crnet_init_errmsg());
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(crnet_init_errmsg(), cases[i].expect) != NULL,
                  "case %zu: message '%s' lacks '%s'", i, crnet_init_errmsg(),
                  cases[i].expect);
    ck_assert_msg(now_s() - t0 < test_seconds(1.0), "case %zu took %.2f s", i,
                  now_s() - t0);
  }
  unsetenv("CRNET_IFACE");
  unsetenv("CRNET_PORT_RANGE");
}
END_TEST

/* Nobody serves the rendezvous (a closed port): init fails within
 * CRNET_INIT_TIMEOUT naming the address and how the connection failed. */
START_TEST(unreachable_rendezvous_is_named) {
  char expect[128];
  double t0;
  job j;
  job_init_exact(&j, 2, 2);
  snprintf(expect, sizeof expect,
           "cannot reach the rendezvous at 127.0.0.1:%d within 2 s: cannot "
           "connect: connection refused",
           j.port);
  t0 = now_s();
  start_rank(&j, 1, rank_init_fails, expect, NULL);
  wait_job(&j, 10);
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
  ck_assert_msg(j.exit_time[1] - t0 < 2 + test_seconds(0.8),
                "took %.2f s for a 2 s timeout", j.exit_time[1] - t0);
}
END_TEST

/* A rendezvous name that does not resolve is asked again until the init
 * timeout (a pod's or VM's name may reach DNS after the ranks start), then
 * init fails saying so. */
START_TEST(unresolvable_rendezvous_times_out) {
  const char *expect = "cannot resolve the rendezvous host "
                       "'crnet-no-such-host.invalid' within 1.5 s";
  double t0, took;
  job j;
  job_init_exact(&j, 2, 1.5);
  j.host = "crnet-no-such-host.invalid";
  t0 = now_s();
  start_rank(&j, 1, rank_init_fails, (void *)expect, NULL);
  wait_job(&j, 20);
  took = j.exit_time[1] - t0;
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
  /* Not at the first failed lookup, and not much after the timeout. */
  ck_assert_msg(took > 1.0 && took < 1.5 + test_seconds(2.5),
                "took %.2f s for a 1.5 s timeout", took);
}
END_TEST

/* Runs a job of 2 whose CRNET_PORT_RANGE is n ports from the rendezvous
 * port, all of them held by the test (the rendezvous port too unless
 * rdv_free). Rank r's init must fail with a message containing expect[r]
 * (NULL: any), formatted with the range's first and last port. Returns
 * when both ranks have exited; t0 is when they started. */
static void busy_range_job(job *j, int n, bool rdv_free,
                           const char *const expect[2], double *t0) {
  int fds[8];
  char v[32], msg[2][128];
  ck_assert_int_le(n, 8);
  j->port = hold_ports(n, fds);
  if (rdv_free)
    close(fds[0]);
  snprintf(v, sizeof v, "%d-%d", j->port, j->port + n - 1);
  setenv("CRNET_PORT_RANGE", v, 1);
  *t0 = now_s();
  for (int r = 0; r < 2; r++) {
    if (expect[r] != NULL)
      snprintf(msg[r], sizeof msg[r], expect[r], j->port, j->port + n - 1);
    start_rank(j, r, rank_init_fails, expect[r] != NULL ? msg[r] : NULL,
               NULL);
  }
  wait_job(j, 20);
  unsetenv("CRNET_PORT_RANGE");
  for (int i = rdv_free ? 1 : 0; i < n; i++)
    close(fds[i]);
}

/* Every port of the range is taken: rank 0 serves the rendezvous on the
 * one port left, and then neither rank finds a port for its mesh
 * listener. Rank 0 fails at once, naming the range; rank 1 meets the busy
 * range too, or first loses the rendezvous: either way it fails. */
START_TEST(busy_port_range_fails_clearly) {
  double t0;
  job j;
  job_init_exact(&j, 2, 2);
  busy_range_job(&j, 4, true,
                 (const char *const[]){
                     "CRNET_PORT_RANGE=%d-%d: every port is in use", NULL},
                 &t0);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_EIO));
  ck_assert_int_ge(exit_code(&j, 1), EXIT_ERR_BASE);
  ck_assert_msg(j.exit_time[0] - t0 < test_seconds(2.0), "rank 0 took %.2f s",
                j.exit_time[0] - t0);
  /* Rank 1 may be left retrying a rendezvous that is gone: its init
   * timeout (2 s) bounds that. */
  ck_assert_msg(j.exit_time[1] - t0 < 2 + test_seconds(1.5),
                "rank 1 took %.2f s", j.exit_time[1] - t0);
}
END_TEST

/* The rendezvous port itself is taken (by a socket that never answers):
 * rank 0 says it cannot serve there; rank 1, connected to the impostor,
 * gives up at the init timeout saying the handshake got no answer. */
START_TEST(busy_rendezvous_port_fails_clearly) {
  double t0;
  job j;
  job_init_exact(&j, 2, 2);
  busy_range_job(&j, 2, false,
                 (const char *const[]){
                     "rank 0 cannot serve the rendezvous at 127.0.0.1:%d: "
                     "address already in use",
                     "no answer to the handshake"},
                 &t0);
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_EIO));
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_ETIMEDOUT));
  ck_assert_msg(j.exit_time[1] - t0 < 2 + test_seconds(1.0),
                "rank 1 took %.2f s for a 2 s "
                "timeout",
                j.exit_time[1] - t0);
}
END_TEST

/* --- the sockets a job opens, as `ss` sees them ---------------------------- */

typedef struct sock {
  char state[16];
  char local[64]; /* address without port or brackets */
  int local_port;
  char peer[64];
  int peer_port;
  pid_t pid;
} sock;

/* Splits "1.2.3.4:5", "[::1]:5" or "*:*" into address and port. */
static void split_endpoint(const char *ep, char *ip, size_t n, int *port) {
  const char *colon = strrchr(ep, ':');
  size_t len = colon != NULL ? (size_t)(colon - ep) : strlen(ep);
  if (len > 0 && ep[0] == '[') {
    ep++;
    len -= 2;
  }
  if (len >= n)
    len = n - 1;
  memcpy(ip, ep, len);
  ip[len] = '\0';
  *port = colon != NULL ? atoi(colon + 1) : 0;
}

/* The TCP sockets (any state but TIME-WAIT, which belongs to no process)
 * of the processes in pids, from `ss -tanpH`. */
static int list_sockets(const pid_t *pids, int npids, sock *out, int max) {
  FILE *f = popen("ss -tanpH 2>&1", "r");
  char line[1024];
  int n = 0;
  ck_assert_msg(f != NULL, "cannot run ss");
  while (fgets(line, sizeof line, f) != NULL) {
    char state[16], local[128], peer[128];
    const char *p = line;
    pid_t owner = -1;
    if (sscanf(line, "%15s %*s %*s %127s %127s", state, local, peer) != 3)
      continue;
    while (owner < 0 && (p = strstr(p, "pid=")) != NULL) {
      pid_t pid = (pid_t)atoi(p + 4);
      for (int i = 0; i < npids; i++)
        if (pids[i] == pid)
          owner = pid;
      p += 4;
    }
    if (owner < 0 || n == max)
      continue;
    snprintf(out[n].state, sizeof out[n].state, "%s", state);
    split_endpoint(local, out[n].local, sizeof out[n].local,
                   &out[n].local_port);
    split_endpoint(peer, out[n].peer, sizeof out[n].peer, &out[n].peer_port);
    out[n].pid = owner;
    n++;
  }
  ck_assert_msg(pclose(f) == 0, "ss failed (is iproute2 installed?)");
  return n;
}

/* Every socket is on address `ip`, and every listening one on a port in
 * [lo, hi]. Returns the number of listening sockets. */
static int check_sockets(const sock *s, int n, const char *ip, int lo, int hi,
                         const char *when) {
  int listening = 0;
  for (int i = 0; i < n; i++) {
    bool listen = strcmp(s[i].state, "LISTEN") == 0;
    ck_assert_msg(strcmp(s[i].local, ip) == 0,
                  "%s: pid %d has a %s socket on %s:%d (peer %s:%d), not on "
                  "%s",
                  when, (int)s[i].pid, s[i].state, s[i].local, s[i].local_port,
                  s[i].peer, s[i].peer_port, ip);
    if (listen)
      ck_assert_msg(s[i].local_port >= lo && s[i].local_port <= hi,
                    "%s: pid %d listens on port %d, outside %d-%d", when,
                    (int)s[i].pid, s[i].local_port, lo, hi);
    listening += listen;
  }
  return listening;
}

typedef struct hold_arg {
  const char *dir; /* ready.<rank> goes here; the test creates go */
  const char *ip;  /* the address every rank must have registered */
} hold_arg;

static bool file_exists(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* Joins, checks that every registered mesh address is a->ip, says it is
 * ready and holds the job open until the test has looked at its sockets,
 * then runs one allreduce over the mesh. */
static int rank_hold(int rank, int size, void *arg) {
  const hold_arg *a = arg;
  char path[256];
  crnet_comm *c;
  double deadline;
  int64_t v = 1, sum = 0;
  FILE *f;
  int rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  rc = table_is(c, a->ip);
  snprintf(path, sizeof path, "%s/ready.%d", a->dir, rank);
  f = fopen(path, "w");
  if (f != NULL)
    fclose(f);
  deadline = now_s() + test_seconds(30);
  while (!file_exists(a->dir, "go") && now_s() < deadline)
    usleep(10000);
  if (rc == 0)
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT64, CRNET_SUM);
  if (rc == 0 && sum != size)
    rc = CRNET_EIO;
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  return err_exit(rc);
}

static void on_test_rdv_done(crnet__rendezvous_server *srv, int status,
                             const int *missing, int nmissing, void *arg) {
  (void)missing;
  (void)nmissing;
  *(int *)arg = status;
  crnet__rendezvous_server_close(srv);
}

/* Serves the rendezvous of job j on host:j->port in a child process, as
 * crlaunch does; the child exits 0 once every rank got the table. */
static pid_t serve_rendezvous(const job *j, const char *host) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    uint8_t key[CRNET__KEY_BYTES];
    crnet__rendezvous_server *srv;
    uv_loop_t loop;
    int status = -1;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (crnet__key_parse_hex(j->key, key) != 0 || uv_loop_init(&loop) != 0 ||
        crnet__rendezvous_server_start(&srv, &loop, key, j->size, host, j->port,
                                       j->init_timeout, 10, on_test_rdv_done,
                                       &status) != 0)
      _exit(2);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(status == 0 ? 0 : 1);
  }
  return pid;
}

/* Runs a job of 3 ranks and looks at its sockets twice: while ranks 0 and
 * 1 wait in init for rank 2 (rendezvous and mesh listeners open, the
 * rendezvous connections up), and once all are in (the mesh). Every socket
 * must be on `ip`, every listener on a port of [lo, hi]; `listeners` is
 * how many the first look must find. */
static void check_job_sockets(job *j, const char *ip, int lo, int hi,
                              int listeners) {
  char dir[] = "/tmp/crnet-test-net-XXXXXX", path[300];
  hold_arg a = {dir, ip};
  sock socks[64];
  double deadline;
  int n = 0, seen = 0, rdv_conns = 0;
  ck_assert_ptr_nonnull(mkdtemp(dir));
  start_rank(j, 0, rank_hold, &a, NULL);
  start_rank(j, 1, rank_hold, &a, NULL);
  deadline = now_s() + test_seconds(10);
  do {
    usleep(20000);
    n = list_sockets(j->pids, 2, socks, 64);
    seen = 0;
    rdv_conns = 0;
    for (int i = 0; i < n; i++) {
      seen += strcmp(socks[i].state, "LISTEN") == 0;
      rdv_conns += strcmp(socks[i].state, "ESTAB") == 0 &&
                   socks[i].peer_port == j->port;
    }
  } while ((seen < listeners || rdv_conns < 2) && now_s() < deadline);
  ck_assert_msg(seen >= listeners && rdv_conns >= 2,
                "ranks 0 and 1 never showed %d listeners and 2 rendezvous "
                "connections (saw %d and %d)",
                listeners, seen, rdv_conns);
  check_sockets(socks, n, ip, lo, hi, "during init");
  start_rank(j, 2, rank_hold, &a, NULL);
  deadline = now_s() + test_seconds(20);
  for (int r = 0; r < 3; r++) {
    char name[16];
    snprintf(name, sizeof name, "ready.%d", r);
    while (!file_exists(dir, name) && j->pids[r] > 0 &&
           waitpid(j->pids[r], NULL, WNOHANG) == 0 && now_s() < deadline)
      usleep(10000);
    ck_assert_msg(file_exists(dir, name), "rank %d never completed init", r);
  }
  n = list_sockets(j->pids, 3, socks, 64);
  check_sockets(socks, n, ip, lo, hi, "after init");
  /* Each pair of ranks: one connection, seen from both ends. */
  ck_assert_msg(n >= 6, "only %d sockets in a job of 3 ranks", n);
  snprintf(path, sizeof path, "%s/go", dir);
  fclose(fopen(path, "w"));
  wait_job(j, 30);
  expect_all_ok(j, ip);
  for (int r = 0; r < 3; r++) {
    snprintf(path, sizeof path, "%s/ready.%d", dir, r);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/go", dir);
  unlink(path);
  rmdir(dir);
}

/* CRNET_IFACE=lo and CRNET_IFACE=127.0.0.0/8 with a port range: rank 0's
 * rendezvous server and every mesh listener inside the range, every socket
 * on 127.0.0.1. */
START_TEST(sockets_on_iface_and_in_port_range) {
  static const char *const ifaces[] = {"lo", "127.0.0.0/8"};
  for (size_t i = 0; i < 2; i++) {
    char v[32];
    job j;
    job_init(&j, 3, 20);
    snprintf(v, sizeof v, "%d-%d", j.port, j.port + 20);
    setenv("CRNET_PORT_RANGE", v, 1);
    setenv("CRNET_IFACE", ifaces[i], 1);
    /* The rendezvous and the mesh listeners of ranks 0 and 1. */
    check_job_sockets(&j, "127.0.0.1", j.port, j.port + 20, 3);
  }
  unsetenv("CRNET_PORT_RANGE");
  unsetenv("CRNET_IFACE");
}
END_TEST

/* CRNET_IFACE=127.0.0.2/32 with the rendezvous at 127.0.0.1 (served by the
 * test, as crlaunch would): the rendezvous connections leave from
 * 127.0.0.2, and the mesh listens and connects there, though 127.0.0.1 is
 * what the kernel would have picked. */
START_TEST(sockets_on_second_loopback_address) {
  pid_t server;
  int st;
  job j;
  job_init(&j, 3, 20);
  j.external_rdv = true;
  server = serve_rendezvous(&j, "127.0.0.1");
  setenv("CRNET_IFACE", "127.0.0.2/32", 1);
  /* The mesh listeners of ranks 0 and 1; the rendezvous is the test's. */
  check_job_sockets(&j, "127.0.0.2", 1, 65535, 2);
  unsetenv("CRNET_IFACE");
  ck_assert_int_eq(waitpid(server, &st, 0), server);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "the rendezvous did not complete (status %d)", st);
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
  double deadline = now_s() + test_seconds(120);
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
  wait_job(&j, 60);
  ck_assert_int_eq(write(stop[1], "x", 1), 1);
  ck_assert_int_eq(read(out[0], res, sizeof *res), (ssize_t)sizeof *res);
  ck_assert_int_eq(waitpid(cap, NULL, 0), cap);
  close(stop[0]), close(stop[1]), close(out[0]), close(out[1]);
  for (int r = 0; r < j.size; r++)
    ck_assert_msg(exit_code(&j, r) == EXIT_OK, "rank %d exited with %d", r,
                  exit_code(&j, r));
  return true;
}

/* capture_job of case `name` with CRNET_ENCRYPT=encrypt, every link on
 * TCP; false (after a named skip) if the capture cannot be done here.
 *
 * The transport is pinned: by default ranks of one host move to shared
 * memory once their links are up, and the marker would show on lo only if
 * part of the bcast left before the move, so the plaintext case would
 * pass or fail by timing. Shared memory carries no wire to capture; its
 * links are authenticated as TCP's are (test_shmlink). */
static bool capture_with(const char *name, const char *encrypt,
                         capture_result *res) {
  const char *was = getenv("CRNET_TRANSPORT");
  char *transport = was != NULL ? strdup(was) : NULL;
  setenv("CRNET_ENCRYPT", encrypt, 1);
  setenv("CRNET_TRANSPORT", "tcp", 1);
  bool ran = capture_job(res);
  unsetenv("CRNET_ENCRYPT");
  if (transport != NULL)
    setenv("CRNET_TRANSPORT", transport, 1);
  else
    unsetenv("CRNET_TRANSPORT");
  free(transport);
  if (!ran)
    test_require(name, "cannot open a raw socket on lo (needs CAP_NET_RAW)");
  return ran;
}

START_TEST(capture_plaintext_shows_marker) {
  capture_result res;
  if (!capture_with("capture_plaintext_shows_marker", "0", &res))
    return;
  ck_assert_msg(res.marked_packets > 0,
                "the marker never showed in %llu bytes captured in the clear",
                (unsigned long long)res.bytes);
}
END_TEST

START_TEST(capture_encrypted_hides_marker) {
  capture_result res;
  if (!capture_with("capture_encrypted_hides_marker", "1", &res))
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
 * handshake when the job fails, and must not keep a rank alive. Rank 0's
 * timeout is waited for in the first round; later rounds end it once
 * ranks 1 and 2 are gone. */
START_TEST(encrypt_mismatch_fails_fast) {
  for (int round = 0; round < 5; round++) {
    job j;
    double t0 = now_s();
    job_init_exact(&j, 3, 3);
    start_rank(&j, 0, rank_encrypting_init_fails, NULL, NULL);
    start_rank(&j, 1, rank_init_fails,
               "peer encrypts (CRNET_ENCRYPT=1), we do not", NULL);
    /* Rank 2 may hear it from rank 1 first, which cut their handshake. */
    start_rank(&j, 2, rank_init_fails, NULL, NULL);
    wait_ranks(&j, 1, 2, 15);
    for (int r = 1; r < 3; r++) {
      ck_assert_int_eq(exit_code(&j, r), err_exit(CRNET_EAUTH));
      ck_assert_msg(j.exit_time[r] - t0 < test_seconds(2.0),
                    "rank %d took %.2f s", r, j.exit_time[r] - t0);
    }
    if (round > 0)
      kill(j.pids[0], SIGKILL);
    wait_job(&j, 15);
    if (round == 0)
      ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  }
}
END_TEST

static Suite *net_suite(void) {
  Suite *s = suite_create("net");
  TCase *t = tcase_create("net");
  tcase_set_timeout(t, 150);
  tcase_add_test(t, singleton_without_environment);
  tcase_add_test(t, foreign_launcher_is_refused);
  tcase_add_test(t, job_through_a_directory);
  tcase_add_test(t, failed_directory_is_named);
  tcase_add_test(t, directory_start_failures);
  tcase_add_test(t, bad_settings_fail_at_once);
  tcase_add_test(t, job_without_launcher);
  tcase_add_test(t, job_under_slurm);
  tcase_add_test(t, destroy_is_orderly);
  tcase_add_test(t, port_range_is_honoured);
  tcase_add_test(t, busy_port_range_fails_clearly);
  tcase_add_test(t, busy_rendezvous_port_fails_clearly);
  tcase_add_test(t, job_over_ipv6);
  tcase_add_test(t, job_by_host_name);
  tcase_add_test(t, network_settings_fail_clearly);
  tcase_add_test(t, unreachable_rendezvous_is_named);
  tcase_add_test(t, unresolvable_rendezvous_times_out);
  tcase_add_test(t, sockets_on_iface_and_in_port_range);
  tcase_add_test(t, sockets_on_second_loopback_address);
  tcase_add_test(t, wrong_key_fails_fast);
  tcase_add_test(t, missing_rank_is_named);
  tcase_add_test(t, strangers_do_not_stop_the_job);
  tcase_add_test(t, killed_rank_fails_the_others);
  tcase_add_test(t, killed_rank_fails_the_others_streams);
  tcase_add_test(t, abort_reaches_everyone);
  tcase_add_test(t, mismatched_calls_fail);
  tcase_add_test(t, cold_receive_is_faulted_in_first);
  suite_add_tcase(s, t);

  /* 8 GiB of pages touched by two ranks: on a loaded machine that takes
   * minutes, so its own deadline, inside the test's 300 s. */
  t = tcase_create("huge");
  tcase_set_timeout(t, 280);
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

int main(void) { return check_run(net_suite()); }
