/* The allocation hook. See alloc.h. */
#include "alloc.h"

atomic_long crnet__alloc_countdown;
static atomic_long failures;

bool crnet__alloc_take(void) {
  long left = atomic_load_explicit(&crnet__alloc_countdown,
                                   memory_order_relaxed);
  /* A compare-and-swap, not a decrement: two threads that both saw the
   * hook armed must not take it below zero, and only the one that moves
   * it from 1 to 0 fails. */
  while (left > 0) {
    if (atomic_compare_exchange_weak_explicit(
            &crnet__alloc_countdown, &left, left - 1, memory_order_relaxed,
            memory_order_relaxed)) {
      if (left != 1)
        return false;
      atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void crnet__alloc_fail_after(long n) {
  atomic_store_explicit(&crnet__alloc_countdown, n > 0 ? n : 0,
                        memory_order_relaxed);
}

long crnet__alloc_failures(void) {
  return atomic_load_explicit(&failures, memory_order_relaxed);
}
