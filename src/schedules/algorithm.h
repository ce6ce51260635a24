/* One algorithm: everything crnet knows of a schedule, in one row.
 *
 * Each family file (circulant.c, ring.c, hypercube.c, star.c, alltoall.c,
 * rooted.c, twolevel.c) defines its algorithms as crnet__algorithm rows
 * next to their builders, and registry.c lists the rows. Selection
 * (select.c), the cost model (model.c), crsched, crbench and the docs'
 * lists all read the rows, so a fact about a schedule is written once:
 * adding one is a new file with its row and one line in registry.c.
 */
#ifndef CRNET_ALGORITHM_H
#define CRNET_ALGORITHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "select.h"

/* The bit of one crnet_collective in an algorithm's `colls`. */
#define CRNET__COLL_BIT(coll) (1u << (coll))

/* The collectives that reduce: order matters for their operators. */
#define CRNET__REDUCING_COLLS                                                  \
  (CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |                                     \
   CRNET__COLL_BIT(CRNET_COLL_REDUCE_SCATTER) |                                \
   CRNET__COLL_BIT(CRNET_COLL_REDUCE) | CRNET__COLL_BIT(CRNET_COLL_SCAN))

/* The α-β-γ model's terms of a call as multiples (model.h): R message
 * rounds, B/m bytes moved and G/m bytes reduced on the busiest rank, m the
 * call's bytes (crnet__model_bytes). */
typedef struct crnet__model_coef {
  double rounds, moved, reduced;
} crnet__model_coef;

/* How the rounds of a schedule pair ranks, for pricing them one by one on
 * a comm across hosts (crnet__model_seconds_hosts): round i pairs ranks at
 * distance 2^i, and moves (and reduces) the whole vector (DOUBLING), a
 * halving piece (HALVING), a halving piece and back (HALVING_AND_BACK) or
 * 2^i blocks of m/p (GATHERING). */
enum crnet__round_shape {
  CRNET__ROUNDS_UNPRICED = 0,
  CRNET__ROUNDS_DOUBLING,
  CRNET__ROUNDS_HALVING,
  CRNET__ROUNDS_HALVING_AND_BACK,
  CRNET__ROUNDS_GATHERING
};

typedef struct crnet__algorithm {
  /* The name users set (crnet_comm_set_schedule, CRNET_*_SCHEDULE). */
  const char *name;
  /* Its id in call signatures, so ranks that picked different schedules
   * for one call fail instead of mixing them: never reused or changed. */
  uint32_t id;
  /* CRNET__COLL_BIT of every collective it can do. */
  unsigned colls;
  /* auto prices it for those collectives; false for the variants the
   * model can never prefer (named only). */
  bool in_auto;
  /* Its rounds cost ring_round·α (tuning.h), not α: a ring round waits
   * only for its neighbour. */
  bool ring_rounds;
  /* Builds this rank's schedule for a call of one of its collectives: 0,
   * CRNET_EINVAL or CRNET_ENOMEM. */
  int (*build)(const crnet__call *call, crnet__schedule *out);
  /* The model's terms for a call at p > 1; false where the model does not
   * cover it (auto then never takes it). NULL: never covered. */
  bool (*terms)(const crnet__call *call, crnet__model_coef *out);
  /* Whether its reductions keep rank order for the call: 0 with
   * *ordered, or CRNET_ENOMEM. NULL: never. */
  int (*keeps_order)(const crnet__call *call, bool *ordered);
  /* Whether it can do this call beyond its collective (a p it needs): 0,
   * or CRNET_EUNSUPPORTED with the reason in why. NULL: every call. */
  int (*check)(const crnet__call *call, char *why, size_t whylen);
  /* auto's price, where the terms alone do not give it: 0 with *seconds,
   * 1 when auto does not consider it for this call, or an error. NULL:
   * priced from the terms. */
  int (*price)(const crnet__call *call, double *seconds);
  /* Whether auto may take it for the call with m bytes, a bound that is
   * not a cost (allgather-reduce keeps p whole vectors). NULL: always. */
  bool (*auto_fits)(const crnet__call *call, double m);
  /* Its round shape for `call` across hosts; NULL or UNPRICED: the terms'
   * price holds. */
  enum crnet__round_shape (*host_rounds)(const crnet__call *call);
  /* The most distinct ranks one rank sends to or receives from over the
   * call, the largest over the ranks (root 0 for a rooted call): the links
   * a rank needs. Asked for p > 2 and never for alltoallv (see
   * crnet__algorithm_peers); crsched --cost --sweep prints it, and its
   * --verify holds it against the built schedules. NULL: not known. */
  int32_t (*peers)(const crnet__call *call);
  /* One line for crsched --list and the docs: what it is, after whom. */
  const char *summary;
} crnet__algorithm;

/* The rows, in auto's order of preference on equal prices. */
extern const crnet__algorithm *const crnet__algorithms[];
extern const size_t crnet__nalgorithms;

/* The row called `name` (the registry's own strings are found by pointer
 * first), or NULL. */
const crnet__algorithm *crnet__algorithm_find(const char *name);

/* The row with wire id `id`, or NULL. */
const crnet__algorithm *crnet__algorithm_by_id(uint32_t id);

/* The peers of a call on `a` (see its peers): 0 at p = 1, 1 at p = 2,
 * p - 1 for alltoallv (both schedules exchange with every rank), else the
 * row's own figure, or -1 when it has none. */
int32_t crnet__algorithm_peers(const crnet__algorithm *a,
                               const crnet__call *call);

/* Distinct nonzero values among +-v[i] mod p (n <= 64): the peers of a
 * rank that sends and receives at the offsets v[i]. */
int32_t crnet__distinct_offsets(const int32_t *v, int n, int32_t p);

/* keeps_order for the rows whose reductions always keep rank order. */
int crnet__keeps_order_always(const crnet__call *call, bool *ordered);

/* auto's price of `a` from its terms (select.c): 0 with *seconds; 1 when
 * the model does not cover the call or, for a non-commutative operator,
 * `a` does not keep rank order; or CRNET_ENOMEM. Across hosts, round by
 * round where its host_rounds says so. */
int crnet__algorithm_price_by_terms(const crnet__algorithm *a,
                                    const crnet__call *call, double *seconds);

#endif
