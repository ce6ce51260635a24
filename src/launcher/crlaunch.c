/* crlaunch: starts the N ranks of a crnet job on this host.
 *
 *   crlaunch -n N [--tag-output] [--timeout SEC] [-x VAR[=VAL]]... [--] prog
 *
 * crlaunch does for a crnet program what mpirun does for an MPI program: it
 * starts N copies, gives each its rank, lets them find each other, forwards
 * their output, and turns their fates into one exit status. It speaks to the
 * library only through the environment contract of crnet.h; it links the
 * internal library just for the rendezvous server, keys and logging.
 *
 * Lifecycle of a job, everything on one libuv loop (no threads, no polling):
 *
 *   1. Signal watchers (SIGINT, SIGTERM, SIGHUP) start first, so that from
 *      here on every way out runs the cleanup below.
 *   2. A fresh job key is written, in hex, to a 0600 file in a private 0700
 *      directory; the ranks get its path in CRNET_JOB_KEY_FILE. The key is
 *      never on a command line, in the environment or in our output.
 *   3. The rendezvous server listens on 127.0.0.1, port chosen by the
 *      kernel, with its own copy of the key; ours is wiped. When every rank
 *      has registered, every rank has read the key, so the key file is
 *      removed at once rather than at exit.
 *   4. The ranks are spawned with CRNET_RANK, CRNET_SIZE, CRNET_RENDEZVOUS,
 *      CRNET_JOB_KEY_FILE, CRNET_INIT_TIMEOUT and CRNET_LAUNCHER=crlaunch
 *      (which tells rank 0 not to serve the rendezvous itself) added to our
 *      environment, plus the -x settings. Rank 0 shares our stdin; the others
 *      read /dev/null. stdout and stderr come back through pipes and are
 *      forwarded line by line (forward.c).
 *   5. The job then ends in one of these ways; the first one decides:
 *        - every rank exits 0;
 *        - a rank fails (non-zero status or a signal): it is named in one
 *          line (of failures at the same moment, the one that went first;
 *          see judge_failures), the others get 1 s to notice and print
 *          their own error, then SIGTERM, then SIGKILL 2 s later;
 *        - the program cannot be started for some rank: the ranks already
 *          started get SIGTERM at once, then SIGKILL 2 s later;
 *        - --timeout expires: SIGTERM to every rank, SIGKILL 2 s later;
 *        - we get SIGINT, SIGTERM or SIGHUP: it is passed on to every rank;
 *          a second one, or 10 s without the ranks gone, sends SIGKILL.
 *   6. When every rank has exited and every pipe is read to EOF (or, 1 s
 *      after the last exit, drained of what the ranks wrote, since a process
 *      a rank left behind may hold it open forever), every handle is closed,
 *      the loop runs dry, and the key file and directory are removed.
 *
 * Exit status:
 *   0        every rank exited 0
 *   s        the first failing rank exited with status s
 *   128+k    the first failing rank was killed by signal k, or crlaunch itself
 *            got signal k (and passed it on) before any rank failed
 *   124      --timeout expired
 *   125      crlaunch itself failed (no temporary directory, no rendezvous)
 *   127      the program could not be started
 *   2        bad usage
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "crnet.h"
#include "crnet_version.h"
#include "forward.h"
#include "handshake.h"
#include "log.h"
#include "rendezvous.h"

#define MAX_RANKS 4096
#define DEFAULT_INIT_TIMEOUT "60"
/* The library accepts an init timeout up to 10^6 s; --timeout is bounded so
 * that its milliseconds fit a uint64_t with room to spare. */
#define MAX_INIT_TIMEOUT_S 1e6
#define MAX_TIMEOUT_S 1e9

/* Grace periods, in milliseconds. */
#define FAILURE_GRACE_MS 1000 /* for the others to print why they fail */
#define KILL_GRACE_MS 2000    /* between SIGTERM and SIGKILL */
#define SIGNAL_GRACE_MS 10000 /* between a passed-on signal and SIGKILL */
#define DRAIN_MS 1000         /* after the last exit, for pipes to reach EOF */
#define SETTLE_MS 100         /* for the reaping of simultaneous failures */

#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_INTERNAL 125
#define EXIT_NOT_STARTED 127

extern char **environ;

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSIGNALS (sizeof forwarded_signals / sizeof forwarded_signals[0])

/* Variables crlaunch sets itself; -x may not override them. */
static const char *const reserved_vars[] = {
    "CRNET_RANK",         "CRNET_SIZE",     "CRNET_RENDEZVOUS", "CRNET_JOB_KEY",
    "CRNET_JOB_KEY_FILE", "CRNET_LAUNCHER", NULL};

