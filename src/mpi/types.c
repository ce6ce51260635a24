/* Datatypes and operators.
 *
 * A datatype is what crnet moves: a base type (crnet_datatype) and how
 * many of it one element holds. The predefined ones map C's types by size;
 * MPI_Type_contiguous multiplies. A derived type with holes also has a
 * layout (layout.c), kept here beside it by handle. MPI_BYTE moves as uint8 so
 * that the bitwise operators, which MPI allows on it, reduce it.
 *
 * Which predefined operators reduce a type is MPI's table (MPI 3.1, 5.9.2),
 * kept per type (its ops), not read off its base type: MPI_BYTE, MPI_C_BOOL
 * and MPI_UINT8_T all move as uint8, but MPI_BYTE takes the bitwise
 * operators only, MPI_C_BOOL the logical ones only, MPI_UINT8_T all ten;
 * MPI_CHAR, MPI_WCHAR and MPI_PACKED none. A derived type takes those that
 * every predefined type in it takes.
 *
 * Operators. The predefined ones are crnet's, but for MPI_LXOR, which
 * crnet lacks: a crnet user operator made at MPI_Init. MPI_Op_create makes
 * one crnet operator per MPI one, in the program's order on every rank as
 * crnet needs. Its function is called with the MPI datatype that names the
 * base type (MPI_INT for any 32-bit signed type, MPI_INT32_T included), a
 * count in base elements; user operators on derived datatypes are refused.
 *
 * The pair types of MPI_MINLOC and MPI_MAXLOC move as their bytes; loc.c
 * reduces them.
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <wchar.h>

#include "mpi_internal.h"

#define TYPES_MAX 4096 /* predefined and derived alive at once */
#define OPS_MAX 256
#define FIRST_DERIVED 64
#define FIRST_USER_OP 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* --- datatypes --- */

#define SIGNED_OF(size)                                                        \
  ((size) == 1   ? CRNET_INT8                                                  \
   : (size) == 2 ? CRNET_INT16                                                 \
   : (size) == 4 ? CRNET_INT32                                                 \
                 : CRNET_INT64)
#define UNSIGNED_OF(size)                                                      \
  ((size) == 1   ? CRNET_UINT8                                                 \
   : (size) == 2 ? CRNET_UINT16                                                \
   : (size) == 4 ? CRNET_UINT32                                                \
                 : CRNET_UINT64)

/* The predefined operators MPI 3.1 (5.9.2) defines on each group of
 * predefined types. MPI_CHAR and MPI_WCHAR (printable characters) and
 * MPI_PACKED are in none. */
#define BIT CRNET_MPI_OP_BIT
#define OPS_MINMAX (BIT(MPI_MAX) | BIT(MPI_MIN))
#define OPS_ARITH (BIT(MPI_SUM) | BIT(MPI_PROD))
#define OPS_LOGICAL (BIT(MPI_LAND) | BIT(MPI_LOR) | BIT(MPI_LXOR))
#define OPS_BITWISE (BIT(MPI_BAND) | BIT(MPI_BOR) | BIT(MPI_BXOR))
#define OPS_C_INTEGER (OPS_MINMAX | OPS_ARITH | OPS_LOGICAL | OPS_BITWISE)
#define OPS_FLOATING (OPS_MINMAX | OPS_ARITH)
#define OPS_BYTE OPS_BITWISE
#define OPS_MULTI_LANGUAGE (OPS_MINMAX | OPS_ARITH | OPS_BITWISE)
#define OPS_PAIR (BIT(MPI_MINLOC) | BIT(MPI_MAXLOC))
#define OPS_NONE 0u

/* A predefined type: n elements of base, with the operators ops. */
#define PREDEFINED(base_, n_, pair_, ops_)                                     \
  {                                                                            \
    .base = (base_), .n = (n_), .predefined = true, .committed = true,         \
    .live = true, .pair = (pair_), .ops = (ops_)                               \
  }
#define PAIR_OF(vtype)                                                         \
  PREDEFINED(CRNET_BYTE, sizeof(struct {                                       \
               vtype v;                                                        \
               int i;                                                          \
             }),                                                               \
             true, OPS_PAIR)

