/* crlaunch end to end.
 *
 * Every test runs the real crlaunch (path in $CRLAUNCH) as a child, with its
 * stdout and stderr in files, TMPDIR and CRLT_DIR pointing at a private work
 * directory, and the rank programs of tests/progs ($CRNET_TEST_PROGS). The
 * ranks drop a pid.R.PID file there, so after every run we can check that no
 * rank outlived crlaunch and that crlaunch removed its key directory, on
 * every path out: success, failure, timeout, signals.
 *
 * Nothing may hang: every wait has a deadline after which the test kills
 * crlaunch and its ranks and fails saying what it waited for, and each test
 * case has a Check timeout on top.
 */
#include <check.h>

#include "check_main.h"
#include "time_scale.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *crlaunch;
static char rank_prog[4096];
static char init_prog[4096];

/* One crlaunch run. */
struct run {
  pid_t pid;
  char dir[256];
  double t0;     /* when crlaunch started */
  double secs;   /* how long it ran */
  int status;    /* from waitpid */
  int out_pipe;  /* read end of crlaunch's stdout, if asked for */
  char *out;
  char *err;
  sigset_t oldmask;
};

/* How to start it. */
struct how {
  const char *const *env; /* "VAR=VAL" to set, "VAR" to unset */
  const char *input;      /* crlaunch's stdin; NULL: /dev/null */
  int pipe_out;           /* stdout to a pipe the test reads */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  ck_assert(buf != NULL);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      ck_assert(buf != NULL);
    }
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

static void path_in(char *buf, size_t n, const struct run *r,
                    const char *name) {
  snprintf(buf, n, "%s/%s", r->dir, name);
}

/* Pids of the ranks, from their pid files. Returns how many. */
static int rank_pids(const struct run *r, pid_t *pids, int max) {
  DIR *d = opendir(r->dir);
  int n = 0;
  if (d == NULL)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int rank, pid;
    if (sscanf(e->d_name, "pid.%d.%d", &rank, &pid) == 2 && n < max)
      pids[n++] = pid;
  }
  closedir(d);
  return n;
}

static int alive(pid_t pid) {
  return kill(pid, 0) == 0 || errno != ESRCH;
}

static void kill_ranks(const struct run *r) {
  pid_t pids[64];
  int n = rank_pids(r, pids, 64);
  for (int i = 0; i < n; i++)
    kill(pids[i], SIGKILL);
}

static void make_workdir(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, n, "%s/crlt-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

/* Starts crlaunch with the given arguments (NULL-terminated); "@RANK" and
 * "@INIT" stand for the paths of the test programs. */
static void start_argv(struct run *r, const struct how *how,
                       const char *const *args) {
  const char *argv[64];
  int argc = 0;
  argv[argc++] = crlaunch;
  for (const char *const *a = args; *a != NULL; a++) {
    ck_assert(argc < 63);
    if (strcmp(*a, "@RANK") == 0)
      argv[argc++] = rank_prog;
    else if (strcmp(*a, "@INIT") == 0)
      argv[argc++] = init_prog;
    else
      argv[argc++] = *a;
  }
  argv[argc] = NULL;

  memset(r, 0, sizeof *r);
  r->out_pipe = -1;
  make_workdir(r->dir, sizeof r->dir);
  char in[512], out[512], err[512];
  path_in(in, sizeof in, r, "stdin");
  path_in(out, sizeof out, r, "stdout");
  path_in(err, sizeof err, r, "stderr");
  if (how != NULL && how->input != NULL) {
    FILE *f = fopen(in, "w");
    ck_assert(f != NULL);
    fputs(how->input, f);
    fclose(f);
  } else {
    snprintf(in, sizeof in, "/dev/null");
  }
  int pfd[2] = {-1, -1};
  if (how != NULL && how->pipe_out)
    ck_assert(pipe(pfd) == 0);

  /* SIGCHLD stays blocked so that the wait below can sleep on it without a
   * race; the child gets the old mask back before exec. */
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &r->oldmask);
  r->t0 = now_s();
  r->pid = fork();
  ck_assert(r->pid >= 0);
  if (r->pid == 0) {
    sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
    setenv("CRLT_DIR", r->dir, 1);
    setenv("TMPDIR", r->dir, 1);
    for (const char *const *e = how != NULL ? how->env : NULL; e && *e; e++) {
      if (strchr(*e, '=') != NULL)
        putenv(strdup(*e));
      else
        unsetenv(*e);
    }
    int fin = open(in, O_RDONLY);
    int fout = pfd[1] >= 0 ? pfd[1] : open(out, O_WRONLY | O_CREAT, 0644);
    int ferr = open(err, O_WRONLY | O_CREAT, 0644);
    if (fin < 0 || fout < 0 || ferr < 0)
      _exit(120);
    dup2(fin, 0);
    dup2(fout, 1);
    dup2(ferr, 2);
    if (pfd[0] >= 0)
      close(pfd[0]);
    execv(crlaunch, (char *const *)argv);
    _exit(121);
  }
  if (pfd[0] >= 0) {
    close(pfd[1]);
    r->out_pipe = pfd[0];
  }
}

static void start_v(struct run *r, const struct how *how, va_list ap) {
  const char *args[64];
  int n = 0;
  const char *a;
  while ((a = va_arg(ap, const char *)) != NULL) {
    ck_assert(n < 63);
    args[n++] = a;
  }
  args[n] = NULL;
  start_argv(r, how, args);
}

static void start(struct run *r, const struct how *how, ...) {
  va_list ap;
  va_start(ap, how);
  start_v(r, how, ap);
  va_end(ap);
}

/* 1 once crlaunch has exited (status collected), 0 if still running. */
static int try_reap(struct run *r) {
  pid_t w = waitpid(r->pid, &r->status, WNOHANG);
  if (w == r->pid) {
    r->secs = now_s() - r->t0;
    return 1;
  }
  return 0;
}

/* Waits at most `limit` seconds from now for crlaunch to exit; on time out
 * kills everything and fails. Then collects the output and checks that no
 * rank and no key directory outlived crlaunch. */