struct options {
  int nranks;
  int tag_output;
  double timeout_s; /* 0: none */
  const char **xvars; /* -x arguments as given */
  int nxvars;
  char **argv;        /* the program and its arguments */
  const char *init_timeout_str;
  double init_timeout_s;
};

struct job;

struct rank {
  struct job *job;
  int index;
  int pid;
  int live;     /* spawned and not yet reaped */
  int failed;   /* reaped with a non-zero status or by a signal */
  int gone_seq; /* when it was first seen going (see judge_failures) */
  int64_t status;
  int term_signal;
  uv_process_t proc;
  crnet__fwd_stream out;
  crnet__fwd_stream err;
};

enum stop_reason {
  RUNNING = 0,
  STOP_FAILURE, /* a rank failed */
  STOP_TIMEOUT, /* --timeout */
  STOP_SIGNAL,  /* crlaunch got a signal */
  STOP_ERROR,   /* crlaunch could not start the job */
};

struct job {
  uv_loop_t loop;
  const struct options *opt;
  struct rank *ranks; /* opt->nranks of them */
  int nlive;          /* ranks spawned and not yet reaped */
  int nstreams;       /* forwarding streams not yet closed */
  int ngone;          /* the last gone_seq given */
  crnet__rdv_server *rdv;
  uv_signal_t signals[NSIGNALS];
  uv_timer_t timeout_timer;
  uv_timer_t stop_timer; /* grace, then SIGTERM, then SIGKILL */
  uv_timer_t drain_timer;
  uv_timer_t judge_timer; /* settling before naming the first failure */
  int judging;            /* a failure is reaped, the verdict is pending */
  enum stop_reason stop;
  int exit_code;
  int nsignals;  /* signals received */
  int nstopped;  /* ranks we sent SIGTERM after a failure */
  int finishing; /* handles are being closed */
  char **env;    /* the ranks' environment; env[rank_slot] is CRNET_RANK */
  int env_owned; /* env[env_owned..rank_slot) are ours to free */
  int rank_slot;
  char dir[512];     /* private directory, "" once removed */
  char keyfile[600]; /* key file in it, "" once removed */
  crnet__fwd_sink out;
  crnet__fwd_sink err;
};

/* ---- command line ---------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "Usage: crlaunch -n N [options] [--] program [args...]\n"
          "\n"
          "Starts N ranks of a crnet program on this host, serves their\n"
          "rendezvous and forwards their output line by line.\n"
          "\n"
          "Options:\n"
          "  -n N            number of ranks to start (1..%d)\n"
          "  --tag-output    prefix every line of output with \"[rank] \"\n"
          "  --timeout SEC   stop the job after SEC seconds (exit status 124)\n"
          "  -x VAR[=VAL]    set VAR to VAL in the ranks' environment, or pass\n"
          "                  crlaunch's own value of VAR (repeatable)\n"
          "  -h, --help      print this help and exit\n"
          "  -V, --version   print the version and exit\n"
          "\n"
          "Exit status: 0 if every rank exits 0; else the status of the first\n"
          "rank that failed (128+signal if it was killed); 124 on --timeout;\n"
          "128+signal if crlaunch was interrupted; 127 if the program cannot\n"
          "be started; 125 if crlaunch itself fails; 2 for bad usage.\n"
          "See crlaunch(1).\n",
          MAX_RANKS);
}

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "crlaunch: %s\nTry 'crlaunch --help' for more information.\n",
          msg);
  return EXIT_USAGE;
}

/* A positive number of seconds up to max (fractions allowed), or -1. */
static double parse_seconds(const char *s, double max) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0 || !(v > 0) || v > max)
    return -1;
  return v;
}

static int var_name_len(const char *s) {
  return (int)strcspn(s, "=");
}

/* "NAME=..." or "NAME" names `name`. */
static int names_var(const char *entry, const char *name, size_t len) {
  return strncmp(entry, name, len) == 0 &&
         (entry[len] == '=' || entry[len] == '\0');
}

