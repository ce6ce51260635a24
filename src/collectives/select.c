/* The schedule table and `auto`. See select.h.
 *
 * Every schedule of every family is one row: its name, its family, the
 * collectives it can do and whether its reductions keep rank order. The
 * builders never fall back on their own; an explicitly chosen schedule
 * that cannot do the call fails with CRNET_EUNSUPPORTED and says why.
 *
 * auto: per collective, a list of candidates (auto_candidates), each priced
 * by the α-β-γ model (model.c) with the job's tuning constants (tuning.h:
 * rank 0's, on every rank); the cheapest wins, and of equal prices the one
 * listed first, so the choice depends on (collective, p, bytes,
 * commutativity, tuning) only, never on the rank. A non-commutative
 * operator only considers the candidates that keep rank order for this p
 * (rabenseifner, hypercube, star, allgather-reduce, circulant-linear, and
 * circulant where its skips happen to keep it). allgather-reduce keeps p
 * whole vectors, so it is a candidate only while p·m is at most
 * GATHER_REDUCE_MAX_BYTES. docs/TUNING.md shows where the choices change.
 */
#include "select.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "circulant.h"
#include "hypercube.h"
#include "model.h"
#include "ring.h"
#include "rooted.h"
#include "star.h"
#include "twolevel.h"

/* allgather-reduce holds p vectors of m bytes in TEMP: a memory bound, not
 * a cost, so it is a limit rather than part of the model. */
#define GATHER_REDUCE_MAX_BYTES ((double)(1 << 20))

#define BIT(coll) (1u << (coll))
#define CIRCULANT_COLLS                                                        \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |                         \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_BARRIER))
#define ROOTED_COLLS (BIT(CRNET_COLL_GATHER) | BIT(CRNET_COLL_SCATTER))
#define REDUCING_COLLS                                                         \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_SCAN))

enum family {
  FAMILY_CIRCULANT,    /* Träff's circulant graphs, one skip sequence */
  FAMILY_RING,         /* ring.c, alltoall.c's ring */
  FAMILY_HYPERCUBE,    /* recursive doubling, Alg. 4.9, hypercube a2a */
  FAMILY_RABENSEIFNER, /* recursive halving */
  FAMILY_STAR,         /* star graph S_n */
  FAMILY_PAIRWISE,     /* all-to-all pairwise exchange */
  FAMILY_BRUCK,        /* all-to-all, circulant with concatenation */
  FAMILY_GATHER_REDUCE, /* allreduce: circulant allgather + local fold */
  FAMILY_BINOMIAL,      /* gather, scatter: the binomial tree (rooted.c) */
  FAMILY_LINEAR,        /* gather, scatter: the root and each rank */
  FAMILY_TWO_LEVEL      /* flat schedules inside and across hosts */
};

/* Whether the schedule's reductions keep rank order. */
enum order { ORDER_NEVER, ORDER_ALWAYS, ORDER_BY_SKIPS };

typedef struct schedule_desc {
  const char *name;
  enum family family;
  unsigned colls; /* bit per crnet_collective it can do */
  enum order order;
} schedule_desc;

/* Ids are the table index + 1 and travel in call signatures, so ranks that
 * picked different schedules for one call fail instead of mixing them:
 * append, never reorder. */
