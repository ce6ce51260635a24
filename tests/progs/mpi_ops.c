/* mpi_ops: every predefined datatype against every predefined operator,
 * and MPI_Ireduce_scatter_block, at any p >= 2.
 *
 *   crlaunch -n P mpi_ops
 *
 * For each pair of a predefined datatype of crnet-mpi's mpi.h and a
 * predefined operator, the table of MPI 3.1, 5.9.2 (MPI 4.0, 6.9.2) says
 * whether MPI defines the reduction:
 *
 *   MPI_MAX, MPI_MIN            C integer, floating point, multi-language
 *   MPI_SUM, MPI_PROD           C integer, floating point, multi-language
 *   MPI_LAND, MPI_LOR, MPI_LXOR C integer, logical
 *   MPI_BAND, MPI_BOR, MPI_BXOR C integer, byte, multi-language
 *   MPI_MINLOC, MPI_MAXLOC      the pair types (MPI_2INT, ...)
 *
 * where C integer is MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_SHORT ...
 * MPI_UNSIGNED_LONG_LONG and MPI_INT8_T ... MPI_UINT64_T; floating point
 * MPI_FLOAT and MPI_DOUBLE; logical MPI_C_BOOL; byte MPI_BYTE;
 * multi-language MPI_AINT, MPI_OFFSET and MPI_COUNT. MPI_CHAR and
 * MPI_WCHAR (printable characters) and MPI_PACKED are in no group.
 *
 * Where MPI defines it, MPI_Allreduce, MPI_Reduce (to a root that moves
 * with the count) and MPI_Iallreduce (in place) must give exactly the
 * result computed here from every rank's input, over counts 0 to 1001;
 * the inputs exercise the operator: negative values for the signed types,
 * high bits for the unsigned ones, 0, 1 and other values (a high bit
 * alone among them) for the logical operators, products that wrap only in
 * the unsigned types (where C defines the wrap), sums and products of
 * floating-point values that are exact in any order. Where MPI does not
 * define it, MPI_Allreduce, MPI_Reduce, MPI_Iallreduce, MPI_Scan and
 * MPI_Reduce_scatter_block must refuse it (MPI_ERR_OP or MPI_ERR_TYPE,
 * under MPI_ERRORS_RETURN) without writing the receive buffer, also for
 * contiguous types made of the predefined ones. MPI_Type_size must be the
 * C type's sizeof.
 *
 * MPI_Ireduce_scatter_block: int sums, unsigned long BXOR and double MAX
 * over several block sizes (0 and odd ones among them), out of place and
 * in place. MPI_Query_thread after MPI_Init_thread asking
 * MPI_THREAD_FUNNELED (crnet grants what is asked).
 *
 * Exits 0 when every check held; else prints the first failures. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define EXPECT_PROG "mpi_ops"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;

/* --- the datatypes and operators, and MPI's table of which go together */

typedef enum { SIGNED, UNSIGNED, REAL, BOOLEAN } kind;

/* MPI's groups of the predefined types (NO_GROUP: not reducible). */
enum {
  C_INTEGER = 1 << 0,
  FLOATING = 1 << 1,
  LOGICAL = 1 << 2,
  BYTE = 1 << 3,
  MULTI_LANGUAGE = 1 << 4,
  NO_GROUP = 0
};

typedef struct type_info {
  const char *name;
  MPI_Datatype dt;
  size_t size; /* sizeof the C type */
  kind k;
  int group;
} type_info;

