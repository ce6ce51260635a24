/* Bootstrap: from (rank, size, rendezvous address, job key) to a full mesh of
 * authenticated links (or, with lazy links, to the table and an open
 * listener: steps 4 and 5 are then lazy.c's, on first use).
 *
 *   1. Rank 0 starts the rendezvous server if nobody else serves it (no
 *      crlaunch: the torchrun/TCPStore pattern).
 *   2. Connect to the rendezvous (retrying while it is not up yet) and
 *      authenticate. The local address of that connection is the address on
 *      which the rendezvous, and so presumably the peers, can reach us: the
 *      mesh listener binds exactly there (not on every interface), on port 0
 *      or a port of CRNET_PORT_RANGE.
 *   3. Register that address (and this rank's tuning constants); receive
 *      every rank's address and rank 0's tuning, which replaces this rank's
 *      own, so that `auto` picks alike everywhere (tuning.h); or an error
 *      naming the ranks that never came.
 *   4. Rank i connects to every rank j < i and accepts from every j > i, so
 *      each pair has exactly one connection per stream (CRNET_STREAMS, rank
 *      0's value, which came with the table; the handshake carries the
 *      stream index). Accepted connections must authenticate as a higher
 *      rank and a stream we have no link to yet; anything else (a stranger,
 *      garbage, a duplicate) is dropped with a log line and the bootstrap
 *      goes on.
 *   5. When all (p−1) · streams links are up, close the listener (no stranger can get in
 *      afterwards), drop accepted connections still in their handshake,
 *      and return. The whole process is bounded by the init
 *      timeout; on expiry the error names the ranks that never appeared.
 *   With lazy links (CRNET_LAZY_LINKS, rank 0's choice, which came with the
 *   table like the streams) the bootstrap returns once it has the table;
 *   the listener stays open and belongs to lazy.c from then on, and a
 *   connection that comes before the table is left in the listen queue
 *   until it is there, as in step 4.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "alloc.h"
#include "comm.h"
#include "frame.h"
#include "log.h"
#include "netaddr.h"
#include "settings.h"

/* A rendezvous name that does not resolve yet is asked again this often,
 * and after this long it is said once on stderr (see resolve_with_retry). */
#define RESOLVE_RETRY_MS 250
#define RESOLVE_NOTICE_MS 5000

#define RETRY_MIN_MS 20
#define RETRY_MAX_MS 500
#define LINGER_MS 2000
#define RENDEZVOUS_VERDICT_GRACE_MS 2000
/* Addresses of the rendezvous host name kept (a name rarely has more). */
#define MAX_RENDEZVOUS_ADDRS 8

typedef struct bootstrap bootstrap;

typedef struct rdv_client {
  crnet__link link;
  bootstrap *b;
} rdv_client;

struct bootstrap {
  crnet_comm *c;
  const crnet__settings *s;
  uint64_t deadline; /* uv_now() value */
  /* The rendezvous host's addresses, resolved once; attempts go through
   * them in order, so that a name with an IPv6 and an IPv4 address works
   * whichever of the two the server listens on. */
  struct sockaddr_storage rdv_addrs[MAX_RENDEZVOUS_ADDRS];
  int n_rdv_addrs;
  int rdv_next;           /* the address of the next attempt */
  /* The rendezvous as messages name it, where a directory published it
   * ("" otherwise: CRNET_RENDEZVOUS's host and port). */
  char rdv_label[300];
  bool rdv_reached;       /* a connection got through the handshake */
  char rdv_last_err[256]; /* how the last failed attempt failed */

  /* CRNET_IFACE's address per family (0: IPv4, 1: IPv6), looked up on
   * first use: 0 not yet, 1 found, -1 none (reason in src_why). */
  struct sockaddr_storage src[2];
  int src_state[2];
  char src_why[2][128];

  crnet__rendezvous_server *server;
  bool server_done;

  rdv_client *rdv; /* current attempt, or NULL */
  uv_timer_t retry;
  bool retry_open;
  uint64_t retry_ms;
  bool rdv_failed; /* fatal, with reason in err */
  bool have_table;

  bool accept_deferred; /* a connection came before the table */

  int connected;    /* mesh links up */
  /* Mesh links whose handshake is not over. Their callbacks point at this
   * bootstrap, which lives on crnet__bootstrap's stack, so they are closed
   * when it ends, lest one completes later (a peer slow to answer while
   * the job already failed) and keeps the comm's loop alive. */
  crnet__peer **pending;
  int npending, pending_cap;
  bool *retry_peer; /* links (as c->w->peers) to connect again */
  int outstanding_handles;
  int fatal; /* a negative code once the bootstrap cannot succeed */
  char err[512];
};

static void set_fatal(bootstrap *b, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_fatal(bootstrap *b, int code, const char *fmt, ...) {
  va_list ap;
  if (b->fatal != 0)
    return;
  b->fatal = code;
  va_start(ap, fmt);
  vsnprintf(b->err, sizeof b->err, fmt, ap);
  va_end(ap);
}

static void on_handle_closed(uv_handle_t *h) {
  bootstrap *b = h->data;
  b->outstanding_handles--;
}

/* The listener's handle belongs to the comm (its data), since with lazy
 * links it outlives the bootstrap; this is its close during the bootstrap. */
static void on_listener_closed(uv_handle_t *h) {
  crnet_comm *c = h->data;
  bootstrap *b = c->w->boot;
  c->w->listener_open = false;
  b->outstanding_handles--;
}

/* The local address CRNET_IFACE selects for sockets of `family`: 1 with
 * *out set, 0 without CRNET_IFACE (the kernel chooses), -1 when the
 * interface or network has no such address (*why says so). */
static int iface_source(bootstrap *b, int family, const struct sockaddr **out,
                        const char **why) {
  int i = family == AF_INET6;
  *out = NULL;
  if (b->s->iface[0] == '\0')
    return 0;
  if (b->src_state[i] == 0)
    b->src_state[i] =
        crnet__iface_address(b->s->iface, family, &b->src[i], b->src_why[i],
                             sizeof b->src_why[i]) == 0
            ? 1
            : -1;
  *why = b->src_why[i];
  if (b->src_state[i] < 0)
    return -1;
  *out = (const struct sockaddr *)&b->src[i];
  return 1;
}

/* --- the mesh -------------------------------------------------------------- */

static void connect_peer(bootstrap *b, int j, int k);
static void on_retry_mesh(uv_timer_t *t);

/* The slot of l in c->w->peers, or NULL while it is not known who l is. */
static crnet__peer **slot_of(crnet_comm *c, const crnet__link *l) {
  if (l->peer < 0 || l->peer >= c->size || l->stream >= c->w->streams)
    return NULL;
  return crnet__comm_link(c, l->peer, l->stream);
}

static const crnet__link_callbacks mesh_boot_callbacks;

static void forget_pending(bootstrap *b, crnet__peer *p) {
  for (int i = 0; i < b->npending; i++)
    if (b->pending[i] == p) {
      b->pending[i] = b->pending[--b->npending];
      return;
    }
}

static void peer_closed(crnet__link *l) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  crnet__peer **slot = slot_of(c, l);
  /* A link that could not even start closes without on_ready. */
  if (l->cb == &mesh_boot_callbacks && l->owner != NULL)
    forget_pending(l->owner, p);
  c->w->open_peers--;
  if (slot != NULL && *slot == p)
    *slot = NULL;
  free(p);
}

