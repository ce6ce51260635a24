/* Rooted gather and scatter: Grama et al., Introduction to Parallel
 * Computing, ch. 4, "Scatter and Gather" (../shared/papers/grama-basic-
 * communication-operations.txt): the hypercube scatter, whose message
 * halves at every step, run on the binomial tree so that any p works; the
 * gather is "exactly the inverse of the scatter operation". Names: p
 * processes, rank r, the root, v = (r - root) mod p the relative rank,
 * counts[b] the block of rank b, P the prefix sums of counts (block b at
 * P[b] of the root's buffer), m = P[p], L = ceil(log2 p), lowbit(v) the
 * index of the lowest set bit of v > 0 (L for the root). Subtree of v:
 * the relative ranks [v, min(v + 2^lowbit(v), p)), contiguous in relative
 * order; as actual ranks it wraps past p-1 at most once, so it is at most
 * two ranges of P.
 *
 * BINOMIAL GATHER. Round k = 0 .. L-1: every v with lowbit(v) = k sends
 *   its subtree's blocks to v - 2^k and is done. So v receives in rounds
 *   k < lowbit(v) the subtree of its child v + 2^k (when < p): a non-root
 *   into TEMP, packed in relative order from v+1 on; the root straight into
 *   RECV at P (one or two segments). v's message lists its own block from
 *   SEND, then TEMP: no copy. The root copies its own block SEND ->
 *   RECV[P[root]] in round 0 (not in place).
 *   Rounds: the root L (p = 1: one for the copy, none in place), v > 0
 *   lowbit(v) + 1. Per rank: v sends its
 *   subtree's elements; the root receives m - counts[root]. Equal blocks
 *   of c: L·α + (p-1)·c·β at the root (Grama: ts·log p + tw·m(p-1)).
 *   TEMP: v's subtree less its own block ((2^lowbit(v) - 1)·c at most);
 *   none at the root and the leaves.
 *   Independent rounds: a rank's receives land in disjoint regions, each
 *   from its own child, so all but the first are marked independent (the
 *   children finish at different times and the executor takes their
 *   messages as they come); the send reads them all, so it is not.
 *
 * BINOMIAL SCATTER. The gather reversed: round t is gather round L-1-t.
 *   The root sends the subtree of 2^k in round L-1-k, from SEND at P, the
 *   farthest child first (it still has k rounds of forwarding ahead). v
 *   receives its subtree in round L-1-lowbit(v): its own block straight
 *   into RECV[0 .. counts[r]) (the message's first segment, no copy), the
 *   rest packed into TEMP; then in round L-1-k, k = lowbit(v)-1 .. 0, it
 *   sends the subtree of v + 2^k (when < p) from TEMP. The root copies
 *   SEND[P[root]] -> RECV in round 0 (not in place).
 *   Rounds at most L; volume and TEMP as the gather. Independent: the
 *   root's sends (all read SEND) after the first, a rank's sends after the
 *   first that follows its receive.
 *
 * LINEAR GATHER / SCATTER (the star). The root exchanges with relative v
 *   in round v-1, straight between RECV (gather) or SEND (scatter) at P and
 *   the other rank's SEND or RECV; v waits v-1 empty rounds first, because
 *   round numbers are what match messages. The root's rounds after the
 *   first are independent, so the executor keeps up to its window of them
 *   in flight. Rounds: the root p-1, v one message in round v-1. Cost at
 *   the root: (p-1)·α, overlapped by the window, + (m - counts[root])·β,
 *   the tree's β term, with no store-and-forward and no TEMP: the choice
 *   for large blocks.
 *
 * Worked example, p = 5, root 2 (v = 0..4 are ranks 2, 3, 4, 0, 1; L = 3):
 *   binomial gather
 *     round 0  3 -> 2: block 3 into RECV[P3]; 0 -> 4: block 0 into TEMP
 *     round 1  4 -> 2: SEND block 4 + TEMP (block 0), relative [2, 4):
 *              RECV[P4 .. P5) and RECV[0 .. P1), the wrap
 *     round 2  1 -> 2: block 1 into RECV[P1] (rank 1, v = 4, idles in
 *              rounds 0 and 1: its children 5 and 6 are >= p)
 *   binomial scatter
 *     round 0  2 -> 1: block 1
 *     round 1  2 -> 4: blocks 4, 0 (block 4 into RECV, block 0 into TEMP)
 *     round 2  2 -> 3: block 3; 4 -> 0: block 0 from TEMP
 *   linear gather: the root receives from 3, 4, 0, 1 in rounds 0 .. 3;
 *     rank 1 (v = 4) sends in round 3 after three empty rounds.
 */
#include "rooted.h"

