/* Reduction kernels, the operator table, and the datatype and operator names.
 *
 * Workload: crnet__reduce() is called once per received block by every
 * reducing schedule, on blocks from a few bytes to many megabytes. For large
 * blocks it must run at memory speed, so each (operator, datatype) pair has its
 * own simple loop over restrict pointers that gcc -O3 vectorises; the only
 * dispatch is one table lookup per call, never per element. Operator creation
 * is rare (a few per program), so the user operator table is a fixed array
 * behind a mutex.
 *
 * Semantics, shared by every kernel: inout[i] = in[i] (+) inout[i], where `in`
 * holds the lower ranks' contribution. The order matters for user operators;
 * the built-in kernels keep it too (float sum is in + inout), so a reader can
 * check any kernel against the one convention.
 *
 *   - Integer sum and prod wrap modulo 2^n. They are computed in unsigned
 *     arithmetic, so signed overflow (undefined behaviour) never happens.
 *     Two's complement makes the bits of a signed sum or product equal to the
 *     unsigned ones, so the signed types reuse the unsigned kernels; C11
 *     6.5p7 allows a signed object to be accessed through its unsigned type.
 *     The same holds for the bitwise and logical operators.
 *   - band, bor, bxor: integer types only.
 *   - land, lor: every numeric type; the result is 1 or 0 of the element type.
 *     For floating types any value that compares unequal to zero is true:
 *     NaN is true, -0.0 is false.
 *   - min, max on floating types: if either operand is NaN the result is the
 *     canonical quiet NaN (positive, only the quiet bit set), whatever the
 *     payloads; min(-0.0, +0.0) is -0.0 and max(-0.0, +0.0) is +0.0 in either
 *     operand order. Both rules make min and max bitwise commutative, so a
 *     schedule may combine in any order and every rank still ends with the
 *     same bits.
 *   - sum and prod on floating types follow IEEE arithmetic in the current
 *     rounding mode (round to nearest even unless the program changed it);
 *     which NaN payload survives is the hardware's choice for float and
 *     double, and `in`'s for float16 and bfloat16 (whose kernels have
 *     several paths that must agree bit for bit, see below).
 *   - float16 and bfloat16 are widened to float, combined, and rounded back to
 *     nearest even, per element. For sum and prod this is correctly rounded:
 *     float carries at least 2p+2 bits of a 16-bit format's p-bit significand
 *     (24 >= 2*11+2), so the double rounding never changes the result.
 *   - CRNET_BYTE: no built-in operator is valid; data of this type is moved,
 *     never reduced by crnet.
 *
 * User operators, unlike the built-ins, are valid on every datatype including
 * CRNET_BYTE: a program may well reduce opaque records with its own function,
 * and only it knows their layout (crnet.h says so).
 */
#include "ops.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Bit access. memcpy is the defined way to reinterpret a float; gcc turns it
 * into a register move, also inside vectorised loops.
 */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static inline double f64_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

#define F32_CANONICAL_NAN 0x7fc00000u
#define F64_CANONICAL_NAN UINT64_C(0x7ff8000000000000)

/* ------------------------------------------------------------------------
 * float16 and bfloat16 conversions.
 *
 * The float16 ones are written so that the 16-bit kernels below vectorise.
 * gcc will not if-convert a branch that guards floating-point arithmetic (the
 * arithmetic could raise an exception flag the branch avoided), and it turns
 * ternaries into branches early and then sinks any computation that only one
 * arm uses into that arm. So each direction does its one float operation on
 * every lane, with inputs chosen so that lanes which do not need it
 * contribute zero bits, and the cases are merged with all-ones/all-zeros
 * masks rather than selects. Only constant shifts are used, since baseline
 * x86-64 has no per-lane variable shift. No float operation produces a
 * subnormal, and the only subnormal operand (a float below 2^-126 being
 * narrowed) rounds to a zero half whether or not it is flushed, so the
 * conversions stay exact in programs that run with flush-to-zero or
 * denormals-are-zero (e.g. linked with -ffast-math).
 *
 * NaN: every conversion keeps the sign and the payload (the top payload bits
 * when narrowing) and the result is a quiet NaN, so a NaN can never narrow
 * into an infinity. float16 -> float sets the quiet bit as IEEE 754 asks of a
 * format conversion (and as the x86 F16C instruction does; the float16
 * conversions here agree with F16C on all 2^32 floats and all 2^16 halves).
 * bfloat16 -> float is the plain 16-bit shift that defines bfloat16, so it
 * alone keeps a signalling NaN signalling. A round trip 16 -> float -> 16 is
 * therefore the identity for every pattern except signalling NaNs, which
 * come back quiet (bit 0x0200 for float16, 0x0040 for bfloat16, set).
 *
 * Subnormal float16 results are rounded by a float addition, so they follow
 * the current rounding mode; crnet assumes the default, nearest even.
 */

