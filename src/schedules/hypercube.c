/* Hypercube collectives: Grama et al., Introduction to Parallel Computing,
 * ch. 4 (recursive doubling allreduce = the all-to-all broadcast pattern
 * with (+); prefix sums, Alg. 4.9), and Rabenseifner's recursive-halving
 * reduce-scatter / allreduce / reduce with the balanced non-power-of-two
 * fold described in the mpich-devel thread "Load imbalance in
 * MPIR_Reduce_redscat_gather" (2017). Restated in
 * ../shared/papers/README.md §4. Names: p processes, rank r, p' the largest
 * power of two <= p, x = p - p', d = log2 p', new rank j of a survivor,
 * partner = j XOR 2^i, msg / result / x of Alg. 4.9. m is the vector length
 * in elements; α latency, β time per element, γ reduction time per element.
 *
 * THE FOLD (non-power-of-two p; x > 0). Ranks 0..2x-1 form pairs (2i, 2i+1).
 *   balanced (default; 2 rounds):
 *     A: 2i sends V[h..m) to 2i+1, 2i+1 sends V[0..h) to 2i (h = floor(m/2));
 *        2i computes V_2i (+) V_2i+1 on [0,h), 2i+1 the same on [h,m);
 *     B: the dropper sends its reduced half to the survivor.
 *   naive (1 round): the dropper sends all of V, the survivor reduces m.
 *   The survivor of pair i is 2i (for reduce with root 2i+1 it is the root:
 *   roles swap, so the root never drops out and no extra round is needed).
 *   Survivors are renumbered j = i for pair i, j = r - x for r >= 2x; new
 *   rank j stands for the contiguous original ranks lo(j)..lo(j+1)-1 with
 *   lo(j) = 2j (j < x), j + x (j >= x), lo(p') = p. Because each survivor
 *   holds the in-order reduction of a contiguous rank interval, and the
 *   intervals are in the order of the new ranks, an order-preserving
 *   power-of-two algorithm on the new ranks preserves rank order overall.
 *   At the end the survivor sends the dropper its result (one more round;
 *   not for reduce). Reduce work: the balanced fold costs every paired rank
 *   m/2 reductions, the naive fold the survivor m (the imbalance the thread
 *   is about: with Rabenseifner's (p'-1)/p'·m after it, the slowest rank
 *   reduces ~1.5m instead of ~2m; the test prints both).
 *   Rounds: +2 (balanced) or +1 (naive) at the start, +1 at the end when the
 *   dropped ranks need output. So with the balanced fold: recursive
 *   doubling allreduce d+3 rounds, Rabenseifner reduce-scatter d+3,
 *   allreduce 2d+3, reduce 2d+2 (one less each with the naive fold); the
 *   allgather, which reduces nothing, folds in one round: d+2.
 *
 * RECURSIVE DOUBLING ALLREDUCE (hc_allreduce). For i = 0..d-1: exchange the
 *   whole vector with new rank j XOR 2^i; V = lower (+) higher. Before round
 *   i each rank holds the in-order reduction over its aligned group of 2^i
 *   new ranks; the partner holds the adjacent group; both compute
 *   L (+) H from the same operands, so all ranks end bitwise identical and
 *   non-commutative operators are fine.
 *   d rounds (p = 2^d); d+3 with the balanced fold (d+2 naive).
 *   Per rank d·m sent, received, reduced: d·(α + mβ + mγ) (+ fold:
 *   2α + mβ + m/2·γ, and α + mβ at the end).
 *   TEMP: m (the message area) unless d = 0, or d = 1 without fold and not
 *   in place.
 *   Example, p = 6 (p' = 4, x = 2), m = 6, balanced:
 *     A  0<->1, 2<->3 swap halves: 0 reduces [0,3), 1 reduces [3,6) ...
 *     B  1 -> 0: [3,6)   3 -> 2: [3,6)        (ranks 4, 5 idle)
 *        new ranks: 0=r0 (ranks 0,1), 1=r2 (2,3), 2=r4, 3=r5
 *     1  r0<->r2, r4<->r5   whole vector, lower (+) higher
 *     2  r0<->r4, r2<->r5
 *     3  r0 -> r1, r2 -> r3 whole result
 *
 * BINOMIAL BROADCAST (hc_bcast; Grama, one-to-all broadcast on a hypercube,
 *   for any p). Virtual rank v = r - root mod p. Round k = 0..L-1 (L =
 *   ceil(log2 p)): every v < 2^k that has the vector sends all of it to
 *   v + 2^k if that is < p; so v receives once, in round floor(log2 v),
 *   and the vector has reached 2^(k+1) ranks after round k. L rounds of the
 *   whole vector: L·(α + mβ), against the circulant's 2L·α + 2m·β (which
 *   scatters the vector and gathers it back): fewer rounds, more volume,
 *   for short vectors. No TEMP; the root's buffer is only read. Example,
 *   p = 6, root 0: round 0: 0 -> 1; round 1: 0 -> 2, 1 -> 3; round 2:
 *   0 -> 4, 1 -> 5.
 *
 * RECURSIVE DOUBLING ALLGATHER (hc_allgather). Any counts. The fold sends
 *   the odd rank's block to 2i (1 round); then in round i new rank j sends
 *   everything it has (original ranks lo(G)..lo(G+2^i)-1, G = its aligned
 *   group: one contiguous range of RECV) to j XOR 2^i and receives the
 *   partner group's range; finally 2i sends all but block 2i+1 to 2i+1.
 *   d rounds (+2 with a fold); m - counts[r] received: d·α + (m - m/p)·β for
 *   equal blocks. Not in place, the own block is sent from SEND (spliced
 *   into the range) and copied into RECV after the last round. No TEMP.
 *
 * RABENSEIFNER REDUCE-SCATTER / ALLREDUCE / REDUCE. The vector is cut into
 *   p' super-blocks, placed at positions t = 0..p'-1 of a "position space".
 *   Recursive halving, i = 0..d-1 (distance 2^i, increasing): new rank j's
 *   window (initially all p' positions) is cut in halves; the rank with bit
 *   i of j clear keeps the lower half, its partner j XOR 2^i the upper;
 *   each sends the other half and reduces what it receives into the kept
 *   half, lower group (+) higher group. The kept partial of j always covers
 *   the aligned group of 2^(i+1) new ranks around j, a contiguous rank
 *   interval, so rank order is kept for non-commutative operators. After d
 *   rounds j holds position bitrev_d(j) fully reduced.
 *     allreduce: super-block b = crnet__block_range(m, p', b) at position
 *       b; then the recursive-doubling allgather in reverse (distance 2^i,
 *       i = d-1..0) copies every position to everyone. 2d rounds (2d+3 with
 *       the balanced fold): 2d·α + 2(p'-1)/p'·m·β + (p'-1)/p'·m·γ; every
 *       element is reduced once, by its owner, and then copied: bitwise
 *       identical results.
 *     reduce-scatter: super-block j = original blocks lo(j)..lo(j+1)-1
 *       (contiguous) at position bitrev_d(j), so new rank j ends with its
 *       own super-block; windows are then strided in memory (segment
 *       lists, no copies). The survivor sends block 2i+1 to its dropper in
 *       one final round. d rounds (d+3): d·α + (p'-1)/p'·m·(β+γ) for equal
 *       blocks. Irregular blocks: correct for any sizes; worst case (all in
 *       one block) d·(α + mβ + mγ).
 *     reduce (to root): the halving as in allreduce, then a binomial gather
 *       to the root's new rank R, reversing the halving (i = d-1..0): the
 *       rank j whose j XOR R has bit i set and no higher bit sends its
 *       window to j XOR 2^i and is done. 2d rounds (2d+2 with the fold):
 *       2d·α + 2(p'-1)/p'·m·β + (p'-1)/p'·m·γ at the root.
 *   Operators: rank order is kept in the fold, the halving and (trivially)
 *   the gathers, so all three accept non-commutative operators; the tests
 *   run them with the affine maps.
 *   TEMP: allreduce / root of reduce: the largest received piece (m/2);
 *   reduce-scatter and non-root ranks of reduce: m (the working vector W,
 *   SEND is read only and RECV holds one block or nothing) + m/2.
 *   Example, p = 5 (p' = 4, x = 1), allreduce, m = 8, balanced fold:
 *     A  0<->1 swap halves (0 keeps [0,4), 1 keeps [4,8))  ranks 2..4 idle
 *     B  1 -> 0: [4,8)        new ranks 0=r0, 1=r2, 2=r3, 3=r4
 *     1  r0<->r2, r3<->r4: low new rank keeps [0,4), high keeps [4,8)
 *     2  r0<->r3: r0 keeps [0,2), r3 [2,4); r2<->r4: r2 [4,6), r4 [6,8)
 *     3  (allgather) r0<->r3, r2<->r4: windows of 2 become 4
 *     4  r0<->r2, r3<->r4: windows of 4 become 8
 *     5  r0 -> r1: all 8
 *
 * PREFIX SUMS (Alg. 4.9; scan and exscan, any p). result = msg = own V;
 *   for i = 0..ceil(log2 p)-1: partner = r XOR 2^i, skipped if >= p;
 *   exchange msg; msg = lower (+) higher; if partner < r, result =
 *   x (+) result (exscan: result starts empty, so rank 0 never writes).
 *   ceil(log2 p) rounds; per rank at most ceil(log2 p)·(α + mβ + 2mγ).
 *   TEMP: 2m (msg and the received x).
 *   Correctness for any p. Let B_i(r) be the aligned block of 2^i ranks
 *   holding r: [lo, lo + 2^i) with lo = r with its low i bits cleared.
 *   Lemma: if B_i(r) lies inside [0, p), at the start of round i
 *   msg_r = V_lo (+) ... (+) V_lo+2^i-1, in order. Induction on i: every
 *   rank of such a block has its partners of rounds < i inside the block,
 *   hence < p, so no round was skipped, and each round combined two
 *   complete adjacent halves, lower on the left. Claim: at the start of
 *   round i, result_r = V_lo (+) ... (+) V_r (exscan: up to V_r-1, empty
 *   when r = lo). In round i, if partner q = r XOR 2^i > r, result is
 *   unchanged and B_i+1(r) adds only ranks above r: still the prefix from
 *   the new lo up to r. If q < r, q = r - 2^i, its block B_i(q) ends at
 *   lo_i(r) <= r < p, so by the lemma msg_q is complete, and
 *   result_r = msg_q (+) result_r is the prefix from lo_i(q) = lo_i+1(r).
 *   A skipped round has q >= p > r, the first case. So a skipped partner
 *   only leaves msg incomplete at ranks whose block B_i+1(r) reaches p or
 *   beyond, and such an incomplete msg travels only into msgs (never into
 *   results) of ranks in blocks that still reach p: precisely, it is only
 *   ever received by lower ranks q = r - 2^k in rounds k where B_k+1(q)
 *   also reaches p, and results only ever absorb messages of blocks that
 *   lie inside [0, p). After ceil(log2 p) rounds lo = 0. The simulator
 *   confirms it for p = 1..64 and larger.
 *   Example, p = 5, scan (rounds 0, 1, 2; - = skipped):
 *     round 0: 0<->1, 2<->3, 4 (5 >= p: -)
 *     round 1: 0<->2, 1<->3, 4 (6: -)
 *     round 2: 0<->4, 1 (5: -), 2 (6: -), 3 (7: -)
 *     rank 4: result = V4, then in round 2 x = msg_0 = V0..V3 (complete:
 *     block [0,4) is inside [0,5)), result = V0..V4. Rank 3's msg after
 *     round 2 would miss V4 but is never used.
 */
