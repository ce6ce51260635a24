/* The two-level schedules (src/schedules/twolevel.c) beyond their row's
 * place in test_sim_registry.c (every collective, shape and root on five
 * host layouts, ranks mixing in place): the same collectives with constants
 * under which the ring runs a level (a tuning no row is run with there),
 * over many host layouts (even and uneven hosts, ranks placed host by
 * host, round-robin and at random), counts from 0 up, in place or not,
 * every root, each run through sim_harness.c against the serial reference.
 *
 * Also: the property the two-level builders rely on (circulant and ring
 * give every rank of a call the same number of rounds), and what auto does
 * with a layout.
 *
 * CRNET_SIM_QUICK=1 (the sanitizer pass, for memory safety) checks that
 * property at the p of sim_quick_ps (sim_harness.h) instead of every p to
 * 40; the layouts run as in the plain pass.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "sim_harness.h"
#include "tuning.h"
#include "twolevel.h"

/* Host sizes of the layouts, 0-terminated. */
static const int32_t layouts[][6] = {
    {1},       {2},          {5},       {1, 1},       {2, 2},
    {1, 3},    {3, 1},       {3, 5, 1}, {4, 4},       {2, 7},
    {7, 2},    {5, 1, 1},    {3, 3, 3}, {1, 1, 1, 1}, {2, 2, 2, 2},
    {6, 1, 6}, {4, 4, 4, 4}, {8, 8},    {3, 4, 5},    {2, 3, 2, 3, 2}};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

enum placement { BY_HOST, ROUND_ROBIN, SHUFFLED, NPLACEMENTS };
static const char *placement_name[] = {"by host", "round-robin", "shuffled"};

/* host[0..p) for the layout and placement; returns p and *H. */
static int32_t place(const int32_t *sizes, enum placement how, int32_t *host,
                     int32_t *H, uint64_t seed) {
  int32_t p = 0, left[6];
  *H = 0;
  for (int32_t g = 0; g < 6 && sizes[g] > 0; g++) {
    left[g] = sizes[g];
    p += sizes[g];
    (*H)++;
  }
  if (how == ROUND_ROBIN) {
    for (int32_t r = 0, g = 0; r < p; g = (g + 1) % *H)
      if (left[g] > 0) {
        left[g]--;
        host[r++] = g;
      }
    return p;
  }
  for (int32_t g = 0, r = 0; g < *H; g++)
    for (int32_t i = 0; i < sizes[g]; i++)
      host[r++] = g;
  if (how == SHUFFLED)
    for (int32_t r = p - 1; r > 0; r--) {
      int32_t o = (int32_t)((seed = mix(seed)) % (uint64_t)(r + 1)),
              t = host[r];
      host[r] = host[o];
      host[o] = t;
    }
  return p;
}

static const uint64_t counts[] = {0, 1, 2, 3, 5, 8, 17, 64, 301};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* Every layout, placement, count or block shape, root and in-place choice
 * of the collective, with the tuning t. */
static void every_layout(crnet_collective coll, const crnet__tuning *t) {
  int32_t host[64], H;
  uint64_t blocks[64];
  bool takes_blocks = sim_takes_blocks(coll);
  for (size_t l = 0; l < NLAYOUTS; l++)
    for (int how = 0; how < NPLACEMENTS; how++) {
      int32_t p = place(layouts[l], (enum placement)how, host, &H, l * 7 + 1);
      char layout[96];
      int used = 0;
      for (int32_t g = 0; g < H; g++)
        used += snprintf(layout + used, sizeof layout - (size_t)used, "%s%d",
                         g ? "+" : "", (int)layouts[l][g]);
      snprintf(layout + used, sizeof layout - (size_t)used, " %s",
               placement_name[how]);
      for (size_t c = 0; c < (takes_blocks ? 5 : NCOUNTS); c++)
        for (int ip = 0; ip < (coll == CRNET_COLL_BCAST ? 1 : 2); ip++)
          for (int32_t root = 0; root < (sim_is_rooted(coll) ? p : 1); root++) {
            sim_case k = {.row = "two-level",
                          .coll = coll,
                          .p = p,
                          .count = counts[c],
                          .counts = takes_blocks ? blocks : NULL,
                          .root = root,
                          .in_place = ip ? SIM_IN_PLACE : SIM_NOT_IN_PLACE,
                          .host = host,
                          .nhosts = H,
                          .tuning = t};
            uint64_t seed = (uint64_t)c * 977 + l;
            for (int32_t r = 0; r < p && takes_blocks; r++)
              blocks[r] = c == 0   ? 0
                          : c == 1 ? 1
                          : c == 2 ? 7
                          : c == 3 ? (seed = mix(seed)) % 4
                                   : (seed = mix(seed)) % 40;
            for (int32_t r = 0; r < p && takes_blocks; r++)
              k.count = (r == 0 ? 0 : k.count) + blocks[r];
            sim_describe(&k, layout);
            sim_run(&k, NULL, NULL);
          }
    }
}

/* ring_round 0.1: rounds of the ring are cheap, so small levels take the
 * ring rather than the circulant. */
START_TEST(test_ring_levels) {
  static const crnet_collective colls[] = {
      CRNET_COLL_ALLREDUCE, CRNET_COLL_BCAST, CRNET_COLL_REDUCE,
      CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_ALLGATHER};
  crnet__tuning t;
  crnet__tuning_defaults(&t);
  t.base[CRNET__TUNING_RING_ROUND] = 0.1;
  every_layout(colls[_i], &t);
}
END_TEST

