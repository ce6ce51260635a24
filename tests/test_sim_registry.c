/* Simulator test over the registry: every row of crnet__algorithms[]
 * (algorithm.h, registry.c) x every collective its `colls` names x p in
 * 1..33, 48, 63, 64, 65, 100, 120, 128 x the collective's shapes, each
 * built through crnet__build from a crnet__call filled as the library's
 * entry points fill it (collectives.c, vector.c), run in the in-memory
 * simulator (sim.c) and compared element by element with one serial
 * reference per collective, written here.
 *
 * The family tests (test_sim*.c) call their builders directly and assert
 * each family's rounds and volumes; they cannot see a row that wires the
 * wrong builder, passes a field of the call wrongly, claims an order its
 * schedule does not keep, or a check that refuses too much or too little.
 * Here the row is all the test knows of a schedule, so a new row is
 * covered as soon as it is listed, and a new collective fails until it has
 * shapes and a reference below.
 *
 * Shapes: counts 0, 1, p-1, p, 3p+1 and a large odd one; block counts
 * equal (0, 1, 3 each), the runtime's split of 3p+1 (uneven by one),
 * (7b mod 5) with empty blocks among them, everything in block p/3, and
 * random with half of them empty (allgather with and without
 * displacements, which the schedule must ignore: it works on packed
 * blocks); all-to-all 0, 1, 3 (and p-1, p+1 up to p = 33) per block;
 * alltoallv four pair shapes with gaps in both buffers; roots 0, p-1 and
 * p/2; scan and exscan.
 *
 * In place, as a program can ask for it: every rank or none for the
 * symmetric collectives; the root or none for reduce, gather and scatter
 * (the entry points refuse it elsewhere); always for bcast (collectives.c
 * builds it in place). The executor points SEND at RECV on a rank in
 * place, but for a scatter (exec.c); the simulator aliases every rank or
 * none, so a rank's aliasing is done here by renaming SEND to RECV in its
 * schedule, after checking that it never writes SEND.
 *
 * Operators: sum mod 2^64 always; for the reducing collectives also the
 * composition of affine maps x -> a*x + b mod 2^31-1 (associative, not
 * commutative) when the row's keeps_order says the call keeps rank order,
 * and the result must then be the rank-order fold exactly. crnet__select
 * must accept a non-commutative call exactly when keeps_order says so.
 *
 * Refusals: a call a row's check refuses is skipped, after crnet__select
 * has refused it with CRNET_EUNSUPPORTED; which calls are refused is
 * written down below (refusal_expected), so a check that starts refusing
 * more, or less, fails the test instead of thinning it.
 *
 * Hosts: the rows that read call->host (host_aware) run with one host,
 * two halves, three hosts round-robin and three uneven hosts shuffled;
 * every other row must build the very same schedule with a layout as
 * without one, which is checked rank by rank.
 *
 * CRNET_SIM_QUICK=1 (the sanitizer pass) runs p = 1..17, 31, 32, 33, 64.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithm.h"
#include "check_main.h"
#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"

/* Check's ck_assert records every passing assertion, too slow for checks
 * per element: test plainly, and fail through Check. */
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* What RECV holds before the call: any element still holding it where the
 * reference wants data was never written. */
#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)
/* What the gaps between an alltoallv's send blocks hold. */
#define GAP UINT64_C(0x6a6a6a6a6a6a6a6a)

static bool quick;

/* ------------------------------------------------------------------------
 * Operators and data
 */

/* Element e of the block rank src sends rank dst (0 where every rank gets
 * it), in the collectives that only move data: a block in the wrong place,
 * or from the wrong rank, is named by the value it holds. */
static uint64_t encode(int32_t src, int32_t dst, uint64_t e) {
  return UINT64_C(1) << 63 | (uint64_t)src << 40 | (uint64_t)dst << 20 | e;
}

/* ------------------------------------------------------------------------
 * What the registry is expected to refuse, and which rows read hosts
 */

/* The calls a row's check refuses, as the rows document them. A check
 * added, widened or dropped must be written here too. */
static bool refusal_expected(const char *row, crnet_collective coll,
                             int32_t p) {
  return strcmp(row, "hypercube") == 0 && coll == CRNET_COLL_ALLTOALL &&
         (p & (p - 1)) != 0;
}

/* The rows whose schedules depend on call->host (twolevel.h). */
static bool host_aware(const crnet__algorithm *row) {
  return strcmp(row->name, "two-level") == 0;
}

/* ------------------------------------------------------------------------
 * p, host layouts, shapes
 */

static const int32_t full_ps[] = {1,  2,  3,  4,  5,  6,  7,  8,   9,   10,
                                  11, 12, 13, 14, 15, 16, 17, 18,  19,  20,
                                  21, 22, 23, 24, 25, 26, 27, 28,  29,  30,
                                  31, 32, 33, 48, 63, 64, 65, 100, 120, 128};
static const int32_t quick_ps[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                   12, 13, 14, 15, 16, 17, 31, 32, 33, 64};

