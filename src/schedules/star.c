/* Star graph collectives: E. Oh, H. Choi, D. Primeaux, "An All-Reduce
 * Operation in Star Networks Using All-to-All Broadcast Communication
 * Pattern", ICCS 2005 (restated in ../shared/papers/README.md §5): the
 * all-to-all broadcast of its §3 (our allgather) and the all-reduce of its
 * §4 (Fig. 2, Theorems 2 and 3), for vectors, with a fold for p that is not
 * a factorial. Names: the n-star S_n, p' = n! nodes, label
 * sigma = sigma_1 .. sigma_n (a permutation of 1..n), link k joining sigma
 * to the label with sigma_1 and sigma_k swapped (2 <= k <= n), S_k the
 * sub-star of labels agreeing with sigma in positions k+1..n, T_s the sum
 * of the S_k-1 with symbol s at position k, the paper's result buffer (our
 * RECV) and outgoing buffer (TEMP slot 0), d its propagation link. m is the
 * vector length in elements, C = n(n-1)/2; α latency, β time per element,
 * γ reduction time per element.
 *
 * LABELS AND RANKS. Label sigma is number v = sum over i of c_i·(i-1)!,
 *   c_i = #{h < i : sigma_h < sigma_i}: the lexicographic rank of the label
 *   read backwards, sigma_n .. sigma_1. (Read forwards, the sub-stars would
 *   be scattered over the ranks.) So every S_k is a contiguous range of k!
 *   labels, and its k sub-stars S_k-1 are consecutive sub-ranges in the
 *   order of their symbol at position k. Both the rank order of the
 *   allreduce and the one-segment messages of the allgather rest on this.
 *
 * ALLREDUCE (star_reduce). Level k = 2..n; before it every node holds in
 *   its result buffer T_sigma_k, the sum of its S_k-1:
 *     link k:         send the result buffer to sigma∘(1 k), receive T_sigma_1
 *                     into outgoing (the neighbor lies in the S_k-1 whose
 *                     position-k symbol is our sigma_1);
 *     links k-1..2:   send outgoing, unchanged, along link d; receive T_sigma_d
 *                     into TEMP slot k-d;
 *     then:           result = T_s1 (+) T_s2 (+) ... (+) T_sk, a left fold in
 *                     ascending symbol order s1 < ... < sk.
 *   Exactly once: on link d, node v receives from u = v∘(1 d) what u got on
 *   link k, the T of symbol sigma_1(u) = sigma_d(v). So v holds T_sigma_k
 *   (own), T_sigma_1 (link k) and T_sigma_d (d = k-1..2): the symbols
 *   sigma_1..sigma_k, distinct, and exactly the k symbols free in the S_k,
 *   one per S_k-1. This is the per-node form of Theorem 2's counting.
 *   What needed fixing for vectors:
 *   1. Fig. 2, step 4, says "send the local sum along link d". Read
 *      literally, as the node's own sub-star sum or as its running result
 *      buffer, that is wrong from S_3 on (brute force on S_3: forwarding
 *      the own sum counts two of the six contributions twice and misses
 *      two, at every node; forwarding the running result counts two
 *      twice). The value to forward is the one received on link k, kept
 *      unchanged in the outgoing buffer: what §3 does for broadcast and
 *      what Theorem 2's proof assumes; step 5 (result + outgoing) then adds
 *      it once.
 *   2. The paper adds in arrival order (own, sigma_1, sigma_k-1, ...,
 *      sigma_2), which differs from node to node: floating-point sums would
 *      differ between ranks, and the order is not rank order. We keep the
 *      level's sums in TEMP and fold them in symbol order at the end of the
 *      level; this costs TEMP of (n-1)·m instead of m.
 *   Operators (rank order and one tree). Claim: after level k, every node
 *   of an S_k holds V_a (+) ... (+) V_b-1 over the S_k's contiguous rank
 *   range [a, b) (the ranks of its labels' fold groups), built with the
 *   same tree at each node. k = 1: the node's own (group) value. Step: the
 *   k values of level k are those of the S_k-1 inside the S_k (bitwise
 *   equal at all their nodes, by induction), whose rank ranges are adjacent
 *   and ordered by symbol; every node folds them in that order with the
 *   same bracketing. So associative, non-commutative operators are fine,
 *   and results are bitwise identical on all ranks.
 *   Rounds C (Theorem 3: T(k) = T(k-1) + k-1; Table 2: S_3 3, S_4 6, S_5 10,
 *   S_6 15, S_7 21, ...); links are perfect matchings, so every rank sends
 *   and receives the whole vector in every round: C·(α + mβ + mγ).
 *   TEMP: (n-1)·m (k-1 vectors at level k); none for n = 2 not in place
 *   without a fold (the partner's vector lands in RECV, the own is reduced
 *   in from SEND).
 *
 * THE FOLD (p not a factorial, x = p - p' > 0). Unlike the hypercube's, x
 *   may exceed p' (p = 719: p' = 120, x = 599), so a survivor may take
 *   several ranks. The ranks form p' groups of consecutive ranks, the first
 *   p mod p' of them of G = ceil(p/p') ranks (G <= n+1), the others of
 *   floor(p/p'); the group's first rank (member 0) is the survivor with
 *   label v = its group's index. For x < p' these are the hypercube's pairs
 *   (2i, 2i+1), i < x, then single ranks. A group of g ranks:
 *     A (g-1 rounds; the balanced fold generalised): the vector is cut into
 *       g blocks (crnet__block_range); a direct reduce-scatter: in round t
 *       member j sends its input block j+t to member j+t and receives block
 *       j from member j-t (mod g). Every member reduces g-1 blocks of m/g,
 *       no member more than its share; for g = 2 this is the hypercube's
 *       exchange of halves. Block j ends as
 *       (V_lo (+) (V_lo+1 (+) ... V_lo+j)) (+) (V_lo+j+1 (+) (... V_lo+g-1)):
 *       lower members arrive as j-1, ..., 0 and go on the left, higher ones
 *       as g-1, ..., j+1 and are nested into R, which goes on the right.
 *       Rank order; computed once, by member j, and only copied after.
 *     B (ceil(log2 g) rounds): binomial gather of the blocks to member 0.
 *     the star on the survivors, whose values are contiguous rank ranges in
 *       label order (so the claim above holds).
 *     C (ceil(log2 g) rounds): binomial broadcast of the whole result from
 *       member 0.
 *   Smaller groups leave the rest of A and B empty, so the star starts in
 *   the same round everywhere. Rounds: C + (G-1) + 2·ceil(log2 G); +3 for
 *   G = 2, as for the hypercube. Examples: p = 3, 4: 4; p = 5: 7; p = 7:
 *   6; p = 23: 10; p = 100: 16; p = 121: 13; p = 719: 21; p = 721, 1000: 18.
 *   Member 0's extra cost: (g-1)·(α + m/g·(β+γ)) in A, (g-1)/g·m received
 *   in B, ceil(log2 g)·(α + mβ) in C. TEMP: 2·ceil(m/g) in A.
 *
 * ALLGATHER (star_gather; the paper's §3). The same rounds with
 *   concatenation: at level k send the own S_k-1's blocks (the meta
 *   message) along link k, forward the received ones unchanged along links
 *   k-1..2, receiving on link d the blocks of the S_k-1 with symbol
 *   sigma_d. By the argument above every block reaches every rank exactly
 *   once (the paper's NODUP). A sub-star is a range of labels, so of
 *   groups, so of ranks: every message is one contiguous range of RECV
 *   (with the own block spliced in from SEND when not in place, and copied
 *   into RECV after the last round). Rounds C; per rank m - counts[r]
 *   received, and for equal blocks as much sent: C·α + (p-1)/p·m·β.
 *   Fold: a binomial gather of the group's blocks to member 0, the star,
 *   and a binomial broadcast of all the blocks the receiver did not collect
 *   in the gather, so every block still arrives once. Rounds
 *   C + 2·ceil(log2 G). No TEMP.
 *
 * Example, p = 7 (n = 3, p' = 6, x = 1): groups {0,1}, {2}, ..., {6}, so
 *   labels v = 0..5 are ranks 0, 2, 3, 4, 5, 6, with sigma_1 sigma_2 sigma_3
 *   = 321, 231, 312, 132, 213, 123. Link 2 pairs labels (0,1) (2,3) (4,5),
 *   link 3 pairs (0,5) (1,3) (2,4). Allreduce, m = 6, in place:
 *     0 (A)       0<->1 swap halves: 0 reduces [0,3), 1 reduces [3,6)
 *     1 (B)       1 -> 0: [3,6)                      (ranks 2..6 idle)
 *     2 (link 2)  0<->2, 3<->4, 5<->6 whole vector: S_2 sums
 *                 V0..V2 (ranks 0, 2), V3..V4 (3, 4), V5..V6 (5, 6)
 *     3 (link 3)  0<->6, 2<->4, 3<->5 into outgoing
 *     4 (link 2)  0<->2, 3<->4, 5<->6 forward outgoing; then e.g. rank 0
 *                 (321): own T_1 = V0..V2, outgoing T_3 = V5..V6, link 2
 *                 brought T_2 = V3..V4: result (T_1 (+) T_2) (+) T_3
 *     5 (C)       0 -> 1 whole result
 *   6 rounds = 3 + 1 + 2. The allgather: 0 <- 1 (block 1), then rounds 1..3
 *   as 2..4 above with the blocks of ranks {0,1,2}, {3,4}, {5,6}, then
 *   0 -> 1 all but block 1: 5 rounds.
 */
