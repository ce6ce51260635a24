/* The executor. See exec.h. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ops.h"

/* Gather and scatter lists of up to this many segments live on the stack;
 * the circulant schedules need at most two per message (a wrap-around). */
#define IOV_SMALL 8

typedef struct exec_bufs {
  uint8_t *base[CRNET__BUF_COUNT];
  size_t esize;
} exec_bufs;

static void *seg_ptr(const exec_bufs *b, const crnet__seg *g) {
  return b->base[g->buf] + g->off * b->esize;
}

/* Fills iov from the schedule's segments of x. */
static crnet__iov *make_iov(const crnet__schedule *s, const crnet__xfer *x,
                            const exec_bufs *b, crnet__iov *small) {
  crnet__iov *iov = small;
  if (x->nsegs > IOV_SMALL) {
    iov = malloc(sizeof *iov * x->nsegs);
    if (iov == NULL)
      return NULL;
  }
  for (uint32_t i = 0; i < x->nsegs; i++) {
    const crnet__seg *g = &s->segs[x->first_seg + i];
    iov[i].base = seg_ptr(b, g);
    iov[i].len = g->count * b->esize;
  }
  return iov;
}

/* dst = dst (+) src for an operator whose order matters: the kernel only
 * computes inout = in (+) inout, so combine into a copy of src. */
static int reduce_dst_left(crnet_op op, crnet_datatype dt, const void *src,
                           void *dst, uint64_t count, size_t esize) {
  void *tmp = malloc(count * esize);
  if (tmp == NULL)
    return CRNET_ENOMEM;
  memcpy(tmp, src, count * esize);
  crnet__reduce(op, dt, dst, tmp, count);
  memcpy(dst, tmp, count * esize);
  free(tmp);
  return 0;
}

/* Elements from..from+n of step st. */
static int apply_step(const crnet__step *st, const exec_bufs *b,
                      crnet_datatype dt, crnet_op op, bool commutative,
                      uint64_t from, uint64_t n) {
  uint8_t *src = (uint8_t *)seg_ptr(b, &st->src) + from * b->esize;
  uint8_t *dst = (uint8_t *)seg_ptr(b, &st->dst) + from * b->esize;
  if (st->kind == CRNET__STEP_COPY)
    memmove(dst, src, n * b->esize);
  else if (st->order == CRNET__SRC_LEFT || commutative)
    crnet__reduce(op, dt, src, dst, n);
  else
    return reduce_dst_left(op, dt, src, dst, n, b->esize);
  return 0;
}

static int run_steps(const crnet__schedule *s, const crnet__round *r,
                     const exec_bufs *b, crnet_datatype dt, crnet_op op) {
  bool commutative = crnet__op_commutative(op);
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    int rc;
    if (st->src.count == 0)
      continue;
    rc = apply_step(st, b, dt, op, commutative, 0, st->src.count);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* --- reducing while the message arrives -----------------------------------
 *
 * A large receive is reduced piece by piece as it lands, instead of after
 * the whole message: on a real network the reduction of one piece overlaps
 * the arrival of the next, and everywhere each piece is reduced while the
 * kernel's copy of it is still in cache. Only rounds where this cannot
 * change the result qualify ("streamable"): every step reads a region that
 * lies inside one segment of the round's receive, and writes a region that
 * no other step writes or reads and that the round neither sends nor
 * receives. The steps are then independent element by element, so any
 * order of pieces gives the same bits as running them after the receive.
 * Rounds whose steps chain (a fold of several vectors into one, a copy
 * before a reduce) run their steps after the receive, as before. */

/* A piece (c->stream_piece bytes, CRNET_STREAM_PIECE) is reduced once at
 * least that much more has arrived. Receives of fewer than this many
 * pieces are reduced whole: a piece costs a pass through the loop, which
 * only pays off for large messages. */
#define STREAM_MIN_PIECES 4

typedef struct step_stream {
  uint64_t start; /* byte offset of the step's input in the receive */
  uint64_t done;  /* elements reduced so far */
} step_stream;

static bool overlaps(const crnet__seg *a, const crnet__seg *b) {
  return a->buf == b->buf && a->count > 0 && b->count > 0 &&
         a->off < b->off + b->count && b->off < a->off + a->count;
}

static bool overlaps_xfer(const crnet__schedule *s, const crnet__xfer *x,
                          const crnet__seg *g) {
  for (uint32_t i = 0; i < x->nsegs; i++)
    if (overlaps(&s->segs[x->first_seg + i], g))
      return true;
  return false;
}

/* Fills ss[i].start for every step of r and returns true if r is
 * streamable (see above). */
static bool streamable(const crnet__schedule *s, const crnet__round *r,
                       size_t esize, step_stream *ss) {
  if (r->recv.peer < 0 || r->nsteps == 0)
    return false;
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    uint64_t at = 0;
    bool inside = false;
    for (uint32_t k = 0; k < r->recv.nsegs && !inside; k++) {
      const crnet__seg *g = &s->segs[r->recv.first_seg + k];
      if (st->src.buf == g->buf && st->src.off >= g->off &&
          st->src.off + st->src.count <= g->off + g->count) {
        ss[i].start = (at + (st->src.off - g->off)) * esize;
        inside = true;
      }
      at += g->count;
    }
    if (!inside || overlaps_xfer(s, &r->send, &st->dst) ||
        overlaps_xfer(s, &r->recv, &st->dst))
      return false;
    for (uint32_t j = 0; j < r->nsteps; j++) {
      const crnet__step *o = &s->steps[r->first_step + j];
      if (overlaps(&st->dst, &o->src) || (j != i && overlaps(&st->dst, &o->dst)))
        return false;
    }
    ss[i].done = 0;
  }
  return true;
}