static const int32_t *ps;
static size_t nps;

enum layout { ONE_HOST, HALVES, ROUND_ROBIN, UNEVEN, NLAYOUTS };
static const char *const layout_name[] = {"one host", "two hosts by halves",
                                          "three hosts round-robin",
                                          "three uneven hosts, shuffled"};

/* host[0..p) for the layout: the number of hosts, or 0 when p has too few
 * ranks for it (every host needs one). One host is host NULL, as the
 * runtime passes it. */
static int32_t layout_make(enum layout l, int32_t p, int32_t *host) {
  int32_t sizes[3];
  switch (l) {
  case ONE_HOST:
    return 1;
  case HALVES:
    if (p < 2)
      return 0;
    for (int32_t r = 0; r < p; r++)
      host[r] = r < (p + 1) / 2 ? 0 : 1;
    return 2;
  case ROUND_ROBIN:
    if (p < 3)
      return 0;
    for (int32_t r = 0; r < p; r++)
      host[r] = r % 3;
    return 3;
  default:
    if (p < 3)
      return 0;
    /* one rank alone, the rest two thirds and one third */
    sizes[0] = 1;
    sizes[2] = (p - 1) / 3 > 0 ? (p - 1) / 3 : 1;
    sizes[1] = p - 1 - sizes[2];
    for (int32_t g = 0, r = 0; g < 3; g++)
      for (int32_t i = 0; i < sizes[g]; i++)
        host[r++] = g;
    for (int32_t r = p - 1; r > 0; r--) {
      int32_t o =
          (int32_t)(mix((uint64_t)p << 32 | (uint64_t)r) % (uint64_t)(r + 1));
      int32_t t = host[r];
      host[r] = host[o];
      host[o] = t;
    }
    return 3;
  }
}

#define NBLOCK_SHAPES 7
static const char *const block_shape_name[NBLOCK_SHAPES] = {
    "blocks empty",
    "blocks of 1",
    "blocks of 3",
    "blocks of 3p+1 split",
    "blocks 7b mod 5",
    "everything in block p/3",
    "random blocks, half empty"};

static void block_shape(int shape, int32_t p, uint64_t *c) {
  for (int32_t b = 0; b < p; b++) {
    uint64_t off, h = mix((uint64_t)p << 32 | (uint64_t)b);
    switch (shape) {
    case 0:
      c[b] = 0;
      break;
    case 1:
      c[b] = 1;
      break;
    case 2:
      c[b] = 3;
      break;
    case 3:
      crnet__block_range(3 * (uint64_t)p + 1, p, b, &off, &c[b]);
      break;
    case 4:
      c[b] = (uint64_t)b * 7 % 5;
      break;
    case 5:
      c[b] = b == p / 3 ? 2 * (uint64_t)p + 1 : 0;
      break;
    default:
      c[b] = h % 2 ? h % 9 : 0;
      break;
    }
  }
}

#define NPAIR_SHAPES 4
static const char *const pair_shape_name[NPAIR_SHAPES] = {
    "pairs random 0..4", "pairs of 2", "pairs empty",
    "pairs only to and from p/2"};

/* Elements rank src sends rank dst in an alltoallv. */
static uint64_t pair_count(int shape, int32_t p, int32_t src, int32_t dst) {
  switch (shape) {
  case 0:
    return mix((uint64_t)src << 32 | (uint64_t)dst) % 5;
  case 1:
    return 2;
  case 2:
    return 0;
  default:
    return src == p / 2 || dst == p / 2 ? 9 : 0;
  }
}

/* One rank's alltoallv arrays: send blocks in rank order with a gap of
 * one element before each, receive blocks in reverse rank order with gaps
 * of two, so that displacements matter on both sides. */
typedef struct vargs {
  uint64_t *scounts, *sdispls, *rcounts, *rdispls;
  uint64_t slen, rlen;
} vargs;

static void vargs_make(vargs *a, int shape, int32_t p, int32_t r) {
  uint64_t at = 0;
  a->scounts = malloc((size_t)p * sizeof *a->scounts);
  a->sdispls = malloc((size_t)p * sizeof *a->sdispls);
  a->rcounts = malloc((size_t)p * sizeof *a->rcounts);
  a->rdispls = malloc((size_t)p * sizeof *a->rdispls);
  EXPECT(a->scounts && a->sdispls && a->rcounts && a->rdispls, "out of memory");
  for (int32_t j = 0; j < p; j++) {
    a->scounts[j] = pair_count(shape, p, r, j);
    a->sdispls[j] = at + (uint64_t)j + 1;
    at += a->scounts[j];
  }
  a->slen = at + (uint64_t)p + 1;
  at = 0;
  for (int32_t j = p - 1; j >= 0; j--) {
    a->rcounts[j] = pair_count(shape, p, j, r);
    a->rdispls[j] = at + 2 * (uint64_t)(p - j);
    at += a->rcounts[j];
  }
  a->rlen = at + 2 * (uint64_t)p + 2;
}

