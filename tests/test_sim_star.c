/* Simulator tests for the star family (src/schedules/star.c): allreduce
 * and allgather x p = 1..64, 100, 120, 127, 128, 720, 721, 1000 x counts
 * 0, 1, p-1, p, p+1, a large odd one (scaled down with p) and, for the
 * allgather, irregular block shapes x in place or not, run in the in-memory
 * simulator and compared exactly with a serial reference.
 *
 * The allreduce claims rank order and one expression tree on every rank,
 * so it runs with three operators: sum mod 2^64 over random 64-bit values
 * (a contribution counted twice or missed changes the sum), the affine maps
 * (associative, not commutative: checks rank order against the serial
 * rank-order fold), and an operator that is neither associative nor
 * commutative, checked against the exact tree star.c documents and for
 * bitwise equality on all ranks. For p = n! the paper's Table 2 is asserted
 * (n(n-1)/2 rounds, every rank communicating in every one; simulated for
 * n = 2..7, built for n = 8..10), and "every sub-star sum arrives exactly
 * once" twice over: for n = 2..6 an indicator vector counts how often each
 * rank's contribution reached each rank (exactly once), and every rank
 * receives and reduces exactly n(n-1)/2 whole vectors, one per sub-star sum
 * it needs, with the random sums exact. Folded p: the round formula of
 * star.c, the reduce work of every rank; the allgather: every block reaches
 * every rank exactly once (received volume m - counts[r]).
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "schedule.h"
#include "sim.h"
#include "sim_ops.h"
#include "star.h"

static long cases, cases_ar, cases_ag;

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* Neither associative nor commutative: only the same tree, with the same
 * operands on the same sides, gives the same bits. */
static uint64_t op_tree(uint64_t l, uint64_t r) {
  return mix(l ^ UINT64_C(0x243f6a8885a308d3)) + 3 * r;
}

enum opk { SUM, AFFINE, TREE, INDICATOR };
static const char *op_name[] = {"sum", "affine", "tree", "indicator"};

static uint64_t value(int32_t rank, uint64_t e, enum opk k) {
  uint64_t h = mix((uint64_t)rank << 40 ^ e ^ UINT64_C(0x5eed));
  switch (k) {
  case AFFINE:
    return (1 + (h & 0xffffffffu) % (PRIME - 1)) << 32 | (h >> 32) % PRIME;
  case INDICATOR:
    return e == (uint64_t)rank;
  default:
    return h;
  }
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
  uint64_t (*op)(uint64_t, uint64_t);
  int32_t fact[13];
} tree;

static uint64_t group_value(const tree *t, int32_t v) {
  int32_t lo = group_lo(t->s, v), g = group_lo(t->s, v + 1) - lo, j = 0;
  for (int32_t b = 0; b < g; b++) {
    uint64_t off, n;
    crnet__block_range(t->count, g, b, &off, &n);
    if (t->e >= off && t->e < off + n)
      j = b;
  }
  uint64_t a = value(lo + j, t->e, TREE);
  for (int32_t i = j - 1; i >= 0; i--)
    a = t->op(value(lo + i, t->e, TREE), a);
  if (j < g - 1) {
    uint64_t R = value(lo + g - 1, t->e, TREE);
    for (int32_t i = g - 2; i > j; i--)
      R = t->op(value(lo + i, t->e, TREE), R);
    a = t->op(a, R);
  }
  return a;
}

static uint64_t star_tree(const tree *t, int32_t first, int m) {
  if (m == 1)
    return group_value(t, first);
  uint64_t acc = star_tree(t, first, m - 1);
  for (int i = 1; i < m; i++)
    acc = t->op(acc, star_tree(t, first + i * t->fact[m - 1], m - 1));
  return acc;
}

/* ------------------------------------------------------------------------
 * One case
 */

enum coll { AR, AG };

