/* Links: the handshake driver and the frame reader/writer over libuv.
 * See link.h for the contract. The whole file runs on the loop thread. */
#include "link.h"
#include "link_internal.h"
#include "link_shm.h"
#include "log.h"
#include "secret.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "crnet.h"
#include "netaddr.h"

/* The largest single read handed to libuv: read(2) moves at most about 2 GiB
 * per call anyway, and libuv's buffer length must fit its ssize_t result. */
#define READ_CHUNK_MAX ((uint64_t)1 << 30)

/* Encrypted links. The record buffer takes four whole records, so one read
 * brings several (writing them: link_write.c). */
#define RAW_CAP (4 * CRNET__SEAL_RECORD_BYTES_MAX)
#define SEALED_STAGE_CAP (CRNET__SEAL_RECORD_MAX + CRNET__LINK_STAGE)

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void prefault(const crnet__recv_req *r);

/* The handshake state (the job key, nonces, ephemeral and session keys)
 * lives in secret memory and only while the handshake runs. */
_Static_assert(sizeof(crnet__handshake) <= CRNET__SECRET_MAX,
               "the handshake state fits a secret block");
static void drop_handshake(crnet__link *l) {
  if (l->hs == NULL)
    return;
  crnet__hs_wipe(l->hs);
  crnet__secret_free(l->hs);
  l->hs = NULL;
}

static int new_handshake(crnet__link *l) {
  l->hs = crnet__secret_alloc(sizeof *l->hs);
  if (l->hs != NULL)
    return 0;
  snprintf(l->why, sizeof l->why, "out of memory");
  l->failed = true;
  crnet__link_close(l);
  return CRNET_ENOMEM;
}
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

void crnet__format_sockaddr(const struct sockaddr *sa, char *buf, size_t n) {
  char ip[64] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    uv_ip4_name(in, ip, sizeof ip);
    port = ntohs(in->sin_port);
    snprintf(buf, n, "%s:%d", ip, port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    uv_ip6_name(in6, ip, sizeof ip);
    port = ntohs(in6->sin6_port);
    snprintf(buf, n, "[%s]:%d", ip, port);
  } else {
    snprintf(buf, n, "?");
  }
}

static void free_early(crnet__link *l);

void crnet__link_handle_closed(uv_handle_t *h) {
  crnet__link *l = h->data;
  if (--l->handles_open > 0)
    return;
  crnet__link_shm_free(l);
  free(l->control);
  l->control = NULL;
  free_early(l);
  drop_handshake(l);
  crnet__link_note_io(l);
  crnet__link_fail_queued(l, CRNET_EPEER);
  crnet__seal_free(l->tx);
  crnet__seal_free(l->rx);
  l->tx = l->rx = NULL;
  /* Plaintext of the peer's frames: not secret from this process, but no
   * reason to leave it in freed memory either. */
  if (l->stage != l->stage_buf) {
    crnet__wipe(l->stage, l->stage_cap);
    free(l->stage);
    l->stage = l->stage_buf;
  }
  free(l->raw);
  l->raw = NULL;
  crnet__link_free_spares(l);
  if (l->cb->on_closed != NULL)
    l->cb->on_closed(l);
}

/* Reading is of the TCP stream, or once the peer switched, of the shared
 * ring (TCP is then watched for its end alone, link_shm.c). */
void crnet__link_start_reading(crnet__link *l) {
  if (l->reading || l->state == CRNET__LINK_CONNECTING)
    return;
  if (crnet__link_shm_rx(l)) {
    crnet__link_shm_read_start(l, on_alloc, on_read);
    l->reading = true;
  } else if (uv_read_start((uv_stream_t *)&l->tcp, on_alloc, on_read) == 0) {
    l->reading = true;
  }
}

static void start_reading(crnet__link *l) { crnet__link_start_reading(l); }

static void stop_reading(crnet__link *l) {
  if (!l->reading)
    return;
  if (crnet__link_shm_rx(l))
    crnet__link_shm_read_stop(l);
  else
    uv_read_stop((uv_stream_t *)&l->tcp);
  l->reading = false;
}

/* Completes the receive the current frame goes to, successfully or not;
 * a failure completes every posted receive too. A frame being drained
 * (see start_drain) was no receive's yet: its buffer goes. */
static void finish_recv(crnet__link *l, int status) {
  crnet__recv_req *r = l->recv;
  crnet__link_note_io(l);
  if (status != 0)
    while (l->posted != NULL) {
      crnet__recv_req *q = l->posted;
      l->posted = q->next;
      q->next = NULL;
      q->status = status;
      q->done = true;
    }
  if (r == NULL)
    return;
  l->recv = NULL;
  if (r == &l->drain) {
    free(l->drain_iov.base);
    l->drain_iov.base = NULL;
    return;
  }
  r->status = status;
  r->done = true;
}

static void free_early(crnet__link *l) {
  while (l->early != NULL) {
    crnet__early *e = l->early;
    l->early = e->next;
    free(e->payload);
    free(e);
  }
  l->early_tail = NULL;
}

/* The first failure of an established link: stop reading, fail the posted
 * receive, tell the owner once. */
void crnet__link_fail(crnet__link *l, int status, const char *why) {
  crnet__link_note_io(l);
  if (l->failed)
    return;
  l->failed = true;
  snprintf(l->why, sizeof l->why, "%s", why);
  stop_reading(l);
  finish_recv(l, status);
  if (l->cb->on_error != NULL)
    l->cb->on_error(l, status, l->why);
}

static void on_write_grace(uv_timer_t *t) {
  crnet__link *l = t->data;
  crnet__link_fail(l, CRNET_EPEER, l->write_why);
}

void crnet__link_write_failed(crnet__link *l, const char *why) {
  if (l->failed || l->write_broken)
    return;
  if (!l->reading || l->state != CRNET__LINK_READY) {
    crnet__link_fail(l, CRNET_EPEER, why);
    return;
  }
  l->write_broken = true;
  snprintf(l->write_why, sizeof l->write_why, "%s", why);
  crnet__link_note_io(l);
  uv_timer_start(&l->timer, on_write_grace, CRNET__WRITE_FAIL_GRACE_MS, 0);
}

