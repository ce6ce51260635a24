/* crsched's sweep: --cost --sweep, the closed-form model (model.h) of every
 * schedule over p = 2..--pmax with no schedule built, and --cost --sweep
 * --verify, those formulas held against every rank's built schedule.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "crnet.h"
#include "model.h"
#include "schedule.h"
#include "select.h"
#include "tuning.h"

#include "crsched.h"

/* ---- the sweep: the closed-form model over p ---------------------------
 *
 * --cost --sweep prices every schedule the model covers (model.h: auto's
 * candidates) for every collective, at p from 2 to --pmax (default 10^6):
 * 8 points per decade, plus every power of two 2^k and 2^k +- 1, where the
 * schedules that fold or round up differ. No schedule is built: rounds,
 * bytes and reductions come from crnet__model_terms_of, the seconds from
 * crnet__model_seconds with the tuning a job would use (see
 * crsched_load_tuning), and the peers from each row's peers (algorithm.h),
 * each a few flops to O(log p) (O(p) for the circulant scan, a loop over
 * ranks of O(log p) each).
 *
 * Peers: the number of distinct ranks one rank sends to or receives from
 * over the whole call, the largest over all ranks (root 0 for bcast and
 * reduce). It is the number of links a rank needs. --verify builds every
 * rank's schedule at every p up to --pmax and checks rounds, bytes and
 * peers against these formulas (see sweep_verify). */

/* The most distinct peers of one rank: see the top of this section (each
 * row's peers, algorithm.h). -1 if unknown. */
static int32_t sweep_peers(const char *name, const crnet__call *call) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  return a != NULL ? crnet__algorithm_peers(a, call) : -1;
}

/* The p of the sweep, increasing, into ps (at most cap). */
static size_t sweep_ps(int32_t pmax, int32_t *ps, size_t cap) {
  size_t n = 0;
  for (int i = 0; n < cap; i++) { /* 8 per decade */
    double x = pow(10.0, i / 8.0);
    int32_t p = (int32_t)floor(x + 0.5);
    if (p > pmax)
      break;
    if (p >= 2)
      ps[n++] = p;
  }
  for (int k = 1; (INT64_C(1) << k) - 1 <= pmax && n + 3 <= cap; k++)
    for (int dlt = -1; dlt <= 1; dlt++) {
      int64_t p = (INT64_C(1) << k) + dlt;
      if (p >= 2 && p <= pmax)
        ps[n++] = (int32_t)p;
    }
  if (n < cap && ps[0] != pmax && pmax >= 2)
    ps[n++] = pmax;
  /* sort, unique */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && ps[j - 1] > ps[j]; j--) {
      int32_t t = ps[j];
      ps[j] = ps[j - 1];
      ps[j - 1] = t;
    }
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || ps[u - 1] != ps[i])
      ps[u++] = ps[i];
  return u;
}

/* The model's call for p ranks and one element per block (all-to-all: per
 * peer). The model is linear in m (model.h: the terms are multiples of m),
 * so crsched_sweep_main prices this call and scales B and G to the m
 * wanted; that keeps sizes below one element per block (m = 8 at p = 10^6)
 * meaningful. */
static crnet__call sweep_call(const options *o, const coll_kind *k, int32_t p,
                              const crnet__tuning *t) {
  crnet__call c;
  memset(&c, 0, sizeof c);
  c.coll = k->coll;
  c.exclusive = k->exclusive;
  c.esize = (uint32_t)o->dtype_size;
  c.p = p;
  c.commutative = true;
  c.tuning = t;
  /* crnet__model_bytes: allgather per rank, all-to-all per peer, the
   * others the whole vector */
  c.count = k->coll == CRNET_COLL_ALLGATHER || is_a2a(k->coll)
                ? 1
                : (uint64_t)p;
  return c;
}

/* The terms of `name` for call's collective at m bytes. False where the
 * model does not cover it, and beyond a bound of its row (allgather-reduce:
 * its memory), where auto never prices it either. */
