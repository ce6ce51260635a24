/* The public collective calls: validate, select, build, execute.
 *
 * Every call goes the same way. Arguments are checked first, so misuse
 * returns CRNET_EINVAL having changed nothing and sent nothing. Then the
 * comm's choice for the collective ("auto" or a name) is resolved by the
 * selection table, the schedule is built (pure), and the executor runs it.
 * The call signature that travels in every frame covers everything all
 * ranks must agree on (collective, counts, datatype, operator, schedule,
 * root), so mismatched calls fail with CRNET_EMISMATCH instead of mixing
 * data.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "alloc.h"
#include "board_calls.h"
#include "calls.h"
#include "comm.h"
#include "comm_state.h"
#include "exec.h"
#include "ops.h"
#include "select.h"

/* Calls this thread makes for the library itself (the boards' agreement,
 * board_calls.c) leave no trace events: the trace shows the program's
 * calls, numbered as the program counts them. */
static _Thread_local bool quiet_calls;

void crnet__coll_quiet(bool on) { quiet_calls = on; }

/* --- call signatures ------------------------------------------------------ */

typedef struct sig_state {
  uint64_t h;
} sig_state;

/* One multiply per word, not FNV-1a's one per byte (eight on every field
 * of every call): the xor-shift spreads the high bits the multiply makes
 * into the low ones the next word meets. */
static void sig_add(sig_state *s, uint64_t v) {
  s->h = (s->h ^ v) * 0x9E3779B97F4A7C15ull;
  s->h ^= s->h >> 29;
}

static uint32_t sig_of(const crnet__call *call, crnet_datatype dt, crnet_op op,
                       uint32_t schedule_id) {
  sig_state s = {1469598103934665603ull};
  sig_add(&s, (uint64_t)call->coll);
  sig_add(&s, call->count);
  /* alltoallv's counts are each rank's own: the frames' lengths check
   * them, pair by pair. */
  if (call->counts != NULL && !call->uniform &&
      call->coll != CRNET_COLL_ALLTOALLV)
    for (int32_t r = 0; r < call->p; r++)
      sig_add(&s, call->counts[r]);
  sig_add(&s, (uint64_t)dt);
  sig_add(&s, (uint64_t)(uint32_t)op);
  sig_add(&s, schedule_id);
  sig_add(&s, (uint64_t)(uint32_t)call->root);
  sig_add(&s, call->exclusive);
  return (uint32_t)(s.h ^ (s.h >> 32));
}

/* --- argument checks -------------------------------------------------------- */

