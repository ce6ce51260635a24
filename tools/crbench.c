/* crbench: times crnet collectives over a range of sizes and schedules, in
 * the conventions of nccl-tests, and optionally checks every result.
 *
 *   crlaunch -n P crbench -c allreduce -s all -b 8 -e 64M -f 2 [--check]
 *
 * It is written as an external user would write it: it includes crnet.h only
 * and links against the installed library, so it measures what applications
 * get. `crbench -h` prints the full usage text (USAGE below), which is also
 * the reference for the options; docs/PERFORMANCE.md has a short summary.
 *
 * Sizes (as nccl-tests count them): `size` is the byte size of the largest
 * buffer of one rank. allreduce, reduce, bcast, scan, exscan: count =
 * size / typesize. reduce_scatter: the send buffer holds size / typesize
 * elements rounded down to a multiple of p, and each rank gets recvcount =
 * that / p. allgather: size is the receive buffer, count = size / typesize / p
 * per rank. alltoall: size is the send buffer, count = size / typesize / p per
 * peer. The size column is the size after that rounding; the count column is
 * the count argument of the call. The buffers are allocated once, 64-byte
 * aligned, for the largest size, and reused.
 *
 * Timing: for each (size, schedule) row, `warmup` calls, then `iters`
 * repetitions of [crnet_barrier; time one call with CLOCK_MONOTONIC] on every
 * rank; one allreduce (MAX) of the array of per-repetition times gives each
 * repetition's slowest rank, and the row's time is the median of those.
 * algbw = size / time; busbw = algbw · factor, the factor that makes busbw
 * comparable with the link bandwidth: 2(p-1)/p for allreduce, (p-1)/p for
 * reduce_scatter, allgather and alltoall, 1 for the others. A barrier moves no
 * data: one row per schedule with size 0 and bandwidths 0.
 *
 * Bookkeeping calls (the allreduces of times and wrong counts, and the
 * barriers before timed calls) run on the "auto" schedule, so that a schedule
 * under test never decides its own verdict; only when the barrier itself is
 * benchmarked do the timing barriers use the schedule under test. crbench sets
 * the schedule of the benchmarked collective on every row, so the
 * CRNET_<COLLECTIVE>_SCHEDULE variables have no effect on it: use -s.
 *
 * Inputs: always filled with the check pattern, so timing runs see the same
 * (ordinary, finite) values whether checking or not. Reductions take element i
 * of rank r from a hash h(r, i), shaped per operator so that the exact result
 * is a small integer or a bit pattern that every datatype holds:
 *
 *   sum        h % 4 (0..3); for float16 only the first 682 ranks contribute
 *              and for bfloat16 the first 85 (others give 0), so that every
 *              partial sum is an integer the type holds exactly (2048, 256);
 *              integer types wrap, as the library's kernels do
 *   prod       2 on the rank r = i mod p, 1 elsewhere
 *   min, max   h % 101, minus 50 for signed integer and floating types
 *   band       all ones but bit h % width; bor: bit h % width; bxor: h
 *   land, lor  one rank (chosen by i, or none) gives 0 (land) or nonzero
 *              (lor), the others nonzero 1..3 (land) or 0 (lor)
 *
 * and the expected result is folded here from the same function, in 64-bit
 * integers, independently of the library. Data movement (allgather, alltoall,
 * bcast) moves bytes hashed from (source rank, destination rank, index), so
 * every element is checked against exactly the rank and place it came from.
 *
 * --check: after the timed calls, one more call per row checks the result.
 * Beforehand every element of the receive buffer that the call must write is
 * set to the complement of its expected value, so an element left unwritten
 * counts as wrong; elements the API says the call leaves alone (rank 0's
 * receive buffer in exscan, non-roots' in reduce, the root's buffer in bcast)
 * are set to a known pattern that must survive. #wrong is the number of wrong
 * elements summed over ranks. CRBENCH_CORRUPT=<rank> (for tests: pass it with
 * crlaunch -x) makes that rank flip one byte of each checked result, to show
 * the failure path works.
 *
 * Efficiency: when the sweep reaches EFFICIENCY_MIN_BYTES (and p >= 2),
 * crbench first runs the link-limit probe (crbench_link.c: every rank
 * streaming to its successor over plain TCP at once) and prints, beside
 * every row of at least that size, efficiency = busbw / (aggregate / p):
 * how much of what this machine's TCP can do in that pattern the
 * collective gets. --no-link-limit skips the probe; --link-limit runs it
 * alone. --calibrate (crbench_calibrate.c) measures the cost model's
 * constants for `auto` and writes the tuning file. --overlap
 * (crbench_overlap.c) measures how much of a nonblocking call hides
 * behind computation that makes no crnet call.
 *
 * Errors: bad arguments give one line on stderr (from rank 0) and exit status
 * 2 on every rank; the arguments are parsed before crnet_comm_init, and the
 * checks that need p (the root, the schedule names) right after it, alike on
 * every rank, so all ranks agree without talking. A call that returns
 * CRNET_EUNSUPPORTED (hypercube all-to-all at a p that is not a power of two)
 * skips that row with a note on stderr; any other failure prints
 * crnet_comm_errmsg(), aborts the job and exits 1. Exit status 1 too when any
 * #wrong is not 0.
 */
/* getopt_long, strdup and clock_gettime beside C11, for a build outside
 * meson too (meson defines it already). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crbench.h"
#include "crnet.h"

#define BUF_ALIGN 64
#define DEFAULT_ITERS 20
#define DEFAULT_WARMUP 5
#define DEFAULT_MIN_BYTES ((size_t)32 << 20) /* as nccl-tests */
#define DEFAULT_FACTOR 2
/* Progress on stderr for a size whose rows took longer than this. */
#define PROGRESS_SECONDS 1.0
/* Exactly representable integers: float16 up to 2^11, bfloat16 up to 2^8. */
#define FLOAT16_EXACT 2048
#define BFLOAT16_EXACT 256
#define SUM_MAX_INPUT 3
/* Untouched receive buffers are filled from this pseudo source rank. */
#define UNTOUCHED_SOURCE 0x7fffffffu
/* Rows of at least this size get an efficiency, against the link limit. */
#define EFFICIENCY_MIN_BYTES ((size_t)1 << 20)
/* The link-limit probe: bytes each rank streams per repetition, and
 * repetitions. */
#define LINK_BYTES ((uint64_t)64 << 20)
#define LINK_REPS 3
/* --calibrate's largest message unless -e says otherwise: where auto's
 * choices are made (crossovers lie between a few KiB and a few hundred);
 * beyond about 1 MiB TCP loopback's cost per byte grows on the machines
 * measured so far (docs/TUNING.md), which no linear model fits. */
#define CALIBRATE_MAX_BYTES ((size_t)1 << 20)
/* --overlap's sweep unless -b, -e, -f, -w say otherwise: from where a
 * call lasts long enough to hide something worth hiding (about a
 * millisecond on loopback) to where it lasts a tenth of a second, in four
 * steps, so that the default run stays under a minute at p = 2 on two
 * cores (each repetition runs the call, the work and both together). */
#define OVERLAP_MIN_BYTES ((size_t)1 << 20)
#define OVERLAP_MAX_BYTES ((size_t)64 << 20)
#define OVERLAP_FACTOR 4
#define OVERLAP_ITERS 20
#define OVERLAP_WARMUP 3

enum {
  EXIT_RIGHT = 0,
  EXIT_WRONG = 1, /* a wrong result, or a failed call */
  EXIT_USAGE = 2,
};

