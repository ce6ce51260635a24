/* All-to-all (personalized, MPI_Alltoall semantics) schedules: pairwise
 * exchange, ring store-and-forward, Bruck's log-round algorithm and the
 * hypercube store-and-forward variant; and two for MPI_Alltoallv (a count
 * and a displacement per pair): pairwise, and the same exchanges one at a
 * time. See alltoall.c for the algorithms, their costs and memory.
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

int crnet__pairwise_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                             uint64_t count, bool in_place);
int crnet__ring_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                         uint64_t count, bool in_place);
int crnet__bruck_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place);
/* p must be a power of two (else CRNET_EINVAL). */
int crnet__hypercube_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                              uint64_t count, bool in_place);

/* All-to-all with a block size per pair (MPI_Alltoallv semantics): this
 * rank sends scounts[j] elements from SEND at sdispls[j] to rank j and
 * receives rcounts[j] elements into RECV at rdispls[j] from rank j; its own
 * block is a local copy. Each rank passes its own arrays, of p entries; the
 * program guarantees rank j's scounts[r] equals rank r's rcounts[j]. The
 * receive regions must not overlap (send regions may). No in place, no
 * TEMP. CRNET_EINVAL also for a NULL array, scounts[rank] != rcounts[rank]
 * or a displacement + count beyond 2^64. */
int crnet__pairwise_alltoallv(crnet__schedule *out, int32_t p, int32_t rank,
                              const uint64_t *scounts, const uint64_t *sdispls,
                              const uint64_t *rcounts, const uint64_t *rdispls);
int crnet__ring_alltoallv(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *scounts, const uint64_t *sdispls,
                          const uint64_t *rcounts, const uint64_t *rdispls);

#endif
