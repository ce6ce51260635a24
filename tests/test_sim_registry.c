/* Simulator test over the registry: every row of crnet__algorithms[]
 * (algorithm.h, registry.c) x every collective its `colls` names x p in
 * 1..33, 48, 63, 64, 65, 100, 120, 128 x the collective's shapes, each
 * built through crnet__build from a crnet__call filled as the library's
 * entry points fill it (collectives.c, vector.c), run in the in-memory
 * simulator (sim.c) and compared element by element with one serial
 * reference per collective (sim_harness.c).
 *
 * This is where the schedules' correctness is tested; the family tests
 * (test_sim*.c) assert each family's rounds and volumes, through the same
 * harness, at their own p (up to 1000), and reach the builders' parameters
 * no row exposes. They cannot see a row that wires the
 * wrong builder, passes a field of the call wrongly, claims an order its
 * schedule does not keep, or a check that refuses too much or too little.
 * Here the row is all the test knows of a schedule, so a new row is
 * covered as soon as it is listed, and a new collective fails until it has
 * shapes and a reference below.
 *
 * Shapes: counts 0, 1, p-1, p, 3p+1 and a large odd one; block counts
 * equal (0, 1, 3 each), the runtime's split of 3p+1 (uneven by one),
 * (7b mod 5) with empty blocks among them, everything in block p/3, and
 * random with half of them empty (allgather with and without
 * displacements, which the schedule must ignore: it works on packed
 * blocks); all-to-all 0, 1, 3 (and p-1, p+1 up to p = 33) per block;
 * alltoallv four pair shapes with gaps in both buffers; roots 0, p-1 and
 * p/2, and up to p = 16 every root (but for the largest count); scan and
 * exscan.
 *
 * In place, as a program can ask for it (sim_harness.h): every rank or
 * none for the symmetric collectives, and for two-level also the odd ranks
 * only (but for the largest count); the root or none for reduce, gather
 * and scatter (the entry points refuse it elsewhere); always for bcast.
 *
 * Operators: sum mod 2^64 always; for the reducing collectives also the
 * composition of affine maps x -> a*x + b mod 2^31-1 (associative, not
 * commutative) when the row's keeps_order says the call keeps rank order,
 * and the result must then be the rank-order fold exactly. crnet__select
 * must accept a non-commutative call exactly when keeps_order says so.
 *
 * Refusals: a call a row's check refuses is skipped, after crnet__select
 * has refused it with CRNET_EUNSUPPORTED; which calls are refused is
 * written down below (refusal_expected), so a check that starts refusing
 * more, or less, fails the test instead of thinning it.
 *
 * Hosts: the rows that read call->host (host_aware) run with one host,
 * two halves, three hosts round-robin, three uneven hosts shuffled and
 * many hosts of 1..4 ranks shuffled; every other row must build the very
 * same schedule with a layout as without one, which is checked rank by
 * rank.
 *
 * And crnet__select: what it accepts must build, on every rank, at the p
 * up to 64 the matrix leaves out (test_select_builds).
 *
 * Which p cross what. Every shape runs at every p of the matrix. At the p
 * where the builders change course (every p to 17, 23, 24, 25, 31, 32, 33,
 * 63, 64, 65, 128: plain_thin says why) each shape is crossed with every
 * root, in-place choice, scan kind and operator above; at the p in between
 * (18..22, 26..30, 48, 100, 120) each shape runs in one of those
 * combinations, a different one per shape and p, so that together they
 * still run each (thin_at).
 *
 * CRNET_SIM_QUICK=1 (the sanitizer pass, whose point is memory safety):
 * the p of sim_quick_ps (sim_harness.h: p = 1..9, 12, 13, 15, 16, 17, 24,
 * 25, 31, 32, 33, every branch the builders take on p), crossed at 1..9,
 * 16, 17 and 32 and thinned at the others; test_select_builds to p = 33.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithm.h"
#include "check_main.h"
#include "sim_harness.h"

/* The largest p the host arrays hold. */
#define MAX_P 128

static bool quick;

/* ------------------------------------------------------------------------
 * What the registry is expected to refuse, and which rows read hosts
 */

/* The calls a row's check refuses, as the rows document them. A check
 * added, widened or dropped must be written here too. */
static bool refusal_expected(const char *row, crnet_collective coll,
                             int32_t p) {
  return strcmp(row, "hypercube") == 0 && coll == CRNET_COLL_ALLTOALL &&
         (p & (p - 1)) != 0;
}

