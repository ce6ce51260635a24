/* Simulator tests: every circulant skip sequence x collective x p x count
 * shape x in place or not, run in the in-memory simulator (src/collectives/
 * sim.c) and compared exactly with a serial reference written here; the
 * papers' theorems (rounds, blocks sent, received and reduced) as
 * assertions; golden dumps of small schedules; and negative tests showing
 * the simulator rejects broken schedules.
 *
 * Operators: sum mod 2^64 (commutative) and composition of affine maps
 * x -> a*x + b mod 2^31-1 packed as (a << 32 | b) (associative, not
 * commutative): circulant-linear must reduce in rank order, so it always
 * runs with the affine maps.
 *
 * Environment: CRNET_SIM_QUICK=1 runs a reduced matrix (for valgrind);
 * CRNET_UPDATE_GOLDEN=1 rewrites the golden files; CRNET_GOLDEN_DIR names
 * their directory (set by meson).
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "circulant.h"
#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"

static const char *seqs[] = {"circulant", "circulant-doubling",
                             "circulant-linear", "circulant-sqrt"};
#define NSEQS 4

static long cases; /* simulated collectives, printed at the end */
static bool quick;

/* ------------------------------------------------------------------------
 * Operators and data
 */

/* ------------------------------------------------------------------------
 * One simulated collective
 */

/* ARG: the allreduce by allgather (crnet__circulant_allreduce_gather). */
enum coll { RS, AR, AG, RED, BC, BAR, ARG };
static const char *coll_name[] = {"reduce-scatter", "allreduce", "allgather",
                                  "reduce",         "bcast",     "barrier",
                                  "allreduce-gather"};

typedef struct kase {
  enum coll coll;
  int seq;
  int32_t p;
  const uint64_t *counts; /* p blocks (RS, AG); else NULL and `count` */
  uint64_t count;
  bool in_place;
  int32_t root;
} kase;

/* Check's ck_assert records every passing assertion (a write per call), too
 * slow for per-element checks: test plainly, and fail through Check. */
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

