/* Memory for crnet's own data: every allocation of the base, schedules,
 * runtime and collectives layers goes through these (libuv's and
 * libsodium's own allocations do not). They are malloc, calloc and realloc,
 * and behave exactly as those do, with one difference for tests: a hook can
 * make the Nth allocation from now fail (return NULL, as a full heap
 * would), so that the code behind every `if (p == NULL)` runs under test
 * (tests/test_alloc_faults.c). Memory from them is given back with free().
 *
 * Cost when the hook is not armed (always, outside tests): one relaxed
 * atomic load and a branch predicted not taken. Thread-safe: the progress
 * thread allocates too, and exactly one allocation, in whichever thread
 * gets there, takes the failure.
 */
#ifndef CRNET_ALLOC_H
#define CRNET_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Allocations left until the one that fails (that one included); 0 when
 * the hook is not armed. Only alloc.c writes it. */
extern atomic_long crnet__alloc_countdown;

/* The slow path of an armed hook: counts this allocation and says whether
 * it is the one that fails (then disarming the hook). */
bool crnet__alloc_take(void);

/* Whether this allocation is to fail: for an allocator of its own
 * (crnet__secret_alloc) that wants the hook in front of it. */
static inline bool crnet__alloc_fails(void) {
  return __builtin_expect(atomic_load_explicit(&crnet__alloc_countdown,
                                               memory_order_relaxed) != 0,
                          0) &&
         crnet__alloc_take();
}

static inline void *crnet__malloc(size_t n) {
  return crnet__alloc_fails() ? NULL : malloc(n);
}

static inline void *crnet__calloc(size_t n, size_t size) {
  return crnet__alloc_fails() ? NULL : calloc(n, size);
}

/* As realloc: on failure p is left as it was, and still the caller's. */
static inline void *crnet__realloc(void *p, size_t n) {
  return crnet__alloc_fails() ? NULL : realloc(p, n);
}

/* --- for tests ------------------------------------------------------------ */

/* n >= 1: the nth allocation from now (through the functions above, in any
 * thread) fails, and only that one; the hook then disarms itself. n <= 0:
 * disarms it. */
void crnet__alloc_fail_after(long n);

/* How many allocations the hook has failed since the process started: a
 * test compares it before and after a call to learn whether the call met
 * its failure (a call that makes fewer than n allocations does not). */
long crnet__alloc_failures(void);

#endif