/* Mesh links during bootstrap: once ready they switch to the comm's
 * callbacks, which share on_closed with these. */
static void on_mesh_ready(crnet__link *l, int status) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  bootstrap *b = l->owner;
  crnet__peer **slot;
  char who[160];
  forget_pending(b, p);
  if (status != 0) {
    if (!l->initiator) {
      crnet__log("dropped connection from %s: %s", l->addr, l->why);
      crnet__link_close(l);
      return;
    }
    /* An outgoing attempt failed. The peer listens before it registers, so a
     * refusal means something is wrong with that address; only
     * authentication failures and timeouts are final though, because a busy
     * listener can refuse transiently. */
    crnet__describe_rank(c, l->peer, who, sizeof who);
    if (status == CRNET_EAUTH)
      set_fatal(b, CRNET_EAUTH, "authentication with %s failed: %s", who,
                l->why);
    else
      crnet__debug("connecting to %s: %s; retrying", who, l->why);
    b->retry_peer[(size_t)l->peer * c->w->streams + l->stream] = true;
    if (!uv_is_active((uv_handle_t *)&b->retry))
      uv_timer_start(&b->retry, on_retry_mesh, RETRY_MAX_MS / 5, 0);
    crnet__link_close(l);
    return;
  }
  if (l->purpose != CRNET__HS_MESH) {
    crnet__log("dropped connection from %s: not a mesh connection", l->addr);
    crnet__link_close(l);
    return;
  }
  slot = slot_of(c, l);
  if (!l->initiator && (l->peer <= c->rank || slot == NULL || *slot != NULL)) {
    crnet__log("dropped connection from %s: rank %d %s", l->addr, (int)l->peer,
               l->peer <= c->rank ? "must be connected to, not from"
                                  : "is connected already");
    crnet__link_close(l);
    return;
  }
  *slot = p;
  l->cb = &crnet__peer_callbacks;
  l->owner = c;
  b->connected++;
  crnet__debug("link to rank %d stream %d up (%s, cipher %s)", (int)l->peer,
               (int)l->stream, l->addr, crnet__cipher_name(l->cipher));
  /* A peer's failure reached this rank while this link was in its
   * handshake: the failure was told to the links ready then, and this one
   * must hear it too, or its peer reads only the connection's end. The
   * bootstrap still completes (init succeeds; the first call returns the
   * error). */
  if (c->err != 0)
    crnet__comm_tell_late_link(c, l);
}

static void on_retry_mesh(uv_timer_t *t) {
  bootstrap *b = t->data;
  int streams = (int)b->c->w->streams;
  for (int j = 0; j < b->c->rank && b->fatal == 0; j++) {
    for (int k = 0; k < streams; k++) {
      if (b->retry_peer[j * streams + k]) {
        b->retry_peer[j * streams + k] = false;
        connect_peer(b, j, k);
      }
    }
  }
}

static void on_mesh_control(crnet__link *l, const crnet__frame_header *h,
                            const uint8_t *payload) {
  /* Before the link is ready nothing is read as frames. */
  (void)l;
  (void)h;
  (void)payload;
}

static void on_mesh_error(crnet__link *l, int status, const char *why) {
  (void)status;
  (void)why;
  crnet__link_close(l);
}

static const crnet__link_callbacks mesh_boot_callbacks = {
    .on_ready = on_mesh_ready,
    .on_control = on_mesh_control,
    .on_error = on_mesh_error,
    .on_closed = peer_closed,
};

static crnet__peer *new_peer(bootstrap *b) {
  crnet__peer *p;
  if (b->npending == b->pending_cap) {
    int cap = b->pending_cap > 0 ? 2 * b->pending_cap : 16;
    crnet__peer **grown =
        crnet__realloc(b->pending, sizeof *grown * (size_t)cap);
    if (grown == NULL)
      return NULL;
    b->pending = grown;
    b->pending_cap = cap;
  }
  p = crnet__calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  p->comm = b->c;
  b->c->w->open_peers++;
  b->pending[b->npending++] = p;
  return p;
}

/* Closes the links still in their handshake (see bootstrap.pending). */
static void close_pending(bootstrap *b) {
  while (b->npending > 0) {
    crnet__peer *p = b->pending[--b->npending];
    p->link.owner = NULL;
    crnet__link_close(&p->link);
  }
  free(b->pending);
  b->pending = NULL;
}

int crnet__entry_to_sockaddr(const crnet__rendezvous_entry *e,
                             struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (e->family == 4) {
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    in->sin_family = AF_INET;
    in->sin_port = htons(e->port);
    memcpy(&in->sin_addr, e->addr, 4);
    return 0;
  }
  if (e->family == 6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(e->port);
    memcpy(&in6->sin6_addr, e->addr, 16);
    return 0;
  }
  return CRNET_EINVAL;
}

/* This rank's CRNET_ENCRYPT, for every link it opens or accepts. Every
 * rank decides for itself; the handshake refuses a peer that decided
 * otherwise, naming the setting. */
static uint8_t encrypt_mode(const bootstrap *b) {
  return b->s->encrypt ? CRNET__HS_ENCRYPT : CRNET__HS_PLAIN;
}

static void connect_peer(bootstrap *b, int j, int k) {
  crnet_comm *c = b->c;
  struct sockaddr_storage ss;
  const struct sockaddr *src;
  const char *why;
  crnet__peer *p;
  uint64_t now = uv_now(&c->w->loop);
  uint64_t left = b->deadline > now ? b->deadline - now : 1;
  char who[160];
  if (crnet__entry_to_sockaddr(&c->w->table[j], &ss) != 0) {
    set_fatal(b, CRNET_EIO, "rank %d registered an unusable address", j);
    return;
  }
  if (iface_source(b, ss.ss_family, &src, &why) < 0) {
    crnet__describe_rank(c, j, who, sizeof who);
    set_fatal(b, CRNET_EINVAL, "CRNET_IFACE=%s: %s (to reach %s)",
              b->s->iface, why, who);
    return;
  }
  p = new_peer(b);
  if (p == NULL) {
    set_fatal(b, CRNET_ENOMEM, "out of memory");
    return;
  }
  if (crnet__link_connect_from(&p->link, &c->w->loop, (struct sockaddr *)&ss,
                               src, &mesh_boot_callbacks, b, c->w->key,
                               CRNET__HS_MESH, c->rank, j, c->w->size,
                               left) != 0) {
    /* The link closes itself; try again later, as after a refusal. */
    crnet__debug("connecting to rank %d: %s; retrying", j, p->link.why);
    b->retry_peer[(size_t)j * c->w->streams + (size_t)k] = true;
    if (!uv_is_active((uv_handle_t *)&b->retry))
      uv_timer_start(&b->retry, on_retry_mesh, RETRY_MAX_MS / 5, 0);
    return;
  }
  crnet__link_set_streams(&p->link, (uint8_t)k, (uint8_t)c->w->streams);
  crnet__link_set_encrypt(&p->link, encrypt_mode(b));
  /* The peer rank and stream are known on this side before the handshake,
   * for messages about failed attempts and for retries. */
  p->link.peer = j;
  p->link.stream = (uint8_t)k;
}

