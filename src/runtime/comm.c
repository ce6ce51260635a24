/* Communicator lifecycle, the sticky error, and the blocking wait that every
 * call uses. See comm.h. */
#include "comm.h"
#include "secret.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "board.h"
#include "frame.h"
#include "log.h"
#include "report.h"
#include "request.h"
#include "settings.h"
#include "shm.h"

/* The poll before sleeping, when every rank of the host has a core: long
 * enough to catch a reply that is a few message latencies away, short
 * enough that a rank waiting for a slow peer sleeps almost at once (see
 * docs/PERFORMANCE.md for how it was chosen). */
#define DEFAULT_SPIN_US 50
/* With more ranks than cores the poll yields the core at every turn
 * (sched_yield), so a peer that needs it gets it, and it lasts longer:
 * waking a sleeping rank whose peer shares its core costs more than the
 * handful of turns it takes the peer to answer. 8 B allreduce at p = 4, 8,
 * 16 on 2 cores: 0 (sleep at once) took 113-114, 257-294 and 572-813 us,
 * 1000 took 69-71, 183-230 and 568-581 us; 20 to 100 were worse than 0
 * at p = 8 and 16 (a poll that gives up just before the answer pays both
 * costs). A wait still sleeps after 1 ms without link activity, and the
 * spin's score turns it off where it does not pay (docs/PERFORMANCE.md,
 * "The executor and the wait"). */
#define DEFAULT_SPIN_SHARED_US 1000
/* How long destroy waits for every peer to say goodbye. A peer still
 * computing is given this long to reach crnet_comm_destroy. */
#define BYE_TIMEOUT_MS 60000
#define LINGER_MS 1000
/* How long an abort waits for its ABORT frames to leave. */
#define ABORT_FLUSH_MS 1000

static _Thread_local char init_errmsg[512];

/* World comms of this process open, and whether one was ever made. A
 * process is one rank of its job: a second crnet_comm_init while a world is
 * open would join the job again under the same rank (two libraries of one
 * program, each calling it, e.g. the Python module and the torch backend),
 * and after crlaunch's job key was read and removed it could not even
 * authenticate; either way the caller gets a clear refusal. */
static atomic_int worlds_open;
static atomic_bool joined_once;

const char *crnet_init_errmsg(void) { return init_errmsg; }

void crnet_config_init(crnet_config *cfg) {
  if (cfg == NULL)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->rank = -1;
  cfg->size = -1;
  cfg->serve_rendezvous = -1;
  cfg->lazy_links = -1;
  cfg->progress_thread = -1;
}

/* --- settings ------------------------------------------------------------- */

#define SETTINGS_FAIL(...)                                                     \
  do {                                                                         \
    snprintf(init_errmsg, sizeof init_errmsg, __VA_ARGS__);                    \
    return CRNET_EINVAL;                                                       \
  } while (0)

/* The process's environment, for crnet__settings_read. */
static const char *from_environment(const char *name, void *arg) {
  (void)arg;
  return getenv(name);
}

/* crnet_config's own fields, bounded as the environment's are. */
static int check_config(const crnet_config *cfg) {
  if (cfg->size > CRNET__MAX_JOB_SIZE)
    SETTINGS_FAIL("crnet_config.size %d is too large (at most %d)", cfg->size,
                  CRNET__MAX_JOB_SIZE);
  if (!(cfg->init_timeout >= 0 && cfg->init_timeout <= 1e6))
    SETTINGS_FAIL("crnet_config.init_timeout %g is not a number of seconds "
                  "(0 < t <= 1e6, or 0 for the default)",
                  cfg->init_timeout);
  if (!(cfg->timeout >= 0 && cfg->timeout <= 1e6))
    SETTINGS_FAIL("crnet_config.timeout %g is not a number of seconds "
                  "(0 < t <= 1e6, or 0 for CRNET_TIMEOUT)",
                  cfg->timeout);
  if (cfg->progress_thread < -1 ||
      cfg->progress_thread > CRNET_PROGRESS_THREAD_AUTO)
    SETTINGS_FAIL("crnet_config.progress_thread %d is not -1 "
                  "(CRNET_PROGRESS_THREAD), 0 (off), 1 (on) or 2 (auto)",
                  cfg->progress_thread);
  if (cfg->lazy_links < -1 || cfg->lazy_links > CRNET_LAZY_LINKS_AUTO)
    SETTINGS_FAIL("crnet_config.lazy_links %d is not -1 (CRNET_LAZY_LINKS), "
                  "0 (off), 1 (on) or 2 (auto)",
                  cfg->lazy_links);
  return 0;
}

/* Launchers whose ranks this process cannot join, by the variable each
 * sets in its ranks: started by one of them with none of crnet's variables,
 * a process would run as a job of one beside the others, each printing a
 * result over p = 1 (a user believes the job ran in parallel). `size` is
 * the variable that holds the launcher's job size, where there is one: a
 * job of one there is a job of one here too. */
static const struct foreign_launcher {
  const char *var, *size, *who;
} foreign_launchers[] = {
    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"},
    {"PMI_SIZE", "PMI_SIZE", "an MPICH (Hydra) or PMI launcher"},
    {"MPI_LOCALNRANKS", NULL, "MPICH's mpiexec"},
    {"PMIX_RANK", NULL, "a PMIx launcher (prterun, mpirun, srun --mpi=pmix)"},
    {"WORLD_SIZE", "WORLD_SIZE", "torchrun or a torch launcher (env://)"},
};

/* CRNET_EINVAL with the reason in init_errmsg if a launcher crnet cannot
 * join started this process, else 0. */
static int refuse_foreign_launcher(void) {
  for (size_t i = 0; i < sizeof foreign_launchers / sizeof foreign_launchers[0];
       i++) {
    const struct foreign_launcher *f = &foreign_launchers[i];
    const char *v = getenv(f->var);
    if (v == NULL || (f->size != NULL && strcmp(v, "1") == 0))
      continue;
    SETTINGS_FAIL("this process was started by %s (%s=%.20s), which "
                  "crnet cannot join: start the job with crlaunch -n N, "
                  "or give every rank "
                  "CRNET_RANK, CRNET_SIZE, CRNET_RENDEZVOUS and a job key "
                  "(docs/STARTING.md)",
                  f->who, f->var, v);
  }
  return 0;
}

/* The rank and the size: the config's, else CRNET_RANK and CRNET_SIZE, else
 * Slurm's, else a job of one, unless another launcher started the
 * process. */
