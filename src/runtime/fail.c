/* Failures: the sticky error of each comm, its scope, and what the links
 * to peers say. See comm.h and docs/RELIABILITY.md.
 *
 * Scope. The comms of a process share its links (comm.h), so a failure is
 * the failure of a set of comms:
 *   - a rank lost (its links closed, reset or silent; crlaunch says it
 *     died) fails every comm that contains it, and only those;
 *   - a frame that does not match, or garbage, breaks the link it came on:
 *     every comm that contains that peer fails;
 *   - a timeout fails the comm of the call that ran out of time;
 *   - an abort (crnet_comm_abort, from any comm) fails every comm: it ends
 *     the job.
 * A comm that fails tells its members with an ABORT frame naming it (its
 * context id), and each member fails that comm too, with the same reason;
 * an ABORT for a lost rank fails, at its receiver too, every comm that
 * contains the lost rank. A link closes once no comm alive needs it; when
 * every comm has failed, the rank closes everything (the job has failed
 * for it) as it always did.
 */
#include "comm.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "frame.h"
#include "log.h"
#include "report.h"
#include "request.h"

#define LINGER_MS 1000

/* Tells crlaunch whom this rank's failure is due to ("fail <rank>
 * <origin>", job ranks), so that it names the rank at fault and not the
 * first rank whose exit it happens to see (crlaunch.c,
 * crnet__launch_judge_failures). */
static void report_failure(const crnet_comm *c, int origin) {
  char line[48];
  /* crlaunch knows ranks by the index it started them as: a restarted
   * rank's slot (join.c) means nothing to it. */
  if (origin < 0 || origin == c->w->rank || origin >= c->w->world_size)
    return;
  snprintf(line, sizeof line, "fail %d %d\n", c->w->index, origin);
  crnet__report_send(c, line);
}

void crnet__describe_rank(const crnet_comm *c, int rank, char *buf, size_t n) {
  char where[128];
  int j = rank >= 0 && rank < c->size ? crnet__world_rank(c, rank) : -1;
  const char *job = c->world != NULL ? " (job rank " : "";
  char jobrank[24] = "";
  if (c->world != NULL && j >= 0)
    snprintf(jobrank, sizeof jobrank, "%s%d)", job, j);
  if (j >= 0 && c->w->table != NULL && c->w->table[j].family != 0) {
    crnet__rendezvous_entry_format(&c->w->table[j], where, sizeof where);
    snprintf(buf, n, "rank %d%s on %s", rank, jobrank, where);
  } else {
    snprintf(buf, n, "rank %d%s", rank, jobrank);
  }
}

void crnet__describe_call(const crnet_comm *c, char *buf, size_t n) {
  const crnet_request *r = crnet__req_oldest(c);
  if (r != NULL)
    snprintf(buf, n, " during %s #%" PRIu64 " round %" PRIu32,
             crnet_collective_name((crnet_collective)r->coll),
             crnet__call_number(c, r->seq), r->round);
  else if (c->done_seq > 0)
    /* Between calls: noticed after the last one's last round. */
    snprintf(buf, n, " after %s #%" PRIu64 " round %" PRIu32,
             crnet_collective_name((crnet_collective)c->done_coll),
             crnet__call_number(c, c->done_seq), c->done_round);
  else
    buf[0] = '\0';
}

/* --- messages of calls that failed without failing the job ------------- */

static _Thread_local struct {
  const crnet_comm *comm;
  char msg[CRNET__CALLMSG];
} callmsg;

char *crnet__callmsg(const crnet_comm *c) {
  if (callmsg.comm != c) {
    callmsg.comm = c;
    callmsg.msg[0] = '\0';
  }
  return callmsg.msg;
}

void crnet__set_callmsg(const crnet_comm *c, const char *fmt, ...) {
  va_list ap;
  callmsg.comm = c;
  va_start(ap, fmt);
  vsnprintf(callmsg.msg, sizeof callmsg.msg, fmt, ap);
  va_end(ap);
}

/* --- telling the members -------------------------------------------------- */

/* The ABORT frame's payload: error, abort code, origin (a job rank),
 * flags, then the reason. NULL if out of memory (links are then closed
 * without a word). */
#define ABORT_HEAD 16
/* The sender closes the link after it: every comm the receiver has with
 * the sender fails for this reason (instead of "closed its connection"). */
