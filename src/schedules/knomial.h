/* k-nomial trees: bcast, reduce, barrier and allreduce over a tree of
 * radix k (k = 2: the binomial tree). See knomial.c for the tree, its
 * rounds, costs and memory, and for how auto chooses k.
 *
 * This header exists for the tests (tests/test_sim_knomial.c), which build
 * the tree at every radix, not only at the one the model picks; the
 * library reaches the schedule through its registry row alone.
 */
#ifndef CRNET_KNOMIAL_H
#define CRNET_KNOMIAL_H

#include <stdbool.h>
#include <stdint.h>

#include "crnet.h"
#include "schedule.h"
#include "select.h"

/* The largest radix auto considers: a level's k-1 messages then fit the
 * executor's default window of rounds in flight (CRNET_ROUNDS_IN_FLIGHT,
 * 8). The builder takes any radix from 2 on. */
#define CRNET__KNOMIAL_MAX_RADIX 8

/* Builds rank `rank`'s schedule of `coll` (bcast, reduce, barrier or
 * allreduce) over the k-nomial tree of radix `radix` rooted at `root`
 * (allreduce and barrier: rank 0), into the caller-owned `out`
 * (uninitialised on entry). count is the vector's length (ignored by
 * barrier); in_place as crnet__call's. 0, CRNET_EINVAL (out NULL, p < 1,
 * rank or root out of range, radix < 2, another collective) or
 * CRNET_ENOMEM; on success the caller frees out with crnet__sched_free. */
int crnet__knomial_build(crnet__schedule *out, crnet_collective coll, int32_t p,
                         int32_t rank, int32_t root, uint64_t count,
                         bool in_place, int32_t radix);

/* The tree's levels at p ranks and radix k: ceil(log_k p) (0 at p = 1). */
int crnet__knomial_levels(int32_t p, int32_t radix);

/* S, the rounds of one tree (bcast, reduce; allreduce and barrier run two):
 * ceil(p / k^(L-1)) - 1 at the top level, k-1 at each other; (k-1)·L when
 * p = k^L. Also the children of rank 0 as the root, the most peers any rank
 * of the tree has. */
int32_t crnet__knomial_tree_rounds(int32_t p, int32_t radix);

/* The radix auto's model picks for the call, 2 .. CRNET__KNOMIAL_MAX_RADIX:
 * a function of (coll, p, count, esize, tuning, shm_links) alone, never of
 * the rank, so every rank builds the same tree. */
int32_t crnet__knomial_radix(const crnet__call *call);

#endif
