/* Ring collectives (Grama et al., Introduction to Parallel Computing, ch. 4;
 * Patarasuk & Yuan, bandwidth-optimal allreduce), restated in
 * ../shared/papers/README.md §3. ALLREDUCE first, then the others.
 *
 * ALLREDUCE. The vector of `count` elements is cut into p blocks by
 * crnet__block_range.
 * Rank r works in RECV (after copying SEND there) and receives into TEMP.
 *
 *   reduce-scatter, rounds k = 0 .. p-2:
 *     send block (r-k) mod p to r+1 || receive block (r-k-1) mod p from r-1
 *     into TEMP; block (r-k-1) := TEMP (+) block (r-k-1)
 *   After it rank r holds the complete sum of block (r+1) mod p.
 *   allgather, rounds k = p-1 .. 2p-3 (j = k-p+1):
 *     send block (r+1-j) mod p to r+1 || receive block (r-j) mod p from r-1
 *     straight into place
 *
 *   p = 3, rank 0:  round 0  send b0 -> 1, recv b2 <- 2, reduce b2
 *                   round 1  send b2 -> 1, recv b1 <- 2, reduce b1 (b1 done)
 *                   round 2  send b1 -> 1, recv b0 <- 2 (complete)
 *                   round 3  send b0 -> 1, recv b2 <- 2 (complete)
 *
 * Rounds: 2(p-1). Per rank: 2(p-1) blocks sent and received, p-1 reduced.
 * Cost: 2(p-1)·α + 2(p-1)/p·m·β + (p-1)/p·m·γ.
 * Every block is reduced once, by the rank that completes it, and then only
 * copied: all ranks end with bitwise identical results. The reduction order
 * along the ring is not rank order, so the operator must be commutative.
 * Extra memory: one block (ceil(count/p) elements).
 *
 * REDUCE-SCATTER, ALLGATHER, BCAST, REDUCE (any block sizes; Grama ch. 4,
 * restated in ../shared/papers/README.md §3). Buffers as in circulant.h.
 * Operators: the reductions combine partials in ring order, which is not
 * rank order, so (as for the allreduce) the operator must be commutative;
 * selection must not give these builders a non-commutative one.
 *
 * REDUCE-SCATTER with blocks counts[0..p) (block b is rank b's output,
 * m = sum of the counts), rounds k = 0 .. p-2:
 *   send the partial of block (r-k-1) mod p to r+1 || receive the partial of
 *   block (r-k-2) mod p from r-1 and reduce it with the own input block.
 *   At k = 0 the partial sent is the raw input; at k = p-2 the block
 *   received is r itself, whose sum is then complete.
 *   Rounds p-1 (every round has a message, zero-length ones included, so
 *   the count never depends on the sizes). Per rank: m - counts[r]
 *   elements sent (every block but its own), m - counts[r-1] received and
 *   reduced (every block but r-1's, whose raw input it sends first);
 *   (p-1)/p·m each way for equal blocks.
 *   Cost: (p-1)·α + (p-1)/p·m·(β+γ) for equal blocks; for irregular blocks
 *   the rounds run at the pace of the largest block: up to (p-1)·(α +
 *   max_b counts[b]·(β+γ)).
 *   Memory: not in place, the partials travel through TEMP, double buffered
 *   (2·max block: a round sends the one partial while receiving the next);
 *   in place, they are reduced at their position in RECV and received into
 *   one block of TEMP, and rank r's sum goes to RECV[0..counts[r]) by one
 *   final copy unless block r starts at 0.
 *
 * ALLGATHER with per-rank counts, rounds j = 0 .. p-2: send block (r-j) to
 * r+1 || receive block (r-j-1) from r-1 straight into its place in RECV.
 * The first send reads SEND (not in place), and the own block is copied to
 * its place after the last round. p-1 rounds; m - counts[r] received per
 * rank; (p-1)·α + (p-1)/p·m·β for equal blocks. No TEMP.
 *
 * BCAST from any root: a pipelined chain root, root+1, ..., root+p-1 over
 * the nb = min(count, pieces) non-empty pieces of crnet__block_range(count,
 * nb, .): relative rank i = r-root sends piece b in round b+i and receives
 * it in round b+i-1. Rounds nb+p-2 (none for count = 0); every non-root
 * rank receives m once, every rank but root-1 sends m: (nb+p-2)·(α +
 * m/nb·β). The caller picks `pieces` (crnet__chain_pieces: the nb that
 * minimises that price, about sqrt((p-2)·m·β/α)), so for large m the
 * chain approaches m·β, where every schedule that scatters first and
 * gathers after moves 2(p-1)/p·m. With pieces = p it is "scatter + ring
 * allgather": the scatter pipelined along the ring leaves block x at ranks
 * root..root+x, and the allgather pruned to what is missing carries it on
 * to root+p-1, a chain. No TEMP.
 *
 * SCAN and EXSCAN (a pipelined chain 0 -> 1 -> ... -> p-1, like BCAST's
 * but always over the nb = min(count, p) blocks of crnet__block_range; unlike
 * the other ring schedules it keeps rank order, because the prefix only ever
 * grows at its right end): rank i receives block b of the prefix P_{i-1} in
 * round b+i-1 and sends block b of P_i in round b+i. Scan, not in place:
 * the block lands in RECV and RECV = RECV (+) SEND (the prefix is the left
 * operand); in place: it lands in TEMP (one block) and RECV = TEMP (+)
 * RECV. Rank 0 copies SEND to RECV. Exscan: RECV gets P_{i-1} as it comes
 * (rank 0's RECV is left untouched), and P_i = P_{i-1} (+) V_i is formed in
 * TEMP (m elements), from where it leaves in the next round; in place V_i
 * is saved in one more block of TEMP before P_{i-1} overwrites it. Rounds
 * nb+p-2; every rank but the last sends m and every rank but 0 receives
 * and reduces m: (2p-2)·(α + m/p·(β + γ)) ~ 2m·(β + γ) for large m,
 * against the dissemination scan's ceil(log2 p)·m·(β + γ). TEMP: a block
 * (scan in place), m (exscan), m + a block (exscan in place).
 *
 * REDUCE to any root: the ring reduce-scatter with p blocks of
 * crnet__block_range (each rank ends with the sum of its block), then a
 * pipelined ring gather to the root: in round j = 0 .. p-2 relative rank
 * i >= 1 sends block (r-j) to r+1 if i-j >= 1 (its own first, then what it
 * received the round before), and the root receives block root-1-j from
 * root-1 straight into place. Chosen over a chain reduce because it reduces
 * each element once in total ((p-1)/p·m per rank, not m). Rounds 2(p-1);
 * the root receives 2(p-1)/p·m (p-1 blocks to reduce, every block but
 * root-1's; p-1 to gather, every block but its own);
 * rank root+i sends (p-1)/p·m + i/p·m. Cost: 2(p-1)·α + 2(p-1)/p·m·β
 * (the root's link) + (p-1)/p·m·γ. Memory: root as the reduce-scatter
 * (in place: its input is RECV; other ranks still read SEND, as in
 * circulant.h); other ranks 3 blocks of TEMP: two slots used first for the
 * reduce-scatter's partials, then for the blocks the gather forwards, and
 * one for the rank's own sum.
 *
 * Worked example, p = 5, reduce-scatter, rank 0 (blocks b0..b4):
 *   round 0  send b4 (raw) -> 1   recv b3 <- 4, reduce
 *   round 1  send b3        -> 1   recv b2 <- 4, reduce
 *   round 2  send b2        -> 1   recv b1 <- 4, reduce
 *   round 3  send b1        -> 1   recv b0 <- 4, reduce: b0 complete
 * 4 = p-1 blocks each way. Allgather, rank 0: sends b0, b4, b3, b2 to 1
 * and receives b4, b3, b2, b1 from 4 in rounds 0..3. Bcast in 5 pieces,
 * root 0, count >= 5: rank 2 receives b0..b4 in rounds 1..5 and sends
 * them in rounds 2..6 (8 rounds in all).
 * Reduce to root 0: after the reduce-scatter rank i holds its block i;
 * gather rounds 4..7: rank 4 sends b4, b3, b2, b1 to 0, rank 3 sends
 * b3, b2, b1 to 4 in rounds 4..6, and so on.
 */
