/* Simulator tests for the rooted collectives (src/schedules/rooted.c:
 * binomial and linear gather and scatter) and the alltoallv builders
 * (src/schedules/alltoall.c: pairwise and ring): every builder x p in
 * 1..64, 100, 127, 128 x (gather, scatter) roots 0, p/2, p-1 x block shapes
 * (3 per rank, (r·7) mod 5 with zeros, all zero, one rank's alone) x in
 * place or not, run in the in-memory simulator and checked element by
 * element, with the rounds, volumes and TEMP of rooted.c's comment block
 * asserted.
 *
 * Elements encode (source rank, destination rank, index), so a block in the
 * wrong place or from the wrong rank is named. Memory a rank must not write
 * (a non-root's RECV in a gather, the root's in an in-place scatter, slack
 * past every output, the gaps between alltoallv blocks) holds a sentinel
 * that is checked afterwards. The simulator's in place is global (SEND is
 * RECV on every rank) while ours is the root's alone, so in place the
 * non-roots' inputs sit in RECV, and the schedules are also scanned: a
 * gather's non-roots and an in-place scatter root never write RECV, an
 * in-place gather root and a scatter's non-roots never read SEND.
 *
 * SIM_ROOTED_MAX_P=n stops the p range at n (for valgrind).
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "check_main.h"
#include "crnet.h"
#include "rooted.h"
#include "schedule.h"
#include "sim.h"
#include "sim_ops.h"

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)
#define GAP UINT64_C(0x6a6a6a6a6a6a6a6a)
#define SLACK 3

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

static long cases;

/* Element e of the block from src to dst. */
static uint64_t enc(int32_t src, int32_t dst, uint64_t e) {
  return UINT64_C(1) << 63 | (uint64_t)src << 40 | (uint64_t)dst << 20 | e;
}

#define DEC(v)                                                                 \
  (int)((v) >> 40 & 0x7fffff), (int)((v) >> 20 & 0xfffff),                     \
      (unsigned long long)((v) % 0x100000)

static const int32_t ps[] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,  15,  16, 17,
    18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,  32,  33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,  49,  50, 51,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 100, 127, 128};
#define NPS (sizeof(ps) / sizeof(ps[0]))

static int32_t max_p = INT32_MAX;

/* --- scans of a schedule ------------------------------------------------ */

static bool writes_recv(const crnet__schedule *s) {
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    for (uint32_t i = 0; i < ro->recv.nsegs; i++)
      if (s->segs[ro->recv.first_seg + i].buf == CRNET__BUF_RECV)
        return true;
    for (uint32_t i = 0; i < ro->nsteps; i++)
      if (s->steps[ro->first_step + i].dst.buf == CRNET__BUF_RECV)
        return true;
  }
  return false;
}

static bool reads_send(const crnet__schedule *s) {
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    for (uint32_t i = 0; i < ro->send.nsegs; i++)
      if (s->segs[ro->send.first_seg + i].buf == CRNET__BUF_SEND)
        return true;
    for (uint32_t i = 0; i < ro->nsteps; i++)
      if (s->steps[ro->first_step + i].src.buf == CRNET__BUF_SEND)
        return true;
  }
  return false;
}

static bool marked_after_first(const crnet__schedule *s) {
  for (uint32_t k = 1; k < s->nrounds; k++)
    if (!s->rounds[k].independent)
      return false;
  return true;
}

static bool any_marked(const crnet__schedule *s) {
  for (uint32_t k = 0; k < s->nrounds; k++)
    if (s->rounds[k].independent)
      return true;
  return false;
}

/* --- gather and scatter ------------------------------------------------- */

enum coll { GB, GL, SB, SL };
static const char *coll_name[] = {"gather-binomial", "gather-linear",
                                  "scatter-binomial", "scatter-linear"};

static bool is_gather(enum coll c) { return c == GB || c == GL; }
static bool is_binomial(enum coll c) { return c == GB || c == SB; }

