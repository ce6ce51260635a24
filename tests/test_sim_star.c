/* The claims of the star family (src/schedules/star.c): for p = n! the
 * paper's Table 2 (n(n-1)/2 rounds, every rank communicating in every one;
 * simulated for n = 2..7, built for n = 8..10) and "every sub-star sum
 * arrives exactly once" twice over: for n = 2..6 an indicator vector counts
 * how often each rank's contribution reached each rank (exactly once), and
 * every rank receives and reduces exactly n(n-1)/2 whole vectors. Folded p:
 * the round formula of star.c and the reduce work of every rank; the
 * allgather: every block reaches every rank exactly once (received volume
 * m - counts[r]). And the allreduce's one expression tree, the same on
 * every rank: with an operator that is neither associative nor commutative
 * its result must be the exact tree star.c documents.
 *
 * p = 1..64, 100, 120, 127, 128, 720, 721, 1000 x counts 0, 1, p-1, p, p+1,
 * a large odd one (scaled down with p) and, for the allgather, irregular
 * blocks x in place or not. Each case runs through sim_harness.c, which
 * checks its result against the serial reference (the documented tree for
 * that operator); the sum and the affine maps are test_sim_registry.c's up
 * to p = 128, and the affine maps run here beyond it.
 *
 * CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety): the p of
 * sim_quick_ps, 23 and 119 (skipped_p says why), and table2 as in the
 * plain pass.
 */
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "sim_harness.h"
#include "star.h"

static long cases, cases_ar, cases_ag;

/* Neither associative nor commutative: only the same tree, with the same
 * operands on the same sides, gives the same bits. */
static uint64_t op_tree(uint64_t l, uint64_t r) {
  return mix(l ^ UINT64_C(0x243f6a8885a308d3)) + 3 * r;
}

static uint64_t value(int32_t rank, uint64_t e) {
  return sim_value(rank, e, false);
}

/* Rank e's contribution is 1 at element e: the sum counts its arrivals. */
static uint64_t indicator(int32_t rank, uint64_t e) {
  return e == (uint64_t)rank;
}

/* The structure star.c documents, derived here independently: S_n with
 * n! <= p < (n+1)!, groups of consecutive ranks, the first p mod n! of
 * them one rank larger. */
typedef struct shape {
  int n;
  int32_t pp, base, rem, G;
} shape;

static shape shape_of(int32_t p) {
  shape s = {1, 1, 0, 0, 0};
  while ((int64_t)s.pp * (s.n + 1) <= p) {
    s.n++;
    s.pp *= s.n;
  }
  s.base = p / s.pp;
  s.rem = p % s.pp;
  s.G = s.base + (s.rem > 0);
  return s;
}

static int32_t group_lo(const shape *s, int32_t v) {
  return (int32_t)((int64_t)v * s->base + (v < s->rem ? v : s->rem));
}

static uint64_t rounds_ar(int32_t p) {
  shape s = shape_of(p);
  uint64_t c = (uint64_t)(s.n * (s.n - 1) / 2);
  return s.G == 1
             ? c
             : c + (uint64_t)(s.G - 1) + 2 * (uint64_t)crnet__ceil_log2(s.G);
}

static uint64_t rounds_ag(int32_t p) {
  shape s = shape_of(p);
  return (uint64_t)(s.n * (s.n - 1) / 2) + 2 * (uint64_t)crnet__ceil_log2(s.G);
}

/* ------------------------------------------------------------------------
 * The documented tree (star.c, "Operators"): group g = ranks lo..lo+g-1,
 * element e in fold block j: (V_lo (+) (V_lo+1 (+) ... (+) V_lo+j)) (+)
 * (V_lo+j+1 (+) ( ... (+) V_lo+g-1)), both parts nested to the right; then
 * on each level m of the star the left fold over the m sub-stars of
 * (m-1)! labels each, in label order.
 */

typedef struct tree {
  const shape *s;
  uint64_t count, e;
  int32_t fact[13];
} tree;