#include "ring.h"

#include <stdlib.h>

#include "algorithm.h"
#include "alloc.h"
#include "alltoall.h"
#include "crnet.h"
#include "model.h"

int crnet__ring_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place) {
  int32_t next = (rank + 1) % p, prev = (rank + p - 1) % p;
  uint64_t off, n, max_block;
  if (p < 1 || rank < 0 || rank >= p)
    return CRNET_EINVAL;
  crnet__sched_init(out, p, rank);
  crnet__block_range(count, p, 0, &off, &max_block);
  if (!in_place) {
    crnet__sched_round(out);
    crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, count),
                      crnet__seg_make(CRNET__BUF_RECV, 0, count));
  }
  if (p > 1)
    crnet__sched_need_temp(out, max_block);
  for (int32_t k = 0; k < p - 1; k++) {
    int32_t sb = (rank - k + p) % p, rb = (rank - k - 1 + 2 * p) % p;
    crnet__sched_round(out);
    crnet__block_range(count, p, sb, &off, &n);
    crnet__sched_send_peer(out, next);
    crnet__sched_send(out, next, CRNET__BUF_RECV, off, n);
    crnet__block_range(count, p, rb, &off, &n);
    crnet__sched_recv_peer(out, prev);
    crnet__sched_recv(out, prev, CRNET__BUF_TEMP, 0, n);
    crnet__sched_reduce(out, crnet__seg_make(CRNET__BUF_TEMP, 0, n),
                        crnet__seg_make(CRNET__BUF_RECV, off, n),
                        CRNET__SRC_LEFT);
  }
  for (int32_t j = 0; j < p - 1; j++) {
    int32_t sb = (rank + 1 - j + p) % p, rb = (rank - j + p) % p;
    crnet__sched_round(out);
    crnet__block_range(count, p, sb, &off, &n);
    crnet__sched_send_peer(out, next);
    crnet__sched_send(out, next, CRNET__BUF_RECV, off, n);
    crnet__block_range(count, p, rb, &off, &n);
    crnet__sched_recv_peer(out, prev);
    crnet__sched_recv(out, prev, CRNET__BUF_RECV, off, n);
  }
  return crnet__sched_finish(out);
}