/* Runs the part of every step whose input has arrived (`got` bytes of the
 * receive). */
static int run_arrived(const crnet__schedule *s, const crnet__round *r,
                       const exec_bufs *b, crnet_datatype dt, crnet_op op,
                       step_stream *ss, uint64_t got) {
  bool commutative = crnet__op_commutative(op);
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    uint64_t ready;
    int rc;
    if (got <= ss[i].start)
      continue;
    ready = (got - ss[i].start) / b->esize;
    if (ready > st->src.count)
      ready = st->src.count;
    if (ready <= ss[i].done)
      continue;
    rc = apply_step(st, b, dt, op, commutative, ss[i].done, ready - ss[i].done);
    if (rc != 0)
      return rc;
    ss[i].done = ready;
  }
  return 0;
}

/* --- running rounds -----------------------------------------------------
 *
 * A round runs in two halves: round_start posts its receive and its send,
 * round_finish waits for them (reducing pieces as they arrive when the
 * round is streamable) and runs its steps. One round after the other, that
 * is the whole story. Rounds a schedule marks independent (schedule.h) are
 * started while earlier rounds of their group are still in flight, up to
 * c->rounds_in_flight at once, so that their messages travel together and
 * the per-message latencies overlap instead of adding up (pairwise
 * all-to-all: p-1 rounds, all independent). Rounds still finish in order,
 * so steps run in round order. */

typedef struct round_run {
  uint32_t k;
  uint64_t started;   /* uv_hrtime at round_start */
  uint64_t sent;      /* bytes of the send */
  crnet__xchg x;
  bool exchanging; /* x was started: round_finish must wait for it */
  bool stream;
  uint64_t total; /* bytes of the receive */
  int rc;         /* a failure before the exchange started */
  crnet__iov ssmall[IOV_SMALL], rsmall[IOV_SMALL], *siov, *riov;
  step_stream sssmall[IOV_SMALL], *ss;
} round_run;

