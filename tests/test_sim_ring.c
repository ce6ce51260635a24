/* Simulator tests for the ring family (src/schedules/ring.c: reduce-
 * scatter, allgather, bcast, reduce, allreduce) and the all-to-all builders
 * (src/schedules/alltoall.c: pairwise, ring, bruck): every builder x p in
 * 1..64, 100, 127, 128, 129, 255, 256, 720, 1000 x count shapes x in place or
 * not, run in the in-memory simulator and compared exactly with a serial
 * reference, with the rounds and volumes of the comment blocks asserted.
 *
 * All-to-all elements encode (source rank, destination rank, index), so a
 * block landing in the wrong place, or from the wrong rank, is named.
 * The reductions use sum mod 2^64: the ring reduces in ring order and is
 * documented as commutative only.
 *
 * Counts shrink as p grows (the ring all-to-all moves p^2(p-1)/2 blocks,
 * so it stops at p = 256), and p = 720 and 1000 run a few shapes only
 * (one element, p+1 elements, random blocks; the middle root), to keep the
 * test within a minute under the sanitizers.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "check_main.h"
#include "crnet.h"
#include "hypercube.h"
#include "ring.h"
#include "schedule.h"
#include "sim.h"
#include "sim_ops.h"

static long cases;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

static uint64_t value(int32_t rank, uint64_t e) {
  return mix((uint64_t)rank << 40 ^ e ^ UINT64_C(0x5eed));
}

/* All-to-all element e of the block from src to dst. */
static uint64_t enc(int32_t src, int32_t dst, uint64_t e) {
  return UINT64_C(1) << 63 | (uint64_t)src << 44 | (uint64_t)dst << 28 | e;
}

static const int32_t ps[] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,  12,  13,  14,  15,  16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,  28,  29,  30,  31,  32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,  44,  45,  46,  47,  48,
    49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,  60,  61,  62,  63,  64,
    100, 127, 128, 129, 255, 256, 720, 1000};
#define NPS (sizeof(ps) / sizeof(ps[0]))

/* CRNET_SIM_QUICK=1 (the sanitizer pass of the test suite) leaves out the
 * largest p, whose cases are the same builders at a size where a
 * sanitizer's slowdown costs minutes. */
static bool quick;
static bool skipped_p(int32_t p) { return quick && p > 129; }

enum coll { RS, AG, AR, RED, BC, PW, A2R, BRK, HC, HBC };
static const char *coll_name[] = {"ring-reduce-scatter", "ring-allgather",
                                  "ring-allreduce",      "ring-reduce",
                                  "ring-bcast",          "alltoall-pairwise",
                                  "alltoall-ring",       "alltoall-bruck",
                                  "alltoall-hypercube",  "hypercube-bcast"};

typedef struct kase {
  enum coll coll;
  int32_t p;
  const uint64_t *counts; /* RS, AG: p blocks; else NULL and `count` */
  uint64_t count;         /* all-to-all: elements per block */
  bool in_place;
  int32_t root;
  int32_t pieces; /* BC: the chain's pieces; 0: p */
} kase;

static bool is_a2a(enum coll c) { return c >= PW && c <= HC; }

