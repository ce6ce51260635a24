/* Unit tests of the frame header codec (src/runtime/frame.c).
 *
 * The codec is checked against the byte layout of frame.h written out by
 * hand, round-tripped over every kind with edge values, and attacked with
 * every single-byte corruption of the fields it validates and with random
 * headers (whatever decodes must re-encode to the very same bytes).
 */
#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "frame.h"

static const uint8_t all_kinds[] = {
    CRNET__FRAME_DATA,
    CRNET__FRAME_ABORT,
    CRNET__FRAME_BYE,
    CRNET__FRAME_MSG,
    CRNET__FRAME_RTS,
    CRNET__FRAME_CTS,
    CRNET__FRAME_RDATA,
    CRNET__FRAME_CREDIT,
    CRNET__FRAME_RENDEZVOUS_REGISTER,
    CRNET__FRAME_RENDEZVOUS_TABLE,
    CRNET__FRAME_RENDEZVOUS_ERROR,
    CRNET__FRAME_SHM_OFFER,
    CRNET__FRAME_AGREE,
    CRNET__FRAME_DECIDE,
    CRNET__FRAME_SHM_SWITCH,
    CRNET__FRAME_SHM_DECLINE,
    CRNET__FRAME_ADMIT,
    CRNET__FRAME_JOINER,
    CRNET__FRAME_RENDEZVOUS_JOIN,
    CRNET__FRAME_RENDEZVOUS_JOINED,
};
#define NKINDS (sizeof all_kinds / sizeof all_kinds[0])

static int is_known_kind(unsigned k) {
  for (size_t i = 0; i < NKINDS; i++)
    if (all_kinds[i] == k)
      return 1;
  return 0;
}

/* A header that decodes successfully into *h must be left alone when
 * decoding fails; this sentinel shows whether it was touched. */
static crnet__frame_header sentinel(void) {
  crnet__frame_header h;
  memset(&h, 0, sizeof h);
  h.kind = 0xEE;
  h.coll = 0xEE;
  h.flags = 0xEE;
  h.seq = 0xEEEEEEEEEEEEEEEEu;
  h.round = 0xEEEEEEEEu;
  h.sig = 0xEEEEEEEEu;
  h.length = 0xEEEEEEEEEEEEEEEEu;
  h.call.count = 0xEEEEEEEEEEEEEEEEu;
  h.call.op = h.call.root = (int32_t)0xEEEEEEEEu;
  h.call.dtype = h.call.schedule = h.call.variant = 0xEE;
  return h;
}

static int same_header(const crnet__frame_header *a,
                       const crnet__frame_header *b) {
  return a->kind == b->kind && a->coll == b->coll && a->flags == b->flags &&
         a->seq == b->seq && a->round == b->round && a->sig == b->sig &&
         a->length == b->length && a->call.count == b->call.count &&
         a->call.op == b->call.op && a->call.root == b->call.root &&
         a->call.dtype == b->call.dtype &&
         a->call.schedule == b->call.schedule &&
         a->call.variant == b->call.variant && a->ctx == b->ctx;
}

/* Decodes bytes that must be rejected and checks the whole failure
 * contract: CRNET_EIO, a reason, the output untouched. The case is named by
 * printf's fmt and arguments. Called some 10^5 times: the checks are plain
 * ifs, and the name is formatted only for a failure (EXPECT, check_main.h). */
__attribute__((format(printf, 3, 4))) static const char *
expect_reject(const uint8_t in[CRNET__FRAME_HEADER_SIZE], uint64_t max_length,
              const char *fmt, ...) {
  crnet__frame_header h = sentinel(), s = sentinel();
  const char *why = NULL;
  int rc = crnet__frame_decode(in, max_length, &h, &why);
  char fault[64] = "";
  if (rc != CRNET_EIO)
    snprintf(fault, sizeof fault, "decode returned %d, wanted CRNET_EIO", rc);
  else if (why == NULL || why[0] == '\0')
    snprintf(fault, sizeof fault, "no reason given");
  else if (!same_header(&h, &s))
    snprintf(fault, sizeof fault, "output written on failure");
  if (fault[0] != '\0') {
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ck_abort_msg("%s: %s", what, fault);
  }
  return why;
}

