/* Simulator tests for the two-level schedules (src/schedules/twolevel.c):
 * allreduce, bcast, reduce, reduce-scatter and allgather (equal and
 * irregular blocks, empty ones included) over many host layouts (even
 * and uneven hosts, ranks placed host by host, round-robin and at random),
 * counts from 0 up, in place or not, every root, with the built-in constants
 * and with constants under which the ring runs a level; each run in the
 * in-memory simulator and compared exactly with a serial reference.
 *
 * Also: the property the two-level builders rely on (circulant and ring
 * give every rank of a call the same number of rounds), and what auto does
 * with a layout.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"
#include "tuning.h"
#include "twolevel.h"

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

static uint64_t value(int32_t rank, uint64_t e) {
  return mix((uint64_t)rank << 40 ^ e ^ UINT64_C(0x7e0));
}

/* Host sizes of the layouts, 0-terminated. */
static const int32_t layouts[][6] = {
    {1},       {2},       {5},       {1, 1},    {2, 2},    {1, 3},
    {3, 1},    {3, 5, 1}, {4, 4},    {2, 7},    {7, 2},    {5, 1, 1},
    {3, 3, 3}, {1, 1, 1, 1}, {2, 2, 2, 2}, {6, 1, 6}, {4, 4, 4, 4},
    {8, 8},    {3, 4, 5}, {2, 3, 2, 3, 2}};
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
      int32_t o = (int32_t)((seed = mix(seed)) % (uint64_t)(r + 1)), t = host[r];
      host[r] = host[o];
      host[o] = t;
    }
  return p;
}

/* Checks the result of every rank against a serial reference. m: the
 * vector; blocks and P (p + 1 offsets): the ranks' blocks of a
 * reduce-scatter or allgather. */
static void check(crnet_collective coll, const crnet__sim_rank *rk,
                  int32_t p, uint64_t m, const uint64_t *blocks,
                  const uint64_t *P, int32_t root, const char *what) {
  uint64_t *ref = malloc((m ? m : 1) * sizeof *ref);
  EXPECT(ref, "out of memory");
  for (uint64_t e = 0; e < m; e++) {
    uint64_t v = 0;
    /* bcast and allgather check against value() below */
    if (coll != CRNET_COLL_BCAST && coll != CRNET_COLL_ALLGATHER)
      for (int32_t x = 0; x < p; x++)
        v += value(x, e);
    ref[e] = v;
  }
  for (int32_t r = 0; r < p; r++)
    switch (coll) {
    case CRNET_COLL_REDUCE_SCATTER:
      for (uint64_t e = 0; e < blocks[r]; e++)
        EXPECT(rk[r].recv[e] == ref[P[r] + e], "%s: rank %d element %llu",
               what, r, (unsigned long long)e);
      break;
    case CRNET_COLL_ALLGATHER:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < blocks[b]; e++)
          EXPECT(rk[r].recv[P[b] + e] == value(b, P[b] + e),
                 "%s: rank %d block %d element %llu", what, r, b,
                 (unsigned long long)e);
      break;
    case CRNET_COLL_BCAST:
      for (uint64_t e = 0; e < m; e++)
        EXPECT(rk[r].recv[e] == value(root, e), "%s: rank %d element %llu",
               what, r, (unsigned long long)e);
      break;
    default: /* allreduce; reduce at the root */
      if (coll == CRNET_COLL_REDUCE && r != root)
        break;
      for (uint64_t e = 0; e < m; e++)
        EXPECT(rk[r].recv[e] == ref[e], "%s: rank %d element %llu", what, r,
               (unsigned long long)e);
      break;
    }
  free(ref);
}

static void free_ranks(crnet__schedule *sc, crnet__sim_rank *rk, int32_t p) {
  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(sc);
  free(rk);
}