static int call_error(crnet_comm *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int call_error(crnet_comm *c, int rc, const char *fmt, ...) {
  va_list ap;
  if (c == NULL)
    return rc;
  va_start(ap, fmt);
  vsnprintf(crnet__callmsg(c), CRNET__CALLMSG, fmt, ap);
  va_end(ap);
  return rc;
}

/* Checks comm, datatype and (for reductions) operator. */
static int check_common(crnet_comm *c, const char *what, crnet_datatype dt,
                        crnet_op op, bool reduces) {
  if (c == NULL)
    return CRNET_EINVAL;
  crnet__callmsg(c)[0] = '\0';
  if ((unsigned)dt >= CRNET_DATATYPE_COUNT)
    return call_error(c, CRNET_EINVAL, "%s: datatype %d does not exist", what,
                      (int)dt);
  if (reduces && !crnet__op_valid(op, dt)) {
    /* A handle that names no operator (never created, or freed) and an
     * operator that cannot take this datatype are different mistakes. */
    if (!crnet__op_exists(op))
      return call_error(c, CRNET_EINVAL,
                        "%s: operator %d does not exist (never created, or "
                        "freed)",
                        what, (int)op);
    return call_error(c, CRNET_EINVAL, "%s: operator %s cannot reduce %s",
                      what, crnet_op_name(op), crnet_datatype_name(dt));
  }
  return 0;
}

/* Whether count elements make a buffer that can exist: no object is
 * larger than PTRDIFF_MAX bytes, so a larger count is a mistake (an
 * overflow in the caller's arithmetic, a negative number cast to size_t). */
static bool fits(uint64_t count, size_t esize) {
  return count <= (uint64_t)PTRDIFF_MAX / esize;
}

/* CRNET_IN_PLACE stands for a send buffer only; as a receive buffer it
 * would be written through. */
static int check_recv_not_in_place(crnet_comm *c, const char *what,
                                   const void *recv) {
  if (recv == CRNET_IN_PLACE)
    return call_error(c, CRNET_EINVAL,
                      "%s: CRNET_IN_PLACE is only for the send buffer", what);
  return 0;
}

/* Distinct send and receive buffers must not overlap: the reduction
 * kernels and the copies assume they do not (CRNET_IN_PLACE is the way to
 * work on one buffer). Lengths in bytes, and known to fit. */
static int check_no_overlap(crnet_comm *c, const char *what, const void *send,
                            size_t send_bytes, const void *recv,
                            size_t recv_bytes) {
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (send == CRNET_IN_PLACE || send == NULL || recv == NULL ||
      send_bytes == 0 || recv_bytes == 0)
    return 0;
  if (s < r + recv_bytes && r < s + send_bytes)
    return call_error(c, CRNET_EINVAL,
                      "%s: the send and receive buffers overlap (use "
                      "CRNET_IN_PLACE to work in one buffer)",
                      what);
  return 0;
}

/* --- running a call ---------------------------------------------------------- */

static bool reduces(crnet_collective coll) {
  return coll == CRNET_COLL_ALLREDUCE || coll == CRNET_COLL_REDUCE_SCATTER ||
         coll == CRNET_COLL_SCAN || coll == CRNET_COLL_REDUCE;
}

static bool has_root(crnet_collective coll) {
  return coll == CRNET_COLL_BCAST || coll == CRNET_COLL_REDUCE ||
         coll == CRNET_COLL_GATHER || coll == CRNET_COLL_SCATTER;
}

/* The board's row, as crsched and crnet_comm_last_schedule name it: not a
 * schedule of the registry (a board call has no rounds, no frames). */
#define BOARD_NAME board_name
static const char board_name[] = "board";
#define BOARD_ID 0xFFu

void crnet__call_format(uint8_t coll, uint64_t seq,
                        const crnet__frame_call *call, char *buf, size_t n) {
  const crnet__algorithm *row = crnet__algorithm_by_id(call->schedule);
  const char *sched = row != NULL ? row->name : NULL;
  if (call->schedule == BOARD_ID)
    sched = BOARD_NAME;
  const char *name = crnet_collective_name((crnet_collective)coll);
  size_t len;
  if (coll == CRNET_COLL_SCAN && (call->variant & CRNET__CALL_EXCLUSIVE))
    name = "exscan";
  len = (size_t)snprintf(buf, n, "%s #%" PRIu64 " (", name, seq);
#define APPEND(...)                                                            \
  do {                                                                         \
    if (len < n)                                                               \
      len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__);               \
  } while (0)
  if (coll != CRNET_COLL_BARRIER)
    APPEND("%" PRIu64 " x %s%s, ", call->count,
           crnet_datatype_name((crnet_datatype)call->dtype),
           coll == CRNET_COLL_REDUCE_SCATTER ? " in all" : "");
  if (reduces((crnet_collective)coll))
    APPEND("%s, ", crnet_op_name(call->op));
  if (has_root((crnet_collective)coll))
    APPEND("root %d, ", (int)call->root);
  APPEND("schedule %s)", sched != NULL ? sched : "?");
#undef APPEND
}

/* What `auto` chose for the last call of each collective, so that a program
 * that calls with the same shape again (the usual case: a training step, a
 * solver's iteration) skips the model: pricing every candidate costs a few
 * thousand instructions, as much as the rest of a small call's own work.
 * The choice depends only on the collective, p, the bytes, the operator's
 * commutativity, exclusive and the tuning (select.h), fixed per comm but
 * for the bytes and the flags in the key. Calls with per-rank counts are
 * priced every time, but for equal ones (gather, scatter), which count
 * says. Under c->w->mu. */
static bool auto_key_matches(const crnet__auto_memo *m,
                             const crnet__call *call) {
  return m->name != NULL && m->count == call->count &&
         m->esize == call->esize && m->commutative == call->commutative &&
         m->exclusive == call->exclusive;
}

static const char *auto_cached(const crnet_comm *c, const crnet__call *call,
                               const char *chosen, uint32_t *id) {
  const crnet__auto_memo *m = &c->coll->auto_memo[call->coll];
  if ((call->counts != NULL && !call->uniform) ||
      strcmp(chosen, "auto") != 0 || !auto_key_matches(m, call))
    return NULL;
  *id = m->id;
  return m->name;
}

