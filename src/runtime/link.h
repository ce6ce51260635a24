/* A link: one authenticated, framed TCP connection on a libuv loop.
 *
 * Every connection crnet makes is a link: a rank's connection to the
 * rendezvous, the rendezvous server's connection to each rank, and the mesh
 * links between ranks. A link runs the handshake (handshake.h) first, reading
 * exactly the handshake's bytes so that nothing that follows is consumed
 * early, and then carries frames (frame.h).
 *
 * Reading. Once the handshake is over, the link reads into a small staging
 * buffer of its own (CRNET__LINK_STAGE bytes), so that one read(2) brings a
 * frame header together with a small payload, and often the next frames too:
 * small messages cost one system call instead of three. Frames are parsed
 * from there in order:
 *   - a DATA frame goes into the buffer of the receive request posted on the
 *     link (crnet__link_post_recv): what the staging read brought along is
 *     copied (at most CRNET__LINK_STAGE bytes), and the rest of the payload
 *     is read straight into the destination (libuv's alloc callback hands out
 *     the destination itself), so large payloads are never copied. If no
 *     receive is posted yet (the peer is a round ahead), the link parks:
 *     the staging buffer takes what comes until it is full, then the link
 *     stops reading and TCP flow control holds the sender back until the
 *     receive is posted.
 *     A header that does not match the posted receive (another collective,
 *     sequence number, round, signature or length) fails the link with
 *     CRNET_EMISMATCH and a message naming both sides; so does a parked
 *     header the owner says no receive will match (on_parked).
 *   - any other frame is read whole into a heap buffer (bounded size) and
 *     handed to the owner's on_control callback.
 *
 * Comms. The comms of a process share its links (comm.h): every DATA frame
 * names its comm's context id, and a link holds a posted receive per comm.
 * A frame goes to the receive of its comm. A frame whose receive is not
 * posted parks as above while no receive of another comm waits on the link;
 * when one does, the parked frame is read whole into memory of its own (an
 * early frame) so that the link moves on, and the receive of its comm,
 * once posted, takes it from there with one copy. So calls of different
 * comms never hold each other back, whatever order the ranks call them in,
 * and a program that does not interleave comms never copies. A frame of a
 * comm that has failed is read and dropped.
 *
 * Writing. crnet__link_send writes the header and the payload with one
 * uv_write straight from the caller's memory; the request must stay alive
 * until its `done` flag is set (success or failure, always eventually set,
 * also when the link is closed).
 *
 * Encryption (crnet__link_set_encrypt, CRNET_ENCRYPT=1). After a handshake
 * that agreed on it, the byte stream above is carried in sealed records
 * (seal.h):
 *   - reading: raw bytes go into a record buffer; each whole record is
 *     authenticated and decrypted into the staging buffer (then as large as
 *     a record), and the frame parser above takes its plaintext from there,
 *     copying DATA payloads into the posted receive; a record that lies
 *     wholly inside the rest of a posted receive's payload (most records of
 *     a large one) is decrypted straight into it instead. A record that fails
 *     authentication fails the link (CRNET_EAUTH, "a frame from rank N
 *     failed authentication"); its bytes are never parsed. A parked DATA frame
 *     stops the opening of records once the staging buffer is full, and
 *     reading once the record buffer is full too.
 *   - writing: sends and control frames join a queue in call order; records
 *     are sealed from its head (straight from the caller's memory when a
 *     record lies within one region, else gathered first) into chunks of a
 *     few records, a bounded number of chunks in flight, and the next chunk
 *     is sealed as one is written, so sealing overlaps the network and a
 *     gigabyte frame needs no gigabyte buffer. A send is done when the chunk holding its last
 *     byte has been written; until it is sealed whole its memory is still
 *     read.
 * With encryption off none of this runs, and the paths above are unchanged.
 *
 * States: CONNECTING -> HANDSHAKE -> READY -> CLOSING. The owner's on_error is
 * called at most once, on the first failure (EOF, reset, garbage, mismatch);
 * the owner decides whether to close. on_closed is called once the libuv
 * handles are closed; the owner frees the link there (or later).
 *
 * Callbacks run on the loop thread, from inside uv_run; they must not block.
 */
#ifndef CRNET_LINK_H
#define CRNET_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"
#include "handshake.h"
#include "seal.h"

