/* Selection over the registry (algorithm.h, registry.c). See select.h.
 *
 * An explicitly chosen schedule that cannot do the call fails with
 * CRNET_EUNSUPPORTED and says why; builders never fall back on their own.
 *
 * auto: the registry's rows that do the collective and are in auto, each
 * priced by the α-β-γ model (model.c) with the job's tuning constants
 * (tuning.h: rank 0's, on every rank); the cheapest wins, and of equal
 * prices the one listed first in the registry, so the choice depends on
 * (collective, p, bytes, commutativity, tuning) only, never on the rank.
 * A non-commutative operator only considers the rows that keep rank order
 * for this p (their keeps_order). docs/TUNING.md shows where the choices
 * change.
 */
#include "select.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "algorithm.h"
#include "model.h"

const crnet__algorithm *crnet__algorithm_find(const char *name) {
  /* The names a call passes around are the rows' own strings (select and
   * auto return them), so comparing pointers finds them without the
   * strcmp of every row before: a dozen calls, on every collective. */
  for (size_t i = 0; i < crnet__nalgorithms; i++)
    if (crnet__algorithms[i]->name == name)
      return crnet__algorithms[i];
  for (size_t i = 0; i < crnet__nalgorithms; i++)
    if (strcmp(crnet__algorithms[i]->name, name) == 0)
      return crnet__algorithms[i];
  return NULL;
}

const crnet__algorithm *crnet__algorithm_by_id(uint32_t id) {
  for (size_t i = 0; i < crnet__nalgorithms; i++)
    if (crnet__algorithms[i]->id == id)
      return crnet__algorithms[i];
  return NULL;
}

int crnet__keeps_order_always(const crnet__call *call, bool *ordered) {
  (void)call;
  *ordered = true;
  return 0;
}

int32_t crnet__algorithm_peers(const crnet__algorithm *a,
                               const crnet__call *call) {
  if (call->p <= 1)
    return 0;
  if (call->p == 2)
    return 1;
  if (call->coll == CRNET_COLL_ALLTOALLV)
    return call->p - 1;
  return a->peers != NULL ? a->peers(call) : -1;
}

int32_t crnet__distinct_offsets(const int32_t *v, int n, int32_t p) {
  int32_t seen[2 * 64];
  int k = 0;
  for (int i = 0; i < n && i < 64; i++)
    for (int sign = 0; sign < 2; sign++) {
      int64_t x = (sign ? -(int64_t)v[i] : v[i]) % p;
      bool dup;
      if (x < 0)
        x += p;
      dup = x == 0;
      for (int j = 0; j < k && !dup; j++)
        dup = seen[j] == x;
      if (!dup)
        seen[k++] = (int32_t)x;
    }
  return k;
}

static bool does(const crnet__algorithm *a, crnet_collective coll) {
  return (a->colls & CRNET__COLL_BIT(coll)) != 0;
}

static int keeps_order(const crnet__algorithm *a, const crnet__call *call,
                       bool *ordered) {
  *ordered = false;
  return a->keeps_order != NULL ? a->keeps_order(call, ordered) : 0;
}

const char *crnet__schedule_name(size_t i) {
  /* In order of wire id, which may have gaps: an id is never reused, and
   * one may belong to a schedule this build does not have. */
  uint32_t last = 0;
  for (size_t k = 0; k < crnet__nalgorithms; k++)
    if (crnet__algorithms[k]->id > last)
      last = crnet__algorithms[k]->id;
  for (uint32_t id = 1; id <= last; id++) {
    const crnet__algorithm *a = crnet__algorithm_by_id(id);
    if (a != NULL && i-- == 0)
      return a->name;
  }
  return NULL;
}

bool crnet__schedule_known(const char *name, crnet_collective coll) {
  const crnet__algorithm *a;
  if (strcmp(name, "auto") == 0)
    return true;
  a = crnet__algorithm_find(name);
  return a != NULL && does(a, coll);
}

const char *crnet__auto_candidate(crnet_collective coll, size_t i) {
  for (size_t k = 0; k < crnet__nalgorithms; k++) {
    const crnet__algorithm *a = crnet__algorithms[k];
    if (a->in_auto && does(a, coll) && i-- == 0)
      return a->name;
  }
  return NULL;
}

