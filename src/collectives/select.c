/* The schedule table and `auto`. See select.h.
 *
 * Every schedule of every family is one row: its name, its family, the
 * collectives it can do and whether its reductions keep rank order. The
 * builders never fall back on their own; an explicitly chosen schedule
 * that cannot do the call fails with CRNET_EUNSUPPORTED and says why.
 *
 * auto, for now (calibrated constants come with the benchmarks):
 *   allreduce: the cheapest of circulant, allgather-reduce (while p·m is at
 *     most 1 MiB), hypercube and rabenseifner under the α-β-γ model with
 *     built-in TCP loopback constants (auto_allreduce); a non-commutative
 *     operator only considers the order-preserving ones;
 *   reduce-scatter, reduce: circulant (ceil(log2 p) rounds per phase,
 *     optimal volume); a non-commutative operator goes to rabenseifner,
 *     which keeps rank order in about as many rounds (circulant-linear
 *     keeps it too, but needs p-1 rounds);
 *   scan, exscan: circulant (dissemination, ceil(log2 p) rounds, any p,
 *     rank order);
 *   all-to-all: bruck (ceil(log2 p) rounds, ~log2(p)/2 times the volume)
 *     while a block is at most ALLTOALL_SMALL_BYTES, pairwise beyond;
 *   allgather, bcast, barrier: circulant.
 */
#include "select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "circulant.h"
#include "hypercube.h"
#include "ring.h"
#include "star.h"

/* Bruck's extra volume stops paying for its saved rounds somewhere around
 * here on TCP (α of tens of µs, β of a GB/s); issue 5's cost model will
 * replace the constant. */
#define ALLTOALL_SMALL_BYTES 256

#define BIT(coll) (1u << (coll))
#define CIRCULANT_COLLS                                                        \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |                         \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_BARRIER))
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
  FAMILY_GATHER_REDUCE /* allreduce: circulant allgather + local fold */
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
         BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_ALLTOALL),
     ORDER_NEVER},
    {"hypercube", FAMILY_HYPERCUBE,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER) |
         BIT(CRNET_COLL_SCAN) | BIT(CRNET_COLL_ALLTOALL),
     ORDER_ALWAYS},
    {"rabenseifner", FAMILY_RABENSEIFNER,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |
         BIT(CRNET_COLL_REDUCE),
     ORDER_ALWAYS},
    {"star", FAMILY_STAR,
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER), ORDER_ALWAYS},
    {"pairwise", FAMILY_PAIRWISE, BIT(CRNET_COLL_ALLTOALL), ORDER_NEVER},
    {"bruck", FAMILY_BRUCK, BIT(CRNET_COLL_ALLTOALL), ORDER_NEVER},
    {"allgather-reduce", FAMILY_GATHER_REDUCE, BIT(CRNET_COLL_ALLREDUCE),
     ORDER_ALWAYS},
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

/* Whether the schedule keeps rank order in its reductions for this call. */
static int order_preserving(const schedule_desc *d, const crnet__call *call,
                            bool *ordered) {
  int32_t *skips;
  int n;
  *ordered = d->order == ORDER_ALWAYS;
  if (d->order != ORDER_BY_SKIPS)
    return 0;
  if (call->coll == CRNET_COLL_SCAN) { /* dissemination: always in order */
    *ordered = true;
    return 0;
  }
  skips = malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circ_skips(d->name, call->p, skips);
  if (n > 0)
    *ordered = crnet__circ_skips_ordered(skips, n);
  free(skips);
  return n > 0 ? 0 : n;
}

static int ceil_log2(int32_t p) {
  int k = 0;
  while ((INT64_C(1) << k) < p)
    k++;
  return k;
}

/* The allreduce candidates under the α-β-γ model (seconds; m bytes per
 * rank), with the formulas of the README's schedule table. The constants
 * are this machine class's TCP loopback: a message round costs about as
 * much as waking a blocked receiver (tens of µs), a byte about 1 ns each
 * way, a reduced byte a sixth of that. */
#define MODEL_ALPHA 40e-6
#define MODEL_BETA 1e-9
#define MODEL_GAMMA 1.5e-10