static void finish(struct run *r, double limit) {
  limit = test_seconds(limit);
  double deadline = now_s() + limit;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  while (!try_reap(r)) {
    double left = deadline - now_s();
    if (left <= 0) {
      kill(r->pid, SIGKILL);
      waitpid(r->pid, &r->status, 0);
      kill_ranks(r);
      ck_abort_msg("crlaunch did not exit within %.1f s", limit);
    }
    struct timespec ts = {(time_t)left,
                          (long)((left - (double)(time_t)left) * 1e9)};
    sigtimedwait(&chld, NULL, &ts);
  }
  sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
  if (r->out_pipe >= 0)
    close(r->out_pipe);

  char path[512];
  path_in(path, sizeof path, r, "stdout");
  r->out = access(path, F_OK) == 0 ? read_file(path) : strdup("");
  path_in(path, sizeof path, r, "stderr");
  r->err = read_file(path);

  pid_t pids[64];
  int n = rank_pids(r, pids, 64);
  for (int i = 0; i < n; i++) {
    if (alive(pids[i])) {
      kill_ranks(r);
      ck_abort_msg("rank pid %d outlived crlaunch", (int)pids[i]);
    }
  }
  DIR *d = opendir(r->dir);
  ck_assert(d != NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    ck_assert_msg(strncmp(e->d_name, "crlaunch-", 9) != 0,
                  "crlaunch left its key directory %s/%s behind", r->dir,
                  e->d_name);
  closedir(d);
}

static void cleanup(struct run *r) {
  DIR *d = opendir(r->dir);
  if (d != NULL) {
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(r->dir);
  free(r->out);
  free(r->err);
}

/* Runs crlaunch to completion (limit in seconds). */
static void run(struct run *r, const struct how *how, double limit, ...) {
  va_list ap;
  va_start(ap, limit);
  start_v(r, how, ap);
  va_end(ap);
  finish(r, limit);
}

static int exit_status(const struct run *r) {
  ck_assert_msg(WIFEXITED(r->status),
                "crlaunch did not exit normally (wait status %#x); stderr:\n%s",
                r->status, r->err);
  return WEXITSTATUS(r->status);
}

static void expect_exit(const struct run *r, int code) {
  int got = exit_status(r);
  ck_assert_msg(got == code,
                "crlaunch exited %d, expected %d\nstdout:\n%.2000s\nstderr:\n"
                "%.2000s",
                got, code, r->out, r->err);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static int count_lines(const char *s) {
  return count(s, "\n");
}

static void expect_has(const char *what, const char *text,
                       const char *needle) {
  ck_assert_msg(strstr(text, needle) != NULL,
                "%s lacks \"%s\"; it is:\n%.3000s", what, needle, text);
}

/* Waits up to limit seconds for n pid files. */
static void wait_for_ranks(struct run *r, int n, double limit) {
  pid_t pids[64];
  limit = test_seconds(limit);
  double deadline = now_s() + limit;
  while (rank_pids(r, pids, 64) < n) {
    if (now_s() > deadline) {
      kill(r->pid, SIGKILL);
      kill_ranks(r);
      ck_abort_msg("only %d of %d ranks started within %.1f s",
                   rank_pids(r, pids, 64), n, limit);
    }
    sleep_ms(10);
  }
}

/* ---- crlaunch --settings ---------------------------------------------- */

/* Every setting as the ranks would get it, and where it comes from; no
 * program is needed, and none is started. A bad value: exit 2 with the
 * library's own message. */
START_TEST(test_settings) {
  static const char *const env[] = {"CRNET_STREAMS=3", "CRNET_TIMEOUT",
                                    "CRNET_TRANSPORT", "CRNET_SPIN_US",
                                    "CRNET_ENCRYPT", NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "--settings", NULL);
  expect_exit(&r, 0);
  ck_assert_msg(r.err[0] == '\0', "unexpected stderr: %s", r.err);
  expect_has("stdout", r.out, "CRNET_TIMEOUT=0 (default)\n");
  expect_has("stdout", r.out, "CRNET_STREAMS=3 (from the environment)\n");
  expect_has("stdout", r.out, "CRNET_ALLREDUCE_SCHEDULE=auto (default)\n");
  expect_has("stdout", r.out, "CRNET_SPIN_US= (unset: ");
  expect_has("stdout", r.out, "CRNET_LAUNCHER=crlaunch (set by crlaunch)\n");
  cleanup(&r);

  /* -x wins over the environment; the program is not started. */
  run(&r, &how, 10, "--settings", "-n", "4", "-x", "CRNET_TIMEOUT=5", "-x",
      "CRNET_STREAMS=2", "--encrypt", "@RANK", "hello", NULL);
  expect_exit(&r, 0);
  expect_has("stdout", r.out, "CRNET_TIMEOUT=5 (from -x)\n");
  expect_has("stdout", r.out, "CRNET_STREAMS=2 (from -x)\n");
  expect_has("stdout", r.out, "CRNET_ENCRYPT=1 (from --encrypt)\n");
  expect_has("stdout", r.out, "CRNET_SIZE=4 (set by crlaunch)\n");
  ck_assert_msg(strstr(r.out, "hello from") == NULL, "a rank ran:\n%s",
                r.out);
  pid_t pids[4];
  ck_assert_int_eq(rank_pids(&r, pids, 4), 0);
  cleanup(&r);

  /* Bad values, from -x and from the environment. */
  static const char *const bad_env[] = {"CRNET_STREAMS=9", NULL};
  struct how bad_how = {.env = bad_env};
  run(&r, &bad_how, 10, "--settings", "-x", "CRNET_TRANSPORT=udp", NULL);
  expect_exit(&r, 2);
  expect_has("stderr", r.err,
             "crlaunch: CRNET_TRANSPORT='udp' is not auto, tcp or shm\n");
  expect_has("stderr", r.err,
             "crlaunch: CRNET_STREAMS='9' is not a number of TCP streams per "
             "peer (1 to 8)\n");
  ck_assert_msg(strstr(r.out, "CRNET_TRANSPORT=") == NULL,
                "a bad value printed as a value:\n%s", r.out);
  cleanup(&r);
}
END_TEST

/* ---- the ranks start, know who they are, and say so ------------------ */

static const int hello_sizes[] = {1, 4, 7};

START_TEST(test_hello) {
  int n = hello_sizes[_i];
  char ns[16];
  snprintf(ns, sizeof ns, "%d", n);
  struct run r;
  run(&r, NULL, 10, "-n", ns, "@RANK", "hello", NULL);
  expect_exit(&r, 0);
  ck_assert_msg(r.err[0] == '\0', "unexpected stderr: %s", r.err);
  ck_assert_int_eq(count_lines(r.out), n);
  int seen[8] = {0};
  for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
    int rank, size;
    ck_assert_msg(sscanf(line, "hello from %d of %d", &rank, &size) == 2,
                  "bad line: %s", line);
    ck_assert_int_eq(size, n);
    ck_assert_msg(rank >= 0 && rank < n, "rank %d out of range", rank);
    seen[rank]++;
  }
  for (int i = 0; i < n; i++)
    ck_assert_msg(seen[i] == 1, "rank %d printed %d times", i, seen[i]);
  cleanup(&r);
}
END_TEST

/* mpirun's spellings: -np N, -npN, and --host with a host named again
 * for each slot. */
START_TEST(test_mpirun_spellings) {
  static const char *const forms[][6] = {
      {"-np", "3", "@RANK", "hello", NULL},
      {"-np3", "@RANK", "hello", NULL},
      {"--host", "localhost,localhost,localhost", "@RANK", "hello", NULL},
  };
  for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
    struct run r;
    start_argv(&r, NULL, forms[f]);
    finish(&r, 10);
    expect_exit(&r, 0);
    ck_assert_msg(count_lines(r.out) == 3, "form %zu: stdout:\n%s\nstderr:\n%s",
                  f, r.out, r.err);
    cleanup(&r);
  }
}
END_TEST

START_TEST(test_env_contract) {
  /* crlaunch's own CRNET_JOB_KEY and CRNET_RANK must not leak through. */
  static const char *const env[] = {
      "CRNET_JOB_KEY="
      "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
      "CRNET_RANK=99", "CRNET_INIT_TIMEOUT=7.5", NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "-n", "2", "@RANK", "env", "CRNET_RANK", "CRNET_SIZE",
      "CRNET_RENDEZVOUS", "CRNET_LAUNCHER", "CRNET_INIT_TIMEOUT",
      "CRNET_JOB_KEY", "CRNET_JOB_KEY_FILE", NULL);
  expect_exit(&r, 0);
  for (int i = 0; i < 2; i++) {
    char want[512];
    snprintf(want, sizeof want, "%d CRNET_RANK=%d\n", i, i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_SIZE=2\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_LAUNCHER=crlaunch\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_INIT_TIMEOUT=7.5\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_JOB_KEY unset\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_JOB_KEY_FILE=%s/crlaunch-", i,
             r.dir);
    expect_has("stdout", r.out, want);
  }
  const char *p = strstr(r.out, "CRNET_RENDEZVOUS=127.0.0.1:");
  ck_assert_msg(p != NULL, "no rendezvous address in:\n%s", r.out);
  int port = atoi(p + strlen("CRNET_RENDEZVOUS=127.0.0.1:"));
  ck_assert_msg(port > 0 && port < 65536, "bad port %d", port);
  char want[64];
  snprintf(want, sizeof want, "CRNET_RENDEZVOUS=127.0.0.1:%d\n", port);
  ck_assert_int_eq(count(r.out, want), 2);
  cleanup(&r);

  /* Without CRNET_INIT_TIMEOUT the ranks get the default. */
  static const char *const env2[] = {"CRNET_INIT_TIMEOUT", NULL};
  how.env = env2;
  run(&r, &how, 10, "-n", "1", "@RANK", "env", "CRNET_INIT_TIMEOUT", NULL);
  expect_exit(&r, 0);
  expect_has("stdout", r.out, "0 CRNET_INIT_TIMEOUT=60\n");
  cleanup(&r);
}
END_TEST

START_TEST(test_tag_output) {
  struct run r;
  run(&r, NULL, 10, "-n", "4", "--tag-output", "@RANK", "hello", NULL);
  expect_exit(&r, 0);
  ck_assert_int_eq(count_lines(r.out), 4);
  for (int i = 0; i < 4; i++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] hello from %d of 4\n", i, i);
    expect_has("stdout", r.out, want);
  }
  cleanup(&r);
}
END_TEST

