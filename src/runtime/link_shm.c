/* A link's same-host carriage: set-up, the switch, and the stream calls
 * over the rings. See link_shm.h for the protocol and link.h for the link. */
#include "link_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "crnet.h"
#include "frame.h"
#include "link.h"
#include "link_internal.h"
#include "log.h"
#include "shm.h"

/* SHM_OFFER's payload: cookie u64, R u32, the creator's pid u32, the
 * address of its probe u64 (see "Single copy"), then the socket's abstract
 * name (without its leading NUL). SHM_SWITCH's: u8 whether the receiver
 * may hand this side large pieces by address, u64 the sender's probe
 * address (0 from the creator). */
#define OFFER_HEAD 24
#define NAME_BYTES 48
#define SWITCH_BYTES 9

/* Single copy. A ring carries records: an 8-byte header, the length with
 * REC_REMOTE set or not, then either that many bytes (inline) or the 8-byte
 * address of that many bytes in the writer's memory, which the reader
 * copies straight into place with process_vm_readv: one copy instead of
 * two. A piece of a write of at least REMOTE_MIN bytes goes by address,
 * if the reader said it can read the writer's memory: at set-up each side
 * reads a known word of the other's (the probe: its cookie) and says so in
 * its SHM_SWITCH. The writer keeps the memory (its write does not
 * complete) until the reader's remote_done count (shm.h) has passed it.
 * The rest of the frame stream is none the wiser. */
#define REC_REMOTE ((uint64_t)1 << 63)
#define REC_LEN_MAX ((uint64_t)1 << 48)
#define REC_HEADER 8
/* From here on one copy wins at p = 2 on the 2-core VM. Below it, the
 * writer's wait for the reader's copy (its write completes only then) and
 * the system call cost more than the second copy saves: remeasured in
 * session 29 with ab_crbench against 16, 32, 64 and 128 KiB, the call
 * whose pieces just reach the minimum was always the slow one (16 KiB
 * minimum: a 16 KiB bcast 6.55 against 3.51 us inline, a 32 KiB allreduce,
 * pieces of 16 KiB, 12.7 against 7.5; 128 KiB minimum: a 128 KiB bcast
 * 18.9 against 14.6, a 256 KiB allgather 27.5 against 19.8), while a
 * 256 KiB bcast is 1.3 times faster in one copy than through the rings
 * (docs/PERFORMANCE-SHM.md, "Where one copy starts"). */
#define REMOTE_MIN ((uint64_t)256 << 10)
/* process_vm_readv at most this much at a time, so that the reader's
 * callback (and the reduction behind it) sees the bytes come in pieces. */
#define REMOTE_PIECE ((uint64_t)256 << 10)

enum phase {
  PHASE_NONE,       /* nothing offered or asked yet */
  PHASE_OFFERED,    /* creator: listening for the attacher */
  PHASE_SENT,       /* creator: descriptors sent, waiting for an answer */
  PHASE_CONNECTING, /* attacher: waiting for the descriptors */
  PHASE_LIVE,       /* the segment is mapped on both sides */
  PHASE_OFF,        /* declined or failed: TCP for good */
};

/* A write not wholly in the ring yet, or in it with its callback to run. */
typedef struct shm_write {
  struct shm_write *next;
  uv_write_t *req;
  uv_write_cb cb;
  uint64_t total, done;
  uint32_t n;
  uint32_t cur;        /* iov[cur] holds byte `done` */
  uint64_t cur_off;    /* at this offset */
  uint64_t remote_mark; /* remote_sent after its last piece by address */
  bool inline_only;     /* no piece by address (crnet__link_shm_write) */
  crnet__ring_iov iov[];
} shm_write;

struct crnet__link_shm {
  crnet__link *link;
  enum phase phase;
  bool creator;
  bool required; /* CRNET_TRANSPORT=shm: a failed set-up fails the link */
  bool two_copies; /* CRNET_SHM_SINGLE_COPY=0: never read the peer's memory */
  /* The owner's word on the peer: 0 undecided, 1 welcome, -1 refuse. */
  int policy;
  uint32_t peer_pid;
  /* An offer read before the owner's word (the peer finished joining
   * first): answered when it comes. */
  bool offer_held;
  uint8_t offer[OFFER_HEAD + NAME_BYTES];
  uint64_t offer_len;

  crnet__shm seg;
  uint64_t cookie;
  int doorbell;      /* ours: the peer signals it, our loop polls it */
  int peer_doorbell; /* the peer's: we signal it */
  int sock;          /* set-up: the creator's listener, the attacher's socket */
  char name[NAME_BYTES + 1];

  /* libuv handles, each counted in link->handles_open while open. */
  uv_poll_t sock_poll;
  bool sock_poll_open;
  uv_poll_t bell_poll;
  uv_prepare_t prepare;
  uv_check_t check;
  uv_idle_t idle;
  bool handles_open;
  bool closing;

  bool tx_on, rx_on;
  bool reading;
  uv_alloc_cb alloc_cb;
  uv_read_cb read_cb;
  int tcp_end; /* after rx switched: the TCP read's end (UV_EOF or error) */
  bool rx_announced, tx_announced;
  /* Announced in this turn's gathering (on_prepare), not looked at yet. */
  bool gate_rx;
  int gate_tx; /* a crnet__ring_sleep, or -1 */
  struct crnet__link_shm *gate_next;

  shm_write *q_head, *q_tail;       /* not wholly in the ring */
  shm_write *wait_head, *wait_tail; /* in it, the peer still copying */
  shm_write *done_head, *done_tail; /* in the ring, callback to run */
  /* Single copy, as writer: the peer reads our memory; bytes handed over
   * by address so far. As reader: what is left of the record being read,
   * and the bytes copied out of the peer's memory so far. */
  bool remote_ok;
  uint64_t remote_sent;
  uint64_t peer_probe; /* the address of the peer's cookie, in its memory */
  uint64_t in_left, rem_left, rem_addr, remote_read;
  uint64_t rem_done_len; /* the length of the record by address being read */
  uint64_t remote_copied; /* reader: bytes copied by address, piece by piece */
  uint64_t remote_progress_seen; /* writer: the peer's remote_progress */
  uint64_t queued;
  uv_shutdown_t *shutdown_req;
  uv_shutdown_cb shutdown_cb;
};

static bool pump(crnet__link_shm *s);
static void want_turn(crnet__link_shm *s);
static void close_sock(crnet__link_shm *s);
static void update_idle(crnet__link_shm *s, bool did);

/* --- the owner's word ---------------------------------------------------- */

static crnet__link_shm *shm_of(crnet__link *l) {
  if (l->shm == NULL) {
    l->shm = crnet__calloc(1, sizeof *l->shm);
    if (l->shm == NULL)
      return NULL;
    l->shm->link = l;
    l->shm->doorbell = l->shm->peer_doorbell = l->shm->sock = -1;
  }
  return l->shm;
}

bool crnet__link_shm_tx(const crnet__link *l) {
  return l->shm != NULL && l->shm->tx_on;
}

