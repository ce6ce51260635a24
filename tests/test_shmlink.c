/* A same-host link's move to shared memory (link_shm.h), between two
 * processes that each run one authenticated link on a loop of their own:
 * the test process is the creator (rank 0), a forked child the attacher
 * (rank 1). The rings are the smallest there are (4 KiB), so that every
 * larger frame wraps around them many times and the writer waits for room.
 * The 1 MiB DATA frames cross by address, in one copy (link_shm.c, "Single
 * copy"), or with SHMLINK_TWO_COPIES=1 through the rings.
 *
 *   frames_cross_the_switch   200 control frames and a 1 MiB DATA frame
 *                             each way, sent from before the offer until
 *                             after both sides switched, arrive whole and
 *                             in order; both sides end on shared memory.
 *   strangers_get_nothing     While the creator's set-up socket listens
 *                             (the attacher holds back), a process that is
 *                             not the attacher connects: it is hung up on
 *                             with no descriptor; run as root, a process
 *                             of another user cannot open the segment
 *                             through /proc either. Then the pair
 *                             switches and works.
 *   declined_pair_stays_on_tcp The attacher refuses: both sides stay on
 *                             TCP, frames flow, nothing of the set-up is
 *                             left open.
 *   dead_peer_is_seen         On shared memory, the attacher is killed
 *                             while the creator waits for room in a full
 *                             ring and for a frame: the creator's link
 *                             fails within 2 s, saying the rank closed its
 *                             connection; nothing of crnet's is in
 *                             /dev/shm, before or after.
 *
 * Every wait is bounded (run_until); a child that outlives its deadline is
 * killed and the test fails. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "check_main.h"
#include "crnet.h"
#include "frame.h"
#include "handshake.h"
#include "link.h"

#define RING 4096u
#define NCTL 200
#define DATA_BYTES (1u << 20)
#define DEADLINE_MS 10000

static uint8_t key[CRNET__KEY_BYTES];

/* The flags of offer and welcome: required or not, and with
 * SHMLINK_TWO_COPIES=1 in the environment every byte through the rings
 * (else a piece of 256 KiB or more crosses in one copy, by address). */
static unsigned link_flags(bool required) {
  const char *v = getenv("SHMLINK_TWO_COPIES");
  return (required ? CRNET__SHM_REQUIRED : 0) |
         (v != NULL && strcmp(v, "1") == 0 ? CRNET__SHM_TWO_COPIES : 0);
}

/* --- one side ------------------------------------------------------------ */

typedef struct side {
  uv_loop_t loop;
  uv_tcp_t server;
  crnet__link link;
  bool ready;
  int ready_status;
  bool failed;
  int fail_status;
  char fail_why[192];
  uint64_t failed_at_ms;
  int ctl_got;       /* control frames in order so far */
  bool ctl_disorder; /* one came out of order or corrupt */
  crnet__recv_req recv;
  crnet__iov recv_iov;
  uint8_t *in, *out;
  crnet__send_req send;
  bool closed;
  bool has_server;
} side;

static void on_ready(crnet__link *l, int status) {
  side *s = l->owner;
  s->ready = true;
  s->ready_status = status;
}

static void on_control(crnet__link *l, const crnet__frame_header *h,
                       const uint8_t *payload) {
  side *s = l->owner;
  if (h->kind != CRNET__FRAME_CREDIT || h->length != 8 ||
      crnet__get_le64(payload) != (uint64_t)s->ctl_got)
    s->ctl_disorder = true;
  s->ctl_got++;
}

static void on_error(crnet__link *l, int status, const char *why) {
  side *s = l->owner;
  s->failed = true;
  s->fail_status = status;
  s->failed_at_ms = uv_now(&s->loop);
  snprintf(s->fail_why, sizeof s->fail_why, "%s", why);
}

static void on_closed(crnet__link *l) {
  side *s = l->owner;
  s->closed = true;
}

static const crnet__link_callbacks callbacks = {
    .on_ready = on_ready,
    .on_control = on_control,
    .on_error = on_error,
    .on_closed = on_closed,
};

