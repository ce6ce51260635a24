/* crlaunch: starts the N ranks of a crnet job on this host or, over SSH, on
 * several.
 *
 *   crlaunch -n N [--hosts LIST | --hostfile FILE] [--ssh CMD] [--encrypt]
 *            [--tag-output] [--timeout SEC] [--coll-timeout SEC] [--stats]
 *            [-x VAR[=VAL]]... [--] prog
 *   crlaunch --agent          (on another host, started by crlaunch)
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
 *      forwarded line by line (forward.c). A socket at CRNET_LAUNCHER_FD=3
 *      carries the rank's reports to us: "abort <rank> <code>" from
 *      crnet_comm_abort(), which then decides the exit status, whom a
 *      failure is due to, counters; and our word to every rank of an abort,
 *      a failure or a failed process (crnet__launch_tell_ranks).
 *   5. The job then ends in one of these ways; the first one decides:
 *        - every rank exits 0;
 *        - a rank fails (non-zero status or a signal): it is named in one
 *          line (of failures at the same moment, the one that went first;
 *          see crnet__launch_judge_failures), the others get 1 s to notice
 *          and print their own error, then SIGTERM, then SIGKILL 2 s later;
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
 * Several hosts (hosts.h, remote.h): the ranks of a host other than this one
 * are one watched process here, the SSH session of an agent there: a
 * crlaunch started with --agent, which reads its configuration and the key
 * from the session's stdin and then runs the same lifecycle as above for its
 * share of the ranks, without a rendezvous of its own. Its failed ranks are
 * reported at once on its stderr, signals and "stop" go to it as commands on
 * its stdin, and the end of that stdin stops its ranks. So from here a remote
 * host looks like one rank that may stand for several:
 * crnet__launch_judge_failures, the timers and the exit status treat both
 * alike.
 *
 * Exit status:
 *   0        every rank exited 0
 *   c        a rank called crnet_comm_abort(comm, c) (c's low 8 bits, 1 if
 *            they are 0), whatever the ranks' own statuses
 *   s        the first failing rank exited with status s
 *   128+k    the first failing rank was killed by signal k, or crlaunch itself
 *            got signal k (and passed it on) before any rank failed
 *   124      --timeout expired
 *   125      crlaunch itself failed (no temporary directory, no rendezvous)
 *   127      the program could not be started
 *   2        bad usage
 *
 * The files: this one runs the lifecycle above; options.c reads the
 * command line, hosts_start.c starts the other hosts' agents, agent.c is
 * crlaunch --agent, stats.c prints the --stats table, bind.c gives each
 * rank its CPUs; launch.h holds what they share.
 */
#include "launch.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "crnet.h"
#include "handshake.h"
#include "log.h"
#include "settings.h"

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};
_Static_assert(sizeof forwarded_signals / sizeof forwarded_signals[0] ==
                   NSIGNALS,
               "NSIGNALS (launch.h) counts forwarded_signals");

