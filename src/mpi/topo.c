/* Cartesian topologies: MPI_Dims_create, MPI_Cart_create and the calls that
 * answer from a communicator's grid.
 *
 * A grid is the communicator's own (struct crnet_mpi_cart, kept by the comm
 * and copied by MPI_Comm_dup): its dimensions and periodicity. Ranks are
 * numbered in row-major order (the last dimension varies fastest), as MPI
 * says, and reorder is not done (MPI allows that): grid rank r is rank r of
 * the old communicator. MPI_Cart_create is a split (ranks past the grid's
 * size get MPI_COMM_NULL), after which the grid's ranks check in one
 * allreduce that they all passed the same grid; MPI_Cart_sub is a split by
 * the coordinates it drops.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

struct crnet_mpi_cart {
  int ndims;
  int v[]; /* dims[ndims], then periods[ndims] (0 or 1) */
};

#define DIMS(g) ((g)->v)
#define PERIODS(g) ((g)->v + (g)->ndims)

static struct crnet_mpi_cart *cart_new(int ndims, const int *dims,
                                       const int *periods) {
  struct crnet_mpi_cart *g =
      malloc(sizeof *g + sizeof(int) * 2 * (size_t)(ndims > 0 ? ndims : 1));
  if (g == NULL)
    return NULL;
  g->ndims = ndims;
  for (int d = 0; d < ndims; d++) {
    DIMS(g)[d] = dims[d];
    PERIODS(g)[d] = periods[d] != 0;
  }
  return g;
}

struct crnet_mpi_cart *crnet_mpi_cart_copy(const struct crnet_mpi_cart *g) {
  return g != NULL ? cart_new(g->ndims, DIMS(g), PERIODS(g)) : NULL;
}

/* --- MPI_Dims_create --- */

/* The search for k factors of a number, non-increasing, with the smallest
 * spread. An int has at most 1600 divisors. */
typedef struct dims_search {
  int k;
  int *cur, *best;
  long long best_spread; /* -1: none found yet */
  int *divs, ndivs;      /* of the number, largest first */
} dims_search;

static int descending(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Factor `depth` on of rest, each at most cap. */
static void search(dims_search *sr, int depth, int rest, int cap) {
  int left = sr->k - depth;
  if (left == 1) {
    if (rest <= cap) {
      sr->cur[depth] = rest;
      long long spread = (long long)sr->cur[0] - rest;
      if (sr->best_spread < 0 || spread < sr->best_spread) {
        sr->best_spread = spread;
        memcpy(sr->best, sr->cur, sizeof *sr->cur * (size_t)sr->k);
      }
    }
    return;
  }
  for (int i = 0; i < sr->ndivs; i++) {
    int f = sr->divs[i];
    if (f > cap || rest % f != 0)
      continue;
    /* The rest must fit in left - 1 factors of at most f. */
    long long room = 1;
    for (int m = 1; m < left && room < rest; m++)
      room *= f;
    if ((long long)f * room < rest)
      break; /* smaller f only fit less */
    if (depth > 0 && sr->best_spread >= 0 &&
        (long long)sr->cur[0] - 1 >= sr->best_spread + f)
      continue; /* cannot beat the best: its smallest would be < f */
    sr->cur[depth] = f;
    search(sr, depth + 1, rest / f, f);
  }
}

int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  static const char fn[] = "MPI_Dims_create";
  int rest = nnodes, nfree = 0;
  if (nnodes <= 0 || ndims < 0 || (ndims > 0 && dims == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "nnodes %d, ndims %d, dims %p", nnodes, ndims,
                          (void *)dims);
  for (int d = 0; d < ndims; d++) {
    if (dims[d] < 0)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_DIMS, "dims[%d] = %d", d,
                            dims[d]);
    if (dims[d] == 0)
      nfree++;
    else if (rest % dims[d] != 0)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_DIMS,
                            "%d nodes do not divide by the dimensions given",
                            nnodes);
    else
      rest /= dims[d];
  }
  if (nfree == 0) {
    if (rest != 1)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_DIMS,
                            "the dimensions given make %d of %d nodes",
                            nnodes / rest, nnodes);
    return MPI_SUCCESS;
  }
  /* The free dimensions as close to each other as they can be (the
   * smallest difference between the largest and the smallest), in
   * non-increasing order: a search over the divisors of what is left. */
  dims_search sr = {.k = nfree, .best_spread = -1};
  sr.cur = malloc(sizeof *sr.cur * 2 * (size_t)nfree);
  sr.divs = malloc(sizeof *sr.divs * 2048);
  if (sr.cur == NULL || sr.divs == NULL) {
    free(sr.cur);
    free(sr.divs);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "%d dims", nfree);
  }
  sr.best = sr.cur + nfree;
  for (long long q = 1; q * q <= rest; q++) /* divisors, largest first */
    if (rest % q == 0) {
      sr.divs[sr.ndivs++] = (int)q;
      if (q * q != rest)
        sr.divs[sr.ndivs++] = (int)(rest / q);
    }
  qsort(sr.divs, (size_t)sr.ndivs, sizeof *sr.divs, descending);
  search(&sr, 0, rest, rest);
  for (int d = 0, k = 0; d < ndims; d++)
    if (dims[d] == 0)
      dims[d] = sr.best[k++];
  free(sr.cur);
  free(sr.divs);
  return MPI_SUCCESS;
}