#include "hypercube.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "algorithm.h"
#include "alloc.h"
#include "alltoall.h"
#include "crnet.h"

/* ------------------------------------------------------------------------
 * Building context
 */

typedef struct reg {
  uint64_t off, n;
} reg;

typedef struct hc {
  crnet__schedule *s;
  int32_t p, r;
  int32_t pp, x, d; /* p', p - p', log2 p' */
  int fold;
  int32_t root; /* -1 unless reduce */
  uint64_t m;
  /* buffers: the input `in`, the working vector W (vector layout from
   * wbase), the message area M (TEMP from mbase) */
  uint8_t inbuf, wbuf;
  uint64_t wbase, mbase;
  bool wvalid; /* W holds this rank's partial (else the input does) */
  uint64_t *Q; /* super-block b: Q[b] .. Q[b+1] */
  int32_t *pos2blk; /* position -> super-block */
  reg *rg; /* scratch region list, p' + 2 entries */
} hc;

static int32_t floor_pow2(int32_t p) {
  int32_t q = 1;
  while (q <= p / 2)
    q *= 2;
  return q;
}

static int32_t bitrev(int32_t v, int32_t d) {
  int32_t o = 0;
  for (int32_t i = 0; i < d; i++)
    o |= ((v >> i) & 1) << (d - 1 - i);
  return o;
}