/* Variables crlaunch sets itself; -x may not override them. */
const char *const crnet__launch_reserved_vars[] = {
    "CRNET_RANK",         "CRNET_SIZE",     "CRNET_RENDEZVOUS", "CRNET_JOB_KEY",
    "CRNET_JOB_KEY_FILE", "CRNET_LAUNCHER", "CRNET_LAUNCHER_FD",
    "CRNET_HOST_CPUS",    NULL};

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
void crnet__launch_raise_fd_limit(int nranks) {
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

void crnet__launch_remove_key_file(struct job *job) {
  if (job->keyfile[0] != '\0' && unlink(job->keyfile) != 0)
    crnet__log("cannot remove %s: %s", job->keyfile, strerror(errno));
  job->keyfile[0] = '\0';
  if (job->dir[0] != '\0' && rmdir(job->dir) != 0)
    crnet__log("cannot remove %s: %s", job->dir, strerror(errno));
  job->dir[0] = '\0';
}

/* Makes the private directory and writes the key into it. 0 or -1 (said). */
int crnet__launch_write_key_file(struct job *job,
                                 const uint8_t key[CRNET__KEY_BYTES]) {
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

int crnet__launch_skip_inherited(const struct job *job, const char *entry) {
  for (const char *const *r = crnet__launch_reserved_vars; *r != NULL; r++)
    if (crnet__launch_names_var(entry, *r, strlen(*r)))
      return 1;
  if (crnet__launch_names_var(entry, "CRNET_INIT_TIMEOUT", 18))
    return 1;
  for (int i = 0; i < job->nxvars; i++)
    if (crnet__launch_names_var(
            entry, job->xvars[i],
            (size_t)crnet__launch_var_name_len(job->xvars[i])))
      return 1;
  return 0;
}

char *crnet__launch_str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* Our environment minus what we set, plus CRNET_* and -x (or, in an agent,
 * the variables crlaunch sent); the last slot before the NULL is filled
 * with CRNET_RANK per rank. 0 or -1 (said). */
int crnet__launch_build_env(struct job *job, const char *rendezvous) {
  int n = 0;
  while (environ[n] != NULL)
    n++;
  job->env = calloc((size_t)(n + job->nxvars + 12), sizeof *job->env);
  if (job->env == NULL)
    goto nomem;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!crnet__launch_skip_inherited(job, environ[i]))
      job->env[k++] = environ[i];
  job->env_owned = k;
  job->rank_slot = k; /* grows as entries are added, for free_env */
  /* CRNET_HOST_CPUS: the CPUs this host's ranks share, which a bound rank
   * cannot count from its own mask (it decides how to wait by them). */
  char *add[6];
  add[0] = crnet__launch_str_printf("CRNET_SIZE=%d", job->size);
  add[1] = crnet__launch_str_printf("CRNET_RENDEZVOUS=%s", rendezvous);
  add[2] = crnet__launch_str_printf("CRNET_JOB_KEY_FILE=%s", job->keyfile);
  add[3] = crnet__launch_str_printf("CRNET_LAUNCHER=crlaunch");
  add[4] =
      crnet__launch_str_printf("CRNET_INIT_TIMEOUT=%s", job->init_timeout_str);
  add[5] = crnet__launch_str_printf("CRNET_HOST_CPUS=%d", job->bind.ncpus);
  for (int i = 0; i < 6; i++)
    job->env[job->rank_slot++] = add[i];
  for (int i = 0; i < 6; i++)
    if (add[i] == NULL)
      goto nomem;
  for (int i = 0; i < job->nxvars; i++) {
    const char *x = job->xvars[i];
    int len = crnet__launch_var_name_len(x);
    if (crnet__launch_names_var(x, "CRNET_INIT_TIMEOUT", 18))
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
      entry = crnet__launch_str_printf("%s=%s", x, val);
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

/* ---- crlaunch --settings -------------------------------------------- */

/* The ranks' environment as crnet__launch_build_env makes it, for
 * crnet__setting_read: `from` says where the last value looked up came
 * from. */
struct settings_lookup {
  const struct options *opt;
  const char *from;
};

/* Which option put an -x entry on the list: --encrypt, --stats and
 * --coll-timeout add theirs (and refuse an -x of the same name). */
static const char *xvar_origin(const struct options *opt, const char *x) {
  if (opt->encrypt && crnet__launch_names_var(x, "CRNET_ENCRYPT", 13))
    return "from --encrypt";
  if (opt->stats && crnet__launch_names_var(x, "CRNET_STATS", 11))
    return "from --stats";
  if (opt->coll_timeout != NULL &&
      crnet__launch_names_var(x, "CRNET_TIMEOUT", 13))
    return "from --coll-timeout";
  return "from -x";
}

static const char *settings_lookup(const char *name, void *arg) {
  struct settings_lookup *l = arg;
  const struct options *opt = l->opt;
  size_t len = strlen(name);
  int named = 0;
  l->from = "default";
  if (strcmp(name, "CRNET_INIT_TIMEOUT") == 0) {
    /* Always passed: -x's (the last), ours, or crlaunch's default. */
    const char *ours = getenv(name);
    if (opt->init_timeout_str == ours)
      l->from = "from the environment";
    else if (strcmp(opt->init_timeout_str, DEFAULT_INIT_TIMEOUT) != 0 ||
             (ours != NULL && ours[0] != '\0'))
      l->from = "from -x";
    return opt->init_timeout_str;
  }
  /* The first -x entry that makes one wins (a rank's getenv finds it
   * first); our own entry of a name -x gives is not passed at all. */
  for (int i = 0; i < opt->nxvars; i++) {
    const char *x = opt->xvars[i];
    if (!crnet__launch_names_var(x, name, len))
      continue;
    named = 1;
    const char *v = x[len] == '=' ? x + len + 1 : getenv(name);
    if (v != NULL) {
      l->from = xvar_origin(opt, x);
      return v;
    }
  }
  if (named)
    return NULL;
  l->from = "from the environment";
  return getenv(name);
}

/* The line of a variable crlaunch sets itself, after its name; NULL for
 * the others. */
static const char *set_by_crlaunch(const struct options *opt, const char *name,
                                   char *buf, size_t len) {
  static const struct {
    const char *name, *line;
  } lines[] = {
      {"CRNET_RENDEZVOUS", "=<the address crlaunch serves it at>"},
      {"CRNET_JOB_KEY", " is removed: the key is in CRNET_JOB_KEY_FILE"},
      {"CRNET_JOB_KEY_FILE", "=<a private file crlaunch writes>"},
      {"CRNET_LAUNCHER", "=crlaunch"},
      {"CRNET_LAUNCHER_FD", "=3:<the inode of the rank's report socket>"},
      {"CRNET_HOST_CPUS", "=<how many CPUs the host's ranks share>"},
  };
  int reserved = 0;
  for (const char *const *r = crnet__launch_reserved_vars; *r != NULL; r++)
    reserved |= strcmp(*r, name) == 0;
  if (!reserved)
    return NULL;
  if (strcmp(name, "CRNET_RANK") == 0 && opt->nranks > 1)
    snprintf(buf, len, "=0..%d (set by crlaunch, one each)", opt->nranks - 1);
  else if (strcmp(name, "CRNET_RANK") == 0 && opt->nranks == 1)
    snprintf(buf, len, "=0 (set by crlaunch)");
  else if (strcmp(name, "CRNET_SIZE") == 0 && opt->nranks > 0)
    snprintf(buf, len, "=%d (set by crlaunch)", opt->nranks);
  else
    snprintf(buf, len, "=<set by crlaunch>");
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
    if (strcmp(lines[i].name, name) == 0)
      snprintf(buf, len, "%s%s", lines[i].line,
               lines[i].line[0] == '=' ? " (set by crlaunch)" : "");
  return buf;
}

int crnet__launch_rank_setting(const struct options *opt, int id,
                               crnet__setting_value *out, char *err,
                               size_t errlen) {
  struct settings_lookup l = {.opt = opt, .from = NULL};
  return crnet__setting_read(id, NULL, settings_lookup, &l, out, err, errlen);
}

int crnet__launch_print_settings(const struct options *opt) {
  struct settings_lookup l = {.opt = opt, .from = NULL};
  int status = 0;
  for (int id = 0; id < CRNET__SETTING_COUNT; id++) {
    const crnet__setting *row = &crnet__settings_table[id];
    crnet__setting_value v;
    char line[256], err[512];
    if (set_by_crlaunch(opt, row->name, line, sizeof line) != NULL) {
      printf("%s%s\n", row->name, line);
      continue;
    }
    if (row->group == CRNET__READ_ELSEWHERE) {
      /* Parsed where it is read: shown as the ranks get it. */
      memset(&v, 0, sizeof v);
      v.text = settings_lookup(row->name, &l);
      v.source = CRNET__FROM_ENVIRONMENT;
      if (v.text == NULL) {
        v.text = row->default_value;
        v.source = v.text != NULL ? CRNET__FROM_DEFAULT : CRNET__FROM_NONE;
      }
    } else if (crnet__setting_read(id, NULL, settings_lookup, &l, &v, err,
                                   sizeof err) != 0) {
      fprintf(stderr, "crlaunch: %s\n", err);
      status = EXIT_USAGE;
      continue;
    }
    if (v.source == CRNET__FROM_NONE)
      printf("%s= (unset: %s)\n", row->name, row->unset);
    else if (v.source == CRNET__FROM_DEFAULT)
      printf("%s=%s (default)\n", row->name, v.text);
    else
      printf("%s=%s (%s)\n", row->name,
             row->type == CRNET__SETTING_KEY ? "<secret>" : v.text, l.from);
  }
  return status;
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

const char *crnet__launch_plural(int n) {
  return n == 1 ? "" : "s";
}

static void rdv_close(struct job *job) {
  crnet__rendezvous_server *srv = job->rdv;
  if (srv == NULL)
    return;
  /* Cleared first so that a done callback run from inside the close is
   * recognised as stale. */
  job->rdv = NULL;
  crnet__rendezvous_server_close(srv);
}

void crnet__launch_on_ctl_written(uv_write_t *w, int status) {
  if (status != 0)
    crnet__debug("cannot reach an agent: %s", uv_strerror(status));
  free(w);
}

/* Writes bytes to a remote host's agent. `data` is copied. */
void crnet__launch_ctl_send(struct rank *r, const void *data, size_t len) {
  if (!r->ctl_open)
    return;
  uv_write_t *w = malloc(sizeof *w + len);
  if (w == NULL) {
    crnet__log("out of memory");
    return;
  }
  memcpy(w + 1, data, len);
  uv_buf_t buf = uv_buf_init((char *)(w + 1), (unsigned)len);
  if (uv_write(w, (uv_stream_t *)&r->ctl, &buf, 1,
               crnet__launch_on_ctl_written) != 0)
    free(w);
}

/* Says one line to every rank, on the report socket of each rank here and
 * after CRNET__AGENT_TELL to each agent, which passes it on (remote.h):
 * "abort <rank> <code>" when a rank aborted the job, "fail <rank>
 * <origin>" when a rank failed because of another, "gone <rank> <status>
 * <signal>" when a rank's process failed. A rank that loses a peer waits a
 * moment for this word before it fails (report.h), so that it fails with
 * the abort and its code rather than with the loss of a peer that exited
 * because of it, and says why the lost rank left. */
void crnet__launch_tell_ranks(struct job *job, const char *fmt, ...) {
  char line[64];
  va_list ap;
  int n;
  line[0] = CRNET__AGENT_TELL;
  va_start(ap, fmt);
  n = vsnprintf(line + 1, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line - 1)
    return;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (r->host != NULL)
      crnet__launch_ctl_send(r, line, (size_t)n + 1);
    else if (r->live)
      crnet__fwd_reply(&r->rep, line + 1, (size_t)n);
  }
}

static void ctl_close(struct rank *r) {
  if (r->ctl_open) {
    r->ctl_open = 0;
    uv_close((uv_handle_t *)&r->ctl, NULL);
  }
}

/* Sends sig to every rank not yet reaped, through its agent for a remote
 * host; returns how many ranks. A rank that has exited but is not reaped
 * yet is a zombie whose pid cannot be reused, so this never hits a
 * stranger. */
int crnet__launch_signal_live(struct job *job, int sig) {
  int n = 0;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (!r->live)
      continue;
    if (r->host != NULL) {
      char cmd[2] = {CRNET__AGENT_SIGNAL, (char)sig};
      crnet__launch_ctl_send(r, cmd, sizeof cmd);
      /* Not counting the rank whose failure its agent reported. */
      n += r->count - (r->reported ? 1 : 0);
      continue;
    }
    int err = uv_process_kill(&r->proc, sig);
    if (err == 0)
      n++;
    else if (err != UV_ESRCH)
      crnet__log("cannot signal rank %d (pid %d): %s", r->index, r->pid,
                 uv_strerror(err));
  }
  return n;
}

/* An agent that has not exited ABANDON_MS after SIGKILL is cut off (its
 * host or the network is gone): killing its SSH client ends the session,
 * and an agent that is still alive stops its ranks at the end of file. */
static void on_abandon_time(uv_timer_t *t) {
  struct job *job = t->data;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (r->live && r->host != NULL) {
      crnet__log("no word from host %s after SIGKILL; closing its session",
                 r->host->name);
      uv_process_kill(&r->proc, SIGKILL);
    }
  }
}

static void on_kill_time(uv_timer_t *t) {
  struct job *job = t->data;
  int n = crnet__launch_signal_live(job, SIGKILL);
  if (n > 0)
    crnet__log("killing %d rank%s that did not stop", n,
               crnet__launch_plural(n));
  if (job->agent == NULL)
    uv_timer_start(&job->abandon_timer, on_abandon_time, ABANDON_MS, 0);
}

void crnet__launch_terminate(struct job *job) {
  job->nstopped += crnet__launch_signal_live(job, SIGTERM);
  uv_timer_start(&job->stop_timer, on_kill_time, KILL_GRACE_MS, 0);
}

static void on_grace_over(uv_timer_t *t) {
  crnet__launch_terminate(t->data);
}

/* Begins stopping the job; the first reason sets the exit status. For
 * STOP_SIGNAL the caller has already passed the signal on. */
void crnet__launch_job_stop(struct job *job, enum stop_reason reason,
                            int exit_code) {
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
    uv_timer_start(&job->stop_timer, on_grace_over, job->grace_ms, 0);
    break;
  case STOP_SIGNAL:
    uv_timer_start(&job->stop_timer, on_kill_time, SIGNAL_GRACE_MS, 0);
    break;
  case STOP_TIMEOUT:
  case STOP_ERROR:
  case STOP_LOST:
    crnet__launch_terminate(job);
    break;
  case RUNNING:
    assert(0);
  }
}

