/* soak_p2p.c: the steps of messages between ranks (soak.c runs the
 * program and draws the steps; this file draws a step's messages, runs
 * them and checks them).
 *
 * A p2p step is up to 3q+1 messages among the q ranks of its comm, each
 * from a drawn rank to a drawn rank (itself now and then), with a drawn
 * datatype and size: empty, small, up to CRNET_EAGER_BYTES, exactly at it
 * or one element either side, or larger (rendezvous); what a rank sends
 * and what it has receive buffers for are each within --max-bytes. Every
 * rank draws every message alike, so each knows what it sends and
 * receives, and what every other rank does. A message's tag is unique in
 * the job for 2^20 steps ((step mod 2^20) * 1024 + index + 1), but in one
 * step of four one message gets 0 or CRNET_TAG_MAX. The receive names its
 * source and tag, or CRNET_ANY_SOURCE, CRNET_ANY_TAG or both, where the
 * matching is still determined: a receive must not be able to take a
 * message meant for another but those of the same sender that it would
 * take in their order anyway (messages of one sender arrive in the order
 * sent, and a rank posts the receives of one sender in that order: see
 * valid()); any source only with a tag of its own; a wildcard that would
 * break that is dropped, alike on every rank. One receive in 25 has a
 * buffer smaller than its message (CRNET_ETRUNCATE, the buffer untouched,
 * the status naming the message's size); others have room to spare (left
 * untouched); one in eight receives as CRNET_BYTE; one in 16 passes no
 * status.
 *
 * Blocking (the default), each rank does its part in phases that cannot
 * deadlock whatever the others do:
 *   1. crnet_irecv of its "early" receives, in its drawn order;
 *   2. its sends in its drawn order, crnet_isend, or crnet_send for a
 *      message whose receive is early (posted at once by a rank that has
 *      begun the step); then its crnet_sendrecv calls, each a send to an
 *      early receive and the receive of a message sent by crnet_isend;
 *   3. its "late" receives: crnet_recv, or crnet_irecv waited for below;
 *   4. every request left, completed in this rank's order and ways
 *      (crnet_wait, a loop of crnet_test, crnet_waitany with holes,
 *      crnet_waitall over the rest).
 * A receive of any source and any tag takes whatever comes first, a
 * message of a later step too from a rank that has gone on: its step
 * (p2p_exclusive) ends with a crnet_barrier on the comm, which no rank
 * leaves before that receive is done.
 * In flight (soak_inflight.c), the same step is every receive posted with
 * crnet_irecv and every send started with crnet_isend, in the same orders,
 * its requests completed among the batch's collectives; a step with a
 * receive of any source and any tag runs blocking there, once the
 * messages of its comm in flight are complete. Every message is checked
 * exactly: the receive's result and status (source, tag, bytes, error),
 * its buffer and guards, and the send buffer unchanged.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"
#include "soak.h"

#define MAX_MSGS 1000

enum send_mode { SM_ISEND, SM_SEND, SM_SENDRECV };
enum recv_mode { RM_EARLY, RM_LATE_RECV, RM_LATE_IRECV, RM_SENDRECV };

typedef struct msg {
  int src, dst; /* comm ranks */
  int tag;
  int recv_src, recv_tag; /* as the receive names them */
  crnet_datatype dt;
  size_t count, cap; /* elements sent; elements the receive has room for */
  bool as_bytes;     /* the receive takes cap * width bytes of CRNET_BYTE */
  bool special_tag;  /* 0 or CRNET_TAG_MAX */
  bool no_status;
  uint8_t send_mode, recv_mode;
  int pair;          /* sendrecv: the other message of the call, or -1 */
  uint64_t send_key; /* order among its sender's sends */
  uint64_t post_key; /* order among its receiver's receives */
} msg;

struct p2p_plan {
  msg *m;
  int n, cap;
  bool exclusive;
  size_t largest;
  int wild, trunc, rdv, sendrecv;
};

/* This rank's part of a step. */
struct p2p_run {
  int n;
  buf *sb, *rb;       /* per message: what this rank sends, receives */
  crnet_status *st;   /* per message it receives */
  crnet_request **reqs; /* this rank's requests, and their results due */
  int *want;
  int corrupt; /* SOAK_CORRUPT: the message this rank expects wrong, or -1 */
};

