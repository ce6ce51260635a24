/* soak_inflight.c: the --in-flight K mode of soak (soak.c runs the
 * program, draws the steps and checks the calls; this file starts them in
 * batches and completes them).
 *
 * --in-flight K, 2 to 64 (default 1: every call blocking, as soak.c
 * describes). The same calls, drawn in the same order (step n is the same call
 * whatever K is, so a failure replays with --in-flight 1 to see whether it
 * needs calls in flight), are started in batches of K with the nonblocking
 * crnet_iX, each with its own buffers, each with the schedule set just
 * before its start (a call keeps the schedule it started with, so a batch
 * holds many schedules at once). A step of messages (soak_p2p.c) starts
 * all its receives with crnet_irecv and its sends with crnet_isend: a call
 * of several requests, complete when they all are. The steps of a batch
 * run on different comms (soak_comms.c): a rank starts those of the comms
 * it is in, so calls of several comms are in flight at once; a comm made
 * by a split or a dup mid-batch is made while calls are in flight, and
 * before a comm is destroyed its calls in flight are completed (those of
 * the others stay in flight). A generator of its own, the same on every
 * rank, shapes the batches: now and then a step between two starts runs
 * blocking while the others are in flight (one sequence of calls for both
 * kinds); a step whose receive takes any source and any tag always does,
 * once the messages of its comm in flight are complete. Another, seeded
 * with the seed and the rank, decides how this rank
 * completes its batch, so that ranks wait in different orders: crnet_wait
 * on one request, a loop of crnet_test on one (and on another each turn,
 * yielding or sleeping a little between turns, as a program computing
 * would), crnet_waitany over the batch with holes where requests are done,
 * crnet_waitall over a part of it, and now and then a crnet_test while the
 * batch is still starting; a quarter of the requests get a
 * crnet_request_on_complete callback when they start and some more later
 * (perhaps when complete already, so it runs at once), and each callback
 * must have run exactly once, with its request and the status its wait
 * returns (0, or CRNET_ETRUNCATE for a message too large for its
 * receive), by the time its request's wait returns, and no more by the
 * end of the batch. A crnet_waitall must return the result of its first
 * entry, in array order, that fails.
 * Each call is checked as it completes, exactly as in soak.c; at the end of
 * the batch its buffers must still hold what they held then (nothing
 * writes into a completed call), and the results every rank holds alike
 * feed the shared hash in step order (which every rank follows alike,
 * whatever its order of completion), then the ranks compare it. A
 * refusal comes from the start (crnet_iX returns CRNET_EUNSUPPORTED and
 * makes no request), where the step falls back to auto and starts again,
 * as the blocking step does; a refusal from a wait would leave the ranks no
 * common point to fall back at and is a failure. A rank holds the send and
 * receive buffers of K calls at once: up to 2·K·B bytes. The last line
 * adds rank 0's counts: calls started, blocking calls between starts,
 * completions (of requests) by each way, callbacks.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crnet.h"
#include "soak.h"

/* --- calls in flight ------------------------------------------------------ */

/* How a step of a batch ran or completed (describe() names it). */
static const char HOW_STARTED[] = "in flight";
static const char HOW_BETWEEN[] = "blocking, with calls in flight";
static const char HOW_ALONE[] = "blocking, with calls in flight but none "
                                "of messages on its comm";
static const char HOW_WAIT[] = "in flight, completed by crnet_wait";
static const char HOW_TEST[] = "in flight, completed by crnet_test";
static const char HOW_WAITANY[] = "in flight, completed by crnet_waitany";
static const char HOW_WAITALL[] = "in flight, completed by crnet_waitall";

/* One request of a call in flight, and what its completion must show. */
typedef struct rq {
  struct flight *f;
  crnet_request *req;     /* NULL: completed */
  crnet_request *started; /* the handle as started: the callback's */
  int want;               /* the result it must complete with */
  bool done;
  bool cb_set;
  /* Written by the callback, perhaps on the progress thread. */
  atomic_int cb_calls, cb_status, cb_wrong_req;
} rq;

