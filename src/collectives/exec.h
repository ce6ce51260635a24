/* The executor: runs one rank's schedule (schedule.h) over the comm's links.
 *
 * It is the only code that does I/O for collectives, so what makes them fast
 * lives here once: the receive of a round is posted before its send, data
 * leaves straight from and lands straight in the regions the schedule names
 * (gather and scatter lists, no staging copies), and nothing blocks: a call
 * is a request (request.h) that the progress engine moves on round by round
 * while the program waits, computes, or starts other calls.
 */
#ifndef CRNET_EXEC_H
#define CRNET_EXEC_H

#include <stdbool.h>

#include "comm.h"
#include "memo.h"
#include "schedule.h"

typedef struct crnet__exec_args {
  crnet_collective coll;
  bool exclusive;          /* exscan (its name in traces) */
  uint32_t sig;            /* the call's signature, checked by receivers */
  crnet__frame_call call;  /* its arguments, sent in every DATA frame */
  const void *send;        /* the caller's input (ignored when in_place:
                              SEND then names recv) */
  void *recv;              /* its output */
  bool in_place;
  crnet_datatype dt;
  crnet_op op;
  uint64_t normalise;      /* > 0: the call has one operand, and that many
                              elements of recv get the logical operators'
                              0 or 1 at the end */
  bool blocking;           /* the caller waits for it at once */
  bool quiet;              /* the library's own call: no trace events */
  /* allgatherv with displacements: the schedule fills a packed buffer of
   * the call's own (block b at the sum of the counts before it), and at
   * the end block b goes to recv + unpack_displs[b] (p entries each,
   * elements). In place, this rank's block is first taken from recv +
   * unpack_displs[rank]. NULL: recv is packed already. */
  const uint64_t *unpack_counts, *unpack_displs;
  int32_t rank, p;
  /* The shape s was built for (memo.h), to which s goes back when the call
   * ends, or NULL: s is freed then. */
  crnet__sched_memo *memo;
} crnet__exec_args;

/* Makes the call a request and starts it: s and a->memo are taken (freed,
 * or s given back to the memo, whatever happens). TEMP (s->temp_count elements) is the call's own, from the
 * comm's scratch when it is free (kept between calls up to 256 MiB, see
 * exec.c). Returns 0 with *out set, or CRNET_ENOMEM or the comm's sticky
 * error with *out NULL. */
int crnet__exec_start(crnet_comm *c, crnet__schedule *s,
                      const crnet__exec_args *a, crnet_request **out);

#endif
