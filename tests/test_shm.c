/* Unit tests of the shared-memory segment and byte rings
 * (src/runtime/shm.c).
 *
 * The segment: create and attach in one process, every refusal of attach
 * (sizes, seals, file kinds, each header field, the cookie), the seals
 * holding, and no trace in any file system. The rings: random gather
 * writes and reads checked byte for byte against a plain byte queue,
 * the full and empty edges, a peer that writes impossible positions (by
 * hand and at random), and a stream of 64 MiB between two processes that
 * follow the sleep protocol with eventfds and poll (and between two threads
 * over one mapping, where ThreadSanitizer sees both sides).
 *
 * Cases (CK_RUN_CASE): "segment", "rings", "hostile", "streams".
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "crnet.h"
#include "shm.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define COOKIE 0x5eed0c0ffee15badull
/* Every wait of the streaming tests gives up after this, failing the test
 * instead of hanging it. */
#define WAIT_MS 10000
#define MEMFD_LINK "/memfd:crnet-link"
#define ALL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* --- randomness: splitmix64, so every run sees the same sequence --- */

static uint64_t next_random(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t below(uint64_t *x, uint64_t n) { return next_random(x) % n; }

/* A size from 1 to max, log-uniform, so that small and large sizes both
 * come up often. */
static uint64_t random_size(uint64_t *x, uint64_t max) {
  unsigned bits = 0;
  while (bits < 63 && (1ull << (bits + 1)) <= max)
    bits++;
  uint64_t cap = 1ull << below(x, bits + 1);
  return 1 + below(x, cap < max ? cap : max);
}

/* Byte i of the test stream is byte i % 8 of a word that depends on i / 8
 * alone, so both ends of a stream compute any part of it independently. */
static uint64_t stream_word(uint64_t k) {
  uint64_t x = 0x243f6a8885a308d3ull + k * 0x9e3779b97f4a7c15ull;
  return next_random(&x);
}

/* The bytes of w at p, the least significant first: eight stores that the
 * compiler merges into one on a little-endian machine. */
static void put_word(uint8_t *p, uint64_t w) {
  p[0] = (uint8_t)w;
  p[1] = (uint8_t)(w >> 8);
  p[2] = (uint8_t)(w >> 16);
  p[3] = (uint8_t)(w >> 24);
  p[4] = (uint8_t)(w >> 32);
  p[5] = (uint8_t)(w >> 40);
  p[6] = (uint8_t)(w >> 48);
  p[7] = (uint8_t)(w >> 56);
}

static void stream_fill(uint8_t *buf, uint64_t off, uint64_t n) {
  uint64_t i = 0;
  while (i < n) {
    uint64_t at = off + i;
    uint64_t w = stream_word(at / 8);
    /* Whole words at once: both ends fill 64 MiB a stream, which byte by
     * byte was most of the streaming tests' time under valgrind. */
    if (at % 8 == 0 && n - i >= 8) {
      put_word(buf + i, w);
      i += 8;
      continue;
    }
    for (unsigned b = (unsigned)(at % 8); b < 8 && i < n; b++)
      buf[i++] = (uint8_t)(w >> (8 * b));
  }
}

/* Cuts buf[0..n) into 1 to 8 pieces at random points (empty pieces
 * included); returns how many. */
static uint32_t cut(uint64_t *x, const uint8_t *buf, uint64_t n,
                    crnet__ring_iov iov[8]) {
  uint32_t k = 1 + (uint32_t)below(x, 8);
  uint64_t at[9];
  at[0] = 0;
  at[k] = n;
  for (uint32_t i = 1; i < k; i++)
    at[i] = below(x, n + 1);
  /* Insertion sort of the inner cut points. */
  for (uint32_t i = 2; i < k; i++)
    for (uint32_t j = i; j > 1 && at[j - 1] > at[j]; j--) {
      uint64_t t = at[j];
      at[j] = at[j - 1];
      at[j - 1] = t;
    }
  for (uint32_t i = 0; i < k; i++) {
    iov[i].base = buf + at[i];
    iov[i].len = at[i + 1] - at[i];
  }
  return k;
}

/* --- helpers --- */

/* A segment of ring_bytes and a second side attached to a dup of its
 * descriptor: a's tx is b's rx and the other way round. */
static void make_pair(crnet__shm *a, crnet__shm *b, uint32_t ring_bytes) {
  ck_assert_int_eq(crnet__shm_create(a, ring_bytes, COOKIE), 0);
  int fd = dup(a->fd);
  ck_assert_int_ge(fd, 0);
  int rc = crnet__shm_attach(b, fd, COOKIE);
  ck_assert_msg(rc == 0, "attach: %d (%s)", rc, b->why);
}

/* The descriptors of this process whose target starts with `prefix`. */
static int count_fds(const char *prefix) {
  DIR *d = opendir("/proc/self/fd");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char target[256];
    ssize_t len = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
    if (len < 0)
      continue;
    target[len] = '\0';
    if (strncmp(target, prefix, strlen(prefix)) == 0)
      n++;
  }
  closedir(d);
  return n;
}

/* Lines of /proc/self/maps that map a segment. */
static int count_mappings(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  ck_assert_ptr_nonnull(f);
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, MEMFD_LINK) != NULL)
      n++;
  fclose(f);
  return n;
}

/* The names in dir, sorted, one a line, in a malloc'd string ("" when dir
 * does not exist). */
/* Only names that could be crnet's: other programs (an MPI job beside
 * the test suite) may come and go in /dev/shm meanwhile. */
static int maybe_crnet(const struct dirent *d) {
  return strstr(d->d_name, "crnet") != NULL;
}

static char *list_dir(const char *dir) {
  struct dirent **names;
  int n = scandir(dir, &names, maybe_crnet, alphasort);
  if (n < 0)
    return strdup("");
  size_t len = 1;
  for (int i = 0; i < n; i++)
    len += strlen(names[i]->d_name) + 1;
  char *out = malloc(len);
  ck_assert_ptr_nonnull(out);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    strcat(out, names[i]->d_name);
    strcat(out, "\n");
    free(names[i]);
  }
  free(names);
  return out;
}

static bool fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v) {
  /* A word at a time: the ring tests look at some 10^8 bytes with this,
   * which byte by byte took seconds under valgrind. */
  const uint64_t vv = 0x0101010101010101ull * v;
  size_t i = 0;
  for (; n - i >= 8; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w != vv)
      return false;
  }
  for (; i < n; i++)
    if (p[i] != v)
      return false;
  return true;
}

/* The segment's bytes, as a peer would have to lay them out. */
static uint8_t *segment_image(const crnet__shm *s) {
  uint8_t *img = malloc(s->map_bytes);
  ck_assert_ptr_nonnull(img);
  memcpy(img, s->base, s->map_bytes);
  return img;
}

/* A memfd of size bytes starting with as much of img[0..len) as fits,
 * with `seals` added (and sealing allowed at all only if allow_sealing). */