static uint64_t group_value(const tree *t, int32_t v) {
  int32_t lo = group_lo(t->s, v), g = group_lo(t->s, v + 1) - lo, j = 0;
  uint64_t a, R;
  for (int32_t b = 0; b < g; b++) {
    uint64_t off, n;
    crnet__block_range(t->count, g, b, &off, &n);
    if (t->e >= off && t->e < off + n)
      j = b;
  }
  a = value(lo + j, t->e);
  for (int32_t i = j - 1; i >= 0; i--)
    a = op_tree(value(lo + i, t->e), a);
  if (j < g - 1) {
    R = value(lo + g - 1, t->e);
    for (int32_t i = g - 2; i > j; i--)
      R = op_tree(value(lo + i, t->e), R);
    a = op_tree(a, R);
  }
  return a;
}

static uint64_t star_tree(const tree *t, int32_t first, int m) {
  if (m == 1)
    return group_value(t, first);
  uint64_t acc = star_tree(t, first, m - 1);
  for (int i = 1; i < m; i++)
    acc = op_tree(acc, star_tree(t, first + i * t->fact[m - 1], m - 1));
  return acc;
}

/* The harness's reference for op_tree: element e of the documented tree. */
static uint64_t tree_reference(const sim_case *k, uint64_t e) {
  shape s = shape_of(k->p);
  tree t = {&s, k->count, e, {1}};
  for (int i = 1; i <= s.n; i++)
    t.fact[i] = t.fact[i - 1] * i;
  return star_tree(&t, 0, s.n);
}

/* ------------------------------------------------------------------------
 * One case
 */

/* Every message of the schedules non-empty: the fold blocks of the
 * allreduce (count >= G), or every block of the allgather. */
static bool full_case(const sim_case *k) {
  if (k->coll == CRNET_COLL_ALLREDUCE)
    return k->count >= (uint64_t)shape_of(k->p).G;
  for (int32_t b = 0; b < k->p; b++)
    if (k->counts[b] == 0)
      return false;
  return true;
}

/* Rounds, volumes and work against the formulas of star.c. */
static void claims(const sim_case *k, const sim_result *res, void *arg) {
  int32_t p = k->p;
  bool ar = k->coll == CRNET_COLL_ALLREDUCE, full = full_case(k);
  shape s = shape_of(p);
  uint64_t C = (uint64_t)(s.n * (s.n - 1) / 2), m = res->m;
  uint64_t want = ar ? rounds_ar(p) : rounds_ag(p), max_rounds = 0,
           max_comm = 0;
  const uint64_t *P = res->P;
  (void)arg;
  if (p == 1)
    return;
  EXPECT(!ar || (uint64_t)crnet__star_rounds(p) == want,
         "%s: crnet__star_rounds %d, formula %llu", k->what,
         crnet__star_rounds(p), (unsigned long long)want);
  for (int32_t r = 0, v = 0; r < p; r++) {
    const crnet__sim_stats *st = &res->rk[r].stats;
    const crnet__schedule *h = &res->sc[r];
    uint64_t off, len, red, tmax, tf;
    int32_t lo, g;
    max_rounds = h->nrounds > max_rounds ? h->nrounds : max_rounds;
    max_comm = st->comm_rounds > max_comm ? st->comm_rounds : max_comm;
    while (group_lo(&s, v + 1) <= r)
      v++;
    lo = group_lo(&s, v);
    g = group_lo(&s, v + 1) - lo;
    if (!ar) {
      /* NODUP: every other block arrives exactly once, nothing else */
      EXPECT(st->elems_recv == m - (P[r + 1] - P[r]) && h->temp_count == 0,
             "%s: rank %d received %llu of %llu, temp %llu", k->what, r,
             (unsigned long long)st->elems_recv,
             (unsigned long long)(m - (P[r + 1] - P[r])),
             (unsigned long long)h->temp_count);
      continue;
    }
    /* fold: member j reduces its block g-1 times; a survivor then reduces
     * C whole vectors, one per sub-star sum it needs */
    crnet__block_range(m, g, r - lo, &off, &len);
    red = (uint64_t)(g - 1) * len + (r == lo ? C * m : 0);
    EXPECT(st->elems_reduced == red, "%s: rank %d reduced %llu, want %llu",
           k->what, r, (unsigned long long)st->elems_reduced,
           (unsigned long long)red);
    tmax = (uint64_t)(s.n - 1) * m;
    tf = 2 * ((m + g - 1) / g);
    EXPECT(h->temp_count <= (tf > tmax ? tf : tmax), "%s: rank %d temp %llu",
           k->what, r, (unsigned long long)h->temp_count);
    EXPECT(s.G != 1 || (st->elems_sent == C * m && st->elems_recv == C * m &&
                        (!full || st->comm_rounds == C)),
           "%s: rank %d sent %llu received %llu in %llu rounds", k->what, r,
           (unsigned long long)st->elems_sent,
           (unsigned long long)st->elems_recv,
           (unsigned long long)st->comm_rounds);
  }
  EXPECT(max_rounds == want, "%s: %llu rounds, formula %llu", k->what,
         (unsigned long long)max_rounds, (unsigned long long)want);
  EXPECT(!full || max_comm == want, "%s: %llu comm rounds, formula %llu",
         k->what, (unsigned long long)max_comm, (unsigned long long)want);
}

