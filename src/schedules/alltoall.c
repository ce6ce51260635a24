/* All-to-all personalized communication (total exchange): Grama et al.,
 * Introduction to Parallel Computing, ch. 4 (all-to-all personalized on a
 * ring and on a hypercube, the optimal pairwise schedule), restated in
 * ../shared/papers/README.md §3-4; Bruck et al., "Efficient algorithms for
 * all-to-all communications in multiport message-passing systems" (the
 * log-round index algorithm; Träff's circulant reduce-scatter template of
 * README §2 with concatenation as the operator). Names: p processes, rank r,
 * m = count elements per destination (the paper's m), block j of SEND goes
 * to rank j, block j of RECV comes from rank j.
 *
 * PAIRWISE (Grama, "optimal algorithm"): p-1 rounds, one block each way per
 * round. Round j = 1 .. p-1: p a power of two: exchange with r XOR j (send
 * SEND block r^j, receive into RECV block r^j); otherwise send SEND block
 * r+j to r+j || receive RECV block r-j from r-j. The own block is copied
 * after round 1.
 *   Per rank: (p-1)·m elements sent and received.
 *   Cost: (p-1)·(α + m·β). No TEMP. The rounds are independent of each
 *   other (schedule.h), so the executor keeps several in flight at once
 *   and the α terms overlap.
 *   In place: a received block may only overwrite its slot once the block
 *   the slot held has left, so the exchange must be symmetric: send block q
 *   to q and receive q's block from q into TEMP (m elements), then copy it
 *   to slot q. Power of two: r XOR j, p-1 rounds. Even p: the round-robin
 *   1-factorisation of K_p (q = p-1 odd: in round j = 0 .. p-2 rank x < q
 *   pairs with (j-x) mod q, and the x with 2x = j mod q pairs with p-1),
 *   p-1 rounds. Odd p: no perfect matching exists, so p rounds with
 *   partner (j-x) mod p and each rank idle in the one round where the
 *   partner is itself: still p-1 communicating rounds per rank.
 *
 * RING (Grama, all-to-all personalized on a ring): store-and-forward along
 * r -> r+1. Step k = 1 .. p-1 (round k-1): rank r sends the p-k blocks
 * that originate at r-k+1 and are meant for r+1 .. r+p-k (at step 1: all
 * its own blocks but block r, in one message); it receives from r-1 the
 * p-k blocks of origin r-k meant for r .. r+p-k-1, keeps the first (it
 * lands straight in RECV block r-k) and forwards the rest next step.
 *   Per rank: sum_k (p-k)·m = m·p(p-1)/2 elements sent and received.
 *   Cost: (p-1)·α + m·p(p-1)/2·β = (α + β·m·p/2)(p-1).
 *   Memory: the blocks in transit, double buffered (a step sends the
 *   previous step's blocks while receiving the next): TEMP of 2(p-1)·m.
 *   In place: step 1 sends every own block from RECV, so its kept block
 *   lands in TEMP and is copied to RECV block r-1 after the round.
 *
 * BRUCK (log-round, index algorithm): with R[i] = block (r+i) mod p of SEND
 * (the local rotation, done here by addressing, never by copying), round
 * k = 0 .. ceil(log2 p)-1: send every R[i] whose index i has bit k set to
 * r+2^k || receive the same indices from r-2^k into R[i]. A block from rank
 * s to rank s+i travels the set bits of i and keeps its index, so at the
 * end R[i] at rank r is the block from r-i: the inverse rotation RECV block
 * (r-i) = R[i] is again addressing: the last receive of an index (the round
 * of its highest bit) lands straight in RECV block (r-i).
 *   Rounds ceil(log2 p). Per rank: m·sum_k |{1 <= i < p: bit k of i set}|
 *   elements sent and received (m·p/2·log2 p for p a power of two).
 *   Cost: ceil(log2 p)·α + ~m·p/2·ceil(log2 p)·β: fewer rounds, more
 *   volume, for small m.
 *   Memory: an index received in one round and sent on in a later one waits
 *   in TEMP; its t-th receive goes to half (t mod 2) of TEMP, so a round
 *   never receives into the slot it sends from: TEMP of 2p·m. In place the
 *   input is first copied to TEMP (a local round before the first message),
 *   because final receives overwrite RECV blocks whose input has not left
 *   yet: TEMP of 3p·m.
 *
 * HYPERCUBE (Grama, store-and-forward on a hypercube; p a power of two
 * only, CRNET_EINVAL otherwise): the same index algorithm with XOR for +
 * and -: R[i] = block r^i, round k = 0 .. log2 p - 1 exchanges the R[i]
 * with bit k set with partner r XOR 2^k, and R[i] ends as RECV block r^i
 * (a block from s to s^i crosses the dimensions of the set bits of i).
 * log2 p rounds, m·p/2 elements each way per round: (α + β·m·p/2)·log2 p.
 * Memory as Bruck. Over Bruck it only buys symmetric pairs (each link
 * carries one exchange per round, as on a real hypercube).
 *
 * ALLTOALLV (MPI_Alltoallv: a count and a displacement per pair, so rank r
 * sends s_j = scounts[j] elements to j and receives r_j = rcounts[j] from
 * j). Store-and-forward would need TEMP sized by other ranks' counts, which
 * a rank does not know, so both schedules are direct, PAIRWISE's peers:
 * round j = 1 .. p-1 sends SEND[sdispls[to] ..+ s_to] to `to` and receives
 * RECV[rdispls[from] ..+ r_from] from `from`, straight, with to = from =
 * r XOR j for p a power of two (pairwise only), else to = r+j and from =
 * r-j; the own block is copied in round 1. Every message is declared even
 * when empty: were empty ones dropped, a program whose counts disagree
 * (rank j's scounts[r] != rank r's rcounts[j]) would leave one side waiting
 * for a message the other never sends; declared, it is a length mismatch
 * the executor reports.
 *   alltoallv_pairwise: the rounds are independent (each has its own peer
 *     and its own regions, provided the receive regions do not overlap, as
 *     MPI requires), so the executor keeps several in flight.
 *   alltoallv_ring: the same exchanges in dependent rounds, one at a time:
 *     in flight at once only one message each way, whatever the counts.
 *   Rounds p-1 (1 for p = 1: the copy). Per rank sum_{j != r} s_j sent and
 *   sum_{j != r} r_j received. Cost of the ring: the sum over its rounds
 *   of α + max(s_to, r_from)·β; pairwise overlaps the rounds up to the
 *   executor's window. No TEMP.
 *
 * Worked example, p = 5, rank 0 (blocks by destination):
 *   pairwise (not a power of two): round j sends block j to j, receives
 *     block 5-j from 5-j: (1; 4), (2; 3), (3; 2), (4; 1). In place: rounds
 *     j = 0..4 with partner (j-0) mod 5 = 0, 1, 2, 3, 4: idle in round 0.
 *   ring: step 1 sends own blocks for 1,2,3,4 to 1, receives from 4 the
 *     blocks of origin 4 for 0,1,2,3 (keeps 4->0); step 2 sends 4->1,2,3
 *     and receives origin 3 for 0,1,2; step 3: 3->1,2 and origin 2 for 0,1;
 *     step 4: 2->1 and origin 1 for 0. 4+3+2+1 = 10 = p(p-1)/2 blocks.
 *   bruck, 3 rounds: round 0 (to 1, from 4) R[1], R[3]; round 1 (to 2,
 *     from 3) R[2], R[3]; round 2 (to 4, from 1) R[4]. R[1] and R[2] and
 *     R[4] land in RECV blocks 4, 3, 1 at once; R[3] waits in TEMP after
 *     round 0 and lands in RECV block 2 in round 1. 5 blocks sent.
 *   hypercube: needs a power of two; p = 4, rank 1 (R[i] = block 1^i):
 *     round 0 with rank 0: R[1], R[3]; round 1 with rank 3: R[2], R[3].
 *   alltoallv (both): the pairwise peers (1; 4), (2; 3), (3; 2), (4; 1),
 *     each block with its own count and displacement, empty ones too.
 */