/* All ones if c, else zero. */
static inline uint32_t mask32(bool c) { return 0u - (uint32_t)c; }

static inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu; /* exponent and mantissa */
  /* Signed compares: SSE2 has no unsigned ones, and em < 2^15. */
  uint32_t subnormal = mask32((int32_t)em < 0x0400); /* or zero */
  uint32_t special = mask32((int32_t)em >= 0x7c00);  /* infinity or NaN */
  /* Finite values: move the mantissa up 13 bits and rebias the exponent from
   * 15 to 127. A subnormal (or zero) m gets exponent field 1 instead, which
   * reads as 2^-14 + m * 2^-24; subtracting 2^-14 leaves m * 2^-24 exactly.
   * Normal lanes subtract 0, special lanes compute 0 - 0. */
  uint32_t a =
      ~special & ((em << 13) + ((127u - 15u) << 23) + (subnormal & (1u << 23)));
  uint32_t b = subnormal & 0x38800000u; /* 2^-14 */
  uint32_t finite = f32_bits(f32_from_bits(a) - f32_from_bits(b));
  /* Infinity and NaN: exponent 255, payload moved up, quiet bit set on
   * NaNs. */
  uint32_t quiet = mask32((int32_t)em > 0x7c00) & 0x00400000u;
  uint32_t inf_nan = special & (0x7f800000u | quiet | ((em & 0x03ffu) << 13));
  return f32_from_bits(sign | finite | inf_nan);
}

/* The result is assembled in the upper 16 bits of a 32-bit word and shifted
 * down once at the end. Built in the low bits, gcc narrows every partial
 * result to 16-bit lanes separately, and without SSE4.1 each narrowing is a
 * long shuffle sequence; this way there is one narrowing per vector, which
 * cut the conversion's time by about 30% on baseline x86-64. Comparisons are on
 * int32_t (all operands are below 2^31) because SSE2 only compares signed
 * lanes. */
static inline uint16_t float_to_half(float f) {
  uint32_t x = f32_bits(f);
  uint32_t ax = x & 0x7fffffffu;
  /* |f| < 2^-14: the half is subnormal or zero. */
  uint32_t small = mask32((int32_t)ax < 0x38800000);
  /* At or above 65520, halfway between the largest half (65504) and 2^16:
   * the value rounds to infinity (the tie goes to the even pattern 0x7c00).
   * Infinity and NaN land here too. */
  uint32_t big = mask32((int32_t)ax >= 0x477ff000);
  uint32_t nan = mask32((int32_t)ax > 0x7f800000);
  /* Small lanes: adding 0.5 puts |f| on a grid of 2^-24, the subnormal half
   * step, and the float addition itself rounds to nearest even; the bits
   * above those of 0.5 are the half's mantissa (0x400 when it rounds up to
   * the smallest normal, which is also correct). Other lanes add 0 + 0.5 and
   * contribute 0, so no NaN or infinity enters the addition. */
  uint32_t sub = (f32_bits(f32_from_bits(small & ax) + 0.5f) - f32_bits(0.5f))
                 << 16;
  /* Normal half: rebias, then round the 13 dropped bits to nearest even by
   * adding just under half plus the kept low bit; a carry out of the
   * mantissa correctly bumps the exponent. The rebiased value is below 2^28,
   * so shifting it left by 3 puts the half's 15 bits at 16..30. On small
   * lanes the subtraction wraps; the mask discards it. */
  uint32_t normal =
      ~small &
      (((ax - ((127u - 15u) << 23) + 0x0fffu + ((ax >> 13) & 1u)) << 3) &
       0xffff0000u);
  /* NaN: quiet bit set, top ten payload bits kept. */
  uint32_t nan_bits = 0x02000000u | ((ax << 3) & 0x03ff0000u);
  uint32_t h = (~big & (sub | normal)) | (big & 0x7c000000u) |
               (nan & nan_bits) | (x & 0x80000000u);
  return (uint16_t)(h >> 16);
}

