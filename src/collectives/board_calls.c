/* Small collectives among the ranks of one host on the
 * shared-memory boards (board.h: the cells, the posts, the wait).
 *
 * Every call here is one round: each rank writes into its cell for each
 * peer what that peer needs of it, posts, waits for the posts of the
 * peers whose cells it needs (every peer's, but for rooted calls and scan:
 * awaited_peers) and reads their cells. Reductions combine the contributions in
 * rank order (x0 + (x1 + (... + x(p-1)))) on every rank that needs the result,
 * so the result is bitwise the same on every rank and the operator need not
 * commute. With p ranks each rank reads p - 1 cells: flat, which on one
 * host of a few to a few tens of ranks is one cache line's crossing per
 * peer for 8 bytes, where a tree would put log p crossings in a row.
 *
 * Which comms. A comm of one host (2 to CRNET__BOARD_MAX_RANKS ranks, a
 * context id with a slot) asks once, when it is made (crnet_comm_init,
 * split, dup, shrink, grow: crnet__board_setup), whether it can use its
 * boards: each rank waits until its links to the others have moved onto
 * shared memory (or could not), and one allreduce says whether every rank
 * has a live one to every other. That allreduce is the comm's first call,
 * the library's: messages and counters begin after it. Nothing of this
 * when CRNET_SHM_BOARD_BYTES (rank 0's, carried to every rank by the
 * rendezvous) is 0, rank 0 keeps its links on TCP, or the job's links are
 * lazy (links made on use: the agreement would make them all).
 *
 * Which calls. Blocking and nonblocking alike (so a blocking call still
 * matches its nonblocking twin), of the collectives below with the comm's
 * schedule choice `auto`, each peer's share at most those bytes. All of
 * that is alike on every rank, as the choice must be: a rank that called
 * differently is told by the board (CRNET_EMISMATCH), as frames tell it
 * elsewhere. A nonblocking call is a request that the engine moves
 * (posting once the board call before it is complete, completing once
 * every peer has posted); a blocking one runs on its caller's thread, the
 * loop held, with no request.
 *
 * Not here: vector shapes, exscan, reduce-scatter, gather and scatter. */
#include "board_calls.h"

#include <string.h>

#include "board.h"
#include "calls.h"
#include "comm_state.h"
#include "ops.h"
#include "request.h"

/* The calls the boards take. */
static bool board_collective(const crnet__call *call) {
  switch (call->coll) {
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_BCAST:
    return true;
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_BARRIER:
  case CRNET_COLL_ALLTOALL:
    return call->counts == NULL && call->displs == NULL;
  case CRNET_COLL_SCAN:
    return !call->exclusive;
  case CRNET_COLL_ALLGATHER:
    if (call->displs != NULL)
      return false;
    for (int32_t r = 0; call->counts != NULL && r < call->p; r++)
      if (call->counts[r] != call->count)
        return false;
    return true;
  default:
    return false;
  }
}

/* The peers whose posts a call needs (board.h): a bcast's root nobody's
 * and its readers the root's; a reduce's root everybody's and the others
 * nobody's; a scan's rank the lower ranks'. Waiting for more would make
 * every rooted call a barrier: with ranks sharing cores, osu_bcast of 8 B
 * at p = 8 took 32 us so, against 18 us on frames, whose root goes on at
 * once (docs/PERFORMANCE-SHM.md, "Boards"). */
static uint64_t awaited_peers(const crnet__call *call, int me, int n) {
  uint64_t everyone = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
  switch (call->coll) {
  case CRNET_COLL_BCAST:
    return me == call->root ? 0 : (uint64_t)1 << call->root;
  case CRNET_COLL_REDUCE:
    return me == call->root ? everyone : 0;
  case CRNET_COLL_SCAN:
    return ((uint64_t)1 << me) - 1;
  default:
    return everyone;
  }
}

/* The bytes each rank hands each peer (alltoall: one block; the others:
 * its whole contribution). */