static int read_job(const crnet_config *cfg, crnet__settings *s) {
  const char *name[2], *text[2];
  int *out[2] = {&s->rank, &s->size};
  const int config[2] = {cfg->rank, cfg->size};
  crnet__setting_value v;

  for (int k = 0; k < 2; k++) {
    name[k] = crnet__settings_table[CRNET__SET_RANK + k].name;
    text[k] = getenv(name[k]);
  }
  if (cfg->directory != NULL) {
    /* The program's directory (torch's store): the program knows the
     * rank and the size. */
    if (cfg->rank < 0 || cfg->size < 1)
      SETTINGS_FAIL("crnet_config.directory needs crnet_config.rank and "
                    "crnet_config.size as well");
    crnet__directory_from_config(cfg->directory, &s->directory);
    s->have_directory = true;
  } else if (text[0] == NULL && text[1] == NULL && config[0] < 0 &&
             config[1] < 0 && crnet__pmix_started()) {
    /* Started by a PMIx server (srun --mpi=pmix, mpirun, prterun): it
     * gives the rank and the size, and its store stands in for the
     * rendezvous address and the job key. */
    int rc = crnet__pmix_open(&s->rank, &s->size, &s->directory, init_errmsg,
                              sizeof init_errmsg);
    if (rc != 0)
      return rc;
    s->have_directory = true;
    return 0;
  }
  /* Started by Slurm (srun) and not by crlaunch: Slurm's task number and
   * task count are the rank and the size. crnet's own variables win. */
  if (text[0] == NULL && text[1] == NULL && getenv("SLURM_PROCID") != NULL &&
      getenv("SLURM_NTASKS") != NULL) {
    name[0] = "SLURM_PROCID";
    name[1] = "SLURM_NTASKS";
    s->from_slurm = true;
    text[0] = getenv(name[0]);
    text[1] = getenv(name[1]);
  }
  for (int k = 0; k < 2; k++) {
    *out[k] = config[k];
    if (config[k] >= 0 || text[k] == NULL)
      continue;
    if (crnet__setting_parse(CRNET__SET_RANK + k, name[k], text[k], &v,
                             init_errmsg, sizeof init_errmsg) != 0)
      return CRNET_EINVAL;
    *out[k] = (int)v.number;
  }
  if (s->rank < 0 && s->size < 0) {
    /* Started directly, with no launcher: a job of one. */
    if (refuse_foreign_launcher() != 0)
      return CRNET_EINVAL;
    s->rank = 0;
    s->size = 1;
  }
  if (s->rank < 0 || s->size < 1 || s->rank >= s->size)
    SETTINGS_FAIL("rank %d and size %d do not make a job (set both CRNET_RANK "
                  "and CRNET_SIZE, 0 <= rank < size)",
                  s->rank, s->size);
  return 0;
}

/* What only a job with peers reads: the rendezvous, who serves it, the
 * ports and address to listen on, the job key (into `key`). */
static int read_peers(const crnet_config *cfg, crnet__settings *s,
                      crnet__setting_value *v,
                      uint8_t key[CRNET__KEY_BYTES]) {
  const char *key_hex, *key_file, *rdv;
  int rc;
  /* With a directory, rank 0 publishes where it serves the rendezvous,
   * unless CRNET_RENDEZVOUS says where. */
  rdv = cfg->rendezvous != NULL ? cfg->rendezvous : getenv("CRNET_RENDEZVOUS");
  s->publish_rdv = s->have_directory && (rdv == NULL || rdv[0] == '\0');
  if (s->from_slurm && (rdv == NULL || rdv[0] == '\0'))
    SETTINGS_FAIL("started by srun (SLURM_NTASKS=%.12s) without PMIx and "
                  "without CRNET_RENDEZVOUS, so the ranks cannot find each "
                  "other: start the job with srun --mpi=pmix%s, or with "
                  "crlaunch -n N, or export CRNET_RENDEZVOUS=host:port (rank "
                  "0's node) and CRNET_JOB_KEY_FILE to every rank "
                  "(docs/STARTING.md)",
                  getenv("SLURM_NTASKS"),
                  crnet__pmix_built() ? ""
                                      : " (with a crnet built with PMIx: "
                                        "libpmix-dev)");
  rc = crnet__settings_read_except(
      CRNET__READ_PEERS, s->publish_rdv ? CRNET__SET_RENDEZVOUS : -1, cfg,
      from_environment, NULL, v, init_errmsg, sizeof init_errmsg);
  if (rc != 0)
    return rc;
  if (!s->publish_rdv) {
    rc = crnet__settings_host_port(v[CRNET__SET_RENDEZVOUS].text, s->rdv_host,
                                   sizeof s->rdv_host, &s->rdv_port);
    assert(rc == 0); /* the walk checked it */
  }
  if (cfg->serve_rendezvous >= 0)
    s->serve_rendezvous = cfg->serve_rendezvous != 0 && s->rank == 0;
  else
    s->serve_rendezvous =
        s->rank == 0 && v[CRNET__SET_LAUNCHER].source == CRNET__FROM_NONE;
  /* Where rank 0 publishes the rendezvous, nobody else can serve it. */
  if (s->publish_rdv)
    s->serve_rendezvous = s->rank == 0;
  if (v[CRNET__SET_PORT_RANGE].source != CRNET__FROM_NONE) {
    s->port_lo = (int)v[CRNET__SET_PORT_RANGE].number;
    s->port_hi = (int)v[CRNET__SET_PORT_RANGE].high;
    /* The range is what a firewall lets through, so the rendezvous that
     * rank 0 serves must be inside it as well as the mesh listeners. */
    if (s->serve_rendezvous && !s->publish_rdv &&
        (s->rdv_port < s->port_lo || s->rdv_port > s->port_hi))
      SETTINGS_FAIL("CRNET_PORT_RANGE=%d-%d does not hold port %d of "
                    "CRNET_RENDEZVOUS, where rank 0 is to serve the "
                    "rendezvous",
                    s->port_lo, s->port_hi, s->rdv_port);
  }
  /* Checked against the host's interfaces in the bootstrap, which knows
   * the rendezvous address family. */
  assert(crnet__settings_table[CRNET__SET_IFACE].max_length ==
         sizeof s->iface);
  snprintf(s->iface, sizeof s->iface, "%s",
           v[CRNET__SET_IFACE].text != NULL ? v[CRNET__SET_IFACE].text : "");

  key_hex = cfg->job_key_hex != NULL ? cfg->job_key_hex
                                     : getenv("CRNET_JOB_KEY");
  key_file = cfg->job_key_file != NULL ? cfg->job_key_file
                                       : getenv("CRNET_JOB_KEY_FILE");
  if (key_hex != NULL) {
    if (crnet__key_parse_hex(key_hex, key) != 0)
      SETTINGS_FAIL("CRNET_JOB_KEY is not 64 hex digits");
  } else if (key_file != NULL) {
    rc = crnet__key_load_file(key_file, key);
    if (rc != 0) {
      snprintf(init_errmsg, sizeof init_errmsg,
               "cannot read a job key from CRNET_JOB_KEY_FILE '%s': %s",
               key_file,
               rc == CRNET_EIO ? strerror(errno) : "not 64 hex digits");
      return rc;
    }
  } else if (s->have_directory) {
    /* Rank 0 makes one and publishes it (bootstrap.c). */
    s->publish_key = true;
  } else {
    SETTINGS_FAIL("no job key: set CRNET_JOB_KEY or CRNET_JOB_KEY_FILE "
                  "(crlaunch does this for you)");
  }
  return 0;
}

