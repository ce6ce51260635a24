/* coll_check: conformance of the collectives other than allreduce between
 * real processes.
 *
 *   crlaunch -n P ./coll_check
 *
 * Every rank runs the same sequence of calls and checks every result against
 * a reference computed here from the public header only: this program knows
 * nothing of the schedules, the executor or the kernels. Which schedule can
 * do which collective, and which keep rank order, is this program's own
 * table (`schedules`), written from the documentation and never asked of the
 * library, so that a library refusing (or accepting) everything fails:
 *
 *   schedule            collectives                         non-commutative
 *   auto                all                                 rank order
 *   circulant           allreduce, reduce-scatter,          rank order in
 *                       allgather, bcast, reduce, barrier,  scan/exscan only
 *                       scan/exscan (dissemination)
 *   circulant-doubling  as circulant, without scan          reorders
 *   circulant-linear    as circulant, without scan          rank order
 *   circulant-sqrt      as circulant, without scan          reorders
 *   ring                allreduce, reduce-scatter,          reorders
 *                       allgather, bcast, reduce, alltoall
 *   hypercube           allreduce, allgather, scan/exscan,  rank order
 *                       alltoall (p a power of two only)
 *   rabenseifner        allreduce, reduce-scatter, reduce   rank order
 *   star                allreduce, allgather                rank order
 *   pairwise, bruck     alltoall                            -
 *   allgather-reduce    allreduce                           rank order
 *   knomial             allreduce, bcast, reduce, barrier   rank order
 *
 * For each schedule, every rank alike: choose it (crnet_comm_set_schedule
 * must return 0) for every collective it can do, the others staying on
 * "auto", and run the sections of those collectives only. Allreduce is
 * chosen too, then put back on "auto": this program's own bookkeeping uses
 * it, and allreduce_check tests it under every schedule.
 *
 *   reduce_scatter_block  every variant (datatype × op, below) × counts
 *                         {0, 1, p-1, p, p+1, 1001} × in place or not
 *   reduce_scatter        every variant × recvcounts patterns (random from a
 *                         fixed seed, zeros at some ranks, everything in one
 *                         rank's block for three ranks, all zeros) × in place
 *                         or not
 *   allgather             every datatype × counts × in place or not
 *   bcast                 every datatype × counts × roots
 *   reduce                every variant × counts × roots × in place (at the
 *                         root) or not; non-roots pass a guarded receive
 *                         buffer that must stay untouched, or NULL
 *   scan, exscan          every variant × counts × in place or not: rank r
 *                         gets the fold of ranks 0..r (0..r-1); rank 0's
 *                         exscan receive buffer must stay exactly as it was
 *                         (its input when in place)
 *   alltoall              every datatype × counts {0, 1, p-1, p, 1001} × in
 *                         place or not; rank s sends rank d bytes hashed
 *                         from (s, d, index), and every block j is checked
 *                         exactly against what rank j sent. Hypercube at a
 *                         p that is not a power of two cannot be chosen:
 *                         crnet_comm_set_schedule must return
 *                         CRNET_EUNSUPPORTED with a reason, and the choice
 *                         before stays
 *   barrier               causality with staggered arrivals, and a loop
 *   non-commutative       reduce_scatter_block, reduce_scatter, reduce,
 *                         scan and exscan with a user op (affine maps
 *                         composed in rank order), counts p+1 and 1001
 *
 * The full matrix runs under every schedule: it costs about 1.3 times the
 * five-schedule program it replaced, within the budget, so nothing is
 * reduced per schedule.
 *
 * Roots are every rank for p <= 9, else {0, 1, p/2, p-1}. Variants: int32,
 * uint8 and int64 with sum, max and bxor; float and double with sum and max.
 *
 * Inputs are a cheap hash of (rank, index), shaped per op so that the exact
 * result is a small integer or a bit pattern every type holds exactly: sum
 * values -2..2 (0..3 unsigned), max values -5..5 (0..10 unsigned), bxor
 * single bits or zero. The reference folds all ranks' inputs in 64-bit
 * integers once per (op, signedness, width) at the start, with this rank's
 * inclusive and exclusive prefixes for scan and exscan; every call then
 * takes a window of it at a different offset, so that consecutive calls see
 * different data. Allgather, bcast and alltoall move random bytes (NaN
 * patterns included for the floating types: moving data must not touch it).
 *
 * Each call also checks that the send buffer is unchanged, that 8 guard
 * elements on either side of every receive range are untouched, and that
 * every element of the result was written (a receive buffer starts as the
 * complement of the expected result). Results every rank holds alike
 * (allgather, bcast) go into a hash that must agree across ranks; the
 * rank-specific results of reduce-scatter, reduce, scan, exscan and alltoall
 * are checked exactly against the reference instead.
 *
 * With the non-commutative user op, a schedule marked "rank order" must give
 * the rank-order composition. One that reorders must refuse with
 * CRNET_EUNSUPPORTED and a reason for p >= 4; for p <= 3 the circulant
 * rounds happen to follow rank order (and ring's may), so either
 * a refusal with a reason or the exact rank-order result passes.
 *
 * Then: a different schedule is chosen for each collective (the
 * `final_choice` list); invalid arguments to every call return CRNET_EINVAL
 * with a reason, without touching the receive buffer or the communicator
 * (each misuse is detected on every rank before anything is sent, so no
 * rank is left waiting); unknown schedule names return CRNET_EINVAL, and
 * every (schedule, collective) pair the table says cannot be returns
 * CRNET_EUNSUPPORTED with a reason; every collective still works afterwards
 * on the schedule chosen before (a non-commutative reduce-scatter must still
 * be refused by ring at p >= 4); and crnet_comm_destroy returns 0.
 *
 * Failures go to stderr with rank, schedule, collective, datatype, op, count,
 * root, index, expected and got. After MAX_REPORTS of them, or on any
 * communicator error, the rank aborts the job (so the others stop fast) and
 * exits 1. A schedule that cannot be chosen is reported and skipped, the
 * job going on. COLL_CHECK_CORRUPT=<rank> (pass it with crlaunch -x) makes
 * that rank expect one wrong element in one reduce_scatter_block case, to
 * see the failure path work. COLL_CHECK_SCHEDULES=a,b,... runs only the
 * named schedules' sections (the misuse and still-usable checks always run),
 * for runs at a larger p aimed at one family.
 *
 * Runtime on a 2-core machine: about 7 s at p = 16 (about 9,300 cases) and
 * 5 s at p = 9 (about 15,700 cases, every rank a root), under the 25 s
 * budget; p = 1..9, 13 and 16 take about 31 s together (24 s before scan,
 * exscan, alltoall and the schedules after circulant-sqrt).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crnet.h"

#define GUARD_ELEMS 8
#define GUARD_BYTE 0xA5
#define UNTOUCHED_BYTE 0x5A /* a non-root's receive buffer in reduce */
#define MAX_REPORTS 10
#define LARGE_COUNT 1001
/* Calls take windows of the reference at offsets below this. */
#define OFFSET_SPAN 1024
#define MAX_COUNTS 6
#define MAX_ROOTS_ALL 9 /* every rank is a root up to this p */

#define BIT(coll) (1u << (coll))
#define ALL_COLLS ((1u << CRNET_COLL_COUNT) - 1)
#define CIRCULANT_COLLS                                                        \
  (BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |                \
   BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |                         \
   BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_BARRIER))

/* What a schedule does with a non-commutative operator. */
enum order {
  KEEPS_ORDER,   /* rank order always: the exact result */
  KEEPS_IN_SCAN, /* rank order in scan and exscan only */
  REORDERS,      /* refusal at p >= 4; refusal or the exact result below */
};

/* Our own expectation of every schedule, written from the documentation and
 * never asked of the library: a library that refused everything, or
 * accepted everything, must fail here. */
struct schedule {
  const char *name;
  unsigned colls; /* bit per crnet_collective it can do */
  enum order order;
  bool a2a_pow2; /* all-to-all only when p is a power of two */
};

static const struct schedule schedules[] = {
    {"auto", ALL_COLLS, KEEPS_ORDER, false},
    {"circulant", CIRCULANT_COLLS | BIT(CRNET_COLL_SCAN), KEEPS_IN_SCAN, false},
    {"circulant-doubling", CIRCULANT_COLLS, REORDERS, false},
    {"circulant-linear", CIRCULANT_COLLS, KEEPS_ORDER, false},
    {"circulant-sqrt", CIRCULANT_COLLS, REORDERS, false},
    {"ring",
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |
         BIT(CRNET_COLL_ALLGATHER) | BIT(CRNET_COLL_BCAST) |
         BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_ALLTOALL) |
         BIT(CRNET_COLL_SCAN) | BIT(CRNET_COLL_ALLTOALLV),
     KEEPS_IN_SCAN, false},
    {"hypercube",
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER) |
         BIT(CRNET_COLL_SCAN) | BIT(CRNET_COLL_ALLTOALL) |
         BIT(CRNET_COLL_BCAST),
     KEEPS_ORDER, true},
    {"rabenseifner",
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_REDUCE_SCATTER) |
         BIT(CRNET_COLL_REDUCE),
     KEEPS_ORDER, false},
    {"star", BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_ALLGATHER),
     KEEPS_ORDER, false},
    {"pairwise", BIT(CRNET_COLL_ALLTOALL) | BIT(CRNET_COLL_ALLTOALLV),
     REORDERS, false},
    {"bruck", BIT(CRNET_COLL_ALLTOALL), REORDERS, false},
    {"allgather-reduce", BIT(CRNET_COLL_ALLREDUCE), KEEPS_ORDER, false},
    /* gather, scatter and alltoallv are chosen here (and refused where
     * the table says so) but run by tests/test_vector.c */
    {"binomial", BIT(CRNET_COLL_GATHER) | BIT(CRNET_COLL_SCATTER), REORDERS,
     false},
    {"linear", BIT(CRNET_COLL_GATHER) | BIT(CRNET_COLL_SCATTER), REORDERS,
     false},
    {"knomial",
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_BCAST) |
         BIT(CRNET_COLL_REDUCE) | BIT(CRNET_COLL_BARRIER),
     KEEPS_ORDER, false},
    /* on one host its layout is one host: a reduce-scatter and an
     * allgather there (tests/multihost.sh runs it across hosts) */
    {"two-level",
     BIT(CRNET_COLL_ALLREDUCE) | BIT(CRNET_COLL_BCAST) | BIT(CRNET_COLL_REDUCE) |
         BIT(CRNET_COLL_REDUCE_SCATTER) | BIT(CRNET_COLL_ALLGATHER),
     REORDERS, false},
};
#define NSCHEDULES (sizeof schedules / sizeof schedules[0])

/* COLL_CHECK_SCHEDULES: a comma-separated list, or all when unset. */
static bool schedule_wanted(const char *name) {
  const char *list = getenv("COLL_CHECK_SCHEDULES");
  size_t len = strlen(name);
  if (list == NULL || list[0] == '\0')
    return true;
  for (const char *q = list; *q != '\0';) {
    size_t n = strcspn(q, ",");
    if (n == len && strncmp(q, name, len) == 0)
      return true;
    q += n;
    if (*q == ',')
      q++;
  }
  return false;
}

