/* The progress engine: requests in flight, who runs the loop, the waits,
 * and the progress thread. See request.h. */
#include "request.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "board.h"
#include "comm.h"
#include "link_shm.h"
#include "log.h"

/* Who runs the comm's loop (c->w->owner). */
enum { OWNER_NONE = 0, OWNER_CALLER, OWNER_THREAD };

/* Freed requests kept for reuse: a program that calls in a loop allocates
 * nothing, and a stale handle into the cache is caught by its state. */
#define REQ_CACHE_MAX 16

/* A request whose CRNET_TIMEOUT has run out gets this much more time once,
 * with the loop running, before it fails: a program that computed long
 * without a progress thread comes back to frames that have been waiting in
 * its sockets, and they count. */
#define TIMEOUT_GRACE_MS 10

static bool owned_by_me(const crnet_comm *c) {
  return c->w->owner != OWNER_NONE && pthread_equal(c->w->owner_tid, pthread_self());
}

/* The calling thread takes the loop (mu held; nobody owns it). */
static void take_locked(crnet_comm *c) {
  c->w->owner = OWNER_CALLER;
  c->w->owner_tid = pthread_self();
}

/* Sleeps on c->w->cv (mu held) until a completion, a callback's end or the
 * loop's release wakes it; wake_locked wakes only when someone sleeps. */
static void sleep_locked(crnet_comm *c) {
  c->w->cv_waiters++;
  pthread_cond_wait(&c->w->cv, &c->w->mu);
  c->w->cv_waiters--;
}

static void wake_locked(crnet_comm *c) {
  if (c->w->cv_waiters > 0)
    pthread_cond_broadcast(&c->w->cv);
}

/* Runs fn, the completion callback of r, on this thread (mu not held;
 * cb_busy counted by the caller under mu): a wait frees r only after. */
static void run_callback(crnet_comm *c, crnet_request *r, crnet_request_fn *fn,
                         void *arg) {
  fn(r, r->status, arg);
  pthread_mutex_lock(&c->w->mu);
  r->cb_busy--;
  wake_locked(c);
  pthread_mutex_unlock(&c->w->mu);
}

/* --- the list in flight ------------------------------------------------- */

crnet__req_peer *crnet__req_peer_find(crnet_request *r, int32_t peer) {
  uint32_t lo = 0, hi = r->npeers;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (r->peers[mid].rank < peer)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < r->npeers && r->peers[lo].rank == peer ? &r->peers[lo] : NULL;
}

bool crnet__req_gate_open(const crnet_request *r, int32_t peer, int dir) {
  if (r == NULL)
    return true;
  for (crnet_request *y = r->comm->w->run_head; y != NULL && y != r;
       y = y->next) {
    const crnet__req_peer *p;
    if (y->comm != r->comm)
      continue; /* the order is per comm: other comms' frames never meet
                   this one's receives (link.h, Comms) */
    p = crnet__req_peer_find(y, peer);
    if (p != NULL && (dir == 0 ? p->sends_left : p->recvs_left) > 0)
      return false;
  }
  return true;
}

crnet_request *crnet__req_oldest(const crnet_comm *c) {
  for (crnet_request *r = c->w->run_head; r != NULL; r = r->next)
    if (r->comm == c && !r->p2p)
      return r;
  return NULL;
}

crnet_request *crnet__req_find(const crnet_comm *c, uint64_t seq) {
  for (crnet_request *r = c->w->run_head; r != NULL; r = r->next)
    if (r->comm == c && !r->p2p && r->seq == seq)
      return r;
  return NULL;
}

uint32_t crnet__req_in_flight(const crnet_comm *c) { return c->in_flight; }

static void kick_owner(crnet_comm *c) {
  if (c->w->progress_handles)
    uv_async_send(&c->w->kick);
}

static void release_locked(crnet_comm *c);
static void thread_start_locked(crnet_comm *c);
static void move_on_locked(crnet_comm *c);

/* A request going into flight (mu held): valid, in `state`, no result and
 * no callback yet. */
static void prime(crnet_request *r, uint8_t state) {
  r->magic = CRNET__REQ_MAGIC;
  r->state = state;
  r->status = 0;
  r->cb_set = false;
  r->cb = NULL;
  r->cb_arg = NULL;
  r->cb_busy = 0;
}

int crnet__req_start(crnet_comm *c, crnet_request *r) {
  bool drive = false;
  pthread_mutex_lock(&c->w->mu);
  if (c->err != 0) {
    int err = c->err;
    pthread_mutex_unlock(&c->w->mu);
    return err;
  }
  if (r->blocking && owned_by_me(c)) {
    /* A completion callback (the engine runs it) may start calls, but a
     * blocking one would wait for the engine that waits for it. Refused
     * before it is numbered: nothing starts. */
    pthread_mutex_unlock(&c->w->mu);
    crnet__set_callmsg(c, "%s: a blocking call in a completion callback "
                          "would never return (start it with its "
                          "nonblocking twin instead)",
                       r->p2p ? "point-to-point"
                              : crnet_collective_name((crnet_collective)r->coll));
    return CRNET_EINVAL;
  }
  prime(r, CRNET__REQ_QUEUED);
  r->seq = r->p2p ? 0 : ++c->seq_issued;
  /* The first message in flight: a collective's frame parked at the head
   * of a link must not hold it back (link.h, drain_parked), so the next
   * pass of the engine looks at the parked frames again. */
  if (r->p2p && atomic_fetch_add(&c->w->p2p_live, 1) == 0)
    atomic_store(&c->w->recheck_asked, true);
  c->in_flight++;
  if (!r->blocking)
    c->w->in_flight_nb++;
  r->started = uv_hrtime();
  r->round = 0;
  r->waiting_link = false;
  r->next = NULL;
  r->prev = c->w->queue_tail;
  if (c->w->queue_tail != NULL)
    c->w->queue_tail->next = r;
  else
    c->w->queue_head = r;
  c->w->queue_tail = r;
  c->w->in_flight++;
  atomic_fetch_add_explicit(&c->w->queued, 1, memory_order_release);
  if (!r->blocking && c->w->progress_mode)
    thread_start_locked(c);
  if (owned_by_me(c)) {
    /* A completion callback starts a call: the pass it runs in begins it. */
  } else if (c->w->owner != OWNER_NONE) {
    kick_owner(c); /* its pass begins the request */
  } else if (!r->blocking && c->w->thread_running) {
    /* The progress thread begins it: the program goes back to computing
     * at once (writing and reading a large call's first messages here
     * would take the caller milliseconds). */
    pthread_cond_signal(&c->w->thread_cv);
  } else if (!r->blocking) {
    /* No progress thread: begin the call now, so that its first messages
     * leave before the program goes back to computing. A blocking call
     * begins it in its wait. */
    drive = true;
  }
  if (drive)
    move_on_locked(c);
  pthread_mutex_unlock(&c->w->mu);
  return 0;
}

/* --- the engine --------------------------------------------------------- */

/* r joins the end of the requests running (the owner's list). */
static void run_append(crnet__world *w, crnet_request *r) {
  r->prev = w->run_tail;
  r->next = NULL;
  if (w->run_tail != NULL)
    w->run_tail->next = r;
  else
    w->run_head = r;
  w->run_tail = r;
}

