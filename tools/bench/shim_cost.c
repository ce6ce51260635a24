/* What crnet-mpi adds to a call: one loop of allreduces, built twice from
 * this file, once on crnet.h (shim_cost_crnet) and once on crnet-mpi's
 * mpi.h (shim_cost_mpi, -DSHIM_MPI), the same sizes, the same timing.
 * tools/bench/shim_cost.sh runs the two in interleaved rounds.
 *
 *   crlaunch -n P shim_cost_crnet|shim_cost_mpi [CALLS [REPS]]
 *
 * Per size (float sum, 8 B to 64 KiB), REPS repetitions of a barrier and
 * CALLS allreduces timed together (looped: per-call costs below a µs
 * drown in a clock read and a barrier's skew); rank 0 prints the median
 * per call, in µs, of the repetitions' slowest rank. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef SHIM_MPI
#include "mpi.h"
#else
#include "crnet.h"
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 20000;
  int reps = argc > 2 ? atoi(argv[2]) : 9;
  static const size_t sizes[] = {8, 1024, 65536};
  float *in = malloc(65536), *out = malloc(65536);
  double *t = malloc(sizeof *t * (size_t)(reps > 0 ? reps : 1));
  int rank;
  if (in == NULL || out == NULL || t == NULL || calls < 1 || reps < 1)
    return 2;
  for (int i = 0; i < 16384; i++)
    in[i] = (float)i;
#ifdef SHIM_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#define ALLREDUCE(n)                                                           \
  MPI_Allreduce(in, out, (int)(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
#define BARRIER() MPI_Barrier(MPI_COMM_WORLD)
#define MAX_OF(x, y)                                                           \
  MPI_Allreduce(&(x), &(y), 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD)
#else
  crnet_comm *c;
  if (crnet_comm_init(&c, NULL) != 0)
    return 2;
  rank = crnet_comm_rank(c);
#define ALLREDUCE(n) crnet_allreduce(c, in, out, (n), CRNET_FLOAT, CRNET_SUM)
#define BARRIER() crnet_barrier(c)
#define MAX_OF(x, y) crnet_allreduce(c, &(x), &(y), 1, CRNET_DOUBLE, CRNET_MAX)
#endif
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s] / sizeof(float);
    for (int i = 0; i < calls / 10 + 1; i++)
      if (ALLREDUCE(n) != 0)
        return 1;
    for (int r = 0; r < reps; r++) {
      double t0, mine, slowest = 0;
      if (BARRIER() != 0)
        return 1;
      t0 = now();
      for (int i = 0; i < calls; i++)
        if (ALLREDUCE(n) != 0)
          return 1;
      mine = (now() - t0) / calls;
      if (MAX_OF(mine, slowest) != 0)
        return 1;
      t[r] = slowest;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    if (rank == 0)
      printf("%zu %.4f\n", sizes[s], t[reps / 2] * 1e6);
  }
#ifdef SHIM_MPI
  MPI_Finalize();
#else
  crnet_comm_destroy(c);
#endif
  free(in);
  free(out);
  free(t);
  return 0;
}