/* Every name in COLL_CHECK_SCHEDULES must be a schedule of the table, so
 * that a typo cannot make a run that checks nothing. */
static bool schedule_list_valid(void) {
  const char *list = getenv("COLL_CHECK_SCHEDULES");
  size_t found = 0;
  if (list == NULL || list[0] == '\0')
    return true;
  for (size_t k = 0; k < NSCHEDULES; k++)
    found += schedule_wanted(schedules[k].name);
  for (const char *q = list; *q != '\0'; found--) {
    q += strcspn(q, ",");
    if (*q == ',')
      q++;
  }
  return found == 0;
}

static bool can(const struct schedule *s, crnet_collective coll) {
  return (s->colls & BIT(coll)) != 0;
}

static bool is_pow2(int p) { return (p & (p - 1)) == 0; }


/* Whether crnet_comm_set_schedule must refuse the schedule for coll at
 * this p (and say why). */
static bool refused_at_p(const struct schedule *s, crnet_collective coll,
                         int p) {
  return coll == CRNET_COLL_ALLTOALL && s->a2a_pow2 && !is_pow2(p);
}

static const crnet_datatype datatypes[] = {
    CRNET_INT32, CRNET_UINT8, CRNET_FLOAT, CRNET_DOUBLE, CRNET_INT64,
};
#define NDATATYPES (sizeof datatypes / sizeof datatypes[0])

/* What the logical inputs of a variant depend on: one reference each. */
enum key {
  KEY_SUM_SIGNED,
  KEY_SUM_UNSIGNED,
  KEY_MAX_SIGNED,
  KEY_MAX_UNSIGNED,
  KEY_BXOR_8,
  KEY_BXOR_32,
  KEY_BXOR_64,
  NKEYS
};

struct variant {
  crnet_datatype dt;
  crnet_op op;
  enum key key;
};

