/* Point-to-point messages: crnet_send, crnet_recv and their kin. See
 * crnet.h (the contract) and docs/ARCHITECTURE.md.
 *
 * A message from job rank i to job rank j travels on stream 0 of their link
 * (every stream-0 frame from i to j in order: that is what gives MPI's
 * non-overtaking order per source). Frames (frame.h):
 *   MSG    an eager message: ctx, round = tag, length = its bytes, payload;
 *   RTS    a rendezvous: ctx, round = tag, seq = the sender's id for it,
 *          payload u64 bytes;
 *   CTS    the receive is posted: ctx, seq = the id, payload u32 flags
 *          (CTS_DROP: it does not fit, send nothing);
 *   RDATA  the rendezvous's payload: ctx, seq = the id;
 *   CREDIT eager budget given back: payload u64 bytes.
 *
 * Matching. Each comm keeps its receives posted and not matched
 * (p2p_posted) and the messages come and not received (p2p_unexp), in
 * order. A receive takes the first message that matches it, or waits at
 * the end of the posted list; a message that comes goes to the first
 * posted receive it matches, or to the end of the unexpected list. A MSG
 * whose receive is posted is read by the link straight into the program's
 * buffer (on_message); otherwise it is read whole into memory.
 *
 * Memory. A sender sends eagerly only while its eager budget towards the
 * receiver lasts (CRNET_EAGER_BUDGET bytes, a message counting its payload
 * and MSG_COST): the receiver gives the budget back as messages are
 * received (CREDIT). Past the budget, or past CRNET_EAGER_BYTES, a message
 * is announced (RTS) and its data waits at the sender for the CTS. So what
 * a receiver holds for messages it has not received is at most the budget
 * per sender, plus an announcement per message the sender has in flight.
 *
 * Everything here runs on the loop's owner: the requests' advance, and the
 * links' callbacks.
 */
#include "comm.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "link_shm.h"
#include "log.h"
#include "request.h"

/* Budget a message takes beyond its payload: what the receiver spends to
 * keep one. */
#define MSG_COST 64
/* The receiver gives budget back once this much is owed. */
#define CREDIT_RETURN (CRNET_EAGER_BUDGET / 4)
#define CTS_DROP 1u

/* P2P_SSEND starts a synchronous send: a P2P_SEND request with sync set. */
enum { P2P_SEND, P2P_RECV, P2P_PROBE, P2P_SSEND };

enum phase {
  PH_NEW,        /* not begun on the loop */
  PH_POSTED,     /* receive: on the comm's posted list */
  PH_WRITING,    /* send: its frame is being written */
  PH_AWAIT_CTS,  /* send: announced, waiting for the receive */
  PH_SELF,       /* send to this rank: waiting for the receive */
  PH_AWAIT_DATA, /* receive: matched, its payload is coming */
  PH_PROBING,    /* probe: looked once, looks again as the loop runs */
  PH_DONE,
};

typedef struct crnet__p2p_req {
  crnet_request base; /* first: the runtime's part */
  uint8_t kind, phase;
  int peer; /* comm rank; a receive's -1: any */
  int tag;  /* a receive's -1: any */
  uint8_t *buf;
  uint64_t bytes; /* a send's size; a receive's capacity */
  uint64_t id;    /* a rendezvous's id, the sender's */
  int result;
  crnet_status st;
  crnet_status *status_out;
  int *found_out; /* a probe's: whether a message matched */
  bool once;      /* a probe that gives up after its second look (iprobe) */
  bool sync;      /* a synchronous send: always announced (crnet_issend) */
  bool found;
  crnet__send_req wr;
  crnet__iov iov;
  crnet__recv_req lr;
  struct crnet__p2p_msg *self_msg; /* a send to self, while unexpected */
  struct crnet__p2p_req *next;     /* posted list; a peer's lists */
  char why[192];
} p2p_req;

/* A message come and not received. */
typedef struct crnet__p2p_msg {
  struct crnet__p2p_msg *next;
  uint32_t ctx;
  int src;  /* job rank */
  int tag;
  uint64_t bytes;
  uint64_t id;
  bool rts;          /* an announcement: the data is at the sender */
  uint8_t *payload;  /* eager: its bytes */
  p2p_req *self_send; /* a send to this rank, its data in place */
} p2p_msg;

typedef struct crnet__p2p_peer {
  uint64_t credit; /* eager budget left towards this peer */
  uint64_t owed;   /* budget to give back to it */
  uint64_t next_id;
  p2p_req *await_cts; /* our sends waiting for its CTS */
  p2p_req *rdata;     /* our receives waiting for its RDATA, in CTS order */
  p2p_req *rdata_tail;
  uint32_t drop; /* MSG frames of it to drop as they come (truncated) */
} p2p_peer;

/* --- helpers --------------------------------------------------------------- */

static p2p_peer *peer_of(crnet__world *w, int j) {
  if (w->p2p_peers == NULL) {
    w->p2p_peers = crnet__calloc((size_t)w->size, sizeof *w->p2p_peers);
    if (w->p2p_peers == NULL)
      return NULL;
    for (int i = 0; i < w->size; i++)
      w->p2p_peers[i].credit = CRNET_EAGER_BUDGET;
  }
  return &w->p2p_peers[j];
}

/* Stream 0 to job rank j, if it can carry frames now; NULL if not (yet):
 * lazy links are asked for, a link gone fails the comms that have j. */
static crnet__link *link_to(crnet_comm *c, int j, bool *gone) {
  crnet__world *w = c->w;
  crnet__peer *p;
  *gone = false;
  if (w->lazy && !crnet__lazy_linked(w->comms[0], j)) {
    crnet__lazy_want(w->comms[0], j);
    return NULL;
  }
  p = *crnet__comm_link(c, j, 0);
  if (p != NULL && !p->closed && !p->link.failed &&
      p->link.state == CRNET__LINK_READY)
    return &p->link;
  *gone = true;
  return NULL;
}

/* Stream 0 to job rank j failed a write and is still reading what j sent
 * last (crnet__link_write_failed): it fails within a grace period. */