#define ABORT_FINAL 1u

static uint8_t *abort_message(const crnet_comm *c, size_t *len) {
  size_t textlen = c->errmsg_reason_len;
  uint8_t *msg = crnet__malloc(ABORT_HEAD + textlen);
  if (msg == NULL)
    return NULL;
  crnet__put_le32(msg, (uint32_t)c->err);
  crnet__put_le32(msg + 4, (uint32_t)c->abort_code);
  crnet__put_le32(msg + 8, (uint32_t)c->err_origin);
  crnet__put_le32(msg + 12, 0);
  memcpy(msg + ABORT_HEAD, c->errmsg, textlen);
  *len = ABORT_HEAD + textlen;
  return msg;
}

static void abort_final(uint8_t *msg, bool final) {
  if (msg != NULL)
    crnet__put_le32(msg + 12, final ? ABORT_FINAL : 0);
}

/* Whether comm c still needs its links: it has not failed, or it was
 * revoked, or (CRNET_ON_FAILURE=continue) it lost a rank; the survivors of
 * the last two still agree and shrink over the links (survive.c). */
static bool comm_needs_links(const crnet_comm *c) {
  return c->err == 0 || c->err == CRNET_EREVOKED ||
         (c->w->survive && c->err == CRNET_EPEER);
}

/* Whether a comm that needs its links has job rank j, not known lost,
 * among its members (besides this rank): the links to j are still
 * needed. */
static bool rank_needed(const crnet__world *w, int j) {
  if (w->lost != NULL && w->lost[j])
    return false;
  /* A restarted rank waiting for a grow to admit it (join.c). */
  if (w->admitted != NULL && j >= w->world_size && !w->admitted[j] &&
      w->rank < w->world_size)
    return true;
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
    const crnet_comm *c = w->comms[x];
    if (c != NULL && comm_needs_links(c) && crnet__local_rank(c, j) >= 0)
      return true;
  }
  return false;
}

static bool any_alive(const crnet__world *w) {
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++)
    if (w->comms[x] != NULL && comm_needs_links(w->comms[x]))
      return true;
  return false;
}

/* Survive mode: job rank j is lost, for good. Every rank that hears of it
 * (its own link, crlaunch, a relayed ABORT) marks it, so the survivors'
 * agreements leave it out. */
static void mark_lost(crnet__world *w, int j) {
  bool news;
  if (!w->survive || w->lost == NULL || j < 0 || j >= w->size || j == w->rank)
    return;
  pthread_mutex_lock(&w->mu);
  news = !w->lost[j];
  w->lost[j] = 1;
  pthread_mutex_unlock(&w->mu);
  if (news) {
    crnet__debug("rank %d is lost", j);
    crnet__agree_rank_lost(w, j);
  }
}

/* Comm c has just failed: its members hear why (an ABORT frame naming c,
 * on stream 0 of each link, behind what is queued there), and the links no
 * comm alive needs any more close. When no comm is alive, the listener and
 * every connection still in its handshake go too (lazy links). */
static void tell_members(crnet_comm *c) {
  crnet__world *w = c->w;
  size_t len = 0;
  uint8_t *msg = abort_message(c, &len);
  for (int j = 0; j < w->size; j++) {
    bool member = crnet__local_rank(c, j) >= 0 && j != w->rank;
    bool needed = j != w->rank && rank_needed(w, j);
    for (uint32_t k = 0; k < w->streams && j != w->rank; k++) {
      crnet__peer *p = *crnet__comm_link(c, j, (int)k);
      if (p == NULL || p->closed)
        continue;
      if (needed) {
        /* Other comms go on over this link: the ABORT follows whatever
         * is queued on it (frames are whole, in order). */
        abort_final(msg, false);
        if (member && k == 0 && msg != NULL &&
            p->link.state == CRNET__LINK_READY && !p->link.failed)
          crnet__link_send_control_ctx(&p->link, CRNET__FRAME_ABORT, c->ctx,
                                       msg, len);
        continue;
      }
      /* A link that failed by protocol (a mismatched frame) still writes;
       * one whose peer is gone just fails the write, harmlessly. */
      if (msg != NULL && p->link.state == CRNET__LINK_READY &&
          (crnet__link_flushed(&p->link) ||
           crnet__link_shm_detach(&p->link) == 0)) {
        abort_final(msg, true);
        crnet__link_send_control_ctx(&p->link, CRNET__FRAME_ABORT, c->ctx,
                                       msg, len);
        crnet__link_close_gently(&p->link, LINGER_MS);
      } else {
        /* A write of the failed collective is still going out: it cannot
         * be interrupted by a frame, and its buffer belongs to the caller,
         * who is about to get control back. Closing cancels it. (A write
         * the kernel has taken whole, whose callback has not run yet, is
         * no obstacle: the ABORT frame above follows it.) */
        crnet__link_close(&p->link);
      }
    }
  }
  /* Links still in their handshake are told when they become ready
   * (crnet__comm_tell_late_link). Lazy links: the listener closes, so that
   * a rank connecting to this one from now on is refused at once, and
   * calls carry the ABORT too. */
  if (!w->torn_down && !any_alive(w)) {
    w->torn_down = true;
    abort_final(msg, true);
    crnet__lazy_close_all(w->comms[0] != NULL ? w->comms[0] : c, msg, len);
  }
  free(msg);
}