#include "alltoall.h"

#include "algorithm.h"
#include "crnet.h"

static int32_t amod(int64_t x, int32_t p) {
  return (int32_t)(((x % p) + p) % p);
}

/* Checks the arguments, starts the schedule, and handles p = 1. Returns 1
 * if the caller should go on building, 0 or an error code if done. */
static int start(crnet__schedule *out, int32_t p, int32_t rank,
                 uint64_t count, bool in_place) {
  if (p < 1 || rank < 0 || rank >= p || count > UINT64_MAX / (uint64_t)p)
    return CRNET_EINVAL;
  crnet__sched_init(out, p, rank);
  if (p > 1)
    return 1;
  if (!in_place) {
    crnet__sched_round(out);
    crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, 0, count),
                      crnet__seg_make(CRNET__BUF_RECV, 0, count));
  }
  return crnet__sched_finish(out);
}

static void copy_own(crnet__schedule *out, int32_t rank, uint64_t count) {
  uint64_t off = (uint64_t)rank * count;
  crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_SEND, off, count),
                    crnet__seg_make(CRNET__BUF_RECV, off, count));
}

/* In place: exchange block q with rank q through one block of TEMP. */
static void swap_with(crnet__schedule *out, int32_t q, uint64_t count) {
  uint64_t off = (uint64_t)q * count;
  crnet__sched_send_peer(out, q);
  crnet__sched_send(out, q, CRNET__BUF_RECV, off, count);
  crnet__sched_recv_peer(out, q);
  crnet__sched_recv(out, q, CRNET__BUF_TEMP, 0, count);
  crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_TEMP, 0, count),
                    crnet__seg_make(CRNET__BUF_RECV, off, count));
}

