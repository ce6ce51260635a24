/* Circulant collectives: J. L. Träff, "Optimal, non-pipelined reduce-scatter
 * and allreduce algorithms" (circulant graphs), Algorithms 1 and 2, restated
 * in ../shared/papers/README.md §1-2. Names follow the paper: p processes,
 * rank r, the rotated block array R[i] = V[(r+i) mod p], the received blocks
 * T, the skip s and the previous skip s', to-rank t and from-rank f.
 *
 * REDUCE-SCATTER (Alg. 1). s = p; while s > 1: s' = s, s = next skip;
 * t = r+s, f = r-s (mod p); send R[s..s'-1] to t || receive T[0..s'-s-1]
 * from f; R[i] = R[i] (+) T[i] for i < s'-s. At the end R[0] is block r.
 *
 *   Skip sequences (s[0] = p > s[1] > ... > s[n-1] = 1, n-1 rounds):
 *     circulant           s = ceil(s'/2)                 ceil(log2 p) rounds
 *     circulant-doubling  p, 2^(k-1), ..., 2, 1          ceil(log2 p) rounds
 *     circulant-linear    p, p-1, ..., 1                 p-1 rounds
 *     circulant-sqrt      s = max(s'-c, ceil(s'/2)),     ~ sqrt(p)+log2(2c)
 *                         c = ceil(sqrt p)               rounds
 *
 *   Validity (the form of Cor. 2 the halving loop needs): the sequence is
 *   correct iff it starts at p, strictly decreases to 1, and s' <= 2s in
 *   every round. Proof. Fix a block b. Before a round with (s', s) the
 *   partial sums of block b live at the s' ranks b-i, i = 0..s'-1 (at index
 *   i of their R), and the sets of ranks whose contributions they hold
 *   partition {0..p-1}. (Initially s' = p and each rank holds its own V[b]:
 *   singletons.) In the round, the rank holding index i in [s, s') sends it
 *   to rank b-i+s, where block b has index i-s in [0, s'-s); s'-s <= s makes
 *   that index one that is kept (< s), so the partial is combined with the
 *   one already there; indices >= s are never read again. Each kept index
 *   < s'-s receives exactly one partial and indices in [s'-s, s) receive
 *   none, so after the round the partials live at the s ranks b-i, i < s,
 *   and still partition all ranks. With s = 1 rank b alone holds the sum of
 *   all contributions, each once. If some s' > 2s, index s'-s-1 >= s would
 *   be combined into an entry that is never read again and its
 *   contributions are lost, so the condition is also necessary. (It implies
 *   Cor. 2's "every 0 < i < p is a sum of distinct skips": greedily
 *   subtract skips.) Doubling: with 2^(k-1) < p <= 2^k the first round has
 *   s' = p <= 2 * 2^(k-1), the rest halve exactly. Sqrt: s'-c is used only
 *   while it is >= ceil(s'/2). The simulator confirms every sequence for
 *   every p it runs.
 *
 *   Cost per rank, for every valid sequence: n-1 rounds; exactly p-1 blocks
 *   sent, p-1 received and p-1 reduced (the rounds move s'-s blocks each and
 *   the differences sum to p-1). Equal blocks of m/p: (n-1)·α +
 *   (p-1)/p·m·(β+γ). Irregular blocks (Cor. 3): correct for any sizes,
 *   zero-size blocks included; in the worst case (all data in one block)
 *   (n-1)·(α + mβ + mγ).
 *
 *   Zero copy. A range of R indices is at most two contiguous ranges of the
 *   user's vector (blocks r+i wrap at p), so every send and receive is a
 *   segment list straight on the buffers. An index's partial sum lives first
 *   in the input (SEND, or RECV in place) and, once reduced, in its "home":
 *     allreduce          RECV at the block's position (the output);
 *     reduce-scatter     index 0 in RECV[0..count_r); the others in TEMP, in
 *                        R order (in place: RECV at the block's position,
 *                        and index 0 in TEMP unless block r starts at 0,
 *                        then one final copy of count_r to RECV[0..));
 *     reduce             the root: RECV; other ranks: TEMP, in R order.
 *   The first time an index is received it lands straight in its home (when
 *   the home is not the input) and is reduced with the input there; later
 *   receives go to M, one message area in TEMP, and are reduced into the
 *   home. SEND is never written. Extra memory (TEMP), with D = the largest
 *   s'-s (floor(p/2) blocks for halving skips):
 *     allreduce          not in place: the largest later message (< m/4
 *                        for halving); in place: the largest message;
 *     reduce-scatter     D-1 blocks of partials + the largest later message
 *                        (~3m/4 for halving; m/2 is inherent: SEND is read
 *                        only and RECV holds one block); in place: the
 *                        largest message + count_r;
 *     reduce             root as allreduce; others D blocks (or more, up to
 *                        what the gather forwards) + the largest message.
 *
 *   Operators. Algorithm 1 combines partials in an order that depends on r;
 *   it needs a commutative (+) (the order is fixed, so every rank computes
 *   the same, deterministic result). For circulant-linear (every s'-s = 1)
 *   the builders preserve rank order instead, see below; for the halving,
 *   doubling and sqrt sequences they cannot, and selection must not give
 *   them a non-commutative operator.
 *
 *   Rank order with circulant-linear. With s'-s = 1 only R[0] is ever
 *   reduced, so every send R[s] (s >= 1) is the sender's raw input, and in
 *   the round with skip s rank r receives V_f[r] from f = r-s, for
 *   s = p-1, ..., 1: f = r+1, r+2, ..., p-1 (while s > r), then 0, 1, ...,
 *   r-1 (once s <= r). So two accumulators grow as contiguous rank
 *   intervals: A = V_r (+) V_r+1 (+) ... (each arrival on the right,
 *   order DST_LEFT) and B = V_0 (+) ... (+) V_r-1 (the first arrival, from
 *   rank 0, lands in B; later ones on the right, DST_LEFT). Finally
 *   A = B (+) A (SRC_LEFT with src = B): V_0 (+) ... (+) V_p-1, in rank
 *   order. Still p-1 reductions per rank: (p-1-r) + (r-1) + 1. B costs
 *   count_r of TEMP (rank p-1, which has no A arrivals, accumulates B in its
 *   home and puts its own input on the right at the end instead).
 *
 * ALLREDUCE (Alg. 2). The reduce-scatter, then the allgather phase: the
 * rounds in reverse, in the opposite direction: t = r-s, f = r+s; send
 * R[0..s'-s-1] || receive R[s..s'-1], straight into RECV. 2(n-1) rounds,
 * 2(p-1) blocks sent and received, p-1 reduced: 2·ceil(log2 p)·α +
 * 2(p-1)/p·m·β + (p-1)/p·m·γ for halving skips. Every block is reduced once,
 * by its owner, and then copied: all ranks get bitwise identical results.
 *
 * ALLGATHER: the allgather phase alone; rank r starts with R[0] = its block
 * (always sent from SEND, and copied to its place in RECV after the last
 * round, so the copy never delays a message).
 * n-1 rounds, p-1 blocks received per rank.
 *
 * REDUCE (to any root): the reduce-scatter, then the allgather phase pruned
 * to what reaches the root: walking the allgather rounds backwards from
 * "the root needs R[0..p)", every rank's need is a prefix R[0..k) (it keeps
 * R[0..min(k,s)) and must get R[s..min(k,s')) from r+s, which then needs
 * R[0..min(k,s')-s)), so each rank sends only that prefix. 2(n-1) rounds at
 * most; the root receives exactly p-1 blocks in the gather; the other ranks
 * forward less. Rank order (circulant-linear) is kept: the gather only
 * copies.
 *
 * BCAST (from any root): a scatter along the reduce-scatter rounds, pruned to
 * the root's data (rank x sends R[s..min(h,s')) of the prefix R[0..h) it
 * holds; by the partition argument above every block travels one path and
 * every non-root rank receives once), which leaves every rank with its own
 * block, then the allgather phase, minus the messages to the root. 2(n-1)
 * rounds; p-1 blocks received in the allgather plus at most one message in
 * the scatter (van de Geijn's
 * scatter-allgather, ~2m·β for large m instead of log2 p·m·β).
 *
 * BARRIER: zero-length messages along the reduce-scatter rounds (send to
 * r+s, receive from r-s): n-1 rounds (ceil(log2 p) for halving skips, the
 * dissemination barrier's count). Correct because the reduce-scatter's data
 * dependencies carry every rank's contribution to every rank.
 *
 * Worked example, p = 22, halving: s = 22, 11, 6, 3, 2, 1; rank 21
 * receives, round by round, from 10, 15, 18, 19, 20. Small odd p = 7,
 * halving s = 7, 4, 2, 1, rank 0 (R[i] = block i):
 *
 *   round  s'  s   t  f   sends R[s..s'-1]   receives T into R[0..s'-s-1]
 *     1     7  4   4  3   blocks 4,5,6       blocks 0,1,2 (from rank 3)
 *     2     4  2   2  5   blocks 2,3         blocks 0,1   (from rank 5)
 *     3     2  1   1  6   block 1            block 0      (from rank 6)
 *   allgather phase of allreduce (t = r-s, f = r+s):
 *     4     2  1   6  1   block 0            block 1
 *     5     4  2   5  2   blocks 0,1         blocks 2,3
 *     6     7  4   3  4   blocks 0,1,2       blocks 4,5,6
 *   3 + 2 + 1 = 6 = p-1 blocks each way per phase.
 */
