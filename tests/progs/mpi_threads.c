/* mpi_threads: crnet-mpi under MPI_THREAD_MULTIPLE, as a threaded program
 * uses it (for ThreadSanitizer: suite `threads`).
 *
 *   crlaunch -n P mpi_threads
 *
 * Each rank runs three threads at once on three communicators: one makes
 * allreduces (blocking and nonblocking) on a dup of the world, one
 * exchanges messages around a ring on another dup (sendrecv, probe and
 * receive, isend and irecv with test, freed sends, buffered sends, a
 * column of a matrix as a vector type), and the main thread makes barriers
 * and bcasts on MPI_COMM_WORLD and meanwhile creates and frees operators,
 * datatypes (with holes too), attribute keys and values, and info
 * objects; the reducing thread also asks MPI_Query_thread and
 * MPI_Get_processor_name. Every result is checked; exits 0 when all held. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi.h"

#define ROUNDS 200

static int rank, p;
static atomic_int failures;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "mpi_threads: rank %d: line %d: ", rank, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      atomic_fetch_add(&failures, 1);                                          \
    }                                                                          \
  } while (0)

#define OK(call) EXPECT((call) == MPI_SUCCESS, "%s failed", #call)

static void *reducer(void *arg) {
  MPI_Comm c = *(MPI_Comm *)arg;
  for (int i = 0; i < ROUNDS; i++) {
    long x = rank + i, sum = -1;
    MPI_Request rq;
    if (i % 2 == 0) {
      OK(MPI_Allreduce(&x, &sum, 1, MPI_LONG, MPI_SUM, c));
    } else {
      OK(MPI_Iallreduce(&x, &sum, 1, MPI_LONG, MPI_SUM, c, &rq));
      OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    EXPECT(sum == (long)p * (p - 1) / 2 + (long)p * i, "allreduce %d: %ld", i,
           sum);
    if (i % 50 == 0) { /* the environment's queries from any thread */
      int level = -1, len = -1;
      char name[MPI_MAX_PROCESSOR_NAME];
      OK(MPI_Query_thread(&level));
      EXPECT(level == MPI_THREAD_MULTIPLE, "MPI_Query_thread %d: %d", i, level);
      OK(MPI_Get_processor_name(name, &len));
      EXPECT(len > 0 && (size_t)len == strlen(name), "processor name %d", i);
    }
  }
  return NULL;
}

static void *messenger(void *arg) {
  MPI_Comm c = *(MPI_Comm *)arg;
  int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  for (int i = 0; i < ROUNDS; i++) {
    int out[3] = {rank, i, rank * i}, in[3] = {-1, -1, -1}, n = -1, flag = 0;
    MPI_Status st;
    MPI_Request rq[2];
    OK(MPI_Sendrecv(out, 3, MPI_INT, next, i, in, 3, MPI_INT, prev, i, c, &st));
    EXPECT(in[0] == prev && in[1] == i, "sendrecv %d", i);
    /* a size only the sender knows: probe, then receive */
    OK(MPI_Isend(out, 1 + i % 3, MPI_INT, next, 1000 + i, c, &rq[0]));
    OK(MPI_Probe(prev, 1000 + i, c, &st));
    OK(MPI_Get_count(&st, MPI_INT, &n));
    EXPECT(n == 1 + i % 3, "probe %d: count %d", i, n);
    OK(MPI_Recv(in, n, MPI_INT, prev, 1000 + i, c, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    /* nonblocking both ways, completed by tests */
    OK(MPI_Irecv(in, 3, MPI_INT, MPI_ANY_SOURCE, 5000, c, &rq[1]));
    OK(MPI_Isend(out, 3, MPI_INT, next, 5000, c, &rq[0]));
    while (!flag)
      OK(MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE));
    EXPECT(in[2] == prev * i, "irecv %d: %d", i, in[2]);
    /* A send freed while active, a buffered one, and a column of a 4 x 3
     * matrix (a vector type) received into a column elsewhere. */
    static __thread int freed_out[3];
    memcpy(freed_out, out, sizeof freed_out);
    OK(MPI_Isend(freed_out, 3, MPI_INT, next, 6000, c, &rq[0]));
    OK(MPI_Request_free(&rq[0]));
    OK(MPI_Recv(in, 3, MPI_INT, prev, 6000, c, MPI_STATUS_IGNORE));
    EXPECT(in[1] == i, "freed send %d: %d", i, in[1]);
    OK(MPI_Bsend(out, 3, MPI_INT, next, 7000, c));
    OK(MPI_Recv(in, 3, MPI_INT, prev, 7000, c, MPI_STATUS_IGNORE));
    EXPECT(in[2] == prev * i, "bsend %d: %d", i, in[2]);
    int m[4][3], got[4][3];
    MPI_Datatype col;
    for (int r = 0; r < 4; r++)
      for (int k = 0; k < 3; k++) {
        m[r][k] = rank * 100 + i + r * 3 + k;
        got[r][k] = -1;
      }
    OK(MPI_Type_vector(4, 1, 3, MPI_INT, &col));
    OK(MPI_Type_commit(&col));
    OK(MPI_Irecv(&got[0][2], 1, col, prev, 8000, c, &rq[1]));
    OK(MPI_Type_free(&col)); /* the receive keeps its own */
    OK(MPI_Send(&m[0][1], 4, MPI_INT, next, 8000, c));
    OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    for (int r = 0; r < 4; r++)
      EXPECT(got[r][2] == prev * 100 + i + 1 + r && got[r][0] == -1,
             "column %d: row %d: %d", i, r, got[r][2]);
  }
  return NULL;
}

static void maximum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; i++)
    if (((int *)in)[i] > ((int *)inout)[i])
      ((int *)inout)[i] = ((int *)in)[i];
}