static int memfd_with(const uint8_t *img, size_t len, size_t size,
                      bool allow_sealing, int seals) {
  int fd = memfd_create("crnet-test",
                        MFD_CLOEXEC | (allow_sealing ? MFD_ALLOW_SEALING : 0));
  ck_assert_int_ge(fd, 0);
  if (len > size)
    len = size;
  ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
  ck_assert_int_eq(pwrite(fd, img, len, 0), (ssize_t)len);
  if (seals != 0)
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

/* Attaches to a dup of fd and expects refusal with rc; checks the failure
 * contract (a reason, nothing open, the descriptor closed). */
static void expect_refused(int fd, uint64_t cookie, int rc, const char *what) {
  int mine = dup(fd);
  ck_assert_int_ge(mine, 0);
  crnet__shm s;
  int got = crnet__shm_attach(&s, mine, cookie);
  ck_assert_msg(got == rc, "%s: attach returned %d, wanted %d (%s)", what, got,
                rc, s.why);
  ck_assert_msg(s.why[0] != '\0', "%s: no reason given", what);
  ck_assert_msg(s.base == NULL, "%s: left mapped", what);
  ck_assert_msg(!fd_is_open(mine), "%s: descriptor not closed", what);
  crnet__shm_close(&s);
}

static void expect_attaches(int fd, uint64_t cookie, const char *what) {
  int mine = dup(fd);
  ck_assert_int_ge(mine, 0);
  crnet__shm s;
  int got = crnet__shm_attach(&s, mine, cookie);
  ck_assert_msg(got == 0, "%s: attach returned %d (%s)", what, got, s.why);
  crnet__shm_close(&s);
}

/* --- segment --- */

START_TEST(test_create_attach) {
  static const uint32_t sizes[] = {4 * KIB, 64 * KIB, 1 * MIB, 64 * MIB};
  uint32_t r = sizes[_i];
  crnet__shm a, b;
  make_pair(&a, &b, r);
  ck_assert_uint_eq(a.map_bytes, CRNET__SHM_HEADER_BYTES + 2 * (size_t)r +
                                     CRNET__BOARD_BYTES);
  ck_assert_uint_eq(b.map_bytes, a.map_bytes);
  ck_assert_uint_eq(a.ring_bytes, r);
  ck_assert_uint_eq(b.ring_bytes, r);
  ck_assert_ptr_ne(a.base, b.base); /* two mappings of one memory */
  ck_assert_int_eq(fcntl(a.fd, F_GET_SEALS), ALL_SEALS);
  /* The header as shm.h lays it out, byte for byte. */
  const uint8_t *h = (const uint8_t *)a.base;
  ck_assert_int_eq(memcmp(h, "CRNS", 4), 0);
  uint32_t v, rb;
  uint64_t c;
  memcpy(&v, h + 4, 4);
  memcpy(&rb, h + 8, 4);
  memcpy(&c, h + 16, 8);
  ck_assert_uint_eq(v, CRNET__SHM_VERSION);
  ck_assert_uint_eq(rb, r);
  ck_assert_uint_eq(c, COOKIE);
  /* Each side writes its own ring and reads the other's. */
  ck_assert_ptr_eq(crnet__shm_tx(&a)->data, h + CRNET__SHM_HEADER_BYTES);
  ck_assert_ptr_eq(crnet__shm_rx(&a)->data, h + CRNET__SHM_HEADER_BYTES + r);
  ck_assert_ptr_eq(crnet__shm_tx(&b)->data,
                   (uint8_t *)b.base + CRNET__SHM_HEADER_BYTES + r);
  /* The board sides after the rings: the creator writes the first, and
   * each side's peer sees it as the other's (board.h). */
  ck_assert_ptr_eq(a.board_out, h + CRNET__SHM_HEADER_BYTES + 2 * (size_t)r);
  ck_assert_ptr_eq((uint8_t *)a.board_in,
                   (uint8_t *)a.board_out + sizeof(crnet__board_side));
  atomic_store(&a.board_out->slot[3].cell[1].seq, 77);
  atomic_store(&b.board_out->slot[3].marks[5].seq, 78);
  ck_assert_uint_eq(atomic_load(&b.board_in->slot[3].cell[1].seq), 77);
  ck_assert_uint_eq(atomic_load(&a.board_in->slot[3].marks[5].seq), 78);
  crnet__ring_iov one = {"hello", 5}, two = {"world!", 6};
  char buf[16] = {0};
  ck_assert_uint_eq(crnet__ring_write(crnet__shm_tx(&a), &one, 1, 0), 5);
  ck_assert_uint_eq(crnet__ring_write(crnet__shm_tx(&b), &two, 1, 0), 6);
  ck_assert_uint_eq(crnet__ring_readable(crnet__shm_rx(&b)), 5);
  ck_assert_uint_eq(crnet__ring_read(crnet__shm_rx(&b), buf, sizeof buf), 5);
  ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
  ck_assert_uint_eq(crnet__ring_read(crnet__shm_rx(&a), buf, sizeof buf), 6);
  ck_assert_int_eq(memcmp(buf, "world!", 6), 0);
  crnet__shm_close(&a);
  crnet__shm_close(&b);
  ck_assert_ptr_null(a.base);
  crnet__shm_close(&a); /* idempotent */
  /* A zeroed struct says fd 0, which close must leave alone. */
  int zero = fd_is_open(0) ? 0 : open("/dev/null", O_RDONLY);
  ck_assert_int_eq(zero, 0);
  crnet__shm z;
  memset(&z, 0, sizeof z);
  crnet__shm_close(&z);
  ck_assert(fd_is_open(0));
}
END_TEST

START_TEST(test_bad_ring_sizes) {
  static const uint32_t bad[] = {0,         1,        2048,      4095,
                                 4097,      6144,     3 * MIB,   64 * MIB + 1,
                                 128 * MIB, 1u << 31, UINT32_MAX};
  int fds = count_fds(MEMFD_LINK);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    crnet__shm s;
    int rc = crnet__shm_create(&s, bad[i], COOKIE);
    ck_assert_msg(rc == CRNET_EINVAL, "ring size %u: %d", bad[i], rc);
    ck_assert_ptr_null(s.base);
    ck_assert(s.why[0] != '\0');
    crnet__shm_close(&s);
  }
  ck_assert_int_eq(count_fds(MEMFD_LINK), fds);
}
END_TEST