/* ---- output: complete, in order per rank, no torn lines --------------- */

#define LONG_LINES 10000
#define LONG_RANKS 4

/* Checks one line of `lines` mode (without its newline) and advances the
 * expected index of its rank and stream. Plain checks (EXPECT): 80000 lines
 * a run, and Check records every ck_assert that passes. */
static void check_line(const char *line, int tagged, char stream,
                       int next[LONG_RANKS], int last_seen[LONG_RANKS]) {
  const char *p = line;
  int tag = -1;
  if (tagged) {
    int used = 0;
    EXPECT(sscanf(p, "[%d] %n", &tag, &used) == 1 && used > 0,
           "untagged line: %.200s", line);
    p += used;
  }
  int rank, i, len, used = 0;
  char s;
  if (sscanf(p, "%d o las%c", &rank, &s) == 2 && s == 't' && stream == 'o') {
    EXPECT(strcmp(strchr(p, 'l'), "last") == 0, "bad last line: %s", line);
    EXPECT(rank >= 0 && rank < LONG_RANKS, "rank %d: %.200s", rank, line);
    EXPECT(!tagged || tag == rank, "line of rank %d tagged %d", rank, tag);
    EXPECT(next[rank] == LONG_LINES, "rank %d's last line came after %d lines",
           rank, next[rank]);
    last_seen[rank]++;
    return;
  }
  EXPECT(sscanf(p, "%d %c %d %d %n", &rank, &s, &i, &len, &used) == 4,
         "malformed line: %.200s", line);
  EXPECT(rank >= 0 && rank < LONG_RANKS && s == stream,
         "line in the wrong place: %.200s", line);
  EXPECT(!tagged || tag == rank, "line of rank %d tagged %d", rank, tag);
  EXPECT(i == next[rank], "rank %d stream %c: line %d where %d was due", rank,
         s, i, next[rank]);
  EXPECT((int)strlen(p + used) == len,
         "torn line (payload %zu, expected %d): %.200s", strlen(p + used), len,
         line);
  /* A plain loop: a Check assertion per byte would cost more than the
   * whole run. */
  int bad = -1;
  for (int j = 0; j < len && bad < 0; j++)
    if (p[used + j] != 'a' + (rank * 7 + i + j + (s == 'e')) % 26)
      bad = j;
  EXPECT(bad < 0, "corrupt line at byte %d: %.200s", bad, line);
  next[rank]++;
}

static void check_stream(char *text, int tagged, char stream) {
  int next[LONG_RANKS] = {0}, last_seen[LONG_RANKS] = {0};
  size_t n = strlen(text);
  ck_assert_msg(n > 0 && text[n - 1] == '\n',
                "stream %c does not end with a newline", stream);
  for (char *line = text; *line != '\0';) {
    char *nl = strchr(line, '\n');
    *nl = '\0';
    check_line(line, tagged, stream, next, last_seen);
    line = nl + 1;
  }
  for (int r = 0; r < LONG_RANKS; r++) {
    ck_assert_msg(next[r] == LONG_LINES, "rank %d stream %c: %d of %d lines",
                  r, stream, next[r], LONG_LINES);
    ck_assert_int_eq(last_seen[r], stream == 'o' ? 1 : 0);
  }
}

START_TEST(test_long_output) {
  int tagged = _i;
  char count_s[16], n_s[16];
  snprintf(count_s, sizeof count_s, "%d", LONG_LINES);
  snprintf(n_s, sizeof n_s, "%d", LONG_RANKS);
  struct run r;
  run(&r, NULL, 30, "-n", n_s, tagged ? "--tag-output" : "--", "@RANK",
      "lines", count_s, NULL);
  expect_exit(&r, 0);
  check_stream(r.out, tagged, 'o');
  check_stream(r.err, tagged, 'e');
  cleanup(&r);
}
END_TEST

START_TEST(test_stdin_rank0_only) {
  struct how how = {.input = "line one\nline two\n"};
  struct run r;
  run(&r, &how, 10, "-n", "3", "@RANK", "stdin", NULL);
  expect_exit(&r, 0);
  expect_has("stdout", r.out, "rank 0 read 18 bytes\n");
  expect_has("stdout", r.out, "rank 1 read 0 bytes\n");
  expect_has("stdout", r.out, "rank 2 read 0 bytes\n");
  cleanup(&r);
}
END_TEST

START_TEST(test_x_vars) {
  static const char *const env[] = {"CRLT_B=from-crlaunch", "CRLT_UNSET",
                                    NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "-x", "CRLT_A=hello", "-x", "CRLT_B", "-x", "CRLT_C=x=y",
      "-x", "CRLT_UNSET", "-n", "2", "@RANK", "env", "CRLT_A", "CRLT_B",
      "CRLT_C", "CRLT_UNSET", NULL);
  expect_exit(&r, 0);
  for (int i = 0; i < 2; i++) {
    char want[64];
    snprintf(want, sizeof want, "%d CRLT_A=hello\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRLT_B=from-crlaunch\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRLT_C=x=y\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRLT_UNSET unset\n", i);
    expect_has("stdout", r.out, want);
  }
  expect_has("stderr", r.err, "CRLT_UNSET");
  cleanup(&r);
}
END_TEST