/* Lets go of the directory the settings hold, if any (PMIx_Finalize). */
static void close_directory(crnet__settings *s) {
  if (s->have_directory && s->directory.close != NULL)
    s->directory.close(s->directory.ctx);
  s->have_directory = false;
}

/* Merges cfg with the environment contract (the table of settings.c). The
 * key goes to `key`. */
static int load_settings(const crnet_config *cfg, crnet__settings *s,
                         uint8_t key[CRNET__KEY_BYTES]) {
  crnet__setting_value v[CRNET__SETTING_COUNT];
  int rc;

  memset(s, 0, sizeof *s);
  rc = check_config(cfg);
  if (rc == 0)
    rc = read_job(cfg, s);
  if (rc == 0)
    rc = crnet__settings_read(CRNET__READ_INIT, cfg, from_environment, NULL, v,
                              init_errmsg, sizeof init_errmsg);
  if (rc != 0)
    return rc;
  s->progress = (int)v[CRNET__SET_PROGRESS_THREAD].number;
  s->init_timeout = v[CRNET__SET_INIT_TIMEOUT].seconds;
  s->coll_timeout = v[CRNET__SET_TIMEOUT].seconds;
  s->liveness = v[CRNET__SET_LIVENESS_TIMEOUT].seconds;
  s->handshake = v[CRNET__SET_HANDSHAKE_TIMEOUT].seconds;
  /* Unset: decided from the ranks per core (wait_plan). */
  s->spin_us = v[CRNET__SET_SPIN_US].source == CRNET__FROM_NONE
                   ? -1
                   : v[CRNET__SET_SPIN_US].number;
  /* Set by crlaunch, which binds each rank to CPUs of its own: the rank's
   * mask then no longer says how many the host's ranks share. */
  s->host_cpus = (int)v[CRNET__SET_HOST_CPUS].number;
  s->stream_piece = (uint64_t)v[CRNET__SET_STREAM_PIECE].number;
  s->rounds_in_flight = (int)v[CRNET__SET_ROUNDS_IN_FLIGHT].number;
  s->streams = (int)v[CRNET__SET_STREAMS].number;
  s->stream_min = (int)v[CRNET__SET_STREAMS_MIN_BYTES].number;
  s->encrypt = v[CRNET__SET_ENCRYPT].number != 0;
  /* CRNET_LAZY_LINKS. Auto turns lazy links on from
   * CRNET_LAZY_LINKS_AUTO_MIN ranks: below that the full mesh is cheap (a
   * few dozen sockets, set up in parallel in milliseconds) and keeps every
   * collective's first call free of connection set-up, while from there on
   * the mesh's p - 1 sockets and handshakes per rank (p^2 in the job, times
   * CRNET_STREAMS) grow past what the schedules use (circulant and
   * hypercube talk to 2 log2 p peers, ring to 2) and towards descriptor
   * limits (1024 by default: p = 1024, or 128 with 8 streams). */
  s->lazy = v[CRNET__SET_LAZY_LINKS].number == CRNET_LAZY_LINKS_ON ||
            (v[CRNET__SET_LAZY_LINKS].number == CRNET_LAZY_LINKS_AUTO &&
             s->size >= CRNET_LAZY_LINKS_AUTO_MIN);
  s->socket_buffer = (int)v[CRNET__SET_SOCKET_BUFFER].number;
  /* Stored as given; the collectives layer checks names when it uses them,
   * and crnet_comm_set_schedule when they are set. */
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    assert(crnet__settings_table[CRNET__SET_SCHEDULE + k].max_length ==
           sizeof s->schedule[k]);
    snprintf(s->schedule[k], sizeof s->schedule[k], "%s",
             v[CRNET__SET_SCHEDULE + k].text);
  }
  if (v[CRNET__SET_TRACE].source != CRNET__FROM_NONE &&
      crnet__trace_path(v[CRNET__SET_TRACE].text, s->rank, s->trace,
                        sizeof s->trace) != 0)
    SETTINGS_FAIL("CRNET_TRACE='%.40s...' is too long",
                  v[CRNET__SET_TRACE].text);
  s->stats = v[CRNET__SET_STATS].number != 0;
  s->transport = (int)v[CRNET__SET_TRANSPORT].number;
  s->shm_ring = (uint32_t)v[CRNET__SET_SHM_RING_BYTES].number;
  s->shm_single_copy = (int)v[CRNET__SET_SHM_SINGLE_COPY].number;
  s->shm_board = (uint32_t)v[CRNET__SET_SHM_BOARD_BYTES].number;
  s->shm_membarrier = (int)v[CRNET__SET_SHM_MEMBARRIER].number;
  s->survive = v[CRNET__SET_ON_FAILURE].number != 0;
  s->restarts = (int)v[CRNET__SET_RESTARTS].number;
  s->restarted = (int)v[CRNET__SET_RESTARTED].number;
  if (s->restarts > 0 && !s->survive)
    SETTINGS_FAIL("CRNET_RESTARTS=%d needs CRNET_ON_FAILURE=continue: only "
                  "survivors can take a restarted rank back "
                  "(crlaunch --restart sets both)",
                  s->restarts);
  if (s->restarted > 0 && (s->restarts == 0 || s->size == 1))
    SETTINGS_FAIL("CRNET_RESTARTED=%d: this process was started again, but "
                  "the job %s",
                  s->restarted,
                  s->size == 1 ? "has one rank (nobody to join)"
                               : "has no CRNET_RESTARTS to join in");
  if (s->size > CRNET__MAX_JOB_SIZE - s->restarts)
    SETTINGS_FAIL("CRNET_SIZE %d with CRNET_RESTARTS %d is too large", s->size,
                  s->restarts);
  if (s->size == 1)
    return 0; /* nothing to connect */
  return read_peers(cfg, s, v, key);
}

/* --- lifecycle ------------------------------------------------------------------ */