START_TEST(test_attach_refusals) {
  crnet__shm a;
  ck_assert_int_eq(crnet__shm_create(&a, 8 * KIB, COOKIE), 0);
  uint8_t *img = segment_image(&a);

  /* The arguments. */
  crnet__shm s;
  ck_assert_int_eq(crnet__shm_attach(&s, -1, COOKIE), CRNET_EINVAL);
  ck_assert_ptr_null(s.base);
  expect_refused(a.fd, COOKIE ^ 1, CRNET_EAUTH, "wrong cookie");

  /* Things that are not a sealed memfd, each holding a valid image. */
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  expect_refused(p[0], COOKIE, CRNET_EIO, "a pipe");
  close(p[0]);
  close(p[1]);
  const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/test_shm.XXXXXX", tmp);
  int file = mkstemp(path);
  ck_assert_msg(file >= 0, "mkstemp %s: %s", path, strerror(errno));
  unlink(path);
  ck_assert_int_eq(pwrite(file, img, a.map_bytes, 0), (ssize_t)a.map_bytes);
  expect_refused(file, COOKIE, CRNET_EIO, "a regular file");
  close(file);
  int no_sealing = memfd_with(img, a.map_bytes, a.map_bytes, false, 0);
  expect_refused(no_sealing, COOKIE, CRNET_EIO,
                 "a memfd that cannot be sealed");
  close(no_sealing);
  /* A memfd with the image: refused until all three seals are on, then
   * accepted, so the seals were what was missing. */
  int m = memfd_with(img, a.map_bytes, a.map_bytes, true, 0);
  expect_refused(m, COOKIE, CRNET_EIO, "no seals");
  ck_assert_int_eq(fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  expect_refused(m, COOKIE, CRNET_EIO, "no seal against growing");
  ck_assert_int_eq(fcntl(m, F_ADD_SEALS, F_SEAL_GROW), 0);
  expect_refused(m, COOKIE, CRNET_EIO, "no seal against resealing");
  ck_assert_int_eq(fcntl(m, F_ADD_SEALS, F_SEAL_SEAL), 0);
  expect_attaches(m, COOKIE, "all seals");
  close(m);
  /* Sealed memfds of the wrong size. */
  int big = memfd_with(img, a.map_bytes, a.map_bytes + 4096, true, ALL_SEALS);
  expect_refused(big, COOKIE, CRNET_EIO, "a page too long");
  close(big);
  int small =
      memfd_with(img, a.map_bytes, CRNET__SHM_HEADER_BYTES, true, ALL_SEALS);
  expect_refused(small, COOKIE, CRNET_EIO, "the header alone");
  close(small);

  /* Each header field wrong in turn, through the creator's mapping, and
   * put right again. */
  uint8_t *h = (uint8_t *)a.base;
  struct {
    size_t off, len; /* a field of 4 or 8 bytes */
    uint64_t value;  /* in native byte order, like the header */
    int rc;
    const char *what;
  } fields[] = {
      {0, 4, 0, CRNET_EIO, "zero magic"},
      {0, 4, 0x534e5243u ^ 0x01000000u, CRNET_EIO, "magic"},
      {4, 4, CRNET__SHM_VERSION + 1, CRNET_EIO, "the next version"},
      {4, 4, CRNET__SHM_VERSION - 1, CRNET_EIO, "the version before"},
      {8, 4, 4 * KIB, CRNET_EIO, "ring size 4 KiB in an 8 KiB segment"},
      {8, 4, 8 * KIB + 1, CRNET_EIO, "ring size not a power of two"},
      {8, 4, 0, CRNET_EIO, "ring size 0"},
      {8, 4, 128 * MIB, CRNET_EIO, "ring size 128 MiB"},
      {16, 8, COOKIE + 1, CRNET_EAUTH, "cookie"},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    uint8_t save[8];
    uint32_t v32 = (uint32_t)fields[i].value;
    memcpy(save, h + fields[i].off, fields[i].len);
    if (fields[i].len == 4)
      memcpy(h + fields[i].off, &v32, 4);
    else
      memcpy(h + fields[i].off, &fields[i].value, 8);
    expect_refused(a.fd, COOKIE, fields[i].rc, fields[i].what);
    memcpy(h + fields[i].off, save, fields[i].len);
  }
  /* Garbage over the whole first cache line. */
  uint64_t x = 99;
  for (int i = 0; i < 64; i++)
    h[i] = (uint8_t)next_random(&x);
  expect_refused(a.fd, COOKIE, CRNET_EIO, "garbage header");
  memcpy(h, img, 64);
  expect_attaches(a.fd, COOKIE, "the header put right");
  free(img);
  crnet__shm_close(&a);
}
END_TEST

START_TEST(test_seals_hold) {
  crnet__shm a;
  ck_assert_int_eq(crnet__shm_create(&a, 4 * KIB, COOKIE), 0);
  off_t size = (off_t)a.map_bytes;
  errno = 0;
  ck_assert_int_eq(ftruncate(a.fd, size - 4096), -1);
  ck_assert_int_eq(errno, EPERM);
  errno = 0;
  ck_assert_int_eq(ftruncate(a.fd, 0), -1);
  ck_assert_int_eq(errno, EPERM);
  errno = 0;
  ck_assert_int_eq(ftruncate(a.fd, size + 4096), -1);
  ck_assert_int_eq(errno, EPERM);
  errno = 0;
  ck_assert_int_eq(fcntl(a.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  ck_assert_int_eq(errno, EPERM);
  struct stat st;
  ck_assert_int_eq(fstat(a.fd, &st), 0);
  ck_assert_int_eq(st.st_size, size);
  crnet__shm_close(&a);
}
END_TEST

START_TEST(test_no_file_left) {
  char *shm_before = list_dir("/dev/shm");
  int fds = count_fds(MEMFD_LINK), maps = count_mappings();
  crnet__shm a, b;
  make_pair(&a, &b, 16 * KIB);
  /* What the descriptor is: a memfd, which has no name anywhere. */
  char path[64], target[256];
  snprintf(path, sizeof path, "/proc/self/fd/%d", a.fd);
  ssize_t len = readlink(path, target, sizeof target - 1);
  ck_assert_int_gt(len, 0);
  target[len] = '\0';
  ck_assert_msg(strncmp(target, MEMFD_LINK, strlen(MEMFD_LINK)) == 0,
                "the segment is %s", target);
  ck_assert_int_eq(count_fds(MEMFD_LINK), fds + 2);
  ck_assert_int_eq(count_mappings(), maps + 2);
  char *shm_open_now = list_dir("/dev/shm");
  ck_assert_str_eq(shm_open_now, shm_before);
  int afd = a.fd, bfd = b.fd;
  crnet__shm_close(&a);
  crnet__shm_close(&b);
  ck_assert(!fd_is_open(afd));
  ck_assert(!fd_is_open(bfd));
  ck_assert_int_eq(count_fds(MEMFD_LINK), fds);
  ck_assert_int_eq(count_mappings(), maps);

  /* A creator killed with SIGKILL: nothing of it stays either. */
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    crnet__shm c;
    char ok = crnet__shm_create(&c, 4 * KIB, COOKIE) == 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1)
      _exit(2);
    pause();
    _exit(3);
  }
  close(ready[1]);
  char ok = 0;
  ck_assert_int_eq(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ck_assert_int_eq(ok, 'y');
  kill(pid, SIGKILL);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  char *shm_after = list_dir("/dev/shm");
  ck_assert_str_eq(shm_after, shm_before);
  free(shm_before);
  free(shm_open_now);
  free(shm_after);
}
END_TEST

/* --- rings in one process --- */

/* A plain byte queue: the reference the rings are held to. */
typedef struct queue {
  uint8_t *bytes;
  size_t start, len, cap;
} queue;

static void queue_push(queue *q, const uint8_t *p, size_t n) {
  if (q->start + q->len + n > q->cap) {
    memmove(q->bytes, q->bytes + q->start, q->len);
    q->start = 0;
  }
  /* EXPECT, not ck_assert: called once a ring operation (check_main.h). */
  EXPECT(q->start + q->len + n <= q->cap,
         "the reference queue overflows: %zu + %zu + %zu bytes of %zu",
         q->start, q->len, n, q->cap);
  memcpy(q->bytes + q->start + q->len, p, n);
  q->len += n;
}

START_TEST(test_ring_reference) {
  static const uint32_t sizes[] = {4 * KIB, 8 * KIB, 64 * KIB};
  uint32_t r = sizes[_i];
  crnet__shm a, b;
  make_pair(&a, &b, r);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  size_t max_op = 2 * (size_t)r + 17;
  uint8_t *src = malloc(max_op), *dst = malloc(max_op + 1);
  queue q = {malloc(4 * (size_t)r), 0, 0, 4 * (size_t)r};
  ck_assert(src != NULL && dst != NULL && q.bytes != NULL);
  uint64_t x = 1000 + _i, written = 0, read = 0;
  for (int op = 0; op < 20000 || written < 50 * (uint64_t)r; op++) {
    if (below(&x, 2) == 0) {
      uint64_t n = below(&x, 16) == 0 ? 0 : random_size(&x, max_op);
      /* Eight random bytes a draw, not one: drawing for every byte of
       * writes up to 2r + 17 bytes (most of them larger than the room)
       * was most of this test's time under valgrind. */
      for (uint64_t i = 0; i < n; i += 8) {
        uint8_t w[8];
        put_word(n - i >= 8 ? src + i : w, next_random(&x));
        if (n - i < 8)
          memcpy(src + i, w, n - i);
      }
      crnet__ring_iov iov[8];
      uint32_t niov = cut(&x, src, n, iov);
      /* skip anywhere in the list, now and then past its end */
      uint64_t skip = below(&x, 4) == 0 ? 0 : below(&x, n + 3);
      uint64_t left = skip < n ? n - skip : 0;
      uint64_t room = r - q.len;
      uint64_t want = left < room ? left : room;
      size_t got = crnet__ring_write(tx, iov, niov, skip);
      EXPECT(got == want, "op %d: wrote %zu of %llu (skip %llu, room %llu)", op,
             got, (unsigned long long)n, (unsigned long long)skip,
             (unsigned long long)room);
      queue_push(&q, src + skip, want);
      written += want;
    } else {
      size_t n = below(&x, 16) == 0 ? 0 : (size_t)random_size(&x, max_op);
      memset(dst, 0xEE, n + 1);
      size_t want = n < q.len ? n : q.len;
      size_t got = crnet__ring_read(rx, dst, n);
      EXPECT(got == want, "op %d: read %zu, wanted %zu", op, got, want);
      EXPECT(memcmp(dst, q.bytes + q.start, want) == 0,
             "op %d: bytes differ from the reference", op);
      EXPECT(all_bytes(dst + want, n + 1 - want, 0xEE),
             "op %d: bytes written past the count", op);
      q.start += want;
      q.len -= want;
      read += want;
    }
    /* Some 10^5 operations over the three sizes: plain checks, which
     * Check records only when they fail (EXPECT, check_main.h). */
    uint64_t readable = crnet__ring_readable(rx);
    uint64_t writable = crnet__ring_writable(tx);
    EXPECT(readable == q.len, "op %d: readable %llu, the reference holds %zu",
           op, (unsigned long long)readable, q.len);
    EXPECT(writable == r - q.len, "op %d: writable %llu, wanted %zu", op,
           (unsigned long long)writable, r - q.len);
    /* Asked again, as a pair: they see the same positions. */
    readable = crnet__ring_readable(rx);
    writable = crnet__ring_writable(tx);
    EXPECT(readable + writable == r,
           "op %d: readable %llu + writable %llu != %u", op,
           (unsigned long long)readable, (unsigned long long)writable, r);
    uint64_t head = atomic_load(&a.base->ring[0].head);
    uint64_t tail = atomic_load(&a.base->ring[0].tail);
    EXPECT(head == written, "op %d: head %llu, written %llu", op,
           (unsigned long long)head, (unsigned long long)written);
    EXPECT(tail == read, "op %d: tail %llu, read %llu", op,
           (unsigned long long)tail, (unsigned long long)read);
  }
  ck_assert_uint_ge(written, 50 * (uint64_t)r); /* wrapped many times */
  free(src);
  free(dst);
  free(q.bytes);
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

START_TEST(test_full_and_empty) {
  enum { R = 4 * KIB };
  crnet__shm a, b;
  make_pair(&a, &b, R);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  crnet__ring_ctl *ctl = &a.base->ring[0];
  static uint8_t src[2 * R], dst[2 * R];
  stream_fill(src, 0, sizeof src);

  /* Empty. */
  memset(dst, 0xEE, sizeof dst);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, sizeof dst), 0);
  ck_assert(all_bytes(dst, sizeof dst, 0xEE));
  ck_assert_uint_eq(crnet__ring_readable(rx), 0);
  ck_assert_uint_eq(crnet__ring_writable(tx), R);
  ck_assert_uint_eq(crnet__ring_read(rx, NULL, 0), 0);
  /* An empty ring lets the reader sleep; the first wake consumes the
   * announcement, the second finds none. */
  ck_assert(crnet__ring_reader_sleep(rx));
  ck_assert_uint_eq(atomic_load(&ctl->reader_sleeps), 1);
  ck_assert(crnet__ring_wake_reader(tx));
  ck_assert(!crnet__ring_wake_reader(tx));
  /* A writer with room does not sleep. */
  ck_assert(!crnet__ring_writer_sleep(tx));
  ck_assert_uint_eq(atomic_load(&ctl->writer_sleeps), 0);

  /* Nothing to write: no list, or skip at or past its end. */
  crnet__ring_iov all = {src, R};
  ck_assert_uint_eq(crnet__ring_write(tx, &all, 0, 0), 0);
  ck_assert_uint_eq(crnet__ring_write(tx, &all, 1, R), 0);
  ck_assert_uint_eq(crnet__ring_write(tx, &all, 1, R + 5), 0);
  ck_assert_uint_eq(atomic_load(&ctl->head), 0);

  /* Full: exactly R bytes fit, through empty pieces too. */
  crnet__ring_iov three[3] = {{src, 0}, {src, R}, {src + R, 1}};
  ck_assert_uint_eq(crnet__ring_write(tx, three, 3, 0), R);
  ck_assert_uint_eq(crnet__ring_write(tx, &all, 1, 0), 0);
  ck_assert_uint_eq(crnet__ring_writable(tx), 0);
  ck_assert_uint_eq(crnet__ring_readable(rx), R);
  ck_assert(crnet__ring_writer_sleep(tx));
  ck_assert(crnet__ring_wake_writer(rx));
  ck_assert(!crnet__ring_wake_writer(rx));
  /* A reader with data does not sleep, and withdraws its flag. */
  ck_assert(!crnet__ring_reader_sleep(rx));
  ck_assert_uint_eq(atomic_load(&ctl->reader_sleeps), 0);

  /* Across the end: read R - 1, then R - 1 more bytes fit and wrap. */
  ck_assert_uint_eq(crnet__ring_read(rx, dst, R - 1), R - 1);
  ck_assert_int_eq(memcmp(dst, src, R - 1), 0);
  ck_assert_uint_eq(crnet__ring_writable(tx), R - 1);
  crnet__ring_iov rest = {src + R, R};
  ck_assert_uint_eq(crnet__ring_write(tx, &rest, 1, 0), R - 1);
  ck_assert_uint_eq(crnet__ring_readable(rx), R);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, sizeof dst), R);
  ck_assert_uint_eq(dst[0], src[R - 1]);
  ck_assert_int_eq(memcmp(dst + 1, src + R, R - 1), 0);
  ck_assert_uint_eq(crnet__ring_readable(rx), 0);
  ck_assert_uint_eq(atomic_load(&ctl->head), 2 * R - 1);
  ck_assert_uint_eq(atomic_load(&ctl->tail), 2 * R - 1);
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