static void auto_remember(crnet_comm *c, const crnet__call *call,
                          const char *chosen, const char *name, uint32_t id) {
  crnet__auto_memo *m = &c->coll->auto_memo[call->coll];
  if ((call->counts != NULL && !call->uniform) || strcmp(chosen, "auto") != 0)
    return;
  m->count = call->count;
  m->esize = call->esize;
  m->commutative = call->commutative;
  m->exclusive = call->exclusive;
  m->name = name;
  m->id = id;
}

static bool board_path(crnet_comm *c, crnet__call *call, const void *send,
                       void *recv, crnet_datatype dt, crnet_op op,
                       bool blocking, crnet_request **out, int *rc) {
  crnet__frame_call fc = {.count = call->count,
                          .op = reduces(call->coll) ? op : -1,
                          .root = has_root(call->coll) ? call->root : -1,
                          .dtype = (uint8_t)dt,
                          .schedule = (uint8_t)BOARD_ID,
                          .variant =
                              call->exclusive ? CRNET__CALL_EXCLUSIVE : 0};
  if (!crnet__board_try(c, call, send, recv, dt, op, &fc,
                        sig_of(call, dt, op, BOARD_ID), blocking, out, rc))
    return false;
  /* Only this thread writes it; others read it under the lock. */
  if (c->coll->last_schedule[call->coll] != BOARD_NAME) {
    pthread_mutex_lock(&c->w->mu);
    c->coll->last_schedule[call->coll] = BOARD_NAME;
    pthread_mutex_unlock(&c->w->mu);
  }
  return true;
}

/* Starts a call whose arguments are checked: the comm's choice of schedule
 * is resolved, the schedule built, and the executor makes it a request.
 * normalise: elements of the result that get the logical operators' 0 or
 * 1 when the call has a single operand (see exec.h). */
static int start_call(crnet_comm *c, crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, crnet_op op,
                      uint64_t normalise, bool blocking, bool board_ok,
                      crnet_request **out) {
  crnet__schedule sched;
  crnet__exec_args a;
  char chosen[sizeof c->coll->schedule[0]];
  const char *name;
  uint32_t id;
  bool kept;
  int rc;

  call->p = c->size;
  call->rank = c->rank;
  call->esize = (uint32_t)crnet_datatype_size(dt);
  call->tuning = &c->w->tuning;
  pthread_mutex_lock(&c->w->mu);
  rc = crnet__comm_hosts(c);
  if (rc != 0) {
    pthread_mutex_unlock(&c->w->mu);
    return rc;
  }
  /* Set once, never changed after: read outside the lock below. */
  call->host = c->host;
  call->nhosts = c->nhosts;
  /* From what every rank knows alike, the layout and rank 0's transport:
   * each rank's own CRNET_TRANSPORT may differ, and ranks that priced with
   * different constants could pick different schedules for one call. */
  call->tcp_links = c->w->job_tcp;
  call->shm_links = c->nhosts == 1 && !call->tcp_links;
  memcpy(chosen, c->coll->schedule[call->coll], sizeof chosen);
  pthread_mutex_unlock(&c->w->mu);
  /* Small calls on one host: the boards, where the ranks agreed on them
   * (board_calls.c). */
  if (board_ok && strcmp(chosen, "auto") == 0 &&
      board_path(c, call, send, recv, dt, op, blocking, out, &rc))
    return rc;
  pthread_mutex_lock(&c->w->mu);
  name = auto_cached(c, call, chosen, &id);
  if (name != NULL)
    c->coll->last_schedule[call->coll] = name;
  pthread_mutex_unlock(&c->w->mu);
  if (name == NULL) {
    rc = crnet__select(chosen, call, &name, &id, crnet__callmsg(c),
                       CRNET__CALLMSG);
    if (rc != 0)
      return rc;
    pthread_mutex_lock(&c->w->mu);
    auto_remember(c, call, chosen, name, id);
    c->coll->last_schedule[call->coll] = name;
    pthread_mutex_unlock(&c->w->mu);
  }
  memset(&a, 0, sizeof a);
  a.coll = call->coll;
  a.exclusive = call->exclusive;
  a.sig = sig_of(call, dt, op, id);
  a.call.count = call->count;
  a.call.op = reduces(call->coll) ? op : -1;
  a.call.root = has_root(call->coll) ? call->root : -1;
  a.call.dtype = (uint8_t)dt;
  a.call.schedule = (uint8_t)id;
  a.call.variant = call->exclusive ? CRNET__CALL_EXCLUSIVE : 0;
  a.send = send;
  a.recv = recv;
  /* In place, SEND names RECV; but a scatter's in place is the root's
   * receive buffer: its data stays in SEND (the builder then writes no
   * RECV). */
  a.in_place = call->in_place && call->coll != CRNET_COLL_SCATTER;
  a.dt = dt;
  a.op = op;
  a.normalise = normalise;
  a.blocking = blocking;
  a.quiet = quiet_calls;
  a.unpack_counts = call->displs != NULL ? call->counts : NULL;
  a.unpack_displs = call->displs;
  a.rank = call->rank;
  a.p = call->p;
  a.memo = crnet__memo_take(c, call, id, &sched, &kept);
  if (!kept && (rc = crnet__build(name, call, &sched)) != 0) {
    crnet__memo_drop(a.memo);
    return rc;
  }
  return crnet__exec_start(c, &sched, &a, out);
}

