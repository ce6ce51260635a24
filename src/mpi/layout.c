/* Derived datatypes with holes, and how calls move them.
 *
 * A type made by MPI_Type_vector, _indexed, _create_struct, _create_resized,
 * _create_subarray (and their h- and block forms) is described by the
 * data bytes of one element: blocks at offsets from the element's address,
 * in the order of its type map, adjacent ones merged, with its lower bound
 * and extent (crnet_mpi_layout, mpi_internal.h). A constructor flattens
 * its old types' blocks into the new type's; a type whose one block runs
 * from 0 to its extent is dense after all, and gets no layout: every call
 * moves it in place as before.
 *
 * crnet moves dense buffers of one base type. A call with a type with
 * holes moves it packed: its data, element after element, block after
 * block, in a buffer of the call's own (a stage), as count * n base
 * elements, exactly what the same data in a dense type would be. So the
 * two sides of a message may describe it differently (a vector sent, a
 * dense array received) as MPI allows, and a vector of doubles reduces as
 * doubles. A receive's stage is unpacked into the program's buffer when
 * the call ends (for a nonblocking one, by the wait or test that reports
 * it). A struct of several base types moves as bytes and never reduces.
 *
 * Pair types (MPI_DOUBLE_INT, ...) inside a type with holes are refused:
 * MINLOC and MAXLOC reduce them by their layout (loc.c).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* --- building layouts --- */

/* What a constructor knows of one of its old types. */
typedef struct part {
  crnet_mpi_type t;
  crnet_mpi_layout *l; /* held, or NULL: one dense block */
  ptrdiff_t lb;
  size_t extent, size, align;
} part;

/* A type's blocks are flattened: copies of copies multiply them. Past this
 * many (256 MiB of them) a constructor gives up with MPI_ERR_NO_MEM. */
#define BLOCKS_MAX ((size_t)1 << 24)

/* Every displacement, bound and size a type has stays within +-LIMIT
 * bytes, so that differences of two never overflow; past it a constructor
 * fails with MPI_ERR_ARG. */
#define LIMIT ((ptrdiff_t)1 << 61)

/* a + b + c in *out if it stays within LIMIT. */
static bool sum_in(ptrdiff_t a, ptrdiff_t b, ptrdiff_t c, ptrdiff_t *out) {
  ptrdiff_t t;
  return !__builtin_add_overflow(a, b, &t) &&
         !__builtin_add_overflow(t, c, out) && *out <= LIMIT && *out >= -LIMIT;
}

/* The new type as its copies are added. Its bounds: where the copies of
 * types without set bounds lie (data), and the bounds of the copies of
 * types whose bounds MPI_Type_create_resized set (marks), which win
 * (MPI 3.1, 4.1.7: the lb and ub markers of the type map). */
typedef struct builder {
  crnet_mpi_block *b;
  size_t n, cap;
  bool oom;
  bool overflow; /* a displacement or size past +-LIMIT */
  bool any_data, any_mark;
  ptrdiff_t dlb, dub, mlb, mub;
  size_t align;
  crnet_datatype base;
  bool mixed, based;
  unsigned ops; /* those every copy's type allows, once based */
} builder;

static void part_release(part *p) {
  crnet_mpi_layout_release(p->l);
  p->l = NULL;
}

/* The old type dt of constructor fn: 0, or the error raised. */
static int part_get(const char *fn, MPI_Datatype dt, part *p) {
  memset(p, 0, sizeof *p);
  if (!crnet_mpi_type_hold(dt, false, &p->t, &p->l))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist", dt);
  /* A pair's padding is not data: only contiguous runs of pairs move. */
  if (p->t.pair || p->t.trail != 0) {
    part_release(p);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_TYPE,
                          "a pair type (MPI_DOUBLE_INT, ...) inside a "
                          "derived type other than MPI_Type_contiguous is "
                          "not supported");
  }
  if (p->l != NULL) {
    p->lb = p->l->lb;
    p->extent = p->l->extent;
    p->size = p->l->size;
    p->align = p->l->align;
  } else {
    p->extent = p->t.n * crnet_datatype_size(p->t.base);
    p->size = p->extent;
    p->align = p->t.align ? p->t.align : crnet_datatype_size(p->t.base);
  }
  return MPI_SUCCESS;
}

