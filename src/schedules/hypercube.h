/* Hypercube schedules: recursive doubling allreduce and allgather,
 * Rabenseifner's reduce-scatter, allreduce and reduce (recursive halving),
 * and prefix sums (scan, exscan; Grama Alg. 4.9). Any p: the reducing
 * collectives fold a non-power-of-two p with the balanced fold of the MPICH
 * thread. See hypercube.c for the algorithms, their costs and the proofs.
 *
 * Conventions are those of circulant.h: every builder is pure, fills a
 * caller-owned crnet__schedule `out` (uninitialised on entry) and returns 0,
 * CRNET_EINVAL (p < 1, rank or root out of range, block counts that
 * overflow) or CRNET_ENOMEM. On success the caller owns the schedule and
 * frees it with crnet__sched_free; on error there is nothing to free. The
 * builders never block and keep no pointer to their arguments.
 *
 * Buffers (units are elements; the vector has m = sum of the block counts):
 *   reduce-scatter  SEND: m elements (blocks in order); RECV: counts[rank].
 *                   In place: input is RECV (m elements), output RECV[0..).
 *   allreduce       SEND, RECV: count elements; in place: RECV only.
 *   allgather       SEND: counts[rank]; RECV: m, block b from rank b. In
 *                   place: rank r's contribution is already at its block of
 *                   RECV.
 *   reduce          SEND: count elements on every rank; RECV: count, at the
 *                   root only. In place: the root's input is in RECV (other
 *                   ranks still read SEND).
 *   scan, exscan    SEND, RECV: count elements; in place: RECV only. exscan
 *                   never writes rank 0's RECV.
 *
 * Operators: every builder here keeps rank order (the lower ranks' operand
 * on the left), so all of them are correct for associative,
 * non-commutative operators; allreduce results are bitwise identical on
 * all ranks.
 */
#ifndef CRNET_HYPERCUBE_H
#define CRNET_HYPERCUBE_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

/* How a non-power-of-two p is folded to p' (see hypercube.c). BALANCED is
 * what the public builders use; NAIVE (odd ranks send everything, even
 * ranks reduce everything) exists so tests and tools can measure the load
 * imbalance the balanced fold removes. */
enum crnet__hypercube_fold {
  CRNET__HYPERCUBE_FOLD_BALANCED = 0,
  CRNET__HYPERCUBE_FOLD_NAIVE = 1
};

/* Recursive doubling. */
int crnet__hypercube_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                               uint64_t count, bool in_place);
/* counts[0..p): elements contributed by rank b. */
int crnet__hypercube_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place);

/* Binomial-tree broadcast of RECV[0..count) from root, for any p. */
int crnet__hypercube_bcast(crnet__schedule *out, int32_t p, int32_t rank,
                           uint64_t count, int32_t root);

/* Rabenseifner (recursive halving). counts[0..p): elements of block b. */
int crnet__rabenseifner_reduce_scatter(crnet__schedule *out, int32_t p,
                                       int32_t rank, const uint64_t *counts,
                                       bool in_place);
int crnet__rabenseifner_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                                  uint64_t count, bool in_place);
int crnet__rabenseifner_reduce(crnet__schedule *out, int32_t p, int32_t rank,
                               uint64_t count, int32_t root, bool in_place);

/* Prefix sums: rank r gets V_0 (+) ... (+) V_r (scan) or
 * V_0 (+) ... (+) V_r-1 (exscan). */
int crnet__hypercube_scan(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);
int crnet__hypercube_exscan(crnet__schedule *out, int32_t p, int32_t rank,
                            uint64_t count, bool in_place);

/* The reducing builders with the fold chosen (enum crnet__hypercube_fold); the
 * functions above are these with CRNET__HYPERCUBE_FOLD_BALANCED. */
int crnet__hypercube_allreduce_fold(crnet__schedule *out, int32_t p,
                                    int32_t rank, uint64_t count, bool in_place,
                                    int fold);
int crnet__rabenseifner_reduce_scatter_fold(crnet__schedule *out, int32_t p,
                                            int32_t rank,
                                            const uint64_t *counts,
                                            bool in_place, int fold);
int crnet__rabenseifner_allreduce_fold(crnet__schedule *out, int32_t p,
                                       int32_t rank, uint64_t count,
                                       bool in_place, int fold);
int crnet__rabenseifner_reduce_fold(crnet__schedule *out, int32_t p,
                                    int32_t rank, uint64_t count, int32_t root,
                                    bool in_place, int fold);

#endif
