/* The claims of the ring family (src/schedules/ring.c: reduce-scatter,
 * allgather, allreduce, reduce, the pipelined chain's bcast) and of the
 * all-to-all builders (alltoall.c: pairwise, ring, bruck; hypercube.c's at
 * powers of two) and the hypercube's binomial bcast: rounds, volumes,
 * copies and TEMP as their comment blocks give them, asserted on every rank
 * at p = 1..64, 100, 127, 128, 129, 255, 256, 720, 1000 over count shapes,
 * in place or not. Each case runs through sim_harness.c, which also checks
 * its result against the serial reference; correctness over every shape,
 * root and operator is test_sim_registry.c's.
 *
 * The chain's bcast runs through crnet__ring_bcast with its pieces given
 * (p, 1, 2, 7, 3p+1), which the row leaves to crnet__chain_pieces.
 *
 * Counts shrink as p grows (the ring all-to-all moves p^2(p-1)/2 blocks,
 * so it stops at p = 256). At p = 720 and 1000 each claim is asserted on
 * two shapes, one not in place and one in place: p elements in equal
 * blocks (where the volume claims are exact) and random blocks with empty
 * ones; counts p+1 and 1; one and three elements per all-to-all block; the
 * chain in p and in 7 pieces. Every other shape is the same code at every
 * p to 256.
 * CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety) runs the p of
 * sim_quick_ps (sim_harness.h: every branch the builders take on p) with
 * every shape.
 */
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "check_main.h"
#include "ring.h"
#include "sim_harness.h"

static long cases;

enum coll { RS, AG, AR, RED, BC, HBC, PW, A2R, BRK, HC };
static const struct {
  const char *row;
  crnet_collective coll;
} of[] = {
    {"ring", CRNET_COLL_REDUCE_SCATTER}, {"ring", CRNET_COLL_ALLGATHER},
    {"ring", CRNET_COLL_ALLREDUCE},      {"ring", CRNET_COLL_REDUCE},
    {"ring", CRNET_COLL_BCAST},          {"hypercube", CRNET_COLL_BCAST},
    {"pairwise", CRNET_COLL_ALLTOALL},   {"ring", CRNET_COLL_ALLTOALL},
    {"bruck", CRNET_COLL_ALLTOALL},      {"hypercube", CRNET_COLL_ALLTOALL}};

/* The chain's bcast in `*arg` pieces (0: p). */
static int chain_build(const crnet__call *c, crnet__schedule *out,
                       const void *arg) {
  int32_t pieces = *(const int32_t *)arg;
  return crnet__ring_bcast(out, c->p, c->rank, c->count, c->root,
                           pieces > 0 ? pieces : c->p);
}

#define ST(c) (unsigned long long)(c)
#define STATS                                                                  \
  "%s: rank %d rounds %llu/%u sent %llu recv %llu reduced %llu", k->what, r,   \
      ST(s->comm_rounds), h->nrounds, ST(s->elems_sent), ST(s->elems_recv),    \
      ST(s->elems_reduced)