#include "star.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "crnet.h"

/* 12! is the largest factorial in an int32_t. */
#define STAR_MAX_N 12

/* ------------------------------------------------------------------------
 * Building context
 */

typedef struct star {
  crnet__schedule *s;
  int32_t p, r;
  int n;                        /* S_n */
  int32_t fact[STAR_MAX_N + 1]; /* fact[k] = k! */
  int32_t pp;                   /* p' = n! */
  int32_t base, rem;            /* rem groups of base+1 ranks, then base */
  int32_t G;                    /* the largest group */
  int32_t q;                    /* this rank's group = its survivor's label */
  int32_t lo, g, j;             /* group's first rank, size; member index */
  int sigma[STAR_MAX_N + 1];    /* the label of q, sigma[1..n] */
} star;

/* n with n! <= p < (n+1)!; *pp = n!. */
static int star_order(int32_t p, int32_t *pp) {
  int n = 1;
  int64_t f = 1;
  while (f * (n + 1) <= p) {
    n++;
    f *= n;
  }
  *pp = (int32_t)f;
  return n;
}

int crnet__star_n(int32_t p) {
  if (p < 1)
    return CRNET_EINVAL;
  int32_t pp;
  return star_order(p, &pp);
}

int crnet__star_rounds(int32_t p) {
  if (p < 1)
    return CRNET_EINVAL;
  int32_t pp;
  int n = star_order(p, &pp);
  int32_t G = (int32_t)(((int64_t)p + pp - 1) / pp);
  int c = n * (n - 1) / 2;
  return G == 1 ? c : c + (G - 1) + 2 * crnet__ceil_log2(G);
}

