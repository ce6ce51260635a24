/* Surviving lost ranks: revoke, the lost ranks of a comm, and the
 * fault-tolerant agreement under crnet_comm_agree and crnet_comm_shrink
 * (crnet.h, docs/RELIABILITY.md).
 *
 * The agreement. Each comm numbers its agreements (a->seq); every member
 * calls them in the same order. For agreement k, the coordinator is the
 * lowest rank of the comm that this rank does not know to be lost. Each
 * other rank sends its vote (flag, context-id mask, the ranks it knows
 * lost) to the coordinator as it sees it, and again to the next one when
 * that one is lost. The coordinator waits for a vote of k from every rank
 * it does not know lost, then decides: the AND of the flags and masks, the
 * OR of the lost ranks and of those it knows itself; it sends the decision
 * to every such rank and keeps it.
 *
 * A coordinator may die having sent its decision to some ranks only. The
 * next one must then decide the same, for those ranks have returned it:
 *   - a rank that holds the decision of k and learns that a rank was lost
 *     sends it, as a vote marked decided, to the coordinator it now sees;
 *   - a coordinator that receives a decided vote adopts that decision;
 *   - a rank asked for a vote of k it has decided answers with the
 *     decision.
 * The new coordinator waits for a vote from every rank it does not know
 * lost, so it hears from every live rank that holds a decision before it
 * would decide anew; it decides anew only if no live rank holds one, and
 * then no rank that returns can have seen another. Two rules keep that
 * true: a rank takes a DECIDE only from a coordinator it does not know
 * lost (once it knows, it has voted to the next one, which may decide
 * anew), and a decided vote is adopted only by a coordinator (a rank that
 * only votes may have voted to the next coordinator already). Votes that
 * came before a rank took its decision are answered with it.
 *
 * Whether some survivor had not acknowledged a lost rank is the decision's
 * too (each vote marks the lost ranks its rank acknowledged), so that
 * crnet_comm_agree returns the same on every survivor. Knowledge of losses
 * spreads (fail.c: every rank that learns of a loss relays it with an
 * ABORT frame on the comms that have the lost rank), so the ranks' views
 * of who coordinates meet.
 *
 * Everything here runs on the loop's owner: frames in on_peer_control, the
 * agreement in the calling thread, which holds the loop while it waits.
 */
#include "comm.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "frame.h"
#include "log.h"
#include "request.h"

#define MASK_WORDS CRNET__CTX_WORDS
/* Payload: u32 flag, u32 flags, the mask, a byte per comm rank, a byte per
 * restart slot of the job (the newcomers the voter has linked to: join.c;
 * in a decision, those linked to every survivor). */
#define AGREE_HEAD (8 + 8 * MASK_WORDS)
#define VOTE_DECIDED 1u /* the vote is a decision already taken */
#define DEC_UNACKED 2u  /* a decision: a rank it counts lost was not
                           acknowledged by every survivor */
/* A rank's byte in a vote: known lost, and acknowledged
 * (crnet_comm_ack_lost) by the voter; in a decision: lost. */
#define RANK_LOST 1u
#define RANK_ACKED 2u

/* One vote, or one decision: what an agreement carries. */
struct agree_value {
  uint64_t seq; /* the agreement's number; 0: none */
  bool decided; /* a decision (adopted as is), not a vote */
  bool unacked; /* a decision: DEC_UNACKED */
  uint32_t flag;
  uint64_t mask[MASK_WORDS];
  uint8_t *lost; /* a byte per comm rank */
  uint8_t *join; /* a byte per restart slot (nslots) */
};

struct crnet__agree {
  uint64_t seq;              /* agreements begun on this comm */
  struct agree_value dec;    /* the latest decision this rank holds */
  int dec_told;              /* the coordinator that knows dec: the one
                                that took it, or the one told since */
  struct agree_value held;   /* a decision another rank holds and sent
                                as a decided vote: this rank adopts it
                                when it coordinates (agree_step) */
  struct agree_value *votes; /* by comm rank: the latest vote received */
  uint8_t *acked;            /* by comm rank: crnet_comm_ack_lost */
};

/* An agreement frame for a comm this rank is still making. */
struct crnet__agree_frame {
  struct crnet__agree_frame *next;
  int via;
  crnet__frame_header h;
  uint8_t *payload;
};

/* --- the test hook ------------------------------------------------ */

/* crnet__agree_die_at (comm.h): this process kills itself in agreement
 * die_seq, as its coordinator after telling die_told ranks the decision,
 * or as a voter (die_told < 0) once its vote is out. 0: never. */
