/* The frame header codec (layout in frame.h).
 *
 * Every message after the handshake starts with this 56-byte header, so the
 * decoder runs once per received frame and is also the first thing that sees
 * bytes from a stranger. It is therefore strict: anything it does not fully
 * understand is rejected with a static reason, and the decoded header is only
 * written out when every check has passed.
 */
#include "frame.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "crnet.h"

/* Field offsets, in the order of the table in frame.h. */
enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_KIND = 5,
  OFF_COLL = 6,
  OFF_FLAGS = 7,
  OFF_SEQ = 8,
  OFF_ROUND = 16,
  OFF_SIG = 20,
  OFF_LENGTH = 24,
  OFF_COUNT = 32,
  OFF_OP = 40,
  OFF_ROOT = 44,
  OFF_DTYPE = 48,
  OFF_SCHEDULE = 49,
  OFF_VARIANT = 50,
  OFF_RESERVED = 51,
  OFF_CTX = 52,
  OFF_END = 56,
};

#define VARIANT_BITS CRNET__CALL_EXCLUSIVE

#define MAGIC_BYTES (sizeof CRNET__FRAME_MAGIC - 1)

_Static_assert(MAGIC_BYTES == OFF_VERSION - OFF_MAGIC, "magic is 4 bytes");
_Static_assert(OFF_SEQ + 8 == OFF_ROUND && OFF_ROUND + 4 == OFF_SIG &&
                   OFF_SIG + 4 == OFF_LENGTH,
               "fields are contiguous");
_Static_assert(OFF_COUNT == OFF_LENGTH + 8 && OFF_OP == OFF_COUNT + 8 &&
                   OFF_ROOT == OFF_OP + 4 && OFF_DTYPE == OFF_ROOT + 4 &&
                   OFF_SCHEDULE == OFF_DTYPE + 1 &&
                   OFF_VARIANT == OFF_SCHEDULE + 1 &&
                   OFF_RESERVED == OFF_VARIANT + 1,
               "call fields are contiguous");
_Static_assert(OFF_CTX == OFF_RESERVED + 1 && OFF_CTX + 4 == OFF_END,
               "the context id ends the header");
_Static_assert(OFF_END == CRNET__FRAME_HEADER_SIZE, "the header is 56 bytes");
_Static_assert(CRNET_DATATYPE_COUNT <= 0x100, "a datatype fits its byte");
_Static_assert(CRNET__FRAME_VERSION >= 0 && CRNET__FRAME_VERSION <= 0xff,
               "the version fits its byte");
_Static_assert(CRNET_COLL_COUNT <= 0x100, "a collective fits the coll byte");

static int known_kind(uint8_t kind) {
  switch ((enum crnet__frame_kind)kind) {
  case CRNET__FRAME_DATA:
  case CRNET__FRAME_ABORT:
  case CRNET__FRAME_BYE:
  case CRNET__FRAME_MSG:
  case CRNET__FRAME_RTS:
  case CRNET__FRAME_CTS:
  case CRNET__FRAME_RDATA:
  case CRNET__FRAME_CREDIT:
  case CRNET__FRAME_SHM_OFFER:
  case CRNET__FRAME_SHM_SWITCH:
  case CRNET__FRAME_SHM_DECLINE:
  case CRNET__FRAME_AGREE:
  case CRNET__FRAME_DECIDE:
  case CRNET__FRAME_ADMIT:
  case CRNET__FRAME_JOINER:
  case CRNET__FRAME_RENDEZVOUS_REGISTER:
  case CRNET__FRAME_RENDEZVOUS_TABLE:
  case CRNET__FRAME_RENDEZVOUS_ERROR:
  case CRNET__FRAME_RENDEZVOUS_JOIN:
  case CRNET__FRAME_RENDEZVOUS_JOINED:
    return 1;
  }
  return 0;
}

/* The checks on the decoded fields, shared by the decoder and by the
 * encoder's assertion, so a sender can never emit a header its peers would
 * refuse. NULL when the header is acceptable. */