static bool sweep_terms(const char *name, const crnet__call *call, double m,
                        crnet__model_terms *mt) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  double ref = crnet__model_bytes(call);
  if (a == NULL || !crnet__model_terms_of(name, call, mt))
    return false;
  if (a->auto_fits != NULL && !a->auto_fits(call, m))
    return false;
  if (ref > 0) {
    mt->moved *= m / ref;
    mt->reduced *= m / ref;
  }
  return true;
}

int crsched_sweep_main(const options *o) {
  crnet__tuning t;
  int32_t ps[512];
  size_t nps = sweep_ps(o->pmax, ps, sizeof ps / sizeof ps[0]);
  char desc[600];
  if (crsched_load_tuning(o, &t) != 0)
    return 1;
  crnet__tuning_describe(&t, 2, desc, sizeof desc);
  if (o->dat)
    printf("# crsched --cost --sweep; tuning: %s\n"
           "# p coll schedule m_bytes rounds peers moved_bytes reduced_bytes "
           "seconds\n",
           desc);
  else if (!o->json)
    printf("tuning: %s\nmodel: closed form (model.h), no schedule built; "
           "peers: most distinct peers of one rank\n"
           "%8s %-15s %-17s %12s %8s %8s %14s %14s %12s\n",
           desc, "p", "collective", "schedule", "m (bytes)", "rounds",
           "peers", "moved B", "reduced B", "time (s)");
  for (size_t pi = 0; pi < nps; pi++)
    for (size_t mi = 0; mi < o->nm; mi++)
      for (size_t ci = 0; ci < NKNOWN_COLLS; ci++) {
        const coll_kind *k = &crsched_known_colls[ci];
        crnet__call call;
        if (!crsched_wanted(o, k))
          continue;
        call = sweep_call(o, k, ps[pi], &t);
        for (size_t i = 0; crnet__auto_candidate(k->coll, i) != NULL; i++) {
          const char *name = crnet__auto_candidate(k->coll, i);
          crnet__model_terms mt;
          double secs;
          int32_t peers;
          if ((o->schedule != NULL && strcmp(o->schedule, name) != 0) ||
              !sweep_terms(name, &call, (double)o->ms[mi], &mt))
            continue;
          secs = crnet__model_seconds(&mt, &t, ps[pi]);
          peers = sweep_peers(name, &call);
          if (o->json)
            printf("{\"p\":%d,\"coll\":\"%s\",\"schedule\":\"%s\",\"m\":%" PRIu64
                   ",\"rounds\":%.17g,\"peers\":%d,\"moved\":%.17g,"
                   "\"reduced\":%.17g,\"time\":%.17g}\n",
                   ps[pi], k->name, name, o->ms[mi], mt.rounds, peers,
                   mt.moved, mt.reduced, secs);
          else
            printf(o->dat ? "%d %s %s %" PRIu64 " %.17g %d %.17g %.17g %.17g\n"
                          : "%8d %-15s %-17s %12" PRIu64
                            " %8.6g %8d %14.6g %14.6g %12.6g\n",
                   ps[pi], k->name, name, o->ms[mi], mt.rounds, peers,
                   mt.moved, mt.reduced, secs);
        }
      }
  return 0;
}

/* ---- --sweep --verify: the formulas against the builders ---------------
 *
 * For every p from 2 to --pmax, every collective and every schedule the
 * model covers, builds every rank's schedule for 240 elements per block (4
 * bytes each; all-to-all: 240 per peer) and compares with the closed forms:
 * the rounds in which some rank communicates with R, the sum over rounds of
 * the busiest rank's max(sent, received) with B, the same for reduced
 * bytes with G, and the most distinct peers of a rank with sweep_peers.
 * Rounds and peers must be equal; bytes within 1% (the halves of a
 * vector of p blocks are not whole blocks when p is odd), and within 25%
 * for the two rows model.c names (rabenseifner reduce-scatter and
 * hypercube allgather when p is not a power of two). Where every rank's schedule is
 * a rotation of rank 0's (crsched_rotation_symmetric), ranks 0, 1, p/2 and p-1
 * stand for all; the other rows build every rank, at every p up to
 * VERIFY_ALL_RANKS_MAX_P and beyond it at 2^k and 2^k +- 1 only.
 * circulant-linear bcast and reduce, O(p^2) to build per rank, stop at
 * p = 64. Prints each disagreement; exit 1 if any. */

