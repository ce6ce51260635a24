/* The cost model's terms per schedule and collective. See model.h.
 *
 * Notation: p ranks, m bytes, q = (p-1)/p, L = ceil(log2 p), d =
 * floor(log2 p), p' = 2^d, q' = (p'-1)/p', f = 1 when p is not a power of
 * two (the fold of hypercube and rabenseifner), else 0.
 *
 *   collective      schedule           R              B/m            G/m
 *   allreduce       circulant          2L             2q             q (*)
 *                   ring               2(p-1)         2q             q
 *                   circulant-linear   2(p-1)         2q             1
 *                   hypercube          d + 3f         d + 2f         d + f/2
 *                   rabenseifner       2d + 3f        2q' + 2f       q' + f/2
 *                   allgather-reduce   L              p-1            p-1
 *                   star (p = n!)      n(n-1)/2       n(n-1)/2       n(n-1)/2
 *   reduce-scatter  circulant          L              q              q (*)
 *                   ring               p-1            q              q
 *                   circulant-linear   p-1            q              1
 *                   rabenseifner       d + 3f         q or 2         q or q'+1/2
 *   allgather       circulant          L              q              -
 *                   ring, c.-linear    p-1            q              -
 *                   hypercube          d + 2f         q + f          -
 *                   star (p = n!)      n(n-1)/2       q              -
 *   bcast           circulant          2L             2q             -
 *                   hypercube          L              L              -
 *                   ring (a chain)     nb + p - 2     (nb+p-2)/nb    -  (&)
 *                   circulant-linear   2(p-1)         2q             -
 *   reduce          circulant          2L             2q             q (*)
 *                   ring               2(p-1)         2q             q
 *                   circulant-linear   2(p-1)         2q             1
 *                   rabenseifner       2d + 2f        2q' + f        q' + f/2
 *   scan            circulant          L              L              L
 *                   hypercube          L              L              2L - 1 (+)
 *   exscan          circulant          L              L              2L - 2 (#)
 *                   hypercube          L              L              2L - 1 (+)
 *   scan, exscan    ring (a chain)     2(p-1)         2q             2q ($)
 *   all-to-all      bruck              L              sum_k c_k / p  -
 *                   pairwise           p-1            q              -
 *                   hypercube (p')     d              d/2            -
 *                   ring               p-1            (p-1)/2        -
 *   barrier         circulant          L              -              -
 *                   circulant-linear   p-1            -              -
 *   gather, scatter binomial           L              Σpopcount/p    -  (%)
 *                   linear             1 + (p-2)/4    q              -  (%)
 *   alltoallv       pairwise, ring     p-1            q              -
 *
 * (c_k: how many of 1..p-1 have bit k set, the blocks Bruck's round k
 * forwards. (*): 1 at p = 3, see circulant_reduced. (+): 2L - 2 at p =
 * 2^d + 1 > 2. (#): 2L - 3 while p <= 3/4 2^L. ($): exscan (2p-3)/p, 0
 * at p = 2. (%): not synchronous-round counts, see terms_rooted. (&): nb
 * pieces, crnet__chain_pieces: the price's minimum over nb, so the
 * chain's terms depend on α, β and m as well.) At p = 2
 * circulant-linear reduces q, like the others. These
 * are the simulator's synchronous-round counts for equal blocks: exact for
 * every row at powers of two and for every row but two at any p; where
 * the fold moves unequal blocks (rabenseifner reduce-scatter, hypercube
 * allgather, p not a power of two) within 25% of B and G, which only
 * matters to schedules that lose by more than that anyway
 * (tests/test_tuning.c checks both claims up to p = 64).
 *
 * Rounds are priced at ρ·α, with ρ the tuning's ring_round for every ring
 * schedule and 1 for the rest: a ring round only waits for its neighbour,
 * and on the 2-core VM at p = 8 costs about 0.65 of a circulant round,
 * where hypercube's rounds cost what circulant's do, within the noise
 * (docs/TUNING.md). The families crbench --calibrate does not time
 * (rabenseifner, bruck, pairwise, star, allgather-reduce,
 * circulant-linear) keep ρ = 1.
 */
