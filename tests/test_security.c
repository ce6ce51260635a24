/* Security through real processes: what a process without the job key can
 * do to a job, and where the key can be seen.
 *
 *   strangers_are_refused   While a job bootstraps (the last rank held back),
 *                           raw connections to the rendezvous and to a
 *                           rank's mesh listener send garbage, a HELLO of
 *                           another job, a forged handshake (right job id,
 *                           MAC under a wrong key), nothing, or close at
 *                           once. Each is closed by the job with the logged
 *                           reason; the job then completes its allreduce.
 *   replay_is_refused       Real handshakes of the job, recorded by relays
 *                           in the test (a rank's with the rendezvous, and
 *                           its mesh link to rank 0, routed through a relay
 *                           by rewriting the rendezvous table), replayed
 *                           step by step and blind: the responder's fresh
 *                           nonce makes them "bad MAC"; the rendezvous
 *                           HELLO at a mesh listener is refused too; the
 *                           job completes.
 *   different_keys_fail     Two ranks with different keys fail init, saying
 *                           so, within the init timeout.
 *   key_stays_hidden        Under crlaunch, the key is in no command line and
 *                           no environment, sits in a 0600 file in a 0700
 *                           directory that is removed once every rank has
 *                           registered, and is not in CRNET_DEBUG=1 output.
 *
 * Ranks log to files in a private temporary directory (stderr redirected),
 * and the tests read the "dropped connection from 127.0.0.1:PORT: reason"
 * lines there, PORT being the attacking socket's own, so each refusal is
 * tied to its attack. Every wait is bounded; ranks that outlive their
 * deadline are killed and the test fails saying so. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "crnet.h"
#include "frame.h"
#include "handshake.h"
#include "netjob.h"
#include "rendezvous.h"
#include "skip.h"

#define HEX_LEN (2 * CRNET__KEY_BYTES)

/* --- small tools ------------------------------------------------------------ */

/* A private directory for the ranks' logs and reports, removed with its
 * files by rm_dir. */
static void make_dir(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, n, "%s/crnet-sec-XXXXXX", tmp != NULL ? tmp : "/tmp");
  ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[4096];
  if (d == NULL)
    return;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* The whole file as a NUL-terminated string (NULs inside are kept, so
 * /proc/PID/environ can be searched with memmem), or NULL. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  size_t cap = 4096, n = 0;
  char *buf;
  if (f == NULL)
    return NULL;
  buf = malloc(cap + 1);
  while (buf != NULL) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap)
      break;
    cap *= 2;
    char *bigger = realloc(buf, cap + 1);
    if (bigger == NULL)
      free(buf);
    buf = bigger;
  }
  fclose(f);
  if (buf == NULL)
    return NULL;
  buf[n] = '\0';
  if (len != NULL)
    *len = n;
  return buf;
}

static void log_path(const char *dir, int rank, char *path, size_t n) {
  ck_assert(snprintf(path, n, "%s/rank%d.log", dir, rank) < (int)n);
}

static bool log_has(const char *dir, int rank, const char *needle) {
  char path[4096];
  char *text;
  bool found;
  log_path(dir, rank, path, sizeof path);
  text = slurp(path, NULL);
  found = text != NULL && strstr(text, needle) != NULL;
  free(text);
  return found;
}

/* log_has, polling up to timeout_s: a line may come a moment after the
 * event the test saw. */
static bool log_gets(const char *dir, int rank, const char *needle,
                     double timeout_s) {
  double deadline = now_s() + test_seconds(timeout_s);
  while (!log_has(dir, rank, needle)) {
    if (now_s() > deadline)
      return false;
    usleep(10000);
  }
  return true;
}

/* Prints a rank's log, for the reader of a failed test. Flushed: a failed
 * check ends the test's process with _exit, which would drop it. */
static void show_log(const char *dir, int rank) {
  char path[4096];
  char *text;
  log_path(dir, rank, path, sizeof path);
  text = slurp(path, NULL);
  printf("--- rank %d log ---\n%s", rank, text != NULL ? text : "(none)\n");
  fflush(stdout);
  free(text);
}

/* The local port of a connected socket: the job logs it as the peer's. */
static int local_port(int fd) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  return ntohs(a.sin_port);
}

static void write_all(int fd, const void *buf, size_t n) {
  ck_assert_msg(write(fd, buf, n) == (ssize_t)n, "write: %s",
                n > 0 ? strerror(errno) : "");
}

/* Reads exactly n bytes within timeout_s; false on EOF, error or timeout. */
static bool read_exact(int fd, void *buf, size_t n, double timeout_s) {
  double deadline = now_s() + test_seconds(timeout_s);
  size_t got = 0;
  while (got < n) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)((deadline - now_s()) * 1000);
    ssize_t r;
    if (ms <= 0 || poll(&p, 1, ms) <= 0)
      return false;
    r = read(fd, (uint8_t *)buf + got, n - got);
    if (r <= 0)
      return false;
    got += (size_t)r;
  }
  return true;
}

/* Waits until the other side closes fd (EOF or reset), discarding what it
 * sends first. The seconds that took, or -1 if it did not within
 * timeout_s. */
static double wait_closed(int fd, double timeout_s) {
  double t0 = now_s(), deadline = t0 + timeout_s;
  uint8_t sink[4096];
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)((deadline - now_s()) * 1000);
    ssize_t r;
    if (ms <= 0 || poll(&p, 1, ms) <= 0)
      return -1;
    r = read(fd, sink, sizeof sink);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
      return now_s() - t0;
    if (r < 0 && errno != EINTR && errno != EAGAIN)
      return -1;
  }
}

/* The first TCP port on 127.0.0.1 that process pid listens on, other than
 * `except`, or -1: its socket inodes (/proc/PID/fd) met in the listening
 * sockets of /proc/net/tcp. */
static int listening_port_of(pid_t pid, int except) {
  char path[64], line[512], target[64];
  unsigned long inodes[64];
  int ninodes = 0, port = -1;
  DIR *d;
  struct dirent *e;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL && ninodes < 64) {
    char fdpath[400];
    ssize_t n;
    snprintf(fdpath, sizeof fdpath, "%s/%s", path, e->d_name);
    n = readlink(fdpath, target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (sscanf(target, "socket:[%lu]", &inodes[ninodes]) == 1)
      ninodes++;
  }
  closedir(d);
  f = fopen("/proc/net/tcp", "r");
  if (f == NULL)
    return -1;
  while (port < 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned addr, lport, state;
    unsigned long inode;
    if (sscanf(line, " %*d: %8x:%4x %*8x:%*4x %x %*s %*s %*s %*d %*d %lu",
               &addr, &lport, &state, &inode) != 4 ||
        state != 0x0A || addr != 0x0100007F || (int)lport == except)
      continue;
    for (int i = 0; i < ninodes; i++)
      if (inodes[i] == inode)
        port = (int)lport;
  }
  fclose(f);
  return port;
}