/* Original rank range start of new rank j. */
static int32_t lo_of(const hc *h, int32_t j) {
  return j < h->x ? 2 * j : j + h->x;
}

/* Survivor (original rank) of new rank j. */
static int32_t surv(const hc *h, int32_t j) {
  if (j >= h->x)
    return j + h->x;
  if (h->root == 2 * j + 1)
    return h->root;
  return 2 * j;
}

/* New rank of this rank, or -1 if it drops out. */
static int32_t newrank(const hc *h) {
  if (h->r >= 2 * h->x)
    return h->r - h->x;
  return surv(h, h->r / 2) == h->r ? h->r / 2 : -1;
}

static int hc_init(hc *h, crnet__schedule *out, int32_t p, int32_t rank,
                   uint64_t m, int fold) {
  if (out == NULL || p < 1 || rank < 0 || rank >= p ||
      (fold != CRNET__HYPERCUBE_FOLD_BALANCED &&
       fold != CRNET__HYPERCUBE_FOLD_NAIVE))
    return CRNET_EINVAL;
  h->s = out;
  h->p = p;
  h->r = rank;
  h->pp = floor_pow2(p);
  h->x = p - h->pp;
  h->d = 0;
  while ((INT32_C(1) << h->d) < h->pp)
    h->d++;
  h->fold = fold;
  h->root = -1;
  h->m = m;
  h->inbuf = CRNET__BUF_SEND;
  h->wbuf = CRNET__BUF_RECV;
  h->wbase = h->mbase = 0;
  h->wvalid = false;
  h->Q = crnet__malloc(((size_t)h->pp + 1) * sizeof(*h->Q));
  h->pos2blk = crnet__malloc((size_t)h->pp * sizeof(*h->pos2blk));
  h->rg = crnet__malloc(((size_t)h->pp + 2) * sizeof(*h->rg));
  if (h->Q == NULL || h->pos2blk == NULL || h->rg == NULL) {
    free(h->Q);
    free(h->pos2blk);
    free(h->rg);
    return CRNET_ENOMEM;
  }
  crnet__sched_init(out, p, rank);
  return 0;
}

static int hc_done(hc *h) {
  free(h->Q);
  free(h->pos2blk);
  free(h->rg);
  return crnet__sched_finish(h->s);
}

/* Regular super-blocks at positions in order (allreduce, reduce). */
static void blocks_regular(hc *h) {
  h->Q[0] = 0;
  for (int32_t b = 0; b < h->pp; b++) {
    uint64_t off, n;
    crnet__block_range(h->m, h->pp, b, &off, &n);
    h->Q[b + 1] = h->Q[b] + n;
    h->pos2blk[b] = b;
  }
}

static crnet__seg seg(uint8_t buf, uint64_t off, uint64_t n) {
  return crnet__seg_make(buf, off, n);
}

static void step(hc *h, int kind, uint8_t order, crnet__seg src,
                 crnet__seg dst) {
  if (src.count == 0)
    return;
  if (kind == CRNET__STEP_REDUCE)
    crnet__sched_reduce(h->s, src, dst, order);
  else
    crnet__sched_copy(h->s, src, dst);
}

/* Regions (merged, in memory order of positions) of positions [a, b). */
static int regs_of(hc *h, int32_t a, int32_t b) {
  int n = 0;
  for (int32_t t = a; t < b; t++) {
    int32_t k = h->pos2blk[t];
    uint64_t off = h->Q[k], len = h->Q[k + 1] - h->Q[k];
    if (len == 0)
      continue;
    if (n > 0 && h->rg[n - 1].off + h->rg[n - 1].n == off)
      h->rg[n - 1].n += len;
    else
      h->rg[n++] = (reg){off, len};
  }
  return n;
}

/* Sends regions of the vector: from W once it holds the partial. */
static void send_regs(hc *h, int32_t peer, const reg *g, int n) {
  uint8_t buf = h->wvalid ? h->wbuf : h->inbuf;
  uint64_t base = h->wvalid ? h->wbase : 0;
  for (int i = 0; i < n; i++)
    crnet__sched_send(h->s, peer, buf, base + g[i].off, g[i].n);
}