static const struct variant variants[] = {
    {CRNET_INT32, CRNET_SUM, KEY_SUM_SIGNED},
    {CRNET_INT32, CRNET_MAX, KEY_MAX_SIGNED},
    {CRNET_INT32, CRNET_BXOR, KEY_BXOR_32},
    {CRNET_UINT8, CRNET_SUM, KEY_SUM_UNSIGNED},
    {CRNET_UINT8, CRNET_MAX, KEY_MAX_UNSIGNED},
    {CRNET_UINT8, CRNET_BXOR, KEY_BXOR_8},
    {CRNET_FLOAT, CRNET_SUM, KEY_SUM_SIGNED},
    {CRNET_FLOAT, CRNET_MAX, KEY_MAX_SIGNED},
    {CRNET_DOUBLE, CRNET_SUM, KEY_SUM_SIGNED},
    {CRNET_DOUBLE, CRNET_MAX, KEY_MAX_SIGNED},
    {CRNET_INT64, CRNET_SUM, KEY_SUM_SIGNED},
    {CRNET_INT64, CRNET_MAX, KEY_MAX_SIGNED},
    {CRNET_INT64, CRNET_BXOR, KEY_BXOR_64},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

/* Our own element sizes, checked against crnet_datatype_size(). */
static size_t esize(crnet_datatype dt) {
  switch (dt) {
  case CRNET_UINT8:
    return 1;
  case CRNET_INT32:
  case CRNET_FLOAT:
    return 4;
  case CRNET_INT64:
  case CRNET_UINT64:
  case CRNET_DOUBLE:
    return 8;
  default:
    abort();
  }
}

/* --- the job's state and failure reporting --- */

struct state {
  crnet_comm *comm;
  int rank, p;
  const char *sched;        /* the schedule being tested, for labels */
  const struct schedule *s; /* its expectations */
  unsigned long cases;      /* checks passed */
  unsigned long failures;   /* checks failed */
  unsigned long calls;      /* collective calls made: picks data windows */
  bool broken;              /* the communicator failed: stop at once */
  bool same_clock;          /* all ranks share CLOCK_MONOTONIC (one boot) */
  uint64_t hash;            /* of every replicated result, in call order */
  int corrupt_rank;         /* COLL_CHECK_CORRUPT, or -1 */
  size_t counts[MAX_COUNTS];
  size_t ncounts;
  int roots[MAX_ROOTS_ALL];
  int nroots;
  size_t refn;           /* elements in every reference array */
  uint64_t *mine[NKEYS]; /* this rank's logical inputs */
  uint64_t *want[NKEYS]; /* the logical results */
  size_t prefn;          /* elements in the prefix arrays */
  uint64_t *incl[NKEYS]; /* ranks 0..rank folded (scan) */
  uint64_t *excl[NKEYS]; /* ranks 0..rank-1 folded (exscan) */
};

static bool stopped(const struct state *st) {
  return st->broken || st->failures >= MAX_REPORTS;
}

static void report(struct state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report(struct state *st, const char *fmt, ...) {
  va_list ap;
  if (st->failures >= MAX_REPORTS)
    return;
  fprintf(stderr, "coll_check: rank %d: FAIL: ", st->rank);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (++st->failures == MAX_REPORTS)
    fprintf(stderr, "coll_check: rank %d: %d failures, stopping\n", st->rank,
            MAX_REPORTS);
}

/* A call that should have succeeded returned rc. Any code but the two that
 * leave the communicator usable means the job is over. */
static void report_rc(struct state *st, const char *what, int rc) {
  report(st, "%s: returned %s (%s): %s", what, crnet_err_name(rc),
         crnet_strerror(rc), crnet_comm_errmsg(st->comm));
  if (rc != CRNET_EINVAL && rc != CRNET_EUNSUPPORTED)
    st->broken = true;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n > 0 ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "coll_check: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  uint64_t w;
  for (; n >= 8; n -= 8, b += 8) {
    memcpy(&w, b, 8);
    h = (h ^ w) * UINT64_C(0x100000001b3);
    h ^= h >> 29;
  }
  for (; n > 0; n--, b++)
    h = (h ^ *b) * UINT64_C(0x100000001b3);
  return h;
}

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

static uint32_t hash_ri(int r, size_t i, uint32_t salt) {
  return mix32((uint32_t)i * 0x9E3779B1U + (uint32_t)(r + 1) * 0x632BE5ABU +
               salt * 0x85EBCA77U);
}

/* A different window of the reference, and different bytes, per call. */
static uint32_t next_salt(struct state *st) {
  return (uint32_t)++st->calls;
}

/* --- the reference --- */

static uint64_t gen(enum key k, int r, size_t i) {
  uint32_t x = hash_ri(r, i, (uint32_t)k + 1);
  switch (k) {
  case KEY_SUM_SIGNED:
    return (uint64_t)((int64_t)(x % 5) - 2);
  case KEY_SUM_UNSIGNED:
    return x % 4;
  case KEY_MAX_SIGNED:
    return (uint64_t)((int64_t)(x % 11) - 5);
  case KEY_MAX_UNSIGNED:
    return x % 11;
  case KEY_BXOR_8:
  case KEY_BXOR_32:
  case KEY_BXOR_64: {
    uint32_t w = k == KEY_BXOR_8 ? 8 : k == KEY_BXOR_32 ? 32 : 64;
    return ((x >> 8) & 3) == 0 ? 0 : UINT64_C(1) << (x % w);
  }
  default:
    abort();
  }
}

static uint64_t fold(enum key k, uint64_t acc, uint64_t v) {
  switch (k) {
  case KEY_SUM_SIGNED:
  case KEY_SUM_UNSIGNED:
    return acc + v;
  case KEY_MAX_SIGNED:
    return (int64_t)v > (int64_t)acc ? v : acc;
  case KEY_MAX_UNSIGNED:
    return v > acc ? v : acc;
  default:
    return acc ^ v;
  }
}

static void build_reference(struct state *st) {
  st->refn = (size_t)st->p * LARGE_COUNT + OFFSET_SPAN;
  for (int k = 0; k < NKEYS; k++) {
    uint64_t *mine = xmalloc(st->refn * 8), *want = xmalloc(st->refn * 8);
    for (size_t i = 0; i < st->refn; i++) {
      want[i] = gen((enum key)k, 0, i);
      for (int r = 1; r < st->p; r++)
        want[i] = fold((enum key)k, want[i], gen((enum key)k, r, i));
      mine[i] = gen((enum key)k, st->rank, i);
    }
    st->mine[k] = mine;
    st->want[k] = want;
  }
  st->prefn = LARGE_COUNT + OFFSET_SPAN;
  for (int k = 0; k < NKEYS; k++) {
    uint64_t *incl = xmalloc(st->prefn * 8), *excl = xmalloc(st->prefn * 8);
    for (size_t i = 0; i < st->prefn; i++) {
      uint64_t acc = gen((enum key)k, 0, i);
      excl[i] = 0; /* rank 0 has no exclusive prefix */
      for (int r = 1; r <= st->rank; r++) {
        excl[i] = acc;
        acc = fold((enum key)k, acc, gen((enum key)k, r, i));
      }
      incl[i] = acc;
    }
    st->incl[k] = incl;
    st->excl[k] = excl;
  }
}

static void free_reference(struct state *st) {
  for (int k = 0; k < NKEYS; k++) {
    free(st->mine[k]);
    free(st->want[k]);
    free(st->incl[k]);
    free(st->excl[k]);
  }
}

/* Logical values (small signed integers or bit patterns) to elements. */
static void encode(crnet_datatype dt, const uint64_t *v, void *out, size_t n) {
  switch (dt) {
  case CRNET_UINT8:
    for (size_t i = 0; i < n; i++)
      ((uint8_t *)out)[i] = (uint8_t)v[i];
    break;
  case CRNET_INT32:
    for (size_t i = 0; i < n; i++)
      ((uint32_t *)out)[i] = (uint32_t)v[i];
    break;
  case CRNET_INT64:
    memcpy(out, v, n * 8);
    break;
  case CRNET_FLOAT:
    for (size_t i = 0; i < n; i++)
      ((float *)out)[i] = (float)(int64_t)v[i];
    break;
  case CRNET_DOUBLE:
    for (size_t i = 0; i < n; i++)
      ((double *)out)[i] = (double)(int64_t)v[i];
    break;
  default:
    abort();
  }
}

/* Random bytes: rank r's contribution to a data-moving call. */
static void gen_bytes(unsigned char *out, size_t n, int r, uint32_t salt) {
  for (size_t b = 0; b < n; b++)
    out[b] = (unsigned char)hash_ri(r, b, salt + 0x1000);
}

static void complement(unsigned char *dst, const unsigned char *src, size_t n) {
  for (size_t b = 0; b < n; b++)
    dst[b] = (unsigned char)~src[b];
}

/* One element, readably, for messages. */
static void format_elem(char *out, size_t cap, crnet_datatype dt,
                        const unsigned char *buf, size_t i) {
  union {
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
  } x;
  memcpy(&x, buf + i * esize(dt), esize(dt));
  switch (dt) {
  case CRNET_INT32:
    snprintf(out, cap, "%" PRId32 " (0x%08" PRIx32 ")", x.i32, x.u32);
    break;
  case CRNET_UINT8:
    snprintf(out, cap, "%u (0x%02x)", x.u8, x.u8);
    break;
  case CRNET_INT64:
    snprintf(out, cap, "%" PRId64 " (0x%016" PRIx64 ")", x.i64, x.u64);
    break;
  case CRNET_UINT64:
    snprintf(out, cap, "0x%016" PRIx64, x.u64);
    break;
  case CRNET_FLOAT:
    snprintf(out, cap, "%.9g (0x%08" PRIx32 ")", x.f, x.u32);
    break;
  case CRNET_DOUBLE:
    snprintf(out, cap, "%.17g (0x%016" PRIx64 ")", x.d, x.u64);
    break;
  default:
    snprintf(out, cap, "?");
    break;
  }
}

/* --- one case: its description, its buffers, its checks --- */

struct desc {
  const char *coll;
  crnet_datatype dt;
  crnet_op op;         /* -1: none */
  size_t count;        /* the count argument (this rank's, for reduce_scatter) */
  size_t nres;         /* elements of the result this rank checks */
  int root;            /* -1: none */
  bool in_place;
  const char *pattern; /* recvcounts pattern, or NULL */
};

static void label_of(char *out, size_t cap, const struct state *st,
                     const struct desc *d) {
  char op[32] = "", root[32] = "";
  if (d->op >= 0)
    snprintf(op, sizeof op, " %s", crnet_op_name(d->op));
  if (d->root >= 0)
    snprintf(root, sizeof root, " root %d", d->root);
  snprintf(out, cap, "schedule %s: %s: %s%s count %zu%s%s%s%s", st->sched,
           d->coll, crnet_datatype_name(d->dt), op, d->count, root,
           d->pattern != NULL ? " recvcounts " : "",
           d->pattern != NULL ? d->pattern : "",
           d->in_place ? " in place" : "");
}

/* A receive range of n bytes with guard bytes either side. */
struct gbuf {
  unsigned char *base, *p;
  size_t n, g;
};

static void gbuf_init(struct gbuf *b, size_t n, size_t es) {
  b->g = GUARD_ELEMS * es;
  b->n = n;
  b->base = xmalloc(n + 2 * b->g);
  b->p = b->base + b->g;
  memset(b->base, GUARD_BYTE, b->g);
  memset(b->p + n, GUARD_BYTE, b->g);
}

static bool gbuf_guards_ok(struct state *st, const struct gbuf *b,
                           const char *label) {
  for (size_t k = 0; k < b->g; k++)
    if (b->base[k] != GUARD_BYTE || b->p[b->n + k] != GUARD_BYTE) {
      report(st, "%s: guard byte %zu %s the receive range was written", label,
             b->base[k] != GUARD_BYTE ? b->g - k : k + 1,
             b->base[k] != GUARD_BYTE ? "before" : "after");
      return false;
    }
  return true;
}

/* Compares count elements; on a difference reports the first one. */
static bool check_elems(struct state *st, const char *label, crnet_datatype dt,
                        const unsigned char *want, const unsigned char *got,
                        size_t count, const char *what) {
  size_t es = esize(dt), first = SIZE_MAX, bad = 0;
  char e[64], g[64];
  if (memcmp(want, got, count * es) == 0)
    return true;
  for (size_t i = 0; i < count; i++)
    if (memcmp(want + i * es, got + i * es, es) != 0) {
      if (first == SIZE_MAX)
        first = i;
      bad++;
    }
  format_elem(e, sizeof e, dt, want, first);
  format_elem(g, sizeof g, dt, got, first);
  report(st, "%s: %s index %zu: expected %s, got %s (%zu of %zu elements wrong)",
         label, what, first, e, g, bad, count);
  return false;
}

/* The common end of a case: rc, result, guards, send buffer. */
static void finish(struct state *st, const char *label, int rc,
                   const struct desc *d, const unsigned char *want,
                   const unsigned char *got, const struct gbuf *recv,
                   const unsigned char *send, const unsigned char *send_copy,
                   size_t send_bytes) {
  bool ok = true;
  if (rc != 0) {
    report_rc(st, label, rc);
    return;
  }
  if (got != NULL &&
      !check_elems(st, label, d->dt, want, got, d->nres, "result"))
    ok = false;
  if (recv != NULL && !gbuf_guards_ok(st, recv, label))
    ok = false;
  if (send != NULL && memcmp(send, send_copy, send_bytes) != 0) {
    report(st, "%s: the send buffer changed", label);
    ok = false;
  }
  if (ok)
    st->cases++;
}

/* --- reduce-scatter, block and irregular --- */

static void rs_case(struct state *st, const struct variant *v,
                    const size_t *rcounts, bool block, bool in_place,
                    const char *pattern) {
  size_t es = esize(v->dt), total = 0, off = 0, mine_n = rcounts[st->rank];
  size_t o = next_salt(st) % OFFSET_SPAN;
  struct desc d = {block ? "reduce_scatter_block" : "reduce_scatter",
                   v->dt, v->op, mine_n, mine_n, -1, in_place, pattern};
  unsigned char *in, *want, *send = NULL;
  struct gbuf recv;
  char label[256];
  int rc;

  for (int r = 0; r < st->p; r++) {
    if (r < st->rank)
      off += rcounts[r];
    total += rcounts[r];
  }
  in = xmalloc(total * es);
  want = xmalloc(mine_n * es);
  encode(v->dt, st->mine[v->key] + o, in, total);
  encode(v->dt, st->want[v->key] + o + off, want, mine_n);
  label_of(label, sizeof label, st, &d);
  if (st->rank == st->corrupt_rank && block && v->dt == CRNET_INT32 &&
      v->op == CRNET_SUM && mine_n == LARGE_COUNT && !in_place &&
      strcmp(st->sched, "circulant") == 0)
    want[es * (mine_n / 2)] ^= 1;

  if (in_place) {
    gbuf_init(&recv, total * es, es);
    memcpy(recv.p, in, total * es);
  } else {
    gbuf_init(&recv, mine_n * es, es);
    complement(recv.p, want, mine_n * es);
    send = xmalloc(total * es);
    memcpy(send, in, total * es);
  }
  if (block)
    rc = crnet_reduce_scatter_block(st->comm, in_place ? CRNET_IN_PLACE : send,
                                    recv.p, mine_n, v->dt, v->op);
  else
    rc = crnet_reduce_scatter(st->comm, in_place ? CRNET_IN_PLACE : send,
                              recv.p, rcounts, v->dt, v->op);
  finish(st, label, rc, &d, want, recv.p, &recv, send, in, total * es);
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

/* The irregular recvcounts patterns: the same on every rank. */
#define MAX_PATTERNS 8

struct pattern {
  char name[48];
  size_t *counts;
};

static int make_patterns(const struct state *st, struct pattern *pat) {
  int p = st->p, n = 0, heavy[3] = {0, p / 2, p - 1};
  for (int k = 0; k < MAX_PATTERNS; k++)
    pat[k].counts = xmalloc(sizeof(size_t) * (size_t)p);

  snprintf(pat[n].name, sizeof pat[n].name, "random 0..7");
  for (int r = 0; r < p; r++)
    pat[n].counts[r] = hash_ri(r, 0, 7001) % 8;
  n++;
  snprintf(pat[n].name, sizeof pat[n].name, "random 0..%d", LARGE_COUNT);
  for (int r = 0; r < p; r++)
    pat[n].counts[r] = hash_ri(r, 0, 7002) % (LARGE_COUNT + 1);
  n++;
  snprintf(pat[n].name, sizeof pat[n].name, "zero at ranks 0 mod 3");
  for (int r = 0; r < p; r++)
    pat[n].counts[r] = r % 3 == 0 ? 0 : 1 + hash_ri(r, 0, 7003) % 300;
  n++;
  for (int h = 0; h < 3; h++) {
    if (h > 0 && heavy[h] == heavy[h - 1])
      continue;
    if (h == 2 && heavy[2] == heavy[0])
      continue;
    snprintf(pat[n].name, sizeof pat[n].name, "all %d at rank %d",
             LARGE_COUNT, heavy[h]);
    for (int r = 0; r < p; r++)
      pat[n].counts[r] = r == heavy[h] ? LARGE_COUNT : 0;
    n++;
  }
  snprintf(pat[n].name, sizeof pat[n].name, "all zero");
  for (int r = 0; r < p; r++)
    pat[n].counts[r] = 0;
  n++;
  return n;
}

static void free_patterns(struct pattern *pat) {
  for (int k = 0; k < MAX_PATTERNS; k++)
    free(pat[k].counts);
}

static void run_reduce_scatter(struct state *st) {
  struct pattern pat[MAX_PATTERNS];
  int npat = make_patterns(st, pat);
  size_t *block = xmalloc(sizeof(size_t) * (size_t)st->p);

  for (size_t vi = 0; vi < NVARIANTS; vi++)
    for (size_t k = 0; k < st->ncounts; k++)
      for (int ip = 0; ip < 2 && !stopped(st); ip++) {
        for (int r = 0; r < st->p; r++)
          block[r] = st->counts[k];
        rs_case(st, &variants[vi], block, true, ip, NULL);
      }
  for (size_t vi = 0; vi < NVARIANTS; vi++)
    for (int k = 0; k < npat; k++)
      for (int ip = 0; ip < 2 && !stopped(st); ip++)
        rs_case(st, &variants[vi], pat[k].counts, false, ip, pat[k].name);
  free(block);
  free_patterns(pat);
}

/* --- allgather --- */

static void allgather_case(struct state *st, crnet_datatype dt, size_t count,
                           bool in_place) {
  size_t es = esize(dt), n = count * es, all = n * (size_t)st->p;
  uint32_t salt = next_salt(st);
  struct desc d = {"allgather", dt, -1, count, count * (size_t)st->p, -1,
                   in_place, NULL};
  unsigned char *want = xmalloc(all), *mine, *send = NULL;
  struct gbuf recv;
  char label[256];
  int rc;

  for (int r = 0; r < st->p; r++)
    gen_bytes(want + (size_t)r * n, n, r, salt);
  mine = want + (size_t)st->rank * n;
  label_of(label, sizeof label, st, &d);
  gbuf_init(&recv, all, es);
  complement(recv.p, want, all);
  if (in_place) {
    memcpy(recv.p + (size_t)st->rank * n, mine, n);
  } else {
    send = xmalloc(n);
    memcpy(send, mine, n);
  }
  rc = crnet_allgather(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p,
                       count, dt);
  finish(st, label, rc, &d, want, recv.p, &recv, send, mine, n);
  st->hash = hash_bytes(st->hash ^ all, recv.p, all);
  free(recv.base);
  free(send);
  free(want);
}

static void run_allgather(struct state *st) {
  for (size_t di = 0; di < NDATATYPES; di++)
    for (size_t k = 0; k < st->ncounts; k++)
      for (int ip = 0; ip < 2 && !stopped(st); ip++)
        allgather_case(st, datatypes[di], st->counts[k], ip);
}

/* --- bcast --- */

static void bcast_case(struct state *st, crnet_datatype dt, size_t count,
                       int root) {
  size_t es = esize(dt), n = count * es;
  uint32_t salt = next_salt(st);
  struct desc d = {"bcast", dt, -1, count, count, root, false, NULL};
  unsigned char *want = xmalloc(n);
  struct gbuf buf;
  char label[256];
  int rc;

  gen_bytes(want, n, root, salt);
  label_of(label, sizeof label, st, &d);
  gbuf_init(&buf, n, es);
  if (st->rank == root)
    memcpy(buf.p, want, n);
  else
    complement(buf.p, want, n);
  rc = crnet_bcast(st->comm, buf.p, count, dt, root);
  finish(st, label, rc, &d, want, buf.p, &buf, NULL, NULL, 0);
  st->hash = hash_bytes(st->hash ^ n, buf.p, n);
  free(buf.base);
  free(want);
}

static void run_bcast(struct state *st) {
  for (size_t di = 0; di < NDATATYPES; di++)
    for (size_t k = 0; k < st->ncounts; k++)
      for (int ri = 0; ri < st->nroots && !stopped(st); ri++)
        bcast_case(st, datatypes[di], st->counts[k], st->roots[ri]);
}

/* --- reduce --- */

/* in_place: the root passes CRNET_IN_PLACE. null_recv: non-roots pass NULL
 * as recv (else a buffer that must stay untouched). */
static void reduce_case(struct state *st, const struct variant *v,
                        size_t count, int root, bool in_place,
                        bool null_recv) {
  size_t es = esize(v->dt), n = count * es;
  size_t o = next_salt(st) % OFFSET_SPAN;
  bool am_root = st->rank == root;
  struct desc d = {"reduce", v->dt, v->op, count, count, root, in_place,
                   NULL};
  unsigned char *in = xmalloc(n), *want = xmalloc(n), *send = NULL;
  const void *sendarg;
  struct gbuf recv = {0};
  char label[256];
  int rc;

  encode(v->dt, st->mine[v->key] + o, in, count);
  encode(v->dt, st->want[v->key] + o, want, count);
  label_of(label, sizeof label, st, &d);
  if (!am_root && null_recv)
    strncat(label, " (NULL recv off the root)", sizeof label - strlen(label) - 1);
  if (am_root || !null_recv)
    gbuf_init(&recv, n, es);
  if (am_root && in_place) {
    memcpy(recv.p, in, n);
    sendarg = CRNET_IN_PLACE;
  } else {
    send = xmalloc(n);
    memcpy(send, in, n);
    sendarg = send;
    if (am_root)
      complement(recv.p, want, n);
    else if (!null_recv)
      memset(recv.p, UNTOUCHED_BYTE, n);
  }
  rc = crnet_reduce(st->comm, sendarg, recv.p, count, v->dt, v->op, root);
  if (am_root) {
    finish(st, label, rc, &d, want, recv.p, &recv, send, in, n);
  } else {
    bool ok = rc == 0;
    if (rc != 0)
      report_rc(st, label, rc);
    for (size_t b = 0; ok && recv.p != NULL && b < n; b++)
      if (recv.p[b] != UNTOUCHED_BYTE) {
        report(st, "%s: a non-root's receive buffer was written at byte %zu",
               label, b);
        ok = false;
      }
    if (ok && recv.p != NULL && !gbuf_guards_ok(st, &recv, label))
      ok = false;
    if (ok && memcmp(send, in, n) != 0) {
      report(st, "%s: the send buffer changed", label);
      ok = false;
    }
    if (ok)
      st->cases++;
  }
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

static void run_reduce(struct state *st) {
  for (size_t vi = 0; vi < NVARIANTS; vi++)
    for (size_t k = 0; k < st->ncounts; k++)
      for (int ri = 0; ri < st->nroots; ri++)
        for (int ip = 0; ip < 2 && !stopped(st); ip++)
          reduce_case(st, &variants[vi], st->counts[k], st->roots[ri], ip,
                      ((k + (size_t)ri + (size_t)ip) & 1) != 0);
}

/* --- scan and exscan --- */

/* Rank 0's exscan result is undefined and its receive buffer must stay as
 * it was: its input when in place, else UNTOUCHED_BYTE. */
static void scan_case(struct state *st, const struct variant *v, size_t count,
                      bool exclusive, bool in_place) {
  size_t es = esize(v->dt), n = count * es;
  size_t o = next_salt(st) % OFFSET_SPAN;
  bool untouched = exclusive && st->rank == 0;
  struct desc d = {exclusive ? "exscan" : "scan", v->dt, v->op, count, count,
                   -1, in_place, NULL};
  unsigned char *in = xmalloc(n), *want = xmalloc(n), *send = NULL;
  struct gbuf recv;
  char label[256];
  int rc;

  encode(v->dt, st->mine[v->key] + o, in, count);
  if (untouched && in_place)
    memcpy(want, in, n);
  else if (untouched)
    memset(want, UNTOUCHED_BYTE, n);
  else
    encode(v->dt, (exclusive ? st->excl : st->incl)[v->key] + o, want, count);
  label_of(label, sizeof label, st, &d);
  if (untouched)
    strncat(label, " (rank 0: the receive buffer must stay untouched)",
            sizeof label - strlen(label) - 1);
  gbuf_init(&recv, n, es);
  if (in_place) {
    memcpy(recv.p, in, n);
  } else {
    if (untouched)
      memcpy(recv.p, want, n);
    else
      complement(recv.p, want, n);
    send = xmalloc(n);
    memcpy(send, in, n);
  }
  if (exclusive)
    rc = crnet_exscan(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p, count,
                      v->dt, v->op);
  else
    rc = crnet_scan(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p, count,
                    v->dt, v->op);
  finish(st, label, rc, &d, want, recv.p, &recv, send, in, n);
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

static void run_scan(struct state *st) {
  for (int ex = 0; ex < 2; ex++)
    for (size_t vi = 0; vi < NVARIANTS; vi++)
      for (size_t k = 0; k < st->ncounts; k++)
        for (int ip = 0; ip < 2 && !stopped(st); ip++)
          scan_case(st, &variants[vi], st->counts[k], ex, ip);
}

/* --- alltoall --- */


/* The n bytes that rank src sends to rank dst. */
static void a2a_bytes(unsigned char *out, size_t n, int src, int dst,
                      uint32_t salt) {
  for (size_t b = 0; b < n; b++)
    out[b] = (unsigned char)hash_ri(src, b, salt * 0x10001U + (uint32_t)dst);
}

/* Checks block j of got (from rank j) exactly; reports the first wrong
 * block with its source and index. */
static bool a2a_check(struct state *st, const char *label, crnet_datatype dt,
                      const unsigned char *want, const unsigned char *got,
                      size_t count) {
  size_t es = esize(dt), n = count * es, badblocks = 0;
  int first = -1;
  char e[64], g[64];
  for (int j = 0; j < st->p; j++)
    if (memcmp(want + (size_t)j * n, got + (size_t)j * n, n) != 0) {
      if (first < 0)
        first = j;
      badblocks++;
    }
  if (first < 0)
    return true;
  for (size_t i = 0; i < count; i++) {
    size_t at = (size_t)first * count + i;
    if (memcmp(want + at * es, got + at * es, es) != 0) {
      format_elem(e, sizeof e, dt, want, at);
      format_elem(g, sizeof g, dt, got, at);
      report(st, "%s: block from rank %d index %zu: expected %s, got %s (%zu "
                 "of %d blocks wrong)",
             label, first, i, e, g, badblocks, st->p);
      break;
    }
  }
  return false;
}

static void alltoall_case(struct state *st, crnet_datatype dt, size_t count,
                          bool in_place) {
  size_t es = esize(dt), n = count * es, all = n * (size_t)st->p;
  uint32_t salt = next_salt(st);
  struct desc d = {"alltoall", dt, -1, count, count * (size_t)st->p, -1,
                   in_place, NULL};
  unsigned char *out = xmalloc(all), *want = xmalloc(all);
  unsigned char *send = NULL;
  struct gbuf recv;
  char label[256];
  bool ok = true;
  int rc;

  for (int j = 0; j < st->p; j++) {
    a2a_bytes(out + (size_t)j * n, n, st->rank, j, salt);
    a2a_bytes(want + (size_t)j * n, n, j, st->rank, salt);
  }
  label_of(label, sizeof label, st, &d);
  gbuf_init(&recv, all, es);
  if (in_place) {
    memcpy(recv.p, out, all);
  } else {
    complement(recv.p, want, all);
    send = xmalloc(all);
    memcpy(send, out, all);
  }
  rc = crnet_alltoall(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p, count,
                      dt);
  if (rc != 0) {
    report_rc(st, label, rc);
    ok = false;
  } else {
    ok = a2a_check(st, label, dt, want, recv.p, count);
    if (!gbuf_guards_ok(st, &recv, label))
      ok = false;
    if (send != NULL && memcmp(send, out, all) != 0) {
      report(st, "%s: the send buffer changed", label);
      ok = false;
    }
  }
  if (ok)
    st->cases++;
  free(recv.base);
  free(send);
  free(want);
  free(out);
}

static void run_alltoall(struct state *st) {
  size_t cand[] = {0, 1, (size_t)st->p - 1, (size_t)st->p, LARGE_COUNT};
  for (size_t di = 0; di < NDATATYPES; di++)
    for (size_t k = 0; k < sizeof cand / sizeof cand[0]; k++) {
      bool dup = false;
      for (size_t j = 0; j < k; j++)
        dup = dup || cand[j] == cand[k];
      for (int ip = 0; ip < 2 && !dup && !stopped(st); ip++)
        alltoall_case(st, datatypes[di], cand[k], ip);
    }
}

/* --- barrier --- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* Rank r arrives (r or p-1-r) steps late. No rank may leave the barrier
 * before the last one entered it. With one clock for all ranks (one host,
 * one boot) that is checked exactly: my exit >= everyone's entry. Otherwise
 * the elapsed time since a preceding barrier must cover the longest delay,
 * less the skew of that barrier's exits. */
static void barrier_causality(struct state *st, bool reverse) {
  int p = st->p, late = reverse ? p - 1 - st->rank : st->rank;
  uint64_t step = p > 1 ? 20000000u : 0, t0, enter, exit_, last = 0;
  char label[128];
  int rc;

  if (p > 9)
    step = 160000000u / (uint64_t)(p - 1); /* at most 160 ms in all */
  snprintf(label, sizeof label, "schedule %s: barrier: rank %s arrives last",
           st->sched, reverse ? "0" : "p-1");
  rc = crnet_barrier(st->comm);
  if (rc != 0) {
    report_rc(st, label, rc);
    return;
  }
  t0 = now_ns();
  sleep_ns((uint64_t)late * step);
  enter = now_ns();
  rc = crnet_barrier(st->comm);
  exit_ = now_ns();
  if (rc != 0) {
    report_rc(st, label, rc);
    return;
  }
  rc = crnet_allreduce(st->comm, &enter, &last, 1, CRNET_UINT64, CRNET_MAX);
  if (rc != 0) {
    report_rc(st, "barrier: allreduce of entry times", rc);
    return;
  }
  if (st->same_clock && exit_ < last)
    report(st, "%s: left the barrier %.3f ms before the last rank entered it",
           label, (double)(last - exit_) / 1e6);
  else if (!st->same_clock &&
           exit_ - t0 + 10000000u < (uint64_t)(p - 1) * step)
    report(st, "%s: left after %.3f ms, but the last rank arrived after "
               "%.3f ms",
           label, (double)(exit_ - t0) / 1e6,
           (double)((uint64_t)(p - 1) * step) / 1e6);
  else
    st->cases++;
}

static void run_barrier(struct state *st) {
  char label[96];
  barrier_causality(st, false);
  if (!stopped(st))
    barrier_causality(st, true);
  snprintf(label, sizeof label, "schedule %s: barrier loop", st->sched);
  for (int k = 0; k < 200 && !stopped(st); k++) {
    int rc = crnet_barrier(st->comm);
    if (rc != 0)
      report_rc(st, label, rc);
  }
  if (!stopped(st))
    st->cases++;
}

/* --- the non-commutative user op --- */

static int user_ctx_tag;
static int user_fn_misuse;

/* x -> a*x + b modulo the prime M = 2^31 - 1, packed a << 32 | b with
 * a in 1..M-1: a group under composition, associative, not commutative. */
#define AFFINE_M UINT64_C(2147483647)

static uint64_t affine_then(uint64_t first, uint64_t second) {
  uint64_t a1 = first >> 32, b1 = first & 0xffffffffu;
  uint64_t a2 = second >> 32, b2 = second & 0xffffffffu;
  return (a1 * a2 % AFFINE_M) << 32 | (a2 * b1 % AFFINE_M + b2) % AFFINE_M;
}

/* inout = in (+) inout, `in` holding the lower ranks: in is applied first. */
static void affine_fn(const void *in, void *inout, size_t count,
                      crnet_datatype dt, void *ctx) {
  const uint64_t *a = in;
  uint64_t *b = inout;
  if (dt != CRNET_UINT64 || ctx != &user_ctx_tag) {
    user_fn_misuse = 1;
    return;
  }
  for (size_t i = 0; i < count; i++)
    b[i] = affine_then(a[i], b[i]);
}

static uint64_t affine_input(int r, size_t i, uint32_t salt) {
  uint64_t a = 1 + hash_ri(r, i, salt) % (AFFINE_M - 1);
  uint64_t b = hash_ri(r, i, ~salt) % AFFINE_M;
  return a << 32 | b;
}

/* Whether the schedule must give the rank-order result for coll. */
static bool keeps_order(const struct state *st, crnet_collective coll) {
  return st->s->order == KEEPS_ORDER ||
         (st->s->order == KEEPS_IN_SCAN && coll == CRNET_COLL_SCAN);
}

/* Whether rc is right for a non-commutative call; true if it succeeded and
 * the result must be checked. */
static bool noncomm_rc_ok(struct state *st, crnet_collective coll,
                          const char *label, int rc, bool *passed) {
  *passed = false;
  if (rc == 0) {
    if (!keeps_order(st, coll) && st->p >= 4) {
      report(st, "%s: succeeded, but '%s' reorders operands at p = %d and "
                 "must return EUNSUPPORTED",
             label, st->s->name, st->p);
      return false;
    }
    return true;
  }
  if (rc == CRNET_EUNSUPPORTED && !keeps_order(st, coll)) {
    if (crnet_comm_errmsg(st->comm)[0] == '\0')
      report(st, "%s: EUNSUPPORTED without a reason in crnet_comm_errmsg",
             label);
    else
      *passed = true;
    return false;
  }
  report_rc(st, label, rc);
  return false;
}

/* rcounts: the blocks (all equal for the block call). */
static void noncomm_rs(struct state *st, crnet_op op, const size_t *rcounts,
                       bool block, bool in_place, const char *pattern) {
  size_t total = 0, off = 0, mine_n = rcounts[st->rank];
  uint32_t salt = next_salt(st);
  struct desc d = {block ? "reduce_scatter_block" : "reduce_scatter",
                   CRNET_UINT64, op, mine_n, mine_n, -1, in_place, pattern};
  uint64_t *in, *want, *send = NULL;
  struct gbuf recv;
  char label[256];
  bool passed;
  int rc;

  for (int r = 0; r < st->p; r++) {
    if (r < st->rank)
      off += rcounts[r];
    total += rcounts[r];
  }
  in = xmalloc(total * 8);
  want = xmalloc(mine_n * 8);
  for (size_t i = 0; i < total; i++)
    in[i] = affine_input(st->rank, i, salt);
  for (size_t j = 0; j < mine_n; j++) {
    want[j] = affine_input(0, off + j, salt);
    for (int r = 1; r < st->p; r++)
      want[j] = affine_then(want[j], affine_input(r, off + j, salt));
  }
  label_of(label, sizeof label, st, &d);
  strncat(label, " (non-commutative)", sizeof label - strlen(label) - 1);
  if (in_place) {
    gbuf_init(&recv, total * 8, 8);
    memcpy(recv.p, in, total * 8);
  } else {
    gbuf_init(&recv, mine_n * 8, 8);
    complement(recv.p, (unsigned char *)want, mine_n * 8);
    send = xmalloc(total * 8);
    memcpy(send, in, total * 8);
  }
  if (block)
    rc = crnet_reduce_scatter_block(st->comm, in_place ? CRNET_IN_PLACE : send,
                                    recv.p, mine_n, CRNET_UINT64, op);
  else
    rc = crnet_reduce_scatter(st->comm, in_place ? CRNET_IN_PLACE : send,
                              recv.p, rcounts, CRNET_UINT64, op);
  if (noncomm_rc_ok(st, CRNET_COLL_REDUCE_SCATTER, label, rc, &passed))
    finish(st, label, rc, &d, (unsigned char *)want, recv.p, &recv,
           (unsigned char *)send, (unsigned char *)in, total * 8);
  else if (passed)
    st->cases++;
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

static void noncomm_reduce(struct state *st, crnet_op op, size_t count,
                           int root, bool in_place) {
  uint32_t salt = next_salt(st);
  bool am_root = st->rank == root;
  struct desc d = {"reduce", CRNET_UINT64, op, count, count, root, in_place,
                   NULL};
  uint64_t *in = xmalloc(count * 8), *want = xmalloc(count * 8), *send;
  struct gbuf recv;
  char label[256];
  bool passed;
  int rc;

  for (size_t i = 0; i < count; i++) {
    in[i] = affine_input(st->rank, i, salt);
    want[i] = affine_input(0, i, salt);
    for (int r = 1; r < st->p; r++)
      want[i] = affine_then(want[i], affine_input(r, i, salt));
  }
  label_of(label, sizeof label, st, &d);
  strncat(label, " (non-commutative)", sizeof label - strlen(label) - 1);
  gbuf_init(&recv, count * 8, 8);
  send = xmalloc(count * 8);
  memcpy(send, in, count * 8);
  if (am_root && in_place)
    memcpy(recv.p, in, count * 8);
  else if (am_root)
    complement(recv.p, (unsigned char *)want, count * 8);
  else
    memset(recv.p, UNTOUCHED_BYTE, count * 8);
  rc = crnet_reduce(st->comm, am_root && in_place ? CRNET_IN_PLACE : send,
                    recv.p, count, CRNET_UINT64, op, root);
  if (noncomm_rc_ok(st, CRNET_COLL_REDUCE, label, rc, &passed)) {
    if (am_root) {
      finish(st, label, rc, &d, (unsigned char *)want, recv.p, &recv,
             (unsigned char *)send, (unsigned char *)in, count * 8);
    } else {
      bool ok = gbuf_guards_ok(st, &recv, label);
      for (size_t b = 0; ok && b < count * 8; b++)
        if (recv.p[b] != UNTOUCHED_BYTE) {
          report(st, "%s: a non-root's receive buffer was written", label);
          ok = false;
        }
      if (ok && memcmp(send, in, count * 8) != 0) {
        report(st, "%s: the send buffer changed", label);
        ok = false;
      }
      if (ok)
        st->cases++;
    }
  } else if (passed) {
    st->cases++;
  }
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

/* Rank r gets the composition of ranks 0..r (0..r-1 for exscan; rank 0's
 * exscan buffer stays untouched). */
static void noncomm_scan(struct state *st, crnet_op op, size_t count,
                         bool exclusive, bool in_place) {
  uint32_t salt = next_salt(st);
  bool untouched = exclusive && st->rank == 0;
  int upto = exclusive ? st->rank - 1 : st->rank;
  struct desc d = {exclusive ? "exscan" : "scan", CRNET_UINT64, op, count,
                   count, -1, in_place, NULL};
  uint64_t *in = xmalloc(count * 8), *want = xmalloc(count * 8), *send = NULL;
  struct gbuf recv;
  char label[256];
  bool passed;
  int rc;

  for (size_t i = 0; i < count; i++) {
    in[i] = affine_input(st->rank, i, salt);
    want[i] = affine_input(0, i, salt);
    for (int r = 1; r <= upto; r++)
      want[i] = affine_then(want[i], affine_input(r, i, salt));
  }
  if (untouched && in_place)
    memcpy(want, in, count * 8);
  else if (untouched)
    memset(want, UNTOUCHED_BYTE, count * 8);
  label_of(label, sizeof label, st, &d);
  strncat(label, " (non-commutative)", sizeof label - strlen(label) - 1);
  if (untouched)
    strncat(label, " (rank 0: the receive buffer must stay untouched)",
            sizeof label - strlen(label) - 1);
  gbuf_init(&recv, count * 8, 8);
  if (in_place) {
    memcpy(recv.p, in, count * 8);
  } else {
    if (untouched)
      memcpy(recv.p, want, count * 8);
    else
      complement(recv.p, (unsigned char *)want, count * 8);
    send = xmalloc(count * 8);
    memcpy(send, in, count * 8);
  }
  if (exclusive)
    rc = crnet_exscan(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p, count,
                      CRNET_UINT64, op);
  else
    rc = crnet_scan(st->comm, in_place ? CRNET_IN_PLACE : send, recv.p, count,
                    CRNET_UINT64, op);
  if (noncomm_rc_ok(st, CRNET_COLL_SCAN, label, rc, &passed))
    finish(st, label, rc, &d, (unsigned char *)want, recv.p, &recv,
           (unsigned char *)send, (unsigned char *)in, count * 8);
  else if (passed)
    st->cases++;
  free(recv.base);
  free(send);
  free(want);
  free(in);
}

/* The non-commutative cases of the collectives the schedule can do. */
static void run_noncommutative(struct state *st, crnet_op op) {
  size_t *rc = xmalloc(sizeof(size_t) * (size_t)st->p);
  size_t counts[2] = {(size_t)st->p + 1, LARGE_COUNT};
  int roots[2] = {0, st->p - 1};

  if (can(st->s, CRNET_COLL_REDUCE_SCATTER)) {
    for (int k = 0; k < 2; k++)
      for (int ip = 0; ip < 2 && !stopped(st); ip++) {
        for (int r = 0; r < st->p; r++)
          rc[r] = counts[k];
        noncomm_rs(st, op, rc, true, ip, NULL);
      }
    for (int r = 0; r < st->p; r++)
      rc[r] = hash_ri(r, 0, 7004) % 50;
    for (int ip = 0; ip < 2 && !stopped(st); ip++)
      noncomm_rs(st, op, rc, false, ip, "random 0..49");
  }
  if (can(st->s, CRNET_COLL_REDUCE))
    for (int k = 0; k < 2; k++)
      for (int ip = 0; ip < 2 && !stopped(st); ip++)
        noncomm_reduce(st, op, counts[k], roots[k], ip);
  if (can(st->s, CRNET_COLL_SCAN))
    for (int ex = 0; ex < 2; ex++)
      for (int k = 0; k < 2; k++)
        for (int ip = 0; ip < 2 && !stopped(st); ip++)
          noncomm_scan(st, op, counts[k], ex, ip);
  if (user_fn_misuse)
    report(st, "schedule %s: the user op was called with the wrong datatype "
               "or context",
           st->sched);
  free(rc);
}

/* --- one schedule --- */

/* Every collective back to "auto"; false (reported) if that fails. */
static bool choose_auto(struct state *st) {
  bool ok = true;
  for (int c = 0; c < CRNET_COLL_COUNT; c++) {
    int rc = crnet_comm_set_schedule(st->comm, (crnet_collective)c, "auto");
    if (rc != 0) {
      char what[128];
      snprintf(what, sizeof what, "crnet_comm_set_schedule(%s, \"auto\")",
               crnet_collective_name((crnet_collective)c));
      report_rc(st, what, rc);
      ok = false;
    }
  }
  return ok;
}

/* Chooses the schedule for every collective it can do (the others stay on
 * auto, and this program never calls them while the schedule is under
 * test) and runs those collectives. Allreduce is chosen too, to see the
 * choice accepted, then put back on auto: this program's own bookkeeping
 * (hash agreement, barrier entry times) uses it, and allreduce_check tests
 * it under every schedule. A choice that fails is reported on every rank
 * alike (it is a local decision), and the schedule is skipped. */
/* --- the schedules a comm keeps ---
 * A comm keeps the schedule of its last call of each collective and runs
 * the next call of the same shape on it (src/collectives/memo.h). The
 * passes above change the shape at nearly every call (in place alternates),
 * so here each call repeats the one before it or changes one thing a
 * schedule depends on: the count, one rank's block, the element size, the
 * root, in place, exclusive. A kept schedule that ran a call of another
 * shape gives wrong results, overruns the guards or fails as a mismatch. */
static void run_shapes_in_turn(struct state *st) {
  const struct schedule *s = st->s;
  size_t a = st->counts[st->ncounts / 2], b = a + 3;
  size_t *block = xmalloc(sizeof(size_t) * (size_t)st->p);
  int r0 = st->roots[0], r1 = st->roots[st->nroots - 1];

  if (can(s, CRNET_COLL_REDUCE_SCATTER)) {
    const size_t shape[] = {a, a, b, a};
    for (size_t k = 0; k < 4 && !stopped(st); k++) {
      for (int r = 0; r < st->p; r++)
        block[r] = shape[k];
      rs_case(st, &variants[0], block, true, false, "in turn");
    }
    /* The same total in other blocks: rank 0's extra moves to the last
     * rank. */
    block[0] = b;
    rs_case(st, &variants[0], block, false, false, "in turn");
    block[0] = a;
    block[st->p - 1] = b;
    rs_case(st, &variants[0], block, false, false, "in turn");
    rs_case(st, &variants[8], block, false, false, "in turn");
  }
  if (can(s, CRNET_COLL_ALLGATHER)) {
    const size_t shape[] = {a, a, b, a, a, a, a};
    const bool ip[] = {false, false, false, false, true, true, false};
    for (size_t k = 0; k < 7 && !stopped(st); k++)
      allgather_case(st, k == 3 ? CRNET_DOUBLE : CRNET_INT32, shape[k],
                     ip[k]);
  }
  if (can(s, CRNET_COLL_BCAST)) {
    const size_t shape[] = {a, a, a, a, b};
    for (size_t k = 0; k < 5 && !stopped(st); k++)
      bcast_case(st, CRNET_INT32, shape[k], k < 2 ? r0 : r1);
  }
  if (can(s, CRNET_COLL_REDUCE)) {
    const bool ip[] = {false, false, false, true, true};
    for (size_t k = 0; k < 5 && !stopped(st); k++)
      reduce_case(st, &variants[0], k == 4 ? b : a, k < 2 ? r0 : r1, ip[k],
                  false);
  }
  if (can(s, CRNET_COLL_SCAN)) {
    const bool ex[] = {false, false, true, true, false};
    for (size_t k = 0; k < 5 && !stopped(st); k++)
      scan_case(st, &variants[0], k == 4 ? b : a, ex[k], k == 4);
  }
  if (can(s, CRNET_COLL_ALLTOALL) &&
      !refused_at_p(s, CRNET_COLL_ALLTOALL, st->p)) {
    const size_t shape[] = {a, a, b, a, a};
    for (size_t k = 0; k < 5 && !stopped(st); k++)
      alltoall_case(st, CRNET_INT32, shape[k], k == 4);
  }
  free(block);
}

static void run_schedule(struct state *st, const struct schedule *s,
                         crnet_op nc) {
  bool ok;
  st->s = s;
  st->sched = s->name;
  if (!choose_auto(st)) {
    st->broken = true;
    return;
  }
  ok = true;
  for (int c = 0; c < CRNET_COLL_COUNT; c++) {
    int rc;
    if (!can(s, (crnet_collective)c))
      continue;
    rc = crnet_comm_set_schedule(st->comm, (crnet_collective)c, s->name);
    if (refused_at_p(s, (crnet_collective)c, st->p)) {
      const char *why = crnet_comm_errmsg(st->comm);
      if (rc != CRNET_EUNSUPPORTED || strstr(why, "power of two") == NULL) {
        char what[128];
        snprintf(what, sizeof what,
                 "crnet_comm_set_schedule(%s, \"%s\") at p = %d (must be "
                 "refused: not a power of two; said \"%s\")",
                 crnet_collective_name((crnet_collective)c), s->name, st->p,
                 why);
        report_rc(st, what, rc);
        ok = false;
      }
      continue;
    }
    if (rc != 0) {
      char what[128];
      snprintf(what, sizeof what, "crnet_comm_set_schedule(%s, \"%s\")",
               crnet_collective_name((crnet_collective)c), s->name);
      report_rc(st, what, rc);
      ok = false;
    }
  }
  if (ok) {
    int rc = crnet_comm_set_schedule(st->comm, CRNET_COLL_ALLREDUCE, "auto");
    if (rc != 0) {
      report_rc(st, "crnet_comm_set_schedule(allreduce, \"auto\")", rc);
      ok = false;
    }
  }
  if (!ok) {
    if (!choose_auto(st))
      st->broken = true;
    else if (st->rank == 0)
      fprintf(stderr, "coll_check: schedule %s skipped\n", s->name);
    return;
  }
  if (can(s, CRNET_COLL_REDUCE_SCATTER))
    run_reduce_scatter(st);
  if (can(s, CRNET_COLL_ALLGATHER) && !stopped(st))
    run_allgather(st);
  if (can(s, CRNET_COLL_BCAST) && !stopped(st))
    run_bcast(st);
  if (can(s, CRNET_COLL_REDUCE) && !stopped(st))
    run_reduce(st);
  if (can(s, CRNET_COLL_SCAN) && !stopped(st))
    run_scan(st);
  if (can(s, CRNET_COLL_ALLTOALL) &&
      !refused_at_p(s, CRNET_COLL_ALLTOALL, st->p) && !stopped(st))
    run_alltoall(st);
  if (can(s, CRNET_COLL_BARRIER) && !stopped(st))
    run_barrier(st);
  if (!stopped(st))
    run_noncommutative(st, nc);
  if (!stopped(st))
    run_shapes_in_turn(st);
}

/* --- misuse --- */

/* rc must be EINVAL with a reason, and recv (n bytes, may be NULL) as
 * before. */
static void expect_einval(struct state *st, const char *what, int rc,
                          bool has_comm, const unsigned char *recv,
                          const unsigned char *before, size_t n) {
  if (rc != CRNET_EINVAL) {
    report(st, "misuse: %s: returned %s, expected EINVAL", what,
           crnet_err_name(rc));
    if (rc != 0 && rc != CRNET_EUNSUPPORTED)
      st->broken = true;
  } else if (has_comm && crnet_comm_errmsg(st->comm)[0] == '\0') {
    report(st, "misuse: %s: EINVAL without a reason in crnet_comm_errmsg",
           what);
  } else if (recv != NULL && memcmp(recv, before, n) != 0) {
    report(st, "misuse: %s: returned EINVAL but wrote the receive buffer",
           what);
  } else {
    st->cases++;
  }
}

#define MISUSE_BYTES 256

static void check_misuse(struct state *st) {
  crnet_comm *c = st->comm;
  int p = st->p, rank = st->rank, rc;
  int64_t send[MISUSE_BYTES];
  unsigned char *recv = xmalloc(MISUSE_BYTES * 17), *before;
  size_t *three = xmalloc(sizeof(size_t) * (size_t)p);
  size_t *huge = xmalloc(sizeof(size_t) * (size_t)p);
  const size_t nb = MISUSE_BYTES * 17;
  static const crnet_datatype bad_dts[] = {CRNET_DATATYPE_COUNT,
                                           (crnet_datatype)-1};
  char what[128];

  before = xmalloc(nb);
  for (size_t b = 0; b < nb; b++)
    recv[b] = before[b] = (unsigned char)(0xC3 ^ b);
  memset(send, 0, sizeof send);
  for (int r = 0; r < p; r++) {
    three[r] = 3;
    huge[r] = SIZE_MAX / 2;
  }
  /* The counts that are not meant to overflow fit these buffers for every
   * p up to 16 here, so that a call that wrongly runs cannot overrun them. */
#define RECV_OK(n) expect_einval(st, what, rc, true, recv, before, (n))

  /* reduce_scatter_block */
  snprintf(what, sizeof what, "reduce_scatter_block: NULL send");
  rc = crnet_reduce_scatter_block(c, NULL, recv, 3, CRNET_INT32, CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter_block: NULL recv");
  rc = crnet_reduce_scatter_block(c, send, NULL, 3, CRNET_INT32, CRNET_SUM);
  RECV_OK(0);
  snprintf(what, sizeof what, "reduce_scatter_block: NULL recv, in place");
  rc = crnet_reduce_scatter_block(c, CRNET_IN_PLACE, NULL, 3, CRNET_INT32,
                                  CRNET_SUM);
  RECV_OK(0);
  snprintf(what, sizeof what, "reduce_scatter_block: count overflows");
  rc = crnet_reduce_scatter_block(c, send, recv, SIZE_MAX / 2, CRNET_INT32,
                                  CRNET_SUM);
  RECV_OK(nb);
  for (size_t k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "reduce_scatter_block: datatype %d",
             (int)bad_dts[k]);
    rc = crnet_reduce_scatter_block(c, send, recv, 3, bad_dts[k], CRNET_SUM);
    RECV_OK(nb);
  }
  snprintf(what, sizeof what, "reduce_scatter_block: op -1");
  rc = crnet_reduce_scatter_block(c, send, recv, 3, CRNET_INT32, -1);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter_block: op never created");
  rc = crnet_reduce_scatter_block(c, send, recv, 3, CRNET_INT32,
                                  CRNET_OP_BUILTIN_COUNT + 1000);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter_block: BXOR on FLOAT");
  rc = crnet_reduce_scatter_block(c, send, recv, 3, CRNET_FLOAT, CRNET_BXOR);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter_block: SUM on BYTE");
  rc = crnet_reduce_scatter_block(c, send, recv, 3, CRNET_BYTE, CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter_block: NULL comm");
  rc = crnet_reduce_scatter_block(NULL, send, recv, 3, CRNET_INT32, CRNET_SUM);
  expect_einval(st, what, rc, false, recv, before, nb);

  /* reduce_scatter */
  snprintf(what, sizeof what, "reduce_scatter: NULL recvcounts");
  rc = crnet_reduce_scatter(c, send, recv, NULL, CRNET_INT32, CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter: NULL send");
  rc = crnet_reduce_scatter(c, NULL, recv, three, CRNET_INT32, CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter: NULL recv");
  rc = crnet_reduce_scatter(c, send, NULL, three, CRNET_INT32, CRNET_SUM);
  RECV_OK(0);
  snprintf(what, sizeof what, "reduce_scatter: NULL recv, in place");
  rc = crnet_reduce_scatter(c, CRNET_IN_PLACE, NULL, three, CRNET_INT32,
                            CRNET_SUM);
  RECV_OK(0);
  snprintf(what, sizeof what, "reduce_scatter: counts overflow");
  rc = crnet_reduce_scatter(c, send, recv, huge, CRNET_INT32, CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter: datatype out of range");
  rc = crnet_reduce_scatter(c, send, recv, three, CRNET_DATATYPE_COUNT,
                            CRNET_SUM);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce_scatter: BXOR on DOUBLE");
  rc = crnet_reduce_scatter(c, send, recv, three, CRNET_DOUBLE, CRNET_BXOR);
  RECV_OK(nb);

  /* allgather */
  snprintf(what, sizeof what, "allgather: NULL send");
  rc = crnet_allgather(c, NULL, recv, 3, CRNET_INT32);
  RECV_OK(nb);
  snprintf(what, sizeof what, "allgather: NULL recv");
  rc = crnet_allgather(c, send, NULL, 3, CRNET_INT32);
  RECV_OK(0);
  snprintf(what, sizeof what, "allgather: count overflows");
  rc = crnet_allgather(c, send, recv, SIZE_MAX / 2, CRNET_INT32);
  RECV_OK(nb);
  for (size_t k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "allgather: datatype %d", (int)bad_dts[k]);
    rc = crnet_allgather(c, send, recv, 3, bad_dts[k]);
    RECV_OK(nb);
  }

  /* bcast */
  snprintf(what, sizeof what, "bcast: root -1");
  rc = crnet_bcast(c, recv, 3, CRNET_INT32, -1);
  RECV_OK(nb);
  snprintf(what, sizeof what, "bcast: root p");
  rc = crnet_bcast(c, recv, 3, CRNET_INT32, p);
  RECV_OK(nb);
  snprintf(what, sizeof what, "bcast: NULL buffer");
  rc = crnet_bcast(c, NULL, 3, CRNET_INT32, 0);
  RECV_OK(0);
  snprintf(what, sizeof what, "bcast: count overflows");
  rc = crnet_bcast(c, recv, SIZE_MAX / 4, CRNET_INT64, 0);
  RECV_OK(nb);
  snprintf(what, sizeof what, "bcast: datatype out of range");
  rc = crnet_bcast(c, recv, 3, CRNET_DATATYPE_COUNT, 0);
  RECV_OK(nb);

  /* reduce */
  snprintf(what, sizeof what, "reduce: root -1");
  rc = crnet_reduce(c, send, recv, 3, CRNET_INT32, CRNET_SUM, -1);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce: root p");
  rc = crnet_reduce(c, send, recv, 3, CRNET_INT32, CRNET_SUM, p);
  RECV_OK(nb);
  if (p > 1) {
    /* Every rank names another as the root: each is a non-root. */
    snprintf(what, sizeof what, "reduce: CRNET_IN_PLACE off the root");
    rc = crnet_reduce(c, CRNET_IN_PLACE, recv, 3, CRNET_INT32, CRNET_SUM,
                      (rank + 1) % p);
    RECV_OK(nb);
  }
  snprintf(what, sizeof what, "reduce: NULL send");
  rc = crnet_reduce(c, NULL, recv, 3, CRNET_INT32, CRNET_SUM, 0);
  RECV_OK(nb);
  /* Every rank names itself as the root. */
  snprintf(what, sizeof what, "reduce: NULL recv at the root");
  rc = crnet_reduce(c, send, NULL, 3, CRNET_INT32, CRNET_SUM, rank);
  RECV_OK(0);
  snprintf(what, sizeof what, "reduce: count overflows");
  rc = crnet_reduce(c, send, recv, SIZE_MAX / 4, CRNET_INT64, CRNET_SUM, 0);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce: datatype out of range");
  rc = crnet_reduce(c, send, recv, 3, (crnet_datatype)-1, CRNET_SUM, 0);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce: op never created");
  rc = crnet_reduce(c, send, recv, 3, CRNET_INT32, CRNET_OP_BUILTIN_COUNT + 77,
                    0);
  RECV_OK(nb);
  snprintf(what, sizeof what, "reduce: BAND on FLOAT");
  rc = crnet_reduce(c, send, recv, 3, CRNET_FLOAT, CRNET_BAND, 0);
  RECV_OK(nb);

  /* barrier */
  snprintf(what, sizeof what, "barrier: NULL comm");
  rc = crnet_barrier(NULL);
  expect_einval(st, what, rc, false, NULL, NULL, 0);

  /* scan and exscan */
  for (int ex = 0; ex < 2; ex++) {
    const char *name = ex ? "exscan" : "scan";
    int (*fn)(crnet_comm *, const void *, void *, size_t, crnet_datatype,
              crnet_op) = ex ? crnet_exscan : crnet_scan;
    snprintf(what, sizeof what, "%s: NULL send", name);
    rc = fn(c, NULL, recv, 3, CRNET_INT32, CRNET_SUM);
    RECV_OK(nb);
    snprintf(what, sizeof what, "%s: NULL recv", name);
    rc = fn(c, send, NULL, 3, CRNET_INT32, CRNET_SUM);
    RECV_OK(0);
    snprintf(what, sizeof what, "%s: NULL recv, in place", name);
    rc = fn(c, CRNET_IN_PLACE, NULL, 3, CRNET_INT32, CRNET_SUM);
    RECV_OK(0);
    snprintf(what, sizeof what, "%s: count overflows", name);
    rc = fn(c, send, recv, SIZE_MAX / 4, CRNET_INT64, CRNET_SUM);
    RECV_OK(nb);
    for (size_t k = 0; k < 2; k++) {
      snprintf(what, sizeof what, "%s: datatype %d", name, (int)bad_dts[k]);
      rc = fn(c, send, recv, 3, bad_dts[k], CRNET_SUM);
      RECV_OK(nb);
    }
    snprintf(what, sizeof what, "%s: op -1", name);
    rc = fn(c, send, recv, 3, CRNET_INT32, -1);
    RECV_OK(nb);
    snprintf(what, sizeof what, "%s: op never created", name);
    rc = fn(c, send, recv, 3, CRNET_INT32, CRNET_OP_BUILTIN_COUNT + 1000);
    RECV_OK(nb);
    snprintf(what, sizeof what, "%s: BXOR on FLOAT", name);
    rc = fn(c, send, recv, 3, CRNET_FLOAT, CRNET_BXOR);
    RECV_OK(nb);
    snprintf(what, sizeof what, "%s: SUM on BYTE", name);
    rc = fn(c, send, recv, 3, CRNET_BYTE, CRNET_SUM);
    RECV_OK(nb);
    snprintf(what, sizeof what, "%s: NULL comm", name);
    rc = fn(NULL, send, recv, 3, CRNET_INT32, CRNET_SUM);
    expect_einval(st, what, rc, false, recv, before, nb);
  }

  /* alltoall */
  snprintf(what, sizeof what, "alltoall: NULL send");
  rc = crnet_alltoall(c, NULL, recv, 3, CRNET_INT32);
  RECV_OK(nb);
  snprintf(what, sizeof what, "alltoall: NULL recv");
  rc = crnet_alltoall(c, send, NULL, 3, CRNET_INT32);
  RECV_OK(0);
  snprintf(what, sizeof what, "alltoall: NULL recv, in place");
  rc = crnet_alltoall(c, CRNET_IN_PLACE, NULL, 3, CRNET_INT32);
  RECV_OK(0);
  snprintf(what, sizeof what, "alltoall: count overflows");
  rc = crnet_alltoall(c, send, recv, SIZE_MAX / 2, CRNET_INT32);
  RECV_OK(nb);
  /* count · 8 fits, count · p · 8 does not (for p > 1). */
  snprintf(what, sizeof what, "alltoall: count times p overflows");
  rc = crnet_alltoall(c, send, recv, SIZE_MAX / 8 / (size_t)p + 1, CRNET_INT64);
  RECV_OK(nb);
  for (size_t k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "alltoall: datatype %d", (int)bad_dts[k]);
    rc = crnet_alltoall(c, send, recv, 3, bad_dts[k]);
    RECV_OK(nb);
  }
  snprintf(what, sizeof what, "alltoall: NULL comm");
  rc = crnet_alltoall(NULL, send, recv, 3, CRNET_INT32);
  expect_einval(st, what, rc, false, recv, before, nb);

  /* schedules: unknown names, and every (schedule, collective) pair our
   * table says cannot be */
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    crnet_collective coll = (crnet_collective)k;
    snprintf(what, sizeof what, "set_schedule(%s, \"no-such-schedule\")",
             crnet_collective_name(coll));
    rc = crnet_comm_set_schedule(c, coll, "no-such-schedule");
    expect_einval(st, what, rc, true, NULL, NULL, 0);
    for (size_t si = 0; si < NSCHEDULES; si++) {
      if (can(&schedules[si], coll))
        continue;
      rc = crnet_comm_set_schedule(c, coll, schedules[si].name);
      if (rc != CRNET_EUNSUPPORTED)
        report(st, "misuse: set_schedule(%s, \"%s\"): returned %s, expected "
                   "EUNSUPPORTED",
               crnet_collective_name(coll), schedules[si].name,
               crnet_err_name(rc));
      else if (crnet_comm_errmsg(c)[0] == '\0')
        report(st, "misuse: set_schedule(%s, \"%s\"): EUNSUPPORTED without "
                   "a reason",
               crnet_collective_name(coll), schedules[si].name);
      else
        st->cases++;
    }
  }
  snprintf(what, sizeof what, "set_schedule(NULL name)");
  rc = crnet_comm_set_schedule(c, CRNET_COLL_ALLGATHER, NULL);
  expect_einval(st, what, rc, true, NULL, NULL, 0);
  snprintf(what, sizeof what, "set_schedule(collective out of range)");
  rc = crnet_comm_set_schedule(c, CRNET_COLL_COUNT, "auto");
  expect_einval(st, what, rc, true, NULL, NULL, 0);
  snprintf(what, sizeof what, "set_schedule(NULL comm)");
  rc = crnet_comm_set_schedule(NULL, CRNET_COLL_BCAST, "auto");
  expect_einval(st, what, rc, false, NULL, NULL, 0);
#undef RECV_OK

  free(huge);
  free(three);
  free(before);
  free(recv);
}

/* The choices made before the misuse checks, one schedule per collective,
 * which the refused choices there must leave in place. */
static const struct {
  crnet_collective coll;
  const char *name;
} final_choice[] = {
    {CRNET_COLL_REDUCE_SCATTER, "ring"},
    {CRNET_COLL_ALLGATHER, "hypercube"},
    {CRNET_COLL_BCAST, "circulant-sqrt"},
    {CRNET_COLL_REDUCE, "rabenseifner"},
    {CRNET_COLL_SCAN, "hypercube"},
    {CRNET_COLL_ALLTOALL, "pairwise"},
    {CRNET_COLL_BARRIER, "circulant-doubling"},
};
#define NFINAL (sizeof final_choice / sizeof final_choice[0])

static const struct schedule *schedule_named(const char *name) {
  for (size_t s = 0; s < NSCHEDULES; s++)
    if (strcmp(schedules[s].name, name) == 0)
      return &schedules[s];
  abort();
}

static void choose_final(struct state *st) {
  for (size_t k = 0; k < NFINAL; k++) {
    int rc = crnet_comm_set_schedule(st->comm, final_choice[k].coll,
                                     final_choice[k].name);
    if (rc != 0) {
      char what[128];
      snprintf(what, sizeof what, "crnet_comm_set_schedule(%s, \"%s\")",
               crnet_collective_name(final_choice[k].coll),
               final_choice[k].name);
      report_rc(st, what, rc);
      st->broken = true; /* the checks below would expect other schedules */
    }
  }
}

/* Makes the label name the schedule chosen before misuse for coll. */
static void after_misuse(struct state *st, crnet_collective coll, char *buf,
                         size_t cap) {
  for (size_t k = 0; k < NFINAL; k++)
    if (final_choice[k].coll == coll) {
      st->s = schedule_named(final_choice[k].name);
      snprintf(buf, cap, "%s (after misuse)", final_choice[k].name);
      st->sched = buf;
      return;
    }
  abort();
}

/* After misuse every collective must still work, on the schedule chosen
 * before it (refused choices change nothing). The non-commutative
 * reduce-scatter shows that "ring" is still the choice there: at p >= 4 it
 * must be refused, where auto would succeed. */
static void check_still_usable(struct state *st, crnet_op nc) {
  size_t count = (size_t)st->p + 1;
  size_t *zero = xmalloc(sizeof(size_t) * (size_t)st->p);
  size_t *block = xmalloc(sizeof(size_t) * (size_t)st->p);
  char name[64];
  for (int r = 0; r < st->p; r++) {
    zero[r] = 0;
    block[r] = count;
  }
  after_misuse(st, CRNET_COLL_REDUCE_SCATTER, name, sizeof name);
  rs_case(st, &variants[0], zero, false, false, "all zero");
  if (!stopped(st))
    rs_case(st, &variants[10], block, true, false, NULL);
  if (!stopped(st))
    noncomm_rs(st, nc, block, true, false, NULL);
  free(block);
  free(zero);
  after_misuse(st, CRNET_COLL_ALLGATHER, name, sizeof name);
  if (!stopped(st))
    allgather_case(st, CRNET_INT64, count, false);
  after_misuse(st, CRNET_COLL_BCAST, name, sizeof name);
  if (!stopped(st))
    bcast_case(st, CRNET_DOUBLE, count, st->p - 1);
  after_misuse(st, CRNET_COLL_REDUCE, name, sizeof name);
  if (!stopped(st))
    reduce_case(st, &variants[1], count, 0, false, false);
  after_misuse(st, CRNET_COLL_SCAN, name, sizeof name);
  if (!stopped(st))
    scan_case(st, &variants[2], count, false, false);
  if (!stopped(st))
    scan_case(st, &variants[8], count, true, true);
  if (!stopped(st))
    noncomm_scan(st, nc, count, true, false);
  after_misuse(st, CRNET_COLL_ALLTOALL, name, sizeof name);
  if (!stopped(st))
    alltoall_case(st, CRNET_INT32, count, false);
  if (!stopped(st)) {
    int rc = crnet_barrier(st->comm);
    if (rc != 0)
      report_rc(st, "barrier after misuse", rc);
    else if (crnet_comm_errmsg(st->comm)[0] != '\0')
      report(st, "barrier after misuse: succeeded but errmsg says '%s'",
             crnet_comm_errmsg(st->comm));
    else
      st->cases++;
  }
  st->sched = "-";
}

/* Every rank's hash must be the same: compare the MAX and the MIN over
 * ranks with our own. */
static bool agree(struct state *st, uint64_t mine, const char *what) {
  uint64_t hi = 0, lo = 0;
  int rc = crnet_allreduce(st->comm, &mine, &hi, 1, CRNET_UINT64, CRNET_MAX);
  if (rc == 0)
    rc = crnet_allreduce(st->comm, &mine, &lo, 1, CRNET_UINT64, CRNET_MIN);
  if (rc != 0) {
    report_rc(st, what, rc);
    return false;
  }
  return hi == mine && lo == mine;
}

static void check_hash_agreement(struct state *st) {
  if (!agree(st, st->hash, "hash agreement"))
    report(st, "replicated results differ between ranks: my hash %016" PRIx64,
           st->hash);
  else
    st->cases++;
}

/* One CLOCK_MONOTONIC for all ranks if they all run under one boot. */
static void probe_clock(struct state *st) {
  char id[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  uint64_t h;
  if (f != NULL) {
    if (fgets(id, sizeof id, f) == NULL)
      id[0] = '\0';
    fclose(f);
  }
  h = id[0] != '\0' ? hash_bytes(1, id, strlen(id)) : (uint64_t)st->rank + 2;
  st->same_clock = agree(st, h, "clock probe") && id[0] != '\0';
}

static void setup_lists(struct state *st) {
  int p = st->p;
  size_t cand[] = {0, 1, (size_t)p - 1, (size_t)p, (size_t)p + 1, LARGE_COUNT};
  int rcand[4] = {0, 1, p / 2, p - 1};
  st->ncounts = 0;
  for (size_t k = 0; k < sizeof cand / sizeof cand[0]; k++) {
    bool dup = false;
    for (size_t j = 0; j < st->ncounts; j++)
      dup = dup || st->counts[j] == cand[k];
    if (!dup)
      st->counts[st->ncounts++] = cand[k];
  }
  st->nroots = 0;
  if (p <= MAX_ROOTS_ALL) {
    for (int r = 0; r < p; r++)
      st->roots[st->nroots++] = r;
  } else {
    for (int k = 0; k < 4; k++)
      st->roots[st->nroots++] = rcand[k];
  }
}

int main(void) {
  struct state st = {.hash = UINT64_C(0xcbf29ce484222325), .sched = "-"};
  const char *corrupt = getenv("COLL_CHECK_CORRUPT");
  uint64_t failures, total = 0;
  crnet_op nc;
  int rc;

  st.corrupt_rank = corrupt != NULL && *corrupt != '\0' ? atoi(corrupt) : -1;
  rc = crnet_comm_init(&st.comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "coll_check: crnet_comm_init: %s: %s\n",
            crnet_strerror(rc), crnet_init_errmsg());
    return 1;
  }
  st.rank = crnet_comm_rank(st.comm);
  st.p = crnet_comm_size(st.comm);
  if (st.p > 16 * 1024) {
    fprintf(stderr, "coll_check: p = %d is more than this program handles\n",
            st.p);
    crnet_comm_destroy(st.comm);
    return 1;
  }
  for (size_t k = 0; k < NDATATYPES; k++)
    if (crnet_datatype_size(datatypes[k]) != esize(datatypes[k]))
      report(&st, "crnet_datatype_size(%s) = %zu, expected %zu",
             crnet_datatype_name(datatypes[k]),
             crnet_datatype_size(datatypes[k]), esize(datatypes[k]));
  if (!schedule_list_valid()) {
    report(&st, "COLL_CHECK_SCHEDULES='%s' names a schedule not in the table",
           getenv("COLL_CHECK_SCHEDULES"));
    st.broken = true;
  }
  setup_lists(&st);
  build_reference(&st);
  probe_clock(&st);

  rc = crnet_op_create(&nc, affine_fn, &user_ctx_tag, 0);
  if (rc != 0) {
    report(&st, "crnet_op_create (non-commutative): %s", crnet_err_name(rc));
    st.broken = true;
  }
  for (size_t s = 0; s < NSCHEDULES && !stopped(&st); s++)
    if (schedule_wanted(schedules[s].name))
      run_schedule(&st, &schedules[s], nc);
  st.sched = "-";
  if (!stopped(&st))
    choose_final(&st);
  if (!stopped(&st))
    check_misuse(&st);
  if (!stopped(&st))
    check_still_usable(&st, nc);
  if (!st.broken && (rc = crnet_op_free(&nc)) != 0)
    report(&st, "crnet_op_free: %s", crnet_err_name(rc));
  if (!stopped(&st))
    check_hash_agreement(&st);
  free_reference(&st);

  if (stopped(&st)) {
    /* The other ranks may be waiting in a call we will never make: make
     * theirs fail now instead of at their timeout. */
    if (crnet_comm_abort_code(st.comm) == 0)
      crnet_comm_abort(st.comm, 1);
    crnet_comm_destroy(st.comm);
    return 1;
  }

  /* Failures short of stopping are known only locally: share the count. */
  failures = st.failures;
  rc = crnet_allreduce(st.comm, &failures, &total, 1, CRNET_UINT64, CRNET_SUM);
  if (rc != 0) {
    report_rc(&st, "failure count", rc);
    crnet_comm_destroy(st.comm);
    return 1;
  }
  rc = crnet_comm_destroy(st.comm);
  if (rc != 0) {
    fprintf(stderr, "coll_check: rank %d: FAIL: crnet_comm_destroy: %s\n",
            st.rank, crnet_err_name(rc));
    return 1;
  }
  st.cases++;
  if (total != 0) {
    if (st.rank == 0)
      fprintf(stderr, "coll_check: p=%d: %" PRIu64 " failures\n", st.p, total);
    return 1;
  }
  if (st.rank == 0)
    printf("coll_check: p=%d: %lu cases passed\n", st.p, st.cases);
  return 0;
}