/* The rows whose schedules depend on call->host (twolevel.h). */
static bool host_aware(const crnet__algorithm *row) {
  return strcmp(row->name, "two-level") == 0;
}

/* ------------------------------------------------------------------------
 * p, host layouts, shapes
 */

/* The plain pass: every p to 33, then 48, the powers of two 64 and 128
 * with their neighbours, 100 and 120 = 5!. */
static const int32_t plain_ps[] = {1,  2,  3,  4,  5,  6,  7,  8,   9,   10,
                                   11, 12, 13, 14, 15, 16, 17, 18,  19,  20,
                                   21, 22, 23, 24, 25, 26, 27, 28,  29,  30,
                                   31, 32, 33, 48, 63, 64, 65, 100, 120, 128};
/* ... of which these are thinned: every shape still runs, but in one of
 * its combinations of root, in place and scan kind (the next shape and p
 * take the next one, so that the thinned p together run them all) rather
 * than in each. The builders branch on p being 1 or 2, odd or even, a
 * power of two or not (the fold, and what it leaves at 2^d + 1 and
 * 2^d - 1), on n! (the star's n, its groups folded from n! + 1) and k^L
 * (the k-nomial tree's levels), and on nothing else: the circulant's skips
 * follow p's binary form, not its primes. So every p to 17, 23, 24, 25,
 * 31, 32, 33, 63, 64, 65 and 128 is crossed with everything, and the p in
 * between, 48, 100 (a fold onto 64) and 120 (5!, the star unfolded, as at
 * 6 and 24) are thinned. */
static const int32_t plain_thin[] = {18, 19, 20, 21, 22,  26, 27,
                                     28, 29, 30, 48, 100, 120};
/* CRNET_SIM_QUICK=1, the sanitizer pass: sim_quick_ps (sim_harness.h says
 * which branch each p is for), thinned as above where a smaller p already
 * takes the same branches crossed with everything: every p to 9, 16, 17
 * and 32 are crossed. */
static const int32_t quick_thin[] = {12, 13, 15, 24, 25, 31, 33};

static const int32_t *ps;
static size_t nps;
static const int32_t *thin_ps;
static size_t nthin;

/* Whether p runs thinned. */
static bool thin_at(int32_t p) {
  for (size_t i = 0; i < nthin; i++)
    if (thin_ps[i] == p)
      return true;
  return false;
}

enum layout { ONE_HOST, HALVES, ROUND_ROBIN, UNEVEN, MANY, NLAYOUTS };
static const char *const layout_name[] = {
    "one host", "two hosts by halves", "three hosts round-robin",
    "three uneven hosts, shuffled", "hosts of 1..4 ranks, shuffled"};

/* host[0..p) for the layout: the number of hosts, or 0 when p has too few
 * ranks for it (every host needs one). One host is host NULL, as the
 * runtime passes it. */
static void shuffle(int32_t p, int32_t *host) {
  for (int32_t r = p - 1; r > 0; r--) {
    int32_t o =
        (int32_t)(mix((uint64_t)p << 32 | (uint64_t)r) % (uint64_t)(r + 1));
    int32_t t = host[r];
    host[r] = host[o];
    host[o] = t;
  }
}

static int32_t layout_make(enum layout l, int32_t p, int32_t *host) {
  int32_t sizes[3], n = 0;
  switch (l) {
  case ONE_HOST:
    return 1;
  case HALVES:
    if (p < 2)
      return 0;
    for (int32_t r = 0; r < p; r++)
      host[r] = r < (p + 1) / 2 ? 0 : 1;
    return 2;
  case ROUND_ROBIN:
    if (p < 3)
      return 0;
    for (int32_t r = 0; r < p; r++)
      host[r] = r % 3;
    return 3;
  case UNEVEN:
    if (p < 3)
      return 0;
    /* one rank alone, the rest two thirds and one third */
    sizes[0] = 1;
    sizes[2] = (p - 1) / 3 > 0 ? (p - 1) / 3 : 1;
    sizes[1] = p - 1 - sizes[2];
    for (int32_t g = 0, r = 0; g < 3; g++)
      for (int32_t i = 0; i < sizes[g]; i++)
        host[r++] = g;
    shuffle(p, host);
    return 3;
  default:
    if (p < 4)
      return 0;
    /* many hosts of 1 to 4 ranks */
    for (int32_t r = 0, left = 0; r < p; r++, left--) {
      if (left == 0) {
        left = 1 + (int32_t)(mix((uint64_t)p << 32 | (uint64_t)n) % 4);
        n++;
      }
      host[r] = n - 1;
    }
    shuffle(p, host);
    return n;
  }
}

