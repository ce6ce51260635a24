/* Communicator lifecycle, the sticky error, and the blocking wait that every
 * call uses. See comm.h. */
#include "comm.h"
#include "secret.h"

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

#include "frame.h"
#include "log.h"
#include "report.h"
#include "request.h"

#define DEFAULT_INIT_TIMEOUT_S 60.0
/* CRNET_LIVENESS_TIMEOUT's default: see docs/RELIABILITY.md. */
#define DEFAULT_LIVENESS_S 10.0
/* The poll before sleeping, when every rank of the host has a core: long
 * enough to catch a reply that is a few message latencies away, short
 * enough that a rank waiting for a slow peer sleeps almost at once (see
 * docs/PERFORMANCE.md for how it was chosen). */
#define DEFAULT_SPIN_US 50
/* With more ranks than cores: 0, sleep at once (see docs/PERFORMANCE.md). */
#define DEFAULT_SPIN_SHARED_US 0
/* See exec.c: large receives are reduced in pieces of this many bytes. */
#define DEFAULT_STREAM_PIECE ((uint64_t)64 << 10)
/* See crnet__xchg_start: a message is split across streams only into parts
 * of at least this many bytes. */
#define DEFAULT_STREAM_MIN (256 << 10)
/* See exec.c: independent rounds the executor keeps in flight at once. */
#define DEFAULT_ROUNDS_IN_FLIGHT 8
#define MAX_SPIN_US 1000000
/* How long destroy waits for every peer to say goodbye. A peer still
 * computing is given this long to reach crnet_comm_destroy. */
#define BYE_TIMEOUT_MS 60000
#define LINGER_MS 1000
/* How long an abort waits for its ABORT frames to leave. */
#define ABORT_FLUSH_MS 1000

/* The largest job: CRNET_SIZE and crnet_config.size. */
#define MAX_JOB_SIZE (1 << 24)

static _Thread_local char init_errmsg[512];

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

/* Seconds, up to 10^6; 0 only if zero_ok. */
static int parse_seconds(const char *v, bool zero_ok, double *out) {
  char *end;
  double t = strtod(v, &end);
  if (end == v || *end != '\0' || !(t >= 0) || t > 1e6 || (t == 0 && !zero_ok))
    return -1;
  *out = t;
  return 0;
}

static int parse_int(const char *v, long lo, long hi, int *out) {
  char *end;
  long x;
  errno = 0;
  x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    return -1;
  *out = (int)x;
  return 0;
}

static int parse_host_port(const char *v, char *host, size_t hostlen,
                           int *port) {
  const char *colon;
  size_t n;
  if (v[0] == '[') {
    const char *close = strchr(v, ']');
    if (close == NULL || close[1] != ':')
      return -1;
    n = (size_t)(close - v - 1);
    if (n == 0 || n >= hostlen)
      return -1;
    memcpy(host, v + 1, n);
    host[n] = '\0';
    return parse_int(close + 2, 1, 65535, port);
  }
  colon = strrchr(v, ':');
  if (colon == NULL)
    return -1;
  n = (size_t)(colon - v);
  if (n == 0 || n >= hostlen)
    return -1;
  memcpy(host, v, n);
  host[n] = '\0';
  return parse_int(colon + 1, 1, 65535, port);
}

#define SETTINGS_FAIL(...)                                                     \
  do {                                                                         \
    snprintf(init_errmsg, sizeof init_errmsg, __VA_ARGS__);                    \
    return CRNET_EINVAL;                                                       \
  } while (0)