static uint64_t die_seq;
static int die_told;

void crnet__agree_die_at(uint64_t seq, int told) {
  die_seq = seq;
  die_told = told;
}

static bool link_idle(void *arg) { return !crnet__link_busy(arg); }

/* Dies if this is the moment; what was sent to c's rank `to` (if >= 0) has
 * left first, so that the kill cannot take it back. */
static void maybe_die(crnet_comm *c, uint64_t seq, int told, int to) {
  if (die_seq == 0 || seq != die_seq || told != die_told)
    return;
  crnet__peer *p = to >= 0 ? *crnet__comm_link(c, crnet__world_rank(c, to), 0)
                           : NULL;
  if (p != NULL && !p->closed)
    crnet__comm_run_until(c, link_idle, &p->link, 1000);
  raise(SIGKILL);
}

/* --- state --------------------------------------------------------- */

static void value_free(struct agree_value *v) {
  free(v->lost);
  free(v->join);
  v->lost = NULL;
  v->join = NULL;
}

/* Restart slots of the job: the join bytes of every agreement frame. */
static int nslots(const crnet_comm *c) { return c->w->size - c->w->world_size; }

/* v's two arrays for comm c; false if out of memory. */
static bool value_alloc(const crnet_comm *c, struct agree_value *v) {
  v->lost = crnet__calloc((size_t)c->size, 1);
  v->join = crnet__calloc((size_t)nslots(c) + 1, 1);
  return v->lost != NULL && v->join != NULL;
}

void crnet__agree_free(crnet_comm *c) {
  struct crnet__agree *a = c->agree;
  if (a == NULL)
    return;
  for (int r = 0; r < c->size && a->votes != NULL; r++)
    value_free(&a->votes[r]);
  free(a->votes);
  value_free(&a->dec);
  value_free(&a->held);
  free(a->acked);
  free(a);
  c->agree = NULL;
}

void crnet__agree_world_free(crnet__world *w) {
  while (w->early_agree != NULL) {
    struct crnet__agree_frame *f = w->early_agree;
    w->early_agree = f->next;
    free(f->payload);
    free(f);
  }
}

/* c's agreement state, made at first use; NULL if out of memory. */
static struct crnet__agree *agree_state(crnet_comm *c) {
  struct crnet__agree *a;
  bool ok;
  pthread_mutex_lock(&c->w->mu);
  a = c->agree;
  if (a == NULL && (a = crnet__calloc(1, sizeof *a)) != NULL) {
    c->agree = a;
    a->votes = crnet__calloc((size_t)c->size, sizeof *a->votes);
    a->acked = crnet__calloc((size_t)c->size, 1);
    ok = a->votes != NULL && a->acked != NULL;
    ok = value_alloc(c, &a->dec) && ok;
    ok = value_alloc(c, &a->held) && ok;
    for (int r = 0; r < c->size && ok; r++)
      ok = value_alloc(c, &a->votes[r]);
    if (!ok) {
      crnet__agree_free(c);
      a = NULL;
    }
  }
  pthread_mutex_unlock(&c->w->mu);
  return a;
}

static bool rank_lost(const crnet_comm *c, int r) {
  const crnet__world *w = c->w;
  return w->lost != NULL && w->lost[crnet__world_rank(c, r)];
}

/* The lowest rank of c not known lost (this rank at worst). */
static int coordinator(const crnet_comm *c) {
  int r = 0;
  while (r < c->rank && rank_lost(c, r))
    r++;
  return r;
}

/* --- frames -------------------------------------------------------- */

/* With lazy links, starts connecting to c's rank r if there is no link
 * yet: a dead rank then shows as a refused connection, and is lost. */
static void want_link(crnet_comm *c, int r) {
  if (c->w->lazy && c->w->comms[0] != NULL)
    crnet__lazy_want(c->w->comms[0], crnet__world_rank(c, r));
}