START_TEST(test_layout_known_bytes) {
  crnet__frame_header h = {
      .kind = CRNET__FRAME_DATA,
      .coll = CRNET_COLL_BCAST,
      .flags = 0,
      .seq = 0x0102030405060708u,
      .round = 0x11223344u,
      .sig = 0xA1B2C3D4u,
      .length = 0x000000F0E0D0C0B0u,
      .ctx = 0x0203,
      .call = {.count = 0x1112131415161718u,
               .op = -1,
               .root = 0x21222324,
               .dtype = CRNET_DOUBLE,
               .schedule = 0x31,
               .variant = CRNET__CALL_EXCLUSIVE},
  };
  static const uint8_t want[CRNET__FRAME_HEADER_SIZE] = {
      'C',  'R',  'N',  'F',                          /* magic */
      0x04,                                           /* version */
      0x01,                                           /* kind DATA */
      0x05,                                           /* coll BCAST */
      0x00,                                           /* flags */
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* seq */
      0x44, 0x33, 0x22, 0x11,                         /* round */
      0xD4, 0xC3, 0xB2, 0xA1,                         /* sig */
      0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x00, 0x00, /* length */
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* call count */
      0xFF, 0xFF, 0xFF, 0xFF,                         /* op -1 */
      0x24, 0x23, 0x22, 0x21,                         /* root */
      CRNET_DOUBLE,                                   /* dtype */
      0x31,                                           /* schedule */
      0x01,                                           /* variant */
      0x00,                                           /* reserved */
      0x03, 0x02, 0x00, 0x00,                         /* ctx */
  };
  uint8_t got[CRNET__FRAME_HEADER_SIZE];
  memset(got, 0x5A, sizeof got);
  crnet__frame_encode(&h, got);
  for (size_t i = 0; i < sizeof want; i++)
    ck_assert_msg(got[i] == want[i], "byte %zu: got 0x%02x, want 0x%02x", i,
                  got[i], want[i]);

  crnet__frame_header back = sentinel();
  const char *why = NULL;
  ck_assert_int_eq(crnet__frame_decode(want, UINT64_MAX, &back, &why), 0);
  ck_assert(same_header(&back, &h));
}
END_TEST

START_TEST(test_round_trip_every_kind) {
  static const uint64_t seqs[] = {0, 1, 0x8000000000000000u, UINT64_MAX};
  static const uint32_t rounds[] = {0, 1, 0x80000000u, UINT32_MAX};
  static const uint32_t sigs[] = {0, 0xDEADBEEFu, UINT32_MAX};
  static const uint64_t lengths[] = {0, 1, (uint64_t)1 << 40};
  int cases = 0;

  for (size_t k = 0; k < NKINDS; k++) {
    uint8_t kind = all_kinds[k];
    /* DATA frames take every collective; others only 0. */
    unsigned ncoll = kind == CRNET__FRAME_DATA ? CRNET_COLL_COUNT : 1;
    for (unsigned coll = 0; coll < ncoll; coll++)
      for (size_t a = 0; a < sizeof seqs / sizeof seqs[0]; a++)
        for (size_t b = 0; b < sizeof rounds / sizeof rounds[0]; b++)
          for (size_t c = 0; c < sizeof sigs / sizeof sigs[0]; c++)
            for (size_t d = 0; d < sizeof lengths / sizeof lengths[0]; d++) {
              crnet__frame_header h = {.kind = kind,
                                       .coll = (uint8_t)coll,
                                       .flags = 0,
                                       .seq = seqs[a],
                                       .round = rounds[b],
                                       .sig = sigs[c],
                                       .length = lengths[d]};
              uint8_t buf[CRNET__FRAME_HEADER_SIZE];
              crnet__frame_encode(&h, buf);
              crnet__frame_header back = sentinel();
              const char *why = NULL;
              /* max_length equal to the largest length: the bound is
               * inclusive. */
              int rc = crnet__frame_decode(buf, (uint64_t)1 << 40, &back, &why);
              EXPECT(rc == 0, "kind %u coll %u: %s", kind, coll,
                     why ? why : "(no reason)");
              EXPECT(same_header(&back, &h),
                     "kind %u coll %u seq %llu round %u length %llu "
                     "did not round-trip",
                     kind, coll, (unsigned long long)h.seq, h.round,
                     (unsigned long long)h.length);
              cases++;
            }
  }
  ck_assert_int_eq(cases, (int)(CRNET_COLL_COUNT + NKINDS - 1) * 4 * 4 * 3 * 3);
}
END_TEST

