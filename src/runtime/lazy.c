/* Lazy links (CRNET_LAZY_LINKS): mesh links made on first use.
 *
 * The full mesh costs every rank p - 1 connections (times CRNET_STREAMS),
 * most of which a schedule never uses: circulant and hypercube talk to
 * about 2 log2 p peers, the ring to 2. With lazy links the bootstrap ends
 * with the table of addresses, the listener stays open for the comm's life,
 * and the first exchange that names a peer (crnet__exchange_start) connects to
 * it. Expected workload: a handful of connections per rank, made during
 * the first calls; after that nothing here runs.
 *
 * Who connects. The links of a pair are always the ones the higher rank
 * opens, as in the full mesh, so there is never a duplicate to resolve and
 * both sides agree which connection carries the data:
 *   - a rank that needs a lower rank connects every stream to it (OUT);
 *   - a rank that needs a higher rank calls it: one connection (CALL_OUT)
 *     that authenticates like any other and then carries nothing; the
 *     higher rank, on accepting it (CALL_IN), connects its streams back if
 *     it has none under way. The caller closes the call once the streams
 *     have arrived.
 * Both ranks of a pair often need each other at the same moment (in most
 * schedules a rank receives from the peer it sends to, or that peer
 * receives from it). Then the higher rank's streams and the lower rank's
 * call cross; the call is simply closed unused.
 *
 * Failure (docs/RELIABILITY.md). No side ever waits without a connection
 * of its own to the rank it waits for: the higher rank waits on its OUT
 * connections, the lower one on its call. So a dead peer shows as a
 * refused connection (its listener is gone with it), a reset or EOF on the
 * call or the link, and a partitioned one as a connection nobody answers
 * within the handshake timeout (CRNET_HANDSHAKE_TIMEOUT, default 10 s,
 * which also bounds the accepting side's handshake, as in the bootstrap):
 * the waiting rank fails with CRNET_EPEER naming the peer, as with the
 * full mesh. A rank whose comm fails closes
 * its listener (so that anyone who connects later is refused at once) and
 * sends the ABORT frame on its calls too, so a rank blocked waiting for it
 * learns the original reason. The ABORT relay reaches every rank linked to
 * a failed one, and from there every rank linked to those: the links the
 * collectives made.
 *
 * A connection whose peer process is alive but does not answer the
 * handshake in time (its kernel accepted it, but it is busy between calls,
 * outside crnet) is tried again: that peer is not lost. Its listener will
 * drop the stale attempts with a log line once it runs again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "log.h"
#include "netaddr.h"

#define LINGER_MS 1000
/* crnet__lazy_resume renews deadlines only when the loop has not run for
 * this long. */
#define LAZY_RESUME_GAP_MS 500

static const crnet__link_callbacks loose_callbacks;

static size_t slot_index(const crnet_comm *c, int r, int k) {
  return (size_t)r * c->w->streams + (size_t)k;
}

bool crnet__lazy_linked(const crnet_comm *c, int r) {
  for (uint32_t k = 0; k < c->w->streams; k++)
    if (c->w->peers[slot_index(c, r, (int)k)] == NULL)
      return false;
  return true;
}

static void loose_add(crnet_comm *c, crnet__peer *p) {
  p->loose_prev = NULL;
  p->loose_next = c->w->loose;
  if (c->w->loose != NULL)
    c->w->loose->loose_prev = p;
  c->w->loose = p;
}

static void loose_remove(crnet_comm *c, crnet__peer *p) {
  if (p->loose_prev != NULL)
    p->loose_prev->loose_next = p->loose_next;
  else if (c->w->loose == p)
    c->w->loose = p->loose_next;
  if (p->loose_next != NULL)
    p->loose_next->loose_prev = p->loose_prev;
  p->loose_prev = p->loose_next = NULL;
}

static crnet__peer *new_loose(crnet_comm *c, uint8_t role, int rank,
                              int stream) {
  crnet__peer *p = crnet__calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  p->comm = c;
  p->role = role;
  p->rank = rank;
  p->stream = (uint8_t)stream;
  c->w->open_peers++;
  loose_add(c, p);
  return p;
}

/* Forgets p as the connection under way to its rank (it failed, closed, or
 * became a link), so that a later need starts another. */
