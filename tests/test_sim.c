/* Simulator tests of the circulant family (src/schedules/circulant.c): the
 * papers' theorems (rounds, blocks sent, received and reduced) asserted for
 * every skip sequence x collective x p = 1..64, 100, 127, 128, 129, 255,
 * 256, 720, 1000 x count shape x in place or not, each case run through
 * sim_harness.c, which also checks its result against the serial
 * reference (test_sim_registry.c has every shape, root and operator at
 * p <= 128); the skip sequences themselves; golden dumps of small
 * schedules; and negative tests showing the simulator rejects broken
 * schedules and the affine operator detects a wrong order.
 *
 * The allreduce by allgather runs here with every skip sequence, through
 * crnet__circulant_allreduce_gather (its row takes the halving skips).
 *
 * Which cases run where. The plain pass: every count shape x in place at
 * every p to 256; at p = 720 and 1000 the theorems on two shapes per
 * collective and sequence (big_p_case: count p, equal non-empty blocks,
 * where every claim applies, not in place; a large odd count or irregular
 * blocks in place): those two p were three quarters of the test's time,
 * and no claim goes unasserted at any p.
 * CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety) runs everything
 * at p = 1, 2, 3, 4, 5, 7, 8, 13, 16, 22, 31, 33, 100: every branch the
 * builders take on p (p = 1 and 2, odd, powers of two, 2^d + 1 and
 * 2^d - 1 around them), the paper's worked example p = 22, and the sqrt
 * sequence's steps of c = 10 at p = 100.
 *
 * Environment: CRNET_SIM_QUICK=1 as above; CRNET_UPDATE_GOLDEN=1 rewrites
 * the golden files; CRNET_GOLDEN_DIR names their directory (set by meson).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "circulant.h"
#include "sim_harness.h"

static const char *seqs[] = {"circulant", "circulant-doubling",
                             "circulant-linear", "circulant-sqrt"};
#define NSEQS 4

static long cases; /* simulated collectives, printed at the end */
static bool quick;

/* ARG: the allreduce by allgather (crnet__circulant_allreduce_gather). */
enum coll { RS, AR, AG, RED, BC, BAR, ARG };
static const char *coll_name[] = {"reduce-scatter",  "allreduce", "allgather",
                                  "reduce",          "bcast",     "barrier",
                                  "allreduce-gather"};
static const crnet_collective coll_of[] = {
    CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_ALLREDUCE, CRNET_COLL_ALLGATHER,
    CRNET_COLL_REDUCE,         CRNET_COLL_BCAST,     CRNET_COLL_BARRIER,
    CRNET_COLL_ALLREDUCE};

/* The allreduce by allgather over skip sequence seqs[*arg]. */
static int gather_build(const crnet__call *c, crnet__schedule *out,
                        const void *arg) {
  int32_t *sk = malloc((size_t)c->p * sizeof *sk);
  int n, rc;
  EXPECT(sk, "out of memory");
  n = crnet__circulant_skips(seqs[*(const int *)arg], c->p, sk);
  rc = n < 0 ? n
             : crnet__circulant_allreduce_gather(out, sk, n, c->p, c->rank,
                                                 c->count, c->in_place);
  free(sk);
  return rc;
}

/* The theorems. Any valid sequence: reduce-scatter sends every block but
 * its own exactly once and reduces every element it receives; with equal
 * blocks that is (p-1) blocks each way. Halving skips: ceil(log2 p) rounds
 * (2x for allreduce), when every block is non-empty. */
