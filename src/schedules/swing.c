/* Swing allreduce: D. De Sensi, T. Bonato, D. Saam, T. Hoefler, "Swing:
 * Short-cutting Rings for Higher Bandwidth Allreduce", NSDI 2024. Names are
 * the paper's: p ranks, rank r, step s, the peer pi(r, s) and the signed
 * distance rho(s). m is the vector length in elements; α latency, β time
 * per element, γ reduction time per element.
 *
 * PEERS. rho(s) = sum_{i=0..s} (-2)^i = (1 - (-2)^(s+1)) / 3, so 1, -1, 3,
 *   -5, 11, -21, ...; at step s, rank r talks to
 *     pi(r, s) = r + rho(s) mod p   (r even)
 *                r - rho(s) mod p   (r odd).
 *   rho(s) is odd, so an even rank always meets an odd one and pi(., s) is
 *   an involution: pi(pi(r, s), s) = r, every step pairs all ranks. Unlike
 *   recursive doubling (distance 2^s) the distance |rho(s)| swings left and
 *   right and stays about 2^s·2/3, which is what shortens the paths on a
 *   torus; on crnet's fully connected links the two cost alike in the
 *   α-β-γ model (see the row below).
 *   At p = 2^d the paper shows that the steps reach every rank exactly once:
 *   the ranks reached from r by the steps s+1..d-1, call them the subtree
 *   T_s(r) (T_{d-1}(r) = {r}, T_{-1}(r) = all ranks), satisfy
 *     T_{s-1}(r) = T_s(r) disjoint-union T_s(pi(r, s)).
 *   Both variants rest on that identity; the simulator checks its
 *   consequences (every rank's sum is right) for p = 1..128.
 *
 * LATENCY-OPTIMAL (the recursive-doubling shape). For s = 0..d-1: exchange
 *   the whole vector with pi(r, s) and reduce it into the own. Before step s
 *   rank r holds the reduction over T'_s(r), the 2^s ranks reached by steps
 *   0..s-1; the peer's set is disjoint from it, so after d steps every rank
 *   holds the sum of all p. d rounds; per rank d·m sent, received and
 *   reduced: d·(α + mβ + mγ). TEMP: m (the received vector), none at p = 2
 *   when not in place.
 *
 * BANDWIDTH-OPTIMAL (a reduce-scatter, then an allgather, on Swing's
 *   peers, like Rabenseifner's halving and doubling). The vector is cut
 *   into p blocks by crnet__block_range; block b belongs to rank b.
 *   reduce-scatter, s = 0..d-1: send pi(r, s) the blocks of its remaining
 *     subtree T_s(pi(r, s)), receive the peer's partial of the blocks of
 *     the own subtree T_s(r) into TEMP and reduce it into them. By the
 *     identity, the blocks r is still responsible for before step s are
 *     T_{s-1}(r), so it keeps half of them and hands on the other half;
 *     after d steps it holds its own block b = r fully reduced.
 *   allgather, s = d-1..0, the mirror image: send the blocks of T_s(r)
 *     (complete) to pi(r, s) and receive those of T_s(pi(r, s)) straight
 *     into place; r then holds T_{s-1}(r).
 *   Subtrees are not runs of consecutive ranks, so a message is a gather
 *   list of up to 2^(d-1-s) blocks (adjacent blocks merged), never a copy.
 *   2d rounds: 2d·α + 2(p-1)/p·m·β + (p-1)/p·m·γ, the same as
 *   Rabenseifner's. Every element is reduced once, by its owner, then only
 *   copied: all ranks end bitwise identical. TEMP: the largest received
 *   piece, about m/2.
 *
 * WHICH VARIANT. The builder prices both with the call's α-β-γ tuning (the
 *   shared-memory α and β when call->shm_links) and takes the cheaper,
 *   latency-optimal on a tie. It reads only what every rank of the call
 *   shares (p, count, esize, the tuning, shm_links), never the rank, so all
 *   ranks build the same variant; the row's terms are the chosen variant's.
 *   With the built-in tuning the bandwidth-optimal variant takes over from
 *   533 KB at p = 2, 116 KB at p = 4 and 76 KB at p = 8 on TCP's α and β;
 *   on shared memory's, from 67 KB, 32 KB and 24 KB.
 *
 * NON-POWER-OF-TWO p. The paper's own treatment of a p that is not a power
 *   of two could not be consulted while writing this file, so it is not
 *   what is implemented. Instead crnet's balanced fold (hypercube.c) takes
 *   p to p' = 2^d, the largest power of two <= p, with x = p - p':
 *     A: pairs (2i, 2i+1), i < x, swap halves: 2i sends V[h..m) and
 *        reduces [0, h), 2i+1 sends V[0..h) and reduces [h, m), h = m/2;
 *     B: 2i+1 (the dropper) sends its reduced half to 2i (the survivor).
 *   Survivors are renumbered j = i (pair i) and j = r - x (r >= 2x), Swing
 *   runs on the p' new ranks, and at the end each survivor sends its
 *   dropper the whole result. +3 rounds, +2m moved, +m/2 reduced by the
 *   paired ranks. Latency-optimal: d + 3 rounds; bandwidth-optimal 2d + 3.
 *
 * OPERATORS. The reductions follow the Swing pairing, not rank order (the
 *   first partner of rank 2 is rank 3, its second rank 1), so the operator
 *   must be commutative; the row's keeps_order is NULL, auto skips it for
 *   non-commutative operators and a named request is refused.
 *
 * Example, p = 5 (p' = 4, x = 1), rho = 1, -1; pi on new ranks: step 0
 *   0<->1, 2<->3; step 1 0<->3, 1<->2. New ranks 0 = r0 (ranks 0, 1),
 *   1 = r2, 2 = r3, 3 = r4.
 *     A  r0<->r1 swap halves                          ranks 2..4 idle
 *     B  r1 -> r0: the upper half reduced
 *   latency-optimal, whole vector:
 *     0  r0<->r2, r3<->r4        1  r0<->r4, r2<->r3
 *     2  r0 -> r1: the result
 *   bandwidth-optimal, m = 8, block b = [2b, 2b+2) of new rank b:
 *     T_0(0) = {0, 3}, T_0(1) = {1, 2}
 *     0  r0 sends blocks 1, 2 to r2, keeps and reduces 0, 3 (r3<->r4 alike)
 *     1  r0 sends block 3 to r4, keeps 0; r2 sends 2 to r3, keeps 1
 *     2  r0 sends block 0 to r4, gets 3; r2<->r3 blocks 1, 2
 *     3  r0 sends blocks 0, 3 to r2, gets 1, 2; r3<->r4 alike
 *     4  r0 -> r1: all 8
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "algorithm.h"
#include "alloc.h"
#include "crnet.h"
#include "model.h"

/* ------------------------------------------------------------------------
 * Peers
 */