enum crnet__link_state {
  CRNET__LINK_CONNECTING,
  CRNET__LINK_HANDSHAKE,
  CRNET__LINK_READY,
  CRNET__LINK_CLOSING,
};

/* The staging buffer of a link's reader (see above). */
#define CRNET__LINK_STAGE 4096

/* Largest control frame payload accepted (a RENDEZVOUS_TABLE of 2^20 ranks
 * fits). */
#define CRNET__CONTROL_MAX ((uint64_t)128 << 20)

typedef struct crnet__link crnet__link;
typedef struct crnet__out_item crnet__out_item;
typedef struct crnet__out_chunk crnet__out_chunk;

/* One region of memory in a gather or scatter list. */
typedef struct crnet__iov {
  void *base;
  uint64_t len;
} crnet__iov;

/* A receive of one DATA frame, scattered over iov[0..niov) (the frame's
 * length must equal the sum, `len`). Matching fields as in the frame header.
 * `done` becomes true when the payload has arrived (status 0) or the link
 * failed (status < 0). The iov array must live until then. */
typedef struct crnet__recv_req {
  const crnet__iov *iov;
  uint32_t niov;
  uint64_t len;
  uint64_t got;     /* bytes arrived in all */
  uint32_t cur;     /* iov being filled */
  uint64_t cur_got; /* bytes arrived in iov[cur] */
  uint32_t ctx; /* the comm's context id (frame.h) */
  uint8_t coll;
  uint64_t seq;
  uint32_t round;
  uint32_t sig;
  bool done;
  int status;
  struct crnet__recv_req *next; /* the link's list of posted receives */
} crnet__recv_req;

/* A DATA frame read before its receive was posted (see "Comms" above). */
typedef struct crnet__early {
  struct crnet__early *next;
  crnet__frame_header hdr;
  uint8_t *payload;
} crnet__early;

/* What on_parked says of a frame whose receive is not posted. */
enum crnet__park {
  CRNET__PARK_WAIT = 0, /* a receive of this rank will take it */
  CRNET__PARK_DISCARD,  /* its comm has failed: read it and drop it */
  CRNET__PARK_REFUSE,   /* no receive ever will: a mismatch */
};

/* A send of one frame. `done` as for receives. */
typedef struct crnet__send_req {
  uv_write_t write;
  uint8_t header[CRNET__FRAME_HEADER_SIZE];
  bool done;
  int status;
} crnet__send_req;

typedef struct crnet__link_callbacks {
  /* Handshake over: 0 means authenticated as l->peer. */
  void (*on_ready)(crnet__link *l, int status);
  /* A complete non-DATA frame. payload (h->length bytes) lives until the
   * callback returns. */
  void (*on_control)(crnet__link *l, const crnet__frame_header *h,
                     const uint8_t *payload);
  /* Optional: a DATA frame whose receive is not posted has arrived (the
   * peer is ahead): enum crnet__park. On CRNET__PARK_REFUSE the link fails
   * with CRNET_EMISMATCH, l->bad_hdr holding the frame's header when
   * on_error runs. */
  int (*on_parked)(crnet__link *l, const crnet__frame_header *h);
  /* Optional: a MSG or RDATA frame's header has come (point-to-point,
   * p2p.c). Return the receive its payload goes to (len = the frame's
   * length), or NULL to have it read whole into memory and handed to
   * on_control like a control frame. The owner may fail the link instead. */
  crnet__recv_req *(*on_message)(crnet__link *l, const crnet__frame_header *h);
  /* The first failure: a negative code and a reason. */
  void (*on_error)(crnet__link *l, int status, const char *why);
  /* Handles closed; the link may be freed. */
  void (*on_closed)(crnet__link *l);
} crnet__link_callbacks;

struct crnet__link {
  uv_tcp_t tcp;
  uv_timer_t timer; /* handshake deadline, then linger on close */
  uv_connect_t connect;
  enum crnet__link_state state;
  const crnet__link_callbacks *cb;
  void *owner;
  int32_t self;    /* our own rank, for messages */
  int32_t peer;    /* authenticated peer rank (after on_ready 0) */
  uint8_t purpose; /* handshake purpose (after on_ready 0) */
  uint8_t stream;  /* which of the pair's streams (after on_ready 0) */
  uint8_t cipher;  /* enum crnet__cipher (after on_ready 0) */
  char addr[64];   /* peer's address as text, for messages */
  char why[192];   /* reason of the first failure */

