/* Boards: small collectives among the ranks of one host through shared
 * memory, without a request, a schedule or a frame.
 *
 * A small message through a link costs a request, a schedule's round, a
 * frame's header and its checks, a record in a ring, the reader's parse and
 * a copy: a few thousand instructions a call, several times what two cache
 * lines crossing between cores cost (docs/PERFORMANCE-SHM.md). A board call
 * does only what correctness needs: each rank writes its contribution into
 * a cell it owns in the segment it shares with each peer (shm.h), publishes
 * it with one release store of the call's sequence number, and reads the
 * peers' cells once their numbers say they are there.
 *
 * Where the cells are. Every same-host link's segment (shm.h) ends with two
 * board sides, one per rank of the pair (the creator writes side 0, the
 * attacher side 1). A side has CRNET__BOARD_SLOTS slots; the comm with
 * context id x uses slot x (a rank has at most one live comm per context
 * id, and a pair's comms of one id are one comm). A slot has two cells,
 * used by the comm's board calls in turn (the first, second, ... board call
 * on the comm: alike on every rank; calls without the board between them
 * take sequence numbers, not cells), and the number
 * of the last call this rank began on the comm without the board
 * (`regular`), so that a peer that called without it is told from one
 * that is slow.
 *
 * One call (every rank of the comm, every board call):
 *   - writes what peer j needs into its cell for j, then stores the call's
 *     signature and, last, its sequence number (release): post;
 *   - waits until every peer has posted this call's number to it, checking
 *     each peer's signature (a different call is CRNET_EMISMATCH) and its
 *     `regular` mark (a peer that began this number without the board is
 *     CRNET_EMISMATCH too, rather than a hang);
 *   - reads the peers' cells.
 * Every board call waits for every peer, so a cell is rewritten (two board
 * calls on) only after each reader has posted the board call between,
 * which it does only once it has finished reading: no reader ever sees a
 * cell change under it. (Cells by sequence number would not do: with a
 * nonblocking call between two board calls, a rank could rewrite the cell
 * of the first before a slow peer had read it.)
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

typedef struct crnet__board_slot {
  alignas(64) _Atomic uint64_t regular; /* last call begun without it */
  crnet__board_desc regular_desc;       /* ... and what it was */
  crnet__board_desc desc[2];            /* what each cell's call is */
  crnet__board_cell cell[2];            /* by the board call, mod 2 */
} crnet__board_slot;

typedef struct crnet__board_side {
  alignas(64) _Atomic uint32_t sleeps; /* the owner may sleep: ring */
  crnet__board_slot slot[CRNET__BOARD_SLOTS];
} crnet__board_side;

/* What two sides take in a segment, whole pages. */
#define CRNET__BOARD_BYTES                                                     \
  (((2 * sizeof(crnet__board_side)) + 4095) & ~(size_t)4095)

struct crnet__link;

/* One board call, on the caller's stack (crnet__board_begin fills it). */
typedef struct crnet__board_call {
  crnet_comm *c;
  uint64_t seq, sig;
  int cell; /* which of the slot's two cells */
  int coll;
  crnet__frame_call call;
  int n;            /* c->size */
  int me;           /* c->rank */
  uint64_t seen;    /* the peers whose post this wait has seen */
  int rc;           /* the wait's verdict, once it has one */
  uint64_t started; /* uv_hrtime() at the start, for the counters */
  uint64_t bytes;   /* payload to each peer, for the counters */
  crnet__board_slot *out[CRNET__BOARD_MAX_RANKS];
  const crnet__board_slot *in[CRNET__BOARD_MAX_RANKS];
  struct crnet__link *link[CRNET__BOARD_MAX_RANKS];
  _Atomic uint32_t *peer_sleeps[CRNET__BOARD_MAX_RANKS];
  bool announced[CRNET__BOARD_MAX_RANKS];
} crnet__board_call;

/* --- the comm's boards (collectives layer: board_calls.c) ---------------- */

/* Whether this rank has a live shared-memory link to every other rank of
 * c, each with the board sides, and c's slot exists. If so, clears this
 * rank's side of c's slot on each of them (what an earlier comm of the
 * same context id left). Takes and gives back the loop. */
bool crnet__board_prepare(crnet_comm *c);
/* The ranks agreed: c's calls may use its slot from now on. */
void crnet__board_enable(crnet_comm *c);
bool crnet__board_enabled(const crnet_comm *c);

/* --- one call ------------------------------------------------------------ */

/* Begins a board call of collective coll with signature sig into *b:
 * refused as a blocking call from a completion callback (CRNET_EINVAL) or
 * with the comm's sticky error, having done nothing; otherwise takes the
 * loop and numbers the call (0), and crnet__board_end must follow; a link
 * to a peer found gone fails the comm (the error, the loop given back).
 * call:
 * what mismatch messages about frames of this number say it was. */
int crnet__board_begin(crnet_comm *c, int coll, const crnet__frame_call *call,
                       uint64_t sig, crnet__board_call *b);
/* This rank's cell for comm rank j (j != c->rank), to write into before
 * posting; CRNET__BOARD_DATA bytes. */
uint8_t *crnet__board_out(crnet__board_call *b, int j);
/* Posts to every peer (what was written into their cells). */
void crnet__board_post(crnet__board_call *b);
/* Waits until every peer has posted this call (0), or the call fails: the
 * comm's sticky error, CRNET_EMISMATCH, CRNET_ETIMEDOUT. */
int crnet__board_wait(crnet__board_call *b);
/* Peer j's cell for this rank, after a wait that returned 0. */
const uint8_t *crnet__board_in(crnet__board_call *b, int j);
/* Ends the call: gives the loop back, counts it; returns rc. */
int crnet__board_end(crnet__board_call *b, int rc);

/* --- for the runtime ----------------------------------------------------- */

/* A request of c begins without the board (progress.c): its number goes
 * into c's `regular` mark on every peer. The loop's owner only. */
void crnet__board_note_regular(crnet_comm *c, uint64_t seq, uint8_t coll,
                               const crnet__frame_call *call);

#endif