static const char USAGE[] =
    "NAME\n"
    "    crbench - time crnet collectives, in the conventions of nccl-tests\n"
    "\n"
    "SYNOPSIS\n"
    "    crlaunch -n P crbench [-c COLL] [-s SCHEDULE] [-b MIN] [-e MAX]\n"
    "                          [-f FACTOR | -i INCREMENT] [-d TYPE] [-o OP]\n"
    "                          [-n ITERS] [-w WARMUP] [-r ROOT]\n"
    "                          [--check] [--json] [--no-link-limit] [-v]\n"
    "                          [-h]\n"
    "    crlaunch -n P crbench --link-limit [--json]\n"
    "    crlaunch -n P crbench --calibrate [--tuning-out FILE] [-e MAX]\n"
    "                          [-n ITERS] [-w WARMUP] [-d TYPE] [-o OP]\n"
    "                          [--json]\n"
    "    crlaunch -n P crbench --overlap [--work sleep|cpu|both]\n"
    "                          [--progress-thread on|off|auto] [-c COLL]\n"
    "                          [-s SCHEDULE] [-b MIN] [-e MAX]\n"
    "                          [-f FACTOR | -i INCREMENT] [-d TYPE] [-o OP]\n"
    "                          [-n ITERS] [-w WARMUP] [-r ROOT] [--json]\n"
    "                          [-v]\n"
    "\n"
    "DESCRIPTION\n"
    "    For each size from MIN to MAX and each schedule, runs WARMUP calls\n"
    "    of the collective, then ITERS repetitions of (barrier; one timed\n"
    "    call). The time of a repetition is the slowest rank's; a row shows\n"
    "    the median over repetitions. Rank 0 prints one row per (size,\n"
    "    schedule) on stdout:\n"
    "\n"
    "      size(B)    bytes of the largest buffer of one rank (see SIZES)\n"
    "      count      the count argument of the call\n"
    "      type redop the datatype and operator (none: not a reduction)\n"
    "      schedule   the schedule; root: the root, -1 for rootless calls\n"
    "      time(us)   median over repetitions of the slowest rank's time\n"
    "      algbw      size / time, in GB/s (10^9 bytes per second)\n"
    "      busbw      algbw x 2(p-1)/p (allreduce), x (p-1)/p\n"
    "                 (reduce_scatter, allgather, alltoall), x 1 (others)\n"
    "      #wrong     wrong elements summed over ranks (--check), else N/A\n"
    "      eff        busbw / (link limit / p), for sizes of 1 MiB and\n"
    "                 more (see LINK LIMIT); the column is there only when\n"
    "                 the sweep reaches 1 MiB\n"
    "\n"
    "OPTIONS\n"
    "    -c, --coll COLL      allreduce (default), reduce_scatter, allgather,\n"
    "                         alltoall, bcast, reduce, scan, exscan, barrier\n"
    "    -s, --schedule S     a schedule name (auto, circulant,\n"
    "                         circulant-doubling, circulant-linear,\n"
    "                         circulant-sqrt, ring, hypercube, rabenseifner,\n"
    "                         star, pairwise, bruck, allgather-reduce), a\n"
    "                         comma-separated list\n"
    "                         of them, or all: every schedule that can do\n"
    "                         COLL. Default auto\n"
    "    -b, --minbytes N     smallest size (default 32M); K, M, G suffixes\n"
    "                         are powers of 1024\n"
    "    -e, --maxbytes N     largest size (default: MIN)\n"
    "    -f, --stepfactor F   multiply the size by F (>= 2) each step\n"
    "                         (default 2)\n"
    "    -i, --stepbytes N    add N bytes each step instead\n"
    "    -d, --datatype T     int8 uint8 int16 uint16 int32 uint32 int64\n"
    "                         uint64 float16 (half) bfloat16 float (default)\n"
    "                         double\n"
    "    -o, --op OP          sum (default) prod min max band bor bxor land\n"
    "                         lor; band, bor, bxor need an integer type\n"
    "    -n, --iters N        timed repetitions per row (default 20)\n"
    "    -w, --warmup_iters N untimed calls per row first (default 5)\n"
    "    -r, --root R         root of bcast and reduce (default 0)\n"
    "        --check          check every row's result (one more call)\n"
    "        --json           one JSON object per row instead of the table:\n"
    "                         coll size count type op schedule root p time_us\n"
    "                         algbw_gbps busbw_gbps wrong (null unchecked)\n"
    "                         iters link_gbps efficiency (null below 1 MiB\n"
    "                         or without the probe)\n"
    "        --no-link-limit  no link-limit probe, no efficiency\n"
    "        --link-limit     only the link-limit probe: print it and exit\n"
    "        --calibrate      measure the cost model's alpha, beta, gamma,\n"
    "                         ring_round for auto and write the tuning\n"
    "                         file (see CALIBRATION)\n"
    "        --tuning-out F   --calibrate writes F instead of the file the\n"
    "                         library reads\n"
    "        --overlap        how much of a nonblocking call hides behind\n"
    "                         computation (see OVERLAP); defaults there:\n"
    "                         -b 1M -e 64M -f 4 -n 20 -w 3\n"
    "        --work W         --overlap's work: sleep, cpu or both\n"
    "                         (default)\n"
    "        --progress-thread M\n"
    "                         --overlap: the job's progress thread on, off\n"
    "                         or auto (crnet_config.progress_thread),\n"
    "                         instead of CRNET_PROGRESS_THREAD\n"
    "    -v, --verbose        progress after every size, and a note for each\n"
    "                         schedule -s all leaves out\n"
    "    -h, --help           print this text and exit\n"
    "\n"
    "SIZES\n"
    "    As nccl-tests: allreduce, reduce, bcast, scan, exscan send and\n"
    "    receive size/typesize elements. reduce_scatter sends size/typesize\n"
    "    elements rounded down to a multiple of p and each rank receives\n"
    "    1/p of them. allgather receives size bytes, size/typesize/p\n"
    "    elements from each rank. alltoall sends size bytes,\n"
    "    size/typesize/p elements to each peer.\n"
    "\n"
    "CHECKING\n"
    "    Inputs are always small integers or bit patterns whose exact\n"
    "    result every datatype holds; --check computes each expected\n"
    "    element independently and, before the checked call, fills the\n"
    "    receive buffer with the complement of the expected values, so an\n"
    "    element left unwritten counts as wrong. Buffers the call must\n"
    "    leave alone (exscan at rank 0, reduce at non-roots, bcast at the\n"
    "    root) must come back unchanged. Moved data (allgather, alltoall,\n"
    "    bcast) is checked against its source rank and index.\n"
    "\n"
    "LINK LIMIT\n"
    "    Before a sweep that reaches 1 MiB (p >= 2), every rank opens a\n"
    "    plain TCP connection to the next rank (r to r+1 mod p) on the\n"
    "    address that reaches the job, and all stream 64 MiB at once while\n"
    "    timing 8-byte ping-pongs on a second connection; median of 3. The\n"
    "    aggregate is p x 64 MiB / the slowest rank's time; aggregate / p\n"
    "    is what one rank can push while all do, the ceiling for busbw:\n"
    "    eff = busbw / (aggregate / p). The header shows the limit and the\n"
    "    round trip idle and under that load.\n"
    "\n"
    "CALIBRATION\n"
    "    --calibrate times barrier, allreduce of p elements (circulant,\n"
    "    ring, hypercube), allgather (circulant, ring, hypercube) and\n"
    "    reduce_scatter (circulant, ring) of MAX/16, MAX/4 and MAX bytes\n"
    "    (-e, default 1M) and allreduce (hypercube, circulant) of MAX/16,\n"
    "    MAX/4 and MAX/2, fits time = rounds x alpha (x ring_round for\n"
    "    ring) + bytes moved x beta + bytes reduced x gamma by least\n"
    "    squares in relative error, prints the fit, and rank 0 writes\n"
    "    alpha, beta, gamma, ring_round and their KEY.P lines for this P\n"
    "    into --tuning-out or the file the library reads\n"
    "    (CRNET_TUNING_FILE, else\n"
    "    $XDG_CONFIG_HOME/crnet/tuning or ~/.config/crnet/tuning),\n"
    "    keeping the figures of other P. The next job's auto uses them\n"
    "    (docs/TUNING.md).\n"
    "\n"
    "OVERLAP\n"
    "    --overlap times, per size and kind of work, each the median over\n"
    "    ITERS repetitions of the slowest rank's time:\n"
    "      t_comm   one blocking call of COLL (-c: any but barrier)\n"
    "      t_work   the work alone, made to last the median t_comm of a\n"
    "               first pass (the same on every rank)\n"
    "      t_over   the nonblocking call started, the work, then its wait\n"
    "    and prints overlap = 1 - (t_over - max(t_comm, t_work)) /\n"
    "    min(t_comm, t_work), not clamped: 1 the shorter hid entirely\n"
    "    behind the longer, 0 they ran in turn. A repetition is barrier,\n"
    "    call, barrier, work, barrier, overlapped run. The work makes no\n"
    "    crnet call, so only a progress thread moves the request meanwhile.\n"
    "    sleep: nanosleep (the core is free, as while waiting on a disk);\n"
    "    cpu: multiply-adds in cache, calibrated per rank (the core is\n"
    "    busy). One schedule (-s NAME or auto). Columns: size(B) count type\n"
    "    redop schedule t_comm(us) t_work(us) t_over(us) overlap work; the\n"
    "    header says p and the progress thread setting (--progress-thread,\n"
    "    else CRNET_PROGRESS_THREAD, else default). --json: one object per\n"
    "    row: mode coll size count type op schedule root p work t_comm_us\n"
    "    t_work_us t_over_us overlap progress_thread progress_thread_from\n"
    "    iters warmup.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 every result right (or unchecked); 1 a wrong result or a failed\n"
    "    call (crnet_comm_errmsg on stderr); 2 bad usage.\n"
    "\n"
    "EXAMPLES\n"
    "    crlaunch -n 8 crbench -c allreduce -s all -b 8 -e 64M -f 4 --check\n"
    "    crlaunch -n 4 crbench -c alltoall -s bruck,pairwise -b 1K -e 1M "
    "--json\n"
    "    crlaunch -n 4 crbench --calibrate\n"
    "    crlaunch -n 4 crbench --link-limit\n"
    "    crlaunch -n 2 -x CRNET_PROGRESS_THREAD=1 crbench --overlap\n";

