/* crbench: times crnet collectives over a range of sizes and schedules, in
 * the conventions of nccl-tests, and optionally checks every result.
 *
 *   crlaunch -n P crbench -c allreduce -s all -b 8 -e 64M -f 2 [--check]
 *
 * It is written as an external user would write it: it includes crnet.h only
 * and links against the installed library, so it measures what applications
 * get. `crbench -h` prints the full usage text (crbench_usage, in
 * crbench_options.c with the parsing of the command line), which is also
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
 * every rank, so all ranks agree without talking. -s all leaves out, with a
 * note, a schedule that cannot serve this p (hypercube all-to-all at a p
 * that is not a power of two). A call that returns CRNET_EUNSUPPORTED
 * skips that row with a note on stderr; any other failure prints
 * crnet_comm_errmsg(), aborts the job and exits 1. Exit status 1 too when any
 * #wrong is not 0.
 */
/* strdup and clock_gettime beside C11, for a build outside
 * meson too (meson defines it already). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crbench.h"
#include "crnet.h"

#define BUF_ALIGN 64
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

#define MAX_SCHEDULES 32 /* names in one -s list */

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
  size_t *counts; /* the v-variants' per-rank counts (p entries) */
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
  case C_ALLGATHERV:
  case C_GATHER:
    l.count = l.block = size / ts / p;
    l.send_elems = l.count;
    l.recv_elems = l.count * p;
    l.bytes = l.recv_elems * ts;
    break;
  case C_SCATTER:
    l.count = l.block = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case C_ALLTOALL:
  case C_ALLTOALLV:
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
  /* The v-variants' counts: equal blocks, set once per size (not in the
   * timed call). */
  for (int r = 0; r < b->p; r++)
    b->counts[r] = l->count;
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
  case C_ALLGATHERV:
  case C_GATHER:
    fill_moved(b->send, l->count * ts, (uint64_t)b->rank, 0);
    break;
  case C_SCATTER:
    if (b->rank == o->root)
      for (int d = 0; d < b->p; d++)
        fill_moved(b->send + (size_t)d * l->block * ts, l->block * ts,
                   (uint64_t)o->root, (uint64_t)d);
    break;
  case C_ALLTOALL:
  case C_ALLTOALLV:
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
  case C_GATHER: /* only the root receives */
    return b->rank != b->o->root;
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
  case C_ALLGATHERV:
    move_elem(b->ts, i / l->block, 0, i % l->block, out);
    return;
  case C_GATHER:
    if (b->rank == o->root)
      move_elem(b->ts, i / l->block, 0, i % l->block, out);
    else
      move_elem(b->ts, UNTOUCHED_SOURCE, (uint64_t)b->rank, i, out);
    return;
  case C_SCATTER:
    move_elem(b->ts, (uint64_t)o->root, (uint64_t)b->rank, i, out);
    return;
  case C_ALLTOALL:
  case C_ALLTOALLV:
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
  case C_GATHER:
    return crnet_gather(b->comm, b->send, b->recv, l->count, dt, o->root);
  case C_SCATTER:
    return crnet_scatter(b->comm, b->send, b->recv, l->count, dt, o->root);
  case C_ALLGATHERV:
    return crnet_allgatherv(b->comm, b->send, l->count, b->recv, b->counts,
                            NULL, dt);
  case C_ALLTOALLV:
    return crnet_alltoallv(b->comm, b->send, b->counts, NULL, b->recv,
                           b->counts, NULL, dt);
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
  const char *ran; /* the schedule that ran: auto's pick, or schedule */
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

/* What carries rank 0's frames to its peers: "shm", "tcp", both ("shm+tcp":
 * several nodes), or "none" yet (lazy links). */