typedef struct kase {
  enum coll coll;
  int32_t p;
  const uint64_t *counts; /* AG; NULL means blocks of `count` */
  uint64_t count;
  bool in_place;
  enum opk op;
} kase;

static void describe(const kase *k, char *buf, size_t n) {
  snprintf(buf, n, "%s p=%d count=%llu%s in_place=%d op=%s",
           k->coll == AR ? "star-allreduce" : "star-allgather", k->p,
           (unsigned long long)k->count, k->counts ? " (blocks)" : "",
           k->in_place, op_name[k->op]);
}

/* Every message of the schedules non-empty: the fold blocks of the
 * allreduce (count >= G), or every block of the allgather. */
static bool full_case(const kase *k, const uint64_t *P, uint64_t m) {
  if (k->coll == AR)
    return m >= (uint64_t)shape_of(k->p).G;
  for (int32_t b = 0; b < k->p; b++)
    if (P[b + 1] == P[b])
      return false;
  return true;
}

static uint64_t (*op_fn(enum opk k))(uint64_t, uint64_t) {
  return k == AFFINE ? op_affine : k == TREE ? op_tree : op_sum;
}

/* Fills rk[r] with buffers for rank r. */
static void setup_rank(const kase *k, crnet__sim_rank *q, int32_t r,
                       const uint64_t *P, uint64_t m) {
  bool ag = k->coll == AG;
  uint64_t sn = ag ? P[r + 1] - P[r] : m, rn = m;
  uint64_t *snd = malloc((sn ? sn : 1) * sizeof(uint64_t));
  uint64_t *rcv = malloc((rn ? rn : 1) * sizeof(uint64_t));
  EXPECT(snd && rcv, "out of memory");
  for (uint64_t e = 0; e < rn; e++)
    rcv[e] = SENTINEL;
  for (uint64_t e = 0; e < sn; e++)
    snd[e] = value(r, (ag ? P[r] : 0) + e, ag ? SUM : k->op);
  q->init_off = q->init_count = 0;
  if (k->in_place) {
    memcpy(rcv + (ag ? P[r] : 0), snd, sn * sizeof(uint64_t));
    q->init_off = ag ? P[r] : 0;
    q->init_count = sn;
  }
  q->send = snd;
  q->send_count = sn;
  q->recv = rcv;
  q->recv_count = rn;
}

/* The reference result of the allreduce, element by element. */
static void reference(const kase *k, uint64_t m, uint64_t *want) {
  shape s = shape_of(k->p);
  uint64_t (*op)(uint64_t, uint64_t) = op_fn(k->op);
  for (uint64_t e = 0; e < m; e++) {
    if (k->op == TREE) {
      tree t = {&s, m, e, op, {1}};
      for (int i = 1; i <= s.n; i++)
        t.fact[i] = t.fact[i - 1] * i;
      want[e] = star_tree(&t, 0, s.n);
      continue;
    }
    if (k->op == INDICATOR) {
      want[e] = 1; /* rank e's contribution, exactly once */
      continue;
    }
    uint64_t v = value(0, e, k->op);
    for (int32_t x = 1; x < k->p; x++)
      v = op(v, value(x, e, k->op));
    want[e] = v;
  }
}

static void check_results(const kase *k, const char *what,
                          const crnet__sim_rank *rk, const uint64_t *P,
                          uint64_t m) {
  if (k->coll == AG) {
    for (int32_t r = 0; r < k->p; r++)
      for (int32_t b = 0; b < k->p; b++)
        for (uint64_t e = P[b]; e < P[b + 1]; e++)
          EXPECT(rk[r].recv[e] == value(b, e, SUM),
                 "%s: rank %d block %d element %llu", what, r, b,
                 (unsigned long long)(e - P[b]));
    return;
  }
  uint64_t *want = malloc((m ? m : 1) * sizeof(uint64_t));
  EXPECT(want, "out of memory");
  reference(k, m, want);
  for (int32_t r = 0; r < k->p; r++) {
    for (uint64_t e = 0; e < m; e++)
      EXPECT(rk[r].recv[e] == want[e],
             "%s: rank %d element %llu: %llu, want %llu", what, r,
             (unsigned long long)e, (unsigned long long)rk[r].recv[e],
             (unsigned long long)want[e]);
    /* bitwise identical everywhere (also implied by the reference) */
    EXPECT(memcmp(rk[r].recv, rk[0].recv, m * sizeof(uint64_t)) == 0,
           "%s: rank %d differs from rank 0", what, r);
  }
  free(want);
}

