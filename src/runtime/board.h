/* Boards: small collectives among the ranks of one host through shared
 * memory, without a request, a schedule or a frame.
 *
 * A small message through a link costs a request, a schedule's round, a
 * frame's header and its checks, a record in a ring, the reader's parse and
 * a copy: a few thousand instructions a call, several times what two cache
 * lines crossing between cores cost (docs/PERFORMANCE-SHM.md). A board call
 * does only what correctness needs: each rank writes its contribution into
 * a cell it owns in the segment it shares with each peer (shm.h), publishes
 * it with one (seq_cst) store of the call's sequence number, and reads the
 * peers' cells once their numbers say they are there.
 *
 * Where the cells are. Every same-host link's segment (shm.h) ends with two
 * board sides, one per rank of the pair (the creator writes side 0, the
 * attacher side 1). A side has CRNET__BOARD_SLOTS slots; the comm with
 * context id x uses slot x (a rank has at most one live comm per context
 * id, and a pair's comms of one id are one comm). A slot has two cells,
 * used by the comm's board calls in turn (the first, second, ... board call
 * on the comm: alike on every rank; calls without the board between them
 * take sequence numbers, not cells), and the numbers of the last 64 calls
 * this rank began on the comm without the board (`marks`, by number mod
 * 64), so that a peer that called without it is told from one that is
 * slow.
 *
 * One call (every rank of the comm, every board call):
 *   - writes what peer j needs into its cell for j, then stores the call's
 *     signature and, last, its sequence number (seq_cst): post;
 *   - waits until every peer it needs (below) has posted this call's
 *     number to it, checking
 *     each peer's signature (a different call is CRNET_EMISMATCH) and its
 *     marks (a peer that began this number without the board is
 *     CRNET_EMISMATCH too, rather than a hang; a peer 64 calls ahead has
 *     written over the mark, and that mismatch ends by CRNET_TIMEOUT);
 *   - reads the peers' cells.
 * A board call writes only once every peer has posted the board call
 * before it, so a cell is rewritten (two board calls on) only after each
 * reader has posted the board call between, which it does only once it
 * has finished reading: no reader ever sees a cell change under it. (Cells by
 * sequence number would not do: with a nonblocking call between two board
 * calls, a rank could rewrite the cell of the first before a slow peer had read
 * it.)
 *
 * Waiting is the comm's own polling wait (progress.c): links pumped, the
 * engine passed, the core yielded after empty turns where ranks outnumber
 * cores, and after CRNET_SPIN_US without news the loop sleeps in epoll. A
 * rank about to sleep sets `sleeps` on its side of each segment it waits
 * on and looks again (Dekker, as the rings do, shm.h); a poster that sees
 * the flag rings the link's doorbell. A lost peer, an ABORT or a revoke
 * fails the comm as on any call, and CRNET_TIMEOUT bounds the wait.
 *
 * A hostile peer can write anything into its side: it can only make its
 * own contribution wrong or make the call fail. Lengths and offsets come
 * from this rank's own call, never from the segment.
 *
 * Whether a comm uses its boards is agreed by its ranks (the collectives
 * layer's board_calls.c: every rank must have a live shared-memory link
 * to every other); the runtime keeps the agreed slot in c->board_slot, -1
 * while there is none. */
#ifndef CRNET_BOARD_H
#define CRNET_BOARD_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"
#include "frame.h"

#define CRNET__BOARD_SLOTS 32
/* A cell: its header line holds the first bytes of the data too, so that
 * a small contribution crosses between cores in the line that says it is
 * there. */
#define CRNET__BOARD_CELL 8192
#define CRNET__BOARD_CELL_HEAD 16
#define CRNET__BOARD_DATA (CRNET__BOARD_CELL - CRNET__BOARD_CELL_HEAD)
/* Comms of more ranks than this do without (a mask of the peers a wait
 * has seen is one word). */
#define CRNET__BOARD_MAX_RANKS 64

typedef struct crnet__board_cell {
  alignas(64) _Atomic uint64_t seq; /* the call posted; stored last */
  _Atomic uint64_t sig;             /* its signature */
  uint8_t data[CRNET__BOARD_DATA];
} crnet__board_cell;

/* A call in words, for the messages of mismatches: read only then. */
typedef struct crnet__board_desc {
  alignas(64) uint8_t coll;
  crnet__frame_call call;
} crnet__board_desc;

/* A call this rank began without the board (numbered seq), and what it
 * was: marks[seq mod CRNET__BOARD_MARKS]. */