static crnet_mpi_type types[TYPES_MAX] = {
    [1] = PREDEFINED(SIGNED_OF(sizeof(char)), 1, false, OPS_NONE),
    [2] = PREDEFINED(CRNET_INT8, 1, false, OPS_C_INTEGER),
    [3] = PREDEFINED(CRNET_UINT8, 1, false, OPS_C_INTEGER),
    [4] = PREDEFINED(CRNET_UINT8, 1, false, OPS_BYTE),
    [5] = PREDEFINED(SIGNED_OF(sizeof(short)), 1, false, OPS_C_INTEGER),
    [6] = PREDEFINED(UNSIGNED_OF(sizeof(short)), 1, false, OPS_C_INTEGER),
    [7] = PREDEFINED(SIGNED_OF(sizeof(int)), 1, false, OPS_C_INTEGER),
    [8] = PREDEFINED(UNSIGNED_OF(sizeof(int)), 1, false, OPS_C_INTEGER),
    [9] = PREDEFINED(SIGNED_OF(sizeof(long)), 1, false, OPS_C_INTEGER),
    [10] = PREDEFINED(UNSIGNED_OF(sizeof(long)), 1, false, OPS_C_INTEGER),
    [11] = PREDEFINED(SIGNED_OF(sizeof(long long)), 1, false, OPS_C_INTEGER),
    [12] = PREDEFINED(UNSIGNED_OF(sizeof(long long)), 1, false, OPS_C_INTEGER),
    [13] = PREDEFINED(CRNET_FLOAT, 1, false, OPS_FLOATING),
    [14] = PREDEFINED(CRNET_DOUBLE, 1, false, OPS_FLOATING),
    [15] = PREDEFINED(SIGNED_OF(sizeof(wchar_t)), 1, false, OPS_NONE),
    [16] = PREDEFINED(UNSIGNED_OF(sizeof(_Bool)), 1, false, OPS_LOGICAL),
    [17] = PREDEFINED(CRNET_INT8, 1, false, OPS_C_INTEGER),
    [18] = PREDEFINED(CRNET_INT16, 1, false, OPS_C_INTEGER),
    [19] = PREDEFINED(CRNET_INT32, 1, false, OPS_C_INTEGER),
    [20] = PREDEFINED(CRNET_INT64, 1, false, OPS_C_INTEGER),
    [21] = PREDEFINED(CRNET_UINT8, 1, false, OPS_C_INTEGER),
    [22] = PREDEFINED(CRNET_UINT16, 1, false, OPS_C_INTEGER),
    [23] = PREDEFINED(CRNET_UINT32, 1, false, OPS_C_INTEGER),
    [24] = PREDEFINED(CRNET_UINT64, 1, false, OPS_C_INTEGER),
    [25] =
        PREDEFINED(SIGNED_OF(sizeof(MPI_Aint)), 1, false, OPS_MULTI_LANGUAGE),
    [26] = PREDEFINED(CRNET_INT64, 1, false, OPS_MULTI_LANGUAGE),
    [27] = PREDEFINED(CRNET_INT64, 1, false, OPS_MULTI_LANGUAGE),
    [28] = PAIR_OF(float),
    [29] = PAIR_OF(double),
    [30] = PAIR_OF(long),
    [31] = PAIR_OF(int),
    [32] = PAIR_OF(short),
    [33] = PREDEFINED(CRNET_UINT8, 1, false, OPS_NONE), /* MPI_PACKED */
};
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8,
               "float and double are binary32 and binary64");

/* The layouts of the derived types with holes (layout.c), by slot; NULL
 * for every other type. Under lock. */
static crnet_mpi_layout *layouts[TYPES_MAX];

/* A derived type's handle is its slot and the slot's generation above it,
 * which every new type in the slot raises: a handle the program freed
 * never names the next type of its slot, even one made by another thread
 * between a call's check of the type and its use (MPI lets a type be freed
 * while calls that use it go on). Predefined handles are their slots.
 * Under lock. */
