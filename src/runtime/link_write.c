/* Writing frames on a link: plain frames straight from the caller's memory
 * (small ones offered to the kernel at once), and on an encrypted link the
 * queue of frames sealed into records chunk by chunk. See link.h; reading
 * and the link's life are in link.c. */
#include "link.h"
#include "link_internal.h"
#include "link_shm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "crnet.h"

/* Encrypted links: each write is a chunk of up to CHUNK_RECORDS records, at
 * most CHUNKS_IN_FLIGHT of them queued in libuv: enough to keep the socket
 * busy while the next chunk is sealed, while bounding the memory a sender
 * holds per link. Full-size chunks are reused rather than freed, since a
 * large message writes many in a row and fresh memory costs page faults. */
#define CHUNK_RECORDS 4
#define CHUNK_PLAIN ((uint64_t)CHUNK_RECORDS * CRNET__SEAL_RECORD_MAX)
#define CHUNKS_IN_FLIGHT 4
#define FULL_CHUNK_BYTES (CHUNK_PLAIN + CHUNK_RECORDS * CRNET__SEAL_OVERHEAD)

/* A frame queued on an encrypted link: the header and payload regions still
 * to seal, in order. req is the DATA send it completes, or NULL for a
 * control frame, whose bytes live in the item itself, after iov. */
struct crnet__out_item {
  crnet__out_item *next;
  crnet__send_req *req;
  uint32_t n, cur;     /* regions, and the one being sealed */
  uint64_t cur_off;    /* bytes of iov[cur] sealed */
  uint64_t last_chunk; /* the chunk that holds its last byte, once sealed */
  crnet__iov iov[];
};

/* One write of sealed records. */
typedef struct crnet__out_chunk {
  uv_write_t write;
  crnet__out_chunk *next_spare;
  uint64_t id;
  bool full; /* FULL_CHUNK_BYTES of data */
  uint8_t data[];
} out_chunk;

/* --- the byte stream out -------------------------------------------------- */

int crnet__link_io_write(crnet__link *l, uv_write_t *w, const uv_buf_t *b,
                         unsigned n, uv_write_cb cb, bool inline_only) {
  if (crnet__link_shm_tx(l))
    return crnet__link_shm_write(l, w, b, n, cb, inline_only);
  return uv_write(w, (uv_stream_t *)&l->tcp, b, n, cb);
}

int crnet__link_io_try_write(crnet__link *l, const uv_buf_t *b, unsigned n) {
  if (crnet__link_shm_tx(l))
    return crnet__link_shm_try_write(l, b, n);
  return uv_try_write((uv_stream_t *)&l->tcp, b, n);
}

bool crnet__link_flushed(const crnet__link *l) {
  return l->out_head == NULL &&
         uv_stream_get_write_queue_size((const uv_stream_t *)&l->tcp) == 0 &&
         crnet__link_shm_queued(l) == 0;
}

/* --- writing frames ----------------------------------------------------- */

static void on_send_done(uv_write_t *w, int status) {
  crnet__send_req *r = (crnet__send_req *)w;
  crnet__link *l = w->data;
  char why[128];
  crnet__link_note_io(l);
  l->pending_writes--;
  r->status = status == 0 ? 0 : CRNET_EPEER;
  r->done = true;
  if (status < 0 && status != UV_ECANCELED) {
    snprintf(why, sizeof why, "sending to rank %d failed: %s", (int)l->peer,
             uv_strerror(status));
    crnet__link_write_failed(l, why);
  }
}

/* --- writing on an encrypted link (see link.h) ---------------------------- */

void crnet__link_pump_sealing(crnet__link *l, bool all);

static void queue_append(crnet__out_item **head, crnet__out_item **tail,
                         crnet__out_item *it) {
  it->next = NULL;
  if (*tail != NULL)
    (*tail)->next = it;
  else
    *head = it;
  *tail = it;
}

static crnet__out_item *queue_pop(crnet__out_item **head,
                                  crnet__out_item **tail) {
  crnet__out_item *it = *head;
  *head = it->next;
  if (*head == NULL)
    *tail = NULL;
  return it;
}

