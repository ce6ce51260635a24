/* The connection handshake and job keys: the only file that uses libsodium.
 *
 * Protocol (messages and sizes in handshake.h; integers little-endian, ranks
 * int32 two's complement):
 *
 *   initiator I                                  responder R
 *   HELLO  "CRNH" v purpose k n-1 job_id i r size nonce_i flags 0 0 0 epk_i ->
 *                                                R checks form, job id, ranks
 *       <-  REPLY "CRNR" v purpose flags cipher r nonce_r epk_r mac_r
 *   I checks form, r, mac_r, then flags and cipher
 *   FINISH "CRNZ" mac_i                           ->
 *                                                R checks mac_i
 *
 *   mac_r = HMAC-SHA-512-256(key, "crnet responder" | HELLO | REPLY[0..76))
 *   mac_i = HMAC-SHA-512-256(key, "crnet initiator" | HELLO | REPLY)
 *
 * Encryption. HELLO's flags say whether the initiator encrypts (bit 0) and
 * whether its CPU has AES-256-GCM (bit 1); REPLY's say whether the responder
 * encrypts, and its cipher byte names the cipher it picked (AES-256-GCM if
 * both CPUs have it, else XChaCha20-Poly1305; 0 without encryption). The
 * initiator compares only after mac_r checks out, so that a disagreement it
 * reports is the peer's setting and not an attacker's edit. Then
 *
 *   q        = X25519(esk, peer's epk)
 *   K        = BLAKE2b-512(key = q, "crnet session v2" | job key | HELLO |
 *                          REPLY[0..76))
 *   K[0..32)  initiator -> responder,  K[32..64)  responder -> initiator
 *
 * The transcript binds the keys to this connection's nonces, ranks and
 * stream, and the job key makes them useless to anyone who merely broke one
 * X25519 exchange. esk and q are wiped as soon as K exists. An all-zero q
 * (a low-order epk) is refused.
 *
 * k and n-1: a mesh link is stream k of the n TCP streams each pair of
 * ranks opens (CRNET_STREAMS); 0 and 0 (stream 0 of 1) for everything else.
 * The responder requires its own n, so two ranks that would split messages
 * differently never connect, and the MACs cover k like the rest.
 *
 * The labels are the 15 ASCII bytes without a terminating NUL; both have the
 * same length, so label and transcript can never be confused. Each side's
 * MAC covers the other side's fresh nonce, which is what defeats replay: a
 * recorded FINISH does not match a new nonce_r, a recorded REPLY does not
 * match a new nonce_i. The labels differ, so a REPLY's MAC can never be
 * reflected back as a FINISH.
 *
 * job_id = BLAKE2b-128("crnet job id v1" | key), unkeyed. It is public: it
 * lets a responder tell a process of another job from garbage, and names the
 * job in log lines, without revealing anything usable about the key.
 *
 * The state machine (hs->state) admits only the calls in the order above;
 * any other call returns CRNET_EAUTH with why = "out of order" and leaves the
 * handshake dead. Every failure leaves it dead too, and later calls keep the
 * first reason in why. A zeroed or wiped struct is in no valid state, so it
 * refuses every call as out of order.
 *
 * Arguments of the init functions are the caller's (conn.c's) business:
 * nonsense there (a self-connection, a rank outside the job) is a bug and is
 * asserted, whereas everything that arrives in a message is checked.
 */
#include "handshake.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#include "crnet.h"
#include "frame.h"
#include "seal.h"

#define HELLO_MAGIC "CRNH"
#define REPLY_MAGIC "CRNR"
#define FINISH_MAGIC "CRNZ"
#define MAGIC_BYTES 4
#define MAC_LABEL_BYTES 15
#define JOB_ID_LABEL "crnet job id v1"
#define SESSION_LABEL "crnet session v2"

/* HELLO flag bits. */
#define HF_ENCRYPT 0x01
#define HF_AES 0x02
/* REPLY flag bits. */
#define RF_ENCRYPT 0x01

/* The bound on a key file: 64 hex digits and generous room for whitespace.
 * Anything longer is not a key file. */
#define KEY_FILE_MAX 256

