/* The schedules a comm keeps between calls (memo.h). */
#include "memo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "comm_state.h"

/* The shape a schedule was built for: every field of crnet__call a builder
 * reads, but those fixed for the comm's life (p, rank, the host layout,
 * the tuning). */
struct crnet__sched_memo {
  crnet_collective coll;
  uint32_t id; /* the schedule (select.h) */
  uint64_t count;
  uint64_t *counts; /* p entries, or NULL */
  int32_t p;
  int32_t root;
  uint32_t esize;
  bool in_place, commutative, exclusive;
  crnet__schedule sched; /* empty unless kept in the comm */
};

void crnet__memo_drop(crnet__sched_memo *m) {
  if (m == NULL)
    return;
  crnet__sched_free(&m->sched);
  free(m->counts);
  free(m);
}

static bool same_shape(const crnet__sched_memo *m, const crnet__call *call,
                       uint32_t id) {
  if (m->id != id || m->count != call->count || m->root != call->root ||
      m->esize != call->esize || m->in_place != call->in_place ||
      m->commutative != call->commutative || m->exclusive != call->exclusive ||
      m->p != call->p || (m->counts == NULL) != (call->counts == NULL))
    return false;
  return m->counts == NULL ||
         memcmp(m->counts, call->counts, sizeof *m->counts * (size_t)m->p) == 0;
}

/* A memo of the call's shape with no schedule. */
static crnet__sched_memo *memo_new(const crnet__call *call, uint32_t id) {
  crnet__sched_memo *m = crnet__calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->coll = call->coll;
  m->id = id;
  m->count = call->count;
  m->p = call->p;
  m->root = call->root;
  m->esize = call->esize;
  m->in_place = call->in_place;
  m->commutative = call->commutative;
  m->exclusive = call->exclusive;
  if (call->counts != NULL) {
    m->counts = crnet__malloc(sizeof *m->counts * (size_t)call->p);
    if (m->counts == NULL) {
      free(m);
      return NULL;
    }
    memcpy(m->counts, call->counts, sizeof *m->counts * (size_t)call->p);
  }
  return m;
}

crnet__sched_memo *crnet__memo_take(crnet_comm *c, const crnet__call *call,
                                    uint32_t id, crnet__schedule *s,
                                    bool *hit) {
  crnet__sched_memo *m;
  *hit = false;
  /* All-to-all-v's counts and displacements differ from call to call in
   * most programs: never kept. */
  if ((unsigned)call->coll >= CRNET_COLL_COUNT || call->sdispls != NULL ||
      call->rcounts != NULL || call->rdispls != NULL)
    return NULL;
  pthread_mutex_lock(&c->w->mu);
  m = c->coll->sched_memo[call->coll];
  if (m != NULL && same_shape(m, call, id)) {
    c->coll->sched_memo[call->coll] = NULL;
    pthread_mutex_unlock(&c->w->mu);
    *s = m->sched;
    memset(&m->sched, 0, sizeof m->sched);
    *hit = true;
    return m;
  }
  pthread_mutex_unlock(&c->w->mu);
  return memo_new(call, id);
}

void crnet__memo_give_back(crnet_comm *c, crnet__sched_memo *m,
                           crnet__schedule *s) {
  crnet__sched_memo *drop;
  m->sched = *s;
  memset(s, 0, sizeof *s);
  pthread_mutex_lock(&c->w->mu);
  /* The call that ended last is kept: the next one is most likely of its
   * shape. */
  drop = c->coll->sched_memo[m->coll];
  c->coll->sched_memo[m->coll] = m;
  pthread_mutex_unlock(&c->w->mu);
  crnet__memo_drop(drop);
}
