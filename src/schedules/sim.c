/* The schedule simulator.
 *
 * Purpose: prove schedules before they touch a socket. All p schedules of one
 * collective run in lock step, round k of every rank together:
 *
 *   1. matching: every send of round k must meet a receive of round k at its
 *      peer, naming the sender, with the same total element count (and vice
 *      versa); a rank's receive must not overlap its own send of the round;
 *   2. every send's segments are gathered (in bounds, every element written;
 *      SEND is always written) into an in-flight message, for all ranks,
 *      before any receive writes: a round's transfers are simultaneous;
 *   3. messages are scattered into the receivers' segments (in bounds, never
 *      SEND), marking the elements written;
 *   4. each rank's steps run in order: REDUCE needs src and dst written
 *      (reducing into an unwritten element is an error: the schedule would
 *      combine garbage), COPY needs src written; dst never SEND, src and dst
 *      never overlapping.
 *
 * Every element of RECV and TEMP has a written bit. The workload is tests
 * (thousands of runs of small to medium p), so the structures are plain
 * arrays and the checks are exhaustive rather than clever.
 */
#include "sim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "crnet.h"

typedef struct rstate {
  uint64_t *buf[CRNET__BUF_COUNT];
  uint8_t *wr[CRNET__BUF_COUNT]; /* written bits (bytes); NULL for SEND */
  uint64_t len[CRNET__BUF_COUNT];
  uint64_t *temp;
  uint8_t *temp_wr, *recv_wr;
  uint64_t *msg; /* in-flight message of this round's send */
  uint64_t msg_len;
  uint64_t *known; /* causal: bitset of ranks heard from */
} rstate;

static const char *buf_name[] = {"SEND", "RECV", "TEMP"};

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err != NULL && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return CRNET_EIO;
}

static bool in_bounds(const rstate *st, const crnet__seg *g) {
  return g->buf < CRNET__BUF_COUNT && g->off <= st->len[g->buf] &&
         g->count <= st->len[g->buf] - g->off;
}

/* The buffer a segment really names (SEND is RECV in place). */
static int real_buf(int b, bool in_place) {
  return b == CRNET__BUF_SEND && in_place ? CRNET__BUF_RECV : b;
}

static bool overlap(const crnet__seg *a, const crnet__seg *b, bool in_place) {
  if (real_buf(a->buf, in_place) != real_buf(b->buf, in_place))
    return false;
  return a->off < b->off + b->count && b->off < a->off + a->count;
}

/* An interval of a round's send or receive, for the overlap sweep. */
typedef struct span {
  uint8_t buf; /* real_buf */
  bool recv;
  uint64_t off, end;
  const crnet__seg *seg;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->buf != y->buf)
    return x->buf < y->buf ? -1 : 1;
  if (x->off != y->off)
    return x->off < y->off ? -1 : 1;
  return 0;
}

/* The first receive segment of the round that overlaps one of its send
 * segments, or NULL (*oom set when scratch memory ran out). Small rounds
 * compare every pair; large ones (all-to-all messages of ~p/2 segments)
 * sort the segments and sweep: an interval overlaps an earlier-starting one
 * of the other kind iff it starts before the largest end seen of that
 * kind. */
