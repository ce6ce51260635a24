/* The claims of the hypercube family (src/schedules/hypercube.c): recursive
 * doubling allreduce and allgather, Rabenseifner reduce-scatter, allreduce
 * and reduce, scan and exscan (Alg. 4.9), beside circulant.c's
 * dissemination scans and ring.c's chain scans: rounds against the
 * formulas of hypercube.c, volumes, and what the balanced fold is for (its
 * dropped rank's work, the most reduce work on any rank against the naive
 * fold's). p = 1..64, 100, 127, 128, 129, 255, 256, 720, 1000 x counts 0,
 * 1, p-1, p, p+1, a large odd one and irregular blocks x in place or not,
 * with the affine maps (every builder here keeps rank order). Each case
 * runs through sim_harness.c, which also checks its result against the
 * serial reference; the sum and the other shapes and roots are
 * test_sim_registry.c's.
 *
 * At p = 720 and 1000 two shapes per collective (and every root of the
 * reduce): the large odd count, whose pieces are all non-empty so that the
 * longest schedule must communicate in every round, not in place, and p+1
 * elements or irregular blocks in place; the rounds formula and the fold's
 * claims are asserted on both, the other shapes are the same code at every
 * p to 256.
 *
 * The naive fold, which no row exposes, runs here through the builders'
 * fold parameter, at p <= 33. CRNET_SIM_QUICK=1 (the sanitizer pass, for
 * memory safety) runs the p of sim_quick_ps (sim_harness.h: powers of two,
 * 2^d + 1 and 2^d - 1, even and odd folds) with every shape, and
 * fold_balance's p as in the plain pass.
 */
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "hypercube.h"
#include "sim_harness.h"

static long cases;

enum coll {
  HC_AR,
  HC_AG,
  RAB_RS,
  RAB_AR,
  RAB_RED,
  SCAN,
  EXSCAN,
  CSCAN,
  CEXSCAN,
  RSCAN,
  REXSCAN
};
static const struct {
  const char *row;
  crnet_collective coll;
} of[] = {{"hypercube", CRNET_COLL_ALLREDUCE},
          {"hypercube", CRNET_COLL_ALLGATHER},
          {"rabenseifner", CRNET_COLL_REDUCE_SCATTER},
          {"rabenseifner", CRNET_COLL_ALLREDUCE},
          {"rabenseifner", CRNET_COLL_REDUCE},
          {"hypercube", CRNET_COLL_SCAN},
          {"hypercube", CRNET_COLL_SCAN},
          {"circulant", CRNET_COLL_SCAN},
          {"circulant", CRNET_COLL_SCAN},
          {"ring", CRNET_COLL_SCAN},
          {"ring", CRNET_COLL_SCAN}};

static bool is_exscan(enum coll c) {
  return c == EXSCAN || c == CEXSCAN || c == REXSCAN;
}

/* What a case is and what it found: the most reduce work on a rank. */
typedef struct kase {
  enum coll coll;
  int fold;
  uint64_t max_reduced;
} kase;

/* The naive fold's builders (the rows build the balanced one). */
static int naive_build(const crnet__call *c, crnet__schedule *out,
                       const void *arg) {
  enum coll coll = ((const kase *)arg)->coll;
  int f = CRNET__HYPERCUBE_FOLD_NAIVE;
  switch (coll) {
  case HC_AR:
    return crnet__hypercube_allreduce_fold(out, c->p, c->rank, c->count,
                                           c->in_place, f);
  case RAB_RS:
    return crnet__rabenseifner_reduce_scatter_fold(out, c->p, c->rank,
                                                   c->counts, c->in_place, f);
  case RAB_AR:
    return crnet__rabenseifner_allreduce_fold(out, c->p, c->rank, c->count,
                                              c->in_place, f);
  default:
    return crnet__rabenseifner_reduce_fold(out, c->p, c->rank, c->count,
                                           c->root, c->in_place, f);
  }
}

