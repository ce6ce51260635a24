/* Ring allreduce (Grama et al., Introduction to Parallel Computing, ch. 4;
 * Patarasuk & Yuan, bandwidth-optimal allreduce).
 *
 * The vector of `count` elements is cut into p blocks by crnet__block_range.
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
 */
#include "ring.h"

#include "crnet.h"

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