#include "circulant.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "alloc.h"
#include "crnet.h"
#include "model.h"

int crnet__circulant_skips(const char *name, int32_t p, int32_t *s) {
  if (name == NULL || p < 1)
    return CRNET_EINVAL;
  int32_t n = 0;
  s[n++] = p;
  if (strcmp(name, "circulant") == 0) {
    while (s[n - 1] > 1) {
      s[n] = s[n - 1] - s[n - 1] / 2;
      n++;
    }
  } else if (strcmp(name, "circulant-doubling") == 0) {
    int32_t k = 1;
    while (k < p / 2 + p % 2) /* largest power of two < p */
      k *= 2;
    for (; p > 1 && k >= 1; k /= 2)
      s[n++] = k;
  } else if (strcmp(name, "circulant-linear") == 0) {
    for (int32_t v = p - 1; v >= 1; v--)
      s[n++] = v;
  } else if (strcmp(name, "circulant-sqrt") == 0) {
    int32_t c = 1;
    while ((int64_t)c * c < p)
      c++;
    while (s[n - 1] > 1) {
      int32_t v = s[n - 1], half = v - v / 2;
      s[n] = v - c > half ? v - c : half;
      n++;
    }
  } else {
    return CRNET_EINVAL;
  }
  return n;
}

int crnet__circulant_skips_check(const int32_t *s, int32_t n, int32_t p) {
  if (p < 1 || n < 1 || s[0] != p || s[n - 1] != 1)
    return CRNET_EINVAL;
  for (int32_t j = 1; j < n; j++)
    if (s[j] >= s[j - 1] || (int64_t)s[j - 1] > 2 * (int64_t)s[j])
      return CRNET_EINVAL;
  return 0;
}

bool crnet__circulant_skips_ordered(const int32_t *s, int32_t n) {
  for (int32_t j = 1; j < n; j++)
    if (s[j - 1] - s[j] != 1)
      return false;
  return true;
}

/* ------------------------------------------------------------------------
 * Building context: the rank's view of the vector as R indices.
 */

typedef struct ctx {
  crnet__schedule *s;
  int32_t p, r;
  const int32_t *sk; /* skips, sk[0] = p .. sk[n-1] = 1 */
  int32_t n;
  uint64_t *P; /* P[b] = offset of block b, P[p] = m */
} ctx;

static int32_t mod(const ctx *c, int64_t x) {
  x %= c->p;
  return (int32_t)(x < 0 ? x + c->p : x);
}

/* Elements of R[0..i), i <= p. */
static uint64_t cum(const ctx *c, int32_t i) {
  int64_t e = (int64_t)c->r + i;
  if (e <= c->p)
    return c->P[e] - c->P[c->r];
  return (c->P[c->p] - c->P[c->r]) + c->P[e - c->p];
}

static uint64_t elems(const ctx *c, int32_t a, int32_t b) {
  return cum(c, b) - cum(c, a);
}

/* Where R indices live: VEC = the user vector's layout in `buf` (block b at
 * P[b]); RORD = in R order in `buf` from element `base`, starting with index
 * `first`. With zsep, index 0 lives in `zero` instead. */
enum { VEC, RORD };
typedef struct layout {
  int kind;
  uint8_t buf;
  uint64_t base;
  int32_t first;
  bool zsep;
  crnet__seg zero;
} layout;

static layout lay_vec(uint8_t buf) {
  layout l = {VEC, buf, 0, 0, false, {0, 0, 0}};
  return l;
}

static layout lay_rord(uint8_t buf, uint64_t base, int32_t first) {
  layout l = {RORD, buf, base, first, false, {0, 0, 0}};
  return l;
}

