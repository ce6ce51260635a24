/* The cost model: the call's bytes, the chain's pieces, and the prices of
 * terms. See model.h.
 *
 * Each algorithm's terms (R, B/m, G/m) are its registry row's (algorithm.h),
 * next to its builders, with a table of them above the rows; they are the
 * simulator's synchronous-round counts for equal blocks: exact for every
 * row at powers of two and for every row but two at any p; where the fold
 * moves unequal blocks (rabenseifner reduce-scatter, hypercube allgather,
 * p not a power of two) within 25% of B and G, which only matters to
 * schedules that lose by more than that anyway (tests/test_tuning.c
 * checks both claims up to p = 64).
 *
 * Rounds are priced at ρ·α, with ρ the tuning's ring_round for every ring
 * schedule (its row's ring_rounds) and 1 for the rest: a ring round only
 * waits for its neighbour, and on the 2-core VM at p = 8 costs about 0.65
 * of a circulant round, where hypercube's rounds cost what circulant's do,
 * within the noise (docs/TUNING.md). The families crbench --calibrate does
 * not time (rabenseifner, bruck, pairwise, star, allgather-reduce,
 * circulant-linear) keep ρ = 1.
 */
#include "model.h"

#include <math.h>
#include <string.h>

#include "algorithm.h"

double crnet__model_bytes(const crnet__call *call) {
  double esize = call->esize > 0 ? call->esize : 1;
  double sum = 0;
  switch (call->coll) {
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    if (call->counts == NULL)
      return (double)call->count * esize *
             (call->coll == CRNET_COLL_ALLGATHER ? call->p : 1);
    for (int32_t r = 0; r < call->p; r++)
      sum += (double)call->counts[r];
    return sum * esize;
  case CRNET_COLL_ALLTOALL:
    return (double)call->count * call->p * esize;
  case CRNET_COLL_BARRIER:
    return 0;
  case CRNET_COLL_ALLTOALLV:
    /* A call's counts are each rank's own: not a figure every rank
     * shares, so auto's choice may not depend on them (it decides by p
     * alone). A tool's call with equal blocks and no per-rank arrays
     * (crsched) is priced as the all-to-all it is. */
    return call->rcounts != NULL ? 0
                                 : (double)call->count * call->p * esize;
  default:
    return (double)call->count * esize;
  }
}

/* The chain's price in units of α for nb pieces of m bytes' broadcast,
 * with b = β/α (per byte) and every round a piece: (nb+p-2)(1 + m/nb·b). */
static double chain_price(double nb, int32_t p, double m, double b) {
  return (nb + p - 2) * (1 + m / nb * b);
}

const crnet__tuning *crnet__model_tuning(const crnet__call *call,
                                         crnet__tuning *defaults) {
  if (call->tuning != NULL)
    return call->tuning;
  crnet__tuning_defaults(defaults);
  return defaults;
}

int32_t crnet__chain_pieces(const crnet__call *call) {
  crnet__tuning defaults;
  const crnet__tuning *t;
  crnet__tuning_param alpha, beta;
  double m = crnet__model_bytes(call), b, best;
  int32_t nb;
  if (call->p <= 2 || call->count <= 1)
    return 1; /* two ranks: one message; one element: one piece */
  t = crnet__model_tuning(call, &defaults);
  alpha = call->shm_links ? CRNET__TUNING_SHM_ALPHA : CRNET__TUNING_ALPHA;
  beta = call->shm_links ? CRNET__TUNING_SHM_BETA : CRNET__TUNING_BETA;
  b = crnet__tuning_get(t, beta, call->p) /
      (crnet__tuning_get(t, CRNET__TUNING_RING_ROUND, call->p) *
       crnet__tuning_get(t, alpha, call->p));
  /* The price is convex in nb with its real minimum at sqrt((p-2)·m·b):
   * the better of the integers either side, within 1..count and
   * CRNET__CHAIN_MAX_PIECES. */
  best = sqrt((double)(call->p - 2) * m * b);
  if (!(best < CRNET__CHAIN_MAX_PIECES))
    best = CRNET__CHAIN_MAX_PIECES;
  nb = best < 1 ? 1 : (int32_t)best;
  if (nb < CRNET__CHAIN_MAX_PIECES &&
      chain_price(nb + 1, call->p, m, b) < chain_price(nb, call->p, m, b))
    nb++;
  return (uint64_t)nb < call->count ? nb : (int32_t)call->count;
}

