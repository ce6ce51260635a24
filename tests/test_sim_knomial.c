/* Simulator tests for the k-nomial trees (src/collectives/knomial.c), at
 * every radix k = 2..8, not only the one the model picks: bcast, reduce
 * (every root, in place or not), allreduce (in place or not) and barrier x
 * p = 1..64 x counts 0, 1, 5 (and 1001 at a few p), run in the simulator
 * and compared with a serial rank-order reference, the reductions with the
 * non-commutative affine maps of sim_ops.h. Beside the results, the tree's
 * claims:
 *
 *   - depth: no rank is more than L = ceil(log_k p) hops from the root,
 *     and some rank is exactly L when p = k^L;
 *   - rounds: S = ceil(p / k^(L-1)) - 1 + (L-1)(k-1) per tree, the longest
 *     schedule exactly that (2S for allreduce and barrier);
 *   - per level, a rank sends (bcast) or receives (reduce) at most k-1
 *     messages, all in one group of independent rounds, so the executor
 *     keeps them in flight together (the simulator checks the claims of
 *     independence themselves);
 *   - rank 0 as the root sends S messages, (k-1)·L when p = k^L, and no
 *     root more than (k-1)·L;
 *   - the model's radix: the same on every rank (whatever the rank's own
 *     in-place flag), in 2..8, above 2 for small vectors at p >= 4 and 2
 *     for large ones; the registry's row builds that radix; and auto's
 *     price (the row's price callback) is the sum over the root's groups
 *     of (1 + (n-1)/4)·α + n·m·(β + γ if reducing), n the group's
 *     messages, read off the built schedules.
 *
 * CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety) simulates, per
 * radix, only the p where the tree changes shape (quick_p); the model's
 * checks run as in the plain pass.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "check_main.h"
#include "crnet.h"
#include "knomial.h"
#include "model.h"
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"
#include "tuning.h"

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)
#define MAX_P 64

static uint64_t value(int32_t rank, uint64_t e) {
  uint64_t h = mix((uint64_t)rank << 40 ^ e ^ UINT64_C(0x5eed));
  return (1 + (h & 0xffffffffu) % (PRIME - 1)) << 32 | (h >> 32) % PRIME;
}

/* The test's own figures of the tree: L and the rounds of each level. */
static int levels_of(int32_t p, int32_t k) {
  int L = 0;
  for (int64_t reach = 1; reach < p; reach *= k)
    L++;
  return L;
}

static int32_t level_rounds(int32_t p, int32_t k, int l) {
  int L = levels_of(p, k);
  int64_t top = 1;
  for (int i = 0; i < L - 1; i++)
    top *= k;
  return l == 0 ? (int32_t)((p + top - 1) / top) - 1 : k - 1;
}

static int32_t tree_rounds(int32_t p, int32_t k) {
  int32_t s = 0;
  for (int l = 0; l < levels_of(p, k); l++)
    s += level_rounds(p, k, l);
  return s;
}

/* The level of tree round g (bcast order; reduce counts levels from the
 * bottom, so the caller passes S-1-g). */
static int level_of_round(int32_t p, int32_t k, uint32_t g) {
  int l = 0;
  for (uint32_t base = 0;; l++) {
    base += (uint32_t)level_rounds(p, k, l);
    if (g < base)
      return l;
  }
}

static bool is_power(int32_t p, int32_t k) {
  int64_t x = 1;
  while (x < p)
    x *= k;
  return x == p;
}

typedef struct kase {
  crnet_collective coll;
  int32_t p, k, root;
  uint64_t count;
  bool in_place;
} kase;

#define MAX_LEVELS_TEST 8 /* k = 2 at p = 64: 6 */

static bool two_trees(crnet_collective coll) {
  return coll == CRNET_COLL_ALLREDUCE || coll == CRNET_COLL_BARRIER;
}

/* Per rank, tree and level: the messages sent (dir 0) and received (dir
 * 1) number at most k-1 and lie in one group of rounds (an unmarked round
 * and the independent ones after it). */