/* rho(s) = (1 - (-2)^(s+1)) / 3. */
static int64_t rho(int s) {
  int64_t power = 1;
  for (int i = 0; i <= s; i++)
    power *= -2;
  return (1 - power) / 3;
}

/* pi(r, s) among p ranks. */
static int32_t swing_peer(int32_t r, int s, int32_t p) {
  int64_t distance = rho(s) % p;
  int64_t q = (r % 2 == 0) ? r + distance : r - distance;
  return (int32_t)(((q % p) + p) % p);
}

/* ------------------------------------------------------------------------
 * Building context
 */

enum variant { LATENCY_OPTIMAL, BANDWIDTH_OPTIMAL };

typedef struct swing {
  crnet__schedule *s;
  int32_t p, r;
  int32_t pp, x, d; /* p', p - p', log2 p' */
  uint64_t m;
  uint8_t inbuf; /* the input: SEND, or RECV in place */
  bool wvalid;   /* RECV holds this rank's partial (else the input does) */
  uint64_t *Q;   /* block b of the p' blocks: Q[b] .. Q[b+1] */
  bool *in_set;  /* p' flags: the blocks of the subtree at hand */
} swing;

static crnet__seg seg(uint8_t buf, uint64_t off, uint64_t n) {
  return crnet__seg_make(buf, off, n);
}

/* Original rank of new rank j (the survivor of pair j, or j + x). */
static int32_t rank_of(const swing *w, int32_t j) {
  return j < w->x ? 2 * j : j + w->x;
}

