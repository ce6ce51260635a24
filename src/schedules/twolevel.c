/* Two-level schedules (see twolevel.h).
 *
 * Notation: H hosts, host h with n_h ranks (its members, in rank order,
 * have local ranks 0 .. n_h-1), n_min and n_max the smallest and largest
 * n_h, m the vector.
 *
 * ALLREDUCE, in three phases:
 *   1. inside each host, a reduce-scatter: local rank i ends with the
 *      host's sum of its slice of the vector;
 *   2. across hosts, for every slice, an allreduce among the ranks that
 *      hold it, one per host;
 *   3. inside each host, an allgather of the slices.
 * With equal hosts (n ranks each) the slices are the n blocks of the
 * vector, rank i of every host holds slice i, and the n allreduces of
 * phase 2 run at the same time, each on its own links: every rank sends
 * m/n across hosts (the whole host sends m), where a flat schedule sends
 * about 2m from every rank, most of it across hosts.
 *
 * Uneven hosts (3 + 5 + 1) need lanes. The vector is cut into L = n_max
 * lanes (crnet__block_range). On host h, local rank i owns the run of
 * lanes j with floor(j·n_h/L) = i: runs are contiguous, none is empty
 * (n_h <= L), and none is longer than ceil(L/n_h). Phase 1's slice of
 * local rank i is its run; phase 2 does one allreduce per lane j among the
 * owners of j on every host (sub-rank h: the owner on host h). A rank that
 * owns several lanes does them one after the other: lane j runs in slot
 * j mod S, S = ceil(n_max/n_min), and two lanes of one run never share a
 * slot (a run is at most S lanes long and contiguous). With equal hosts
 * S = 1 and L = n: the plain case above.
 *
 * Rounds. Frames are matched by round index, so each phase starts at the
 * same round on every rank: phase 1 takes R1 rounds, the most any host's
 * reduce-scatter takes, plus one local round (used in place, see below;
 * empty otherwise, since ranks may differ in that), phase
 * 2 S·R2 (R2 the cross-host allreduce's rounds), phase 3 R3, and ranks
 * with less to do have empty rounds. The flat schedules used here
 * (circulant and ring) give every rank of a call the same number of
 * rounds (tests/test_sim_twolevel.c checks it), so building sub-rank 0's
 * schedule tells a phase's length.
 *
 * Buffers. Not in place, phase 1 reads SEND and puts the run's sum at its
 * place in RECV; in place, it reads RECV (which it must not overwrite
 * while other slices are still read) and puts the sum in TEMP, and one
 * local round then copies it to its place in RECV. Phases 2 and 3 work in
 * place in RECV. TEMP: what the flat schedules need, plus the run in place.
 *
 * Cost, equal hosts of n ranks, circulant at both levels:
 *   ceil(log2 n)·(2α_shm) + 2(n-1)/n·m·β_shm    (phases 1 and 3)
 *   + 2·ceil(log2 H)·α + 2(H-1)/H·(m/n)·β         (phase 2)
 *   + ((n-1)/n·m + (H-1)/H·m/n)·γ
 * against the flat circulant's 2·ceil(log2 nH)·α + 2(nH-1)/(nH)·m·β with
 * every round priced at the slower link.
 *
 * BCAST from root r (host h_r): across hosts, a bcast among one leader
 * per host (the root on h_r, the first member elsewhere); then inside
 * every host a bcast from its leader. REDUCE to r: inside every host a
 * reduce to its leader (into TEMP), then across hosts a reduce of the
 * leaders' partial sums to r. One crossing per host of m bytes, where a
 * flat schedule crosses hosts in most of its rounds.
 */
#include "twolevel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "alloc.h"
#include "crnet.h"
#include "model.h"
#include "tuning.h"

/* The layout, from call->host. */
typedef struct hosts {
  int32_t H, nmin, nmax;
  int32_t *first;   /* H+1: host h's members are members[first[h] ..) */
  int32_t *members; /* p ranks, host by host, in rank order within one */
  int32_t me_host, me_local;
} hosts;

static void hosts_free(hosts *h) {
  free(h->first);
  free(h->members);
}

static int hosts_make(const crnet__call *c, hosts *h) {
  int32_t p = c->p, H = c->host != NULL ? c->nhosts : 1;
  int32_t *fill;
  memset(h, 0, sizeof *h);
  if (p < 1 || c->rank < 0 || c->rank >= p || H < 1 || H > p)
    return CRNET_EINVAL;
  h->H = H;
  h->first = crnet__calloc((size_t)H + 1, sizeof *h->first);
  h->members = crnet__malloc((size_t)p * sizeof *h->members);
  fill = crnet__calloc((size_t)H, sizeof *fill);
  if (h->first == NULL || h->members == NULL || fill == NULL) {
    free(fill);
    hosts_free(h);
    return CRNET_ENOMEM;
  }
  for (int32_t r = 0; r < p; r++) {
    int32_t g = c->host != NULL ? c->host[r] : 0;
    if (g < 0 || g >= H) {
      free(fill);
      hosts_free(h);
      return CRNET_EINVAL;
    }
    h->first[g + 1]++;
  }
  h->nmin = p;
  for (int32_t g = 0; g < H; g++) {
    int32_t n = h->first[g + 1];
    if (n == 0) { /* every host named must have a rank */
      free(fill);
      hosts_free(h);
      return CRNET_EINVAL;
    }
    h->nmin = n < h->nmin ? n : h->nmin;
    h->nmax = n > h->nmax ? n : h->nmax;
    h->first[g + 1] += h->first[g];
  }
  for (int32_t r = 0; r < p; r++) {
    int32_t g = c->host != NULL ? c->host[r] : 0;
    if (r == c->rank) {
      h->me_host = g;
      h->me_local = fill[g];
    }
    h->members[h->first[g] + fill[g]++] = r;
  }
  free(fill);
  return 0;
}

static int32_t host_size(const hosts *h, int32_t g) {
  return h->first[g + 1] - h->first[g];
}

