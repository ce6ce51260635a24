/* Simulator tests for the hypercube family (src/schedules/hypercube.c):
 * recursive doubling allreduce and allgather, Rabenseifner reduce-scatter,
 * allreduce and reduce, scan and exscan, x p = 1..64, 100, 127, 128, 129,
 * 255, 256, 720, 1000 x counts 0, 1, p-1, p, p+1, a large odd one (scaled down
 * with p) and irregular block shapes x in place or not, compared exactly with a
 * serial rank-order reference. Every builder promises rank order, so the
 * reducing collectives run with the non-commutative affine maps (and with
 * sum mod 2^64 for small p). Rounds and volumes are asserted against the
 * formulas in hypercube.c; the balanced fold's reduce work is compared with
 * the naive fold's and printed.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "circulant.h"
#include "crnet.h"
#include "hypercube.h"
#include "ring.h"
#include "schedule.h"
#include "sim.h"
#include "sim_ops.h"

static long cases;

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* CSCAN, CEXSCAN: the circulant (dissemination) prefix sums of
 * circulant.c, tested here beside the hypercube's with the same reference. */
enum coll { HC_AR, HC_AG, RAB_RS, RAB_AR, RAB_RED, SCAN, EXSCAN, CSCAN,
            CEXSCAN, RSCAN, REXSCAN };
static const char *coll_name[] = {"hc-allreduce",  "hc-allgather",
                                  "rab-reduce-scatter", "rab-allreduce",
                                  "rab-reduce",    "scan",
                                  "exscan",        "circulant-scan",
                                  "circulant-exscan", "ring-scan",
                                  "ring-exscan"};

static bool is_scan(enum coll c) {
  return c == SCAN || c == EXSCAN || c == CSCAN || c == CEXSCAN ||
         c == RSCAN || c == REXSCAN;
}
static bool is_exscan(enum coll c) {
  return c == EXSCAN || c == CEXSCAN || c == REXSCAN;
}

typedef struct kase {
  enum coll coll;
  int32_t p;
  const uint64_t *counts; /* HC_AG, RAB_RS; else NULL and `count` */
  uint64_t count;
  bool in_place;
  int32_t root;
  int fold;
  bool affine;
} kase;

typedef struct result {
  uint64_t max_reduced, max_rounds, max_comm;
} result;

static int floor_log2(int32_t p) {
  int k = 0;
  while ((INT64_C(2) << k) <= p)
    k++;
  return k;
}

/* The round formulas of hypercube.c. */
static uint64_t rounds_formula(const kase *k) {
  int32_t p = k->p;
  if (p == 1)
    return 1;
  int d = floor_log2(p);
  bool f = p != (INT32_C(1) << d);
  int fr = !f ? 0 : k->fold == CRNET__HYPERCUBE_FOLD_BALANCED ? 2 : 1;
  switch (k->coll) {
  case HC_AR:
    return (uint64_t)(d + fr + f);
  case HC_AG:
    return (uint64_t)(d + 2 * f);
  case RAB_RS:
    return (uint64_t)(d + fr + f);
  case RAB_AR:
    return (uint64_t)(2 * d + fr + f);
  case RAB_RED:
    return (uint64_t)(2 * d + fr);
  case RSCAN:
  case REXSCAN: /* the chain: nb + p - 2 rounds, nb = min(m, p) blocks */
    return k->count == 0 ? 0
                         : (k->count < (uint64_t)p ? k->count : (uint64_t)p) +
                               (uint64_t)p - 2;
  default:
    return (uint64_t)crnet__ceil_log2(p);
  }
}