#include "model.h"

#include <math.h>
#include <string.h>

/* n when p = n! (n >= 2), else 0. */
static int factorial_of(int32_t p) {
  int64_t f = 1;
  for (int n = 2; f <= p; n++) {
    f *= n;
    if (f == p)
      return n;
  }
  return 0;
}

/* G/m of the circulant reduce-scatter phase: q, except at p = 3, where
 * rank 2 keeps rank order by doing both of its reductions after the last
 * round, so the critical path reduces three blocks, not two. */
static double circulant_reduced(int32_t p) {
  return p == 3 ? 1 : (double)(p - 1) / p;
}

/* Σ_k c_k / p for Bruck's all-to-all: round k forwards the blocks j in
 * 1..p-1 with bit k set. */
static double bruck_volume(int32_t p) {
  int64_t total = 0;
  for (int k = 0; (INT64_C(1) << k) < p; k++) {
    int64_t period = INT64_C(2) << k, half = INT64_C(1) << k;
    /* j in [0, p) with bit k set: full periods, then the partial one */
    int64_t full = (int64_t)p / period, rest = (int64_t)p % period;
    total += full * half + (rest > half ? rest - half : 0);
  }
  return (double)total / p;
}

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

/* The terms as multiples: rounds, B/m, G/m. */
typedef struct coef {
  double r, b, g;
} coef;

static bool terms_allreduce(const char *s, int32_t p, coef *c) {
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p), n;
  double q = (double)(p - 1) / p, pp = (double)(INT64_C(1) << d),
         qq = (pp - 1) / pp, f = (1 << d) != p;
  if (strcmp(s, "circulant") == 0)
    *c = (coef){2.0 * L, 2 * q, circulant_reduced(p)};
  else if (strcmp(s, "ring") == 0)
    *c = (coef){2.0 * (p - 1), 2 * q, q};
  else if (strcmp(s, "circulant-linear") == 0)
    *c = (coef){2.0 * (p - 1), 2 * q, p > 2 ? 1 : q};
  else if (strcmp(s, "hypercube") == 0)
    *c = (coef){d + 3 * f, d + 2 * f, d + f / 2};
  else if (strcmp(s, "rabenseifner") == 0)
    *c = (coef){2 * d + 3 * f, 2 * qq + 2 * f, qq + f / 2};
  else if (strcmp(s, "allgather-reduce") == 0)
    *c = (coef){L, p - 1.0, p - 1.0};
  else if (strcmp(s, "star") == 0 && (n = factorial_of(p)) > 0)
    *c = (coef){n * (n - 1) / 2.0, n * (n - 1) / 2.0, n * (n - 1) / 2.0};
  else
    return false;
  return true;
}

static bool terms_reduce_scatter(const char *s, int32_t p, coef *c) {
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p);
  double q = (double)(p - 1) / p, pp = (double)(INT64_C(1) << d),
         qq = (pp - 1) / pp;
  bool f = (1 << d) != p;
  if (strcmp(s, "circulant") == 0)
    *c = (coef){L, q, circulant_reduced(p)};
  else if (strcmp(s, "ring") == 0)
    *c = (coef){p - 1.0, q, q};
  else if (strcmp(s, "circulant-linear") == 0)
    *c = (coef){p - 1.0, q, p > 2 ? 1 : q};
  else if (strcmp(s, "rabenseifner") == 0)
    *c = f ? (coef){d + 3.0, 2, qq + 0.5} : (coef){d, q, q};
  else
    return false;
  return true;
}