/* ------------------------------------------------------------------------
 * What crbench knows of the collectives and the library's names.
 */

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

static const struct coll_desc colls[] = {
    {"allreduce", C_ALLREDUCE, CRNET_COLL_ALLREDUCE, true, false,
     BUS_ALLREDUCE},
    {"reduce_scatter", C_REDUCE_SCATTER, CRNET_COLL_REDUCE_SCATTER, true, false,
     BUS_SPREAD},
    {"allgather", C_ALLGATHER, CRNET_COLL_ALLGATHER, false, false, BUS_SPREAD},
    {"alltoall", C_ALLTOALL, CRNET_COLL_ALLTOALL, false, false, BUS_SPREAD},
    {"bcast", C_BCAST, CRNET_COLL_BCAST, false, true, BUS_ONE},
    {"reduce", C_REDUCE, CRNET_COLL_REDUCE, true, true, BUS_ONE},
    {"scan", C_SCAN, CRNET_COLL_SCAN, true, false, BUS_ONE},
    {"exscan", C_EXSCAN, CRNET_COLL_SCAN, true, false, BUS_ONE},
    {"barrier", C_BARRIER, CRNET_COLL_BARRIER, false, false, BUS_ONE},
};
#define NCOLLS (sizeof colls / sizeof colls[0])

/* Every schedule name crnet documents; -s all tries each in this order.
 * -s with names passes them to the library as they are, so a schedule added
 * later works there before it is listed here. */
static const char *const known_schedules[] = {
    "auto",
    "circulant",
    "circulant-doubling",
    "circulant-linear",
    "circulant-sqrt",
    "ring",
    "hypercube",
    "rabenseifner",
    "star",
    "pairwise",
    "bruck",
    "allgather-reduce",
};
#define NKNOWN (sizeof known_schedules / sizeof known_schedules[0])
#define MAX_SCHEDULES 32 /* names in one -s list */

struct type_desc {
  const char *name;
  crnet_datatype dt;
  size_t size;
  bool is_float;
  bool is_signed;
};

static const struct type_desc types[] = {
    {"int8", CRNET_INT8, 1, false, true},
    {"uint8", CRNET_UINT8, 1, false, false},
    {"int16", CRNET_INT16, 2, false, true},
    {"uint16", CRNET_UINT16, 2, false, false},
    {"int32", CRNET_INT32, 4, false, true},
    {"uint32", CRNET_UINT32, 4, false, false},
    {"int64", CRNET_INT64, 8, false, true},
    {"uint64", CRNET_UINT64, 8, false, false},
    {"float16", CRNET_FLOAT16, 2, true, true},
    {"half", CRNET_FLOAT16, 2, true, true},
    {"bfloat16", CRNET_BFLOAT16, 2, true, true},
    {"float", CRNET_FLOAT, 4, true, true},
    {"double", CRNET_DOUBLE, 8, true, true},
};
#define NTYPES (sizeof types / sizeof types[0])

struct op_desc {
  const char *name;
  crnet_op op;
  bool integer_only;
};

static const struct op_desc ops[] = {
    {"sum", CRNET_SUM, false},  {"prod", CRNET_PROD, false},
    {"min", CRNET_MIN, false},  {"max", CRNET_MAX, false},
    {"band", CRNET_BAND, true}, {"bor", CRNET_BOR, true},
    {"bxor", CRNET_BXOR, true}, {"land", CRNET_LAND, false},
    {"lor", CRNET_LOR, false},
};
#define NOPS (sizeof ops / sizeof ops[0])

/* ------------------------------------------------------------------------
 * Options.
 */

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
  unsigned work;       /* --work: CRBENCH_WORK_* */
  int progress_thread; /* --progress-thread, or -1 */
};

/* Only rank 0 talks about usage. Before init the rank comes from the
 * environment contract crlaunch sets; without it this is a job of one. */
static bool env_rank_is_zero(void) {
  const char *s = getenv("CRNET_RANK");
  return s == NULL || s[0] == '\0' || strtol(s, NULL, 10) == 0;
}

static void usage_error(bool speak, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void usage_error(bool speak, const char *fmt, ...) {
  va_list ap;
  if (!speak)
    return;
  fprintf(stderr, PROG ": ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (" PROG " -h for help)\n");
}

/* A byte count: decimal digits and an optional K, M or G (powers of 1024). */
static bool parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v, mult = 1;
  if (s[0] < '0' || s[0] > '9')
    return false;
  v = strtoull(s, &end, 10);
  switch (*end) {
  case 'k':
  case 'K':
    mult = 1ull << 10;
    end++;
    break;
  case 'm':
  case 'M':
    mult = 1ull << 20;
    end++;
    break;
  case 'g':
  case 'G':
    mult = 1ull << 30;
    end++;
    break;
  default:
    break;
  }
  if (*end != '\0' || v > SIZE_MAX / mult)
    return false;
  *out = (size_t)(v * mult);
  return true;
}

static bool parse_int(const char *s, int min, int *out) {
  char *end;
  long v;
  if ((s[0] < '0' || s[0] > '9') && s[0] != '-')
    return false;
  v = strtol(s, &end, 10);
  if (*end != '\0' || v < min || v > 1000000000L)
    return false;
  *out = (int)v;
  return true;
}

enum {
  OPT_CHECK = 256,
  OPT_JSON,
  OPT_CALIBRATE,
  OPT_TUNING_OUT,
  OPT_LINK_LIMIT,
  OPT_NO_LINK_LIMIT,
  OPT_OVERLAP,
  OPT_WORK,
  OPT_PROGRESS_THREAD
};

/* Parses argv into *o. Returns 0, or EXIT_USAGE after one line on stderr
 * (from rank 0 only). */