/* Receives the partner's partial of regions and reduces it into W, the
 * lower group's operand on the left. Until W holds a partial, the message
 * lands in W directly and the input is reduced into it; later it lands in
 * M. Marks W valid. */
static void recv_reduce(hc *h, int32_t peer, const reg *g, int n,
                        bool me_lower) {
  if (h->wvalid) {
    uint64_t mo = h->mbase;
    for (int i = 0; i < n; i++) {
      crnet__sched_recv(h->s, peer, CRNET__BUF_TEMP, mo, g[i].n);
      mo += g[i].n;
    }
    crnet__sched_need_temp(h->s, mo);
    mo = h->mbase;
    for (int i = 0; i < n; i++) {
      step(h, CRNET__STEP_REDUCE,
           me_lower ? CRNET__DST_LEFT : CRNET__SRC_LEFT,
           seg(CRNET__BUF_TEMP, mo, g[i].n),
           seg(h->wbuf, h->wbase + g[i].off, g[i].n));
      mo += g[i].n;
    }
  } else {
    for (int i = 0; i < n; i++)
      crnet__sched_recv(h->s, peer, h->wbuf, h->wbase + g[i].off, g[i].n);
    for (int i = 0; i < n; i++)
      step(h, CRNET__STEP_REDUCE,
           me_lower ? CRNET__SRC_LEFT : CRNET__DST_LEFT,
           seg(h->inbuf, g[i].off, g[i].n),
           seg(h->wbuf, h->wbase + g[i].off, g[i].n));
  }
  h->wvalid = true;
}

static int fold_rounds(const hc *h) {
  if (h->x == 0)
    return 0;
  return h->fold == CRNET__HYPERCUBE_FOLD_BALANCED ? 2 : 1;
}

/* The fold of the reducing collectives (see the file comment). Ranks
 * outside the pairs get empty rounds, so round numbers stay aligned. */
static void fold_in(hc *h) {
  int nr = fold_rounds(h);
  if (nr == 0)
    return;
  if (h->r >= 2 * h->x) {
    for (int i = 0; i < nr; i++)
      crnet__sched_round(h->s);
    return;
  }
  int32_t e = h->r & ~1, o = e + 1;
  bool even = h->r == e;
  int32_t peer = even ? o : e;
  int32_t sv = surv(h, e / 2);
  bool survivor = h->r == sv;
  reg all = {0, h->m};
  crnet__sched_round(h->s);
  if (h->fold == CRNET__HYPERCUBE_FOLD_NAIVE) {
    if (survivor)
      recv_reduce(h, peer, &all, 1, even);
    else
      send_regs(h, peer, &all, 1);
    return;
  }
  uint64_t hm = h->m / 2;
  reg lo = {0, hm}, hi = {hm, h->m - hm};
  send_regs(h, peer, even ? &hi : &lo, 1);
  recv_reduce(h, peer, even ? &lo : &hi, 1, even);
  crnet__sched_round(h->s);
  const reg *mine = even ? &lo : &hi, *other = even ? &hi : &lo;
  if (survivor)
    crnet__sched_recv(h->s, peer, h->wbuf, h->wbase + other->off, other->n);
  else
    send_regs(h, peer, mine, 1);
}

/* The dropper of this rank's pair, or -1. */
static int32_t dropper_of(const hc *h) {
  if (h->r >= 2 * h->x)
    return -1;
  int32_t e = h->r & ~1;
  return surv(h, e / 2) == e ? e + 1 : e;
}

/* Recursive halving over new ranks. Leaves [*pa, *pa + 1) as this rank's
 * window (its fully reduced position). */
static void halving(hc *h, int32_t j, int32_t *pa) {
  int32_t a = 0, w = h->pp;
  for (int32_t i = 0; i < h->d; i++) {
    int32_t half = w / 2, q = j ^ (INT32_C(1) << i);
    bool lower = (j & (INT32_C(1) << i)) == 0;
    int32_t ka = lower ? a : a + half, ga = lower ? a + half : a;
    crnet__sched_round(h->s);
    int n = regs_of(h, ga, ga + half);
    send_regs(h, surv(h, q), h->rg, n);
    n = regs_of(h, ka, ka + half);
    recv_reduce(h, surv(h, q), h->rg, n, lower);
    a = ka;
    w = half;
  }
  *pa = a;
}

/* The allgather phase (reverse of the halving), copying into W. */
static void doubling_gather(hc *h, int32_t j, int32_t a) {
  int32_t w = 1;
  for (int32_t i = h->d - 1; i >= 0; i--) {
    int32_t q = j ^ (INT32_C(1) << i);
    bool lower = (j & (INT32_C(1) << i)) == 0;
    int32_t pa = lower ? a + w : a - w;
    crnet__sched_round(h->s);
    int n = regs_of(h, a, a + w);
    send_regs(h, surv(h, q), h->rg, n);
    n = regs_of(h, pa, pa + w);
    for (int k = 0; k < n; k++)
      crnet__sched_recv(h->s, surv(h, q), h->wbuf, h->wbase + h->rg[k].off,
                        h->rg[k].n);
    a = lower ? a : pa;
    w *= 2;
  }
}

static void empty_rounds(hc *h, int n) {
  for (int i = 0; i < n; i++)
    crnet__sched_round(h->s);
}

/* p = 1, not in place: the result is the input. */
static void copy_all(hc *h, uint64_t n) {
  crnet__sched_round(h->s);
  step(h, CRNET__STEP_COPY, CRNET__SRC_LEFT, seg(CRNET__BUF_SEND, 0, n),
       seg(CRNET__BUF_RECV, 0, n));
}