void crnet__world_tell_new_link(crnet__world *w, crnet__link *l) {
  if (l->stream != 0 || l->state != CRNET__LINK_READY)
    return;
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
    crnet_comm *c = w->comms[x];
    size_t len = 0;
    uint8_t *msg;
    if (c == NULL || c->err == 0 || !comm_needs_links(c) ||
        crnet__local_rank(c, (int)l->peer) < 0)
      continue;
    msg = abort_message(c, &len);
    abort_final(msg, false);
    if (msg != NULL)
      crnet__link_send_control_ctx(l, CRNET__FRAME_ABORT, c->ctx, msg, len);
    free(msg);
  }
}

void crnet__comm_tell_late_link(crnet_comm *c, crnet__link *l) {
  size_t len = 0;
  uint8_t *msg;
  if (rank_needed(c->w, (int)l->peer)) {
    /* A comm that lost a rank in survive mode, or was revoked, still needs
     * this link: its peer hears why, and the link stays. */
    crnet__world_tell_new_link(c->w, l);
    return;
  }
  msg = abort_message(c, &len);
  abort_final(msg, true);
  if (msg != NULL && l->state == CRNET__LINK_READY &&
      crnet__link_flushed(l)) {
    crnet__link_send_control_ctx(l, CRNET__FRAME_ABORT, c->ctx, msg, len);
    crnet__link_close_gently(l, LINGER_MS);
  } else {
    crnet__link_close(l);
  }
  free(msg);
}

/* --- failing ------------------------------------------------------------- */

/* Sets c's sticky error (mu held by the caller's choice: under mu here),
 * then tells the members. */
static void set_error(crnet_comm *c, int err, int origin, const char *text,
                      const char *how) {
  bool revoke = err == CRNET_EREVOKED;
  pthread_mutex_lock(&c->w->mu);
  c->err = err;
  snprintf(c->errmsg, sizeof c->errmsg, "%s", text);
  if (how != NULL && how[0] != '\0') {
    size_t len = strlen(c->errmsg);
    snprintf(c->errmsg + len, sizeof c->errmsg - len, " (%s)", how);
  }
  c->errmsg_reason_len = strlen(c->errmsg);
  c->err_origin = origin;
  pthread_mutex_unlock(&c->w->mu);
  c->w->progress_dirty = true; /* every request in flight ends */
  crnet__debug("%s", c->errmsg);
  if (!revoke) /* a revoke is a choice, not a failure to blame */
    report_failure(c, origin);
  tell_members(c);
  /* Frames of the comm's calls parked at the head of a link are dropped
   * now, so that what follows them (agreement frames) is read. */
  crnet__world_recheck_parked(c->w);
}

/* Whether c's error may give way to `err`: a revoke replaces a lost rank,
 * so that every member's later calls say the same. */
static bool takes_error(const crnet_comm *c, int err) {
  return c->err == 0 || (err == CRNET_EREVOKED && c->err == CRNET_EPEER);
}