static void on_tick(uv_timer_t *t) { (void)t; }

/* Runs the loop until done(s) or ms pass; whether done. */
static bool run_until(side *s, bool (*done)(side *), uint64_t ms) {
  uv_timer_t tick;
  uint64_t end = uv_now(&s->loop) + ms;
  bool ok;
  uv_timer_init(&s->loop, &tick);
  uv_timer_start(&tick, on_tick, 10, 10);
  while (!(ok = done(s)) && uv_now(&s->loop) < end)
    uv_run(&s->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(&s->loop, UV_RUN_NOWAIT);
  return ok;
}

static bool is_ready(side *s) { return s->ready || s->failed; }
static bool on_shm(side *s) {
  return crnet__link_on_shm(&s->link) || s->failed;
}
static bool exchanged(side *s) {
  return s->failed ||
         (s->ctl_got == NCTL && s->recv.done && s->send.done &&
          crnet__link_on_shm(&s->link));
}
static bool exchanged_tcp(side *s) {
  return s->failed || (s->ctl_got == NCTL && s->recv.done && s->send.done);
}
static bool has_failed(side *s) { return s->failed; }
static bool is_closed(side *s) { return s->closed; }

static void fill(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 131u + seed);
}

static crnet__frame_header data_header(void) {
  crnet__frame_header h = {.kind = CRNET__FRAME_DATA, .seq = 1, .round = 0,
                           .length = DATA_BYTES};
  return h;
}

/* Posts the receive of the DATA frame and prepares the one to send. */
static void prepare_data(side *s, unsigned seed_out) {
  crnet__frame_header h = data_header();
  s->in = calloc(1, DATA_BYTES);
  s->out = malloc(DATA_BYTES);
  ck_assert(s->in != NULL && s->out != NULL);
  fill(s->out, DATA_BYTES, seed_out);
  s->recv_iov.base = s->in;
  s->recv_iov.len = DATA_BYTES;
  memset(&s->recv, 0, sizeof s->recv);
  s->recv.iov = &s->recv_iov;
  s->recv.niov = 1;
  s->recv.len = DATA_BYTES;
  s->recv.ctx = 0;
  s->recv.coll = h.coll;
  s->recv.seq = h.seq;
  s->recv.round = h.round;
  s->recv.sig = h.sig;
  crnet__link_post_recv(&s->link, &s->recv);
}

static void send_data(side *s) {
  crnet__frame_header h = data_header();
  crnet__iov v = {s->out, DATA_BYTES};
  crnet__link_send(&s->link, &s->send, &h, &v, 1);
}

/* Control frames numbered from *next, n of them. */
static void send_ctl(side *s, int *next, int n) {
  uint8_t b[8];
  for (int i = 0; i < n; i++) {
    crnet__put_le64(b, (uint64_t)(*next)++);
    ck_assert_int_eq(
        crnet__link_send_control(&s->link, CRNET__FRAME_CREDIT, b, 8), 0);
  }
}

static void close_side(side *s) {
  crnet__link_close(&s->link);
  if (s->has_server)
    uv_close((uv_handle_t *)&s->server, NULL);
  run_until(s, is_closed, 2000);
  while (uv_run(&s->loop, UV_RUN_NOWAIT) != 0)
    ;
  uv_loop_close(&s->loop);
  free(s->in);
  free(s->out);
}

/* --- the creator: this process ------------------------------------------ */

static side *accepting; /* the side whose server takes the connection */

static void on_connection(uv_stream_t *server, int status) {
  ck_assert_int_eq(status, 0);
  ck_assert_int_eq(crnet__link_accept(&accepting->link, server->loop, server,
                                      &callbacks, accepting, key, 0, 2, 5000),
                   0);
}