static void add_block(builder *b, ptrdiff_t off, size_t len) {
  if (len == 0 || b->oom)
    return;
  if (b->n > 0 && b->b[b->n - 1].off + (ptrdiff_t)b->b[b->n - 1].len == off) {
    b->b[b->n - 1].len += len;
    return;
  }
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 16;
    if (b->n >= BLOCKS_MAX) {
      b->oom = true;
      return;
    }
    crnet_mpi_block *nb = realloc(b->b, sizeof *nb * cap);
    if (nb == NULL) {
      b->oom = true;
      return;
    }
    b->b = nb;
    b->cap = cap;
  }
  b->b[b->n].off = off;
  b->b[b->n].len = len;
  b->n++;
}

/* The bounds of copies of p from lo to hi (their displacements). */
static void add_bounds(builder *b, const part *p, ptrdiff_t lo, ptrdiff_t hi) {
  ptrdiff_t l, u;
  if (!sum_in(lo, p->lb, 0, &l) ||
      !sum_in(hi, p->lb, (ptrdiff_t)p->extent, &u)) {
    b->overflow = true;
    return;
  }
  if (p->t.sticky) {
    b->mlb = b->any_mark && b->mlb < l ? b->mlb : l;
    b->mub = b->any_mark && b->mub > u ? b->mub : u;
    b->any_mark = true;
  } else {
    b->dlb = b->any_data && b->dlb < l ? b->dlb : l;
    b->dub = b->any_data && b->dub > u ? b->dub : u;
    b->any_data = true;
  }
}

/* count elements of p one after the other from displacement disp: one
 * block when p is dense. */
static void add_run(builder *b, const part *p, ptrdiff_t disp, size_t count) {
  ptrdiff_t ext = (ptrdiff_t)p->extent, last, span;
  size_t bytes;
  if (count == 0)
    return;
  /* The last element's displacement, and a dense run's bytes, in range
   * (then every element's and block's are: each block lies within its
   * element's true extent, itself within LIMIT). */
  if (__builtin_mul_overflow((ptrdiff_t)(count - 1), ext, &span) ||
      !sum_in(disp, span, 0, &last) ||
      __builtin_mul_overflow(p->size, count, &bytes) || bytes > (size_t)LIMIT) {
    b->overflow = true;
    return;
  }
  if (p->l == NULL)
    add_block(b, disp, bytes);
  else
    for (size_t j = 0; j < count && !b->oom; j++)
      for (size_t k = 0; k < p->l->nblocks; k++) {
        ptrdiff_t at;
        if (!sum_in(disp, (ptrdiff_t)j * ext, p->l->blocks[k].off, &at) ||
            !sum_in(at, (ptrdiff_t)p->l->blocks[k].len, 0, &span)) {
          b->overflow = true;
          return;
        }
        add_block(b, at, p->l->blocks[k].len);
      }
  add_bounds(b, p, ext >= 0 ? disp : last, ext >= 0 ? last : disp);
  if (p->align > b->align)
    b->align = p->align;
  if (p->size == 0)
    return;
  if (!b->based) {
    b->base = p->t.base;
    b->mixed = p->t.mixed;
    b->ops = p->t.ops;
    b->based = true;
  } else if (b->base != p->t.base || p->t.mixed) {
    b->mixed = true;
  }
  b->ops &= p->t.ops;
}

/* The new type from b, with the bounds lb and extent (sticky: set by
 * MPI_Type_create_resized, or by marks among its copies): a dense type if
 * its data run from 0 to its extent in one block, else one with its
 * layout. 0, or the error raised. */