int crnet__comm_hosts(crnet_comm *c) {
  const crnet__rendezvous_entry *t = c->w->table;
  int32_t *host, *first, nhosts = 0;
  if (c->host != NULL)
    return 0;
  host = crnet__malloc(sizeof *host * (size_t)c->size);
  /* a rank of each host */
  first = crnet__malloc(sizeof *first * (size_t)c->size);
  if (host == NULL || first == NULL) {
    free(host);
    free(first);
    return CRNET_ENOMEM;
  }
  for (int r = 0; r < c->size; r++) {
    const crnet__rendezvous_entry *e = &t[crnet__world_rank(c, r)];
    int32_t g = 0;
    while (g < nhosts &&
           !crnet__rendezvous_same_node(e, &t[crnet__world_rank(c, first[g])]))
      g++;
    if (g == nhosts)
      first[nhosts++] = r;
    host[r] = g;
  }
  free(first);
  c->host = host;
  c->nhosts = nhosts;
  return 0;
}

/* A comm's own memory; the world's goes with the world comm. */
static void free_comm(crnet_comm *c) {
  crnet__world *w = c->w;
  if (c->coll != NULL)
    w->upper->state_free(c->coll);
  free(c->host);
  free(c->peer_stats);
  free(c->world);
  free(c->local);
  crnet__p2p_comm_free(c);
  crnet__agree_free(c);
  if (w != NULL && w->comms[0] == c) {
    crnet__p2p_world_free(w);
    crnet__agree_world_free(w);
    free(w->lost);
    free(w->admitted);
    free(w->admission);
    if (w->report_fd >= 0)
      close(w->report_fd);
    free(w->rank_end);
    crnet__trace_close(w->trace);
    crnet__secret_free(w->key);
    free(w->temp);
    free(w->node_ranks);
    pthread_cond_destroy(&w->thread_cv);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->connecting);
    free(w->calling);
    free(w->peers);
    free(w->table);
    free(w);
  }
  free(c);
}

static void on_walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* Runs the loop until every handle is closed, then closes it. Anything still
 * open here (a lingering connection) is closed outright. */
static void close_loop(crnet_comm *c) {
  crnet__report_close(c);
  crnet__progress_close(c);
  uv_timer_stop(&c->w->deadline);
  if (!uv_is_closing((uv_handle_t *)&c->w->deadline))
    uv_close((uv_handle_t *)&c->w->deadline, NULL);
  while (uv_run(&c->w->loop, UV_RUN_DEFAULT) != 0)
    ;
  if (uv_loop_close(&c->w->loop) == UV_EBUSY) {
    uv_walk(&c->w->loop, on_walk_close, NULL);
    while (uv_run(&c->w->loop, UV_RUN_DEFAULT) != 0)
      ;
    uv_loop_close(&c->w->loop);
  }
}

/* libuv writes with write(2), which raises SIGPIPE when the peer is gone;
 * the default action would kill the rank instead of letting the call return
 * CRNET_EPEER. A program that installed its own SIGPIPE handling keeps it. */
static void ignore_sigpipe(void) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
  }
}

/* Cores this process may run on. */
static int usable_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return 1;
}

/* Decides the wait strategy once the table is known: ranks that run on
 * this kernel (by its boot id: network namespaces and containers of one
 * machine share its cores, whatever their host names; by host name where
 * the boot id is unknown) compete for its cores (CRNET_HOST_CPUS when
 * crlaunch bound the ranks, else this process's). Polling before sleeping
 * only helps while each of them has a core; beyond that a polling rank
 * steals the core its peer needs to answer. */
static bool same_machine(const crnet__rendezvous_entry *a,
                         const crnet__rendezvous_entry *b) {
  static const uint8_t unknown[16];
  if (memcmp(a->node, unknown, sizeof unknown) != 0 &&
      memcmp(b->node, unknown, sizeof unknown) != 0)
    return crnet__rendezvous_same_kernel(a, b);
  return strcmp(a->host, b->host) == 0;
}

static void wait_plan(crnet_comm *c, const crnet__settings *s) {
  const crnet__rendezvous_entry *t = c->w->table;
  int local_ranks = 1; /* this one included */
  int host_cpus = s->host_cpus > 0 ? s->host_cpus : usable_cores();
  bool shm = c->w->transport != CRNET__TRANSPORT_TCP && !c->w->encrypt;
  for (int r = 0; r < c->size && t != NULL; r++)
    if (r != c->rank && same_machine(&t[r], &t[c->rank]))
      local_ranks++;
  /* No list (out of memory): polling waits just run the loop each turn. */
  c->w->node_ranks =
      shm && t != NULL && c->size > 1
          ? crnet__malloc(sizeof *c->w->node_ranks * (size_t)c->size)
          : NULL;
  c->w->n_node_ranks = 0;
  for (int r = 0; r < c->size && c->w->node_ranks != NULL; r++)
    if (r != c->rank && crnet__rendezvous_same_node(&t[r], &t[c->rank]))
      c->w->node_ranks[c->w->n_node_ranks++] = r;
  bool own_cores = local_ranks <= host_cpus;
  c->w->spin_yield = !own_cores;
  /* Asymmetric fences (shm.h) move a fence from every write to every
   * sleep: where ranks share cores they sleep at once, often, and one
   * membarrier per sleep there would cost more than it saves. Before any
   * link to this node is set up: a segment takes the choice for its life. */
  if (shm && (s->shm_membarrier == 1 || (s->shm_membarrier < 0 && own_cores)))
    crnet__shm_fences_enable();
  /* The progress thread's auto: only where it has a core of its own, so
   * that it never takes one from a rank's computation (docs/PERFORMANCE.md,
   * Overlap): a spare core on the host, and one this rank may run on. */
  c->w->progress_mode = c->size > 1 &&
                     (s->progress == CRNET_PROGRESS_THREAD_ON ||
                      (s->progress == CRNET_PROGRESS_THREAD_AUTO &&
                       local_ranks < host_cpus && usable_cores() > 1));
  if (s->spin_us >= 0)
    c->w->spin_ns = (uint64_t)s->spin_us * 1000;
  else if (c->size > 1)
    c->w->spin_ns = (uint64_t)(own_cores ? DEFAULT_SPIN_US
                                      : DEFAULT_SPIN_SHARED_US) * 1000;
  else
    c->w->spin_ns = 0;
  c->w->spin_score = CRNET__SPIN_SCORE_MAX / 2;
}

/* Socket buffers of the mesh links: by default the kernel sizes them as
 * the connection goes (autotuning, which a fixed size would turn off). A
 * size the kernel refuses (above net.core.[rw]mem_max without privilege)
 * is capped by it, silently: the links work either way. */
/* The carriage of a link to a rank on this node (link_shm.h): the lower
 * rank of the pair offers shared memory, the higher takes it; links to
 * other nodes, and encrypted ones, stay on TCP. */