/* A call in flight: a collective (one request) or a step of messages. */
struct flight {
  step s; /* its own draw (and counts) */
  call_state cs;
  rq *rqs;
  int nrq, cap, left; /* requests, room, not complete yet */
  bool active;        /* started in this batch */
  bool done;
  uint64_t shared_h;       /* the world's result's hash, mixed in step order */
  size_t shared_n;
  uint64_t sum_sb, sum_rb; /* the buffers, guards included, at completion */
};

/* The calls a way of completion takes: the whole batch, or of one comm
 * those in flight, or its steps of messages. */
enum { F_ALL, F_COMM, F_P2P };
typedef struct filt {
  int what, comm;
} filt;

static const filt ALL = {F_ALL, -1};

typedef struct batch {
  flight *fl;
  int nf;
} batch;

static bool in_filt(const flight *f, filt w) {
  return w.what == F_ALL ||
         (f->s.comm == w.comm && (w.what == F_COMM || f->s.kind == K_P2P));
}

static void on_complete(crnet_request *req, int status, void *arg) {
  rq *r = arg;
  if (req != r->started)
    atomic_store(&r->cb_wrong_req, 1);
  atomic_store(&r->cb_status, status);
  atomic_fetch_add(&r->cb_calls, 1);
}

static bool pending(const rq *r) { return r->f->active && !r->done; }

static crnet_comm *comm_of(const ctx *x, const step *s) {
  return x->comms[s->comm].c;
}

static void add_callback(ctx *x, rq *r) {
  int rc = crnet_request_on_complete(r->req, on_complete, r);
  if (rc != 0) {
    report(x, &r->f->s, "crnet_request_on_complete returned %s: %s",
           crnet_err_name(rc), crnet_comm_errmsg(comm_of(x, &r->f->s)));
    x->broken = true;
    return;
  }
  r->cb_set = true;
  x->callbacks++;
}

static uint64_t buf_sum(const buf *b) {
  return fnv(b->raw, b->len + 2 * GUARD);
}

/* Every request of f is complete: the checks a blocking call gets. */
static void flight_done(ctx *x, flight *f) {
  step *s = &f->s;
  f->done = true;
  use_comm(x, s->comm);
  set_bases(x, s);
  check(x, &f->cs);
  if (shared_result(s)) {
    size_t n;
    uint64_t h = shared_digest(&f->cs, &n);
    if (s->comm == 0) { /* into the world's hash in step order, at the end */
      f->shared_h = h;
      f->shared_n = n;
    } else {
      share(x, s, h, n);
    }
  }
  f->sum_sb = s->kind == K_P2P ? p2p_sum(&f->cs) : buf_sum(&f->cs.sb);
  f->sum_rb = buf_sum(&f->cs.rb);
  free_expectations(&f->cs);
}

/* Request r completed with rc (its handle is NULL now): its result, and
 * the callback's. */
static void completed(ctx *x, rq *r, int rc, const char *how) {
  flight *f = r->f;
  step *s = &f->s;
  r->done = true;
  r->req = NULL;
  s->how = how;
  if (how == HOW_WAIT)
    x->by_wait++;
  else if (how == HOW_TEST)
    x->by_test++;
  else if (how == HOW_WAITANY)
    x->by_waitany++;
  else
    x->by_waitall++;
  if (x->trace && x->wrank == 0) {
    printf("soak: step %" PRIu64 " %s\n", s->n, how);
    fflush(stdout);
  }
  if (rc != r->want) {
    if (rc == CRNET_EUNSUPPORTED)
      report(x, s, "refused (%s) at its completion, not at its start, where "
                   "every rank could have fallen back alike",
             crnet_comm_errmsg(comm_of(x, s)));
    else
      report(x, s, "returned %s, not %s: %s", crnet_err_name(rc),
             r->want == 0 ? "0" : crnet_err_name(r->want),
             crnet_comm_errmsg(comm_of(x, s)));
    x->broken = true;
    return;
  }
  /* The wait returns after the callback has returned. */
  if (r->cb_set) {
    int calls = atomic_load(&r->cb_calls);
    if (calls != 1)
      report(x, s, "its completion callback ran %d times by its completion",
             calls);
    else if (atomic_load(&r->cb_status) != r->want)
      report(x, s, "its completion callback was given status %s",
             crnet_err_name(atomic_load(&r->cb_status)));
    if (atomic_load(&r->cb_wrong_req))
      report(x, s, "its completion callback was given another request");
  }
  if (--f->left == 0)
    flight_done(x, f);
}