static void begin(crnet__world *w, crnet_request *r) {
  crnet_comm *c = r->comm;
  run_append(w, r);
  if (r->p2p)
    return; /* its advance asks for the link it needs */
  crnet__comm_begin_call(c, r->coll, r->seq, &r->call);
  if (c->board_slot >= 0 && !r->board)
    crnet__board_note_regular(c, r->seq, r->coll, &r->call);
  if (c->w->lazy)
    for (uint32_t i = 0; i < r->npeers; i++)
      crnet__lazy_want(c->w->comms[0],
                       crnet__world_rank(c, r->peers[i].rank));
}

static void complete(crnet_comm *wc, crnet_request *r) {
  crnet_request_fn *cb = NULL;
  crnet_comm *c = r->comm;
  (void)wc;
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    c->w->run_head = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  else
    c->w->run_tail = r->prev;
  if (!r->p2p) {
    c->done_seq = r->seq;
    c->done_coll = r->coll;
    c->done_round = r->round;
  }
  pthread_mutex_lock(&c->w->mu);
  if (r->ops->account != NULL)
    r->ops->account(r);
  r->state = CRNET__REQ_DONE;
  if (r->p2p)
    atomic_fetch_sub(&c->w->p2p_live, 1);
  c->w->completions++;
  c->w->in_flight--;
  if (!r->blocking)
    c->w->in_flight_nb--;
  c->in_flight--;
  r->prev = NULL;
  r->next = c->w->done_head;
  if (c->w->done_head != NULL)
    c->w->done_head->prev = r;
  c->w->done_head = r;
  if (r->cb_set) {
    cb = r->cb;
    r->cb_busy++;
    r->cb_tid = pthread_self();
  } else {
    /* With a callback, its end wakes the waiters (run_callback): a wait
     * for r would only wake now to find the callback running and sleep
     * again. */
    wake_locked(c);
  }
  pthread_mutex_unlock(&c->w->mu);
  if (cb != NULL)
    run_callback(c, r, cb, r->cb_arg);
}

static void arm_timeout(crnet_comm *c);

void crnet__progress(crnet_comm *c) {
  bool again;
  if (c->w->in_progress)
    return;
  /* Nothing moved since the last pass: every request is where it was
   * (the loop runs the engine twice per turn, and a spinning wait turns
   * it often; board calls of requests wait for posts, which are no I/O of
   * the loop's). */
  if (!c->w->progress_dirty && c->w->board_waiting == NULL &&
      atomic_load_explicit(&c->w->queued, memory_order_acquire) == 0 &&
      !atomic_load_explicit(&c->w->recheck_asked, memory_order_acquire) &&
      !atomic_load_explicit(&c->w->cancel_asked, memory_order_acquire))
    return;
  c->w->in_progress = true;
  if (atomic_exchange(&c->w->cancel_asked, false))
    c->w->progress_dirty = true; /* the cancelled request's advance looks */
  if (atomic_exchange(&c->w->recheck_asked, false)) {
    crnet__world_recheck_parked(c->w);
    crnet__p2p_check_orphans(c->w);
  }
  do {
    c->w->progress_dirty = false;
    again = false;
    while (atomic_load_explicit(&c->w->queued, memory_order_acquire) > 0) {
      crnet_request *r;
      pthread_mutex_lock(&c->w->mu);
      r = c->w->queue_head;
      if (r != NULL) {
        c->w->queue_head = r->next;
        if (c->w->queue_head != NULL)
          c->w->queue_head->prev = NULL;
        else
          c->w->queue_tail = NULL;
        r->state = CRNET__REQ_RUNNING;
        atomic_fetch_sub_explicit(&c->w->queued, 1, memory_order_relaxed);
      }
      pthread_mutex_unlock(&c->w->mu);
      if (r == NULL)
        break;
      begin(c->w, r);
    }
    for (crnet_request *r = c->w->run_head, *next; r != NULL; r = next) {
      next = r->next;
      if (r->ops->advance(r)) {
        complete(c, r);
        again = true;
        next = c->w->run_head; /* a younger call may post now */
      }
    }
  } while (again);
  arm_timeout(c);
  c->w->in_progress = false;
}

static void on_board_idle(uv_idle_t *h) { uv_idle_stop(h); }

/* Each turn of the loop, and each polling turn (one_turn), has read what
 * the links held: the small sends into rings since (p2p.c, send_now) were
 * not blind. */
static void on_progress_prepare(uv_prepare_t *h) {
  crnet_comm *c = h->data;
  uint64_t completed = c->w->completions;
  c->w->blind_sends = 0;
  crnet__progress(c);
  /* A request that completed in this pass (a board call, whose posts are
   * no event of the loop) has a waiter to return to: the loop must not
   * sleep now (an active idle handle: a zero poll timeout). Nor when a
   * board call of a request is about to complete: posts ring only a loop
   * that said it sleeps (board.h), and one whose posts came meanwhile
   * would sleep through them. */
  if (c->w->completions != completed ||
      (c->w->board_waiting != NULL && !c->w->loop_nowait &&
       !crnet__board_loop_may_sleep(c->w, true)))
    uv_idle_start(&c->w->board_idle, on_board_idle);
}
static void on_progress_check(uv_check_t *h) {
  crnet_comm *c = h->data;
  c->w->loop_seen_ms = uv_now(&c->w->loop);
  if (c->w->board_waiting != NULL)
    crnet__board_loop_may_sleep(c->w, false);
  crnet__progress(c);
}
/* Another thread queued a request (the check handle's pass begins it), or
 * wants the loop (uv_run returns, and the owner looks), or aborts the job
 * while this thread waits (crnet__abort_by_owner). */
static void on_kick(uv_async_t *h) {
  crnet_comm *c = h->data;
  int code = 0, revoke;
  bool abort_now;
  pthread_mutex_lock(&c->w->mu);
  abort_now = c->w->abort_asked;
  code = c->w->abort_asked_code;
  c->w->abort_asked = false;
  revoke = c->w->revoke_asked;
  c->w->revoke_asked = -1;
  pthread_mutex_unlock(&c->w->mu);
  if (revoke >= 0 && c->w->comms[revoke] != NULL) {
    crnet__comm_revoke_now(c->w->comms[revoke]);
    pthread_mutex_lock(&c->w->mu);
    wake_locked(c);
    pthread_mutex_unlock(&c->w->mu);
  }
  if (!abort_now)
    return;
  crnet__comm_abort_now(c, code);
  pthread_mutex_lock(&c->w->mu);
  wake_locked(c);
  pthread_mutex_unlock(&c->w->mu);
}

bool crnet__loop_owned_by_me(crnet_comm *c) {
  bool mine;
  pthread_mutex_lock(&c->w->mu);
  mine = owned_by_me(c);
  pthread_mutex_unlock(&c->w->mu);
  return mine;
}

void crnet__abort_by_owner(crnet_comm *c, int code) {
  pthread_mutex_lock(&c->w->mu);
  if (c->err == 0 && c->w->owner != OWNER_NONE && !owned_by_me(c)) {
    c->w->abort_asked = true;
    c->w->abort_asked_code = code;
    kick_owner(c);
    while (c->err == 0 && c->w->abort_asked && c->w->owner != OWNER_NONE)
      sleep_locked(c);
    c->w->abort_asked = false;
  }
  pthread_mutex_unlock(&c->w->mu);
}