void crnet__world_choose_carriage(crnet__world *w, crnet__link *l) {
  const crnet__rendezvous_entry *t = w->table;
  /* Single copy (link_shm.c) by default only where every rank of the host
   * has a core: a write then completes only once its reader has run and
   * copied it, and with ranks waiting for cores that cost more than the
   * second copy saves (docs/PERFORMANCE.md: 256 KiB allreduce at p = 2
   * 2.1 times faster, at p = 4 1.26 times slower). */
  bool two_copies = w->shm_single_copy == 0 ||
                    (w->shm_single_copy < 0 && w->spin_yield);
  unsigned flags = (w->transport == CRNET__TRANSPORT_SHM ? CRNET__SHM_REQUIRED
                                                        : 0) |
                   (two_copies ? CRNET__SHM_TWO_COPIES : 0);
  if (l->purpose != CRNET__HS_MESH || t == NULL || l->peer < 0 ||
      l->peer >= w->size)
    return;
  /* A restarted rank's links come before its entry (join.c): chosen when
   * that comes. */
  if (t[l->peer].family == 0)
    return;
  if (w->transport == CRNET__TRANSPORT_TCP || l->tx != NULL ||
      !crnet__rendezvous_same_node(&t[w->rank], &t[l->peer])) {
    crnet__link_shm_refuse(l);
    return;
  }
  if (w->rank < l->peer)
    crnet__link_shm_offer(l, t[l->peer].pid, w->shm_ring, flags);
  else
    crnet__link_shm_welcome(l, t[l->peer].pid, flags);
}

void crnet__comm_link_settings(crnet_comm *c, crnet__link *l) {
  /* The progress engine looks at requests when their links moved, and a
   * new link is itself news (a round may wait for it: lazy links). */
  l->io_flag = &c->w->progress_dirty;
  l->io_count = &c->w->io_count;
  l->drain_parked = &c->w->p2p_live;
  l->loop_nowait = &c->w->loop_nowait;
  c->w->progress_dirty = true;
  crnet__link_set_liveness(l, c->w->liveness_ms);
  if (c->w->socket_buffer > 0) {
    int v = c->w->socket_buffer;
    uv_send_buffer_size((uv_handle_t *)&l->tcp, &v);
    v = c->w->socket_buffer;
    uv_recv_buffer_size((uv_handle_t *)&l->tcp, &v);
  }
  crnet__world_choose_carriage(c->w, l);
}

/* A world comm whose init failed after its links began: every link and
 * the listener close, without a goodbye (the peers learn it from the
 * closed connections), and everything goes. */
static void discard_world(crnet_comm *c) {
  crnet__progress_stop(c);
  for (int i = 0; i < crnet__comm_nlinks(c); i++)
    if (c->w->peers[i] != NULL && !c->w->peers[i]->closed)
      crnet__link_close(&c->w->peers[i]->link);
  crnet__lazy_close_all(c, NULL, 0);
  close_loop(c);
  for (int i = 0; i < crnet__comm_nlinks(c); i++)
    free(c->w->peers[i]);
  free_comm(c);
}

int crnet__comm_init(crnet_comm **out, const crnet_config *cfg,
                     const crnet__upper_layer *upper) {
  crnet_config defaults;
  crnet__settings s;
  crnet_comm *c;
  char prefix[48];
  int rc;

  init_errmsg[0] = '\0';
  if (out == NULL) {
    snprintf(init_errmsg, sizeof init_errmsg, "comm is NULL");
    return CRNET_EINVAL;
  }
  *out = NULL;
  if (atomic_load(&worlds_open) > 0) {
    snprintf(init_errmsg, sizeof init_errmsg,
             "crnet_comm_init: this process has joined its job already and "
             "its world comm is open (a process is one rank: make more comms "
             "from that one with crnet_comm_dup or crnet_comm_split)");
    return CRNET_EINVAL;
  }
  if (atomic_load(&joined_once) && getenv("CRNET_JOB_KEY_FILE") != NULL &&
      access(getenv("CRNET_JOB_KEY_FILE"), R_OK) != 0) {
    snprintf(init_errmsg, sizeof init_errmsg,
             "crnet_comm_init: this process joined its job already and "
             "destroyed its world comm; a process joins a crlaunch job once "
             "(its job key was read and removed then)");
    return CRNET_EINVAL;
  }
  if (cfg == NULL) {
    crnet_config_init(&defaults);
    cfg = &defaults;
  }
  c = crnet__calloc(1, sizeof *c);
  if (c != NULL)
    c->w = crnet__calloc(1, sizeof *c->w);
  if (c == NULL || c->w == NULL) {
    free(c);
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  /* The world comm: context 0, the job's ranks as they are. */
  c->w->comms[0] = c;
  c->w->ncomms = 1;
  c->w->report_fd = -1;
  c->w->upper = upper;
  pthread_mutex_init(&c->w->mu, NULL);
  pthread_cond_init(&c->w->cv, NULL);
  pthread_cond_init(&c->w->thread_cv, NULL);
  c->w->key = crnet__secret_alloc(CRNET__KEY_BYTES);
  if (c->w->key == NULL) {
    free(c->w);
    free(c);
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  rc = load_settings(cfg, &s, c->w->key);
  if (rc == 0)
    rc = crnet__tuning_init(&c->w->tuning, s.rank, init_errmsg,
                            sizeof init_errmsg);
  /* A directory serves the bootstrap only; a job of one has none. */
  if (rc != 0 || s.size == 1)
    close_directory(&s);
  if (rc != 0) {
    free_comm(c);
    return rc;
  }
  c->rank = c->w->rank = c->w->index = s.rank;
  c->size = c->w->world_size = s.size;
  c->w->size = s.size + s.restarts; /* room for restarted ranks */
  /* Before this comm opens any socket of its own. */
  crnet__report_find(c);
  c->last_coll = -1;
  c->board_slot = -1;
  c->w->stream_piece = s.stream_piece;
  c->w->rounds_in_flight = (uint32_t)s.rounds_in_flight;
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    snprintf(c->w->default_schedule[k], sizeof c->w->default_schedule[k], "%s",
             s.schedule[k]);
  ignore_sigpipe();
  snprintf(prefix, sizeof prefix, "crnet[%d]: ", c->rank);
  crnet__log_set_prefix(prefix);
  /* One stream per peer until the rendezvous says otherwise (bootstrap). */
  c->w->streams = 1;
  c->w->stream_min = (uint64_t)s.stream_min;
  c->w->peers = crnet__calloc((size_t)c->w->size, sizeof *c->w->peers);
  c->w->table = crnet__calloc((size_t)c->w->size, sizeof *c->w->table);
  c->peer_stats = crnet__calloc((size_t)c->w->size, sizeof *c->peer_stats);
  c->w->report_stats = s.stats;
  c->w->encrypt = s.encrypt;
  c->w->liveness_ms = (uint64_t)(s.liveness * 1000);
  c->w->handshake_ms = (uint64_t)(s.handshake * 1000 + 0.5);
  c->w->socket_buffer = s.socket_buffer;
  c->w->transport = s.transport;
  c->w->shm_ring = s.shm_ring;
  c->w->shm_board = s.shm_board;
  c->w->shm_single_copy = s.shm_single_copy;
  c->w->survive = s.survive;
  c->w->revoke_asked = -1;
  if (s.survive)
    c->w->lost = crnet__calloc((size_t)c->w->size, 1);
  if (s.restarts > 0)
    c->w->admitted = crnet__calloc((size_t)c->w->size, 1);
  snprintf(c->w->iface, sizeof c->w->iface, "%s", s.iface);
  if (c->w->peers == NULL || c->w->table == NULL || c->peer_stats == NULL ||
      (s.survive && c->w->lost == NULL) ||
      (s.restarts > 0 && c->w->admitted == NULL) ||
      upper->state_new(c, NULL) != 0) {
    close_directory(&s);
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  if (uv_loop_init(&c->w->loop) != 0) {
    close_directory(&s);
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "cannot create an event loop");
    return CRNET_EIO;
  }
  uv_timer_init(&c->w->loop, &c->w->deadline);
  c->w->deadline.data = c;
  if (crnet__progress_init(c) != 0) {
    close_loop(c);
    close_directory(&s);
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "cannot set up the event loop");
    return CRNET_EIO;
  }
  crnet__report_listen(c);
  if (s.trace[0] != '\0') {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int e = crnet__trace_open(&c->w->trace, s.trace, c->rank, c->size, host);
    if (e != 0) {
      snprintf(init_errmsg, sizeof init_errmsg,
               "CRNET_TRACE: cannot write %.300s: %s", s.trace, strerror(e));
      close_loop(c);
      close_directory(&s);
      free_comm(c);
      return CRNET_EINVAL;
    }
  }
  if (c->size > 1) {
    rc = crnet__bootstrap(c, &s, init_errmsg, sizeof init_errmsg);
    close_directory(&s);
    if (rc != 0) {
      discard_world(c);
      return rc;
    }
  }
  wait_plan(c, &s);
  /* Lazy links made during the bootstrap had theirs already. */
  for (int i = 0; i < crnet__comm_nlinks(c) && !c->w->lazy; i++)
    if (c->w->peers[i] != NULL && !c->w->peers[i]->closed)
      crnet__comm_link_settings(c, &c->w->peers[i]->link);
  c->w->coll_timeout_ms = (uint64_t)(s.coll_timeout * 1000);
  if (s.restarted > 0) {
    /* A restarted rank: the comm a survivors' grow admits it to is the
     * one it gets (join.c). */
    crnet_comm *joined = NULL;
    uv_update_time(&c->w->loop);
    rc = crnet__join(c, uv_now(&c->w->loop) + (uint64_t)(s.init_timeout * 1000),
                     &joined, init_errmsg, sizeof init_errmsg);
    if (rc != 0) {
      discard_world(c);
      return rc;
    }
    c = joined;
  }
  atomic_fetch_add(&worlds_open, 1);
  atomic_store(&joined_once, true);
  *out = c;
  return 0;
}

static bool goodbyes_done(void *arg) {
  crnet_comm *c = arg;
  if (c->w->torn_down)
    return true;
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->w->peers[i];
    if (p == NULL || p->closed || p->link.failed)
      continue;
    /* A restarted rank no grow admitted: it is in its crnet_comm_init,
     * and learns from our BYE that it never will be (join.c). */
    if (c->w->admitted != NULL && c->w->rank < c->w->world_size &&
        (int)p->link.peer >= c->w->world_size && !c->w->admitted[p->link.peer])
      continue;
    if (!p->got_bye || crnet__link_busy(&p->link))
      return false;
  }
  return true;
}