enum opk { TREE, AFFINE, INDICATOR };

/* The allreduce of count elements with operator `op`, or the allgather of
 * blocks `counts`. */
static void run(int32_t p, const uint64_t *counts, uint64_t count, bool ip,
                enum opk op) {
  sim_case k = {.row = "star",
                .coll = counts ? CRNET_COLL_ALLGATHER : CRNET_COLL_ALLREDUCE,
                .p = p,
                .count = count,
                .counts = counts,
                .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE,
                .affine = op == AFFINE};
  if (counts == NULL && op == TREE) {
    k.op = op_tree;
    k.reference = tree_reference;
  }
  if (op == INDICATOR)
    k.value = indicator;
  /* With every message non-empty, everyone must hear from everyone. */
  k.causal = full_case(&k);
  sim_describe(&k, op == INDICATOR ? "indicator" : NULL);
  sim_run(&k, claims, NULL);
  cases++;
  cases_ar += counts == NULL;
  cases_ag += counts != NULL;
}

/* ------------------------------------------------------------------------
 * The matrix
 */

static const int32_t big_ps[] = {100, 120, 127, 128, 720, 721, 1000};
#define NPS (64 + 7)
static int32_t ps_at(int i) { return i < 64 ? i + 1 : big_ps[i - 64]; }

/* CRNET_SIM_QUICK=1 (the sanitizer pass): sim_quick_ps (n = 1..4, one
 * group or several, even and uneven), and the largest groups of n = 3 and
 * 4, G = 4 at p = 23 and G = 5 at p = 119, where the groups' log2 G
 * rounds grow; table2 simulates S_2..S_7 as in the plain pass. */
static bool quick;
static bool skipped_p(int32_t p) {
  return quick && !sim_quick_p(p) && p != 23 && p != 119;
}

START_TEST(allreduce) {
  for (int i = 0; i < NPS; i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6];
    int nt = sim_counts_for(p, 12000, 3, tot);
    for (int ip = 0; ip < 2 && !skipped_p(p); ip++)
      for (int t = 0; t < nt; t++) {
        run(p, NULL, tot[t], ip, TREE);
        if (p > 128)
          run(p, NULL, tot[t], ip, AFFINE);
      }
  }
}
END_TEST

START_TEST(allgather) {
  for (int i = 0; i < NPS; i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6], *c = malloc((size_t)p * sizeof(*c));
    EXPECT(c, "out of memory");
    int nt = sim_counts_for(p, 12000, 3, tot);
    for (int ip = 0; ip < 2 && !skipped_p(p); ip++)
      for (int t = 0; t < nt + 4; t++) {
        uint64_t m = 0;
        if (t < nt)
          sim_split(tot[t], p, c);
        else
          sim_irregular(p, t - nt, 12000, p / 2, c);
        for (int32_t b = 0; b < p; b++)
          m += c[b];
        run(p, c, m, ip, TREE);
      }
    free(c);
  }
}
END_TEST

/* The paper's Table 2 and Theorem 2 for p = n!: n(n-1)/2 rounds, each
 * rank in every one (the claims, n = 2..7; n = 8..10 by building a few
 * ranks), and for n = 2..6 every contribution counted exactly once at every
 * rank (the indicator vector: element e of rank r is 1 if e = r, so the
 * sum at element e counts the arrivals of rank e's contribution). */