/* Room for n requests in f (nothing of f is in flight). */
static rq *rq_room(flight *f, int n) {
  if (f->cap < n) {
    free(f->rqs);
    f->rqs = xmalloc(sizeof *f->rqs * (size_t)n);
    f->cap = n;
  }
  return f->rqs;
}

static void rq_init(flight *f, rq *r, crnet_request *req, int want) {
  r->f = f;
  r->req = r->started = req;
  r->want = want;
  r->done = r->cb_set = false;
  atomic_store(&r->cb_calls, 0);
  atomic_store(&r->cb_status, 0);
  atomic_store(&r->cb_wrong_req, 0);
}

/* Prepares and starts the call of f (its step drawn, its schedule set). */
static void start_one(ctx *x, flight *f) {
  crnet_request *req = NULL;
  int rc;
  use_comm(x, f->s.comm);
  f->cs = (call_state){.s = &f->s};
  f->active = f->done = false;
  f->nrq = 0;
  prepare(x, &f->cs);
  if (f->s.kind == K_P2P) {
    crnet_request **reqs;
    int *want, n = p2p_start(x, &f->cs, &reqs, &want);
    if (n < 0)
      goto unstarted;
    rq_room(f, n > 0 ? n : 1);
    for (int i = 0; i < n; i++)
      rq_init(f, &f->rqs[i], reqs[i], want[i]);
    f->nrq = n;
  } else {
    rc = go(x, &f->cs, &req);
    if (rc == CRNET_EUNSUPPORTED) {
      if (req != NULL)
        report(x, &f->s, "refused, but made a request");
      if (!refusal_ok(x, &f->cs))
        goto unstarted;
      rc = fall_back(x, &f->cs);
      if (rc == 0)
        rc = go(x, &f->cs, &req);
    }
    if (rc != 0) {
      report(x, &f->s, "returned %s at its start: %s", crnet_err_name(rc),
             crnet_comm_errmsg(x->comm));
      x->broken = true;
      goto unstarted;
    }
    if (req == NULL) {
      report(x, &f->s, "started (0) without a request");
      x->broken = true;
      goto unstarted;
    }
    rq_room(f, 1);
    rq_init(f, &f->rqs[0], req, 0);
    f->nrq = 1;
  }
  f->active = true;
  f->left = f->nrq;
  x->started++;
  /* A quarter get their callback now, while surely in flight. */
  for (int i = 0; i < f->nrq && !x->broken; i++)
    if (gen_below(&x->order, 4) == 0)
      add_callback(x, &f->rqs[i]);
  if (f->nrq == 0 && !x->broken) /* no message for this rank */
    flight_done(x, f);
  return;

unstarted:
  free_call(&f->cs);
}

/* A random pending request of the batch in w (without a callback if
 * no_cb), or NULL. */
