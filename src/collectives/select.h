/* Schedule selection: which schedules exist, which collectives each can do,
 * which preserve operand order, and what `auto` picks. The one table that
 * knows; builders never fall back to another schedule on their own.
 */
#ifndef CRNET_SELECT_H
#define CRNET_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "schedule.h"

/* What a builder needs to know about the call. */
typedef struct crnet__call {
  crnet_collective coll;
  int32_t p, rank;
  uint64_t count; /* allreduce, reduce, bcast, scan: vector length;
                     all-to-all: elements per peer */
  const uint64_t *counts; /* reduce-scatter, allgather: p block lengths */
  int32_t root;
  bool in_place;
  bool commutative; /* of the operator; true where nothing is reduced */
  bool exclusive;   /* scan: exscan */
  uint32_t esize;   /* bytes per element (0: unknown), for auto */
} crnet__call;

/* Resolves `requested` ("auto" or a schedule name) for the call into a
 * schedule name (a static string) and an id for call signatures. Returns 0,
 * CRNET_EINVAL (no schedule of that name) or CRNET_EUNSUPPORTED (it cannot do
 * this call), with the reason written to why. */
int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen);

/* Builds the chosen schedule for the call. 0, CRNET_EINVAL, CRNET_ENOMEM. */
int crnet__build(const char *name, const crnet__call *call,
                 crnet__schedule *out);

/* True if `name` is a schedule that can do `coll` at all. */
bool crnet__schedule_known(const char *name, crnet_collective coll);

/* The i-th schedule's name (i from 0), or NULL past the last: for tools
 * that list every schedule. */
const char *crnet__schedule_name(size_t i);

/* "CRNET_ALLREDUCE_SCHEDULE", ... */
const char *crnet__schedule_env_name(crnet_collective coll);

#endif