/* A queued frame is over: its send completes, a control frame's bytes go. */
static void complete_item(crnet__link *l, crnet__out_item *it, int status) {
  l->pending_writes--;
  if (it->req != NULL) {
    it->req->status = status;
    it->req->done = true;
  }
  free(it);
}

/* Completes every queued frame with status (the link is closing or broken:
 * nothing more will be written). */
void crnet__link_fail_queued(crnet__link *l, int status) {
  while (l->out_head != NULL)
    complete_item(l, queue_pop(&l->out_head, &l->out_tail), status);
  l->out_bytes = 0;
  while (l->sealed_head != NULL)
    complete_item(l, queue_pop(&l->sealed_head, &l->sealed_tail), status);
}

/* The unsealed bytes of the queue head's current region. */
static const uint8_t *head_bytes(const crnet__link *l, uint64_t *n) {
  const crnet__out_item *it = l->out_head;
  const crnet__iov *v = &it->iov[it->cur];
  *n = v->len - it->cur_off;
  return (const uint8_t *)v->base + it->cur_off;
}

/* Counts n bytes of the head's current region (at most what it holds) as
 * sealed into chunk. A frame whose last byte that was moves to the sealed
 * queue. */
static void advance(crnet__link *l, uint64_t n, uint64_t chunk) {
  crnet__out_item *it = l->out_head;
  l->out_bytes -= n;
  it->cur_off += n;
  if (it->cur_off < it->iov[it->cur].len)
    return;
  it->cur++;
  it->cur_off = 0;
  if (it->cur == it->n) {
    queue_pop(&l->out_head, &l->out_tail);
    it->last_chunk = chunk;
    queue_append(&l->sealed_head, &l->sealed_tail, it);
  }
}

/* Seals the next `len` queued bytes into the record at rec. A region that
 * holds them all (a large payload) is sealed from where it is; otherwise
 * (headers, small frames, region ends) they are gathered into the record
 * first and sealed in place. */
static int seal_next(crnet__link *l, uint8_t *rec, uint32_t len,
                     uint64_t chunk) {
  uint8_t *text = rec + CRNET__SEAL_LEN_BYTES;
  uint64_t n;
  const uint8_t *src = head_bytes(l, &n);
  if (n >= len) {
    advance(l, len, chunk);
    return crnet__seal_record(l->tx, rec, src, len);
  }
  for (uint32_t got = 0; got < len; got += (uint32_t)n) {
    src = head_bytes(l, &n);
    if (n > len - got)
      n = len - got;
    memcpy(text + got, src, n);
    advance(l, n, chunk);
  }
  return crnet__seal_record(l->tx, rec, text, len);
}

/* A chunk buffer of cap bytes: a spare one if it is full-size. */
static out_chunk *get_chunk(crnet__link *l, size_t cap) {
  out_chunk *ch;
  if (cap == FULL_CHUNK_BYTES && l->spare != NULL) {
    ch = l->spare;
    l->spare = ch->next_spare;
    l->nspare--;
    return ch;
  }
  ch = crnet__malloc(sizeof *ch + cap);
  if (ch != NULL)
    ch->full = cap == FULL_CHUNK_BYTES;
  return ch;
}

static void put_chunk(crnet__link *l, out_chunk *ch) {
  if (!ch->full || l->nspare >= CHUNKS_IN_FLIGHT) {
    free(ch);
    return;
  }
  ch->next_spare = l->spare;
  l->spare = ch;
  l->nspare++;
}

static void on_chunk_written(uv_write_t *w, int status) {
  out_chunk *ch = (out_chunk *)w;
  crnet__link *l = w->data;
  char why[128];
  crnet__link_note_io(l);
  l->chunks_in_flight--;
  if (status < 0) {
    put_chunk(l, ch);
    crnet__link_fail_queued(l, CRNET_EPEER);
    if (status != UV_ECANCELED) {
      snprintf(why, sizeof why, "sending to %s failed: %s", l->addr,
               uv_strerror(status));
      crnet__link_write_failed(l, why);
    }
    return;
  }
  while (l->sealed_head != NULL && l->sealed_head->last_chunk <= ch->id)
    complete_item(l, queue_pop(&l->sealed_head, &l->sealed_tail), 0);
  put_chunk(l, ch);
  if (l->state == CRNET__LINK_READY)
    crnet__link_pump_sealing(l, false);
}

