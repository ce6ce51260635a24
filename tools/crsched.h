/* crsched's parts (docs/crsched.md): the types they share and the
 * functions they call across files.
 *
 *   crsched.c          main, the collectives crsched knows, the vector's
 *                      blocks, the circulant skips, the per-round totals,
 *                      the view of one rank's schedule (text and JSON) and
 *                      the helpers every part uses to select and build a
 *                      schedule (crsched_resolve, crsched_call_for,
 *                      crsched_build_or_complain)
 *   crsched_options.c  the command line: usage, parsing, the checks of
 *                      option combinations
 *   crsched_model.c    the cost model (--cost) and auto's choice (--auto,
 *                      --crossover)
 *   crsched_dot.c      the Graphviz pictures (--dot, --dot --tree)
 *   crsched_sweep.c    the closed-form model over p (--cost --sweep) and
 *                      its check against the builders (--verify)
 *
 * All of them call the library's pure builders and selection table only;
 * nothing here does networking or touches payload.
 */
#ifndef CRSCHED_H
#define CRSCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "schedule.h"
#include "select.h"
#include "tuning.h"

enum { EXIT_USAGE = 2 };

/* ---- the collectives (crsched.c) ----------------------------------------- */

typedef struct coll_kind {
  const char *name;
  crnet_collective coll;
  bool exclusive;
} coll_kind;

/* The collectives crsched knows (see crsched.c), and how many. */
extern const coll_kind crsched_known_colls[];
extern const size_t crsched_nknown_colls;
#define NKNOWN_COLLS crsched_nknown_colls

/* All-to-all and alltoallv: blocks of count per peer, not a vector. */
static inline bool is_a2a(crnet_collective coll) {
  return coll == CRNET_COLL_ALLTOALL || coll == CRNET_COLL_ALLTOALLV;
}

/* The name crsched gives the collective (exscan for the exclusive scan). */
const char *crsched_coll_label(crnet_collective coll, bool exclusive);

/* ---- options (crsched_options.c) ----------------------------------------- */

typedef struct options {
  bool cost, json, in_place, all, have_coll, have_count, have_m;
  bool autosel, crossover, non_commutative;
  bool have_alpha, have_beta, have_gamma;
  bool sweep, verify, dat, have_pmax;
  bool dot, tree; /* --dot, --dot --tree */
  bool list;      /* --list: the registry */
  int32_t pmax;       /* --sweep: the largest p (default 10^6) */
  uint64_t ms[16];    /* --sweep: the sizes of -m a,b,... */
  size_t nm;
  const char *tuning_file; /* --tuning, or NULL: where a job would look */
  crnet_collective coll;
  bool exclusive;       /* --coll exscan */
  const char *schedule; /* NULL: "auto" when viewing, all when costing */
  int32_t p, rank, root;
  uint64_t count, dtype_size, m;
  const char *counts_arg; /* --counts, parsed once p is known */
  double alpha, beta, gamma;
  /* --hosts: the host of each rank (p entries, hosts filled in rank
   * order) and how many hosts; NULL without --hosts. --shm-alpha and
   * --shm-beta (--cost: a round whose messages stay on the rank's host;
   * default --alpha and --beta). */
  int32_t *host;
  int32_t nhosts;
  bool have_shm_alpha, have_shm_beta;
  double shm_alpha, shm_beta;
  /* The tuning a job started here would use (crsched_load_tuning): the
   * calls built for views and costs carry it, since the shape of ring's
   * bcast (its pieces) depends on it. */
  const crnet__tuning *job_tuning;
} options;

/* Prints "crsched: <fmt...>" and the hint to try --help on stderr;
 * returns EXIT_USAGE. */
int crsched_bad_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* A decimal unsigned integer, the whole of s. */
bool crsched_parse_u64(const char *s, uint64_t *v);

/* 0, 1 (help printed: exit 0) or EXIT_USAGE. */
int crsched_parse_options(int argc, char **argv, options *o);

/* ---- the vector's blocks (crsched.c) ------------------------------------- */

/* Block lengths (elements) and their prefix sums: block b is vector
 * elements [prefix[b], prefix[b+1]). */
typedef struct blocks {
  int32_t p;
  uint64_t *counts; /* p */
  uint64_t *prefix; /* p + 1 */
} blocks;

