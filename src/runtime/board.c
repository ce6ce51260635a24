/* Boards: the cells of small collectives in the same-host links' segments.
 * The protocol is in board.h; the collectives on it are the collectives
 * layer's (board_calls.c). */
#include "board.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "link_shm.h"
#include "request.h"
#include "shm.h"

/* The link of stream 0 to comm rank j, or NULL (lazy links: not made). */
static crnet__link *link_to(crnet_comm *c, int j) {
  crnet__peer *pr =
      c->w->peers[(size_t)crnet__world_rank(c, j) * c->w->streams];
  return pr != NULL && !pr->closed ? &pr->link : NULL;
}

static crnet__shm *segment_to(crnet_comm *c, int j) {
  crnet__link *l = link_to(c, j);
  return l != NULL ? crnet__link_shm_segment(l) : NULL;
}

static void clear_slot(crnet__board_slot *s) {
  atomic_store_explicit(&s->regular, 0, memory_order_relaxed);
  for (int k = 0; k < 2; k++) {
    atomic_store_explicit(&s->cell[k].sig, 0, memory_order_relaxed);
    atomic_store_explicit(&s->cell[k].seq, 0, memory_order_release);
  }
}

bool crnet__board_prepare(crnet_comm *c) {
  bool ready = c->size <= CRNET__BOARD_MAX_RANKS &&
               c->ctx < CRNET__BOARD_SLOTS && !crnet__loop_owned_by_me(c);
  if (!ready)
    return false;
  crnet__loop_acquire(c);
  for (int j = 0; j < c->size && ready; j++)
    if (j != c->rank)
      ready = segment_to(c, j) != NULL;
  for (int j = 0; j < c->size && ready; j++)
    if (j != c->rank)
      clear_slot(&segment_to(c, j)->board_out->slot[c->ctx]);
  crnet__loop_release(c);
  return ready;
}

void crnet__board_enable(crnet_comm *c) {
  pthread_mutex_lock(&c->w->mu);
  c->board_slot = (int32_t)c->ctx;
  pthread_mutex_unlock(&c->w->mu);
}

bool crnet__board_enabled(const crnet_comm *c) { return c->board_slot >= 0; }

