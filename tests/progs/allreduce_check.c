/* allreduce_check: conformance of crnet_allreduce between real processes.
 *
 *   crlaunch -n P ./allreduce_check [large_count]
 *
 * Every rank runs the same sequence of calls and checks every result against
 * a reference computed here, from the public header only: this program knows
 * nothing of the schedule, the kernels or their float conversions.
 *
 * The matrix: every reducible datatype (all but CRNET_BYTE) × every built-in
 * op valid for it (bitwise ops on the 8 integer types only) × counts
 * {0, 1, p-1, p, p+1, 1001, large} (duplicates dropped) × in place or not,
 * plus a wrapping sum and a wrapping product on each integer type.
 *
 * Inputs are a cheap hash of (rank, index), shaped per op so that the exact
 * result is a small integer (or, for bitwise and wrapping cases, a bit
 * pattern) that every type represents exactly, float16 and bfloat16 included:
 *   sum      values -2..2 (0..3 unsigned): |sum| <= 48 at p = 16
 *   prod     1, except a value in {0, 2, 3, -2, -1} at one chosen rank and -1
 *            (2 unsigned) at another: |prod| <= 6; a floating zero product
 *            is -0.0 when an odd number of factors is negative
 *   min/max  values -5..5 (0..10 unsigned)
 *   bitwise  single bits (band: all ones but one bit), with some indices
 *            all-ones (band) or all-zero (bor, bxor) on every rank
 *   land/lor per index all nonzero, one zero, all zero, or one nonzero; the
 *            nonzero values are not only 1 (2, 3, 7, -1, -3) and the floating
 *            zeros are sometimes -0.0, which is false; the result must be 0
 *            or 1, as crnet.h promises, at every p including 1
 *   wrapping sums near half the type's range, products of random odd
 *            numbers, computed here modulo 2^64 and truncated
 * The reference folds all ranks' inputs in 64-bit integers (exact for every
 * value above) and encodes the result with our own float16/bfloat16 encoders;
 * results are compared bitwise.
 *
 * Each call also checks that the send buffer is unchanged, that 8 guard
 * elements on either side of the receive range are untouched, and, when not
 * in place, that every element was written (the receive buffer starts as the
 * complement of the expected result). All results go into a 64-bit hash that
 * must be the same on every rank (allreduced with MAX and MIN).
 *
 * Then: a non-commutative user op gets NONCOMMUTATIVE_RC (0: `auto` runs it
 * on an order-preserving schedule, and the rank-order result is checked), a
 * commutative user op works, invalid arguments return CRNET_EINVAL without touching the
 * receive buffer or the communicator, one more allreduce succeeds, and
 * crnet_comm_destroy returns 0.
 *
 * Failures go to stderr with rank, datatype, op, count, index, expected and
 * got. After MAX_REPORTS of them, or on any communicator error, the rank
 * aborts the job (so the others stop fast) and exits 1. Setting
 * ALLREDUCE_CHECK_CORRUPT=<rank> makes that rank expect one wrong element in
 * its int32 sum reference (index large/2), to see the failure path work.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"

/* What a non-commutative op must get under `auto` (and under an
 * order-preserving schedule): success, with the rank-order result checked.
 * A schedule that reorders operands may refuse instead (schedule_reorders). */
#define NONCOMMUTATIVE_RC CRNET_OK

#define DEFAULT_LARGE_COUNT 100003
#define GUARD_ELEMS 8
#define GUARD_BYTE 0xA5
#define MAX_REPORTS 10

/* Logical value standing for -0.0 (floating types only). */
#define NEG_ZERO UINT64_C(0x8000000000000000)

enum pattern {
  PAT_SUM,
  PAT_PROD,
  PAT_MINMAX,
  PAT_BAND,
  PAT_BOR,
  PAT_BXOR,
  PAT_LOGIC,
  PAT_SUM_WRAP,
  PAT_PROD_WRAP,
};

struct variant {
  crnet_op op;
  enum pattern pat;
  const char *tag;
};

static const struct variant variants[] = {
    {CRNET_SUM, PAT_SUM, ""},
    {CRNET_PROD, PAT_PROD, ""},
    {CRNET_MIN, PAT_MINMAX, ""},
    {CRNET_MAX, PAT_MINMAX, ""},
    {CRNET_BAND, PAT_BAND, ""},
    {CRNET_BOR, PAT_BOR, ""},
    {CRNET_BXOR, PAT_BXOR, ""},
    {CRNET_LAND, PAT_LOGIC, ""},
    {CRNET_LOR, PAT_LOGIC, ""},
    {CRNET_SUM, PAT_SUM_WRAP, " (wrapping)"},
    {CRNET_PROD, PAT_PROD_WRAP, " (wrapping)"},
};

/* The order of datatypes within a variant. */
static const crnet_datatype dt_order[] = {
    CRNET_INT8,    CRNET_INT16,    CRNET_INT32,  CRNET_INT64,
    CRNET_FLOAT16, CRNET_BFLOAT16, CRNET_FLOAT,  CRNET_DOUBLE,
    CRNET_UINT8,   CRNET_UINT16,   CRNET_UINT32, CRNET_UINT64,
};

/* Our own element sizes, checked against crnet_datatype_size(). */
static const size_t type_size[CRNET_DATATYPE_COUNT] = {
    [CRNET_INT8] = 1,     [CRNET_INT16] = 2,  [CRNET_INT32] = 4,
    [CRNET_INT64] = 8,    [CRNET_UINT8] = 1,  [CRNET_UINT16] = 2,
    [CRNET_UINT32] = 4,   [CRNET_UINT64] = 8, [CRNET_FLOAT16] = 2,
    [CRNET_BFLOAT16] = 2, [CRNET_FLOAT] = 4,  [CRNET_DOUBLE] = 8,
    [CRNET_BYTE] = 1,
};