#include <stdlib.h>

#include "algorithm.h"
#include "crnet.h"
#include "model.h"

/* What every builder needs: the arguments and the block offsets. */
typedef struct tree {
  int32_t p, root;
  int64_t v; /* relative rank */
  uint64_t *P;
  uint64_t own; /* counts[rank] */
} tree;

typedef void (*add_seg_fn)(crnet__schedule *, int32_t, uint8_t, uint64_t,
                           uint64_t);

static int32_t actual(const tree *t, int64_t u) {
  return (int32_t)((t->root + u) % t->p);
}

static int lowbit(int64_t v) {
  int b = 0;
  while (!(v >> b & 1))
    b++;
  return b;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Elements of the relative ranks [a, b). */
static uint64_t span(const tree *t, int64_t a, int64_t b) {
  int64_t x = t->root + a, y = t->root + b, p = t->p;
  if (y <= p)
    return t->P[y] - t->P[x];
  if (x >= p)
    return t->P[y - p] - t->P[x - p];
  return t->P[p] - t->P[x] + t->P[y - p];
}

/* Adds the root's segments of buf (blocks at P) holding the relative ranks
 * [a, b): one, or two when the range wraps past rank p-1. */
static void root_segs(crnet__schedule *out, add_seg_fn add, int32_t peer,
                      uint8_t buf, const tree *t, int64_t a, int64_t b) {
  int64_t p = t->p;
  for (int64_t lo = t->root + a, hi = t->root + b; lo < hi;) {
    int64_t base = lo < p ? 0 : p, stop = lo < p ? min64(hi, p) : hi;
    add(out, peer, buf, t->P[lo - base], t->P[stop - base] - t->P[lo - base]);
    lo = stop;
  }
}

/* Checks the arguments, computes P and starts the schedule. 0 or an error
 * code (then there is nothing to free). */
static int start(crnet__schedule *out, tree *t, int32_t p, int32_t rank,
                 int32_t root, const uint64_t *counts) {
  int rc;
  if (out == NULL || counts == NULL || p < 1 || rank < 0 || rank >= p ||
      root < 0 || root >= p)
    return CRNET_EINVAL;
  t->P = crnet__block_offsets(counts, p, &rc);
  if (t->P == NULL)
    return rc;
  t->p = p;
  t->root = root;
  t->v = ((int64_t)rank - root + p) % p;
  t->own = counts[rank];
  crnet__sched_init(out, p, rank);
  return 0;
}

static int finish(crnet__schedule *out, tree *t) {
  free(t->P);
  return crnet__sched_finish(out);
}

/* A round of a group: the first one plain, the others independent. */
static void group_round(crnet__schedule *out, bool first) {
  if (first)
    crnet__sched_round(out);
  else
    crnet__sched_round_independent(out);
}

/* The root's rounds: n of them, or one for the own block's copy alone when
 * there is nothing to exchange (p = 1). */
static int32_t root_rounds(int64_t n, bool in_place) {
  return n > 0 ? (int32_t)n : in_place ? 0 : 1;
}

/* Gather, not in place: the root's own block, SEND -> RECV[P[root]]. */
static void gather_own(crnet__schedule *out, const tree *t) {
  crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, t->own),
                    crnet__seg_make(CRNET__BUF_RECV, t->P[t->root], t->own));
}

/* Scatter, not in place: the root's own block, SEND[P[root]] -> RECV. */
static void scatter_own(crnet__schedule *out, const tree *t) {
  crnet__sched_copy(out,
                    crnet__seg_make(CRNET__BUF_SEND, t->P[t->root], t->own),
                    crnet__seg_make(CRNET__BUF_RECV, 0, t->own));
}

int crnet__binomial_gather(crnet__schedule *out, int32_t p, int32_t rank,
                           int32_t root, const uint64_t *counts,
                           bool in_place) {
  tree t;
  int rc = start(out, &t, p, rank, root, counts);
  if (rc != 0)
    return rc;
  int L = crnet__ceil_log2(p);
  if (t.v == 0) {
    int32_t n = root_rounds(L, in_place);
    for (int32_t k = 0; k < n; k++) {
      group_round(out, k == 0);
      if (k < L) {
        int64_t c = INT64_C(1) << k;
        int32_t from = actual(&t, c);
        crnet__sched_recv_peer(out, from);
        root_segs(out, crnet__sched_recv, from, CRNET__BUF_RECV, &t, c,
                  min64(2 * c, p));
      }
      if (k == 0 && !in_place)
        gather_own(out, &t);
    }
    return finish(out, &t);
  }
  int b = lowbit(t.v);
  int64_t end = min64(t.v + (INT64_C(1) << b), p);
  crnet__sched_need_temp(out, span(&t, t.v + 1, end));
  for (int k = 0; k < b; k++) {
    int64_t c = t.v + (INT64_C(1) << k);
    group_round(out, k == 0);
    /* Rounds whose child is beyond p stay empty: the send must be in
     * round b, where the parent expects it. */
    if (c >= p)
      continue;
    int32_t from = actual(&t, c);
    crnet__sched_recv_peer(out, from);
    crnet__sched_recv(out, from, CRNET__BUF_TEMP, span(&t, t.v + 1, c),
                      span(&t, c, min64(c + (INT64_C(1) << k), p)));
  }
  int32_t to = actual(&t, t.v - (INT64_C(1) << b));
  crnet__sched_round(out);
  crnet__sched_send_peer(out, to);
  crnet__sched_send(out, to, CRNET__BUF_SEND, 0, t.own);
  crnet__sched_send(out, to, CRNET__BUF_TEMP, 0, span(&t, t.v + 1, end));
  return finish(out, &t);
}

