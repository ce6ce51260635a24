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

/* " during allreduce #4 round 2", or "" outside collectives. */
static void describe_call(const crnet_comm *c, char *buf, size_t n) {
  if (c->cur_coll < 0) {
    buf[0] = '\0';
    return;
  }
  snprintf(buf, n, " during %s #%" PRIu64 " round %" PRIu32,
           crnet_collective_name((crnet_collective)c->cur_coll), c->seq,
           c->cur_round);
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
  describe_call(c, call, sizeof call);
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
  crnet__debug("%s", c->errmsg);
  report_failure(c, origin);
  tell_peers(c);
}

void crnet__comm_fail_aborted(crnet_comm *c, int rank, int code) {
  if (c->err != 0)
    return;
  c->abort_code = code;
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
  if (c->err != 0)
    return;
  c->err = err;
  snprintf(c->errmsg, sizeof c->errmsg, "%.*s", reason_len, reason);
  c->errmsg_reason_len = strlen(c->errmsg);
  if (via != origin)
    snprintf(c->errmsg + c->errmsg_reason_len,
             sizeof c->errmsg - c->errmsg_reason_len, " (relayed by rank %d)",
             via);
  c->err_origin = origin;
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
    if (c->err == 0 && err == CRNET_EABORTED)
      c->abort_code = code;
    fail_relayed(c, err, origin, (int)l->peer, (const char *)payload + 12,
                 textlen);
    return;
  }
  describe_call(c, call, sizeof call);
  crnet__comm_fail(c, CRNET_EIO, (int)l->peer,
                   "%s sent an unexpected control frame (kind %u)%s", who,
                   (unsigned)h->kind, call);
}

/* A DATA frame came before its receive: fine if the peer is ahead (a later
 * collective, or a later round of this one), a mismatch if no receive of
 * this rank can ever match it. */