typedef struct verify_acc {
  double *moved, *reduced; /* per round, the busiest rank's bytes */
  bool *comm;
  uint32_t n, cap;
  int32_t peers;
  uint32_t *mark; /* mark[q] == stamp: q already counted for this rank */
  uint32_t stamp;
} verify_acc;

static bool acc_rank(verify_acc *a, const crnet__schedule *s, uint64_t esize) {
  int32_t peers = 0;
  if (s->nrounds > a->cap) {
    uint32_t cap = s->nrounds * 2;
    double *mv = realloc(a->moved, sizeof *mv * cap);
    if (mv != NULL)
      a->moved = mv;
    double *rd = realloc(a->reduced, sizeof *rd * cap);
    if (rd != NULL)
      a->reduced = rd;
    bool *cm = realloc(a->comm, sizeof *cm * cap);
    if (cm != NULL)
      a->comm = cm;
    if (mv == NULL || rd == NULL || cm == NULL)
      return false;
    a->cap = cap;
  }
  for (uint32_t k = a->n; k < s->nrounds; k++) {
    a->moved[k] = a->reduced[k] = 0;
    a->comm[k] = false;
  }
  if (s->nrounds > a->n)
    a->n = s->nrounds;
  a->stamp++;
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    round_totals t = crsched_round_sum(s, k);
    double mv = (double)((t.sent > t.recv ? t.sent : t.recv) * esize);
    int32_t pr[2] = {ro->send.peer, ro->recv.peer};
    a->comm[k] |= t.comm;
    if (mv > a->moved[k])
      a->moved[k] = mv;
    if ((double)(t.reduced * esize) > a->reduced[k])
      a->reduced[k] = (double)(t.reduced * esize);
    for (int i = 0; i < 2; i++)
      if (pr[i] >= 0 && a->mark[pr[i]] != a->stamp) {
        a->mark[pr[i]] = a->stamp;
        peers++;
      }
  }
  if (peers > a->peers)
    a->peers = peers;
  return true;
}

static bool near(double got, double want, double tol) {
  double diff = fabs(got - want), scale = fabs(want) > 1 ? fabs(want) : 1;
  return diff <= tol * scale;
}

/* Rows that build every rank are checked at every p up to this, then at
 * p = 2^k - 1, 2^k, 2^k + 1 only: building p ranks of O(p) each at every
 * p to a few thousand takes minutes. */
#define VERIFY_ALL_RANKS_MAX_P 128

static bool near_power_of_two(int32_t p) {
  return ((p - 1) & (p - 2)) == 0 || (p & (p - 1)) == 0 ||
         ((p + 1) & p) == 0;
}

/* One (collective, schedule, p). 0 agree, 1 disagree (printed), 2 not
 * checked at this p, -1 error. */