static void on_mesh_connection(uv_stream_t *server, int status) {
  crnet_comm *c = server->data;
  bootstrap *b = c->w->boot;
  crnet__peer *p;
  uint64_t now, left;
  if (status < 0)
    return;
  /* With lazy links the listener outlives the bootstrap, and a peer may
   * connect on its first use of this rank as soon as both have the table,
   * even before this rank's bootstrap has returned. */
  if (b == NULL || (c->w->lazy && b->have_table)) {
    crnet__lazy_accept(c);
    return;
  }
  if (!b->have_table) {
    /* A faster rank has the table already; until we have it too we do not
     * know how many streams the job uses. Not accepting now makes libuv
     * leave the connection (and the ones after it) in the listen queue
     * until the table comes (on_rdv_control). */
    b->accept_deferred = true;
    return;
  }
  p = new_peer(b);
  if (p == NULL)
    return;
  now = uv_now(&c->w->loop);
  left = b->deadline > now ? b->deadline - now : 1;
  /* On failure the link closes itself and peer_closed frees p. */
  crnet__link_accept(&p->link, &c->w->loop, server, &mesh_boot_callbacks, b,
                     c->w->key, c->rank, c->w->size,
                     left < c->w->handshake_ms ? left : c->w->handshake_ms);
  crnet__link_set_streams(&p->link, 0, (uint8_t)c->w->streams);
  crnet__link_set_encrypt(&p->link, encrypt_mode(b));
}

/* Binds the mesh listener to the local address `local` (its port ignored),
 * on port 0 or the first free port of the range, starting at an offset that
 * spreads ranks of one host over the range. */
static int listen_mesh(bootstrap *b, const struct sockaddr_storage *local) {
  crnet_comm *c = b->c;
  const crnet__settings *s = b->s;
  struct sockaddr_storage ss = *local;
  int n = s->port_hi > 0 ? s->port_hi - s->port_lo + 1 : 1;
  int start = s->port_hi > 0 ? (c->rank + (int)getpid()) % n : 0;
  int rc = UV_EADDRINUSE;
  uv_tcp_init(&c->w->loop, &c->w->listener);
  c->w->listener.data = c;
  c->w->listener_open = true;
  b->outstanding_handles++;
  for (int i = 0; i < n; i++) {
    crnet__addr_set_port(&ss, s->port_hi > 0 ? s->port_lo + (start + i) % n
                                             : 0);
    rc = uv_tcp_bind(&c->w->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
      rc = uv_listen((uv_stream_t *)&c->w->listener, 1024, on_mesh_connection);
    if (rc == 0)
      return 0;
    if (rc != UV_EADDRINUSE)
      break;
  }
  if (s->port_hi > 0 && rc == UV_EADDRINUSE) {
    set_fatal(b, CRNET_EIO, "CRNET_PORT_RANGE=%d-%d: every port is in use",
              s->port_lo, s->port_hi);
  } else {
    char at[64];
    uv_ip_name((struct sockaddr *)&ss, at, sizeof at);
    set_fatal(b, CRNET_EIO, "cannot listen for peers on %s: %s", at,
              uv_strerror(rc));
  }
  return CRNET_EIO;
}

/* --- the rendezvous client -------------------------------------------------- */

static void start_rdv_attempt(bootstrap *b);

static void on_retry(uv_timer_t *t) { start_rdv_attempt(t->data); }

/* An attempt at addr failed (why): remember how, for the message if no
 * attempt ever succeeds, and try the next address. The next round through
 * the addresses waits longer each time, as the server may not be up yet
 * (rank 0 not started, say). */
static void rdv_attempt_failed(bootstrap *b, const char *addr,
                               const char *why) {
  /* Cut short if it must be: it is only a message. */
  if (snprintf(b->rdv_last_err, sizeof b->rdv_last_err, "%s (%s)", why,
               addr) < 0)
    b->rdv_last_err[0] = '\0';
  if (b->fatal != 0)
    return;
  b->rdv_next = (b->rdv_next + 1) % b->n_rdv_addrs;
  if (b->rdv_next != 0) {
    uv_timer_start(&b->retry, on_retry, 0, 0);
    return;
  }
  uv_timer_start(&b->retry, on_retry, b->retry_ms, 0);
  b->retry_ms = b->retry_ms * 2 < RETRY_MAX_MS ? b->retry_ms * 2 : RETRY_MAX_MS;
}

static void rdv_closed(crnet__link *l) {
  rdv_client *rc = (rdv_client *)l;
  bootstrap *b = rc->b;
  if (b->rdv == rc)
    b->rdv = NULL;
  b->outstanding_handles--;
  free(rc);
}

static void register_with(bootstrap *b, crnet__link *l) {
  crnet_comm *c = b->c;
  struct sockaddr_storage local, bound;
  int len = sizeof local;
  crnet__rendezvous_entry e;
  uint8_t msg[CRNET__RENDEZVOUS_REGISTER_SIZE];
  size_t hostlen = sizeof e.host;
  memset(&e, 0, sizeof e);
  if (uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&local, &len) != 0 ||
      listen_mesh(b, &local) != 0) {
    if (b->fatal == 0)
      set_fatal(b, CRNET_EIO, "cannot find the local address");
    return;
  }
  len = sizeof bound;
  uv_tcp_getsockname(&c->w->listener, (struct sockaddr *)&bound, &len);
  if (bound.ss_family == AF_INET) {
    e.family = 4;
    e.port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    memcpy(e.addr, &((struct sockaddr_in *)&bound)->sin_addr, 4);
  } else {
    e.family = 6;
    e.port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    memcpy(e.addr, &((struct sockaddr_in6 *)&bound)->sin6_addr, 16);
  }
  e.pid = (uint32_t)getpid();
  if (uv_os_gethostname(e.host, &hostlen) != 0)
    snprintf(e.host, sizeof e.host, "?");
  crnet__rendezvous_node_id(e.node);
  crnet__put_le32(msg, (uint32_t)c->rank);
  crnet__put_le32(msg + 4, (uint32_t)c->size);
  crnet__rendezvous_entry_encode(&e, msg + 8);
  crnet__tuning_encode(&c->w->tuning, msg + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE);
  crnet__rendezvous_options_encode(
      &(crnet__rendezvous_options){
          (uint32_t)b->s->streams, (uint32_t)b->s->stream_min, b->s->lazy,
          b->s->transport == CRNET__TRANSPORT_TCP || b->s->encrypt,
          b->s->shm_board != 0 ? (uint32_t)__builtin_ctz(b->s->shm_board) + 1
                               : 0},
      msg + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE + CRNET__TUNING_WIRE_SIZE);
  /* A restarted rank joins the running job instead (rendezvous.h). */
  if (crnet__link_send_control(l,
                               b->s->restarted > 0
                                   ? CRNET__FRAME_RENDEZVOUS_JOIN
                                   : CRNET__FRAME_RENDEZVOUS_REGISTER,
                               msg, sizeof msg) != 0)
    set_fatal(b, CRNET_EIO, "cannot register with the rendezvous");
}

