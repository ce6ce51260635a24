/* The shared-memory segment and its byte rings. See shm.h for the layout,
 * the contract and what a hostile peer can and cannot do.
 *
 * Expected workload: one segment per same-host link, created or attached
 * once; then reads and writes of a frame or part of one at a time, and a
 * sleep announcement whenever a side runs out of data or space.
 *
 * Memory ordering.
 *
 * Data. The producer copies bytes into the ring, then stores head (a
 * release store, at least); the consumer loads head with acquire, then
 * copies them out. So every byte below the head the consumer saw was
 * written before it reads it. The mirror image frees space: the consumer
 * copies out, then stores tail; the producer loads tail with acquire before
 * it copies in, so it never overwrites a byte the consumer is still
 * reading. Each side stores only its own position and keeps it locally, so
 * no read-modify-write is needed on the positions.
 *
 * Sleep. A consumer that blocks must not miss data published just as it
 * decides to block, and a producer must not signal when nobody sleeps (a
 * system call per write would cost more than the copy). Both sides follow
 * the pattern of Dekker's mutual exclusion: each stores its own variable,
 * then loads the other's, all of it seq_cst:
 *
 *   consumer (reader_sleep)          producer (write, then wake_reader)
 *   store reader_sleeps = 1          store head = h
 *   load head                        load reader_sleeps; if 1,
 *                                      exchange(reader_sleeps, 0)
 *
 * The seq_cst operations of all threads fall into one total order S that
 * agrees with each thread's program order, and a seq_cst load sees the
 * last store to its object before it in S (C11 7.17.3; every store to
 * these four variables is seq_cst). If the consumer's load of head comes
 * before the producer's store of head in S, the consumer's store of the
 * flag comes before it too, and so before the producer's load of the flag,
 * which sees 1: the producer signals. Otherwise the consumer's load sees h
 * or a later head, and if it has not read up to h it finds data and does
 * not sleep. Either way no data is left unnoticed with the consumer
 * asleep. Acquire and release alone would not do: nothing in them keeps a
 * load from going ahead of an earlier store to another location (on x86
 * the store waits in the store buffer while the load runs), and with that
 * on both sides at once the consumer reads the old head, the producer the
 * old flag, and each goes on as if the other had not acted: the consumer
 * sleeps on data nobody will signal.
 *
 * That is why head and tail are stored seq_cst rather than release: it
 * puts the stores in S. The usual alternative, a release store and a
 * seq_cst fence before the producer's load, costs as much or more (x86:
 * an xchg against a mov and an mfence; ARMv8: an stlr either way, plus a
 * dmb for the fence), and ThreadSanitizer ignores fences (GCC refuses
 * atomic_thread_fence under -fsanitize=thread, an error with -Werror),
 * while it follows seq_cst operations. The loads for data stay acquire:
 * only the sleep path needs S, and it makes its own seq_cst loads.
 *
 * The consumer that finds data after all withdraws its flag; the
 * producer's exchange may already have taken it, and the signal it sends
 * then wakes nobody who needs it (a spurious wake-up, which the protocol
 * allows). The exchange consumes the flag, so one announcement gets at
 * most one signal. Space works the same way with writer_sleeps, tail, and
 * the roles swapped.
 *
 * Where both processes have asymmetric fences (shm.h), the fence leaves
 * the hot side: head, tail and remote_done are stored with release, and
 * the side about to sleep calls membarrier after its announcement. The
 * argument is Dekker's again with the kernel's fence in the writer: the
 * membarrier orders the sleeper's store before everything the writer does
 * after the interrupt, and everything the writer did before it (its store
 * of head included, when that came first) before the sleeper's load.
 * Either the writer's look at the flag comes after the fence and sees it,
 * or its store of head came before the fence and the sleeper's load sees
 * it.
 *
 * Validation. Each load of the peer's position is checked against our own
 * (0 <= head - tail <= R, unsigned) before any length is computed from it;
 * a handle that ever saw an impossible position is corrupt and refuses
 * every later call. Offsets are always masked with the local R - 1 and
 * lengths bounded by the local R. The header is read once, at attach,
 * into local memory.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "crnet.h"

/* The layout of shm.h, checked where it is defined in code. */
_Static_assert(offsetof(crnet__shm_header, magic) == 0, "magic at 0");
_Static_assert(offsetof(crnet__shm_header, version) == 4, "version at 4");
_Static_assert(offsetof(crnet__shm_header, ring_bytes) == 8, "R at 8");
_Static_assert(offsetof(crnet__shm_header, cookie) == 16, "cookie at 16");
_Static_assert(offsetof(crnet__shm_header, ring) == 64, "ring 0 at 64");
_Static_assert(sizeof(crnet__ring_ctl) == 192, "192 bytes of control");
_Static_assert(offsetof(crnet__ring_ctl, tail) == 64, "tail at +64");
_Static_assert(offsetof(crnet__ring_ctl, reader_sleeps) == 128,
               "reader_sleeps at +128");
