/* crsched's command line: the usage text (`crsched --help`, the reference
 * for the options), the parsing of argv into options (crsched.h) with the
 * defaults, and the checks of which options go together. What needs the
 * blocks of the vector (--counts) is parsed later, by crsched_blocks_make
 * in crsched.c, once p is known.
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

#include "crnet.h"

#include "crsched.h"

/* --dot: enough ranks for a picture anyone can read. */
#define DOT_MAX_P 64

/* ---- options --------------------------------------------------------- */

int crsched_bad_usage(const char *fmt, ...) {
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
      "       crsched --list [--json]\n"
      "  (each of them but --sweep and --dot also takes --hosts LAYOUT, and\n"
      "   --cost --shm-alpha A --shm-beta B)\n"
      "\n"
      "Shows one rank's schedule round by round, or (--cost) the modelled\n"
      "time of every schedule that can do the collective(s), or (--auto)\n"
      "what the auto schedule picks and why, or (--crossover) the sizes at\n"
      "which auto's pick changes, or (--list) every schedule the library\n"
      "has.\n"
      "\n"
      "  --coll C         allreduce, reduce_scatter, allgather, bcast, reduce,\n"
      "                   barrier, scan, exscan, alltoall (--cost: default\n"
      "                   all)\n"
      "  --schedule S     auto (default) or a schedule of crsched --list\n"
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
      "  --hosts LAYOUT   the ranks' hosts, filled in rank order: HxN (H\n"
      "                   hosts of N ranks) or N+N+... (one size per host);\n"
      "                   sets -p. Adds the two-level schedules, which\n"
      "                   work with it, and (--cost) prices rounds that\n"
      "                   stay on a host with --shm-alpha and --shm-beta\n"
      "  --shm-alpha A    --cost: seconds per round inside a host (default\n"
      "                   --alpha); --shm-beta B: per byte (default --beta)\n"
      "  -h, --help       this text\n",
      out);
}

bool crsched_parse_u64(const char *s, uint64_t *v) {
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
  if (!crsched_parse_u64(s, &x) || x > INT32_MAX)
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
    if (strcmp(s, crsched_known_colls[i].name) == 0) {
      *coll = crsched_known_colls[i].coll;
      *exclusive = crsched_known_colls[i].exclusive;
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
  OPT_LIST,
  OPT_TREE,
  OPT_HOSTS,
  OPT_SHM_ALPHA,
  OPT_SHM_BETA
};

/* --hosts: "HxN" or "N+N+...". The layout goes to o->host (p entries). */
static int parse_hosts(options *o, const char *arg) {
  int32_t sizes[4096], n = 0, p = 0;
  const char *s = arg;
  char *end;
  if (strchr(arg, 'x') != NULL) {
    unsigned long h, k;
    errno = 0;
    h = strtoul(arg, &end, 10);
    if (errno != 0 || end == arg || *end != 'x' || end[1] < '0' ||
        end[1] > '9')
      return crsched_bad_usage("bad --hosts '%s' (HxN or N+N+...)", arg);
    k = strtoul(end + 1, &end, 10);
    if (errno != 0 || *end != '\0' || h < 1 || k < 1 ||
        h > sizeof sizes / sizeof sizes[0] || k > 1 << 20)
      return crsched_bad_usage("bad --hosts '%s' (HxN or N+N+...)", arg);
    for (n = 0; n < (int32_t)h; n++)
      sizes[n] = (int32_t)k;
  } else
    for (;;) {
      unsigned long k;
      if (*s < '0' || *s > '9' || n == sizeof sizes / sizeof sizes[0])
        return crsched_bad_usage("bad --hosts '%s' (HxN or N+N+...)", arg);
      errno = 0;
      k = strtoul(s, &end, 10);
      if (errno != 0 || k < 1 || k > 1 << 20 || (*end != '+' && *end != '\0'))
        return crsched_bad_usage("bad --hosts '%s' (HxN or N+N+...)", arg);
      sizes[n++] = (int32_t)k;
      if (*end == '\0')
        break;
      s = end + 1;
    }
  for (int32_t g = 0; g < n; g++) {
    if (p > (1 << 24) - sizes[g])
      return crsched_bad_usage("--hosts '%s' has too many ranks", arg);
    p += sizes[g];
  }
  free(o->host);
  o->host = malloc(sizeof *o->host * (size_t)p);
  if (o->host == NULL)
    return crsched_bad_usage("out of memory");
  for (int32_t g = 0, r = 0; g < n; g++)
    for (int32_t i = 0; i < sizes[g]; i++)
      o->host[r++] = g;
  o->nhosts = n;
  if (o->p != 0 && o->p != p)
    return crsched_bad_usage("--hosts '%s' has %d ranks, -p says %d", arg,
                             (int)p, (int)o->p);
  o->p = p;
  return 0;
}

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
      return crsched_bad_usage("bad -m '%s'", arg);
    memcpy(num, s, len);
    num[len] = '\0';
    if (!crsched_parse_u64(num, &o->ms[o->nm++]))
      return crsched_bad_usage("bad -m '%s'", arg);
    s += len;
    if (*s == ',' && *++s == '\0')
      return crsched_bad_usage("bad -m '%s'", arg);
  }
  if (o->nm == 0)
    return crsched_bad_usage("bad -m '%s'", arg);
  o->m = o->ms[0];
  return 0;
}