/* --- the grid of a communicator --- */

/* comm's grid, or NULL with MPI_ERR_TOPOLOGY raised in *rc. */
static const struct crnet_mpi_cart *grid_of(MPI_Comm *comm, const char *fn,
                                            int *rc) {
  *rc = crnet_mpi_check_comm(comm, fn);
  if (*rc != MPI_SUCCESS)
    return NULL;
  if ((*comm)->cart == NULL)
    *rc = crnet_mpi_fail(*comm, fn, MPI_ERR_TOPOLOGY,
                         "the communicator has no Cartesian topology");
  return (*comm)->cart;
}

/* The coordinates of grid rank r, row-major. */
static void coords_of(const struct crnet_mpi_cart *g, int r, int *coords,
                      int n) {
  for (int d = g->ndims - 1; d >= 0; d--) {
    if (d < n)
      coords[d] = r % DIMS(g)[d];
    r /= DIMS(g)[d];
  }
}

/* The grid rank at coords (periodic dimensions wrap): 0 with *rank, or -1
 * if a coordinate is outside a non-periodic dimension. */
static int rank_at(const struct crnet_mpi_cart *g, const int *coords,
                   int *rank) {
  int r = 0;
  for (int d = 0; d < g->ndims; d++) {
    int c = coords[d], n = DIMS(g)[d];
    if (PERIODS(g)[d])
      c = ((c % n) + n) % n;
    else if (c < 0 || c >= n)
      return -1;
    r = r * n + c;
  }
  *rank = r;
  return 0;
}

/* Two 31-bit hashes (FNV-1a, two bases) of the grid's dimensions and
 * periods, for ranks to compare grids of any ndims in a fixed-size call. */
static void grid_hash(int ndims, const int *dims, const int *periods,
                      int32_t out[2]) {
  uint32_t h[2] = {2166136261u, 3323198485u};
  for (int k = 0; k < 2; k++) {
    for (int d = 0; d < ndims; d++) {
      uint32_t x[2] = {(uint32_t)dims[d], periods[d] != 0};
      for (int y = 0; y < 2; y++)
        for (int b = 0; b < 4; b++) {
          h[k] ^= (x[y] >> (8 * b)) & 0xff;
          h[k] *= 16777619u;
        }
    }
    out[k] = (int32_t)(h[k] & 0x7fffffff);
  }
}