static bool terms_allgather(const char *s, int32_t p, coef *c) {
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p), n;
  double q = (double)(p - 1) / p, f = (1 << d) != p;
  if (strcmp(s, "circulant") == 0)
    *c = (coef){L, q, 0};
  else if (strcmp(s, "ring") == 0 || strcmp(s, "circulant-linear") == 0)
    *c = (coef){p - 1.0, q, 0};
  else if (strcmp(s, "hypercube") == 0)
    *c = (coef){d + 2 * f, q + f, 0};
  else if (strcmp(s, "star") == 0 && (n = factorial_of(p)) > 0)
    *c = (coef){n * (n - 1) / 2.0, q, 0};
  else
    return false;
  return true;
}

/* The chain's price in units of α for nb pieces of m bytes' broadcast,
 * with b = β/α (per byte) and every round a piece: (nb+p-2)(1 + m/nb·b). */
static double chain_price(double nb, int32_t p, double m, double b) {
  return (nb + p - 2) * (1 + m / nb * b);
}

int32_t crnet__chain_pieces(const crnet__call *call) {
  crnet__tuning defaults;
  const crnet__tuning *t = call->tuning;
  crnet__tuning_param alpha, beta;
  double m = crnet__model_bytes(call), b, best;
  int32_t nb;
  if (call->p <= 2 || call->count <= 1)
    return 1; /* two ranks: one message; one element: one piece */
  if (t == NULL) {
    crnet__tuning_defaults(&defaults);
    t = &defaults;
  }
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

static bool terms_bcast(const char *s, const crnet__call *call, coef *c) {
  int32_t p = call->p;
  double q = (double)(p - 1) / p;
  if (strcmp(s, "circulant") == 0)
    *c = (coef){2.0 * crnet__ceil_log2(p), 2 * q, 0};
  else if (strcmp(s, "hypercube") == 0) /* the binomial tree */
    *c = (coef){crnet__ceil_log2(p), crnet__ceil_log2(p), 0};
  else if (strcmp(s, "ring") == 0) { /* the chain in nb pieces */
    double nb = crnet__chain_pieces(call);
    *c = (coef){nb + p - 2, (nb + p - 2) / nb, 0};
  } else if (strcmp(s, "circulant-linear") == 0)
    *c = (coef){2.0 * (p - 1), 2 * q, 0};
  else
    return false;
  return true;
}

static bool terms_reduce(const char *s, int32_t p, coef *c) {
  int d = crnet__floor_log2(p);
  double q = (double)(p - 1) / p, pp = (double)(INT64_C(1) << d),
         qq = (pp - 1) / pp, f = (1 << d) != p;
  if (strcmp(s, "circulant") == 0)
    *c = (coef){2.0 * crnet__ceil_log2(p), 2 * q, circulant_reduced(p)};
  else if (strcmp(s, "ring") == 0)
    *c = (coef){2.0 * (p - 1), 2 * q, q};
  else if (strcmp(s, "circulant-linear") == 0)
    *c = (coef){2.0 * (p - 1), 2 * q, p > 2 ? 1 : q};
  else if (strcmp(s, "rabenseifner") == 0)
    *c = (coef){2 * d + 2 * f, 2 * qq + f, qq + f / 2};
  else
    return false;
  return true;
}

static bool terms_scan(const char *s, int32_t p, bool exclusive, coef *c) {
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p);
  double g;
  if (strcmp(s, "circulant") == 0) {
    /* exscan: one more fold per round, but for the first, and for the
     * second as well while p is at most 3/4 of 2^L */
    g = !exclusive ? L : 4 * (int64_t)p <= 3 * (INT64_C(1) << L) ? 2 * L - 3
                                                                   : 2 * L - 2;
    *c = (coef){L, L, g};
  } else if (strcmp(s, "hypercube") == 0) {
    /* Alg. 4.9 reduces twice per round but the first; p = 2^d + 1 saves
     * one more */
    g = p == (1 << d) + 1 && p > 2 ? 2 * L - 2 : 2 * L - 1;
    *c = (coef){L, L, g};
  } else if (strcmp(s, "ring") == 0) {
    /* the pipelined chain: 2(p-1) rounds of a p-th of the vector on the
     * last rank's path */
    double q = (double)(p - 1) / p;
    /* exscan: the last rank reduces nothing, one block less on the path */
    g = !exclusive ? 2 * q : p > 2 ? (2.0 * p - 3) / p : 0;
    *c = (coef){2.0 * (p - 1), 2 * q, g};
  } else {
    return false;
  }
  return true;
}