  crnet__handshake *hs; /* during the handshake only, in secret memory */
  bool initiator;
  uint8_t hs_in[CRNET__HS_REPLY_SIZE]; /* larger of HELLO and REPLY */
  uint8_t hs_out[CRNET__HS_REPLY_SIZE];
  uint8_t hs_fin[CRNET__HS_FINISH_SIZE];
  size_t hs_want, hs_got;
  uv_write_t hs_write, hs_write_fin;
  uv_shutdown_t shutdown;

  /* Frame reading: stage[stage_off .. stage_len) is read but not parsed.
   * stage is stage_buf, or with encryption a heap buffer that holds a
   * record's plaintext beside a partial frame header. */
  uint8_t stage_buf[CRNET__LINK_STAGE];
  uint8_t *stage;
  uint32_t stage_cap;
  uint32_t stage_off, stage_len;
  bool have_header; /* hdr is decoded; reading its payload, or parked */
  crnet__frame_header hdr;
  uint8_t *control; /* payload buffer of a control frame */
  uint64_t control_got;
  crnet__recv_req *recv;   /* the receive the current frame goes to */
  crnet__recv_req *posted; /* receives waiting for their frame, one per
                              comm at most, in the order posted */
  crnet__early *early, *early_tail; /* drained frames, in arrival order */
  crnet__recv_req drain;   /* the receive of a frame being drained */
  crnet__iov drain_iov;
  bool drain_discard;
  crnet__frame_header bad_hdr; /* the frame of a mismatch, for on_error */
  bool msg_recv; /* the current MSG or RDATA frame goes to recv */
  bool reading;
  bool draining; /* closing: read and discard until EOF */

  int pending_writes;
  bool failed;
  /* A write failed because the peer is gone; the link fails with
   * write_why unless reading first finds what the peer said last (see
   * crnet__link_write_failed). */
  bool write_broken;
  char write_why[128];
  int handles_open;
  /* Set true whenever a receive or send request on the link may have
   * moved (bytes read, a write done, a failure), so that the owner's
   * progress engine runs only when there is something to look at. NULL:
   * none. */
  bool *io_flag;
  /* Counted up at the same moments (NULL: none): a wait that polls tells
   * from it that data is still moving (progress.c, spin). */
  uint64_t *io_count;
  /* While this counts above 0 (NULL: never), a DATA frame parked at the
   * head of the link is read into memory at once, like one with a receive
   * of another comm behind it: point-to-point messages (and their replies
   * and credits) come through the link without a posted receive, and a
   * frame of a call not begun yet must not hold them back. The owner
   * counts its point-to-point requests in flight here. */
  const atomic_uint *drain_parked;

  /* While true (NULL: never), the loop runs only to poll and will not
   * sleep: a shared-memory link then announces no sleep to its peer (so
   * the peer's writes need no system call to wake it). The owner sets it
   * around uv_run(UV_RUN_NOWAIT). */
  const bool *loop_nowait;
  /* The same-host carriage once set up (link_shm.h); NULL: TCP only. */
  struct crnet__link_shm *shm;
  /* What carries the link (enum crnet_link_kind): TCP once it is ready,
   * SHM once both directions run on shared memory, NONE once it closes.
   * Written on the loop's thread, read from any (crnet_comm_peer_link),
   * which must not look at the rest of the link. */
  _Atomic uint8_t carriage;

  /* Encryption (all NULL or 0 on a plaintext link). */
  crnet__seal *tx, *rx;
  uint8_t *raw; /* records read, raw[raw_off .. raw_len) not yet opened */
  uint32_t raw_off, raw_len;
  crnet__out_item *out_head, *out_tail;       /* bytes not yet sealed */
  crnet__out_item *sealed_head, *sealed_tail; /* sealed, being written */
  uint64_t out_bytes; /* bytes queued, not yet sealed */
  uint64_t next_chunk;
  int chunks_in_flight;
  crnet__out_chunk *spare; /* full-size chunks written, kept for reuse */
  int nspare;
};