#define KEY_SR (UINT64_C(1) << 62)
#define KEY_LATE (UINT64_C(1) << 63)

static uint64_t msg_off(int i) { return (uint64_t)(i + 1) << 40; }

static bool truncated(const msg *m) { return m->cap < m->count; }

static int want_rc(const msg *m) { return truncated(m) ? CRNET_ETRUNCATE : 0; }

/* Whether a receive as m's names accepts message o. */
static bool accepts(const msg *m, const msg *o) {
  return o->dst == m->dst &&
         (m->recv_src == CRNET_ANY_SOURCE || m->recv_src == o->src) &&
         (m->recv_tag == CRNET_ANY_TAG || m->recv_tag == o->tag);
}

/* (key, index) order. */
static bool before(uint64_t ka, int a, uint64_t kb, int b) {
  return ka != kb ? ka < kb : a < b;
}

/* Whether message i's receive can only end up with message i: any other
 * message it accepts comes from the same sender, on the same side of
 * message i in the sender's order as its receive is of i's in the
 * receiver's. (Tags are unique but for 0 and CRNET_TAG_MAX, one a step,
 * which take no CRNET_ANY_SOURCE on a tag: other steps may share them.
 * A receive of any source and any tag is alone with the messages of its
 * comm, see p2p_exclusive.) */
static bool valid(const p2p_plan *pl, int i) {
  const msg *m = &pl->m[i];
  if (m->special_tag && m->recv_src == CRNET_ANY_SOURCE &&
      m->recv_tag != CRNET_ANY_TAG)
    return false;
  for (int j = 0; j < pl->n; j++) {
    const msg *o = &pl->m[j];
    if (j == i || !accepts(m, o))
      continue;
    if (o->src != m->src ||
        before(o->send_key, j, m->send_key, i) !=
            before(o->post_key, j, m->post_key, i))
      return false;
  }
  return true;
}

static msg *plan_room(step *s, int n) {
  if (s->plan == NULL) {
    s->plan = xmalloc(sizeof *s->plan);
    memset(s->plan, 0, sizeof *s->plan);
  }
  if (s->plan->cap < n) {
    free(s->plan->m);
    s->plan->m = xmalloc(sizeof *s->plan->m * (size_t)n);
    s->plan->cap = n;
  }
  return s->plan->m;
}

void p2p_plan_free(step *s) {
  if (s->plan != NULL)
    free(s->plan->m);
  free(s->plan);
  s->plan = NULL;
}

/* A message's size in elements of w bytes. */
static size_t draw_size(const ctx *x, size_t w) {
  const size_t eager = CRNET_EAGER_BYTES / w, cap = x->max_bytes / w;
  uint64_t d = below(100);
  size_t n;
  if (d < 6)
    n = 0;
  else if (d < 40)
    n = 1 + (size_t)below(64);
  else if (d < 62)
    n = 65 + (size_t)below(2000);
  else if (d < 70)
    n = eager - 1 + (size_t)below(3); /* at the eager limit, or just over */
  else if (d < 86)
    n = 1 + (size_t)below(eager);
  else
    n = eager + 1 + (size_t)below(cap > eager ? cap - eager : 1);
  return n < cap ? n : cap;
}