static uint64_t share_bytes(const crnet__call *call) {
  return call->coll == CRNET_COLL_BARRIER ? 0 : call->count * call->esize;
}

int crnet__board_setup(crnet_comm *c) {
  int32_t mine, all = 0;
  int rc, nhosts;
  /* Facts alike on every member (rank 0's options: a restarted rank's
   * links are lazy whatever the job's are, so its own w->lazy is not one).
   * Lazy links are left alone: the agreement would make links the program
   * never asked for. */
  if (c->w->shm_board == 0 || c->w->job_tcp || c->w->job_lazy || c->size < 2 ||
      c->size > CRNET__BOARD_MAX_RANKS || c->ctx >= CRNET__BOARD_SLOTS)
    return 0;
  pthread_mutex_lock(&c->w->mu);
  rc = crnet__comm_hosts(c);
  nhosts = c->nhosts;
  pthread_mutex_unlock(&c->w->mu);
  if (rc != 0 || nhosts != 1)
    return rc;
  mine = crnet__board_prepare(c);
  crnet__coll_quiet(true);
  rc = crnet_allreduce(c, &mine, &all, 1, CRNET_INT32, CRNET_MIN);
  crnet__coll_quiet(false);
  if (rc == 0)
    crnet__board_enable(c, all != 0);
  return rc;
}

/* Copies bytes of src into this rank's cell for every peer. */
static void write_all(crnet__board_call *b, const void *src, size_t bytes) {
  for (int j = 0; j < b->n; j++)
    if (j != b->me)
      memcpy(crnet__board_out(b, j), src, bytes);
}

/* Rank r's contribution, after the wait: a peer's cell, or our own copy
 * in our first peer's cell (the caller's buffer may be the result). */
static const void *contribution(crnet__board_call *b, int r) {
  if (r != b->me)
    return crnet__board_in(b, r);
  return crnet__board_out(b, b->me == 0 ? 1 : 0);
}

/* result = x[0] op (x[1] op (... op x[last])). One operand (rank 0's
 * scan) is combined with itself for the logical operators, which promise
 * 0 or 1 (exec.h, normalise). */
static void reduce_upto(crnet__board_call *b, int last, void *result,
                        size_t count, crnet_datatype dt, crnet_op op,
                        size_t bytes) {
  memcpy(result, contribution(b, last), bytes);
  for (int r = last - 1; r >= 0; r--)
    crnet__reduce(op, dt, contribution(b, r), result, count);
  if (last == 0 && (op == CRNET_LAND || op == CRNET_LOR))
    crnet__reduce(op, dt, contribution(b, 0), result, count);
}

/* What this rank writes into its cells before posting. */
static void write_cells(crnet__board_call *b, const crnet__call *call,
                        const void *send, void *recv) {
  size_t bytes = (size_t)share_bytes(call);
  const uint8_t *src = send == CRNET_IN_PLACE ? recv : send;
  b->bytes = bytes;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_SCAN:
    write_all(b, src, bytes);
    break;
  case CRNET_COLL_REDUCE:
    if (b->me != call->root)
      memcpy(crnet__board_out(b, call->root), src, bytes);
    else
      memcpy(crnet__board_out(b, b->me == 0 ? 1 : 0), src, bytes);
    break;
  case CRNET_COLL_BCAST:
    if (b->me == call->root)
      write_all(b, recv, bytes);
    break;
  case CRNET_COLL_ALLGATHER:
    if (send == CRNET_IN_PLACE)
      src = (const uint8_t *)recv + (size_t)b->me * bytes;
    write_all(b, src, bytes);
    break;
  case CRNET_COLL_ALLTOALL:
    for (int j = 0; j < b->n; j++)
      if (j != b->me)
        memcpy(crnet__board_out(b, j), src + (size_t)j * bytes, bytes);
    break;
  default:
    break;
  }
}