static bool is_integer(crnet_datatype dt) { return dt <= CRNET_UINT64; }
static bool is_unsigned(crnet_datatype dt) {
  return dt >= CRNET_UINT8 && dt <= CRNET_UINT64;
}
static bool is_floating(crnet_datatype dt) {
  return dt >= CRNET_FLOAT16 && dt <= CRNET_DOUBLE;
}

static bool variant_valid(const struct variant *v, crnet_datatype dt) {
  switch (v->pat) {
  case PAT_BAND:
  case PAT_BOR:
  case PAT_BXOR:
  case PAT_SUM_WRAP:
  case PAT_PROD_WRAP:
    return is_integer(dt);
  default:
    return dt != CRNET_BYTE;
  }
}

/* --- the job's state and failure reporting --- */

struct state {
  crnet_comm *comm;
  int rank, p;
  unsigned long cases;    /* checks passed */
  unsigned long failures; /* checks failed */
  bool broken;            /* the communicator failed: stop at once */
  uint64_t hash;          /* of every result, in call order */
  int corrupt_rank;       /* ALLREDUCE_CHECK_CORRUPT, or -1 */
};

static bool stopped(const struct state *st) {
  return st->broken || st->failures >= MAX_REPORTS;
}

static void report(struct state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report(struct state *st, const char *fmt, ...) {
  va_list ap;
  if (st->failures >= MAX_REPORTS)
    return;
  fprintf(stderr, "allreduce_check: rank %d: FAIL: ", st->rank);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (++st->failures == MAX_REPORTS)
    fprintf(stderr, "allreduce_check: rank %d: %d failures, stopping\n",
            st->rank, MAX_REPORTS);
}

/* A call that should have succeeded returned rc. Any code but the two that
 * leave the communicator usable means the job is over. */
static void report_rc(struct state *st, const char *what, int rc) {
  report(st, "%s: returned %s (%s): %s", what, crnet_err_name(rc),
         crnet_strerror(rc), crnet_comm_errmsg(st->comm));
  if (rc != CRNET_EINVAL && rc != CRNET_EUNSUPPORTED)
    st->broken = true;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n > 0 ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "allreduce_check: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  uint64_t w;
  for (; n >= 8; n -= 8, b += 8) {
    memcpy(&w, b, 8);
    h = (h ^ w) * UINT64_C(0x100000001b3);
    h ^= h >> 29;
  }
  for (; n > 0; n--, b++)
    h = (h ^ *b) * UINT64_C(0x100000001b3);
  return h;
}

/* --- float16 and bfloat16, our own codecs --- */

/* Encodes the integer v (or NEG_ZERO) as a binary float of `mant` fraction
 * bits and exponent `bias`; v must be exactly representable. */
static uint16_t small_float_bits(uint64_t v, int mant, int bias,
                                 int max_biased) {
  uint64_t mag, frac;
  uint16_t sign = 0;
  int e = 0;

  if (v == 0)
    return 0;
  if (v == NEG_ZERO)
    return 0x8000;
  mag = v;
  if (v >> 63) {
    sign = 0x8000;
    mag = ~v + 1;
  }
  while (mag >> (e + 1))
    e++;
  if (e > mant && (mag & ((UINT64_C(1) << (e - mant)) - 1)) != 0)
    goto inexact;
  if (e + bias > max_biased)
    goto inexact;
  frac = e >= mant ? mag >> (e - mant) : mag << (mant - e);
  frac &= (UINT64_C(1) << mant) - 1;
  return (uint16_t)(sign | (uint16_t)((e + bias) << mant) | (uint16_t)frac);

inexact:
  /* A value chosen by this program that the type cannot hold is a bug here,
   * not in the library. */
  fprintf(stderr,
          "allreduce_check: internal error: %" PRId64
          " is not exact in a %d-bit significand\n",
          (int64_t)v, mant + 1);
  abort();
}

static uint16_t half_bits(uint64_t v) {
  return small_float_bits(v, 10, 15, 30);
}
static uint16_t bf16_bits(uint64_t v) {
  return small_float_bits(v, 7, 127, 254);
}

static double pow2i(int k) {
  double x = 1.0;
  for (; k > 0; k--)
    x *= 2.0;
  for (; k < 0; k++)
    x *= 0.5;
  return x;
}

/* For messages only. */
static double small_float_value(uint16_t h, int mant, int ebits) {
  int emax = (1 << ebits) - 1, bias = emax / 2;
  int e = (h >> mant) & emax;
  unsigned f = h & ((1u << mant) - 1);
  double x;
  if (e == emax)
    x = f ? NAN : INFINITY;
  else if (e == 0)
    x = f * pow2i(1 - bias - mant);
  else
    x = (f + (1u << mant)) * pow2i(e - bias - mant);
  return (h & 0x8000) ? -x : x;
}

static void self_test_codecs(void) {
  static const struct {
    int64_t v;
    uint16_t half, bf16;
  } known[] = {
      {1, 0x3C00, 0x3F80}, {2, 0x4000, 0x4000},   {-1, 0xBC00, 0xBF80},
      {3, 0x4200, 0x4040}, {-5, 0xC500, 0xC0A0},  {48, 0x5200, 0x4240},
      {65504, 0x7BFF, 0},  {256, 0x5C00, 0x4380}, {-48, 0xD200, 0xC240},
  };
  for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
    uint64_t v = (uint64_t)known[k].v;
    if (half_bits(v) != known[k].half ||
        (known[k].bf16 != 0 && bf16_bits(v) != known[k].bf16) ||
        small_float_value(known[k].half, 10, 5) != (double)known[k].v) {
      fprintf(stderr, "allreduce_check: internal error: codec of %" PRId64 "\n",
              known[k].v);
      abort();
    }
  }
  if (half_bits(NEG_ZERO) != 0x8000 || bf16_bits(NEG_ZERO) != 0x8000) {
    fprintf(stderr, "allreduce_check: internal error: codec of -0\n");
    abort();
  }
}