static rq *pick(ctx *x, const batch *b, bool no_cb, filt w) {
  int n = 0, k;
  for (int i = 0; i < b->nf; i++)
    if (in_filt(&b->fl[i], w))
      for (int j = 0; j < b->fl[i].nrq && b->fl[i].active; j++)
        n += pending(&b->fl[i].rqs[j]) && !(no_cb && b->fl[i].rqs[j].cb_set);
  if (n == 0)
    return NULL;
  k = (int)gen_below(&x->order, (uint64_t)n);
  for (int i = 0; i < b->nf; i++)
    if (in_filt(&b->fl[i], w))
      for (int j = 0; j < b->fl[i].nrq && b->fl[i].active; j++) {
        rq *r = &b->fl[i].rqs[j];
        if (pending(r) && !(no_cb && r->cb_set) && k-- == 0)
          return r;
      }
  return NULL;
}

/* The requests of the batch's active calls in w, pending or not, in this
 * rank's random order; returns how many (*out: free it). */
static int gather_rqs(ctx *x, const batch *b, filt w, rq ***out) {
  int n = 0;
  rq **v;
  for (int i = 0; i < b->nf; i++)
    if (b->fl[i].active && in_filt(&b->fl[i], w))
      n += b->fl[i].nrq;
  v = xmalloc(sizeof *v * (size_t)(n + 1));
  n = 0;
  for (int i = 0; i < b->nf; i++)
    if (b->fl[i].active && in_filt(&b->fl[i], w))
      for (int j = 0; j < b->fl[i].nrq; j++)
        v[n++] = &b->fl[i].rqs[j];
  for (int i = n - 1; i > 0; i--) {
    int j = (int)gen_below(&x->order, (uint64_t)i + 1);
    rq *t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  *out = v;
  return n;
}

/* One crnet_test of r; completes it if done. */
static void test_one(ctx *x, rq *r) {
  int done = -1;
  int rc = crnet_test(&r->req, &done);
  if (done == 1) {
    if (r->req != NULL)
      report(x, &r->f->s, "crnet_test said done but left the handle set");
    completed(x, r, rc, HOW_TEST);
  } else if (done != 0 || rc != 0 || r->req == NULL) {
    report(x, &r->f->s, "crnet_test: not done (%d) but returned %s or "
                        "cleared the handle", done, crnet_err_name(rc));
    x->broken = true;
  }
}

/* Tests `target` until it is done, and with it one other pending request
 * a turn (which may complete too); between turns a yield, or now and then
 * a sleep of up to a quarter of a millisecond, as a program computing
 * between its tests would. */
static void test_until(ctx *x, const batch *b, rq *target, filt w) {
  for (;;) {
    rq *other = pick(x, b, false, w);
    if (other != NULL && other != target)
      test_one(x, other);
    if (!x->broken)
      test_one(x, target);
    if (target->done || x->broken)
      return;
    if (gen_below(&x->order, 4) == 0) {
      struct timespec ts = {0, 1000 * (long)(1 + gen_below(&x->order, 250))};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();
    }
  }
}

/* crnet_waitany over the requests in w in this rank's order, with holes
 * (NULL) where they are done. */
static void wait_any(ctx *x, const batch *b, filt w) {
  rq **v;
  int n = gather_rqs(x, b, w, &v), got = -2;
  crnet_request **arr = xmalloc(sizeof *arr * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    arr[i] = pending(v[i]) ? v[i]->req : NULL;
  int rc = crnet_waitany(n, arr, &got);
  if (got < 0 || got >= n || !pending(v[got])) {
    rq *r = pick(x, b, false, w);
    report(x, &r->f->s, "crnet_waitany over %d requests returned %s and "
                        "index %d, not one of a pending request", n,
           crnet_err_name(rc), got);
    x->broken = true;
    goto out;
  }
  for (int i = 0; i < n; i++) {
    crnet_request *now = i == got || !pending(v[i]) ? NULL : v[i]->req;
    if (arr[i] != now) {
      report(x, &v[got]->f->s, "crnet_waitany: entry %d of %d is %s after "
                               "it returned index %d", i, n,
             arr[i] == NULL ? "NULL" : "a request", got);
      x->broken = true;
      goto out;
    }
  }
  completed(x, v[got], rc, HOW_WAITANY);
out:
  free(arr);
  free(v);
}

/* crnet_waitall over `first` and about half the other pending requests in
 * w, in this rank's order, with some holes (done ones, NULL). Its result
 * is that of the first entry that fails. */
static void wait_all(ctx *x, const batch *b, rq *first, filt w) {
  rq **v;
  int n = gather_rqs(x, b, w, &v), m = 0, want = 0;
  crnet_request **arr = xmalloc(sizeof *arr * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    if (v[i] == first || (pending(v[i]) && gen_below(&x->order, 2)) ||
        (!pending(v[i]) && gen_below(&x->order, 3) == 0))
      v[m++] = v[i];
  for (int i = 0; i < m; i++) {
    arr[i] = pending(v[i]) ? v[i]->req : NULL;
    if (arr[i] != NULL && want == 0)
      want = v[i]->want;
  }
  int rc = crnet_waitall(m, arr);
  for (int i = 0; i < m; i++) {
    if (arr[i] != NULL) {
      report(x, &v[i]->f->s, "crnet_waitall left a handle set");
      x->broken = true;
    }
  }
  if (rc != want) {
    report(x, &first->f->s, "crnet_waitall over %d entries returned %s, not "
                            "%s: %s", m, crnet_err_name(rc),
           want == 0 ? "0" : crnet_err_name(want),
           crnet_comm_errmsg(comm_of(x, &first->f->s)));
    x->broken = true;
  }
  for (int i = 0; i < m && !x->broken; i++)
    if (pending(v[i]))
      completed(x, v[i], v[i]->want, HOW_WAITALL);
  free(arr);
  free(v);
}

/* Completes the requests in w in this rank's order and ways. */
static void complete_all(ctx *x, const batch *b, filt w) {
  rq *r;
  while (!x->broken && (r = pick(x, b, false, w)) != NULL) {
    /* Some callbacks come late: perhaps the call is complete already and
     * the callback runs at once, here. */
    if (gen_below(&x->order, 8) == 0) {
      rq *g = pick(x, b, true, w);
      if (g != NULL)
        add_callback(x, g);
      if (x->broken)
        return;
    }
    switch (gen_below(&x->order, 8)) {
    case 0:
    case 1:
    case 2: {
      int rc = crnet_wait(&r->req);
      if (r->req != NULL) {
        report(x, &r->f->s, "crnet_wait left the handle set");
        x->broken = true;
        return;
      }
      completed(x, r, rc, HOW_WAIT);
      break;
    }
    case 3:
    case 4:
      test_until(x, b, r, w);
      break;
    case 5:
    case 6:
      wait_any(x, b, w);
      break;
    default:
      wait_all(x, b, r, w);
    }
  }
}

/* Before a comm is destroyed: its calls in flight complete. */
static void drain(ctx *x, int slot, void *arg) {
  complete_all(x, arg, (filt){F_COMM, slot});
}

/* The batch is complete: callbacks ran once, buffers are as they were at
 * their completion, and the world's shared results go into its hash in
 * step order. Frees the buffers. */
static void end_batch(ctx *x, const batch *b) {
  crnet_request *none[MAX_IN_FLIGHT] = {NULL};
  int got = -2, rc, nf = b->nf;

  /* Nothing left: waitany finds nothing, waitall has nothing to wait for. */
  rc = crnet_waitany(nf, none, &got);
  if (rc != 0 || got != -1)
    report(x, &b->fl[0].s, "crnet_waitany over %d NULL entries returned %s "
                           "and index %d, not 0 and -1", nf,
           crnet_err_name(rc), got);
  rc = crnet_waitall(nf, none);
  if (rc != 0)
    report(x, &b->fl[0].s, "crnet_waitall over %d NULL entries returned %s",
           nf, crnet_err_name(rc));
  for (int i = 0; i < nf; i++) {
    flight *f = &b->fl[i];
    if (!f->active)
      continue;
    for (int j = 0; j < f->nrq; j++)
      if (f->rqs[j].cb_set && atomic_load(&f->rqs[j].cb_calls) != 1)
        report(x, &f->s, "its completion callback ran %d times by the end "
                         "of its batch", atomic_load(&f->rqs[j].cb_calls));
    if ((f->s.kind == K_P2P ? p2p_sum(&f->cs) : buf_sum(&f->cs.sb)) !=
            f->sum_sb ||
        buf_sum(&f->cs.rb) != f->sum_rb)
      report(x, &f->s, "its send or receive buffer (or a guard) changed "
                       "after the call completed");
    if (shared_result(&f->s) && f->s.comm == 0)
      mix_hash(x, f->shared_h, f->shared_n);
    free_call(&f->cs);
    f->active = false;
  }
}

/* The in-flight run: batches of x->in_flight calls started, then
 * completed, until `count` steps (have_count) or the minutes are up.
 * Returns false if the job is to be aborted. */
bool soak_in_flight(ctx *x, flight *fl, step *b, bool have_count,
                    uint64_t count, double minutes, double t0) {
  double last_progress = t0;
  uint64_t n = 0;
  const uint64_t end = have_count ? count : UINT64_MAX;
  batch bt = {fl, 0};

  while (n < end) {
    const step *last = NULL;
    bt.nf = 0;
    while (bt.nf < x->in_flight && n < end) {
      /* Comms made or destroyed before the step: the latter's calls in
       * flight complete first. */
      comm_events(x, n, drain, &bt);
      if (x->broken)
        return false;
      /* Now and then a blocking call between two starts; always a step
       * with a receive of any source and any tag. */
      bool blocking = bt.nf > 0 && gen_below(&x->shape, 6) == 0;
      step *s = &fl[bt.nf].s;
      s->n = n++;
      draw(x, s);
      if (p2p_exclusive(s))
        blocking = true;
      if (blocking) { /* the step is b's, fl[nf] stays free */
        step t = *b;
        *b = *s;
        *s = t;
        s = b;
      }
      s->how = !blocking            ? HOW_STARTED
               : p2p_exclusive(s) ? HOW_ALONE
                                    : HOW_BETWEEN;
      bool here = x->rank >= 0; /* this rank is in the step's comm */
      if (here)
        set_schedule(x, s);
      trace_step(x, s, blocking ? "" : "start ");
      if (here && !x->broken) {
        if (p2p_exclusive(s))
          complete_all(x, &bt, (filt){F_P2P, s->comm});
        if (x->broken)
          return false;
        if (blocking) {
          run_step(x, s);
          x->between++;
        } else {
          start_one(x, &fl[bt.nf]);
        }
      }
      if (!blocking)
        bt.nf++;
      if (x->broken)
        return false;
      count_step(x, s);
      last = s;
      /* This rank tests a request in flight now and then, so that some
       * complete while the later ones are still starting. */
      rq *r = gen_below(&x->order, 4) == 0 ? pick(x, &bt, false, ALL) : NULL;
      if (r != NULL)
        test_one(x, r);
      if (x->broken)
        return false;
    }
    complete_all(x, &bt, ALL);
    if (x->broken)
      return false;
    end_batch(x, &bt);
    if (x->broken)
      return false;
    int stop = sync_point(x, last, n - 1, minutes, t0, &last_progress);
    if (stop < 0)
      return false;
    if (stop)
      break;
  }
  return true;
}

/* K flights, zeroed. */
flight *flights_make(int k, int p) {
  flight *fl = xmalloc(sizeof *fl * (size_t)k);
  (void)p;
  memset(fl, 0, sizeof *fl * (size_t)k);
  return fl;
}

/* Frees what flights_make made; fl may be NULL (no in-flight run). */
void flights_free(flight *fl, int k) {
  for (int i = 0; fl != NULL && i < k; i++) {
    free(fl[i].s.counts);
    p2p_plan_free(&fl[i].s);
    free(fl[i].rqs);
  }
  free(fl);
}