/* Merges cfg with the environment contract. The key goes to `key`. */
static int load_settings(const crnet_config *cfg, crnet__settings *s,
                         uint8_t key[CRNET__KEY_BYTES]) {
  const char *v;
  const char *rank_env = getenv("CRNET_RANK");
  const char *size_env = getenv("CRNET_SIZE");
  const char *rank_name = "CRNET_RANK", *size_name = "CRNET_SIZE";
  const char *key_hex, *key_file;
  int rc;

  memset(s, 0, sizeof *s);
  /* The config's own fields, bounded as the environment's are. */
  if (cfg->size > MAX_JOB_SIZE)
    SETTINGS_FAIL("crnet_config.size %d is too large (at most %d)", cfg->size,
                  MAX_JOB_SIZE);
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
  s->progress = cfg->progress_thread >= 0 ? cfg->progress_thread
                                          : CRNET_PROGRESS_THREAD_AUTO;
  v = cfg->progress_thread >= 0 ? NULL : getenv("CRNET_PROGRESS_THREAD");
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "0") == 0)
      s->progress = CRNET_PROGRESS_THREAD_OFF;
    else if (strcmp(v, "1") == 0)
      s->progress = CRNET_PROGRESS_THREAD_ON;
    else if (strcmp(v, "auto") == 0)
      s->progress = CRNET_PROGRESS_THREAD_AUTO;
    else
      SETTINGS_FAIL("CRNET_PROGRESS_THREAD='%s' is not 0, 1 or auto", v);
  }
  if (cfg->lazy_links < -1 || cfg->lazy_links > CRNET_LAZY_LINKS_AUTO)
    SETTINGS_FAIL("crnet_config.lazy_links %d is not -1 (CRNET_LAZY_LINKS), "
                  "0 (off), 1 (on) or 2 (auto)",
                  cfg->lazy_links);
  s->rank = cfg->rank;
  s->size = cfg->size;
  /* Started by Slurm (srun) and not by crlaunch: Slurm's task number and
   * task count are the rank and the size. crnet's own variables win. */
  if (rank_env == NULL && size_env == NULL && getenv("SLURM_PROCID") != NULL &&
      getenv("SLURM_NTASKS") != NULL) {
    rank_env = getenv("SLURM_PROCID");
    size_env = getenv("SLURM_NTASKS");
    rank_name = "SLURM_PROCID";
    size_name = "SLURM_NTASKS";
  }
  if (s->rank < 0 && rank_env != NULL &&
      parse_int(rank_env, 0, INT32_MAX, &s->rank) != 0)
    SETTINGS_FAIL("%s='%s' is not a rank", rank_name, rank_env);
  if (s->size < 0 && size_env != NULL &&
      parse_int(size_env, 1, MAX_JOB_SIZE, &s->size) != 0)
    SETTINGS_FAIL("%s='%s' is not a job size", size_name, size_env);
  if (s->rank < 0 && s->size < 0) {
    /* Started directly, with no launcher: a job of one. */
    s->rank = 0;
    s->size = 1;
  }
  if (s->rank < 0 || s->size < 1 || s->rank >= s->size)
    SETTINGS_FAIL("rank %d and size %d do not make a job (set both CRNET_RANK "
                  "and CRNET_SIZE, 0 <= rank < size)",
                  s->rank, s->size);

  v = cfg->init_timeout > 0 ? NULL : getenv("CRNET_INIT_TIMEOUT");
  s->init_timeout = cfg->init_timeout > 0 ? cfg->init_timeout
                                          : DEFAULT_INIT_TIMEOUT_S;
  if (v != NULL && parse_seconds(v, false, &s->init_timeout) != 0)
    SETTINGS_FAIL("CRNET_INIT_TIMEOUT='%s' is not a number of seconds", v);
  /* CRNET_TIMEOUT: the most one collective may take (0 or unset: no
   * limit, unless the config sets one). */
  s->coll_timeout = cfg->timeout > 0 ? cfg->timeout : 0;
  v = cfg->timeout > 0 ? NULL : getenv("CRNET_TIMEOUT");
  if (v != NULL && v[0] != '\0' &&
      parse_seconds(v, true, &s->coll_timeout) != 0)
    SETTINGS_FAIL("CRNET_TIMEOUT='%s' is not a number of seconds (0: none)",
                  v);
  /* CRNET_LIVENESS_TIMEOUT: how long a link may stay silent towards an
   * unreachable peer (no FIN, no reset) before it counts as lost. */
  s->liveness = DEFAULT_LIVENESS_S;
  v = getenv("CRNET_LIVENESS_TIMEOUT");
  if (v != NULL && v[0] != '\0' &&
      (parse_seconds(v, true, &s->liveness) != 0 ||
       (s->liveness > 0 && s->liveness < 1)))
    SETTINGS_FAIL("CRNET_LIVENESS_TIMEOUT='%s' is not a number of seconds "
                  "(1 or more; 0: the kernel's TCP timeouts)",
                  v);
  s->spin_us = -1;
  v = getenv("CRNET_SPIN_US");
  if (v != NULL && v[0] != '\0') {
    int us;
    if (parse_int(v, 0, MAX_SPIN_US, &us) != 0)
      SETTINGS_FAIL("CRNET_SPIN_US='%s' is not a number of microseconds "
                    "(0 to %d)",
                    v, MAX_SPIN_US);
    s->spin_us = us;
  }
  s->stream_piece = DEFAULT_STREAM_PIECE;
  v = getenv("CRNET_STREAM_PIECE");
  if (v != NULL && v[0] != '\0') {
    int bytes;
    if (parse_int(v, 0, 1 << 30, &bytes) != 0)
      SETTINGS_FAIL("CRNET_STREAM_PIECE='%s' is not a number of bytes (0 to "
                    "2^30)",
                    v);
    s->stream_piece = (uint64_t)bytes;
  }
  s->rounds_in_flight = DEFAULT_ROUNDS_IN_FLIGHT;
  v = getenv("CRNET_ROUNDS_IN_FLIGHT");
  if (v != NULL && v[0] != '\0' &&
      parse_int(v, 1, CRNET__MAX_ROUNDS_IN_FLIGHT, &s->rounds_in_flight) != 0)
    SETTINGS_FAIL("CRNET_ROUNDS_IN_FLIGHT='%s' is not a number of rounds (1 "
                  "to %d)",
                  v, CRNET__MAX_ROUNDS_IN_FLIGHT);
  s->streams = 1;
  v = getenv("CRNET_STREAMS");
  if (v != NULL && v[0] != '\0' &&
      parse_int(v, 1, CRNET__MAX_STREAMS, &s->streams) != 0)
    SETTINGS_FAIL("CRNET_STREAMS='%s' is not a number of TCP streams per peer "
                  "(1 to %d)",
                  v, CRNET__MAX_STREAMS);
  s->stream_min = DEFAULT_STREAM_MIN;
  v = getenv("CRNET_STREAMS_MIN_BYTES");
  if (v != NULL && v[0] != '\0' &&
      parse_int(v, 1, 1 << 30, &s->stream_min) != 0)
    SETTINGS_FAIL("CRNET_STREAMS_MIN_BYTES='%s' is not a number of bytes (1 "
                  "to 2^30)",
                  v);
  v = getenv("CRNET_ENCRYPT");
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      SETTINGS_FAIL("CRNET_ENCRYPT='%s' is not 0 or 1", v);
    s->encrypt = v[0] == '1';
  }
  /* CRNET_LAZY_LINKS. Auto turns lazy links on from
   * CRNET_LAZY_LINKS_AUTO_MIN ranks: below that the full mesh is cheap (a
   * few dozen sockets, set up in parallel in milliseconds) and keeps every
   * collective's first call free of connection set-up, while from there on
   * the mesh's p - 1 sockets and handshakes per rank (p^2 in the job, times
   * CRNET_STREAMS) grow past what the schedules use (circulant and
   * hypercube talk to 2 log2 p peers, ring to 2) and towards descriptor
   * limits (1024 by default: p = 1024, or 128 with 8 streams). */
  {
    int mode = cfg->lazy_links >= 0 ? cfg->lazy_links : CRNET_LAZY_LINKS_AUTO;
    v = cfg->lazy_links >= 0 ? NULL : getenv("CRNET_LAZY_LINKS");
    if (v != NULL && v[0] != '\0') {
      if (strcmp(v, "0") == 0)
        mode = CRNET_LAZY_LINKS_OFF;
      else if (strcmp(v, "1") == 0)
        mode = CRNET_LAZY_LINKS_ON;
      else if (strcmp(v, "auto") == 0)
        mode = CRNET_LAZY_LINKS_AUTO;
      else
        SETTINGS_FAIL("CRNET_LAZY_LINKS='%s' is not 0, 1 or auto", v);
    }
    s->lazy = mode == CRNET_LAZY_LINKS_ON ||
              (mode == CRNET_LAZY_LINKS_AUTO &&
               s->size >= CRNET_LAZY_LINKS_AUTO_MIN);
  }
  v = getenv("CRNET_SOCKET_BUFFER");
  if (v != NULL && v[0] != '\0' &&
      parse_int(v, 0, 1 << 30, &s->socket_buffer) != 0)
    SETTINGS_FAIL("CRNET_SOCKET_BUFFER='%s' is not a number of bytes (0 to "
                  "2^30)",
                  v);
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    static const char *const env[CRNET_COLL_COUNT] = {
        "CRNET_ALLREDUCE_SCHEDULE", "CRNET_REDUCE_SCATTER_SCHEDULE",
        "CRNET_SCAN_SCHEDULE",      "CRNET_ALLTOALL_SCHEDULE",
        "CRNET_ALLGATHER_SCHEDULE", "CRNET_BCAST_SCHEDULE",
        "CRNET_REDUCE_SCHEDULE",    "CRNET_BARRIER_SCHEDULE"};
    /* Stored as given; the collectives layer checks names when it uses
     * them, and crnet_comm_set_schedule when they are set. */
    v = getenv(env[k]);
    if (v != NULL && strlen(v) >= sizeof s->schedule[k])
      SETTINGS_FAIL("%s='%s' is not a schedule", env[k], v);
    snprintf(s->schedule[k], sizeof s->schedule[k], "%s",
             v != NULL && v[0] != '\0' ? v : "auto");
  }
  v = getenv("CRNET_TRACE");
  if (v != NULL && v[0] != '\0' &&
      crnet__trace_path(v, s->rank, s->trace, sizeof s->trace) != 0)
    SETTINGS_FAIL("CRNET_TRACE='%.40s...' is too long", v);
  v = getenv("CRNET_STATS");
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      SETTINGS_FAIL("CRNET_STATS='%s' is not 0 or 1", v);
    s->stats = v[0] == '1';
  }
  if (s->size == 1)
    return 0; /* nothing to connect */

  v = cfg->rendezvous != NULL ? cfg->rendezvous : getenv("CRNET_RENDEZVOUS");
  if (v == NULL)
    SETTINGS_FAIL("no rendezvous address: set CRNET_RENDEZVOUS=host:port "
                  "(crlaunch does this for you)");
  if (parse_host_port(v, s->rdv_host, sizeof s->rdv_host, &s->rdv_port) != 0)
    SETTINGS_FAIL("CRNET_RENDEZVOUS='%s' is not host:port", v);
  if (cfg->serve_rendezvous >= 0)
    s->serve_rendezvous = cfg->serve_rendezvous != 0 && s->rank == 0;
  else
    s->serve_rendezvous = s->rank == 0 && getenv("CRNET_LAUNCHER") == NULL;

  v = cfg->port_range != NULL ? cfg->port_range : getenv("CRNET_PORT_RANGE");
  if (v != NULL && v[0] != '\0') {
    char lo[16], hi[16];
    const char *dash = strchr(v, '-');
    size_t n = dash != NULL ? (size_t)(dash - v) : 0;
    if (dash == NULL || n == 0 || n >= sizeof lo || strlen(dash + 1) >= sizeof hi)
      SETTINGS_FAIL("CRNET_PORT_RANGE='%s' is not lo-hi", v);
    memcpy(lo, v, n);
    lo[n] = '\0';
    snprintf(hi, sizeof hi, "%s", dash + 1);
    if (parse_int(lo, 1, 65535, &s->port_lo) != 0 ||
        parse_int(hi, 1, 65535, &s->port_hi) != 0 || s->port_lo > s->port_hi)
      SETTINGS_FAIL("CRNET_PORT_RANGE='%s' is not lo-hi with 1 <= lo <= hi <= "
                    "65535",
                    v);
    /* The range is what a firewall lets through, so the rendezvous that
     * rank 0 serves must be inside it as well as the mesh listeners. */
    if (s->serve_rendezvous &&
        (s->rdv_port < s->port_lo || s->rdv_port > s->port_hi))
      SETTINGS_FAIL("CRNET_PORT_RANGE=%d-%d does not hold port %d of "
                    "CRNET_RENDEZVOUS, where rank 0 is to serve the "
                    "rendezvous",
                    s->port_lo, s->port_hi, s->rdv_port);
  }
  /* Checked against the host's interfaces in the bootstrap, which knows
   * the rendezvous address family. */
  v = getenv("CRNET_IFACE");
  if (v != NULL && strlen(v) >= sizeof s->iface)
    SETTINGS_FAIL("CRNET_IFACE='%.40s...' is too long", v);
  snprintf(s->iface, sizeof s->iface, "%s", v != NULL ? v : "");

  key_hex = cfg->job_key_hex != NULL ? cfg->job_key_hex : getenv("CRNET_JOB_KEY");
  key_file =
      cfg->job_key_file != NULL ? cfg->job_key_file : getenv("CRNET_JOB_KEY_FILE");
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
  } else {
    SETTINGS_FAIL("no job key: set CRNET_JOB_KEY or CRNET_JOB_KEY_FILE "
                  "(crlaunch does this for you)");
  }
  return 0;
}

