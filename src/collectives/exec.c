/* The executor. See exec.h. */
#include "exec.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "alloc.h"
#include "comm_state.h"
#include "ops.h"
#include "request.h"

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
    iov = crnet__malloc(sizeof *iov * x->nsegs);
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

/* Scratch for the element-wise work below, on the stack: a piece at a
 * time, so that a round's local steps never allocate (a failure there,
 * with the call's messages in flight, would fail the comm). Operators are
 * element-wise, so pieces give the same result as the whole. */
#define PIECE_BYTES 4096

/* dst = dst (+) src for an operator whose order matters: the kernel only
 * computes inout = in (+) inout, so combine into a copy of src. */
static void reduce_dst_left(crnet_op op, crnet_datatype dt, const void *src,
                            void *dst, uint64_t count, size_t esize) {
  _Alignas(max_align_t) uint8_t tmp[PIECE_BYTES];
  uint64_t per = PIECE_BYTES / esize;
  for (uint64_t at = 0; at < count; at += per) {
    uint64_t n = count - at < per ? count - at : per;
    uint8_t *d = (uint8_t *)dst + at * esize;
    memcpy(tmp, (const uint8_t *)src + at * esize, n * esize);
    crnet__reduce(op, dt, d, tmp, n);
    memcpy(d, tmp, n * esize);
  }
}

/* Elements from..from+n of step st. */
static void apply_step(const crnet__step *st, const exec_bufs *b,
                       crnet_datatype dt, crnet_op op, bool commutative,
                       uint64_t from, uint64_t n) {
  uint8_t *src = (uint8_t *)seg_ptr(b, &st->src) + from * b->esize;
  uint8_t *dst = (uint8_t *)seg_ptr(b, &st->dst) + from * b->esize;
  if (st->kind == CRNET__STEP_COPY)
    memmove(dst, src, n * b->esize);
  else if (st->order == CRNET__SRC_LEFT || commutative)
    crnet__reduce(op, dt, src, dst, n);
  else
    reduce_dst_left(op, dt, src, dst, n, b->esize);
}

static void run_steps(const crnet__schedule *s, const crnet__round *r,
                      const exec_bufs *b, crnet_datatype dt, crnet_op op) {
  bool commutative = crnet__op_commutative(op);
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    if (st->src.count > 0)
      apply_step(st, b, dt, op, commutative, 0, st->src.count);
  }
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

/* A piece (c->w->stream_piece bytes, CRNET_STREAM_PIECE) is reduced once at
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
static void run_arrived(const crnet__schedule *s, const crnet__round *r,
                        const exec_bufs *b, crnet_datatype dt, crnet_op op,
                        step_stream *ss, uint64_t got) {
  bool commutative = crnet__op_commutative(op);
  for (uint32_t i = 0; i < r->nsteps; i++) {
    const crnet__step *st = &s->steps[r->first_step + i];
    uint64_t ready;
    if (got <= ss[i].start)
      continue;
    ready = (got - ss[i].start) / b->esize;
    if (ready > st->src.count)
      ready = st->src.count;
    if (ready <= ss[i].done)
      continue;
    apply_step(st, b, dt, op, commutative, ss[i].done, ready - ss[i].done);
    ss[i].done = ready;
  }
}

/* --- running rounds -----------------------------------------------------
 *
 * A call is a request (request.h) and runs as a state machine: the progress
 * engine calls exec_advance whenever the loop has run, and it moves the
 * call as far as it can without blocking. A round starts (its exchange is
 * prepared and posted as far as links and the order of calls allow), the
 * head round, the oldest not finished, reduces what has arrived of a
 * streamable receive, and once its exchange is complete runs its steps and
 * finishes; then the next round becomes head. One round after the other,
 * that is the whole story. Rounds a schedule marks independent
 * (schedule.h) are started while earlier rounds of their group are still
 * in flight, up to c->w->rounds_in_flight at once, so that their messages
 * travel together and the per-message latencies overlap instead of adding
 * up (pairwise all-to-all: p-1 rounds, all independent). Rounds still
 * finish in order, so steps run in round order. Several calls in flight
 * interleave on the links this way, each at its own pace. */