void p2p_draw(ctx *x, step *s) {
  const int q = s->q;
  int n = (int)below(3 * (uint64_t)q + 2), special;
  msg *m;
  p2p_plan *pl;
  /* What each rank sends and has receive buffers for, in bytes: at most
   * --max-bytes each, as a collective's buffers. */
  size_t *out = xmalloc(sizeof *out * 2 * (size_t)q), *in = out + q;
  memset(out, 0, sizeof *out * 2 * (size_t)q);
  if (n > MAX_MSGS)
    n = MAX_MSGS;
  m = plan_room(s, n > 0 ? n : 1);
  pl = s->plan;
  pl->n = n;
  pl->exclusive = false;
  pl->largest = 0;
  pl->wild = pl->trunc = pl->rdv = pl->sendrecv = 0;
  special = below(4) == 0 ? (int)below((uint64_t)n + 1) : -1;
  for (int i = 0; i < n; i++) {
    msg *o = &m[i];
    size_t w;
    uint64_t d;
    o->src = (int)below((uint64_t)q);
    o->dst = (int)below((uint64_t)q);
    o->dt = (crnet_datatype)below(CRNET_DATATYPE_COUNT);
    w = width(o->dt);
    o->count = draw_size(x, w);
    o->special_tag = i == special;
    if (o->special_tag)
      o->tag = below(2) == 0 ? 0 : CRNET_TAG_MAX;
    else
      o->tag = (int)((((uint32_t)s->n & 0xFFFFFu) << 10 | (uint32_t)i) + 1);
    if (o->count > 0 && below(25) == 0)
      o->cap = (size_t)below(o->count);
    else
      o->cap = o->count + (below(4) == 0 ? (size_t)below(5) : 0);
    {
      size_t room_out = x->max_bytes - out[o->src],
             room_in = x->max_bytes - in[o->dst],
             room = room_out < room_in ? room_out : room_in;
      if (o->count > room / w)
        o->count = room / w;
      if (o->cap > room / w)
        o->cap = room / w;
      out[o->src] += o->count * w;
      in[o->dst] += o->cap * w;
    }
    o->as_bytes = below(8) == 0;
    o->no_status = below(16) == 0;
    o->send_mode = below(4) == 0 ? SM_SEND : SM_ISEND;
    d = below(20);
    o->recv_mode = d < 13 ? RM_EARLY : d < 16 ? RM_LATE_RECV : RM_LATE_IRECV;
    if (o->recv_mode != RM_EARLY)
      o->send_mode = SM_ISEND; /* a blocking send only to an early receive */
    o->pair = -1;
    o->send_key = rng() >> 3;
    o->post_key = rng() >> 3;
    if (o->recv_mode != RM_EARLY)
      o->post_key |= KEY_LATE;
    /* Exact, any source, any tag, both: 12, 3, 3, 2 in 20. */
    d = below(20);
    o->recv_src = (d >= 12 && d < 15) || d >= 18 ? CRNET_ANY_SOURCE : o->src;
    o->recv_tag = d >= 15 ? CRNET_ANY_TAG : o->tag;
  }
  /* sendrecv: a rank's send to an early receive with its receive of a
   * message sent by crnet_isend, now and then. */
  for (int r = 0; r < q && n > 0; r++) {
    int calls = below(2) == 0 ? 1 + (int)below(2) : 0;
    for (int k = 0; k < calls; k++) {
      int a = -1, b = -1, start = (int)below((uint64_t)n);
      for (int t = 0; t < n; t++) {
        int i = (start + t) % n;
        if (a < 0 && m[i].src == r && m[i].recv_mode == RM_EARLY &&
            m[i].send_mode != SM_SENDRECV && m[i].pair < 0)
          a = i;
        if (b < 0 && m[i].dst == r && m[i].recv_mode != RM_EARLY &&
            m[i].recv_mode != RM_SENDRECV && m[i].send_mode == SM_ISEND &&
            m[i].pair < 0)
          b = i;
      }
      if (a < 0 || b < 0)
        break;
      m[a].send_mode = SM_SENDRECV;
      m[a].send_key |= KEY_SR;
      m[b].recv_mode = RM_SENDRECV;
      m[a].pair = b;
      m[b].pair = a;
      pl->sendrecv++;
    }
  }
  for (int i = 0; i < n; i++)
    if (m[i].recv_mode == RM_SENDRECV)
      m[i].post_key = m[m[i].pair].send_key; /* in the order of the calls */
  /* Wildcards that would not determine the match are dropped. */
  for (int i = 0; i < n; i++) {
    msg *o = &m[i];
    if (!valid(pl, i) && o->recv_src == CRNET_ANY_SOURCE &&
        o->recv_tag == CRNET_ANY_TAG)
      o->recv_src = o->src;
    if (!valid(pl, i)) {
      o->recv_src = o->src; /* exact: the tag is the step's own */
      o->recv_tag = o->tag;
    }
    pl->wild += o->recv_src == CRNET_ANY_SOURCE || o->recv_tag == CRNET_ANY_TAG;
    pl->exclusive |=
        o->recv_src == CRNET_ANY_SOURCE && o->recv_tag == CRNET_ANY_TAG;
    pl->trunc += truncated(o);
    pl->rdv += o->count * width(o->dt) > CRNET_EAGER_BYTES;
    if (o->count * width(o->dt) > pl->largest)
      pl->largest = o->count * width(o->dt);
  }
  s->count = (size_t)n;
  free(out);
}