int crnet__pairwise_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                             uint64_t count, bool in_place) {
  int rc = start(out, p, rank, count, in_place);
  if (rc != 1)
    return rc;
  bool pow2 = (p & (p - 1)) == 0;
  if (!in_place) {
    for (int32_t j = 1; j < p; j++) {
      int32_t to = pow2 ? rank ^ j : amod((int64_t)rank + j, p);
      int32_t from = pow2 ? rank ^ j : amod((int64_t)rank - j, p);
      /* Every round reads its own SEND block and fills its own RECV
       * block, from a peer of its own: the executor may run them all at
       * once. */
      if (j == 1)
        crnet__sched_round(out);
      else
        crnet__sched_round_independent(out);
      crnet__sched_send_peer(out, to);
      crnet__sched_send(out, to, CRNET__BUF_SEND, (uint64_t)to * count,
                        count);
      crnet__sched_recv_peer(out, from);
      crnet__sched_recv(out, from, CRNET__BUF_RECV, (uint64_t)from * count,
                        count);
      if (j == 1)
        copy_own(out, rank, count);
    }
    return crnet__sched_finish(out);
  }
  crnet__sched_need_temp(out, count);
  if (pow2) {
    for (int32_t j = 1; j < p; j++) {
      crnet__sched_round(out);
      swap_with(out, rank ^ j, count);
    }
    return crnet__sched_finish(out);
  }
  /* The 1-factorisation over q = the odd one of p, p-1 (see above). */
  int32_t q = p % 2 ? p : p - 1;
  for (int32_t j = 0; j < q; j++) {
    int32_t partner;
    if (rank == q) /* p even: the extra rank */
      partner = (int32_t)((int64_t)j * ((q + 1) / 2) % q);
    else {
      partner = amod((int64_t)j - rank, q);
      if (partner == rank)
        partner = p % 2 ? -1 : q;
    }
    crnet__sched_round(out);
    if (partner >= 0)
      swap_with(out, partner, count);
  }
  return crnet__sched_finish(out);
}