static int finish(const char *fn, builder *b, ptrdiff_t lb, size_t extent,
                  bool sticky, MPI_Datatype *newtype) {
  crnet_mpi_type t;
  crnet_mpi_layout *l = NULL;
  size_t size = 0, esize;
  ptrdiff_t tlb = 0, tub = 0;
  int rc;
  if (b->overflow || extent > (size_t)LIMIT || lb > LIMIT || lb < -LIMIT) {
    free(b->b);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "displacements or sizes past 2^61 bytes");
  }
  if (b->oom) {
    free(b->b);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM,
                          "the type's %zu blocks (at most %zu)", b->n,
                          BLOCKS_MAX);
  }
  for (size_t k = 0; k < b->n; k++) {
    size += b->b[k].len;
    if (k == 0 || b->b[k].off < tlb)
      tlb = b->b[k].off;
    if (k == 0 || b->b[k].off + (ptrdiff_t)b->b[k].len > tub)
      tub = b->b[k].off + (ptrdiff_t)b->b[k].len;
  }
  memset(&t, 0, sizeof t);
  t.base = b->based && !b->mixed ? b->base : CRNET_BYTE;
  t.mixed = b->mixed;
  /* A type without data reduces nothing, with any operator. */
  t.ops = b->based ? b->ops : UINT_MAX;
  t.sticky = sticky;
  t.align = b->align ? b->align : 1;
  esize = crnet_datatype_size(t.base);
  t.n = size / esize;
  t.size = size;
  bool dense = lb == 0 && (size_t)extent == size &&
               (b->n == 0 || (b->n == 1 && b->b[0].off == 0));
  if (!dense) {
    l = malloc(sizeof *l + sizeof l->blocks[0] * b->n);
    if (l == NULL) {
      free(b->b);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM,
                            "the type's %zu blocks", b->n);
    }
    atomic_init(&l->refs, 1);
    l->lb = lb;
    l->extent = extent;
    l->true_lb = tlb;
    l->true_extent = (size_t)(tub - tlb);
    l->size = size;
    l->align = t.align;
    l->nblocks = b->n;
    if (b->n > 0)
      memcpy(l->blocks, b->b, sizeof l->blocks[0] * b->n);
  }
  free(b->b);
  rc = crnet_mpi_type_add(&t, l, newtype);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, rc,
                          "too many derived datatypes alive");
  return MPI_SUCCESS;
}

/* The bounds of what was added (0 and 0 for nothing): the marks where
 * there are any, else the data's. Whether they are marks. */
static bool natural_bounds(const builder *b, ptrdiff_t *lb, size_t *extent) {
  ptrdiff_t l = b->any_mark ? b->mlb : b->any_data ? b->dlb : 0;
  ptrdiff_t u = b->any_mark ? b->mub : b->any_data ? b->dub : 0;
  *lb = l;
  *extent = u > l ? (size_t)(u - l) : 0;
  return b->any_mark;
}

static int bad_args(const char *fn, const char *what) {
  return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "%s", what);
}

/* Where block i of a constructor goes. */
typedef struct where {
  enum { STRIDE_BYTES, STRIDE_EXTENTS, AT_BYTES, AT_EXTENTS } how;
  MPI_Aint stride;
  const MPI_Aint *bytes;
  const int *extents;
} where;

/* a * b + c in *out, false if it overflows. */
static bool affine(ptrdiff_t a, ptrdiff_t b, ptrdiff_t c, ptrdiff_t *out) {
  ptrdiff_t m;
  return !__builtin_mul_overflow(a, b, &m) &&
         !__builtin_add_overflow(m, c, out);
}

/* count blocks of blocklens[i] (or, if blocklens is NULL, blocklen)
 * elements of oldtype, placed as w says: every constructor but struct,
 * resized and subarray. */