static void vargs_free(vargs *a, int32_t p) {
  for (int32_t r = 0; a != NULL && r < p; r++) {
    free(a[r].scounts);
    free(a[r].sdispls);
    free(a[r].rcounts);
    free(a[r].rdispls);
  }
  free(a);
}

/* ------------------------------------------------------------------------
 * One case
 */

enum in_place { NOT_IN_PLACE, IN_PLACE };

typedef struct kase {
  size_t row_index;
  const crnet__algorithm *row;
  crnet_collective coll;
  int32_t p;
  /* allreduce, reduce, bcast, scan: the vector; all-to-all: per block;
   * block collectives: what the entry points put there */
  uint64_t count;
  const uint64_t *counts; /* p blocks (reduce-scatter, allgather, gather,
                             scatter), else NULL */
  bool uniform;           /* every block the same */
  const uint64_t *displs; /* allgather: the user's layout, or NULL */
  const char *shape;      /* the block or pair shape's name, or NULL */
  const vargs *v;         /* alltoallv: p ranks' arrays */
  int32_t root;
  enum in_place in_place;
  bool exclusive;
  bool affine;
  enum layout layout;
  const int32_t *host;
  int32_t nhosts;
  char what[320];
} kase;

static bool is_rooted(crnet_collective c) {
  return c == CRNET_COLL_BCAST || c == CRNET_COLL_REDUCE ||
         c == CRNET_COLL_GATHER || c == CRNET_COLL_SCATTER;
}

static bool takes_blocks(crnet_collective c) {
  return c == CRNET_COLL_REDUCE_SCATTER || c == CRNET_COLL_ALLGATHER ||
         c == CRNET_COLL_GATHER || c == CRNET_COLL_SCATTER;
}

static bool is_reducing(crnet_collective c) {
  return (CRNET__REDUCING_COLLS & CRNET__COLL_BIT(c)) != 0;
}

/* The in-place choices a program has for the collective: none, or in
 * place too (see rank_in_place for which ranks). */
static int in_place_modes(crnet_collective c) {
  switch (c) {
  case CRNET_COLL_BARRIER:
  case CRNET_COLL_ALLTOALLV: /* refused by vector.c */
  case CRNET_COLL_BCAST:     /* always in place, by collectives.c */
    return 1;
  default:
    return 2;
  }
}

static bool rank_in_place(const kase *k, int32_t r) {
  switch (k->coll) {
  case CRNET_COLL_BCAST:
    return true;
  case CRNET_COLL_BARRIER:
  case CRNET_COLL_ALLTOALLV:
    return false;
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    return k->in_place == IN_PLACE && r == k->root;
  default:
    return k->in_place == IN_PLACE;
  }
}

/* SEND is RECV on this rank (exec.c: in place, but for a scatter, whose
 * in place keeps the root's data in SEND). */
static bool aliased(const kase *k, int32_t r) {
  return rank_in_place(k, r) && k->coll != CRNET_COLL_SCATTER;
}

static const char *in_place_name(const kase *k) {
  if (k->coll == CRNET_COLL_BCAST)
    return "in place (bcast)";
  if (k->in_place == NOT_IN_PLACE)
    return "not in place";
  return is_rooted(k->coll) ? "root in place" : "in place";
}

static void describe(kase *k) {
  char shape[64];
  if (k->shape != NULL)
    snprintf(shape, sizeof shape, "%s", k->shape);
  else
    snprintf(shape, sizeof shape, "count %llu", (unsigned long long)k->count);
  snprintf(k->what, sizeof k->what,
           "row '%s' %s%s p=%d %s root %d, %s, %s operator, %s", k->row->name,
           k->exclusive ? "ex" : "", crnet_collective_name(k->coll), (int)k->p,
           shape, (int)k->root, in_place_name(k),
           k->affine ? "affine (non-commutative)" : "sum",
           layout_name[k->layout]);
}

/* Rank r's call, as the entry points fill it. */
static crnet__call call_of(const kase *k, int32_t r) {
  crnet__call c = {.coll = k->coll,
                   .p = k->p,
                   .rank = r,
                   .count = k->count,
                   .counts = k->counts,
                   .uniform = k->uniform,
                   .displs = k->displs,
                   .root = k->root,
                   .in_place = rank_in_place(k, r),
                   .commutative = !k->affine,
                   .exclusive = k->exclusive,
                   .esize = 8,
                   .host = k->host,
                   .nhosts = k->nhosts,
                   .tuning = NULL};
  if (k->coll == CRNET_COLL_ALLTOALLV) {
    c.counts = k->v[r].scounts;
    c.sdispls = k->v[r].sdispls;
    c.rcounts = k->v[r].rcounts;
    c.rdispls = k->v[r].rdispls;
  }
  return c;
}

static bool seg_same(const crnet__seg *a, const crnet__seg *b) {
  return a->buf == b->buf && a->off == b->off && a->count == b->count;
}