static int start(crnet_comm *c, crnet__call *call, const void *send, void *recv,
                 crnet_datatype dt, crnet_op op, uint64_t normalise,
                 bool blocking, crnet_request **out) {
  return start_call(c, call, send, recv, dt, op, normalise, blocking, true,
                    out);
}

/* The common end of the reducing calls. result_count: elements of this
 * rank's result. */
static int start_reduction(crnet_comm *c, crnet__call *call, const void *send,
                           void *recv, crnet_datatype dt, crnet_op op,
                           uint64_t result_count, bool blocking,
                           crnet_request **out) {
  call->in_place = send == CRNET_IN_PLACE;
  call->commutative = crnet__op_commutative(op);
  return start(c, call, send, recv, dt, op, c->size == 1 ? result_count : 0,
               blocking, out);
}

/* A nonblocking call's request pointer: checked before anything else. */
static int check_req(crnet_comm *c, const char *what, crnet_request **req) {
  if (req != NULL) {
    *req = NULL;
    return 0;
  }
  if (c != NULL)
    crnet__set_callmsg(c, "%s: the request pointer is NULL", what);
  return CRNET_EINVAL;
}

/* A blocking call: its request, waited for at once. (A pointer: the
 * request is set by the start, an argument evaluated beside it.) */
static int wait_started(int rc, crnet_request **r) {
  /* A call that ran on the boards is over, with no request. */
  return rc != 0 || *r == NULL ? rc : crnet_wait(r);
}

const char *crnet_comm_last_schedule(const crnet_comm *c,
                                     crnet_collective coll) {
  const char *name;
  if (c == NULL || (unsigned)coll >= CRNET_COLL_COUNT)
    return NULL;
  pthread_mutex_lock(&c->w->mu);
  name = c->coll->last_schedule[coll];
  pthread_mutex_unlock(&c->w->mu);
  return name;
}

const char *crnet_schedule_name(crnet_collective coll, int index) {
  const char *name;
  if (index < 0 || (unsigned)coll > CRNET_COLL_COUNT)
    return NULL;
  for (size_t i = 0; (name = crnet__schedule_name(i)) != NULL; i++)
    if ((coll == CRNET_COLL_COUNT || crnet__schedule_known(name, coll)) &&
        index-- == 0)
      return name;
  return NULL;
}

int crnet_comm_set_schedule(crnet_comm *c, crnet_collective coll,
                            const char *name) {
  if (c == NULL)
    return CRNET_EINVAL;
  crnet__callmsg(c)[0] = '\0';
  if ((unsigned)coll >= CRNET_COLL_COUNT)
    return call_error(c, CRNET_EINVAL,
                      "crnet_comm_set_schedule: collective %d does not exist",
                      (int)coll);
  if (name == NULL)
    return call_error(c, CRNET_EINVAL,
                      "crnet_comm_set_schedule: the schedule name is NULL");
  if (strnlen(name, sizeof c->coll->schedule[0]) >= sizeof c->coll->schedule[0])
    return call_error(c, CRNET_EINVAL,
                      "crnet_comm_set_schedule: no schedule is called "
                      "'%.20s...' (names are shorter than %zu characters)",
                      name, sizeof c->coll->schedule[0]);
  /* What set_schedule can know, it checks: the name, the collective and
   * this comm's p (hypercube all-to-all needs a power of two). What depends
   * on a call's arguments (a non-commutative operator on a schedule that
   * reorders operands) is refused by that call. */
  if (strcmp(name, "auto") != 0) {
    crnet__call probe = {.coll = coll, .p = c->size, .commutative = true,
                         .tuning = &c->w->tuning};
    const char *chosen;
    uint32_t id;
    int rc = crnet__select(name, &probe, &chosen, &id, crnet__callmsg(c),
                           CRNET__CALLMSG);
    if (rc != 0)
      return rc;
  }
  pthread_mutex_lock(&c->w->mu);
  snprintf(c->coll->schedule[coll], sizeof c->coll->schedule[coll], "%s", name);
  pthread_mutex_unlock(&c->w->mu);
  return 0;
}