/* --- inputs and the reference --- */

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/* Per (rank, index) and per index only. */
static uint32_t hash_ri(int r, size_t i, uint32_t salt) {
  return mix32((uint32_t)i * 0x9E3779B1U + (uint32_t)(r + 1) * 0x632BE5ABU +
               salt * 0x85EBCA77U);
}
static uint32_t hash_i(size_t i, uint32_t salt) {
  return mix32((uint32_t)i * 0x9E3779B1U + salt * 0xC2B2AE3DU + 0x68E31DA4U);
}

/* What the logical values of a variant depend on. Two datatypes with equal
 * keys get the same inputs and the same reference, computed once. */
struct ref_key {
  enum pattern pat;
  crnet_op op;
  int sgn;   /* signed values (signed integers and floats) */
  int width; /* bits, for patterns that use them */
  int flt;   /* may use -0.0 */
};

/* Folding p rows of up to `large` elements is most of this program's own
 * work at p = 16, so a few recent references are kept: a variant then folds
 * once per key (2 to 4 times) instead of once per datatype (8 or 12). */
#define REF_SLOTS 4

struct ref {
  struct ref_key key;
  bool valid;
  uint64_t *mine; /* this rank's logical inputs */
  uint64_t *want; /* the logical result */
};

struct refs {
  struct ref slot[REF_SLOTS];
  unsigned next; /* the slot to replace */
  size_t n;      /* elements in every array */
  uint64_t *row; /* scratch: one rank's inputs */
};

static struct ref_key key_of(const struct variant *v, crnet_datatype dt) {
  struct ref_key k = {v->pat, v->op, 0, 0, 0};
  switch (v->pat) {
  case PAT_BAND:
  case PAT_BOR:
  case PAT_BXOR:
  case PAT_SUM_WRAP:
  case PAT_PROD_WRAP:
    k.width = (int)(8 * type_size[dt]);
    break;
  case PAT_PROD:
  case PAT_LOGIC:
    k.flt = is_floating(dt);
    k.sgn = !is_unsigned(dt);
    break;
  default:
    k.sgn = !is_unsigned(dt);
    break;
  }
  return k;
}

static uint64_t width_mask(int w) {
  return w == 64 ? ~UINT64_C(0) : (UINT64_C(1) << w) - 1;
}

/* Rank r's logical inputs for indices 0..n-1. */
static void gen_row(const struct ref_key *k, int p, int r, uint64_t *row,
                    size_t n) {
  static const int64_t prod_sgn[8] = {0, 2, 2, 2, 3, 3, -2, -1};
  static const int64_t prod_uns[8] = {0, 2, 2, 2, 3, 3, 2, 1};
  static const int64_t nz_sgn[4] = {1, 2, -1, -3};
  static const int64_t nz_uns[4] = {1, 2, 3, 7};
  uint32_t salt = (uint32_t)k->pat;
  uint32_t pm1 = p > 1 ? (uint32_t)p - 1 : 1;

  switch (k->pat) {
  case PAT_SUM:
    for (size_t i = 0; i < n; i++) {
      uint32_t x = hash_ri(r, i, salt);
      row[i] = k->sgn ? (uint64_t)((int64_t)(x % 5) - 2) : x % 4;
    }
    break;
  case PAT_PROD:
    for (size_t i = 0; i < n; i++) {
      uint32_t y = hash_i(i, salt);
      int s1 = (int)(y % (uint32_t)p);
      int s2 = (int)(((uint32_t)s1 + 1 + (y >> 8) % pm1) % (uint32_t)p);
      int64_t v = 1;
      if (r == s1)
        v = (k->sgn ? prod_sgn : prod_uns)[(y >> 16) & 7];
      else if (r == s2 && ((y >> 20) & 1))
        v = k->sgn ? -1 : 2;
      row[i] = (uint64_t)v;
    }
    break;
  case PAT_MINMAX:
    for (size_t i = 0; i < n; i++) {
      uint32_t x = hash_ri(r, i, salt);
      row[i] = k->sgn ? (uint64_t)((int64_t)(x % 11) - 5) : x % 11;
    }
    break;
  case PAT_BAND:
    for (size_t i = 0; i < n; i++)
      row[i] =
          (hash_i(i, salt) & 3) == 0
              ? ~UINT64_C(0)
              : ~(UINT64_C(1) << (hash_ri(r, i, salt) % (uint32_t)k->width));
    break;
  case PAT_BOR:
    for (size_t i = 0; i < n; i++)
      row[i] = (hash_i(i, salt) & 3) == 0
                   ? 0
                   : UINT64_C(1) << (hash_ri(r, i, salt) % (uint32_t)k->width);
    break;
  case PAT_BXOR:
    for (size_t i = 0; i < n; i++) {
      uint32_t x = hash_ri(r, i, salt);
      row[i] =
          ((x >> 8) & 3) == 0 ? 0 : UINT64_C(1) << (x % (uint32_t)k->width);
    }
    break;
  case PAT_LOGIC:
    for (size_t i = 0; i < n; i++) {
      uint32_t y = hash_i(i, salt), kind = y & 3;
      int z = (int)((y >> 8) % (uint32_t)p);
      uint32_t x = hash_ri(r, i, salt);
      bool nonzero =
          kind == 0 || (kind == 1 && r != z) || (kind == 3 && r == z);
      if (nonzero)
        row[i] = (uint64_t)(k->sgn ? nz_sgn : nz_uns)[x & 3];
      else
        row[i] = k->flt && (x & 4) ? NEG_ZERO : 0;
    }
    break;
  case PAT_SUM_WRAP:
    for (size_t i = 0; i < n; i++)
      row[i] = (width_mask(k->width) >> 1) - 27 + hash_ri(r, i, salt) % 64;
    break;
  case PAT_PROD_WRAP:
    for (size_t i = 0; i < n; i++) {
      uint64_t x = (uint64_t)hash_ri(r, i, salt) << 32 | hash_ri(r, i, ~salt);
      row[i] = (x * UINT64_C(0x9E3779B97F4A7C15)) | 1;
    }
    break;
  }
}

