/* The trace of one rank: CRNET_TRACE=path writes every collective and every
 * round of it as Chrome trace events (the JSON array format that Perfetto,
 * chrome://tracing and speedscope read), one file per rank.
 *
 * Events, all complete events ("ph": "X") of process `rank`:
 *   - thread 0 ("collectives"): one per call, named "allreduce #4", with
 *     the call's arguments and what it cost (bytes, time waiting for
 *     messages, time reducing, the result);
 *   - thread 1 ("rounds"): one per round k of the schedule,
 *     with the peer sent to and received from (ranks of the job, the
 *     trace's processes), the bytes of each, and the time waiting and
 *     reducing. Rounds a schedule runs several at a time (pairwise
 *     all-to-all) go to threads 2 + k % window of their own so that no two
 *     events of one thread overlap.
 *   - the calls and rounds of a sub-communicator (context id c > 0) go to
 *     threads of their own, 64 c and 64 c + 1 + lane, named "comm c:
 *     collectives" and "comm c: rounds": calls of different comms may be
 *     in flight at once. Their events are named "allreduce #4 (comm c)"
 *     (the number counts the comm's own calls) and carry the rank and size
 *     in the comm.
 * Times are microseconds of the real-time clock, taken once when the file
 * is opened and carried forward by the monotonic clock: steady within a
 * rank, and as well aligned across ranks and hosts as their clocks are.
 *
 * Events are written as they end, through a stdio buffer; the closing
 * bracket comes at crnet_comm_destroy, and a file without it (a rank that
 * died) still loads, as the format allows.
 */
#ifndef CRNET_TRACE_H
#define CRNET_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct crnet__trace crnet__trace;

/* The file name for `rank` from CRNET_TRACE's `path`: every "%r" is
 * replaced by the rank; without one, ".<rank>" goes in before the last
 * extension ("run.json" -> "run.3.json"), or at the end. 0, or -1 when the
 * name does not fit `n`. */
int crnet__trace_path(const char *path, int rank, char *out, size_t n);

/* Opens the trace of `rank` of `size` (`where` names its host for the
 * process name). 0, or an errno value with nothing opened. */
int crnet__trace_open(crnet__trace **out, const char *path, int rank,
                      int size, const char *where);

/* A finished collective, from t0 to t1 (uv_hrtime). `name` is the
 * collective ("exscan" for exscan), `what` its arguments in words. */
typedef struct crnet__trace_call {
  const char *name;
  uint64_t seq;
  const char *what;
  uint64_t bytes_sent, bytes_received;
  uint64_t wait_ns, reduce_ns;
  uint32_t rounds;
  const char *result; /* "ok" or the error's name */
  uint32_t ctx;       /* the comm's context id (0: the world comm) */
  int comm_rank, comm_size;
} crnet__trace_call;
void crnet__trace_collective(crnet__trace *t, uint64_t t0, uint64_t t1,
                             const crnet__trace_call *call);

/* Round k of the current collective, from t0 to t1, on lane `lane`; peers
 * are -1 for none. */
typedef struct crnet__trace_round {
  uint32_t k;
  uint32_t lane;
  int to, from; /* ranks of the job */
  uint64_t bytes_sent, bytes_received;
  uint64_t wait_ns, reduce_ns;
  uint32_t ctx; /* the comm's context id */
} crnet__trace_round;
void crnet__trace_round_done(crnet__trace *t, uint64_t t0, uint64_t t1,
                             const crnet__trace_round *r);

/* Puts what is buffered into the file now: after a failed call, since a
 * failing rank may well exit without crnet_comm_destroy, or be killed. */
void crnet__trace_flush(crnet__trace *t);

/* Writes the closing bracket and closes the file. NULL is a no-op. */
void crnet__trace_close(crnet__trace *t);

#endif