/* Sends v to c's rank r: false if there is no link to it (yet). */
static bool send_value(crnet_comm *c, int r, uint8_t kind,
                       const struct agree_value *v) {
  crnet__peer *p = *crnet__comm_link(c, crnet__world_rank(c, r), 0);
  size_t len = AGREE_HEAD + (size_t)c->size + (size_t)nslots(c);
  crnet__frame_header h;
  uint8_t *msg;
  if (p == NULL || p->closed || p->link.state != CRNET__LINK_READY) {
    want_link(c, r);
    return false; /* lost (its loss is known then), or not linked yet */
  }
  msg = crnet__malloc(len);
  if (msg == NULL) {
    crnet__comm_fail(c, CRNET_ENOMEM, c->w->rank,
                     "out of memory for an agreement's message");
    return false;
  }
  crnet__put_le32(msg, v->flag);
  crnet__put_le32(msg + 4, (v->decided ? VOTE_DECIDED : 0) |
                               (v->unacked ? DEC_UNACKED : 0));
  for (int i = 0; i < MASK_WORDS; i++)
    crnet__put_le64(msg + 8 + 8 * i, v->mask[i]);
  memcpy(msg + AGREE_HEAD, v->lost, (size_t)c->size);
  memcpy(msg + AGREE_HEAD + c->size, v->join, (size_t)nslots(c));
  memset(&h, 0, sizeof h);
  h.kind = kind;
  h.seq = v->seq;
  h.ctx = c->ctx;
  h.length = len;
  crnet__link_send_control_hdr(&p->link, &h, msg);
  free(msg);
  return true;
}

static void copy_value(struct agree_value *to, const struct agree_value *from,
                       const crnet_comm *c) {
  int size = c->size;
  to->seq = from->seq;
  to->decided = from->decided;
  to->unacked = from->unacked;
  to->flag = from->flag;
  memcpy(to->mask, from->mask, sizeof to->mask);
  memcpy(to->lost, from->lost, (size_t)size);
  memcpy(to->join, from->join, (size_t)nslots(c));
}

static void take_frame(crnet_comm *c, int via, const crnet__frame_header *h,
                       const uint8_t *payload) {
  struct crnet__agree *a;
  struct agree_value in;
  int r = crnet__local_rank(c, via);
  uint8_t lost[CRNET__FRAME_CTX_MAX];
  if (r < 0 || r == c->rank ||
      h->length != AGREE_HEAD + (uint64_t)c->size + (uint64_t)nslots(c) ||
      h->seq == 0)
    return; /* not a member, or not a frame of this comm's shape: ignored */
  a = agree_state(c);
  if (a == NULL) {
    crnet__comm_fail(c, CRNET_ENOMEM, c->w->rank,
                     "out of memory for an agreement's state");
    return;
  }
  memset(&in, 0, sizeof in);
  in.seq = h->seq;
  in.flag = crnet__get_le32(payload);
  in.decided = (crnet__get_le32(payload + 4) & VOTE_DECIDED) != 0;
  in.unacked = (crnet__get_le32(payload + 4) & DEC_UNACKED) != 0;
  for (int i = 0; i < MASK_WORDS; i++)
    in.mask[i] = crnet__get_le64(payload + 8 + 8 * i);
  in.lost = c->size <= (int)sizeof lost ? lost : crnet__malloc((size_t)c->size);
  if (in.lost == NULL)
    return;
  for (int i = 0; i < c->size; i++)
    in.lost[i] = payload[AGREE_HEAD + i] & (RANK_LOST | RANK_ACKED);
  in.join = (uint8_t *)(uintptr_t)(payload + AGREE_HEAD + c->size);
  if (h->kind == CRNET__FRAME_AGREE && in.decided) {
    /* A decision a lost coordinator took, from a rank that holds it and
     * takes this rank for the next coordinator: adopted if and when this
     * rank coordinates (a rank that only votes must not return it: it may
     * have voted to the next coordinator already, which then decides). */
    if (h->seq > a->dec.seq && h->seq > a->held.seq)
      copy_value(&a->held, &in, c);
  } else if (h->kind == CRNET__FRAME_DECIDE) {
    /* The decision of the agreement under way here from its coordinator,
     * or of the next one, which this rank has not begun yet (a coordinator
     * that counted it lost). Not from a coordinator this rank knows lost:
     * it has voted to the next one since, which decides. */
    if (h->seq > a->dec.seq && h->seq >= a->seq && !rank_lost(c, r)) {
      in.decided = true;
      copy_value(&a->dec, &in, c);
      a->dec_told = r;
      /* Votes of it that came before the decision (ranks that took this
       * one for the next coordinator) get it now. */
      for (int q = 0; q < c->size; q++)
        if (q != c->rank && q != r && a->votes[q].seq == h->seq)
          send_value(c, q, CRNET__FRAME_DECIDE, &a->dec);
    }
  } else if (a->dec.seq == h->seq && a->dec.seq != 0) {
    /* A vote for what this rank has decided: the decision is the answer. */
    send_value(c, r, CRNET__FRAME_DECIDE, &a->dec);
  } else if (h->seq > a->votes[r].seq) {
    copy_value(&a->votes[r], &in, c);
  }
  if (in.lost != lost)
    free(in.lost);
}

