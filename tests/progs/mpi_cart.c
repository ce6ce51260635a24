/* mpi_cart: crnet-mpi's Cartesian topologies as a stencil program uses
 * them, at any p >= 2.
 *
 *   crlaunch -n P mpi_cart
 *
 * MPI_Dims_create's factorings and errors; a periodic 2-D grid of all
 * ranks with a halo exchange of each rank's block (rows as contiguous runs,
 * columns as a vector type, to the neighbours MPI_Cart_shift names), every
 * halo cell checked against its owner's value; coordinates and ranks both
 * ways; a non-periodic grid's edges (MPI_PROC_NULL); MPI_Cart_sub's rows
 * with an allreduce along each; MPI_Comm_dup keeping the grid; a grid
 * smaller than the communicator (the ranks left out get MPI_COMM_NULL);
 * ranks that pass different grids (every one fails, none waits); the
 * errors of a communicator without a grid. Exits 0 when every check held. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_PROG "mpi_cart"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;

static void dims_create(void) {
  int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, fixed[2] = {0, 3}, one[1] = {0};
  OK(MPI_Dims_create(6, 2, d2));
  EXPECT(d2[0] == 3 && d2[1] == 2, "6 in 2: %d x %d", d2[0], d2[1]);
  OK(MPI_Dims_create(12, 3, d3));
  EXPECT(d3[0] == 3 && d3[1] == 2 && d3[2] == 2, "12 in 3: %d %d %d", d3[0],
         d3[1], d3[2]);
  OK(MPI_Dims_create(12, 2, fixed));
  EXPECT(fixed[0] == 4 && fixed[1] == 3, "12 with 3 fixed: %d", fixed[0]);
  OK(MPI_Dims_create(7, 1, one));
  EXPECT(one[0] == 7, "7 in 1: %d", one[0]);
  int d4[2] = {0, 0};
  OK(MPI_Dims_create(16, 2, d4));
  EXPECT(d4[0] == 4 && d4[1] == 4, "16 in 2: %d x %d", d4[0], d4[1]);
  /* As balanced as can be, not only by prime factors. */
  int d72[2] = {0, 0}, d240[2] = {0, 0};
  OK(MPI_Dims_create(72, 2, d72));
  OK(MPI_Dims_create(240, 2, d240));
  EXPECT(d72[0] == 9 && d72[1] == 8 && d240[0] == 16 && d240[1] == 15,
         "72 in 2: %d x %d; 240 in 2: %d x %d", d72[0], d72[1], d240[0],
         d240[1]);
  int bad[2] = {5, 0};
  EXPECT(error_class(MPI_Dims_create(12, 2, bad)) == MPI_ERR_DIMS &&
             bad[1] == 0,
         "5 does not divide 12");
  int neg[2] = {-1, 0};
  EXPECT(error_class(MPI_Dims_create(4, 2, neg)) == MPI_ERR_DIMS,
         "a negative dimension");
}

/* Each rank's block: BR x BC cells, with a halo of one all round. The cell
 * at global (row, col) holds row * 1000 + col. */
#define BR 3
#define BC 4

static int cell(int grow, int gcol) { return grow * 1000 + gcol; }

