/* Named skips: a case that cannot run here says so on one line, which
 * the test summary (tools/quickstart.sh) lists by test name with its
 * reason, so that a skip never reads as a pass.
 *
 *   SKIP <case>: <reason>
 *
 * Two kinds:
 * - test_skip: the case cannot mean anything in this build or on this
 *   CPU (AES-NI absent, a sanitizer that turns core dumps off while the
 *   plain pass runs the case). Always a named skip.
 * - test_require: the case needs something the machine may lack (a raw
 *   socket, ::1, core files written where the process runs). A named
 *   skip, except under CRNET_TEST_STRICT=1 (which tools/quickstart.sh sets
 *   when it runs as root, where CI runs), where the case fails with the
 *   reason: the only proofs that traffic is encrypted on the wire and that
 *   keys stay out of core files must run or fail there.
 *
 * Shell and Python tests print the same line (tests/multihost.sh,
 * tests/python, tests/torch). */
#ifndef CRNET_TESTS_SKIP_H
#define CRNET_TESTS_SKIP_H

#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool test_strict(void) {
  const char *s = getenv("CRNET_TEST_STRICT");
  return s != NULL && strcmp(s, "1") == 0;
}

__attribute__((format(printf, 2, 0))) static inline void
test_skip_v(const char *name, const char *fmt, va_list ap) {
  printf("SKIP %s: ", name);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
}

/* Says that case `name` is skipped, and why. The caller returns. */
__attribute__((format(printf, 2, 3))) static inline void
test_skip(const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  test_skip_v(name, fmt, ap);
  va_end(ap);
}

/* test_skip, except that under CRNET_TEST_STRICT=1 the case fails with the
 * reason (and does not return). */
__attribute__((format(printf, 2, 3))) static inline void
test_require(const char *name, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (test_strict())
    ck_abort_msg("%s cannot run: %s (CRNET_TEST_STRICT=1: it must run here)",
                 name, why);
  test_skip(name, "%s", why);
}

#endif
