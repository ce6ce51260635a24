/* crbench --link-limit: how fast p processes can move bytes over TCP on
 * this machine when each streams to its successor at once, and how long a
 * small round trip takes meanwhile. It is the yardstick for busbw: a
 * schedule whose ranks each send to one peer per round cannot beat what
 * plain sockets do in the same pattern, so efficiency = busbw / (aggregate
 * / p) says how much of the machine a collective gets (crbench prints it
 * beside every result of 1 MiB or more).
 *
 * How: every rank listens on a TCP port of the address that reaches the
 * job (the local address of a route to CRNET_RENDEZVOUS, as the library's
 * own bootstrap does; 127.0.0.1 for a local job), the ports travel by
 * crnet_allgather, and rank r opens two connections to rank r+1 mod p: a
 * stream and a ping line (TCP_NODELAY). Then, per repetition, after a
 * crnet_barrier, every rank writes `bytes` into its stream while reading
 * as many from its predecessor's, and meanwhile sends 8-byte pings on its
 * ping line one after another (each waits for its echo) and echoes its
 * predecessor's. The repetition's time is the slowest rank's, from the
 * barrier to its last byte in and out; aggregate = p · bytes / that time.
 * The idle round trip is measured the same way with nothing streaming.
 *
 * One thread per rank and poll(2), as crnet itself waits on its links, so
 * the figures include what scheduling p busy processes on this machine's
 * cores costs, as they do for the collectives. Sockets are the kernel's
 * defaults, as crnet's are. Every wait is bounded (PROBE_TIMEOUT_S).
 */
#include "crbench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (256 * 1024)        /* bytes per read or write call */
#define IDLE_PINGS 200            /* round trips measured without load */
#define MAX_SAMPLES 100000        /* round trips kept per repetition */
#define PROBE_TIMEOUT_S 120.0     /* one phase, then the probe gives up */
#define PING_FIN UINT64_MAX       /* the last ping of a phase */
#define SETUP_TIMEOUT_MS 30000    /* connecting, accepting, greeting */

/* What a rank publishes: where its listener is. */
struct endpoint {
  uint8_t family; /* AF_INET or AF_INET6 as 4 or 6 */
  uint8_t pad;
  uint8_t port[2]; /* big-endian, as in sockaddr */
  uint8_t addr[16];
};

struct probe {
  int rank, p;
  int listen_fd;
  int out_fd, in_fd;     /* stream to the successor, from the predecessor */
  int ping_fd, echo_fd;  /* pings to the successor, echoes for the
                            predecessor */
  char *buf;             /* CHUNK bytes, sent and overwritten */
  double *samples;       /* this phase's round trips */
  size_t nsamples;
};

static int fail_errno(const char *what) {
  fprintf(stderr, PROG ": --link-limit: %s: %s\n", what, strerror(errno));
  return 1;
}

/* The local address of a route to the rendezvous host, or 127.0.0.1 when
 * there is none (a job of one, an unresolvable name). Never fails. */
static int local_address(struct sockaddr_storage *ss, socklen_t *len) {
  const char *rdv = getenv("CRNET_RENDEZVOUS");
  struct addrinfo hints, *ai = NULL;
  char host[256];
  const char *colon;
  int fd;
  struct sockaddr_in *in = (struct sockaddr_in *)ss;
  memset(ss, 0, sizeof *ss);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  *len = sizeof *in;
  if (rdv == NULL || rdv[0] == '\0')
    return 0;
  /* host:port or [v6]:port */
  if (rdv[0] == '[') {
    const char *close = strchr(rdv, ']');
    if (close == NULL || (size_t)(close - rdv - 1) >= sizeof host)
      return 0;
    memcpy(host, rdv + 1, (size_t)(close - rdv - 1));
    host[close - rdv - 1] = '\0';
  } else {
    colon = strrchr(rdv, ':');
    if (colon == NULL || (size_t)(colon - rdv) >= sizeof host)
      return 0;
    memcpy(host, rdv, (size_t)(colon - rdv));
    host[colon - rdv] = '\0';
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host, "9", &hints, &ai) != 0 || ai == NULL)
    return 0;
  /* A UDP "connection" sends nothing; it only picks the route. */
  fd = socket(ai->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
    struct sockaddr_storage local;
    socklen_t n = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &n) == 0) {
      /* the address only: the UDP socket's port means nothing to TCP */
      if (local.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&local)->sin6_port = 0;
      else
        ((struct sockaddr_in *)&local)->sin_port = 0;
      *ss = local;
      *len = n;
    }
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(ai);
  return 0;
}