/* Room for a record, and the consumer's count of bytes it copied out of
 * the producer's memory (link_shm.c's single copy). */
START_TEST(test_room_and_remote_done) {
  enum { R = 4 * KIB };
  crnet__shm a, b;
  make_pair(&a, &b, R);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  crnet__ring_ctl *ctl = &a.base->ring[0];
  static uint8_t src[R], dst[R];
  stream_fill(src, 0, sizeof src);
  crnet__ring_iov most = {src, R - 10};
  ck_assert_uint_eq(crnet__ring_write(tx, &most, 1, 0), R - 10);
  /* 10 bytes of room: enough for 10, not for 16. */
  ck_assert(!crnet__ring_writer_sleep_room(tx, 10));
  ck_assert_uint_eq(atomic_load(&ctl->writer_sleeps), 0);
  ck_assert(crnet__ring_writer_sleep_room(tx, 16));
  ck_assert_uint_eq(atomic_load(&ctl->writer_sleeps), 1);
  /* The consumer frees 6 bytes and wakes it: now 16 fit. */
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 6), 6);
  ck_assert(crnet__ring_wake_writer(rx));
  ck_assert(!crnet__ring_writer_sleep_room(tx, 16));
  /* Withdrawn by the side that announced it. */
  ck_assert(crnet__ring_writer_sleep_room(tx, 17));
  crnet__ring_writer_awake(tx);
  ck_assert_uint_eq(atomic_load(&ctl->writer_sleeps), 0);
  ck_assert(!crnet__ring_wake_writer(rx));

  /* remote_done starts at 0; the producer waits for a mark above it. */
  ck_assert_uint_eq(crnet__ring_remote_done(tx), 0);
  ck_assert(crnet__ring_writer_sleep_remote(tx, 100));
  crnet__ring_remote_done_set(rx, 60);
  ck_assert_uint_eq(crnet__ring_remote_done(tx), 60);
  ck_assert(crnet__ring_wake_writer(rx));
  ck_assert(crnet__ring_writer_sleep_remote(tx, 100));
  crnet__ring_remote_done_set(rx, 100);
  ck_assert(!crnet__ring_writer_sleep_remote(tx, 100));
  ck_assert_uint_eq(atomic_load(&ctl->writer_sleeps), 0);
  ck_assert_uint_eq(atomic_load(&ctl->remote_done), 100);

  /* remote_progress: the consumer's count piece by piece, seen by the
   * producer in a word of its own, apart from remote_done, which it
   * neither moves nor lets a sleep end. */
  ck_assert_uint_eq(crnet__ring_remote_progress(tx), 0);
  crnet__ring_remote_progress_set(rx, 256 * KIB);
  ck_assert_uint_eq(crnet__ring_remote_progress(tx), 256 * KIB);
  ck_assert_uint_eq(atomic_load(&ctl->remote_progress), 256 * KIB);
  ck_assert_uint_eq(crnet__ring_remote_done(tx), 100);
  ck_assert(crnet__ring_writer_sleep_remote(tx, 200));
  crnet__ring_writer_awake(tx);
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