static const crnet__seg *round_overlap(const crnet__schedule *sc,
                                       const crnet__round *ro, bool in_place,
                                       bool *oom) {
  const crnet__seg *rs = &sc->segs[ro->recv.first_seg];
  const crnet__seg *ss = &sc->segs[ro->send.first_seg];
  uint32_t nr = ro->recv.nsegs, ns = ro->send.nsegs;
  const crnet__seg *bad = NULL;
  *oom = false;
  if ((uint64_t)nr * ns <= 256) {
    for (uint32_t i = 0; i < nr; i++)
      for (uint32_t j = 0; j < ns; j++)
        if (overlap(&rs[i], &ss[j], in_place))
          return &rs[i];
    return NULL;
  }
  span *v = crnet__malloc(sizeof *v * ((size_t)nr + ns));
  if (v == NULL) {
    *oom = true;
    return NULL;
  }
  for (uint32_t i = 0; i < nr + ns; i++) {
    const crnet__seg *g = i < nr ? &rs[i] : &ss[i - nr];
    v[i] = (span){real_buf(g->buf, in_place), i < nr, g->off,
                  g->off + g->count, g};
  }
  qsort(v, (size_t)nr + ns, sizeof *v, span_cmp);
  uint64_t end_recv = 0, end_send = 0;
  const crnet__seg *last_recv = NULL;
  for (uint32_t i = 0; i < nr + ns && bad == NULL; i++) {
    if (i == 0 || v[i].buf != v[i - 1].buf) {
      end_recv = end_send = 0;
      last_recv = NULL;
    }
    if (v[i].off == v[i].end)
      continue; /* empty: overlaps nothing */
    if (v[i].recv) {
      if (v[i].off < end_send)
        bad = v[i].seg;
      if (v[i].end > end_recv) {
        end_recv = v[i].end;
        last_recv = v[i].seg;
      }
    } else {
      if (v[i].off < end_recv)
        bad = last_recv;
      if (v[i].end > end_send)
        end_send = v[i].end;
    }
  }
  free(v);
  return bad;
}

/* First unwritten element of g, or UINT64_MAX. */
static uint64_t unwritten(const rstate *st, const crnet__seg *g) {
  const uint8_t *w = st->wr[g->buf];
  if (w == NULL)
    return UINT64_MAX;
  for (uint64_t i = 0; i < g->count; i++)
    if (!w[g->off + i])
      return g->off + i;
  return UINT64_MAX;
}

static void mark(rstate *st, const crnet__seg *g) {
  memset(st->wr[g->buf] + g->off, 1, g->count);
}

#define SEGF "%s[%" PRIu64 "..+%" PRIu64 ")"
#define SEGA(g) buf_name[(g).buf], (g).off, (g).count

static void free_states(rstate *st, int32_t p) {
  if (st == NULL)
    return;
  for (int32_t r = 0; r < p; r++) {
    free(st[r].temp);
    free(st[r].temp_wr);
    free(st[r].recv_wr);
    free(st[r].msg);
    free(st[r].known);
  }
  free(st);
}

/* --- independent rounds (schedule.h) ------------------------------------
 *
 * The rounds of a group (an unmarked round and the marked ones after it)
 * may run at the same time, so for rounds a < b of one group: b must not
 * receive from a's peer, b's receive must not touch anything a sends,
 * receives or a step of a reads or writes, and b's send must not read what
 * a receives or a step of a writes (b's steps run after a has finished).
 * Checked by a sweep over the group's regions sorted by start, so that a
 * group of p - 1 rounds costs O(p log p), not O(p^2). */

enum { USE_SEND, USE_RECV, USE_SRC, USE_DST };

typedef struct use {
  uint8_t buf; /* real_buf */
  uint8_t kind;
  uint32_t round;
  uint64_t off, end;
} use;