int crnet__ring_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                         uint64_t count, bool in_place) {
  int rc = start(out, p, rank, count, in_place);
  if (rc != 1)
    return rc;
  int32_t next = amod(rank + 1, p), prev = amod(rank - 1, p);
  uint64_t slot = (uint64_t)(p - 1) * count; /* one half of TEMP */
  uint8_t in = in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  crnet__sched_need_temp(out, 2 * slot);
  for (int32_t k = 1; k < p; k++) {
    uint64_t fwd = (uint64_t)(k % 2) * slot; /* where this step's rest goes */
    crnet__sched_round(out);
    crnet__sched_send_peer(out, next);
    if (k == 1)
      for (int32_t t = 1; t < p; t++)
        crnet__sched_send(out, next, in,
                          (uint64_t)amod((int64_t)rank + t, p) * count, count);
    else
      crnet__sched_send(out, next, CRNET__BUF_TEMP,
                        (uint64_t)((k - 1) % 2) * slot,
                        (uint64_t)(p - k) * count);
    crnet__sched_recv_peer(out, prev);
    uint64_t keep = (uint64_t)amod((int64_t)rank - k, p) * count;
    if (k == 1 && in_place) {
      uint64_t t = fwd + (uint64_t)(p - 2) * count;
      crnet__sched_recv(out, prev, CRNET__BUF_TEMP, t, count);
      crnet__sched_recv(out, prev, CRNET__BUF_TEMP, fwd,
                        (uint64_t)(p - 2) * count);
      crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_TEMP, t, count),
                        crnet__seg_make(CRNET__BUF_RECV, keep, count));
    } else {
      crnet__sched_recv(out, prev, CRNET__BUF_RECV, keep, count);
      crnet__sched_recv(out, prev, CRNET__BUF_TEMP, fwd,
                        (uint64_t)(p - k - 1) * count);
    }
    if (k == 1 && !in_place)
      copy_own(out, rank, count);
  }
  return crnet__sched_finish(out);
}

static int popcount32(uint32_t x) {
  int n = 0;
  for (; x; x &= x - 1)
    n++;
  return n;
}

/* Bruck (hyper = false: partners r +- 2^k, R[i] = block r+i, result from
 * r-i) or the hypercube (hyper = true, p a power of two: partner r XOR 2^k,
 * R[i] = block r^i, result from r^i); see the top of the file. */
static int index_alg(crnet__schedule *out, int32_t p, int32_t rank,
                     uint64_t count, bool in_place, bool hyper) {
  int rc = start(out, p, rank, count, in_place);
  if (rc != 1)
    return rc;
  uint64_t pm = (uint64_t)p * count;
  /* TEMP: [the input copy, in place] [half 0] [half 1], p blocks each. */
  uint64_t half0 = in_place ? pm : 0;
  uint8_t in = in_place ? CRNET__BUF_TEMP : CRNET__BUF_SEND;
  crnet__sched_need_temp(out, half0 + 2 * pm);
  if (in_place) {
    crnet__sched_round(out);
    crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_RECV, 0, pm),
                      crnet__seg_make(CRNET__BUF_TEMP, 0, pm));
  }
  for (int32_t k = 0; (INT64_C(1) << k) < p; k++) {
    int32_t bit = INT32_C(1) << k;
    int32_t to = hyper ? rank ^ bit : amod((int64_t)rank + bit, p);
    int32_t from = hyper ? rank ^ bit : amod((int64_t)rank - bit, p);
    crnet__sched_round(out);
    crnet__sched_send_peer(out, to);
    crnet__sched_recv_peer(out, from);
    /* All send segments first, then all receive segments (schedule.c
     * keeps each transfer's segments contiguous). */
    for (int pass = 0; pass < 2; pass++)
      for (int32_t i = bit; i < p; i++) {
        if (!(i & bit))
          continue;
        int t = popcount32((uint32_t)i & (uint32_t)(bit - 1)); /* receives
                                                                  so far */
        if (pass == 0 && t == 0)
          crnet__sched_send(out, to, in,
                            (uint64_t)(hyper ? rank ^ i
                                             : amod((int64_t)rank + i, p)) *
                                count,
                            count);
        else if (pass == 0)
          crnet__sched_send(out, to, CRNET__BUF_TEMP,
                            half0 + (uint64_t)(t % 2) * pm +
                                (uint64_t)i * count,
                            count);
        else if ((i >> (k + 1)) == 0) /* the highest bit: the last receive */
          crnet__sched_recv(out, from, CRNET__BUF_RECV,
                            (uint64_t)(hyper ? rank ^ i
                                             : amod((int64_t)rank - i, p)) *
                                count,
                            count);
        else
          crnet__sched_recv(out, from, CRNET__BUF_TEMP,
                            half0 + (uint64_t)((t + 1) % 2) * pm +
                                (uint64_t)i * count,
                            count);
      }
  }
  if (!in_place)
    copy_own(out, rank, count);
  return crnet__sched_finish(out);
}

