/* crlaunch --restart N: lost ranks started again (docs/RELIABILITY.md,
 * "Growing back"; the ranks' side is runtime/join.c).
 *
 * Every restart is a process of its own, in an entry of job->ranks after
 * the others (a lost process's output may still be draining), started
 * with CRNET_RESTARTED=k for the job's k-th restart; its crnet_comm_init
 * joins the job through crlaunch's rendezvous, which stays open for that,
 * and the lost process is marked gone there first, so that the newcomer
 * does not try to reach it. crlaunch counts the restarts; where a rank is
 * started again depends on what was lost:
 *   - a rank of this host: here (crnet__launch_restart_local);
 *   - a rank of another host whose agent reported it: that agent starts it
 *     (crnet__launch_restart_remote sends it "restart <rank> <k>");
 *   - every rank of a host whose session ended before they did (the host
 *     or its agent is gone): on the next host of the list that is not
 *     gone, one new session per rank, or here if that host is this one
 *     (crnet__launch_session_over). To know which ranks had not ended,
 *     the agents of such a job report every end, not only failures.
 */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "remote.h"

/* The entry after the others for a process of job index `index` on
 * `host` (NULL: here, as this host's rank number `local`), or NULL when
 * there is no room (ranks has nprocs + CRNET_RESTARTS entries). Counted
 * in nprocs once its process has started (the caller's commit). */
static struct rank *new_entry(struct job *job, int index, int local,
                              const crnet__host *host) {
  struct rank *n = &job->ranks[job->nprocs];
  if (job->nprocs >= job->procs_cap) {
    crnet__log("cannot start rank %d again: no room for more restarts than "
               "CRNET_RESTARTS",
               index);
    return NULL;
  }
  memset(n, 0, sizeof *n);
  n->job = job;
  n->index = index;
  n->count = 1;
  n->local = local;
  n->host = host;
  n->blamed = -1;
  return n;
}

void crnet__launch_start_again(struct job *job, int index, int local, int k) {
  struct rank *n = new_entry(job, index, local, NULL);
  char **argv = job->agent != NULL ? job->agent->argv : job->opt->argv;
  char var[32];
  int rc;
  if (n == NULL)
    return;
  job->nprocs++;
  snprintf(var, sizeof var, "CRNET_RESTARTED=%d", k);
  rc = crnet__launch_spawn_rank_as(job, n, argv, var);
  if (rc != 0) {
    crnet__log("cannot start rank %d again: %s", index, uv_strerror(rc));
    return;
  }
  if (job->where != NULL)
    job->where[index] = NULL;
  crnet__log("rank %d started again (pid %d; restart %d of %d)", index, n->pid,
             k, job->restarts);
}

/* The next restart's number, the lost process marked gone at the
 * rendezvous (pid 0: whichever process the index has); 0 when none is
 * left or the server has gone (nobody could join). */
static int take_restart(struct job *job, int index, int pid) {
  if (job->restarts_left <= 0 || job->rdv == NULL || job->stop != RUNNING ||
      job->aborted)
    return 0;
  crnet__rendezvous_server_lost(job->rdv, index, (uint32_t)pid);
  return job->restarts - job->restarts_left-- + 1;
}

void crnet__launch_restart_local(struct job *job, struct rank *r) {
  int k = take_restart(job, r->index, r->pid);
  if (k > 0)
    crnet__launch_start_again(job, r->index, r->local, k);
}

void crnet__launch_restart_remote(struct job *job, struct rank *r, int index,
                                  int pid) {
  char line[64];
  int k = take_restart(job, index, pid), n;
  if (k == 0)
    return;
  /* The agent starts it, and says so (with its pid). */
  line[0] = CRNET__AGENT_TELL;
  n = snprintf(line + 1, sizeof line - 1, "restart %d %d\n", index, k);
  crnet__launch_ctl_send(r, line, (size_t)n + 1);
}

/* --- hosts that are gone ---------------------------------------------- */

int crnet__launch_restart_track(struct job *job) {
  if (job->restarts == 0 || job->agent != NULL || job->opt->hosts.n == 0)
    return 0;
  job->where = calloc((size_t)job->size, sizeof *job->where);
  job->ended = calloc((size_t)job->size, 1);
  job->rdv_of = calloc((size_t)job->opt->hosts.n, sizeof *job->rdv_of);
  job->host_gone = calloc((size_t)job->opt->hosts.n, 1);
  if (job->where == NULL || job->ended == NULL || job->rdv_of == NULL ||
      job->host_gone == NULL)
    return -1;
  for (int i = 0; i < job->nprocs; i++) {
    struct rank *r = &job->ranks[i];
    for (int j = 0; j < r->count; j++)
      job->where[r->index + j] = r->host != NULL ? r : NULL;
  }
  return 0;
}