/* HELLO offsets. */
enum {
  H_MAGIC = 0,
  H_VERSION = 4,
  H_PURPOSE = 5,
  H_STREAM = 6,
  H_STREAMS = 7, /* the count minus one */
  H_JOB_ID = 8,
  H_INITIATOR = 24,
  H_RESPONDER = 28,
  H_SIZE = 32,
  H_NONCE = 36,
  H_FLAGS = 68,
  H_RESERVED = 69, /* 3 bytes */
  H_EPK = 72,
  H_END = 104,
};

/* REPLY offsets. */
enum {
  R_MAGIC = 0,
  R_VERSION = 4,
  R_PURPOSE = 5,
  R_FLAGS = 6,
  R_CIPHER = 7,
  R_RESPONDER = 8,
  R_NONCE = 12,
  R_EPK = 44,
  R_MAC = 76,
  R_END = 108,
};

/* FINISH offsets. */
enum {
  F_MAGIC = 0,
  F_MAC = 4,
  F_END = 36,
};

_Static_assert(sizeof HELLO_MAGIC - 1 == MAGIC_BYTES &&
                   sizeof REPLY_MAGIC - 1 == MAGIC_BYTES &&
                   sizeof FINISH_MAGIC - 1 == MAGIC_BYTES,
               "magics are 4 bytes");
_Static_assert(sizeof "crnet responder" - 1 == MAC_LABEL_BYTES &&
                   sizeof "crnet initiator" - 1 == MAC_LABEL_BYTES,
               "both MAC labels have the same length");
_Static_assert(H_JOB_ID + CRNET__JOB_ID_BYTES == H_INITIATOR &&
                   H_NONCE + CRNET__NONCE_BYTES == H_FLAGS &&
                   H_EPK + CRNET__EPK_BYTES == H_END &&
                   H_END == CRNET__HS_HELLO_SIZE,
               "HELLO layout");
_Static_assert(R_NONCE + CRNET__NONCE_BYTES == R_EPK &&
                   R_EPK + CRNET__EPK_BYTES == R_MAC &&
                   R_MAC + CRNET__MAC_BYTES == R_END &&
                   R_END == CRNET__HS_REPLY_SIZE,
               "REPLY layout");
_Static_assert(F_MAC + CRNET__MAC_BYTES == F_END &&
                   F_END == CRNET__HS_FINISH_SIZE,
               "FINISH layout");
_Static_assert(CRNET__KEY_BYTES == crypto_auth_hmacsha512256_KEYBYTES,
               "the job key is an HMAC-SHA-512-256 key");
_Static_assert(CRNET__MAC_BYTES == crypto_auth_hmacsha512256_BYTES &&
                   CRNET__MAC_BYTES == crypto_verify_32_BYTES,
               "MACs are 32 bytes and compared with crypto_verify_32");
_Static_assert(CRNET__JOB_ID_BYTES >= crypto_generichash_BYTES_MIN &&
                   CRNET__JOB_ID_BYTES <= crypto_generichash_BYTES_MAX,
               "the job id is a valid BLAKE2b output size");
_Static_assert(CRNET__HS_VERSION <= 0xff, "the version fits its byte");
_Static_assert(CRNET__EPK_BYTES == crypto_scalarmult_BYTES &&
                   CRNET__EPK_BYTES == crypto_scalarmult_SCALARBYTES,
               "ephemeral keys are X25519 keys");
_Static_assert(sizeof SESSION_LABEL - 1 == 16, "the session label");
_Static_assert(2 * CRNET__SESSION_KEY_BYTES <= crypto_generichash_BYTES_MAX &&
                   crypto_scalarmult_BYTES >= crypto_generichash_KEYBYTES_MIN,
               "one BLAKE2b output holds both session keys");

enum hs_state {
  HS_NONE = 0, /* zeroed, wiped or failed: every call is refused */
  HS_I_READY,  /* initiator: next is write_hello */
  HS_I_SENT,   /* initiator: HELLO out, next is read_reply */
  HS_I_DONE,   /* initiator: REPLY verified, FINISH written */
  HS_R_READY,  /* responder: next is read_hello */
  HS_R_SENT,   /* responder: REPLY out, next is read_finish */
  HS_R_DONE,   /* responder: FINISH verified, peer authenticated */
};

static const char out_of_order[] = "out of order";