bool crnet__link_shm_rx(const crnet__link *l) {
  return l->shm != NULL && l->shm->rx_on;
}

bool crnet__link_on_shm(const crnet__link *l) {
  return l->shm != NULL && l->shm->tx_on && l->shm->rx_on;
}

static void send_decline(crnet__link *l, const char *why) {
  crnet__link_send_control(l, CRNET__FRAME_SHM_DECLINE, why, strlen(why));
}

/* The set-up is over without shared memory. A required one fails the link;
 * else the pair goes on over TCP, and the debug log says why. */
static void give_up(crnet__link_shm *s, const char *why, bool tell_peer) {
  crnet__link *l = s->link;
  char msg[sizeof l->why];
  if (s->phase == PHASE_OFF)
    return;
  s->phase = PHASE_OFF;
  /* Nothing was switched: what the set-up held goes now. */
  close_sock(s);
  crnet__shm_close(&s->seg);
  if (s->doorbell >= 0)
    close(s->doorbell);
  if (s->peer_doorbell >= 0)
    close(s->peer_doorbell);
  s->doorbell = s->peer_doorbell = -1;
  if (tell_peer)
    send_decline(l, why);
  snprintf(msg, sizeof msg, "shared memory with rank %d: %s", (int)l->peer,
           why);
  if (s->required) {
    crnet__link_fail(l, CRNET_EIO, msg);
    return;
  }
  crnet__debug("%s; the pair stays on TCP", msg);
}

static bool link_plain_ready(const crnet__link *l) {
  return l->state == CRNET__LINK_READY && !l->failed && l->tx == NULL &&
         l->rx == NULL;
}

/* --- handles ------------------------------------------------------------- */

static void on_prepare(uv_prepare_t *h);
static void on_check(uv_check_t *h);
static void on_idle(uv_idle_t *h);
static void on_bell(uv_poll_t *h, int status, int events);

/* The handles of a live carriage: the doorbell in the loop's epoll set,
 * and the loop's turns before and after it polls. Only the doorbell keeps
 * the loop alive (like a socket being read). */
static int open_handles(crnet__link_shm *s) {
  crnet__link *l = s->link;
  uv_loop_t *loop = l->tcp.loop;
  if (uv_poll_init(loop, &s->bell_poll, s->doorbell) != 0)
    return -1;
  uv_prepare_init(loop, &s->prepare);
  uv_check_init(loop, &s->check);
  uv_idle_init(loop, &s->idle);
  s->bell_poll.data = s->prepare.data = s->check.data = s->idle.data = s;
  l->handles_open += 4;
  s->handles_open = true;
  uv_poll_start(&s->bell_poll, UV_READABLE, on_bell);
  uv_prepare_start(&s->prepare, on_prepare);
  uv_check_start(&s->check, on_check);
  uv_unref((uv_handle_t *)&s->prepare);
  uv_unref((uv_handle_t *)&s->check);
  uv_unref((uv_handle_t *)&s->idle);
  return 0;
}

static void on_sock_poll(uv_poll_t *h, int status, int events);
static void handle_closed(uv_handle_t *h);

/* The set-up socket is done with: its handle and descriptor go. */
static void close_sock(crnet__link_shm *s) {
  if (s->sock_poll_open) {
    uv_close((uv_handle_t *)&s->sock_poll, handle_closed);
    s->sock_poll_open = false;
  }
  if (s->sock >= 0)
    close(s->sock);
  s->sock = -1;
}

static int watch_sock(crnet__link_shm *s) {
  crnet__link *l = s->link;
  if (uv_poll_init(l->tcp.loop, &s->sock_poll, s->sock) != 0)
    return -1;
  s->sock_poll.data = s;
  s->sock_poll_open = true;
  l->handles_open++;
  uv_poll_start(&s->sock_poll, UV_READABLE, on_sock_poll);
  return 0;
}

/* Whether fd is an eventfd: a descriptor the peer sent as a doorbell must
 * be one (we write to it and poll it). */
static bool is_eventfd(int fd) {
  char path[64], target[64];
  ssize_t n;
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  n = readlink(path, target, sizeof target - 1);
  if (n < 0)
    return false;
  target[n] = '\0';
  return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/* Rings the peer's doorbell. EAGAIN (the counter is full) means it rings
 * already. */
static void ring_bell(crnet__link_shm *s) {
  uint64_t one = 1;
  ssize_t n;
  do
    n = write(s->peer_doorbell, &one, sizeof one);
  while (n < 0 && errno == EINTR);
}

/* The abstract Unix address of `name` (no file, no leading NUL in name);
 * its length. */
static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa) {
  size_t n = strlen(name);
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path + 1, name, n);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Whether the kernel says the process at the other end of connected Unix
 * socket fd is the peer's registered pid, with our uid (its pid for the
 * debug log in *pid). */
static bool is_the_peer(const crnet__link_shm *s, int fd, int *pid) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  *pid = -1;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return false;
  *pid = (int)cred.pid;
  return (uint32_t)cred.pid == s->peer_pid && cred.uid == geteuid();
}

/* --- creator ------------------------------------------------------------- */

void crnet__link_shm_offer(crnet__link *l, uint32_t peer_pid,
                           uint32_t ring_bytes, unsigned flags) {
  crnet__link_shm *s = shm_of(l);
  uint8_t payload[OFFER_HEAD + NAME_BYTES];
  uint8_t rnd[16];
  struct sockaddr_un sa;
  socklen_t salen;
  int efd[2] = {-1, -1};
  const char *why = NULL;
  if (s == NULL || s->phase != PHASE_NONE || !link_plain_ready(l))
    return;
  s->creator = true;
  s->required = (flags & CRNET__SHM_REQUIRED) != 0;
  s->two_copies = (flags & CRNET__SHM_TWO_COPIES) != 0;
  s->policy = 1;
  s->peer_pid = peer_pid;
  randombytes_buf(&s->cookie, sizeof s->cookie);
  if (crnet__shm_create(&s->seg, ring_bytes, s->cookie) != 0) {
    give_up(s, s->seg.why, true);
    return;
  }
  efd[0] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  efd[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd[0] < 0 || efd[1] < 0) {
    why = "eventfd failed";
    goto fail;
  }
  s->doorbell = efd[0];
  s->peer_doorbell = efd[1];
  efd[0] = efd[1] = -1;
  randombytes_buf(rnd, sizeof rnd);
  _Static_assert(10 + 2 * sizeof rnd <= NAME_BYTES, "the name fits");
  snprintf(s->name, sizeof s->name, "crnet-shm-");
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(s->name + 10 + 2 * i, 3, "%02x", rnd[i]);
  s->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->sock < 0) {
    why = "socket(AF_UNIX) failed";
    goto fail;
  }
  salen = abstract_addr(s->name, &sa);
  if (bind(s->sock, (struct sockaddr *)&sa, salen) != 0 ||
      listen(s->sock, 4) != 0) {
    why = "the set-up socket could not listen";
    goto fail;
  }
  if (watch_sock(s) != 0) {
    why = "the set-up socket could not be polled";
    goto fail;
  }
  crnet__put_le64(payload, s->cookie);
  crnet__put_le32(payload + 8, ring_bytes);
  crnet__put_le32(payload + 12, (uint32_t)getpid());
  crnet__put_le64(payload + 16, (uint64_t)(uintptr_t)&s->cookie);
  memcpy(payload + OFFER_HEAD, s->name, strlen(s->name));
  s->phase = PHASE_OFFERED;
  if (crnet__link_send_control(l, CRNET__FRAME_SHM_OFFER, payload,
                               OFFER_HEAD + strlen(s->name)) != 0)
    give_up(s, "the offer could not be sent", false);
  return;