#define SLOT_BITS 12
_Static_assert(TYPES_MAX == 1 << SLOT_BITS, "a slot fills SLOT_BITS");
#define GEN_MAX ((1u << (31 - SLOT_BITS)) - 1)
static uint32_t gens[TYPES_MAX];
static uint32_t next_slot = FIRST_DERIVED; /* where the next search starts */

/* The slot of handle dt, or -1 if it names no type that exists. Under lock
 * for derived handles. */
static int slot_of(MPI_Datatype dt) {
  uint32_t s, g;
  if (dt <= 0)
    return -1;
  s = (uint32_t)dt & (TYPES_MAX - 1);
  g = (uint32_t)dt >> SLOT_BITS;
  if (s < FIRST_DERIVED)
    return g == 0 && types[s].live ? (int)s : -1;
  return g == gens[s] && types[s].live ? (int)s : -1;
}

/* The predefined type a user operator's function is told it works on,
 * per base type. */
static const MPI_Datatype canonical[CRNET_DATATYPE_COUNT] = {
    [CRNET_INT8] = MPI_INT8_T,     [CRNET_INT16] = MPI_INT16_T,
    [CRNET_INT32] = MPI_INT,       [CRNET_INT64] = MPI_INT64_T,
    [CRNET_UINT8] = MPI_UINT8_T,   [CRNET_UINT16] = MPI_UINT16_T,
    [CRNET_UINT32] = MPI_UNSIGNED, [CRNET_UINT64] = MPI_UINT64_T,
    [CRNET_FLOAT] = MPI_FLOAT,     [CRNET_DOUBLE] = MPI_DOUBLE,
};