static int build(const kase *k, crnet__schedule *s, int32_t r, uint64_t m,
                 const uint64_t *cnt) {
  switch (k->coll) {
  case HC_AR:
    return crnet__hypercube_allreduce_fold(s, k->p, r, m, k->in_place, k->fold);
  case HC_AG:
    return crnet__hypercube_allgather(s, k->p, r, cnt, k->in_place);
  case RAB_RS:
    return crnet__rabenseifner_reduce_scatter_fold(s, k->p, r, cnt, k->in_place,
                                                   k->fold);
  case RAB_AR:
    return crnet__rabenseifner_allreduce_fold(s, k->p, r, m, k->in_place,
                                              k->fold);
  case RAB_RED:
    return crnet__rabenseifner_reduce_fold(s, k->p, r, m, k->root, k->in_place,
                                           k->fold);
  case SCAN:
    return crnet__hypercube_scan(s, k->p, r, m, k->in_place);
  case EXSCAN:
    return crnet__hypercube_exscan(s, k->p, r, m, k->in_place);
  case CSCAN:
    return crnet__circulant_scan(s, k->p, r, m, k->in_place);
  case CEXSCAN:
    return crnet__circulant_exscan(s, k->p, r, m, k->in_place);
  case RSCAN:
    return crnet__ring_scan(s, k->p, r, m, k->in_place, false);
  case REXSCAN:
    return crnet__ring_scan(s, k->p, r, m, k->in_place, true);
  }
  return -1;
}

