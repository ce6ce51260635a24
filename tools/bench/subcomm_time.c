/* What a sub-communicator costs: the same allreduce on the world comm and
 * on a comm made from it, in one job, interleaved.
 *
 *   crlaunch -n P subcomm_time [dup|half] [reps]
 *
 * dup: the comm is crnet_comm_dup(world), the same P ranks: any difference
 * is the sub-comm's own (rank translation, its context id in the frames,
 * the lookup of its comm on each frame). half: ranks 0 .. P/2-1 form a
 * comm with crnet_comm_split, the others pass CRNET_UNDEFINED and wait in
 * a barrier meanwhile (asleep in epoll: no core taken); its time is to be
 * set against a job of P/2 ranks running `dup` (a world of that size),
 * which the script runs beside it.
 *
 * For each size, `reps` repetitions, each timing a batch of calls on one
 * comm then the same batch on the other (the order alternating), the
 * slowest rank's time per call; prints the medians and their ratio
 * sub / world.
 */
#include <crnet.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slowest rank's seconds per call of a batch of n allreduces. */
static double batch(crnet_comm *c, float *buf, size_t count, int n) {
  double t;
  crnet_barrier(c);
  t = now();
  for (int i = 0; i < n; i++)
    crnet_allreduce(c, CRNET_IN_PLACE, buf, count, CRNET_FLOAT, CRNET_SUM);
  t = (now() - t) / n;
  crnet_allreduce(c, CRNET_IN_PLACE, &t, 1, CRNET_DOUBLE, CRNET_MAX);
  return t;
}

int main(int argc, char **argv) {
  static const size_t sizes[] = {8, 1024, 65536, 1 << 20};
  bool half = argc > 1 && strcmp(argv[1], "half") == 0;
  int reps = argc > 2 ? atoi(argv[2]) : 11;
  crnet_comm *world, *sub = NULL;
  int rank, p, q;
  float *buf = calloc(1 << 18, sizeof *buf);
  double *tw = calloc((size_t)reps, sizeof *tw),
         *ts = calloc((size_t)reps, sizeof *ts);
  if (buf == NULL || tw == NULL || ts == NULL || reps < 1 ||
      crnet_comm_init(&world, NULL) != 0)
    return 1;
  rank = crnet_comm_rank(world);
  p = crnet_comm_size(world);
  if (half)
    crnet_comm_split(world, rank < p / 2 ? 0 : CRNET_UNDEFINED, rank, &sub);
  else
    crnet_comm_dup(world, &sub);
  q = sub != NULL ? crnet_comm_size(sub) : 0;
  if (rank == 0)
    printf("# p = %d, %s comm of %d ranks; allreduce float sum; medians of "
           "%d interleaved repetitions\n# %8s %12s %12s %7s\n",
           p, half ? "half" : "dup", q, reps, "bytes",
           half ? "-" : "world us", "sub us", "sub/world");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t count = sizes[k] / sizeof(float);
    int n = sizes[k] <= 65536 ? 200 : 20;
    for (int r = 0; r < reps; r++) {
      /* the order alternates, so neither comm always goes first */
      for (int o = 0; o < 2; o++) {
        bool on_sub = (o == 0) == (r % 2 == 0);
        if (on_sub && sub != NULL)
          ts[r] = batch(sub, buf, count, n);
        else if (!on_sub && !half)
          tw[r] = batch(world, buf, count, n);
      }
    }
    if (rank == 0) {
      double mw = half ? 0 : median(tw, reps), ms = median(ts, reps);
      printf("  %8zu %12.2f %12.2f %7.3f\n", sizes[k], mw * 1e6, ms * 1e6,
             half ? 0.0 : ms / mw);
    }
  }
  if (half)
    crnet_barrier(world);
  crnet_comm_destroy(sub);
  crnet_comm_destroy(world);
  free(buf);
  free(tw);
  free(ts);
  return 0;
}
