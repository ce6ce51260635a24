/* crlaunch's command line: --help, the options and their checks, and the
 * few parsers of names and numbers that the rest of crlaunch shares
 * (launch.h). */
#include "launch.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crnet_version.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: crlaunch -n N [options] [--] program [args...]\n"
          "       crlaunch --settings [-n N] [options] [program...]\n"
          "\n"
          "Starts N ranks of a crnet program on this host or, over SSH, on\n"
          "several, serves their rendezvous and forwards their output line by\n"
          "line.\n"
          "\n"
          "Options:\n"
          "  -n N, -np N     number of ranks to start (1..%d); with --hosts\n"
          "                  or --hostfile, or inside a Slurm allocation\n"
          "                  (its nodes and tasks, through srun), default:\n"
          "                  every slot\n"
          "  --hosts LIST, --host LIST\n"
          "                  run on these hosts: h1:8,h2:8 (host:slots,\n"
          "                  [IPv6]:slots; a host named again adds its\n"
          "                  slots); ranks fill the hosts in order\n"
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
          "  --keep-going    a rank that fails does not stop the others: it\n"
          "                  is reported, and the survivors go on\n"
          "                  (CRNET_ON_FAILURE=continue; see crlaunch(1))\n"
          "  --restart N     with --keep-going (implied): start a lost rank\n"
          "                  again (on its host, or the next one if its host\n"
          "                  is gone), up to N times in the job; it joins\n"
          "                  when the survivors call crnet_comm_grow\n"
          "                  (CRNET_RESTARTS=N; see crlaunch(1))\n"
          "  --grace SEC     after a rank fails, give the others SEC seconds\n"
          "                  to notice and exit before stopping them\n"
          "                  (default 1)\n"
          "  --coll-timeout SEC\n"
          "                  fail any collective that takes longer than SEC\n"
          "                  seconds, naming the ranks it waits for\n"
          "                  (CRNET_TIMEOUT=SEC)\n"
          "  --stats         print a table of the ranks' collectives at the\n"
          "                  end: calls, time, waiting, reducing, bytes\n"
          "                  (CRNET_STATS=1)\n"
          "  -x VAR[=VAL]    set VAR to VAL in the ranks' environment, or pass\n"
          "                  crlaunch's own value of VAR (repeatable)\n"
          "  --settings      print the value of every crnet setting the ranks\n"
          "                  would get, and where it comes from, then exit\n"
          "                  without starting anything (2: a bad value)\n"
          "  -h, --help      print this help and exit\n"
          "  -V, --version   print the version and exit\n"
          "\n"
          "Exit status: 0 if every rank exits 0 (with --keep-going: if no\n"
          "rank exits non-zero and one exits 0); the code given to\n"
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
double crnet__launch_parse_seconds(const char *s, double max) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0 || !(v > 0) || v > max)
    return -1;
  return v;
}

int crnet__launch_var_name_len(const char *s) {
  return (int)strcspn(s, "=");
}

/* "NAME=..." or "NAME" names `name`. */
int crnet__launch_names_var(const char *entry, const char *name, size_t len) {
  return strncmp(entry, name, len) == 0 &&
         (entry[len] == '=' || entry[len] == '\0');
}