/* --- the calls ---------------------------------------------------------------
 *
 * Each collective is one function that checks and starts it (`blocking`
 * tells the request that its caller waits at once); crnet_X waits for it,
 * crnet_iX hands the request to the program. */

static int allreduce(crnet_comm *c, const void *send, void *recv,
                     size_t count, crnet_datatype dt, crnet_op op,
                     bool blocking, crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_ALLREDUCE, .count = count};
  int rc = check_common(c, "allreduce", dt, op, true);
  if (rc != 0)
    return rc;
  if (count > 0 && (recv == NULL || send == NULL))
    return call_error(c, CRNET_EINVAL, "allreduce: NULL buffer");
  if (!fits(count, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "allreduce: count too large");
  rc = check_recv_not_in_place(c, "allreduce", recv);
  if (rc == 0)
    rc = check_no_overlap(c, "allreduce", send,
                          count * crnet_datatype_size(dt), recv,
                          count * crnet_datatype_size(dt));
  if (rc != 0)
    return rc;
  return start_reduction(c, &call, send, recv, dt, op, count, blocking, out);
}

int crnet_allreduce(crnet_comm *c, const void *send, void *recv, size_t count,
                    crnet_datatype dt, crnet_op op) {
  crnet_request *r = NULL;
  return wait_started(allreduce(c, send, recv, count, dt, op, true, &r), &r);
}

int crnet_iallreduce(crnet_comm *c, const void *send, void *recv,
                     size_t count, crnet_datatype dt, crnet_op op,
                     crnet_request **req) {
  int rc = check_req(c, "iallreduce", req);
  return rc != 0 ? rc : allreduce(c, send, recv, count, dt, op, false, req);
}

static int reduce_scatter(crnet_comm *c, const char *what, const void *send,
                          void *recv, const uint64_t *counts,
                          crnet_datatype dt, crnet_op op, bool blocking,
                          crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_REDUCE_SCATTER, .counts = counts};
  uint64_t total = 0, mine = counts[c->rank];
  int rc;
  for (int r = 0; r < c->size; r++) {
    if (counts[r] > UINT64_MAX - total)
      return call_error(c, CRNET_EINVAL, "%s: counts overflow", what);
    total += counts[r];
  }
  if (!fits(total, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "%s: counts too large", what);
  if ((total > 0 && send == NULL) || (mine > 0 && recv == NULL) ||
      (send == CRNET_IN_PLACE && total > 0 && recv == NULL))
    return call_error(c, CRNET_EINVAL, "%s: NULL buffer", what);
  rc = check_recv_not_in_place(c, what, recv);
  if (rc == 0)
    rc = check_no_overlap(c, what, send, total * crnet_datatype_size(dt),
                          recv, mine * crnet_datatype_size(dt));
  if (rc != 0)
    return rc;
  call.count = total;
  return start_reduction(c, &call, send, recv, dt, op, mine, blocking, out);
}

static int reduce_scatter_block(crnet_comm *c, const void *send, void *recv,
                                size_t recvcount, crnet_datatype dt,
                                crnet_op op, bool blocking,
                                crnet_request **out) {
  uint64_t *counts;
  int rc = check_common(c, "reduce_scatter_block", dt, op, true);
  if (rc != 0)
    return rc;
  if (recvcount > UINT64_MAX / (uint64_t)c->size)
    return call_error(c, CRNET_EINVAL, "reduce_scatter_block: count too large");
  counts = crnet__malloc(sizeof *counts * (size_t)c->size);
  if (counts == NULL)
    return CRNET_ENOMEM;
  for (int r = 0; r < c->size; r++)
    counts[r] = recvcount;
  /* The counts shape the schedule and the signature only: both are made
   * before the call starts. */
  rc = reduce_scatter(c, "reduce_scatter_block", send, recv, counts, dt, op,
                      blocking, out);
  free(counts);
  return rc;
}

