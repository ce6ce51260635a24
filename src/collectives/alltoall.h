/* All-to-all (personalized, MPI_Alltoall semantics) schedules: pairwise
 * exchange, ring store-and-forward, Bruck's log-round algorithm and the
 * hypercube store-and-forward variant. See
 * alltoall.c for the algorithms, their costs and memory.
 *
 * Conventions as circulant.h: every builder is pure, fills a caller-owned
 * crnet__schedule `out` (uninitialised on entry) and returns 0, CRNET_EINVAL
 * (p < 1, rank out of range, p·count overflowing) or CRNET_ENOMEM. On
 * success the caller frees the schedule with crnet__sched_free; on error
 * there is nothing to free. They never block and keep no pointer to their
 * arguments.
 *
 * Buffers (elements): SEND holds p blocks of `count`, block j (at j·count)
 * for rank j; RECV gets p blocks of `count`, block j from rank j. In place:
 * the input is in RECV and the results replace it.
 */
#ifndef CRNET_ALLTOALL_H
#define CRNET_ALLTOALL_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

int crnet__alltoall_pairwise(crnet__schedule *out, int32_t p, int32_t rank,
                             uint64_t count, bool in_place);
int crnet__alltoall_ring(crnet__schedule *out, int32_t p, int32_t rank,
                         uint64_t count, bool in_place);
int crnet__alltoall_bruck(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);
/* p must be a power of two (else CRNET_EINVAL). */
int crnet__alltoall_hypercube(crnet__schedule *out, int32_t p, int32_t rank,
                              uint64_t count, bool in_place);

#endif
