/* The schedule simulator: runs the p schedules of one collective in one
 * process over an in-memory network, with real 8-byte elements, and checks
 * them (see sim.c for the rules). Used by tests and tools; no I/O except
 * the dump function.
 */
#ifndef CRNET_SIM_H
#define CRNET_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "schedule.h"

/* The operator: returns left (+) right, "left" being the operand of the
 * lower ranks. Need not be commutative. */
typedef uint64_t (*crnet__sim_combine)(uint64_t left, uint64_t right);

typedef struct crnet__sim_stats {
  uint64_t comm_rounds;   /* rounds with a send or a receive */
  uint64_t msgs_sent;     /* declared sends (zero-length ones included) */
  uint64_t msgs_recv;
  uint64_t elems_sent;
  uint64_t elems_recv;
  uint64_t elems_reduced; /* sum of REDUCE step counts */
  uint64_t elems_copied;  /* sum of COPY step counts */
} crnet__sim_stats;

/* One rank, filled by the caller before crnet__sim_run.
 *   sched       the rank's schedule (borrowed; sched->p and rank must match)
 *   send        send_count input elements (ignored in place; may be NULL
 *               when send_count is 0)
 *   recv        recv_count elements, caller-owned: RECV[init_off ..
 *               init_off+init_count) is input (in place, a bcast root),
 *               counted as written; the whole array is the output
 *   stats       filled by crnet__sim_run */
typedef struct crnet__sim_rank {
  const crnet__schedule *sched;
  const uint64_t *send;
  uint64_t send_count;
  uint64_t *recv;
  uint64_t recv_count;
  uint64_t init_off, init_count;
  crnet__sim_stats stats;
} crnet__sim_rank;

/* Runs ranks[0..p). in_place: SEND aliases RECV on every rank (reads of SEND
 * read RECV; writing SEND is still an error). causal: also check that by the
 * end every rank has (transitively) heard from every rank (barriers).
 * Returns 0, CRNET_EIO with a message in err (naming ranks and round) when a
 * schedule is wrong, or CRNET_ENOMEM. */
int crnet__sim_run(crnet__sim_rank *ranks, int32_t p, bool in_place,
                   bool causal, crnet__sim_combine combine, char *err,
                   size_t errlen);

/* Writes a schedule as text, one line per send, receive and step, for golden
 * files. Stable format: change it only together with the golden files. */
void crnet__sched_dump(const crnet__schedule *s, FILE *out);

#endif