/* ---- failures --------------------------------------------------------- */

START_TEST(test_rank_exit_status) {
  struct run r;
  run(&r, NULL, 10, "-n", "4", "@RANK", "exit", "1", "3", NULL);
  expect_exit(&r, 3);
  ck_assert_msg(r.secs < 1 + test_seconds(1.5), "took %.2f s to stop the job",
                r.secs);
  expect_has("stderr", r.err, "crlaunch: rank 1 (pid ");
  expect_has("stderr", r.err, "exited with status 3");
  /* The three ranks stopped because of it are not announced as failures. */
  ck_assert_msg(count(r.err, "crlaunch: rank ") == 1, "stderr:\n%s", r.err);
  expect_has("stderr", r.err, "stopped 3 other ranks");
  cleanup(&r);
}
END_TEST

/* --grace: the others get that long after a failure before SIGTERM (1 s
 * without it, as test_rank_exit_status shows). */
START_TEST(test_rank_exit_grace) {
  struct run r;
  run(&r, NULL, 10, "-n", "3", "--grace", "2.5", "@RANK", "exit", "1", "3",
      NULL);
  expect_exit(&r, 3);
  ck_assert_msg(r.secs >= 2.4 && r.secs < 2.5 + test_seconds(4.5),
                "took %.2f s to stop the job with --grace 2.5", r.secs);
  expect_has("stderr", r.err, "exited with status 3");
  expect_has("stderr", r.err, "stopped 2 other ranks");
  cleanup(&r);
}
END_TEST

START_TEST(test_rank_killed) {
  struct run r;
  run(&r, NULL, 10, "-n", "3", "@RANK", "raise", "2", "9", NULL);
  expect_exit(&r, 128 + SIGKILL);
  ck_assert_msg(r.secs < 1 + test_seconds(1.5), "took %.2f s to stop the job",
                r.secs);
  expect_has("stderr", r.err, "crlaunch: rank 2 (pid ");
  expect_has("stderr", r.err, "killed by signal 9");
  ck_assert_msg(count(r.err, "crlaunch: rank ") == 1, "stderr:\n%s", r.err);
  cleanup(&r);
}
END_TEST

START_TEST(test_missing_program) {
  struct run r;
  run(&r, NULL, 10, "-n", "2", "/nonexistent/crlt-prog", NULL);
  expect_exit(&r, 127);
  expect_has("stderr", r.err, "/nonexistent/crlt-prog");
  ck_assert_int_eq(count_lines(r.err), 1);
  cleanup(&r);

  /* A file that is there but not executable. */
  char dir[256], path[512];
  make_workdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/not-executable", dir);
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs("#!/bin/sh\necho should not run\n", f);
  fclose(f);
  chmod(path, 0644);
  struct run r2;
  run(&r2, NULL, 10, "-n", "2", path, NULL);
  expect_exit(&r2, 127);
  expect_has("stderr", r2.err, path);
  ck_assert_msg(strstr(r2.out, "should not run") == NULL, "it ran");
  cleanup(&r2);
  unlink(path);
  rmdir(dir);
}
END_TEST

START_TEST(test_timeout) {
  struct run r;
  run(&r, NULL, 10, "--timeout", "1", "-n", "3", "@RANK", "sleep", "30",
      NULL);
  expect_exit(&r, 124);
  ck_assert_msg(r.secs >= 0.9 && r.secs < 1 + test_seconds(3), "took %.2f s",
                r.secs);
  expect_has("stderr", r.err, "crlaunch: job timed out after 1 s; stopping 3 "
                              "ranks");
  cleanup(&r);
}
END_TEST

START_TEST(test_sigterm_stops_ranks) {
  struct run r;
  start(&r, NULL, "-n", "3", "@RANK", "sleep", "30", NULL);
  wait_for_ranks(&r, 3, 5);
  kill(r.pid, SIGTERM);
  finish(&r, 3); /* also checks that the three ranks are gone */
  expect_exit(&r, 128 + SIGTERM);
  cleanup(&r);
}
END_TEST

/* Whether crlaunch's stderr has said `what`, polling up to `limit`
 * seconds. */
static int stderr_says(const struct run *r, const char *what, double limit) {
  double deadline = now_s() + limit;
  char path[512];
  path_in(path, sizeof path, r, "stderr");
  for (;;) {
    char *text = read_file(path);
    int found = strstr(text, what) != NULL;
    free(text);
    if (found || now_s() > deadline)
      return found;
    sleep_ms(5);
  }
}

START_TEST(test_second_sigint_kills) {
  /* crlaunch says when it has taken a signal (CRNET_DEBUG). */
  static const char *const env[] = {"CRNET_DEBUG=1", NULL};
  struct how how = {.env = env};
  struct run r;
  start(&r, &how, "-n", "2", "@RANK", "stubborn", NULL);
  wait_for_ranks(&r, 2, 5);
  kill(r.pid, SIGINT);
  /* The second SIGINT goes only once crlaunch has taken the first: two
   * sent back to back may arrive as one. */
  ck_assert_msg(stderr_says(&r, "got signal 2 ", 10),
                "crlaunch never said it got the first SIGINT");
  /* The ranks ignore SIGINT, so the job must still be there a while
   * later... */
  sleep_ms(300);
  ck_assert_msg(!try_reap(&r), "crlaunch exited after one SIGINT");
  pid_t pids[4];
  ck_assert_int_eq(rank_pids(&r, pids, 4), 2);
  ck_assert(alive(pids[0]) && alive(pids[1]));
  /* ...until the second one. */
  kill(r.pid, SIGINT);
  finish(&r, 2);
  expect_exit(&r, 128 + SIGINT);
  cleanup(&r);
}
END_TEST

START_TEST(test_output_reader_gone) {
  /* Like `crlaunch ... | head -1`: once nobody reads crlaunch's stdout, the
   * ranks must get SIGPIPE rather than run forever. */
  struct how how = {.pipe_out = 1};
  struct run r;
  start(&r, &how, "-n", "2", "@RANK", "yes", NULL);
  char buf[256];
  ck_assert(read(r.out_pipe, buf, sizeof buf) > 0);
  close(r.out_pipe);
  r.out_pipe = -1;
  finish(&r, 5);
  expect_exit(&r, 128 + SIGPIPE);
  expect_has("stderr", r.err, "killed by signal 13");
  cleanup(&r);
}
END_TEST

/* ---- usage ------------------------------------------------------------ */

static const char *const bad_usage[][8] = {
    {NULL},
    {"-n", NULL},
    {"-n", "0", "@RANK", NULL},
    {"-n", "-3", "@RANK", NULL},
    {"-n", "abc", "@RANK", NULL},
    {"-n", "2x", "@RANK", NULL},
    {"-n", "4097", "@RANK", NULL},
    {"-n", "2", NULL},
    {"@RANK", NULL},
    {"--bogus", "-n", "2", "@RANK", NULL},
    {"-n", "2", "--timeout", "abc", "@RANK", NULL},
    {"-n", "2", "--timeout", "0", "@RANK", NULL},
    {"-n", "2", "--timeout", NULL},
    {"-n", "2", "--grace", "0", "@RANK", NULL},
    {"-n", "2", "--grace", "soon", "@RANK", NULL},
    {"-n", "2", "--grace", "3601", "@RANK", NULL},
    {"-n", "2", "-x", "1BAD=2", "@RANK", NULL},
    {"-n", "2", "-x", "=2", "@RANK", NULL},
    {"-n", "2", "-x", "CRNET_RANK=1", "@RANK", NULL},
    {"-n", "2", "--bind", "core", "@RANK", NULL},
    {"-n", "2", "--bind", NULL},
    {"-np", NULL},
    {"-np", "x", "@RANK", NULL},
    {"-np0", "@RANK", NULL},
};
#define NBAD (int)(sizeof bad_usage / sizeof bad_usage[0])