static bool link_failing(crnet_comm *c, int j) {
  const crnet__peer *p = *crnet__comm_link(c, j, 0);
  return p != NULL && crnet__link_failing(&p->link);
}

/* Job rank j said goodbye (crnet_comm_destroy of its world comm): it sends
 * nothing more. */
static bool peer_left(crnet_comm *c, int j) {
  const crnet__peer *p = *crnet__comm_link(c, j, 0);
  return p != NULL && p->got_bye;
}

static bool matches(const p2p_req *q, int src, int tag) {
  return (q->peer == CRNET_ANY_SOURCE || q->peer == src) &&
         (q->tag == CRNET_ANY_TAG || q->tag == tag);
}

static void dirty(crnet__world *w) { w->progress_dirty = true; }

static void set_status(p2p_req *q, int src, int tag, uint64_t bytes) {
  q->st.source = src;
  q->st.tag = tag;
  q->st.bytes = (size_t)bytes;
}

static void truncated(p2p_req *q, uint64_t bytes) {
  q->result = CRNET_ETRUNCATE;
  snprintf(q->why, sizeof q->why,
           "crnet_recv: the message from rank %d (tag %d) has %" PRIu64
           " bytes, more than the %" PRIu64 " of the receive buffer; it was "
           "dropped",
           q->st.source, q->st.tag, bytes, q->bytes);
}

/* Budget for a message of `bytes` from job rank j has been spent by a
 * receive: given back in batches. */
static void give_back(crnet_comm *c, int j, uint64_t bytes) {
  p2p_peer *pe = peer_of(c->w, j);
  bool gone;
  crnet__link *l;
  uint8_t amount[8];
  if (pe == NULL || j == c->w->rank)
    return;
  pe->owed += bytes + MSG_COST;
  if (pe->owed < CREDIT_RETURN || (l = link_to(c, j, &gone)) == NULL)
    return;
  crnet__put_le64(amount, pe->owed);
  if (crnet__link_send_control(l, CRNET__FRAME_CREDIT, amount, 8) == 0)
    pe->owed = 0;
}

static void send_cts(crnet_comm *c, int j, uint64_t id, uint32_t flags) {
  crnet__frame_header h = {.kind = CRNET__FRAME_CTS, .ctx = c->ctx, .seq = id,
                           .length = 4};
  uint8_t payload[4];
  bool gone;
  crnet__link *l = link_to(c, j, &gone);
  crnet__put_le32(payload, flags);
  if (l != NULL)
    crnet__link_send_control_hdr(l, &h, payload);
}

static void unlink_req(p2p_req **head, p2p_req **tail, p2p_req *q) {
  p2p_req *prev = NULL;
  for (p2p_req *x = *head; x != NULL; prev = x, x = x->next)
    if (x == q) {
      if (prev != NULL)
        prev->next = q->next;
      else
        *head = q->next;
      if (tail != NULL && *tail == q)
        *tail = prev;
      q->next = NULL;
      return;
    }
}

static void append_msg(crnet_comm *c, p2p_msg *m) {
  m->next = NULL;
  if (c->p2p_unexp_tail != NULL)
    c->p2p_unexp_tail->next = m;
  else
    c->p2p_unexp = m;
  c->p2p_unexp_tail = m;
}

static void free_msg(p2p_msg *m) {
  free(m->payload);
  free(m);
}

/* --- a receive meets its message ------------------------------------------ */

/* q's link receive of `bytes` straight into its buffer, for the frame of
 * comm ctx numbered seq (its other header fields are the caller's). */
static void arm_receive(p2p_req *q, uint64_t bytes, uint32_t ctx,
                        uint64_t seq) {
  q->iov.base = q->buf;
  q->iov.len = bytes;
  memset(&q->lr, 0, sizeof q->lr);
  q->lr.iov = &q->iov;
  q->lr.niov = 1;
  q->lr.len = bytes;
  q->lr.ctx = ctx;
  q->lr.seq = seq;
}

/* Receive q takes message m (taken off the unexpected list by the caller). */
static void take_msg(crnet_comm *c, p2p_req *q, p2p_msg *m) {
  int src = crnet__local_rank(c, m->src);
  set_status(q, src, m->tag, m->bytes);
  if (m->self_send != NULL) {
    /* A send to this rank: copied from the sender's buffer, and both are
     * done. */
    p2p_req *s = m->self_send;
    if (m->bytes > q->bytes)
      truncated(q, m->bytes);
    else if (m->bytes > 0)
      memcpy(q->buf, s->buf, m->bytes);
    s->self_msg = NULL;
    s->phase = PH_DONE;
    q->phase = PH_DONE;
  } else if (!m->rts) {
    if (m->bytes > q->bytes)
      truncated(q, m->bytes);
    else if (m->bytes > 0)
      memcpy(q->buf, m->payload, m->bytes);
    give_back(c, m->src, m->bytes);
    q->phase = PH_DONE;
  } else if (m->bytes > q->bytes) {
    truncated(q, m->bytes);
    send_cts(c, m->src, m->id, CTS_DROP);
    q->phase = PH_DONE;
  } else {
    /* The data comes straight into the buffer, after our CTS. */
    p2p_peer *pe = peer_of(c->w, m->src);
    q->id = m->id;
    arm_receive(q, m->bytes, c->ctx, m->id);
    q->next = NULL;
    if (pe->rdata_tail != NULL)
      pe->rdata_tail->next = q;
    else
      pe->rdata = q;
    pe->rdata_tail = q;
    q->phase = PH_AWAIT_DATA;
    q->peer = src; /* for a failure of its sender */
    send_cts(c, m->src, m->id, 0);
  }
  free_msg(m);
  dirty(c->w);
}

