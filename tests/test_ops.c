/* Unit tests for the reduction kernels and the operator table (src/schedules/
 * ops.c).
 *
 * Every kernel is checked against a plain scalar reference written here from
 * the definitions, not from ops.c: integer results are computed in 64-bit
 * unsigned arithmetic and masked to the element width; float results in
 * double and rounded once to float (double has 53 >= 2*24+2 bits, so that
 * double rounding equals the correctly rounded float result); the 16-bit
 * conversions by searching the ordered list of 16-bit values for the nearest
 * one. Inputs are pseudo-random from a fixed seed, so a failure reproduces.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "ops.h"

/* ------------------------------------------------------------------------
 * Helpers
 */

/* splitmix64: small, good enough, and the same sequence everywhere. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed) { rng_state = seed; }

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint32_t bits_of_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t bits_of_double(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double double_of_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static bool half_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static bool bf16_is_nan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

#define NDT CRNET_DATATYPE_COUNT
#define NOP CRNET_OP_BUILTIN_COUNT

/* ------------------------------------------------------------------------
 * Reference conversions, from the format definitions.
 */

/* Magnitude of a non-negative half pattern up to 0x7c00; 0x7c00 stands for
 * 2^16, the value the next pattern would have if the exponent were
 * unbounded, which is what IEEE rounding to infinity is defined against. */
static double half_magnitude(uint16_t h) {
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0)
    return ldexp((double)m, -24);
  return ldexp((double)(1024u + m), (int)e - 25);
}

static float ref_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  if (half_is_nan(h)) /* payload moved up, quiet bit set */
    return float_of_bits(sign | 0x7fc00000u | ((uint32_t)(h & 0x3ffu) << 13));
  if ((h & 0x7fffu) == 0x7c00u)
    return sign ? -INFINITY : INFINITY;
  float mag = (float)half_magnitude(h & 0x7fffu);
  return sign ? -mag : mag;
}

/* Nearest of two neighbours lo < x < hi with values vlo, vhi; ties to the
 * even pattern. */
static unsigned nearest(double x, unsigned lo, double vlo, double vhi) {
  double dlo = x - vlo, dhi = vhi - x;
  if (dlo < dhi)
    return lo;
  if (dhi < dlo)
    return lo + 1;
  return (lo & 1u) ? lo + 1 : lo;
}

