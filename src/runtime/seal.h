/* The record layer of encrypted links (CRNET_ENCRYPT=1).
 *
 * With encryption on, the byte stream of frames (frame.h) is cut into
 * records, each sealed with an AEAD under the session key of its direction
 * (handshake.h):
 *
 *   offset      size  field
 *        0         4  L, plaintext bytes, little-endian, 1..CRNET__SEAL_RECORD_MAX
 *        4         L  ciphertext
 *    4 + L        16  tag over the ciphertext, with the 4 length bytes as
 *                     associated data
 *
 * Record boundaries have nothing to do with frame boundaries: a record may
 * hold the end of one frame and the start of the next. The nonce is the
 * record's number in its direction (a 64-bit counter, zero-padded to the
 * cipher's nonce size), never sent: the receiver counts too, so a record
 * that is replayed, dropped or reordered fails authentication just like a
 * flipped bit. The counter never wraps; a direction that has sealed 2^64 - 1
 * records refuses to seal more.
 *
 * Together with handshake.c this is the only code that uses libsodium.
 * A crnet__seal is opaque, because AES-GCM's precomputed state must be
 * aligned; create and free it here. Not thread-safe; one per direction.
 */
#ifndef CRNET_SEAL_H
#define CRNET_SEAL_H

#include <stdbool.h>
#include <stdint.h>

#include "crnet.h"
#include "handshake.h"

#define CRNET__SEAL_LEN_BYTES 4
#define CRNET__SEAL_TAG_BYTES 16
/* Plaintext per record: large enough that the per-record cost is noise,
 * small enough that a receiver's buffer is modest. */
#define CRNET__SEAL_RECORD_MAX (64u << 10)
#define CRNET__SEAL_OVERHEAD (CRNET__SEAL_LEN_BYTES + CRNET__SEAL_TAG_BYTES)
#define CRNET__SEAL_RECORD_BYTES_MAX                                           \
  (CRNET__SEAL_RECORD_MAX + CRNET__SEAL_OVERHEAD)

typedef struct crnet__seal crnet__seal;

/* A direction's state for `cipher` (enum crnet__cipher, not NONE) and key,
 * counter at 0. 0, CRNET_ENOMEM, or CRNET_EINVAL (AES-256-GCM asked for on
 * a CPU that lacks it). */
CRNET_NODISCARD int
crnet__seal_new(crnet__seal **out, uint8_t cipher,
                const uint8_t key[CRNET__SESSION_KEY_BYTES]);
/* Wipes the key and frees. NULL does nothing. */
void crnet__seal_free(crnet__seal *s);

/* Seals len plaintext bytes (1 <= len <= CRNET__SEAL_RECORD_MAX) at
 * `plain` into the record at rec: the length goes in rec[0..4), the
 * ciphertext in rec[4 .. 4 + len) and the tag after it, 4 + len + 16 bytes
 * in all. plain is either rec + 4 (sealing in place) or does not overlap the
 * record. 0, or CRNET_EIO when the counter is exhausted (nothing is
 * written). */
CRNET_NODISCARD int crnet__seal_record(crnet__seal *s, uint8_t *rec,
                                       const uint8_t *plain, uint32_t len);

/* The plaintext length a record announces in its first 4 bytes, or 0 when it
 * is out of range (the link must fail: nothing sane can follow). */
uint32_t crnet__seal_record_len(const uint8_t rec[CRNET__SEAL_LEN_BYTES]);

/* Opens a whole record (4 + len + 16 bytes, len from crnet__seal_record_len)
 * into out[0..len), which is either rec + 4 (in place) or does not overlap
 * the record. CRNET_EAUTH if it does not authenticate (out is then zeroed,
 * never usable), CRNET_EIO when the counter is exhausted. */
CRNET_NODISCARD int crnet__seal_open(crnet__seal *s, uint8_t *rec, uint32_t len,
                                     uint8_t *out);

/* Records sealed or opened so far (the next nonce). For tests: setting it
 * reaches the counter's end without sealing 2^64 records. */
uint64_t crnet__seal_counter(const crnet__seal *s);
void crnet__seal_set_counter(crnet__seal *s, uint64_t counter);

/* Whether this CPU can use AES-256-GCM (libsodium needs AES-NI and
 * PCLMUL), and CRNET_NO_AESNI is not set. */
bool crnet__seal_aes_available(void);

#endif