void crnet__launch_restart_untrack(struct job *job) {
  free(job->where);
  free(job->ended);
  free(job->rdv_of);
  free(job->host_gone);
  job->where = NULL;
  job->ended = NULL;
  job->rdv_of = NULL;
  job->host_gone = NULL;
}

void crnet__launch_rank_ended(struct job *job, int index) {
  if (job->ended != NULL && index >= 0 && index < job->size)
    job->ended[index] = 1;
}

/* The key from the job's key file, which --restart keeps for this. */
static int read_key(const struct job *job, uint8_t key[CRNET__KEY_BYTES]) {
  char hex[2 * CRNET__KEY_BYTES + 2] = "";
  FILE *f = fopen(job->keyfile, "r");
  int rc = -1;
  if (f != NULL) {
    if (fgets(hex, sizeof hex, f) != NULL) {
      hex[strcspn(hex, "\n")] = '\0';
      rc = crnet__key_parse_hex(hex, key) == 0 ? 0 : -1;
    }
    fclose(f);
  }
  crnet__wipe(hex, sizeof hex);
  return rc;
}

/* Rank `index` started again as restart k in a session of its own on
 * host h. */
static void start_on_host(struct job *job, int h, int index, int k) {
  const crnet__host *host = &job->opt->hosts.hosts[h];
  struct rank *n = new_entry(job, index, 0, host);
  uint8_t key[CRNET__KEY_BYTES];
  char **env, **more, var[32];
  int nenv = 0, rc = -1;
  if (n == NULL || job->rdv_of[h][0] == '\0')
    goto out;
  env = crnet__launch_remote_env(job, &nenv);
  more = env != NULL ? realloc(env, sizeof *env * (size_t)(nenv + 2)) : NULL;
  if (more == NULL) {
    crnet__free_words(env);
    goto out;
  }
  env = more;
  snprintf(var, sizeof var, "CRNET_RESTARTED=%d", k);
  env[nenv] = strdup(var);
  env[nenv + 1] = NULL;
  if (env[nenv] != NULL)
    nenv++;
  if (read_key(job, key) == 0) {
    job->nprocs++;
    rc = crnet__launch_spawn_remote(job, n, key, job->rdv_of[h], env, nenv);
    if (rc != 0)
      job->nprocs--;
  }
  crnet__wipe(key, sizeof key);
  crnet__free_words(env);
out:
  if (rc != 0) {
    crnet__log("cannot start rank %d again on host %s", index, host->name);
    return;
  }
  job->where[index] = n;
  crnet__log("rank %d started again on host %s (restart %d of %d)", index,
             host->name, k, job->restarts);
}

/* The host after h in the list that is not gone (this host if it comes
 * first), or -1. */
static int next_host(const struct job *job, int h) {
  int n = job->opt->hosts.n;
  for (int d = 1; d < n; d++) {
    int c = (h + d) % n;
    if (!job->host_gone[c])
      return c;
  }
  return -1;
}

int crnet__launch_session_over(struct job *job, struct rank *r) {
  int h, to, gone = 0;
  char list[256];
  size_t used = 0;
  if (job->where == NULL || r->host == NULL || r->live || r->judged ||
      r->closed_streams < 2)
    return -1;
  r->judged = 1;
  h = (int)(r->host - job->opt->hosts.hosts);
  list[0] = '\0';
  for (int i = 0; i < job->size; i++)
    if (job->where[i] == r && !job->ended[i] && used < sizeof list - 16) {
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                               gone > 0 ? ", " : "", i);
      gone++;
    }
  if (gone == 0)
    return 0;
  /* Its agent is gone with its ranks: the host takes no more of them. */
  job->host_gone[h] = 1;
  crnet__log("host %s is gone with rank%s %s (its session ended with %s %d)",
             r->host->name, gone == 1 ? "" : "s", list,
             r->term_signal != 0 ? "signal" : "status",
             r->term_signal != 0 ? r->term_signal : (int)r->status);
  for (int i = 0; i < job->size; i++) {
    int k;
    if (job->where[i] != r || job->ended[i])
      continue;
    to = next_host(job, h);
    if (to < 0 || (k = take_restart(job, i, 0)) == 0)
      continue;
    if (job->opt->hosts.hosts[to].local)
      crnet__launch_start_again(job, i, job->nlocal++, k);
    else
      start_on_host(job, to, i, k);
  }
  return gone;
}
