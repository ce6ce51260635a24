/* Simulator tests for the Swing allreduce (src/collectives/swing.c), built
 * through its registry row as the library builds it, against the paper's
 * claims (De Sensi et al., NSDI 2024):
 *   - at step s rank r talks to pi(r, s) = r + rho(s) (r even) or
 *     r - rho(s) (r odd) mod p, rho(s) = 1, -1, 3, -5, 11, ... (computed
 *     here by its own recurrence, not by the builder's formula);
 *   - at p = 2^d the latency-optimal variant takes d rounds and moves d·m,
 *     the bandwidth-optimal one 2d rounds and 2(p-1)/p·m, reducing
 *     (p-1)/p·m;
 *   - every rank's result is the sum of all p vectors, for p = 1..64 (and
 *     100, 127, 128), counts 0, 1, p-1, p, 3p+1 and a large odd one, in
 *     place or not, in both variants.
 * The variant is the builder's choice from the call's tuning; the tests
 * force one or the other with a tuning where rounds are all that count
 * (α = 1, β = γ = 1e-15: latency-optimal) or nothing but bytes (α = 1e-15:
 * bandwidth-optimal, as soon as m > 0), and check that the default tuning
 * switches from the one to the other as m grows. Non-power-of-two p is
 * folded (three more rounds), which the round counts below assert too.
 * CRNET_SIM_QUICK=1 (the sanitizer pass) runs the results at p = 1..33.
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
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"
#include "tuning.h"

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)

static long cases;
static bool quick;

enum variant { LATENCY, BANDWIDTH, BY_DEFAULT };
static const char *const variant_name[] = {"latency-optimal",
                                           "bandwidth-optimal", "default"};

static crnet__tuning tunings[2];

static void set_tunings(void) {
  crnet__tuning_defaults(&tunings[LATENCY]);
  tunings[LATENCY].base[CRNET__TUNING_ALPHA] = 1;
  tunings[LATENCY].base[CRNET__TUNING_BETA] = 1e-15;
  tunings[LATENCY].base[CRNET__TUNING_GAMMA] = 1e-15;
  crnet__tuning_defaults(&tunings[BANDWIDTH]);
  tunings[BANDWIDTH].base[CRNET__TUNING_ALPHA] = 1e-15;
}

static crnet__call call_of(int32_t p, int32_t r, uint64_t count, bool in_place,
                           enum variant v) {
  crnet__call c = {.coll = CRNET_COLL_ALLREDUCE,
                   .p = p,
                   .rank = r,
                   .count = count,
                   .root = 0,
                   .in_place = in_place,
                   .commutative = true,
                   .esize = 8,
                   .tuning = v == BY_DEFAULT ? NULL : &tunings[v]};
  return c;
}

/* rho(s) by its recurrence rho(0) = 1, rho(s) = rho(s-1) + (-2)^s. */
static int64_t paper_rho(int s) {
  int64_t rho = 1, power = 1;
  for (int i = 1; i <= s; i++) {
    power *= -2;
    rho += power;
  }
  return rho;
}

static int32_t paper_pi(int32_t r, int s, int32_t p) {
  int64_t q = r % 2 == 0 ? r + paper_rho(s) : r - paper_rho(s);
  q %= p;
  return (int32_t)(q < 0 ? q + p : q);
}

typedef struct outcome {
  uint64_t max_rounds;    /* the longest schedule's rounds */
  uint64_t max_sent;      /* elements sent by the busiest rank */
  uint64_t max_reduced;   /* elements reduced by the busiest rank */
  uint64_t min_rounds_p2; /* at powers of two: the shortest schedule's */
} outcome;

/* Builds every rank's schedule through the row, runs them in the
 * simulator and compares every rank's RECV with the sum. */
