/* soak: thousands of random collectives and messages between real
 * processes, every result checked exactly.
 *
 *   crlaunch -n P ./soak [--count N | --minutes M] [--seed S]
 *                        [--max-bytes B] [--in-flight K] [--trace]
 *
 * Where coll_check walks a fixed matrix, this program draws its calls at
 * random, so that a long run meets combinations no table lists: a schedule
 * chosen for one collective meeting the call sequence number of another, a
 * large message right after an empty one, a user operator after a built-in
 * one on the same link, and so on.
 *
 * Every rank draws the same sequence of decisions from one generator seeded
 * with --seed (default: rank 0's clock, sent to everyone), and rank 0 prints
 * the seed first, so that any failure can be replayed with the same seed and
 * the same P. Each step picks
 *
 *   comm        the world, or (half the steps while there are any) one of
 *               the sub-communicators alive: every so often the program
 *               splits a comm (drawn colors, some CRNET_UNDEFINED, and
 *               keys, ties and negative ones among them), dups one, or
 *               destroys one (soak_comms.c). A step on a sub-comm is run
 *               by its ranks, with their ranks and size there; the others
 *               skip it
 *   collective  allreduce, reduce_scatter_block, reduce_scatter (irregular
 *               counts, some zero), scan, exscan, alltoall, allgather,
 *               bcast, reduce, barrier, gather, scatter, allgatherv
 *               (irregular counts, some zero, each rank's blocks at
 *               displacements of its own: NULL, packed, or out of order
 *               with gaps), alltoallv (a matrix of counts, zeros among
 *               them, each rank's own displacements on both sides, the
 *               same three ways, send blocks now and then overlapping), or
 *               messages between ranks (p2p: soak_p2p.c says how)
 *   schedule    one this program's own table (below, from
 *               docs/SCHEDULES.md) says can do the collective, or auto,
 *               set with crnet_comm_set_schedule on every rank of the comm
 *               alike
 *   count       0 (5 %), 1..8 (30 %), 9..300 (35 %), 301..5000 (20 %), or up
 *               to --max-bytes per rank buffer (10 %; default 4 MiB), often
 *               odd
 *   operator    sum, prod, min, max, band, bor, bxor, land, lor, a
 *               commutative user operator and a non-commutative one
 *   datatype    one the operator can reduce (byte only for data movement and
 *               the commutative user operator)
 *   in place    30 % of the calls that allow it (reduce, gather, scatter:
 *               the root's); roots at random
 *
 * Inputs are a hash of (seed, step, rank, index), shaped per operator so
 * that the exact result is a value every datatype holds exactly in any
 * order of evaluation (sums of integers within 2^11 / p for float16, and so
 * on; products of +-1 with at most one 2 or 3 per element; logical inputs
 * with zeros at a rate of 1/(p+1)). Every rank computes, for itself, every
 * rank's inputs for the elements it receives and so the exact result, and
 * compares bitwise: integers, floats, NaN patterns moved by alltoall,
 * allgather and bcast, everything. The non-commutative operator composes
 * affine maps x -> a*x + b modulo 2^32 in rank order; a schedule that
 * reorders operands must refuse it (CRNET_EUNSUPPORTED), and then the step
 * falls back to auto and counts the refusal; hypercube all-to-all when p is
 * not a power of two must be refused when it is chosen
 * (crnet_comm_set_schedule), and the step runs on auto. Any other refusal
 * is a failure. (On a sub-comm, p and the ranks are the comm's.)
 *
 * Each call is also checked for: send buffer unchanged (a scatter root's
 * in place too), 32 guard bytes on either side of every buffer untouched,
 * every result element written (the receive buffer starts as the
 * complement of the result), the gaps around allgatherv's and alltoallv's
 * blocks untouched, rank 0's exscan buffer and a non-root's reduce and
 * gather buffer untouched, and a refused call leaving the receive buffer
 * as it was. Results every rank of a comm holds alike (allreduce,
 * allgather, bcast, allgatherv's blocks) feed a hash of the comm: the
 * world's, which an allreduce of {hash, ~hash} with MAX compares across
 * ranks every SYNC_EVERY steps (at the same point rank 0 broadcasts
 * whether --minutes are up, so that every rank stops after the same step),
 * and a sub-comm's, compared the same way on it before it is destroyed.
 *
 * At the end rank 0 prints one line: p, seed, steps, seconds, the count per
 * collective (p2p: steps of messages), in-place calls, user-operator calls,
 * refusals, the messages (of them: rendezvous, with a wildcard, truncated,
 * in a sendrecv), the comms split off, dupped and destroyed and the steps
 * on them, MiB moved (the sum over steps of one rank's largest buffer: the
 * m of the cost model; p2p: the largest message), and failures summed over
 * all ranks. A wrong result is reported at once on stderr naming seed,
 * step, collective, schedule, datatype, operator, count, root, in place,
 * the comm, rank, first wrong index, expected and got; the program exits 1
 * if any rank saw one (after MAX_REPORTS reports, or on any error of the
 * communicator, the rank aborts the job so the others stop fast).
 *
 * In flight (--in-flight K, 2 to 64; default 1, every call blocking as
 * above), the same calls, drawn in the same order, are started in batches
 * of K with the nonblocking crnet_iX and completed in orders that differ
 * from rank to rank; soak_inflight.c holds that mode and says how. The
 * last line then adds rank 0's counts: calls started, blocking calls
 * between starts, completions (of requests) by each way, callbacks.
 *
 * The files: this one (the program, the draws, the values and the
 * checks of the collectives), soak_calls.c (the calls and the buffers of
 * allgatherv and alltoallv), soak_p2p.c, soak_comms.c, soak_inflight.c;
 * soak.h is what they share.
 *
 * The schedules, per docs/SCHEDULES.md's table:
 *   allreduce       circulant, circulant-doubling, circulant-linear,
 *                   circulant-sqrt, ring, hypercube, rabenseifner, star,
 *                   allgather-reduce
 *   reduce_scatter  circulant, circulant-doubling, circulant-linear,
 *                   circulant-sqrt, ring, rabenseifner
 *   scan            circulant, ring, hypercube
 *   alltoall        ring, hypercube (p a power of two), pairwise, bruck
 *   allgather       the four circulants, ring, hypercube, star
 *   bcast           the four circulants, ring, hypercube
 *   reduce          the four circulants, ring, rabenseifner
 *   barrier         the four circulants
 *   gather, scatter binomial, linear
 *   allgatherv      the allgather schedules (CRNET_COLL_ALLGATHER's choice)
 *   alltoallv       pairwise, ring
 *   and auto everywhere. Keep rank order with a non-commutative operator:
 *   circulant-linear, hypercube, rabenseifner, star, allgather-reduce,
 *   circulant, ring in scan; others may refuse.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crnet.h"
#include "soak.h"

#define SYNC_EVERY 8
#define MAX_REPORTS 10
#define DEFAULT_MAX_BYTES (4u << 20)
#define PROGRESS_EVERY_S 60

/* --- what a step can be --------------------------------------------------- */

static const char *const kind_name[K_COUNT] = {
    "allreduce", "reduce_scatter_block", "reduce_scatter", "scan", "exscan",
    "alltoall",  "allgather",            "bcast",          "reduce",
    "barrier",   "gather",               "scatter",        "allgatherv",
    "alltoallv", "p2p"};