fail:
  if (efd[0] >= 0)
    close(efd[0]);
  if (efd[1] >= 0)
    close(efd[1]);
  give_up(s, why, true);
}

/* A connection on the listener: the attacher's (by the kernel's word on
 * its pid and uid) gets the descriptors; anyone else is hung up on. */
static void creator_accept(crnet__link_shm *s) {
  int c = accept4(s->sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), pid;
  if (c < 0)
    return; /* EAGAIN: someone gave up connecting */
  if (!is_the_peer(s, c, &pid)) {
    crnet__debug("shared memory with rank %d: refused a connection from "
                 "pid %d (not the rank's process)",
                 (int)s->link->peer, pid);
    close(c);
    return;
  }
  /* One byte of data carries the descriptors. The socket is new and
   * empty, so the kernel takes this small message at once. */
  char byte = 'S';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(3 * sizeof(int))];
  } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                     .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
  int fds[3] = {s->seg.fd, s->peer_doorbell, s->doorbell};
  memset(&ctl, 0, sizeof ctl);
  cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  ssize_t n;
  do
    n = sendmsg(c, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  close(c);
  if (n != 1) {
    give_up(s, "the descriptors could not be sent", true);
    return;
  }
  /* The listener's work is done: nobody else gets in. */
  close_sock(s);
  s->phase = PHASE_SENT;
}

/* --- attacher ------------------------------------------------------------ */

/* Answers an offer (payload of len bytes): connects to the creator's
 * socket. The descriptors come when it is readable (attacher_receive). */
static void attacher_connect(crnet__link_shm *s, const uint8_t *p,
                             uint64_t len) {
  crnet__link *l = s->link;
  struct sockaddr_un sa;
  socklen_t salen;
  uint64_t name_len;
  uint32_t ring_bytes, creator_pid;
  int pid;
  if (len <= OFFER_HEAD || len > OFFER_HEAD + NAME_BYTES) {
    crnet__link_fail(l, CRNET_EIO, "a malformed shared-memory offer");
    return;
  }
  s->cookie = crnet__get_le64(p);
  ring_bytes = crnet__get_le32(p + 8);
  creator_pid = crnet__get_le32(p + 12);
  s->peer_probe = crnet__get_le64(p + 16);
  (void)ring_bytes; /* attach checks the segment's own */
  name_len = len - OFFER_HEAD;
  memcpy(s->name, p + OFFER_HEAD, name_len);
  s->name[name_len] = '\0';
  if (creator_pid != s->peer_pid) {
    give_up(s, "the offer names another process", true);
    return;
  }
  s->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->sock < 0) {
    give_up(s, "socket(AF_UNIX) failed", true);
    return;
  }
  salen = abstract_addr(s->name, &sa);
  if (connect(s->sock, (struct sockaddr *)&sa, salen) != 0) {
    give_up(s, "could not connect to the creator's socket", true);
    return;
  }
  /* The listener must be the creator's: a stranger could have bound the
   * name first only if it knew it before the creator did. */
  if (!is_the_peer(s, s->sock, &pid)) {
    give_up(s, "the socket of the offer is not the rank's", true);
    return;
  }
  if (watch_sock(s) != 0) {
    give_up(s, "the set-up socket could not be polled", true);
    return;
  }
  s->phase = PHASE_CONNECTING;
}

/* Whether this process may copy out of the peer's memory: it reads the
 * peer's cookie where the peer said it is. Refused (ptrace rules, a
 * non-dumpable peer, another pid namespace) or wrong: two copies. */
static bool can_read_peer(const crnet__link_shm *s) {
  uint64_t got = 0;
  struct iovec local = {&got, sizeof got};
  struct iovec remote = {(void *)(uintptr_t)s->peer_probe, sizeof got};
  if (s->two_copies || s->peer_probe == 0)
    return false;
  return process_vm_readv((pid_t)s->peer_pid, &local, 1, &remote, 1, 0) ==
             (ssize_t)sizeof got &&
         got == s->cookie;
}

/* SHM_SWITCH: the last frame this way on TCP; says whether the peer may
 * hand us pieces by address, and where our probe is (the attacher's). */
static int send_switch(crnet__link_shm *s) {
  uint8_t p[SWITCH_BYTES];
  p[0] = can_read_peer(s) ? 1 : 0;
  crnet__put_le64(p + 1, s->creator ? 0 : (uint64_t)(uintptr_t)&s->cookie);
  return crnet__link_send_control(s->link, CRNET__FRAME_SHM_SWITCH, p,
                                  sizeof p);
}

static void attacher_receive(crnet__link_shm *s) {
  crnet__link *l = s->link;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(3 * sizeof(int))];
  } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                     .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  int fds[3] = {-1, -1, -1};
  ssize_t n;
  do
    n = recvmsg(s->sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm != NULL;
       cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int got[8];
      if (k > 8)
        k = 8;
      memcpy(got, CMSG_DATA(cm), k * sizeof(int));
      for (size_t i = 0; i < k; i++) {
        if (i < 3 && fds[i] < 0)
          fds[i] = got[i];
        else
          close(got[i]);
      }
    }
  }
  close_sock(s);
  if (n != 1 || (m.msg_flags & MSG_CTRUNC) != 0 || fds[0] < 0 ||
      fds[1] < 0 || fds[2] < 0 || !is_eventfd(fds[1]) || !is_eventfd(fds[2])) {
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0)
        close(fds[i]);
    give_up(s, n == 0 ? "the creator hung up" : "no segment came", true);
    return;
  }
  s->doorbell = fds[1];
  s->peer_doorbell = fds[2];
  if (crnet__shm_attach(&s->seg, fds[0], s->cookie) != 0) {
    give_up(s, s->seg.why, true);
    return;
  }
  if (!link_plain_ready(l)) {
    give_up(s, "the link is not ready", false);
    return;
  }
  if (open_handles(s) != 0) {
    give_up(s, "the doorbell could not be polled", true);
    return;
  }
  s->phase = PHASE_LIVE;
  /* The TCP stream's last frame this way; every later one goes into
   * ring 1. */
  if (send_switch(s) != 0)
    return;
  s->tx_on = true;
}