static int set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void endpoint_of(const struct sockaddr_storage *ss, struct endpoint *e) {
  memset(e, 0, sizeof *e);
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
    e->family = 6;
    memcpy(e->port, &in6->sin6_port, 2);
    memcpy(e->addr, &in6->sin6_addr, 16);
  } else {
    const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
    e->family = 4;
    memcpy(e->port, &in->sin_port, 2);
    memcpy(e->addr, &in->sin_addr, 4);
  }
}

static socklen_t sockaddr_of(const struct endpoint *e,
                             struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (e->family == 6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    memcpy(&in6->sin6_port, e->port, 2);
    memcpy(&in6->sin6_addr, e->addr, 16);
    return sizeof *in6;
  }
  struct sockaddr_in *in = (struct sockaddr_in *)ss;
  in->sin_family = AF_INET;
  memcpy(&in->sin_port, e->port, 2);
  memcpy(&in->sin_addr, e->addr, 4);
  return sizeof *in;
}

/* Waits until fd is ready for `events`, at most SETUP_TIMEOUT_MS. */
static bool ready(int fd, short events) {
  struct pollfd pfd = {fd, events, 0};
  int n;
  do
    n = poll(&pfd, 1, SETUP_TIMEOUT_MS);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    errno = ETIMEDOUT;
  return n > 0;
}

/* Connects within SETUP_TIMEOUT_MS; the socket is left non-blocking. */
static int connect_bounded(int fd, const struct sockaddr *sa, socklen_t len) {
  int err = 0;
  socklen_t n = sizeof err;
  if (set_nonblocking(fd) != 0)
    return -1;
  if (connect(fd, sa, len) == 0)
    return 0;
  if (errno != EINPROGRESS || !ready(fd, POLLOUT))
    return -1;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0)
    return -1;
  errno = err;
  return err == 0 ? 0 : -1;
}

/* Write or read of exactly n bytes on a non-blocking socket, each wait
 * bounded (the set-up greeting). */
static int write_all(int fd, const void *b, size_t n) {
  const char *c = b;
  while (n > 0) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (errno == EAGAIN && !ready(fd, POLLOUT))
        return -1;
      continue;
    }
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *b, size_t n) {
  char *c = b;
  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (errno == EAGAIN && !ready(fd, POLLIN))
        return -1;
      continue;
    }
    if (k == 0)
      errno = ECONNRESET;
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Connects the ring: two connections to the successor, announced by a
 * 4-byte tag (sender rank · 2 + kind), and the two from the predecessor,
 * accepted and sorted by their tags. Every wait is bounded, so a rank
 * whose peer failed fails too instead of waiting forever. */