/* The round formulas of hypercube.c. */
static uint64_t rounds_formula(const kase *q, int32_t p, uint64_t count) {
  int d = crnet__floor_log2(p);
  bool f = p != (INT32_C(1) << d);
  int fr = !f ? 0 : q->fold == CRNET__HYPERCUBE_FOLD_BALANCED ? 2 : 1;
  switch (q->coll) {
  case HC_AR:
  case RAB_RS:
    return (uint64_t)(d + fr + f);
  case HC_AG:
    return (uint64_t)(d + 2 * f);
  case RAB_AR:
    return (uint64_t)(2 * d + fr + f);
  case RAB_RED:
    return (uint64_t)(2 * d + fr);
  case RSCAN:
  case REXSCAN: /* the chain: nb + p - 2 rounds, nb = min(m, p) blocks */
    return count == 0
               ? 0
               : (count < (uint64_t)p ? count : (uint64_t)p) + (uint64_t)p - 2;
  default:
    return (uint64_t)crnet__ceil_log2(p);
  }
}

static void claims(const sim_case *k, const sim_result *res, void *arg) {
  kase *q = arg;
  int32_t p = k->p;
  uint64_t m = res->m, max_rounds = 0, max_comm = 0, want, comm;
  const crnet__sim_rank *rk = res->rk;
  bool pow2 = (p & (p - 1)) == 0, full;
  q->max_reduced = 0;
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    if (s->elems_reduced > q->max_reduced)
      q->max_reduced = s->elems_reduced;
    if (res->sc[r].nrounds > max_rounds)
      max_rounds = res->sc[r].nrounds;
    if (s->comm_rounds > max_comm)
      max_comm = s->comm_rounds;
  }
  if (p == 1)
    return;
  /* rounds: every schedule at most the formula, the longest exactly it;
   * with every piece non-empty (m >= 2p for regular blocks) the longest
   * also communicates in every round */
  want = rounds_formula(q, p, k->count);
  EXPECT(max_rounds == want, "%s: %llu rounds, formula %llu", k->what,
         (unsigned long long)max_rounds, (unsigned long long)want);
  full = !k->counts ? m >= 2 * (uint64_t)p : true;
  for (int32_t b = 0; b < p && k->counts; b++)
    full = full && k->counts[b] > 0;
  comm = max_comm;
  /* reduce: the root communicates in every round of the halving and the
   * gather, and in the fold rounds when it is in a pair */
  if (q->coll == RAB_RED) {
    comm = rk[k->root].stats.comm_rounds;
    if (k->root >= 2 * (p - (INT32_C(1) << crnet__floor_log2(p))))
      want = 2 * (uint64_t)crnet__floor_log2(p);
  }
  /* the chain: a middle rank receives nb blocks and sends them one round
   * later */
  if ((q->coll == RSCAN || q->coll == REXSCAN) && p > 2)
    want = (k->count < (uint64_t)p ? k->count : (uint64_t)p) + 1;
  EXPECT(!full || comm == want, "%s: %llu comm rounds, formula %llu", k->what,
         (unsigned long long)comm, (unsigned long long)want);
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    uint64_t blk = (uint64_t)(p - 1) * (m / (uint64_t)p), nr = 0, ns = 0;
    /* Rabenseifner allreduce, p a power of two, equal blocks: 2(p-1)/p·m
     * sent and received, (p-1)/p·m reduced, on every rank */
    if (q->coll == RAB_AR && pow2 && m % (uint64_t)p == 0)
      EXPECT(s->elems_sent == 2 * blk && s->elems_recv == 2 * blk &&
                 s->elems_reduced == blk,
             "%s: rank %d sent %llu recv %llu reduced %llu", k->what, r,
             (unsigned long long)s->elems_sent,
             (unsigned long long)s->elems_recv,
             (unsigned long long)s->elems_reduced);
    /* dissemination: rank r receives the whole vector in every round k
     * with 2^k <= r, and sends it in every round with r + 2^k < p */
    for (int64_t d = 1; d < p; d *= 2) {
      nr += d <= r;
      ns += r + d < p;
    }
    if (q->coll == CSCAN || q->coll == CEXSCAN)
      EXPECT(s->elems_recv == nr * m && s->elems_sent == ns * m,
             "%s: rank %d sent %llu received %llu", k->what, r,
             (unsigned long long)s->elems_sent,
             (unsigned long long)s->elems_recv);
    /* reduce-scatter, p a power of two: each rank sends every block but
     * its own once and reduces exactly what it receives */
    if (q->coll == RAB_RS && pow2)
      EXPECT(s->elems_reduced == s->elems_recv &&
                 s->elems_sent == m - k->counts[r],
             "%s: rank %d volume", k->what, r);
  }
  /* the fold: the dropped rank 1 reduces its half, m - floor(m/2)
   * elements, with the balanced fold, and nothing with the naive one */
  if (!pow2 && (q->coll == HC_AR || q->coll == RAB_AR || q->coll == RAB_RS))
    EXPECT(rk[1].stats.elems_reduced ==
               (q->fold == CRNET__HYPERCUBE_FOLD_BALANCED ? m - m / 2 : 0),
           "%s: dropped rank 1 reduced %llu", k->what,
           (unsigned long long)rk[1].stats.elems_reduced);
}