/* sodium_init() is idempotent and thread-safe; calling it from every entry
 * that needs randomness keeps this file free of a global init step. */
static int sodium_ready(void) { return sodium_init() >= 0; }

static void put_rank(uint8_t *p, int32_t rank) {
  crnet__put_le32(p, (uint32_t)rank);
}

/* Two's complement decoding without relying on implementation-defined
 * conversion of out-of-range unsigned values. */
static int32_t get_rank(const uint8_t *p) {
  uint32_t u = crnet__get_le32(p);
  if (u <= (uint32_t)INT32_MAX)
    return (int32_t)u;
  return (int32_t)(u - 0x80000000u) - INT32_MAX - 1;
}

static int fail(crnet__handshake *hs, const char *why) {
  hs->state = HS_NONE;
  hs->why = why;
  return CRNET_EAUTH;
}

static int refuse_out_of_order(crnet__handshake *hs) {
  int failed_before = hs->state == HS_NONE && hs->why != NULL;
  return fail(hs, failed_before ? hs->why : out_of_order);
}

static void transcript_mac(const crnet__handshake *hs, const char *label,
                           size_t reply_len, uint8_t mac[CRNET__MAC_BYTES]) {
  crypto_auth_hmacsha512256_state st;
  crypto_auth_hmacsha512256_init(&st, hs->key, CRNET__KEY_BYTES);
  crypto_auth_hmacsha512256_update(&st, (const unsigned char *)label,
                                   MAC_LABEL_BYTES);
  crypto_auth_hmacsha512256_update(&st, hs->hello, CRNET__HS_HELLO_SIZE);
  crypto_auth_hmacsha512256_update(&st, hs->reply, reply_len);
  crypto_auth_hmacsha512256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

void crnet__job_id(const uint8_t key[CRNET__KEY_BYTES],
                   uint8_t id[CRNET__JOB_ID_BYTES]) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, CRNET__JOB_ID_BYTES);
  crypto_generichash_update(&st, (const unsigned char *)JOB_ID_LABEL,
                            sizeof JOB_ID_LABEL - 1);
  crypto_generichash_update(&st, key, CRNET__KEY_BYTES);
  crypto_generichash_final(&st, id, CRNET__JOB_ID_BYTES);
  sodium_memzero(&st, sizeof st);
}

static void hs_init(crnet__handshake *hs, const uint8_t key[CRNET__KEY_BYTES],
                    int32_t self, int32_t size, int state) {
  sodium_memzero(hs, sizeof *hs);
  memcpy(hs->key, key, CRNET__KEY_BYTES);
  crnet__job_id(key, hs->job_id);
  hs->self = self;
  hs->size = size;
  hs->state = state;
  hs->stream = 0;
  hs->streams = 1;
  hs->encrypt_mode = CRNET__HS_PLAIN;
  if (!sodium_ready()) {
    fail(hs, "libsodium failed to initialise");
    return;
  }
  hs->aes_ok = crnet__seal_aes_available();
}

void crnet__hs_set_encrypt(crnet__handshake *hs, uint8_t mode) {
  assert(mode == CRNET__HS_PLAIN || mode == CRNET__HS_ENCRYPT ||
         (mode == CRNET__HS_FOLLOW && hs->state == HS_R_READY));
  assert(hs->state == HS_I_READY || hs->state == HS_R_READY);
  hs->encrypt_mode = mode;
}

const char *crnet__cipher_name(uint8_t cipher) {
  switch (cipher) {
  case CRNET__CIPHER_NONE:
    return "none";
  case CRNET__CIPHER_AES256GCM:
    return "AES-256-GCM";
  case CRNET__CIPHER_XCHACHA20POLY1305:
    return "XChaCha20-Poly1305";
  }
  return "?";
}

/* A fresh ephemeral key pair: the secret stays in hs->esk, the public key
 * goes into the message. */
static void new_ephemeral(crnet__handshake *hs, uint8_t epk[CRNET__EPK_BYTES]) {
  randombytes_buf(hs->esk, sizeof hs->esk);
  crypto_scalarmult_base(epk, hs->esk);
}

/* The session keys from the peer's ephemeral key and the transcript so far
 * (HELLO and the REPLY body; see the top of the file). Wipes esk and the
 * shared secret whatever happens. 0, or -1 for a low-order peer key. */
