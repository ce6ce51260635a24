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
 * holds many schedules at once). A generator of its own, the same on every
 * rank, shapes the batches: now and then a step between two starts runs
 * blocking while the others are in flight (one sequence of calls for both
 * kinds). Another, seeded with the seed and the rank, decides how this rank
 * completes its batch, so that ranks wait in different orders: crnet_wait
 * on one request, a loop of crnet_test on one (and on another each turn,
 * yielding or sleeping a little between turns, as a program computing
 * would), crnet_waitany over the batch with holes where requests are done,
 * crnet_waitall over a part of it, and now and then a crnet_test while the
 * batch is still starting; a quarter of the requests get a
 * crnet_request_on_complete callback when they start and some more later
 * (perhaps when complete already, so it runs at once), and each callback
 * must have run exactly once, with status 0 and its own request, by the
 * time its request's wait returns, and no more by the end of the batch.
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
 * completions by each way, callbacks.
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
static const char HOW_WAIT[] = "in flight, completed by crnet_wait";
static const char HOW_TEST[] = "in flight, completed by crnet_test";
static const char HOW_WAITANY[] = "in flight, completed by crnet_waitany";
static const char HOW_WAITALL[] = "in flight, completed by crnet_waitall";

/* A call in flight, and what its completion must show. */
struct flight {
  step s; /* its own draw (and counts) */
  call_state cs;
  crnet_request *req;     /* NULL: not started, or completed */
  crnet_request *started; /* the handle as started: the callback's */
  bool active;            /* started in this batch */
  bool done;
  bool cb_set;
  /* Written by the callback, perhaps on the progress thread. */
  atomic_int cb_calls, cb_status, cb_wrong_req;
  uint64_t shared_h;       /* the result's hash, mixed in step order */
  uint64_t sum_sb, sum_rb; /* the buffers, guards included, at completion */
};

static void on_complete(crnet_request *req, int status, void *arg) {
  flight *f = arg;
  if (req != f->started)
    atomic_store(&f->cb_wrong_req, 1);
  atomic_store(&f->cb_status, status);
  atomic_fetch_add(&f->cb_calls, 1);
}

static bool pending(const flight *f) { return f->active && !f->done; }

static void add_callback(ctx *x, flight *f) {
  int rc = crnet_request_on_complete(f->req, on_complete, f);
  if (rc != 0) {
    report(x, &f->s, "crnet_request_on_complete returned %s: %s",
           crnet_err_name(rc), crnet_comm_errmsg(x->comm));
    x->broken = true;
    return;
  }
  f->cb_set = true;
  x->callbacks++;
}

static uint64_t buf_sum(const buf *b) {
  return fnv(b->raw, b->len + 2 * GUARD);
}

/* The request of f completed with rc (its handle is NULL now): the checks
 * a blocking call gets, and the callback's. */
static void completed(ctx *x, flight *f, int rc, const char *how) {
  step *s = &f->s;
  f->done = true;
  f->req = NULL;
  s->how = how;
  if (how == HOW_WAIT)
    x->by_wait++;
  else if (how == HOW_TEST)
    x->by_test++;
  else if (how == HOW_WAITANY)
    x->by_waitany++;
  else
    x->by_waitall++;
  if (x->trace && x->rank == 0) {
    printf("soak: step %" PRIu64 " %s\n", s->n, how);
    fflush(stdout);
  }
  if (rc != 0) {
    if (rc == CRNET_EUNSUPPORTED)
      report(x, s, "refused (%s) at its completion, not at its start, where "
                   "every rank could have fallen back alike",
             crnet_comm_errmsg(x->comm));
    else
      report(x, s, "returned %s: %s", crnet_err_name(rc),
             crnet_comm_errmsg(x->comm));
    x->broken = true;
    return;
  }
  /* The wait returns after the callback has returned. */
  if (f->cb_set) {
    int calls = atomic_load(&f->cb_calls);
    if (calls != 1)
      report(x, s, "its completion callback ran %d times by its completion",
             calls);
    else if (atomic_load(&f->cb_status) != 0)
      report(x, s, "its completion callback was given status %s",
             crnet_err_name(atomic_load(&f->cb_status)));
    if (atomic_load(&f->cb_wrong_req))
      report(x, s, "its completion callback was given another request");
  }
  set_bases(x, s);
  check(x, &f->cs);
  if (shared_result(s))
    f->shared_h = fnv(f->cs.rb.p, f->cs.want_elems * width(s->dt));
  f->sum_sb = buf_sum(&f->cs.sb);
  f->sum_rb = buf_sum(&f->cs.rb);
  free_expectations(&f->cs);
}

