/* The progress engine: requests in flight, who runs the loop, the waits,
 * and the progress thread. See request.h. */
#include "request.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"

/* Who runs the comm's loop (c->owner). */
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
  return c->owner != OWNER_NONE && pthread_equal(c->owner_tid, pthread_self());
}

/* The calling thread takes the loop (mu held; nobody owns it). */
static void take_locked(crnet_comm *c) {
  c->owner = OWNER_CALLER;
  c->owner_tid = pthread_self();
}

/* Sleeps on c->cv (mu held) until a completion, a callback's end or the
 * loop's release wakes it; wake_locked wakes only when someone sleeps. */
static void sleep_locked(crnet_comm *c) {
  c->cv_waiters++;
  pthread_cond_wait(&c->cv, &c->mu);
  c->cv_waiters--;
}

static void wake_locked(crnet_comm *c) {
  if (c->cv_waiters > 0)
    pthread_cond_broadcast(&c->cv);
}

/* Runs fn, the completion callback of r, on this thread (mu not held;
 * cb_busy counted by the caller under mu): a wait frees r only after. */
static void run_callback(crnet_comm *c, crnet_request *r, crnet_request_fn *fn,
                         void *arg) {
  fn(r, r->status, arg);
  pthread_mutex_lock(&c->mu);
  r->cb_busy--;
  wake_locked(c);
  pthread_mutex_unlock(&c->mu);
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
  for (crnet_request *y = r->comm->run_head; y != NULL && y != r; y = y->next) {
    const crnet__req_peer *p = crnet__req_peer_find(y, peer);
    if (p != NULL && (dir == 0 ? p->sends_left : p->recvs_left) > 0)
      return false;
  }
  return true;
}

crnet_request *crnet__req_oldest(const crnet_comm *c) { return c->run_head; }

crnet_request *crnet__req_find(const crnet_comm *c, uint64_t seq) {
  for (crnet_request *r = c->run_head; r != NULL; r = r->next)
    if (r->seq == seq)
      return r;
  return NULL;
}

uint32_t crnet__req_in_flight(const crnet_comm *c) { return c->in_flight; }

static void kick_owner(crnet_comm *c) {
  if (c->progress_handles)
    uv_async_send(&c->kick);
}

static void release_locked(crnet_comm *c);
static void thread_start_locked(crnet_comm *c);
static void move_on_locked(crnet_comm *c);