/* Rounds and volumes, as in the comment blocks. */
static void claims(const sim_case *k, const sim_result *res, void *arg) {
  enum coll c = *(const enum coll *)arg;
  int32_t p = k->p;
  uint64_t m = res->m, pm1 = (uint64_t)p - 1, bruck_blocks = 0;
  uint64_t *cnt = malloc((size_t)p * sizeof *cnt);
  bool equal = true, ip = k->in_place == SIM_IN_PLACE;
  int32_t pieces = k->build_arg ? *(const int32_t *)k->build_arg : 0;
  uint64_t nb = pieces > 0 ? (uint64_t)pieces : (uint64_t)p;
  EXPECT(cnt, "out of memory");
  for (int32_t b = 0; b < p; b++)
    cnt[b] = k->counts != NULL ? k->counts[b] : 0;
  if (k->counts == NULL && c != PW && c != A2R && c != BRK && c != HC)
    sim_split(m, p, cnt);
  for (int32_t b = 0; b < p; b++)
    equal = equal && cnt[b] == cnt[0];
  for (int32_t bit = 1; bit < p; bit <<= 1)
    for (int32_t i = 1; i < p; i++)
      bruck_blocks += (i & bit) != 0;
  nb = m < nb ? m : nb;
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &res->rk[r].stats;
    const crnet__schedule *h = &res->sc[r];
    int32_t prv = (r + p - 1) % p, nxt = (r + 1) % p;
    uint64_t B = 0;
    int64_t v = ((int64_t)r - k->root + p) % p, children = 0;
    int L = crnet__ceil_log2(p);
    switch (c) {
    case RS:
      EXPECT(s->comm_rounds == pm1 && s->elems_sent == m - cnt[r] &&
                 s->elems_recv == m - cnt[prv] &&
                 s->elems_reduced == m - cnt[prv],
             STATS);
      if (equal)
        EXPECT(s->elems_sent == pm1 * (m / (uint64_t)p), STATS);
      /* one final copy, only in place and only if block r is not at 0 */
      EXPECT(s->elems_copied == (ip       ? (res->P[r] ? cnt[r] : 0)
                                 : p == 1 ? cnt[r]
                                          : 0),
             STATS);
      for (int32_t b = 0; b < p; b++)
        B = cnt[b] > B ? cnt[b] : B;
      EXPECT(p == 1 || h->temp_count == (ip ? B : 2 * B), STATS);
      break;
    case AG:
      EXPECT(s->comm_rounds == pm1 && s->elems_recv == m - cnt[r] &&
                 s->elems_copied == (ip ? 0 : cnt[r]) && h->temp_count == 0,
             STATS);
      break;
    case AR:
      EXPECT(s->comm_rounds == 2 * pm1 && s->elems_reduced == m - cnt[r] &&
                 s->elems_recv == 2 * m - cnt[r] - cnt[nxt],
             STATS);
      break;
    case RED:
      if (r == k->root)
        EXPECT(s->comm_rounds == 2 * pm1 &&
                   s->elems_recv == 2 * m - cnt[r] - cnt[prv] &&
                   s->elems_reduced == m - cnt[prv] &&
                   s->elems_sent == m - cnt[r],
               STATS);
      else
        EXPECT(s->elems_reduced == m - cnt[prv], STATS);
      EXPECT(h->nrounds == (p > 1 ? 2 * pm1 : ip ? 0 : 1), STATS);
      break;
    case BC:
      EXPECT(h->nrounds == (p == 1 || m == 0 ? 0 : nb + pm1 - 1), STATS);
      EXPECT(s->elems_recv == (r == k->root ? 0 : m), STATS);
      EXPECT(s->elems_sent == (r == (k->root + p - 1) % p ? 0 : m), STATS);
      break;
    case HBC:
      /* the binomial tree: L rounds; v receives once and sends to every
       * v + 2^k < p with 2^k > v */
      for (int b = 0; b < L; b++)
        children += v < (INT64_C(1) << b) && v + (INT64_C(1) << b) < p;
      EXPECT(h->nrounds == (p == 1 || m == 0 ? 0 : (uint32_t)L), STATS);
      EXPECT(s->elems_recv == (r == k->root || m == 0 ? 0 : m), STATS);
      EXPECT(s->elems_sent == (uint64_t)children * m, STATS);
      EXPECT(h->temp_count == 0, STATS);
      break;
    case PW:
      EXPECT(h->temp_count == (ip && p > 1 ? k->count : 0), STATS);
      EXPECT(s->comm_rounds == pm1 && s->elems_sent == pm1 * k->count &&
                 s->elems_recv == pm1 * k->count,
             STATS);
      EXPECT(h->nrounds == (ip && p % 2 && p > 1 ? (uint64_t)p
                            : p == 1 && ip       ? 0
                            : p == 1             ? 1
                                                 : pm1),
             STATS);
      break;
    case A2R:
      EXPECT(h->temp_count == (p > 1 ? 2 * pm1 * k->count : 0), STATS);
      EXPECT(s->comm_rounds == pm1 &&
                 s->elems_sent == k->count * (uint64_t)p * pm1 / 2 &&
                 s->elems_recv == s->elems_sent,
             STATS);
      break;
    case BRK:
    case HC:
      EXPECT(h->temp_count ==
                 (p > 1 ? (ip ? 3 : 2) * (uint64_t)p * k->count : 0),
             STATS);
      EXPECT(s->comm_rounds == (uint64_t)L &&
                 s->elems_sent == bruck_blocks * k->count &&
                 s->elems_recv == s->elems_sent,
             STATS);
      EXPECT(c != HC ||
                 s->elems_sent == (uint64_t)L * (uint64_t)p / 2 * k->count,
             STATS);
      break;
    }
  }
  free(cnt);
}