void crnet__revoke_by_owner(crnet_comm *c) {
  crnet__world *w = c->w;
  pthread_mutex_lock(&w->mu);
  if (c->err != CRNET_EREVOKED && w->owner != OWNER_NONE && !owned_by_me(c)) {
    w->revoke_asked = (int)c->ctx;
    kick_owner(c);
    while (c->err != CRNET_EREVOKED && w->revoke_asked >= 0 &&
           w->owner != OWNER_NONE && !w->torn_down)
      sleep_locked(c);
    w->revoke_asked = -1;
  }
  pthread_mutex_unlock(&w->mu);
}

/* --- CRNET_TIMEOUT -------------------------------------------------------- */

/* "rank 3 on host (1.2.3.4:5678), rank 5 ...": the peers this rank still
 * waits for, those it receives from first (a send waits for a peer only
 * once its socket buffers are full). */
void crnet__list_awaited(crnet_comm *c, char *buf, size_t n) {
  size_t len = 0;
  int listed = 0, more = 0;
  buf[0] = '\0';
  for (int pass = 0; pass < 2 && listed == 0; pass++)
    for (int r = 0; r < c->size; r++) {
      bool waiting = false;
      char who[160];
      int j = crnet__world_rank(c, r);
      for (uint32_t k = 0; k < c->w->streams && r != c->rank; k++) {
        crnet__peer *p = *crnet__comm_link(c, j, (int)k);
        if (p == NULL || p->closed)
          continue;
        waiting = waiting ||
                  (pass == 0 ? crnet__link_recv_posted(&p->link, c->ctx)
                             : crnet__link_busy(&p->link));
      }
      if (!waiting)
        continue;
      if (listed == 6) {
        more++;
        continue;
      }
      crnet__describe_rank(c, r, who, sizeof who);
      if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "%s%s%s",
                                listed > 0 ? ", " : "",
                                pass == 1 ? "sending to " : "", who);
      listed++;
    }
  if (more > 0 && len < n)
    snprintf(buf + len, n - len, " and %d more", more);
  if (listed == 0)
    snprintf(buf, n, "no peer (this rank's own work)");
}

/* The request's CRNET_TIMEOUT ran out: the job fails, naming whom this
 * rank was waiting for, so that the rank that never called is found. */
static void fail_timed_out(crnet_request *r) {
  crnet_comm *c = r->comm;
  char awaited[400];
  if (r->waiting_link) {
    char who[160];
    crnet__describe_rank(c, r->link_peer, who, sizeof who);
    snprintf(awaited, sizeof awaited, "%s (no link to it yet)", who);
  } else if (!r->board ||
             !crnet__board_awaited(c, r->seq, awaited, sizeof awaited)) {
    crnet__list_awaited(c, awaited, sizeof awaited);
  }
  crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                   "rank %d timed out in %s #%" PRIu64 " round %" PRIu32
                   " after %.3g s (CRNET_TIMEOUT) waiting for %s",
                   c->rank, crnet_collective_name((crnet_collective)r->coll),
                   crnet__call_number(c, r->seq), r->round,
                   (double)c->w->coll_timeout_ms / 1000.0, awaited);
}

/* The oldest request in flight whose comm has not failed: requests begin
 * in the order they were started, whatever their comm. */
static crnet_request *oldest_live(const crnet__world *w) {
  for (crnet_request *r = w->run_head; r != NULL; r = r->next)
    if (r->comm->err == 0 && !r->p2p)
      return r;
  return NULL;
}

/* Whether some request in flight may still complete: one of a comm that
 * has not failed. */
static bool any_live(const crnet__world *w) {
  for (crnet_request *r = w->run_head; r != NULL; r = r->next)
    if (r->comm->err == 0)
      return true;
  return false;
}

static bool timeout_is(const crnet__world *w, const crnet_request *r) {
  return w->timeout_req == r && w->timeout_seq == r->seq;
}

static void on_coll_timer(uv_timer_t *t) {
  crnet_comm *c = t->data;
  crnet_request *r = oldest_live(c->w);
  uint64_t now = uv_hrtime();
  if (r == NULL)
    return;
  if (now - r->started < c->w->coll_timeout_ms * 1000000) {
    /* That one completed (crnet__progress armed the next), or the timer
     * came early (the loop's clock lags behind after turns spent outside
     * it): the oldest call's deadline is still ahead. */
    arm_timeout(c);
    return;
  }
  if (!timeout_is(c->w, r)) {
    c->w->timeout_req = r;
    c->w->timeout_seq = r->seq;
    uv_timer_start(&c->w->coll_timer, on_coll_timer, TIMEOUT_GRACE_MS, 0);
    return;
  }
  fail_timed_out(r);
  crnet__progress(c);
}

/* The oldest request's deadline is the nearest: requests are numbered as
 * they start. */
static void arm_timeout(crnet_comm *c) {
  crnet_request *r = oldest_live(c->w);
  uint64_t now, due_ms;
  if (c->w->coll_timeout_ms == 0 || !c->w->progress_handles)
    return;
  if (r == NULL) {
    uv_timer_stop(&c->w->coll_timer);
    return;
  }
  if (timeout_is(c->w, r) && uv_is_active((uv_handle_t *)&c->w->coll_timer))
    return; /* in its grace */
  /* The timer counts from the loop's clock, which lags behind the real one
   * when this pass runs outside the loop (a light turn, see poll_turn):
   * brought up to date, so that the timer does not come early. */
  uv_update_time(&c->w->loop);
  now = uv_hrtime();
  due_ms = (r->started + c->w->coll_timeout_ms * 1000000 > now)
               ? (r->started + c->w->coll_timeout_ms * 1000000 - now + 999999) /
                     1000000
               : 0;
  uv_timer_start(&c->w->coll_timer, on_coll_timer, due_ms, 0);
}

/* --- running the loop -------------------------------------------------- */

static void on_deadline(uv_timer_t *t) {
  crnet_comm *c = t->data;
  c->w->deadline_passed = true;
}

/* Polls the loop without sleeping until done(arg) comes true (returns true)
 * or c->w->spin_ns pass with nothing read or written on any link (false).
 *
 * The spin adapts, because what decides whether it pays is not only the
 * ranks of this job: other processes may want the cores too, and then a
 * spinning rank delays the very peer it waits for. Each spin that catches
 * its event raises spin_score; a wait whose spin ran out and that then
 * ended within SPIN_LONG_WAIT spins lowers it twice as much (crnet__comm_
 * run_until); while the score is not positive the wait sleeps at once, and
 * only every SPIN_PROBE_EVERY-th wait spins again to see whether things
 * changed. A wait that lasts longer than that says nothing against the
 * spin: no spin could have caught it, and the spin cost at most
 * 1/SPIN_LONG_WAIT of it (a sender waiting for the answer to a window of
 * large messages while the receiver drains them: without this rule the
 * sender stopped spinning and slept between its writes, 4 MiB messages at
 * 0.88x the bandwidth of an unbounded spin). */
#define SPIN_SCORE_MAX CRNET__SPIN_SCORE_MAX
#define SPIN_PROBE_EVERY 64
#define SPIN_LONG_WAIT 4

/* One turn of the loop that does not sleep: shared-memory links then
 * announce no sleep to their peers (link.h loop_nowait). */
static int run_nowait(crnet_comm *c) {
  int alive;
  c->w->loop_nowait = true;
  alive = uv_run(&c->w->loop, UV_RUN_NOWAIT);
  c->w->loop_nowait = false;
  return alive;
}

