/* What the collectives layer keeps in each comm, and the hooks through
 * which the runtime reaches this layer.
 *
 * The runtime holds a comm's collective state as an opaque pointer
 * (crnet_comm's `coll`, comm.h) and never looks inside: it makes and frees
 * it, and writes a call in words, only through the crnet__upper_layer this
 * layer hands crnet__comm_init (crnet_comm_init is defined here for that).
 * So the runtime links without any symbol of the collectives or the
 * schedules (tests/test_layers.sh). */
#ifndef CRNET_COMM_STATE_H
#define CRNET_COMM_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "memo.h"

/* A schedule's name as a comm keeps it: the settings' CRNET_*_SCHEDULE
 * values are as long (settings.c). */
#define CRNET__SCHEDULE_NAME_BYTES 32

/* What auto chose for the last call of a collective, and that call's shape
 * (collectives.c). */
typedef struct crnet__auto_memo {
  uint64_t count;
  uint32_t esize;
  bool commutative, exclusive;
  const char *name; /* NULL: nothing remembered */
  uint32_t id;
} crnet__auto_memo;

/* Every field under the comm's lock (c->w->mu). */
struct crnet__comm_state {
  /* Chosen schedule per collective ("auto" unless set): the parent's for a
   * comm of split or dup, the job's settings for the world comm. */
  char schedule[CRNET_COLL_COUNT][CRNET__SCHEDULE_NAME_BYTES];
  crnet__auto_memo auto_memo[CRNET_COLL_COUNT];
  /* The schedule kept from the last call of each collective (memo.h), or
   * NULL. */
  crnet__sched_memo *sched_memo[CRNET_COLL_COUNT];
  /* The schedule the last call of each collective ran (a static name,
   * NULL before the first; crnet_comm_last_schedule). */
  const char *last_schedule[CRNET_COLL_COUNT];
};

/* The end of making a comm (init, split, dup, shrink, grow) that
 * returned rc with *out: the boards' agreement (board_calls.c) on a new
 * comm. Returns rc. */
int crnet__comm_made(crnet_comm **out, int rc);

/* "allreduce #4 (100 x float, sum, schedule ring)": a call as its frames
 * describe it (collectives.c), for the runtime's mismatch messages and the
 * executor's. */
void crnet__call_format(uint8_t coll, uint64_t seq,
                        const crnet__frame_call *call, char *buf, size_t n);

#endif
