/* soak_calls.c: the collective calls of soak (soak.c draws and checks
 * them): each kind's crnet_X and crnet_iX with its arguments, and the
 * vector shapes' buffers: allgatherv's and alltoallv's blocks placed by
 * each rank its own way, the expected receive buffer whole (the gaps
 * between blocks included, which must stay as they were), and the check
 * that says which block or gap a wrong element is in.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"
#include "soak.h"

/* Runs the call (req NULL) or starts it with the nonblocking twin; the
 * buffers and arguments are ready. */
int invoke(ctx *x, call_state *cs, crnet_request **req) {
  const step *s = cs->s;
  crnet_comm *c = x->comm;
  const void *send = cs->send_arg;
  void *recv = cs->recv_arg;
  if (req == NULL) {
    switch (s->kind) {
    case K_ALLREDUCE:
      return crnet_allreduce(c, send, recv, s->count, s->dt, s->op);
    case K_RSB:
      return crnet_reduce_scatter_block(c, send, recv, s->count, s->dt,
                                        s->op);
    case K_RS:
      return crnet_reduce_scatter(c, send, recv, s->counts, s->dt, s->op);
    case K_SCAN:
      return crnet_scan(c, send, recv, s->count, s->dt, s->op);
    case K_EXSCAN:
      return crnet_exscan(c, send, recv, s->count, s->dt, s->op);
    case K_ALLTOALL:
      return crnet_alltoall(c, send, recv, s->count, s->dt);
    case K_ALLGATHER:
      return crnet_allgather(c, send, recv, s->count, s->dt);
    case K_BCAST:
      return crnet_bcast(c, recv, s->count, s->dt, s->root);
    case K_REDUCE:
      return crnet_reduce(c, send, recv, s->count, s->dt, s->op, s->root);
    case K_GATHER:
      return crnet_gather(c, send, recv, s->count, s->dt, s->root);
    case K_SCATTER:
      return crnet_scatter(c, send, recv, s->count, s->dt, s->root);
    case K_ALLGATHERV:
      return crnet_allgatherv(c, send, s->counts[x->rank], recv, s->counts,
                              cs->rdispls, s->dt);
    case K_ALLTOALLV:
      return crnet_alltoallv(c, send, cs->sendcounts, cs->sdispls, recv,
                             cs->recvcounts, cs->rdispls, s->dt);
    default:
      return crnet_barrier(c);
    }
  }
  switch (s->kind) {
  case K_ALLREDUCE:
    return crnet_iallreduce(c, send, recv, s->count, s->dt, s->op, req);
  case K_RSB:
    return crnet_ireduce_scatter_block(c, send, recv, s->count, s->dt, s->op,
                                       req);
  case K_RS:
    return crnet_ireduce_scatter(c, send, recv, s->counts, s->dt, s->op, req);
  case K_SCAN:
    return crnet_iscan(c, send, recv, s->count, s->dt, s->op, req);
  case K_EXSCAN:
    return crnet_iexscan(c, send, recv, s->count, s->dt, s->op, req);
  case K_ALLTOALL:
    return crnet_ialltoall(c, send, recv, s->count, s->dt, req);
  case K_ALLGATHER:
    return crnet_iallgather(c, send, recv, s->count, s->dt, req);
  case K_BCAST:
    return crnet_ibcast(c, recv, s->count, s->dt, s->root, req);
  case K_REDUCE:
    return crnet_ireduce(c, send, recv, s->count, s->dt, s->op, s->root, req);
  case K_GATHER:
    return crnet_igather(c, send, recv, s->count, s->dt, s->root, req);
  case K_SCATTER:
    return crnet_iscatter(c, send, recv, s->count, s->dt, s->root, req);
  case K_ALLGATHERV:
    return crnet_iallgatherv(c, send, s->counts[x->rank], recv, s->counts,
                             cs->rdispls, s->dt, req);
  case K_ALLTOALLV:
    return crnet_ialltoallv(c, send, cs->sendcounts, cs->sdispls, recv,
                            cs->recvcounts, cs->rdispls, s->dt, req);
  default:
    return crnet_ibarrier(c, req);
  }
}


/* Where rank r puts n blocks of counts[] elements in a buffer of its own
 * (allgatherv's receive, alltoallv's send and receive): packed, the
 * displacements passed as NULL (a fifth of the time) or given (a tenth),
 * else in a random order with random gaps, and in a send buffer now and
 * then blocks read from anywhere in it, overlapping others. Drawn from
 * (seed, step, r, which) apart from the draws, so that any rank computes
 * any rank's. at[] gets the displacements, *end the buffer's length in
 * elements; returns whether NULL is to be passed. */