void crnet__comm_revoke_now(crnet_comm *c) {
  char text[96];
  if (!takes_error(c, CRNET_EREVOKED) || c->w->torn_down)
    return;
  snprintf(text, sizeof text, "the communicator was revoked by rank %d",
           c->rank);
  set_error(c, CRNET_EREVOKED, c->w->rank, text, NULL);
}

void crnet__comm_fail(crnet_comm *c, int err, int origin, const char *fmt,
                      ...) {
  va_list ap;
  char text[512];
  if (c->err != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  set_error(c, err, origin, text, NULL);
}

void crnet__world_fail_peer(crnet__world *w, int j, int err, const char *fmt,
                            ...) {
  va_list ap;
  char text[512];
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
    crnet_comm *c = w->comms[x];
    /* Out of memory is this rank's failure, whichever link met it: the
     * peer is not to blame (crlaunch hears of no other rank). */
    if (c != NULL && c->err == 0 && crnet__local_rank(c, j) >= 0)
      set_error(c, err, err == CRNET_ENOMEM ? w->rank : j, text, NULL);
  }
}

void crnet__world_fail_all(crnet__world *w, int err, int origin,
                           const char *fmt, ...) {
  va_list ap;
  char text[512];
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
    crnet_comm *c = w->comms[x];
    if (c != NULL && c->err == 0)
      set_error(c, err, origin, text, NULL);
  }
}

void crnet__world_lost(crnet__world *w, int j, const char *why) {
  crnet_comm *world = w->comms[0];
  char how[96] = "";
  int origin = j;
  bool aborted = false;
  /* crlaunch may know why (report.h). If that rank aborted the job, the
   * failure is the abort: crnet__report_await has failed every comm. */
  if (world != NULL && j >= 0 && j != w->rank) {
    origin = crnet__report_await(world, j, how, sizeof how);
    aborted = !any_alive(w);
  }
  if (aborted)
    return;
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
    crnet_comm *c = w->comms[x];
    char who[200], call[96], text[512];
    int r = c != NULL ? crnet__local_rank(c, j) : -1;
    if (c == NULL || c->err != 0 || r < 0)
      continue;
    crnet__describe_rank(c, r, who, sizeof who);
    crnet__describe_call(c, call, sizeof call);
    snprintf(text, sizeof text, "lost %s%s: %s", who, call, why);
    set_error(c, CRNET_EPEER, origin, text, how);
  }
  mark_lost(w, j);
}

void crnet__comm_fail_aborted(crnet_comm *c, int rank, int code) {
  crnet__world *w = c->w;
  pthread_mutex_lock(&w->mu);
  for (uint32_t x = 0; x < CRNET__MAX_CTX; x++)
    if (w->comms[x] != NULL && w->comms[x]->err == 0)
      w->comms[x]->abort_code = code;
  pthread_mutex_unlock(&w->mu);
  crnet__world_fail_all(w, CRNET_EABORTED, rank,
                        "rank %d aborted the job with code %d", rank, code);
}

/* An ABORT frame's reason becomes this rank's error as it is, so that a
 * failure relayed through several ranks still reads as the original reason;
 * the relaying rank is named once, after it. */
static void fail_relayed(crnet_comm *c, int err, int origin, int via,
                         const char *reason, int reason_len) {
  char awaited[200] = "";
  if (!takes_error(c, err))
    return;
  /* A timeout names whom the timed-out rank waited for, which may itself
   * wait for another: each rank that relays it and waits too says for
   * whom, so that the chain leads to the rank that never called whichever
   * rank's clock ran out first. */
  if (err == CRNET_ETIMEDOUT && crnet__req_oldest(c) != NULL)
    crnet__list_awaited(c, awaited, sizeof awaited);
  pthread_mutex_lock(&c->w->mu);
  c->err = err;
  if (awaited[0] != '\0' && strncmp(awaited, "no peer", 7) != 0)
    snprintf(c->errmsg, sizeof c->errmsg, "%.*s; rank %d was waiting for %s",
             reason_len, reason, c->rank, awaited);
  else
    snprintf(c->errmsg, sizeof c->errmsg, "%.*s", reason_len, reason);
  c->errmsg_reason_len = strlen(c->errmsg);
  if (via != origin)
    snprintf(c->errmsg + c->errmsg_reason_len,
             sizeof c->errmsg - c->errmsg_reason_len, " (relayed by rank %d)",
             via);
  c->err_origin = origin;
  pthread_mutex_unlock(&c->w->mu);
  c->w->progress_dirty = true;
  crnet__debug("%s", c->errmsg);
  if (err != CRNET_EREVOKED)
    report_failure(c, origin);
  tell_members(c);
  crnet__world_recheck_parked(c->w);
}