static const char *links_column(const struct bench *b) {
  bool shm = false, tcp = false;
  for (int r = 0; r < b->p; r++) {
    crnet_link_kind k;
    if (crnet_comm_peer_link(b->comm, r, &k) != 0)
      continue;
    shm |= k == CRNET_LINK_SHM;
    tcp |= k == CRNET_LINK_TCP;
  }
  return shm && tcp ? "shm+tcp" : shm ? "shm" : tcp ? "tcp" : "none";
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
    printf("# %10s  %12s  %8s  %6s  %18s  %4s  %9s  %8s  %8s  %6s  %5s  %7s\n",
           "size", "count", "type", "redop", "schedule", "root", "time",
           "algbw", "busbw", "#wrong", "eff", "links");
  } else {
    printf("# %10s  %12s  %8s  %6s  %18s  %4s  %9s  %8s  %8s  %6s  %7s\n",
           "size", "count", "type", "redop", "schedule", "root", "time",
           "algbw", "busbw", "#wrong", "links");
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
           "\"%s\", \"op\": \"%s\", \"schedule\": \"%s\", \"ran\": \"%s\", "
           "\"root\": %d, \"p\": %d, \"time_us\": %.9g, \"algbw_gbps\": "
           "%.9g, \"busbw_gbps\": %.9g, ",
           b->o->coll->name, r->l.bytes, r->l.count, type_column(b),
           op_column(b), r->schedule, r->ran, root_column(b), b->p, us, algbw,
           busbw);
    if (b->o->check)
      printf("\"wrong\": %" PRIu64, r->wrong);
    else
      printf("\"wrong\": null");
    printf(", \"iters\": %d, \"links\": \"%s\"", b->o->iters,
           links_column(b));
    if (has_eff)
      printf(", \"link_gbps\": %.9g, \"efficiency\": %.9g}\n",
             b->link.share_bps / 1e9, eff);
    else
      printf(", \"link_gbps\": null, \"efficiency\": null}\n");
  } else {
    char time[32], wrong[32], sched[64];
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
    /* auto names what it ran: "auto:circulant" */
    if (strcmp(r->schedule, r->ran) != 0)
      snprintf(sched, sizeof sched, "%s:%s", r->schedule, r->ran);
    else
      snprintf(sched, sizeof sched, "%s", r->schedule);
    printf("  %10zu  %12zu  %8s  %6s  %18s  %4d  %9s  %8.3f  %8.3f  %6s",
           r->l.bytes, r->l.count, type_column(b), op_column(b), sched,
           root_column(b), time, algbw, busbw, wrong);
    if (has_eff)
      printf("  %5.2f", eff);
    else if (b->have_link)
      printf("  %5s", "-");
    printf("  %7s\n", links_column(b));
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
  /* Before the bookkeeping allreduces, which run on auto themselves. */
  out->ran = crnet_comm_last_schedule(b->comm, o->coll->schedule_of);
  if (out->ran == NULL)
    out->ran = sched;
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
    /* auto, then every schedule of the collective the library lists. */
    const char *name = "auto";
    for (int k = 0; name != NULL && b->nsched < MAX_SCHEDULES;
         name = crnet_schedule_name(sc, k++)) {
      int rc = crnet_comm_set_schedule(b->comm, sc, name);
      if (rc == 0)
        b->sched[b->nsched++] = name;
      /* Quiet about schedules that cannot do the collective at all; a
       * note for one that cannot at this p (hypercube all-to-all). */
      else if (speak && (o->verbose || rc != CRNET_EUNSUPPORTED ||
                         strstr(crnet_comm_errmsg(b->comm), "cannot do") ==
                             NULL))
        fprintf(stderr, PROG ": -s all: leaving out %s: %s: %s\n", name,
                crnet_err_name(rc),
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
      crbench_usage_error(speak, "empty schedule name in '%s'", o->schedule);
      return EXIT_USAGE;
    }
    for (size_t j = 0; j < b->nsched; j++)
      if (strcmp(b->sched[j], name) == 0) {
        crbench_usage_error(speak, "schedule '%s' given twice", name);
        return EXIT_USAGE;
      }
    if (b->nsched == MAX_SCHEDULES) {
      crbench_usage_error(speak, "more than %d schedules in -s", MAX_SCHEDULES);
      return EXIT_USAGE;
    }
    rc = crnet_comm_set_schedule(b->comm, sc, name);
    if (rc == CRNET_EINVAL) {
      crbench_usage_error(speak, "unknown schedule '%s'", name);
      return EXIT_USAGE;
    }
    if (rc != 0) {
      const char *why = crnet_comm_errmsg(b->comm);
      if (why[0] != '\0')
        crbench_usage_error(speak, "-s %s: %s", name, why);
      else
        crbench_usage_error(speak, "schedule '%s' cannot do %s", name, o->coll->name);
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
    crbench_usage_error(b->rank == 0, "--link-limit needs at least 2 ranks");
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
    crbench_usage_error(b->rank == 0, "--calibrate needs at least 2 ranks");
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
  int status = choose_schedules(b); /* one name: crbench_parse_args saw to it */
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

  status = crbench_parse_args(argc, argv, &o);
  if (status != 0)
    return status;
  if (o.help) {
    if (crbench_env_rank_is_zero())
      fputs(crbench_usage, stdout);
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
    crbench_usage_error(b.rank == 0, "-r %d: the root must be below p = %d", o.root,
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

  if (o.p2p != 0) {
    status = crbench_p2p(b.comm, &o);
    free(b.sched_list);
    rc = crnet_comm_destroy(b.comm);
    return rc != 0 && status == EXIT_RIGHT ? EXIT_WRONG : status;
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
  b.counts = calloc((size_t)b.p, sizeof *b.counts);
  alloc_failed = b.send == NULL || b.recv == NULL || b.times == NULL ||
                 b.counts == NULL;
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
  free(b.counts);
  free(b.sched_list);
  rc = crnet_comm_destroy(b.comm);
  if (rc != 0 && status == EXIT_RIGHT) {
    fprintf(stderr, PROG ": rank %d: crnet_comm_destroy: %s\n", b.rank,
            crnet_strerror(rc));
    status = EXIT_WRONG;
  }
  return status;
}