static bool truthy(const struct ref_key *k, uint64_t v) {
  return v != 0 && !(k->flt && v == NEG_ZERO);
}

/* Signed order on two's complement patterns, without conversions. */
static bool less(uint64_t a, uint64_t b) {
  return (a ^ NEG_ZERO) < (b ^ NEG_ZERO);
}

/* acc = acc (op) row, element-wise, in 64-bit arithmetic: exact for the
 * small values, and modulo 2^64 (hence modulo 2^width after truncation) for
 * sums, products and bit operations. */
static void fold_row(const struct ref_key *k, uint64_t *acc,
                     const uint64_t *row, size_t n) {
  switch (k->op) {
  case CRNET_SUM:
    for (size_t i = 0; i < n; i++)
      acc[i] += row[i];
    break;
  case CRNET_PROD:
    if (!k->flt) {
      for (size_t i = 0; i < n; i++)
        acc[i] *= row[i];
      break;
    }
    /* IEEE 754: a zero product carries the xor of the factors' signs. */
    for (size_t i = 0; i < n; i++) {
      if ((acc[i] & ~NEG_ZERO) == 0 || (row[i] & ~NEG_ZERO) == 0)
        acc[i] = ((acc[i] ^ row[i]) >> 63) ? NEG_ZERO : 0;
      else
        acc[i] *= row[i];
    }
    break;
  case CRNET_MIN:
    for (size_t i = 0; i < n; i++)
      acc[i] = less(row[i], acc[i]) ? row[i] : acc[i];
    break;
  case CRNET_MAX:
    for (size_t i = 0; i < n; i++)
      acc[i] = less(acc[i], row[i]) ? row[i] : acc[i];
    break;
  case CRNET_BAND:
    for (size_t i = 0; i < n; i++)
      acc[i] &= row[i];
    break;
  case CRNET_BOR:
    for (size_t i = 0; i < n; i++)
      acc[i] |= row[i];
    break;
  case CRNET_BXOR:
    for (size_t i = 0; i < n; i++)
      acc[i] ^= row[i];
    break;
  case CRNET_LAND:
    for (size_t i = 0; i < n; i++)
      acc[i] = acc[i] && truthy(k, row[i]);
    break;
  case CRNET_LOR:
    for (size_t i = 0; i < n; i++)
      acc[i] = acc[i] || truthy(k, row[i]);
    break;
  }
}

static const struct ref *ref_get(struct refs *refs, const struct ref_key *k,
                                 int p, int rank) {
  size_t n = refs->n;
  struct ref *ref;
  for (int s = 0; s < REF_SLOTS; s++)
    if (refs->slot[s].valid && memcmp(&refs->slot[s].key, k, sizeof *k) == 0)
      return &refs->slot[s];
  ref = &refs->slot[refs->next];
  refs->next = (refs->next + 1) % REF_SLOTS;
  gen_row(k, p, 0, ref->want, n);
  if (k->op == CRNET_LAND || k->op == CRNET_LOR)
    for (size_t i = 0; i < n; i++)
      ref->want[i] = truthy(k, ref->want[i]);
  for (int r = 1; r < p; r++) {
    gen_row(k, p, r, refs->row, n);
    fold_row(k, ref->want, refs->row, n);
  }
  gen_row(k, p, rank, ref->mine, n);
  ref->key = *k;
  ref->valid = true;
  return ref;
}

/* Logical values to elements of dt. */
static void encode(crnet_datatype dt, const uint64_t *v, void *out, size_t n) {
  switch (dt) {
  case CRNET_INT8:
  case CRNET_UINT8:
    for (size_t i = 0; i < n; i++)
      ((uint8_t *)out)[i] = (uint8_t)v[i];
    break;
  case CRNET_INT16:
  case CRNET_UINT16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)out)[i] = (uint16_t)v[i];
    break;
  case CRNET_INT32:
  case CRNET_UINT32:
    for (size_t i = 0; i < n; i++)
      ((uint32_t *)out)[i] = (uint32_t)v[i];
    break;
  case CRNET_INT64:
  case CRNET_UINT64:
    memcpy(out, v, n * 8);
    break;
  case CRNET_FLOAT16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)out)[i] = half_bits(v[i]);
    break;
  case CRNET_BFLOAT16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)out)[i] = bf16_bits(v[i]);
    break;
  case CRNET_FLOAT:
    for (size_t i = 0; i < n; i++)
      ((float *)out)[i] = v[i] == NEG_ZERO ? -0.0f
                          : v[i] >> 63     ? -(float)(~v[i] + 1)
                                           : (float)v[i];
    break;
  case CRNET_DOUBLE:
    for (size_t i = 0; i < n; i++)
      ((double *)out)[i] = v[i] == NEG_ZERO ? -0.0
                           : v[i] >> 63     ? -(double)(~v[i] + 1)
                                            : (double)v[i];
    break;
  default:
    abort();
  }
}