/* --- rank programs ------------------------------------------------------------- */

typedef struct rank_opts {
  const char *dir;        /* logs go to dir/rankR.log */
  const char *rendezvous[MAX_RANKS]; /* CRNET_RENDEZVOUS per rank, or NULL */
  const char *expect;     /* rank_init_fails: text the error must hold */
} rank_opts;

/* Sends this rank's stderr (crnet's log lines) to its log file, turns on
 * CRNET_DEBUG and applies the rendezvous override. */
static void rank_setup(const rank_opts *o, int rank) {
  char path[4096];
  int fd;
  log_path(o->dir, rank, path, sizeof path);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  if (fd >= 0) {
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  setenv("CRNET_DEBUG", "1", 1);
  if (o->rendezvous[rank] != NULL)
    setenv("CRNET_RENDEZVOUS", o->rendezvous[rank], 1);
}

/* Init, an allreduce of 1000 int64 checked element by element, destroy. */
static int rank_allreduce_checked(int rank, int size, void *arg) {
  enum { N = 1000 };
  int64_t v[N], sum[N];
  crnet_comm *c;
  double t0;
  int rc;
  rank_setup(arg, rank);
  for (int i = 0; i < N; i++)
    v[i] = (int64_t)(rank + 1) * (i + 1);
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return err_exit(rc);
  }
  rc = crnet_allreduce(c, v, sum, N, CRNET_INT64, CRNET_SUM);
  for (int i = 0; rc == 0 && i < N; i++)
    if (sum[i] != (int64_t)(i + 1) * size * (size + 1) / 2)
      rc = CRNET_EIO;
  fprintf(stderr, "rank %d: allreduce: %s\n", rank, crnet_err_name(rc));
  t0 = now_s();
  if (rc == 0)
    rc = crnet_comm_destroy(c);
  else
    crnet_comm_destroy(c);
  fprintf(stderr, "rank %d: destroy took %.2f s\n", rank, now_s() - t0);
  return err_exit(rc);
}

/* Init must fail, and its message hold o->expect. */
static int rank_init_fails(int rank, int size, void *arg) {
  const rank_opts *o = arg;
  crnet_comm *c;
  int rc;
  (void)size;
  rank_setup(o, rank);
  rc = crnet_comm_init(&c, NULL);
  if (rc == 0) {
    fprintf(stderr, "rank %d: init succeeded\n", rank);
    crnet_comm_destroy(c);
    return EXIT_FAIL;
  }
  fprintf(stderr, "rank %d: init failed: %s: %s\n", rank, crnet_err_name(rc),
          crnet_init_errmsg());
  if (o->expect != NULL && strstr(crnet_init_errmsg(), o->expect) == NULL)
    return EXIT_FAIL;
  return err_exit(rc);
}

/* --- attacks -------------------------------------------------------------------- */

enum attack_kind {
  GARBAGE,   /* 1 KiB of random bytes */
  OTHER_JOB, /* a well-formed HELLO under another key */
  FORGED,    /* our job's id in HELLO, FINISH MAC'd with a wrong key */
  SILENT,    /* connects, says nothing */
  HANG_UP,   /* connects and closes at once */
  NKINDS
};

static const char *const kind_names[NKINDS] = {"garbage", "another job's HELLO",
                                               "forged handshake", "silence",
                                               "hang-up"};

typedef struct attack {
  enum attack_kind kind;
  int fd;   /* -1 once closed */
  int port; /* our local port: the job logs it */
  uint8_t wrong_key[CRNET__KEY_BYTES];
  uint8_t hello[CRNET__HS_HELLO_SIZE];
} attack;

/* A HELLO from "rank `self`" to `peer` (CRNET__RANK_RENDEZVOUS: the
 * rendezvous) of a job of `size` under key. */
static void make_hello(const uint8_t key[CRNET__KEY_BYTES], int32_t self,
                       int32_t peer, int32_t size,
                       uint8_t hello[CRNET__HS_HELLO_SIZE]) {
  crnet__handshake hs;
  crnet__hs_init_initiator(&hs, key, peer == CRNET__RANK_RENDEZVOUS
                                         ? CRNET__HS_RENDEZVOUS
                                         : CRNET__HS_MESH,
                           self, peer, size);
  crnet__hs_write_hello(&hs, hello);
  crnet__hs_wipe(&hs);
}

/* Opens the attack on port. A mesh listener of rank `peer` (or the
 * rendezvous, peer = CRNET__RANK_RENDEZVOUS) of job j; `self` is the rank
 * the HELLOs claim. */
static void attack_open(attack *a, enum attack_kind kind, const job *j,
                        int port, int32_t self, int32_t peer) {
  uint8_t key[CRNET__KEY_BYTES], job_id[CRNET__JOB_ID_BYTES];
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->fd = connect_loopback(port);
  ck_assert_msg(a->fd >= 0, "%s: cannot connect to port %d",
                kind_names[kind], port);
  a->port = local_port(a->fd);
  crnet__key_generate(a->wrong_key);
  switch (kind) {
  case GARBAGE: {
    uint8_t junk[1024];
    randombytes_buf(junk, sizeof junk);
    junk[0] = 'X'; /* not "CRNH", whatever the dice say */
    write_all(a->fd, junk, sizeof junk);
    break;
  }
  case OTHER_JOB:
    make_hello(a->wrong_key, self, peer, j->size, a->hello);
    write_all(a->fd, a->hello, sizeof a->hello);
    break;
  case FORGED:
    /* The job id is public (a hash of the key), so anyone who has seen
     * one HELLO of the job can put it in their own: this HELLO passes
     * every check of its form, and only the MAC can refuse it. */
    ck_assert_int_eq(crnet__key_parse_hex(j->key, key), 0);
    crnet__job_id(key, job_id);
    crnet__wipe(key, sizeof key);
    make_hello(a->wrong_key, self, peer, j->size, a->hello);
    memcpy(a->hello + 8, job_id, sizeof job_id);
    write_all(a->fd, a->hello, sizeof a->hello);
    break;
  case SILENT:
    break;
  case HANG_UP:
    close(a->fd);
    a->fd = -1;
    break;
  default:
    ck_abort();
  }
}