static int connect_ring(struct probe *pr, const struct endpoint *eps) {
  int succ = (pr->rank + 1) % pr->p, pred = (pr->rank + pr->p - 1) % pr->p;
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(&eps[succ], &ss);
  int one = 1;
  for (int kind = 0; kind < 2; kind++) {
    uint32_t tag = htonl((uint32_t)pr->rank * 2 + (uint32_t)kind);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
      return fail_errno("socket");
    if (connect_bounded(fd, (struct sockaddr *)&ss, len) != 0) {
      close(fd);
      return fail_errno("connecting to the successor");
    }
    if (write_all(fd, &tag, sizeof tag) != 0) {
      close(fd);
      return fail_errno("greeting the successor");
    }
    if (kind == 0)
      pr->out_fd = fd;
    else
      pr->ping_fd = fd;
  }
  setsockopt(pr->ping_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (int n = 0; n < 2; n++) {
    uint32_t tag;
    int fd = ready(pr->listen_fd, POLLIN) ? accept(pr->listen_fd, NULL, NULL)
                                          : -1;
    if (fd < 0 || set_nonblocking(fd) != 0) {
      if (fd >= 0)
        close(fd);
      return fail_errno("accepting the predecessor");
    }
    if (read_all(fd, &tag, sizeof tag) != 0) {
      close(fd);
      return fail_errno("reading the predecessor's greeting");
    }
    tag = ntohl(tag);
    if (tag / 2 != (uint32_t)pred || (tag % 2 == 0 ? pr->in_fd : pr->echo_fd) >= 0) {
      close(fd);
      fprintf(stderr, PROG ": --link-limit: rank %d: a connection that is not "
                      "rank %d's (tag %u)\n",
              pr->rank, pred, (unsigned)tag);
      return 1;
    }
    if (tag % 2 == 0) {
      pr->in_fd = fd;
    } else {
      pr->echo_fd = fd;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }
  return 0;
}

/* One phase: stream `bytes` each way (0: none) while pinging; `pings` > 0
 * bounds the pings of an idle phase, else pings run while streaming.
 * Returns 0 with *elapsed the time to the last streamed byte, or 1. */
static int run_phase(struct probe *pr, uint64_t bytes, int pings,
                     double *elapsed) {
  uint64_t sent = 0, got = 0, seq = 0;
  uint8_t ping_out[8], pong_in[8], echo_in[8], echo_out[8];
  size_t ping_off = 8, pong_got = 0, echo_got = 0, echo_off = 8;
  /* awaiting: a ping of ours is on its way or its echo is */
  bool awaiting = false, fin_sent = false, fin_acked = false, pred_fin = false;
  double t0 = crbench_now(), t_ping = 0, stream_done = -1;
  pr->nsamples = 0;
  for (;;) {
    struct pollfd fds[4];
    bool streaming = sent < bytes || got < bytes;
    bool pinging = pings > 0 ? seq < (uint64_t)pings : streaming;
    int n;
    if (!streaming && stream_done < 0)
      stream_done = crbench_now() - t0;
    /* One ping at a time: the next leaves when the last one's echo is
     * back; the FIN says there will be no more. */
    if (!awaiting && !fin_sent) {
      uint64_t v = pinging ? seq++ : PING_FIN;
      fin_sent = !pinging;
      memcpy(ping_out, &v, 8);
      ping_off = 0;
      awaiting = true;
      t_ping = crbench_now();
    }
    if (!streaming && fin_acked && pred_fin && echo_off == 8)
      break;
    fds[0] = (struct pollfd){pr->out_fd, sent < bytes ? POLLOUT : 0, 0};
    fds[1] = (struct pollfd){pr->in_fd, got < bytes ? POLLIN : 0, 0};
    fds[2] = (struct pollfd){pr->ping_fd,
                             (short)((ping_off < 8 ? POLLOUT : 0) | POLLIN), 0};
    fds[3] = (struct pollfd){pr->echo_fd,
                             (short)((echo_off < 8 ? POLLOUT : 0) |
                                     (echo_off == 8 && !pred_fin ? POLLIN : 0)),
                             0};
    n = poll(fds, 4, 1000);
    if (n < 0 && errno != EINTR)
      return fail_errno("poll");
    if (crbench_now() - t0 > PROBE_TIMEOUT_S) {
      fprintf(stderr, PROG ": --link-limit: rank %d: no progress for %.0f s\n",
              pr->rank, PROBE_TIMEOUT_S);
      return 1;
    }
    if (n <= 0)
      continue;
    if (fds[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
      uint64_t left = bytes - sent;
      ssize_t k = write(pr->out_fd, pr->buf, left < CHUNK ? left : CHUNK);
      if (k < 0 && errno != EAGAIN && errno != EINTR)
        return fail_errno("streaming to the successor");
      if (k > 0)
        sent += (uint64_t)k;
    }
    if (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) {
      uint64_t left = bytes - got;
      ssize_t k = read(pr->in_fd, pr->buf, left < CHUNK ? left : CHUNK);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        errno = k == 0 ? ECONNRESET : errno;
        return fail_errno("reading the predecessor's stream");
      }
      if (k > 0)
        got += (uint64_t)k;
    }
    if ((fds[2].revents & (POLLOUT | POLLERR)) && ping_off < 8) {
      ssize_t k = write(pr->ping_fd, ping_out + ping_off, 8 - ping_off);
      if (k < 0 && errno != EAGAIN && errno != EINTR)
        return fail_errno("pinging the successor");
      if (k > 0)
        ping_off += (size_t)k;
    }
    if (fds[2].revents & (POLLIN | POLLHUP)) {
      ssize_t k = read(pr->ping_fd, pong_in + pong_got, 8 - pong_got);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        errno = k == 0 ? ECONNRESET : errno;
        return fail_errno("reading the successor's echo");
      }
      if (k > 0 && (pong_got += (size_t)k) == 8) {
        uint64_t v;
        memcpy(&v, pong_in, 8);
        pong_got = 0;
        awaiting = false;
        if (v == PING_FIN) {
          fin_acked = true;
        } else if (pr->nsamples < MAX_SAMPLES) {
          pr->samples[pr->nsamples++] = crbench_now() - t_ping;
        } else {
          pr->nsamples++; /* counted, not kept */
        }
      }
    }
    if ((fds[3].revents & (POLLIN | POLLHUP)) && echo_off == 8) {
      ssize_t k = read(pr->echo_fd, echo_in + echo_got, 8 - echo_got);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        errno = k == 0 ? ECONNRESET : errno;
        return fail_errno("reading the predecessor's ping");
      }
      if (k > 0 && (echo_got += (size_t)k) == 8) {
        uint64_t v;
        memcpy(echo_out, echo_in, 8);
        memcpy(&v, echo_in, 8);
        echo_got = 0;
        echo_off = 0;
        pred_fin = v == PING_FIN;
      }
    }
    if (echo_off < 8) {
      ssize_t k = write(pr->echo_fd, echo_out + echo_off, 8 - echo_off);
      if (k < 0 && errno != EAGAIN && errno != EINTR)
        return fail_errno("echoing the predecessor's ping");
      if (k > 0)
        echo_off += (size_t)k;
    }
  }
  *elapsed = stream_done;
  return 0;
}

