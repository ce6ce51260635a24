/* The claims of the rooted collectives (src/schedules/rooted.c: binomial
 * and linear gather and scatter) and of the alltoallv builders
 * (src/schedules/alltoall.c: pairwise and ring): rounds, messages, volumes,
 * copies, TEMP and which rounds are marked independent, as rooted.c's and
 * alltoall.c's comment blocks give them, on every rank at p in 1..64, 100,
 * 127, 128 x roots 0, p/2, p-1 x block shapes x in place or not. Each case
 * runs through sim_harness.c, which also checks its result against the
 * serial reference (and that no rank writes memory it must not: RECV is as
 * long as the program's buffer); test_sim_registry.c has the other shapes
 * and roots. CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety)
 * runs the p of sim_quick_ps (sim_harness.h) only.
 */
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "check_main.h"
#include "rooted.h"
#include "sim_harness.h"

static long cases;

static bool marked_after_first(const crnet__schedule *s) {
  for (uint32_t k = 1; k < s->nrounds; k++)
    if (!s->rounds[k].independent)
      return false;
  return true;
}

static bool any_marked(const crnet__schedule *s) {
  for (uint32_t k = 0; k < s->nrounds; k++)
    if (s->rounds[k].independent)
      return true;
  return false;
}

/* --- gather and scatter ------------------------------------------------- */

enum coll { GB, GL, SB, SL };

static bool is_gather(enum coll c) { return c == GB || c == GL; }
static bool is_binomial(enum coll c) { return c == GB || c == SB; }

static int build(enum coll c, crnet__schedule *s, int32_t p, int32_t r,
                 int32_t root, const uint64_t *counts, bool ip) {
  switch (c) {
  case GB:
    return crnet__binomial_gather(s, p, r, root, counts, ip);
  case GL:
    return crnet__linear_gather(s, p, r, root, counts, ip);
  case SB:
    return crnet__binomial_scatter(s, p, r, root, counts, ip);
  case SL:
    return crnet__linear_scatter(s, p, r, root, counts, ip);
  }
  return CRNET_EINVAL;
}

#define NSHAPES 4
static uint64_t shape_count(int shape, int32_t p, int32_t r) {
  switch (shape) {
  case 0:
    return 3;
  case 1:
    return (uint64_t)r * 7 % 5;
  case 2:
    return 0;
  default:
    return r == p / 3 ? 11 : 0;
  }
}

/* Elements of the relative ranks [a, b) (relative to root). */
static uint64_t rel_span(const uint64_t *counts, int32_t p, int32_t root,
                         int64_t a, int64_t b) {
  uint64_t n = 0;
  for (int64_t u = a; u < b; u++)
    n += counts[(root + u) % p];
  return n;
}

static int lowbit(int64_t v) {
  int b = 0;
  while (!(v >> b & 1))
    b++;
  return b;
}

#define ST(x) (unsigned long long)(x)
#define STATS                                                                  \
  "%s: rank %d (v %lld) rounds %llu/%u sent %llu/%llu recv %llu/%llu "         \
  "copied %llu temp %llu",                                                     \
      k->what, r, (long long)v, ST(s->comm_rounds), h->nrounds,                \
      ST(s->msgs_sent), ST(s->elems_sent), ST(s->msgs_recv),                   \
      ST(s->elems_recv), ST(s->elems_copied), ST(h->temp_count)