/* The result, from the peers' cells, once every peer has posted. */
static void read_cells(crnet__board_call *b, const crnet__call *call,
                       const void *send, void *recv, crnet_datatype dt,
                       crnet_op op) {
  size_t bytes = (size_t)share_bytes(call);
  const uint8_t *src = send == CRNET_IN_PLACE ? recv : send;
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
    reduce_upto(b, b->n - 1, recv, call->count, dt, op, bytes);
    break;
  case CRNET_COLL_SCAN:
    reduce_upto(b, b->me, recv, call->count, dt, op, bytes);
    break;
  case CRNET_COLL_REDUCE:
    if (b->me == call->root)
      reduce_upto(b, b->n - 1, recv, call->count, dt, op, bytes);
    break;
  case CRNET_COLL_BCAST:
    if (b->me != call->root)
      memcpy(recv, crnet__board_in(b, call->root), bytes);
    break;
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_ALLTOALL:
    for (int j = 0; j < b->n; j++) {
      uint8_t *to = (uint8_t *)recv + (size_t)j * bytes;
      if (j != b->me)
        memcpy(to, crnet__board_in(b, j), bytes);
      else if (send != CRNET_IN_PLACE)
        memcpy(to,
               call->coll == CRNET_COLL_ALLTOALL ? src + (size_t)j * bytes
                                                 : src,
               bytes);
    }
    break;
  default:
    break;
  }
}

/* --- nonblocking calls: a request that the engine moves ------------------ */

typedef struct board_req {
  crnet_request req;
  crnet__call call; /* without its per-rank arrays */
  const void *send;
  void *recv;
  crnet_datatype dt;
  crnet_op op;
  int state; /* 0 not open, 1 open (waits for its turn), 2 posted; from 1
                on in the world's list of board calls waiting */
  crnet__board_call b;
} board_req;

static bool board_advance(crnet_request *r) {
  board_req *q = (board_req *)r;
  crnet_comm *c = r->comm;
  int err = __atomic_load_n(&c->err, __ATOMIC_RELAXED);
  /* Opened at its first advance: in the order calls begin. */
  if (q->state == 0) {
    if (err == 0)
      err = crnet__board_open(c, q->call.coll, &r->call, r->sig, r->seq, &q->b);
    if (err == 0)
      crnet__board_wait_for(&q->b, awaited_peers(&q->call, c->rank, c->size));
    if (err != 0) {
      r->status = err;
      return true;
    }
    q->state = 1;
    crnet__board_track(&q->b, true);
  }
  if (err != 0) {
    crnet__board_track(&q->b, false);
    r->status = err;
    return true;
  }
  if (q->state == 1) {
    if (!crnet__board_turn(&q->b))
      return false;
    if (q->b.rc != 0) { /* the last call's owed posts said a mismatch */
      crnet__board_track(&q->b, false);
      r->status = q->b.rc;
      return true;
    }
    write_cells(&q->b, &q->call, q->send, q->recv);
    crnet__board_post(&q->b);
    q->state = 2;
  }
  if (!crnet__board_poll(&q->b))
    return false;
  crnet__board_track(&q->b, false);
  if (q->b.rc == 0) {
    read_cells(&q->b, &q->call, q->send, q->recv, q->dt, q->op);
    crnet__board_close(&q->b);
  }
  r->status = q->b.rc;
  return true;
}

static void board_account(crnet_request *r) {
  board_req *q = (board_req *)r;
  if (q->state > 0) {
    crnet__board_account(&q->b, r->status);
  } else {
    r->comm->coll_stats[r->coll].calls++;
    r->comm->coll_stats[r->coll].failed += r->status != 0;
  }
}

static void board_release(crnet_request *r) { (void)r; }

static const crnet__req_ops board_ops = {
    .advance = board_advance,
    .account = board_account,
    .release = board_release,
};

static void fill_request(board_req *q, const crnet__call *call,
                         const void *send, void *recv, crnet_datatype dt,
                         crnet_op op, const crnet__frame_call *fcall,
                         uint64_t sig) {
  q->call = *call;
  q->call.counts = NULL; /* board calls have equal shares (checked) */
  q->call.displs = NULL;
  q->send = send;
  q->recv = recv;
  q->dt = dt;
  q->op = op;
  q->req.ops = &board_ops;
  q->req.blocking = false;
  q->req.board = true;
  q->req.coll = (uint8_t)call->coll;
  q->req.sig = (uint32_t)sig;
  q->req.call = *fcall;
  q->req.peers = q->req.peers_small;
  q->req.npeers = 0;
}

