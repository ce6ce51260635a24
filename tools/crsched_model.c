/* crsched's cost model and auto's choice: --cost, the α-β-γ price of every
 * schedule that can do the collective(s), from every rank's built schedule
 * (the model is described at the top of crsched.c); --auto and
 * --crossover, what the library's `auto` picks under the tuning a job
 * would use (crnet__auto_choose and its closed-form model, model.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crnet.h"
#include "model.h"
#include "schedule.h"
#include "select.h"
#include "tuning.h"

#include "crsched.h"

/* ---- the cost model --------------------------------------------------- */

/* A row whose builder would take longer than this (estimated from rank
 * 0's build time times p) is skipped unless --all is given. */
#define SLOW_ROW_SECONDS 60.0

/* One rank's schedule reduced to what the model needs, per round. */
typedef struct profile {
  round_totals *t;
  uint32_t n;
} profile;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Builds rank's schedule, keeps its per-round totals, frees it. 0 or 1. */
static int profile_rank(const options *o, const cost_row *row, int32_t rank,
                        const blocks *b, profile *pr) {
  crnet__call call = crsched_call_for(o, row->coll, row->exclusive, rank, b);
  crnet__schedule s;
  if (crsched_build_or_complain(row->name, &call, &s) != 0)
    return 1;
  pr->n = s.nrounds;
  pr->t = malloc(sizeof *pr->t * (s.nrounds ? s.nrounds : 1));
  if (pr->t != NULL)
    for (uint32_t k = 0; k < s.nrounds; k++) {
      const crnet__round *ro = &s.rounds[k];
      pr->t[k] = crsched_round_sum(&s, k);
      pr->t[k].cross =
          o->host != NULL &&
          ((ro->send.peer >= 0 && o->host[ro->send.peer] != o->host[rank]) ||
           (ro->recv.peer >= 0 && o->host[ro->recv.peer] != o->host[rank]));
    }
  crnet__sched_free(&s);
  if (pr->t == NULL) {
    fputs("crsched: out of memory\n", stderr);
    return 1;
  }
  return 0;
}

static bool profile_equal(const profile *a, const profile *b) {
  if (a->n != b->n)
    return false;
  for (uint32_t k = 0; k < a->n; k++)
    if (a->t[k].comm != b->t[k].comm || a->t[k].sent != b->t[k].sent ||
        a->t[k].recv != b->t[k].recv || a->t[k].reduced != b->t[k].reduced)
      return false;
  return true;
}

/* A round's price: with --hosts, one whose messages stay on the rank's
 * host is priced with the shared-memory constants. */
static double round_cost(const options *o, const round_totals *t) {
  uint64_t B = o->dtype_size, moved = t->sent > t->recv ? t->sent : t->recv;
  bool local = o->host != NULL && !t->cross;
  double alpha = local ? o->shm_alpha : o->alpha;
  double beta = local ? o->shm_beta : o->beta;
  return (t->comm ? alpha : 0) + beta * (double)(moved * B) +
         o->gamma * (double)(t->reduced * B);
}

/* Adds one rank to the row; per_round[k] keeps the max over ranks of the
 * round's cost (per_round has room for *nmax rounds, grown as needed). */
static bool add_rank(const options *o, const profile *pr, cost_row *row,
                     double **per_round, uint32_t *nmax) {
  uint64_t B = o->dtype_size, sent = 0, recv = 0, reduced = 0;
  uint32_t comm = 0;
  double sum = 0;
  if (pr->n > *nmax) {
    double *t = realloc(*per_round, sizeof *t * pr->n);
    if (t == NULL)
      return false;
    for (uint32_t k = *nmax; k < pr->n; k++)
      t[k] = 0;
    *per_round = t;
    *nmax = pr->n;
  }
  for (uint32_t k = 0; k < pr->n; k++) {
    double c = round_cost(o, &pr->t[k]);
    if (c > (*per_round)[k])
      (*per_round)[k] = c;
    sum += c;
    comm += pr->t[k].comm;
    sent += pr->t[k].sent * B;
    recv += pr->t[k].recv * B;
    reduced += pr->t[k].reduced * B;
  }
  row->rounds = comm > row->rounds ? comm : row->rounds;
  row->sent = sent > row->sent ? sent : row->sent;
  row->recv = recv > row->recv ? recv : row->recv;
  row->reduced = reduced > row->reduced ? reduced : row->reduced;
  row->rank_sum = sum > row->rank_sum ? sum : row->rank_sum;
  return true;
}