static void run(kase *q, int32_t p, const uint64_t *counts, uint64_t count,
                bool ip, int32_t root) {
  bool naive = q->fold == CRNET__HYPERCUBE_FOLD_NAIVE;
  sim_case k = {.row = of[q->coll].row,
                .build = naive ? naive_build : NULL,
                .build_arg = q,
                .coll = of[q->coll].coll,
                .p = p,
                .count = count,
                .counts = counts,
                .root = root,
                .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE,
                .exclusive = is_exscan(q->coll),
                .affine = q->coll != HC_AG};
  sim_describe(&k, naive ? "naive fold" : NULL);
  sim_run(&k, claims, q);
  cases++;
}

static const int32_t big_ps[] = {100, 127, 128, 129, 255, 256, 720, 1000};
#define NPS (64 + 8)
static int32_t ps_at(int i) { return i < 64 ? i + 1 : big_ps[i - 64]; }

/* CRNET_SIM_QUICK=1 (the sanitizer pass) runs sim_quick_ps only: the
 * same builders, every branch they take on p (the fold above all), at
 * sizes a sanitizer's slowdown does not make minutes of. */
static bool quick;

static void matrix(enum coll coll, int fold, int32_t max_p) {
  kase q = {coll, fold, 0};
  bool blocks = coll == HC_AG || coll == RAB_RS;
  for (int i = 0; i < NPS; i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6], *c = malloc((size_t)p * sizeof(*c));
    int nt = sim_counts_for(p, 12000, 2 * (uint64_t)p + 2, tot);
    /* roots: 0, 1 (an odd rank folded away unless it swaps), the middle
     * and the last */
    int32_t roots[4] = {0, p > 1 ? 1 : 0, p / 2, p - 1};
    EXPECT(c, "out of memory");
    for (int ip = 0; ip < 2 && p <= max_p && !(quick && !sim_quick_p(p)); ip++)
      for (int t = 0; t < nt + (blocks ? 4 : 0); t++) {
        uint64_t count = t < nt ? tot[t] : 0;
        /* p = 720 and 1000: the large odd count (every piece non-empty:
         * the rounds communicate) not in place, and in place p+1 elements
         * (the block collectives: random irregular blocks), at every root;
         * the other shapes are the same code at every p to 256 */
        if (p > 256 && !(ip == 0 && t == 5) &&
            !(ip == 1 && t == (blocks ? nt : 4)))
          continue;
        if (t >= nt)
          sim_irregular(p, t - nt, 12000, p > 1 ? 1 : 0, c);
        else if (blocks)
          sim_split(tot[t], p, c);
        for (int32_t b = 0; b < p && t >= nt; b++)
          count += c[b];
        for (int ri = 0; ri < (coll == RAB_RED ? 4 : 1); ri++)
          run(&q, p, blocks ? c : NULL, count, ip, roots[ri]);
      }
    free(c);
  }
}

START_TEST(test_balanced) {
  matrix((enum coll)_i, CRNET__HYPERCUBE_FOLD_BALANCED, INT32_MAX);
}
END_TEST