/* --- the handshake ------------------------------------------------------ */

static void hs_fail(crnet__link *l, int status, const char *why) {
  if (l->failed)
    return;
  l->failed = true;
  snprintf(l->why, sizeof l->why, "%s", why);
  stop_reading(l);
  uv_timer_stop(&l->timer);
  drop_handshake(l);
  l->cb->on_ready(l, status);
}

/* Sets up the record layer with the handshake's session keys. */
static int start_sealing(crnet__link *l) {
  crnet__handshake *hs = l->hs;
  uint8_t *stage;
  if (crnet__seal_new(&l->tx, hs->cipher, hs->tx_key) != 0 ||
      crnet__seal_new(&l->rx, hs->cipher, hs->rx_key) != 0)
    return -1;
  l->raw = crnet__malloc(RAW_CAP);
  stage = crnet__malloc(SEALED_STAGE_CAP);
  if (l->raw == NULL || stage == NULL) {
    free(stage);
    return -1;
  }
  l->stage = stage;
  l->stage_cap = SEALED_STAGE_CAP;
  l->cipher = hs->cipher;
  return 0;
}

static void hs_succeed(crnet__link *l) {
  l->peer = l->hs->peer;
  l->purpose = l->hs->purpose;
  l->stream = l->hs->stream;
  if (l->hs->encrypt && start_sealing(l) != 0) {
    hs_fail(l, CRNET_ENOMEM, "out of memory for the record layer");
    return;
  }
  drop_handshake(l);
  uv_timer_stop(&l->timer);
  l->state = CRNET__LINK_READY;
  atomic_store(&l->carriage, CRNET_LINK_TCP);
  l->stage_off = l->stage_len = 0;
  l->have_header = false;
  l->cb->on_ready(l, 0);
}

static void on_hs_timeout(uv_timer_t *t) {
  crnet__link *l = t->data;
  hs_fail(l, CRNET_ETIMEDOUT, "handshake not completed in time");
}

void crnet__link_renew_deadline(crnet__link *l, uint64_t ms) {
  if ((l->state == CRNET__LINK_CONNECTING ||
       l->state == CRNET__LINK_HANDSHAKE) &&
      !l->failed && uv_is_active((uv_handle_t *)&l->timer))
    uv_timer_start(&l->timer, on_hs_timeout, ms, 0);
}

static void on_hs_written(uv_write_t *w, int status) {
  crnet__link *l = w->data;
  if (status < 0 && status != UV_ECANCELED && l->state == CRNET__LINK_HANDSHAKE)
    hs_fail(l, CRNET_EIO, uv_strerror(status));
}

static int hs_write(crnet__link *l, uv_write_t *w, uint8_t *buf, size_t len) {
  uv_buf_t b = {.base = (char *)buf, .len = len};
  w->data = l;
  return uv_write(w, (uv_stream_t *)&l->tcp, &b, 1, on_hs_written);
}

/* A whole handshake message is in hs_in: take the next step. One linear
 * sequence with one failure exit, as the protocol is one linear exchange. */
static void hs_step(crnet__link *l) {
  int rc;
  if (l->initiator) {
    rc = crnet__hs_read_reply(l->hs, l->hs_in, l->hs_fin);
    if (rc != 0)
      goto fail;
    if (hs_write(l, &l->hs_write_fin, l->hs_fin, sizeof l->hs_fin) != 0)
      goto fail_io;
    hs_succeed(l);
    return;
  }
  if (l->hs_want == CRNET__HS_HELLO_SIZE) {
    rc = crnet__hs_read_hello(l->hs, l->hs_in, l->hs_out);
    if (rc != 0)
      goto fail;
    if (hs_write(l, &l->hs_write, l->hs_out, CRNET__HS_REPLY_SIZE) != 0)
      goto fail_io;
    l->hs_want = CRNET__HS_FINISH_SIZE;
    l->hs_got = 0;
    return;
  }
  rc = crnet__hs_read_finish(l->hs, l->hs_in);
  if (rc != 0)
    goto fail;
  hs_succeed(l);
  return;

fail:
  hs_fail(l, CRNET_EAUTH, l->hs->why != NULL ? l->hs->why : "bad handshake");
  return;
fail_io:
  hs_fail(l, CRNET_EIO, "cannot write handshake");
}

static void on_connect(uv_connect_t *req, int status) {
  crnet__link *l = req->data;
  char why[128];
  if (l->state == CRNET__LINK_CLOSING || l->hs == NULL)
    return;
  if (status < 0) {
    snprintf(why, sizeof why, "cannot connect: %s", uv_strerror(status));
    hs_fail(l, CRNET_EIO, why);
    return;
  }
  l->state = CRNET__LINK_HANDSHAKE;
  uv_tcp_nodelay(&l->tcp, 1);
  crnet__hs_write_hello(l->hs, l->hs_out);
  if (hs_write(l, &l->hs_write, l->hs_out, CRNET__HS_HELLO_SIZE) != 0) {
    hs_fail(l, CRNET_EIO, "cannot write handshake");
    return;
  }
  l->hs_want = CRNET__HS_REPLY_SIZE;
  l->hs_got = 0;
  start_reading(l);
}

/* Opens the link's two handles. libuv cannot fail either init on Unix (a
 * plain AF_UNSPEC tcp handle allocates nothing), so from here on every path
 * ends in on_closed. */
static void link_init(crnet__link *l, uv_loop_t *loop,
                      const crnet__link_callbacks *cb, void *owner) {
  memset(l, 0, sizeof *l);
  l->stage = l->stage_buf;
  l->stage_cap = sizeof l->stage_buf;
  l->cb = cb;
  l->owner = owner;
  l->peer = -1;
  if (uv_tcp_init(loop, &l->tcp) != 0 || uv_timer_init(loop, &l->timer) != 0)
    abort();
  l->tcp.data = l;
  l->timer.data = l;
  l->handles_open = 2;
}