static void detach(crnet_comm *c, crnet__peer *p) {
  if (p->role == CRNET__PEER_OUT &&
      c->w->connecting[slot_index(c, p->rank, p->stream)] == p)
    c->w->connecting[slot_index(c, p->rank, p->stream)] = NULL;
  if (p->role == CRNET__PEER_CALL_OUT && c->w->calling[p->rank] == p)
    c->w->calling[p->rank] = NULL;
}

static uint8_t encrypt_mode(const crnet_comm *c) {
  return c->w->encrypt ? CRNET__HS_ENCRYPT : CRNET__HS_PLAIN;
}

static void start_connect(crnet_comm *c, int r, uint8_t role, int k) {
  struct sockaddr_storage ss, src;
  const struct sockaddr *from = NULL;
  char why[128];
  crnet__peer *p;
  if (crnet__entry_to_sockaddr(&c->w->table[r], &ss) != 0) {
    crnet__world_fail_peer(c->w, r, CRNET_EIO,
                           "rank %d registered an unusable address", r);
    return;
  }
  if (c->w->iface[0] != '\0') {
    if (crnet__iface_address(c->w->iface, ss.ss_family, &src, why, sizeof why) !=
        0) {
      crnet__world_fail_peer(c->w, r, CRNET_EINVAL, "CRNET_IFACE=%s: %s (to reach "
                       "rank %d)", c->w->iface, why, r);
      return;
    }
    from = (const struct sockaddr *)&src;
  }
  p = new_loose(c, role, r, k);
  if (p == NULL) {
    crnet__world_fail_peer(c->w, r, CRNET_ENOMEM, "out of memory");
    return;
  }
  if (role == CRNET__PEER_OUT)
    c->w->connecting[slot_index(c, r, k)] = p;
  else
    c->w->calling[r] = p;
  /* The loop's clock stood still while the program computed between
   * calls; the handshake deadline counts from now. */
  uv_update_time(&c->w->loop);
  if (crnet__link_connect_from(&p->link, &c->w->loop, (struct sockaddr *)&ss,
                               from, &loose_callbacks, c, c->w->key,
                               CRNET__HS_MESH, c->rank, r, c->w->size,
                               c->w->handshake_ms) != 0) {
    /* The link closes itself and loose_closed forgets it. */
    crnet__world_lost(c->w, r, p->link.why);
    return;
  }
  crnet__link_set_streams(&p->link, (uint8_t)k, (uint8_t)c->w->streams);
  crnet__link_set_encrypt(&p->link, encrypt_mode(c));
  /* Known before the handshake, for messages about a failed attempt. */
  p->link.peer = r;
  p->link.stream = (uint8_t)k;
  crnet__debug("%s rank %d stream %d", role == CRNET__PEER_OUT
                                           ? "connecting to"
                                           : "calling", r, k);
}

void crnet__lazy_want(crnet_comm *c, int r) {
  if (!c->w->lazy || r < 0 || r >= c->w->size || r == c->rank ||
      c->w->torn_down || crnet__lazy_linked(c, r) ||
      (c->w->lost != NULL && c->w->lost[r]))
    return;
  if (c->rank > r) {
    for (int k = 0; k < (int)c->w->streams && !c->w->torn_down; k++) {
      size_t i = slot_index(c, r, k);
      if (c->w->peers[i] == NULL && c->w->connecting[i] == NULL)
        start_connect(c, r, CRNET__PEER_OUT, k);
    }
  } else if (c->w->calling[r] == NULL) {
    start_connect(c, r, CRNET__PEER_CALL_OUT, 0);
  }
}

/* Puts a ready connection into c->w->peers as stream `k` to rank r. */
static void install(crnet_comm *c, crnet__peer *p, int r, int k) {
  detach(c, p);
  loose_remove(c, p);
  p->role = CRNET__PEER_DATA;
  p->link.cb = &crnet__peer_callbacks;
  c->w->peers[slot_index(c, r, k)] = p;
  c->w->links_opened++;
  crnet__comm_link_settings(c, &p->link);
  crnet__debug("link to rank %d stream %d up (%s, cipher %s)", r, k,
               p->link.addr, crnet__cipher_name(p->link.cipher));
  /* Comms that failed and still need their links (a lost rank in survive
   * mode, a revoke) tell r, which may be waiting in one of them. */
  crnet__world_tell_new_link(c->w, &p->link);
  /* Our call to r, if any, has done its work. One still in its handshake
   * is closed when that ends (outgoing_ready), so that r reads its end
   * whole instead of a connection cut midway. */
  if (c->w->calling != NULL && crnet__lazy_linked(c, r) &&
      c->w->calling[r] != NULL) {
    crnet__peer *call = c->w->calling[r];
    if (call->link.state == CRNET__LINK_READY) {
      detach(c, call);
      crnet__link_close_gently(&call->link, LINGER_MS);
    }
  }
}