/* ------------------------------------------------------------------------
 * Recursive doubling
 */

int crnet__hypercube_allreduce_fold(crnet__schedule *out, int32_t p,
                                    int32_t rank, uint64_t count, bool in_place,
                                    int fold) {
  hc h;
  int rc = hc_init(&h, out, p, rank, count, fold);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&h, count);
    return hc_done(&h);
  }
  h.inbuf = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  h.wvalid = in_place;
  fold_in(&h);
  int32_t j = newrank(&h);
  reg all = {0, count};
  if (j < 0) {
    empty_rounds(&h, h.d);
    crnet__sched_round(out);
    crnet__sched_recv(out, h.r & ~1, CRNET__BUF_RECV, 0, count);
    return hc_done(&h);
  }
  for (int32_t i = 0; i < h.d; i++) {
    int32_t q = surv(&h, j ^ (INT32_C(1) << i));
    crnet__sched_round(out);
    send_regs(&h, q, &all, 1);
    recv_reduce(&h, q, &all, 1, (j & (INT32_C(1) << i)) == 0);
  }
  int32_t dr = dropper_of(&h);
  if (dr >= 0) {
    crnet__sched_round(out);
    send_regs(&h, dr, &all, 1);
  }
  return hc_done(&h);
}

int crnet__hypercube_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                               uint64_t count, bool in_place) {
  return crnet__hypercube_allreduce_fold(out, p, rank, count, in_place,
                                         CRNET__HYPERCUBE_FOLD_BALANCED);
}

/* Sends the blocks of original ranks [a, b) from RECV, this rank's own block
 * from SEND when not in place. */
static void send_blocks(hc *h, int32_t peer, const uint64_t *P, int32_t a,
                        int32_t b, bool in_place) {
  if (a >= b)
    return;
  if (in_place || h->r < a || h->r >= b) {
    crnet__sched_send(h->s, peer, CRNET__BUF_RECV, P[a], P[b] - P[a]);
    return;
  }
  crnet__sched_send(h->s, peer, CRNET__BUF_RECV, P[a], P[h->r] - P[a]);
  crnet__sched_send(h->s, peer, CRNET__BUF_SEND, 0, P[h->r + 1] - P[h->r]);
  crnet__sched_send(h->s, peer, CRNET__BUF_RECV, P[h->r + 1],
                    P[b] - P[h->r + 1]);
}

int crnet__hypercube_allgather(crnet__schedule *out, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place) {
  hc h;
  int brc;
  uint64_t *P = crnet__block_offsets(counts, p, &brc);
  if (P == NULL)
    return brc;
  int rc = hc_init(&h, out, p, rank, P[p], CRNET__HYPERCUBE_FOLD_BALANCED);
  if (rc != 0) {
    free(P);
    return rc;
  }
  uint64_t cr = counts[rank];
  if (p == 1) {
    if (!in_place)
      copy_all(&h, cr);
    free(P);
    return hc_done(&h);
  }
  int32_t j = newrank(&h), dr = dropper_of(&h);
  if (h.x > 0) {
    crnet__sched_round(out);
    if (j < 0)
      send_blocks(&h, rank - 1, P, rank, rank + 1, in_place);
    else if (dr >= 0)
      crnet__sched_recv(out, dr, CRNET__BUF_RECV, P[dr], counts[dr]);
  }
  if (j < 0) {
    empty_rounds(&h, h.d);
    crnet__sched_round(out);
    crnet__sched_recv(out, rank - 1, CRNET__BUF_RECV, 0, P[rank]);
    crnet__sched_recv(out, rank - 1, CRNET__BUF_RECV, P[rank + 1],
                      P[p] - P[rank + 1]);
  } else {
    for (int32_t i = 0; i < h.d; i++) {
      int32_t bit = INT32_C(1) << i, q = j ^ bit;
      int32_t g = j & ~(bit - 1), pg = q & ~(bit - 1);
      crnet__sched_round(out);
      send_blocks(&h, surv(&h, q), P, lo_of(&h, g), lo_of(&h, g + bit),
                  in_place);
      int32_t a = lo_of(&h, pg), b = lo_of(&h, pg + bit);
      crnet__sched_recv(out, surv(&h, q), CRNET__BUF_RECV, P[a], P[b] - P[a]);
    }
    if (dr >= 0) {
      crnet__sched_round(out);
      send_blocks(&h, dr, P, 0, dr, in_place);
      send_blocks(&h, dr, P, dr + 1, p, in_place);
    }
  }
  if (!in_place)
    step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, seg(CRNET__BUF_SEND, 0, cr),
         seg(CRNET__BUF_RECV, P[rank], cr));
  free(P);
  return hc_done(&h);
}

/* ------------------------------------------------------------------------
 * Rabenseifner
 */

int crnet__rabenseifner_allreduce_fold(crnet__schedule *out, int32_t p,
                                       int32_t rank, uint64_t count,
                                       bool in_place, int fold) {
  hc h;
  int rc = hc_init(&h, out, p, rank, count, fold);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&h, count);
    return hc_done(&h);
  }
  blocks_regular(&h);
  h.inbuf = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  h.wvalid = in_place;
  fold_in(&h);
  int32_t j = newrank(&h);
  if (j < 0) {
    empty_rounds(&h, 2 * h.d);
    crnet__sched_round(out);
    crnet__sched_recv(out, h.r & ~1, CRNET__BUF_RECV, 0, count);
    return hc_done(&h);
  }
  int32_t a;
  halving(&h, j, &a);
  doubling_gather(&h, j, a);
  int32_t dr = dropper_of(&h);
  if (dr >= 0) {
    reg all = {0, count};
    crnet__sched_round(out);
    send_regs(&h, dr, &all, 1);
  }
  return hc_done(&h);
}