static int check_xvar(const char *x) {
  int len = var_name_len(x);
  if (len == 0)
    return usage_error("-x '%s': no variable name", x);
  for (int i = 0; i < len; i++) {
    char c = x[i];
    int ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
             (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return usage_error("-x '%s': '%.*s' is not a variable name", x, len, x);
  }
  for (const char *const *r = reserved_vars; *r != NULL; r++)
    if (names_var(x, *r, (size_t)len) && strlen(*r) == (size_t)len)
      return usage_error("-x %.*s: crlaunch sets this variable itself", len,
                         x);
  return 0;
}

/* Fills opt. Returns -1 to go on, or the exit status to stop with. */
static int parse_options(struct options *opt, int argc, char **argv) {
  enum { OPT_TAG = 256, OPT_TIMEOUT };
  static const struct option longopts[] = {
      {"tag-output", no_argument, NULL, OPT_TAG},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  memset(opt, 0, sizeof *opt);
  opt->nranks = -1;
  opt->xvars = calloc((size_t)argc, sizeof *opt->xvars);
  if (opt->xvars == NULL) {
    fprintf(stderr, "crlaunch: out of memory\n");
    return EXIT_INTERNAL;
  }
  /* "+": options end at the program's name, whose own options are its own.
   * ":": report a missing argument apart from an unknown option. */
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "+:n:x:hV", longopts, NULL)) != -1) {
    const char *given = argv[optind - 1];
    switch (c) {
    case 'n': {
      char *end;
      errno = 0;
      long n = strtol(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || errno != 0 ||
          n < 1 || n > MAX_RANKS)
        return usage_error("-n '%s': the number of ranks must be 1..%d",
                           optarg, MAX_RANKS);
      opt->nranks = (int)n;
      break;
    }
    case 'x':
      if (check_xvar(optarg) != 0)
        return EXIT_USAGE;
      opt->xvars[opt->nxvars++] = optarg;
      break;
    case OPT_TAG:
      opt->tag_output = 1;
      break;
    case OPT_TIMEOUT:
      opt->timeout_s = parse_seconds(optarg, MAX_TIMEOUT_S);
      if (opt->timeout_s < 0)
        return usage_error("--timeout '%s': not a positive number of seconds",
                           optarg);
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("crlaunch (crnet) %s\n", CRNET_VERSION_STRING);
      return 0;
    case ':':
      return usage_error("option %s needs an argument", given);
    default:
      if (optopt != 0)
        return usage_error("unknown option -%c", optopt);
      return usage_error("unknown option %s", given);
    }
  }
  if (opt->nranks < 0)
    return usage_error("missing -n N, the number of ranks");
  if (optind >= argc)
    return usage_error("no program to run");
  opt->argv = argv + optind;

  /* An -x setting of CRNET_INIT_TIMEOUT is what the ranks will see, so the
   * rendezvous server must use it too. */
  opt->init_timeout_str = getenv("CRNET_INIT_TIMEOUT");
  for (int i = 0; i < opt->nxvars; i++)
    if (names_var(opt->xvars[i], "CRNET_INIT_TIMEOUT", 18) &&
        opt->xvars[i][18] == '=')
      opt->init_timeout_str = opt->xvars[i] + 19;
  if (opt->init_timeout_str == NULL || opt->init_timeout_str[0] == '\0')
    opt->init_timeout_str = DEFAULT_INIT_TIMEOUT;
  opt->init_timeout_s =
      parse_seconds(opt->init_timeout_str, MAX_INIT_TIMEOUT_S);
  if (opt->init_timeout_s < 0)
    return usage_error("CRNET_INIT_TIMEOUT='%s': not a positive number of "
                       "seconds",
                       opt->init_timeout_str);
  return -1;
}

/* ---- process setup --------------------------------------------------- */

/* With fd 0, 1 or 2 closed, the first pipe we make would take its number,
 * and the ranks' output would be written back into their own pipe. */
static void ensure_std_fds(void) {
  int fd;
  while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
    ;
  if (fd > 2)
    close(fd);
}

/* A job holds two pipe ends per rank and briefly one rendezvous connection
 * per rank; the usual soft limit of 1024 descriptors would stop a job of a
 * few hundred ranks, so raise it as far as the job needs and the hard limit
 * allows. The ranks inherit the raised limit, which their full mesh of links
 * needs just as much. */
static void raise_fd_limit(int nranks) {
  struct rlimit rl;
  rlim_t need = (rlim_t)nranks * 3 + 64;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
    return;
  rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need
                    ? rl.rlim_max
                    : need;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    crnet__debug("cannot raise the descriptor limit: %s", strerror(errno));
}

/* ---- the key file ---------------------------------------------------- */

static void remove_key_file(struct job *job) {
  if (job->keyfile[0] != '\0' && unlink(job->keyfile) != 0)
    crnet__log("cannot remove %s: %s", job->keyfile, strerror(errno));
  job->keyfile[0] = '\0';
  if (job->dir[0] != '\0' && rmdir(job->dir) != 0)
    crnet__log("cannot remove %s: %s", job->dir, strerror(errno));
  job->dir[0] = '\0';
}

