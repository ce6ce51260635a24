/* Line-by-line forwarding of the ranks' stdout and stderr to crlaunch's own.
 *
 * Every rank writes into pipes of its own; crlaunch reads them on its loop
 * and passes on only whole lines, each optionally after a "[rank] " prefix.
 * crlaunch is the only writer of its stdout and stderr and it is single
 * threaded, so lines of different ranks can never tear each other. Complete
 * lines that arrive together are gathered so that a burst costs one write(2).
 *
 * Limits: a line longer than CRNET__FWD_LINE_MAX is passed on in pieces
 * without an added newline (the bytes stay intact, but another rank's line may
 * then land inside it). A last line without a newline gets one at EOF.
 *
 * Writes to crlaunch's stdout/stderr block: when the reader of crlaunch's
 * output is slow, crlaunch stops reading and the ranks block on their full
 * pipes, the back-pressure a shell pipeline gives. When that reader goes away
 * (EPIPE or another write error), the sink is marked broken and every stream
 * feeding it closes its pipe on its next read, so the ranks get SIGPIPE on
 * their next write, as any writer into a closed pipeline does.
 */
#ifndef CRNET_FORWARD_H
#define CRNET_FORWARD_H

#include <stddef.h>
#include <uv.h>

#define CRNET__FWD_LINE_MAX (1024 * 1024)
#define CRNET__FWD_CHUNK (64 * 1024)

/* A destination: crlaunch's stdout or stderr. Owned by the caller. */
typedef struct crnet__fwd_sink {
  int fd;
  int broken;                    /* a write failed: stop forwarding */
  size_t used;                   /* bytes gathered in out[] */
  char out[CRNET__FWD_CHUNK];    /* lines gathered for one write */
} crnet__fwd_sink;

typedef struct crnet__fwd_stream crnet__fwd_stream;

/* Called for every whole line that starts with the stream's marker (see
 * crnet__fwd_intercept) instead of passing it on; `line` holds len bytes
 * with the newline, and is only valid during the call. */
typedef void (*crnet__fwd_line_cb)(crnet__fwd_stream *s, const char *line,
                                   size_t len, void *arg);

/* Called from the loop at most once, when the pipe reports EOF (or a read
 * error): the writer has closed its end, usually because it exited. The
 * stream is about to close. */
typedef void (*crnet__fwd_eof_cb)(crnet__fwd_stream *s, void *arg);

/* Called from the loop once the stream's pipe handle is closed, after its
 * last line was written; the caller may then free the stream. */
typedef void (*crnet__fwd_closed_cb)(crnet__fwd_stream *s, void *arg);

/* One rank's stdout or stderr. Owned by the caller, which keeps it alive
 * until closed_cb. The fields are internal. */
struct crnet__fwd_stream {
  uv_pipe_t pipe;
  crnet__fwd_sink *sink;
  char prefix[24];
  size_t prefix_len;
  char *buf; /* bytes read but not yet written: never a complete line */
  size_t len;
  size_t cap;
  int mid_line; /* the sink got the start of a line whose end is still due */
  int closing;
  crnet__fwd_eof_cb eof_cb;
  crnet__fwd_closed_cb closed_cb;
  void *arg;
  const char *marker; /* see crnet__fwd_intercept */
  size_t marker_len;
  crnet__fwd_line_cb line_cb;
};

void crnet__fwd_sink_init(crnet__fwd_sink *sink, int fd);

/* Starts forwarding from `fd`, the reading end of a pipe, to `sink`, each
 * line prefixed with `prefix` ("" or "[3] "). The stream owns fd from now on,
 * also when this fails. 0 or a libuv error code; either way closed_cb runs
 * once, from the loop, when the stream is done. eof_cb may be NULL. */
int crnet__fwd_start(crnet__fwd_stream *s, uv_loop_t *loop, int fd,
                     crnet__fwd_sink *sink, const char *prefix,
                     crnet__fwd_eof_cb eof_cb, crnet__fwd_closed_cb closed_cb,
                     void *arg);

/* Forwards what the pipe holds right now without waiting for EOF, then
 * closes the stream. For a pipe still held open by a process that a rank
 * left behind: once the rank itself has exited, everything it wrote is
 * already in the pipe. Does nothing if the stream is already closing, or
 * was never started (then it must be zeroed). */
void crnet__fwd_drain(crnet__fwd_stream *s);

/* From now on, whole lines of s that start with `marker` (kept by the
 * caller) go to line_cb instead of the sink: how an agent's reports travel
 * with its ranks' output. A marker inside a line longer than
 * CRNET__FWD_LINE_MAX, passed on in pieces, is not seen. */
void crnet__fwd_intercept(crnet__fwd_stream *s, const char *marker,
                          crnet__fwd_line_cb line_cb);

/* Writes len bytes back into the stream's pipe, a socket (crlaunch's word
 * to a rank on its report socket), without waiting for the write. Nothing
 * if the stream is closing or was never started. */
void crnet__fwd_reply(crnet__fwd_stream *s, const char *data, size_t len);

/* Writes one whole line (with its newline) to the sink at once, between
 * the lines of the streams. */
void crnet__fwd_sink_line(crnet__fwd_sink *sink, const char *line);

#endif
