/* What the simulator tests (test_sim*.c) share: their operators, sum mod
 * 2^64, commutative, and composition of affine maps x -> a*x + b mod 2^31-1
 * packed as (a << 32 | b), associative but not commutative, so a schedule
 * that combines out of rank order gives a different result; a 64-bit mixer
 * (splitmix64's finaliser) and a generator for test data; the data of a
 * reduction; and the block shapes the families are tried on. */
#ifndef CRNET_TESTS_SIM_OPS_H
#define CRNET_TESTS_SIM_OPS_H

#include <stdbool.h>
#include <stdint.h>

#define PRIME UINT64_C(2147483647)

static inline uint64_t op_sum(uint64_t l, uint64_t r) { return l + r; }

/* (l then r) as maps: r(l(x)) = ar*(al*x + bl) + br. */
static inline uint64_t op_affine(uint64_t l, uint64_t r) {
  uint64_t al = l >> 32, bl = l & 0xffffffffu, ar = r >> 32,
           br = r & 0xffffffffu;
  uint64_t a = ar * al % PRIME, b = (ar * bl + br) % PRIME;
  return a << 32 | b;
}

static inline uint64_t mix(uint64_t x) {
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

/* Each test program's own sequence, from 1: the cases it makes are the
 * same on every run. */
static uint64_t sim_rng = 1;
static inline uint64_t rnd(uint64_t n) {
  sim_rng = mix(sim_rng);
  return n ? sim_rng % n : 0;
}

/* Element e of rank x's vector in a reduction: random 64-bit values for the
 * sum (a contribution lost or counted twice changes it), an affine map with
 * a != 0 for the affine operator. */
static inline uint64_t sim_value(int32_t rank, uint64_t e, bool affine) {
  uint64_t h = mix((uint64_t)rank << 40 ^ e ^ UINT64_C(0x5eed));
  if (!affine)
    return h;
  return (1 + (h & 0xffffffffu) % (PRIME - 1)) << 32 | (h >> 32) % PRIME;
}

/* Regular total counts for p ranks: 0, 1, p-1, p, p+1 and a large odd one,
 * total/p but at least min_big, so that p * count stays near `total`. */
static inline int sim_counts_for(int32_t p, uint64_t total, uint64_t min_big,
                                 uint64_t out[6]) {
  uint64_t big = total / (uint64_t)p;
  if (big < min_big)
    big = min_big;
  out[0] = 0;
  out[1] = 1;
  out[2] = (uint64_t)p - 1;
  out[3] = (uint64_t)p;
  out[4] = (uint64_t)p + 1;
  out[5] = big | 1;
  return 6;
}

/* Irregular block counts c[0..p) of shape 0 (random sizes near total/p^2),
 * 1 (mostly zeros), 2 (all data in the last block), 3 (one block of 37 at
 * `at`, the others empty). */
static inline void sim_irregular(int32_t p, int shape, uint64_t total,
                                 int32_t at, uint64_t *c) {
  for (int32_t b = 0; b < p; b++) {
    switch (shape) {
    case 0:
      c[b] = rnd(2 * (total / (uint64_t)p / (uint64_t)p + 3));
      break;
    case 1:
      c[b] = rnd(3) == 0 ? rnd(9) : 0;
      break;
    default:
      c[b] = 0;
    }
  }
  if (shape == 2)
    c[p - 1] = 2 * (uint64_t)p + 1;
  if (shape == 3)
    c[at] = 37;
}

#endif