static int derive_session_keys(crnet__handshake *hs,
                               const uint8_t peer_epk[CRNET__EPK_BYTES]) {
  uint8_t q[crypto_scalarmult_BYTES];
  uint8_t k[2 * CRNET__SESSION_KEY_BYTES];
  crypto_generichash_state st;
  int rc = crypto_scalarmult(q, hs->esk, peer_epk);
  sodium_memzero(hs->esk, sizeof hs->esk);
  if (rc != 0)
    goto out;
  crypto_generichash_init(&st, q, sizeof q, sizeof k);
  crypto_generichash_update(&st, (const unsigned char *)SESSION_LABEL,
                            sizeof SESSION_LABEL - 1);
  crypto_generichash_update(&st, hs->key, CRNET__KEY_BYTES);
  crypto_generichash_update(&st, hs->hello, CRNET__HS_HELLO_SIZE);
  crypto_generichash_update(&st, hs->reply, R_MAC);
  crypto_generichash_final(&st, k, sizeof k);
  sodium_memzero(&st, sizeof st);
  /* The initiator sends with the first half. */
  int initiator = hs->state == HS_I_SENT;
  memcpy(hs->tx_key, initiator ? k : k + CRNET__SESSION_KEY_BYTES,
         CRNET__SESSION_KEY_BYTES);
  memcpy(hs->rx_key, initiator ? k + CRNET__SESSION_KEY_BYTES : k,
         CRNET__SESSION_KEY_BYTES);
out:
  sodium_memzero(q, sizeof q);
  sodium_memzero(k, sizeof k);
  return rc == 0 ? 0 : -1;
}

void crnet__hs_init_initiator(crnet__handshake *hs,
                              const uint8_t key[CRNET__KEY_BYTES],
                              uint8_t purpose, int32_t self,
                              int32_t expected_peer, int32_t size) {
  assert(size >= 1 && self >= 0 && self < size);
  assert(purpose == CRNET__HS_RENDEZVOUS || purpose == CRNET__HS_MESH);
  assert(purpose != CRNET__HS_RENDEZVOUS ||
         expected_peer == CRNET__RANK_RENDEZVOUS);
  assert(purpose != CRNET__HS_MESH ||
         (expected_peer >= 0 && expected_peer < size && expected_peer != self));
  hs_init(hs, key, self, size, HS_I_READY);
  hs->purpose = purpose;
  hs->peer = expected_peer;
}

void crnet__hs_set_streams(crnet__handshake *hs, uint8_t stream,
                           uint8_t streams) {
  assert(streams >= 1 && streams <= CRNET__MAX_STREAMS && stream < streams);
  assert(hs->state == HS_I_READY || (hs->state == HS_R_READY && stream == 0));
  hs->stream = stream;
  hs->streams = streams;
}

void crnet__hs_init_responder(crnet__handshake *hs,
                              const uint8_t key[CRNET__KEY_BYTES], int32_t self,
                              int32_t size) {
  assert(size >= 1);
  assert(self == CRNET__RANK_RENDEZVOUS || (self >= 0 && self < size));
  hs_init(hs, key, self, size, HS_R_READY);
  hs->peer = -1;
}

void crnet__hs_write_hello(crnet__handshake *hs,
                           uint8_t out[CRNET__HS_HELLO_SIZE]) {
  /* This call cannot return an error, so misuse sends a HELLO of zeros,
   * which every responder refuses, and kills the handshake so the following
   * read_reply reports it. */
  if (hs->state != HS_I_READY) {
    memset(out, 0, CRNET__HS_HELLO_SIZE);
    (void)refuse_out_of_order(hs);
    return;
  }
  uint8_t *m = hs->hello;
  memcpy(m + H_MAGIC, HELLO_MAGIC, MAGIC_BYTES);
  m[H_VERSION] = CRNET__HS_VERSION;
  m[H_PURPOSE] = hs->purpose;
  m[H_STREAM] = hs->stream;
  m[H_STREAMS] = (uint8_t)(hs->streams - 1);
  memcpy(m + H_JOB_ID, hs->job_id, CRNET__JOB_ID_BYTES);
  put_rank(m + H_INITIATOR, hs->self);
  put_rank(m + H_RESPONDER, hs->peer);
  put_rank(m + H_SIZE, hs->size);
  randombytes_buf(m + H_NONCE, CRNET__NONCE_BYTES);
  memset(m + H_FLAGS, 0, H_END - H_FLAGS);
  if (hs->encrypt_mode == CRNET__HS_ENCRYPT) {
    m[H_FLAGS] = HF_ENCRYPT | (hs->aes_ok ? HF_AES : 0);
    new_ephemeral(hs, m + H_EPK);
  }
  memcpy(out, m, CRNET__HS_HELLO_SIZE);
  hs->state = HS_I_SENT;
}

