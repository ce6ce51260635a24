/* Circulant schedules (Träff): reduce-scatter, allreduce, allgather, reduce,
 * bcast and barrier built from one skip sequence; prefix sums by
 * dissemination. See circulant.c for the algorithms, their costs and the
 * proofs.
 *
 * Every builder is pure: called by the collective entry points (and the
 * simulator's tests) on one rank, it fills a caller-owned crnet__schedule
 * `out` (uninitialised on entry) and returns 0, CRNET_EINVAL (bad argument:
 * p < 1, rank or root out of range, an invalid skip sequence, more than
 * 2^32 rounds) or CRNET_ENOMEM. On success the caller owns the schedule and
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
 *   bcast           RECV only: the root's input, everyone's output.
 *   barrier         no buffers.
 *   scan, exscan    SEND, RECV: count elements; in place: RECV only.
 */
#ifndef CRNET_CIRCULANT_H
#define CRNET_CIRCULANT_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

/* A skip sequence is the list of s values of the halving loop of Träff's
 * Algorithm 1: s[0] = p > s[1] > ... > s[n-1] = 1, so n-1 rounds, round j
 * (1-based) having s' = s[j-1] and skip s = s[j]. */

/* Fills s[0..n) for the named sequence: "circulant" (halving, rounding up),
 * "circulant-doubling" (p, then powers of two), "circulant-linear"
 * (p, p-1, ..., 1) or "circulant-sqrt" (p, p-c, p-2c, ... with
 * c = ceil(sqrt p), finished by halving). `s` must have room for p values
 * (the longest, linear, has p). Returns n >= 1, or CRNET_EINVAL for an
 * unknown name or p < 1. */
int crnet__circulant_skips(const char *name, int32_t p, int32_t *s);

/* 0 if s[0..n) is valid for p (s[0] = p, strictly decreasing, s[n-1] = 1,
 * s[j-1] <= 2 s[j]; see the proof in circulant.c), else CRNET_EINVAL. */
int crnet__circulant_skips_check(const int32_t *s, int32_t n, int32_t p);

/* True if every round has s' - s = 1 (circulant-linear, and any p <= 2):
 * then the builders preserve rank order for non-commutative operators. */
bool crnet__circulant_skips_ordered(const int32_t *s, int32_t n);

/* counts[0..p): elements of block b (the output of rank b). */
int crnet__circulant_reduce_scatter(crnet__schedule *out, const int32_t *skips,
                                    int32_t nskips, int32_t p, int32_t rank,
                                    const uint64_t *counts, bool in_place);
int crnet__circulant_allreduce(crnet__schedule *out, const int32_t *skips,
                               int32_t nskips, int32_t p, int32_t rank,
                               uint64_t count, bool in_place);
/* counts[0..p): elements contributed by rank b. */
int crnet__circulant_allgather(crnet__schedule *out, const int32_t *skips,
                               int32_t nskips, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place);
int crnet__circulant_reduce(crnet__schedule *out, const int32_t *skips,
                            int32_t nskips, int32_t p, int32_t rank,
                            uint64_t count, int32_t root, bool in_place);
int crnet__circulant_bcast(crnet__schedule *out, const int32_t *skips,
                           int32_t nskips, int32_t p, int32_t rank,
                           uint64_t count, int32_t root);
int crnet__circulant_barrier(crnet__schedule *out, const int32_t *skips,
                             int32_t nskips, int32_t p, int32_t rank);

/* Allreduce of small vectors: the allgather of whole vectors into TEMP
 * (p·count elements), then a local fold in rank order. Rounds as the
 * allgather (ceil(log2 p) with halving skips); buffers as allreduce; any
 * associative operator; bitwise identical results everywhere. */
int crnet__circulant_allreduce_gather(crnet__schedule *out,
                                      const int32_t *skips, int32_t nskips,
                                      int32_t p, int32_t rank, uint64_t count,
                                      bool in_place);

/* Prefix sums by dissemination (skips 1, 2, 4, ... not wrapped around; no
 * skip sequence argument): rank r gets V_0 (+) ... (+) V_r (scan) or
 * V_0 (+) ... (+) V_r-1 (exscan, rank 0's RECV never written), in
 * ceil(log2 p) rounds for any p, in rank order (non-commutative operators
 * are fine). SEND, RECV: count elements; in place: RECV only. */
int crnet__circulant_scan(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);
int crnet__circulant_exscan(crnet__schedule *out, int32_t p, int32_t rank,
                            uint64_t count, bool in_place);

#endif