/* One element, readably, for messages. */
static void format_elem(char *out, size_t cap, crnet_datatype dt,
                        const unsigned char *buf, size_t i) {
  const unsigned char *e = buf + i * type_size[dt];
  union {
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
  } x;
  memcpy(&x, e, type_size[dt]);
  switch (dt) {
  case CRNET_INT8:
    snprintf(out, cap, "%d (0x%02x)", x.i8, x.u8);
    break;
  case CRNET_INT16:
    snprintf(out, cap, "%d (0x%04x)", x.i16, x.u16);
    break;
  case CRNET_INT32:
    snprintf(out, cap, "%" PRId32 " (0x%08" PRIx32 ")", x.i32, x.u32);
    break;
  case CRNET_INT64:
    snprintf(out, cap, "%" PRId64 " (0x%016" PRIx64 ")", x.i64, x.u64);
    break;
  case CRNET_UINT8:
    snprintf(out, cap, "%u (0x%02x)", x.u8, x.u8);
    break;
  case CRNET_UINT16:
    snprintf(out, cap, "%u (0x%04x)", x.u16, x.u16);
    break;
  case CRNET_UINT32:
    snprintf(out, cap, "%" PRIu32 " (0x%08" PRIx32 ")", x.u32, x.u32);
    break;
  case CRNET_UINT64:
    snprintf(out, cap, "%" PRIu64 " (0x%016" PRIx64 ")", x.u64, x.u64);
    break;
  case CRNET_FLOAT16:
    snprintf(out, cap, "%g (0x%04x)", small_float_value(x.u16, 10, 5), x.u16);
    break;
  case CRNET_BFLOAT16:
    snprintf(out, cap, "%g (0x%04x)", small_float_value(x.u16, 7, 8), x.u16);
    break;
  case CRNET_FLOAT:
    snprintf(out, cap, "%.9g (0x%08" PRIx32 ")", x.f, x.u32);
    break;
  case CRNET_DOUBLE:
    snprintf(out, cap, "%.17g (0x%016" PRIx64 ")", x.d, x.u64);
    break;
  default:
    snprintf(out, cap, "?");
    break;
  }
}

/* --- the matrix --- */

struct one_case {
  const struct variant *v;
  crnet_datatype dt;
  size_t count;
  bool in_place;
};

static void case_label(char *out, size_t cap, const struct one_case *c) {
  snprintf(out, cap, "%s %s%s count %zu %s", crnet_datatype_name(c->dt),
           crnet_op_name(c->v->op), c->v->tag, c->count,
           c->in_place ? "in place" : "separate buffers");
}

static void report_mismatch(struct state *st, const struct one_case *c,
                            const unsigned char *in, const unsigned char *want,
                            const unsigned char *got) {
  size_t es = type_size[c->dt], first = SIZE_MAX, bad = 0;
  char label[160], e[64], g[64], m[64];
  for (size_t i = 0; i < c->count; i++)
    if (memcmp(want + i * es, got + i * es, es) != 0) {
      if (first == SIZE_MAX)
        first = i;
      bad++;
    }
  case_label(label, sizeof label, c);
  format_elem(e, sizeof e, c->dt, want, first);
  format_elem(g, sizeof g, c->dt, got, first);
  format_elem(m, sizeof m, c->dt, in, first);
  report(st,
         "%s: index %zu: expected %s, got %s (this rank's input %s; "
         "%zu of %zu elements wrong)",
         label, first, e, g, m, bad, c->count);
}

static void run_case(struct state *st, const struct one_case *c,
                     const unsigned char *in, const unsigned char *want) {
  size_t es = type_size[c->dt], n = c->count * es, g = GUARD_ELEMS * es;
  unsigned char *base = xmalloc(n + 2 * g), *recv = base + g, *send = NULL;
  char label[160];
  bool ok = true;
  int rc;

  memset(base, GUARD_BYTE, g);
  memset(recv + n, GUARD_BYTE, g);
  if (c->in_place) {
    memcpy(recv, in, n);
  } else {
    /* Every element left unwritten will then differ from the result. */
    for (size_t b = 0; b < n; b++)
      recv[b] = (unsigned char)~want[b];
    send = xmalloc(n);
    memcpy(send, in, n);
  }

  rc = crnet_allreduce(st->comm, c->in_place ? CRNET_IN_PLACE : send, recv,
                       c->count, c->dt, c->v->op);
  case_label(label, sizeof label, c);
  if (rc != 0) {
    report_rc(st, label, rc);
    ok = false;
    goto out;
  }
  if (memcmp(recv, want, n) != 0) {
    report_mismatch(st, c, in, want, recv);
    ok = false;
  }
  for (size_t b = 0; b < g; b++)
    if (base[b] != GUARD_BYTE || recv[n + b] != GUARD_BYTE) {
      report(st, "%s: guard element %zu %s the receive range was written",
             label, base[b] != GUARD_BYTE ? GUARD_ELEMS - b / es : b / es + 1,
             base[b] != GUARD_BYTE ? "before" : "after");
      ok = false;
      break;
    }
  if (send != NULL && memcmp(send, in, n) != 0) {
    for (size_t i = 0; i < c->count; i++)
      if (memcmp(send + i * es, in + i * es, es) != 0) {
        char was[64], now[64];
        format_elem(was, sizeof was, c->dt, in, i);
        format_elem(now, sizeof now, c->dt, send, i);
        report(st, "%s: the send buffer changed: index %zu was %s, is %s",
               label, i, was, now);
        break;
      }
    ok = false;
  }
  st->hash = hash_bytes(st->hash ^ c->count, recv, n);
  if (ok)
    st->cases++;

out:
  free(send);
  free(base);
}

static size_t build_counts(int p, size_t large, size_t *counts) {
  size_t cand[] = {0, 1, (size_t)p - 1, (size_t)p, (size_t)p + 1, 1001, large};
  size_t n = 0;
  for (size_t k = 0; k < sizeof cand / sizeof cand[0]; k++) {
    bool dup = false;
    for (size_t j = 0; j < n; j++)
      dup = dup || counts[j] == cand[k];
    if (!dup)
      counts[n++] = cand[k];
  }
  return n;
}

