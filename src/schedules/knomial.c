/* k-nomial trees: bcast, reduce, barrier and allreduce.
 *
 * The binomial tree of Grama et al., Introduction to Parallel Computing,
 * ch. 4 ("One-to-All Broadcast and All-to-One Reduction", ../shared/papers/
 * grama-basic-communication-operations.txt), with radix k >= 2 instead of
 * 2: each level cuts a node's range of ranks into k parts instead of two,
 * so the tree has L = ceil(log_k p) levels instead of ceil(log2 p), and a
 * node talks to up to k-1 children per level instead of one. k = 2 is the
 * binomial tree. Names: p ranks, the root, radix k, levels l = 0 .. L-1
 * from the top, d_l = k^(L-1-l) the part size of level l.
 *
 * THE TREE. Level 0 holds one interval, [0, p), rooted at the root. A
 * level-l interval [lo, hi) with root c is cut into parts of d_l ranks,
 * [lo + j·d_l, lo + (j+1)·d_l) clipped to hi, j = 0 .. parts-1 (at most
 * k, since the interval has at most k·d_l ranks); the part that holds c
 * keeps c as its root, every other part is rooted at its first rank, a
 * child of c. The parts are the level-(l+1) intervals. After L levels
 * every interval is one rank. So every subtree is a contiguous range of
 * actual ranks, whatever the root, and a node's children at one level
 * are the parts beside its own: that is what keeps rank order (below).
 *
 * Slots. c's children at a level are numbered in slots: the parts to the
 * right of c's own part, nearest first, then those to its left, nearest
 * first. Child slot s of level l talks to c in its own round, so a round
 * still has at most one send and one receive, and the rounds of a level
 * (slot 0 plain, the others crnet__sched_round_independent) are kept in
 * flight together by the executor: a level costs one latency and k-1
 * messages' bytes, not k-1 latencies (see the price below). Level l has
 * n_l rounds: n_0 = ceil(p / d_0) - 1 (the top interval is cut into that
 * many parts beside the root's), n_l = k-1 below (the interval [0, d_(l-1))
 * has k full parts). S = Σ n_l rounds per tree, (k-1)·L when p = k^L.
 *
 * BCAST. Levels top down, round base_l + s for slot s, base_l = Σ_(i<l)
 *   n_i. A child receives the vector into RECV (the root's data is there:
 *   bcast is built in place) in its slot of its level, and from the next
 *   level on sends RECV to its own children. S rounds; a node sends at
 *   most k-1 messages of m per level; every other rank receives once.
 * REDUCE (to any root). The bcast's rounds in reverse: levels bottom up,
 *   round rbase_l + s, rbase_l = Σ_(i>l) n_i. A node folds each child's
 *   subtree into its accumulator as it arrives, and once its lowest level
 *   with children is done, sends the accumulator to its parent. Rank
 *   order: the accumulator always covers a contiguous range of ranks (the
 *   node's own part so far), and each child's range is adjacent to it, on
 *   the right (acc = acc (+) child, DST_LEFT) for the right-hand slots,
 *   then on the left (acc = child (+) acc, SRC_LEFT): the root ends with
 *   V_0 (+) ... (+) V_(p-1), for every root, and non-commutative operators
 *   are safe. S rounds; a node receives and reduces at most k-1 messages
 *   of m per level.
 *   Buffers: the accumulator is the root's RECV and TEMP[0 .. m) elsewhere;
 *   a child's message lands in its own TEMP slot (slots of one level run
 *   together, so they cannot share); the first message a node ever
 *   receives lands in the accumulator itself and is combined with the
 *   node's input from SEND there, so nothing is copied. A leaf sends from
 *   SEND. TEMP: (children of its fullest level)·m at the root, one m more
 *   at other inner nodes, none at leaves. In place (the root's own input
 *   already in RECV), every child goes to a TEMP slot.
 * ALLREDUCE. The reduce to rank 0 with the accumulator in RECV on every
 *   rank, then the bcast from rank 0 into RECV: 2S rounds, rank order kept.
 *   The tree is for small vectors, where the latency of its few levels
 *   matters and moving m per message does not.
 * BARRIER. The allreduce's messages, zero-length: 2S rounds. Every rank
 *   has heard from every rank once the bcast has reached it.
 *
 * Worked example, p = 7, k = 3, root 2: L = 2, d = 3, 1; n = 2, 2; S = 4.
 *   Level 0 cuts [0, 7) into [0, 3) (the root's), [3, 6), [6, 7): slot 0
 *   is rank 3, slot 1 rank 6. Level 1: [0, 3) into 0, 1, 2 (the root's):
 *   no right-hand parts, so slot 0 is rank 1 and slot 1 rank 0; [3, 6)
 *   into 3 (its root), 4, 5: slots 4, 5; [6, 7) is one rank.
 *     bcast  round 0  2 -> 3          reduce  round 0  1 -> 2, 4 -> 3
 *            round 1  2 -> 6                  round 1  0 -> 2, 5 -> 3
 *            round 2  2 -> 1, 3 -> 4          round 2  3 -> 2
 *            round 3  2 -> 0, 3 -> 5          round 3  6 -> 2
 *   Rank 2 folds V1 (+) V2 (V1 received into RECV, V2 from SEND on the
 *   right), then V0 on the left, then V3 (+) V4 (+) V5 and V6 on the right:
 *   V0 (+) ... (+) V6. Rounds 0 and 1 form one group at rank 2 (two
 *   receives in flight), rounds 2 and 3 another.
 *
 * Cost, synchronous rounds (crsched --cost, the terms below): bcast S·α +
 * S·m·β; reduce the same + S·m·γ; allreduce twice the bcast + S·m·γ;
 * barrier 2S·α. The price auto uses is lower, because a level's rounds
 * overlap: see "the radix" at the rows.
 */