/* The first unexpected message receive q matches, off the list. */
static p2p_msg *take_unexpected(crnet_comm *c, const p2p_req *q) {
  p2p_msg *prev = NULL;
  for (p2p_msg *m = c->p2p_unexp; m != NULL; prev = m, m = m->next)
    if (matches(q, crnet__local_rank(c, m->src), m->tag)) {
      if (prev != NULL)
        prev->next = m->next;
      else
        c->p2p_unexp = m->next;
      if (c->p2p_unexp_tail == m)
        c->p2p_unexp_tail = prev;
      m->next = NULL;
      return m;
    }
  return NULL;
}

/* The first posted receive a message from job rank j with tag matches,
 * off the list. */
static p2p_req *take_posted(crnet_comm *c, int j, int tag) {
  int src = crnet__local_rank(c, j);
  for (p2p_req *q = c->p2p_posted; q != NULL; q = q->next)
    if (matches(q, src, tag)) {
      unlink_req(&c->p2p_posted, &c->p2p_posted_tail, q);
      return q;
    }
  return NULL;
}

/* --- the requests ------------------------------------------------------------ */

static bool finish(p2p_req *q, int rc) {
  if (q->result == 0)
    q->result = rc;
  q->phase = PH_DONE;
  return true;
}

static bool done_now(p2p_req *q) {
  crnet_request *r = &q->base;
  r->status = q->result;
  q->st.error = q->result;
  if (q->kind == P2P_RECV && q->status_out != NULL)
    *q->status_out = q->st;
  if (q->kind == P2P_PROBE) {
    if (q->found && q->status_out != NULL)
      *q->status_out = q->st;
    if (q->found_out != NULL)
      *q->found_out = q->found;
  }
  r->why = q->result != 0 && q->why[0] != '\0' ? q->why : NULL;
  return true;
}

/* A send to this rank: to a receive posted, or kept (copied when small,
 * else in place until a receive takes it). */
static void send_to_self(crnet_comm *c, p2p_req *q) {
  p2p_req *r = take_posted(c, c->w->rank, q->tag);
  p2p_msg *m;
  if (r != NULL) {
    set_status(r, c->rank, q->tag, q->bytes);
    if (q->bytes > r->bytes)
      truncated(r, q->bytes);
    else if (q->bytes > 0)
      memcpy(r->buf, q->buf, q->bytes);
    r->phase = PH_DONE;
    q->phase = PH_DONE;
    dirty(c->w);
    return;
  }
  m = crnet__calloc(1, sizeof *m);
  if (m == NULL) {
    finish(q, CRNET_ENOMEM);
    return;
  }
  m->ctx = c->ctx;
  m->src = c->w->rank;
  m->tag = q->tag;
  m->bytes = q->bytes;
  if (q->bytes <= CRNET_EAGER_BYTES && !q->sync) {
    m->payload = crnet__malloc(q->bytes > 0 ? q->bytes : 1);
    if (m->payload == NULL) {
      free(m);
      finish(q, CRNET_ENOMEM);
      return;
    }
    memcpy(m->payload, q->buf, q->bytes);
    q->phase = PH_DONE;
  } else {
    m->self_send = q;
    q->self_msg = m;
    q->phase = PH_SELF;
  }
  append_msg(c, m);
}

static void drop_self_msg(crnet_comm *c, p2p_req *q) {
  p2p_msg *prev = NULL;
  for (p2p_msg *m = c->p2p_unexp; m != NULL; prev = m, m = m->next)
    if (m == q->self_msg) {
      if (prev != NULL)
        prev->next = m->next;
      else
        c->p2p_unexp = m->next;
      if (c->p2p_unexp_tail == m)
        c->p2p_unexp_tail = prev;
      free_msg(m);
      break;
    }
  q->self_msg = NULL;
}

static bool send_advance(crnet_request *r) {
  p2p_req *q = (p2p_req *)r;
  crnet_comm *c = r->comm;
  crnet__world *w = c->w;
  int j = crnet__world_rank(c, q->peer);
  p2p_peer *pe;
  crnet__link *l;
  bool gone;
  switch (q->phase) {
  case PH_NEW:
    if (c->err != 0)
      return finish(q, c->err) && done_now(q);
    if (j == w->rank) {
      send_to_self(c, q);
      return q->phase == PH_DONE && done_now(q);
    }
    l = link_to(c, j, &gone);
    if (l == NULL) {
      if (!gone)
        return false;
      crnet__world_fail_peer(w, j, CRNET_EPEER,
                             "rank %d has left the job (a message to it "
                             "needed it)",
                             q->peer);
      return finish(q, c->err) && done_now(q);
    }
    pe = peer_of(w, j);
    if (pe == NULL)
      return finish(q, CRNET_ENOMEM) && done_now(q);
    if (q->bytes <= CRNET_EAGER_BYTES && !q->sync &&
        pe->credit >= q->bytes + MSG_COST) {
      crnet__frame_header h = {.kind = CRNET__FRAME_MSG, .ctx = c->ctx,
                               .round = (uint32_t)q->tag,
                               .length = q->bytes};
      pe->credit -= q->bytes + MSG_COST;
      q->iov.base = q->buf;
      q->iov.len = q->bytes;
      q->phase = PH_WRITING;
      crnet__link_send(l, &q->wr, &h, &q->iov, 1);
      if (q->wr.done) /* the kernel took it whole at once */
        return finish(q, q->wr.status == 0 ? 0 : CRNET_EPEER) && done_now(q);
    } else {
      crnet__frame_header h = {.kind = CRNET__FRAME_RTS, .ctx = c->ctx,
                               .round = (uint32_t)q->tag,
                               .seq = ++pe->next_id, .length = 8};
      uint8_t payload[8];
      crnet__put_le64(payload, q->bytes);
      q->id = h.seq;
      q->next = pe->await_cts;
      pe->await_cts = q;
      q->phase = PH_AWAIT_CTS;
      if (crnet__link_send_control_hdr(l, &h, payload) != 0) {
        unlink_req(&pe->await_cts, NULL, q);
        return finish(q, CRNET_ENOMEM) && done_now(q);
      }
    }
    return false;
  case PH_WRITING:
    if (!q->wr.done)
      return false;
    if (q->wr.status != 0 && c->err == 0 && link_failing(c, j))
      return false; /* to end with the peer's reason (see link.h) */
    return finish(q, q->wr.status == 0 ? 0
                                       : c->err != 0 ? c->err : CRNET_EPEER) &&
           done_now(q);
  case PH_AWAIT_CTS:
    if (c->err == 0)
      return false;
    pe = peer_of(w, j);
    unlink_req(&pe->await_cts, NULL, q);
    return finish(q, c->err) && done_now(q);
  case PH_SELF:
    if (c->err == 0)
      return false;
    drop_self_msg(c, q);
    return finish(q, c->err) && done_now(q);
  default:
    return done_now(q);
  }
}