/* The forgery's second half: the job answers the HELLO with a REPLY (so
 * the HELLO did pass), and gets a FINISH whose MAC is an HMAC of the
 * transcript under the wrong key. */
static void attack_finish_forgery(attack *a, double timeout_s) {
  static const char label[] = "crnet initiator";
  uint8_t reply[CRNET__HS_REPLY_SIZE], finish[CRNET__HS_FINISH_SIZE];
  crypto_auth_hmacsha512256_state st;
  ck_assert_msg(read_exact(a->fd, reply, sizeof reply, timeout_s),
                "forged HELLO from port %d got no REPLY within %g s: the job "
                "refused it before the MAC check",
                a->port, timeout_s);
  ck_assert_msg(memcmp(reply, "CRNR", 4) == 0, "the REPLY has no magic");
  crypto_auth_hmacsha512256_init(&st, a->wrong_key, sizeof a->wrong_key);
  crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label,
                                   sizeof label - 1);
  crypto_auth_hmacsha512256_update(&st, a->hello, sizeof a->hello);
  crypto_auth_hmacsha512256_update(&st, reply, sizeof reply);
  memcpy(finish, "CRNZ", 4);
  crypto_auth_hmacsha512256_final(&st, finish + 4);
  write_all(a->fd, finish, sizeof finish);
}

/* The attack's connection must be closed by the job within timeout_s. */
static void attack_expect_closed(attack *a, const char *where,
                                 double timeout_s) {
  double took;
  if (a->fd < 0)
    return;
  took = wait_closed(a->fd, timeout_s);
  ck_assert_msg(took >= 0, "%s: %s from port %d still open after %g s", where,
                kind_names[a->kind], a->port, timeout_s);
  printf("%s: %s closed after %.2f s\n", where, kind_names[a->kind], took);
  close(a->fd);
  a->fd = -1;
}

/* The reason the job logs for each attack. */
static const char *attack_reason(enum attack_kind kind) {
  switch (kind) {
  case GARBAGE:
    return "bad magic";
  case OTHER_JOB:
    return "another job";
  case FORGED:
    return "bad MAC";
  case SILENT:
    return "handshake not completed in time"; /* at the rendezvous */
  case HANG_UP:
    return "closed during the handshake";
  default:
    return "?";
  }
}

/* Rank `rank`'s log must say it dropped the attack for `reason` (NULL: the
 * usual one for its kind) or, if given, for `alt`. The log line may come a
 * moment after the close, so this waits up to 2 s. */
static void attack_expect_logged(const attack *a, const char *dir, int rank,
                                 const char *prefix, const char *reason,
                                 const char *alt) {
  char line[256], other[256] = "";
  double deadline = now_s() + test_seconds(2);
  bool found = false;
  snprintf(line, sizeof line, "%sdropped connection from 127.0.0.1:%d: %s",
           prefix, a->port, reason != NULL ? reason : attack_reason(a->kind));
  if (alt != NULL)
    snprintf(other, sizeof other, "%sdropped connection from 127.0.0.1:%d: %s",
             prefix, a->port, alt);
  while (!found && now_s() < deadline) {
    found = log_has(dir, rank, line) || (alt != NULL && log_has(dir, rank, other));
    if (!found)
      usleep(10000);
  }
  if (!found)
    show_log(dir, rank);
  ck_assert_msg(found, "rank %d did not log '%s'%s%s (%s)", rank, line,
                alt != NULL ? " or '" : "", alt != NULL ? other : "",
                kind_names[a->kind]);
}

/* The seconds rank_allreduce_checked says crnet_comm_destroy took. */
static double destroy_time(const char *dir, int rank) {
  char path[4096], *text, *p;
  double t = -1;
  log_path(dir, rank, path, sizeof path);
  text = slurp(path, NULL);
  p = text != NULL ? strstr(text, "destroy took ") : NULL;
  if (p != NULL)
    t = atof(p + strlen("destroy took "));
  free(text);
  return t;
}

/* Every rank completed its allreduce and left in good time: a stranger
 * still connected must not hold up crnet_comm_destroy. */
static void expect_job_ok(const job *j, const char *dir) {
  for (int r = 0; r < j->size; r++) {
    double t = destroy_time(dir, r);
    if (exit_code(j, r) != EXIT_OK || t < 0 || t > 3)
      show_log(dir, r);
    ck_assert_msg(t >= 0 && t < test_seconds(3),
                  "rank %d: crnet_comm_destroy took %.2f s", r, t);
    if (exit_code(j, r) != EXIT_OK)
      show_log(dir, r);
    ck_assert_msg(exit_code(j, r) == EXIT_OK, "rank %d exited %d", r,
                  exit_code(j, r));
    ck_assert_msg(log_has(dir, r, "allreduce: CRNET_OK"),
                  "rank %d did not finish its allreduce", r);
  }
}

/* Waits for the rendezvous of job j to listen and for rank `rank` (already
 * started) to listen for the mesh; returns the mesh port. */
static int wait_listeners(const job *j, int rank) {
  double deadline = now_s() + test_seconds(10);
  int port = -1;
  while (!listening_on(j->port) && now_s() < deadline)
    usleep(5000);
  ck_assert_msg(listening_on(j->port), "rank 0 never served the rendezvous");
  while (port < 0 && now_s() < deadline) {
    port = listening_port_of(j->pids[rank], j->port);
    if (port < 0)
      usleep(5000);
  }
  ck_assert_msg(port > 0, "rank %d never listened for the mesh", rank);
  return port;
}

/* --- tests ---------------------------------------------------------------------- */

