/* Requests: collectives in flight, and the progress engine that moves them.
 *
 * Every collective is a request, the blocking calls included (they start
 * one and wait for it at once). A request belongs to its comm's list from
 * the moment it is started (crnet_iX, in any thread) until the wait that
 * completes it frees it. The runtime knows nothing of schedules: the
 * collectives layer gives each request an `advance` function that moves
 * it as far as it can without blocking, and the progress engine calls it
 * whenever the loop has run.
 *
 * Who runs the loop. A comm's libuv loop is run by one thread at a time,
 * its owner: a thread waiting for a request (crnet_wait and the blocking
 * calls), or the comm's progress thread (CRNET_PROGRESS_THREAD) while
 * requests are outstanding and no thread waits. Everything that touches
 * links, requests in flight and the sticky error's wind-up runs on the
 * owner; other threads take c->w->mu only to queue a request, read its state,
 * or take ownership in turn. The owner never holds c->w->mu while it runs the
 * loop, so a thread that starts a request never waits for the network: it
 * queues the request and, if the loop is busy, wakes its owner
 * (uv_async_send), whose pass of the progress engine starts it.
 *
 * Order on the wire. Requests are numbered in the order they are started
 * (the sequence number every frame carries), and every rank starts the
 * calls of a comm in the same order. Frames between two ranks travel on
 * the pair's TCP streams in that order too: a request posts no send to
 * peer j while an older request of the comm still has sends to j, and no
 * receive from j while an older one still has receives from j (`peers`
 * below counts them). The oldest call in flight on every rank is thus
 * never held back by a younger one, so it progresses exactly as it would
 * alone, and by induction every call completes: no interleaving of
 * outstanding calls can deadlock, and a frame that reaches a rank before
 * its call has begun there simply waits parked at the head of its link
 * (at most the link's staging buffer: link.h), holding back only that
 * link, which no older call needs any more.
 */
#ifndef CRNET_REQUEST_H
#define CRNET_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "frame.h"

typedef struct crnet_request crnet_request;

/* What a request does with one peer: messages still to post. */
typedef struct crnet__req_peer {
  int32_t rank;
  uint32_t sends_left; /* sends not yet posted */
  uint32_t recvs_left; /* receives not yet complete */
  crnet_peer_stats stats; /* this call's traffic with it, added at the end */
} crnet__req_peer;

typedef struct crnet__req_ops {
  /* Called on the loop's owner after the request has begun and whenever
   * the loop has run: moves it on as far as possible without blocking.
   * Returns true once it is complete, with r->status set; the runtime then
   * takes it out of flight. It must look at the comm's sticky error: once
   * set, it ends the request (with that error) as soon as libuv has let go
   * of the request's memory. */
  bool (*advance)(crnet_request *r);
  /* After completion, before the request is shown complete, with c->w->mu
   * held: the call's share of the counters, and its trace. */
  void (*account)(crnet_request *r);
  /* Frees what the layer above owns (schedule, scratch); the request's
   * own memory is the runtime's. */
  void (*release)(crnet_request *r);
} crnet__req_ops;

/* Peers a request keeps without an allocation: a circulant schedule's
 * 2 log2 p at p = 16, a ring's 2. */
#define CRNET__REQ_PEERS_SMALL 8

enum crnet__req_state {
  CRNET__REQ_QUEUED,  /* numbered, not begun on the loop yet */
  CRNET__REQ_RUNNING, /* begun: its frames may be on the wire */
  CRNET__REQ_DONE,    /* complete: status is final; waits for its wait */
  CRNET__REQ_FREE,    /* back in the comm's cache (a stale handle) */
};

struct crnet_request {
  uint32_t magic;
  uint8_t state; /* enum crnet__req_state; under c->w->mu */
  bool blocking; /* started by a blocking call */
  bool cb_set;
  uint32_t cb_busy;  /* callbacks running now (a wait frees only after) */
  pthread_t cb_tid;  /* the thread that runs the callback */
  int status;        /* under c->w->mu once DONE */
  size_t alloc_size; /* bytes of this request's memory (the cache's) */
  struct crnet_comm *comm;
  const crnet__req_ops *ops;
  crnet_request_fn *cb;
  void *cb_arg;
  /* A point-to-point message (p2p.c), not a collective: not numbered, not
   * in the order of calls, not bound by CRNET_TIMEOUT. */
  bool p2p;
  /* A collective on the shared-memory boards (board.h): no frames, so no
   * `regular` mark when it begins. */
  bool board;
  /* crnet_cancel asked for it (any thread; the layer's advance looks). */
  atomic_bool cancel;
  /* Why it failed, if the layer above says more than the sticky error
   * (a truncated message): the wait that frees it makes this the waiting
   * thread's crnet_comm_errmsg. NULL: nothing to say. */
  const char *why;
  /* The call, as every frame tells it. */
  uint8_t coll;
  uint64_t seq;
  uint32_t sig;
  crnet__frame_call call;
  uint32_t round; /* the round being worked on, for messages */
  uint64_t started; /* uv_hrtime when the program started it */
  bool waiting_link; /* its round waits for a lazy link to `link_peer` */
  int32_t link_peer;
  /* Its peers (sorted by rank), see above: peers_small when they fit. */
  crnet__req_peer *peers;
  uint32_t npeers;
  crnet__req_peer peers_small[CRNET__REQ_PEERS_SMALL];
  /* The comm's list of requests in flight (queued and running), in
   * sequence order. */
  crnet_request *prev, *next;
};