int main(int argc, char **argv) {
  int provided = -1;
  MPI_Comm a, b;
  pthread_t t[2];
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided != MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "mpi_threads: MPI_THREAD_MULTIPLE not granted (%d)\n",
            provided);
    return 1;
  }
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
  static char bsend_space[64 * (3 * sizeof(int) + MPI_BSEND_OVERHEAD)];
  OK(MPI_Buffer_attach(bsend_space, sizeof bsend_space));
  if (pthread_create(&t[0], NULL, reducer, &a) != 0 ||
      pthread_create(&t[1], NULL, messenger, &b) != 0) {
    fprintf(stderr, "mpi_threads: pthread_create failed\n");
    return 1;
  }
  for (int i = 0; i < ROUNDS / 4; i++) {
    int v = rank == i % p ? i : -1, m = -1;
    MPI_Op op;
    MPI_Datatype two;
    OK(MPI_Bcast(&v, 1, MPI_INT, i % p, MPI_COMM_WORLD));
    EXPECT(v == i, "bcast %d: %d", i, v);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* Operators and types are made the same on every rank, in the same
     * order: here by one thread of each. */
    OK(MPI_Op_create(maximum, 1, &op));
    OK(MPI_Allreduce(&rank, &m, 1, MPI_INT, op, MPI_COMM_WORLD));
    EXPECT(m == p - 1, "user max %d: %d", i, m);
    OK(MPI_Op_free(&op));
    OK(MPI_Type_contiguous(2, MPI_INT, &two));
    OK(MPI_Type_commit(&two));
    OK(MPI_Type_free(&two));
    OK(MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &two));
    OK(MPI_Type_commit(&two));
    OK(MPI_Type_free(&two));
    /* An attribute on the world while the others use their dups. */
    int key = MPI_KEYVAL_INVALID, flag = 0;
    int *val = NULL;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN,
                              &key, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &v));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &val, &flag));
    EXPECT(flag && val == &v, "attribute %d", i);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
    OK(MPI_Comm_free_keyval(&key));
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "round", "x"));
    OK(MPI_Info_free(&info));
    EXPECT(MPI_Wtime() > 0, "wtime");
  }
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  void *detached = NULL;
  int detached_size = 0;
  OK(MPI_Buffer_detach(&detached, &detached_size));
  EXPECT(detached == bsend_space, "detached %p", detached);
  OK(MPI_Comm_free(&a));
  OK(MPI_Comm_free(&b));
  OK(MPI_Finalize());
  if (atomic_load(&failures) == 0 && rank == 0)
    printf("mpi_threads: p = %d: every check held\n", p);
  return atomic_load(&failures) == 0 ? 0 : 1;
}