/* The ranks of comm_old first agree, in one allreduce on it, that every
 * one passed good arguments and the same grid; only then is the grid's
 * split made. A rank with bad arguments, or ranks that disagree, make
 * every rank fail alike: nobody waits, nobody gets a grid with ranks
 * missing. */
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[],
                    const int periods[], int reorder, MPI_Comm *comm_cart) {
  static const char fn[] = "MPI_Cart_create";
  MPI_Comm c = MPI_COMM_NULL;
  long long size = 1;
  int rank, p, bad = MPI_SUCCESS, rc;
  (void)reorder; /* ranks keep their order: MPI allows it */
  rc = crnet_mpi_check_comm(&comm_old, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  rank = crnet_comm_rank(comm_old->c);
  p = crnet_comm_size(comm_old->c);
  if (comm_cart == NULL || ndims < 0 ||
      (ndims > 0 && (dims == NULL || periods == NULL)))
    bad = MPI_ERR_ARG;
  for (int d = 0; bad == MPI_SUCCESS && d < ndims; d++)
    if (dims[d] <= 0 || (size *= dims[d]) > p)
      bad = MPI_ERR_DIMS;
  /* (bad, ndims, size, hashes) and their negations: the maximum of both
   * gives each one's maximum and minimum over the ranks. */
  int32_t v[10] = {bad, bad == MPI_SUCCESS ? ndims : -1,
                   bad == MPI_SUCCESS ? (int32_t)size : -1, 0, 0};
  if (bad == MPI_SUCCESS)
    grid_hash(ndims, dims, periods, &v[3]);
  for (int k = 0; k < 5; k++)
    v[5 + k] = -v[k];
  rc = crnet_allreduce(comm_old->c, CRNET_IN_PLACE, v, 10, CRNET_INT32,
                       CRNET_MAX);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm_old, fn, rc);
  if (bad != MPI_SUCCESS)
    return crnet_mpi_fail(comm_old, fn, bad,
                          bad == MPI_ERR_DIMS
                              ? "the dimensions must be positive, their "
                                "product at most the communicator's size"
                              : "ndims, dims, periods or comm_cart");
  if (v[0] != MPI_SUCCESS)
    return crnet_mpi_fail(comm_old, fn, v[0],
                          "another rank passed bad arguments to this call");
  for (int k = 1; k < 5; k++)
    if (v[k] != -v[5 + k])
      return crnet_mpi_fail(comm_old, fn, MPI_ERR_ARG,
                            "the ranks passed different grids");
  struct crnet_mpi_cart *g = cart_new(ndims, dims, periods);
  rc = MPI_Comm_split(comm_old, rank < size ? 0 : MPI_UNDEFINED, rank, &c);
  if (rc != MPI_SUCCESS) {
    free(g);
    return rc;
  }
  if (c != MPI_COMM_NULL && g == NULL) {
    /* Out of memory here alone: the others have their grid. */
    MPI_Comm_free(&c);
    return crnet_mpi_fail(comm_old, fn, MPI_ERR_NO_MEM, "the grid");
  }
  if (c == MPI_COMM_NULL)
    free(g);
  else
    c->cart = g;
  *comm_cart = c;
  return MPI_SUCCESS;
}

int MPI_Topo_test(MPI_Comm comm, int *status) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Topo_test");
  if (rc != MPI_SUCCESS)
    return rc;
  if (status == NULL)
    return crnet_mpi_fail(comm, "MPI_Topo_test", MPI_ERR_ARG, "status is NULL");
  *status = comm->cart != NULL ? MPI_CART : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims) {
  int rc;
  const struct crnet_mpi_cart *g = grid_of(&comm, "MPI_Cartdim_get", &rc);
  if (g == NULL)
    return rc;
  if (ndims == NULL)
    return crnet_mpi_fail(comm, "MPI_Cartdim_get", MPI_ERR_ARG,
                          "ndims is NULL");
  *ndims = g->ndims;
  return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[],
                 int coords[]) {
  int rc;
  const struct crnet_mpi_cart *g = grid_of(&comm, "MPI_Cart_get", &rc);
  if (g == NULL)
    return rc;
  if (maxdims < 0 ||
      (maxdims > 0 && (dims == NULL || periods == NULL || coords == NULL)))
    return crnet_mpi_fail(comm, "MPI_Cart_get", MPI_ERR_ARG,
                          "maxdims %d or a NULL array", maxdims);
  for (int d = 0; d < g->ndims && d < maxdims; d++) {
    dims[d] = DIMS(g)[d];
    periods[d] = PERIODS(g)[d];
  }
  coords_of(g, crnet_comm_rank(comm->c), coords, maxdims);
  return MPI_SUCCESS;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank) {
  int rc;
  const struct crnet_mpi_cart *g = grid_of(&comm, "MPI_Cart_rank", &rc);
  if (g == NULL)
    return rc;
  if (rank == NULL || (g->ndims > 0 && coords == NULL))
    return crnet_mpi_fail(comm, "MPI_Cart_rank", MPI_ERR_ARG,
                          "coords or rank is NULL");
  if (rank_at(g, coords, rank) != 0)
    return crnet_mpi_fail(comm, "MPI_Cart_rank", MPI_ERR_ARG,
                          "coordinates outside a non-periodic dimension");
  return MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  int rc;
  const struct crnet_mpi_cart *g = grid_of(&comm, "MPI_Cart_coords", &rc);
  if (g == NULL)
    return rc;
  if (rank < 0 || rank >= crnet_comm_size(comm->c))
    return crnet_mpi_fail(comm, "MPI_Cart_coords", MPI_ERR_RANK,
                          "rank %d of %d", rank, crnet_comm_size(comm->c));
  if (maxdims < 0 || (maxdims > 0 && coords == NULL))
    return crnet_mpi_fail(comm, "MPI_Cart_coords", MPI_ERR_ARG,
                          "maxdims %d or coords NULL", maxdims);
  coords_of(g, rank, coords, maxdims);
  return MPI_SUCCESS;
}