/* One option into o. 0, or EXIT_USAGE after saying why. */
static int apply_option(options *o, int c, const char *arg) {
  switch (c) {
  case OPT_COLL:
    o->have_coll = true;
    if (!parse_coll(arg, &o->coll, &o->exclusive))
      return crsched_bad_usage("unknown collective '%s'", arg);
    return 0;
  case OPT_SCHEDULE:
    o->schedule = arg;
    return 0;
  case 'p': {
    int32_t before = o->p;
    if (!parse_i32(arg, &o->p) || o->p < 1)
      return crsched_bad_usage("-p needs a positive integer, not '%s'", arg);
    if (o->host != NULL && before != o->p)
      return crsched_bad_usage("-p %d, but --hosts has %d ranks", (int)o->p,
                               (int)before);
    return 0;
  }
  case OPT_HOSTS:
    return parse_hosts(o, arg);
  case OPT_SHM_ALPHA:
    o->have_shm_alpha = true;
    return parse_time(arg, &o->shm_alpha)
               ? 0
               : crsched_bad_usage("bad --shm-alpha '%s'", arg);
  case OPT_SHM_BETA:
    o->have_shm_beta = true;
    return parse_time(arg, &o->shm_beta)
               ? 0
               : crsched_bad_usage("bad --shm-beta '%s'", arg);
  case OPT_RANK:
    return parse_i32(arg, &o->rank) ? 0
                                    : crsched_bad_usage("bad --rank '%s'", arg);
  case OPT_ROOT:
    return parse_i32(arg, &o->root) ? 0
                                    : crsched_bad_usage("bad --root '%s'", arg);
  case OPT_COUNT:
    o->have_count = true;
    return crsched_parse_u64(arg, &o->count)
               ? 0
               : crsched_bad_usage("bad --count '%s'", arg);
  case OPT_COUNTS:
    o->counts_arg = arg;
    return 0;
  case OPT_DTYPE_SIZE:
    if (!crsched_parse_u64(arg, &o->dtype_size) || o->dtype_size < 1)
      return crsched_bad_usage(
          "--dtype-size needs a positive integer, not '%s'", arg);
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
    return parse_time(arg, &o->alpha)
               ? 0
               : crsched_bad_usage("bad --alpha '%s'", arg);
  case OPT_BETA:
    o->have_beta = true;
    return parse_time(arg, &o->beta)
               ? 0
               : crsched_bad_usage("bad --beta '%s'", arg);
  case OPT_GAMMA:
    o->have_gamma = true;
    return parse_time(arg, &o->gamma)
               ? 0
               : crsched_bad_usage("bad --gamma '%s'", arg);
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
  case OPT_LIST:
    o->list = true;
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
      return crsched_bad_usage("--pmax needs an integer >= 2, not '%s'", arg);
    return 0;
  default:
    return crsched_bad_usage("unknown option");
  }
}

