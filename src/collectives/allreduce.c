/* Allreduce by the ring algorithm (Grama et al., ch. 4; Patarasuk & Yuan).
 *
 * The vector of `count` elements is cut into p blocks, block b holding
 * count/p elements plus one more for b < count mod p. Rank r works in the
 * receive buffer and one temporary block.
 *
 *   reduce-scatter, rounds k = 0 .. p-2:
 *     send block (r-k) mod p to r+1 || receive block (r-k-1) mod p from r-1
 *     into tmp; block (r-k-1) := tmp (+) block (r-k-1)
 *   After it rank r holds the complete sum of block (r+1) mod p.
 *   allgather, rounds k = 0 .. p-2:
 *     send block (r+1-k) mod p to r+1 || receive block (r-k) mod p from r-1
 *     straight into place
 *
 *   p = 3, rank 0:  round 0  send b0 -> 1, recv b2 <- 2, reduce b2
 *                   round 1  send b2 -> 1, recv b1 <- 2, reduce b1 (done: b1)
 *                   round 2  send b1 -> 1, recv b0 <- 2 (complete)
 *                   round 3  send b0 -> 1, recv b2 <- 2 (complete)
 *
 * Rounds 2(p-1); bytes sent per rank 2(p-1)/p * m; reductions (p-1)/p * m.
 * Cost: 2(p-1)·α + 2(p-1)/p·m·β + (p-1)/p·m·γ.
 * Every block is reduced once, by the rank that completes it, and then only
 * copied, so all ranks end with bitwise identical results. The reduction
 * order along the ring is not rank order, so the op must be commutative;
 * the schedule engine of the next stage routes non-commutative ops elsewhere.
 * Extra memory: one block (m/p bytes, rounded up).
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "ops.h"

/* A 32-bit digest of what every rank must agree on, carried in each frame so
 * that mismatched calls fail instead of exchanging garbage. */
static uint32_t call_signature(crnet_collective coll, size_t count,
                               crnet_datatype dt, crnet_op op) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  uint64_t parts[4] = {(uint64_t)coll, (uint64_t)count, (uint64_t)dt,
                       (uint64_t)(uint32_t)op};
  for (int i = 0; i < 4; i++) {
    for (int b = 0; b < 8; b++) {
      h ^= (parts[i] >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return (uint32_t)(h ^ (h >> 32));
}

static void block_range(size_t count, int p, int b, size_t *off, size_t *n) {
  size_t base = count / (size_t)p, extra = count % (size_t)p;
  size_t ub = (size_t)b;
  *n = base + (ub < extra ? 1 : 0);
  *off = ub * base + (ub < extra ? ub : extra);
}

/* With one rank nothing is combined, but the logical ops still promise 0 or
 * 1: x LAND x and x LOR x are exactly that. */
static int normalise_logical(crnet_op op, crnet_datatype dt, uint8_t *buf,
                             size_t count, size_t esize) {
  uint8_t *copy;
  if (op != CRNET_LAND && op != CRNET_LOR)
    return 0;
  copy = malloc(count * esize);
  if (copy == NULL)
    return CRNET_ENOMEM;
  memcpy(copy, buf, count * esize);
  crnet__reduce(op, dt, copy, buf, count);
  free(copy);
  return 0;
}

int crnet_allreduce(crnet_comm *c, const void *send, void *recv, size_t count,
                    crnet_datatype dt, crnet_op op) {
  size_t esize, max_block, off;
  uint8_t *res = recv, *tmp = NULL;
  uint32_t sig;
  int p, r, next, prev, rc;

  if (c == NULL || (unsigned)dt >= CRNET_DATATYPE_COUNT ||
      !crnet__op_valid(op, dt) || (count > 0 && (recv == NULL || send == NULL)))
    return CRNET_EINVAL;
  esize = crnet_datatype_size(dt);
  if (count > SIZE_MAX / esize)
    return CRNET_EINVAL;
  if (!crnet__op_commutative(op))
    return CRNET_EUNSUPPORTED;
  rc = crnet__coll_begin(c, CRNET_COLL_ALLREDUCE);
  if (rc != 0)
    return rc;
  p = c->size;
  r = c->rank;
  if (send != CRNET_IN_PLACE && count > 0)
    memmove(res, send, count * esize);
  if (count == 0) {
    /* Like MPI, a zero-count allreduce returns at once. */
    crnet__coll_end(c);
    return 0;
  }
  if (p == 1) {
    rc = normalise_logical(op, dt, res, count, esize);
    crnet__coll_end(c);
    return rc;
  }
  next = (r + 1) % p;
  prev = (r + p - 1) % p;
  sig = call_signature(CRNET_COLL_ALLREDUCE, count, dt, op);
  block_range(count, p, 0, &off, &max_block);
  tmp = malloc(max_block > 0 ? max_block * esize : 1);
  if (tmp == NULL) {
    crnet__coll_end(c);
    return CRNET_ENOMEM;
  }
  for (int k = 0; k < p - 1 && rc == 0; k++) {
    size_t soff, sn, roff, rn;
    block_range(count, p, (r - k + p) % p, &soff, &sn);
    block_range(count, p, (r - k - 1 + 2 * p) % p, &roff, &rn);
    rc = crnet__sendrecv(c, next, res + soff * esize, sn * esize, prev, tmp,
                         rn * esize, (uint32_t)k, sig);
    if (rc == 0)
      crnet__reduce(op, dt, tmp, res + roff * esize, rn);
  }
  for (int k = 0; k < p - 1 && rc == 0; k++) {
    size_t soff, sn, roff, rn;
    block_range(count, p, (r + 1 - k + p) % p, &soff, &sn);
    block_range(count, p, (r - k + p) % p, &roff, &rn);
    rc = crnet__sendrecv(c, next, res + soff * esize, sn * esize, prev,
                         res + roff * esize, rn * esize, (uint32_t)(p - 1 + k),
                         sig);
  }
  free(tmp);
  crnet__coll_end(c);
  return rc;
}