static const char *check_fields(const crnet__frame_header *h,
                                uint64_t max_length) {
  if (!known_kind(h->kind))
    return "unknown frame kind";
  if (h->kind == CRNET__FRAME_DATA && h->coll >= CRNET_COLL_COUNT)
    return "DATA frame names no known collective";
  if (h->kind != CRNET__FRAME_DATA && h->coll != 0)
    return "collective set on a non-DATA frame";
  if (h->kind != CRNET__FRAME_DATA &&
      (h->call.count != 0 || h->call.op != 0 || h->call.root != 0 ||
       h->call.dtype != 0 || h->call.schedule != 0 || h->call.variant != 0))
    return "call fields set on a non-DATA frame";
  if (h->kind == CRNET__FRAME_DATA && h->call.dtype >= CRNET_DATATYPE_COUNT)
    return "DATA frame names no known datatype";
  if ((h->call.variant & ~VARIANT_BITS) != 0)
    return "unknown call variant";
  if (h->flags != 0)
    return "unknown flags";
  if (h->ctx >= CRNET__FRAME_CTX_MAX)
    return "context id out of range";
  if (h->ctx != 0 && h->kind != CRNET__FRAME_DATA &&
      h->kind != CRNET__FRAME_ABORT && h->kind != CRNET__FRAME_MSG &&
      h->kind != CRNET__FRAME_RTS && h->kind != CRNET__FRAME_CTS &&
      h->kind != CRNET__FRAME_RDATA && h->kind != CRNET__FRAME_AGREE &&
      h->kind != CRNET__FRAME_DECIDE && h->kind != CRNET__FRAME_ADMIT)
    return "context id set on a frame of no communicator";
  if (h->length > max_length)
    return "payload longer than allowed";
  return NULL;
}

void crnet__frame_encode(const crnet__frame_header *h,
                         uint8_t out[CRNET__FRAME_HEADER_SIZE]) {
  assert(check_fields(h, UINT64_MAX) == NULL);
  memcpy(out + OFF_MAGIC, CRNET__FRAME_MAGIC, MAGIC_BYTES);
  out[OFF_VERSION] = CRNET__FRAME_VERSION;
  out[OFF_KIND] = h->kind;
  out[OFF_COLL] = h->coll;
  out[OFF_FLAGS] = h->flags;
  crnet__put_le64(out + OFF_SEQ, h->seq);
  crnet__put_le32(out + OFF_ROUND, h->round);
  crnet__put_le32(out + OFF_SIG, h->sig);
  crnet__put_le64(out + OFF_LENGTH, h->length);
  crnet__put_le64(out + OFF_COUNT, h->call.count);
  crnet__put_le32(out + OFF_OP, (uint32_t)h->call.op);
  crnet__put_le32(out + OFF_ROOT, (uint32_t)h->call.root);
  out[OFF_DTYPE] = h->call.dtype;
  out[OFF_SCHEDULE] = h->call.schedule;
  out[OFF_VARIANT] = h->call.variant;
  out[OFF_RESERVED] = 0;
  crnet__put_le32(out + OFF_CTX, h->ctx);
}

int crnet__frame_decode(const uint8_t in[CRNET__FRAME_HEADER_SIZE],
                        uint64_t max_length, crnet__frame_header *h,
                        const char **why) {
  const char *problem = NULL;
  crnet__frame_header d;

  if (memcmp(in + OFF_MAGIC, CRNET__FRAME_MAGIC, MAGIC_BYTES) != 0) {
    problem = "bad frame magic";
    goto out;
  }
  if (in[OFF_VERSION] != CRNET__FRAME_VERSION) {
    problem = "unsupported frame version";
    goto out;
  }
  d.kind = in[OFF_KIND];
  d.coll = in[OFF_COLL];
  d.flags = in[OFF_FLAGS];
  d.seq = crnet__get_le64(in + OFF_SEQ);
  d.round = crnet__get_le32(in + OFF_ROUND);
  d.sig = crnet__get_le32(in + OFF_SIG);
  d.length = crnet__get_le64(in + OFF_LENGTH);
  d.call.count = crnet__get_le64(in + OFF_COUNT);
  d.call.op = (int32_t)crnet__get_le32(in + OFF_OP);
  d.call.root = (int32_t)crnet__get_le32(in + OFF_ROOT);
  d.call.dtype = in[OFF_DTYPE];
  d.call.schedule = in[OFF_SCHEDULE];
  d.call.variant = in[OFF_VARIANT];
  d.ctx = crnet__get_le32(in + OFF_CTX);
  if (in[OFF_RESERVED] != 0) {
    problem = "reserved header bytes not zero";
    goto out;
  }
  problem = check_fields(&d, max_length);
  if (problem == NULL)
    *h = d;

out:
  if (problem == NULL)
    return 0;
  if (why != NULL)
    *why = problem;
  return CRNET_EIO;
}