static int parse_args(int argc, char **argv, struct options *o) {
  static const struct option longopts[] = {
      {"coll", required_argument, NULL, 'c'},
      {"schedule", required_argument, NULL, 's'},
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"stepbytes", required_argument, NULL, 'i'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"root", required_argument, NULL, 'r'},
      {"check", no_argument, NULL, OPT_CHECK},
      {"json", no_argument, NULL, OPT_JSON},
      {"calibrate", no_argument, NULL, OPT_CALIBRATE},
      {"tuning-out", required_argument, NULL, OPT_TUNING_OUT},
      {"link-limit", no_argument, NULL, OPT_LINK_LIMIT},
      {"no-link-limit", no_argument, NULL, OPT_NO_LINK_LIMIT},
      {"overlap", no_argument, NULL, OPT_OVERLAP},
      {"work", required_argument, NULL, OPT_WORK},
      {"progress-thread", required_argument, NULL, OPT_PROGRESS_THREAD},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool speak = env_rank_is_zero(), have_max = false, have_factor = false,
       have_increment = false, have_min = false, have_iters = false,
       have_warmup = false, have_work = false;
  int ch, v;

  memset(o, 0, sizeof *o);
  o->coll = &colls[0];
  o->schedule = "auto";
  o->min_bytes = DEFAULT_MIN_BYTES;
  o->factor = DEFAULT_FACTOR;
  o->type = &types[11]; /* float */
  o->op = &ops[0];      /* sum */
  o->iters = DEFAULT_ITERS;
  o->warmup = DEFAULT_WARMUP;
  o->work = CRBENCH_WORK_SLEEP | CRBENCH_WORK_CPU;
  o->progress_thread = -1;

  opterr = 0;
  while ((ch = getopt_long(argc, argv, ":c:s:b:e:f:i:d:o:n:w:r:vh", longopts,
                           NULL)) != -1) {
    switch (ch) {
    case 'c': {
      size_t k = 0;
      while (k < NCOLLS && strcmp(optarg, colls[k].name) != 0)
        k++;
      if (k == NCOLLS) {
        usage_error(speak, "unknown collective '%s'", optarg);
        return EXIT_USAGE;
      }
      o->coll = &colls[k];
      break;
    }
    case 's':
      if (optarg[0] == '\0') {
        usage_error(speak, "empty schedule name");
        return EXIT_USAGE;
      }
      o->schedule = optarg;
      break;
    case 'b':
    case 'e':
    case 'i': {
      size_t n;
      if (!parse_size(optarg, &n)) {
        usage_error(speak, "-%c: '%s' is not a byte count (N, NK, NM, NG)", ch,
                    optarg);
        return EXIT_USAGE;
      }
      if (ch == 'b') {
        o->min_bytes = n;
        have_min = true;
      } else if (ch == 'e') {
        o->max_bytes = n;
        have_max = true;
      } else if (n == 0) {
        usage_error(speak, "-i: the increment must be at least 1 byte");
        return EXIT_USAGE;
      } else {
        o->increment = n;
        have_increment = true;
      }
      break;
    }
    case 'f':
      if (!parse_int(optarg, 2, &v)) {
        usage_error(speak, "-f: '%s' is not a factor >= 2", optarg);
        return EXIT_USAGE;
      }
      o->factor = (size_t)v;
      have_factor = true;
      break;
    case 'd': {
      size_t k = 0;
      while (k < NTYPES && strcmp(optarg, types[k].name) != 0)
        k++;
      if (k == NTYPES) {
        usage_error(speak, "unknown datatype '%s'", optarg);
        return EXIT_USAGE;
      }
      o->type = &types[k];
      break;
    }
    case 'o': {
      size_t k = 0;
      while (k < NOPS && strcmp(optarg, ops[k].name) != 0)
        k++;
      if (k == NOPS) {
        usage_error(speak, "unknown operator '%s'", optarg);
        return EXIT_USAGE;
      }
      o->op = &ops[k];
      break;
    }
    case 'n':
      if (!parse_int(optarg, 1, &o->iters)) {
        usage_error(speak, "-n: '%s' is not a count >= 1", optarg);
        return EXIT_USAGE;
      }
      have_iters = true;
      break;
    case 'w':
      if (!parse_int(optarg, 0, &o->warmup)) {
        usage_error(speak, "-w: '%s' is not a count >= 0", optarg);
        return EXIT_USAGE;
      }
      have_warmup = true;
      break;
    case 'r':
      if (!parse_int(optarg, 0, &o->root)) {
        usage_error(speak, "-r: '%s' is not a rank", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_CHECK:
      o->check = true;
      break;
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_CALIBRATE:
      o->calibrate = true;
      break;
    case OPT_TUNING_OUT:
      if (optarg[0] == '\0') {
        usage_error(speak, "--tuning-out needs a file name");
        return EXIT_USAGE;
      }
      o->tuning_out = optarg;
      break;
    case OPT_LINK_LIMIT:
      o->link_only = true;
      break;
    case OPT_NO_LINK_LIMIT:
      o->no_link = true;
      break;
    case OPT_OVERLAP:
      o->overlap = true;
      break;
    case OPT_WORK:
      if (strcmp(optarg, "sleep") == 0) {
        o->work = CRBENCH_WORK_SLEEP;
      } else if (strcmp(optarg, "cpu") == 0) {
        o->work = CRBENCH_WORK_CPU;
      } else if (strcmp(optarg, "both") == 0) {
        o->work = CRBENCH_WORK_SLEEP | CRBENCH_WORK_CPU;
      } else {
        usage_error(speak, "--work: '%s' is not sleep, cpu or both", optarg);
        return EXIT_USAGE;
      }
      have_work = true;
      break;
    case OPT_PROGRESS_THREAD:
      if (strcmp(optarg, "on") == 0) {
        o->progress_thread = CRNET_PROGRESS_THREAD_ON;
      } else if (strcmp(optarg, "off") == 0) {
        o->progress_thread = CRNET_PROGRESS_THREAD_OFF;
      } else if (strcmp(optarg, "auto") == 0) {
        o->progress_thread = CRNET_PROGRESS_THREAD_AUTO;
      } else {
        usage_error(speak, "--progress-thread: '%s' is not on, off or auto",
                    optarg);
        return EXIT_USAGE;
      }
      break;
    case 'v':
      o->verbose = true;
      break;
    case 'h':
      o->help = true;
      break;
    case ':':
      usage_error(speak, "option '%s' needs an argument", argv[optind - 1]);
      return EXIT_USAGE;
    default:
      if (optopt != 0)
        usage_error(speak, "unknown option '-%c'", optopt);
      else
        usage_error(speak, "unknown option '%s'", argv[optind - 1]);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    usage_error(speak, "unexpected argument '%s'", argv[optind]);
    return EXIT_USAGE;
  }
  if (o->help)
    return 0;
  if (have_factor && have_increment) {
    usage_error(speak, "-f and -i exclude each other");
    return EXIT_USAGE;
  }
  if (o->calibrate + o->link_only + o->no_link + o->overlap > 1) {
    usage_error(speak,
                "--calibrate, --link-limit, --no-link-limit and --overlap "
                "exclude each other");
    return EXIT_USAGE;
  }
  if (o->tuning_out != NULL && !o->calibrate) {
    usage_error(speak, "--tuning-out is for --calibrate");
    return EXIT_USAGE;
  }
  if ((have_work || o->progress_thread >= 0) && !o->overlap) {
    usage_error(speak, "--%s is for --overlap",
                have_work ? "work" : "progress-thread");
    return EXIT_USAGE;
  }
  if (o->overlap) {
    /* --overlap times one schedule; -s all or a list would multiply a run
     * that is long already (each repetition is three runs). */
    if (strcmp(o->schedule, "all") == 0 || strchr(o->schedule, ',') != NULL) {
      usage_error(speak, "--overlap takes one schedule, not '%s'", o->schedule);
      return EXIT_USAGE;
    }
    if (!crbench_overlap_supports(o->coll->name)) {
      usage_error(speak, "--overlap cannot time %s: it moves no data",
                  o->coll->name);
      return EXIT_USAGE;
    }
    if (o->check) {
      usage_error(speak, "--check is not for --overlap");
      return EXIT_USAGE;
    }
    if (!have_min)
      o->min_bytes = OVERLAP_MIN_BYTES;
    if (!have_min && !have_max) {
      o->max_bytes = OVERLAP_MAX_BYTES;
      have_max = true;
    }
    if (!have_factor && !have_increment)
      o->factor = OVERLAP_FACTOR;
    if (!have_iters)
      o->iters = OVERLAP_ITERS;
    if (!have_warmup)
      o->warmup = OVERLAP_WARMUP;
  }
  if (o->calibrate && (!have_max || o->max_bytes == 0))
    o->max_bytes = CALIBRATE_MAX_BYTES;
  if (o->calibrate || o->link_only)
    return 0; /* the sweep's options do not apply */
  if (have_increment)
    o->factor = 0;
  if (!have_max)
    o->max_bytes = o->min_bytes;
  if (o->max_bytes < o->min_bytes) {
    usage_error(speak, "-e %zu is below -b %zu", o->max_bytes, o->min_bytes);
    return EXIT_USAGE;
  }
  if (o->factor != 0 && o->min_bytes == 0 && o->max_bytes > 0) {
    usage_error(speak, "-b 0 never grows by a factor: use -b 1 or -i");
    return EXIT_USAGE;
  }
  if (o->coll->reduces && o->op->integer_only && o->type->is_float) {
    usage_error(speak, "operator %s needs an integer datatype, not %s",
                o->op->name, o->type->name);
    return EXIT_USAGE;
  }
  return 0;
}

/* The sizes of the sweep, as nccl-tests steps them: from MIN while <= MAX,
 * times the factor or plus the increment. */
static size_t *sweep_sizes(const struct options *o, size_t *n) {
  size_t cap = 16, *v = malloc(cap * sizeof *v);
  size_t s = o->min_bytes;
  *n = 0;
  if (v == NULL)
    return NULL;
  for (;;) {
    if (*n == cap) {
      size_t *w = realloc(v, 2 * cap * sizeof *v);
      if (w == NULL) {
        free(v);
        return NULL;
      }
      v = w;
      cap *= 2;
    }
    v[(*n)++] = s;
    if (o->coll->id == C_BARRIER) /* sizes mean nothing: one row */
      break;
    if (o->factor != 0) {
      if (s > o->max_bytes / o->factor)
        break;
      s *= o->factor;
    } else {
      if (o->increment > o->max_bytes - s)
        break;
      s += o->increment;
    }
    if (s > o->max_bytes || s == 0)
      break;
  }
  return v;
}

/* ------------------------------------------------------------------------
 * The run's state and the buffers of one row.
 */

struct bench {
  crnet_comm *comm;
  const struct options *o;
  int rank, p;
  size_t ts;                        /* element size */
  unsigned char *send;              /* max_bytes, BUF_ALIGN aligned */
  unsigned char *recv;              /* the same */
  double *times;                    /* iters */
  int corrupt_rank;                 /* CRBENCH_CORRUPT, or -1 */
  int sum_ranks;                    /* ranks whose sum inputs may be nonzero */
  const char *sched[MAX_SCHEDULES]; /* the schedules of this run */
  bool noted[MAX_SCHEDULES];        /* a skip note was printed for it */
  size_t nsched;
  char *sched_list; /* a copy of -s, split into sched[] */
  bool any_wrong;
  struct crbench_link link; /* the probe's result, if it ran */
  bool have_link;
};

/* One row's shape, from the requested size (see the file comment). */
struct layout {
  size_t bytes;      /* the size column */
  size_t count;      /* the count argument */
  size_t send_elems; /* elements of the send buffer to fill */
  size_t recv_elems; /* elements of the receive buffer to check */
  size_t block;      /* allgather, alltoall: elements per rank */
};

static struct layout layout_of(const struct bench *b, size_t size) {
  struct layout l = {0, 0, 0, 0, 0};
  size_t ts = b->ts, p = (size_t)b->p;
  switch (b->o->coll->id) {
  case C_ALLREDUCE:
  case C_REDUCE:
  case C_BCAST:
  case C_SCAN:
  case C_EXSCAN:
    l.count = size / ts;
    l.send_elems = l.recv_elems = l.count;
    l.bytes = l.count * ts;
    break;
  case C_REDUCE_SCATTER:
    l.count = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case C_ALLGATHER:
    l.count = l.block = size / ts / p;
    l.send_elems = l.count;
    l.recv_elems = l.count * p;
    l.bytes = l.recv_elems * ts;
    break;
  case C_ALLTOALL:
    l.count = l.block = size / ts / p;
    l.send_elems = l.recv_elems = l.count * p;
    l.bytes = l.send_elems * ts;
    break;
  case C_BARRIER:
    break;
  }
  return l;
}

static double bus_factor(const struct bench *b) {
  double p = b->p;
  switch (b->o->coll->factor) {
  case BUS_ALLREDUCE:
    return 2.0 * (p - 1) / p;
  case BUS_SPREAD:
    return (p - 1) / p;
  case BUS_ONE:
    break;
  }
  return 1.0;
}

/* ------------------------------------------------------------------------
 * Data: the input pattern, the expected results, and the encoding of small
 * integers in every datatype.
 */

/* splitmix64's finaliser over a combination of three words. */
static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = (a * 0x9E3779B97F4A7C15u) ^
               ((b + 0x632BE59BD9B4E019u) * 0xBF58476D1CE4E5B9u) ^ c;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9u;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBu;
  x ^= x >> 31;
  return x;
}

/* Salts, so that the operators' inputs are unrelated. */
enum { SALT_SUM = 1, SALT_MINMAX, SALT_BITS, SALT_LOGIC, SALT_MOVE };

static int64_t as_signed(uint64_t x) {
  return x <= (uint64_t)INT64_MAX ? (int64_t)x : -(int64_t)(~x) - 1;
}

/* IEEE binary16 bits of an integer of magnitude <= 2048 (exact). */
static uint16_t half_of_int(int64_t v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) == 0)
    return (uint16_t)(bits >> 16);
  return (uint16_t)(((bits >> 16) & 0x8000u) |
                    ((((bits >> 23) & 0xffu) - 127 + 15) << 10) |
                    ((bits >> 13) & 0x3ffu));
}

