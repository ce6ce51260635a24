/* What the MPI test programs share: EXPECT and OK, which count a failed
 * check and say where it was, and an error code's class and string.
 * Before including, a program defines EXPECT_PROG (its name, a string
 * literal) and has `static int rank, failures;`. */
#ifndef CRNET_MPI_EXPECT_H
#define CRNET_MPI_EXPECT_H

#include <stdio.h>

#include "mpi.h"

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, EXPECT_PROG ": rank %d: %s:%d: ", rank, __FILE__,        \
              __LINE__);                                                       \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define OK(call) EXPECT((call) == MPI_SUCCESS, "%s failed", #call)

static inline int error_class(int code) {
  int cls = -1;
  MPI_Error_class(code, &cls);
  return cls;
}

/* The code's string (a static buffer: until the next call). */
static inline const char *error_text(int code) {
  static char s[MPI_MAX_ERROR_STRING];
  int n;
  if (MPI_Error_string(code, s, &n) != MPI_SUCCESS)
    snprintf(s, sizeof s, "(no string)");
  return s;
}

#endif