static result run(const kase *k) {
  int32_t p = k->p;
  bool affine = k->affine && k->coll != HC_AG;
  char what[200];
  snprintf(what, sizeof(what),
           "%s p=%d count=%llu%s in_place=%d root=%d fold=%d affine=%d",
           coll_name[k->coll], p, (unsigned long long)k->count,
           k->counts ? " (blocks)" : "", k->in_place, k->root, k->fold,
           affine);
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
  uint64_t m = P[p];

  for (int32_t r = 0; r < p; r++) {
    int rc = build(k, &sc[r], r, m, cnt);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    q->sched = &sc[r];
    uint64_t sn = m, rn = m, ioff = 0, in = 0;
    if (k->coll == HC_AG)
      sn = cnt[r];
    if (k->coll == RAB_RS && !k->in_place)
      rn = cnt[r];
    if (k->coll == RAB_RED && r != k->root && !k->in_place)
      rn = 0;
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof(uint64_t));
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof(uint64_t));
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = SENTINEL;
    for (uint64_t e = 0; e < sn; e++)
      snd[e] = sim_value(r, (k->coll == HC_AG ? P[r] : 0) + e, affine);
    if (k->in_place) {
      if (k->coll == HC_AG) {
        memcpy(rcv + P[r], snd, sn * sizeof(uint64_t));
        ioff = P[r];
      } else {
        memcpy(rcv, snd, sn * sizeof(uint64_t));
      }
      in = sn;
    }
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
    q->init_off = ioff;
    q->init_count = in;
  }

  crnet__sim_combine op = affine ? op_affine : op_sum;
  char err[512] = "";
  int rc = crnet__sim_run(rk, p, k->in_place, false, op, err, sizeof(err));
  EXPECT(rc == 0, "%s: %s", what, err);

  /* reference: ref[e] = V_0 (+) ... (+) V_p-1; for scans, kept per rank */
  uint64_t *acc = malloc((m ? m : 1) * sizeof(uint64_t));
  EXPECT(acc, "out of memory");
  if (is_scan(k->coll)) {
    for (int32_t r = 0; r < p; r++) {
      const uint64_t *o = rk[r].recv;
      for (uint64_t e = 0; e < m; e++) {
        uint64_t v = sim_value(r, e, affine);
        uint64_t want = !is_exscan(k->coll) ? (r ? op(acc[e], v) : v) : acc[e];
        if (is_exscan(k->coll) && r == 0)
          want = k->in_place ? v : SENTINEL; /* never written */
        EXPECT(o[e] == want, "%s: rank %d element %llu", what, r,
               (unsigned long long)e);
        acc[e] = r ? op(acc[e], v) : v;
      }
    }
  } else if (k->coll != HC_AG) {
    for (uint64_t e = 0; e < m; e++) {
      uint64_t v = sim_value(0, e, affine);
      for (int32_t x = 1; x < p; x++)
        v = op(v, sim_value(x, e, affine));
      acc[e] = v;
    }
  }
  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    switch (k->coll) {
    case HC_AR:
    case RAB_AR:
      for (uint64_t e = 0; e < m; e++)
        EXPECT(o[e] == acc[e], "%s: rank %d element %llu", what, r,
               (unsigned long long)e);
      /* bitwise identical everywhere (also implied by the reference) */
      EXPECT(memcmp(o, rk[0].recv, m * sizeof(uint64_t)) == 0,
             "%s: rank %d differs from rank 0", what, r);
      break;
    case RAB_RS:
      for (uint64_t e = 0; e < cnt[r]; e++)
        EXPECT(o[e] == acc[P[r] + e], "%s: rank %d element %llu", what, r,
               (unsigned long long)e);
      break;
    case RAB_RED:
      if (r == k->root)
        for (uint64_t e = 0; e < m; e++)
          EXPECT(o[e] == acc[e], "%s: root element %llu", what,
                 (unsigned long long)e);
      break;
    case HC_AG:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < cnt[b]; e++)
          EXPECT(o[P[b] + e] == sim_value(b, P[b] + e, false),
                 "%s: rank %d block %d element %llu", what, r, b,
                 (unsigned long long)e);
      break;
    default:
      break;
    }
  }

  /* rounds: every schedule at most the formula, the longest exactly it;
   * with every piece non-empty (m >= 2p for regular blocks) the longest
   * also communicates in every round */
  result res = {0, 0, 0};
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    if (s->elems_reduced > res.max_reduced)
      res.max_reduced = s->elems_reduced;
    if (sc[r].nrounds > res.max_rounds)
      res.max_rounds = sc[r].nrounds;
    if (s->comm_rounds > res.max_comm)
      res.max_comm = s->comm_rounds;
  }
  uint64_t want = rounds_formula(k);
  if (p > 1) {
    EXPECT(res.max_rounds == want, "%s: %llu rounds, formula %llu", what,
           (unsigned long long)res.max_rounds, (unsigned long long)want);
    bool full = !k->counts ? m >= 2 * (uint64_t)p : true;
    for (int32_t b = 0; b < p && k->counts; b++)
      full = full && cnt[b] > 0;
    /* reduce: the root communicates in every round of the halving and
     * the gather, and in the fold rounds when it is in a pair */
    uint64_t comm = res.max_comm;
    if (k->coll == RAB_RED) {
      int32_t px = p - (INT32_C(1) << floor_log2(p));
      comm = rk[k->root].stats.comm_rounds;
      if (k->root >= 2 * px)
        want = 2 * (uint64_t)floor_log2(p);
    }
    /* the chain: a middle rank receives nb blocks and sends them one
     * round later */
    if ((k->coll == RSCAN || k->coll == REXSCAN) && p > 2)
      want = (k->count < (uint64_t)p ? k->count : (uint64_t)p) + 1;
    if (full)
      EXPECT(comm == want, "%s: %llu comm rounds, formula %llu",
             what, (unsigned long long)comm,
             (unsigned long long)want);
  }
  /* volume: Rabenseifner allreduce, p a power of two, equal blocks:
   * 2(p-1)/p·m sent and received, (p-1)/p·m reduced, on every rank */
  bool pow2 = (p & (p - 1)) == 0;
  if (k->coll == RAB_AR && pow2 && m % (uint64_t)p == 0)
    for (int32_t r = 0; r < p; r++) {
      const crnet__sim_stats *s = &rk[r].stats;
      uint64_t blk = (uint64_t)(p - 1) * (m / (uint64_t)p);
      EXPECT(s->elems_sent == 2 * blk && s->elems_recv == 2 * blk &&
                 s->elems_reduced == blk,
             "%s: rank %d sent %llu recv %llu reduced %llu", what, r,
             (unsigned long long)s->elems_sent,
             (unsigned long long)s->elems_recv,
             (unsigned long long)s->elems_reduced);
    }
  /* dissemination: rank r receives the whole vector in every round k
   * with 2^k <= r, and sends it in every round with r + 2^k < p */
  if (k->coll == CSCAN || k->coll == CEXSCAN)
    for (int32_t r = 0; r < p; r++) {
      uint64_t nr = 0, ns = 0;
      for (int64_t d = 1; d < p; d *= 2) {
        nr += d <= r;
        ns += r + d < p;
      }
      EXPECT(rk[r].stats.elems_recv == nr * m &&
                 rk[r].stats.elems_sent == ns * m,
             "%s: rank %d sent %llu received %llu", what, r,
             (unsigned long long)rk[r].stats.elems_sent,
             (unsigned long long)rk[r].stats.elems_recv);
    }
  /* the fold: the dropped rank 1 reduces its half, m - floor(m/2)
   * elements, with the balanced fold, and nothing with the naive one */
  if (!pow2 && (k->coll == HC_AR || k->coll == RAB_AR || k->coll == RAB_RS))
    EXPECT(rk[1].stats.elems_reduced ==
               (k->fold == CRNET__HYPERCUBE_FOLD_BALANCED ? m - m / 2 : 0),
           "%s: dropped rank 1 reduced %llu", what,
           (unsigned long long)rk[1].stats.elems_reduced);
  /* reduce-scatter, p a power of two: each rank sends every block but its
   * own once and reduces exactly what it receives */
  if (k->coll == RAB_RS && pow2)
    for (int32_t r = 0; r < p; r++)
      EXPECT(rk[r].stats.elems_reduced == rk[r].stats.elems_recv &&
                 rk[r].stats.elems_sent == m - cnt[r],
             "%s: rank %d volume", what, r);

  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(acc);
  free(rk);
  free(sc);
  free(P);
  free(cnt);
  cases++;
  return res;
}

