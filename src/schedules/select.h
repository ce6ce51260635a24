/* Schedule selection: which schedule a call runs. The facts about each
 * schedule (its collectives, whether it keeps operand order, its model
 * terms, its builder) are its row in the registry (algorithm.h,
 * registry.c); these functions walk the rows. Builders never fall back to
 * another schedule on their own.
 */
#ifndef CRNET_SELECT_H
#define CRNET_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "schedule.h"
#include "tuning.h"

/* What a builder needs to know about the call. */
typedef struct crnet__call {
  crnet_collective coll;
  int32_t p, rank;
  uint64_t count; /* allreduce, reduce, bcast, scan: vector length;
                     all-to-all: elements per peer */
  const uint64_t *counts; /* reduce-scatter, allgather, gather, scatter: p
                             block lengths; alltoallv: what this rank sends
                             each rank */
  bool uniform; /* every counts[r] is count (gather, scatter) */
  /* alltoallv: where each rank's block starts in SEND, how much comes from
   * each rank and where it goes in RECV (p entries each, elements) */
  const uint64_t *sdispls, *rcounts, *rdispls;
  /* allgatherv: where block b goes in the caller's receive buffer (p
   * entries, elements); NULL: packed, in order. The schedule itself always
   * works on packed blocks (exec.h, unpack). */
  const uint64_t *displs;
  int32_t root;
  bool in_place;
  bool commutative; /* of the operator; true where nothing is reduced */
  bool exclusive;   /* scan: exscan */
  uint32_t esize;   /* bytes per element (0: unknown), for auto */
  /* Which host each rank is on: host[r] in 0..nhosts-1, every host with
   * at least one rank (p entries, borrowed). NULL: all on one host. Only
   * the two-level schedules (twolevel.h) look at it. */
  const int32_t *host;
  int32_t nhosts;
  /* Every rank of the call is on one host, so its links are shared
   * memory: auto prices with shm_alpha and shm_beta (tuning.h) instead of
   * alpha and beta. */
  bool shm_links;
  /* Rank 0 keeps its links on TCP (CRNET_TRANSPORT=tcp or encryption), so
   * the job is taken to: links inside a host are priced as TCP too (no
   * shm_links, and the two-level schedules' host phases at alpha and beta).
   * Rank 0's setting, not each rank's own, so every rank prices alike. */
  bool tcp_links;
  /* auto's cost model constants (borrowed; NULL: the built-in defaults) */
  const crnet__tuning *tuning;
} crnet__call;

/* Resolves `requested` ("auto" or a schedule name) for the call into a
 * schedule name (a static string) and an id for call signatures. Returns 0,
 * CRNET_EINVAL (no schedule of that name) or CRNET_EUNSUPPORTED (it cannot do
 * this call), with the reason written to why. */
int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen);

/* What "auto" picks for the call: the candidate of the call's collective
 * with the lowest model price (model.h) under call->tuning, among those
 * that keep rank order when the operator is not commutative. Depends only
 * on (collective, p, bytes, commutativity, exclusive, tuning), never on the
 * rank, so every rank picks alike. 0 with the name (a static string) and,
 * if seconds is not NULL, its price; or CRNET_ENOMEM. */
int crnet__auto_choose(const crnet__call *call, const char **name,
                       double *seconds);

/* The model price of one candidate for the call: 0 with *seconds; 1 when
 * auto would not consider it (not a candidate for the collective, not
 * covered by the model at this p, out of rank order for a non-commutative
 * operator, allgather-reduce over its memory bound); or CRNET_ENOMEM. */
int crnet__auto_price(const char *name, const crnet__call *call,
                      double *seconds);

/* The i-th candidate of auto for the collective (i from 0), in order of
 * preference on equal prices, or NULL past the last. */
const char *crnet__auto_candidate(crnet_collective coll, size_t i);

/* Builds the chosen schedule for the call. 0, CRNET_EINVAL, CRNET_ENOMEM. */
int crnet__build(const char *name, const crnet__call *call,
                 crnet__schedule *out);

/* True if `name` is a schedule that can do `coll` at all. */
bool crnet__schedule_known(const char *name, crnet_collective coll);

/* The i-th schedule's name (i from 0), or NULL past the last: for tools
 * that list every schedule. */
const char *crnet__schedule_name(size_t i);

#endif