int crnet__binomial_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                            int32_t root, const uint64_t *counts,
                            bool in_place) {
  tree t;
  int rc = start(out, &t, p, rank, root, counts);
  if (rc != 0)
    return rc;
  int L = crnet__ceil_log2(p);
  if (t.v == 0) {
    int32_t n = root_rounds(L, in_place);
    for (int32_t rd = 0; rd < n; rd++) {
      group_round(out, rd == 0);
      if (rd < L) {
        int64_t c = INT64_C(1) << (L - 1 - rd);
        int32_t to = actual(&t, c);
        crnet__sched_send_peer(out, to);
        root_segs(out, crnet__sched_send, to, CRNET__BUF_SEND, &t, c,
                  min64(2 * c, p));
      }
      if (rd == 0 && !in_place)
        scatter_own(out, &t);
    }
    return finish(out, &t);
  }
  int b = lowbit(t.v);
  int64_t end = min64(t.v + (INT64_C(1) << b), p);
  /* The last round is that of the child v+1 if v has it, else the
   * receive: children v + 2^k < p are those of the smallest k. */
  int last = b > 0 && t.v + 1 < p ? L - 1 : L - 1 - b;
  crnet__sched_need_temp(out, span(&t, t.v + 1, end));
  for (int rd = 0; rd <= last; rd++) {
    int k = L - 1 - rd; /* the tree level of the round */
    if (k > b) {
      crnet__sched_round(out); /* the subtree has not reached v yet */
    } else if (k == b) {
      int32_t from = actual(&t, t.v - (INT64_C(1) << b));
      crnet__sched_round(out);
      crnet__sched_recv_peer(out, from);
      crnet__sched_recv(out, from, CRNET__BUF_RECV, 0, t.own);
      crnet__sched_recv(out, from, CRNET__BUF_TEMP, 0, span(&t, t.v + 1, end));
    } else {
      int64_t c = t.v + (INT64_C(1) << k);
      group_round(out, k == b - 1);
      if (c >= p)
        continue;
      int32_t to = actual(&t, c);
      crnet__sched_send_peer(out, to);
      crnet__sched_send(out, to, CRNET__BUF_TEMP, span(&t, t.v + 1, c),
                        span(&t, c, min64(c + (INT64_C(1) << k), p)));
    }
  }
  return finish(out, &t);
}

/* The linear (star) schedules: gather = true receives, false sends. */
static int linear(crnet__schedule *out, int32_t p, int32_t rank, int32_t root,
                  const uint64_t *counts, bool in_place, bool gather) {
  tree t;
  int rc = start(out, &t, p, rank, root, counts);
  if (rc != 0)
    return rc;
  if (t.v == 0) {
    int32_t n = root_rounds(p - 1, in_place);
    for (int32_t rd = 0; rd < n; rd++) {
      group_round(out, rd == 0);
      if (rd < p - 1) {
        int32_t peer = actual(&t, rd + 1);
        if (gather)
          crnet__sched_recv_peer(out, peer);
        else
          crnet__sched_send_peer(out, peer);
        root_segs(out, gather ? crnet__sched_recv : crnet__sched_send, peer,
                  gather ? CRNET__BUF_RECV : CRNET__BUF_SEND, &t, rd + 1,
                  rd + 2);
      }
      if (rd == 0 && !in_place) {
        if (gather)
          gather_own(out, &t);
        else
          scatter_own(out, &t);
      }
    }
    return finish(out, &t);
  }
  for (int64_t rd = 0; rd < t.v; rd++)
    crnet__sched_round(out);
  if (gather) {
    crnet__sched_send_peer(out, root);
    crnet__sched_send(out, root, CRNET__BUF_SEND, 0, t.own);
  } else {
    crnet__sched_recv_peer(out, root);
    crnet__sched_recv(out, root, CRNET__BUF_RECV, 0, t.own);
  }
  return finish(out, &t);
}

