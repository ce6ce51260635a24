/* Sample sort: a plain MPI program, unchanged from what any MPI library
 * runs, built here with crnet-mpicc and run under crlaunch.
 *
 * Every rank makes N pseudo-random keys. Each picks p - 1 evenly spaced
 * samples of its sorted keys; MPI_Allgather gives everyone all of them,
 * and every rank picks the same p - 1 splitters from those. Each rank
 * sends the keys between splitter i and i + 1 to rank i: MPI_Alltoall of
 * the counts, then MPI_Alltoallv of the keys. Each rank sorts what it got.
 * Then the program checks itself:
 *   - no key was lost: MPI_Allreduce of the counts and of a checksum;
 *   - the result is sorted across ranks: each rank's smallest key is at
 *     least its left neighbour's largest (MPI_Sendrecv);
 * and reports the largest bucket and its rank (MPI_MAXLOC). It exits 1 if
 * a check fails.
 *
 *   crnet-mpicc -O2 -o samplesort samplesort.c
 *   crlaunch -np 4 ./samplesort [keys per rank]
 *   (or: mpicc -O2 -o samplesort samplesort.c && mpirun -np 4 ./samplesort)
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* splitmix64: keys differ per rank and are the same on every run. */
static uint64_t next_key(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static void *alloc_or_abort(size_t n) {
  void *p = malloc(n > 0 ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "samplesort: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

int main(int argc, char **argv) {
  int rank, p, ok = 1, all_ok;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (n < p) {
    if (rank == 0)
      fprintf(stderr, "samplesort: at least %d keys per rank\n", p);
    MPI_Finalize();
    return 1;
  }

  double t0 = MPI_Wtime();
  uint64_t state = 12345u + (uint64_t)rank, sum = 0, total_sum = 0;
  uint64_t *keys = alloc_or_abort(sizeof *keys * (size_t)n);
  for (int i = 0; i < n; i++) {
    keys[i] = next_key(&state);
    sum += keys[i];
  }
  qsort(keys, (size_t)n, sizeof *keys, cmp_u64);

  /* Samples and splitters. */
  uint64_t *samples = alloc_or_abort(sizeof *samples * (size_t)p);
  uint64_t *all_samples = alloc_or_abort(sizeof *samples * (size_t)p * p);
  for (int i = 0; i < p; i++)
    samples[i] = keys[(size_t)n * (size_t)i / (size_t)p];
  MPI_Allgather(samples, p, MPI_UINT64_T, all_samples, p, MPI_UINT64_T,
                MPI_COMM_WORLD);
  qsort(all_samples, (size_t)p * p, sizeof *all_samples, cmp_u64);
  /* splitter i (1..p-1) is all_samples[i * p]: bucket b holds the keys in
   * [splitter b, splitter b + 1). */

  /* Who gets what. */
  int *send_counts = alloc_or_abort(sizeof(int) * (size_t)p);
  int *recv_counts = alloc_or_abort(sizeof(int) * (size_t)p);
  int *send_displs = alloc_or_abort(sizeof(int) * (size_t)p);
  int *recv_displs = alloc_or_abort(sizeof(int) * (size_t)p);
  for (int b = 0, i = 0; b < p; b++) {
    int start = i;
    while (i < n && (b == p - 1 || keys[i] < all_samples[(size_t)(b + 1) * p]))
      i++;
    send_displs[b] = start;
    send_counts[b] = i - start;
  }
  MPI_Alltoall(send_counts, 1, MPI_INT, recv_counts, 1, MPI_INT,
               MPI_COMM_WORLD);
  int mine = 0;
  for (int b = 0; b < p; b++) {
    recv_displs[b] = mine;
    mine += recv_counts[b];
  }
  uint64_t *bucket = alloc_or_abort(sizeof *bucket * (size_t)mine);
  MPI_Alltoallv(keys, send_counts, send_displs, MPI_UINT64_T, bucket,
                recv_counts, recv_displs, MPI_UINT64_T, MPI_COMM_WORLD);
  qsort(bucket, (size_t)mine, sizeof *bucket, cmp_u64);
  double t1 = MPI_Wtime();

  /* Nothing lost: the counts and the sums of the keys (mod 2^64). */
  long long total = 0, mine_ll = mine;
  uint64_t bucket_sum = 0, total_bucket_sum = 0;
  for (int i = 0; i < mine; i++)
    bucket_sum += bucket[i];
  MPI_Allreduce(&mine_ll, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&bucket_sum, &total_bucket_sum, 1, MPI_UINT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  if (total != (long long)n * p || total_sum != total_bucket_sum) {
    ok = 0;
    if (rank == 0)
      fprintf(stderr, "samplesort: %lld keys after, %lld before\n", total,
              (long long)n * p);
  }

  /* Sorted across ranks: my smallest against my left neighbour's largest
   * (an empty bucket passes its neighbour's largest on). */
  uint64_t largest = mine > 0 ? bucket[mine - 1] : 0, left_largest = 0;
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  int right = rank < p - 1 ? rank + 1 : MPI_PROC_NULL;
  for (int step = 0; step < p - 1; step++) {
    /* p - 1 steps carry the largest key so far past any empty buckets. */
    uint64_t carried = largest > left_largest ? largest : left_largest;
    MPI_Sendrecv(&carried, 1, MPI_UINT64_T, right, 7, &left_largest, 1,
                 MPI_UINT64_T, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  for (int i = 1; i < mine; i++)
    if (bucket[i - 1] > bucket[i])
      ok = 0;
  if (mine > 0 && rank > 0 && bucket[0] < left_largest) {
    ok = 0;
    fprintf(stderr, "samplesort: rank %d starts below rank %d's keys\n", rank,
            rank - 1);
  }
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

  /* The largest bucket, and whose it is. */
  struct {
    int count;
    int rank;
  } me = {mine, rank}, biggest;
  MPI_Reduce(&me, &biggest, 1, MPI_2INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("samplesort: %lld keys on %d ranks sorted in %.3f s; largest "
           "bucket %d keys (rank %d, %.2f of the mean); %s\n",
           total, p, t1 - t0, biggest.count, biggest.rank,
           (double)biggest.count * p / (double)total,
           all_ok ? "every check held" : "CHECK FAILED");

  free(keys);
  free(samples);
  free(all_samples);
  free(send_counts);
  free(recv_counts);
  free(send_displs);
  free(recv_displs);
  free(bucket);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