static uint16_t ref_float_to_half(float f) {
  uint32_t x = bits_of_float(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  if (isnan(f))
    return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  double a = fabs((double)f);
  /* Largest pattern lo in [0, 0x7c00] whose magnitude is <= a. */
  unsigned lo = 0, hi = 0x7c00u;
  while (lo < hi) {
    unsigned mid = (lo + hi + 1) / 2;
    if (half_magnitude((uint16_t)mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == 0x7c00u || half_magnitude((uint16_t)lo) == a)
    return (uint16_t)(sign | lo);
  return (uint16_t)(sign | nearest(a, lo, half_magnitude((uint16_t)lo),
                                   half_magnitude((uint16_t)(lo + 1))));
}

/* Same idea for bfloat16: pattern b is the float with bits b << 16, and
 * 0x7f80 stands for 2^128. */
static double bf16_magnitude(uint16_t b) {
  if (b == 0x7f80u)
    return ldexp(1.0, 128);
  return (double)float_of_bits((uint32_t)b << 16);
}

static uint16_t ref_float_to_bfloat16(float f) {
  uint32_t x = bits_of_float(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  if (isnan(f))
    return (uint16_t)((x >> 16) | 0x0040u);
  double a = fabs((double)f);
  unsigned lo = 0, hi = 0x7f80u;
  while (lo < hi) {
    unsigned mid = (lo + hi + 1) / 2;
    if (bf16_magnitude((uint16_t)mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == 0x7f80u || bf16_magnitude((uint16_t)lo) == a)
    return (uint16_t)(sign | lo);
  return (uint16_t)(sign | nearest(a, lo, bf16_magnitude((uint16_t)lo),
                                   bf16_magnitude((uint16_t)(lo + 1))));
}

/* ------------------------------------------------------------------------
 * Reference reduction.
 */

static bool dt_is_int(crnet_datatype dt) { return dt <= CRNET_UINT64; }
static bool dt_is_signed(crnet_datatype dt) { return dt <= CRNET_INT64; }

static size_t dt_size(crnet_datatype dt) {
  static const size_t size[NDT] = {1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 1};
  return size[dt];
}

/* Raw bits of element i, zero-extended. */
static uint64_t load_bits(crnet_datatype dt, const void *buf, size_t i) {
  switch (dt_size(dt)) {
  case 1:
    return ((const uint8_t *)buf)[i];
  case 2:
    return ((const uint16_t *)buf)[i];
  case 4:
    return ((const uint32_t *)buf)[i];
  default:
    return ((const uint64_t *)buf)[i];
  }
}

static void store_bits(crnet_datatype dt, void *buf, size_t i, uint64_t v) {
  switch (dt_size(dt)) {
  case 1:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case 2:
    ((uint16_t *)buf)[i] = (uint16_t)v;
    break;
  case 4:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)buf)[i] = v;
    break;
  }
}

static uint64_t width_mask(crnet_datatype dt) {
  unsigned w = (unsigned)dt_size(dt) * 8;
  return w == 64 ? UINT64_MAX : (UINT64_C(1) << w) - 1;
}

/* Signed value of a raw integer element. */
static int64_t as_signed(crnet_datatype dt, uint64_t v) {
  unsigned w = (unsigned)dt_size(dt) * 8;
  if (w < 64 && ((v >> (w - 1)) & 1u))
    v |= ~width_mask(dt);
  int64_t s;
  memcpy(&s, &v, sizeof s);
  return s;
}

static uint64_t ref_int(crnet_op op, crnet_datatype dt, uint64_t a,
                        uint64_t b) {
  uint64_t m = width_mask(dt);
  bool less; /* a < b in the type's own order */
  if (dt_is_signed(dt))
    less = as_signed(dt, a) < as_signed(dt, b);
  else
    less = a < b;
  switch (op) {
  case CRNET_SUM:
    return (a + b) & m;
  case CRNET_PROD:
    return (a * b) & m;
  case CRNET_MIN:
    return less ? a : b;
  case CRNET_MAX:
    return less ? b : a;
  case CRNET_BAND:
    return a & b;
  case CRNET_BOR:
    return a | b;
  case CRNET_BXOR:
    return a ^ b;
  case CRNET_LAND:
    return a != 0 && b != 0;
  case CRNET_LOR:
    return a != 0 || b != 0;
  }
  ck_abort_msg("no reference for op %d", op);
  return 0;
}

/* Floating reference on values widened to double. `single` rounds the result
 * to float, as the float, float16 and bfloat16 kernels do. */
static double ref_float(crnet_op op, double a, double b, bool single) {
  double r = 0;
  switch (op) {
  case CRNET_SUM:
    r = a + b;
    break;
  case CRNET_PROD:
    r = a * b;
    break;
  case CRNET_MIN:
  case CRNET_MAX:
    if (isnan(a) || isnan(b))
      return NAN;
    if (a == 0 && b == 0) {
      bool neg = op == CRNET_MIN ? (signbit(a) || signbit(b))
                                 : (signbit(a) && signbit(b));
      return neg ? -0.0 : 0.0;
    }
    if (op == CRNET_MIN)
      return a < b ? a : b;
    return a > b ? a : b;
  case CRNET_LAND:
    return (a != 0 && b != 0) ? 1.0 : 0.0;
  case CRNET_LOR:
    return (a != 0 || b != 0) ? 1.0 : 0.0;
  default:
    ck_abort_msg("no float reference for op %d", op);
  }
  return single ? (double)(float)r : r;
}

static double load_value(crnet_datatype dt, const void *buf, size_t i) {
  uint64_t v = load_bits(dt, buf, i);
  switch (dt) {
  case CRNET_FLOAT16:
    return ref_half_to_float((uint16_t)v);
  case CRNET_BFLOAT16:
    return float_of_bits((uint32_t)v << 16);
  case CRNET_FLOAT:
    return float_of_bits((uint32_t)v);
  default:
    return double_of_bits(v);
  }
}

/* Expected bits of one element. *any_nan is set when IEEE arithmetic leaves
 * the NaN payload to the hardware (sum and prod): then only NaN-ness is
 * checked. min and max must give the canonical quiet NaN. */
static uint64_t ref_element(crnet_op op, crnet_datatype dt, const void *in,
                            const void *inout, size_t i, bool *any_nan) {
  *any_nan = false;
  if (dt_is_int(dt))
    return ref_int(op, dt, load_bits(dt, in, i), load_bits(dt, inout, i));
  double r = ref_float(op, load_value(dt, in, i), load_value(dt, inout, i),
                       dt != CRNET_DOUBLE);
  if (isnan(r)) {
    *any_nan = op == CRNET_SUM || op == CRNET_PROD;
    switch (dt) {
    case CRNET_FLOAT16:
      return 0x7e00u;
    case CRNET_BFLOAT16:
      return 0x7fc0u;
    case CRNET_FLOAT:
      return 0x7fc00000u;
    default:
      return UINT64_C(0x7ff8000000000000);
    }
  }
  switch (dt) {
  case CRNET_FLOAT16:
    return ref_float_to_half((float)r);
  case CRNET_BFLOAT16:
    return ref_float_to_bfloat16((float)r);
  case CRNET_FLOAT:
    return bits_of_float((float)r);
  default:
    return bits_of_double(r);
  }
}

static bool bits_are_nan(crnet_datatype dt, uint64_t v) {
  switch (dt) {
  case CRNET_FLOAT16:
    return half_is_nan((uint16_t)v);
  case CRNET_BFLOAT16:
    return bf16_is_nan((uint16_t)v);
  case CRNET_FLOAT:
    return isnan(float_of_bits((uint32_t)v));
  case CRNET_DOUBLE:
    return isnan(double_of_bits(v));
  default:
    return false;
  }
}

/* Which built-in ops the documentation promises for which type, written out
 * independently of the kernel table in ops.c. */
static bool expected_valid(crnet_op op, crnet_datatype dt) {
  if (dt == CRNET_BYTE)
    return false;
  if (op == CRNET_BAND || op == CRNET_BOR || op == CRNET_BXOR)
    return dt_is_int(dt);
  return true;
}

/* ------------------------------------------------------------------------
 * Random inputs
 */

static uint64_t random_int(crnet_datatype dt) {
  uint64_t m = width_mask(dt);
  uint64_t top = (m >> 1) + 1; /* the sign bit */
  switch (rng_next() % 8) {
  case 0:
    return 0;
  case 1: { /* extremes: 1, -1 / max, INT_MIN, INT_MAX */
    const uint64_t ext[4] = {1, m, top, top - 1};
    return ext[rng_next() % 4];
  }
  case 2: /* small, so products do not always wrap */
    return ((rng_next() % 21) - 10) & m;
  default:
    return rng_next() & m;
  }
}

static double random_double(void) {
  uint64_t r = rng_next();
  switch (r % 32) {
  case 0:
    return 0.0;
  case 1:
    return -0.0;
  case 2:
    return INFINITY;
  case 3:
    return -INFINITY;
  case 4: /* a NaN with a random payload and sign */
    return double_of_bits(UINT64_C(0x7ff0000000000001) |
                          (rng_next() & UINT64_C(0x800fffffffffffff)));
  case 5: /* tiny, often subnormal in float */
    return ldexp((double)(rng_next() % 1000), -150);
  case 6: /* large, so float products overflow */
    return ldexp((double)(rng_next() % 1000 + 1), 120);
  default: {
    double mant = (double)(rng_next() >> 11) * 0x1p-53; /* [0, 1) */
    int e = (int)(rng_next() % 41) - 20;
    return ((r >> 40) & 1 ? -1.0 : 1.0) * ldexp(mant + 0.5, e);
  }
  }
}

static void random_element(crnet_datatype dt, void *buf, size_t i) {
  if (dt_is_int(dt)) {
    store_bits(dt, buf, i, random_int(dt));
    return;
  }
  double v = random_double();
  switch (dt) {
  case CRNET_FLOAT16:
  case CRNET_BFLOAT16:
    /* Half raw patterns (everything, NaNs included), half values near 1 so
     * that sums round and tie. */
    if (rng_next() % 2 == 0)
      store_bits(dt, buf, i, rng_next() & 0xffffu);
    else
      store_bits(dt, buf, i,
                 dt == CRNET_FLOAT16 ? ref_float_to_half((float)ldexp(
                                           v, -(int)(rng_next() % 20)))
                                     : ref_float_to_bfloat16((float)v));
    break;
  case CRNET_FLOAT:
    store_bits(dt, buf, i, bits_of_float((float)v));
    break;
  default:
    store_bits(dt, buf, i, bits_of_double(v));
    break;
  }
}

/* ------------------------------------------------------------------------
 * Kernels against the reference: every datatype x every built-in op.
 */

static const size_t counts[] = {0, 1, 7, 64, 1001};
enum { GUARD = 9 };

static void check_kernel(crnet_op op, crnet_datatype dt, size_t count,
                         size_t offset) {
  size_t es = dt_size(dt);
  size_t n = offset + count + GUARD;
  unsigned char *in = malloc(n * es), *inout = malloc(n * es);
  unsigned char *in_copy = malloc(n * es), *inout_copy = malloc(n * es);
  ck_assert(in && inout && in_copy && inout_copy);
  memset(in, 0x5a, n * es);
  memset(inout, 0xa5, n * es);
  for (size_t i = 0; i < count; i++) {
    random_element(dt, in + offset * es, i);
    /* Equal operands now and then, for min/max ties and x - x. */
    if (rng_next() % 16 == 0)
      memcpy(inout + (offset + i) * es, in + (offset + i) * es, es);
    else
      random_element(dt, inout + offset * es, i);
  }
  memcpy(in_copy, in, n * es);
  memcpy(inout_copy, inout, n * es);

  crnet__reduce(op, dt, in + offset * es, inout + offset * es, count);

  ck_assert_msg(memcmp(in, in_copy, n * es) == 0, "%s %s: `in` was modified",
                crnet_op_name(op), crnet_datatype_name(dt));
  ck_assert_msg(memcmp(inout, inout_copy, offset * es) == 0 &&
                    memcmp(inout + (offset + count) * es,
                           inout_copy + (offset + count) * es, GUARD * es) == 0,
                "%s %s count %zu: wrote outside the vector", crnet_op_name(op),
                crnet_datatype_name(dt), count);
  for (size_t i = 0; i < count; i++) {
    bool any_nan;
    uint64_t want = ref_element(op, dt, in_copy + offset * es,
                                inout_copy + offset * es, i, &any_nan);
    uint64_t got = load_bits(dt, inout + offset * es, i);
    bool ok = any_nan ? bits_are_nan(dt, got) : got == want;
    /* EXPECT (check_main.h): some 2 * 10^5 elements over the matrix. */
    EXPECT(ok,
           "%s %s count %zu offset %zu element %zu: in 0x%llx inout "
           "0x%llx -> 0x%llx, want 0x%llx%s",
           crnet_op_name(op), crnet_datatype_name(dt), count, offset, i,
           (unsigned long long)load_bits(dt, in_copy + offset * es, i),
           (unsigned long long)load_bits(dt, inout_copy + offset * es, i),
           (unsigned long long)got, (unsigned long long)want,
           any_nan ? " (any NaN)" : "");
  }
  free(in);
  free(inout);
  free(in_copy);
  free(inout_copy);
}

/* Loop index: op * NDT + dt. Pairs that are not valid must be refused. */
START_TEST(test_kernel_matrix) {
  crnet_op op = _i / NDT;
  crnet_datatype dt = (crnet_datatype)(_i % NDT);
  ck_assert_msg(crnet__op_valid(op, dt) == expected_valid(op, dt),
                "crnet__op_valid(%s, %s) is wrong", crnet_op_name(op),
                crnet_datatype_name(dt));
  if (!expected_valid(op, dt))
    return;
  rng_seed(UINT64_C(0x5eed) + (uint64_t)_i);
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (size_t offset = 0; offset < 2; offset++)
      check_kernel(op, dt, counts[c], offset);
}
END_TEST

/* Overflow and ordering cases spelled out, in case the random inputs miss
 * them. */
START_TEST(test_int_wraparound) {
  int32_t a32[] = {INT32_MAX, INT32_MIN, -1};
  int32_t b32[] = {1, -1, INT32_MIN};
  crnet__reduce(CRNET_SUM, CRNET_INT32, a32, b32, 3);
  ck_assert_int_eq(b32[0], INT32_MIN);
  ck_assert_int_eq(b32[1], INT32_MAX);
  ck_assert_int_eq(b32[2], INT32_MAX);

  int8_t a8[] = {16, -128, 127};
  int8_t b8[] = {16, -1, 127};
  crnet__reduce(CRNET_PROD, CRNET_INT8, a8, b8, 3);
  ck_assert_int_eq(b8[0], 0);
  ck_assert_int_eq(b8[1], -128);
  ck_assert_int_eq(b8[2], 1); /* 16129 = 63 * 256 + 1 */

  /* 65535 * 65535 overflows int if computed after integer promotion. */
  uint16_t a16[] = {65535, 300};
  uint16_t b16[] = {65535, 300};
  crnet__reduce(CRNET_PROD, CRNET_UINT16, a16, b16, 2);
  ck_assert_uint_eq(b16[0], 1);
  ck_assert_uint_eq(b16[1], 90000u % 65536u);

  int64_t a64[] = {INT64_MAX, INT64_MIN};
  int64_t b64[] = {INT64_MAX, INT64_MIN};
  crnet__reduce(CRNET_SUM, CRNET_INT64, a64, b64, 2);
  ck_assert(b64[0] == -2);
  ck_assert(b64[1] == 0);

  uint64_t u64a[] = {UINT64_C(1) << 63, UINT64_MAX};
  uint64_t u64b[] = {2, UINT64_MAX};
  crnet__reduce(CRNET_PROD, CRNET_UINT64, u64a, u64b, 2);
  ck_assert(u64b[0] == 0);
  ck_assert(u64b[1] == 1);
}
END_TEST

START_TEST(test_int_minmax_logical) {
  int8_t a8[] = {-128, 127, -1};
  int8_t b8[] = {127, -128, 0};
  int8_t c8[3];
  memcpy(c8, b8, sizeof c8);
  crnet__reduce(CRNET_MIN, CRNET_INT8, a8, c8, 3);
  ck_assert_int_eq(c8[0], -128);
  ck_assert_int_eq(c8[1], -128);
  ck_assert_int_eq(c8[2], -1);
  memcpy(c8, b8, sizeof c8);
  crnet__reduce(CRNET_MAX, CRNET_INT8, a8, c8, 3);
  ck_assert_int_eq(c8[0], 127);
  ck_assert_int_eq(c8[1], 127);
  ck_assert_int_eq(c8[2], 0);

  /* The same bits unsigned order differently. */
  uint8_t ua[] = {0x80, 0xff};
  uint8_t ub[] = {0x7f, 0x00};
  crnet__reduce(CRNET_MAX, CRNET_UINT8, ua, ub, 2);
  ck_assert_uint_eq(ub[0], 0x80);
  ck_assert_uint_eq(ub[1], 0xff);

  int64_t s[] = {-1, INT64_MIN};
  int64_t t[] = {1, INT64_MAX};
  crnet__reduce(CRNET_MIN, CRNET_INT64, s, t, 2);
  ck_assert(t[0] == -1 && t[1] == INT64_MIN);

  int32_t la[] = {5, 0, 0, -3};
  int32_t lb[] = {-3, 7, 0, 1};
  int32_t lc[4];
  memcpy(lc, lb, sizeof lc);
  crnet__reduce(CRNET_LAND, CRNET_INT32, la, lc, 4);
  ck_assert(lc[0] == 1 && lc[1] == 0 && lc[2] == 0 && lc[3] == 1);
  memcpy(lc, lb, sizeof lc);
  crnet__reduce(CRNET_LOR, CRNET_INT32, la, lc, 4);
  ck_assert(lc[0] == 1 && lc[1] == 1 && lc[2] == 0 && lc[3] == 1);

  /* Only the top bit set still counts as true. */
  uint64_t qa[] = {UINT64_C(1) << 63, 0, UINT64_C(1) << 63};
  uint64_t qb[] = {2, UINT64_C(1) << 63, 0};
  uint64_t qc[3];
  memcpy(qc, qb, sizeof qc);
  crnet__reduce(CRNET_LAND, CRNET_UINT64, qa, qc, 3);
  ck_assert(qc[0] == 1 && qc[1] == 0 && qc[2] == 0);
  memcpy(qc, qb, sizeof qc);
  crnet__reduce(CRNET_LOR, CRNET_UINT64, qa, qc, 3);
  ck_assert(qc[0] == 1 && qc[1] == 1 && qc[2] == 1);
}
END_TEST

/* NaN and signed zero in min and max, in both operand orders, and the truth
 * of -0.0 and NaN in land and lor. */
START_TEST(test_float_special_cases) {
  const uint32_t canon = 0x7fc00000u;
  float nan_payload = float_of_bits(0xffa12345u); /* negative, with payload */
  float in[] = {-0.0f, 0.0f, nan_payload, 1.0f, -0.0f, 2.0f};
  float b0[] = {0.0f, -0.0f, 1.0f, nan_payload, -0.0f, -3.0f};
  float b[6];

  memcpy(b, b0, sizeof b);
  crnet__reduce(CRNET_MIN, CRNET_FLOAT, in, b, 6);
  ck_assert_uint_eq(bits_of_float(b[0]), 0x80000000u);
  ck_assert_uint_eq(bits_of_float(b[1]), 0x80000000u);
  ck_assert_uint_eq(bits_of_float(b[2]), canon);
  ck_assert_uint_eq(bits_of_float(b[3]), canon);
  ck_assert_uint_eq(bits_of_float(b[4]), 0x80000000u);
  ck_assert(b[5] == -3.0f);

  memcpy(b, b0, sizeof b);
  crnet__reduce(CRNET_MAX, CRNET_FLOAT, in, b, 6);
  ck_assert_uint_eq(bits_of_float(b[0]), 0);
  ck_assert_uint_eq(bits_of_float(b[1]), 0);
  ck_assert_uint_eq(bits_of_float(b[2]), canon);
  ck_assert_uint_eq(bits_of_float(b[3]), canon);
  ck_assert_uint_eq(bits_of_float(b[4]), 0x80000000u);
  ck_assert(b[5] == 2.0f);

  memcpy(b, b0, sizeof b);
  crnet__reduce(CRNET_LAND, CRNET_FLOAT, in, b, 6);
  const float land_want[] = {0, 0, 1, 1, 0, 1};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(bits_of_float(b[i]) == bits_of_float(land_want[i]),
                  "land element %d", i);
  memcpy(b, b0, sizeof b);
  crnet__reduce(CRNET_LOR, CRNET_FLOAT, in, b, 6);
  const float lor_want[] = {0, 0, 1, 1, 0, 1};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(bits_of_float(b[i]) == bits_of_float(lor_want[i]),
                  "lor element %d", i);

  double din[] = {-0.0, NAN, 0.0};
  double db[] = {0.0, -1.0, -0.0};
  crnet__reduce(CRNET_MIN, CRNET_DOUBLE, din, db, 3);
  ck_assert(bits_of_double(db[0]) == UINT64_C(0x8000000000000000));
  ck_assert(bits_of_double(db[1]) == UINT64_C(0x7ff8000000000000));
  ck_assert(bits_of_double(db[2]) == UINT64_C(0x8000000000000000));

  uint16_t hin[] = {0x8000, 0x0000, 0xfe01, 0x3c00};
  uint16_t hb[] = {0x0000, 0x8000, 0x3c00, 0x7c01};
  crnet__reduce(CRNET_MIN, CRNET_FLOAT16, hin, hb, 4);
  ck_assert_uint_eq(hb[0], 0x8000);
  ck_assert_uint_eq(hb[1], 0x8000);
  ck_assert_uint_eq(hb[2], 0x7e00);
  ck_assert_uint_eq(hb[3], 0x7e00);

  uint16_t bin[] = {0x8000, 0x3f80};
  uint16_t bb[] = {0x0000, 0xffc1};
  crnet__reduce(CRNET_MAX, CRNET_BFLOAT16, bin, bb, 2);
  ck_assert_uint_eq(bb[0], 0x0000);
  ck_assert_uint_eq(bb[1], 0x7fc0);

  /* float16 sum: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> even (1). */
  uint16_t s_in[] = {0x3c00, 0x7bff, 0x0001};
  uint16_t s_b[] = {0x1000, 0x7bff, 0x0001};
  crnet__reduce(CRNET_SUM, CRNET_FLOAT16, s_in, s_b, 3);
  ck_assert_uint_eq(s_b[0], 0x3c00);
  ck_assert_uint_eq(s_b[1], 0x7c00); /* 65504 + 65504 overflows */
  ck_assert_uint_eq(s_b[2], 0x0002); /* subnormals add exactly */
}
END_TEST

/* ------------------------------------------------------------------------
 * Conversions. Every pattern, and hundreds of thousands of random floats:
 * plain checks (EXPECT, check_main.h), which Check records only when they
 * fail.
 */

START_TEST(test_half_all_patterns) {
  for (uint32_t h = 0; h <= 0xffffu; h++) {
    float f = crnet__half_to_float((uint16_t)h);
    float want = ref_half_to_float((uint16_t)h);
    EXPECT(bits_of_float(f) == bits_of_float(want),
           "half 0x%04x -> float 0x%08x, want 0x%08x", h, bits_of_float(f),
           bits_of_float(want));
    /* The round trip is the identity except that a signalling NaN comes
     * back quiet. */
    uint16_t back = crnet__float_to_half(f);
    uint16_t expect =
        half_is_nan((uint16_t)h) ? (uint16_t)(h | 0x0200u) : (uint16_t)h;
    EXPECT(back == expect, "half 0x%04x round trip gives 0x%04x, want 0x%04x",
           h, back, expect);
  }
}
END_TEST

START_TEST(test_bf16_all_patterns) {
  for (uint32_t b = 0; b <= 0xffffu; b++) {
    float f = crnet__bfloat16_to_float((uint16_t)b);
    EXPECT(bits_of_float(f) == b << 16, /* even signalling NaNs */
           "bfloat16 0x%04x -> float 0x%08x, want 0x%08x", b, bits_of_float(f),
           b << 16);
    uint16_t back = crnet__float_to_bfloat16(f);
    uint16_t expect =
        bf16_is_nan((uint16_t)b) ? (uint16_t)(b | 0x0040u) : (uint16_t)b;
    EXPECT(back == expect,
           "bfloat16 0x%04x round trip gives 0x%04x, want 0x%04x", b, back,
           expect);
  }
}
END_TEST

/* For every pair of neighbouring halves: the midpoint ties to even, and the
 * floats just either side of it go to the nearer half. Both signs. */
START_TEST(test_half_rounding_at_midpoints) {
  for (uint32_t h = 0; h < 0x7c00u; h++) {
    double lo = half_magnitude((uint16_t)h);
    double hi = half_magnitude((uint16_t)(h + 1));
    float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
    EXPECT((double)mid == (lo + hi) / 2,
           "the midpoint above 0x%04x, %a, is not a float", h, (lo + hi) / 2);
    uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
    float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
    for (int neg = 0; neg < 2; neg++) {
      uint16_t s = neg ? 0x8000u : 0;
      float sg = neg ? -1.0f : 1.0f;
      uint16_t t = crnet__float_to_half(sg * mid);
      uint16_t b = crnet__float_to_half(sg * below);
      uint16_t a = crnet__float_to_half(sg * above);
      EXPECT(t == (s | even),
             "the tie between 0x%04x and 0x%04x: 0x%04x, want 0x%04x", s | h,
             s | (h + 1), t, s | even);
      EXPECT(b == (s | h),
             "just below the midpoint of 0x%04x and 0x%04x: 0x%04x, want "
             "0x%04x",
             s | h, s | (h + 1), b, s | h);
      EXPECT(a == (s | (h + 1)),
             "just above the midpoint of 0x%04x and 0x%04x: 0x%04x, want "
             "0x%04x",
             s | h, s | (h + 1), a, s | (h + 1));
    }
  }
}
END_TEST

/* Random float bit patterns, half of them in the range where halves live. */
START_TEST(test_narrowing_random) {
  rng_seed(42);
  for (int i = 0; i < 400000; i++) {
    uint32_t x = (uint32_t)rng_next();
    if (i % 2)
      x = (x & 0x807fffffu) | ((uint32_t)(97 + rng_next() % 50) << 23);
    float f = float_of_bits(x);
    EXPECT(crnet__float_to_half(f) == ref_float_to_half(f),
           "float 0x%08x -> half 0x%04x, want 0x%04x", x,
           crnet__float_to_half(f), ref_float_to_half(f));
    EXPECT(crnet__float_to_bfloat16(f) == ref_float_to_bfloat16(f),
           "float 0x%08x -> bfloat16 0x%04x, want 0x%04x", x,
           crnet__float_to_bfloat16(f), ref_float_to_bfloat16(f));
  }
}
END_TEST

START_TEST(test_conversion_known_values) {
  ck_assert_uint_eq(crnet__float_to_half(1.0f), 0x3c00);
  ck_assert(crnet__half_to_float(0x3c00) == 1.0f);
  ck_assert_uint_eq(crnet__float_to_half(-2.0f), 0xc000);
  ck_assert_uint_eq(crnet__float_to_half(65504.0f), 0x7bff);
  ck_assert(crnet__half_to_float(0x7bff) == 65504.0f);
  ck_assert_uint_eq(crnet__float_to_half(65519.99f), 0x7bff);
  ck_assert_uint_eq(crnet__float_to_half(65520.0f), 0x7c00);
  ck_assert_uint_eq(crnet__float_to_half(1e6f), 0x7c00);
  ck_assert_uint_eq(crnet__float_to_half(-1e6f), 0xfc00);
  ck_assert_uint_eq(crnet__float_to_half(INFINITY), 0x7c00);
  ck_assert_uint_eq(crnet__float_to_half(-INFINITY), 0xfc00);
  ck_assert(crnet__half_to_float(0x0001) == 0x1p-24f);
  ck_assert_uint_eq(crnet__float_to_half(0x1p-24f), 0x0001);
  ck_assert_uint_eq(crnet__float_to_half(0x1p-25f), 0x0000); /* tie -> even */
  ck_assert_uint_eq(crnet__float_to_half(0x1.000002p-25f), 0x0001);
  ck_assert_uint_eq(crnet__float_to_half(0x1.8p-24f), 0x0002); /* tie */
  ck_assert_uint_eq(crnet__float_to_half(0x1p-14f), 0x0400);
  /* Just below the smallest normal: 1023 units exact, 1023.5 ties up to the
   * even 1024 (the smallest normal), 1022.5 ties down to 1022. */
  ck_assert_uint_eq(crnet__float_to_half(0x1.ff8p-15f), 0x03ff);
  ck_assert_uint_eq(crnet__float_to_half(0x1.ffcp-15f), 0x0400);
  ck_assert_uint_eq(crnet__float_to_half(0x1.ff4p-15f), 0x03fe);
  ck_assert_uint_eq(crnet__float_to_half(0x1p-149f), 0x0000);
  ck_assert_uint_eq(crnet__float_to_half(-0x1p-149f), 0x8000);
  ck_assert_uint_eq(crnet__float_to_half(-0.0f), 0x8000);
  ck_assert_uint_eq(crnet__float_to_half(1.0f + 0x1p-11f), 0x3c00); /* tie */
  ck_assert_uint_eq(crnet__float_to_half(1.0f + 0x3p-11f), 0x3c02); /* tie */
  ck_assert_uint_eq(crnet__float_to_half(0.1f), 0x2e66);
  /* A signalling float NaN whose payload lies below the half's bits must
   * stay NaN, not become infinity. */
  ck_assert(half_is_nan(crnet__float_to_half(float_of_bits(0x7f800001u))));
  ck_assert_uint_eq(crnet__float_to_half(float_of_bits(0xff800001u)), 0xfe00);
  ck_assert_uint_eq(bits_of_float(crnet__half_to_float(0x7c01)), 0x7fc02000u);
  ck_assert_uint_eq(bits_of_float(crnet__half_to_float(0xfe00)), 0xffc00000u);
  ck_assert(isinf(crnet__half_to_float(0xfc00)) &&
            crnet__half_to_float(0xfc00) < 0);

  ck_assert_uint_eq(crnet__float_to_bfloat16(1.0f), 0x3f80);
  ck_assert_uint_eq(crnet__float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);
  ck_assert_uint_eq(crnet__float_to_bfloat16(1.0f + 0x3p-8f), 0x3f82);
  ck_assert_uint_eq(crnet__float_to_bfloat16(1.0f + 0x1.02p-8f), 0x3f81);
  ck_assert_uint_eq(crnet__float_to_bfloat16(3.0e38f), 0x7f62);
  ck_assert_uint_eq(crnet__float_to_bfloat16(float_of_bits(0x7f7fffffu)),
                    0x7f80);
  ck_assert_uint_eq(crnet__float_to_bfloat16(-INFINITY), 0xff80);
  ck_assert_uint_eq(crnet__float_to_bfloat16(float_of_bits(0x7f800001u)),
                    0x7fc0);
  ck_assert_uint_eq(crnet__float_to_bfloat16(0x1p-133f), 0x0001);
  ck_assert(crnet__bfloat16_to_float(0xc040) == -3.0f);
}
END_TEST

/* ------------------------------------------------------------------------
 * Validity, commutativity, sizes and names
 */

START_TEST(test_valid_truth_table) {
  /* Spelled out row by row, 1 = valid. Columns in crnet_datatype order: the
   * eight integer types | float16 bfloat16 float double | byte. */
  static const char *const table[NOP] = {
      [CRNET_SUM] = "11111111 1111 0",  [CRNET_PROD] = "11111111 1111 0",
      [CRNET_MIN] = "11111111 1111 0",  [CRNET_MAX] = "11111111 1111 0",
      [CRNET_BAND] = "11111111 0000 0", [CRNET_BOR] = "11111111 0000 0",
      [CRNET_BXOR] = "11111111 0000 0", [CRNET_LAND] = "11111111 1111 0",
      [CRNET_LOR] = "11111111 1111 0",
  };
  for (int op = 0; op < NOP; op++) {
    int dt = 0;
    for (const char *c = table[op]; *c != '\0'; c++) {
      if (*c == ' ')
        continue;
      ck_assert_msg(crnet__op_valid(op, (crnet_datatype)dt) == (*c == '1'),
                    "op %d datatype %d", op, dt);
      dt++;
    }
    ck_assert_int_eq(dt, NDT);
  }
  const crnet_op bad_ops[] = {-1, NOP, 63, 64, 1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
    ck_assert_msg(!crnet__op_valid(bad_ops[i], CRNET_INT32), "op %d",
                  bad_ops[i]);
    ck_assert_msg(!crnet__op_commutative(bad_ops[i]), "op %d", bad_ops[i]);
  }
  ck_assert(!crnet__op_valid(CRNET_SUM, (crnet_datatype)-1));
  ck_assert(!crnet__op_valid(CRNET_SUM, CRNET_DATATYPE_COUNT));
  ck_assert(!crnet__op_valid(CRNET_SUM, (crnet_datatype)1000));
  for (int op = 0; op < NOP; op++)
    ck_assert(crnet__op_commutative(op));
}
END_TEST

START_TEST(test_sizes_and_names) {
  static const struct {
    crnet_datatype dt;
    size_t size;
    const char *name;
  } dts[] = {
      {CRNET_INT8, 1, "int8"},       {CRNET_INT16, 2, "int16"},
      {CRNET_INT32, 4, "int32"},     {CRNET_INT64, 8, "int64"},
      {CRNET_UINT8, 1, "uint8"},     {CRNET_UINT16, 2, "uint16"},
      {CRNET_UINT32, 4, "uint32"},   {CRNET_UINT64, 8, "uint64"},
      {CRNET_FLOAT16, 2, "float16"}, {CRNET_BFLOAT16, 2, "bfloat16"},
      {CRNET_FLOAT, 4, "float"},     {CRNET_DOUBLE, 8, "double"},
      {CRNET_BYTE, 1, "byte"},
  };
  ck_assert_uint_eq(sizeof dts / sizeof dts[0], NDT);
  for (size_t i = 0; i < NDT; i++) {
    ck_assert_uint_eq(crnet_datatype_size(dts[i].dt), dts[i].size);
    ck_assert_str_eq(crnet_datatype_name(dts[i].dt), dts[i].name);
  }
  ck_assert_uint_eq(crnet_datatype_size(CRNET_DATATYPE_COUNT), 0);
  ck_assert_uint_eq(crnet_datatype_size((crnet_datatype)-1), 0);
  ck_assert_str_eq(crnet_datatype_name(CRNET_DATATYPE_COUNT),
                   "unknown datatype");
  ck_assert_str_eq(crnet_datatype_name((crnet_datatype)-1), "unknown datatype");

  static const char *const ops[NOP] = {"sum", "prod", "min",  "max", "band",
                                       "bor", "bxor", "land", "lor"};
  for (int op = 0; op < NOP; op++)
    ck_assert_str_eq(crnet_op_name(op), ops[op]);
  ck_assert_str_eq(crnet_op_name(-1), "unknown op");
  ck_assert_str_eq(crnet_op_name(NOP), "unknown op");
  ck_assert_str_eq(crnet_op_name(64), "unknown op");
}
END_TEST

/* ------------------------------------------------------------------------
 * User operators
 */

/* 2x2 matrices over Z/65521, one per uint64 element: entries a, b, c, d
 * (row major) in bits 0, 16, 32, 48. Matrix product does not commute, so it
 * shows whether `in` really is the left operand. */
enum { PRIME = 65521 };

static uint64_t mat_pack(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return a | b << 16 | c << 32 | d << 48;
}

static uint64_t mat_at(uint64_t m, int k) { return (m >> (16 * k)) & 0xffffu; }

static uint64_t mat_mul(uint64_t l, uint64_t r) {
  uint64_t a = mat_at(l, 0), b = mat_at(l, 1), c = mat_at(l, 2),
           d = mat_at(l, 3);
  uint64_t e = mat_at(r, 0), f = mat_at(r, 1), g = mat_at(r, 2),
           h = mat_at(r, 3);
  return mat_pack((a * e + b * g) % PRIME, (a * f + b * h) % PRIME,
                  (c * e + d * g) % PRIME, (c * f + d * h) % PRIME);
}

static uint64_t mat_random(void) {
  return mat_pack(rng_next() % PRIME, rng_next() % PRIME, rng_next() % PRIME,
                  rng_next() % PRIME);
}

struct call_log {
  int calls;
  size_t count;
  crnet_datatype dt;
};

static void matmul_op(const void *in, void *inout, size_t count,
                      crnet_datatype dt, void *ctx) {
  struct call_log *log = ctx;
  log->calls++;
  log->count = count;
  log->dt = dt;
  const uint64_t *l = in;
  uint64_t *r = inout;
  for (size_t i = 0; i < count; i++)
    r[i] = mat_mul(l[i], r[i]);
}

static void xor_bytes_op(const void *in, void *inout, size_t count,
                         crnet_datatype dt, void *ctx) {
  (void)ctx;
  ck_assert_int_eq(dt, CRNET_BYTE);
  const unsigned char *a = in;
  unsigned char *b = inout;
  for (size_t i = 0; i < count; i++)
    b[i] ^= a[i];
}

START_TEST(test_user_op_order_and_context) {
  struct call_log log = {0, 0, CRNET_BYTE};
  crnet_op op = -5;
  ck_assert_int_eq(crnet_op_create(&op, matmul_op, &log, 0), 0);
  ck_assert_int_ge(op, 64);
  ck_assert_str_eq(crnet_op_name(op), "user op");
  ck_assert(!crnet__op_commutative(op));
  for (int dt = 0; dt < NDT; dt++)
    ck_assert_msg(crnet__op_valid(op, (crnet_datatype)dt), "datatype %d", dt);
  ck_assert(!crnet__op_valid(op, CRNET_DATATYPE_COUNT));

  enum { N = 1001 };
  uint64_t *in = malloc(N * sizeof *in), *inout = malloc(N * sizeof *inout);
  uint64_t *want = malloc(N * sizeof *want);
  ck_assert(in && inout && want);
  rng_seed(7);
  int noncommuting = 0;
  for (size_t i = 0; i < N; i++) {
    in[i] = mat_random();
    inout[i] = mat_random();
    want[i] = mat_mul(in[i], inout[i]);
    noncommuting += want[i] != mat_mul(inout[i], in[i]);
  }
  /* Otherwise the test could not tell the operand order apart. */
  ck_assert_int_gt(noncommuting, N / 2);

  crnet__reduce(op, CRNET_UINT64, in, inout, N);
  ck_assert_int_eq(log.calls, 1);
  ck_assert_uint_eq(log.count, N);
  ck_assert_int_eq(log.dt, CRNET_UINT64);
  for (size_t i = 0; i < N; i++)
    ck_assert_msg(inout[i] == want[i], "element %zu: operands swapped?", i);

  /* Count 0 combines nothing. */
  crnet__reduce(op, CRNET_UINT64, in, inout, 0);
  for (size_t i = 0; i < N; i++)
    ck_assert(inout[i] == want[i]);

  ck_assert_int_eq(crnet_op_free(&op), 0);
  free(in);
  free(inout);
  free(want);
}
END_TEST

START_TEST(test_user_op_on_bytes) {
  crnet_op op;
  ck_assert_int_eq(crnet_op_create(&op, xor_bytes_op, NULL, 1), 0);
  ck_assert(crnet__op_valid(op, CRNET_BYTE));
  ck_assert(crnet__op_commutative(op));
  unsigned char a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 0, 7, 4, 0};
  crnet__reduce(op, CRNET_BYTE, a, b, 5);
  const unsigned char want[5] = {0, 2, 4, 0, 5};
  ck_assert(memcmp(b, want, 5) == 0);
  ck_assert_int_eq(crnet_op_free(&op), 0);
}
END_TEST

START_TEST(test_user_op_lifecycle) {
  struct call_log log = {0, 0, CRNET_BYTE};
  crnet_op op = 12345;
  ck_assert_int_eq(crnet_op_create(NULL, matmul_op, NULL, 1), CRNET_EINVAL);
  ck_assert_int_eq(crnet_op_create(&op, NULL, NULL, 1), CRNET_EINVAL);
  ck_assert_int_eq(op, 12345); /* misuse changes nothing */

  crnet_op a, b;
  ck_assert_int_eq(crnet_op_create(&a, matmul_op, &log, 1), 0);
  ck_assert_int_eq(crnet_op_create(&b, matmul_op, &log, 7), 0);
  ck_assert_int_ge(a, 64);
  ck_assert_int_ge(b, 64);
  ck_assert_int_ne(a, b);
  ck_assert(crnet__op_commutative(a) && crnet__op_commutative(b));

  crnet_op stale = a;
  ck_assert_int_eq(crnet_op_free(&a), 0);
  ck_assert_int_eq(a, -1);
  ck_assert(!crnet__op_valid(stale, CRNET_UINT64));
  ck_assert(!crnet__op_commutative(stale));
  ck_assert_str_eq(crnet_op_name(stale), "unknown op");
  ck_assert_int_eq(crnet_op_free(&a), CRNET_EINVAL); /* double free */
  crnet_op stale_copy = stale;
  ck_assert_int_eq(crnet_op_free(&stale), CRNET_EINVAL);
  ck_assert_int_eq(stale, stale_copy); /* untouched on failure */

  /* The freed slot may be reused; the old handle must stay dead. */
  crnet_op c;
  ck_assert_int_eq(crnet_op_create(&c, matmul_op, &log, 0), 0);
  ck_assert_int_ne(c, stale);
  ck_assert(!crnet__op_valid(stale, CRNET_UINT64));
  ck_assert(crnet__op_valid(c, CRNET_UINT64));
  ck_assert(crnet__op_valid(b, CRNET_UINT64));

  ck_assert_int_eq(crnet_op_free(NULL), CRNET_EINVAL);
  crnet_op builtin = CRNET_SUM;
  ck_assert_int_eq(crnet_op_free(&builtin), CRNET_EINVAL);
  ck_assert_int_eq(builtin, CRNET_SUM);
  ck_assert(crnet__op_valid(CRNET_SUM, CRNET_INT32));
  crnet_op never = 999999;
  ck_assert_int_eq(crnet_op_free(&never), CRNET_EINVAL);
  ck_assert_int_eq(never, 999999);

  ck_assert_int_eq(crnet_op_free(&b), 0);
  ck_assert_int_eq(crnet_op_free(&c), 0);
}
END_TEST

START_TEST(test_user_op_table_full) {
  enum { LIMIT = 1 << 16 };
  crnet_op *ops = malloc(LIMIT * sizeof *ops);
  ck_assert_ptr_nonnull(ops);
  int n = 0, err = 0;
  while (n < LIMIT && (err = crnet_op_create(&ops[n], matmul_op, NULL, 1)) == 0)
    n++;
  ck_assert_int_eq(err, CRNET_ENOMEM);
  ck_assert_int_ge(n, 1000);
  for (int i = 0; i < n; i++) {
    ck_assert(crnet__op_valid(ops[i], CRNET_FLOAT));
    ck_assert(ops[i] >= 64);
  }
  for (int i = 1; i < n; i++)
    ck_assert_int_ne(ops[i], ops[i - 1]);
  crnet_op extra = 77;
  ck_assert_int_eq(crnet_op_create(&extra, matmul_op, NULL, 1), CRNET_ENOMEM);
  ck_assert_int_eq(extra, 77);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(crnet_op_free(&ops[i]), 0);
  ck_assert_int_eq(crnet_op_create(&extra, matmul_op, NULL, 1), 0);
  ck_assert_int_eq(crnet_op_free(&extra), 0);
  free(ops);
}
END_TEST

/* Concurrent create/use/free from several threads: every handle handed out
 * must be live and private to its creator until freed. */
enum { THREADS = 4, ROUNDS = 300 };

static void *churn(void *arg) {
  long id = (long)(intptr_t)arg;
  long failures = 0;
  for (int r = 0; r < ROUNDS; r++) {
    struct call_log log = {0, 0, CRNET_BYTE};
    crnet_op op;
    if (crnet_op_create(&op, matmul_op, &log, (int)(id & 1)) != 0) {
      failures++;
      continue;
    }
    uint64_t x = mat_pack(1, 1, 0, 1), y = mat_pack(1, 0, 1, 1);
    if (!crnet__op_valid(op, CRNET_UINT64) ||
        crnet__op_commutative(op) != (bool)(id & 1))
      failures++;
    crnet__reduce(op, CRNET_UINT64, &x, &y, 1);
    if (log.calls != 1 || y != mat_pack(2, 1, 1, 1))
      failures++;
    if (crnet_op_free(&op) != 0 || op != -1)
      failures++;
  }
  return (void *)(intptr_t)failures;
}

START_TEST(test_user_op_threads) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i),
                     0);
  long failures = 0;
  for (int i = 0; i < THREADS; i++) {
    void *ret;
    ck_assert_int_eq(pthread_join(t[i], &ret), 0);
    failures += (long)(intptr_t)ret;
  }
  ck_assert_int_eq(failures, 0);
}
END_TEST