static bool terms_alltoall(const char *s, int32_t p, coef *c) {
  int d = crnet__floor_log2(p);
  if (strcmp(s, "bruck") == 0)
    *c = (coef){crnet__ceil_log2(p), bruck_volume(p), 0};
  else if (strcmp(s, "pairwise") == 0)
    *c = (coef){p - 1.0, (double)(p - 1) / p, 0};
  else if (strcmp(s, "hypercube") == 0 && (1 << d) == p)
    *c = (coef){d, d / 2.0, 0};
  else if (strcmp(s, "ring") == 0)
    *c = (coef){p - 1.0, (p - 1) / 2.0, 0};
  else
    return false;
  return true;
}

/* Gather and scatter are priced apart from the synchronous-round counts
 * of the rows above, because what decides between their two schedules is
 * what those counts leave out:
 *
 * - Rounds. The linear schedule's p - 1 rounds are independent (each its
 *   own peer, its own block), and the executor keeps up to
 *   CRNET_ROUNDS_IN_FLIGHT of them going at once, so their latencies
 *   overlap: only the root's handling of each further message adds, priced
 *   at a quarter of a round. Measured on the 2-core VM (crbench -s
 *   binomial,linear, 1 KiB to 4 MiB): linear is faster or level at every
 *   size at p = 4 and 8, and binomial wins small scatters at p = 16. So R
 *   = 1 + (p - 2)/4 against the tree's ceil(log2 p): linear up to p = 13.
 * - Bytes. The root receives (sends) q·m either way, but the tree relays:
 *   the block of relative rank r travels popcount(r) hops, Σ popcount(r)
 *   / p · m bytes in all, against the linear schedule's q·m. On links
 *   bound by the CPU (loopback, ranks sharing cores) every relayed byte
 *   costs a copy on both ends, and linear gathers 4 MiB 1.9x (p = 8) and
 *   3.8x (p = 16) faster than the tree; on a network the root's link
 *   decides and the two tie, so pricing the volume never hurts there.
 *   B/m is that volume: L/2 at powers of two, against q. */
static double binomial_volume(int32_t p) {
  int64_t hops = 0;
  for (int32_t r = 1; r < p; r++)
    for (uint32_t v = (uint32_t)r; v != 0; v &= v - 1)
      hops++;
  return (double)hops / p;
}

static bool terms_rooted(const char *s, int32_t p, coef *c) {
  double q = (double)(p - 1) / p;
  if (strcmp(s, "binomial") == 0)
    *c = (coef){crnet__ceil_log2(p), binomial_volume(p), 0};
  else if (strcmp(s, "linear") == 0)
    *c = (coef){1 + (p - 2) / 4.0, q, 0};
  else
    return false;
  return true;
}

/* All-to-all with per-peer counts: p - 1 exchanges of a block each either
 * way (pairwise several in flight, ring one at a time); for a program's
 * call m is 0 (see crnet__model_bytes). */
static bool terms_alltoallv(const char *s, int32_t p, coef *c) {
  if (strcmp(s, "pairwise") == 0 || strcmp(s, "ring") == 0)
    *c = (coef){p - 1.0, (double)(p - 1) / p, 0};
  else
    return false;
  return true;
}

static bool terms_barrier(const char *s, int32_t p, coef *c) {
  if (strcmp(s, "circulant") == 0)
    *c = (coef){crnet__ceil_log2(p), 0, 0};
  else if (strcmp(s, "circulant-linear") == 0)
    *c = (coef){p - 1.0, 0, 0};
  else
    return false;
  return true;
}