/* First rank of group v (v = p' gives p). */
static int32_t group_lo(const star *st, int32_t v) {
  return (int32_t)((int64_t)v * st->base + (v < st->rem ? v : st->rem));
}

static int32_t group_of(const star *st, int32_t r) {
  int64_t big = (int64_t)st->rem * (st->base + 1);
  if (r < big)
    return (int32_t)(r / (st->base + 1));
  return (int32_t)(st->rem + (r - big) / st->base);
}

/* The label sigma[1..n] of v: digit c_i = (v / (i-1)!) mod i picks the
 * c_i-th smallest symbol not used by positions i+1..n. */
static void unrank(const star *st, int32_t v, int *sigma) {
  int avail[STAR_MAX_N];
  int na = st->n;
  for (int k = 0; k < na; k++)
    avail[k] = k + 1;
  for (int i = st->n; i >= 1; i--) {
    int c = (int)(v / st->fact[i - 1] % i);
    sigma[i] = avail[c];
    for (int k = c; k + 1 < na; k++)
      avail[k] = avail[k + 1];
    na--;
  }
}

static int32_t rank_of(const star *st, const int *sigma) {
  int32_t v = 0;
  for (int i = 2; i <= st->n; i++) {
    int c = 0;
    for (int k = 1; k < i; k++)
      c += sigma[k] < sigma[i];
    v += c * st->fact[i - 1];
  }
  return v;
}

