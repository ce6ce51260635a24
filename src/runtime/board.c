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
#include "trace.h"

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
  atomic_store_explicit(&s->gone, 0, memory_order_relaxed);
  for (int k = 0; k < CRNET__BOARD_MARKS; k++)
    atomic_store_explicit(&s->marks[k].seq, 0, memory_order_relaxed);
  for (int k = 0; k < 2; k++) {
    atomic_store_explicit(&s->cell[k].sig, 0, memory_order_relaxed);
    atomic_store_explicit(&s->cell[k].seq, 0, memory_order_release);
  }
}

/* Every member's link has finished moving onto shared memory, one way
 * or the other (comm rank by comm rank). */
static bool links_settled(void *arg) {
  crnet_comm *c = arg;
  if (__atomic_load_n(&c->err, __ATOMIC_RELAXED) != 0)
    return true;
  for (int j = 0; j < c->size; j++) {
    crnet__link *l;
    if (j != c->rank && (l = link_to(c, j)) != NULL &&
        !crnet__link_shm_settled(l))
      return false;
  }
  return true;
}

/* How long a new comm waits for its links' move onto shared memory: a
 * few ms where nothing is wrong. */
#define SETTLE_MS 5000

bool crnet__board_prepare(crnet_comm *c) {
  bool ready = c->size <= CRNET__BOARD_MAX_RANKS &&
               c->ctx < CRNET__BOARD_SLOTS && !crnet__loop_owned_by_me(c);
  if (!ready)
    return false;
  crnet__loop_acquire(c);
  if (!links_settled(c))
    (void)crnet__comm_run_until(c, links_settled, c, SETTLE_MS);
  for (int j = 0; j < c->size && ready; j++)
    if (j != c->rank)
      ready = segment_to(c, j) != NULL;
  for (int j = 0; j < c->size && ready; j++)
    if (j != c->rank)
      clear_slot(&segment_to(c, j)->board_out->slot[c->ctx]);
  crnet__loop_release(c);
  return ready;
}

void crnet__board_enable(crnet_comm *c, bool on) {
  pthread_mutex_lock(&c->w->mu);
  /* The agreement was the library's call, not the program's: messages
   * number the program's calls, and the counters count them. */
  c->call_shift = c->seq_issued;
  memset(c->coll_stats, 0, sizeof c->coll_stats);
  memset(c->peer_stats, 0, sizeof *c->peer_stats * (size_t)c->size);
  if (on)
    c->board_slot = (int32_t)c->ctx;
  pthread_mutex_unlock(&c->w->mu);
}

bool crnet__board_enabled(const crnet_comm *c) { return c->board_slot >= 0; }

void crnet__board_forget(crnet_comm *c) {
  if (c->board_slot < 0 || crnet__loop_owned_by_me(c))
    return;
  crnet__loop_acquire(c);
  for (int j = 0; j < c->size; j++) {
    crnet__shm *s;
    if (j == c->rank || (s = segment_to(c, j)) == NULL)
      continue;
    atomic_store_explicit(&s->board_out->slot[c->board_slot].gone, 1,
                          memory_order_seq_cst);
    if (atomic_load_explicit(&s->board_in->sleeps, memory_order_seq_cst))
      crnet__link_shm_ring_peer(link_to(c, j));
  }
  crnet__loop_release(c);
}

void crnet__board_note_regular(crnet_comm *c, uint64_t seq, uint8_t coll,
                               const crnet__frame_call *call) {
  for (int j = 0; j < c->size; j++) {
    crnet__shm *s;
    if (j == c->rank || (s = segment_to(c, j)) == NULL)
      continue;
    crnet__board_mark *m =
        &s->board_out->slot[c->board_slot].marks[seq % CRNET__BOARD_MARKS];
    m->coll = coll;
    m->call = *call;
    atomic_store_explicit(&m->seq, seq, memory_order_seq_cst);
    /* A peer asleep in a board call of this number must hear of it. */
    if (atomic_load_explicit(&s->board_in->sleeps, memory_order_seq_cst))
      crnet__link_shm_ring_peer(link_to(c, j));
  }
}

/* --- one call ------------------------------------------------------------- */