/* float16 and bfloat16 sum and prod, bit for bit, over every `in` pattern
 * against a set of `inout` patterns that covers zeros, subnormals, normals,
 * the largest values, infinities and quiet and signalling NaNs of both
 * signs. The expected element is the per-element definition: widen both
 * (exactly), combine in float, round back to nearest even; when an operand
 * is NaN the result is `in`'s NaN if it has one, else `inout`'s, quieted.
 * The kernel under test is whichever ops.c chose for this CPU (F16C, AVX2
 * or portable); the meson test runs this binary twice, once with
 * CRNET_NO_F16C=1, so every path must meet the same definition and so agree
 * with the others. */
typedef struct f16_format {
  crnet_datatype dt;
  uint16_t exp_mask, quiet;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
} f16_format;

static const f16_format f16_formats[] = {
    {CRNET_FLOAT16, 0x7c00, 0x0200, crnet__half_to_float,
     crnet__float_to_half},
    {CRNET_BFLOAT16, 0x7f80, 0x0040, crnet__bfloat16_to_float,
     crnet__float_to_bfloat16},
};

static bool f16_is_nan(const f16_format *f, uint16_t h) {
  return (h & f->exp_mask) == f->exp_mask && (h & (0x7fff & ~f->exp_mask)) != 0;
}