/* Rotation symmetry. The circulant builders work on R[i] = V[(r+i) mod p]
 * with peers r +- s, and the ring on blocks (r-k) mod p with peers r +- 1,
 * so for the rootless collectives, with every block the same size, renaming
 * rank r to r+1 turns rank r's schedule into rank r+1's, and every rank has
 * the same per-round totals. bcast and reduce have a root, and unequal
 * blocks break it, so those always loop. The claim is also checked on a few
 * ranks (see cost_one), and any difference falls back to the full loop. */
bool crsched_rotation_symmetric(const options *o, const cost_row *row,
                                const blocks *b) {
  bool rotating = strncmp(row->name, "circulant", 9) == 0 ||
                  strcmp(row->name, "ring") == 0 ||
                  strcmp(row->name, "bruck") == 0 ||
                  strcmp(row->name, "pairwise") == 0;
  /* With --hosts, whether a round crosses hosts depends on the rank. */
  if (o->all || !rotating || o->host != NULL || row->coll == CRNET_COLL_BCAST ||
      row->coll == CRNET_COLL_REDUCE || row->coll == CRNET_COLL_SCAN)
    return false;
  for (int32_t i = 1; i < b->p; i++)
    if (b->counts[i] != b->counts[0])
      return false;
  return true;
}

/* True if ranks 1, p/2 and p-1 have rank 0's totals (r0). 0 or 1 in *rc. */
static bool samples_agree(const options *o, const cost_row *row,
                          const blocks *b, const profile *r0, int *rc) {
  const int32_t sample[] = {1, o->p / 2, o->p - 1};
  bool same = true;
  for (size_t i = 0; i < sizeof sample / sizeof sample[0] && same; i++) {
    profile pr;
    if (sample[i] < 1 || sample[i] >= o->p)
      continue;
    *rc = profile_rank(o, row, sample[i], b, &pr);
    if (*rc != 0)
      return false;
    same = profile_equal(r0, &pr);
    free(pr.t);
  }
  return same;
}

/* Fills the row from every rank (or rank 0 alone, when the ranks are
 * symmetric). 0 or 1. */
static int cost_one(const options *o, const blocks *b, cost_row *row) {
  double *per_round = NULL, t0 = now();
  uint32_t nmax = 0;
  profile pr;
  int rc = profile_rank(o, row, 0, b, &pr);
  if (rc != 0)
    return rc;
  if (crsched_rotation_symmetric(o, row, b) &&
      samples_agree(o, row, b, &pr, &rc))
    row->sampled = true;
  else if (rc == 0 && !o->all && (now() - t0) * o->p > SLOW_ROW_SECONDS)
    row->skipped = true;
  if (rc == 0 && !row->skipped && !add_rank(o, &pr, row, &per_round, &nmax))
    rc = 1;
  free(pr.t);
  for (int32_t r = 1; r < o->p && rc == 0 && !row->sampled && !row->skipped;
       r++) {
    rc = profile_rank(o, row, r, b, &pr);
    if (rc != 0)
      break;
    if (!add_rank(o, &pr, row, &per_round, &nmax))
      rc = 1;
    free(pr.t);
  }
  if (rc != 0)
    fprintf(stderr, "crsched: %s %s: giving up\n",
            crsched_coll_label(row->coll, row->exclusive), row->name);
  for (uint32_t k = 0; k < nmax; k++)
    row->time += per_round[k];
  free(per_round);
  return rc;
}

static int by_time(const void *a, const void *b) {
  const cost_row *x = a, *y = b;
  if (x->coll != y->coll)
    return x->coll < y->coll ? -1 : 1;
  if (x->exclusive != y->exclusive)
    return x->exclusive ? 1 : -1;
  if (x->skipped != y->skipped)
    return x->skipped ? 1 : -1;
  if (x->time != y->time)
    return x->time < y->time ? -1 : 1;
  return strcmp(x->name, y->name);
}

static void print_cost_json(const cost_row *r) {
  printf("{\"coll\":\"%s\",\"schedule\":\"%s\"",
         crsched_coll_label(r->coll, r->exclusive), r->name);
  if (r->skipped) {
    puts(",\"skipped\":true}");
    return;
  }
  printf(",\"rounds\":%u,\"bytes_sent\":%" PRIu64 ",\"bytes_recv\":%" PRIu64
         ",\"bytes_reduced\":%" PRIu64 ",\"time\":%.17g,\"rank_sum\":%.17g,"
         "\"sampled\":%s}\n",
         r->rounds, r->sent, r->recv, r->reduced, r->time, r->rank_sum,
         r->sampled ? "true" : "false");
}