static void on_rdv_ready(crnet__link *l, int status) {
  rdv_client *rc = (rdv_client *)l;
  bootstrap *b = rc->b;
  if (status == 0) {
    b->rdv_reached = true;
    register_with(b, l);
    return;
  }
  if (status == CRNET_EAUTH) {
    /* The server drops a wrong key at its first look (another job id), so
     * the usual symptom is a close during the handshake. */
    set_fatal(b, CRNET_EAUTH,
              "the rendezvous at %s refused this process (%s): is the job key "
              "the same on every rank?",
              l->addr, l->why);
  }
  rdv_attempt_failed(b, l->addr, l->why);
  crnet__link_close(l);
}

/* Rank 0's options from the table become the job's: the streams per pair
 * of ranks decide how many links the mesh has. No mesh link exists yet, so
 * the slots can be laid out anew. */
/* job_lazy: rank 0's word on lazy links (a restarted rank's own links are
 * lazy whatever it is). */
static void use_options(bootstrap *b, const crnet__rendezvous_options *o,
                        bool job_lazy) {
  crnet_comm *c = b->c;
  if (o->streams != c->w->streams) {
    crnet__peer **peers =
        crnet__calloc((size_t)c->w->size * o->streams, sizeof *peers);
    if (peers == NULL) {
      set_fatal(b, CRNET_ENOMEM, "out of memory");
      return;
    }
    free(c->w->peers);
    c->w->peers = peers;
    c->w->streams = o->streams;
  }
  c->w->stream_min = o->stream_min;
  if (o->lazy && c->w->connecting == NULL) {
    c->w->connecting = crnet__calloc((size_t)c->w->size * c->w->streams,
                                     sizeof *c->w->connecting);
    c->w->calling = crnet__calloc((size_t)c->w->size, sizeof *c->w->calling);
    if (c->w->connecting == NULL || c->w->calling == NULL) {
      set_fatal(b, CRNET_ENOMEM, "out of memory");
      return;
    }
  }
  c->w->lazy = o->lazy != 0;
  c->w->job_lazy = job_lazy;
  c->w->job_tcp = o->tcp != 0;
  c->w->shm_board = o->board != 0 ? 1u << (o->board - 1) : 0;
  if (c->w->lazy)
    crnet__debug("lazy links: connecting to peers on first use");
  if (c->w->streams > 1)
    crnet__debug("%u streams per peer, parts of at least %" PRIu64 " bytes",
                 (unsigned)c->w->streams, c->w->stream_min);
}

/* A restarted rank's answer from the rendezvous: its slot in the job and
 * the table of every rank below it (rendezvous.h). The slot becomes this
 * process's rank in the job and in its world comm, which spans every slot
 * (join.c makes the comm the program gets). Its links are lazy: it
 * connects to the ranks below it itself (crnet__join), and a later
 * newcomer connects to it. */
static void take_joined(bootstrap *b, const crnet__frame_header *h,
                        const uint8_t *payload) {
  crnet_comm *c = b->c;
  crnet__rendezvous_options options;
  bool job_lazy;
  const char *why = "a malformed join";
  uint32_t slot = h->length >= 4 ? crnet__get_le32(payload) : 0;
  if (slot < (uint32_t)c->w->world_size || slot >= (uint32_t)c->w->size ||
      crnet__rendezvous_table_decode(payload + 4, h->length - 4,
                                     (int32_t)slot + 1, "rank 0", c->w->table,
                                     &c->w->tuning, &options, &why) != 0) {
    set_fatal(b, CRNET_EIO, "the rendezvous sent %s", why);
    return;
  }
  for (uint32_t j = 0; j < slot; j++)
    if (c->w->table[j].gone)
      c->w->lost[j] = 1;
  job_lazy = options.lazy != 0;
  options.lazy = 1;
  c->rank = c->w->rank = (int)slot;
  c->size = c->w->size;
  use_options(b, &options, job_lazy);
  b->have_table = b->fatal == 0;
  crnet__debug("restarted: joins the job as rank %u", (unsigned)slot);
}

static void on_rdv_control(crnet__link *l, const crnet__frame_header *h,
                           const uint8_t *payload) {
  rdv_client *rc = (rdv_client *)l;
  bootstrap *b = rc->b;
  crnet_comm *c = b->c;
  crnet__rendezvous_options options;
  const char *why;
  if (h->kind == CRNET__FRAME_RENDEZVOUS_ERROR) {
    int n = h->length < 400 ? (int)h->length : 400;
    set_fatal(b, CRNET_ETIMEDOUT, "rendezvous: %.*s", n, (const char *)payload);
  } else if (h->kind == CRNET__FRAME_RENDEZVOUS_JOINED && b->s->restarted > 0) {
    take_joined(b, h, payload);
  } else if (h->kind == CRNET__FRAME_RENDEZVOUS_TABLE && b->s->restarted == 0) {
    /* Rank 0 keeps naming its own file; the others name rank 0. */
    if (crnet__rendezvous_table_decode(
            payload, h->length, c->size,
            c->rank == 0 ? c->w->tuning.source : "rank 0", c->w->table,
            &c->w->tuning, &options, &why) != 0)
      set_fatal(b, CRNET_EIO, "the rendezvous sent %s", why);
    else
      use_options(b, &options, options.lazy != 0);
    if (b->fatal == 0) {
      char desc[600];
      crnet__tuning_describe(&c->w->tuning, c->size, desc, sizeof desc);
      crnet__debug("tuning: %s", desc);
    }
    b->have_table = b->fatal == 0;
    if (b->have_table && b->accept_deferred) {
      b->accept_deferred = false;
      on_mesh_connection((uv_stream_t *)&c->w->listener, 0);
    }
  } else {
    set_fatal(b, CRNET_EIO, "the rendezvous sent an unexpected frame");
  }
  crnet__link_close_gently(l, LINGER_MS);
}