int crnet__hs_read_hello(crnet__handshake *hs,
                         const uint8_t in[CRNET__HS_HELLO_SIZE],
                         uint8_t reply[CRNET__HS_REPLY_SIZE]) {
  if (hs->state != HS_R_READY)
    return refuse_out_of_order(hs);
  /* Work on our own copy: it is the transcript both MACs cover. */
  memcpy(hs->hello, in, CRNET__HS_HELLO_SIZE);
  const uint8_t *m = hs->hello;

  if (memcmp(m + H_MAGIC, HELLO_MAGIC, MAGIC_BYTES) != 0)
    return fail(hs, "bad magic");
  if (m[H_VERSION] != CRNET__HS_VERSION)
    return fail(hs, "unsupported version");
  uint8_t purpose = m[H_PURPOSE];
  if (purpose != CRNET__HS_RENDEZVOUS && purpose != CRNET__HS_MESH)
    return fail(hs, "unknown purpose");
  if (purpose == CRNET__HS_RENDEZVOUS &&
      (m[H_STREAM] != 0 || m[H_STREAMS] != 0))
    return fail(hs, "reserved bytes set");
  if (purpose == CRNET__HS_MESH && m[H_STREAMS] + 1 != hs->streams)
    return fail(hs, "another number of streams per peer (CRNET_STREAMS)");
  if (m[H_STREAM] > m[H_STREAMS])
    return fail(hs, "stream index out of range");
  if ((m[H_FLAGS] & ~(HF_ENCRYPT | HF_AES)) != 0 || m[H_RESERVED] != 0 ||
      m[H_RESERVED + 1] != 0 || m[H_RESERVED + 2] != 0)
    return fail(hs, "reserved bytes set");
  /* The job id is public, so an ordinary comparison is fine here. */
  if (memcmp(m + H_JOB_ID, hs->job_id, CRNET__JOB_ID_BYTES) != 0)
    return fail(hs, "another job");
  if (get_rank(m + H_SIZE) != hs->size)
    return fail(hs, "job size differs");
  /* A rendezvous server takes only rendezvous connections and a rank only
   * mesh connections: each listens on its own socket. */
  int serving_rdv = hs->self == CRNET__RANK_RENDEZVOUS;
  if ((purpose == CRNET__HS_RENDEZVOUS) != serving_rdv)
    return fail(hs, "wrong purpose for this listener");
  if (get_rank(m + H_RESPONDER) != hs->self)
    return fail(hs, "meant for another rank");
  int32_t initiator = get_rank(m + H_INITIATOR);
  if (initiator < 0 || initiator >= hs->size)
    return fail(hs, "initiator rank out of range");
  if (initiator == hs->self)
    return fail(hs, "self-connection");

  hs->purpose = purpose;
  hs->peer = initiator;
  hs->stream = m[H_STREAM];

  bool peer_encrypts = (m[H_FLAGS] & HF_ENCRYPT) != 0;
  bool we_encrypt = hs->encrypt_mode == CRNET__HS_FOLLOW
                        ? peer_encrypts
                        : hs->encrypt_mode == CRNET__HS_ENCRYPT;
  /* A disagreement is answered, not dropped, so the initiator can report
   * it; read_finish refuses it later (see the header). */
  hs->mismatch = peer_encrypts != we_encrypt;
  hs->encrypt = we_encrypt && !hs->mismatch;

  uint8_t *r = hs->reply;
  memset(r, 0, CRNET__HS_REPLY_SIZE);
  memcpy(r + R_MAGIC, REPLY_MAGIC, MAGIC_BYTES);
  r[R_VERSION] = CRNET__HS_VERSION;
  r[R_PURPOSE] = purpose;
  r[R_FLAGS] = we_encrypt ? RF_ENCRYPT : 0;
  put_rank(r + R_RESPONDER, hs->self);
  randombytes_buf(r + R_NONCE, CRNET__NONCE_BYTES);
  if (hs->encrypt) {
    hs->cipher = hs->aes_ok && (m[H_FLAGS] & HF_AES) != 0
                     ? CRNET__CIPHER_AES256GCM
                     : CRNET__CIPHER_XCHACHA20POLY1305;
    r[R_CIPHER] = hs->cipher;
    new_ephemeral(hs, r + R_EPK);
    if (derive_session_keys(hs, m + H_EPK) != 0)
      return fail(hs, "weak ephemeral key");
  }
  transcript_mac(hs, "crnet responder", R_MAC, r + R_MAC);
  memcpy(reply, r, CRNET__HS_REPLY_SIZE);
  hs->state = HS_R_SENT;
  return 0;
}

