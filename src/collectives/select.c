/* The schedule table and `auto`. See select.h.
 *
 * auto, for now: the circulant schedule with halving skips (ceil(log2 p)
 * rounds for reduce-scatter, optimal volume) for everything, except that a
 * non-commutative operator goes to circulant-linear, whose reductions follow
 * rank order. Cost-based choice per message size comes with the benchmarks.
 */
#include "select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "circulant.h"
#include "ring.h"

#define BIT(coll) (1u << (coll))
#define CIRCULANT_COLLS                                                        \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |                         \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_BARRIER))
#define REDUCING_COLLS                                                         \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_SCAN))

enum family { FAMILY_CIRCULANT, FAMILY_RING };

typedef struct schedule_desc {
  const char *name;
  enum family family;
  unsigned colls; /* bit per crnet_collective it can do */
} schedule_desc;

/* Ids are the table index + 1 and travel in call signatures, so ranks that
 * picked different schedules for one call fail instead of mixing them. */
static const schedule_desc schedules[] = {
    {"circulant", FAMILY_CIRCULANT, CIRCULANT_COLLS},
    {"circulant-doubling", FAMILY_CIRCULANT, CIRCULANT_COLLS},
    {"circulant-linear", FAMILY_CIRCULANT, CIRCULANT_COLLS},
    {"circulant-sqrt", FAMILY_CIRCULANT, CIRCULANT_COLLS},
    {"ring", FAMILY_RING, BIT(CRNET_COLL_ALLREDUCE)},
};

#define NSCHEDULES (sizeof schedules / sizeof schedules[0])

static const schedule_desc *find(const char *name) {
  for (size_t i = 0; i < NSCHEDULES; i++)
    if (strcmp(schedules[i].name, name) == 0)
      return &schedules[i];
  return NULL;
}

const char *crnet__schedule_name(size_t i) {
  return i < NSCHEDULES ? schedules[i].name : NULL;
}

const char *crnet__schedule_env_name(crnet_collective coll) {
  static const char *const names[CRNET_COLL_COUNT] = {
      "CRNET_ALLREDUCE_SCHEDULE", "CRNET_REDUCE_SCATTER_SCHEDULE",
      "CRNET_SCAN_SCHEDULE",      "CRNET_ALLTOALL_SCHEDULE",
      "CRNET_ALLGATHER_SCHEDULE", "CRNET_BCAST_SCHEDULE",
      "CRNET_REDUCE_SCHEDULE",    "CRNET_BARRIER_SCHEDULE"};
  return (unsigned)coll < CRNET_COLL_COUNT ? names[coll] : "?";
}

bool crnet__schedule_known(const char *name, crnet_collective coll) {
  const schedule_desc *d;
  if (strcmp(name, "auto") == 0)
    return true;
  d = find(name);
  return d != NULL && (d->colls & BIT(coll)) != 0;
}

/* Whether the schedule keeps rank order in its reductions, for this p. */
static int order_preserving(const schedule_desc *d, int32_t p, bool *ordered) {
  int32_t *skips;
  int n;
  *ordered = false;
  if (d->family != FAMILY_CIRCULANT)
    return 0;
  skips = malloc(sizeof *skips * (size_t)p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circ_skips(d->name, p, skips);
  if (n > 0)
    *ordered = crnet__circ_skips_ordered(skips, n);
  free(skips);
  return n > 0 ? 0 : n;
}

int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen) {
  const schedule_desc *d;
  const char *coll = crnet_collective_name(call->coll);
  bool reduces = (REDUCING_COLLS & BIT(call->coll)) != 0;
  bool ordered;
  int rc;

  if (strcmp(requested, "auto") == 0)
    requested = reduces && !call->commutative ? "circulant-linear" : "circulant";
  d = find(requested);
  if (d == NULL) {
    snprintf(why, whylen, "no schedule is called '%s'", requested);
    return CRNET_EINVAL;
  }
  if ((d->colls & BIT(call->coll)) == 0) {
    snprintf(why, whylen, "schedule '%s' cannot do %s", d->name, coll);
    return CRNET_EUNSUPPORTED;
  }
  if (reduces && !call->commutative) {
    rc = order_preserving(d, call->p, &ordered);
    if (rc != 0)
      return rc;
    if (!ordered) {
      snprintf(why, whylen,
               "schedule '%s' combines operands out of rank order, so %s with "
               "a non-commutative operator needs 'circulant-linear' (or "
               "'auto')",
               d->name, coll);
      return CRNET_EUNSUPPORTED;
    }
  }
  *name = d->name;
  *id = (uint32_t)(d - schedules) + 1;
  return 0;
}

int crnet__build(const char *name, const crnet__call *call,
                 crnet__schedule *out) {
  const schedule_desc *d = find(name);
  int32_t *skips;
  int n, rc;
  if (d == NULL)
    return CRNET_EINVAL;
  if (d->family == FAMILY_RING)
    return crnet__ring_allreduce(out, call->p, call->rank, call->count,
                                 call->in_place);
  skips = malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circ_skips(d->name, call->p, skips);
  if (n < 0) {
    free(skips);
    return n;
  }
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    rc = crnet__circ_allreduce(out, skips, n, call->p, call->rank, call->count,
                               call->in_place);
    break;
  case CRNET_COLL_REDUCE_SCATTER:
    rc = crnet__circ_reduce_scatter(out, skips, n, call->p, call->rank,
                                    call->counts, call->in_place);
    break;
  case CRNET_COLL_ALLGATHER:
    rc = crnet__circ_allgather(out, skips, n, call->p, call->rank, call->counts,
                               call->in_place);
    break;
  case CRNET_COLL_REDUCE:
    rc = crnet__circ_reduce(out, skips, n, call->p, call->rank, call->count,
                            call->root, call->in_place);
    break;
  case CRNET_COLL_BCAST:
    rc = crnet__circ_bcast(out, skips, n, call->p, call->rank, call->count,
                           call->root);
    break;
  case CRNET_COLL_BARRIER:
    rc = crnet__circ_barrier(out, skips, n, call->p, call->rank);
    break;
  default:
    rc = CRNET_EINVAL;
    break;
  }
  free(skips);
  return rc;
}