static void print_cost_text(const cost_row *r) {
  printf("%-15s %-19s ", crsched_coll_label(r->coll, r->exclusive), r->name);
  if (r->skipped) {
    printf("skipped: building every rank would take over %.0f s "
           "(--all)\n",
           SLOW_ROW_SECONDS);
    return;
  }
  printf("%7u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %13.6g %13.6g%s\n",
         r->rounds, r->sent, r->recv, r->reduced, r->time, r->rank_sum,
         r->sampled ? " *" : "");
}

static void print_cost(const options *o, const cost_row *rows, size_t n) {
  bool sampled = false;
  if (!o->json) {
    printf("p = %d, m = %" PRIu64 " bytes (%" PRIu64
           " elements of %" PRIu64 "), alpha = %g s, beta = %g s/B, "
           "gamma = %g s/B\n"
           "time: synchronous rounds, sum over rounds of the slowest rank; "
           "rank-sum: the busiest rank alone\n",
           o->p, o->m, o->m / o->dtype_size, o->dtype_size, o->alpha,
           o->beta, o->gamma);
    printf("%-15s %-19s %7s %12s %12s %12s %13s %13s\n", "collective",
           "schedule", "rounds", "sent B/rank", "recv B/rank", "reduced B",
           "time", "rank-sum");
  }
  for (size_t i = 0; i < n; i++) {
    sampled |= rows[i].sampled;
    if (o->json)
      print_cost_json(&rows[i]);
    else
      print_cost_text(&rows[i]);
  }
  if (!o->json && sampled)
    puts("* all ranks symmetric (checked on ranks 0, 1, p/2, p-1): one rank "
         "computed; --all computes every rank");
}

/* The rows to compute: every (collective, schedule) asked for that the
 * selection table allows. 0, or EXIT_USAGE when --schedule cannot do it. */
static int cost_rows(const options *o, const blocks *vec, const blocks *a2a,
                     cost_row *rows, size_t *n) {
  const blocks *b;
  *n = 0;
  for (size_t c = 0; c < NKNOWN_COLLS; c++) {
    crnet_collective coll = crsched_known_colls[c].coll;
    bool excl = crsched_known_colls[c].exclusive;
    if (o->have_coll && (coll != o->coll || excl != o->exclusive))
      continue;
    b = is_a2a(coll) ? a2a : vec;
    if (o->schedule != NULL) {
      crnet__call call = crsched_call_for(o, coll, excl, 0, b);
      const char *name;
      char why[256];
      uint32_t id;
      if (crnet__select(o->schedule, &call, &name, &id, why, sizeof why) != 0) {
        if (o->have_coll)
          return crsched_resolve(o->schedule, &call, &name);
        continue; /* all collectives: show those it can do */
      }
      rows[(*n)++] = (cost_row){.coll = coll, .exclusive = excl, .name = name};
      continue;
    }
    for (size_t s = 0; crnet__schedule_name(s) != NULL; s++) {
      crnet__call call = crsched_call_for(o, coll, excl, 0, b);
      const char *name;
      char why[256];
      uint32_t id;
      /* every schedule that can do the call at this p; the two-level
       * ones when there are hosts to know */
      if (strcmp(crnet__schedule_name(s), "two-level") == 0 && o->host == NULL)
        continue;
      if (crnet__select(crnet__schedule_name(s), &call, &name, &id, why,
                        sizeof why) == 0)
        rows[(*n)++] = (cost_row){.coll = coll, .exclusive = excl,
                                  .name = name};
    }
  }
  if (*n == 0 && o->schedule != NULL) {
    crnet__call call = crsched_call_for(o, CRNET_COLL_ALLREDUCE, false, 0, vec);
    const char *name;
    return crsched_resolve(o->schedule, &call, &name);
  }
  return 0;
}

int crsched_cost_main(const options *o) {
  size_t nnames = 0, n;
  cost_row *rows;
  blocks b, a2a; /* the vector; alltoall's p equal blocks of -m */
  uint64_t elems = o->m / o->dtype_size;
  int rc;
  while (crnet__schedule_name(nnames) != NULL)
    nnames++;
  rows = calloc(NKNOWN_COLLS * nnames, sizeof *rows);
  if (rows == NULL)
    return CRNET_ENOMEM;
  rc = crsched_blocks_make(&b, o->p, elems, NULL);
  if (rc != 0) {
    free(rows);
    return rc;
  }
  rc = crsched_blocks_make(&a2a, o->p, elems / (uint64_t)o->p * (uint64_t)o->p,
                           NULL);
  if (rc != 0) {
    crsched_blocks_free(&b);
    free(rows);
    return rc;
  }
  rc = cost_rows(o, &b, &a2a, rows, &n);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = cost_one(o, is_a2a(rows[i].coll) ? &a2a : &b, &rows[i]);
  if (rc == 0) {
    qsort(rows, n, sizeof rows[0], by_time);
    print_cost(o, rows, n);
  }
  crsched_blocks_free(&a2a);
  crsched_blocks_free(&b);
  free(rows);
  return rc;
}