/* Segments (non-empty, in R order, at most 3) holding R[a..b). */
static int segs_of(const ctx *c, const layout *l, int32_t a, int32_t b,
                   crnet__seg out[3]) {
  int k = 0;
  if (a >= b)
    return 0;
  if (l->zsep && a == 0) {
    if (l->zero.count > 0)
      out[k++] = l->zero;
    a = 1;
    if (a >= b)
      return k;
  }
  if (l->kind == RORD) {
    assert(a >= l->first);
    uint64_t n = elems(c, a, b);
    if (n > 0)
      out[k++] = crnet__seg_make(l->buf, l->base + elems(c, l->first, a), n);
    return k;
  }
  int32_t w = c->p - c->r; /* R[w] is block 0: the wrap */
  if (a < w) {
    int32_t e = b < w ? b : w;
    uint64_t n = elems(c, a, e);
    if (n > 0)
      out[k++] = crnet__seg_make(l->buf, c->P[c->r + a], n);
  }
  if (b > w) {
    int32_t x = a > w ? a : w;
    uint64_t n = elems(c, x, b);
    if (n > 0)
      out[k++] = crnet__seg_make(l->buf, c->P[c->r + x - c->p], n);
  }
  return k;
}

static void send_range(ctx *c, int32_t peer, const layout *l, int32_t a,
                       int32_t b) {
  crnet__seg g[3];
  int k = segs_of(c, l, a, b, g);
  for (int i = 0; i < k; i++)
    crnet__sched_send(c->s, peer, g[i].buf, g[i].off, g[i].count);
}

static void recv_range(ctx *c, int32_t peer, const layout *l, int32_t a,
                       int32_t b) {
  crnet__seg g[3];
  int k = segs_of(c, l, a, b, g);
  for (int i = 0; i < k; i++)
    crnet__sched_recv(c->s, peer, g[i].buf, g[i].off, g[i].count);
}

/* Emits dst = src (+) dst (or a copy when kind is COPY) over R[a..b), the
 * two layouts cut into matching steps. */
static void steps_range(ctx *c, int kind, uint8_t order, const layout *src,
                        const layout *dst, int32_t a, int32_t b) {
  crnet__seg gs[3], gd[3];
  int ns = segs_of(c, src, a, b, gs), nd = segs_of(c, dst, a, b, gd);
  int i = 0, j = 0;
  uint64_t ui = 0, uj = 0; /* elements used of gs[i], gd[j] */
  while (i < ns && j < nd) {
    uint64_t n = gs[i].count - ui;
    if (gd[j].count - uj < n)
      n = gd[j].count - uj;
    crnet__seg x = crnet__seg_make(gs[i].buf, gs[i].off + ui, n);
    crnet__seg y = crnet__seg_make(gd[j].buf, gd[j].off + uj, n);
    if (kind == CRNET__STEP_REDUCE)
      crnet__sched_reduce(c->s, x, y, order);
    else
      crnet__sched_copy(c->s, x, y);
    ui += n;
    uj += n;
    if (ui == gs[i].count) {
      i++;
      ui = 0;
    }
    if (uj == gd[j].count) {
      j++;
      uj = 0;
    }
  }
  assert(i == ns && j == nd);
}

/* Largest s'-s of the sequence: the homed prefix after the reduce-scatter. */
static int32_t max_diff(const ctx *c) {
  int32_t d = 0;
  for (int32_t j = 1; j < c->n; j++)
    if (c->sk[j - 1] - c->sk[j] > d)
      d = c->sk[j - 1] - c->sk[j];
  return d;
}

/* The reduce-scatter phase (Algorithm 1). `in` is where the inputs are,
 * `home` where reduced partials go; dir0/dirn say whether index 0 / indices
 * >= 1 have a home distinct from their input (then their first receive lands
 * there directly). M is TEMP from `mbase`. Leaves R[0] complete in its
 * home. */
static void rs_generic(ctx *c, const layout *in, const layout *home, bool dir0,
                       bool dirn, uint64_t mbase) {
  int32_t D = 0; /* R[0..D) live in their homes */
  for (int32_t j = 1; j < c->n; j++) {
    int32_t s1 = c->sk[j - 1], s = c->sk[j], d = s1 - s;
    int32_t t = mod(c, (int64_t)c->r + s), f = mod(c, (int64_t)c->r - s);
    crnet__sched_round(c->s);
    /* send R[s..s'-1]: homed ones from home, the rest from the input */
    int32_t h = D < s1 ? D : s1;
    if (h > s)
      send_range(c, t, home, s, h);
    send_range(c, t, in, s > D ? s : D, s1);
    /* receive T[0..d): runs cut at 1 and D; direct runs go home */
    int32_t cut[4] = {0, 1, D, d}, nc = 0, pts[4];
    for (int i = 0; i < 4; i++) {
      int32_t v = cut[i] < d ? cut[i] : d;
      if (nc == 0 || v > pts[nc - 1])
        pts[nc++] = v;
    }
    uint64_t mo = 0;
    for (int i = 0; i + 1 < nc; i++) {
      int32_t a = pts[i], b = pts[i + 1];
      bool direct = a >= D && (a == 0 ? dir0 : dirn);
      if (direct) {
        recv_range(c, f, home, a, b);
      } else {
        layout m = lay_rord(CRNET__BUF_TEMP, mbase + mo, a);
        recv_range(c, f, &m, a, b);
        mo += elems(c, a, b);
      }
    }
    crnet__sched_need_temp(c->s, mbase + mo);
    mo = 0;
    for (int i = 0; i + 1 < nc; i++) {
      int32_t a = pts[i], b = pts[i + 1];
      bool direct = a >= D && (a == 0 ? dir0 : dirn);
      if (direct) {
        steps_range(c, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, in, home, a, b);
      } else {
        layout m = lay_rord(CRNET__BUF_TEMP, mbase + mo, a);
        steps_range(c, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, &m, home, a, b);
        mo += elems(c, a, b);
      }
    }
    if (d > D)
      D = d;
  }
}

/* The reduce-scatter phase for s'-s = 1 in every round, in rank order (see
 * the file comment). B is count_r elements of TEMP at `bbase`, M follows. */