int crnet__link_connect(crnet__link *l, uv_loop_t *loop,
                        const struct sockaddr *addr,
                        const crnet__link_callbacks *cb, void *owner,
                        const uint8_t key[CRNET__KEY_BYTES], uint8_t purpose,
                        int32_t self, int32_t expected_peer, int32_t size,
                        uint64_t hs_timeout_ms) {
  return crnet__link_connect_from(l, loop, addr, NULL, cb, owner, key,
                                  purpose, self, expected_peer, size,
                                  hs_timeout_ms);
}

int crnet__link_connect_from(crnet__link *l, uv_loop_t *loop,
                             const struct sockaddr *addr,
                             const struct sockaddr *source,
                             const crnet__link_callbacks *cb, void *owner,
                             const uint8_t key[CRNET__KEY_BYTES],
                             uint8_t purpose, int32_t self,
                             int32_t expected_peer, int32_t size,
                             uint64_t hs_timeout_ms) {
  int rc = 0;
  link_init(l, loop, cb, owner);
  l->self = self;
  l->initiator = true;
  l->state = CRNET__LINK_CONNECTING;
  crnet__format_sockaddr(addr, l->addr, sizeof l->addr);
  if (new_handshake(l) != 0)
    return CRNET_ENOMEM;
  crnet__hs_init_initiator(l->hs, key, purpose, self, expected_peer, size);
  l->connect.data = l;
  if (source != NULL) {
    struct sockaddr_storage src;
    char name[64];
    memcpy(&src, source, source->sa_family == AF_INET6
                             ? sizeof(struct sockaddr_in6)
                             : sizeof(struct sockaddr_in));
    crnet__addr_set_port(&src, 0);
    rc = uv_tcp_bind(&l->tcp, (struct sockaddr *)&src, 0);
    if (rc != 0) {
      uv_ip_name((struct sockaddr *)&src, name, sizeof name);
      snprintf(l->why, sizeof l->why, "cannot bind to %s: %s", name,
               uv_strerror(rc));
      l->failed = true;
      crnet__link_close(l);
      return CRNET_EIO;
    }
  }
  rc = uv_tcp_connect(&l->connect, &l->tcp, addr, on_connect);
  if (rc != 0) {
    snprintf(l->why, sizeof l->why, "cannot connect: %s", uv_strerror(rc));
    l->failed = true;
    crnet__link_close(l);
    return CRNET_EIO;
  }
  uv_timer_start(&l->timer, on_hs_timeout, hs_timeout_ms, 0);
  return 0;
}

int crnet__link_accept(crnet__link *l, uv_loop_t *loop, uv_stream_t *server,
                       const crnet__link_callbacks *cb, void *owner,
                       const uint8_t key[CRNET__KEY_BYTES], int32_t self,
                       int32_t size, uint64_t hs_timeout_ms) {
  struct sockaddr_storage ss;
  int sslen = sizeof ss;
  link_init(l, loop, cb, owner);
  l->self = self;
  l->initiator = false;
  l->state = CRNET__LINK_HANDSHAKE;
  /* Accepted first in any case: libuv stops watching a listener until its
   * pending connection is taken. */
  if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0) {
    l->failed = true;
    crnet__link_close(l);
    return CRNET_EIO;
  }
  if (new_handshake(l) != 0)
    return CRNET_ENOMEM;
  if (uv_tcp_getpeername(&l->tcp, (struct sockaddr *)&ss, &sslen) == 0)
    crnet__format_sockaddr((struct sockaddr *)&ss, l->addr, sizeof l->addr);
  else
    snprintf(l->addr, sizeof l->addr, "?");
  uv_tcp_nodelay(&l->tcp, 1);
  crnet__hs_init_responder(l->hs, key, self, size);
  l->hs_want = CRNET__HS_HELLO_SIZE;
  l->hs_got = 0;
  uv_timer_start(&l->timer, on_hs_timeout, hs_timeout_ms, 0);
  start_reading(l);
  return 0;
}

void crnet__link_set_encrypt(crnet__link *l, uint8_t mode) {
  /* A link that failed to start has no handshake to set. */
  if (l->hs != NULL)
    crnet__hs_set_encrypt(l->hs, mode);
}

void crnet__link_set_streams(crnet__link *l, uint8_t stream,
                             uint8_t streams) {
  /* A link that failed to start has no handshake to set. */
  if (!l->failed && l->hs != NULL && (l->state == CRNET__LINK_CONNECTING ||
                     l->state == CRNET__LINK_HANDSHAKE))
    crnet__hs_set_streams(l->hs, stream, streams);
}

/* --- reading frames -----------------------------------------------------
 *
 * After the handshake, bytes arrive in one of three places: the staging
 * buffer (between frames, and for the start of every frame), the posted
 * receive's own memory (the rest of a DATA payload), or the control buffer
 * (the rest of a control frame). process_stage() parses what the staging
 * buffer holds. */

static void process_stage(crnet__link *l);

/* Whether reading, or parsing what is staged, may go on: a callback may
 * have failed or closed the link. */
static bool link_usable(const crnet__link *l) {
  return !l->failed && !l->draining && l->state == CRNET__LINK_READY;
}

/* A DATA frame's header has come, its receive is not posted yet. */
static bool parked(const crnet__link *l) {
  return l->have_header && l->hdr.kind == CRNET__FRAME_DATA && l->recv == NULL;
}

static bool stage_full(const crnet__link *l) {
  return l->stage_len - l->stage_off == l->stage_cap;
}

/* The posted receive's next byte: skips iovs that are filled. */
static uint8_t *recv_cursor(crnet__recv_req *r, uint64_t *room) {
  while (r->iov[r->cur].len == r->cur_got) {
    r->cur++;
    r->cur_got = 0;
  }
  *room = r->iov[r->cur].len - r->cur_got;
  return (uint8_t *)r->iov[r->cur].base + r->cur_got;
}