void crsched_blocks_free(blocks *b);

/* From --counts (p comma-separated lengths) or an even cut of `count`.
 * 0, or EXIT_USAGE after saying why (or 1 on out of memory). */
int crsched_blocks_make(blocks *b, int32_t p, uint64_t count,
                        const char *counts_arg);

/* Where element 0 of each buffer sits in the vector, or -1 when the buffer
 * is not a window on it (TEMP, always: builders keep it in R order). */
typedef struct layout {
  int64_t base[CRNET__BUF_COUNT];
} layout;

layout crsched_layout_of(const crnet__call *call, const blocks *b);

/* The blocks a segment covers exactly, as [*first, *last]; false when it
 * is not a whole number of blocks of the vector. */
bool crsched_seg_blocks(const blocks *b, const layout *l, const crnet__seg *g,
                        int32_t *first, int32_t *last);

/* ---- skips (crsched.c) --------------------------------------------------- */

/* The circulant skip sequence of the schedule (n == 0 for other families). */
typedef struct skips {
  int32_t *s;
  int n;
} skips;

int crsched_skips_make(skips *k, const char *name, int32_t p);

/* The circulant phases of round `r` of a schedule with `nrounds` rounds
 * (see crsched.c). False when the schedule's rounds are not exactly the
 * phases. */
bool crsched_round_skip(const skips *k, crnet_collective coll,
                        uint32_t nrounds, uint32_t r, int32_t *sp, int32_t *s,
                        int *dir);

/* x mod p, in 0..p-1 for negative x too. */
static inline int32_t mod_p(int64_t x, int32_t p) {
  int64_t m = x % p;
  return (int32_t)(m < 0 ? m + p : m);
}

/* ---- per-round totals (crsched.c) ---------------------------------------- */

typedef struct round_totals {
  bool comm;
  bool cross; /* --hosts: a message of the round leaves the rank's host */
  uint64_t sent, recv, reduced, copied; /* elements */
} round_totals;

round_totals crsched_round_sum(const crnet__schedule *s, uint32_t k);

/* ---- selecting and building (crsched.c) ---------------------------------- */

/* Resolves the schedule for the call; on failure prints crnet__select's
 * reason and returns EXIT_USAGE. */
int crsched_resolve(const char *requested, const crnet__call *call,
                    const char **name);

/* The call of o's options for the collective and rank, on blocks b. */
crnet__call crsched_call_for(const options *o, crnet_collective coll,
                             bool exclusive, int32_t rank, const blocks *b);

/* crnet__build, saying on stderr what failed. */
int crsched_build_or_complain(const char *name, const crnet__call *call,
                              crnet__schedule *s);

/* ---- the cost model and auto's choice (crsched_model.c) ------------------ */

typedef struct cost_row {
  crnet_collective coll;
  bool exclusive;
  const char *name;
  uint32_t rounds;              /* communicating rounds, max over ranks */
  uint64_t sent, recv, reduced; /* bytes, max over ranks */
  double time, rank_sum;        /* see the top of crsched.c */
  bool sampled;                 /* ranks symmetric: one rank computed */
  bool skipped;                 /* too slow to build, see SLOW_ROW_SECONDS */
} cost_row;

/* Whether every rank's schedule of the row is a rotation of rank 0's. */
bool crsched_rotation_symmetric(const options *o, const cost_row *row,
                                const blocks *b);

/* The tuning a job started here would use, or --tuning, with --alpha,
 * --beta, --gamma in place of the file's constants. 0, or 1 after saying
 * why. */
int crsched_load_tuning(const options *o, crnet__tuning *t);

/* Whether --coll asks for collective k (every one without --coll). */
bool crsched_wanted(const options *o, const coll_kind *k);

/* --cost, --auto and --crossover: exit statuses. */
int crsched_cost_main(const options *o);
int crsched_auto_main(const options *o);
int crsched_crossover_main(const options *o);

/* ---- Graphviz pictures (crsched_dot.c) ----------------------------------- */

/* --dot and --dot --tree: exit status. */
int crsched_dot_main(const options *o);

/* ---- the sweep (crsched_sweep.c) ----------------------------------------- */

/* --cost --sweep and --cost --sweep --verify: exit statuses. */
int crsched_sweep_main(const options *o);
int crsched_verify_main(const options *o);

#endif