/* The authenticated REPLY's encryption fields: the peer must do what we do,
 * with a cipher we have. Derives the session keys when encrypting. */
static int accept_cipher(crnet__handshake *hs, const uint8_t *r) {
  bool we_encrypt = hs->encrypt_mode == CRNET__HS_ENCRYPT;
  bool peer_encrypts = (r[R_FLAGS] & RF_ENCRYPT) != 0;
  uint8_t cipher = r[R_CIPHER];
  if (peer_encrypts && !we_encrypt)
    return fail(hs, "peer encrypts (CRNET_ENCRYPT=1), we do not");
  if (!peer_encrypts && we_encrypt)
    return fail(hs, "peer does not encrypt (CRNET_ENCRYPT=0), we do");
  if (!we_encrypt)
    return cipher == CRNET__CIPHER_NONE ? 0
                                        : fail(hs, "cipher without encryption");
  if (cipher == CRNET__CIPHER_NONE)
    return fail(hs, "encryption without a cipher");
  if (cipher == CRNET__CIPHER_AES256GCM && !hs->aes_ok)
    return fail(hs, "peer chose AES-256-GCM, which this CPU lacks");
  if (derive_session_keys(hs, r + R_EPK) != 0)
    return fail(hs, "weak ephemeral key");
  hs->encrypt = true;
  hs->cipher = cipher;
  return 0;
}

int crnet__hs_read_reply(crnet__handshake *hs,
                         const uint8_t in[CRNET__HS_REPLY_SIZE],
                         uint8_t finish[CRNET__HS_FINISH_SIZE]) {
  uint8_t mac[CRNET__MAC_BYTES];
  int rc = 0;

  if (hs->state != HS_I_SENT)
    return refuse_out_of_order(hs);
  memcpy(hs->reply, in, CRNET__HS_REPLY_SIZE);
  const uint8_t *r = hs->reply;

  if (memcmp(r + R_MAGIC, REPLY_MAGIC, MAGIC_BYTES) != 0)
    return fail(hs, "bad magic");
  if (r[R_VERSION] != CRNET__HS_VERSION)
    return fail(hs, "unsupported version");
  if (r[R_PURPOSE] != hs->purpose)
    return fail(hs, "purpose differs");
  if ((r[R_FLAGS] & ~RF_ENCRYPT) != 0)
    return fail(hs, "reserved bytes set");
  if (r[R_CIPHER] > CRNET__CIPHER_XCHACHA20POLY1305)
    return fail(hs, "unknown cipher");
  if (get_rank(r + R_RESPONDER) != hs->peer)
    return fail(hs, "responder is another rank");

  transcript_mac(hs, "crnet responder", R_MAC, mac);
  if (crypto_verify_32(mac, r + R_MAC) != 0) {
    rc = fail(hs, "bad MAC");
    goto out;
  }
  rc = accept_cipher(hs, r);
  if (rc != 0)
    goto out;
  memcpy(finish + F_MAGIC, FINISH_MAGIC, MAGIC_BYTES);
  transcript_mac(hs, "crnet initiator", CRNET__HS_REPLY_SIZE, finish + F_MAC);
  hs->state = HS_I_DONE;

out:
  sodium_memzero(mac, sizeof mac);
  return rc;
}

