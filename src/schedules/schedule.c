/* Schedules: building, freeing, and cutting a vector into blocks.
 *
 * The format is described in schedule.h. This file only manages the three
 * growable arrays (rounds, segments, steps). Appends never fail visibly: on
 * allocation failure the schedule is marked (s->oom) and every later append
 * is ignored, so a builder stays a straight line and learns of the failure
 * once, from crnet__sched_finish, which then frees everything.
 */
#include "schedule.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "crnet.h"

void crnet__sched_init(crnet__schedule *s, int32_t p, int32_t rank) {
  memset(s, 0, sizeof(*s));
  s->p = p;
  s->rank = rank;
}

/* Grows *arr (elements of `size` bytes, capacity *cap) to hold `need`. */
static bool grow(crnet__schedule *s, void **arr, uint32_t *cap, uint32_t need,
                 size_t size) {
  if (s->oom)
    return false;
  if (need <= *cap)
    return true;
  uint32_t ncap = *cap ? *cap : 8;
  while (ncap < need) {
    if (ncap > UINT32_MAX / 2) {
      s->oom = true;
      return false;
    }
    ncap *= 2;
  }
  void *n = crnet__realloc(*arr, (size_t)ncap * size);
  if (n == NULL) {
    s->oom = true;
    return false;
  }
  *arr = n;
  *cap = ncap;
  return true;
}

void crnet__sched_round(crnet__schedule *s) {
  if (!grow(s, (void **)&s->rounds, &s->cap_rounds, s->nrounds + 1,
            sizeof(*s->rounds)))
    return;
  crnet__round *r = &s->rounds[s->nrounds++];
  r->send.peer = -1;
  r->send.first_seg = s->nsegs;
  r->send.nsegs = 0;
  r->recv.peer = -1;
  r->recv.first_seg = s->nsegs;
  r->recv.nsegs = 0;
  r->first_step = s->nsteps;
  r->nsteps = 0;
  r->independent = false;
}

void crnet__sched_round_independent(crnet__schedule *s) {
  crnet__sched_round(s);
  if (!s->oom)
    s->rounds[s->nrounds - 1].independent = true;
}

static crnet__round *cur(crnet__schedule *s) {
  if (s->oom)
    return NULL;
  assert(s->nrounds > 0 && "crnet__sched_round first");
  return &s->rounds[s->nrounds - 1];
}

/* The segments of a round are stored contiguously per transfer: a round's
 * send segments must all be added before its first receive segment (and
 * vice versa), which is how every builder is written; the assert says so. */
static void add_seg(crnet__schedule *s, crnet__xfer *x, int32_t peer,
                    uint8_t buf, uint64_t off, uint64_t count) {
  assert(x->peer == -1 || x->peer == peer);
  x->peer = peer;
  if (count == 0)
    return;
  if (x->nsegs == 0)
    x->first_seg = s->nsegs;
  assert(x->first_seg + x->nsegs == s->nsegs && "segments interleaved");
  /* A segment that continues the previous one extends it: the same bytes
   * in the same order, one gather/scatter entry fewer for the executor. */
  if (x->nsegs > 0) {
    crnet__seg *last = &s->segs[s->nsegs - 1];
    if (last->buf == buf && last->off + last->count == off) {
      last->count += count;
      return;
    }
  }
  if (!grow(s, (void **)&s->segs, &s->cap_segs, s->nsegs + 1,
            sizeof(*s->segs)))
    return;
  s->segs[s->nsegs++] = crnet__seg_make(buf, off, count);
  x->nsegs++;
}

void crnet__sched_send(crnet__schedule *s, int32_t peer, uint8_t buf,
                       uint64_t off, uint64_t count) {
  crnet__round *r = cur(s);
  if (r == NULL || count == 0)
    return;
  add_seg(s, &r->send, peer, buf, off, count);
}

void crnet__sched_recv(crnet__schedule *s, int32_t peer, uint8_t buf,
                       uint64_t off, uint64_t count) {
  crnet__round *r = cur(s);
  if (r == NULL || count == 0)
    return;
  add_seg(s, &r->recv, peer, buf, off, count);
}

void crnet__sched_send_peer(crnet__schedule *s, int32_t peer) {
  crnet__round *r = cur(s);
  if (r == NULL)
    return;
  assert(r->send.peer == -1 || r->send.peer == peer);
  r->send.peer = peer;
}

void crnet__sched_recv_peer(crnet__schedule *s, int32_t peer) {
  crnet__round *r = cur(s);
  if (r == NULL)
    return;
  assert(r->recv.peer == -1 || r->recv.peer == peer);
  r->recv.peer = peer;
}

static void add_step(crnet__schedule *s, uint8_t kind, uint8_t order,
                     crnet__seg src, crnet__seg dst) {
  crnet__round *r = cur(s);
  assert(src.count == dst.count);
  if (r == NULL || src.count == 0)
    return;
  /* Likewise a step that continues the previous step of the round element
   * for element (same kind and order, both regions contiguous) extends it. */
  if (r->nsteps > 0) {
    crnet__step *p = &s->steps[s->nsteps - 1];
    if (p->kind == kind && p->order == order && p->src.buf == src.buf &&
        p->dst.buf == dst.buf && p->src.off + p->src.count == src.off &&
        p->dst.off + p->dst.count == dst.off) {
      p->src.count += src.count;
      p->dst.count += dst.count;
      return;
    }
  }
  if (!grow(s, (void **)&s->steps, &s->cap_steps, s->nsteps + 1,
            sizeof(*s->steps)))
    return;
  crnet__step *st = &s->steps[s->nsteps++];
  st->kind = kind;
  st->order = order;
  st->src = src;
  st->dst = dst;
  if (r->nsteps == 0)
    r->first_step = s->nsteps - 1;
  r->nsteps++;
}

