/* crsched: the schedule viewer and cost model.
 *
 * What it is for: to see what one rank of a collective does, round by round
 * (peers, skips, the segments sent and received, the local reduce and copy
 * steps), and to compare schedules under the α-β-γ model before measuring
 * anything. It calls the same pure builders as the library, through
 * crnet__select and crnet__build, so what it prints is what the executor
 * runs. It does no networking and never touches payload.
 *
 *   crsched --coll reduce_scatter --schedule circulant -p 22 --rank 21
 *   crsched --cost --alpha 1e-6 --beta 1e-9 --gamma 2e-10 -m 4096 -p 22
 *   crsched --auto -p 8 -m 1048576 [--tuning FILE] [--non-commutative]
 *   crsched --crossover -p 8 [--tuning FILE] [--non-commutative]
 *   crsched --cost --sweep -m 8,1048576 [--tuning FILE] [--dat]
 *   crsched --dot --tree --coll reduce_scatter --schedule circulant -p 22
 *           --rank 21
 *
 * See docs/crsched.md for the output formats and the cost model.
 *
 * Cost model (per collective and schedule): rank r's time in round k is
 *   c(r,k) = α·[round k communicates] + β·max(bytes sent, bytes received)
 *            + γ·bytes reduced by the round's steps
 * (copies are free). "time" is the synchronous-round model, Σ_k max_r
 * c(r,k): a round ends when its slowest rank ends. "rank-sum" is
 * max_r Σ_k c(r,k), the busiest rank alone; it is never larger. Every rank's
 * schedule is built (and freed) in turn, except where rotation symmetry
 * makes all ranks alike (see rotation_symmetric) and a row whose builder
 * would run for minutes (skipped and marked; --all forces both).
 *
 * --auto and --crossover show what `auto` picks (crnet__auto_choose, the
 * library's own choice, with its closed-form model, model.h) under the
 * tuning constants a job started here would use (tuning.h: the file of
 * CRNET_TUNING_FILE or the default place), or --tuning FILE, or --alpha,
 * --beta, --gamma, which replace the file's constants: --auto every
 * candidate's price and the pick for one m; --crossover the byte sizes at
 * which the pick changes, for m from 0 to -m (default 1 GiB).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "circulant.h"
#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "model.h"
#include "tuning.h"

enum { EXIT_USAGE = 2 };

/* --dot: enough ranks for a picture anyone can read. */
#define DOT_MAX_P 64


/* The collectives crsched knows, in the order the cost table lists them:
 * the library's collectives, with scan split into scan and exscan. */
typedef struct coll_kind {
  const char *name;
  crnet_collective coll;
  bool exclusive;
} coll_kind;

static const coll_kind known_colls[] = {
    {"allreduce", CRNET_COLL_ALLREDUCE, false},
    {"reduce_scatter", CRNET_COLL_REDUCE_SCATTER, false},
    {"allgather", CRNET_COLL_ALLGATHER, false},
    {"bcast", CRNET_COLL_BCAST, false},
    {"reduce", CRNET_COLL_REDUCE, false},
    {"barrier", CRNET_COLL_BARRIER, false},
    {"scan", CRNET_COLL_SCAN, false},
    {"exscan", CRNET_COLL_SCAN, true},
    {"alltoall", CRNET_COLL_ALLTOALL, false},
    {"gather", CRNET_COLL_GATHER, false},
    {"scatter", CRNET_COLL_SCATTER, false},
    {"alltoallv", CRNET_COLL_ALLTOALLV, false}};
#define NKNOWN_COLLS (sizeof known_colls / sizeof known_colls[0])

/* All-to-all and alltoallv: blocks of count per peer, not a vector. */
static bool is_a2a(crnet_collective coll) {
  return coll == CRNET_COLL_ALLTOALL || coll == CRNET_COLL_ALLTOALLV;
}

static const char *coll_label(crnet_collective coll, bool exclusive) {
  for (size_t i = 0; i < NKNOWN_COLLS; i++)
    if (known_colls[i].coll == coll && known_colls[i].exclusive == exclusive)
      return known_colls[i].name;
  return crnet_collective_name(coll);
}

static const char *const buf_names[CRNET__BUF_COUNT] = {"SEND", "RECV",
                                                        "TEMP"};

/* ---- options --------------------------------------------------------- */

typedef struct options {
  bool cost, json, in_place, all, have_coll, have_count, have_m;
  bool autosel, crossover, non_commutative;
  bool have_alpha, have_beta, have_gamma;
  bool sweep, verify, dat, have_pmax;
  bool dot, tree; /* --dot, --dot --tree */
  int32_t pmax;       /* --sweep: the largest p (default 10^6) */
  uint64_t ms[16];    /* --sweep: the sizes of -m a,b,... */
  size_t nm;
  const char *tuning_file; /* --tuning, or NULL: where a job would look */
  crnet_collective coll;
  bool exclusive;       /* --coll exscan */
  const char *schedule; /* NULL: "auto" when viewing, all when costing */
  int32_t p, rank, root;
  uint64_t count, dtype_size, m;
  const char *counts_arg; /* --counts, parsed once p is known */
  double alpha, beta, gamma;
} options;

static int bad_usage(const char *fmt, ...) {
  va_list ap;
  fputs("crsched: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry 'crsched --help'.\n", stderr);
  return EXIT_USAGE;
}

static void usage(FILE *out) {
  fputs(
      "usage: crsched --coll C [--schedule S] -p P [--rank R] [--count N |\n"
      "               --counts a,b,...] [--dtype-size B] [--root R]\n"
      "               [--in-place] [--json]\n"
      "       crsched --cost -p P -m BYTES [--alpha A] [--beta B] [--gamma G]\n"
      "               [--coll C] [--schedule S] [--dtype-size B] [--root R]\n"
      "               [--in-place] [--json]\n"
      "       crsched --auto -p P -m BYTES [--coll C] [--tuning FILE]\n"
      "               [--alpha A] [--beta B] [--gamma G] [--dtype-size B]\n"
      "               [--non-commutative] [--json]\n"
      "       crsched --crossover -p P [-m MAXBYTES] [--coll C]\n"
      "               [--tuning FILE] [--alpha A] [--beta B] [--gamma G]\n"
      "               [--dtype-size B] [--non-commutative] [--json]\n"
      "       crsched --cost --sweep -m BYTES[,BYTES...] [--pmax P]\n"
      "               [--coll C] [--schedule S] [--tuning FILE] [--alpha A]\n"
      "               [--beta B] [--gamma G] [--dtype-size B] [--json|--dat]\n"
      "       crsched --cost --sweep --verify [--pmax P] [--coll C]\n"
      "               [--schedule S]\n"
      "       crsched --dot [--tree] --coll C [--schedule S] -p P [--rank R]\n"
      "               [--count N] [--root R]\n"
      "\n"
      "Shows one rank's schedule round by round, or (--cost) the modelled\n"
      "time of every schedule that can do the collective(s), or (--auto)\n"
      "what the auto schedule picks and why, or (--crossover) the sizes at\n"
      "which auto's pick changes.\n"
      "\n"
      "  --coll C         allreduce, reduce_scatter, allgather, bcast, reduce,\n"
      "                   barrier, scan, exscan, alltoall (--cost: default\n"
      "                   all)\n"
      "  --schedule S     auto (default), circulant, circulant-doubling,\n"
      "                   circulant-linear, circulant-sqrt, ring, hypercube,\n"
      "                   rabenseifner, star, pairwise, bruck\n"
      "  -p P             number of ranks\n"
      "  --rank R         the rank to show (default 0)\n"
      "  --count N        vector length in elements, cut into p blocks\n"
      "                   (default p: one element per block); alltoall:\n"
      "                   elements per peer (default 1)\n"
      "  --counts a,b,..  p block lengths (reduce_scatter, allgather,\n"
      "                   gather, scatter)\n"
      "  --dtype-size B   bytes per element (default 4)\n"
      "  --root R         root of bcast and reduce (default 0)\n"
      "  --in-place       the in-place variant\n"
      "  --json           one JSON object per line (per round; per schedule\n"
      "                   with --cost)\n"
      "  --cost           the cost table; -m BYTES is the vector size\n"
      "                   (alltoall: the send buffer, p blocks)\n"
      "  --alpha A        seconds per message round (default 0)\n"
      "  --beta B         seconds per byte sent or received (default 0)\n"
      "  --gamma G        seconds per byte reduced (default 0)\n"
      "  --auto           auto's pick for -m BYTES and every candidate's\n"
      "                   model time, per collective\n"
      "  --crossover      the sizes (bytes, from 0 to -m, default 1 GiB) at\n"
      "                   which auto's pick changes, per collective\n"
      "  --tuning FILE    --auto, --crossover, --sweep: the tuning file\n"
      "                   (default: CRNET_TUNING_FILE, else\n"
      "                   $XDG_CONFIG_HOME/crnet/tuning or\n"
      "                   ~/.config/crnet/tuning, as a job would); --alpha,\n"
      "                   --beta, --gamma replace its constants\n"
      "  --non-commutative  --auto, --crossover: the operator is not\n"
      "                   commutative (only order-keeping schedules)\n"
      "  --all            --cost: build every rank's schedule, even when the\n"
      "                   ranks are symmetric or it takes minutes\n"
      "  --sweep          --cost: the closed-form model (no schedule built)\n"
      "                   of every schedule at p = 2..--pmax (default\n"
      "                   10^6), 8 per decade and every 2^k, 2^k +- 1:\n"
      "                   rounds, peers per rank, bytes, seconds; -m takes\n"
      "                   a list; constants as for --auto\n"
      "  --verify         --sweep: hold the formulas against every rank's\n"
      "                   built schedule at every p to --pmax (default 64)\n"
      "  --dat            --sweep: whitespace columns for gnuplot\n"
      "  --pmax P         --sweep: the largest p\n"
      "  --dot            Graphviz DOT: one cluster per round, an edge per\n"
      "                   message (p <= 64)\n"
      "  --tree           --dot: the reduction tree of block --rank\n"
      "                   (reduce_scatter, allreduce, reduce)\n"
      "  -h, --help       this text\n",
      out);
}

static bool parse_u64(const char *s, uint64_t *v) {
  char *end;
  unsigned long long x;
  if (*s < '0' || *s > '9')
    return false;
  errno = 0;
  x = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  *v = x;
  return true;
}

static bool parse_i32(const char *s, int32_t *v) {
  uint64_t x;
  if (!parse_u64(s, &x) || x > INT32_MAX)
    return false;
  *v = (int32_t)x;
  return true;
}

/* A time: non-negative and finite, in any strtod form (1e-6, 0.5, 3). */
static bool parse_time(const char *s, double *v) {
  char *end;
  double x;
  errno = 0;
  x = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(x) || x < 0)
    return false;
  *v = x;
  return true;
}

static bool parse_coll(const char *s, crnet_collective *coll,
                       bool *exclusive) {
  for (size_t i = 0; i < NKNOWN_COLLS; i++)
    if (strcmp(s, known_colls[i].name) == 0) {
      *coll = known_colls[i].coll;
      *exclusive = known_colls[i].exclusive;
      return true;
    }
  return false;
}

enum {
  OPT_COLL = 256,
  OPT_SCHEDULE,
  OPT_RANK,
  OPT_COUNT,
  OPT_COUNTS,
  OPT_DTYPE_SIZE,
  OPT_ROOT,
  OPT_IN_PLACE,
  OPT_JSON,
  OPT_COST,
  OPT_ALPHA,
  OPT_BETA,
  OPT_GAMMA,
  OPT_ALL,
  OPT_AUTO,
  OPT_CROSSOVER,
  OPT_TUNING,
  OPT_NON_COMMUTATIVE,
  OPT_SWEEP,
  OPT_VERIFY,
  OPT_DAT,
  OPT_PMAX,
  OPT_DOT,
  OPT_TREE
};

/* -m BYTES, or (--sweep) a comma-separated list of sizes. The first is
 * o->m; a list is checked against --sweep in check_options. */