static void run(const kase *k) {
  int32_t p = k->p;
  bool a2a = is_a2a(k->coll);
  char what[200];
  int32_t pieces = k->pieces > 0 ? k->pieces : (p > 0 ? p : 1);
  snprintf(what, sizeof(what),
           "%s p=%d count=%llu%s in_place=%d root=%d pieces=%d",
           coll_name[k->coll], p, (unsigned long long)k->count,
           k->counts ? " (blocks)" : "", k->in_place, k->root, (int)pieces);
  uint64_t *cnt = malloc((size_t)p * sizeof(*cnt));
  uint64_t *P = malloc(((size_t)p + 1) * sizeof(*P));
  crnet__schedule *sc = calloc((size_t)p, sizeof(*sc));
  crnet__sim_rank *rk = calloc((size_t)p, sizeof(*rk));
  EXPECT(cnt && P && sc && rk, "out of memory");
  P[0] = 0;
  for (int32_t b = 0; b < p; b++) {
    uint64_t off;
    if (k->counts)
      cnt[b] = k->counts[b];
    else if (a2a)
      cnt[b] = k->count;
    else
      crnet__block_range(k->count, p, b, &off, &cnt[b]);
    P[b + 1] = P[b] + cnt[b];
  }
  uint64_t m = P[p];

  for (int32_t r = 0; r < p; r++) {
    int rc = 0;
    switch (k->coll) {
    case RS:
      rc = crnet__ring_reduce_scatter(&sc[r], p, r, cnt, k->in_place);
      break;
    case AG:
      rc = crnet__ring_allgather(&sc[r], p, r, cnt, k->in_place);
      break;
    case AR:
      rc = crnet__ring_allreduce(&sc[r], p, r, m, k->in_place);
      break;
    case RED:
      rc = crnet__ring_reduce(&sc[r], p, r, m, k->root, k->in_place);
      break;
    case BC:
      rc = crnet__ring_bcast(&sc[r], p, r, m, k->root, pieces);
      break;
    case HBC:
      rc = crnet__hypercube_bcast(&sc[r], p, r, m, k->root);
      break;
    case PW:
      rc = crnet__pairwise_alltoall(&sc[r], p, r, k->count, k->in_place);
      break;
    case A2R:
      rc = crnet__ring_alltoall(&sc[r], p, r, k->count, k->in_place);
      break;
    case BRK:
      rc = crnet__bruck_alltoall(&sc[r], p, r, k->count, k->in_place);
      break;
    case HC:
      rc = crnet__hypercube_alltoall(&sc[r], p, r, k->count, k->in_place);
      break;
    }
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    uint64_t sn = 0, rn = 0, ioff = 0, in = 0;
    switch (k->coll) {
    case RS:
      sn = m;
      rn = k->in_place ? m : cnt[r];
      break;
    case AG:
      sn = cnt[r];
      rn = m;
      break;
    case AR:
      sn = rn = m;
      break;
    case RED:
      sn = m;
      rn = r == k->root || k->in_place ? m : 0;
      break;
    case BC:
    case HBC:
      rn = m;
      break;
    case PW:
    case A2R:
    case BRK:
    case HC:
      sn = rn = m;
      break;
    }
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof(uint64_t));
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof(uint64_t));
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = UINT64_C(0xdeadbeefdeadbeef);
    for (uint64_t e = 0; e < sn; e++)
      snd[e] = k->coll == AG ? value(r, P[r] + e)
               : a2a ? enc(r, (int32_t)(e / k->count), e % k->count)
                     : value(r, e);
    if (k->in_place && k->coll != BC && k->coll != HBC) {
      ioff = k->coll == AG ? P[r] : 0;
      memcpy(rcv + ioff, snd, sn * sizeof(uint64_t));
      in = sn;
    }
    if ((k->coll == BC || k->coll == HBC) && r == k->root) {
      for (uint64_t e = 0; e < m; e++)
        rcv[e] = value(r, e);
      in = m;
    }
    q->sched = &sc[r];
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
    q->init_off = ioff;
    q->init_count = in;
  }

  char err[512] = "";
  int rc = crnet__sim_run(rk, p, k->in_place, false, op_sum, err,
                          sizeof(err));
  EXPECT(rc == 0, "%s: %s", what, err);

  uint64_t *ref = malloc((m ? m : 1) * sizeof(uint64_t));
  EXPECT(ref, "out of memory");
  if (k->coll == RS || k->coll == AR || k->coll == RED)
    for (uint64_t e = 0; e < m; e++) {
      uint64_t v = 0;
      for (int32_t x = 0; x < p; x++)
        v += value(x, e);
      ref[e] = v;
    }
  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    switch (k->coll) {
    case RS:
      for (uint64_t e = 0; e < cnt[r]; e++)
        EXPECT(o[e] == ref[P[r] + e], "%s: rank %d element %llu", what, r,
               (unsigned long long)e);
      break;
    case AR:
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
          EXPECT(o[P[b] + e] == value(b, P[b] + e),
                 "%s: rank %d block %d element %llu", what, r, b,
                 (unsigned long long)e);
      break;
    case BC:
    case HBC:
      for (uint64_t e = 0; e < m; e++)
        EXPECT(o[e] == value(k->root, e), "%s: rank %d element %llu", what,
               r, (unsigned long long)e);
      break;
    case PW:
    case A2R:
    case BRK:
    case HC:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < k->count; e++) {
          uint64_t v = o[(uint64_t)b * k->count + e];
          EXPECT(v == enc(b, r, e),
                 "%s: rank %d block %d element %llu holds src %d dst %d "
                 "index %llu",
                 what, r, b, (unsigned long long)e, (int)(v >> 44 & 0x7ffff),
                 (int)(v >> 28 & 0xffff),
                 (unsigned long long)(v & 0xfffffff));
        }
      break;
    }
  }

  /* rounds and volumes, as in the comment blocks */
  bool equal = true;
  for (int32_t b = 0; b < p; b++)
    equal = equal && cnt[b] == cnt[0];
  uint64_t pm1 = (uint64_t)p - 1, bruck_blocks = 0;
  for (int32_t bit = 1; bit < p; bit <<= 1)
    for (int32_t i = 1; i < p; i++)
      bruck_blocks += (i & bit) != 0;
  uint64_t nb = m < (uint64_t)pieces ? m : (uint64_t)pieces;
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    const crnet__schedule *h = &sc[r];
    int32_t prv = (r + p - 1) % p, nxt = (r + 1) % p;