bool p2p_exclusive(const step *s) {
  return s->kind == K_P2P && s->plan != NULL && s->plan->exclusive;
}

size_t p2p_count(ctx *x, const step *s) {
  const p2p_plan *pl = s->plan;
  x->p2p_msgs += (uint64_t)pl->n;
  x->p2p_rdv += (uint64_t)pl->rdv;
  x->p2p_wild += (uint64_t)pl->wild;
  x->p2p_trunc += (uint64_t)pl->trunc;
  x->p2p_sendrecv += (uint64_t)pl->sendrecv;
  return pl->largest;
}

/* --- this rank's part ---------------------------------------------------- */

/* The expected bytes of message i's receive buffer (cap elements). */
static void expected(const ctx *x, const step *s, const msg *o, int i,
                     uint8_t *out) {
  const size_t w = width(o->dt);
  if (truncated(o)) {
    fill_bytes(x, s->q, msg_off(i), o->cap * w, out); /* untouched */
    return;
  }
  fill_bytes(x, o->src, msg_off(i), o->count * w, out);
  fill_bytes(x, s->q, msg_off(i) + o->count * w, (o->cap - o->count) * w,
             out + o->count * w);
}

void p2p_prepare(ctx *x, call_state *cs) {
  const p2p_plan *pl = cs->s->plan;
  const int me = x->rank, n = pl->n;
  p2p_run *pr = xmalloc(sizeof *pr);
  memset(pr, 0, sizeof *pr);
  pr->n = n;
  pr->sb = xmalloc(sizeof *pr->sb * (size_t)(n + 1));
  pr->rb = xmalloc(sizeof *pr->rb * (size_t)(n + 1));
  pr->st = xmalloc(sizeof *pr->st * (size_t)(n + 1));
  pr->reqs = xmalloc(sizeof *pr->reqs * 2 * (size_t)(n + 1));
  pr->want = xmalloc(sizeof *pr->want * 2 * (size_t)(n + 1));
  memset(pr->sb, 0, sizeof *pr->sb * (size_t)(n + 1));
  memset(pr->rb, 0, sizeof *pr->rb * (size_t)(n + 1));
  pr->corrupt = -1;
  for (int i = 0; i < n; i++) {
    const msg *o = &pl->m[i];
    const size_t w = width(o->dt);
    if (o->src == me) {
      buf_make(&pr->sb[i], o->count * w);
      fill_bytes(x, me, msg_off(i), o->count * w, pr->sb[i].p);
    }
    if (o->dst == me) {
      buf_make(&pr->rb[i], o->cap * w);
      expected(x, cs->s, o, i, pr->rb[i].p);
      if (!truncated(o))
        complement(pr->rb[i].p, pr->rb[i].p, o->count * w);
      pr->st[i] = (crnet_status){-7, -7, (size_t)-7, -7};
      if (x->corrupt_rank == x->wrank && !truncated(o) && o->count > 0) {
        pr->corrupt = i; /* SOAK_CORRUPT, as soak.c's prepare() */
        x->corrupt_rank = -1;
      }
    }
  }
  cs->pr = pr;
  cs->send_elems = cs->recv_elems = cs->want_elems = cs->want_at = 0;
  buf_make(&cs->sb, 0);
  buf_make(&cs->rb, 0);
}

void p2p_free(call_state *cs) {
  p2p_run *pr = cs->pr;
  for (int i = 0; i < pr->n; i++) {
    if (pr->sb[i].raw != NULL)
      buf_free(&pr->sb[i]);
    if (pr->rb[i].raw != NULL)
      buf_free(&pr->rb[i]);
  }
  free(pr->sb);
  free(pr->rb);
  free(pr->st);
  free(pr->reqs);
  free(pr->want);
  free(pr);
  cs->pr = NULL;
}