/* Makes the private directory and writes the key into it. 0 or -1 (said). */
static int write_key_file(struct job *job, const uint8_t key[CRNET__KEY_BYTES]) {
  char line[2 * CRNET__KEY_BYTES + 1];
  int fd = -1;
  int rc = -1;
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0')
    tmp = "/tmp";
  char templ[sizeof job->dir];
  if ((size_t)snprintf(templ, sizeof templ, "%s/crlaunch-XXXXXX", tmp) >=
      sizeof templ) {
    crnet__log("TMPDIR is too long: %s", tmp);
    goto out;
  }
  if (mkdtemp(templ) == NULL) {
    crnet__log("cannot create a private directory in %s: %s", tmp,
               strerror(errno));
    goto out;
  }
  /* Ranks may change directory before they read the file, so its path must
   * not depend on ours. */
  char *abs = realpath(templ, NULL);
  if (abs == NULL || strlen(abs) + sizeof "/job.key" > sizeof job->dir) {
    crnet__log("cannot resolve %s", templ);
    free(abs);
    rmdir(templ);
    goto out;
  }
  snprintf(job->dir, sizeof job->dir, "%s", abs);
  snprintf(job->keyfile, sizeof job->keyfile, "%s/job.key", abs);
  free(abs);

  fd = open(job->keyfile, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
            0600);
  if (fd < 0) {
    crnet__log("cannot create %s: %s", job->keyfile, strerror(errno));
    job->keyfile[0] = '\0';
    goto out;
  }
  /* The umask may have taken the owner's bits away; the ranks must read it. */
  crnet__key_to_hex(key, line);
  line[2 * CRNET__KEY_BYTES] = '\n';
  if (fchmod(fd, 0600) != 0 ||
      write(fd, line, sizeof line) != (ssize_t)sizeof line) {
    crnet__log("cannot write %s: %s", job->keyfile, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  crnet__wipe(line, sizeof line);
  if (fd >= 0 && close(fd) != 0 && rc == 0) {
    crnet__log("cannot write %s: %s", job->keyfile, strerror(errno));
    rc = -1;
  }
  return rc;
}

/* ---- the ranks' environment ------------------------------------------ */

static int skip_inherited(const struct options *opt, const char *entry) {
  for (const char *const *r = reserved_vars; *r != NULL; r++)
    if (names_var(entry, *r, strlen(*r)))
      return 1;
  if (names_var(entry, "CRNET_INIT_TIMEOUT", 18))
    return 1;
  for (int i = 0; i < opt->nxvars; i++)
    if (names_var(entry, opt->xvars[i], (size_t)var_name_len(opt->xvars[i])))
      return 1;
  return 0;
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* Our environment minus what we set, plus CRNET_* and -x; the last slot
 * before the NULL is filled with CRNET_RANK per rank. 0 or -1 (said). */
static int build_env(struct job *job, int port) {
  const struct options *opt = job->opt;
  int n = 0;
  while (environ[n] != NULL)
    n++;
  job->env = calloc((size_t)(n + opt->nxvars + 8), sizeof *job->env);
  if (job->env == NULL)
    goto nomem;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!skip_inherited(opt, environ[i]))
      job->env[k++] = environ[i];
  job->env_owned = k;
  job->rank_slot = k; /* grows as entries are added, for free_env */
  char *add[5];
  add[0] = str_printf("CRNET_SIZE=%d", opt->nranks);
  add[1] = str_printf("CRNET_RENDEZVOUS=127.0.0.1:%d", port);
  add[2] = str_printf("CRNET_JOB_KEY_FILE=%s", job->keyfile);
  add[3] = str_printf("CRNET_LAUNCHER=crlaunch");
  add[4] = str_printf("CRNET_INIT_TIMEOUT=%s", opt->init_timeout_str);
  for (int i = 0; i < 5; i++)
    job->env[job->rank_slot++] = add[i];
  for (int i = 0; i < 5; i++)
    if (add[i] == NULL)
      goto nomem;
  for (int i = 0; i < opt->nxvars; i++) {
    const char *x = opt->xvars[i];
    int len = var_name_len(x);
    if (names_var(x, "CRNET_INIT_TIMEOUT", 18))
      continue;
    char *entry;
    if (x[len] == '=') {
      entry = strdup(x);
    } else {
      const char *val = getenv(x);
      if (val == NULL) {
        crnet__log("-x %s: not set in crlaunch's environment, not passed", x);
        continue;
      }
      entry = str_printf("%s=%s", x, val);
    }
    if (entry == NULL)
      goto nomem;
    job->env[job->rank_slot++] = entry;
  }
  return 0;
nomem:
  crnet__log("out of memory");
  return -1;
}

static void free_env(struct job *job) {
  if (job->env == NULL)
    return;
  for (int i = job->env_owned; i < job->rank_slot; i++)
    free(job->env[i]);
  free(job->env);
  job->env = NULL;
}

/* ---- stopping -------------------------------------------------------- */

static const char *plural(int n) {
  return n == 1 ? "" : "s";
}

static void rdv_close(struct job *job) {
  crnet__rdv_server *srv = job->rdv;
  if (srv == NULL)
    return;
  /* Cleared first so that a done callback run from inside the close is
   * recognised as stale. */
  job->rdv = NULL;
  crnet__rdv_server_close(srv);
}

/* Sends sig to every rank not yet reaped; returns how many. A rank that has
 * exited but is not reaped yet is a zombie whose pid cannot be reused, so
 * this never hits a stranger. */
static int signal_live(struct job *job, int sig) {
  int n = 0;
  for (int i = 0; i < job->opt->nranks; i++) {
    struct rank *r = &job->ranks[i];
    if (!r->live)
      continue;
    int err = uv_process_kill(&r->proc, sig);
    if (err == 0)
      n++;
    else if (err != UV_ESRCH)
      crnet__log("cannot signal rank %d (pid %d): %s", i, r->pid,
                 uv_strerror(err));
  }
  return n;
}

static void on_kill_time(uv_timer_t *t) {
  struct job *job = t->data;
  int n = signal_live(job, SIGKILL);
  if (n > 0)
    crnet__log("killing %d rank%s that did not stop", n, plural(n));
}

static void terminate(struct job *job) {
  job->nstopped += signal_live(job, SIGTERM);
  uv_timer_start(&job->stop_timer, on_kill_time, KILL_GRACE_MS, 0);
}

static void on_grace_over(uv_timer_t *t) {
  terminate(t->data);
}

/* Begins stopping the job; the first reason sets the exit status. For
 * STOP_SIGNAL the caller has already passed the signal on. */
static void job_stop(struct job *job, enum stop_reason reason, int exit_code) {
  if (job->stop != RUNNING)
    return;
  job->stop = reason;
  job->exit_code = exit_code;
  uv_timer_stop(&job->timeout_timer);
  /* Ranks still waiting at the rendezvous learn at once that the job is
   * over instead of at the init timeout. */
  rdv_close(job);
  if (job->nlive == 0)
    return;
  switch (reason) {
  case STOP_FAILURE:
    uv_timer_start(&job->stop_timer, on_grace_over, FAILURE_GRACE_MS, 0);
    break;
  case STOP_SIGNAL:
    uv_timer_start(&job->stop_timer, on_kill_time, SIGNAL_GRACE_MS, 0);
    break;
  case STOP_TIMEOUT:
  case STOP_ERROR:
    terminate(job);
    break;
  case RUNNING:
    assert(0);
  }
}

static void judge_failures(struct job *job);

/* Once every rank is reaped and every stream closed: close the remaining
 * handles so that uv_run returns. */
static void maybe_finish(struct job *job) {
  if (job->finishing || job->nlive > 0 || job->nstreams > 0)
    return;
  /* Nothing is left to arrive that could change the verdict. */
  judge_failures(job);
  job->finishing = 1;
  /* From here on a signal would find no watcher and kill us before the key
   * file is gone; blocked, it stays pending and is dropped at exit. */
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < NSIGNALS; i++)
    sigaddset(&set, forwarded_signals[i]);
  sigprocmask(SIG_BLOCK, &set, NULL);

  rdv_close(job);
  if ((job->stop == STOP_FAILURE || job->stop == STOP_ERROR) &&
      job->nstopped > 0)
    crnet__log("stopped %d other rank%s", job->nstopped,
               plural(job->nstopped));
  for (size_t i = 0; i < NSIGNALS; i++)
    uv_close((uv_handle_t *)&job->signals[i], NULL);
  uv_close((uv_handle_t *)&job->timeout_timer, NULL);
  uv_close((uv_handle_t *)&job->stop_timer, NULL);
  uv_close((uv_handle_t *)&job->drain_timer, NULL);
  uv_close((uv_handle_t *)&job->judge_timer, NULL);
}

/* ---- callbacks ------------------------------------------------------- */

/* "3", "3, 5", "3-7, 9", cut short with ", ..." when buf runs out. */
static void format_ranks(char *buf, size_t size, const int *ranks, int n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
      j++;
    char item[32];
    if (j > i + 1)
      snprintf(item, sizeof item, "%s%d-%d", i > 0 ? ", " : "", ranks[i],
               ranks[j]);
    else if (j == i + 1)
      snprintf(item, sizeof item, "%s%d, %d", i > 0 ? ", " : "", ranks[i],
               ranks[j]);
    else
      snprintf(item, sizeof item, "%s%d", i > 0 ? ", " : "", ranks[i]);
    if (len + strlen(item) + sizeof ", ..." > size) {
      snprintf(buf + len, size - len, ", ...");
      return;
    }
    len += (size_t)snprintf(buf + len, size - len, "%s", item);
    i = j + 1;
  }
}