static void on_rdv_error(crnet__link *l, int status, const char *why) {
  rdv_client *rc = (rdv_client *)l;
  bootstrap *b = rc->b;
  (void)status;
  if (!b->have_table)
    set_fatal(b, CRNET_EPEER, "lost the rendezvous at %s: %s", l->addr, why);
  crnet__link_close(l);
}

static const crnet__link_callbacks rdv_client_callbacks = {
    .on_ready = on_rdv_ready,
    .on_control = on_rdv_control,
    .on_error = on_rdv_error,
    .on_closed = rdv_closed,
};

static void start_rdv_attempt(bootstrap *b) {
  crnet_comm *c = b->c;
  uint64_t now = uv_now(&c->w->loop);
  const struct sockaddr *addr =
      (const struct sockaddr *)&b->rdv_addrs[b->rdv_next];
  const struct sockaddr *src;
  const char *why;
  rdv_client *rc;
  if (b->fatal != 0 || now >= b->deadline + RENDEZVOUS_VERDICT_GRACE_MS)
    return;
  /* resolve_rendezvous kept only addresses CRNET_IFACE has a family for. */
  if (iface_source(b, addr->sa_family, &src, &why) < 0)
    src = NULL;
  rc = crnet__calloc(1, sizeof *rc);
  if (rc == NULL) {
    set_fatal(b, CRNET_ENOMEM, "out of memory");
    return;
  }
  rc->b = b;
  b->rdv = rc;
  b->outstanding_handles++;
  if (crnet__link_connect_from(
          &rc->link, &c->w->loop, addr, src, &rdv_client_callbacks, b,
          c->w->key, CRNET__HS_RENDEZVOUS, c->rank, CRNET__RANK_RENDEZVOUS,
          c->size, b->deadline + RENDEZVOUS_VERDICT_GRACE_MS - now) != 0) {
    rdv_attempt_failed(b, rc->link.addr, rc->link.why);
    return;
  }
  crnet__link_set_encrypt(&rc->link, encrypt_mode(b));
}

/* How the attempt still under way stands, for the timeout's message. */
static const char *pending_attempt(const bootstrap *b) {
  if (b->rdv == NULL)
    return NULL;
  if (b->rdv->link.state == CRNET__LINK_CONNECTING)
    return "no answer to the connection attempt";
  if (b->rdv->link.state == CRNET__LINK_HANDSHAKE)
    return "connected, but no answer to the handshake (is it a crnet "
           "rendezvous?)";
  return NULL;
}

/* --- the whole ----------------------------------------------------------------- */

static void on_server_done(crnet__rendezvous_server *srv, int status,
                           const int *missing, int nmissing, void *arg) {
  bootstrap *b = arg;
  (void)srv;
  (void)missing;
  (void)nmissing;
  (void)status;
  /* Ranks that registered learn the outcome from the server itself; rank 0
   * is one of them. */
  b->server_done = true;
}

static bool phase_rdv_done(void *arg) {
  bootstrap *b = arg;
  return b->fatal != 0 || b->have_table;
}

static bool phase_mesh_done(void *arg) {
  bootstrap *b = arg;
  return b->fatal != 0 || b->c->w->lazy ||
         b->connected == (b->c->size - 1) * (int)b->c->w->streams;
}

static bool handles_closed(void *arg) {
  bootstrap *b = arg;
  return b->outstanding_handles == 0 && (b->server == NULL || b->server_done);
}

/* uv_walk callback: a connection accepted during the bootstrap that has not
 * authenticated by its end is nobody the job needs (every rank is linked,
 * or the bootstrap failed), so it is dropped now instead of holding the
 * comm until its handshake deadline: crnet_comm_destroy waits for every
 * link to close, and the link's owner, the bootstrap, is about to go.
 * Links are the tcp handles whose data is the handle itself (the tcp
 * handle is a link's first member). */
static void drop_unauthenticated(uv_handle_t *h, void *arg) {
  crnet__link *l = h->data;
  (void)arg;
  if (h->type != UV_TCP || h->data != (void *)h || uv_is_closing(h) ||
      l->cb != &mesh_boot_callbacks || l->initiator ||
      l->state != CRNET__LINK_HANDSHAKE || l->failed)
    return;
  crnet__log("dropped connection from %s: not authenticated by the end of "
             "the bootstrap",
             l->addr);
  crnet__link_close(l);
}

static void list_missing(bootstrap *b, char *buf, size_t n) {
  crnet_comm *c = b->c;
  size_t used = 0;
  int count = 0;
  buf[0] = '\0';
  for (int r = 0; r < c->size && used + 24 < n; r++) {
    bool linked = true;
    for (int k = 0; k < (int)c->w->streams; k++)
      linked = linked && *crnet__comm_link(c, r, k) != NULL;
    if (r == c->rank || linked)
      continue;
    used += (size_t)snprintf(buf + used, n - used, "%s%d", count ? ", " : "", r);
    count++;
  }
}

/* "host:port" or "[v6]:port" of CRNET_RENDEZVOUS, or the addresses a
 * directory published, for messages. */
static void rdv_name(const bootstrap *b, char *buf, size_t n) {
  const crnet__settings *s = b->s;
  if (b->rdv_label[0] != '\0')
    snprintf(buf, n, "%s", b->rdv_label);
  else
    snprintf(buf, n, strchr(s->rdv_host, ':') != NULL ? "[%s]:%d" : "%s:%d",
             s->rdv_host, s->rdv_port);
}

/* Resolves the rendezvous host once, for the whole init, keeping every
 * address in the resolver's order (less the ones CRNET_IFACE has no
 * address family for). */
/* Resolves the rendezvous host. A name that does not resolve yet is tried
 * again every RESOLVE_RETRY_MS until the init timeout: ranks of a job often
 * start together with rank 0's host, whose name (a Kubernetes pod behind a
 * headless service, a fresh cloud VM) reaches DNS a few seconds after it
 * started. Other failures end at once. 0, or CRNET_EINVAL /
 * CRNET_ETIMEDOUT (set as fatal). */
static int resolve_with_retry(bootstrap *b, uv_getaddrinfo_t *req,
                              const char *port, const struct addrinfo *hints) {
  const crnet__settings *s = b->s;
  uint64_t start = uv_hrtime();
  uint64_t limit = (uint64_t)(s->init_timeout * 1e9);
  bool told = false;
  for (;;) {
    /* Without a callback libuv resolves synchronously. */
    int rc = uv_getaddrinfo(&b->c->w->loop, req, NULL, s->rdv_host, port, hints);
    if (rc == 0)
      return 0;
    uint64_t spent = uv_hrtime() - start;
    bool not_yet = rc == UV_EAI_NONAME || rc == UV_EAI_AGAIN ||
                   rc == UV_EAI_NODATA;
    if (!not_yet) {
      set_fatal(b, CRNET_EINVAL, "cannot resolve the rendezvous host '%s': %s",
                s->rdv_host, uv_strerror(rc));
      return CRNET_EINVAL;
    }
    if (spent + RESOLVE_RETRY_MS * 1000000ull > limit) {
      set_fatal(b, CRNET_ETIMEDOUT,
                "cannot resolve the rendezvous host '%s' within %g s: %s",
                s->rdv_host, s->init_timeout, uv_strerror(rc));
      return CRNET_ETIMEDOUT;
    }
    if (!told && spent > RESOLVE_NOTICE_MS * 1000000ull) {
      crnet__log("the rendezvous host '%s' does not resolve yet (%s); "
                 "trying until the init timeout",
                 s->rdv_host, uv_strerror(rc));
      told = true;
    }
    crnet__debug("cannot resolve '%s' yet: %s", s->rdv_host, uv_strerror(rc));
    usleep(RESOLVE_RETRY_MS * 1000);
  }
}