/* Whether the current frame's payload goes to l->recv: a DATA frame
 * whose receive is there, or a message the owner matched (on_message). */
static bool to_recv(const crnet__link *l) {
  return l->have_header && l->recv != NULL &&
         (l->hdr.kind == CRNET__FRAME_DATA || l->msg_recv);
}

static bool data_payload_pending(const crnet__link *l) {
  return to_recv(l) && l->recv->got < l->recv->len;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  /* Bytes read while draining a closing link are thrown away. */
  static _Thread_local char sink[4096];
  crnet__link *l = h->data;
  uint64_t want;
  (void)suggested;
  if (l->draining) {
    buf->base = sink;
    buf->len = sizeof sink;
    return;
  }
  if (l->state == CRNET__LINK_HANDSHAKE) {
    buf->base = (char *)l->hs_in + l->hs_got;
    buf->len = l->hs_want - l->hs_got;
    return;
  }
  if (l->rx != NULL) {
    /* Encrypted: everything goes through the record buffer. Reading stops
     * before it is full (see pump_records), so there is always room. What
     * is not opened yet moves to the front only when a whole record would
     * no longer fit behind it, not at every read. */
    if (l->raw_off == l->raw_len) {
      l->raw_off = l->raw_len = 0;
    } else if (RAW_CAP - l->raw_len < CRNET__SEAL_RECORD_BYTES_MAX) {
      memmove(l->raw, l->raw + l->raw_off, l->raw_len - l->raw_off);
      l->raw_len -= l->raw_off;
      l->raw_off = 0;
    }
    assert(l->raw_len < RAW_CAP);
    buf->base = (char *)l->raw + l->raw_len;
    buf->len = RAW_CAP - l->raw_len;
    return;
  }
  if (data_payload_pending(l)) {
    buf->base = (char *)recv_cursor(l->recv, &want);
  } else if (l->have_header && l->hdr.kind != CRNET__FRAME_DATA &&
             !to_recv(l)) {
    want = l->hdr.length - l->control_got;
    buf->base = (char *)l->control + l->control_got;
  } else {
    /* Between frames, or while a DATA frame is parked: fill the staging
     * buffer, after moving what is left of it to the front (reading stops
     * once it is full, see process_stage). */
    uint32_t left = l->stage_len - l->stage_off;
    assert(left < l->stage_cap);
    memmove(l->stage, l->stage + l->stage_off, left);
    l->stage_off = 0;
    l->stage_len = left;
    buf->base = (char *)l->stage + left;
    buf->len = l->stage_cap - left;
    return;
  }
  buf->len = (size_t)(want < READ_CHUNK_MAX ? want : READ_CHUNK_MAX);
}

static const char *coll_name(uint8_t coll) {
  return crnet_collective_name((crnet_collective)coll);
}

/* Checks a DATA header against the receive it is for: false, with the
 * link failed, on a mismatch. */
static bool frame_matches(crnet__link *l, const crnet__frame_header *h,
                          const crnet__recv_req *r) {
  char why[sizeof l->why];
  if (h->coll == r->coll && h->seq == r->seq && h->round == r->round &&
      h->sig == r->sig && h->length == r->len)
    return true;
  l->bad_hdr = *h;
  snprintf(why, sizeof why,
           "rank %d sent %s #%" PRIu64 " round %" PRIu32 " (signature %08" PRIx32
           ", %" PRIu64 " bytes) but rank %d expected %s #%" PRIu64
           " round %" PRIu32 " (signature %08" PRIx32 ", %" PRIu64 " bytes)",
           (int)l->peer, coll_name(h->coll), h->seq, h->round, h->sig,
           h->length, (int)l->self, coll_name(r->coll), r->seq, r->round,
           r->sig, r->len);
  crnet__link_fail(l, CRNET_EMISMATCH, why);
  return false;
}

static bool header_matches(crnet__link *l) {
  return frame_matches(l, &l->hdr, l->recv);
}

/* The posted receive of context ctx, taken off the list, or NULL. */
static crnet__recv_req *take_posted(crnet__link *l, uint32_t ctx) {
  for (crnet__recv_req **at = &l->posted; *at != NULL; at = &(*at)->next)
    if ((*at)->ctx == ctx) {
      crnet__recv_req *r = *at;
      *at = r->next;
      r->next = NULL;
      return r;
    }
  return NULL;
}

/* Copies a drained frame's payload into receive r and completes it. */
static void deliver_early(crnet__link *l, const crnet__frame_header *h,
                          const uint8_t *payload, crnet__recv_req *r) {
  uint64_t at = 0;
  if (!frame_matches(l, h, r)) {
    if (!r->done) {
      r->status = CRNET_EMISMATCH;
      r->done = true;
    }
    return;
  }
  for (uint32_t i = 0; i < r->niov && at < h->length; i++) {
    memcpy(r->iov[i].base, payload + at, r->iov[i].len);
    at += r->iov[i].len;
  }
  r->got = r->len;
  r->status = 0;
  r->done = true;
  crnet__link_note_io(l);
}

/* A DATA frame that arrives before its receive is posted is shown to the
 * owner at once, so that a frame no later receive can match (a collective
 * this rank has finished, or another call with the same sequence number)
 * fails the link now instead of waiting parked for a receive that will
 * never come. */
static int parked_check(crnet__link *l) {
  int a = l->cb->on_parked != NULL ? l->cb->on_parked(l, &l->hdr)
                                   : CRNET__PARK_WAIT;
  if (a == CRNET__PARK_REFUSE) {
    l->bad_hdr = l->hdr;
    crnet__link_fail(l, CRNET_EMISMATCH, "a frame no receive of this rank will match");
  }
  return a;
}

/* Reads the parked frame's payload into memory of its own (see link.h,
 * early frames), so that the frames behind it can reach the receives
 * posted for other comms; discard: the frame's comm has failed, and the
 * payload is dropped once read. False if out of memory (the link fails). */