int crnet__algorithm_price_by_terms(const crnet__algorithm *a,
                                    const crnet__call *call,
                                    double *seconds) {
  crnet__model_terms terms;
  crnet__tuning defaults;
  const crnet__tuning *t = crnet__model_tuning(call, &defaults);
  bool ordered;
  int rc;
  if (!crnet__model_terms_of(a->name, call, &terms))
    return 1;
  if ((CRNET__REDUCING_COLLS & CRNET__COLL_BIT(call->coll)) != 0 &&
      !call->commutative) {
    rc = keeps_order(a, call, &ordered);
    if (rc != 0)
      return rc;
    if (!ordered)
      return 1;
  }
  if (!call->shm_links && !call->tcp_links &&
      crnet__model_seconds_hosts(a->name, call, t, seconds))
    return 0;
  *seconds = crnet__model_seconds_on(&terms, t, call->p, call->shm_links);
  return 0;
}

int crnet__auto_price(const char *name, const crnet__call *call,
                      double *seconds) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  if (a == NULL || !does(a, call->coll))
    return 1;
  if (a->auto_fits != NULL && !a->auto_fits(call, crnet__model_bytes(call)))
    return 1;
  if (a->price != NULL)
    return a->price(call, seconds);
  return crnet__algorithm_price_by_terms(a, call, seconds);
}

/* Prices within this factor of each other are equal: the first listed
 * wins, also where two formulas agree but round differently. */
#define SAME_PRICE (1 + 1e-9)

int crnet__auto_choose(const crnet__call *call, const char **name,
                       double *seconds) {
  const char *best = NULL;
  double best_t = 0, t;
  int rc;
  for (size_t k = 0; k < crnet__nalgorithms; k++) {
    const crnet__algorithm *a = crnet__algorithms[k];
    if (!a->in_auto || !does(a, call->coll))
      continue;
    rc = crnet__auto_price(a->name, call, &t);
    if (rc < 0)
      return rc;
    if (rc == 0 && (best == NULL || t * SAME_PRICE < best_t)) {
      best = a->name;
      best_t = t;
    }
  }
  /* Every collective has an order-preserving candidate that the model
   * covers at every p (circulant, rabenseifner, bruck or binomial first),
   * so this holds (tests/test_tuning.c checks it over the registry). */
  assert(best != NULL);
  *name = best;
  if (seconds != NULL)
    *seconds = best_t;
  return 0;
}

/* The schedules that keep rank order for this call, quoted and listed
 * into buf: "'hypercube', 'rabenseifner'". */
static int ordered_names(const crnet__call *call, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *a = crnet__algorithms[i];
    bool ordered;
    int rc;
    if (!does(a, call->coll))
      continue;
    if ((rc = keeps_order(a, call, &ordered)) != 0)
      return rc;
    if (ordered && at < len)
      at += (size_t)snprintf(buf + at, len - at, "%s'%s'", at > 0 ? ", " : "",
                             a->name);
  }
  return 0;
}

int crnet__select(const char *requested, const crnet__call *call,
                  const char **name, uint32_t *id, char *why, size_t whylen) {
  const crnet__algorithm *a;
  const char *coll = crnet_collective_name(call->coll);
  bool ordered;
  char names[256];
  int rc;

  if (strcmp(requested, "auto") == 0) {
    rc = crnet__auto_choose(call, &requested, NULL);
    if (rc != 0)
      return rc;
  }
  a = crnet__algorithm_find(requested);
  if (a == NULL) {
    snprintf(why, whylen, "no schedule is called '%s'", requested);
    return CRNET_EINVAL;
  }
  if (!does(a, call->coll)) {
    snprintf(why, whylen, "schedule '%s' cannot do %s", a->name, coll);
    return CRNET_EUNSUPPORTED;
  }
  if (a->check != NULL && (rc = a->check(call, why, whylen)) != 0)
    return rc;
  if ((CRNET__REDUCING_COLLS & CRNET__COLL_BIT(call->coll)) != 0 &&
      !call->commutative) {
    if ((rc = keeps_order(a, call, &ordered)) != 0)
      return rc;
    if (!ordered) {
      if ((rc = ordered_names(call, names, sizeof names)) != 0)
        return rc;
      snprintf(why, whylen,
               "schedule '%s' combines operands out of rank order, so %s with "
               "a non-commutative operator needs one that keeps it at p = %d "
               "(%s or 'auto')",
               a->name, coll, (int)call->p, names);
      return CRNET_EUNSUPPORTED;
    }
  }
  *name = a->name;
  *id = a->id;
  return 0;
}

int crnet__build(const char *name, const crnet__call *call,
                 crnet__schedule *out) {
  const crnet__algorithm *a = crnet__algorithm_find(name);
  if (a == NULL || !does(a, call->coll))
    return CRNET_EINVAL;
  return a->build(call, out);
}