/* Seals one chunk of records from the queue and writes it. The chunk is as
 * large as what is queued, up to CHUNK_RECORDS full records, so that small
 * frames cost small buffers. */
static int seal_chunk(crnet__link *l) {
  uint64_t plain = l->out_bytes < CHUNK_PLAIN ? l->out_bytes : CHUNK_PLAIN;
  uint64_t records =
      (plain + CRNET__SEAL_RECORD_MAX - 1) / CRNET__SEAL_RECORD_MAX;
  size_t used = 0, cap = (size_t)(plain + records * CRNET__SEAL_OVERHEAD);
  out_chunk *ch = get_chunk(l, cap);
  uv_buf_t b;
  if (ch == NULL) {
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for sealed records");
    return -1;
  }
  ch->id = l->next_chunk++;
  while (plain > 0) {
    uint32_t len = plain < CRNET__SEAL_RECORD_MAX ? (uint32_t)plain
                                                  : CRNET__SEAL_RECORD_MAX;
    if (seal_next(l, ch->data + used, len, ch->id) != 0) {
      put_chunk(l, ch);
      crnet__link_fail(l, CRNET_EIO, "record count exhausted");
      return -1;
    }
    used += len + CRNET__SEAL_OVERHEAD;
    plain -= len;
  }
  assert(used == cap);
  b.base = (char *)ch->data;
  b.len = used;
  ch->write.data = l;
  if (uv_write(&ch->write, (uv_stream_t *)&l->tcp, &b, 1, on_chunk_written) !=
      0) {
    put_chunk(l, ch);
    crnet__link_fail(l, CRNET_EPEER, "cannot write sealed records");
    return -1;
  }
  l->chunks_in_flight++;
  return 0;
}

/* Seals while there are queued bytes and room in flight (all: no bound,
 * before a shutdown). A failure completes every queued frame. */
void crnet__link_pump_sealing(crnet__link *l, bool all) {
  while (l->out_head != NULL && (all || l->chunks_in_flight < CHUNKS_IN_FLIGHT))
    if (seal_chunk(l) != 0) {
      crnet__link_fail_queued(l, CRNET_EPEER);
      return;
    }
}

/* A queue item for a frame of nregions regions, allocated with `extra`
 * bytes after its iov array (a control frame's copy). */
static crnet__out_item *new_item(uint32_t nregions, size_t extra) {
  crnet__out_item *it =
      crnet__malloc(sizeof *it + sizeof it->iov[0] * nregions + extra);
  if (it == NULL)
    return NULL;
  memset(it, 0, sizeof *it);
  it->n = nregions;
  return it;
}

static void send_sealed(crnet__link *l, crnet__send_req *r,
                        const crnet__frame_header *h, const crnet__iov *iov,
                        uint32_t niov) {
  crnet__out_item *it = new_item(niov + 1, 0);
  if (it == NULL) {
    r->status = CRNET_ENOMEM;
    r->done = true;
    crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a send");
    return;
  }
  it->req = r;
  it->iov[0].base = r->header;
  it->iov[0].len = sizeof r->header;
  it->n = 1;
  for (uint32_t i = 0; i < niov; i++)
    if (iov[i].len > 0)
      it->iov[it->n++] = iov[i];
  queue_append(&l->out_head, &l->out_tail, it);
  l->out_bytes += sizeof r->header + h->length;
  l->pending_writes++;
  crnet__link_pump_sealing(l, false);
}

/* Frames up to this size are offered to the kernel at once (link_send). */
#define TRY_WRITE_MAX ((size_t)64 << 10)

