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
  /* The free dimensions as close to each other as they can be: each prime
   * factor of what is left, the largest first, goes to the smallest of
   * them; then they are given in non-increasing order. */
  int *f = malloc(sizeof *f * (size_t)nfree);
  int primes[32], np = 0;
  if (f == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "%d dims", nfree);
  for (int k = 0; k < nfree; k++)
    f[k] = 1;
  for (int q = 2; rest > 1 && (long)q * q <= rest; q++)
    while (rest % q == 0) {
      primes[np++] = q;
      rest /= q;
    }
  if (rest > 1)
    primes[np++] = rest;
  for (int i = np - 1; i >= 0; i--) {
    int small = 0;
    for (int k = 1; k < nfree; k++)
      if (f[k] < f[small])
        small = k;
    f[small] *= primes[i];
  }
  for (int i = 1; i < nfree; i++) /* insertion sort, largest first */
    for (int k = i; k > 0 && f[k] > f[k - 1]; k--) {
      int t = f[k];
      f[k] = f[k - 1];
      f[k - 1] = t;
    }
  for (int d = 0, k = 0; d < ndims; d++)
    if (dims[d] == 0)
      dims[d] = f[k++];
  free(f);
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
  /* A rank whose arguments are wrong still takes part in the split, so
   * that the others do not wait for it, and fails. */
  rc = MPI_Comm_split(comm_old,
                      bad == MPI_SUCCESS && rank < size ? 0 : MPI_UNDEFINED,
                      rank, &c);
  if (rc != MPI_SUCCESS)
    return rc;
  if (bad != MPI_SUCCESS) {
    if (c != MPI_COMM_NULL)
      MPI_Comm_free(&c);
    return crnet_mpi_fail(comm_old, fn, bad,
                          bad == MPI_ERR_DIMS
                              ? "the dimensions must be positive, their "
                                "product at most the communicator's size"
                              : "ndims, dims, periods or comm_cart");
  }
  if (c == MPI_COMM_NULL) {
    *comm_cart = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  /* Every rank of the grid passed the same grid: the elementwise maximum
   * of (x, -x) is (max, -min), equal where all agree. */
  int n = 1 + 2 * ndims;
  int *v = malloc(sizeof *v * 2 * (size_t)n);
  struct crnet_mpi_cart *g = cart_new(ndims, dims, periods);
  if (v == NULL || g == NULL) {
    free(v);
    free(g);
    MPI_Comm_free(&c);
    return crnet_mpi_fail(comm_old, fn, MPI_ERR_NO_MEM, "the grid");
  }
  v[0] = ndims;
  for (int d = 0; d < ndims; d++) {
    v[1 + d] = dims[d];
    v[1 + ndims + d] = periods[d] != 0;
  }
  for (int k = 0; k < n; k++)
    v[n + k] = -v[k];
  rc = crnet_allreduce(c->c, CRNET_IN_PLACE, v, 2 * (size_t)n, CRNET_INT32,
                       CRNET_MAX);
  bool same = rc == 0;
  for (int k = 0; same && k < n; k++)
    same = v[k] == -v[n + k];
  free(v);
  if (!same) {
    free(g);
    MPI_Comm_free(&c);
    if (rc != 0)
      return crnet_mpi_from_crnet(comm_old, fn, rc);
    return crnet_mpi_fail(comm_old, fn, MPI_ERR_ARG,
                          "the ranks of the grid passed different grids");
  }
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
  int here = c[direction];
  c[direction] = here - disp;
  if (rank_at(g, c, rank_source) != 0)
    *rank_source = MPI_PROC_NULL;
  c[direction] = here + disp;
  if (rank_at(g, c, rank_dest) != 0)
    *rank_dest = MPI_PROC_NULL;
  free(c);
  return MPI_SUCCESS;
}

/* The grids of the dimensions kept: a split whose color is this rank's
 * place among the dimensions dropped, and key its place in those kept. */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
  static const char fn[] = "MPI_Cart_sub";
  int rc, color = 0, key = 0, kept = 0;
  MPI_Comm c = MPI_COMM_NULL;
  const struct crnet_mpi_cart *g = grid_of(&comm, fn, &rc);
  if (g == NULL)
    return rc;
  if (newcomm == NULL || (g->ndims > 0 && remain_dims == NULL))
    return crnet_mpi_fail(comm, fn, MPI_ERR_ARG,
                          "remain_dims or newcomm is NULL");
  int *coords = malloc(sizeof *coords * 3 * (size_t)(g->ndims + 1));
  if (coords == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "coords");
  int *dims = coords + g->ndims + 1, *periods = dims + g->ndims + 1;
  coords_of(g, crnet_comm_rank(comm->c), coords, g->ndims);
  for (int d = 0; d < g->ndims; d++)
    if (remain_dims[d]) {
      key = key * DIMS(g)[d] + coords[d];
      dims[kept] = DIMS(g)[d];
      periods[kept++] = PERIODS(g)[d];
    } else {
      color = color * DIMS(g)[d] + coords[d];
    }
  rc = MPI_Comm_split(comm, color, key, &c);
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