bool crnet_mpi_type_hold(MPI_Datatype dt, bool committed_only,
                         crnet_mpi_type *t, crnet_mpi_layout **layout) {
  bool ok;
  int s;
  if (layout != NULL)
    *layout = NULL;
  if (dt > 0 && dt < FIRST_DERIVED) { /* predefined: dense, never written */
    *t = types[dt];
    return t->live;
  }
  pthread_mutex_lock(&lock);
  s = slot_of(dt);
  ok = s >= 0 && (types[s].committed || !committed_only);
  if (ok) {
    *t = types[s];
    if (layout != NULL && (*layout = layouts[s]) != NULL)
      atomic_fetch_add(&(*layout)->refs, 1);
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

bool crnet_mpi_type_get(MPI_Datatype dt, crnet_mpi_type *out) {
  return crnet_mpi_type_hold(dt, true, out, NULL);
}

void crnet_mpi_layout_release(crnet_mpi_layout *l) {
  if (l != NULL && atomic_fetch_sub(&l->refs, 1) == 1)
    free(l);
}

int crnet_mpi_type_add(const crnet_mpi_type *t, crnet_mpi_layout *layout,
                       MPI_Datatype *out) {
  pthread_mutex_lock(&lock);
  /* Round the table: a freed slot is the last to be used again. */
  for (int k = 0; k < TYPES_MAX - FIRST_DERIVED; k++) {
    uint32_t i = FIRST_DERIVED + (next_slot - FIRST_DERIVED + (uint32_t)k) %
                                     (TYPES_MAX - FIRST_DERIVED);
    if (types[i].live)
      continue;
    types[i] = *t;
    types[i].predefined = false;
    types[i].committed = false;
    types[i].live = true;
    types[i].holes = layout != NULL;
    layouts[i] = layout;
    gens[i] = gens[i] == GEN_MAX ? 1 : gens[i] + 1;
    next_slot = i + 1 < TYPES_MAX ? i + 1 : FIRST_DERIVED;
    *out = (MPI_Datatype)(i | gens[i] << SLOT_BITS);
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  crnet_mpi_layout_release(layout);
  return MPI_ERR_NO_MEM;
}

/* A pair type's size: its value and its int, without the struct's padding
 * (MPI_DOUBLE_INT is 12 bytes in a 16-byte extent). */
static size_t pair_size(MPI_Datatype dt) {
  switch (dt) {
  case MPI_FLOAT_INT:
    return sizeof(float) + sizeof(int);
  case MPI_DOUBLE_INT:
    return sizeof(double) + sizeof(int);
  case MPI_LONG_INT:
    return sizeof(long) + sizeof(int);
  case MPI_SHORT_INT:
    return sizeof(short) + sizeof(int);
  default:
    return 2 * sizeof(int);
  }
}

/* A type's MPI size: its data without padding. */
static size_t size_of(MPI_Datatype dt, const crnet_mpi_type *t) {
  if (!t->predefined)
    return t->size;
  return t->pair ? pair_size(dt) : t->n * crnet_datatype_size(t->base);
}

/* The padding after a type's last byte of data. */
static size_t trail_of(MPI_Datatype dt, const crnet_mpi_type *t) {
  if (!t->predefined)
    return t->trail;
  return t->pair ? t->n * crnet_datatype_size(t->base) - pair_size(dt) : 0;
}

/* Any type that exists, committed or not (an uncommitted type has a size
 * and an extent too): true with it in *t (and its layout held in *l, if l
 * is not NULL), else the error raised in *rc. */
static bool existing_type(MPI_Datatype datatype, const char *fn,
                          crnet_mpi_type *t, crnet_mpi_layout **l, int *rc) {
  bool live = crnet_mpi_type_hold(datatype, false, t, l);
  if (!live)
    *rc = crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_TYPE,
                         "datatype %d does not exist", datatype);
  return live;
}

int MPI_Type_size(MPI_Datatype datatype, int *size) {
  crnet_mpi_type t;
  size_t bytes;
  int rc = MPI_SUCCESS;
  if (size == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Type_size", MPI_ERR_ARG,
                          "size is NULL");
  if (!existing_type(datatype, "MPI_Type_size", &t, NULL, &rc))
    return rc;
  bytes = size_of(datatype, &t);
  *size = bytes > INT_MAX ? MPI_UNDEFINED : (int)bytes;
  return MPI_SUCCESS;
}

/* A type's bounds and true bounds: its layout's, or from 0 for a dense
 * type (a pair type's extent is its C struct's, padding included; its
 * true extent ends with its int). */
static int bounds_of(MPI_Datatype datatype, const char *fn, MPI_Aint *lb,
                     MPI_Aint *extent, MPI_Aint *true_lb,
                     MPI_Aint *true_extent) {
  crnet_mpi_type t;
  crnet_mpi_layout *l;
  int rc = MPI_SUCCESS;
  if (!existing_type(datatype, fn, &t, &l, &rc))
    return rc;
  if (l != NULL) {
    *lb = l->lb;
    *extent = (MPI_Aint)l->extent;
    *true_lb = l->true_lb;
    *true_extent = (MPI_Aint)l->true_extent;
    crnet_mpi_layout_release(l);
    return MPI_SUCCESS;
  }
  *lb = *true_lb = 0;
  *extent = (MPI_Aint)(t.n * crnet_datatype_size(t.base));
  *true_extent = *extent - (MPI_Aint)trail_of(datatype, &t);
  return MPI_SUCCESS;
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent) {
  MPI_Aint tlb, text;
  if (lb == NULL || extent == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Type_get_extent", MPI_ERR_ARG,
                          "lb or extent is NULL");
  return bounds_of(datatype, "MPI_Type_get_extent", lb, extent, &tlb, &text);
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb,
                             MPI_Aint *true_extent) {
  MPI_Aint lb, extent;
  if (true_lb == NULL || true_extent == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Type_get_true_extent",
                          MPI_ERR_ARG, "true_lb or true_extent is NULL");
  return bounds_of(datatype, "MPI_Type_get_true_extent", &lb, &extent, true_lb,
                   true_extent);
}

int MPI_Type_contiguous(int count, MPI_Datatype oldtype,
                        MPI_Datatype *newtype) {
  static const char fn[] = "MPI_Type_contiguous";
  crnet_mpi_type old, t;
  int rc = MPI_SUCCESS;
  if (newtype == NULL || count < 0)
    return crnet_mpi_fail(MPI_COMM_NULL, fn,
                          count < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG,
                          "count %d, newtype %p", count, (void *)newtype);
  if (!existing_type(oldtype, fn, &old, NULL, &rc))
    return rc;
  if (old.holes) /* count copies one extent apart: a vector of blocks of 1 */
    return MPI_Type_vector(count, 1, 1, oldtype, newtype);
  if (old.n > 0 &&
      (size_t)count > SIZE_MAX / 2 / old.n / crnet_datatype_size(old.base))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COUNT,
                          "%d elements of %zu bytes", count,
                          old.n * crnet_datatype_size(old.base));
  t = (crnet_mpi_type){.base = old.base,
                       .n = old.n * (size_t)count,
                       .size = size_of(oldtype, &old) * (size_t)count,
                       .trail = count > 0 ? trail_of(oldtype, &old) : 0,
                       .mixed = old.mixed,
                       .sticky = old.sticky,
                       .align = old.align ? old.align
                                          : crnet_datatype_size(old.base),
                       .ops = old.ops};
  rc = crnet_mpi_type_add(&t, NULL, newtype);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, rc,
                          "%d derived datatypes are alive already",
                          TYPES_MAX - FIRST_DERIVED);
  return MPI_SUCCESS;
}