static size_t total_len(const uv_buf_t *b, unsigned n) {
  size_t t = 0;
  for (unsigned i = 0; i < n; i++)
    t += b[i].len;
  return t;
}

/* Drops the first k bytes of the list b[0..*n) (fewer than it holds). */
static void skip_bytes(uv_buf_t *b, unsigned *n, size_t k) {
  unsigned i = 0, m = 0;
  while (k >= b[i].len) {
    k -= b[i].len;
    i++;
  }
  b[i].base += k;
  b[i].len -= k;
  for (; i < *n; i++)
    b[m++] = b[i];
  *n = m;
}

/* A large plain frame goes to libuv as several writes of WRITE_PIECE bytes
 * queued back to back (nothing comes between them on the wire, and the
 * frame's own request, written last, completes it), not as one write.
 * Over loopback the kernel pushes the segments of one write to the
 * receiver only when the call ends (traced: a 1 MiB writev returned, then
 * the receiver woke and read all 1 MiB at once), so the receiver's copy
 * could not overlap the sender's; pieces make the two copies a pipeline.
 * And each piece written is activity the wait sees (crnet__link_note_io):
 * a sender whose frame streams out keeps polling. Between two ranks
 * (docs/PERFORMANCE.md, "Point-to-point"), 512 KiB pieces took 1 MiB
 * ping-pong from 318 to 198 us and 4 MiB bandwidth from 3909 to 5026
 * MB/s; smaller pieces cost more per byte than they gained (128 KiB:
 * 2816 MB/s), larger ones pipelined less. */
#define WRITE_PIECE ((size_t)512 << 10)

static void on_piece_written(uv_write_t *w, int status) {
  crnet__link *l = w->data;
  char why[128];
  free(w);
  crnet__link_note_io(l);
  if (status < 0 && status != UV_ECANCELED) {
    snprintf(why, sizeof why, "sending to rank %d failed: %s", (int)l->peer,
             uv_strerror(status));
    crnet__link_write_failed(l, why);
  }
}

/* Queues the list b[0..*n) but for its last piece as pieces of
 * WRITE_PIECE bytes, and leaves that last piece in b. Out of memory it
 * stops early: the rest goes as one write, which is only slower. */
static void queue_pieces(crnet__link *l, uv_buf_t *b, unsigned *n) {
  const size_t piece = WRITE_PIECE;
  while (total_len(b, *n) > piece) {
    uv_write_t *w = crnet__malloc(sizeof *w);
    unsigned k = 0;
    size_t got = 0, cut;
    if (w == NULL)
      return;
    /* b[0..k] is the piece, its last buffer cut to fit. */
    while (got + b[k].len < piece)
      got += b[k++].len;
    cut = b[k].len;
    b[k].len = piece - got;
    w->data = l;
    if (crnet__link_io_write(l, w, b, k + 1, on_piece_written, false) != 0) {
      b[k].len = cut;
      free(w);
      return; /* the frame's own write reports the failure */
    }
    b[k].len = cut;
    skip_bytes(b, n, piece);
  }
}