static int build(enum coll c, crnet__schedule *s, int32_t p, int32_t r,
                 int32_t root, const uint64_t *counts, bool ip) {
  switch (c) {
  case GB:
    return crnet__binomial_gather(s, p, r, root, counts, ip);
  case GL:
    return crnet__linear_gather(s, p, r, root, counts, ip);
  case SB:
    return crnet__binomial_scatter(s, p, r, root, counts, ip);
  case SL:
    return crnet__linear_scatter(s, p, r, root, counts, ip);
  }
  return CRNET_EINVAL;
}

#define NSHAPES 4
static uint64_t shape_count(int shape, int32_t p, int32_t r) {
  switch (shape) {
  case 0:
    return 3;
  case 1:
    return (uint64_t)r * 7 % 5;
  case 2:
    return 0;
  default:
    return r == p / 3 ? 11 : 0;
  }
}

/* Elements of the relative ranks [a, b) (relative to root). */
static uint64_t rel_span(const uint64_t *counts, int32_t p, int32_t root,
                         int64_t a, int64_t b) {
  uint64_t n = 0;
  for (int64_t u = a; u < b; u++)
    n += counts[(root + u) % p];
  return n;
}

static int lowbit(int64_t v) {
  int b = 0;
  while (!(v >> b & 1))
    b++;
  return b;
}

static void check_rooted_stats(enum coll c, const char *what, int32_t p,
                               int32_t root, const uint64_t *counts, uint64_t m,
                               bool ip, const crnet__schedule *sc,
                               const crnet__sim_rank *rk) {
  int L = crnet__ceil_log2(p);
  bool g = is_gather(c);
  for (int32_t r = 0; r < p; r++) {
    const crnet__sim_stats *s = &rk[r].stats;
    const crnet__schedule *h = &sc[r];
    int64_t v = ((int64_t)r - root + p) % p;
    uint64_t msgs_in = g ? s->msgs_recv : s->msgs_sent;
    uint64_t elems_in = g ? s->elems_recv : s->elems_sent;
    uint64_t msgs_out = g ? s->msgs_sent : s->msgs_recv;
    uint64_t elems_out = g ? s->elems_sent : s->elems_recv;
#define ST(x) (unsigned long long)(x)
#define STATS                                                                  \
  "%s: rank %d (v %lld) rounds %llu/%u sent %llu/%llu recv %llu/%llu "         \
  "copied %llu temp %llu",                                                     \
      what, r, (long long)v, ST(s->comm_rounds), h->nrounds, ST(s->msgs_sent), \
      ST(s->elems_sent), ST(s->msgs_recv), ST(s->elems_recv),                  \
      ST(s->elems_copied), ST(h->temp_count)
    /* "in" is towards the root's side of the collective: what the root
     * gathers or scatters; "out" what a non-root contributes. */
    EXPECT(s->elems_copied == (v == 0 && !ip ? counts[r] : 0), STATS);
    if (v == 0) {
      EXPECT(msgs_out == 0 && h->temp_count == 0, STATS);
      EXPECT(elems_in == m - counts[r], STATS);
      EXPECT(h->nrounds == (p > 1 ? (uint32_t)(is_binomial(c) ? L : p - 1)
                            : ip  ? 0
                                  : 1),
             STATS);
      EXPECT(msgs_in == (is_binomial(c) ? (uint64_t)L : (uint64_t)p - 1),
             STATS);
      EXPECT(s->comm_rounds == msgs_in, STATS);
      EXPECT(marked_after_first(h), STATS);
      continue;
    }
    EXPECT(msgs_out == 1, STATS);
    if (is_binomial(c)) {
      int b = lowbit(v);
      int64_t end = v + (INT64_C(1) << b) < p ? v + (INT64_C(1) << b) : p;
      uint64_t sub = rel_span(counts, p, root, v, end);
      EXPECT(s->comm_rounds <= (uint64_t)L && h->nrounds <= (uint32_t)L, STATS);
      EXPECT(elems_out == sub && elems_in == sub - counts[r] &&
                 h->temp_count == sub - counts[r],
             STATS);
      /* No trailing empty rounds: a gather rank stops after its send, a
       * scatter rank after its last child's round (that of v+1, or its
       * receive if it has no child). */
      if (g)
        EXPECT(h->nrounds == (uint32_t)b + 1, STATS);
      else
        EXPECT(h->nrounds == (uint32_t)(b > 0 && v + 1 < p ? L : L - b), STATS);
    } else {
      EXPECT(s->comm_rounds == 1 && h->nrounds == (uint32_t)v &&
                 elems_out == counts[r] && msgs_in == 0 && h->temp_count == 0,
             STATS);
    }
  }
}

