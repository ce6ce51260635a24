/* soak.h: what soak.c (the program, its draws and its checks) and
 * soak_inflight.c (the --in-flight mode) share: the state of a step and of
 * the run, the buffers and one call's state, and the functions each file
 * calls in the other. Internal to the soak program.
 */
#ifndef SOAK_H
#define SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

#define GUARD 32 /* bytes either side of every buffer */
#define MAX_IN_FLIGHT 64

/* --- types --------------------------------------------------------------- */

enum kind {
  K_ALLREDUCE,
  K_RSB,
  K_RS,
  K_SCAN,
  K_EXSCAN,
  K_ALLTOALL,
  K_ALLGATHER,
  K_BCAST,
  K_REDUCE,
  K_BARRIER,
  K_COUNT
};

/* One step's call, as every rank drew it. */
typedef struct step {
  uint64_t n;      /* step number */
  enum kind kind;
  const char *schedule;
  int opk;         /* operator kind, < OP_KINDS */
  crnet_op op;     /* the handle */
  crnet_datatype dt;
  size_t count;    /* elements per block (irregular: see counts) */
  size_t *counts;  /* reduce_scatter: p entries */
  bool in_place;
  int root;
  bool null_recv;  /* reduce at a non-root: recv NULL */
  uint64_t salt;   /* mixes seed and step into the inputs */
  const char *how; /* in flight: how it ran or completed; NULL otherwise */
} step;

/* The in-flight mode's own generators, apart from the draws' (rng), so that
 * step n is the same call whatever --in-flight is. */
typedef struct gen {
  uint64_t state;
} gen;

typedef struct ctx {
  crnet_comm *comm;
  int p, rank;
  uint64_t seed;
  size_t max_bytes;
  bool trace;
  crnet_op user_comm, user_noncomm;
  uint64_t *base; /* p per-rank input bases of the current step */
  /* counts */
  uint64_t steps, per_kind[K_COUNT], in_place, user_calls, refused,
      bytes, failures, reports;
  uint64_t shared_hash;
  bool broken;
  int corrupt_rank; /* SOAK_CORRUPT: this rank expects one wrong element */
  /* In flight: K, the batches' shape (alike on every rank) and this rank's
   * order of completion, and counts of what happened. */
  int in_flight;
  gen shape, order;
  uint64_t started, between, by_wait, by_test, by_waitany, by_waitall,
      callbacks;
} ctx;

typedef struct buf {
  uint8_t *raw;
  uint8_t *p; /* raw + GUARD */
  size_t len;
} buf;

/* One call from its buffers to its checks: what a blocking step holds for
 * the length of the call, and a call in flight until its batch ends. */
typedef struct call_state {
  step *s;
  size_t send_elems, recv_elems, want_elems, want_at;
  buf sb, rb;
  uint8_t *want, *before;
  bool check_untouched; /* recv must stay as it was */
} call_state;

/* --- in soak.c ----------------------------------------------------------- */

uint64_t gen_below(gen *g, uint64_t n);
size_t width(crnet_datatype dt);
void *xmalloc(size_t n);
void buf_free(buf *b);

/* A failure: counted, and reported on stderr (up to MAX_REPORTS). */
void report(ctx *x, const step *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t fnv(const uint8_t *b, size_t n);
void mix_hash(ctx *x, uint64_t h, size_t n);

void set_bases(ctx *x, const step *s);
void prepare(ctx *x, call_state *cs);
int go(ctx *x, call_state *cs, crnet_request **req);
bool refusal_ok(ctx *x, call_state *cs);
int fall_back(ctx *x, call_state *cs);
void check(ctx *x, call_state *cs);
bool shared_result(const step *s);
void free_expectations(call_state *cs);
void run_step(ctx *x, step *s);

void draw(ctx *x, step *s);
void count_step(ctx *x, const step *s);
int sync_point(ctx *x, const step *s, uint64_t n, double minutes, double t0,
               double *last_progress);
void trace_step(const ctx *x, const step *s, const char *what);
void set_schedule(ctx *x, step *s);

/* --- in soak_inflight.c -------------------------------------------------- */

/* A call in flight; main holds K of them but never looks inside. */
typedef struct flight flight;

flight *flights_make(int k, int p);
void flights_free(flight *fl, int k);
bool soak_in_flight(ctx *x, flight *fl, step *b, bool have_count,
                    uint64_t count, double minutes, double t0);

#endif