static outcome run(int32_t p, uint64_t m, bool in_place, enum variant v) {
  char what[160];
  snprintf(what, sizeof what, "swing p=%d count=%llu in_place=%d %s", p,
           (unsigned long long)m, in_place, variant_name[v]);
  crnet__schedule *sc = calloc((size_t)p, sizeof(*sc));
  crnet__sim_rank *rk = calloc((size_t)p, sizeof(*rk));
  uint64_t *want = malloc((m ? m : 1) * sizeof(uint64_t));
  EXPECT(sc && rk && want, "out of memory");
  for (int32_t r = 0; r < p; r++) {
    crnet__call c = call_of(p, r, m, in_place, v);
    int rc = crnet__build("swing", &c, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
    uint64_t *snd = malloc((m ? m : 1) * sizeof(uint64_t));
    uint64_t *rcv = malloc((m ? m : 1) * sizeof(uint64_t));
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < m; e++) {
      snd[e] = sim_value(r, e, false);
      rcv[e] = in_place ? snd[e] : SENTINEL;
    }
    rk[r] = (crnet__sim_rank){.sched = &sc[r],
                              .send = snd,
                              .send_count = m,
                              .recv = rcv,
                              .recv_count = m,
                              .init_off = 0,
                              .init_count = in_place ? m : 0};
  }
  char err[512] = "";
  int rc = crnet__sim_run(rk, p, in_place, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);
  for (uint64_t e = 0; e < m; e++) {
    want[e] = 0;
    for (int32_t r = 0; r < p; r++)
      want[e] += sim_value(r, e, false);
  }
  outcome o = {0, 0, 0, UINT64_MAX};
  for (int32_t r = 0; r < p; r++) {
    for (uint64_t e = 0; e < m; e++)
      EXPECT(rk[r].recv[e] == want[e], "%s: rank %d element %llu", what, r,
             (unsigned long long)e);
    if (sc[r].nrounds > o.max_rounds)
      o.max_rounds = sc[r].nrounds;
    if (sc[r].nrounds < o.min_rounds_p2)
      o.min_rounds_p2 = sc[r].nrounds;
    if (rk[r].stats.elems_sent > o.max_sent)
      o.max_sent = rk[r].stats.elems_sent;
    if (rk[r].stats.elems_reduced > o.max_reduced)
      o.max_reduced = rk[r].stats.elems_reduced;
    free((void *)rk[r].send);
    free(rk[r].recv);
    crnet__sched_free(&sc[r]);
  }
  free(sc);
  free(rk);
  free(want);
  cases++;
  return o;
}

static int floor_log2(int32_t p) {
  int d = 0;
  while ((INT64_C(2) << d) <= p)
    d++;
  return d;
}

/* ------------------------------------------------------------------------
 * The paper's claims
 */

START_TEST(rho_and_peers) {
  /* rho: 1, -1, 3, -5, 11, -21, 43 */
  static const int64_t rho[] = {1, -1, 3, -5, 11, -21, 43};
  for (int s = 0; s < 7; s++)
    EXPECT(paper_rho(s) == rho[s], "rho(%d) = %lld", s,
           (long long)paper_rho(s));
  /* every step pairs the ranks: pi(pi(r, s), s) = r */
  for (int32_t p = 2; p <= 64; p += 2)
    for (int s = 0; (INT32_C(1) << s) < p; s++)
      for (int32_t r = 0; r < p; r++)
        EXPECT(paper_pi(paper_pi(r, s, p), s, p) == r, "p=%d s=%d r=%d", p, s,
               r);
  /* The schedules' peers, round by round, at powers of two: round s of
   * the latency-optimal variant and rounds s and 2d-1-s of the
   * bandwidth-optimal one go to and come from pi(r, s). */
  for (int d = 1; d <= 6; d++) {
    int32_t p = INT32_C(1) << d;
    for (int v = LATENCY; v <= BANDWIDTH; v++)
      for (int32_t r = 0; r < p; r++) {
        crnet__schedule s;
        crnet__call c = call_of(p, r, 4 * (uint64_t)p, false, v);
        EXPECT(crnet__build("swing", &c, &s) == 0, "build p=%d", p);
        uint32_t want = v == LATENCY ? (uint32_t)d : 2 * (uint32_t)d;
        EXPECT(s.nrounds == want, "p=%d %s rank %d: %u rounds, not %u", p,
               variant_name[v], r, s.nrounds, want);
        for (uint32_t k = 0; k < s.nrounds; k++) {
          int step = k < (uint32_t)d ? (int)k : 2 * d - 1 - (int)k;
          int32_t q = paper_pi(r, step, p);
          EXPECT(s.rounds[k].send.peer == q && s.rounds[k].recv.peer == q,
                 "p=%d %s rank %d round %u: peers %d/%d, pi = %d", p,
                 variant_name[v], r, k, s.rounds[k].send.peer,
                 s.rounds[k].recv.peer, q);
        }
        crnet__sched_free(&s);
      }
  }
}
END_TEST

