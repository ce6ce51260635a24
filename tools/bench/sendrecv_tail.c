/* sendrecv_tail: the tail of a two-rank MPI_Sendrecv loop, the pattern of a
 * halo exchange: how many exchanges take over 100 us, 500 us and 2 ms, the
 * worst and the average. Written against mpi.h alone (crnet-mpicc or
 * another MPI's mpicc); docs/PERFORMANCE-SHM.md, "Waits that sleep".
 *
 *   crlaunch -n 2 sendrecv_tail [DOUBLES [EXCHANGES]]   (256, 20000) */
#include <stdio.h>
#include <stdlib.h>

#include "mpi.h"

int main(int argc, char **argv) {
  int rank, n = argc > 1 ? atoi(argv[1]) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 20000;
  int over100 = 0, over500 = 0, over2000 = 0;
  double worst = 0, total = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < reps; i++) {
    double t = MPI_Wtime();
    MPI_Sendrecv(a, n, MPI_DOUBLE, 1 - rank, 0, b, n, MPI_DOUBLE, 1 - rank, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double us = (MPI_Wtime() - t) * 1e6;
    total += us;
    worst = us > worst ? us : worst;
    over100 += us > 100;
    over500 += us > 500;
    over2000 += us > 2000;
  }
  if (rank == 0)
    printf("%d doubles: average %.2f us, worst %.0f us, over 100 us %d, "
           "over 500 us %d, over 2 ms %d, of %d\n",
           n, total / reps, worst, over100, over500, over2000, reps);
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
