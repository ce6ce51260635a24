/* Small collectives on the shared-memory boards (board_calls.c;
 * the runtime's side is board.h). */
#ifndef CRNET_BOARD_CALLS_H
#define CRNET_BOARD_CALLS_H

#include <stdbool.h>
#include <stdint.h>

#include "crnet.h"
#include "frame.h"
#include "select.h"

/* Whether the new comm c can use its boards: every rank of it asks, as the
 * comm's first call (see board_calls.c). 0, or the error of that call
 * (the comm has then failed, and its later calls return it). */
int crnet__board_setup(crnet_comm *c);

/* Runs a checked call on the comm's boards if it can (see board_calls.c):
 * true with the call's result in *rc (blocking) or its request in *out
 * (nonblocking; *rc 0 or why it could not start), or false, having changed
 * nothing that the call's usual path would see. fcall and sig: the call as
 * its frames would carry it. */
bool crnet__board_try(crnet_comm *c, const crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, crnet_op op,
                      const crnet__frame_call *fcall, uint64_t sig,
                      bool blocking, crnet_request **out, int *rc);

#endif