void crnet__link_send(crnet__link *l, crnet__send_req *r,
                      const crnet__frame_header *h, const crnet__iov *iov,
                      uint32_t niov) {
  uv_buf_t small[8], *bufs = small;
  unsigned nbufs = 1;
  int rc;
  r->done = false;
  r->status = 0;
  if (l->failed || l->state != CRNET__LINK_READY) {
    r->status = CRNET_EPEER;
    r->done = true;
    return;
  }
  if (l->tx != NULL) {
    crnet__frame_encode(h, r->header);
    send_sealed(l, r, h, iov, niov);
    return;
  }
  if (niov + 1 > sizeof small / sizeof small[0]) {
    bufs = crnet__malloc(sizeof *bufs * (niov + 1));
    if (bufs == NULL) {
      r->status = CRNET_ENOMEM;
      r->done = true;
      crnet__link_fail(l, CRNET_ENOMEM, "out of memory for a send");
      return;
    }
  }
  crnet__frame_encode(h, r->header);
  bufs[0].base = (char *)r->header;
  bufs[0].len = sizeof r->header;
  for (uint32_t i = 0; i < niov; i++) {
    if (iov[i].len == 0)
      continue;
    bufs[nbufs].base = (char *)iov[i].base;
    bufs[nbufs].len = (size_t)iov[i].len;
    nbufs++;
  }
  r->write.data = l;
  /* A small frame on an idle link goes to the kernel now, and the send is
   * done without waiting for the loop's next turn to run a callback: half
   * of a small message's round trip is otherwise that turn. What the
   * kernel does not take whole is written by uv_write as usual, after the
   * part it took (uv_try_write writes only when nothing is queued, so the
   * order of frames holds). */
  if (total_len(bufs, nbufs) <= TRY_WRITE_MAX) {
    int n = crnet__link_io_try_write(l, bufs, nbufs);
    if (n > 0 && (size_t)n == total_len(bufs, nbufs)) {
      if (bufs != small)
        free(bufs);
      crnet__link_note_io(l);
      r->done = true;
      return;
    }
    if (n > 0)
      skip_bytes(bufs, &nbufs, (size_t)n);
  }
  /* Pieces are for the kernel's socket; shared memory pipelines anyway. */
  if (total_len(bufs, nbufs) > 2 * WRITE_PIECE && !crnet__link_shm_tx(l))
    queue_pieces(l, bufs, &nbufs);
  /* libuv copies the buffer list; the memory it points to stays ours.
   * An eager message (MSG) goes through the shared ring whole: by address
   * its send would complete only once the receiver has copied it, and a
   * sender that waits for that (a blocking send, then its receive) is
   * late with its next receive: the peer's next message then comes
   * unexpected and is copied twice anyway. Measured at p = 2 (crbench
   * --p2p latency, 16 / 32 / 64 KiB): 6.3-7.0 / 8.0-8.2 / 11.6-12.4 us by
   * address, 3.2-3.4 / 4.8-6.0 / 7.6-8.9 us through the ring
   * (docs/PERFORMANCE-SHM.md, "Point-to-point on shared memory"). */
  rc = crnet__link_io_write(l, &r->write, bufs, nbufs, on_send_done,
                            h->kind == CRNET__FRAME_MSG);
  if (bufs != small)
    free(bufs);
  if (rc != 0) {
    /* Out of memory is this rank's failure, not the peer's (the
     * shared-memory writer allocates; libuv's TCP write does not). */
    r->status = rc == UV_ENOMEM ? CRNET_ENOMEM : CRNET_EPEER;
    r->done = true;
    crnet__link_fail(l, r->status,
                     rc == UV_ENOMEM ? "out of memory for a send"
                                     : uv_strerror(rc));
    return;
  }
  l->pending_writes++;
}

typedef struct control_write {
  uv_write_t write;
  uint8_t header[CRNET__FRAME_HEADER_SIZE];
  uint8_t payload[];
} control_write;

static void on_control_sent(uv_write_t *w, int status) {
  crnet__link *l = w->data;
  char why[128];
  l->pending_writes--;
  free(w);
  if (status < 0 && status != UV_ECANCELED) {
    snprintf(why, sizeof why, "sending to %s failed: %s", l->addr,
             uv_strerror(status));
    crnet__link_write_failed(l, why);
  }
}

static int send_control_sealed(crnet__link *l, const crnet__frame_header *h,
                               const void *payload, uint64_t len) {
  crnet__out_item *it = new_item(1, CRNET__FRAME_HEADER_SIZE + (size_t)len);
  uint8_t *bytes;
  if (it == NULL)
    return CRNET_ENOMEM;
  bytes = (uint8_t *)&it->iov[1];
  crnet__frame_encode(h, bytes);
  if (len > 0)
    memcpy(bytes + CRNET__FRAME_HEADER_SIZE, payload, len);
  it->iov[0].base = bytes;
  it->iov[0].len = CRNET__FRAME_HEADER_SIZE + len;
  queue_append(&l->out_head, &l->out_tail, it);
  l->out_bytes += it->iov[0].len;
  l->pending_writes++;
  crnet__link_pump_sealing(l, false);
  return 0;
}