static bool peers_closed(void *arg) {
  crnet_comm *c = arg;
  return c->w->open_peers == 0;
}

static void report_stats(crnet_comm *c);

/* A comm made by crnet_comm_split or crnet_comm_dup goes: local, the
 * links stay the world's. Frames its peers send it from now on name a
 * context this rank no longer has: a mismatch, as it should be. */
static int destroy_derived(crnet_comm *c) {
  crnet__world *w = c->w;
  crnet_comm *world = w->comms[0];
  int rc = c->err;
  crnet__board_forget(c);
  crnet__req_free_unwaited_of(c);
  pthread_mutex_lock(&w->mu);
  /* CRNET_STATS reports a rank's calls once, at the world's destroy: the
   * comm's counters join the world's (crnet_comm_coll_stats on the world
   * comm then counts them too). */
  for (int k = 0; k < CRNET_COLL_COUNT && world != NULL && w->report_stats;
       k++) {
    crnet_coll_stats *to = &world->coll_stats[k];
    const crnet_coll_stats *from = &c->coll_stats[k];
    to->calls += from->calls;
    to->failed += from->failed;
    to->rounds += from->rounds;
    to->bytes_sent += from->bytes_sent;
    to->bytes_received += from->bytes_received;
    to->seconds += from->seconds;
    to->wait_seconds += from->wait_seconds;
    to->reduce_seconds += from->reduce_seconds;
  }
  w->comms[c->ctx] = NULL;
  w->ncomms--;
  pthread_mutex_unlock(&w->mu);
  free_comm(c);
  return rc;
}