/* Starts a link that connects to addr and runs the handshake as initiator.
 * l is storage that must outlive on_closed. hs_timeout_ms bounds connect and
 * handshake; on_ready reports the outcome. A negative return means the link
 * could not start: it is closing, and on_closed follows (on_ready does not). */
int crnet__link_connect(crnet__link *l, uv_loop_t *loop,
                        const struct sockaddr *addr,
                        const crnet__link_callbacks *cb, void *owner,
                        const uint8_t key[CRNET__KEY_BYTES], uint8_t purpose,
                        int32_t self, int32_t expected_peer, int32_t size,
                        uint64_t hs_timeout_ms);

/* The same, from the local address `source` (its port ignored; NULL: the
 * kernel chooses), so that the connection leaves by the chosen interface.
 * If source cannot be bound, the return is negative and l->why, readable
 * until on_closed, says so. */
int crnet__link_connect_from(crnet__link *l, uv_loop_t *loop,
                             const struct sockaddr *addr,
                             const struct sockaddr *source,
                             const crnet__link_callbacks *cb, void *owner,
                             const uint8_t key[CRNET__KEY_BYTES],
                             uint8_t purpose, int32_t self,
                             int32_t expected_peer, int32_t size,
                             uint64_t hs_timeout_ms);

/* Accepts a pending connection on `server` into l and runs the handshake as
 * responder. On a negative return, as for crnet__link_connect. */
int crnet__link_accept(crnet__link *l, uv_loop_t *loop, uv_stream_t *server,
                       const crnet__link_callbacks *cb, void *owner,
                       const uint8_t key[CRNET__KEY_BYTES], int32_t self,
                       int32_t size, uint64_t hs_timeout_ms);

/* Makes a mesh link stream `stream` of `streams` per pair of ranks
 * (handshake.h); an accepting link gives stream 0 and learns its index from
 * the initiator. Call right after connect or accept. */
void crnet__link_set_streams(crnet__link *l, uint8_t stream, uint8_t streams);

/* Whether the link encrypts (enum crnet__hs_encrypt; default PLAIN):
 * mesh links and a rank's rendezvous link say CRNET_ENCRYPT, a rendezvous
 * server FOLLOWs each rank. Call right after connect or accept. */
void crnet__link_set_encrypt(crnet__link *l, uint8_t mode);

/* Posts the receive for the next DATA frame of comm r->ctx. At most one
 * receive per comm may be posted on a link (crnet__link_recv_posted). */
void crnet__link_post_recv(crnet__link *l, crnet__recv_req *r);
bool crnet__link_recv_posted(const crnet__link *l, uint32_t ctx);

/* Takes back a posted receive that is no longer wanted (the collective failed
 * elsewhere). Safe if r is not posted. */
void crnet__link_cancel_recv(crnet__link *l, crnet__recv_req *r);

/* Bounds how long the link may go unanswered by the peer's machine before
 * it fails with CRNET_EPEER (a partition, a host that lost power: no FIN,
 * no reset ever comes). TCP keepalive probes an idle link every
 * max(1, ms/4000) s, and TCP_USER_TIMEOUT drops it once sent data or
 * probes have gone unacknowledged for ms. A peer process that is merely
 * slow or stopped still has its kernel answer, so it is not lost. 0: the
 * kernel's defaults (no keepalive; retransmissions for about 15 minutes). */
void crnet__link_set_liveness(crnet__link *l, uint64_t ms);

/* Asks on_parked again about a DATA frame parked on the link, if any (the
 * owner's idea of what can match has changed: a new collective began). */
void crnet__link_recheck_parked(crnet__link *l);

/* Sends a frame whose header is h, gathering the payload from
 * iov[0..niov) (h->length must equal the sum). The memory must stay valid
 * until r->done; the iov array itself may go once this returns. */
void crnet__link_send(crnet__link *l, crnet__send_req *r,
                      const crnet__frame_header *h, const crnet__iov *iov,
                      uint32_t niov);

/* Sends a control frame; the payload is copied, nothing to keep alive.
 * The _ctx variant names a comm (ABORT frames). */
int crnet__link_send_control(crnet__link *l, uint8_t kind, const void *payload,
                             uint64_t len);
int crnet__link_send_control_ctx(crnet__link *l, uint8_t kind, uint32_t ctx,
                                 const void *payload, uint64_t len);