static bool xfer_same(const crnet__xfer *a, const crnet__xfer *b) {
  return a->peer == b->peer && a->first_seg == b->first_seg &&
         a->nsegs == b->nsegs;
}

/* Field by field: the structs have padding, which memcmp would compare. */
static bool sched_same(const crnet__schedule *a, const crnet__schedule *b) {
  if (a->p != b->p || a->rank != b->rank || a->temp_count != b->temp_count ||
      a->nrounds != b->nrounds || a->nsegs != b->nsegs ||
      a->nsteps != b->nsteps)
    return false;
  for (uint32_t i = 0; i < a->nrounds; i++) {
    const crnet__round *x = &a->rounds[i], *y = &b->rounds[i];
    if (!xfer_same(&x->send, &y->send) || !xfer_same(&x->recv, &y->recv) ||
        x->first_step != y->first_step || x->nsteps != y->nsteps ||
        x->independent != y->independent)
      return false;
  }
  for (uint32_t i = 0; i < a->nsegs; i++)
    if (!seg_same(&a->segs[i], &b->segs[i]))
      return false;
  for (uint32_t i = 0; i < a->nsteps; i++) {
    const crnet__step *x = &a->steps[i], *y = &b->steps[i];
    if (x->kind != y->kind || x->order != y->order ||
        !seg_same(&x->src, &y->src) || !seg_same(&x->dst, &y->dst))
      return false;
  }
  return true;
}

/* Aliases SEND to RECV in rank r's schedule, as the executor does for a
 * rank in place. Writing SEND is an error the simulator reports only for
 * what it still calls SEND, so it is looked for first. */
static void alias_send(crnet__schedule *s, const char *what, int32_t r) {
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    for (uint32_t i = 0; i < ro->recv.nsegs; i++)
      EXPECT(s->segs[ro->recv.first_seg + i].buf != CRNET__BUF_SEND,
             "%s: rank %d receives into SEND in round %u", what, (int)r, k);
    for (uint32_t i = 0; i < ro->nsteps; i++)
      EXPECT(s->steps[ro->first_step + i].dst.buf != CRNET__BUF_SEND,
             "%s: rank %d writes SEND in round %u", what, (int)r, k);
  }
  for (uint32_t i = 0; i < s->nsegs; i++)
    if (s->segs[i].buf == CRNET__BUF_SEND)
      s->segs[i].buf = CRNET__BUF_RECV;
  for (uint32_t i = 0; i < s->nsteps; i++) {
    if (s->steps[i].src.buf == CRNET__BUF_SEND)
      s->steps[i].src.buf = CRNET__BUF_RECV;
    if (s->steps[i].dst.buf == CRNET__BUF_SEND)
      s->steps[i].dst.buf = CRNET__BUF_RECV;
  }
}

/* Rank r's input: a new array of *len elements, which belongs at element
 * *off of RECV when the rank is aliased. */
static uint64_t *input_of(const kase *k, int32_t r, const uint64_t *P,
                          uint64_t m, uint64_t *len, uint64_t *off) {
  uint64_t n = 0, *in;
  *off = 0;
  switch (k->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_SCAN:
  case CRNET_COLL_ALLTOALL:
    n = m;
    break;
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_GATHER:
    n = k->counts[r];
    *off = P[r];
    break;
  case CRNET_COLL_BCAST:
  case CRNET_COLL_SCATTER:
    n = r == k->root ? m : 0;
    break;
  case CRNET_COLL_ALLTOALLV:
    n = k->v[r].slen;
    break;
  default:
    break;
  }
  in = malloc((n ? n : 1) * sizeof *in);
  EXPECT(in, "out of memory");
  for (uint64_t e = 0; e < n; e++)
    switch (k->coll) {
    case CRNET_COLL_ALLGATHER:
      in[e] = encode(r, 0, e);
      break;
    case CRNET_COLL_GATHER:
      in[e] = encode(r, k->root, e);
      break;
    case CRNET_COLL_BCAST:
      in[e] = encode(r, 0, e);
      break;
    case CRNET_COLL_ALLTOALL:
      in[e] = encode(r, (int32_t)(e / k->count), e % k->count);
      break;
    case CRNET_COLL_ALLTOALLV:
      in[e] = GAP;
      break;
    default:
      in[e] = sim_value(r, e, k->affine);
      break;
    }
  if (k->coll == CRNET_COLL_SCATTER)
    for (int32_t b = 0; b < k->p && n > 0; b++)
      for (uint64_t e = 0; e < k->counts[b]; e++)
        in[P[b] + e] = encode(r, b, e);
  if (k->coll == CRNET_COLL_ALLTOALLV)
    for (int32_t j = 0; j < k->p; j++)
      for (uint64_t e = 0; e < k->v[r].scounts[j]; e++)
        in[k->v[r].sdispls[j] + e] = encode(r, j, e);
  *len = n;
  return in;
}