static bool start_drain_len(crnet__link *l, bool discard, uint64_t len) {
  void *buf = crnet__malloc(len > 0 ? len : 1);
  if (buf == NULL || len > SIZE_MAX) {
    free(buf);
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a frame that came early");
    return false;
  }
  crnet__debug("drain %s frame ctx %u len %llu", discard ? "discard" : "keep", (unsigned)l->hdr.ctx, (unsigned long long)len);
  l->drain_iov.base = buf;
  l->drain_iov.len = len;
  memset(&l->drain, 0, sizeof l->drain);
  l->drain.iov = &l->drain_iov;
  l->drain.niov = 1;
  l->drain.len = len;
  l->drain_discard = discard;
  l->recv = &l->drain;
  return true;
}

static bool start_drain(crnet__link *l, bool discard) {
  return start_drain_len(l, discard, l->hdr.length);
}

/* A DATA frame whose receive is not posted: parks, or drains when a
 * receive of another comm is posted behind it or point-to-point messages
 * may be (link.h, drain_parked), or its comm failed. True if its payload
 * is to be read now (draining). */
static bool park_or_drain(crnet__link *l) {
  int a = parked_check(l);
  if (a == CRNET__PARK_REFUSE)
    return false;
  if (a == CRNET__PARK_DISCARD || l->posted != NULL ||
      (l->drain_parked != NULL &&
       atomic_load_explicit(l->drain_parked, memory_order_relaxed) > 0))
    return start_drain(l, a == CRNET__PARK_DISCARD);
  return false;
}

void crnet__link_set_liveness(crnet__link *l, uint64_t ms) {
  uv_os_fd_t fd;
  unsigned idle_s;
  int v;
  if (ms == 0 || uv_fileno((uv_handle_t *)&l->tcp, &fd) != 0)
    return;
  idle_s = ms / 4000 > 0 ? (unsigned)(ms / 4000) : 1;
  /* Best effort: a kernel without one of these options still has the
   * others, and the collective timeout (CRNET_TIMEOUT) bounds the rest. */
  uv_tcp_keepalive(&l->tcp, 1, idle_s);
  v = (int)idle_s;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, sizeof v);
  v = 4;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v, sizeof v);
  v = ms > INT_MAX ? INT_MAX : (int)ms;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &v, sizeof v);
}

static void process_stage(crnet__link *l);
static void pump_records(crnet__link *l);

/* Parses on after the parked frame began to drain. */
static void resume_after_drain(crnet__link *l) {
  if (l->rx != NULL)
    pump_records(l);
  else if (link_usable(l)) {
    process_stage(l);
    if (link_usable(l) && !(parked(l) && stage_full(l)))
      start_reading(l);
  }
}

void crnet__link_recheck_parked(crnet__link *l) {
  if (link_usable(l) && parked(l) && park_or_drain(l))
    resume_after_drain(l);
}

/* A drained frame is in: to the receive of its comm if one is posted by
 * now, else kept with the early frames. */
static void drain_done(crnet__link *l) {
  crnet__frame_header h = l->hdr;
  uint8_t *payload = l->drain_iov.base;
  crnet__recv_req *r;
  crnet__early *e;
  l->drain_iov.base = NULL;
  l->recv = NULL;
  l->have_header = false;
  crnet__link_note_io(l);
  if (l->drain_discard) {
    free(payload);
    return;
  }
  r = take_posted(l, h.ctx);
  if (r != NULL) {
    deliver_early(l, &h, payload, r);
    free(payload);
    return;
  }
  e = crnet__malloc(sizeof *e);
  if (e == NULL) {
    free(payload);
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a frame that came early");
    return;
  }
  e->next = NULL;
  e->hdr = h;
  e->payload = payload;
  if (l->early_tail != NULL)
    l->early_tail->next = e;
  else
    l->early = e;
  l->early_tail = e;
}

static void data_done(crnet__link *l) {
  if (l->recv == &l->drain) {
    drain_done(l);
    return;
  }
  l->have_header = false;
  l->msg_recv = false;
  finish_recv(l, 0);
}

static void control_done(crnet__link *l) {
  uint8_t *payload = l->control;
  crnet__frame_header h = l->hdr;
  l->control = NULL;
  l->have_header = false;
  if (h.kind == CRNET__FRAME_SHM_OFFER || h.kind == CRNET__FRAME_SHM_SWITCH ||
      h.kind == CRNET__FRAME_SHM_DECLINE)
    crnet__link_shm_control(l, &h, payload); /* the link's own business */
  else
    l->cb->on_control(l, &h, payload);
  free(payload);
}

/* The next header is at the front of the staging buffer: decode it and
 * prepare for its payload. False if the link failed, or a DATA frame must
 * wait for its receive (parked: reading stops). */
static bool header_arrived(crnet__link *l) {
  const char *why = NULL;
  char msg[sizeof l->why];
  int rc = crnet__frame_decode(l->stage + l->stage_off, UINT64_MAX, &l->hdr,
                               &why);
  l->stage_off += CRNET__FRAME_HEADER_SIZE;
  if (rc != 0) {
    snprintf(msg, sizeof msg, "rank %d sent a malformed frame (%s)",
             (int)l->peer, why);
    crnet__link_fail(l, CRNET_EIO, msg);
    return false;
  }
  l->have_header = true;
  if (l->hdr.kind == CRNET__FRAME_DATA) {
    /* Its comm's receive, if posted; an early frame of the same comm
     * never waits while one is (post_recv takes those first). */
    l->recv = take_posted(l, l->hdr.ctx);
    if (l->recv == NULL)
      return park_or_drain(l); /* false: parked, see process_stage */
    return header_matches(l);
  }
  if ((l->hdr.kind == CRNET__FRAME_MSG || l->hdr.kind == CRNET__FRAME_RDATA) &&
      l->cb->on_message != NULL) {
    /* A message: into the receive the owner matched it to, if any (the
     * program's own buffer); else whole into memory, as a control frame. */
    crnet__recv_req *r = l->cb->on_message(l, &l->hdr);
    if (!link_usable(l))
      return false;
    if (r != NULL) {
      if (r->len != l->hdr.length) {
        crnet__link_fail(l, CRNET_EIO, "a message's receive has the wrong length");
        return false;
      }
      r->got = r->cur = 0;
      r->cur_got = 0;
      r->done = false;
      r->status = 0;
      prefault(r);
      l->recv = r;
      l->msg_recv = true;
      return true;
    }
  }
  if (l->hdr.length > CRNET__CONTROL_MAX) {
    snprintf(msg, sizeof msg, "rank %d sent an oversized control frame",
             (int)l->peer);
    crnet__link_fail(l, CRNET_EIO, msg);
    return false;
  }
  l->control = crnet__malloc(l->hdr.length > 0 ? l->hdr.length : 1);
  l->control_got = 0;
  if (l->control == NULL) {
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a control frame");
    return false;
  }
  return true;
}