/* New rank of this rank, or -1 for a dropper. */
static int32_t new_rank(const swing *w) {
  if (w->r >= 2 * w->x)
    return w->r - w->x;
  return w->r % 2 == 0 ? w->r / 2 : -1;
}

/* Receives `n` elements at `off` from peer and reduces them into RECV.
 * Until RECV holds the partial, the message lands in RECV itself and the
 * input is reduced into it; later it lands in TEMP at temp_off. The
 * caller marks RECV valid once all of a round's pieces are posted. */
static void recv_reduce(swing *w, int32_t peer, uint64_t off, uint64_t n,
                        uint64_t temp_off) {
  if (n == 0)
    return;
  if (w->wvalid) {
    crnet__sched_recv(w->s, peer, CRNET__BUF_TEMP, temp_off, n);
    crnet__sched_need_temp(w->s, temp_off + n);
    crnet__sched_reduce(w->s, seg(CRNET__BUF_TEMP, temp_off, n),
                        seg(CRNET__BUF_RECV, off, n), CRNET__SRC_LEFT);
  } else {
    crnet__sched_recv(w->s, peer, CRNET__BUF_RECV, off, n);
    crnet__sched_reduce(w->s, seg(w->inbuf, off, n),
                        seg(CRNET__BUF_RECV, off, n), CRNET__SRC_LEFT);
  }
}

/* Sends `n` elements at `off`: from RECV once it holds the partial. */
static void send_part(swing *w, int32_t peer, uint64_t off, uint64_t n) {
  crnet__sched_send(w->s, peer, w->wvalid ? CRNET__BUF_RECV : w->inbuf, off, n);
}

static int swing_init(swing *w, crnet__schedule *out, const crnet__call *c) {
  if (out == NULL || c->p < 1 || c->rank < 0 || c->rank >= c->p)
    return CRNET_EINVAL;
  w->s = out;
  w->p = c->p;
  w->r = c->rank;
  w->d = crnet__floor_log2(c->p);
  w->pp = INT32_C(1) << w->d;
  w->x = c->p - w->pp;
  w->m = c->count;
  w->inbuf = c->in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  w->wvalid = c->in_place;
  w->Q = crnet__malloc(((size_t)w->pp + 1) * sizeof(*w->Q));
  w->in_set = crnet__malloc((size_t)w->pp * sizeof(*w->in_set));
  if (w->Q == NULL || w->in_set == NULL) {
    free(w->Q);
    free(w->in_set);
    return CRNET_ENOMEM;
  }
  w->Q[0] = 0;
  for (int32_t b = 0; b < w->pp; b++) {
    uint64_t off, n;
    crnet__block_range(w->m, w->pp, b, &off, &n);
    w->Q[b + 1] = w->Q[b] + n;
  }
  crnet__sched_init(out, c->p, c->rank);
  return 0;
}

static int swing_done(swing *w) {
  free(w->Q);
  free(w->in_set);
  return crnet__sched_finish(w->s);
}

/* ------------------------------------------------------------------------
 * The fold of a non-power-of-two p (see the file comment)
 */

static void fold_in(swing *w) {
  if (w->x == 0)
    return;
  crnet__sched_round(w->s);
  if (w->r >= 2 * w->x) {
    crnet__sched_round(w->s);
    return;
  }
  bool survivor = w->r % 2 == 0;
  int32_t peer = survivor ? w->r + 1 : w->r - 1;
  uint64_t h = w->m / 2;
  uint64_t keep_off = survivor ? 0 : h, keep_n = survivor ? h : w->m - h;
  uint64_t give_off = survivor ? h : 0, give_n = w->m - keep_n;
  send_part(w, peer, give_off, give_n);
  recv_reduce(w, peer, keep_off, keep_n, 0);
  w->wvalid = true;
  crnet__sched_round(w->s);
  if (survivor)
    crnet__sched_recv(w->s, peer, CRNET__BUF_RECV, give_off, give_n);
  else
    send_part(w, peer, keep_off, keep_n);
}

/* The survivor hands its dropper the result, in the round after Swing's
 * last, `last` (the dropper waits through empty rounds until then). */