static int use_cmp(const void *a, const void *b) {
  const use *x = a, *y = b;
  if (x->buf != y->buf)
    return x->buf < y->buf ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Does the later use conflict with the earlier one (other rounds)? */
static bool conflicts(const use *earlier, const use *later) {
  if (later->kind == USE_RECV)
    return true;
  return later->kind == USE_SEND &&
         (earlier->kind == USE_RECV || earlier->kind == USE_DST);
}

static void add_use(use *v, size_t *n, const crnet__seg *g, uint8_t kind,
                    uint32_t round, bool in_place) {
  if (g->count == 0)
    return;
  v[(*n)++] = (use){(uint8_t)real_buf(g->buf, in_place), kind, round, g->off,
                    g->off + g->count};
}

/* Checks rounds [first, last) of sc, one group. */
static int check_group(const crnet__schedule *sc, int32_t r, bool in_place,
                       uint32_t first, uint32_t last, int32_t *recv_round,
                       char *err, size_t errlen) {
  size_t n = 0, cap = 0, nact = 0;
  use *v, **act;
  int rc = 0;
  for (uint32_t k = first; k < last; k++) {
    const crnet__round *ro = &sc->rounds[k];
    int32_t peer = ro->recv.peer;
    if (peer >= 0 && peer < sc->p) {
      if (recv_round[peer] >= (int32_t)first)
        return fail(err, errlen,
                    "rank %d: round %u is marked independent but receives "
                    "from the same peer as round %d",
                    r, k, recv_round[peer]);
      recv_round[peer] = (int32_t)k;
    }
    cap += ro->send.nsegs + ro->recv.nsegs + 2 * (size_t)ro->nsteps;
  }
  v = crnet__malloc(sizeof *v * (cap ? cap : 1));
  act = crnet__malloc(sizeof *act * (cap ? cap : 1));
  if (v == NULL || act == NULL) {
    free(v);
    free(act);
    return CRNET_ENOMEM;
  }
  for (uint32_t k = first; k < last; k++) {
    const crnet__round *ro = &sc->rounds[k];
    for (uint32_t i = 0; i < ro->send.nsegs; i++)
      add_use(v, &n, &sc->segs[ro->send.first_seg + i], USE_SEND, k, in_place);
    for (uint32_t i = 0; i < ro->recv.nsegs; i++)
      add_use(v, &n, &sc->segs[ro->recv.first_seg + i], USE_RECV, k, in_place);
    for (uint32_t i = 0; i < ro->nsteps; i++) {
      const crnet__step *st = &sc->steps[ro->first_step + i];
      add_use(v, &n, &st->src, USE_SRC, k, in_place);
      add_use(v, &n, &st->dst, USE_DST, k, in_place);
    }
  }
  qsort(v, n, sizeof *v, use_cmp);
  /* act: the uses seen so far that reach past the current start. */
  for (size_t i = 0; i < n && rc == 0; i++) {
    size_t keep = 0;
    for (size_t j = 0; j < nact; j++)
      if (act[j]->buf == v[i].buf && act[j]->end > v[i].off)
        act[keep++] = act[j];
    nact = keep;
    for (size_t j = 0; j < nact && rc == 0; j++) {
      const use *a = act[j], *b = &v[i];
      if (a->round == b->round)
        continue;
      const use *early = a->round < b->round ? a : b;
      const use *late = a->round < b->round ? b : a;
      if (conflicts(early, late))
        rc = fail(err, errlen,
                  "rank %d: round %u is marked independent but %s %s[%" PRIu64
                  "..%" PRIu64 ") which round %u uses",
                  r, late->round,
                  late->kind == USE_RECV ? "receives into" : "sends from",
                  buf_name[late->buf], late->off, late->end, early->round);
    }
    act[nact++] = &v[i];
  }
  free(v);
  free(act);
  return rc;
}

static int check_independent(const crnet__schedule *sc, int32_t r,
                             bool in_place, char *err, size_t errlen) {
  int32_t *recv_round;
  int rc = 0;
  uint32_t first = 0;
  bool any = false;
  for (uint32_t k = 0; k < sc->nrounds; k++)
    any = any || sc->rounds[k].independent;
  if (!any)
    return 0;
  recv_round = crnet__malloc(sizeof *recv_round * (size_t)sc->p);
  if (recv_round == NULL)
    return CRNET_ENOMEM;
  for (int32_t q = 0; q < sc->p; q++)
    recv_round[q] = -1;
  for (uint32_t k = 1; k <= sc->nrounds && rc == 0; k++) {
    if (k < sc->nrounds && sc->rounds[k].independent)
      continue;
    if (k - first > 1)
      rc = check_group(sc, r, in_place, first, k, recv_round, err, errlen);
    first = k;
  }
  free(recv_round);
  return rc;
}

int crnet__sim_run(crnet__sim_rank *ranks, int32_t p, bool in_place,
                   bool causal, crnet__sim_combine combine, char *err,
                   size_t errlen) {
  int rc = 0;
  size_t kw = ((size_t)p + 63) / 64;
  rstate *st = crnet__calloc((size_t)p, sizeof(*st));
  if (st == NULL)
    return CRNET_ENOMEM;
  uint32_t maxr = 0;
  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *k = &ranks[r];
    rstate *s = &st[r];
    memset(&k->stats, 0, sizeof(k->stats));
    if (k->sched->p != p || k->sched->rank != r) {
      rc = fail(err, errlen, "rank %d: schedule built for p=%d rank=%d", r,
                k->sched->p, k->sched->rank);
      goto out;
    }
    uint64_t tc = k->sched->temp_count;
    s->temp = crnet__malloc((tc ? tc : 1) * sizeof(uint64_t));
    s->temp_wr = crnet__calloc(tc ? tc : 1, 1);
    s->recv_wr = crnet__calloc(k->recv_count ? k->recv_count : 1, 1);
    if (causal)
      s->known = crnet__calloc(kw, sizeof(uint64_t));
    if (s->temp == NULL || s->temp_wr == NULL || s->recv_wr == NULL ||
        (causal && s->known == NULL)) {
      rc = CRNET_ENOMEM;
      goto out;
    }
    if (causal)
      s->known[r / 64] |= UINT64_C(1) << (r % 64);
    if (k->init_off > k->recv_count ||
        k->init_count > k->recv_count - k->init_off) {
      rc = fail(err, errlen, "rank %d: initial RECV range out of bounds", r);
      goto out;
    }
    memset(s->recv_wr + k->init_off, 1, k->init_count);
    s->buf[CRNET__BUF_RECV] = k->recv;
    s->wr[CRNET__BUF_RECV] = s->recv_wr;
    s->len[CRNET__BUF_RECV] = k->recv_count;
    s->buf[CRNET__BUF_TEMP] = s->temp;
    s->wr[CRNET__BUF_TEMP] = s->temp_wr;
    s->len[CRNET__BUF_TEMP] = tc;
    if (in_place) {
      s->buf[CRNET__BUF_SEND] = k->recv;
      s->wr[CRNET__BUF_SEND] = s->recv_wr;
      s->len[CRNET__BUF_SEND] = k->recv_count;
    } else {
      s->buf[CRNET__BUF_SEND] = (uint64_t *)k->send;
      s->wr[CRNET__BUF_SEND] = NULL;
      s->len[CRNET__BUF_SEND] = k->send_count;
    }
    if (k->sched->nrounds > maxr)
      maxr = k->sched->nrounds;
    rc = check_independent(k->sched, r, in_place, err, errlen);
    if (rc != 0)
      goto out;
  }

  for (uint32_t rd = 0; rd < maxr; rd++) {
    /* 1 + 2: match and gather */
    for (int32_t r = 0; r < p; r++) {
      const crnet__schedule *sc = ranks[r].sched;
      rstate *s = &st[r];
      s->msg_len = 0;
      if (rd >= sc->nrounds)
        continue;
      const crnet__round *ro = &sc->rounds[rd];
      if (ro->send.peer >= 0 || ro->recv.peer >= 0)
        ranks[r].stats.comm_rounds++;
      for (int dir = 0; dir < 2; dir++) {
        const crnet__xfer *x = dir == 0 ? &ro->send : &ro->recv;
        if (x->peer < 0)
          continue;
        if (x->peer >= p || x->peer == r) {
          rc = fail(err, errlen, "round %u: rank %d %s peer %d", rd, r,
                    dir == 0 ? "sends to" : "receives from", x->peer);
          goto out;
        }
        const crnet__schedule *ps = ranks[x->peer].sched;
        const crnet__xfer *y = NULL;
        if (rd < ps->nrounds)
          y = dir == 0 ? &ps->rounds[rd].recv : &ps->rounds[rd].send;
        if (y == NULL || y->peer != r) {
          rc = fail(err, errlen,
                    "round %u: rank %d %s rank %d, which %s rank %d", rd, r,
                    dir == 0 ? "sends to" : "receives from", x->peer,
                    dir == 0 ? "receives from" : "sends to",
                    y == NULL ? -1 : y->peer);
          goto out;
        }
        uint64_t a = crnet__xfer_count(sc, x), b = crnet__xfer_count(ps, y);
        if (a != b) {
          rc = fail(err, errlen,
                    "round %u: rank %d %s %" PRIu64 " elements, rank %d %s "
                    "%" PRIu64,
                    rd, r, dir == 0 ? "sends" : "receives", a, x->peer,
                    dir == 0 ? "receives" : "sends", b);
          goto out;
        }
      }
      bool oom;
      const crnet__seg *bad = round_overlap(sc, ro, in_place, &oom);
      if (oom) {
        rc = CRNET_ENOMEM;
        goto out;
      }
      if (bad != NULL) {
        rc = fail(err, errlen,
                  "round %u: rank %d receives into " SEGF
                  " while sending from it",
                  rd, r, SEGA(*bad));
        goto out;
      }
      if (ro->send.peer < 0)
        continue;
      uint64_t n = crnet__xfer_count(sc, &ro->send);
      ranks[r].stats.msgs_sent++;
      ranks[r].stats.elems_sent += n;
      free(s->msg);
      s->msg = crnet__malloc((n ? n : 1) * sizeof(uint64_t));
      if (s->msg == NULL) {
        rc = CRNET_ENOMEM;
        goto out;
      }
      for (uint32_t i = 0; i < ro->send.nsegs; i++) {
        const crnet__seg *g = &sc->segs[ro->send.first_seg + i];
        if (!in_bounds(s, g)) {
          rc = fail(err, errlen, "round %u: rank %d sends out of bounds " SEGF,
                    rd, r, SEGA(*g));
          goto out;
        }
        uint64_t u = unwritten(s, g);
        if (u != UINT64_MAX) {
          rc = fail(err, errlen,
                    "round %u: rank %d sends unwritten %s[%" PRIu64 "]", rd, r,
                    buf_name[g->buf], u);
          goto out;
        }
        memcpy(s->msg + s->msg_len, s->buf[g->buf] + g->off,
               g->count * sizeof(uint64_t));
        s->msg_len += g->count;
      }
    }
    /* 3: deliver */
    for (int32_t r = 0; r < p; r++) {
      const crnet__schedule *sc = ranks[r].sched;
      rstate *s = &st[r];
      if (rd >= sc->nrounds || sc->rounds[rd].recv.peer < 0)
        continue;
      const crnet__xfer *x = &sc->rounds[rd].recv;
      const rstate *from = &st[x->peer];
      uint64_t pos = 0;
      ranks[r].stats.msgs_recv++;
      ranks[r].stats.elems_recv += from->msg_len;
      for (uint32_t i = 0; i < x->nsegs; i++) {
        const crnet__seg *g = &sc->segs[x->first_seg + i];
        if (!in_bounds(s, g) || g->buf == CRNET__BUF_SEND) {
          rc = fail(err, errlen,
                    "round %u: rank %d receives into %s " SEGF, rd, r,
                    g->buf == CRNET__BUF_SEND ? "read-only" : "out-of-bounds",
                    SEGA(*g));
          goto out;
        }
        memcpy(s->buf[g->buf] + g->off, from->msg + pos,
               g->count * sizeof(uint64_t));
        mark(s, g);
        pos += g->count;
      }
    }
    if (causal) {
      /* knowledge travels with the messages, as of the round's start */
      uint64_t *snap = crnet__calloc((size_t)p * kw, sizeof(uint64_t));
      if (snap == NULL) {
        rc = CRNET_ENOMEM;
        goto out;
      }
      for (int32_t r = 0; r < p; r++)
        memcpy(snap + (size_t)r * kw, st[r].known, kw * sizeof(uint64_t));
      for (int32_t r = 0; r < p; r++) {
        const crnet__schedule *sc = ranks[r].sched;
        if (rd >= sc->nrounds || sc->rounds[rd].recv.peer < 0)
          continue;
        const uint64_t *o = snap + (size_t)sc->rounds[rd].recv.peer * kw;
        for (size_t w = 0; w < kw; w++)
          st[r].known[w] |= o[w];
      }
      free(snap);
    }
    /* 4: steps */
    for (int32_t r = 0; r < p; r++) {
      const crnet__schedule *sc = ranks[r].sched;
      rstate *s = &st[r];
      if (rd >= sc->nrounds)
        continue;
      const crnet__round *ro = &sc->rounds[rd];
      for (uint32_t i = 0; i < ro->nsteps; i++) {
        const crnet__step *stp = &sc->steps[ro->first_step + i];
        const crnet__seg *src = &stp->src, *dst = &stp->dst;
        if (src->count != dst->count || !in_bounds(s, src) ||
            !in_bounds(s, dst) || dst->buf == CRNET__BUF_SEND ||
            overlap(src, dst, in_place) ||
            (stp->kind != CRNET__STEP_REDUCE &&
             stp->kind != CRNET__STEP_COPY)) {
          rc = fail(err, errlen,
                    "round %u: rank %d step %u (kind %d) " SEGF " -> " SEGF
                    " is malformed (bounds, overlap, or writes SEND)",
                    rd, r, i, stp->kind, SEGA(*src), SEGA(*dst));
          goto out;
        }
        uint64_t u = unwritten(s, src);
        if (u == UINT64_MAX && stp->kind == CRNET__STEP_REDUCE)
          u = unwritten(s, dst);
        if (u != UINT64_MAX) {
          rc = fail(err, errlen,
                    "round %u: rank %d step %u reads unwritten element %" PRIu64
                    " (" SEGF " -> " SEGF ")",
                    rd, r, i, u, SEGA(*src), SEGA(*dst));
          goto out;
        }
        const uint64_t *a = s->buf[src->buf] + src->off;
        uint64_t *d = s->buf[dst->buf] + dst->off;
        if (stp->kind == CRNET__STEP_COPY) {
          memcpy(d, a, src->count * sizeof(uint64_t));
          ranks[r].stats.elems_copied += src->count;
        } else {
          if (stp->order == CRNET__SRC_LEFT)
            for (uint64_t e = 0; e < src->count; e++)
              d[e] = combine(a[e], d[e]);
          else
            for (uint64_t e = 0; e < src->count; e++)
              d[e] = combine(d[e], a[e]);
          ranks[r].stats.elems_reduced += src->count;
        }
        mark(s, dst);
      }
    }
  }
  if (causal)
    for (int32_t r = 0; r < p; r++)
      for (int32_t q = 0; q < p; q++)
        if (!(st[r].known[q / 64] >> (q % 64) & 1)) {
          rc = fail(err, errlen, "rank %d finishes without hearing from %d",
                    r, q);
          goto out;
        }
out:
  free_states(st, p);
  return rc;
}

