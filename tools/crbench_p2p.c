/* crbench --p2p: point-to-point latency and bandwidth between ranks 0 and 1,
 * in the conventions of the OSU micro-benchmarks, so the figures stand
 * beside osu_latency's and osu_bw's of any MPI:
 *
 *   latency  ping-pong: rank 0 sends a message and receives it back (both
 *            blocking), `iters` times after `warmup` untimed ones; the
 *            latency is half the average round trip, in microseconds.
 *            OSU's counts: 10000 iterations and 100 of warm-up up to
 *            8 KiB, 1000 and 10 above (-n and -w set both).
 *   bw       rank 0 starts a window of 64 nonblocking sends, rank 1 64
 *            receives; both wait; rank 1 answers with 4 bytes; `iters`
 *            windows after `warmup`: bandwidth = bytes of the timed
 *            windows / time, in MB/s (10^6 bytes per second). OSU's
 *            counts: 100 windows and 10 of warm-up up to 8 KiB, 20 and 2
 *            above.
 *
 * Buffers are allocated once, page aligned, for the largest size, and
 * touched before timing. Other ranks wait at the final barrier. The output
 * is OSU's two columns, or with --json one object per size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crbench.h"
#include "crnet.h"

#define PROG "crbench"
#define WINDOW 64
#define LARGE 8192

static int counts(const struct options *o, size_t bytes, int *iters,
                  int *warmup) {
  bool large = bytes > LARGE;
  if (o->p2p == CRBENCH_P2P_LATENCY) {
    *iters = large ? 1000 : 10000;
    *warmup = large ? 10 : 100;
  } else {
    *iters = large ? 20 : 100;
    *warmup = large ? 2 : 10;
  }
  if (o->p2p_iters)
    *iters = o->iters;
  if (o->p2p_warmup)
    *warmup = o->warmup;
  return 0;
}

/* One size of the ping-pong: half the average round trip, seconds
 * (rank 0's figure; rank 1 returns 0). */
static int latency(crnet_comm *c, int rank, uint8_t *s, uint8_t *r,
                   size_t bytes, int iters, int warmup, double *out) {
  double t0 = 0;
  int rc = 0;
  for (int i = 0; i < iters + warmup && rc == 0; i++) {
    if (i == warmup)
      t0 = crbench_now();
    if (rank == 0) {
      rc = crnet_send(c, s, bytes, CRNET_BYTE, 1, 1);
      if (rc == 0)
        rc = crnet_recv(c, r, bytes, CRNET_BYTE, 1, 1, NULL);
    } else {
      rc = crnet_recv(c, r, bytes, CRNET_BYTE, 0, 1, NULL);
      if (rc == 0)
        rc = crnet_send(c, s, bytes, CRNET_BYTE, 0, 1);
    }
  }
  *out = (crbench_now() - t0) / (2.0 * iters);
  return rc;
}

/* One size of the windowed stream: bytes per second (rank 0's figure). */
static int bandwidth(crnet_comm *c, int rank, uint8_t *s, uint8_t *r,
                     size_t bytes, int iters, int warmup, double *out) {
  crnet_request *req[WINDOW];
  uint32_t ack = 0;
  double t0 = 0;
  int rc = 0;
  for (int i = 0; i < iters + warmup && rc == 0; i++) {
    if (i == warmup)
      t0 = crbench_now();
    for (int k = 0; k < WINDOW && rc == 0; k++)
      rc = rank == 0 ? crnet_isend(c, s, bytes, CRNET_BYTE, 1, 100, &req[k])
                     : crnet_irecv(c, r, bytes, CRNET_BYTE, 0, 100, NULL,
                                   &req[k]);
    if (rc == 0)
      rc = crnet_waitall(WINDOW, req);
    if (rc == 0)
      rc = rank == 0 ? crnet_recv(c, &ack, 4, CRNET_BYTE, 1, 101, NULL)
                     : crnet_send(c, &ack, 4, CRNET_BYTE, 0, 101);
  }
  *out = (double)bytes * WINDOW * iters / (crbench_now() - t0);
  return rc;
}

int crbench_p2p(crnet_comm *c, const struct options *o) {
  int rank = crnet_comm_rank(c), p = crnet_comm_size(c), rc = 0;
  bool lat = o->p2p == CRBENCH_P2P_LATENCY;
  size_t max = o->max_bytes > 4 ? o->max_bytes : 4;
  uint8_t *s = NULL, *r = NULL;
  if (p < 2) {
    if (rank == 0)
      fprintf(stderr, PROG ": --p2p needs 2 ranks or more (ranks 0 and 1 "
                      "talk, the others wait)\n");
    return EXIT_USAGE;
  }
  if (posix_memalign((void **)&s, 4096, max) != 0 ||
      posix_memalign((void **)&r, 4096, max) != 0) {
    fprintf(stderr, PROG ": rank %d: out of memory\n", rank);
    free(s);
    crnet_comm_abort(c, EXIT_WRONG);
    return EXIT_WRONG;
  }
  memset(s, 'a', max);
  memset(r, 'b', max);
  if (rank == 0 && !o->json)
    printf("# crbench --p2p %s: ranks 0 and 1 of %d (OSU %s conventions)\n"
           "# %-10s %s\n",
           lat ? "latency" : "bw", p, lat ? "osu_latency" : "osu_bw", "Size",
           lat ? "Latency (us)" : "Bandwidth (MB/s)");
  for (size_t bytes = o->min_bytes; bytes <= o->max_bytes && rc == 0;) {
    int iters, warmup;
    double v = 0;
    counts(o, bytes, &iters, &warmup);
    rc = crnet_barrier(c);
    if (rc == 0 && rank < 2)
      rc = lat ? latency(c, rank, s, r, bytes, iters, warmup, &v)
               : bandwidth(c, rank, s, r, bytes, iters, warmup, &v);
    if (rc == 0 && rank == 0) {
      if (o->json)
        printf("{\"mode\": \"%s\", \"bytes\": %zu, \"iters\": %d, \"%s\": "
               "%.3f}\n",
               lat ? "latency" : "bw", bytes, iters,
               lat ? "latency_us" : "bandwidth_MBps", lat ? v * 1e6 : v / 1e6);
      else
        printf("%-12zu %.2f\n", bytes, lat ? v * 1e6 : v / 1e6);
      fflush(stdout);
    }
    if (o->factor == 0)
      bytes += o->increment > 0 ? o->increment : 1;
    else
      bytes = bytes == 0 ? 1 : bytes * o->factor;
  }
  if (rc == 0)
    rc = crnet_barrier(c);
  if (rc != 0)
    fprintf(stderr, PROG ": rank %d: %s: %s\n", rank, crnet_err_name(rc),
            crnet_comm_errmsg(c));
  free(s);
  free(r);
  return rc == 0 ? EXIT_RIGHT : EXIT_WRONG;
}