static int parse_sizes(options *o, const char *arg) {
  const char *s = arg;
  o->have_m = true;
  o->nm = 0;
  while (*s != '\0') {
    char num[32];
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof num ||
        o->nm == sizeof o->ms / sizeof o->ms[0])
      return bad_usage("bad -m '%s'", arg);
    memcpy(num, s, len);
    num[len] = '\0';
    if (!parse_u64(num, &o->ms[o->nm++]))
      return bad_usage("bad -m '%s'", arg);
    s += len;
    if (*s == ',' && *++s == '\0')
      return bad_usage("bad -m '%s'", arg);
  }
  if (o->nm == 0)
    return bad_usage("bad -m '%s'", arg);
  o->m = o->ms[0];
  return 0;
}

/* One option into o. 0, or EXIT_USAGE after saying why. */
static int apply_option(options *o, int c, const char *arg) {
  switch (c) {
  case OPT_COLL:
    o->have_coll = true;
    if (!parse_coll(arg, &o->coll, &o->exclusive))
      return bad_usage("unknown collective '%s'", arg);
    return 0;
  case OPT_SCHEDULE:
    o->schedule = arg;
    return 0;
  case 'p':
    if (!parse_i32(arg, &o->p) || o->p < 1)
      return bad_usage("-p needs a positive integer, not '%s'", arg);
    return 0;
  case OPT_RANK:
    return parse_i32(arg, &o->rank) ? 0
                                     : bad_usage("bad --rank '%s'", arg);
  case OPT_ROOT:
    return parse_i32(arg, &o->root) ? 0 : bad_usage("bad --root '%s'", arg);
  case OPT_COUNT:
    o->have_count = true;
    return parse_u64(arg, &o->count) ? 0
                                     : bad_usage("bad --count '%s'", arg);
  case OPT_COUNTS:
    o->counts_arg = arg;
    return 0;
  case OPT_DTYPE_SIZE:
    if (!parse_u64(arg, &o->dtype_size) || o->dtype_size < 1)
      return bad_usage("--dtype-size needs a positive integer, not '%s'", arg);
    return 0;
  case 'm':
    return parse_sizes(o, arg);
  case OPT_IN_PLACE:
    o->in_place = true;
    return 0;
  case OPT_JSON:
    o->json = true;
    return 0;
  case OPT_COST:
    o->cost = true;
    return 0;
  case OPT_ALL:
    o->all = true;
    return 0;
  case OPT_ALPHA:
    o->have_alpha = true;
    return parse_time(arg, &o->alpha) ? 0 : bad_usage("bad --alpha '%s'", arg);
  case OPT_BETA:
    o->have_beta = true;
    return parse_time(arg, &o->beta) ? 0 : bad_usage("bad --beta '%s'", arg);
  case OPT_GAMMA:
    o->have_gamma = true;
    return parse_time(arg, &o->gamma) ? 0 : bad_usage("bad --gamma '%s'", arg);
  case OPT_AUTO:
    o->autosel = true;
    return 0;
  case OPT_CROSSOVER:
    o->crossover = true;
    return 0;
  case OPT_TUNING:
    o->tuning_file = arg;
    return 0;
  case OPT_NON_COMMUTATIVE:
    o->non_commutative = true;
    return 0;
  case OPT_SWEEP:
    o->sweep = true;
    return 0;
  case OPT_VERIFY:
    o->verify = true;
    return 0;
  case OPT_DAT:
    o->dat = true;
    return 0;
  case OPT_DOT:
    o->dot = true;
    return 0;
  case OPT_TREE:
    o->tree = true;
    return 0;
  case OPT_PMAX:
    o->have_pmax = true;
    if (!parse_i32(arg, &o->pmax) || o->pmax < 2)
      return bad_usage("--pmax needs an integer >= 2, not '%s'", arg);
    return 0;
  default:
    return bad_usage("unknown option");
  }
}

/* --sweep's combinations. */
static int check_sweep(options *o) {
  if (!o->cost)
    return bad_usage("--sweep goes with --cost");
  if (o->p != 0 || o->have_count || o->counts_arg != NULL || o->in_place ||
      o->all || o->rank != 0 || o->root != 0 || o->non_commutative)
    return bad_usage("--cost --sweep takes -m, --pmax, --coll, --schedule, "
                     "--dtype-size, --tuning, --alpha, --beta, --gamma, "
                     "--verify, --json and --dat only");
  if (o->json && o->dat)
    return bad_usage("give --json or --dat, not both");
  if (!o->have_pmax)
    o->pmax = o->verify ? 64 : 1000000;
  if (o->verify) {
    if (o->have_m || o->json || o->dat || o->tuning_file != NULL ||
        o->have_alpha || o->have_beta || o->have_gamma)
      return bad_usage("--verify takes --pmax, --coll and --schedule only");
    return 0;
  }
  if (!o->have_m)
    return bad_usage("--sweep needs -m BYTES[,BYTES...]");
  for (size_t i = 0; i < o->nm; i++)
    if (o->ms[i] % o->dtype_size != 0)
      return bad_usage("-m %" PRIu64 " is not a multiple of --dtype-size "
                       "%" PRIu64,
                       o->ms[i], o->dtype_size);
  return 0;
}

/* Option combinations that only make sense together. */
static int check_options(options *o) {
  if (o->verify && !o->sweep)
    return bad_usage("--verify goes with --cost --sweep");
  if ((o->dat || o->have_pmax) && !o->sweep)
    return bad_usage("--dat and --pmax go with --cost --sweep");
  if (o->sweep)
    return check_sweep(o);
  if (o->tree && !o->dot)
    return bad_usage("--tree goes with --dot");
  if (o->dot) {
    if (o->cost || o->autosel || o->crossover || o->json)
      return bad_usage("--dot draws a schedule: not with --cost, --auto, "
                       "--crossover or --json");
    if (o->p > DOT_MAX_P)
      return bad_usage("--dot draws at most p = %d", DOT_MAX_P);
    if (o->tree &&
        (o->have_count || o->counts_arg != NULL || o->in_place ||
         (o->coll != CRNET_COLL_REDUCE_SCATTER &&
          o->coll != CRNET_COLL_ALLREDUCE && o->coll != CRNET_COLL_REDUCE)))
      return bad_usage("--dot --tree is for reduce_scatter, allreduce and "
                       "reduce, one element per block, not in place");
  }
  if (o->nm > 1)
    return bad_usage("-m takes a list of sizes only with --sweep");
  if (o->p < 1)
    return bad_usage("-p is required");
  if (o->cost + o->autosel + o->crossover > 1)
    return bad_usage("--cost, --auto and --crossover exclude each other");
  if (o->autosel || o->crossover) {
    if (o->autosel && !o->have_m)
      return bad_usage("--auto needs -m BYTES");
    if (o->have_m && o->m % o->dtype_size != 0)
      return bad_usage("-m %" PRIu64 " is not a multiple of --dtype-size "
                       "%" PRIu64,
                       o->m, o->dtype_size);
    if (o->have_count || o->counts_arg != NULL || o->schedule != NULL ||
        o->in_place || o->all || o->rank != 0 || o->root != 0)
      return bad_usage("--auto and --crossover take -p, -m, --coll, "
                       "--dtype-size, --tuning, --alpha, --beta, --gamma, "
                       "--non-commutative and --json only");
    return 0;
  }
  if (o->tuning_file != NULL || o->non_commutative)
    return bad_usage("--tuning and --non-commutative are for --auto and "
                     "--crossover");
  if (!o->cost && !o->have_coll)
    return bad_usage("--coll is required (or --cost)");
  if (o->cost && !o->have_m)
    return bad_usage("--cost needs -m BYTES");
  if (o->cost && o->m % o->dtype_size != 0)
    return bad_usage("-m %" PRIu64 " is not a multiple of --dtype-size %" PRIu64,
                     o->m, o->dtype_size);
  if (o->cost && (o->have_count || o->counts_arg != NULL))
    return bad_usage("--cost takes -m, not --count or --counts");
  if (!o->cost && o->have_m)
    return bad_usage("-m is for --cost; use --count to view a schedule");
  if (o->rank < 0 || o->rank >= o->p)
    return bad_usage("--rank %d is not in 0..%d", o->rank, o->p - 1);
  if (o->root < 0 || o->root >= o->p)
    return bad_usage("--root %d is not in 0..%d", o->root, o->p - 1);
  if (o->counts_arg != NULL && o->have_count)
    return bad_usage("give --count or --counts, not both");
  if (o->counts_arg != NULL && o->coll != CRNET_COLL_REDUCE_SCATTER &&
      o->coll != CRNET_COLL_ALLGATHER && o->coll != CRNET_COLL_GATHER &&
      o->coll != CRNET_COLL_SCATTER)
    return bad_usage("--counts is for reduce_scatter, allgather, gather and "
                     "scatter");
  return 0;
}