/* Prepares and starts the call of f (its step drawn, its schedule set). */
static void start_one(ctx *x, flight *f) {
  int rc;
  f->cs = (call_state){.s = &f->s};
  f->req = f->started = NULL;
  f->active = f->done = f->cb_set = false;
  atomic_store(&f->cb_calls, 0);
  atomic_store(&f->cb_status, 0);
  atomic_store(&f->cb_wrong_req, 0);
  prepare(x, &f->cs);
  rc = go(x, &f->cs, &f->req);
  if (rc == CRNET_EUNSUPPORTED) {
    if (f->req != NULL)
      report(x, &f->s, "refused, but made a request");
    if (!refusal_ok(x, &f->cs))
      goto unstarted;
    rc = fall_back(x, &f->cs);
    if (rc == 0)
      rc = go(x, &f->cs, &f->req);
  }
  if (rc != 0) {
    report(x, &f->s, "returned %s at its start: %s", crnet_err_name(rc),
           crnet_comm_errmsg(x->comm));
    x->broken = true;
    goto unstarted;
  }
  if (f->req == NULL) {
    report(x, &f->s, "started (0) without a request");
    x->broken = true;
    goto unstarted;
  }
  f->active = true;
  f->started = f->req;
  x->started++;
  /* A quarter get their callback now, while surely in flight. */
  if (gen_below(&x->order, 4) == 0)
    add_callback(x, f);
  return;

unstarted:
  free_expectations(&f->cs);
  buf_free(&f->cs.sb);
  buf_free(&f->cs.rb);
}

/* A random pending call of fl[0..nf) (without a callback if no_cb), or
 * NULL. */
static flight *pick(ctx *x, flight *fl, int nf, bool no_cb) {
  int n = 0;
  for (int i = 0; i < nf; i++)
    n += pending(&fl[i]) && !(no_cb && fl[i].cb_set);
  if (n == 0)
    return NULL;
  int k = (int)gen_below(&x->order, (uint64_t)n);
  for (int i = 0; i < nf; i++)
    if (pending(&fl[i]) && !(no_cb && fl[i].cb_set) && k-- == 0)
      return &fl[i];
  return NULL;
}

/* idx[0..n) in this rank's random order. */
static void shuffle(ctx *x, int *idx, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)gen_below(&x->order, (uint64_t)i + 1), t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

/* One crnet_test of f; completes it if done. */
static void test_one(ctx *x, flight *f) {
  int done = -1;
  int rc = crnet_test(&f->req, &done);
  if (done == 1) {
    if (f->req != NULL)
      report(x, &f->s, "crnet_test said done but left the handle set");
    completed(x, f, rc, HOW_TEST);
  } else if (done != 0 || rc != 0 || f->req == NULL) {
    report(x, &f->s, "crnet_test: not done (%d) but returned %s or cleared "
                     "the handle", done, crnet_err_name(rc));
    x->broken = true;
  }
}

/* Tests `target` until it is done, and with it one other pending call a
 * turn (which may complete too); between turns a yield, or now and then a
 * sleep of up to a quarter of a millisecond, as a program computing
 * between its tests would. */
