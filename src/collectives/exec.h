/* The executor: runs one rank's schedule (schedule.h) over the comm's links.
 *
 * It is the only code that does I/O for collectives, so what makes them fast
 * lives here once: the receive of a round is posted before its send, data
 * leaves straight from and lands straight in the regions the schedule names
 * (gather and scatter lists, no staging copies), and waiting sleeps in the
 * event loop.
 */
#ifndef CRNET_EXEC_H
#define CRNET_EXEC_H

#include <stdbool.h>

#include "comm.h"
#include "schedule.h"

/* Runs s for the collective begun with crnet__coll_begin. send is the
 * caller's input (ignored when in_place: SEND then names recv), recv its
 * output. sig is the call's signature, checked by every receiver. TEMP
 * (s->temp_count elements) comes from the comm's scratch, which is kept
 * between calls up to 256 MiB (see exec.c). Returns 0, CRNET_ENOMEM, or the
 * comm's sticky error. */
int crnet__exec(crnet_comm *c, const crnet__schedule *s, const void *send,
                void *recv, bool in_place, crnet_datatype dt, crnet_op op,
                uint32_t sig);

#endif
