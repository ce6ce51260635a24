/* Fuzz target: a link's byte-stream reader (src/runtime/link.c), plain and
 * with sealed records (src/runtime/seal.h), through the real code path.
 *
 * A real link accepts a connection on a Unix socket (libuv takes it into
 * the link's TCP handle like any accepted socket) and runs the responder
 * side of a real handshake with this harness, which plays rank 1 of a job
 * of two. Then the harness sends the input's byte stream as rank 1 would
 * send frames: cut into chunks of sizes the input chooses, each handed to
 * the kernel and read by the link before the next (so a given input always
 * arrives in the same pieces), and with encryption sealed into records of
 * those sizes. Whenever a DATA frame waits for its receive (parked), the
 * harness posts one as a collective would: usually matching, scattered over
 * up to three regions; sometimes mismatching (the link must then fail with
 * CRNET_EMISMATCH), cancelled midway, or never; and now and then the
 * owner's on_parked says that no receive will match (the link must fail
 * with CRNET_EMISMATCH too). Control frames are read whole by the owner's
 * callback.
 *
 * Input:
 *   byte 0  bit 0 encrypt; bit 1 AES-256-GCM may be used (else
 *           XChaCha20-Poly1305); bit 2 one record is altered (the one
 *           numbered by bits 4-7); bit 3 the stream ends with a record
 *           length out of range
 *   byte 1  seed of the chunk sizes; byte 2 seed of the receive choices
 *   then    the plaintext byte stream (frames, or anything)
 *
 * Checked, beside memory safety: the handshake with a well-behaved peer
 * succeeds; a failed link gives a reason and fails its posted receive; a
 * mismatching receive fails the link with CRNET_EMISMATCH; an altered
 * record fails it with CRNET_EAUTH, before any later frame is delivered;
 * every link closes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "crnet.h"
#include "frame.h"
#include "fuzz.h"
#include "link.h"
#include "seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* DATA payloads larger than this get a mismatching receive instead of a
 * buffer (the fuzzer can name any length). */
#define RECV_LIMIT (1u << 20)

static uv_loop_t loop;
static uv_pipe_t listener;
static char dir[64], path[96];
static crnet__link link_;
static uint8_t encrypt_mode;

/* What happened to the link during one input. */
static struct {
  bool accepted, ready, closed, errored;
  int ready_status, error_status;
  bool corrupted_sent; /* the altered record has been sent */
  bool refused_park;   /* on_parked said no */
  uint64_t controls;   /* control frames delivered */
  uint64_t state;      /* receive choices */
  crnet__recv_req req;
  crnet__iov iov[3];
  uint8_t *buf;
} st;

static void on_ready(crnet__link *l, int status) {
  (void)l;
  st.ready = true;
  st.ready_status = status;
}

static void on_control(crnet__link *l, const crnet__frame_header *h,
                       const uint8_t *payload) {
  volatile uint8_t sum = 0;
  (void)l;
  /* Touch every byte the header promises. */
  for (uint64_t i = 0; i < h->length; i++)
    sum = (uint8_t)(sum + payload[i]);
  st.controls++;
}

/* The owner's say on a parked DATA frame: now and then, that no receive
 * will ever match it (the link must then fail with CRNET_EMISMATCH). */
static int on_parked(crnet__link *l, const crnet__frame_header *h) {
  (void)l;
  (void)h;
  if (fuzz_prng(&st.state) % 16 != 3)
    return CRNET__PARK_WAIT;
  st.refused_park = true;
  return CRNET__PARK_REFUSE;
}

static void on_error(crnet__link *l, int status, const char *why) {
  if (why == NULL || why[0] == '\0')
    fuzz_fail("link failed (%d) without a reason", status);
  if (status >= 0)
    fuzz_fail("link failed with status %d", status);
  st.errored = true;
  st.error_status = status;
  crnet__link_close(l);
}

static void on_closed(crnet__link *l) {
  (void)l;
  st.closed = true;
}

static const crnet__link_callbacks callbacks = {
    .on_ready = on_ready,
    .on_control = on_control,
    .on_parked = on_parked,
    .on_error = on_error,
    .on_closed = on_closed,
};

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0)
    fuzz_fail("listener: %s", uv_strerror(status));
  st.accepted = true;
  if (crnet__link_accept(&link_, &loop, server, &callbacks, NULL, fuzz_key, 0,
                         2, FUZZ_WAIT_MS) != 0)
    fuzz_fail("cannot accept: %s", link_.why);
  crnet__link_set_encrypt(&link_, encrypt_mode);
}

