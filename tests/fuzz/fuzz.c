/* Shared pieces of the fuzz harnesses. See fuzz.h. */
#include "fuzz.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <sodium.h>

const uint8_t fuzz_key[CRNET__KEY_BYTES] = {
    0x63, 0x72, 0x6e, 0x65, 0x74, 0x2d, 0x66, 0x75, 0x7a, 0x7a, 0x2d,
    0x6b, 0x65, 0x79, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11};

/* --- deterministic randomness ---------------------------------------------
 *
 * SplitMix64: not cryptographic, which is the point: the same seed gives the
 * same nonces and ephemeral keys, so a handshake replays bit for bit. */

static uint64_t rng_state;

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static const char *rng_name(void) { return "crnet-fuzz-deterministic"; }

static uint32_t rng_random(void) { return (uint32_t)splitmix64(&rng_state); }

static void rng_buf(void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    uint64_t v = splitmix64(&rng_state);
    size_t k = n < sizeof v ? n : sizeof v;
    memcpy(p, &v, k);
    p += k;
    n -= k;
  }
}

static randombytes_implementation rng_impl = {
    .implementation_name = rng_name,
    .random = rng_random,
    .stir = NULL,
    .uniform = NULL,
    .buf = rng_buf,
    .close = NULL,
};

void fuzz_random_install(void) {
  static bool installed;
  if (installed)
    return;
  installed = true;
  if (randombytes_set_implementation(&rng_impl) != 0 || sodium_init() < 0)
    fuzz_fail("cannot set up libsodium");
}

void fuzz_random_seed(uint64_t seed) { rng_state = seed; }

uint32_t fuzz_prng(uint64_t *state) { return (uint32_t)splitmix64(state); }

/* --- input ----------------------------------------------------------------- */

uint8_t fuzz_u8(fuzz_in *in) {
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}

uint16_t fuzz_u16(fuzz_in *in) {
  uint16_t lo = fuzz_u8(in);
  return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}

const uint8_t *fuzz_take(fuzz_in *in, size_t want, size_t *got) {
  const uint8_t *p = in->p;
  *got = want < in->n ? want : in->n;
  in->p += *got;
  in->n -= *got;
  return p;
}

_Noreturn void fuzz_fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "fuzz: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  abort();
}

/* --- sockets and the loop ----------------------------------------------- */

/* Loop turns with nothing to wait for after which a socket that the other
 * side does not drain is taken as stalled (a parked link). On loopback and
 * Unix sockets the kernel hands data over within the send call, so a side
 * that reads at all has read after one turn. */
#define STALL_TURNS 8

static bool past(uint64_t deadline) { return uv_hrtime() > deadline; }

static uint64_t deadline_in(uint64_t ms) { return uv_hrtime() + ms * 1000000u; }

bool fuzz_run_until(uv_loop_t *loop, bool (*done)(void *), void *arg) {
  uint64_t deadline = deadline_in(FUZZ_WAIT_MS);
  while (!done(arg)) {
    if (past(deadline))
      return false;
    uv_run(loop, UV_RUN_NOWAIT);
  }
  return true;
}

void fuzz_settle(uv_loop_t *loop) {
  for (int i = 0; i < STALL_TURNS; i++)
    uv_run(loop, UV_RUN_NOWAIT);
}

bool fuzz_write_all(uv_loop_t *loop, int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  int stalled = 0;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      stalled = 0;
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return false;
    if (++stalled > STALL_TURNS)
      return false;
    uv_run(loop, UV_RUN_NOWAIT);
  }
  return true;
}

bool fuzz_read_all(uv_loop_t *loop, int fd, void *buf, size_t n) {
  uint8_t *p = buf;
  uint64_t deadline = deadline_in(FUZZ_WAIT_MS);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0 ||
        (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return false;
    if (past(deadline))
      return false;
    uv_run(loop, UV_RUN_NOWAIT);
  }
  return true;
}

int fuzz_handshake(uv_loop_t *loop, int fd, crnet__handshake *hs,
                   uint8_t purpose, int32_t self, int32_t expected_peer,
                   int32_t size, uint8_t encrypt, bool aes) {
  uint8_t hello[CRNET__HS_HELLO_SIZE], reply[CRNET__HS_REPLY_SIZE];
  uint8_t finish[CRNET__HS_FINISH_SIZE];
  crnet__hs_init_initiator(hs, fuzz_key, purpose, self, expected_peer, size);
  crnet__hs_set_encrypt(hs, encrypt);
  hs->aes_ok = hs->aes_ok && aes;
  crnet__hs_write_hello(hs, hello);
  if (!fuzz_write_all(loop, fd, hello, sizeof hello) ||
      !fuzz_read_all(loop, fd, reply, sizeof reply) ||
      crnet__hs_read_reply(hs, reply, finish) != 0 ||
      !fuzz_write_all(loop, fd, finish, sizeof finish))
    return -1;
  return 0;
}