uint64_t p2p_sum(const call_state *cs) {
  const p2p_run *pr = cs->pr;
  uint64_t h = 0;
  for (int i = 0; i < pr->n; i++) {
    if (pr->sb[i].raw != NULL)
      h = mix(h ^ fnv(pr->sb[i].raw, pr->sb[i].len + 2 * GUARD));
    if (pr->rb[i].raw != NULL)
      h = mix(h ^ fnv(pr->rb[i].raw, pr->rb[i].len + 2 * GUARD));
  }
  return h;
}

/* Indices of the messages this rank sends (sends) or receives, in its
 * order; returns how many. */
static int sequence(const p2p_plan *pl, int me, bool sends, int *out) {
  int k = 0;
  for (int i = 0; i < pl->n; i++)
    if ((sends ? pl->m[i].src : pl->m[i].dst) == me)
      out[k++] = i;
  for (int a = 1; a < k; a++) { /* insertion sort by (key, index) */
    int v = out[a], b = a;
    uint64_t kv = sends ? pl->m[v].send_key : pl->m[v].post_key;
    while (b > 0) {
      int u = out[b - 1];
      uint64_t ku = sends ? pl->m[u].send_key : pl->m[u].post_key;
      if (before(ku, u, kv, v))
        break;
      out[b] = u;
      b--;
    }
    out[b] = v;
  }
  return k;
}

static int post(ctx *x, p2p_run *pr, const msg *o, int i,
                crnet_request **req) {
  const size_t w = width(o->dt);
  return crnet_irecv(x->comm, pr->rb[i].p, o->as_bytes ? o->cap * w : o->cap,
                     o->as_bytes ? CRNET_BYTE : o->dt, o->recv_src,
                     o->recv_tag, o->no_status ? NULL : &pr->st[i], req);
}

static const char *rc_name(int rc) {
  return rc == 0 ? "0" : crnet_err_name(rc);
}

/* A call of the step returned rc where want was due. */
static bool got(ctx *x, const step *s, const char *what, int i, int rc,
                int want) {
  if (rc == want)
    return true;
  report(x, s, "%s of message %d returned %s, not %s: %s", what, i,
         rc_name(rc), rc_name(want), crnet_comm_errmsg(x->comm));
  x->broken = true;
  return false;
}

/* Phase 4: the requests left, reqs[0..n) (NULL: done) of messages idx[],
 * completed in this rank's order and ways. */
static void complete(ctx *x, const step *s, crnet_request **reqs,
                     const int *want, const int *idx, int n) {
  int left = 0;
  for (int i = 0; i < n; i++)
    left += reqs[i] != NULL;
  while (left > 0 && !x->broken) {
    uint64_t way = gen_below(&x->order, 8);
    int k = (int)gen_below(&x->order, (uint64_t)left), at = -1, rc, done = 0;
    for (int i = 0; i < n && at < 0; i++)
      if (reqs[i] != NULL && k-- == 0)
        at = i;
    if (way < 3) {
      rc = crnet_wait(&reqs[at]);
      got(x, s, "crnet_wait", idx[at], rc, want[at]);
      left--;
    } else if (way < 4) {
      while (!done && !x->broken) {
        rc = crnet_test(&reqs[at], &done);
        if (done)
          got(x, s, "crnet_test", idx[at], rc, want[at]);
        else if (rc != 0)
          got(x, s, "crnet_test (not done)", idx[at], rc, 0);
        else
          sched_yield();
      }
      left--;
    } else if (way < 6) {
      rc = crnet_waitany(n, reqs, &at);
      if (at < 0 || at >= n || reqs[at] != NULL) {
        report(x, s, "crnet_waitany returned %s and index %d", rc_name(rc),
               at);
        x->broken = true;
        return;
      }
      got(x, s, "crnet_waitany", idx[at], rc, want[at]);
      left--;
    } else {
      int first = 0;
      for (int i = 0; i < n && first == 0; i++)
        if (reqs[i] != NULL)
          first = want[i];
      rc = crnet_waitall(n, reqs);
      for (int i = 0; i < n; i++)
        if (reqs[i] != NULL) {
          report(x, s, "crnet_waitall left a handle set");
          x->broken = true;
        }
      got(x, s, "crnet_waitall (the first failed, in array order)", -1, rc,
          first);
      left = 0;
    }
  }
}