int crnet_reduce_scatter_block(crnet_comm *c, const void *send, void *recv,
                               size_t recvcount, crnet_datatype dt,
                               crnet_op op) {
  crnet_request *r = NULL;
  return wait_started(
      reduce_scatter_block(c, send, recv, recvcount, dt, op, true, &r), &r);
}

int crnet_ireduce_scatter_block(crnet_comm *c, const void *send, void *recv,
                                size_t recvcount, crnet_datatype dt,
                                crnet_op op, crnet_request **req) {
  int rc = check_req(c, "ireduce_scatter_block", req);
  return rc != 0 ? rc
                 : reduce_scatter_block(c, send, recv, recvcount, dt, op,
                                        false, req);
}

static int reduce_scatter_v(crnet_comm *c, const void *send, void *recv,
                            const size_t recvcounts[], crnet_datatype dt,
                            crnet_op op, bool blocking, crnet_request **out) {
  uint64_t *counts;
  int rc = check_common(c, "reduce_scatter", dt, op, true);
  if (rc != 0)
    return rc;
  if (recvcounts == NULL)
    return call_error(c, CRNET_EINVAL, "reduce_scatter: recvcounts is NULL");
  counts = crnet__malloc(sizeof *counts * (size_t)c->size);
  if (counts == NULL)
    return CRNET_ENOMEM;
  for (int r = 0; r < c->size; r++)
    counts[r] = recvcounts[r];
  rc = reduce_scatter(c, "reduce_scatter", send, recv, counts, dt, op,
                      blocking, out);
  free(counts);
  return rc;
}

int crnet_reduce_scatter(crnet_comm *c, const void *send, void *recv,
                         const size_t recvcounts[], crnet_datatype dt,
                         crnet_op op) {
  crnet_request *r = NULL;
  return wait_started(
      reduce_scatter_v(c, send, recv, recvcounts, dt, op, true, &r), &r);
}

int crnet_ireduce_scatter(crnet_comm *c, const void *send, void *recv,
                          const size_t recvcounts[], crnet_datatype dt,
                          crnet_op op, crnet_request **req) {
  int rc = check_req(c, "ireduce_scatter", req);
  return rc != 0 ? rc
                 : reduce_scatter_v(c, send, recv, recvcounts, dt, op, false,
                                    req);
}

/* recv of rank r = the prefix of ranks 0..r (or 0..r-1). With a single
 * operand the logical operators still promise 0 or 1 (exec.h): rank 0's
 * scan and rank 1's exscan normalise. */
static int prefix(crnet_comm *c, const char *what, bool exclusive,
                  const void *send, void *recv, size_t count,
                  crnet_datatype dt, crnet_op op, bool blocking,
                  crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_SCAN, .count = count,
                      .exclusive = exclusive};
  int rc = check_common(c, what, dt, op, true);
  if (rc != 0)
    return rc;
  if (count > 0 && (recv == NULL || send == NULL))
    return call_error(c, CRNET_EINVAL, "%s: NULL buffer", what);
  if (!fits(count, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "%s: count too large", what);
  rc = check_recv_not_in_place(c, what, recv);
  if (rc == 0)
    rc = check_no_overlap(c, what, send, count * crnet_datatype_size(dt),
                          recv, count * crnet_datatype_size(dt));
  if (rc != 0)
    return rc;
  call.in_place = send == CRNET_IN_PLACE;
  call.commutative = crnet__op_commutative(op);
  return start(c, &call, send, recv, dt, op,
               c->rank == (exclusive ? 1 : 0) ? count : 0, blocking, out);
}

int crnet_scan(crnet_comm *c, const void *send, void *recv, size_t count,
               crnet_datatype dt, crnet_op op) {
  crnet_request *r = NULL;
  return wait_started(
      prefix(c, "scan", false, send, recv, count, dt, op, true, &r), &r);
}

int crnet_iscan(crnet_comm *c, const void *send, void *recv, size_t count,
                crnet_datatype dt, crnet_op op, crnet_request **req) {
  int rc = check_req(c, "iscan", req);
  return rc != 0 ? rc
                 : prefix(c, "scan", false, send, recv, count, dt, op, false,
                          req);
}

