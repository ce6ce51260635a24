/* A 2-D Jacobi (heat) solver on a process grid: the usual shape of an MPI
 * stencil code, on crnet.
 *
 * The N x N interior of a square plate, its top edge held at 1 and the other
 * edges at 0, relaxes by Jacobi sweeps: every point becomes the mean of its
 * four neighbours. The p ranks form a px x py grid (as square as p allows)
 * and each owns a block of the plate with a one-point halo. Each sweep:
 *   - halo exchange with the four neighbours, point-to-point
 *     (crnet_irecv / crnet_isend / crnet_waitall) on the row and column
 *     comms made by crnet_comm_split;
 *   - the sweep over the block;
 *   - the residual (the sum of squared changes): an allreduce over the row
 *     comm, then over the column comm.
 * At the end every rank solves the whole plate alone, the same number of
 * sweeps, and compares its block bit for bit: a Jacobi sweep reads only the
 * old values of the four neighbours, so the parallel and the serial grids
 * are the same numbers, whatever p. The residuals are sums in different
 * orders, equal to 1e-12 relative. The program exits 1 on any difference.
 *
 *   crlaunch -n 6 ./jacobi2d [N] [sweeps]
 */
#include <crnet.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != 0) {                                                            \
      fprintf(stderr, "jacobi2d: %s: %s: %s\n", #call, crnet_err_name(rc_),  \
              crnet_comm_errmsg(world));                                       \
      crnet_comm_abort(world, 1);                                              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static crnet_comm *world;

/* The start of part i of n of a length, the parts differing by one. */
static int part_start(int len, int n, int i) {
  return len / n * i + (i < len % n ? i : len % n);
}

/* A block of the plate with its halo: rows [r0 - 1, r1], columns
 * [c0 - 1, c1] of the global (N + 2) x (N + 2) plate, boundary included. */
typedef struct block {
  int r0, r1, c0, c1; /* interior rows [r0, r1), columns [c0, c1), 1-based */
  int w;              /* row length with the halo */
  double *u, *v;      /* current and next */
} block;

static double *at(const block *b, double *g, int r, int c) {
  return &g[(size_t)(r - (b->r0 - 1)) * (size_t)b->w + (size_t)(c - (b->c0 - 1))];
}

/* The fixed boundary: the top edge (row 0) at 1, the rest at 0. */
static double boundary(int r, int c, int n) {
  (void)c;
  (void)n;
  return r == 0 ? 1.0 : 0.0;
}

static void block_init(block *b, int n) {
  int h = b->r1 - b->r0 + 2;
  b->w = b->c1 - b->c0 + 2;
  b->u = calloc((size_t)h * (size_t)b->w, sizeof *b->u);
  b->v = calloc((size_t)h * (size_t)b->w, sizeof *b->v);
  if (b->u == NULL || b->v == NULL) {
    fprintf(stderr, "jacobi2d: out of memory\n");
    exit(1);
  }
  for (int r = b->r0 - 1; r <= b->r1; r++)
    for (int c = b->c0 - 1; c <= b->c1; c++)
      if (r == 0 || r == n + 1 || c == 0 || c == n + 1)
        *at(b, b->u, r, c) = *at(b, b->v, r, c) = boundary(r, c, n);
}

/* One sweep over the interior of b: returns the sum of squared changes. */
static double sweep(block *b) {
  double res = 0;
  for (int r = b->r0; r < b->r1; r++)
    for (int c = b->c0; c < b->c1; c++) {
      double nu = 0.25 * (*at(b, b->u, r - 1, c) + *at(b, b->u, r + 1, c) +
                          *at(b, b->u, r, c - 1) + *at(b, b->u, r, c + 1));
      double d = nu - *at(b, b->u, r, c);
      *at(b, b->v, r, c) = nu;
      res += d * d;
    }
  double *t = b->u;
  b->u = b->v;
  b->v = t;
  return res;
}

/* Exchanges the halo with the four neighbours (-1: none). Rows travel
 * contiguous; columns are packed. */