int crnet__board_open(crnet_comm *c, int coll, const crnet__frame_call *call,
                      uint64_t sig, uint64_t seq, crnet__board_call *b) {
  b->c = c;
  b->id.seq = seq;
  b->k = ++c->board_calls;
  b->id.cell = (int)(b->k & 1);
  b->id.coll = coll;
  b->id.call = *call;
  b->id.sig = sig;
  b->n = c->size;
  b->me = c->rank;
  b->seen = 0;
  b->doubted = 0;
  b->waits = 0;
  b->light = 0;
  b->posted = false;
  b->hold = false;
  b->next = NULL;
  b->rc = __atomic_load_n(&c->err, __ATOMIC_RELAXED);
  b->started = uv_hrtime();
  b->bytes = 0;
  for (int j = 0; j < b->n && b->rc == 0; j++) {
    crnet__shm *s;
    if (j == b->me)
      continue;
    /* Every link was live at the agreement and only a failure of the comm
     * closes one: a missing segment is that failure, seen first. */
    s = segment_to(c, j);
    if (s == NULL) {
      crnet__comm_fail(c, CRNET_EPEER, crnet__world_rank(c, j),
                       "%s #%" PRIu64 ": the shared-memory link to rank "
                       "%d is gone",
                       crnet_collective_name((crnet_collective)coll),
                       crnet__call_number(c, seq), j);
      b->rc = c->err != 0 ? c->err : CRNET_EPEER;
      break;
    }
    b->peer_sleeps[j] = &s->board_in->sleeps;
    b->my_sleeps[j] = &s->board_out->sleeps;
    b->out[j] = &s->board_out->slot[c->board_slot];
    b->in[j] = &s->board_in->slot[c->board_slot];
    b->link[j] = link_to(c, j);
    b->waits |= (uint64_t)1 << j;
    if (crnet__shm_light(s))
      b->light |= (uint64_t)1 << j;
  }
  return b->rc;
}

void crnet__board_wait_for(crnet__board_call *b, uint64_t peers) {
  b->waits = peers & ~((uint64_t)1 << b->me);
}

static int look_at(const crnet__board_slot *in, const crnet__board_ident *id);
/* A post that says another call (or a peer's mark, or its destroyed
 * comm) is judged only at the next look: what the peer sent before it
 * (an ABORT saying why it ends, when it aborted and then destroyed its
 * comms) is in the link already, and the wait reads the links between
 * two looks (a polling wait's turn, may_sleep, a link's idle handle), so
 * that the comm fails for the peer's own reason. False the first time. */
static bool judged(crnet__board_call *b, int j) {
  uint64_t bit = (uint64_t)1 << j;
  if ((b->doubted & bit) != 0)
    return true;
  b->doubted |= bit;
  return false;
}
static int refuse(crnet_comm *c, int j, int v, const crnet__board_slot *in,
                  const crnet__board_ident *id);

/* Whether every peer has posted the board call before b: the posts it did
 * not wait for (crnet__board_owed), looked at now. A post that says
 * another call fails the comm, and b->rc says so. */
static bool owed_posts_in(crnet__board_call *b) {
  crnet_comm *c = b->c;
  while (c->board_owed_peers != 0) {
    int j = __builtin_ctzll(c->board_owed_peers);
    int v = look_at(b->in[j], &c->board_owed);
    if (v == 0 || (v < 0 && !judged(b, j)))
      return false;
    if (v < 0) {
      b->rc = refuse(c, j, v, b->in[j], &c->board_owed);
      return true;
    }
    c->board_owed_peers &= c->board_owed_peers - 1;
  }
  return true;
}

bool crnet__board_turn(crnet__board_call *b) {
  return b->c->board_done + 1 == b->k && owed_posts_in(b);
}

void crnet__board_close(crnet__board_call *b) {
  crnet_comm *c = b->c;
  uint64_t everyone = (b->n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << b->n) - 1);
  c->board_done = b->k;
  c->board_owed_peers = everyone & ~b->seen & ~((uint64_t)1 << b->me);
  c->board_owed = b->id;
}

/* The direct path: a blocking call, the loop held all along. */
int crnet__board_begin(crnet_comm *c, int coll, const crnet__frame_call *call,
                       uint64_t sig, crnet__board_call *b) {
  uint64_t seq;
  int rc = crnet__loop_take_for_call(c, &seq);
  if (rc == CRNET_EINVAL)
    crnet__set_callmsg(c,
                       "%s: a blocking call in a completion callback "
                       "would never return (start it with its "
                       "nonblocking twin instead)",
                       crnet_collective_name((crnet_collective)coll));
  if (rc != 0)
    return rc; /* CRNET__LOOP_BUSY included: the caller starts a request */
  /* Requests started before this call begin first: the engine begins
   * them in order, and board calls are counted in that order everywhere. */
  crnet__progress(c);
  crnet__comm_begin_call(c, (uint8_t)coll, seq, call);
  if ((rc = crnet__board_open(c, coll, call, sig, seq, b)) != 0) {
    crnet__loop_release(c);
    return rc;
  }
  return 0;
}