START_TEST(test_max_length_unbounded) {
  crnet__frame_header h = {.kind = CRNET__FRAME_RENDEZVOUS_TABLE,
                           .length = UINT64_MAX};
  uint8_t buf[CRNET__FRAME_HEADER_SIZE];
  crnet__frame_encode(&h, buf);
  crnet__frame_header back = sentinel();
  ck_assert_int_eq(crnet__frame_decode(buf, UINT64_MAX, &back, NULL), 0);
  ck_assert(back.length == UINT64_MAX);
  expect_reject(buf, UINT64_MAX - 1, "length 2^64-1 over max 2^64-2");
}
END_TEST

/* Every other value of each byte of magic, version, kind and flags is
 * refused, and the reason names the field. The frame is a DATA frame with a
 * non-zero collective, so that turning its kind into another known kind is
 * refused as well (coll set on a non-DATA frame). */
START_TEST(test_single_byte_corruption) {
  static const struct {
    size_t offset;
    const char *reason_word;
  } fields[] = {
      {0, "magic"},   {1, "magic"}, {2, "magic"}, {3, "magic"},
      {4, "version"}, {5, NULL},    {7, "flags"},
  };
  crnet__frame_header h = {.kind = CRNET__FRAME_DATA,
                           .coll = CRNET_COLL_ALLGATHER,
                           .seq = 42,
                           .round = 3,
                           .sig = 7,
                           .length = 100};
  uint8_t good[CRNET__FRAME_HEADER_SIZE];
  crnet__frame_encode(&h, good);
  int rejected = 0;

  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
    size_t off = fields[f].offset;
    for (unsigned v = 0; v < 256; v++) {
      if (v == good[off])
        continue;
      uint8_t bad[CRNET__FRAME_HEADER_SIZE];
      memcpy(bad, good, sizeof bad);
      bad[off] = (uint8_t)v;
      const char *why =
          expect_reject(bad, UINT64_MAX, "byte %zu = 0x%02x", off, v);
      if (fields[f].reason_word != NULL)
        EXPECT(strstr(why, fields[f].reason_word) != NULL,
               "byte %zu = 0x%02x: reason '%s' does not mention %s", off, v,
               why, fields[f].reason_word);
      else if (!is_known_kind(v))
        EXPECT(strstr(why, "kind") != NULL, "byte %zu = 0x%02x: reason '%s'",
               off, v, why);
      else
        EXPECT(strstr(why, "non-DATA") != NULL,
               "byte %zu = 0x%02x: reason '%s'", off, v, why);
      rejected++;
    }
  }
  ck_assert_int_eq(rejected, 7 * 255);
}
END_TEST

START_TEST(test_coll_rules) {
  for (size_t k = 0; k < NKINDS; k++) {
    uint8_t kind = all_kinds[k];
    crnet__frame_header h = {.kind = kind, .seq = 9};
    uint8_t buf[CRNET__FRAME_HEADER_SIZE];
    crnet__frame_encode(&h, buf);
    for (unsigned coll = 0; coll < 256; coll++) {
      buf[6] = (uint8_t)coll;
      int ok = kind == CRNET__FRAME_DATA ? coll < CRNET_COLL_COUNT : coll == 0;
      if (ok) {
        crnet__frame_header back = sentinel();
        const char *why = NULL;
        EXPECT(crnet__frame_decode(buf, 0, &back, &why) == 0,
               "kind %u coll %u: %s", kind, coll, why ? why : "(no reason)");
        EXPECT(back.coll == coll && back.kind == kind,
               "kind %u coll %u: decoded as kind %u coll %u", kind, coll,
               back.kind, back.coll);
      } else {
        expect_reject(buf, 0, "kind %u coll %u", kind, coll);
      }
    }
  }
}
END_TEST