/* --- the sticky error and peer events ------------------------------------- */

/* Tells crlaunch whom this rank's failure is due to ("fail <rank>
 * <origin>"), so that it names the rank at fault and not the first rank
 * whose exit it happens to see (crlaunch.c, judge_failures). */
static void report_failure(const crnet_comm *c, int origin) {
  char line[48];
  if (origin < 0 || origin == c->rank)
    return;
  snprintf(line, sizeof line, "fail %d %d\n", c->rank, origin);
  crnet__report_send(c, line);
}

void crnet__describe_rank(const crnet_comm *c, int rank, char *buf, size_t n) {
  char where[128];
  if (c->table != NULL && rank >= 0 && rank < c->size &&
      c->table[rank].family != 0) {
    crnet__rdv_entry_format(&c->table[rank], where, sizeof where);
    snprintf(buf, n, "rank %d on %s", rank, where);
  } else {
    snprintf(buf, n, "rank %d", rank);
  }
}

void crnet__describe_call(const crnet_comm *c, char *buf, size_t n) {
  const crnet_request *r = crnet__req_oldest(c);
  if (r != NULL)
    snprintf(buf, n, " during %s #%" PRIu64 " round %" PRIu32,
             crnet_collective_name((crnet_collective)r->coll), r->seq,
             r->round);
  else if (c->done_seq > 0)
    /* Between calls: noticed after the last one's last round. */
    snprintf(buf, n, " after %s #%" PRIu64 " round %" PRIu32,
             crnet_collective_name((crnet_collective)c->done_coll),
             c->done_seq, c->done_round);
  else
    buf[0] = '\0';
}