/* Rounds, volumes and work against the formulas of star.c. */
static void check_costs(const kase *k, const char *what,
                        const crnet__schedule *sc, const crnet__sim_rank *rk,
                        const uint64_t *P, uint64_t m) {
  int32_t p = k->p;
  if (p == 1)
    return;
  shape s = shape_of(p);
  uint64_t C = (uint64_t)(s.n * (s.n - 1) / 2);
  uint64_t want = k->coll == AR ? rounds_ar(p) : rounds_ag(p);
  EXPECT(k->coll == AG || (uint64_t)crnet__star_rounds(p) == want,
         "%s: crnet__star_rounds %d, formula %llu", what, crnet__star_rounds(p),
         (unsigned long long)want);
  bool full = full_case(k, P, m);
  uint64_t max_rounds = 0, max_comm = 0;
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *st = &rk[r].stats;
    if (sc[r].nrounds > max_rounds)
      max_rounds = sc[r].nrounds;
    if (st->comm_rounds > max_comm)
      max_comm = st->comm_rounds;
    int32_t v = 0;
    while (group_lo(&s, v + 1) <= r)
      v++;
    int32_t lo = group_lo(&s, v), g = group_lo(&s, v + 1) - lo, j = r - lo;
    if (k->coll == AG) {
      /* NODUP: every other block arrives exactly once, nothing else */
      EXPECT(st->elems_recv == m - (P[r + 1] - P[r]) && sc[r].temp_count == 0,
             "%s: rank %d received %llu of %llu, temp %llu", what, r,
             (unsigned long long)st->elems_recv,
             (unsigned long long)(m - (P[r + 1] - P[r])),
             (unsigned long long)sc[r].temp_count);
      continue;
    }
    /* fold: member j reduces its block g-1 times; a survivor then
     * reduces C whole vectors, one per sub-star sum it needs */
    uint64_t off, len;
    crnet__block_range(m, g, j, &off, &len);
    uint64_t red = (uint64_t)(g - 1) * len + (j == 0 ? C * m : 0);
    EXPECT(st->elems_reduced == red, "%s: rank %d reduced %llu, want %llu",
           what, r, (unsigned long long)st->elems_reduced,
           (unsigned long long)red);
    uint64_t tmax = (uint64_t)(s.n - 1) * m, tf = 2 * ((m + g - 1) / g);
    EXPECT(sc[r].temp_count <= (tf > tmax ? tf : tmax), "%s: rank %d temp %llu",
           what, r, (unsigned long long)sc[r].temp_count);
    if (s.G == 1)
      EXPECT(st->elems_sent == C * m && st->elems_recv == C * m &&
                 (!full || st->comm_rounds == C),
             "%s: rank %d sent %llu received %llu in %llu rounds", what, r,
             (unsigned long long)st->elems_sent,
             (unsigned long long)st->elems_recv,
             (unsigned long long)st->comm_rounds);
  }
  EXPECT(max_rounds == want, "%s: %llu rounds, formula %llu", what,
         (unsigned long long)max_rounds, (unsigned long long)want);
  if (full)
    EXPECT(max_comm == want, "%s: %llu comm rounds, formula %llu", what,
           (unsigned long long)max_comm, (unsigned long long)want);
}