/* The agreement frames that came for c before it was made (the loop's
 * owner, before it looks at c's votes). */
static void adopt_early(crnet_comm *c) {
  struct crnet__agree_frame *mine = NULL, **pf;
  if (c->w->early_agree == NULL)
    return;
  pthread_mutex_lock(&c->w->mu);
  pf = &c->w->early_agree;
  while (*pf != NULL) {
    struct crnet__agree_frame *f = *pf;
    if (f->h.ctx != c->ctx) {
      pf = &f->next;
      continue;
    }
    *pf = f->next;
    f->next = mine;
    mine = f;
  }
  pthread_mutex_unlock(&c->w->mu);
  while (mine != NULL) {
    struct crnet__agree_frame *f = mine;
    mine = f->next;
    take_frame(c, f->via, &f->h, f->payload);
    free(f->payload);
    free(f);
  }
}

void crnet__agree_on_frame(crnet__world *w, int via,
                           const crnet__frame_header *h,
                           const uint8_t *payload) {
  crnet_comm *c = h->ctx < CRNET__MAX_CTX ? w->comms[h->ctx] : NULL;
  if (c == NULL) {
    /* A comm this rank is still making (a shrink that ended sooner on the
     * sender): kept for it. Of no comm at all: dropped. */
    struct crnet__agree_frame *f;
    if (atomic_load(&w->splits) == 0)
      return;
    f = crnet__malloc(sizeof *f);
    if (f == NULL)
      return;
    f->payload = crnet__malloc(h->length > 0 ? (size_t)h->length : 1);
    if (f->payload == NULL) {
      free(f);
      return;
    }
    memcpy(f->payload, payload, (size_t)h->length);
    f->h = *h;
    f->via = via;
    pthread_mutex_lock(&w->mu);
    f->next = w->early_agree;
    w->early_agree = f;
    pthread_mutex_unlock(&w->mu);
    return;
  }
  adopt_early(c);
  take_frame(c, via, h, payload);
  w->progress_dirty = true;
}

/* The coordinator of c's last agreement may have been lost having told
 * only some ranks: its successor hears the decision from this rank (once
 * there is a link to it; the next agreement tries again). */
static void tell_successor(crnet_comm *c) {
  struct crnet__agree *a = c->agree;
  int coord;
  if (a == NULL || a->dec.seq == 0 || a->dec.seq != a->seq)
    return;
  coord = coordinator(c);
  if (coord != c->rank && coord != a->dec_told &&
      send_value(c, coord, CRNET__FRAME_AGREE, &a->dec))
    a->dec_told = coord;
}

void crnet__agree_rank_lost(crnet__world *w, int j) {
  (void)j;
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++)
    if (w->comms[x] != NULL)
      tell_successor(w->comms[x]);
}

/* --- the agreement ------------------------------------------------- */

struct agree_wait {
  crnet_comm *c;
  struct crnet__agree *a;
  struct agree_value mine;
  int voted_to; /* the coordinator this rank's vote went to, or -1 */
};

/* Decides agreement w->mine.seq as coordinator and tells every rank not
 * known lost. */