_Static_assert(offsetof(crnet__ring_ctl, writer_sleeps) == 132,
               "writer_sleeps at +132");
_Static_assert(offsetof(crnet__ring_ctl, remote_done) == 136,
               "remote_done at +136");
_Static_assert(offsetof(crnet__ring_ctl, remote_progress) == 144,
               "remote_progress at +144");
_Static_assert(sizeof(crnet__ring_ctl) == 192, "a ring's control: 192 bytes");
_Static_assert(sizeof(crnet__shm_header) <= CRNET__SHM_HEADER_BYTES,
               "the header fits its page");
/* The other process sees these atomics only if they are lock-free: a lock
 * would live in this process alone. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2 &&
                   ATOMIC_INT_LOCK_FREE == 2,
               "lock-free atomics across processes");

/* The bits attach insists on. F_SEAL_SEAL matters less than the other two
 * (adding a seal later cannot hurt a mapping that exists), but with it the
 * segment's rules are fixed for good, which is simpler to reason about. */
#define REQUIRED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static uint32_t magic_word(void) {
  uint32_t w;
  memcpy(&w, CRNET__SHM_MAGIC, sizeof w);
  return w;
}

static bool ring_bytes_ok(uint64_t r) {
  return r >= CRNET__SHM_RING_MIN && r <= CRNET__SHM_RING_MAX &&
         (r & (r - 1)) == 0;
}

/* --- asymmetric fences (shm.h) ------------------------------------------ */

/* 0: not asked yet, 1: on, 2: off. A child of fork starts over: the
 * registration is the process's, and a child is not registered. */
static _Atomic int fences_state;
static pthread_mutex_t fences_mu = PTHREAD_MUTEX_INITIALIZER;

static int membarrier(int cmd) {
  return (int)syscall(__NR_membarrier, cmd, 0u, 0);
}

static bool fences_on(void) {
  return atomic_load_explicit(&fences_state, memory_order_relaxed) == 1;
}

static void fences_forget(void) { atomic_store(&fences_state, 0); }

bool crnet__shm_fences_enable(void) {
  static bool at_fork;
  pthread_mutex_lock(&fences_mu);
  if (atomic_load(&fences_state) == 0) {
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    bool ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
              (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) &&
              membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
    if (ok && !at_fork)
      at_fork = pthread_atfork(NULL, NULL, fences_forget) == 0;
    atomic_store(&fences_state, ok && at_fork ? 1 : 2);
  }
  pthread_mutex_unlock(&fences_mu);
  return fences_on();
}

bool crnet__shm_sleep_fence(void) {
  if (!fences_on())
    return true;
  int rc;
  do
    rc = membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  while (rc != 0 && errno == EINTR);
  return rc == 0;
}

/* Whether r's side may store its position with release only. */
static bool light(crnet__ring *r) {
  if (r->light)
    return true;
  if (!r->fence_self || r->fences == NULL)
    return false;
  r->light = (atomic_load_explicit(r->fences, memory_order_relaxed) &
              r->peer_fence) != 0;
  return r->light;
}

bool crnet__shm_light(crnet__shm *s) { return light(&s->tx); }

/* The position stores of the sleep protocol: seq_cst, or release where the
 * peer fences before it sleeps. */
static void store_position(crnet__ring *r, _Atomic uint64_t *at, uint64_t v) {
  if (light(r))
    atomic_store_explicit(at, v, memory_order_release);
  else
    atomic_store_explicit(at, v, memory_order_seq_cst);
}

/* A side's announcement of a sleep, then the fence its look needs unless
 * the caller makes it (`fenced`: crnet__ring_announce). False (the
 * announcement withdrawn) if the fence failed. */
static bool announce(crnet__ring *r, _Atomic uint32_t *flag, bool fenced) {
  atomic_store_explicit(flag, 1, memory_order_seq_cst);
  if (fenced || !r->fence_self || crnet__shm_sleep_fence())
    return true;
  atomic_store_explicit(flag, 0, memory_order_seq_cst);
  return false;
}