static void on_sock_poll(uv_poll_t *h, int status, int events) {
  crnet__link_shm *s = h->data;
  (void)events;
  if (s->closing || s->phase == PHASE_OFF)
    return;
  if (status < 0) {
    give_up(s, uv_strerror(status), true);
    return;
  }
  if (s->phase == PHASE_OFFERED)
    creator_accept(s);
  else if (s->phase == PHASE_CONNECTING)
    attacher_receive(s);
}

static void answer_offer(crnet__link_shm *s) {
  s->offer_held = false;
  if (s->policy != 1 || !link_plain_ready(s->link)) {
    give_up(s, "not wanted by this rank", true);
    return;
  }
  attacher_connect(s, s->offer, s->offer_len);
}

void crnet__link_shm_welcome(crnet__link *l, uint32_t peer_pid,
                             unsigned flags) {
  crnet__link_shm *s = shm_of(l);
  if (s == NULL || s->policy != 0)
    return;
  s->policy = 1;
  s->peer_pid = peer_pid;
  s->required = (flags & CRNET__SHM_REQUIRED) != 0;
  s->two_copies = (flags & CRNET__SHM_TWO_COPIES) != 0;
  if (s->offer_held)
    answer_offer(s);
}

void crnet__link_shm_refuse(crnet__link *l) {
  crnet__link_shm *s = shm_of(l);
  if (s == NULL || s->policy != 0)
    return;
  s->policy = -1;
  if (s->offer_held)
    answer_offer(s);
}

/* --- the switch ---------------------------------------------------------- */

static void tcp_sink_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  static _Thread_local char sink[64];
  (void)h;
  (void)suggested;
  b->base = sink;
  b->len = sizeof sink;
}

/* The TCP stream after the peer's SHM_SWITCH: nothing may come but its
 * end, which counts once the ring is read empty (pump). */
static void tcp_after_switch(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  crnet__link *l = st->data;
  crnet__link_shm *s = l->shm;
  char why[128];
  (void)b;
  if (n == 0)
    return;
  if (n > 0) {
    snprintf(why, sizeof why,
             "rank %d sent bytes on TCP after its switch to shared memory",
             (int)l->peer);
    crnet__link_fail(l, CRNET_EIO, why);
    return;
  }
  uv_read_stop(st);
  s->tcp_end = (int)n;
  crnet__link_note_io(l);
  pump(s);
}

static void switch_rx(crnet__link_shm *s) {
  crnet__link *l = s->link;
  bool was_reading = l->reading;
  if (l->stage_off != l->stage_len) {
    crnet__link_fail(l, CRNET_EIO,
                     "bytes followed the switch to shared memory on TCP");
    return;
  }
  uv_read_stop((uv_stream_t *)&l->tcp);
  l->reading = false;
  s->rx_on = true;
  uv_read_start((uv_stream_t *)&l->tcp, tcp_sink_alloc, tcp_after_switch);
  if (was_reading)
    crnet__link_start_reading(l);
  if (s->tx_on && l->state == CRNET__LINK_READY)
    atomic_store(&l->carriage, CRNET_LINK_SHM);
}

void crnet__link_shm_control(crnet__link *l, const crnet__frame_header *h,
                             const uint8_t *payload) {
  crnet__link_shm *s = shm_of(l);
  char why[160];
  if (s == NULL) {
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a shared-memory link");
    return;
  }
  switch (h->kind) {
  case CRNET__FRAME_SHM_OFFER:
    /* Only mesh links carry offers (comm.c); one on a rendezvous link is a
     * peer that does not follow the protocol. */
    if (l->purpose != CRNET__HS_MESH || s->phase != PHASE_NONE ||
        s->creator || s->offer_held || h->length > sizeof s->offer) {
      crnet__link_fail(l, CRNET_EIO, "an unexpected shared-memory offer");
      return;
    }
    memcpy(s->offer, payload, h->length);
    s->offer_len = h->length;
    s->offer_held = true;
    if (s->policy != 0)
      answer_offer(s);
    return;
  case CRNET__FRAME_SHM_SWITCH:
    if ((s->phase != PHASE_SENT &&
         !(s->phase == PHASE_LIVE && !s->creator && !s->rx_on)) ||
        h->length != SWITCH_BYTES) {
      crnet__link_fail(l, CRNET_EIO, "an unexpected shared-memory switch");
      return;
    }
    s->remote_ok = payload[0] == 1;
    if (s->creator)
      s->peer_probe = crnet__get_le64(payload + 1);
    if (s->creator) {
      if (open_handles(s) != 0) {
        crnet__link_fail(l, CRNET_EIO,
                         "shared memory: the doorbell could not be polled");
        return;
      }
      s->phase = PHASE_LIVE;
      switch_rx(s);
      if (send_switch(s) == 0) {
        s->tx_on = true;
        atomic_store(&l->carriage, CRNET_LINK_SHM);
      }
      crnet__debug("rank %d: link on shared memory (%u-byte rings, %s)",
                   (int)l->peer, s->seg.ring_bytes,
                   s->remote_ok ? "large pieces in one copy" : "two copies");
    } else {
      switch_rx(s);
    }
    return;
  case CRNET__FRAME_SHM_DECLINE:
    if (s->phase != PHASE_OFFERED && s->phase != PHASE_SENT) {
      crnet__link_fail(l, CRNET_EIO, "an unexpected shared-memory decline");
      return;
    }
    snprintf(why, sizeof why, "rank %d declined: %.*s", (int)l->peer,
             (int)(h->length < 100 ? h->length : 100), (const char *)payload);
    give_up(s, why, false);
    return;
  default:
    return;
  }
}

/* --- writing ------------------------------------------------------------- */

uint64_t crnet__link_shm_queued(const crnet__link *l) {
  return l->shm != NULL ? l->shm->queued : 0;
}

static void append(shm_write **head, shm_write **tail, shm_write *w) {
  w->next = NULL;
  if (*tail != NULL)
    (*tail)->next = w;
  else
    *head = w;
  *tail = w;
}

static shm_write *pop(shm_write **head, shm_write **tail) {
  shm_write *w = *head;
  *head = w->next;
  if (*head == NULL)
    *tail = NULL;
  return w;
}

static void ring_failed(crnet__link_shm *s) {
  char why[128];
  snprintf(why, sizeof why,
           "rank %d wrote impossible positions into the shared ring",
           (int)s->link->peer);
  crnet__link_fail(s->link, CRNET_EIO, why);
}

/* Bytes of w from its cursor up to the next piece that goes by address
 * (or its end), at most cap. */
static uint64_t inline_run(const crnet__link_shm *s, const shm_write *w,
                           uint64_t cap) {
  uint64_t n = 0, off = w->cur_off;
  for (uint32_t i = w->cur; i < w->n && n < cap; i++, off = 0) {
    uint64_t left = w->iov[i].len - off;
    if (s->remote_ok && !w->inline_only && left >= REMOTE_MIN)
      break;
    n += left;
  }
  return n < cap ? n : cap;
}