static void test_until(ctx *x, flight *fl, int nf, flight *target) {
  for (;;) {
    flight *other = pick(x, fl, nf, false);
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

/* crnet_waitany over the whole batch in this rank's order, with holes
 * (NULL) where calls are done. */
static void wait_any(ctx *x, flight *fl, int nf) {
  crnet_request *arr[MAX_IN_FLIGHT];
  int idx[MAX_IN_FLIGHT], got = -2;
  flight *f;
  for (int i = 0; i < nf; i++)
    idx[i] = i;
  shuffle(x, idx, nf);
  for (int i = 0; i < nf; i++)
    arr[i] = pending(&fl[idx[i]]) ? fl[idx[i]].req : NULL;
  int rc = crnet_waitany(nf, arr, &got);
  if (got < 0 || got >= nf || !pending(&fl[idx[got]])) {
    f = pick(x, fl, nf, false);
    report(x, &f->s, "crnet_waitany over %d requests returned %s and index "
                     "%d, not one of a pending request", nf,
           crnet_err_name(rc), got);
    x->broken = true;
    return;
  }
  for (int i = 0; i < nf; i++) {
    crnet_request *now = i == got || !pending(&fl[idx[i]]) ? NULL
                                                           : fl[idx[i]].req;
    if (arr[i] != now) {
      report(x, &fl[idx[got]].s, "crnet_waitany: entry %d of %d is %s after "
                                 "it returned index %d", i, nf,
             arr[i] == NULL ? "NULL" : "a request", got);
      x->broken = true;
      return;
    }
  }
  completed(x, &fl[idx[got]], rc, HOW_WAITANY);
}

/* crnet_waitall over `first` and about half the other pending calls, in
 * this rank's order, with some holes (done calls, NULL). */
static void wait_all(ctx *x, flight *fl, int nf, flight *first) {
  crnet_request *arr[MAX_IN_FLIGHT];
  int idx[MAX_IN_FLIGHT], n = 0;
  for (int i = 0; i < nf; i++)
    if (&fl[i] == first || (pending(&fl[i]) && gen_below(&x->order, 2)) ||
        (!pending(&fl[i]) && gen_below(&x->order, 3) == 0))
      idx[n++] = i;
  shuffle(x, idx, n);
  for (int i = 0; i < n; i++)
    arr[i] = pending(&fl[idx[i]]) ? fl[idx[i]].req : NULL;
  int rc = crnet_waitall(n, arr);
  for (int i = 0; i < n; i++) {
    if (arr[i] != NULL) {
      report(x, &fl[idx[i]].s, "crnet_waitall left a handle set");
      x->broken = true;
    }
  }
  if (rc != 0) {
    report(x, &first->s, "crnet_waitall over %d entries returned %s: %s", n,
           crnet_err_name(rc), crnet_comm_errmsg(x->comm));
    x->broken = true;
  }
  if (x->broken)
    return;
  for (int i = 0; i < n; i++)
    if (pending(&fl[idx[i]]))
      completed(x, &fl[idx[i]], 0, HOW_WAITALL);
}

/* Completes the batch fl[0..nf) in this rank's order and ways. */
static void complete_all(ctx *x, flight *fl, int nf) {
  flight *f;
  while (!x->broken && (f = pick(x, fl, nf, false)) != NULL) {
    /* Some callbacks come late: perhaps the call is complete already and
     * the callback runs at once, here. */
    if (gen_below(&x->order, 8) == 0) {
      flight *g = pick(x, fl, nf, true);
      if (g != NULL)
        add_callback(x, g);
      if (x->broken)
        return;
    }
    switch (gen_below(&x->order, 8)) {
    case 0:
    case 1:
    case 2: {
      int rc = crnet_wait(&f->req);
      if (f->req != NULL) {
        report(x, &f->s, "crnet_wait left the handle set");
        x->broken = true;
        return;
      }
      completed(x, f, rc, HOW_WAIT);
      break;
    }
    case 3:
    case 4:
      test_until(x, fl, nf, f);
      break;
    case 5:
    case 6:
      wait_any(x, fl, nf);
      break;
    default:
      wait_all(x, fl, nf, f);
    }
  }
}

/* The batch is complete: callbacks ran once, buffers are as they were at
 * their completion, and the shared results go into the hash in step
 * order. Frees the buffers. */
static void end_batch(ctx *x, flight *fl, int nf) {
  crnet_request *none[MAX_IN_FLIGHT] = {NULL};
  int got = -2, rc;

  /* Nothing left: waitany finds nothing, waitall has nothing to wait for. */
  rc = crnet_waitany(nf, none, &got);
  if (rc != 0 || got != -1)
    report(x, &fl[0].s, "crnet_waitany over %d NULL entries returned %s and "
                        "index %d, not 0 and -1", nf, crnet_err_name(rc), got);
  rc = crnet_waitall(nf, none);
  if (rc != 0)
    report(x, &fl[0].s, "crnet_waitall over %d NULL entries returned %s", nf,
           crnet_err_name(rc));
  for (int i = 0; i < nf; i++) {
    flight *f = &fl[i];
    if (!f->active)
      continue;
    if (f->cb_set && atomic_load(&f->cb_calls) != 1)
      report(x, &f->s, "its completion callback ran %d times by the end of "
                       "its batch", atomic_load(&f->cb_calls));
    if (buf_sum(&f->cs.sb) != f->sum_sb || buf_sum(&f->cs.rb) != f->sum_rb)
      report(x, &f->s, "its send or receive buffer (or a guard) changed "
                       "after the call completed");
    if (shared_result(&f->s))
      mix_hash(x, f->shared_h, f->cs.want_elems * width(f->s.dt));
    buf_free(&f->cs.sb);
    buf_free(&f->cs.rb);
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

  while (n < end) {
    int nf = 0;
    const step *last = NULL;
    while (nf < x->in_flight && n < end) {
      /* Now and then a blocking call between two starts. */
      bool blocking = nf > 0 && gen_below(&x->shape, 6) == 0;
      step *s = blocking ? b : &fl[nf].s;
      s->n = n++;
      draw(x, s);
      s->how = blocking ? HOW_BETWEEN : HOW_STARTED;
      set_schedule(x, s);
      trace_step(x, s, blocking ? "" : "start ");
      if (!x->broken) {
        if (blocking) {
          run_step(x, s);
          x->between++;
        } else {
          start_one(x, &fl[nf]);
        }
      }
      if (!blocking)
        nf++;
      if (x->broken)
        return false;
      count_step(x, s);
      last = s;
      /* This rank tests a call in flight now and then, so that some
       * complete while the later ones are still starting. */
      flight *f = gen_below(&x->order, 4) == 0 ? pick(x, fl, nf, false) : NULL;
      if (f != NULL)
        test_one(x, f);
      if (x->broken)
        return false;
    }
    complete_all(x, fl, nf);
    if (x->broken)
      return false;
    end_batch(x, fl, nf);
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

/* K flights, zeroed, each step with room for p counts (reduce_scatter). */
flight *flights_make(int k, int p) {
  flight *fl = xmalloc(sizeof *fl * (size_t)k);
  memset(fl, 0, sizeof *fl * (size_t)k);
  for (int i = 0; i < k; i++)
    fl[i].s.counts = xmalloc(sizeof *fl[i].s.counts * (size_t)p);
  return fl;
}

/* Frees what flights_make made; fl may be NULL (no in-flight run). */
void flights_free(flight *fl, int k) {
  for (int i = 0; fl != NULL && i < k; i++)
    free(fl[i].s.counts);
  free(fl);
}