void crnet__board_note_regular(crnet_comm *c, uint64_t seq, uint8_t coll,
                               const crnet__frame_call *call) {
  for (int j = 0; j < c->size; j++) {
    crnet__shm *s;
    if (j == c->rank || (s = segment_to(c, j)) == NULL)
      continue;
    s->board_out->slot[c->board_slot].regular_desc.coll = coll;
    s->board_out->slot[c->board_slot].regular_desc.call = *call;
    atomic_store_explicit(&s->board_out->slot[c->board_slot].regular, seq,
                          memory_order_release);
    /* A peer asleep in a board call of this number must hear of it. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->board_in->sleeps, memory_order_relaxed))
      crnet__link_shm_ring_peer(link_to(c, j));
  }
}

/* --- one call ------------------------------------------------------------- */

int crnet__board_begin(crnet_comm *c, int coll, const crnet__frame_call *call,
                       uint64_t sig, crnet__board_call *b) {
  int rc = crnet__loop_take_for_call(c, &b->seq);
  if (rc == CRNET_EINVAL)
    crnet__set_callmsg(c,
                       "%s: a blocking call in a completion callback "
                       "would never return (start it with its "
                       "nonblocking twin instead)",
                       crnet_collective_name((crnet_collective)coll));
  if (rc != 0)
    return rc;
  /* Requests started before this call begin first: the engine begins them
   * in order, and the board calls must be counted alike everywhere. */
  crnet__progress(c);
  b->cell = (int)(++c->board_calls & 1);
  b->c = c;
  b->coll = coll;
  b->call = *call;
  b->sig = sig;
  b->n = c->size;
  b->me = c->rank;
  b->seen = 0;
  b->rc = __atomic_load_n(&c->err, __ATOMIC_RELAXED);
  b->started = uv_hrtime();
  b->bytes = 0;
  crnet__comm_begin_call(c, (uint8_t)coll, b->seq, call);
  for (int j = 0; j < b->n; j++) {
    crnet__shm *s;
    b->announced[j] = false;
    if (j == b->me)
      continue;
    /* Every link was live at the agreement and only a failure of the comm
     * closes one: a missing segment is that failure, seen first. */
    s = segment_to(c, j);
    if (s == NULL) {
      if (b->rc == 0)
        crnet__comm_fail(c, CRNET_EPEER, crnet__world_rank(c, j),
                         "%s #%" PRIu64 ": the shared-memory link to rank "
                         "%d is gone",
                         crnet_collective_name((crnet_collective)coll), b->seq,
                         j);
      b->rc = c->err != 0 ? c->err : CRNET_EPEER;
      break;
    }
    b->peer_sleeps[j] = &s->board_in->sleeps;
    b->out[j] = &s->board_out->slot[c->board_slot];
    b->in[j] = &s->board_in->slot[c->board_slot];
    b->link[j] = link_to(c, j);
  }
  if (b->rc != 0) {
    crnet__loop_release(c);
    return b->rc;
  }
  return 0;
}

uint8_t *crnet__board_out(crnet__board_call *b, int j) {
  return b->out[j]->cell[b->cell].data;
}

const uint8_t *crnet__board_in(crnet__board_call *b, int j) {
  return b->in[j]->cell[b->cell].data;
}

void crnet__board_post(crnet__board_call *b) {
  for (int j = 0; j < b->n; j++) {
    if (j == b->me)
      continue;
    crnet__board_cell *cell = &b->out[j]->cell[b->cell];
    b->out[j]->desc[b->cell].coll = (uint8_t)b->coll;
    b->out[j]->desc[b->cell].call = b->call;
    atomic_store_explicit(&cell->sig, b->sig, memory_order_relaxed);
    atomic_store_explicit(&cell->seq, b->seq, memory_order_release);
  }
  /* The other half of the sleeper's Dekker (may_sleep): our posts, then
   * its flag; it sets its flag, then looks at our posts. */
  atomic_thread_fence(memory_order_seq_cst);
  for (int j = 0; j < b->n; j++)
    if (j != b->me &&
        atomic_load_explicit(b->peer_sleeps[j], memory_order_relaxed))
      crnet__link_shm_ring_peer(b->link[j]);
}

/* Peer j has not posted this call: a peer that began this number without
 * the board (its `regular` mark) called something else. Its post may have
 * come between the two loads: looked at again after the mark. */
static int look_at(crnet__board_call *b, int j) {
  const crnet__board_slot *in = b->in[j];
  const crnet__board_cell *cell = &in->cell[b->cell];
  uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
  if (seq != b->seq) {
    if (atomic_load_explicit(&in->regular, memory_order_acquire) < b->seq)
      return 0;
    seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
    if (seq != b->seq)
      return -2;
  }
  return atomic_load_explicit(&cell->sig, memory_order_relaxed) == b->sig ? 1
                                                                          : -1;
}

/* Peer j called something else under this number: both calls in words,
 * as a mismatch of frames says it (fail.c). */
static void fail_mismatch(crnet__board_call *b, int j, bool regular) {
  crnet_comm *c = b->c;
  const crnet__board_slot *in = b->in[j];
  const crnet__board_desc *d = regular ? &in->regular_desc : &in->desc[b->cell];
  uint64_t seq = b->seq;
  char theirs[160], mine[160];
  crnet__board_desc copy;
  if (regular)
    seq = atomic_load_explicit(&in->regular, memory_order_acquire);
  /* The peer may write it meanwhile: a copy, whatever it holds, only
   * ever goes into words. */
  memcpy(&copy, d, sizeof copy);
  c->w->upper->format_call(copy.coll, seq, &copy.call, theirs, sizeof theirs);
  c->w->upper->format_call((uint8_t)b->coll, b->seq, &b->call, mine,
                           sizeof mine);
  crnet__comm_fail(c, CRNET_EMISMATCH, crnet__world_rank(c, j),
                   "mismatched calls: rank %d called %s%s but rank %d called "
                   "%s on the shared-memory board",
                   j, theirs, regular ? " without the board" : "", b->me, mine);
}

static bool all_posted(void *arg) {
  crnet__board_call *b = arg;
  int err = __atomic_load_n(&b->c->err, __ATOMIC_RELAXED);
  if (err != 0) {
    b->rc = err;
    return true;
  }
  for (int j = 0; j < b->n; j++) {
    if (j == b->me || (b->seen >> j & 1) != 0)
      continue;
    int v = look_at(b, j);
    if (v == 0)
      return false;
    if (v < 0) {
      fail_mismatch(b, j, v == -2);
      b->rc = b->c->err != 0 ? b->c->err : CRNET_EMISMATCH;
      return true;
    }
    b->seen |= (uint64_t)1 << j;
  }
  return true;
}

/* Before the loop sleeps: tells each peer not yet seen to ring (board.h).
 * The segments are looked up again: a link may have closed in the turn. */
static bool may_sleep(void *arg, bool entering) {
  crnet__board_call *b = arg;
  crnet_comm *c = b->c;
  if (!entering) {
    for (int j = 0; j < b->n; j++) {
      crnet__shm *s;
      if (!b->announced[j])
        continue;
      b->announced[j] = false;
      if ((s = segment_to(c, j)) != NULL)
        atomic_store_explicit(&s->board_out->sleeps, 0, memory_order_relaxed);
    }
    return true;
  }
  if (__atomic_load_n(&c->err, __ATOMIC_RELAXED) != 0)
    return false;
  for (int j = 0; j < b->n; j++) {
    crnet__shm *s;
    if (j == b->me || (b->seen >> j & 1) != 0 || (s = segment_to(c, j)) == NULL)
      continue;
    atomic_store_explicit(&s->board_out->sleeps, 1, memory_order_relaxed);
    b->announced[j] = true;
  }
  atomic_thread_fence(memory_order_seq_cst);
  return !all_posted(b);
}

/* About 10 µs of looks where every rank of the host has a core (none
 * where ranks share cores: the peer may need this one). */
#define BOARD_SPIN_LOOKS 256

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int crnet__board_wait(crnet__board_call *b) {
  crnet_comm *c = b->c;
  int rc;
  if (b->rc != 0)
    return b->rc;
  /* The peers are usually a few hundred ns behind, or more than the
   * polling wait's first turn: a short look at the cells alone first. */
  int looks = c->w->spin_yield || c->w->spin_ns == 0 ? 0 : BOARD_SPIN_LOOKS;
  for (int i = 0; i < looks; i++) {
    if (all_posted(b))
      return b->rc;
    cpu_relax();
  }
  rc = crnet__comm_run_until_hooked(c, all_posted, b, c->w->coll_timeout_ms,
                                    may_sleep);
  if (rc == CRNET_ETIMEDOUT && b->rc == 0) {
    int late = -1;
    for (int j = 0; j < b->n && late < 0; j++)
      if (j != b->me && (b->seen >> j & 1) == 0)
        late = j;
    crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                     "%s #%" PRIu64 " (on the shared-memory board) timed out "
                     "after %.3g s waiting for rank %d",
                     crnet_collective_name((crnet_collective)b->coll), b->seq,
                     (double)c->w->coll_timeout_ms / 1000.0, late);
    b->rc = CRNET_ETIMEDOUT;
  }
  return b->rc;
}

int crnet__board_end(crnet__board_call *b, int rc) {
  crnet_comm *c = b->c;
  uint64_t now = uv_hrtime();
  pthread_mutex_lock(&c->w->mu);
  crnet_coll_stats *st = &c->coll_stats[b->coll];
  st->calls++;
  st->failed += rc != 0;
  st->rounds++;
  st->bytes_sent += b->bytes * (uint64_t)(b->n - 1);
  st->bytes_received += b->bytes * (uint64_t)(b->n - 1);
  st->seconds += (double)(now - b->started) / 1e9;
  c->done_seq = b->seq;
  c->done_coll = (uint8_t)b->coll;
  c->done_round = 0;
  pthread_mutex_unlock(&c->w->mu);
  crnet__loop_release(c);
  return rc;
}