static void halo_exchange(void) {
  int dims[2] = {0, 0}, periods[2] = {1, 1}, coords[2], status = -1;
  int up, down, left, right, me, ndims = -1;
  MPI_Comm grid;
  OK(MPI_Dims_create(p, 2, dims));
  OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid));
  EXPECT(grid != MPI_COMM_NULL, "every rank is in a grid of all");
  OK(MPI_Topo_test(grid, &status));
  EXPECT(status == MPI_CART, "topo_test %d", status);
  OK(MPI_Cartdim_get(grid, &ndims));
  EXPECT(ndims == 2, "ndims %d", ndims);
  OK(MPI_Comm_rank(grid, &me));
  EXPECT(me == rank, "the grid reordered rank %d to %d", rank, me);
  int gd[2], gp[2];
  OK(MPI_Cart_get(grid, 2, gd, gp, coords));
  EXPECT(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 1 &&
             coords[0] == rank / dims[1] && coords[1] == rank % dims[1],
         "cart_get: coords %d %d", coords[0], coords[1]);
  int back = -1;
  OK(MPI_Cart_rank(grid, coords, &back));
  EXPECT(back == rank, "cart_rank of my coords %d", back);
  /* Coordinates wrap in periodic dimensions. */
  int far[2] = {coords[0] + dims[0], coords[1] - dims[1]};
  OK(MPI_Cart_rank(grid, far, &back));
  EXPECT(back == rank, "wrapped coords give %d", back);
  OK(MPI_Cart_shift(grid, 0, 1, &up, &down));
  OK(MPI_Cart_shift(grid, 1, 1, &left, &right));

  /* The block with its halo; the halo starts as -1. */
  int a[BR + 2][BC + 2];
  for (int i = 0; i < BR + 2; i++)
    for (int j = 0; j < BC + 2; j++)
      a[i][j] = i >= 1 && i <= BR && j >= 1 && j <= BC
                    ? cell(coords[0] * BR + i - 1, coords[1] * BC + j - 1)
                    : -1;
  MPI_Datatype col;
  OK(MPI_Type_vector(BR, 1, BC + 2, MPI_INT, &col));
  OK(MPI_Type_commit(&col));
  /* Rows: my first row up, the row from below into my bottom halo; and
   * the other way. Columns likewise, left and right. */
  OK(MPI_Sendrecv(&a[1][1], BC, MPI_INT, up, 1, &a[BR + 1][1], BC, MPI_INT,
                  down, 1, grid, MPI_STATUS_IGNORE));
  OK(MPI_Sendrecv(&a[BR][1], BC, MPI_INT, down, 2, &a[0][1], BC, MPI_INT, up, 2,
                  grid, MPI_STATUS_IGNORE));
  OK(MPI_Sendrecv(&a[1][1], 1, col, left, 3, &a[1][BC + 1], 1, col, right, 3,
                  grid, MPI_STATUS_IGNORE));
  OK(MPI_Sendrecv(&a[1][BC], 1, col, right, 4, &a[1][0], 1, col, left, 4, grid,
                  MPI_STATUS_IGNORE));
  int R = dims[0] * BR, C = dims[1] * BC;
  for (int i = 0; i < BR + 2; i++)
    for (int j = 0; j < BC + 2; j++) {
      bool corner = (i == 0 || i == BR + 1) && (j == 0 || j == BC + 1);
      int gr = ((coords[0] * BR + i - 1) % R + R) % R;
      int gc = ((coords[1] * BC + j - 1) % C + C) % C;
      int want = corner ? -1 : cell(gr, gc);
      EXPECT(a[i][j] == want, "halo [%d][%d] = %d, wanted %d", i, j, a[i][j],
             want);
    }
  OK(MPI_Type_free(&col));

  /* Rows of the grid: an allreduce along each sums its column indices. */
  MPI_Comm row;
  int keep[2] = {0, 1}, sum = -1, row_rank = -1, rdims = -1;
  OK(MPI_Cart_sub(grid, keep, &row));
  OK(MPI_Cartdim_get(row, &rdims));
  OK(MPI_Comm_rank(row, &row_rank));
  EXPECT(rdims == 1 && row_rank == coords[1], "row: %d dims, rank %d", rdims,
         row_rank);
  OK(MPI_Allreduce(&coords[1], &sum, 1, MPI_INT, MPI_SUM, row));
  EXPECT(sum == dims[1] * (dims[1] - 1) / 2, "row sum %d", sum);
  int src, dst;
  OK(MPI_Cart_shift(row, 0, 1, &src, &dst));
  EXPECT(dst == (coords[1] + 1) % dims[1], "a row's periodic shift %d", dst);
  OK(MPI_Comm_free(&row));

  /* A dup keeps the grid. */
  MPI_Comm copy;
  OK(MPI_Comm_dup(grid, &copy));
  OK(MPI_Topo_test(copy, &status));
  int cc[2] = {-1, -1};
  OK(MPI_Cart_coords(copy, rank, 2, cc));
  EXPECT(status == MPI_CART && cc[0] == coords[0] && cc[1] == coords[1],
         "the dup's grid: %d, %d %d", status, cc[0], cc[1]);
  OK(MPI_Comm_free(&copy));
  OK(MPI_Comm_free(&grid));
}

