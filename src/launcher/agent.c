/* crlaunch --agent, the agent on a remote host: reads the configuration
 * crlaunch sent, runs this host's ranks, and obeys the commands that come
 * on its stdin (launch.h; the protocol is remote.h's). */
#include "launch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "handshake.h"
#include "log.h"

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char space[256];
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(space, sizeof space);
}

/* crlaunch has said nothing for silence_ms (its heartbeat comes every
 * HEARTBEAT_MS): it is gone or cut off, so this host's ranks stop. */
static void on_silence(uv_timer_t *t) {
  struct job *job = t->data;
  crnet__launch_judge_failures(job);
  if (job->stop != RUNNING || job->nlive == 0)
    return;
  crnet__log("no word from crlaunch for %g s; stopping %d rank%s",
             (double)job->silence_ms / 1000, job->nlive,
             crnet__launch_plural(job->nlive));
  crnet__launch_job_stop(job, STOP_LOST, 128 + SIGHUP);
}

/* A line after CRNET__AGENT_TELL, for our ranks: passed on if it is one
 * of the three crlaunch says. */
/* crlaunch --restart: rank `index` of this host, lost, starts again as
 * the job's restart k. */
static void restart_here(struct job *job, int index, int k) {
  for (int i = 0; i < job->nprocs; i++)
    if (job->ranks[i].index == index) {
      crnet__launch_start_again(job, index, job->ranks[i].local, k);
      return;
    }
  crnet__log("ignored a restart of rank %d, which is not on this host", index);
}

static void take_tell_command(struct job *job, const char *line) {
  int rank, a, b, end = 0;
  if (sscanf(line, "abort %d %d%n", &rank, &a, &end) == 2 &&
      line[end] == '\0')
    crnet__launch_tell_ranks(job, "abort %d %d\n", rank, a);
  else if (sscanf(line, "gone %d %d %d%n", &rank, &a, &b, &end) == 3 &&
           line[end] == '\0')
    crnet__launch_tell_ranks(job, "gone %d %d %d\n", rank, a, b);
  else if (sscanf(line, "fail %d %d%n", &rank, &a, &end) == 2 &&
           line[end] == '\0')
    crnet__launch_tell_ranks(job, "fail %d %d\n", rank, a);
  else if (sscanf(line, "restart %d %d%n", &rank, &a, &end) == 2 &&
           line[end] == '\0' && a > 0)
    restart_here(job, rank, a);
  else
    crnet__log("ignored a malformed command from crlaunch");
}

/* Commands from crlaunch (remote.h). A signal number may come in the read
 * after its 'S'. */
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
        crnet__launch_signal_live(job, SIGKILL);
      else if (c > 0 && c < 64)
        crnet__launch_pass_signal(job, c);
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
      crnet__launch_remove_key_file(job);
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
  crnet__launch_judge_failures(job);
  if (job->stop == RUNNING) {
    crnet__log("lost crlaunch; stopping %d rank%s", job->nlive,
               crnet__launch_plural(job->nlive));
    crnet__launch_job_stop(job, STOP_LOST, 128 + SIGHUP);
  } else if (job->nlive > 0) {
    crnet__launch_terminate(job);
  }
}

/* An agent: the ranks of this host, as crlaunch asked. */
void crnet__launch_agent_start(struct job *job) {
  crnet__agent_config *cfg = job->agent;
  int rc = 0;
  if (chdir(cfg->cwd) != 0) {
    crnet__log("cannot enter %s on this host: %s", cfg->cwd, strerror(errno));
    crnet__launch_job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
    return;
  }
  rc = crnet__launch_write_key_file(job, cfg->key);
  crnet__wipe(cfg->key, sizeof cfg->key);
  if (rc == 0)
    rc = crnet__launch_build_env(job, cfg->rendezvous);
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
    crnet__launch_job_stop(job, STOP_ERROR, EXIT_INTERNAL);
    return;
  }
  /* CRNET_AGENT_SILENCE (seconds, more than the heartbeat's 5) came with
   * the job's CRNET_* variables; the tests shorten the wait with it. */
  job->silence_ms = SILENCE_MS;
  for (int i = 0; i < cfg->nenv; i++)
    if (strncmp(cfg->env[i], "CRNET_AGENT_SILENCE=", 20) == 0) {
      double v = crnet__launch_parse_seconds(cfg->env[i] + 20, 1e6);
      if (v * 1000 > HEARTBEAT_MS)
        job->silence_ms = (uint64_t)(v * 1000);
      else
        crnet__log("CRNET_AGENT_SILENCE='%s' is not a number of seconds "
                   "above %d; using %d",
                   cfg->env[i] + 20, HEARTBEAT_MS / 1000, SILENCE_MS / 1000);
    }
  uv_timer_start(&job->heartbeat_timer, on_silence, job->silence_ms, 0);
  crnet__launch_raise_fd_limit(cfg->count);
  for (int i = 0; i < job->nprocs && job->stop == RUNNING; i++) {
    rc = crnet__launch_spawn_rank(job, &job->ranks[i], cfg->argv);
    if (rc != 0) {
      crnet__log("cannot start %s as rank %d: %s", cfg->argv[0],
                 job->ranks[i].index, uv_strerror(rc));
      crnet__launch_job_stop(job, STOP_ERROR, EXIT_NOT_STARTED);
    }
  }
}

/* crlaunch --agent: read what crlaunch sent, then run this host's ranks. */
int crnet__launch_agent_main(const struct options *opt) {
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
  int rc = crnet__launch_job_run(opt, &cfg);
  crnet__agent_config_free(&cfg);
  return rc;
}