/* An agent: one report line to crlaunch on our stderr, "<marker> " and
 * the text (remote.h), between the ranks' forwarded lines. */
void crnet__launch_report_up(struct job *job, const char *fmt, ...) {
  char line[320];
  va_list ap;
  int n = snprintf(line, sizeof line, "%s ", job->agent->report);
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  crnet__fwd_sink_line(&job->err, line);
}

/* Once every rank is reaped and every stream closed: close the remaining
 * handles so that uv_run returns. */
static void maybe_finish(struct job *job) {
  if (job->finishing || job->nlive > 0 || job->nstreams > 0)
    return;
  /* Nothing is left to arrive that could change the verdict. */
  crnet__launch_judge_failures(job);
  job->finishing = 1;
  crnet__launch_print_stats(job);
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
               crnet__launch_plural(job->nstopped));
  for (size_t i = 0; i < NSIGNALS; i++)
    uv_close((uv_handle_t *)&job->signals[i], NULL);
  uv_close((uv_handle_t *)&job->timeout_timer, NULL);
  uv_close((uv_handle_t *)&job->stop_timer, NULL);
  uv_close((uv_handle_t *)&job->drain_timer, NULL);
  uv_close((uv_handle_t *)&job->judge_timer, NULL);
  uv_close((uv_handle_t *)&job->abandon_timer, NULL);
  uv_close((uv_handle_t *)&job->heartbeat_timer, NULL);
  for (int i = 0; i < job->nprocs; i++)
    ctl_close(&job->ranks[i]);
  if (job->ctl_in_open) {
    job->ctl_in_open = 0;
    uv_close((uv_handle_t *)&job->ctl_in, NULL);
  }
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