static const schedule_desc schedules[] = {
    {"circulant", FAMILY_CIRCULANT, CIRCULANT_COLLS | BIT(CRNET_COLL_SCAN),
     ORDER_BY_SKIPS},
    {"circulant-doubling", FAMILY_CIRCULANT, CIRCULANT_COLLS, ORDER_BY_SKIPS},
    {"circulant-linear", FAMILY_CIRCULANT, CIRCULANT_COLLS, ORDER_BY_SKIPS},
    {"circulant-sqrt", FAMILY_CIRCULANT, CIRCULANT_COLLS, ORDER_BY_SKIPS},
    {"ring", FAMILY_RING,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |
         BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |
         BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_ALLTOALL) |
         BIT(CRNET_COLL_SCAN) | BIT(CRNET_COLL_ALLTOALLV),
     ORDER_NEVER},
    {"hypercube", FAMILY_HYPERCUBE,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER) |
         BIT(CRNET_COLL_SCAN) | BIT(CRNET_COLL_ALLTOALL) |
         BIT(CRNET_COLL_BCAST),
     ORDER_ALWAYS},
    {"rabenseifner", FAMILY_RABENSEIFNER,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |
         BIT(CRNET_COLL_REDUCE),
     ORDER_ALWAYS},
    {"star", FAMILY_STAR,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER), ORDER_ALWAYS},
    {"pairwise", FAMILY_PAIRWISE,
     BIT(CRNET_COLL_ALLTOALL) | BIT(CRNET_COLL_ALLTOALLV), ORDER_NEVER},
    {"bruck", FAMILY_BRUCK, BIT(CRNET_COLL_ALLTOALL), ORDER_NEVER},
    {"allgather-reduce", FAMILY_GATHER_REDUCE, BIT(CRNET_COLL_ALLREDUCE),
     ORDER_ALWAYS},
    {"binomial", FAMILY_BINOMIAL, ROOTED_COLLS, ORDER_NEVER},
    {"linear", FAMILY_LINEAR, ROOTED_COLLS, ORDER_NEVER},
    {"two-level", FAMILY_TWO_LEVEL,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_BCAST) | BIT(CRNET_COLL_REDUCE) |
         BIT(CRNET_COLL_REDUCE_SCATTER) | BIT(CRNET_COLL_ALLGATHER),
     ORDER_NEVER},
};

#define NSCHEDULES (sizeof schedules / sizeof schedules[0])

/* The names a call passes around are the table's own strings (select and
 * auto return them), so a pass comparing pointers finds them without the
 * strcmp of every entry before: a dozen calls, on every collective call. */
static const schedule_desc *find(const char *name) {
  for (size_t i = 0; i < NSCHEDULES; i++)
    if (schedules[i].name == name)
      return &schedules[i];
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
      "CRNET_REDUCE_SCHEDULE",    "CRNET_BARRIER_SCHEDULE",
      "CRNET_GATHER_SCHEDULE",    "CRNET_SCATTER_SCHEDULE",
      "CRNET_ALLTOALLV_SCHEDULE"};
  return (unsigned)coll < CRNET_COLL_COUNT ? names[coll] : "?";
}

bool crnet__schedule_known(const char *name, crnet_collective coll) {
  const schedule_desc *d;
  if (strcmp(name, "auto") == 0)
    return true;
  d = find(name);
  return d != NULL && (d->colls & BIT(coll)) != 0;
}

/* Whether the schedule keeps rank order in its reductions for this call. */
static int order_preserving(const schedule_desc *d, const crnet__call *call,
                            bool *ordered) {
  int32_t *skips;
  int n;
  *ordered = d->order == ORDER_ALWAYS;
  /* The ring's scan is a chain from rank 0 up: the prefix grows in order. */
  if (d->family == FAMILY_RING && call->coll == CRNET_COLL_SCAN)
    *ordered = true;
  if (d->order != ORDER_BY_SKIPS)
    return 0;
  if (call->coll == CRNET_COLL_SCAN) { /* dissemination: always in order */
    *ordered = true;
    return 0;
  }
  skips = malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips(d->name, call->p, skips);
  if (n > 0)
    *ordered = crnet__circulant_skips_ordered(skips, n);
  free(skips);
  return n > 0 ? 0 : n;
}

/* auto's candidates per collective, in order of preference on equal
 * prices: the first listed is the default of the family that does the
 * collective in the fewest rounds at optimal volume. Schedules that the
 * model can never prefer (circulant-doubling and circulant-sqrt: the
 * circulant's volume in as many rounds or more) are left out. */