/* The same type map, bounds and committed state, in a new handle (its
 * layout shared). */
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
  static const char fn[] = "MPI_Type_dup";
  crnet_mpi_type t;
  crnet_mpi_layout *l;
  bool committed;
  int rc;
  if (newtype == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "newtype is NULL");
  if (!crnet_mpi_type_hold(oldtype, false, &t, &l))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist", oldtype);
  committed = t.committed;
  if (t.predefined) {
    t.size = size_of(oldtype, &t);
    t.trail = trail_of(oldtype, &t);
    t.align = crnet_datatype_size(t.base);
  }
  rc = crnet_mpi_type_add(&t, l, newtype);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, rc,
                          "%d derived datatypes are alive already",
                          TYPES_MAX - FIRST_DERIVED);
  return committed ? MPI_Type_commit(newtype) : MPI_SUCCESS;
}

int MPI_Type_commit(MPI_Datatype *datatype) {
  int rc = MPI_SUCCESS;
  pthread_mutex_lock(&lock);
  int s = datatype != NULL ? slot_of(*datatype) : -1;
  if (s >= 0)
    types[s].committed = true;
  else
    rc = MPI_ERR_TYPE;
  pthread_mutex_unlock(&lock);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Type_commit", rc,
                          "no such datatype");
  return MPI_SUCCESS;
}

int MPI_Type_free(MPI_Datatype *datatype) {
  int rc = MPI_SUCCESS;
  pthread_mutex_lock(&lock);
  int s = datatype != NULL ? slot_of(*datatype) : -1;
  if (s < 0)
    rc = MPI_ERR_TYPE;
  else if (types[s].predefined)
    rc = MPI_ERR_ARG;
  else {
    types[s].live = false;
    /* Calls in flight hold their own references. */
    crnet_mpi_layout_release(layouts[s]);
    layouts[s] = NULL;
    *datatype = MPI_DATATYPE_NULL;
  }
  pthread_mutex_unlock(&lock);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Type_free", rc,
                          rc == MPI_ERR_ARG ? "a predefined datatype"
                                            : "no such datatype");
  return MPI_SUCCESS;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
  crnet_mpi_type t;
  size_t size;
  if (status == NULL || count == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Get_count", MPI_ERR_ARG,
                          "status or count is NULL");
  if (!crnet_mpi_type_get(datatype, &t))
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Get_count", MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed",
                          datatype);
  size = t.n * crnet_datatype_size(t.base);
  if (size == 0)
    *count = status->crnet_bytes_ == 0 ? 0 : MPI_UNDEFINED;
  else if (status->crnet_bytes_ % size != 0 ||
           status->crnet_bytes_ / size > INT_MAX)
    *count = MPI_UNDEFINED;
  else
    *count = (int)(status->crnet_bytes_ / size);
  return MPI_SUCCESS;
}

/* --- operators --- */

typedef struct user_op {
  crnet_op op; /* calls call_user with the MPI function as its ctx */
  bool live;
  bool commute; /* as MPI_Op_create was told */
} user_op;

