/* What a test program's main returns after srunner_run_all: the number of
 * failed tests, or 1 when none ran. Check runs nothing, and fails nothing,
 * when CK_RUN_SUITE or CK_RUN_CASE names no suite or case of the program
 * (a case renamed, a typo in tests/meson.build): that must not pass. */
#ifndef CRNET_TESTS_CHECK_MAIN_H
#define CRNET_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* EXPECT(cond, fmt, ...): ck_assert_msg for hot loops. Check records every
 * assertion that passes (_mark_point: a write to its pipe, or to its
 * temporary file under CK_FORK=no, read back after the test), so one
 * ck_assert* in a loop of 10^5 iterations is most of a test's time, and
 * far more of it under valgrind. EXPECT tests cond with a plain if and
 * records only a failure, with the message and at the line of the EXPECT:
 * just as strict, no record of the passes. */
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

static inline int check_failures(SRunner *sr) {
  if (srunner_ntests_run(sr) == 0) {
    const char *suite = getenv("CK_RUN_SUITE"), *tcase = getenv("CK_RUN_CASE");
    fprintf(stderr,
            "no test ran: CK_RUN_SUITE=%s CK_RUN_CASE=%s names none of "
            "this program's suites and cases\n",
            suite != NULL ? suite : "(unset)",
            tcase != NULL ? tcase : "(unset)");
    return 1;
  }
  return srunner_ntests_failed(sr);
}

/* A test program's main: runs suite s (forking, as Check does by default)
 * and returns the exit status: 0 when every test ran passed. */
static inline int check_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = check_failures(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