START_TEST(strangers_are_refused) {
  static const char end_reason[] =
      "not authenticated by the end of the bootstrap";
  char dir[4096];
  rank_opts o;
  attack rdv[NKINDS], mesh[NKINDS];
  int mesh_port;
  double t_attack, took;
  job j;
  make_dir(dir, sizeof dir);
  o = (rank_opts){.dir = dir};
  job_init(&j, 3, 30);
  /* A short handshake timeout, so that the silent connection is dropped
   * in 2 s instead of the default 10 (scaled with the pass, as the subject
   * of the case: the bootstrap after rank 2 comes must stay well within
   * it). */
  j.handshake_timeout = test_seconds(2);
  /* Ranks 0 and 1 register and wait for rank 2, which comes only after the
   * attacks: the rendezvous listens, and rank 1's mesh listener is open
   * (connections to it wait in its queue until the table comes). */
  start_rank(&j, 0, rank_allreduce_checked, &o, NULL);
  start_rank(&j, 1, rank_allreduce_checked, &o, NULL);
  mesh_port = wait_listeners(&j, 1);

  t_attack = now_s();
  for (int k = 0; k < NKINDS; k++) {
    /* Claiming to be rank 1 to the rendezvous, rank 2 to rank 1. */
    attack_open(&rdv[k], (enum attack_kind)k, &j, j.port, 1,
                CRNET__RANK_RENDEZVOUS);
    attack_open(&mesh[k], (enum attack_kind)k, &j, mesh_port, 2, 1);
  }
  attack_finish_forgery(&rdv[FORGED], 3);
  for (int k = 0; k < NKINDS; k++)
    if (k != SILENT)
      attack_expect_closed(&rdv[k], "rendezvous", 3);
  /* The rendezvous gives a connection CRNET_HANDSHAKE_TIMEOUT to
   * authenticate; the job is still waiting for rank 2 then. */
  attack_expect_closed(&rdv[SILENT], "rendezvous",
                       j.handshake_timeout + test_seconds(3));
  took = now_s() - t_attack;
  ck_assert_msg(took > 0.75 * j.handshake_timeout,
                "silent connection closed after %.2f s only, with "
                "CRNET_HANDSHAKE_TIMEOUT=%g",
                took, j.handshake_timeout);
  for (int k = 0; k < NKINDS; k++)
    attack_expect_logged(&rdv[k], dir, 0, "rendezvous: ", NULL, NULL);

  /* Rank 1 has not looked at its queue yet: it has no table. */
  ck_assert_msg(!log_has(dir, 1, "dropped connection"),
                "rank 1 accepted a connection before it had the table");
  /* Once rank 2 comes, rank 1 refuses the queued attacks, and drops the
   * silent one when its mesh is complete (not at the handshake deadline,
   * CRNET_HANDSHAKE_TIMEOUT later). */
  start_rank(&j, 2, rank_allreduce_checked, &o, NULL);
  attack_finish_forgery(&mesh[FORGED], 10);
  for (int k = 0; k < NKINDS; k++)
    attack_expect_closed(&mesh[k], "mesh listener of rank 1", 5);
  wait_job(&j, 30);
  expect_job_ok(&j, dir);
  /* The forger's FINISH needs a round trip through this process, and
   * rank 2 may complete rank 1's mesh first: then the bootstrap's end drops
   * it. The replay test sees "bad MAC" at a mesh listener for certain. */
  for (int k = 0; k < NKINDS; k++)
    attack_expect_logged(&mesh[k], dir, 1, "", k == SILENT ? end_reason : NULL,
                         k == FORGED ? end_reason : NULL);
  /* Rank 2, which nobody attacked, dropped nothing; no log has the key. */
  ck_assert(!log_has(dir, 2, "dropped connection"));
  for (int r = 0; r < 3; r++)
    ck_assert_msg(!log_has(dir, r, j.key), "rank %d logged the key", r);
  rm_dir(dir);
}
END_TEST

START_TEST(different_keys_fail) {
  char dir[4096], other[HEX_LEN + 1];
  uint8_t key[CRNET__KEY_BYTES];
  rank_opts o0, o1;
  double t0;
  job j;
  make_dir(dir, sizeof dir);
  job_init(&j, 2, 3);
  crnet__key_generate(key);
  crnet__key_to_hex(key, other);
  o0 = (rank_opts){.dir = dir, .expect = "rank 1 never reached the rendezvous"};
  o1 = (rank_opts){.dir = dir, .expect = "is the job key the same on every rank"};
  t0 = now_s();
  start_rank(&j, 0, rank_init_fails, &o0, NULL);
  start_rank(&j, 1, rank_init_fails, &o1, other);
  wait_job(&j, 15);
  if (exit_code(&j, 0) != err_exit(CRNET_ETIMEDOUT) ||
      exit_code(&j, 1) != err_exit(CRNET_EAUTH)) {
    show_log(dir, 0);
    show_log(dir, 1);
  }
  /* Rank 1 is refused at its first HELLO, not after the timeout. */
  ck_assert_int_eq(exit_code(&j, 1), err_exit(CRNET_EAUTH));
  ck_assert_msg(j.exit_time[1] - t0 < test_seconds(2.0), "rank 1 took %.2f s",
                j.exit_time[1] - t0);
  ck_assert(log_has(dir, 1, "refused this process"));
  /* Rank 0 gives up at its init timeout, naming the rank that never came,
   * and its server logged why it dropped rank 1. */
  ck_assert_int_eq(exit_code(&j, 0), err_exit(CRNET_ETIMEDOUT));
  ck_assert_msg(j.exit_time[0] - t0 < j.init_timeout + test_seconds(2.5),
                "rank 0 took %.2f s for a %g s timeout", j.exit_time[0] - t0,
                j.init_timeout);
  ck_assert(log_has(dir, 0, "rendezvous: dropped connection from 127.0.0.1:"));
  ck_assert(log_has(dir, 0, ": another job"));
  rm_dir(dir);
}
END_TEST

/* --- replay ----------------------------------------------------------------------- */

/* A relay: a child process between one client and 127.0.0.1:target that
 * forwards both ways and records what passes (the client's bytes on c2s,
 * the server's on s2c). Options:
 *   - from/to: the rendezvous table the server sends is rewritten so that
 *     a rank registered at port `from` is said to be at port `to` (the
 *     table is not authenticated: only the handshake is), which routes the
 *     client's mesh connection to that rank through another relay;
 *   - gated: the client's bytes are held until the test writes to `gate`.
 * The child exits when either side closes, or after 60 s. */
typedef struct relay {
  int target, from, to;
  bool gated;
  pid_t pid;
  int port;      /* where it listens */
  int c2s, s2c;  /* read ends of the recordings */
  int gate;      /* write end: one byte opens the gate */
} relay;

/* Rewrites port r->from to r->to in a RENDEZVOUS_TABLE frame (header +
 * payload). */