/* --- the segment ---------------------------------------------------------- */

static size_t segment_bytes(uint32_t ring_bytes) {
  return (size_t)CRNET__SHM_HEADER_BYTES + 2 * (size_t)ring_bytes +
         CRNET__BOARD_BYTES;
}

static int refuse(crnet__shm *s, int rc, const char *why) {
  snprintf(s->why, sizeof s->why, "%s", why);
  return rc;
}

/* A system call failed: names it with errno's text. */
static int sys_fail(crnet__shm *s, const char *call) {
  int e = errno;
  snprintf(s->why, sizeof s->why, "%s: %s", call, strerror(e));
  return e == ENOMEM ? CRNET_ENOMEM : CRNET_EIO;
}

/* Sets up the handles once the mapping is good. The creator writes ring 0
 * and reads ring 1; the attacher the other way round. */
/* The segment at h (bytes long, on fd) becomes s's, with its rings: the
 * creator writes ring 0, the attacher ring 1. */
static void take_segment(crnet__shm *s, crnet__shm_header *h, size_t bytes,
                         int fd, uint32_t ring_bytes, bool creator) {
  s->base = h;
  s->map_bytes = bytes;
  s->fd = fd;
  s->ring_bytes = ring_bytes;
  uint8_t *data0 = (uint8_t *)s->base + CRNET__SHM_HEADER_BYTES;
  uint8_t *data1 = data0 + s->ring_bytes;
  crnet__ring *r0 = creator ? &s->tx : &s->rx;
  crnet__ring *r1 = creator ? &s->rx : &s->tx;
  crnet__ring_init(r0, &s->base->ring[0], data0, s->ring_bytes);
  crnet__ring_init(r1, &s->base->ring[1], data1, s->ring_bytes);
  /* Whether this process fences for its sleeps is fixed here, for the
   * segment's life, and said in the header. */
  bool fence_self = fences_on();
  if (fence_self)
    atomic_fetch_or(&h->fences, creator ? CRNET__SHM_FENCE_CREATOR
                                        : CRNET__SHM_FENCE_ATTACHER);
  for (int i = 0; i < 2; i++) {
    crnet__ring *r = i == 0 ? r0 : r1;
    r->fence_self = fence_self;
    r->fences = &h->fences;
    r->peer_fence =
        creator ? CRNET__SHM_FENCE_ATTACHER : CRNET__SHM_FENCE_CREATOR;
  }
  crnet__board_side *sides = (crnet__board_side *)(data1 + s->ring_bytes);
  s->board_out = creator ? &sides[0] : &sides[1];
  s->board_in = creator ? &sides[1] : &sides[0];
}

int crnet__shm_create(crnet__shm *s, uint32_t ring_bytes, uint64_t cookie) {
  memset(s, 0, sizeof *s);
  if (!ring_bytes_ok(ring_bytes)) {
    snprintf(s->why, sizeof s->why,
             "ring size %u is not a power of two from %u to %u", ring_bytes,
             CRNET__SHM_RING_MIN, CRNET__SHM_RING_MAX);
    return CRNET_EINVAL;
  }
  size_t bytes = segment_bytes(ring_bytes);
  int rc;
  int fd = memfd_create("crnet-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return sys_fail(s, "memfd_create");
  /* The new file's bytes are zero, so both rings start empty with no sleep
   * announced. Sealing before mapping means no mapping of ours ever exists
   * while the size could still change. */
  if (ftruncate(fd, (off_t)bytes) != 0) {
    rc = sys_fail(s, "ftruncate");
    goto fail;
  }
  if (fcntl(fd, F_ADD_SEALS, REQUIRED_SEALS) != 0) {
    rc = sys_fail(s, "F_ADD_SEALS");
    goto fail;
  }
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = sys_fail(s, "mmap");
    goto fail;
  }
  /* Relaxed stores suffice: the peer cannot see the segment before it
   * receives the descriptor, and sending it is a system call that orders
   * everything before it. */
  crnet__shm_header *h = base;
  atomic_store_explicit(&h->magic, magic_word(), memory_order_relaxed);
  atomic_store_explicit(&h->version, CRNET__SHM_VERSION, memory_order_relaxed);
  atomic_store_explicit(&h->ring_bytes, ring_bytes, memory_order_relaxed);
  atomic_store_explicit(&h->cookie, cookie, memory_order_relaxed);
  take_segment(s, h, bytes, fd, ring_bytes, true);
  return 0;

fail:
  close(fd);
  return rc;
}

