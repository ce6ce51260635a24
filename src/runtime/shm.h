/* The shared-memory segment and byte rings of a same-host link.
 *
 * Two ranks on one host carry a link's byte stream of frames (frame.h)
 * through shared memory instead of TCP (link_shm.h): one rank creates a
 * segment here, hands its file descriptor to the other (over a Unix socket,
 * SCM_RIGHTS), and the other attaches. The segment holds two
 * single-producer single-consumer byte rings, one per direction.
 *
 * The segment is a memfd: it has no name in any file system, so nothing is
 * left behind whatever way the processes end, SIGKILL included; the memory
 * goes when the last descriptor and mapping go. The creator seals it
 * against shrinking, growing and further sealing, and the attacher refuses
 * a segment without those seals: a peer that could shrink the file under
 * our mapping could make any access to it raise SIGBUS.
 *
 * Layout (native byte order: both sides are on one host). R is ring_bytes,
 * a power of two from CRNET__SHM_RING_MIN to CRNET__SHM_RING_MAX:
 *
 *   offset        size  field
 *        0           4  magic "CRNS"
 *        4           4  version, CRNET__SHM_VERSION
 *        8           4  R
 *       12           4  fences: bit 0 set by the creator, bit 1 by the
 *                       attacher, each when its process fences with
 *                       membarrier before it sleeps (see "Asymmetric
 *                       fences" below)
 *       16           8  cookie, a 64-bit value both sides know (so a
 *                       descriptor meant for another link is refused)
 *       24          40  zero
 *   ring 0's control, then ring 1's, 192 bytes each (at 64 and 256):
 *       +0           8  head: bytes ever written (the producer's, alone on
 *                       its 64-byte cache line)
 *      +64           8  tail: bytes ever read (the consumer's, alone on its
 *                       cache line)
 *     +128           4  reader_sleeps: the consumer is about to block
 *     +132           4  writer_sleeps: the producer is about to block
 *     +136           8  remote_done: bytes the consumer has copied out of
 *                       the producer's own memory (the consumer's; see
 *                       crnet__ring_remote_done)
 *     +144           8  remote_progress: the same, counted piece by piece
 *                       within a record (the consumer's; a sign of life)
 *      448        3648  zero
 *     4096           R  ring 0's data (the creator writes, the attacher reads)
 * 4096 + R           R  ring 1's data (the attacher writes, the creator reads)
 * 4096 + 2R          B  the board sides (board.h): the creator's, then the
 *                       attacher's; B is CRNET__BOARD_BYTES
 *
 * The segment is CRNET__SHM_HEADER_BYTES + 2 R + B bytes. Byte i of a ring's
 * stream lives at data[i mod R]; head - tail bytes are readable and
 * R - (head - tail) writable.
 *
 * A hostile peer. The peer can write anything into the segment at any
 * time. Against that:
 *   - attach checks the seals, the size, magic, version, R and the cookie
 *     once, and keeps R, the data pointers and the mapping's size in local
 *     memory: nothing is read from the header again;
 *   - each side keeps its own position (the producer its head, the
 *     consumer its tail) in the local handle and only ever stores it to the
 *     segment, so the peer cannot move it;
 *   - every time a side loads the peer's position it checks that
 *     0 <= head - tail <= R (in 64-bit unsigned arithmetic, so a position
 *     behind ours shows as a huge difference); a violation marks the local
 *     handle corrupt for good, and every later call refuses;
 *   - every copy offset is masked with R - 1 and every length bounded by
 *     R, so no access leaves the mapping whatever the segment says.
 * What a hostile peer can still do is harm its own side of the link: send
 * garbage bytes (the frame layer validates those), or clear a sleep flag
 * and so withhold a wake-up (the link's timeouts end that).
 *
 * Sleeping. The ring owns no descriptor to block on; the caller keeps one
 * per direction and side (an eventfd, a pipe) and follows this protocol, so
 * that an idle side costs no CPU and no wake-up is lost:
 *   - a consumer that read nothing calls crnet__ring_reader_sleep; if that
 *     returns true it blocks until signalled (then reads again), else it
 *     reads again at once;
 *   - a producer, after every write that wrote something, calls
 *     crnet__ring_wake_reader and signals the consumer when it returns true;
 *   - the same for space: crnet__ring_writer_sleep before a producer blocks
 *     on a full ring, crnet__ring_wake_writer by the consumer after every
 *     read that freed something.
 * Wake-ups may be spurious (a signal sent for a sleep that was called off);
 * a side that wakes just tries again. shm.c gives the argument why none is
 * lost.
 *
 * Threads: a ring has one producer and one consumer, each using its own
 * handle from one thread at a time; nothing here blocks or allocates after
 * create and attach.
 */