typedef struct round_run {
  uint32_t k;
  uint64_t started;     /* uv_hrtime at round_start */
  uint64_t finish_from; /* when it became the head round */
  uint64_t reduce_ns;
  uint64_t sent;   /* bytes of the send */
  uint64_t total;  /* bytes of the receive */
  uint64_t reduced; /* bytes of a streamed receive reduced so far */
  crnet__exchange x;
  bool exchanging; /* x was started: the round waits for it */
  bool stream;
  int rc; /* a failure before the exchange started */
  crnet__iov ssmall[IOV_SMALL], rsmall[IOV_SMALL], *siov, *riov;
  step_stream sssmall[IOV_SMALL], *ss;
} round_run;

/* One call in flight: the runtime's request first, then the executor's
 * state, then `window` round_runs. */
typedef struct exec_call {
  crnet_request req;
  crnet__schedule sched;
  crnet__sched_memo *memo; /* where sched goes back to, or NULL */
  exec_bufs b;
  crnet_datatype dt;
  crnet_op op;
  bool exclusive;          /* exscan, for its name */
  bool quiet;              /* no trace events (exec.h) */
  uint64_t normalise;      /* elements of recv to normalise at the end */
  void *temp;              /* TEMP (scratch of this call) */
  size_t temp_bytes;
  uint32_t window, head, next;
  int rc;
  /* The clock as this call last read it (uv_hrtime): a round starts, and
   * the next becomes the head, at the moment the one before it was
   * accounted, so they share its reading instead of taking their own (a
   * read costs about 19 ns on the 2-core VM, a fair part of a small
   * call's time). */
  uint64_t now;
  /* This call's counters, added to the comm's at the end. */
  uint64_t wait_ns, reduce_ns, sent, received;
  uint32_t rounds;
  /* allgatherv with displacements (exec.h): the packed result, where its
   * blocks go, and the caller's buffer; NULL when none. */
  uint8_t *packed;
  uint64_t *unpack; /* p counts, then p displacements */
  int32_t p;
  uint8_t *user_recv;
  round_run runs[];
} exec_call;

/* The packed blocks to their places (exec.h, unpack). */
static void unpack_result(exec_call *e) {
  uint64_t at = 0;
  size_t es = e->b.esize;
  for (int32_t b = 0; b < e->p; b++) {
    uint64_t n = e->unpack[b];
    if (n > 0)
      memcpy(e->user_recv + e->unpack[e->p + b] * es, e->packed + at * es,
             n * es);
    at += n;
  }
}

static void round_start(exec_call *e, uint32_t k, round_run *rr) {
  crnet_comm *c = e->req.comm;
  const crnet__schedule *s = &e->sched;
  const crnet__round *r = &s->rounds[k];
  const exec_bufs *b = &e->b;
  crnet__exchange_id id = {.coll = e->req.coll,
                           .seq = e->req.seq,
                           .sig = e->req.sig,
                           .call = e->req.call};
  rr->k = k;
  rr->started = e->now;
  rr->finish_from = rr->started;
  rr->reduce_ns = 0;
  rr->sent = 0;
  rr->total = 0;
  rr->reduced = 0;
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
  rr->stream = c->w->stream_piece > 0 &&
               rr->total >= STREAM_MIN_PIECES * c->w->stream_piece;
  if (rr->stream && r->nsteps > IOV_SMALL) {
    rr->ss = crnet__malloc(sizeof *rr->ss * r->nsteps);
    if (rr->ss == NULL) {
      rr->ss = rr->sssmall;
      rr->stream = false;
    }
  }
  if (rr->siov == NULL || rr->riov == NULL) {
    /* The call's messages may be in flight, and the peers wait for this
     * round's: the comm fails, and they hear why. */
    rr->rc = CRNET_ENOMEM;
    crnet__comm_fail(c, CRNET_ENOMEM, -1,
                     "out of memory for the segments of round %" PRIu32, k);
    return;
  }
  rr->stream = rr->stream && streamable(s, r, b->esize, rr->ss);
  rr->rc = crnet__exchange_init(c, &rr->x, &e->req, &id, r->send.peer, rr->siov,
                                r->send.nsegs, r->recv.peer, rr->riov,
                                r->recv.nsegs, k);
  rr->exchanging = true;
  crnet__exchange_post(&rr->x);
}

/* The round's share of the counters, and its trace event. The time since
 * the round became the head that was not reducing was waiting. */
