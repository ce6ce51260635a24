/* Writes the seed corpus of the fuzz harnesses that carry frames, built
 * with the project's own encoders, so that the seeds follow the wire
 * formats whenever they change:
 *
 *   make_corpus DIR [STAMP]
 *
 * writes DIR/<target>/<name> for the targets frame, link, rendezvous and
 * handshake (the input layouts are described at the top of each
 * fuzz_<target>.c), and touches STAMP when given (for meson). The seeds
 * checked in under tests/fuzz/corpus are those that hold no frame bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crnet.h"
#include "frame.h"
#include "handshake.h"
#include "rendezvous.h"
#include "tuning.h"

static const char *root;

typedef struct seed {
  uint8_t data[1 << 16];
  size_t n;
} seed;

static void put(seed *s, const void *p, size_t n) {
  if (s->n + n > sizeof s->data) {
    fprintf(stderr, "make_corpus: seed too large\n");
    exit(1);
  }
  memcpy(s->data + s->n, p, n);
  s->n += n;
}

static void put_u8(seed *s, uint8_t v) { put(s, &v, 1); }

static void put_u16(seed *s, uint16_t v) {
  uint8_t b[2];
  crnet__put_le16(b, v);
  put(s, b, 2);
}

static void put_frame(seed *s, uint8_t kind, uint8_t coll, uint64_t seq,
                      uint32_t round, const void *payload, uint64_t len) {
  crnet__frame_header h = {.kind = kind, .coll = coll, .seq = seq,
                           .round = round, .sig = 0x5eed0000u | round,
                           .length = len};
  if (kind == CRNET__FRAME_DATA)
    h.call = (crnet__frame_call){.count = len, .op = -1, .root = -1,
                                 .dtype = CRNET_BYTE};
  uint8_t hdr[CRNET__FRAME_HEADER_SIZE];
  crnet__frame_encode(&h, hdr);
  put(s, hdr, sizeof hdr);
  if (payload != NULL)
    put(s, payload, len);
}

static void put_data(seed *s, uint8_t coll, uint64_t seq, uint32_t round,
                     uint64_t len) {
  static uint8_t payload[1 << 15];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (uint8_t)(i * 7 + seq);
  put_frame(s, CRNET__FRAME_DATA, coll, seq, round, payload, len);
}

static void put_abort(seed *s) {
  uint8_t p[4 + 4 + 20];
  crnet__put_le32(p, (uint32_t)CRNET_EPEER);
  crnet__put_le32(p + 4, 3);
  memcpy(p + 8, "rank 3 gave up here", 20);
  put_frame(s, CRNET__FRAME_ABORT, 0, 0, 0, p, sizeof p);
}

static void write_seed(const char *target, const char *name, const seed *s) {
  char path[4096];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", root, target);
  if (mkdir(path, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "make_corpus: cannot create %s: %s\n", path,
            strerror(errno));
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(s->data, 1, s->n, f) != s->n || fclose(f) != 0) {
    fprintf(stderr, "make_corpus: cannot write %s\n", path);
    exit(1);
  }
}

/* --- frame: one header, optionally a max_length ---------------------------- */

static void frame_seeds(void) {
  static const struct {
    const char *name;
    uint8_t kind, coll;
    uint64_t len;
  } hs[] = {
      {"data-allreduce", CRNET__FRAME_DATA, CRNET_COLL_ALLREDUCE, 4096},
      {"data-bcast-empty", CRNET__FRAME_DATA, CRNET_COLL_BCAST, 0},
      {"data-last-coll", CRNET__FRAME_DATA, CRNET_COLL_COUNT - 1, 1},
      {"abort", CRNET__FRAME_ABORT, 0, 28},
      {"bye", CRNET__FRAME_BYE, 0, 0},
      {"rdv-register", CRNET__FRAME_RENDEZVOUS_REGISTER, 0,
       CRNET__RENDEZVOUS_REGISTER_SIZE},
      {"rdv-table", CRNET__FRAME_RENDEZVOUS_TABLE, 0,
       CRNET__RENDEZVOUS_TABLE_HEAD},
      {"rdv-error", CRNET__FRAME_RENDEZVOUS_ERROR, 0, 40},
      {"huge-length", CRNET__FRAME_RENDEZVOUS_TABLE, 0, UINT64_MAX},
  };
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
    seed s = {.n = 0};
    char name[64];
    uint8_t max[8];
    put_frame(&s, hs[i].kind, hs[i].coll, 0x0102030405060708u, 7, NULL,
              hs[i].len);
    write_seed("frame", hs[i].name, &s);
    /* At the bound, and one over it. */
    crnet__put_le64(max, hs[i].len);
    put(&s, max, sizeof max);
    snprintf(name, sizeof name, "%s-at-max", hs[i].name);
    write_seed("frame", name, &s);
    s.n -= sizeof max;
    crnet__put_le64(max, hs[i].len - 1);
    put(&s, max, sizeof max);
    snprintf(name, sizeof name, "%s-over-max", hs[i].name);
    write_seed("frame", name, &s);
  }
}

