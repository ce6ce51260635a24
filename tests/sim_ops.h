/* The simulator tests' operators and data mixer (test_sim*.c): sum mod
 * 2^64, commutative; composition of affine maps x -> a*x + b mod 2^31-1
 * packed as (a << 32 | b), associative but not commutative, so a schedule
 * that combines out of rank order gives a different result; and a 64-bit
 * mixer (splitmix64's finaliser) for test data. */
#ifndef CRNET_TESTS_SIM_OPS_H
#define CRNET_TESTS_SIM_OPS_H

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

#endif