START_TEST(test_bad_usage) {
  const char *const *a = bad_usage[_i];
  struct run r;
  start_argv(&r, NULL, a);
  finish(&r, 10);
  expect_exit(&r, 2);
  ck_assert_msg(r.out[0] == '\0', "usage error wrote to stdout: %s", r.out);
  ck_assert_msg(strncmp(r.err, "crlaunch: ", 10) == 0, "stderr: %s", r.err);
  expect_has("stderr", r.err, "crlaunch --help");
  ck_assert_msg(count_lines(r.err) == 2, "stderr:\n%s", r.err);
  pid_t pids[4];
  ck_assert_int_eq(rank_pids(&r, pids, 4), 0);
  cleanup(&r);
}
END_TEST

START_TEST(test_bad_init_timeout) {
  static const char *const env[] = {"CRNET_INIT_TIMEOUT=soon", NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "-n", "2", "@RANK", "hello", NULL);
  expect_exit(&r, 2);
  expect_has("stderr", r.err, "CRNET_INIT_TIMEOUT");
  cleanup(&r);
}
END_TEST

/* crlaunch serves the rendezvous with the ranks' CRNET_HANDSHAKE_TIMEOUT:
 * -x wins over the environment, as in the ranks, and a stranger (rank 0
 * connecting and saying nothing) is dropped at that deadline, not the
 * default 10 s. A bad value is refused with the library's message. */
START_TEST(test_handshake_timeout) {
  static const char *const env[] = {"CRNET_HANDSHAKE_TIMEOUT=30", NULL};
  struct how how = {.env = env};
  struct run r;
  double took = -1;
  run(&r, &how, 30, "-n", "2", "-x", "CRNET_HANDSHAKE_TIMEOUT=1", "@RANK",
      "silent", NULL);
  expect_exit(&r, 0);
  const char *p = strstr(r.out, "0 dropped after ");
  ck_assert_msg(p != NULL, "stdout:\n%s\nstderr:\n%s", r.out, r.err);
  took = atof(p + strlen("0 dropped after "));
  ck_assert_msg(took > 0.75 && took < 1 + test_seconds(3),
                "dropped after %.3f s with CRNET_HANDSHAKE_TIMEOUT=1", took);
  cleanup(&r);

  static const char *const bad_env[] = {"CRNET_HANDSHAKE_TIMEOUT=0", NULL};
  how.env = bad_env;
  run(&r, &how, 10, "-n", "2", "@RANK", "hello", NULL);
  expect_exit(&r, 2);
  expect_has("stderr", r.err,
             "CRNET_HANDSHAKE_TIMEOUT='0' is not a number of seconds from "
             "0.1 to 3600");
  cleanup(&r);
  run(&r, NULL, 10, "-n", "2", "-x", "CRNET_HANDSHAKE_TIMEOUT=abc", "@RANK",
      "hello", NULL);
  expect_exit(&r, 2);
  expect_has("stderr", r.err, "CRNET_HANDSHAKE_TIMEOUT='abc'");
  cleanup(&r);
}
END_TEST

START_TEST(test_help_version) {
  struct run r;
  run(&r, NULL, 10, "--help", NULL);
  expect_exit(&r, 0);
  ck_assert_msg(strncmp(r.out, "Usage: crlaunch -n N", 20) == 0, "help: %s",
                r.out);
  ck_assert_msg(r.err[0] == '\0', "stderr: %s", r.err);
  cleanup(&r);
  run(&r, NULL, 10, "--version", NULL);
  expect_exit(&r, 0);
  ck_assert_msg(strncmp(r.out, "crlaunch (crnet) ", 17) == 0 &&
                    r.out[17] >= '0' && r.out[17] <= '9',
                "version: %s", r.out);
  cleanup(&r);
}
END_TEST

/* ---- the job key ------------------------------------------------------ */

START_TEST(test_job_key) {
  struct run r;
  run(&r, NULL, 10, "-n", "2", "@RANK", "key", NULL);
  expect_exit(&r, 0);
  char keys[2][128];
  for (int i = 0; i < 2; i++) {
    char want[128];
    snprintf(want, sizeof want, "%d keyfile mode 600\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d keydir mode 700\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d CRNET_JOB_KEY unset\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d key length 64\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d key in own cmdline: 0\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d key in own environ: 0\n", i);
    expect_has("stdout", r.out, want);
    snprintf(want, sizeof want, "%d key in parent cmdline: 0\n", i);
    expect_has("stdout", r.out, want);

    char path[512], name[16];
    snprintf(name, sizeof name, "key.%d", i);
    path_in(path, sizeof path, &r, name);
    char *k = read_file(path);
    ck_assert_msg(sscanf(k, "%127s", keys[i]) == 1, "empty key");
    free(k);
    ck_assert_int_eq(strlen(keys[i]), 64);
  }
  ck_assert_str_eq(keys[0], keys[1]);
  ck_assert_msg(strstr(r.out, keys[0]) == NULL, "the key is in stdout");
  ck_assert_msg(strstr(r.err, keys[0]) == NULL, "the key is in stderr");

  /* The file and its directory are gone (finish() checked the directory
   * too, by name). */
  const char *p = strstr(r.out, "0 keyfile /");
  ck_assert(p != NULL);
  char keyfile[512];
  ck_assert(sscanf(p, "0 keyfile %511s", keyfile) == 1);
  struct stat st;
  ck_assert_msg(stat(keyfile, &st) != 0 && errno == ENOENT,
                "%s still exists", keyfile);
  *strrchr(keyfile, '/') = '\0';
  ck_assert_msg(stat(keyfile, &st) != 0 && errno == ENOENT,
                "%s still exists", keyfile);
  cleanup(&r);

  /* A fresh key for every job. */
  struct run r2;
  run(&r2, NULL, 10, "-n", "1", "@RANK", "key", NULL);
  expect_exit(&r2, 0);
  char path[512];
  path_in(path, sizeof path, &r2, "key.0");
  char *k = read_file(path);
  ck_assert_msg(strncmp(k, keys[0], 64) != 0, "the same key twice");
  free(k);
  cleanup(&r2);
}
END_TEST

START_TEST(test_silent_without_crnet) {
  /* Programs that never use crnet (crlaunch -n 4 hostname) leave the
   * rendezvous unvisited; that is not worth a word. */
  static const char *const env[] = {"CRNET_INIT_TIMEOUT=0.3", NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "-n", "3", "@RANK", "sleep", "1", NULL);
  expect_exit(&r, 0);
  ck_assert_msg(r.err[0] == '\0', "unexpected stderr: %s", r.err);
  cleanup(&r);
}
END_TEST

