/* Line-by-line forwarding of rank output; see forward.h for the rules. */
#include "forward.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

void crnet__fwd_sink_init(crnet__fwd_sink *sink, int fd) {
  sink->fd = fd;
  sink->broken = 0;
  sink->used = 0;
}

static void sink_write(crnet__fwd_sink *sink, const char *p, size_t n) {
  while (n > 0 && !sink->broken) {
    ssize_t w = write(sink->fd, p, n);
    if (w >= 0) {
      p += w;
      n -= (size_t)w;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      /* Someone sharing our stdout made it non-blocking; wait until it can
       * take more instead of spinning. */
      struct pollfd pfd = {.fd = sink->fd, .events = POLLOUT};
      poll(&pfd, 1, -1);
    } else if (errno != EINTR) {
      sink->broken = 1;
    }
  }
}

static void sink_flush(crnet__fwd_sink *sink) {
  sink_write(sink, sink->out, sink->used);
  sink->used = 0;
}

static void sink_put(crnet__fwd_sink *sink, const char *p, size_t n) {
  if (sink->used + n > sizeof sink->out)
    sink_flush(sink);
  if (n >= sizeof sink->out) {
    sink_write(sink, p, n);
    return;
  }
  memcpy(sink->out + sink->used, p, n);
  sink->used += n;
}

/* Writes p[0..n), inserting the prefix at every line start, and ends the
 * line with a newline when `final` and the output stops mid-line. */
static void emit(crnet__fwd_stream *s, const char *p, size_t n, int final) {
  crnet__fwd_sink *sink = s->sink;
  const char *end = p + n;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    if (!s->mid_line && nl != NULL && s->line_cb != NULL &&
        len > s->marker_len && memcmp(p, s->marker, s->marker_len) == 0) {
      s->line_cb(s, p, len, s->arg);
      p += len;
      continue;
    }
    if (!s->mid_line)
      sink_put(sink, s->prefix, s->prefix_len);
    sink_put(sink, p, len);
    p += len;
    s->mid_line = nl == NULL;
  }
  if (final && s->mid_line) {
    sink_put(sink, "\n", 1);
    s->mid_line = 0;
  }
  sink_flush(sink);
}

/* Passes on every complete line in buf (everything at EOF) and keeps the
 * rest for later. */
static void forward(crnet__fwd_stream *s, int eof) {
  size_t done = 0;
  if (eof) {
    done = s->len;
  } else if (s->len > 0) {
    const char *nl = memrchr(s->buf, '\n', s->len);
    if (nl != NULL)
      done = (size_t)(nl - s->buf) + 1;
    else if (s->len >= CRNET__FWD_LINE_MAX)
      done = s->len;
  }
  if (!s->sink->broken && (done > 0 || eof))
    emit(s, s->buf, done, eof);
  memmove(s->buf, s->buf + done, s->len - done);
  s->len -= done;
}

static void on_close(uv_handle_t *h) {
  crnet__fwd_stream *s = h->data;
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
  s->closed_cb(s, s->arg);
}

static void stream_close(crnet__fwd_stream *s) {
  if (s->closing)
    return;
  s->closing = 1;
  uv_close((uv_handle_t *)&s->pipe, on_close);
}

/* Makes room for at least one chunk after the pending bytes. 0 or -1. */
static int reserve(crnet__fwd_stream *s) {
  if (s->cap - s->len >= CRNET__FWD_CHUNK)
    return 0;
  size_t cap = s->cap > 0 ? s->cap : CRNET__FWD_CHUNK;
  while (cap - s->len < CRNET__FWD_CHUNK)
    cap *= 2;
  char *p = realloc(s->buf, cap);
  if (p == NULL)
    return -1;
  s->buf = p;
  s->cap = cap;
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  crnet__fwd_stream *s = h->data;
  (void)suggested;
  /* Reading straight behind the pending partial line saves a copy; a zero
   * length buffer makes libuv report UV_ENOBUFS to on_read. */
  if (reserve(s) != 0) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  buf->base = s->buf + s->len;
  buf->len = s->cap - s->len;
}

static void on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
  crnet__fwd_stream *s = h->data;
  (void)buf;
  if (nread > 0) {
    s->len += (size_t)nread;
    forward(s, 0);
  } else if (nread < 0) {
    /* A report socket (a socket, unlike the output pipes) is reset when
     * the rank exits with lines from crlaunch unread: an end like EOF. */
    if (nread != UV_EOF && nread != UV_ECONNRESET)
      crnet__log("lost output of a rank: %s", uv_strerror((int)nread));
    forward(s, 1);
    stream_close(s);
    if (s->eof_cb != NULL)
      s->eof_cb(s, s->arg);
    return;
  }
  if (s->sink->broken)
    stream_close(s);
}

int crnet__fwd_start(crnet__fwd_stream *s, uv_loop_t *loop, int fd,
                     crnet__fwd_sink *sink, const char *prefix,
                     crnet__fwd_eof_cb eof_cb, crnet__fwd_closed_cb closed_cb,
                     void *arg) {
  memset(s, 0, sizeof *s);
  s->sink = sink;
  s->eof_cb = eof_cb;
  s->closed_cb = closed_cb;
  s->arg = arg;
  snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
  s->prefix_len = strlen(s->prefix);
  /* uv_pipe_init cannot fail on Unix; what follows can, and then the handle
   * is closed like any other so that closed_cb comes from the loop. */
  int err = uv_pipe_init(loop, &s->pipe, 0);
  assert(err == 0);
  s->pipe.data = s;
  err = uv_pipe_open(&s->pipe, fd);
  if (err != 0)
    close(fd);
  else
    err = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
  if (err != 0)
    stream_close(s);
  return err;
}

void crnet__fwd_intercept(crnet__fwd_stream *s, const char *marker,
                          crnet__fwd_line_cb line_cb) {
  s->marker = marker;
  s->marker_len = strlen(marker);
  s->line_cb = line_cb;
}

static void on_reply_written(uv_write_t *w, int status) {
  /* A rank that has exited cannot be told anything; that is no error. */
  (void)status;
  free(w);
}

void crnet__fwd_reply(crnet__fwd_stream *s, const char *data, size_t len) {
  uv_write_t *w;
  uv_buf_t buf;
  if (s->sink == NULL || s->closing)
    return;
  w = malloc(sizeof *w + len);
  if (w == NULL)
    return;
  memcpy(w + 1, data, len);
  buf = uv_buf_init((char *)(w + 1), (unsigned)len);
  if (uv_write(w, (uv_stream_t *)&s->pipe, &buf, 1, on_reply_written) != 0)
    free(w);
}

void crnet__fwd_sink_line(crnet__fwd_sink *sink, const char *line) {
  sink_put(sink, line, strlen(line));
  sink_flush(sink);
}

void crnet__fwd_drain(crnet__fwd_stream *s) {
  if (s->sink == NULL || s->closing)
    return;
  uv_read_stop((uv_stream_t *)&s->pipe);
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0) {
    /* The pipe is non-blocking (libuv made it so): read until it is empty
     * now, not until EOF, which may never come. */
    while (!s->sink->broken && reserve(s) == 0) {
      ssize_t n = read(fd, s->buf + s->len, s->cap - s->len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      s->len += (size_t)n;
      forward(s, 0);
    }
  }
  forward(s, 1);
  stream_close(s);
}