/* --- messages of calls that failed without failing the job ------------- */

static _Thread_local struct {
  const crnet_comm *comm;
  char msg[CRNET__CALLMSG];
} callmsg;

char *crnet__callmsg(const crnet_comm *c) {
  if (callmsg.comm != c) {
    callmsg.comm = c;
    callmsg.msg[0] = '\0';
  }
  return callmsg.msg;
}

void crnet__set_callmsg(const crnet_comm *c, const char *fmt, ...) {
  va_list ap;
  callmsg.comm = c;
  va_start(ap, fmt);
  vsnprintf(callmsg.msg, sizeof callmsg.msg, fmt, ap);
  va_end(ap);
}

/* The ABORT frame's payload: error, abort code, origin, then the reason.
 * NULL if out of memory (links are then closed without a word). */
static uint8_t *abort_message(const crnet_comm *c, size_t *len) {
  size_t textlen = c->errmsg_reason_len;
  uint8_t *msg = malloc(12 + textlen);
  if (msg == NULL)
    return NULL;
  crnet__put_le32(msg, (uint32_t)c->err);
  crnet__put_le32(msg + 4, (uint32_t)c->abort_code);
  crnet__put_le32(msg + 8, (uint32_t)c->err_origin);
  memcpy(msg + 12, c->errmsg, textlen);
  *len = 12 + textlen;
  return msg;
}

static void tell_peers(crnet_comm *c) {
  size_t len = 0;
  uint8_t *msg = abort_message(c, &len);
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->peers != NULL ? c->peers[i] : NULL;
    if (p == NULL || p->closed)
      continue;
    /* A link that failed by protocol (a mismatched frame) still writes; one
     * whose peer is gone just fails the write, harmlessly. */
    if (msg != NULL && crnet__link_flushed(&p->link) &&
        p->link.state == CRNET__LINK_READY) {
      crnet__link_send_control(&p->link, CRNET__FRAME_ABORT, msg, len);
      crnet__link_close_gently(&p->link, LINGER_MS);
    } else {
      /* A write of the failed collective is still going out: it cannot be
       * interrupted by a frame, and its buffer belongs to the caller, who is
       * about to get control back. Closing cancels it. (A write the kernel
       * has taken whole, whose callback has not run yet, is no obstacle:
       * the ABORT frame above follows it.) */
      crnet__link_close(&p->link);
    }
  }
  /* Links still in their handshake are told when they become ready
   * (crnet__comm_tell_late_link). Lazy links: the listener closes, so that
   * a rank connecting to this one from now on is refused at once, and calls
   * carry the ABORT too. */
  crnet__lazy_close_all(c, msg, len);
  free(msg);
}

void crnet__comm_tell_late_link(crnet_comm *c, crnet__link *l) {
  size_t len = 0;
  uint8_t *msg = abort_message(c, &len);
  if (msg != NULL && l->state == CRNET__LINK_READY &&
      crnet__link_flushed(l)) {
    crnet__link_send_control(l, CRNET__FRAME_ABORT, msg, len);
    crnet__link_close_gently(l, LINGER_MS);
  } else {
    crnet__link_close(l);
  }
  free(msg);
}

void crnet__comm_fail_lost(crnet_comm *c, int r, const char *why) {
  char who[160], call[96];
  crnet__describe_rank(c, r, who, sizeof who);
  crnet__describe_call(c, call, sizeof call);
  crnet__comm_fail(c, CRNET_EPEER, r, "lost %s%s: %s", who, call, why);
}