static void run(const kase *k) {
  int32_t p = k->p;
  char what[200];
  snprintf(what, sizeof(what), "%s %s p=%d count=%llu%s in_place=%d root=%d",
           coll_name[k->coll], seqs[k->seq], p,
           (unsigned long long)k->count, k->counts ? " (blocks)" : "",
           k->in_place, k->root);
  int32_t *sk = malloc((size_t)p * sizeof(*sk));
  uint64_t *cnt = malloc((size_t)p * sizeof(*cnt));
  uint64_t *P = malloc(((size_t)p + 1) * sizeof(*P));
  crnet__schedule *sc = calloc((size_t)p, sizeof(*sc));
  crnet__sim_rank *rk = calloc((size_t)p, sizeof(*rk));
  EXPECT(sk && cnt && P && sc && rk, "out of memory");
  int n = crnet__circulant_skips(seqs[k->seq], p, sk);
  EXPECT(n >= 1, "%s: skips", what);
  EXPECT(crnet__circulant_skips_check(sk, n, p) == 0, "%s: check", what);
  bool ordered = crnet__circulant_skips_ordered(sk, n);
  bool affine = (ordered && (k->coll == RS || k->coll == AR ||
                             k->coll == RED)) ||
                k->coll == ARG; /* ARG folds in rank order for any skips */
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

  /* build */
  for (int32_t r = 0; r < p; r++) {
    int rc = 0;
    switch (k->coll) {
    case RS:
      rc = crnet__circulant_reduce_scatter(&sc[r], sk, n, p, r, cnt,
                                           k->in_place);
      break;
    case AR:
      rc = crnet__circulant_allreduce(&sc[r], sk, n, p, r, m, k->in_place);
      break;
    case AG:
      rc = crnet__circulant_allgather(&sc[r], sk, n, p, r, cnt, k->in_place);
      break;
    case RED:
      rc =
          crnet__circulant_reduce(&sc[r], sk, n, p, r, m, k->root, k->in_place);
      break;
    case BC:
      rc = crnet__circulant_bcast(&sc[r], sk, n, p, r, m, k->root);
      break;
    case BAR:
      rc = crnet__circulant_barrier(&sc[r], sk, n, p, r);
      break;
    case ARG:
      rc = crnet__circulant_allreduce_gather(&sc[r], sk, n, p, r, m,
                                             k->in_place);
      break;
    }
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
  }

  /* buffers and inputs: rank x's vector element e is sim_value(x, e) */
  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    q->sched = &sc[r];
    uint64_t sn = 0, rn = 0, ioff = 0, in = 0;
    switch (k->coll) {
    case RS:
      sn = m;
      rn = k->in_place ? m : cnt[r];
      break;
    case AR:
    case ARG:
      sn = m;
      rn = m;
      break;
    case AG:
      sn = cnt[r];
      rn = m;
      break;
    case RED:
      sn = m;
      rn = r == k->root || k->in_place ? m : 0;
      break;
    case BC:
      rn = m;
      break;
    case BAR:
      break;
    }
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof(uint64_t));
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof(uint64_t));
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = UINT64_C(0xdeadbeefdeadbeef);
    if (k->coll == AG) {
      for (uint64_t e = 0; e < sn; e++)
        snd[e] = sim_value(r, P[r] + e, affine);
    } else {
      for (uint64_t e = 0; e < sn; e++)
        snd[e] = sim_value(r, e, affine);
    }
    if (k->in_place && k->coll != BC && k->coll != BAR) {
      if (k->coll == AG) {
        memcpy(rcv + P[r], snd, sn * sizeof(uint64_t));
        ioff = P[r];
        in = sn;
      } else {
        memcpy(rcv, snd, sn * sizeof(uint64_t));
        in = sn;
      }
    }
    if (k->coll == BC && r == k->root) {
      for (uint64_t e = 0; e < m; e++)
        rcv[e] = sim_value(r, e, false);
      in = m;
    }
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
    q->init_off = ioff;
    q->init_count = in;
  }

  char err[512] = "";
  int rc = crnet__sim_run(rk, p, k->in_place, k->coll == BAR,
                          affine ? op_affine : op_sum, err, sizeof(err));
  EXPECT(rc == 0, "%s: %s", what, err);

  /* results against the serial reference (rank-order fold) */
  crnet__sim_combine op = affine ? op_affine : op_sum;
  uint64_t *ref = NULL;
  if (k->coll == RS || k->coll == AR || k->coll == RED || k->coll == ARG) {
    ref = malloc((m ? m : 1) * sizeof(uint64_t));
    EXPECT(ref, "out of memory");
    for (uint64_t e = 0; e < m; e++) {
      uint64_t v = sim_value(0, e, affine);
      for (int32_t x = 1; x < p; x++)
        v = op(v, sim_value(x, e, affine));
      ref[e] = v;
    }
  }
  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    switch (k->coll) {
    case RS:
      for (uint64_t e = 0; e < cnt[r]; e++)
        EXPECT(o[e] == ref[P[r] + e], "%s: rank %d element %llu", what,
                      r, (unsigned long long)e);
      break;
    case AR:
    case ARG:
      for (uint64_t e = 0; e < m; e++)
        EXPECT(o[e] == ref[e], "%s: rank %d element %llu", what, r,
                      (unsigned long long)e);
      break;
    case RED:
      if (r == k->root)
        for (uint64_t e = 0; e < m; e++)
          EXPECT(o[e] == ref[e], "%s: root element %llu", what,
                        (unsigned long long)e);
      break;
    case AG:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < cnt[b]; e++)
          EXPECT(o[P[b] + e] == sim_value(b, P[b] + e, false),
                 "%s: rank %d block %d element %llu", what, r, b,
                 (unsigned long long)e);
      break;
    case BC:
      for (uint64_t e = 0; e < m; e++)
        EXPECT(o[e] == sim_value(k->root, e, false), "%s: rank %d element %llu",
               what, r, (unsigned long long)e);
      break;
    case BAR:
      break;
    }
  }

  /* theorems. Any valid sequence: reduce-scatter sends every block but its
   * own exactly once and reduces every element it receives; with equal
   * blocks that is (p-1) blocks each way. Halving skips: ceil(log2 p)
   * rounds (2x for allreduce), when every block is non-empty. */
  bool nonempty = true, equal = true;
  for (int32_t b = 0; b < p; b++) {
    nonempty = nonempty && cnt[b] > 0;
    equal = equal && cnt[b] == cnt[0];
  }
  if (strcmp(seqs[k->seq], "circulant") == 0)
    EXPECT(n - 1 == crnet__ceil_log2(p), "%s: rounds", what);
  for (int32_t r = 0; r < p && p > 1; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    uint64_t blk = (p - 1) * (m / (uint64_t)p);
    if (k->coll == RS) {
      EXPECT(s->elems_sent == m - cnt[r], "%s: rank %d", what, r);
      EXPECT(s->elems_reduced == s->elems_recv, "%s: rank %d", what, r);
      if (equal)
        EXPECT(s->elems_recv == blk, "%s: rank %d", what, r);
      if (nonempty)
        EXPECT(s->comm_rounds == (uint64_t)n - 1, "%s: rank %d", what,
                      r);
    }
    if (k->coll == AR) {
      if (equal) {
        EXPECT(s->elems_sent == 2 * blk && s->elems_recv == 2 * blk &&
                          s->elems_reduced == blk,
                      "%s: rank %d sent %llu recv %llu reduced %llu", what, r,
                      (unsigned long long)s->elems_sent,
                      (unsigned long long)s->elems_recv,
                      (unsigned long long)s->elems_reduced);
      }
      if (nonempty)
        EXPECT(s->comm_rounds == 2 * ((uint64_t)n - 1), "%s: rank %d",
                      what, r);
    }
    /* allreduce by allgather: the allgather's rounds, every other rank's
     * whole vector received once and reduced */
    if (k->coll == ARG) {
      uint64_t all = (uint64_t)(p - 1) * m;
      EXPECT(s->elems_recv == all && s->elems_sent == all &&
                 s->elems_reduced == all,
             "%s: rank %d sent %llu recv %llu reduced %llu", what, r,
             (unsigned long long)s->elems_sent,
             (unsigned long long)s->elems_recv,
             (unsigned long long)s->elems_reduced);
      if (m > 0)
        EXPECT(s->comm_rounds == (uint64_t)n - 1, "%s: rank %d", what, r);
    }
    if (k->coll == AG) {
      EXPECT(s->elems_recv == m - cnt[r], "%s: rank %d", what, r);
      if (nonempty)
        EXPECT(s->comm_rounds == (uint64_t)n - 1, "%s: rank %d", what,
                      r);
    }
    if (k->coll == RED && r == k->root)
      EXPECT(s->elems_recv - rk[r].stats.elems_reduced == m - cnt[r],
                    "%s: root gathers %llu", what,
                    (unsigned long long)(s->elems_recv - s->elems_reduced));
    if (k->coll == BAR)
      EXPECT(s->comm_rounds == (uint64_t)n - 1 && s->elems_sent == 0,
                    "%s: rank %d", what, r);
    if (k->coll == RED || k->coll == BC)
      EXPECT(s->comm_rounds <= 2 * ((uint64_t)n - 1), "%s: rank %d",
                    what, r);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(ref);
  free(rk);
  free(sc);
  free(P);
  free(cnt);
  free(sk);
  cases++;
}