static int blocks_of(const char *fn, int count, const int *blocklens,
                     int blocklen, where w, MPI_Datatype oldtype,
                     MPI_Datatype *newtype) {
  builder b = {0};
  part p;
  ptrdiff_t lb;
  size_t extent;
  int rc;
  if (newtype == NULL)
    return bad_args(fn, "newtype is NULL");
  if (count < 0 || (blocklens == NULL && blocklen < 0))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COUNT,
                          "count %d, blocklength %d", count, blocklen);
  if (count > 0 && ((w.how == AT_BYTES && w.bytes == NULL) ||
                    (w.how == AT_EXTENTS && w.extents == NULL)))
    return bad_args(fn, "the displacements are NULL");
  rc = part_get(fn, oldtype, &p);
  if (rc != MPI_SUCCESS)
    return rc;
  for (int i = 0; i < count && !b.oom; i++) {
    int len = blocklens != NULL ? blocklens[i] : blocklen;
    ptrdiff_t at = 0, ext = (ptrdiff_t)p.extent, stride;
    bool ok = true;
    if (len < 0) {
      rc = crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COUNT,
                          "blocklength[%d] = %d", i, len);
      break;
    }
    switch (w.how) {
    case STRIDE_BYTES:
      ok = affine(i, w.stride, 0, &at);
      break;
    case STRIDE_EXTENTS:
      ok = affine(w.stride, ext, 0, &stride) && affine(i, stride, 0, &at);
      break;
    case AT_BYTES:
      at = w.bytes[i];
      break;
    default:
      ok = affine(w.extents[i], ext, 0, &at);
      break;
    }
    if (!ok) {
      rc = crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "block %d's displacement overflows", i);
      break;
    }
    add_run(&b, &p, at, (size_t)len);
  }
  part_release(&p);
  if (rc != MPI_SUCCESS) {
    free(b.b);
    return rc;
  }
  bool sticky = natural_bounds(&b, &lb, &extent);
  return finish(fn, &b, lb, extent, sticky, newtype);
}

int MPI_Type_vector(int count, int blocklength, int stride,
                    MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return blocks_of("MPI_Type_vector", count, NULL, blocklength,
                   (where){.how = STRIDE_EXTENTS, .stride = stride}, oldtype,
                   newtype);
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
                            MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return blocks_of("MPI_Type_create_hvector", count, NULL, blocklength,
                   (where){.how = STRIDE_BYTES, .stride = stride}, oldtype,
                   newtype);
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype *newtype) {
  if (count > 0 && array_of_blocklengths == NULL)
    return bad_args("MPI_Type_indexed", "array_of_blocklengths is NULL");
  return blocks_of(
      "MPI_Type_indexed", count, array_of_blocklengths, 0,
      (where){.how = AT_EXTENTS, .extents = array_of_displacements}, oldtype,
      newtype);
}

int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[],
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  if (count > 0 && array_of_blocklengths == NULL)
    return bad_args("MPI_Type_create_hindexed",
                    "array_of_blocklengths is NULL");
  return blocks_of("MPI_Type_create_hindexed", count, array_of_blocklengths, 0,
                   (where){.how = AT_BYTES, .bytes = array_of_displacements},
                   oldtype, newtype);
}

int MPI_Type_create_indexed_block(int count, int blocklength,
                                  const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return blocks_of(
      "MPI_Type_create_indexed_block", count, NULL, blocklength,
      (where){.how = AT_EXTENTS, .extents = array_of_displacements}, oldtype,
      newtype);
}

int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype,
                                   MPI_Datatype *newtype) {
  return blocks_of("MPI_Type_create_hindexed_block", count, NULL, blocklength,
                   (where){.how = AT_BYTES, .bytes = array_of_displacements},
                   oldtype, newtype);
}

/* A struct's extent is padded to a multiple of its most aligned member's
 * alignment, as C pads a struct (and as Open MPI and MPICH do), so that
 * an array of the C struct is an array of the type. */
int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[],
                           MPI_Datatype *newtype) {
  static const char fn[] = "MPI_Type_create_struct";
  builder b = {0};
  ptrdiff_t lb;
  size_t extent;
  if (newtype == NULL)
    return bad_args(fn, "newtype is NULL");
  if (count < 0)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COUNT, "count %d", count);
  if (count > 0 && (array_of_blocklengths == NULL ||
                    array_of_displacements == NULL || array_of_types == NULL))
    return bad_args(fn, "an array is NULL");
  for (int i = 0; i < count && !b.oom; i++) {
    part p;
    int rc;
    if (array_of_blocklengths[i] < 0) {
      free(b.b);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COUNT,
                            "array_of_blocklengths[%d] = %d", i,
                            array_of_blocklengths[i]);
    }
    if ((rc = part_get(fn, array_of_types[i], &p)) != MPI_SUCCESS) {
      free(b.b);
      return rc;
    }
    add_run(&b, &p, array_of_displacements[i],
            (size_t)array_of_blocklengths[i]);
    part_release(&p);
  }
  /* Padded only where no member's bounds were set (MPI 3.1, 4.1.6). */
  bool sticky = natural_bounds(&b, &lb, &extent);
  if (!sticky && b.align > 1 && extent % b.align != 0)
    extent += b.align - extent % b.align;
  return finish(fn, &b, lb, extent, sticky, newtype);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype *newtype) {
  static const char fn[] = "MPI_Type_create_resized";
  builder b = {0};
  part p;
  int rc;
  if (newtype == NULL)
    return bad_args(fn, "newtype is NULL");
  if (extent < 0)
    return bad_args(fn, "a negative extent");
  if ((rc = part_get(fn, oldtype, &p)) != MPI_SUCCESS)
    return rc;
  add_run(&b, &p, 0, 1);
  part_release(&p);
  return finish(fn, &b, lb, (size_t)extent, true, newtype);
}

