/* One factor for every wall-clock limit inside the tests.
 *
 * A limit inside a test (a job's deadline, "the error came within 2 s",
 * how long to wait for a file to appear) holds on a quiet machine with
 * the plain build. The same test also runs under AddressSanitizer,
 * ThreadSanitizer and valgrind, which make every step several times
 * slower: there each limit is multiplied by CRNET_TEST_TIME_SCALE, which
 * the test command sets once per pass (tools/quickstart.sh: 3 under the
 * sanitizers, as meson's --timeout-multiplier; tests/meson.build: 5 under
 * valgrind). Unset, the factor is 1. Limits that are the subject of a
 * test (a rank's CRNET_TIMEOUT of 2 s must end its call) scale with it,
 * and so do the bounds checked against them, so that the test still
 * checks the same relation. */
#ifndef CRNET_TESTS_TIME_SCALE_H
#define CRNET_TESTS_TIME_SCALE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* CRNET_TEST_TIME_SCALE, a number from 1 to 100; exits the test (failing
 * it) on any other value, which would silently change every limit. */
static inline double test_time_scale(void) {
  const char *s = getenv("CRNET_TEST_TIME_SCALE");
  char *end;
  double f;
  if (s == NULL || *s == '\0')
    return 1.0;
  f = strtod(s, &end);
  if (*end != '\0' || !isfinite(f) || f < 1.0 || f > 100.0) {
    fprintf(stderr, "CRNET_TEST_TIME_SCALE=%s: not a number from 1 to 100\n",
            s);
    exit(2);
  }
  return f;
}

/* s seconds, scaled for this pass. */
static inline double test_seconds(double s) { return s * test_time_scale(); }

#endif
