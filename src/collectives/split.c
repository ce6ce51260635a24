/* crnet_comm_split and crnet_comm_dup: new comms over a parent's ranks.
 *
 * Built from the parent's own collectives, so a split is checked like any
 * call (a rank that does not take part times out or mismatches) and costs
 * three of them:
 *   1. allgather of every rank's (color, key);
 *   2. allreduce (bitwise and) of the context ids each rank offers
 *      (comm.h): the lowest id every rank offers is the new comm's;
 *   3. allreduce (min) of whether each rank could reserve it: a split
 *      under way in another thread of some rank may have taken it between
 *      2 and 3, and then every rank tries 2 again.
 * Comms of different colors get the same id: they share no rank, so no
 * link ever carries both.
 *
 * Out of memory. Everything the new comm needs is allocated before 1, so
 * a rank that cannot have it fails having sent nothing (the others wait
 * in 1 for it to call again). A collective of 2 or 3 that fails on this
 * rank alone, with its comm still alive (out of memory before it began),
 * would leave the others in it: the parent comm fails instead, and its
 * members are told why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "comm_state.h"
#include "crnet.h"
#include "request.h"

/* Tries of 2 and 3 before giving up (only concurrent splits on comms that
 * share ranks ever need more than one). */
#define MAX_TRIES 64

typedef struct member {
  int32_t key, parent_rank;
} member;

static int by_key(const void *a, const void *b) {
  const member *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->parent_rank < y->parent_rank ? -1 : x->parent_rank > y->parent_rank;
}

/* A collective of the split after the first failed here alone (see
 * above): the parent fails, with the reason. Returns rc. */
static int failed_midway(crnet_comm *c, int rc) {
  if (rc == 0 || c->err != 0)
    return rc;
  crnet__loop_acquire(c);
  crnet__comm_fail(c, rc, -1,
                   "crnet_comm_split: %s after the ranks' first exchange",
                   rc == CRNET_ENOMEM ? "out of memory" : crnet_strerror(rc));
  crnet__loop_release(c);
  return rc;
}

/* Agrees on a context id over c and reserves it on this rank: 0 with *id,
 * or an error (the parent's, or CRNET_ENOMEM when no id is free). */
static int agree_ctx(crnet_comm *c, uint32_t *id) {
  uint64_t mask[CRNET__CTX_WORDS];
  for (int t = 0; t < MAX_TRIES; t++) {
    int32_t ok;
    int rc;
    crnet__ctx_offer(c, mask);
    rc = crnet_allreduce(c, CRNET_IN_PLACE, mask, CRNET__CTX_WORDS,
                         CRNET_UINT64, CRNET_BAND);
    if (rc != 0)
      return failed_midway(c, rc);
    *id = crnet__ctx_lowest(mask);
    if (*id == 0) {
      crnet__set_callmsg(c, "crnet_comm_split: no context id is free on "
                            "every rank (at most %d comms alive at once)",
                         CRNET__MAX_CTX - 1);
      return CRNET_ENOMEM;
    }
    ok = crnet__ctx_reserve(c, *id) ? 1 : 0;
    rc = crnet_allreduce(c, CRNET_IN_PLACE, &ok, 1, CRNET_INT32, CRNET_MIN);
    if (rc != 0) {
      crnet__ctx_release(c, *id);
      return failed_midway(c, rc);
    }
    if (ok == 1)
      return 0;
    /* Some rank's other split took it first: everyone lets go and offers
     * again, without it. */
    crnet__ctx_release(c, *id);
  }
  crnet__set_callmsg(c, "crnet_comm_split: no agreement on a context id "
                        "after %d tries (splits in several threads on comms "
                        "that share ranks?)",
                     MAX_TRIES);
  return CRNET_EIO;
}

static int split(crnet_comm *c, int color, int key, crnet_comm **out,
                 const char *what) {
  int32_t mine[2] = {color, key}, *all = NULL, *world = NULL;
  crnet_comm *nc = NULL;
  member *m = NULL;
  uint32_t id = 0;
  int n = 0, rank = -1, rc;
  if (out != NULL)
    *out = NULL;
  if (c == NULL)
    return CRNET_EINVAL;
  if (out == NULL) {
    crnet__set_callmsg(c, "%s: newcomm is NULL", what);
    return CRNET_EINVAL;
  }
  if (color < 0 && color != CRNET_UNDEFINED) {
    crnet__set_callmsg(c, "%s: color %d is negative (colors are >= 0, or "
                          "CRNET_UNDEFINED for no new comm)",
                       what, color);
    return CRNET_EINVAL;
  }
  all = crnet__malloc(sizeof *all * 2 * (size_t)c->size);
  m = crnet__malloc(sizeof *m * (size_t)c->size);
  world = crnet__malloc(sizeof *world * (size_t)c->size);
  rc = all == NULL || m == NULL || world == NULL ? CRNET_ENOMEM : 0;
  if (rc == 0 && color != CRNET_UNDEFINED)
    rc = crnet__comm_derive_new(c, c->size, &nc);
  if (rc != 0) {
    crnet__set_callmsg(c, "%s: out of memory", what);
    goto out;
  }
  crnet__split_enter(c);
  rc = crnet_allgather(c, mine, all, 2, CRNET_INT32);
  if (rc == 0)
    rc = agree_ctx(c, &id);
  if (rc == 0) {
    for (int r = 0; r < c->size; r++)
      if (all[2 * r] == color && color != CRNET_UNDEFINED) {
        m[n].key = all[2 * r + 1];
        m[n].parent_rank = r;
        n++;
      }
    qsort(m, (size_t)n, sizeof *m, by_key);
    for (int i = 0; i < n; i++) {
      world[i] = crnet__world_rank(c, m[i].parent_rank);
      if (m[i].parent_rank == c->rank)
        rank = i;
    }
    if (color == CRNET_UNDEFINED) {
      crnet__ctx_release(c, id);
    } else {
      crnet__comm_derive_finish(nc, id, rank, n, world);
      *out = nc;
      nc = NULL;
    }
  }
  crnet__split_leave(c);
out:
  crnet__comm_derive_discard(nc);
  free(all);
  free(m);
  free(world);
  return rc;
}

int crnet_comm_split(crnet_comm *comm, int color, int key,
                     crnet_comm **newcomm) {
  int rc = split(comm, color, key, newcomm, "crnet_comm_split");
  return newcomm != NULL ? crnet__comm_made(newcomm, rc) : rc;
}

int crnet_comm_dup(crnet_comm *comm, crnet_comm **newcomm) {
  int rc =
      split(comm, 0, comm != NULL ? comm->rank : 0, newcomm, "crnet_comm_dup");
  return newcomm != NULL ? crnet__comm_made(newcomm, rc) : rc;
}