static void check_levels(const kase *c, const crnet__schedule *sc) {
  int32_t S = tree_rounds(c->p, c->k);
  if (c->p == 1)
    return; /* no tree: at most the local copy */
  for (int32_t r = 0; r < c->p; r++) {
    int n[2][2][MAX_LEVELS_TEST] = {{{0}}};
    uint32_t at[2][2][MAX_LEVELS_TEST];
    uint32_t group = 0;
    for (uint32_t g = 0; g < sc[r].nrounds; g++) {
      const crnet__round *ro = &sc[r].rounds[g];
      int tree = two_trees(c->coll) && g >= (uint32_t)S;
      uint32_t t = g - (uint32_t)(tree * S);
      /* reduce, and the first tree of the others, go bottom up */
      bool up =
          c->coll == CRNET_COLL_REDUCE || (two_trees(c->coll) && tree == 0);
      int l;
      if (!ro->independent)
        group = g;
      EXPECT(t < (uint32_t)S,
             "coll %d p %d k %d root %d rank %d: round %u "
             "beyond the tree's %d",
             (int)c->coll, c->p, c->k, c->root, r, g, S);
      l = level_of_round(c->p, c->k, up ? (uint32_t)S - 1 - t : t);
      for (int dir = 0; dir < 2; dir++) {
        if ((dir == 0 ? ro->send.peer : ro->recv.peer) < 0)
          continue;
        if (n[tree][dir][l] == 0)
          at[tree][dir][l] = group;
        EXPECT(at[tree][dir][l] == group,
               "coll %d p %d k %d root %d rank %d: level %d's messages in "
               "two groups (round %u)",
               (int)c->coll, c->p, c->k, c->root, r, l, g);
        EXPECT(++n[tree][dir][l] <= c->k - 1,
               "coll %d p %d k %d root %d rank %d: %d messages at level %d",
               (int)c->coll, c->p, c->k, c->root, r, n[tree][dir][l], l);
      }
    }
  }
}

/* Hops from the root, from the bcast's receives: at most L, exactly L
 * somewhere when p = k^L. */
static void check_depth(const kase *c, const crnet__schedule *sc) {
  int32_t parent[MAX_P], deepest = 0;
  int L = levels_of(c->p, c->k);
  for (int32_t r = 0; r < c->p; r++) {
    parent[r] = -1;
    for (uint32_t g = 0; g < sc[r].nrounds; g++)
      if (sc[r].rounds[g].recv.peer >= 0) {
        EXPECT(parent[r] < 0,
               "bcast p %d k %d root %d: rank %d receives "
               "twice",
               c->p, c->k, c->root, r);
        parent[r] = sc[r].rounds[g].recv.peer;
      }
    EXPECT((parent[r] < 0) == (r == c->root),
           "bcast p %d k %d root %d: rank %d's parent %d", c->p, c->k, c->root,
           r, parent[r]);
  }
  for (int32_t r = 0; r < c->p; r++) {
    int32_t d = 0;
    for (int32_t x = r; x != c->root; x = parent[x])
      EXPECT(++d <= L, "bcast p %d k %d root %d: rank %d deeper than %d", c->p,
             c->k, c->root, r, L);
    if (d > deepest)
      deepest = d;
  }
  if (is_power(c->p, c->k))
    EXPECT(deepest == L, "bcast p %d k %d root %d: deepest %d, L %d", c->p,
           c->k, c->root, deepest, L);
}