int crnet__shm_attach(crnet__shm *s, int fd, uint64_t cookie) {
  memset(s, 0, sizeof *s);
  if (fd < 0)
    return refuse(s, CRNET_EINVAL, "not a file descriptor");
  void *base = MAP_FAILED;
  size_t bytes = 0;
  int rc;
  /* Seals first: once they are known to be set, the size fstat reports
   * next can never change, so the mapping below stays whole. */
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    rc = errno == EINVAL ? refuse(s, CRNET_EIO, "not a sealable memfd")
                         : sys_fail(s, "F_GET_SEALS");
    goto fail;
  }
  if ((seals & REQUIRED_SEALS) != REQUIRED_SEALS) {
    rc = refuse(s, CRNET_EIO,
                "memfd not sealed against shrinking, growing and resealing");
    goto fail;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    rc = sys_fail(s, "fstat");
    goto fail;
  }
  /* Bounds on the size before mapping it, so a peer cannot have us map
   * something huge; the exact size is checked against the header below. */
  if (!S_ISREG(st.st_mode) ||
      st.st_size < (off_t)segment_bytes(CRNET__SHM_RING_MIN) ||
      st.st_size > (off_t)segment_bytes(CRNET__SHM_RING_MAX)) {
    rc = refuse(s, CRNET_EIO, "not the size of any segment");
    goto fail;
  }
  bytes = (size_t)st.st_size;
  base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = sys_fail(s, "mmap");
    goto fail;
  }
  /* Each field is loaded once; the checks and everything after use these
   * copies, whatever the peer writes into the header from now on. */
  crnet__shm_header *h = base;
  uint32_t magic = atomic_load_explicit(&h->magic, memory_order_relaxed);
  uint32_t version = atomic_load_explicit(&h->version, memory_order_relaxed);
  uint32_t ring_bytes =
      atomic_load_explicit(&h->ring_bytes, memory_order_relaxed);
  uint64_t their_cookie =
      atomic_load_explicit(&h->cookie, memory_order_relaxed);
  if (magic != magic_word()) {
    rc = refuse(s, CRNET_EIO, "no segment magic");
    goto fail;
  }
  if (version != CRNET__SHM_VERSION) {
    rc = refuse(s, CRNET_EIO, "unknown segment version");
    goto fail;
  }
  if (!ring_bytes_ok(ring_bytes)) {
    rc = refuse(s, CRNET_EIO, "ring size out of range");
    goto fail;
  }
  if (bytes != segment_bytes(ring_bytes)) {
    rc = refuse(s, CRNET_EIO, "segment size does not match its ring size");
    goto fail;
  }
  if (their_cookie != cookie) {
    rc = refuse(s, CRNET_EAUTH, "segment cookie does not match");
    goto fail;
  }
  take_segment(s, h, bytes, fd, ring_bytes, false);
  return 0;

fail:
  if (base != MAP_FAILED)
    munmap(base, bytes);
  close(fd);
  return rc;
}

void crnet__shm_close(crnet__shm *s) {
  if (s->base == NULL)
    return;
  munmap(s->base, s->map_bytes);
  close(s->fd);
  memset(s, 0, sizeof *s);
}

crnet__ring *crnet__shm_tx(crnet__shm *s) { return &s->tx; }

crnet__ring *crnet__shm_rx(crnet__shm *s) { return &s->rx; }

void crnet__ring_init(crnet__ring *r, crnet__ring_ctl *ctl, uint8_t *data,
                      uint64_t size) {
  r->ctl = ctl;
  r->data = data;
  r->size = size;
  r->pos = 0;
  r->seen = 0;
  r->corrupt = false;
  r->fence_self = false;
  r->light = false;
  r->peer_fence = 0;
  r->fences = NULL;
}

/* head - tail within 0..R: anything else is a peer that lies. Unsigned
 * arithmetic makes a head behind the tail a huge difference, refused too. */
static bool in_range(const crnet__ring *r, uint64_t head, uint64_t tail) {
  return head - tail <= r->size;
}

/* Copies n <= R bytes between the ring at stream position pos and flat
 * memory, in at most two pieces around the end of the data. */
static void copy_in(crnet__ring *r, uint64_t pos, const uint8_t *src,
                    uint64_t n) {
  uint64_t off = pos & (r->size - 1);
  uint64_t first = n < r->size - off ? n : r->size - off;
  memcpy(r->data + off, src, first);
  memcpy(r->data, src + first, n - first);
}