#define SIGNEDNESS(min) ((min) < 0 ? SIGNED : UNSIGNED)
#define TYPE(dt, ctype, k, group)                                              \
  { #dt, dt, sizeof(ctype), k, group }

static const type_info types[] = {
    TYPE(MPI_CHAR, char, SIGNEDNESS(CHAR_MIN), NO_GROUP),
    TYPE(MPI_SIGNED_CHAR, signed char, SIGNED, C_INTEGER),
    TYPE(MPI_UNSIGNED_CHAR, unsigned char, UNSIGNED, C_INTEGER),
    TYPE(MPI_BYTE, unsigned char, UNSIGNED, BYTE),
    TYPE(MPI_SHORT, short, SIGNED, C_INTEGER),
    TYPE(MPI_UNSIGNED_SHORT, unsigned short, UNSIGNED, C_INTEGER),
    TYPE(MPI_INT, int, SIGNED, C_INTEGER),
    TYPE(MPI_UNSIGNED, unsigned, UNSIGNED, C_INTEGER),
    TYPE(MPI_LONG, long, SIGNED, C_INTEGER),
    TYPE(MPI_UNSIGNED_LONG, unsigned long, UNSIGNED, C_INTEGER),
    TYPE(MPI_LONG_LONG_INT, long long, SIGNED, C_INTEGER),
    TYPE(MPI_LONG_LONG, long long, SIGNED, C_INTEGER),
    TYPE(MPI_UNSIGNED_LONG_LONG, unsigned long long, UNSIGNED, C_INTEGER),
    TYPE(MPI_FLOAT, float, REAL, FLOATING),
    TYPE(MPI_DOUBLE, double, REAL, FLOATING),
    TYPE(MPI_WCHAR, wchar_t, SIGNEDNESS(WCHAR_MIN), NO_GROUP),
    TYPE(MPI_C_BOOL, _Bool, BOOLEAN, LOGICAL),
    TYPE(MPI_INT8_T, int8_t, SIGNED, C_INTEGER),
    TYPE(MPI_INT16_T, int16_t, SIGNED, C_INTEGER),
    TYPE(MPI_INT32_T, int32_t, SIGNED, C_INTEGER),
    TYPE(MPI_INT64_T, int64_t, SIGNED, C_INTEGER),
    TYPE(MPI_UINT8_T, uint8_t, UNSIGNED, C_INTEGER),
    TYPE(MPI_UINT16_T, uint16_t, UNSIGNED, C_INTEGER),
    TYPE(MPI_UINT32_T, uint32_t, UNSIGNED, C_INTEGER),
    TYPE(MPI_UINT64_T, uint64_t, UNSIGNED, C_INTEGER),
    TYPE(MPI_AINT, MPI_Aint, SIGNED, MULTI_LANGUAGE),
    TYPE(MPI_OFFSET, MPI_Offset, SIGNED, MULTI_LANGUAGE),
    TYPE(MPI_COUNT, MPI_Count, SIGNED, MULTI_LANGUAGE),
    /* What MPI_Pack writes: a byte each, and no reduction. */
    TYPE(MPI_PACKED, unsigned char, UNSIGNED, NO_GROUP),
};
#define NTYPES (sizeof types / sizeof types[0])

typedef struct op_info {
  const char *name;
  MPI_Op op;
  int groups; /* where MPI defines it */
} op_info;

static const op_info ops[] = {
    {"MPI_MAX", MPI_MAX, C_INTEGER | FLOATING | MULTI_LANGUAGE},
    {"MPI_MIN", MPI_MIN, C_INTEGER | FLOATING | MULTI_LANGUAGE},
    {"MPI_SUM", MPI_SUM, C_INTEGER | FLOATING | MULTI_LANGUAGE},
    {"MPI_PROD", MPI_PROD, C_INTEGER | FLOATING | MULTI_LANGUAGE},
    {"MPI_LAND", MPI_LAND, C_INTEGER | LOGICAL},
    {"MPI_LOR", MPI_LOR, C_INTEGER | LOGICAL},
    {"MPI_LXOR", MPI_LXOR, C_INTEGER | LOGICAL},
    {"MPI_BAND", MPI_BAND, C_INTEGER | BYTE | MULTI_LANGUAGE},
    {"MPI_BOR", MPI_BOR, C_INTEGER | BYTE | MULTI_LANGUAGE},
    {"MPI_BXOR", MPI_BXOR, C_INTEGER | BYTE | MULTI_LANGUAGE},
    /* The pair types only (check_pairs). */
    {"MPI_MINLOC", MPI_MINLOC, NO_GROUP},
    {"MPI_MAXLOC", MPI_MAXLOC, NO_GROUP},
};
#define NOPS (sizeof ops / sizeof ops[0])

/* --- elements: integers as their bits, floating point as doubles --- */

static uint64_t mask_of(size_t size) {
  return size >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
}

static uint64_t get_bits(const unsigned char *buf, size_t i, size_t size) {
  const unsigned char *at = buf + i * size;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (size) {
  case 1:
    memcpy(&u8, at, 1);
    return u8;
  case 2:
    memcpy(&u16, at, 2);
    return u16;
  case 4:
    memcpy(&u32, at, 4);
    return u32;
  default:
    memcpy(&u64, at, 8);
    return u64;
  }
}

static void put_bits(unsigned char *buf, size_t i, size_t size, uint64_t v) {
  unsigned char *at = buf + i * size;
  uint8_t u8 = (uint8_t)v;
  uint16_t u16 = (uint16_t)v;
  uint32_t u32 = (uint32_t)v;
  switch (size) {
  case 1:
    memcpy(at, &u8, 1);
    break;
  case 2:
    memcpy(at, &u16, 2);
    break;
  case 4:
    memcpy(at, &u32, 4);
    break;
  default:
    memcpy(at, &v, 8);
    break;
  }
}

/* The two's-complement value of size bytes of bits. */
static int64_t sign_extend(uint64_t bits, size_t size) {
  uint64_t sign = UINT64_C(1) << (8 * size - 1);
  bits &= mask_of(size);
  return (int64_t)((bits ^ sign) - sign);
}

static double get_real(const unsigned char *buf, size_t i, size_t size) {
  float f;
  double d;
  if (size == sizeof f) {
    memcpy(&f, buf + i * size, sizeof f);
    return f;
  }
  memcpy(&d, buf + i * size, sizeof d);
  return d;
}

static void put_real(unsigned char *buf, size_t i, size_t size, double v) {
  float f = (float)v;
  if (size == sizeof f)
    memcpy(buf + i * size, &f, sizeof f);
  else
    memcpy(buf + i * size, &v, sizeof v);
}

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

static bool is_logical(MPI_Op op) {
  return op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
}

/* Rank r's element i for operator op: values that exercise it, and whose
 * reduction over p ranks is defined in C (signed sums and products stay
 * in range; floating-point ones are exact in any order). */
static void input(const type_info *t, MPI_Op op, int r, size_t i,
                  unsigned char *buf) {
  uint64_t h = mix((uint64_t)r << 40 ^ (uint64_t)i << 8 ^
                   (uint64_t)t->dt << 52 ^ (uint64_t)op);
  unsigned bits = 8 * (unsigned)t->size;
  if (t->k == BOOLEAN) { /* true three times in four: LAND meets all-true */
    put_bits(buf, i, t->size, h % 4 != 0);
  } else if (t->k == REAL) {
    static const double factors[] = {-2, -1.5, -1, -0.5, 0.5, 1, 2, 3};
    double v;
    if (op == MPI_SUM) /* quarters within +-2^15: every partial sum exact */
      v = ((double)(h % (1u << 18)) - (1 << 17)) * 0.25;
    else if (op == MPI_PROD)
      v = factors[h % 8];
    else /* spread over orders of magnitude, both signs */
      v = (double)(int32_t)h * (t->size == 4 ? 1e-3 : 1e200);
    put_real(buf, i, t->size, v);
  } else if (is_logical(op)) {
    uint64_t v = h % 4 == 0   ? 0
                 : h % 4 == 1 ? 1
                 : h % 4 == 2 ? UINT64_C(1) << (bits - 1) /* the top bit */
                              : (h >> 2) | 2;
    put_bits(buf, i, t->size, v);
  } else if (t->k == SIGNED && op == MPI_SUM) { /* |v| <= max / p */
    uint64_t b = (mask_of(t->size) >> 1) / (uint64_t)p;
    put_bits(buf, i, t->size, h % (2 * b + 1) - b);
  } else if (t->k == SIGNED && op == MPI_PROD) { /* 3^p fits in 8 bits */
    put_bits(buf, i, t->size, h % 7 - 3);
  } else { /* every bit: bitwise, max and min, unsigned sums and products */
    put_bits(buf, i, t->size, h);
  }
}

/* out[i] = the reduction of in[0][i] ... in[p-1][i], in rank order. */
static void expected(const type_info *t, MPI_Op op, unsigned char *const *in,
                     size_t count, unsigned char *out) {
  for (size_t i = 0; i < count; i++) {
    if (t->k == REAL) {
      double acc = get_real(in[0], i, t->size);
      for (int r = 1; r < p; r++) {
        double x = get_real(in[r], i, t->size);
        acc = op == MPI_SUM    ? acc + x
              : op == MPI_PROD ? acc * x
              : op == MPI_MAX  ? (x > acc ? x : acc)
                               : (x < acc ? x : acc);
      }
      put_real(out, i, t->size, acc);
      continue;
    }
    uint64_t acc = get_bits(in[0], i, t->size);
    for (int r = 1; r < p; r++) {
      uint64_t x = get_bits(in[r], i, t->size);
      bool greater = t->k == SIGNED
                         ? sign_extend(x, t->size) > sign_extend(acc, t->size)
                         : x > acc;
      bool less = t->k == SIGNED
                      ? sign_extend(x, t->size) < sign_extend(acc, t->size)
                      : x < acc;
      switch (op) {
      case MPI_SUM:
        acc += x;
        break;
      case MPI_PROD:
        acc *= x;
        break;
      case MPI_MAX:
        acc = greater ? x : acc;
        break;
      case MPI_MIN:
        acc = less ? x : acc;
        break;
      case MPI_LAND:
        acc = acc != 0 && x != 0;
        break;
      case MPI_LOR:
        acc = acc != 0 || x != 0;
        break;
      case MPI_LXOR:
        acc = (acc != 0) != (x != 0);
        break;
      case MPI_BAND:
        acc &= x;
        break;
      case MPI_BOR:
        acc |= x;
        break;
      default:
        acc ^= x;
        break;
      }
      acc &= mask_of(t->size);
    }
    put_bits(out, i, t->size, acc);
  }
}

/* got against want, count elements of t: the first that differs is a
 * failure, named with its call. */
static void compare(const type_info *t, const op_info *o, const char *call,
                    size_t count, const unsigned char *got,
                    const unsigned char *want) {
  for (size_t i = 0; i < count; i++) {
    if (memcmp(got + i * t->size, want + i * t->size, t->size) == 0)
      continue;
    if (t->k == REAL)
      EXPECT(false, "%s %s on %s, count %zu: [%zu] = %.17g, want %.17g", call,
             o->name, t->name, count, i, get_real(got, i, t->size),
             get_real(want, i, t->size));
    else
      EXPECT(false, "%s %s on %s, count %zu: [%zu] = 0x%llx, want 0x%llx", call,
             o->name, t->name, count, i,
             (unsigned long long)get_bits(got, i, t->size),
             (unsigned long long)get_bits(want, i, t->size));
    return;
  }
}

/* --- the combinations MPI defines: exact results --- */

static const size_t counts[] = {0, 1, 5, 64, 1001};
#define COUNT_MAX 1001

static void check_defined(const type_info *t, const op_info *o, size_t count) {
  size_t bytes = count * t->size + 1; /* never 0 for malloc */
  unsigned char **in = malloc(sizeof *in * (size_t)p);
  unsigned char *want = malloc(bytes), *got = malloc(bytes);
  int n = (int)count, root = (int)(count % (size_t)p);
  MPI_Request rq = MPI_REQUEST_NULL;
  for (int r = 0; r < p; r++) {
    in[r] = malloc(bytes);
    for (size_t i = 0; i < count; i++)
      input(t, o->op, r, i, in[r]);
  }
  expected(t, o->op, in, count, want);

  memset(got, 0xa5, bytes);
  OK(MPI_Allreduce(in[rank], got, n, t->dt, o->op, MPI_COMM_WORLD));
  compare(t, o, "MPI_Allreduce", count, got, want);

  memset(got, 0xa5, bytes);
  OK(MPI_Reduce(in[rank], rank == root ? got : NULL, n, t->dt, o->op, root,
                MPI_COMM_WORLD));
  if (rank == root)
    compare(t, o, "MPI_Reduce", count, got, want);

  memcpy(got, in[rank], bytes);
  OK(MPI_Iallreduce(MPI_IN_PLACE, got, n, t->dt, o->op, MPI_COMM_WORLD, &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  compare(t, o, "MPI_Iallreduce (in place)", count, got, want);

  for (int r = 0; r < p; r++)
    free(in[r]);
  free(in);
  free(want);
  free(got);
}

/* --- the combinations MPI does not define: refused, nothing written --- */

static bool refused_class(int code) {
  int cls = error_class(code);
  return cls == MPI_ERR_OP || cls == MPI_ERR_TYPE;
}

#define REFUSED_COUNT 3

/* dt (name: what to call it), whose elements are elem_size bytes, with
 * op: every reducing call refuses it, and writes nothing. */
static void check_refused(MPI_Datatype dt, const char *name, size_t elem_size,
                          const op_info *o) {
  size_t bytes = (size_t)p * REFUSED_COUNT * elem_size;
  unsigned char *in = calloc(1, bytes), *out = malloc(bytes);
  MPI_Request rq = MPI_REQUEST_NULL;
  int code;
  memset(out, 0x5a, bytes);
#define REFUSES(call)                                                          \
  do {                                                                         \
    code = (call);                                                             \
    EXPECT(refused_class(code), "%s with %s on %s: not refused (%s)", #call,   \
           o->name, name, code == MPI_SUCCESS ? "success" : error_text(code)); \
  } while (0)
  REFUSES(MPI_Allreduce(in, out, REFUSED_COUNT, dt, o->op, MPI_COMM_WORLD));
  REFUSES(MPI_Reduce(in, out, REFUSED_COUNT, dt, o->op, 0, MPI_COMM_WORLD));
  REFUSES(
      MPI_Iallreduce(in, out, REFUSED_COUNT, dt, o->op, MPI_COMM_WORLD, &rq));
  if (rq != MPI_REQUEST_NULL) { /* it ran: end it, then say so */
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    EXPECT(false, "a refused MPI_Iallreduce (%s on %s) made a request", o->name,
           name);
  }
  REFUSES(MPI_Scan(in, out, REFUSED_COUNT, dt, o->op, MPI_COMM_WORLD));
  REFUSES(MPI_Reduce_scatter_block(in, out, REFUSED_COUNT, dt, o->op,
                                   MPI_COMM_WORLD));
#undef REFUSES
  for (size_t i = 0; i < bytes; i++)
    if (out[i] != 0x5a) {
      EXPECT(false, "a refused reduction (%s on %s) wrote byte %zu", o->name,
             name, i);
      break;
    }
  free(in);
  free(out);
}

static void check_matrix(void) {
  int defined = 0, refused = 0;
  for (size_t ti = 0; ti < NTYPES; ti++) {
    const type_info *t = &types[ti];
    int size = -1;
    OK(MPI_Type_size(t->dt, &size));
    EXPECT(size == (int)t->size, "MPI_Type_size(%s) = %d, sizeof %zu", t->name,
           size, t->size);
    for (size_t oi = 0; oi < NOPS; oi++) {
      const op_info *o = &ops[oi];
      if (o->groups & t->group) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
          check_defined(t, o, counts[c]);
        defined++;
      } else {
        check_refused(t->dt, t->name, t->size, o);
        refused++;
      }
    }
  }
  /* 19 C integer types (MPI_LONG_LONG, a synonym, too) x 10, 2 floating
   * x 4, MPI_C_BOOL x 3, MPI_BYTE x 3, 3 multi-language x 7: the table
   * above is the one meant. */
  EXPECT(defined == 225 && refused == (int)(NTYPES * NOPS) - 225,
         "%d combinations defined, %d refused", defined, refused);
}

/* A contiguous type reduces as the predefined type it is made of: with
 * the operators MPI defines on that type, and no other. */
static void check_contiguous(void) {
  static const struct {
    MPI_Datatype old;
    const char *name;
    size_t size;
    MPI_Op good, bad;
  } cases[] = {
      {MPI_BYTE, "3 x MPI_BYTE", 1, MPI_BXOR, MPI_SUM},
      {MPI_C_BOOL, "3 x MPI_C_BOOL", sizeof(_Bool), MPI_LOR, MPI_MAX},
      {MPI_CHAR, "3 x MPI_CHAR", 1, MPI_OP_NULL, MPI_MAX},
      {MPI_COUNT, "3 x MPI_COUNT", sizeof(MPI_Count), MPI_BAND, MPI_LAND},
      {MPI_DOUBLE, "3 x MPI_DOUBLE", sizeof(double), MPI_PROD, MPI_BOR},
      {MPI_UINT16_T, "3 x MPI_UINT16_T", 2, MPI_LXOR, MPI_MINLOC},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    MPI_Datatype dt;
    OK(MPI_Type_contiguous(3, cases[k].old, &dt));
    OK(MPI_Type_commit(&dt));
    for (size_t oi = 0; oi < NOPS; oi++)
      if (ops[oi].op == cases[k].bad)
        check_refused(dt, cases[k].name, 3 * cases[k].size, &ops[oi]);
    if (cases[k].good != MPI_OP_NULL) {
      unsigned char in[3 * 8 * 2] = {1}, out[3 * 8 * 2];
      OK(MPI_Allreduce(in, out, 2, dt, cases[k].good, MPI_COMM_WORLD));
    }
    OK(MPI_Type_free(&dt));
  }
}

/* The pair types: MPI_MINLOC and MPI_MAXLOC only (their results are
 * mpi_check's check_loc); every other operator refused. */
static void check_pairs(void) {
  static const struct {
    MPI_Datatype dt;
    const char *name;
    size_t data, extent;
  } pairs[] = {
#define PAIR(dt, vtype)                                                        \
  {dt, #dt, sizeof(vtype) + sizeof(int), sizeof(struct {                       \
     vtype v;                                                                  \
     int i;                                                                    \
   })}
      PAIR(MPI_FLOAT_INT, float), PAIR(MPI_DOUBLE_INT, double),
      PAIR(MPI_LONG_INT, long),   PAIR(MPI_2INT, int),
      PAIR(MPI_SHORT_INT, short),
#undef PAIR
  };
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    int size = -1;
    MPI_Aint lb = -1, extent = -1;
    OK(MPI_Type_size(pairs[k].dt, &size));
    OK(MPI_Type_get_extent(pairs[k].dt, &lb, &extent));
    EXPECT(size == (int)pairs[k].data && lb == 0 &&
               extent == (MPI_Aint)pairs[k].extent,
           "%s: size %d, lb %ld, extent %ld", pairs[k].name, size, (long)lb,
           (long)extent);
    for (size_t oi = 0; oi < NOPS; oi++)
      if (ops[oi].op != MPI_MINLOC && ops[oi].op != MPI_MAXLOC)
        check_refused(pairs[k].dt, pairs[k].name, pairs[k].extent, &ops[oi]);
  }
}