static bool spin_worth_it(crnet_comm *c) {
  if (c->w->spin_score > 0)
    return true;
  if (++c->w->spin_skipped < SPIN_PROBE_EVERY)
    return false;
  c->w->spin_skipped = 0;
  return true;
}

/* Light turns. A turn of the loop without sleeping costs an epoll_wait
 * system call and two clock reads, several times what a small message
 * takes through a shared-memory ring (about 0.3 of a µs against a few tens
 * of ns on the 2-core VM). So a polling wait with links to ranks of this
 * node pumps their rings itself and passes the engine over the requests
 * (a light turn), and runs the loop itself only now and then: TCP links,
 * timers (CRNET_TIMEOUT) and other threads' kicks are still seen soon, and
 * the loop's turn also does everything a light turn does.
 *
 * How often. A start or a test (crnet__loop_turn) makes one turn per
 * call, and every LIGHT_TURNS-th of those is the loop's: a rank that only
 * sends learns of a peer's ABORT within a bounded number of sends (p2p.c,
 * SEND_NOW_BLIND_MAX). A polling wait goes by the clock instead: the
 * loop's turn once full_turn_ns have passed since the last one, or after
 * wait_light_turns light ones (waits so short that they never look at the
 * clock, a ping-pong's when the peer answers within CLOCK_TURNS turns,
 * must not starve the loop either). An epoll_wait costs far more here than
 * on bare metal (a system call of a paravirtualised guest), and a wait for
 * an 8-byte message is some 35 light turns. crbench --p2p latency, 8 B,
 * 3 interleaved rounds on the 2-core VM, the period set by hand in a
 * scratch build (docs/PERFORMANCE-SHM.md): the loop every 8th turn 1.29 µs,
 * every 4 µs 1.10, every 16 µs 0.88, every 100 µs 0.82, never 0.79.
 * Where every peer is on this node the loop carries no message of a
 * collective or a send, only failures, timers and links being set up,
 * which a tenth of a millisecond does not delay; where some come over TCP,
 * their messages wait up to FULL_TURN_MIXED_NS in a spin (a loopback
 * round trip alone takes some 20 µs). */
#define LIGHT_TURNS 8
#define FULL_TURN_NODE_NS 100000
#define FULL_TURN_MIXED_NS 4000

static bool all_on_node(const crnet__world *w) {
  return w->n_node_ranks >= w->size - 1;
}

static uint64_t full_turn_ns(const crnet__world *w) {
  return all_on_node(w) ? FULL_TURN_NODE_NS : FULL_TURN_MIXED_NS;
}

static uint32_t wait_light_turns(const crnet__world *w) {
  return all_on_node(w) ? 4096 : 256;
}

static void light_turn(crnet_comm *c) {
  crnet__world *w = c->w;
  for (int32_t i = 0; i < w->n_node_ranks; i++)
    for (uint32_t k = 0; k < w->streams; k++) {
      crnet__peer *pr = w->peers[(size_t)w->node_ranks[i] * w->streams + k];
      if (pr != NULL && pr->link.shm != NULL)
        crnet__link_shm_pump(&pr->link);
    }
  crnet__progress(c);
}

/* A light turn, or the loop's without sleeping. Returns what uv_run does
 * (1 after a light turn: the loop's own turns say when it has nothing
 * left). */
static int turn(crnet_comm *c, bool light) {
  c->w->blind_sends = 0;
  if (light) {
    light_turn(c);
    return 1;
  }
  c->w->light_turns = 0;
  c->w->full_turn_due = false;
  return run_nowait(c);
}

/* A start's or a test's turn: the loop's every LIGHT_TURNS-th. */
static int one_turn(crnet_comm *c) {
  return turn(c, c->w->n_node_ranks > 0 && ++c->w->light_turns < LIGHT_TURNS);
}

/* One turn of polling: light unless the loop's is due (see "How often"
 * above); *news becomes true when the links moved since *seen. spin_ns
 * bounds the time without progress, not the wait: while a large message
 * streams in (or out) every read is news, and sleeping between the reads
 * would cost a wake-up each. */
static int poll_turn(crnet_comm *c, uint64_t *seen, bool *news) {
  int alive = turn(c, c->w->n_node_ranks > 0 && !c->w->full_turn_due &&
                          ++c->w->light_turns < wait_light_turns(c->w));
  if (c->w->io_count != *seen) {
    *seen = c->w->io_count;
    *news = true;
  } else if (c->w->spin_yield) {
    /* With more ranks than cores, the peer this rank waits for may need
     * this very core: let it have it, but only after a turn that found
     * nothing. A turn that moved something may have finished what the
     * caller waits for, or given it more to do at once (the next round's
     * send): yielding then hands the core away for a whole turn of another
     * rank just when this one can go on (measured: 17 context switches per
     * 8-byte allreduce and barrier at p = 4 on 2 cores, against 7 for Open
     * MPI, which also yields only when its progress found nothing). */
    sched_yield();
  }
  return alive;
}

/* A light turn takes a few tens of ns, and a clock read 19 ns on the
 * 2-core VM: the spin looks at the clock every CLOCK_TURNS turns only (the
 * bound is tens of µs). */
#define CLOCK_TURNS 8

static bool spin(crnet_comm *c, bool (*done)(void *), void *arg) {
  /* The quiet time counts from the first look at the clock, CLOCK_TURNS
   * turns in (most small waits end before it: no read at all). */
  uint64_t quiet_since = 0, seen = c->w->io_count;
  uint32_t turns = 0;
  bool news = false;
  for (;;) {
    poll_turn(c, &seen, &news);
    if (done(arg)) {
      if (c->w->spin_score < SPIN_SCORE_MAX)
        c->w->spin_score++;
      return true;
    }
    if (c->w->deadline_passed)
      return false;
    if (++turns % CLOCK_TURNS == 0) {
      uint64_t now = uv_hrtime();
      if (now - c->w->last_full_turn >= full_turn_ns(c->w)) {
        c->w->last_full_turn = now;
        c->w->full_turn_due = true;
      }
      if (news || quiet_since == 0)
        quiet_since = now;
      else if (now - quiet_since >= c->w->spin_ns)
        return false;
      news = false;
    }
  }
}

/* A wait whose first spin ran out at `gave_up` ended now (see spin). */
static void score_spin_in_vain(crnet_comm *c, uint64_t gave_up) {
  if (uv_hrtime() - gave_up >= SPIN_LONG_WAIT * c->w->spin_ns)
    return;
  if (c->w->spin_score > -SPIN_SCORE_MAX)
    c->w->spin_score -= 2;
}

/* The loop has no handle left, yet a posted receive may be matched by a
 * send another thread of this process has not started yet (a job of one
 * has no link to keep the loop alive): sleeps until a thread kicks the
 * loop (crnet__req_start does when it queues a request), holding the kick
 * handle, which otherwise never keeps the loop alive. False if nothing
 * can come that way: the loop is stuck. */
static bool wait_for_kick(crnet_comm *c) {
  if (!c->w->progress_handles || !crnet__p2p_awaits_local(c->w))
    return false;
  uv_ref((uv_handle_t *)&c->w->kick);
  uv_run(&c->w->loop, UV_RUN_ONCE);
  uv_unref((uv_handle_t *)&c->w->kick);
  return true;
}

int crnet__comm_run_until(crnet_comm *c, bool (*done)(void *), void *arg,
                          uint64_t timeout_ms) {
  return crnet__comm_run_until_hooked(c, done, arg, timeout_ms, NULL);
}