static void on_rdv_done(crnet__rdv_server *srv, int status, const int *missing,
                        int nmissing, void *arg) {
  struct job *job = arg;
  if (job->rdv != srv)
    return;
  if (status == 0) {
    crnet__debug("every rank reached the rendezvous");
    /* Each rank has read the key file to get this far; the fewer moments
     * the key spends on disk the better. */
    remove_key_file(job);
  } else if (status == CRNET_ETIMEDOUT && nmissing > 0 &&
             nmissing < job->opt->nranks) {
    /* The ranks that did register get an error from the server and fail on
     * their own; this line says who kept them waiting. */
    char list[400];
    format_ranks(list, sizeof list, missing, nmissing);
    crnet__log("rank%s %s never reached the rendezvous within %g s",
               plural(nmissing), list, job->opt->init_timeout_s);
  } else if (status == CRNET_ETIMEDOUT) {
    /* No rank ever came: the program does not use crnet (crlaunch -n 4
     * hostname), which is fine. */
    crnet__debug("no rank used the rendezvous");
  } else {
    crnet__log("the rendezvous failed: %s", crnet_strerror(status));
  }
  rdv_close(job);
}

static void on_drain_time(uv_timer_t *t) {
  struct job *job = t->data;
  crnet__debug("a process the ranks left behind holds their output open; "
               "not waiting for it");
  for (int i = 0; i < job->opt->nranks; i++) {
    crnet__fwd_drain(&job->ranks[i].out);
    crnet__fwd_drain(&job->ranks[i].err);
  }
}

