/* The executor. See exec.h. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Gather and scatter lists of up to this many segments live on the stack;
 * the circulant schedules need at most two per message (a wrap-around). */
#define IOV_SMALL 8

typedef struct exec_bufs {
  uint8_t *base[CRNET__BUF_COUNT];
  size_t esize;
} exec_bufs;

static void *seg_ptr(const exec_bufs *b, const crnet__seg *g) {
  return b->base[g->buf] + g->off * b->esize;
}

/* Fills iov from the schedule's segments of x. */
static crnet__iov *make_iov(const crnet__schedule *s, const crnet__xfer *x,
                            const exec_bufs *b, crnet__iov *small) {
  crnet__iov *iov = small;
  if (x->nsegs > IOV_SMALL) {
    iov = malloc(sizeof *iov * x->nsegs);
    if (iov == NULL)
      return NULL;
  }
  for (uint32_t i = 0; i < x->nsegs; i++) {
    const crnet__seg *g = &s->segs[x->first_seg + i];
    iov[i].base = seg_ptr(b, g);
    iov[i].len = g->count * b->esize;
  }
  return iov;
}

/* dst = dst (+) src for an operator whose order matters: the kernel only
 * computes inout = in (+) inout, so combine into a copy of src. */
static int reduce_dst_left(crnet_op op, crnet_datatype dt, const void *src,
                           void *dst, uint64_t count, size_t esize) {
  void *tmp = malloc(count * esize);
  if (tmp == NULL)
    return CRNET_ENOMEM;
  memcpy(tmp, src, count * esize);
  crnet__reduce(op, dt, dst, tmp, count);
  memcpy(dst, tmp, count * esize);
  free(tmp);
  return 0;
}

static int run_steps(const crnet__schedule *s, const crnet__round *r,
                     const exec_bufs *b, crnet_datatype dt, crnet_op op) {
  bool commutative = crnet__op_commutative(op);
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    void *src = seg_ptr(b, &st->src), *dst = seg_ptr(b, &st->dst);
    uint64_t n = st->src.count;
    if (n == 0)
      continue;
    if (st->kind == CRNET__STEP_COPY) {
      memmove(dst, src, n * b->esize);
    } else if (st->order == CRNET__SRC_LEFT || commutative) {
      crnet__reduce(op, dt, src, dst, n);
    } else {
      int rc = reduce_dst_left(op, dt, src, dst, n, b->esize);
      if (rc != 0)
        return rc;
    }
  }
  return 0;
}

int crnet__exec(crnet_comm *c, const crnet__schedule *s, const void *send,
                void *recv, bool in_place, crnet_datatype dt, crnet_op op,
                uint32_t sig) {
  exec_bufs b;
  crnet__iov ssmall[IOV_SMALL], rsmall[IOV_SMALL];
  int rc = 0;

  b.esize = crnet_datatype_size(dt);
  b.base[CRNET__BUF_RECV] = recv;
  b.base[CRNET__BUF_SEND] = in_place ? recv : (uint8_t *)(uintptr_t)send;
  b.base[CRNET__BUF_TEMP] = NULL;
  if (s->temp_count > 0) {
    b.base[CRNET__BUF_TEMP] = malloc(s->temp_count * b.esize);
    if (b.base[CRNET__BUF_TEMP] == NULL)
      return CRNET_ENOMEM;
  }
  for (uint32_t k = 0; k < s->nrounds && rc == 0; k++) {
    const crnet__round *r = &s->rounds[k];
    if (r->send.peer >= 0 || r->recv.peer >= 0) {
      crnet__iov *siov = make_iov(s, &r->send, &b, ssmall);
      crnet__iov *riov = make_iov(s, &r->recv, &b, rsmall);
      if (siov == NULL || riov == NULL)
        rc = CRNET_ENOMEM;
      else
        rc = crnet__sendrecv_v(c, r->send.peer, siov, r->send.nsegs,
                               r->recv.peer, riov, r->recv.nsegs, k, sig);
      if (siov != ssmall)
        free(siov);
      if (riov != rsmall)
        free(riov);
    }
    if (rc == 0)
      rc = run_steps(s, r, &b, dt, op);
  }
  free(b.base[CRNET__BUF_TEMP]);
  return rc;
}