static void fold_out(swing *w, uint32_t last) {
  if (w->x == 0 || w->r >= 2 * w->x)
    return;
  crnet__sched_pad(w->s, last);
  crnet__sched_round(w->s);
  if (w->r % 2 == 0)
    crnet__sched_send(w->s, w->r + 1, CRNET__BUF_RECV, 0, w->m);
  else
    crnet__sched_recv(w->s, w->r - 1, CRNET__BUF_RECV, 0, w->m);
}

/* ------------------------------------------------------------------------
 * The two variants, on new rank j of p' = 2^d
 */

static void latency_optimal(swing *w, int32_t j) {
  for (int s = 0; s < w->d; s++) {
    int32_t peer = rank_of(w, swing_peer(j, s, w->pp));
    crnet__sched_round(w->s);
    send_part(w, peer, 0, w->m);
    recv_reduce(w, peer, 0, w->m, 0);
    w->wvalid = true;
  }
}

/* Marks in_set the blocks of the subtree T_s(q): the new ranks reached
 * from q by steps s+1..d-1. A breadth-first walk over a list that doubles
 * each step; at p' = 2^d no rank is reached twice. */
static void mark_subtree(swing *w, int32_t *list, int32_t q, int s) {
  int32_t n = 1;
  list[0] = q;
  for (int t = s + 1; t < w->d; t++) {
    for (int32_t i = 0; i < n; i++)
      list[n + i] = swing_peer(list[i], t, w->pp);
    n *= 2;
  }
  for (int32_t b = 0; b < w->pp; b++)
    w->in_set[b] = false;
  for (int32_t i = 0; i < n; i++)
    w->in_set[list[i]] = true;
}

/* Calls `part` for each run of adjacent marked blocks, in memory order (the
 * order both ends of a message agree on). */
typedef void (*part_fn)(swing *w, int32_t peer, uint64_t off, uint64_t n,
                        uint64_t *temp_off);

static void for_marked_runs(swing *w, int32_t peer, part_fn part) {
  uint64_t temp_off = 0;
  int32_t b = 0;
  while (b < w->pp) {
    if (!w->in_set[b]) {
      b++;
      continue;
    }
    int32_t e = b;
    while (e < w->pp && w->in_set[e])
      e++;
    part(w, peer, w->Q[b], w->Q[e] - w->Q[b], &temp_off);
    b = e;
  }
}

static void send_run(swing *w, int32_t peer, uint64_t off, uint64_t n,
                     uint64_t *temp_off) {
  (void)temp_off;
  send_part(w, peer, off, n);
}

static void recv_reduce_run(swing *w, int32_t peer, uint64_t off, uint64_t n,
                            uint64_t *temp_off) {
  recv_reduce(w, peer, off, n, *temp_off);
  *temp_off += n;
}

static void recv_run(swing *w, int32_t peer, uint64_t off, uint64_t n,
                     uint64_t *temp_off) {
  (void)temp_off;
  crnet__sched_recv(w->s, peer, CRNET__BUF_RECV, off, n);
}

/* Out of memory marks the schedule, which crnet__sched_finish reports. */
static void bandwidth_optimal(swing *w, int32_t j) {
  int32_t *list = crnet__malloc((size_t)w->pp * sizeof(*list));
  if (list == NULL) {
    w->s->oom = true;
    return;
  }
  for (int s = 0; s < w->d; s++) {
    int32_t q = swing_peer(j, s, w->pp), peer = rank_of(w, q);
    crnet__sched_round(w->s);
    mark_subtree(w, list, q, s);
    for_marked_runs(w, peer, send_run);
    mark_subtree(w, list, j, s);
    for_marked_runs(w, peer, recv_reduce_run);
    w->wvalid = true;
  }
  for (int s = w->d - 1; s >= 0; s--) {
    int32_t q = swing_peer(j, s, w->pp), peer = rank_of(w, q);
    crnet__sched_round(w->s);
    mark_subtree(w, list, j, s);
    for_marked_runs(w, peer, send_run);
    mark_subtree(w, list, q, s);
    for_marked_runs(w, peer, recv_run);
  }
  free(list);
}