static bool on_peer_parked(crnet__link *l, const crnet__frame_header *h) {
  crnet_comm *c = ((crnet__peer *)l)->comm;
  if (h->seq > c->seq) {
    c->parked_ahead = true; /* coll_begin looks again */
    return true;
  }
  return h->seq == c->seq && c->cur_coll >= 0 && h->coll == c->cur_coll &&
         h->sig == c->cur_sig;
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
  int coll = c->last_coll;
  const crnet__frame_call *call = &c->cur_call;
  crnet__call_format(h->coll, h->seq, &h->call, theirs, sizeof theirs);
  /* A frame of a call this rank has finished: set it against what this
   * rank called under that number, if it is still remembered. */
  if (h->seq < c->seq && h->seq > 0 &&
      c->history[h->seq % CRNET__CALL_HISTORY].seq == h->seq) {
    coll = c->history[h->seq % CRNET__CALL_HISTORY].coll;
    call = &c->history[h->seq % CRNET__CALL_HISTORY].call;
    crnet__call_format((uint8_t)coll, h->seq, call, mine, sizeof mine);
  } else if (coll < 0) {
    snprintf(mine, sizeof mine, "no collective yet");
  } else {
    crnet__call_format((uint8_t)coll, c->seq, call, mine, sizeof mine);
    if (c->cur_coll < 0)
      verb = "had finished";
  }
  detail[0] = '\0';
  if (h->coll == coll && same_call(&h->call, call))
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
  describe_call(c, call, sizeof call);
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

/* --- waiting ----------------------------------------------------------------- */

static void on_deadline(uv_timer_t *t) {
  crnet_comm *c = t->data;
  c->deadline_passed = true;
}

/* Polls the loop without sleeping for at most c->spin_ns; true if done(arg)
 * came true meanwhile.
 *
 * The spin adapts, because what decides whether it pays is not only the
 * ranks of this job: other processes may want the cores too, and then a
 * spinning rank delays the very peer it waits for. Each spin that catches
 * its event raises spin_score, each that runs out lowers it twice as much;
 * while the score is not positive the wait sleeps at once, and only every
 * SPIN_PROBE_EVERY-th wait spins again to see whether things changed. */
#define SPIN_SCORE_MAX 8
#define SPIN_PROBE_EVERY 64

static bool spin_worth_it(crnet_comm *c) {
  if (c->spin_score > 0)
    return true;
  if (++c->spin_skipped < SPIN_PROBE_EVERY)
    return false;
  c->spin_skipped = 0;
  return true;
}

static bool spin(crnet_comm *c, bool (*done)(void *), void *arg) {
  uint64_t start = uv_hrtime();
  do {
    uv_run(&c->loop, UV_RUN_NOWAIT);
    /* With more ranks than cores, the peer this rank waits for may need
     * this very core: let it have it. */
    if (c->spin_yield)
      sched_yield();
    if (done(arg)) {
      if (c->spin_score < SPIN_SCORE_MAX)
        c->spin_score++;
      return true;
    }
  } while (!c->deadline_passed && uv_hrtime() - start < c->spin_ns);
  if (c->spin_score > -SPIN_SCORE_MAX)
    c->spin_score -= 2;
  return false;
}

int crnet__comm_run_until(crnet_comm *c, bool (*done)(void *), void *arg,
                          uint64_t timeout_ms) {
  int rc = 0;
  c->deadline_passed = false;
  if (timeout_ms > 0)
    uv_timer_start(&c->deadline, on_deadline, timeout_ms, 0);
  while (!done(arg)) {
    if (c->deadline_passed) {
      rc = CRNET_ETIMEDOUT;
      break;
    }
    /* Bounded: after spin_ns without progress the process sleeps. */
    if (c->spin_ns > 0 && spin_worth_it(c) && spin(c, done, arg))
      break;
    /* Sleeps in epoll until something happens. A loop with nothing left to
     * wait for cannot make progress: that is a bug, not a reason to spin. */
    if (uv_run(&c->loop, UV_RUN_ONCE) == 0 && !done(arg)) {
      rc = CRNET_EIO;
      break;
    }
  }
  uv_timer_stop(&c->deadline);
  return rc;
}

/* The wait of an exchange: done when every request is, or (min_got > 0)
 * as soon as min_got bytes of the receive have arrived. Once the comm has
 * failed, the receives are taken back, so the wait ends. */
typedef struct xchg_wait {
  crnet__xchg *x;
  uint64_t min_got;
} xchg_wait;

static bool xchg_done(void *arg) {
  xchg_wait *w = arg;
  crnet__xchg *x = w->x;
  if (x->c->err != 0)
    for (uint32_t k = 0; k < x->nrecv; k++)
      if (!x->recv[k].done)
        crnet__link_cancel_recv(x->recv_link[k], &x->recv[k]);
  if (crnet__xchg_complete(x))
    return true;
  return w->min_got > 0 && x->c->err == 0 && x->nrecv > 0 &&
         crnet__xchg_received(x) >= w->min_got;
}

static uint64_t iov_total(const crnet__iov *iov, uint32_t n) {
  uint64_t t = 0;
  for (uint32_t i = 0; i < n; i++)
    t += iov[i].len;
  return t;
}

/* Parts of a message of len bytes (see crnet__xchg): both sides compute
 * the same from the same length. */
static uint32_t xchg_parts(const crnet_comm *c, uint64_t len) {
  uint64_t n = c->stream_min > 0 ? len / c->stream_min : 1;
  if (n < 2 || c->streams < 2)
    return 1;
  return n < c->streams ? (uint32_t)n : c->streams;
}

/* Byte offset of part k of n of a message of len bytes. */
static uint64_t part_start(uint64_t len, uint32_t n, uint32_t k) {
  return (len / n) * k + (k < len % n ? k : len % n);
}

/* The bytes [from, to) of the list iov[0..n) as a list into out; returns
 * its length (at most n). */
static uint32_t iov_slice(const crnet__iov *iov, uint32_t n, uint64_t from,
                          uint64_t to, crnet__iov *out) {
  uint32_t m = 0;
  uint64_t at = 0;
  for (uint32_t i = 0; i < n && at < to; i++) {
    uint64_t lo = at > from ? at : from;
    uint64_t hi = at + iov[i].len < to ? at + iov[i].len : to;
    if (lo < hi) {
      out[m].base = (uint8_t *)iov[i].base + (lo - at);
      out[m].len = hi - lo;
      m++;
    }
    at += iov[i].len;
  }
  return m;
}

/* The link of stream k to rank r if it can carry a message; else fails the
 * comm (naming the rank) and returns NULL. */
static crnet__link *usable_link(crnet_comm *c, int r, uint32_t k,
                                uint32_t round) {
  crnet__peer *p = *crnet__comm_link(c, r, (int)k);
  char who[160];
  if (p != NULL && !p->closed && !p->link.failed)
    return &p->link;
  crnet__describe_rank(c, r, who, sizeof who);
  crnet__comm_fail(c, CRNET_EPEER, r,
                   "%s has left the job (%s #%" PRIu64 " round %" PRIu32
                   " needed it)",
                   who, crnet_collective_name((crnet_collective)c->cur_coll),
                   c->seq, round);
  return NULL;
}

int crnet__xchg_start(crnet_comm *c, crnet__xchg *x, int to,
                      const crnet__iov *siov, uint32_t sn, int from,
                      const crnet__iov *riov, uint32_t rn, uint32_t round,
                      uint32_t sig) {
  x->c = c;
  x->round = round;
  x->nsend = x->nrecv = 0;
  x->recv_iov = NULL;
  c->cur_round = round;
  if (c->err != 0)
    return c->err;
  if (c->lazy) {
    /* The first exchange that names a peer connects to it; both
     * connections are started before either is waited for. */
    crnet__lazy_want(c, from);
    crnet__lazy_want(c, to);
    if (crnet__lazy_wait(c, from) != 0 || crnet__lazy_wait(c, to) != 0)
      return c->err;
  }
  if (from >= 0) {
    uint64_t len = iov_total(riov, rn);
    uint32_t n = xchg_parts(c, len);
    crnet__iov *list = (crnet__iov *)(uintptr_t)riov;
    if (n > 1) {
      /* A slice of a list has at most one more entry per part. */
      x->recv_iov = malloc(sizeof *x->recv_iov * ((size_t)rn + n));
      if (x->recv_iov == NULL) {
        crnet__comm_fail(c, CRNET_ENOMEM, -1, "out of memory");
        return c->err;
      }
      list = x->recv_iov;
    }
    for (uint32_t k = 0; k < n; k++) {
      crnet__recv_req *r = &x->recv[k];
      crnet__link *l = usable_link(c, from, k, round);
      if (l == NULL)
        return c->err;
      memset(r, 0, sizeof *r);
      if (n > 1) {
        uint64_t a = part_start(len, n, k), b = part_start(len, n, k + 1);
        r->iov = list;
        r->niov = iov_slice(riov, rn, a, b, list);
        r->len = b - a;
        list += r->niov;
      } else {
        r->iov = riov;
        r->niov = rn;
        r->len = len;
      }
      r->coll = (uint8_t)c->cur_coll;
      r->seq = c->seq;
      r->round = round;
      r->sig = sig;
      crnet__link_post_recv(l, r);
      x->recv_link[k] = l;
      x->nrecv = k + 1;
    }
  }
  if (to >= 0) {
    uint64_t len = iov_total(siov, sn);
    uint32_t n = xchg_parts(c, len);
    crnet__iov small[8], *part = small;
    if (n > 1 && sn + 1 > 8) {
      part = malloc(sizeof *part * ((size_t)sn + 1));
      if (part == NULL) {
        crnet__comm_fail(c, CRNET_ENOMEM, -1, "out of memory");
        return c->err;
      }
    }
    for (uint32_t k = 0; k < n; k++) {
      crnet__link *l = usable_link(c, to, k, round);
      uint64_t a = part_start(len, n, k), b = part_start(len, n, k + 1);
      crnet__frame_header h = {.kind = CRNET__FRAME_DATA,
                               .coll = (uint8_t)c->cur_coll,
                               .seq = c->seq,
                               .round = round,
                               .sig = sig,
                               .length = b - a,
                               .call = c->cur_call};
      if (l == NULL)
        break;
      if (n > 1)
        crnet__link_send(l, &x->send[k], &h, part,
                         iov_slice(siov, sn, a, b, part));
      else
        crnet__link_send(l, &x->send[k], &h, siov, sn);
      x->nsend = k + 1;
    }
    if (part != small)
      free(part);
  }
  return c->err;
}

uint64_t crnet__xchg_received(const crnet__xchg *x) {
  uint64_t got = 0;
  for (uint32_t k = 0; k < x->nrecv; k++) {
    const crnet__recv_req *r = &x->recv[k];
    if (!(r->done && r->status == 0))
      return got + r->got;
    got += r->len;
  }
  return got;
}

bool crnet__xchg_complete(const crnet__xchg *x) {
  for (uint32_t k = 0; k < x->nsend; k++)
    if (!x->send[k].done)
      return false;
  for (uint32_t k = 0; k < x->nrecv; k++)
    if (!x->recv[k].done)
      return false;
  return true;
}

/* "rank 3 on host (1.2.3.4:5678), rank 5 ...": the peers this rank still
 * waits for in the current collective, those it receives from first (a
 * send waits for a peer only once its socket buffers are full). */
static void list_awaited(crnet_comm *c, char *buf, size_t n) {
  size_t len = 0;
  int listed = 0, more = 0;
  buf[0] = '\0';
  for (int pass = 0; pass < 2 && listed == 0; pass++)
    for (int r = 0; r < c->size; r++) {
      bool waiting = false;
      char who[160];
      for (uint32_t k = 0; k < c->streams && r != c->rank; k++) {
        crnet__peer *p = *crnet__comm_link(c, r, (int)k);
        if (p == NULL || p->closed)
          continue;
        waiting = waiting || (pass == 0 ? p->link.recv != NULL
                                        : crnet__link_busy(&p->link));
      }
      if (!waiting)
        continue;
      if (listed == 6) {
        more++;
        continue;
      }
      crnet__describe_rank(c, r, who, sizeof who);
      if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "%s%s%s",
                                listed > 0 ? ", " : "",
                                pass == 1 ? "sending to " : "", who);
      listed++;
    }
  if (more > 0 && len < n)
    snprintf(buf + len, n - len, " and %d more", more);
  if (listed == 0)
    snprintf(buf, n, "no peer (this rank's own work)");
}