#ifndef CRNET_SHM_H
#define CRNET_SHM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "crnet.h"

#define CRNET__SHM_MAGIC "CRNS"
#define CRNET__SHM_VERSION 3u
#define CRNET__SHM_RING_MIN (4u << 10)
#define CRNET__SHM_RING_MAX (64u << 20)
/* The header page: header and both rings' control, so that each ring's data
 * starts page-aligned. */
#define CRNET__SHM_HEADER_BYTES 4096u
#define CRNET__SHM_WHY_BYTES 128
/* What crnet__ring_read and crnet__ring_write return for a corrupt ring. No
 * count can be this large: a call moves at most R bytes. */
#define CRNET__RING_CORRUPT ((size_t)-1)

/* One ring's control in the segment. The positions sit on cache lines of
 * their own so that the producer's stores of head and the consumer's
 * stores of tail do not keep stealing one line from each other. */
typedef struct crnet__ring_ctl {
  alignas(64) _Atomic uint64_t head;
  alignas(64) _Atomic uint64_t tail;
  alignas(64) _Atomic uint32_t reader_sleeps;
  _Atomic uint32_t writer_sleeps;
  _Atomic uint64_t remote_done;
  _Atomic uint64_t remote_progress;
} crnet__ring_ctl;

/* The start of the segment. The fields are atomics, read with relaxed
 * loads, only because the peer may write them while we read: a plain read
 * would be a data race the compiler may assume away. */
typedef struct crnet__shm_header {
  _Atomic uint32_t magic; /* the bytes of CRNET__SHM_MAGIC */
  _Atomic uint32_t version;
  _Atomic uint32_t ring_bytes;
  _Atomic uint32_t fences; /* CRNET__SHM_FENCE_* bits, each side its own */
  _Atomic uint64_t cookie;
  crnet__ring_ctl ring[2];
} crnet__shm_header;

/* A side's handle on one ring: local memory, never shared. size and the
 * pointers are fixed when the segment is mapped; pos is this side's own
 * position (head for the producer, tail for the consumer), authoritative
 * here and only copied to the segment. */
typedef struct crnet__ring {
  crnet__ring_ctl *ctl;
  uint8_t *data;
  uint64_t size; /* R, a power of two */
  uint64_t pos;
  /* The peer's position as this side last loaded it (the producer's view
   * of tail, the consumer's of head). Positions only grow, so what was
   * free or readable then still is: a side loads the peer's line, which the
   * peer keeps writing, only when that is not enough for the request. */
  uint64_t seen;
  bool corrupt; /* the peer's position was out of range once: refused */
  /* Asymmetric fences (below): this process had them when the segment was
   * made or attached, the peer's bit in the header, and whether this side
   * saw it (it never goes away). */
  bool fence_self;
  bool light;
  uint32_t peer_fence;
  const _Atomic uint32_t *fences;
} crnet__ring;

/* A piece of a gather list for crnet__ring_write. The same layout as
 * crnet__iov of link.h, which is not included here because it brings
 * libuv. */
typedef struct crnet__ring_iov {
  const void *base;
  uint64_t len;
} crnet__ring_iov;

/* A segment as one side sees it. All fields may be read; base is NULL when
 * nothing is open (a zeroed struct, or after close or a failed create or
 * attach). */
typedef struct crnet__shm {
  crnet__shm_header *base; /* the mapping */
  size_t map_bytes;
  int fd;              /* the memfd: the creator sends it to the peer */
  uint32_t ring_bytes; /* R */
  crnet__ring tx;      /* the ring this side writes */
  crnet__ring rx;      /* the ring this side reads */
  crnet__board_side *board_out;   /* the board side this side writes */
  crnet__board_side *board_in;    /* the peer's */
  char why[CRNET__SHM_WHY_BYTES]; /* why create or attach failed */
} crnet__shm;