int crnet__rabenseifner_allreduce(crnet__schedule *out, int32_t p, int32_t rank,
                                  uint64_t count, bool in_place) {
  return crnet__rabenseifner_allreduce_fold(out, p, rank, count, in_place,
                                            CRNET__HYPERCUBE_FOLD_BALANCED);
}

int crnet__rabenseifner_reduce_scatter_fold(crnet__schedule *out, int32_t p,
                                            int32_t rank,
                                            const uint64_t *counts,
                                            bool in_place, int fold) {
  hc h;
  int brc;
  uint64_t *P = crnet__block_offsets(counts, p, &brc);
  if (P == NULL)
    return brc;
  int rc = hc_init(&h, out, p, rank, P[p], fold);
  if (rc != 0) {
    free(P);
    return rc;
  }
  uint64_t m = P[p], cr = counts[rank];
  if (p == 1) {
    if (!in_place)
      copy_all(&h, cr);
    free(P);
    return hc_done(&h);
  }
  /* super-block j (original blocks lo(j)..lo(j+1)-1) at position
   * bitrev(j), so that new rank j ends with it */
  for (int32_t b = 0; b <= h.pp; b++)
    h.Q[b] = P[lo_of(&h, b)];
  for (int32_t t = 0; t < h.pp; t++)
    h.pos2blk[t] = bitrev(t, h.d);
  h.inbuf = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  h.wbuf = CRNET__BUF_TEMP;
  h.mbase = m;
  crnet__sched_need_temp(out, m);
  fold_in(&h);
  int32_t j = newrank(&h);
  if (j < 0) {
    empty_rounds(&h, h.d);
    crnet__sched_round(out);
    crnet__sched_recv(out, h.r & ~1, CRNET__BUF_RECV, 0, cr);
  } else {
    int32_t a;
    halving(&h, j, &a);
    assert(h.pos2blk[a] == j);
    int32_t dr = dropper_of(&h);
    if (dr >= 0) {
      crnet__sched_round(out);
      crnet__sched_send(out, dr, CRNET__BUF_TEMP, P[dr], counts[dr]);
    }
    step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT,
         seg(CRNET__BUF_TEMP, P[rank], cr), seg(CRNET__BUF_RECV, 0, cr));
  }
  free(P);
  return hc_done(&h);
}

int crnet__rabenseifner_reduce_scatter(crnet__schedule *out, int32_t p,
                                       int32_t rank, const uint64_t *counts,
                                       bool in_place) {
  return crnet__rabenseifner_reduce_scatter_fold(
      out, p, rank, counts, in_place, CRNET__HYPERCUBE_FOLD_BALANCED);
}

int crnet__rabenseifner_reduce_fold(crnet__schedule *out, int32_t p,
                                    int32_t rank, uint64_t count, int32_t root,
                                    bool in_place, int fold) {
  hc h;
  if (root < 0 || root >= p)
    return CRNET_EINVAL;
  int rc = hc_init(&h, out, p, rank, count, fold);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&h, count);
    return hc_done(&h);
  }
  h.root = root;
  blocks_regular(&h);
  bool is_root = rank == root;
  if (is_root) {
    h.inbuf = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
    h.wvalid = in_place;
  } else {
    h.wbuf = CRNET__BUF_TEMP;
    h.mbase = count;
    crnet__sched_need_temp(out, count);
  }
  fold_in(&h);
  int32_t j = newrank(&h);
  if (j < 0)
    return hc_done(&h);
  int32_t a;
  halving(&h, j, &a);
  /* binomial gather to the root's new rank R, reversing the halving */
  int32_t R = root >= 2 * h.x ? root - h.x : root / 2, rel = j ^ R, w = 1;
  for (int32_t i = h.d - 1; i >= 0; i--) {
    int32_t bit = INT32_C(1) << i, q = j ^ bit;
    bool lower = (j & bit) == 0;
    int32_t pa = lower ? a + w : a - w;
    crnet__sched_round(out);
    if ((rel >> (i + 1)) == 0) {
      if (rel & bit) {
        int n = regs_of(&h, a, a + w);
        send_regs(&h, surv(&h, q), h.rg, n);
        break;
      }
      int n = regs_of(&h, pa, pa + w);
      for (int k = 0; k < n; k++)
        crnet__sched_recv(out, surv(&h, q), h.wbuf, h.wbase + h.rg[k].off,
                          h.rg[k].n);
    }
    a = lower ? a : pa;
    w *= 2;
  }
  return hc_done(&h);
}

int crnet__rabenseifner_reduce(crnet__schedule *out, int32_t p, int32_t rank,
                               uint64_t count, int32_t root, bool in_place) {
  return crnet__rabenseifner_reduce_fold(out, p, rank, count, root, in_place,
                                         CRNET__HYPERCUBE_FOLD_BALANCED);
}

/* ------------------------------------------------------------------------
 * Prefix sums (Alg. 4.9)
 */

