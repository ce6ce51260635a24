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
 *      a failure or a failed process (tell_ranks).
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
 * Several hosts (hosts.h, remote.h): the ranks of a host other than this one
 * are one watched process here, the SSH session of an agent there: a
 * crlaunch started with --agent, which reads its configuration and the key
 * from the session's stdin and then runs the same lifecycle as above for its
 * share of the ranks, without a rendezvous of its own. Its failed ranks are
 * reported at once on its stderr, signals and "stop" go to it as commands on
 * its stdin, and the end of that stdin stops its ranks. So from here a remote
 * host looks like one rank that may stand for several: judge_failures, the
 * timers and the exit status treat both alike.
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
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "bind.h"
#include "crnet.h"
#include "crnet_version.h"
#include "forward.h"
#include "handshake.h"
#include "hosts.h"
#include "log.h"
#include "netaddr.h"
#include "remote.h"
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
#define ABANDON_MS 5000       /* after SIGKILL, for an agent to report back */
#define HEARTBEAT_MS 5000     /* crlaunch to its agents, "still here" */
#define SILENCE_MS 60000      /* an agent without a word this long: lost
                                 (CRNET_AGENT_SILENCE, seconds, may say) */

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
    "CRNET_JOB_KEY_FILE", "CRNET_LAUNCHER", "CRNET_LAUNCHER_FD",
    "CRNET_HOST_CPUS",    NULL};

/* The descriptor each rank on this host finds its report socket at
 * (CRNET_LAUNCHER_FD): how crnet_comm_abort() tells crlaunch the code. */
#define REPORT_FD 3

struct options {
  int nranks;
  int tag_output;
  int agent;                   /* --agent: started by crlaunch over SSH */
  int encrypt;                 /* --encrypt */
  const char *coll_timeout;    /* --coll-timeout */
  int stats;                   /* --stats: CRNET_STATS=1, print the table */
  crnet__bind_mode bind;       /* --bind */
  int report_bindings;         /* --report-bindings */
  char coll_timeout_var[64];   /* CRNET_TIMEOUT=... for the ranks */
  const char *hosts_spec;      /* --hosts */
  const char *hostfile;        /* --hostfile */
  const char *ssh;             /* --ssh, else CRNET_SSH, else "ssh" */
  const char *remote_crlaunch; /* --remote-crlaunch */
  crnet__hostlist hosts;       /* from --hosts or --hostfile, placed */
  double timeout_s; /* 0: none */
  const char **xvars; /* -x arguments as given */
  int nxvars;
  char **argv;        /* the program and its arguments */
  const char *init_timeout_str;
  double init_timeout_s;
};

struct job;

/* One collective's counters summed over the ranks that reported it. */
struct stats_row {
  char coll[24];
  int nranks;
  uint64_t calls, failed, rounds, sent, received;
  double seconds, seconds_max, wait, reduce;
};
#define MAX_STATS_ROWS 16

/* One rank's totals over its collectives. */
struct rank_stats {
  int seen;
  uint64_t calls, sent, received;
  double seconds;
};

/* A process crlaunch started and watches: one rank on this host, or the
 * SSH session of the agent running `count` ranks on another host. */
struct rank {
  struct job *job;
  int index; /* the (first) rank */
  int count; /* 1, or the ranks of a remote host */
  int local; /* a rank here: its place among this host's ranks */
  const crnet__host *host; /* NULL for a rank on this host */
  uv_pipe_t ctl;           /* remote: the session's stdin (remote.h) */
  int ctl_open;
  int reported;            /* remote: its agent reported a failed rank: */
  int fail_rank;           /* which, and its pid (status as below) */
  int fail_pid;
  int blamed;              /* the rank its first failure is due to (a
                              "fail" report), or -1 */
  int pid;
  int live;     /* spawned and not yet reaped */
  int failed;   /* reaped with a non-zero status or by a signal */
  int gone_seq; /* when it was first seen going (see judge_failures) */
  int64_t status;
  int term_signal;
  uv_process_t proc;
  crnet__fwd_stream out;
  crnet__fwd_stream err;
  crnet__fwd_stream rep; /* a rank here: its reports (REPORT_FD) */
};

enum stop_reason {
  RUNNING = 0,
  STOP_FAILURE, /* a rank failed */
  STOP_TIMEOUT, /* --timeout */
  STOP_SIGNAL,  /* crlaunch got a signal */
  STOP_ERROR,   /* crlaunch could not start the job */
  STOP_LOST,    /* agent: crlaunch went away */
};