/* ---- who failed first ------------------------------------------------ */

/* The first rank to fail is the cause: crlaunch names it and exits with its
 * status. The others usually fail because of it, and crnet makes them fail
 * within a millisecond, so the order matters and is easy to get wrong. libuv
 * reaps every child that has exited in one pass over its process list and
 * reports them in list order, whatever order they died in. So a rank's
 * gone_seq is taken at the first sign of its going, EOF on its stdout or
 * stderr (epoll reports readiness in the order it happened), else its
 * reaping; once a failure is reaped, the verdict waits SETTLE_MS for the
 * other failures of the moment to be reaped as well, then names the failed
 * rank that went first.
 *
 * This is the best an observer can do, and not always right: a dying
 * process releases its sockets and pipes in an order of the kernel's
 * choosing (recent kernels: the highest descriptor first, so its crnet
 * sockets before its stdout), and a peer woken by the socket may fail and
 * exit before the dying process gets the CPU back. Then the peer is named.
 * Exact blame needs the ranks to tell crlaunch whom they lost. */

static void mark_gone(struct rank *r) {
  if (r->gone_seq == 0)
    r->gone_seq = ++r->job->ngone;
}

/* Names the first failure and stops the job, if a verdict is pending. Called
 * when the settling time is over, and early when something else is about
 * to decide the job's fate (a signal, the timeout, the end). */
static void judge_failures(struct job *job) {
  if (!job->judging)
    return;
  job->judging = 0;
  uv_timer_stop(&job->judge_timer);
  struct rank *first = NULL;
  for (int i = 0; i < job->opt->nranks; i++) {
    struct rank *r = &job->ranks[i];
    if (r->failed && (first == NULL || r->gone_seq < first->gone_seq))
      first = r;
  }
  assert(first != NULL && job->stop == RUNNING);
  if (first->term_signal != 0)
    crnet__log("rank %d (pid %d) was killed by signal %d (%s)", first->index,
               first->pid, first->term_signal, strsignal(first->term_signal));
  else
    crnet__log("rank %d (pid %d) exited with status %d", first->index,
               first->pid, (int)first->status);
  job_stop(job, STOP_FAILURE,
           first->term_signal != 0 ? 128 + first->term_signal
                                   : (int)first->status);
}

static void on_settled(uv_timer_t *t) {
  judge_failures(t->data);
}