static void dump_xfer(const crnet__schedule *s, const crnet__xfer *x,
                      const char *what, FILE *out) {
  if (x->peer < 0)
    return;
  fprintf(out, "  %s %d:", what, x->peer);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    const crnet__seg *g = &s->segs[x->first_seg + i];
    fprintf(out, " %s[%" PRIu64 "+%" PRIu64 "]", buf_name[g->buf], g->off,
            g->count);
  }
  fputc('\n', out);
}

void crnet__sched_dump(const crnet__schedule *s, FILE *out) {
  fprintf(out, "rank %d of %d: %u rounds, temp %" PRIu64 "\n", s->rank, s->p,
          s->nrounds, s->temp_count);
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    fprintf(out, " round %u\n", k);
    dump_xfer(s, &ro->send, "send", out);
    dump_xfer(s, &ro->recv, "recv", out);
    for (uint32_t i = 0; i < ro->nsteps; i++) {
      const crnet__step *st = &s->steps[ro->first_step + i];
      fprintf(out, "  %s %s[%" PRIu64 "+%" PRIu64 "] -> %s[%" PRIu64 "]%s\n",
              st->kind == CRNET__STEP_REDUCE ? "reduce" : "copy",
              buf_name[st->src.buf], st->src.off, st->src.count,
              buf_name[st->dst.buf], st->dst.off,
              st->kind != CRNET__STEP_REDUCE          ? ""
              : st->order == CRNET__SRC_LEFT ? " src-left"
                                             : " dst-left");
    }
  }
}