static void round_account(exec_call *e, const crnet__round *r,
                          const round_run *rr, int rc, uint64_t now) {
  crnet_comm *c = e->req.comm;
  uint64_t wait_ns = now - rr->finish_from - rr->reduce_ns;
  crnet__req_peer *p;
  e->wait_ns += wait_ns;
  e->reduce_ns += rr->reduce_ns;
  e->rounds++;
  if (rc == 0 && r->send.peer >= 0 &&
      (p = crnet__req_peer_find(&e->req, r->send.peer)) != NULL) {
    p->stats.bytes_sent += rr->sent;
    p->stats.messages_sent++;
    e->sent += rr->sent;
  }
  if (rc == 0 && r->recv.peer >= 0 &&
      (p = crnet__req_peer_find(&e->req, r->recv.peer)) != NULL) {
    p->stats.bytes_received += rr->total;
    p->stats.messages_received++;
    e->received += rr->total;
  }
  if (c->w->trace != NULL && !e->quiet) {
    crnet__trace_round tr = {.k = rr->k,
                             .lane = r->independent ? 1 + rr->k % e->window : 0,
                             .to = r->send.peer >= 0
                                       ? crnet__world_rank(c, r->send.peer)
                                       : -1,
                             .from = r->recv.peer >= 0
                                         ? crnet__world_rank(c, r->recv.peer)
                                         : -1,
                             .bytes_sent = rr->sent,
                             .bytes_received = rr->total,
                             .wait_ns = wait_ns,
                             .reduce_ns = rr->reduce_ns,
                             .ctx = c->ctx};
    crnet__trace_round_done(c->w->trace, rr->started, now, &tr);
  }
}

/* Moves the head round on: reduces what has arrived of a streamed
 * receive, and once the exchange is complete runs the steps. True when the
 * round is finished. */
static bool round_try_finish(exec_call *e, round_run *rr) {
  crnet_comm *c = e->req.comm;
  const crnet__schedule *s = &e->sched;
  const crnet__round *r = &s->rounds[rr->k];
  int rc = rr->rc;
  uint64_t t;
  e->req.round = rr->k;
  if (rr->exchanging) {
    if (rr->stream && rc == 0 && c->err == 0) {
      /* A piece at a time, as it lands (see above). */
      uint64_t got = crnet__exchange_received(&rr->x);
      if (got > rr->reduced &&
          (got - rr->reduced >= c->w->stream_piece || got == rr->total)) {
        t = uv_hrtime();
        run_arrived(s, r, &e->b, e->dt, e->op, rr->ss, got);
        rr->reduce_ns += uv_hrtime() - t;
        rr->reduced = got;
      }
    }
    /* Also after a failure: libuv must let go of the round's memory. */
    if (!crnet__exchange_complete(&rr->x))
      return false;
    int xrc = crnet__exchange_end(&rr->x);
    if (rc == 0)
      rc = xrc;
  }
  if (rc == 0 && r->nsteps > 0) {
    t = uv_hrtime();
    if (rr->stream)
      run_arrived(s, r, &e->b, e->dt, e->op, rr->ss, rr->total);
    else
      run_steps(s, r, &e->b, e->dt, e->op);
    e->now = uv_hrtime();
    rr->reduce_ns += e->now - t;
  } else {
    e->now = uv_hrtime();
  }
  round_account(e, r, rr, rc, e->now);
  if (rr->siov != NULL && rr->siov != rr->ssmall)
    free(rr->siov);
  if (rr->riov != NULL && rr->riov != rr->rsmall)
    free(rr->riov);
  if (rr->ss != rr->sssmall)
    free(rr->ss);
  rr->siov = rr->riov = NULL;
  rr->ss = rr->sssmall;
  if (rc != 0 && e->rc == 0)
    e->rc = rc;
  return true;
}

/* With one operand nothing is combined, but the logical operators still
 * promise 0 or 1: x LAND x and x LOR x are exactly that. */
static void normalise_logical(crnet_op op, crnet_datatype dt, void *buf,
                              uint64_t count) {
  _Alignas(max_align_t) uint8_t copy[PIECE_BYTES];
  size_t esize = crnet_datatype_size(dt);
  uint64_t per = PIECE_BYTES / esize;
  if (op != CRNET_LAND && op != CRNET_LOR)
    return;
  for (uint64_t at = 0; at < count; at += per) {
    uint64_t n = count - at < per ? count - at : per;
    uint8_t *b = (uint8_t *)buf + at * esize;
    memcpy(copy, b, n * esize);
    crnet__reduce(op, dt, copy, b, n);
  }
}

