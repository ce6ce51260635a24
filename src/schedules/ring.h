/* Ring schedules (Grama et al., ch. 4; Patarasuk & Yuan): allreduce,
 * reduce-scatter, allgather, bcast and reduce. See ring.c.
 *
 * Builders follow the conventions of circulant.h: pure, fill a caller-owned
 * schedule, return 0, CRNET_EINVAL or CRNET_ENOMEM; on error nothing to free.
 */
#ifndef CRNET_RING_H
#define CRNET_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

/* Allreduce of `count` elements: SEND and RECV as in circulant.h. */
int crnet__ring_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);

/* The builders below follow circulant.h exactly (buffers, in place, return
 * values, ownership); see ring.c for the algorithms and their costs. The
 * reductions combine in ring order, not rank order: commutative operators
 * only. */

/* counts[0..p): elements of block b (the output of rank b). */
int crnet__ring_reduce_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place);
/* counts[0..p): elements contributed by rank b. */
int crnet__ring_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *counts, bool in_place);
/* A pipelined chain in min(count, pieces) pieces (pieces >= 1). */
int crnet__ring_bcast(crnet__schedule *out, int32_t p, int32_t rank,
                      uint64_t count, int32_t root, int32_t pieces);
int crnet__ring_reduce(crnet__schedule *out, int32_t p, int32_t rank,
                       uint64_t count, int32_t root, bool in_place);
/* Prefix sums along the chain 0 -> p-1 (exclusive: exscan). Unlike the
 * others these keep rank order. */
int crnet__ring_scan(crnet__schedule *out, int32_t p, int32_t rank,
                     uint64_t count, bool in_place, bool exclusive);

#endif
