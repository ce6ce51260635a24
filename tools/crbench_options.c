/* crbench's command line: the usage text (`crbench -h`, the reference for
 * the options), the tables of the names -c, -d and -o accept, and the
 * parsing of argv into struct options with the defaults and the checks
 * that need no communicator. They live apart from the benchmark loop
 * (crbench.c) because they run before crnet_comm_init and hand it only
 * struct options (declared in crbench.h with the exit statuses and
 * crbench_usage_error, which it uses too); the checks that need p (the
 * root, the schedule names) stay in crbench.c, after init.
 *
 * Nothing here is collective: every rank parses the same argv alike, so
 * all ranks reach the same verdict without talking, and only rank 0 says
 * anything (crbench_env_rank_is_zero).
 */
/* getopt_long beside C11, for a build outside meson too (meson defines it
 * already). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crbench.h"
#include "crnet.h"

#define DEFAULT_ITERS 20
#define DEFAULT_WARMUP 5
#define DEFAULT_MIN_BYTES ((size_t)32 << 20) /* as nccl-tests */
#define DEFAULT_FACTOR 2
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

const char crbench_usage[] =
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
    "                         alltoall, bcast, reduce, scan, exscan, barrier,\n"
    "                         gather, scatter, allgatherv, alltoallv\n"
    "    -s, --schedule S     a schedule name (auto, or one of crsched\n"
    "                         --list), a comma-separated list of them, or\n"
    "                         all: auto and every schedule that can do\n"
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
    "        --p2p latency|bw point-to-point between ranks 0 and 1, as the OSU\n"
    "                         micro-benchmarks: osu_latency's ping-pong (half\n"
    "                         a round trip, us) or osu_bw's window of 64\n"
    "                         messages (MB/s = 10^6 bytes/s); sizes 0 (1 for\n"
    "                         bw) to 4M by 2 unless -b -e -f say otherwise\n"
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
 * The names -c, -d and -o accept.
 */

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
    {"gather", C_GATHER, CRNET_COLL_GATHER, false, true, BUS_SPREAD},
    {"scatter", C_SCATTER, CRNET_COLL_SCATTER, false, true, BUS_SPREAD},
    {"allgatherv", C_ALLGATHERV, CRNET_COLL_ALLGATHER, false, false,
     BUS_SPREAD},
    {"alltoallv", C_ALLTOALLV, CRNET_COLL_ALLTOALLV, false, false, BUS_SPREAD},
};
#define NCOLLS (sizeof colls / sizeof colls[0])

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

/* Only rank 0 talks about usage. Before init the rank comes from the
 * environment contract crlaunch sets; without it this is a job of one. */
bool crbench_env_rank_is_zero(void) {
  const char *s = getenv("CRNET_RANK");
  return s == NULL || s[0] == '\0' || strtol(s, NULL, 10) == 0;
}

void crbench_usage_error(bool speak, const char *fmt, ...) {
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
  OPT_PROGRESS_THREAD,
  OPT_P2P
};

/* Parses argv into *o. Returns 0, or EXIT_USAGE after one line on stderr
 * (from rank 0 only). */