uint8_t *crnet__board_out(crnet__board_call *b, int j) {
  return b->out[j]->cell[b->id.cell].data;
}

const uint8_t *crnet__board_in(crnet__board_call *b, int j) {
  return b->in[j]->cell[b->id.cell].data;
}

void crnet__board_post(crnet__board_call *b) {
  for (int j = 0; j < b->n; j++) {
    if (j == b->me)
      continue;
    crnet__board_cell *cell = &b->out[j]->cell[b->id.cell];
    b->out[j]->desc[b->id.cell].coll = (uint8_t)b->id.coll;
    b->out[j]->desc[b->id.cell].call = b->id.call;
    atomic_store_explicit(&cell->sig, b->id.sig, memory_order_relaxed);
    if (b->light >> j & 1)
      atomic_store_explicit(&cell->seq, b->id.seq, memory_order_release);
    else
      atomic_store_explicit(&cell->seq, b->id.seq, memory_order_seq_cst);
  }
  /* The other half of the sleeper's Dekker (may_sleep): our posts, then
   * its flag; it sets its flag, then looks at our posts. Without the full
   * fence where the peer fences for us before it sleeps (shm.h,
   * "Asymmetric fences"). */
  for (int j = 0; j < b->n; j++)
    if (j != b->me &&
        atomic_load_explicit(b->peer_sleeps[j], memory_order_seq_cst))
      crnet__link_shm_ring_peer(b->link[j]);
  b->posted = true;
}

/* Peer j's post of this call: 1 (the same call), 0 (not yet), -1 (another
 * call under this number), -2 (its mark says it began this number without
 * the board), -3 (it has destroyed the comm). */
static int look_at(const crnet__board_slot *in, const crnet__board_ident *id) {
  const crnet__board_cell *cell = &in->cell[id->cell];
  if (atomic_load_explicit(&cell->seq, memory_order_seq_cst) != id->seq) {
    int v = atomic_load_explicit(&in->marks[id->seq % CRNET__BOARD_MARKS].seq,
                                 memory_order_seq_cst) == id->seq
                ? -2
            : atomic_load_explicit(&in->gone, memory_order_seq_cst) ? -3
                                                                    : 0;
    /* A peer posts before it completes the call and destroys the comm
     * after: its post may have come between the first load and the flag.
     * Looked at once more, after the flag. */
    if (v == 0 ||
        atomic_load_explicit(&cell->seq, memory_order_seq_cst) != id->seq)
      return v;
  }
  return atomic_load_explicit(&cell->sig, memory_order_relaxed) == id->sig ? 1
                                                                           : -1;
}

/* Peer j called something else under this number: both calls in words,
 * as a mismatch of frames says it (fail.c). The peer may write them
 * meanwhile: copies, whatever they hold, only ever go into words. */
static void fail_mismatch(crnet_comm *c, int j, bool regular,
                          const crnet__board_slot *in,
                          const crnet__board_ident *id) {
  char theirs[160], mine[160];
  crnet__board_desc d;
  if (regular) {
    const crnet__board_mark *m = &in->marks[id->seq % CRNET__BOARD_MARKS];
    d.coll = m->coll;
    d.call = m->call;
  } else {
    memcpy(&d, &in->desc[id->cell], sizeof d);
  }
  c->w->upper->format_call(d.coll, crnet__call_number(c, id->seq), &d.call,
                           theirs, sizeof theirs);
  c->w->upper->format_call((uint8_t)id->coll, crnet__call_number(c, id->seq),
                           &id->call, mine, sizeof mine);
  crnet__comm_fail(c, CRNET_EMISMATCH, crnet__world_rank(c, j),
                   "mismatched calls: rank %d called %s%s but rank %d called "
                   "%s on the shared-memory board",
                   j, theirs, regular ? " without the board" : "", c->rank,
                   mine);
}

/* Peer j's post of call id said v < 0 (look_at): fails the comm (all the
 * comms shared with j, when j has destroyed this one); the error. */