int crnet__bruck_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                          uint64_t count, bool in_place) {
  return index_alg(out, p, rank, count, in_place, false);
}

int crnet__hypercube_alltoall(crnet__schedule *out, int32_t p, int32_t rank,
                              uint64_t count, bool in_place) {
  if (p < 1 || (p & (p - 1)) != 0)
    return CRNET_EINVAL;
  return index_alg(out, p, rank, count, in_place, true);
}

/* Checks alltoallv's arguments and starts the schedule: 0 or
 * CRNET_EINVAL. */
static int v_start(crnet__schedule *out, int32_t p, int32_t rank,
                   const uint64_t *scounts, const uint64_t *sdispls,
                   const uint64_t *rcounts, const uint64_t *rdispls) {
  if (out == NULL || p < 1 || rank < 0 || rank >= p || scounts == NULL ||
      sdispls == NULL || rcounts == NULL || rdispls == NULL ||
      scounts[rank] != rcounts[rank])
    return CRNET_EINVAL;
  for (int32_t j = 0; j < p; j++)
    if (scounts[j] > UINT64_MAX - sdispls[j] ||
        rcounts[j] > UINT64_MAX - rdispls[j])
      return CRNET_EINVAL;
  crnet__sched_init(out, p, rank);
  return 0;
}

static int alltoallv(crnet__schedule *out, int32_t p, int32_t rank,
                     const uint64_t *scounts, const uint64_t *sdispls,
                     const uint64_t *rcounts, const uint64_t *rdispls,
                     bool independent) {
  int rc = v_start(out, p, rank, scounts, sdispls, rcounts, rdispls);
  if (rc != 0)
    return rc;
  bool xor = independent && (p & (p - 1)) == 0;
  /* Round 1 always exists: with p = 1 it holds the copy alone. */
  for (int32_t j = 1; j < p || j == 1; j++) {
    if (j > 1 && independent)
      crnet__sched_round_independent(out);
    else
      crnet__sched_round(out);
    if (j < p) {
      int32_t to = xor ? rank ^ j : amod((int64_t)rank + j, p);
      int32_t from = xor ? rank ^ j : amod((int64_t)rank - j, p);
      crnet__sched_send_peer(out, to);
      crnet__sched_send(out, to, CRNET__BUF_SEND, sdispls[to], scounts[to]);
      crnet__sched_recv_peer(out, from);
      crnet__sched_recv(out, from, CRNET__BUF_RECV, rdispls[from],
                        rcounts[from]);
    }
    if (j == 1)
      crnet__sched_copy(
          out, crnet__seg_make(CRNET__BUF_SEND, sdispls[rank], scounts[rank]),
          crnet__seg_make(CRNET__BUF_RECV, rdispls[rank], scounts[rank]));
  }
  return crnet__sched_finish(out);
}