static void relay_rewrite(const relay *r, uint8_t *frame, uint64_t len) {
  crnet__frame_header h;
  uint8_t *e;
  if (crnet__frame_decode(frame, UINT64_MAX, &h, NULL) != 0 ||
      h.kind != CRNET__FRAME_RENDEZVOUS_TABLE)
    return;
  for (uint64_t off = CRNET__FRAME_HEADER_SIZE + CRNET__RENDEZVOUS_TABLE_HEAD;
       off + CRNET__RENDEZVOUS_ENTRY_SIZE <= len;
       off += CRNET__RENDEZVOUS_ENTRY_SIZE) {
    e = frame + off;
    if (crnet__get_le16(e + 2) == r->from)
      crnet__put_le16(e + 2, (uint16_t)r->to);
  }
}

/* Forwards the server's bytes: the REPLY as it comes, then whole frames,
 * rewritten. acc holds what is not forwarded yet. */
static void relay_server_bytes(const relay *r, int cfd, uint8_t *acc,
                               size_t *have, size_t *passed) {
  crnet__frame_header h;
  for (;;) {
    size_t n = *have;
    if (*passed < CRNET__HS_REPLY_SIZE) {
      n = *have < CRNET__HS_REPLY_SIZE - *passed ? *have
                                                 : CRNET__HS_REPLY_SIZE - *passed;
    } else if (r->from == 0) {
      n = *have;
    } else {
      if (*have < CRNET__FRAME_HEADER_SIZE ||
          crnet__frame_decode(acc, UINT64_MAX, &h, NULL) != 0 ||
          *have < CRNET__FRAME_HEADER_SIZE + h.length)
        return;
      n = CRNET__FRAME_HEADER_SIZE + h.length;
      relay_rewrite(r, acc, n);
    }
    if (n == 0)
      return;
    if (write(cfd, acc, n) != (ssize_t)n)
      _exit(5);
    memmove(acc, acc + n, *have - n);
    *have -= n;
    *passed += n;
  }
}

static void relay_main(const relay *r, int lfd, int c2s, int s2c, int gate) {
  static uint8_t acc[1 << 20];
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  double deadline;
  size_t have = 0, passed = 0;
  int cfd, sfd = -1;
  char go;
  alarm(60);
  if (poll(&p, 1, (int)(test_seconds(30) * 1000)) != 1 ||
      (cfd = accept(lfd, NULL, NULL)) < 0)
    _exit(2);
  if (r->gated && read(gate, &go, 1) != 1)
    _exit(3);
  deadline = now_s() + test_seconds(10);
  while (sfd < 0 && now_s() < deadline) {
    sfd = connect_loopback(r->target);
    if (sfd < 0)
      usleep(10000);
  }
  if (sfd < 0)
    _exit(3);
  for (;;) {
    struct pollfd q[2] = {{.fd = cfd, .events = POLLIN},
                          {.fd = sfd, .events = POLLIN}};
    uint8_t buf[65536];
    ssize_t n;
    if (poll(q, 2, -1) < 0)
      _exit(4);
    if (q[0].revents != 0) {
      n = read(cfd, buf, sizeof buf);
      if (n <= 0)
        _exit(0);
      if (write(sfd, buf, (size_t)n) != n || write(c2s, buf, (size_t)n) != n)
        _exit(5);
    }
    if (q[1].revents != 0) {
      n = read(sfd, acc + have, sizeof acc - have);
      if (n <= 0)
        _exit(0);
      if (write(s2c, acc + have, (size_t)n) != n)
        _exit(5);
      have += (size_t)n;
      relay_server_bytes(r, cfd, acc, &have, &passed);
    }
  }
}

/* Starts the relay r describes (target, from, to, gated set). */
static void relay_start(relay *r) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int lfd = socket(AF_INET, SOCK_STREAM, 0), p1[2], p2[2], g[2];
  ck_assert_int_ge(lfd, 0);
  ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(lfd, 4), 0);
  ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
  r->port = ntohs(a.sin_port);
  ck_assert(pipe(p1) == 0 && pipe(p2) == 0 && pipe(g) == 0);
  r->pid = fork();
  ck_assert_int_ge(r->pid, 0);
  if (r->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p1[0]);
    close(p2[0]);
    close(g[1]);
    relay_main(r, lfd, p1[1], p2[1], g[0]);
  }
  close(lfd);
  close(p1[1]);
  close(p2[1]);
  close(g[0]);
  r->c2s = p1[0];
  r->s2c = p2[0];
  r->gate = g[1];
}

static void relay_stop(relay *r) {
  close(r->c2s);
  close(r->s2c);
  close(r->gate);
  kill(r->pid, SIGKILL);
  waitpid(r->pid, NULL, 0);
}

/* One recorded handshake: the client's HELLO and FINISH, the server's
 * REPLY. */
typedef struct recording {
  uint8_t c2s[CRNET__HS_HELLO_SIZE + CRNET__HS_FINISH_SIZE];
  uint8_t reply[CRNET__HS_REPLY_SIZE];
} recording;

static void record(const relay *r, recording *rec, const char *what) {
  ck_assert_msg(read_exact(r->c2s, rec->c2s, sizeof rec->c2s, 10),
                "the relay recorded no %s handshake", what);
  ck_assert_msg(read_exact(r->s2c, rec->reply, sizeof rec->reply, 10),
                "the relay recorded no %s REPLY", what);
  ck_assert(memcmp(rec->c2s, "CRNH", 4) == 0 &&
            memcmp(rec->c2s + CRNET__HS_HELLO_SIZE, "CRNZ", 4) == 0 &&
            memcmp(rec->reply, "CRNR", 4) == 0);
}

/* Replays rec to port: step by step (the HELLO; the REPLY, whose nonce
 * must be fresh; the recorded FINISH, which covers the old nonce), then
 * blind (HELLO and FINISH at once). Both must be closed with "bad MAC"
 * in rank `rank`'s log. */
