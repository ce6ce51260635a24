/* Restarted ranks: how a process that crlaunch --restart started again
 * joins the running job, and how the survivors' crnet_comm_grow admits it
 * (crnet.h, docs/RELIABILITY.md "Growing back").
 *
 * Slots. A job of p ranks with CRNET_RESTARTS=R has p + R job ranks
 * (w->size): the world's p, then one slot per restart. The rendezvous
 * server, which stays open in such a job, gives a newcomer the next free
 * slot and the table of every slot below it (rendezvous.h), entries of the
 * ranks its launcher saw end marked gone. A lost rank's slot is never used
 * again: everything a survivor knows of it (lost, its links, its place in
 * old comms) stays true, and a newcomer is a rank nobody has met.
 *
 * Links. The higher rank of a pair opens its links, as in the mesh: the
 * newcomer connects every stream to every slot below it that is not gone
 * (crnet__lazy_want), and a later newcomer connects to it. Survivors keep
 * their listener open for that (bootstrap.c) and take the connections
 * through lazy.c's accept, which refuses a rank already lost. A connection
 * refused or cut marks that rank lost on the newcomer, as anywhere.
 *
 * Once linked to every rank below it, the newcomer sends each its table
 * entry (a JOINER frame: host, node, pid), which the others' table lacks:
 * the comms it joins place it by host like any rank.
 *
 * Admission. A survivor counts a newcomer waiting once every stream from it
 * is up, its entry has come, it is not lost, and no grow has admitted it
 * yet (crnet__join_waiting). crnet_comm_grow (collectives/shrink.c) runs the
 * survivors' fault-tolerant agreement with those views: a newcomer is
 * admitted if every survivor has it, so it is linked to all of them. The
 * survivors then make the comm (themselves in their order, the admitted
 * newcomers after them by slot) and each sends every admitted newcomer an
 * ADMIT frame naming the comm's context id and members. Every survivor
 * sends it, because any of them may die: the newcomer takes the first and
 * ignores the rest, which the agreement makes identical. Frames of the new
 * comm that arrive before the ADMIT wait, as for a comm being split
 * (w->splits).
 *
 * Everything here runs on the loop's owner.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "comm.h"
#include "frame.h"
#include "log.h"
#include "request.h"

/* What an ADMIT said: the comm this newcomer joins. */
struct crnet__admission {
  uint32_t ctx;
  int rank; /* this process's rank in it */
  int n;
  int32_t members[]; /* job ranks, in comm rank order */
};

static bool linked(const crnet__world *w, int j) {
  for (uint32_t k = 0; k < w->streams; k++) {
    const crnet__peer *p = w->peers[(size_t)j * w->streams + k];
    if (p == NULL || p->closed || p->link.failed ||
        p->link.state != CRNET__LINK_READY)
      return false;
  }
  return true;
}

void crnet__join_waiting(crnet__world *w, uint8_t *join) {
  for (int j = w->world_size; j < w->size; j++)
    join[j - w->world_size] = w->admitted != NULL && !w->admitted[j] &&
                              !w->lost[j] && w->table[j].family != 0 &&
                              linked(w, j);
}

void crnet__join_on_entry(crnet__world *w, int via,
                          const crnet__frame_header *h,
                          const uint8_t *payload) {
  crnet__rendezvous_entry e;
  if (via < w->world_size || via <= w->rank ||
      h->length != CRNET__RENDEZVOUS_ENTRY_SIZE ||
      crnet__rendezvous_entry_decode(payload, &e) != 0 || e.gone) {
    crnet__log("ignored a malformed entry from rank %d", via);
    return;
  }
  bool news;
  pthread_mutex_lock(&w->mu);
  news = w->table[via].family == 0;
  if (news)
    w->table[via] = e;
  pthread_mutex_unlock(&w->mu);
  /* Its links waited for this to choose shared memory or TCP. */
  for (uint32_t k = 0; news && k < w->streams; k++) {
    crnet__peer *p = w->peers[(size_t)via * w->streams + k];
    if (p != NULL && !p->closed && p->link.state == CRNET__LINK_READY)
      crnet__world_choose_carriage(w, &p->link);
  }
  w->progress_dirty = true;
}

/* The newcomer's own entry to every rank below it that it is linked to. */
static void send_entry(crnet__world *w) {
  uint8_t msg[CRNET__RENDEZVOUS_ENTRY_SIZE];
  crnet__rendezvous_entry_encode(&w->table[w->rank], msg);
  for (int j = 0; j < w->rank; j++) {
    crnet__peer *p = w->peers[(size_t)j * w->streams];
    if (!w->lost[j] && linked(w, j))
      crnet__link_send_control(&p->link, CRNET__FRAME_JOINER, msg, sizeof msg);
  }
}

void crnet__join_admit(crnet_comm *nc) {
  crnet__world *w = nc->w;
  size_t len = 4 + 4 * (size_t)nc->size;
  uint8_t *msg;
  if (w->admitted == NULL)
    return;
  msg = crnet__malloc(len);
  if (msg == NULL)
    return; /* the newcomer hears it from another survivor, or times out */
  crnet__put_le32(msg, (uint32_t)nc->size);
  for (int r = 0; r < nc->size; r++)
    crnet__put_le32(msg + 4 + 4 * r, (uint32_t)crnet__world_rank(nc, r));
  for (int r = 0; r < nc->size; r++) {
    int j = crnet__world_rank(nc, r);
    crnet__peer *p;
    if (j < w->world_size || j == w->rank)
      continue;
    pthread_mutex_lock(&w->mu);
    w->admitted[j] = 1;
    pthread_mutex_unlock(&w->mu);
    p = w->peers[(size_t)j * w->streams];
    if (p != NULL && !p->closed && p->link.state == CRNET__LINK_READY &&
        !p->link.failed)
      crnet__link_send_control_ctx(&p->link, CRNET__FRAME_ADMIT, nc->ctx, msg,
                                   len);
  }
  free(msg);
}