static bool layout(const step *s, int r, int which, const size_t *counts,
                   int n, size_t *at, size_t *end, bool overlap) {
  gen g = {mix(s->salt ^ mix((uint64_t)r * 0x100000001b3ull +
                             (uint64_t)which * 0x9e37ull))};
  uint64_t mode = gen_below(&g, 10);
  int *order = xmalloc(sizeof *order * (size_t)n);
  size_t pos = 0;
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = n - 1; mode >= 3 && i > 0; i--) {
    int j = (int)gen_below(&g, (uint64_t)i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (int k = 0; k < n; k++) {
    if (mode >= 3 && gen_below(&g, 3) == 0)
      pos += 1 + (size_t)gen_below(&g, 9);
    at[order[k]] = pos;
    pos += counts[order[k]];
  }
  if (mode >= 3 && gen_below(&g, 2) == 0)
    pos += (size_t)gen_below(&g, 6);
  *end = pos;
  if (overlap && mode >= 3 && gen_below(&g, 4) == 0)
    for (int j = 0; j < n; j++)
      if (gen_below(&g, 3) == 0 && counts[j] <= pos)
        at[j] = (size_t)gen_below(&g, pos - counts[j] + 1);
  free(order);
  return mode < 2;
}

/* allgatherv and alltoallv: the blocks and their gaps, the expected
 * receive buffer whole (gaps included: they must stay as they are). */
void prepare_vector(ctx *x, call_state *cs) {
  step *s = cs->s;
  const int q = s->q, me = x->rank;
  const size_t w = width(s->dt);
  size_t send_end, recv_end, *a;
  bool snull = false, rnull;
  uint8_t *want;

  /* sendcounts, sdispls, recvcounts, rdispls, and another rank's sdispls */
  a = cs->arrays = xmalloc(sizeof *a * 5 * (size_t)q);
  if (s->kind == K_ALLGATHERV) {
    rnull = layout(s, me, 1, s->counts, q, a + 3 * q, &recv_end, false);
    cs->recvcounts = s->counts;
    send_end = s->counts[me];
  } else {
    for (int j = 0; j < q; j++) {
      a[j] = s->counts[(size_t)me * q + j];
      a[2 * q + j] = s->counts[(size_t)j * q + me];
    }
    snull = layout(s, me, 2, a, q, a + q, &send_end, true);
    rnull = layout(s, me, 3, a + 2 * q, q, a + 3 * q, &recv_end, false);
    cs->sendcounts = a;
    cs->sdispls = snull ? NULL : a + q;
    cs->recvcounts = a + 2 * q;
  }
  cs->rdispls = rnull ? NULL : a + 3 * q;
  cs->blk_at = a + 3 * q;
  cs->blk_len = cs->recvcounts;
  cs->image = true;
  cs->send_elems = send_end;
  cs->recv_elems = cs->want_elems = recv_end;
  cs->want_at = 0;

  /* The expected receive buffer: the filling, and each block. */
  want = cs->want = xmalloc(recv_end * w);
  fill_bytes(x, q, 0, recv_end * w, want);
  for (int j = 0; j < q; j++) {
    uint64_t from = 0;
    if (s->kind == K_ALLTOALLV) {
      /* Rank j's send buffer holds its bytes from 0; our block is at its
       * sdispls[me]. */
      size_t *row = xmalloc(sizeof *row * (size_t)q), e;
      for (int k = 0; k < q; k++)
        row[k] = s->counts[(size_t)j * q + k];
      layout(s, j, 2, row, q, a + 4 * q, &e, true);
      from = (uint64_t)a[4 * q + me] * w;
      free(row);
    }
    fill_bytes(x, j, from, cs->blk_len[j] * w, want + cs->blk_at[j] * w);
  }
  if (x->corrupt_rank == x->wrank && recv_end > 0) {
    want[(recv_end / 2) * w] ^= 1;
    x->corrupt_rank = -1;
  }

  buf_make(&cs->sb, send_end * w);
  buf_make(&cs->rb, recv_end * w);
  fill_bytes(x, me, 0, send_end * w, cs->sb.p);
  fill_bytes(x, q, 0, recv_end * w, cs->rb.p);
  for (int j = 0; j < q; j++)
    complement(cs->rb.p + cs->blk_at[j] * w, want + cs->blk_at[j] * w,
               cs->blk_len[j] * w);
  if (s->in_place) /* allgatherv: this rank's block is in place already */
    memcpy(cs->rb.p + cs->blk_at[me] * w, cs->sb.p, s->counts[me] * w);
  cs->send_fill = s->in_place ? SEND_UNCHECKED : SEND_BYTES;
  cs->send_arg = s->in_place ? CRNET_IN_PLACE : cs->sb.p;
  cs->recv_arg = cs->rb.p;
}

/* The same over a whole receive buffer of blocks and gaps (allgatherv,
 * alltoallv): says which the first wrong element is in. */
void compare_image(ctx *x, call_state *cs) {
  const step *s = cs->s;
  const size_t w = width(s->dt), n = cs->recv_elems;
  const uint8_t *got = cs->rb.p, *want = cs->want;
  char e[40], g[40], where[96];
  size_t i = 0;
  if (memcmp(got, want, n * w) == 0)
    return;
  while (i < n && memcmp(got + i * w, want + i * w, w) == 0)
    i++;
  snprintf(where, sizeof where, "in a gap between blocks, which must stay "
                                "untouched");
  for (int j = 0; j < s->q; j++)
    if (i >= cs->blk_at[j] && i - cs->blk_at[j] < cs->blk_len[j])
      snprintf(where, sizeof where, "element %zu of the block from rank %d",
               i - cs->blk_at[j], j);
  hex(want + i * w, w, e);
  hex(got + i * w, w, g);
  report(x, s, "result: first wrong element %zu (%s): expected 0x%s, got 0x%s",
         i, where, e, g);
}