/* Moves w's cursor n bytes on. */
static void advance(shm_write *w, uint64_t n) {
  w->done += n;
  while (n > 0 || (w->cur < w->n && w->cur_off == w->iov[w->cur].len)) {
    uint64_t left = w->iov[w->cur].len - w->cur_off;
    uint64_t k = n < left ? n : left;
    w->cur_off += k;
    n -= k;
    if (w->cur_off == w->iov[w->cur].len) {
      w->cur++;
      w->cur_off = 0;
    }
  }
}

/* Writes records of w into the ring while it has room: its next piece by
 * address if large (and the peer reads ours), else inline bytes up to the
 * next such piece. The bytes moved on, or CRNET__RING_CORRUPT. */
static size_t write_records(crnet__link_shm *s, shm_write *w) {
  crnet__ring *tx = crnet__shm_tx(&s->seg);
  size_t moved = 0;
  while (w->done < w->total) {
    uint64_t room = crnet__ring_writable(tx);
    uint8_t head[REC_HEADER + 8];
    crnet__ring_iov v[1 + 16];
    uint64_t piece = w->iov[w->cur].len - w->cur_off;
    uint32_t nv = 1;
    if (s->remote_ok && !w->inline_only && piece >= REMOTE_MIN) {
      if (room < sizeof head)
        break;
      crnet__put_le64(head, REC_REMOTE | piece);
      crnet__put_le64(head + REC_HEADER,
                      (uint64_t)(uintptr_t)w->iov[w->cur].base + w->cur_off);
      v[0].base = head;
      v[0].len = sizeof head;
      if (crnet__ring_write(tx, v, 1, 0) != sizeof head)
        return CRNET__RING_CORRUPT;
      s->remote_sent += piece;
      w->remote_mark = s->remote_sent;
      advance(w, piece);
      moved += piece;
      continue;
    }
    if (room <= REC_HEADER)
      break;
    uint64_t n = inline_run(s, w, room - REC_HEADER), got = 0, off = w->cur_off;
    crnet__put_le64(head, n);
    v[0].base = head;
    v[0].len = REC_HEADER;
    for (uint32_t i = w->cur; got < n && nv < 17; i++, off = 0) {
      uint64_t k = w->iov[i].len - off;
      if (k > n - got)
        k = n - got;
      v[nv].base = (const uint8_t *)w->iov[i].base + off;
      v[nv++].len = k;
      got += k;
    }
    if (got < n) { /* more pieces than v holds: a shorter record */
      n = got;
      crnet__put_le64(head, n);
    }
    if (crnet__ring_write(tx, v, nv, 0) != REC_HEADER + n)
      return CRNET__RING_CORRUPT;
    advance(w, n);
    moved += n;
  }
  return moved;
}

/* Moves queued writes into the ring as far as it has room, and completes
 * those whose pieces by address the peer has copied; whether it did
 * anything. */
static bool flush_tx(crnet__link_shm *s) {
  crnet__ring *tx = crnet__shm_tx(&s->seg);
  bool wrote = false, did = false;
  while (s->q_head != NULL) {
    shm_write *w = s->q_head;
    size_t k = write_records(s, w);
    if (k == CRNET__RING_CORRUPT) {
      ring_failed(s);
      return true;
    }
    if (k > 0) {
      wrote = true;
      s->queued -= k;
    }
    if (w->done < w->total)
      break;
    pop(&s->q_head, &s->q_tail);
    append(&s->wait_head, &s->wait_tail, w);
  }
  if (s->wait_head != NULL) {
    uint64_t copied = crnet__ring_remote_done(tx);
    if (copied > s->remote_sent) {
      ring_failed(s);
      return true;
    }
    while (s->wait_head != NULL && s->wait_head->remote_mark <= copied) {
      append(&s->done_head, &s->done_tail, pop(&s->wait_head, &s->wait_tail));
      did = true;
    }
    if (s->wait_head != NULL &&
        crnet__ring_remote_progress(tx) != s->remote_progress_seen) {
      /* The peer is copying a large piece out of our memory: news for a
       * wait that polls (it would otherwise give up while the copy runs,
       * about 100 us for 1 MiB here, and sleep until the peer's wake-up;
       * measured in docs/PERFORMANCE-SHM.md, "Point-to-point on
       * shared memory"). */
      s->remote_progress_seen = crnet__ring_remote_progress(tx);
      crnet__link_note_io(s->link);
    }
  }
  if (wrote) {
    crnet__link_note_io(s->link);
    if (crnet__ring_wake_reader(tx))
      ring_bell(s);
  }
  if (s->q_head == NULL && s->wait_head == NULL && s->shutdown_req != NULL) {
    uv_shutdown_t *req = s->shutdown_req;
    s->shutdown_req = NULL;
    if (uv_shutdown(req, (uv_stream_t *)&s->link->tcp, s->shutdown_cb) != 0)
      s->shutdown_cb(req, UV_EPIPE);
  }
  return wrote || did;
}

int crnet__link_shm_write(crnet__link *l, uv_write_t *req, const uv_buf_t *b,
                          unsigned n, uv_write_cb cb, bool inline_only) {
  crnet__link_shm *s = l->shm;
  shm_write *w;
  uint64_t total = 0;
  if (s->closing)
    return UV_EPIPE;
  w = crnet__malloc(sizeof *w + n * sizeof w->iov[0]);
  if (w == NULL)
    return UV_ENOMEM;
  for (unsigned i = 0; i < n; i++) {
    w->iov[i].base = b[i].base;
    w->iov[i].len = b[i].len;
    total += b[i].len;
  }
  w->n = n;
  w->req = req;
  w->cb = cb;
  w->total = total;
  w->done = 0;
  w->cur = 0;
  w->cur_off = 0;
  w->remote_mark = 0;
  w->inline_only = inline_only;
  advance(w, 0); /* past empty pieces */
  req->handle = (uv_stream_t *)&l->tcp;
  append(&s->q_head, &s->q_tail, w);
  s->queued += total;
  if (s->q_head == w)
    flush_tx(s);
  /* Its callback at least is work for the next turn. */
  want_turn(s);
  return 0;
}

int crnet__link_shm_try_write(crnet__link *l, const uv_buf_t *b, unsigned n) {
  crnet__link_shm *s = l->shm;
  crnet__ring *tx;
  crnet__ring_iov iov[9];
  uint8_t head[REC_HEADER];
  uint64_t total = 0;
  if (s->closing)
    return UV_EPIPE;
  if (s->q_head != NULL || s->wait_head != NULL || n > 8)
    return UV_EAGAIN;
  for (unsigned i = 0; i < n; i++) {
    iov[i + 1].base = b[i].base;
    iov[i + 1].len = b[i].len;
    total += b[i].len;
  }
  /* Small frames only, as one inline record, whole or not at all. */
  tx = crnet__shm_tx(&s->seg);
  if (total == 0 || total >= REMOTE_MIN ||
      !crnet__ring_has_room(tx, REC_HEADER + total))
    return UV_EAGAIN;
  crnet__put_le64(head, total);
  iov[0].base = head;
  iov[0].len = REC_HEADER;
  if (crnet__ring_write(tx, iov, n + 1, 0) != REC_HEADER + total) {
    ring_failed(s);
    return UV_EPIPE;
  }
  if (crnet__ring_wake_reader(tx))
    ring_bell(s);
  return (int)total;
}