static inline float bfloat16_to_float(uint16_t b) {
  return f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t float_to_bfloat16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x0040u); /* NaN: set the quiet bit */
  /* Round the low 16 bits to nearest even. A carry moves into the exponent;
   * from the largest finite exponent it produces infinity, as IEEE rounding
   * requires. It cannot leave 32 bits: the largest non-NaN input is -inf. */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float crnet__half_to_float(uint16_t h) { return half_to_float(h); }
uint16_t crnet__float_to_half(float f) { return float_to_half(f); }
float crnet__bfloat16_to_float(uint16_t b) { return bfloat16_to_float(b); }
uint16_t crnet__float_to_bfloat16(float f) { return float_to_bfloat16(f); }

/* ------------------------------------------------------------------------
 * Floating min and max with the NaN and signed-zero rules stated at the top.
 *
 * When a == b the operands differ at most in the sign of zero, so OR-ing
 * their bits gives -0.0 if either is -0.0 (min) and AND-ing gives +0.0 unless
 * both are -0.0 (max).
 *
 * The two widths are written differently on purpose, each in the form gcc 12
 * vectorises on baseline x86-64. For float, exactly one of "a < b",
 * "b < a", "a == b", "unordered" holds and the result ORs the four
 * candidates: chained selects would be turned into branches and then keep
 * the float16 kernels, which inline this, from vectorising. For double the
 * chained selects vectorise and the OR form does not.
 */

static inline float min_float(float a, float b) {
  uint32_t ua = f32_bits(a), ub = f32_bits(b);
  return f32_from_bits((a < b ? ua : 0u) | (b < a ? ub : 0u) |
                       (a == b ? ua | ub : 0u) |
                       (isunordered(a, b) ? F32_CANONICAL_NAN : 0u));
}

static inline float max_float(float a, float b) {
  uint32_t ua = f32_bits(a), ub = f32_bits(b);
  return f32_from_bits((a > b ? ua : 0u) | (b > a ? ub : 0u) |
                       (a == b ? ua & ub : 0u) |
                       (isunordered(a, b) ? F32_CANONICAL_NAN : 0u));
}

static inline double min_double(double a, double b) {
  uint64_t r = f64_bits(a < b ? a : b);
  r = a == b ? f64_bits(a) | f64_bits(b) : r;
  r = isunordered(a, b) ? F64_CANONICAL_NAN : r;
  return f64_from_bits(r);
}

static inline double max_double(double a, double b) {
  uint64_t r = f64_bits(a > b ? a : b);
  r = a == b ? f64_bits(a) & f64_bits(b) : r;
  r = isunordered(a, b) ? F64_CANONICAL_NAN : r;
  return f64_from_bits(r);
}

/* ------------------------------------------------------------------------
 * Kernels. Each expression below combines x (from `in`) and y (from `inout`).
 * `1u * x` converts to unsigned int or wider before the arithmetic: uint8_t
 * and uint16_t operands would otherwise promote to signed int, and
 * 65535 * 65535 overflows int.
 */

#define EXPR_SUM(x, y) (1u * (x) + (y))
#define EXPR_PROD(x, y) (1u * (x) * (y))
#define EXPR_BAND(x, y) ((x) & (y))
#define EXPR_BOR(x, y) ((x) | (y))
#define EXPR_BXOR(x, y) ((x) ^ (y))
#define EXPR_LAND(x, y) (((x) != 0) & ((y) != 0))
#define EXPR_LOR(x, y) (((x) != 0) | ((y) != 0))
/* Baseline x86-64 has no 64-bit lane compare, so for 64-bit integers "is
 * nonzero" is the top bit of x | -x, which needs only or, sub and shift. */
#define NONZERO64(x) (((x) | (0u - (x))) >> 63)
#define EXPR_LAND64(x, y) (NONZERO64(x) & NONZERO64(y))
#define EXPR_LOR64(x, y) NONZERO64((x) | (y))
/* For floating types, a select between constants vectorises where
 * converting the int truth value would not. */