static bool exec_advance(crnet_request *req) {
  exec_call *e = (exec_call *)req;
  crnet_comm *c = req->comm;
  const crnet__schedule *s = &e->sched;
  bool moved;
  if (e->now == 0) /* the first pass: the call started then */
    e->now = req->started;
  do {
    moved = false;
    while (e->rc == 0 && c->err == 0 && e->next < s->nrounds &&
           (e->next == e->head || (s->rounds[e->next].independent &&
                                   e->next - e->head < e->window))) {
      round_start(e, e->next, &e->runs[e->next % e->window]);
      e->next++;
      moved = true;
    }
    /* Every round in flight posts what it now may, in round order, and
     * counts receives that are over, which lets younger calls post. */
    for (uint32_t k = e->head; k < e->next; k++) {
      round_run *rr = &e->runs[k % e->window];
      if (rr->exchanging) {
        if (crnet__exchange_post(&rr->x))
          moved = true;
        (void)crnet__exchange_complete(&rr->x);
      }
    }
    if (e->head < e->next &&
        round_try_finish(e, &e->runs[e->head % e->window])) {
      e->head++;
      if (e->head < e->next)
        e->runs[e->head % e->window].finish_from = e->now;
      moved = true;
    }
  } while (moved);
  if (e->head < e->next ||
      (e->next < s->nrounds && e->rc == 0 && c->err == 0))
    return false;
  /* A failure the comm noticed before the call completed is the call's
   * too (crnet.h: pending and later calls return it), even when its last
   * round's messages were all through: the engine completes a call in the
   * pass right after its last message, so only a failure noticed in that
   * same turn of the loop can meet a call that was in fact done. */
  req->status = e->rc != 0 ? e->rc : c->err;
  if (req->status == 0 && e->packed != NULL)
    unpack_result(e);
  if (req->status == 0 && e->normalise > 0)
    normalise_logical(e->op, e->dt, e->b.base[CRNET__BUF_RECV], e->normalise);
  return true;
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
 * with this). Each call in flight has its own; the comm keeps one, the
 * largest up to TEMP_KEEP_BYTES, for the next call that needs it, so a
 * rare huge call does not pin its memory. */
#define TEMP_KEEP_BYTES ((size_t)256 << 20)

static int get_temp(exec_call *e, size_t bytes) {
  crnet_comm *c = e->req.comm;
  pthread_mutex_lock(&c->w->mu);
  if (c->w->temp != NULL && c->w->temp_bytes >= bytes) {
    e->temp = c->w->temp;
    e->temp_bytes = c->w->temp_bytes;
    c->w->temp = NULL;
    c->w->temp_bytes = 0;
  }
  pthread_mutex_unlock(&c->w->mu);
  if (e->temp != NULL)
    return 0;
  e->temp = crnet__malloc(bytes);
  if (e->temp == NULL)
    return CRNET_ENOMEM;
  memset(e->temp, 0, bytes); /* fault every page in now, see above */
  e->temp_bytes = bytes;
  return 0;
}

static void put_temp(exec_call *e) {
  crnet_comm *c = e->req.comm;
  void *drop = e->temp;
  if (e->temp == NULL)
    return;
  pthread_mutex_lock(&c->w->mu);
  if (e->temp_bytes <= TEMP_KEEP_BYTES && e->temp_bytes > c->w->temp_bytes) {
    drop = c->w->temp;
    c->w->temp = e->temp;
    c->w->temp_bytes = e->temp_bytes;
  }
  pthread_mutex_unlock(&c->w->mu);
  free(drop);
  e->temp = NULL;
  e->temp_bytes = 0;
}

/* --- the request's life ------------------------------------------------------ */

/* The call's share of the comm's counters (comm.h), and its trace event
 * (c->w->mu held: request.h). */