int crnet__comm_run_until_hooked(crnet_comm *c, bool (*done)(void *), void *arg,
                                 uint64_t timeout_ms,
                                 bool (*may_sleep)(void *, bool)) {
  int rc = 0;
  uint64_t gave_up = 0; /* when this wait's first spin ran out, or 0 */
  c->w->deadline_passed = false;
  if (timeout_ms > 0) {
    /* From now, not from the loop's last turn (the program may have
     * computed for a long while since, or waited in light turns). */
    uv_update_time(&c->w->loop);
    uv_timer_start(&c->w->deadline, on_deadline, timeout_ms, 0);
  }
  while (!done(arg)) {
    if (c->w->deadline_passed) {
      rc = CRNET_ETIMEDOUT;
      break;
    }
    /* Bounded: after spin_ns without progress the process sleeps. */
    if (c->w->spin_ns > 0 && spin_worth_it(c)) {
      if (spin(c, done, arg))
        break;
      if (gave_up == 0)
        gave_up = uv_hrtime();
    }
    /* What done() waits for may come without an event of the loop (a board
     * post): the hook announces the sleep to whoever would post it, and
     * says no when it came meanwhile. */
    if (may_sleep != NULL && !may_sleep(arg, true)) {
      may_sleep(arg, false);
      continue;
    }
    /* Sleeps in epoll until something happens. A loop with nothing left to
     * wait for cannot make progress: that is a bug, not a reason to spin. */
    int alive = uv_run(&c->w->loop, UV_RUN_ONCE);
    if (may_sleep != NULL)
      may_sleep(arg, false);
    if (alive == 0 && !done(arg)) {
      /* Not stuck if the pass began a request another thread queued
       * meanwhile and the loop has work again (see thread_main). */
      crnet__progress(c);
      if (done(arg) || uv_loop_alive(&c->w->loop) || wait_for_kick(c))
        continue;
      rc = CRNET_EIO;
      break;
    }
  }
  if (gave_up != 0)
    score_spin_in_vain(c, gave_up);
  uv_timer_stop(&c->w->deadline);
  return rc;
}

/* --- owning the loop ------------------------------------------------------ */

/* Gives the loop back: to a thread that waits for it or leans on the
 * progress thread (it takes the loop then), else to the progress thread
 * while nonblocking requests are in flight. */
static void release_locked(crnet_comm *c) {
  c->w->owner = OWNER_NONE;
  if (c->w->wanting > 0 || atomic_load(&c->w->leaning) > 0)
    pthread_cond_broadcast(&c->w->cv);
  else if (c->w->thread_running && c->w->in_flight_nb > 0)
    pthread_cond_signal(&c->w->thread_cv);
}

/* A thread that asked for the loop (wanting) and was woken no longer wants
 * it: its request may have completed meanwhile, and then it returns
 * without taking the loop. The progress thread gave the loop up for it and
 * sleeps while anyone wants it: with requests still in flight, it must
 * have the loop back, or they would wait for a wake-up that never comes
 * (seen: a torch Work whose message had arrived never completed). A thread
 * that goes on to take the loop itself only wakes the progress thread in
 * vain. */
static void stop_wanting_locked(crnet_comm *c) {
  __atomic_sub_fetch(&c->w->wanting, 1, __ATOMIC_RELAXED);
  if (c->w->wanting == 0 && atomic_load(&c->w->leaning) == 0 &&
      c->w->owner == OWNER_NONE && c->w->thread_running &&
      c->w->in_flight_nb > 0)
    pthread_cond_signal(&c->w->thread_cv);
}

/* A waiter that leaned on the progress thread (see wait_any_locked) was
 * woken: as for one that stops wanting the loop, a release made for it
 * must not leave the nonblocking requests without the thread. */
static void stop_leaning_locked(crnet_comm *c) {
  if (atomic_fetch_sub(&c->w->leaning, 1) == 1 && c->w->wanting == 0 &&
      c->w->owner == OWNER_NONE && c->w->thread_running &&
      c->w->in_flight_nb > 0)
    pthread_cond_signal(&c->w->thread_cv);
}

/* A nonblocking call's start or a test, with nobody running the loop:
 * one turn, as a polling wait's (one_turn): with links to ranks of this
 * node mostly a light one, since a program that starts or tests many
 * small calls in a row (a window of isends) would otherwise pay an
 * epoll_wait and two clock reads for each, several times what a small
 * message costs through a ring. Also p2p.c's small blocking send on
 * shared memory (send_now), which holds the loop already
 * (crnet__loop_take_if_idle). The loop is taken. */
void crnet__loop_turn(crnet_comm *c) {
  if (c->w->lazy)
    crnet__lazy_resume(c);
  crnet__progress(c);
  one_turn(c);
}

/* With the loop free (mu held): takes it, moves every request on without
 * sleeping (one pass of the engine and one turn of the loop), gives it
 * back; mu is held again on return. What a start without a progress
 * thread and crnet_test do. */
static void move_on_locked(crnet_comm *c) {
  take_locked(c);
  pthread_mutex_unlock(&c->w->mu);
  crnet__loop_turn(c);
  pthread_mutex_lock(&c->w->mu);
  release_locked(c);
}

/* Waits (mu held) until the loop is free and takes it. */
static void acquire_locked(crnet_comm *c) {
  __atomic_add_fetch(&c->w->wanting, 1, __ATOMIC_RELAXED);
  while (c->w->owner != OWNER_NONE) {
    /* The progress thread gives the loop up when kicked; so does a
     * blocking board call that waits with it (board.c: it hands its call
     * over as a request), which a kick wakes from its sleep in epoll. */
    kick_owner(c);
    sleep_locked(c);
  }
  __atomic_sub_fetch(&c->w->wanting, 1, __ATOMIC_RELAXED);
  take_locked(c);
}

void crnet__loop_acquire(crnet_comm *c) {
  pthread_mutex_lock(&c->w->mu);
  acquire_locked(c);
  pthread_mutex_unlock(&c->w->mu);
  if (c->w->lazy)
    crnet__lazy_resume(c);
}

bool crnet__loop_take_if_idle(crnet_comm *c) {
  bool took = false;
  pthread_mutex_lock(&c->w->mu);
  if (c->err == 0 && c->w->owner == OWNER_NONE && c->w->wanting == 0 &&
      atomic_load_explicit(&c->w->queued, memory_order_acquire) == 0 &&
      atomic_load(&c->w->p2p_live) == 0) {
    take_locked(c);
    took = true;
  }
  pthread_mutex_unlock(&c->w->mu);
  return took;
}

bool crnet__loop_wanted(const crnet_comm *c) {
  return __atomic_load_n(&c->w->wanting, __ATOMIC_RELAXED) > 0;
}

void crnet__req_adopt(crnet_comm *c, crnet_request *r, uint64_t seq,
                      uint64_t started) {
  pthread_mutex_lock(&c->w->mu);
  prime(r, CRNET__REQ_RUNNING);
  r->blocking = true;
  r->seq = seq;
  r->started = started;
  r->round = 0;
  r->waiting_link = false;
  c->in_flight++;
  c->w->in_flight++;
  pthread_mutex_unlock(&c->w->mu);
  run_append(c->w, r);
  c->w->progress_dirty = true;
}