/* Whether receive or probe q names a rank that has left (nothing more can
 * come from it; what it sent before is on the unexpected list, and q found
 * nothing there): then the comms that have it fail, as for a send to a
 * rank that left (send_advance). */
static bool source_left(crnet_comm *c, const p2p_req *q, const char *what) {
  int j;
  if (q->peer == CRNET_ANY_SOURCE)
    return false;
  j = crnet__world_rank(c, q->peer);
  if (j == c->w->rank || !peer_left(c, j))
    return false;
  crnet__world_fail_peer(c->w, j, CRNET_EPEER,
                         "rank %d has left the job (a %s naming it was "
                         "posted after its crnet_comm_destroy)",
                         q->peer, what);
  return true;
}

/* A receive no message matched, cancelled (crnet_cancel). */
static bool cancelled(p2p_req *q) {
  snprintf(q->why, sizeof q->why,
           "the receive was cancelled (crnet_cancel) "
           "before a message matched it");
  return finish(q, CRNET_ECANCELED) && done_now(q);
}

static bool recv_advance(crnet_request *r) {
  p2p_req *q = (p2p_req *)r;
  crnet_comm *c = r->comm;
  p2p_msg *m;
  switch (q->phase) {
  case PH_NEW:
    if (c->err != 0)
      return finish(q, c->err) && done_now(q);
    if (atomic_load(&r->cancel))
      return cancelled(q);
    m = take_unexpected(c, q);
    if (m != NULL) {
      take_msg(c, q, m);
      return q->phase == PH_DONE && done_now(q);
    }
    if (source_left(c, q, "receive"))
      return finish(q, c->err) && done_now(q);
    q->next = NULL;
    if (c->p2p_posted_tail != NULL)
      c->p2p_posted_tail->next = q;
    else
      c->p2p_posted = q;
    c->p2p_posted_tail = q;
    q->phase = PH_POSTED;
    return false;
  case PH_POSTED:
    if (c->err == 0 && !atomic_load(&r->cancel))
      return false;
    unlink_req(&c->p2p_posted, &c->p2p_posted_tail, q);
    return c->err != 0 ? finish(q, c->err) && done_now(q) : cancelled(q);
  case PH_AWAIT_DATA:
    if (q->lr.done)
      return finish(q, q->lr.status == 0
                           ? 0
                           : c->err != 0 ? c->err : CRNET_EPEER) &&
             done_now(q);
    if (c->err != 0) {
      /* Its frame may be coming on the link now: the link drops the rest
       * of it (crnet__link_cancel_recv), or it never comes. */
      int j = crnet__world_rank(c, q->peer);
      p2p_peer *pe = peer_of(c->w, j);
      crnet__peer *p = *crnet__comm_link(c, j, 0);
      unlink_req(&pe->rdata, &pe->rdata_tail, q);
      if (p != NULL && !p->closed)
        crnet__link_cancel_recv(&p->link, &q->lr);
      return finish(q, c->err) && done_now(q);
    }
    return false;
  default:
    return done_now(q);
  }
}

/* The first unexpected message receive or probe q matches, left in
 * place. */
static const p2p_msg *find_unexpected(const crnet_comm *c, const p2p_req *q) {
  for (const p2p_msg *m = c->p2p_unexp; m != NULL; m = m->next)
    if (matches(q, crnet__local_rank(c, m->src), m->tag))
      return m;
  return NULL;
}

/* A probe looks at the messages come and not received, and takes none. It
 * looks when it begins and again each time the loop has run; a once-probe
 * (crnet_iprobe) gives up at its second look, so that one call lets the
 * loop read what has come in between. */
static bool probe_advance(crnet_request *r) {
  p2p_req *q = (p2p_req *)r;
  crnet_comm *c = r->comm;
  const p2p_msg *m;
  if (c->err != 0)
    return finish(q, c->err) && done_now(q);
  m = find_unexpected(c, q);
  if (m != NULL) {
    set_status(q, crnet__local_rank(c, m->src), m->tag, m->bytes);
    q->found = true;
    return finish(q, 0) && done_now(q);
  }
  if (source_left(c, q, "probe"))
    return finish(q, c->err) && done_now(q);
  if (q->phase == PH_NEW) {
    q->phase = PH_PROBING;
    if (q->once)
      dirty(c->w); /* the engine's next pass looks again */
    return false;
  }
  return q->once && finish(q, 0) && done_now(q);
}

static bool p2p_advance(crnet_request *r) {
  p2p_req *q = (p2p_req *)r;
  switch (q->kind) {
  case P2P_SEND:
    return send_advance(r);
  case P2P_RECV:
    return recv_advance(r);
  default:
    return probe_advance(r);
  }
}

/* The message's bytes in the counters of its peer (c->w->mu held). */
static void p2p_account(crnet_request *r) {
  p2p_req *q = (p2p_req *)r;
  crnet_comm *c = r->comm;
  crnet_peer_stats *ps;
  if (q->result != 0 || q->kind == P2P_PROBE)
    return;
  if (q->kind == P2P_SEND) {
    ps = &c->peer_stats[q->peer];
    ps->bytes_sent += q->bytes;
    ps->messages_sent++;
  } else {
    ps = &c->peer_stats[q->st.source];
    ps->bytes_received += q->st.bytes;
    ps->messages_received++;
  }
}

static const crnet__req_ops p2p_ops = {
    .advance = p2p_advance,
    .account = p2p_account,
    .release = NULL,
};