/* The label across link k: first and k-th symbols swapped. */
static int32_t neighbor(const star *st, int k) {
  int t[STAR_MAX_N + 1];
  memcpy(t, st->sigma, sizeof(t));
  t[1] = st->sigma[k];
  t[k] = st->sigma[1];
  return rank_of(st, t);
}

/* First label of the S_k-1 inside this node's S_k that has symbol s at
 * position k: its place among the k symbols free in the S_k. */
static int32_t substar(const star *st, int k, int s) {
  int c = 0;
  for (int i = 1; i <= k; i++)
    c += st->sigma[i] < s;
  return st->q - st->q % st->fact[k] + c * st->fact[k - 1];
}

static int star_init(star *st, crnet__schedule *out, int32_t p, int32_t rank) {
  if (out == NULL || p < 1 || rank < 0 || rank >= p)
    return CRNET_EINVAL;
  st->s = out;
  st->p = p;
  st->r = rank;
  st->n = star_order(p, &st->pp);
  st->fact[0] = 1;
  for (int k = 1; k <= st->n; k++)
    st->fact[k] = st->fact[k - 1] * k;
  st->base = p / st->pp;
  st->rem = p % st->pp;
  st->G = st->base + (st->rem > 0);
  st->q = group_of(st, rank);
  st->lo = group_lo(st, st->q);
  st->g = group_lo(st, st->q + 1) - st->lo;
  st->j = rank - st->lo;
  unrank(st, st->q, st->sigma);
  crnet__sched_init(out, p, rank);
  return 0;
}

/* Empty rounds up to round index k, so that every rank starts a phase in
 * the same round (frames are matched by round number). */
static void pad_to(star *st, uint32_t k) {
  while (st->s->nrounds < k && !st->s->oom)
    crnet__sched_round(st->s);
}

static crnet__seg seg(uint8_t buf, uint64_t off, uint64_t n) {
  return crnet__seg_make(buf, off, n);
}

/* p = 1, not in place: the result is the input. */
static void copy_all(star *st, uint64_t n) {
  crnet__sched_round(st->s);
  crnet__sched_copy(st->s, seg(CRNET__BUF_SEND, 0, n),
                    seg(CRNET__BUF_RECV, 0, n));
}

/* ------------------------------------------------------------------------
 * Allreduce
 */

/* The elements of the fold blocks [a, b) of this group: the vector is cut
 * into g blocks by crnet__block_range, block i reduced by member i. */
static void gblocks(const star *st, uint64_t count, int32_t a, int32_t b,
                    uint64_t *off, uint64_t *len) {
  uint64_t n, end = count;
  crnet__block_range(count, st->g, a, off, &n);
  if (b < st->g)
    crnet__block_range(count, st->g, b, &end, &n);
  *len = end - *off;
}

/* Fold A: direct reduce-scatter in the group, rounds t = 1..g-1: member j
 * sends its input block j+t to member j+t and receives block j from member
 * j-t (mod g). Lower members arrive as j-1, ..., 0 and each goes on the
 * left of the partial; higher ones arrive as g-1, ..., j+1 and are
 * collected in R, each on R's left; R goes on the right at the end. So
 * block j = V_lo (+) ... (+) V_lo+g-1 in rank order. */