static void run(enum coll c, int32_t p, const uint64_t *counts, uint64_t count,
                bool ip, int32_t root, const int32_t *pieces) {
  sim_case k = {.row = of[c].row,
                .coll = of[c].coll,
                .p = p,
                .count = count,
                .counts = counts,
                .root = root,
                .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE,
                .build = pieces != NULL ? chain_build : NULL,
                .build_arg = pieces};
  sim_describe(&k, pieces != NULL ? "given pieces" : NULL);
  sim_run(&k, claims, &c);
  cases++;
}

static const int32_t ps[] = {
    1,  2,  3,  4,  5,   6,   7,   8,   9,   10,  11,  12,  13, 14, 15,
    16, 17, 18, 19, 20,  21,  22,  23,  24,  25,  26,  27,  28, 29, 30,
    31, 32, 33, 34, 35,  36,  37,  38,  39,  40,  41,  42,  43, 44, 45,
    46, 47, 48, 49, 50,  51,  52,  53,  54,  55,  56,  57,  58, 59, 60,
    61, 62, 63, 64, 100, 127, 128, 129, 255, 256, 720, 1000};
#define NPS (sizeof(ps) / sizeof(ps[0]))

/* CRNET_SIM_QUICK=1 (the sanitizer pass) runs sim_quick_ps only: the
 * same builders, every branch they take on p, at sizes a sanitizer's
 * slowdown does not make minutes of. */
static bool quick;
static bool skipped_p(int32_t p) { return quick && !sim_quick_p(p); }

/* A large odd count, smaller for large p. */
static uint64_t big(int32_t p) { return p <= 16 ? 4099 : p <= 64 ? 1031 : 515; }

/* Block shapes: regular splits of totals 0, 1, p-1, p, p+1 and a large odd
 * one; random with zeros; all in one block; ascending. */
static void matrix_blocks(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    uint64_t *counts = malloc((size_t)p * sizeof(*counts)), m = 0;
    uint64_t totals[] = {
        0, 1, (uint64_t)p - 1, (uint64_t)p, (uint64_t)p + 1, big(p)};
    EXPECT(counts, "out of memory");
    for (int shape = 0; shape < 9 && !skipped_p(p); shape++, m = 0) {
      /* p = 720, 1000: p elements (equal blocks: the volume claims) not in
       * place, random blocks with empty ones in place */
      if (p > 256 && shape != 3 && shape != 6)
        continue;
      if (shape < 6)
        sim_split(totals[shape], p, counts);
      for (int32_t b = 0; b < p; b++) {
        if (shape == 6)
          counts[b] = rnd(3) ? rnd(2 * big(p) / (uint64_t)p + 2) : 0;
        else if (shape > 6)
          counts[b] = shape == 7 ? (b == p / 2 ? big(p) : 0) : (uint64_t)b % 7;
        m += counts[b];
      }
      for (int ip = 0; ip < 2; ip++)
        if (p <= 256 || ip == (shape == 6))
          run(c, p, counts, m, ip, 0, NULL);
    }
    free(counts);
  }
}