/* Asymmetric fences. The sleep protocol of shm.c (a Dekker pattern) needs
 * a full fence between a side's store and its load on both sides: the
 * writer's store of head and its look at reader_sleeps, the reader's
 * announcement and its look at head. On x86 that made every write's store
 * of head an xchg, which waits for the line the spinning reader holds: 15 %
 * of the cycles of an 8-byte ping-pong (perf). A process that can make the
 * kernel fence every CPU running it (membarrier's GLOBAL_EXPEDITED, which
 * the process registers for) lets its peer leave the fence out of the hot
 * path: that side stores head, tail and remote_done with release only, and
 * the side going to sleep calls membarrier between its announcement and
 * its look, which puts a full fence into the writer wherever it runs (a
 * system call on a path that is about to sleep anyway).
 *
 * Each side sets its bit in the header's fences word when its process has
 * them (crnet__shm_fences_enable succeeded before the segment was made or
 * attached); a side stores without the fence only once it sees the peer's
 * bit, and a side whose process has them always fences that way before it
 * sleeps, whatever it saw. A peer that lies about its bit only ever delays
 * its own wake-ups. */
#define CRNET__SHM_FENCE_CREATOR 1u
#define CRNET__SHM_FENCE_ATTACHER 2u

/* Registers this process for membarrier's GLOBAL_EXPEDITED, once; true if
 * the kernel has it (segments made or attached from then on set their
 * bit). Later calls return the first answer; a child of fork, which is not
 * registered, asks the kernel again. */
bool crnet__shm_fences_enable(void);

/* The fence of a side about to sleep: membarrier when this process has
 * asymmetric fences, else nothing (its seq_cst operations are enough).
 * False if the system call failed: the caller must not sleep then. */
bool crnet__shm_sleep_fence(void);

/* Whether this side of s may store without a full fence (both bits set). */
bool crnet__shm_light(crnet__shm *s);

/* Creates a sealed segment with two rings of ring_bytes each and the given
 * cookie, mapped read/write, both rings empty; this side writes ring 0.
 * *s is filled in whatever it held (so it must not hold an open segment).
 * 0; CRNET_EINVAL if ring_bytes is not a power of two from
 * CRNET__SHM_RING_MIN to CRNET__SHM_RING_MAX; CRNET_ENOMEM or CRNET_EIO if
 * a system call fails. On failure nothing is left open and s->why says
 * what went wrong. */
CRNET_NODISCARD int crnet__shm_create(crnet__shm *s, uint32_t ring_bytes,
                                      uint64_t cookie);

/* Attaches to the segment behind fd, a descriptor the creator sent, which
 * must carry `cookie`; this side writes ring 1. *s is filled in as by
 * create. The segment takes fd over whatever the outcome: it is closed by
 * crnet__shm_close, or at once when attach fails (so a caller never has to
 * close it). 0; CRNET_EINVAL for a negative fd (nothing is closed);
 * CRNET_EAUTH for a well-formed segment with another cookie; CRNET_EIO for
 * anything that is not a well-formed segment (no memfd, seals missing,
 * wrong size, magic, version or ring size); CRNET_ENOMEM if it cannot be
 * mapped for want of memory. On failure nothing is left open and s->why
 * says why. */
CRNET_NODISCARD int crnet__shm_attach(crnet__shm *s, int fd, uint64_t cookie);

/* Unmaps and closes. Idempotent; does nothing to a zeroed struct. */
void crnet__shm_close(crnet__shm *s);

/* The ring this side writes and the one it reads. */
crnet__ring *crnet__shm_tx(crnet__shm *s);
crnet__ring *crnet__shm_rx(crnet__shm *s);

/* Makes r a handle on the ring with control ctl and size bytes of data
 * (a power of two) at data, at position 0. shm.c makes every handle of a
 * segment this way; tests use it to put a producer and a consumer in two
 * threads over one mapping. */
void crnet__ring_init(crnet__ring *r, crnet__ring_ctl *ctl, uint8_t *data,
                      uint64_t size);

/* Producer. Copies as many bytes as fit from the gather list
 * iov[0..niov), starting `skip` bytes into it (the part of a frame an
 * earlier call wrote), and publishes them. Returns the count (0 when the
 * ring is full or nothing is left past skip), or CRNET__RING_CORRUPT. */
size_t crnet__ring_write(crnet__ring *r, const crnet__ring_iov *iov,
                         uint32_t niov, uint64_t skip);

/* Consumer. Copies up to len readable bytes into buf and frees their space.
 * Returns the count (0 when the ring is empty), or CRNET__RING_CORRUPT. */