/* --- a hostile peer --- */

/* Values of head - tail a peer can make us see (writing head when it is the
 * producer, tail when it is the consumer) in a ring of 4 KiB, and whether
 * they are possible. */
static const struct {
  uint64_t delta;
  bool ok;
} deltas[] = {
    {0, true},
    {1, true},
    {4 * KIB, true}, /* exactly full */
    {4 * KIB + 1, false},
    {(uint64_t)-1, false}, /* the peer's position behind ours */
    {(uint64_t)0 - 4 * KIB, false},
    {1ull << 63, false},
    {UINT64_MAX / 2, false},
};

START_TEST(test_corrupt_head) {
  enum { R = 4 * KIB };
  crnet__shm a, b;
  make_pair(&a, &b, R);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  crnet__ring_ctl *peer = &a.base->ring[0]; /* the producer's mapping */
  uint8_t src[100], dst[2 * R];
  stream_fill(src, 0, sizeof src);
  crnet__ring_iov iov = {src, sizeof src};
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), 100);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 50), 50);
  uint64_t tail = 50;
  for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
    atomic_store(&peer->head, tail + deltas[i].delta);
    if (deltas[i].ok) {
      ck_assert_uint_eq(crnet__ring_readable(rx), deltas[i].delta);
      continue;
    }
    ck_assert_uint_eq(crnet__ring_readable(rx), 0);
    ck_assert(!rx->corrupt); /* readable only looks */
  }
  /* head = tail + R + 1: refused, nothing copied, tail not moved. */
  atomic_store(&peer->head, tail + R + 1);
  memset(dst, 0xEE, sizeof dst);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, sizeof dst), CRNET__RING_CORRUPT);
  ck_assert(rx->corrupt);
  ck_assert(all_bytes(dst, sizeof dst, 0xEE));
  ck_assert_uint_eq(atomic_load(&peer->tail), tail);
  ck_assert(!crnet__ring_reader_sleep(rx)); /* read again, see the error */
  /* Put right: the ring stays refused. */
  atomic_store(&peer->head, 100);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, sizeof dst), CRNET__RING_CORRUPT);
  ck_assert_uint_eq(crnet__ring_readable(rx), 0);
  ck_assert(!crnet__ring_reader_sleep(rx));
  ck_assert_uint_eq(dst[0], 0xEE);
  ck_assert_uint_eq(atomic_load(&peer->tail), tail);

  /* A fresh consumer handle on the same ring, for each impossible head
   * read first by reader_sleep: it marks the ring corrupt too. */
  for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
    if (deltas[i].ok)
      continue;
    crnet__ring c = *rx;
    c.corrupt = false;
    atomic_store(&peer->head, tail + deltas[i].delta);
    ck_assert(!crnet__ring_reader_sleep(&c));
    ck_assert(c.corrupt);
    ck_assert_uint_eq(crnet__ring_read(&c, dst, 1), CRNET__RING_CORRUPT);
  }
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