static void matrix_count(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    uint64_t counts[] = {
        0, 1, (uint64_t)p - 1, (uint64_t)p, (uint64_t)p + 1, big(p)};
    int32_t roots[] = {0, p / 2, p - 1};
    /* the chain in p pieces (0), in fewer and in more */
    int32_t pieces[] = {0, 1, 2, 7, 3 * p + 1};
    bool rooted = c == RED || c == BC || c == HBC;
    for (int ci = 0; ci < 6 && !skipped_p(p); ci++)
      for (int ri = 0; ri < (rooted ? 3 : 1); ri++)
        for (int ip = 0; ip < (c == BC || c == HBC ? 1 : 2); ip++) {
          if (ri > 0 && roots[ri] == roots[ri - 1])
            continue;
          /* p = 720, 1000: counts p+1 not in place and 1 in place (bcast:
           * both not in place), the middle root; the chain in p and in 7
           * pieces */
          if (p > 256 && ((ci != 1 && ci != 4) || (rooted && ri != 1) ||
                          (!rooted && ri != 0) ||
                          (c != BC && c != HBC && ip != (ci == 1))))
            continue;
          for (int pc = 0; pc < (c == BC ? 5 : 1); pc++)
            if (p <= 256 || pc == 0 || pc == 3)
              run(c, p, NULL, counts[ci], ip, roots[ri],
                  c == BC ? &pieces[pc] : NULL);
        }
  }
}

/* All-to-all: count elements per block; p·count per rank and the ring
 * moves p^2(p-1)/2 blocks in all, so the counts shrink with p. */
static void matrix_a2a(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    uint64_t small[] = {0, 1, 2, (uint64_t)p - 1, (uint64_t)p, (uint64_t)p + 1,
                        37};
    uint64_t large[] = {0, 1, 3};
    /* the ring all-to-all at p = 720 and 1000 would be 10^8..10^9 element
     * moves per case, the same builder as at p = 256 */
    if (skipped_p(p) || (c == HC && (p & (p - 1)) != 0) ||
        (c == A2R && p > 256))
      continue;
    for (int ci = 0; ci < (p <= 64 ? 7 : 3); ci++)
      for (int ip = 0; ip < 2; ip++)
        /* p = 720, 1000: one element per block not in place, three in
         * place */
        if (p <= 256 || (ci > 0 && ip == (ci == 2)))
          run(c, p, NULL, p <= 64 ? small[ci] : large[ci], ip, 0, NULL);
  }
}

START_TEST(test_blocks) { matrix_blocks(_i == 0 ? RS : AG); }
END_TEST
START_TEST(test_count) { matrix_count((enum coll)(AR + _i)); }
END_TEST
START_TEST(test_a2a) { matrix_a2a((enum coll)(PW + _i)); }
END_TEST

/* Misuse: CRNET_EINVAL, and nothing to free. */
START_TEST(test_einval) {
  crnet__schedule s;
  uint64_t counts[3] = {1, 2, 3};
  ck_assert_int_eq(crnet__ring_reduce_scatter(&s, 0, 0, counts, false),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_reduce_scatter(&s, 3, 3, counts, false),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_allgather(&s, 3, -1, counts, true),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_allgather(&s, 3, 0, NULL, true), CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_bcast(&s, 3, 0, 5, 3, 3), CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_bcast(&s, 3, 0, 5, 0, 0), CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_reduce(&s, 3, 0, 5, -1, false), CRNET_EINVAL);
  ck_assert_int_eq(crnet__pairwise_alltoall(&s, 3, 5, 1, false), CRNET_EINVAL);
  ck_assert_int_eq(crnet__ring_alltoall(&s, 0, 0, 1, false), CRNET_EINVAL);
  ck_assert_int_eq(crnet__bruck_alltoall(&s, 4, 0, UINT64_MAX / 2, false),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__hypercube_alltoall(&s, 6, 0, 1, false), CRNET_EINVAL);
  ck_assert_int_eq(crnet__hypercube_alltoall(&s, 8, 0, 1, false), 0);
  crnet__sched_free(&s);
}
END_TEST