int crnet__linear_gather(crnet__schedule *out, int32_t p, int32_t rank,
                         int32_t root, const uint64_t *counts, bool in_place) {
  return linear(out, p, rank, root, counts, in_place, true);
}

int crnet__linear_scatter(crnet__schedule *out, int32_t p, int32_t rank,
                          int32_t root, const uint64_t *counts, bool in_place) {
  return linear(out, p, rank, root, counts, in_place, false);
}

/* --- the registry's rows (algorithm.h) -------------------------------------
 *
 * Gather and scatter are priced apart from the synchronous-round counts
 * of the other rows, because what decides between their two schedules is
 * what those counts leave out:
 *
 * - Rounds. The linear schedule's p - 1 rounds are independent (each its
 *   own peer, its own block), and the executor keeps up to
 *   CRNET_ROUNDS_IN_FLIGHT of them going at once, so their latencies
 *   overlap: only the root's handling of each further message adds, priced
 *   at a quarter of a round. Measured on the 2-core VM (crbench -s
 *   binomial,linear, 1 KiB to 4 MiB): linear is faster or level at every
 *   size at p = 4 and 8, and binomial wins small scatters at p = 16. So R
 *   = 1 + (p - 2)/4 against the tree's ceil(log2 p): linear up to p = 13.
 * - Bytes. The root receives (sends) q·m either way, but the tree relays:
 *   the block of relative rank r travels popcount(r) hops, Σ popcount(r)
 *   / p · m bytes in all, against the linear schedule's q·m. On links
 *   bound by the CPU (loopback, ranks sharing cores) every relayed byte
 *   costs a copy on both ends, and linear gathers 4 MiB 1.9x (p = 8) and
 *   3.8x (p = 16) faster than the tree; on a network the root's link
 *   decides and the two tie, so pricing the volume never hurts there.
 *   B/m is that volume: L/2 at powers of two, against q.
 */

#define ROOTED_COLLS                                                           \
  (CRNET__COLL_BIT(CRNET_COLL_GATHER) | CRNET__COLL_BIT(CRNET_COLL_SCATTER))

static double binomial_volume(int32_t p) {
  int64_t hops = 0;
  for (int32_t r = 1; r < p; r++)
    for (uint32_t v = (uint32_t)r; v != 0; v &= v - 1)
      hops++;
  return (double)hops / p;
}

static int binomial_build(const crnet__call *c, crnet__schedule *out) {
  return c->coll == CRNET_COLL_GATHER
             ? crnet__binomial_gather(out, c->p, c->rank, c->root, c->counts,
                                      c->in_place)
             : crnet__binomial_scatter(out, c->p, c->rank, c->root, c->counts,
                                       c->in_place);
}

static bool binomial_terms(const crnet__call *call, crnet__model_coef *c) {
  *c = (crnet__model_coef){crnet__ceil_log2(call->p),
                           binomial_volume(call->p), 0};
  return true;
}

/* The root's children. */
static int32_t binomial_peers(const crnet__call *call) {
  return crnet__ceil_log2(call->p);
}

const crnet__algorithm crnet__binomial_algorithm = {
    .name = "binomial",
    .id = 12,
    .colls = ROOTED_COLLS,
    .in_auto = true,
    .build = binomial_build,
    .terms = binomial_terms,
    .peers = binomial_peers,
    .summary = "the binomial tree: ceil(log2 p) rounds, blocks relayed"};

static int linear_build(const crnet__call *c, crnet__schedule *out) {
  return c->coll == CRNET_COLL_GATHER
             ? crnet__linear_gather(out, c->p, c->rank, c->root, c->counts,
                                    c->in_place)
             : crnet__linear_scatter(out, c->p, c->rank, c->root, c->counts,
                                     c->in_place);
}

static bool linear_terms(const crnet__call *call, crnet__model_coef *c) {
  *c = (crnet__model_coef){1 + (call->p - 2) * CRNET__MODEL_FURTHER_MESSAGE,
                           (double)(call->p - 1) / call->p, 0};
  return true;
}

/* The root and every rank. */
static int32_t linear_peers(const crnet__call *call) { return call->p - 1; }

const crnet__algorithm crnet__linear_algorithm = {
    .name = "linear",
    .id = 13,
    .colls = ROOTED_COLLS,
    .in_auto = true,
    .build = linear_build,
    .terms = linear_terms,
    .peers = linear_peers,
    .summary = "the root and each rank directly: p-1 messages, several in "
               "flight"};