static void on_rank_exit(uv_process_t *proc, int64_t status, int term_signal) {
  struct rank *r = proc->data;
  struct job *job = r->job;
  r->live = 0;
  r->status = status;
  r->term_signal = term_signal;
  mark_gone(r);
  job->nlive--;
  uv_close((uv_handle_t *)proc, NULL);
  if (status != 0 || term_signal != 0) {
    r->failed = 1;
    if (job->stop == RUNNING && !job->judging) {
      job->judging = 1;
      uv_timer_start(&job->judge_timer, on_settled, SETTLE_MS, 0);
    }
    /* Failures after the verdict are most likely its consequences, or our
     * stopping the job; the ranks say why themselves. */
    crnet__debug("rank %d (pid %d) ended with status %d, signal %d",
                 r->index, r->pid, (int)status, term_signal);
  }
  if (job->nlive > 0)
    return;
  uv_timer_stop(&job->timeout_timer);
  uv_timer_stop(&job->stop_timer);
  /* A program that never uses crnet leaves the server waiting; nobody is
   * left to come. */
  rdv_close(job);
  if (job->nstreams > 0)
    uv_timer_start(&job->drain_timer, on_drain_time, DRAIN_MS, 0);
  maybe_finish(job);
}

static void on_stream_eof(crnet__fwd_stream *s, void *arg) {
  (void)s;
  mark_gone(arg);
}

static void on_stream_closed(crnet__fwd_stream *s, void *arg) {
  struct job *job = ((struct rank *)arg)->job;
  (void)s;
  job->nstreams--;
  if (job->nstreams == 0)
    uv_timer_stop(&job->drain_timer);
  maybe_finish(job);
}

static void on_timeout(uv_timer_t *t) {
  struct job *job = t->data;
  /* A failure that came first decides. */
  judge_failures(job);
  if (job->stop != RUNNING || job->nlive == 0)
    return;
  crnet__log("job timed out after %g s; stopping %d rank%s",
             job->opt->timeout_s, job->nlive, plural(job->nlive));
  job_stop(job, STOP_TIMEOUT, EXIT_TIMEOUT);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct job *job = h->data;
  /* A failure that came first decides the exit status. */
  judge_failures(job);
  job->nsignals++;
  if (job->nsignals > 1) {
    /* The user insists. */
    signal_live(job, SIGKILL);
    return;
  }
  crnet__debug("got signal %d (%s); passing it on", signum, strsignal(signum));
  signal_live(job, signum);
  job_stop(job, STOP_SIGNAL, 128 + signum);
}

/* ---- starting -------------------------------------------------------- */

/* Spawns one rank with its output pipes. 0 or a libuv error code. */
static int spawn_rank(struct job *job, struct rank *r) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  char rank_var[32];
  int rc = uv_pipe(out, 0, 0);
  if (rc == 0)
    rc = uv_pipe(err, 0, 0);
  if (rc != 0)
    goto out;

  /* Pipes of our own rather than UV_CREATE_PIPE, which gives the ranks a
   * socket for stdout: opening /dev/stdout fails on a socket. */
  uv_stdio_container_t stdio[3];
  if (r->index == 0) {
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = 0;
  } else {
    stdio[0].flags = UV_IGNORE; /* libuv opens /dev/null */
  }
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = out[1];
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = err[1];

  snprintf(rank_var, sizeof rank_var, "CRNET_RANK=%d", r->index);
  job->env[job->rank_slot] = rank_var;
  uv_process_options_t po;
  memset(&po, 0, sizeof po);
  po.exit_cb = on_rank_exit;
  po.file = job->opt->argv[0];
  po.args = job->opt->argv;
  po.env = job->env;
  po.stdio_count = 3;
  po.stdio = stdio;
  r->proc.data = r;
  rc = uv_spawn(&job->loop, &r->proc, &po);
  job->env[job->rank_slot] = NULL;
  if (rc != 0) {
    /* The handle is registered with the loop even when spawning fails. */
    uv_close((uv_handle_t *)&r->proc, NULL);
    goto out;
  }
  r->pid = r->proc.pid;
  r->live = 1;
  job->nlive++;

  char prefix[24] = "";
  if (job->opt->tag_output)
    snprintf(prefix, sizeof prefix, "[%d] ", r->index);
  job->nstreams += 2;
  int e = crnet__fwd_start(&r->out, &job->loop, out[0], &job->out, prefix,
                           on_stream_eof, on_stream_closed, r);
  out[0] = -1;
  if (e == 0) {
    e = crnet__fwd_start(&r->err, &job->loop, err[0], &job->err, prefix,
                         on_stream_eof, on_stream_closed, r);
    err[0] = -1;
  } else {
    job->nstreams--; /* the stderr stream was never started */
  }
  if (e != 0)
    crnet__log("cannot forward the output of rank %d: %s", r->index,
               uv_strerror(e));