/* --- link: settings, two seeds, the byte stream ------------------------------ */

static void link_stream(seed *s, int which) {
  switch (which) {
  case 0: /* one small DATA frame */
    put_data(s, CRNET_COLL_ALLREDUCE, 1, 0, 100);
    break;
  case 1: /* an empty DATA frame, then a BYE */
    put_data(s, CRNET_COLL_BARRIER, 2, 0, 0);
    put_frame(s, CRNET__FRAME_BYE, 0, 0, 0, NULL, 0);
    break;
  case 2: /* a DATA frame larger than the staging buffer */
    put_data(s, CRNET_COLL_BCAST, 3, 1, 10000);
    break;
  case 3: /* rounds back to back, small and large */
    put_data(s, CRNET_COLL_ALLREDUCE, 4, 0, 64);
    put_data(s, CRNET_COLL_ALLREDUCE, 4, 1, 5000);
    put_data(s, CRNET_COLL_ALLREDUCE, 4, 2, 1);
    break;
  case 4: /* a DATA frame parked, then the ABORT that says why */
    put_data(s, CRNET_COLL_REDUCE, 5, 0, 200);
    put_abort(s);
    break;
  case 5: /* control frames */
    put_abort(s);
    put_frame(s, CRNET__FRAME_RENDEZVOUS_ERROR, 0, 0, 0,
              "ranks 1, 2 never came", 21);
    break;
  case 6: /* a header that is not one */
    put(s, "CRNX this is not a frame header, not at all", 43);
    break;
  case 7: /* a payload of records' size */
    put_data(s, CRNET_COLL_ALLGATHER, 6, 3, 30000);
    put_data(s, CRNET_COLL_ALLGATHER, 6, 4, 12);
    break;
  }
}

static void link_seeds(void) {
  static const uint8_t cfgs[] = {0x00, 0x01, 0x03, 0x05, 0x15, 0x09, 0x19};
  for (size_t c = 0; c < sizeof cfgs; c++)
    for (int w = 0; w < 8; w++)
      for (int chunks = 0; chunks < 2; chunks++) {
        seed s = {.n = 0};
        char name[64];
        put_u8(&s, cfgs[c]);
        put_u8(&s, (uint8_t)(chunks * 77 + w));
        put_u8(&s, (uint8_t)(w * 13 + 5));
        link_stream(&s, w);
        snprintf(name, sizeof name, "cfg%02x-stream%d-chunks%d", cfgs[c], w,
                 chunks);
        write_seed("link", name, &s);
      }
}

/* --- rendezvous ------------------------------------------------------------------ */

/* A connection of form 0: handshake and REGISTER, no raw bytes. */
static void rdv_conn(seed *s, int rank, bool encrypt, int form) {
  put_u8(s, (uint8_t)(rank | (encrypt ? 0x0c : 0) | form << 4));
  if (form == 0 || form == 3) {
    if (form == 3) {
      put_u8(s, (uint8_t)rank);
      put_u8(s, 9);
    }
    put_u8(s, (uint8_t)rank);  /* family */
    put_u16(s, (uint16_t)(40000 + rank)); /* port */
    put(s, "\x7f\x00\x00\x01", 4);
    put_u8(s, 0);  /* streams - 1 */
    put_u16(s, 4095); /* stream_min - 1 */
  }
}