static void run(crnet_collective coll, const int32_t *host, int32_t H,
                int32_t p, uint64_t m, bool in_place, int32_t root,
                const crnet__tuning *tuning, const char *layout) {
  char what[256];
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  char err[512] = "";
  int rc;
  snprintf(what, sizeof what, "two-level %s, %s, count %llu%s, root %d",
           crnet_collective_name(coll), layout, (unsigned long long)m,
           in_place ? ", in place" : "", (int)root);
  EXPECT(sc && rk, "out of memory");
  for (int32_t r = 0; r < p; r++) {
    crnet__call call = {.coll = coll, .p = p, .rank = r, .count = m,
                        .root = root, .in_place = in_place,
                        .commutative = true, .esize = 8, .host = host,
                        .nhosts = H, .tuning = tuning};
    rc = crnet__build("two-level", &call, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
  }
  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    bool bcast = coll == CRNET_COLL_BCAST;
    uint64_t sn = bcast ? 0 : m;
    uint64_t rn = coll == CRNET_COLL_REDUCE && r != root && !in_place ? 0 : m;
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof *snd);
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof *rcv);
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = UINT64_C(0xdeadbeefdeadbeef);
    for (uint64_t e = 0; e < sn; e++)
      snd[e] = value(r, e);
    q->init_off = 0;
    q->init_count = 0;
    if (in_place && !bcast) {
      memcpy(rcv, snd, sn * sizeof *snd);
      q->init_count = sn;
    }
    if (bcast && r == root) {
      for (uint64_t e = 0; e < m; e++)
        rcv[e] = value(r, e);
      q->init_count = m;
    }
    q->sched = &sc[r];
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
  }
  rc = crnet__sim_run(rk, p, in_place, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);
  check(coll, rk, p, m, NULL, NULL, root, what);
  free_ranks(sc, rk, p);
}

static const uint64_t counts[] = {0, 1, 2, 3, 5, 8, 17, 64, 301};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* Reduce-scatter and allgather: rank r's block has blocks[r] elements;
 * the vector is their concatenation in rank order. */
static void run_blocks(crnet_collective coll, const int32_t *host, int32_t H,
                       int32_t p, const uint64_t *blocks, bool in_place,
                       const crnet__tuning *tuning, const char *layout) {
  bool rs = coll == CRNET_COLL_REDUCE_SCATTER;
  uint64_t P[65], m;
  char what[300], err[512] = "";
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  int rc;
  P[0] = 0;
  for (int32_t r = 0; r < p; r++)
    P[r + 1] = P[r] + blocks[r];
  m = P[p];
  snprintf(what, sizeof what, "two-level %s, %s, blocks %llu, %llu, ...%s",
           crnet_collective_name(coll), layout, (unsigned long long)blocks[0],
           (unsigned long long)(p > 1 ? blocks[1] : 0),
           in_place ? ", in place" : "");
  EXPECT(sc && rk, "out of memory");
  for (int32_t r = 0; r < p; r++) {
    crnet__call call = {.coll = coll, .p = p, .rank = r, .counts = blocks,
                        .in_place = in_place, .commutative = true,
                        .esize = 8, .host = host, .nhosts = H,
                        .tuning = tuning};
    rc = crnet__build("two-level", &call, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
  }
  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    uint64_t sn = rs ? m : blocks[r];
    uint64_t rn = rs ? (in_place ? m : blocks[r]) : m;
    uint64_t base = rs ? 0 : P[r];
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof *snd);
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof *rcv);
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = UINT64_C(0xdeadbeefdeadbeef);
    for (uint64_t e = 0; e < sn; e++)
      snd[e] = value(r, base + e);
    q->init_off = 0;
    q->init_count = 0;
    if (in_place) {
      memcpy(rcv + base, snd, sn * sizeof *snd);
      q->init_off = base;
      q->init_count = sn;
    }
    q->sched = &sc[r];
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
  }
  rc = crnet__sim_run(rk, p, in_place, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);
  check(coll, rk, p, m, blocks, P, 0, what);
  free_ranks(sc, rk, p);
}

