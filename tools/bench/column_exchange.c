/* column_exchange: the cost of a derived datatype with holes, as a stencil
 * program pays it. Two ranks exchange one column of an N x N matrix of
 * doubles (MPI_Type_vector(N, 1, N)) with MPI_Sendrecv, against the same
 * data as a dense run (N contiguous doubles), for N = 16 ... 4096.
 * Written against mpi.h alone, so the same source builds with crnet-mpicc
 * and with another MPI's mpicc (tools/bench/column_exchange.sh).
 *
 *   crlaunch -n 2 column_exchange [REPS]
 *
 * Rank 0 prints per N: microseconds per exchange (median of 9 timed loops
 * of REPS exchanges each, after a barrier) for the column and for the dense
 * run, and their ratio. */
#include <stdio.h>
#include <stdlib.h>

#include "mpi.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double loop(double *send, double *recv, int count, MPI_Datatype t,
                   int peer, int reps) {
  double s[9];
  for (int k = 0; k < 9; k++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++)
      MPI_Sendrecv(send, count, t, peer, 0, recv, count, t, peer, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    s[k] = (MPI_Wtime() - t0) / reps * 1e6;
  }
  qsort(s, 9, sizeof s[0], cmp);
  return s[4];
}

int main(int argc, char **argv) {
  int rank, p, reps = argc > 1 ? atoi(argv[1]) : 200;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p != 2) {
    if (rank == 0)
      fprintf(stderr, "column_exchange: run it on 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  if (rank == 0)
    printf("#      N   column us    dense us   column/dense\n");
  for (int n = 16; n <= 4096; n *= 4) {
    double *a = malloc(sizeof *a * (size_t)n * (size_t)n);
    double *b = malloc(sizeof *b * (size_t)n * (size_t)n);
    MPI_Datatype col;
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
      a[i] = b[i] = (double)i;
    MPI_Type_vector(n, 1, n, MPI_DOUBLE, &col);
    MPI_Type_commit(&col);
    int r = n >= 1024 ? reps / 10 + 1 : reps;
    double tc = loop(a, b + 1, 1, col, 1 - rank, r);
    double td = loop(a, b, n, MPI_DOUBLE, 1 - rank, r);
    if (rank == 0)
      printf("%8d %11.2f %11.2f %14.2f\n", n, tc, td, tc / td);
    MPI_Type_free(&col);
    free(a);
    free(b);
  }
  MPI_Finalize();
  return 0;
}