static void round_start(crnet_comm *c, const crnet__schedule *s, uint32_t k,
                        const exec_bufs *b, uint32_t sig, round_run *rr) {
  const crnet__round *r = &s->rounds[k];
  rr->k = k;
  rr->started = uv_hrtime();
  rr->sent = 0;
  rr->total = 0;
  rr->exchanging = false;
  rr->stream = false;
  rr->rc = 0;
  rr->siov = rr->riov = NULL;
  rr->ss = rr->sssmall;
  if (r->send.peer < 0 && r->recv.peer < 0)
    return; /* local steps only */
  rr->siov = make_iov(s, &r->send, b, rr->ssmall);
  rr->riov = make_iov(s, &r->recv, b, rr->rsmall);
  rr->total = crnet__xfer_count(s, &r->recv) * b->esize;
  rr->sent = crnet__xfer_count(s, &r->send) * b->esize;
  rr->stream = c->stream_piece > 0 &&
               rr->total >= STREAM_MIN_PIECES * c->stream_piece;
  if (rr->stream && r->nsteps > IOV_SMALL) {
    rr->ss = malloc(sizeof *rr->ss * r->nsteps);
    if (rr->ss == NULL) {
      rr->ss = rr->sssmall;
      rr->stream = false;
    }
  }
  if (rr->siov == NULL || rr->riov == NULL) {
    rr->rc = CRNET_ENOMEM;
    return;
  }
  rr->stream = rr->stream && streamable(s, r, b->esize, rr->ss);
  rr->rc = crnet__xchg_start(c, &rr->x, r->send.peer, rr->siov,
                             r->send.nsegs, r->recv.peer, rr->riov,
                             r->recv.nsegs, k, sig);
  rr->exchanging = true;
}

/* The round's share of the counters (comm.h), and its trace event. The
 * time of round_finish that was not reducing was waiting. */
static void round_account(crnet_comm *c, const crnet__round *r,
                          const round_run *rr, uint64_t finish_from,
                          uint64_t reduce_ns, int rc, uint32_t lanes) {
  uint64_t now = uv_hrtime();
  uint64_t wait_ns = now - finish_from - reduce_ns;
  c->call_wait_ns += wait_ns;
  c->call_reduce_ns += reduce_ns;
  c->call_rounds++;
  if (rc == 0 && r->send.peer >= 0) {
    c->peer_stats[r->send.peer].bytes_sent += rr->sent;
    c->peer_stats[r->send.peer].messages_sent++;
    c->call_sent += rr->sent;
  }
  if (rc == 0 && r->recv.peer >= 0) {
    c->peer_stats[r->recv.peer].bytes_received += rr->total;
    c->peer_stats[r->recv.peer].messages_received++;
    c->call_received += rr->total;
  }
  if (c->trace != NULL) {
    crnet__trace_round tr = {.k = rr->k,
                             .lane = r->independent ? 1 + rr->k % lanes : 0,
                             .to = r->send.peer,
                             .from = r->recv.peer,
                             .bytes_sent = rr->sent,
                             .bytes_received = rr->total,
                             .wait_ns = wait_ns,
                             .reduce_ns = reduce_ns};
    crnet__trace_round_done(c->trace, rr->started, now, &tr);
  }
}

static int round_finish(crnet_comm *c, const crnet__schedule *s,
                        const exec_bufs *b, crnet_datatype dt, crnet_op op,
                        round_run *rr, uint32_t lanes) {
  const crnet__round *r = &s->rounds[rr->k];
  int rc = rr->rc;
  uint64_t finish_from = uv_hrtime(), reduce_ns = 0, t;
  c->cur_round = rr->k;
  if (rr->exchanging) {
    if (rr->stream) {
      uint64_t reduced = 0;
      while (rc == 0 && reduced < rr->total) {
        uint64_t want = reduced + c->stream_piece;
        rc = crnet__xchg_wait(&rr->x, want < rr->total ? want : rr->total);
        reduced = crnet__xchg_received(&rr->x);
        if (rc == 0) {
          t = uv_hrtime();
          rc = run_arrived(s, r, b, dt, op, rr->ss, reduced);
          reduce_ns += uv_hrtime() - t;
        }
      }
    }
    /* Always: wait until libuv has let go of both requests. */
    int wrc = crnet__xchg_wait(&rr->x, 0);
    if (rc == 0)
      rc = wrc;
  }
  if (rc == 0 && r->nsteps > 0) {
    t = uv_hrtime();
    rc = rr->stream ? run_arrived(s, r, b, dt, op, rr->ss, rr->total)
                    : run_steps(s, r, b, dt, op);
    reduce_ns += uv_hrtime() - t;
  }
  round_account(c, r, rr, finish_from, reduce_ns, rc, lanes);
  if (rr->siov != NULL && rr->siov != rr->ssmall)
    free(rr->siov);
  if (rr->riov != NULL && rr->riov != rr->rsmall)
    free(rr->riov);
  if (rr->ss != rr->sssmall)
    free(rr->ss);
  return rc;
}