static int start_request(crnet_comm *c, const crnet__call *call,
                         const void *send, void *recv, crnet_datatype dt,
                         crnet_op op, const crnet__frame_call *fcall,
                         uint64_t sig, bool blocking, crnet_request **out) {
  board_req *q = (board_req *)crnet__req_alloc(c, sizeof *q);
  int rc;
  if (q == NULL)
    return CRNET_ENOMEM;
  fill_request(q, call, send, recv, dt, op, fcall, sig);
  q->req.blocking = blocking;
  q->state = 0;
  rc = crnet__req_start(c, &q->req);
  if (rc != 0) {
    crnet__req_discard(&q->req);
    return rc;
  }
  *out = &q->req;
  return 0;
}

/* A blocking call: on this thread, the loop held while it waits, unless
 * another thread wants the loop: then it goes on as a request, waited for
 * as any blocking call's (crnet__req_adopt). */
static int run_blocking(crnet_comm *c, const crnet__call *call,
                        const void *send, void *recv, crnet_datatype dt,
                        crnet_op op, const crnet__frame_call *fcall,
                        uint64_t sig) {
  crnet__board_call b;
  crnet_request *r;
  board_req *q;
  int rc = crnet__board_begin(c, call->coll, fcall, sig, &b);
  if (rc == CRNET__LOOP_BUSY) {
    /* Another thread runs the loop: it moves this call as a request. */
    rc = start_request(c, call, send, recv, dt, op, fcall, sig, true, &r);
    return rc != 0 ? rc : crnet_wait(&r);
  }
  if (rc != 0)
    return rc;
  crnet__board_wait_for(&b, awaited_peers(call, c->rank, c->size));
  rc = crnet__board_wait_turn(&b);
  if (rc == 0) {
    write_cells(&b, call, send, recv);
    crnet__board_post(&b);
    rc = crnet__board_wait(&b);
  }
  if (rc != CRNET__BOARD_HAND_OVER) {
    if (rc == 0)
      read_cells(&b, call, send, recv, dt, op);
    return crnet__board_end(&b, rc);
  }
  q = (board_req *)crnet__req_alloc(c, sizeof *q);
  if (q == NULL) {
    /* Cannot hand over (no memory): waits on, holding the loop. */
    b.hold = true;
    rc = b.posted ? 0 : crnet__board_wait_turn(&b);
    if (rc == 0 && !b.posted) {
      write_cells(&b, call, send, recv);
      crnet__board_post(&b);
    }
    if (rc == 0)
      rc = crnet__board_wait(&b);
    if (rc == 0)
      read_cells(&b, call, send, recv, dt, op);
    return crnet__board_end(&b, rc);
  }
  fill_request(q, call, send, recv, dt, op, fcall, sig);
  q->b = b;
  q->state = b.posted ? 2 : 1;
  crnet__board_track(&q->b, true);
  crnet__req_adopt(c, &q->req, b.id.seq, b.started);
  crnet__loop_release(c);
  r = &q->req;
  return crnet_wait(&r);
}

bool crnet__board_try(crnet_comm *c, const crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, crnet_op op,
                      const crnet__frame_call *fcall, uint64_t sig,
                      bool blocking, crnet_request **out, int *rc) {
  uint32_t bytes = c->w->shm_board; /* rank 0's: the job's */
  if (!crnet__board_enabled(c) || !board_collective(call) ||
      share_bytes(call) > bytes)
    return false;
  *rc = blocking ? run_blocking(c, call, send, recv, dt, op, fcall, sig)
                 : start_request(c, call, send, recv, dt, op, fcall, sig, false,
                                 out);
  return true;
}