int crbench_parse_args(int argc, char **argv, struct options *o) {
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
      {"p2p", required_argument, NULL, OPT_P2P},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool speak = crbench_env_rank_is_zero(), have_max = false, have_factor = false,
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
        crbench_usage_error(speak, "unknown collective '%s'", optarg);
        return EXIT_USAGE;
      }
      o->coll = &colls[k];
      break;
    }
    case 's':
      if (optarg[0] == '\0') {
        crbench_usage_error(speak, "empty schedule name");
        return EXIT_USAGE;
      }
      o->schedule = optarg;
      break;
    case 'b':
    case 'e':
    case 'i': {
      size_t n;
      if (!parse_size(optarg, &n)) {
        crbench_usage_error(speak, "-%c: '%s' is not a byte count (N, NK, NM, NG)", ch,
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
        crbench_usage_error(speak, "-i: the increment must be at least 1 byte");
        return EXIT_USAGE;
      } else {
        o->increment = n;
        have_increment = true;
      }
      break;
    }
    case 'f':
      if (!parse_int(optarg, 2, &v)) {
        crbench_usage_error(speak, "-f: '%s' is not a factor >= 2", optarg);
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
        crbench_usage_error(speak, "unknown datatype '%s'", optarg);
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
        crbench_usage_error(speak, "unknown operator '%s'", optarg);
        return EXIT_USAGE;
      }
      o->op = &ops[k];
      break;
    }
    case 'n':
      if (!parse_int(optarg, 1, &o->iters)) {
        crbench_usage_error(speak, "-n: '%s' is not a count >= 1", optarg);
        return EXIT_USAGE;
      }
      have_iters = true;
      break;
    case 'w':
      if (!parse_int(optarg, 0, &o->warmup)) {
        crbench_usage_error(speak, "-w: '%s' is not a count >= 0", optarg);
        return EXIT_USAGE;
      }
      have_warmup = true;
      break;
    case 'r':
      if (!parse_int(optarg, 0, &o->root)) {
        crbench_usage_error(speak, "-r: '%s' is not a rank", optarg);
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
        crbench_usage_error(speak, "--tuning-out needs a file name");
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
    case OPT_P2P:
      if (strcmp(optarg, "latency") == 0) {
        o->p2p = CRBENCH_P2P_LATENCY;
      } else if (strcmp(optarg, "bw") == 0) {
        o->p2p = CRBENCH_P2P_BW;
      } else {
        crbench_usage_error(speak, "--p2p: '%s' is not latency or bw", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_WORK:
      if (strcmp(optarg, "sleep") == 0) {
        o->work = CRBENCH_WORK_SLEEP;
      } else if (strcmp(optarg, "cpu") == 0) {
        o->work = CRBENCH_WORK_CPU;
      } else if (strcmp(optarg, "both") == 0) {
        o->work = CRBENCH_WORK_SLEEP | CRBENCH_WORK_CPU;
      } else {
        crbench_usage_error(speak, "--work: '%s' is not sleep, cpu or both", optarg);
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
        crbench_usage_error(speak, "--progress-thread: '%s' is not on, off or auto",
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
      crbench_usage_error(speak, "option '%s' needs an argument", argv[optind - 1]);
      return EXIT_USAGE;
    default:
      if (optopt != 0)
        crbench_usage_error(speak, "unknown option '-%c'", optopt);
      else
        crbench_usage_error(speak, "unknown option '%s'", argv[optind - 1]);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    crbench_usage_error(speak, "unexpected argument '%s'", argv[optind]);
    return EXIT_USAGE;
  }
  if (o->help)
    return 0;
  if (have_factor && have_increment) {
    crbench_usage_error(speak, "-f and -i exclude each other");
    return EXIT_USAGE;
  }
  if (o->calibrate + o->link_only + o->no_link + o->overlap +
          (o->p2p != 0) > 1) {
    crbench_usage_error(speak,
                "--calibrate, --link-limit, --no-link-limit, --overlap and "
                "--p2p exclude each other");
    return EXIT_USAGE;
  }
  if (o->p2p != 0) {
    /* The OSU sweeps unless -b, -e, -f say otherwise: osu_latency from 0
     * bytes, osu_bw from 1, both to 4 MiB by factors of 2. */
    if (o->check) {
      crbench_usage_error(speak, "--check is not for --p2p");
      return EXIT_USAGE;
    }
    if (!have_min)
      o->min_bytes = o->p2p == CRBENCH_P2P_LATENCY ? 0 : 1;
    if (!have_max)
      o->max_bytes = (size_t)4 << 20;
    if (!have_factor && !have_increment)
      o->factor = 2;
    if (have_increment)
      o->factor = 0;
    o->p2p_iters = have_iters;
    o->p2p_warmup = have_warmup;
    if (o->max_bytes < o->min_bytes) {
      crbench_usage_error(speak, "-e %zu is below -b %zu", o->max_bytes,
                          o->min_bytes);
      return EXIT_USAGE;
    }
    return 0;
  }
  if (o->tuning_out != NULL && !o->calibrate) {
    crbench_usage_error(speak, "--tuning-out is for --calibrate");
    return EXIT_USAGE;
  }
  if ((have_work || o->progress_thread >= 0) && !o->overlap) {
    crbench_usage_error(speak, "--%s is for --overlap",
                have_work ? "work" : "progress-thread");
    return EXIT_USAGE;
  }
  if (o->overlap) {
    /* --overlap times one schedule; -s all or a list would multiply a run
     * that is long already (each repetition is three runs). */
    if (strcmp(o->schedule, "all") == 0 || strchr(o->schedule, ',') != NULL) {
      crbench_usage_error(speak, "--overlap takes one schedule, not '%s'", o->schedule);
      return EXIT_USAGE;
    }
    if (!crbench_overlap_supports(o->coll->name)) {
      crbench_usage_error(speak, "--overlap cannot time %s: it moves no data",
                  o->coll->name);
      return EXIT_USAGE;
    }
    if (o->check) {
      crbench_usage_error(speak, "--check is not for --overlap");
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
    crbench_usage_error(speak, "-e %zu is below -b %zu", o->max_bytes, o->min_bytes);
    return EXIT_USAGE;
  }
  if (o->factor != 0 && o->min_bytes == 0 && o->max_bytes > 0) {
    crbench_usage_error(speak, "-b 0 never grows by a factor: use -b 1 or -i");
    return EXIT_USAGE;
  }
  if (o->coll->reduces && o->op->integer_only && o->type->is_float) {
    crbench_usage_error(speak, "operator %s needs an integer datatype, not %s",
                o->op->name, o->type->name);
    return EXIT_USAGE;
  }
  return 0;
}