static int listen_side(side *s) {
  struct sockaddr_in a;
  struct sockaddr_storage got;
  int len = sizeof got;
  memset(s, 0, sizeof *s);
  ck_assert_int_eq(uv_loop_init(&s->loop), 0);
  uv_tcp_init(&s->loop, &s->server);
  s->has_server = true;
  uv_ip4_addr("127.0.0.1", 0, &a);
  ck_assert_int_eq(uv_tcp_bind(&s->server, (struct sockaddr *)&a, 0), 0);
  accepting = s;
  ck_assert_int_eq(uv_listen((uv_stream_t *)&s->server, 4, on_connection), 0);
  uv_tcp_getsockname(&s->server, (struct sockaddr *)&got, &len);
  return ntohs(((struct sockaddr_in *)&got)->sin_port);
}

/* --- the attacher: a child ---------------------------------------------- */

enum child_mode {
  CHILD_WELCOME,      /* welcome at once, exchange, exit 0 if all arrived */
  CHILD_WAIT_WELCOME, /* welcome when the pipe says so, then exchange */
  CHILD_REFUSE,       /* refuse, exchange on TCP */
  CHILD_PARK,         /* welcome, then read nothing more until killed */
};

static int child_main(int port, enum child_mode mode, int gate) {
  side s;
  struct sockaddr_in a;
  int next = 0;
  memset(&s, 0, sizeof s);
  if (uv_loop_init(&s.loop) != 0)
    return 10;
  uv_ip4_addr("127.0.0.1", port, &a);
  if (crnet__link_connect(&s.link, &s.loop, (struct sockaddr *)&a, &callbacks,
                          &s, key, CRNET__HS_MESH, 1, 0, 2, 5000) != 0)
    return 11;
  if (!run_until(&s, is_ready, DEADLINE_MS) || s.ready_status != 0)
    return 12;
  if (mode == CHILD_PARK) {
    crnet__link_shm_welcome(&s.link, (uint32_t)getppid(), link_flags(true));
    if (!run_until(&s, on_shm, DEADLINE_MS) || s.failed)
      return 13;
    /* Tell the parent, then read nothing: the DATA frame that comes
     * parks, and the ring fills behind it. */
    if (write(gate, "s", 1) != 1)
      return 14;
    for (;;)
      uv_run(&s.loop, UV_RUN_ONCE);
  }
  prepare_data(&s, 2);
  send_ctl(&s, &next, NCTL / 2);
  if (mode == CHILD_WAIT_WELCOME) {
    char c;
    /* The parent's loop must keep running meanwhile: it is, in its own
     * process; this side's frames wait in the socket. */
    if (read(gate, &c, 1) != 1)
      return 15;
  }
  if (mode == CHILD_REFUSE)
    crnet__link_shm_refuse(&s.link);
  else
    crnet__link_shm_welcome(&s.link, (uint32_t)getppid(), link_flags(true));
  send_data(&s);
  send_ctl(&s, &next, NCTL / 2);
  if (mode == CHILD_REFUSE) {
    uint64_t end = uv_now(&s.loop) + DEADLINE_MS;
    while (!(s.ctl_got == NCTL && s.recv.done && s.send.done) && !s.failed &&
           uv_now(&s.loop) < end)
      uv_run(&s.loop, UV_RUN_ONCE);
    if (crnet__link_on_shm(&s.link))
      return 16;
  } else if (!run_until(&s, exchanged, DEADLINE_MS)) {
    return 17;
  }
  if (s.failed || s.ctl_disorder || s.ctl_got != NCTL || s.recv.status != 0 ||
      s.send.status != 0)
    return 18;
  for (size_t i = 0; i < DATA_BYTES; i++)
    if (s.in[i] != (uint8_t)(i * 131u + 1))
      return 19;
  /* Both ends leave together: the parent checks, then says goodbye. */
  if (write(gate, "d", 1) != 1)
    return 20;
  {
    char c;
    if (read(gate, &c, 1) != 1)
      return 21;
  }
  close_side(&s);
  return 0;
}

typedef struct pair {
  side a;
  pid_t child;
  int gate; /* our end of the socketpair with the child */
} pair;

