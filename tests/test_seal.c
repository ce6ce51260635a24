/* Unit tests of the record layer (src/runtime/seal.c): round trips with both
 * ciphers, and the attacker's moves on records in flight (a flipped bit, a
 * truncated, replayed, reordered or dropped record, a record from the other
 * direction) all fail authentication, and the counter stops at its end. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "frame.h"
#include "handshake.h"
#include "seal.h"
#include "skip.h"

static const uint8_t key_tx[CRNET__SESSION_KEY_BYTES] = {1, 2, 3, 4, 5};
static const uint8_t key_rx[CRNET__SESSION_KEY_BYTES] = {9, 8, 7, 6, 5};

/* The record layer used in place: plaintext at rec + 4. */
static int seal_in_place(crnet__seal *s, uint8_t *rec, uint32_t len) {
  return crnet__seal_record(s, rec, rec + CRNET__SEAL_LEN_BYTES, len);
}

static int open_in_place(crnet__seal *s, uint8_t *rec, uint32_t len) {
  return crnet__seal_open(s, rec, len, rec + CRNET__SEAL_LEN_BYTES);
}

/* _i of the loop tests: 0 AES-256-GCM, 1 XChaCha20-Poly1305. */
static uint8_t cipher_of(int i) {
  return i == 0 ? CRNET__CIPHER_AES256GCM : CRNET__CIPHER_XCHACHA20POLY1305;
}

/* A sealer and an opener of one direction, or false (a named skip of the
 * calling test) when the CPU lacks the cipher (AES-NI). */
#define pair(i, tx, rx) pair_for(__func__, i, tx, rx)
static bool pair_for(const char *test, int i, crnet__seal **tx,
                     crnet__seal **rx) {
  uint8_t c = cipher_of(i);
  if (c == CRNET__CIPHER_AES256GCM && !crnet__seal_aes_available()) {
    test_skip(test, "AES-256-GCM: this CPU has no AES-NI");
    return false;
  }
  ck_assert_int_eq(crnet__seal_new(tx, c, key_tx), 0);
  ck_assert_int_eq(crnet__seal_new(rx, c, key_tx), 0);
  return true;
}

/* A record of len bytes of a pattern depending on seed, sealed. */
static uint8_t *make_record(crnet__seal *tx, uint32_t len, uint8_t seed) {
  uint8_t *rec = malloc(len + CRNET__SEAL_OVERHEAD);
  ck_assert_ptr_nonnull(rec);
  for (uint32_t k = 0; k < len; k++)
    rec[CRNET__SEAL_LEN_BYTES + k] = (uint8_t)(seed + k * 7);
  ck_assert_int_eq(seal_in_place(tx, rec, len), 0);
  return rec;
}

/* One assertion per record, not per byte: Check records every assertion
 * that passes (a write to its pipe). */
static void check_plain(const uint8_t *rec, uint32_t len, uint8_t seed) {
  uint32_t k = 0;
  while (k < len && rec[CRNET__SEAL_LEN_BYTES + k] == (uint8_t)(seed + k * 7))
    k++;
  ck_assert_msg(k == len, "byte %u of %u wrong", k, len);
}

/* A copy of a record, to replay or tamper with. */
static uint8_t *copy_record(const uint8_t *rec, uint32_t len) {
  uint8_t *c = malloc(len + CRNET__SEAL_OVERHEAD);
  ck_assert_ptr_nonnull(c);
  memcpy(c, rec, len + CRNET__SEAL_OVERHEAD);
  return c;
}