static void register_frame(seed *s, uint32_t rank, uint32_t size) {
  uint8_t pl[CRNET__RENDEZVOUS_REGISTER_SIZE];
  crnet__rendezvous_entry e = {.family = 4, .port = 1234, .pid = 42};
  crnet__tuning t;
  crnet__rendezvous_options o = {.streams = 2, .stream_min = 4096};
  memcpy(e.addr, "\x0a\x00\x00\x07", 4);
  snprintf(e.host, sizeof e.host, "node%u", (unsigned)rank);
  crnet__tuning_defaults(&t);
  crnet__put_le32(pl, rank);
  crnet__put_le32(pl + 4, size);
  crnet__rendezvous_entry_encode(&e, pl + 8);
  crnet__tuning_encode(&t, pl + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE);
  crnet__rendezvous_options_encode(&o, pl + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE +
                                           CRNET__TUNING_WIRE_SIZE);
  put_frame(s, CRNET__FRAME_RENDEZVOUS_REGISTER, 0, 0, 0, pl, sizeof pl);
}

static void raw_part(seed *s, const seed *raw) {
  put_u16(s, (uint16_t)raw->n);
  put(s, raw->data, raw->n);
}

static void table_payload(seed *s, int size) {
  uint8_t head[CRNET__RENDEZVOUS_TABLE_HEAD], ent[CRNET__RENDEZVOUS_ENTRY_SIZE];
  crnet__tuning t;
  crnet__rendezvous_options o = {.streams = 1, .stream_min = 1 << 20};
  crnet__tuning_defaults(&t);
  crnet__put_le32(head, (uint32_t)size);
  crnet__tuning_encode(&t, head + 4);
  crnet__rendezvous_options_encode(&o, head + 4 + CRNET__TUNING_WIRE_SIZE);
  put(s, head, sizeof head);
  for (int r = 0; r < size; r++) {
    crnet__rendezvous_entry e = {.family = 6, .port = (uint16_t)(5000 + r)};
    e.addr[15] = 1;
    snprintf(e.host, sizeof e.host, "host-%d", r);
    crnet__rendezvous_entry_encode(&e, ent);
    put(s, ent, sizeof ent);
  }
}

static void rendezvous_seeds(void) {
  seed s, raw;
  for (int size = 1; size <= 4; size++)
    for (int enc = 0; enc < 2; enc++) {
      char name[64];
      s.n = 0;
      put_u8(&s, (uint8_t)(size - 1));
      put_u8(&s, (uint8_t)(size - 1));
      for (int r = 0; r < size; r++) {
        rdv_conn(&s, r, enc, 0);
        put_u16(&s, 0);
      }
      table_payload(&s, size);
      snprintf(name, sizeof name, "all-register-p%d%s", size,
               enc ? "-encrypted" : "");
      write_seed("rendezvous", name, &s);
    }
  /* Rank 0 twice, then rank 1. */
  s.n = 0;
  put_u8(&s, 1);
  put_u8(&s, 2);
  rdv_conn(&s, 0, false, 0);
  put_u16(&s, 0);
  rdv_conn(&s, 0, true, 0);
  put_u16(&s, 0);
  rdv_conn(&s, 1, false, 0);
  put_u16(&s, 0);
  write_seed("rendezvous", "duplicate-rank", &s);
  /* Registrations that disagree with the handshake. */
  s.n = 0;
  put_u8(&s, 2);
  put_u8(&s, 1);
  rdv_conn(&s, 1, false, 3);
  put_u16(&s, 0);
  rdv_conn(&s, 2, false, 0);
  put_u16(&s, 0);
  write_seed("rendezvous", "register-disagrees", &s);
  /* REGISTER frames as raw bytes, one a DATA frame instead. */
  for (int enc = 0; enc < 2; enc++) {
    char name[64];
    s.n = 0;
    raw.n = 0;
    put_u8(&s, 1);
    put_u8(&s, 2);
    register_frame(&raw, 0, 2);
    rdv_conn(&s, 0, enc, 1);
    raw_part(&s, &raw);
    raw.n = 0;
    put_data(&raw, CRNET_COLL_BCAST, 1, 0, 10);
    rdv_conn(&s, 1, enc, 1);
    raw_part(&s, &raw);
    raw.n = 0;
    register_frame(&raw, 1, 2);
    put_frame(&raw, CRNET__FRAME_BYE, 0, 0, 0, NULL, 0);
    rdv_conn(&s, 1, enc, 1);
    raw_part(&s, &raw);
    snprintf(name, sizeof name, "raw-frames%s", enc ? "-encrypted" : "");
    write_seed("rendezvous", name, &s);
  }
  /* A registered rank that then sends garbage, and a rank that re-registers
   * after its connection failed. */
  s.n = 0;
  raw.n = 0;
  put_u8(&s, 1);
  put_u8(&s, 1);
  rdv_conn(&s, 0, false, 0);
  put(&raw, "garbage after the registration, a header long", 46);
  raw_part(&s, &raw);
  rdv_conn(&s, 0, false, 0);
  put_u16(&s, 0);
  write_seed("rendezvous", "register-then-garbage", &s);
  /* Garbage instead of a handshake. */
  s.n = 0;
  raw.n = 0;
  put_u8(&s, 0);
  put_u8(&s, 0);
  put_u8(&s, 2 << 4);
  put(&raw, "CRNH not quite a hello", 22);
  raw_part(&s, &raw);
  write_seed("rendezvous", "garbage-handshake", &s);
}