static void run_rooted(enum coll c, int32_t p, int32_t root, int shape,
                       bool ip) {
  char what[160];
  snprintf(what, sizeof what, "%s p=%d root=%d shape=%d in_place=%d",
           coll_name[c], p, root, shape, ip);
  uint64_t *counts = malloc((size_t)p * sizeof *counts);
  uint64_t *P = malloc(((size_t)p + 1) * sizeof *P);
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  EXPECT(counts && P && sc && rk, "out of memory");
  P[0] = 0;
  for (int32_t b = 0; b < p; b++) {
    counts[b] = shape_count(shape, p, b);
    P[b + 1] = P[b] + counts[b];
  }
  uint64_t m = P[p];
  bool g = is_gather(c);

  for (int32_t r = 0; r < p; r++) {
    int rc = build(c, &sc[r], p, r, root, counts, ip);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
    bool is_root = r == root;
    if (g && !is_root)
      EXPECT(!writes_recv(&sc[r]), "%s: non-root %d writes RECV", what, r);
    if (!g && !is_root)
      EXPECT(!reads_send(&sc[r]), "%s: non-root %d reads SEND", what, r);
    if (ip && is_root)
      EXPECT(g ? !reads_send(&sc[r]) : !writes_recv(&sc[r]),
             "%s: in-place root %s", what, g ? "reads SEND" : "writes RECV");
  }

  /* Buffers. out[r]: where rank r's output (or its untouched RECV) is. */
  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    bool is_root = r == root;
    uint64_t sn = 0, rn, ioff = 0, in = 0;
    if (g) {
      sn = counts[r];
      rn = (is_root || !ip ? m : counts[r]) + SLACK;
    } else {
      sn = is_root ? m : 0;
      rn = (is_root && ip ? m : counts[r]) + SLACK;
    }
    uint64_t *snd = malloc((sn ? sn : 1) * sizeof *snd);
    uint64_t *rcv = malloc(rn * sizeof *rcv);
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < rn; e++)
      rcv[e] = SENTINEL;
    for (int32_t b = 0; b < p; b++)
      for (uint64_t e = 0; e < counts[b]; e++) {
        if (g && b == r)
          snd[e] = enc(r, root, e);
        if (!g && is_root)
          snd[P[b] + e] = enc(root, b, e);
      }
    if (ip && g) {
      ioff = is_root ? P[r] : 0;
      in = counts[r];
      memcpy(rcv + ioff, snd, in * sizeof *rcv);
    }
    if (ip && !g && is_root) {
      in = m;
      memcpy(rcv, snd, m * sizeof *rcv);
    }
    q->sched = &sc[r];
    q->send = snd;
    q->send_count = sn;
    q->recv = rcv;
    q->recv_count = rn;
    q->init_off = ioff;
    q->init_count = in;
  }

  char err[512] = "";
  int rc = crnet__sim_run(rk, p, ip, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);

  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    uint64_t rn = rk[r].recv_count, from = 0;
    bool is_root = r == root;
    if (g && is_root) {
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < counts[b]; e++) {
          uint64_t x = o[P[b] + e];
          EXPECT(x == enc(b, root, e),
                 "%s: root block %d element %llu holds src %d dst %d "
                 "index %llu",
                 what, b, (unsigned long long)e, DEC(x));
        }
      from = m;
    } else if (g && ip) {
      for (uint64_t e = 0; e < counts[r]; e++)
        EXPECT(o[e] == enc(r, root, e), "%s: rank %d input changed", what, r);
      from = counts[r];
    } else if (!g && is_root && ip) {
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < counts[b]; e++)
          EXPECT(o[P[b] + e] == enc(root, b, e),
                 "%s: the root's input changed, block %d", what, b);
      from = m;
    } else if (!g) {
      for (uint64_t e = 0; e < counts[r]; e++) {
        uint64_t x = o[e];
        EXPECT(x == enc(root, r, e),
               "%s: rank %d element %llu holds src %d dst %d index %llu", what,
               r, (unsigned long long)e, DEC(x));
      }
      from = counts[r];
    }
    for (uint64_t e = from; e < rn; e++)
      EXPECT(o[e] == SENTINEL, "%s: rank %d wrote RECV[%llu]", what, r,
             (unsigned long long)e);
  }

  check_rooted_stats(c, what, p, root, counts, m, ip, sc, rk);

  for (int32_t r = 0; r < p; r++) {
    free((void *)rk[r].send);
    free(rk[r].recv);
    crnet__sched_free(&sc[r]);
  }
  free(rk);
  free(sc);
  free(P);
  free(counts);
  cases++;
}