START_TEST(test_f16_sum_prod_bit_exact) {
  static const uint16_t others[] = {
      0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
      0x3555, 0x4248, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00,
      0x7c01, 0xfd2d, 0x7dff, 0x7fff, 0x1234, 0x9876, 0x6000, 0xe000,
      0x7f80, 0xff80, 0x7f81, 0xffc1, 0x7f7f, 0x0080, 0x007f, 0x3f80};
  enum { NOTHERS = sizeof others / sizeof others[0], N = 65536 };
  const f16_format *f = &f16_formats[_i / 2];
  crnet_op op = _i % 2 == 0 ? CRNET_SUM : CRNET_PROD;
  uint16_t *in = malloc(N * sizeof *in), *inout = malloc(N * sizeof *inout);
  ck_assert(in != NULL && inout != NULL);
  for (size_t k = 0; k < NOTHERS; k++) {
    for (uint32_t i = 0; i < N; i++) {
      in[i] = (uint16_t)i;
      inout[i] = others[(k + i) % NOTHERS];
    }
    crnet__reduce(op, f->dt, in, inout, N);
    for (uint32_t i = 0; i < N; i++) {
      uint16_t x = (uint16_t)i, y = others[(k + i) % NOTHERS], want;
      if (f16_is_nan(f, x))
        want = (uint16_t)(x | f->quiet);
      else if (f16_is_nan(f, y))
        want = (uint16_t)(y | f->quiet);
      else {
        float fx = f->widen(x), fy = f->widen(y);
        want = f->narrow(op == CRNET_SUM ? fx + fy : fx * fy);
      }
      /* ck_assert only on a mismatch: it is costly per call, and this
       * loop runs two million times. */
      if (inout[i] != want)
        ck_abort_msg("%s %s: in 0x%04x inout 0x%04x -> 0x%04x, want 0x%04x",
                     crnet_datatype_name(f->dt), crnet_op_name(op), x, y,
                     inout[i], want);
    }
  }
  free(in);
  free(inout);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* Whether the CPU's flags (the first "flags" line of /proc/cpuinfo) name
 * `flag`, as a word. */
static bool cpu_flag(const char *flag) {
  char line[8192];
  bool found = false;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL)
    return false;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    for (char *w = strtok(strchr(line, ':') + 1, " \t\n"); w != NULL;
         w = strtok(NULL, " \t\n"))
      found = found || strcmp(w, flag) == 0;
    break;
  }
  fclose(f);
  return found;
}

