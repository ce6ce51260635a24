/* allreduce_time: a first, simple allreduce timer, until crbench exists.
 *
 *   crlaunch -n 8 allreduce_time SCHEDULE BYTES [REPS]
 *
 * Times REPS allreduces of BYTES bytes of float (sum) on SCHEDULE after a
 * warm-up; each repetition's time is the maximum over ranks, and rank 0
 * prints the median and the bus bandwidth (2(p-1)/p · bytes / time, as
 * nccl-tests count it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crnet.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  crnet_comm *c;
  const char *schedule;
  size_t bytes, count;
  int reps, rc;
  float *v;
  double *times;

  if (argc < 3) {
    fprintf(stderr, "usage: allreduce_time SCHEDULE BYTES [REPS]\n");
    return 2;
  }
  schedule = argv[1];
  bytes = strtoull(argv[2], NULL, 10);
  reps = argc > 3 ? atoi(argv[3]) : 20;
  count = bytes / sizeof(float);
  if (count == 0 || reps < 1) {
    fprintf(stderr, "allreduce_time: need BYTES >= 4 and REPS >= 1\n");
    return 2;
  }
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "init: %s\n", crnet_init_errmsg());
    return 1;
  }
  rc = crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, schedule);
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", crnet_strerror(rc), crnet_comm_errmsg(c));
    crnet_comm_destroy(c);
    return 2;
  }
  v = calloc(count, sizeof *v);
  times = calloc((size_t)reps, sizeof *times);
  if (v == NULL || times == NULL)
    return 1;
  for (int i = 0; i < 3 && rc == 0; i++)
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, count, CRNET_FLOAT, CRNET_SUM);
  for (int i = 0; i < reps && rc == 0; i++) {
    double t0 = now_s(), dt;
    rc = crnet_allreduce(c, CRNET_IN_PLACE, v, count, CRNET_FLOAT, CRNET_SUM);
    dt = now_s() - t0;
    if (rc == 0)
      rc = crnet_allreduce(c, CRNET_IN_PLACE, &dt, 1, CRNET_DOUBLE, CRNET_MAX);
    times[i] = dt;
  }
  if (rc != 0) {
    fprintf(stderr, "allreduce: %s: %s\n", crnet_strerror(rc),
            crnet_comm_errmsg(c));
  } else if (crnet_comm_rank(c) == 0) {
    int p = crnet_comm_size(c);
    double med;
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    med = times[reps / 2];
    printf("%-20s p=%-3d %10zu B  median %10.1f us  busbw %7.3f GB/s\n",
           schedule, p, count * sizeof(float), med * 1e6,
           2.0 * (p - 1) / p * (double)(count * sizeof(float)) / med / 1e9);
  }
  free(v);
  free(times);
  crnet_comm_destroy(c);
  return rc == 0 ? 0 : 1;
}
