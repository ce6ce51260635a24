/* crbench's parts beside the benchmark loop (crbench.c): the command line
 * (crbench_options.c), the loopback-limit probe (crbench_link.c), the
 * calibration of the cost model (crbench_calibrate.c) and the overlap of
 * nonblocking calls with computation (crbench_overlap.c). Like crbench.c
 * they use crnet's public API only.
 *
 * Every function of the probe, the calibration and the overlap is
 * collective: all ranks call it alike, and it returns the same status on
 * every rank (0, or 1 after rank-local reasons on stderr; the caller then
 * aborts the job). The command line's functions run before
 * crnet_comm_init and talk to no other rank.
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

/* --- the command line (crbench_options.c) ------------------------------ */

/* crbench's exit statuses, the same on every rank. */
enum {
  EXIT_RIGHT = 0,
  EXIT_WRONG = 1, /* a wrong result, or a failed call */
  EXIT_USAGE = 2,
};

/* What crbench knows of the collectives and the library's names: the
 * entries of the tables -c, -d and -o look names up in. */
enum coll {
  C_ALLREDUCE,
  C_REDUCE_SCATTER,
  C_ALLGATHER,
  C_ALLTOALL,
  C_BCAST,
  C_REDUCE,
  C_SCAN,
  C_EXSCAN,
  C_BARRIER,
  C_GATHER,
  C_SCATTER,
  C_ALLGATHERV, /* uniform counts through crnet_allgatherv */
  C_ALLTOALLV,  /* uniform counts through crnet_alltoallv */
};

/* busbw = algbw · factor (nccl-tests' PERFORMANCE.md). */
enum bus_factor {
  BUS_ALLREDUCE, /* 2(p-1)/p */
  BUS_SPREAD,    /* (p-1)/p */
  BUS_ONE,
};

struct coll_desc {
  const char *name;
  enum coll id;
  crnet_collective schedule_of; /* for crnet_comm_set_schedule */
  bool reduces;                 /* takes -d's operator */
  bool rooted;
  enum bus_factor factor;
};

struct type_desc {
  const char *name;
  crnet_datatype dt;
  size_t size;
  bool is_float;
  bool is_signed;
};

struct op_desc {
  const char *name;
  crnet_op op;
  bool integer_only;
};

/* The command line, parsed; defaults filled in. */
struct options {
  const struct coll_desc *coll;
  const char *schedule; /* as given: a name, a list, or "all" */
  size_t min_bytes, max_bytes;
  size_t factor; /* 0: step by increment */
  size_t increment;
  const struct type_desc *type;
  const struct op_desc *op;
  int iters, warmup, root;
  bool check, json, verbose, help;
  bool calibrate;     /* --calibrate */
  bool link_only;     /* --link-limit */
  bool no_link;       /* --no-link-limit */
  const char *tuning_out;
  bool overlap;        /* --overlap */
  int p2p;             /* --p2p: CRBENCH_P2P_* */
  bool p2p_iters;      /* -n given with --p2p */
  bool p2p_warmup;     /* -w given with --p2p */
  unsigned work;       /* --work: CRBENCH_WORK_* */
  int progress_thread; /* --progress-thread, or -1 */
};

/* The usage text that -h prints (rank 0). */
extern const char crbench_usage[];

/* Whether this process is rank 0 by the environment crlaunch sets (or
 * the only one, without it): usage is spoken of before init. */
bool crbench_env_rank_is_zero(void);

/* Prints "crbench: <fmt...> (crbench -h for help)" on stderr if speak. */
void crbench_usage_error(bool speak, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses argv into *o. Returns 0, or EXIT_USAGE after one line on stderr
 * (from rank 0 only). Checks that need p are left to the caller. */
int crbench_parse_args(int argc, char **argv, struct options *o);

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

/* --- point-to-point ------------------------------------------------------- */

/* --p2p: ping-pong latency or windowed bandwidth between ranks 0 and 1, as
 * the OSU micro-benchmarks' osu_latency and osu_bw (crbench_p2p.c). */
enum { CRBENCH_P2P_NONE = 0, CRBENCH_P2P_LATENCY, CRBENCH_P2P_BW };
int crbench_p2p(crnet_comm *comm, const struct options *o);

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