/* Elements of rank r's RECV: what the program would pass, and no more, so
 * that a write beyond it is an error of the simulator. */
static uint64_t recv_len(const kase *k, int32_t r, uint64_t m) {
  switch (k->coll) {
  case CRNET_COLL_REDUCE_SCATTER:
    return rank_in_place(k, r) ? m : k->counts[r];
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_GATHER:
    return r == k->root ? m : 0;
  case CRNET_COLL_SCATTER:
    return rank_in_place(k, r) ? 0 : k->counts[r];
  case CRNET_COLL_ALLTOALLV:
    return k->v[r].rlen;
  case CRNET_COLL_BARRIER:
    return 0;
  default:
    return m;
  }
}

static void fail_element(const kase *k, int32_t r, uint64_t i, uint64_t got,
                         uint64_t want) {
  char note[160] = "";
  if (got == SENTINEL)
    snprintf(note, sizeof note, " (never written)");
  else if (!is_reducing(k->coll) && got >> 63)
    snprintf(note, sizeof note,
             " (element %llu of the block from rank %d to rank %d)",
             (unsigned long long)(got & 0xfffff), (int)(got >> 40 & 0x7fffff),
             (int)(got >> 20 & 0xfffff));
  ck_abort_msg("%s: rank %d RECV[%llu] is %#llx%s, the reference %#llx",
               k->what, (int)r, (unsigned long long)i, (unsigned long long)got,
               note, (unsigned long long)want);
}

#define SAME(k, r, i, got, want)                                               \
  do {                                                                         \
    if ((got) != (want))                                                       \
      fail_element(k, r, i, got, want);                                        \
  } while (0)

/* The serial references: one per collective. */
static void check_results(const kase *k, const crnet__sim_rank *rk,
                          const uint64_t *P, uint64_t m) {
  crnet__sim_combine op = k->affine ? op_affine : op_sum;
  int32_t p = k->p;
  uint64_t *acc = malloc((m ? m : 1) * sizeof *acc);
  EXPECT(acc, "out of memory");
  /* the rank-order fold V_0 (+) ... (+) V_p-1 */
  if (is_reducing(k->coll) && k->coll != CRNET_COLL_SCAN)
    for (uint64_t e = 0; e < m; e++) {
      uint64_t v = sim_value(0, e, k->affine);
      for (int32_t x = 1; x < p; x++)
        v = op(v, sim_value(x, e, k->affine));
      acc[e] = v;
    }
  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    switch (k->coll) {
    case CRNET_COLL_ALLREDUCE:
      for (uint64_t e = 0; e < m; e++)
        SAME(k, r, e, o[e], acc[e]);
      break;
    case CRNET_COLL_REDUCE:
      for (uint64_t e = 0; r == k->root && e < m; e++)
        SAME(k, r, e, o[e], acc[e]);
      break;
    case CRNET_COLL_REDUCE_SCATTER:
      /* in place, the rest of RECV is the schedule's (as in MPI) */
      for (uint64_t e = 0; e < k->counts[r]; e++)
        SAME(k, r, e, o[e], acc[P[r] + e]);
      break;
    case CRNET_COLL_SCAN:
      /* acc: the prefix of the ranks before r */
      for (uint64_t e = 0; e < m; e++) {
        uint64_t v = sim_value(r, e, k->affine);
        uint64_t with = r > 0 ? op(acc[e], v) : v;
        if (!k->exclusive)
          SAME(k, r, e, o[e], with);
        else if (r > 0)
          SAME(k, r, e, o[e], acc[e]);
        else /* rank 0's exscan result is undefined: RECV is left alone */
          SAME(k, r, e, o[e], aliased(k, r) ? v : SENTINEL);
        acc[e] = with;
      }
      break;
    case CRNET_COLL_ALLGATHER:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < k->counts[b]; e++)
          SAME(k, r, P[b] + e, o[P[b] + e], encode(b, 0, e));
      break;
    case CRNET_COLL_BCAST:
      for (uint64_t e = 0; e < m; e++)
        SAME(k, r, e, o[e], encode(k->root, 0, e));
      break;
    case CRNET_COLL_GATHER:
      for (int32_t b = 0; r == k->root && b < p; b++)
        for (uint64_t e = 0; e < k->counts[b]; e++)
          SAME(k, r, P[b] + e, o[P[b] + e], encode(b, k->root, e));
      break;
    case CRNET_COLL_SCATTER:
      for (uint64_t e = 0; e < rk[r].recv_count; e++)
        SAME(k, r, e, o[e], encode(k->root, r, e));
      break;
    case CRNET_COLL_ALLTOALL:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < k->count; e++) {
          uint64_t i = (uint64_t)b * k->count + e;
          SAME(k, r, i, o[i], encode(b, r, e));
        }
      break;
    case CRNET_COLL_ALLTOALLV: {
      /* every block in place, every gap untouched */
      const vargs *a = &k->v[r];
      uint64_t at = 0;
      for (int32_t j = p - 1; j >= 0; j--) {
        for (; at < a->rdispls[j]; at++)
          SAME(k, r, at, o[at], SENTINEL);
        for (uint64_t e = 0; e < a->rcounts[j]; e++, at++)
          SAME(k, r, at, o[at], encode(j, r, e));
      }
      for (; at < a->rlen; at++)
        SAME(k, r, at, o[at], SENTINEL);
      break;
    }
    default: /* barrier: the simulator's causal check is the reference */
      break;
    }
  }
  free(acc);
}