#define CRNET__BOARD_MARKS 64
typedef struct crnet__board_mark {
  _Atomic uint64_t seq; /* stored last */
  uint8_t coll;
  crnet__frame_call call;
} crnet__board_mark;

typedef struct crnet__board_slot {
  _Atomic uint32_t gone; /* this rank has destroyed the comm */
  crnet__board_mark marks[CRNET__BOARD_MARKS];
  crnet__board_desc desc[2]; /* what each cell's call is */
  crnet__board_cell cell[2]; /* by the board call, mod 2 */
} crnet__board_slot;

typedef struct crnet__board_side {
  alignas(64) _Atomic uint32_t sleeps; /* the owner may sleep: ring */
  crnet__board_slot slot[CRNET__BOARD_SLOTS];
} crnet__board_side;

/* What two sides take in a segment, whole pages. */
#define CRNET__BOARD_BYTES                                                     \
  (((2 * sizeof(crnet__board_side)) + 4095) & ~(size_t)4095)

struct crnet__link;

/* Which call a post is: what a peer's post is checked against. */
typedef struct crnet__board_ident {
  uint64_t seq, sig;
  int cell; /* which of the slot's two cells: the board call's parity */
  int coll;
  crnet__frame_call call; /* for the messages of mismatches */
} crnet__board_ident;

/* One board call: on the caller's stack (a blocking call) or in its
 * request (a nonblocking one). */
typedef struct crnet__board_call {
  crnet_comm *c;
  crnet__board_ident id;
  uint64_t k; /* the comm's k-th board call: alike on every rank */
  int n;      /* c->size */
  int me;     /* c->rank */
  /* The peers whose posts the call waits for: every peer, unless the
   * collective needs fewer (crnet__board_wait_for). */
  uint64_t waits;
  bool posted;
  bool hand_over;   /* a blocking call's wait ended for another thread */
  bool hold;        /* ... which it must not (no memory to hand over) */
  uint64_t seen;    /* the peers whose post this wait has seen */
  uint64_t doubted; /* ... or found wrong once (judged at the next look) */
  int rc;           /* the wait's verdict, once it has one */
  uint64_t started; /* uv_hrtime() at the start, for the counters */
  uint64_t bytes;   /* payload to each peer, for the counters */
  struct crnet__board_call *next; /* the world's calls waiting (requests) */
  crnet__board_slot *out[CRNET__BOARD_MAX_RANKS];
  const crnet__board_slot *in[CRNET__BOARD_MAX_RANKS];
  struct crnet__link *link[CRNET__BOARD_MAX_RANKS];
  uint64_t light; /* peers whose segment lets posts skip the fence (shm.h) */
  _Atomic uint32_t *peer_sleeps[CRNET__BOARD_MAX_RANKS];
  _Atomic uint32_t *my_sleeps[CRNET__BOARD_MAX_RANKS];
} crnet__board_call;

/* --- the comm's boards (collectives layer: board_calls.c) ---------------- */

/* Whether this rank has a live shared-memory link to every other rank of
 * c, each with the board sides, and c's slot exists. If so, clears this
 * rank's side of c's slot on each of them (what an earlier comm of the
 * same context id left). Takes and gives back the loop. */
bool crnet__board_prepare(crnet_comm *c);
/* The agreement (the comm's first call, the library's own) is over: c's
 * calls use its slot from now on if `on`; either way, messages number the
 * program's calls after it from 1, and the counters start from 0. */
void crnet__board_enable(crnet_comm *c, bool on);
bool crnet__board_enabled(const crnet_comm *c);

/* --- one call ------------------------------------------------------------
 *
 * A board call is the comm's k-th, k counted alike on every rank (calls
 * begin in the order of their numbers). It may post only once the
 * (k-1)-th is complete on this rank and every peer has posted the
 * (k-1)-th: then each peer has finished reading the cells of the
 * (k-2)-th, which the k-th writes.
 *
 * Most calls wait for every peer's post, so that their completion says
 * the second half too. A call that needs fewer (a bcast's root needs
 * nobody's, a reader only the root's; a reduce's contributors nobody's)
 * waits for those only and completes without the others: their posts are
 * then owed (c->board_owed), and the next board call waits for them
 * before it writes. That is what lets a bcast's root go on at once, as a
 * message's sender does. A peer that called something else under the
 * number of such a call is caught by whichever of the two waits for the
 * other, or at the next board call when neither does. */