START_TEST(test_round_trip) {
  static const uint32_t lens[] = {1,
                                  2,
                                  15,
                                  16,
                                  17,
                                  32,
                                  1000,
                                  4096,
                                  CRNET__SEAL_RECORD_MAX - 1,
                                  CRNET__SEAL_RECORD_MAX};
  crnet__seal *tx, *rx;
  if (!pair(_i, &tx, &rx))
    return;
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    uint32_t len = lens[k];
    uint8_t *rec = make_record(tx, len, (uint8_t)k);
    ck_assert_uint_eq(crnet__seal_record_len(rec), len);
    /* The ciphertext is not the plaintext (a 1-byte record may collide by
     * chance, 1 in 256, so only longer ones are compared). */
    if (len >= 16) {
      int same = 1;
      for (uint32_t b = 0; b < 16; b++)
        same &= rec[CRNET__SEAL_LEN_BYTES + b] == (uint8_t)(k + b * 7);
      ck_assert_msg(!same, "record of %u bytes not encrypted", len);
    }
    ck_assert_int_eq(open_in_place(rx, rec, len), 0);
    check_plain(rec, len, (uint8_t)k);
    free(rec);
  }
  ck_assert_uint_eq(crnet__seal_counter(tx), sizeof lens / sizeof lens[0]);
  ck_assert_uint_eq(crnet__seal_counter(rx), sizeof lens / sizeof lens[0]);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* Sealing from, and opening into, separate buffers (what links do) gives
 * the same records as in place. */