/* ---- auto's choice ---------------------------------------------------- */

/* The tuning a job started here would use (rank 0 reads it), or --tuning,
 * with --alpha, --beta, --gamma in place of the file's constants. 0, or 1
 * after saying why. */
int crsched_load_tuning(const options *o, crnet__tuning *t) {
  char path[1024], err[600];
  int where, rc = 0;
  if (o->tuning_file != NULL) {
    rc = crnet__tuning_load_file(t, o->tuning_file, true, err, sizeof err);
  } else if ((where = crnet__tuning_path(path, sizeof path)) >= 0) {
    rc = crnet__tuning_load_file(t, path, where == 1, err, sizeof err);
  } else {
    crnet__tuning_defaults(t);
  }
  if (rc != 0) {
    fprintf(stderr, "crsched: %s\n", err);
    return 1;
  }
  const struct {
    bool given;
    double v;
  } over[CRNET__TUNING_NPARAMS] = {{o->have_alpha, o->alpha},
                                   {o->have_beta, o->beta},
                                   {o->have_gamma, o->gamma}};
  for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
    if (!over[k].given)
      continue;
    t->base[k] = over[k].v;
    t->npoints[k] = 0;
    snprintf(t->source + strlen(t->source),
             sizeof t->source - strlen(t->source), ", --%s",
             crnet__tuning_param_name((crnet__tuning_param)k));
  }
  return 0;
}

/* The call auto sees for `elems` elements of the vector (alltoall: of the
 * send buffer; per peer rounded down, as in --cost). The blocks are freed
 * by the caller. 0, or 1 when out of memory. */
static int auto_call(const options *o, const crnet__tuning *t,
                     const coll_kind *k, uint64_t elems, blocks *b,
                     crnet__call *call) {
  uint64_t n = is_a2a(k->coll)
                   ? elems / (uint64_t)o->p * (uint64_t)o->p
                   : elems;
  if (crsched_blocks_make(b, o->p, n, NULL) != 0)
    return 1;
  *call = crsched_call_for(o, k->coll, k->exclusive, 0, b);
  call->commutative = !o->non_commutative;
  call->tuning = t;
  return 0;
}

/* auto's pick for `elems` elements. 0, or 1 after saying why. */
static int pick(const options *o, const crnet__tuning *t, const coll_kind *k,
                uint64_t elems, const char **name, double *seconds) {
  blocks b;
  crnet__call call;
  int rc;
  if (auto_call(o, t, k, elems, &b, &call) != 0)
    return 1;
  rc = crnet__auto_choose(&call, name, seconds);
  crsched_blocks_free(&b);
  if (rc != 0) {
    fprintf(stderr, "crsched: %s\n", crnet_strerror(rc));
    return 1;
  }
  return 0;
}

bool crsched_wanted(const options *o, const coll_kind *k) {
  return !o->have_coll ||
         (k->coll == o->coll && k->exclusive == o->exclusive);
}

static void print_tuning(const options *o, const crnet__tuning *t) {
  char desc[600];
  crnet__tuning_describe(t, o->p, desc, sizeof desc);
  printf("p = %d, %s operator; tuning: %s\n", o->p,
         o->non_commutative ? "non-commutative" : "commutative", desc);
  if (o->host != NULL)
    printf("hosts: %d (--hosts); two-level levels priced with shm_alpha %g "
           "s, shm_beta %g s/B inside hosts\n",
           (int)o->nhosts, crnet__tuning_get(t, CRNET__TUNING_SHM_ALPHA, o->p),
           crnet__tuning_get(t, CRNET__TUNING_SHM_BETA, o->p));
}

