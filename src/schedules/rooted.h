/* Rooted gather and scatter (MPI_Gatherv / MPI_Scatterv semantics: any
 * root, irregular blocks): a binomial tree and a linear (star) schedule for
 * each. See rooted.c for the algorithms, their costs and memory.
 *
 * Conventions as alltoall.h: every builder is pure, fills a caller-owned
 * crnet__schedule `out` (uninitialised on entry) and returns 0, CRNET_EINVAL
 * (out or counts NULL, p < 1, rank or root out of range, block counts whose
 * total overflows) or CRNET_ENOMEM. On success the caller frees the
 * schedule with crnet__sched_free; on error there is nothing to free. They
 * never block and keep no pointer to their arguments.
 *
 * Every rank passes the same counts[0..p): counts[b] elements belong to
 * rank b, and at the root block b lies at P[b], P the prefix sums of counts
 * (crnet__block_offsets), m = P[p] elements in all.
 *
 * Buffers (elements):
 *   gather   SEND: counts[rank]. RECV: the root's m elements, block b from
 *            rank b; non-roots never write RECV. TEMP: the blocks a tree
 *            rank forwards (binomial), none (linear).
 *   scatter  SEND: the root's m elements, block b for rank b; non-roots
 *            never read SEND. RECV: counts[rank], the rank's block. TEMP as
 *            gather.
 * In place is the root's alone (non-roots ignore the flag): gather, the
 * root's own block is already at RECV[P[root]] and is not copied; scatter,
 * the root's own block stays in SEND and the root's RECV is not written.
 * Without it the root copies its own block locally. The root in place
 * never reads SEND (gather) or never writes RECV (scatter), so it is
 * correct whichever buffer the executor maps SEND to.
 */
#ifndef CRNET_ROOTED_H
#define CRNET_ROOTED_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

int crnet__binomial_gather(crnet__schedule *out, int32_t p, int32_t rank,
                           int32_t root, const uint64_t *counts, bool in_place);
int crnet__linear_gather(crnet__schedule *out, int32_t p, int32_t rank,
                         int32_t root, const uint64_t *counts, bool in_place);
int crnet__binomial_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                            int32_t root, const uint64_t *counts,
                            bool in_place);
int crnet__linear_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                          int32_t root, const uint64_t *counts, bool in_place);

#endif