static int32_t ring_mod(int64_t x, int32_t p) {
  return (int32_t)(((x % p) + p) % p);
}

/* Prefix offsets of counts[0..p) into P[0..p]; NULL on allocation failure. */
static uint64_t *prefix(const uint64_t *counts, int32_t p, uint64_t *max) {
  uint64_t *P = crnet__malloc(((size_t)p + 1) * sizeof(*P));
  if (P == NULL)
    return NULL;
  P[0] = 0;
  *max = 0;
  for (int32_t b = 0; b < p; b++) {
    P[b + 1] = P[b] + counts[b];
    if (counts[b] > *max)
      *max = counts[b];
  }
  return P;
}

/* The reduce-scatter rounds (p >= 2): block b of the input is at
 * in_buf[P[b]..P[b+1]); rank r's sum ends in `fin`. With `at_input` the
 * partials are reduced at their input position (in_buf must then be RECV)
 * and TEMP[tb..tb+B) receives; otherwise the partials live in
 * TEMP[tb..tb+2B), double buffered, and `fin` must lie outside that. */
static void rs_rounds(crnet__schedule *s, int32_t p, int32_t r,
                      const uint64_t *P, uint64_t B, uint8_t in_buf,
                      bool at_input, crnet__seg fin, uint64_t tb) {
  int32_t next = ring_mod(r + 1, p), prev = ring_mod(r - 1, p);
  for (int32_t k = 0; k < p - 1; k++) {
    int32_t sb = ring_mod((int64_t)r - k - 1, p);
    int32_t rb = ring_mod((int64_t)r - k - 2, p);
    uint64_t sn = P[sb + 1] - P[sb], rn = P[rb + 1] - P[rb];
    bool last = k == p - 2;
    crnet__seg in_rb = crnet__seg_make(in_buf, P[rb], rn);
    crnet__sched_round(s);
    crnet__sched_send_peer(s, next);
    if (k == 0 || at_input)
      crnet__sched_send(s, next, in_buf, P[sb], sn);
    else
      crnet__sched_send(s, next, CRNET__BUF_TEMP,
                        tb + (uint64_t)((k - 1) % 2) * B, sn);
    crnet__sched_recv_peer(s, prev);
    if (at_input) {
      crnet__seg t = crnet__seg_make(CRNET__BUF_TEMP, tb, rn);
      crnet__sched_recv(s, prev, CRNET__BUF_TEMP, tb, rn);
      if (!last || (fin.buf == in_buf && fin.off == P[rb])) {
        crnet__sched_reduce(s, t, in_rb, CRNET__SRC_LEFT);
      } else {
        /* fin overlaps other input blocks: sum in TEMP, then move. */
        crnet__sched_reduce(s, in_rb, t, CRNET__DST_LEFT);
        crnet__sched_copy(s, t, fin);
      }
    } else {
      crnet__seg d =
          last ? fin
               : crnet__seg_make(CRNET__BUF_TEMP,
                                 tb + (uint64_t)(k % 2) * B, rn);
      crnet__sched_recv(s, prev, d.buf, d.off, rn);
      crnet__sched_reduce(s, in_rb, d, CRNET__DST_LEFT);
    }
  }
}