/* Whether a host before g has g's size: a host level's call depends on the
 * size alone (the slices and runs are cut from the lanes, which every host
 * shares), so its rounds and price are those of that host. */
static bool host_size_seen(const hosts *h, int32_t g) {
  for (int32_t e = 0; e < g; e++)
    if (host_size(h, e) == host_size(h, g))
      return true;
  return false;
}

/* --- levels --------------------------------------------------------------- */

int crnet__twolevel_level(crnet__call *sub, bool shm, const char **name,
                          double *seconds) {
  static const char *const flat[] = {"circulant", "ring"};
  crnet__call priced;
  double best = 0, t;
  int rc;
  bool found = false;
  sub->shm_links = shm && !sub->tcp_links;
  priced = *sub;
  priced.host = NULL;
  priced.nhosts = 0;
  *name = flat[0]; /* what runs if neither can be priced: the circulant */
  for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++) {
    rc = crnet__auto_price(flat[i], &priced, &t);
    if (rc < 0)
      return rc;
    if (rc == 0 && (!found || t < best)) {
      best = t;
      *name = flat[i];
      found = true;
    }
  }
  if (seconds != NULL)
    *seconds = best;
  return 0;
}

/* The rounds of sub's schedule (the same on every sub-rank: see above). */
static int level_rounds(const char *name, crnet__call sub, uint32_t *rounds) {
  crnet__schedule s;
  int rc;
  sub.rank = 0;
  rc = crnet__build(name, &sub, &s);
  if (rc != 0)
    return rc;
  *rounds = s.nrounds;
  crnet__sched_free(&s);
  return 0;
}

/* Builds sub-rank sub.rank's schedule of the level and embeds it at round
 * `at` with map m. */
static int level_embed(crnet__schedule *out, const char *name,
                       const crnet__call *sub, const crnet__sched_map *m,
                       uint32_t at) {
  crnet__schedule s;
  int rc;
  if (out->nrounds > at) /* a phase overran its length: a bug, said here */
    return CRNET_EINVAL;
  if ((rc = crnet__build(name, sub, &s)) != 0)
    return rc;
  crnet__sched_embed(out, &s, m, at);
  crnet__sched_free(&s);
  return 0;
}

static crnet__sched_map map_of(const int32_t *rank_of, uint8_t send_buf,
                               uint64_t send_off, uint8_t recv_buf,
                               uint64_t recv_off, uint64_t temp_off) {
  crnet__sched_map m;
  m.rank_of = rank_of;
  m.buf[CRNET__BUF_SEND] = send_buf;
  m.off[CRNET__BUF_SEND] = send_off;
  m.buf[CRNET__BUF_RECV] = recv_buf;
  m.off[CRNET__BUF_RECV] = recv_off;
  m.buf[CRNET__BUF_TEMP] = CRNET__BUF_TEMP;
  m.off[CRNET__BUF_TEMP] = temp_off;
  return m;
}

/* A call of the same kind as `call` for a subgroup of p ranks. */
static crnet__call sub_call(const crnet__call *call, crnet_collective coll,
                            int32_t p, int32_t rank) {
  crnet__call s;
  memset(&s, 0, sizeof s);
  s.coll = coll;
  s.p = p;
  s.rank = rank;
  s.commutative = call->commutative;
  s.esize = call->esize;
  s.tuning = call->tuning;
  s.tcp_links = call->tcp_links;
  return s;
}

/* --- allreduce ------------------------------------------------------------ */

typedef struct lanes {
  int32_t L, S;
  uint64_t count;
} lanes;

/* The lanes of a layout: L = n_max, S = ceil(n_max / n_min) slots. */
static lanes lanes_of(const hosts *h, uint64_t count) {
  lanes ln = {h->nmax, (h->nmax + h->nmin - 1) / h->nmin, count};
  return ln;
}

static uint64_t lane_off(const lanes *ln, int32_t j) {
  uint64_t off, n;
  if (j >= ln->L)
    return ln->count;
  crnet__block_range(ln->count, ln->L, j, &off, &n);
  return off;
}

/* The run of local rank i of a host of n ranks: lanes [*j0, *j1). */
static void run_of(const lanes *ln, int32_t n, int32_t i, int32_t *j0,
                   int32_t *j1) {
  *j0 = (int32_t)(((int64_t)i * ln->L + n - 1) / n);
  *j1 = (int32_t)(((int64_t)(i + 1) * ln->L + n - 1) / n);
}

/* counts[0..n): the elements of each local rank's run on a host of n. */
static void run_counts(const lanes *ln, int32_t n, uint64_t *counts) {
  for (int32_t i = 0; i < n; i++) {
    int32_t j0, j1;
    run_of(ln, n, i, &j0, &j1);
    counts[i] = lane_off(ln, j1) - lane_off(ln, j0);
  }
}

/* The three phases' lengths (see the top of the file). */
static int allreduce_lengths(const crnet__call *call, const hosts *h,
                             const lanes *ln, uint64_t *counts,
                             uint32_t len[3]) {
  int rc;
  memset(len, 0, 3 * sizeof *len);
  for (int32_t g = 0; g < h->H; g++) {
    int32_t n = host_size(h, g);
    const char *name;
    uint32_t r;
    if (host_size_seen(h, g))
      continue;
    run_counts(ln, n, counts);
    for (int phase = 0; phase < 3; phase += 2) {
      crnet__call sub = sub_call(call, phase == 0 ? CRNET_COLL_REDUCE_SCATTER
                                                  : CRNET_COLL_ALLGATHER,
                                 n, 0);
      sub.counts = counts;
      sub.in_place = phase == 2;
      if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0 ||
          (rc = level_rounds(name, sub, &r)) != 0)
        return rc;
      len[phase] = r > len[phase] ? r : len[phase];
    }
  }
  /* The local round that moves the run's sum into place (in place), on
   * every rank alike: a rank's in-place or not is its own, and phase 2
   * must start at one round everywhere. */
  len[0]++;
  /* Lanes have two sizes at most: the first's and the last's. */
  for (int32_t j = 0; j < ln->L; j += ln->L > 1 ? ln->L - 1 : 1) {
    crnet__call sub = sub_call(call, CRNET_COLL_ALLREDUCE, h->H, 0);
    const char *name;
    uint32_t r;
    sub.count = lane_off(ln, j + 1) - lane_off(ln, j);
    sub.in_place = true;
    if ((rc = crnet__twolevel_level(&sub, false, &name, NULL)) != 0 ||
        (rc = level_rounds(name, sub, &r)) != 0)
      return rc;
    len[1] = r > len[1] ? r : len[1];
  }
  return 0;
}