#define NBLOCK_SHAPES 7
static const char *const block_shape_name[NBLOCK_SHAPES] = {
    "blocks empty",
    "blocks of 1",
    "blocks of 3",
    "blocks of 3p+1 split",
    "blocks 7b mod 5",
    "everything in block p/3",
    "random blocks, half empty"};

static void block_shape(int shape, int32_t p, uint64_t *c) {
  for (int32_t b = 0; b < p; b++) {
    uint64_t off, h = mix((uint64_t)p << 32 | (uint64_t)b);
    switch (shape) {
    case 0:
      c[b] = 0;
      break;
    case 1:
      c[b] = 1;
      break;
    case 2:
      c[b] = 3;
      break;
    case 3:
      crnet__block_range(3 * (uint64_t)p + 1, p, b, &off, &c[b]);
      break;
    case 4:
      c[b] = (uint64_t)b * 7 % 5;
      break;
    case 5:
      c[b] = b == p / 3 ? 2 * (uint64_t)p + 1 : 0;
      break;
    default:
      c[b] = h % 2 ? h % 9 : 0;
      break;
    }
  }
}

/* ------------------------------------------------------------------------
 * One case
 */

typedef struct kase {
  sim_case c;
  size_t row_index;
  const crnet__algorithm *row;
  const char *shape; /* the block or pair shape's name, or NULL */
  enum layout layout;
} kase;

/* The in-place choices a program has for the collective: none, or every
 * rank (the root for a rooted one); for two-level also the odd ranks only,
 * which twolevel.c promises: in place is each rank's own choice, not in the
 * call's signature. (The flat rows do not all keep it: ring's allreduce
 * and bruck's all-to-all at p = 2 pair the ranks' rounds differently.) */
static int in_place_modes(const kase *k) {
  switch (k->c.coll) {
  case CRNET_COLL_BARRIER:
  case CRNET_COLL_ALLTOALLV: /* refused by vector.c */
  case CRNET_COLL_BCAST:     /* always in place, by collectives.c */
    return 1;
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    return 2;
  default:
    return host_aware(k->row) ? 3 : 2;
  }
}

static void describe(kase *k) {
  char extra[160];
  snprintf(extra, sizeof extra, "%s%s%s", k->shape ? k->shape : "",
           k->shape ? ", " : "", layout_name[k->layout]);
  sim_describe(&k->c, extra);
}

/* ------------------------------------------------------------------------
 * Counters: cases simulated, per row and collective, and refusals
 */

static long simulated, simulated_affine, refused_cases;
static long *pair_cases;     /* [row * CRNET_COLL_COUNT + coll] */
static long refused_triples; /* (row, collective, p) refused */
static double seconds_per_coll[CRNET_COLL_COUNT];

/* A layout to build every host-blind row with, for p >= 2: the
 * schedule must not change. */
static int32_t probe_host[MAX_P];
static int32_t probe_nhosts;

static void run(kase *k) {
  k->c.probe_host = !host_aware(k->row) && k->c.p >= 2 ? probe_host : NULL;
  k->c.probe_nhosts = probe_nhosts;
  sim_run(&k->c, NULL, NULL);
  simulated++;
  simulated_affine += k->c.affine;
  pair_cases[k->row_index * CRNET_COLL_COUNT + k->c.coll]++;
}

/* One shape: refused as expected, or run with the sum and, where the row
 * keeps rank order for it, with the affine maps. */