/* 0, 1 (help printed: exit 0) or EXIT_USAGE. */
static int parse_options(int argc, char **argv, options *o) {
  static const struct option longopts[] = {
      {"coll", required_argument, NULL, OPT_COLL},
      {"schedule", required_argument, NULL, OPT_SCHEDULE},
      {"rank", required_argument, NULL, OPT_RANK},
      {"count", required_argument, NULL, OPT_COUNT},
      {"counts", required_argument, NULL, OPT_COUNTS},
      {"dtype-size", required_argument, NULL, OPT_DTYPE_SIZE},
      {"root", required_argument, NULL, OPT_ROOT},
      {"in-place", no_argument, NULL, OPT_IN_PLACE},
      {"json", no_argument, NULL, OPT_JSON},
      {"cost", no_argument, NULL, OPT_COST},
      {"alpha", required_argument, NULL, OPT_ALPHA},
      {"beta", required_argument, NULL, OPT_BETA},
      {"gamma", required_argument, NULL, OPT_GAMMA},
      {"all", no_argument, NULL, OPT_ALL},
      {"auto", no_argument, NULL, OPT_AUTO},
      {"crossover", no_argument, NULL, OPT_CROSSOVER},
      {"tuning", required_argument, NULL, OPT_TUNING},
      {"non-commutative", no_argument, NULL, OPT_NON_COMMUTATIVE},
      {"sweep", no_argument, NULL, OPT_SWEEP},
      {"verify", no_argument, NULL, OPT_VERIFY},
      {"dat", no_argument, NULL, OPT_DAT},
      {"pmax", required_argument, NULL, OPT_PMAX},
      {"dot", no_argument, NULL, OPT_DOT},
      {"tree", no_argument, NULL, OPT_TREE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c, rc;

  memset(o, 0, sizeof *o);
  o->dtype_size = 4;
  opterr = 0; /* bad_usage says it, in one line */
  while ((c = getopt_long(argc, argv, ":hp:m:", longopts, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      return 1;
    }
    if (c == '?')
      return bad_usage("unknown option '%s'", argv[optind - 1]);
    if (c == ':')
      return bad_usage("option '%s' needs a value", argv[optind - 1]);
    rc = apply_option(o, c, optarg);
    if (rc != 0)
      return rc;
  }
  if (optind < argc)
    return bad_usage("unexpected argument '%s'", argv[optind]);
  return check_options(o);
}

/* ---- the vector's blocks ------------------------------------------------ */

/* Block lengths (elements) and their prefix sums: block b is vector
 * elements [prefix[b], prefix[b+1]). */
typedef struct blocks {
  int32_t p;
  uint64_t *counts; /* p */
  uint64_t *prefix; /* p + 1 */
} blocks;

static void blocks_free(blocks *b) {
  free(b->counts);
  free(b->prefix);
}

/* From --counts (p comma-separated lengths) or an even cut of `count`.
 * 0, or EXIT_USAGE after saying why (or 1 on out of memory). */
static int blocks_make(blocks *b, int32_t p, uint64_t count,
                       const char *counts_arg) {
  b->p = p;
  b->counts = malloc(sizeof *b->counts * (size_t)p);
  b->prefix = malloc(sizeof *b->prefix * ((size_t)p + 1));
  if (b->counts == NULL || b->prefix == NULL) {
    blocks_free(b);
    fputs("crsched: out of memory\n", stderr);
    return 1;
  }
  for (int32_t i = 0; i < p; i++) {
    uint64_t off;
    crnet__block_range(count, p, i, &off, &b->counts[i]);
  }
  if (counts_arg != NULL) {
    const char *s = counts_arg;
    int32_t i = 0;
    for (; *s != '\0' && i < p; i++) {
      char num[32];
      size_t len = strcspn(s, ",");
      if (len == 0 || len >= sizeof num)
        break;
      memcpy(num, s, len);
      num[len] = '\0';
      if (!parse_u64(num, &b->counts[i]))
        break;
      s += len;
      if (*s == ',' && s[1] != '\0')
        s++;
    }
    if (i != p || *s != '\0') {
      blocks_free(b);
      return bad_usage("--counts needs %d comma-separated lengths", p);
    }
  }
  b->prefix[0] = 0;
  for (int32_t i = 0; i < p; i++)
    b->prefix[i + 1] = b->prefix[i] + b->counts[i];
  return 0;
}

/* Where element 0 of each buffer sits in the vector, or -1 when the buffer
 * is not a window on it (TEMP, always: builders keep it in R order). */
typedef struct layout {
  int64_t base[CRNET__BUF_COUNT];
} layout;

static layout layout_of(const crnet__call *call, const blocks *b) {
  layout l = {{0, 0, -1}};
  int64_t own = (int64_t)b->prefix[call->rank];
  if (call->coll == CRNET_COLL_REDUCE_SCATTER && !call->in_place)
    l.base[CRNET__BUF_RECV] = own;
  if (call->coll == CRNET_COLL_ALLGATHER || call->coll == CRNET_COLL_GATHER)
    l.base[CRNET__BUF_SEND] = own;
  if (call->coll == CRNET_COLL_SCATTER && !call->in_place)
    l.base[CRNET__BUF_RECV] = own;
  if (call->coll == CRNET_COLL_BARRIER || call->coll == CRNET_COLL_SCAN)
    l.base[CRNET__BUF_SEND] = l.base[CRNET__BUF_RECV] = -1; /* not blocks */
  return l;
}

/* Index of the last prefix entry <= x. */
static int32_t last_at_most(const blocks *b, uint64_t x) {
  int32_t lo = 0, hi = b->p; /* prefix[lo] <= x always (prefix[0] = 0) */
  while (lo < hi) {
    int32_t mid = lo + (hi - lo + 1) / 2;
    if (b->prefix[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The blocks a segment covers exactly, as [*first, *last]; false when it
 * is not a whole number of blocks of the vector. */
static bool seg_blocks(const blocks *b, const layout *l, const crnet__seg *g,
                       int32_t *first, int32_t *last) {
  uint64_t lo, hi;
  int32_t end;
  if (g->buf >= CRNET__BUF_COUNT || l->base[g->buf] < 0 || g->count == 0)
    return false;
  lo = (uint64_t)l->base[g->buf] + g->off;
  hi = lo + g->count;
  if (hi > b->prefix[b->p])
    return false;
  *first = last_at_most(b, lo); /* skips zero-length blocks starting at lo */
  end = last_at_most(b, hi - 1) + 1;
  if (b->prefix[*first] != lo || b->prefix[end] != hi)
    return false;
  *last = end - 1;
  return *first <= *last;
}

/* ---- skips ------------------------------------------------------------ */

/* The circulant skip sequence of the schedule (n == 0 for other families). */
typedef struct skips {
  int32_t *s;
  int n;
} skips;

static int skips_make(skips *k, const char *name, int32_t p) {
  k->n = 0;
  k->s = malloc(sizeof *k->s * (size_t)p);
  if (k->s == NULL)
    return CRNET_ENOMEM;
  k->n = crnet__circ_skips(name, p, k->s);
  if (k->n < 0)
    k->n = 0; /* not a circulant schedule */
  return 0;
}

/* The circulant phases of round `r` of a schedule with `nrounds` rounds:
 * (s', s) and the direction (+1: to rank+s, from rank-s, the reduce-scatter
 * rounds; -1: the reverse, the allgather rounds). False when the schedule's
 * rounds are not exactly the phases (another family, p = 1, ...). */
static bool round_skip(const skips *k, crnet_collective coll, uint32_t nrounds,
                       uint32_t r, int32_t *sp, int32_t *s, int *dir) {
  uint32_t rs = k->n > 0 ? (uint32_t)k->n - 1 : 0, ag_first = rs;
  uint32_t expect = 2 * rs;
  if (coll == CRNET_COLL_REDUCE_SCATTER || coll == CRNET_COLL_BARRIER)
    expect = ag_first = rs;
  if (coll == CRNET_COLL_ALLGATHER) {
    expect = rs;
    ag_first = 0;
  }
  if (rs == 0 || nrounds != expect || r >= nrounds)
    return false;
  if (r < ag_first) {
    *sp = k->s[r];
    *s = k->s[r + 1];
    *dir = 1;
  } else {
    uint32_t j = r - ag_first;
    *sp = k->s[k->n - 2 - (int)j];
    *s = k->s[k->n - 1 - (int)j];
    *dir = -1;
  }
  return true;
}

static int32_t mod_p(int64_t x, int32_t p) {
  int64_t m = x % p;
  return (int32_t)(m < 0 ? m + p : m);
}

/* ---- per-round totals --------------------------------------------------- */

typedef struct round_totals {
  bool comm;
  uint64_t sent, recv, reduced, copied; /* elements */
} round_totals;

static round_totals round_sum(const crnet__schedule *s, uint32_t k) {
  const crnet__round *ro = &s->rounds[k];
  round_totals t = {ro->send.peer >= 0 || ro->recv.peer >= 0, 0, 0, 0, 0};
  if (ro->send.peer >= 0)
    t.sent = crnet__xfer_count(s, &ro->send);
  if (ro->recv.peer >= 0)
    t.recv = crnet__xfer_count(s, &ro->recv);
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &s->steps[ro->first_step + i];
    if (st->kind == CRNET__STEP_REDUCE)
      t.reduced += st->src.count;
    else
      t.copied += st->src.count;
  }
  return t;
}

/* ---- viewing ------------------------------------------------------------ */

/* Everything the printers need about the one schedule shown. */
typedef struct view {
  const options *o;
  const char *name;
  const crnet__call *call;
  const crnet__schedule *s;
  const blocks *b;
  layout l;
  skips k;
} view;

static void text_segs(const view *v, const crnet__xfer *x) {
  for (uint32_t i = 0; i < x->nsegs; i++) {
    const crnet__seg *g = &v->s->segs[x->first_seg + i];
    int32_t b0, b1;
    printf(" %s[%" PRIu64 "+%" PRIu64 "]", buf_names[g->buf], g->off,
           g->count);
    if (seg_blocks(v->b, &v->l, g, &b0, &b1)) {
      if (b0 == b1)
        printf(" (block %d)", b0);
      else
        printf(" (blocks %d-%d)", b0, b1);
    }
  }
}

/* The blocks the paper's algorithm moves in round r, as R indices
 * [*i0, *i0 + *len) (block (rank + i) mod p for R index i): in the
 * reduce-scatter phase R[s..s'-1] is sent and T[0..s'-s-1] received, in the
 * allgather phase R[0..s'-s-1] is sent and R[s..s'-1] received. False when
 * the round is not a circulant phase round, or when the schedule moves a
 * different number of elements (the pruned rounds of bcast and reduce). */
static bool paper_blocks(const view *v, uint32_t r, bool send, uint64_t elems,
                         int32_t *i0, int32_t *len) {
  int32_t sp, s, p = v->s->p;
  int dir;
  uint64_t sum = 0;
  if (!round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s, &dir) ||
      v->call->coll == CRNET_COLL_BARRIER)
    return false;
  *len = sp - s;
  *i0 = (send == (dir > 0)) ? s : 0;
  for (int32_t i = *i0; i < *i0 + *len; i++)
    sum += v->b->counts[mod_p((int64_t)v->s->rank + i, p)];
  return sum == elems;
}

/* "blocks 21,0-9": the blocks of R[i0 .. i0+len), in order. */
static void text_block_ids(const view *v, int32_t i0, int32_t len) {
  int32_t p = v->s->p, a = mod_p((int64_t)v->s->rank + i0, p);
  int32_t b = mod_p((int64_t)a + len - 1, p);
  printf("R[%d..%d] = block%s ", i0, i0 + len - 1, len > 1 ? "s" : "");
  if (len == 1)
    printf("%d", a);
  else if (a <= b)
    printf("%d-%d", a, b);
  else {
    if (a == p - 1)
      printf("%d,", a);
    else
      printf("%d-%d,", a, p - 1);
    if (b == 0)
      printf("0");
    else
      printf("0-%d", b);
  }
}

static void text_xfer(const view *v, uint32_t r, bool send, uint64_t elems) {
  const crnet__round *ro = &v->s->rounds[r];
  const crnet__xfer *x = send ? &ro->send : &ro->recv;
  int32_t i0, len;
  if (x->peer < 0)
    return;
  printf("  %-9s %-5d", send ? "send to" : "recv from", x->peer);
  text_segs(v, x);
  if (x->nsegs == 0)
    printf(" (empty message)");
  printf("  %" PRIu64 " bytes\n", elems * v->o->dtype_size);
  if (paper_blocks(v, r, send, elems, &i0, &len)) {
    printf("            ");
    text_block_ids(v, i0, len);
    putchar('\n');
  }
}

static void text_steps(const view *v, const crnet__round *ro) {
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &v->s->steps[ro->first_step + i];
    bool red = st->kind == CRNET__STEP_REDUCE;
    printf("  %-6s %s[%" PRIu64 "+%" PRIu64 "] -> %s[%" PRIu64 "]%s\n",
           red ? "reduce" : "copy", buf_names[st->src.buf], st->src.off,
           st->src.count, buf_names[st->dst.buf], st->dst.off,
           !red                         ? ""
           : st->order == CRNET__SRC_LEFT ? " (src on the left)"
                                          : " (dst on the left)");
  }
}

/* "s'=22 s=11", plus a warning if a peer contradicts the skip. */
static void text_skip(const view *v, uint32_t r) {
  const crnet__round *ro = &v->s->rounds[r];
  int32_t sp, s, p = v->s->p, me = v->s->rank;
  int dir;
  if (!round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s, &dir))
    return;
  printf("  s'=%d s=%d %s", sp, s,
         dir > 0 ? "(reduce-scatter phase)" : "(allgather phase)");
  if ((ro->send.peer >= 0 && ro->send.peer != mod_p(me + (int64_t)dir * s, p)) ||
      (ro->recv.peer >= 0 && ro->recv.peer != mod_p(me - (int64_t)dir * s, p)))
    printf("  WARNING: peers do not match the skip");
}

static void text_header(const view *v) {
  const crnet__call *c = v->call;
  printf("%s, schedule %s, p = %d, rank %d", coll_label(c->coll, c->exclusive),
         v->name, c->p, c->rank);
  if (c->coll == CRNET_COLL_BCAST || c->coll == CRNET_COLL_REDUCE)
    printf(", root %d", c->root);
  printf("%s: %u rounds\n", c->in_place ? ", in place" : "", v->s->nrounds);
  if (c->coll != CRNET_COLL_BARRIER)
    printf("vector: %" PRIu64 " elements of %" PRIu64
           " bytes in %d blocks; TEMP: %" PRIu64 " elements\n",
           v->b->prefix[c->p], v->o->dtype_size, c->p, v->s->temp_count);
  if (v->k.n > 1) {
    printf("skips s:");
    for (int i = 0; i < v->k.n; i++)
      printf(" %d", v->k.s[i]);
    putchar('\n');
  }
}

static void print_text(const view *v) {
  text_header(v);
  for (uint32_t r = 0; r < v->s->nrounds; r++) {
    const crnet__round *ro = &v->s->rounds[r];
    round_totals t = round_sum(v->s, r);
    printf("round %u", r);
    text_skip(v, r);
    if (!t.comm)
      printf("  (local steps only)");
    putchar('\n');
    text_xfer(v, r, true, t.sent);
    text_xfer(v, r, false, t.recv);
    text_steps(v, ro);
  }
}

static void json_seg(const crnet__seg *g) {
  printf("[\"%s\",%" PRIu64 ",%" PRIu64 "]", buf_names[g->buf], g->off,
         g->count);
}

/* "send_blocks":[[buf,off,count],...],"send_block_ranges":[[b0,b1]|null..] */
static void json_xfer(const view *v, const crnet__xfer *x, const char *key) {
  printf(",\"%s_blocks\":[", key);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    if (i > 0)
      putchar(',');
    json_seg(&v->s->segs[x->first_seg + i]);
  }
  printf("],\"%s_block_ranges\":[", key);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    int32_t b0, b1;
    if (i > 0)
      putchar(',');
    if (seg_blocks(v->b, &v->l, &v->s->segs[x->first_seg + i], &b0, &b1))
      printf("[%d,%d]", b0, b1);
    else
      printf("null");
  }
  putchar(']');
}

/* ,"send_block_ids":[...] or null: see paper_blocks. */
static void json_block_ids(const view *v, uint32_t r, bool send,
                           uint64_t elems) {
  int32_t i0, len;
  printf(",\"%s_block_ids\":", send ? "send" : "recv");
  if (!paper_blocks(v, r, send, elems, &i0, &len)) {
    printf("null");
    return;
  }
  putchar('[');
  for (int32_t i = 0; i < len; i++)
    printf("%s%d", i > 0 ? "," : "",
           mod_p((int64_t)v->s->rank + i0 + i, v->s->p));
  putchar(']');
}

static void json_steps(const view *v, const crnet__round *ro) {
  printf(",\"steps\":[");
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &v->s->steps[ro->first_step + i];
    bool red = st->kind == CRNET__STEP_REDUCE;
    printf("%s{\"op\":\"%s\",\"src\":", i > 0 ? "," : "",
           red ? "reduce" : "copy");
    json_seg(&st->src);
    printf(",\"dst\":");
    json_seg(&st->dst);
    if (red)
      printf(",\"order\":\"%s\"",
             st->order == CRNET__SRC_LEFT ? "src-left" : "dst-left");
    putchar('}');
  }
  putchar(']');
}