/* Moves staged payload bytes into the posted receive's scatter list. */
static void stage_to_recv(crnet__link *l) {
  crnet__recv_req *r = l->recv;
  while (r->got < r->len && l->stage_off < l->stage_len) {
    uint64_t room, n = l->stage_len - l->stage_off;
    uint8_t *to = recv_cursor(r, &room);
    if (n > room)
      n = room;
    memcpy(to, l->stage + l->stage_off, n);
    l->stage_off += (uint32_t)n;
    r->cur_got += n;
    r->got += n;
  }
}

/* Parses frames from the staging buffer while it holds them whole or in
 * part, as far as the posted receive allows. */
static void process_stage(crnet__link *l) {
  while (link_usable(l)) {
    if (!l->have_header) {
      if (l->stage_len - l->stage_off < CRNET__FRAME_HEADER_SIZE)
        break;
      if (!header_arrived(l))
        break;
    }
    if (l->hdr.kind == CRNET__FRAME_DATA || to_recv(l)) {
      if (l->recv == NULL)
        break; /* parked */
      stage_to_recv(l);
      if (l->recv->got < l->recv->len)
        break; /* the rest is read straight into place */
      data_done(l);
    } else {
      uint64_t n = l->stage_len - l->stage_off;
      if (n > l->hdr.length - l->control_got)
        n = l->hdr.length - l->control_got;
      memcpy(l->control + l->control_got, l->stage + l->stage_off, n);
      l->stage_off += (uint32_t)n;
      l->control_got += n;
      if (l->control_got < l->hdr.length)
        break;
      control_done(l);
    }
  }
  if (l->stage_off == l->stage_len)
    l->stage_off = l->stage_len = 0;
  /* Parked: the peer is a round ahead. The staging buffer takes what comes
   * until it is full (so small early frames cost no stop and restart of
   * reading); then the bytes stay in the socket, TCP flow control paces the
   * peer, and the receive, once posted, still gets the rest of a large
   * payload without a copy. */
  if (l->rx == NULL && parked(l) && stage_full(l))
    stop_reading(l);
}

static void record_failed(crnet__link *l, int rc) {
  char why[sizeof l->why];
  snprintf(why, sizeof why, "a frame from rank %d failed authentication%s",
           (int)l->peer, rc == CRNET_EAUTH ? "" : " (record count exhausted)");
  crnet__link_fail(l, CRNET_EAUTH, why);
}

/* Whether the next record's plaintext lies wholly inside the current region
 * of the DATA payload being received: then it can be opened right there,
 * with no copy through the staging buffer (the usual case for the records
 * of a large payload, which the sender cuts from the payload itself). */
static bool record_fits_recv(crnet__link *l, uint32_t len) {
  uint64_t room;
  if (!data_payload_pending(l) || l->recv->len - l->recv->got < len)
    return false;
  (void)recv_cursor(l->recv, &room);
  return room >= len;
}

/* Opens the next record into the posted receive (record_fits_recv). On a
 * failure the receive's bytes there are zeroed, and the receive fails with
 * the link. 1 or -1, as open_record. */
static int open_into_recv(crnet__link *l, uint8_t *rec, uint32_t len) {
  uint64_t room;
  crnet__recv_req *r = l->recv;
  int rc = crnet__seal_open(l->rx, rec, len, recv_cursor(r, &room));
  if (rc != 0) {
    record_failed(l, rc);
    return -1;
  }
  l->raw_off += len + CRNET__SEAL_OVERHEAD;
  r->got += len;
  r->cur_got += len;
  if (r->got == r->len)
    data_done(l);
  return 1;
}

/* Opens the record at the front of the record buffer into the staging
 * buffer, behind what is left there. 1: done; 0: not now (the record is not
 * whole yet, or there is no room for its plaintext); -1: the link failed. */
static int open_record(crnet__link *l) {
  uint32_t avail = l->raw_len - l->raw_off, left, len;
  uint8_t *rec = l->raw + l->raw_off;
  char why[sizeof l->why];
  int rc;
  if (avail < CRNET__SEAL_LEN_BYTES)
    return 0;
  len = crnet__seal_record_len(rec);
  if (len == 0) {
    snprintf(why, sizeof why, "rank %d sent a malformed record", (int)l->peer);
    crnet__link_fail(l, CRNET_EAUTH, why);
    return -1;
  }
  if (avail < len + CRNET__SEAL_OVERHEAD)
    return 0;
  left = l->stage_len - l->stage_off;
  if (left == 0 && record_fits_recv(l, len))
    return open_into_recv(l, rec, len);
  if (l->stage_cap - left < len)
    return 0;
  /* What is left of the stage goes to the front first, so the record can
   * be opened straight behind it. */
  memmove(l->stage, l->stage + l->stage_off, left);
  l->stage_off = 0;
  l->stage_len = left;
  rc = crnet__seal_open(l->rx, rec, len, l->stage + left);
  if (rc != 0) {
    record_failed(l, rc);
    return -1;
  }
  l->stage_len = left + len;
  l->raw_off += len + CRNET__SEAL_OVERHEAD;
  return 1;
}