#include "knomial.h"

#include "algorithm.h"
#include "model.h"
#include "tuning.h"

/* k^L < k·p <= 2^62 for k, p < 2^31: L never reaches 63. */
#define MAX_LEVELS 64

typedef struct tree {
  int32_t p, k, root;
  int levels;                 /* L */
  int64_t part[MAX_LEVELS];   /* d_l */
  int32_t rounds[MAX_LEVELS]; /* n_l */
  int32_t total;              /* S */
} tree;

/* Where one rank stands at one level: the interval [lo, hi) holding it,
 * cut into `parts` parts of `part` ranks, whose root (in part
 * `root_part`) is `root`; `slot` is the rank's slot when it is a child of
 * that root at this level, else -1. */
typedef struct level {
  int64_t lo, part;
  int32_t parts, root_part, root, slot;
} level;

int crnet__knomial_levels(int32_t p, int32_t radix) {
  int levels = 0;
  for (int64_t reach = 1; reach < p; reach *= radix)
    levels++;
  return levels;
}

static void tree_init(tree *t, int32_t p, int32_t k, int32_t root) {
  t->p = p;
  t->k = k;
  t->root = root;
  t->levels = crnet__knomial_levels(p, k);
  t->total = 0;
  for (int l = t->levels - 1; l >= 0; l--)
    t->part[l] = l == t->levels - 1 ? 1 : t->part[l + 1] * k;
  for (int l = 0; l < t->levels; l++) {
    t->rounds[l] =
        l == 0 ? (int32_t)((p + t->part[0] - 1) / t->part[0]) - 1 : k - 1;
    t->total += t->rounds[l];
  }
}

int32_t crnet__knomial_tree_rounds(int32_t p, int32_t radix) {
  tree t;
  tree_init(&t, p, radix, 0);
  return t.total;
}

/* The slot of part j among the children of the root in part jc. */
static int32_t slot_of(int32_t parts, int32_t jc, int32_t j) {
  return j > jc ? j - jc - 1 : (parts - 1 - jc) + (jc - 1 - j);
}

/* The part of slot s: right-hand parts nearest first, then left-hand. */
static int32_t part_of(const level *v, int32_t s) {
  int32_t right = v->parts - 1 - v->root_part;
  return s < right ? v->root_part + 1 + s : v->root_part - 1 - (s - right);
}

static int32_t child_of(const level *v, int32_t s) {
  return (int32_t)(v->lo + part_of(v, s) * v->part);
}

static bool child_on_right(const level *v, int32_t s) {
  return part_of(v, s) > v->root_part;
}

/* Rank x's place at every level, walking down from [0, p). */
static void walk(const tree *t, int32_t x, level *lv) {
  int64_t lo = 0, hi = t->p;
  int32_t c = t->root;
  for (int l = 0; l < t->levels; l++) {
    int64_t d = t->part[l];
    int32_t parts = (int32_t)((hi - lo + d - 1) / d);
    int32_t jc = (int32_t)((c - lo) / d), jx = (int32_t)((x - lo) / d);
    int32_t sub = jx == jc ? c : (int32_t)(lo + jx * d);
    lv[l] = (level){lo, d, parts, jc, c, -1};
    if (x != c && x == sub)
      lv[l].slot = slot_of(parts, jc, jx);
    lo += jx * d;
    hi = lo + d < hi ? lo + d : hi;
    c = sub;
  }
}

