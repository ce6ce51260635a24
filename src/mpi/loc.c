/* MPI_MINLOC and MPI_MAXLOC.
 *
 * They reduce pairs of a value and an int index (MPI_DOUBLE_INT is
 * struct { double v; int i; }): per position, the least (MINLOC) or
 * greatest (MAXLOC) value, and the smallest index among the pairs that
 * hold it. crnet reduces typed elements and splits a vector between any
 * two of them, so a pair cannot be one element of a crnet reduction.
 * Two reductions give MPI's result exactly instead:
 *   1. the values, with crnet's MIN or MAX, to every rank;
 *   2. each rank proposes its index where its value equals the result and
 *      INT_MAX elsewhere; the indices are reduced with MIN.
 * The first is an allreduce on every call (each rank needs the result to
 * propose); the second is an allreduce, a reduce to the root or a
 * reduce-scatter, as the MPI call is. Both carry crnet's checks (a rank
 * that calls with another count or operator fails both as a mismatch).
 * The nonblocking forms and the prefix reductions are refused (the second
 * step of a scan would need every later rank's prefix); crnet_mpi_op_get
 * says so.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

_Static_assert(sizeof(int) == 4, "MPI's pair index is a 32-bit int");

typedef struct layout {
  crnet_datatype value; /* what crnet reduces in step 1 */
  size_t size;          /* of a pair, padding included */
  size_t index_at;      /* offset of the int index */
} layout;

#define PAIR_LAYOUT(vtype, ctype)                                              \
  (layout) {                                                                   \
    ctype, sizeof(struct {                                                     \
      vtype v;                                                                 \
      int i;                                                                   \
    }),                                                                        \
        offsetof(                                                              \
            struct {                                                           \
              vtype v;                                                         \
              int i;                                                           \
            },                                                                 \
            i)                                                                 \
  }
#define SIGNED_OF(size)                                                        \
  ((size) == 2 ? CRNET_INT16 : (size) == 4 ? CRNET_INT32 : CRNET_INT64)

static bool layout_of(MPI_Datatype dt, layout *l) {
  switch (dt) {
  case MPI_FLOAT_INT:
    *l = PAIR_LAYOUT(float, CRNET_FLOAT);
    return true;
  case MPI_DOUBLE_INT:
    *l = PAIR_LAYOUT(double, CRNET_DOUBLE);
    return true;
  case MPI_LONG_INT:
    *l = PAIR_LAYOUT(long, SIGNED_OF(sizeof(long)));
    return true;
  case MPI_2INT:
    *l = PAIR_LAYOUT(int, SIGNED_OF(sizeof(int)));
    return true;
  case MPI_SHORT_INT:
    *l = PAIR_LAYOUT(short, SIGNED_OF(sizeof(short)));
    return true;
  default:
    return false;
  }
}

/* Whether value a (of pair `in`) equals the reduced value b. */
static bool same_value(crnet_datatype t, const void *a, const void *b) {
  switch (t) {
#define SAME(ct, type)                                                         \
  case ct: {                                                                   \
    type x, y;                                                                 \
    memcpy(&x, a, sizeof x);                                                   \
    memcpy(&y, b, sizeof y);                                                   \
    return x == y;                                                             \
  }
    SAME(CRNET_FLOAT, float)
    SAME(CRNET_DOUBLE, double)
    SAME(CRNET_INT16, int16_t)
    SAME(CRNET_INT32, int32_t)
    SAME(CRNET_INT64, int64_t)
#undef SAME
  default:
    return false;
  }
}

int crnet_mpi_loc(MPI_Comm comm, const char *fn, const void *sendbuf,
                  void *recvbuf, int count, const int *counts, MPI_Datatype dt,
                  MPI_Op op, int root) {
  crnet_comm *c = comm->c;
  int p = crnet_comm_size(c), me = crnet_comm_rank(c), rc = 0;
  size_t n = 0, first = 0, mine, vsize;
  size_t *scatter = NULL; /* crnet's recvcounts of a reduce-scatter */
  const uint8_t *in;
  uint8_t *vals = NULL;
  int32_t *idx = NULL, *best = NULL;
  layout l;
  if (!layout_of(dt, &l))
    return crnet_mpi_fail(comm, fn, MPI_ERR_OP,
                          "MPI_MINLOC and MPI_MAXLOC take the predefined pair "
                          "types (MPI_2INT, MPI_DOUBLE_INT, ...) only, not "
                          "datatype %d",
                          dt);
  if (counts != NULL) { /* reduce-scatter */
    scatter = malloc(sizeof *scatter * (size_t)p);
    if (scatter == NULL)
      return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "recvcounts");
    for (int r = 0; r < p; r++) {
      if (counts[r] < 0) {
        free(scatter);
        return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "recvcounts[%d] = %d", r,
                              counts[r]);
      }
      scatter[r] = (size_t)counts[r];
      if (r < me)
        first += scatter[r];
      n += scatter[r];
    }
    mine = scatter[me];
  } else {
    if (count < 0)
      return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "count %d", count);
    n = mine = (size_t)count;
  }
  /* In place: the input is the receive buffer (at the root of a reduce). */
  in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  vsize = crnet_datatype_size(l.value);
  vals = malloc(n * vsize + 1);
  idx = malloc(n * sizeof *idx + 1);
  best = malloc(n * sizeof *best + 1);
  if (vals == NULL || idx == NULL || best == NULL) {
    rc = crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%zu pairs", n);
    goto out;
  }
  if (n > 0 && in == NULL) {
    rc = crnet_mpi_fail(comm, fn, MPI_ERR_BUFFER, "the buffer is NULL");
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    memcpy(vals + i * vsize, in + i * l.size, vsize);
  rc = crnet_allreduce(c, CRNET_IN_PLACE, vals, n, l.value,
                       op == MPI_MINLOC ? CRNET_MIN : CRNET_MAX);
  if (rc != 0) {
    rc = crnet_mpi_from_crnet(comm, fn, rc);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    int32_t k = INT32_MAX;
    if (same_value(l.value, in + i * l.size, vals + i * vsize))
      memcpy(&k, in + i * l.size + l.index_at, sizeof k);
    idx[i] = k;
  }
  if (scatter != NULL)
    rc = crnet_reduce_scatter(c, idx, best, scatter, CRNET_INT32, CRNET_MIN);
  else if (root >= 0)
    rc = crnet_reduce(c, idx, best, n, CRNET_INT32, CRNET_MIN, root);
  else
    rc = crnet_allreduce(c, idx, best, n, CRNET_INT32, CRNET_MIN);
  if (rc != 0) {
    rc = crnet_mpi_from_crnet(comm, fn, rc);
    goto out;
  }
  if (root < 0 || root == me)
    for (size_t i = 0; i < mine; i++) {
      uint8_t *pair = (uint8_t *)recvbuf + i * l.size;
      memcpy(pair, vals + (first + i) * vsize, vsize);
      memcpy(pair + l.index_at, &best[i], sizeof best[i]);
    }
out:
  free(scatter);
  free(vals);
  free(idx);
  free(best);
  return rc;
}