/* Rounds and volume: d rounds and d·m at p = 2^d (latency-optimal), 2d
 * rounds, 2(p-1)/p·m sent and (p-1)/p·m reduced (bandwidth-optimal),
 * with m a multiple of p so that the blocks are equal; three more rounds
 * with the fold otherwise. */
START_TEST(rounds_and_volume) {
  for (int32_t p = 2; p <= 64; p++) {
    int d = floor_log2(p);
    bool fold = (INT32_C(1) << d) != p;
    uint64_t m = 8 * (uint64_t)p;
    outcome lat = run(p, m, false, LATENCY);
    outcome bw = run(p, m, false, BANDWIDTH);
    EXPECT(lat.max_rounds == (uint64_t)d + 3 * fold,
           "p=%d latency-optimal: %llu rounds", p,
           (unsigned long long)lat.max_rounds);
    EXPECT(bw.max_rounds == 2 * (uint64_t)d + 3 * fold,
           "p=%d bandwidth-optimal: %llu rounds", p,
           (unsigned long long)bw.max_rounds);
    if (fold)
      continue;
    EXPECT(lat.min_rounds_p2 == lat.max_rounds &&
               bw.min_rounds_p2 == bw.max_rounds,
           "p=%d: ranks with different round counts", p);
    EXPECT(lat.max_sent == (uint64_t)d * m && lat.max_reduced == d * m,
           "p=%d latency-optimal: sent %llu reduced %llu, not d·m", p,
           (unsigned long long)lat.max_sent,
           (unsigned long long)lat.max_reduced);
    EXPECT(bw.max_sent == 2 * (uint64_t)(p - 1) * m / (uint64_t)p,
           "p=%d bandwidth-optimal: sent %llu, not 2(p-1)/p·m = %llu", p,
           (unsigned long long)bw.max_sent,
           (unsigned long long)(2 * (uint64_t)(p - 1) * m / (uint64_t)p));
    EXPECT(bw.max_reduced == (uint64_t)(p - 1) * m / (uint64_t)p,
           "p=%d bandwidth-optimal: reduced %llu, not (p-1)/p·m", p,
           (unsigned long long)bw.max_reduced);
  }
}
END_TEST

/* Every rank's sum, p = 1..64 (and a few larger), both variants and the
 * default tuning's choice, in place or not. */
START_TEST(results) {
  static const int32_t extra[] = {100, 127, 128};
  int32_t pmax = quick ? 33 : 64;
  for (int32_t i = 0; i < pmax + (quick ? 0 : 3); i++) {
    int32_t p = i < pmax ? i + 1 : extra[i - pmax];
    uint64_t large =
        (20000 / (uint64_t)p > 3 * (uint64_t)p + 3 ? 20000 / (uint64_t)p
                                                   : 3 * (uint64_t)p + 3) |
        1;
    uint64_t counts[] = {
        0, 1, (uint64_t)p - 1, (uint64_t)p, 3 * (uint64_t)p + 1, large};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (int in_place = 0; in_place < 2; in_place++)
        for (int v = LATENCY; v <= BY_DEFAULT; v++)
          run(p, counts[k], in_place, v);
  }
}
END_TEST