/* ------------------------------------------------------------------------
 * Counters: cases simulated, per row and collective, and refusals
 */

static long simulated, simulated_affine, refused_cases;
static long *pair_cases;     /* [row * CRNET_COLL_COUNT + coll] */
static long refused_triples; /* (row, collective, p) refused */
static double seconds_per_coll[CRNET_COLL_COUNT];

/* A layout to build every host-blind row with, for p >= 2: the
 * schedule must not change. */
static int32_t probe_host[128];
static int32_t probe_nhosts;

static void run(const kase *k) {
  int32_t p = k->p;
  uint64_t *P = calloc((size_t)p + 1, sizeof *P), m;
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  char err[512] = "";
  int rc;
  EXPECT(P && sc && rk, "out of memory");
  for (int32_t b = 0; b < p && k->counts != NULL; b++)
    P[b + 1] = P[b] + k->counts[b];
  m = k->counts != NULL                ? P[p]
      : k->coll == CRNET_COLL_ALLTOALL ? (uint64_t)p * k->count
                                       : k->count;

  for (int32_t r = 0; r < p; r++) {
    crnet__call call = call_of(k, r);
    rc = crnet__build(k->row->name, &call, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", k->what, (int)r, rc);
    if (!host_aware(k->row) && p >= 2) {
      crnet__schedule other;
      call.host = probe_host;
      call.nhosts = probe_nhosts;
      rc = crnet__build(k->row->name, &call, &other);
      EXPECT(rc == 0, "%s: build rank %d with hosts: %d", k->what, (int)r, rc);
      EXPECT(sched_same(&sc[r], &other),
             "%s: rank %d: a host layout changes the schedule of a row that "
             "is not host-aware",
             k->what, (int)r);
      crnet__sched_free(&other);
    }
    if (aliased(k, r))
      alias_send(&sc[r], k->what, r);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    uint64_t in_len, in_off, *in = input_of(k, r, P, m, &in_len, &in_off);
    uint64_t rn = recv_len(k, r, m);
    uint64_t *recv = malloc((rn ? rn : 1) * sizeof *recv);
    EXPECT(recv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      recv[e] = SENTINEL;
    q->sched = &sc[r];
    q->recv = recv;
    q->recv_count = rn;
    if (aliased(k, r)) {
      EXPECT(in_off + in_len <= rn, "%s: rank %d: input beyond RECV", k->what,
             (int)r);
      memcpy(recv + in_off, in, in_len * sizeof *in);
      q->init_off = in_off;
      q->init_count = in_len;
      free(in);
    } else {
      q->send = in;
      q->send_count = in_len;
    }
  }

  rc = crnet__sim_run(rk, p, false, k->coll == CRNET_COLL_BARRIER,
                      k->affine ? op_affine : op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", k->what, err);
  check_results(k, rk, P, m);

  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(rk);
  free(sc);
  free(P);
  simulated++;
  simulated_affine += k->affine;
  pair_cases[k->row_index * CRNET_COLL_COUNT + k->coll]++;
}

/* One shape: refused as expected, or run with the sum and, where the row
 * keeps rank order for it, with the affine maps. */
static void attempt(kase *k) {
  const char *name;
  uint32_t id;
  char why[512] = "";
  crnet__call call;
  bool refused, expected, ordered = false;
  int rc;
  k->affine = false;
  describe(k);
  call = call_of(k, 0);
  refused = k->row->check != NULL && k->row->check(&call, why, sizeof why) != 0;
  expected = refusal_expected(k->row->name, k->coll, k->p);
  EXPECT(!refused || expected,
         "%s: the row's check refuses it (%s), which refusal_expected does "
         "not name",
         k->what, why);
  EXPECT(refused || !expected,
         "%s: the row's check accepts it, where refusal_expected names a "
         "refusal",
         k->what);
  rc = crnet__select(k->row->name, &call, &name, &id, why, sizeof why);
  if (refused) {
    EXPECT(rc == CRNET_EUNSUPPORTED,
           "%s: the check refuses it, crnet__select returns %d", k->what, rc);
    refused_cases++;
    return;
  }
  EXPECT(rc == 0 && strcmp(name, k->row->name) == 0 && id == k->row->id,
         "%s: crnet__select: %d (%s)", k->what, rc, why);
  run(k);
  if (!is_reducing(k->coll))
    return;
  call.commutative = false;
  if (k->row->keeps_order != NULL)
    EXPECT(k->row->keeps_order(&call, &ordered) == 0, "%s: keeps_order",
           k->what);
  rc = crnet__select(k->row->name, &call, &name, &id, why, sizeof why);
  EXPECT(ordered ? rc == 0 : rc == CRNET_EUNSUPPORTED,
         "%s: keeps_order says %s, crnet__select of a non-commutative "
         "operator returns %d (%s)",
         k->what, ordered ? "ordered" : "not ordered", rc, why);
  if (ordered) {
    k->affine = true;
    describe(k);
    run(k);
  }
}

/* Adds v to list[0..*n) unless it is there. */
static void add_unique(uint64_t *list, int *n, uint64_t v) {
  for (int i = 0; i < *n; i++)
    if (list[i] == v)
      return;
  list[(*n)++] = v;
}

/* Every shape of the row's collective at p and a layout, past the roots,
 * in-place choices and scan kinds. */
static void shapes(kase *k) {
  int32_t p = k->p, roots[3];
  uint64_t sizes[6], *blocks = malloc((size_t)p * sizeof *blocks),
                     *displs = malloc((size_t)p * sizeof *displs);
  int nroots = 0, nsizes = 0, nmodes = in_place_modes(k->coll);
  int nshapes = 1, nkinds = k->coll == CRNET_COLL_SCAN ? 2 : 1;
  EXPECT(blocks && displs, "out of memory");
  roots[nroots++] = 0;
  if (is_rooted(k->coll)) {
    if (p - 1 != 0)
      roots[nroots++] = p - 1;
    if (p / 2 != 0 && p / 2 != p - 1)
      roots[nroots++] = p / 2;
  }
  switch (k->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_BCAST:
  case CRNET_COLL_SCAN:
    add_unique(sizes, &nsizes, 0);
    add_unique(sizes, &nsizes, 1);
    add_unique(sizes, &nsizes, (uint64_t)p - 1);
    add_unique(sizes, &nsizes, (uint64_t)p);
    add_unique(sizes, &nsizes, 3 * (uint64_t)p + 1);
    /* a large odd one, so that the pipelined chains run in several
     * pieces; smaller as p grows, to keep p·count near 40000 */
    add_unique(sizes, &nsizes,
               (40000 / (uint64_t)p > 3 * (uint64_t)p + 3
                    ? 40000 / (uint64_t)p
                    : 3 * (uint64_t)p + 3) |
                   1);
    nshapes = nsizes;
    break;
  case CRNET_COLL_ALLTOALL:
    /* the ring moves p^2(p-1)/2 blocks: larger blocks for small p only */
    add_unique(sizes, &nsizes, 0);
    add_unique(sizes, &nsizes, 1);
    add_unique(sizes, &nsizes, 3);
    if (p <= 33) {
      add_unique(sizes, &nsizes, (uint64_t)p - 1);
      add_unique(sizes, &nsizes, (uint64_t)p + 1);
    }
    nshapes = nsizes;
    break;
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    nshapes = NBLOCK_SHAPES;
    break;
  case CRNET_COLL_ALLTOALLV:
    nshapes = NPAIR_SHAPES;
    break;
  case CRNET_COLL_BARRIER:
    break;
  default:
    ck_abort_msg("collective %s has no shapes and no reference in this test",
                 crnet_collective_name(k->coll));
  }
  for (int s = 0; s < nshapes; s++) {
    vargs *v = NULL;
    k->shape = NULL;
    k->counts = NULL;
    k->displs = NULL;
    k->uniform = false;
    k->count = nsizes > 0 ? sizes[s] : 0;
    if (takes_blocks(k->coll)) {
      uint64_t total = 0, at = 0;
      block_shape(s, p, blocks);
      k->uniform = true;
      for (int32_t b = 0; b < p; b++) {
        total += blocks[b];
        k->uniform = k->uniform && blocks[b] == blocks[0];
      }
      /* gather and scatter: the count of each rank when the program gave
       * one (vector.c); the others: the total */
      k->count = is_rooted(k->coll) && k->uniform ? blocks[0] : total;
      k->counts = blocks;
      k->shape = block_shape_name[s];
      /* allgatherv's layout, blocks in reverse order with gaps: only the
       * executor's unpacking reads it */
      if (k->coll == CRNET_COLL_ALLGATHER && !k->uniform) {
        for (int32_t b = p - 1; b >= 0; b--) {
          displs[b] = at + 1;
          at += blocks[b] + 1;
        }
        k->displs = displs;
      }
    }
    if (k->coll == CRNET_COLL_ALLTOALLV) {
      v = calloc((size_t)p, sizeof *v);
      EXPECT(v, "out of memory");
      for (int32_t r = 0; r < p; r++)
        vargs_make(&v[r], s, p, r);
      k->v = v;
      k->shape = pair_shape_name[s];
    }
    for (int ri = 0; ri < nroots; ri++)
      for (int mode = 0; mode < nmodes; mode++)
        for (int kind = 0; kind < nkinds; kind++) {
          k->root = roots[ri];
          k->in_place = (enum in_place)mode;
          k->exclusive = kind == 1;
          attempt(k);
        }
    vargs_free(v, p);
    k->v = NULL;
  }
  free(blocks);
  free(displs);
}

/* Every row that does the collective, at every p and layout. */
static void matrix(crnet_collective coll) {
  struct timespec t0, t1;
  int32_t *host = malloc(sizeof *host * 128);
  EXPECT(host, "out of memory");
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *row = crnet__algorithms[i];
    if ((row->colls & CRNET__COLL_BIT(coll)) == 0)
      continue;
    for (size_t pi = 0; pi < nps; pi++) {
      int32_t p = ps[pi];
      long ran = pair_cases[i * CRNET_COLL_COUNT + coll],
           refused = refused_cases;
      EXPECT(p <= 128, "p = %d: the host arrays hold 128", (int)p);
      probe_nhosts = layout_make(p >= 3 ? UNEVEN : HALVES, p, probe_host);
      for (int l = 0; l < NLAYOUTS; l++) {
        kase k = {.row_index = i,
                  .row = row,
                  .coll = coll,
                  .p = p,
                  .layout = (enum layout)l};
        if (l != ONE_HOST && !host_aware(row))
          break;
        k.nhosts = layout_make((enum layout)l, p, host);
        if (k.nhosts == 0)
          continue;
        k.host = l == ONE_HOST ? NULL : host;
        shapes(&k);
      }
      /* every p is either simulated or refused as a whole */
      if (refused_cases > refused) {
        EXPECT(pair_cases[i * CRNET_COLL_COUNT + coll] == ran,
               "row '%s' %s p=%d: some shapes refused, others not", row->name,
               crnet_collective_name(coll), (int)p);
        refused_triples++;
      } else {
        EXPECT(pair_cases[i * CRNET_COLL_COUNT + coll] > ran,
               "row '%s' %s p=%d: nothing simulated", row->name,
               crnet_collective_name(coll), (int)p);
      }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  seconds_per_coll[coll] =
      (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  free(host);
}

START_TEST(test_collective) { matrix((crnet_collective)_i); }
END_TEST

/* Runs last: every (row, collective) the registry names was simulated,
 * and the refusals were exactly the expected ones. */
START_TEST(test_every_row_covered) {
  long bits = 0, covered = 0, expected_triples = 0;
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *row = crnet__algorithms[i];
    printf("  %-20s", row->name);
    for (int c = 0; c < CRNET_COLL_COUNT; c++) {
      long n = pair_cases[i * CRNET_COLL_COUNT + (size_t)c];
      if ((row->colls & CRNET__COLL_BIT(c)) == 0)
        continue;
      bits++;
      covered += n > 0;
      printf(" %s %ld", crnet_collective_name((crnet_collective)c), n);
      for (size_t pi = 0; pi < nps; pi++)
        expected_triples +=
            refusal_expected(row->name, (crnet_collective)c, ps[pi]);
    }
    printf("\n");
  }
  ck_assert_int_gt(bits, 0);
  ck_assert_int_eq(covered, bits);
  ck_assert_int_gt(expected_triples, 0);
  ck_assert_int_eq(refused_triples, expected_triples);
  printf("%ld (row, collective) pairs of %zu rows, all simulated; %ld "
         "(row, collective, p) refused as expected (%ld cases)\n",
         covered, crnet__nalgorithms, refused_triples, refused_cases);
}
END_TEST

int main(void) {
  const char *q = getenv("CRNET_SIM_QUICK");
  struct timespec t0, t1;
  int failed;
  quick = q != NULL && strcmp(q, "1") == 0;
  ps = quick ? quick_ps : full_ps;
  nps = quick ? sizeof quick_ps / sizeof quick_ps[0]
              : sizeof full_ps / sizeof full_ps[0];
  pair_cases =
      calloc(crnet__nalgorithms * CRNET_COLL_COUNT, sizeof *pair_cases);
  if (pair_cases == NULL)
    return EXIT_FAILURE;
  Suite *s = suite_create("sim-registry");
  TCase *tc = tcase_create("registry");
  tcase_add_loop_test(tc, test_collective, 0, CRNET_COLL_COUNT);
  tcase_add_test(tc, test_every_row_covered);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  /* No fork: the counters must see every test's cases. */
  srunner_set_fork_status(sr, CK_NOFORK);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  srunner_run_all(sr, CK_NORMAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  failed = check_failures(sr);
  srunner_free(sr);
  for (int c = 0; c < CRNET_COLL_COUNT; c++)
    printf("  %-15s %6.1f s\n", crnet_collective_name((crnet_collective)c),
           seconds_per_coll[c]);
  printf("simulated %ld collectives (%ld with the non-commutative operator) "
         "over %zu values of p in %.1f s%s\n",
         simulated, simulated_affine, nps,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         quick ? " (CRNET_SIM_QUICK)" : "");
  free(pair_cases);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