int crnet__loop_take_for_call(crnet_comm *c, uint64_t *seq) {
  int rc;
  pthread_mutex_lock(&c->w->mu);
  if ((rc = c->err) == 0 && owned_by_me(c))
    rc = CRNET_EINVAL;
  if (rc == 0 && (c->w->owner != OWNER_NONE || c->w->wanting > 0))
    rc = CRNET__LOOP_BUSY;
  if (rc == 0) {
    take_locked(c);
    *seq = ++c->seq_issued;
  }
  pthread_mutex_unlock(&c->w->mu);
  if (rc == 0 && c->w->lazy)
    crnet__lazy_resume(c);
  return rc;
}

void crnet__loop_release(crnet_comm *c) {
  pthread_mutex_lock(&c->w->mu);
  release_locked(c);
  pthread_mutex_unlock(&c->w->mu);
}

/* The loop has nothing left that could complete what is in flight: a bug,
 * reported as one rather than a hang. */
static void fail_stuck(crnet_comm *c) {
  crnet__world_fail_all(c->w, CRNET_EIO, -1,
                        "rank %d: %u call(s) in flight but nothing left to "
                        "wait for (a bug in crnet)",
                        c->w->rank, c->w->in_flight);
}

/* --- the progress thread --------------------------------------------------- */

static void *thread_main(void *arg) {
  crnet_comm *c = arg;
  pthread_mutex_lock(&c->w->mu);
  for (;;) {
    while (!c->w->thread_quit &&
           (c->w->owner != OWNER_NONE || c->w->wanting > 0 ||
            c->w->in_flight_nb == 0))
      pthread_cond_wait(&c->w->thread_cv, &c->w->mu);
    if (c->w->thread_quit)
      break;
    c->w->owner = OWNER_THREAD;
    c->w->owner_tid = pthread_self();
    pthread_mutex_unlock(&c->w->mu);
    if (c->w->lazy)
      crnet__lazy_resume(c);
    uint64_t quiet_since = uv_hrtime(), seen = c->w->io_count;
    bool news = false;
    for (;;) {
      /* No spinning while the program computes: a thread that polls would
       * take its core. A waiter asleep on this thread (leaning) is
       * different: it waits, and polls here as it would in its own wait,
       * for as long (spin_ns without news). */
      int alive;
      crnet__progress(c);
      if (atomic_load_explicit(&c->w->leaning, memory_order_relaxed) > 0 &&
          uv_hrtime() - quiet_since < c->w->spin_ns) {
        alive = poll_turn(c, &seen, &news);
        if (news) {
          quiet_since = uv_hrtime();
          news = false;
        }
      } else {
        alive = uv_run(&c->w->loop, UV_RUN_ONCE);
        seen = c->w->io_count;
        quiet_since = uv_hrtime();
      }
      pthread_mutex_lock(&c->w->mu);
      if (c->w->thread_quit || c->w->wanting > 0 || c->w->in_flight_nb == 0)
        break;
      pthread_mutex_unlock(&c->w->mu);
      if (!alive) {
        /* The pass may begin a request queued meanwhile, whose receives
         * bring the links' reading back: stuck only if it did not. */
        crnet__progress(c);
        if (!uv_loop_alive(&c->w->loop) && any_live(c->w) &&
            !wait_for_kick(c))
          fail_stuck(c);
      }
    }
    release_locked(c);
  }
  pthread_mutex_unlock(&c->w->mu);
  return NULL;
}

/* Starts the progress thread at the first nonblocking call (mu held): a
 * program that makes only blocking calls never has one. */
static void thread_start_locked(crnet_comm *c) {
  pthread_attr_t attr;
  if (c->w->thread_running || c->w->thread_quit)
    return;
  /* The default stack: the thread runs the program's own code too (user
   * reduction operators, completion callbacks), and untouched stack pages
   * cost nothing. */
  pthread_attr_init(&attr);
  /* The thread works for the world comm, which outlives every other. */
  if (pthread_create(&c->w->thread, &attr, thread_main, c->w->comms[0]) ==
      0) {
    c->w->thread_running = true;
#if defined(__linux__)
    pthread_setname_np(c->w->thread, "crnet-progress");
#endif
    if (c->w->owner == OWNER_NONE && c->w->in_flight_nb > 0)
      pthread_cond_signal(&c->w->thread_cv);
  } else {
    crnet__log("cannot start the progress thread; requests progress inside "
                "crnet calls only");
    c->w->progress_mode = 0;
  }
  pthread_attr_destroy(&attr);
}

void crnet__progress_stop(crnet_comm *c) {
  bool join;
  pthread_mutex_lock(&c->w->mu);
  c->w->thread_quit = true;
  join = c->w->thread_running;
  c->w->thread_running = false;
  pthread_cond_broadcast(&c->w->thread_cv);
  if (c->w->owner == OWNER_THREAD)
    kick_owner(c);
  pthread_mutex_unlock(&c->w->mu);
  if (join)
    pthread_join(c->w->thread, NULL);
}

/* --- set-up ------------------------------------------------------------------ */

int crnet__progress_init(crnet_comm *c) {
  if (uv_prepare_init(&c->w->loop, &c->w->progress_prepare) != 0 ||
      uv_check_init(&c->w->loop, &c->w->progress_check) != 0 ||
      uv_async_init(&c->w->loop, &c->w->kick, on_kick) != 0 ||
      uv_timer_init(&c->w->loop, &c->w->coll_timer) != 0 ||
      uv_idle_init(&c->w->loop, &c->w->board_idle) != 0)
    return CRNET_EIO;
  c->w->progress_prepare.data = c;
  c->w->progress_check.data = c;
  c->w->kick.data = c;
  c->w->coll_timer.data = c;
  /* None of them keeps the loop alive: a wait with nothing else to wait
   * for is a bug that crnet__comm_run_until reports. The engine runs
   * before the loop sleeps (after the write callbacks of the pending
   * phase) and after it polled. */
  uv_prepare_start(&c->w->progress_prepare, on_progress_prepare);
  uv_check_start(&c->w->progress_check, on_progress_check);
  uv_unref((uv_handle_t *)&c->w->progress_prepare);
  uv_unref((uv_handle_t *)&c->w->progress_check);
  uv_unref((uv_handle_t *)&c->w->kick);
  uv_unref((uv_handle_t *)&c->w->coll_timer);
  c->w->progress_handles = true;
  return 0;
}

void crnet__progress_close(crnet_comm *c) {
  if (!c->w->progress_handles)
    return;
  c->w->progress_handles = false;
  uv_close((uv_handle_t *)&c->w->progress_prepare, NULL);
  uv_close((uv_handle_t *)&c->w->progress_check, NULL);
  uv_close((uv_handle_t *)&c->w->kick, NULL);
  uv_close((uv_handle_t *)&c->w->coll_timer, NULL);
  uv_close((uv_handle_t *)&c->w->board_idle, NULL);
}

/* --- requests: freeing ------------------------------------------------------ */

/* Takes a complete request off the done list and frees it (mu held; let
 * go of while the layer above releases its part, which takes mu itself). */
static void free_locked(crnet_comm *c, crnet_request *r) {
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    c->w->done_head = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  r->state = CRNET__REQ_FREE;
  if (r->ops->release != NULL) {
    pthread_mutex_unlock(&c->w->mu);
    r->ops->release(r);
    pthread_mutex_lock(&c->w->mu);
  }
  if (c->w->req_cached < REQ_CACHE_MAX) {
    r->next = c->w->req_cache;
    c->w->req_cache = r;
    c->w->req_cached++;
  } else {
    r->magic = 0;
    free(r);
  }
}