/* --- the links' callbacks --------------------------------------------------- */

/* The comm of ctx, or NULL: then *orphan says whether the message may be
 * of a comm this rank is still making (kept), else the peer is failed for
 * the mismatch. */
static crnet_comm *comm_of(crnet__world *w, crnet__link *l,
                           const crnet__frame_header *h) {
  crnet_comm *c = h->ctx < CRNET__MAX_CTX ? w->comms[h->ctx] : NULL;
  if (c == NULL && atomic_load(&w->splits) == 0) {
    crnet__world_fail_peer(w, (int)l->peer, CRNET_EMISMATCH,
                           "mismatched calls: rank %d sent a message on a "
                           "communicator that is not (or no longer) on rank "
                           "%d (context %" PRIu32 ")",
                           (int)l->peer, w->rank, h->ctx);
    return NULL;
  }
  if (c != NULL && crnet__local_rank(c, (int)l->peer) < 0) {
    crnet__world_fail_peer(w, (int)l->peer, CRNET_EMISMATCH,
                           "rank %d sent a message on a communicator it is "
                           "not a member of on rank %d (context %" PRIu32 ")",
                           (int)l->peer, w->rank, h->ctx);
    return NULL;
  }
  return c;
}

crnet__recv_req *crnet__p2p_on_message(crnet__link *l,
                                       const crnet__frame_header *h) {
  crnet__world *w = ((crnet__peer *)l)->comm->w;
  int j = (int)l->peer;
  p2p_peer *pe = peer_of(w, j);
  crnet_comm *c;
  p2p_req *q;
  if (pe == NULL)
    return NULL;
  if (h->kind == CRNET__FRAME_RDATA) {
    q = pe->rdata;
    if (q == NULL || q->id != h->seq || q->lr.len != h->length) {
      crnet__world_fail_peer(w, j, CRNET_EIO,
                             "rank %d sent the data of a message nobody "
                             "asked for (id %" PRIu64 ")",
                             j, h->seq);
      return NULL;
    }
    pe->rdata = q->next;
    if (pe->rdata == NULL)
      pe->rdata_tail = NULL;
    q->next = NULL;
    q->lr.round = h->round;
    q->lr.sig = h->sig;
    q->lr.coll = h->coll;
    return &q->lr;
  }
  c = h->ctx < CRNET__MAX_CTX ? w->comms[h->ctx] : NULL;
  if (c == NULL || c->err != 0 || pe->drop > 0 ||
      crnet__local_rank(c, j) < 0)
    return NULL; /* on_control decides */
  q = take_posted(c, j, (int)h->round);
  if (q == NULL)
    return NULL; /* unexpected: kept by on_control */
  set_status(q, crnet__local_rank(c, j), (int)h->round, h->length);
  give_back(c, j, h->length);
  dirty(w);
  if (h->length > q->bytes) {
    truncated(q, h->length);
    q->phase = PH_DONE;
    pe->drop++;
    return NULL;
  }
  arm_receive(q, h->length, h->ctx, h->seq);
  q->lr.coll = h->coll;
  q->lr.round = h->round;
  q->lr.sig = h->sig;
  q->peer = crnet__local_rank(c, j);
  q->phase = PH_AWAIT_DATA;
  return &q->lr;
}

/* The message a MSG (its payload copied) or an RTS frame stands for, or
 * NULL (out of memory: the comms that have the sender fail). */
static p2p_msg *msg_of_frame(crnet__world *w, crnet__link *l,
                             const crnet__frame_header *h,
                             const uint8_t *payload) {
  p2p_msg *m = crnet__calloc(1, sizeof *m);
  if (m != NULL) {
    m->ctx = h->ctx;
    m->src = (int)l->peer;
    m->tag = (int)h->round;
    if (h->kind == CRNET__FRAME_RTS) {
      m->rts = true;
      m->id = h->seq;
      m->bytes = crnet__get_le64(payload);
      return m;
    }
    m->bytes = h->length;
    m->payload = crnet__malloc(h->length > 0 ? h->length : 1);
    if (m->payload != NULL) {
      memcpy(m->payload, payload, h->length);
      return m;
    }
    free(m);
  }
  crnet__world_fail_peer(w, (int)l->peer, CRNET_ENOMEM,
                         "out of memory for a message");
  return NULL;
}

/* A MSG or RTS nobody has posted for: kept, in order (of a comm being
 * made: in the world's orphans, under mu). */
static void keep(crnet__world *w, crnet__link *l, const crnet__frame_header *h,
                 const uint8_t *payload) {
  p2p_msg *m = msg_of_frame(w, l, h, payload);
  crnet_comm *c;
  if (m == NULL)
    return;
  pthread_mutex_lock(&w->mu);
  c = w->comms[h->ctx];
  if (c == NULL) {
    p2p_msg **at = &w->p2p_orphans;
    while (*at != NULL)
      at = &(*at)->next;
    *at = m;
  }
  pthread_mutex_unlock(&w->mu);
  if (c != NULL)
    append_msg(c, m);
}