static int resolve_rendezvous(bootstrap *b) {
  const crnet__settings *s = b->s;
  uv_getaddrinfo_t req;
  struct addrinfo hints;
  char port[16], first[64];
  const struct sockaddr *src;
  const char *why;
  int rc, first_family = AF_UNSPEC;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof port, "%d", s->rdv_port);
  if (s->iface[0] != '\0') {
    /* Errors of the setting itself (no such interface, a malformed
     * network) come before any about address families. */
    struct sockaddr_storage any;
    char reason[128];
    if (crnet__iface_address(s->iface, AF_UNSPEC, &any, reason,
                             sizeof reason) != 0) {
      set_fatal(b, CRNET_EINVAL, "CRNET_IFACE=%s: %s", s->iface, reason);
      return CRNET_EINVAL;
    }
  }
  rc = resolve_with_retry(b, &req, port, &hints);
  if (rc != 0)
    return rc;
  for (struct addrinfo *ai = req.addrinfo;
       ai != NULL && b->n_rdv_addrs < MAX_RENDEZVOUS_ADDRS; ai = ai->ai_next) {
    bool seen = false;
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
      continue;
    if (first_family == AF_UNSPEC) {
      first_family = ai->ai_family;
      crnet__format_sockaddr(ai->ai_addr, first, sizeof first);
    }
    if (iface_source(b, ai->ai_family, &src, &why) < 0)
      continue;
    for (int i = 0; i < b->n_rdv_addrs; i++)
      seen = seen || memcmp(&b->rdv_addrs[i], ai->ai_addr, ai->ai_addrlen) == 0;
    if (!seen)
      memcpy(&b->rdv_addrs[b->n_rdv_addrs++], ai->ai_addr, ai->ai_addrlen);
  }
  uv_freeaddrinfo(req.addrinfo);
  if (first_family == AF_UNSPEC) {
    set_fatal(b, CRNET_EINVAL, "the rendezvous host '%s' has no IP address",
              s->rdv_host);
    return CRNET_EINVAL;
  }
  if (b->n_rdv_addrs == 0) {
    iface_source(b, first_family, &src, &why);
    set_fatal(b, CRNET_EINVAL, "CRNET_IFACE=%s: %s (the rendezvous at %s is %s)",
              s->iface, why, first, crnet__family_name(first_family));
    return CRNET_EINVAL;
  }
  return 0;
}

/* Makes addrs[i] the first address to try. */
static void try_first(bootstrap *b, int i) {
  struct sockaddr_storage a = b->rdv_addrs[i];
  memmove(&b->rdv_addrs[1], &b->rdv_addrs[0], (size_t)i * sizeof a);
  b->rdv_addrs[0] = a;
}

/* Rank 0 serves the rendezvous (no crlaunch). Where it listens:
 *   - with CRNET_IFACE, on that interface's address (of the family of the
 *     rendezvous address), at the rendezvous port; the rendezvous host must
 *     then name that address (or one that leads to it, through NAT or a
 *     load balancer), and naming another address of this host is an error,
 *     since the others could never reach the server;
 *   - else on the first address of the rendezvous host that is this
 *     host's own (0.0.0.0 and :: included, which mean every interface);
 *   - else (the name is a service address that is not on any interface,
 *     as in Kubernetes) on every interface, dual stack: [::] takes IPv4
 *     clients too; 0.0.0.0 where the host has no IPv6.
 * Rank 0's own attempts start with the address it serves on. */
static int serve_rendezvous(bootstrap *b) {
  const crnet__settings *s = b->s;
  struct sockaddr_storage at;
  const struct sockaddr *first = (const struct sockaddr *)&b->rdv_addrs[0];
  const struct sockaddr *src;
  const char *why;
  char where[64], reason[128], name[300];
  int rc, local = -1;
  rdv_name(b, name, sizeof name);
  if (iface_source(b, first->sa_family, &src, &why) > 0) {
    char ip[64];
    memcpy(&at, src, sizeof at);
    crnet__addr_set_port(&at, s->rdv_port);
    if (!crnet__addr_is_any(first) && !crnet__addr_same_ip(first, src) &&
        crnet__addr_is_local(first)) {
      uv_ip_name(src, ip, sizeof ip);
      crnet__format_sockaddr(first, where, sizeof where);
      set_fatal(b, CRNET_EINVAL,
                "CRNET_IFACE=%s selects %s, but rank 0 is to serve the "
                "rendezvous at %s, another address of this host: make "
                "CRNET_RENDEZVOUS name an address of CRNET_IFACE",
                s->iface, ip, where);
      return CRNET_EINVAL;
    }
    b->rdv_addrs[0] = at;
    b->n_rdv_addrs = 1;
  } else {
    for (int i = 0; i < b->n_rdv_addrs && local < 0; i++)
      if (crnet__addr_is_local((const struct sockaddr *)&b->rdv_addrs[i]))
        local = i;
    if (local >= 0) {
      at = b->rdv_addrs[local];
      try_first(b, local);
    } else {
      crnet__debug("the rendezvous host %s is not an address of this host: "
                   "serving it on every interface",
                   name);
      uv_ip6_addr("::", s->rdv_port, (struct sockaddr_in6 *)&at);
      if (!crnet__addr_is_local((const struct sockaddr *)&at))
        uv_ip4_addr("0.0.0.0", s->rdv_port, (struct sockaddr_in *)&at);
    }
  }
  rc = crnet__rendezvous_server_listen(
      &b->server, &b->c->w->loop, b->c->w->key, b->c->size,
      (const struct sockaddr *)&at, s->init_timeout, s->handshake,
      on_server_done, b, reason, sizeof reason);
  if (rc != 0) {
    b->server = NULL;
    crnet__format_sockaddr((const struct sockaddr *)&at, where, sizeof where);
    set_fatal(b, rc, "rank 0 cannot serve the rendezvous at %s: %s", where,
              rc == CRNET_EIO ? reason : crnet_strerror(rc));
  }
  return rc;
}

/* --- published rendezvous (a directory: directory.h) ---------------------- */

/* Listens at `at` for the rendezvous, at a port of CRNET_PORT_RANGE or any
 * port. 0, or a code with the reason set as fatal. */