int crnet__ring_reduce_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place) {
  uint64_t B;
  if (p < 1 || rank < 0 || rank >= p || counts == NULL)
    return CRNET_EINVAL;
  uint64_t *P = prefix(counts, p, &B);
  if (P == NULL)
    return CRNET_ENOMEM;
  crnet__sched_init(out, p, rank);
  crnet__seg fin = crnet__seg_make(CRNET__BUF_RECV, 0, counts[rank]);
  if (p == 1) {
    if (!in_place) {
      crnet__sched_round(out);
      crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, counts[0]),
                        fin);
    }
  } else {
    crnet__sched_need_temp(out, in_place ? B : 2 * B);
    rs_rounds(out, p, rank, P, B,
              in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND, in_place, fin, 0);
  }
  free(P);
  return crnet__sched_finish(out);
}

int crnet__ring_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *counts, bool in_place) {
  uint64_t B;
  if (p < 1 || rank < 0 || rank >= p || counts == NULL)
    return CRNET_EINVAL;
  uint64_t *P = prefix(counts, p, &B);
  if (P == NULL)
    return CRNET_ENOMEM;
  int32_t next = ring_mod(rank + 1, p), prev = ring_mod(rank - 1, p);
  crnet__seg own = crnet__seg_make(CRNET__BUF_SEND, 0, counts[rank]);
  crnet__seg place = crnet__seg_make(CRNET__BUF_RECV, P[rank], counts[rank]);
  crnet__sched_init(out, p, rank);
  if (p == 1)
    crnet__sched_round(out);
  for (int32_t j = 0; j < p - 1; j++) {
    int32_t sb = ring_mod((int64_t)rank - j, p);
    int32_t rb = ring_mod((int64_t)rank - j - 1, p);
    crnet__sched_round(out);
    crnet__sched_send_peer(out, next);
    if (j == 0 && !in_place)
      crnet__sched_send(out, next, own.buf, own.off, own.count);
    else
      crnet__sched_send(out, next, CRNET__BUF_RECV, P[sb], P[sb + 1] - P[sb]);
    crnet__sched_recv_peer(out, prev);
    crnet__sched_recv(out, prev, CRNET__BUF_RECV, P[rb], P[rb + 1] - P[rb]);
  }
  /* After the last round, so the copy never delays a message. */
  if (!in_place)
    crnet__sched_copy(out, own, place);
  free(P);
  return crnet__sched_finish(out);
}