static void rs_linear(ctx *c, const layout *in, const layout *home, bool dir0,
                      uint64_t bbase) {
  int32_t p = c->p, r = c->r;
  uint64_t cr = elems(c, 0, 1);
  /* Rank p-1 with a distinct home accumulates B there (it has no A). */
  bool b_home = r == p - 1 && dir0;
  layout bl = b_home ? *home : lay_rord(CRNET__BUF_TEMP, bbase, 0);
  layout m = lay_rord(CRNET__BUF_TEMP, bbase + (b_home || r == 0 ? 0 : cr), 0);
  bool a_started = false, b_started = false;
  for (int32_t j = 1; j < c->n; j++) {
    int32_t s = c->sk[j];
    int32_t t = mod(c, (int64_t)r + s), f = mod(c, (int64_t)r - s);
    crnet__sched_round(c->s);
    send_range(c, t, in, s, s + 1);
    if (f > r) { /* A: ranks r+1, r+2, ... in order */
      if (!a_started && dir0) {
        recv_range(c, f, home, 0, 1);
        steps_range(c, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, in, home, 0, 1);
      } else {
        recv_range(c, f, &m, 0, 1);
        steps_range(c, CRNET__STEP_REDUCE, CRNET__DST_LEFT, &m, home, 0, 1);
        crnet__sched_need_temp(c->s, m.base + cr);
      }
      a_started = true;
    } else { /* B: ranks 0, 1, ..., r-1 in order */
      if (!b_started) {
        recv_range(c, f, &bl, 0, 1);
        if (!b_home)
          crnet__sched_need_temp(c->s, bbase + cr);
      } else {
        recv_range(c, f, &m, 0, 1);
        steps_range(c, CRNET__STEP_REDUCE, CRNET__DST_LEFT, &m, &bl, 0, 1);
        crnet__sched_need_temp(c->s, m.base + cr);
      }
      b_started = true;
    }
  }
  if (!b_started)
    return;
  if (b_home) /* home = B (+) V_r */
    steps_range(c, CRNET__STEP_REDUCE, CRNET__DST_LEFT, in, home, 0, 1);
  else /* home = B (+) A */
    steps_range(c, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, &bl, home, 0, 1);
}

static void rs_phase(ctx *c, const layout *in, const layout *home, bool dir0,
                     bool dirn, uint64_t tbase) {
  if (crnet__circulant_skips_ordered(c->sk, c->n))
    rs_linear(c, in, home, dir0, tbase);
  else
    rs_generic(c, in, home, dir0, dirn, tbase);
}

/* One allgather-phase round: send R[0..k) (from `src`) to `to`, receive
 * R[a..b) into `home` from `from`. */
static void ag_round(ctx *c, const layout *src, const layout *home, int32_t to,
                     int32_t k, int32_t from, int32_t a, int32_t b) {
  crnet__sched_round(c->s);
  send_range(c, to, src, 0, k);
  recv_range(c, from, home, a, b);
}

/* The full allgather phase: rounds in reverse, t = r-s, f = r+s. Rank
 * `skip` (or -1) already has everything: nothing is sent to it. */
static void ag_phase(ctx *c, const layout *src, const layout *home,
                     int32_t skip) {
  for (int32_t j = c->n - 1; j >= 1; j--) {
    int32_t s1 = c->sk[j - 1], s = c->sk[j];
    int32_t t = mod(c, (int64_t)c->r - s);
    ag_round(c, src, home, t, t == skip ? 0 : s1 - s,
             mod(c, (int64_t)c->r + s), s, c->r == skip ? s : s1);
  }
}

static int ctx_init(ctx *c, crnet__schedule *out, const int32_t *skips,
                    int32_t nskips, int32_t p, int32_t rank,
                    const uint64_t *counts, uint64_t count) {
  if (out == NULL || p < 1 || rank < 0 || rank >= p || skips == NULL ||
      crnet__circulant_skips_check(skips, nskips, p) != 0)
    return CRNET_EINVAL;
  c->P = crnet__malloc(((size_t)p + 1) * sizeof(*c->P));
  if (c->P == NULL)
    return CRNET_ENOMEM;
  c->P[0] = 0;
  for (int32_t b = 0; b < p; b++) {
    uint64_t off, n = 0;
    if (counts != NULL)
      n = counts[b];
    else
      crnet__block_range(count, p, b, &off, &n);
    if (c->P[b] + n < c->P[b]) {
      free(c->P);
      return CRNET_EINVAL;
    }
    c->P[b + 1] = c->P[b] + n;
  }
  c->s = out;
  c->p = p;
  c->r = rank;
  c->sk = skips;
  c->n = nskips;
  crnet__sched_init(out, p, rank);
  return 0;
}

static int ctx_done(ctx *c) {
  free(c->P);
  return crnet__sched_finish(c->s);
}

/* p = 1, not in place: the result is the input. */
static void copy_all(ctx *c, uint64_t n) {
  crnet__sched_round(c->s);
  crnet__sched_copy(c->s, crnet__seg_make(CRNET__BUF_SEND, 0, n),
                    crnet__seg_make(CRNET__BUF_RECV, 0, n));
}

int crnet__circulant_reduce_scatter(crnet__schedule *out, const int32_t *skips,
                                    int32_t nskips, int32_t p, int32_t rank,
                                    const uint64_t *counts, bool in_place) {
  ctx c;
  if (counts == NULL)
    return CRNET_EINVAL;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, counts, 0);
  if (rc != 0)
    return rc;
  uint64_t cr = counts[rank];
  if (p == 1) {
    if (!in_place)
      copy_all(&c, cr);
    return ctx_done(&c);
  }
  int32_t D = max_diff(&c);
  if (!in_place) {
    /* index 0 in RECV[0..count_r), indices 1..D-1 in TEMP in R order */
    layout in = lay_vec(CRNET__BUF_SEND);
    layout home = lay_rord(CRNET__BUF_TEMP, 0, 1);
    home.zsep = true;
    home.zero = crnet__seg_make(CRNET__BUF_RECV, 0, cr);
    uint64_t w = D > 1 ? elems(&c, 1, D) : 0;
    crnet__sched_need_temp(out, w);
    rs_phase(&c, &in, &home, true, true, w);
  } else {
    /* the partials stay at their blocks in RECV; index 0 goes to TEMP
     * (copied to RECV[0..) at the end) unless block r starts at 0 */
    layout in = lay_vec(CRNET__BUF_RECV);
    layout home = lay_vec(CRNET__BUF_RECV);
    bool sep = c.P[rank] != 0;
    if (sep) {
      home.zsep = true;
      home.zero = crnet__seg_make(CRNET__BUF_TEMP, 0, cr);
      crnet__sched_need_temp(out, cr);
    }
    rs_phase(&c, &in, &home, sep, false, sep ? cr : 0);
    if (sep)
      crnet__sched_copy(out, home.zero, crnet__seg_make(CRNET__BUF_RECV, 0, cr));
  }
  return ctx_done(&c);
}

int crnet__circulant_allreduce(crnet__schedule *out, const int32_t *skips,
                               int32_t nskips, int32_t p, int32_t rank,
                               uint64_t count, bool in_place) {
  ctx c;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, NULL, count);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&c, count);
    return ctx_done(&c);
  }
  layout in = lay_vec(in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND);
  layout home = lay_vec(CRNET__BUF_RECV);
  rs_phase(&c, &in, &home, !in_place, !in_place, 0);
  ag_phase(&c, &home, &home, -1);
  return ctx_done(&c);
}