static int listen_published(bootstrap *b, struct sockaddr_storage *at) {
  const crnet__settings *s = b->s;
  char reason[128] = "", where[64];
  int rc = CRNET_EIO;
  int lo = s->port_lo != 0 ? s->port_lo : 0;
  int hi = s->port_lo != 0 ? s->port_hi : 0;
  for (int port = lo; port <= hi && rc != 0; port++) {
    crnet__addr_set_port(at, port);
    rc = crnet__rendezvous_server_listen(
        &b->server, &b->c->w->loop, b->c->w->key, b->c->size,
        (const struct sockaddr *)at, s->init_timeout, s->handshake,
        on_server_done, b, reason, sizeof reason);
    if (rc != 0)
      b->server = NULL;
  }
  if (rc != 0) {
    crnet__addr_set_port(at, lo);
    crnet__format_sockaddr((const struct sockaddr *)at, where, sizeof where);
    set_fatal(b, rc, "rank 0 cannot serve the rendezvous at %s%s: %s", where,
              hi > lo ? " (nor at any other port of CRNET_PORT_RANGE)" : "",
              rc == CRNET_EIO ? reason : crnet_strerror(rc));
    return rc;
  }
  crnet__addr_set_port(at, crnet__rendezvous_server_port(b->server));
  return 0;
}

/* Adds addr (with `port`) to b->rdv_addrs and to the list text, unless it
 * is there already or either is full. */
static void add_published(bootstrap *b, const struct sockaddr *addr, int port,
                          char *list, size_t n) {
  struct sockaddr_storage a;
  char text[64];
  size_t used = strlen(list);
  memset(&a, 0, sizeof a);
  memcpy(&a, addr,
         addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                     : sizeof(struct sockaddr_in));
  crnet__addr_set_port(&a, port);
  for (int i = 0; i < b->n_rdv_addrs; i++)
    if (crnet__addr_same_ip((const struct sockaddr *)&b->rdv_addrs[i],
                            (const struct sockaddr *)&a))
      return;
  crnet__format_sockaddr((const struct sockaddr *)&a, text, sizeof text);
  if (b->n_rdv_addrs == MAX_RENDEZVOUS_ADDRS || used + strlen(text) + 2 > n)
    return;
  b->rdv_addrs[b->n_rdv_addrs++] = a;
  snprintf(list + used, n - used, "%s%s", used > 0 ? "," : "", text);
}

/* Rank 0: serves the rendezvous and fills b->rdv_addrs and `list` with the
 * addresses the others are to try, in order. On CRNET_IFACE's address
 * where it is set; else on every interface, listing this host's addresses:
 * IPv4 ones first, then global IPv6 ones, then loopback last (a job on one
 * host with no other interface). Rank 0 goes through the list too, so its
 * own rendezvous connection, and with it the address its mesh listener
 * binds (step 2), is the one the others reach. */
static int serve_published(bootstrap *b, char *list, size_t n) {
  struct sockaddr_storage at;
  const struct sockaddr *src;
  const char *why;
  uv_interface_address_t *ifs = NULL;
  int nifs = 0, port;
  list[0] = '\0';
  memset(&at, 0, sizeof at);
  if (iface_source(b, AF_INET, &src, &why) > 0 ||
      iface_source(b, AF_INET6, &src, &why) > 0) {
    memcpy(&at, src, sizeof at);
    if (listen_published(b, &at) != 0)
      return b->fatal;
    add_published(b, (const struct sockaddr *)&at,
                  crnet__addr_port((const struct sockaddr *)&at), list, n);
    return 0;
  }
  if (b->s->iface[0] != '\0') {
    set_fatal(b, CRNET_EINVAL, "CRNET_IFACE=%s: %s", b->s->iface, why);
    return b->fatal;
  }
  /* [::] takes IPv4 clients too; 0.0.0.0 where the host has no IPv6. */
  uv_ip6_addr("::", 0, (struct sockaddr_in6 *)&at);
  if (!crnet__addr_is_local((const struct sockaddr *)&at))
    uv_ip4_addr("0.0.0.0", 0, (struct sockaddr_in *)&at);
  if (listen_published(b, &at) != 0)
    return b->fatal;
  port = crnet__addr_port((const struct sockaddr *)&at);
  if (uv_interface_addresses(&ifs, &nifs) != 0)
    nifs = 0;
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < nifs; i++) {
      const struct sockaddr *a = (const struct sockaddr *)&ifs[i].address;
      bool v6 = a->sa_family == AF_INET6;
      if (pass == 2 ? !ifs[i].is_internal
                    : ifs[i].is_internal || v6 != (pass == 1))
        continue;
      if (v6 &&
          IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)a)->sin6_addr))
        continue; /* needs an interface index the others do not share */
      if (v6 && at.ss_family != AF_INET6)
        continue;
      add_published(b, a, port, list, n);
    }
  uv_free_interface_addresses(ifs, nifs);
  if (b->n_rdv_addrs == 0) {
    struct sockaddr_storage lo;
    uv_ip4_addr("127.0.0.1", port, (struct sockaddr_in *)&lo);
    add_published(b, (const struct sockaddr *)&lo, port, list, n);
  }
  return 0;
}

/* The others: the list rank 0 published, "ip:port,[v6]:port,...", into
 * b->rdv_addrs. 0, or CRNET_EIO set as fatal. */
static int parse_published(bootstrap *b, const char *list) {
  const char *p = list;
  while (*p != '\0' && b->n_rdv_addrs < MAX_RENDEZVOUS_ADDRS) {
    char item[80], host[64];
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    int port;
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    if (len == 0 || len >= sizeof item)
      break;
    memcpy(item, p, len);
    item[len] = '\0';
    if (crnet__settings_host_port(item, host, sizeof host, &port) != 0 ||
        (uv_ip4_addr(host, port, (struct sockaddr_in *)&a) != 0 &&
         uv_ip6_addr(host, port, (struct sockaddr_in6 *)&a) != 0))
      break;
    b->rdv_addrs[b->n_rdv_addrs++] = a;
    p += len + (end != NULL);
  }
  if (b->n_rdv_addrs == 0 ||
      (*p != '\0' && b->n_rdv_addrs < MAX_RENDEZVOUS_ADDRS)) {
    set_fatal(b, CRNET_EIO,
              "the rendezvous rank 0 published through %s is not a list of "
              "addresses: '%.100s'",
              b->s->directory.name, list);
    return CRNET_EIO;
  }
  return 0;
}

/* Through the directory: rank 0 makes and publishes the job key (unless
 * the job has one) and serves and publishes the rendezvous (unless
 * CRNET_RENDEZVOUS names it); every rank fences; the others look up what
 * was published. 0, or a code set as fatal. */