/* The simulator refuses a round wrongly marked independent: hand-built
 * two-round schedules over p ranks, round k sending SEND element k to
 * r+1+k and receiving RECV element k from r-1-k, round 1 marked. `bad`
 * spoils rank 0's round 1: it receives into the element round 0 receives
 * into (0), or sends from it (1); 2 spoils nothing. At p = 2 both rounds
 * receive from the same peer, which is wrong in itself. */
static int marked_pair(int32_t p, int bad, char *err, size_t errlen) {
  crnet__schedule sc[3];
  crnet__sim_rank rk[3];
  uint64_t send[3][2] = {{1, 2}, {3, 4}, {5, 6}}, recv[3][2];
  int rc;
  memset(rk, 0, sizeof rk);
  for (int32_t r = 0; r < p; r++) {
    crnet__sched_init(&sc[r], p, r);
    for (int32_t k = 0; k < 2; k++) {
      uint64_t roff = (uint64_t)k, soff = (uint64_t)k;
      uint8_t sbuf = CRNET__BUF_SEND;
      if (k == 0)
        crnet__sched_round(&sc[r]);
      else
        crnet__sched_round_independent(&sc[r]);
      if (r == 0 && k == 1 && bad == 0)
        roff = 0;
      if (r == 0 && k == 1 && bad == 1) {
        sbuf = CRNET__BUF_RECV;
        soff = 0;
      }
      int32_t to = p == 2 ? 1 - r : (r + 1 + k) % p;
      int32_t from = p == 2 ? 1 - r : ((r - 1 - k) % p + p) % p;
      crnet__sched_send(&sc[r], to, sbuf, soff, 1);
      crnet__sched_recv(&sc[r], from, CRNET__BUF_RECV, roff, 1);
    }
    ck_assert_int_eq(crnet__sched_finish(&sc[r]), 0);
    rk[r].sched = &sc[r];
    rk[r].send = send[r];
    rk[r].send_count = 2;
    rk[r].recv = recv[r];
    rk[r].recv_count = 2;
  }
  rc = crnet__sim_run(rk, p, false, false, op_sum, err, errlen);
  for (int32_t r = 0; r < p; r++)
    crnet__sched_free(&sc[r]);
  return rc;
}

START_TEST(test_independent_checked) {
  char err[256] = "";
  int rc = marked_pair(3, 2, err, sizeof err);
  ck_assert_msg(rc == 0, "%d: %s", rc, err);
  ck_assert_int_eq(marked_pair(3, 0, err, sizeof err), CRNET_EIO);
  ck_assert_msg(strstr(err, "marked independent but receives into RECV") !=
                    NULL,
                "%s", err);
  ck_assert_int_eq(marked_pair(3, 1, err, sizeof err), CRNET_EIO);
  ck_assert_msg(strstr(err, "marked independent but sends from RECV") != NULL,
                "%s", err);
  ck_assert_int_eq(marked_pair(2, 2, err, sizeof err), CRNET_EIO);
  ck_assert_msg(strstr(err, "receives from the same peer") != NULL, "%s", err);
}
END_TEST

int main(void) {
  TCase *tc;
  Suite *s = sim_suite("sim-ring", "ring", &tc);
  int rc;
  quick = sim_quick();
  tcase_add_loop_test(tc, test_blocks, 0, 2);
  tcase_add_loop_test(tc, test_count, 0, 4);
  tcase_add_loop_test(tc, test_a2a, 0, 4);
  tcase_add_test(tc, test_einval);
  tcase_add_test(tc, test_independent_checked);
  rc = sim_check_run(s);
  printf("%ld cases\n", cases);
  return rc;
}