/* The subarray subsizes at starts of an array of sizes (row-major with
 * MPI_ORDER_C, column-major with MPI_ORDER_FORTRAN): its extent is the
 * whole array's, from 0. */
int MPI_Type_create_subarray(int ndims, const int array_of_sizes[],
                             const int array_of_subsizes[],
                             const int array_of_starts[], int order,
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  static const char fn[] = "MPI_Type_create_subarray";
  builder b = {0};
  part p;
  size_t total = 1, rows = 1;
  int rc, last;
  if (newtype == NULL || ndims <= 0 || array_of_sizes == NULL ||
      array_of_subsizes == NULL || array_of_starts == NULL ||
      (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN))
    return bad_args(fn, "ndims, an array, order or newtype");
  for (int d = 0; d < ndims; d++) {
    if (array_of_sizes[d] <= 0 || array_of_subsizes[d] < 0 ||
        array_of_starts[d] < 0 ||
        array_of_subsizes[d] > array_of_sizes[d] - array_of_starts[d])
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                            "dimension %d: size %d, subsize %d, start %d", d,
                            array_of_sizes[d], array_of_subsizes[d],
                            array_of_starts[d]);
    if (__builtin_mul_overflow(total, (size_t)array_of_sizes[d], &total))
      total = SIZE_MAX;
  }
  if ((rc = part_get(fn, oldtype, &p)) != MPI_SUCCESS)
    return rc;
  /* Every element's displacement fits (the whole array's extent does). */
  if (total > (size_t)PTRDIFF_MAX / (p.extent > 0 ? p.extent : 1)) {
    part_release(&p);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "the array's extent overflows");
  }
  /* The dimension whose elements are adjacent in memory, and the others
   * from the slowest: a run of subsizes[last] elements per combination of
   * the others' indices. */
  last = order == MPI_ORDER_C ? ndims - 1 : 0;
  for (int d = 0; d < ndims; d++)
    if (d != last)
      rows *= (size_t)array_of_subsizes[d];
  for (size_t r = 0; r < rows && array_of_subsizes[last] > 0 && !b.oom; r++) {
    /* r's index in each other dimension, the fastest of them first. */
    size_t rest = r, at = 0, stride = 1;
    for (int k = 0; k < ndims; k++) {
      int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
      size_t idx = (size_t)array_of_starts[d];
      if (d != last) {
        idx += rest % (size_t)array_of_subsizes[d];
        rest /= (size_t)array_of_subsizes[d];
      }
      at += idx * stride;
      stride *= (size_t)array_of_sizes[d];
    }
    add_run(&b, &p, (ptrdiff_t)(at * p.extent),
            (size_t)array_of_subsizes[last]);
  }
  part_release(&p);
  /* Bounds set, as MPI defines the subarray (a resized type). */
  return finish(fn, &b, 0, total * p.extent, true, newtype);
}

/* --- packing --- */

/* count elements of layout l at buf into out, densely. */
static void pack(const crnet_mpi_layout *l, const void *buf, size_t count,
                 void *out) {
  uint8_t *o = out;
  for (size_t e = 0; e < count; e++) {
    const uint8_t *el = (const uint8_t *)buf + (ptrdiff_t)(e * l->extent);
    for (size_t k = 0; k < l->nblocks; k++) {
      memcpy(o, el + l->blocks[k].off, l->blocks[k].len);
      o += l->blocks[k].len;
    }
  }
}

