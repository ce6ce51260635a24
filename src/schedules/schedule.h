/* Schedules: a collective as data.
 *
 * A schedule is what one rank does in one collective, as a list of rounds.
 * Builders (circulant.c, ring.c, ...) are pure functions of (collective, p,
 * rank, block sizes, in-place or not) that produce a schedule; they never do
 * I/O and never touch payload. The executor (exec.c) runs a schedule over the
 * links; the simulator (sim.c) runs the schedules of all p ranks in one
 * process and checks them. So every algorithm is written once and proven
 * before it touches a socket.
 *
 * Units are elements, never bytes: the executor multiplies by the datatype's
 * size. Buffers are named, never pointers:
 *
 *   CRNET__BUF_SEND  the caller's input (read only; the executor maps it to
 *                    the receive buffer when the call is in place, and the
 *                    builder is told, so it never overwrites input it still
 *                    needs)
 *   CRNET__BUF_RECV  the caller's output
 *   CRNET__BUF_TEMP  scratch owned by the executor, sched->temp_count
 *                    elements long
 *
 * A round has at most one send and at most one receive, each to one peer and
 * each a list of segments (a gather list and a scatter list: data leaves
 * from, and lands straight in, the regions named, with no staging copy), then
 * local steps, in order:
 *
 *   CRNET__STEP_REDUCE  dst = src (+) dst   when order == CRNET__SRC_LEFT
 *                       dst = dst (+) src   when order == CRNET__DST_LEFT
 *                       ("left" is the operand of the lower ranks, which is
 *                       what matters for non-commutative operators)
 *   CRNET__STEP_COPY    dst = src
 *
 * The send and the receive of a round happen together (the executor posts the
 * receive first), so a round never receives into memory it is sending from;
 * steps run after both are complete. Frames carry the round index, rounds
 * without messages included. Round k of a sender
 * matches round k of its receiver: the executor tags frames with the round
 * number, and the simulator checks that the lengths agree. A round may have
 * neither send nor receive (local steps only), and ranks may have different
 * numbers of rounds.
 *
 * Independent rounds. A builder may mark a round independent
 * (crnet__sched_round_independent) when it does not depend on the rounds
 * before it back to the last unmarked one (its group): it receives from a
 * peer none of them receives from, it sends nothing they receive or write,
 * and it receives and writes nothing they send, receive, read or write. The
 * executor may then run the rounds of a group at the same time (their
 * messages in flight together, each round's steps still run in round
 * order); the simulator checks every such claim.
 */
#ifndef CRNET_SCHEDULE_H
#define CRNET_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum crnet__buf {
  CRNET__BUF_SEND = 0,
  CRNET__BUF_RECV = 1,
  CRNET__BUF_TEMP = 2,
  CRNET__BUF_COUNT
};

enum crnet__step_kind { CRNET__STEP_REDUCE = 1, CRNET__STEP_COPY = 2 };

enum crnet__order { CRNET__SRC_LEFT = 0, CRNET__DST_LEFT = 1 };

/* count elements at element offset off of buffer buf. */
typedef struct crnet__seg {
  uint8_t buf;
  uint64_t off;
  uint64_t count;
} crnet__seg;

/* A send or a receive: a peer (or -1 for none) and segs[first .. first+n). */
typedef struct crnet__xfer {
  int32_t peer;
  uint32_t first_seg;
  uint32_t nsegs;
} crnet__xfer;

typedef struct crnet__step {
  uint8_t kind;  /* enum crnet__step_kind */
  uint8_t order; /* enum crnet__order, for REDUCE */
  crnet__seg src;
  crnet__seg dst; /* dst.count == src.count */
} crnet__step;

typedef struct crnet__round {
  crnet__xfer send;
  crnet__xfer recv;
  uint32_t first_step;
  uint32_t nsteps;
  bool independent; /* of the rounds of its group, see above */
} crnet__round;

typedef struct crnet__schedule {
  int32_t p;
  int32_t rank;
  uint64_t temp_count; /* elements of CRNET__BUF_TEMP needed */
  crnet__round *rounds;
  uint32_t nrounds;
  crnet__seg *segs;
  uint32_t nsegs;
  crnet__step *steps;
  uint32_t nsteps;
  /* building */
  uint32_t cap_rounds, cap_segs, cap_steps;
  bool oom; /* an append failed; crnet__sched_finish reports it */
} crnet__schedule;