/* ------------------------------------------------------------------------
 * The model's terms, and the choice of variant
 *
 * d = floor(log2 p), p' = 2^d, q' = (p'-1)/p', f = 1 when p is not a power
 * of two (the fold: +3 rounds, +2m moved, +m/2 reduced):
 *   latency-optimal    d + 3f,   d + 2f,     d + f/2
 *   bandwidth-optimal  2d + 3f,  2q' + 2f,   q' + f/2
 * the terms of hypercube and rabenseifner allreduce: on links where every
 * pair of ranks is one hop apart, Swing moves what they move.
 */

static crnet__model_coef variant_coef(int32_t p, enum variant v) {
  int d = crnet__floor_log2(p);
  double pp = (double)(INT64_C(1) << d), qq = (pp - 1) / pp;
  double f = (INT64_C(1) << d) != p;
  if (v == LATENCY_OPTIMAL)
    return (crnet__model_coef){d + 3 * f, d + 2 * f, d + f / 2};
  return (crnet__model_coef){2 * d + 3 * f, 2 * qq + 2 * f, qq + f / 2};
}

static double variant_seconds(const crnet__call *call, enum variant v) {
  crnet__tuning defaults;
  const crnet__tuning *t = crnet__model_tuning(call, &defaults);
  double m = crnet__model_bytes(call);
  crnet__model_coef c = variant_coef(call->p, v);
  crnet__model_terms terms = {c.rounds, c.moved * m, c.reduced * m,
                              CRNET__TUNING_NPARAMS};
  return crnet__model_seconds_on(&terms, t, call->p, call->shm_links);
}

/* The cheaper variant for the call, from what all its ranks share. */
static enum variant choose_variant(const crnet__call *call) {
  if (call->p < 2)
    return LATENCY_OPTIMAL;
  return variant_seconds(call, BANDWIDTH_OPTIMAL) <
                 variant_seconds(call, LATENCY_OPTIMAL)
             ? BANDWIDTH_OPTIMAL
             : LATENCY_OPTIMAL;
}

/* ------------------------------------------------------------------------
 * The row
 */

static int swing_build(const crnet__call *c, crnet__schedule *out) {
  swing w;
  int rc;
  if (c->coll != CRNET_COLL_ALLREDUCE)
    return CRNET_EINVAL;
  if ((rc = swing_init(&w, out, c)) != 0)
    return rc;
  if (c->p == 1) {
    if (!c->in_place) {
      crnet__sched_round(out);
      if (w.m > 0)
        crnet__sched_copy(out, seg(CRNET__BUF_SEND, 0, w.m),
                          seg(CRNET__BUF_RECV, 0, w.m));
    }
    return swing_done(&w);
  }
  enum variant v = choose_variant(c);
  uint32_t fold_rounds = w.x > 0 ? 2 : 0;
  uint32_t swing_rounds = v == LATENCY_OPTIMAL ? w.d : 2 * w.d;
  fold_in(&w);
  int32_t j = new_rank(&w);
  if (j >= 0) {
    if (v == LATENCY_OPTIMAL)
      latency_optimal(&w, j);
    else
      bandwidth_optimal(&w, j);
  }
  fold_out(&w, fold_rounds + swing_rounds);
  return swing_done(&w);
}

static bool swing_terms(const crnet__call *call, crnet__model_coef *c) {
  if (call->coll != CRNET_COLL_ALLREDUCE || call->p < 2)
    return false;
  *c = variant_coef(call->p, choose_variant(call));
  return true;
}

/* At p' = 2^d the d peers pi(r, s) are distinct (each step reaches ranks
 * no earlier step did), plus the fold's partner at other p. */
static int32_t swing_peers(const crnet__call *call) {
  int32_t p = call->p;
  int d = crnet__floor_log2(p);
  return d + ((INT64_C(1) << d) != p);
}

const crnet__algorithm crnet__swing_algorithm = {
    .name = "swing",
    .id = 15,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE),
    .in_auto = true,
    .build = swing_build,
    .terms = swing_terms,
    .keeps_order = NULL,
    .peers = swing_peers,
    .summary = "De Sensi et al.'s Swing: peers r +- rho(s) swinging left and "
               "right; latency-optimal or bandwidth-optimal by the model; "
               "the balanced fold at any p; commutative operators only"};
