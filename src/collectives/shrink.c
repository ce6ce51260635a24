/* crnet_comm_shrink: a new comm of a comm's survivors; crnet_comm_grow:
 * the same with the restarted ranks waiting to join after them (crnet.h,
 * docs/RELIABILITY.md; the newcomers' side is runtime/join.c).
 *
 * The parent may have failed or been revoked, so nothing here uses its
 * collectives: two fault-tolerant agreements over its survivors
 * (crnet__agree, runtime/survive.c) do the work that split.c's collectives
 * do for a live comm:
 *   1. the AND of the context ids each survivor offers, and the ranks the
 *      survivors count lost (the same set on every rank that returns: the
 *      new comm's members are the others, in their order in the parent);
 *   2. the AND of whether each could reserve the lowest of those ids (a
 *      split in another thread may have taken it meanwhile: then 1 again).
 * A rank that dies during either is left out of the decision or, if it
 * dies after it, is lost on the new comm, which then reports it.
 *
 * Out of memory. The new comm is allocated before 1; a rank that could not
 * allocate it still takes part, voting 0, so every survivor fails alike.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "comm_state.h"
#include "crnet.h"
#include "request.h"

/* Tries of 1 and 2 (only concurrent splits need more than one). */
#define MAX_TRIES 64

/* Steps 1 and 2: 0 with a reserved id, lost[] filled, and join[] (NULL:
 * shrink) the newcomers every survivor has linked to; or an error. */
static int agree_ctx(crnet_comm *c, const char *call, bool ready, uint8_t *lost,
                     uint8_t *join, uint32_t *id) {
  uint64_t mask[CRNET__CTX_WORDS];
  for (int t = 0; t < MAX_TRIES; t++) {
    uint32_t flag = ready, ok;
    int rc;
    crnet__ctx_offer(c, mask);
    if (join != NULL && t == 0)
      crnet__join_waiting(c->w, join);
    /* The members are those of the first decision: every survivor has
     * that one. */
    rc = crnet__agree_join(c, &flag, mask, t == 0 ? lost : NULL,
                           t == 0 ? join : NULL);
    if (rc != 0)
      return rc;
    if (flag == 0) {
      crnet__set_callmsg(c, "%s: a survivor is out of memory", call);
      return CRNET_ENOMEM;
    }
    *id = crnet__ctx_lowest(mask);
    if (*id == 0) {
      crnet__set_callmsg(c,
                         "%s: no context id is free on "
                         "every survivor (at most %d comms alive at once)",
                         call, CRNET__MAX_CTX - 1);
      return CRNET_ENOMEM;
    }
    ok = crnet__ctx_reserve(c, *id) ? 1 : 0;
    flag = ok;
    rc = crnet__agree(c, &flag, NULL, NULL);
    if (rc == 0 && flag == 1)
      return 0;
    if (ok)
      crnet__ctx_release(c, *id);
    if (rc != 0)
      return rc;
  }
  crnet__set_callmsg(c, "%s: no agreement on a context id after %d tries", call,
                     MAX_TRIES);
  return CRNET_EIO;
}

/* Shrink (grow false) or grow. */
static int remake(crnet_comm *c, crnet_comm **out, bool grow) {
  const char *call = grow ? "crnet_comm_grow" : "crnet_comm_shrink";
  int slots = c != NULL ? c->w->size - c->w->world_size : 0;
  crnet_comm *nc = NULL;
  uint8_t *lost = NULL, *join = NULL;
  int32_t *world = NULL;
  uint32_t id = 0;
  int rc, n = 0, rank = -1, max;
  if (out != NULL)
    *out = NULL;
  if (c == NULL)
    return CRNET_EINVAL;
  if (out == NULL) {
    crnet__set_callmsg(c, "%s: newcomm is NULL", call);
    return CRNET_EINVAL;
  }
  if (!c->w->survive) {
    crnet__set_callmsg(c,
                       "%s: needs CRNET_ON_FAILURE=continue "
                       "(crlaunch --keep-going)",
                       call);
    return CRNET_EINVAL;
  }
  max = c->size + (grow ? slots : 0);
  lost = crnet__calloc((size_t)c->size, 1);
  join = grow ? crnet__calloc((size_t)slots + 1, 1) : NULL;
  world = crnet__malloc(sizeof *world * (size_t)max);
  if (lost != NULL && world != NULL && (!grow || join != NULL) &&
      crnet__comm_derive_new(c, max, &nc) != 0)
    nc = NULL;
  crnet__split_enter(c);
  crnet__loop_acquire(c);
  rc = agree_ctx(c, call, nc != NULL, lost, join, &id);
  if (rc == 0) {
    for (int r = 0; r < c->size; r++)
      if (!lost[r]) {
        if (r == c->rank)
          rank = n;
        world[n++] = crnet__world_rank(c, r);
      }
    /* The newcomers after the survivors, in the order they joined. */
    for (int k = 0; grow && k < slots; k++)
      if (join[k])
        world[n++] = c->w->world_size + k;
    if (rank < 0) {
      /* The others counted this rank lost (its links to them failed): it
       * is not a member of what they made. */
      crnet__ctx_release(c, id);
      crnet__set_callmsg(c, "%s: the survivors counted this rank lost", call);
      rc = CRNET_EPEER;
    } else {
      crnet__comm_derive_finish(nc, id, rank, n, world);
      if (grow)
        crnet__join_admit(nc);
      *out = nc;
      nc = NULL;
    }
  }
  crnet__loop_release(c);
  crnet__split_leave(c);
  crnet__comm_derive_discard(nc);
  free(lost);
  free(join);
  free(world);
  return rc;
}

int crnet_comm_shrink(crnet_comm *c, crnet_comm **out) {
  int rc = remake(c, out, false);
  return out != NULL ? crnet__comm_made(out, rc) : rc;
}

int crnet_comm_grow(crnet_comm *c, crnet_comm **out) {
  int rc = remake(c, out, true);
  return out != NULL ? crnet__comm_made(out, rc) : rc;
}