/* ------------------------------------------------------------------------
 * The matrix
 */

static const int32_t big_ps[] = {100, 127, 128, 129, 255, 256, 720, 1000};
#define NPS (64 + 8)
static int32_t ps_at(int i) { return i < 64 ? i + 1 : big_ps[i - 64]; }

/* CRNET_SIM_QUICK=1 (the sanitizer pass of the test suite) leaves out the
 * largest p, whose cases are the same builders at a size where a
 * sanitizer's slowdown costs minutes. */
static bool quick;
static bool skipped_p(int32_t p) { return quick && p > 129; }

static void matrix(enum coll coll, int fold, bool small_only) {
  for (int i = 0; i < NPS; i++) {
    int32_t p = ps_at(i);
    if (skipped_p(p))
      continue;
    if (small_only && p > 33)
      continue;
    uint64_t tot[6], *c = malloc((size_t)p * sizeof(*c));
    int nt = sim_counts_for(p, 12000, 2 * (uint64_t)p + 2, tot);
    bool blocks = coll == HC_AG || coll == RAB_RS;
    for (int ip = 0; ip < 2; ip++)
      for (int t = 0; t < nt + (blocks ? 4 : 0); t++) {
        kase k = {coll, p, NULL, 0, ip, 0, fold, true};
        if (t < nt) {
          k.count = tot[t];
          if (blocks) {
            for (int32_t b = 0; b < p; b++) {
              uint64_t off;
              crnet__block_range(tot[t], p, b, &off, &c[b]);
            }
            k.counts = c;
          }
        } else {
          sim_irregular(p, t - nt, 12000, p > 1 ? 1 : 0, c);
          k.counts = c;
          k.count = (uint64_t)(t - nt);
        }
        if (coll == RAB_RED) {
          /* roots: 0, 1 (an odd rank folded away unless it swaps), the
           * middle and the last */
          int32_t roots[4] = {0, p > 1 ? 1 : 0, p / 2, p - 1};
          for (int q = 0; q < 4; q++) {
            k.root = roots[q];
            run(&k);
          }
        } else {
          run(&k);
        }
        /* sum as well, for small p */
        if (p <= 16 && coll != HC_AG) {
          k.affine = false;
          run(&k);
        }
      }
    free(c);
  }
}