void p2p_run_blocking(ctx *x, call_state *cs) {
  const step *s = cs->s;
  const p2p_plan *pl = s->plan;
  p2p_run *pr = cs->pr;
  const int me = x->rank, n = pl->n;
  int *posts = xmalloc(sizeof *posts * (size_t)(n + 1));
  int *sends = xmalloc(sizeof *sends * (size_t)(n + 1));
  int *idx = xmalloc(sizeof *idx * 2 * (size_t)(n + 1));
  int np = sequence(pl, me, false, posts), ns = sequence(pl, me, true, sends);
  int nr = 0, rc;

  /* 1: the early receives. */
  for (int k = 0; k < np && !x->broken; k++) {
    int i = posts[k];
    if (pl->m[i].recv_mode != RM_EARLY)
      continue;
    rc = post(x, pr, &pl->m[i], i, &pr->reqs[nr]);
    if (got(x, s, "crnet_irecv", i, rc, 0)) {
      pr->want[nr] = want_rc(&pl->m[i]);
      idx[nr++] = i;
    }
  }
  /* 2: the sends, then the sendrecv calls. */
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < ns && !x->broken; k++) {
      int i = sends[k];
      const msg *o = &pl->m[i];
      if ((o->send_mode == SM_SENDRECV) != (pass == 1))
        continue;
      if (o->send_mode == SM_ISEND) {
        rc = crnet_isend(x->comm, pr->sb[i].p, o->count, o->dt, o->dst,
                         o->tag, &pr->reqs[nr]);
        if (got(x, s, "crnet_isend", i, rc, 0)) {
          pr->want[nr] = 0;
          idx[nr++] = i;
        }
      } else if (o->send_mode == SM_SEND) {
        rc = crnet_send(x->comm, pr->sb[i].p, o->count, o->dt, o->dst, o->tag);
        got(x, s, "crnet_send", i, rc, 0);
      } else {
        int b = o->pair;
        const msg *r = &pl->m[b];
        const size_t w = width(r->dt);
        rc = crnet_sendrecv(x->comm, pr->sb[i].p, o->count, o->dt, o->dst,
                            o->tag, pr->rb[b].p,
                            r->as_bytes ? r->cap * w : r->cap,
                            r->as_bytes ? CRNET_BYTE : r->dt, r->recv_src,
                            r->recv_tag, r->no_status ? NULL : &pr->st[b]);
        got(x, s, "crnet_sendrecv (sending it and receiving the next)", i,
            rc, want_rc(r));
      }
    }
  /* 3: the late receives. */
  for (int k = 0; k < np && !x->broken; k++) {
    int i = posts[k];
    const msg *o = &pl->m[i];
    const size_t w = width(o->dt);
    if (o->recv_mode == RM_LATE_RECV) {
      rc = crnet_recv(x->comm, pr->rb[i].p, o->as_bytes ? o->cap * w : o->cap,
                      o->as_bytes ? CRNET_BYTE : o->dt, o->recv_src,
                      o->recv_tag, o->no_status ? NULL : &pr->st[i]);
      got(x, s, "crnet_recv", i, rc, want_rc(o));
    } else if (o->recv_mode == RM_LATE_IRECV) {
      rc = post(x, pr, o, i, &pr->reqs[nr]);
      if (got(x, s, "crnet_irecv", i, rc, 0)) {
        pr->want[nr] = want_rc(o);
        idx[nr++] = i;
      }
    }
  }
  /* 4: the rest; and no rank goes on to send more on the comm before a
   * receive of any source and any tag has its message. */
  if (!x->broken)
    complete(x, s, pr->reqs, pr->want, idx, nr);
  if (!x->broken && pl->exclusive) {
    rc = crnet_barrier(x->comm);
    got(x, s, "the crnet_barrier after the step", -1, rc, 0);
  }
  free(posts);
  free(sends);
  free(idx);
}