/* The median over ranks of each rank's median round trip (and the
 * largest), from this rank's samples. 0 or 1 (the same on every rank). */
static int rtt_over_ranks(crnet_comm *comm, struct probe *pr, double *median,
                          double *max) {
  double mine = pr->nsamples > 0
                    ? crbench_median(pr->samples,
                                     pr->nsamples < MAX_SAMPLES ? pr->nsamples
                                                                : MAX_SAMPLES)
                    : 0;
  double *all = malloc(sizeof *all * (size_t)pr->p);
  int rc;
  if (all == NULL)
    return 1;
  rc = crnet_allgather(comm, &mine, all, 1, CRNET_DOUBLE);
  if (rc == 0) {
    double hi = 0;
    for (int r = 0; r < pr->p; r++)
      hi = all[r] > hi ? all[r] : hi;
    *max = hi;
    *median = crbench_median(all, (size_t)pr->p);
  }
  free(all);
  return rc != 0;
}

static void close_sockets(struct probe *pr) {
  int *fds[] = {&pr->listen_fd, &pr->out_fd, &pr->in_fd, &pr->ping_fd,
                &pr->echo_fd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    if (*fds[i] >= 0) {
      close(*fds[i]);
      *fds[i] = -1;
    }
}

/* Every rank's verdict: 0 only if all are 0. A rank that failed closes its
 * sockets first, so that its neighbours, perhaps still streaming or
 * waiting for an echo, see the connection go and fail at once rather than
 * at PROBE_TIMEOUT_S. */
static int agree(crnet_comm *comm, struct probe *pr, int mine) {
  int32_t v = mine != 0;
  if (mine != 0)
    close_sockets(pr);
  if (crnet_allreduce(comm, CRNET_IN_PLACE, &v, 1, CRNET_INT32, CRNET_MAX) != 0)
    return 1;
  return v != 0;
}

int crbench_link_limit(crnet_comm *comm, uint64_t bytes, int reps,
                       struct crbench_link *out) {
  struct probe pr = {.listen_fd = -1, .out_fd = -1, .in_fd = -1,
                     .ping_fd = -1, .echo_fd = -1};
  struct sockaddr_storage ss;
  socklen_t len;
  struct endpoint me, *eps = NULL;
  double *times = NULL, *loaded = NULL, idle_max;
  int rc = 0;

  memset(out, 0, sizeof *out);
  pr.rank = crnet_comm_rank(comm);
  pr.p = crnet_comm_size(comm);
  pr.buf = calloc(1, CHUNK);
  pr.samples = malloc(sizeof *pr.samples * MAX_SAMPLES);
  eps = calloc((size_t)pr.p, sizeof *eps);
  times = calloc((size_t)(reps > 0 ? reps : 1), sizeof *times);
  loaded = calloc((size_t)(reps > 0 ? reps : 1), sizeof *loaded);
  if (pr.buf == NULL || pr.samples == NULL || eps == NULL || times == NULL ||
      loaded == NULL) {
    fprintf(stderr, PROG ": --link-limit: out of memory\n");
    rc = 1;
  }
  /* Listen before anyone connects: the allgather of the ports is also the
   * barrier that says every listener is up. */
  if (rc == 0) {
    local_address(&ss, &len);
    pr.listen_fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (pr.listen_fd < 0 || bind(pr.listen_fd, (struct sockaddr *)&ss, len) != 0 ||
        listen(pr.listen_fd, 4) != 0)
      rc = fail_errno("listening");
    len = sizeof ss;
    if (rc == 0 && getsockname(pr.listen_fd, (struct sockaddr *)&ss, &len) != 0)
      rc = fail_errno("getsockname");
    if (rc == 0)
      endpoint_of(&ss, &me);
  }
  if (agree(comm, &pr, rc) != 0) {
    rc = 1;
    goto done;
  }
  if (crnet_allgather(comm, &me, eps, sizeof me, CRNET_BYTE) != 0) {
    rc = 1;
    goto done;
  }
  inet_ntop(eps[0].family == 6 ? AF_INET6 : AF_INET, eps[0].addr, out->addr,
            sizeof out->addr);
  rc = connect_ring(&pr, eps);
  if (agree(comm, &pr, rc) != 0) {
    rc = 1;
    goto done;
  }

  /* Idle round trips first, then the loaded repetitions. */
  rc = run_phase(&pr, 0, IDLE_PINGS, &times[0]);
  if (agree(comm, &pr, rc) != 0 ||
      rtt_over_ranks(comm, &pr, &out->rtt_idle_s, &idle_max) != 0) {
    rc = 1;
    goto done;
  }
  for (int k = 0; k < reps && rc == 0; k++) {
    double t = 0, hi = 0;
    rc = crnet_barrier(comm) != 0;
    if (rc == 0)
      rc = run_phase(&pr, bytes, 0, &t);
    if (agree(comm, &pr, rc) != 0) {
      rc = 1;
      break;
    }
    times[k] = t;
    rc = crnet_allreduce(comm, CRNET_IN_PLACE, &times[k], 1, CRNET_DOUBLE,
                         CRNET_MAX) != 0;
    if (rc == 0)
      rc = rtt_over_ranks(comm, &pr, &loaded[k], &hi);
    if (hi > out->rtt_loaded_max_s)
      out->rtt_loaded_max_s = hi;
  }
  if (rc == 0) {
    double t = crbench_median(times, (size_t)reps);
    out->bytes_per_rank = bytes;
    out->reps = reps;
    out->aggregate_bps = t > 0 ? (double)pr.p * (double)bytes / t : 0;
    out->share_bps = out->aggregate_bps / pr.p;
    out->rtt_loaded_s = crbench_median(loaded, (size_t)reps);
  }
done:
  close_sockets(&pr);
  free(pr.buf);
  free(pr.samples);
  free(eps);
  free(times);
  free(loaded);
  return rc;
}

void crbench_link_print(const struct crbench_link *l, int p, bool json) {
  if (json) {
    printf("{\"probe\": \"link-limit\", \"p\": %d, \"addr\": \"%s\", "
           "\"bytes_per_rank\": %llu, \"reps\": %d, \"aggregate_gbps\": %.9g, "
           "\"per_rank_gbps\": %.9g, \"rtt_idle_us\": %.9g, "
           "\"rtt_loaded_us\": %.9g, \"rtt_loaded_max_us\": %.9g}\n",
           p, l->addr, (unsigned long long)l->bytes_per_rank, l->reps,
           l->aggregate_bps / 1e9, l->share_bps / 1e9, l->rtt_idle_s * 1e6,
           l->rtt_loaded_s * 1e6, l->rtt_loaded_max_s * 1e6);
    return;
  }
  printf("# link limit: p = %d ranks each streaming %llu MiB to the next over "
         "TCP (%s), median of %d\n",
         p, (unsigned long long)(l->bytes_per_rank >> 20), l->addr, l->reps);
  printf("#   aggregate %.3f GB/s, per rank %.3f GB/s (aggregate / p)\n",
         l->aggregate_bps / 1e9, l->share_bps / 1e9);
  printf("#   round trip %.1f us idle, %.1f us under that load (median over "
         "ranks; slowest rank %.1f us)\n",
         l->rtt_idle_s * 1e6, l->rtt_loaded_s * 1e6,
         l->rtt_loaded_max_s * 1e6);
  fflush(stdout);
}