/* K_P2P has none: CRNET_COLL_COUNT. */
static const crnet_collective kind_coll[K_COUNT] = {
    CRNET_COLL_ALLREDUCE, CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_REDUCE_SCATTER,
    CRNET_COLL_SCAN,      CRNET_COLL_SCAN,           CRNET_COLL_ALLTOALL,
    CRNET_COLL_ALLGATHER, CRNET_COLL_BCAST,          CRNET_COLL_REDUCE,
    CRNET_COLL_BARRIER,   CRNET_COLL_GATHER,         CRNET_COLL_SCATTER,
    CRNET_COLL_ALLGATHER, CRNET_COLL_ALLTOALLV,      CRNET_COLL_COUNT};

static bool kind_reduces(enum kind k) {
  return k == K_ALLREDUCE || k == K_RSB || k == K_RS || k == K_SCAN ||
         k == K_EXSCAN || k == K_REDUCE;
}

/* Schedules per collective (NULL-terminated), "auto" first. */
static const char *const *schedules_of(crnet_collective coll) {
  static const char *const allreduce[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", "ring", "hypercube", "rabenseifner", "star",
      "allgather-reduce", NULL};
  static const char *const reduce_scatter[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", "ring", "rabenseifner", NULL};
  static const char *const scan[] = {"auto", "circulant", "ring", "hypercube",
                                     NULL};
  static const char *const alltoall[] = {"auto", "ring", "hypercube",
                                         "pairwise", "bruck", NULL};
  static const char *const allgather[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", "ring", "hypercube", "star", NULL};
  static const char *const bcast[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", "ring", "hypercube", NULL};
  static const char *const reduce[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", "ring", "rabenseifner", NULL};
  static const char *const barrier[] = {
      "auto", "circulant", "circulant-doubling", "circulant-linear",
      "circulant-sqrt", NULL};
  static const char *const rooted[] = {"auto", "binomial", "linear", NULL};
  static const char *const alltoallv[] = {"auto", "pairwise", "ring", NULL};
  switch (coll) {
  case CRNET_COLL_ALLREDUCE:
    return allreduce;
  case CRNET_COLL_REDUCE_SCATTER:
    return reduce_scatter;
  case CRNET_COLL_SCAN:
    return scan;
  case CRNET_COLL_ALLTOALL:
    return alltoall;
  case CRNET_COLL_ALLGATHER:
    return allgather;
  case CRNET_COLL_BCAST:
    return bcast;
  case CRNET_COLL_REDUCE:
    return reduce;
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    return rooted;
  case CRNET_COLL_ALLTOALLV:
    return alltoallv;
  default:
    return barrier;
  }
}
/* Operators: the built-ins, then our two user operators. */
enum { OP_USER_COMM = CRNET_OP_BUILTIN_COUNT, OP_USER_NONCOMM, OP_KINDS };

static const char *const op_label[OP_KINDS] = {
    "sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor",
    "user-commutative", "user-noncommutative"};

static bool is_int(crnet_datatype dt) { return dt <= CRNET_UINT64; }
static bool is_signed(crnet_datatype dt) { return dt <= CRNET_INT64; }
static bool is_float(crnet_datatype dt) {
  return dt >= CRNET_FLOAT16 && dt <= CRNET_DOUBLE;
}

/* Whether our test uses operator kind `o` with dt. */
static bool op_takes(int o, crnet_datatype dt) {
  switch (o) {
  case CRNET_BAND:
  case CRNET_BOR:
  case CRNET_BXOR:
    return is_int(dt);
  case OP_USER_COMM:
    return is_int(dt) || dt == CRNET_BYTE;
  case OP_USER_NONCOMM:
    return dt == CRNET_UINT64 || dt == CRNET_INT64;
  default:
    return is_int(dt) || is_float(dt);
  }
}

/* --- hashing and the decision stream ------------------------------------- */

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t rng_state;

uint64_t rng(void) {
  rng_state += GOLDEN;
  return mix(rng_state);
}

uint64_t below(uint64_t n) { return n == 0 ? 0 : rng() % n; }

/* The in-flight mode's generators (struct gen, soak.h) step like rng, each
 * on a state of its own, so that step n is the same call whatever
 * --in-flight is. */
static uint64_t gen_next(gen *g) {
  g->state += GOLDEN;
  return mix(g->state);
}

uint64_t gen_below(gen *g, uint64_t n) {
  return n == 0 ? 0 : gen_next(g) % n;
}

/* --- user operators -------------------------------------------------------- */

static int user_ctx_tag;
/* Atomic: with calls in flight the operators may run on the progress
 * thread. */
static atomic_int user_misuse;

/* x (+) y = x + y + x*y modulo 2^w: (1+x)(1+y) - 1, commutative and
 * associative. */
static uint64_t comm_combine(uint64_t x, uint64_t y) { return x + y + x * y; }

static void user_comm_fn(const void *in, void *inout, size_t count,
                         crnet_datatype dt, void *ctx) {
  if (ctx != &user_ctx_tag || !(is_int(dt) || dt == CRNET_BYTE)) {
    atomic_store(&user_misuse, 1);
    return;
  }
  switch (crnet_datatype_size(dt)) {
  case 1:
    for (size_t i = 0; i < count; i++)
      ((uint8_t *)inout)[i] = (uint8_t)comm_combine(((const uint8_t *)in)[i],
                                                    ((uint8_t *)inout)[i]);
    break;
  case 2:
    for (size_t i = 0; i < count; i++)
      ((uint16_t *)inout)[i] = (uint16_t)comm_combine(
          ((const uint16_t *)in)[i], ((uint16_t *)inout)[i]);
    break;
  case 4:
    for (size_t i = 0; i < count; i++)
      ((uint32_t *)inout)[i] = (uint32_t)comm_combine(
          ((const uint32_t *)in)[i], ((uint32_t *)inout)[i]);
    break;
  default:
    for (size_t i = 0; i < count; i++)
      ((uint64_t *)inout)[i] =
          comm_combine(((const uint64_t *)in)[i], ((uint64_t *)inout)[i]);
  }
}

/* x -> a*x + b modulo 2^32, packed a << 32 | b: `first` is applied first
 * (it holds the lower ranks), then `second`. Not commutative. */
static uint64_t affine_then(uint64_t first, uint64_t second) {
  uint32_t a1 = (uint32_t)(first >> 32), b1 = (uint32_t)first;
  uint32_t a2 = (uint32_t)(second >> 32), b2 = (uint32_t)second;
  return (uint64_t)(uint32_t)(a1 * a2) << 32 | (uint32_t)(a2 * b1 + b2);
}

static void user_noncomm_fn(const void *in, void *inout, size_t count,
                            crnet_datatype dt, void *ctx) {
  if (ctx != &user_ctx_tag || (dt != CRNET_UINT64 && dt != CRNET_INT64)) {
    atomic_store(&user_misuse, 1);
    return;
  }
  for (size_t i = 0; i < count; i++)
    ((uint64_t *)inout)[i] =
        affine_then(((const uint64_t *)in)[i], ((uint64_t *)inout)[i]);
}

/* --- values ---------------------------------------------------------------- */

size_t width(crnet_datatype dt) { return crnet_datatype_size(dt); }

/* Sign- or zero-extends the low w bytes of x. */
static int64_t extend(uint64_t x, crnet_datatype dt) {
  unsigned bits = 8 * (unsigned)width(dt);
  if (bits == 64)
    return (int64_t)x;
  x &= (UINT64_C(1) << bits) - 1;
  if (is_signed(dt) && (x >> (bits - 1)) != 0)
    x |= ~((UINT64_C(1) << bits) - 1);
  return (int64_t)x;
}

/* The largest magnitude a sum of p values may have in dt without overflow
 * or rounding, divided by p: the input range. */
static int64_t sum_range(crnet_datatype dt, int p) {
  int64_t top;
  switch (dt) {
  case CRNET_INT8:
    top = 127;
    break;
  case CRNET_UINT8:
    top = 255;
    break;
  case CRNET_INT16:
    top = 32767;
    break;
  case CRNET_UINT16:
    top = 65535;
    break;
  case CRNET_INT32:
  case CRNET_UINT32:
    top = INT32_MAX;
    break;
  case CRNET_FLOAT16:
    top = 2048;
    break;
  case CRNET_BFLOAT16:
    top = 256;
    break;
  case CRNET_FLOAT:
    top = 1 << 24;
    break;
  case CRNET_DOUBLE:
    top = INT64_C(1) << 53;
    break;
  default:
    top = INT64_C(1) << 60;
  }
  return top / p;
}

/* Rank r's input element i, as a 64-bit integer (exact in dt). */
static int64_t value(const ctx *x, const step *s, int r, uint64_t i) {
  uint64_t h = mix(x->base[r] + i * GOLDEN);
  int64_t R;
  switch (s->opk) {
  case CRNET_SUM:
    R = sum_range(s->dt, s->q);
    if (is_signed(s->dt) || is_float(s->dt))
      return (int64_t)(h % (uint64_t)(2 * R + 1)) - R;
    return (int64_t)(h % (uint64_t)(R + 1));
  case CRNET_PROD: {
    /* One rank per element contributes 2 or 3, the others 1 (or -1). */
    int special = (int)(mix(s->salt ^ i) % (uint64_t)s->q);
    int64_t v = r == special ? 2 + (int64_t)((h >> 8) & 1) : 1;
    if ((is_signed(s->dt) || is_float(s->dt)) && (h & 1))
      v = -v;
    return v;
  }
  case CRNET_MIN:
  case CRNET_MAX:
    if (is_float(s->dt)) {
      R = s->dt == CRNET_BFLOAT16 ? 256 : 2048;
      return (int64_t)(h % (uint64_t)(2 * R + 1)) - R;
    }
    return extend(h, s->dt);
  case CRNET_LAND:
  case CRNET_LOR: {
    /* Rare zeros for land, rare nonzeros for lor, so that both results
     * occur; nonzero values are not only 1. */
    bool rare = (h >> 8) % (uint64_t)(s->q + 1) == 0;
    int64_t nz = 1 + (int64_t)(h % 7);
    if ((is_signed(s->dt) || is_float(s->dt)) && (h & 0x10000))
      nz = -nz;
    if (s->opk == CRNET_LAND)
      return rare ? 0 : nz;
    return rare ? nz : 0;
  }
  case OP_USER_NONCOMM:
    return (int64_t)(h | UINT64_C(1) << 32); /* a odd */
  default: /* bitwise, user commutative: any bits */
    return extend(h, s->dt);
  }
}

static bool less(int64_t a, int64_t b, crnet_datatype dt) {
  if (dt == CRNET_UINT64)
    return (uint64_t)a < (uint64_t)b;
  return a < b;
}

/* acc (lower ranks) (+) v. */
static int64_t combine(const step *s, int64_t acc, int64_t v) {
  switch (s->opk) {
  case CRNET_SUM:
    return (int64_t)((uint64_t)acc + (uint64_t)v);
  case CRNET_PROD:
    return (int64_t)((uint64_t)acc * (uint64_t)v);
  case CRNET_MIN:
    return less(v, acc, s->dt) ? v : acc;
  case CRNET_MAX:
    return less(acc, v, s->dt) ? v : acc;
  case CRNET_BAND:
    return acc & v;
  case CRNET_BOR:
    return acc | v;
  case CRNET_BXOR:
    return acc ^ v;
  case CRNET_LAND:
    return acc != 0 && v != 0;
  case CRNET_LOR:
    return acc != 0 || v != 0;
  case OP_USER_COMM:
    return (int64_t)comm_combine((uint64_t)acc, (uint64_t)v);
  default:
    return (int64_t)affine_then((uint64_t)acc, (uint64_t)v);
  }
}

/* The fold of ranks lo..hi-1 at element i (hi > lo). */
static int64_t fold(const ctx *x, const step *s, int lo, int hi, uint64_t i) {
  int64_t acc = value(x, s, lo, i);
  if (s->opk == CRNET_LAND || s->opk == CRNET_LOR)
    acc = acc != 0; /* one operand: still 0 or 1 */
  for (int r = lo + 1; r < hi; r++)
    acc = combine(s, acc, value(x, s, r, i));
  return acc;
}

/* IEEE binary16 of a float that holds an integer of magnitude <= 2048. */
static uint16_t to_f16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
  if ((b & 0x7fffffff) == 0)
    return sign;
  int e = (int)((b >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | (uint16_t)(e << 10) | ((b >> 13) & 0x3ff));
}

static void encode(crnet_datatype dt, int64_t v, void *dst) {
  switch (dt) {
  case CRNET_FLOAT16: {
    uint16_t h = to_f16((float)v);
    memcpy(dst, &h, 2);
    return;
  }
  case CRNET_BFLOAT16: {
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t h = (uint16_t)(b >> 16);
    memcpy(dst, &h, 2);
    return;
  }
  case CRNET_FLOAT: {
    float f = (float)v;
    memcpy(dst, &f, 4);
    return;
  }
  case CRNET_DOUBLE: {
    double d = (double)v;
    memcpy(dst, &d, 8);
    return;
  }
  default: { /* integers and bytes: the low bytes, little-endian host */
    uint64_t u = (uint64_t)v;
    memcpy(dst, &u, width(dt));
  }
  }
}

/* Bytes of rank r's data at byte offset k, for the collectives that only
 * move data: any bit pattern, NaNs included. */
void fill_bytes(const ctx *x, int r, uint64_t k, size_t len, uint8_t *dst) {
  for (size_t j = 0; j < len; j++) {
    uint64_t pos = k + j;
    uint64_t w = mix(x->base[r] + (pos >> 3) * GOLDEN);
    dst[j] = (uint8_t)(w >> (8 * (pos & 7)));
  }
}

/* Rank r's reduction inputs from element `from`, n of them, encoded. */
static void fill_values(const ctx *x, const step *s, int r, uint64_t from,
                        size_t n, uint8_t *dst) {
  size_t w = width(s->dt);
  for (size_t i = 0; i < n; i++)
    encode(s->dt, value(x, s, r, from + i), dst + i * w);
}

/* --- buffers with guards ----------------------------------------------------- */

void *xmalloc(size_t n) {
  void *q = malloc(n == 0 ? 1 : n);
  if (q == NULL) {
    fprintf(stderr, "soak: out of memory (%zu bytes)\n", n);
    exit(2);
  }
  return q;
}

void buf_make(buf *b, size_t len) {
  b->raw = xmalloc(len + 2 * GUARD);
  b->p = b->raw + GUARD;
  b->len = len;
  memset(b->raw, GUARD_BYTE, GUARD);
  memset(b->p + len, GUARD_BYTE, GUARD);
}

void buf_free(buf *b) {
  free(b->raw);
  b->raw = b->p = NULL;
}

bool guards_ok(const buf *b) {
  for (size_t i = 0; i < GUARD; i++)
    if (b->raw[i] != GUARD_BYTE || b->p[b->len + i] != GUARD_BYTE)
      return false;
  return true;
}

/* --- reporting --------------------------------------------------------------- */

static void describe(const ctx *x, const step *s, char *out, size_t n) {
  char on[96] = "";
  if (s->comm != 0) {
    const comm_slot *c = &x->comms[s->comm];
    snprintf(on, sizeof on, " on comm #%d (%d ranks, rank %d there)",
             s->comm_id, s->q, c->alive && c->id == s->comm_id ? c->rank : -1);
  }
  snprintf(out, n,
           "seed %" PRIu64 " p %d step %" PRIu64 " %s schedule %s dt %s op %s "
           "count %zu%s%s root %d%s%s%s%s",
           x->seed, x->wp, s->n, kind_name[s->kind], s->schedule,
           crnet_datatype_name(s->dt), kind_reduces(s->kind) ? op_label[s->opk] : "-", s->count,
           s->kind == K_RS || s->kind == K_ALLGATHERV || s->kind == K_ALLTOALLV
               ? " (irregular)"
               : s->kind == K_P2P ? " (messages)" : "",
           s->in_place ? " in place" : "", s->root, on,
           s->how != NULL ? " (" : "", s->how != NULL ? s->how : "",
           s->how != NULL ? ")" : "");
}

static void vreport(ctx *x, const char *d, const char *fmt, va_list ap) {
  char m[512];
  x->failures++;
  if (x->reports++ >= MAX_REPORTS)
    return;
  vsnprintf(m, sizeof m, fmt, ap);
  fprintf(stderr, "soak: FAIL rank %d: %s: %s\n", x->wrank, d, m);
  if (x->reports >= MAX_REPORTS) {
    fprintf(stderr, "soak: rank %d: %d failures reported, aborting the job\n",
            x->wrank, MAX_REPORTS);
    x->broken = true;
  }
}

void report(ctx *x, const step *s, const char *fmt, ...) {
  char d[448];
  va_list ap;
  describe(x, s, d, sizeof d);
  va_start(ap, fmt);
  vreport(x, d, fmt, ap);
  va_end(ap);
}

void report_at(ctx *x, const char *where, const char *fmt, ...) {
  char d[448];
  va_list ap;
  snprintf(d, sizeof d, "seed %" PRIu64 " p %d %s", x->seed, x->wp, where);
  va_start(ap, fmt);
  vreport(x, d, fmt, ap);
  va_end(ap);
}

void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", b[n - 1 - i]); /* as a little-endian number */
}

/* Compares n elements of width w: got against want; reports the first
 * difference. Returns whether they agree. */
static bool compare(ctx *x, const step *s, const char *what,
                    const uint8_t *got, const uint8_t *want, size_t n,
                    size_t w, uint64_t index_base) {
  if (memcmp(got, want, n * w) == 0)
    return true;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * w, want + i * w, w) != 0) {
      char e[40], g[40];
      hex(want + i * w, w, e);
      hex(got + i * w, w, g);
      report(x, s, "%s: first wrong element %" PRIu64 ": expected 0x%s, got 0x%s",
             what, index_base + i, e, g);
      break;
    }
  }
  return false;
}