/* ---- with the crnet library ------------------------------------------- */

static const int init_sizes[] = {1, 2, 4, 5};

START_TEST(test_crnet_init) {
  int n = init_sizes[_i];
  char ns[16];
  snprintf(ns, sizeof ns, "%d", n);
  struct run r;
  run(&r, NULL, 20, "-n", ns, "@INIT", "ok", NULL);
  expect_exit(&r, 0);
  for (int i = 0; i < n; i++) {
    char want[64];
    snprintf(want, sizeof want, "rank %d ok\n", i);
    expect_has("stdout", r.out, want);
  }
  ck_assert_msg(r.err[0] == '\0', "unexpected stderr: %s", r.err);
  cleanup(&r);
}
END_TEST

START_TEST(test_crnet_rank_never_comes) {
  static const char *const env[] = {"CRNET_INIT_TIMEOUT=1", NULL};
  struct how how = {.env = env};
  struct run r;
  run(&r, &how, 10, "-n", "4", "@INIT", "skip", "2", NULL);
  ck_assert_msg(exit_status(&r) != 0, "exit 0 with a rank missing");
  ck_assert_msg(r.secs < test_seconds(4.5), "took %.2f s", r.secs);
  expect_has("stderr", r.err,
             "crlaunch: rank 2 never reached the rendezvous within 1 s");
  cleanup(&r);
}
END_TEST

START_TEST(test_crnet_rank_dies) {
  /* Rank 2 dies; the others find out in their allreduce 200 ms later, fail
   * on their own, and rank 2 is named as the cause. A grace of 10 s (not
   * the default 1 s, which a loaded machine under a sanitizer may need for
   * three ranks to print and exit) lets every rank say why; "on their own"
   * is the job's end well before the grace is over. */
  struct run r;
  run(&r, NULL, 20, "-n", "4", "--grace", "10", "@INIT", "die", "2", "5",
      "200", NULL);
  expect_exit(&r, 5);
  ck_assert_msg(r.secs < test_seconds(3), "took %.2f s", r.secs);
  expect_has("stderr", r.err, "crlaunch: rank 2 (pid ");
  expect_has("stderr", r.err, "exited with status 5");
  ck_assert_msg(count(r.err, "crlaunch: rank ") == 1, "stderr:\n%s", r.err);
  for (int i = 0; i < 4; i++) {
    char want[64];
    snprintf(want, sizeof want, "rank %d: allreduce: ", i);
    if (i != 2)
      expect_has("stderr", r.err, want);
  }
  ck_assert_msg(strstr(r.err, "stopped") == NULL,
                "the ranks did not fail on their own:\n%s", r.err);
  cleanup(&r);
}
END_TEST

START_TEST(test_crnet_cascade) {
  /* Rank 2 dies while the others wait for it: they fail within a
   * millisecond, and crlaunch often sees one of their exits before rank
   * 2's (see crnet__launch_judge_failures in crlaunch.c; without the ranks' reports of
   * whom they lost, half the runs named a victim). Rank 2 must be named,
   * with its status, every time; the loop runs it 10 times. */
  struct run r;
  run(&r, NULL, 10, "-n", "4", "@INIT", "die", "2", "5", NULL);
  expect_exit(&r, 5);
  ck_assert_msg(r.secs < test_seconds(3), "took %.2f s", r.secs);
  expect_has("stderr", r.err, "crlaunch: rank 2 (pid ");
  expect_has("stderr", r.err, "exited with status 5");
  ck_assert_msg(count(r.err, "crlaunch: rank ") == 1, "stderr:\n%s", r.err);
  cleanup(&r);
}
END_TEST

/* crnet_comm_abort(comm, code) on rank 2 decides crlaunch's exit status,
 * although the others fail because of it and exit (1, or 0) before rank 2,
 * which exits 0. A code whose low 8 bits are 0 gives 1. */
static const struct {
  const char *code;
  const char *others;
  int want;
} abort_cases[] = {{"7", "1", 7}, {"7", "0", 7}, {"300", "1", 44},
                   {"0", "0", 1}, {"-1", "3", 255}};

START_TEST(test_crnet_abort) {
  struct run r;
  /* Every other rank's line is awaited: a grace they surely print in. */
  run(&r, NULL, 20, "-n", "4", "--grace", "10", "@INIT", "abort", "2",
      abort_cases[_i].code, abort_cases[_i].others, NULL);
  expect_exit(&r, abort_cases[_i].want);
  ck_assert_msg(r.secs < test_seconds(6), "took %.2f s", r.secs);
  char want[80];
  snprintf(want, sizeof want, ") aborted the job with code %s\n",
           abort_cases[_i].code);
  expect_has("stderr", r.err, "crlaunch: rank 2 (pid ");
  expect_has("stderr", r.err, want);
  ck_assert_msg(count(r.err, "crlaunch: rank ") == 1, "stderr:\n%s", r.err);
  for (int i = 0; i < 4; i++) {
    snprintf(want, sizeof want, "rank %d: allreduce: CRNET_EABORTED (code %s)",
             i, abort_cases[_i].code);
    if (i != 2)
      expect_has("stderr", r.err, want);
  }
  cleanup(&r);
}
END_TEST

/* Every rank fails with the abort and its code, also where no link from
 * the aborting rank can carry it: at p = 16 the highest rank finishes init
 * (and aborts) while lower ranks still complete their handshakes with each
 * other, and a rank that then fails must tell a link that becomes ready
 * afterwards (without that, 4 runs in 10 had a rank fail with
 * "lost rank 12 ... closed its connection"); with lazy links most ranks
 * have no link to the aborting rank at all and hear it from crlaunch
 * (without that, 20 runs in 20 had ranks fail with CRNET_EPEER). */
static const char *const abort_p16_env[][3] = {
    {"-x", "CRNET_LAZY_LINKS=0"}, {"-x", "CRNET_LAZY_LINKS=1"}};

START_TEST(test_crnet_abort_p16) {
  struct run r;
  char want[80];
  const char *const *env = abort_p16_env[_i % 2];
  /* Fifteen lines are awaited from ranks that share two cores: a grace
   * they surely print in. */
  run(&r, NULL, 30, "-n", "16", "--grace", "15", env[0], env[1], "@INIT",
      "abort", "15", "7", "1", NULL);
  expect_exit(&r, 7);
  expect_has("stderr", r.err, "crlaunch: rank 15 (pid ");
  for (int i = 0; i < 15; i++) {
    snprintf(want, sizeof want, "rank %d: allreduce: CRNET_EABORTED (code 7)",
             i);
    expect_has("stderr", r.err, want);
  }
  cleanup(&r);
}
END_TEST

/* A rank that loses a peer says how that peer ended, from crlaunch's word
 * ("gone"), which it waits a moment for: with the full mesh and with lazy
 * links (the peer dead before any link to it), exited or killed. */
static const struct {
  const char *lazy, *mode, *target, *code, *ms;
  const char *how;
} lost_cases[] = {
    {"CRNET_LAZY_LINKS=0", "die", "2", "5", "0", "(rank 2 exited with status 5)"},
    {"CRNET_LAZY_LINKS=0", "kill", "2", "", "",
     "(rank 2 was killed by signal 9 (Killed))"},
    {"CRNET_LAZY_LINKS=1", "die", "5", "5", "100",
     "(rank 5 exited with status 5)"},
};