/* --sweep's combinations. */
static int check_sweep(options *o) {
  if (!o->cost)
    return crsched_bad_usage("--sweep goes with --cost");
  if (o->p != 0 || o->have_count || o->counts_arg != NULL || o->in_place ||
      o->all || o->rank != 0 || o->root != 0 || o->non_commutative)
    return crsched_bad_usage(
        "--cost --sweep takes -m, --pmax, --coll, --schedule, "
        "--dtype-size, --tuning, --alpha, --beta, --gamma, "
        "--verify, --json and --dat only");
  if (o->json && o->dat)
    return crsched_bad_usage("give --json or --dat, not both");
  if (!o->have_pmax)
    o->pmax = o->verify ? 64 : 1000000;
  if (o->verify) {
    if (o->have_m || o->json || o->dat || o->tuning_file != NULL ||
        o->have_alpha || o->have_beta || o->have_gamma)
      return crsched_bad_usage(
          "--verify takes --pmax, --coll and --schedule only");
    return 0;
  }
  if (!o->have_m)
    return crsched_bad_usage("--sweep needs -m BYTES[,BYTES...]");
  for (size_t i = 0; i < o->nm; i++)
    if (o->ms[i] % o->dtype_size != 0)
      return crsched_bad_usage("-m %" PRIu64
                               " is not a multiple of --dtype-size "
                               "%" PRIu64,
                               o->ms[i], o->dtype_size);
  return 0;
}

/* Option combinations that only make sense together. */
static int check_options(options *o) {
  if ((o->have_shm_alpha || o->have_shm_beta) && (!o->cost || o->sweep))
    return crsched_bad_usage("--shm-alpha and --shm-beta go with --cost");
  if (o->host != NULL && (o->sweep || o->dot))
    return crsched_bad_usage("--hosts does not go with --sweep or --dot");
  if (!o->have_shm_alpha)
    o->shm_alpha = o->alpha;
  if (!o->have_shm_beta)
    o->shm_beta = o->beta;
  if (o->verify && !o->sweep)
    return crsched_bad_usage("--verify goes with --cost --sweep");
  if ((o->dat || o->have_pmax) && !o->sweep)
    return crsched_bad_usage("--dat and --pmax go with --cost --sweep");
  if (o->sweep)
    return check_sweep(o);
  if (o->tree && !o->dot)
    return crsched_bad_usage("--tree goes with --dot");
  if (o->dot) {
    if (o->cost || o->autosel || o->crossover || o->json)
      return crsched_bad_usage(
          "--dot draws a schedule: not with --cost, --auto, "
          "--crossover or --json");
    if (o->p > DOT_MAX_P)
      return crsched_bad_usage("--dot draws at most p = %d", DOT_MAX_P);
    if (o->tree &&
        (o->have_count || o->counts_arg != NULL || o->in_place ||
         (o->coll != CRNET_COLL_REDUCE_SCATTER &&
          o->coll != CRNET_COLL_ALLREDUCE && o->coll != CRNET_COLL_REDUCE)))
      return crsched_bad_usage(
          "--dot --tree is for reduce_scatter, allreduce and "
          "reduce, one element per block, not in place");
  }
  if (o->nm > 1)
    return crsched_bad_usage("-m takes a list of sizes only with --sweep");
  if (o->p < 1)
    return crsched_bad_usage("-p is required");
  if (o->cost + o->autosel + o->crossover > 1)
    return crsched_bad_usage(
        "--cost, --auto and --crossover exclude each other");
  if (o->autosel || o->crossover) {
    if (o->autosel && !o->have_m)
      return crsched_bad_usage("--auto needs -m BYTES");
    if (o->have_m && o->m % o->dtype_size != 0)
      return crsched_bad_usage("-m %" PRIu64
                               " is not a multiple of --dtype-size "
                               "%" PRIu64,
                               o->m, o->dtype_size);
    if (o->have_count || o->counts_arg != NULL || o->schedule != NULL ||
        o->in_place || o->all || o->rank != 0 || o->root != 0)
      return crsched_bad_usage(
          "--auto and --crossover take -p, -m, --coll, "
          "--dtype-size, --tuning, --alpha, --beta, --gamma, "
          "--non-commutative and --json only");
    return 0;
  }
  if (o->tuning_file != NULL || o->non_commutative)
    return crsched_bad_usage(
        "--tuning and --non-commutative are for --auto and "
        "--crossover");
  if (!o->cost && !o->have_coll)
    return crsched_bad_usage("--coll is required (or --cost)");
  if (o->cost && !o->have_m)
    return crsched_bad_usage("--cost needs -m BYTES");
  if (o->cost && o->m % o->dtype_size != 0)
    return crsched_bad_usage("-m %" PRIu64
                             " is not a multiple of --dtype-size %" PRIu64,
                             o->m, o->dtype_size);
  if (o->cost && (o->have_count || o->counts_arg != NULL))
    return crsched_bad_usage("--cost takes -m, not --count or --counts");
  if (!o->cost && o->have_m)
    return crsched_bad_usage(
        "-m is for --cost; use --count to view a schedule");
  if (o->rank < 0 || o->rank >= o->p)
    return crsched_bad_usage("--rank %d is not in 0..%d", o->rank, o->p - 1);
  if (o->root < 0 || o->root >= o->p)
    return crsched_bad_usage("--root %d is not in 0..%d", o->root, o->p - 1);
  if (o->counts_arg != NULL && o->have_count)
    return crsched_bad_usage("give --count or --counts, not both");
  if (o->counts_arg != NULL && o->coll != CRNET_COLL_REDUCE_SCATTER &&
      o->coll != CRNET_COLL_ALLGATHER && o->coll != CRNET_COLL_GATHER &&
      o->coll != CRNET_COLL_SCATTER)
    return crsched_bad_usage(
        "--counts is for reduce_scatter, allgather, gather and "
        "scatter");
  return 0;
}