int crsched_auto_main(const options *o) {
  crnet__tuning t;
  if (crsched_load_tuning(o, &t) != 0)
    return 1;
  if (!o->json) {
    print_tuning(o, &t);
    printf("m = %" PRIu64 " bytes\n%-15s %-17s %12s  %s\n", o->m,
           "collective", "auto", "model time", "candidates (model time)");
  }
  for (size_t i = 0; i < NKNOWN_COLLS; i++) {
    const coll_kind *k = &crsched_known_colls[i];
    const char *name;
    double best;
    blocks b;
    crnet__call call;
    if (!crsched_wanted(o, k))
      continue;
    if (pick(o, &t, k, o->m / o->dtype_size, &name, &best) != 0 ||
        auto_call(o, &t, k, o->m / o->dtype_size, &b, &call) != 0)
      return 1;
    if (o->json)
      printf("{\"coll\":\"%s\",\"p\":%d,\"m\":%" PRIu64
             ",\"commutative\":%s,\"auto\":\"%s\",\"time\":%.17g,"
             "\"candidates\":{",
             k->name, o->p, o->m, o->non_commutative ? "false" : "true", name,
             best);
    else
      printf("%-15s %-17s %12.4g ", k->name, name, best);
    for (size_t c = 0, shown = 0; crnet__auto_candidate(k->coll, c) != NULL;
         c++) {
      const char *cand = crnet__auto_candidate(k->coll, c);
      double secs;
      if (crnet__auto_price(cand, &call, &secs) != 0)
        continue;
      if (o->json)
        printf("%s\"%s\":%.17g", shown ? "," : "", cand, secs);
      else
        printf(" %s %.4g", cand, secs);
      shown++;
    }
    puts(o->json ? "}}" : "");
    crsched_blocks_free(&b);
  }
  return 0;
}

/* The smallest element count in (lo, hi], a multiple of step, whose pick
 * differs from lo's, given that hi's does. */
static int first_change(const options *o, const crnet__tuning *t,
                        const coll_kind *k, uint64_t step, uint64_t lo,
                        uint64_t hi, uint64_t *at) {
  const char *at_lo, *name;
  double secs;
  if (pick(o, t, k, lo, &at_lo, &secs) != 0)
    return 1;
  while (hi - lo > step) {
    uint64_t mid = lo + (hi - lo) / step / 2 * step;
    if (pick(o, t, k, mid, &name, &secs) != 0)
      return 1;
    if (strcmp(name, at_lo) == 0)
      lo = mid;
    else
      hi = mid;
  }
  *at = hi;
  return 0;
}

int crsched_crossover_main(const options *o) {
  crnet__tuning t;
  uint64_t max_elems = (o->have_m ? o->m : (uint64_t)1 << 30) / o->dtype_size;
  if (crsched_load_tuning(o, &t) != 0)
    return 1;
  if (!o->json) {
    print_tuning(o, &t);
    printf("bytes from 0 to %" PRIu64 " (elements of %" PRIu64
           " bytes); each schedule from the size shown\n",
           max_elems * o->dtype_size, o->dtype_size);
  }
  for (size_t i = 0; i < NKNOWN_COLLS; i++) {
    const coll_kind *k = &crsched_known_colls[i];
    /* alltoall's pick only changes at whole elements per peer */
    uint64_t step = is_a2a(k->coll) ? (uint64_t)o->p : 1;
    uint64_t prev = 0, next;
    const char *cur, *name;
    double secs;
    if (!crsched_wanted(o, k))
      continue;
    if (pick(o, &t, k, 0, &cur, &secs) != 0)
      return 1;
    if (o->json)
      printf("{\"coll\":\"%s\",\"p\":%d,\"commutative\":%s,"
             "\"ranges\":[[0,\"%s\"]",
             k->name, o->p, o->non_commutative ? "false" : "true", cur);
    else
      printf("%-15s %s from 0 B", k->name, cur);
    /* A geometric grid (16 points per doubling), then bisection between
     * the grid points where the pick changed. Each price is a straight
     * line in m (the chain's, ring's bcast, a lower envelope of straight
     * lines, one per count of pieces: concave), so a candidate wins on
     * few intervals and a grid this fine misses no change at the sizes
     * that matter. */
    for (double g = (double)step; prev < max_elems; g *= 1.044273782) {
      uint64_t at;
      next = (uint64_t)g / step * step;
      if (next <= prev)
        next = prev + step;
      if (next > max_elems)
        next = max_elems;
      if (pick(o, &t, k, next, &name, &secs) != 0)
        return 1;
      if (strcmp(name, cur) != 0) {
        if (first_change(o, &t, k, step, prev, next, &at) != 0)
          return 1;
        if (pick(o, &t, k, at, &name, &secs) != 0)
          return 1;
        if (o->json)
          printf(",[%" PRIu64 ",\"%s\"]", at * o->dtype_size, name);
        else
          printf(", %s from %" PRIu64 " B", name, at * o->dtype_size);
        cur = name;
        /* look again from the change, in case of another one before next */
        next = at;
      }
      prev = next;
    }
    puts(o->json ? "]}" : "");
  }
  return 0;
}
