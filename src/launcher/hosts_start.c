/* crlaunch's start of a job over several hosts: the addresses the ranks
 * reach the rendezvous at, the rendezvous server, the environment sent to
 * the agents, each host's SSH session and its reports, the heartbeat
 * (launch.h; the protocol is remote.h's). */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "crnet.h"
#include "handshake.h"
#include "log.h"
#include "netaddr.h"

/* The environment sent to the agents: crlaunch's CRNET_* variables (a
 * remote login has its own environment for the rest) and the -x settings.
 * A fresh NULL-terminated list, or NULL when out of memory. */
char **crnet__launch_remote_env(struct job *job, int *n) {
  int cap = job->nxvars + 1;
  for (char **e = environ; *e != NULL; e++)
    cap++;
  char **list = calloc((size_t)cap, sizeof *list);
  if (list == NULL)
    return NULL;
  *n = 0;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "CRNET_", 6) == 0 &&
        !crnet__launch_skip_inherited(job, *e) &&
        (list[*n] = strdup(*e)) != NULL)
      (*n)++;
  for (int i = 0; i < job->nxvars; i++) {
    const char *x = job->xvars[i];
    int len = crnet__launch_var_name_len(x);
    if (crnet__launch_names_var(x, "CRNET_INIT_TIMEOUT", 18))
      continue;
    if (x[len] == '=') {
      list[*n] = strdup(x);
    } else {
      const char *val = getenv(x);
      if (val == NULL)
        continue; /* crnet__launch_build_env says so for the local ranks */
      list[*n] = crnet__launch_str_printf("%s=%s", x, val);
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
void crnet__launch_format_rendezvous(char *buf, size_t len, const char *addr,
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
    if (crnet__launch_names_var(job->xvars[i], name, len) &&
        job->xvars[i][len] == '=')
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
int crnet__launch_serve_rendezvous(struct job *job, const uint8_t *key,
                                   const char *bind) {
  int lo, hi;
  if (port_range(job, &lo, &hi) != 0)
    return -1;
  int rc = CRNET_EIO;
  for (int port = lo; port <= hi && rc != 0; port++) {
    rc = crnet__rendezvous_server_start(&job->rdv, &job->loop, key, job->size,
                                        bind, port, job->opt->init_timeout_s,
                                        job->opt->handshake_timeout_s,
                                        crnet__launch_on_rdv_done, job);
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
  return crnet__rendezvous_server_port(job->rdv);
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
    crnet__launch_take_blame(job, r, rank, origin);
    return;
  }
  if (strncmp(what, " stats ", 7) == 0) {
    if (crnet__launch_take_stats(job, what + 1, r->index, r->count) != 0)
      crnet__log("host %s sent a malformed report", r->host->name);
    return;
  }
  if (sscanf(what, " abort %d %d %d", &rank, &pid, &code) == 3 &&
      rank >= r->index && rank < r->index + r->count) {
    crnet__launch_job_aborted(job, r, rank, pid, code);
    return;
  }
  if (sscanf(what, " end %d %d", &rank, &pid) == 2 && rank >= 0 &&
      rank < job->size) {
    crnet__launch_rank_ended(job, rank);
    return;
  }
  if (sscanf(what, " exit %d %d %d %d", &rank, &pid, &status, &sig) != 4 ||
      rank < r->index || rank >= r->index + r->count) {
    crnet__log("host %s sent a malformed report", r->host->name);
    return;
  }
  crnet__debug("host %s: rank %d (pid %d) ended with status %d, signal %d",
               r->host->name, rank, pid, status, sig);
  crnet__launch_tell_ranks(job, "gone %d %d %d\n", rank, status, sig);
  if (job->keep_going && job->stop == RUNNING && !job->aborted) {
    char who[400];
    snprintf(who, sizeof who, "rank %d (pid %d on host %s)", rank, pid,
             r->host->name);
    crnet__launch_lost_going_on(job, who, status, sig);
    r->reported = 1;
    r->fail_rank = rank;
    r->fail_pid = pid;
    crnet__launch_restart_remote(job, r, rank, pid);
    return;
  }
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
  crnet__launch_mark_gone(r);
  if (job->stop == RUNNING && !job->judging) {
    job->judging = 1;
    uv_timer_start(&job->judge_timer, crnet__launch_on_settled, SETTLE_MS, 0);
  }
}

static void on_wipe_written(uv_write_t *w, int status) {
  size_t *len = (size_t *)(w + 1);
  crnet__wipe(len + 1, *len);
  crnet__launch_on_ctl_written(w, status);
}

/* The SSH session of host r->host, and its configuration (remote.h) on its
 * stdin. The configuration holds the key; every copy is wiped. */
int crnet__launch_spawn_remote(struct job *job, struct rank *r,
                               const uint8_t *key, const char *rendezvous,
                               char **env, int nenv) {
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
  command = quoted != NULL ? crnet__launch_str_printf("exec %s --agent", quoted)
                           : NULL;
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
  char nodelist[CRNET__HOST_NAME_MAX + 16];
  snprintf(nodelist, sizeof nodelist, "--nodelist=%s", r->host->name);
  /* Inside a Slurm allocation: a job step of one task on the node, given
   * every CPU the job has there (--whole), which crlaunch's agent then
   * shares among the node's ranks; Slurm ends the step if its task fails.
   * srun passes our environment and its stdin (the configuration below)
   * to the task, and its output back. */
  const char *srun[] = {"srun",
                        "--nodes=1",
                        "--ntasks=1",
                        nodelist,
                        "--whole",
                        "--mpi=none",
                        "--kill-on-bad-exit=1",
                        "--quiet",
                        job->remote_crlaunch,
                        "--agent"};
  if (job->opt->slurm) {
    nssh = 0;
    nextra = sizeof srun / sizeof srun[0];
  }
  argv = calloc((size_t)nssh + nextra + 1, sizeof *argv);
  if (command == NULL || argv == NULL)
    goto out;
  for (int i = 0; i < nssh; i++)
    argv[i] = ssh[i];
  for (size_t i = 0; i < nextra; i++)
    argv[(size_t)nssh + i] = (char *)(job->opt->slurm ? srun[i] : extra[i]);

  crnet__agent_config cfg;
  memset(&cfg, 0, sizeof cfg);
  memcpy(cfg.key, key, sizeof cfg.key);
  cfg.cwd = cwd;
  cfg.rendezvous = (char *)rendezvous;
  cfg.init_timeout = (char *)job->init_timeout_str;
  cfg.grace_ms = (int)job->opt->grace_ms;
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
  rc = crnet__launch_spawn_proc(job, r, argv, NULL, ctl[0], "", 1);
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
int crnet__launch_plan_addresses(struct job *job, char (*src)[INET6_ADDRSTRLEN],
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
void crnet__launch_on_heartbeat(uv_timer_t *t) {
  struct job *job = t->data;
  char beat = CRNET__AGENT_HEARTBEAT;
  for (int i = 0; i < job->nprocs; i++)
    if (job->ranks[i].host != NULL && job->ranks[i].live)
      crnet__launch_ctl_send(&job->ranks[i], &beat, 1);
}
