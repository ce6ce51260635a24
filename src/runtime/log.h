/* Diagnostics to stderr, one line each, prefixed with who speaks
 * ("crnet[3]: ", "crlaunch: "). Connection events (strangers dropped, links
 * up) are logged only at CRNET_DEBUG=1; problems that change an outcome are
 * always logged. Never log key material. */
#ifndef CRNET_LOG_H
#define CRNET_LOG_H

#include <stdarg.h>

void crnet__log_set_prefix(const char *prefix);
void crnet__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void crnet__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