int crnet__circulant_allgather(crnet__schedule *out, const int32_t *skips,
                               int32_t nskips, int32_t p, int32_t rank,
                               const uint64_t *counts, bool in_place) {
  ctx c;
  if (counts == NULL)
    return CRNET_EINVAL;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, counts, 0);
  if (rc != 0)
    return rc;
  layout home = lay_vec(CRNET__BUF_RECV);
  layout src = home;
  crnet__seg mine = crnet__seg_make(CRNET__BUF_SEND, 0, counts[rank]);
  if (!in_place) {
    src.zsep = true; /* R[0] is read from SEND */
    src.zero = mine;
  }
  if (p == 1) {
    if (!in_place)
      copy_all(&c, counts[0]);
    return ctx_done(&c);
  }
  ag_phase(&c, &src, &home, -1);
  if (!in_place) /* after the last round: put R[0] in its place */
    steps_range(&c, CRNET__STEP_COPY, CRNET__SRC_LEFT, &src, &home, 0, 1);
  return ctx_done(&c);
}

int crnet__circulant_reduce(crnet__schedule *out, const int32_t *skips,
                            int32_t nskips, int32_t p, int32_t rank,
                            uint64_t count, int32_t root, bool in_place) {
  ctx c;
  if (root < 0 || root >= p)
    return CRNET_EINVAL;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, NULL, count);
  if (rc != 0)
    return rc;
  if (p == 1) {
    if (!in_place)
      copy_all(&c, count);
    return ctx_done(&c);
  }
  /* Walk the allgather rounds backwards from "the root needs R[0..p)";
   * need[x] is indexed by x = rank - root. Record this rank's sends and
   * receives per round (allgather round j uses sk[j-1], sk[j]). */
  int32_t *need = crnet__calloc((size_t)p, sizeof(*need));
  int32_t *nxt = crnet__calloc((size_t)p, sizeof(*nxt));
  int32_t *ksend = crnet__calloc((size_t)c.n, sizeof(*ksend));
  int32_t *krecv = crnet__calloc((size_t)c.n, sizeof(*krecv));
  if (need == NULL || nxt == NULL || ksend == NULL || krecv == NULL) {
    free(need);
    free(nxt);
    free(ksend);
    free(krecv);
    free(c.P);
    crnet__sched_free(out);
    return CRNET_ENOMEM;
  }
  int32_t me = mod(&c, (int64_t)rank - root), H = max_diff(&c);
  need[0] = p;
  for (int32_t j = 1; j < c.n; j++) {
    int32_t s1 = c.sk[j - 1], s = c.sk[j];
    for (int32_t x = 0; x < p; x++)
      nxt[x] = need[x] < s ? need[x] : s;
    for (int32_t x = 0; x < p; x++) {
      if (need[x] <= s)
        continue;
      int32_t y = (int32_t)(((int64_t)x + s) % p), k = need[x] - s;
      assert(need[x] <= s1);
      if (k > nxt[y])
        nxt[y] = k;
    }
    int32_t to = mod(&c, (int64_t)me - s);
    krecv[j] = need[me] > s ? need[me] : 0;
    ksend[j] = need[to] > s ? need[to] - s : 0;
    if (ksend[j] > H)
      H = ksend[j];
    if (krecv[j] > H)
      H = krecv[j];
    memcpy(need, nxt, (size_t)p * sizeof(*need));
  }
  bool is_root = rank == root;
  layout in = lay_vec(in_place && is_root ? CRNET__BUF_RECV : CRNET__BUF_SEND);
  layout home = is_root ? lay_vec(CRNET__BUF_RECV)
                        : lay_rord(CRNET__BUF_TEMP, 0, 0);
  uint64_t hsize = is_root ? 0 : elems(&c, 0, H);
  crnet__sched_need_temp(out, hsize);
  bool dir = !(in_place && is_root);
  rs_phase(&c, &in, &home, dir, dir, hsize);
  for (int32_t j = c.n - 1; j >= 1; j--) {
    int32_t s = c.sk[j];
    ag_round(&c, &home, &home, mod(&c, (int64_t)rank - s), ksend[j],
             mod(&c, (int64_t)rank + s), s, krecv[j]);
  }
  free(need);
  free(nxt);
  free(ksend);
  free(krecv);
  return ctx_done(&c);
}

int crnet__circulant_bcast(crnet__schedule *out, const int32_t *skips,
                           int32_t nskips, int32_t p, int32_t rank,
                           uint64_t count, int32_t root) {
  ctx c;
  if (root < 0 || root >= p)
    return CRNET_EINVAL;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, NULL, count);
  if (rc != 0)
    return rc;
  if (p == 1)
    return ctx_done(&c);
  /* Scatter: have[x] = h means rank root+x holds R[0..h) of the root's
   * data (only the part that later rounds can still send). */
  int32_t *have = crnet__calloc((size_t)p, sizeof(*have));
  int32_t *nxt = crnet__calloc((size_t)p, sizeof(*nxt));
  if (have == NULL || nxt == NULL) {
    free(have);
    free(nxt);
    free(c.P);
    crnet__sched_free(out);
    return CRNET_ENOMEM;
  }
  layout home = lay_vec(CRNET__BUF_RECV);
  int32_t me = mod(&c, (int64_t)rank - root);
  have[0] = p;
  for (int32_t j = 1; j < c.n; j++) {
    int32_t s1 = c.sk[j - 1], s = c.sk[j];
    for (int32_t x = 0; x < p; x++)
      nxt[x] = have[x] < s ? have[x] : s;
    for (int32_t x = 0; x < p; x++) {
      if (have[x] <= s)
        continue;
      int32_t y = (int32_t)(((int64_t)x + s) % p);
      int32_t h = (have[x] < s1 ? have[x] : s1) - s;
      assert(have[y] == 0 && nxt[y] == 0); /* each rank receives once */
      nxt[y] = h;
    }
    crnet__sched_round(out);
    if (have[me] > s)
      send_range(&c, mod(&c, (int64_t)rank + s), &home, s,
                 have[me] < s1 ? have[me] : s1);
    int32_t fx = mod(&c, (int64_t)me - s);
    if (have[fx] > s)
      recv_range(&c, mod(&c, (int64_t)rank - s), &home, 0,
                 (have[fx] < s1 ? have[fx] : s1) - s);
    memcpy(have, nxt, (size_t)p * sizeof(*have));
  }
  free(have);
  free(nxt);
  ag_phase(&c, &home, &home, root);
  return ctx_done(&c);
}