static void run(const kase *c) {
  int32_t p = c->p;
  crnet__schedule sc[MAX_P];
  crnet__sim_rank rk[MAX_P];
  uint64_t *ref = malloc((c->count ? c->count : 1) * sizeof *ref);
  bool barrier = c->coll == CRNET_COLL_BARRIER;
  bool bcast = c->coll == CRNET_COLL_BCAST;
  bool in_place = bcast || c->in_place;
  char err[512] = "";
  uint32_t longest = 0;
  int32_t S = tree_rounds(p, c->k);
  EXPECT(ref != NULL, "out of memory");
  memset(rk, 0, sizeof rk);
  for (int32_t r = 0; r < p; r++) {
    int rc = crnet__knomial_build(&sc[r], c->coll, p, r, c->root, c->count,
                                  in_place, c->k);
    EXPECT(rc == 0, "coll %d p %d k %d: build rank %d: %d", (int)c->coll, p,
           c->k, r, rc);
    if (sc[r].nrounds > longest)
      longest = sc[r].nrounds;
  }
  for (int32_t r = 0; r < p; r++) {
    uint64_t n = barrier ? 0 : c->count;
    /* a reduce's non-root has no output unless in place */
    uint64_t rn =
        c->coll == CRNET_COLL_REDUCE && r != c->root && !in_place ? 0 : n;
    uint64_t *snd = malloc((n ? n : 1) * sizeof *snd);
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof *rcv);
    EXPECT(snd != NULL && rcv != NULL, "out of memory");
    for (uint64_t e = 0; e < n; e++)
      snd[e] = value(bcast ? c->root : r, e);
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = SENTINEL;
    if (in_place && (!bcast || r == c->root)) {
      memcpy(rcv, snd, n * sizeof *snd);
      rk[r].init_count = n;
    }
    rk[r].sched = &sc[r];
    rk[r].send = snd;
    rk[r].send_count = bcast ? 0 : n;
    rk[r].recv = rcv;
    rk[r].recv_count = rn;
  }
  int rc = crnet__sim_run(rk, p, in_place, barrier, op_affine, err, sizeof err);
  EXPECT(rc == 0, "coll %d p %d k %d root %d count %llu in place %d: %s",
         (int)c->coll, p, c->k, c->root, (unsigned long long)c->count, in_place,
         err);
  for (uint64_t e = 0; e < c->count; e++) {
    ref[e] = value(bcast ? c->root : 0, e);
    for (int32_t x = 1; x < p && !bcast; x++)
      ref[e] = op_affine(ref[e], value(x, e));
  }
  for (int32_t r = 0; r < p && !barrier; r++) {
    if (c->coll == CRNET_COLL_REDUCE && r != c->root)
      continue;
    for (uint64_t e = 0; e < c->count; e++)
      EXPECT(rk[r].recv[e] == ref[e],
             "coll %d p %d k %d root %d count %llu in place %d: rank %d "
             "element %llu",
             (int)c->coll, p, c->k, c->root, (unsigned long long)c->count,
             in_place, r, (unsigned long long)e);
  }
  /* the longest schedule is the tree's S rounds (two trees: 2S) */
  if (p > 1)
    EXPECT(longest == (uint32_t)(two_trees(c->coll) ? 2 * S : S),
           "coll %d p %d k %d root %d: %u rounds, S = %d", (int)c->coll, p,
           c->k, c->root, longest, S);
  check_levels(c, sc);
  if (bcast) {
    int L = levels_of(p, c->k);
    uint64_t at_root = rk[c->root].stats.msgs_sent;
    check_depth(c, sc);
    EXPECT(at_root <= (uint64_t)(c->k - 1) * (uint64_t)L,
           "bcast p %d k %d root %d: the root sends %llu", p, c->k, c->root,
           (unsigned long long)at_root);
    if (c->root == 0)
      EXPECT(at_root == (uint64_t)S &&
                 (!is_power(p, c->k) ||
                  at_root == (uint64_t)(c->k - 1) * (uint64_t)L),
             "bcast p %d k %d: rank 0 sends %llu, S = %d, L = %d", p, c->k,
             (unsigned long long)at_root, S, L);
  }
  for (int32_t r = 0; r < p; r++) {
    free((void *)rk[r].send);
    free(rk[r].recv);
    crnet__sched_free(&sc[r]);
  }
  free(ref);
}

static long cases;
static bool quick;

/* CRNET_SIM_QUICK=1 (the sanitizer pass) runs, per radix k, the p where
 * the tree changes shape: p <= k + 1 (one level, a partial and a full one,
 * then the second level begins), p within one of k^L for L >= 2 (a level
 * just full, one rank short of it, one rank over), and the p of the large
 * count, 7, 13 and 64. */
static bool quick_p(int32_t p, int32_t k) {
  if (p <= k + 1 || p == 7 || p == 13 || p == 64)
    return true;
  for (int64_t x = (int64_t)k * k; x <= MAX_P + 1; x *= k)
    if (p >= x - 1 && p <= x + 1)
      return true;
  return false;
}

/* Every p up to 64 and every root (all roots to 24, then 0, 1, p/2, p-1);
 * the radix is the loop's index. */