static int parse_all(int argc, char **argv, options *o);

/* 0, 1 (help printed: exit 0) or EXIT_USAGE; on anything but 0 nothing
 * is left to free. */
int crsched_parse_options(int argc, char **argv, options *o) {
  int rc = parse_all(argc, argv, o);
  if (rc != 0) {
    free(o->host);
    o->host = NULL;
  }
  return rc;
}

static int parse_all(int argc, char **argv, options *o) {
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
      {"list", no_argument, NULL, OPT_LIST},
      {"tree", no_argument, NULL, OPT_TREE},
      {"hosts", required_argument, NULL, OPT_HOSTS},
      {"shm-alpha", required_argument, NULL, OPT_SHM_ALPHA},
      {"shm-beta", required_argument, NULL, OPT_SHM_BETA},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c, rc;

  memset(o, 0, sizeof *o);
  o->dtype_size = 4;
  opterr = 0; /* crsched_bad_usage says it, in one line */
  while ((c = getopt_long(argc, argv, ":hp:m:", longopts, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      return 1;
    }
    if (c == '?')
      return crsched_bad_usage("unknown option '%s'", argv[optind - 1]);
    if (c == ':')
      return crsched_bad_usage("option '%s' needs a value", argv[optind - 1]);
    rc = apply_option(o, c, optarg);
    if (rc != 0)
      return rc;
  }
  if (optind < argc)
    return crsched_bad_usage("unexpected argument '%s'", argv[optind]);
  if (o->list) {
    /* The registry needs nothing else: any other option is a mistake. */
    for (int i = 1; i < argc; i++)
      if (strcmp(argv[i], "--list") != 0 && strcmp(argv[i], "--json") != 0)
        return crsched_bad_usage("--list takes --json only, not '%s'",
                                 argv[i]);
    return 0;
  }
  return check_options(o);
}