out:
  /* The write ends now live in the child; ours would keep the pipes from
   * ever reaching EOF. */
  for (int i = 0; i < 2; i++) {
    if (out[i] >= 0)
      close(out[i]);
    if (err[i] >= 0)
      close(err[i]);
  }
  return rc;
}

/* Key file, rendezvous, environment, ranks. Failures stop the job. */
static void job_start(struct job *job) {
  const struct options *opt = job->opt;
  uint8_t key[CRNET__KEY_BYTES];
  crnet__key_generate(key);
  int rc = write_key_file(job, key);
  if (rc == 0) {
    rc = crnet__rdv_server_start(&job->rdv, &job->loop, key, opt->nranks,
                                 "127.0.0.1", 0, opt->init_timeout_s,
                                 on_rdv_done, job);
    if (rc != 0) {
      job->rdv = NULL;
      crnet__log("cannot serve the rendezvous: %s", crnet_strerror(rc));
    }
  }
  /* The server keeps its own copy. */
  crnet__wipe(key, sizeof key);
  if (rc == 0)
    rc = build_env(job, crnet__rdv_server_port(job->rdv));
  if (rc != 0) {
    job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    return;
  }
  raise_fd_limit(opt->nranks);
  for (int i = 0; i < opt->nranks && job->stop == RUNNING; i++) {
    rc = spawn_rank(job, &job->ranks[i]);
    if (rc != 0) {
      if (i == 0)
        crnet__log("cannot start %s: %s", opt->argv[0], uv_strerror(rc));
      else
        crnet__log("cannot start %s as rank %d: %s", opt->argv[0], i,
                   uv_strerror(rc));
      job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
    }
  }
  if (opt->timeout_s > 0 && job->stop == RUNNING)
    uv_timer_start(&job->timeout_timer, on_timeout,
                   (uint64_t)ceil(opt->timeout_s * 1000), 0);
}

static int job_run(const struct options *opt) {
  int exit_code = EXIT_INTERNAL;
  struct job *job = calloc(1, sizeof *job);
  struct rank *ranks = calloc((size_t)opt->nranks, sizeof *ranks);
  if (job == NULL || ranks == NULL) {
    crnet__log("out of memory");
    goto out;
  }
  int rc = uv_loop_init(&job->loop);
  if (rc != 0) {
    crnet__log("cannot start an event loop: %s", uv_strerror(rc));
    goto out;
  }
  job->opt = opt;
  job->ranks = ranks;
  for (int i = 0; i < opt->nranks; i++) {
    ranks[i].job = job;
    ranks[i].index = i;
  }
  crnet__fwd_sink_init(&job->out, STDOUT_FILENO);
  crnet__fwd_sink_init(&job->err, STDERR_FILENO);
  uv_timer_init(&job->loop, &job->timeout_timer);
  uv_timer_init(&job->loop, &job->stop_timer);
  uv_timer_init(&job->loop, &job->drain_timer);
  uv_timer_init(&job->loop, &job->judge_timer);
  job->timeout_timer.data = job->stop_timer.data = job;
  job->drain_timer.data = job->judge_timer.data = job;
  for (size_t i = 0; i < NSIGNALS; i++) {
    uv_signal_init(&job->loop, &job->signals[i]);
    job->signals[i].data = job;
    rc = uv_signal_start(&job->signals[i], on_signal, forwarded_signals[i]);
    if (rc != 0) {
      crnet__log("cannot watch signal %d: %s", forwarded_signals[i],
                 uv_strerror(rc));
      job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    }
  }
  if (job->stop == RUNNING)
    job_start(job);
  maybe_finish(job);
  uv_run(&job->loop, UV_RUN_DEFAULT);
  remove_key_file(job);
  rc = uv_loop_close(&job->loop);
  assert(rc == 0);
  exit_code = job->stop == RUNNING ? 0 : job->exit_code;
out:
  if (job != NULL)
    free_env(job);
  free(ranks);
  free(job);
  return exit_code;
}

int main(int argc, char **argv) {
  struct options opt;
  int rc = parse_options(&opt, argc, argv);
  if (rc < 0) {
    crnet__log_set_prefix("crlaunch: ");
    ensure_std_fds();
    /* A reader of our output that goes away must not kill us before the
     * ranks are stopped and the key file is gone; forward.c handles EPIPE.
     * libuv resets the disposition in the ranks. */
    signal(SIGPIPE, SIG_IGN);
    rc = job_run(&opt);
  }
  free(opt.xvars);
  return rc;
}
