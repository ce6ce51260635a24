/* The schedule of a comm's last call of each collective, kept for the next
 * call of the same shape.
 *
 * Building a schedule is a pure function of the call's shape (schedule.h),
 * and programs call the same shape again and again (a training step, a
 * solver's iteration). For a small call the build and the free of its
 * schedule cost about a fifth of all the instructions the call runs, so a
 * comm keeps, per collective, the schedule of the call that ended last,
 * with the shape it was built for; a call of that shape takes it instead of
 * building one, and gives it back when it ends.
 *
 * A kept schedule belongs to one call at a time: a call takes it out of the
 * comm, so two calls in flight of one shape never share it (the second
 * builds its own, and whichever ends last is kept). Every function here
 * takes the comm's lock (c->w->mu) itself. */
#ifndef CRNET_MEMO_H
#define CRNET_MEMO_H

#include <stdint.h>

#include "crnet.h"
#include "schedule.h"
#include "select.h"

typedef struct crnet__sched_memo crnet__sched_memo;

/* The memo of the call's shape (schedule `id`), with its schedule in *s
 * when the comm kept one of that shape (*hit = true); else a memo holding
 * only the shape, for the schedule the caller builds (*hit = false). NULL
 * (nothing kept, nothing to give back) when the shape is not one that is
 * kept (per-rank displacements) or memory is short. */
crnet__sched_memo *crnet__memo_take(crnet_comm *c, const crnet__call *call,
                                    uint32_t id, crnet__schedule *s, bool *hit);

/* The call has ended: s (its schedule, built for m's shape) is kept in the
 * comm with m, or freed with it. */
void crnet__memo_give_back(crnet_comm *c, crnet__sched_memo *m,
                           crnet__schedule *s);

/* Frees m and nothing else (a call that never started). */
void crnet__memo_drop(crnet__sched_memo *m);

#endif