static int allreduce_phases(crnet__schedule *out, const crnet__call *call,
                            const hosts *h, const lanes *ln, uint64_t *counts,
                            int32_t *lane_ranks) {
  int32_t n = host_size(h, h->me_host), i = h->me_local, j0, j1;
  const int32_t *mine = h->members + h->first[h->me_host];
  uint64_t at_home; /* where the run starts in RECV */
  uint32_t len[3];
  const char *name;
  crnet__sched_map m;
  crnet__call sub;
  int rc = allreduce_lengths(call, h, ln, counts, len);
  if (rc != 0)
    return rc;
  run_counts(ln, n, counts);
  run_of(ln, n, i, &j0, &j1);
  at_home = lane_off(ln, j0);

  /* 1: reduce-scatter inside the host. */
  sub = sub_call(call, CRNET_COLL_REDUCE_SCATTER, n, i);
  sub.counts = counts;
  if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0)
    return rc;
  if (call->in_place)
    m = map_of(mine, CRNET__BUF_RECV, 0, CRNET__BUF_TEMP, 0, counts[i]);
  else
    m = map_of(mine, CRNET__BUF_SEND, 0, CRNET__BUF_RECV, at_home, 0);
  if ((rc = level_embed(out, name, &sub, &m, 0)) != 0)
    return rc;
  if (call->in_place) {
    crnet__sched_pad(out, len[0] - 1);
    crnet__sched_round(out);
    crnet__sched_copy(out, crnet__seg_make(CRNET__BUF_TEMP, 0, counts[i]),
                      crnet__seg_make(CRNET__BUF_RECV, at_home, counts[i]));
  }

  /* 2: across hosts, lane by lane, slot by slot. */
  for (int32_t slot = 0; slot < ln->S; slot++)
    for (int32_t j = j0; j < j1; j++) {
      uint64_t off = lane_off(ln, j);
      if (j % ln->S != slot)
        continue;
      for (int32_t g = 0; g < h->H; g++)
        lane_ranks[g] = h->members[h->first[g] +
                                   (int32_t)((int64_t)j * host_size(h, g) /
                                             ln->L)];
      sub = sub_call(call, CRNET_COLL_ALLREDUCE, h->H, h->me_host);
      sub.count = lane_off(ln, j + 1) - off;
      sub.in_place = true;
      if ((rc = crnet__twolevel_level(&sub, false, &name, NULL)) != 0)
        return rc;
      m = map_of(lane_ranks, CRNET__BUF_RECV, off, CRNET__BUF_RECV, off, 0);
      rc = level_embed(out, name, &sub, &m, len[0] + (uint32_t)slot * len[1]);
      if (rc != 0)
        return rc;
    }

  /* 3: allgather inside the host. */
  sub = sub_call(call, CRNET_COLL_ALLGATHER, n, i);
  sub.counts = counts;
  sub.in_place = true;
  if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0)
    return rc;
  m = map_of(mine, CRNET__BUF_RECV, 0, CRNET__BUF_RECV, 0, 0);
  return level_embed(out, name, &sub, &m,
                     len[0] + (uint32_t)ln->S * len[1]);
}

int crnet__twolevel_allreduce(crnet__schedule *out, const crnet__call *call) {
  hosts h;
  lanes ln;
  uint64_t *counts;
  int32_t *lane_ranks;
  int rc = hosts_make(call, &h);
  if (rc != 0)
    return rc;
  ln = lanes_of(&h, call->count);
  counts = crnet__malloc((size_t)h.nmax * sizeof *counts);
  lane_ranks = crnet__malloc((size_t)h.H * sizeof *lane_ranks);
  crnet__sched_init(out, call->p, call->rank);
  rc = counts == NULL || lane_ranks == NULL
           ? CRNET_ENOMEM
           : allreduce_phases(out, call, &h, &ln, counts, lane_ranks);
  free(counts);
  free(lane_ranks);
  hosts_free(&h);
  if (rc != 0) {
    crnet__sched_free(out);
    return rc;
  }
  return crnet__sched_finish(out);
}

/* --- bcast and reduce ----------------------------------------------------- */

static int32_t root_host(const crnet__call *c) {
  return c->host != NULL ? c->host[c->root] : 0;
}

/* Host g's leader, as a local rank: the root on the root's host, else the
 * first member. */
static int32_t leader_local(const hosts *h, int32_t g, const crnet__call *c) {
  if (g == root_host(c))
    for (int32_t i = 0; i < host_size(h, g); i++)
      if (h->members[h->first[g] + i] == c->root)
        return i;
  return 0;
}

/* The most rounds the host-local level of a rooted call takes on any host
 * (it is followed by the other level, which must start at one round). */
static int rooted_local_rounds(const crnet__call *call, const hosts *h,
                               uint32_t *rounds) {
  *rounds = 0;
  for (int32_t g = 0; g < h->H; g++) {
    crnet__call sub = sub_call(call, call->coll, host_size(h, g), 0);
    const char *name;
    uint32_t r;
    int rc;
    if (host_size_seen(h, g))
      continue;
    sub.count = call->count;
    if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0 ||
        (rc = level_rounds(name, sub, &r)) != 0)
      return rc;
    *rounds = r > *rounds ? r : *rounds;
  }
  return 0;
}