static int verify_one(const options *o, const coll_kind *k, const char *name,
                      int32_t p, verify_acc *a, const blocks *b,
                      const blocks *a2a) {
  const uint64_t esize = 4;
  const blocks *bl = is_a2a(k->coll) ? a2a : b;
  options vo = *o;
  crnet__call mc;
  crnet__model_terms mt;
  cost_row row = {.coll = k->coll, .exclusive = k->exclusive, .name = name};
  double rounds = 0, moved = 0, reduced = 0, tol = 0.01;
  bool sym;
  int32_t peers_want;
  vo.p = p;
  vo.dtype_size = esize;
  vo.all = false;
  mc = crsched_call_for(&vo, k->coll, k->exclusive, 0, bl);
  mc.counts = NULL; /* the model takes equal blocks */
  mc.sdispls = mc.rcounts = mc.rdispls = NULL;
  if (k->coll == CRNET_COLL_ALLGATHER)
    mc.count = bl->counts[0];
  if (!crnet__model_terms_of(name, &mc, &mt))
    return 0;
  a->n = 0;
  a->peers = 0;
  sym = crsched_rotation_symmetric(&vo, &row, bl);
  if (!sym && p > VERIFY_ALL_RANKS_MAX_P && !near_power_of_two(p))
    return 2;
  for (int32_t r = 0; r < p; r++) {
    crnet__call c;
    crnet__schedule s;
    if (sym && r != 0 && r != 1 && r != p / 2 && r != p - 1)
      continue;
    c = crsched_call_for(&vo, k->coll, k->exclusive, r, bl);
    if (crsched_build_or_complain(name, &c, &s) != 0)
      return -1;
    bool ok = acc_rank(a, &s, esize);
    crnet__sched_free(&s);
    if (!ok)
      return -1;
  }
  for (uint32_t j = 0; j < a->n; j++) {
    rounds += a->comm[j];
    moved += a->moved[j];
    reduced += a->reduced[j];
  }
  if ((1 << crnet__floor_log2(p)) != p &&
      ((strcmp(name, "rabenseifner") == 0 &&
        k->coll == CRNET_COLL_REDUCE_SCATTER) ||
       (strcmp(name, "hypercube") == 0 && k->coll == CRNET_COLL_ALLGATHER)))
    tol = 0.25;
  peers_want = sweep_peers(name, &mc);
  if (rounds == mt.rounds && near(moved, mt.moved, tol) &&
      near(reduced, mt.reduced, tol) && a->peers == peers_want)
    return 0;
  printf("MISMATCH %s %s p=%d: builders rounds %.0f moved %.0f reduced %.0f "
         "peers %d; closed form %.0f %.6g %.6g %d\n",
         k->name, name, p, rounds, moved, reduced, a->peers, mt.rounds,
         mt.moved, mt.reduced, peers_want);
  return 1;
}

int crsched_verify_main(const options *o) {
  verify_acc a;
  long checked = 0, bad = 0, skipped = 0;
  int rc = 0;
  memset(&a, 0, sizeof a);
  a.mark = calloc((size_t)o->pmax + 1, sizeof *a.mark);
  if (a.mark == NULL)
    return 1;
  for (int32_t p = 2; p <= o->pmax && rc >= 0; p++) {
    blocks b, a2a;
    if (crsched_blocks_make(&b, p, 240 * (uint64_t)p, NULL) != 0)
      break;
    if (crsched_blocks_make(&a2a, p, 240 * (uint64_t)p, NULL) != 0) {
      crsched_blocks_free(&b);
      break;
    }
    for (size_t ci = 0; ci < NKNOWN_COLLS && rc >= 0; ci++) {
      const coll_kind *k = &crsched_known_colls[ci];
      if (!crsched_wanted(o, k))
        continue;
      for (size_t i = 0; crnet__auto_candidate(k->coll, i) != NULL; i++) {
        const char *name = crnet__auto_candidate(k->coll, i);
        if ((o->schedule != NULL && strcmp(o->schedule, name) != 0) ||
            (strcmp(name, "circulant-linear") == 0 && p > 64 &&
             (k->coll == CRNET_COLL_BCAST || k->coll == CRNET_COLL_REDUCE)))
          continue;
        /* Gather and scatter are priced by overlap and volume, not by
         * synchronous rounds (model.c, terms_rooted): nothing here to
         * count them against. test_sim_rooted checks their builders'
         * rounds and messages, test_tuning their prices. */
        if (k->coll == CRNET_COLL_GATHER || k->coll == CRNET_COLL_SCATTER)
          continue;
        rc = verify_one(o, k, name, p, &a, &b, &a2a);
        if (rc < 0)
          break;
        checked += rc != 2;
        bad += rc == 1;
        skipped += rc == 2;
        rc = 0;
      }
    }
    crsched_blocks_free(&a2a);
    crsched_blocks_free(&b);
  }
  free(a.moved);
  free(a.reduced);
  free(a.comm);
  free(a.mark);
  if (rc < 0)
    return 1;
  printf("%ld (collective, schedule, p) checked for p = 2..%d (%ld not "
         "checked: every rank built, p > %d and not 2^k or 2^k +- 1): %ld "
         "disagree\n",
         checked, o->pmax, skipped, VERIFY_ALL_RANKS_MAX_P, bad);
  return bad == 0 ? 0 : 1;
}