static void start_pair(pair *p, enum child_mode mode) {
  int sv[2];
  int port = listen_side(&p->a);
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  p->child = fork();
  ck_assert_int_ge(p->child, 0);
  if (p->child == 0) {
    close(sv[0]);
    alarm(30);
    _exit(child_main(port, mode, sv[1]));
  }
  close(sv[1]);
  p->gate = sv[0];
  ck_assert_msg(run_until(&p->a, is_ready, DEADLINE_MS) &&
                    p->a.ready_status == 0,
                "the handshake did not complete");
}

/* The child's exit status, waiting at most 10 s (then killed). */
static int child_status(pid_t pid) {
  int st;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(pid, &st, WNOHANG) == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

static bool gate_readable(int fd) {
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 1;
}

static int gate_fd;
static bool child_done(side *s) { return gate_readable(gate_fd) || s->failed; }

/* The exchange of frames_cross_the_switch from the creator's side. */
static void creator_exchange(pair *p) {
  int next = 0;
  prepare_data(&p->a, 1);
  send_ctl(&p->a, &next, NCTL / 2);
  send_data(&p->a);
  send_ctl(&p->a, &next, NCTL / 2);
  ck_assert_msg(run_until(&p->a, exchanged, DEADLINE_MS),
                "frames or the switch did not complete (failed: %s)",
                p->a.failed ? p->a.fail_why : "no");
  ck_assert(!p->a.ctl_disorder);
  ck_assert_int_eq(p->a.ctl_got, NCTL);
  ck_assert_int_eq(p->a.recv.status, 0);
  /* One assertion for the whole frame: Check records every assertion that
   * passes (a write to its pipe), and a million of them took most of this
   * test's time, minutes under valgrind. */
  size_t wrong = 0;
  while (wrong < DATA_BYTES && p->a.in[wrong] == (uint8_t)(wrong * 131u + 2))
    wrong++;
  ck_assert_msg(wrong == DATA_BYTES, "byte %zu wrong", wrong);
  gate_fd = p->gate;
  ck_assert_msg(run_until(&p->a, child_done, DEADLINE_MS),
                "the child did not finish its side");
  ck_assert_int_eq(write(p->gate, "e", 1), 1);
}

START_TEST(frames_cross_the_switch) {
  pair p;
  start_pair(&p, CHILD_WELCOME);
  crnet__link_shm_offer(&p.a.link, (uint32_t)p.child, RING, link_flags(true));
  creator_exchange(&p);
  ck_assert(crnet__link_on_shm(&p.a.link));
  ck_assert_int_eq(child_status(p.child), 0);
  close_side(&p.a);
  close(p.gate);
}
END_TEST

/* --- strangers ----------------------------------------------------------- */

/* The inode of a listening abstract socket named "@crnet-shm-..." that this
 * process holds, or 0. */
static unsigned long own_listener(char *name, size_t n) {
  FILE *f = fopen("/proc/net/unix", "r");
  char line[512];
  unsigned long found = 0;
  ck_assert(f != NULL);
  while (found == 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned long inode, flags;
    char path[256] = "";
    if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %255s", &flags, &inode,
               path) < 2)
      continue;
    if (strncmp(path, "@crnet-shm-", 11) != 0 || (flags & 0x10000) == 0)
      continue; /* __SO_ACCEPTCON: listening */
    /* Ours? */
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char want[64], link[64], fdpath[300];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    while (d != NULL && (e = readdir(d)) != NULL) {
      ssize_t k;
      snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%s", e->d_name);
      k = readlink(fdpath, link, sizeof link - 1);
      if (k <= 0)
        continue;
      link[k] = '\0';
      if (strcmp(link, want) == 0) {
        found = inode;
        snprintf(name, n, "%s", path + 1);
      }
    }
    if (d != NULL)
      closedir(d);
  }
  fclose(f);
  return found;
}

/* A stranger: connects to the abstract socket `name` and reads what comes.
 * Exit 0 if it was hung up on without a descriptor, 1 if it got one, 2 if
 * it could not connect, 3 if nothing happened within 5 s. */