int crnet__ring_bcast(crnet__schedule *out, int32_t p, int32_t rank,
                      uint64_t count, int32_t root, int32_t pieces) {
  if (p < 1 || rank < 0 || rank >= p || root < 0 || root >= p || pieces < 1)
    return CRNET_EINVAL;
  int32_t i = ring_mod((int64_t)rank - root, p);
  int32_t next = ring_mod(rank + 1, p), prev = ring_mod(rank - 1, p);
  int32_t nb = count < (uint64_t)pieces ? (int32_t)count : pieces;
  crnet__sched_init(out, p, rank);
  for (int64_t t = 0; p > 1 && nb > 0 && t < (int64_t)nb + p - 2; t++) {
    uint64_t off, n;
    crnet__sched_round(out);
    if (i < p - 1 && t - i >= 0 && t - i < nb) {
      crnet__block_range(count, nb, (int32_t)(t - i), &off, &n);
      crnet__sched_send_peer(out, next);
      crnet__sched_send(out, next, CRNET__BUF_RECV, off, n);
    }
    if (i >= 1 && t - i + 1 >= 0 && t - i + 1 < nb) {
      crnet__block_range(count, nb, (int32_t)(t - i + 1), &off, &n);
      crnet__sched_recv_peer(out, prev);
      crnet__sched_recv(out, prev, CRNET__BUF_RECV, off, n);
    }
  }
  return crnet__sched_finish(out);
}

int crnet__ring_reduce(crnet__schedule *out, int32_t p, int32_t rank,
                       uint64_t count, int32_t root, bool in_place) {
  if (p < 1 || rank < 0 || rank >= p || root < 0 || root >= p)
    return CRNET_EINVAL;
  uint64_t *P = crnet__malloc(((size_t)p + 1) * sizeof(*P)), B, n;
  if (P == NULL)
    return CRNET_ENOMEM;
  for (int32_t b = 0; b < p; b++)
    crnet__block_range(count, p, b, &P[b], &n);
  P[p] = count;
  crnet__block_range(count, p, 0, &n, &B);
  crnet__sched_init(out, p, rank);
  int32_t i = ring_mod((int64_t)rank - root, p);
  int32_t next = ring_mod(rank + 1, p), prev = ring_mod(rank - 1, p);
  if (p == 1) {
    if (!in_place) {
      crnet__sched_round(out);
      crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, count),
                        crnet__seg_make(CRNET__BUF_RECV, 0, count));
    }
  } else if (i == 0) {
    crnet__seg fin =
        crnet__seg_make(CRNET__BUF_RECV, P[rank], P[rank + 1] - P[rank]);
    crnet__sched_need_temp(out, in_place ? B : 2 * B);
    rs_rounds(out, p, rank, P, B,
              in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND, in_place, fin, 0);
    for (int32_t j = 0; j < p - 1; j++) {
      int32_t rb = ring_mod((int64_t)rank - 1 - j, p);
      crnet__sched_round(out);
      crnet__sched_recv_peer(out, prev);
      crnet__sched_recv(out, prev, CRNET__BUF_RECV, P[rb], P[rb + 1] - P[rb]);
    }
  } else {
    crnet__seg fin = crnet__seg_make(CRNET__BUF_TEMP, 2 * B,
                                     P[rank + 1] - P[rank]);
    crnet__sched_need_temp(out, 3 * B);
    rs_rounds(out, p, rank, P, B, CRNET__BUF_SEND, false, fin, 0);
    for (int32_t j = 0; j < p - 1; j++) {
      int32_t sb = ring_mod((int64_t)rank - j, p);
      int32_t rb = ring_mod((int64_t)rank - 1 - j, p);
      crnet__sched_round(out);
      if (i - j >= 1) {
        crnet__sched_send_peer(out, next);
        if (j == 0)
          crnet__sched_send(out, next, fin.buf, fin.off, fin.count);
        else
          crnet__sched_send(out, next, CRNET__BUF_TEMP,
                            (uint64_t)((j - 1) % 2) * B, P[sb + 1] - P[sb]);
      }
      if (i - 1 - j >= 1) {
        crnet__sched_recv_peer(out, prev);
        crnet__sched_recv(out, prev, CRNET__BUF_TEMP,
                          (uint64_t)(j % 2) * B, P[rb + 1] - P[rb]);
      }
    }
  }
  free(P);
  return crnet__sched_finish(out);
}