static int share_through_directory(bootstrap *b) {
  const crnet__settings *s = b->s;
  const crnet__directory *d = &s->directory;
  char list[CRNET__DIR_VALUE_MAX], hex[2 * CRNET__KEY_BYTES + 1];
  char why[256] = "";
  int rc = 0;
  list[0] = '\0';
  if (b->c->rank == 0) {
    if (s->publish_key) {
      randombytes_buf(b->c->w->key, CRNET__KEY_BYTES);
      sodium_bin2hex(hex, sizeof hex, b->c->w->key, CRNET__KEY_BYTES);
      rc = d->publish(d->ctx, CRNET__DIR_KEY, hex, why, sizeof why);
      sodium_memzero(hex, sizeof hex);
    }
    if (rc == 0 && s->publish_rdv) {
      if (serve_published(b, list, sizeof list) != 0)
        return b->fatal;
      rc = d->publish(d->ctx, CRNET__DIR_RENDEZVOUS, list, why, sizeof why);
    }
  }
  if (rc == 0 && d->fence != NULL)
    rc = d->fence(d->ctx, s->init_timeout, why, sizeof why);
  if (rc == 0 && b->c->rank != 0 && s->publish_key) {
    rc = d->lookup(d->ctx, CRNET__DIR_KEY, hex, sizeof hex, s->init_timeout,
                   why, sizeof why);
    if (rc == 0 && crnet__key_parse_hex(hex, b->c->w->key) != 0) {
      snprintf(why, sizeof why,
               "the job key rank 0 published through %s is not 64 hex "
               "digits",
               d->name);
      rc = CRNET_EIO;
    }
    sodium_memzero(hex, sizeof hex);
  }
  if (rc == 0 && b->c->rank != 0 && s->publish_rdv) {
    rc = d->lookup(d->ctx, CRNET__DIR_RENDEZVOUS, list, sizeof list,
                   s->init_timeout, why, sizeof why);
    if (rc == 0 && parse_published(b, list) != 0)
      return b->fatal;
  }
  if (rc != 0) {
    set_fatal(b, rc, "%s", why);
    return rc;
  }
  if (s->publish_rdv)
    snprintf(b->rdv_label, sizeof b->rdv_label, "%s (published through %s)",
             list, d->name);
  return 0;
}

int crnet__bootstrap(crnet_comm *c, const crnet__settings *s, char *err,
                     size_t errlen) {
  bootstrap b;
  uint64_t timeout_ms = (uint64_t)(s->init_timeout * 1000.0);
  char missing[256];
  int rc;

  memset(&b, 0, sizeof b);
  b.c = c;
  c->w->boot = &b;
  b.s = s;
  b.retry_ms = RETRY_MIN_MS;
  uv_update_time(&c->w->loop);
  b.deadline = uv_now(&c->w->loop) + timeout_ms;
  uv_timer_init(&c->w->loop, &b.retry);
  b.retry.data = &b;
  b.outstanding_handles = 1;

  b.retry_peer =
      crnet__calloc((size_t)c->size * CRNET__MAX_STREAMS, sizeof *b.retry_peer);
  if (b.retry_peer == NULL) {
    set_fatal(&b, CRNET_ENOMEM, "out of memory");
    goto done;
  }
  if (s->have_directory && share_through_directory(&b) != 0)
    goto done;
  if (!s->publish_rdv && resolve_rendezvous(&b) != 0)
    goto done;
  if (!s->publish_rdv && s->serve_rendezvous && serve_rendezvous(&b) != 0)
    goto done;

  start_rdv_attempt(&b);
  rc = crnet__comm_run_until(c, phase_rdv_done, &b, timeout_ms);
  if (rc != 0 && b.fatal == 0 && !b.rdv_reached) {
    /* Nothing ever answered: no verdict can come either. */
    const char *pending = pending_attempt(&b);
    char name[300];
    rdv_name(&b, name, sizeof name);
    set_fatal(&b, CRNET_ETIMEDOUT,
              "cannot reach the rendezvous at %s within %g s: %s%s%s", name,
              s->init_timeout, pending != NULL ? pending : "",
              pending != NULL && b.rdv_last_err[0] ? "; earlier: " : "",
              b.rdv_last_err[0] ? b.rdv_last_err
                                : pending != NULL ? "" : "no attempt made");
  }
  /* The server's own timeout is the init timeout too; waiting a little
   * longer lets its verdict, which names the missing ranks, arrive first. */
  if (rc != 0 && b.fatal == 0 &&
      crnet__comm_run_until(c, phase_rdv_done, &b,
                            RENDEZVOUS_VERDICT_GRACE_MS) != 0 &&
      b.fatal == 0) {
    char name[300];
    rdv_name(&b, name, sizeof name);
    set_fatal(&b, CRNET_ETIMEDOUT,
              "no answer from the rendezvous at %s within %g s", name,
              s->init_timeout);
  }
  if (b.fatal != 0)
    goto done;

  /* With lazy links nobody connects now: links come on first use. */
  for (int j = 0; j < c->rank && b.fatal == 0 && !c->w->lazy; j++)
    for (int k = 0; k < (int)c->w->streams && b.fatal == 0; k++)
      connect_peer(&b, j, k);
  {
    uint64_t now = uv_now(&c->w->loop);
    uint64_t left = b.deadline > now ? b.deadline - now : 1;
    if (crnet__comm_run_until(c, phase_mesh_done, &b, left) != 0 &&
        b.fatal == 0) {
      list_missing(&b, missing, sizeof missing);
      set_fatal(&b, CRNET_ETIMEDOUT,
                "rank %d has no link to rank(s) %s after %g s", c->rank,
                missing, s->init_timeout);
    }
  }

done:
  /* Tear down what only the bootstrap needed, and wait until libuv lets go
   * of it, since it lives in this stack frame. */
  uv_close((uv_handle_t *)&b.retry, on_handle_closed);
  if (c->w->listener_open && (c->w->lazy || c->w->size > c->w->world_size) &&
      b.fatal == 0 && c->err == 0) {
    /* Lazy links, or room for restarted ranks (which connect when they
     * join): the listener stays for the comm's life (lazy.c closes it), so
     * the bootstrap no longer waits for it. */
    b.outstanding_handles--;
  } else if (c->w->listener_open) {
    uv_close((uv_handle_t *)&c->w->listener, on_listener_closed);
  }
  uv_walk(&c->w->loop, drop_unauthenticated, NULL);
  if (b.rdv != NULL)
    crnet__link_close(&b.rdv->link);
  if (b.server != NULL) {
    if (!b.server_done && b.fatal == 0) {
      /* Every rank has the table (they all connected to us), so the server
       * has made its callback; this is defensive. */
      b.server_done = true;
    }
    crnet__rendezvous_server_close(b.server);
    b.server_done = true;
  }
  close_pending(&b);
  crnet__comm_run_until(c, handles_closed, &b, 0);
  c->w->boot = NULL;
  free(b.retry_peer);
  if (b.fatal != 0) {
    snprintf(err, errlen, "%s", b.err);
    return b.fatal;
  }
  return 0;
}