START_TEST(test_corrupt_tail) {
  enum { R = 4 * KIB };
  crnet__shm a, b;
  make_pair(&a, &b, R);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  crnet__ring_ctl *peer = &b.base->ring[0]; /* the consumer's mapping */
  uint8_t src[R], dst[100];
  stream_fill(src, 0, sizeof src);
  crnet__ring_iov iov = {src, 100};
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), 100);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 30), 30);
  uint64_t head = 100;
  for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
    atomic_store(&peer->tail, head - deltas[i].delta);
    ck_assert_uint_eq(crnet__ring_writable(tx),
                      deltas[i].ok ? R - deltas[i].delta : 0);
    ck_assert(!tx->corrupt);
  }
  /* A tail past the head: refused, nothing written, head not moved. */
  uint8_t *data = tx->data;
  uint8_t before[R];
  memcpy(before, data, R);
  atomic_store(&peer->tail, head + 1);
  iov.len = R;
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), CRNET__RING_CORRUPT);
  ck_assert(tx->corrupt);
  ck_assert_int_eq(memcmp(before, data, R), 0);
  ck_assert_uint_eq(atomic_load(&peer->head), head);
  ck_assert(!crnet__ring_writer_sleep(tx));
  /* Put right: still refused. */
  atomic_store(&peer->tail, 30);
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), CRNET__RING_CORRUPT);
  ck_assert_uint_eq(crnet__ring_writable(tx), 0);
  ck_assert(!crnet__ring_writer_sleep(tx));
  ck_assert_int_eq(memcmp(before, data, R), 0);
  ck_assert_uint_eq(atomic_load(&peer->head), head);

  for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
    if (deltas[i].ok)
      continue;
    crnet__ring p = *tx;
    p.corrupt = false;
    atomic_store(&peer->tail, head - deltas[i].delta);
    ck_assert(!crnet__ring_writer_sleep(&p));
    ck_assert(p.corrupt);
    ck_assert_uint_eq(crnet__ring_write(&p, &iov, 1, 0), CRNET__RING_CORRUPT);
  }
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

/* The producer looks at the tail only when the room it saw last is not
 * enough (shm.h, seen): a write within that room goes ahead without
 * looking, even past a tail the consumer has since made impossible (the
 * room was free when seen, and an honest consumer never takes it back); a
 * write that needs more looks, and refuses. */
START_TEST(test_room_seen) {
  enum { R = 4 * KIB };
  crnet__shm a, b;
  make_pair(&a, &b, R);
  crnet__ring *tx = crnet__shm_tx(&a), *rx = crnet__shm_rx(&b);
  crnet__ring_ctl *peer = &b.base->ring[0]; /* the consumer's mapping */
  uint8_t src[R], dst[R];
  stream_fill(src, 0, sizeof src);
  crnet__ring_iov iov = {src, 1000};
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), 1000);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 1000), 1000);
  ck_assert(crnet__ring_has_room(tx, R)); /* looks: all of it is free */
  atomic_store(&peer->tail, 1000 + R); /* past any head: impossible */
  iov.len = 100;
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), 100);
  ck_assert(!tx->corrupt);
  ck_assert(crnet__ring_has_room(tx, R - 100));
  iov.len = R;
  ck_assert_uint_eq(crnet__ring_write(tx, &iov, 1, 0), CRNET__RING_CORRUPT);
  ck_assert(tx->corrupt);
  ck_assert(!crnet__ring_has_room(tx, 1));
  /* The consumer side alike: bytes seen are read without looking. */
  atomic_store(&peer->tail, 1000);
  ck_assert_uint_eq(crnet__ring_readable(rx), 100);
  atomic_store(&a.base->ring[0].head, 1000 + 2 * R); /* too far ahead */
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 60), 60);
  ck_assert(!rx->corrupt);
  ck_assert_uint_eq(crnet__ring_read(rx, dst, 60), CRNET__RING_CORRUPT);
  ck_assert(rx->corrupt);
  crnet__shm_close(&a);
  crnet__shm_close(&b);
}
END_TEST

/* A peer that writes random positions, against handles at random positions
 * of their own: every call either refuses or moves exactly what the
 * positions allow, and nothing outside ring 0's data changes (ring 1's data
 * and control and the header are checked afterwards; a copy out of bounds
 * would have to land there or fault). */
START_TEST(test_hostile_fuzz) {
  enum { R = 4 * KIB };
  crnet__shm a;
  ck_assert_int_eq(crnet__shm_create(&a, R, COOKIE), 0);
  uint8_t *base = (uint8_t *)a.base;
  uint8_t *data0 = base + CRNET__SHM_HEADER_BYTES, *data1 = data0 + R;
  crnet__ring_ctl *ctl = &a.base->ring[0];
  uint64_t x = 4242;
  for (size_t i = 0; i < R; i++)
    data1[i] = (uint8_t)next_random(&x);
  uint8_t header[CRNET__SHM_HEADER_BYTES], ring1[R];
  memcpy(header, base, sizeof header);
  memcpy(ring1, data1, R);
  static uint8_t buf[3 * R + 1];
  for (int it = 0; it < 20000; it++) {
    crnet__ring h;
    crnet__ring_init(&h, ctl, data0, R);
    h.pos = below(&x, 4) == 0 ? next_random(&x) : below(&x, 8 * R);
    /* A peer position last seen that promises nothing, to either side: the
     * call must look at the one the peer wrote. */
    h.seen = h.pos - R;
    uint64_t d;
    switch (below(&x, 4)) {
    case 0:
      d = next_random(&x);
      break;
    case 1:
      d = deltas[below(&x, sizeof deltas / sizeof deltas[0])].delta;
      break;
    default:
      d = below(&x, 2 * R + 2);
      break;
    }
    size_t len = (size_t)below(&x, sizeof buf);
    if (below(&x, 2) == 0) {
      atomic_store(&ctl->head, h.pos + d);
      uint64_t start = h.pos;
      memset(buf, 0xEE, sizeof buf);
      size_t got = crnet__ring_read(&h, buf, len);
      /* 20000 iterations: plain checks, which Check records only when
       * they fail (EXPECT, check_main.h). */
      if (d > R) {
        EXPECT(got == CRNET__RING_CORRUPT,
               "it %d: read %zu at pos %llu, head %llu bytes ahead: "
               "%zu, wanted CRNET__RING_CORRUPT",
               it, len, (unsigned long long)start, (unsigned long long)d, got);
        EXPECT(h.pos == start, "it %d: refused read moved pos %llu to %llu", it,
               (unsigned long long)start, (unsigned long long)h.pos);
      } else {
        size_t want = d < len ? (size_t)d : len;
        EXPECT(got == want,
               "it %d: read %zu at pos %llu, head %llu bytes ahead: %zu, "
               "wanted %zu",
               it, len, (unsigned long long)start, (unsigned long long)d, got,
               want);
        EXPECT(h.pos == start + got, "it %d: read %zu moved pos %llu to %llu",
               it, got, (unsigned long long)start, (unsigned long long)h.pos);
        uint64_t tail = atomic_load(&ctl->tail);
        EXPECT(got == 0 || tail == h.pos,
               "it %d: tail %llu after a read to %llu", it,
               (unsigned long long)tail, (unsigned long long)h.pos);
        EXPECT(all_bytes(buf + got, sizeof buf - got, 0xEE),
               "it %d: read %zu wrote past the count", it, got);
      }
    } else {
      atomic_store(&ctl->tail, h.pos - d);
      uint64_t start = h.pos;
      uint64_t skip = below(&x, 3) == 0 ? below(&x, len + 2) : 0;
      crnet__ring_iov iov = {buf, len};
      size_t got = crnet__ring_write(&h, &iov, 1, skip);
      if (d > R) {
        EXPECT(got == CRNET__RING_CORRUPT,
               "it %d: write %zu skip %llu at pos %llu, tail %llu bytes "
               "behind: %zu, wanted CRNET__RING_CORRUPT",
               it, len, (unsigned long long)skip, (unsigned long long)start,
               (unsigned long long)d, got);
        EXPECT(h.pos == start, "it %d: refused write moved pos %llu to %llu",
               it, (unsigned long long)start, (unsigned long long)h.pos);
      } else {
        uint64_t left = skip < len ? len - skip : 0;
        uint64_t want = left < R - d ? left : R - d;
        EXPECT(got == want,
               "it %d: write %zu skip %llu at pos %llu, tail %llu bytes "
               "behind: %zu, wanted %llu",
               it, len, (unsigned long long)skip, (unsigned long long)start,
               (unsigned long long)d, got, (unsigned long long)want);
        EXPECT(h.pos == start + got, "it %d: write %zu moved pos %llu to %llu",
               it, got, (unsigned long long)start, (unsigned long long)h.pos);
        uint64_t head = atomic_load(&ctl->head);
        EXPECT(got == 0 || head == h.pos,
               "it %d: head %llu after a write to %llu", it,
               (unsigned long long)head, (unsigned long long)h.pos);
      }
    }
  }
  ck_assert_int_eq(memcmp(data1, ring1, R), 0);
  ck_assert_int_eq(memcmp(base, header, offsetof(crnet__shm_header, ring)), 0);
  ck_assert_int_eq(memcmp(base + 64 + sizeof(crnet__ring_ctl),
                          header + 64 + sizeof(crnet__ring_ctl),
                          sizeof header - 64 - sizeof(crnet__ring_ctl)),
                   0);
  crnet__shm_close(&a);
}
END_TEST