/* The first `bytes` bytes of in (packed elements of l) into count elements
 * at buf; a last element received in part gets its first bytes. */
static void unpack(const crnet_mpi_layout *l, const void *in, size_t bytes,
                   void *buf, size_t count) {
  const uint8_t *i = in;
  for (size_t e = 0; e < count && bytes > 0; e++) {
    uint8_t *el = (uint8_t *)buf + (ptrdiff_t)(e * l->extent);
    for (size_t k = 0; k < l->nblocks && bytes > 0; k++) {
      size_t n = l->blocks[k].len < bytes ? l->blocks[k].len : bytes;
      memcpy(el + l->blocks[k].off, i, n);
      i += n;
      bytes -= n;
    }
  }
}

/* dt's layout, held, for a call's buffer of count elements: 0 (NULL for
 * a dense type) or the error raised. *bytes: their packed size. */
static int layout_for(MPI_Comm comm, const char *fn, MPI_Datatype dt,
                      const void *buf, size_t count, crnet_mpi_layout **l,
                      size_t *bytes) {
  crnet_mpi_type t;
  if (!crnet_mpi_type_hold(dt, true, &t, l))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed", dt);
  if (*l != NULL && (*l)->size != 0 && count > SIZE_MAX / (*l)->size) {
    crnet_mpi_layout_release(*l);
    return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "%zu elements", count);
  }
  /* crnet refuses a NULL buffer itself, but would be handed the stage's. */
  if (*l != NULL && buf == NULL && count > 0) {
    crnet_mpi_layout_release(*l);
    return crnet_mpi_fail(comm, fn, MPI_ERR_BUFFER, "the buffer is NULL");
  }
  *bytes = *l != NULL ? count * (*l)->size : 0;
  return MPI_SUCCESS;
}

int crnet_mpi_stage_send(MPI_Comm comm, const char *fn, crnet_mpi_stage *s,
                         MPI_Datatype dt, const void *buf, size_t count,
                         const void **use) {
  crnet_mpi_layout *l;
  size_t bytes;
  int rc = layout_for(comm, fn, dt, buf, count, &l, &bytes);
  *use = buf;
  if (rc != MPI_SUCCESS || l == NULL)
    return rc;
  s->send = malloc(bytes > 0 ? bytes : 1);
  if (s->send == NULL) {
    crnet_mpi_layout_release(l);
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM,
                          "%zu bytes to pack the message into", bytes);
  }
  pack(l, buf, count, s->send);
  crnet_mpi_layout_release(l);
  *use = s->send;
  return MPI_SUCCESS;
}

int crnet_mpi_stage_recv(MPI_Comm comm, const char *fn, crnet_mpi_stage *s,
                         MPI_Datatype dt, void *buf, size_t count, bool fill,
                         void **use) {
  crnet_mpi_layout *l;
  size_t bytes;
  int rc = layout_for(comm, fn, dt, buf, count, &l, &bytes);
  *use = buf;
  if (rc != MPI_SUCCESS || l == NULL)
    return rc;
  s->recv = malloc(bytes > 0 ? bytes : 1);
  if (s->recv == NULL) {
    crnet_mpi_layout_release(l);
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM,
                          "%zu bytes to receive the packed data in", bytes);
  }
  if (fill)
    pack(l, buf, count, s->recv);
  s->recv_to = buf;
  s->recv_count = count;
  s->recv_layout = l;
  *use = s->recv;
  return MPI_SUCCESS;
}

void crnet_mpi_stage_end(crnet_mpi_stage *s, bool ok, size_t bytes) {
  if (s->recv != NULL && ok) {
    size_t all = s->recv_count * s->recv_layout->size;
    unpack(s->recv_layout, s->recv, bytes < all ? bytes : all, s->recv_to,
           s->recv_count);
  }
  free(s->send);
  free(s->recv);
  crnet_mpi_layout_release(s->recv_layout);
  memset(s, 0, sizeof *s);
}

/* --- MPI_Pack, MPI_Unpack --- */

/* The packed bytes of count elements of dt: its data (a pair type's
 * padding included, as crnet moves it). */