/* The call fields: any values in a DATA frame but for the datatype (in
 * range), the variant (known bits) and the reserved byte (zero); nothing at
 * all in the other kinds. The context id (bytes 52-55): below
 * CRNET__FRAME_CTX_MAX in DATA and ABORT frames, zero in the others. */
START_TEST(test_call_rules) {
  for (size_t k = 0; k < NKINDS; k++) {
    uint8_t kind = all_kinds[k];
    int data = kind == CRNET__FRAME_DATA;
    crnet__frame_header h = {.kind = kind,
                             .coll = data ? CRNET_COLL_ALLREDUCE : 0};
    uint8_t buf[CRNET__FRAME_HEADER_SIZE], b[CRNET__FRAME_HEADER_SIZE];
    crnet__frame_encode(&h, buf);
    for (int off = 32; off < CRNET__FRAME_HEADER_SIZE; off++)
      for (unsigned v = 1; v < 256; v++) {
        int has_ctx = data || kind == CRNET__FRAME_ABORT ||
                      kind == CRNET__FRAME_MSG || kind == CRNET__FRAME_RTS ||
                      kind == CRNET__FRAME_CTS || kind == CRNET__FRAME_RDATA ||
                      kind == CRNET__FRAME_AGREE ||
                      kind == CRNET__FRAME_DECIDE || kind == CRNET__FRAME_ADMIT;
        int ok = (data && off < 51 &&
                  (off != 48 || v < CRNET_DATATYPE_COUNT) &&
                  (off != 50 || v == CRNET__CALL_EXCLUSIVE)) ||
                 (has_ctx && off == 52) ||
                 (has_ctx && off == 53 &&
                  ((uint32_t)v << 8) < CRNET__FRAME_CTX_MAX);
        memcpy(b, buf, sizeof b);
        b[off] = (uint8_t)v;
        if (ok) {
          crnet__frame_header back = sentinel();
          uint8_t again[CRNET__FRAME_HEADER_SIZE];
          EXPECT(crnet__frame_decode(b, 0, &back, NULL) == 0,
                 "kind %u byte %d = %u", kind, off, v);
          crnet__frame_encode(&back, again);
          EXPECT(memcmp(again, b, sizeof b) == 0,
                 "kind %u byte %d = %u: not canonical", kind, off, v);
        } else {
          expect_reject(b, 0, "kind %u byte %d = %u", kind, off, v);
        }
      }
  }
}
END_TEST

START_TEST(test_length_over_max) {
  static const struct {
    uint64_t length, max;
    int ok;
  } cases[] = {
      {0, 0, 1},
      {1, 0, 0},
      {100, 100, 1},
      {101, 100, 0},
      {(uint64_t)1 << 40, ((uint64_t)1 << 40) - 1, 0},
      {UINT64_MAX, 0, 0},
      {0x0100000000000000u, 0xFF, 0}, /* only the top byte set */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    crnet__frame_header h = {.kind = CRNET__FRAME_DATA,
                             .coll = CRNET_COLL_ALLREDUCE,
                             .length = cases[i].length};
    uint8_t buf[CRNET__FRAME_HEADER_SIZE];
    crnet__frame_encode(&h, buf);
    char what[80];
    snprintf(what, sizeof what, "length %llu max %llu",
             (unsigned long long)cases[i].length,
             (unsigned long long)cases[i].max);
    if (cases[i].ok) {
      crnet__frame_header back = sentinel();
      ck_assert_msg(crnet__frame_decode(buf, cases[i].max, &back, NULL) == 0,
                    "%s refused", what);
      ck_assert(back.length == cases[i].length);
    } else {
      const char *why = expect_reject(buf, cases[i].max, "%s", what);
      ck_assert_msg(strstr(why, "longer") != NULL, "%s: reason '%s'", what,
                    why);
    }
  }
}
END_TEST

