/* Exchanges: the send and the receive of one round, on the pair's links.
 * See comm.h (crnet__exchange) and request.h (the order of frames between two
 * ranks). Nothing here blocks: an exchange is posted as far as its links and
 * the order of calls allow, and the progress engine posts the rest later. */
#include "comm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "request.h"

static uint64_t iov_total(const crnet__iov *iov, uint32_t n) {
  uint64_t t = 0;
  for (uint32_t i = 0; i < n; i++)
    t += iov[i].len;
  return t;
}

/* Parts of a message of len bytes (see crnet__exchange): both sides compute
 * the same from the same length. */
static uint32_t exchange_parts(const crnet_comm *c, uint64_t len) {
  uint64_t n = c->w->stream_min > 0 ? len / c->w->stream_min : 1;
  if (n < 2 || c->w->streams < 2)
    return 1;
  return n < c->w->streams ? (uint32_t)n : c->w->streams;
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

/* The link of stream k to the comm's rank r if it can carry a message;
 * else fails every comm that has that rank (naming it) and returns NULL. */
static crnet__link *usable_link(crnet__exchange *x, int r, uint32_t k) {
  crnet_comm *c = x->c;
  int j = crnet__world_rank(c, r);
  crnet__peer *p = *crnet__comm_link(c, j, (int)k);
  char who[160];
  if (p != NULL && !p->closed && !p->link.failed)
    return &p->link;
  crnet__describe_rank(c, r, who, sizeof who);
  crnet__world_fail_peer(
      c->w, j, CRNET_EPEER,
      "%s has left the job (%s #%" PRIu64 " round %" PRIu32 " needed it)", who,
      crnet_collective_name((crnet_collective)x->id.coll),
      crnet__call_number(c, x->id.seq), x->round);
  return NULL;
}

int crnet__exchange_init(crnet_comm *c, crnet__exchange *x, crnet_request *req,
                         const crnet__exchange_id *id, int to,
                         const crnet__iov *siov, uint32_t sn, int from,
                         const crnet__iov *riov, uint32_t rn, uint32_t round) {
  x->c = c;
  x->req = req;
  x->id = *id;
  x->round = round;
  x->to = to;
  x->from = from;
  x->siov = siov;
  x->sn = sn;
  x->riov = riov;
  x->rn = rn;
  x->nsend = x->nrecv = 0;
  x->send_posted = to < 0;
  x->recv_posted = from < 0;
  x->recv_counted = from < 0;
  x->dropped = false;
  x->recv_iov = NULL;
  x->slen = to >= 0 ? iov_total(siov, sn) : 0;
  x->rlen = from >= 0 ? iov_total(riov, rn) : 0;
  return c->err;
}

/* Whether every stream to the comm's rank r is linked; with lazy links,
 * asks for them. */
static bool linked(crnet__exchange *x, int r) {
  crnet_comm *c = x->c;
  crnet_comm *world = c->w->comms[0];
  int j = crnet__world_rank(c, r);
  if (!c->w->lazy || crnet__lazy_linked(world, j))
    return true;
  crnet__lazy_want(world, j);
  if (x->req != NULL) {
    x->req->waiting_link = true;
    x->req->link_peer = r;
  }
  return false;
}

static bool post_recv(crnet__exchange *x) {
  crnet_comm *c = x->c;
  uint32_t n = exchange_parts(c, x->rlen);
  crnet__iov *list = (crnet__iov *)(uintptr_t)x->riov;
  crnet__link *l[CRNET__MAX_STREAMS];
  if (!crnet__req_gate_open(x->req, x->from, 1) || !linked(x, x->from))
    return false;
  /* A link holds one posted receive per comm: an older call's, or an
   * earlier round's, is still being filled (request.h). */
  for (uint32_t k = 0; k < n; k++) {
    l[k] = usable_link(x, x->from, k);
    if (l[k] == NULL)
      return false;
    if (crnet__link_recv_posted(l[k], c->ctx))
      return false;
  }
  if (n > 1) {
    /* A slice of a list has at most one more entry per part. */
    x->recv_iov = crnet__malloc(sizeof *x->recv_iov * ((size_t)x->rn + n));
    if (x->recv_iov == NULL) {
      crnet__comm_fail(c, CRNET_ENOMEM, -1, "out of memory");
      return false;
    }
    list = x->recv_iov;
  }
  for (uint32_t k = 0; k < n; k++) {
    crnet__recv_req *r = &x->recv[k];
    memset(r, 0, sizeof *r);
    if (n > 1) {
      uint64_t a = part_start(x->rlen, n, k), b = part_start(x->rlen, n, k + 1);
      r->iov = list;
      r->niov = iov_slice(x->riov, x->rn, a, b, list);
      r->len = b - a;
      list += r->niov;
    } else {
      r->iov = x->riov;
      r->niov = x->rn;
      r->len = x->rlen;
    }
    r->ctx = c->ctx;
    r->coll = x->id.coll;
    r->seq = x->id.seq;
    r->round = x->round;
    r->sig = x->id.sig;
    x->recv_link[k] = l[k];
    x->nrecv = k + 1;
    crnet__link_post_recv(l[k], r);
  }
  x->recv_posted = true;
  return true;
}

static bool post_send(crnet__exchange *x) {
  crnet_comm *c = x->c;
  uint32_t n = exchange_parts(c, x->slen);
  crnet__iov small[8], *part = small;
  crnet__req_peer *rp;
  if (!crnet__req_gate_open(x->req, x->to, 0) || !linked(x, x->to))
    return false;
  for (uint32_t k = 0; k < n; k++)
    if (usable_link(x, x->to, k) == NULL)
      return false;
  if (n > 1 && x->sn + 1 > 8) {
    part = crnet__malloc(sizeof *part * ((size_t)x->sn + 1));
    if (part == NULL) {
      crnet__comm_fail(c, CRNET_ENOMEM, -1, "out of memory");
      return false;
    }
  }
  for (uint32_t k = 0; k < n; k++) {
    crnet__link *l =
        &(*crnet__comm_link(c, crnet__world_rank(c, x->to), (int)k))->link;
    uint64_t a = part_start(x->slen, n, k), b = part_start(x->slen, n, k + 1);
    crnet__frame_header h = {.kind = CRNET__FRAME_DATA,
                             .coll = x->id.coll,
                             .seq = x->id.seq,
                             .round = x->round,
                             .sig = x->id.sig,
                             .length = b - a,
                             .ctx = c->ctx,
                             .call = x->id.call};
    x->nsend = k + 1;
    if (n > 1)
      crnet__link_send(l, &x->send[k], &h, part,
                       iov_slice(x->siov, x->sn, a, b, part));
    else
      crnet__link_send(l, &x->send[k], &h, x->siov, x->sn);
  }
  if (part != small)
    free(part);
  x->send_posted = true;
  rp = x->req != NULL ? crnet__req_peer_find(x->req, x->to) : NULL;
  if (rp != NULL && rp->sends_left > 0)
    rp->sends_left--;
  return true;
}

bool crnet__exchange_post(crnet__exchange *x) {
  bool moved = false;
  if (x->c->err != 0 || x->dropped)
    return false;
  if (x->req != NULL)
    x->req->waiting_link = false;
  /* The receive first, so that a reply finds it posted. */
  if (!x->recv_posted && post_recv(x))
    moved = true;
  if (!x->send_posted && x->c->err == 0 && post_send(x))
    moved = true;
  return moved;
}

bool crnet__exchange_posted(const crnet__exchange *x) {
  return x->send_posted && x->recv_posted;
}

uint64_t crnet__exchange_received(const crnet__exchange *x) {
  uint64_t got = 0;
  for (uint32_t k = 0; k < x->nrecv; k++) {
    const crnet__recv_req *r = &x->recv[k];
    if (!(r->done && r->status == 0))
      return got + r->got;
    got += r->len;
  }
  return got;
}

/* Whether libuv and the links have let go of every part posted. */
static bool parts_done(const crnet__exchange *x) {
  for (uint32_t k = 0; k < x->nsend; k++)
    if (!x->send[k].done)
      return false;
  for (uint32_t k = 0; k < x->nrecv; k++)
    if (!x->recv[k].done)
      return false;
  return true;
}

/* The receive from `from` is over: a younger call may post its own
 * (request.h). Counted once, as soon as its parts are in, whatever the
 * send of the round is doing. */
static void count_recv(crnet__exchange *x) {
  crnet__req_peer *rp;
  if (x->recv_counted || !x->recv_posted)
    return;
  for (uint32_t k = 0; k < x->nrecv; k++)
    if (!x->recv[k].done)
      return;
  x->recv_counted = true;
  rp = x->req != NULL ? crnet__req_peer_find(x->req, x->from) : NULL;
  if (rp != NULL && rp->recvs_left > 0)
    rp->recvs_left--;
}

/* A part's send failed on a link that is still reading what its peer sent
 * last (crnet__link_write_failed): the exchange waits for the link to
 * fail, so that the call ends with the peer's reason (its abort, its
 * report of a mismatch) rather than a bare lost link. */
static bool send_failing(const crnet__exchange *x) {
  crnet_comm *c = x->c;
  for (uint32_t k = 0; k < x->nsend; k++) {
    const crnet__peer *p;
    if (!x->send[k].done || x->send[k].status == 0)
      continue;
    p = *crnet__comm_link(c, crnet__world_rank(c, x->to), (int)k);
    if (p != NULL && crnet__link_failing(&p->link))
      return true;
  }
  return false;
}

bool crnet__exchange_complete(crnet__exchange *x) {
  crnet_comm *c = x->c;
  if (c->err == 0 && send_failing(x))
    return false;
  if (c->err != 0 && !x->dropped) {
    /* The comm failed: what is not posted never will be, and posted
     * receives are taken back, so that the exchange ends. */
    x->dropped = true;
    for (uint32_t k = 0; k < x->nrecv; k++)
      if (!x->recv[k].done)
        crnet__link_cancel_recv(x->recv_link[k], &x->recv[k]);
  }
  count_recv(x);
  if (!x->dropped && !crnet__exchange_posted(x))
    return false;
  return parts_done(x);
}

int crnet__exchange_end(crnet__exchange *x) {
  crnet_comm *c = x->c;
  bool failed = !crnet__exchange_posted(x);
  free(x->recv_iov);
  x->recv_iov = NULL;
  for (uint32_t k = 0; k < x->nsend; k++)
    failed = failed || x->send[k].status != 0;
  for (uint32_t k = 0; k < x->nrecv; k++)
    failed = failed || x->recv[k].status != 0;
  if (!failed)
    return 0;
  if (c->err == 0)
    crnet__comm_fail(c, CRNET_EPEER, -1, "link failed in round %" PRIu32,
                     x->round);
  return c->err;
}

/* --- a blocking exchange, for the runtime's own tests ------------------- */

typedef struct exchange_wait {
  crnet__exchange *x;
} exchange_wait;

static bool exchange_done(void *arg) {
  exchange_wait *w = arg;
  crnet__exchange_post(w->x);
  return crnet__exchange_complete(w->x);
}

int crnet__sendrecv(crnet_comm *c, uint64_t seq, int to, const void *sbuf,
                    uint64_t slen, int from, void *rbuf, uint64_t rlen,
                    uint32_t round, uint32_t sig) {
  crnet__iov s = {(void *)(uintptr_t)sbuf, slen}, r = {rbuf, rlen};
  crnet__exchange_id id = {.coll = CRNET_COLL_ALLREDUCE,
                           .seq = seq,
                           .sig = sig,
                           .call = {.op = -1, .root = -1}};
  crnet__exchange *x = crnet__malloc(sizeof *x);
  exchange_wait w = {x};
  int rc;
  if (x == NULL)
    return CRNET_ENOMEM;
  rc = crnet__exchange_init(c, x, NULL, &id, to, &s, 1, from, &r, 1, round);
  /* No request stands for the call: its frames that come early are taken
   * as ahead of this rank (parked), and checked when the receive posts. */
  if (rc == 0 && c->seq >= seq)
    c->seq = seq - 1;
  /* Requests live in x: wait until libuv has let go of both, also when the
   * comm failed meanwhile (closing a link completes its requests). */
  crnet__comm_run_until(c, exchange_done, &w, 0);
  rc = crnet__exchange_end(x);
  free(x);
  return rc;
}