/* An ABORT from job rank `via` about its comm of context ctx. */
static void take_abort(crnet__world *w, int via, uint32_t ctx,
                       const crnet__frame_header *h, const uint8_t *payload) {
  int err = (int32_t)crnet__get_le32(payload);
  int code = (int32_t)crnet__get_le32(payload + 4);
  int origin = (int32_t)crnet__get_le32(payload + 8);
  bool final = (crnet__get_le32(payload + 12) & ABORT_FINAL) != 0;
  int textlen = h->length - ABORT_HEAD > 440 ? 440
                                             : (int)(h->length - ABORT_HEAD);
  const char *text = (const char *)payload + ABORT_HEAD;
  crnet_comm *c = ctx < CRNET__MAX_CTX ? w->comms[ctx] : NULL;
  if (err >= 0 || err < CRNET_EREVOKED || err == CRNET_ECANCELED)
    err = CRNET_EPEER;
  if (origin < -1 || origin >= w->size)
    origin = -1;
  /* The relaying rank lost a peer; crlaunch may have said already that
   * the peer aborted the job. */
  if (err == CRNET_EPEER && w->comms[0] != NULL)
    crnet__report_check(w->comms[0]);
  if (err == CRNET_EABORTED) {
    /* An abort ends the job: every comm. */
    pthread_mutex_lock(&w->mu);
    for (uint32_t x = 0; x < CRNET__MAX_CTX; x++)
      if (w->comms[x] != NULL && w->comms[x]->err == 0)
        w->comms[x]->abort_code = code;
    pthread_mutex_unlock(&w->mu);
    for (uint32_t x = 0; x < CRNET__MAX_CTX; x++)
      if (w->comms[x] != NULL)
        fail_relayed(w->comms[x], err, origin, via, text, textlen);
    return;
  }
  if (c != NULL && crnet__local_rank(c, via) >= 0)
    fail_relayed(c, err, origin, via, text, textlen);
  if (err == CRNET_EREVOKED && !final)
    return; /* that comm only */
  /* The sender is done with this rank: so is every comm it shares. */
  if (final)
    for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
      crnet_comm *o = w->comms[x];
      if (o != NULL && crnet__local_rank(o, via) >= 0)
        fail_relayed(o, err, origin, via, text, textlen);
    }
  /* A rank lost to the sender is lost to every comm that has it. */
  if (err == CRNET_EPEER && origin >= 0 && origin != w->rank) {
    for (uint32_t x = 0; x < CRNET__MAX_CTX; x++) {
      crnet_comm *o = w->comms[x];
      if (o != NULL && crnet__local_rank(o, origin) >= 0)
        fail_relayed(o, err, origin, via, text, textlen);
    }
    mark_lost(w, origin);
  }
}

static void on_peer_control(crnet__link *l, const crnet__frame_header *h,
                            const uint8_t *payload) {
  crnet__peer *p = (crnet__peer *)l;
  crnet__world *w = p->comm->w;
  if (h->kind == CRNET__FRAME_BYE) {
    p->got_bye = true;
    if (l->stream == 0) /* messages travel on stream 0 */
      crnet__p2p_peer_left(w, (int)l->peer);
    return;
  }
  if (h->kind == CRNET__FRAME_ABORT && h->length >= ABORT_HEAD) {
    take_abort(w, (int)l->peer, h->ctx, h, payload);
    return;
  }
  if (h->kind == CRNET__FRAME_AGREE || h->kind == CRNET__FRAME_DECIDE) {
    crnet__agree_on_frame(w, (int)l->peer, h, payload);
    return;
  }
  if (h->kind == CRNET__FRAME_ADMIT) {
    crnet__join_on_admit(w, (int)l->peer, h, payload);
    return;
  }
  if (h->kind == CRNET__FRAME_JOINER) {
    crnet__join_on_entry(w, (int)l->peer, h, payload);
    return;
  }
  if (h->kind == CRNET__FRAME_MSG || h->kind == CRNET__FRAME_RTS ||
      h->kind == CRNET__FRAME_CTS || h->kind == CRNET__FRAME_CREDIT) {
    crnet__p2p_on_control(l, h, payload);
    return;
  }
  crnet__world_fail_peer(w, (int)l->peer, CRNET_EIO,
                         "rank %d sent an unexpected control frame (kind %u)",
                         (int)l->peer, (unsigned)h->kind);
}