void crnet__comm_fail(crnet_comm *c, int err, int origin, const char *fmt,
                      ...) {
  va_list ap;
  char how[96] = "";
  /* A lost peer: crlaunch may know why (report.h). If that rank aborted
   * the job, the failure is the abort. */
  if (c->err == 0 && err == CRNET_EPEER && origin >= 0 && origin != c->rank)
    origin = crnet__report_await(c, origin, how, sizeof how);
  if (c->err != 0)
    return;
  /* Under mu: other threads read the error (crnet_comm_errmsg, and every
   * request they start checks it). */
  pthread_mutex_lock(&c->mu);
  c->err = err;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  if (how[0] != '\0') {
    size_t len = strlen(c->errmsg);
    snprintf(c->errmsg + len, sizeof c->errmsg - len, " (%s)", how);
  }
  c->errmsg_reason_len = strlen(c->errmsg);
  c->err_origin = origin;
  pthread_mutex_unlock(&c->mu);
  c->progress_dirty = true; /* every request in flight ends */
  crnet__debug("%s", c->errmsg);
  report_failure(c, origin);
  tell_peers(c);
}

void crnet__comm_fail_aborted(crnet_comm *c, int rank, int code) {
  if (c->err != 0)
    return;
  pthread_mutex_lock(&c->mu);
  c->abort_code = code;
  pthread_mutex_unlock(&c->mu);
  crnet__comm_fail(c, CRNET_EABORTED, rank,
                   "rank %d aborted the job with code %d", rank, code);
}

/* An ABORT frame's reason becomes this rank's error as it is, so that a
 * failure relayed through several ranks still reads as the original reason;
 * the relaying rank is named once, after it. */
static void fail_relayed(crnet_comm *c, int err, int origin, int via,
                         const char *reason, int reason_len) {
  /* The relaying rank lost a peer; crlaunch may have said already that
   * the peer aborted the job. */
  if (c->err == 0 && err == CRNET_EPEER)
    crnet__report_check(c);
  char awaited[200] = "";
  if (c->err != 0)
    return;
  /* A timeout names whom the timed-out rank waited for, which may itself
   * wait for another: each rank that relays it and waits too says for
   * whom, so that the chain leads to the rank that never called whichever
   * rank's clock ran out first. */
  if (err == CRNET_ETIMEDOUT && crnet__req_oldest(c) != NULL)
    crnet__list_awaited(c, awaited, sizeof awaited);
  pthread_mutex_lock(&c->mu);
  c->err = err;
  if (awaited[0] != '\0' && strncmp(awaited, "no peer", 7) != 0)
    snprintf(c->errmsg, sizeof c->errmsg, "%.*s; rank %d was waiting for %s",
             reason_len, reason, c->rank, awaited);
  else
    snprintf(c->errmsg, sizeof c->errmsg, "%.*s", reason_len, reason);
  c->errmsg_reason_len = strlen(c->errmsg);
  if (via != origin)
    snprintf(c->errmsg + c->errmsg_reason_len,
             sizeof c->errmsg - c->errmsg_reason_len, " (relayed by rank %d)",
             via);
  c->err_origin = origin;
  pthread_mutex_unlock(&c->mu);
  c->progress_dirty = true;
  crnet__debug("%s", c->errmsg);
  report_failure(c, origin);
  tell_peers(c);
}

static void on_peer_control(crnet__link *l, const crnet__frame_header *h,
                            const uint8_t *payload) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  char who[160], call[96];
  if (h->kind == CRNET__FRAME_BYE) {
    p->got_bye = true;
    return;
  }
  crnet__describe_rank(c, (int)l->peer, who, sizeof who);
  if (h->kind == CRNET__FRAME_ABORT && h->length >= 12) {
    int err = (int32_t)crnet__get_le32(payload);
    int code = (int32_t)crnet__get_le32(payload + 4);
    int origin = (int32_t)crnet__get_le32(payload + 8);
    int textlen = h->length - 12 > 440 ? 440 : (int)(h->length - 12);
    if (err >= 0 || err < CRNET_EIO)
      err = CRNET_EPEER;
    if (c->err == 0 && err == CRNET_EABORTED) {
      pthread_mutex_lock(&c->mu);
      c->abort_code = code;
      pthread_mutex_unlock(&c->mu);
    }
    fail_relayed(c, err, origin, (int)l->peer, (const char *)payload + 12,
                 textlen);
    return;
  }
  crnet__describe_call(c, call, sizeof call);
  crnet__comm_fail(c, CRNET_EIO, (int)l->peer,
                   "%s sent an unexpected control frame (kind %u)%s", who,
                   (unsigned)h->kind, call);
}

/* A DATA frame came before its receive: fine if the peer is ahead (a call
 * this rank has not begun, or a later round of one in flight), a mismatch
 * if no receive of this rank can ever match it (a call it has finished,
 * or another call under the same number). */
static bool on_peer_parked(crnet__link *l, const crnet__frame_header *h) {
  crnet_comm *c = ((crnet__peer *)l)->comm;
  const crnet_request *r;
  if (h->seq > c->seq) {
    c->parked_ahead = true; /* crnet__comm_begin_call looks again */
    return true;
  }
  r = crnet__req_find(c, h->seq);
  return r != NULL && h->coll == r->coll && h->sig == r->sig;
}