int crnet__circulant_barrier(crnet__schedule *out, const int32_t *skips,
                             int32_t nskips, int32_t p, int32_t rank) {
  ctx c;
  int rc = ctx_init(&c, out, skips, nskips, p, rank, NULL, 0);
  if (rc != 0)
    return rc;
  for (int32_t j = 1; j < c.n; j++) {
    int32_t s = c.sk[j];
    crnet__sched_round(out);
    crnet__sched_send_peer(out, mod(&c, (int64_t)rank + s));
    crnet__sched_recv_peer(out, mod(&c, (int64_t)rank - s));
  }
  return ctx_done(&c);
}

/* ------------------------------------------------------------------------
 * Prefix sums by dissemination (the circulant graph with skips 2^k, not
 * wrapped around)
 *
 * SCAN. Rank r keeps acc, the sum of a window of ranks ending at r. Round
 * k = 0, 1, ..., ceil(log2 p)-1 with distance d = 2^k: send acc to r+d (if
 * r+d < p) || receive x from r-d (if r-d >= 0); acc = x (+) acc.
 *
 *   Claim: after round k, acc_r = V_max(0, r-2^(k+1)+1) (+) ... (+) V_r.
 *   Proof by induction. Before round 0 acc_r = V_r (window of 1 = 2^0).
 *   In round k the sender r-d sends its acc from before the round, the
 *   window [max(0, r-2d+1), r-d]; the receiver's own window is
 *   [max(0, r-d+1), r]; they are adjacent, so x (+) acc is the window
 *   [max(0, r-2d+1), r], with the lower ranks' operand on the left. A rank
 *   with r-d < 0 receives nothing and its window already starts at 0. The
 *   send reads acc before the round's reduction (steps run after the
 *   transfers), so it is the old window. After ceil(log2 p) rounds
 *   2^(k+1) >= p > r, so every window starts at rank 0: the prefix.
 *
 *   Order: every combination is (lower window) (+) (higher window), so any
 *   associative operator works, commutative or not.
 *
 * EXSCAN additionally keeps res, the window [max(0, r-2^(k+1)+1), r-1]: the
 * received x is exactly the part of acc that lies below r, so
 * res = x (+) res (res = x the first time). Rank 0 receives nothing and its
 * RECV is never written (MPI's rule).
 *
 * Cost per rank: ceil(log2 p) rounds, in each at most one send and one
 * receive of the whole vector: ceil(log2 p)·(α + mβ + mγ), twice the
 * reductions for exscan ranks that still forward. Rounds are the same as
 * the hypercube scan's (Alg. 4.9) for p a power of two, and for any other p
 * no round is wasted on partners that do not exist.
 *
 * Buffers (elements): SEND, RECV: count; in place: RECV only. TEMP: count
 * for the message x; exscan keeps acc in TEMP too (2·count) unless the rank
 * never forwards after its first receive.
 */

static void scan_step(crnet__schedule *out, uint8_t kind, uint8_t order,
                      crnet__seg src, crnet__seg dst) {
  if (kind == CRNET__STEP_REDUCE)
    crnet__sched_reduce(out, src, dst, order);
  else
    crnet__sched_copy(out, src, dst);
}

static int circ_prefix(crnet__schedule *out, int32_t p, int32_t rank,
                       uint64_t count, bool in_place, bool exclusive) {
  uint8_t in = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  crnet__seg own = crnet__seg_make(in, 0, count);
  crnet__seg res = crnet__seg_make(CRNET__BUF_RECV, 0, count);
  crnet__seg x = crnet__seg_make(CRNET__BUF_TEMP, 0, count);
  crnet__seg acc_t = crnet__seg_make(CRNET__BUF_TEMP, count, count);
  crnet__seg acc = own; /* where acc lives now */
  bool have_res = false;
  if (p < 1 || rank < 0 || rank >= p)
    return CRNET_EINVAL;
  crnet__sched_init(out, p, rank);
  for (int64_t d = 1; d < p; d *= 2) {
    bool forwards_later = rank + 2 * d < p; /* acc is sent again */
    crnet__sched_round(out);
    if (rank + d < p)
      crnet__sched_send(out, (int32_t)(rank + d), acc.buf, acc.off, count);
    if (rank - d < 0)
      continue;
    crnet__sched_recv(out, (int32_t)(rank - d), x.buf, x.off, count);
    crnet__sched_need_temp(out, count);
    if (!exclusive) {
      /* acc lives in RECV from the first receive on */
      if (acc.buf != CRNET__BUF_RECV) {
        scan_step(out, CRNET__STEP_COPY, 0, acc, res);
        acc = res;
      }
      scan_step(out, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, x, acc);
      continue;
    }
    if (forwards_later && acc.buf != CRNET__BUF_TEMP) {
      /* move acc out of the input before RECV (maybe the input) gets res */
      crnet__sched_need_temp(out, 2 * count);
      scan_step(out, CRNET__STEP_COPY, 0, acc, acc_t);
      acc = acc_t;
    }
    if (forwards_later)
      scan_step(out, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, x, acc);
    if (have_res)
      scan_step(out, CRNET__STEP_REDUCE, CRNET__SRC_LEFT, x, res);
    else
      scan_step(out, CRNET__STEP_COPY, 0, x, res);
    have_res = true;
  }
  if (!exclusive && acc.buf != CRNET__BUF_RECV) {
    /* rank 0: the result is the input, copied after its last send */
    if (out->nrounds == 0)
      crnet__sched_round(out);
    scan_step(out, CRNET__STEP_COPY, 0, acc, res);
  }
  return crnet__sched_finish(out);
}

int crnet__circulant_scan(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place) {
  return circ_prefix(out, p, rank, count, in_place, false);
}

int crnet__circulant_exscan(crnet__schedule *out, int32_t p, int32_t rank,
                            uint64_t count, bool in_place) {
  return circ_prefix(out, p, rank, count, in_place, true);
}

/* ------------------------------------------------------------------------
 * Allreduce by allgather (small vectors)
 *
 * CIRCULANT-ALLGATHER. The circulant allgather of the whole vectors (every
 * rank contributes its m elements as one block), into TEMP, then a local
 * left fold in rank order: RECV = ((V_0 (+) V_1) (+) V_2) ... (+) V_p-1.
 *   Rounds: the allgather's, n-1 = ceil(log2 p) with halving skips: half of
 *   the circulant allreduce's 2·ceil(log2 p), for any p.
 *   Cost: ceil(log2 p)·α + (p-1)·m·β + (p-1)·m·γ: every rank reduces
 *   everything, so it pays for small m only (where α dominates).
 *   Order and identity: every rank folds the same p vectors in the same
 *   order, so the result is the rank-order reduction (non-commutative
 *   operators are fine) and bitwise identical on all ranks.
 *   Memory: TEMP of p·m elements, the gathered vectors.
 * Built as the allgather schedule with its RECV renamed to TEMP (and its
 * SEND to RECV in place: the allgather only reads it), then the fold as
 * local steps after the last round.
 */