/* --- streams: two sides that sleep --- */

typedef struct stream {
  crnet__ring *ring;
  int efd_data;  /* the producer signals data here */
  int efd_space; /* the consumer signals space here */
  uint64_t total;
  uint64_t max_op; /* largest write or read */
  uint64_t seed;   /* of the sizes and cuts; the bytes are the stream's */
  uint64_t sleeps; /* times this side blocked */
  char err[256];   /* "" or what went wrong */
  /* Between threads: set by the consumer when it fails, so that the
   * producer stops at once instead of waiting out WAIT_MS (between
   * processes the parent kills the child instead). */
  atomic_bool *stop;
} stream;

static int signal_efd(int efd) {
  uint64_t one = 1;
  return write(efd, &one, sizeof one) == (ssize_t)sizeof one ? 0 : -1;
}

/* Blocks until efd is signalled (at most WAIT_MS), then clears it. */
static int wait_efd(int efd) {
  struct pollfd p = {.fd = efd, .events = POLLIN};
  int n;
  do
    n = poll(&p, 1, WAIT_MS);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1;
  uint64_t v;
  if (read(efd, &v, sizeof v) < 0 && errno != EAGAIN)
    return -1;
  return 0;
}

/* Writes the stream's bytes [0, total) in writes of random sizes, each cut
 * into a gather list and finished with skip after a partial write. */
static int produce(stream *st) {
  uint8_t *buf = malloc(st->max_op);
  uint64_t x = st->seed, sent = 0;
  if (buf == NULL) {
    snprintf(st->err, sizeof st->err, "out of memory");
    return -1;
  }
  while (sent < st->total && st->err[0] == '\0') {
    uint64_t n = random_size(&x, st->max_op);
    if (n > st->total - sent)
      n = st->total - sent;
    stream_fill(buf, sent, n);
    crnet__ring_iov iov[8];
    uint32_t niov = cut(&x, buf, n, iov);
    uint64_t done = 0;
    while (done < n) {
      size_t w = crnet__ring_write(st->ring, iov, niov, done);
      if (w == CRNET__RING_CORRUPT) {
        snprintf(st->err, sizeof st->err, "producer: ring corrupt at byte %llu",
                 (unsigned long long)(sent + done));
        break;
      }
      if (w > 0) {
        done += w;
        if (crnet__ring_wake_reader(st->ring) &&
            signal_efd(st->efd_data) != 0) {
          snprintf(st->err, sizeof st->err, "producer: eventfd: %s",
                   strerror(errno));
          break;
        }
        continue;
      }
      if (!crnet__ring_writer_sleep(st->ring))
        continue;
      st->sleeps++;
      if (st->stop != NULL && atomic_load(st->stop)) {
        snprintf(st->err, sizeof st->err, "producer: the consumer failed");
        break;
      }
      if (wait_efd(st->efd_space) != 0) {
        snprintf(st->err, sizeof st->err,
                 "producer: no space for %d ms at byte %llu", WAIT_MS,
                 (unsigned long long)(sent + done));
        break;
      }
    }
    sent += done;
  }
  free(buf);
  return st->err[0] == '\0' ? 0 : -1;
}

/* Reads the stream in reads of random sizes and checks every byte. */
static int consume(stream *st) {
  uint8_t *buf = malloc(st->max_op), *want = malloc(st->max_op);
  uint64_t x = st->seed, got = 0;
  if (buf == NULL || want == NULL) {
    snprintf(st->err, sizeof st->err, "out of memory");
    goto out;
  }
  while (got < st->total) {
    size_t n = crnet__ring_read(st->ring, buf, random_size(&x, st->max_op));
    if (n == CRNET__RING_CORRUPT) {
      snprintf(st->err, sizeof st->err, "consumer: ring corrupt at byte %llu",
               (unsigned long long)got);
      goto out;
    }
    if (n > st->total - got) {
      snprintf(st->err, sizeof st->err, "consumer: %zu bytes past the end", n);
      goto out;
    }
    if (n > 0) {
      stream_fill(want, got, n);
      if (memcmp(buf, want, n) != 0) {
        size_t k = 0;
        while (buf[k] == want[k])
          k++;
        snprintf(st->err, sizeof st->err,
                 "consumer: byte %llu is 0x%02x, wanted 0x%02x",
                 (unsigned long long)(got + k), buf[k], want[k]);
        goto out;
      }
      got += n;
      if (crnet__ring_wake_writer(st->ring) && signal_efd(st->efd_space) != 0) {
        snprintf(st->err, sizeof st->err, "consumer: eventfd: %s",
                 strerror(errno));
        goto out;
      }
      continue;
    }
    if (!crnet__ring_reader_sleep(st->ring))
      continue;
    st->sleeps++;
    if (wait_efd(st->efd_data) != 0) {
      snprintf(st->err, sizeof st->err,
               "consumer: no data for %d ms at byte %llu", WAIT_MS,
               (unsigned long long)got);
      goto out;
    }
  }
  if (crnet__ring_readable(st->ring) != 0)
    snprintf(st->err, sizeof st->err, "consumer: bytes after the end");
out:
  if (st->err[0] != '\0' && st->stop != NULL) {
    atomic_store(st->stop, true);
    signal_efd(st->efd_space);
  }
  free(buf);
  free(want);
  return st->err[0] == '\0' ? 0 : -1;
}

static void *produce_thread(void *arg) {
  produce(arg);
  return NULL;
}

static void make_eventfds(int *efd_data, int *efd_space) {
  *efd_data = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  *efd_space = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ck_assert(*efd_data >= 0 && *efd_space >= 0);
}