/* The same with a whole header (h->length bytes of payload). */
int crnet__link_send_control_hdr(crnet__link *l, const crnet__frame_header *h,
                                 const void *payload);
/* The same for a small frame, offered to the kernel at once: when it takes
 * the whole frame nothing is allocated and no callback follows; what it
 * does not take is copied and queued as above. 0, or an error with nothing
 * sent (CRNET_EPEER also when the socket refuses the write: the link is
 * left to the loop, which reads why). */
int crnet__link_send_now(crnet__link *l, const crnet__frame_header *h,
                         const void *payload);

/* Gives a link still connecting or in its handshake a new deadline, ms
 * from the loop's time. For a process that comes back to its loop after
 * a long time away (lazy links: the program computed between calls), so
 * that a handshake whose answer has been waiting unread all along is not
 * timed out before it is read (timers run before I/O). */
void crnet__link_renew_deadline(crnet__link *l, uint64_t ms);

/* Closes now: pending writes fail, on_closed follows. Idempotent. */
void crnet__link_close(crnet__link *l);

/* Closes politely: lets queued writes finish, sends FIN, then reads and
 * discards until the peer closes too (so no reset destroys data in flight),
 * for at most linger_ms. Idempotent. */
void crnet__link_close_gently(crnet__link *l, uint64_t linger_ms);

/* A write on an established link failed (why says how). A peer that
 * closed its end may have sent its last frames first (an abort, a
 * goodbye, a mismatch report) and they wait in the socket, but a write
 * that fails at once would fail the link before the loop reads them, and
 * the rank would report a lost peer where the peer said why it left. So
 * while the link still reads, its failure waits for the reading to end it
 * (the connection's end comes right behind those frames), for at most
 * CRNET__WRITE_FAIL_GRACE_MS; a link that does not read fails now. The
 * failed write's request completes with its error at once either way. */
#define CRNET__WRITE_FAIL_GRACE_MS 250
void crnet__link_write_failed(crnet__link *l, const char *why);

/* A write failed and the link, still reading, fails within the grace. */
static inline bool crnet__link_failing(const crnet__link *l) {
  return l->write_broken && !l->failed;
}

/* True while there are writes in flight. */
static inline bool crnet__link_busy(const crnet__link *l) {
  return l->pending_writes > 0;
}

/* True when every byte queued on the link has been handed to the kernel
 * (or put in the shared ring), though write callbacks may not have run
 * yet: a frame written now follows whole frames, and no caller's memory is
 * still being read. */
bool crnet__link_flushed(const crnet__link *l);

/* Same-host links (link_shm.h). The owner of an established link to a
 * rank on its own node says what it wants, once: the lower rank of the
 * pair offers shared memory (rings of ring_bytes each), the higher
 * welcomes an offer from the process peer_pid, or refuses one. Required
 * (CRNET__SHM_REQUIRED, CRNET_TRANSPORT=shm): a set-up that fails fails the
 * link, rather than leaving the pair on TCP. Encrypted links stay on TCP. */
#define CRNET__SHM_REQUIRED 1u   /* flags, as said above */
#define CRNET__SHM_TWO_COPIES 2u /* never copy out of the peer's memory
                                    (CRNET_SHM_SINGLE_COPY=0) */
void crnet__link_shm_offer(crnet__link *l, uint32_t peer_pid,
                           uint32_t ring_bytes, unsigned flags);
void crnet__link_shm_welcome(crnet__link *l, uint32_t peer_pid,
                             unsigned flags);
void crnet__link_shm_refuse(crnet__link *l);
/* Both directions of the link run on shared memory. */
bool crnet__link_on_shm(const crnet__link *l);
/* A link on shared memory whose writes are still going out copies what is
 * left of them into memory of its own, so that the callers' buffers are
 * free and a frame written now (an ABORT) follows them: then it counts as
 * flushed for that purpose. The ring is small (128 KiB) where a socket's
 * buffer takes megabytes, so a rank that fails mid-write would otherwise
 * close such a link without saying why. 0, or -1 if it cannot (no shared
 * memory, pieces by address in flight, out of memory). */
int crnet__link_shm_detach(crnet__link *l);

/* "1.2.3.4:5678" of a sockaddr into buf. */
void crnet__format_sockaddr(const struct sockaddr *sa, char *buf, size_t n);

#endif