START_TEST(test_out_of_place) {
  crnet__seal *tx, *rx, *tx2;
  const uint32_t len = 3000;
  if (!pair(_i, &tx, &rx))
    return;
  ck_assert_int_eq(crnet__seal_new(&tx2, cipher_of(_i), key_tx), 0);
  uint8_t *plain = malloc(len), *out = malloc(len);
  uint8_t *rec = malloc(len + CRNET__SEAL_OVERHEAD);
  ck_assert(plain != NULL && out != NULL && rec != NULL);
  for (uint32_t k = 0; k < len; k++)
    plain[k] = (uint8_t)(k * 13);
  ck_assert_int_eq(crnet__seal_record(tx, rec, plain, len), 0);
  uint8_t *same = malloc(len + CRNET__SEAL_OVERHEAD);
  ck_assert_ptr_nonnull(same);
  memcpy(same + CRNET__SEAL_LEN_BYTES, plain, len);
  ck_assert_int_eq(seal_in_place(tx2, same, len), 0);
  ck_assert_mem_eq(rec, same, len + CRNET__SEAL_OVERHEAD);
  ck_assert_int_eq(crnet__seal_open(rx, rec, len, out), 0);
  ck_assert_mem_eq(out, plain, len);
  free(plain), free(out), free(rec), free(same);
  crnet__seal_free(tx2);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* The same plaintext twice gives different records (the nonce moves on). */
START_TEST(test_nonce_advances) {
  crnet__seal *tx, *rx;
  if (!pair(_i, &tx, &rx))
    return;
  uint8_t *a = make_record(tx, 64, 1), *b = make_record(tx, 64, 1);
  ck_assert(memcmp(a, b, 64 + CRNET__SEAL_OVERHEAD) != 0);
  ck_assert_int_eq(open_in_place(rx, a, 64), 0);
  ck_assert_int_eq(open_in_place(rx, b, 64), 0);
  check_plain(b, 64, 1);
  free(a);
  free(b);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* Every bit of a record flipped, one at a time: the length (then it either
 * announces another size, which the caller reads as another record, or it
 * is out of range) or the ciphertext or the tag, always refused, and the
 * refused plaintext is zeroed. */
START_TEST(test_flipped_bits) {
  crnet__seal *tx, *rx;
  const uint32_t len = 40;
  if (!pair(_i, &tx, &rx))
    return;
  uint8_t *rec = make_record(tx, len, 3);
  for (uint32_t byte = 0; byte < len + CRNET__SEAL_OVERHEAD; byte++)
    for (int bit = 0; bit < 8; bit++) {
      uint8_t *bad = copy_record(rec, len);
      bad[byte] ^= (uint8_t)(1u << bit);
      if (byte < CRNET__SEAL_LEN_BYTES) {
        uint32_t claimed = crnet__seal_record_len(bad);
        /* A length that still fits the buffer must fail the tag (the
         * length is associated data); others are refused as malformed. */
        if (claimed != 0 && claimed <= len)
          ck_assert_int_eq(open_in_place(rx, bad, claimed), CRNET_EAUTH);
      } else {
        ck_assert_int_eq(open_in_place(rx, bad, len), CRNET_EAUTH);
        uint32_t k = 0;
        while (k < len && bad[CRNET__SEAL_LEN_BYTES + k] == 0)
          k++;
        ck_assert_msg(k == len, "byte %u of a refused record not wiped", k);
      }
      free(bad);
    }
  /* The genuine record still opens: failures did not move the counter. */
  ck_assert_int_eq(open_in_place(rx, rec, len), 0);
  check_plain(rec, len, 3);
  free(rec);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

START_TEST(test_bad_lengths) {
  uint8_t hdr[CRNET__SEAL_LEN_BYTES];
  crnet__put_le32(hdr, 0);
  ck_assert_uint_eq(crnet__seal_record_len(hdr), 0);
  crnet__put_le32(hdr, CRNET__SEAL_RECORD_MAX + 1);
  ck_assert_uint_eq(crnet__seal_record_len(hdr), 0);
  crnet__put_le32(hdr, UINT32_MAX);
  ck_assert_uint_eq(crnet__seal_record_len(hdr), 0);
  crnet__put_le32(hdr, CRNET__SEAL_RECORD_MAX);
  ck_assert_uint_eq(crnet__seal_record_len(hdr), CRNET__SEAL_RECORD_MAX);
}
END_TEST

/* A record cut short: the receiver, reading a fixed size, sees its prefix
 * and then whatever comes next; here, the next record's bytes. */
START_TEST(test_truncated) {
  crnet__seal *tx, *rx;
  const uint32_t len = 100;
  if (!pair(_i, &tx, &rx))
    return;
  uint8_t *a = make_record(tx, len, 1), *b = make_record(tx, len, 2);
  for (uint32_t keep = CRNET__SEAL_LEN_BYTES; keep < len + CRNET__SEAL_OVERHEAD;
       keep++) {
    uint8_t *bad = copy_record(a, len);
    memcpy(bad + keep, b, len + CRNET__SEAL_OVERHEAD - keep);
    ck_assert_int_eq(open_in_place(rx, bad, len), CRNET_EAUTH);
    free(bad);
  }
  free(a);
  free(b);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* Replayed, reordered and dropped records: the receiver's count is the
 * nonce, so each fails. */
START_TEST(test_replay_reorder_drop) {
  crnet__seal *tx, *rx;
  const uint32_t len = 77;
  if (!pair(_i, &tx, &rx))
    return;
  uint8_t *r0 = make_record(tx, len, 0), *r1 = make_record(tx, len, 1),
          *r2 = make_record(tx, len, 2);
  uint8_t *replay = copy_record(r0, len), *early = copy_record(r2, len);
  /* Reordered: r2 before r1. */
  ck_assert_int_eq(open_in_place(rx, r0, len), 0);
  ck_assert_int_eq(open_in_place(rx, early, len), CRNET_EAUTH);
  /* Replayed: r0 again where r1 belongs. */
  ck_assert_int_eq(open_in_place(rx, replay, len), CRNET_EAUTH);
  ck_assert_int_eq(open_in_place(rx, r1, len), 0);
  ck_assert_int_eq(open_in_place(rx, r2, len), 0);
  check_plain(r2, len, 2);
  /* Dropped: a receiver that missed r0 cannot open r1. */
  crnet__seal *late;
  ck_assert_int_eq(crnet__seal_new(&late, cipher_of(_i), key_tx), 0);
  uint8_t *r1b = copy_record(r1, len);
  ck_assert_int_eq(open_in_place(late, r1b, len), CRNET_EAUTH);
  free(r0), free(r1), free(r2), free(replay), free(early), free(r1b);
  crnet__seal_free(late);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* A record sealed with the other direction's key (reflected back to its
 * sender) or with the other cipher does not open. */
START_TEST(test_wrong_key_or_cipher) {
  crnet__seal *tx, *rx, *other;
  const uint32_t len = 50;
  if (!pair(_i, &tx, &rx))
    return;
  ck_assert_int_eq(crnet__seal_new(&other, cipher_of(_i), key_rx), 0);
  uint8_t *rec = make_record(other, len, 5);
  ck_assert_int_eq(open_in_place(rx, rec, len), CRNET_EAUTH);
  free(rec);
  crnet__seal_free(other);
  if (crnet__seal_aes_available()) {
    ck_assert_int_eq(crnet__seal_new(&other, cipher_of(1 - _i), key_tx), 0);
    rec = make_record(other, len, 5);
    ck_assert_int_eq(open_in_place(rx, rec, len), CRNET_EAUTH);
    free(rec);
    crnet__seal_free(other);
  }
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

/* The counter's end: the last usable nonce works, then both sides refuse
 * instead of wrapping to a nonce already used. */
START_TEST(test_counter_end) {
  crnet__seal *tx, *rx;
  const uint32_t len = 10;
  if (!pair(_i, &tx, &rx))
    return;
  crnet__seal_set_counter(tx, UINT64_MAX - 1);
  crnet__seal_set_counter(rx, UINT64_MAX - 1);
  uint8_t *rec = make_record(tx, len, 9);
  ck_assert_uint_eq(crnet__seal_counter(tx), UINT64_MAX);
  ck_assert_int_eq(open_in_place(rx, rec, len), 0);
  check_plain(rec, len, 9);
  uint8_t buf[10 + CRNET__SEAL_OVERHEAD];
  memset(buf, 0xA5, sizeof buf);
  ck_assert_int_eq(seal_in_place(tx, buf, len), CRNET_EIO);
  for (size_t k = 0; k < sizeof buf; k++)
    ck_assert_int_eq(buf[k], 0xA5); /* nothing written */
  ck_assert_uint_eq(crnet__seal_counter(tx), UINT64_MAX);
  ck_assert_int_eq(open_in_place(rx, rec, len), CRNET_EIO);
  free(rec);
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}
END_TEST

START_TEST(test_free_null_and_names) {
  crnet__seal_free(NULL);
  ck_assert_str_eq(crnet__cipher_name(CRNET__CIPHER_AES256GCM), "AES-256-GCM");
  ck_assert_str_eq(crnet__cipher_name(CRNET__CIPHER_XCHACHA20POLY1305),
                   "XChaCha20-Poly1305");
  ck_assert_str_eq(crnet__cipher_name(CRNET__CIPHER_NONE), "none");
}
END_TEST

static Suite *seal_suite(void) {
  Suite *s = suite_create("seal");
  TCase *tc = tcase_create("records");
  tcase_set_timeout(tc, 60);
  /* Each test twice: AES-256-GCM (skipped without AES-NI) and
   * XChaCha20-Poly1305. */
  tcase_add_loop_test(tc, test_round_trip, 0, 2);
  tcase_add_loop_test(tc, test_nonce_advances, 0, 2);
  tcase_add_loop_test(tc, test_out_of_place, 0, 2);
  tcase_add_loop_test(tc, test_flipped_bits, 0, 2);
  tcase_add_loop_test(tc, test_truncated, 0, 2);
  tcase_add_loop_test(tc, test_replay_reorder_drop, 0, 2);
  tcase_add_loop_test(tc, test_wrong_key_or_cipher, 0, 2);
  tcase_add_loop_test(tc, test_counter_end, 0, 2);
  tcase_add_test(tc, test_bad_lengths);
  tcase_add_test(tc, test_free_null_and_names);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(seal_suite()); }