void crnet__launch_on_rdv_done(crnet__rendezvous_server *srv, int status,
                               const int *missing, int nmissing, void *arg) {
  struct job *job = arg;
  if (job->rdv != srv)
    return;
  if (status == 0 && job->restarts > 0) {
    /* --restart: a rank started again reads the key file and joins
     * through this server (rendezvous.h), so both stay until the end. */
    crnet__debug("every rank reached the rendezvous; it stays open for "
                 "restarted ranks");
    return;
  }
  if (status == 0) {
    crnet__debug("every rank reached the rendezvous");
    /* Each rank has read the key file to get this far; the fewer moments
     * the key spends on disk the better. */
    crnet__launch_remove_key_file(job);
    char cmd = CRNET__AGENT_KEY_DONE;
    for (int i = 0; i < job->nprocs; i++)
      if (job->ranks[i].host != NULL)
        crnet__launch_ctl_send(&job->ranks[i], &cmd, 1);
  } else if (status == CRNET_ETIMEDOUT && nmissing > 0 &&
             nmissing < job->size) {
    /* The ranks that did register get an error from the server and fail on
     * their own; this line says who kept them waiting. */
    char list[400];
    format_ranks(list, sizeof list, missing, nmissing);
    crnet__log("rank%s %s never reached the rendezvous within %g s",
               crnet__launch_plural(nmissing), list, job->opt->init_timeout_s);
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
  for (int i = 0; i < job->nprocs; i++) {
    crnet__fwd_drain(&job->ranks[i].out);
    crnet__fwd_drain(&job->ranks[i].err);
    crnet__fwd_drain(&job->ranks[i].rep);
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
 * That is the best an observer can do, and not always right: a dying
 * process releases its sockets and pipes in an order of the kernel's
 * choosing (recent kernels: the highest descriptor first, so its crnet
 * sockets before its stdout), and a peer woken by the socket may fail and
 * exit before the dying process gets the CPU back (measured: half the
 * time with 4 ranks). So the ranks tell crlaunch whom they lost, on the
 * report socket ("fail <rank> <origin>", before they exit): if the first
 * rank to go failed because of a rank that has failed too, that one is
 * named. */

/* The failed rank that r's failure is due to, or NULL. */
static struct rank *blamed_rank(struct job *job, const struct rank *r) {
  if (r->blamed < 0)
    return NULL;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *t = &job->ranks[i];
    if (r->blamed < t->index || r->blamed >= t->index + t->count)
      continue;
    if (t == r || !t->failed)
      return NULL;
    /* Another host: only if its agent reported that very rank. */
    if (t->host != NULL && !(t->reported && t->fail_rank == r->blamed))
      return NULL;
    return t;
  }
  return NULL;
}

void crnet__launch_mark_gone(struct rank *r) {
  if (r->gone_seq == 0)
    r->gone_seq = ++r->job->ngone;
}

/* Names the first failure and stops the job, if a verdict is pending. Called
 * when the settling time is over, and early when something else is about
 * to decide the job's fate (a signal, the timeout, the end). */
void crnet__launch_judge_failures(struct job *job) {
  if (!job->judging)
    return;
  job->judging = 0;
  uv_timer_stop(&job->judge_timer);
  struct rank *first = NULL;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (r->failed && (first == NULL || r->gone_seq < first->gone_seq))
      first = r;
  }
  assert(first != NULL && job->stop == RUNNING);
  /* The ranks say whom they lost: if the first to go failed because of a
   * rank that has failed too, that rank is the cause. One step only: two
   * ranks of a mismatched call blame each other. */
  struct rank *cause = blamed_rank(job, first);
  if (cause != NULL)
    first = cause;
  if (first->reported) {
    if (first->term_signal != 0)
      crnet__log("rank %d (pid %d on host %s) was killed by signal %d (%s)",
                 first->fail_rank, first->fail_pid, first->host->name,
                 first->term_signal, strsignal(first->term_signal));
    else
      crnet__log("rank %d (pid %d on host %s) exited with status %d",
                 first->fail_rank, first->fail_pid, first->host->name,
                 (int)first->status);
  } else if (first->host != NULL) {
    char who[64];
    if (first->count == 1)
      snprintf(who, sizeof who, "rank %d", first->index);
    else
      snprintf(who, sizeof who, "ranks %d-%d", first->index,
               first->index + first->count - 1);
    if (first->term_signal != 0)
      crnet__log("the session with host %s (%s) was killed by signal %d",
                 first->host->name, who, first->term_signal);
    else if (first->status == 255 && !job->opt->slurm)
      crnet__log("cannot run %s on host %s: ssh failed (status 255; its "
                 "message is above)",
                 who, first->host->name);
    else if (first->status == EXIT_NOT_STARTED)
      crnet__log("cannot run %s on host %s: status 127 (is the program, or "
                 "crlaunch at %s, there?)",
                 who, first->host->name, job->remote_crlaunch);
    else
      crnet__log("%s on host %s failed with status %d (the lines above say "
                 "which and why)",
                 who, first->host->name, (int)first->status);
  } else if (first->term_signal != 0)
    crnet__log("rank %d (pid %d) was killed by signal %d (%s)", first->index,
               first->pid, first->term_signal, strsignal(first->term_signal));
  else
    crnet__log("rank %d (pid %d) exited with status %d", first->index,
               first->pid, (int)first->status);
  crnet__launch_job_stop(job, STOP_FAILURE,
                         first->term_signal != 0 ? 128 + first->term_signal
                                                 : (int)first->status);
}

void crnet__launch_on_settled(uv_timer_t *t) {
  crnet__launch_judge_failures(t->data);
}

void crnet__launch_lost_going_on(struct job *job, const char *who,
                                 int status, int term_signal) {
  if (term_signal != 0) {
    if (who != NULL)
      crnet__log("%s was killed by signal %d (%s); the others go on "
                 "(--keep-going)",
                 who, term_signal, strsignal(term_signal));
    if (job->first_signal == 0)
      job->first_signal = term_signal;
  } else {
    if (who != NULL)
      crnet__log("%s exited with status %d; the others go on (--keep-going)",
                 who, status);
    if (job->first_status == 0)
      job->first_status = status;
  }
}

/* --keep-going: a rank (or a remote host's session) that failed is named
 * at once, and the others go on. The exit status is decided at the end
 * (keep_going_status). An agent leaves the naming to crlaunch, which its
 * report reaches (hosts_start.c); a session whose failed rank that report
 * named already is not named again. */
static void keep_going_lost(struct job *job, struct rank *r, int64_t status,
                            int term_signal) {
  char who[400];
  if (job->agent != NULL || (r->reported && r->host != NULL)) {
    crnet__launch_lost_going_on(job, NULL, (int)status, term_signal);
    return;
  }
  if (r->host != NULL)
    snprintf(who, sizeof who, "host %s (ranks %d-%d)", r->host->name, r->index,
             r->index + r->count - 1);
  else
    snprintf(who, sizeof who, "rank %d (pid %d)", r->index, r->pid);
  crnet__launch_lost_going_on(job, who, (int)status, term_signal);
}

/* The exit status of a job that ran to its end: 0 when every rank exited 0;
 * with --keep-going, the first non-zero status a rank exited with, else 0
 * if a rank exited 0 (the survivors finished), else 128 + the first signal
 * (every rank was lost). */
static int keep_going_status(const struct job *job) {
  if (job->first_status != 0)
    return job->first_status;
  /* An agent's lost ranks were reported to crlaunch, which decides. */
  if (job->agent != NULL)
    return 0;
  if (job->nended_well > 0 || job->first_signal == 0)
    return 0;
  return 128 + job->first_signal;
}

/* --restart with remote hosts: a session that failed is judged once its
 * reports are all in (restart.c): if ranks of it had not ended, the host
 * is gone with them, which counts as ranks killed (they start again
 * elsewhere), not as the session's status; else as --keep-going says. */
static void remote_session_over(struct job *job, struct rank *r) {
  int failed = r->status != 0 || r->term_signal != 0;
  int gone = crnet__launch_session_over(job, r);
  if (gone < 0 || !failed || !job->keep_going || job->stop != RUNNING ||
      job->aborted)
    return;
  if (gone > 0)
    crnet__launch_lost_going_on(job, NULL, 0, SIGKILL);
  else
    keep_going_lost(job, r, r->status, r->term_signal);
}

static void on_rank_exit(uv_process_t *proc, int64_t status, int term_signal) {
  struct rank *r = proc->data;
  struct job *job = r->job;
  r->live = 0;
  if (!r->reported) {
    r->status = status;
    r->term_signal = term_signal;
  }
  crnet__launch_mark_gone(r);
  if (job->agent != NULL && (status != 0 || term_signal != 0))
    crnet__launch_report_up(job, "exit %d %d %d %d", r->index, r->pid,
                            (int)status, term_signal);
  else if (job->agent != NULL && job->restarts > 0)
    /* --restart: crlaunch starts a gone host's ranks elsewhere, but only
     * those that had not ended (restart.c). */
    crnet__launch_report_up(job, "end %d %d", r->index, r->pid);
  /* Only failed ranks: a rank that ends well has said goodbye to its
   * peers, and the word would cost p lines per exit. */
  if (r->host == NULL && (status != 0 || term_signal != 0))
    crnet__launch_tell_ranks(job, "gone %d %d %d\n", r->index, (int)status,
                             term_signal);
  if (status == 0 && term_signal == 0)
    job->nended_well++;
  job->nlive--;
  uv_close((uv_handle_t *)proc, NULL);
  ctl_close(r);
  if ((status != 0 || term_signal != 0) && job->keep_going &&
      job->stop == RUNNING && !job->aborted) {
    if (r->host != NULL && job->where != NULL) {
      r->status = status;
      r->term_signal = term_signal;
      remote_session_over(job, r);
    } else {
      keep_going_lost(job, r, status, term_signal);
      if (r->host == NULL && job->agent == NULL)
        crnet__launch_restart_local(job, r);
    }
  } else if (status != 0 || term_signal != 0) {
    r->failed = 1;
    if (job->stop == RUNNING && !job->judging) {
      job->judging = 1;
      uv_timer_start(&job->judge_timer, crnet__launch_on_settled, SETTLE_MS, 0);
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
  uv_timer_stop(&job->abandon_timer);
  uv_timer_stop(&job->heartbeat_timer);
  /* A program that never uses crnet leaves the server waiting; nobody is
   * left to come. */
  rdv_close(job);
  if (job->nstreams > 0)
    uv_timer_start(&job->drain_timer, on_drain_time, DRAIN_MS, 0);
  maybe_finish(job);
}

static void on_stream_eof(crnet__fwd_stream *s, void *arg) {
  (void)s;
  crnet__launch_mark_gone(arg);
}

static void on_stream_closed(crnet__fwd_stream *s, void *arg) {
  struct rank *r = arg;
  struct job *job = r->job;
  if (s == &r->out || s == &r->err) {
    r->closed_streams++;
    remote_session_over(job, r);
  }
  job->nstreams--;
  if (job->nstreams == 0)
    uv_timer_stop(&job->drain_timer);
  maybe_finish(job);
}

static void on_timeout(uv_timer_t *t) {
  struct job *job = t->data;
  /* A failure that came first decides. */
  crnet__launch_judge_failures(job);
  if (job->stop != RUNNING || job->nlive == 0)
    return;
  crnet__log("job timed out after %g s; stopping %d rank%s",
             job->opt->timeout_s, job->nlive, crnet__launch_plural(job->nlive));
  crnet__launch_job_stop(job, STOP_TIMEOUT, EXIT_TIMEOUT);
}

void crnet__launch_pass_signal(struct job *job, int signum) {
  /* A failure that came first decides the exit status. */
  crnet__launch_judge_failures(job);
  job->nsignals++;
  if (job->nsignals > 1) {
    /* The user insists. */
    crnet__launch_signal_live(job, SIGKILL);
    return;
  }
  crnet__debug("got signal %d (%s); passing it on", signum, strsignal(signum));
  crnet__launch_signal_live(job, signum);
  crnet__launch_job_stop(job, STOP_SIGNAL, 128 + signum);
}

static void on_signal(uv_signal_t *h, int signum) {
  crnet__launch_pass_signal(h->data, signum);
}

/* ---- a rank's abort ------------------------------------------------- */

/* The exit status for crnet_comm_abort(comm, code): the code's low 8 bits,
 * as exit(code) would give, but never 0: an aborted job did not succeed. */
static int abort_status(int code) {
  return (code & 0xff) != 0 ? code & 0xff : 1;
}

/* Rank `rank` (pid, on host r->host or here) called crnet_comm_abort():
 * that is the verdict, whatever else is failing at the same moment (the
 * other ranks fail because of the abort, and may exit first), and even if
 * every rank then exits 0. An agent passes it on to crlaunch. */
void crnet__launch_job_aborted(struct job *job, struct rank *r, int rank,
                               int pid, int code) {
  if (job->stop != RUNNING || job->aborted)
    return;
  job->aborted = 1;
  job->judging = 0;
  uv_timer_stop(&job->judge_timer);
  if (job->agent != NULL) {
    crnet__launch_report_up(job, "abort %d %d %d", rank, pid, code);
  } else if (r->host != NULL) {
    crnet__log("rank %d (pid %d on host %s) aborted the job with code %d",
               rank, pid, r->host->name, code);
  } else {
    crnet__log("rank %d (pid %d) aborted the job with code %d", rank, pid,
               code);
  }
  crnet__launch_tell_ranks(job, "abort %d %d\n", rank, code);
  crnet__launch_job_stop(job, STOP_FAILURE, abort_status(code));
}

/* Rank `rank` (of r) failed because of rank `origin` (comm.c,
 * report_failure): crnet__launch_judge_failures names origin rather than rank
 * if origin failed too. The first report of r counts; an agent passes it on. */
void crnet__launch_take_blame(struct job *job, struct rank *r, int rank,
                              int origin) {
  if (job->agent != NULL)
    crnet__launch_report_up(job, "fail %d %d", rank, origin);
  if (r->blamed < 0)
    r->blamed = origin;
  crnet__launch_tell_ranks(job, "fail %d %d\n", rank, origin);
}

/* A line from a rank's report socket (crnet.h, CRNET_LAUNCHER_FD):
 * "abort <rank> <code>" or a "stats" line. */
static void on_rank_report(crnet__fwd_stream *s, const char *line, size_t len,
                           void *arg) {
  struct rank *r = arg;
  char buf[256], tail;
  int rank, code;
  (void)s;
  if (len < sizeof buf) {
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (sscanf(buf, "abort %d %d%c", &rank, &code, &tail) == 3 &&
        tail == '\n' && rank == r->index) {
      crnet__launch_job_aborted(r->job, r, rank, r->pid, code);
      return;
    }
    if (strncmp(buf, "stats ", 6) == 0 &&
        crnet__launch_take_stats(r->job, buf, r->index, 1) == 0)
      return;
    if (sscanf(buf, "fail %d %d%c", &rank, &code, &tail) == 3 &&
        tail == '\n' && rank == r->index && code >= 0 &&
        code < r->job->size) {
      crnet__launch_take_blame(r->job, r, rank, code);
      return;
    }
  }
  crnet__log("rank %d sent a malformed report (%.*s)", r->index,
             (int)(len > 40 ? 40 : len - 1), line);
}

/* ---- starting -------------------------------------------------------- */

/* Spawns r's process: `args` with `env` (NULL: ours), stdin from `in` (-1:
 * /dev/null), stdout and stderr forwarded line by line after `prefix`. A
 * detached process gets a session of its own, so that a ^C at the terminal
 * reaches only crlaunch, which passes it on in order. A rank (not a
 * detached SSH session) also gets its report socket at REPORT_FD, named in
 * env[job->rank_slot + 1] as "CRNET_LAUNCHER_FD=3:<inode>": the inode lets
 * the library tell this socket from whatever a wrapper that closed the
 * descriptor left at that number. 0 or a libuv error code. */
int crnet__launch_spawn_proc(struct job *job, struct rank *r, char **args,
                             char **env, int in, const char *prefix,
                             int detached) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int rep[2] = {-1, -1};
  int rc = uv_pipe(out, 0, 0);
  if (rc == 0)
    rc = uv_pipe(err, 0, 0);
  /* A socket, not a pipe: a rank whose crlaunch is gone then gets EPIPE
   * from send(MSG_NOSIGNAL) instead of a SIGPIPE that would kill it. */
  if (rc == 0 && !detached)
    rc = uv_socketpair(SOCK_STREAM, 0, rep, 0, 0);
  if (rc != 0)
    goto out;
  char rep_var[64];
  int fd_slot = 0;
  struct stat st;
  if (!detached && env != NULL) {
    if (fstat(rep[1], &st) != 0) {
      rc = uv_translate_sys_error(errno);
      goto out;
    }
    snprintf(rep_var, sizeof rep_var, "CRNET_LAUNCHER_FD=%d:%llu", REPORT_FD,
             (unsigned long long)st.st_ino);
    /* After CRNET_RANK and what else the rank was given (spawn_rank_as). */
    fd_slot = job->rank_slot + 1;
    while (env[fd_slot] != NULL)
      fd_slot++;
    env[fd_slot] = rep_var;
  }

  /* Pipes of our own rather than UV_CREATE_PIPE, which gives the ranks a
   * socket for stdout: opening /dev/stdout fails on a socket. */
  uv_stdio_container_t stdio[REPORT_FD + 1];
  if (in >= 0) {
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = in;
  } else {
    stdio[0].flags = UV_IGNORE; /* libuv opens /dev/null */
  }
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = out[1];
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = err[1];
  stdio[REPORT_FD].flags = UV_INHERIT_FD;
  stdio[REPORT_FD].data.fd = rep[1];

  uv_process_options_t po;
  memset(&po, 0, sizeof po);
  po.exit_cb = on_rank_exit;
  po.file = args[0];
  po.args = args;
  po.env = env;
  po.stdio_count = detached ? 3 : REPORT_FD + 1;
  po.stdio = stdio;
  po.flags = detached ? UV_PROCESS_DETACHED : 0;
  r->proc.data = r;
  rc = uv_spawn(&job->loop, &r->proc, &po);
  if (!detached && env != NULL && fd_slot > 0)
    env[fd_slot] = NULL;
  if (rc != 0) {
    /* The handle is registered with the loop even when spawning fails. */
    uv_close((uv_handle_t *)&r->proc, NULL);
    goto out;
  }
  r->pid = r->proc.pid;
  r->live = 1;
  job->nlive++;

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
  if (rep[0] >= 0) {
    /* Every line is a report; none reaches the sink. */
    job->nstreams++;
    e = crnet__fwd_start(&r->rep, &job->loop, rep[0], &job->err, "",
                         on_stream_eof, on_stream_closed, r);
    rep[0] = -1;
    if (e == 0)
      crnet__fwd_intercept(&r->rep, "", on_rank_report);
    else
      crnet__log("cannot read the reports of rank %d: %s", r->index,
                 uv_strerror(e));
  }
out:
  /* The write ends now live in the child; ours would keep the pipes from
   * ever reaching EOF. */
  for (int i = 0; i < 2; i++) {
    if (out[i] >= 0)
      close(out[i]);
    if (err[i] >= 0)
      close(err[i]);
    if (rep[i] >= 0)
      close(rep[i]);
  }
  return rc;
}

/* One rank on this host. Rank 0 of a job started here shares our stdin. */
int crnet__launch_spawn_rank(struct job *job, struct rank *r, char **argv) {
  return crnet__launch_spawn_rank_as(job, r, argv, NULL);
}

/* The same with one more variable (NULL: none) in its environment. */
int crnet__launch_spawn_rank_as(struct job *job, struct rank *r, char **argv,
                                const char *extra) {
  char rank_var[32];
  char prefix[24] = "";
  snprintf(rank_var, sizeof rank_var, "CRNET_RANK=%d", r->index);
  if (job->opt->tag_output ||
      (job->agent != NULL && job->agent->tag_output))
    snprintf(prefix, sizeof prefix, "[%d] ", r->index);
  job->env[job->rank_slot] = rank_var;
  job->env[job->rank_slot + 1] = (char *)(uintptr_t)extra;
  /* A restarted rank 0 does not take stdin over. */
  int in =
      r->index == 0 && job->agent == NULL && extra == NULL ? STDIN_FILENO : -1;
  /* The child inherits this thread's CPUs: set for the spawn, then back. */
  cpu_set_t saved;
  char cpus[256];
  int bound = crnet__bind_enter(&job->bind, r->local, &saved, cpus,
                                sizeof cpus);
  if (bound < 0)
    crnet__log("cannot bind rank %d to CPUs %s: %s; it runs unbound",
               r->index, cpus, strerror(errno));
  int rc = crnet__launch_spawn_proc(job, r, argv, job->env, in, prefix, 0);
  if (bound == 0)
    crnet__bind_leave(&saved);
  if (rc == 0 && (job->opt->report_bindings ||
                  (job->agent != NULL && job->agent->report_bindings))) {
    if (bound == 0)
      crnet__log("rank %d (pid %d) bound to CPUs %s", r->index, r->pid,
                 cpus);
    else
      crnet__log("rank %d (pid %d) not bound (--bind none)", r->index,
                 r->pid);
  }
  job->env[job->rank_slot] = NULL;
  job->env[job->rank_slot + 1] = NULL;
  return rc;
}

/* crlaunch: key file, rendezvous, environment, ranks and agents. Failures
 * stop the job. */
static void job_start(struct job *job) {
  const struct options *opt = job->opt;
  uint8_t key[CRNET__KEY_BYTES];
  char bind[INET6_ADDRSTRLEN];
  char rdv[INET6_ADDRSTRLEN + 16];
  char **env = NULL;
  int nenv = 0;
  char(*src)[INET6_ADDRSTRLEN] = calloc((size_t)job->nprocs, sizeof *src);
  int port = -1;
  uint8_t marker[CRNET__KEY_BYTES];
  char hex[2 * CRNET__KEY_BYTES + 1];
  /* A fresh random marker for the agents' reports; not the key. */
  crnet__key_generate(marker);
  crnet__key_to_hex(marker, hex);
  snprintf(job->report, sizeof job->report, "%.16s", hex);
  crnet__key_generate(key);
  int rc = src != NULL ? 0 : -1;
  if (rc == 0)
    rc = crnet__launch_plan_addresses(job, src, bind, sizeof bind);
  if (rc == 0)
    rc = crnet__launch_write_key_file(job, key);
  if (rc == 0 && (port = crnet__launch_serve_rendezvous(job, key, bind)) < 0)
    rc = -1;
  if (rc == 0 && job->restarts > 0 &&
      crnet__rendezvous_server_allow_joins(job->rdv, job->restarts) != 0) {
    crnet__log("out of memory");
    rc = -1;
  }
  if (rc == 0) {
    crnet__launch_format_rendezvous(rdv, sizeof rdv, src[0], port);
    rc = crnet__launch_build_env(job, rdv);
  }
  if (rc == 0 && opt->hosts.n > 0 &&
      (env = crnet__launch_remote_env(job, &nenv)) == NULL)
    rc = -1;
  if (rc != 0) {
    crnet__launch_job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    goto out;
  }
  crnet__launch_raise_fd_limit(opt->nranks);
  /* Every host's session starts before any waits on another: spawning is
   * asynchronous, so p = 64 over 8 hosts costs one SSH round trip, not 8. */
  for (int i = 0; i < job->nprocs && job->stop == RUNNING; i++) {
    struct rank *r = &job->ranks[i];
    if (r->host != NULL) {
      crnet__launch_format_rendezvous(rdv, sizeof rdv, src[i], port);
      if (job->rdv_of != NULL)
        snprintf(job->rdv_of[r->host - opt->hosts.hosts], sizeof job->rdv_of[0],
                 "%s", rdv);
      rc = crnet__launch_spawn_remote(job, r, key, rdv, env, nenv);
    } else {
      rc = crnet__launch_spawn_rank(job, r, opt->argv);
    }
    if (rc == 0)
      continue;
    if (r->host != NULL)
      crnet__log("cannot start %s for host %s: %s", opt->slurm ? "srun" : "ssh",
                 r->host->name, uv_strerror(rc));
    else if (r->index == 0)
      crnet__log("cannot start %s: %s", opt->argv[0], uv_strerror(rc));
    else
      crnet__log("cannot start %s as rank %d: %s", opt->argv[0], r->index,
                 uv_strerror(rc));
    crnet__launch_job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
  }
  if (opt->timeout_s > 0 && job->stop == RUNNING)
    uv_timer_start(&job->timeout_timer, on_timeout,
                   (uint64_t)ceil(opt->timeout_s * 1000), 0);
  if (opt->hosts.n > 0)
    uv_timer_start(&job->heartbeat_timer, crnet__launch_on_heartbeat,
                   HEARTBEAT_MS, HEARTBEAT_MS);
out:
  /* The server keeps its own copy. */
  crnet__wipe(key, sizeof key);
  crnet__free_words(env);
  free(src);
}

/* ---- the job --------------------------------------------------------- */

/* The processes to watch: every rank for a job on this host (or an agent's
 * share); with a host list, each local rank and one SSH session per other
 * host that has ranks. */
static struct rank *make_procs(struct job *job) {
  const struct options *opt = job->opt;
  int n = 0;
  if (job->agent != NULL)
    n = job->agent->count;
  else if (opt->hosts.n == 0)
    n = opt->nranks;
  else
    for (int h = 0; h < opt->hosts.n; h++)
      n += opt->hosts.hosts[h].local ? opt->hosts.hosts[h].count
                                     : opt->hosts.hosts[h].count > 0;
  /* Room for the ranks --restart starts again (start_again). */
  struct rank *ranks =
      calloc((size_t)(n > 0 ? n : 1) + (size_t)job->restarts, sizeof *ranks);
  if (ranks == NULL)
    return NULL;
  job->nprocs = n;
  job->procs_cap = n + job->restarts;
  int k = 0;
  if (job->agent != NULL || opt->hosts.n == 0) {
    int first = job->agent != NULL ? job->agent->first : 0;
    for (; k < n; k++) {
      ranks[k].index = first + k;
      ranks[k].count = 1;
      ranks[k].local = job->nlocal++;
    }
  } else {
    for (int h = 0; h < opt->hosts.n; h++) {
      const crnet__host *host = &opt->hosts.hosts[h];
      if (host->count == 0)
        continue;
      if (!host->local) {
        ranks[k].index = host->first;
        ranks[k].count = host->count;
        ranks[k++].host = host;
        continue;
      }
      for (int i = 0; i < host->count; i++) {
        ranks[k].index = host->first + i;
        ranks[k].local = job->nlocal++;
        ranks[k++].count = 1;
      }
    }
  }
  for (int i = 0; i < n; i++) {
    ranks[i].job = job;
    ranks[i].blamed = -1;
  }
  return ranks;
}

int crnet__launch_job_run(const struct options *opt,
                          crnet__agent_config *agent) {
  int exit_code = EXIT_INTERNAL;
  struct rank *ranks = NULL;
  struct job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    crnet__log("out of memory");
    goto out;
  }
  job->opt = opt;
  job->agent = agent;
  if (agent != NULL) {
    job->size = agent->size;
    job->xvars = (const char *const *)agent->env;
    job->nxvars = agent->nenv;
    job->init_timeout_str = agent->init_timeout;
    job->grace_ms = (uint64_t)agent->grace_ms;
  } else {
    job->size = opt->nranks;
    job->xvars = opt->xvars;
    job->nxvars = opt->nxvars;
    job->init_timeout_str = opt->init_timeout_str;
    job->grace_ms = opt->grace_ms;
  }
  for (int i = 0; i < job->nxvars; i++)
    if (strcmp(job->xvars[i], "CRNET_ON_FAILURE=continue") == 0)
      job->keep_going = 1;
  if (job->agent == NULL)
    job->restarts = job->restarts_left = opt->restarts;
  /* An agent starts ranks again when crlaunch says (agent.c), up to the
   * job's CRNET_RESTARTS. */
  for (int i = 0; i < job->nxvars && job->agent != NULL; i++)
    if (strncmp(job->xvars[i], "CRNET_RESTARTS=", 15) == 0)
      job->restarts = atoi(job->xvars[i] + 15);
  ranks = make_procs(job);
  if (ranks == NULL) {
    crnet__log("out of memory");
    goto out;
  }
  job->ranks = ranks;
  if (crnet__launch_restart_track(job) != 0) {
    crnet__log("out of memory");
    goto out;
  }
  char why[256];
  if (crnet__bind_plan_init(&job->bind,
                            agent != NULL && agent->bind_none
                                ? CRNET__BIND_NONE
                                : opt->bind,
                            job->nlocal, why, sizeof why) != 0) {
    crnet__log("%s", why);
    goto out;
  }
  if (agent == NULL && opt->hosts.n > 0) {
    char *self = realpath("/proc/self/exe", NULL);
    snprintf(job->remote_crlaunch, sizeof job->remote_crlaunch, "%s",
             opt->remote_crlaunch != NULL ? opt->remote_crlaunch
             : self != NULL               ? self
                                          : "crlaunch");
    free(self);
  }
  int rc = uv_loop_init(&job->loop);
  if (rc != 0) {
    crnet__log("cannot start an event loop: %s", uv_strerror(rc));
    goto out;
  }
  crnet__fwd_sink_init(&job->out, STDOUT_FILENO);
  crnet__fwd_sink_init(&job->err, STDERR_FILENO);
  uv_timer_init(&job->loop, &job->timeout_timer);
  uv_timer_init(&job->loop, &job->stop_timer);
  uv_timer_init(&job->loop, &job->drain_timer);
  uv_timer_init(&job->loop, &job->judge_timer);
  uv_timer_init(&job->loop, &job->abandon_timer);
  uv_timer_init(&job->loop, &job->heartbeat_timer);
  job->timeout_timer.data = job->stop_timer.data = job;
  job->drain_timer.data = job->judge_timer.data = job;
  job->abandon_timer.data = job->heartbeat_timer.data = job;
  for (size_t i = 0; i < NSIGNALS; i++) {
    uv_signal_init(&job->loop, &job->signals[i]);
    job->signals[i].data = job;
    rc = uv_signal_start(&job->signals[i], on_signal, forwarded_signals[i]);
    if (rc != 0) {
      crnet__log("cannot watch signal %d: %s", forwarded_signals[i],
                 uv_strerror(rc));
      crnet__launch_job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    }
  }
  if (job->stop == RUNNING) {
    if (agent != NULL)
      crnet__launch_agent_start(job);
    else
      job_start(job);
  }
  maybe_finish(job);
  uv_run(&job->loop, UV_RUN_DEFAULT);
  crnet__launch_remove_key_file(job);
  rc = uv_loop_close(&job->loop);
  assert(rc == 0);
  exit_code = job->stop == RUNNING ? keep_going_status(job) : job->exit_code;
out:
  if (job != NULL) {
    crnet__bind_plan_free(&job->bind);
    crnet__launch_restart_untrack(job);
    free_env(job);
    free(job->stats);
    free(job->rank_stats);
  }
  free(ranks);
  free(job);
  return exit_code;
}

int main(int argc, char **argv) {
  struct options opt;
  int rc = crnet__launch_parse_options(&opt, argc, argv);
  if (rc < 0 && opt.settings) {
    rc = crnet__launch_print_settings(&opt);
  } else if (rc < 0) {
    crnet__log_set_prefix("crlaunch: ");
    ensure_std_fds();
    /* A reader of our output that goes away must not kill us before the
     * ranks are stopped and the key file is gone; forward.c handles EPIPE.
     * libuv resets the disposition in the ranks. */
    signal(SIGPIPE, SIG_IGN);
    rc = opt.agent ? crnet__launch_agent_main(&opt)
                   : crnet__launch_job_run(&opt, NULL);
  }
  crnet__hosts_free(&opt.hosts);
  free(opt.xvars);
  return rc;
}
