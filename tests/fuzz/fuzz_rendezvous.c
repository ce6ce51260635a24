/* Fuzz target: the rendezvous protocol (src/runtime/rendezvous.c), both
 * ends.
 *
 * Server side, through the real code path: a real rendezvous server on a
 * libuv loop listens on loopback, and the harness connects to it as up to
 * four ranks, one after the other, each connection staying open. Each
 * connection runs a real handshake (or sends garbage instead of one), may
 * send a well-formed RENDEZVOUS_REGISTER frame built from input fields, and
 * then sends raw input bytes: more frames, or anything (sealed into a record
 * when the connection encrypts). Whatever the server answers is read back
 * and decoded the way a rank decodes it.
 *
 * Client side: the input's last part is handed, as a RENDEZVOUS_TABLE payload,
 * to crnet__rendezvous_table_decode, which is what a rank runs on the table.
 *
 * Input:
 *   byte 0  job size - 1 (bits 0-1); byte 1 connections - 1 (bits 0-1)
 *   per connection: one byte: bits 0-1 the rank it claims in the
 *           handshake (modulo the size), bit 2 encrypt, bit 3 AES-256-GCM
 *           allowed, bits 4-5 form: 0 handshake, REGISTER, raw bytes;
 *           1 handshake, raw bytes; 2 raw bytes instead of a handshake;
 *           3 handshake, REGISTER with rank and size from the input, raw
 *           bytes. REGISTER fields: family bit, port u16, address 4 bytes,
 *           streams u8, stream_min u16 (rank u8 and size u8 first for
 *           form 3). Then raw bytes: length u16 (at most 4096), bytes.
 *   the rest: a table payload for crnet__rendezvous_table_decode
 *
 * Checked: a good handshake is always accepted; every RENDEZVOUS_TABLE the
 * server sends decodes as a table of the job, and each entry is one that rank
 * registered; the server closes every connection and frees itself.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crnet.h"
#include "frame.h"
#include "fuzz.h"
#include "link.h"
#include "rendezvous.h"
#include "seal.h"
#include "tuning.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_CONNS 4
#define MAX_RAW 4096
#define REPLY_MAX (1u << 16)

static uv_loop_t loop;

typedef struct conn {
  int fd;
  crnet__seal *tx, *rx; /* with encryption */
} conn;

/* What each rank registered (the server keeps one of them), and whether
 * that is all: raw input bytes may register anything. */
static crnet__rendezvous_entry registered[MAX_CONNS][MAX_CONNS];
static int nregistered[MAX_CONNS];
static bool raw_sent;

static void on_done(crnet__rendezvous_server *srv, int status,
                    const int *missing, int nmissing, void *arg) {
  (void)srv;
  (void)missing;
  (void)arg;
  if (status != 0 && nmissing < 1)
    fuzz_fail("rendezvous failed (%d) with nobody missing", status);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_random_install();
  if (uv_loop_init(&loop) != 0)
    fuzz_fail("no loop");
  return 0;
}

static bool loop_idle(void *arg) {
  (void)arg;
  return !uv_loop_alive(&loop);
}

/* A loopback connection to the server, with a reset (not TIME_WAIT) when
 * it is closed, so that many inputs do not exhaust the ports. */