static void fold_reduce_scatter(star *st, uint64_t count, bool in_place) {
  crnet__schedule *s = st->s;
  int32_t g = st->g, j = st->j;
  uint8_t in = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  uint64_t off, len, bmax = (count + (uint64_t)g - 1) / (uint64_t)g;
  gblocks(st, count, j, j + 1, &off, &len);
  crnet__seg acc = seg(CRNET__BUF_RECV, off, len), own = seg(in, off, len);
  crnet__seg slot = seg(CRNET__BUF_TEMP, bmax, len);
  /* Member 0 not in place has no lower arrivals: R can build up in its
   * own RECV block, and its input joins on the left at the end. */
  bool r_in_acc = !in_place && j == 0;
  crnet__seg R = r_in_acc ? acc : seg(CRNET__BUF_TEMP, 0, len);
  bool acc_set = in_place, r_set = false;
  crnet__sched_need_temp(s, 2 * bmax);
  for (int32_t t = 1; t < g; t++) {
    int32_t to = (j + t) % g, from = (j - t + g) % g;
    uint64_t to_off, to_len;
    gblocks(st, count, to, to + 1, &to_off, &to_len);
    crnet__sched_round(s);
    crnet__sched_send(s, st->lo + to, in, to_off, to_len);
    if (from < j && !acc_set) {
      /* not in place: the first arrival lands in place, own on the right */
      crnet__sched_recv(s, st->lo + from, CRNET__BUF_RECV, off, len);
      crnet__sched_reduce(s, own, acc, CRNET__DST_LEFT);
      acc_set = true;
    } else if (from < j) {
      crnet__sched_recv(s, st->lo + from, CRNET__BUF_TEMP, bmax, len);
      crnet__sched_reduce(s, slot, acc, CRNET__SRC_LEFT);
    } else if (!r_set) {
      crnet__sched_recv(s, st->lo + from, R.buf, R.off, len);
      r_set = true;
    } else {
      crnet__sched_recv(s, st->lo + from, CRNET__BUF_TEMP, bmax, len);
      crnet__sched_reduce(s, slot, R, CRNET__SRC_LEFT);
    }
  }
  if (r_set && r_in_acc)
    crnet__sched_reduce(s, own, acc, CRNET__SRC_LEFT);
  else if (r_set)
    crnet__sched_reduce(s, R, acc, CRNET__DST_LEFT);
}

/* Fold B: binomial gather of the reduced blocks to member 0, the survivor.
 * In the round of bit 2^t, member j with j mod 2^(t+1) = 2^t sends the
 * blocks it holds, [j, j+2^t), to member j-2^t and is done. */
static void fold_gather(star *st, uint64_t count) {
  int32_t g = st->g, j = st->j;
  for (int32_t bit = 1; bit < g; bit *= 2) {
    uint64_t off, len;
    crnet__sched_round(st->s);
    if ((j & (2 * bit - 1)) == bit) {
      gblocks(st, count, j, j + bit < g ? j + bit : g, &off, &len);
      crnet__sched_send(st->s, st->lo + j - bit, CRNET__BUF_RECV, off, len);
    } else if ((j & (2 * bit - 1)) == 0 && j + bit < g) {
      gblocks(st, count, j + bit, j + 2 * bit < g ? j + 2 * bit : g, &off,
              &len);
      crnet__sched_recv(st->s, st->lo + j + bit, CRNET__BUF_RECV, off, len);
    }
  }
}

/* The end of level k: the result buffer holds T_sigma_k (this node's
 * S_k-1), outgoing (TEMP slot 0) holds T_sigma_1, and slot k-d holds
 * T_sigma_d, d = k-1..2. They are combined as a left fold in ascending
 * symbol order, which is the order of their label ranges, into the result
 * buffer. Every node of the S_k holds the same k values (bitwise, by
 * induction) and builds the same tree. */