static int rooted_phases(crnet__schedule *out, const crnet__call *call,
                         const hosts *h, int32_t *leaders) {
  int32_t g = h->me_host, n = host_size(h, g), i = h->me_local;
  const int32_t *mine = h->members + h->first[g];
  bool leader = i == leader_local(h, g, call);
  bool is_root = call->rank == call->root;
  uint64_t m = call->count;
  crnet__call local = sub_call(call, call->coll, n, i);
  crnet__call cross = sub_call(call, call->coll, h->H, g);
  const char *local_name, *cross_name;
  crnet__sched_map map;
  uint32_t first_len;
  int rc;
  for (int32_t e = 0; e < h->H; e++)
    leaders[e] = h->members[h->first[e] + leader_local(h, e, call)];
  local.count = cross.count = m;
  local.root = leader_local(h, g, call);
  cross.root = root_host(call);
  if ((rc = crnet__twolevel_level(&local, true, &local_name, NULL)) != 0 ||
      (rc = crnet__twolevel_level(&cross, false, &cross_name, NULL)) != 0)
    return rc;
  if (call->coll == CRNET_COLL_BCAST) {
    /* Across hosts among the leaders, then inside each host. */
    if ((rc = level_rounds(cross_name, cross, &first_len)) != 0)
      return rc;
    map = map_of(leaders, CRNET__BUF_RECV, 0, CRNET__BUF_RECV, 0, 0);
    if (leader && (rc = level_embed(out, cross_name, &cross, &map, 0)) != 0)
      return rc;
    map = map_of(mine, CRNET__BUF_RECV, 0, CRNET__BUF_RECV, 0, 0);
    return level_embed(out, local_name, &local, &map, first_len);
  }
  /* REDUCE: inside each host to its leader, into TEMP[0, m); then across
   * hosts among the leaders, from there to the root's RECV. */
  if ((rc = rooted_local_rounds(call, h, &first_len)) != 0)
    return rc;
  map = map_of(mine, is_root && call->in_place ? CRNET__BUF_RECV
                                               : CRNET__BUF_SEND,
               0, CRNET__BUF_TEMP, 0, m);
  if ((rc = level_embed(out, local_name, &local, &map, 0)) != 0)
    return rc;
  if (!leader)
    return 0;
  map = map_of(leaders, CRNET__BUF_TEMP, 0,
               is_root ? CRNET__BUF_RECV : CRNET__BUF_TEMP, is_root ? 0 : m,
               2 * m);
  return level_embed(out, cross_name, &cross, &map, first_len);
}

static int twolevel_rooted(crnet__schedule *out, const crnet__call *call) {
  hosts h;
  int32_t *leaders;
  int rc;
  if (call->root < 0 || call->root >= call->p)
    return CRNET_EINVAL;
  if ((rc = hosts_make(call, &h)) != 0)
    return rc;
  leaders = crnet__malloc((size_t)h.H * sizeof *leaders);
  crnet__sched_init(out, call->p, call->rank);
  rc = leaders == NULL ? CRNET_ENOMEM : rooted_phases(out, call, &h, leaders);
  free(leaders);
  hosts_free(&h);
  if (rc != 0) {
    crnet__sched_free(out);
    return rc;
  }
  return crnet__sched_finish(out);
}

int crnet__twolevel_bcast(crnet__schedule *out, const crnet__call *call) {
  return twolevel_rooted(out, call);
}

int crnet__twolevel_reduce(crnet__schedule *out, const crnet__call *call) {
  return twolevel_rooted(out, call);
}

/* --- reduce-scatter and allgather ------------------------------------------
 *
 * The blocks are the ranks' own (counts[r] elements of rank r, in rank
 * order in the vector), so the lanes carry blocks rather than slices:
 * lane j carries, for each host g, the block of the owner of j on g when
 * j is the first lane of that owner's run (its delivery lane), and nothing
 * otherwise; every block is in exactly one lane. In the packed order
 * (lane by lane, host by host within a lane) each rank's run is
 * contiguous, as the flat schedules of a host need, and within a lane the
 * blocks follow the hosts, as those of a lane need.
 *
 * REDUCE-SCATTER: round 0 copies the input into TEMP in packed order; then
 * inside each host a reduce-scatter of the runs (local rank i ends with
 * the host's sum of its run); then, lane by lane in slots, a reduce-
 * scatter among the lane's owners, which leaves each rank its block,
 * summed over the hosts, in RECV. ALLGATHER is the reverse: across hosts
 * lane by lane (each owner adds its own block in its delivery lane), then
 * inside each host an allgather of the runs, then one local round copies
 * the packed blocks to their places in RECV. Across hosts each rank sends
 * and receives about (H-1)/H · m/n, where a flat schedule moves (p-1)/p ·
 * m, most of it across.
 */
typedef struct blockplan {
  lanes ln;          /* L, S; ln.count: m, the whole vector */
  uint64_t *P;       /* p+1: where rank r's block starts in the vector */
  uint64_t *packed;  /* p: where it starts in the packed order */
  uint64_t *lane_at; /* L+1: where lane j starts in the packed order */
  uint64_t *cnt;     /* L*H: what host g's owner adds in lane j, j*H+g */
} blockplan;

static void blockplan_free(blockplan *b) {
  free(b->P);
  free(b->packed);
  free(b->lane_at);
  free(b->cnt);
}

/* Host g's owner of lane j, as a rank, and whether j is its first lane. */
static int32_t lane_owner(const hosts *h, const lanes *ln, int32_t g,
                          int32_t j, bool *delivers) {
  int32_t n = host_size(h, g), i = (int32_t)((int64_t)j * n / ln->L), j0, j1;
  run_of(ln, n, i, &j0, &j1);
  *delivers = j == j0;
  return h->members[h->first[g] + i];
}