static void run_matrix(struct state *st, size_t large) {
  size_t counts[8], ncounts = build_counts(st->p, large, counts), max = 0;
  struct refs refs = {0};
  unsigned char *in, *want;

  for (size_t k = 0; k < ncounts; k++)
    max = counts[k] > max ? counts[k] : max;
  refs.n = max;
  refs.row = xmalloc(max * 8);
  for (int s = 0; s < REF_SLOTS; s++) {
    refs.slot[s].mine = xmalloc(max * 8);
    refs.slot[s].want = xmalloc(max * 8);
  }
  in = xmalloc(max * 8);
  want = xmalloc(max * 8);

  for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
    const struct variant *v = &variants[vi];
    for (size_t di = 0; di < sizeof dt_order / sizeof dt_order[0]; di++) {
      crnet_datatype dt = dt_order[di];
      const struct ref *ref;
      struct ref_key key;
      if (!variant_valid(v, dt))
        continue;
      key = key_of(v, dt);
      ref = ref_get(&refs, &key, st->p, st->rank);
      encode(dt, ref->mine, in, max);
      encode(dt, ref->want, want, max);
      if (st->rank == st->corrupt_rank && v->op == CRNET_SUM &&
          dt == CRNET_INT32 && v->pat == PAT_SUM)
        want[type_size[dt] * (max / 2)] ^= 1;
      for (size_t k = 0; k < ncounts; k++)
        for (int ip = 0; ip < 2; ip++) {
          struct one_case c = {v, dt, counts[k], ip == 1};
          if (stopped(st))
            goto out;
          run_case(st, &c, in, want);
        }
    }
  }
out:
  free(want);
  free(in);
  for (int s = 0; s < REF_SLOTS; s++) {
    free(refs.slot[s].want);
    free(refs.slot[s].mine);
  }
  free(refs.row);
}

/* --- user operators --- */

static int user_ctx_tag;
static int user_fn_misuse;

/* x -> a*x + b modulo 2^32, packed a << 32 | b. Composition, lower ranks
 * applied first: associative, not commutative. */
static uint64_t affine_then(uint64_t first, uint64_t second) {
  uint32_t a1 = (uint32_t)(first >> 32), b1 = (uint32_t)first;
  uint32_t a2 = (uint32_t)(second >> 32), b2 = (uint32_t)second;
  return (uint64_t)(a1 * a2) << 32 | (uint32_t)(a2 * b1 + b2);
}

static void affine_fn(const void *in, void *inout, size_t count,
                      crnet_datatype dt, void *ctx) {
  const uint64_t *a = in;
  uint64_t *b = inout;
  if (dt != CRNET_UINT64 || ctx != &user_ctx_tag) {
    user_fn_misuse = 1;
    return;
  }
  for (size_t i = 0; i < count; i++)
    b[i] = affine_then(a[i], b[i]);
}

static void wrapping_add_fn(const void *in, void *inout, size_t count,
                            crnet_datatype dt, void *ctx) {
  if (dt != CRNET_INT32 || ctx != &user_ctx_tag) {
    user_fn_misuse = 1;
    return;
  }
  for (size_t i = 0; i < count; i++) {
    uint32_t a, b;
    memcpy(&a, (const char *)in + 4 * i, 4);
    memcpy(&b, (char *)inout + 4 * i, 4);
    b += a;
    memcpy((char *)inout + 4 * i, &b, 4);
  }
}

static uint64_t affine_input(int r, size_t i) {
  return (uint64_t)(hash_ri(r, i, 101) | 1) << 32 | hash_ri(r, i, 102);
}

/* True if CRNET_ALLREDUCE_SCHEDULE names a schedule that may combine
 * operands out of rank order. */
static bool schedule_reorders(void) {
  const char *s = getenv("CRNET_ALLREDUCE_SCHEDULE");
  return s != NULL && s[0] != '\0' && strcmp(s, "auto") != 0 &&
         strcmp(s, "circulant-linear") != 0 && strcmp(s, "hypercube") != 0 &&
         strcmp(s, "rabenseifner") != 0 && strcmp(s, "star") != 0 &&
         strcmp(s, "allgather-reduce") != 0 && strcmp(s, "knomial") != 0;
}

/* A schedule named by CRNET_ALLREDUCE_SCHEDULE must be the one the calls
 * ran, so that a test of a schedule cannot pass on another (a name the
 * library quietly replaced, a setting lost on its way to the ranks). */
static void check_schedule_ran(struct state *st) {
  const char *want = getenv("CRNET_ALLREDUCE_SCHEDULE");
  const char *ran = crnet_comm_last_schedule(st->comm, CRNET_COLL_ALLREDUCE);
  if (want == NULL || want[0] == '\0' || strcmp(want, "auto") == 0)
    return;
  st->cases++;
  if (ran == NULL || strcmp(ran, want) != 0)
    report(st, "CRNET_ALLREDUCE_SCHEDULE=%s, but the last allreduce ran %s",
           want, ran != NULL ? ran : "nothing");
}

static void check_noncommutative(struct state *st, crnet_op op) {
  size_t count = 1001;
  uint64_t *want = xmalloc(count * 8), *buf = xmalloc(count * 8),
           *send = xmalloc(count * 8);
  for (size_t i = 0; i < count; i++) {
    want[i] = affine_input(0, i);
    for (int r = 1; r < st->p; r++)
      want[i] = affine_then(want[i], affine_input(r, i));
  }
  for (int ip = 0; ip < 2 && !stopped(st); ip++) {
    const char *what = ip ? "non-commutative user op, in place"
                          : "non-commutative user op, separate buffers";
    int rc;
    for (size_t i = 0; i < count; i++)
      send[i] = buf[i] = affine_input(st->rank, i);
    rc = crnet_allreduce(st->comm, ip ? CRNET_IN_PLACE : send, buf, count,
                         CRNET_UINT64, op);
    if (rc == CRNET_EUNSUPPORTED && schedule_reorders() &&
        crnet_comm_errmsg(st->comm)[0] != '\0') {
      /* An explicitly chosen schedule that reorders operands must refuse,
       * saying why; `auto` would have picked an order-preserving one. */
      st->cases++;
      continue;
    }
    if (rc != NONCOMMUTATIVE_RC) {
      report(st, "%s: returned %s (%s), expected %s", what, crnet_err_name(rc),
             crnet_comm_errmsg(st->comm), crnet_err_name(NONCOMMUTATIVE_RC));
      if (rc != 0 && rc != CRNET_EINVAL && rc != CRNET_EUNSUPPORTED)
        st->broken = true;
      continue;
    }
    if (rc == 0) {
      size_t i = 0;
      while (i < count && buf[i] == want[i])
        i++;
      if (i < count) {
        report(st,
               "%s: index %zu: expected 0x%016" PRIx64 ", got 0x%016" PRIx64,
               what, i, want[i], buf[i]);
        continue;
      }
      st->hash = hash_bytes(st->hash, buf, count * 8);
    }
    st->cases++;
  }
  free(send);
  free(buf);
  free(want);
}