static void print_json_round(const view *v, uint32_t r) {
  const crnet__round *ro = &v->s->rounds[r];
  round_totals t = round_sum(v->s, r);
  uint64_t b = v->o->dtype_size;
  int32_t sp, s;
  int dir;
  printf("{\"round\":%u,\"send_to\":%d,\"recv_from\":%d", r, ro->send.peer,
         ro->recv.peer);
  if (round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s, &dir))
    printf(",\"s_prev\":%d,\"skip\":%d,\"phase\":\"%s\"", sp, s,
           dir > 0 ? "reduce-scatter" : "allgather");
  else
    printf(",\"s_prev\":null,\"skip\":null,\"phase\":null");
  json_xfer(v, &ro->send, "send");
  json_xfer(v, &ro->recv, "recv");
  json_block_ids(v, r, true, t.sent);
  json_block_ids(v, r, false, t.recv);
  printf(",\"bytes\":{\"sent\":%" PRIu64 ",\"recv\":%" PRIu64
         ",\"reduced\":%" PRIu64 ",\"copied\":%" PRIu64 "}",
         t.sent * b, t.recv * b, t.reduced * b, t.copied * b);
  json_steps(v, ro);
  puts("}");
}

/* Resolves the schedule for the call; on failure prints crnet__select's
 * reason and returns EXIT_USAGE. */
static int resolve(const char *requested, const crnet__call *call,
                   const char **name) {
  char why[256] = "";
  uint32_t id;
  int rc = crnet__select(requested, call, name, &id, why, sizeof why);
  if (rc == 0)
    return 0;
  fprintf(stderr, "crsched: %s\n", why[0] != '\0' ? why : crnet_strerror(rc));
  return rc == CRNET_ENOMEM ? 1 : EXIT_USAGE;
}

static crnet__call call_for(const options *o, crnet_collective coll,
                            bool exclusive, int32_t rank, const blocks *b) {
  crnet__call c;
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.exclusive = exclusive;
  c.esize = (uint32_t)o->dtype_size;
  c.p = o->p;
  c.rank = rank;
  /* alltoall: the blocks are the p blocks of count per peer; alltoallv:
   * the same, as per-peer counts and packed displacements */
  c.count = is_a2a(coll)
                ? b->counts[0]
                : b->prefix[o->p];
  c.counts = b->counts;
  if (coll == CRNET_COLL_ALLTOALLV) {
    c.sdispls = c.rdispls = b->prefix;
    c.rcounts = b->counts;
  }
  c.root = o->root;
  c.in_place = o->in_place;
  c.commutative = true;
  return c;
}

static int build_or_complain(const char *name, const crnet__call *call,
                             crnet__schedule *s) {
  int rc = crnet__build(name, call, s);
  if (rc != 0)
    fprintf(stderr, "crsched: building %s for %s at p = %d, rank %d: %s\n",
            name, coll_label(call->coll, call->exclusive), call->p, call->rank,
            crnet_strerror(rc));
  return rc;
}

static int view_main(const options *o) {
  blocks b;
  crnet__call call;
  crnet__schedule s;
  view v;
  uint64_t count = o->have_count ? o->count : (uint64_t)o->p;
  int rc;
  if (is_a2a(o->coll)) {
    if (!o->have_count)
      count = 1;
    if (count > UINT64_MAX / (uint64_t)o->p)
      return bad_usage("--count %" PRIu64 " is too large", count);
    count *= (uint64_t)o->p;
  }
  rc = blocks_make(&b, o->p, count, o->counts_arg);
  if (rc != 0)
    return rc;
  call = call_for(o, o->coll, o->exclusive, o->rank, &b);
  memset(&v, 0, sizeof v);
  rc = resolve(o->schedule != NULL ? o->schedule : "auto", &call, &v.name);
  if (rc != 0)
    goto out_blocks;
  rc = build_or_complain(v.name, &call, &s) != 0 ? 1 : 0;
  if (rc != 0)
    goto out_blocks;
  if (skips_make(&v.k, v.name, o->p) != 0) {
    fputs("crsched: out of memory\n", stderr);
    rc = 1;
    goto out_sched;
  }
  if (call.coll == CRNET_COLL_SCAN)
    v.k.n = 0; /* dissemination: no circulant skip phases to annotate */
  v.o = o;
  v.call = &call;
  v.s = &s;
  v.b = &b;
  v.l = layout_of(&call, &b);
  if (o->json)
    for (uint32_t r = 0; r < s.nrounds; r++)
      print_json_round(&v, r);
  else
    print_text(&v);
  free(v.k.s);
out_sched:
  crnet__sched_free(&s);
out_blocks:
  blocks_free(&b);
  return rc;
}

/* ---- the cost model --------------------------------------------------- */

/* A row whose builder would take longer than this (estimated from rank
 * 0's build time times p) is skipped unless --all is given. */
#define SLOW_ROW_SECONDS 60.0

typedef struct cost_row {
  crnet_collective coll;
  bool exclusive;
  const char *name;
  uint32_t rounds;              /* communicating rounds, max over ranks */
  uint64_t sent, recv, reduced; /* bytes, max over ranks */
  double time, rank_sum;        /* see the top of the file */
  bool sampled;                 /* ranks symmetric: one rank computed */
  bool skipped;                 /* too slow to build, see SLOW_ROW_SECONDS */
} cost_row;

/* One rank's schedule reduced to what the model needs, per round. */
typedef struct profile {
  round_totals *t;
  uint32_t n;
} profile;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Builds rank's schedule, keeps its per-round totals, frees it. 0 or 1. */
static int profile_rank(const options *o, const cost_row *row, int32_t rank,
                        const blocks *b, profile *pr) {
  crnet__call call = call_for(o, row->coll, row->exclusive, rank, b);
  crnet__schedule s;
  if (build_or_complain(row->name, &call, &s) != 0)
    return 1;
  pr->n = s.nrounds;
  pr->t = malloc(sizeof *pr->t * (s.nrounds ? s.nrounds : 1));
  if (pr->t != NULL)
    for (uint32_t k = 0; k < s.nrounds; k++)
      pr->t[k] = round_sum(&s, k);
  crnet__sched_free(&s);
  if (pr->t == NULL) {
    fputs("crsched: out of memory\n", stderr);
    return 1;
  }
  return 0;
}

static bool profile_equal(const profile *a, const profile *b) {
  if (a->n != b->n)
    return false;
  for (uint32_t k = 0; k < a->n; k++)
    if (a->t[k].comm != b->t[k].comm || a->t[k].sent != b->t[k].sent ||
        a->t[k].recv != b->t[k].recv || a->t[k].reduced != b->t[k].reduced)
      return false;
  return true;
}

static double round_cost(const options *o, const round_totals *t) {
  uint64_t B = o->dtype_size, moved = t->sent > t->recv ? t->sent : t->recv;
  return (t->comm ? o->alpha : 0) + o->beta * (double)(moved * B) +
         o->gamma * (double)(t->reduced * B);
}

/* Adds one rank to the row; per_round[k] keeps the max over ranks of the
 * round's cost (per_round has room for *nmax rounds, grown as needed). */
static bool add_rank(const options *o, const profile *pr, cost_row *row,
                     double **per_round, uint32_t *nmax) {
  uint64_t B = o->dtype_size, sent = 0, recv = 0, reduced = 0;
  uint32_t comm = 0;
  double sum = 0;
  if (pr->n > *nmax) {
    double *t = realloc(*per_round, sizeof *t * pr->n);
    if (t == NULL)
      return false;
    for (uint32_t k = *nmax; k < pr->n; k++)
      t[k] = 0;
    *per_round = t;
    *nmax = pr->n;
  }
  for (uint32_t k = 0; k < pr->n; k++) {
    double c = round_cost(o, &pr->t[k]);
    if (c > (*per_round)[k])
      (*per_round)[k] = c;
    sum += c;
    comm += pr->t[k].comm;
    sent += pr->t[k].sent * B;
    recv += pr->t[k].recv * B;
    reduced += pr->t[k].reduced * B;
  }
  row->rounds = comm > row->rounds ? comm : row->rounds;
  row->sent = sent > row->sent ? sent : row->sent;
  row->recv = recv > row->recv ? recv : row->recv;
  row->reduced = reduced > row->reduced ? reduced : row->reduced;
  row->rank_sum = sum > row->rank_sum ? sum : row->rank_sum;
  return true;
}

/* Rotation symmetry. The circulant builders work on R[i] = V[(r+i) mod p]
 * with peers r +- s, and the ring on blocks (r-k) mod p with peers r +- 1,
 * so for the rootless collectives, with every block the same size, renaming
 * rank r to r+1 turns rank r's schedule into rank r+1's, and every rank has
 * the same per-round totals. bcast and reduce have a root, and unequal
 * blocks break it, so those always loop. The claim is also checked on a few
 * ranks (see cost_one), and any difference falls back to the full loop. */
static bool rotation_symmetric(const options *o, const cost_row *row,
                               const blocks *b) {
  bool rotating = strncmp(row->name, "circulant", 9) == 0 ||
                  strcmp(row->name, "ring") == 0 ||
                  strcmp(row->name, "bruck") == 0 ||
                  strcmp(row->name, "pairwise") == 0;
  if (o->all || !rotating || row->coll == CRNET_COLL_BCAST ||
      row->coll == CRNET_COLL_REDUCE || row->coll == CRNET_COLL_SCAN)
    return false;
  for (int32_t i = 1; i < b->p; i++)
    if (b->counts[i] != b->counts[0])
      return false;
  return true;
}

/* True if ranks 1, p/2 and p-1 have rank 0's totals (r0). 0 or 1 in *rc. */
static bool samples_agree(const options *o, const cost_row *row,
                          const blocks *b, const profile *r0, int *rc) {
  const int32_t sample[] = {1, o->p / 2, o->p - 1};
  bool same = true;
  for (size_t i = 0; i < sizeof sample / sizeof sample[0] && same; i++) {
    profile pr;
    if (sample[i] < 1 || sample[i] >= o->p)
      continue;
    *rc = profile_rank(o, row, sample[i], b, &pr);
    if (*rc != 0)
      return false;
    same = profile_equal(r0, &pr);
    free(pr.t);
  }
  return same;
}

/* Fills the row from every rank (or rank 0 alone, when the ranks are
 * symmetric). 0 or 1. */
static int cost_one(const options *o, const blocks *b, cost_row *row) {
  double *per_round = NULL, t0 = now();
  uint32_t nmax = 0;
  profile pr;
  int rc = profile_rank(o, row, 0, b, &pr);
  if (rc != 0)
    return rc;
  if (rotation_symmetric(o, row, b) && samples_agree(o, row, b, &pr, &rc))
    row->sampled = true;
  else if (rc == 0 && !o->all && (now() - t0) * o->p > SLOW_ROW_SECONDS)
    row->skipped = true;
  if (rc == 0 && !row->skipped && !add_rank(o, &pr, row, &per_round, &nmax))
    rc = 1;
  free(pr.t);
  for (int32_t r = 1; r < o->p && rc == 0 && !row->sampled && !row->skipped;
       r++) {
    rc = profile_rank(o, row, r, b, &pr);
    if (rc != 0)
      break;
    if (!add_rank(o, &pr, row, &per_round, &nmax))
      rc = 1;
    free(pr.t);
  }
  if (rc != 0)
    fprintf(stderr, "crsched: %s %s: giving up\n",
            coll_label(row->coll, row->exclusive), row->name);
  for (uint32_t k = 0; k < nmax; k++)
    row->time += per_round[k];
  free(per_round);
  return rc;
}