static void replay_to(const recording *rec, int port, const char *where,
                      const char *dir, int rank, const char *prefix) {
  uint8_t reply[CRNET__HS_REPLY_SIZE];
  attack a[2];
  for (int i = 0; i < 2; i++) {
    memset(&a[i], 0, sizeof a[i]);
    a[i].kind = FORGED;
    a[i].fd = connect_loopback(port);
    ck_assert_msg(a[i].fd >= 0, "%s: cannot connect", where);
    a[i].port = local_port(a[i].fd);
  }
  write_all(a[0].fd, rec->c2s, CRNET__HS_HELLO_SIZE);
  ck_assert_msg(read_exact(a[0].fd, reply, sizeof reply, 3),
                "%s: the replayed HELLO got no REPLY", where);
  ck_assert_msg(memcmp(reply + 12, rec->reply + 12, CRNET__NONCE_BYTES) != 0,
                "%s: the responder reused its nonce", where);
  write_all(a[0].fd, rec->c2s + CRNET__HS_HELLO_SIZE, CRNET__HS_FINISH_SIZE);
  write_all(a[1].fd, rec->c2s, sizeof rec->c2s);
  for (int i = 0; i < 2; i++) {
    attack_expect_closed(&a[i], where, 3);
    attack_expect_logged(&a[i], dir, rank, prefix, "bad MAC", NULL);
  }
}

START_TEST(replay_is_refused) {
  char dir[4096], rdv1[64], rdv2[64];
  int mesh0, mesh1;
  relay rdv_a, mesh_b, rdv_c, mesh_d;
  recording rec_rdv, rec_mesh;
  attack cross;
  rank_opts o;
  job j;
  make_dir(dir, sizeof dir);
  job_init(&j, 3, 30);
  o = (rank_opts){.dir = dir};
  start_rank(&j, 0, rank_allreduce_checked, &o, NULL);
  mesh0 = wait_listeners(&j, 0);
  /* Rank 1 reaches the rendezvous through relay A, which records its
   * handshake and routes its mesh link to rank 0 through relay B, which
   * records that handshake too. Rank 2 goes through C, which routes its
   * link to rank 0 through D, held shut: until the test opens it, rank 0's
   * mesh is incomplete and its listener open for the mesh replay. */
  rdv_a = (relay){.target = j.port, .from = mesh0};
  mesh_b = (relay){.target = mesh0};
  rdv_c = (relay){.target = j.port, .from = mesh0};
  mesh_d = (relay){.target = mesh0, .gated = true};
  relay_start(&mesh_b);
  relay_start(&mesh_d);
  rdv_a.to = mesh_b.port;
  rdv_c.to = mesh_d.port;
  relay_start(&rdv_a);
  relay_start(&rdv_c);
  snprintf(rdv1, sizeof rdv1, "127.0.0.1:%d", rdv_a.port);
  snprintf(rdv2, sizeof rdv2, "127.0.0.1:%d", rdv_c.port);
  o.rendezvous[1] = rdv1;
  o.rendezvous[2] = rdv2;

  start_rank(&j, 1, rank_allreduce_checked, &o, NULL);
  record(&rdv_a, &rec_rdv, "rendezvous");
  mesh1 = wait_listeners(&j, 1);
  /* The recorded exchange was good: the rendezvous registered rank 1. */
  ck_assert(log_gets(dir, 0, "rendezvous: rank 1 registered", 5));
  replay_to(&rec_rdv, j.port, "rendezvous (replay)", dir, 0, "rendezvous: ");
  /* The rendezvous handshake at a mesh listener of the same job. */
  memset(&cross, 0, sizeof cross);
  cross.kind = OTHER_JOB;
  cross.fd = connect_loopback(mesh1);
  ck_assert_int_ge(cross.fd, 0);
  cross.port = local_port(cross.fd);
  write_all(cross.fd, rec_rdv.c2s, sizeof rec_rdv.c2s);

  start_rank(&j, 2, rank_allreduce_checked, &o, NULL);
  record(&mesh_b, &rec_mesh, "mesh");
  ck_assert(log_gets(dir, 0, "link to rank 1 stream 0 up", 5));
  replay_to(&rec_mesh, mesh0, "mesh listener of rank 0 (replay)", dir, 0, "");
  attack_expect_closed(&cross, "mesh listener of rank 1 (replay)", 5);
  ck_assert_int_eq(write(mesh_d.gate, "g", 1), 1);
  wait_job(&j, 30);
  expect_job_ok(&j, dir);
  attack_expect_logged(&cross, dir, 1, "", "wrong purpose for this listener",
                       NULL);
  relay_stop(&rdv_a);
  relay_stop(&mesh_b);
  relay_stop(&rdv_c);
  relay_stop(&mesh_d);
  rm_dir(dir);
}
END_TEST

/* --- key hygiene under crlaunch -------------------------------------------------- */

typedef struct probe_report {
  int pid;
  char key[HEX_LEN + 1];
  unsigned file_mode, dir_mode;
  int owner_ok, removed, allreduce;
} probe_report;

static bool read_report(const char *dir, int rank, probe_report *r) {
  char path[4096];
  char *text;
  int n;
  if (snprintf(path, sizeof path, "%s/rank.%d", dir, rank) >= (int)sizeof path)
    return false;
  text = slurp(path, NULL);
  if (text == NULL)
    return false;
  n = sscanf(text,
             "pid %d\nkey %64s\nfile_mode %o\ndir_mode %o\nowner_ok %d\n"
             "removed %d\nallreduce %d\n",
             &r->pid, r->key, &r->file_mode, &r->dir_mode, &r->owner_ok,
             &r->removed, &r->allreduce);
  free(text);
  return n == 7;
}

/* Whether the key, in lower or upper case, is in buf[0..n). */
static bool has_key(const char *buf, size_t n, const char *hex) {
  char upper[HEX_LEN + 1];
  for (int i = 0; i <= HEX_LEN; i++)
    upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 32 : hex[i]);
  return memmem(buf, n, hex, HEX_LEN) != NULL ||
         memmem(buf, n, upper, HEX_LEN) != NULL;
}

/* /proc/PID/cmdline and environ hold no key; `rank` also requires that the
 * environment names the key file (so this is the rank's environment) and
 * has no CRNET_JOB_KEY. */
static void check_proc(int pid, const char *hex, bool rank) {
  static const char *const files[] = {"cmdline", "environ"};
  for (int i = 0; i < 2; i++) {
    char path[64];
    size_t n;
    char *text;
    snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
    text = slurp(path, &n);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    ck_assert_msg(!has_key(text, n, hex), "the key is in %s", path);
    if (rank && i == 1) {
      ck_assert_msg(memmem(text, n, "CRNET_JOB_KEY_FILE=", 19) != NULL,
                    "%s lacks CRNET_JOB_KEY_FILE", path);
      ck_assert_msg(memmem(text, n, "\0CRNET_JOB_KEY=", 15) == NULL &&
                        strncmp(text, "CRNET_JOB_KEY=", 14) != 0,
                    "%s has CRNET_JOB_KEY", path);
    }
    free(text);
  }
}