START_TEST(test_garbage_and_null_why) {
  uint8_t zeros[CRNET__FRAME_HEADER_SIZE] = {0};
  uint8_t ones[CRNET__FRAME_HEADER_SIZE];
  memset(ones, 0xFF, sizeof ones);
  expect_reject(zeros, UINT64_MAX, "all zeros");
  expect_reject(ones, UINT64_MAX, "all 0xff");

  /* why may be NULL: still refused, still untouched output. */
  crnet__frame_header h = sentinel(), s = sentinel();
  ck_assert_int_eq(crnet__frame_decode(zeros, UINT64_MAX, &h, NULL), CRNET_EIO);
  ck_assert(same_header(&h, &s));
}
END_TEST

/* xorshift64*: a reproducible stream, so a failure can be replayed. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Du;
}

/* Random headers, half of them with a valid magic and version so the later
 * checks are reached: whatever decodes must re-encode to the same bytes (the
 * encoding is canonical), and whatever fails must give a reason. */
START_TEST(test_random_headers_canonical) {
  uint64_t s = 0x9E3779B97F4A7C15u;
  int accepted = 0, refused = 0;
  for (int n = 0; n < 200000; n++) {
    uint8_t buf[CRNET__FRAME_HEADER_SIZE];
    for (size_t i = 0; i < sizeof buf; i += 8) {
      uint64_t r = rng_next(&s);
      memcpy(buf + i, &r, 8);
    }
    if (n % 2 == 0) {
      memcpy(buf, CRNET__FRAME_MAGIC, 4);
      buf[4] = CRNET__FRAME_VERSION;
      /* Bias towards known kinds, small colls and zero flags, so that a
       * fair share of the headers is valid. */
      buf[5] = all_kinds[buf[5] % NKINDS];
      buf[6] = (uint8_t)(buf[6] % (CRNET_COLL_COUNT + 2));
      if (buf[5] != CRNET__FRAME_DATA && (buf[6] & 1))
        buf[6] = 0;
      if (buf[7] & 1)
        buf[7] = 0;
      /* The call fields: zero outside DATA frames (mostly), a datatype
       * in range, a known variant and zero reserved bytes (mostly). */
      if (buf[5] != CRNET__FRAME_DATA && (buf[8] & 3) != 0)
        memset(buf + 32, 0, 19);
      buf[48] = (uint8_t)(buf[48] % (CRNET_DATATYPE_COUNT + 1));
      buf[50] &= (buf[9] & 1) ? 0xff : 0x01;
      if (buf[10] & 7)
        memset(buf + 51, 0, 5);
      if (buf[11] & 3)
        buf[53] &= 3;
    }
    crnet__frame_header h = sentinel();
    const char *why = NULL;
    if (crnet__frame_decode(buf, UINT64_MAX, &h, &why) == 0) {
      uint8_t again[CRNET__FRAME_HEADER_SIZE];
      crnet__frame_encode(&h, again);
      EXPECT(memcmp(again, buf, sizeof buf) == 0,
             "header %d decoded but does not re-encode identically", n);
      accepted++;
    } else {
      EXPECT(why != NULL, "header %d refused without a reason", n);
      refused++;
    }
  }
  /* Both outcomes must have been exercised for the test to mean anything. */
  ck_assert_int_gt(accepted, 10000);
  ck_assert_int_gt(refused, 100000);
}
END_TEST

static Suite *frame_suite(void) {
  Suite *s = suite_create("frame");
  TCase *tc = tcase_create("codec");
  tcase_add_test(tc, test_layout_known_bytes);
  tcase_add_test(tc, test_round_trip_every_kind);
  tcase_add_test(tc, test_max_length_unbounded);
  tcase_add_test(tc, test_single_byte_corruption);
  tcase_add_test(tc, test_coll_rules);
  tcase_add_test(tc, test_call_rules);
  tcase_add_test(tc, test_length_over_max);
  tcase_add_test(tc, test_garbage_and_null_why);
  tcase_add_test(tc, test_random_headers_canonical);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(frame_suite()); }