static int by_time(const void *a, const void *b) {
  const cost_row *x = a, *y = b;
  if (x->coll != y->coll)
    return x->coll < y->coll ? -1 : 1;
  if (x->exclusive != y->exclusive)
    return x->exclusive ? 1 : -1;
  if (x->skipped != y->skipped)
    return x->skipped ? 1 : -1;
  if (x->time != y->time)
    return x->time < y->time ? -1 : 1;
  return strcmp(x->name, y->name);
}

static void print_cost_json(const cost_row *r) {
  printf("{\"coll\":\"%s\",\"schedule\":\"%s\"",
         coll_label(r->coll, r->exclusive), r->name);
  if (r->skipped) {
    puts(",\"skipped\":true}");
    return;
  }
  printf(",\"rounds\":%u,\"bytes_sent\":%" PRIu64 ",\"bytes_recv\":%" PRIu64
         ",\"bytes_reduced\":%" PRIu64 ",\"time\":%.17g,\"rank_sum\":%.17g,"
         "\"sampled\":%s}\n",
         r->rounds, r->sent, r->recv, r->reduced, r->time, r->rank_sum,
         r->sampled ? "true" : "false");
}

static void print_cost_text(const cost_row *r) {
  printf("%-15s %-19s ", coll_label(r->coll, r->exclusive), r->name);
  if (r->skipped) {
    printf("skipped: building every rank would take over %.0f s "
           "(--all)\n",
           SLOW_ROW_SECONDS);
    return;
  }
  printf("%7u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %13.6g %13.6g%s\n",
         r->rounds, r->sent, r->recv, r->reduced, r->time, r->rank_sum,
         r->sampled ? " *" : "");
}

static void print_cost(const options *o, const cost_row *rows, size_t n) {
  bool sampled = false;
  if (!o->json) {
    printf("p = %d, m = %" PRIu64 " bytes (%" PRIu64
           " elements of %" PRIu64 "), alpha = %g s, beta = %g s/B, "
           "gamma = %g s/B\n"
           "time: synchronous rounds, sum over rounds of the slowest rank; "
           "rank-sum: the busiest rank alone\n",
           o->p, o->m, o->m / o->dtype_size, o->dtype_size, o->alpha,
           o->beta, o->gamma);
    printf("%-15s %-19s %7s %12s %12s %12s %13s %13s\n", "collective",
           "schedule", "rounds", "sent B/rank", "recv B/rank", "reduced B",
           "time", "rank-sum");
  }
  for (size_t i = 0; i < n; i++) {
    sampled |= rows[i].sampled;
    if (o->json)
      print_cost_json(&rows[i]);
    else
      print_cost_text(&rows[i]);
  }
  if (!o->json && sampled)
    puts("* all ranks symmetric (checked on ranks 0, 1, p/2, p-1): one rank "
         "computed; --all computes every rank");
}

/* The rows to compute: every (collective, schedule) asked for that the
 * selection table allows. 0, or EXIT_USAGE when --schedule cannot do it. */
static int cost_rows(const options *o, const blocks *vec, const blocks *a2a,
                     cost_row *rows, size_t *n) {
  const blocks *b;
  *n = 0;
  for (size_t c = 0; c < NKNOWN_COLLS; c++) {
    crnet_collective coll = known_colls[c].coll;
    bool excl = known_colls[c].exclusive;
    if (o->have_coll && (coll != o->coll || excl != o->exclusive))
      continue;
    b = is_a2a(coll) ? a2a : vec;
    if (o->schedule != NULL) {
      crnet__call call = call_for(o, coll, excl, 0, b);
      const char *name;
      char why[256];
      uint32_t id;
      if (crnet__select(o->schedule, &call, &name, &id, why, sizeof why) != 0) {
        if (o->have_coll)
          return resolve(o->schedule, &call, &name);
        continue; /* all collectives: show those it can do */
      }
      rows[(*n)++] = (cost_row){.coll = coll, .exclusive = excl, .name = name};
      continue;
    }
    for (size_t s = 0; crnet__schedule_name(s) != NULL; s++) {
      crnet__call call = call_for(o, coll, excl, 0, b);
      const char *name;
      char why[256];
      uint32_t id;
      /* every schedule that can do the call at this p */
      if (crnet__select(crnet__schedule_name(s), &call, &name, &id, why,
                        sizeof why) == 0)
        rows[(*n)++] = (cost_row){.coll = coll, .exclusive = excl,
                                  .name = name};
    }
  }
  if (*n == 0 && o->schedule != NULL) {
    crnet__call call = call_for(o, CRNET_COLL_ALLREDUCE, false, 0, vec);
    const char *name;
    return resolve(o->schedule, &call, &name);
  }
  return 0;
}

static int cost_main(const options *o) {
  size_t nnames = 0, n;
  cost_row *rows;
  blocks b, a2a; /* the vector; alltoall's p equal blocks of -m */
  uint64_t elems = o->m / o->dtype_size;
  int rc;
  while (crnet__schedule_name(nnames) != NULL)
    nnames++;
  rows = calloc(NKNOWN_COLLS * nnames, sizeof *rows);
  if (rows == NULL)
    return CRNET_ENOMEM;
  rc = blocks_make(&b, o->p, elems, NULL);
  if (rc != 0) {
    free(rows);
    return rc;
  }
  rc = blocks_make(&a2a, o->p, elems / (uint64_t)o->p * (uint64_t)o->p, NULL);
  if (rc != 0) {
    blocks_free(&b);
    free(rows);
    return rc;
  }
  rc = cost_rows(o, &b, &a2a, rows, &n);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = cost_one(o, is_a2a(rows[i].coll) ? &a2a : &b, &rows[i]);
  if (rc == 0) {
    qsort(rows, n, sizeof rows[0], by_time);
    print_cost(o, rows, n);
  }
  blocks_free(&a2a);
  blocks_free(&b);
  free(rows);
  return rc;
}

/* ---- auto's choice ---------------------------------------------------- */

/* The tuning a job started here would use (rank 0 reads it), or --tuning,
 * with --alpha, --beta, --gamma in place of the file's constants. 0, or 1
 * after saying why. */
static int load_tuning(const options *o, crnet__tuning *t) {
  char path[1024], err[600];
  int where, rc = 0;
  if (o->tuning_file != NULL) {
    rc = crnet__tuning_load_file(t, o->tuning_file, true, err, sizeof err);
  } else if ((where = crnet__tuning_path(path, sizeof path)) >= 0) {
    rc = crnet__tuning_load_file(t, path, where == 1, err, sizeof err);
  } else {
    crnet__tuning_defaults(t);
  }
  if (rc != 0) {
    fprintf(stderr, "crsched: %s\n", err);
    return 1;
  }
  const struct {
    bool given;
    double v;
  } over[CRNET__TUNING_NPARAMS] = {{o->have_alpha, o->alpha},
                                   {o->have_beta, o->beta},
                                   {o->have_gamma, o->gamma}};
  for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
    if (!over[k].given)
      continue;
    t->base[k] = over[k].v;
    t->npoints[k] = 0;
    snprintf(t->source + strlen(t->source),
             sizeof t->source - strlen(t->source), ", --%s",
             crnet__tuning_param_name((crnet__tuning_param)k));
  }
  return 0;
}

/* The call auto sees for `elems` elements of the vector (alltoall: of the
 * send buffer; per peer rounded down, as in --cost). The blocks are freed
 * by the caller. 0, or 1 when out of memory. */
static int auto_call(const options *o, const crnet__tuning *t,
                     const coll_kind *k, uint64_t elems, blocks *b,
                     crnet__call *call) {
  uint64_t n = is_a2a(k->coll)
                   ? elems / (uint64_t)o->p * (uint64_t)o->p
                   : elems;
  if (blocks_make(b, o->p, n, NULL) != 0)
    return 1;
  *call = call_for(o, k->coll, k->exclusive, 0, b);
  call->commutative = !o->non_commutative;
  call->tuning = t;
  return 0;
}

/* auto's pick for `elems` elements. 0, or 1 after saying why. */
static int pick(const options *o, const crnet__tuning *t, const coll_kind *k,
                uint64_t elems, const char **name, double *seconds) {
  blocks b;
  crnet__call call;
  int rc;
  if (auto_call(o, t, k, elems, &b, &call) != 0)
    return 1;
  rc = crnet__auto_choose(&call, name, seconds);
  blocks_free(&b);
  if (rc != 0) {
    fprintf(stderr, "crsched: %s\n", crnet_strerror(rc));
    return 1;
  }
  return 0;
}

static bool wanted(const options *o, const coll_kind *k) {
  return !o->have_coll ||
         (k->coll == o->coll && k->exclusive == o->exclusive);
}

static void print_tuning(const options *o, const crnet__tuning *t) {
  char desc[400];
  crnet__tuning_describe(t, o->p, desc, sizeof desc);
  printf("p = %d, %s operator; tuning: %s\n", o->p,
         o->non_commutative ? "non-commutative" : "commutative", desc);
}

static int auto_main(const options *o) {
  crnet__tuning t;
  if (load_tuning(o, &t) != 0)
    return 1;
  if (!o->json) {
    print_tuning(o, &t);
    printf("m = %" PRIu64 " bytes\n%-15s %-17s %12s  %s\n", o->m,
           "collective", "auto", "model time", "candidates (model time)");
  }
  for (size_t i = 0; i < NKNOWN_COLLS; i++) {
    const coll_kind *k = &known_colls[i];
    const char *name;
    double best;
    blocks b;
    crnet__call call;
    if (!wanted(o, k))
      continue;
    if (pick(o, &t, k, o->m / o->dtype_size, &name, &best) != 0 ||
        auto_call(o, &t, k, o->m / o->dtype_size, &b, &call) != 0)
      return 1;
    if (o->json)
      printf("{\"coll\":\"%s\",\"p\":%d,\"m\":%" PRIu64
             ",\"commutative\":%s,\"auto\":\"%s\",\"time\":%.17g,"
             "\"candidates\":{",
             k->name, o->p, o->m, o->non_commutative ? "false" : "true", name,
             best);
    else
      printf("%-15s %-17s %12.4g ", k->name, name, best);
    for (size_t c = 0, shown = 0; crnet__auto_candidate(k->coll, c) != NULL;
         c++) {
      const char *cand = crnet__auto_candidate(k->coll, c);
      double secs;
      if (crnet__auto_price(cand, &call, &secs) != 0)
        continue;
      if (o->json)
        printf("%s\"%s\":%.17g", shown ? "," : "", cand, secs);
      else
        printf(" %s %.4g", cand, secs);
      shown++;
    }
    puts(o->json ? "}}" : "");
    blocks_free(&b);
  }
  return 0;
}

/* The smallest element count in (lo, hi], a multiple of step, whose pick
 * differs from lo's, given that hi's does. */
static int first_change(const options *o, const crnet__tuning *t,
                        const coll_kind *k, uint64_t step, uint64_t lo,
                        uint64_t hi, uint64_t *at) {
  const char *at_lo, *name;
  double secs;
  if (pick(o, t, k, lo, &at_lo, &secs) != 0)
    return 1;
  while (hi - lo > step) {
    uint64_t mid = lo + (hi - lo) / step / 2 * step;
    if (pick(o, t, k, mid, &name, &secs) != 0)
      return 1;
    if (strcmp(name, at_lo) == 0)
      lo = mid;
    else
      hi = mid;
  }
  *at = hi;
  return 0;
}

