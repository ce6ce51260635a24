/* The mutual handshake that opens every connection (mesh and rendezvous).
 *
 * This is a pure message state machine: it never does I/O, so it can be unit
 * tested and fuzzed byte by byte; link.c drives it over libuv. It is the only
 * code that uses libsodium.
 *
 * Three fixed-size messages, the initiator (the side that connected) first:
 *
 *   HELLO   I -> R  "CRNH", version, purpose, stream index and count,
 *                   job id, initiator rank, expected responder rank, job
 *                   size, nonce_i, flags (encrypt, AES-capable), epk_i
 *   REPLY   R -> I  "CRNR", version, purpose, flags (encrypt), cipher,
 *                   responder rank, nonce_r, epk_r,
 *                   mac_r = HMAC(key, "crnet responder" | HELLO | REPLY-body)
 *   FINISH  I -> R  "CRNZ", mac_i = HMAC(key, "crnet initiator" | HELLO | REPLY)
 *
 * HMAC is libsodium's crypto_auth_hmacsha512256 keyed with the 32-byte job
 * key. The job id is a keyed-free hash of the key (BLAKE2b of the key with a
 * fixed label), so a responder can tell "a process of another job" from
 * "garbage" without learning the key. Both nonces are fresh random bytes, so
 * a replayed HELLO/FINISH fails (mac_i covers nonce_r) and a replayed REPLY
 * fails (mac_r covers nonce_i). The two MAC labels differ, so a responder's
 * MAC is never a valid initiator MAC. Nothing but the ranks, size and nonces
 * is revealed before the peer has proven knowledge of the key.
 *
 * Encryption (CRNET_ENCRYPT=1): epk_i and epk_r are ephemeral X25519 public
 * keys, fresh per connection; the MACs cover them, so nobody without the job
 * key can substitute their own. Both sides derive two session keys, one per
 * direction, from the X25519 shared secret and the transcript, and wipe the
 * ephemeral secret at once (forward secrecy: a job key learnt later does not
 * open recorded traffic). Without encryption the epk fields are zero.
 *
 * Failures return CRNET_EAUTH and set hs->why to a static string saying what
 * was wrong ("bad magic", "another job", "bad MAC", ...), for the log line.
 */
#ifndef CRNET_HANDSHAKE_H
#define CRNET_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

#define CRNET__KEY_BYTES 32
#define CRNET__NONCE_BYTES 32
#define CRNET__MAC_BYTES 32
#define CRNET__JOB_ID_BYTES 16
#define CRNET__EPK_BYTES 32
#define CRNET__SESSION_KEY_BYTES 32
#define CRNET__HS_VERSION 2

/* HELLO: magic 4, version 1, purpose 1, stream 1, streams - 1 1 (both zero
 * but on mesh links of several streams), job id 16,
 * initiator rank 4, expected responder rank 4, size 4, nonce 32, flags 1,
 * reserved 3, epk 32. */
#define CRNET__HS_HELLO_SIZE 104
/* REPLY: magic 4, version 1, purpose 1, flags 1, cipher 1, responder rank 4,
 * nonce 32, epk 32, mac 32. */
#define CRNET__HS_REPLY_SIZE 108
/* FINISH: magic 4, mac 32. */
#define CRNET__HS_FINISH_SIZE 36

/* The most TCP streams per pair of ranks (CRNET_STREAMS). */
#define CRNET__MAX_STREAMS 8

/* The rank a rendezvous server uses in handshakes (it is not a rank). */
#define CRNET__RANK_RENDEZVOUS (-2)

/* Whether a side encrypts (CRNET_ENCRYPT). Initiators and mesh responders
 * say what they do, and a peer that does otherwise is refused; a rendezvous
 * server follows whatever each rank asks for, since ranks that disagree
 * among themselves are refused on the mesh anyway. */
enum crnet__hs_encrypt {
  CRNET__HS_PLAIN = 0,
  CRNET__HS_ENCRYPT = 1,
  CRNET__HS_FOLLOW = 2, /* responder only */
};

/* The AEAD a link uses after the handshake (0: none). The responder picks
 * AES-256-GCM when both CPUs have it, else XChaCha20-Poly1305. */
enum crnet__cipher {
  CRNET__CIPHER_NONE = 0,
  CRNET__CIPHER_AES256GCM = 1,
  CRNET__CIPHER_XCHACHA20POLY1305 = 2,
};

enum crnet__hs_purpose {
  CRNET__HS_RENDEZVOUS = 1, /* a rank talking to the rendezvous server */
  CRNET__HS_MESH = 2,       /* a rank talking to another rank */
};