static void claims(const sim_case *k, const sim_result *res, void *arg) {
  enum coll coll = *(const enum coll *)arg;
  int32_t p = k->p, *sk = malloc((size_t)p * sizeof *sk);
  int seq = *(const int *)k->build_arg, n;
  uint64_t m = res->m, *cnt = malloc((size_t)p * sizeof *cnt);
  uint64_t blk = (p - 1) * (m / (uint64_t)p), all = (uint64_t)(p - 1) * m;
  bool nonempty = true, equal = true;
  EXPECT(sk && cnt, "out of memory");
  n = crnet__circulant_skips(seqs[seq], p, sk);
  EXPECT(n >= 1 && crnet__circulant_skips_check(sk, n, p) == 0, "%s: skips",
         k->what);
  if (k->counts != NULL)
    memcpy(cnt, k->counts, (size_t)p * sizeof *cnt);
  else
    sim_split(m, p, cnt);
  for (int32_t b = 0; b < p; b++) {
    nonempty = nonempty && cnt[b] > 0;
    equal = equal && cnt[b] == cnt[0];
  }
  if (seq == 0)
    EXPECT(n - 1 == crnet__ceil_log2(p), "%s: rounds", k->what);
  for (int32_t r = 0; r < p && p > 1; r++) {
    const crnet__sim_stats *s = &res->rk[r].stats;
    uint64_t rounds = (uint64_t)n - 1;
    switch (coll) {
    case RS:
      EXPECT(s->elems_sent == m - cnt[r] && s->elems_reduced == s->elems_recv &&
                 (!equal || s->elems_recv == blk) &&
                 (!nonempty || s->comm_rounds == rounds),
             "%s: rank %d", k->what, r);
      break;
    case AR:
      EXPECT(!equal || (s->elems_sent == 2 * blk && s->elems_recv == 2 * blk &&
                        s->elems_reduced == blk),
             "%s: rank %d sent %llu recv %llu reduced %llu", k->what, r,
             (unsigned long long)s->elems_sent,
             (unsigned long long)s->elems_recv,
             (unsigned long long)s->elems_reduced);
      EXPECT(!nonempty || s->comm_rounds == 2 * rounds, "%s: rank %d", k->what,
             r);
      break;
    case ARG:
      /* the allgather's rounds, every other rank's whole vector received
       * once and reduced */
      EXPECT(
          s->elems_recv == all && s->elems_sent == all &&
              s->elems_reduced == all && (m == 0 || s->comm_rounds == rounds),
          "%s: rank %d sent %llu recv %llu reduced %llu", k->what, r,
          (unsigned long long)s->elems_sent, (unsigned long long)s->elems_recv,
          (unsigned long long)s->elems_reduced);
      break;
    case AG:
      EXPECT(s->elems_recv == m - cnt[r] &&
                 (!nonempty || s->comm_rounds == rounds),
             "%s: rank %d", k->what, r);
      break;
    case RED:
      EXPECT(r != k->root || s->elems_recv - s->elems_reduced == m - cnt[r],
             "%s: root gathers %llu", k->what,
             (unsigned long long)(s->elems_recv - s->elems_reduced));
      EXPECT(s->comm_rounds <= 2 * rounds, "%s: rank %d", k->what, r);
      break;
    case BC:
      EXPECT(s->comm_rounds <= 2 * rounds, "%s: rank %d", k->what, r);
      break;
    case BAR:
      EXPECT(s->comm_rounds == rounds && s->elems_sent == 0, "%s: rank %d",
             k->what, r);
      break;
    }
  }
  free(cnt);
  free(sk);
}

static void run(enum coll coll, int seq, int32_t p, const uint64_t *counts,
                uint64_t count, bool ip, int32_t root) {
  bool ordered = seq == 2 || p <= 3; /* test_skips holds it */
  sim_case k = {.row = coll == ARG ? NULL : seqs[seq],
                .build = coll == ARG ? gather_build : NULL,
                .build_arg = &seq,
                .coll = coll_of[coll],
                .p = p,
                .count = count,
                .counts = counts,
                .root = root,
                .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE,
                /* ARG folds in rank order for any skips */
                .affine =
                    coll == ARG ||
                    (ordered && (coll == RS || coll == AR || coll == RED))};
  sim_describe(&k, coll == ARG ? seqs[seq] : NULL);
  sim_run(&k, claims, &coll);
  cases++;
}

/* ------------------------------------------------------------------------
 * The matrix
 */

static const int32_t big_ps[] = {100, 127, 128, 129, 255, 256, 720, 1000};

static int nps(void) { return quick ? 13 : 64 + 8; }
static int32_t ps_at(int i) {
  static const int32_t q[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 22, 31, 33, 100};
  return quick ? q[i] : i < 64 ? i + 1 : big_ps[i - 64];
}

/* At p = 720 and 1000 the theorems are asserted on the shapes that reach
 * every claim, not on each count shape x in place: count p (equal blocks of
 * one element, none empty: the rounds and the p-1 blocks each way) not in
 * place, and the large odd count (t = 5; for the block collectives the
 * random irregular blocks, t = nt) in place. The other shapes are the same
 * builders' code at every p up to 256. */
static bool big_p_case(int32_t p, int t, int nt, bool blocks, bool ip) {
  return p <= 256 || (!ip && t == 3) || (ip && t == (blocks ? nt : 5));
}

/* Collectives that take block counts: regular and irregular. */
static void matrix_blocks(enum coll coll) {
  for (int i = 0; i < nps(); i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6], *c = malloc((size_t)p * sizeof(*c));
    int nt = sim_counts_for(p, 40000, (uint64_t)p + 2, tot);
    EXPECT(c, "out of memory");
    for (int seq = 0; seq < NSEQS; seq++)
      for (int ip = 0; ip < 2; ip++)
        for (int t = 0; t < nt + 4; t++) {
          uint64_t m = 0;
          if (!big_p_case(p, t, nt, true, ip))
            continue;
          if (t < nt)
            sim_split(tot[t], p, c);
          else
            sim_irregular(p, t - nt, 40000, 0, c);
          for (int32_t b = 0; b < p; b++)
            m += c[b];
          run(coll, seq, p, c, m, ip, 0);
        }
    free(c);
  }
}