#define ST(c) (unsigned long long)(c)
#define STATS                                                                  \
  "%s: rank %d rounds %llu/%u sent %llu recv %llu reduced %llu", what, r,      \
      ST(s->comm_rounds), h->nrounds, ST(s->elems_sent), ST(s->elems_recv),    \
      ST(s->elems_reduced)
    switch (k->coll) {
    case RS:
      EXPECT(s->comm_rounds == pm1 && s->elems_sent == m - cnt[r] &&
                 s->elems_recv == m - cnt[prv] &&
                 s->elems_reduced == m - cnt[prv],
             STATS);
      if (equal)
        EXPECT(s->elems_sent == pm1 * (m / (uint64_t)p), STATS);
      /* one final copy, only in place and only if block r is not at 0 */
      EXPECT(s->elems_copied == (k->in_place ? (P[r] ? cnt[r] : 0)
                                 : p == 1    ? cnt[r]
                                             : 0),
             STATS);
      if (p > 1) {
        uint64_t B = 0;
        for (int32_t b = 0; b < p; b++)
          B = cnt[b] > B ? cnt[b] : B;
        EXPECT(h->temp_count == (k->in_place ? B : 2 * B), STATS);
      }
      break;
    case AG:
      EXPECT(s->comm_rounds == pm1 && s->elems_recv == m - cnt[r] &&
                 s->elems_copied == (k->in_place ? 0 : cnt[r]) &&
                 h->temp_count == 0,
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
                   s->elems_reduced == m - cnt[prv] && s->elems_sent == m - cnt[r],
               STATS);
      else
        EXPECT(s->elems_reduced == m - cnt[prv], STATS);
      EXPECT(h->nrounds == (p > 1 ? 2 * pm1 : k->in_place ? 0 : 1), STATS);
      break;
    case BC:
      EXPECT(h->nrounds == (p == 1 || m == 0 ? 0 : nb + pm1 - 1), STATS);
      EXPECT(s->elems_recv == (r == k->root ? 0 : m), STATS);
      EXPECT(s->elems_sent == (r == (k->root + p - 1) % p ? 0 : m), STATS);
      break;
    case HBC: {
      /* the binomial tree: L rounds; v receives once and sends to every
       * v + 2^k < p with 2^k > v */
      int64_t v = ((int64_t)r - k->root + p) % p;
      uint64_t children = 0;
      int L = 0;
      while ((INT64_C(1) << L) < p)
        L++;
      for (int b = 0; b < L; b++)
        children += v < (INT64_C(1) << b) && v + (INT64_C(1) << b) < p;
      EXPECT(h->nrounds == (p == 1 || m == 0 ? 0 : (uint32_t)L), STATS);
      EXPECT(s->elems_recv == (r == k->root || m == 0 ? 0 : m), STATS);
      EXPECT(s->elems_sent == children * m, STATS);
      EXPECT(h->temp_count == 0, STATS);
      break;
    }
    case PW:
      EXPECT(h->temp_count == (k->in_place && p > 1 ? k->count : 0), STATS);
      EXPECT(s->comm_rounds == pm1 && s->elems_sent == pm1 * k->count &&
                 s->elems_recv == pm1 * k->count,
             STATS);
      EXPECT(h->nrounds == (k->in_place && p % 2 && p > 1 ? (uint64_t)p
                            : p == 1 && k->in_place ? 0
                            : p == 1                ? 1
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
                 (p > 1 ? (k->in_place ? 3 : 2) * (uint64_t)p * k->count : 0),
             STATS);
      EXPECT(s->comm_rounds == (uint64_t)crnet__ceil_log2(p) &&
                 s->elems_sent == bruck_blocks * k->count &&
                 s->elems_recv == s->elems_sent,
             STATS);
      if (k->coll == HC)
        EXPECT(s->elems_sent ==
                   (uint64_t)crnet__ceil_log2(p) * (uint64_t)p / 2 * k->count,
               STATS);
      break;
    }
  }

  for (int32_t r = 0; r < p; r++) {
    free((void *)rk[r].send);
    free(rk[r].recv);
    crnet__sched_free(&sc[r]);
  }
  free(ref);
  free(rk);
  free(sc);
  free(P);
  free(cnt);
  cases++;
}

/* A large odd count, smaller for large p. */
static uint64_t big(int32_t p) { return p <= 16 ? 4099 : p <= 64 ? 1031 : 515; }

/* Block shapes for reduce-scatter and allgather: regular splits of totals
 * 0, 1, p-1, p, p+1 and a large odd one; random with zeros; all in one
 * block; ascending. */