void crnet__p2p_on_control(crnet__link *l, const crnet__frame_header *h,
                           const uint8_t *payload) {
  crnet__world *w = ((crnet__peer *)l)->comm->w;
  int j = (int)l->peer;
  p2p_peer *pe = peer_of(w, j);
  crnet_comm *c;
  p2p_req *q;
  if (pe == NULL)
    return;
  switch (h->kind) {
  case CRNET__FRAME_CREDIT:
    if (h->length == 8)
      pe->credit += crnet__get_le64(payload);
    dirty(w);
    return;
  case CRNET__FRAME_CTS:
    for (q = pe->await_cts; q != NULL; q = q->next)
      if (q->id == h->seq)
        break;
    if (q == NULL || h->length != 4) {
      crnet__world_fail_peer(w, j, CRNET_EIO,
                             "rank %d answered a message never announced "
                             "(id %" PRIu64 ")",
                             j, h->seq);
      return;
    }
    unlink_req(&pe->await_cts, NULL, q);
    dirty(w);
    if (crnet__get_le32(payload) & CTS_DROP) {
      q->phase = PH_DONE; /* the receive was too small: dropped there */
      return;
    }
    {
      crnet__frame_header d = {.kind = CRNET__FRAME_RDATA,
                               .ctx = q->base.comm->ctx, .seq = q->id,
                               .length = q->bytes};
      q->iov.base = q->buf;
      q->iov.len = q->bytes;
      q->phase = PH_WRITING;
      crnet__link_send(l, &q->wr, &d, &q->iov, 1);
    }
    return;
  case CRNET__FRAME_MSG:
    if (pe->drop > 0) {
      pe->drop--; /* truncated: its receive has failed already */
      return;
    }
    /* fall through */
  case CRNET__FRAME_RTS:
    if (h->kind == CRNET__FRAME_RTS && h->length != 8) {
      crnet__world_fail_peer(w, j, CRNET_EIO,
                             "rank %d sent a malformed announcement", j);
      return;
    }
    c = comm_of(w, l, h);
    if (c == NULL) {
      if (atomic_load(&w->splits) > 0 && h->ctx < CRNET__MAX_CTX &&
          w->comms[h->ctx] == NULL)
        keep(w, l, h, payload);
      return;
    }
    if (c->err != 0)
      return; /* its comm has failed: nobody will receive it */
    q = take_posted(c, j, (int)h->round);
    if (q == NULL) {
      keep(w, l, h, payload);
      return;
    }
    {
      /* A receive posted after on_message looked (an RTS is never looked
       * at there): as if it had come unexpected. */
      p2p_msg *m = msg_of_frame(w, l, h, payload);
      if (m == NULL)
        return;
      take_msg(c, q, m);
    }
    return;
  default:
    return;
  }
}

void crnet__p2p_peer_left(crnet__world *w, int j) {
  bool pending = w->p2p_peers != NULL && w->p2p_peers[j].await_cts != NULL;
  for (uint32_t x = 0; x < CRNET__MAX_CTX && !pending; x++) {
    crnet_comm *c = w->comms[x];
    int r = c != NULL ? crnet__local_rank(c, j) : -1;
    if (r < 0)
      continue;
    for (const p2p_req *q = c->p2p_posted; q != NULL && !pending; q = q->next)
      pending = q->peer == r;
  }
  if (pending)
    crnet__world_fail_peer(w, j, CRNET_EPEER,
                           "job rank %d has left the job (crnet_comm_destroy) "
                           "while a message from it was awaited",
                           j);
}

void crnet__p2p_adopt(crnet_comm *c) {
  crnet__world *w = c->w;
  for (p2p_msg **at = &w->p2p_orphans; *at != NULL;) {
    p2p_msg *m = *at;
    if (m->ctx != c->ctx) {
      at = &m->next;
      continue;
    }
    *at = m->next;
    append_msg(c, m);
  }
}

void crnet__p2p_check_orphans(crnet__world *w) {
  int bad = -1;
  uint32_t ctx = 0;
  if (atomic_load(&w->splits) > 0)
    return;
  pthread_mutex_lock(&w->mu);
  for (p2p_msg *m = w->p2p_orphans; m != NULL; m = m->next)
    if (w->comms[m->ctx] == NULL) {
      bad = m->src;
      ctx = m->ctx;
      break;
    }
  pthread_mutex_unlock(&w->mu);
  if (bad >= 0)
    crnet__world_fail_peer(w, bad, CRNET_EMISMATCH,
                           "mismatched calls: rank %d sent a message on a "
                           "communicator that was not made on rank %d "
                           "(context %" PRIu32 ")",
                           bad, w->rank, ctx);
}

bool crnet__p2p_awaits_local(crnet__world *w) {
  for (int ctx = 0; ctx < CRNET__MAX_CTX; ctx++) {
    crnet_comm *c = w->comms[ctx];
    if (c == NULL)
      continue;
    for (p2p_req *q = c->p2p_posted; q != NULL; q = q->next)
      if (q->peer == c->rank || q->peer == CRNET_ANY_SOURCE)
        return true;
  }
  return false;
}

void crnet__p2p_comm_free(crnet_comm *c) {
  while (c->p2p_unexp != NULL) {
    p2p_msg *m = c->p2p_unexp;
    c->p2p_unexp = m->next;
    free_msg(m);
  }
  c->p2p_unexp_tail = NULL;
}

void crnet__p2p_world_free(crnet__world *w) {
  while (w->p2p_orphans != NULL) {
    p2p_msg *m = w->p2p_orphans;
    w->p2p_orphans = m->next;
    free_msg(m);
  }
  free(w->p2p_peers);
  w->p2p_peers = NULL;
}

/* --- the calls ----------------------------------------------------------------- */