static int refuse(crnet_comm *c, int j, int v, const crnet__board_slot *in,
                  const crnet__board_ident *id) {
  if (v == -3) {
    /* As a frame of a comm it no longer has does to it (fail.c): every
     * comm this rank shares with it fails, and tells it so. */
    crnet__world_fail_peer(
        c->w, crnet__world_rank(c, j), CRNET_EMISMATCH,
        "mismatched calls: rank %d called %s #%" PRIu64
        " on a communicator that is no longer on rank %d (context %" PRIu32
        ": it has destroyed it)",
        c->rank, crnet_collective_name((crnet_collective)id->coll),
        crnet__call_number(c, id->seq), j, c->ctx);
  } else {
    fail_mismatch(c, j, v == -2, in, id);
  }
  return c->err != 0 ? c->err : CRNET_EMISMATCH;
}

static bool all_posted(void *arg) {
  crnet__board_call *b = arg;
  int err = __atomic_load_n(&b->c->err, __ATOMIC_RELAXED);
  if (err != 0) {
    b->rc = err;
    return true;
  }
  for (uint64_t left = b->waits & ~b->seen; left != 0; left &= left - 1) {
    int j = __builtin_ctzll(left);
    int v = look_at(b->in[j], &b->id);
    if (v == 0 || (v < 0 && !judged(b, j)))
      return false;
    if (v < 0) {
      b->rc = refuse(b->c, j, v, b->in[j], &b->id);
      return true;
    }
    b->seen |= (uint64_t)1 << j;
  }
  return true;
}

bool crnet__board_poll(crnet__board_call *b) { return all_posted(b); }

/* Sleeping (board.h). Every segment this rank's call waits on gets this
 * side's `sleeps` set, then the posts are looked at once more: a post
 * made before the flag was visible is seen now, one made after finds the
 * flag and rings. The flags and the numbers are stored and loaded seq_cst,
 * as the rings' positions are (shm.c says why: a fence would do, but
 * ThreadSanitizer follows no fences), and where the posts were stored
 * without the fence, one membarrier after all the flags puts it into the
 * posters (shm.h, "Asymmetric fences"). Only while the comm has not
 * failed: a failed comm's links may be closing, their segments going.
 * False if the fence failed: the caller must not sleep. */
static bool announce(crnet__board_call *b, uint64_t peers, bool on) {
  if (__atomic_load_n(&b->c->err, __ATOMIC_RELAXED) != 0)
    return true;
  for (uint64_t p = peers; p != 0; p &= p - 1)
    atomic_store_explicit(b->my_sleeps[__builtin_ctzll(p)], on ? 1u : 0u,
                          memory_order_seq_cst);
  if (!on || peers == 0 || crnet__shm_sleep_fence())
    return true;
  announce(b, peers, false);
  return false;
}

static bool may_sleep(void *arg, bool entering) {
  crnet__board_call *b = arg;
  if (!entering) {
    announce(b, b->waits | b->c->board_owed_peers, false);
    return true;
  }
  /* A doubted post is judged at the next look: the links it came by are
   * read first (judged). */
  for (uint64_t d = b->doubted;
       d != 0 && __atomic_load_n(&b->c->err, __ATOMIC_RELAXED) == 0; d &= d - 1)
    crnet__link_shm_pump(b->link[__builtin_ctzll(d)]);
  if (!b->posted) {
    /* Waits for an older call of this rank (its own announcement counts)
     * or for the posts the last board call did not wait for. */
    if (b->c->board_done + 1 != b->k)
      return true;
    return announce(b, b->c->board_owed_peers, true) && !crnet__board_turn(b);
  }
  return announce(b, b->waits & ~b->seen, true) && !all_posted(b);
}

void crnet__board_track(crnet__board_call *b, bool on) {
  crnet__world *w = b->c->w;
  if (on) {
    b->next = w->board_waiting;
    w->board_waiting = b;
    return;
  }
  for (crnet__board_call **at = &w->board_waiting; *at != NULL;
       at = &(*at)->next)
    if (*at == b) {
      *at = b->next;
      break;
    }
}

bool crnet__board_loop_may_sleep(crnet__world *w, bool entering) {
  bool ok = true;
  for (crnet__board_call *b = w->board_waiting; b != NULL; b = b->next)
    if (!may_sleep(b, entering))
      ok = false;
  return ok;
}

/* About 10 µs of looks where every rank of the host has a core (none
 * where ranks share cores: the peer may need this one). */
#define BOARD_SPIN_LOOKS 256

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* A blocking call's wait ends early, to be handed over as a request,
 * when another thread wants the loop: that thread's call may be what a
 * peer's call, on which this one waits, waits for. */
