/* The record layer of encrypted links; see seal.h. Expected workload: every
 * byte of an encrypted job passes through here twice (seal, open) in
 * records of up to 64 KiB, so the AES-GCM key schedule is computed once per
 * direction (the _afternm calls) rather than per record. */
#include "seal.h"
#include "secret.h"

#include <assert.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

/* The last counter value is never used, so "exhausted" needs no separate
 * flag: a direction stops at UINT64_MAX. */
#define COUNTER_END UINT64_MAX

_Static_assert(CRNET__SESSION_KEY_BYTES == crypto_aead_aes256gcm_KEYBYTES &&
                   CRNET__SESSION_KEY_BYTES ==
                       crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
               "session keys fit both ciphers");
_Static_assert(CRNET__SEAL_TAG_BYTES == crypto_aead_aes256gcm_ABYTES &&
                   CRNET__SEAL_TAG_BYTES ==
                       crypto_aead_xchacha20poly1305_ietf_ABYTES,
               "both ciphers have 16-byte tags");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES >=
                   crypto_aead_aes256gcm_NPUBBYTES,
               "the nonce buffer fits both ciphers");

struct crnet__seal {
  /* First: libsodium requires 16-byte alignment, which secret memory's
   * 64-byte blocks provide. */
  crypto_aead_aes256gcm_state aes;
  uint8_t key[CRNET__SESSION_KEY_BYTES]; /* XChaCha20-Poly1305's */
  uint64_t counter;
  uint8_t cipher;
};

_Static_assert(sizeof(struct crnet__seal) <= CRNET__SECRET_MAX,
               "a direction's state fits a secret block");

bool crnet__seal_aes_available(void) {
  /* CRNET_NO_AESNI lets tests run the XChaCha20-Poly1305 path on CPUs that
   * have AES-NI, as CRNET_NO_F16C does for the float16 kernels. */
  if (getenv("CRNET_NO_AESNI") != NULL)
    return false;
  return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() != 0;
}

int crnet__seal_new(crnet__seal **out, uint8_t cipher,
                    const uint8_t key[CRNET__SESSION_KEY_BYTES]) {
  crnet__seal *s;
  size_t size = (sizeof *s + 63) / 64 * 64;
  *out = NULL;
  assert(cipher == CRNET__CIPHER_AES256GCM ||
         cipher == CRNET__CIPHER_XCHACHA20POLY1305);
  if (cipher == CRNET__CIPHER_AES256GCM && !crnet__seal_aes_available())
    return CRNET_EINVAL;
  /* Secret memory: zeroed, 64-byte aligned, left out of core files. */
  s = crnet__secret_alloc(size);
  if (s == NULL)
    return CRNET_ENOMEM;
  s->cipher = cipher;
  if (cipher == CRNET__CIPHER_AES256GCM)
    crypto_aead_aes256gcm_beforenm(&s->aes, key);
  else
    memcpy(s->key, key, sizeof s->key);
  *out = s;
  return 0;
}

void crnet__seal_free(crnet__seal *s) {
  if (s == NULL)
    return;
  crnet__secret_free(s); /* wipes */
}

static void
make_nonce(uint64_t counter,
           uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES]) {
  memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  crnet__put_le64(nonce, counter);
}

int crnet__seal_record(crnet__seal *s, uint8_t *rec, const uint8_t *plain,
                       uint32_t len) {
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  uint8_t *text = rec + CRNET__SEAL_LEN_BYTES;
  assert(len >= 1 && len <= CRNET__SEAL_RECORD_MAX);
  if (s->counter == COUNTER_END)
    return CRNET_EIO;
  make_nonce(s->counter++, nonce);
  crnet__put_le32(rec, len);
  if (s->cipher == CRNET__CIPHER_AES256GCM)
    crypto_aead_aes256gcm_encrypt_detached_afternm(
        text, text + len, NULL, plain, len, rec, CRNET__SEAL_LEN_BYTES, NULL,
        nonce, &s->aes);
  else
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
        text, text + len, NULL, plain, len, rec, CRNET__SEAL_LEN_BYTES, NULL,
        nonce, s->key);
  return 0;
}

uint32_t crnet__seal_record_len(const uint8_t rec[CRNET__SEAL_LEN_BYTES]) {
  uint32_t len = crnet__get_le32(rec);
  return len >= 1 && len <= CRNET__SEAL_RECORD_MAX ? len : 0;
}

int crnet__seal_open(crnet__seal *s, uint8_t *rec, uint32_t len, uint8_t *out) {
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  uint8_t *text = rec + CRNET__SEAL_LEN_BYTES;
  int rc;
  assert(len == crnet__seal_record_len(rec));
  if (s->counter == COUNTER_END)
    return CRNET_EIO;
  make_nonce(s->counter, nonce);
  if (s->cipher == CRNET__CIPHER_AES256GCM)
    rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
        out, NULL, text, len, text + len, rec, CRNET__SEAL_LEN_BYTES, nonce,
        &s->aes);
  else
    rc = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
        out, NULL, text, len, text + len, rec, CRNET__SEAL_LEN_BYTES, nonce,
        s->key);
  if (rc != 0) {
    /* Whatever libsodium left there must not be mistaken for data. */
    sodium_memzero(out, len);
    return CRNET_EAUTH;
  }
  /* Only an authentic record advances the count: after a failure the link
   * is dead anyway, and a test can retry the genuine record. */
  s->counter++;
  return 0;
}

uint64_t crnet__seal_counter(const crnet__seal *s) { return s->counter; }

void crnet__seal_set_counter(crnet__seal *s, uint64_t counter) {
  s->counter = counter;
}