#define EXPR_FLAND(x, y) ((((x) != 0) & ((y) != 0)) ? 1.0f : 0.0f)
#define EXPR_FLOR(x, y) ((((x) != 0) | ((y) != 0)) ? 1.0f : 0.0f)
#define EXPR_MIN(x, y) ((x) < (y) ? (x) : (y))
#define EXPR_MAX(x, y) ((x) > (y) ? (x) : (y))
#define EXPR_FSUM(x, y) ((x) + (y))
#define EXPR_FPROD(x, y) ((x) * (y))
#define EXPR_FMIN32(x, y) min_float((x), (y))
#define EXPR_FMAX32(x, y) max_float((x), (y))
#define EXPR_FMIN64(x, y) min_double((x), (y))
#define EXPR_FMAX64(x, y) max_double((x), (y))

typedef void kernel_fn(const void *in, void *inout, size_t count);

/* One loop over elements of type T. */
#define KERNEL(name, T, EXPR)                                                  \
  static void name(const void *in_, void *inout_, size_t count) {              \
    const T *restrict in = in_;                                                \
    T *restrict inout = inout_;                                                \
    for (size_t i = 0; i < count; i++)                                         \
      inout[i] = (T)EXPR(in[i], inout[i]);                                     \
  }

/* One loop over 16-bit floats: widen both, combine in float, round back.
 * ATTR: nothing, or a target attribute for a build of the same loop for
 * wider vectors. */
#define KERNEL16_ATTR(ATTR, name, TO_F, FROM_F, EXPR)                          \
  ATTR static void name(const void *in_, void *inout_, size_t count) {         \
    const uint16_t *restrict in = in_;                                         \
    uint16_t *restrict inout = inout_;                                         \
    for (size_t i = 0; i < count; i++)                                         \
      inout[i] = FROM_F((float)EXPR(TO_F(in[i]), TO_F(inout[i])));             \
  }
#define KERNEL16(name, TO_F, FROM_F, EXPR)                                     \
  KERNEL16_ATTR(, name, TO_F, FROM_F, EXPR)

/* Operators whose result bits do not depend on signedness: one kernel per
 * width, shared by intN and uintN. */