START_TEST(test_crnet_lost_rank_how) {
  struct run r;
  char lost[32];
  if (strcmp(lost_cases[_i].mode, "kill") == 0)
    run(&r, NULL, 10, "-n", "8", "-x", lost_cases[_i].lazy, "@INIT", "kill",
        lost_cases[_i].target, NULL);
  else
    run(&r, NULL, 10, "-n", "8", "-x", lost_cases[_i].lazy, "@INIT", "die",
        lost_cases[_i].target, lost_cases[_i].code, lost_cases[_i].ms, NULL);
  ck_assert_msg(r.secs < test_seconds(6), "took %.2f s", r.secs);
  snprintf(lost, sizeof lost, "lost rank %s ", lost_cases[_i].target);
  ck_assert_msg(count(r.err, lost) > 0, "nobody lost rank %s:\n%s",
                lost_cases[_i].target, r.err);
  /* Every line that names the loss says how the rank ended. */
  for (const char *p = r.err; (p = strstr(p, lost)) != NULL; p++) {
    const char *eol = strchr(p, '\n');
    const char *how = strstr(p, lost_cases[_i].how);
    ck_assert_msg(how != NULL && (eol == NULL || how < eol),
                  "a loss without \"%s\":\n%s", lost_cases[_i].how, r.err);
  }
  cleanup(&r);
}
END_TEST

/* What comes down the report socket is parsed as strictly as what goes
 * up: garbage, an abort by a rank outside the job and a cut-short "gone"
 * are logged and change nothing; a good abort line fails the rank's next
 * call with CRNET_EABORTED and the code, and the rank tells its peers. Each
 * rank gets a socket of its own standing in for crlaunch's, with the same
 * lines: rank 1 takes the abort in its own name for nothing new, and
 * hears of it from rank 0. */
START_TEST(test_crnet_lines_from_launcher) {
  static const char *const env0[] = {
      "LAUNCHER_INIT_FAKE_LAUNCHER=garbage|abort 99 1|gone 1 x|abort 1 9",
      NULL};
  struct how how = {.env = env0};
  struct run r;
  run(&r, &how, 10, "-n", "2", "@INIT", "abort", "99", "9", NULL);
  expect_exit(&r, 1);
  expect_has("stderr", r.err, "crnet[0]: ignored a line from crlaunch it does "
                              "not understand: \"garbage\"");
  expect_has("stderr", r.err, "crnet[0]: ignored a line from crlaunch it does "
                              "not understand: \"abort 99 1\"");
  expect_has("stderr", r.err, "crnet[0]: ignored a line from crlaunch it does "
                              "not understand: \"gone 1 x\"");
  expect_has("stderr", r.err, "rank 0: allreduce: CRNET_EABORTED (code 9): "
                              "rank 1 aborted the job with code 9");
  expect_has("stderr", r.err, "rank 1: allreduce: CRNET_EABORTED (code 9): "
                              "rank 1 aborted the job with code 9 (relayed by "
                              "rank 0)");
  cleanup(&r);
}
END_TEST

/* A wrapper that closes descriptor 3 (sudo does) takes the report socket
 * away, and the program puts a Unix socket of its own at that number: the
 * library must tell it from crlaunch's (CRNET_LAUNCHER_FD names the inode)
 * and never write to it. The abort still reaches every rank; crlaunch,
 * not told, reports the first rank that fails. */
START_TEST(test_crnet_abort_without_report) {
  static const char *const env[] = {"LAUNCHER_INIT_OWN_SOCKET=1", NULL};
  struct how how = {.env = env};
  struct run r;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "exec 3>&-; exec %s abort 2 7", init_prog);
  run(&r, &how, 10, "-n", "3", "sh", "-c", cmd, NULL);
  expect_exit(&r, 1);
  ck_assert_msg(r.secs < test_seconds(6), "took %.2f s", r.secs);
  expect_has("stderr", r.err, "rank 0: allreduce: CRNET_EABORTED (code 7)");
  expect_has("stderr", r.err, "rank 1: allreduce: CRNET_EABORTED (code 7)");
  ck_assert_msg(strstr(r.err, "aborted the job with code 7\n") == NULL ||
                    strstr(r.err, "crlaunch: rank 2") == NULL,
                "crlaunch heard of an abort it could not be told:\n%s",
                r.err);
  ck_assert_msg(strstr(r.err, "malformed") == NULL &&
                    strstr(r.err, "unexpected") == NULL &&
                    strstr(r.err, "its own socket") == NULL,
                "stderr:\n%s", r.err);
  cleanup(&r);
}
END_TEST

/* The report socket takes only well-formed lines about the rank itself:
 * garbage, another rank's abort or a stats line cut short are logged as
 * malformed and change nothing (the job still exits 0). */
START_TEST(test_malformed_reports) {
  struct run r;
  run(&r, NULL, 10, "-n", "2", "sh", "-c",
      "echo garbage >&3; echo \"abort 7 1\" >&3; echo \"stats 0 x 1\" >&3",
      NULL);
  expect_exit(&r, 0);
  expect_has("stderr", r.err, "crlaunch: rank 0 sent a malformed report (garbage)");
  expect_has("stderr", r.err, "crlaunch: rank 1 sent a malformed report (abort 7 1)");
  expect_has("stderr", r.err, "sent a malformed report (stats 0 x 1)");
  ck_assert_msg(strstr(r.err, "aborted") == NULL, "stderr:\n%s", r.err);
  cleanup(&r);
}
END_TEST

/* ---- binding: every rank gets CPUs of its own ------------------------ */

/* The CPUs a rank printed in `cpus` mode, as a mask; -1 if it said
 * nothing. */
static int rank_cpus(const char *out, int rank, cpu_set_t *set) {
  char want[32];
  const char *p;
  snprintf(want, sizeof want, "%d cpus=", rank);
  for (p = out; (p = strstr(p, want)) != NULL; p++)
    if (p == out || p[-1] == '\n')
      break;
  if (p == NULL)
    return -1;
  CPU_ZERO(set);
  p += strlen(want);
  while (*p >= '0' && *p <= '9') {
    CPU_SET(atoi(p), set);
    while (*p >= '0' && *p <= '9')
      p++;
    if (*p == ',')
      p++;
  }
  return 0;
}

/* n ranks under crlaunch `bind` (NULL: the default), with the test's own
 * mask `mine`: with auto, each rank's CPUs are some of mine, disjoint from
 * the others' while there are enough (block sizes within one of each
 * other), else one each with at most one rank more on any CPU than on
 * another; with none, all of mine. Every rank hears how many CPUs the
 * host's ranks share. */