START_TEST(test_radix) {
  int32_t k = (int32_t)_i;
  static const uint64_t counts[] = {0, 1, 5};
  for (int32_t p = 1; p <= MAX_P; p++) {
    bool big = p == 7 || p == 13 || p == 64;
    if (quick && !quick_p(p, k))
      continue;
    for (int32_t root = 0; root < p; root++) {
      if (p > 24 && root != 0 && root != 1 && root != p / 2 && root != p - 1)
        continue;
      for (size_t ci = 0; ci < (big ? 4u : 3u); ci++) {
        uint64_t n = ci < 3 ? counts[ci] : 1001;
        kase b = {CRNET_COLL_BCAST, p, k, root, n, true};
        run(&b);
        for (int ip = 0; ip < 2; ip++) {
          kase r = {CRNET_COLL_REDUCE, p, k, root, n, ip == 1};
          run(&r);
        }
        cases += 3;
      }
    }
    for (size_t ci = 0; ci < (big ? 4u : 3u); ci++)
      for (int ip = 0; ip < 2; ip++) {
        kase a = {CRNET_COLL_ALLREDUCE,       p,      k, 0,
                  ci < 3 ? counts[ci] : 1001, ip == 1};
        run(&a);
        cases++;
      }
    kase z = {CRNET_COLL_BARRIER, p, k, 0, 0, false};
    run(&z);
    cases++;
  }
}
END_TEST

/* The call every rank of a job would pass, for `rank`. */
static crnet__call call_of(crnet_collective coll, int32_t p, int32_t rank,
                           uint64_t count, const crnet__tuning *t, bool shm) {
  crnet__call c;
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.p = p;
  c.rank = rank;
  c.count = coll == CRNET_COLL_BARRIER ? 0 : count;
  c.root = coll == CRNET_COLL_BCAST || coll == CRNET_COLL_REDUCE ? p / 2 : 0;
  /* in place at the root alone (reduce), or at odd ranks: the radix must
   * not see it */
  c.in_place = coll == CRNET_COLL_BCAST    ? true
               : coll == CRNET_COLL_REDUCE ? rank == c.root
                                           : rank % 2 == 1;
  c.commutative = false;
  c.esize = 4;
  c.tuning = t;
  c.shm_links = shm;
  return c;
}

static const crnet_collective colls[] = {CRNET_COLL_BCAST, CRNET_COLL_REDUCE,
                                         CRNET_COLL_ALLREDUCE,
                                         CRNET_COLL_BARRIER};

/* The model's radix: alike on every rank, in range, built by the row. */
START_TEST(test_radix_choice) {
  crnet__tuning t;
  crnet__tuning_defaults(&t);
  for (size_t ci = 0; ci < 4; ci++)
    for (int32_t p = 1; p <= MAX_P; p++)
      for (uint64_t count = 1; count <= (UINT64_C(1) << 22); count *= 8)
        for (int shm = 0; shm < 2; shm++) {
          crnet__call c0 = call_of(colls[ci], p, 0, count, &t, shm);
          int32_t k = crnet__knomial_radix(&c0);
          crnet__schedule s;
          EXPECT(k >= 2 && k <= CRNET__KNOMIAL_MAX_RADIX,
                 "coll %d p %d count %llu: radix %d", (int)colls[ci], p,
                 (unsigned long long)count, k);
          for (int32_t r = 1; r < p; r++) {
            crnet__call c = call_of(colls[ci], p, r, count, &t, shm);
            EXPECT(crnet__knomial_radix(&c) == k,
                   "coll %d p %d count %llu: rank %d picks radix %d, rank 0 "
                   "%d",
                   (int)colls[ci], p, (unsigned long long)count, r,
                   crnet__knomial_radix(&c), k);
          }
          /* the registry's row builds that radix: rank 0 as the root (of
           * allreduce and barrier) has S children */
          if (colls[ci] == CRNET_COLL_ALLREDUCE && p > 1) {
            uint32_t sends = 0;
            EXPECT(crnet__build("knomial", &c0, &s) == 0,
                   "allreduce p %d count %llu: build", p,
                   (unsigned long long)count);
            for (uint32_t g = 0; g < s.nrounds; g++)
              sends += s.rounds[g].send.peer >= 0;
            EXPECT(sends == (uint32_t)tree_rounds(p, k),
                   "allreduce p %d count %llu: rank 0 sends %u, radix %d's "
                   "S %d",
                   p, (unsigned long long)count, sends, k, tree_rounds(p, k));
            crnet__sched_free(&s);
          }
        }
  /* Latency-bound calls take a wide tree; bandwidth-bound ones a tree of
   * the fewest messages through the busiest rank, ceil(log2 p) (the
   * binomial's, or a wider tree's with as few: p = 5, k = 3 sends 3 in two
   * levels). */
  for (int32_t p = 4; p <= MAX_P; p++) {
    crnet__call small = call_of(CRNET_COLL_BCAST, p, 0, 2, &t, false);
    crnet__call large = call_of(CRNET_COLL_BCAST, p, 0, 1 << 22, &t, false);
    int32_t k = crnet__knomial_radix(&large);
    EXPECT(crnet__knomial_radix(&small) > 2, "p %d: 8 B picks radix %d", p,
           crnet__knomial_radix(&small));
    EXPECT(tree_rounds(p, k) == crnet__ceil_log2(p),
           "p %d: 16 MiB picks radix %d, %d messages at the root", p, k,
           tree_rounds(p, k));
  }
}
END_TEST