static int call_error(crnet_comm *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int call_error(crnet_comm *c, int rc, const char *fmt, ...) {
  char msg[CRNET__CALLMSG];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  crnet__set_callmsg(c, "%s", msg);
  return rc;
}

/* A call's arguments: 0, or CRNET_EINVAL with the reason. */
static int check_args(crnet_comm *c, int kind, const void *buf, size_t count,
                      crnet_datatype dt, int peer, int tag, const char *what) {
  size_t es;
  if (c == NULL)
    return CRNET_EINVAL;
  es = crnet_datatype_size(dt);
  if (es == 0)
    return call_error(c, CRNET_EINVAL, "%s: datatype %d does not exist",
                      what, (int)dt);
  if (count > 0 && buf == NULL)
    return call_error(c, CRNET_EINVAL, "%s: the buffer is NULL", what);
  if (count > SIZE_MAX / es)
    return call_error(c, CRNET_EINVAL, "%s: %zu elements of %zu bytes are "
                                       "too large",
                      what, count, es);
  if (kind == P2P_SEND || kind == P2P_SSEND
          ? (peer < 0 || peer >= c->size)
          : (peer != CRNET_ANY_SOURCE && (peer < 0 || peer >= c->size)))
    return call_error(c, CRNET_EINVAL, "%s: rank %d is not a rank of the "
                                       "comm (0 to %d%s)",
                      what, peer, c->size - 1,
                      kind == P2P_RECV ? ", or CRNET_ANY_SOURCE" : "");
  if (kind == P2P_SEND || kind == P2P_SSEND
          ? tag < 0
          : (tag < 0 && tag != CRNET_ANY_TAG))
    return call_error(c, CRNET_EINVAL, "%s: tag %d is negative (tags are 0 "
                                       "to CRNET_TAG_MAX%s)",
                      what, tag,
                      kind == P2P_RECV ? ", or CRNET_ANY_TAG" : "");
  return 0;
}

/* A new request of `kind` for (peer, tag), its own part zeroed, not
 * started; NULL (the error said) out of memory. */
static p2p_req *new_req(crnet_comm *c, int kind, int peer, int tag,
                        bool blocking, const char *what) {
  p2p_req *q = (p2p_req *)crnet__req_alloc(c, sizeof *q);
  if (q == NULL) {
    call_error(c, CRNET_ENOMEM, "%s: out of memory", what);
    return NULL;
  }
  memset((uint8_t *)q + sizeof q->base, 0, sizeof *q - sizeof q->base);
  q->base.ops = &p2p_ops;
  q->base.p2p = true;
  q->base.blocking = blocking;
  q->base.call.op = -1;
  q->base.call.root = -1;
  q->kind = (uint8_t)kind;
  q->phase = PH_NEW;
  q->peer = peer;
  q->tag = tag;
  return q;
}

/* Starts q: 0 with *out, or an error with q given back. */
static int launch(crnet_comm *c, p2p_req *q, crnet_request **out) {
  int rc = crnet__req_start(c, &q->base);
  if (rc != 0) {
    crnet__req_discard(&q->base);
    return rc;
  }
  *out = &q->base;
  return 0;
}

/* Starts a checked call's request: 0 with *out, or an error with nothing
 * started. */
static int start_checked(crnet_comm *c, int kind, const void *buf,
                         size_t count, crnet_datatype dt, int peer, int tag,
                         crnet_status *status, bool blocking,
                         crnet_request **out, const char *what) {
  p2p_req *q = new_req(c, kind, peer, tag, blocking, what);
  if (q == NULL)
    return CRNET_ENOMEM;
  q->sync = kind == P2P_SSEND;
  if (q->sync)
    q->kind = P2P_SEND;
  q->buf = (uint8_t *)(uintptr_t)buf;
  q->bytes = (uint64_t)count * crnet_datatype_size(dt);
  q->status_out = status;
  q->st.source = CRNET_ANY_SOURCE;
  q->st.tag = CRNET_ANY_TAG;
  return launch(c, q, out);
}

static int start(crnet_comm *c, int kind, const void *buf, size_t count,
                 crnet_datatype dt, int peer, int tag, crnet_status *status,
                 bool blocking, crnet_request **out, const char *what) {
  int rc;
  if (c != NULL && out == NULL)
    return call_error(c, CRNET_EINVAL, "%s: the request pointer is NULL",
                      what);
  if (out != NULL)
    *out = NULL;
  rc = check_args(c, kind, buf, count, dt, peer, tag, what);
  if (rc != 0)
    return rc;
  return start_checked(c, kind, buf, count, dt, peer, tag, status, blocking,
                       out, what);
}

int crnet_isend(crnet_comm *comm, const void *buf, size_t count,
                crnet_datatype dt, int dest, int tag, crnet_request **req) {
  return start(comm, P2P_SEND, buf, count, dt, dest, tag, NULL, false, req,
               "crnet_isend");
}

int crnet_issend(crnet_comm *comm, const void *buf, size_t count,
                 crnet_datatype dt, int dest, int tag, crnet_request **req) {
  return start(comm, P2P_SSEND, buf, count, dt, dest, tag, NULL, false, req,
               "crnet_issend");
}

int crnet_ssend(crnet_comm *comm, const void *buf, size_t count,
                crnet_datatype dt, int dest, int tag) {
  crnet_request *r;
  int rc = start(comm, P2P_SSEND, buf, count, dt, dest, tag, NULL, true, &r,
                 "crnet_ssend");
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_irecv(crnet_comm *comm, void *buf, size_t count, crnet_datatype dt,
                int source, int tag, crnet_status *status,
                crnet_request **req) {
  return start(comm, P2P_RECV, buf, count, dt, source, tag, status, false,
               req, "crnet_irecv");
}

/* A probe of (source, tag): blocking, or once (crnet_iprobe). */
static int probe(crnet_comm *c, int source, int tag, int *found,
                 crnet_status *status, bool once, const char *what) {
  crnet_request *r;
  p2p_req *q;
  int rc = check_args(c, P2P_RECV, NULL, 0, CRNET_BYTE, source, tag, what);
  if (rc != 0)
    return rc;
  /* A once-probe is nonblocking: started with nobody running the loop,
   * its first look and a turn of the loop happen at once, and its wait
   * finds it complete after the second look. */
  q = new_req(c, P2P_PROBE, source, tag, !once, what);
  if (q == NULL)
    return CRNET_ENOMEM;
  q->once = once;
  q->status_out = status;
  q->found_out = found;
  rc = launch(c, q, &r);
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_probe(crnet_comm *comm, int source, int tag, crnet_status *status) {
  return probe(comm, source, tag, NULL, status, false, "crnet_probe");
}

int crnet_iprobe(crnet_comm *comm, int source, int tag, int *flag,
                 crnet_status *status) {
  if (flag == NULL)
    return comm == NULL ? CRNET_EINVAL
                        : call_error(comm, CRNET_EINVAL,
                                     "crnet_iprobe: flag is NULL");
  *flag = 0;
  return probe(comm, source, tag, flag, status, true, "crnet_iprobe");
}

/* The short cut of a small blocking send. When nothing else is in flight
 * on the comm and nobody runs its loop, a message of up to SEND_NOW_MAX
 * bytes within the peer's credit needs no request: its frame (the very
 * MSG frame the eager path writes) goes to the link at once (on shared
 * memory after a turn of the loop, see below), the payload copied, so the
 * call returns with the buffer free, as an eager send's does. Anything
 * else (a busy comm, a link not ready or failing, too little credit, a
 * send to self) takes the full path, which also says what is wrong. The
 * request's allocation, queueing, engine pass and wait cost a blocking
 * send about 1100 instructions, a third of a small round trip's own work
 * (docs/PERFORMANCE.md, "Point-to-point"). 0 sent; 1 not this way,
 * nothing done. */
#define SEND_NOW_MAX 4096

/* A small send into a shared-memory ring cannot tell that its peer has
 * gone (see send_now): every this many of them in a row make a turn of
 * the loop first, which reads the peer's ABORT or goodbye. Every one
 * cost a ping-pong about a tenth more instructions (some 450 per 8-byte
 * round trip, callgrind); every eighth costs about 60, 1.2%
 * (docs/RELIABILITY.md). With every eighth, a rank that only sends
 * learns of an abort within 8 sends when it is in the ring, within 64
 * when it comes over TCP (a full turn is every eighth, LIGHT_TURNS). */
#define SEND_NOW_BLIND_MAX 8

static int send_now(crnet_comm *c, const void *buf, uint64_t bytes, int dest,
                    int tag) {
  crnet__world *w = c->w;
  crnet__link *l;
  p2p_peer *pe;
  bool gone, sent = false;
  int j;
  if (bytes > SEND_NOW_MAX || !crnet__loop_take_if_idle(c))
    return 1;
  j = crnet__world_rank(c, dest);
  l = j != w->rank ? link_to(c, j, &gone) : NULL;
  if (l != NULL && crnet__link_shm_tx(l) &&
      ++w->blind_sends >= SEND_NOW_BLIND_MAX) {
    /* On shared memory the write cannot tell that the peer has gone: the
     * ring (then the link's queue) takes it, where a socket's write meets
     * a broken pipe and sends the call down the full path. Only the loop
     * reads what says so (the peer's ABORT or goodbye, in the ring or on
     * TCP, and its TCP connection's end), and a rank that only sends never
     * ran it: it got 0 from 58254 sends of 8 bytes to a peer that had
     * aborted and exited, its whole eager budget (tests/test_p2p.c,
     * abort-write-shm). So every SEND_NOW_BLIND_MAX-th send in a row
     * without a turn makes the turn a nonblocking start makes (mostly
     * light; the loop's own every few, which sees the TCP end), and takes
     * the full path, which says why, if the comm failed or the link went
     * meanwhile, or if the turn started a message this one must not
     * overtake (a completion callback's: what crnet__loop_take_if_idle
     * checked, again). */
    w->blind_sends = 0;
    crnet__loop_turn(c);
    l = c->err == 0 && atomic_load(&w->p2p_live) == 0 ? link_to(c, j, &gone)
                                                      : NULL;
  }
  if (l != NULL && !link_failing(c, j) && (pe = peer_of(w, j)) != NULL &&
      pe->credit >= bytes + MSG_COST) {
    crnet__frame_header h = {.kind = CRNET__FRAME_MSG, .ctx = c->ctx,
                             .round = (uint32_t)tag, .length = bytes};
    if (crnet__link_send_now(l, &h, buf) == 0) {
      pe->credit -= bytes + MSG_COST;
      sent = true;
    }
  }
  if (sent) {
    pthread_mutex_lock(&w->mu);
    c->peer_stats[dest].bytes_sent += bytes;
    c->peer_stats[dest].messages_sent++;
    pthread_mutex_unlock(&w->mu);
  }
  crnet__loop_release(c);
  return sent ? 0 : 1;
}

int crnet_send(crnet_comm *comm, const void *buf, size_t count,
               crnet_datatype dt, int dest, int tag) {
  crnet_request *r;
  int rc = check_args(comm, P2P_SEND, buf, count, dt, dest, tag, "crnet_send");
  if (rc != 0)
    return rc;
  if (send_now(comm, buf, (uint64_t)count * crnet_datatype_size(dt), dest,
               tag) == 0)
    return 0;
  rc = start_checked(comm, P2P_SEND, buf, count, dt, dest, tag, NULL, true,
                     &r, "crnet_send");
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_recv(crnet_comm *comm, void *buf, size_t count, crnet_datatype dt,
               int source, int tag, crnet_status *status) {
  crnet_request *r;
  int rc = start(comm, P2P_RECV, buf, count, dt, source, tag, status, true, &r,
                 "crnet_recv");
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_sendrecv(crnet_comm *comm, const void *sendbuf, size_t sendcount,
                   crnet_datatype sendtype, int dest, int sendtag,
                   void *recvbuf, size_t recvcount, crnet_datatype recvtype,
                   int source, int recvtag, crnet_status *status) {
  crnet_request *r[2];
  int rc, rc2;
  /* Both checked before either starts: a bad half starts nothing. */
  rc = check_args(comm, P2P_RECV, recvbuf, recvcount, recvtype, source,
                  recvtag, "crnet_sendrecv (receive)");
  if (rc == 0)
    rc = check_args(comm, P2P_SEND, sendbuf, sendcount, sendtype, dest,
                    sendtag, "crnet_sendrecv (send)");
  if (rc != 0)
    return rc;
  rc = start_checked(comm, P2P_RECV, recvbuf, recvcount, recvtype, source,
                     recvtag, status, true, &r[0], "crnet_sendrecv");
  if (rc != 0)
    return rc;
  rc = start_checked(comm, P2P_SEND, sendbuf, sendcount, sendtype, dest,
                     sendtag, NULL, true, &r[1], "crnet_sendrecv");
  if (rc != 0) {
    /* The comm failed between the two: the receive ends with it. */
    crnet_wait(&r[0]);
    return rc;
  }
  rc = crnet_wait(&r[1]);
  rc2 = crnet_wait(&r[0]);
  return rc2 != 0 ? rc2 : rc;
}