int crnet__link_send_control(crnet__link *l, uint8_t kind, const void *payload,
                             uint64_t len) {
  return crnet__link_send_control_ctx(l, kind, 0, payload, len);
}

int crnet__link_send_control_ctx(crnet__link *l, uint8_t kind, uint32_t ctx,
                                 const void *payload, uint64_t len) {
  crnet__frame_header h = {.kind = kind, .length = len, .ctx = ctx};
  return crnet__link_send_control_hdr(l, &h, payload);
}

/* Queues a copy of a plain frame (its encoded header and len bytes of
 * payload) but for its first `skip` bytes, which the kernel has taken
 * already. 0, or CRNET_ENOMEM / CRNET_EPEER with nothing queued. */
static int queue_copy(crnet__link *l,
                      const uint8_t header[CRNET__FRAME_HEADER_SIZE],
                      const void *payload, size_t len, size_t skip) {
  control_write *cw = crnet__malloc(sizeof *cw + len);
  uv_buf_t b;
  int rc;
  if (cw == NULL)
    return CRNET_ENOMEM;
  memcpy(cw->header, header, sizeof cw->header);
  if (len > 0)
    memcpy(cw->payload, payload, len);
  b.base = (char *)cw->header + skip;
  b.len = sizeof cw->header + len - skip;
  cw->write.data = l;
  rc = crnet__link_io_write(l, &cw->write, &b, 1, on_control_sent, false);
  if (rc != 0) {
    free(cw);
    return rc == UV_ENOMEM ? CRNET_ENOMEM : CRNET_EPEER;
  }
  l->pending_writes++;
  return 0;
}

int crnet__link_send_control_hdr(crnet__link *l, const crnet__frame_header *hp,
                                 const void *payload) {
  crnet__frame_header h = *hp;
  uint8_t header[CRNET__FRAME_HEADER_SIZE];
  /* A link that failed on reading may still write: that is how a rank tells
   * a peer that sent something wrong why it is being dropped. */
  if (l->state != CRNET__LINK_READY)
    return CRNET_EPEER;
  if (l->tx != NULL)
    return send_control_sealed(l, &h, payload, h.length);
  crnet__frame_encode(&h, header);
  return queue_copy(l, header, payload, (size_t)h.length, 0);
}

int crnet__link_send_now(crnet__link *l, const crnet__frame_header *h,
                         const void *payload) {
  uint8_t header[CRNET__FRAME_HEADER_SIZE];
  uv_buf_t b[2];
  size_t len = (size_t)h->length, total = sizeof header + len;
  int n;
  if (l->state != CRNET__LINK_READY || l->tx != NULL ||
      len > TRY_WRITE_MAX)
    return crnet__link_send_control_hdr(l, h, payload);
  crnet__frame_encode(h, header);
  b[0] = uv_buf_init((char *)header, sizeof header);
  b[1] = uv_buf_init((char *)(uintptr_t)payload, (unsigned)len);
  /* uv_try_write writes nothing while writes are queued: order holds. */
  n = crnet__link_io_try_write(l, b, len > 0 ? 2 : 1);
  if (n == (int)total) {
    crnet__link_note_io(l);
    return 0;
  }
  if (n == 0 || n == UV_EAGAIN)
    return crnet__link_send_control_hdr(l, h, payload);
  if (n < 0)
    return CRNET_EPEER; /* the caller's full path meets it and says why */
  /* The kernel took a part: the rest goes as a control write does. If it
   * cannot, the frame is cut: the link is failed, and says so. */
  if (queue_copy(l, header, payload, len, (size_t)n) != 0)
    crnet__link_fail(l, CRNET_EPEER, "the rest of a send could not be queued");
  return 0;
}

/* Frees the spare chunks of a closed link. */
void crnet__link_free_spares(crnet__link *l) {
  while (l->spare != NULL) {
    out_chunk *ch = l->spare;
    l->spare = ch->next_spare;
    free(ch);
  }
  l->nspare = 0;
}
