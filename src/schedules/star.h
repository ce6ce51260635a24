/* Star graph schedules (Oh, Choi, Primeaux, ICCS 2005): allreduce and
 * allgather on the n-star S_n, p = n! ranks, in n(n-1)/2 rounds, each
 * moving the whole vector (allreduce) or whole sub-stars' blocks
 * (allgather). A p that is not a factorial is folded onto p' = n!, the
 * largest factorial <= p, with the hypercube's balanced fold generalised to
 * groups of up to n+1 ranks. See star.c for the algorithms, their costs, the
 * fold's rounds and the proofs.
 *
 * Conventions are those of hypercube.h: every builder is pure, fills a
 * caller-owned crnet__schedule `out` (uninitialised on entry) and returns 0,
 * CRNET_EINVAL (out NULL, p < 1, rank out of range, counts NULL, block
 * counts that overflow, a count whose TEMP would overflow) or CRNET_ENOMEM. On
 * success the caller owns the schedule and frees it with crnet__sched_free; on
 * error there is nothing to free. The builders never block and keep no pointer
 * to their arguments.
 *
 * Buffers (units are elements; the vector has m = sum of the block counts):
 *   allreduce  SEND, RECV: count elements; in place: RECV only.
 *              TEMP: (n-1)·count for the star, 2·ceil(count/g) for a fold
 *              group of g ranks (the larger of the two).
 *   allgather  SEND: counts[rank]; RECV: m, block b from rank b. In place:
 *              rank r's contribution is already at its block of RECV.
 *              No TEMP.
 *
 * Operators: the allreduce keeps rank order. Ranks are numbered so that
 * every sub-star is a contiguous range of ranks, and each rank combines the
 * sub-star sums of a level in ascending order of their ranges, lower on the
 * left; the fold keeps rank order inside its groups (proof in star.c). So
 * associative, non-commutative operators are fine. Every rank also builds
 * the same expression tree, so results are bitwise identical on all ranks,
 * even for floating point. (The paper's own order, arrival order, is
 * neither: it differs from rank to rank.)
 */
#ifndef CRNET_STAR_H
#define CRNET_STAR_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

int crnet__star_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);
/* counts[0..p): elements contributed by rank b. */
int crnet__star_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *counts, bool in_place);

/* For tools and tests. n of the largest factorial n! <= p (1 for p = 1, at
 * most 12 for an int32_t p), or CRNET_EINVAL for p < 1. */
int crnet__star_n(int32_t p);
/* Rounds of crnet__star_allreduce for p, the fold included: n(n-1)/2 for
 * p = n!, else n(n-1)/2 + (G-1) + 2·ceil(log2 G) with G = ceil(p/n!) the
 * largest fold group; 0 for p = 1 (no communication), CRNET_EINVAL for
 * p < 1. The allgather needs G-1 fewer: n(n-1)/2 + 2·ceil(log2 G). */
int crnet__star_rounds(int32_t p);

#endif