static void check_commutative_user_op(struct state *st, crnet_op op) {
  size_t counts[2] = {(size_t)st->p + 1, 1001};
  for (int k = 0; k < 2 && !stopped(st); k++) {
    size_t count = counts[k], i;
    uint32_t *buf = xmalloc(count * 4), *want = xmalloc(count * 4);
    int rc;
    for (i = 0; i < count; i++) {
      want[i] = 0;
      for (int r = 0; r < st->p; r++)
        want[i] += hash_ri(r, i, 103);
      buf[i] = hash_ri(st->rank, i, 103);
    }
    rc = crnet_allreduce(st->comm, CRNET_IN_PLACE, buf, count, CRNET_INT32, op);
    if (rc != 0) {
      report_rc(st, "commutative user op", rc);
    } else {
      for (i = 0; i < count && buf[i] == want[i]; i++)
        ;
      if (i < count)
        report(st,
               "commutative user op count %zu: index %zu: expected %" PRIu32
               ", got %" PRIu32,
               count, i, want[i], buf[i]);
      else if (user_fn_misuse)
        report(st, "commutative user op: called with the wrong datatype or "
                   "context");
      else
        st->cases++;
      st->hash = hash_bytes(st->hash, buf, count * 4);
    }
    free(want);
    free(buf);
  }
}

static void check_user_ops(struct state *st) {
  crnet_op nc, cm;
  int rc = crnet_op_create(&nc, affine_fn, &user_ctx_tag, 0);
  if (rc != 0) {
    report(st, "crnet_op_create (non-commutative): %s", crnet_err_name(rc));
    return;
  }
  rc = crnet_op_create(&cm, wrapping_add_fn, &user_ctx_tag, 1);
  if (rc != 0) {
    report(st, "crnet_op_create (commutative): %s", crnet_err_name(rc));
    crnet_op_free(&nc);
    return;
  }
  check_noncommutative(st, nc);
  check_commutative_user_op(st, cm);
  if (user_fn_misuse)
    report(st, "a user op was called with the wrong datatype or context");
  if ((rc = crnet_op_free(&nc)) != 0 || (rc = crnet_op_free(&cm)) != 0)
    report(st, "crnet_op_free: %s", crnet_err_name(rc));
  else
    st->cases++;
}

/* --- misuse --- */

static void expect_einval(struct state *st, const char *what, crnet_comm *comm,
                          const void *send, bool with_recv, size_t count,
                          crnet_datatype dt, crnet_op op) {
  unsigned char recv[64], before[64];
  int rc;
  for (size_t b = 0; b < sizeof recv; b++)
    recv[b] = before[b] = (unsigned char)(0xC3 ^ b);
  rc = crnet_allreduce(comm, send, with_recv ? recv : NULL, count, dt, op);
  if (rc != CRNET_EINVAL) {
    report(st,
           "%s (datatype %d, op %d, count %zu): returned %s, expected "
           "EINVAL",
           what, (int)dt, op, count, crnet_err_name(rc));
    if (rc != 0 && rc != CRNET_EUNSUPPORTED)
      st->broken = true;
  } else if (memcmp(recv, before, sizeof recv) != 0) {
    report(st, "%s: returned EINVAL but wrote the receive buffer", what);
  } else {
    st->cases++;
  }
}