int crnet__pairwise_alltoallv(crnet__schedule *out, int32_t p, int32_t rank,
                              const uint64_t *scounts, const uint64_t *sdispls,
                              const uint64_t *rcounts,
                              const uint64_t *rdispls) {
  return alltoallv(out, p, rank, scounts, sdispls, rcounts, rdispls, true);
}

int crnet__ring_alltoallv(crnet__schedule *out, int32_t p, int32_t rank,
                          const uint64_t *scounts, const uint64_t *sdispls,
                          const uint64_t *rcounts, const uint64_t *rdispls) {
  return alltoallv(out, p, rank, scounts, sdispls, rcounts, rdispls, false);
}

/* --- the registry's rows (algorithm.h) -------------------------------------
 *
 * Model terms (R, B/m, -; q = (p-1)/p, L = ceil(log2 p)): pairwise p-1, q
 * (alltoallv likewise: p-1 exchanges of a block each way, several in
 * flight); bruck L, sum_k c_k / p, with c_k how many of 1..p-1 have bit k
 * set (the blocks round k forwards). The ring's and the hypercube's rows
 * are in ring.c and hypercube.c.
 */

/* sum_k c_k / p for Bruck's all-to-all. */
static double bruck_volume(int32_t p) {
  int64_t total = 0;
  for (int k = 0; (INT64_C(1) << k) < p; k++) {
    int64_t period = INT64_C(2) << k, half = INT64_C(1) << k;
    /* j in [0, p) with bit k set: full periods, then the partial one */
    int64_t full = (int64_t)p / period, rest = (int64_t)p % period;
    total += full * half + (rest > half ? rest - half : 0);
  }
  return (double)total / p;
}

static int pairwise_build(const crnet__call *c, crnet__schedule *out) {
  if (c->coll == CRNET_COLL_ALLTOALLV)
    return crnet__pairwise_alltoallv(out, c->p, c->rank, c->counts,
                                     c->sdispls, c->rcounts, c->rdispls);
  return crnet__pairwise_alltoall(out, c->p, c->rank, c->count, c->in_place);
}

static bool pairwise_terms(const crnet__call *call, crnet__model_coef *c) {
  *c = (crnet__model_coef){call->p - 1.0, (double)(call->p - 1) / call->p, 0};
  return true;
}

static int32_t pairwise_peers(const crnet__call *call) { return call->p - 1; }

const crnet__algorithm crnet__pairwise_algorithm = {
    .name = "pairwise",
    .id = 9,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLTOALL) |
             CRNET__COLL_BIT(CRNET_COLL_ALLTOALLV),
    .in_auto = true,
    .build = pairwise_build,
    .terms = pairwise_terms,
    .peers = pairwise_peers,
    .summary = "pairwise exchange: p-1 rounds, each block sent straight to "
               "its rank, several rounds in flight"};

static int bruck_build(const crnet__call *c, crnet__schedule *out) {
  return crnet__bruck_alltoall(out, c->p, c->rank, c->count, c->in_place);
}

static bool bruck_terms(const crnet__call *call, crnet__model_coef *c) {
  *c = (crnet__model_coef){crnet__ceil_log2(call->p), bruck_volume(call->p),
                           0};
  return true;
}

/* Offsets 2^k, each both ways. */
static int32_t bruck_peers(const crnet__call *call) {
  int32_t s[64];
  int L = crnet__ceil_log2(call->p);
  for (int k = 0; k < L; k++)
    s[k] = (int32_t)(INT64_C(1) << k);
  return crnet__distinct_offsets(s, L, call->p);
}

const crnet__algorithm crnet__bruck_algorithm = {
    .name = "bruck",
    .id = 10,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLTOALL),
    .in_auto = true,
    .build = bruck_build,
    .terms = bruck_terms,
    .peers = bruck_peers,
    .summary = "Bruck's all-to-all: ceil(log2 p) rounds, blocks forwarded "
               "through the circulant's skips"};