static int crossover_main(const options *o) {
  crnet__tuning t;
  uint64_t max_elems = (o->have_m ? o->m : (uint64_t)1 << 30) / o->dtype_size;
  if (load_tuning(o, &t) != 0)
    return 1;
  if (!o->json) {
    print_tuning(o, &t);
    printf("bytes from 0 to %" PRIu64 " (elements of %" PRIu64
           " bytes); each schedule from the size shown\n",
           max_elems * o->dtype_size, o->dtype_size);
  }
  for (size_t i = 0; i < NKNOWN_COLLS; i++) {
    const coll_kind *k = &known_colls[i];
    /* alltoall's pick only changes at whole elements per peer */
    uint64_t step = is_a2a(k->coll) ? (uint64_t)o->p : 1;
    uint64_t prev = 0, next;
    const char *cur, *name;
    double secs;
    if (!wanted(o, k))
      continue;
    if (pick(o, &t, k, 0, &cur, &secs) != 0)
      return 1;
    if (o->json)
      printf("{\"coll\":\"%s\",\"p\":%d,\"commutative\":%s,"
             "\"ranges\":[[0,\"%s\"]",
             k->name, o->p, o->non_commutative ? "false" : "true", cur);
    else
      printf("%-15s %s from 0 B", k->name, cur);
    /* A geometric grid (16 points per doubling), then bisection between
     * the grid points where the pick changed. Each price is a straight
     * line in m, so a candidate wins on one interval at most and a grid
     * this fine misses no change at the sizes that matter. */
    for (double g = (double)step; prev < max_elems; g *= 1.044273782) {
      uint64_t at;
      next = (uint64_t)g / step * step;
      if (next <= prev)
        next = prev + step;
      if (next > max_elems)
        next = max_elems;
      if (pick(o, &t, k, next, &name, &secs) != 0)
        return 1;
      if (strcmp(name, cur) != 0) {
        if (first_change(o, &t, k, step, prev, next, &at) != 0)
          return 1;
        if (pick(o, &t, k, at, &name, &secs) != 0)
          return 1;
        if (o->json)
          printf(",[%" PRIu64 ",\"%s\"]", at * o->dtype_size, name);
        else
          printf(", %s from %" PRIu64 " B", name, at * o->dtype_size);
        cur = name;
        /* look again from the change, in case of another one before next */
        next = at;
      }
      prev = next;
    }
    puts(o->json ? "]}" : "");
  }
  return 0;
}

/* ---- Graphviz pictures (--dot) -----------------------------------------
 *
 * --dot draws the communication graph of a collective: every rank's
 * schedule is built, and each round becomes one cluster holding the p ranks,
 * with an edge from sender to receiver labelled with the bytes of the
 * message (and the blocks, where the segments are whole blocks of the
 * vector). Circulant rounds are labelled with s' and s.
 *
 * --dot --tree draws the reduction tree of one rank's block, Träff's
 * Figure 1: the partial sums that end in block `--rank` and who combined
 * them. It is found by running every rank's schedule on tags instead of
 * numbers (tag_sim): an element carries the block it belongs to and the
 * rank whose partial sum it is (its root); a message copies tags; a reduce
 * step at rank j joins two partial sums of the same block into one rooted
 * at j, and each operand whose root is another rank a becomes a child of
 * j: a hooked into j by an edge labelled with the round and the distance
 * (j - a) mod p (the skip s in the circulant schedules). Nodes carry the
 * paper's label i = (r - j) mod p, so for the circulant reduce-scatter at
 * p = 22, rank 21, the tree is the figure's. Nothing of the tree is taken
 * from the formulas: it is what the built schedules do. */

typedef struct tag {
  int32_t block; /* -1: nothing written yet */
  int32_t root;
} tag;

typedef struct tag_rank {
  crnet__schedule s;
  bool built;
  tag *buf[CRNET__BUF_COUNT];
  uint64_t len[CRNET__BUF_COUNT];
  tag *msg; /* this round's outgoing message */
  uint64_t msg_len;
} tag_rank;

/* A node of the tree: a partial sum of the block, held by `rank`, hooked
 * into node `parent` in round `round`. Nodes 0..p-1 are the ranks' inputs;
 * a reduce at rank j whose operands are both other ranks' partial sums
 * makes a new node of rank j (the circulant schedules never do: there the
 * nodes are the ranks, as in the paper's figure). */
typedef struct tree_node {
  int32_t rank;
  int32_t parent; /* -1: not hooked (the root) */
  uint32_t round;
  bool sent; /* has left its rank: a later reduce there makes a new node */
} tree_node;

typedef struct tree {
  tree_node *n;
  int32_t count, cap;
} tree;

/* A new node of `rank`, or -1 when out of memory. */
static int32_t tree_add(tree *t, int32_t rank) {
  if (t->count == t->cap) {
    int32_t cap = t->cap ? 2 * t->cap : 64;
    tree_node *n = realloc(t->n, sizeof *n * (size_t)cap);
    if (n == NULL)
      return -1;
    t->n = n;
    t->cap = cap;
  }
  t->n[t->count] = (tree_node){rank, -1, 0, false};
  return t->count++;
}

static void grow(uint64_t *len, const crnet__seg *g) {
  if (g->off + g->count > len[g->buf])
    len[g->buf] = g->off + g->count;
}

/* Buffers as long as the schedule touches, SEND filled with input tags. */
static bool tag_alloc(tag_rank *t, const blocks *b, int32_t rank) {
  const crnet__schedule *s = &t->s;
  t->len[CRNET__BUF_SEND] = b->prefix[b->p];
  t->len[CRNET__BUF_RECV] = b->prefix[b->p];
  t->len[CRNET__BUF_TEMP] = s->temp_count;
  for (uint32_t i = 0; i < s->nsegs; i++)
    grow(t->len, &s->segs[i]);
  for (uint32_t i = 0; i < s->nsteps; i++) {
    grow(t->len, &s->steps[i].src);
    grow(t->len, &s->steps[i].dst);
  }
  for (int k = 0; k < CRNET__BUF_COUNT; k++) {
    t->buf[k] = malloc(sizeof(tag) * (t->len[k] ? t->len[k] : 1));
    if (t->buf[k] == NULL)
      return false;
    for (uint64_t e = 0; e < t->len[k]; e++)
      t->buf[k][e] = (tag){-1, -1};
  }
  for (int32_t blk = 0; blk < b->p; blk++)
    for (uint64_t e = b->prefix[blk]; e < b->prefix[blk + 1]; e++)
      t->buf[CRNET__BUF_SEND][e] = (tag){blk, rank};
  return true;
}

static void tag_free(tag_rank *t, int32_t p) {
  for (int32_t r = 0; r < p; r++) {
    for (int k = 0; k < CRNET__BUF_COUNT; k++)
      free(t[r].buf[k]);
    free(t[r].msg);
    if (t[r].built)
      crnet__sched_free(&t[r].s);
  }
  free(t);
}

/* Runs round k of every rank on tags; records the hooks of `block` in
 * edges. False (after saying why) when the schedules do not match. */
static bool tag_round(tag_rank *t, int32_t p, uint32_t k, int32_t block,
                      tree *tr) {
  for (int32_t r = 0; r < p; r++) { /* every send of the round first */
    const crnet__schedule *s = &t[r].s;
    t[r].msg_len = 0;
    if (k >= s->nrounds || s->rounds[k].send.peer < 0)
      continue;
    const crnet__xfer *x = &s->rounds[k].send;
    uint64_t n = crnet__xfer_count(s, x);
    free(t[r].msg);
    t[r].msg = malloc(sizeof(tag) * (n ? n : 1));
    if (t[r].msg == NULL)
      return false;
    for (uint32_t i = 0; i < x->nsegs; i++) {
      const crnet__seg *g = &s->segs[x->first_seg + i];
      memcpy(t[r].msg + t[r].msg_len, t[r].buf[g->buf] + g->off,
             sizeof(tag) * g->count);
      for (uint64_t e = 0; e < g->count; e++)
        if (t[r].msg[t[r].msg_len + e].block == block)
          tr->n[t[r].msg[t[r].msg_len + e].root].sent = true;
      t[r].msg_len += g->count;
    }
  }
  for (int32_t r = 0; r < p; r++) { /* then the receives */
    const crnet__schedule *s = &t[r].s;
    if (k >= s->nrounds || s->rounds[k].recv.peer < 0)
      continue;
    const crnet__xfer *x = &s->rounds[k].recv;
    const tag_rank *from = &t[x->peer];
    uint64_t at = 0;
    if (crnet__xfer_count(s, x) != from->msg_len || k >= from->s.nrounds ||
        from->s.rounds[k].send.peer != r) {
      fprintf(stderr, "crsched: round %u: rank %d expects %" PRIu64
              " elements from rank %d, which does not send them\n",
              k, r, crnet__xfer_count(s, x), x->peer);
      return false;
    }
    for (uint32_t i = 0; i < x->nsegs; i++) {
      const crnet__seg *g = &s->segs[x->first_seg + i];
      memcpy(t[r].buf[g->buf] + g->off, from->msg + at,
             sizeof(tag) * g->count);
      at += g->count;
    }
  }
  for (int32_t r = 0; r < p; r++) { /* then the local steps */
    const crnet__schedule *s = &t[r].s;
    if (k >= s->nrounds)
      continue;
    for (uint32_t i = 0; i < s->rounds[k].nsteps; i++) {
      const crnet__step *st = &s->steps[s->rounds[k].first_step + i];
      tag *src = t[r].buf[st->src.buf] + st->src.off;
      tag *dst = t[r].buf[st->dst.buf] + st->dst.off;
      for (uint64_t e = 0; e < st->src.count; e++) {
        if (st->kind == CRNET__STEP_COPY) {
          dst[e] = src[e];
          continue;
        }
        if (src[e].block != dst[e].block || src[e].block < 0) {
          fprintf(stderr, "crsched: round %u: rank %d reduces block %d "
                  "into block %d\n", k, r, src[e].block, dst[e].block);
          return false;
        }
        if (src[e].block == block) {
          int32_t ops[2] = {src[e].root, dst[e].root}, into = -1;
          for (int j = 0; j < 2; j++)
            if (tr->n[ops[j]].rank == r && !tr->n[ops[j]].sent)
              into = ops[j];
          if (into < 0 && (into = tree_add(tr, r)) < 0)
            return false;
          for (int j = 0; j < 2; j++) {
            if (ops[j] == into)
              continue;
            if (tr->n[ops[j]].parent >= 0) {
              fprintf(stderr, "crsched: one partial sum of block %d (rank "
                      "%d's) is reduced at ranks %d and %d: the schedule "
                      "computes the block more than once, not along one "
                      "tree\n",
                      block, tr->n[ops[j]].rank,
                      tr->n[tr->n[ops[j]].parent].rank, r);
              return false;
            }
            tr->n[ops[j]].parent = into;
            tr->n[ops[j]].round = k;
          }
          dst[e].root = into;
          continue;
        }
        dst[e].root = r;
      }
    }
  }
  return true;
}

/* Every rank's schedule for the call of o (rank varies). NULL after saying
 * why. */
static tag_rank *build_all(const options *o, const char *name,
                           const blocks *b, bool tags) {
  tag_rank *t = calloc((size_t)o->p, sizeof *t);
  if (t == NULL)
    return NULL;
  for (int32_t r = 0; r < o->p; r++) {
    crnet__call c = call_for(o, o->coll, o->exclusive, r, b);
    if (build_or_complain(name, &c, &t[r].s) != 0) {
      tag_free(t, o->p);
      return NULL;
    }
    t[r].built = true;
    if (tags && !tag_alloc(&t[r], b, r)) {
      fputs("crsched: out of memory\n", stderr);
      tag_free(t, o->p);
      return NULL;
    }
  }
  return t;
}

static uint32_t max_rounds(const tag_rank *t, int32_t p) {
  uint32_t n = 0;
  for (int32_t r = 0; r < p; r++)
    if (t[r].s.nrounds > n)
      n = t[r].s.nrounds;
  return n;
}