#define UNSIGNED_KERNELS(sfx, T, LAND, LOR)                                    \
  KERNEL(sum_##sfx, T, EXPR_SUM)                                               \
  KERNEL(prod_##sfx, T, EXPR_PROD)                                             \
  KERNEL(band_##sfx, T, EXPR_BAND)                                             \
  KERNEL(bor_##sfx, T, EXPR_BOR)                                               \
  KERNEL(bxor_##sfx, T, EXPR_BXOR)                                             \
  KERNEL(land_##sfx, T, LAND)                                                  \
  KERNEL(lor_##sfx, T, LOR)

UNSIGNED_KERNELS(u8, uint8_t, EXPR_LAND, EXPR_LOR)
UNSIGNED_KERNELS(u16, uint16_t, EXPR_LAND, EXPR_LOR)
UNSIGNED_KERNELS(u32, uint32_t, EXPR_LAND, EXPR_LOR)
UNSIGNED_KERNELS(u64, uint64_t, EXPR_LAND64, EXPR_LOR64)

/* Comparisons do depend on signedness. */
#define MINMAX_KERNELS(sfx, T)                                                 \
  KERNEL(min_##sfx, T, EXPR_MIN)                                               \
  KERNEL(max_##sfx, T, EXPR_MAX)

MINMAX_KERNELS(i8, int8_t)
MINMAX_KERNELS(i16, int16_t)
MINMAX_KERNELS(i32, int32_t)
MINMAX_KERNELS(i64, int64_t)
MINMAX_KERNELS(u8, uint8_t)
MINMAX_KERNELS(u16, uint16_t)
MINMAX_KERNELS(u32, uint32_t)
MINMAX_KERNELS(u64, uint64_t)

KERNEL(sum_f32, float, EXPR_FSUM)
KERNEL(prod_f32, float, EXPR_FPROD)
KERNEL(min_f32, float, EXPR_FMIN32)
KERNEL(max_f32, float, EXPR_FMAX32)
KERNEL(land_f32, float, EXPR_FLAND)
KERNEL(lor_f32, float, EXPR_FLOR)

KERNEL(sum_f64, double, EXPR_FSUM)
KERNEL(prod_f64, double, EXPR_FPROD)
KERNEL(min_f64, double, EXPR_FMIN64)
KERNEL(max_f64, double, EXPR_FMAX64)
KERNEL(land_f64, double, EXPR_FLAND)
KERNEL(lor_f64, double, EXPR_FLOR)

#define KERNELS16(sfx, TO_F, FROM_F)                                           \
  KERNEL16(sum_##sfx, TO_F, FROM_F, EXPR_FSUM)                                 \
  KERNEL16(prod_##sfx, TO_F, FROM_F, EXPR_FPROD)                               \
  KERNEL16(min_##sfx, TO_F, FROM_F, EXPR_FMIN32)                               \
  KERNEL16(max_##sfx, TO_F, FROM_F, EXPR_FMAX32)                               \
  KERNEL16(land_##sfx, TO_F, FROM_F, EXPR_FLAND)                               \
  KERNEL16(lor_##sfx, TO_F, FROM_F, EXPR_FLOR)

/* float16: the portable kernels; sum and prod get a faster path below, and
 * both pin which NaN survives when both operands are NaN (`in`'s), which
 * plain float arithmetic leaves to the compiler's operand order. */
static inline float pin_nan(float x, float r) {
  /* Two selects ORed, not one chained select: gcc 12 vectorises this form
   * (see min_float). */
  return f32_from_bits((isunordered(x, x) ? f32_bits(x) : 0u) |
                       (isunordered(x, x) ? 0u : f32_bits(r)));
}
#define EXPR_FSUM_PIN(x, y) pin_nan((x), (x) + (y))
#define EXPR_FPROD_PIN(x, y) pin_nan((x), (x) * (y))
KERNEL16(sum_f16p, half_to_float, float_to_half, EXPR_FSUM_PIN)
KERNEL16(prod_f16p, half_to_float, float_to_half, EXPR_FPROD_PIN)
KERNEL16(min_f16p, half_to_float, float_to_half, EXPR_FMIN32)
KERNEL16(max_f16p, half_to_float, float_to_half, EXPR_FMAX32)
KERNEL16(land_f16p, half_to_float, float_to_half, EXPR_FLAND)
KERNEL16(lor_f16p, half_to_float, float_to_half, EXPR_FLOR)
#define min_f16 min_f16p
#define max_f16 max_f16p
#define land_f16 land_f16p
#define lor_f16 lor_f16p
/* bfloat16: sum and prod pin the surviving NaN as float16's do, so the
 * AVX2 build of the same loop below (vectorised by the compiler at twice
 * the width) gives the same bits as this one. */
KERNEL16(sum_bf16p, bfloat16_to_float, float_to_bfloat16, EXPR_FSUM_PIN)
KERNEL16(prod_bf16p, bfloat16_to_float, float_to_bfloat16, EXPR_FPROD_PIN)
KERNEL16(min_bf16, bfloat16_to_float, float_to_bfloat16, EXPR_FMIN32)
KERNEL16(max_bf16, bfloat16_to_float, float_to_bfloat16, EXPR_FMAX32)
KERNEL16(land_bf16, bfloat16_to_float, float_to_bfloat16, EXPR_FLAND)
KERNEL16(lor_bf16, bfloat16_to_float, float_to_bfloat16, EXPR_FLOR)

/* ------------------------------------------------------------------------
 * float16 sum and prod with the x86 F16C conversions, chosen at run time
 * when the CPU has them (every x86-64 CPU since 2012-13). The portable
 * kernels above spend nearly all their time in the bit-twiddling
 * conversions (about 0.9 GB/s against 7 GB/s for float on this project's
 * VM); vcvtph2ps and vcvtps2ph do eight at a time in hardware, with the
 * same results: exact widening (a signalling NaN comes back quiet), float
 * arithmetic, and rounding back to nearest even. The one freedom IEEE
 * leaves, which NaN survives when both operands are NaN, is pinned to the
 * portable kernels' choice (the one from `in`, quieted) by a blend, so the
 * two paths agree bit for bit and a job mixing CPUs still gets identical
 * bits everywhere. Elements past the last multiple of eight go through the
 * portable kernel.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define F16C_TARGET __attribute__((target("avx,f16c")))

#define F16C_KERNEL(name, VOP, portable)                                      \
  F16C_TARGET static void name##_f16c(const void *in_, void *inout_,          \
                                      size_t count) {                          \
    const uint16_t *in = in_;                                                  \
    uint16_t *inout = inout_;                                                  \
    size_t i = 0;                                                              \
    for (; i + 8 <= count; i += 8) {                                           \
      __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));  \
      __m256 y =                                                               \
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(inout + i)));      \
      __m256 r = VOP(x, y);                                                    \
      r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));           \
      _mm_storeu_si128((__m128i *)(inout + i),                                 \
                       _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));         \
    }                                                                          \
    portable(in + i, inout + i, count - i);                                    \
  }

F16C_KERNEL(sum_f16, _mm256_add_ps, sum_f16p)
F16C_KERNEL(prod_f16, _mm256_mul_ps, prod_f16p)

/* bfloat16 widens and narrows with shifts, which the compiler vectorises by
 * itself; AVX2 doubles the width. */
#define AVX2_TARGET __attribute__((target("avx2")))
KERNEL16_ATTR(AVX2_TARGET, sum_bf16_avx2, bfloat16_to_float,
              float_to_bfloat16, EXPR_FSUM_PIN)
KERNEL16_ATTR(AVX2_TARGET, prod_bf16_avx2, bfloat16_to_float,
              float_to_bfloat16, EXPR_FPROD_PIN)

/* F16C from CPUID itself: not every compiler's __builtin_cpu_supports
 * knows the name "f16c" (clang 14 refuses it). */
static bool cpu_has_f16c(void) {
  unsigned int a, b, c, d;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) &&
         (c & bit_F16C) != 0;
}

static bool cpu_has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#else
#define sum_f16_f16c sum_f16p
#define prod_f16_f16c prod_f16p
#define sum_bf16_avx2 sum_bf16p
#define prod_bf16_avx2 prod_bf16p
static bool cpu_has_f16c(void) { return false; }
static bool cpu_has_avx2(void) { return false; }
#endif

/* The 16-bit float sum and prod of the table below: F16C and AVX2 where the
 * CPU has them (CRNET_NO_F16C in the environment keeps the portable
 * kernels, for comparison and for the tests of both paths). */
static kernel_fn *f16_sum_kernel = sum_f16p, *f16_prod_kernel = prod_f16p;
static kernel_fn *bf16_sum_kernel = sum_bf16p, *bf16_prod_kernel = prod_bf16p;
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void choose_f16_kernels(void) {
  if (getenv("CRNET_NO_F16C") != NULL)
    return;
  if (cpu_has_f16c()) {
    f16_sum_kernel = sum_f16_f16c;
    f16_prod_kernel = prod_f16_f16c;
  }
  if (cpu_has_avx2()) {
    bf16_sum_kernel = sum_bf16_avx2;
    bf16_prod_kernel = prod_bf16_avx2;
  }
}

const char *crnet__f16_kernel(void) {
  pthread_once(&f16_once, choose_f16_kernels);
  return f16_sum_kernel == sum_f16p ? "portable" : "f16c";
}

const char *crnet__bf16_kernel(void) {
  pthread_once(&f16_once, choose_f16_kernels);
  return bf16_sum_kernel == sum_bf16p ? "portable" : "avx2";
}

static void sum_f16(const void *in, void *inout, size_t count) {
  pthread_once(&f16_once, choose_f16_kernels);
  f16_sum_kernel(in, inout, count);
}

static void prod_f16(const void *in, void *inout, size_t count) {
  pthread_once(&f16_once, choose_f16_kernels);
  f16_prod_kernel(in, inout, count);
}

static void sum_bf16(const void *in, void *inout, size_t count) {
  pthread_once(&f16_once, choose_f16_kernels);
  bf16_sum_kernel(in, inout, count);
}

static void prod_bf16(const void *in, void *inout, size_t count) {
  pthread_once(&f16_once, choose_f16_kernels);
  bf16_prod_kernel(in, inout, count);
}

/* The built-in operator table. A NULL entry is an invalid pair, so validity
 * and the kernels come from the same place and cannot drift apart. */

#define INT_ROW(op)                                                            \
  [CRNET_INT8] = op##_u8, [CRNET_INT16] = op##_u16, [CRNET_INT32] = op##_u32,  \
  [CRNET_INT64] = op##_u64, [CRNET_UINT8] = op##_u8,                           \
  [CRNET_UINT16] = op##_u16, [CRNET_UINT32] = op##_u32,                        \
  [CRNET_UINT64] = op##_u64

#define FLOAT_ROW(op)                                                          \
  [CRNET_FLOAT16] = op##_f16, [CRNET_BFLOAT16] = op##_bf16,                    \
  [CRNET_FLOAT] = op##_f32, [CRNET_DOUBLE] = op##_f64

#define MINMAX_ROW(op)                                                         \
  [CRNET_INT8] = op##_i8, [CRNET_INT16] = op##_i16, [CRNET_INT32] = op##_i32,  \
  [CRNET_INT64] = op##_i64, [CRNET_UINT8] = op##_u8,                           \
  [CRNET_UINT16] = op##_u16, [CRNET_UINT32] = op##_u32,                        \
  [CRNET_UINT64] = op##_u64, FLOAT_ROW(op)

static kernel_fn *const builtin[CRNET_OP_BUILTIN_COUNT][CRNET_DATATYPE_COUNT] =
    {
        [CRNET_SUM] = {INT_ROW(sum), FLOAT_ROW(sum)},
        [CRNET_PROD] = {INT_ROW(prod), FLOAT_ROW(prod)},
        [CRNET_MIN] = {MINMAX_ROW(min)},
        [CRNET_MAX] = {MINMAX_ROW(max)},
        [CRNET_BAND] = {INT_ROW(band)},
        [CRNET_BOR] = {INT_ROW(bor)},
        [CRNET_BXOR] = {INT_ROW(bxor)},
        [CRNET_LAND] = {INT_ROW(land), FLOAT_ROW(land)},
        [CRNET_LOR] = {INT_ROW(lor), FLOAT_ROW(lor)},
};

/* ------------------------------------------------------------------------
 * User operators.
 *
 * A fixed array of slots under one mutex. A handle is
 *
 *   USER_OP_BASE + generation * USER_OP_SLOTS + slot
 *
 * and a slot's generation advances when it is freed, so a stale handle kept
 * after crnet_op_free() stops being valid even once its slot is reused
 * (until the generation wraps, after USER_OP_GENERATIONS reuses of one slot).
 * Handles start at 64, not at CRNET_OP_BUILTIN_COUNT, so new built-ins can be
 * added without changing the meaning of any user handle.
 *
 * Every access takes the mutex, including the lookup in crnet__reduce(): it
 * is held only to copy fn and ctx out, once per call rather than per element,
 * and is released before the user function runs, so a user function may
 * itself create or free operators without deadlocking. Freeing an operator
 * while a collective still uses it is misuse; the copy taken under the lock
 * at least keeps that call consistent.
 *
 * Creation and freeing are deterministic (lowest free slot), so SPMD ranks
 * that create and free in the same order get the same handles, which lets
 * peers compare operators by handle.
 */

#define USER_OP_BASE 64
#define USER_OP_SLOTS 1024
#define USER_OP_GENERATIONS ((INT_MAX - USER_OP_BASE) / USER_OP_SLOTS)

struct user_op {
  crnet_user_fn *fn; /* NULL: the slot is free */
  void *ctx;
  bool commutative;
  unsigned generation;
};

static struct user_op user_ops[USER_OP_SLOTS];
static pthread_mutex_t user_ops_lock = PTHREAD_MUTEX_INITIALIZER;

/* The live slot `op` names, or NULL. Call with the lock held. */
static struct user_op *user_op_find(crnet_op op) {
  if (op < USER_OP_BASE)
    return NULL;
  unsigned v = (unsigned)op - USER_OP_BASE;
  struct user_op *u = &user_ops[v % USER_OP_SLOTS];
  if (u->fn == NULL || u->generation != v / USER_OP_SLOTS)
    return NULL;
  return u;
}

static bool is_builtin(crnet_op op) {
  return op >= 0 && op < CRNET_OP_BUILTIN_COUNT;
}

static bool datatype_in_range(crnet_datatype dt) {
  return (int)dt >= 0 && (int)dt < CRNET_DATATYPE_COUNT;
}

int crnet_op_create(crnet_op *op, crnet_user_fn *fn, void *ctx,
                    int commutative) {
  if (op == NULL || fn == NULL)
    return CRNET_EINVAL;
  int err = CRNET_ENOMEM;
  pthread_mutex_lock(&user_ops_lock);
  for (unsigned slot = 0; slot < USER_OP_SLOTS; slot++) {
    struct user_op *u = &user_ops[slot];
    if (u->fn != NULL)
      continue;
    u->fn = fn;
    u->ctx = ctx;
    u->commutative = commutative != 0;
    *op = (crnet_op)(USER_OP_BASE + u->generation * USER_OP_SLOTS + slot);
    err = 0;
    break;
  }
  pthread_mutex_unlock(&user_ops_lock);
  return err;
}

/* On success the slot is released and *op becomes -1, a value no operator
 * ever has, so a second free through the same variable returns CRNET_EINVAL
 * instead of touching whatever reuses the slot. */
int crnet_op_free(crnet_op *op) {
  if (op == NULL)
    return CRNET_EINVAL;
  int err = CRNET_EINVAL;
  pthread_mutex_lock(&user_ops_lock);
  struct user_op *u = user_op_find(*op);
  if (u != NULL) {
    u->fn = NULL;
    u->ctx = NULL;
    u->commutative = false;
    u->generation = (u->generation + 1) % USER_OP_GENERATIONS;
    *op = -1;
    err = 0;
  }
  pthread_mutex_unlock(&user_ops_lock);
  return err;
}

bool crnet__op_valid(crnet_op op, crnet_datatype dt) {
  if (!datatype_in_range(dt))
    return false;
  if (is_builtin(op))
    return builtin[op][dt] != NULL;
  pthread_mutex_lock(&user_ops_lock);
  bool live = user_op_find(op) != NULL;
  pthread_mutex_unlock(&user_ops_lock);
  return live;
}

bool crnet__op_exists(crnet_op op) {
  if (is_builtin(op))
    return true;
  pthread_mutex_lock(&user_ops_lock);
  bool live = user_op_find(op) != NULL;
  pthread_mutex_unlock(&user_ops_lock);
  return live;
}

bool crnet__op_commutative(crnet_op op) {
  if (is_builtin(op))
    return true;
  pthread_mutex_lock(&user_ops_lock);
  struct user_op *u = user_op_find(op);
  bool commutative = u != NULL && u->commutative;
  pthread_mutex_unlock(&user_ops_lock);
  return commutative;
}

void crnet__reduce(crnet_op op, crnet_datatype dt, const void *in, void *inout,
                   size_t count) {
  assert(datatype_in_range(dt));
  if (count == 0)
    return;
  /* The kernels are compiled with restrict: overlapping buffers would give
   * wrong results silently, so catch the caller's mistake here. */
  assert((uintptr_t)in + count * crnet_datatype_size(dt) <= (uintptr_t)inout ||
         (uintptr_t)inout + count * crnet_datatype_size(dt) <= (uintptr_t)in);
  if (is_builtin(op)) {
    kernel_fn *k = builtin[op][dt];
    assert(k != NULL);
    if (k != NULL)
      k(in, inout, count);
    return;
  }
  pthread_mutex_lock(&user_ops_lock);
  struct user_op *u = user_op_find(op);
  crnet_user_fn *fn = u != NULL ? u->fn : NULL;
  void *ctx = u != NULL ? u->ctx : NULL;
  pthread_mutex_unlock(&user_ops_lock);
  assert(fn != NULL);
  if (fn != NULL)
    fn(in, inout, count, dt, ctx);
}

/* ------------------------------------------------------------------------
 * Operator names (datatypes' sizes and names: base/names.c). Names are
 * string literals: safe from any thread.
 */

const char *crnet_op_name(crnet_op op) {
  switch (op) {
  case CRNET_SUM:
    return "sum";
  case CRNET_PROD:
    return "prod";
  case CRNET_MIN:
    return "min";
  case CRNET_MAX:
    return "max";
  case CRNET_BAND:
    return "band";
  case CRNET_BOR:
    return "bor";
  case CRNET_BXOR:
    return "bxor";
  case CRNET_LAND:
    return "land";
  case CRNET_LOR:
    return "lor";
  }
  pthread_mutex_lock(&user_ops_lock);
  bool live = user_op_find(op) != NULL;
  pthread_mutex_unlock(&user_ops_lock);
  return live ? "user op" : "unknown op";
}