int p2p_start(ctx *x, call_state *cs, crnet_request ***reqs, int **want) {
  const step *s = cs->s;
  const p2p_plan *pl = s->plan;
  p2p_run *pr = cs->pr;
  const int me = x->rank, n = pl->n;
  int *seq = xmalloc(sizeof *seq * (size_t)(n + 1));
  int k, nr = 0, rc;

  k = sequence(pl, me, false, seq);
  for (int t = 0; t < k; t++) {
    int i = seq[t];
    pr->reqs[nr] = NULL;
    rc = post(x, pr, &pl->m[i], i, &pr->reqs[nr]);
    if (!got(x, s, "crnet_irecv", i, rc, 0))
      goto fail;
    pr->want[nr++] = want_rc(&pl->m[i]);
  }
  k = sequence(pl, me, true, seq);
  for (int t = 0; t < k; t++) {
    int i = seq[t];
    const msg *o = &pl->m[i];
    pr->reqs[nr] = NULL;
    rc = crnet_isend(x->comm, pr->sb[i].p, o->count, o->dt, o->dst, o->tag,
                     &pr->reqs[nr]);
    if (!got(x, s, "crnet_isend", i, rc, 0))
      goto fail;
    pr->want[nr++] = 0;
  }
  free(seq);
  *reqs = pr->reqs;
  *want = pr->want;
  return nr;

fail:
  free(seq);
  return -1;
}

void p2p_check(ctx *x, call_state *cs) {
  const step *s = cs->s;
  const p2p_plan *pl = s->plan;
  p2p_run *pr = cs->pr;
  const int me = x->rank;
  for (int i = 0; i < pl->n; i++) {
    const msg *o = &pl->m[i];
    const size_t w = width(o->dt);
    if (o->src == me) {
      uint8_t *orig = xmalloc(o->count * w);
      fill_bytes(x, me, msg_off(i), o->count * w, orig);
      if (!guards_ok(&pr->sb[i]))
        report(x, s, "message %d: a guard byte around the send buffer was "
                     "overwritten",
               i);
      if (memcmp(orig, pr->sb[i].p, o->count * w) != 0)
        report(x, s, "message %d: the send buffer changed", i);
      free(orig);
    }
    if (o->dst == me) {
      const crnet_status *st = &pr->st[i];
      uint8_t *want = xmalloc(o->cap * w);
      char e[40], g[40];
      expected(x, s, o, i, want);
      if (i == pr->corrupt)
        want[(o->count / 2) * w] ^= 1;
      if (!guards_ok(&pr->rb[i]))
        report(x, s, "message %d: a guard byte around the receive buffer "
                     "was overwritten",
               i);
      if (memcmp(want, pr->rb[i].p, o->cap * w) != 0) {
        size_t b = 0;
        while (want[b] == pr->rb[i].p[b])
          b++;
        hex(want + b / w * w, w, e);
        hex(pr->rb[i].p + b / w * w, w, g);
        report(x, s, "result: first wrong element %zu of message %d (from "
                     "rank %d, tag %d, %zu of %s, a receive of %zu%s%s): "
                     "expected 0x%s, got 0x%s",
               b / w, i, o->src, o->tag, o->count, crnet_datatype_name(o->dt),
               o->cap, o->as_bytes ? " as bytes" : "",
               truncated(o) ? ", truncated: it must stay untouched" : "", e,
               g);
      }
      if (!o->no_status &&
          (st->source != o->src || st->tag != o->tag ||
           st->bytes != o->count * w || st->error != want_rc(o)))
        report(x, s, "message %d (receive of source %d tag %d): status "
                     "{source %d, tag %d, bytes %zu, error %s}, not {%d, %d, "
                     "%zu, %s}",
               i, o->recv_src, o->recv_tag, st->source, st->tag, st->bytes,
               rc_name(st->error), o->src, o->tag, o->count * w,
               rc_name(want_rc(o)));
      free(want);
    }
  }
}
