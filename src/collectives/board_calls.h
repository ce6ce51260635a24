/* Small blocking collectives on the shared-memory boards (board_calls.c;
 * the runtime's side is board.h). */
#ifndef CRNET_BOARD_CALLS_H
#define CRNET_BOARD_CALLS_H

#include <stdbool.h>
#include <stdint.h>

#include "crnet.h"
#include "frame.h"
#include "select.h"

/* What a comm keeps of its boards (in its crnet__comm_state). Only the
 * thread calling a collective on the comm touches it: calls on one comm are
 * made one at a time, in the same order on every rank. */
typedef struct crnet__board_state {
  bool agreeing;       /* the agreement's own allreduce runs */
  uint64_t candidates; /* calls that could have used a board so far */
  uint64_t next_ask;   /* the candidate at which the ranks ask again */
} crnet__board_state;

/* Runs a checked blocking call on the comm's boards if it can (see
 * board_calls.c): true with the call's result in *rc, or false, having
 * changed nothing that the call's usual path would see. fcall and sig: the
 * call as its frames would carry it. */
bool crnet__board_try(crnet_comm *c, const crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, crnet_op op,
                      const crnet__frame_call *fcall, uint64_t sig, int *rc);

#endif