/* Encrypted reading: parses what is staged and opens records while that
 * makes progress; reads on while the record buffer has room. */
static void pump_records(crnet__link *l) {
  do
    process_stage(l);
  while (link_usable(l) && open_record(l) > 0);
  if (!link_usable(l))
    return;
  if (l->raw_len - l->raw_off == RAW_CAP)
    stop_reading(l); /* parked, and the peer is further ahead still */
  else
    start_reading(l);
}
/* The connection ended while a DATA frame waits parked for its receive
 * (the peer was ahead). Frames staged behind it were never parsed, and one
 * may be the ABORT that says why the peer left: hand that to the owner
 * first, so that the job's error is the reason, not "closed its
 * connection". Only whole frames in the staging buffer are looked at; the
 * parked frame and any DATA frame after it are skipped, not delivered. */
static void deliver_staged_abort(crnet__link *l) {
  uint64_t pos = l->stage_off, len = l->stage_len;
  crnet__frame_header h;
  const char *why;
  if (!parked(l))
    return;
  for (uint64_t skip = l->hdr.length; len - pos >= skip;) {
    pos += skip;
    if (len - pos < CRNET__FRAME_HEADER_SIZE ||
        crnet__frame_decode(l->stage + pos, UINT64_MAX, &h, &why) != 0)
      return;
    pos += CRNET__FRAME_HEADER_SIZE;
    if (h.kind == CRNET__FRAME_ABORT && h.length <= len - pos) {
      l->cb->on_control(l, &h, l->stage + pos);
      return;
    }
    /* The peer went on in shared memory: what followed is in its ring. */
    if (h.kind == CRNET__FRAME_SHM_SWITCH) {
      crnet__link_shm_staged_abort(l);
      return;
    }
    skip = h.length;
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  crnet__link *l = s->data;
  char why[128];
  if (n == 0)
    return;
  crnet__link_note_io(l);
  if (n < 0) {
    if (l->draining) {
      crnet__link_close(l);
      return;
    }
    if (l->state == CRNET__LINK_HANDSHAKE) {
      hs_fail(l, CRNET_EAUTH,
              n == UV_EOF ? "closed during the handshake" : uv_strerror((int)n));
      return;
    }
    /* What other links' shared rings hold came first (link_shm.h). */
    crnet__link_shm_drain_loop(l);
    if (l->failed || l->state == CRNET__LINK_CLOSING)
      return;
    /* Records read but not opened may hold the ABORT too. */
    while (l->rx != NULL && parked(l) && !l->failed && open_record(l) > 0)
      ;
    deliver_staged_abort(l);
    if (n == UV_EOF)
      snprintf(why, sizeof why, "rank %d closed its connection", (int)l->peer);
    else
      snprintf(why, sizeof why, "connection to rank %d failed: %s",
               (int)l->peer, uv_strerror((int)n));
    crnet__link_fail(l, CRNET_EPEER, why);
    return;
  }
  if (l->draining)
    return;
  if (l->state == CRNET__LINK_HANDSHAKE) {
    l->hs_got += (size_t)n;
    /* A handshake that failed (its state is gone) reads no further. */
    if (l->hs_got == l->hs_want && l->hs != NULL)
      hs_step(l);
    return;
  }
  if (l->rx != NULL) {
    l->raw_len += (uint32_t)n;
    pump_records(l);
    return;
  }
  if (buf->base == (char *)l->stage + l->stage_len) {
    l->stage_len += (uint32_t)n;
    process_stage(l);
  } else if (to_recv(l)) {
    l->recv->got += (uint64_t)n;
    l->recv->cur_got += (uint64_t)n;
    if (l->recv->got == l->recv->len)
      data_done(l);
  } else {
    l->control_got += (uint64_t)n;
    if (l->control_got == l->hdr.length)
      control_done(l);
  }
}

bool crnet__link_recv_posted(const crnet__link *l, uint32_t ctx) {
  if (l->recv != NULL && l->recv != &l->drain && l->recv->ctx == ctx)
    return true;
  for (const crnet__recv_req *q = l->posted; q != NULL; q = q->next)
    if (q->ctx == ctx)
      return true;
  return false;
}

/* --- receive buffers the program has not touched yet --------------------
 *
 * A fresh buffer (malloc, numpy.empty, torch.empty) has no pages yet: the
 * kernel's copy of a receive into it takes a page fault on every page, one
 * at a time, inside the socket's receive path, and that is far slower than
 * faulting the same pages in one go: a 2 GiB float allreduce at p = 2
 * into a fresh receive buffer took 5.2 to 11 s, the next call 1.6 s, and
 * with this 2.5 to 3.5 s (docs/PERFORMANCE.md, "Known slow spot"). So a
 * large receive whose
 * pages look untouched has them faulted in, writable, before it is read
 * into; its contents do not change (in-place calls keep their data). The
 * look is three pages (first, middle, last) asked of mincore: on memory
 * already in use, populating would cost 13 us per MiB for nothing. */
#define PREFAULT_MIN ((uint64_t)1 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static void prefault_region(void *base, uint64_t len) {
  static atomic_bool unsupported; /* EINVAL: a kernel before 5.14 */
  const long page = sysconf(_SC_PAGESIZE);
  uintptr_t a, e, probe[3];
  unsigned char in_core;
  bool cold = false;
  if (len < PREFAULT_MIN || atomic_load_explicit(&unsupported,
                                                 memory_order_relaxed))
    return;
  a = ((uintptr_t)base + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
  e = ((uintptr_t)base + (uintptr_t)len) & ~((uintptr_t)page - 1);
  if (e <= a)
    return;
  probe[0] = a;
  probe[1] = a + (e - a) / 2 / (uintptr_t)page * (uintptr_t)page;
  probe[2] = e - (uintptr_t)page;
  for (int k = 0; k < 3 && !cold; k++) {
    /* Not mapped at all (a bad buffer): the read reports it, as before. */
    if (mincore((void *)probe[k], (size_t)page, &in_core) != 0)
      return;
    cold = (in_core & 1) == 0;
  }
  if (cold && madvise((void *)a, e - a, MADV_POPULATE_WRITE) != 0 &&
      errno == EINVAL)
    atomic_store_explicit(&unsupported, true, memory_order_relaxed);
}

static void prefault(const crnet__recv_req *r) {
  if (r->len < PREFAULT_MIN)
    return;
  for (uint32_t i = 0; i < r->niov; i++)
    prefault_region(r->iov[i].base, r->iov[i].len);
}

void crnet__link_post_recv(crnet__link *l, crnet__recv_req *r) {
  r->got = 0;
  r->cur = 0;
  r->cur_got = 0;
  r->done = false;
  r->status = 0;
  r->next = NULL;
  if (l->failed || l->state != CRNET__LINK_READY) {
    r->status = CRNET_EPEER;
    r->done = true;
    return;
  }
  prefault(r);
  /* A frame of its comm that came early and was drained goes first. */
  for (crnet__early **at = &l->early; *at != NULL; at = &(*at)->next)
    if ((*at)->hdr.ctx == r->ctx) {
      crnet__early *e = *at;
      *at = e->next;
      if (l->early_tail == e) {
        l->early_tail = NULL;
        for (crnet__early *t = l->early; t != NULL; t = t->next)
          l->early_tail = t;
      }
      deliver_early(l, &e->hdr, e->payload, r);
      free(e->payload);
      free(e);
      return;
    }
  if (!(parked(l) && l->hdr.ctx == r->ctx)) {
    /* It waits for its frame. A frame of another comm parked at the head
     * of the link now stands in its way: it drains. */
    crnet__recv_req **at = &l->posted;
    while (*at != NULL)
      at = &(*at)->next;
    *at = r;
    if (link_usable(l) && parked(l)) {
      if (park_or_drain(l))
        resume_after_drain(l);
      return;
    }
    if (l->rx != NULL)
      pump_records(l);
    else if (link_usable(l) && !(parked(l) && stage_full(l)))
      start_reading(l);
    return;
  }
  l->recv = r;
  {
    /* The parked header meets its receive. Whatever of its payload was
     * staged is copied now, and the frames staged behind it are parsed
     * (the next DATA frame parks again; a control frame's callback runs
     * here, as it would have from the read). */
    if (!header_matches(l))
      return;
    if (l->rx == NULL)
      process_stage(l);
  }
  if (l->rx != NULL)
    pump_records(l);
  else if (link_usable(l) && !(parked(l) && stage_full(l)))
    start_reading(l);
}

void crnet__link_cancel_recv(crnet__link *l, crnet__recv_req *r) {
  crnet__link_note_io(l);
  for (crnet__recv_req **at = &l->posted; *at != NULL; at = &(*at)->next)
    if (*at == r) {
      *at = r->next;
      r->next = NULL;
      break;
    }
  if (l->recv == r) {
    /* Its frame is being read: the rest of it is read and dropped, so
     * that the frames behind it, of other comms, still come. */
    uint64_t rest = r->len - r->got;
    l->recv = NULL;
    l->msg_recv = false;
    if (l->have_header && rest > 0) {
      start_drain_len(l, true, rest);
    } else if (l->have_header) {
      l->have_header = false;
    }
  }
  if (!r->done) {
    r->status = CRNET_EPEER;
    r->done = true;
  }
}

/* --- closing ------------------------------------------------------------ */

void crnet__link_close(crnet__link *l) {
  if (uv_is_closing((uv_handle_t *)&l->tcp))
    return;
  l->state = CRNET__LINK_CLOSING;
  atomic_store(&l->carriage, CRNET_LINK_NONE);
  stop_reading(l);
  finish_recv(l, CRNET_EPEER);
  crnet__link_fail_queued(l, CRNET_EPEER);
  crnet__link_shm_close(l);
  uv_close((uv_handle_t *)&l->tcp, crnet__link_handle_closed);
  uv_close((uv_handle_t *)&l->timer, crnet__link_handle_closed);
}

static void on_linger_timeout(uv_timer_t *t) { crnet__link_close(t->data); }

static void on_shutdown(uv_shutdown_t *req, int status) {
  crnet__link *l = req->data;
  /* Queued writes could not be flushed: nothing more to wait for. */
  if (status < 0)
    crnet__link_close(l);
}

void crnet__link_close_gently(crnet__link *l, uint64_t linger_ms) {
  if (uv_is_closing((uv_handle_t *)&l->tcp) || l->draining)
    return;
  if (l->state != CRNET__LINK_READY) {
    crnet__link_close(l);
    return;
  }
  /* The shutdown must follow every frame already sent, so what is queued
   * unsealed is sealed now, whatever the bound in flight. */
  crnet__link_pump_sealing(l, true);
  l->state = CRNET__LINK_CLOSING;
  atomic_store(&l->carriage, CRNET_LINK_NONE);
  l->draining = true;
  finish_recv(l, CRNET_EPEER);
  l->shutdown.data = l;
  /* On shared memory the end goes once the last bytes are in the ring. */
  if ((crnet__link_shm_tx(l)
           ? crnet__link_shm_shutdown(l, &l->shutdown, on_shutdown)
           : uv_shutdown(&l->shutdown, (uv_stream_t *)&l->tcp, on_shutdown)) !=
      0) {
    crnet__link_close(l);
    return;
  }
  /* Reading to EOF before closing is what keeps the kernel from answering
   * late bytes with a reset, which could destroy data the peer has not read
   * yet. */
  stop_reading(l);
  start_reading(l);
  uv_timer_stop(&l->timer);
  uv_timer_start(&l->timer, on_linger_timeout, linger_ms, 0);
}