static void every_layout(crnet_collective coll, const crnet__tuning *tuning) {
  int32_t host[64], H;
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
      if (coll == CRNET_COLL_REDUCE_SCATTER || coll == CRNET_COLL_ALLGATHER) {
        uint64_t blocks[64];
        for (int shape = 0; shape < 5; shape++)
          for (int ip = 0; ip < 2; ip++) {
            uint64_t seed = (uint64_t)shape * 977 + l;
            for (int32_t r = 0; r < p; r++)
              blocks[r] = shape == 0   ? 0
                          : shape == 1 ? 1
                          : shape == 2 ? 7
                          : shape == 3 ? (seed = mix(seed)) % 4
                                       : (seed = mix(seed)) % 40;
            run_blocks(coll, host, H, p, blocks, ip, tuning, layout);
          }
        continue;
      }
      for (size_t c = 0; c < NCOUNTS; c++)
        for (int ip = 0; ip < 2; ip++) {
          if (coll == CRNET_COLL_ALLREDUCE) {
            run(coll, host, H, p, counts[c], ip, 0, tuning, layout);
            continue;
          }
          if (coll == CRNET_COLL_BCAST && ip)
            continue; /* a bcast has no in place */
          for (int32_t root = 0; root < p; root++)
            run(coll, host, H, p, counts[c], ip, root, tuning, layout);
        }
    }
}

/* ring_round 0.1: rounds of the ring are cheap, so small levels take the
 * ring rather than the circulant. */
static void ring_tuning(crnet__tuning *t) {
  crnet__tuning_defaults(t);
  t->base[CRNET__TUNING_RING_ROUND] = 0.1;
}

START_TEST(test_allreduce) {
  crnet__tuning t;
  every_layout(CRNET_COLL_ALLREDUCE, NULL);
  ring_tuning(&t);
  every_layout(CRNET_COLL_ALLREDUCE, &t);
}
END_TEST

START_TEST(test_bcast) {
  crnet__tuning t;
  every_layout(CRNET_COLL_BCAST, NULL);
  ring_tuning(&t);
  every_layout(CRNET_COLL_BCAST, &t);
}
END_TEST

START_TEST(test_reduce) {
  crnet__tuning t;
  every_layout(CRNET_COLL_REDUCE, NULL);
  ring_tuning(&t);
  every_layout(CRNET_COLL_REDUCE, &t);
}
END_TEST

START_TEST(test_reduce_scatter) {
  crnet__tuning t;
  every_layout(CRNET_COLL_REDUCE_SCATTER, NULL);
  ring_tuning(&t);
  every_layout(CRNET_COLL_REDUCE_SCATTER, &t);
}
END_TEST

START_TEST(test_allgather) {
  crnet__tuning t;
  every_layout(CRNET_COLL_ALLGATHER, NULL);
  ring_tuning(&t);
  every_layout(CRNET_COLL_ALLGATHER, &t);
}
END_TEST

/* In place is each rank's own choice (it is not in the call's signature):
 * ranks that mix it must still agree on every round. Odd ranks in place,
 * even ranks not; the simulator runs without aliasing, so an in-place
 * rank's schedule must read its input from RECV alone (a reduce's
 * non-root ranks read SEND either way). */