static void matrix_count(enum coll coll) {
  for (int i = 0; i < nps(); i++) {
    int32_t p = ps_at(i);
    uint64_t tot[6];
    int nt = sim_counts_for(p, 40000, (uint64_t)p + 2, tot);
    int32_t roots[4] = {0, 1 % p, p / 2, p - 1};
    bool rooted = coll == RED || coll == BC;
    for (int seq = 0; seq < NSEQS; seq++) {
      /* The linear sequence has p-1 rounds and its pruned reduce/bcast
       * builders walk all p ranks per round (O(p^2) per rank): beyond
       * p = 256 those two would dominate the runtime, so they stop there. */
      if (p > 256 && seq == 2 && rooted)
        continue;
      for (int ir = 0; ir < (rooted ? 4 : 1); ir++) {
        if (ir > 0 && roots[ir] == roots[ir - 1])
          continue;
        for (int ip = 0; ip < (coll == BC || coll == BAR ? 1 : 2); ip++)
          for (int t = 0; t < (coll == BAR ? 1 : nt); t++) {
            /* other roots: only a few counts each; ARG keeps p·count
             * elements per rank: counts 0 and 1 only beyond p = 64, and
             * beyond 256 count 1 in place and not */
            if ((ir > 0 && t != 0 && t != 4 && t != nt - 1) ||
                (coll == ARG && p > 64 && t > 1) ||
                (coll == ARG && p > 256 && t != 1))
              continue;
            /* p = 720 and 1000: big_p_case's two shapes, at root 0 and
             * (the second) the middle root; bcast and barrier have no in
             * place, so their second is the large count not in place */
            if (coll != ARG && coll != BAR && p > 256 &&
                !(ir == 0 && t == 3 && ip == 0) &&
                !(ir == (rooted ? 2 : 0) && t == 5 &&
                  ip == (coll == BC ? 0 : 1)))
              continue;
            run(coll, seq, p, NULL, tot[t], ip, roots[ir]);
          }
      }
    }
  }
}

START_TEST(test_blocks) { matrix_blocks(_i == 0 ? RS : AG); }
END_TEST
START_TEST(test_count) {
  static const enum coll cs[] = {AR, RED, BC, BAR, ARG};
  matrix_count(cs[_i]);
}
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
  /* EXPECT, not ck_assert, in the loop: Check records every passing
   * assertion */
  for (int32_t p = 1; p <= 2000; p++) {
    for (int q = 0; q < NSEQS; q++) {
      int n = crnet__circulant_skips(seqs[q], p, s);
      EXPECT(crnet__circulant_skips_check(s, n, p) == 0, "%s p=%d: invalid",
             seqs[q], p);
      if (q <= 1)
        EXPECT(n - 1 == crnet__ceil_log2(p), "%s p=%d: %d rounds", seqs[q], p,
               n - 1);
      if (q == 2)
        EXPECT(n - 1 == p - 1, "%s p=%d: %d rounds", seqs[q], p, n - 1);
      if (q == 3) { /* about sqrt(p): at most sqrt(p) + log2(2 sqrt p) + 1 */
        int32_t c = 1;
        while (c * c < p)
          c++;
        EXPECT(n - 1 <= c + crnet__ceil_log2(2 * c) + 1, "%s p=%d: %d rounds",
               seqs[q], p, n - 1);
      }
      EXPECT(crnet__circulant_skips_ordered(s, n) == (q == 2 || p <= 3),
             "%s p=%d: ordered is %d", seqs[q], p,
             (int)crnet__circulant_skips_ordered(s, n));
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
  ck_assert_int_eq(crnet__sim_run(rk, p, false, false, op_affine, err, 256), 0);
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
  TCase *tc;
  Suite *s = sim_suite("sim", "circulant", &tc);
  struct timespec t0, t1;
  int rc;
  quick = sim_quick();
  tcase_add_test(tc, test_skips);
  tcase_add_test(tc, test_sim_rejects);
  tcase_add_test(tc, test_order_detected);
  tcase_add_test(tc, test_golden_rs);
  tcase_add_test(tc, test_golden_ar);
  tcase_add_loop_test(tc, test_blocks, 0, 2);
  tcase_add_loop_test(tc, test_count, 0, 5);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rc = sim_check_run(s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("simulated %ld collectives in %.1f s%s\n", cases,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         quick ? " (CRNET_SIM_QUICK)" : "");
  return rc;
}