static int prefix(crnet__schedule *out, int32_t p, int32_t rank,
                  uint64_t count, bool in_place, bool exclusive) {
  hc h;
  int rc = hc_init(&h, out, p, rank, count, CRNET__HYPERCUBE_FOLD_BALANCED);
  if (rc != 0)
    return rc;
  uint8_t in = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  crnet__seg res = seg(CRNET__BUF_RECV, 0, count);
  crnet__seg own = seg(in, 0, count);
  crnet__seg msg = seg(CRNET__BUF_TEMP, 0, count);
  crnet__seg xs = seg(CRNET__BUF_TEMP, count, count);
  bool msg_t = false;                           /* msg lives in TEMP */
  bool res_w = in_place && !exclusive;          /* result is in RECV */
  for (int32_t i = 0; (INT64_C(1) << i) < p; i++) {
    int32_t q = rank ^ (INT32_C(1) << i);
    crnet__sched_round(out);
    if (q >= p)
      continue;
    bool below = q < rank;
    crnet__sched_send(out, q, msg_t ? CRNET__BUF_TEMP : in, 0, count);
    if (!msg_t) {
      /* x lands in msg's TEMP slot; msg = lower (+) higher */
      crnet__sched_recv(out, q, CRNET__BUF_TEMP, 0, count);
      crnet__sched_need_temp(out, count);
      if (!below) {
        step(&h, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, own, msg);
      } else if (!exclusive) {
        step(&h, CRNET__STEP_REDUCE, CRNET__DST_LEFT, own, msg);
        step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, msg, res);
        res_w = true;
      } else if (in_place) {
        /* result = x goes where own still is: keep own in xs first */
        crnet__sched_need_temp(out, 2 * count);
        step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, own, xs);
        step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, msg, res);
        step(&h, CRNET__STEP_REDUCE, CRNET__DST_LEFT, xs, msg);
        res_w = true;
      } else {
        step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, msg, res);
        step(&h, CRNET__STEP_REDUCE, CRNET__DST_LEFT, own, msg);
        res_w = true;
      }
      msg_t = true;
      continue;
    }
    crnet__sched_recv(out, q, CRNET__BUF_TEMP, count, count);
    crnet__sched_need_temp(out, 2 * count);
    if (!below) {
      step(&h, CRNET__STEP_REDUCE, CRNET__DST_LEFT, xs, msg);
      continue;
    }
    step(&h, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, xs, msg);
    if (res_w) {
      step(&h, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, xs, res);
    } else {
      /* first lower partner after msg moved: result = x (+) own, or x */
      step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, xs, res);
      if (!exclusive)
        step(&h, CRNET__STEP_REDUCE, CRNET__DST_LEFT, own, res);
      res_w = true;
    }
  }
  if (!exclusive && !res_w) { /* rank 0 (or p = 1): result = own */
    if (out->nrounds == 0)
      crnet__sched_round(out);
    step(&h, CRNET__STEP_COPY, CRNET__SRC_LEFT, own, res);
  }
  return hc_done(&h);
}

int crnet__hypercube_scan(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place) {
  return prefix(out, p, rank, count, in_place, false);
}

int crnet__hypercube_exscan(crnet__schedule *out, int32_t p, int32_t rank,
                            uint64_t count, bool in_place) {
  return prefix(out, p, rank, count, in_place, true);
}

int crnet__hypercube_bcast(crnet__schedule *out, int32_t p, int32_t rank,
                           uint64_t count, int32_t root) {
  if (p < 1 || rank < 0 || rank >= p || root < 0 || root >= p)
    return CRNET_EINVAL;
  crnet__sched_init(out, p, rank);
  if (p == 1 || count == 0)
    return crnet__sched_finish(out);
  int64_t v = ((int64_t)rank - root + p) % p;
  for (int k = 0; (INT64_C(1) << k) < p; k++) {
    int64_t half = INT64_C(1) << k;
    crnet__sched_round(out);
    if (v < half && v + half < p) {
      int32_t to = (int32_t)((v + half + root) % p);
      crnet__sched_send(out, to, CRNET__BUF_RECV, 0, count);
    } else if (v >= half && v < 2 * half) {
      int32_t from = (int32_t)((v - half + root) % p);
      crnet__sched_recv(out, from, CRNET__BUF_RECV, 0, count);
    }
  }
  return crnet__sched_finish(out);
}

/* --- the registry's rows (algorithm.h) -------------------------------------
 *
 * Model terms (R, B/m, G/m), the simulator's synchronous-round counts for
 * equal blocks: d = floor(log2 p), p' = 2^d, q = (p-1)/p, q' = (p'-1)/p',
 * L = ceil(log2 p), f = 1 when p is not a power of two (the fold), else 0.
 *
 *   hypercube     allreduce   d + 3f, d + 2f, d + f/2
 *                 allgather   d + 2f, q + f, -
 *                 bcast       L, L, -  (the binomial tree)
 *                 scan        L, L, 2L - 1 (2L - 2 at p = 2^d + 1 > 2)
 *                 all-to-all  d, d/2, -  (p = p' only; alltoall.c)
 *   rabenseifner  allreduce        2d + 3f, 2q' + 2f, q' + f/2
 *                 reduce-scatter   d, q, q; with the fold d + 3, 2, q' + 1/2
 *                 reduce           2d + 2f, 2q' + f, q' + f/2
 *
 * Where the fold moves unequal blocks (rabenseifner reduce-scatter,
 * hypercube allgather, p not a power of two) B and G are within 25%
 * (tests/test_tuning.c). Across hosts their rounds are priced one by one
 * (host_rounds): round i pairs ranks at distance 2^i.
 */

static int hypercube_build(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__hypercube_allreduce(out, c->p, c->rank, c->count,
                                      c->in_place);
  case CRNET_COLL_ALLGATHER:
    return crnet__hypercube_allgather(out, c->p, c->rank, c->counts,
                                      c->in_place);
  case CRNET_COLL_SCAN:
    return c->exclusive ? crnet__hypercube_exscan(out, c->p, c->rank,
                                                  c->count, c->in_place)
                        : crnet__hypercube_scan(out, c->p, c->rank, c->count,
                                                c->in_place);
  case CRNET_COLL_ALLTOALL:
    return crnet__hypercube_alltoall(out, c->p, c->rank, c->count,
                                     c->in_place);
  case CRNET_COLL_BCAST:
    return crnet__hypercube_bcast(out, c->p, c->rank, c->count, c->root);
  default:
    return CRNET_EINVAL;
  }
}