static void matrix_rooted(enum coll c) {
  for (size_t pi = 0; pi < NPS && ps[pi] <= max_p; pi++) {
    int32_t p = ps[pi];
    int32_t roots[] = {0, p / 2, p - 1};
    for (int ri = 0; ri < 3; ri++) {
      if ((ri > 0 && roots[ri] == roots[ri - 1]) ||
          (ri == 2 && roots[2] == roots[0]))
        continue;
      for (int shape = 0; shape < NSHAPES; shape++)
        for (int ip = 0; ip < 2; ip++)
          run_rooted(c, p, roots[ri], shape, ip == 1);
    }
  }
}

/* --- alltoallv ---------------------------------------------------------- */

/* Elements from rank src to rank dst: random-ish with zeros, uniform, all
 * zero, or large only to and from one rank. */
static uint64_t pair_count(int shape, int32_t p, int32_t src, int32_t dst) {
  switch (shape) {
  case 0:
    return mix((uint64_t)src << 32 | (uint64_t)dst) % 5;
  case 1:
    return 3;
  case 2:
    return 0;
  default:
    return src == p / 2 || dst == p / 2 ? 9 : 0;
  }
}

typedef struct vargs {
  uint64_t *sc, *sd, *rc, *rd;
  uint64_t slen, rlen;
} vargs;

/* Rank r's arrays: send blocks in rank order, one-element gaps between
 * them (sdispls[j] = prefix + j); receive blocks in reverse rank order,
 * two-element gaps between them. */
static void make_vargs(vargs *a, int shape, int32_t p, int32_t r) {
  a->sc = malloc((size_t)p * sizeof *a->sc);
  a->sd = malloc((size_t)p * sizeof *a->sd);
  a->rc = malloc((size_t)p * sizeof *a->rc);
  a->rd = malloc((size_t)p * sizeof *a->rd);
  EXPECT(a->sc && a->sd && a->rc && a->rd, "out of memory");
  uint64_t at = 0;
  for (int32_t j = 0; j < p; j++) {
    a->sc[j] = pair_count(shape, p, r, j);
    a->sd[j] = at + (uint64_t)j;
    at += a->sc[j];
  }
  a->slen = at + (uint64_t)p;
  at = 0;
  for (int32_t j = p - 1; j >= 0; j--) {
    a->rc[j] = pair_count(shape, p, j, r);
    a->rd[j] = at + 2 * (uint64_t)(p - 1 - j);
    at += a->rc[j];
  }
  a->rlen = at + 2 * (uint64_t)p + SLACK;
}

static void free_vargs(vargs *a) {
  free(a->sc);
  free(a->sd);
  free(a->rc);
  free(a->rd);
}