static int blockplan_make(const crnet__call *call, const hosts *h,
                          blockplan *b) {
  int32_t p = call->p, H = h->H;
  uint64_t at = 0;
  int rc;
  memset(b, 0, sizeof *b);
  b->ln = lanes_of(h, 0);
  b->P = crnet__block_offsets(call->counts, p, &rc);
  if (b->P == NULL)
    return rc;
  b->ln.count = b->P[p];
  b->packed = crnet__malloc((size_t)p * sizeof *b->packed);
  b->lane_at = crnet__malloc(((size_t)b->ln.L + 1) * sizeof *b->lane_at);
  b->cnt = crnet__malloc((size_t)b->ln.L * (size_t)H * sizeof *b->cnt);
  if (b->packed == NULL || b->lane_at == NULL || b->cnt == NULL) {
    blockplan_free(b);
    return CRNET_ENOMEM;
  }
  for (int32_t j = 0; j < b->ln.L; j++) {
    b->lane_at[j] = at;
    for (int32_t g = 0; g < H; g++) {
      bool delivers;
      int32_t r = lane_owner(h, &b->ln, g, j, &delivers);
      b->cnt[(size_t)j * (size_t)H + (size_t)g] = delivers ? call->counts[r] : 0;
      if (delivers)
        b->packed[r] = at;
      at += delivers ? call->counts[r] : 0;
    }
  }
  b->lane_at[b->ln.L] = at;
  return 0;
}

/* Whether lane j carries what lane j-1 does from every host (equal
 * hosts, equal blocks: every lane alike), so its call is the same. */
static bool lane_like_last(const blockplan *b, const hosts *h, int32_t j) {
  return j > 0 && memcmp(b->cnt + (size_t)j * (size_t)h->H,
                         b->cnt + (size_t)(j - 1) * (size_t)h->H,
                         (size_t)h->H * sizeof *b->cnt) == 0;
}

/* counts[0..n): the elements of each local rank's run on a host of n. */
static void block_runs(const blockplan *b, int32_t n, uint64_t *counts) {
  for (int32_t i = 0; i < n; i++) {
    int32_t j0, j1;
    run_of(&b->ln, n, i, &j0, &j1);
    counts[i] = b->lane_at[j1] - b->lane_at[j0];
  }
}

/* The host phase's length (the most rounds of any host) and the lane
 * phase's (of any lane), for coll_host inside hosts and coll_lane across;
 * host_in_place: how the host phase runs. */
static int block_lengths(const crnet__call *call, const hosts *h,
                         const blockplan *b, crnet_collective coll_host,
                         bool host_in_place, crnet_collective coll_lane,
                         uint64_t *counts, uint32_t *host_len,
                         uint32_t *lane_len) {
  const char *name;
  uint32_t r;
  int rc;
  *host_len = *lane_len = 0;
  for (int32_t g = 0; g < h->H; g++) {
    crnet__call sub = sub_call(call, coll_host, host_size(h, g), 0);
    if (host_size_seen(h, g))
      continue;
    block_runs(b, host_size(h, g), counts);
    sub.counts = counts;
    sub.in_place = host_in_place;
    if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0 ||
        (rc = level_rounds(name, sub, &r)) != 0)
      return rc;
    *host_len = r > *host_len ? r : *host_len;
  }
  for (int32_t j = 0; j < b->ln.L; j++) {
    crnet__call sub = sub_call(call, coll_lane, h->H, 0);
    if (lane_like_last(b, h, j))
      continue;
    sub.counts = b->cnt + (size_t)j * (size_t)h->H;
    if ((rc = crnet__twolevel_level(&sub, false, &name, NULL)) != 0 ||
        (rc = level_rounds(name, sub, &r)) != 0)
      return rc;
    *lane_len = r > *lane_len ? r : *lane_len;
  }
  return 0;
}

/* The lanes of this rank's run, slot by slot from round `at`: coll across
 * hosts, with the map lane_map() gives for each. */
typedef crnet__sched_map (*lane_map_fn)(const blockplan *b, int32_t j,
                                        int32_t j0, const int32_t *ranks,
                                        const void *ctx);

static int block_lanes(crnet__schedule *out, const crnet__call *call,
                       const hosts *h, const blockplan *b,
                       crnet_collective coll, uint32_t at, uint32_t len,
                       int32_t *lane_ranks, lane_map_fn lane_map,
                       const void *ctx) {
  int32_t n = host_size(h, h->me_host), j0, j1;
  run_of(&b->ln, n, h->me_local, &j0, &j1);
  for (int32_t slot = 0; slot < b->ln.S; slot++)
    for (int32_t j = j0; j < j1; j++) {
      crnet__call sub = sub_call(call, coll, h->H, h->me_host);
      crnet__sched_map m;
      const char *name;
      int rc;
      if (j % b->ln.S != slot)
        continue;
      for (int32_t g = 0; g < h->H; g++) {
        bool delivers;
        lane_ranks[g] = lane_owner(h, &b->ln, g, j, &delivers);
      }
      sub.counts = b->cnt + (size_t)j * (size_t)h->H;
      if ((rc = crnet__twolevel_level(&sub, false, &name, NULL)) != 0)
        return rc;
      m = lane_map(b, j, j0, lane_ranks, ctx);
      rc = level_embed(out, name, &sub, &m, at + (uint32_t)slot * len);
      if (rc != 0)
        return rc;
    }
  return 0;
}

/* Reduce-scatter across hosts: the lane's part of the run's sum (TEMP
 * from m on) in, this rank's block (RECV) out. */
static crnet__sched_map rs_lane_map(const blockplan *b, int32_t j, int32_t j0,
                                    const int32_t *ranks, const void *ctx) {
  uint64_t run_max = *(const uint64_t *)ctx, m = b->ln.count;
  return map_of(ranks, CRNET__BUF_TEMP, m + b->lane_at[j] - b->lane_at[j0],
                CRNET__BUF_RECV, 0, m + run_max);
}

/* Allgather across hosts: this rank's block (from SEND, or RECV in place)
 * in, the lane's blocks to their packed places in TEMP. */
struct ag_ctx {
  uint8_t buf;
  uint64_t off;
};

static crnet__sched_map ag_lane_map(const blockplan *b, int32_t j, int32_t j0,
                                    const int32_t *ranks, const void *ctx) {
  const struct ag_ctx *own = ctx;
  (void)j0;
  return map_of(ranks, own->buf, own->off, CRNET__BUF_TEMP, b->lane_at[j],
                b->ln.count);
}