size_t crnet__ring_read(crnet__ring *r, void *buf, size_t len);

/* Bytes the consumer could read now, and bytes the producer could write
 * now, each on its own side's handle (a fresh load of the peer's
 * position). 0 for a corrupt ring, or one whose peer position is out of
 * range (the next read or write that needs more than the last good
 * position promised reports that). */
uint64_t crnet__ring_readable(crnet__ring *r);
uint64_t crnet__ring_writable(crnet__ring *r);

/* Whether the producer can write `need` bytes now: from the tail it last
 * loaded when that shows enough room, else as crnet__ring_writable. The
 * call for a writer's hot path: it leaves the consumer's line alone. */
bool crnet__ring_has_room(crnet__ring *r, uint64_t need);

/* Consumer, about to block on an empty ring: announces the sleep. True
 * means block until signalled; false means data came (or the ring is
 * corrupt) meanwhile, the announcement is withdrawn, read again. */
bool crnet__ring_reader_sleep(crnet__ring *r);
/* Producer, after a write that wrote something: true when the consumer
 * announced a sleep and must be signalled (the announcement is consumed,
 * so one signal answers it). */
bool crnet__ring_wake_reader(crnet__ring *r);
/* The same for a producer blocking on a full ring, and the consumer that
 * frees space. */
bool crnet__ring_writer_sleep(crnet__ring *r);
/* The same for a producer that needs `need` bytes of room at once (a
 * record's header and what must come with it): true means block until
 * signalled, false that the room is there (or the ring is corrupt). */
bool crnet__ring_writer_sleep_room(crnet__ring *r, uint64_t need);
bool crnet__ring_wake_writer(crnet__ring *r);
/* Single copy. A layer above may pass some bytes not through the ring but
 * as the producer's address, for the consumer to copy out of the
 * producer's memory itself (process_vm_readv); the producer must then keep
 * that memory until the consumer says it is done. remote_done is that
 * word: a count the consumer only raises (crnet__ring_remote_done_set,
 * then crnet__ring_wake_writer), and the producer reads
 * (crnet__ring_remote_done, which the caller must check against what it
 * has handed over: the peer may write anything). A producer that waits
 * for it to reach `mark` announces that with
 * crnet__ring_writer_sleep_remote, which returns false when it has. */
void crnet__ring_remote_done_set(crnet__ring *r, uint64_t v);
uint64_t crnet__ring_remote_done(const crnet__ring *r);
/* remote_progress: raised by the consumer after every piece it copies, so
 * that a producer polling for remote_done sees the copy move (its wait
 * takes that as progress and keeps polling, instead of sleeping through a
 * long copy and paying a wake-up). Only a hint: nothing is freed by it,
 * and whatever the peer writes there costs at most some polling. */
void crnet__ring_remote_progress_set(crnet__ring *r, uint64_t v);
uint64_t crnet__ring_remote_progress(const crnet__ring *r);
bool crnet__ring_writer_sleep_remote(crnet__ring *r, uint64_t mark);

/* The same in two halves, for a process that announces sleeps on several
 * rings before one fence (link_shm.c): crnet__ring_announce stores the flag
 * (false for a corrupt ring: nothing announced); after every ring's
 * announcement the caller makes crnet__shm_sleep_fence, then looks at each
 * with crnet__ring_announced_look, which says what the one-piece call
 * would have (true: block; false: withdrawn, go on). arg is `need` for
 * ROOM and `mark` for REMOTE. */
typedef enum crnet__ring_sleep {
  CRNET__RING_SLEEP_READ,   /* crnet__ring_reader_sleep */
  CRNET__RING_SLEEP_ROOM,   /* crnet__ring_writer_sleep_room */
  CRNET__RING_SLEEP_REMOTE, /* crnet__ring_writer_sleep_remote */
} crnet__ring_sleep;
bool crnet__ring_announce(crnet__ring *r, crnet__ring_sleep what);
bool crnet__ring_announced_look(crnet__ring *r, crnet__ring_sleep what,
                                uint64_t arg);

/* Withdraw a sleep announced (the side woke for another reason and polls
 * again). A signal already on its way is then spurious, which is fine. */
void crnet__ring_reader_awake(crnet__ring *r);
void crnet__ring_writer_awake(crnet__ring *r);

#endif