/* A DATA frame came before its receive: fine if the peer is ahead (a call
 * this rank has not begun, or a later round of one in flight; a comm this
 * rank is still making), dropped if its comm has failed, a mismatch if no
 * receive of this rank can ever match it (a call it has finished, another
 * call under the same number, a comm it does not have). */
static int on_peer_parked(crnet__link *l, const crnet__frame_header *h) {
  crnet__world *w = ((crnet__peer *)l)->comm->w;
  crnet_comm *c = h->ctx < CRNET__MAX_CTX ? w->comms[h->ctx] : NULL;
  const crnet_request *r;
  if (c == NULL)
    return w->splits > 0 ? CRNET__PARK_WAIT : CRNET__PARK_REFUSE;
  if (c->err != 0)
    return CRNET__PARK_DISCARD;
  if (crnet__local_rank(c, (int)l->peer) < 0)
    return CRNET__PARK_REFUSE;
  if (h->seq > c->seq) {
    c->parked_ahead = true; /* crnet__comm_begin_call looks again */
    return CRNET__PARK_WAIT;
  }
  r = crnet__req_find(c, h->seq);
  return r != NULL && h->coll == r->coll && h->sig == r->sig
             ? CRNET__PARK_WAIT
             : CRNET__PARK_REFUSE;
}

void crnet__comm_begin_call(crnet_comm *c, uint8_t coll, uint64_t seq,
                            const crnet__frame_call *call) {
  c->seq = seq;
  c->last_coll = coll;
  c->history[seq % CRNET__CALL_HISTORY].seq = seq;
  c->history[seq % CRNET__CALL_HISTORY].coll = coll;
  c->history[seq % CRNET__CALL_HISTORY].call = *call;
  /* A frame of this call that came early was accepted because the peer was
   * ahead; now its sequence number may be this rank's own, so it must be of
   * this very call. Only when some frame came early is there anything to
   * look at (asking again re-marks the frames still ahead). */
  if (c->parked_ahead) {
    c->parked_ahead = false;
    crnet__world_recheck_parked(c->w);
  }
}

void crnet__world_recheck_parked(crnet__world *w) {
  for (int i = 0; i < w->size * (int)w->streams; i++) {
    crnet__peer *p = w->peers[i];
    if (p != NULL && !p->closed)
      crnet__link_recheck_parked(&p->link);
  }
}

static bool same_call(const crnet__frame_call *a, const crnet__frame_call *b) {
  return a->count == b->count && a->op == b->op && a->root == b->root &&
         a->dtype == b->dtype && a->schedule == b->schedule &&
         a->variant == b->variant;
}

/* The message of a mismatch on comm c found on link l (l->bad_hdr is the
 * peer's frame): what each side called, in words, and how their frames
 * differ when the words alone do not show it. */