int crnet_exscan(crnet_comm *c, const void *send, void *recv, size_t count,
                 crnet_datatype dt, crnet_op op) {
  crnet_request *r = NULL;
  return wait_started(
      prefix(c, "exscan", true, send, recv, count, dt, op, true, &r), &r);
}

int crnet_iexscan(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, crnet_op op, crnet_request **req) {
  int rc = check_req(c, "iexscan", req);
  return rc != 0 ? rc
                 : prefix(c, "exscan", true, send, recv, count, dt, op, false,
                          req);
}

static int alltoall(crnet_comm *c, const void *send, void *recv, size_t count,
                    crnet_datatype dt, bool blocking, crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_ALLTOALL, .count = count,
                      .commutative = true};
  int rc = check_common(c, "alltoall", dt, 0, false);
  if (rc != 0)
    return rc;
  if (count > 0 && (recv == NULL || send == NULL))
    return call_error(c, CRNET_EINVAL, "alltoall: NULL buffer");
  if (count > UINT64_MAX / (uint64_t)c->size ||
      !fits(count * (uint64_t)c->size, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "alltoall: count too large");
  rc = check_recv_not_in_place(c, "alltoall", recv);
  if (rc == 0)
    rc = check_no_overlap(c, "alltoall", send,
                          count * (size_t)c->size * crnet_datatype_size(dt),
                          recv,
                          count * (size_t)c->size * crnet_datatype_size(dt));
  if (rc != 0)
    return rc;
  call.in_place = send == CRNET_IN_PLACE;
  return start(c, &call, send, recv, dt, 0, 0, blocking, out);
}

int crnet_alltoall(crnet_comm *c, const void *send, void *recv, size_t count,
                   crnet_datatype dt) {
  crnet_request *r = NULL;
  return wait_started(alltoall(c, send, recv, count, dt, true, &r), &r);
}

int crnet_ialltoall(crnet_comm *c, const void *send, void *recv, size_t count,
                    crnet_datatype dt, crnet_request **req) {
  int rc = check_req(c, "ialltoall", req);
  return rc != 0 ? rc : alltoall(c, send, recv, count, dt, false, req);
}

static int allgather(crnet_comm *c, const void *send, void *recv,
                     size_t count, crnet_datatype dt, bool blocking,
                     crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_ALLGATHER, .count = count,
                      .commutative = true};
  uint64_t *counts;
  int rc = check_common(c, "allgather", dt, 0, false);
  if (rc != 0)
    return rc;
  if (count > 0 && (recv == NULL || send == NULL))
    return call_error(c, CRNET_EINVAL, "allgather: NULL buffer");
  if (count > UINT64_MAX / (uint64_t)c->size ||
      !fits(count * (uint64_t)c->size, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "allgather: count too large");
  rc = check_recv_not_in_place(c, "allgather", recv);
  if (rc == 0)
    rc = check_no_overlap(c, "allgather", send,
                          count * crnet_datatype_size(dt), recv,
                          count * (size_t)c->size * crnet_datatype_size(dt));
  if (rc != 0)
    return rc;
  counts = crnet__malloc(sizeof *counts * (size_t)c->size);
  if (counts == NULL)
    return CRNET_ENOMEM;
  for (int r = 0; r < c->size; r++)
    counts[r] = count;
  call.counts = counts;
  call.in_place = send == CRNET_IN_PLACE;
  rc = start(c, &call, send, recv, dt, 0, 0, blocking, out);
  free(counts);
  return rc;
}

int crnet_allgather(crnet_comm *c, const void *send, void *recv, size_t count,
                    crnet_datatype dt) {
  crnet_request *r = NULL;
  return wait_started(allgather(c, send, recv, count, dt, true, &r), &r);
}

int crnet_iallgather(crnet_comm *c, const void *send, void *recv,
                     size_t count, crnet_datatype dt, crnet_request **req) {
  int rc = check_req(c, "iallgather", req);
  return rc != 0 ? rc : allgather(c, send, recv, count, dt, false, req);
}