static void combine_level(star *st, int k, uint64_t count) {
  crnet__schedule *s = st->s;
  int sym[STAR_MAX_N];
  crnet__seg opnd[STAR_MAX_N];
  sym[0] = st->sigma[k];
  opnd[0] = seg(CRNET__BUF_RECV, 0, count);
  for (int i = 1; i < k; i++) {
    sym[i] = st->sigma[i == 1 ? 1 : k - i + 1];
    opnd[i] = seg(CRNET__BUF_TEMP, (uint64_t)(i - 1) * count, count);
  }
  for (int i = 1; i < k; i++)
    for (int h = i; h > 0 && sym[h - 1] > sym[h]; h--) {
      int ts = sym[h];
      crnet__seg tg = opnd[h];
      sym[h] = sym[h - 1];
      opnd[h] = opnd[h - 1];
      sym[h - 1] = ts;
      opnd[h - 1] = tg;
    }
  int own = 0;
  while (opnd[own].buf != CRNET__BUF_RECV)
    own++;
  /* the operands left of the own one gather in the lowest one's slot */
  for (int i = 1; i < own; i++)
    crnet__sched_reduce(s, opnd[i], opnd[0], CRNET__DST_LEFT);
  if (own > 0)
    crnet__sched_reduce(s, opnd[0], opnd[own], CRNET__SRC_LEFT);
  for (int i = own + 1; i < k; i++)
    crnet__sched_reduce(s, opnd[i], opnd[own], CRNET__DST_LEFT);
}

/* The star phase (survivors only): levels k = 2..n, each one round on link
 * k and k-2 rounds on links k-1..2. `set`: RECV (the result buffer) holds
 * this node's value; if not (level 2, not in place, no fold), the value is
 * still in SEND and the partner's lands in RECV. */
static void star_reduce(star *st, uint64_t count, bool set) {
  crnet__schedule *s = st->s;
  const int *sigma = st->sigma;
  crnet__seg result = seg(CRNET__BUF_RECV, 0, count);
  for (int k = 2; k <= st->n; k++) {
    int32_t peer = group_lo(st, neighbor(st, k));
    crnet__sched_round(s);
    if (!set) {
      assert(k == 2);
      crnet__sched_send(s, peer, CRNET__BUF_SEND, 0, count);
      crnet__sched_recv(s, peer, CRNET__BUF_RECV, 0, count);
      crnet__sched_reduce(s, seg(CRNET__BUF_SEND, 0, count), result,
                          sigma[2] < sigma[1] ? CRNET__SRC_LEFT
                                              : CRNET__DST_LEFT);
      set = true;
      continue;
    }
    crnet__sched_send(s, peer, CRNET__BUF_RECV, 0, count);
    crnet__sched_recv(s, peer, CRNET__BUF_TEMP, 0, count);
    crnet__sched_need_temp(s, (uint64_t)(k - 1) * count);
    /* propagate the outgoing value, unchanged, along links k-1..2 */
    for (int d = k - 1; d >= 2; d--) {
      peer = group_lo(st, neighbor(st, d));
      crnet__sched_round(s);
      crnet__sched_send(s, peer, CRNET__BUF_TEMP, 0, count);
      crnet__sched_recv(s, peer, CRNET__BUF_TEMP, (uint64_t)(k - d) * count,
                        count);
    }
    combine_level(st, k, count);
  }
}

/* Fold C: binomial broadcast of the result from member 0: in the round of
 * bit 2^t, members j < 2^t send to j+2^t. */
static void fold_bcast(star *st, uint64_t count) {
  int32_t g = st->g, j = st->j;
  for (int32_t bit = 1; bit < g; bit *= 2) {
    crnet__sched_round(st->s);
    if (j < bit && j + bit < g)
      crnet__sched_send(st->s, st->lo + j + bit, CRNET__BUF_RECV, 0, count);
    else if (j >= bit && j < 2 * bit)
      crnet__sched_recv(st->s, st->lo + j - bit, CRNET__BUF_RECV, 0, count);
  }
}