static void rooted_claims(const sim_case *k, const sim_result *res, void *arg) {
  enum coll c = *(const enum coll *)arg;
  int32_t p = k->p, root = k->root;
  const uint64_t *counts = k->counts;
  int L = crnet__ceil_log2(p);
  bool g = is_gather(c), ip = k->in_place == SIM_IN_PLACE;
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &res->rk[r].stats;
    const crnet__schedule *h = &res->sc[r];
    int64_t v = ((int64_t)r - root + p) % p;
    uint64_t msgs_in = g ? s->msgs_recv : s->msgs_sent;
    uint64_t elems_in = g ? s->elems_recv : s->elems_sent;
    uint64_t msgs_out = g ? s->msgs_sent : s->msgs_recv;
    uint64_t elems_out = g ? s->elems_sent : s->elems_recv;
    /* "in" is towards the root's side of the collective: what the root
     * gathers or scatters; "out" what a non-root contributes. */
    EXPECT(s->elems_copied == (v == 0 && !ip ? counts[r] : 0), STATS);
    if (v == 0) {
      EXPECT(msgs_out == 0 && h->temp_count == 0, STATS);
      EXPECT(elems_in == res->m - counts[r], STATS);
      EXPECT(h->nrounds == (p > 1 ? (uint32_t)(is_binomial(c) ? L : p - 1)
                            : ip  ? 0
                                  : 1),
             STATS);
      EXPECT(msgs_in == (is_binomial(c) ? (uint64_t)L : (uint64_t)p - 1),
             STATS);
      EXPECT(s->comm_rounds == msgs_in, STATS);
      EXPECT(marked_after_first(h), STATS);
      continue;
    }
    EXPECT(msgs_out == 1, STATS);
    if (is_binomial(c)) {
      int b = lowbit(v);
      int64_t end = v + (INT64_C(1) << b) < p ? v + (INT64_C(1) << b) : p;
      uint64_t sub = rel_span(counts, p, root, v, end);
      EXPECT(s->comm_rounds <= (uint64_t)L && h->nrounds <= (uint32_t)L, STATS);
      EXPECT(elems_out == sub && elems_in == sub - counts[r] &&
                 h->temp_count == sub - counts[r],
             STATS);
      /* No trailing empty rounds: a gather rank stops after its send, a
       * scatter rank after its last child's round (that of v+1, or its
       * receive if it has no child). */
      if (g)
        EXPECT(h->nrounds == (uint32_t)b + 1, STATS);
      else
        EXPECT(h->nrounds == (uint32_t)(b > 0 && v + 1 < p ? L : L - b), STATS);
    } else {
      EXPECT(s->comm_rounds == 1 && h->nrounds == (uint32_t)v &&
                 elems_out == counts[r] && msgs_in == 0 && h->temp_count == 0,
             STATS);
    }
  }
}

static const int32_t ps[] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,  15,  16, 17,
    18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,  32,  33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,  49,  50, 51,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 100, 127, 128};
#define NPS (sizeof(ps) / sizeof(ps[0]))

/* CRNET_SIM_QUICK=1 (the sanitizer pass) runs sim_quick_ps only: every
 * branch the binomial trees take on p (a power of two or not, 2^d + 1 and
 * 2^d - 1) and the pairwise exchange's odd and even p. */
static bool quick;
static bool skipped_p(int32_t p) { return quick && !sim_quick_p(p); }

START_TEST(test_rooted) {
  enum coll c = (enum coll)_i;
  for (size_t pi = 0; pi < NPS; pi++) {
    int32_t p = ps[pi];
    if (skipped_p(p))
      continue;
    int32_t roots[] = {0, p / 2, p - 1};
    uint64_t *counts = malloc((size_t)p * sizeof *counts);
    EXPECT(counts, "out of memory");
    for (int ri = 0; ri < 3; ri++) {
      if ((ri > 0 && roots[ri] == roots[ri - 1]) ||
          (ri == 2 && roots[2] == roots[0]))
        continue;
      for (int shape = 0; shape < NSHAPES; shape++)
        for (int ip = 0; ip < 2; ip++) {
          sim_case k = {.row = is_binomial(c) ? "binomial" : "linear",
                        .coll = is_gather(c) ? CRNET_COLL_GATHER
                                             : CRNET_COLL_SCATTER,
                        .p = p,
                        .counts = counts,
                        .root = roots[ri],
                        .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE};
          for (int32_t b = 0; b < p; b++)
            counts[b] = shape_count(shape, p, b);
          k.uniform = shape == 0 || shape == 2;
          k.count = counts[0];
          for (int32_t b = 1; b < p && !k.uniform; b++)
            k.count += counts[b];
          sim_describe(&k, NULL);
          sim_run(&k, rooted_claims, &c);
          cases++;
        }
    }
    free(counts);
  }
}
END_TEST

/* --- alltoallv ---------------------------------------------------------- */

static void alltoallv_claims(const sim_case *k, const sim_result *res,
                             void *arg) {
  bool pairwise = *(const bool *)arg;
  int32_t p = k->p;
  uint64_t pm1 = (uint64_t)p - 1;
  for (int32_t r = 0; r < p; r++) {
    const sim_vargs *a = &k->v[r];
    const crnet__sim_stats *s = &res->rk[r].stats;
    const crnet__schedule *h = &res->sc[r];
    uint64_t sent = 0, recvd = 0;
    for (int32_t j = 0; j < p; j++)
      if (j != r) {
        sent += a->scounts[j];
        recvd += a->rcounts[j];
      }
    EXPECT(s->comm_rounds == pm1 && s->msgs_sent == pm1 &&
               s->msgs_recv == pm1 && h->nrounds == (p > 1 ? pm1 : 1) &&
               s->elems_sent == sent && s->elems_recv == recvd &&
               s->elems_copied == a->scounts[r] && h->temp_count == 0,
           "%s: rank %d rounds %llu/%u msgs %llu/%llu elems %llu/%llu "
           "copied %llu",
           k->what, r, ST(s->comm_rounds), h->nrounds, ST(s->msgs_sent),
           ST(s->msgs_recv), ST(s->elems_sent), ST(s->elems_recv),
           ST(s->elems_copied));
    EXPECT(pairwise ? marked_after_first(h) : !any_marked(h),
           "%s: rank %d: independent rounds wrong", k->what, r);
  }
}