static int blocks_phases(crnet__schedule *out, const crnet__call *call,
                         const hosts *h, const blockplan *b, uint64_t *counts,
                         int32_t *lane_ranks) {
  bool rs = call->coll == CRNET_COLL_REDUCE_SCATTER;
  int32_t n = host_size(h, h->me_host), i = h->me_local, p = call->p;
  const int32_t *mine = h->members + h->first[h->me_host];
  uint64_t m = b->ln.count, run_max = 0;
  uint8_t input = call->in_place ? CRNET__BUF_RECV : CRNET__BUF_SEND;
  uint32_t host_len, lane_len;
  crnet__call sub = sub_call(call, call->coll, n, i);
  crnet__sched_map map;
  const char *name;
  int rc = block_lengths(call, h, b, call->coll, !rs, call->coll, counts,
                         &host_len, &lane_len);
  if (rc != 0)
    return rc;
  for (int32_t g = 0; g < h->H; g++) {
    block_runs(b, host_size(h, g), counts);
    for (int32_t k = 0; k < host_size(h, g); k++)
      run_max = counts[k] > run_max ? counts[k] : run_max;
  }
  block_runs(b, n, counts);
  sub.counts = counts;
  sub.in_place = !rs;
  if ((rc = crnet__twolevel_level(&sub, true, &name, NULL)) != 0)
    return rc;
  if (rs) {
    /* round 0: the input, packed; then the host, then the lanes */
    crnet__sched_round(out);
    for (int32_t r = 0; r < p; r++)
      crnet__sched_copy(
          out, crnet__seg_make(input, b->P[r], call->counts[r]),
          crnet__seg_make(CRNET__BUF_TEMP, b->packed[r], call->counts[r]));
    map = map_of(mine, CRNET__BUF_TEMP, 0, CRNET__BUF_TEMP, m, m + run_max);
    if ((rc = level_embed(out, name, &sub, &map, 1)) != 0)
      return rc;
    return block_lanes(out, call, h, b, CRNET_COLL_REDUCE_SCATTER,
                       1 + host_len, lane_len, lane_ranks, rs_lane_map,
                       &run_max);
  }
  /* allgather: the lanes, then the host, then the blocks to their places */
  {
    struct ag_ctx own = {input, call->in_place ? b->P[call->rank] : 0};
    rc = block_lanes(out, call, h, b, CRNET_COLL_ALLGATHER, 0, lane_len,
                     lane_ranks, ag_lane_map, &own);
  }
  if (rc != 0)
    return rc;
  map = map_of(mine, CRNET__BUF_TEMP, 0, CRNET__BUF_TEMP, 0, m);
  rc = level_embed(out, name, &sub, &map, (uint32_t)b->ln.S * lane_len);
  if (rc != 0)
    return rc;
  crnet__sched_pad(out, (uint32_t)b->ln.S * lane_len + host_len);
  crnet__sched_round(out);
  for (int32_t r = 0; r < p; r++)
    if (!(call->in_place && r == call->rank))
      crnet__sched_copy(
          out, crnet__seg_make(CRNET__BUF_TEMP, b->packed[r], call->counts[r]),
          crnet__seg_make(CRNET__BUF_RECV, b->P[r], call->counts[r]));
  return 0;
}

static int twolevel_blocks(crnet__schedule *out, const crnet__call *call) {
  hosts h;
  blockplan b;
  uint64_t *counts = NULL;
  int32_t *lane_ranks = NULL;
  int rc;
  if (call->counts == NULL)
    return CRNET_EINVAL;
  if ((rc = hosts_make(call, &h)) != 0)
    return rc;
  if ((rc = blockplan_make(call, &h, &b)) != 0) {
    hosts_free(&h);
    return rc;
  }
  counts = crnet__malloc((size_t)h.nmax * sizeof *counts);
  lane_ranks = crnet__malloc((size_t)h.H * sizeof *lane_ranks);
  crnet__sched_init(out, call->p, call->rank);
  rc = counts == NULL || lane_ranks == NULL
           ? CRNET_ENOMEM
           : blocks_phases(out, call, &h, &b, counts, lane_ranks);
  free(counts);
  free(lane_ranks);
  blockplan_free(&b);
  hosts_free(&h);
  if (rc != 0) {
    crnet__sched_free(out);
    return rc;
  }
  return crnet__sched_finish(out);
}

int crnet__twolevel_reduce_scatter(crnet__schedule *out,
                                   const crnet__call *call) {
  return twolevel_blocks(out, call);
}

int crnet__twolevel_allgather(crnet__schedule *out, const crnet__call *call) {
  return twolevel_blocks(out, call);
}

/* --- price ---------------------------------------------------------------- */

static int level_price(const crnet__call *sub, bool shm, double *seconds) {
  const char *name;
  crnet__call priced = *sub;
  return crnet__twolevel_level(&priced, shm, &name, seconds);
}

static int allreduce_price(const crnet__call *call, const hosts *h,
                           double *seconds) {
  lanes ln = lanes_of(h, call->count);
  uint64_t *counts = crnet__malloc((size_t)h->nmax * sizeof *counts);
  double local[2] = {0, 0}, cross = 0, t;
  int rc = 0;
  if (counts == NULL)
    return CRNET_ENOMEM;
  for (int32_t g = 0; g < h->H && rc == 0; g++) {
    int32_t n = host_size(h, g);
    if (host_size_seen(h, g))
      continue;
    run_counts(&ln, n, counts);
    for (int k = 0; k < 2 && rc == 0; k++) {
      crnet__call sub = sub_call(call, k == 0 ? CRNET_COLL_REDUCE_SCATTER
                                              : CRNET_COLL_ALLGATHER,
                                 n, 0);
      sub.counts = counts;
      sub.in_place = k == 1;
      if ((rc = level_price(&sub, true, &t)) == 0 && t > local[k])
        local[k] = t;
    }
  }
  free(counts);
  if (rc == 0) {
    crnet__call sub = sub_call(call, CRNET_COLL_ALLREDUCE, h->H, 0);
    sub.count = lane_off(&ln, 1);
    sub.in_place = true;
    rc = level_price(&sub, false, &cross);
  }
  *seconds = local[0] + (double)ln.S * cross + local[1];
  return rc;
}

