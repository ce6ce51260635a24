/* soak.h: what the files of the soak program share: soak.c (the program,
 * its draws and the collectives' checks), soak_inflight.c (the --in-flight
 * mode), soak_p2p.c (the point-to-point steps) and soak_comms.c (the
 * sub-communicators). The state of a step and of the run, the buffers and
 * one call's state, and the functions each file calls in the others.
 * soak_calls.c holds the collective calls and the vector shapes' buffers.
 * Internal to the soak program.
 */
#ifndef SOAK_H
#define SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

#define GUARD 32 /* bytes either side of every buffer */
#define GUARD_BYTE 0xA5
#define MAX_IN_FLIGHT 64
#define MAX_COMMS 12 /* alive at once, the world included */

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
  K_GATHER,
  K_SCATTER,
  K_ALLGATHERV,
  K_ALLTOALLV,
  K_P2P, /* messages between ranks (soak_p2p.c) */
  K_COUNT
};

typedef struct p2p_plan p2p_plan; /* soak_p2p.c */
typedef struct p2p_run p2p_run;   /* soak_p2p.c */

/* One step's call, as every rank drew it. */
typedef struct step {
  uint64_t n;      /* step number */
  enum kind kind;
  const char *schedule;
  int opk;         /* operator kind, < OP_KINDS */
  crnet_op op;     /* the handle */
  crnet_datatype dt;
  size_t count;    /* elements per block (irregular: see counts; alltoallv:
                      the largest row; p2p: messages) */
  size_t *counts;  /* reduce_scatter, allgatherv: q entries; alltoallv: the
                      q x q matrix, [i * q + j] from comm rank i to j */
  size_t counts_cap;
  bool in_place;
  int root;
  bool null_recv;  /* the buffer a non-root passes but the call ignores
                      (reduce, gather: recv; scatter: send) is NULL */
  uint64_t salt;   /* mixes seed and step into the inputs */
  const char *how; /* in flight: how it ran or completed; NULL otherwise */
  int comm;        /* its comm: a slot of ctx.comms */
  int q;           /* that comm's size */
  int comm_id;     /* and its id (slots are reused) */
  p2p_plan *plan;  /* K_P2P: the messages (soak_p2p.c) */
} step;

/* The in-flight mode's own generators, apart from the draws' (rng), so that
 * step n is the same call whatever --in-flight is; also the per-rank
 * layouts of the vector calls. */
typedef struct gen {
  uint64_t state;
} gen;

/* A communicator of the run: the world, or one made by a split or a dup.
 * Every rank knows every comm's ranks (the draws are alike everywhere);
 * a rank holds the handles of those it is in. */
typedef struct comm_slot {
  bool alive;
  int id;          /* 0: the world; then 1, 2, ... as they are made */
  int parent_id;
  const char *made; /* "world", "split", "dup" */
  int size;        /* q */
  int rank;        /* this rank's rank in it, or -1 */
  int *world_of;   /* [comm rank] -> world rank */
  crnet_comm *c;   /* this rank's handle, NULL if it is not in it */
  uint64_t shared_hash; /* results held alike (sub-comms: a sum) */
  uint64_t steps;
} comm_slot;