static void copy_out(const crnet__ring *r, uint64_t pos, uint8_t *dst,
                     uint64_t n) {
  uint64_t off = pos & (r->size - 1);
  uint64_t first = n < r->size - off ? n : r->size - off;
  memcpy(dst, r->data + off, first);
  memcpy(dst + first, r->data, n - first);
}

/* Loads the peer's position (tail for the producer, head for the
 * consumer) into r->seen. False if it is out of range: r->seen is left as
 * it was, and the handle becomes corrupt if `mark` (a read or write; the
 * looks of readable and writable only look). */
static bool load_seen(crnet__ring *r, bool producer, bool mark) {
  uint64_t at;
  bool ok;
  if (producer) {
    at = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
    ok = in_range(r, r->pos, at);
  } else {
    at = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
    ok = in_range(r, at, r->pos);
  }
  if (ok)
    r->seen = at;
  else if (mark)
    r->corrupt = true;
  return ok;
}

/* What r->seen promises: room for the producer, bytes for the consumer.
 * Within 0..R, since seen was in range when loaded and pos moves only
 * within what it promised; nothing if not (a handle whose pos was set by
 * hand, as tests do). */
static uint64_t room_seen(const crnet__ring *r) {
  return in_range(r, r->pos, r->seen) ? r->size - (r->pos - r->seen) : 0;
}

static uint64_t bytes_seen(const crnet__ring *r) {
  return in_range(r, r->seen, r->pos) ? r->seen - r->pos : 0;
}

size_t crnet__ring_write(crnet__ring *r, const crnet__ring_iov *iov,
                         uint32_t niov, uint64_t skip) {
  uint64_t want = 0;
  if (r->corrupt)
    return CRNET__RING_CORRUPT;
  for (uint32_t i = 0; i < niov; i++)
    want += iov[i].len;
  want = want > skip ? want - skip : 0;
  if ((want == 0 || room_seen(r) < want) && !load_seen(r, true, true))
    return CRNET__RING_CORRUPT;
  uint64_t room = room_seen(r);
  uint64_t done = 0;
  for (uint32_t i = 0; i < niov && done < room; i++) {
    if (skip >= iov[i].len) {
      skip -= iov[i].len;
      continue;
    }
    uint64_t n = iov[i].len - skip;
    if (n > room - done)
      n = room - done;
    copy_in(r, r->pos + done, (const uint8_t *)iov[i].base + skip, n);
    skip = 0;
    done += n;
  }
  if (done > 0) {
    /* seq_cst, not only release, unless the peer fences before it sleeps:
     * the sleep protocol needs this store in the total order (see the top
     * of the file). */
    r->pos += done;
    store_position(r, &r->ctl->head, r->pos);
  }
  return (size_t)done;
}

size_t crnet__ring_read(crnet__ring *r, void *buf, size_t len) {
  if (r->corrupt)
    return CRNET__RING_CORRUPT;
  if ((len == 0 || bytes_seen(r) < len) && !load_seen(r, false, true))
    return CRNET__RING_CORRUPT;
  uint64_t n = bytes_seen(r);
  if (n > len)
    n = len;
  if (n > 0) {
    copy_out(r, r->pos, buf, n);
    r->pos += n;
    /* For the sleep protocol, as head in crnet__ring_write. */
    store_position(r, &r->ctl->tail, r->pos);
  }
  return (size_t)n;
}

uint64_t crnet__ring_readable(crnet__ring *r) {
  if (r->corrupt || !load_seen(r, false, false))
    return 0;
  return bytes_seen(r);
}

uint64_t crnet__ring_writable(crnet__ring *r) {
  if (r->corrupt || !load_seen(r, true, false))
    return 0;
  return room_seen(r);
}

bool crnet__ring_has_room(crnet__ring *r, uint64_t need) {
  if (r->corrupt)
    return false;
  return room_seen(r) >= need || crnet__ring_writable(r) >= need;
}

static bool reader_look(crnet__ring *r);

bool crnet__ring_reader_sleep(crnet__ring *r) {
  if (r->corrupt || !announce(r, &r->ctl->reader_sleeps, false))
    return false;
  return reader_look(r);
}

/* After the announcement (and the fence): whether the ring is still
 * empty; if not, the announcement is withdrawn. */