static void run_mixed(crnet_collective coll, const int32_t *host, int32_t H,
                      int32_t p, uint64_t unit, int32_t root,
                      const char *layout) {
  bool blocks_call = coll == CRNET_COLL_REDUCE_SCATTER ||
                     coll == CRNET_COLL_ALLGATHER;
  uint64_t blocks[64], P[65], m;
  char what[300], err[512] = "";
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  int rc;
  EXPECT(sc && rk, "out of memory");
  P[0] = 0;
  for (int32_t r = 0; r < p; r++) {
    blocks[r] = blocks_call ? unit + (uint64_t)r % 3 : 0;
    P[r + 1] = P[r] + blocks[r];
  }
  m = blocks_call ? P[p] : unit;
  snprintf(what, sizeof what, "two-level %s, %s, mixed in place, %llu, root %d",
           crnet_collective_name(coll), layout, (unsigned long long)unit,
           (int)root);
  for (int32_t r = 0; r < p; r++) {
    bool ip = r % 2 == 1;
    crnet__call call = {.coll = coll, .p = p, .rank = r, .count = m,
                        .counts = blocks_call ? blocks : NULL, .root = root,
                        .in_place = ip, .commutative = true, .esize = 8,
                        .host = host, .nhosts = H};
    crnet__sim_rank *q = &rk[r];
    bool rs = coll == CRNET_COLL_REDUCE_SCATTER, ag = coll == CRNET_COLL_ALLGATHER;
    uint64_t base = ag ? P[r] : 0;
    uint64_t in = ag ? blocks[r] : m; /* this rank's input elements */
    uint64_t rn = rs ? (ip ? m : blocks[r])
                  : coll == CRNET_COLL_REDUCE && r != root && !ip ? 0
                                                                  : m;
    bool reads_send = !ip || (coll == CRNET_COLL_REDUCE && r != root);
    uint64_t *snd = malloc((in ? in : 1) * sizeof *snd);
    uint64_t *rcv = malloc((rn ? rn : 1) * sizeof *rcv);
    EXPECT(snd && rcv, "out of memory");
    rc = crnet__build("two-level", &call, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
    for (uint64_t e = 0; e < in; e++)
      snd[e] = value(r, base + e);
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = UINT64_C(0xdeadbeefdeadbeef);
    q->init_off = q->init_count = 0;
    if (!reads_send) {
      memcpy(rcv + base, snd, in * sizeof *snd);
      q->init_off = base;
      q->init_count = in;
    }
    q->sched = &sc[r];
    q->send = reads_send ? snd : NULL;
    q->send_count = reads_send ? in : 0;
    q->recv = rcv;
    q->recv_count = rn;
    if (!reads_send)
      free(snd);
  }
  rc = crnet__sim_run(rk, p, false, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);
  check(coll, rk, p, m, blocks, P, root, what);
  free_ranks(sc, rk, p);
}

START_TEST(test_mixed_in_place) {
  static const crnet_collective colls[] = {
      CRNET_COLL_ALLREDUCE, CRNET_COLL_REDUCE, CRNET_COLL_REDUCE_SCATTER,
      CRNET_COLL_ALLGATHER};
  int32_t host[64], H;
  for (size_t l = 0; l < NLAYOUTS; l++)
    for (int how = 0; how < NPLACEMENTS; how++) {
      int32_t p = place(layouts[l], (enum placement)how, host, &H, l * 7 + 1);
      char layout[64];
      snprintf(layout, sizeof layout, "layout %zu, %s", l,
               placement_name[how]);
      for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
        for (uint64_t unit = 0; unit < 40; unit += 13)
          for (int32_t root = 0; root < p; root += p > 1 ? p - 1 : 1)
            run_mixed(colls[c], host, H, p, unit, root, layout);
    }
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
  for (size_t n = 0; n < 2; n++)
    for (size_t c = 0; c < 5; c++)
      for (int32_t p = 1; p <= 40; p++)
        for (uint64_t m = 0; m < 70; m += m < 10 ? 1 : 13)
          for (int ip = 0; ip < 2; ip++)
            for (int32_t root = 0; root < p; root += p > 4 ? p / 3 : 1) {
              uint32_t first = 0;
              for (int32_t b = 0; b < p; b++)
                blocks[b] = (m + (uint64_t)b) % 5;
              for (int32_t r = 0; r < p; r++) {
                crnet__call call = {.coll = colls[c], .p = p, .rank = r,
                                    .count = m, .counts = blocks,
                                    .root = root, .in_place = ip,
                                    .commutative = true, .esize = 8};
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
  crnet__call call = {.coll = CRNET_COLL_ALLREDUCE, .p = 16, .rank = 3,
                      .count = 4 << 20, .commutative = true, .esize = 4,
                      .host = host, .nhosts = 2};
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

static Suite *suite(void) {
  Suite *s = suite_create("sim-twolevel");
  TCase *tc = tcase_create("twolevel");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_allreduce);
  tcase_add_test(tc, test_bcast);
  tcase_add_test(tc, test_reduce);
  tcase_add_test(tc, test_reduce_scatter);
  tcase_add_test(tc, test_allgather);
  tcase_add_test(tc, test_mixed_in_place);
  tcase_add_test(tc, test_levels_have_uniform_rounds);
  tcase_add_test(tc, test_auto_and_select);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(suite()); }