static void decide(struct agree_wait *aw, const struct agree_value *adopted) {
  crnet_comm *c = aw->c;
  struct crnet__agree *a = aw->a;
  if (adopted != NULL) {
    copy_value(&a->dec, adopted, c);
  } else {
    /* The votes of the ranks not known lost, this rank's among them: the
     * AND of flags and masks, the union of the lost ranks, and whether
     * each lost rank was acknowledged by all of them. */
    copy_value(&a->dec, &aw->mine, c);
    for (int i = 0; i < c->size; i++)
      a->dec.lost[i] = aw->mine.lost[i];
    for (int r = 0; r < c->size; r++) {
      const struct agree_value *v = &a->votes[r];
      if (r == c->rank || rank_lost(c, r))
        continue;
      a->dec.flag &= v->flag;
      for (int i = 0; i < MASK_WORDS; i++)
        a->dec.mask[i] &= v->mask[i];
      for (int i = 0; i < c->size; i++)
        a->dec.lost[i] = (uint8_t)(((a->dec.lost[i] | v->lost[i]) & RANK_LOST) |
                                   (a->dec.lost[i] & v->lost[i] & RANK_ACKED));
      for (int k = 0; k < nslots(c); k++)
        a->dec.join[k] &= v->join[k];
    }
    a->dec.unacked = false;
    for (int i = 0; i < c->size; i++) {
      if (rank_lost(c, i))
        a->dec.lost[i] |= RANK_LOST; /* lost while the votes came */
      if ((a->dec.lost[i] & RANK_LOST) && !(a->dec.lost[i] & RANK_ACKED))
        a->dec.unacked = true;
      a->dec.lost[i] &= RANK_LOST;
    }
  }
  a->dec.seq = aw->mine.seq;
  a->dec.decided = true;
  a->dec_told = c->rank;
  crnet__debug("agreement %llu of context %u: decided here%s",
               (unsigned long long)a->dec.seq, (unsigned)c->ctx,
               adopted != NULL ? " (a lost coordinator's decision)" : "");
  int told = 0;
  maybe_die(c, a->dec.seq, 0, -1);
  for (int r = 0; r < c->size; r++)
    if (r != c->rank && !rank_lost(c, r) &&
        send_value(c, r, CRNET__FRAME_DECIDE, &a->dec))
      maybe_die(c, a->dec.seq, ++told, r);
}

/* One look at agreement aw: true once it is decided here. Votes when this
 * rank's coordinator changed; decides when this rank coordinates and every
 * rank not known lost has voted. */
static bool agree_step(void *arg) {
  struct agree_wait *aw = arg;
  crnet_comm *c = aw->c;
  struct crnet__agree *a = aw->a;
  uint64_t k = aw->mine.seq;
  int coord;
  if (a->dec.seq == k)
    return true;
  if (c->w->torn_down)
    return true; /* nothing left to agree over: the caller says why */
  coord = coordinator(c);
  if (coord != c->rank) {
    if (aw->voted_to != coord &&
        send_value(c, coord, CRNET__FRAME_AGREE, &aw->mine)) {
      crnet__debug("agreement %llu of context %u: voted to rank %d",
                   (unsigned long long)k, (unsigned)c->ctx, coord);
      aw->voted_to = coord;
      maybe_die(c, k, -1, coord);
    }
    return false;
  }
  /* A decision a lost coordinator took, which a rank holds: the decision.
   * Else every rank not known lost has voted k (one that holds a decision
   * of k sends it instead of a vote: tell_successor). */
  if (a->held.seq == k) {
    decide(aw, &a->held);
    return true;
  }
  for (int r = 0; r < c->size; r++)
    if (r != c->rank && !rank_lost(c, r) && a->votes[r].seq < k) {
      want_link(c, r); /* a lazy link: a dead rank is refused, lost */
      return false;
    }
  decide(aw, NULL);
  return true;
}

int crnet__agree(crnet_comm *c, uint32_t *flag, uint64_t ctx[MASK_WORDS],
                 uint8_t *lost) {
  return crnet__agree_join(c, flag, ctx, lost, NULL);
}

int crnet__agree_join(crnet_comm *c, uint32_t *flag, uint64_t ctx[MASK_WORDS],
                      uint8_t *lost, uint8_t *join) {
  struct agree_wait aw;
  int rc;
  if (c->w->lost == NULL)
    return CRNET_EINVAL; /* not CRNET_ON_FAILURE=continue */
  memset(&aw, 0, sizeof aw);
  aw.c = c;
  aw.a = agree_state(c);
  if (aw.a == NULL || !value_alloc(c, &aw.mine)) {
    value_free(&aw.mine);
    return CRNET_ENOMEM;
  }
  if (join != NULL)
    memcpy(aw.mine.join, join, (size_t)nslots(c));
  aw.voted_to = -1;
  adopt_early(c);
  tell_successor(c);
  aw.mine.seq = ++aw.a->seq;
  aw.mine.flag = *flag;
  for (int i = 0; i < MASK_WORDS; i++)
    aw.mine.mask[i] = ctx != NULL ? ctx[i] : ~(uint64_t)0;
  pthread_mutex_lock(&c->w->mu);
  for (int r = 0; r < c->size; r++)
    aw.mine.lost[r] = (uint8_t)((rank_lost(c, r) ? RANK_LOST : 0) |
                                (aw.a->acked[r] ? RANK_ACKED : 0));
  pthread_mutex_unlock(&c->w->mu);
  /* Frames of the comm's calls parked on a link would hold back the votes
   * behind them: a failed comm's are dropped now. */
  crnet__world_recheck_parked(c->w);
  rc = crnet__comm_run_until(c, agree_step, &aw, c->w->coll_timeout_ms);
  if (rc == 0 && aw.a->dec.seq != aw.mine.seq)
    rc = c->err != 0 ? c->err : CRNET_EIO; /* the links are gone */
  if (rc == 0) {
    *flag = aw.a->dec.flag;
    if (ctx != NULL)
      memcpy(ctx, aw.a->dec.mask, sizeof aw.a->dec.mask);
    if (lost != NULL)
      memcpy(lost, aw.a->dec.lost, (size_t)c->size);
    if (join != NULL)
      memcpy(join, aw.a->dec.join, (size_t)nslots(c));
    /* What the survivors counted lost is lost here too. */
    for (int r = 0; r < c->size; r++)
      if (aw.a->dec.lost[r] && !rank_lost(c, r))
        crnet__world_lost(c->w, crnet__world_rank(c, r),
                          "the survivors' agreement counted it lost");
  } else if (rc == CRNET_ETIMEDOUT) {
    crnet__set_callmsg(c,
                       "crnet_comm_agree: no decision within "
                       "CRNET_TIMEOUT (%g s)",
                       (double)c->w->coll_timeout_ms / 1000.0);
  }
  value_free(&aw.mine);
  return rc;
}