static const char *auto_allreduce(const crnet__call *call) {
  double p = call->p, m = (double)call->count * (call->esize ? call->esize : 1);
  double L = ceil_log2(call->p), a = MODEL_ALPHA, b = MODEL_BETA,
         g = MODEL_GAMMA;
  int d = 0;
  while ((INT64_C(2) << d) <= call->p)
    d++;
  double fold = (call->p & (call->p - 1)) != 0 ? 3 : 0;
  struct {
    const char *name;
    double t;
    bool ordered;
  } c[] = {
      {"circulant", 2 * L * a + 2 * (p - 1) / p * m * b + (p - 1) / p * m * g,
       false},
      {"allgather-reduce", L * a + (p - 1) * m * (b + g), true},
      {"hypercube", (d + fold) * (a + m * b) + (d + fold / 2) * m * g, true},
      {"rabenseifner",
       (2 * d + fold) * a + (2 + fold / 2) * m * b + (1 + fold / 4) * m * g,
       true},
  };
  const char *best = NULL;
  double best_t = 0;
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    if (!call->commutative && !c[i].ordered)
      continue;
    /* allgather-reduce keeps p vectors: only where that stays small */
    if (strcmp(c[i].name, "allgather-reduce") == 0 && p * m > (1 << 20))
      continue;
    if (best == NULL || c[i].t < best_t) {
      best = c[i].name;
      best_t = c[i].t;
    }
  }
  return best;
}

static const char *auto_choice(const crnet__call *call) {
  bool reduces = (REDUCING_COLLS & BIT(call->coll)) != 0;
  if (call->coll == CRNET_COLL_ALLREDUCE && call->p > 1)
    return auto_allreduce(call);
  if (call->coll == CRNET_COLL_ALLTOALL) {
    uint64_t esize = call->esize > 0 ? call->esize : 1;
    return call->count <= ALLTOALL_SMALL_BYTES / esize ? "bruck" : "pairwise";
  }
  if (reduces && !call->commutative && call->coll != CRNET_COLL_SCAN)
    return "rabenseifner";
  return "circulant";
}

int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen) {
  const schedule_desc *d;
  const char *coll = crnet_collective_name(call->coll);
  bool reduces = (REDUCING_COLLS & BIT(call->coll)) != 0;
  bool ordered;
  int rc;

  if (strcmp(requested, "auto") == 0)
    requested = auto_choice(call);
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
               ? crnet__circ_exscan(out, call->p, call->rank, call->count,
                                    call->in_place)
               : crnet__circ_scan(out, call->p, call->rank, call->count,
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
    return crnet__ring_bcast(out, c->p, c->rank, c->count, c->root);
  case CRNET_COLL_REDUCE:
    return crnet__ring_reduce(out, c->p, c->rank, c->count, c->root,
                              c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__alltoall_ring(out, c->p, c->rank, c->count, c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static int build_hypercube(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__hc_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__hc_allgather(out, c->p, c->rank, c->counts, c->in_place);
  case CRNET_COLL_SCAN:
    return c->exclusive
               ? crnet__hc_exscan(out, c->p, c->rank, c->count, c->in_place)
               : crnet__hc_scan(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__alltoall_hypercube(out, c->p, c->rank, c->count,
                                     c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static int build_rabenseifner(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__rab_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__rab_reduce_scatter(out, c->p, c->rank, c->counts,
                                     c->in_place);
  case CRNET_COLL_REDUCE:
    return crnet__rab_reduce(out, c->p, c->rank, c->count, c->root,
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
  n = crnet__circ_skips("circulant", c->p, skips);
  rc = n < 0 ? n
             : crnet__circ_allreduce_gather(out, skips, n, c->p, c->rank,
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
    return crnet__alltoall_pairwise(out, call->p, call->rank, call->count,
                                    call->in_place);
  case FAMILY_BRUCK:
    return crnet__alltoall_bruck(out, call->p, call->rank, call->count,
                                 call->in_place);
  case FAMILY_STAR:
    return build_star(call, out);
  case FAMILY_GATHER_REDUCE:
    return build_gather_reduce(call, out);
  }
  return CRNET_EINVAL;
}