static int connect_to(int port) {
  struct sockaddr_in sin;
  struct linger lg = {1, 0};
  int one = 1;
  struct pollfd pfd;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  uint64_t deadline = uv_hrtime() + (uint64_t)FUZZ_WAIT_MS * 1000000u;
  if (fd < 0)
    fuzz_fail("socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  /* Every write goes out at once (no Nagle), so that the server has it by
   * the next turn of its loop. */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons((uint16_t)port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0 &&
      errno != EINPROGRESS)
    fuzz_fail("connect: %s", strerror(errno));
  pfd.fd = fd;
  pfd.events = POLLOUT;
  while (poll(&pfd, 1, 0) == 0) {
    if (uv_hrtime() > deadline)
      fuzz_fail("cannot connect to the rendezvous");
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  /* Let the server accept it. */
  fuzz_settle(&loop);
  return fd;
}

/* Sends bytes on a connection, sealed into records when it encrypts. */
static bool send_bytes(conn *c, const uint8_t *p, size_t n) {
  uint8_t *rec;
  bool ok = true;
  if (c->tx == NULL)
    return fuzz_write_all(&loop, c->fd, p, n);
  rec = malloc(CRNET__SEAL_RECORD_BYTES_MAX);
  if (rec == NULL)
    fuzz_fail("out of memory");
  while (ok && n > 0) {
    uint32_t len = n < CRNET__SEAL_RECORD_MAX ? (uint32_t)n
                                              : CRNET__SEAL_RECORD_MAX;
    if (crnet__seal_record(c->tx, rec, p, len) != 0)
      fuzz_fail("cannot seal");
    ok = fuzz_write_all(&loop, c->fd, rec, len + CRNET__SEAL_OVERHEAD);
    p += len;
    n -= len;
  }
  free(rec);
  return ok;
}

static void send_register(conn *c, fuzz_in *in, int form, uint32_t rank,
                          uint32_t size) {
  uint8_t msg[CRNET__FRAME_HEADER_SIZE + CRNET__RENDEZVOUS_REGISTER_SIZE];
  uint8_t *pl = msg + CRNET__FRAME_HEADER_SIZE;
  crnet__frame_header h = {.kind = CRNET__FRAME_RENDEZVOUS_REGISTER,
                           .length = CRNET__RENDEZVOUS_REGISTER_SIZE};
  crnet__rendezvous_entry e;
  crnet__tuning t;
  crnet__rendezvous_options o;
  if (form == 3) {
    rank = fuzz_u8(in);
    size = fuzz_u8(in);
    raw_sent = true;
  }
  memset(&e, 0, sizeof e);
  e.family = (fuzz_u8(in) & 1) ? 6 : 4;
  e.port = (uint16_t)(fuzz_u16(in) | 1);
  for (int i = 0; i < 4; i++)
    e.addr[i] = fuzz_u8(in);
  e.pid = rank + 1000;
  snprintf(e.host, sizeof e.host, "rank%u", (unsigned)rank);
  o.streams = 1 + fuzz_u8(in) % CRNET__MAX_STREAMS;
  o.lazy = fuzz_u8(in) & 1;
  o.tcp = 0;
  o.board = fuzz_u8(in) % (CRNET__RENDEZVOUS_BOARD_MAX + 1);
  o.stream_min = 1u + fuzz_u16(in);
  crnet__tuning_defaults(&t);
  crnet__frame_encode(&h, msg);
  crnet__put_le32(pl, rank);
  crnet__put_le32(pl + 4, size);
  crnet__rendezvous_entry_encode(&e, pl + 8);
  crnet__tuning_encode(&t, pl + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE);
  crnet__rendezvous_options_encode(&o, pl + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE +
                                           CRNET__TUNING_WIRE_SIZE);
  if (rank < MAX_CONNS && nregistered[rank] < MAX_CONNS)
    registered[rank][nregistered[rank]++] = e;
  send_bytes(c, msg, sizeof msg);
}

static bool same_entry(const crnet__rendezvous_entry *a,
                       const crnet__rendezvous_entry *b) {
  return a->family == b->family && a->port == b->port &&
         memcmp(a->addr, b->addr, sizeof a->addr) == 0 && a->pid == b->pid &&
         strcmp(a->host, b->host) == 0;
}

/* Reads what the server sent a connection and decodes its frames as a rank
 * does: a table must be one of this job, of entries the ranks sent. */
static void check_answer(conn *c, int32_t size) {
  static uint8_t raw[REPLY_MAX], plain[REPLY_MAX];
  size_t nraw = 0, nplain = 0, pos = 0;
  for (;;) {
    ssize_t r = recv(c->fd, raw + nraw, sizeof raw - nraw, MSG_DONTWAIT);
    if (r <= 0)
      break;
    nraw += (size_t)r;
  }
  if (c->rx == NULL) {
    memcpy(plain, raw, nraw);
    nplain = nraw;
  } else {
    while (nraw - pos >= CRNET__SEAL_OVERHEAD) {
      uint32_t len = crnet__seal_record_len(raw + pos);
      if (len == 0)
        fuzz_fail("the server sent a malformed record");
      if (nraw - pos < len + CRNET__SEAL_OVERHEAD)
        break;
      if (crnet__seal_open(c->rx, raw + pos, len, plain + nplain) != 0)
        fuzz_fail("a record from the server does not open");
      nplain += len;
      pos += len + CRNET__SEAL_OVERHEAD;
    }
  }
  pos = 0;
  while (nplain - pos >= CRNET__FRAME_HEADER_SIZE) {
    crnet__frame_header h;
    const char *why;
    crnet__rendezvous_entry entries[MAX_CONNS];
    crnet__tuning t;
    crnet__rendezvous_options o;
    if (crnet__frame_decode(plain + pos, CRNET__CONTROL_MAX, &h, &why) != 0)
      fuzz_fail("the server sent a malformed frame: %s", why);
    pos += CRNET__FRAME_HEADER_SIZE;
    if (nplain - pos < h.length)
      break;
    if (h.kind == CRNET__FRAME_RENDEZVOUS_TABLE) {
      if (crnet__rendezvous_table_decode(plain + pos, h.length, size, "rank 0",
                                         entries, &t, &o, &why) != 0)
        fuzz_fail("the server sent a table a rank refuses: %s", why);
      for (int32_t r = 0; r < size && !raw_sent; r++) {
        bool found = false;
        for (int k = 0; k < nregistered[r] && !found; k++)
          found = same_entry(&entries[r], &registered[r][k]);
        if (!found)
          fuzz_fail("the table's entry for rank %d was never registered",
                    (int)r);
      }
    } else if (h.kind != CRNET__FRAME_RENDEZVOUS_ERROR) {
      fuzz_fail("the server sent a frame of kind %u", h.kind);
    }
    pos += h.length;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  int32_t jobsize = 1 + (fuzz_u8(&in) & 3);
  int nconns = 1 + (fuzz_u8(&in) & 3);
  conn conns[MAX_CONNS];
  crnet__rendezvous_server *srv;
  crnet__rendezvous_entry entries[MAX_CONNS];
  crnet__tuning t;
  crnet__rendezvous_options o;
  const char *why;
  int port;

  fuzz_random_seed(size);
  memset(conns, 0, sizeof conns);
  memset(nregistered, 0, sizeof nregistered);
  raw_sent = false;
  if (crnet__rendezvous_server_start(&srv, &loop, fuzz_key, jobsize,
                                     "127.0.0.1", 0, 3600, 10, on_done,
                                     NULL) != 0)
    fuzz_fail("cannot start the rendezvous");
  port = crnet__rendezvous_server_port(srv);

  for (int i = 0; i < nconns; i++) {
    conn *c = &conns[i];
    uint8_t b = fuzz_u8(&in);
    int form = (b >> 4) & 3;
    uint32_t rank = (uint32_t)((b & 3) % jobsize);
    uint8_t enc = (b & 4) ? CRNET__HS_ENCRYPT : CRNET__HS_PLAIN;
    size_t nraw;
    const uint8_t *raw;
    c->fd = connect_to(port);
    if (form == 2) {
      raw = fuzz_take(&in, fuzz_u16(&in) % (MAX_RAW + 1), &nraw);
      raw_sent |= nraw > 0;
      fuzz_write_all(&loop, c->fd, raw, nraw);
      fuzz_settle(&loop);
      continue;
    }
    {
      crnet__handshake hs;
      if (fuzz_handshake(&loop, c->fd, &hs, CRNET__HS_RENDEZVOUS,
                         (int32_t)rank, CRNET__RANK_RENDEZVOUS, jobsize, enc,
                         (b & 8) != 0) != 0)
        fuzz_fail("the rendezvous refused a good handshake: %s",
                  hs.why ? hs.why : "no REPLY");
      if (hs.encrypt && (crnet__seal_new(&c->tx, hs.cipher, hs.tx_key) != 0 ||
                         crnet__seal_new(&c->rx, hs.cipher, hs.rx_key) != 0))
        fuzz_fail("no record layer");
      crnet__hs_wipe(&hs);
    }
    if (form != 1)
      send_register(c, &in, form, rank, (uint32_t)jobsize);
    raw = fuzz_take(&in, fuzz_u16(&in) % (MAX_RAW + 1), &nraw);
    raw_sent |= nraw > 0;
    if (nraw > 0)
      send_bytes(c, raw, nraw);
    fuzz_settle(&loop);
  }
  fuzz_settle(&loop);
  for (int i = 0; i < nconns; i++)
    check_answer(&conns[i], jobsize);

  /* Ranks go away (with a reset), the server is closed, and everything
   * it holds must be released. */
  for (int i = 0; i < nconns; i++) {
    close(conns[i].fd);
    crnet__seal_free(conns[i].tx);
    crnet__seal_free(conns[i].rx);
  }
  fuzz_settle(&loop);
  crnet__rendezvous_server_close(srv);
  if (!fuzz_run_until(&loop, loop_idle, NULL))
    fuzz_fail("the rendezvous server did not close");

  /* The client side: the rest as a table. */
  (void)crnet__rendezvous_table_decode(in.p, in.n, jobsize, "rank 0", entries,
                                       &t, &o, &why);
  return 0;
}