/* Runs every round of s: rounds [head, next) are in flight. After a failure
 * no round starts, and those in flight are finished (libuv must let go of
 * their requests before their memory goes). */
static int run_rounds(crnet_comm *c, const crnet__schedule *s,
                      const exec_bufs *b, crnet_datatype dt, crnet_op op,
                      uint32_t sig) {
  uint32_t window = c->rounds_in_flight;
  uint32_t head = 0, next = 0;
  round_run *runs;
  int rc = 0;
  if (window < 1 || window > CRNET__MAX_ROUNDS_IN_FLIGHT)
    window = 1;
  /* A few KiB each (an exchange holds a request per stream): kept on the
   * comm, like TEMP. */
  if (c->exec_runs == NULL)
    c->exec_runs = malloc(sizeof *runs * window);
  runs = c->exec_runs;
  if (runs == NULL)
    return CRNET_ENOMEM;
  /* Lazy links: the peers of this call that have no link yet are all
   * connected at once, instead of one in each round that first names one
   * (crnet__xchg_start waits only for the round's own). */
  for (uint32_t k = 0; c->lazy && k < s->nrounds; k++) {
    crnet__lazy_want(c, s->rounds[k].send.peer);
    crnet__lazy_want(c, s->rounds[k].recv.peer);
  }
  for (;;) {
    while (rc == 0 && next < s->nrounds &&
           (next == head ||
            (s->rounds[next].independent && next - head < window))) {
      round_start(c, s, next, b, sig, &runs[next % window]);
      next++;
    }
    if (head == next)
      return rc;
    int frc = round_finish(c, s, b, dt, op, &runs[head % window], window);
    if (rc == 0)
      rc = frc;
    head++;
  }
}

/* --- scratch -----------------------------------------------------------------
 *
 * TEMP is kept on the comm from one call to the next, and a new one is
 * written through once before use. Both are about the kernel, not about
 * memory: a freshly mapped buffer takes a page fault on the first touch of
 * every page, and when that first touch is the kernel copying a large
 * receive into it, the reader falls so far behind that the socket's receive
 * queue overflows, the kernel drops segments and the sender waits out
 * retransmission timeouts of 200 ms and more (measured: a 64 MiB
 * reduce-scatter at p = 4 took 635 ms with a fresh TEMP per call, 157 ms
 * with this). Scratch beyond TEMP_KEEP_BYTES is given back after the call,
 * so a rare huge call does not pin its memory. */
#define TEMP_KEEP_BYTES ((size_t)256 << 20)

static void *get_temp(crnet_comm *c, size_t bytes) {
  if (c->temp_bytes >= bytes)
    return c->temp;
  free(c->temp);
  c->temp_bytes = 0;
  c->temp = malloc(bytes);
  if (c->temp == NULL)
    return NULL;
  memset(c->temp, 0, bytes); /* fault every page in now, see above */
  c->temp_bytes = bytes;
  return c->temp;
}

static void put_temp(crnet_comm *c) {
  if (c->temp_bytes > TEMP_KEEP_BYTES) {
    free(c->temp);
    c->temp = NULL;
    c->temp_bytes = 0;
  }
}

int crnet__exec(crnet_comm *c, const crnet__schedule *s, const void *send,
                void *recv, bool in_place, crnet_datatype dt, crnet_op op,
                uint32_t sig) {
  exec_bufs b;
  int rc = 0;

  b.esize = crnet_datatype_size(dt);
  b.base[CRNET__BUF_RECV] = recv;
  b.base[CRNET__BUF_SEND] = in_place ? recv : (uint8_t *)(uintptr_t)send;
  b.base[CRNET__BUF_TEMP] = NULL;
  if (s->temp_count > 0) {
    b.base[CRNET__BUF_TEMP] = get_temp(c, s->temp_count * b.esize);
    if (b.base[CRNET__BUF_TEMP] == NULL)
      return CRNET_ENOMEM;
  }
  rc = run_rounds(c, s, &b, dt, op, sig);
  if (s->temp_count > 0)
    put_temp(c);
  return rc;
}