static void cleanup(void) {
  unlink(path);
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_random_install();
  snprintf(dir, sizeof dir, "/tmp/crnet-fuzz-link-XXXXXX");
  if (mkdtemp(dir) == NULL)
    fuzz_fail("mkdtemp: %s", strerror(errno));
  snprintf(path, sizeof path, "%s/s", dir);
  atexit(cleanup);
  if (uv_loop_init(&loop) != 0 || uv_pipe_init(&loop, &listener, 0) != 0 ||
      uv_pipe_bind(&listener, path) != 0 ||
      uv_listen((uv_stream_t *)&listener, 16, on_connection) != 0)
    fuzz_fail("cannot listen on %s", path);
  return 0;
}

static bool is_accepted(void *arg) {
  (void)arg;
  return st.accepted;
}
static bool is_ready(void *arg) {
  (void)arg;
  return st.ready;
}
static bool is_closed(void *arg) {
  (void)arg;
  return st.closed;
}

static bool link_over(void) { return st.errored || st.closed || link_.failed; }

static bool parked(void) {
  return link_.have_header && link_.hdr.kind == CRNET__FRAME_DATA &&
         link_.recv == NULL && !link_over();
}

/* Posts a receive for the parked DATA frame. False when the input chose to
 * leave it parked. */
static bool post_receive(void) {
  uint32_t choice = fuzz_prng(&st.state) % 16;
  crnet__recv_req *r = &st.req;
  uint64_t len = link_.hdr.length;
  if (choice == 1) {
    /* Left parked, and the owner asked again. */
    crnet__link_recheck_parked(&link_);
    return false;
  }
  free(st.buf);
  st.buf = NULL;
  memset(r, 0, sizeof *r);
  r->ctx = link_.hdr.ctx;
  r->coll = link_.hdr.coll;
  r->seq = link_.hdr.seq;
  r->round = link_.hdr.round;
  r->sig = link_.hdr.sig;
  if (choice == 0 || len > RECV_LIMIT) {
    /* Another round than the one that came. */
    r->round++;
    r->iov = st.iov;
    r->niov = 1;
    st.iov[0].base = NULL;
    st.iov[0].len = 0;
    r->len = 0;
    crnet__link_post_recv(&link_, r);
    if (!r->done || r->status != CRNET_EMISMATCH || !link_.failed)
      fuzz_fail("a mismatching receive did not fail the link");
    return true;
  }
  st.buf = malloc(len > 0 ? len : 1);
  if (st.buf == NULL)
    fuzz_fail("out of memory");
  {
    uint32_t niov = 1 + fuzz_prng(&st.state) % 3;
    uint64_t a = len ? fuzz_prng(&st.state) % (len + 1) : 0;
    uint64_t b = len ? fuzz_prng(&st.state) % (len + 1) : 0;
    if (a > b) {
      uint64_t t = a;
      a = b;
      b = t;
    }
    if (niov == 1)
      a = b = len;
    else if (niov == 2)
      b = len;
    st.iov[0] = (crnet__iov){st.buf, a};
    st.iov[1] = (crnet__iov){st.buf + a, b - a};
    st.iov[2] = (crnet__iov){st.buf + b, len - b};
    r->iov = st.iov;
    r->niov = niov;
    r->len = len;
  }
  crnet__link_post_recv(&link_, r);
  if (choice == 2 && !r->done) {
    /* Taken back (the collective failed elsewhere): done with an error;
     * the link fails only if part of the payload went into it. */
    uv_run(&loop, UV_RUN_NOWAIT);
    if (!r->done) {
      crnet__link_cancel_recv(&link_, r);
      if (!r->done || r->status == 0)
        fuzz_fail("a cancelled receive is not done with an error");
    }
    return true;
  }
  if (r->done && r->status != 0 && !link_.failed)
    fuzz_fail("a receive failed (%d) on a link that did not", r->status);
  return true;
}

static size_t unread(void) {
  uv_os_fd_t fd;
  int n = 0;
  if (uv_fileno((uv_handle_t *)&link_.tcp, &fd) != 0 ||
      ioctl(fd, FIONREAD, &n) != 0)
    return 0;
  return (size_t)n;
}

/* Lets the link read and handle what has been sent, posting receives as
 * DATA frames park. */
static void drive(void) {
  for (int turn = 0; turn < 64; turn++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (st.refused_park && (!link_.failed || st.error_status != CRNET_EMISMATCH))
      fuzz_fail("a frame refused by on_parked did not fail the link");
    if (link_over())
      return;
    if (parked()) {
      if (!post_receive())
        return;
      continue;
    }
    if (unread() == 0 || !link_.reading)
      return;
  }
}

/* Sends n bytes and lets the link handle them. False once the link failed
 * or stopped reading for good. */