/* The value of CRNET_JOB_KEY_FILE in /proc/PID/environ, into out. */
static void key_file_of(int pid, char *out, size_t outlen) {
  char path[64];
  size_t n;
  char *text, *p;
  snprintf(path, sizeof path, "/proc/%d/environ", pid);
  text = slurp(path, &n);
  ck_assert_ptr_nonnull(text);
  p = memmem(text, n, "CRNET_JOB_KEY_FILE=", 19);
  ck_assert_ptr_nonnull(p);
  snprintf(out, outlen, "%s", p + 19);
  free(text);
}

START_TEST(key_stays_hidden) {
  const char *crlaunch = getenv("CRLAUNCH"), *progs = getenv("CRNET_TEST_PROGS");
  char dir[4096], prog[4096], logfile[4200], release[4200], keyfile[4096];
  probe_report rep[2];
  pid_t launcher;
  double deadline;
  int st = 0, fd;
  char *log;
  size_t loglen;
  ck_assert_msg(crlaunch != NULL && progs != NULL,
                "set CRLAUNCH and CRNET_TEST_PROGS (meson test does)");
  make_dir(dir, sizeof dir);
  snprintf(prog, sizeof prog, "%s/key_probe", progs);
  snprintf(logfile, sizeof logfile, "%s/crlaunch.log", dir);
  snprintf(release, sizeof release, "%s/release", dir);
  launcher = fork();
  ck_assert_int_ge(launcher, 0);
  if (launcher == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    fd = open(logfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
      _exit(126);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    setenv("CRNET_DEBUG", "1", 1);
    setenv("KEY_PROBE_DIR", dir, 1);
    unsetenv("CRNET_JOB_KEY");
    unsetenv("CRNET_JOB_KEY_FILE");
    execl(crlaunch, crlaunch, "-n", "2", "--timeout", "60", prog, (char *)NULL);
    _exit(127);
  }

  /* Both ranks report once they are through init and an allreduce. */
  deadline = now_s() + test_seconds(30);
  while (!(read_report(dir, 0, &rep[0]) && read_report(dir, 1, &rep[1])) &&
         now_s() < deadline && waitpid(launcher, &st, WNOHANG) == 0)
    usleep(10000);
  if (!(read_report(dir, 0, &rep[0]) && read_report(dir, 1, &rep[1]))) {
    char *text = slurp(logfile, NULL);
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
    ck_abort_msg("no reports from the ranks; crlaunch said:\n%s",
                 text != NULL ? text : "");
  }
  ck_assert_int_eq((int)strlen(rep[0].key), HEX_LEN);
  ck_assert_str_eq(rep[0].key, rep[1].key);
  key_file_of(rep[0].pid, keyfile, sizeof keyfile);
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(rep[r].allreduce == 0, "rank %d: allreduce failed", r);
    ck_assert_msg(rep[r].file_mode == 0600, "key file mode %o",
                  rep[r].file_mode);
    ck_assert_msg(rep[r].dir_mode == 0700, "key directory mode %o",
                  rep[r].dir_mode);
    ck_assert_msg(rep[r].owner_ok, "key file or directory not ours");
    ck_assert_msg(rep[r].removed,
                  "rank %d: the key file was still there 5 s after init", r);
    /* The ranks are alive and waiting for the release now. */
    check_proc(rep[r].pid, rep[0].key, true);
  }
  check_proc(launcher, rep[0].key, false);
  ck_assert_msg(access(keyfile, F_OK) != 0, "%s still exists", keyfile);

  fd = open(release, O_WRONLY | O_CREAT, 0600);
  ck_assert_int_ge(fd, 0);
  close(fd);
  deadline = now_s() + test_seconds(30);
  while (waitpid(launcher, &st, WNOHANG) == 0 && now_s() < deadline)
    usleep(10000);
  if (now_s() >= deadline) {
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
    ck_abort_msg("crlaunch still running 30 s after the release");
  }
  log = slurp(logfile, &loglen);
  ck_assert_ptr_nonnull(log);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "crlaunch exited %d:\n%s", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                log);
  /* The debug output is there (so it was looked at), the key is not. */
  ck_assert_msg(strstr(log, "every rank reached the rendezvous") != NULL &&
                    strstr(log, "link to rank") != NULL,
                "no CRNET_DEBUG output:\n%s", log);
  ck_assert_msg(!has_key(log, loglen, rep[0].key),
                "the key is in the job's output");
  free(log);
  /* The private directory went with the job. */
  ck_assert_ptr_nonnull(strrchr(keyfile, '/'));
  *strrchr(keyfile, '/') = '\0';
  ck_assert_msg(access(keyfile, F_OK) != 0, "%s still exists", keyfile);
  rm_dir(dir);
}
END_TEST

/* --- core files ---------------------------------------------------------------- */

#define CORE_MARKER "crnet-core-test-marker-in-heap!!" /* 32 bytes */

/* The ranks of key_not_in_core_file: their directory (logs, the key file,
 * rank 1's core) and the pipe on which rank 0 lets rank 1 go. */
typedef struct core_opts {
  rank_opts o;
  int go[2];
} core_opts;

/* Logs what a call of rank_dump_core returned; returns it. */
static int said(crnet_comm *c, int rank, const char *call, int rc) {
  fprintf(stderr, "rank %d: %s: %s%s%s\n", rank, call, crnet_err_name(rc),
          rc != 0 ? ": " : "", rc != 0 ? crnet_comm_errmsg(c) : "");
  return rc;
}

/* Both ranks join the encrypted job and make a barrier. Then rank 1 puts a
 * marker in ordinary heap memory (which the core must hold, so that the
 * search is known to work) and aborts in the directory, with core dumps
 * on, while rank 0 waits in a second barrier for it to go. Both read the
 * key from a file, so that no environment holds it.
 *
 * Rank 1 aborts only once rank 0's first barrier has returned (a byte on
 * the pipe), so that what rank 0's calls return never depends on timing.
 * Without it, rank 1 could read rank 0's frame, finish and die while rank
 * 0 was off the CPU, and rank 0's loop then saw its own write complete
 * (libuv reports it a turn later) in the same turn as rank 1's closed
 * connection; the barrier then returned CRNET_EPEER (about 2 runs in 100
 * on a loaded machine). The library now returns 0 for a call whose rounds
 * were all done whole (docs/RELIABILITY.md), and this test no longer
 * leans on that either way. */