static void run_alltoallv(bool pairwise, int32_t p, int shape) {
  char what[160];
  snprintf(what, sizeof what, "alltoallv-%s p=%d shape=%d",
           pairwise ? "pairwise" : "ring", p, shape);
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  vargs *va = calloc((size_t)p, sizeof *va);
  EXPECT(sc && rk && va, "out of memory");
  for (int32_t r = 0; r < p; r++) {
    vargs *a = &va[r];
    make_vargs(a, shape, p, r);
    int rc = pairwise ? crnet__pairwise_alltoallv(&sc[r], p, r, a->sc, a->sd,
                                                  a->rc, a->rd)
                      : crnet__ring_alltoallv(&sc[r], p, r, a->sc, a->sd, a->rc,
                                              a->rd);
    EXPECT(rc == 0, "%s: build rank %d: %d", what, r, rc);
    uint64_t *snd = malloc(a->slen * sizeof *snd);
    uint64_t *rcv = malloc(a->rlen * sizeof *rcv);
    EXPECT(snd && rcv, "out of memory");
    for (uint64_t e = 0; e < a->slen; e++)
      snd[e] = GAP;
    for (int32_t j = 0; j < p; j++)
      for (uint64_t e = 0; e < a->sc[j]; e++)
        snd[a->sd[j] + e] = enc(r, j, e);
    for (uint64_t e = 0; e < a->rlen; e++)
      rcv[e] = SENTINEL;
    rk[r].sched = &sc[r];
    rk[r].send = snd;
    rk[r].send_count = a->slen;
    rk[r].recv = rcv;
    rk[r].recv_count = a->rlen;
  }

  char err[512] = "";
  int rc = crnet__sim_run(rk, p, false, false, op_sum, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", what, err);

  for (int32_t r = 0; r < p; r++) {
    const vargs *a = &va[r];
    const uint64_t *o = rk[r].recv;
    uint8_t *mine = calloc(a->rlen, 1);
    EXPECT(mine, "out of memory");
    uint64_t sent = 0, recvd = 0;
    for (int32_t j = 0; j < p; j++) {
      for (uint64_t e = 0; e < a->rc[j]; e++) {
        uint64_t x = o[a->rd[j] + e];
        EXPECT(x == enc(j, r, e),
               "%s: rank %d block from %d element %llu holds src %d dst %d "
               "index %llu",
               what, r, j, (unsigned long long)e, DEC(x));
        mine[a->rd[j] + e] = 1;
      }
      if (j != r) {
        sent += a->sc[j];
        recvd += a->rc[j];
      }
    }
    for (uint64_t e = 0; e < a->rlen; e++)
      EXPECT(mine[e] || o[e] == SENTINEL, "%s: rank %d wrote gap RECV[%llu]",
             what, r, (unsigned long long)e);
    free(mine);

    const crnet__sim_stats *s = &rk[r].stats;
    const crnet__schedule *h = &sc[r];
    uint64_t pm1 = (uint64_t)p - 1;
    EXPECT(s->comm_rounds == pm1 && s->msgs_sent == pm1 &&
               s->msgs_recv == pm1 && h->nrounds == (p > 1 ? pm1 : 1) &&
               s->elems_sent == sent && s->elems_recv == recvd &&
               s->elems_copied == a->sc[r] && h->temp_count == 0,
           "%s: rank %d rounds %llu/%u msgs %llu/%llu elems %llu/%llu "
           "copied %llu",
           what, r, ST(s->comm_rounds), h->nrounds, ST(s->msgs_sent),
           ST(s->msgs_recv), ST(s->elems_sent), ST(s->elems_recv),
           ST(s->elems_copied));
    EXPECT(pairwise ? marked_after_first(h) : !any_marked(h),
           "%s: rank %d: independent rounds wrong", what, r);
  }

  for (int32_t r = 0; r < p; r++) {
    free((void *)rk[r].send);
    free(rk[r].recv);
    crnet__sched_free(&sc[r]);
    free_vargs(&va[r]);
  }
  free(va);
  free(rk);
  free(sc);
  cases++;
}

static void matrix_alltoallv(bool pairwise) {
  for (size_t pi = 0; pi < NPS && ps[pi] <= max_p; pi++)
    for (int shape = 0; shape < 4; shape++)
      run_alltoallv(pairwise, ps[pi], shape);
}

START_TEST(test_gather_binomial) { matrix_rooted(GB); }
END_TEST
START_TEST(test_gather_linear) { matrix_rooted(GL); }
END_TEST
START_TEST(test_scatter_binomial) { matrix_rooted(SB); }
END_TEST
START_TEST(test_scatter_linear) { matrix_rooted(SL); }
END_TEST
START_TEST(test_alltoallv_pairwise) { matrix_alltoallv(true); }
END_TEST
START_TEST(test_alltoallv_ring) { matrix_alltoallv(false); }
END_TEST

/* Misuse: CRNET_EINVAL, and nothing to free. */
START_TEST(test_einval) {
  crnet__schedule s;
  uint64_t counts[3] = {1, 2, 3}, big[3] = {UINT64_MAX, 1, 0};
  uint64_t z[3] = {0, 0, 0}, d[3] = {0, 1, UINT64_MAX};
  for (int c = GB; c <= SL; c++) {
    ck_assert_int_eq(build((enum coll)c, &s, 0, 0, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 3, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, -1, 0, counts, true),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, 3, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, -1, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 0, 0, NULL, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 1, 0, big, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, NULL, 3, 1, 0, counts, false),
                     CRNET_EINVAL);
    ck_assert_int_eq(build((enum coll)c, &s, 3, 2, 1, counts, false), 0);
    crnet__sched_free(&s);
  }
  int (*v[2])(crnet__schedule *, int32_t, int32_t, const uint64_t *,
              const uint64_t *, const uint64_t *, const uint64_t *) = {
      crnet__pairwise_alltoallv, crnet__ring_alltoallv};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(v[i](&s, 0, 0, z, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 3, z, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, NULL, z, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, NULL, z, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, z, NULL, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, z, z, z, NULL), CRNET_EINVAL);
    /* the own block: scounts[rank] must equal rcounts[rank] */
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, z, z), CRNET_EINVAL);
    /* a displacement + count beyond 2^64 */
    ck_assert_int_eq(v[i](&s, 3, 0, counts, d, counts, z), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, counts, d), CRNET_EINVAL);
    ck_assert_int_eq(v[i](&s, 3, 0, counts, z, counts, z), 0);
    crnet__sched_free(&s);
  }
}
END_TEST