START_TEST(test_alltoallv) {
  bool pairwise = _i == 0;
  for (size_t pi = 0; pi < NPS; pi++)
    for (int shape = 0; shape < SIM_NPAIR_SHAPES && !skipped_p(ps[pi]);
         shape++) {
      sim_vargs *v = sim_vargs_make(shape, ps[pi]);
      sim_case k = {.row = pairwise ? "pairwise" : "ring",
                    .coll = CRNET_COLL_ALLTOALLV,
                    .p = ps[pi],
                    .v = v};
      sim_describe(&k, sim_pair_shape_name[shape]);
      sim_run(&k, alltoallv_claims, &pairwise);
      sim_vargs_free(v, ps[pi]);
      cases++;
    }
}
END_TEST

/* Misuse: CRNET_EINVAL, and nothing to free. */
START_TEST(test_einval) {
  crnet__schedule s;
  uint64_t counts[3] = {1, 2, 3}, big[3] = {UINT64_MAX, 1, 0};
  uint64_t z[3] = {0, 0, 0}, d[3] = {0, 1, UINT64_MAX};
  for (int c = GB; c <= SL; c++) {
    ck_assert_int_eq(build((enum coll)c, &s, 0, 0, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 3, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, -1, 0, counts, true),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, 3, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, -1, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, 0, NULL, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 1, 0, big, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, NULL, 3, 1, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 2, 1, counts, false), 0);
    crnet__sched_free(&s);
  }
  int (*v[2])(crnet__schedule *, int32_t, int32_t, const uint64_t *,
              const uint64_t *, const uint64_t *, const uint64_t *) = {
      crnet__pairwise_alltoallv, crnet__ring_alltoallv};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(v[i](&s, 0, 0, z, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 3, z, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, NULL, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, NULL, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, z, NULL, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, z, z, NULL), CRNET_EINVAL);
    /* the own block: scounts[rank] must equal rcounts[rank] */
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, z, z), CRNET_EINVAL);
    /* a displacement + count beyond 2^64 */
    ck_assert_int_eq(v[i](&s, 3, 0, counts, d, counts, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, counts, d), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, counts, z), 0);
    crnet__sched_free(&s);
  }
}
END_TEST

/* The harness can fail: a gather where one rank believes in another root
 * is refused by the simulator. */
START_TEST(test_disagreeing_root_fails) {
  enum { N = 5 };
  uint64_t counts[N] = {2, 0, 1, 3, 1}, send[N][3] = {{0}}, recv[N][8];
  crnet__schedule sc[N];
  crnet__sim_rank rk[N];
  char err[256] = "";
  memset(rk, 0, sizeof rk);
  for (int32_t r = 0; r < N; r++) {
    ck_assert_int_eq(
        crnet__binomial_gather(&sc[r], N, r, r == 3 ? 1 : 2, counts, false), 0);
    rk[r].sched = &sc[r];
    rk[r].send = send[r];
    rk[r].send_count = counts[r];
    rk[r].recv = recv[r];
    rk[r].recv_count = 8;
  }
  int rc = crnet__sim_run(rk, N, false, false, op_sum, err, sizeof err);
  for (int32_t r = 0; r < N; r++)
    crnet__sched_free(&sc[r]);
  ck_assert_msg(rc == CRNET_EIO, "%d: %s", rc, err);
}
END_TEST

int main(void) {
  TCase *tc;
  Suite *s = sim_suite("sim-rooted", "rooted", &tc);
  int rc;
  quick = sim_quick();
  tcase_add_loop_test(tc, test_rooted, GB, SL + 1);
  tcase_add_loop_test(tc, test_alltoallv, 0, 2);
  tcase_add_test(tc, test_einval);
  tcase_add_test(tc, test_disagreeing_root_fails);
  rc = sim_check_run(s);
  printf("%ld cases\n", cases);
  return rc;
}