crnet_request *crnet__req_alloc(crnet_comm *c, size_t size) {
  crnet_request *r = NULL, **at;
  pthread_mutex_lock(&c->w->mu);
  for (at = &c->w->req_cache; *at != NULL; at = &(*at)->next)
    if ((*at)->alloc_size >= size) {
      r = *at;
      *at = r->next;
      c->w->req_cached--;
      break;
    }
  pthread_mutex_unlock(&c->w->mu);
  if (r == NULL) {
    r = crnet__calloc(1, size);
    if (r == NULL)
      return NULL;
    r->alloc_size = size;
  } else {
    /* Only the runtime's part: the layer above sets its own (and a
     * request's tail of round state can be tens of KiB). */
    size_t keep = r->alloc_size;
    memset(r, 0, sizeof *r);
    r->alloc_size = keep;
  }
  r->comm = c;
  r->state = CRNET__REQ_FREE;
  return r;
}

void crnet__req_discard(crnet_request *r) {
  crnet_comm *c = r->comm;
  pthread_mutex_lock(&c->w->mu);
  r->state = CRNET__REQ_FREE;
  if (c->w->req_cached < REQ_CACHE_MAX) {
    r->next = c->w->req_cache;
    c->w->req_cache = r;
    c->w->req_cached++;
    r = NULL;
  }
  pthread_mutex_unlock(&c->w->mu);
  free(r);
}

void crnet__req_free_unwaited_of(crnet_comm *c) {
  pthread_mutex_lock(&c->w->mu);
  for (crnet_request *r = c->w->done_head, *next; r != NULL; r = next) {
    next = r->next;
    if (r->comm == c && r->cb_busy == 0) {
      free_locked(c, r);
      next = c->w->done_head; /* free_locked let go of mu: start over */
    }
  }
  pthread_mutex_unlock(&c->w->mu);
}

void crnet__req_free_unwaited(crnet_comm *c) {
  pthread_mutex_lock(&c->w->mu);
  while (c->w->done_head != NULL)
    free_locked(c, c->w->done_head);
  while (c->w->req_cache != NULL) {
    crnet_request *r = c->w->req_cache;
    c->w->req_cache = r->next;
    r->magic = 0;
    free(r);
  }
  c->w->req_cached = 0;
  pthread_mutex_unlock(&c->w->mu);
}

/* --- waiting ---------------------------------------------------------------- */

/* A request handle as the program gives it: 0, or CRNET_EINVAL with the
 * reason. */
static int check_handle(const crnet_request *r, const char *what) {
  if (r == NULL) {
    crnet__set_callmsg(NULL, "%s: the request is NULL (completed "
                                "requests are set to NULL by their wait)",
                          what);
    return CRNET_EINVAL;
  }
  if (r->magic != CRNET__REQ_MAGIC) {
    crnet__set_callmsg(NULL, "%s: not a request", what);
    return CRNET_EINVAL;
  }
  return 0;
}

/* The same for a handle that is a request (mu held): one freed by a wait
 * stays in the comm's cache for a while, and is refused. */
static int check_live_locked(const crnet_request *r, const char *what) {
  if (r->state != CRNET__REQ_FREE)
    return 0;
  crnet__set_callmsg(r->comm, "%s: not a request in flight (already "
                              "completed and freed by a wait?)",
                     what);
  return CRNET_EINVAL;
}

/* A request that failed with a reason of its own: the waiting thread's
 * crnet_comm_errmsg says it. */
static void note_why(crnet_comm *c, const crnet_request *r, int status) {
  if (status != 0 && r->why != NULL)
    crnet__set_callmsg(r->comm != NULL ? r->comm : c, "%s", r->why);
}

/* check_handle, then c->w->mu taken and check_live_locked: 0 with the lock
 * held, or the error with it released. */
static int lock_live(const crnet_request *r, const char *what) {
  int rc = check_handle(r, what);
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&r->comm->w->mu);
  if ((rc = check_live_locked(r, what)) != 0)
    pthread_mutex_unlock(&r->comm->w->mu);
  return rc;
}

static bool complete_and_idle(const crnet_request *r) {
  return r->state == CRNET__REQ_DONE && r->cb_busy == 0;
}

typedef struct any_of {
  crnet_request **reqs;
  int n;
} any_of;

static bool any_done(void *arg) {
  any_of *a = arg;
  for (int i = 0; i < a->n; i++)
    if (a->reqs[i] != NULL && a->reqs[i]->state == CRNET__REQ_DONE)
      return true;
  return false;
}

/* Runs the loop (owned by this thread) until one of a's requests is
 * complete. */
static void drive(crnet_comm *c, any_of *a) {
  if (c->w->lazy)
    crnet__lazy_resume(c);
  crnet__progress(c);
  while (!any_done(a)) {
    if (crnet__comm_run_until(c, any_done, a, 0) != 0 && !any_done(a)) {
      crnet__progress(c);
      if (!any_done(a) && any_live(c->w))
        fail_stuck(c);
      crnet__progress(c);
      if (!any_done(a) && uv_run(&c->w->loop, UV_RUN_ONCE) == 0) {
        crnet__progress(c);
        if (!any_done(a))
          break; /* nothing can ever move: give up rather than spin */
      }
    }
  }
}

/* Waits (mu held) until one of a's requests is complete and its callback
 * has returned; returns its index, or -1 with CRNET_EINVAL in *rc when
 * waiting would never end (inside a completion callback). */
static int wait_any_locked(crnet_comm *c, any_of *a, int *rc, const char *what) {
  *rc = 0;
  for (;;) {
    bool done_busy = false;
    for (int i = 0; i < a->n; i++) {
      crnet_request *r = a->reqs[i];
      if (r == NULL)
        continue;
      if (complete_and_idle(r))
        return i;
      if (r->state == CRNET__REQ_DONE) {
        if (pthread_equal(r->cb_tid, pthread_self())) {
          crnet__set_callmsg(c, "%s: called from the request's own "
                                   "completion callback (wait for it after "
                                   "the callback returns)",
                                what);
          *rc = CRNET_EINVAL;
          return -1;
        }
        done_busy = true;
      }
    }
    if (owned_by_me(c)) {
      crnet__set_callmsg(c, "%s: called from a completion callback on a "
                               "request that is not complete (it could "
                               "never complete while the callback runs)",
                            what);
      *rc = CRNET_EINVAL;
      return -1;
    }
    if (!done_busy && c->w->owner == OWNER_NONE) {
      take_locked(c);
      pthread_mutex_unlock(&c->w->mu);
      drive(c, a);
      pthread_mutex_lock(&c->w->mu);
      release_locked(c);
      if (!any_done(a)) {
        crnet__set_callmsg(c, "%s: the loop stopped with the request "
                                 "in flight",
                              what);
        *rc = CRNET_EIO;
        return -1;
      }
      continue;
    }
    if (c->w->owner == OWNER_THREAD &&
        (c->w->spin_ns == 0 || c->w->spin_yield)) {
      /* The progress thread runs the loop, and taking it over would cost a
       * kick, a release and a wake-up, on a core other threads share when
       * ranks outnumber cores. This wait leans on the thread instead: it
       * sleeps until a completion wakes it, or the thread's release of
       * the loop (the thread leaves blocking requests to their waiters),
       * and the thread polls for it meanwhile as the wait would have (see
       * thread_main; woken by a kick from epoll for that). */
      if (atomic_fetch_add(&c->w->leaning, 1) == 0 && c->w->spin_ns > 0)
        kick_owner(c);
      sleep_locked(c);
      stop_leaning_locked(c);
      continue;
    }
    __atomic_add_fetch(&c->w->wanting, 1, __ATOMIC_RELAXED);
    if (c->w->owner == OWNER_THREAD)
      kick_owner(c);
    sleep_locked(c);
    stop_wanting_locked(c);
  }
}