static int packed_size(MPI_Comm comm, const char *fn, int count,
                       MPI_Datatype dt, crnet_mpi_layout **l, size_t *bytes) {
  crnet_mpi_type t;
  if (count < 0)
    return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "count %d", count);
  if (!crnet_mpi_type_hold(dt, true, &t, l))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed", dt);
  size_t esize = t.n * crnet_datatype_size(t.base);
  if (esize != 0 && (size_t)count > SIZE_MAX / esize) {
    crnet_mpi_layout_release(*l);
    return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "%d elements", count);
  }
  *bytes = (size_t)count * esize;
  return MPI_SUCCESS;
}

/* MPI_Pack's and MPI_Unpack's checks: the comm, the buffers (the packed
 * one, and the typed one unless count is 0), and the count elements of dt
 * packed from *position within the packed buffer's size bytes. 0 with dt's
 * layout held (NULL if dense) and their bytes, or the error raised. */
static int pack_window(MPI_Comm comm, const char *fn, const void *packed,
                       const void *typed, int count, MPI_Datatype dt, int size,
                       const int *position, crnet_mpi_layout **l,
                       size_t *bytes) {
  int rc = crnet_mpi_check_comm(&comm, fn);
  *l = NULL;
  if (rc == MPI_SUCCESS &&
      (position == NULL || packed == NULL || (typed == NULL && count > 0)))
    rc = crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "a buffer or position is NULL");
  if (rc == MPI_SUCCESS)
    rc = packed_size(comm, fn, count, dt, l, bytes);
  if (rc != MPI_SUCCESS)
    return rc;
  if (*position < 0 || size < 0 || *position > size ||
      *bytes > (size_t)(size - *position)) {
    crnet_mpi_layout_release(*l);
    *l = NULL;
    return crnet_mpi_fail(comm, fn, MPI_ERR_TRUNCATE,
                          "%zu bytes from position %d of %d", *bytes, *position,
                          size);
  }
  return MPI_SUCCESS;
}

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm,
                  int *size) {
  crnet_mpi_layout *l = NULL;
  size_t bytes = 0;
  int rc = crnet_mpi_check_comm(&comm, "MPI_Pack_size");
  if (rc == MPI_SUCCESS && size == NULL)
    rc = crnet_mpi_fail(comm, "MPI_Pack_size", MPI_ERR_ARG, "size is NULL");
  if (rc == MPI_SUCCESS)
    rc = packed_size(comm, "MPI_Pack_size", incount, datatype, &l, &bytes);
  if (rc != MPI_SUCCESS)
    return rc;
  crnet_mpi_layout_release(l);
  if (bytes > INT_MAX)
    return crnet_mpi_fail(comm, "MPI_Pack_size", MPI_ERR_COUNT,
                          "%zu bytes do not fit an int", bytes);
  *size = (int)bytes;
  return MPI_SUCCESS;
}

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype,
             void *outbuf, int outsize, int *position, MPI_Comm comm) {
  crnet_mpi_layout *l;
  size_t bytes = 0;
  int rc = pack_window(comm, "MPI_Pack", outbuf, inbuf, incount, datatype,
                       outsize, position, &l, &bytes);
  if (rc != MPI_SUCCESS)
    return rc;
  if (l != NULL)
    pack(l, inbuf, (size_t)incount, (uint8_t *)outbuf + *position);
  else if (bytes > 0)
    memcpy((uint8_t *)outbuf + *position, inbuf, bytes);
  crnet_mpi_layout_release(l);
  *position += (int)bytes;
  return MPI_SUCCESS;
}

int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf,
               int outcount, MPI_Datatype datatype, MPI_Comm comm) {
  crnet_mpi_layout *l;
  size_t bytes = 0;
  int rc = pack_window(comm, "MPI_Unpack", inbuf, outbuf, outcount, datatype,
                       insize, position, &l, &bytes);
  if (rc != MPI_SUCCESS)
    return rc;
  if (l != NULL)
    unpack(l, (const uint8_t *)inbuf + *position, bytes, outbuf,
           (size_t)outcount);
  else if (bytes > 0)
    memcpy(outbuf, (const uint8_t *)inbuf + *position, bytes);
  crnet_mpi_layout_release(l);
  *position += (int)bytes;
  return MPI_SUCCESS;
}