static bool has_children(const level *v, int32_t x) {
  return v->root == x && v->parts > 1;
}

/* Starts round `at` (after empty rounds up to it): a level's slot 0 opens
 * its group, the others are independent of it (each its own peer, its own
 * TEMP slot or a read of the same data). */
static void start_round(crnet__schedule *out, uint32_t at, int32_t slot) {
  crnet__sched_pad(out, at);
  if (slot == 0)
    crnet__sched_round(out);
  else
    crnet__sched_round_independent(out);
}

/* The reduce phase's buffers at one rank. */
typedef struct fold {
  crnet__seg own, acc;
  uint8_t slot_buf;
  uint64_t slot_off; /* slot s at slot_off + s·count of TEMP */
  uint64_t count;
  bool has_data; /* acc holds the rank's own input (and more) */
  bool empty;    /* barrier: messages carry nothing */
} fold;

/* The reduce to the tree's root, from round `first` on: the children's
 * messages level by level bottom up, then the send to the parent. */
static void reduce_phase(crnet__schedule *out, const tree *t, const level *lv,
                         int32_t x, uint32_t first, fold *f) {
  uint32_t base = first;
  for (int l = t->levels - 1; l >= 0; base += (uint32_t)t->rounds[l], l--) {
    const level *v = &lv[l];
    if (v->slot >= 0) {
      start_round(out, base + (uint32_t)v->slot, v->slot);
      crnet__sched_send_peer(out, v->root);
      if (!f->empty) {
        crnet__seg s = f->has_data ? f->acc : f->own;
        crnet__sched_send(out, v->root, s.buf, s.off, s.count);
      }
      return;
    }
    if (!has_children(v, x))
      continue;
    for (int32_t s = 0; s < v->parts - 1; s++) {
      int32_t child = child_of(v, s);
      bool right = child_on_right(v, s);
      start_round(out, base + (uint32_t)s, s);
      crnet__sched_recv_peer(out, child);
      if (f->empty)
        continue;
      if (!f->has_data) {
        /* acc = own (+) child, or child (+) own: the child lands in acc */
        crnet__sched_recv(out, child, f->acc.buf, f->acc.off, f->count);
        if (f->count > 0)
          crnet__sched_reduce(out, f->own, f->acc,
                              right ? CRNET__SRC_LEFT : CRNET__DST_LEFT);
        f->has_data = true;
      } else {
        crnet__seg slot = crnet__seg_make(
            f->slot_buf, f->slot_off + (uint64_t)s * f->count, f->count);
        crnet__sched_recv(out, child, slot.buf, slot.off, slot.count);
        if (f->count > 0)
          crnet__sched_reduce(out, slot, f->acc,
                              right ? CRNET__DST_LEFT : CRNET__SRC_LEFT);
      }
    }
  }
}

/* The bcast from the tree's root, from round `first` on, of RECV[0 ..
 * count) (nothing when empty). */
static void bcast_phase(crnet__schedule *out, const tree *t, const level *lv,
                        int32_t x, uint32_t first, uint64_t count, bool empty) {
  uint32_t base = first;
  for (int l = 0; l < t->levels; base += (uint32_t)t->rounds[l], l++) {
    const level *v = &lv[l];
    if (v->slot >= 0) {
      start_round(out, base + (uint32_t)v->slot, v->slot);
      crnet__sched_recv_peer(out, v->root);
      if (!empty)
        crnet__sched_recv(out, v->root, CRNET__BUF_RECV, 0, count);
    } else if (has_children(v, x)) {
      for (int32_t s = 0; s < v->parts - 1; s++) {
        int32_t child = child_of(v, s);
        start_round(out, base + (uint32_t)s, s);
        crnet__sched_send_peer(out, child);
        if (!empty)
          crnet__sched_send(out, child, CRNET__BUF_RECV, 0, count);
      }
    }
  }
}

/* The most children rank x has at one level (0 for a leaf). */
static int32_t most_children(const tree *t, const level *lv, int32_t x) {
  int32_t most = 0;
  for (int l = 0; l < t->levels; l++)
    if (has_children(&lv[l], x) && lv[l].parts - 1 > most)
      most = lv[l].parts - 1;
  return most;
}