int crnet__ring_scan(crnet__schedule *out, int32_t p, int32_t rank,
                     uint64_t count, bool in_place, bool exclusive) {
  if (p < 1 || rank < 0 || rank >= p)
    return CRNET_EINVAL;
  int64_t i = rank, nb = count < (uint64_t)p ? (int64_t)count : p;
  uint64_t blk = (count + (uint64_t)p - 1) / (uint64_t)p; /* largest block */
  uint64_t save = count; /* exscan in place: where V_i's block waits */
  crnet__sched_init(out, p, rank);
  if (exclusive && i > 0 && i < p - 1)
    crnet__sched_need_temp(out, in_place ? count + blk : count);
  else if (exclusive && i == p - 1 && in_place)
    crnet__sched_need_temp(out, count);
  else if (!exclusive && in_place && i > 0)
    crnet__sched_need_temp(out, blk);
  if (p == 1 || nb == 0) {
    if (!exclusive && !in_place && count > 0) {
      crnet__sched_round(out);
      crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, count),
                        crnet__seg_make(CRNET__BUF_RECV, 0, count));
    }
    return crnet__sched_finish(out);
  }
  for (int64_t t = 0; t < nb + p - 2; t++) {
    uint64_t off, n;
    int64_t b = t - i, c = t - i + 1; /* block sent, block received */
    crnet__sched_round(out);
    if (i < p - 1 && b >= 0 && b < nb) {
      uint8_t from = i == 0 ? CRNET__BUF_SEND
                     : exclusive ? CRNET__BUF_TEMP
                                 : CRNET__BUF_RECV;
      crnet__block_range(count, p, (int32_t)b, &off, &n);
      crnet__sched_send_peer(out, (int32_t)i + 1);
      crnet__sched_send(out, (int32_t)i + 1, from, off, n);
    }
    if (i >= 1 && c >= 0 && c < nb) {
      crnet__block_range(count, p, (int32_t)c, &off, &n);
      crnet__seg recv = crnet__seg_make(CRNET__BUF_RECV, off, n);
      crnet__seg temp = crnet__seg_make(CRNET__BUF_TEMP, off, n);
      crnet__seg own = crnet__seg_make(CRNET__BUF_SEND, off, n);
      crnet__sched_recv_peer(out, (int32_t)i - 1);
      if (!exclusive && !in_place) {
        crnet__sched_recv(out, (int32_t)i - 1, CRNET__BUF_RECV, off, n);
        crnet__sched_reduce(out, own, recv, CRNET__DST_LEFT);
      } else if (!exclusive) {
        crnet__seg t0 = crnet__seg_make(CRNET__BUF_TEMP, 0, n);
        crnet__sched_recv(out, (int32_t)i - 1, CRNET__BUF_TEMP, 0, n);
        crnet__sched_reduce(out, t0, recv, CRNET__SRC_LEFT);
      } else if (!in_place) {
        crnet__sched_recv(out, (int32_t)i - 1, CRNET__BUF_RECV, off, n);
        if (i < p - 1) {
          crnet__sched_copy(out, recv, temp);
          crnet__sched_reduce(out, own, temp, CRNET__DST_LEFT);
        }
      } else {
        crnet__seg v = crnet__seg_make(CRNET__BUF_TEMP, save, n);
        crnet__sched_recv(out, (int32_t)i - 1, CRNET__BUF_TEMP, off, n);
        if (i < p - 1)
          crnet__sched_copy(out, recv, v);
        crnet__sched_copy(out, temp, recv);
        if (i < p - 1)
          crnet__sched_reduce(out, v, temp, CRNET__DST_LEFT);
      }
    }
    if (t == 0 && i == 0 && !exclusive && !in_place)
      crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, count),
                        crnet__seg_make(CRNET__BUF_RECV, 0, count));
  }
  return crnet__sched_finish(out);
}