/* --- building (for builders) -------------------------------------------
 * Appends never fail visibly: on allocation failure the schedule is marked
 * and crnet__sched_finish returns CRNET_ENOMEM, so builders stay linear. */

void crnet__sched_init(crnet__schedule *s, int32_t p, int32_t rank);
/* Starts a new round; later sends, receives and steps belong to it. */
void crnet__sched_round(crnet__schedule *s);
/* The same, for a round independent of the rounds of its group (see
 * above). */
void crnet__sched_round_independent(crnet__schedule *s);
/* Adds a segment to the current round's send to `peer` (every segment of a
 * round's send goes to the same peer). Zero-count segments are kept out. */
void crnet__sched_send(crnet__schedule *s, int32_t peer, uint8_t buf,
                       uint64_t off, uint64_t count);
void crnet__sched_recv(crnet__schedule *s, int32_t peer, uint8_t buf,
                       uint64_t off, uint64_t count);
/* Declares a send or receive of the round even if all its segments are
 * empty, so that a zero-length message still travels (a synchronisation). */
void crnet__sched_send_peer(crnet__schedule *s, int32_t peer);
void crnet__sched_recv_peer(crnet__schedule *s, int32_t peer);
void crnet__sched_reduce(crnet__schedule *s, crnet__seg src, crnet__seg dst,
                         uint8_t order);
void crnet__sched_copy(crnet__schedule *s, crnet__seg src, crnet__seg dst);
/* Makes sure TEMP has at least `count` elements. */
void crnet__sched_need_temp(crnet__schedule *s, uint64_t count);
/* 0, or CRNET_ENOMEM (the schedule is then freed). */
int crnet__sched_finish(crnet__schedule *s);
void crnet__sched_free(crnet__schedule *s);

static inline crnet__seg crnet__seg_make(uint8_t buf, uint64_t off,
                                         uint64_t count) {
  crnet__seg g = {buf, off, count};
  return g;
}

/* ceil(log2 p) and floor(log2 p) for p >= 1: the round counts of the
 * schedules (builders, the cost model, crsched). */
static inline int crnet__ceil_log2(int32_t p) {
  int k = 0;
  while ((INT64_C(1) << k) < p)
    k++;
  return k;
}

static inline int crnet__floor_log2(int32_t p) {
  int k = 0;
  while ((INT64_C(2) << k) <= p)
    k++;
  return k;
}

/* --- composing ---------------------------------------------------------
 * Where a schedule of a subgroup (a "sub-schedule", built for sub_p ranks
 * by any builder) runs inside a bigger one: rank_of[i] is the rank of
 * sub-rank i, and sub-buffer b lives in buffer buf[b] from element off[b]
 * on. Two-level schedules (twolevel.c) are made of such pieces. */
typedef struct crnet__sched_map {
  const int32_t *rank_of;
  uint8_t buf[CRNET__BUF_COUNT];
  uint64_t off[CRNET__BUF_COUNT];
} crnet__sched_map;

/* Adds empty rounds to s until it has `at` (none if it has as many). */
void crnet__sched_pad(crnet__schedule *s, uint32_t at);

/* Appends sub's rounds to s, mapped by m, so that sub's round 0 becomes
 * s's round `at` (s is padded with empty rounds up to it; it must not have
 * more rounds than that yet). Peers, segments, steps and TEMP needs are
 * mapped; a first round marked independent loses the mark, because the
 * rounds before it in s are not sub's. */
void crnet__sched_embed(crnet__schedule *s, const crnet__schedule *sub,
                        const crnet__sched_map *m, uint32_t at);

/* Total elements of a send or receive. */
uint64_t crnet__xfer_count(const crnet__schedule *s, const crnet__xfer *x);

/* --- blocks ----------------------------------------------------------------
 * The one place that cuts a vector of `count` elements into p blocks: block b
 * has count/p elements, plus one for b < count mod p, and blocks are laid
 * out in order. */
void crnet__block_range(uint64_t count, int32_t p, int32_t b, uint64_t *off,
                        uint64_t *n);

/* Offsets of irregular blocks: a new array P of p+1 elements, P[b] the
 * offset of block b and P[p] the total, for the caller to free. NULL with
 * *rc = CRNET_EINVAL (counts NULL, p < 1, a total beyond 2^64) or
 * CRNET_ENOMEM. */
uint64_t *crnet__block_offsets(const uint64_t *counts, int32_t p, int *rc);

#endif