void crnet__comm_begin_call(crnet_comm *c, uint8_t coll, uint64_t seq,
                            const crnet__frame_call *call) {
  c->seq = seq;
  c->last_coll = coll;
  c->history[seq % CRNET__CALL_HISTORY].seq = seq;
  c->history[seq % CRNET__CALL_HISTORY].coll = coll;
  c->history[seq % CRNET__CALL_HISTORY].call = *call;
  /* A frame of this call that came early was accepted because the peer was
   * ahead; now its sequence number may be this rank's own, so it must be of
   * this very call. Only when some frame came early is there anything to
   * look at (asking again re-marks the frames still ahead). */
  if (c->parked_ahead) {
    c->parked_ahead = false;
    for (int i = 0; i < crnet__comm_nlinks(c) && c->err == 0; i++) {
      crnet__peer *p = c->peers[i];
      if (p != NULL && !p->closed)
        crnet__link_recheck_parked(&p->link);
    }
  }
}

static bool same_call(const crnet__frame_call *a, const crnet__frame_call *b) {
  return a->count == b->count && a->op == b->op && a->root == b->root &&
         a->dtype == b->dtype && a->schedule == b->schedule &&
         a->variant == b->variant;
}

/* The message of a mismatch found on link l (l->hdr is the peer's frame):
 * what each side called, in words, and how their frames differ when the
 * words alone do not show it. */
static void fail_mismatch(crnet_comm *c, crnet__link *l, const char *why) {
  const crnet__frame_header *h = &l->hdr;
  char theirs[160], mine[160], detail[224];
  const char *verb = "called";
  const crnet_request *r = crnet__req_find(c, h->seq);
  int coll = -1;
  const crnet__frame_call *call = NULL;
  crnet__call_format(h->coll, h->seq, &h->call, theirs, sizeof theirs);
  if (r != NULL) {
    /* A call in flight under that number. */
    coll = r->coll;
    call = &r->call;
    crnet__call_format(r->coll, r->seq, call, mine, sizeof mine);
  } else if (h->seq <= c->seq && h->seq > 0 &&
             c->history[h->seq % CRNET__CALL_HISTORY].seq == h->seq) {
    /* A frame of a call this rank has finished: set it against what this
     * rank called under that number, if it is still remembered. */
    coll = c->history[h->seq % CRNET__CALL_HISTORY].coll;
    call = &c->history[h->seq % CRNET__CALL_HISTORY].call;
    crnet__call_format((uint8_t)coll, h->seq, call, mine, sizeof mine);
  } else if (c->last_coll < 0) {
    snprintf(mine, sizeof mine, "no collective yet");
  } else {
    const crnet_request *o = crnet__req_oldest(c);
    uint64_t seq = o != NULL ? o->seq : c->seq;
    coll = c->history[seq % CRNET__CALL_HISTORY].coll;
    call = &c->history[seq % CRNET__CALL_HISTORY].call;
    crnet__call_format((uint8_t)coll, seq, call, mine, sizeof mine);
    if (o == NULL)
      verb = "had finished";
  }
  detail[0] = '\0';
  if (call != NULL && h->coll == coll && same_call(&h->call, call))
    snprintf(detail, sizeof detail, ": %s", why);
  crnet__comm_fail(c, CRNET_EMISMATCH, (int)l->peer,
                   "mismatched calls: rank %d called %s but rank %d %s %s%s",
                   (int)l->peer, theirs, c->rank, verb, mine, detail);
}

static void on_peer_error(crnet__link *l, int status, const char *why) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  char who[160], call[96];
  if (p->got_bye && status == CRNET_EPEER) {
    /* The peer said goodbye and closed: an orderly departure. If a later call
     * needs this link, posting on it fails and names the departure. */
    crnet__link_close(l);
    return;
  }
  crnet__describe_rank(c, (int)l->peer, who, sizeof who);
  crnet__describe_call(c, call, sizeof call);
  if (status == CRNET_EPEER) {
    crnet__comm_fail(c, status, (int)l->peer, "lost %s%s: %s", who, call, why);
    crnet__link_close(l);
    return;
  }
  /* The peer is alive but said something wrong: comm_fail tells it why
   * (ABORT) and closes the link gently, so the reason arrives. */
  if (status == CRNET_EMISMATCH)
    fail_mismatch(c, l, why);
  else
    crnet__comm_fail(c, status, (int)l->peer, "%s%s: %s", who, call, why);
  crnet__link_close_gently(l, LINGER_MS);
}

static void on_peer_ready(crnet__link *l, int status) {
  /* Links switch to these callbacks only once ready. */
  (void)l;
  (void)status;
}

static void on_peer_closed(crnet__link *l) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  p->closed = true;
  c->open_peers--;
}

const crnet__link_callbacks crnet__peer_callbacks = {
    .on_ready = on_peer_ready,
    .on_control = on_peer_control,
    .on_parked = on_peer_parked,
    .on_error = on_peer_error,
    .on_closed = on_peer_closed,
};

/* --- lifecycle ------------------------------------------------------------------ */