static void mismatch_text(crnet_comm *c, crnet__link *l, const char *why,
                          char *out, size_t n) {
  const crnet__frame_header *h = &l->bad_hdr;
  char theirs[160], mine[160], detail[224];
  const char *verb = "called";
  const crnet_request *r = crnet__req_find(c, h->seq);
  int coll = -1;
  int peer = crnet__local_rank(c, (int)l->peer);
  const crnet__frame_call *call = NULL;
  c->w->upper->format_call(h->coll, crnet__call_number(c, h->seq), &h->call,
                           theirs, sizeof theirs);
  if (r != NULL) {
    /* A call in flight under that number. */
    coll = r->coll;
    call = &r->call;
    c->w->upper->format_call(r->coll, crnet__call_number(c, r->seq), call, mine,
                             sizeof mine);
  } else if (h->seq <= c->seq && h->seq > 0 &&
             c->history[h->seq % CRNET__CALL_HISTORY].seq == h->seq) {
    /* A frame of a call this rank has finished: set it against what this
     * rank called under that number, if it is still remembered. */
    coll = c->history[h->seq % CRNET__CALL_HISTORY].coll;
    call = &c->history[h->seq % CRNET__CALL_HISTORY].call;
    c->w->upper->format_call((uint8_t)coll, crnet__call_number(c, h->seq), call,
                             mine, sizeof mine);
  } else if (c->last_coll < 0) {
    snprintf(mine, sizeof mine, "no collective yet");
  } else {
    const crnet_request *o = crnet__req_oldest(c);
    uint64_t seq = o != NULL ? o->seq : c->seq;
    coll = c->history[seq % CRNET__CALL_HISTORY].coll;
    call = &c->history[seq % CRNET__CALL_HISTORY].call;
    c->w->upper->format_call((uint8_t)coll, crnet__call_number(c, seq), call,
                             mine, sizeof mine);
    if (o == NULL)
      verb = "had finished";
  }
  detail[0] = '\0';
  if (call != NULL && h->coll == coll && same_call(&h->call, call))
    snprintf(detail, sizeof detail, ": %s", why);
  snprintf(out, n, "mismatched calls: rank %d called %s but rank %d %s %s%s",
           peer, theirs, c->rank, verb, mine, detail);
}

/* A mismatch broke the link to job rank j: the comm of the frame gets the
 * message of its calls, and every other comm that has j loses it. */
static void fail_mismatch(crnet__world *w, crnet__link *l, const char *why) {
  const crnet__frame_header *h = &l->bad_hdr;
  crnet_comm *c = h->ctx < CRNET__MAX_CTX ? w->comms[h->ctx] : NULL;
  int j = (int)l->peer;
  char text[512];
  if (c != NULL && crnet__local_rank(c, j) >= 0) {
    mismatch_text(c, l, why, text, sizeof text);
    crnet__comm_fail(c, CRNET_EMISMATCH, j, "%s", text);
  } else {
    snprintf(text, sizeof text,
             "mismatched calls: rank %d sent %s #%" PRIu64
             " of a communicator %s rank %d (context %" PRIu32 ")",
             j, crnet_collective_name((crnet_collective)h->coll), h->seq,
             c == NULL ? "that is not (or no longer) on"
                       : "it is not a member of on",
             w->rank, h->ctx);
  }
  crnet__world_fail_peer(w, j, CRNET_EMISMATCH, "%s", text);
}

static void on_peer_error(crnet__link *l, int status, const char *why) {
  crnet__peer *p = (crnet__peer *)l;
  crnet__world *w = p->comm->w;
  if (p->got_bye && status == CRNET_EPEER) {
    /* The peer said goodbye and closed: an orderly departure. If a later call
     * needs this link, posting on it fails and names the departure. */
    crnet__link_close(l);
    return;
  }
  if (status == CRNET_EPEER) {
    crnet__world_lost(w, (int)l->peer, why);
    crnet__link_close(l);
    return;
  }
  /* The peer is alive but said something wrong: the failure tells it why
   * (ABORT) and closes the link gently, so the reason arrives. */
  if (status == CRNET_EMISMATCH) {
    fail_mismatch(w, l, why);
  } else if (status == CRNET_ENOMEM) {
    char who[160];
    crnet__describe_rank(p->comm, (int)l->peer, who, sizeof who);
    crnet__world_fail_peer(w, (int)l->peer, status,
                           "%s, on job rank %d's link to %s", why, w->rank,
                           who);
  } else {
    char who[160];
    crnet__describe_rank(p->comm, (int)l->peer, who, sizeof who);
    crnet__world_fail_peer(w, (int)l->peer, status, "%s: %s", who, why);
  }
  crnet__link_close_gently(l, LINGER_MS);
}

static void on_peer_ready(crnet__link *l, int status) {
  /* Links switch to these callbacks only once ready. */
  (void)l;
  (void)status;
}

static void on_peer_closed(crnet__link *l) {
  crnet__peer *p = (crnet__peer *)l;
  p->closed = true;
  p->comm->w->open_peers--;
}

const crnet__link_callbacks crnet__peer_callbacks = {
    .on_ready = on_peer_ready,
    .on_control = on_peer_control,
    .on_parked = on_peer_parked,
    .on_message = crnet__p2p_on_message,
    .on_error = on_peer_error,
    .on_closed = on_peer_closed,
};