/* The default tuning takes the latency-optimal variant for small vectors
 * and the bandwidth-optimal one for large ones, alike on every rank. */
START_TEST(default_switches_by_size) {
  static const int32_t ps[] = {2, 4, 8, 6, 13, 64};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    int32_t p = ps[i];
    int d = floor_log2(p);
    uint32_t f = (INT32_C(1) << d) != p;
    /* latency-optimal: at most d + 3f rounds; bandwidth-optimal: at least
     * 2d + 2f (the fold's first two and the 2d of Swing), more for these
     * p */
    uint32_t lat_max = (uint32_t)d + 3 * f, bw_min = 2 * (uint32_t)d + 2 * f;
    EXPECT(bw_min > lat_max, "p=%d does not tell the variants apart", p);
    /* 8 B and 64 MiB at 8-byte elements */
    uint64_t small = 1, big = UINT64_C(8) << 20;
    for (int32_t r = 0; r < p; r++) {
      crnet__schedule s;
      crnet__call c = call_of(p, r, small, false, BY_DEFAULT);
      EXPECT(crnet__build("swing", &c, &s) == 0, "build");
      EXPECT(s.nrounds <= lat_max, "p=%d rank %d 8 B: %u rounds", p, r,
             s.nrounds);
      crnet__sched_free(&s);
      c = call_of(p, r, big, false, BY_DEFAULT);
      EXPECT(crnet__build("swing", &c, &s) == 0, "build");
      EXPECT(s.nrounds >= bw_min,
             "p=%d rank %d 64 MiB: %u rounds, not bandwidth-optimal", p, r,
             s.nrounds);
      crnet__sched_free(&s);
    }
  }
}
END_TEST

/* Swing combines out of rank order: a named request with a
 * non-commutative operator is refused, saying why, and auto never takes
 * it for one. */
START_TEST(non_commutative) {
  for (int32_t p = 2; p <= 16; p++) {
    crnet__call c = call_of(p, 0, 1024, false, BY_DEFAULT);
    const char *name;
    uint32_t id;
    char why[512] = "";
    EXPECT(crnet__select("swing", &c, &name, &id, why, sizeof why) == 0 &&
               id == 15,
           "p=%d: swing refused a commutative operator: %s", p, why);
    c.commutative = false;
    EXPECT(crnet__select("swing", &c, &name, &id, why, sizeof why) ==
               CRNET_EUNSUPPORTED,
           "p=%d: swing accepted a non-commutative operator", p);
    EXPECT(strstr(why, "out of rank order") != NULL, "p=%d: reason '%s'", p,
           why);
    for (uint64_t count = 1; count <= (UINT64_C(1) << 24); count *= 16) {
      c.count = count;
      EXPECT(crnet__auto_choose(&c, &name, NULL) == 0 &&
                 strcmp(name, "swing") != 0,
             "p=%d count=%llu: auto took swing for a non-commutative "
             "operator",
             p, (unsigned long long)count);
    }
  }
}
END_TEST

START_TEST(misuse) {
  crnet__schedule s;
  crnet__call c = call_of(4, 4, 8, false, BY_DEFAULT);
  EXPECT(crnet__build("swing", &c, &s) == CRNET_EINVAL, "rank 4 of 4");
  c = call_of(0, 0, 8, false, BY_DEFAULT);
  EXPECT(crnet__build("swing", &c, &s) == CRNET_EINVAL, "p = 0");
}
END_TEST

int main(void) {
  const char *q = getenv("CRNET_SIM_QUICK");
  quick = q != NULL && strcmp(q, "1") == 0;
  set_tunings();
  Suite *s = suite_create("sim-swing");
  TCase *tc = tcase_create("sim-swing");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, misuse);
  tcase_add_test(tc, rho_and_peers);
  tcase_add_test(tc, rounds_and_volume);
  tcase_add_test(tc, results);
  tcase_add_test(tc, default_switches_by_size);
  tcase_add_test(tc, non_commutative);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld simulated collectives\n", cases);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