static int stranger_main(const char *name) {
  struct sockaddr_un sa;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(8 * sizeof(int))];
  } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                     .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  struct timeval tv = {5, 0};
  ssize_t n;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path + 1, name, strlen(name));
  if (connect(fd, (struct sockaddr *)&sa,
              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                          strlen(name))) != 0)
    return 2;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  n = recvmsg(fd, &m, 0);
  if (n < 0)
    return 3;
  return CMSG_FIRSTHDR(&m) != NULL ? 1 : 0;
}

/* A process of another user: may it open the creator's segment through
 * /proc/<pid>/fd? Exit 0 if every attempt failed, 1 if one succeeded, 4 if
 * no segment was found to try. */
static int other_user_main(pid_t creator) {
  char dir[64], path[400], link[128];
  int found = 0, opened = 0;
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)creator);
  d = opendir(dir);
  /* Listing needs no more than reading the targets, which we do as root
   * first: the check is that the other user cannot open them. */
  if (d == NULL)
    return 4;
  int fds[64], nfd = 0;
  while ((e = readdir(d)) != NULL && nfd < 64) {
    ssize_t k;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    k = readlink(path, link, sizeof link - 1);
    if (k <= 0)
      continue;
    link[k] = '\0';
    if (strstr(link, "memfd:crnet-link") != NULL)
      fds[nfd++] = atoi(e->d_name);
  }
  closedir(d);
  if (setgid(65534) != 0 || setuid(65534) != 0)
    return 5;
  for (int i = 0; i < nfd; i++) {
    found++;
    snprintf(path, sizeof path, "%s/%d", dir, fds[i]);
    int fd = open(path, O_RDWR);
    if (fd >= 0) {
      opened++;
      close(fd);
    }
  }
  if (found == 0)
    return 4;
  return opened == 0 ? 0 : 1;
}

static pid_t helper;
static bool helper_done(side *s) {
  int st;
  (void)s;
  if (waitpid(helper, &st, WNOHANG) != helper)
    return false;
  helper = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
  return true;
}

/* Forks fn(arg) and runs our loop until it exits: its exit status. */
static int run_helper(side *s, int (*fn)(const void *), const void *arg) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(10);
    _exit(fn(arg));
  }
  helper = pid;
  if (!run_until(s, helper_done, DEADLINE_MS)) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_abort_msg("the helper process did not finish");
  }
  return (int)helper;
}

static int stranger_fn(const void *name) { return stranger_main(name); }
static int other_user_fn(const void *pid) {
  return other_user_main(*(const pid_t *)pid);
}

START_TEST(strangers_get_nothing) {
  pair p;
  char name[300];
  pid_t self = getpid();
  start_pair(&p, CHILD_WAIT_WELCOME);
  crnet__link_shm_offer(&p.a.link, (uint32_t)p.child, RING, link_flags(true));
  ck_assert_msg(own_listener(name, sizeof name) != 0,
                "no set-up socket listens after the offer");
  ck_assert_int_eq(run_helper(&p.a, stranger_fn, name), 0);
  ck_assert_int_eq(run_helper(&p.a, stranger_fn, name), 0);
  if (geteuid() == 0)
    ck_assert_int_eq(run_helper(&p.a, other_user_fn, &self), 0);
  else
    fprintf(stderr, "strangers_get_nothing: not root, so no process of "
                    "another user to try /proc with (the pid check ran)\n");
  ck_assert(!p.a.failed);
  /* The attacher goes ahead: the pair still switches. */
  ck_assert_int_eq(write(p.gate, "w", 1), 1);
  creator_exchange(&p);
  ck_assert(crnet__link_on_shm(&p.a.link));
  ck_assert_msg(own_listener(name, sizeof name) == 0,
                "the set-up socket still listens after the switch");
  ck_assert_int_eq(child_status(p.child), 0);
  close_side(&p.a);
  close(p.gate);
}
END_TEST

/* --- declined, dead ------------------------------------------------------ */

static bool declined(side *s) {
  char name[300];
  return s->failed || own_listener(name, sizeof name) == 0;
}

