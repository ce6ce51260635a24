/* Two-level schedules: collectives that know which ranks share a host.
 *
 * Ranks of one host talk through shared memory, ranks of different hosts
 * through TCP, and the second is many times slower in both latency and
 * bandwidth. A two-level schedule keeps most of the bytes and rounds inside
 * the hosts and sends across hosts only what must cross, each crossing
 * done by a flat schedule among one rank per host. It is made of flat
 * schedules of the subgroups (circulant or ring, whichever the cost model
 * prices lower for that level's links), placed at fixed rounds by
 * crnet__sched_embed, so no new algorithm and no second executor is
 * needed; see twolevel.c for the phases, the lanes of uneven hosts and the
 * costs.
 *
 * The host layout comes in the call (select.h: call->host, call->nhosts).
 * The builders follow circulant.h's buffers and conventions (pure, fill a
 * caller-owned schedule, 0, CRNET_EINVAL or CRNET_ENOMEM). The reductions
 * combine host by host, not in rank order: commutative operators only.
 */
#ifndef CRNET_TWOLEVEL_H
#define CRNET_TWOLEVEL_H

#include "schedule.h"
#include "select.h"

int crnet__twolevel_allreduce(crnet__schedule *out, const crnet__call *call);
int crnet__twolevel_bcast(crnet__schedule *out, const crnet__call *call);
int crnet__twolevel_reduce(crnet__schedule *out, const crnet__call *call);
int crnet__twolevel_reduce_scatter(crnet__schedule *out,
                                   const crnet__call *call);
int crnet__twolevel_allgather(crnet__schedule *out, const crnet__call *call);

/* The model price of the two-level schedule for the call: each level's
 * flat schedule priced with its links' constants (shm_alpha and shm_beta
 * inside a host, alpha and beta across), the phases added. 0 with
 * *seconds; 1 when auto should not consider it (one host, or one rank per
 * host: nothing to gain over a flat schedule; a collective it cannot do);
 * or CRNET_ENOMEM. */
int crnet__twolevel_price(const crnet__call *call, double *seconds);

/* The flat schedule ("circulant" or "ring") a level uses for sub, a call
 * of one host's ranks (shm: true) or of one rank per host (false), and its
 * price. Sets sub->shm_links to the links the level is priced on (shared
 * memory inside a host, unless sub->tcp_links), so the schedule built
 * from sub is the one priced (the chain's pieces depend on them). Also
 * for crsched, which shows the levels. 0 or CRNET_ENOMEM. */
int crnet__twolevel_level(crnet__call *sub, bool shm, const char **name,
                          double *seconds);

/* One line saying what the call's rank does in each phase (its host, the
 * rounds of each phase, the flat schedule of each level), for crsched.
 * 0, CRNET_EINVAL (a collective it cannot do, a bad layout) or
 * CRNET_ENOMEM. */
int crnet__twolevel_describe(const crnet__call *call, char *buf, size_t n);

#endif