/* The naive fold must be correct too (it is the yardstick). */
START_TEST(naive_fold) {
  static const enum coll cs[] = {HC_AR, RAB_RS, RAB_AR, RAB_RED};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
    matrix(cs[c], CRNET__HYPERCUBE_FOLD_NAIVE, 33);
}
END_TEST

/* The reason for the balanced fold: the most reduce work on any rank,
 * balanced vs naive, printed, and strictly smaller whenever p is not a
 * power of two. */
START_TEST(fold_balance) {
  static const int32_t ps[] = {3, 5, 6, 7, 12, 24, 100, 129};
  static const enum coll cs[] = {HC_AR, RAB_AR, RAB_RS, RAB_RED};
  for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++)
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
      int32_t p = ps[i];
      uint64_t m = (uint64_t)p * 64 + 1;
      uint64_t *blk = malloc((size_t)p * sizeof(*blk));
      kase kb = {cs[c], CRNET__HYPERCUBE_FOLD_BALANCED, 0},
           kn = {cs[c], CRNET__HYPERCUBE_FOLD_NAIVE, 0};
      EXPECT(blk, "out of memory");
      sim_split(m, p, blk);
      run(&kb, p, cs[c] == RAB_RS ? blk : NULL, m, false, 0);
      run(&kn, p, cs[c] == RAB_RS ? blk : NULL, m, false, 0);
      printf("fold %-14s %-14s p=%-4d m=%-6llu max reduced per rank: "
             "balanced %llu (%.2f m), naive %llu (%.2f m)\n",
             of[cs[c]].row, crnet_collective_name(of[cs[c]].coll), p,
             (unsigned long long)m, (unsigned long long)kb.max_reduced,
             (double)kb.max_reduced / (double)m,
             (unsigned long long)kn.max_reduced,
             (double)kn.max_reduced / (double)m);
      EXPECT(kb.max_reduced < kn.max_reduced,
             "%s p=%d: balanced %llu not below naive %llu",
             crnet_collective_name(of[cs[c]].coll), p,
             (unsigned long long)kb.max_reduced,
             (unsigned long long)kn.max_reduced);
      free(blk);
    }
}
END_TEST

START_TEST(misuse) {
  crnet__schedule s;
  uint64_t c[2] = {1, 1};
  EXPECT(crnet__hypercube_allreduce(&s, 0, 0, 4, false) == CRNET_EINVAL, "p=0");
  EXPECT(crnet__hypercube_allreduce(&s, 4, 4, 4, false) == CRNET_EINVAL,
         "rank");
  EXPECT(crnet__rabenseifner_allreduce(&s, 4, -1, 4, false) == CRNET_EINVAL,
         "rank");
  EXPECT(crnet__rabenseifner_reduce(&s, 4, 0, 4, 4, false) == CRNET_EINVAL,
         "root");
  EXPECT(crnet__rabenseifner_reduce_scatter(&s, 2, 0, NULL, false) ==
             CRNET_EINVAL,
         "counts");
  EXPECT(crnet__hypercube_allgather(&s, 2, 2, c, false) == CRNET_EINVAL,
         "rank");
  EXPECT(crnet__hypercube_allreduce_fold(&s, 3, 0, 4, false, 7) == CRNET_EINVAL,
         "fold");
  EXPECT(crnet__hypercube_scan(&s, 3, 3, 4, false) == CRNET_EINVAL, "rank");
  EXPECT(crnet__hypercube_exscan(&s, -1, 0, 4, false) == CRNET_EINVAL, "p");
  uint64_t big[2] = {UINT64_MAX, 2};
  EXPECT(crnet__hypercube_allgather(&s, 2, 0, big, false) == CRNET_EINVAL,
         "overflow");
}
END_TEST

int main(void) {
  TCase *tc;
  Suite *s = sim_suite("sim-hypercube", "sim-hypercube", &tc);
  int rc;
  quick = sim_quick();
  tcase_add_test(tc, misuse);
  tcase_add_loop_test(tc, test_balanced, HC_AR, REXSCAN + 1);
  tcase_add_test(tc, naive_fold);
  tcase_add_test(tc, fold_balance);
  rc = sim_check_run(s);
  printf("%ld simulated collectives\n", cases);
  return rc;
}