static void check_misuse(struct state *st) {
  static const crnet_op bitwise[] = {CRNET_BAND, CRNET_BOR, CRNET_BXOR};
  static const crnet_datatype floats[] = {CRNET_FLOAT16, CRNET_BFLOAT16,
                                          CRNET_FLOAT, CRNET_DOUBLE};
  int64_t send[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  crnet_comm *c = st->comm;
  char what[96];

  expect_einval(st, "NULL recv", c, send, false, 5, CRNET_INT32, CRNET_SUM);
  expect_einval(st, "NULL recv, in place", c, CRNET_IN_PLACE, false, 5,
                CRNET_INT32, CRNET_SUM);
  expect_einval(st, "NULL send", c, NULL, true, 5, CRNET_INT32, CRNET_SUM);
  expect_einval(st, "NULL comm", NULL, send, true, 5, CRNET_INT32, CRNET_SUM);
  expect_einval(st, "datatype out of range", c, send, true, 5,
                CRNET_DATATYPE_COUNT, CRNET_SUM);
  expect_einval(st, "datatype out of range", c, send, true, 5,
                (crnet_datatype)-1, CRNET_SUM);
  expect_einval(st, "datatype out of range", c, send, true, 5,
                (crnet_datatype)1000, CRNET_SUM);
  expect_einval(st, "op out of range", c, send, true, 5, CRNET_INT32, -1);
  expect_einval(st, "op never created", c, send, true, 5, CRNET_INT32,
                CRNET_OP_BUILTIN_COUNT + 1000);
  expect_einval(st, "count overflows size_t", c, send, true, SIZE_MAX / 4,
                CRNET_INT64, CRNET_SUM);
  for (size_t f = 0; f < sizeof floats / sizeof floats[0]; f++)
    for (size_t b = 0; b < sizeof bitwise / sizeof bitwise[0]; b++) {
      snprintf(what, sizeof what, "%s on %s", crnet_op_name(bitwise[b]),
               crnet_datatype_name(floats[f]));
      expect_einval(st, what, c, send, true, 5, floats[f], bitwise[b]);
    }
  for (crnet_op op = 0; op < CRNET_OP_BUILTIN_COUNT; op++) {
    snprintf(what, sizeof what, "%s on BYTE", crnet_op_name(op));
    expect_einval(st, what, c, send, true, 5, CRNET_BYTE, op);
  }
  /* Misuse is explained, and leaves no sticky error (checked by the next
   * successful call). */
  if (crnet_comm_errmsg(c)[0] == '\0')
    report(st, "after an EINVAL call crnet_comm_errmsg gives no reason");
}

/* After misuse the communicator must still work. */
static void check_still_usable(struct state *st) {
  size_t count = (size_t)st->p + 1;
  int64_t *buf = xmalloc(count * 8), *send = xmalloc(count * 8);
  int64_t tri = (int64_t)st->p * (st->p + 1) / 2;
  int rc;
  for (size_t i = 0; i < count; i++)
    send[i] = (int64_t)(st->rank + 1) * (int64_t)(i + 1);
  rc = crnet_allreduce(st->comm, send, buf, count, CRNET_INT64, CRNET_SUM);
  if (rc != 0) {
    report_rc(st, "allreduce after misuse", rc);
  } else {
    size_t i = 0;
    while (i < count && buf[i] == tri * (int64_t)(i + 1))
      i++;
    if (i < count)
      report(st,
             "allreduce after misuse: index %zu: expected %" PRId64
             ", got %" PRId64,
             i, tri * (int64_t)(i + 1), buf[i]);
    else if (crnet_comm_errmsg(st->comm)[0] != '\0')
      report(st, "allreduce after misuse: succeeded but errmsg says '%s'",
             crnet_comm_errmsg(st->comm));
    else
      st->cases++;
  }
  free(send);
  free(buf);
}

/* Every rank's hash of its results must be the same: compare the MAX and
 * the MIN over ranks with our own. */
static void check_hash_agreement(struct state *st) {
  uint64_t mine = st->hash, hi = 0, lo = 0;
  int rc = crnet_allreduce(st->comm, &mine, &hi, 1, CRNET_UINT64, CRNET_MAX);
  if (rc == 0)
    rc = crnet_allreduce(st->comm, &mine, &lo, 1, CRNET_UINT64, CRNET_MIN);
  if (rc != 0)
    report_rc(st, "hash agreement", rc);
  else if (hi != mine || lo != mine)
    report(st,
           "results differ between ranks: my hash %016" PRIx64
           ", max %016" PRIx64 ", min %016" PRIx64,
           mine, hi, lo);
  else
    st->cases++;
}

static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s != NULL && *s != '\0' ? atoi(s) : dflt;
}

int main(int argc, char **argv) {
  struct state st = {.hash = UINT64_C(0xcbf29ce484222325)};
  size_t large = DEFAULT_LARGE_COUNT;
  uint64_t failures, total = 0;
  int rc;

  if (argc > 1) {
    char *end;
    large = strtoul(argv[1], &end, 10);
    if (*end != '\0' || argc > 2) {
      fprintf(stderr, "usage: %s [large_count]\n", argv[0]);
      return 2;
    }
  }
  self_test_codecs();
  st.corrupt_rank = env_int("ALLREDUCE_CHECK_CORRUPT", -1);

  rc = crnet_comm_init(&st.comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "allreduce_check: crnet_comm_init: %s: %s\n",
            crnet_strerror(rc), crnet_init_errmsg());
    return 1;
  }
  st.rank = crnet_comm_rank(st.comm);
  st.p = crnet_comm_size(st.comm);

  for (int dt = 0; dt < CRNET_DATATYPE_COUNT; dt++)
    if (crnet_datatype_size((crnet_datatype)dt) != type_size[dt])
      report(&st, "crnet_datatype_size(%s) = %zu, expected %zu",
             crnet_datatype_name((crnet_datatype)dt),
             crnet_datatype_size((crnet_datatype)dt), type_size[dt]);

  run_matrix(&st, large);
  if (!stopped(&st))
    check_schedule_ran(&st);
  if (!stopped(&st))
    check_user_ops(&st);
  if (!stopped(&st))
    check_misuse(&st);
  if (!stopped(&st))
    check_still_usable(&st);
  if (!stopped(&st))
    check_hash_agreement(&st);

  if (stopped(&st)) {
    /* The other ranks may be waiting in a call we will never make: make
     * theirs fail now instead of at their timeout. */
    if (crnet_comm_abort_code(st.comm) == 0)
      crnet_comm_abort(st.comm, 1);
    crnet_comm_destroy(st.comm);
    return 1;
  }

  /* Failures short of stopping are known only locally: share the count. */
  failures = st.failures;
  rc = crnet_allreduce(st.comm, &failures, &total, 1, CRNET_UINT64, CRNET_SUM);
  if (rc != 0) {
    report_rc(&st, "failure count", rc);
    crnet_comm_destroy(st.comm);
    return 1;
  }
  rc = crnet_comm_destroy(st.comm);
  if (rc != 0) {
    fprintf(stderr, "allreduce_check: rank %d: FAIL: crnet_comm_destroy: %s\n",
            st.rank, crnet_err_name(rc));
    return 1;
  }
  st.cases++;
  if (total != 0) {
    if (st.rank == 0)
      fprintf(stderr, "allreduce_check: p=%d: %" PRIu64 " failures\n", st.p,
              total);
    return 1;
  }
  if (st.rank == 0)
    printf("allreduce_check: p=%d: %lu cases passed\n", st.p, st.cases);
  return 0;
}