typedef struct ctx {
  /* The step's comm (use_comm): the handle (NULL on a rank not in it),
   * its size and this rank's rank in it (-1). */
  crnet_comm *comm;
  int p, rank;
  int cur; /* its slot */
  /* The world. */
  crnet_comm *world;
  int wp, wrank;
  comm_slot comms[MAX_COMMS];
  int next_comm_id;
  uint64_t next_event; /* the step before which comms change next */
  uint64_t seed;
  size_t max_bytes;
  bool trace;
  crnet_op user_comm, user_noncomm;
  uint64_t *base; /* q+1 per-rank input bases of the current step */
  /* counts */
  uint64_t steps, per_kind[K_COUNT], in_place, user_calls, refused,
      bytes, failures, reports;
  uint64_t p2p_msgs, p2p_rdv, p2p_wild, p2p_trunc, p2p_sendrecv;
  uint64_t splits, dups, freed, sub_steps;
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

/* How the send buffer was filled, for the check that it is unchanged. */
enum send_fill { SEND_UNCHECKED, SEND_VALUES, SEND_BYTES };

/* One call from its buffers to its checks: what a blocking step holds for
 * the length of the call, and a call in flight until its batch ends. */
typedef struct call_state {
  step *s;
  size_t send_elems, recv_elems, want_elems, want_at;
  buf sb, rb;
  const void *send_arg; /* as passed: sb.p, CRNET_IN_PLACE or NULL */
  void *recv_arg;
  enum send_fill send_fill;
  uint8_t *want, *before;
  bool check_untouched; /* recv must stay as it was */
  /* allgatherv, alltoallv: the arrays passed (NULL displacements: packed)
   * and where the q blocks lie in recv (want is then the whole of recv,
   * gaps included: image). */
  const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
  const size_t *blk_at, *blk_len;
  size_t *arrays; /* what holds them, owned */
  bool image;
  p2p_run *pr; /* K_P2P */
} call_state;

/* --- in soak.c ----------------------------------------------------------- */

uint64_t mix(uint64_t x);
uint64_t rng(void);
uint64_t below(uint64_t n);
uint64_t gen_below(gen *g, uint64_t n);
size_t width(crnet_datatype dt);
void *xmalloc(size_t n);
void buf_make(buf *b, size_t len);
void buf_free(buf *b);
bool guards_ok(const buf *b);
void fill_bytes(const ctx *x, int r, uint64_t k, size_t len, uint8_t *dst);
void complement(uint8_t *dst, const uint8_t *src, size_t n);
void hex(const uint8_t *b, size_t n, char *out);

/* A failure: counted, and reported on stderr (up to MAX_REPORTS). */
void report(ctx *x, const step *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, for what is not a step (a comm made or destroyed). */
void report_at(ctx *x, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t fnv(const uint8_t *b, size_t n);
void mix_hash(ctx *x, uint64_t h, size_t n);
void share(ctx *x, const step *s, uint64_t h, size_t n);

void set_bases(ctx *x, const step *s);
void prepare(ctx *x, call_state *cs);
int go(ctx *x, call_state *cs, crnet_request **req);
bool refusal_ok(ctx *x, call_state *cs);
int fall_back(ctx *x, call_state *cs);
void check(ctx *x, call_state *cs);
bool shared_result(const step *s);
uint64_t shared_digest(const call_state *cs, size_t *n);
void free_expectations(call_state *cs);
void free_call(call_state *cs);
void run_step(ctx *x, step *s);

void draw(ctx *x, step *s);
void count_step(ctx *x, const step *s);
int sync_point(ctx *x, const step *s, uint64_t n, double minutes, double t0,
               double *last_progress);
void trace_step(const ctx *x, const step *s, const char *what);
void set_schedule(ctx *x, step *s);
size_t *step_counts(step *s, size_t n);

/* --- in soak_calls.c ---------------------------------------------------- */

/* Runs the prepared call (req NULL) or starts it with crnet_iX. */
int invoke(ctx *x, call_state *cs, crnet_request **req);
/* prepare() of allgatherv and alltoallv. */
void prepare_vector(ctx *x, call_state *cs);
/* check() of their whole receive buffer. */
void compare_image(ctx *x, call_state *cs);

/* --- in soak_comms.c ----------------------------------------------------- */

/* Completes every call in flight on comm slot `slot` (the in-flight mode;
 * NULL when nothing is in flight). */
typedef void drain_fn(ctx *x, int slot, void *arg);

void comms_init(ctx *x);
/* Makes slot the current comm: x->comm, x->p, x->rank. */
void use_comm(ctx *x, int slot);
/* The comm of the next step (a draw). */
int draw_comm(ctx *x);
/* Before step n: perhaps a split, a dup or a destroy, as drawn. */
void comm_events(ctx *x, uint64_t n, drain_fn *drain, void *arg);
/* At the end: the world's destroy must be refused while this rank holds a
 * sub-comm; then every sub-comm is checked and destroyed. */
void comms_end(ctx *x);
void comms_free(ctx *x);

/* --- in soak_p2p.c ------------------------------------------------------- */

void p2p_draw(ctx *x, step *s);
/* Whether a receive of the step takes any source and any tag: the step
 * then ends with a barrier on its comm, and in flight runs blocking once
 * the messages of its comm in flight are complete. */
bool p2p_exclusive(const step *s);
void p2p_prepare(ctx *x, call_state *cs);
/* This rank's part, blocking (sends, receives, sendrecv, waits). */
void p2p_run_blocking(ctx *x, call_state *cs);
/* This rank's part in flight: every receive and send started with
 * crnet_irecv and crnet_isend; *reqs (n of them, returned) and the result
 * each must complete with in *want_rc. -1 if one could not start. */
int p2p_start(ctx *x, call_state *cs, crnet_request ***reqs, int **want_rc);
void p2p_check(ctx *x, call_state *cs);
uint64_t p2p_sum(const call_state *cs);
void p2p_free(call_state *cs);
void p2p_plan_free(step *s);
/* Adds the step's messages to the counts; returns its largest message's
 * bytes. */
size_t p2p_count(ctx *x, const step *s);

/* --- in soak_inflight.c -------------------------------------------------- */

/* A call in flight; main holds K of them but never looks inside. */
typedef struct flight flight;

flight *flights_make(int k, int p);
void flights_free(flight *fl, int k);
bool soak_in_flight(ctx *x, flight *fl, step *b, bool have_count,
                    uint64_t count, double minutes, double t0);

#endif
