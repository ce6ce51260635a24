/* What the files of the collective calls share (collectives.c has the
 * first ones; vector.c the rooted and vector shapes): the argument checks
 * every call makes, and the start of a checked call, which resolves the
 * comm's schedule choice, builds the schedule, signs the call and hands it
 * to the executor. */
#ifndef CRNET_CALLS_H
#define CRNET_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "select.h"

/* The calls this thread starts from now on are the library's own (on) or
 * the program's again (off): see collectives.c. */
void crnet__coll_quiet(bool on);

/* Starts a call whose arguments are checked (nothing reduced). */
int crnet__coll_start(crnet_comm *c, crnet__call *call, const void *send,
                      void *recv, crnet_datatype dt, bool blocking,
                      crnet_request **out);

/* The comm and the datatype: 0 or CRNET_EINVAL with the reason. */
int crnet__coll_check(crnet_comm *c, const char *what, crnet_datatype dt);

/* A nonblocking call's request pointer: 0 (and *req = NULL) or
 * CRNET_EINVAL. */
int crnet__coll_check_req(crnet_comm *c, const char *what,
                          crnet_request **req);

/* Whether count elements of esize bytes make a buffer that can exist. */
bool crnet__coll_fits(uint64_t count, size_t esize);

/* Distinct send and receive buffers must not overlap: 0 or CRNET_EINVAL. */
int crnet__coll_no_overlap(crnet_comm *c, const char *what, const void *send,
                           size_t send_bytes, const void *recv,
                           size_t recv_bytes);

#endif
