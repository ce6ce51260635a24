/* Secret memory (secret.c): blocks that core files leave out and that are
 * wiped when freed. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "secret.h"

START_TEST(test_blocks_are_zeroed_aligned_and_undumped) {
  /* More blocks than one slab holds, of every size up to the largest. */
  enum { N = 200 };
  uint8_t *p[N];
  for (int i = 0; i < N; i++) {
    size_t n = 1 + (size_t)(i * 37) % CRNET__SECRET_MAX;
    p[i] = crnet__secret_alloc(n);
    ck_assert_ptr_nonnull(p[i]);
    ck_assert_uint_eq((uintptr_t)p[i] % 64, 0);
    /* Plain checks per byte and per pair, some 10^5 of them (EXPECT,
     * check_main.h): Check records every ck_assert that passes. */
    for (size_t k = 0; k < n; k++)
      EXPECT(p[i][k] == 0, "block %d of %zu bytes: byte %zu is 0x%02x", i, n, k,
             p[i][k]);
    memset(p[i], 0xA5, n);
    for (int j = 0; j < i; j++)
      EXPECT(p[i] != p[j], "blocks %d and %d are both %p", j, i, (void *)p[i]);
  }
  ck_assert(crnet__secret_is_undumped(p[0]));
  ck_assert(crnet__secret_is_undumped(p[N - 1]));
  /* The check can fail: ordinary heap memory is dumped. */
  void *plain = malloc(64);
  ck_assert(!crnet__secret_is_undumped(plain));
  free(plain);
  for (int i = 0; i < N; i++)
    crnet__secret_free(p[i]);
  crnet__secret_free(NULL);
}
END_TEST

START_TEST(test_freed_blocks_are_wiped_and_reused) {
  uint8_t *a = crnet__secret_alloc(32);
  ck_assert_ptr_nonnull(a);
  memset(a, 0x5A, 32);
  crnet__secret_free(a);
  /* The slab stays mapped: the block must read as zeros now. */
  for (int k = 0; k < CRNET__SECRET_MAX; k++)
    EXPECT(a[k] == 0, "byte %d of a freed block is 0x%02x", k, a[k]);
  uint8_t *b = crnet__secret_alloc(CRNET__SECRET_MAX);
  ck_assert_ptr_eq(a, b); /* the lowest free slot comes back first */
  crnet__secret_free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("secret");
  TCase *tc = tcase_create("secret");
  tcase_add_test(tc, test_blocks_are_zeroed_aligned_and_undumped);
  tcase_add_test(tc, test_freed_blocks_are_wiped_and_reused);
  suite_add_tcase(s, tc);
  return check_run(s);
}