static void free_comm(crnet_comm *c) {
  if (c->report_fd >= 0)
    close(c->report_fd);
  free(c->rank_end);
  crnet__trace_close(c->trace);
  free(c->peer_stats);
  crnet__secret_free(c->key);
  free(c->temp);
  pthread_cond_destroy(&c->thread_cv);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c->connecting);
  free(c->calling);
  free(c->peers);
  free(c->table);
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
  uv_timer_stop(&c->deadline);
  if (!uv_is_closing((uv_handle_t *)&c->deadline))
    uv_close((uv_handle_t *)&c->deadline, NULL);
  while (uv_run(&c->loop, UV_RUN_DEFAULT) != 0)
    ;
  if (uv_loop_close(&c->loop) == UV_EBUSY) {
    uv_walk(&c->loop, on_walk_close, NULL);
    while (uv_run(&c->loop, UV_RUN_DEFAULT) != 0)
      ;
    uv_loop_close(&c->loop);
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

/* Decides the wait strategy once the table is known: ranks that share this
 * host (by host name, which network namespaces and several addresses of one
 * machine share too) compete for its cores. Polling before sleeping only
 * helps while each of them has a core; beyond that a polling rank steals
 * the core its peer needs to answer. */
static void wait_plan(crnet_comm *c, const crnet__settings *s) {
  const char *me = c->table != NULL ? c->table[c->rank].host : "";
  int local_ranks = 1; /* this one included */
  for (int r = 0; r < c->size && c->table != NULL; r++)
    if (r != c->rank && strcmp(c->table[r].host, me) == 0)
      local_ranks++;
  bool own_cores = local_ranks <= usable_cores();
  c->spin_yield = !own_cores;
  /* The progress thread's auto: only where it has a core of its own, so
   * that it never takes one from a rank's computation (docs/PERFORMANCE.md,
   * Overlap). */
  c->progress_mode = c->size > 1 &&
                     (s->progress == CRNET_PROGRESS_THREAD_ON ||
                      (s->progress == CRNET_PROGRESS_THREAD_AUTO &&
                       local_ranks < usable_cores()));
  if (s->spin_us >= 0)
    c->spin_ns = (uint64_t)s->spin_us * 1000;
  else if (c->size > 1)
    c->spin_ns = (uint64_t)(own_cores ? DEFAULT_SPIN_US
                                      : DEFAULT_SPIN_SHARED_US) * 1000;
  else
    c->spin_ns = 0;
  c->spin_score = CRNET__SPIN_SCORE_MAX / 2;
}

/* Socket buffers of the mesh links: by default the kernel sizes them as
 * the connection goes (autotuning, which a fixed size would turn off). A
 * size the kernel refuses (above net.core.[rw]mem_max without privilege)
 * is capped by it, silently: the links work either way. */
void crnet__comm_link_settings(crnet_comm *c, crnet__link *l) {
  /* The progress engine looks at requests when their links moved, and a
   * new link is itself news (a round may wait for it: lazy links). */
  l->io_flag = &c->progress_dirty;
  c->progress_dirty = true;
  crnet__link_set_liveness(l, c->liveness_ms);
  if (c->socket_buffer > 0) {
    int v = c->socket_buffer;
    uv_send_buffer_size((uv_handle_t *)&l->tcp, &v);
    v = c->socket_buffer;
    uv_recv_buffer_size((uv_handle_t *)&l->tcp, &v);
  }
}

int crnet_comm_init(crnet_comm **out, const crnet_config *cfg) {
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
  if (cfg == NULL) {
    crnet_config_init(&defaults);
    cfg = &defaults;
  }
  c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  c->report_fd = -1;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  pthread_cond_init(&c->thread_cv, NULL);
  c->key = crnet__secret_alloc(CRNET__KEY_BYTES);
  if (c->key == NULL) {
    free(c);
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  rc = load_settings(cfg, &s, c->key);
  if (rc == 0)
    rc = crnet__tuning_init(&c->tuning, s.rank, init_errmsg,
                            sizeof init_errmsg);
  if (rc != 0) {
    free_comm(c);
    return rc;
  }
  c->rank = s.rank;
  c->size = s.size;
  /* Before this comm opens any socket of its own. */
  crnet__report_find(c);
  c->last_coll = -1;
  c->stream_piece = s.stream_piece;
  c->rounds_in_flight = (uint32_t)s.rounds_in_flight;
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    snprintf(c->schedule[k], sizeof c->schedule[k], "%s", s.schedule[k]);
  ignore_sigpipe();
  snprintf(prefix, sizeof prefix, "crnet[%d]: ", c->rank);
  crnet__log_set_prefix(prefix);
  /* One stream per peer until the rendezvous says otherwise (bootstrap). */
  c->streams = 1;
  c->stream_min = (uint64_t)s.stream_min;
  c->peers = calloc((size_t)c->size, sizeof *c->peers);
  c->table = calloc((size_t)c->size, sizeof *c->table);
  c->peer_stats = calloc((size_t)c->size, sizeof *c->peer_stats);
  c->report_stats = s.stats;
  c->encrypt = s.encrypt;
  c->liveness_ms = (uint64_t)(s.liveness * 1000);
  c->socket_buffer = s.socket_buffer;
  snprintf(c->iface, sizeof c->iface, "%s", s.iface);
  if (c->peers == NULL || c->table == NULL || c->peer_stats == NULL) {
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "out of memory");
    return CRNET_ENOMEM;
  }
  if (uv_loop_init(&c->loop) != 0) {
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "cannot create an event loop");
    return CRNET_EIO;
  }
  uv_timer_init(&c->loop, &c->deadline);
  c->deadline.data = c;
  if (crnet__progress_init(c) != 0) {
    close_loop(c);
    free_comm(c);
    snprintf(init_errmsg, sizeof init_errmsg, "cannot set up the event loop");
    return CRNET_EIO;
  }
  crnet__report_listen(c);
  if (s.trace[0] != '\0') {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int e = crnet__trace_open(&c->trace, s.trace, c->rank, c->size, host);
    if (e != 0) {
      snprintf(init_errmsg, sizeof init_errmsg,
               "CRNET_TRACE: cannot write %.300s: %s", s.trace, strerror(e));
      close_loop(c);
      free_comm(c);
      return CRNET_EINVAL;
    }
  }
  if (c->size > 1) {
    rc = crnet__bootstrap(c, &s, init_errmsg, sizeof init_errmsg);
    if (rc != 0) {
      for (int i = 0; i < crnet__comm_nlinks(c); i++)
        if (c->peers[i] != NULL)
          crnet__link_close(&c->peers[i]->link);
      crnet__lazy_close_all(c, NULL, 0);
      close_loop(c);
      for (int i = 0; i < crnet__comm_nlinks(c); i++)
        free(c->peers[i]);
      free_comm(c);
      return rc;
    }
  }
  wait_plan(c, &s);
  /* Lazy links made during the bootstrap had theirs already. */
  for (int i = 0; i < crnet__comm_nlinks(c) && !c->lazy; i++)
    if (c->peers[i] != NULL && !c->peers[i]->closed)
      crnet__comm_link_settings(c, &c->peers[i]->link);
  c->coll_timeout_ms = (uint64_t)(s.coll_timeout * 1000);
  *out = c;
  return 0;
}