static void attempt(kase *k) {
  const char *name;
  uint32_t id;
  char why[512] = "";
  crnet__call call;
  bool refused, expected, ordered = false;
  int rc;
  k->c.affine = false;
  describe(k);
  call = sim_call_of(&k->c, 0);
  refused = k->row->check != NULL && k->row->check(&call, why, sizeof why) != 0;
  expected = refusal_expected(k->row->name, k->c.coll, k->c.p);
  EXPECT(!refused || expected,
         "%s: the row's check refuses it (%s), which refusal_expected does "
         "not name",
         k->c.what, why);
  EXPECT(refused || !expected,
         "%s: the row's check accepts it, where refusal_expected names a "
         "refusal",
         k->c.what);
  rc = crnet__select(k->row->name, &call, &name, &id, why, sizeof why);
  if (refused) {
    EXPECT(rc == CRNET_EUNSUPPORTED,
           "%s: the check refuses it, crnet__select returns %d", k->c.what, rc);
    refused_cases++;
    return;
  }
  EXPECT(rc == 0 && strcmp(name, k->row->name) == 0 && id == k->row->id,
         "%s: crnet__select: %d (%s)", k->c.what, rc, why);
  run(k);
  if (!sim_is_reducing(k->c.coll))
    return;
  call.commutative = false;
  if (k->row->keeps_order != NULL)
    EXPECT(k->row->keeps_order(&call, &ordered) == 0, "%s: keeps_order",
           k->c.what);
  rc = crnet__select(k->row->name, &call, &name, &id, why, sizeof why);
  EXPECT(ordered ? rc == 0 : rc == CRNET_EUNSUPPORTED,
         "%s: keeps_order says %s, crnet__select of a non-commutative "
         "operator returns %d (%s)",
         k->c.what, ordered ? "ordered" : "not ordered", rc, why);
  if (ordered) {
    k->c.affine = true;
    describe(k);
    run(k);
  }
}

/* Adds v to list[0..*n) unless it is there. */
static void add_unique(uint64_t *list, int *n, uint64_t v) {
  for (int i = 0; i < *n; i++)
    if (list[i] == v)
      return;
  list[(*n)++] = v;
}

/* Every shape of the row's collective at p and a layout, past the roots,
 * in-place choices and scan kinds. */
static void shapes(kase *k) {
  int32_t p = k->c.p, roots[16];
  uint64_t sizes[6], *blocks = malloc((size_t)p * sizeof *blocks),
                     *displs = malloc((size_t)p * sizeof *displs);
  int nroots = 0, nsizes = 0, nmodes = in_place_modes(k);
  int nshapes = 1, nkinds = k->c.coll == CRNET_COLL_SCAN ? 2 : 1;
  EXPECT(blocks && displs, "out of memory");
  roots[nroots++] = 0;
  if (sim_is_rooted(k->c.coll)) {
    if (p - 1 != 0)
      roots[nroots++] = p - 1;
    if (p / 2 != 0 && p / 2 != p - 1)
      roots[nroots++] = p / 2;
    /* up to p = 16 every root, past the largest count */
    for (int32_t x = 1; p <= 16 && x < p - 1; x++)
      if (x != p / 2)
        roots[nroots++] = x;
  }
  switch (k->c.coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_BCAST:
  case CRNET_COLL_SCAN:
    add_unique(sizes, &nsizes, 0);
    add_unique(sizes, &nsizes, 1);
    add_unique(sizes, &nsizes, (uint64_t)p - 1);
    add_unique(sizes, &nsizes, (uint64_t)p);
    add_unique(sizes, &nsizes, 3 * (uint64_t)p + 1);
    /* a large odd one, so that the pipelined chains run in several
     * pieces; smaller as p grows, to keep p·count near 40000 */
    add_unique(sizes, &nsizes,
               (40000 / (uint64_t)p > 3 * (uint64_t)p + 3
                    ? 40000 / (uint64_t)p
                    : 3 * (uint64_t)p + 3) |
                   1);
    nshapes = nsizes;
    break;
  case CRNET_COLL_ALLTOALL:
    /* the ring moves p^2(p-1)/2 blocks: larger blocks for small p only */
    add_unique(sizes, &nsizes, 0);
    add_unique(sizes, &nsizes, 1);
    add_unique(sizes, &nsizes, 3);
    if (p <= 33) {
      add_unique(sizes, &nsizes, (uint64_t)p - 1);
      add_unique(sizes, &nsizes, (uint64_t)p + 1);
    }
    nshapes = nsizes;
    break;
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    nshapes = NBLOCK_SHAPES;
    break;
  case CRNET_COLL_ALLTOALLV:
    nshapes = SIM_NPAIR_SHAPES;
    break;
  case CRNET_COLL_BARRIER:
    break;
  default:
    ck_abort_msg("collective %s has no shapes and no reference in this test",
                 crnet_collective_name(k->c.coll));
  }
  for (int s = 0; s < nshapes; s++) {
    sim_vargs *v = NULL;
    k->shape = NULL;
    k->c.counts = NULL;
    k->c.displs = NULL;
    k->c.uniform = false;
    k->c.count = nsizes > 0 ? sizes[s] : 0;
    if (sim_takes_blocks(k->c.coll)) {
      uint64_t total = 0, at = 0;
      block_shape(s, p, blocks);
      k->c.uniform = true;
      for (int32_t b = 0; b < p; b++) {
        total += blocks[b];
        k->c.uniform = k->c.uniform && blocks[b] == blocks[0];
      }
      /* gather and scatter: the count of each rank when the program gave
       * one (vector.c); the others: the total */
      k->c.count = sim_is_rooted(k->c.coll) && k->c.uniform ? blocks[0] : total;
      k->c.counts = blocks;
      k->shape = block_shape_name[s];
      /* allgatherv's layout, blocks in reverse order with gaps: only the
       * executor's unpacking reads it */
      if (k->c.coll == CRNET_COLL_ALLGATHER && !k->c.uniform) {
        for (int32_t b = p - 1; b >= 0; b--) {
          displs[b] = at + 1;
          at += blocks[b] + 1;
        }
        k->c.displs = displs;
      }
    }
    if (k->c.coll == CRNET_COLL_ALLTOALLV) {
      v = sim_vargs_make(s, p);
      k->c.v = v;
      k->shape = sim_pair_shape_name[s];
    }
    /* the largest count: three roots, and not the odd ranks in place */
    bool largest = nsizes > 0 && s == nsizes - 1;
    int nr = largest && nroots > 3 ? 3 : nroots;
    int nm = largest && nmodes > 2 ? 2 : nmodes;
    int ncombos = nr * nm * nkinds;
    for (int c = 0; c < ncombos; c++) {
      /* thinned: one combination, another for the next shape and p, so
       * that the thinned p together still run each of them */
      if (thin_at(p) && c != (s + p) % ncombos)
        continue;
      k->c.root = roots[c / (nm * nkinds)];
      k->c.in_place = (enum sim_in_place)(c / nkinds % nm);
      k->c.exclusive = c % nkinds == 1;
      attempt(k);
    }
    sim_vargs_free(v, p);
    k->c.v = NULL;
  }
  free(blocks);
  free(displs);
}

