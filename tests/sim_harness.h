/* The simulator tests' one harness: a collective described as a call
 * (crnet__call, as the entry points fill it), built on every rank by a
 * registry row or by an internal builder, run in the in-memory simulator
 * (sim.c) and compared element by element with one serial reference per
 * collective. test_sim_registry.c runs it over every row x collective x p x
 * shape; the family drivers (test_sim*.c) run it where they assert their
 * papers' claims (rounds, volumes), which they read from the ranks' stats
 * and schedules in a callback, so no driver keeps buffers or references of
 * its own.
 *
 * Data: a reduction's element e of rank x is sim_value(x, e) (or the
 * case's own value function); the collectives that only move data carry
 * sim_encode(source, destination, index), so a misplaced block names where
 * it came from. RECV starts as SENTINEL, and is exactly as long as the
 * program's buffer, so a write beyond it is the simulator's error.
 *
 * In place, as a program can ask for it: every rank or none for the
 * symmetric collectives, or only the odd ranks (in place is each rank's own
 * choice, not part of the call's signature); the root or none for reduce,
 * gather and scatter; always for bcast (collectives.c builds it in place).
 * The executor points SEND at RECV on a rank in place, but for a scatter
 * (exec.c); the simulator aliases every rank or none, so a rank's aliasing
 * is done here by renaming SEND to RECV in its schedule, after checking
 * that it never writes SEND.
 */
#ifndef CRNET_TESTS_SIM_HARNESS_H
#define CRNET_TESTS_SIM_HARNESS_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "check_main.h" /* EXPECT: checks per element */
#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "sim.h"
#include "sim_ops.h"

/* What RECV holds before the call: any element still holding it where the
 * reference wants data was never written. */
#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)
/* What the gaps between an alltoallv's send blocks hold. */
#define GAP UINT64_C(0x6a6a6a6a6a6a6a6a)

/* Element e of the block rank src sends rank dst (0 where every rank gets
 * it), in the collectives that only move data. */
static inline uint64_t sim_encode(int32_t src, int32_t dst, uint64_t e) {
  return UINT64_C(1) << 63 | (uint64_t)src << 40 | (uint64_t)dst << 20 | e;
}

/* One rank's alltoallv arrays: send blocks in rank order with a gap of
 * one element before each, receive blocks in reverse rank order with gaps
 * of two, so that displacements matter on both sides. */
typedef struct sim_vargs {
  uint64_t *scounts, *sdispls, *rcounts, *rdispls;
  uint64_t slen, rlen;
} sim_vargs;

#define SIM_NPAIR_SHAPES 4
extern const char *const sim_pair_shape_name[SIM_NPAIR_SHAPES];
/* p ranks' arrays of pair shape `shape` (random 0..4, 2 each, empty, only
 * to and from p/2); sim_vargs_free(v, p) frees them. */
sim_vargs *sim_vargs_make(int shape, int32_t p);
void sim_vargs_free(sim_vargs *v, int32_t p);

enum sim_in_place { SIM_NOT_IN_PLACE, SIM_IN_PLACE, SIM_ODD_IN_PLACE };

typedef struct sim_case sim_case;

struct sim_case {
  /* The builder: the registry row `row` (crnet__build), or build(call,
   * out, build_arg) where the case reaches an internal builder's
   * parameter that no row exposes. */
  const char *row;
  int (*build)(const crnet__call *call, crnet__schedule *out, const void *arg);
  const void *build_arg;
  crnet_collective coll;
  int32_t p;
  /* allreduce, reduce, bcast, scan: the vector; all-to-all: per block;
   * block collectives: what the entry points put there */
  uint64_t count;
  const uint64_t *counts; /* p blocks (reduce-scatter, allgather, gather,
                             scatter), else NULL */
  bool uniform;           /* every block the same */
  const uint64_t *displs; /* allgather: the user's layout, or NULL */
  const sim_vargs *v;     /* alltoallv: p ranks' arrays */
  int32_t root;
  enum sim_in_place in_place;
  bool exclusive;
  bool affine; /* the affine maps (non-commutative), else sum */
  const int32_t *host;
  int32_t nhosts;
  const crnet__tuning *tuning;
  /* A layout every rank is built with a second time, which must give the
   * same schedule (a row that does not read hosts), or NULL. */
  const int32_t *probe_host;
  int32_t probe_nhosts;
  /* Overrides, NULL for the defaults: the operator (sum or affine), rank
   * x's element e of a reduction (sim_value), and a reducing collective's
   * result at element e (the rank-order fold). */
  crnet__sim_combine op;
  uint64_t (*value)(int32_t rank, uint64_t e);
  uint64_t (*reference)(const sim_case *k, uint64_t e);
  /* Everyone must hear from everyone (always for a barrier). */
  bool causal;
  char what[320];
};