static bool goodbyes_done(void *arg) {
  crnet_comm *c = arg;
  if (c->err != 0)
    return true;
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->peers[i];
    if (p == NULL || p->closed || p->link.failed)
      continue;
    if (!p->got_bye || crnet__link_busy(&p->link))
      return false;
  }
  return true;
}

static bool peers_closed(void *arg) {
  crnet_comm *c = arg;
  return c->open_peers == 0;
}

static void report_stats(crnet_comm *c);

int crnet_comm_destroy(crnet_comm *c) {
  int rc;
  uint32_t in_flight;
  if (c == NULL)
    return 0;
  pthread_mutex_lock(&c->mu);
  in_flight = crnet__req_in_flight(c);
  pthread_mutex_unlock(&c->mu);
  if (in_flight > 0) {
    crnet__set_callmsg(c, "crnet_comm_destroy: %u request(s) still in "
                          "flight: wait for them first (or crnet_comm_abort, "
                          "which completes them)",
                       in_flight);
    return CRNET_EINVAL;
  }
  crnet__progress_stop(c);
  crnet__req_free_unwaited(c);
  if (c->report_stats)
    report_stats(c);
  if (c->lazy)
    crnet__lazy_resume(c);
  if (c->err == 0) {
    /* Goodbye to everyone linked, then wait for everyone's goodbye: after
     * it the peer sends nothing more, so closing cannot leave unread bytes
     * that would turn our FIN into a reset. Peers never linked (lazy
     * links) play no part. */
    for (int i = 0; i < crnet__comm_nlinks(c); i++) {
      crnet__peer *p = c->peers[i];
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
    crnet__peer *p = c->peers[i];
    if (p != NULL && !p->closed)
      crnet__link_close_gently(&p->link, LINGER_MS);
  }
  crnet__comm_run_until(c, peers_closed, c, 0);
  for (int i = 0; i < crnet__comm_nlinks(c); i++)
    free(c->peers[i]);
  rc = c->err;
  close_loop(c);
  free_comm(c);
  return rc;
}

int crnet_comm_rank(const crnet_comm *c) { return c != NULL ? c->rank : -1; }

int crnet_comm_size(const crnet_comm *c) { return c != NULL ? c->size : -1; }

const char *crnet_comm_errmsg(const crnet_comm *c) {
  int err;
  if (c == NULL)
    return "comm is NULL";
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  err = c->err;
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  /* The sticky error's message never changes once set. */
  return err != 0 ? c->errmsg : crnet__callmsg(c);
}

/* --- counters ------------------------------------------------------------------- */

int crnet_comm_coll_stats(const crnet_comm *c, crnet_collective coll,
                          crnet_coll_stats *out) {
  if (c == NULL || out == NULL || (unsigned)coll >= CRNET_COLL_COUNT)
    return CRNET_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  *out = c->coll_stats[coll];
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  return 0;
}

int crnet_comm_peer_stats(const crnet_comm *c, int peer,
                          crnet_peer_stats *out) {
  if (c == NULL || out == NULL || peer < 0 || peer >= c->size)
    return CRNET_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  *out = c->peer_stats[peer];
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  return 0;
}

int crnet_comm_stats_reset(crnet_comm *c) {
  if (c == NULL)
    return CRNET_EINVAL;
  pthread_mutex_lock(&c->mu);
  memset(c->coll_stats, 0, sizeof c->coll_stats);
  memset(c->peer_stats, 0, sizeof *c->peer_stats * (size_t)c->size);
  pthread_mutex_unlock(&c->mu);
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
                     c->rank, crnet_collective_name((crnet_collective)k),
                     st->calls, st->failed, st->rounds, st->bytes_sent,
                     st->bytes_received, st->seconds, st->wait_seconds,
                     st->reduce_seconds);
    if (n <= 0 || n >= (int)sizeof line)
      continue;
    if (!crnet__report_send(c, line))
      fprintf(stderr, "crnet[%d]: %s", c->rank, line);
  }
}

int crnet_comm_abort_code(const crnet_comm *c) {
  int code;
  if (c == NULL)
    return 0;
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  code = c->abort_code;
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  return code;
}

static bool aborts_sent(void *arg) {
  crnet_comm *c = arg;
  for (int i = 0; i < crnet__comm_nlinks(c); i++) {
    crnet__peer *p = c->peers[i];
    if (p != NULL && !p->closed && crnet__link_busy(&p->link))
      return false;
  }
  return true;
}

void crnet__comm_abort_now(crnet_comm *c, int code) {
  char line[48];
  if (c->err != 0)
    return;
  /* crlaunch hears it first, before any peer can fail and exit because
   * of it, so that it exits with `code` whatever the others do. */
  snprintf(line, sizeof line, "abort %d %d\n", c->rank, code);
  crnet__report_send(c, line);
  crnet__comm_fail_aborted(c, c->rank, code);
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