static const char *const *auto_candidates(crnet_collective coll) {
  static const char *const allreduce[] = {
      "circulant", "hypercube", "rabenseifner",     "star",
      "allgather-reduce", "ring", "circulant-linear", "two-level", NULL};
  static const char *const reduce_scatter[] = {
      "circulant", "rabenseifner", "ring", "circulant-linear", "two-level",
      NULL};
  static const char *const allgather[] = {"circulant", "hypercube",
                                          "star",      "ring",
                                          "circulant-linear", "two-level",
                                          NULL};
  static const char *const bcast[] = {"circulant", "hypercube", "ring",
                                      "circulant-linear", "two-level", NULL};
  static const char *const reduce[] = {"circulant",        "rabenseifner",
                                       "ring",             "circulant-linear",
                                       "two-level",        NULL};
  static const char *const alltoall[] = {"bruck", "pairwise", "hypercube",
                                         "ring", NULL};
  static const char *const scan[] = {"circulant", "hypercube", "ring", NULL};
  static const char *const barrier[] = {"circulant", "circulant-linear", NULL};
  static const char *const rooted[] = {"binomial", "linear", NULL};
  static const char *const alltoallv[] = {"pairwise", "ring", NULL};
  switch (coll) {
  case CRNET_COLL_ALLREDUCE:
    return allreduce;
  case CRNET_COLL_REDUCE_SCATTER:
    return reduce_scatter;
  case CRNET_COLL_ALLGATHER:
    return allgather;
  case CRNET_COLL_BCAST:
    return bcast;
  case CRNET_COLL_REDUCE:
    return reduce;
  case CRNET_COLL_ALLTOALL:
    return alltoall;
  case CRNET_COLL_SCAN:
    return scan;
  case CRNET_COLL_BARRIER:
    return barrier;
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    return rooted;
  case CRNET_COLL_ALLTOALLV:
    return alltoallv;
  default:
    return NULL;
  }
}

const char *crnet__auto_candidate(crnet_collective coll, size_t i) {
  const char *const *list = auto_candidates(coll);
  for (size_t k = 0; list != NULL && list[k] != NULL; k++)
    if (k == i)
      return list[k];
  return NULL;
}

int crnet__auto_price(const char *name, const crnet__call *call,
                      double *seconds) {
  const schedule_desc *d = find(name);
  crnet__model_terms terms;
  crnet__tuning defaults;
  const crnet__tuning *t = call->tuning;
  bool ordered;
  int rc;
  if (d != NULL && d->family == FAMILY_TWO_LEVEL &&
      (d->colls & BIT(call->coll)) != 0)
    return crnet__twolevel_price(call, seconds);
  if (d == NULL || (d->colls & BIT(call->coll)) == 0 ||
      !crnet__model_terms_of(name, call, &terms))
    return 1;
  if (strcmp(name, "allgather-reduce") == 0 &&
      (double)call->p * crnet__model_bytes(call) > GATHER_REDUCE_MAX_BYTES)
    return 1;
  if ((REDUCING_COLLS & BIT(call->coll)) != 0 && !call->commutative) {
    rc = order_preserving(d, call, &ordered);
    if (rc != 0)
      return rc;
    if (!ordered)
      return 1;
  }
  if (t == NULL) {
    crnet__tuning_defaults(&defaults);
    t = &defaults;
  }
  if (!call->shm_links && !call->tcp_links &&
      crnet__model_seconds_hosts(name, call, t, seconds))
    return 0;
  *seconds = crnet__model_seconds_on(&terms, t, call->p, call->shm_links);
  return 0;
}

/* Prices within this factor of each other are equal: the first listed
 * wins, also where two formulas agree but round differently. */
#define SAME_PRICE (1 + 1e-9)

int crnet__auto_choose(const crnet__call *call, const char **name,
                       double *seconds) {
  const char *const *list = auto_candidates(call->coll);
  const char *best = NULL;
  double best_t = 0, t;
  int rc;
  for (size_t i = 0; list != NULL && list[i] != NULL; i++) {
    rc = crnet__auto_price(list[i], call, &t);
    if (rc < 0)
      return rc;
    if (rc == 0 && (best == NULL || t * SAME_PRICE < best_t)) {
      best = list[i];
      best_t = t;
    }
  }
  /* Every list has an order-preserving candidate that the model covers at
   * every p (circulant, rabenseifner or bruck first), so this holds. */
  assert(best != NULL);
  *name = best;
  if (seconds != NULL)
    *seconds = best_t;
  return 0;
}

