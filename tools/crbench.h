/* crbench's parts beside the benchmark loop (crbench.c): the loopback-limit
 * probe (crbench_link.c), the calibration of the cost model
 * (crbench_calibrate.c) and the overlap of nonblocking calls with
 * computation (crbench_overlap.c). Like crbench.c they use crnet's public
 * API only.
 *
 * Every function here is collective: all ranks call it alike, and it
 * returns the same status on every rank (0, or 1 after rank-local reasons
 * on stderr; the caller then aborts the job).
 */
#ifndef CRBENCH_H
#define CRBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

#define PROG "crbench"

/* Wall-clock seconds (CLOCK_MONOTONIC). */
double crbench_now(void);

/* The median of v[0..n) (sorts v). */
double crbench_median(double *v, size_t n);

/* --- the link limit ------------------------------------------------------- */

/* What p ranks get out of their TCP links when every rank streams to its
 * successor at once (rank r to r+1 mod p) over plain sockets, outside
 * crnet: the ceiling a collective's busbw can be held against. */
struct crbench_link {
  char addr[64];            /* the address streamed over (rank 0's) */
  uint64_t bytes_per_rank;  /* streamed by each rank per repetition */
  int reps;                 /* repetitions; figures are medians */
  double aggregate_bps;     /* p · bytes_per_rank / slowest rank's time */
  double share_bps;         /* aggregate / p */
  double rtt_idle_s;        /* 8-byte ping-pong round trip, no load:
                               median over ranks of each rank's median */
  double rtt_loaded_s;      /* the same while every rank streams */
  double rtt_loaded_max_s;  /* the slowest rank's median under load */
};

/* Runs the probe (p >= 2): bytes per rank per repetition, reps
 * repetitions. Fills *out on every rank. */
int crbench_link_limit(crnet_comm *comm, uint64_t bytes, int reps,
                       struct crbench_link *out);

/* Prints the probe's result (rank 0): a text block or one JSON object. */
void crbench_link_print(const struct crbench_link *l, int p, bool json);

/* --- calibration ------------------------------------------------------------- */

struct crbench_calibration {
  size_t max_bytes;     /* the largest message measured */
  int iters, warmup;    /* per measurement */
  crnet_datatype dt;    /* of the reductions measured */
  crnet_op op;
  const char *out_path; /* --tuning-out, or NULL: where the library looks */
  bool json;
};

/* Measures α, β and γ on this job (see crbench_calibrate.c), prints them
 * and the fit (rank 0), and rank 0 writes them into the tuning file. */
int crbench_calibrate(crnet_comm *comm, const struct crbench_calibration *c);

/* --- overlap -------------------------------------------------------------- */

/* The work --overlap runs beside a nonblocking call (a mask: --work both
 * is the two). */
#define CRBENCH_WORK_SLEEP 1u /* nanosleep: the core is free */
#define CRBENCH_WORK_CPU 2u   /* arithmetic in cache: the core is busy */

struct crbench_overlap {
  const char *coll;     /* one crbench_overlap_supports() accepts */
  const char *schedule; /* one name, set for coll on every row */
  const size_t *sizes;  /* the sweep (-b, -e, -f or -i), ascending */
  size_t nsizes;
  crnet_datatype dt;    /* -d */
  crnet_op op;          /* -o, for the reductions */
  int root;             /* -r, for bcast and reduce; below p */
  int iters, warmup;
  unsigned work;        /* CRBENCH_WORK_* */
  int progress_thread;  /* --progress-thread as given to crnet_comm_init
                           (CRNET_PROGRESS_THREAD_*), or -1: not given */
  bool json, verbose;
};

/* Whether --overlap can time collective `coll` (crbench's -c names). */
bool crbench_overlap_supports(const char *coll);

/* For each size and kind of work, times the blocking call, the work
 * alone, and the nonblocking call with the work between its start and
 * its wait, and prints (rank 0) one row each with the overlap. */
int crbench_overlap(crnet_comm *comm, const struct crbench_overlap *o);

#endif