static user_op user_ops[OPS_MAX];
static crnet_op lxor_op = -1;

static const crnet_op builtin[] = {
    [1] = CRNET_MAX,  [2] = CRNET_MIN,  [3] = CRNET_SUM,
    [4] = CRNET_PROD, [5] = CRNET_LAND, [6] = CRNET_BAND,
    [7] = CRNET_LOR,  [8] = CRNET_BOR,  [10] = CRNET_BXOR,
};

#define LXOR_LOOP(type)                                                        \
  do {                                                                         \
    const type *a = in;                                                        \
    type *b = inout;                                                           \
    for (size_t i = 0; i < count; i++)                                         \
      b[i] = (type)((a[i] != 0) != (b[i] != 0));                               \
  } while (0)

/* MPI_LXOR on the integer and logical types, as MPI defines it. */
static void lxor(const void *in, void *inout, size_t count, crnet_datatype dt,
                 void *ctx) {
  (void)ctx;
  switch (dt) {
  case CRNET_INT8:
    LXOR_LOOP(int8_t);
    break;
  case CRNET_INT16:
    LXOR_LOOP(int16_t);
    break;
  case CRNET_INT32:
    LXOR_LOOP(int32_t);
    break;
  case CRNET_INT64:
    LXOR_LOOP(int64_t);
    break;
  case CRNET_UINT8:
    LXOR_LOOP(uint8_t);
    break;
  case CRNET_UINT16:
    LXOR_LOOP(uint16_t);
    break;
  case CRNET_UINT32:
    LXOR_LOOP(uint32_t);
    break;
  case CRNET_UINT64:
    LXOR_LOOP(uint64_t);
    break;
  default: /* refused before the call (crnet_mpi_op_get) */
    break;
  }
}

/* crnet's call of an MPI user operator: in pieces of at most INT_MAX
 * elements, since MPI's len is an int. */
static void call_user(const void *in, void *inout, size_t count,
                      crnet_datatype dt, void *ctx) {
  MPI_User_function *fn = (MPI_User_function *)(uintptr_t)ctx;
  MPI_Datatype mdt = canonical[dt];
  size_t esize = crnet_datatype_size(dt);
  while (count > 0) {
    int len = count > INT_MAX ? INT_MAX : (int)count;
    fn((void *)(uintptr_t)in, inout, &len, &mdt);
    in = (const char *)in + (size_t)len * esize;
    inout = (char *)inout + (size_t)len * esize;
    count -= (size_t)len;
  }
}

int crnet_mpi_ops_init(void) {
  return crnet_op_create(&lxor_op, lxor, NULL, 1);
}

void crnet_mpi_ops_fini(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < OPS_MAX; i++)
    if (user_ops[i].live) {
      crnet_op_free(&user_ops[i].op);
      user_ops[i].live = false;
    }
  pthread_mutex_unlock(&lock);
  if (lxor_op >= 0)
    crnet_op_free(&lxor_op);
}