static bool deliver(int fd, const uint8_t *p, size_t n) {
  int stalled = 0;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      stalled = 0;
    } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return false;
    } else if (++stalled > 8) {
      return false;
    }
    drive();
    if (link_over())
      return false;
  }
  return true;
}

static const uint32_t chunk_sizes[] = {
    1,   2,    3,    4,    5,    7,    8,    13,   31,    32,   33,
    47,  48,   49,   64,   100,  255,  256,  1000, 4095,  4096, 4097,
    8191, 8192, 20000, 65535, 65536};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t cfg = fuzz_u8(&in);
  uint64_t chunk_state = fuzz_u8(&in);
  bool encrypt = (cfg & 1) != 0;
  crnet__handshake hs;
  crnet__seal *tx = NULL;
  uint8_t *rec = NULL;
  uint32_t record = 0;
  struct sockaddr_un sun;
  int fd;

  memset(&st, 0, sizeof st);
  st.state = fuzz_u8(&in);
  fuzz_random_seed(cfg);
  encrypt_mode = encrypt ? CRNET__HS_ENCRYPT : CRNET__HS_PLAIN;

  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0)
    fuzz_fail("cannot connect to %s: %s", path, strerror(errno));
  if (!fuzz_run_until(&loop, is_accepted, NULL))
    fuzz_fail("connection never accepted");
  if (fuzz_handshake(&loop, fd, &hs, CRNET__HS_MESH, 1, 0, 2, encrypt_mode,
                     (cfg & 2) != 0) != 0)
    fuzz_fail("handshake refused: %s", hs.why ? hs.why : "no REPLY");
  if (!fuzz_run_until(&loop, is_ready, NULL) || st.ready_status != 0)
    fuzz_fail("the link did not complete a good handshake: %s", link_.why);
  if (encrypt) {
    if (crnet__seal_new(&tx, hs.cipher, hs.tx_key) != 0)
      fuzz_fail("no record layer");
    rec = malloc(CRNET__SEAL_RECORD_BYTES_MAX);
    if (rec == NULL)
      fuzz_fail("out of memory");
  }
  crnet__hs_wipe(&hs);

  while (in.n > 0) {
    uint32_t want = chunk_sizes[fuzz_prng(&chunk_state) %
                                (sizeof chunk_sizes / sizeof chunk_sizes[0])];
    size_t got;
    const uint8_t *p;
    bool ok;
    if (encrypt && want > CRNET__SEAL_RECORD_MAX)
      want = CRNET__SEAL_RECORD_MAX;
    p = fuzz_take(&in, want, &got);
    if (!encrypt) {
      ok = deliver(fd, p, got);
    } else {
      memcpy(rec + CRNET__SEAL_LEN_BYTES, p, got);
      if (crnet__seal_record(tx, rec, rec + CRNET__SEAL_LEN_BYTES,
                             (uint32_t)got) != 0)
        fuzz_fail("cannot seal");
      if ((cfg & 4) && record == (uint32_t)(cfg >> 4)) {
        rec[fuzz_prng(&chunk_state) % (got + CRNET__SEAL_OVERHEAD)] ^= 0x40;
        st.corrupted_sent = true;
      }
      record++;
      ok = deliver(fd, rec, got + CRNET__SEAL_OVERHEAD);
    }
    if (!ok)
      break;
  }
  if (encrypt && (cfg & 8) && !link_over()) {
    uint8_t bad[CRNET__SEAL_LEN_BYTES];
    crnet__put_le32(bad, cfg & 0x10 ? 0 : CRNET__SEAL_RECORD_MAX + 1);
    st.corrupted_sent = true;
    (void)deliver(fd, bad, sizeof bad);
  }

  /* An altered record, or a record length out of range, is fatal to the
   * link once it has read and opened everything that came. */
  if (st.corrupted_sent && !link_over() && link_.reading && unread() == 0 &&
      link_.raw_off == link_.raw_len)
    fuzz_fail("a link took an altered record");

  if (st.refused_park && st.error_status != CRNET_EMISMATCH)
    fuzz_fail("a frame refused by on_parked did not fail the link");

  /* End of stream: the link sees EOF if it still reads; in any case its
   * owner closes it. */
  close(fd);
  fuzz_settle(&loop);
  if (!st.closed)
    crnet__link_close(&link_);
  if (!fuzz_run_until(&loop, is_closed, NULL))
    fuzz_fail("the link never closed");
  if (st.req.iov != NULL && !st.req.done)
    fuzz_fail("a posted receive outlived its link");
  crnet__seal_free(tx);
  free(rec);
  free(st.buf);
  return 0;
}