static int rooted_price(const crnet__call *call, const hosts *h,
                        double *seconds) {
  crnet__call cross = sub_call(call, call->coll, h->H, 0);
  double local = 0, t;
  int rc;
  cross.count = call->count;
  if ((rc = level_price(&cross, false, seconds)) != 0)
    return rc;
  for (int32_t g = 0; g < h->H; g++) {
    crnet__call sub = sub_call(call, call->coll, host_size(h, g), 0);
    if (host_size_seen(h, g))
      continue;
    sub.count = call->count;
    if ((rc = level_price(&sub, true, &t)) != 0)
      return rc;
    local = t > local ? t : local;
  }
  *seconds += local;
  return 0;
}

static int blocks_price(const crnet__call *call, const hosts *h,
                        double *seconds) {
  bool rs = call->coll == CRNET_COLL_REDUCE_SCATTER;
  double host = 0, lane = 0, t;
  uint64_t *counts;
  blockplan b;
  int rc;
  if (call->counts == NULL)
    return 1;
  if ((rc = blockplan_make(call, h, &b)) != 0)
    return rc == CRNET_ENOMEM ? rc : 1;
  counts = crnet__malloc((size_t)h->nmax * sizeof *counts);
  rc = counts == NULL ? CRNET_ENOMEM : 0;
  for (int32_t g = 0; g < h->H && rc == 0; g++) {
    crnet__call sub = sub_call(call, call->coll, host_size(h, g), 0);
    if (host_size_seen(h, g))
      continue;
    block_runs(&b, host_size(h, g), counts);
    sub.counts = counts;
    sub.in_place = !rs;
    if ((rc = level_price(&sub, true, &t)) == 0 && t > host)
      host = t;
  }
  for (int32_t j = 0; j < b.ln.L && rc == 0; j++) {
    crnet__call sub = sub_call(call, call->coll, h->H, 0);
    if (lane_like_last(&b, h, j))
      continue;
    sub.counts = b.cnt + (size_t)j * (size_t)h->H;
    if ((rc = level_price(&sub, false, &t)) == 0 && t > lane)
      lane = t;
  }
  *seconds = host + (double)b.ln.S * lane;
  free(counts);
  blockplan_free(&b);
  return rc;
}

int crnet__twolevel_price(const crnet__call *call, double *seconds) {
  hosts h;
  int rc;
  if (call->host == NULL || call->nhosts < 2 || call->nhosts >= call->p ||
      !call->commutative)
    return 1;
  if ((rc = hosts_make(call, &h)) != 0)
    return rc == CRNET_ENOMEM ? rc : 1;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    rc = allreduce_price(call, &h, seconds);
    break;
  case CRNET_COLL_BCAST:
  case CRNET_COLL_REDUCE:
    rc = rooted_price(call, &h, seconds);
    break;
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_ALLGATHER:
    rc = blocks_price(call, &h, seconds);
    break;
  default:
    rc = 1;
    break;
  }
  hosts_free(&h);
  return rc;
}

/* --- describe ------------------------------------------------------------- */

static int describe_allreduce(const crnet__call *call, const hosts *h,
                              char *buf, size_t n) {
  lanes ln = lanes_of(h, call->count);
  int32_t size = host_size(h, h->me_host), j0, j1;
  uint64_t *counts = crnet__malloc((size_t)h->nmax * sizeof *counts);
  const char *names[3];
  uint32_t len[3];
  int rc;
  if (counts == NULL)
    return CRNET_ENOMEM;
  rc = allreduce_lengths(call, h, &ln, counts, len);
  run_counts(&ln, size, counts);
  run_of(&ln, size, h->me_local, &j0, &j1);
  for (int k = 0; k < 3 && rc == 0; k++) {
    crnet__call sub =
        sub_call(call,
                 k == 0   ? CRNET_COLL_REDUCE_SCATTER
                 : k == 1 ? CRNET_COLL_ALLREDUCE
                          : CRNET_COLL_ALLGATHER,
                 k == 1 ? h->H : size, 0);
    sub.counts = counts;
    sub.count = lane_off(&ln, j0 + 1) - lane_off(&ln, j0);
    sub.in_place = k > 0;
    rc = crnet__twolevel_level(&sub, k != 1, &names[k], NULL);
  }
  if (rc == 0)
    snprintf(buf, n,
             "host %d of %d (%d rank%s; this rank is its rank %d): rounds "
             "0-%u reduce-scatter inside the host (%s); rounds %u-%u "
             "allreduce across hosts (%s), lanes %d-%d of %d in slots of "
             "%u rounds; rounds %u-%u allgather inside the host (%s)",
             (int)h->me_host, (int)h->H, (int)size, size == 1 ? "" : "s",
             (int)h->me_local, len[0] - 1, names[0], len[0], len[0] + ln.S * len[1] - 1,
             names[1], (int)j0, (int)j1 - 1, (int)ln.L, len[1],
             len[0] + ln.S * len[1],
             len[0] + ln.S * len[1] + len[2] - 1, names[2]);
  free(counts);
  return rc;
}