#define CRNET__REQ_MAGIC 0x63726571u /* "creq" */

/* A request of `size` bytes (at least sizeof(crnet_request); the layer
 * above puts its own state behind it), zeroed but for the runtime's own
 * fields, or NULL. crnet__req_discard gives back one that never started. */
crnet_request *crnet__req_alloc(crnet_comm *c, size_t size);
void crnet__req_discard(crnet_request *r);

/* Numbers r and puts it in flight (any thread). r->comm, ops, coll, sig,
 * call, peers must be set. Returns 0, or the comm's sticky error, or
 * CRNET_EINVAL for a blocking call from a completion callback (r is then
 * not taken: the caller frees it). On success the request is the caller's
 * to wait for, and it may already be running on another thread. */
int crnet__req_start(crnet_comm *c, crnet_request *r);

/* Whether request r may post a send to (dir 0) or a receive from (dir 1)
 * `peer` now: no older request in flight still has one to post (see
 * above). NULL r: always (tests that exchange outside requests). */
bool crnet__req_gate_open(const crnet_request *r, int32_t peer, int dir);

/* r's entry for peer, or NULL. */
crnet__req_peer *crnet__req_peer_find(crnet_request *r, int32_t peer);

/* Runs the progress engine once (the loop's owner only): begins queued
 * requests, advances those in flight, completes the finished ones. */
void crnet__progress(crnet_comm *c);

/* The oldest request in flight that has begun, or NULL: what a failure
 * noticed by the loop is said to happen "during". Owner only. */
crnet_request *crnet__req_oldest(const crnet_comm *c);

/* The request with sequence number seq that has begun and is in flight,
 * or NULL. Owner only. */
crnet_request *crnet__req_find(const crnet_comm *c, uint64_t seq);

/* Sets up the engine's handles and lock on a new comm's loop (init), and
 * takes them down again (destroy; no other thread may use the comm by
 * then). The progress thread, if any, is stopped first. */
int crnet__progress_init(crnet_comm *c);
void crnet__progress_stop(crnet_comm *c);
void crnet__progress_close(crnet_comm *c);

/* Takes the loop for the calling thread, waiting while another thread has
 * it, and gives it back. For the comm's own blocking work outside
 * requests (abort, destroy). */
void crnet__loop_acquire(crnet_comm *c);
void crnet__loop_release(crnet_comm *c);
/* A blocking call that runs without a request (board.c): with the comm's
 * sticky error, or from a completion callback (CRNET_EINVAL: it would
 * wait for itself), nothing; with the loop busy (another thread runs it or
 * waits for it), nothing either: CRNET__LOOP_BUSY, and the call goes as a
 * request. Otherwise takes the loop and gives the call the comm's next
 * sequence number (crnet__loop_release gives the loop back): 0. */
#define CRNET__LOOP_BUSY 1
int crnet__loop_take_for_call(crnet_comm *c, uint64_t *seq);
/* Another thread waits to own the loop (a hint: no lock). */
bool crnet__loop_wanted(const crnet_comm *c);
/* The loop's owner makes the call it runs without a request (numbered seq,
 * begun at `started`) a blocking request in flight, to be waited for like
 * any: the call hands the loop over instead of holding it while it waits
 * (board.c). r: from crnet__req_alloc, with comm, ops, coll, sig, call and
 * peers set. */
void crnet__req_adopt(crnet_comm *c, crnet_request *r, uint64_t seq,
                      uint64_t started);

/* Takes the loop for a call that runs without a request (p2p.c's small
 * blocking send) if nobody has it, no request is queued or waits for it,
 * no message is in flight that the call could overtake and the comm has
 * not failed; false (nothing taken) otherwise. crnet__loop_release gives
 * it back. */
bool crnet__loop_take_if_idle(crnet_comm *c);

/* With the loop taken (crnet__loop_take_if_idle): the turn a nonblocking
 * call's start makes, without sleeping. Mostly a light one (the rings of
 * links to ranks of this node pumped, the engine passed over the
 * requests), and a turn of the loop itself every few calls, so that TCP
 * sockets (a peer's connection ending) are seen too. The comm may have
 * failed on return. */
void crnet__loop_turn(crnet_comm *c);

/* Whether the calling thread runs the comm's loop now (a completion
 * callback's thread). */
bool crnet__loop_owned_by_me(crnet_comm *c);

/* crnet_comm_abort while another thread runs the loop (a wait for a peer
 * that may never answer: the very case abort is for, from a watchdog
 * thread): asks that thread to abort at once and returns once it has, or
 * at once if nobody runs the loop. */
void crnet__abort_by_owner(crnet_comm *c, int code);

/* Requests in flight (queued or running): for destroy. Under c->w->mu. */
uint32_t crnet__req_in_flight(const crnet_comm *c);

/* Frees every request that is complete but was never waited for
 * (destroy), and the cache; the _of variant only comm c's (the destroy of
 * a derived comm). */
void crnet__req_free_unwaited(crnet_comm *c);
void crnet__req_free_unwaited_of(crnet_comm *c);

#endif