static void exec_account(crnet_request *req) {
  exec_call *e = (exec_call *)req;
  crnet_comm *c = req->comm;
  /* A call that ran rounds completes in the pass of its last one, whose
   * reading is e->now. */
  uint64_t now = e->rounds > 0 ? e->now : uv_hrtime();
  int rc = req->status;
  crnet_coll_stats *st = &c->coll_stats[req->coll];
  st->calls++;
  st->failed += rc != 0;
  st->rounds += e->rounds;
  st->bytes_sent += e->sent;
  st->bytes_received += e->received;
  st->seconds += (double)(now - req->started) / 1e9;
  st->wait_seconds += (double)e->wait_ns / 1e9;
  st->reduce_seconds += (double)e->reduce_ns / 1e9;
  for (uint32_t i = 0; i < req->npeers; i++) {
    crnet_peer_stats *to = &c->peer_stats[req->peers[i].rank];
    const crnet_peer_stats *from = &req->peers[i].stats;
    to->bytes_sent += from->bytes_sent;
    to->bytes_received += from->bytes_received;
    to->messages_sent += from->messages_sent;
    to->messages_received += from->messages_received;
  }
  if (c->w->trace != NULL && !e->quiet) {
    char what[192];
    crnet__call_format(req->coll, crnet__call_number(c, req->seq), &req->call,
                       what, sizeof what);
    crnet__trace_call tc = {
        .name = e->exclusive
                    ? "exscan"
                    : crnet_collective_name((crnet_collective)req->coll),
        .seq = crnet__call_number(c, req->seq),
        .what = what,
        .bytes_sent = e->sent,
        .bytes_received = e->received,
        .wait_ns = e->wait_ns,
        .reduce_ns = e->reduce_ns,
        .rounds = e->rounds,
        .result = rc == 0 ? "ok" : crnet_err_name(rc),
        .ctx = c->ctx,
        .comm_rank = c->rank,
        .comm_size = c->size};
    crnet__trace_collective(c->w->trace, req->started, now, &tc);
    if (rc != 0)
      crnet__trace_flush(c->w->trace);
  }
}

static void exec_release(crnet_request *req) {
  exec_call *e = (exec_call *)req;
  free(e->packed);
  free(e->unpack);
  e->packed = NULL;
  e->unpack = NULL;
  put_temp(e);
  if (e->memo != NULL)
    crnet__memo_give_back(req->comm, e->memo, &e->sched);
  else
    crnet__sched_free(&e->sched);
  e->memo = NULL;
  if (req->peers != req->peers_small)
    free(req->peers);
  req->peers = NULL;
  req->npeers = 0;
}

static const crnet__req_ops exec_ops = {
    .advance = exec_advance,
    .account = exec_account,
    .release = exec_release,
};

static int cmp_peer(const void *a, const void *b) {
  int32_t x = ((const crnet__req_peer *)a)->rank;
  int32_t y = ((const crnet__req_peer *)b)->rank;
  return (x > y) - (x < y);
}

/* A small call lists a few peers: insertion sort costs a tenth of
 * qsort's merge sort there (which a small call's every start paid). */
#define INSERTION_SORT_MAX 16

static void sort_peers(crnet__req_peer *p, uint32_t n) {
  if (n > INSERTION_SORT_MAX) {
    qsort(p, n, sizeof *p, cmp_peer);
    return;
  }
  for (uint32_t i = 1; i < n; i++) {
    crnet__req_peer v = p[i];
    uint32_t j = i;
    for (; j > 0 && p[j - 1].rank > v.rank; j--)
      p[j] = p[j - 1];
    p[j] = v;
  }
}

/* The call's peers and how many messages it exchanges with each (the
 * order of calls on the wire, request.h, and its counters). */
static int count_peers(exec_call *e) {
  const crnet__schedule *s = &e->sched;
  crnet__req_peer *p;
  uint32_t n = 0, m = 0;
  for (uint32_t k = 0; k < s->nrounds; k++)
    n += (s->rounds[k].send.peer >= 0) + (s->rounds[k].recv.peer >= 0);
  if (n == 0)
    return 0;
  p = n <= CRNET__REQ_PEERS_SMALL ? e->req.peers_small
                                  : crnet__calloc(n, sizeof *p);
  if (p == NULL)
    return CRNET_ENOMEM;
  memset(p, 0, sizeof *p * n);
  for (uint32_t k = 0; k < s->nrounds; k++) {
    if (s->rounds[k].send.peer >= 0)
      p[m++].rank = s->rounds[k].send.peer;
    if (s->rounds[k].recv.peer >= 0)
      p[m++].rank = s->rounds[k].recv.peer;
  }
  sort_peers(p, n);
  m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m == 0 || p[m - 1].rank != p[i].rank)
      p[m++].rank = p[i].rank;
  e->req.peers = p;
  e->req.npeers = m;
  for (uint32_t k = 0; k < s->nrounds; k++) {
    if (s->rounds[k].send.peer >= 0)
      crnet__req_peer_find(&e->req, s->rounds[k].send.peer)->sends_left++;
    if (s->rounds[k].recv.peer >= 0)
      crnet__req_peer_find(&e->req, s->rounds[k].recv.peer)->recvs_left++;
  }
  return 0;
}

