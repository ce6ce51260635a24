/* Small blocking collectives among the ranks of one host on the
 * shared-memory boards (board.h: the cells, the posts, the wait).
 *
 * Every call here is one round: each rank writes into its cell for each
 * peer what that peer needs of it, posts, waits for every peer's post and
 * reads their cells. Reductions combine the contributions in rank order
 * (x0 + (x1 + (... + x(p-1)))) on every rank that needs the result, so
 * the result is bitwise the same on every rank and the operator need not
 * commute. With p ranks each rank reads p - 1 cells: flat, which on one
 * host of a few to a few tens of ranks is one cache line's crossing per
 * peer for 8 bytes, where a tree would put log p crossings in a row.
 *
 * Which calls. A comm uses its boards once its ranks agreed that they can
 * (crnet__board_prepare on each, then one allreduce): every rank has a live
 * shared-memory link to every other, and the comm has at most
 * CRNET__BOARD_MAX_RANKS ranks and a slot. CRNET_SHM_BOARD_BYTES is rank
 * 0's, carried to every rank by the rendezvous. The ranks ask at the 1st,
 * 2nd, 4th, ... call that could use a board (then every 4096th), so a
 * comm whose links are still moving onto shared memory gets there a few
 * calls later. A call uses the board when it is blocking, its collective
 * is one of those below with the comm's schedule choice `auto`, the
 * comm is on one host, and each peer's share is at most those bytes.
 * All of that is alike on every rank, as the choice must be: a rank that
 * called differently is told by the board (CRNET_EMISMATCH), as frames
 * tell it elsewhere.
 *
 * Not here: nonblocking calls (a request needs the engine), vector
 * shapes, exscan, reduce-scatter, gather and scatter. */
#include "board_calls.h"

#include <string.h>

#include "board.h"
#include "comm_state.h"
#include "ops.h"

/* After this many tries, every BOARD_RETRY_EVERY-th candidate call. */
#define BOARD_RETRY_EVERY 4096

static bool board_collective(const crnet__call *call) {
  switch (call->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_BCAST:
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

/* The bytes each rank hands each peer (alltoall: one block; the others:
 * its whole contribution). */
static uint64_t share_bytes(const crnet__call *call) {
  return call->coll == CRNET_COLL_BARRIER ? 0 : call->count * call->esize;
}

/* Asks the comm's ranks whether they can all use the board from now on:
 * one allreduce of each rank's readiness (crnet__board_prepare). */
static int agree(crnet_comm *c, crnet__board_state *st) {
  int32_t mine = crnet__board_prepare(c), all = 0;
  int rc;
  st->agreeing = true;
  rc = crnet_allreduce(c, &mine, &all, 1, CRNET_INT32, CRNET_MIN);
  st->agreeing = false;
  if (rc == 0 && all != 0)
    crnet__board_enable(c);
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

static int run(crnet__board_call *b, const crnet__call *call, const void *send,
               void *recv, crnet_datatype dt, crnet_op op) {
  size_t bytes = (size_t)share_bytes(call);
  const uint8_t *src = send == CRNET_IN_PLACE ? recv : send;
  int rc;
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
  crnet__board_post(b);
  if ((rc = crnet__board_wait(b)) != 0)
    return rc;
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
  return 0;
}

bool crnet__board_try(crnet_comm *c, const crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, crnet_op op,
                      const crnet__frame_call *fcall, uint64_t sig, int *rc) {
  crnet__board_state *st = &c->coll->board;
  crnet__board_call b;
  uint32_t bytes = c->w->shm_board; /* rank 0's: the job's */
  if (bytes == 0 || st->agreeing || call->nhosts != 1 || call->tcp_links ||
      call->p < 2 || call->p > CRNET__BOARD_MAX_RANKS ||
      c->ctx >= CRNET__BOARD_SLOTS || !board_collective(call) ||
      share_bytes(call) > bytes)
    return false;
  if (!crnet__board_enabled(c)) {
    /* A candidate: alike on every rank, so they all ask at the same one. */
    st->candidates++;
    if (st->candidates != st->next_ask)
      return false;
    st->next_ask = st->next_ask < BOARD_RETRY_EVERY
                       ? st->next_ask * 2
                       : st->next_ask + BOARD_RETRY_EVERY;
    if ((*rc = agree(c, st)) != 0)
      return true;
    if (!crnet__board_enabled(c))
      return false;
  }
  if (share_bytes(call) > bytes)
    return false;
  if ((*rc = crnet__board_begin(c, call->coll, fcall, sig, &b)) != 0)
    return true;
  *rc = crnet__board_end(&b, run(&b, call, send, recv, dt, op));
  return true;
}