/* Writes the value x (two's complement bits for integer types; a small
 * integer, read as signed, for floating types) as one element of dt. */
static void encode(crnet_datatype dt, uint64_t x, void *out) {
  switch (dt) {
  case CRNET_INT8:
  case CRNET_UINT8:
  case CRNET_BYTE: {
    uint8_t y = (uint8_t)x;
    memcpy(out, &y, sizeof y);
    break;
  }
  case CRNET_INT16:
  case CRNET_UINT16: {
    uint16_t y = (uint16_t)x;
    memcpy(out, &y, sizeof y);
    break;
  }
  case CRNET_INT32:
  case CRNET_UINT32: {
    uint32_t y = (uint32_t)x;
    memcpy(out, &y, sizeof y);
    break;
  }
  case CRNET_INT64:
  case CRNET_UINT64:
    memcpy(out, &x, sizeof x);
    break;
  case CRNET_FLOAT16: {
    uint16_t y = half_of_int(as_signed(x));
    memcpy(out, &y, sizeof y);
    break;
  }
  case CRNET_BFLOAT16: {
    float f = (float)as_signed(x);
    uint32_t bits;
    uint16_t y;
    memcpy(&bits, &f, sizeof bits);
    y = (uint16_t)(bits >> 16); /* exact: small integers need no rounding */
    memcpy(out, &y, sizeof y);
    break;
  }
  case CRNET_FLOAT: {
    float f = (float)as_signed(x);
    memcpy(out, &f, sizeof f);
    break;
  }
  case CRNET_DOUBLE: {
    double d = (double)as_signed(x);
    memcpy(out, &d, sizeof d);
    break;
  }
  case CRNET_DATATYPE_COUNT:
    break;
  }
}

/* Input element i of rank r for a reduction (see the file comment). */
static uint64_t input_value(const struct bench *b, int r, size_t i) {
  const struct type_desc *t = b->o->type;
  unsigned width = (unsigned)(8 * b->ts);
  uint64_t mask = width == 64 ? ~(uint64_t)0 : ((uint64_t)1 << width) - 1;
  uint64_t h;
  switch (b->o->op->op) {
  case CRNET_SUM:
    return r < b->sum_ranks ? mix3((uint64_t)r, SALT_SUM, i) % 4 : 0;
  case CRNET_PROD:
    return i % (size_t)b->p == (size_t)r ? 2 : 1;
  case CRNET_MIN:
  case CRNET_MAX:
    h = mix3((uint64_t)r, SALT_MINMAX, i) % 101;
    return t->is_signed ? h - 50 : h; /* wraps to the negative's bits */
  case CRNET_BAND:
    return mask & ~((uint64_t)1 << (mix3((uint64_t)r, SALT_BITS, i) % width));
  case CRNET_BOR:
    return (uint64_t)1 << (mix3((uint64_t)r, SALT_BITS, i) % width);
  case CRNET_BXOR:
    return mix3((uint64_t)r, SALT_BITS, i) & mask;
  case CRNET_LAND:
  case CRNET_LOR: {
    /* The odd rank out: one of 0..p-1, or p for none. */
    uint64_t odd = mix3(UINT64_MAX, SALT_LOGIC, i) % ((uint64_t)b->p + 1);
    uint64_t truthy = 1 + mix3((uint64_t)r, SALT_LOGIC, i) % 3;
    bool is_odd = odd == (uint64_t)r;
    if (b->o->op->op == CRNET_LAND)
      return is_odd ? 0 : truthy;
    return is_odd ? truthy : 0;
  }
  default:
    break;
  }
  return 0;
}

/* The reduction over ranks [0, nranks) of input element i, folded in 64-bit
 * integers: the exact result, which every datatype holds. */
static uint64_t fold_value(const struct bench *b, int nranks, size_t i) {
  crnet_op op = b->o->op->op;
  uint64_t acc = input_value(b, 0, i);
  if (op == CRNET_LAND || op == CRNET_LOR)
    acc = acc != 0;
  for (int r = 1; r < nranks; r++) {
    uint64_t x = input_value(b, r, i);
    switch (op) {
    case CRNET_SUM:
      acc += x;
      break;
    case CRNET_PROD:
      acc *= x;
      break;
    case CRNET_MIN:
      if (as_signed(x) < as_signed(acc))
        acc = x;
      break;
    case CRNET_MAX:
      if (as_signed(x) > as_signed(acc))
        acc = x;
      break;
    case CRNET_BAND:
      acc &= x;
      break;
    case CRNET_BOR:
      acc |= x;
      break;
    case CRNET_BXOR:
      acc ^= x;
      break;
    case CRNET_LAND:
      acc = acc != 0 && x != 0;
      break;
    case CRNET_LOR:
      acc = acc != 0 || x != 0;
      break;
    default:
      break;
    }
  }
  return acc;
}

/* Moved data: element j of the block that rank src sends to dst. Bytes come
 * from 64-bit words, so an element (1, 2, 4 or 8 bytes) lies in one word. */
static void move_elem(size_t ts, uint64_t src, uint64_t dst, size_t j,
                      void *out) {
  size_t byte = j * ts;
  uint64_t w = mix3(src, dst * 0x10001u + SALT_MOVE, byte / 8);
  memcpy(out, (unsigned char *)&w + byte % 8, ts);
}

static void fill_moved(unsigned char *buf, size_t nbytes, uint64_t src,
                       uint64_t dst) {
  size_t k = 0;
  for (; k + 8 <= nbytes; k += 8) {
    uint64_t w = mix3(src, dst * 0x10001u + SALT_MOVE, k / 8);
    memcpy(buf + k, &w, 8);
  }
  if (k < nbytes) {
    uint64_t w = mix3(src, dst * 0x10001u + SALT_MOVE, k / 8);
    memcpy(buf + k, &w, nbytes - k);
  }
}

