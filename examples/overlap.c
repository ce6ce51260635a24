/* overlap: computing while a collective is in flight.
 *
 *   crlaunch -n 4 ./overlap [steps [cells]]
 *
 * Every rank runs one member of an ensemble: a periodic 1-D heat equation
 * on `cells` integer cells (default 300 steps of 32768 cells), with a heat
 * source of its own, nudged at every step toward the ensemble mean. A step
 * turns the field u into the next one:
 *
 *     sum = allreduce(u)                 the ensemble's total, cell by cell
 *     v   = smooth(u)                    local: SWEEPS diffusion sweeps
 *     u   = v + (sum - p*u) / (4*p)      a quarter of the way to the mean
 *
 * The allreduce and the smoothing only read u, so the smoothing can run
 * while the allreduce is in flight: crnet_iallreduce starts it, the
 * smoothing runs (calling crnet_test between chunks of cells, so that the
 * request moves on even where there is no progress thread), crnet_wait
 * returns the sum, and the nudge uses it. Until then u, the send buffer, is
 * only read, and sum, the receive buffer, is not touched.
 *
 * The program runs the steps twice: overlapped as above, and plainly with
 * the blocking crnet_allreduce before the smoothing. The arithmetic is the
 * same and integer (sums are exact in any order), so every rank's cells
 * must come out bitwise identical. Rank 0 prints one line with the outcome
 * and both times (the slowest rank's); the exit status is 1 if any cell
 * differs or a call fails. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <crnet.h>

enum {
  SWEEPS = 4,   /* diffusion sweeps per step */
  CHUNK = 4096, /* cells smoothed between two crnet_test calls */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The request in flight during the smoothing, and its result once done. */
typedef struct inflight {
  crnet_request *req; /* NULL: none, or done (then rc is its result) */
  int rc;
} inflight;

/* Lets crnet move the request on; cheap, never sleeps. */
static void poll_request(inflight *f) {
  int done;
  if (f->req == NULL)
    return;
  int rc = crnet_test(&f->req, &done);
  if (done || rc != 0)
    f->rc = rc;
}

/* v = SWEEPS sweeps of u[i] := (u[i-1] + 2 u[i] + u[i+1]) / 4 over the
 * periodic field u, plus this rank's heat source; a and b are scratch, and
 * the result is one of them. u is only read. With f, polls between chunks. */
static int64_t *smooth(const int64_t *u, int64_t *a, int64_t *b, size_t n,
                       size_t source, int64_t heat, inflight *f) {
  const int64_t *in = u;
  int64_t *out = a, *v = a;
  for (int s = 0; s < SWEEPS; s++) {
    for (size_t lo = 0; lo < n; lo += CHUNK) {
      size_t hi = lo + CHUNK < n ? lo + CHUNK : n;
      for (size_t i = lo; i < hi; i++) {
        int64_t left = in[i == 0 ? n - 1 : i - 1];
        int64_t right = in[i + 1 == n ? 0 : i + 1];
        out[i] = (left + 2 * in[i] + right) / 4;
      }
      if (f != NULL)
        poll_request(f);
    }
    v = out;
    in = out;
    out = out == a ? b : a;
  }
  v[source] += heat;
  return v;
}

/* u = v + (sum - p*u) / (4p), cell by cell. */
static void nudge(int64_t *u, const int64_t *v, const int64_t *sum, size_t n,
                  int p) {
  for (size_t i = 0; i < n; i++)
    u[i] = v[i] + (sum[i] - p * u[i]) / (4 * p);
}

/* This rank's starting field: pseudo-random values below 2^20. */
static void start_field(int64_t *u, size_t n, int rank) {
  uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(rank + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    u[i] = (int64_t)(x >> 44);
  }
}