/* auto's price against the schedules: per group of rank 0's rounds (the
 * root of allreduce and barrier; of bcast and reduce when the root is 0),
 * one α, a quarter of α for each further message, and the messages'
 * bytes. */
START_TEST(test_price_matches_schedules) {
  crnet__tuning t;
  crnet__tuning_defaults(&t);
  for (size_t ci = 0; ci < 4; ci++)
    for (int32_t p = 2; p <= MAX_P; p++)
      for (uint64_t count = 1; count <= (UINT64_C(1) << 16); count *= 16)
        for (int shm = 0; shm < 2; shm++) {
          crnet__call c = call_of(colls[ci], p, 0, count, &t, shm);
          crnet__schedule s;
          double alpha, beta, gamma, m, want = 0, got;
          bool reduces = colls[ci] == CRNET_COLL_REDUCE ||
                         colls[ci] == CRNET_COLL_ALLREDUCE;
          c.root = 0;
          c.in_place = false;
          m = crnet__model_bytes(&c);
          alpha = crnet__tuning_get(
              &t, shm ? CRNET__TUNING_SHM_ALPHA : CRNET__TUNING_ALPHA, p);
          beta = crnet__tuning_get(
              &t, shm ? CRNET__TUNING_SHM_BETA : CRNET__TUNING_BETA, p);
          gamma = crnet__tuning_get(&t, CRNET__TUNING_GAMMA, p);
          EXPECT(crnet__build("knomial", &c, &s) == 0,
                 "coll %d p %d count %llu shm %d: build", (int)colls[ci], p,
                 (unsigned long long)count, shm);
          for (uint32_t g = 0; g < s.nrounds;) {
            int n = 0;
            bool recv = false;
            do {
              n += s.rounds[g].send.peer >= 0 || s.rounds[g].recv.peer >= 0;
              recv = recv || s.rounds[g].recv.peer >= 0;
              g++;
            } while (g < s.nrounds && s.rounds[g].independent);
            if (n > 0)
              want += (1 + (n - 1) / 4.0) * alpha +
                      n * m * (beta + (reduces && recv ? gamma : 0));
          }
          crnet__sched_free(&s);
          EXPECT(crnet__auto_price("knomial", &c, &got) == 0,
                 "coll %d p %d count %llu shm %d: no price", (int)colls[ci], p,
                 (unsigned long long)count, shm);
          EXPECT(got <= want * (1 + 1e-9) && got >= want * (1 - 1e-9),
                 "coll %d p %d count %llu shm %d: price %g, schedules %g",
                 (int)colls[ci], p, (unsigned long long)count, shm, got, want);
        }
}
END_TEST

static Suite *knomial_suite(void) {
  Suite *s = suite_create("sim-knomial");
  TCase *tc = tcase_create("trees");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_radix, 2, CRNET__KNOMIAL_MAX_RADIX + 1);
  suite_add_tcase(s, tc);
  tc = tcase_create("model");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_radix_choice);
  tcase_add_test(tc, test_price_matches_schedules);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  const char *q = getenv("CRNET_SIM_QUICK");
  quick = q != NULL && strcmp(q, "1") == 0;
  SRunner *sr = srunner_create(knomial_suite());
  int failed;
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld simulated collectives\n", cases);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