START_TEST(table2) {
  static const int rounds[] = {0, 0, 1, 3, 6, 10, 15, 21, 28, 36, 45};
  int32_t f = 1;
  for (int n = 2; n <= 10; n++) {
    f *= n;
    EXPECT(crnet__star_n(f) == n && crnet__star_n(f - 1) == n - 1,
           "star_n around %d!", n);
    EXPECT(crnet__star_rounds(f) == rounds[n], "S%d: %d rounds, Table 2 %d", n,
           crnet__star_rounds(f), rounds[n]);
    if (n <= 7) {
      /* the indicator needs count = p: S_7 would simulate 5040 ranks of
       * 5040 elements and 6·5040 of TEMP, so S_7 gets the affine maps */
      run(f, NULL, 3, false, AFFINE);
      for (int ip = 0; ip < 2 && n <= 6; ip++)
        run(f, NULL, (uint64_t)f, ip, INDICATOR);
      continue;
    }
    /* too many ranks to simulate: build a few and check their shape */
    int32_t rs[] = {0, 1, f / 2, f - 1};
    for (size_t i = 0; i < 4; i++) {
      crnet__schedule s;
      EXPECT(crnet__star_allreduce(&s, f, rs[i], 5, true) == 0, "S%d build", n);
      EXPECT(s.nrounds == (uint32_t)rounds[n] &&
                 s.nsteps == (uint32_t)(rounds[n]),
             "S%d rank %d: %u rounds, %u steps", n, rs[i], s.nrounds, s.nsteps);
      for (uint32_t x = 0; x < s.nrounds; x++)
        EXPECT(crnet__xfer_count(&s, &s.rounds[x].send) == 5 &&
                   crnet__xfer_count(&s, &s.rounds[x].recv) == 5 &&
                   s.rounds[x].send.peer == s.rounds[x].recv.peer,
               "S%d rank %d round %u", n, rs[i], x);
      crnet__sched_free(&s);
    }
  }
}
END_TEST

START_TEST(misuse) {
  crnet__schedule s;
  uint64_t c[2] = {1, 1}, big[2] = {UINT64_MAX, 2};
  EXPECT(crnet__star_allreduce(&s, 0, 0, 4, false) == CRNET_EINVAL, "p=0");
  EXPECT(crnet__star_allreduce(&s, 4, 4, 4, false) == CRNET_EINVAL, "rank");
  EXPECT(crnet__star_allreduce(&s, 4, -1, 4, false) == CRNET_EINVAL, "rank");
  EXPECT(crnet__star_allreduce(NULL, 4, 0, 4, false) == CRNET_EINVAL, "out");
  EXPECT(crnet__star_allreduce(&s, 4, 0, UINT64_MAX / 2, false) == CRNET_EINVAL,
         "count");
  EXPECT(crnet__star_allgather(&s, 2, 0, NULL, false) == CRNET_EINVAL,
         "counts");
  EXPECT(crnet__star_allgather(&s, 2, 2, c, false) == CRNET_EINVAL, "rank");
  EXPECT(crnet__star_allgather(&s, 2, 0, big, false) == CRNET_EINVAL,
         "overflow");
  EXPECT(crnet__star_n(0) == CRNET_EINVAL &&
             crnet__star_rounds(-1) == CRNET_EINVAL,
         "p < 1");
  EXPECT(crnet__star_n(1) == 1 && crnet__star_rounds(1) == 0, "p = 1");
  EXPECT(crnet__star_n(INT32_MAX) == 12, "n of INT32_MAX");
  /* folded round counts: p = 7 (G = 2), 11 (G = 2), 23 (G = 4), 719
   * (G = 6) */
  EXPECT(crnet__star_rounds(7) == 3 + 1 + 2 && crnet__star_rounds(11) == 6 &&
             crnet__star_rounds(23) == 3 + 3 + 4 &&
             crnet__star_rounds(719) == 10 + 5 + 6,
         "folded rounds");
}
END_TEST

int main(void) {
  TCase *tc;
  Suite *s = sim_suite("sim-star", "sim-star", &tc);
  int rc;
  quick = sim_quick();
  tcase_add_test(tc, misuse);
  tcase_add_test(tc, table2);
  tcase_add_test(tc, allreduce);
  tcase_add_test(tc, allgather);
  rc = sim_check_run(s);
  printf("%ld simulated collectives (%ld allreduce, %ld allgather)\n", cases,
         cases_ar, cases_ag);
  return rc;
}