int crnet_wait(crnet_request **rp) {
  crnet_request *r;
  crnet_comm *c;
  any_of a;
  int rc, status;
  if (rp == NULL) {
    crnet__set_callmsg(NULL, "crnet_wait: the request pointer is NULL");
    return CRNET_EINVAL;
  }
  r = *rp;
  if ((rc = lock_live(r, "crnet_wait")) != 0)
    return rc;
  c = r->comm;
  a.reqs = rp;
  a.n = 1;
  if (wait_any_locked(c, &a, &rc, "crnet_wait") < 0) {
    pthread_mutex_unlock(&c->w->mu);
    return rc;
  }
  status = r->status;
  note_why(c, r, status);
  free_locked(c, r);
  pthread_mutex_unlock(&c->w->mu);
  *rp = NULL;
  return status;
}

int crnet_test(crnet_request **rp, int *done) {
  crnet_request *r;
  crnet_comm *c;
  int rc, status;
  if (done != NULL)
    *done = 0;
  if (rp == NULL || done == NULL) {
    crnet__set_callmsg(NULL, "crnet_test: %s is NULL",
                          rp == NULL ? "the request pointer" : "done");
    return CRNET_EINVAL;
  }
  r = *rp;
  if ((rc = lock_live(r, "crnet_test")) != 0)
    return rc;
  c = r->comm;
  if (r->state != CRNET__REQ_DONE && c->w->owner == OWNER_NONE) {
    /* Nobody runs the loop: a test moves every request on, without
     * sleeping. */
    move_on_locked(c);
  }
  if (!complete_and_idle(r)) {
    pthread_mutex_unlock(&c->w->mu);
    return 0;
  }
  status = r->status;
  note_why(c, r, status);
  free_locked(c, r);
  pthread_mutex_unlock(&c->w->mu);
  *rp = NULL;
  *done = 1;
  return status;
}

int crnet_cancel(crnet_request *r) {
  crnet_comm *c;
  int rc;
  if ((rc = lock_live(r, "crnet_cancel")) != 0)
    return rc;
  c = r->comm;
  if (!r->p2p) {
    pthread_mutex_unlock(&c->w->mu);
    crnet__set_callmsg(c,
                       "crnet_cancel: a collective (%s) cannot be "
                       "cancelled: every rank takes part in it",
                       crnet_collective_name((crnet_collective)r->coll));
    return CRNET_EINVAL;
  }
  if (r->state != CRNET__REQ_DONE) {
    atomic_store(&r->cancel, true);
    atomic_store(&c->w->cancel_asked, true);
    kick_owner(c);
  }
  pthread_mutex_unlock(&c->w->mu);
  return 0;
}

/* The requests of a wait for several: every one valid (NULL entries are
 * allowed and skipped), and all of one comm. Returns that comm, or NULL
 * (none but NULL entries, or *rc set). */
static crnet_comm *check_set(int n, crnet_request *reqs[], int *rc,
                             const char *what) {
  crnet_comm *c = NULL;
  *rc = 0;
  if (n < 0 || (n > 0 && reqs == NULL)) {
    crnet__set_callmsg(NULL, "%s: %s", what,
                          n < 0 ? "a negative count" : "the array is NULL");
    *rc = CRNET_EINVAL;
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (reqs[i] == NULL)
      continue;
    if ((*rc = check_handle(reqs[i], what)) != 0)
      return NULL;
    if (c != NULL && reqs[i]->comm->w != c->w) {
      crnet__set_callmsg(NULL, "%s: the requests belong to comms of "
                                  "different crnet_comm_init calls (wait for "
                                  "each one's apart)",
                            what);
      *rc = CRNET_EINVAL;
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (reqs[j] == reqs[i]) {
        crnet__set_callmsg(NULL, "%s: request %d is request %d again",
                              what, i, j);
        *rc = CRNET_EINVAL;
        return NULL;
      }
    c = reqs[i]->comm;
  }
  return c;
}

int crnet_waitall(int n, crnet_request *reqs[]) {
  int rc, first = 0;
  (void)check_set(n, reqs, &rc, "crnet_waitall");
  if (rc != 0)
    return rc;
  /* Every request is waited for, also after one failed: each is freed by
   * its wait. The first failure is the result. */
  for (int i = 0; i < n; i++) {
    if (reqs[i] == NULL)
      continue;
    rc = crnet_wait(&reqs[i]);
    if (rc != 0 && first == 0)
      first = rc;
  }
  return first;
}

int crnet_waitany(int n, crnet_request *reqs[], int *index) {
  crnet_comm *c;
  any_of a = {reqs, n};
  int rc, i, status;
  if (index == NULL) {
    crnet__set_callmsg(NULL, "crnet_waitany: index is NULL");
    return CRNET_EINVAL;
  }
  *index = -1;
  c = check_set(n, reqs, &rc, "crnet_waitany");
  if (c == NULL)
    return rc; /* 0 when every entry is NULL: nothing to wait for */
  pthread_mutex_lock(&c->w->mu);
  for (i = 0; i < n; i++)
    if (reqs[i] != NULL &&
        (rc = check_live_locked(reqs[i], "crnet_waitany")) != 0) {
      pthread_mutex_unlock(&c->w->mu);
      return rc;
    }
  i = wait_any_locked(c, &a, &rc, "crnet_waitany");
  if (i < 0) {
    pthread_mutex_unlock(&c->w->mu);
    return rc;
  }
  status = reqs[i]->status;
  note_why(c, reqs[i], status);
  free_locked(c, reqs[i]);
  pthread_mutex_unlock(&c->w->mu);
  reqs[i] = NULL;
  *index = i;
  return status;
}

int crnet_request_on_complete(crnet_request *r, crnet_request_fn *fn,
                              void *arg) {
  crnet_comm *c;
  int rc = check_handle(r, "crnet_request_on_complete");
  if (rc != 0)
    return rc;
  if (fn == NULL) {
    crnet__set_callmsg(r->comm, "crnet_request_on_complete: the "
                                   "callback is NULL");
    return CRNET_EINVAL;
  }
  c = r->comm;
  pthread_mutex_lock(&c->w->mu);
  if ((rc = check_live_locked(r, "crnet_request_on_complete")) != 0) {
    pthread_mutex_unlock(&c->w->mu);
    return rc;
  }
  if (r->cb_set) {
    pthread_mutex_unlock(&c->w->mu);
    crnet__set_callmsg(c, "crnet_request_on_complete: the request has a "
                          "callback already (one per request)");
    return CRNET_EINVAL;
  }
  r->cb_set = true;
  r->cb = fn;
  r->cb_arg = arg;
  if (r->state != CRNET__REQ_DONE) {
    pthread_mutex_unlock(&c->w->mu);
    return 0;
  }
  /* Complete already: the callback runs now, on this thread, once. */
  r->cb_busy++;
  r->cb_tid = pthread_self();
  pthread_mutex_unlock(&c->w->mu);
  run_callback(c, r, fn, arg);
  return 0;
}
