/* Ring schedules (Grama et al., ch. 4; Patarasuk & Yuan). See ring.c.
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

#endif