/* The harness can fail: a gather where one rank believes in another root
 * is refused by the simulator. */
START_TEST(test_disagreeing_root_fails) {
  enum { N = 5 };
  uint64_t counts[N] = {2, 0, 1, 3, 1}, send[N][3] = {{0}}, recv[N][8];
  crnet__schedule sc[N];
  crnet__sim_rank rk[N];
  char err[256] = "";
  memset(rk, 0, sizeof rk);
  for (int32_t r = 0; r < N; r++) {
    ck_assert_int_eq(
        crnet__binomial_gather(&sc[r], N, r, r == 3 ? 1 : 2, counts, false), 0);
    rk[r].sched = &sc[r];
    rk[r].send = send[r];
    rk[r].send_count = counts[r];
    rk[r].recv = recv[r];
    rk[r].recv_count = 8;
  }
  int rc = crnet__sim_run(rk, N, false, false, op_sum, err, sizeof err);
  for (int32_t r = 0; r < N; r++)
    crnet__sched_free(&sc[r]);
  ck_assert_msg(rc == CRNET_EIO, "%d: %s", rc, err);
}
END_TEST

int main(void) {
  const char *mp = getenv("SIM_ROOTED_MAX_P");
  if (mp != NULL && atoi(mp) > 0)
    max_p = atoi(mp);
  Suite *s = suite_create("sim-rooted");
  TCase *tc = tcase_create("rooted");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_gather_binomial);
  tcase_add_test(tc, test_gather_linear);
  tcase_add_test(tc, test_scatter_binomial);
  tcase_add_test(tc, test_scatter_linear);
  tcase_add_test(tc, test_alltoallv_pairwise);
  tcase_add_test(tc, test_alltoallv_ring);
  tcase_add_test(tc, test_einval);
  tcase_add_test(tc, test_disagreeing_root_fails);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  printf("%ld cases\n", cases);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