int crnet__knomial_build(crnet__schedule *out, crnet_collective coll, int32_t p,
                         int32_t rank, int32_t root, uint64_t count,
                         bool in_place, int32_t radix) {
  tree t;
  level lv[MAX_LEVELS];
  bool rooted = coll == CRNET_COLL_BCAST || coll == CRNET_COLL_REDUCE;
  if (out == NULL || p < 1 || rank < 0 || rank >= p || radix < 2 ||
      (rooted && (root < 0 || root >= p)))
    return CRNET_EINVAL;
  if (!rooted && coll != CRNET_COLL_ALLREDUCE && coll != CRNET_COLL_BARRIER)
    return CRNET_EINVAL;
  tree_init(&t, p, radix, rooted ? root : 0);
  walk(&t, rank, lv);
  crnet__sched_init(out, p, rank);
  int32_t most = most_children(&t, lv, rank);
  crnet__seg own = crnet__seg_make(CRNET__BUF_SEND, 0, count),
             recv = crnet__seg_make(CRNET__BUF_RECV, 0, count);
  fold f = {own, recv, CRNET__BUF_TEMP, 0, count, in_place, false};
  switch (coll) {
  case CRNET_COLL_BCAST:
    bcast_phase(out, &t, lv, rank, 0, count, false);
    break;
  case CRNET_COLL_REDUCE:
    if (rank != t.root) {
      /* the accumulator in TEMP before the slots; a leaf needs neither */
      f.acc = crnet__seg_make(CRNET__BUF_TEMP, 0, count);
      f.slot_off = count;
      f.has_data = false;
      if (most > 0)
        crnet__sched_need_temp(out, (uint64_t)(most + 1) * count);
    } else {
      crnet__sched_need_temp(out, (uint64_t)most * count);
    }
    reduce_phase(out, &t, lv, rank, 0, &f);
    break;
  case CRNET_COLL_ALLREDUCE:
    crnet__sched_need_temp(out, (uint64_t)most * count);
    reduce_phase(out, &t, lv, rank, 0, &f);
    bcast_phase(out, &t, lv, rank, (uint32_t)t.total, count, false);
    break;
  default: /* barrier */
    f.empty = true;
    f.has_data = true;
    reduce_phase(out, &t, lv, rank, 0, &f);
    bcast_phase(out, &t, lv, rank, (uint32_t)t.total, 0, true);
    break;
  }
  /* The root that had no child (p = 1) still owes its output its input. */
  if (coll != CRNET_COLL_BCAST && coll != CRNET_COLL_BARRIER &&
      rank == t.root && !f.has_data && count > 0) {
    crnet__sched_round(out);
    crnet__sched_copy(out, own, recv);
  }
  return crnet__sched_finish(out);
}

/* --- the registry's row (algorithm.h) --------------------------------------
 *
 * The radix. A level of n messages from (or to) one node costs, with its
 * rounds in flight together, one α for the first message and a fraction
 * CRNET__MODEL_FURTHER_MESSAGE of α for each further one (the node's own work
 * of sending or taking one more; the latencies overlap), and its bytes in
 * full: n·m·β (+ n·m·γ reducing), since they all pass through the one
 * node. So a tree costs Σ_l [(1 + (n_l - 1)·f)·α + n_l·m·(β (+ γ))], twice
 * over for allreduce and barrier (m = 0). A bigger k has fewer levels and
 * more messages per level: it wins while α dominates (small m, large p),
 * k = 2 once the bytes do. The radix is the k in 2 .. 8 of the least such
 * price (the smaller on a tie), with the constants auto prices the call
 * with (shared memory's when call->shm_links): every rank computes the
 * same k from what the call's ranks share.
 *
 * The fraction is CRNET__MODEL_FURTHER_MESSAGE (model.h), the linear
 * gather's further messages in flight (a quarter of a round), the same
 * mechanism: a node's messages of one group of independent rounds.
 *
 * auto's price is that sum (the row's price); the terms are the
 * synchronous-round counts every other row gives (R = S rounds per tree,
 * each moving m), which is what crsched --cost and tests/test_tuning.c
 * hold against the simulator.
 */

#define KNOMIAL_COLLS                                                          \
  (CRNET__COLL_BIT(CRNET_COLL_BCAST) | CRNET__COLL_BIT(CRNET_COLL_REDUCE) |    \
   CRNET__COLL_BIT(CRNET_COLL_BARRIER) |                                       \
   CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE))