/* The communication graph: a cluster per round, an edge per message. */
static void dot_rounds(const options *o, const char *name, const blocks *b,
                       const tag_rank *t) {
  uint32_t n = max_rounds(t, o->p);
  skips k;
  if (skips_make(&k, name, o->p) != 0)
    k.n = 0;
  if (o->coll == CRNET_COLL_SCAN)
    k.n = 0;
  printf("digraph crsched {\n"
         "  label=\"%s, schedule %s, p = %d: one cluster per round, an "
         "edge per message (bytes)\";\n"
         "  labelloc=t; rankdir=LR; newrank=true;\n"
         "  node [shape=circle, fontsize=10, width=0.3, fixedsize=true];\n"
         "  edge [fontsize=8];\n",
         coll_label(o->coll, o->exclusive), name, o->p);
  /* last round first: dot stacks the clusters upwards, so round 0 ends on
   * top */
  for (uint32_t r = n; r-- > 0;) {
    int32_t sp, s;
    int dir;
    printf("  subgraph cluster_round%u {\n    label=\"round %u", r, r);
    if (round_skip(&k, o->coll, t[0].s.nrounds, r, &sp, &s, &dir))
      printf(": s'=%d s=%d, %s", sp, s,
             dir > 0 ? "reduce-scatter phase" : "allgather phase");
    printf("\";\n");
    for (int32_t q = 0; q < o->p; q++)
      printf("    r%u_%d [label=\"%d\"];\n", r, q, q);
    for (int32_t q = 0; q < o->p; q++) {
      const crnet__schedule *sq = &t[q].s;
      if (r >= sq->nrounds || sq->rounds[r].send.peer < 0)
        continue;
      const crnet__xfer *x = &sq->rounds[r].send;
      uint64_t elems = crnet__xfer_count(sq, x);
      int32_t nblocks = 0;
      bool whole = x->nsegs > 0;
      crnet__call cq = call_for(o, o->coll, o->exclusive, q, b);
      layout l = layout_of(&cq, b);
      for (uint32_t i = 0; i < x->nsegs && whole; i++) {
        int32_t b0, b1;
        whole = seg_blocks(b, &l, &sq->segs[x->first_seg + i], &b0, &b1);
        if (whole)
          nblocks += b1 - b0 + 1;
      }
      printf("    r%u_%d -> r%u_%d [label=\"%" PRIu64 " B", r, q, r,
             x->peer, elems * o->dtype_size);
      if (whole)
        printf(", %d block%s", nblocks, nblocks == 1 ? "" : "s");
      printf("\"];\n");
    }
    printf("  }\n");
  }
  printf("}\n");
  free(k.s);
}

/* The reduction tree of block o->rank (Figure 1). 0, or 1 after saying
 * why. */
static int dot_tree(const options *o, tag_rank *t) {
  int32_t p = o->p, me = o->rank, root = -1;
  uint32_t n = max_rounds(t, p);
  tree tr = {NULL, 0, 0};
  int rc = 0;
  for (int32_t j = 0; j < p && rc == 0; j++)
    if (tree_add(&tr, j) < 0)
      rc = 1;
  for (uint32_t k = 0; k < n && rc == 0; k++)
    if (!tag_round(t, p, k, me, &tr))
      rc = 1;
  for (int32_t j = 0; j < tr.count && rc == 0; j++)
    if (tr.n[j].parent < 0) {
      if (root >= 0) {
        fprintf(stderr, "crsched: partial sums of block %d at ranks %d and "
                "%d are never joined: not a tree\n", me, tr.n[root].rank,
                tr.n[j].rank);
        rc = 1;
      }
      root = j;
    }
  for (int32_t j = 0; j < tr.count && rc == 0; j++) {
    int32_t at = j, steps = 0; /* every node must lead to the root */
    while (at != root && at >= 0 && steps++ <= tr.count)
      at = tr.n[at].parent;
    if (at != root) {
      fprintf(stderr, "crsched: the partial sums of block %d form a cycle "
              "(rank %d's): the schedule computes the block more than once, "
              "not along one tree\n", me, tr.n[j].rank);
      rc = 1;
    }
  }
  if (rc == 0) {
    printf("digraph crsched_tree {\n"
           "  label=\"%s, schedule %s, p = %d: the reduction tree of block "
           "%d; node i: a partial sum at rank (%d - i) mod p; edge: round, "
           "skip\";\n"
           "  labelloc=t; rankdir=BT; ordering=in;\n"
           "  node [shape=circle, fontsize=11];\n  edge [fontsize=9];\n",
           coll_label(o->coll, o->exclusive), o->schedule, p, me, me);
    for (int32_t j = 0; j < tr.count; j++)
      printf("  n%d [label=\"%d\", tooltip=\"rank %d\"];\n", j,
             mod_p((int64_t)me - tr.n[j].rank, p), tr.n[j].rank);
    /* children in the order they were hooked, so that a depth-first walk
     * of the picture is the order of the paper's sum */
    for (uint32_t k = 0; k < n; k++)
      for (int32_t j = 0; j < tr.count; j++)
        if (tr.n[j].parent >= 0 && tr.n[j].round == k)
        {
          int32_t gap = mod_p(
              (int64_t)tr.n[tr.n[j].parent].rank - tr.n[j].rank, p);
          /* gap 0: a rank joins its own input to a new partial sum */
          if (gap == 0)
            printf("  n%d -> n%d [label=\"r%u local\"];\n", j,
                   tr.n[j].parent, k);
          else
            printf("  n%d -> n%d [label=\"r%u s=%d\"];\n", j,
                   tr.n[j].parent, k, gap);
        }
    printf("}\n");
  }
  free(tr.n);
  return rc;
}

static int dot_main(const options *o) {
  blocks b;
  const char *name;
  tag_rank *t;
  uint64_t count = o->tree ? (uint64_t)o->p
                           : (o->have_count ? o->count : (uint64_t)o->p);
  crnet__call call;
  int rc;
  if (is_a2a(o->coll))
    count = (o->have_count ? o->count : 1) * (uint64_t)o->p;
  rc = blocks_make(&b, o->p, count, o->counts_arg);
  if (rc != 0)
    return rc;
  call = call_for(o, o->coll, o->exclusive, 0, &b);
  rc = resolve(o->schedule != NULL ? o->schedule : "auto", &call, &name);
  if (rc == 0) {
    options named = *o;
    named.schedule = name;
    t = build_all(&named, name, &b, o->tree);
    if (t == NULL) {
      rc = 1;
    } else {
      if (o->tree)
        rc = dot_tree(&named, t);
      else
        dot_rounds(&named, name, &b, t);
      tag_free(t, o->p);
    }
  }
  blocks_free(&b);
  return rc;
}

/* ---- the sweep: the closed-form model over p ---------------------------
 *
 * --cost --sweep prices every schedule the model covers (model.h: auto's
 * candidates) for every collective, at p from 2 to --pmax (default 10^6):
 * 8 points per decade, plus every power of two 2^k and 2^k +- 1, where the
 * schedules that fold or round up differ. No schedule is built: rounds,
 * bytes and reductions come from crnet__model_terms_of, the seconds from
 * crnet__model_seconds with the tuning a job would use (see load_tuning),
 * and the peers from sweep_peers below, each a few flops to O(log p)
 * (O(p) for the circulant scan, a loop over ranks of O(log p) each).
 *
 * Peers: the number of distinct ranks one rank sends to or receives from
 * over the whole call, the largest over all ranks (root 0 for bcast and
 * reduce). It is the number of links a rank needs. --verify builds every
 * rank's schedule at every p up to --pmax and checks rounds, bytes and
 * peers against these formulas (see sweep_verify). */

/* Distinct nonzero values among +-v[i] mod p. */
static int32_t distinct_pm(const int32_t *v, int n, int32_t p) {
  int32_t seen[2 * 64];
  int k = 0;
  for (int i = 0; i < n; i++)
    for (int sign = 0; sign < 2; sign++) {
      int32_t x = mod_p(sign ? -(int64_t)v[i] : v[i], p);
      bool dup = x == 0;
      for (int j = 0; j < k && !dup; j++)
        dup = seen[j] == x;
      if (!dup)
        seen[k++] = x;
    }
  return k;
}

/* The peers of the circulant schedule `name` at p: the skips after s_0 = p
 * (circulant-linear: all p-1 others), each both ways. */
static int32_t circulant_peers(const char *name, int32_t p) {
  int32_t s[64];
  int n = 0;
  if (strcmp(name, "circulant-linear") == 0)
    return p - 1;
  for (int32_t v = p; v > 1;) /* circulant's halving, rounded up */
    s[n++] = v = v - v / 2;
  return distinct_pm(s, n, p);
}

/* Dissemination without wrap-around (circulant scan): rank r talks to
 * r + 2^k < p and r - 2^k >= 0, all distinct; the most over r. */
static int32_t dissemination_peers(int32_t p) {
  int L = crnet__ceil_log2(p);
  int32_t best = 0;
  for (int32_t r = 0; r < p; r++) {
    int32_t n = 0;
    for (int k = 0; k < L; k++)
      n += (r + (INT64_C(1) << k) < p) + (r - (INT64_C(1) << k) >= 0);
    if (n > best)
      best = n;
  }
  return best;
}

/* The most distinct peers of one rank: see the top of this section. -1 if
 * unknown. */
static int32_t sweep_peers(const char *name, crnet_collective coll,
                           int32_t p) {
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p);
  int f = (INT64_C(1) << d) != p;
  if (p <= 1)
    return 0;
  if (p == 2)
    return 1;
  if (coll == CRNET_COLL_ALLTOALLV) /* both exchange with every rank */
    return p - 1;
  if (strcmp(name, "binomial") == 0) /* the root's children */
    return L;
  if (strcmp(name, "linear") == 0) /* the root and every rank */
    return p - 1;
  if (strcmp(name, "ring") == 0)
    return 2;
  if (strcmp(name, "pairwise") == 0)
    return p - 1;
  if (strncmp(name, "circulant", 9) == 0)
    return coll == CRNET_COLL_SCAN ? dissemination_peers(p)
                                   : circulant_peers(name, p);
  if (strcmp(name, "allgather-reduce") == 0)
    return circulant_peers("circulant", p);
  if (strcmp(name, "bruck") == 0) {
    int32_t s[64];
    for (int k = 0; k < L; k++)
      s[k] = (int32_t)(INT64_C(1) << k);
    return distinct_pm(s, L, p);
  }
  if (strcmp(name, "hypercube") == 0 || strcmp(name, "rabenseifner") == 0) {
    if (coll == CRNET_COLL_BCAST || coll == CRNET_COLL_SCAN)
      return L;
    return d + f;
  }
  if (strcmp(name, "star") == 0) {
    int n = 1;
    for (int64_t fact = 1; fact < p;)
      fact *= ++n;
    return n - 1;
  }
  return -1;
}

/* The p of the sweep, increasing, into ps (at most cap). */
static size_t sweep_ps(int32_t pmax, int32_t *ps, size_t cap) {
  size_t n = 0;
  for (int i = 0; n < cap; i++) { /* 8 per decade */
    double x = pow(10.0, i / 8.0);
    int32_t p = (int32_t)floor(x + 0.5);
    if (p > pmax)
      break;
    if (p >= 2)
      ps[n++] = p;
  }
  for (int k = 1; (INT64_C(1) << k) - 1 <= pmax && n + 3 <= cap; k++)
    for (int dlt = -1; dlt <= 1; dlt++) {
      int64_t p = (INT64_C(1) << k) + dlt;
      if (p >= 2 && p <= pmax)
        ps[n++] = (int32_t)p;
    }
  if (n < cap && ps[0] != pmax && pmax >= 2)
    ps[n++] = pmax;
  /* sort, unique */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && ps[j - 1] > ps[j]; j--) {
      int32_t t = ps[j];
      ps[j] = ps[j - 1];
      ps[j - 1] = t;
    }
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || ps[u - 1] != ps[i])
      ps[u++] = ps[i];
  return u;
}

/* The model's call for p ranks and one element per block (all-to-all: per
 * peer). The model is linear in m (model.h: the terms are multiples of m),
 * so sweep_main prices this call and scales B and G to the m wanted; that
 * keeps sizes below one element per block (m = 8 at p = 10^6) meaningful. */
static crnet__call sweep_call(const options *o, const coll_kind *k, int32_t p,
                              const crnet__tuning *t) {
  crnet__call c;
  memset(&c, 0, sizeof c);
  c.coll = k->coll;
  c.exclusive = k->exclusive;
  c.esize = (uint32_t)o->dtype_size;
  c.p = p;
  c.commutative = true;
  c.tuning = t;
  /* crnet__model_bytes: allgather per rank, all-to-all per peer, the
   * others the whole vector */
  c.count = k->coll == CRNET_COLL_ALLGATHER || is_a2a(k->coll)
                ? 1
                : (uint64_t)p;
  return c;
}