/* --- the registry's row (algorithm.h) --------------------------------------
 *
 * Model terms (R, B/m, G/m; q = (p-1)/p), the simulator's synchronous-round
 * counts for equal blocks; every round is priced at ring_round·α:
 *
 *   allreduce, reduce   2(p-1), 2q, q
 *   reduce-scatter      p-1, q, q
 *   allgather           p-1, q, -
 *   bcast (a chain)     nb+p-2, (nb+p-2)/nb, -   in nb pieces
 *                                               (crnet__chain_pieces)
 *   scan                2(p-1), 2q, 2q           (exscan: G = (2p-3)/p, 0
 *                                               at p = 2)
 *   all-to-all          p-1, (p-1)/2, -          (alltoall.c)
 *   alltoallv           p-1, q, -
 */

static int ring_build(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__ring_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__ring_reduce_scatter(out, c->p, c->rank, c->counts,
                                      c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__ring_allgather(out, c->p, c->rank, c->counts, c->in_place);
  case CRNET_COLL_BCAST:
    return crnet__ring_bcast(out, c->p, c->rank, c->count, c->root,
                             crnet__chain_pieces(c));
  case CRNET_COLL_REDUCE:
    return crnet__ring_reduce(out, c->p, c->rank, c->count, c->root,
                              c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__ring_alltoall(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_SCAN:
    return crnet__ring_scan(out, c->p, c->rank, c->count, c->in_place,
                            c->exclusive);
  case CRNET_COLL_ALLTOALLV:
    return crnet__ring_alltoallv(out, c->p, c->rank, c->counts, c->sdispls,
                                 c->rcounts, c->rdispls);
  default:
    return CRNET_EINVAL;
  }
}

static bool ring_terms(const crnet__call *call, crnet__model_coef *c) {
  int32_t p = call->p;
  double q = (double)(p - 1) / p, nb;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
    *c = (crnet__model_coef){2.0 * (p - 1), 2 * q, q};
    return true;
  case CRNET_COLL_REDUCE_SCATTER:
    *c = (crnet__model_coef){p - 1.0, q, q};
    return true;
  case CRNET_COLL_ALLGATHER:
    *c = (crnet__model_coef){p - 1.0, q, 0};
    return true;
  case CRNET_COLL_BCAST:
    nb = crnet__chain_pieces(call);
    *c = (crnet__model_coef){nb + p - 2, (nb + p - 2) / nb, 0};
    return true;
  case CRNET_COLL_SCAN:
    /* the pipelined chain: 2(p-1) rounds of a p-th of the vector on the
     * last rank's path; exscan: the last rank reduces nothing, one block
     * less on the path */
    *c = (crnet__model_coef){2.0 * (p - 1), 2 * q,
                             !call->exclusive ? 2 * q
                             : p > 2          ? (2.0 * p - 3) / p
                                              : 0};
    return true;
  case CRNET_COLL_ALLTOALL:
    *c = (crnet__model_coef){p - 1.0, (p - 1) / 2.0, 0};
    return true;
  case CRNET_COLL_ALLTOALLV:
    *c = (crnet__model_coef){p - 1.0, q, 0};
    return true;
  default:
    return false;
  }
}

/* The scan is a chain from rank 0 up: the prefix grows in rank order. The
 * other reductions combine in ring order. */
static int ring_keeps_order(const crnet__call *call, bool *ordered) {
  *ordered = call->coll == CRNET_COLL_SCAN;
  return 0;
}

static int32_t ring_peers(const crnet__call *call) {
  (void)call;
  return 2;
}

const crnet__algorithm crnet__ring_algorithm = {
    .name = "ring",
    .id = 5,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE_SCATTER) |
             CRNET__COLL_BIT(CRNET_COLL_ALLGATHER) |
             CRNET__COLL_BIT(CRNET_COLL_BCAST) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_ALLTOALL) |
             CRNET__COLL_BIT(CRNET_COLL_SCAN) |
             CRNET__COLL_BIT(CRNET_COLL_ALLTOALLV),
    .in_auto = true,
    .ring_rounds = true,
    .build = ring_build,
    .terms = ring_terms,
    .keeps_order = ring_keeps_order,
    .peers = ring_peers,
    .summary = "the ring (Patarasuk and Yuan): p-1 rounds each way at optimal "
               "volume, each waiting only for a neighbour; bcast and scan as "
               "pipelined chains"};