/* The levels' flat schedules give every rank of a call the same number of
 * rounds, for any root and any block sizes: the two-level builders take a
 * phase's length from sub-rank 0's schedule. */
START_TEST(test_levels_have_uniform_rounds) {
  static const char *const names[] = {"circulant", "ring"};
  static const crnet_collective colls[] = {
      CRNET_COLL_ALLREDUCE, CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_ALLGATHER,
      CRNET_COLL_BCAST, CRNET_COLL_REDUCE};
  uint64_t blocks[40];
  /* CRNET_SIM_QUICK=1: the p of sim_quick_ps, which take every branch the
   * two flat families take on p; the plain pass shows the property at
   * every p to 40 */
  bool quick = sim_quick();
  for (size_t n = 0; n < 2; n++)
    for (size_t c = 0; c < 5; c++)
      for (int32_t p = 1; p <= 40; p++)
        for (uint64_t m = 0; m < 70 && (!quick || sim_quick_p(p));
             m += m < 10 ? 1 : 13)
          for (int ip = 0; ip < 2; ip++)
            for (int32_t root = 0; root<p; root += p> 4 ? p / 3 : 1) {
              uint32_t first = 0;
              for (int32_t b = 0; b < p; b++)
                blocks[b] = (m + (uint64_t)b) % 5;
              for (int32_t r = 0; r < p; r++) {
                crnet__call call = {.coll = colls[c],
                                    .p = p,
                                    .rank = r,
                                    .count = m,
                                    .counts = blocks,
                                    .root = root,
                                    .in_place = ip,
                                    .commutative = true,
                                    .esize = 8};
                crnet__schedule s;
                EXPECT(crnet__build(names[n], &call, &s) == 0, "build");
                if (r == 0)
                  first = s.nrounds;
                EXPECT(s.nrounds == first,
                       "%s %s p=%d count=%llu root=%d: rank 0 has %u rounds, "
                       "rank %d %u",
                       names[n], crnet_collective_name(colls[c]), (int)p,
                       (unsigned long long)m, (int)root, first, (int)r,
                       s.nrounds);
                crnet__sched_free(&s);
              }
            }
}
END_TEST

START_TEST(test_auto_and_select) {
  int32_t host[16];
  crnet__call call = {.coll = CRNET_COLL_ALLREDUCE,
                      .p = 16,
                      .rank = 3,
                      .count = 4 << 20,
                      .commutative = true,
                      .esize = 4,
                      .host = host,
                      .nhosts = 2};
  const char *name;
  uint32_t id;
  double t;
  char why[300];
  double t2;
  for (int r = 0; r < 16; r++)
    host[r] = r % 2;
  /* Two hosts of 8, round robin, 16 MiB: the crossing carries a sixteenth
   * of what the flat schedules send across, and auto sees it. */
  ck_assert_int_eq(crnet__auto_choose(&call, &name, &t), 0);
  ck_assert_str_eq(name, "two-level");
  /* Host by host, rabenseifner crosses with its last, smallest pieces: the
   * same sixteenth, the same price, and it comes first in the list. */
  for (int r = 0; r < 16; r++)
    host[r] = r / 8;
  ck_assert_int_eq(crnet__auto_choose(&call, &name, &t), 0);
  ck_assert_str_eq(name, "rabenseifner");
  ck_assert_int_eq(crnet__twolevel_price(&call, &t2), 0);
  ck_assert(fabs(t - t2) <= 1e-9 * t2);
  /* One host, or one rank per host: nothing to gain, never priced. */
  call.nhosts = 1;
  for (int r = 0; r < 16; r++)
    host[r] = 0;
  ck_assert_int_eq(crnet__twolevel_price(&call, &t), 1);
  call.nhosts = 16;
  for (int r = 0; r < 16; r++)
    host[r] = r;
  ck_assert_int_eq(crnet__twolevel_price(&call, &t), 1);
  call.host = NULL;
  ck_assert_int_eq(crnet__twolevel_price(&call, &t), 1);
  ck_assert_int_eq(crnet__auto_choose(&call, &name, &t), 0);
  ck_assert_str_ne(name, "two-level");
  /* Chosen by name it still runs without a layout (one host). */
  ck_assert_int_eq(
      crnet__select("two-level", &call, &name, &id, why, sizeof why), 0);
  /* Not for non-commutative operators, nor for what it cannot do. */
  call.commutative = false;
  ck_assert_int_eq(
      crnet__select("two-level", &call, &name, &id, why, sizeof why),
      CRNET_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(why, "rank order"));
  call.commutative = true;
  call.coll = CRNET_COLL_SCAN;
  ck_assert_int_eq(
      crnet__select("two-level", &call, &name, &id, why, sizeof why),
      CRNET_EUNSUPPORTED);
  /* A layout naming a host without ranks is refused. */
  {
    crnet__schedule s;
    call.coll = CRNET_COLL_ALLREDUCE;
    call.host = host;
    call.nhosts = 17;
    ck_assert_int_eq(crnet__build("two-level", &call, &s), CRNET_EINVAL);
    host[5] = 40;
    call.nhosts = 16;
    ck_assert_int_eq(crnet__build("two-level", &call, &s), CRNET_EINVAL);
  }
}
END_TEST

int main(void) {
  TCase *tc;
  Suite *s = sim_suite("sim-twolevel", "twolevel", &tc);
  tcase_add_loop_test(tc, test_ring_levels, 0, 5);
  tcase_add_test(tc, test_levels_have_uniform_rounds);
  tcase_add_test(tc, test_auto_and_select);
  return sim_check_run(s);
}