typedef struct crnet__handshake {
  uint8_t key[CRNET__KEY_BYTES];
  uint8_t job_id[CRNET__JOB_ID_BYTES];
  uint8_t hello[CRNET__HS_HELLO_SIZE];
  uint8_t reply[CRNET__HS_REPLY_SIZE];
  uint8_t purpose;   /* initiator: given; responder: read from HELLO */
  int32_t self;      /* our rank, or CRNET__RANK_RENDEZVOUS */
  int32_t peer;      /* initiator: expected; responder: claimed in HELLO */
  int32_t size;      /* job size; both sides must agree */
  uint8_t stream;    /* initiator: given; responder: read from HELLO */
  uint8_t streams;   /* streams per pair of ranks; both sides must agree */
  uint8_t encrypt_mode; /* enum crnet__hs_encrypt, ours */
  bool aes_ok;          /* this CPU may use AES-256-GCM (tests clear it) */
  bool mismatch;        /* responder: the peer's encrypt flag differs */
  /* After a successful handshake: whether the link encrypts, with which
   * cipher, and the session keys (ours to send with, the peer's to open
   * with). Whoever copies the keys out wipes them with the rest. */
  bool encrypt;
  uint8_t cipher; /* enum crnet__cipher */
  uint8_t tx_key[CRNET__SESSION_KEY_BYTES];
  uint8_t rx_key[CRNET__SESSION_KEY_BYTES];
  uint8_t esk[CRNET__EPK_BYTES]; /* ephemeral secret, wiped once used */
  int state;         /* internal */
  const char *why;   /* static reason of the last failure */
} crnet__handshake;

/* Derives the public job id of a key (also used in log lines). */
void crnet__job_id(const uint8_t key[CRNET__KEY_BYTES],
                   uint8_t id[CRNET__JOB_ID_BYTES]);

/* Initiator side: connect, send HELLO, read REPLY, send FINISH. */
void crnet__hs_init_initiator(crnet__handshake *hs,
                              const uint8_t key[CRNET__KEY_BYTES],
                              uint8_t purpose, int32_t self,
                              int32_t expected_peer, int32_t size);
void crnet__hs_write_hello(crnet__handshake *hs,
                           uint8_t out[CRNET__HS_HELLO_SIZE]);
/* Verifies REPLY (magic, version, purpose, responder rank == expected, MAC)
 * and writes FINISH. 0 or CRNET_EAUTH. */
CRNET_NODISCARD int
crnet__hs_read_reply(crnet__handshake *hs,
                     const uint8_t in[CRNET__HS_REPLY_SIZE],
                     uint8_t finish[CRNET__HS_FINISH_SIZE]);

/* A mesh link that is stream `stream` of `streams` (default: 0 of 1). The
 * initiator says which in HELLO; a responder (stream 0) only sets the count
 * it requires. Call after init, before the first message. */
void crnet__hs_set_streams(crnet__handshake *hs, uint8_t stream,
                           uint8_t streams);

/* Whether to encrypt (enum crnet__hs_encrypt; default PLAIN). FOLLOW is
 * for responders only. Call after init, before the first message. */
void crnet__hs_set_encrypt(crnet__handshake *hs, uint8_t mode);

/* The cipher's name for log lines ("none", "AES-256-GCM", ...). */
const char *crnet__cipher_name(uint8_t cipher);

/* Responder side: accept, read HELLO, send REPLY, read FINISH. */
void crnet__hs_init_responder(crnet__handshake *hs,
                              const uint8_t key[CRNET__KEY_BYTES],
                              int32_t self, int32_t size);
/* Checks HELLO's form: magic, version, known purpose, streams (zero for a
 * rendezvous, our count for the mesh), job id,
 * size == ours, expected responder rank == self, initiator rank in
 * [0, size) and != self. On success hs->peer, hs->purpose and hs->stream
 * hold the claimed values (not yet authenticated!) and REPLY is written. 0
 * or CRNET_EAUTH. */
CRNET_NODISCARD int
crnet__hs_read_hello(crnet__handshake *hs,
                     const uint8_t in[CRNET__HS_HELLO_SIZE],
                     uint8_t reply[CRNET__HS_REPLY_SIZE]);
/* Verifies FINISH. After 0 the peer is authenticated as hs->peer. A peer
 * whose encrypt flag differs from ours gets a REPLY (so that it can say why
 * it gives up) but never passes this step. */
CRNET_NODISCARD int
crnet__hs_read_finish(crnet__handshake *hs,
                      const uint8_t in[CRNET__HS_FINISH_SIZE]);

/* Wipes the key copy and transcript. Call on every handshake when done. */
void crnet__hs_wipe(crnet__handshake *hs);

/* Job keys. They live here so that libsodium stays in this one file. */

/* 64 hex digits (upper or lower case, surrounding whitespace allowed) into
 * 32 bytes. 0 or CRNET_EINVAL (the key is then wiped). */
CRNET_NODISCARD int crnet__key_parse_hex(const char *hex,
                                         uint8_t key[CRNET__KEY_BYTES]);
/* Reads a key file holding the hex form. 0, CRNET_EIO (unreadable) or
 * CRNET_EINVAL (malformed). The read buffer is wiped. */
CRNET_NODISCARD int crnet__key_load_file(const char *path,
                                         uint8_t key[CRNET__KEY_BYTES]);
/* A fresh random key, and its hex form (65 bytes with the NUL). */
void crnet__key_generate(uint8_t key[CRNET__KEY_BYTES]);
void crnet__key_to_hex(const uint8_t key[CRNET__KEY_BYTES],
                       char hex[2 * CRNET__KEY_BYTES + 1]);
/* Zeroes memory the compiler may not optimise away. */
void crnet__wipe(void *p, size_t n);

#endif
