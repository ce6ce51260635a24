/* Fuzz target: the handshake state machine (src/runtime/handshake.c), both
 * sides at once, as the network attacker of docs/SECURITY.md sees it.
 *
 * A real initiator and a real responder exchange HELLO, REPLY and FINISH;
 * the input decides both sides' settings and, per message, whether it
 * passes untouched, is XORed with input bytes, is replaced by input bytes
 * (any HELLO a stranger could send, any REPLY a fake responder could
 * answer), or whether a call comes out of order instead.
 *
 * Input:
 *   byte 0  settings: bit 0 initiator encrypts; bits 1-2 responder mode
 *           (plain, encrypt, follow); bit 3 initiator may use AES; bit 4
 *           responder may use AES; bit 5 rendezvous (else mesh); bit 6 the
 *           responder has another key; bit 7 the responder expects another
 *           stream count
 *   byte 1  job size; byte 2 initiator rank; byte 3 responder rank, stream
 *           and stream count; byte 4 randomness seed
 *   then for HELLO, REPLY, FINISH in turn: one byte (0 pass, 1 XOR, 2
 *           replace, 3 a call out of order), followed for 1 and 2 by the
 *           message's bytes (zero-padded when the input ends)
 *
 * Checked: whenever anything reached a side altered, that side refuses
 * (every byte of every message is covered by a MAC); compatible settings
 * with nothing altered always succeed; on success both sides agree on the
 * peer, purpose, stream, cipher and session keys (a record sealed by one
 * opens at the other); every refusal gives a reason and ends the state
 * machine (later calls are refused too).
 */
#include <stdbool.h>
#include <string.h>

#include "crnet.h"
#include "fuzz.h"
#include "handshake.h"
#include "seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

enum { PASS = 0, XOR = 1, REPLACE = 2, OUT_OF_ORDER = 3 };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_random_install();
  return 0;
}

/* Applies the input's choice for one message: returns the mode, and
 * whether the bytes delivered differ from those sent. */
static int tamper(fuzz_in *in, uint8_t *msg, size_t n, bool *altered) {
  int mode = fuzz_u8(in) & 3;
  uint8_t orig[CRNET__HS_REPLY_SIZE];
  memcpy(orig, msg, n);
  if (mode == XOR || mode == REPLACE) {
    size_t got;
    const uint8_t *p = fuzz_take(in, n, &got);
    for (size_t i = 0; i < n; i++) {
      uint8_t b = i < got ? p[i] : 0;
      msg[i] = mode == XOR ? (uint8_t)(msg[i] ^ b) : b;
    }
  }
  *altered = memcmp(orig, msg, n) != 0;
  return mode;
}

static void expect_refused(const crnet__handshake *hs, int rc,
                           const char *what) {
  if (rc != CRNET_EAUTH)
    fuzz_fail("%s: %d, not a refusal", what, rc);
  if (hs->why == NULL || hs->why[0] == '\0')
    fuzz_fail("%s: refused without a reason", what);
}