static void free_detached(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

int crnet__link_shm_detach(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  shm_write *rest = NULL, *rest_tail = NULL;
  if (s == NULL || !s->tx_on || s->closing || s->wait_head != NULL)
    return -1;
  while (s->q_head != NULL) {
    shm_write *w = s->q_head, *c;
    uint64_t left = w->total - w->done, got = 0;
    /* The copy's buffer follows a uv_write_t that nobody waits for; its
     * callback frees both. */
    uv_write_t *own = crnet__malloc(sizeof *own + left);
    c = crnet__malloc(sizeof *c + sizeof c->iov[0]);
    if (own == NULL || c == NULL) {
      free(own);
      free(c);
      return -1;
    }
    for (uint32_t i = w->cur; i < w->n; i++) {
      uint64_t from = i == w->cur ? w->cur_off : 0;
      memcpy((uint8_t *)(own + 1) + got, (const uint8_t *)w->iov[i].base + from,
             w->iov[i].len - from);
      got += w->iov[i].len - from;
    }
    memset(c, 0, sizeof *c);
    c->req = own;
    c->cb = free_detached;
    c->total = left;
    c->n = 1;
    c->iov[0].base = own + 1;
    c->iov[0].len = left;
    pop(&s->q_head, &s->q_tail);
    append(&rest, &rest_tail, c);
    /* The caller's memory is no longer read: its write is done. */
    append(&s->done_head, &s->done_tail, w);
  }
  s->q_head = rest;
  s->q_tail = rest_tail;
  want_turn(s);
  return 0;
}

int crnet__link_shm_shutdown(crnet__link *l, uv_shutdown_t *req,
                             uv_shutdown_cb cb) {
  crnet__link_shm *s = l->shm;
  if (s->q_head == NULL && s->wait_head == NULL)
    return uv_shutdown(req, (uv_stream_t *)&l->tcp, cb);
  s->shutdown_req = req;
  s->shutdown_cb = cb;
  return 0;
}

/* Runs the callbacks of writes that are wholly in the ring; whether it
 * ran any. */
static bool run_done(crnet__link_shm *s) {
  bool ran = false;
  while (s->done_head != NULL && !s->closing) {
    shm_write *w = pop(&s->done_head, &s->done_tail);
    uv_write_t *req = w->req;
    uv_write_cb cb = w->cb;
    free(w);
    cb(req, 0);
    ran = true;
  }
  return ran;
}

/* --- reading ------------------------------------------------------------- */

void crnet__link_shm_read_start(crnet__link *l, uv_alloc_cb alloc,
                                uv_read_cb read) {
  crnet__link_shm *s = l->shm;
  s->alloc_cb = alloc;
  s->read_cb = read;
  s->reading = true;
  /* Read from the loop's next turn, not from inside the caller. */
  want_turn(s);
}

void crnet__link_shm_read_stop(crnet__link *l) { l->shm->reading = false; }

/* Hands what the ring holds to the reader, as reads of a socket would: an
 * allocation, a copy, a callback, while it reads and there are bytes. At
 * most R bytes a turn, so that a peer that keeps writing cannot hold the
 * loop here. Then the end of the TCP stream, once the ring is empty.
 * Whether it handed anything over. */
static bool drain_rx(crnet__link_shm *s) {
  crnet__link *l = s->link;
  crnet__ring *rx = crnet__shm_rx(&s->seg);
  uint64_t moved = 0, budget = s->seg.ring_bytes;
  bool freed = false;
  if (budget < 4 * REMOTE_PIECE)
    budget = 4 * REMOTE_PIECE;
  while (s->rx_on && s->reading && !s->closing && moved < budget) {
    uint64_t avail = crnet__ring_readable(rx);
    uv_buf_t b;
    size_t k;
    if (s->rem_left > 0) {
      /* A piece by address: straight from the writer's memory. */
      struct iovec local, remote;
      ssize_t got;
      s->alloc_cb((uv_handle_t *)&l->tcp, (size_t)s->rem_left, &b);
      local.iov_base = b.base;
      local.iov_len = b.len < s->rem_left ? b.len : (size_t)s->rem_left;
      if (local.iov_len > REMOTE_PIECE)
        local.iov_len = REMOTE_PIECE;
      remote.iov_base = (void *)(uintptr_t)s->rem_addr;
      remote.iov_len = local.iov_len;
      got = process_vm_readv((pid_t)s->peer_pid, &local, 1, &remote, 1, 0);
      if (got <= 0) {
        char why[160];
        uv_buf_t none = uv_buf_init(NULL, 0);
        if (got < 0 && errno == ESRCH) {
          /* The writer is gone: the end of its stream, as on TCP. */
          s->rem_left = 0;
          s->read_cb((uv_stream_t *)&l->tcp, UV_EOF, &none);
          return true;
        }
        snprintf(why, sizeof why, "copying from rank %d's memory failed: %s",
                 (int)l->peer, got < 0 ? strerror(errno) : "nothing copied");
        crnet__link_fail(l, CRNET_EIO, why);
        return true;
      }
      s->rem_addr += (uint64_t)got;
      s->rem_left -= (uint64_t)got;
      moved += (uint64_t)got;
      s->remote_copied += (uint64_t)got;
      crnet__ring_remote_progress_set(rx, s->remote_copied);
      if (s->rem_left == 0) {
        s->remote_read += s->rem_done_len;
        crnet__ring_remote_done_set(rx, s->remote_read);
        freed = true; /* the writer may wait for it */
      }
      s->read_cb((uv_stream_t *)&l->tcp, got, &b);
      continue;
    }
    if (avail == 0) {
      if (crnet__ring_read(rx, NULL, 0) == CRNET__RING_CORRUPT) {
        ring_failed(s);
        return true;
      }
      break;
    }
    if (s->in_left == 0) {
      /* A record's header; a piece by address comes with its address in
       * the same write, so it is readable whole. */
      uint8_t head[REC_HEADER + 8];
      uint64_t word, len;
      if (crnet__ring_read(rx, head, REC_HEADER) != REC_HEADER) {
        ring_failed(s);
        return true;
      }
      freed = true;
      word = crnet__get_le64(head);
      len = word & ~REC_REMOTE;
      if (len == 0 || len > REC_LEN_MAX) {
        ring_failed(s);
        return true;
      }
      if ((word & REC_REMOTE) == 0) {
        s->in_left = len;
        continue;
      }
      if (crnet__ring_read(rx, head + REC_HEADER, 8) != 8) {
        ring_failed(s);
        return true;
      }
      s->rem_addr = crnet__get_le64(head + REC_HEADER);
      s->rem_left = s->rem_done_len = len;
      continue;
    }
    if (avail > s->in_left)
      avail = s->in_left;
    s->alloc_cb((uv_handle_t *)&l->tcp, (size_t)avail, &b);
    k = crnet__ring_read(rx, b.base, b.len < avail ? b.len : (size_t)avail);
    if (k == CRNET__RING_CORRUPT) {
      ring_failed(s);
      return true;
    }
    freed = true;
    moved += k;
    s->in_left -= k;
    s->read_cb((uv_stream_t *)&l->tcp, (ssize_t)k, &b);
  }
  if (freed && crnet__ring_wake_writer(rx))
    ring_bell(s);
  if (s->tcp_end != 0 && s->reading && !s->closing && s->rem_left == 0 &&
      crnet__ring_readable(rx) == 0) {
    int end = s->tcp_end;
    crnet__link_shm_drain_loop(l);
    uv_buf_t none = uv_buf_init(NULL, 0);
    s->tcp_end = 0;
    s->read_cb((uv_stream_t *)&l->tcp, end, &none);
    return true;
  }
  return freed;
}

bool crnet__link_shm_staged_abort(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  crnet__ring *rx;
  uint8_t *raw, *stream;
  uint64_t n, len = 0, pos = 0;
  bool found = false;
  if (s == NULL || s->phase != PHASE_LIVE || s->rx_on || s->closing)
    return false;
  rx = crnet__shm_rx(&s->seg);
  n = crnet__ring_readable(rx);
  if (n == 0)
    return false;
  raw = crnet__malloc(n);
  /* The frame stream behind the records: inline bytes as they are, bytes
   * by address as zeros (only their count matters: an ABORT is small and
   * goes inline). */
  stream = crnet__malloc(n + CRNET__CONTROL_MAX / 1024);
  if (raw == NULL || stream == NULL ||
      crnet__ring_read(rx, raw, n) != n) {
    free(raw);
    free(stream);
    return false;
  }
  while (pos + REC_HEADER <= n) {
    uint64_t word = crnet__get_le64(raw + pos), rlen = word & ~REC_REMOTE;
    pos += REC_HEADER;
    if ((word & REC_REMOTE) != 0) {
      if (pos + 8 > n || len + rlen > n + CRNET__CONTROL_MAX / 1024)
        break;
      memset(stream + len, 0, rlen);
      len += rlen;
      pos += 8;
      continue;
    }
    if (rlen > n - pos)
      rlen = n - pos;
    memcpy(stream + len, raw + pos, rlen);
    len += rlen;
    pos += rlen;
  }
  for (pos = 0; pos + CRNET__FRAME_HEADER_SIZE <= len && !found;) {
    crnet__frame_header h;
    const char *why;
    if (crnet__frame_decode(stream + pos, UINT64_MAX, &h, &why) != 0)
      break;
    pos += CRNET__FRAME_HEADER_SIZE;
    if (h.length > len - pos)
      break;
    if (h.kind == CRNET__FRAME_ABORT) {
      l->cb->on_control(l, &h, stream + pos);
      found = true;
    }
    pos += h.length;
  }
  free(raw);
  free(stream);
  return found;
}

/* Every carriage of the loop has a check handle with on_check: uv_walk
 * finds them. */
static void on_check(uv_check_t *h);

static void drain_one(uv_handle_t *h, void *arg) {
  crnet__link_shm *s;
  if (h->type != UV_CHECK || ((uv_check_t *)h)->check_cb != on_check ||
      uv_is_closing(h))
    return;
  s = h->data;
  if (s->link != arg && !s->closing && s->phase == PHASE_LIVE &&
      s->tcp_end == 0)
    drain_rx(s);
}

void crnet__link_shm_drain_loop(crnet__link *l) {
  uv_walk(l->tcp.loop, drain_one, l);
}

/* --- the loop's turns ---------------------------------------------------- */

/* Whether the carriage has work it can do now, without waiting. */
static bool work_now(crnet__link_shm *s) {
  if (s->closing || s->phase != PHASE_LIVE)
    return false;
  if (s->done_head != NULL)
    return true;
  if (s->tx_on && s->q_head != NULL &&
      crnet__ring_has_room(crnet__shm_tx(&s->seg), REC_HEADER + 8))
    return true;
  if (s->wait_head != NULL &&
      crnet__ring_remote_done(crnet__shm_tx(&s->seg)) >=
          s->wait_head->remote_mark)
    return true;
  if (s->rx_on && s->reading &&
      (crnet__ring_readable(crnet__shm_rx(&s->seg)) > 0 || s->rem_left > 0 ||
       s->tcp_end != 0))
    return true;
  return false;
}

/* Work came from outside the carriage's own turns (a write, a read
 * started): the loop must not sleep before a pump has seen it. Only a pump
 * ever stops the idle handle again, so this holds even when the work comes
 * after this loop turn's prepare callback has decided what to announce
 * (the progress engine's own prepare callback runs after it and starts
 * calls). */
static void want_turn(crnet__link_shm *s) {
  if (s->handles_open && !s->closing)
    uv_idle_start(&s->idle, on_idle);
}

/* The idle handle keeps the loop from sleeping in its poll while there is
 * work, and also for one turn after a pump that did something (did): what
 * it handed over before the poll (from the idle or prepare callbacks) may
 * have completed a request, and the waiter must get to look at it before
 * the loop sleeps, rather than after some unrelated wake-up. */
static void update_idle(crnet__link_shm *s, bool did) {
  if (!s->handles_open || s->closing)
    return;
  if (did || work_now(s))
    uv_idle_start(&s->idle, on_idle);
  else
    uv_idle_stop(&s->idle);
}

static bool pump(crnet__link_shm *s) {
  bool did = false;
  if (s->closing || s->phase != PHASE_LIVE)
    return false;
  if (s->tx_on)
    did |= flush_tx(s);
  did |= run_done(s);
  did |= drain_rx(s);
  update_idle(s, did);
  return did;
}

static void on_idle(uv_idle_t *h) { pump(h->data); }

bool crnet__link_shm_unread(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  return s != NULL && !s->closing && s->phase == PHASE_LIVE && s->rx_on &&
         (s->rem_left > 0 || crnet__ring_readable(crnet__shm_rx(&s->seg)) > 0);
}

crnet__shm *crnet__link_shm_segment(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  if (s == NULL || s->closing || s->phase != PHASE_LIVE)
    return NULL;
  return &s->seg;
}

bool crnet__link_shm_settled(const crnet__link *l) {
  const crnet__link_shm *s = l->shm;
  return s == NULL || s->closing || s->phase == PHASE_LIVE ||
         s->phase == PHASE_OFF;
}

void crnet__link_shm_ring_peer(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  if (s != NULL && !s->closing && s->phase == PHASE_LIVE)
    ring_bell(s);
}

bool crnet__link_shm_pump(crnet__link *l) {
  return l->shm != NULL && pump(l->shm);
}

/* Before the loop polls. If it may sleep there, announce the sleep on
 * every ring this side waits on (shm.h), and keep the loop from sleeping
 * if something came meanwhile.
 *
 * The announcements of all the loop's links are made together, then one
 * fence, then the looks: where this process fences for its peers with
 * membarrier (shm.h, "Asymmetric fences"), that is a system call, and one
 * per link would multiply it by the links of the host. The first link
 * whose prepare callback finds that it would sleep gathers every link that
 * would; a link whose callback runs later finds its announcement made, or
 * makes one of its own if its pump changed what it waits for. */
static bool may_announce(const crnet__link_shm *s) {
  const crnet__link *l = s->link;
  return !s->closing && s->phase == PHASE_LIVE &&
         !(l->loop_nowait != NULL && *l->loop_nowait) &&
         !uv_is_active((const uv_handle_t *)&s->idle);
}

static bool wants_rx(const crnet__link_shm *s) {
  return !s->rx_announced && s->rx_on && s->reading && s->tcp_end == 0 &&
         s->rem_left == 0;
}

/* -1, or the sleep the writing side would announce: room for the next
 * record's header and its address or a byte, or the reader's copy. */
static int wants_tx(const crnet__link_shm *s) {
  if (s->tx_announced)
    return -1;
  if (s->tx_on && s->q_head != NULL)
    return CRNET__RING_SLEEP_ROOM;
  if (s->wait_head != NULL)
    return CRNET__RING_SLEEP_REMOTE;
  return -1;
}

/* Announces what s would (a corrupt ring announces nothing and gets a
 * pump instead, which reports it); true if anything was. */
static bool gather(crnet__link_shm *s) {
  bool any = false;
  s->gate_rx = false;
  s->gate_tx = -1;
  if (!may_announce(s))
    return false;
  if (wants_rx(s)) {
    s->gate_rx =
        crnet__ring_announce(crnet__shm_rx(&s->seg), CRNET__RING_SLEEP_READ);
    any |= s->gate_rx;
    if (!s->gate_rx)
      uv_idle_start(&s->idle, on_idle);
  }
  int tx = wants_tx(s);
  if (tx >= 0) {
    if (crnet__ring_announce(crnet__shm_tx(&s->seg), (crnet__ring_sleep)tx))
      s->gate_tx = tx;
    else
      uv_idle_start(&s->idle, on_idle);
    any |= s->gate_tx >= 0;
  }
  return any;
}

/* After the fence: whether what s announced still holds (then it stays
 * announced until on_check), else the loop must not sleep. Without the
 * fence (it failed) every announcement is withdrawn. */
static void look(crnet__link_shm *s, bool fenced) {
  if (s->gate_rx) {
    if (fenced && crnet__ring_announced_look(crnet__shm_rx(&s->seg),
                                             CRNET__RING_SLEEP_READ, 0))
      s->rx_announced = true;
    else {
      crnet__ring_reader_awake(crnet__shm_rx(&s->seg));
      uv_idle_start(&s->idle, on_idle);
    }
  }
  if (s->gate_tx >= 0) {
    uint64_t arg = s->gate_tx == CRNET__RING_SLEEP_ROOM
                       ? REC_HEADER + 8
                       : s->wait_head->remote_mark;
    if (fenced &&
        crnet__ring_announced_look(crnet__shm_tx(&s->seg),
                                   (crnet__ring_sleep)s->gate_tx, arg))
      s->tx_announced = true;
    else {
      crnet__ring_writer_awake(crnet__shm_tx(&s->seg));
      uv_idle_start(&s->idle, on_idle);
    }
  }
  s->gate_rx = false;
  s->gate_tx = -1;
}

static void gather_one(uv_handle_t *h, void *arg) {
  crnet__link_shm **list = arg, *s;
  if (h->type != UV_CHECK || ((uv_check_t *)h)->check_cb != on_check ||
      uv_is_closing(h))
    return;
  s = h->data;
  if (gather(s)) {
    s->gate_next = *list;
    *list = s;
  }
}

static void on_prepare(uv_prepare_t *h) {
  crnet__link_shm *s = h->data, *list = NULL;
  pump(s);
  if (!may_announce(s) || (!wants_rx(s) && wants_tx(s) < 0))
    return;
  uv_walk(s->link->tcp.loop, gather_one, &list);
  bool fenced = crnet__shm_sleep_fence();
  for (crnet__link_shm *x = list, *next; x != NULL; x = next) {
    next = x->gate_next;
    look(x, fenced);
  }
}

/* After the loop polled: the announcements are withdrawn (a signal on its
 * way does no harm), and whatever came is handled; this also runs after
 * every turn of a polling wait. */
static void on_check(uv_check_t *h) {
  crnet__link_shm *s = h->data;
  if (s->rx_announced) {
    crnet__ring_reader_awake(crnet__shm_rx(&s->seg));
    s->rx_announced = false;
  }
  if (s->tx_announced) {
    crnet__ring_writer_awake(crnet__shm_tx(&s->seg));
    s->tx_announced = false;
  }
  pump(s);
}

static void on_bell(uv_poll_t *h, int status, int events) {
  crnet__link_shm *s = h->data;
  uint64_t count;
  ssize_t n;
  (void)status;
  (void)events;
  do
    n = read(s->doorbell, &count, sizeof count);
  while (n < 0 && errno == EINTR);
  pump(s);
}

/* --- closing ------------------------------------------------------------- */

/* The link counts every handle of its own; its close callback takes the
 * link from the handle's data. */
static void handle_closed(uv_handle_t *h) {
  crnet__link_shm *s = h->data;
  h->data = s->link;
  crnet__link_handle_closed(h);
}

void crnet__link_shm_close(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  if (s == NULL || s->closing)
    return;
  s->closing = true;
  s->reading = false;
  if (s->sock_poll_open)
    uv_close((uv_handle_t *)&s->sock_poll, handle_closed);
  if (s->handles_open) {
    uv_close((uv_handle_t *)&s->bell_poll, handle_closed);
    uv_close((uv_handle_t *)&s->prepare, handle_closed);
    uv_close((uv_handle_t *)&s->check, handle_closed);
    uv_close((uv_handle_t *)&s->idle, handle_closed);
  }
}

void crnet__link_shm_free(crnet__link *l) {
  crnet__link_shm *s = l->shm;
  if (s == NULL)
    return;
  l->shm = NULL;
  /* As libuv does for a closed stream: queued writes end cancelled. */
  while (s->wait_head != NULL)
    append(&s->done_head, &s->done_tail, pop(&s->wait_head, &s->wait_tail));
  while (s->q_head != NULL)
    append(&s->done_head, &s->done_tail, pop(&s->q_head, &s->q_tail));
  s->q_head = s->done_head;
  s->q_tail = s->done_tail;
  s->done_head = s->done_tail = NULL;
  while (s->q_head != NULL) {
    shm_write *w = pop(&s->q_head, &s->q_tail);
    uv_write_t *req = w->req;
    uv_write_cb cb = w->cb;
    free(w);
    cb(req, UV_ECANCELED);
  }
  if (s->shutdown_req != NULL)
    s->shutdown_cb(s->shutdown_req, UV_ECANCELED);
  crnet__shm_close(&s->seg);
  if (s->doorbell >= 0)
    close(s->doorbell);
  if (s->peer_doorbell >= 0)
    close(s->peer_doorbell);
  if (s->sock >= 0)
    close(s->sock);
  free(s);
}