/* The terms of `name` for call's collective at m bytes. False where the
 * model does not cover it, and for allgather-reduce beyond its memory
 * bound (p·m over 1 MiB), where auto never prices it either. */
static bool sweep_terms(const char *name, const crnet__call *call, double m,
                        crnet__model_terms *mt) {
  double ref = crnet__model_bytes(call);
  if (!crnet__model_terms_of(name, call, mt))
    return false;
  if (strcmp(name, "allgather-reduce") == 0 &&
      (double)call->p * m > (double)(1 << 20))
    return false;
  if (ref > 0) {
    mt->moved *= m / ref;
    mt->reduced *= m / ref;
  }
  return true;
}

static int sweep_main(const options *o) {
  crnet__tuning t;
  int32_t ps[512];
  size_t nps = sweep_ps(o->pmax, ps, sizeof ps / sizeof ps[0]);
  char desc[400];
  if (load_tuning(o, &t) != 0)
    return 1;
  crnet__tuning_describe(&t, 2, desc, sizeof desc);
  if (o->dat)
    printf("# crsched --cost --sweep; tuning: %s\n"
           "# p coll schedule m_bytes rounds peers moved_bytes reduced_bytes "
           "seconds\n",
           desc);
  else if (!o->json)
    printf("tuning: %s\nmodel: closed form (model.h), no schedule built; "
           "peers: most distinct peers of one rank\n"
           "%8s %-15s %-17s %12s %8s %8s %14s %14s %12s\n",
           desc, "p", "collective", "schedule", "m (bytes)", "rounds",
           "peers", "moved B", "reduced B", "time (s)");
  for (size_t pi = 0; pi < nps; pi++)
    for (size_t mi = 0; mi < o->nm; mi++)
      for (size_t ci = 0; ci < NKNOWN_COLLS; ci++) {
        const coll_kind *k = &known_colls[ci];
        crnet__call call;
        if (!wanted(o, k))
          continue;
        call = sweep_call(o, k, ps[pi], &t);
        for (size_t i = 0; crnet__auto_candidate(k->coll, i) != NULL; i++) {
          const char *name = crnet__auto_candidate(k->coll, i);
          crnet__model_terms mt;
          double secs;
          int32_t peers;
          if ((o->schedule != NULL && strcmp(o->schedule, name) != 0) ||
              !sweep_terms(name, &call, (double)o->ms[mi], &mt))
            continue;
          secs = crnet__model_seconds(&mt, &t, ps[pi]);
          peers = sweep_peers(name, k->coll, ps[pi]);
          if (o->json)
            printf("{\"p\":%d,\"coll\":\"%s\",\"schedule\":\"%s\",\"m\":%" PRIu64
                   ",\"rounds\":%.0f,\"peers\":%d,\"moved\":%.17g,"
                   "\"reduced\":%.17g,\"time\":%.17g}\n",
                   ps[pi], k->name, name, o->ms[mi], mt.rounds, peers,
                   mt.moved, mt.reduced, secs);
          else
            printf(o->dat ? "%d %s %s %" PRIu64 " %.0f %d %.17g %.17g %.17g\n"
                          : "%8d %-15s %-17s %12" PRIu64
                            " %8.0f %8d %14.6g %14.6g %12.6g\n",
                   ps[pi], k->name, name, o->ms[mi], mt.rounds, peers,
                   mt.moved, mt.reduced, secs);
        }
      }
  return 0;
}

/* ---- --sweep --verify: the formulas against the builders ---------------
 *
 * For every p from 2 to --pmax, every collective and every schedule the
 * model covers, builds every rank's schedule for 240 elements per block (4
 * bytes each; all-to-all: 240 per peer) and compares with the closed forms:
 * the rounds in which some rank communicates with R, the sum over rounds of
 * the busiest rank's max(sent, received) with B, the same for reduced
 * bytes with G, and the most distinct peers of a rank with sweep_peers.
 * Rounds and peers must be equal; bytes within 1% (the halves of a
 * vector of p blocks are not whole blocks when p is odd), and within 25%
 * for the two rows model.c names (rabenseifner reduce-scatter and
 * hypercube allgather when p is not a power of two). Where every rank's schedule is
 * a rotation of rank 0's (rotation_symmetric), ranks 0, 1, p/2 and p-1
 * stand for all; the other rows build every rank, at every p up to
 * VERIFY_ALL_RANKS_MAX_P and beyond it at 2^k and 2^k +- 1 only.
 * circulant-linear bcast and reduce, O(p^2) to build per rank, stop at
 * p = 64. Prints each disagreement; exit 1 if any. */

typedef struct verify_acc {
  double *moved, *reduced; /* per round, the busiest rank's bytes */
  bool *comm;
  uint32_t n, cap;
  int32_t peers;
  uint32_t *mark; /* mark[q] == stamp: q already counted for this rank */
  uint32_t stamp;
} verify_acc;

static bool acc_rank(verify_acc *a, const crnet__schedule *s, uint64_t esize) {
  int32_t peers = 0;
  if (s->nrounds > a->cap) {
    uint32_t cap = s->nrounds * 2;
    double *mv = realloc(a->moved, sizeof *mv * cap);
    if (mv != NULL)
      a->moved = mv;
    double *rd = realloc(a->reduced, sizeof *rd * cap);
    if (rd != NULL)
      a->reduced = rd;
    bool *cm = realloc(a->comm, sizeof *cm * cap);
    if (cm != NULL)
      a->comm = cm;
    if (mv == NULL || rd == NULL || cm == NULL)
      return false;
    a->cap = cap;
  }
  for (uint32_t k = a->n; k < s->nrounds; k++) {
    a->moved[k] = a->reduced[k] = 0;
    a->comm[k] = false;
  }
  if (s->nrounds > a->n)
    a->n = s->nrounds;
  a->stamp++;
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    round_totals t = round_sum(s, k);
    double mv = (double)((t.sent > t.recv ? t.sent : t.recv) * esize);
    int32_t pr[2] = {ro->send.peer, ro->recv.peer};
    a->comm[k] |= t.comm;
    if (mv > a->moved[k])
      a->moved[k] = mv;
    if ((double)(t.reduced * esize) > a->reduced[k])
      a->reduced[k] = (double)(t.reduced * esize);
    for (int i = 0; i < 2; i++)
      if (pr[i] >= 0 && a->mark[pr[i]] != a->stamp) {
        a->mark[pr[i]] = a->stamp;
        peers++;
      }
  }
  if (peers > a->peers)
    a->peers = peers;
  return true;
}

static bool near(double got, double want, double tol) {
  double diff = fabs(got - want), scale = fabs(want) > 1 ? fabs(want) : 1;
  return diff <= tol * scale;
}

/* Rows that build every rank are checked at every p up to this, then at
 * p = 2^k - 1, 2^k, 2^k + 1 only: building p ranks of O(p) each at every
 * p to a few thousand takes minutes. */
#define VERIFY_ALL_RANKS_MAX_P 128

static bool near_power_of_two(int32_t p) {
  return ((p - 1) & (p - 2)) == 0 || (p & (p - 1)) == 0 ||
         ((p + 1) & p) == 0;
}

/* One (collective, schedule, p). 0 agree, 1 disagree (printed), 2 not
 * checked at this p, -1 error. */
static int verify_one(const options *o, const coll_kind *k, const char *name,
                      int32_t p, verify_acc *a, const blocks *b,
                      const blocks *a2a) {
  const uint64_t esize = 4;
  const blocks *bl = is_a2a(k->coll) ? a2a : b;
  options vo = *o;
  crnet__call mc;
  crnet__model_terms mt;
  cost_row row = {.coll = k->coll, .exclusive = k->exclusive, .name = name};
  double rounds = 0, moved = 0, reduced = 0, tol = 0.01;
  bool sym;
  int32_t peers_want;
  vo.p = p;
  vo.dtype_size = esize;
  vo.all = false;
  mc = call_for(&vo, k->coll, k->exclusive, 0, bl);
  mc.counts = NULL; /* the model takes equal blocks */
  mc.sdispls = mc.rcounts = mc.rdispls = NULL;
  if (k->coll == CRNET_COLL_ALLGATHER)
    mc.count = bl->counts[0];
  if (!crnet__model_terms_of(name, &mc, &mt))
    return 0;
  a->n = 0;
  a->peers = 0;
  sym = rotation_symmetric(&vo, &row, bl);
  if (!sym && p > VERIFY_ALL_RANKS_MAX_P && !near_power_of_two(p))
    return 2;
  for (int32_t r = 0; r < p; r++) {
    crnet__call c;
    crnet__schedule s;
    if (sym && r != 0 && r != 1 && r != p / 2 && r != p - 1)
      continue;
    c = call_for(&vo, k->coll, k->exclusive, r, bl);
    if (build_or_complain(name, &c, &s) != 0)
      return -1;
    bool ok = acc_rank(a, &s, esize);
    crnet__sched_free(&s);
    if (!ok)
      return -1;
  }
  for (uint32_t j = 0; j < a->n; j++) {
    rounds += a->comm[j];
    moved += a->moved[j];
    reduced += a->reduced[j];
  }
  if ((1 << crnet__floor_log2(p)) != p &&
      ((strcmp(name, "rabenseifner") == 0 &&
        k->coll == CRNET_COLL_REDUCE_SCATTER) ||
       (strcmp(name, "hypercube") == 0 && k->coll == CRNET_COLL_ALLGATHER)))
    tol = 0.25;
  peers_want = sweep_peers(name, k->coll, p);
  if (rounds == mt.rounds && near(moved, mt.moved, tol) &&
      near(reduced, mt.reduced, tol) && a->peers == peers_want)
    return 0;
  printf("MISMATCH %s %s p=%d: builders rounds %.0f moved %.0f reduced %.0f "
         "peers %d; closed form %.0f %.6g %.6g %d\n",
         k->name, name, p, rounds, moved, reduced, a->peers, mt.rounds,
         mt.moved, mt.reduced, peers_want);
  return 1;
}

static int verify_main(const options *o) {
  verify_acc a;
  long checked = 0, bad = 0, skipped = 0;
  int rc = 0;
  memset(&a, 0, sizeof a);
  a.mark = calloc((size_t)o->pmax + 1, sizeof *a.mark);
  if (a.mark == NULL)
    return 1;
  for (int32_t p = 2; p <= o->pmax && rc >= 0; p++) {
    blocks b, a2a;
    if (blocks_make(&b, p, 240 * (uint64_t)p, NULL) != 0)
      break;
    if (blocks_make(&a2a, p, 240 * (uint64_t)p, NULL) != 0) {
      blocks_free(&b);
      break;
    }
    for (size_t ci = 0; ci < NKNOWN_COLLS && rc >= 0; ci++) {
      const coll_kind *k = &known_colls[ci];
      if (!wanted(o, k))
        continue;
      for (size_t i = 0; crnet__auto_candidate(k->coll, i) != NULL; i++) {
        const char *name = crnet__auto_candidate(k->coll, i);
        if ((o->schedule != NULL && strcmp(o->schedule, name) != 0) ||
            (strcmp(name, "circulant-linear") == 0 && p > 64 &&
             (k->coll == CRNET_COLL_BCAST || k->coll == CRNET_COLL_REDUCE)))
          continue;
        rc = verify_one(o, k, name, p, &a, &b, &a2a);
        if (rc < 0)
          break;
        checked += rc != 2;
        bad += rc == 1;
        skipped += rc == 2;
        rc = 0;
      }
    }
    blocks_free(&a2a);
    blocks_free(&b);
  }
  free(a.moved);
  free(a.reduced);
  free(a.comm);
  free(a.mark);
  if (rc < 0)
    return 1;
  printf("%ld (collective, schedule, p) checked for p = 2..%d (%ld not "
         "checked: every rank built, p > %d and not 2^k or 2^k +- 1): %ld "
         "disagree\n",
         checked, o->pmax, skipped, VERIFY_ALL_RANKS_MAX_P, bad);
  return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != 0)
    return rc == 1 ? 0 : rc;
  if (o.autosel)
    return auto_main(&o);
  if (o.crossover)
    return crossover_main(&o);
  if (o.sweep)
    return o.verify ? verify_main(&o) : sweep_main(&o);
  if (o.dot)
    return dot_main(&o);
  return o.cost ? cost_main(&o) : view_main(&o);
}