static bool handed_over(crnet__board_call *b) {
  if (b->hold || !crnet__loop_wanted(b->c))
    return false;
  b->hand_over = true;
  return true;
}

static bool my_turn(void *arg) {
  crnet__board_call *b = arg;
  if (__atomic_load_n(&b->c->err, __ATOMIC_RELAXED) != 0)
    return true;
  return crnet__board_turn(b) || handed_over(b);
}

static bool posted_or_wanted(void *arg) {
  crnet__board_call *b = arg;
  return all_posted(b) || handed_over(b);
}

/* Whom call b waits for, in words: the ranks whose posts did not come,
 * or the board call before it. */
static void awaited_by(const crnet__board_call *b, char *buf, size_t n) {
  const crnet_comm *c = b->c;
  uint64_t peers = b->waits & ~b->seen;
  char who[160];
  size_t len = 0;
  buf[0] = '\0';
  if (!b->posted && c->board_done + 1 != b->k) {
    snprintf(buf, n, "the board call before it (this rank's own)");
    return;
  }
  if (!b->posted) {
    len = (size_t)snprintf(
        buf, n,
        "the posts of %s #%" PRIu64 " (the board "
        "call before it) by ",
        crnet_collective_name((crnet_collective)c->board_owed.coll),
        crnet__call_number(c, c->board_owed.seq));
    peers = c->board_owed_peers;
  }
  for (bool first = true; peers != 0 && len < n; peers &= peers - 1) {
    crnet__describe_rank(c, __builtin_ctzll(peers), who, sizeof who);
    len += (size_t)snprintf(buf + len, n - len, "%s%s", first ? "" : ", ", who);
    first = false;
  }
}

bool crnet__board_awaited(const crnet_comm *c, uint64_t seq, char *buf,
                          size_t n) {
  for (const crnet__board_call *b = c->w->board_waiting; b != NULL; b = b->next)
    if (b->c == c && b->id.seq == seq) {
      awaited_by(b, buf, n);
      return true;
    }
  return false;
}

/* CRNET_TIMEOUT ran out: as a request's timeout says it (progress.c). */
static int timed_out(crnet__board_call *b) {
  crnet_comm *c = b->c;
  char awaited[400];
  awaited_by(b, awaited, sizeof awaited);
  crnet__comm_fail(c, CRNET_ETIMEDOUT, -1,
                   "rank %d timed out in %s #%" PRIu64
                   " (on the shared-memory board) after %.3g s "
                   "(CRNET_TIMEOUT) waiting for %s",
                   c->rank, crnet_collective_name((crnet_collective)b->id.coll),
                   crnet__call_number(c, b->id.seq),
                   (double)c->w->coll_timeout_ms / 1000.0, awaited);
  return CRNET_ETIMEDOUT;
}

int crnet__board_wait_turn(crnet__board_call *b) {
  crnet_comm *c = b->c;
  b->hand_over = false;
  if (b->rc == 0 && !my_turn(b) &&
      crnet__comm_run_until_hooked(c, my_turn, b, c->w->coll_timeout_ms,
                                   may_sleep) != 0)
    b->rc = timed_out(b);
  if (b->rc == 0)
    b->rc = __atomic_load_n(&c->err, __ATOMIC_RELAXED);
  if (b->rc == 0 && !crnet__board_turn(b) && b->hand_over)
    return CRNET__BOARD_HAND_OVER;
  return b->rc;
}

/* The frames a peer wrote before its post are in the link now. A call it
 * made on frames that no receive of this rank will take (the other side
 * of a mismatch where neither rank receives: a bcast's root against a
 * reduce's contributor) would otherwise lie unread while the board calls
 * after it complete: read now, the comm fails on it (fail.c). Blocking
 * calls only, outside the engine's pass; a look at a ring position
 * where nothing came. */
static int read_what_came(crnet__board_call *b) {
  for (uint64_t left = b->waits; left != 0 && b->rc == 0; left &= left - 1) {
    crnet__link *l = b->link[__builtin_ctzll(left)];
    if (crnet__link_shm_unread(l)) {
      crnet__link_shm_pump(l);
      b->rc = __atomic_load_n(&b->c->err, __ATOMIC_RELAXED);
    }
  }
  return b->rc;
}