/* The neighbours disp steps down and up dimension `direction`:
 * MPI_PROC_NULL past the edge of a non-periodic one. */
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source,
                   int *rank_dest) {
  int rc, *c;
  const struct crnet_mpi_cart *g = grid_of(&comm, "MPI_Cart_shift", &rc);
  if (g == NULL)
    return rc;
  if (direction < 0 || direction >= g->ndims || rank_source == NULL ||
      rank_dest == NULL)
    return crnet_mpi_fail(comm, "MPI_Cart_shift", MPI_ERR_ARG,
                          "direction %d of %d dimensions, or a NULL rank",
                          direction, g->ndims);
  c = malloc(sizeof *c * (size_t)g->ndims);
  if (c == NULL)
    return crnet_mpi_fail(comm, "MPI_Cart_shift", MPI_ERR_NO_MEM, "coords");
  coords_of(g, crnet_comm_rank(comm->c), c, g->ndims);
  /* In long long: a displacement near INT_MAX must not overflow. */
  long long here = c[direction], n = DIMS(g)[direction];
  for (int k = 0; k < 2; k++) {
    long long to = here + (k == 0 ? -(long long)disp : (long long)disp);
    int *out = k == 0 ? rank_source : rank_dest;
    if (PERIODS(g)[direction])
      to = ((to % n) + n) % n;
    if (to < 0 || to >= n) {
      *out = MPI_PROC_NULL;
      continue;
    }
    c[direction] = (int)to;
    if (rank_at(g, c, out) != 0)
      *out = MPI_PROC_NULL;
  }
  free(c);
  return MPI_SUCCESS;
}

/* The grids of the dimensions kept: a split whose color is this rank's
 * place among the dimensions dropped, and key its place in those kept. */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
  static const char fn[] = "MPI_Cart_sub";
  int rc, color = 0, key = 0, kept = 0, bad = MPI_SUCCESS;
  MPI_Comm c = MPI_COMM_NULL;
  const struct crnet_mpi_cart *g = grid_of(&comm, fn, &rc);
  if (g == NULL)
    return rc; /* no grid: no rank of this comm can make the split */
  int *coords = malloc(sizeof *coords * 3 * (size_t)(g->ndims + 1));
  if (newcomm == NULL || (g->ndims > 0 && remain_dims == NULL))
    bad = MPI_ERR_ARG;
  else if (coords == NULL)
    bad = MPI_ERR_NO_MEM;
  int *dims = coords != NULL ? coords + g->ndims + 1 : NULL;
  int *periods = dims != NULL ? dims + g->ndims + 1 : NULL;
  if (bad == MPI_SUCCESS) {
    coords_of(g, crnet_comm_rank(comm->c), coords, g->ndims);
    for (int d = 0; d < g->ndims; d++)
      if (remain_dims[d]) {
        key = key * DIMS(g)[d] + coords[d];
        dims[kept] = DIMS(g)[d];
        periods[kept++] = PERIODS(g)[d];
      } else {
        color = color * DIMS(g)[d] + coords[d];
      }
  }
  /* A rank whose arguments are wrong still takes part in the split, so
   * that the others do not wait for it, and fails. */
  rc =
      MPI_Comm_split(comm, bad == MPI_SUCCESS ? color : MPI_UNDEFINED, key, &c);
  if (rc == MPI_SUCCESS && bad != MPI_SUCCESS)
    rc = crnet_mpi_fail(
        comm, fn, bad, "%s",
        bad == MPI_ERR_NO_MEM ? "coords" : "remain_dims or newcomm is NULL");
  if (rc == MPI_SUCCESS) {
    c->cart = cart_new(kept, dims, periods);
    if (c->cart == NULL) {
      MPI_Comm_free(&c);
      rc = crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "the grid");
    }
  }
  free(coords);
  if (rc == MPI_SUCCESS)
    *newcomm = c;
  return rc;
}