static bool hypercube_terms(const crnet__call *call, crnet__model_coef *c) {
  int32_t p = call->p;
  int L = crnet__ceil_log2(p), d = crnet__floor_log2(p);
  double q = (double)(p - 1) / p, f = (1 << d) != p;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    *c = (crnet__model_coef){d + 3 * f, d + 2 * f, d + f / 2};
    return true;
  case CRNET_COLL_ALLGATHER:
    *c = (crnet__model_coef){d + 2 * f, q + f, 0};
    return true;
  case CRNET_COLL_BCAST:
    *c = (crnet__model_coef){L, L, 0};
    return true;
  case CRNET_COLL_SCAN:
    /* Alg. 4.9 reduces twice per round but the first; p = 2^d + 1 saves
     * one more */
    *c = (crnet__model_coef){L, L,
                             p == (1 << d) + 1 && p > 2 ? 2 * L - 2
                                                        : 2 * L - 1};
    return true;
  case CRNET_COLL_ALLTOALL:
    if (f)
      return false;
    *c = (crnet__model_coef){d, d / 2.0, 0};
    return true;
  default:
    return false;
  }
}

static int hypercube_check(const crnet__call *call, char *why,
                           size_t whylen) {
  if (call->coll == CRNET_COLL_ALLTOALL && (call->p & (call->p - 1)) != 0) {
    snprintf(why, whylen,
             "schedule 'hypercube' does %s only when the number of ranks is "
             "a power of two, not %d (use 'bruck' or 'pairwise')",
             crnet_collective_name(call->coll), (int)call->p);
    return CRNET_EUNSUPPORTED;
  }
  return 0;
}

static enum crnet__round_shape hypercube_host_rounds(const crnet__call *call) {
  return call->coll == CRNET_COLL_ALLREDUCE   ? CRNET__ROUNDS_DOUBLING
         : call->coll == CRNET_COLL_ALLGATHER ? CRNET__ROUNDS_GATHERING
                                              : CRNET__ROUNDS_UNPRICED;
}

/* Bcast and scan: a partner per round, ceil(log2 p); the rest fold at a
 * p that is not a power of two: floor(log2 p) partners and the fold's. */
static int32_t hypercube_peers(const crnet__call *call) {
  int32_t p = call->p;
  int d = crnet__floor_log2(p);
  if (call->coll == CRNET_COLL_BCAST || call->coll == CRNET_COLL_SCAN)
    return crnet__ceil_log2(p);
  return d + ((INT64_C(1) << d) != p);
}

const crnet__algorithm crnet__hypercube_algorithm = {
    .name = "hypercube",
    .id = 6,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_ALLGATHER) |
             CRNET__COLL_BIT(CRNET_COLL_SCAN) |
             CRNET__COLL_BIT(CRNET_COLL_ALLTOALL) |
             CRNET__COLL_BIT(CRNET_COLL_BCAST),
    .in_auto = true,
    .build = hypercube_build,
    .terms = hypercube_terms,
    .keeps_order = crnet__keeps_order_always,
    .check = hypercube_check,
    .host_rounds = hypercube_host_rounds,
    .peers = hypercube_peers,
    .summary = "recursive doubling, with the balanced fold at any p; scan "
               "by Alg. 4.9; bcast by the binomial tree; all-to-all at "
               "powers of two"};

static int rabenseifner_build(const crnet__call *c, crnet__schedule *out) {
  switch (c->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__rabenseifner_allreduce(out, c->p, c->rank, c->count,
                                         c->in_place);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__rabenseifner_reduce_scatter(out, c->p, c->rank, c->counts,
                                              c->in_place);
  case CRNET_COLL_REDUCE:
    return crnet__rabenseifner_reduce(out, c->p, c->rank, c->count, c->root,
                                      c->in_place);
  default:
    return CRNET_EINVAL;
  }
}

static bool rabenseifner_terms(const crnet__call *call,
                               crnet__model_coef *c) {
  int32_t p = call->p;
  int d = crnet__floor_log2(p);
  double q = (double)(p - 1) / p, pp = (double)(INT64_C(1) << d),
         qq = (pp - 1) / pp, f = (1 << d) != p;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    *c = (crnet__model_coef){2 * d + 3 * f, 2 * qq + 2 * f, qq + f / 2};
    return true;
  case CRNET_COLL_REDUCE_SCATTER:
    *c = f ? (crnet__model_coef){d + 3.0, 2, qq + 0.5}
           : (crnet__model_coef){d, q, q};
    return true;
  case CRNET_COLL_REDUCE:
    *c = (crnet__model_coef){2 * d + 2 * f, 2 * qq + f, qq + f / 2};
    return true;
  default:
    return false;
  }
}

static enum crnet__round_shape
rabenseifner_host_rounds(const crnet__call *call) {
  return call->coll == CRNET_COLL_ALLREDUCE ? CRNET__ROUNDS_HALVING_AND_BACK
         : call->coll == CRNET_COLL_REDUCE_SCATTER ? CRNET__ROUNDS_HALVING
                                                   : CRNET__ROUNDS_UNPRICED;
}

const crnet__algorithm crnet__rabenseifner_algorithm = {
    .name = "rabenseifner",
    .id = 7,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE_SCATTER) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE),
    .in_auto = true,
    .build = rabenseifner_build,
    .terms = rabenseifner_terms,
    .keeps_order = crnet__keeps_order_always,
    .host_rounds = rabenseifner_host_rounds,
    .peers = hypercube_peers,
    .summary = "Rabenseifner's recursive halving, then doubling back, with "
               "the balanced fold at any p; rank order kept"};