/* --- the public calls ---------------------------------------------- */

int crnet_comm_agree(crnet_comm *c, int *flag) {
  uint32_t f;
  int rc;
  struct crnet__agree *a;
  if (c == NULL || flag == NULL)
    return CRNET_EINVAL;
  if (!c->w->survive) {
    crnet__set_callmsg(c, "crnet_comm_agree: needs CRNET_ON_FAILURE=continue "
                          "(crlaunch --keep-going)");
    return CRNET_EINVAL;
  }
  f = (uint32_t)*flag;
  crnet__loop_acquire(c);
  rc = crnet__agree(c, &f, NULL, NULL);
  a = c->agree;
  if (rc == 0) {
    *flag = (int)f;
    /* A loss some survivor had not acknowledged is news: the decision
     * says so, the same to every survivor. */
    if (a->dec.unacked) {
      rc = CRNET_EPEER;
      crnet__set_callmsg(c, "crnet_comm_agree: ranks were lost that not "
                            "every survivor had acknowledged "
                            "(crnet_comm_lost, crnet_comm_ack_lost)");
    }
  }
  crnet__loop_release(c);
  return rc;
}

int crnet_comm_is_revoked(const crnet_comm *c) {
  int revoked;
  if (c == NULL)
    return CRNET_EINVAL;
  pthread_mutex_lock(&c->w->mu);
  revoked = c->err == CRNET_EREVOKED;
  pthread_mutex_unlock(&c->w->mu);
  return revoked;
}

int crnet_comm_lost(const crnet_comm *c, int *ranks, int max) {
  int n = 0;
  if (c == NULL || max < 0 || (ranks == NULL && max > 0))
    return CRNET_EINVAL;
  pthread_mutex_lock(&c->w->mu);
  for (int r = 0; r < c->size; r++)
    if (rank_lost(c, r)) {
      if (n < max)
        ranks[n] = r;
      n++;
    }
  pthread_mutex_unlock(&c->w->mu);
  return n;
}

int crnet_comm_ack_lost(crnet_comm *c, int *ranks, int max) {
  struct crnet__agree *a;
  int n = 0;
  if (c == NULL || max < 0 || (ranks == NULL && max > 0))
    return CRNET_EINVAL;
  a = agree_state(c);
  if (a == NULL)
    return CRNET_ENOMEM;
  pthread_mutex_lock(&c->w->mu);
  for (int r = 0; r < c->size; r++)
    if (rank_lost(c, r)) {
      a->acked[r] = 1;
      if (n < max)
        ranks[n] = r;
      n++;
    }
  pthread_mutex_unlock(&c->w->mu);
  return n;
}

int crnet_comm_revoke(crnet_comm *c) {
  if (c == NULL)
    return CRNET_EINVAL;
  if (crnet__loop_owned_by_me(c)) {
    crnet__comm_revoke_now(c); /* from a completion callback */
    return 0;
  }
  /* A thread waiting on the loop for a live peer revokes for us, at
   * once; then this thread takes the loop to make sure. */
  crnet__revoke_by_owner(c);
  crnet__loop_acquire(c);
  crnet__comm_revoke_now(c);
  crnet__progress(c);
  crnet__loop_release(c);
  return 0;
}