int crnet__star_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place) {
  star st;
  /* TEMP is (n-1)·count elements: it must stay countable */
  if (count > UINT64_MAX / STAR_MAX_N)
    return CRNET_EINVAL;
  int rc = star_init(&st, out, p, rank);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&st, count);
    return crnet__sched_finish(out);
  }
  uint32_t A = (uint32_t)st.G - 1, B = (uint32_t)crnet__ceil_log2(st.G);
  uint32_t C = (uint32_t)(st.n * (st.n - 1) / 2);
  bool set = in_place;
  if (st.g > 1) {
    fold_reduce_scatter(&st, count, in_place);
    pad_to(&st, A);
    fold_gather(&st, count);
    set = true;
  }
  pad_to(&st, A + B);
  if (st.j == 0)
    star_reduce(&st, count, set);
  pad_to(&st, A + B + C);
  fold_bcast(&st, count);
  return crnet__sched_finish(out);
}

/* ------------------------------------------------------------------------
 * Allgather
 */

/* Sends the blocks of ranks [a, b) from RECV, this rank's own block from
 * SEND when not in place. */
static void send_ranks(star *st, int32_t peer, const uint64_t *P, int32_t a,
                       int32_t b, bool in_place) {
  crnet__schedule *s = st->s;
  int32_t r = st->r;
  if (a >= b)
    return;
  if (in_place || r < a || r >= b) {
    crnet__sched_send(s, peer, CRNET__BUF_RECV, P[a], P[b] - P[a]);
    return;
  }
  crnet__sched_send(s, peer, CRNET__BUF_RECV, P[a], P[r] - P[a]);
  crnet__sched_send(s, peer, CRNET__BUF_SEND, 0, P[r + 1] - P[r]);
  crnet__sched_send(s, peer, CRNET__BUF_RECV, P[r + 1], P[b] - P[r + 1]);
}

static void recv_ranks(star *st, int32_t peer, const uint64_t *P, int32_t a,
                       int32_t b) {
  if (a < b)
    crnet__sched_recv(st->s, peer, CRNET__BUF_RECV, P[a], P[b] - P[a]);
}

/* Fold: the binomial gather of fold_gather, with rank blocks. */
static void fold_gather_blocks(star *st, const uint64_t *P, bool in_place) {
  int32_t g = st->g, j = st->j, lo = st->lo;
  for (int32_t bit = 1; bit < g; bit *= 2) {
    crnet__sched_round(st->s);
    if ((j & (2 * bit - 1)) == bit)
      send_ranks(st, lo + j - bit, P, lo + j, lo + (j + bit < g ? j + bit : g),
                 in_place);
    else if ((j & (2 * bit - 1)) == 0 && j + bit < g)
      recv_ranks(st, lo + j + bit, P, lo + j + bit,
                 lo + (j + 2 * bit < g ? j + 2 * bit : g));
  }
}

/* The star phase with concatenation: at level k, send this node's S_k-1
 * (its meta message) along link k, receive the neighbor's, forward that
 * one unchanged along links k-1..2, and receive on link d the S_k-1 with
 * symbol sigma_d at position k. */
static void star_gather(star *st, const uint64_t *P, bool in_place) {
  for (int k = 2; k <= st->n; k++) {
    int32_t f = st->fact[k - 1], w = neighbor(st, k);
    int32_t mine = st->q - st->q % f, theirs = w - w % f;
    assert(theirs == substar(st, k, st->sigma[1]));
    int32_t peer = group_lo(st, w);
    crnet__sched_round(st->s);
    send_ranks(st, peer, P, group_lo(st, mine), group_lo(st, mine + f),
               in_place);
    recv_ranks(st, peer, P, group_lo(st, theirs), group_lo(st, theirs + f));
    for (int d = k - 1; d >= 2; d--) {
      int32_t from = substar(st, k, st->sigma[d]);
      peer = group_lo(st, neighbor(st, d));
      crnet__sched_round(st->s);
      send_ranks(st, peer, P, group_lo(st, theirs), group_lo(st, theirs + f),
                 in_place);
      recv_ranks(st, peer, P, group_lo(st, from), group_lo(st, from + f));
    }
  }
}

/* The ranks whose blocks member j collected in the gather (what it sent
 * on): [j, j + lowest set bit of j), within the group. */