/* Whether a failed handshake failed in transport (the peer closed or reset
 * it, or went silent) rather than by what the peer said: the link reports
 * both as CRNET_EAUTH, and only the second is an authentication failure. */
static bool transport_failure(const char *why) {
  static const int codes[] = {UV_ECONNRESET, UV_EPIPE, UV_ETIMEDOUT,
                              UV_ECONNREFUSED, UV_ENETUNREACH,
                              UV_EHOSTUNREACH, UV_ECONNABORTED};
  if (strcmp(why, "closed during the handshake") == 0)
    return true;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (strcmp(why, uv_strerror(codes[i])) == 0)
      return true;
  return false;
}

static void outgoing_ready(crnet_comm *c, crnet__peer *p, int status) {
  crnet__link *l = &p->link;
  int r = p->rank;
  bool obsolete = p->role == CRNET__PEER_CALL_OUT && crnet__lazy_linked(c, r);
  if (status != 0) {
    detach(c, p);
    if (!c->w->torn_down && !obsolete) {
      if (status == CRNET_ETIMEDOUT && l->state == CRNET__LINK_HANDSHAKE) {
        crnet__debug("rank %d accepted but did not answer within %g s: "
                     "connecting again",
                     r, (double)c->w->handshake_ms / 1000);
        crnet__lazy_want(c, r);
      } else if (status == CRNET_EAUTH && !transport_failure(l->why)) {
        /* The peer answered but the handshake does not hold: another key,
         * another CRNET_ENCRYPT. Said as at init with the full mesh. */
        char who[160];
        crnet__describe_rank(c, r, who, sizeof who);
        crnet__world_fail_peer(c->w, r, CRNET_EAUTH,
                               "authentication with %s failed: %s",
                         who, l->why);
      } else if (status == CRNET_ETIMEDOUT) {
        char why[96];
        snprintf(why, sizeof why, "no answer to the connection within %g s",
                 (double)c->w->handshake_ms / 1000);
        crnet__world_lost(c->w, r, why);
      } else {
        crnet__world_lost(c->w, r, l->why);
      }
    }
    crnet__link_close(l);
    return;
  }
  if (c->w->torn_down) {
    detach(c, p);
    crnet__comm_tell_late_link(c, l);
    return;
  }
  if (p->role == CRNET__PEER_OUT) {
    if (c->w->peers[slot_index(c, r, p->stream)] != NULL) {
      /* Only one connection per slot is ever under way; defensive. */
      crnet__link_close(l);
      return;
    }
    install(c, p, r, p->stream);
    return;
  }
  if (obsolete) {
    detach(c, p);
    crnet__link_close_gently(l, LINGER_MS);
  }
}

static void incoming_ready(crnet_comm *c, crnet__peer *p, int status) {
  crnet__link *l = &p->link;
  int q = l->peer;
  if (status != 0) {
    crnet__log("dropped connection from %s: %s", l->addr, l->why);
    crnet__link_close(l);
    return;
  }
  if (l->purpose != CRNET__HS_MESH || q == c->rank) {
    if (l->purpose != CRNET__HS_MESH)
      crnet__log("dropped connection from %s: not a mesh connection", l->addr);
    crnet__link_close(l);
    return;
  }
  if (c->w->torn_down) {
    detach(c, p);
    crnet__comm_tell_late_link(c, l);
    return;
  }
  /* A rank lost is lost for good (a process the others gave up on, or a
   * replay); without lazy links only restarted ranks connect after the
   * bootstrap (join.c), each from a slot above the world's. */
  if ((c->w->lost != NULL && c->w->lost[q]) ||
      (!c->w->lazy && q < c->w->world_size)) {
    crnet__log("dropped connection from %s: rank %d %s", l->addr, q,
               c->w->lost != NULL && c->w->lost[q] ? "was lost"
                                                   : "is connected already");
    crnet__link_close(l);
    return;
  }
  if (q > c->rank) {
    if (l->stream >= c->w->streams ||
        c->w->peers[slot_index(c, q, l->stream)] != NULL) {
      crnet__log("dropped connection from %s: rank %d is connected already",
                 l->addr, q);
      crnet__link_close(l);
      return;
    }
    install(c, p, q, l->stream);
    return;
  }
  /* A lower rank needs us: connect back, unless that is under way or
   * done. The call stays open until the caller closes it; it carries
   * nothing but, if we fail, our ABORT. */
  p->role = CRNET__PEER_CALL_IN;
  p->rank = q;
  crnet__debug("rank %d called", q);
  crnet__lazy_want(c, q);
}