/* Both sides succeeded: they must agree on everything. */
static void check_agreement(const crnet__handshake *i,
                            const crnet__handshake *r) {
  crnet__seal *tx = NULL, *rx = NULL;
  uint8_t rec[CRNET__SEAL_OVERHEAD + 5];
  if (r->peer != i->self || r->purpose != i->purpose ||
      r->stream != i->stream)
    fuzz_fail("responder took rank %d purpose %u stream %u, initiator is "
              "rank %d purpose %u stream %u",
              (int)r->peer, r->purpose, r->stream, (int)i->self, i->purpose,
              i->stream);
  if (i->encrypt != r->encrypt || i->cipher != r->cipher)
    fuzz_fail("the sides disagree on encryption");
  if (!i->encrypt)
    return;
  if (memcmp(i->tx_key, r->rx_key, CRNET__SESSION_KEY_BYTES) != 0 ||
      memcmp(i->rx_key, r->tx_key, CRNET__SESSION_KEY_BYTES) != 0)
    fuzz_fail("the sides derived different session keys");
  if (crnet__seal_new(&tx, i->cipher, i->tx_key) != 0 ||
      crnet__seal_new(&rx, r->cipher, r->rx_key) != 0)
    fuzz_fail("no record layer for cipher %u", i->cipher);
  memcpy(rec + CRNET__SEAL_LEN_BYTES, "hello", 5);
  if (crnet__seal_record(tx, rec, rec + CRNET__SEAL_LEN_BYTES, 5) != 0 ||
      crnet__seal_record_len(rec) != 5 ||
      crnet__seal_open(rx, rec, 5, rec + CRNET__SEAL_LEN_BYTES) != 0 ||
      memcmp(rec + CRNET__SEAL_LEN_BYTES, "hello", 5) != 0)
    fuzz_fail("a record sealed by the initiator does not open");
  crnet__seal_free(tx);
  crnet__seal_free(rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t cfg = fuzz_u8(&in), b1 = fuzz_u8(&in), b2 = fuzz_u8(&in),
          b3 = fuzz_u8(&in), seed = fuzz_u8(&in);
  bool rdv = (cfg & 0x20) != 0;
  uint8_t i_mode = (cfg & 1) ? CRNET__HS_ENCRYPT : CRNET__HS_PLAIN;
  uint8_t r_mode = (uint8_t)((cfg >> 1) & 3);
  int32_t jobsize, i_self, i_expect, r_self;
  uint8_t streams = 1, stream = 0, r_streams = 1;
  uint8_t r_key[CRNET__KEY_BYTES];
  uint8_t hello[CRNET__HS_HELLO_SIZE], reply[CRNET__HS_REPLY_SIZE];
  uint8_t finish[CRNET__HS_FINISH_SIZE];
  bool altered = false, a = false, compatible, disordered = false;
  bool i_ok = false;
  int mode, rc;
  crnet__handshake ini, res;

  fuzz_random_seed(seed);
  if (r_mode == 3)
    r_mode = CRNET__HS_PLAIN;
  memcpy(r_key, fuzz_key, sizeof r_key);
  if (cfg & 0x40)
    r_key[0] ^= 1;
  if (rdv) {
    jobsize = 1 + b1 % 16;
    i_self = b2 % jobsize;
    i_expect = r_self = CRNET__RANK_RENDEZVOUS;
  } else {
    jobsize = 2 + b1 % 15;
    i_self = b2 % jobsize;
    r_self = (i_self + 1 + (b3 & 0x0f) % (jobsize - 1)) % jobsize;
    i_expect = r_self;
    streams = (uint8_t)(1 + (b3 >> 4) % CRNET__MAX_STREAMS);
    stream = (uint8_t)((b3 >> 1) % streams);
    r_streams = (cfg & 0x80) ? (uint8_t)(streams % CRNET__MAX_STREAMS + 1)
                             : streams;
  }
  compatible = !(cfg & 0x40) && r_streams == streams &&
               (r_mode == CRNET__HS_FOLLOW || r_mode == i_mode);

  crnet__hs_init_initiator(&ini, fuzz_key,
                           rdv ? CRNET__HS_RENDEZVOUS : CRNET__HS_MESH, i_self,
                           i_expect, jobsize);
  if (!rdv)
    crnet__hs_set_streams(&ini, stream, streams);
  crnet__hs_set_encrypt(&ini, i_mode);
  ini.aes_ok = ini.aes_ok && (cfg & 0x08);
  crnet__hs_init_responder(&res, r_key, r_self, jobsize);
  if (!rdv)
    crnet__hs_set_streams(&res, 0, r_streams);
  crnet__hs_set_encrypt(&res, r_mode);
  res.aes_ok = res.aes_ok && (cfg & 0x10);

  /* HELLO */
  crnet__hs_write_hello(&ini, hello);
  mode = tamper(&in, hello, sizeof hello, &a);
  altered |= a;
  disordered |= mode == OUT_OF_ORDER;
  if (mode == OUT_OF_ORDER) {
    expect_refused(&res, crnet__hs_read_finish(&res, finish),
                   "FINISH before HELLO");
  }
  rc = crnet__hs_read_hello(&res, hello, reply);
  if (rc != 0) {
    expect_refused(&res, rc, "HELLO");
    if (compatible && !altered && !disordered)
      fuzz_fail("an untouched HELLO refused: %s", res.why);
    goto done;
  }
  if (res.peer != i_self && !altered)
    fuzz_fail("responder read rank %d from a HELLO of rank %d", (int)res.peer,
              (int)i_self);

  /* REPLY */
  mode = tamper(&in, reply, sizeof reply, &a);
  altered |= a;
  disordered |= mode == OUT_OF_ORDER;
  if (mode == OUT_OF_ORDER)
    expect_refused(&res, crnet__hs_read_hello(&res, hello, reply),
                   "a second HELLO");
  rc = crnet__hs_read_reply(&ini, reply, finish);
  if (rc != 0) {
    expect_refused(&ini, rc, "REPLY");
    if (compatible && !altered)
      fuzz_fail("an untouched REPLY refused: %s", ini.why);
    goto done;
  }
  if (altered)
    fuzz_fail("the initiator accepted an altered HELLO or REPLY");
  i_ok = true;

  /* FINISH */
  mode = tamper(&in, finish, sizeof finish, &a);
  altered |= a;
  /* This one kills the initiator, which has done its part already. */
  if (mode == OUT_OF_ORDER)
    expect_refused(&ini, crnet__hs_read_reply(&ini, reply, finish),
                   "a second REPLY");
  rc = crnet__hs_read_finish(&res, finish);
  if (rc != 0) {
    expect_refused(&res, rc, "FINISH");
    if (compatible && !altered && !disordered)
      fuzz_fail("an untouched FINISH refused: %s", res.why);
    goto done;
  }
  if (altered || disordered)
    fuzz_fail("the responder accepted an altered or disordered exchange");
  if (!compatible)
    fuzz_fail("incompatible settings accepted");
  check_agreement(&ini, &res);

done:
  /* A failed side refuses everything after. */
  if (!i_ok && ini.state == 0 &&
      crnet__hs_read_reply(&ini, reply, finish) != CRNET_EAUTH)
    fuzz_fail("a failed initiator took another REPLY");
  crnet__hs_wipe(&ini);
  crnet__hs_wipe(&res);
  return 0;
}