static void rename_seg(crnet__seg *g, uint8_t send_to) {
  if (g->buf == CRNET__BUF_RECV)
    g->buf = CRNET__BUF_TEMP;
  else if (g->buf == CRNET__BUF_SEND)
    g->buf = send_to;
}

int crnet__circulant_allreduce_gather(crnet__schedule *out,
                                      const int32_t *skips, int32_t nskips,
                                      int32_t p, int32_t rank, uint64_t count,
                                      bool in_place) {
  uint64_t *counts;
  uint8_t in = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  int rc;
  if (p < 1 || rank < 0 || rank >= p)
    return CRNET_EINVAL;
  if (count > 0 && (uint64_t)p > UINT64_MAX / count)
    return CRNET_EINVAL;
  counts = crnet__malloc(sizeof *counts * (size_t)p);
  if (counts == NULL)
    return CRNET_ENOMEM;
  for (int32_t b = 0; b < p; b++)
    counts[b] = count;
  rc = crnet__circulant_allgather(out, skips, nskips, p, rank, counts, false);
  free(counts);
  if (rc != 0)
    return rc;
  /* the allgather has no TEMP of its own: TEMP becomes the gathered area */
  for (uint32_t i = 0; i < out->nsegs; i++)
    rename_seg(&out->segs[i], in);
  for (uint32_t i = 0; i < out->nsteps; i++) {
    rename_seg(&out->steps[i].src, in);
    rename_seg(&out->steps[i].dst, in);
  }
  crnet__sched_need_temp(out, (uint64_t)p * count);
  if (out->nrounds == 0)
    crnet__sched_round(out);
  crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_TEMP, 0, count),
                    crnet__seg_make(CRNET__BUF_RECV, 0, count));
  for (int32_t b = 1; b < p; b++)
    crnet__sched_reduce(
        out, crnet__seg_make(CRNET__BUF_TEMP, (uint64_t)b * count, count),
        crnet__seg_make(CRNET__BUF_RECV, 0, count), CRNET__DST_LEFT);
  return crnet__sched_finish(out);
}

/* --- the registry's rows (algorithm.h) -------------------------------------
 *
 * Model terms (R, B/m, G/m; q = (p-1)/p, L = ceil(log2 p)), the
 * simulator's synchronous-round counts for equal blocks:
 *
 *   collective      circulant      circulant-linear   allgather-reduce
 *   allreduce       2L, 2q, q*     2(p-1), 2q, 1      L, p-1, p-1
 *   reduce-scatter  L, q, q*       p-1, q, 1
 *   allgather       L, q, -        p-1, q, -
 *   bcast           2L, 2q, -      2(p-1), 2q, -
 *   reduce          2L, 2q, q*     2(p-1), 2q, 1
 *   scan            L, L, L        (exscan: G = 2L-2, or 2L-3 while p <=
 *                                   3/4 2^L)
 *   barrier         L, -, -        p-1, -, -
 *
 * (*: 1 at p = 3, see circulant_reduced; circulant-linear reduces q at p =
 * 2 like the others.) circulant-doubling and circulant-sqrt move the
 * circulant's volume in as many rounds or more, so the model leaves them
 * out and auto never takes them.
 */

/* G/m of the circulant reduce-scatter phase: q, except at p = 3, where
 * rank 2 keeps rank order by doing both of its reductions after the last
 * round, so the critical path reduces three blocks, not two. */
static double circulant_reduced(int32_t p) {
  return p == 3 ? 1 : (double)(p - 1) / p;
}

/* The collectives every skip sequence does. */
#define SKIP_COLLS                                                             \
  (CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |                                     \
   CRNET__COLL_BIT(CRNET_COLL_REDUCE_SCATTER) |                                \
   CRNET__COLL_BIT(CRNET_COLL_ALLGATHER) | CRNET__COLL_BIT(CRNET_COLL_BCAST) | \
   CRNET__COLL_BIT(CRNET_COLL_REDUCE) | CRNET__COLL_BIT(CRNET_COLL_BARRIER))

/* The schedule of the skip sequence `variant` (crnet__circulant_skips). */
static int build_skips(const char *variant, const crnet__call *call,
                       crnet__schedule *out) {
  int32_t *skips;
  int n, rc;
  if (call->coll == CRNET_COLL_SCAN)
    return call->exclusive
               ? crnet__circulant_exscan(out, call->p, call->rank, call->count,
                                         call->in_place)
               : crnet__circulant_scan(out, call->p, call->rank, call->count,
                                       call->in_place);
  skips = crnet__malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips(variant, call->p, skips);
  if (n < 0) {
    free(skips);
    return n;
  }
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    rc = crnet__circulant_allreduce(out, skips, n, call->p, call->rank,
                                    call->count, call->in_place);
    break;
  case CRNET_COLL_REDUCE_SCATTER:
    rc = crnet__circulant_reduce_scatter(out, skips, n, call->p, call->rank,
                                         call->counts, call->in_place);
    break;
  case CRNET_COLL_ALLGATHER:
    rc = crnet__circulant_allgather(out, skips, n, call->p, call->rank,
                                    call->counts, call->in_place);
    break;
  case CRNET_COLL_REDUCE:
    rc = crnet__circulant_reduce(out, skips, n, call->p, call->rank,
                                 call->count, call->root, call->in_place);
    break;
  case CRNET_COLL_BCAST:
    rc = crnet__circulant_bcast(out, skips, n, call->p, call->rank,
                                call->count, call->root);
    break;
  case CRNET_COLL_BARRIER:
    rc = crnet__circulant_barrier(out, skips, n, call->p, call->rank);
    break;
  default:
    rc = CRNET_EINVAL;
    break;
  }
  free(skips);
  return rc;
}

/* Whether the reductions of skip sequence `variant` keep rank order: the
 * scan (dissemination) always does; the others when the skips do. */
static int skips_keep_order(const char *variant, const crnet__call *call,
                            bool *ordered) {
  int32_t *skips;
  int n;
  *ordered = call->coll == CRNET_COLL_SCAN;
  if (*ordered)
    return 0;
  skips = crnet__malloc(sizeof *skips * (size_t)call->p);
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips(variant, call->p, skips);
  if (n > 0)
    *ordered = crnet__circulant_skips_ordered(skips, n);
  free(skips);
  return n > 0 ? 0 : n;
}