static int32_t collected_end(const star *st, int32_t j) {
  int32_t e = j + (j & -j);
  return st->lo + (e < st->g ? e : st->g);
}

/* Fold: binomial broadcast, in the round of bit 2^t from member j < 2^t to
 * j+2^t, of every block but those the receiver collected in the gather, so
 * that no block reaches a rank twice. */
static void fold_bcast_blocks(star *st, const uint64_t *P, bool in_place) {
  int32_t g = st->g, j = st->j, lo = st->lo;
  for (int32_t bit = 1; bit < g; bit *= 2) {
    crnet__sched_round(st->s);
    if (j < bit && j + bit < g) {
      int32_t t = lo + j + bit, e = collected_end(st, j + bit);
      send_ranks(st, t, P, 0, t, in_place);
      send_ranks(st, t, P, e, st->p, in_place);
    } else if (j >= bit && j < 2 * bit) {
      recv_ranks(st, lo + j - bit, P, 0, st->r);
      recv_ranks(st, lo + j - bit, P, collected_end(st, j), st->p);
    }
  }
}

int crnet__star_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *counts, bool in_place) {
  star st;
  if (counts == NULL)
    return CRNET_EINVAL;
  int rc = star_init(&st, out, p, rank);
  if (rc != 0)
    return rc;
  uint64_t *P = crnet__block_offsets(counts, p, &rc);
  if (P == NULL)
    return rc;
  uint64_t cr = counts[rank];
  if (p == 1) {
    if (!in_place)
      copy_all(&st, cr);
    free(P);
    return crnet__sched_finish(out);
  }
  uint32_t B = (uint32_t)crnet__ceil_log2(st.G);
  uint32_t C = (uint32_t)(st.n * (st.n - 1) / 2);
  fold_gather_blocks(&st, P, in_place);
  pad_to(&st, B);
  if (st.j == 0)
    star_gather(&st, P, in_place);
  pad_to(&st, B + C);
  fold_bcast_blocks(&st, P, in_place);
  if (!in_place)
    crnet__sched_copy(out, seg(CRNET__BUF_SEND, 0, cr),
                      seg(CRNET__BUF_RECV, P[rank], cr));
  free(P);
  return crnet__sched_finish(out);
}

/* --- the registry's row (algorithm.h) --------------------------------------
 *
 * Model terms (R, B/m, G/m), covered only at p = n!: allreduce n(n-1)/2
 * for all three; allgather n(n-1)/2, (p-1)/p, -.
 */

/* n when p = n! (n >= 2), else 0. */
static int factorial_of(int32_t p) {
  int64_t f = 1;
  for (int n = 2; f <= p; n++) {
    f *= n;
    if (f == p)
      return n;
  }
  return 0;
}

static int star_build(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__star_allreduce(out, c->p, c->rank, c->count, c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__star_allgather(out, c->p, c->rank, c->counts, c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static bool star_terms(const crnet__call *call, crnet__model_coef *c) {
  int n = factorial_of(call->p);
  double rounds = n * (n - 1) / 2.0;
  if (n == 0)
    return false;
  if (call->coll == CRNET_COLL_ALLREDUCE)
    *c = (crnet__model_coef){rounds, rounds, rounds};
  else if (call->coll == CRNET_COLL_ALLGATHER)
    *c = (crnet__model_coef){rounds, (double)(call->p - 1) / call->p, 0};
  else
    return false;
  return true;
}

/* The star graph S_n for the least n with n! >= p: n - 1 neighbours. */
static int32_t star_peers(const crnet__call *call) {
  int n = 1;
  for (int64_t fact = 1; fact < call->p;)
    fact *= ++n;
  return n - 1;
}

const crnet__algorithm crnet__star_algorithm = {
    .name = "star",
    .id = 8,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_ALLGATHER),
    .in_auto = true,
    .build = star_build,
    .terms = star_terms,
    .keeps_order = crnet__keeps_order_always,
    .peers = star_peers,
    .summary = "the star graph S_n's schedule (Träff), rank order kept; "
               "priced at p = n!"};