int crnet__req_start(crnet_comm *c, crnet_request *r) {
  bool drive = false;
  pthread_mutex_lock(&c->mu);
  if (c->err != 0) {
    int err = c->err;
    pthread_mutex_unlock(&c->mu);
    return err;
  }
  if (r->blocking && owned_by_me(c)) {
    /* A completion callback (the engine runs it) may start calls, but a
     * blocking one would wait for the engine that waits for it. Refused
     * before it is numbered: nothing starts. */
    pthread_mutex_unlock(&c->mu);
    crnet__set_callmsg(c, "%s: a blocking call in a completion callback "
                          "would never return (start it with its "
                          "nonblocking twin instead)",
                       crnet_collective_name((crnet_collective)r->coll));
    return CRNET_EINVAL;
  }
  r->magic = CRNET__REQ_MAGIC;
  r->state = CRNET__REQ_QUEUED;
  r->status = 0;
  r->cb_set = false;
  r->cb = NULL;
  r->cb_arg = NULL;
  r->cb_busy = 0;
  r->seq = ++c->seq_issued;
  r->started = uv_hrtime();
  r->round = 0;
  r->waiting_link = false;
  r->next = NULL;
  r->prev = c->queue_tail;
  if (c->queue_tail != NULL)
    c->queue_tail->next = r;
  else
    c->queue_head = r;
  c->queue_tail = r;
  c->in_flight++;
  atomic_fetch_add_explicit(&c->queued, 1, memory_order_release);
  if (!r->blocking && c->progress_mode)
    thread_start_locked(c);
  if (owned_by_me(c)) {
    /* A completion callback starts a call: the pass it runs in begins it. */
  } else if (c->owner != OWNER_NONE) {
    kick_owner(c); /* its pass begins the request */
  } else if (!r->blocking && c->thread_running) {
    /* The progress thread begins it: the program goes back to computing
     * at once (writing and reading a large call's first messages here
     * would take the caller milliseconds). */
    pthread_cond_signal(&c->thread_cv);
  } else if (!r->blocking) {
    /* No progress thread: begin the call now, so that its first messages
     * leave before the program goes back to computing. A blocking call
     * begins it in its wait. */
    drive = true;
  }
  if (drive)
    move_on_locked(c);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

/* --- the engine --------------------------------------------------------- */

static void begin(crnet_comm *c, crnet_request *r) {
  r->prev = c->run_tail;
  r->next = NULL;
  if (c->run_tail != NULL)
    c->run_tail->next = r;
  else
    c->run_head = r;
  c->run_tail = r;
  crnet__comm_begin_call(c, r->coll, r->seq, &r->call);
  if (c->lazy)
    for (uint32_t i = 0; i < r->npeers; i++)
      crnet__lazy_want(c, r->peers[i].rank);
}

static void complete(crnet_comm *c, crnet_request *r) {
  crnet_request_fn *cb = NULL;
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    c->run_head = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  else
    c->run_tail = r->prev;
  c->done_seq = r->seq;
  c->done_coll = r->coll;
  c->done_round = r->round;
  pthread_mutex_lock(&c->mu);
  if (r->ops->account != NULL)
    r->ops->account(r);
  r->state = CRNET__REQ_DONE;
  c->in_flight--;
  r->prev = NULL;
  r->next = c->done_head;
  if (c->done_head != NULL)
    c->done_head->prev = r;
  c->done_head = r;
  if (r->cb_set) {
    cb = r->cb;
    r->cb_busy++;
    r->cb_tid = pthread_self();
  }
  wake_locked(c);
  pthread_mutex_unlock(&c->mu);
  if (cb != NULL)
    run_callback(c, r, cb, r->cb_arg);
}

static void arm_timeout(crnet_comm *c);

void crnet__progress(crnet_comm *c) {
  bool again;
  if (c->in_progress)
    return;
  /* Nothing moved since the last pass: every request is where it was
   * (the loop runs the engine twice per turn, and a spinning wait turns
   * it often). */
  if (!c->progress_dirty &&
      atomic_load_explicit(&c->queued, memory_order_acquire) == 0)
    return;
  c->in_progress = true;
  do {
    c->progress_dirty = false;
    again = false;
    while (atomic_load_explicit(&c->queued, memory_order_acquire) > 0) {
      crnet_request *r;
      pthread_mutex_lock(&c->mu);
      r = c->queue_head;
      if (r != NULL) {
        c->queue_head = r->next;
        if (c->queue_head != NULL)
          c->queue_head->prev = NULL;
        else
          c->queue_tail = NULL;
        r->state = CRNET__REQ_RUNNING;
        atomic_fetch_sub_explicit(&c->queued, 1, memory_order_relaxed);
      }
      pthread_mutex_unlock(&c->mu);
      if (r == NULL)
        break;
      begin(c, r);
    }
    for (crnet_request *r = c->run_head, *next; r != NULL; r = next) {
      next = r->next;
      if (r->ops->advance(r)) {
        complete(c, r);
        again = true;
        next = c->run_head; /* a younger call may post now */
      }
    }
  } while (again);
  arm_timeout(c);
  c->in_progress = false;
}

static void on_progress_prepare(uv_prepare_t *h) { crnet__progress(h->data); }
static void on_progress_check(uv_check_t *h) {
  crnet_comm *c = h->data;
  c->loop_seen_ms = uv_now(&c->loop);
  crnet__progress(c);
}
/* Another thread queued a request (the check handle's pass begins it), or
 * wants the loop (uv_run returns, and the owner looks), or aborts the job
 * while this thread waits (crnet__abort_by_owner). */
static void on_kick(uv_async_t *h) {
  crnet_comm *c = h->data;
  int code = 0;
  bool abort_now;
  pthread_mutex_lock(&c->mu);
  abort_now = c->abort_asked;
  code = c->abort_asked_code;
  c->abort_asked = false;
  pthread_mutex_unlock(&c->mu);
  if (!abort_now)
    return;
  crnet__comm_abort_now(c, code);
  pthread_mutex_lock(&c->mu);
  wake_locked(c);
  pthread_mutex_unlock(&c->mu);
}

bool crnet__loop_owned_by_me(crnet_comm *c) {
  bool mine;
  pthread_mutex_lock(&c->mu);
  mine = owned_by_me(c);
  pthread_mutex_unlock(&c->mu);
  return mine;
}

void crnet__abort_by_owner(crnet_comm *c, int code) {
  pthread_mutex_lock(&c->mu);
  if (c->err == 0 && c->owner != OWNER_NONE && !owned_by_me(c)) {
    c->abort_asked = true;
    c->abort_asked_code = code;
    kick_owner(c);
    while (c->err == 0 && c->abort_asked && c->owner != OWNER_NONE)
      sleep_locked(c);
    c->abort_asked = false;
  }
  pthread_mutex_unlock(&c->mu);
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
      for (uint32_t k = 0; k < c->streams && r != c->rank; k++) {
        crnet__peer *p = *crnet__comm_link(c, r, (int)k);
        if (p == NULL || p->closed)
          continue;
        waiting = waiting || (pass == 0 ? p->link.recv != NULL
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
static void fail_timed_out(crnet_comm *c, crnet_request *r) {
  char awaited[400];
  if (r->waiting_link) {
    char who[160];
    crnet__describe_rank(c, r->link_peer, who, sizeof who);
    snprintf(awaited, sizeof awaited, "%s (no link to it yet)", who);
  } else {
    crnet__list_awaited(c, awaited, sizeof awaited);
  }
  crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                   "rank %d timed out in %s #%" PRIu64 " round %" PRIu32
                   " after %.3g s (CRNET_TIMEOUT) waiting for %s",
                   c->rank, crnet_collective_name((crnet_collective)r->coll),
                   r->seq, r->round, (double)c->coll_timeout_ms / 1000.0,
                   awaited);
}

static void on_coll_timer(uv_timer_t *t) {
  crnet_comm *c = t->data;
  crnet_request *r = c->run_head;
  uint64_t now = uv_hrtime();
  if (r == NULL || c->err != 0)
    return;
  if (now - r->started < c->coll_timeout_ms * 1000000)
    return; /* that one completed; crnet__progress armed the next */
  if (c->timeout_seq != r->seq) {
    c->timeout_seq = r->seq;
    uv_timer_start(&c->coll_timer, on_coll_timer, TIMEOUT_GRACE_MS, 0);
    return;
  }
  fail_timed_out(c, r);
  crnet__progress(c);
}

/* The oldest request's deadline is the nearest: requests are numbered as
 * they start. */
static void arm_timeout(crnet_comm *c) {
  crnet_request *r = c->run_head;
  uint64_t now, due_ms;
  if (c->coll_timeout_ms == 0 || !c->progress_handles)
    return;
  if (r == NULL || c->err != 0) {
    uv_timer_stop(&c->coll_timer);
    return;
  }
  if (c->timeout_seq == r->seq && uv_is_active((uv_handle_t *)&c->coll_timer))
    return; /* in its grace */
  now = uv_hrtime();
  due_ms = (r->started + c->coll_timeout_ms * 1000000 > now)
               ? (r->started + c->coll_timeout_ms * 1000000 - now + 999999) /
                     1000000
               : 0;
  uv_timer_start(&c->coll_timer, on_coll_timer, due_ms, 0);
}

/* --- running the loop -------------------------------------------------- */

static void on_deadline(uv_timer_t *t) {
  crnet_comm *c = t->data;
  c->deadline_passed = true;
}

/* Polls the loop without sleeping for at most c->spin_ns; true if done(arg)
 * came true meanwhile.
 *
 * The spin adapts, because what decides whether it pays is not only the
 * ranks of this job: other processes may want the cores too, and then a
 * spinning rank delays the very peer it waits for. Each spin that catches
 * its event raises spin_score, each that runs out lowers it twice as much;
 * while the score is not positive the wait sleeps at once, and only every
 * SPIN_PROBE_EVERY-th wait spins again to see whether things changed. */
#define SPIN_SCORE_MAX CRNET__SPIN_SCORE_MAX
#define SPIN_PROBE_EVERY 64

static bool spin_worth_it(crnet_comm *c) {
  if (c->spin_score > 0)
    return true;
  if (++c->spin_skipped < SPIN_PROBE_EVERY)
    return false;
  c->spin_skipped = 0;
  return true;
}

static bool spin(crnet_comm *c, bool (*done)(void *), void *arg) {
  uint64_t start = uv_hrtime();
  do {
    uv_run(&c->loop, UV_RUN_NOWAIT);
    /* With more ranks than cores, the peer this rank waits for may need
     * this very core: let it have it. */
    if (c->spin_yield)
      sched_yield();
    if (done(arg)) {
      if (c->spin_score < SPIN_SCORE_MAX)
        c->spin_score++;
      return true;
    }
  } while (!c->deadline_passed && uv_hrtime() - start < c->spin_ns);
  if (c->spin_score > -SPIN_SCORE_MAX)
    c->spin_score -= 2;
  return false;
}

int crnet__comm_run_until(crnet_comm *c, bool (*done)(void *), void *arg,
                          uint64_t timeout_ms) {
  int rc = 0;
  c->deadline_passed = false;
  if (timeout_ms > 0)
    uv_timer_start(&c->deadline, on_deadline, timeout_ms, 0);
  while (!done(arg)) {
    if (c->deadline_passed) {
      rc = CRNET_ETIMEDOUT;
      break;
    }
    /* Bounded: after spin_ns without progress the process sleeps. */
    if (c->spin_ns > 0 && spin_worth_it(c) && spin(c, done, arg))
      break;
    /* Sleeps in epoll until something happens. A loop with nothing left to
     * wait for cannot make progress: that is a bug, not a reason to spin. */
    if (uv_run(&c->loop, UV_RUN_ONCE) == 0 && !done(arg)) {
      rc = CRNET_EIO;
      break;
    }
  }
  uv_timer_stop(&c->deadline);
  return rc;
}

/* --- owning the loop ------------------------------------------------------ */

/* Gives the loop back: to a thread that waits for it, else to the progress
 * thread while requests are in flight. */
static void release_locked(crnet_comm *c) {
  c->owner = OWNER_NONE;
  if (c->wanting > 0)
    pthread_cond_broadcast(&c->cv);
  else if (c->thread_running && c->in_flight > 0)
    pthread_cond_signal(&c->thread_cv);
}

/* With the loop free (mu held): takes it, moves every request on without
 * sleeping (one pass of the engine and one turn of the loop), gives it
 * back; mu is held again on return. What a start without a progress
 * thread and crnet_test do. */
static void move_on_locked(crnet_comm *c) {
  take_locked(c);
  pthread_mutex_unlock(&c->mu);
  if (c->lazy)
    crnet__lazy_resume(c);
  crnet__progress(c);
  uv_run(&c->loop, UV_RUN_NOWAIT);
  pthread_mutex_lock(&c->mu);
  release_locked(c);
}

/* Waits (mu held) until the loop is free and takes it. */
static void acquire_locked(crnet_comm *c) {
  c->wanting++;
  while (c->owner != OWNER_NONE) {
    if (c->owner == OWNER_THREAD)
      kick_owner(c);
    sleep_locked(c);
  }
  c->wanting--;
  take_locked(c);
}

void crnet__loop_acquire(crnet_comm *c) {
  pthread_mutex_lock(&c->mu);
  acquire_locked(c);
  pthread_mutex_unlock(&c->mu);
  if (c->lazy)
    crnet__lazy_resume(c);
}

void crnet__loop_release(crnet_comm *c) {
  pthread_mutex_lock(&c->mu);
  release_locked(c);
  pthread_mutex_unlock(&c->mu);
}

/* The loop has nothing left that could complete what is in flight: a bug,
 * reported as one rather than a hang. */
static void fail_stuck(crnet_comm *c) {
  crnet__comm_fail(c, CRNET_EIO, -1,
                   "rank %d: %u call(s) in flight but nothing left to wait "
                   "for (a bug in crnet)",
                   c->rank, c->in_flight);
}

/* --- the progress thread --------------------------------------------------- */

static void *thread_main(void *arg) {
  crnet_comm *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->thread_quit &&
           (c->owner != OWNER_NONE || c->wanting > 0 || c->in_flight == 0))
      pthread_cond_wait(&c->thread_cv, &c->mu);
    if (c->thread_quit)
      break;
    c->owner = OWNER_THREAD;
    c->owner_tid = pthread_self();
    pthread_mutex_unlock(&c->mu);
    if (c->lazy)
      crnet__lazy_resume(c);
    for (;;) {
      /* No spinning here: the program computes meanwhile, and a thread
       * that polls would take its core. Waiters spin, in their waits. */
      crnet__progress(c);
      int alive = uv_run(&c->loop, UV_RUN_ONCE);
      pthread_mutex_lock(&c->mu);
      if (c->thread_quit || c->wanting > 0 || c->in_flight == 0)
        break;
      pthread_mutex_unlock(&c->mu);
      if (!alive) {
        crnet__progress(c);
        if (c->run_head != NULL && c->err == 0)
          fail_stuck(c);
      }
    }
    release_locked(c);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Starts the progress thread at the first nonblocking call (mu held): a
 * program that makes only blocking calls never has one. */
static void thread_start_locked(crnet_comm *c) {
  pthread_attr_t attr;
  if (c->thread_running || c->thread_quit)
    return;
  /* The default stack: the thread runs the program's own code too (user
   * reduction operators, completion callbacks), and untouched stack pages
   * cost nothing. */
  pthread_attr_init(&attr);
  if (pthread_create(&c->thread, &attr, thread_main, c) == 0) {
    c->thread_running = true;
#if defined(__linux__)
    pthread_setname_np(c->thread, "crnet-progress");
#endif
    if (c->owner == OWNER_NONE && c->in_flight > 0)
      pthread_cond_signal(&c->thread_cv);
  } else {
    crnet__log("cannot start the progress thread; requests progress inside "
                "crnet calls only");
    c->progress_mode = 0;
  }
  pthread_attr_destroy(&attr);
}

void crnet__progress_stop(crnet_comm *c) {
  bool join;
  pthread_mutex_lock(&c->mu);
  c->thread_quit = true;
  join = c->thread_running;
  c->thread_running = false;
  pthread_cond_broadcast(&c->thread_cv);
  if (c->owner == OWNER_THREAD)
    kick_owner(c);
  pthread_mutex_unlock(&c->mu);
  if (join)
    pthread_join(c->thread, NULL);
}

/* --- set-up ------------------------------------------------------------------ */

int crnet__progress_init(crnet_comm *c) {
  if (uv_prepare_init(&c->loop, &c->progress_prepare) != 0 ||
      uv_check_init(&c->loop, &c->progress_check) != 0 ||
      uv_async_init(&c->loop, &c->kick, on_kick) != 0 ||
      uv_timer_init(&c->loop, &c->coll_timer) != 0)
    return CRNET_EIO;
  c->progress_prepare.data = c;
  c->progress_check.data = c;
  c->kick.data = c;
  c->coll_timer.data = c;
  /* None of them keeps the loop alive: a wait with nothing else to wait
   * for is a bug that crnet__comm_run_until reports. The engine runs
   * before the loop sleeps (after the write callbacks of the pending
   * phase) and after it polled. */
  uv_prepare_start(&c->progress_prepare, on_progress_prepare);
  uv_check_start(&c->progress_check, on_progress_check);
  uv_unref((uv_handle_t *)&c->progress_prepare);
  uv_unref((uv_handle_t *)&c->progress_check);
  uv_unref((uv_handle_t *)&c->kick);
  uv_unref((uv_handle_t *)&c->coll_timer);
  c->progress_handles = true;
  return 0;
}

void crnet__progress_close(crnet_comm *c) {
  if (!c->progress_handles)
    return;
  c->progress_handles = false;
  uv_close((uv_handle_t *)&c->progress_prepare, NULL);
  uv_close((uv_handle_t *)&c->progress_check, NULL);
  uv_close((uv_handle_t *)&c->kick, NULL);
  uv_close((uv_handle_t *)&c->coll_timer, NULL);
}

/* --- requests: freeing ------------------------------------------------------ */

/* Takes a complete request off the done list and frees it (mu held; let
 * go of while the layer above releases its part, which takes mu itself). */
static void free_locked(crnet_comm *c, crnet_request *r) {
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    c->done_head = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  r->state = CRNET__REQ_FREE;
  if (r->ops->release != NULL) {
    pthread_mutex_unlock(&c->mu);
    r->ops->release(r);
    pthread_mutex_lock(&c->mu);
  }
  if (c->req_cached < REQ_CACHE_MAX) {
    r->next = c->req_cache;
    c->req_cache = r;
    c->req_cached++;
  } else {
    r->magic = 0;
    free(r);
  }
}

crnet_request *crnet__req_alloc(crnet_comm *c, size_t size) {
  crnet_request *r = NULL, **at;
  pthread_mutex_lock(&c->mu);
  for (at = &c->req_cache; *at != NULL; at = &(*at)->next)
    if ((*at)->alloc_size >= size) {
      r = *at;
      *at = r->next;
      c->req_cached--;
      break;
    }
  pthread_mutex_unlock(&c->mu);
  if (r == NULL) {
    r = calloc(1, size);
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
  pthread_mutex_lock(&c->mu);
  r->state = CRNET__REQ_FREE;
  if (c->req_cached < REQ_CACHE_MAX) {
    r->next = c->req_cache;
    c->req_cache = r;
    c->req_cached++;
    r = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  free(r);
}

void crnet__req_free_unwaited(crnet_comm *c) {
  pthread_mutex_lock(&c->mu);
  while (c->done_head != NULL)
    free_locked(c, c->done_head);
  while (c->req_cache != NULL) {
    crnet_request *r = c->req_cache;
    c->req_cache = r->next;
    r->magic = 0;
    free(r);
  }
  c->req_cached = 0;
  pthread_mutex_unlock(&c->mu);
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
  if (c->lazy)
    crnet__lazy_resume(c);
  crnet__progress(c);
  while (!any_done(a)) {
    if (crnet__comm_run_until(c, any_done, a, 0) != 0 && !any_done(a)) {
      crnet__progress(c);
      if (!any_done(a) && c->err == 0)
        fail_stuck(c);
      crnet__progress(c);
      if (!any_done(a) && uv_run(&c->loop, UV_RUN_ONCE) == 0) {
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
    if (!done_busy && c->owner == OWNER_NONE) {
      take_locked(c);
      pthread_mutex_unlock(&c->mu);
      drive(c, a);
      pthread_mutex_lock(&c->mu);
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
    if (c->owner == OWNER_THREAD && c->spin_ns == 0) {
      /* The progress thread runs the loop and this wait would not spin
       * (more ranks than cores): taking the loop over would only add two
       * wake-ups; the completion wakes this thread. */
      sleep_locked(c);
      continue;
    }
    c->wanting++;
    if (c->owner == OWNER_THREAD)
      kick_owner(c);
    sleep_locked(c);
    c->wanting--;
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
  if ((rc = check_handle(r, "crnet_wait")) != 0)
    return rc;
  c = r->comm;
  a.reqs = rp;
  a.n = 1;
  pthread_mutex_lock(&c->mu);
  if ((rc = check_live_locked(r, "crnet_wait")) != 0) {
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  if (wait_any_locked(c, &a, &rc, "crnet_wait") < 0) {
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  status = r->status;
  free_locked(c, r);
  pthread_mutex_unlock(&c->mu);
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
  if ((rc = check_handle(r, "crnet_test")) != 0)
    return rc;
  c = r->comm;
  pthread_mutex_lock(&c->mu);
  if ((rc = check_live_locked(r, "crnet_test")) != 0) {
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  if (r->state != CRNET__REQ_DONE && c->owner == OWNER_NONE) {
    /* Nobody runs the loop: a test moves every request on, without
     * sleeping. */
    move_on_locked(c);
  }
  if (!complete_and_idle(r)) {
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  status = r->status;
  free_locked(c, r);
  pthread_mutex_unlock(&c->mu);
  *rp = NULL;
  *done = 1;
  return status;
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
    if (c != NULL && reqs[i]->comm != c) {
      crnet__set_callmsg(NULL, "%s: the requests belong to different "
                                  "comms (wait for each comm's apart)",
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
  pthread_mutex_lock(&c->mu);
  for (i = 0; i < n; i++)
    if (reqs[i] != NULL &&
        (rc = check_live_locked(reqs[i], "crnet_waitany")) != 0) {
      pthread_mutex_unlock(&c->mu);
      return rc;
    }
  i = wait_any_locked(c, &a, &rc, "crnet_waitany");
  if (i < 0) {
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  status = reqs[i]->status;
  free_locked(c, reqs[i]);
  pthread_mutex_unlock(&c->mu);
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
  pthread_mutex_lock(&c->mu);
  if ((rc = check_live_locked(r, "crnet_request_on_complete")) != 0) {
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  if (r->cb_set) {
    pthread_mutex_unlock(&c->mu);
    crnet__set_callmsg(c, "crnet_request_on_complete: the request has a "
                          "callback already (one per request)");
    return CRNET_EINVAL;
  }
  r->cb_set = true;
  r->cb = fn;
  r->cb_arg = arg;
  if (r->state != CRNET__REQ_DONE) {
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  /* Complete already: the callback runs now, on this thread, once. */
  r->cb_busy++;
  r->cb_tid = pthread_self();
  pthread_mutex_unlock(&c->mu);
  run_callback(c, r, fn, arg);
  return 0;
}