static bool circulant_terms(const crnet__call *call, crnet__model_coef *c) {
  int32_t p = call->p;
  int L = crnet__ceil_log2(p);
  double q = (double)(p - 1) / p, g;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
    *c = (crnet__model_coef){2.0 * L, 2 * q, circulant_reduced(p)};
    return true;
  case CRNET_COLL_REDUCE_SCATTER:
    *c = (crnet__model_coef){L, q, circulant_reduced(p)};
    return true;
  case CRNET_COLL_ALLGATHER:
    *c = (crnet__model_coef){L, q, 0};
    return true;
  case CRNET_COLL_BCAST:
    *c = (crnet__model_coef){2.0 * L, 2 * q, 0};
    return true;
  case CRNET_COLL_SCAN:
    /* exscan: one more fold per round, but for the first, and for the
     * second as well while p is at most 3/4 of 2^L */
    g = !call->exclusive                                   ? L
        : 4 * (int64_t)p <= 3 * (INT64_C(1) << L) ? 2 * L - 3
                                                           : 2 * L - 2;
    *c = (crnet__model_coef){L, L, g};
    return true;
  case CRNET_COLL_BARRIER:
    *c = (crnet__model_coef){L, 0, 0};
    return true;
  default:
    return false;
  }
}

static bool linear_terms(const crnet__call *call, crnet__model_coef *c) {
  int32_t p = call->p;
  double q = (double)(p - 1) / p, g = p > 2 ? 1 : q;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
    *c = (crnet__model_coef){2.0 * (p - 1), 2 * q, g};
    return true;
  case CRNET_COLL_REDUCE_SCATTER:
    *c = (crnet__model_coef){p - 1.0, q, g};
    return true;
  case CRNET_COLL_ALLGATHER:
    *c = (crnet__model_coef){p - 1.0, q, 0};
    return true;
  case CRNET_COLL_BCAST:
    *c = (crnet__model_coef){2.0 * (p - 1), 2 * q, 0};
    return true;
  case CRNET_COLL_BARRIER:
    *c = (crnet__model_coef){p - 1.0, 0, 0};
    return true;
  default:
    return false;
  }
}

#define SKIP_VARIANT(fn, variant)                                              \
  static int fn##_build(const crnet__call *call, crnet__schedule *out) {       \
    return build_skips(variant, call, out);                                    \
  }                                                                            \
  static int fn##_keeps_order(const crnet__call *call, bool *ordered) {        \
    return skips_keep_order(variant, call, ordered);                           \
  }

SKIP_VARIANT(circulant, "circulant")
SKIP_VARIANT(doubling, "circulant-doubling")
SKIP_VARIANT(linear, "circulant-linear")
SKIP_VARIANT(sqrt, "circulant-sqrt")

/* Peers: the skips after s_0 = p (circulant's halving, rounded up), each
 * both ways; the scan's dissemination has no wrap-around: rank r talks to
 * r + 2^k < p and r - 2^k >= 0, the most over r. */
static int32_t halving_peers(int32_t p) {
  int32_t s[64];
  int n = 0;
  for (int32_t v = p; v > 1;)
    s[n++] = v = v - v / 2;
  return crnet__distinct_offsets(s, n, p);
}

static int32_t circulant_peers(const crnet__call *call) {
  int32_t p = call->p, best = 0;
  int L = crnet__ceil_log2(p);
  if (call->coll != CRNET_COLL_SCAN)
    return halving_peers(p);
  for (int32_t r = 0; r < p; r++) {
    int32_t n = 0;
    for (int k = 0; k < L; k++)
      n += (r + (INT64_C(1) << k) < p) + (r - (INT64_C(1) << k) >= 0);
    if (n > best)
      best = n;
  }
  return best;
}

const crnet__algorithm crnet__circulant_algorithm = {
    .name = "circulant",
    .id = 1,
    .colls = SKIP_COLLS | CRNET__COLL_BIT(CRNET_COLL_SCAN),
    .in_auto = true,
    .build = circulant_build,
    .terms = circulant_terms,
    .keeps_order = circulant_keeps_order,
    .peers = circulant_peers,
    .summary = "Träff's circulant graph, halving skips: ceil(log2 p) rounds "
               "each way at optimal volume, any p; scan by dissemination"};

const crnet__algorithm crnet__circulant_doubling_algorithm = {
    .name = "circulant-doubling",
    .id = 2,
    .colls = SKIP_COLLS,
    .build = doubling_build,
    .keeps_order = doubling_keeps_order,
    .summary = "the circulant with power-of-two skips (named only)"};

static int32_t circulant_linear_peers(const crnet__call *call) {
  return call->p - 1;
}

const crnet__algorithm crnet__circulant_linear_algorithm = {
    .name = "circulant-linear",
    .id = 3,
    .colls = SKIP_COLLS,
    .in_auto = true,
    .build = linear_build,
    .terms = linear_terms,
    .keeps_order = linear_keeps_order,
    .peers = circulant_linear_peers,
    .summary = "the circulant with skips p-1, ..., 1: p-1 rounds, rank "
               "order kept"};

const crnet__algorithm crnet__circulant_sqrt_algorithm = {
    .name = "circulant-sqrt",
    .id = 4,
    .colls = SKIP_COLLS,
    .build = sqrt_build,
    .keeps_order = sqrt_keeps_order,
    .summary = "the circulant with skips about sqrt(p) apart (named only)"};

/* allgather-reduce holds p vectors of m bytes in TEMP: a memory bound, not
 * a cost, so auto takes it only while p·m is at most this. */
#define GATHER_REDUCE_MAX_BYTES ((double)(1 << 20))

static int gather_reduce_build(const crnet__call *call, crnet__schedule *out) {
  int32_t *skips = crnet__malloc(sizeof *skips * (size_t)call->p);
  int n, rc;
  if (skips == NULL)
    return CRNET_ENOMEM;
  n = crnet__circulant_skips("circulant", call->p, skips);
  rc = n < 0 ? n
             : crnet__circulant_allreduce_gather(out, skips, n, call->p,
                                                 call->rank, call->count,
                                                 call->in_place);
  free(skips);
  return rc;
}

static bool gather_reduce_terms(const crnet__call *call,
                                crnet__model_coef *c) {
  *c = (crnet__model_coef){crnet__ceil_log2(call->p), call->p - 1.0,
                           call->p - 1.0};
  return true;
}

static bool gather_reduce_fits(const crnet__call *call, double m) {
  return (double)call->p * m <= GATHER_REDUCE_MAX_BYTES;
}

static int32_t gather_reduce_peers(const crnet__call *call) {
  return halving_peers(call->p);
}

const crnet__algorithm crnet__allgather_reduce_algorithm = {
    .name = "allgather-reduce",
    .id = 11,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE),
    .in_auto = true,
    .build = gather_reduce_build,
    .terms = gather_reduce_terms,
    .keeps_order = crnet__keeps_order_always,
    .auto_fits = gather_reduce_fits,
    .peers = gather_reduce_peers,
    .summary = "the circulant allgather of every vector, then a local fold "
               "in rank order: ceil(log2 p) rounds; auto takes it while p·m "
               "<= 1 MiB"};