static int bcast(crnet_comm *c, void *buf, size_t count, crnet_datatype dt,
                 int root, bool blocking, crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_BCAST, .count = count,
                      .root = root, .in_place = true, .commutative = true};
  int rc = check_common(c, "bcast", dt, 0, false);
  if (rc != 0)
    return rc;
  if (root < 0 || root >= c->size)
    return call_error(c, CRNET_EINVAL, "bcast: root %d out of range", root);
  if (count > 0 && buf == NULL)
    return call_error(c, CRNET_EINVAL, "bcast: NULL buffer");
  if (buf == CRNET_IN_PLACE)
    return call_error(c, CRNET_EINVAL,
                      "bcast: CRNET_IN_PLACE is not a buffer (bcast always "
                      "works in place)");
  if (!fits(count, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "bcast: count too large");
  return start(c, &call, NULL, buf, dt, 0, 0, blocking, out);
}

int crnet_bcast(crnet_comm *c, void *buf, size_t count, crnet_datatype dt,
                int root) {
  crnet_request *r = NULL;
  return wait_started(bcast(c, buf, count, dt, root, true, &r), &r);
}

int crnet_ibcast(crnet_comm *c, void *buf, size_t count, crnet_datatype dt,
                 int root, crnet_request **req) {
  int rc = check_req(c, "ibcast", req);
  return rc != 0 ? rc : bcast(c, buf, count, dt, root, false, req);
}

static int reduce(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, crnet_op op, int root, bool blocking,
                  crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_REDUCE, .count = count, .root = root};
  int rc = check_common(c, "reduce", dt, op, true);
  if (rc != 0)
    return rc;
  if (root < 0 || root >= c->size)
    return call_error(c, CRNET_EINVAL, "reduce: root %d out of range", root);
  if (send == CRNET_IN_PLACE && c->rank != root)
    return call_error(c, CRNET_EINVAL,
                      "reduce: CRNET_IN_PLACE is for the root only");
  if (count > 0 && (send == NULL || (c->rank == root && recv == NULL)))
    return call_error(c, CRNET_EINVAL, "reduce: NULL buffer");
  if (!fits(count, crnet_datatype_size(dt)))
    return call_error(c, CRNET_EINVAL, "reduce: count too large");
  if (c->rank == root) {
    rc = check_recv_not_in_place(c, "reduce", recv);
    if (rc == 0)
      rc = check_no_overlap(c, "reduce", send,
                            count * crnet_datatype_size(dt), recv,
                            count * crnet_datatype_size(dt));
    if (rc != 0)
      return rc;
  }
  return start_reduction(c, &call, send, recv, dt, op, count, blocking, out);
}

int crnet_reduce(crnet_comm *c, const void *send, void *recv, size_t count,
                 crnet_datatype dt, crnet_op op, int root) {
  crnet_request *r = NULL;
  return wait_started(reduce(c, send, recv, count, dt, op, root, true, &r), &r);
}

int crnet_ireduce(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, crnet_op op, int root,
                  crnet_request **req) {
  int rc = check_req(c, "ireduce", req);
  return rc != 0 ? rc
                 : reduce(c, send, recv, count, dt, op, root, false, req);
}

static int barrier(crnet_comm *c, bool blocking, crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_BARRIER, .commutative = true};
  int rc = check_common(c, "barrier", CRNET_BYTE, 0, false);
  if (rc != 0)
    return rc;
  return start(c, &call, NULL, NULL, CRNET_BYTE, 0, 0, blocking, out);
}

int crnet_barrier(crnet_comm *c) {
  crnet_request *r = NULL;
  return wait_started(barrier(c, true, &r), &r);
}

int crnet_ibarrier(crnet_comm *c, crnet_request **req) {
  int rc = check_req(c, "ibarrier", req);
  return rc != 0 ? rc : barrier(c, false, req);
}

/* --- for the other calls' files (calls.h) ------------------------------ */

int crnet__coll_start(crnet_comm *c, crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, bool blocking,
                      crnet_request **out) {
  return start_call(c, call, send, recv, dt, 0, 0, blocking, false, out);
}

int crnet__coll_check(crnet_comm *c, const char *what, crnet_datatype dt) {
  return check_common(c, what, dt, 0, false);
}

int crnet__coll_check_req(crnet_comm *c, const char *what,
                          crnet_request **req) {
  return check_req(c, what, req);
}

bool crnet__coll_fits(uint64_t count, size_t esize) {
  return fits(count, esize);
}

int crnet__coll_no_overlap(crnet_comm *c, const char *what, const void *send,
                           size_t send_bytes, const void *recv,
                           size_t recv_bytes) {
  return check_no_overlap(c, what, send, send_bytes, recv, recv_bytes);
}