int crnet_comm_destroy(crnet_comm *c) {
  int rc;
  uint32_t in_flight, others;
  if (c == NULL)
    return 0;
  pthread_mutex_lock(&c->w->mu);
  in_flight = crnet__req_in_flight(c);
  others = c->w->ncomms - 1;
  pthread_mutex_unlock(&c->w->mu);
  if (in_flight > 0) {
    crnet__set_callmsg(c, "crnet_comm_destroy: %u request(s) still in "
                          "flight: wait for them first (or crnet_comm_abort, "
                          "which completes them)",
                       in_flight);
    return CRNET_EINVAL;
  }
  if (c->ctx != 0 && c->owned_world != NULL) {
    /* A restarted rank's comm from crnet_comm_init: the world goes too. */
    crnet_comm *world = c->owned_world;
    if (others > 1) {
      crnet__set_callmsg(c,
                         "crnet_comm_destroy: %u communicator(s) made "
                         "from this one are alive: destroy them first",
                         others - 1);
      return CRNET_EINVAL;
    }
    rc = destroy_derived(c);
    /* The world's sticky error is of losses before this rank joined, or
     * that the comm the program had reported already (rc): not news. */
    int wrc = crnet_comm_destroy(world);
    return rc != 0 || wrc == CRNET_EPEER || wrc == CRNET_EREVOKED ? rc : wrc;
  }
  if (c->ctx != 0) {
    /* Not while the loop's owner may be looking at it (a completion
     * callback of another comm's request may destroy it: that thread owns
     * the loop, and the engine does not touch this comm after its last
     * request completed). */
    return destroy_derived(c);
  }
  if (others > 0) {
    crnet__set_callmsg(c, "crnet_comm_destroy: %u communicator(s) made from "
                          "this one by crnet_comm_split or crnet_comm_dup "
                          "are alive: destroy them first",
                       others);
    return CRNET_EINVAL;
  }
  crnet__progress_stop(c);
  crnet__req_free_unwaited(c);
  if (c->w->report_stats)
    report_stats(c);
  if (c->w->lazy)
    crnet__lazy_resume(c);
  if (!c->w->torn_down) {
    /* Goodbye to everyone linked, then wait for everyone's goodbye: after
     * it the peer sends nothing more, so closing cannot leave unread bytes
     * that would turn our FIN into a reset. Peers never linked (lazy
     * links) play no part. With the world comm failed, the links still
     * open are those of comms that had not (tell_members closed the
     * others): their peers may still be finishing calls with this rank. */
    for (int i = 0; i < crnet__comm_nlinks(c); i++) {
      crnet__peer *p = c->w->peers[i];
      if (p != NULL && !p->closed && !p->link.failed)
        crnet__link_send_control(&p->link, CRNET__FRAME_BYE, NULL, 0);
    }
    if (crnet__comm_run_until(c, goodbyes_done, c, BYE_TIMEOUT_MS) != 0)
      crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                       "crnet_comm_destroy: peers did not leave within %d s",
                       BYE_TIMEOUT_MS / 1000);
  }
  /* Lazy links: nobody needs to connect to a rank that is leaving (every
   * exchange it was part of is over, so every peer it dealt with has its
   * link), and calls have nothing left to do. Only now, after the goodbyes
   * ran the loop: a call whose last handshake bytes still wait unread
   * would be cut with a reset. */
  crnet__lazy_close_all(c, NULL, 0);
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->w->peers[i];
    if (p != NULL && !p->closed)
      crnet__link_close_gently(&p->link, LINGER_MS);
  }
  crnet__comm_run_until(c, peers_closed, c, 0);
  for (int i = 0; i < crnet__comm_nlinks(c); i++)
    free(c->w->peers[i]);
  rc = c->err;
  close_loop(c);
  free_comm(c);
  atomic_fetch_sub(&worlds_open, 1);
  return rc;
}

/* --- derived comms -------------------------------------------------------- */

void crnet__split_enter(crnet_comm *parent) {
  atomic_fetch_add(&parent->w->splits, 1);
}

void crnet__split_leave(crnet_comm *parent) {
  crnet__world *w = parent->w;
  atomic_fetch_sub(&w->splits, 1);
  /* Frames that waited for an id this rank did not know are looked at
   * again by the loop's owner, at its next pass: of the new comm, they
   * wait for its calls; of none, they are a mismatch now. */
  atomic_store(&w->recheck_asked, true);
  if (w->progress_handles)
    uv_async_send(&w->kick);
}

void crnet__ctx_offer(crnet_comm *parent, uint64_t mask[CRNET__CTX_WORDS]) {
  crnet__world *w = parent->w;
  pthread_mutex_lock(&w->mu);
  for (uint32_t i = 0; i < CRNET__CTX_WORDS; i++)
    mask[i] = ~w->ctx_reserved[i];
  for (uint32_t id = 0; id < CRNET__MAX_CTX; id++)
    if (w->comms[id] != NULL)
      mask[id / 64] &= ~((uint64_t)1 << (id % 64));
  pthread_mutex_unlock(&w->mu);
  mask[0] &= ~(uint64_t)1; /* the world's */
}

bool crnet__ctx_reserve(crnet_comm *parent, uint32_t id) {
  crnet__world *w = parent->w;
  uint64_t bit = (uint64_t)1 << (id % 64);
  bool ok;
  pthread_mutex_lock(&w->mu);
  ok = id > 0 && id < CRNET__MAX_CTX && w->comms[id] == NULL &&
       (w->ctx_reserved[id / 64] & bit) == 0;
  if (ok)
    w->ctx_reserved[id / 64] |= bit;
  pthread_mutex_unlock(&w->mu);
  return ok;
}

uint32_t crnet__ctx_lowest(const uint64_t mask[CRNET__CTX_WORDS]) {
  for (uint32_t i = 0; i < CRNET__CTX_WORDS; i++)
    if (mask[i] != 0)
      return i * 64 + (uint32_t)__builtin_ctzll(mask[i]);
  return 0;
}

void crnet__ctx_release(crnet_comm *parent, uint32_t id) {
  crnet__world *w = parent->w;
  pthread_mutex_lock(&w->mu);
  if (id < CRNET__MAX_CTX)
    w->ctx_reserved[id / 64] &= ~((uint64_t)1 << (id % 64));
  pthread_mutex_unlock(&w->mu);
}

int crnet__comm_derive_new(crnet_comm *parent, int max_size,
                           crnet_comm **out) {
  crnet__world *w = parent->w;
  crnet_comm *c = crnet__calloc(1, sizeof *c);
  int rc;
  *out = NULL;
  if (c == NULL)
    return CRNET_ENOMEM;
  c->w = w;
  c->last_coll = -1;
  c->board_slot = -1;
  c->err_origin = -1;
  c->world = crnet__malloc(sizeof *c->world * (size_t)max_size);
  c->local = crnet__malloc(sizeof *c->local * (size_t)w->size);
  c->peer_stats = crnet__calloc((size_t)max_size, sizeof *c->peer_stats);
  if (c->world == NULL || c->local == NULL || c->peer_stats == NULL) {
    free_comm(c);
    return CRNET_ENOMEM;
  }
  pthread_mutex_lock(&w->mu);
  rc = w->upper->state_new(c, parent);
  pthread_mutex_unlock(&w->mu);
  if (rc != 0) {
    free_comm(c);
    return CRNET_ENOMEM;
  }
  *out = c;
  return 0;
}

void crnet__comm_derive_finish(crnet_comm *c, uint32_t ctx, int rank, int size,
                               const int32_t *world) {
  crnet__world *w = c->w;
  c->ctx = ctx;
  c->rank = rank;
  c->size = size;
  for (int j = 0; j < w->size; j++)
    c->local[j] = -1;
  for (int r = 0; r < size; r++) {
    c->world[r] = world[r];
    c->local[world[r]] = r;
  }
  pthread_mutex_lock(&w->mu);
  w->ctx_reserved[ctx / 64] &= ~((uint64_t)1 << (ctx % 64));
  w->comms[ctx] = c;
  w->ncomms++;
  crnet__p2p_adopt(c);
  pthread_mutex_unlock(&w->mu);
}