int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen) {
  const schedule_desc *d;
  const char *coll = crnet_collective_name(call->coll);
  bool reduces = (REDUCING_COLLS & BIT(call->coll)) != 0;
  bool ordered;
  int rc;

  if (strcmp(requested, "auto") == 0) {
    rc = crnet__auto_choose(call, &requested, NULL);
    if (rc != 0)
      return rc;
  }
  d = find(requested);
  if (d == NULL) {
    snprintf(why, whylen, "no schedule is called '%s'", requested);
    return CRNET_EINVAL;
  }
  if ((d->colls & BIT(call->coll)) == 0) {
    snprintf(why, whylen, "schedule '%s' cannot do %s", d->name, coll);
    return CRNET_EUNSUPPORTED;
  }
  if (d->family == FAMILY_HYPERCUBE && call->coll == CRNET_COLL_ALLTOALL &&
      (call->p & (call->p - 1)) != 0) {
    snprintf(why, whylen,
             "schedule 'hypercube' does %s only when the number of ranks is "
             "a power of two, not %d (use 'bruck' or 'pairwise')",
             coll, (int)call->p);
    return CRNET_EUNSUPPORTED;
  }
  if (reduces && !call->commutative) {
    rc = order_preserving(d, call, &ordered);
    if (rc != 0)
      return rc;
    if (!ordered) {
      snprintf(why, whylen,
               "schedule '%s' combines operands out of rank order, so %s with "
               "a non-commutative operator needs an order-preserving "
               "schedule ('rabenseifner', 'hypercube', 'star', "
               "'circulant-linear' or 'auto')",
               d->name, coll);
      return CRNET_EUNSUPPORTED;
    }
  }
  *name = d->name;
  *id = (uint32_t)(d - schedules) + 1;
  return 0;
}

static int build_circulant(const schedule_desc *d, const crnet__call *call,
                           crnet__schedule *out) {
  int32_t *skips;
  int n, rc;
  if (call->coll == CRNET_COLL_SCAN)
    return call->exclusive
               ? crnet__circulant_exscan(out, call->p, call->rank, call->count,
                                         call->in_place)
               : crnet__circulant_scan(out, call->p, call->rank, call->count,
                                       call->in_place);
  skips = malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips(d->name, call->p, skips);
  if (n < 0) {
    free(skips);
    return n;
  }
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    rc = crnet__circulant_allreduce(out, skips, n, call->p, call->rank,
                                    call->count, call->in_place);
    break;
  case CRNET_COLL_REDUCE_SCATTER:
    rc = crnet__circulant_reduce_scatter(out, skips, n, call->p, call->rank,
                                         call->counts, call->in_place);
    break;
  case CRNET_COLL_ALLGATHER:
    rc = crnet__circulant_allgather(out, skips, n, call->p, call->rank,
                                    call->counts, call->in_place);
    break;
  case CRNET_COLL_REDUCE:
    rc = crnet__circulant_reduce(out, skips, n, call->p, call->rank,
                                 call->count, call->root, call->in_place);
    break;
  case CRNET_COLL_BCAST:
    rc = crnet__circulant_bcast(out, skips, n, call->p, call->rank, call->count,
                                call->root);
    break;
  case CRNET_COLL_BARRIER:
    rc = crnet__circulant_barrier(out, skips, n, call->p, call->rank);
    break;
  default:
    rc = CRNET_EINVAL;
    break;
  }
  free(skips);
  return rc;
}