/* ρ's constant for schedule `name` (see the top of the file). */
static crnet__tuning_param round_factor_of(const char *name) {
  return strcmp(name, "ring") == 0 ? CRNET__TUNING_RING_ROUND
                                   : CRNET__TUNING_NPARAMS;
}

bool crnet__model_terms_of(const char *name, const crnet__call *call,
                           crnet__model_terms *out) {
  int32_t p = call->p;
  double m = crnet__model_bytes(call);
  coef c = {0, 0, 0};
  bool ok;
  if (p < 1)
    return false;
  if (p == 1) {
    /* Nothing travels: every schedule is a local copy at most. */
    *out = (crnet__model_terms){0, 0, 0, CRNET__TUNING_NPARAMS};
    return crnet__schedule_known(name, call->coll);
  }
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    ok = terms_allreduce(name, p, &c);
    break;
  case CRNET_COLL_REDUCE_SCATTER:
    ok = terms_reduce_scatter(name, p, &c);
    break;
  case CRNET_COLL_ALLGATHER:
    ok = terms_allgather(name, p, &c);
    break;
  case CRNET_COLL_BCAST:
    ok = terms_bcast(name, call, &c);
    break;
  case CRNET_COLL_REDUCE:
    ok = terms_reduce(name, p, &c);
    break;
  case CRNET_COLL_SCAN:
    ok = terms_scan(name, p, call->exclusive, &c);
    break;
  case CRNET_COLL_ALLTOALL:
    ok = terms_alltoall(name, p, &c);
    break;
  case CRNET_COLL_BARRIER:
    ok = terms_barrier(name, p, &c);
    break;
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    ok = terms_rooted(name, p, &c);
    break;
  case CRNET_COLL_ALLTOALLV:
    ok = terms_alltoallv(name, p, &c);
    break;
  default:
    ok = false;
    break;
  }
  if (ok)
    *out = (crnet__model_terms){c.r, c.b * m, c.g * m, round_factor_of(name)};
  return ok;
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
  int32_t p = call->p;
  int d = crnet__floor_log2(p);
  double m = crnet__model_bytes(call), sum = 0;
  enum { DOUBLING, HALVING, HALVING_AND_BACK, GATHERING } shape;
  if (call->host == NULL || call->nhosts < 2 || p < 2 || (p & (p - 1)) != 0)
    return false;
  if (call->coll == CRNET_COLL_ALLREDUCE && strcmp(name, "hypercube") == 0)
    shape = DOUBLING;
  else if (call->coll == CRNET_COLL_ALLREDUCE &&
           strcmp(name, "rabenseifner") == 0)
    shape = HALVING_AND_BACK;
  else if (call->coll == CRNET_COLL_REDUCE_SCATTER &&
           strcmp(name, "rabenseifner") == 0)
    shape = HALVING;
  else if (call->coll == CRNET_COLL_ALLGATHER && strcmp(name, "hypercube") == 0)
    shape = GATHERING;
  else
    return false;
  /* Round i pairs ranks at distance 2^i. Recursive doubling moves and
   * reduces the whole vector each round; recursive halving m/2^(i+1) (and
   * the allgather back the same pieces); the allgather 2^i blocks of
   * m/p. Rounds are summed, so their order does not matter here. */
  for (int i = 0; i < d; i++) {
    bool cross = crosses(call, (int32_t)1 << i);
    double piece = m / (double)((int64_t)1 << (i + 1));
    switch (shape) {
    case DOUBLING:
      sum += round_seconds(t, p, cross, m, m);
      break;
    case HALVING:
      sum += round_seconds(t, p, cross, piece, piece);
      break;
    case HALVING_AND_BACK:
      sum += round_seconds(t, p, cross, piece, piece) +
             round_seconds(t, p, cross, piece, 0);
      break;
    case GATHERING:
      sum += round_seconds(t, p, cross, m / p * (double)((int64_t)1 << i), 0);
      break;
    }
  }
  *seconds = sum;
  return true;
}