static uint64_t fnv_more(uint64_t h, const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t fnv(const uint8_t *b, size_t n) {
  return fnv_more(1469598103934665603ull, b, n);
}

/* Into the world's hash, in step order. */
void mix_hash(ctx *x, uint64_t h, size_t n) {
  x->comms[0].shared_hash = mix(x->comms[0].shared_hash ^ h ^ n);
}

/* A result every rank of the step's comm holds alike, as the hash of n
 * bytes: the world's hash mixes them in step order; a sub-comm's adds
 * them, so that the order in which calls in flight complete on a rank
 * does not matter (its steps are compared when it is destroyed). */
void share(ctx *x, const step *s, uint64_t h, size_t n) {
  if (s->comm == 0)
    mix_hash(x, h, n);
  else
    x->comms[s->comm].shared_hash += mix(h ^ n ^ mix(s->n + 1));
}

/* --- one step --------------------------------------------------------------- */

static bool pow2(int p) { return (p & (p - 1)) == 0; }

/* Whether set_schedule must refuse the step's schedule at this p. */
static bool refused_at_p(const ctx *x, const step *s) {
  (void)x;
  return s->kind == K_ALLTOALL && strcmp(s->schedule, "hypercube") == 0 &&
         !pow2(s->q);
}

/* Whether a refusal of this call is what the documentation allows: a
 * non-commutative operator on a schedule that may reorder operands (every
 * schedule that does scan keeps rank order there). */
static bool refusal_allowed(const ctx *x, const step *s) {
  static const char *const reordering[] = {"circulant", "circulant-doubling",
                                           "circulant-sqrt", "ring"};
  (void)x;
  if (s->opk != OP_USER_NONCOMM || !kind_reduces(s->kind) ||
      s->kind == K_SCAN || s->kind == K_EXSCAN)
    return false;
  for (size_t i = 0; i < sizeof reordering / sizeof reordering[0]; i++)
    if (strcmp(s->schedule, reordering[i]) == 0)
      return true;
  return false;
}

void complement(uint8_t *dst, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = (uint8_t)~src[i];
}

/* The per-rank input bases of step s: value() and fill_bytes() read them,
 * so they are set again before a call in flight is checked. */
void set_bases(ctx *x, const step *s) {
  for (int r = 0; r <= s->q; r++)
    x->base[r] = mix(s->salt + (uint64_t)r * 0xd1b54a32d192ed03ull);
}

/* Sizes, the expected result, and the buffers filled for the call. */
void prepare(ctx *x, call_state *cs) {
  step *s = cs->s;
  const int p = s->q, me = x->rank;
  const size_t w = width(s->dt);
  const bool root = me == s->root;
  size_t send_elems = 0, recv_elems = 0, want_elems = 0, want_at = 0;
  uint64_t my_off = 0, total = 0;
  uint8_t *want;

  set_bases(x, s);
  cs->send_fill = SEND_UNCHECKED;
  cs->image = false;
  cs->arrays = NULL;
  cs->sendcounts = cs->sdispls = cs->recvcounts = cs->rdispls = NULL;
  cs->blk_at = cs->blk_len = NULL;
  cs->before = cs->want = NULL;
  cs->pr = NULL;
  cs->check_untouched = false;
  if (s->kind == K_P2P) {
    p2p_prepare(x, cs);
    return;
  }
  if (s->kind == K_ALLGATHERV || s->kind == K_ALLTOALLV) {
    prepare_vector(x, cs);
    return;
  }

  /* Sizes: send elements, recv elements, and which recv elements hold the
   * result (want_at, want_elems). */
  switch (s->kind) {
  case K_ALLREDUCE:
  case K_SCAN:
  case K_EXSCAN:
  case K_BCAST:
    send_elems = recv_elems = want_elems = s->count;
    break;
  case K_REDUCE:
    send_elems = recv_elems = s->count;
    want_elems = root ? s->count : 0;
    break;
  case K_RSB:
    send_elems = (size_t)p * s->count;
    recv_elems = s->in_place ? send_elems : s->count;
    want_elems = s->count;
    my_off = (uint64_t)me * s->count;
    break;
  case K_RS:
    for (int r = 0; r < p; r++) {
      if (r == me)
        my_off = total;
      total += s->counts[r];
    }
    send_elems = (size_t)total;
    recv_elems = s->in_place ? send_elems : s->counts[me];
    want_elems = s->counts[me];
    break;
  case K_ALLTOALL:
  case K_ALLGATHER:
    send_elems = s->kind == K_ALLTOALL ? (size_t)p * s->count : s->count;
    recv_elems = want_elems = (size_t)p * s->count;
    break;
  case K_GATHER:
    /* A non-root's recv is ignored: NULL, or a buffer left untouched. */
    send_elems = s->count;
    recv_elems = root || !s->null_recv ? (size_t)p * s->count : 0;
    want_elems = root ? recv_elems : 0;
    break;
  case K_SCATTER:
    /* A non-root's send is ignored: NULL, or a buffer left unchanged; the
     * root's recv in place is its block, left in send. */
    send_elems = root || !s->null_recv ? (size_t)p * s->count : 0;
    recv_elems = want_elems = root && s->in_place ? 0 : s->count;
    break;
  default:
    break;
  }
  cs->send_elems = send_elems;
  cs->recv_elems = recv_elems;
  cs->want_elems = want_elems;
  cs->want_at = want_at;

  /* The expected result. */
  want = cs->want = xmalloc(want_elems * w);
  switch (s->kind) {
  case K_ALLREDUCE:
  case K_RSB:
  case K_RS:
  case K_REDUCE:
    for (size_t i = 0; i < want_elems; i++)
      encode(s->dt, fold(x, s, 0, p, my_off + i), want + i * w);
    break;
  case K_SCAN:
    for (size_t i = 0; i < want_elems; i++)
      encode(s->dt, fold(x, s, 0, me + 1, i), want + i * w);
    break;
  case K_EXSCAN:
    if (me == 0) {
      /* Untouched: its input if in place, else what we put there. */
      if (s->in_place)
        fill_values(x, s, 0, 0, want_elems, want);
      else
        fill_bytes(x, p, 0, want_elems * w, want); /* base[p]: a pattern */
    } else {
      for (size_t i = 0; i < want_elems; i++)
        encode(s->dt, fold(x, s, 0, me, i), want + i * w);
    }
    break;
  case K_ALLTOALL:
    for (int j = 0; j < p; j++)
      fill_bytes(x, j, (uint64_t)me * s->count * w, s->count * w,
                 want + (size_t)j * s->count * w);
    break;
  case K_ALLGATHER:
  case K_GATHER:
    for (int j = 0; want_elems > 0 && j < p; j++)
      fill_bytes(x, j, 0, s->count * w, want + (size_t)j * s->count * w);
    break;
  case K_SCATTER:
    fill_bytes(x, s->root, (uint64_t)me * s->count * w, want_elems * w, want);
    break;
  case K_BCAST:
    fill_bytes(x, s->root, 0, s->count * w, want);
    break;
  default:
    break;
  }

  /* SOAK_CORRUPT=<rank>: that rank expects one wrong element, once, to
   * see the failure path work. */
  if (x->corrupt_rank == x->wrank && want_elems > 0 &&
      !(s->kind == K_REDUCE && !root)) {
    want[(want_elems / 2) * w] ^= 1;
    x->corrupt_rank = -1;
  }

  /* The buffers. */
  buf_make(&cs->sb, send_elems * w);
  buf_make(&cs->rb, recv_elems * w);
  uint8_t *sp = cs->sb.p, *rp = cs->rb.p;
  if (kind_reduces(s->kind))
    fill_values(x, s, me, 0, send_elems, sp);
  else if (s->kind == K_ALLTOALL || s->kind == K_ALLGATHER ||
           s->kind == K_GATHER || s->kind == K_SCATTER)
    fill_bytes(x, me, 0, send_elems * w, sp);
  else
    memset(sp, 0, send_elems * w); /* unused (bcast), but hashed in flight */
  /* recv: the complement of the result where the result goes, so that an
   * element never written shows; the input where in place. */
  if (recv_elems > 0)
    fill_bytes(x, p, 0, recv_elems * w, rp);
  if (s->in_place && s->kind == K_SCATTER) {
    /* nothing in recv: the root's block stays in send */
  } else if (s->in_place) {
    if (s->kind == K_ALLGATHER || s->kind == K_GATHER)
      memcpy(rp + (size_t)me * s->count * w, sp, s->count * w);
    else
      memcpy(rp, sp, send_elems * w);
  } else if (s->kind == K_BCAST) {
    if (root) /* its data, not want: SOAK_CORRUPT may have changed that */
      fill_bytes(x, s->root, 0, want_elems * w, rp);
    else
      complement(rp, want, want_elems * w);
  } else if (!(s->kind == K_EXSCAN && me == 0)) {
    complement(rp + want_at * w, want, want_elems * w);
  }
  if ((s->kind == K_ALLGATHER || s->kind == K_GATHER) && s->in_place)
    for (int j = 0; j < p; j++)
      if (j != me)
        complement(rp + (size_t)j * s->count * w,
                   want + (size_t)j * s->count * w, s->count * w);
  cs->check_untouched = (s->kind == K_REDUCE && !root) ||
                        (s->kind == K_GATHER && !root && recv_elems > 0);
  if (refusal_allowed(x, s) || cs->check_untouched) {
    cs->before = xmalloc(recv_elems * w);
    memcpy(cs->before, rp, recv_elems * w);
  }

  /* What the send buffer must still hold after the call. */
  if (kind_reduces(s->kind) && !s->in_place)
    cs->send_fill = SEND_VALUES;
  else if ((s->kind == K_ALLTOALL || s->kind == K_ALLGATHER ||
            s->kind == K_GATHER) && !s->in_place)
    cs->send_fill = SEND_BYTES;
  else if (s->kind == K_SCATTER)
    cs->send_fill = SEND_BYTES; /* the root's in place too */

  /* The arguments. */
  cs->send_arg = s->in_place ? CRNET_IN_PLACE : sp;
  cs->recv_arg = rp;
  if ((s->kind == K_REDUCE || s->kind == K_GATHER) && !root && s->null_recv)
    cs->recv_arg = NULL;
  if (s->kind == K_SCATTER) {
    cs->send_arg = !root && s->null_recv ? NULL : sp;
    cs->recv_arg = root && s->in_place ? CRNET_IN_PLACE : rp;
  }
}

/* Starts (blocking: runs) the call on the prepared buffers. */
int go(ctx *x, call_state *cs, crnet_request **req) {
  return invoke(x, cs, req);
}

/* A call refused with CRNET_EUNSUPPORTED: whether the documentation allows
 * the refusal (else it is reported). */
bool refusal_ok(ctx *x, call_state *cs) {
  const size_t w = width(cs->s->dt);
  if (!refusal_allowed(x, cs->s)) {
    report(x, cs->s, "refused (%s) a call the documentation says it can do",
           crnet_comm_errmsg(x->comm));
    return false;
  }
  if (crnet_comm_errmsg(x->comm)[0] == '\0')
    report(x, cs->s, "refused without a reason");
  if (memcmp(cs->before, cs->rb.p, cs->recv_elems * w) != 0)
    report(x, cs->s, "refused, but wrote the receive buffer");
  x->refused++;
  return true;
}

/* After an allowed refusal: auto for the collective, on every rank alike,
 * for the call to be made again. */
int fall_back(ctx *x, call_state *cs) {
  int rc = crnet_comm_set_schedule(x->comm, kind_coll[cs->s->kind], "auto");
  if (rc == 0)
    cs->s->schedule = "auto (after a refusal)";
  return rc;
}

/* The checks of a call that returned 0. */
void check(ctx *x, call_state *cs) {
  step *s = cs->s;
  const int me = x->rank;
  const size_t w = width(s->dt);
  const size_t send_elems = cs->send_elems, recv_elems = cs->recv_elems;

  if (s->kind == K_P2P) {
    p2p_check(x, cs);
    return;
  }
  if (atomic_exchange(&user_misuse, 0))
    report(x, s, "a user operator was called with a wrong datatype or context");
  if (!guards_ok(&cs->sb) || !guards_ok(&cs->rb))
    report(x, s, "a guard byte around a buffer was overwritten");
  if (cs->send_fill != SEND_UNCHECKED && send_elems > 0) {
    uint8_t *orig = xmalloc(send_elems * w);
    if (cs->send_fill == SEND_VALUES)
      fill_values(x, s, me, 0, send_elems, orig);
    else
      fill_bytes(x, me, 0, send_elems * w, orig);
    if (memcmp(orig, cs->sb.p, send_elems * w) != 0)
      report(x, s, "the send buffer changed");
    free(orig);
  }
  if (cs->check_untouched) {
    if (memcmp(cs->before, cs->rb.p, recv_elems * w) != 0)
      report(x, s, "a non-root's receive buffer was written");
  } else if (cs->image) {
    compare_image(x, cs);
  } else if (s->kind != K_BARRIER) {
    compare(x, s, s->kind == K_EXSCAN && me == 0 ? "rank 0's buffer (untouched)"
                                                 : "result",
            cs->rb.p + cs->want_at * w, cs->want, cs->want_elems, w, 0);
  }
}

/* Whether the step's result is one every rank of its comm holds alike. */
bool shared_result(const step *s) {
  return s->kind == K_ALLREDUCE || s->kind == K_ALLGATHER ||
         s->kind == K_BCAST || s->kind == K_ALLGATHERV;
}

/* The hash of that result, and its bytes in *n: allgatherv's blocks in
 * rank order (each rank has its own gaps). */
uint64_t shared_digest(const call_state *cs, size_t *n) {
  const size_t w = width(cs->s->dt);
  uint64_t h = fnv(NULL, 0);
  if (!cs->image) {
    *n = cs->want_elems * w;
    return fnv(cs->rb.p, *n);
  }
  *n = 0;
  for (int j = 0; j < cs->s->q; j++) {
    h = fnv_more(h, cs->rb.p + cs->blk_at[j] * w, cs->blk_len[j] * w);
    *n += cs->blk_len[j] * w;
  }
  return h;
}

void free_expectations(call_state *cs) {
  free(cs->before);
  free(cs->want);
  cs->before = cs->want = NULL;
}

/* Everything the call held. */
void free_call(call_state *cs) {
  free_expectations(cs);
  if (cs->pr != NULL)
    p2p_free(cs);
  buf_free(&cs->sb);
  buf_free(&cs->rb);
  free(cs->arrays);
  cs->arrays = NULL;
}

void run_step(ctx *x, step *s) {
  call_state cs = {.s = s};
  int rc;

  use_comm(x, s->comm);
  prepare(x, &cs);
  if (s->kind == K_P2P) {
    p2p_run_blocking(x, &cs);
    if (!x->broken)
      p2p_check(x, &cs);
    goto out;
  }
  rc = go(x, &cs, NULL);
  if (rc == CRNET_EUNSUPPORTED) {
    if (!refusal_ok(x, &cs))
      goto out;
    rc = fall_back(x, &cs);
    if (rc == 0)
      rc = go(x, &cs, NULL);
  }
  if (rc != 0) {
    report(x, s, "returned %s: %s", crnet_err_name(rc),
           crnet_comm_errmsg(x->comm));
    x->broken = true;
    goto out;
  }
  check(x, &cs);
  if (shared_result(s)) {
    size_t n;
    uint64_t h = shared_digest(&cs, &n);
    share(x, s, h, n);
  }

out:
  free_call(&cs);
}

/* --- drawing a step ------------------------------------------------------- */

static size_t draw_count(const ctx *x, size_t per_rank_factor, size_t w) {
  size_t cap = x->max_bytes / (per_rank_factor * w);
  uint64_t d = below(100);
  size_t n;
  if (d < 5)
    n = 0;
  else if (d < 35)
    n = 1 + (size_t)below(8);
  else if (d < 70)
    n = 9 + (size_t)below(292);
  else if (d < 90)
    n = 301 + (size_t)below(4700);
  else
    n = cap > 0 ? 1 + (size_t)below(cap) : 0;
  if (below(4) == 0)
    n |= 1; /* odd */
  return n < cap ? n : cap;
}

/* s->counts with room for n entries. */
size_t *step_counts(step *s, size_t n) {
  if (s->counts_cap < n) {
    free(s->counts);
    s->counts = xmalloc(sizeof *s->counts * n);
    s->counts_cap = n;
  }
  return s->counts;
}

/* total elements cut into p irregular blocks, some empty. */
static void cut(step *s, int p, size_t total) {
  uint64_t shape = below(4);
  size_t *c = step_counts(s, (size_t)p);
  for (int r = 0; r < p; r++)
    c[r] = 0;
  if (shape == 0) { /* everything in one block */
    c[below((uint64_t)p)] = total;
  } else {
    /* Random cuts; some blocks empty. */
    size_t left = total;
    for (int r = 0; r < p - 1; r++) {
      size_t n = below(3) == 0 ? 0 : (size_t)below(left / 2 + 2);
      if (n > left)
        n = left;
      c[r] = n;
      left -= n;
    }
    c[p - 1] = left;
  }
}

/* alltoallv's matrix: zeros, small and large blocks; s->count is the
 * largest a rank sends. */
static void draw_matrix(const ctx *x, step *s, size_t w) {
  const int p = s->q;
  const size_t cap = x->max_bytes / ((size_t)p * w);
  const uint64_t shape = below(8); /* 0: nothing at all; 1: sparse */
  size_t *m = step_counts(s, (size_t)p * p);
  s->count = 0;
  for (int i = 0; i < p; i++) {
    size_t row = 0;
    for (int j = 0; j < p; j++) {
      uint64_t d = below(100);
      size_t n;
      if (shape == 0 || d < (shape == 1 ? 90 : 25))
        n = 0;
      else if (d < 70)
        n = 1 + (size_t)below(16);
      else if (d < 93)
        n = 17 + (size_t)below(600);
      else
        n = cap > 0 ? 1 + (size_t)below(cap) : 0;
      m[(size_t)i * p + j] = n < cap ? n : cap;
      row += m[(size_t)i * p + j];
    }
    if (row > s->count)
      s->count = row;
  }
}

void draw(ctx *x, step *s) {
  static const int kind_weight[K_COUNT] = {4, 2, 2, 2, 2, 2, 2, 2, 2, 1,
                                           2, 2, 2, 2, 3};
  int sum = 0, pick;
  const char *const *list;
  size_t nlist = 0;

  s->comm = draw_comm(x);
  use_comm(x, s->comm);
  s->q = x->p;
  s->comm_id = x->comms[s->comm].id;
  const int p = s->q;
  for (int k = 0; k < K_COUNT; k++)
    sum += kind_weight[k];
  pick = (int)below((uint64_t)sum);
  for (int k = 0; k < K_COUNT; k++) {
    if (pick < kind_weight[k]) {
      s->kind = (enum kind)k;
      break;
    }
    pick -= kind_weight[k];
  }
  s->salt = mix(x->seed ^ mix(s->n + 1));
  if (s->kind == K_P2P) {
    s->schedule = "-";
    s->opk = CRNET_SUM;
    s->op = CRNET_SUM;
    s->dt = CRNET_BYTE;
    s->in_place = false;
    s->root = 0;
    s->null_recv = false;
    p2p_draw(x, s);
    return;
  }
  list = schedules_of(kind_coll[s->kind]);
  while (list[nlist] != NULL)
    nlist++;
  s->schedule = list[below(nlist)];

  if (kind_reduces(s->kind)) {
    do {
      s->opk = (int)below(OP_KINDS);
      s->dt = (crnet_datatype)below(CRNET_DATATYPE_COUNT);
    } while (!op_takes(s->opk, s->dt));
    s->op = s->opk == OP_USER_COMM      ? x->user_comm
            : s->opk == OP_USER_NONCOMM ? x->user_noncomm
                                        : (crnet_op)s->opk;
  } else {
    s->opk = CRNET_SUM;
    s->op = CRNET_SUM;
    s->dt = (crnet_datatype)below(CRNET_DATATYPE_COUNT);
  }
  const size_t w = width(s->dt);
  s->in_place = s->kind != K_BCAST && s->kind != K_BARRIER &&
                s->kind != K_ALLTOALLV && below(10) < 3;
  s->root = (int)below((uint64_t)p);
  s->null_recv = below(2) == 0;
  if ((s->kind == K_REDUCE || s->kind == K_GATHER || s->kind == K_SCATTER) &&
      s->in_place && x->rank != s->root)
    s->in_place = false; /* CRNET_IN_PLACE is for the root only */
  s->count = 0;
  switch (s->kind) {
  case K_RSB:
  case K_ALLTOALL:
  case K_ALLGATHER:
  case K_GATHER:
  case K_SCATTER:
    s->count = draw_count(x, (size_t)p, w);
    break;
  case K_RS:
  case K_ALLGATHERV: {
    size_t total = draw_count(x, 1, w);
    cut(s, p, total);
    s->count = total;
    break;
  }
  case K_ALLTOALLV:
    draw_matrix(x, s, w);
    break;
  case K_BARRIER:
    break;
  default:
    s->count = draw_count(x, 1, w);
  }
}

/* --- the program ------------------------------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void) {
  fprintf(stderr,
          "usage: soak [--count N | --minutes M] [--seed S] [--max-bytes B] "
          "[--in-flight K] [--trace]\n"
          "  --count N      run N steps (default 1000 without --minutes)\n"
          "  --minutes M    run until M minutes are up (rank 0 decides)\n"
          "  --seed S       the random sequence (default: from the clock)\n"
          "  --max-bytes B  largest buffer per rank (default %u)\n"
          "  --in-flight K  start K calls nonblocking, then complete them "
          "(1 to %d;\n"
          "                 default 1: every call blocking)\n"
          "  --trace        rank 0 prints every step before running it\n",
          DEFAULT_MAX_BYTES, MAX_IN_FLIGHT);
}

static bool parse_u64(const char *v, uint64_t *out) {
  char *end;
  if (v == NULL || v[0] == '\0' || v[0] == '-')
    return false;
  *out = strtoull(v, &end, 0);
  return *end == '\0';
}

/* Counts a step of the job (in flight: that started where it ran; alike on
 * every rank, whether it ran there or not, but in_place). */
void count_step(ctx *x, const step *s) {
  size_t w = width(s->dt);
  size_t m = s->count * w;
  x->steps++;
  x->per_kind[s->kind]++;
  x->in_place += s->in_place;
  x->user_calls += s->opk >= OP_USER_COMM && kind_reduces(s->kind);
  x->sub_steps += s->comm != 0;
  if (s->kind == K_RSB || s->kind == K_ALLTOALL || s->kind == K_ALLGATHER ||
      s->kind == K_GATHER || s->kind == K_SCATTER)
    m *= (size_t)s->q;
  if (s->kind == K_BARRIER)
    m = 0;
  if (s->kind == K_P2P)
    m = p2p_count(x, s);
  x->bytes += m;
}

/* Results held alike must be alike; then rank 0 says whether to stop.
 * Returns 1 to stop, 0 to go on, -1 if the communicator failed (said on
 * stderr). On the world. */
int sync_point(ctx *x, const step *s, uint64_t n, double minutes,
                      double t0, double *last_progress) {
  uint64_t h[2] = {x->comms[0].shared_hash, ~x->comms[0].shared_hash},
           hmax[2];
  int32_t stop = 0;
  int rc = crnet_allreduce(x->world, h, hmax, 2, CRNET_UINT64, CRNET_MAX);
  if (rc == 0 && (hmax[0] != h[0] || hmax[1] != h[1]))
    report(x, s, "results every rank should hold alike (allreduce, "
                 "allgather, bcast, allgatherv) differ between ranks by step "
                 "%" PRIu64,
           n);
  if (x->wrank == 0) {
    double t = now_s();
    stop = minutes > 0 && t - t0 >= minutes * 60;
    if (minutes > 0 && t - *last_progress >= PROGRESS_EVERY_S) {
      printf("soak: %" PRIu64 " steps, %.0f s, %" PRIu64 " failures here\n",
             x->steps, t - t0, x->failures);
      fflush(stdout);
      *last_progress = t;
    }
  }
  if (rc == 0)
    rc = crnet_bcast(x->world, &stop, 1, CRNET_INT32, 0);
  if (rc != 0) {
    fprintf(stderr, "soak: rank %d: sync after step %" PRIu64 ": %s: %s\n",
            x->wrank, n, crnet_err_name(rc), crnet_comm_errmsg(x->world));
    return -1;
  }
  return stop != 0;
}

void trace_step(const ctx *x, const step *s, const char *what) {
  char d[448];
  if (!x->trace || x->wrank != 0)
    return;
  describe(x, s, d, sizeof d);
  printf("soak: %s%s\n", what, d);
  fflush(stdout);
}

/* Sets the drawn schedule for the step's collective on its comm (the
 * current one; p2p has none): every schedule drawn can do it, says the
 * table above, but hypercube all-to-all at a p that is not a power of two,
 * which must be refused with a reason (the step then runs on auto). */
void set_schedule(ctx *x, step *s) {
  if (s->kind == K_P2P)
    return;
  int rc = crnet_comm_set_schedule(x->comm, kind_coll[s->kind], s->schedule);
  if (refused_at_p(x, s)) {
    if (rc != CRNET_EUNSUPPORTED ||
        strstr(crnet_comm_errmsg(x->comm), "power of two") == NULL) {
      report(x, s, "crnet_comm_set_schedule: %s (%s), but p = %d is not a "
                   "power of two",
             crnet_err_name(rc), crnet_comm_errmsg(x->comm), s->q);
      x->broken = true;
      return;
    }
    x->refused++;
    s->schedule = "auto (hypercube refused at this p)";
    rc = crnet_comm_set_schedule(x->comm, kind_coll[s->kind], "auto");
  }
  if (rc != 0) {
    report(x, s, "crnet_comm_set_schedule: %s: %s", crnet_err_name(rc),
           crnet_comm_errmsg(x->comm));
    x->broken = true;
  }
}

/* Every rank learns the sum of everyone's failures. */
static uint64_t total_failures(ctx *x) {
  uint64_t mine = x->failures, all = 0;
  if (crnet_allreduce(x->world, &mine, &all, 1, CRNET_UINT64, CRNET_SUM) != 0)
    return mine + 1;
  return all;
}

int main(int argc, char **argv) {
  ctx x = {0};
  uint64_t count = 0, seed = 0;
  double minutes = 0;
  bool have_seed = false, have_count = false;
  step s = {0};
  flight *fl = NULL;
  double t0, last_progress;
  int rc, status = 0;

  x.max_bytes = DEFAULT_MAX_BYTES;
  x.in_flight = 1;
  x.corrupt_rank = getenv("SOAK_CORRUPT") != NULL ? atoi(getenv("SOAK_CORRUPT"))
                                                  : -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t u;
    if (strcmp(a, "--count") == 0 && parse_u64(v, &count)) {
      have_count = true;
      i++;
    } else if (strcmp(a, "--minutes") == 0 && v != NULL &&
               (minutes = strtod(v, NULL)) > 0) {
      i++;
    } else if (strcmp(a, "--seed") == 0 && parse_u64(v, &seed)) {
      have_seed = true;
      i++;
    } else if (strcmp(a, "--max-bytes") == 0 && parse_u64(v, &u) && u >= 64) {
      x.max_bytes = (size_t)u;
      i++;
    } else if (strcmp(a, "--in-flight") == 0 && parse_u64(v, &u) && u >= 1 &&
               u <= MAX_IN_FLIGHT) {
      x.in_flight = (int)u;
      i++;
    } else if (strcmp(a, "--trace") == 0) {
      x.trace = true;
    } else {
      usage();
      return 2;
    }
  }
  if (!have_count && minutes <= 0)
    count = 1000;

  rc = crnet_comm_init(&x.world, NULL);
  if (rc != 0) {
    fprintf(stderr, "soak: init: %s: %s\n", crnet_err_name(rc),
            crnet_init_errmsg());
    return 1;
  }
  x.wp = crnet_comm_size(x.world);
  x.wrank = crnet_comm_rank(x.world);
  if (!have_seed)
    seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  /* Everyone runs rank 0's seed. */
  rc = crnet_bcast(x.world, &seed, 1, CRNET_UINT64, 0);
  if (rc != 0) {
    fprintf(stderr, "soak: rank %d: bcast of the seed: %s\n", x.wrank,
            crnet_comm_errmsg(x.world));
    crnet_comm_destroy(x.world);
    return 1;
  }
  x.seed = seed;
  rng_state = seed;
  /* In flight: the batches' shape alike on every rank, the order of
   * completion this rank's own. */
  x.shape.state = mix(seed ^ 0x7368617065ull);
  x.order.state = mix(seed ^ mix(0x6f72646572ull + (uint64_t)x.wrank));
  if (x.wrank == 0) {
    if (x.in_flight > 1)
      printf("soak: p %d seed %" PRIu64 " (replay: --seed %" PRIu64
             " --in-flight %d)\n",
             x.wp, seed, seed, x.in_flight);
    else
      printf("soak: p %d seed %" PRIu64 " (replay: --seed %" PRIu64 ")\n",
             x.wp, seed, seed);
    fflush(stdout);
  }
  if (crnet_op_create(&x.user_comm, user_comm_fn, &user_ctx_tag, 1) != 0 ||
      crnet_op_create(&x.user_noncomm, user_noncomm_fn, &user_ctx_tag, 0) !=
          0) {
    fprintf(stderr, "soak: crnet_op_create failed\n");
    crnet_comm_abort(x.world, 1);
    return 1;
  }
  /* base[p] is a pattern no rank sends: the receive buffers' filling. */
  x.base = xmalloc(sizeof *x.base * ((size_t)x.wp + 1));
  comms_init(&x);
  if (x.in_flight > 1)
    fl = flights_make(x.in_flight, x.wp);

  t0 = last_progress = now_s();
  if (x.in_flight > 1) {
    if (!soak_in_flight(&x, fl, &s, have_count, count, minutes, t0)) {
      crnet_comm_abort(x.world, 1);
      return 1;
    }
  } else {
    for (uint64_t n = 0; !have_count || n < count; n++) {
      comm_events(&x, n, NULL, NULL);
      if (x.broken) {
        crnet_comm_abort(x.world, 1);
        return 1;
      }
      s.n = n;
      draw(&x, &s);
      /* A step on a comm this rank is not in is the others' alone. */
      bool here = x.rank >= 0;
      if (here)
        set_schedule(&x, &s);
      trace_step(&x, &s, "");
      if (here && !x.broken)
        run_step(&x, &s);
      if (x.broken) {
        crnet_comm_abort(x.world, 1);
        return 1;
      }
      count_step(&x, &s);
      if (n % SYNC_EVERY == SYNC_EVERY - 1) {
        int stop = sync_point(&x, &s, n, minutes, t0, &last_progress);
        if (stop < 0) {
          crnet_comm_abort(x.world, 1);
          return 1;
        }
        if (stop)
          break;
      }
    }
  }
  comms_end(&x);
  if (x.broken) {
    crnet_comm_abort(x.world, 1);
    return 1;
  }

  uint64_t failures = total_failures(&x);
  double secs = now_s() - t0;
  if (x.wrank == 0) {
    printf("soak: p %d seed %" PRIu64 " steps %" PRIu64 " seconds %.1f", x.wp,
           x.seed, x.steps, secs);
    for (int k = 0; k < K_COUNT; k++)
      printf(" %s %" PRIu64, kind_name[k], x.per_kind[k]);
    printf(" in_place %" PRIu64 " user_op %" PRIu64 " refused %" PRIu64
           " messages %" PRIu64 " rendezvous %" PRIu64 " wildcard %" PRIu64
           " truncated %" PRIu64 " sendrecv %" PRIu64 " splits %" PRIu64
           " dups %" PRIu64 " destroyed %" PRIu64 " subcomm_steps %" PRIu64
           " MiB %.1f failures %" PRIu64,
           x.in_place, x.user_calls, x.refused, x.p2p_msgs, x.p2p_rdv,
           x.p2p_wild, x.p2p_trunc, x.p2p_sendrecv, x.splits, x.dups,
           x.freed, x.sub_steps, (double)x.bytes / (1024.0 * 1024.0),
           failures);
    if (x.in_flight > 1)
      printf(" in_flight %d started %" PRIu64 " blocking_between %" PRIu64
             " by_wait %" PRIu64 " by_test %" PRIu64 " by_waitany %" PRIu64
             " by_waitall %" PRIu64 " callbacks %" PRIu64,
             x.in_flight, x.started, x.between, x.by_wait, x.by_test,
             x.by_waitany, x.by_waitall, x.callbacks);
    printf("\n");
    fflush(stdout);
  }
  if (failures != 0)
    status = 1;
  crnet_op_free(&x.user_comm);
  crnet_op_free(&x.user_noncomm);
  rc = crnet_comm_destroy(x.world);
  if (rc != 0) {
    fprintf(stderr, "soak: rank %d: destroy: %s\n", x.wrank,
            crnet_err_name(rc));
    status = 1;
  }
  free(x.base);
  free(s.counts);
  p2p_plan_free(&s);
  comms_free(&x);
  flights_free(fl, x.in_flight);
  return status;
}
