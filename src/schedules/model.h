/* The α-β-γ cost model of the schedules `auto` chooses among.
 *
 * A schedule doing a call costs R·ρ·α + B·β + G·γ seconds, with R the
 * message rounds, B the bytes moved (per round the larger of sent and
 * received) and G the bytes reduced, each the synchronous-round figure of
 * crsched --cost (per round, the busiest rank's), and ρ the cost of a round
 * in multiples of α: the tuning's ring_round for ring, 1 for the others
 * (tuning.h). The terms are closed formulas in p and m
 * (model.c), so choosing costs a few flops per call at any p; tests/
 * test_tuning.c holds them against the simulator's exact counts.
 *
 * m is the bytes of the collective's vector: allreduce, bcast, reduce,
 * scan: count elements; reduce-scatter: the whole input (the sum of the
 * blocks); allgather, gather, scatter: the whole gathered vector;
 * all-to-all: the whole send buffer. A barrier has m = 0, and so has
 * alltoallv, whose counts are each rank's own (auto chooses by p there).
 */
#ifndef CRNET_MODEL_H
#define CRNET_MODEL_H

#include <stdbool.h>

#include "select.h"
#include "tuning.h"

typedef struct crnet__model_terms {
  double rounds;  /* R */
  double moved;   /* B, bytes */
  double reduced; /* G, bytes */
  /* ρ: the constant that prices a round of this schedule as a multiple of
   * α (CRNET__TUNING_RING_ROUND), or CRNET__TUNING_NPARAMS for a round
   * that costs α itself. */
  crnet__tuning_param round_factor;
} crnet__model_terms;

/* A further message of one group of independent rounds that a rank keeps
 * in flight together, in rounds: the executor overlaps their latencies and
 * only the rank's handling of each adds (measured on the 2-core VM with
 * the linear gather, rooted.c). The linear gather and scatter and the
 * k-nomial trees price their groups with it. */
#define CRNET__MODEL_FURTHER_MESSAGE 0.25

/* The call's tuning, or the built-in constants (written into *defaults)
 * when it names none. */
const crnet__tuning *crnet__model_tuning(const crnet__call *call,
                                         crnet__tuning *defaults);

/* m of the call, in bytes (see above). */
double crnet__model_bytes(const crnet__call *call);

/* The terms of schedule `name` doing `call`. False when the model does not
 * cover that pair (auto never considers it): a schedule that cannot do the
 * collective, hypercube all-to-all at a p that is not a power of two, the
 * star at a p that is not a factorial, the circulant variants other than
 * circulant and circulant-linear. */
bool crnet__model_terms_of(const char *name, const crnet__call *call,
                           crnet__model_terms *out);

/* The most pieces the chain (ring's bcast) cuts a vector into: its
 * schedule holds nb + p - 2 rounds, and at 1024 pieces the chain moves
 * (1024 + p - 2)/1024 of its m·β limit: 3% more at p = 32. */
#define CRNET__CHAIN_MAX_PIECES 1024

/* The pieces of ring's bcast, a pipelined chain, for the call: the nb in
 * 1..min(count, CRNET__CHAIN_MAX_PIECES) that minimises its price (nb+p-2)
 * ·(ρα + m/nb·β), with the α and β auto prices the call with (shared
 * memory's when call->shm_links). 1 for p <= 2. Depends only on what
 * every rank of the call shares, like auto's choice. */
int32_t crnet__chain_pieces(const crnet__call *call);

/* R·ρ·α + B·β + G·γ with the constants for p ranks. */
double crnet__model_seconds(const crnet__model_terms *t,
                            const crnet__tuning *tuning, int32_t p);

/* The same on shared-memory links (shm: shm_alpha and shm_beta in the
 * places of alpha and beta) or not. */
double crnet__model_seconds_on(const crnet__model_terms *t,
                               const crnet__tuning *tuning, int32_t p,
                               bool shm);

/* The price of `name` doing `call` on a comm across hosts (call->host set,
 * call->nhosts > 1), round by round: a round whose pairs all stay on their
 * hosts at shared memory's α and β, one that crosses at TCP's (the round
 * waits for its slowest pair). Covers the schedules whose rounds pair
 * ranks at distances 2^i, at powers of two: hypercube allreduce and
 * allgather, rabenseifner allreduce and reduce-scatter. With ranks placed
 * host by host their short-distance rounds stay inside hosts, and
 * rabenseifner's crossing rounds carry its smallest pieces; the terms
 * above price every round at TCP's constants, an upper bound that made
 * auto take two-level where these were faster. False for any other case
 * (the caller keeps the terms' price). Equals crnet__model_seconds_on when
 * every round is priced alike (tests/test_tuning.c). */
bool crnet__model_seconds_hosts(const char *name, const crnet__call *call,
                                const crnet__tuning *tuning,
                                double *seconds);

#endif