/* allgatherv with displacements: the schedule runs on a packed buffer
 * (exec.h). */
static int prepare_unpack(exec_call *e, const crnet__exec_args *a) {
  uint64_t total = 0, mine = 0;
  size_t es = e->b.esize;
  e->p = a->p;
  e->unpack = crnet__malloc(sizeof *e->unpack * 2 * (size_t)a->p);
  if (e->unpack == NULL)
    return CRNET_ENOMEM;
  for (int32_t b = 0; b < a->p; b++) {
    e->unpack[b] = a->unpack_counts[b];
    e->unpack[a->p + b] = a->unpack_displs[b];
    if (b == a->rank)
      mine = total;
    total += a->unpack_counts[b];
  }
  e->packed = crnet__malloc(total > 0 ? total * es : 1);
  if (e->packed == NULL)
    return CRNET_ENOMEM;
  e->user_recv = a->recv;
  if (a->in_place && a->unpack_counts[a->rank] > 0)
    memcpy(e->packed + mine * es,
           (const uint8_t *)a->recv + a->unpack_displs[a->rank] * es,
           a->unpack_counts[a->rank] * es);
  e->b.base[CRNET__BUF_RECV] = e->packed;
  e->b.base[CRNET__BUF_SEND] =
      a->in_place ? e->packed : (uint8_t *)(uintptr_t)a->send;
  return 0;
}

int crnet__exec_start(crnet_comm *c, crnet__schedule *s,
                      const crnet__exec_args *a, crnet_request **out) {
  uint32_t window = c->w->rounds_in_flight;
  bool independent = false;
  exec_call *e;
  int rc;

  *out = NULL;
  if (window < 1 || window > CRNET__MAX_ROUNDS_IN_FLIGHT)
    window = 1;
  /* An exchange holds a request per stream, a few KiB each: a call whose
   * schedule runs one round at a time needs one. */
  for (uint32_t k = 0; k < s->nrounds && !independent; k++)
    independent = s->rounds[k].independent;
  if (!independent)
    window = 1;
  e = (exec_call *)crnet__req_alloc(
      c, sizeof *e + sizeof(round_run) * (size_t)c->w->rounds_in_flight);
  if (e == NULL) {
    crnet__sched_free(s);
    crnet__memo_drop(a->memo);
    return CRNET_ENOMEM;
  }
  /* The request's memory may be reused: everything of the executor's
   * but the round state (round_start sets that) starts from zero. */
  memset((uint8_t *)e + sizeof e->req, 0,
         offsetof(exec_call, runs) - sizeof e->req);
  e->sched = *s;
  e->memo = a->memo;
  e->window = window;
  e->dt = a->dt;
  e->op = a->op;
  e->exclusive = a->exclusive;
  e->quiet = a->quiet;
  e->normalise = a->normalise;
  e->b.esize = crnet_datatype_size(a->dt);
  e->b.base[CRNET__BUF_RECV] = a->recv;
  e->b.base[CRNET__BUF_SEND] =
      a->in_place ? a->recv : (uint8_t *)(uintptr_t)a->send;
  e->b.base[CRNET__BUF_TEMP] = NULL;
  e->req.ops = &exec_ops;
  e->req.blocking = a->blocking;
  e->req.coll = (uint8_t)a->coll;
  e->req.sig = a->sig;
  e->req.call = a->call;
  rc = count_peers(e);
  if (rc == 0 && a->unpack_displs != NULL)
    rc = prepare_unpack(e, a);
  if (rc == 0 && s->temp_count > 0) {
    rc = get_temp(e, s->temp_count * e->b.esize);
    e->b.base[CRNET__BUF_TEMP] = e->temp;
  }
  if (rc == 0)
    rc = crnet__req_start(c, &e->req);
  if (rc != 0) {
    exec_release(&e->req);
    crnet__req_discard(&e->req);
    return rc;
  }
  *out = &e->req;
  return 0;
}