static void run(const kase *k) {
  int32_t p = k->p;
  char what[200];
  describe(k, what, sizeof(what));
  uint64_t *cnt = malloc((size_t)p * sizeof(*cnt));
  uint64_t *P = malloc(((size_t)p + 1) * sizeof(*P));
  crnet__schedule *sc = calloc((size_t)p, sizeof(*sc));
  crnet__sim_rank *rk = calloc((size_t)p, sizeof(*rk));
  EXPECT(cnt && P && sc && rk, "out of memory");
  for (int32_t b = 0; b < p; b++) {
    uint64_t off;
    if (k->counts)
      cnt[b] = k->counts[b];
    else
      crnet__block_range(k->count, p, b, &off, &cnt[b]);
  }
  P[0] = 0;
  for (int32_t b = 0; b < p; b++)
    P[b + 1] = P[b] + cnt[b];
  uint64_t m = k->coll == AR ? k->count : P[p];

  for (int32_t r = 0; r < p; r++) {
    int rc = k->coll == AR
                 ? crnet__star_allreduce(&sc[r], p, r, m, k->in_place)
                 : crnet__star_allgather(&sc[r], p, r, cnt, k->in_place);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
    rk[r].sched = &sc[r];
    setup_rank(k, &rk[r], r, P, m);
  }
  char err[512] = "";
  /* With every message non-empty, everyone must hear from everyone. */
  bool causal = full_case(k, P, m);
  int rc = crnet__sim_run(rk, p, k->in_place, causal, op_fn(k->op), err,
                          sizeof(err));
  EXPECT(rc == 0, "%s: %s", what, err);
  check_results(k, what, rk, P, m);
  check_costs(k, what, sc, rk, P, m);

  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(rk);
  free(sc);
  free(P);
  free(cnt);
  cases++;
  if (k->coll == AR)
    cases_ar++;
  else
    cases_ag++;
}

/* ------------------------------------------------------------------------
 * The matrix
 */

static const int32_t big_ps[] = {100, 120, 127, 128, 720, 721, 1000};
#define NPS (64 + 7)
static int32_t ps_at(int i) { return i < 64 ? i + 1 : big_ps[i - 64]; }

START_TEST(allreduce) {
  static const enum opk ops[] = {SUM, AFFINE, TREE};
  for (int i = 0; i < NPS; i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6];
    int nt = sim_counts_for(p, 12000, 3, tot);
    for (int ip = 0; ip < 2; ip++)
      for (int t = 0; t < nt; t++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
          kase k = {AR, p, NULL, tot[t], ip, ops[o]};
          run(&k);
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
    for (int ip = 0; ip < 2; ip++)
      for (int t = 0; t < nt + 4; t++) {
        kase k = {AG, p, c, 0, ip, SUM};
        if (t < nt) {
          k.count = tot[t];
          for (int32_t b = 0; b < p; b++) {
            uint64_t off;
            crnet__block_range(tot[t], p, b, &off, &c[b]);
          }
        } else {
          sim_irregular(p, t - nt, 12000, p / 2, c);
          k.count = (uint64_t)(t - nt);
        }
        run(&k);
      }
    free(c);
  }
}
END_TEST

/* The paper's Table 2 and Theorem 2 for p = n!: n(n-1)/2 rounds, each
 * rank in every one (check_costs, n = 2..7; n = 8..10 by building a few
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
       * 5040 elements and 6·5040 of TEMP, so S_7 gets the sums only */
      kase k = {AR, f, NULL, 3, false, SUM};
      run(&k);
      for (int ip = 0; ip < 2 && n <= 6; ip++) {
        kase ind = {AR, f, NULL, (uint64_t)f, ip, INDICATOR};
        run(&ind);
      }
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
  Suite *s = suite_create("sim-star");
  TCase *tc = tcase_create("sim-star");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, misuse);
  tcase_add_test(tc, table2);
  tcase_add_test(tc, allreduce);
  tcase_add_test(tc, allgather);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld simulated collectives (%ld allreduce, %ld allgather)\n", cases,
         cases_ar, cases_ag);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