/* ------------------------------------------------------------------------
 * The matrix
 */

static const int32_t big_ps[] = {100, 127, 128, 129, 255, 256, 720, 1000};

static int nps(void) { return quick ? 13 : 64 + 8; }
static int32_t ps_at(int i) {
  if (quick) {
    static const int32_t q[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 22, 31, 33, 100};
    return q[i];
  }
  return i < 64 ? i + 1 : big_ps[i - 64];
}

/* Collectives that take block counts: regular and irregular. */
static void matrix_blocks(enum coll coll) {
  for (int i = 0; i < nps(); i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6], *c = malloc((size_t)p * sizeof(*c));
    int nt = sim_counts_for(p, 40000, (uint64_t)p + 2, tot);
    for (int seq = 0; seq < NSEQS; seq++)
      for (int ip = 0; ip < 2; ip++) {
        for (int t = 0; t < nt + 4; t++) {
          kase k = {coll, seq, p, c, 0, ip, 0};
          if (t < nt) {
            for (int32_t b = 0; b < p; b++) {
              uint64_t off;
              crnet__block_range(tot[t], p, b, &off, &c[b]);
            }
            k.count = tot[t];
          } else {
            sim_irregular(p, t - nt, 40000, 0, c);
            k.count = (uint64_t)(t - nt);
          }
          run(&k);
        }
      }
    free(c);
  }
}