static int check_xvar(const char *x) {
  int len = crnet__launch_var_name_len(x);
  if (len == 0)
    return usage_error("-x '%s': no variable name", x);
  for (int i = 0; i < len; i++) {
    char c = x[i];
    int ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
             (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return usage_error("-x '%s': '%.*s' is not a variable name", x, len, x);
  }
  for (const char *const *r = crnet__launch_reserved_vars; *r != NULL; r++)
    if (crnet__launch_names_var(x, *r, (size_t)len) &&
        strlen(*r) == (size_t)len)
      return usage_error("-x %.*s: crlaunch sets this variable itself", len,
                         x);
  return 0;
}

/* Fills opt. Returns -1 to go on, or the exit status to stop with. */
int crnet__launch_parse_options(struct options *opt, int argc, char **argv) {
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
    OPT_GRACE,
    OPT_KEEP_GOING,
    OPT_RESTART,
    OPT_AGENT,
    OPT_SETTINGS
  };
  static const struct option longopts[] = {
      {"tag-output", no_argument, NULL, OPT_TAG},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"hosts", required_argument, NULL, OPT_HOSTS},
      {"host", required_argument, NULL, OPT_HOSTS}, /* mpirun's spelling */
      {"hostfile", required_argument, NULL, OPT_HOSTFILE},
      {"ssh", required_argument, NULL, OPT_SSH},
      {"remote-crlaunch", required_argument, NULL, OPT_REMOTE_CRLAUNCH},
      {"encrypt", no_argument, NULL, OPT_ENCRYPT},
      {"coll-timeout", required_argument, NULL, OPT_COLL_TIMEOUT},
      {"stats", no_argument, NULL, OPT_STATS},
      {"bind", required_argument, NULL, OPT_BIND},
      {"report-bindings", no_argument, NULL, OPT_REPORT_BINDINGS},
      {"grace", required_argument, NULL, OPT_GRACE},
      {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
      {"restart", required_argument, NULL, OPT_RESTART},
      {"agent", no_argument, NULL, OPT_AGENT},
      {"settings", no_argument, NULL, OPT_SETTINGS},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  memset(opt, 0, sizeof *opt);
  opt->nranks = -1;
  opt->grace_ms = FAILURE_GRACE_MS;
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
      const char *count = optarg;
      /* mpirun's -np N reaches getopt as -n with "p" glued on (or "pN"). */
      if (count[0] == 'p') {
        if (count[1] != '\0')
          count++;
        else if (optind < argc)
          count = argv[optind++];
        else
          return usage_error("option -np needs an argument");
      }
      errno = 0;
      long n = strtol(count, &end, 10);
      if (count[0] < '0' || count[0] > '9' || *end != '\0' || errno != 0 ||
          n < 1 || n > MAX_RANKS)
        return usage_error("-n '%s': the number of ranks must be 1..%d",
                           count, MAX_RANKS);
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
    case OPT_SETTINGS:
      opt->settings = 1;
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
      opt->timeout_s = crnet__launch_parse_seconds(optarg, MAX_TIMEOUT_S);
      if (opt->timeout_s < 0)
        return usage_error("--timeout '%s': not a positive number of seconds",
                           optarg);
      break;
    case OPT_GRACE: {
      double s = crnet__launch_parse_seconds(optarg, MAX_GRACE_S);
      if (s < 0)
        return usage_error("--grace '%s': not a number of seconds in (0, %d]",
                           optarg, MAX_GRACE_S);
      opt->grace_ms = (uint64_t)ceil(s * 1000);
      break;
    }
    case OPT_KEEP_GOING:
      opt->keep_going = 1;
      break;
    case OPT_RESTART: {
      char *end;
      long n = strtol(optarg, &end, 10);
      if (end == optarg || *end != '\0' || n < 1 || n > MAX_RESTARTS)
        return usage_error("--restart '%s': not a number of restarts in 1..%d",
                           optarg, MAX_RESTARTS);
      opt->restarts = (int)n;
      opt->keep_going = 1;
      break;
    }
    case OPT_COLL_TIMEOUT:
      if (strlen(optarg) > 32 ||
          crnet__launch_parse_seconds(optarg, MAX_TIMEOUT_S) < 0)
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
  /* --settings starts nothing: the job's size and program may be left out
   * (a program given is not looked at). */
  /* Inside a Slurm allocation (salloc, sbatch: a job but no job step yet),
   * its nodes and tasks are the host list, and srun starts each node's
   * ranks, as mpirun does there. --hosts or --hostfile say otherwise. */
  const char *slurm_job = getenv("SLURM_JOB_ID");
  const char *slurm_step = getenv("SLURM_STEP_ID");
  const char *slurm_nodes = getenv("SLURM_JOB_NODELIST");
  const char *slurm_tasks = getenv("SLURM_TASKS_PER_NODE");
  if (slurm_tasks == NULL || slurm_tasks[0] == '\0')
    slurm_tasks = getenv("SLURM_JOB_CPUS_PER_NODE");
  opt->slurm = opt->hosts_spec == NULL && opt->hostfile == NULL &&
               slurm_job != NULL && slurm_job[0] != '\0' &&
               (slurm_step == NULL || slurm_step[0] == '\0') &&
               slurm_nodes != NULL && slurm_nodes[0] != '\0';
  if (opt->nranks < 0 && opt->hosts_spec == NULL && opt->hostfile == NULL &&
      !opt->slurm && !opt->settings)
    return usage_error("missing -n N, the number of ranks");
  if (optind >= argc && !opt->settings)
    return usage_error("no program to run");
  opt->argv = argv + optind;
  if (opt->ssh == NULL)
    opt->ssh = getenv("CRNET_SSH");
  if (opt->ssh == NULL || opt->ssh[0] == '\0')
    opt->ssh = "ssh";
  if (opt->encrypt) {
    for (int i = 0; i < opt->nxvars; i++)
      if (crnet__launch_names_var(opt->xvars[i], "CRNET_ENCRYPT", 13))
        return usage_error("give --encrypt or -x CRNET_ENCRYPT, not both");
    opt->xvars[opt->nxvars++] = "CRNET_ENCRYPT=1";
  }
  if (opt->keep_going) {
    for (int i = 0; i < opt->nxvars; i++)
      if (crnet__launch_names_var(opt->xvars[i], "CRNET_ON_FAILURE", 16))
        return usage_error(
            "give --keep-going or -x CRNET_ON_FAILURE, not both");
    opt->xvars[opt->nxvars++] = "CRNET_ON_FAILURE=continue";
  }
  if (opt->restarts > 0) {
    /* Inside Slurm the agents run in srun's step, where starting a
     * process again is untested: said rather than tried. */
    if (opt->slurm)
      return usage_error("--restart: not inside a Slurm allocation yet "
                         "(ranks on crlaunch's host and on --hosts are "
                         "started again)");
    for (int i = 0; i < opt->nxvars; i++)
      if (crnet__launch_names_var(opt->xvars[i], "CRNET_RESTARTS", 14) ||
          crnet__launch_names_var(opt->xvars[i], "CRNET_RESTARTED", 15))
        return usage_error("give --restart or -x CRNET_RESTARTS, not both");
    snprintf(opt->restarts_var, sizeof opt->restarts_var, "CRNET_RESTARTS=%d",
             opt->restarts);
    opt->xvars[opt->nxvars++] = opt->restarts_var;
  }
  if (opt->stats) {
    for (int i = 0; i < opt->nxvars; i++)
      if (crnet__launch_names_var(opt->xvars[i], "CRNET_STATS", 11))
        return usage_error("give --stats or -x CRNET_STATS, not both");
    opt->xvars[opt->nxvars++] = "CRNET_STATS=1";
  }
  if (opt->coll_timeout != NULL) {
    for (int i = 0; i < opt->nxvars; i++)
      if (crnet__launch_names_var(opt->xvars[i], "CRNET_TIMEOUT", 13))
        return usage_error("give --coll-timeout or -x CRNET_TIMEOUT, not both");
    snprintf(opt->coll_timeout_var, sizeof opt->coll_timeout_var,
             "CRNET_TIMEOUT=%s", opt->coll_timeout);
    opt->xvars[opt->nxvars++] = opt->coll_timeout_var;
  }
  if (opt->slurm) {
    char why[512];
    if (slurm_tasks == NULL || slurm_tasks[0] == '\0')
      return usage_error("inside Slurm job %s: neither SLURM_TASKS_PER_NODE "
                         "nor SLURM_JOB_CPUS_PER_NODE says how many ranks "
                         "each node takes (give --hosts)",
                         slurm_job);
    int rc = crnet__hosts_parse_slurm(&opt->hosts, slurm_nodes, slurm_tasks,
                                      why, sizeof why);
    if (rc == 0 && opt->nranks < 0)
      opt->nranks =
          opt->hosts.slots > MAX_RANKS ? MAX_RANKS : (int)opt->hosts.slots;
    if (rc == 0 && opt->nranks > opt->hosts.slots)
      return usage_error("-n %d: Slurm job %s has %ld task%s (ask for more "
                         "with salloc/sbatch -n, or leave -n out)",
                         opt->nranks, slurm_job, opt->hosts.slots,
                         opt->hosts.slots == 1 ? "" : "s");
    /* No node runs its ranks directly, not even this one: srun puts them
     * in the job's step, where Slurm accounts for them, confines them and
     * cleans up after them (and salloc's shell may not run on a node of
     * the allocation at all). */
    if (rc == 0)
      rc = crnet__hosts_place(&opt->hosts, opt->nranks, NULL, why, sizeof why);
    for (int h = 0; rc == 0 && h < opt->hosts.n; h++)
      opt->hosts.hosts[h].local = 0;
    if (rc != 0)
      return usage_error("Slurm job %s (SLURM_JOB_NODELIST=%s): %s", slurm_job,
                         slurm_nodes, why);
  } else if (opt->hosts_spec != NULL || opt->hostfile != NULL) {
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
    if (crnet__launch_names_var(opt->xvars[i], "CRNET_INIT_TIMEOUT", 18) &&
        opt->xvars[i][18] == '=')
      opt->init_timeout_str = opt->xvars[i] + 19;
  if (opt->init_timeout_str == NULL || opt->init_timeout_str[0] == '\0')
    opt->init_timeout_str = DEFAULT_INIT_TIMEOUT;
  /* --settings reports a bad value as the ranks' library would. */
  if (opt->settings)
    return -1;
  opt->init_timeout_s =
      crnet__launch_parse_seconds(opt->init_timeout_str, MAX_INIT_TIMEOUT_S);
  if (opt->init_timeout_s < 0)
    return usage_error("CRNET_INIT_TIMEOUT='%s': not a positive number of "
                       "seconds",
                       opt->init_timeout_str);
  /* The rendezvous served here gives each connection the time to
   * authenticate that the ranks' own listeners give: the value the ranks
   * will read, from -x or the environment, which reach them as they are. */
  crnet__setting_value hs;
  char why[512];
  if (crnet__launch_rank_setting(opt, CRNET__SET_HANDSHAKE_TIMEOUT, &hs, why,
                                 sizeof why) != 0)
    return usage_error("%s", why);
  opt->handshake_timeout_s = hs.seconds;
  return -1;
}