static int rank_dump_core(int rank, int size, void *arg) {
  core_opts *co = arg;
  const char *dir = co->o.dir;
  char path[4200], go = 'g';
  crnet_comm *c;
  int rc;
  (void)size;
  rank_setup(&co->o, rank);
  close(co->go[rank == 0 ? 0 : 1]);
  snprintf(path, sizeof path, "%s/key", dir);
  unsetenv("CRNET_JOB_KEY");
  setenv("CRNET_JOB_KEY_FILE", path, 1);
  setenv("CRNET_ENCRYPT", "1", 1);
  /* Rank 0's second barrier lasts as long as the core takes to write,
   * which a slow disk makes long: only the test's deadline bounds it. */
  unsetenv("CRNET_TIMEOUT");
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: init: %s: %s\n", rank, crnet_err_name(rc),
            crnet_init_errmsg());
    return err_exit(rc);
  }
  rc = said(c, rank, "first barrier", crnet_barrier(c));
  if (rc != 0)
    return err_exit(rc);
  if (rank == 0) {
    if (write(co->go[1], &go, 1) != 1)
      return EXIT_FAIL;
    /* Fails when rank 1 is gone. */
    rc = said(c, rank, "second barrier", crnet_barrier(c));
    crnet_comm_destroy(c);
    return rc == CRNET_EPEER ? EXIT_OK : rc == 0 ? EXIT_FAIL : err_exit(rc);
  }
  /* End of file: rank 0 exited without letting go. */
  if (read(co->go[0], &go, 1) != 1)
    return EXIT_FAIL;
  /* Stores through volatile, or the compiler drops them before abort. */
  volatile char *marker = malloc(64);
  if (marker == NULL || chdir(dir) != 0)
    return EXIT_FAIL;
  for (int i = 0; i < 32; i++)
    marker[i] = CORE_MARKER[i];
  struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
  setrlimit(RLIMIT_CORE, &rl);
  prctl(PR_SET_DUMPABLE, 1);
  abort();
}

/* The core file a process that crashed in dir left there, or NULL. */
static char *find_core(const char *dir, size_t *n) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[4400];
  char *data = NULL;
  while (d != NULL && data == NULL && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "core", 4) != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    data = slurp(path, n);
  }
  if (d != NULL)
    closedir(d);
  return data;
}

/* A rank that crashes writes a core file without the job key in it: the
 * key, the handshake state and the session keys live in memory that core
 * files leave out (secret.h). */
START_TEST(key_not_in_core_file) {
  char dir[4096], path[4200], pattern[64] = "";
  uint8_t key[CRNET__KEY_BYTES];
  size_t n = 0;
  core_opts co;
  job j;
#ifdef __SANITIZE_ADDRESS__
  /* The plain pass runs this case; test_secret checks, in every pass,
   * that secrets lie in pages core files leave out. */
  test_skip("key_not_in_core_file",
            "AddressSanitizer turns core dumps off (the plain pass runs it)");
  return;
#endif
  FILE *f = fopen("/proc/sys/kernel/core_pattern", "r");
  if (f != NULL) {
    if (fgets(pattern, sizeof pattern, f) == NULL)
      pattern[0] = '\0';
    fclose(f);
  }
  pattern[strcspn(pattern, "\n")] = '\0';
  /* The core must land in the rank's directory as core or core.<...>: a
   * pattern with a path or a pipe (systemd-coredump, apport) sends it
   * elsewhere. */
  if (strncmp(pattern, "core", 4) != 0 || strchr(pattern, '/') != NULL) {
    test_require("key_not_in_core_file",
                 "kernel.core_pattern is '%s', which writes no core file "
                 "named core* where the process runs (sysctl "
                 "kernel.core_pattern=core)",
                 pattern);
    return;
  }
  make_dir(dir, sizeof dir);
  job_init(&j, 2, 10);
  /* A key made in hex digit by digit: this process never holds it in
   * binary before the ranks are done, so their cores (copies of its
   * memory) cannot hold it from here. */
  for (int i = 0; i < HEX_LEN; i++)
    j.key[i] = "0123456789abcdef"[randombytes_uniform(16)];
  snprintf(path, sizeof path, "%s/key", dir);
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n", j.key);
  fclose(f);
  co = (core_opts){.o = {.dir = dir}};
  ck_assert_int_eq(pipe(co.go), 0);
  start_rank(&j, 0, rank_dump_core, &co, NULL);
  start_rank(&j, 1, rank_dump_core, &co, NULL);
  /* Only the ranks hold the pipe: if rank 0 dies, rank 1 reads its end. */
  close(co.go[0]);
  close(co.go[1]);
  wait_job(&j, 30);
  if (exit_code(&j, 0) != EXIT_OK ||
      !(WIFSIGNALED(j.status[1]) && WCOREDUMP(j.status[1]))) {
    show_log(dir, 0);
    show_log(dir, 1);
  }
  ck_assert_msg(exit_code(&j, 0) == EXIT_OK, "rank 0 exited %d",
                exit_code(&j, 0));
  ck_assert_msg(WIFSIGNALED(j.status[1]) && WCOREDUMP(j.status[1]),
                "rank 1 did not dump core (status %d)", j.status[1]);
  char *core = find_core(dir, &n);
  ck_assert_msg(core != NULL, "no core file in %s", dir);
  ck_assert_msg(memmem(core, n, CORE_MARKER, 32) != NULL,
                "the marker is not in the %zu-byte core: the search is broken",
                n);
  ck_assert_int_eq(crnet__key_parse_hex(j.key, key), 0);
  ck_assert_msg(memmem(core, n, key, sizeof key) == NULL,
                "the job key is in rank 1's core file");
  crnet__wipe(key, sizeof key);
  free(core);
  rm_dir(dir);
}
END_TEST

static Suite *security_suite(void) {
  Suite *s = suite_create("security");
  TCase *t = tcase_create("security");
  tcase_set_timeout(t, 90);
  tcase_add_test(t, strangers_are_refused);
  tcase_add_test(t, replay_is_refused);
  tcase_add_test(t, different_keys_fail);
  tcase_add_test(t, key_stays_hidden);
  tcase_add_test(t, key_not_in_core_file);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(security_suite());
  int failed;
  if (sodium_init() < 0)
    return EXIT_FAILURE;
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
