/* hello_allreduce: the smallest real crnet program.
 *
 *   crlaunch -n 4 ./hello_allreduce
 *
 * Every rank contributes rank+1 and a vector of doubles; rank 0 prints the
 * sums, checks them, and prints how long the allreduce took. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <crnet.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 20;
  crnet_comm *comm;
  int64_t mine, total;
  double *v, t0, t1;
  int rc, rank, size, wrong = 0;

  rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "crnet_comm_init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    return 1;
  }
  rank = crnet_comm_rank(comm);
  size = crnet_comm_size(comm);

  mine = rank + 1;
  rc = crnet_allreduce(comm, &mine, &total, 1, CRNET_INT64, CRNET_SUM);
  if (rc != 0)
    goto fail;

  v = malloc(count * sizeof *v);
  if (v == NULL)
    return 1;
  for (size_t i = 0; i < count; i++)
    v[i] = (double)(rank + 1) * (double)(i % 1000);
  t0 = now_s();
  rc = crnet_allreduce(comm, CRNET_IN_PLACE, v, count, CRNET_DOUBLE, CRNET_SUM);
  t1 = now_s();
  if (rc != 0)
    goto fail;
  for (size_t i = 0; i < count; i++)
    if (v[i] != (double)total * (double)(i % 1000))
      wrong++;
  free(v);

  if (rank == 0)
    printf("allreduce over %d ranks: sum of rank+1 = %lld (expected %lld); "
           "%zu doubles in %.3f ms, %d wrong\n",
           size, (long long)total, (long long)size * (size + 1) / 2, count,
           (t1 - t0) * 1e3, wrong);
  rc = crnet_comm_destroy(comm);
  if (rc != 0) {
    fprintf(stderr, "crnet_comm_destroy: %s\n", crnet_strerror(rc));
    return 1;
  }
  return wrong == 0 && total == (int64_t)size * (size + 1) / 2 ? 0 : 1;

fail:
  fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, crnet_strerror(rc),
          crnet_comm_errmsg(comm));
  crnet_comm_destroy(comm);
  return 1;
}