/* Every row that does the collective, at every p and layout. */
static void matrix(crnet_collective coll) {
  struct timespec t0, t1;
  int32_t *host = malloc(sizeof *host * MAX_P);
  EXPECT(host, "out of memory");
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *row = crnet__algorithms[i];
    if ((row->colls & CRNET__COLL_BIT(coll)) == 0)
      continue;
    for (size_t pi = 0; pi < nps; pi++) {
      int32_t p = ps[pi];
      long ran = pair_cases[i * CRNET_COLL_COUNT + coll],
           refused = refused_cases;
      EXPECT(p <= MAX_P, "p = %d: the host arrays hold %d", (int)p, MAX_P);
      probe_nhosts = layout_make(p >= 3 ? UNEVEN : HALVES, p, probe_host);
      for (int l = 0; l < NLAYOUTS; l++) {
        kase k = {.c = {.row = row->name, .coll = coll, .p = p},
                  .row_index = i,
                  .row = row,
                  .layout = (enum layout)l};
        if (l != ONE_HOST && !host_aware(row))
          break;
        k.c.nhosts = layout_make((enum layout)l, p, host);
        if (k.c.nhosts == 0)
          continue;
        k.c.host = l == ONE_HOST ? NULL : host;
        shapes(&k);
      }
      /* every p is either simulated or refused as a whole */
      if (refused_cases > refused) {
        EXPECT(pair_cases[i * CRNET_COLL_COUNT + coll] == ran,
               "row '%s' %s p=%d: some shapes refused, others not", row->name,
               crnet_collective_name(coll), (int)p);
        refused_triples++;
      } else {
        EXPECT(pair_cases[i * CRNET_COLL_COUNT + coll] > ran,
               "row '%s' %s p=%d: nothing simulated", row->name,
               crnet_collective_name(coll), (int)p);
      }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  seconds_per_coll[coll] =
      (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  free(host);
}

START_TEST(test_collective) { matrix((crnet_collective)_i); }
END_TEST

/* Whether the matrix runs p. */
static bool in_matrix(int32_t p) {
  for (size_t i = 0; i < nps; i++)
    if (ps[i] == p)
      return true;
  return false;
}

/* What crnet__select accepts it can build: every schedule, every collective
 * it names, every rank, with and without IN_PLACE, three roots, counts 0
 * and 6, exscan too (alltoallv: irregular counts, packed), at the p up to 64
 * that the matrix, which builds what it selects, does not run.
 * crnet_comm_set_schedule refuses by crnet__select, so a gap here would be a
 * schedule that set_schedule accepts and then every call refuses.
 * CRNET_SIM_QUICK=1: the p up to the quick matrix's largest, 33; the
 * builders' memory is what the sanitizers are for, and beyond 33 they take
 * no branch they did not take below (the plain pass builds to 64). */
START_TEST(test_select_builds) {
  uint64_t counts[64], displs[64];
  int32_t top = quick ? ps[nps - 1] : 64;
  int built = 0;
  for (size_t i = 0; crnet__schedule_name(i) != NULL; i++) {
    const char *nm = crnet__schedule_name(i);
    for (int coll = 0; coll < CRNET_COLL_COUNT; coll++) {
      if (!crnet__schedule_known(nm, (crnet_collective)coll))
        continue;
      for (int32_t p = 1; p <= top; p++) {
        if (in_matrix(p))
          continue;
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
                              .root = rt == 0   ? 0
                                      : rt == 1 ? p / 2
                                                : p - 1,
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
            /* EXPECT, not ck_assert: Check would record each of the
             * million passing builds */
            EXPECT(rc == 0, "%s %s p=%d rank %d: selected but not built (%d)",
                   nm, crnet_collective_name((crnet_collective)coll), p, r, rc);
            crnet__sched_free(&s);
            built++;
          }
        }
      }
    }
  }
  ck_assert_int_gt(built, quick ? 10000 : 100000);
}
END_TEST