struct job {
  uv_loop_t loop;
  const struct options *opt;
  struct rank *ranks; /* nprocs of them */
  int nprocs;
  int size;          /* ranks in the job, on every host */
  int nlocal;        /* of them on this host */
  crnet__bind_plan bind; /* their CPUs (bind.h) */
  const char *const *xvars; /* -x settings, or what an agent was sent */
  int nxvars;
  const char *init_timeout_str;
  crnet__agent_config *agent; /* agent mode: what crlaunch sent */
  uv_pipe_t ctl_in;           /* agent mode: commands from crlaunch */
  int ctl_in_open;
  uv_timer_t abandon_timer;   /* SIGKILL sent, agents still silent */
  uv_timer_t heartbeat_timer; /* crlaunch: beats to the agents; an agent:
                                 how long crlaunch has been silent */
  char remote_crlaunch[4096]; /* crlaunch's path on the other hosts */
  char report[17];            /* the agents' report marker (remote.h) */
  uint64_t silence_ms;        /* agent: SILENCE_MS or CRNET_AGENT_SILENCE */
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
  int aborted;   /* a rank called crnet_comm_abort(); it decided */
  /* The ranks' counters (CRNET_STATS, crlaunch --stats): summed per
   * collective, and per rank; NULL until the first report. */
  struct stats_row *stats;
  int nstats;
  struct rank_stats *rank_stats;
  int finishing; /* handles are being closed */
  char **env;    /* the ranks' environment; env[rank_slot] is CRNET_RANK,
                    env[rank_slot + 1] CRNET_LAUNCHER_FD (spawn_proc) */
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
          "Starts N ranks of a crnet program on this host or, over SSH, on\n"
          "several, serves their rendezvous and forwards their output line by\n"
          "line.\n"
          "\n"
          "Options:\n"
          "  -n N            number of ranks to start (1..%d); with --hosts\n"
          "                  or --hostfile, default: every slot\n"
          "  --hosts LIST    run on these hosts: h1:8,h2:8 (host:slots,\n"
          "                  [IPv6]:slots); ranks fill the hosts in order\n"
          "  --hostfile FILE one host per line, optionally \"slots=N\"\n"
          "  --ssh CMD       how to reach a host (default $CRNET_SSH, else\n"
          "                  \"ssh\"), e.g. --ssh \"ssh -p 2222 -i key\"\n"
          "  --remote-crlaunch PATH\n"
          "                  crlaunch on the other hosts (default: this\n"
          "                  crlaunch's own path)\n"
          "  --encrypt       encrypt every connection (CRNET_ENCRYPT=1)\n"
          "  --tag-output    prefix every line of output with \"[rank] \"\n"
          "  --bind auto|none\n"
          "                  auto (default): give each rank of a host CPUs of\n"
          "                  its own (an equal block of them; with more ranks\n"
          "                  than CPUs, one each in turn); none: let every\n"
          "                  rank run on any CPU crlaunch may\n"
          "  --report-bindings\n"
          "                  print each rank's CPUs as it starts\n"
          "  --timeout SEC   stop the job after SEC seconds (exit status 124)\n"
          "  --coll-timeout SEC\n"
          "                  fail any collective that takes longer than SEC\n"
          "                  seconds, naming the ranks it waits for\n"
          "                  (CRNET_TIMEOUT=SEC)\n"
          "  --stats         print a table of the ranks' collectives at the\n"
          "                  end: calls, time, waiting, reducing, bytes\n"
          "                  (CRNET_STATS=1)\n"
          "  -x VAR[=VAL]    set VAR to VAL in the ranks' environment, or pass\n"
          "                  crlaunch's own value of VAR (repeatable)\n"
          "  -h, --help      print this help and exit\n"
          "  -V, --version   print the version and exit\n"
          "\n"
          "Exit status: 0 if every rank exits 0; the code given to\n"
          "crnet_comm_abort() if a rank aborted the job; else the status of the\n"
          "first rank that failed (128+signal if it was killed); 124 on --timeout;\n"
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
  enum {
    OPT_TAG = 256,
    OPT_TIMEOUT,
    OPT_HOSTS,
    OPT_HOSTFILE,
    OPT_SSH,
    OPT_REMOTE_CRLAUNCH,
    OPT_ENCRYPT,
    OPT_COLL_TIMEOUT,
    OPT_STATS,
    OPT_BIND,
    OPT_REPORT_BINDINGS,
    OPT_AGENT
  };
  static const struct option longopts[] = {
      {"tag-output", no_argument, NULL, OPT_TAG},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"hosts", required_argument, NULL, OPT_HOSTS},
      {"hostfile", required_argument, NULL, OPT_HOSTFILE},
      {"ssh", required_argument, NULL, OPT_SSH},
      {"remote-crlaunch", required_argument, NULL, OPT_REMOTE_CRLAUNCH},
      {"encrypt", no_argument, NULL, OPT_ENCRYPT},
      {"coll-timeout", required_argument, NULL, OPT_COLL_TIMEOUT},
      {"stats", no_argument, NULL, OPT_STATS},
      {"bind", required_argument, NULL, OPT_BIND},
      {"report-bindings", no_argument, NULL, OPT_REPORT_BINDINGS},
      {"agent", no_argument, NULL, OPT_AGENT},
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
    case OPT_HOSTS:
      opt->hosts_spec = optarg;
      break;
    case OPT_HOSTFILE:
      opt->hostfile = optarg;
      break;
    case OPT_SSH:
      opt->ssh = optarg;
      break;
    case OPT_REMOTE_CRLAUNCH:
      if (optarg[0] != '/')
        return usage_error("--remote-crlaunch '%s': not an absolute path",
                           optarg);
      opt->remote_crlaunch = optarg;
      break;
    case OPT_ENCRYPT:
      opt->encrypt = 1;
      break;
    case OPT_AGENT:
      opt->agent = 1;
      break;
    case OPT_STATS:
      opt->stats = 1;
      break;
    case OPT_BIND:
      if (strcmp(optarg, "auto") == 0)
        opt->bind = CRNET__BIND_AUTO;
      else if (strcmp(optarg, "none") == 0)
        opt->bind = CRNET__BIND_NONE;
      else
        return usage_error("--bind '%s': give auto or none", optarg);
      break;
    case OPT_REPORT_BINDINGS:
      opt->report_bindings = 1;
      break;
    case OPT_TIMEOUT:
      opt->timeout_s = parse_seconds(optarg, MAX_TIMEOUT_S);
      if (opt->timeout_s < 0)
        return usage_error("--timeout '%s': not a positive number of seconds",
                           optarg);
      break;
    case OPT_COLL_TIMEOUT:
      if (strlen(optarg) > 32 || parse_seconds(optarg, MAX_TIMEOUT_S) < 0)
        return usage_error(
            "--coll-timeout '%s': not a positive number of seconds", optarg);
      opt->coll_timeout = optarg;
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
  if (opt->agent) {
    /* Everything else comes over stdin (remote.h). */
    if (optind < argc || opt->nranks >= 0 || opt->hosts_spec || opt->hostfile)
      return usage_error("--agent takes no other arguments");
    return -1;
  }
  if (opt->hosts_spec != NULL && opt->hostfile != NULL)
    return usage_error("give --hosts or --hostfile, not both");
  if (opt->nranks < 0 && opt->hosts_spec == NULL && opt->hostfile == NULL)
    return usage_error("missing -n N, the number of ranks");
  if (optind >= argc)
    return usage_error("no program to run");
  opt->argv = argv + optind;
  if (opt->ssh == NULL)
    opt->ssh = getenv("CRNET_SSH");
  if (opt->ssh == NULL || opt->ssh[0] == '\0')
    opt->ssh = "ssh";
  if (opt->encrypt) {
    for (int i = 0; i < opt->nxvars; i++)
      if (names_var(opt->xvars[i], "CRNET_ENCRYPT", 13))
        return usage_error("give --encrypt or -x CRNET_ENCRYPT, not both");
    opt->xvars[opt->nxvars++] = "CRNET_ENCRYPT=1";
  }
  if (opt->stats) {
    for (int i = 0; i < opt->nxvars; i++)
      if (names_var(opt->xvars[i], "CRNET_STATS", 11))
        return usage_error("give --stats or -x CRNET_STATS, not both");
    opt->xvars[opt->nxvars++] = "CRNET_STATS=1";
  }
  if (opt->coll_timeout != NULL) {
    for (int i = 0; i < opt->nxvars; i++)
      if (names_var(opt->xvars[i], "CRNET_TIMEOUT", 13))
        return usage_error("give --coll-timeout or -x CRNET_TIMEOUT, not both");
    snprintf(opt->coll_timeout_var, sizeof opt->coll_timeout_var,
             "CRNET_TIMEOUT=%s", opt->coll_timeout);
    opt->xvars[opt->nxvars++] = opt->coll_timeout_var;
  }
  if (opt->hosts_spec != NULL || opt->hostfile != NULL) {
    char why[512];
    char self[256] = "";
    int rc = opt->hosts_spec != NULL
                 ? crnet__hosts_parse_list(&opt->hosts, opt->hosts_spec, why,
                                           sizeof why)
                 : crnet__hosts_parse_file(&opt->hosts, opt->hostfile, why,
                                           sizeof why);
    if (rc == 0 && opt->nranks < 0)
      opt->nranks = opt->hosts.slots > MAX_RANKS ? MAX_RANKS
                                                 : (int)opt->hosts.slots;
    gethostname(self, sizeof self - 1);
    if (rc == 0)
      rc = crnet__hosts_place(&opt->hosts, opt->nranks, self, why,
                              sizeof why);
    if (rc != 0)
      return usage_error("%s %s: %s",
                         opt->hosts_spec != NULL ? "--hosts" : "--hostfile",
                         opt->hosts_spec != NULL ? opt->hosts_spec
                                                 : opt->hostfile,
                         why);
  }

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

static int skip_inherited(const struct job *job, const char *entry) {
  for (const char *const *r = reserved_vars; *r != NULL; r++)
    if (names_var(entry, *r, strlen(*r)))
      return 1;
  if (names_var(entry, "CRNET_INIT_TIMEOUT", 18))
    return 1;
  for (int i = 0; i < job->nxvars; i++)
    if (names_var(entry, job->xvars[i], (size_t)var_name_len(job->xvars[i])))
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

/* Our environment minus what we set, plus CRNET_* and -x (or, in an agent,
 * the variables crlaunch sent); the last slot before the NULL is filled
 * with CRNET_RANK per rank. 0 or -1 (said). */
static int build_env(struct job *job, const char *rendezvous) {
  int n = 0;
  while (environ[n] != NULL)
    n++;
  job->env = calloc((size_t)(n + job->nxvars + 10), sizeof *job->env);
  if (job->env == NULL)
    goto nomem;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!skip_inherited(job, environ[i]))
      job->env[k++] = environ[i];
  job->env_owned = k;
  job->rank_slot = k; /* grows as entries are added, for free_env */
  /* CRNET_HOST_CPUS: the CPUs this host's ranks share, which a bound rank
   * cannot count from its own mask (it decides how to wait by them). */
  char *add[6];
  add[0] = str_printf("CRNET_SIZE=%d", job->size);
  add[1] = str_printf("CRNET_RENDEZVOUS=%s", rendezvous);
  add[2] = str_printf("CRNET_JOB_KEY_FILE=%s", job->keyfile);
  add[3] = str_printf("CRNET_LAUNCHER=crlaunch");
  add[4] = str_printf("CRNET_INIT_TIMEOUT=%s", job->init_timeout_str);
  add[5] = str_printf("CRNET_HOST_CPUS=%d", job->bind.ncpus);
  for (int i = 0; i < 6; i++)
    job->env[job->rank_slot++] = add[i];
  for (int i = 0; i < 6; i++)
    if (add[i] == NULL)
      goto nomem;
  for (int i = 0; i < job->nxvars; i++) {
    const char *x = job->xvars[i];
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

static void on_ctl_written(uv_write_t *w, int status) {
  if (status != 0)
    crnet__debug("cannot reach an agent: %s", uv_strerror(status));
  free(w);
}

/* Writes bytes to a remote host's agent. `data` is copied. */
static void ctl_send(struct rank *r, const void *data, size_t len) {
  if (!r->ctl_open)
    return;
  uv_write_t *w = malloc(sizeof *w + len);
  if (w == NULL) {
    crnet__log("out of memory");
    return;
  }
  memcpy(w + 1, data, len);
  uv_buf_t buf = uv_buf_init((char *)(w + 1), (unsigned)len);
  if (uv_write(w, (uv_stream_t *)&r->ctl, &buf, 1, on_ctl_written) != 0)
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
static void tell_ranks(struct job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tell_ranks(struct job *job, const char *fmt, ...) {
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
      ctl_send(r, line, (size_t)n + 1);
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
static int signal_live(struct job *job, int sig) {
  int n = 0;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (!r->live)
      continue;
    if (r->host != NULL) {
      char cmd[2] = {CRNET__AGENT_SIGNAL, (char)sig};
      ctl_send(r, cmd, sizeof cmd);
      n += r->count;
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
  int n = signal_live(job, SIGKILL);
  if (n > 0)
    crnet__log("killing %d rank%s that did not stop", n, plural(n));
  if (job->agent == NULL)
    uv_timer_start(&job->abandon_timer, on_abandon_time, ABANDON_MS, 0);
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
  case STOP_LOST:
    terminate(job);
    break;
  case RUNNING:
    assert(0);
  }
}

static void judge_failures(struct job *job);
static void print_stats(struct job *job);

static void report_up(struct job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An agent: one report line to crlaunch on our stderr, "<marker> " and
 * the text (remote.h), between the ranks' forwarded lines. */
static void report_up(struct job *job, const char *fmt, ...) {
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
  judge_failures(job);
  job->finishing = 1;
  print_stats(job);
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
    char cmd = CRNET__AGENT_KEY_DONE;
    for (int i = 0; i < job->nprocs; i++)
      if (job->ranks[i].host != NULL)
        ctl_send(&job->ranks[i], &cmd, 1);
  } else if (status == CRNET_ETIMEDOUT && nmissing > 0 &&
             nmissing < job->size) {
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
    else if (first->status == 255)
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
  if (!r->reported) {
    r->status = status;
    r->term_signal = term_signal;
  }
  mark_gone(r);
  if (job->agent != NULL && (status != 0 || term_signal != 0))
    report_up(job, "exit %d %d %d %d", r->index, r->pid, (int)status,
              term_signal);
  /* Only failed ranks: a rank that ends well has said goodbye to its
   * peers, and the word would cost p lines per exit. */
  if (r->host == NULL && (status != 0 || term_signal != 0))
    tell_ranks(job, "gone %d %d %d\n", r->index, (int)status, term_signal);
  job->nlive--;
  uv_close((uv_handle_t *)proc, NULL);
  ctl_close(r);
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

static void pass_signal(struct job *job, int signum) {
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

static void on_signal(uv_signal_t *h, int signum) {
  pass_signal(h->data, signum);
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
static void job_aborted(struct job *job, struct rank *r, int rank, int pid,
                        int code) {
  if (job->stop != RUNNING || job->aborted)
    return;
  job->aborted = 1;
  job->judging = 0;
  uv_timer_stop(&job->judge_timer);
  if (job->agent != NULL) {
    report_up(job, "abort %d %d %d", rank, pid, code);
  } else if (r->host != NULL) {
    crnet__log("rank %d (pid %d on host %s) aborted the job with code %d",
               rank, pid, r->host->name, code);
  } else {
    crnet__log("rank %d (pid %d) aborted the job with code %d", rank, pid,
               code);
  }
  tell_ranks(job, "abort %d %d\n", rank, code);
  job_stop(job, STOP_FAILURE, abort_status(code));
}

/* Rank `rank` (of r) failed because of rank `origin` (comm.c,
 * report_failure): judge_failures names origin rather than rank if origin
 * failed too. The first report of r counts; an agent passes it on. */
static void take_blame(struct job *job, struct rank *r, int rank,
                       int origin) {
  if (job->agent != NULL)
    report_up(job, "fail %d %d", rank, origin);
  if (r->blamed < 0)
    r->blamed = origin;
  tell_ranks(job, "fail %d %d\n", rank, origin);
}

/* A rank's counters at its end (comm.c, report_stats): "stats <rank>
 * <collective> <calls> <failed> <rounds> <sent> <received> <seconds>
 * <wait> <reduce>", for a rank in [first, first + count). 0, or -1 if
 * malformed. An agent passes the line on to crlaunch. */
static int take_stats(struct job *job, const char *line, int first,
                      int count) {
  struct stats_row in;
  int rank;
  char tail;
  memset(&in, 0, sizeof in);
  if (sscanf(line,
             "stats %d %23s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
             " %" SCNu64 " %lf %lf %lf%c",
             &rank, in.coll, &in.calls, &in.failed, &in.rounds, &in.sent,
             &in.received, &in.seconds, &in.wait, &in.reduce, &tail) != 11 ||
      tail != '\n' || rank < first || rank >= first + count ||
      rank >= job->size)
    return -1;
  if (job->agent != NULL) {
    report_up(job, "%.*s", (int)strlen(line) - 1, line); /* no newline */
    return 0;
  }
  if (job->stats == NULL) {
    job->stats = calloc(MAX_STATS_ROWS, sizeof *job->stats);
    job->rank_stats = calloc((size_t)job->size, sizeof *job->rank_stats);
    if (job->stats == NULL || job->rank_stats == NULL) {
      free(job->stats);
      free(job->rank_stats);
      job->stats = NULL;
      job->rank_stats = NULL;
      return 0; /* no table, the job goes on */
    }
  }
  struct stats_row *row = NULL;
  for (int i = 0; i < job->nstats && row == NULL; i++)
    if (strcmp(job->stats[i].coll, in.coll) == 0)
      row = &job->stats[i];
  if (row == NULL) {
    if (job->nstats == MAX_STATS_ROWS)
      return -1;
    row = &job->stats[job->nstats++];
    snprintf(row->coll, sizeof row->coll, "%s", in.coll);
  }
  row->nranks++;
  row->calls += in.calls;
  row->failed += in.failed;
  row->rounds += in.rounds;
  row->sent += in.sent;
  row->received += in.received;
  row->seconds += in.seconds;
  row->wait += in.wait;
  row->reduce += in.reduce;
  if (in.calls > 0 && in.seconds / (double)in.calls > row->seconds_max)
    row->seconds_max = in.seconds / (double)in.calls;
  struct rank_stats *rs = &job->rank_stats[rank];
  rs->seen = 1;
  rs->calls += in.calls;
  rs->sent += in.sent;
  rs->received += in.received;
  rs->seconds += in.seconds;
  return 0;
}

static double mib(uint64_t bytes) {
  return (double)bytes / (1024.0 * 1024.0);
}

/* "12.3 us", "4.56 ms", "7.89 s" */
static void format_time(char *buf, size_t n, double s) {
  if (s < 1e-3)
    snprintf(buf, n, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, n, "%.2f ms", s * 1e3);
  else
    snprintf(buf, n, "%.2f s", s);
}

/* crlaunch --stats: the table of the counters the ranks reported, on
 * stderr once every rank is gone. Per collective: calls per rank, the mean
 * time of a call over ranks and the slowest rank's mean, and the shares
 * of that time spent waiting for messages and reducing; per rank: what it
 * sent and received and its time in collectives (every rank for jobs of up
 * to 16, else the extremes). */
static void print_stats(struct job *job) {
  int seen = 0;
  if (job->stats == NULL)
    return;
  for (int r = 0; r < job->size; r++)
    seen += job->rank_stats[r].seen;
  fprintf(stderr,
          "crlaunch: collectives of %d rank%s (CRNET_STATS; %d reported)\n"
          "  %-15s %10s %10s %12s %12s %6s %6s %12s\n",
          job->size, plural(job->size), seen, "collective", "calls/rank",
          "rounds", "mean/call", "max/call", "wait", "reduce", "MiB sent");
  for (int i = 0; i < job->nstats; i++) {
    const struct stats_row *row = &job->stats[i];
    char mean[24], max[24];
    double per_call = row->calls > 0 ? row->seconds / (double)row->calls : 0;
    format_time(mean, sizeof mean, per_call);
    format_time(max, sizeof max, row->seconds_max);
    fprintf(stderr, "  %-15s %10.0f %10.1f %12s %12s %5.0f%% %5.0f%% %12.2f\n",
            row->coll, (double)row->calls / row->nranks,
            row->calls > 0 ? (double)row->rounds / (double)row->calls : 0.0,
            mean, max,
            row->seconds > 0 ? 100 * row->wait / row->seconds : 0.0,
            row->seconds > 0 ? 100 * row->reduce / row->seconds : 0.0,
            mib(row->sent));
  }
  fprintf(stderr, "  %-6s %12s %12s %14s\n", "rank", "MiB sent",
          "MiB received", "in collectives");
  int lo = -1, hi = -1;
  for (int r = 0; r < job->size; r++) {
    const struct rank_stats *rs = &job->rank_stats[r];
    if (!rs->seen)
      continue;
    if (lo < 0 || rs->seconds < job->rank_stats[lo].seconds)
      lo = r;
    if (hi < 0 || rs->seconds > job->rank_stats[hi].seconds)
      hi = r;
    if (job->size <= 16) {
      char t[24];
      format_time(t, sizeof t, rs->seconds);
      fprintf(stderr, "  %-6d %12.2f %12.2f %14s\n", r, mib(rs->sent),
              mib(rs->received), t);
    }
  }
  if (job->size > 16 && lo >= 0) {
    int ends[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
      const struct rank_stats *rs = &job->rank_stats[ends[i]];
      char t[24];
      format_time(t, sizeof t, rs->seconds);
      fprintf(stderr, "  %-6d %12.2f %12.2f %14s  (%s)\n", ends[i],
              mib(rs->sent), mib(rs->received), t,
              i == 0 ? "least time" : "most time");
    }
  }
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
      job_aborted(r->job, r, rank, r->pid, code);
      return;
    }
    if (strncmp(buf, "stats ", 6) == 0 &&
        take_stats(r->job, buf, r->index, 1) == 0)
      return;
    if (sscanf(buf, "fail %d %d%c", &rank, &code, &tail) == 3 &&
        tail == '\n' && rank == r->index && code >= 0 &&
        code < r->job->size) {
      take_blame(r->job, r, rank, code);
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
static int spawn_proc(struct job *job, struct rank *r, char **args,
                      char **env, int in, const char *prefix, int detached) {
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
  struct stat st;
  if (!detached && env != NULL) {
    if (fstat(rep[1], &st) != 0) {
      rc = uv_translate_sys_error(errno);
      goto out;
    }
    snprintf(rep_var, sizeof rep_var, "CRNET_LAUNCHER_FD=%d:%llu", REPORT_FD,
             (unsigned long long)st.st_ino);
    env[job->rank_slot + 1] = rep_var;
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
  if (!detached && env != NULL)
    env[job->rank_slot + 1] = NULL;
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
static int spawn_rank(struct job *job, struct rank *r, char **argv) {
  char rank_var[32];
  char prefix[24] = "";
  snprintf(rank_var, sizeof rank_var, "CRNET_RANK=%d", r->index);
  if (job->opt->tag_output ||
      (job->agent != NULL && job->agent->tag_output))
    snprintf(prefix, sizeof prefix, "[%d] ", r->index);
  job->env[job->rank_slot] = rank_var;
  int in = r->index == 0 && job->agent == NULL ? STDIN_FILENO : -1;
  /* The child inherits this thread's CPUs: set for the spawn, then back. */
  cpu_set_t saved;
  char cpus[256];
  int bound = crnet__bind_enter(&job->bind, r->local, &saved, cpus,
                                sizeof cpus);
  if (bound < 0)
    crnet__log("cannot bind rank %d to CPUs %s: %s; it runs unbound",
               r->index, cpus, strerror(errno));
  int rc = spawn_proc(job, r, argv, job->env, in, prefix, 0);
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
  return rc;
}

/* The environment sent to the agents: crlaunch's CRNET_* variables (a
 * remote login has its own environment for the rest) and the -x settings.
 * A fresh NULL-terminated list, or NULL when out of memory. */
static char **remote_env(struct job *job, int *n) {
  int cap = job->nxvars + 1;
  for (char **e = environ; *e != NULL; e++)
    cap++;
  char **list = calloc((size_t)cap, sizeof *list);
  if (list == NULL)
    return NULL;
  *n = 0;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "CRNET_", 6) == 0 && !skip_inherited(job, *e) &&
        (list[*n] = strdup(*e)) != NULL)
      (*n)++;
  for (int i = 0; i < job->nxvars; i++) {
    const char *x = job->xvars[i];
    int len = var_name_len(x);
    if (names_var(x, "CRNET_INIT_TIMEOUT", 18))
      continue;
    if (x[len] == '=') {
      list[*n] = strdup(x);
    } else {
      const char *val = getenv(x);
      if (val == NULL)
        continue; /* build_env says so for the local ranks */
      list[*n] = str_printf("%s=%s", x, val);
    }
    if (list[*n] != NULL)
      (*n)++;
  }
  return list;
}

/* The name ssh really connects to for `host`, from `ssh -G host` (which
 * prints the configuration without connecting): for a Host alias of
 * ~/.ssh/config, its HostName. 0 or -1. */
static int ssh_hostname(const struct job *job, const char *host, char *out,
                        size_t len) {
  char why[256];
  char **words = NULL;
  int nwords = 0, fds[2] = {-1, -1}, rc = -1, st;
  if (crnet__split_words(job->opt->ssh, &words, &nwords, why, sizeof why) != 0)
    return -1;
  char **argv = calloc((size_t)nwords + 3, sizeof *argv);
  if (argv == NULL || pipe2(fds, O_CLOEXEC) != 0)
    goto out;
  for (int i = 0; i < nwords; i++)
    argv[i] = words[i];
  argv[nwords] = "-G";
  argv[nwords + 1] = (char *)host;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  fds[1] = -1;
  if (pid < 0)
    goto out;
  FILE *f = fdopen(fds[0], "r");
  if (f != NULL) {
    fds[0] = -1;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL)
      if (rc != 0 && strncmp(line, "hostname ", 9) == 0) {
        line[strcspn(line, "\n")] = '\0';
        if (strlen(line + 9) < len) {
          memcpy(out, line + 9, strlen(line + 9) + 1);
          rc = 0;
        }
      }
    fclose(f);
  }
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
out:
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  free(argv);
  crnet__free_words(words);
  return rc;
}

/* The address of this host that packets to `host` leave from, in numeric
 * form: what the ranks there must connect to. Resolves the name once (or,
 * for a name only ssh knows, the HostName ssh's configuration gives it); a
 * UDP connect sends nothing, it only asks the routing table. 0 or -1
 * (said). */
static int route_source(const struct job *job, const char *host, char *addr,
                        size_t len) {
  const char *at = strrchr(host, '@');
  const char *name = at != NULL ? at + 1 : host;
  char real[256];
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_DGRAM;
  int gai = getaddrinfo(name, "9", &hints, &res);
  if (gai != 0 && ssh_hostname(job, host, real, sizeof real) == 0 &&
      strcmp(real, name) != 0)
    gai = getaddrinfo(real, "9", &hints, &res);
  if (gai != 0) {
    crnet__log("cannot resolve host %s: %s (set CRNET_IFACE to say which "
               "address of this host the others reach)",
               name, gai_strerror(gai));
    return -1;
  }
  int rc = -1;
  int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof ss;
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
    crnet__log("no route to host %s: %s", name, strerror(errno));
  } else if (ss.ss_family == AF_INET6 &&
             IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
    /* The rendezvous table carries no scope, so ranks cannot use it. */
    crnet__log("host %s is reached over an IPv6 link-local address, which "
               "the ranks cannot use: name it by another address, or set "
               "CRNET_IFACE",
               name);
  } else {
    char buf[INET6_ADDRSTRLEN];
    int v6 = ss.ss_family == AF_INET6;
    const void *a = v6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                       : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    if (inet_ntop(ss.ss_family, a, buf, sizeof buf) != NULL) {
      snprintf(addr, len, "%s", buf);
      rc = 0;
    }
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(res);
  return rc;
}

/* "addr:port", or "[addr]:port" for IPv6. */
static void format_rendezvous(char *buf, size_t len, const char *addr,
                              int port) {
  if (strchr(addr, ':') != NULL)
    snprintf(buf, len, "[%s]:%d", addr, port);
  else
    snprintf(buf, len, "%s:%d", addr, port);
}

/* A variable as the ranks will see it: its -x setting, else ours. */
static const char *rank_setting(const struct job *job, const char *name) {
  size_t len = strlen(name);
  const char *v = getenv(name);
  for (int i = 0; i < job->nxvars; i++)
    if (names_var(job->xvars[i], name, len) && job->xvars[i][len] == '=')
      v = job->xvars[i] + len + 1;
  return v;
}

/* CRNET_PORT_RANGE as the ranks will see it: lo and hi, or 0 and 0 for
 * "any port". -1 (said) when malformed. */
static int port_range(const struct job *job, int *lo, int *hi) {
  const char *v = rank_setting(job, "CRNET_PORT_RANGE");
  *lo = *hi = 0;
  if (v == NULL || v[0] == '\0')
    return 0;
  char tail;
  if (sscanf(v, "%d-%d%c", lo, hi, &tail) != 2 || *lo < 1 || *hi > 65535 ||
      *lo > *hi) {
    crnet__log("CRNET_PORT_RANGE='%s' is not lo-hi with 1 <= lo <= hi <= "
               "65535",
               v);
    return -1;
  }
  return 0;
}

/* Serves the rendezvous on `bind` at a port of CRNET_PORT_RANGE, or any.
 * Returns the port, or -1 (said). */
static int serve_rendezvous(struct job *job, const uint8_t *key,
                            const char *bind) {
  int lo, hi;
  if (port_range(job, &lo, &hi) != 0)
    return -1;
  int rc = CRNET_EIO;
  for (int port = lo; port <= hi && rc != 0; port++) {
    rc = crnet__rdv_server_start(&job->rdv, &job->loop, key, job->size, bind,
                                 port, job->opt->init_timeout_s, on_rdv_done,
                                 job);
    if (rc != 0)
      job->rdv = NULL;
  }
  if (rc != 0) {
    if (hi > 0)
      crnet__log("cannot serve the rendezvous on %s: no free port in "
                 "CRNET_PORT_RANGE=%d-%d",
                 bind, lo, hi);
    else
      crnet__log("cannot serve the rendezvous on %s: %s", bind,
                 crnet_strerror(rc));
    return -1;
  }
  return crnet__rdv_server_port(job->rdv);
}

/* A line "<marker> exit <rank> <pid> <status> <signal>" from an agent: the
 * first failure on that host counts, as a rank's own exit would. Or
 * "<marker> abort <rank> <pid> <code>": that rank aborted the job. */
static void on_agent_report(crnet__fwd_stream *s, const char *line,
                            size_t len, void *arg) {
  struct rank *r = arg;
  struct job *job = r->job;
  char buf[320];
  int rank, pid, status, sig;
  (void)s;
  if (len >= sizeof buf)
    return;
  memcpy(buf, line, len);
  buf[len] = '\0';
  const char *what = buf + strlen(job->report);
  int code;
  int origin;
  if (sscanf(what, " fail %d %d", &rank, &origin) == 2 &&
      rank >= r->index && rank < r->index + r->count && origin >= 0 &&
      origin < job->size) {
    take_blame(job, r, rank, origin);
    return;
  }
  if (strncmp(what, " stats ", 7) == 0) {
    if (take_stats(job, what + 1, r->index, r->count) != 0)
      crnet__log("host %s sent a malformed report", r->host->name);
    return;
  }
  if (sscanf(what, " abort %d %d %d", &rank, &pid, &code) == 3 &&
      rank >= r->index && rank < r->index + r->count) {
    job_aborted(job, r, rank, pid, code);
    return;
  }
  if (sscanf(what, " exit %d %d %d %d", &rank, &pid, &status, &sig) != 4 ||
      rank < r->index || rank >= r->index + r->count) {
    crnet__log("host %s sent a malformed report", r->host->name);
    return;
  }
  crnet__debug("host %s: rank %d (pid %d) ended with status %d, signal %d",
               r->host->name, rank, pid, status, sig);
  tell_ranks(job, "gone %d %d %d\n", rank, status, sig);
  /* The first report counts, also when the session's exit was reaped
   * first: it names the rank where the exit status cannot. Once the verdict
   * is out, nothing changes it. */
  if (r->reported || job->stop != RUNNING)
    return;
  r->reported = r->failed = 1;
  r->fail_rank = rank;
  r->fail_pid = pid;
  r->status = status;
  r->term_signal = sig;
  mark_gone(r);
  if (job->stop == RUNNING && !job->judging) {
    job->judging = 1;
    uv_timer_start(&job->judge_timer, on_settled, SETTLE_MS, 0);
  }
}

static void on_wipe_written(uv_write_t *w, int status) {
  size_t *len = (size_t *)(w + 1);
  crnet__wipe(len + 1, *len);
  on_ctl_written(w, status);
}

/* The SSH session of host r->host, and its configuration (remote.h) on its
 * stdin. The configuration holds the key; every copy is wiped. */
static int spawn_remote(struct job *job, struct rank *r, const uint8_t *key,
                        const char *rendezvous, char **env, int nenv) {
  char why[256];
  char **ssh = NULL;
  int nssh = 0;
  int ctl[2] = {-1, -1};
  char *command = NULL, *quoted = NULL, *block = NULL;
  size_t block_len = 0;
  char **argv = NULL;
  int rc = UV_ENOMEM;
  char cwd[4096];

  if (crnet__split_words(job->opt->ssh, &ssh, &nssh, why, sizeof why) != 0) {
    crnet__log("--ssh: %s", why);
    return UV_EINVAL;
  }
  if (getcwd(cwd, sizeof cwd) == NULL) {
    crnet__log("cannot tell the working directory: %s", strerror(errno));
    goto out;
  }
  quoted = crnet__shell_quote(job->remote_crlaunch);
  command = quoted != NULL ? str_printf("exec %s --agent", quoted) : NULL;
  char timeout_opt[64];
  snprintf(timeout_opt, sizeof timeout_opt, "ConnectTimeout=%d",
           (int)ceil(job->opt->init_timeout_s));
  /* The user's words come first: ssh takes the first value it reads for
   * each option, so --ssh "ssh -o BatchMode=no" wins over ours. BatchMode:
   * no password prompt that nobody would see; the keepalives bound how
   * long a vanished host goes unnoticed (15 s). */
  const char *extra[] = {"-T",
                         "-o", "BatchMode=yes",
                         "-o", timeout_opt,
                         "-o", "ServerAliveInterval=5",
                         "-o", "ServerAliveCountMax=3",
                         r->host->name, command};
  size_t nextra = sizeof extra / sizeof extra[0];
  argv = calloc((size_t)nssh + nextra + 1, sizeof *argv);
  if (command == NULL || argv == NULL)
    goto out;
  for (int i = 0; i < nssh; i++)
    argv[i] = ssh[i];
  for (size_t i = 0; i < nextra; i++)
    argv[(size_t)nssh + i] = (char *)extra[i];

  crnet__agent_config cfg;
  memset(&cfg, 0, sizeof cfg);
  memcpy(cfg.key, key, sizeof cfg.key);
  cfg.cwd = cwd;
  cfg.rendezvous = (char *)rendezvous;
  cfg.init_timeout = (char *)job->init_timeout_str;
  cfg.size = job->size;
  cfg.first = r->index;
  cfg.count = r->count;
  cfg.tag_output = job->opt->tag_output;
  cfg.bind_none = job->opt->bind == CRNET__BIND_NONE;
  cfg.report_bindings = job->opt->report_bindings;
  cfg.report = job->report;
  cfg.env = env;
  cfg.nenv = nenv;
  cfg.argv = job->opt->argv;
  while (job->opt->argv[cfg.argc] != NULL)
    cfg.argc++;
  int enc = crnet__agent_config_encode(&cfg, &block, &block_len);
  crnet__wipe(cfg.key, sizeof cfg.key);
  if (enc != 0)
    goto out;

  rc = uv_pipe(ctl, 0, 0);
  if (rc != 0)
    goto out;
  /* Our end must not leak into the ranks started after this host's
   * session: they would hold the agent's stdin open. */
  rc = spawn_proc(job, r, argv, NULL, ctl[0], "", 1);
  if (rc != 0)
    goto out;
  crnet__fwd_intercept(&r->err, job->report, on_agent_report);
  uv_pipe_init(&job->loop, &r->ctl, 0);
  rc = uv_pipe_open(&r->ctl, ctl[1]);
  if (rc != 0) {
    uv_close((uv_handle_t *)&r->ctl, NULL);
    goto out;
  }
  ctl[1] = -1;
  r->ctl_open = 1;
  /* Sent with the length in front, so that the callback can wipe it. */
  uv_write_t *w = malloc(sizeof *w + sizeof(size_t) + block_len);
  if (w == NULL) {
    rc = UV_ENOMEM;
    goto out;
  }
  size_t *len = (size_t *)(w + 1);
  *len = block_len;
  memcpy(len + 1, block, block_len);
  uv_buf_t buf = uv_buf_init((char *)(len + 1), (unsigned)block_len);
  if (uv_write(w, (uv_stream_t *)&r->ctl, &buf, 1, on_wipe_written) != 0) {
    crnet__wipe(len + 1, block_len);
    free(w);
  }
  rc = 0;
out:
  if (block != NULL) {
    crnet__wipe(block, block_len);
    free(block);
  }
  for (int i = 0; i < 2; i++)
    if (ctl[i] >= 0)
      close(ctl[i]);
  free(argv);
  free(command);
  free(quoted);
  crnet__free_words(ssh);
  return rc;
}

/* The address CRNET_IFACE selects here, in numeric form, of the family of
 * `like` (an address, or "" for either). 0 or -1 (said). */
static int iface_address(const char *spec, const char *like, char *addr,
                         size_t len) {
  struct sockaddr_storage ss;
  char why[256];
  int family = like[0] == '\0'        ? AF_UNSPEC
               : strchr(like, ':') != NULL ? AF_INET6
                                            : AF_INET;
  if (crnet__iface_address(spec, family, &ss, why, sizeof why) != 0) {
    crnet__log("CRNET_IFACE=%s: %s", spec, why);
    return -1;
  }
  if (ss.ss_family == AF_INET6)
    uv_ip6_name((struct sockaddr_in6 *)&ss, addr, len);
  else
    uv_ip4_name((struct sockaddr_in *)&ss, addr, len);
  return 0;
}

/* The rendezvous addresses of a job: src[i] for each process (for a remote
 * host, the address its packets from here leave from; for the local ranks,
 * the one that leads to the first remote host, so that their mesh links are
 * reachable from there) and the address to listen on: that one address if
 * every host sees us the same way, else every address. CRNET_IFACE, when
 * set, decides instead, as it does for the ranks' own sockets. 0 or -1
 * (said). */
static int plan_addresses(struct job *job, char (*src)[INET6_ADDRSTRLEN],
                          char *bind, size_t bind_len) {
  int first_remote = -1, same = 1, v6 = 0;
  /* CRNET_IFACE decides alone: the host names then need not resolve here
   * (ssh may reach them through its own configuration or a jump host). */
  const char *iface = rank_setting(job, "CRNET_IFACE");
  if (iface != NULL && iface[0] != '\0') {
    char addr[INET6_ADDRSTRLEN];
    if (iface_address(iface, "", addr, sizeof addr) != 0)
      return -1;
    for (int i = 0; i < job->nprocs; i++)
      snprintf(src[i], sizeof src[i], "%s", addr);
    snprintf(bind, bind_len, "%s", addr);
    return 0;
  }
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    if (r->host == NULL)
      continue;
    if (route_source(job, r->host->name, src[i], sizeof src[i]) != 0)
      return -1;
    if (first_remote < 0)
      first_remote = i;
    else if (strcmp(src[i], src[first_remote]) != 0)
      same = 0;
    v6 |= strchr(src[i], ':') != NULL;
  }
  for (int i = 0; i < job->nprocs; i++)
    if (job->ranks[i].host == NULL)
      snprintf(src[i], sizeof src[i], "%s",
               first_remote >= 0 ? src[first_remote] : "127.0.0.1");
  if (first_remote < 0 || same)
    snprintf(bind, bind_len, "%s",
             first_remote >= 0 ? src[first_remote] : "127.0.0.1");
  else
    snprintf(bind, bind_len, "%s", v6 ? "::" : "0.0.0.0");
  return 0;
}

/* Every HEARTBEAT_MS a byte to each agent: an agent whose session is cut
 * off without an end of file (a network partition; sshd sends no
 * keepalives by default) hears nothing for SILENCE_MS and stops its
 * ranks. */
static void on_heartbeat(uv_timer_t *t) {
  struct job *job = t->data;
  char beat = CRNET__AGENT_HEARTBEAT;
  for (int i = 0; i < job->nprocs; i++)
    if (job->ranks[i].host != NULL && job->ranks[i].live)
      ctl_send(&job->ranks[i], &beat, 1);
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
    rc = plan_addresses(job, src, bind, sizeof bind);
  if (rc == 0)
    rc = write_key_file(job, key);
  if (rc == 0 && (port = serve_rendezvous(job, key, bind)) < 0)
    rc = -1;
  if (rc == 0) {
    format_rendezvous(rdv, sizeof rdv, src[0], port);
    rc = build_env(job, rdv);
  }
  if (rc == 0 && opt->hosts.n > 0 && (env = remote_env(job, &nenv)) == NULL)
    rc = -1;
  if (rc != 0) {
    job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    goto out;
  }
  raise_fd_limit(opt->nranks);
  /* Every host's session starts before any waits on another: spawning is
   * asynchronous, so p = 64 over 8 hosts costs one SSH round trip, not 8. */
  for (int i = 0; i < job->nprocs && job->stop == RUNNING; i++) {
    struct rank *r = &job->ranks[i];
    if (r->host != NULL) {
      format_rendezvous(rdv, sizeof rdv, src[i], port);
      rc = spawn_remote(job, r, key, rdv, env, nenv);
    } else {
      rc = spawn_rank(job, r, opt->argv);
    }
    if (rc == 0)
      continue;
    if (r->host != NULL)
      crnet__log("cannot start ssh for host %s: %s", r->host->name,
                 uv_strerror(rc));
    else if (r->index == 0)
      crnet__log("cannot start %s: %s", opt->argv[0], uv_strerror(rc));
    else
      crnet__log("cannot start %s as rank %d: %s", opt->argv[0], r->index,
                 uv_strerror(rc));
    job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
  }
  if (opt->timeout_s > 0 && job->stop == RUNNING)
    uv_timer_start(&job->timeout_timer, on_timeout,
                   (uint64_t)ceil(opt->timeout_s * 1000), 0);
  if (opt->hosts.n > 0)
    uv_timer_start(&job->heartbeat_timer, on_heartbeat, HEARTBEAT_MS,
                   HEARTBEAT_MS);
out:
  /* The server keeps its own copy. */
  crnet__wipe(key, sizeof key);
  crnet__free_words(env);
  free(src);
}

/* ---- the agent on a remote host -------------------------------------- */

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char space[256];
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(space, sizeof space);
}

/* Commands from crlaunch (remote.h). A signal number may come in the read
 * after its 'S'. */
static void on_silence(uv_timer_t *t) {
  struct job *job = t->data;
  judge_failures(job);
  if (job->stop != RUNNING || job->nlive == 0)
    return;
  crnet__log("no word from crlaunch for %g s; stopping %d rank%s",
             (double)job->silence_ms / 1000, job->nlive, plural(job->nlive));
  job_stop(job, STOP_LOST, 128 + SIGHUP);
}

/* A line after CRNET__AGENT_TELL, for our ranks: passed on if it is one
 * of the three crlaunch says. */
static void take_tell_command(struct job *job, const char *line) {
  int rank, a, b, end = 0;
  if (sscanf(line, "abort %d %d%n", &rank, &a, &end) == 2 &&
      line[end] == '\0')
    tell_ranks(job, "abort %d %d\n", rank, a);
  else if (sscanf(line, "gone %d %d %d%n", &rank, &a, &b, &end) == 3 &&
           line[end] == '\0')
    tell_ranks(job, "gone %d %d %d\n", rank, a, b);
  else if (sscanf(line, "fail %d %d%n", &rank, &a, &end) == 2 &&
           line[end] == '\0')
    tell_ranks(job, "fail %d %d\n", rank, a);
  else
    crnet__log("ignored a malformed command from crlaunch");
}

static void on_ctl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct job *job = s->data;
  static int want_signum;
  static int in_tell; /* inside the line of a CRNET__AGENT_TELL */
  static char tell_line[64];
  static size_t tell_len;
  if (n > 0 && job->nlive > 0)
    uv_timer_start(&job->heartbeat_timer, on_silence, job->silence_ms, 0);
  for (ssize_t i = 0; i < n; i++) {
    char c = buf->base[i];
    if (want_signum) {
      want_signum = 0;
      if (c == SIGKILL)
        signal_live(job, SIGKILL);
      else if (c > 0 && c < 64)
        pass_signal(job, c);
    } else if (in_tell) {
      if (c == '\n') {
        tell_line[tell_len] = '\0';
        take_tell_command(job, tell_line);
        in_tell = 0;
      } else if (tell_len < sizeof tell_line - 1) {
        tell_line[tell_len++] = c;
      }
    } else if (c == CRNET__AGENT_TELL) {
      in_tell = 1;
      tell_len = 0;
    } else if (c == CRNET__AGENT_SIGNAL) {
      want_signum = 1;
    } else if (c == CRNET__AGENT_KEY_DONE) {
      remove_key_file(job);
    }
  }
  if (n >= 0)
    return;
  /* crlaunch or the SSH session is gone: nobody would hear of the ranks
   * any more, so they must not outlive us. */
  if (n != UV_EOF)
    crnet__debug("reading from crlaunch: %s", uv_strerror((int)n));
  job->ctl_in_open = 0;
  uv_close((uv_handle_t *)s, NULL);
  judge_failures(job);
  if (job->stop == RUNNING) {
    crnet__log("lost crlaunch; stopping %d rank%s", job->nlive,
               plural(job->nlive));
    job_stop(job, STOP_LOST, 128 + SIGHUP);
  } else if (job->nlive > 0) {
    terminate(job);
  }
}

/* An agent: the ranks of this host, as crlaunch asked. */
static void agent_start(struct job *job) {
  crnet__agent_config *cfg = job->agent;
  int rc = 0;
  if (chdir(cfg->cwd) != 0) {
    crnet__log("cannot enter %s on this host: %s", cfg->cwd, strerror(errno));
    job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
    return;
  }
  rc = write_key_file(job, cfg->key);
  crnet__wipe(cfg->key, sizeof cfg->key);
  if (rc == 0)
    rc = build_env(job, cfg->rendezvous);
  if (rc == 0) {
    uv_pipe_init(&job->loop, &job->ctl_in, 0);
    job->ctl_in.data = job;
    rc = uv_pipe_open(&job->ctl_in, STDIN_FILENO);
    if (rc == 0)
      rc = uv_read_start((uv_stream_t *)&job->ctl_in, on_ctl_alloc,
                         on_ctl_read);
    job->ctl_in_open = 1;
    if (rc != 0) {
      crnet__log("cannot read commands from crlaunch: %s", uv_strerror(rc));
      rc = -1;
    }
  }
  if (rc != 0) {
    job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    return;
  }
  /* CRNET_AGENT_SILENCE (seconds, more than the heartbeat's 5) came with
   * the job's CRNET_* variables; the tests shorten the wait with it. */
  job->silence_ms = SILENCE_MS;
  for (int i = 0; i < cfg->nenv; i++)
    if (strncmp(cfg->env[i], "CRNET_AGENT_SILENCE=", 20) == 0) {
      double v = parse_seconds(cfg->env[i] + 20, 1e6);
      if (v * 1000 > HEARTBEAT_MS)
        job->silence_ms = (uint64_t)(v * 1000);
      else
        crnet__log("CRNET_AGENT_SILENCE='%s' is not a number of seconds "
                   "above %d; using %d",
                   cfg->env[i] + 20, HEARTBEAT_MS / 1000, SILENCE_MS / 1000);
    }
  uv_timer_start(&job->heartbeat_timer, on_silence, job->silence_ms, 0);
  raise_fd_limit(cfg->count);
  for (int i = 0; i < job->nprocs && job->stop == RUNNING; i++) {
    rc = spawn_rank(job, &job->ranks[i], cfg->argv);
    if (rc != 0) {
      crnet__log("cannot start %s as rank %d: %s", cfg->argv[0],
                 job->ranks[i].index, uv_strerror(rc));
      job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
    }
  }
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
  struct rank *ranks = calloc((size_t)(n > 0 ? n : 1), sizeof *ranks);
  if (ranks == NULL)
    return NULL;
  job->nprocs = n;
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

static int job_run(const struct options *opt, crnet__agent_config *agent) {
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
  } else {
    job->size = opt->nranks;
    job->xvars = opt->xvars;
    job->nxvars = opt->nxvars;
    job->init_timeout_str = opt->init_timeout_str;
  }
  ranks = make_procs(job);
  if (ranks == NULL) {
    crnet__log("out of memory");
    goto out;
  }
  job->ranks = ranks;
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
      job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    }
  }
  if (job->stop == RUNNING) {
    if (agent != NULL)
      agent_start(job);
    else
      job_start(job);
  }
  maybe_finish(job);
  uv_run(&job->loop, UV_RUN_DEFAULT);
  remove_key_file(job);
  rc = uv_loop_close(&job->loop);
  assert(rc == 0);
  exit_code = job->stop == RUNNING ? 0 : job->exit_code;
out:
  if (job != NULL) {
    crnet__bind_plan_free(&job->bind);
    free_env(job);
    free(job->stats);
    free(job->rank_stats);
  }
  free(ranks);
  free(job);
  return exit_code;
}

/* crlaunch --agent: read what crlaunch sent, then run this host's ranks. */
static int agent_main(const struct options *opt) {
  char self[256] = "";
  char prefix[300];
  gethostname(self, sizeof self - 1);
  snprintf(prefix, sizeof prefix, "crlaunch@%s: ", self);
  crnet__log_set_prefix(prefix);
  crnet__agent_config cfg;
  char why[256];
  if (crnet__agent_config_read(STDIN_FILENO, &cfg, why, sizeof why) != 0) {
    crnet__log("%s", why);
    return EXIT_INTERNAL;
  }
  /* crlaunch's CRNET_DEBUG reaches the agent's own log lines too. */
  for (int i = 0; i < cfg.nenv; i++)
    if (strncmp(cfg.env[i], "CRNET_DEBUG=", 12) == 0)
      setenv("CRNET_DEBUG", cfg.env[i] + 12, 1);
  int rc = job_run(opt, &cfg);
  crnet__agent_config_free(&cfg);
  return rc;
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
    rc = opt.agent ? agent_main(&opt) : job_run(&opt, NULL);
  }
  crnet__hosts_free(&opt.hosts);
  free(opt.xvars);
  return rc;
}