void crnet__sched_reduce(crnet__schedule *s, crnet__seg src, crnet__seg dst,
                         uint8_t order) {
  add_step(s, CRNET__STEP_REDUCE, order, src, dst);
}

void crnet__sched_copy(crnet__schedule *s, crnet__seg src, crnet__seg dst) {
  add_step(s, CRNET__STEP_COPY, CRNET__SRC_LEFT, src, dst);
}

void crnet__sched_need_temp(crnet__schedule *s, uint64_t count) {
  if (count > s->temp_count)
    s->temp_count = count;
}

/* g mapped by m; where it lands in TEMP, s's TEMP grows to hold it (a
 * sub-schedule's SEND or RECV may be mapped there). */
static crnet__seg map_seg(crnet__schedule *s, const crnet__sched_map *m,
                          crnet__seg g) {
  crnet__seg out =
      crnet__seg_make(m->buf[g.buf], m->off[g.buf] + g.off, g.count);
  if (out.buf == CRNET__BUF_TEMP)
    crnet__sched_need_temp(s, out.off + out.count);
  return out;
}

void crnet__sched_pad(crnet__schedule *s, uint32_t at) {
  while (!s->oom && s->nrounds < at)
    crnet__sched_round(s);
}

/* A send or receive x of sub into s's current round, mapped by m. */
static void embed_xfer(crnet__schedule *s, const crnet__schedule *sub,
                       const crnet__sched_map *m, const crnet__xfer *x,
                       bool send) {
  int32_t peer;
  if (x->peer < 0)
    return;
  peer = m->rank_of[x->peer];
  if (send)
    crnet__sched_send_peer(s, peer);
  else
    crnet__sched_recv_peer(s, peer);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    crnet__seg g = map_seg(s, m, sub->segs[x->first_seg + i]);
    (send ? crnet__sched_send : crnet__sched_recv)(s, peer, g.buf, g.off,
                                                   g.count);
  }
}

void crnet__sched_embed(crnet__schedule *s, const crnet__schedule *sub,
                        const crnet__sched_map *m, uint32_t at) {
  assert(s->oom || s->nrounds <= at);
  crnet__sched_pad(s, at);
  for (uint32_t k = 0; k < sub->nrounds && !s->oom; k++) {
    const crnet__round *r = &sub->rounds[k];
    if (k > 0 && r->independent)
      crnet__sched_round_independent(s);
    else
      crnet__sched_round(s);
    embed_xfer(s, sub, m, &r->send, true);
    embed_xfer(s, sub, m, &r->recv, false);
    for (uint32_t i = 0; i < r->nsteps; i++) {
      const crnet__step *st = &sub->steps[r->first_step + i];
      crnet__seg src = map_seg(s, m, st->src), dst = map_seg(s, m, st->dst);
      if (st->kind == CRNET__STEP_REDUCE)
        crnet__sched_reduce(s, src, dst, st->order);
      else
        crnet__sched_copy(s, src, dst);
    }
  }
  for (int b = 0; b < CRNET__BUF_COUNT; b++)
    if (m->buf[b] == CRNET__BUF_TEMP && sub->temp_count > 0)
      crnet__sched_need_temp(s, m->off[b] + sub->temp_count);
}

void crnet__sched_free(crnet__schedule *s) {
  free(s->rounds);
  free(s->segs);
  free(s->steps);
  s->rounds = NULL;
  s->segs = NULL;
  s->steps = NULL;
  s->nrounds = s->nsegs = s->nsteps = 0;
  s->cap_rounds = s->cap_segs = s->cap_steps = 0;
}

int crnet__sched_finish(crnet__schedule *s) {
  if (s->oom) {
    crnet__sched_free(s);
    return CRNET_ENOMEM;
  }
  return 0;
}

uint64_t crnet__xfer_count(const crnet__schedule *s, const crnet__xfer *x) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < x->nsegs; i++)
    n += s->segs[x->first_seg + i].count;
  return n;
}

void crnet__block_range(uint64_t count, int32_t p, int32_t b, uint64_t *off,
                        uint64_t *n) {
  assert(p > 0 && b >= 0 && b < p);
  uint64_t q = count / (uint64_t)p, rem = count % (uint64_t)p;
  uint64_t ub = (uint64_t)b;
  *n = q + (ub < rem ? 1 : 0);
  *off = q * ub + (ub < rem ? ub : rem);
}

uint64_t *crnet__block_offsets(const uint64_t *counts, int32_t p, int *rc) {
  uint64_t *P;
  if (counts == NULL || p < 1) {
    *rc = CRNET_EINVAL;
    return NULL;
  }
  P = crnet__malloc(((size_t)p + 1) * sizeof *P);
  if (P == NULL) {
    *rc = CRNET_ENOMEM;
    return NULL;
  }
  P[0] = 0;
  for (int32_t b = 0; b < p; b++) {
    if (P[b] + counts[b] < P[b]) {
      free(P);
      *rc = CRNET_EINVAL;
      return NULL;
    }
    P[b + 1] = P[b] + counts[b];
  }
  *rc = 0;
  return P;
}