START_TEST(hc_allreduce) {
  matrix(HC_AR, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(hc_allgather) {
  matrix(HC_AG, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(rab_reduce_scatter) {
  matrix(RAB_RS, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(rab_allreduce) {
  matrix(RAB_AR, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(rab_reduce) {
  matrix(RAB_RED, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(scan) { matrix(SCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false); }
END_TEST

START_TEST(circulant_scan) {
  matrix(CSCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(circulant_exscan) {
  matrix(CEXSCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

START_TEST(exscan) { matrix(EXSCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false); }
END_TEST

START_TEST(ring_scan) { matrix(RSCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false); }
END_TEST

START_TEST(ring_exscan) {
  matrix(REXSCAN, CRNET__HYPERCUBE_FOLD_BALANCED, false);
}
END_TEST

/* The naive fold must be correct too (it is the yardstick). */
START_TEST(naive_fold) {
  matrix(HC_AR, CRNET__HYPERCUBE_FOLD_NAIVE, true);
  matrix(RAB_RS, CRNET__HYPERCUBE_FOLD_NAIVE, true);
  matrix(RAB_AR, CRNET__HYPERCUBE_FOLD_NAIVE, true);
  matrix(RAB_RED, CRNET__HYPERCUBE_FOLD_NAIVE, true);
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
      for (int32_t b = 0; b < p; b++) {
        uint64_t off;
        crnet__block_range(m, p, b, &off, &blk[b]);
      }
      bool b_ = cs[c] == RAB_RS;
      kase kb = {cs[c],
                 p,
                 b_ ? blk : NULL,
                 m,
                 false,
                 0,
                 CRNET__HYPERCUBE_FOLD_BALANCED,
                 true};
      kase kn = kb;
      kn.fold = CRNET__HYPERCUBE_FOLD_NAIVE;
      result rb = run(&kb), rn = run(&kn);
      printf("fold %-18s p=%-4d m=%-6llu max reduced per rank: balanced "
             "%llu (%.2f m), naive %llu (%.2f m)\n",
             coll_name[cs[c]], p, (unsigned long long)m,
             (unsigned long long)rb.max_reduced,
             (double)rb.max_reduced / (double)m,
             (unsigned long long)rn.max_reduced,
             (double)rn.max_reduced / (double)m);
      EXPECT(rb.max_reduced < rn.max_reduced,
             "%s p=%d: balanced %llu not below naive %llu", coll_name[cs[c]],
             p, (unsigned long long)rb.max_reduced,
             (unsigned long long)rn.max_reduced);
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
  const char *q = getenv("CRNET_SIM_QUICK");
  quick = q != NULL && strcmp(q, "1") == 0;
  Suite *s = suite_create("sim-hypercube");
  TCase *tc = tcase_create("sim-hypercube");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, misuse);
  tcase_add_test(tc, hc_allreduce);
  tcase_add_test(tc, hc_allgather);
  tcase_add_test(tc, rab_reduce_scatter);
  tcase_add_test(tc, rab_allreduce);
  tcase_add_test(tc, rab_reduce);
  tcase_add_test(tc, scan);
  tcase_add_test(tc, exscan);
  tcase_add_test(tc, circulant_scan);
  tcase_add_test(tc, circulant_exscan);
  tcase_add_test(tc, ring_scan);
  tcase_add_test(tc, ring_exscan);
  tcase_add_test(tc, naive_fold);
  tcase_add_test(tc, fold_balance);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld simulated collectives\n", cases);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