static void loose_ready(crnet__link *l, int status) {
  crnet__peer *p = (crnet__peer *)l;
  if (p->role == CRNET__PEER_IN)
    incoming_ready(p->comm, p, status);
  else
    outgoing_ready(p->comm, p, status);
}

/* Only calls are ready and loose; what they may carry is an ABORT. */
static void loose_control(crnet__link *l, const crnet__frame_header *h,
                          const uint8_t *payload) {
  crnet__peer_callbacks.on_control(l, h, payload);
}

static void loose_error(crnet__link *l, int status, const char *why) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  (void)status;
  /* Our call is how we would learn that the higher rank is gone while we
   * wait for its links; once they are here it does not matter. */
  if (p->role == CRNET__PEER_CALL_OUT && !c->w->torn_down &&
      !crnet__lazy_linked(c, p->rank))
    crnet__world_lost(c->w, p->rank, why);
  detach(c, p);
  crnet__link_close(l);
}

static void loose_closed(crnet__link *l) {
  crnet__peer *p = (crnet__peer *)l;
  crnet_comm *c = p->comm;
  detach(c, p);
  loose_remove(c, p);
  c->w->open_peers--;
  free(p);
}

static const crnet__link_callbacks loose_callbacks = {
    .on_ready = loose_ready,
    .on_control = loose_control,
    .on_error = loose_error,
    .on_closed = loose_closed,
};

void crnet__lazy_accept(crnet_comm *c) {
  crnet__peer *p = new_loose(c, CRNET__PEER_IN, -1, 0);
  if (p == NULL)
    return;
  uv_update_time(&c->w->loop);
  /* On failure the link closes itself and loose_closed frees p. */
  crnet__link_accept(&p->link, &c->w->loop, (uv_stream_t *)&c->w->listener,
                     &loose_callbacks, c, c->w->key, c->rank, c->w->size,
                     c->w->handshake_ms);
  crnet__link_set_streams(&p->link, 0, (uint8_t)c->w->streams);
  crnet__link_set_encrypt(&p->link, encrypt_mode(c));
}

void crnet__lazy_resume(crnet_comm *c) {
  uv_update_time(&c->w->loop);
  /* Only after a real absence: a program that tests a request every
   * millisecond must not keep pushing the deadline of a connection nobody
   * answers (a partitioned peer) out of reach. */
  if (uv_now(&c->w->loop) - c->w->loop_seen_ms < LAZY_RESUME_GAP_MS)
    return;
  for (crnet__peer *p = c->w->loose; p != NULL; p = p->loose_next)
    crnet__link_renew_deadline(&p->link, c->w->handshake_ms);
}

static void listener_closed(uv_handle_t *h) {
  crnet_comm *c = h->data;
  c->w->listener_open = false;
}

void crnet__lazy_close_all(crnet_comm *c, const void *abort_msg,
                           size_t abort_len) {
  if (c->w->listener_open && c->w->boot == NULL &&
      !uv_is_closing((uv_handle_t *)&c->w->listener))
    uv_close((uv_handle_t *)&c->w->listener, listener_closed);
  for (crnet__peer *p = c->w->loose, *next; p != NULL; p = next) {
    next = p->loose_next;
    detach(c, p);
    if (p->link.state == CRNET__LINK_READY && !p->link.failed &&
        crnet__link_flushed(&p->link)) {
      if (abort_msg != NULL)
        crnet__link_send_control(&p->link, CRNET__FRAME_ABORT, abort_msg,
                                 abort_len);
      crnet__link_close_gently(&p->link, LINGER_MS);
    } else {
      /* In its handshake: nothing to say on it yet. */
      crnet__link_close(&p->link);
    }
  }
}