/* The collective's CRNET_TIMEOUT ran out: the job fails, naming whom this
 * rank was waiting for, so that the rank that never called is found. */
static void fail_timed_out(crnet_comm *c) {
  char awaited[400];
  list_awaited(c, awaited, sizeof awaited);
  crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                   "rank %d timed out in %s #%" PRIu64 " round %" PRIu32
                   " after %.3g s (CRNET_TIMEOUT) waiting for %s",
                   c->rank,
                   crnet_collective_name((crnet_collective)c->cur_coll),
                   c->seq, c->cur_round, (double)c->coll_timeout_ms / 1000.0,
                   awaited);
}

/* What the collective's CRNET_TIMEOUT leaves of its time (0: no limit). */
static uint64_t coll_time_left_ms(const crnet_comm *c) {
  if (c->coll_timeout_ms > 0 && c->err == 0 && c->cur_coll >= 0) {
    uint64_t spent_ms = (uv_hrtime() - c->coll_started) / 1000000;
    return spent_ms < c->coll_timeout_ms ? c->coll_timeout_ms - spent_ms : 1;
  }
  return 0;
}

typedef struct link_wait {
  crnet_comm *c;
  int r;
} link_wait;

static bool linked_or_failed(void *arg) {
  link_wait *w = arg;
  return w->c->err != 0 || crnet__lazy_linked(w->c, w->r);
}