/* --- handshake: settings, then per message a mode (and bytes) ------------------ */

static void handshake_seeds(void) {
  static const uint8_t cfgs[] = {0x00, 0x1b, 0x03, 0x05, 0x20, 0x25, 0x21,
                                 0x3d, 0x40, 0x80, 0x01, 0x02, 0x0d};
  for (size_t c = 0; c < sizeof cfgs; c++)
    for (int mode = 0; mode < 5; mode++) {
      seed s = {.n = 0};
      char name[64];
      put_u8(&s, cfgs[c]);
      put_u8(&s, 5);    /* size */
      put_u8(&s, 3);    /* initiator */
      put_u8(&s, 0x21); /* responder, streams */
      put_u8(&s, (uint8_t)(c * 5 + mode));
      switch (mode) {
      case 0: /* untouched */
        put_u8(&s, 0);
        put_u8(&s, 0);
        put_u8(&s, 0);
        break;
      case 1: /* a bit of the HELLO's nonce flipped */
        put_u8(&s, 1);
        for (int i = 0; i < CRNET__HS_HELLO_SIZE; i++)
          put_u8(&s, i == 40 ? 0x08 : 0);
        put_u8(&s, 0);
        put_u8(&s, 0);
        break;
      case 2: /* the REPLY's MAC flipped */
        put_u8(&s, 0);
        put_u8(&s, 1);
        for (int i = 0; i < CRNET__HS_REPLY_SIZE; i++)
          put_u8(&s, i == CRNET__HS_REPLY_SIZE - 1 ? 0x80 : 0);
        put_u8(&s, 0);
        break;
      case 3: /* a HELLO of zeros (magic and all) */
        put_u8(&s, 2);
        for (int i = 0; i < CRNET__HS_HELLO_SIZE; i++)
          put_u8(&s, 0);
        break;
      case 4: /* calls out of order */
        put_u8(&s, 0);
        put_u8(&s, 3);
        put_u8(&s, 3);
        break;
      }
      snprintf(name, sizeof name, "cfg%02x-mode%d", cfgs[c], mode);
      write_seed("handshake", name, &s);
    }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: make_corpus DIR [STAMP]\n");
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "make_corpus: cannot create %s: %s\n", root,
            strerror(errno));
    return 1;
  }
  frame_seeds();
  link_seeds();
  rendezvous_seeds();
  handshake_seeds();
  if (argc == 3) {
    FILE *f = fopen(argv[2], "w");
    if (f == NULL || fclose(f) != 0) {
      fprintf(stderr, "make_corpus: cannot write %s\n", argv[2]);
      return 1;
    }
  }
  return 0;
}