static bool reader_look(crnet__ring *r) {
  uint64_t head = atomic_load_explicit(&r->ctl->head, memory_order_seq_cst);
  if (head == r->pos)
    return true;
  /* Data came, or the peer's head is impossible: either way the caller's
   * next read says which, so it must not block first. */
  atomic_store_explicit(&r->ctl->reader_sleeps, 0, memory_order_seq_cst);
  if (!in_range(r, head, r->pos))
    r->corrupt = true;
  return false;
}

/* Whether a sleep was announced in *flag, taking the announcement. A load
 * first, because when nobody sleeps (nearly always) it leaves the cache
 * line of the flags shared instead of pulling it over to write it on every
 * call; the exchange then takes the flag only if it is set. */
static bool take_sleeper(_Atomic uint32_t *flag) {
  if (atomic_load_explicit(flag, memory_order_seq_cst) == 0)
    return false;
  return atomic_exchange_explicit(flag, 0, memory_order_seq_cst) != 0;
}

bool crnet__ring_wake_reader(crnet__ring *r) {
  return take_sleeper(&r->ctl->reader_sleeps);
}

bool crnet__ring_writer_sleep(crnet__ring *r) {
  return crnet__ring_writer_sleep_room(r, 1);
}

static bool room_look(crnet__ring *r, uint64_t need);

bool crnet__ring_writer_sleep_room(crnet__ring *r, uint64_t need) {
  if (r->corrupt || !announce(r, &r->ctl->writer_sleeps, false))
    return false;
  return room_look(r, need);
}

static bool room_look(crnet__ring *r, uint64_t need) {
  uint64_t tail = atomic_load_explicit(&r->ctl->tail, memory_order_seq_cst);
  if (!in_range(r, r->pos, tail)) {
    atomic_store_explicit(&r->ctl->writer_sleeps, 0, memory_order_seq_cst);
    r->corrupt = true;
    return false;
  }
  if (r->size - (r->pos - tail) < need)
    return true;
  atomic_store_explicit(&r->ctl->writer_sleeps, 0, memory_order_seq_cst);
  return false;
}

bool crnet__ring_wake_writer(crnet__ring *r) {
  return take_sleeper(&r->ctl->writer_sleeps);
}

void crnet__ring_reader_awake(crnet__ring *r) {
  atomic_store_explicit(&r->ctl->reader_sleeps, 0, memory_order_seq_cst);
}

void crnet__ring_writer_awake(crnet__ring *r) {
  atomic_store_explicit(&r->ctl->writer_sleeps, 0, memory_order_seq_cst);
}

void crnet__ring_remote_done_set(crnet__ring *r, uint64_t v) {
  /* The same store-then-load pattern as head against writer_sleeps (see
   * the top of the file). */
  store_position(r, &r->ctl->remote_done, v);
}

uint64_t crnet__ring_remote_done(const crnet__ring *r) {
  return atomic_load_explicit(&r->ctl->remote_done, memory_order_seq_cst);
}

void crnet__ring_remote_progress_set(crnet__ring *r, uint64_t v) {
  atomic_store_explicit(&r->ctl->remote_progress, v, memory_order_relaxed);
}

uint64_t crnet__ring_remote_progress(const crnet__ring *r) {
  return atomic_load_explicit(&r->ctl->remote_progress, memory_order_relaxed);
}

static bool remote_look(crnet__ring *r, uint64_t mark);

bool crnet__ring_writer_sleep_remote(crnet__ring *r, uint64_t mark) {
  if (r->corrupt || !announce(r, &r->ctl->writer_sleeps, false))
    return false;
  return remote_look(r, mark);
}

static bool remote_look(crnet__ring *r, uint64_t mark) {
  if (atomic_load_explicit(&r->ctl->remote_done, memory_order_seq_cst) <
      mark)
    return true;
  atomic_store_explicit(&r->ctl->writer_sleeps, 0, memory_order_seq_cst);
  return false;
}

/* --- sleeps announced together -------------------------------------------- */

bool crnet__ring_announce(crnet__ring *r, crnet__ring_sleep what) {
  if (r->corrupt)
    return false;
  announce(r,
           what == CRNET__RING_SLEEP_READ ? &r->ctl->reader_sleeps
                                          : &r->ctl->writer_sleeps,
           true);
  return true;
}

bool crnet__ring_announced_look(crnet__ring *r, crnet__ring_sleep what,
                                uint64_t arg) {
  switch (what) {
  case CRNET__RING_SLEEP_READ:
    return reader_look(r);
  case CRNET__RING_SLEEP_ROOM:
    return room_look(r, arg);
  case CRNET__RING_SLEEP_REMOTE:
    return remote_look(r, arg);
  }
  return false;
}