/* A blocking call (the direct path): refused as a blocking call from a
 * completion callback (CRNET_EINVAL) or with the comm's sticky error,
 * having done nothing; CRNET__LOOP_BUSY (request.h) if another thread has
 * the loop: the call then goes as a request. Otherwise takes the loop,
 * begins the requests
 * started before it, numbers the call and opens it (crnet__board_open),
 * and crnet__board_end must follow. On an error of the open the loop is
 * given back. call: what mismatch messages say it was. */
int crnet__board_begin(crnet_comm *c, int coll, const crnet__frame_call *call,
                       uint64_t sig, crnet__board_call *b);
/* Opens call number seq as the comm's next board call (the loop's owner;
 * a request's first advance, in the order requests begin): 0, or the
 * failure of the comm (a link found gone fails it). */
int crnet__board_open(crnet_comm *c, int coll, const crnet__frame_call *call,
                      uint64_t sig, uint64_t seq, crnet__board_call *b);
/* b waits only for the posts of these comm ranks (a mask; never this
 * rank): after crnet__board_open, before the post. */
void crnet__board_wait_for(crnet__board_call *b, uint64_t peers);
/* Whether b may post: the board call before it is complete here and
 * every peer has posted it (the owed posts, looked at here). True, with
 * b->rc set, when a look found a mismatch: the comm has failed. The
 * loop's owner. */
bool crnet__board_turn(crnet__board_call *b);
/* A blocking call waits for its turn (0 or the error), or until another
 * thread wants the loop: CRNET__BOARD_HAND_OVER, and the call must go on
 * as a request (board_calls.c), or it could hold back the very call that
 * a peer waits for before it posts this one's. */
#define CRNET__BOARD_HAND_OVER 1
int crnet__board_wait_turn(crnet__board_call *b);
/* This rank's cell for comm rank j (j != c->rank), to write into before
 * posting; CRNET__BOARD_DATA bytes. */
uint8_t *crnet__board_out(crnet__board_call *b, int j);
/* Posts to every peer (what was written into their cells). */
void crnet__board_post(crnet__board_call *b);
/* Whether the wait is over: every peer in b->waits posted (b->rc 0), or the
 * call failed (b->rc: the sticky error, CRNET_EMISMATCH). Never blocks. */
bool crnet__board_poll(crnet__board_call *b);
/* A blocking call waits until crnet__board_poll says so (or
 * CRNET_TIMEOUT); returns b->rc, or CRNET__BOARD_HAND_OVER as above. */
int crnet__board_wait(crnet__board_call *b);
/* Peer j's cell for this rank, after a wait that ended with 0. */
const uint8_t *crnet__board_in(crnet__board_call *b, int j);
/* The call is complete here: the next board call's turn, once the posts
 * it did not wait for have come. */
void crnet__board_close(crnet__board_call *b);
/* The call's share of the comm's counters (c->w->mu held). */
void crnet__board_account(crnet__board_call *b, int rc);
/* Ends a blocking call: closes it if rc is 0, counts it, gives the loop
 * back; returns rc. */
int crnet__board_end(crnet__board_call *b, int rc);
/* A request's call waits on the loop (on) or no longer (off): before the
 * loop sleeps, the engine announces its sleep on the call's segments. */
void crnet__board_track(crnet__board_call *b, bool on);

/* --- for the runtime ----------------------------------------------------- */

/* Comm c is being destroyed here: its slot says so to every peer, so that
 * a peer that calls on it fails (CRNET_EMISMATCH, as a frame of a comm
 * this rank no longer has would) instead of waiting. */
void crnet__board_forget(crnet_comm *c);

/* A request of c begins without the board (progress.c): its number goes
 * into c's marks on every peer. The loop's owner only. */
void crnet__board_note_regular(crnet_comm *c, uint64_t seq, uint8_t coll,
                               const crnet__frame_call *call);
/* The loop is about to sleep (entering) or has woken: announces the sleep
 * on the segments of every request's board call that waits, or withdraws
 * it. False (entering) if one of them need not wait any more: the loop
 * must not sleep then. The loop's owner (progress.c). */
struct crnet__world;
bool crnet__board_loop_may_sleep(struct crnet__world *w, bool entering);
/* Whom the board call of request seq of c waits for, in words, into buf:
 * false if no such call waits (progress.c, a request's timeout). */
bool crnet__board_awaited(const crnet_comm *c, uint64_t seq, char *buf,
                          size_t n);

#endif