typedef struct link_costs {
  double alpha, beta, gamma;
} link_costs;

static void costs_of(const crnet__call *call, link_costs *c) {
  crnet__tuning defaults;
  const crnet__tuning *t = crnet__model_tuning(call, &defaults);
  c->alpha = crnet__tuning_get(
      t, call->shm_links ? CRNET__TUNING_SHM_ALPHA : CRNET__TUNING_ALPHA,
      call->p);
  c->beta = crnet__tuning_get(
      t, call->shm_links ? CRNET__TUNING_SHM_BETA : CRNET__TUNING_BETA,
      call->p);
  c->gamma = crnet__tuning_get(t, CRNET__TUNING_GAMMA, call->p);
}

/* One tree's price: a level of n messages of m bytes each. */
static double tree_seconds(const tree *t, double m, bool reduces,
                           const link_costs *c) {
  double sum = 0;
  for (int l = 0; l < t->levels; l++) {
    double n = t->rounds[l];
    sum += (1 + (n - 1) * CRNET__MODEL_FURTHER_MESSAGE) * c->alpha +
           n * m * (c->beta + (reduces ? c->gamma : 0));
  }
  return sum;
}

static double price_at(const crnet__call *call, int32_t k,
                       const link_costs *c) {
  tree t;
  double m = crnet__model_bytes(call);
  tree_init(&t, call->p, k, 0);
  switch (call->coll) {
  case CRNET_COLL_BCAST:
    return tree_seconds(&t, m, false, c);
  case CRNET_COLL_REDUCE:
    return tree_seconds(&t, m, true, c);
  case CRNET_COLL_ALLREDUCE:
    return tree_seconds(&t, m, true, c) + tree_seconds(&t, m, false, c);
  default:
    return 2 * tree_seconds(&t, 0, false, c);
  }
}

int32_t crnet__knomial_radix(const crnet__call *call) {
  link_costs c;
  int32_t best = 2, last = call->p < CRNET__KNOMIAL_MAX_RADIX
                               ? call->p
                               : CRNET__KNOMIAL_MAX_RADIX;
  double best_seconds;
  if (call->p <= 2)
    return 2;
  costs_of(call, &c);
  best_seconds = price_at(call, 2, &c);
  for (int32_t k = 3; k <= last; k++) {
    double s = price_at(call, k, &c);
    if (s < best_seconds * (1 - 1e-9)) {
      best = k;
      best_seconds = s;
    }
  }
  return best;
}

static int knomial_build(const crnet__call *call, crnet__schedule *out) {
  return crnet__knomial_build(out, call->coll, call->p, call->rank, call->root,
                              call->count, call->in_place,
                              crnet__knomial_radix(call));
}

static bool knomial_terms(const crnet__call *call, crnet__model_coef *c) {
  tree t;
  double s;
  tree_init(&t, call->p, crnet__knomial_radix(call), 0);
  s = t.total;
  switch (call->coll) {
  case CRNET_COLL_BCAST:
    *c = (crnet__model_coef){s, s, 0};
    return true;
  case CRNET_COLL_REDUCE:
    *c = (crnet__model_coef){s, s, s};
    return true;
  case CRNET_COLL_ALLREDUCE:
    *c = (crnet__model_coef){2 * s, 2 * s, s};
    return true;
  case CRNET_COLL_BARRIER:
    *c = (crnet__model_coef){2 * s, 0, 0};
    return true;
  default:
    return false;
  }
}

static int knomial_price(const crnet__call *call, double *seconds) {
  link_costs c;
  if (call->p <= 1) {
    *seconds = 0;
    return 0;
  }
  costs_of(call, &c);
  *seconds = price_at(call, crnet__knomial_radix(call), &c);
  return 0;
}

/* Rank 0's children, at the call's radix. */
static int32_t knomial_peers(const crnet__call *call) {
  return crnet__knomial_tree_rounds(call->p, crnet__knomial_radix(call));
}

const crnet__algorithm crnet__knomial_algorithm = {
    .name = "knomial",
    .id = 16,
    .colls = KNOMIAL_COLLS,
    .in_auto = true,
    .build = knomial_build,
    .terms = knomial_terms,
    .keeps_order = crnet__keeps_order_always,
    .price = knomial_price,
    .peers = knomial_peers,
    .summary = "the k-nomial tree, radix k in 2..8 from the model: "
               "ceil(log_k p) levels of up to k-1 messages in flight, "
               "rank order kept; bcast, reduce, barrier, allreduce"};