void crnet__comm_derive_discard(crnet_comm *c) {
  if (c != NULL)
    free_comm(c);
}

int crnet_comm_rank(const crnet_comm *c) { return c != NULL ? c->rank : -1; }

int crnet_comm_joined(const crnet_comm *c) {
  if (c == NULL)
    return CRNET_EINVAL;
  return c->owned_world != NULL;
}

int crnet_comm_size(const crnet_comm *c) { return c != NULL ? c->size : -1; }

int crnet_comm_host(const crnet_comm *comm, int rank) {
  /* The layout is worked out once, at the first call that needs it
   * (crnet__comm_hosts), under the lock: not a change the caller sees. */
  crnet_comm *c = (crnet_comm *)(uintptr_t)comm;
  int rc;
  if (c == NULL || rank < 0 || rank >= c->size)
    return CRNET_EINVAL;
  pthread_mutex_lock(&c->w->mu);
  rc = crnet__comm_hosts(c);
  if (rc == 0)
    rc = c->host[rank];
  pthread_mutex_unlock(&c->w->mu);
  return rc;
}

int crnet_comm_job_rank(const crnet_comm *c, int rank) {
  if (c == NULL || rank < 0 || rank >= c->size)
    return -1;
  /* world is NULL for the comm of crnet_comm_init: its ranks are the
   * job's. Set at the comm's making, never changed: no lock. */
  return c->world != NULL ? c->world[rank] : rank;
}

const char *crnet_comm_errmsg(const crnet_comm *c) {
  int err;
  if (c == NULL)
    return "comm is NULL";
  pthread_mutex_lock((pthread_mutex_t *)&c->w->mu);
  err = c->err;
  pthread_mutex_unlock((pthread_mutex_t *)&c->w->mu);
  /* The sticky error's message never changes once set. */
  return err != 0 ? c->errmsg : crnet__callmsg(c);
}

/* --- counters ------------------------------------------------------------------- */

int crnet_comm_coll_stats(const crnet_comm *c, crnet_collective coll,
                          crnet_coll_stats *out) {
  if (c == NULL || out == NULL || (unsigned)coll >= CRNET_COLL_COUNT)
    return CRNET_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&c->w->mu);
  *out = c->coll_stats[coll];
  pthread_mutex_unlock((pthread_mutex_t *)&c->w->mu);
  return 0;
}

int crnet_comm_peer_stats(const crnet_comm *c, int peer,
                          crnet_peer_stats *out) {
  if (c == NULL || out == NULL || peer < 0 || peer >= c->size)
    return CRNET_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&c->w->mu);
  *out = c->peer_stats[peer];
  pthread_mutex_unlock((pthread_mutex_t *)&c->w->mu);
  return 0;
}

int crnet_comm_peer_link(const crnet_comm *c, int peer, crnet_link_kind *out) {
  const crnet__peer *p;
  if (c == NULL || out == NULL || peer < 0 || peer >= c->size)
    return CRNET_EINVAL;
  if (peer == c->rank) {
    *out = CRNET_LINK_SELF;
    return 0;
  }
  /* Stream 0: the others of a pair follow it onto shared memory. */
  p = c->w->peers[(size_t)crnet__world_rank(c, peer) * c->w->streams];
  *out = p == NULL ? CRNET_LINK_NONE
                   : (crnet_link_kind)atomic_load(&p->link.carriage);
  return 0;
}

int crnet_comm_stats_reset(crnet_comm *c) {
  if (c == NULL)
    return CRNET_EINVAL;
  pthread_mutex_lock(&c->w->mu);
  memset(c->coll_stats, 0, sizeof c->coll_stats);
  memset(c->peer_stats, 0, sizeof *c->peer_stats * (size_t)c->size);
  pthread_mutex_unlock(&c->w->mu);
  return 0;
}

/* CRNET_STATS=1 at destroy: a line per collective that ran, to crlaunch
 * on the report socket ("stats <rank> <collective> <calls> <failed>
 * <rounds> <sent> <received> <seconds> <wait> <reduce>", which crlaunch
 * --stats sums into the job's table), or on stderr without crlaunch. */
static void report_stats(crnet_comm *c) {
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    const crnet_coll_stats *st = &c->coll_stats[k];
    char line[256];
    if (st->calls == 0)
      continue;
    int n = snprintf(line, sizeof line,
                     "stats %d %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                     " %" PRIu64 " %.9f %.9f %.9f\n",
                     c->w->rank, crnet_collective_name((crnet_collective)k),
                     st->calls, st->failed, st->rounds, st->bytes_sent,
                     st->bytes_received, st->seconds, st->wait_seconds,
                     st->reduce_seconds);
    if (n <= 0 || n >= (int)sizeof line)
      continue;
    if (!crnet__report_send(c, line))
      fprintf(stderr, "crnet[%d]: %s", c->w->rank, line);
  }
}

int crnet_comm_abort_code(const crnet_comm *c) {
  int code;
  if (c == NULL)
    return 0;
  pthread_mutex_lock((pthread_mutex_t *)&c->w->mu);
  code = c->abort_code;
  pthread_mutex_unlock((pthread_mutex_t *)&c->w->mu);
  return code;
}

static bool aborts_sent(void *arg) {
  crnet_comm *c = arg;
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->w->peers[i];
    if (p != NULL && !p->closed && crnet__link_busy(&p->link))
      return false;
  }
  return true;
}

void crnet__comm_abort_now(crnet_comm *c, int code) {
  char line[48];
  if (c->w->torn_down)
    return;
  /* crlaunch hears it first, before any peer can fail and exit because
   * of it, so that it exits with `code` whatever the others do. */
  snprintf(line, sizeof line, "abort %d %d\n", c->w->index, code);
  crnet__report_send(c, line);
  crnet__comm_fail_aborted(c, c->w->rank, code);
}

int crnet_comm_abort(crnet_comm *c, int code) {
  if (c == NULL)
    return CRNET_EINVAL;
  if (crnet__loop_owned_by_me(c)) {
    /* From a completion callback, inside the engine's pass: the loop runs
     * on when the callback returns, and sends the ABORT frames. */
    crnet__comm_abort_now(c, code);
    return 0;
  }
  /* Another thread may be waiting on the loop for a peer that never
   * answers: it aborts for us, at once. */
  crnet__abort_by_owner(c, code);
  crnet__loop_acquire(c);
  crnet__comm_abort_now(c, code);
  /* Give the ABORT frames a moment to leave, bounded, so a caller that
   * exits right after this still warns everyone. */
  crnet__comm_run_until(c, aborts_sent, c, ABORT_FLUSH_MS);
  /* Requests in flight complete with the error as their exchanges let go
   * (at once for those whose links are closed). */
  crnet__progress(c);
  crnet__loop_release(c);
  return 0;
}