int crnet__hs_read_finish(crnet__handshake *hs,
                          const uint8_t in[CRNET__HS_FINISH_SIZE]) {
  uint8_t mac[CRNET__MAC_BYTES];
  int rc = 0;

  if (hs->state != HS_R_SENT)
    return refuse_out_of_order(hs);
  if (memcmp(in + F_MAGIC, FINISH_MAGIC, MAGIC_BYTES) != 0)
    return fail(hs, "bad magic");

  transcript_mac(hs, "crnet initiator", CRNET__HS_REPLY_SIZE, mac);
  if (crypto_verify_32(mac, in + F_MAC) != 0) {
    rc = fail(hs, "bad MAC");
    goto out;
  }
  if (hs->mismatch) {
    rc = fail(hs, hs->encrypt_mode == CRNET__HS_ENCRYPT
                      ? "peer does not encrypt (CRNET_ENCRYPT=0), we do"
                      : "peer encrypts (CRNET_ENCRYPT=1), we do not");
    goto out;
  }
  hs->state = HS_R_DONE;

out:
  sodium_memzero(mac, sizeof mac);
  return rc;
}

void crnet__hs_wipe(crnet__handshake *hs) { sodium_memzero(hs, sizeof *hs); }

/* Job keys. */

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

int crnet__key_parse_hex(const char *hex, uint8_t key[CRNET__KEY_BYTES]) {
  size_t bin_len = 0;
  const char *end = NULL;

  if (hex == NULL)
    goto bad;
  while (is_space(*hex))
    hex++;
  size_t n = strlen(hex);
  while (n > 0 && is_space(hex[n - 1]))
    n--;
  if (n != 2 * CRNET__KEY_BYTES)
    goto bad;
  /* With hex_end given, sodium_hex2bin stops at the first non-digit instead
   * of failing, so the end pointer is what proves all 64 were digits. */
  if (sodium_hex2bin(key, CRNET__KEY_BYTES, hex, n, NULL, &bin_len, &end) !=
          0 ||
      bin_len != CRNET__KEY_BYTES || end != hex + n)
    goto bad;
  return 0;

bad:
  sodium_memzero(key, CRNET__KEY_BYTES);
  return CRNET_EINVAL;
}

int crnet__key_load_file(const char *path, uint8_t key[CRNET__KEY_BYTES]) {
  /* One byte more than accepted, to tell "exactly at the bound" from
   * "longer", and one for the terminating NUL. */
  char buf[KEY_FILE_MAX + 2];
  size_t len = 0;
  int rc = 0;
  int fd = -1;

  if (path == NULL) {
    rc = CRNET_EINVAL;
    goto out;
  }
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    rc = CRNET_EIO;
    goto out;
  }
  while (len < KEY_FILE_MAX + 1) {
    ssize_t got = read(fd, buf + len, KEY_FILE_MAX + 1 - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = CRNET_EIO;
      goto out;
    }
    if (got == 0)
      break;
    len += (size_t)got;
  }
  /* An embedded NUL would hide whatever follows it from the parser. */
  if (len > KEY_FILE_MAX || memchr(buf, '\0', len) != NULL) {
    rc = CRNET_EINVAL;
    goto out;
  }
  buf[len] = '\0';
  rc = crnet__key_parse_hex(buf, key);

out:
  if (rc != 0)
    sodium_memzero(key, CRNET__KEY_BYTES);
  if (fd >= 0)
    close(fd);
  sodium_memzero(buf, sizeof buf);
  return rc;
}

void crnet__key_generate(uint8_t key[CRNET__KEY_BYTES]) {
  /* randombytes_buf needs no successful sodium_init(): it sets up its own
   * source and, as libsodium documents, aborts rather than return weak
   * bytes when the system has no randomness. */
  (void)sodium_ready();
  randombytes_buf(key, CRNET__KEY_BYTES);
}

void crnet__key_to_hex(const uint8_t key[CRNET__KEY_BYTES],
                       char hex[2 * CRNET__KEY_BYTES + 1]) {
  sodium_bin2hex(hex, 2 * CRNET__KEY_BYTES + 1, key, CRNET__KEY_BYTES);
}

void crnet__wipe(void *p, size_t n) { sodium_memzero(p, n); }