static void matrix_count(enum coll coll) {
  for (int i = 0; i < nps(); i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6];
    int nt = sim_counts_for(p, 40000, (uint64_t)p + 2, tot);
    for (int seq = 0; seq < NSEQS; seq++) {
      /* The linear sequence has p-1 rounds and its pruned reduce/bcast
       * builders walk all p ranks per round (O(p^2) per rank): beyond
       * p = 256 those two would dominate the runtime, so they stop there. */
      if (p > 256 && seq == 2 && (coll == RED || coll == BC))
        continue;
      int32_t roots[4] = {0, 1 % p, p / 2, p - 1};
      int nr = p <= 16 ? p : 4;
      for (int ir = 0; ir < nr; ir++) {
        int32_t root = p <= 16 ? ir : roots[ir];
        if (coll != RED && coll != BC && ir > 0)
          break;
        for (int ip = 0; ip < 2; ip++) {
          if (ip && (coll == BC || coll == BAR))
            continue;
          for (int t = 0; t < nt; t++) {
            /* many roots: only a few counts each */
            if (nr > 1 && ir > 0 && t != 0 && t != 4 && t != nt - 1)
              continue;
            /* ARG keeps p·count elements per rank: counts 0 and 1 only
             * beyond p = 64 (p·(p-1) per rank would be 10^9 elements in
             * all at p = 1000) */
            if (coll == ARG && p > 64 && t > 1)
              continue;
            kase k = {coll, seq, p, NULL, tot[t], ip, root};
            run(&k);
            if (coll == BAR)
              break;
          }
        }
      }
    }
  }
}

START_TEST(test_reduce_scatter) { matrix_blocks(RS); }
END_TEST
START_TEST(test_allgather) { matrix_blocks(AG); }
END_TEST
START_TEST(test_allreduce) { matrix_count(AR); }
END_TEST
START_TEST(test_reduce) { matrix_count(RED); }
END_TEST
START_TEST(test_bcast) { matrix_count(BC); }
END_TEST
START_TEST(test_allreduce_gather) { matrix_count(ARG); }
END_TEST
START_TEST(test_barrier) { matrix_count(BAR); }
END_TEST

/* ------------------------------------------------------------------------
 * Skip sequences
 */