/* Fills this rank's inputs for one size: once per size, since no call
 * changes them (every call is out of place; bcast's root only reads). */
static void fill_inputs(const struct bench *b, const struct layout *l) {
  const struct options *o = b->o;
  size_t ts = b->ts;
  switch (o->coll->id) {
  case C_ALLREDUCE:
  case C_REDUCE_SCATTER:
  case C_REDUCE:
  case C_SCAN:
  case C_EXSCAN:
    for (size_t i = 0; i < l->send_elems; i++)
      encode(o->type->dt, input_value(b, b->rank, i), b->send + i * ts);
    break;
  case C_ALLGATHER:
    fill_moved(b->send, l->count * ts, (uint64_t)b->rank, 0);
    break;
  case C_ALLTOALL:
    for (int d = 0; d < b->p; d++)
      fill_moved(b->send + (size_t)d * l->block * ts, l->block * ts,
                 (uint64_t)b->rank, (uint64_t)d);
    break;
  case C_BCAST:
    if (b->rank == o->root)
      fill_moved(b->recv, l->count * ts, (uint64_t)o->root, 0);
    break;
  case C_BARRIER:
    break;
  }
}

/* Does the call leave this rank's receive buffer alone (so that it must
 * come back exactly as it was)? */
static bool recv_untouched(const struct bench *b) {
  switch (b->o->coll->id) {
  case C_EXSCAN:
    return b->rank == 0;
  case C_REDUCE: /* only the root receives */
    return b->rank != b->o->root;
  case C_BCAST: /* the root's buffer is the source */
    return b->rank == b->o->root;
  default:
    return false;
  }
}

/* Expected bytes of element i of this rank's receive buffer. */
static void expected_elem(const struct bench *b, const struct layout *l,
                          size_t i, void *out) {
  const struct options *o = b->o;
  crnet_datatype dt = o->type->dt;
  switch (o->coll->id) {
  case C_ALLREDUCE:
    encode(dt, fold_value(b, b->p, i), out);
    return;
  case C_REDUCE:
    if (b->rank == o->root)
      encode(dt, fold_value(b, b->p, i), out);
    else
      move_elem(b->ts, UNTOUCHED_SOURCE, (uint64_t)b->rank, i, out);
    return;
  case C_REDUCE_SCATTER:
    encode(dt, fold_value(b, b->p, (size_t)b->rank * l->count + i), out);
    return;
  case C_SCAN:
    encode(dt, fold_value(b, b->rank + 1, i), out);
    return;
  case C_EXSCAN:
    if (b->rank == 0)
      move_elem(b->ts, UNTOUCHED_SOURCE, 0, i, out);
    else
      encode(dt, fold_value(b, b->rank, i), out);
    return;
  case C_ALLGATHER:
    move_elem(b->ts, i / l->block, 0, i % l->block, out);
    return;
  case C_ALLTOALL:
    move_elem(b->ts, i / l->block, (uint64_t)b->rank, i % l->block, out);
    return;
  case C_BCAST:
    move_elem(b->ts, (uint64_t)o->root, 0, i, out);
    return;
  case C_BARRIER:
    return;
  }
}

/* Before the checked call: every element the call must write gets the
 * complement of its expected value, so an unwritten one shows; an
 * untouched buffer gets a pattern that must survive. */
static void prepare_recv(const struct bench *b, const struct layout *l) {
  bool keep = recv_untouched(b);
  for (size_t i = 0; i < l->recv_elems; i++) {
    unsigned char *e = b->recv + i * b->ts;
    expected_elem(b, l, i, e);
    if (!keep)
      for (size_t k = 0; k < b->ts; k++)
        e[k] = (unsigned char)~e[k];
  }
}

static uint64_t count_wrong(const struct bench *b, const struct layout *l) {
  unsigned char want[8];
  uint64_t wrong = 0;
  if (b->rank == b->corrupt_rank && l->recv_elems > 0)
    b->recv[0] ^= 0x40;
  for (size_t i = 0; i < l->recv_elems; i++) {
    expected_elem(b, l, i, want);
    wrong += memcmp(want, b->recv + i * b->ts, b->ts) != 0;
  }
  return wrong;
}

/* ------------------------------------------------------------------------
 * Running rows.
 */