int crnet__lazy_wait(crnet_comm *c, int r) {
  link_wait w = {c, r};
  if (!c->lazy || r < 0 || r >= c->size || r == c->rank || c->err != 0)
    return c->err;
  crnet__lazy_want(c, r);
  if (crnet__comm_run_until(c, linked_or_failed, &w, coll_time_left_ms(c)) ==
          CRNET_ETIMEDOUT &&
      c->err == 0) {
    char who[160];
    crnet__describe_rank(c, r, who, sizeof who);
    crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                     "rank %d timed out in %s #%" PRIu64 " round %" PRIu32
                     " after %.3g s (CRNET_TIMEOUT) waiting for %s (no "
                     "link to it yet)",
                     c->rank,
                     crnet_collective_name((crnet_collective)c->cur_coll),
                     c->seq, c->cur_round,
                     (double)c->coll_timeout_ms / 1000.0, who);
  }
  return c->err;
}

int crnet__xchg_wait(crnet__xchg *x, uint64_t min_got) {
  crnet_comm *c = x->c;
  xchg_wait w = {x, min_got};
  bool failed = false;
  /* The collective's time limit; none while a failure winds up (closing
   * links ends the wait soon enough). */
  uint64_t limit_ms = coll_time_left_ms(c);
  if (crnet__comm_run_until(c, xchg_done, &w, limit_ms) == CRNET_ETIMEDOUT) {
    fail_timed_out(c);
    crnet__comm_run_until(c, xchg_done, &w, 0);
  }
  if (!crnet__xchg_complete(x))
    return c->err; /* partial progress, or a failure being wound up */
  free(x->recv_iov);
  x->recv_iov = NULL;
  for (uint32_t k = 0; k < x->nsend; k++)
    failed = failed || x->send[k].status != 0;
  for (uint32_t k = 0; k < x->nrecv; k++)
    failed = failed || x->recv[k].status != 0;
  if (c->err == 0 && failed)
    crnet__comm_fail(c, CRNET_EPEER, -1, "link failed in round %" PRIu32,
                     x->round);
  return c->err;
}

int crnet__sendrecv_v(crnet_comm *c, int to, const crnet__iov *siov,
                      uint32_t sn, int from, const crnet__iov *riov,
                      uint32_t rn, uint32_t round, uint32_t sig) {
  crnet__xchg x;
  int rc = crnet__xchg_start(c, &x, to, siov, sn, from, riov, rn, round, sig);
  /* Requests live in x: wait until libuv has let go of both, also when the
   * comm failed meanwhile (closing a link completes its requests). */
  int wrc = crnet__xchg_wait(&x, 0);
  return rc != 0 ? rc : wrc;
}

