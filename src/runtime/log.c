#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char log_prefix[64] = "crnet: ";

void crnet__log_set_prefix(const char *prefix) {
  snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

static void log_line(const char *fmt, va_list ap) {
  /* One fprintf of the assembled line keeps lines of concurrent processes
   * sharing a pipe from interleaving mid-line. */
  char line[1024];
  int n = snprintf(line, sizeof line, "%s", log_prefix);
  if (n < 0 || (size_t)n >= sizeof line)
    n = 0;
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  fprintf(stderr, "%s\n", line);
}

void crnet__log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_line(fmt, ap);
  va_end(ap);
}

void crnet__debug(const char *fmt, ...) {
  static int enabled = -1;
  if (enabled < 0) {
    const char *v = getenv("CRNET_DEBUG");
    enabled = v != NULL && strcmp(v, "0") != 0 && v[0] != '\0';
  }
  if (!enabled)
    return;
  va_list ap;
  va_start(ap, fmt);
  log_line(fmt, ap);
  va_end(ap);
}