static int describe_rooted(const crnet__call *call, const hosts *h, char *buf,
                           size_t n) {
  int32_t g = h->me_host, size = host_size(h, g);
  crnet__call local = sub_call(call, call->coll, size, 0);
  crnet__call cross = sub_call(call, call->coll, h->H, 0);
  const char *local_name, *cross_name, *what = crnet_collective_name(call->coll);
  uint32_t first;
  int rc;
  local.count = cross.count = call->count;
  if ((rc = crnet__twolevel_level(&local, true, &local_name, NULL)) != 0 ||
      (rc = crnet__twolevel_level(&cross, false, &cross_name, NULL)) != 0)
    return rc;
  if (call->coll == CRNET_COLL_BCAST)
    rc = level_rounds(cross_name, cross, &first);
  else
    rc = rooted_local_rounds(call, h, &first);
  if (rc != 0)
    return rc;
  snprintf(buf, n,
           "host %d of %d (%d rank%s; this rank is its rank %d, the leader "
           "its rank %d): from round 0 %s %s (%s), from round %u %s %s (%s)",
           (int)g, (int)h->H, (int)size, size == 1 ? "" : "s",
           (int)h->me_local, (int)leader_local(h, g, call), what,
           call->coll == CRNET_COLL_BCAST ? "across hosts among the leaders"
                                          : "inside the host to its leader",
           call->coll == CRNET_COLL_BCAST ? cross_name : local_name, first,
           what,
           call->coll == CRNET_COLL_BCAST ? "inside the host from its leader"
                                          : "across hosts among the leaders",
           call->coll == CRNET_COLL_BCAST ? local_name : cross_name);
  return 0;
}

static int describe_blocks(const crnet__call *call, const hosts *h, char *buf,
                           size_t n) {
  bool rs = call->coll == CRNET_COLL_REDUCE_SCATTER;
  int32_t size = host_size(h, h->me_host), j0, j1;
  const char *what = crnet_collective_name(call->coll), *host_name, *lane_name;
  uint32_t host_len, lane_len, lanes_at;
  uint64_t *counts = crnet__malloc((size_t)h->nmax * sizeof *counts);
  blockplan b;
  int rc = counts == NULL ? CRNET_ENOMEM : blockplan_make(call, h, &b);
  if (rc != 0) {
    free(counts);
    return rc;
  }
  rc = block_lengths(call, h, &b, call->coll, !rs, call->coll, counts,
                     &host_len, &lane_len);
  if (rc == 0) {
    crnet__call host = sub_call(call, call->coll, size, 0);
    crnet__call lane = sub_call(call, call->coll, h->H, 0);
    run_of(&b.ln, size, h->me_local, &j0, &j1);
    block_runs(&b, size, counts);
    host.counts = counts;
    host.in_place = !rs;
    lane.counts = b.cnt + (size_t)j0 * (size_t)h->H;
    if ((rc = crnet__twolevel_level(&host, true, &host_name, NULL)) == 0)
      rc = crnet__twolevel_level(&lane, false, &lane_name, NULL);
  }
  lanes_at = rs ? 1 + host_len : 0;
  if (rc == 0) {
    uint32_t host_at = rs ? 1 : (uint32_t)b.ln.S * lane_len;
    char inside[160], across[200];
    snprintf(inside, sizeof inside, "rounds %u-%u %s inside the host (%s)",
             host_at, host_at + host_len - 1, what, host_name);
    snprintf(across, sizeof across,
             "rounds %u-%u %s across hosts (%s), lanes %d-%d of %d in "
             "slots of %u round%s",
             lanes_at, lanes_at + (uint32_t)b.ln.S * lane_len - 1, what,
             lane_name, (int)j0, (int)j1 - 1, (int)b.ln.L, lane_len,
             lane_len == 1 ? "" : "s");
    snprintf(buf, n, "host %d of %d (%d rank%s; this rank is its rank %d): %s",
             (int)h->me_host, (int)h->H, (int)size, size == 1 ? "" : "s",
             (int)h->me_local, "");
    if (rs)
      snprintf(buf + strlen(buf), n - strlen(buf),
               "round 0 packs the input by lanes; %s; %s", inside, across);
    else
      snprintf(buf + strlen(buf), n - strlen(buf),
               "%s; %s; round %u unpacks the blocks into place", across,
               inside, host_at + host_len);
  }
  free(counts);
  blockplan_free(&b);
  return rc;
}

int crnet__twolevel_describe(const crnet__call *call, char *buf, size_t n) {
  hosts h;
  int rc;
  if (call->coll == CRNET_COLL_REDUCE_SCATTER ||
      call->coll == CRNET_COLL_ALLGATHER) {
    if (call->counts == NULL)
      return CRNET_EINVAL;
    if ((rc = hosts_make(call, &h)) != 0)
      return rc;
    rc = describe_blocks(call, &h, buf, n);
    hosts_free(&h);
    return rc;
  }
  if (call->coll != CRNET_COLL_ALLREDUCE && call->coll != CRNET_COLL_BCAST &&
      call->coll != CRNET_COLL_REDUCE)
    return CRNET_EINVAL;
  if (call->coll != CRNET_COLL_ALLREDUCE &&
      (call->root < 0 || call->root >= call->p))
    return CRNET_EINVAL;
  if ((rc = hosts_make(call, &h)) != 0)
    return rc;
  rc = call->coll == CRNET_COLL_ALLREDUCE ? describe_allreduce(call, &h, buf, n)
                                           : describe_rooted(call, &h, buf, n);
  hosts_free(&h);
  return rc;
}

/* --- the registry's row (algorithm.h) ------------------------------------ */

static int twolevel_build(const crnet__call *call, crnet__schedule *out) {
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    return crnet__twolevel_allreduce(out, call);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet__twolevel_reduce_scatter(out, call);
  case CRNET_COLL_ALLGATHER:
    return crnet__twolevel_allgather(out, call);
  case CRNET_COLL_BCAST:
    return crnet__twolevel_bcast(out, call);
  case CRNET_COLL_REDUCE:
    return crnet__twolevel_reduce(out, call);
  default:
    return CRNET_EINVAL;
  }
}

const crnet__algorithm crnet__twolevel_algorithm = {
    .name = "two-level",
    .id = 14,
    .colls = CRNET__COLL_BIT(CRNET_COLL_ALLREDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_BCAST) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE) |
             CRNET__COLL_BIT(CRNET_COLL_REDUCE_SCATTER) |
             CRNET__COLL_BIT(CRNET_COLL_ALLGATHER),
    .in_auto = true,
    .build = twolevel_build,
    .price = crnet__twolevel_price,
    .summary = "flat schedules inside each host and across hosts, each "
               "level priced on its own links"};