/* Two threads over one mapping, so that ThreadSanitizer sees the producer's
 * and the consumer's accesses to the same addresses: the ring's ordering
 * must make every copy race-free. */
/* _i 1: with asymmetric fences (shm.h), where the kernel has them: both
 * handles store their positions with release only, and each fences with
 * membarrier before it sleeps. A lost wake-up shows as a side that waits
 * WAIT_MS in vain. */
START_TEST(test_stream_threads) {
  enum { R = 4 * KIB };
  crnet__shm a;
  ck_assert_int_eq(crnet__shm_create(&a, R, COOKIE), 0);
  crnet__ring p, c;
  crnet__ring_init(&p, &a.base->ring[0],
                   (uint8_t *)a.base + CRNET__SHM_HEADER_BYTES, R);
  if (_i == 1 && crnet__shm_fences_enable()) {
    atomic_store(&a.base->fences,
                 CRNET__SHM_FENCE_CREATOR | CRNET__SHM_FENCE_ATTACHER);
    p.fence_self = true;
    p.fences = &a.base->fences;
    p.peer_fence = CRNET__SHM_FENCE_ATTACHER;
  }
  c = p;
  int efd_data, efd_space;
  make_eventfds(&efd_data, &efd_space);
  atomic_bool stop = false;
  stream prod = {.ring = &p,
                 .efd_data = efd_data,
                 .efd_space = efd_space,
                 .total = 16 * MIB,
                 .max_op = 3 * R,
                 .seed = 7,
                 .stop = &stop};
  stream cons = prod;
  cons.ring = &c;
  cons.seed = 8;
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, produce_thread, &prod), 0);
  consume(&cons);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_msg(cons.err[0] == '\0', "%s", cons.err);
  ck_assert_msg(prod.err[0] == '\0', "%s", prod.err);
  close(efd_data);
  close(efd_space);
  crnet__shm_close(&a);
}
END_TEST

/* Sends fd over a Unix socket (SCM_RIGHTS) with one byte of data. */
static int send_fd(int sock, int fd) {
  char byte = 'F';
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The descriptor send_fd sent, waiting at most WAIT_MS; -1 if none came. */
static int recv_fd(int sock) {
  struct pollfd p = {.fd = sock, .events = POLLIN};
  if (poll(&p, 1, WAIT_MS) != 1)
    return -1;
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
    return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)))
    return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

/* The child: attaches to the descriptor the parent sends and streams the
 * bytes through its ring (ring 1), then reports how often it slept. Exits
 * 0, or non-zero with a message on stderr. */
_Noreturn static void stream_child(int sock, int efd_data, int efd_space,
                                   uint32_t r, bool fences) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* A child of fork is not registered, whatever its parent was. */
  if (fences)
    (void)crnet__shm_fences_enable();
  int fd = recv_fd(sock);
  if (fd < 0) {
    fprintf(stderr, "child: no descriptor from the parent\n");
    _exit(2);
  }
  crnet__shm s;
  int rc = crnet__shm_attach(&s, fd, COOKIE);
  if (rc != 0) {
    fprintf(stderr, "child: attach: %d (%s)\n", rc, s.why);
    _exit(3);
  }
  stream st = {.ring = crnet__shm_tx(&s),
               .efd_data = efd_data,
               .efd_space = efd_space,
               .total = 64 * MIB,
               .max_op = 3 * (uint64_t)r,
               .seed = 11};
  if (produce(&st) != 0) {
    fprintf(stderr, "child: %s\n", st.err);
    _exit(4);
  }
  if (write(sock, &st.sleeps, sizeof st.sleeps) != sizeof st.sleeps)
    _exit(5);
  crnet__shm_close(&s);
  _exit(0);
}

/* _i 2 and 3: with asymmetric fences where the kernel has them (both
 * processes register; the segment's header says so). */
START_TEST(test_stream_processes) {
  static const uint32_t sizes[] = {4 * KIB, 1 * MIB};
  uint32_t r = sizes[_i % 2];
  bool fences = _i >= 2;
  int sv[2], efd_data, efd_space;
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  make_eventfds(&efd_data, &efd_space);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    stream_child(sv[1], efd_data, efd_space, r, fences);
  }
  close(sv[1]);
  /* The child gets the segment only through the socket: it is created
   * after the fork. */
  crnet__shm s;
  bool light = fences && crnet__shm_fences_enable();
  ck_assert_int_eq(crnet__shm_create(&s, r, COOKIE), 0);
  ck_assert_int_eq(send_fd(sv[0], s.fd), 0);
  stream st = {.ring = crnet__shm_rx(&s),
               .efd_data = efd_data,
               .efd_space = efd_space,
               .total = 64 * MIB,
               .max_op = 3 * (uint64_t)r,
               .seed = 12};
  consume(&st);
  uint64_t child_sleeps = 0;
  if (st.err[0] == '\0') {
    struct pollfd p = {.fd = sv[0], .events = POLLIN};
    if (poll(&p, 1, WAIT_MS) != 1 ||
        read(sv[0], &child_sleeps, sizeof child_sleeps) != sizeof child_sleeps)
      snprintf(st.err, sizeof st.err, "no report from the child");
  }
  if (st.err[0] != '\0')
    kill(pid, SIGKILL);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(st.err[0] == '\0', "%s", st.err);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "child status 0x%x", status);
  /* The protocol was exercised: somebody blocked at least once (the
   * consumer starts before the child has even attached). */
  ck_assert_uint_gt(st.sleeps + child_sleeps, 0);
  /* Both sides said they fence: this one stored without. */
  ck_assert(crnet__shm_light(&s) == light);
  close(sv[0]);
  close(efd_data);
  close(efd_space);
  crnet__shm_close(&s);
}
END_TEST

static Suite *shm_suite(void) {
  Suite *s = suite_create("shm");
  TCase *seg = tcase_create("segment");
  tcase_set_timeout(seg, 30);
  tcase_add_loop_test(seg, test_create_attach, 0, 4);
  tcase_add_test(seg, test_bad_ring_sizes);
  tcase_add_test(seg, test_attach_refusals);
  tcase_add_test(seg, test_seals_hold);
  tcase_add_test(seg, test_no_file_left);
  suite_add_tcase(s, seg);
  TCase *rings = tcase_create("rings");
  tcase_set_timeout(rings, 60);
  tcase_add_loop_test(rings, test_ring_reference, 0, 3);
  tcase_add_test(rings, test_full_and_empty);
  tcase_add_test(rings, test_room_and_remote_done);
  suite_add_tcase(s, rings);
  TCase *hostile = tcase_create("hostile");
  tcase_set_timeout(hostile, 60);
  tcase_add_test(hostile, test_corrupt_head);
  tcase_add_test(hostile, test_corrupt_tail);
  tcase_add_test(hostile, test_room_seen);
  tcase_add_test(hostile, test_hostile_fuzz);
  suite_add_tcase(s, hostile);
  TCase *streams = tcase_create("streams");
  tcase_set_timeout(streams, 100);
  tcase_add_loop_test(streams, test_stream_threads, 0, 2);
  tcase_add_loop_test(streams, test_stream_processes, 0, 4);
  suite_add_tcase(s, streams);
  return s;
}

int main(void) { return check_run(shm_suite()); }