static int build_ring(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__ring_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__ring_reduce_scatter(out, c->p, c->rank, c->counts,
                                      c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__ring_allgather(out, c->p, c->rank, c->counts, c->in_place);
  case CRNET_COLL_BCAST:
    return crnet__ring_bcast(out, c->p, c->rank, c->count, c->root,
                             crnet__chain_pieces(c));
  case CRNET_COLL_REDUCE:
    return crnet__ring_reduce(out, c->p, c->rank, c->count, c->root,
                              c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__ring_alltoall(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_SCAN:
    return crnet__ring_scan(out, c->p, c->rank, c->count, c->in_place,
                            c->exclusive);
  case CRNET_COLL_ALLTOALLV:
    return crnet__ring_alltoallv(out, c->p, c->rank, c->counts, c->sdispls,
                                 c->rcounts, c->rdispls);
  default:
    return CRNET_EINVAL;
  }
}

static int build_hypercube(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__hypercube_allreduce(out, c->p, c->rank, c->count,
                                      c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__hypercube_allgather(out, c->p, c->rank, c->counts,
                                      c->in_place);
  case CRNET_COLL_SCAN:
    return c->exclusive ? crnet__hypercube_exscan(out, c->p, c->rank, c->count,
                                                  c->in_place)
                        : crnet__hypercube_scan(out, c->p, c->rank, c->count,
                                                c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__hypercube_alltoall(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_BCAST:
    return crnet__hypercube_bcast(out, c->p, c->rank, c->count, c->root);
  default:
    return CRNET_EINVAL;
  }
}

static int build_rabenseifner(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__rabenseifner_allreduce(out, c->p, c->rank, c->count,
                                         c->in_place);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__rabenseifner_reduce_scatter(out, c->p, c->rank, c->counts,
                                              c->in_place);
  case CRNET_COLL_REDUCE:
    return crnet__rabenseifner_reduce(out, c->p, c->rank, c->count, c->root,
                                      c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static int build_star(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__star_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__star_allgather(out, c->p, c->rank, c->counts, c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static int build_gather_reduce(const crnet__call *c, crnet__schedule *out) {
  int32_t *skips = malloc(sizeof *skips * (size_t)c->p);
  int n, rc;
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips("circulant", c->p, skips);
  rc = n < 0 ? n
             : crnet__circulant_allreduce_gather(out, skips, n, c->p, c->rank,
                                                 c->count, c->in_place);
  free(skips);
  return rc;
}

int crnet__build(const char *name, const crnet__call *call,
                 crnet__schedule *out) {
  const schedule_desc *d = find(name);
  if (d == NULL || (d->colls & BIT(call->coll)) == 0)
    return CRNET_EINVAL;
  switch (d->family) {
  case FAMILY_CIRCULANT:
    return build_circulant(d, call, out);
  case FAMILY_RING:
    return build_ring(call, out);
  case FAMILY_HYPERCUBE:
    return build_hypercube(call, out);
  case FAMILY_RABENSEIFNER:
    return build_rabenseifner(call, out);
  case FAMILY_PAIRWISE:
    if (call->coll == CRNET_COLL_ALLTOALLV)
      return crnet__pairwise_alltoallv(out, call->p, call->rank, call->counts,
                                       call->sdispls, call->rcounts,
                                       call->rdispls);
    return crnet__pairwise_alltoall(out, call->p, call->rank, call->count,
                                    call->in_place);
  case FAMILY_BRUCK:
    return crnet__bruck_alltoall(out, call->p, call->rank, call->count,
                                 call->in_place);
  case FAMILY_STAR:
    return build_star(call, out);
  case FAMILY_GATHER_REDUCE:
    return build_gather_reduce(call, out);
  case FAMILY_BINOMIAL:
    return call->coll == CRNET_COLL_GATHER
               ? crnet__binomial_gather(out, call->p, call->rank, call->root,
                                        call->counts, call->in_place)
               : crnet__binomial_scatter(out, call->p, call->rank, call->root,
                                         call->counts, call->in_place);
  case FAMILY_TWO_LEVEL:
    if (call->coll == CRNET_COLL_ALLREDUCE)
      return crnet__twolevel_allreduce(out, call);
    if (call->coll == CRNET_COLL_REDUCE_SCATTER)
      return crnet__twolevel_reduce_scatter(out, call);
    if (call->coll == CRNET_COLL_ALLGATHER)
      return crnet__twolevel_allgather(out, call);
    return call->coll == CRNET_COLL_BCAST ? crnet__twolevel_bcast(out, call)
                                          : crnet__twolevel_reduce(out, call);
  case FAMILY_LINEAR:
    return call->coll == CRNET_COLL_GATHER
               ? crnet__linear_gather(out, call->p, call->rank, call->root,
                                      call->counts, call->in_place)
               : crnet__linear_scatter(out, call->p, call->rank, call->root,
                                       call->counts, call->in_place);
  }
  return CRNET_EINVAL;
}