START_TEST(declined_pair_stays_on_tcp) {
  pair p;
  int next = 0;
  start_pair(&p, CHILD_REFUSE);
  crnet__link_shm_offer(&p.a.link, (uint32_t)p.child, RING, link_flags(false));
  prepare_data(&p.a, 1);
  send_ctl(&p.a, &next, NCTL / 2);
  send_data(&p.a);
  send_ctl(&p.a, &next, NCTL / 2);
  ck_assert_msg(run_until(&p.a, exchanged_tcp, DEADLINE_MS),
                "the frames did not arrive (failed: %s)",
                p.a.failed ? p.a.fail_why : "no");
  gate_fd = p.gate;
  ck_assert_msg(run_until(&p.a, child_done, DEADLINE_MS),
                "the child did not finish its side");
  ck_assert(!p.a.failed);
  ck_assert_int_eq(p.a.ctl_got, NCTL);
  ck_assert(!p.a.ctl_disorder);
  ck_assert(p.a.recv.done && p.a.recv.status == 0);
  ck_assert(run_until(&p.a, declined, DEADLINE_MS));
  ck_assert(!crnet__link_on_shm(&p.a.link));
  ck_assert_int_eq(write(p.gate, "e", 1), 1);
  ck_assert_int_eq(child_status(p.child), 0);
  close_side(&p.a);
  close(p.gate);
}
END_TEST

/* Files of crnet's in /dev/shm (there should never be any: segments are
 * memfds, with no name anywhere). */
static int dev_shm_files(void) {
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  int n = 0;
  if (d == NULL)
    return 0;
  while ((e = readdir(d)) != NULL)
    n += strstr(e->d_name, "crnet") != NULL;
  closedir(d);
  return n;
}

START_TEST(dead_peer_is_seen) {
  pair p;
  char c;
  uint64_t killed_at;
  start_pair(&p, CHILD_PARK);
  ck_assert_int_eq(dev_shm_files(), 0);
  crnet__link_shm_offer(&p.a.link, (uint32_t)p.child, RING, link_flags(true));
  ck_assert(run_until(&p.a, on_shm, DEADLINE_MS) && !p.a.failed);
  gate_fd = p.gate;
  ck_assert(run_until(&p.a, child_done, DEADLINE_MS));
  ck_assert_int_eq(read(p.gate, &c, 1), 1);
  /* A frame far larger than the ring: the writer waits for room. And a
   * receive that nothing will fill. */
  prepare_data(&p.a, 1);
  send_data(&p.a);
  run_until(&p.a, has_failed, 200);
  ck_assert(!p.a.send.done && !p.a.recv.done && !p.a.failed);
  killed_at = uv_now(&p.a.loop);
  kill(p.child, SIGKILL);
  ck_assert_msg(run_until(&p.a, has_failed, 2000),
                "the creator did not see the peer's death within 2 s");
  ck_assert_int_eq(p.a.fail_status, CRNET_EPEER);
  ck_assert_msg(strstr(p.a.fail_why, "closed its connection") != NULL, "%s",
                p.a.fail_why);
  ck_assert_uint_le(p.a.failed_at_ms - killed_at, 2000);
  run_until(&p.a, has_failed, 50);
  ck_assert(p.a.recv.done && p.a.recv.status != 0);
  child_status(p.child);
  close_side(&p.a);
  ck_assert(p.a.send.done && p.a.send.status != 0);
  ck_assert_int_eq(dev_shm_files(), 0);
  close(p.gate);
}
END_TEST

static Suite *shmlink_suite(void) {
  Suite *s = suite_create("shmlink");
  TCase *tc = tcase_create("shmlink");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, frames_cross_the_switch);
  tcase_add_test(tc, strangers_get_nothing);
  tcase_add_test(tc, declined_pair_stays_on_tcp);
  tcase_add_test(tc, dead_peer_is_seen);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr;
  int failed;
  if (sodium_init() < 0)
    return 1;
  randombytes_buf(key, sizeof key);
  signal(SIGPIPE, SIG_IGN);
  sr = srunner_create(shmlink_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