static int fail(crnet_comm *comm, const char *call, int rc) {
  fprintf(stderr, "rank %d: %s: %s: %s\n", crnet_comm_rank(comm), call,
          crnet_strerror(rc), crnet_comm_errmsg(comm));
  crnet_comm_destroy(comm);
  return 1;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 300;
  size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 32768;
  crnet_comm *comm;
  int rc, rank, p;

  if (steps < 1 || n < 1) {
    fprintf(stderr, "usage: overlap [steps [cells]] (both at least 1)\n");
    return 2;
  }
  rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "crnet_comm_init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    return 1;
  }
  rank = crnet_comm_rank(comm);
  p = crnet_comm_size(comm);

  int64_t *u = malloc(n * sizeof *u);     /* the overlapped run's field */
  int64_t *ref = malloc(n * sizeof *ref); /* the blocking run's field */
  int64_t *sum = malloc(n * sizeof *sum);
  int64_t *a = malloc(n * sizeof *a);
  int64_t *b = malloc(n * sizeof *b);
  if (u == NULL || ref == NULL || sum == NULL || a == NULL || b == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    crnet_comm_abort(comm, 1);
    crnet_comm_destroy(comm);
    return 1;
  }
  size_t source = (size_t)rank * n / (size_t)p;
  int64_t heat = 4096 * (int64_t)(rank + 1);
  double t[2]; /* seconds: overlapped, blocking */

  /* One untimed allreduce of the full size first: links, socket buffers
   * and the pages of sum are then warm for both runs alike. */
  start_field(u, n, rank);
  if ((rc = crnet_allreduce(comm, u, sum, n, CRNET_INT64, CRNET_SUM)) != 0)
    return fail(comm, "crnet_allreduce", rc);

  /* Blocking: the reduction, then the local work. */
  start_field(ref, n, rank);
  if ((rc = crnet_barrier(comm)) != 0)
    return fail(comm, "crnet_barrier", rc);
  double t0 = now_s();
  for (int k = 0; k < steps; k++) {
    rc = crnet_allreduce(comm, ref, sum, n, CRNET_INT64, CRNET_SUM);
    if (rc != 0)
      return fail(comm, "crnet_allreduce", rc);
    int64_t *v = smooth(ref, a, b, n, source, heat, NULL);
    nudge(ref, v, sum, n, p);
  }
  t[1] = now_s() - t0;

  /* Overlapped: the reduction in flight during the local work. */
  start_field(u, n, rank);
  if ((rc = crnet_barrier(comm)) != 0)
    return fail(comm, "crnet_barrier", rc);
  t0 = now_s();
  for (int k = 0; k < steps; k++) {
    inflight f = {NULL, 0};
    rc = crnet_iallreduce(comm, u, sum, n, CRNET_INT64, CRNET_SUM, &f.req);
    if (rc != 0)
      return fail(comm, "crnet_iallreduce", rc);
    int64_t *v = smooth(u, a, b, n, source, heat, &f);
    if (f.req != NULL)
      f.rc = crnet_wait(&f.req);
    if (f.rc != 0)
      return fail(comm, "crnet_iallreduce (its wait)", f.rc);
    nudge(u, v, sum, n, p);
  }
  t[0] = now_s() - t0;

  /* The check: every cell of every rank, and the slowest rank's times. */
  int64_t wrong = 0;
  size_t first = n;
  for (size_t i = 0; i < n; i++)
    if (u[i] != ref[i]) {
      wrong++;
      if (first == n)
        first = i;
    }
  if (wrong != 0)
    fprintf(stderr,
            "rank %d: %" PRId64 " of %zu cells differ; the first, cell %zu: "
            "overlapped %" PRId64 ", blocking %" PRId64 "\n",
            rank, wrong, n, first, u[first], ref[first]);
  if ((rc = crnet_allreduce(comm, CRNET_IN_PLACE, &wrong, 1, CRNET_INT64,
                            CRNET_SUM)) != 0)
    return fail(comm, "crnet_allreduce", rc);
  if ((rc = crnet_allreduce(comm, CRNET_IN_PLACE, t, 2, CRNET_DOUBLE,
                            CRNET_MAX)) != 0)
    return fail(comm, "crnet_allreduce", rc);
  if (rank == 0) {
    const char *thread = getenv("CRNET_PROGRESS_THREAD");
    printf("overlap over %d ranks, %d steps of %zu int64 cells: %s; "
           "overlapped %.1f ms, blocking %.1f ms (%.2fx); "
           "CRNET_PROGRESS_THREAD=%s\n",
           p, steps, n, wrong == 0 ? "results identical" : "RESULTS DIFFER",
           t[0] * 1e3, t[1] * 1e3, t[0] > 0 ? t[1] / t[0] : 0.0,
           thread != NULL && thread[0] != '\0' ? thread : "auto");
  }

  free(u);
  free(ref);
  free(sum);
  free(a);
  free(b);
  rc = crnet_comm_destroy(comm);
  if (rc != 0) {
    fprintf(stderr, "rank %d: crnet_comm_destroy: %s\n", rank,
            crnet_strerror(rc));
    return 1;
  }
  return wrong == 0 ? 0 : 1;
}
