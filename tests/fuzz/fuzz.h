/* Shared pieces of the fuzz harnesses (tests/fuzz/fuzz_TARGET.c).
 *
 * Each harness defines LLVMFuzzerTestOneInput and, where it needs set-up,
 * LLVMFuzzerInitialize. They are built twice: with libFuzzer under clang
 * (meson -Dfuzz=true, tests/fuzz/run.sh), and in every build with
 * replay.c's main(), which runs the checked-in corpus and the regression
 * inputs as a unit test.
 *
 * Harnesses are deterministic: libsodium's randomness (handshake nonces,
 * ephemeral keys) comes from a seeded generator installed before
 * sodium_init(), reseeded at the start of every input, so an input that
 * crashes once crashes again.
 */
#ifndef CRNET_FUZZ_H
#define CRNET_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "handshake.h"

/* The job key of every harness. */
extern const uint8_t fuzz_key[CRNET__KEY_BYTES];

/* Installs the deterministic randomness (idempotent; before any libsodium
 * call), and reseeds it. */
void fuzz_random_install(void);
void fuzz_random_seed(uint64_t seed);

/* Reading the fuzzer's input: bytes past the end read as zero. */
typedef struct fuzz_in {
  const uint8_t *p;
  size_t n;
} fuzz_in;

uint8_t fuzz_u8(fuzz_in *in);
uint16_t fuzz_u16(fuzz_in *in);
/* Up to `want` bytes; *got says how many. */
const uint8_t *fuzz_take(fuzz_in *in, size_t want, size_t *got);

/* A small deterministic generator for choices a harness makes itself
 * (chunk sizes, receive layouts), seeded from the input. */
uint32_t fuzz_prng(uint64_t *state);

/* Aborts with a message: a property a harness checks does not hold. */
_Noreturn void fuzz_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Socket helpers for harnesses that drive a libuv loop (link, rendezvous)
 * from the other end of real sockets, on the same thread. The loop only
 * ever runs with UV_RUN_NOWAIT in between, so nothing blocks; waits are
 * bounded by FUZZ_WAIT_MS, after which a harness calls it a hang. */
#define FUZZ_WAIT_MS 5000

/* Runs the loop until `done(arg)` holds or the wait bound passes. Returns
 * whether done holds. */
bool fuzz_run_until(uv_loop_t *loop, bool (*done)(void *), void *arg);
/* Runs the loop a few times with nothing to wait for, so that what the
 * kernel holds for its sockets is read and handled. */
void fuzz_settle(uv_loop_t *loop);
/* Writes all of buf to the non-blocking fd, running the loop while the
 * socket is full. False if the peer stopped reading for good (the wait
 * bound passed) or the connection failed. */
bool fuzz_write_all(uv_loop_t *loop, int fd, const void *buf, size_t n);
/* Reads exactly n bytes from the non-blocking fd, running the loop in
 * between. False on end of file, error or the wait bound. */
bool fuzz_read_all(uv_loop_t *loop, int fd, void *buf, size_t n);
/* Plays the initiator of a handshake over fd (HELLO, REPLY, FINISH) with
 * the given settings, running the loop for the other side. 0, or -1 when
 * the responder refused or went silent (hs->why then says why if it was
 * the REPLY that failed). */
int fuzz_handshake(uv_loop_t *loop, int fd, crnet__handshake *hs,
                   uint8_t purpose, int32_t self, int32_t expected_peer,
                   int32_t size, uint8_t encrypt, bool aes);

#endif