static void check_binding(int n, const char *bind, const cpu_set_t *mine) {
  char ns[16], want[64];
  int ncpus = CPU_COUNT(mine), per_cpu[CPU_SETSIZE] = {0};
  int smallest = CPU_SETSIZE, largest = 0;
  cpu_set_t seen, set, both;
  struct run r;
  snprintf(ns, sizeof ns, "%d", n);
  if (bind != NULL)
    run(&r, NULL, 20, "-n", ns, "--bind", bind, "--report-bindings",
        "@RANK", "cpus", NULL);
  else
    run(&r, NULL, 20, "-n", ns, "--report-bindings", "@RANK", "cpus", NULL);
  expect_exit(&r, 0);
  CPU_ZERO(&seen);
  for (int i = 0; i < n; i++) {
    ck_assert_msg(rank_cpus(r.out, i, &set) == 0, "rank %d: no cpus line:\n%s",
                  i, r.out);
    CPU_AND(&both, &set, mine);
    ck_assert_msg(CPU_EQUAL(&both, &set) && CPU_COUNT(&set) > 0,
                  "rank %d has CPUs outside crlaunch's:\n%s", i, r.out);
    if (bind != NULL && strcmp(bind, "none") == 0) {
      ck_assert_msg(CPU_EQUAL(&set, mine), "rank %d bound under --bind none",
                    i);
      snprintf(want, sizeof want, "rank %d (pid", i);
      expect_has("stderr", r.err, want);
      continue;
    }
    snprintf(want, sizeof want, "rank %d (pid", i);
    expect_has("stderr", r.err, want);
    if (n <= ncpus) {
      CPU_AND(&both, &set, &seen);
      ck_assert_msg(CPU_COUNT(&both) == 0, "rank %d shares CPUs:\n%s", i,
                    r.out);
    } else {
      ck_assert_int_eq(CPU_COUNT(&set), 1);
    }
    CPU_OR(&seen, &seen, &set);
    smallest = CPU_COUNT(&set) < smallest ? CPU_COUNT(&set) : smallest;
    largest = CPU_COUNT(&set) > largest ? CPU_COUNT(&set) : largest;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
      per_cpu[cpu] += CPU_ISSET(cpu, &set);
  }
  if (bind == NULL || strcmp(bind, "none") != 0) {
    expect_has("stderr", r.err, "bound to CPUs");
    ck_assert_msg(largest - smallest <= 1, "blocks of %d and %d CPUs",
                  smallest, largest);
    if (n > ncpus) {
      int lo = n, hi = 0;
      for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, mine)) {
          lo = per_cpu[cpu] < lo ? per_cpu[cpu] : lo;
          hi = per_cpu[cpu] > hi ? per_cpu[cpu] : hi;
        }
      ck_assert_msg(hi - lo <= 1, "%d to %d ranks on a CPU", lo, hi);
    }
  }
  cleanup(&r);
  run(&r, NULL, 20, "-n", "1", "@RANK", "env", "CRNET_HOST_CPUS", NULL);
  expect_exit(&r, 0);
  snprintf(want, sizeof want, "0 CRNET_HOST_CPUS=%d\n", ncpus);
  expect_has("stdout", r.out, want);
  cleanup(&r);
}

START_TEST(test_bind) {
  cpu_set_t mine;
  ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
  int ncpus = CPU_COUNT(&mine);
  check_binding(1, NULL, &mine);
  check_binding(ncpus, NULL, &mine);
  check_binding(ncpus + 1, "auto", &mine);
  check_binding(2 * ncpus + 1, NULL, &mine);
  check_binding(2, "none", &mine);
}
END_TEST

/* crlaunch shares out the CPUs it may use, not the machine's: under a
 * mask of one CPU, every rank gets that CPU, and hears of one. */
START_TEST(test_bind_within_mask) {
  cpu_set_t mine, one;
  ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
  CPU_ZERO(&one);
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--)
    if (CPU_ISSET(cpu, &mine)) {
      CPU_SET(cpu, &one); /* the last of ours */
      break;
    }
  /* check's fork mode: the mask dies with this test's process. */
  ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
  check_binding(3, NULL, &one);
}
END_TEST

static Suite *launcher_suite(void) {
  Suite *s = suite_create("launcher");
  TCase *tc = tcase_create("run");
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_hello, 0,
                      (int)(sizeof hello_sizes / sizeof hello_sizes[0]));
  tcase_add_test(tc, test_env_contract);
  tcase_add_test(tc, test_mpirun_spellings);
  tcase_add_test(tc, test_tag_output);
  tcase_add_loop_test(tc, test_long_output, 0, 2);
  tcase_add_test(tc, test_stdin_rank0_only);
  tcase_add_test(tc, test_x_vars);
  tcase_add_test(tc, test_job_key);
  tcase_add_test(tc, test_silent_without_crnet);
  tcase_add_test(tc, test_bind);
  tcase_add_test(tc, test_bind_within_mask);
  suite_add_tcase(s, tc);

  tc = tcase_create("stop");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_rank_exit_status);
  tcase_add_test(tc, test_rank_exit_grace);
  tcase_add_test(tc, test_rank_killed);
  tcase_add_test(tc, test_missing_program);
  tcase_add_test(tc, test_timeout);
  tcase_add_test(tc, test_sigterm_stops_ranks);
  tcase_add_test(tc, test_second_sigint_kills);
  tcase_add_test(tc, test_output_reader_gone);
  suite_add_tcase(s, tc);

  tc = tcase_create("usage");
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_bad_usage, 0, NBAD);
  tcase_add_test(tc, test_bad_init_timeout);
  tcase_add_test(tc, test_handshake_timeout);
  tcase_add_test(tc, test_help_version);
  tcase_add_test(tc, test_settings);
  suite_add_tcase(s, tc);

  tc = tcase_create("crnet");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_crnet_init, 0,
                      (int)(sizeof init_sizes / sizeof init_sizes[0]));
  tcase_add_test(tc, test_crnet_rank_never_comes);
  tcase_add_test(tc, test_crnet_rank_dies);
  tcase_add_loop_test(tc, test_crnet_cascade, 0, 10);
  tcase_add_loop_test(tc, test_crnet_abort, 0,
                      (int)(sizeof abort_cases / sizeof abort_cases[0]));
  tcase_add_loop_test(tc, test_crnet_lost_rank_how, 0,
                      (int)(sizeof lost_cases / sizeof lost_cases[0]));
  tcase_add_test(tc, test_crnet_lines_from_launcher);
  tcase_add_test(tc, test_crnet_abort_without_report);
  tcase_add_test(tc, test_malformed_reports);
  suite_add_tcase(s, tc);

  /* Jobs of 16 ranks: meson runs this case as its own test, in the plain
   * pass only (suite `large`), and leaves it out of the test `launcher` by
   * its tag (CK_EXCLUDE_TAGS; Check has no variable that leaves out a case
   * by name). */
  tc = tcase_create("large");
  tcase_set_tags(tc, "large");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_crnet_abort_p16, 0, 6);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  crlaunch = getenv("CRLAUNCH");
  const char *progs = getenv("CRNET_TEST_PROGS");
  if (crlaunch == NULL || progs == NULL) {
    fprintf(stderr, "test_launcher: set CRLAUNCH and CRNET_TEST_PROGS "
                    "(meson test does)\n");
    return 1;
  }
  snprintf(rank_prog, sizeof rank_prog, "%s/launcher_rank", progs);
  snprintf(init_prog, sizeof init_prog, "%s/launcher_init", progs);
  if (access(crlaunch, X_OK) != 0 || access(rank_prog, X_OK) != 0 ||
      access(init_prog, X_OK) != 0) {
    fprintf(stderr, "test_launcher: %s, %s or %s is missing\n", crlaunch,
            rank_prog, init_prog);
    return 1;
  }
  return check_run(launcher_suite());
}