bool crnet__model_terms_of(const char *name, const crnet__call *call,
                           crnet__model_terms *out) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  double m = crnet__model_bytes(call);
  crnet__model_coef c = {0, 0, 0};
  if (a == NULL || (a->colls & CRNET__COLL_BIT(call->coll)) == 0 ||
      call->p < 1)
    return false;
  if (call->p == 1) {
    /* Nothing travels: every schedule is a local copy at most. */
    *out = (crnet__model_terms){0, 0, 0, CRNET__TUNING_NPARAMS};
    return true;
  }
  if (a->terms == NULL || !a->terms(call, &c))
    return false;
  *out = (crnet__model_terms){c.rounds, c.moved * m, c.reduced * m,
                              a->ring_rounds ? CRNET__TUNING_RING_ROUND
                                             : CRNET__TUNING_NPARAMS};
  return true;
}

double crnet__model_seconds(const crnet__model_terms *t,
                            const crnet__tuning *tuning, int32_t p) {
  return crnet__model_seconds_on(t, tuning, p, false);
}

double crnet__model_seconds_on(const crnet__model_terms *t,
                               const crnet__tuning *tuning, int32_t p,
                               bool shm) {
  double rho = t->round_factor < CRNET__TUNING_NPARAMS
                   ? crnet__tuning_get(tuning, t->round_factor, p)
                   : 1;
  crnet__tuning_param alpha = shm ? CRNET__TUNING_SHM_ALPHA
                                  : CRNET__TUNING_ALPHA;
  crnet__tuning_param beta = shm ? CRNET__TUNING_SHM_BETA : CRNET__TUNING_BETA;
  return t->rounds * rho * crnet__tuning_get(tuning, alpha, p) +
         t->moved * crnet__tuning_get(tuning, beta, p) +
         t->reduced * crnet__tuning_get(tuning, CRNET__TUNING_GAMMA, p);
}

/* --- across hosts, round by round ------------------------------------------ */

/* Whether some rank r has its partner r XOR dist on another host. */
static bool crosses(const crnet__call *call, int32_t dist) {
  for (int32_t r = 0; r < call->p; r++)
    if (call->host[r] != call->host[r ^ dist])
      return true;
  return false;
}

/* One round: `moved` and `reduced` bytes, on TCP's constants if it crosses
 * hosts, else shared memory's. */
static double round_seconds(const crnet__tuning *t, int32_t p, bool cross,
                            double moved, double reduced) {
  crnet__tuning_param alpha = cross ? CRNET__TUNING_ALPHA
                                    : CRNET__TUNING_SHM_ALPHA;
  crnet__tuning_param beta = cross ? CRNET__TUNING_BETA
                                   : CRNET__TUNING_SHM_BETA;
  return crnet__tuning_get(t, alpha, p) + moved * crnet__tuning_get(t, beta, p) +
         reduced * crnet__tuning_get(t, CRNET__TUNING_GAMMA, p);
}

bool crnet__model_seconds_hosts(const char *name, const crnet__call *call,
                                const crnet__tuning *t, double *seconds) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  int32_t p = call->p;
  int d = crnet__floor_log2(p);
  double m = crnet__model_bytes(call), sum = 0;
  enum crnet__round_shape shape;
  if (call->host == NULL || call->nhosts < 2 || p < 2 || (p & (p - 1)) != 0)
    return false;
  if (a == NULL || (a->colls & CRNET__COLL_BIT(call->coll)) == 0 ||
      a->host_rounds == NULL)
    return false;
  shape = a->host_rounds(call);
  if (shape == CRNET__ROUNDS_UNPRICED)
    return false;
  /* Round i pairs ranks at distance 2^i. Recursive doubling moves and
   * reduces the whole vector each round; recursive halving m/2^(i+1) (and
   * the allgather back the same pieces); the allgather 2^i blocks of
   * m/p. Rounds are summed, so their order does not matter here. */
  for (int i = 0; i < d; i++) {
    bool cross = crosses(call, (int32_t)1 << i);
    double piece = m / (double)((int64_t)1 << (i + 1));
    switch (shape) {
    case CRNET__ROUNDS_DOUBLING:
      sum += round_seconds(t, p, cross, m, m);
      break;
    case CRNET__ROUNDS_HALVING:
      sum += round_seconds(t, p, cross, piece, piece);
      break;
    case CRNET__ROUNDS_HALVING_AND_BACK:
      sum += round_seconds(t, p, cross, piece, piece) +
             round_seconds(t, p, cross, piece, 0);
      break;
    case CRNET__ROUNDS_GATHERING:
      sum += round_seconds(t, p, cross, m / p * (double)((int64_t)1 << i), 0);
      break;
    case CRNET__ROUNDS_UNPRICED:
      break;
    }
  }
  *seconds = sum;
  return true;
}