START_TEST(test_skips) {
  int32_t s[2000];
  static const int32_t want22[] = {22, 11, 6, 3, 2, 1};
  ck_assert_int_eq(crnet__circulant_skips("circulant", 22, s), 6);
  ck_assert_mem_eq(s, want22, sizeof(want22));
  /* p = 22: rank 21 receives from 10, 15, 18, 19, 20 */
  static const int32_t from21[] = {10, 15, 18, 19, 20};
  for (int j = 1; j < 6; j++)
    ck_assert_int_eq((21 - s[j] + 22) % 22, from21[j - 1]);
  static const int32_t want_d22[] = {22, 16, 8, 4, 2, 1};
  ck_assert_int_eq(crnet__circulant_skips("circulant-doubling", 22, s), 6);
  ck_assert_mem_eq(s, want_d22, sizeof(want_d22));
  ck_assert_int_eq(crnet__circulant_skips("nope", 22, s), CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_skips("circulant", 0, s), CRNET_EINVAL);
  for (int32_t p = 1; p <= 2000; p++) {
    for (int q = 0; q < NSEQS; q++) {
      int n = crnet__circulant_skips(seqs[q], p, s);
      ck_assert_int_eq(crnet__circulant_skips_check(s, n, p), 0);
      if (q <= 1)
        ck_assert_int_eq(n - 1, crnet__ceil_log2(p));
      if (q == 2)
        ck_assert_int_eq(n - 1, p - 1);
      if (q == 3) { /* about sqrt(p): at most sqrt(p) + log2(2 sqrt p) + 1 */
        int32_t c = 1;
        while (c * c < p)
          c++;
        ck_assert_int_le(n - 1, c + crnet__ceil_log2(2 * c) + 1);
      }
      ck_assert(crnet__circulant_skips_ordered(s, n) == (q == 2 || p <= 3));
    }
  }
  /* invalid sequences: a jump s' > 2s, not decreasing, not ending at 1 */
  static const int32_t bad1[] = {9, 4, 2, 1}, bad2[] = {5, 5, 3, 2, 1},
                       bad3[] = {5, 3, 2}, good[] = {9, 5, 3, 2, 1};
  ck_assert_int_eq(crnet__circulant_skips_check(bad1, 4, 9), CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_skips_check(bad2, 5, 5), CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_skips_check(bad3, 3, 5), CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_skips_check(good, 5, 9), 0);
  crnet__schedule sc;
  uint64_t cnt[9] = {0};
  ck_assert_int_eq(
      crnet__circulant_reduce_scatter(&sc, bad1, 4, 9, 0, cnt, false),
      CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_reduce(&sc, good, 5, 9, 0, 3, 9, false),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__circulant_allreduce(&sc, good, 5, 9, 9, 3, false),
                   CRNET_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------------
 * The simulator must reject broken schedules, and the reference must notice
 * a wrong reduction order.
 */

static int sim2(crnet__schedule *a, crnet__schedule *b, char *err) {
  uint64_t s0[4] = {1, 2, 3, 4}, s1[4] = {5, 6, 7, 8}, r0[4], r1[4];
  crnet__sim_rank rk[2] = {
      {a, s0, 4, r0, 4, 0, 0, {0}},
      {b, s1, 4, r1, 4, 0, 0, {0}},
  };
  int rc = crnet__sim_run(rk, 2, false, false, op_sum, err, 256);
  crnet__sched_free(a);
  crnet__sched_free(b);
  return rc;
}

/* What crnet__select accepts it can build: every schedule, every collective
 * it names, p = 1..64, every rank, with and without IN_PLACE, three roots,
 * counts 0 and 6, exscan too (alltoallv: irregular counts, packed). crnet_comm_set_schedule refuses by
 * crnet__select, so a gap here would be a schedule that set_schedule
 * accepts and then every call refuses. */
START_TEST(test_select_builds) {
  uint64_t counts[64], displs[64];
  int built = 0;
  for (size_t i = 0; crnet__schedule_name(i) != NULL; i++) {
    const char *nm = crnet__schedule_name(i);
    for (int coll = 0; coll < CRNET_COLL_COUNT; coll++) {
      if (!crnet__schedule_known(nm, (crnet_collective)coll))
        continue;
      for (int32_t p = 1; p <= 64; p++) {
        for (int32_t k = 0; k < p; k++) {
          counts[k] = (uint64_t)(k % 3);
          displs[k] = k > 0 ? displs[k - 1] + counts[k - 1] : 0;
        }
        for (int v = 0; v < 24; v++) {
          int ex = v & 1, ip = (v >> 1) & 1, rt = (v >> 2) % 3;
          uint64_t cnt = v >= 12 ? 6 : 0;
          crnet__call call = {.coll = (crnet_collective)coll,
                              .p = p,
                              .count = cnt,
                              .counts = counts,
                              .root = rt == 0 ? 0 : rt == 1 ? p / 2 : p - 1,
                              .in_place = ip,
                              .commutative = true,
                              .exclusive = ex,
                              .esize = 4,
                              .sdispls = displs,
                              .rcounts = counts,
                              .rdispls = displs};
          const char *name;
          uint32_t id;
          char why[256];
          if (ex && coll != CRNET_COLL_SCAN)
            continue;
          if (crnet__select(nm, &call, &name, &id, why, sizeof why) != 0)
            continue;
          for (int32_t r = 0; r < p; r++) {
            crnet__schedule s;
            int rc;
            call.rank = r;
            rc = crnet__build(name, &call, &s);
            ck_assert_msg(rc == 0,
                          "%s %s p=%d rank %d: selected but not built (%d)",
                          nm, crnet_collective_name((crnet_collective)coll),
                          p, r, rc);
            crnet__sched_free(&s);
            built++;
          }
        }
      }
    }
  }
  ck_assert_int_gt(built, 100000);
}
END_TEST

START_TEST(test_sim_rejects) {
  crnet__schedule a, b;
  char err[256];
  const crnet__seg S = {CRNET__BUF_SEND, 0, 2}, R = {CRNET__BUF_RECV, 0, 2},
                   T = {CRNET__BUF_TEMP, 0, 2};
  /* a correct exchange passes */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_send(&a, 1, CRNET__BUF_SEND, 0, 2);
  crnet__sched_recv(&a, 1, CRNET__BUF_RECV, 0, 2);
  crnet__sched_reduce(&a, S, R, CRNET__SRC_LEFT);
  crnet__sched_round(&b);
  crnet__sched_send(&b, 0, CRNET__BUF_SEND, 0, 2);
  crnet__sched_recv(&b, 0, CRNET__BUF_RECV, 0, 2);
  ck_assert_int_eq(sim2(&a, &b, err), 0);
  /* lengths differ */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_send(&a, 1, CRNET__BUF_SEND, 0, 2);
  crnet__sched_round(&b);
  crnet__sched_recv(&b, 0, CRNET__BUF_RECV, 0, 3);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  ck_assert_ptr_nonnull(strstr(err, "round 0"));
  /* a send nobody receives */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_send_peer(&a, 1);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  ck_assert_ptr_nonnull(strstr(err, "rank 0"));
  /* a receive in another round than the send */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_send_peer(&a, 1);
  crnet__sched_round(&b);
  crnet__sched_round(&b);
  crnet__sched_recv_peer(&b, 0);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* sending unwritten RECV */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_send(&a, 1, CRNET__BUF_RECV, 0, 2);
  crnet__sched_round(&b);
  crnet__sched_recv(&b, 0, CRNET__BUF_RECV, 0, 2);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  ck_assert_ptr_nonnull(strstr(err, "unwritten"));
  /* reducing into unwritten RECV */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_reduce(&a, S, R, CRNET__SRC_LEFT);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* reading unwritten TEMP */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_need_temp(&a, 2);
  crnet__sched_round(&a);
  crnet__sched_copy(&a, T, R);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* writing SEND */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_copy(&a, S, crnet__seg_make(CRNET__BUF_SEND, 2, 2));
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* out of bounds (TEMP too short) */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_need_temp(&a, 1);
  crnet__sched_round(&a);
  crnet__sched_copy(&a, S, T);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* receiving into the region being sent */
  crnet__sched_init(&a, 2, 0);
  crnet__sched_init(&b, 2, 1);
  crnet__sched_round(&a);
  crnet__sched_copy(&a, S, R);
  crnet__sched_round(&a);
  crnet__sched_send(&a, 1, CRNET__BUF_RECV, 0, 2);
  crnet__sched_recv(&a, 1, CRNET__BUF_RECV, 1, 2);
  crnet__sched_round(&b);
  crnet__sched_round(&b);
  crnet__sched_send(&b, 0, CRNET__BUF_SEND, 0, 2);
  crnet__sched_recv(&b, 0, CRNET__BUF_RECV, 0, 2);
  ck_assert_int_eq(sim2(&a, &b, err), CRNET_EIO);
  /* receiving into a region being sent, in a round of many segments
   * (the sorted sweep rather than the pairwise check) */
  for (int bad = 0; bad < 3; bad++) {
    uint64_t r0[100], r1[100];
    crnet__sim_rank big[2] = {{&a, NULL, 0, r0, 100, 0, 100, {0}},
                              {&b, NULL, 0, r1, 100, 0, 100, {0}}};
    for (int e = 0; e < 100; e++)
      r0[e] = r1[e] = (uint64_t)e;
    crnet__sched_init(&a, 2, 0);
    crnet__sched_init(&b, 2, 1);
    crnet__sched_round(&a);
    crnet__sched_round(&b);
    /* send the even elements, receive into the odd ones; bad 1: one
     * receive lands on a sent element; bad 2: a long receive that a later
     * send starts inside */
    for (int i = 0; i < 20; i++)
      crnet__sched_send(&a, 1, CRNET__BUF_SEND, 2 * (uint64_t)i, 1);
    if (bad == 2)
      crnet__sched_send(&a, 1, CRNET__BUF_SEND, 55, 1);
    for (int i = 0; i < 20; i++)
      crnet__sched_recv(&a, 1, CRNET__BUF_RECV,
                        bad == 1 && i == 7 ? 10 : 2 * (uint64_t)i + 1, 1);
    if (bad == 2)
      crnet__sched_recv(&a, 1, CRNET__BUF_RECV, 50, 10);
    crnet__sched_send(&b, 0, CRNET__BUF_SEND, 0, bad == 2 ? 30 : 20);
    crnet__sched_recv(&b, 0, CRNET__BUF_RECV, 50, bad == 2 ? 21 : 20);
    int rc = crnet__sim_run(big, 2, true, false, op_sum, err, sizeof err);
    crnet__sched_free(&a);
    crnet__sched_free(&b);
    if (bad == 0) {
      ck_assert_msg(rc == 0, "many segments, no overlap: %s", err);
    } else {
      ck_assert_int_eq(rc, CRNET_EIO);
      ck_assert_ptr_nonnull(strstr(err, "while sending"));
      ck_assert_ptr_nonnull(strstr(err, bad == 1 ? "RECV[10.." : "RECV[50.."));
    }
  }
  /* a barrier that skips a rank fails the causal check */
  crnet__schedule sc[3];
  crnet__sim_rank rk[3];
  memset(rk, 0, sizeof(rk));
  for (int r = 0; r < 3; r++) {
    crnet__sched_init(&sc[r], 3, r);
    crnet__sched_round(&sc[r]);
    if (r != 2) { /* 0 -> 1 -> 0: rank 2 never heard of */
      crnet__sched_send_peer(&sc[r], 1 - r);
      crnet__sched_recv_peer(&sc[r], 1 - r);
    }
    rk[r].sched = &sc[r];
  }
  ck_assert_int_eq(crnet__sim_run(rk, 3, false, true, op_sum, err, 256),
                   CRNET_EIO);
  for (int r = 0; r < 3; r++)
    crnet__sched_free(&sc[r]);
}
END_TEST

/* The affine operator does detect order: the halving reduce-scatter (which
 * needs commutativity) does not produce the rank-order product for p = 5. */
START_TEST(test_order_detected) {
  int32_t p = 5, sk[5];
  int n = crnet__circulant_skips("circulant", p, sk);
  crnet__schedule sc[5];
  crnet__sim_rank rk[5];
  uint64_t snd[5][5], rcv[5][1];
  memset(rk, 0, sizeof(rk));
  uint64_t cnt[5] = {1, 1, 1, 1, 1};
  for (int32_t r = 0; r < p; r++) {
    ck_assert_int_eq(
        crnet__circulant_reduce_scatter(&sc[r], sk, n, p, r, cnt, false), 0);
    for (int e = 0; e < 5; e++)
      snd[r][e] = sim_value(r, (uint64_t)e, true);
    rk[r] = (crnet__sim_rank){&sc[r], snd[r], 5, rcv[r], 1, 0, 0, {0}};
  }
  char err[256];
  ck_assert_int_eq(crnet__sim_run(rk, p, false, false, op_affine, err, 256),
                   0);
  int wrong = 0;
  for (int32_t r = 0; r < p; r++) {
    uint64_t v = snd[0][r];
    for (int32_t x = 1; x < p; x++)
      v = op_affine(v, snd[x][r]);
    wrong += rcv[r][0] != v;
    crnet__sched_free(&sc[r]);
  }
  ck_assert_int_gt(wrong, 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * Golden dumps: p = 1..7, halving skips, 2p+1 elements (irregular blocks),
 * not in place and in place.
 */

static void golden(enum coll coll) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  for (int32_t p = 1; p <= 7; p++)
    for (int ip = 0; ip < 2; ip++)
      for (int32_t r = 0; r < p; r++) {
        int32_t sk[7];
        uint64_t cnt[7], off;
        int n = crnet__circulant_skips("circulant", p, sk);
        for (int32_t b = 0; b < p; b++)
          crnet__block_range(2 * (uint64_t)p + 1, p, b, &off, &cnt[b]);
        crnet__schedule sc;
        int rc =
            coll == RS
                ? crnet__circulant_reduce_scatter(&sc, sk, n, p, r, cnt, ip)
                : crnet__circulant_allreduce(&sc, sk, n, p, r,
                                             2 * (uint64_t)p + 1, ip);
        ck_assert_int_eq(rc, 0);
        fprintf(f, "== %s p=%d in_place=%d ", coll_name[coll], p, ip);
        crnet__sched_dump(&sc, f);
        crnet__sched_free(&sc);
      }
  fclose(f);
  const char *dir = getenv("CRNET_GOLDEN_DIR");
  ck_assert_msg(dir != NULL, "CRNET_GOLDEN_DIR is not set");
  char path[4096];
  snprintf(path, sizeof(path), "%s/circulant-%s.txt", dir, coll_name[coll]);
  const char *upd = getenv("CRNET_UPDATE_GOLDEN");
  if (upd != NULL && strcmp(upd, "1") == 0) {
    FILE *o = fopen(path, "w");
    ck_assert_msg(o != NULL, "cannot write %s", path);
    fwrite(text, 1, len, o);
    fclose(o);
  }
  FILE *g = fopen(path, "r");
  ck_assert_msg(g != NULL, "missing golden file %s", path);
  char *want = malloc(len + 2);
  size_t got = fread(want, 1, len + 1, g);
  fclose(g);
  ck_assert_msg(got == len && memcmp(want, text, len) == 0,
                "%s differs from the builder's output (run with "
                "CRNET_UPDATE_GOLDEN=1 if the change is intended)",
                path);
  free(want);
  free(text);
}

START_TEST(test_golden_rs) { golden(RS); }
END_TEST
START_TEST(test_golden_ar) { golden(AR); }
END_TEST

int main(void) {
  const char *q = getenv("CRNET_SIM_QUICK");
  quick = q != NULL && strcmp(q, "1") == 0;
  Suite *s = suite_create("sim");
  TCase *tc = tcase_create("circulant");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_skips);
  tcase_add_test(tc, test_sim_rejects);
  tcase_add_test(tc, test_select_builds);
  tcase_add_test(tc, test_order_detected);
  tcase_add_test(tc, test_golden_rs);
  tcase_add_test(tc, test_golden_ar);
  tcase_add_test(tc, test_reduce_scatter);
  tcase_add_test(tc, test_allreduce);
  tcase_add_test(tc, test_allgather);
  tcase_add_test(tc, test_reduce);
  tcase_add_test(tc, test_bcast);
  tcase_add_test(tc, test_barrier);
  tcase_add_test(tc, test_allreduce_gather);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  /* No fork, so the case counter below sees every test's cases. */
  srunner_set_fork_status(sr, CK_NOFORK);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  srunner_run_all(sr, CK_NORMAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("simulated %ld collectives in %.1f s%s\n", cases,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         quick ? " (CRNET_SIM_QUICK)" : "");
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