/* The float16 and bfloat16 kernels the reductions run: both portable under
 * CRNET_NO_F16C (the test ops-portable-f16), else F16C and AVX2 exactly
 * where x86-64's flags have them, so each run of this program knows which
 * path its float16 tests went through. */
START_TEST(test_f16_kernel_chosen) {
  const char *f16 = crnet__f16_kernel(), *bf16 = crnet__bf16_kernel();
  const char *want_f16 = "portable", *want_bf16 = "portable";
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  if (getenv("CRNET_NO_F16C") == NULL) {
    if (cpu_flag("avx") && cpu_flag("f16c"))
      want_f16 = "f16c";
    if (cpu_flag("avx2"))
      want_bf16 = "avx2";
  }
#else
  (void)cpu_flag;
#endif
  ck_assert_str_eq(f16, want_f16);
  ck_assert_str_eq(bf16, want_bf16);
}
END_TEST

static Suite *ops_suite(void) {
  Suite *s = suite_create("ops");

  TCase *k = tcase_create("kernels");
  tcase_set_timeout(k, 60);
  tcase_add_loop_test(k, test_kernel_matrix, 0, NOP * NDT);
  tcase_add_test(k, test_int_wraparound);
  tcase_add_test(k, test_int_minmax_logical);
  tcase_add_test(k, test_float_special_cases);
  tcase_add_loop_test(k, test_f16_sum_prod_bit_exact, 0, 4);
  tcase_add_test(k, test_f16_kernel_chosen);
  suite_add_tcase(s, k);

  TCase *c = tcase_create("conversions");
  tcase_set_timeout(c, 60);
  tcase_add_test(c, test_half_all_patterns);
  tcase_add_test(c, test_bf16_all_patterns);
  tcase_add_test(c, test_half_rounding_at_midpoints);
  tcase_add_test(c, test_narrowing_random);
  tcase_add_test(c, test_conversion_known_values);
  suite_add_tcase(s, c);

  TCase *t = tcase_create("table");
  tcase_add_test(t, test_valid_truth_table);
  tcase_add_test(t, test_sizes_and_names);
  suite_add_tcase(s, t);

  TCase *u = tcase_create("user ops");
  tcase_set_timeout(u, 60);
  tcase_add_test(u, test_user_op_order_and_context);
  tcase_add_test(u, test_user_op_on_bytes);
  tcase_add_test(u, test_user_op_lifecycle);
  tcase_add_test(u, test_user_op_table_full);
  tcase_add_test(u, test_user_op_threads);
  suite_add_tcase(s, u);
  return s;
}

int main(void) { return check_run(ops_suite()); }