/* --- MPI_Ireduce_scatter_block --- */

static void check_ireduce_scatter_block(void) {
  static const int blocks[] = {0, 1, 2, 7, 333};
  for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
    int n = blocks[b];
    size_t all = (size_t)n * (size_t)p;
    for (int in_place = 0; in_place < 2; in_place++) {
      int *si = malloc(sizeof(int) * all + 1),
          *ri = malloc(sizeof(int) * all + 1);
      unsigned long *su = malloc(sizeof(long) * all + 1),
                    *ru = malloc(sizeof(long) * all + 1);
      double *sd = malloc(sizeof(double) * all + 1),
             *rd = malloc(sizeof(double) * all + 1);
      MPI_Request rq[3];
      for (size_t j = 0; j < all; j++) {
        si[j] = (rank % 2 ? -1 : 1) * (int)(j * 3 + (size_t)rank);
        su[j] = (unsigned long)mix(j * 131 + (size_t)rank);
        sd[j] = (double)((j * 7 + (size_t)rank * 13) % 101) - 50.5;
      }
      memcpy(ri, si, sizeof(int) * all);
      memcpy(ru, su, sizeof(long) * all);
      memcpy(rd, sd, sizeof(double) * all);
      OK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : si, ri, n, MPI_INT,
                                   MPI_SUM, MPI_COMM_WORLD, &rq[0]));
      OK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : su, ru, n,
                                   MPI_UNSIGNED_LONG, MPI_BXOR, MPI_COMM_WORLD,
                                   &rq[1]));
      OK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : sd, rd, n,
                                   MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                                   &rq[2]));
      OK(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
      for (int i = 0; i < n; i++) {
        size_t j = (size_t)rank * (size_t)n + (size_t)i; /* my block's */
        long long sum = 0;
        unsigned long x = 0;
        double max = -1e300;
        for (int r = 0; r < p; r++) {
          sum += (r % 2 ? -1 : 1) * (long long)(j * 3 + (size_t)r);
          x ^= (unsigned long)mix(j * 131 + (size_t)r);
          double d = (double)((j * 7 + (size_t)r * 13) % 101) - 50.5;
          max = d > max ? d : max;
        }
        EXPECT(ri[i] == sum,
               "ireduce_scatter_block %d%s: int [%d] = %d, "
               "want %lld",
               n, in_place ? " in place" : "", i, ri[i], sum);
        EXPECT(ru[i] == x,
               "ireduce_scatter_block %d%s: bxor [%d] = %lx, "
               "want %lx",
               n, in_place ? " in place" : "", i, ru[i], x);
        EXPECT(rd[i] == max,
               "ireduce_scatter_block %d%s: max [%d] = %g, "
               "want %g",
               n, in_place ? " in place" : "", i, rd[i], max);
        if (ri[i] != sum || ru[i] != x || rd[i] != max)
          break;
      }
      free(si);
      free(ri);
      free(su);
      free(ru);
      free(sd);
      free(rd);
    }
  }
}

int main(int argc, char **argv) {
  int provided = -1, queried = -1;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2 || p > 64) {
    fprintf(stderr, "mpi_ops: run it on 2 to 64 ranks\n");
    return 2;
  }
  /* crnet grants the level asked for (docs/MPI.md). */
  EXPECT(provided == MPI_THREAD_FUNNELED, "provided %d", provided);
  OK(MPI_Query_thread(&queried));
  EXPECT(queried == provided, "MPI_Query_thread: %d, MPI_Init_thread gave %d",
         queried, provided);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  check_matrix();
  check_contiguous();
  check_pairs();
  check_ireduce_scatter_block();
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  int bad = failures, all_bad = 0;
  OK(MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  OK(MPI_Finalize());
  if (rank == 0 && all_bad == 0 && failures == 0)
    printf("mpi_ops: p = %d: every check held\n", p);
  return failures == 0 && all_bad == 0 ? 0 : 1;
}
