/* What a test program's main returns after srunner_run_all: the number of
 * failed tests, or 1 when none ran. Check runs nothing, and fails nothing,
 * when CK_RUN_SUITE or CK_RUN_CASE names no suite or case of the program
 * (a case renamed, a typo in tests/meson.build): that must not pass. */
#ifndef CRNET_TESTS_CHECK_MAIN_H
#define CRNET_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

static inline int check_failures(SRunner *sr) {
  if (srunner_ntests_run(sr) == 0) {
    const char *suite = getenv("CK_RUN_SUITE"), *tcase = getenv("CK_RUN_CASE");
    fprintf(stderr,
            "no test ran: CK_RUN_SUITE=%s CK_RUN_CASE=%s names none of "
            "this program's\n",
            suite != NULL ? suite : "(unset)",
            tcase != NULL ? tcase : "(unset)");
    return 1;
  }
  return srunner_ntests_failed(sr);
}

#endif