double crbench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double crbench_median(double *v, size_t n) {
  if (n == 0)
    return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int call(const struct bench *b, const struct layout *l) {
  const struct options *o = b->o;
  crnet_datatype dt = o->type->dt;
  crnet_op op = o->op->op;
  switch (o->coll->id) {
  case C_ALLREDUCE:
    return crnet_allreduce(b->comm, b->send, b->recv, l->count, dt, op);
  case C_REDUCE_SCATTER:
    return crnet_reduce_scatter_block(b->comm, b->send, b->recv, l->count, dt,
                                      op);
  case C_ALLGATHER:
    return crnet_allgather(b->comm, b->send, b->recv, l->count, dt);
  case C_ALLTOALL:
    return crnet_alltoall(b->comm, b->send, b->recv, l->count, dt);
  case C_BCAST:
    return crnet_bcast(b->comm, b->recv, l->count, dt, o->root);
  case C_REDUCE:
    return crnet_reduce(b->comm, b->send, b->recv, l->count, dt, op, o->root);
  case C_SCAN:
    return crnet_scan(b->comm, b->send, b->recv, l->count, dt, op);
  case C_EXSCAN:
    return crnet_exscan(b->comm, b->send, b->recv, l->count, dt, op);
  case C_BARRIER:
    return crnet_barrier(b->comm);
  }
  return CRNET_EINVAL;
}

/* A failed call: say what and why on this rank, then stop every rank. */
static int fail(struct bench *b, const char *what, const char *schedule,
                size_t bytes, int rc) {
  fprintf(stderr, PROG ": rank %d: %s (%s, %s, %zu B): %s: %s\n", b->rank, what,
          b->o->coll->name, schedule, bytes, crnet_err_name(rc),
          crnet_comm_errmsg(b->comm));
  crnet_comm_abort(b->comm, EXIT_WRONG);
  return EXIT_WRONG;
}

struct row {
  struct layout l;
  const char *schedule;
  double time_s; /* median of the per-repetition maxima */
  uint64_t wrong;
};

enum row_outcome { ROW_DONE, ROW_SKIPPED, ROW_FAILED };

static const char *type_column(const struct bench *b) {
  return b->o->coll->id == C_BARRIER ? "none"
                                     : crnet_datatype_name(b->o->type->dt);
}

static const char *op_column(const struct bench *b) {
  return b->o->coll->reduces ? crnet_op_name(b->o->op->op) : "none";
}

static int root_column(const struct bench *b) {
  return b->o->coll->rooted ? b->o->root : -1;
}

static void print_header(const struct bench *b) {
  const struct options *o = b->o;
  printf("# crbench: %s, p = %d, type %s, op %s, iters %d, warmup %d, "
         "check %s\n",
         o->coll->name, b->p, type_column(b), op_column(b), o->iters, o->warmup,
         o->check ? "on" : "off");
  if (b->have_link)
    crbench_link_print(&b->link, b->p, false);
  printf("#\n");
  if (b->have_link) {
    printf("# %10s  %12s  %8s  %6s  %18s  %4s  %9s  %8s  %8s  %6s  %5s\n",
           "size", "count", "type", "redop", "schedule", "root", "time",
           "algbw", "busbw", "#wrong", "eff");
  } else {
    printf("# %10s  %12s  %8s  %6s  %18s  %4s  %9s  %8s  %8s  %6s\n", "size",
           "count", "type", "redop", "schedule", "root", "time", "algbw",
           "busbw", "#wrong");
  }
  printf("# %10s  %12s  %8s  %6s  %18s  %4s  %9s  %8s  %8s\n", "(B)",
         "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)");
}

static void print_row(const struct bench *b, const struct row *r) {
  double us = r->time_s * 1e6;
  double algbw = r->time_s > 0 ? (double)r->l.bytes / r->time_s / 1e9 : 0;
  double busbw = algbw * bus_factor(b);
  /* efficiency against the link limit, for large rows when probed */
  bool has_eff = b->have_link && r->l.bytes >= EFFICIENCY_MIN_BYTES &&
                 b->link.share_bps > 0;
  double eff = has_eff ? busbw * 1e9 / b->link.share_bps : 0;
  if (b->o->json) {
    printf("{\"coll\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": "
           "\"%s\", \"op\": \"%s\", \"schedule\": \"%s\", \"root\": %d, "
           "\"p\": %d, \"time_us\": %.9g, \"algbw_gbps\": %.9g, "
           "\"busbw_gbps\": %.9g, ",
           b->o->coll->name, r->l.bytes, r->l.count, type_column(b),
           op_column(b), r->schedule, root_column(b), b->p, us, algbw, busbw);
    if (b->o->check)
      printf("\"wrong\": %" PRIu64, r->wrong);
    else
      printf("\"wrong\": null");
    printf(", \"iters\": %d", b->o->iters);
    if (has_eff)
      printf(", \"link_gbps\": %.9g, \"efficiency\": %.9g}\n",
             b->link.share_bps / 1e9, eff);
    else
      printf(", \"link_gbps\": null, \"efficiency\": null}\n");
  } else {
    char time[32], wrong[32];
    /* nccl-tests' precision: fewer decimals as the time grows. */
    snprintf(time, sizeof time,
             us >= 10000 ? "%.0f"
             : us >= 100 ? "%.1f"
                         : "%.2f",
             us);
    if (b->o->check)
      snprintf(wrong, sizeof wrong, "%" PRIu64, r->wrong);
    else
      snprintf(wrong, sizeof wrong, "N/A");
    printf("  %10zu  %12zu  %8s  %6s  %18s  %4d  %9s  %8.3f  %8.3f  %6s",
           r->l.bytes, r->l.count, type_column(b), op_column(b), r->schedule,
           root_column(b), time, algbw, busbw, wrong);
    if (has_eff)
      printf("  %5.2f\n", eff);
    else
      printf(b->have_link ? "  %5s\n" : "%s\n", b->have_link ? "-" : "");
  }
  fflush(stdout);
}

/* The bookkeeping allreduces run on "auto" (see the file comment). */
static int bookkeeping_schedule(struct bench *b) {
  if (b->o->coll->id != C_ALLREDUCE)
    return 0;
  return crnet_comm_set_schedule(b->comm, CRNET_COLL_ALLREDUCE, "auto");
}

/* Times (and checks) one row. On ROW_FAILED the job is aborted. */
static enum row_outcome run_row(struct bench *b, size_t sched_index,
                                const struct layout *l, struct row *out) {
  const struct options *o = b->o;
  const char *sched = b->sched[sched_index];
  int rc, iters = o->iters;
  uint64_t wrong = 0;

  out->l = *l;
  out->schedule = sched;
  out->wrong = 0;
  rc = crnet_comm_set_schedule(b->comm, o->coll->schedule_of, sched);
  if (rc != 0) {
    fail(b, "crnet_comm_set_schedule", sched, l->bytes, rc);
    return ROW_FAILED;
  }
  for (int k = 0; k < o->warmup + iters; k++) {
    bool timed = k >= o->warmup;
    double t0 = 0;
    if (timed) {
      rc = crnet_barrier(b->comm);
      if (rc != 0) {
        fail(b, "timing barrier", sched, l->bytes, rc);
        return ROW_FAILED;
      }
      t0 = crbench_now();
    }
    rc = call(b, l);
    if (timed)
      b->times[k - o->warmup] = crbench_now() - t0;
    if (rc == CRNET_EUNSUPPORTED) {
      /* Every rank refuses alike, before sending anything. */
      if (b->rank == 0 && !b->noted[sched_index])
        fprintf(stderr, PROG ": skipping %s for %s at p = %d: %s\n", sched,
                o->coll->name, b->p, crnet_comm_errmsg(b->comm));
      b->noted[sched_index] = true;
      return ROW_SKIPPED;
    }
    if (rc != 0) {
      fail(b, o->coll->name, sched, l->bytes, rc);
      return ROW_FAILED;
    }
  }
  if (o->check) {
    prepare_recv(b, l);
    rc = call(b, l);
    if (rc != 0) {
      fail(b, "checked call", sched, l->bytes, rc);
      return ROW_FAILED;
    }
    wrong = count_wrong(b, l);
  }
  rc = bookkeeping_schedule(b);
  if (rc == 0)
    rc = crnet_allreduce(b->comm, CRNET_IN_PLACE, b->times, (size_t)iters,
                         CRNET_DOUBLE, CRNET_MAX);
  if (rc == 0 && o->check)
    rc = crnet_allreduce(b->comm, CRNET_IN_PLACE, &wrong, 1, CRNET_UINT64,
                         CRNET_SUM);
  if (rc != 0) {
    fail(b, "bookkeeping allreduce", sched, l->bytes, rc);
    return ROW_FAILED;
  }
  qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
  out->time_s = iters % 2 ? b->times[iters / 2]
                          : (b->times[iters / 2 - 1] + b->times[iters / 2]) / 2;
  out->wrong = wrong;
  if (wrong != 0)
    b->any_wrong = true;
  return ROW_DONE;
}

/* ------------------------------------------------------------------------
 * Schedules: which of the known names this run uses.
 */

/* Fills b->sched from -s. Returns 0, or EXIT_USAGE after a line from rank
 * 0 (every rank decides alike), or EXIT_WRONG when out of memory. */
static int choose_schedules(struct bench *b) {
  const struct options *o = b->o;
  crnet_collective sc = o->coll->schedule_of;
  bool speak = b->rank == 0;
  char *q;
  b->nsched = 0;
  if (strcmp(o->schedule, "all") == 0) {
    for (size_t k = 0; k < NKNOWN; k++) {
      int rc = crnet_comm_set_schedule(b->comm, sc, known_schedules[k]);
      if (rc == 0)
        b->sched[b->nsched++] = known_schedules[k];
      else if (speak && (o->verbose || rc != CRNET_EUNSUPPORTED))
        fprintf(stderr, PROG ": -s all: leaving out %s: %s: %s\n",
                known_schedules[k], crnet_err_name(rc),
                crnet_comm_errmsg(b->comm));
    }
    return 0;
  }
  b->sched_list = q = strdup(o->schedule);
  if (q == NULL) {
    fprintf(stderr, PROG ": rank %d: out of memory\n", b->rank);
    return EXIT_WRONG;
  }
  for (;;) {
    char *name = q;
    int rc;
    q += strcspn(q, ",");
    if (*q == ',')
      *q++ = '\0';
    else
      q = NULL;
    if (name[0] == '\0') {
      usage_error(speak, "empty schedule name in '%s'", o->schedule);
      return EXIT_USAGE;
    }
    for (size_t j = 0; j < b->nsched; j++)
      if (strcmp(b->sched[j], name) == 0) {
        usage_error(speak, "schedule '%s' given twice", name);
        return EXIT_USAGE;
      }
    if (b->nsched == MAX_SCHEDULES) {
      usage_error(speak, "more than %d schedules in -s", MAX_SCHEDULES);
      return EXIT_USAGE;
    }
    rc = crnet_comm_set_schedule(b->comm, sc, name);
    if (rc == CRNET_EINVAL) {
      usage_error(speak, "unknown schedule '%s'", name);
      return EXIT_USAGE;
    }
    if (rc != 0) {
      const char *why = crnet_comm_errmsg(b->comm);
      if (why[0] != '\0')
        usage_error(speak, "-s %s: %s", name, why);
      else
        usage_error(speak, "schedule '%s' cannot do %s", name, o->coll->name);
      return EXIT_USAGE;
    }
    b->sched[b->nsched++] = name;
    if (q == NULL)
      return 0;
  }
}

/* ------------------------------------------------------------------------
 * The other modes: the link limit alone, and calibration.
 */

static int link_main(struct bench *b) {
  if (b->p < 2) {
    usage_error(b->rank == 0, "--link-limit needs at least 2 ranks");
    return EXIT_USAGE;
  }
  if (crbench_link_limit(b->comm, LINK_BYTES, LINK_REPS, &b->link) != 0) {
    crnet_comm_abort(b->comm, EXIT_WRONG);
    return EXIT_WRONG;
  }
  if (b->rank == 0)
    crbench_link_print(&b->link, b->p, b->o->json);
  return EXIT_RIGHT;
}

static int calibrate_main(struct bench *b) {
  const struct options *o = b->o;
  struct crbench_calibration c = {.max_bytes = o->max_bytes,
                                  .iters = o->iters,
                                  .warmup = o->warmup,
                                  .dt = o->type->dt,
                                  .op = o->op->op,
                                  .out_path = o->tuning_out,
                                  .json = o->json};
  if (b->p < 2) {
    usage_error(b->rank == 0, "--calibrate needs at least 2 ranks");
    return EXIT_USAGE;
  }
  if (crbench_calibrate(b->comm, &c) != 0) {
    crnet_comm_abort(b->comm, EXIT_WRONG);
    return EXIT_WRONG;
  }
  return EXIT_RIGHT;
}

static int overlap_main(struct bench *b) {
  const struct options *o = b->o;
  struct crbench_overlap ov = {.coll = o->coll->name,
                               .dt = o->type->dt,
                               .op = o->op->op,
                               .root = o->root,
                               .iters = o->iters,
                               .warmup = o->warmup,
                               .work = o->work,
                               .progress_thread = o->progress_thread,
                               .json = o->json,
                               .verbose = o->verbose};
  size_t *sizes;
  int status = choose_schedules(b); /* one name: parse_args saw to it */
  if (status != 0)
    return status;
  ov.schedule = b->sched[0];
  sizes = sweep_sizes(o, &ov.nsizes);
  if (sizes == NULL) {
    fprintf(stderr, PROG ": rank %d: out of memory\n", b->rank);
    crnet_comm_abort(b->comm, EXIT_WRONG);
    return EXIT_WRONG;
  }
  ov.sizes = sizes;
  status = crbench_overlap(b->comm, &ov) != 0 ? EXIT_WRONG : EXIT_RIGHT;
  if (status != EXIT_RIGHT)
    crnet_comm_abort(b->comm, EXIT_WRONG);
  free(sizes);
  return status;
}

/* ------------------------------------------------------------------------
 * main
 */

static void *alloc_buffer(size_t bytes) {
  size_t n = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
  return aligned_alloc(BUF_ALIGN, n == 0 ? BUF_ALIGN : n);
}

static int sum_ranks_for(const struct type_desc *t, int p) {
  int cap = p;
  if (t->dt == CRNET_FLOAT16)
    cap = FLOAT16_EXACT / SUM_MAX_INPUT;
  else if (t->dt == CRNET_BFLOAT16)
    cap = BFLOAT16_EXACT / SUM_MAX_INPUT;
  return cap < p ? cap : p;
}

static int run(struct bench *b) {
  const struct options *o = b->o;
  size_t nsizes, *sizes;
  double busbw_sum[MAX_SCHEDULES] = {0};
  size_t busbw_rows[MAX_SCHEDULES] = {0};
  int status;

  status = choose_schedules(b);
  if (status != 0)
    return status;
  sizes = sweep_sizes(o, &nsizes);
  if (sizes == NULL) {
    fprintf(stderr, PROG ": rank %d: out of memory\n", b->rank);
    crnet_comm_abort(b->comm, EXIT_WRONG);
    return EXIT_WRONG;
  }
  /* The yardstick for efficiency, once, before anything is timed. */
  if (o->max_bytes >= EFFICIENCY_MIN_BYTES && b->p > 1 &&
      o->coll->id != C_BARRIER && !o->no_link) {
    if (crbench_link_limit(b->comm, LINK_BYTES, LINK_REPS, &b->link) != 0) {
      crnet_comm_abort(b->comm, EXIT_WRONG);
      free(sizes);
      return EXIT_WRONG;
    }
    b->have_link = true;
  }
  if (b->rank == 0 && !o->json)
    print_header(b);
  for (size_t s = 0; s < nsizes; s++) {
    struct layout l = layout_of(b, sizes[s]);
    double t0 = crbench_now();
    fill_inputs(b, &l);
    for (size_t k = 0; k < b->nsched; k++) {
      struct row r;
      enum row_outcome out = run_row(b, k, &l, &r);
      if (out == ROW_FAILED) {
        free(sizes);
        return EXIT_WRONG;
      }
      if (out == ROW_SKIPPED || b->rank != 0)
        continue;
      print_row(b, &r);
      busbw_sum[k] +=
          r.time_s > 0 ? (double)l.bytes / r.time_s / 1e9 * bus_factor(b) : 0;
      busbw_rows[k]++;
    }
    if (b->rank == 0 && (o->verbose || crbench_now() - t0 > PROGRESS_SECONDS))
      fprintf(stderr, PROG ": %zu B done (%zu/%zu)\n", sizes[s], s + 1, nsizes);
  }
  free(sizes);
  if (b->rank == 0 && !o->json) {
    printf("# Wrong values: %s\n", !o->check      ? "N/A (no --check)"
                                   : b->any_wrong ? "FAILED"
                                                  : "0 OK");
    for (size_t k = 0; k < b->nsched; k++)
      if (busbw_rows[k] > 0 && o->coll->id != C_BARRIER)
        printf("# Avg bus bandwidth: %8.3f GB/s  %s\n",
               busbw_sum[k] / (double)busbw_rows[k], b->sched[k]);
  }
  return b->any_wrong ? EXIT_WRONG : EXIT_RIGHT;
}

int main(int argc, char **argv) {
  struct options o;
  struct bench b;
  const char *corrupt;
  int status, rc;
  int32_t alloc_failed;
  size_t buf_bytes;

  status = parse_args(argc, argv, &o);
  if (status != 0)
    return status;
  if (o.help) {
    if (env_rank_is_zero())
      fputs(USAGE, stdout);
    return EXIT_RIGHT;
  }

  memset(&b, 0, sizeof b);
  b.o = &o;
  b.ts = o.type->size;
  if (crnet_datatype_size(o.type->dt) != b.ts) {
    fprintf(stderr, PROG ": %s is %zu bytes to the library, not %zu\n",
            o.type->name, crnet_datatype_size(o.type->dt), b.ts);
    return EXIT_WRONG;
  }
  /* Only --progress-thread needs a crnet_config; without it, NULL leaves
   * every setting to the environment, as for any program. */
  if (o.progress_thread >= 0) {
    crnet_config cfg;
    crnet_config_init(&cfg);
    cfg.progress_thread = o.progress_thread;
    rc = crnet_comm_init(&b.comm, &cfg);
  } else {
    rc = crnet_comm_init(&b.comm, NULL);
  }
  if (rc != 0) {
    fprintf(stderr, PROG ": crnet_comm_init: %s\n", crnet_init_errmsg());
    return EXIT_WRONG;
  }
  b.rank = crnet_comm_rank(b.comm);
  b.p = crnet_comm_size(b.comm);
  corrupt = getenv("CRBENCH_CORRUPT");
  b.corrupt_rank = corrupt != NULL && corrupt[0] != '\0'
                       ? (int)strtol(corrupt, NULL, 10)
                       : -1;
  b.sum_ranks = sum_ranks_for(o.type, b.p);

  if (o.coll->rooted && o.root >= b.p) {
    usage_error(b.rank == 0, "-r %d: the root must be below p = %d", o.root,
                b.p);
    crnet_comm_destroy(b.comm);
    return EXIT_USAGE;
  }
  /* Bookkeeping on "auto", whatever CRNET_*_SCHEDULE says. */
  rc = crnet_comm_set_schedule(b.comm, CRNET_COLL_ALLREDUCE, "auto");
  if (rc == 0)
    rc = crnet_comm_set_schedule(b.comm, CRNET_COLL_BARRIER, "auto");
  if (rc != 0) {
    fprintf(stderr, PROG ": rank %d: crnet_comm_set_schedule: %s\n", b.rank,
            crnet_comm_errmsg(b.comm));
    crnet_comm_destroy(b.comm);
    return EXIT_WRONG;
  }

  if (o.link_only || o.calibrate || o.overlap) {
    status = o.link_only   ? link_main(&b)
             : o.calibrate ? calibrate_main(&b)
                           : overlap_main(&b);
    free(b.sched_list);
    rc = crnet_comm_destroy(b.comm);
    if (rc != 0 && status == EXIT_RIGHT) {
      fprintf(stderr, PROG ": rank %d: crnet_comm_destroy: %s\n", b.rank,
              crnet_strerror(rc));
      status = EXIT_WRONG;
    }
    return status;
  }

  /* The largest buffer of any size is at most max_bytes (a barrier needs
   * none). */
  buf_bytes = o.coll->id == C_BARRIER ? 0 : o.max_bytes;
  b.send = alloc_buffer(buf_bytes);
  b.recv = alloc_buffer(buf_bytes);
  b.times = calloc((size_t)o.iters, sizeof *b.times);
  alloc_failed = b.send == NULL || b.recv == NULL || b.times == NULL;
  /* Every rank must know before anyone starts calling collectives. */
  rc = crnet_allreduce(b.comm, CRNET_IN_PLACE, &alloc_failed, 1, CRNET_INT32,
                       CRNET_MAX);
  if (rc != 0 || alloc_failed) {
    if (rc != 0)
      fprintf(stderr, PROG ": rank %d: allreduce: %s\n", b.rank,
              crnet_comm_errmsg(b.comm));
    else if (b.rank == 0)
      fprintf(stderr, PROG ": cannot allocate 2 x %zu bytes on some rank\n",
              buf_bytes);
    status = EXIT_WRONG;
  } else {
    status = run(&b);
  }
  free(b.send);
  free(b.recv);
  free(b.times);
  free(b.sched_list);
  rc = crnet_comm_destroy(b.comm);
  if (rc != 0 && status == EXIT_RIGHT) {
    fprintf(stderr, PROG ": rank %d: crnet_comm_destroy: %s\n", b.rank,
            crnet_strerror(rc));
    status = EXIT_WRONG;
  }
  return status;
}
