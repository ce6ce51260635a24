/* The socket between a rank and crlaunch. See report.h. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "comm.h"
#include "log.h"

/* CRNET_LAUNCHER_FD is "<fd>:<inode>", and the socket must be at that
 * descriptor with that inode: a wrapper such as sudo may have closed the
 * descriptor, and the program put a socket of its own there. The comm then
 * works on a duplicate of its own (close-on-exec: the reports are for
 * crlaunch alone, not for programs the rank starts in turn), so that the
 * program closing descriptor 3 and reusing the number can never make crnet
 * read or write a socket of the program's. */
void crnet__report_find(crnet_comm *c) {
  const char *v = getenv("CRNET_LAUNCHER_FD");
  struct stat st;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int fd, type, end = 0, own;
  unsigned long long ino;
  socklen_t tlen = sizeof type;
  c->w->report_fd = -1;
  if (v == NULL || sscanf(v, "%d:%llu%n", &fd, &ino, &end) != 2 ||
      v[end] != '\0' || fd < 0 || fstat(fd, &st) != 0 ||
      !S_ISSOCK(st.st_mode) || (unsigned long long)st.st_ino != ino ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 ||
      type != SOCK_STREAM ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
      ss.ss_family != AF_UNIX)
    return;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0) {
    crnet__debug("cannot keep crlaunch's socket: %s", strerror(errno));
    return;
  }
  c->w->report_fd = own;
}

/* A send to a socket whose reader is gone gives EPIPE, not SIGPIPE; a full
 * one (never, for a few lines) is not waited for. */