void crnet__join_on_admit(crnet__world *w, int via,
                          const crnet__frame_header *h,
                          const uint8_t *payload) {
  struct crnet__admission *a;
  uint32_t n;
  int rank = -1;
  /* Only a newcomer still waiting takes one; the copies every other
   * survivor sends are the same decision. */
  if (w->rank < w->world_size || w->admission != NULL)
    return;
  n = h->length >= 4 ? crnet__get_le32(payload) : 0;
  if (n < 2 || n > (uint32_t)w->size || h->length != 4 + 4 * (uint64_t)n ||
      h->ctx == 0 || h->ctx >= CRNET__MAX_CTX) {
    crnet__log("ignored a malformed admission from rank %d", via);
    return;
  }
  a = crnet__malloc(sizeof *a + sizeof a->members[0] * n);
  if (a == NULL)
    return;
  a->ctx = h->ctx;
  a->n = (int)n;
  for (uint32_t r = 0; r < n; r++) {
    uint32_t j = crnet__get_le32(payload + 4 + 4 * r);
    if (j >= (uint32_t)w->size || (j == (uint32_t)w->rank && rank >= 0)) {
      crnet__log("ignored a malformed admission from rank %d", via);
      free(a);
      return;
    }
    if (j == (uint32_t)w->rank)
      rank = (int)r;
    a->members[r] = (int32_t)j;
  }
  if (rank < 0) {
    crnet__log("ignored an admission from rank %d that leaves this rank out",
               via);
    free(a);
    return;
  }
  a->rank = rank;
  w->admission = a;
  w->progress_dirty = true;
}

/* --- the newcomer ----------------------------------------------------------
 */

/* Every slot below this one is linked or lost (arg: the world comm). */
static bool links_done(void *arg) {
  crnet__world *w = ((crnet_comm *)arg)->w;
  if (w->torn_down)
    return true;
  for (int j = 0; j < w->rank; j++)
    if (!w->lost[j] && !linked(w, j))
      return false;
  return true;
}

/* Every rank below this one is lost or has said goodbye (it destroyed
 * its world comm): nobody is left who could admit this one. */
static bool job_over(const crnet__world *w) {
  for (int j = 0; j < w->rank; j++) {
    const crnet__peer *p = w->peers[(size_t)j * w->streams];
    if (!w->lost[j] && p != NULL && !p->got_bye)
      return false;
  }
  return true;
}

/* An admission has come, and the entry of every member (a newcomer
 * after this one sends it when it has linked here) or it is lost. */
static bool admitted(void *arg) {
  crnet__world *w = ((crnet_comm *)arg)->w;
  if (w->torn_down || job_over(w))
    return true;
  if (w->admission == NULL)
    return false;
  for (int r = 0; r < w->admission->n; r++) {
    int j = w->admission->members[r];
    if (w->table[j].family == 0 && !w->lost[j])
      return false;
  }
  return true;
}

static uint64_t left_ms(crnet_comm *c, uint64_t deadline) {
  uint64_t now = uv_now(&c->w->loop);
  return deadline > now ? deadline - now : 1;
}

int crnet__join(crnet_comm *world, uint64_t deadline, crnet_comm **out,
                char *err, size_t errlen) {
  crnet__world *w = world->w;
  struct crnet__admission *a;
  crnet_comm *nc = NULL;
  int live = 0, rc;
  *out = NULL;
  for (int j = 0; j < w->rank; j++)
    if (!w->lost[j]) {
      crnet__lazy_want(world, j);
      live++;
    }
  if (live == 0) {
    snprintf(err, errlen,
             "restarted as job rank %d, but every other rank "
             "of the job is gone: nobody to join",
             w->rank);
    return CRNET_EPEER;
  }
  /* Frames of the comm a grow makes may come before its ADMIT: they wait
   * as for a comm being split. */
  crnet__split_enter(world);
  crnet__loop_acquire(world);
  rc =
      crnet__comm_run_until(world, links_done, world, left_ms(world, deadline));
  if (rc == 0 && !w->torn_down) {
    send_entry(w);
    rc =
        crnet__comm_run_until(world, admitted, world, left_ms(world, deadline));
  }
  crnet__loop_release(world);
  a = w->admission;
  if (a == NULL) {
    if (w->torn_down || job_over(w))
      snprintf(err, errlen,
               "restarted as job rank %d: the job ended, or "
               "lost every rank, before a crnet_comm_grow "
               "admitted it",
               w->rank);
    else
      snprintf(err, errlen,
               "restarted as job rank %d: no survivors' "
               "crnet_comm_grow admitted it within "
               "CRNET_INIT_TIMEOUT",
               w->rank);
    rc = w->torn_down || job_over(w) ? CRNET_EPEER : CRNET_ETIMEDOUT;
  } else if (crnet__comm_derive_new(world, a->n, &nc) != 0) {
    snprintf(err, errlen, "out of memory");
    rc = CRNET_ENOMEM;
  } else {
    pthread_mutex_lock(&w->mu);
    w->ctx_reserved[a->ctx / 64] |= (uint64_t)1 << (a->ctx % 64);
    pthread_mutex_unlock(&w->mu);
    crnet__comm_derive_finish(nc, a->ctx, a->rank, a->n, a->members);
    nc->owned_world = world;
    crnet__debug("admitted as rank %d of %d (context %u)", a->rank, a->n,
                 (unsigned)a->ctx);
    *out = nc;
    rc = 0;
  }
  crnet__split_leave(world);
  return rc;
}