/* What a case's claims see, valid during the callback: every rank's
 * schedule and stats, the block offsets P[0..p] and the vector's m. */
typedef struct sim_result {
  const crnet__schedule *sc;
  const crnet__sim_rank *rk;
  const uint64_t *P;
  uint64_t m;
} sim_result;

typedef void (*sim_claims)(const sim_case *k, const sim_result *res, void *arg);

bool sim_is_rooted(crnet_collective c);
bool sim_takes_blocks(crnet_collective c);
bool sim_is_reducing(crnet_collective c);
bool sim_rank_in_place(const sim_case *k, int32_t r);

/* Rank r's call, as the entry points fill it. */
crnet__call sim_call_of(const sim_case *k, int32_t r);

/* Fills k->what from the case, with `extra` (or NULL) after it. */
void sim_describe(sim_case *k, const char *extra);

/* Builds, simulates and checks the case; then claims(k, result, arg)
 * unless claims is NULL. Fails through Check. */
void sim_run(const sim_case *k, sim_claims claims, void *arg);

/* CRNET_SIM_QUICK=1: the sanitizer pass, which runs fewer p. */
bool sim_quick(void);

/* The p the sanitizer pass runs (test_sim_registry.c, and the families
 * that keep no list of their own), a point of which is memory safety, not
 * the sweep: p that take every branch the builders take on p. They branch
 * on p being 1 or 2, odd or even, a power of two or not, and on the fold
 * around it; on n! for the star and k^L for the k-nomial tree; and on
 * nothing else (the circulant's skips follow p's binary form; the fixed
 * arrays are sized by log2 p or the star's n for every p to 2^31):
 *   1, 2      no rounds, and one partner;
 *   3         the smallest fold (x = p - 2^d = 1, one pair);
 *   4 8 16 32 powers of two (hypercube, Rabenseifner, Swing without the
 *             fold; pairwise by XOR; the hypercube all-to-all);
 *   5 9 17 33 2^d + 1: one rank folded away (and Alg. 4.9's rank 2^d,
 *             whose partners are beyond p in every round but the last);
 *   7 15 31   2^d - 1: all ranks but one in pairs;
 *   6 12      even folds of two and four pairs; 6 = 3!, the star's n = 3;
 *   13        a prime, an odd fold of five pairs; the star's S_3 over
 *             groups of 3 and 2 ranks;
 *   24 25     4!: the star's n = 4, and its first folded groups;
 *             25 = 5^2, as 9 = 3^2, 16 = 4^2 and 8 = 2^3 for the trees. */
extern const int32_t sim_quick_ps[];
extern const size_t sim_quick_nps;
/* Whether p is one of them. */
bool sim_quick_p(int32_t p);

/* A suite `name` with one test case `tcase` (timeout 600 s) in *tc. */
Suite *sim_suite(const char *name, const char *tcase, TCase **tc);

/* Runs the suite without forking, so that a driver's counters see every
 * test's cases, and returns main's exit status (check_main.h). */
int sim_check_run(Suite *s);

/* Block counts c[0..p) of the runtime's split of m elements. */
void sim_split(uint64_t m, int32_t p, uint64_t *c);

#endif