/* A line of p ranks, not periodic: the ends have MPI_PROC_NULL beyond. */
static void edges(void) {
  int dims[1] = {p}, periods[1] = {0}, src, dst, code;
  MPI_Comm line;
  OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line));
  OK(MPI_Cart_shift(line, 0, 1, &src, &dst));
  EXPECT(src == (rank == 0 ? MPI_PROC_NULL : rank - 1) &&
             dst == (rank == p - 1 ? MPI_PROC_NULL : rank + 1),
         "line shift: %d %d", src, dst);
  /* A sendrecv along it: the ends' MPI_PROC_NULL sides do nothing. */
  int in = -5;
  OK(MPI_Sendrecv(&rank, 1, MPI_INT, dst, 0, &in, 1, MPI_INT, src, 0, line,
                  MPI_STATUS_IGNORE));
  EXPECT(in == (rank == 0 ? -5 : rank - 1), "along the line: %d", in);
  /* Displacements as large as an int, periodic: no overflow. */
  int ring[1] = {p}, yes[1] = {1};
  MPI_Comm circle;
  OK(MPI_Cart_create(MPI_COMM_WORLD, 1, ring, yes, 0, &circle));
  OK(MPI_Cart_shift(circle, 0, 2147483647, &src, &dst));
  int far = (int)(((long long)rank + 2147483647LL) % p);
  int near = (int)((((long long)rank - 2147483647LL) % p + p) % p);
  EXPECT(dst == far && src == near, "shift by INT_MAX: %d %d, wanted %d %d",
         src, dst, near, far);
  OK(MPI_Comm_free(&circle));
  int out[1] = {p};
  code = MPI_Cart_rank(line, out, &src);
  EXPECT(error_class(code) == MPI_ERR_ARG, "past the end: %s",
         error_text(code));
  code = MPI_Cart_shift(line, 1, 1, &src, &dst);
  EXPECT(error_class(code) == MPI_ERR_ARG, "direction 1 of 1: %s",
         error_text(code));
  OK(MPI_Comm_free(&line));
}

static void errors(void) {
  int dims[2] = {p, 1}, periods[2] = {0, 0}, status = -1, code;
  MPI_Comm c = MPI_COMM_NULL;
  /* A grid of all but the last rank: the last gets MPI_COMM_NULL. */
  int fewer[1] = {p - 1};
  OK(MPI_Cart_create(MPI_COMM_WORLD, 1, fewer, periods, 0, &c));
  EXPECT((rank == p - 1) == (c == MPI_COMM_NULL), "rank %d's grid", rank);
  if (c != MPI_COMM_NULL)
    OK(MPI_Comm_free(&c));
  /* No grid on the world: its questions fail, MPI_Topo_test says so. */
  OK(MPI_Topo_test(MPI_COMM_WORLD, &status));
  EXPECT(status == MPI_UNDEFINED, "the world's topology %d", status);
  code = MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &dims[0], &dims[1]);
  EXPECT(error_class(code) == MPI_ERR_TOPOLOGY, "shift without a grid: %s",
         error_text(code));
  /* Too many ranks asked for: every rank fails, none waits. */
  int many[2] = {p, 2};
  code = MPI_Cart_create(MPI_COMM_WORLD, 2, many, periods, 0, &c);
  EXPECT(error_class(code) == MPI_ERR_DIMS, "a grid of 2p: %s",
         error_text(code));
  /* Ranks that pass different grids of the same size all fail. */
  int mine[2] = {rank == 0 ? p : 1, rank == 0 ? 1 : p};
  c = MPI_COMM_NULL;
  code = MPI_Cart_create(MPI_COMM_WORLD, 2, mine, periods, 0, &c);
  EXPECT(error_class(code) == MPI_ERR_ARG && c == MPI_COMM_NULL,
         "different grids: %s", error_text(code));
  /* A grid of another ndims on one rank: all fail, the world stays. */
  int flat[2] = {p, 1}, line1[1] = {p};
  code = rank == 0 ? MPI_Cart_create(MPI_COMM_WORLD, 1, line1, periods, 0, &c)
                   : MPI_Cart_create(MPI_COMM_WORLD, 2, flat, periods, 0, &c);
  EXPECT(error_class(code) == MPI_ERR_ARG, "different ndims: %s",
         error_text(code));
  /* One rank's bad arguments fail every rank, none gets a grid. */
  c = MPI_COMM_NULL;
  code = MPI_Cart_create(MPI_COMM_WORLD, 1, line1, periods, 0,
                         rank == p - 1 ? NULL : &c);
  EXPECT(error_class(code) == MPI_ERR_ARG && c == MPI_COMM_NULL,
         "one rank's NULL comm_cart: %s", error_text(code));
  /* Still in step. */
  int one = 1, sum = 0;
  OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(sum == p, "after the errors: %d", sum);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2) {
    fprintf(stderr, "mpi_cart: run it on 2 ranks or more\n");
    return 2;
  }
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  dims_create();
  halo_exchange();
  edges();
  errors();
  OK(MPI_Finalize());
  if (failures == 0 && rank == 0)
    printf("mpi_cart: p=%d: every check held\n", p);
  return failures == 0 ? 0 : 1;
}