/* Runs last: every (row, collective) the registry names was simulated,
 * and the refusals were exactly the expected ones. */
START_TEST(test_every_row_covered) {
  long bits = 0, covered = 0, expected_triples = 0;
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *row = crnet__algorithms[i];
    printf("  %-20s", row->name);
    for (int c = 0; c < CRNET_COLL_COUNT; c++) {
      long n = pair_cases[i * CRNET_COLL_COUNT + (size_t)c];
      if ((row->colls & CRNET__COLL_BIT(c)) == 0)
        continue;
      bits++;
      covered += n > 0;
      printf(" %s %ld", crnet_collective_name((crnet_collective)c), n);
      for (size_t pi = 0; pi < nps; pi++)
        expected_triples +=
            refusal_expected(row->name, (crnet_collective)c, ps[pi]);
    }
    printf("\n");
  }
  ck_assert_int_gt(bits, 0);
  ck_assert_int_eq(covered, bits);
  ck_assert_int_gt(expected_triples, 0);
  ck_assert_int_eq(refused_triples, expected_triples);
  printf("%ld (row, collective) pairs of %zu rows, all simulated; %ld "
         "(row, collective, p) refused as expected (%ld cases)\n",
         covered, crnet__nalgorithms, refused_triples, refused_cases);
}
END_TEST

int main(void) {
  struct timespec t0, t1;
  TCase *tc;
  Suite *s = sim_suite("sim-registry", "registry", &tc);
  int rc;
  quick = sim_quick();
  ps = quick ? sim_quick_ps : plain_ps;
  nps = quick ? sim_quick_nps : sizeof plain_ps / sizeof plain_ps[0];
  thin_ps = quick ? quick_thin : plain_thin;
  nthin = quick ? sizeof quick_thin / sizeof quick_thin[0]
                : sizeof plain_thin / sizeof plain_thin[0];
  pair_cases =
      calloc(crnet__nalgorithms * CRNET_COLL_COUNT, sizeof *pair_cases);
  if (pair_cases == NULL)
    return EXIT_FAILURE;
  tcase_add_loop_test(tc, test_collective, 0, CRNET_COLL_COUNT);
  tcase_add_test(tc, test_select_builds);
  tcase_add_test(tc, test_every_row_covered);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rc = sim_check_run(s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (int c = 0; c < CRNET_COLL_COUNT; c++)
    printf("  %-15s %6.1f s\n", crnet_collective_name((crnet_collective)c),
           seconds_per_coll[c]);
  printf("simulated %ld collectives (%ld with the non-commutative operator) "
         "over %zu values of p in %.1f s%s\n",
         simulated, simulated_affine, nps,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         quick ? " (CRNET_SIM_QUICK)" : "");
  free(pair_cases);
  return rc;
}