bool crnet__report_send(const crnet_comm *c, const char *line) {
  size_t n = strlen(line);
  if (c->w->report_fd < 0)
    return false;
  if (send(c->w->report_fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
    crnet__debug("cannot tell crlaunch \"%.*s\": %s", (int)n - 1, line,
                 strerror(errno));
  return true;
}

/* The record of rank r's end, allocated at crlaunch's first word of one. */
static struct crnet__rank_end *rank_end(crnet_comm *c, int r) {
  if (c->w->rank_end == NULL) {
    c->w->rank_end = crnet__calloc((size_t)c->size, sizeof *c->w->rank_end);
    if (c->w->rank_end == NULL)
      return NULL;
    for (int i = 0; i < c->size; i++)
      c->w->rank_end[i].blamed = -1;
  }
  return &c->w->rank_end[r];
}

/* One line from crlaunch. An abort fails the comm, unless it has failed
 * already (its reason stands) or the abort is this rank's own; "gone" and
 * "fail" are kept for crnet__report_await. */
static void take_line(crnet_comm *c, const char *line) {
  int rank, code, status, sig, origin, end = 0;
  if (sscanf(line, "abort %d %d%n", &rank, &code, &end) == 2 &&
      line[end] == '\0' && rank >= 0 && rank < c->size) {
    if (rank != c->rank)
      crnet__comm_fail_aborted(c, rank, code);
    return;
  }
  if (sscanf(line, "gone %d %d %d%n", &rank, &status, &sig, &end) == 3 &&
      line[end] == '\0' && rank >= 0 && rank < c->size) {
    /* Kept: the word may come long before this rank notices the loss. */
    struct crnet__rank_end *e = rank_end(c, rank);
    if (e != NULL && !e->gone) {
      e->status = status;
      e->signal = sig;
      e->gone = true;
    }
    return;
  }
  if (sscanf(line, "fail %d %d%n", &rank, &origin, &end) == 2 &&
      line[end] == '\0' && rank >= 0 && rank < c->size && origin >= 0 &&
      origin < c->size) {
    struct crnet__rank_end *e = rank_end(c, rank);
    if (e != NULL && e->blamed < 0)
      e->blamed = origin;
    return;
  }
  crnet__log("ignored a line from crlaunch it does not understand: \"%s\"",
             line);
}

static void stop_listening(crnet_comm *c) {
  if (c->w->report_listening) {
    c->w->report_listening = false;
    uv_close((uv_handle_t *)&c->w->report_poll, NULL);
  }
}

/* Reads what crlaunch has said so far and acts on every whole line. */
static void read_lines(crnet_comm *c) {
  char *nl;
  ssize_t n;
  for (;;) {
    n = recv(c->w->report_fd, c->w->report_in + c->w->report_in_len,
             sizeof c->w->report_in - 1 - c->w->report_in_len, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) {
      /* crlaunch is gone: nothing more will come (it stops the ranks). */
      stop_listening(c);
      return;
    }
    c->w->report_in_len += (size_t)n;
    c->w->report_in[c->w->report_in_len] = '\0';
    while ((nl = strchr(c->w->report_in, '\n')) != NULL) {
      *nl = '\0';
      take_line(c, c->w->report_in);
      c->w->report_in_len -= (size_t)(nl + 1 - c->w->report_in);
      memmove(c->w->report_in, nl + 1, c->w->report_in_len + 1);
    }
    if (c->w->report_in_len == sizeof c->w->report_in - 1) {
      crnet__log("ignored an overlong line from crlaunch");
      c->w->report_in_len = 0;
    }
  }
}

static void on_report_readable(uv_poll_t *h, int status, int events) {
  crnet_comm *c = h->data;
  (void)events;
  if (status < 0)
    stop_listening(c);
  else
    read_lines(c);
}

void crnet__report_check(crnet_comm *c) {
  if (c->w->report_listening)
    read_lines(c);
}

/* Why rank r left, if crlaunch has said it: whom it failed because of,
 * how its process ended, or both. */
static bool said_end(const crnet_comm *c, int r, char *how, size_t howlen) {
  const struct crnet__rank_end *e;
  int n = 0;
  if (c->w->rank_end == NULL)
    return false;
  e = &c->w->rank_end[r];
  if (!e->gone && e->blamed < 0)
    return false;
  if (e->blamed >= 0)
    n = snprintf(how, howlen, "rank %d failed because of rank %d%s", r,
                 e->blamed, e->gone ? ", then " : "");
  else
    n = snprintf(how, howlen, "rank %d ", r);
  if (n < 0 || (size_t)n >= howlen || !e->gone)
    return true;
  if (e->signal != 0)
    snprintf(how + n, howlen - (size_t)n, "was killed by signal %d (%s)",
             e->signal, strsignal(e->signal));
  else
    snprintf(how + n, howlen - (size_t)n, "exited with status %d", e->status);
  return true;
}

int crnet__report_await(crnet_comm *c, int lost, char *how, size_t howlen) {
  uint64_t until = uv_hrtime() + (uint64_t)CRNET__REPORT_VERDICT_MS * 1000000;
  struct pollfd pfd;
  how[0] = '\0';
  if (lost < 0 || lost >= c->size)
    return lost;
  int fault = -1; /* the rank at fault, once crlaunch has said it */
  for (;;) {
    uint64_t now = uv_hrtime();
    if (c->w->report_listening)
      read_lines(c);
    if (c->err != 0)
      return lost;
    if (said_end(c, lost, how, howlen))
      fault = c->w->rank_end[lost].blamed >= 0 ? c->w->rank_end[lost].blamed
                                                : lost;
    /* `lost` failed because of another rank: crlaunch's word on that one
     * may still be on its way (the two reached crlaunch from different
     * hosts), and if it aborted, the abort is what this rank must fail
     * with. Waits for it within the same bound. */
    if (fault >= 0 &&
        (fault == lost || c->w->rank_end[fault].gone ||
         c->w->rank_end[fault].blamed >= 0))
      return fault;
    if (!c->w->report_listening || now >= until)
      return fault >= 0 ? fault : lost;
    pfd.fd = c->w->report_fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, (int)((until - now + 999999) / 1000000)) == 0)
      return fault >= 0 ? fault : lost;
  }
}

void crnet__report_listen(crnet_comm *c) {
  if (c->w->report_fd < 0 || c->w->report_listening)
    return;
  if (uv_poll_init(&c->w->loop, &c->w->report_poll, c->w->report_fd) != 0)
    return;
  c->w->report_poll.data = c;
  c->w->report_listening = true;
  /* Read whenever the loop runs, which is inside crnet calls; it does not
   * keep the loop alive (a wait with nothing else to wait for is a bug that
   * crnet__comm_run_until reports, not a reason to sleep forever). */
  uv_unref((uv_handle_t *)&c->w->report_poll);
  if (uv_poll_start(&c->w->report_poll, UV_READABLE, on_report_readable) != 0)
    stop_listening(c);
}

void crnet__report_close(crnet_comm *c) {
  stop_listening(c);
}