int crnet__sendrecv(crnet_comm *c, int to, const void *sbuf, uint64_t slen,
                    int from, void *rbuf, uint64_t rlen, uint32_t round,
                    uint32_t sig) {
  crnet__iov s = {(void *)sbuf, slen}, r = {rbuf, rlen};
  return crnet__sendrecv_v(c, to, &s, 1, from, &r, 1, round, sig);
}

int crnet__coll_begin(crnet_comm *c, crnet_collective coll, uint32_t sig,
                      const crnet__frame_call *call) {
  static const crnet__frame_call none = {.op = -1, .root = -1};
  if (c->err != 0)
    return c->err;
  if (c->lazy)
    crnet__lazy_resume(c);
  c->seq++;
  c->coll_started = uv_hrtime();
  c->cur_coll = c->last_coll = (int)coll;
  c->cur_round = 0;
  c->cur_sig = sig;
  c->cur_call = call != NULL ? *call : none;
  c->history[c->seq % CRNET__CALL_HISTORY].seq = c->seq;
  c->history[c->seq % CRNET__CALL_HISTORY].coll = (int)coll;
  c->history[c->seq % CRNET__CALL_HISTORY].call = c->cur_call;
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
  return c->err;
}

void crnet__coll_end(crnet_comm *c) { c->cur_coll = -1; }

/* --- lifecycle ------------------------------------------------------------------ */

static void free_comm(crnet_comm *c) {
  if (c->report_fd >= 0)
    close(c->report_fd);
  free(c->rank_end);
  crnet__trace_close(c->trace);
  free(c->peer_stats);
  crnet__secret_free(c->key);
  free(c->temp);
  free(c->exec_runs);
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
  if (s->spin_us >= 0)
    c->spin_ns = (uint64_t)s->spin_us * 1000;
  else if (c->size > 1)
    c->spin_ns = (uint64_t)(own_cores ? DEFAULT_SPIN_US
                                      : DEFAULT_SPIN_SHARED_US) * 1000;
  else
    c->spin_ns = 0;
  c->spin_score = SPIN_SCORE_MAX / 2;
}

/* Socket buffers of the mesh links: by default the kernel sizes them as
 * the connection goes (autotuning, which a fixed size would turn off). A
 * size the kernel refuses (above net.core.[rw]mem_max without privilege)
 * is capped by it, silently: the links work either way. */
void crnet__comm_link_settings(crnet_comm *c, crnet__link *l) {
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
  c->cur_coll = c->last_coll = -1;
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
  if (c == NULL)
    return 0;
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
  if (c == NULL)
    return "comm is NULL";
  return c->err != 0 ? c->errmsg : c->callmsg;
}

/* --- counters ------------------------------------------------------------------- */

int crnet_comm_coll_stats(const crnet_comm *c, crnet_collective coll,
                          crnet_coll_stats *out) {
  if (c == NULL || out == NULL || (unsigned)coll >= CRNET_COLL_COUNT)
    return CRNET_EINVAL;
  *out = c->coll_stats[coll];
  return 0;
}

int crnet_comm_peer_stats(const crnet_comm *c, int peer,
                          crnet_peer_stats *out) {
  if (c == NULL || out == NULL || peer < 0 || peer >= c->size)
    return CRNET_EINVAL;
  *out = c->peer_stats[peer];
  return 0;
}

int crnet_comm_stats_reset(crnet_comm *c) {
  if (c == NULL)
    return CRNET_EINVAL;
  memset(c->coll_stats, 0, sizeof c->coll_stats);
  memset(c->peer_stats, 0, sizeof *c->peer_stats * (size_t)c->size);
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
  return c != NULL ? c->abort_code : 0;
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

int crnet_comm_abort(crnet_comm *c, int code) {
  if (c == NULL)
    return CRNET_EINVAL;
  if (c->err == 0) {
    /* crlaunch hears it first, before any peer can fail and exit because
     * of it, so that it exits with `code` whatever the others do. */
    char line[48];
    snprintf(line, sizeof line, "abort %d %d\n", c->rank, code);
    crnet__report_send(c, line);
    crnet__comm_fail_aborted(c, c->rank, code);
    /* Give the ABORT frames a moment to leave, bounded, so a caller that
     * exits right after this still warns everyone. */
    crnet__comm_run_until(c, aborts_sent, c, ABORT_FLUSH_MS);
  }
  return 0;
}