static void matrix_blocks(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    if (skipped_p(p))
      continue;
    uint64_t *counts = malloc((size_t)p * sizeof(*counts));
    uint64_t totals[] = {0, 1, (uint64_t)p - 1, (uint64_t)p, (uint64_t)p + 1,
                         big(p)};
    for (int shape = 0; shape < 9; shape++) {
      if (p > 256 && shape != 1 && shape != 4 && shape != 6)
        continue; /* p = 720, 1000: one element, p+1, random blocks */
      for (int32_t b = 0; b < p; b++) {
        uint64_t off;
        if (shape < 6)
          crnet__block_range(totals[shape], p, b, &off, &counts[b]);
        else if (shape == 6)
          counts[b] = rnd(3) ? rnd(2 * big(p) / (uint64_t)p + 2) : 0;
        else if (shape == 7)
          counts[b] = b == p / 2 ? big(p) : 0;
        else
          counts[b] = (uint64_t)b % 7;
      }
      uint64_t m = 0;
      for (int32_t b = 0; b < p; b++)
        m += counts[b];
      for (int ip = 0; ip < 2; ip++) {
        kase k = {c, p, counts, m, ip == 1, 0, 0};
        run(&k);
      }
    }
    free(counts);
  }
}

static void matrix_count(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    if (skipped_p(p))
      continue;
    uint64_t counts[] = {0, 1, (uint64_t)p - 1, (uint64_t)p, (uint64_t)p + 1,
                         big(p)};
    int32_t roots[] = {0, p / 2, p - 1};
    for (int ci = 0; ci < 6; ci++)
      for (int ri = 0; ri < 3; ri++)
        for (int ip = 0; ip < 2; ip++) {
          if ((ri > 0 && roots[ri] == roots[ri - 1]) ||
              (c != RED && c != BC && c != HBC && ri > 0) ||
              ((c == BC || c == HBC) && ip))
            continue;
          /* p = 720, 1000: counts 1 and p+1, the middle root */
          if (p > 256 && ((ci != 1 && ci != 4) || (ri != 0 && ri != 1) ||
                          ((c == RED || c == BC || c == HBC) && ri != 1)))
            continue;
          /* the chain in p pieces (0), in fewer and in more */
          int32_t pieces[] = {0, 1, 2, 7, 3 * p + 1};
          for (int pi2 = 0; pi2 < (c == BC ? (p > 256 ? 4 : 5) : 1); pi2++) {
            kase k = {c, p, NULL, counts[ci], ip == 1, roots[ri],
                      pieces[pi2]};
            run(&k);
          }
        }
  }
}

/* All-to-all: count elements per block; p·count per rank and the ring
 * moves p^2(p-1)/2 blocks in all, so the counts shrink with p. */
static void matrix_a2a(enum coll c) {
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    if (skipped_p(p))
      continue;
    uint64_t small[] = {0, 1, 2, (uint64_t)p - 1, (uint64_t)p,
                        (uint64_t)p + 1, 37};
    uint64_t large[] = {0, 1, 3};
    const uint64_t *counts = p <= 64 ? small : large;
    int n = p <= 64 ? 7 : 3;
    if (c == HC && (p & (p - 1)) != 0)
      continue;
    /* the ring all-to-all moves p^2(p-1)/2 blocks: at p = 720 and 1000
     * that is 10^8..10^9 element moves per case, too slow for CI; it is
     * the same builder as at p = 256 */
    if (c == A2R && p > 256)
      continue;
    for (int ci = 0; ci < n; ci++)
      for (int ip = 0; ip < 2; ip++) {
        kase k = {c, p, NULL, counts[ci], ip == 1, 0, 0};
        run(&k);
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
START_TEST(test_hc_bcast) { matrix_count(HBC); }
END_TEST
START_TEST(test_pairwise) { matrix_a2a(PW); }
END_TEST
START_TEST(test_a2a_ring) { matrix_a2a(A2R); }
END_TEST
START_TEST(test_bruck) { matrix_a2a(BRK); }
END_TEST
START_TEST(test_hypercube) { matrix_a2a(HC); }
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
  const char *q = getenv("CRNET_SIM_QUICK");
  quick = q != NULL && strcmp(q, "1") == 0;
  Suite *s = suite_create("sim-ring");
  TCase *tc = tcase_create("ring");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_reduce_scatter);
  tcase_add_test(tc, test_allgather);
  tcase_add_test(tc, test_allreduce);
  tcase_add_test(tc, test_reduce);
  tcase_add_test(tc, test_bcast);
  tcase_add_test(tc, test_hc_bcast);
  tcase_add_test(tc, test_pairwise);
  tcase_add_test(tc, test_a2a_ring);
  tcase_add_test(tc, test_bruck);
  tcase_add_test(tc, test_hypercube);
  tcase_add_test(tc, test_einval);
  tcase_add_test(tc, test_independent_checked);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld cases\n", cases);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
