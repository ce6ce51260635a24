/* crnet_comm_shrink: a new comm of a comm's survivors (crnet.h,
 * docs/RELIABILITY.md).
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
#include "crnet.h"
#include "request.h"

/* Tries of 1 and 2 (only concurrent splits need more than one). */
#define MAX_TRIES 64

/* Steps 1 and 2: 0 with a reserved id, lost[] filled; or an error. */
static int agree_ctx(crnet_comm *c, bool ready, uint8_t *lost, uint32_t *id) {
  uint64_t mask[CRNET__CTX_WORDS];
  for (int t = 0; t < MAX_TRIES; t++) {
    uint32_t flag = ready, ok;
    int rc;
    crnet__ctx_offer(c, mask);
    /* The members are those of the first decision: every survivor has
     * that one. */
    rc = crnet__agree(c, &flag, mask, t == 0 ? lost : NULL);
    if (rc != 0)
      return rc;
    if (flag == 0) {
      crnet__set_callmsg(c, "crnet_comm_shrink: a survivor is out of memory");
      return CRNET_ENOMEM;
    }
    *id = crnet__ctx_lowest(mask);
    if (*id == 0) {
      crnet__set_callmsg(c,
                         "crnet_comm_shrink: no context id is free on "
                         "every survivor (at most %d comms alive at once)",
                         CRNET__MAX_CTX - 1);
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
  crnet__set_callmsg(c,
                     "crnet_comm_shrink: no agreement on a context id "
                     "after %d tries",
                     MAX_TRIES);
  return CRNET_EIO;
}

int crnet_comm_shrink(crnet_comm *c, crnet_comm **out) {
  crnet_comm *nc = NULL;
  uint8_t *lost = NULL;
  int32_t *world = NULL;
  uint32_t id = 0;
  int rc, n = 0, rank = -1;
  if (out != NULL)
    *out = NULL;
  if (c == NULL)
    return CRNET_EINVAL;
  if (out == NULL) {
    crnet__set_callmsg(c, "crnet_comm_shrink: newcomm is NULL");
    return CRNET_EINVAL;
  }
  if (!c->w->survive) {
    crnet__set_callmsg(c, "crnet_comm_shrink: needs CRNET_ON_FAILURE=continue "
                          "(crlaunch --keep-going)");
    return CRNET_EINVAL;
  }
  lost = crnet__calloc((size_t)c->size, 1);
  world = crnet__malloc(sizeof *world * (size_t)c->size);
  if (lost != NULL && world != NULL &&
      crnet__comm_derive_new(c, c->size, &nc) != 0)
    nc = NULL;
  crnet__split_enter(c);
  crnet__loop_acquire(c);
  rc = agree_ctx(c, nc != NULL, lost, &id);
  crnet__loop_release(c);
  if (rc == 0) {
    for (int r = 0; r < c->size; r++)
      if (!lost[r]) {
        if (r == c->rank)
          rank = n;
        world[n++] = crnet__world_rank(c, r);
      }
    if (rank < 0) {
      /* The others counted this rank lost (its links to them failed): it
       * is not a member of what they made. */
      crnet__ctx_release(c, id);
      crnet__set_callmsg(c, "crnet_comm_shrink: the survivors counted this "
                            "rank lost");
      rc = CRNET_EPEER;
    } else {
      crnet__comm_derive_finish(nc, id, rank, n, world);
      *out = nc;
      nc = NULL;
    }
  }
  crnet__split_leave(c);
  crnet__comm_derive_discard(nc);
  free(lost);
  free(world);
  return rc;
}