int crnet_mpi_op_get(MPI_Op op, const crnet_mpi_type *t, crnet_op *out,
                     const char **why) {
  if (CRNET_MPI_IS_LOC(op)) {
    *why = t->pair ? "MPI_MINLOC and MPI_MAXLOC reduce in MPI_Allreduce, "
                     "MPI_Reduce, MPI_Reduce_scatter and "
                     "MPI_Reduce_scatter_block only"
                   : "MPI_MINLOC and MPI_MAXLOC take the pair types "
                     "(MPI_2INT, MPI_DOUBLE_INT, ...) only";
    return t->pair ? MPI_ERR_UNSUPPORTED_OPERATION : MPI_ERR_OP;
  }
  if (t->mixed) {
    *why = "a datatype made of different base types is not reduced";
    return MPI_ERR_UNSUPPORTED_OPERATION;
  }
  if (t->pair) {
    bool user = op >= FIRST_USER_OP;
    *why = user ? "a user operator on a pair type is not supported"
                : "of the predefined operators, only MPI_MINLOC and "
                  "MPI_MAXLOC reduce a pair type";
    return user ? MPI_ERR_UNSUPPORTED_OPERATION : MPI_ERR_OP;
  }
  if (op > 0 && op < (MPI_Op)(sizeof builtin / sizeof builtin[0])) {
    if (!(t->ops & CRNET_MPI_OP_BIT(op))) {
      *why = "MPI does not define this operator on this datatype (MPI 3.1, "
             "5.9.2: MPI_CHAR, MPI_WCHAR and MPI_PACKED take none; "
             "floating point MAX, MIN, SUM, PROD; MPI_C_BOOL the logical "
             "ones; MPI_BYTE the bitwise ones; MPI_AINT, MPI_OFFSET, "
             "MPI_COUNT all but the logical ones)";
      return MPI_ERR_OP;
    }
    *out = op == MPI_LXOR ? lxor_op : builtin[op];
    return MPI_SUCCESS;
  }
  if (op >= FIRST_USER_OP && op < FIRST_USER_OP + OPS_MAX) {
    pthread_mutex_lock(&lock);
    user_op u = user_ops[op - FIRST_USER_OP];
    pthread_mutex_unlock(&lock);
    if (u.live) {
      /* One element of one base type: a predefined type, its dup, a
       * contiguous run of one. */
      if (t->n != 1 || t->holes || t->mixed || t->pair || t->trail != 0) {
        *why = "a user operator on a derived datatype is not supported";
        return MPI_ERR_UNSUPPORTED_OPERATION;
      }
      *out = u.op;
      return MPI_SUCCESS;
    }
  }
  *why = "no such operator";
  return MPI_ERR_OP;
}

int MPI_Op_create(MPI_User_function *function, int commute, MPI_Op *op) {
  int rc;
  if (function == NULL || op == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_create", MPI_ERR_ARG,
                          "function or op is NULL");
  pthread_mutex_lock(&lock);
  for (int i = 0; i < OPS_MAX; i++) {
    if (user_ops[i].live)
      continue;
    rc = crnet_op_create(&user_ops[i].op, call_user,
                         (void *)(uintptr_t)function, commute);
    if (rc == 0) {
      user_ops[i].live = true;
      user_ops[i].commute = commute != 0;
      *op = FIRST_USER_OP + i;
    }
    pthread_mutex_unlock(&lock);
    return rc == 0 ? MPI_SUCCESS
                   : crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_create",
                                    MPI_ERR_NO_MEM, "%s", crnet_strerror(rc));
  }
  pthread_mutex_unlock(&lock);
  return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_create", MPI_ERR_NO_MEM,
                        "%d operators are alive already", OPS_MAX);
}

int MPI_Op_commutative(MPI_Op op, int *commute) {
  bool live = false, comm = false;
  if (commute == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_commutative", MPI_ERR_ARG,
                          "commute is NULL");
  if (op >= MPI_MAX && op <= MPI_MAXLOC) { /* every predefined one commutes */
    *commute = 1;
    return MPI_SUCCESS;
  }
  if (op >= FIRST_USER_OP && op < FIRST_USER_OP + OPS_MAX) {
    pthread_mutex_lock(&lock);
    live = user_ops[op - FIRST_USER_OP].live;
    comm = user_ops[op - FIRST_USER_OP].commute;
    pthread_mutex_unlock(&lock);
  }
  if (!live)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_commutative", MPI_ERR_OP,
                          "operator %d does not exist", op);
  *commute = comm;
  return MPI_SUCCESS;
}

int MPI_Op_free(MPI_Op *op) {
  int rc = MPI_ERR_OP;
  pthread_mutex_lock(&lock);
  if (op != NULL && *op >= FIRST_USER_OP && *op < FIRST_USER_OP + OPS_MAX &&
      user_ops[*op - FIRST_USER_OP].live) {
    user_op *u = &user_ops[*op - FIRST_USER_OP];
    crnet_op_free(&u->op);
    u->live = false;
    *op = MPI_OP_NULL;
    rc = MPI_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Op_free", rc,
                          "not an operator MPI_Op_create made");
  return MPI_SUCCESS;
}