int crnet__board_wait(crnet__board_call *b) {
  crnet_comm *c = b->c;
  int rc;
  if (b->rc != 0)
    return b->rc;
  /* The peers are usually a few hundred ns behind, or more than the
   * polling wait's first turn: a short look at the cells alone first. */
  int looks = c->w->spin_yield || c->w->spin_ns == 0 ? 0 : BOARD_SPIN_LOOKS;
  for (int i = 0; i < looks && b->doubted == 0; i++) {
    if (all_posted(b))
      return b->rc == 0 ? read_what_came(b) : b->rc;
    cpu_relax();
  }
  b->hand_over = false;
  rc = crnet__comm_run_until_hooked(c, posted_or_wanted, b,
                                    c->w->coll_timeout_ms, may_sleep);
  if (rc == CRNET_ETIMEDOUT && b->rc == 0)
    b->rc = timed_out(b);
  if (b->rc == 0 && b->hand_over && !all_posted(b))
    return CRNET__BOARD_HAND_OVER;
  return b->rc == 0 ? read_what_came(b) : b->rc;
}

/* Bytes this rank's call hands peer j (to_j) or takes from it (from_j):
 * the whole share, but only to the root (reduce) or from it (bcast). */
static uint64_t bytes_with(const crnet__board_call *b, int j, bool to_j) {
  int root = b->id.call.root;
  switch (b->id.coll) {
  case CRNET_COLL_REDUCE:
    return (to_j ? j == root : b->me == root) ? b->bytes : 0;
  case CRNET_COLL_BCAST:
    return (to_j ? b->me == root : j == root) ? b->bytes : 0;
  default:
    return b->bytes;
  }
}

void crnet__board_account(crnet__board_call *b, int rc) {
  crnet_comm *c = b->c;
  uint64_t now = uv_hrtime(), sent = 0, received = 0;
  crnet_coll_stats *st = &c->coll_stats[b->id.coll];
  for (int j = 0; j < b->n && rc == 0; j++) {
    crnet_peer_stats *ps = &c->peer_stats[j];
    uint64_t to = bytes_with(b, j, true), from = bytes_with(b, j, false);
    if (j == b->me)
      continue;
    ps->bytes_sent += to;
    ps->bytes_received += from;
    ps->messages_sent += to > 0;
    ps->messages_received += from > 0;
    sent += to;
    received += from;
  }
  st->calls++;
  st->failed += rc != 0;
  st->rounds++;
  st->bytes_sent += sent;
  st->bytes_received += received;
  st->seconds += (double)(now - b->started) / 1e9;
  if (c->w->trace != NULL) {
    char what[192];
    c->w->upper->format_call((uint8_t)b->id.coll,
                             crnet__call_number(c, b->id.seq), &b->id.call,
                             what, sizeof what);
    crnet__trace_call tc = {
        .name = crnet_collective_name((crnet_collective)b->id.coll),
        .seq = crnet__call_number(c, b->id.seq),
        .what = what,
        .bytes_sent = sent,
        .bytes_received = received,
        .rounds = (uint32_t)(b->n - 1),
        .result = rc == 0 ? "ok" : crnet_err_name(rc),
        .ctx = c->ctx,
        .comm_rank = c->rank,
        .comm_size = c->size};
    /* The trace's rounds have one peer each way: a board call's exchange
     * with each peer is one, all of them over the call's time. */
    for (int j = 0, k = 0; j < b->n; j++) {
      uint64_t to = rc == 0 ? bytes_with(b, j, true) : 0;
      uint64_t from = rc == 0 ? bytes_with(b, j, false) : 0;
      if (j == b->me)
        continue;
      crnet__trace_round tr = {.k = (uint32_t)k++,
                               .lane = 0,
                               .to = to > 0 ? crnet__world_rank(c, j) : -1,
                               .from = from > 0 ? crnet__world_rank(c, j) : -1,
                               .bytes_sent = to,
                               .bytes_received = from,
                               .ctx = c->ctx};
      crnet__trace_round_done(c->w->trace, b->started, now, &tr);
    }
    crnet__trace_collective(c->w->trace, b->started, now, &tc);
    if (rc != 0)
      crnet__trace_flush(c->w->trace);
  }
}

int crnet__board_end(crnet__board_call *b, int rc) {
  crnet_comm *c = b->c;
  if (rc == 0)
    crnet__board_close(b);
  pthread_mutex_lock(&c->w->mu);
  crnet__board_account(b, rc);
  c->done_seq = b->id.seq;
  c->done_coll = (uint8_t)b->id.coll;
  c->done_round = 0;
  pthread_mutex_unlock(&c->w->mu);
  crnet__loop_release(c);
  return rc;
}