static void exchange(block *b, crnet_comm *row, crnet_comm *col, int left,
                     int right, int up, int down, double *pack) {
  int ncols = b->c1 - b->c0, nrows = b->r1 - b->r0, n = 0;
  crnet_request *req[8];
  double *sl = pack, *sr = pack + nrows, *rl = pack + 2 * nrows,
         *rr = pack + 3 * nrows;
  for (int r = b->r0; r < b->r1; r++) {
    sl[r - b->r0] = *at(b, b->u, r, b->c0);
    sr[r - b->r0] = *at(b, b->u, r, b->c1 - 1);
  }
  if (up >= 0) {
    CHECK(crnet_irecv(col, at(b, b->u, b->r0 - 1, b->c0), (size_t)ncols,
                      CRNET_DOUBLE, up, 0, NULL, &req[n++]));
    CHECK(crnet_isend(col, at(b, b->u, b->r0, b->c0), (size_t)ncols,
                      CRNET_DOUBLE, up, 1, &req[n++]));
  }
  if (down >= 0) {
    CHECK(crnet_irecv(col, at(b, b->u, b->r1, b->c0), (size_t)ncols,
                      CRNET_DOUBLE, down, 1, NULL, &req[n++]));
    CHECK(crnet_isend(col, at(b, b->u, b->r1 - 1, b->c0), (size_t)ncols,
                      CRNET_DOUBLE, down, 0, &req[n++]));
  }
  if (left >= 0) {
    CHECK(crnet_irecv(row, rl, (size_t)nrows, CRNET_DOUBLE, left, 2, NULL,
                      &req[n++]));
    CHECK(crnet_isend(row, sl, (size_t)nrows, CRNET_DOUBLE, left, 3,
                      &req[n++]));
  }
  if (right >= 0) {
    CHECK(crnet_irecv(row, rr, (size_t)nrows, CRNET_DOUBLE, right, 3, NULL,
                      &req[n++]));
    CHECK(crnet_isend(row, sr, (size_t)nrows, CRNET_DOUBLE, right, 2,
                      &req[n++]));
  }
  CHECK(crnet_waitall(n, req));
  for (int r = b->r0; r < b->r1; r++) {
    if (left >= 0)
      *at(b, b->u, r, b->c0 - 1) = rl[r - b->r0];
    if (right >= 0)
      *at(b, b->u, r, b->c1) = rr[r - b->r0];
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 192;
  int sweeps = argc > 2 ? atoi(argv[2]) : 400;
  int rank, p, px, py, gx, gy, bad = 0;
  crnet_comm *row, *col;
  block b, all;
  double res = 0, res_serial = 0, t0, t1;
  double *pack;
  if (n < 1 || sweeps < 1) {
    fprintf(stderr, "usage: jacobi2d [N >= 1] [sweeps >= 1]\n");
    return 2;
  }
  if (crnet_comm_init(&world, NULL) != 0) {
    fprintf(stderr, "jacobi2d: %s\n", crnet_init_errmsg());
    return 1;
  }
  rank = crnet_comm_rank(world);
  p = crnet_comm_size(world);
  /* The grid: py rows of px ranks, as square as p allows. */
  for (px = (int)sqrt((double)p); p % px != 0; px--)
    ;
  py = p / px;
  gx = rank % px; /* this rank's column in the grid */
  gy = rank / px; /* and row */
  if (n < px || n < py) {
    if (rank == 0)
      fprintf(stderr, "jacobi2d: N = %d is smaller than the %dx%d grid\n", n,
              py, px);
    crnet_comm_destroy(world);
    return 2;
  }
  /* Row comm: the ranks of grid row gy, ranked by column; column comm:
   * grid column gx, ranked by row. So a neighbour's rank in them is its
   * grid column (left, right) or row (up, down). */
  CHECK(crnet_comm_split(world, gy, gx, &row));
  CHECK(crnet_comm_split(world, gx, gy, &col));
  b.r0 = 1 + part_start(n, py, gy);
  b.r1 = 1 + part_start(n, py, gy + 1);
  b.c0 = 1 + part_start(n, px, gx);
  b.c1 = 1 + part_start(n, px, gx + 1);
  block_init(&b, n);
  pack = malloc(sizeof *pack * 4 * (size_t)(b.r1 - b.r0));
  if (pack == NULL) {
    fprintf(stderr, "jacobi2d: out of memory\n");
    return 1;
  }

  CHECK(crnet_barrier(world));
  t0 = now();
  for (int k = 0; k < sweeps; k++) {
    exchange(&b, row, col, gx > 0 ? gx - 1 : -1, gx < px - 1 ? gx + 1 : -1,
             gy > 0 ? gy - 1 : -1, gy < py - 1 ? gy + 1 : -1, pack);
    res = sweep(&b);
    CHECK(crnet_allreduce(row, CRNET_IN_PLACE, &res, 1, CRNET_DOUBLE,
                          CRNET_SUM));
    CHECK(crnet_allreduce(col, CRNET_IN_PLACE, &res, 1, CRNET_DOUBLE,
                          CRNET_SUM));
  }
  t1 = now();

  /* The same sweeps on the whole plate, alone. */
  all.r0 = 1;
  all.r1 = n + 1;
  all.c0 = 1;
  all.c1 = n + 1;
  block_init(&all, n);
  for (int k = 0; k < sweeps; k++)
    res_serial = sweep(&all);
  for (int r = b.r0; r < b.r1; r++)
    for (int c = b.c0; c < b.c1; c++)
      if (memcmp(at(&b, b.u, r, c), at(&all, all.u, r, c), sizeof(double)) !=
          0)
        bad++;
  if (fabs(res - res_serial) > 1e-12 * fabs(res_serial))
    bad++;
  CHECK(crnet_allreduce(world, CRNET_IN_PLACE, &bad, 1, CRNET_INT32,
                        CRNET_SUM));
  if (rank == 0)
    printf("jacobi2d: p = %d (%dx%d grid), %dx%d plate, %d sweeps: residual "
           "%.6e (serial %.6e), grid %s the serial solve's, %.3f s\n",
           p, py, px, n, n, sweeps, res, res_serial,
           bad == 0 ? "bit for bit" : "DIFFERENT FROM", t1 - t0);
  free(pack);
  free(b.u);
  free(b.v);
  free(all.u);
  free(all.v);
  CHECK(crnet_comm_destroy(row));
  CHECK(crnet_comm_destroy(col));
  CHECK(crnet_comm_destroy(world));
  return bad == 0 ? 0 : 1;
}
