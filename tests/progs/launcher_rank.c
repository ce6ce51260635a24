/* launcher_rank: a rank for the crlaunch tests, one behaviour per mode.
 *
 *   launcher_rank hello              "hello from R of N"
 *   launcher_rank env VAR...         "VAR=value" or "VAR unset", one a line
 *   launcher_rank lines COUNT        COUNT checkable lines on stdout and on
 *                                    stderr, written in torn pieces, then a
 *                                    last stdout line without a newline
 *   launcher_rank exit R CODE        rank R exits CODE, the others sleep 30 s
 *   launcher_rank raise R SIG        rank R raises SIG, the others sleep 30 s
 *   launcher_rank sleep SEC          every rank sleeps
 *   launcher_rank stubborn           ignore SIGINT/SIGTERM/SIGHUP, sleep 30 s
 *   launcher_rank stdin              "rank R read N bytes"
 *   launcher_rank key                check the job key's handling (below)
 *   launcher_rank yes                print lines until killed
 *   launcher_rank cpus               "R cpus=A,B,..." the CPUs it may run on
 *   launcher_rank silent             rank 0 connects to CRNET_RENDEZVOUS (an
 *                                    IPv4 address), says nothing and prints
 *                                    "0 dropped after S s" once the
 *                                    rendezvous closes it (at most 60 s);
 *                                    the others exit at once
 *
 * With CRLT_DIR set, every rank first creates CRLT_DIR/pid.R.PID, so the test
 * can check that no rank outlives crlaunch; in stubborn mode the file is made
 * only once the signals are ignored.
 *
 * A line of `lines` mode is "R S I L payload": rank, stream (o/e), index,
 * payload length, then L letters that follow from (R, S, I), so the reader
 * can check every line is whole and unmixed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int rank = -1;

static void write_pid_file(void) {
  const char *dir = getenv("CRLT_DIR");
  if (dir == NULL)
    return;
  char path[4096];
  snprintf(path, sizeof path, "%s/pid.%d.%d", dir, rank, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0)
    close(fd);
}

static void sleep_s(unsigned s) {
  /* sleep() returns early on a caught signal; keep going until the time is
   * up or a signal kills us. */
  while (s > 0)
    s = sleep(s);
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      exit(90);
    }
    p += w;
    n -= (size_t)w;
  }
}

static size_t make_line(char *buf, int r, char stream, int i) {
  int len = (i * 7919 + r * 31 + (stream == 'e') * 13) % 300;
  size_t n = (size_t)sprintf(buf, "%d %c %d %d ", r, stream, i, len);
  for (int j = 0; j < len; j++)
    buf[n++] = (char)('a' + (r * 7 + i + j + (stream == 'e')) % 26);
  buf[n++] = '\n';
  return n;
}

static int mode_lines(int count) {
  char line[512];
  /* stdout through a small odd-sized stdio buffer, so lines straddle the
   * writes; stderr line by line but each in two writes. */
  static char obuf[1000];
  setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
  for (int i = 0; i < count; i++) {
    size_t n = make_line(line, rank, 'o', i);
    fwrite(line, 1, n, stdout);
    n = make_line(line, rank, 'e', i);
    write_all(2, line, n / 2);
    write_all(2, line + n / 2, n - n / 2);
  }
  printf("%d o last", rank);
  fflush(stdout);
  return 0;
}

static int contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0)
      return 1;
  return 0;
}

/* 1 if the file's bytes contain needle, 0 if not, -1 if unreadable. */
static int file_contains(const char *path, const char *needle) {
  static char buf[1 << 20];
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf && (r = read(fd, buf + n, sizeof buf - n)) > 0)
    n += (size_t)r;
  close(fd);
  return contains(buf, n, needle);
}

/* Reads the key file and reports what the tests check, without ever
 * printing the key: it goes to CRLT_DIR/key.R for the test to look for. */
static int mode_key(void) {
  const char *path = getenv("CRNET_JOB_KEY_FILE");
  const char *dir = getenv("CRLT_DIR");
  if (path == NULL || dir == NULL) {
    printf("%d no CRNET_JOB_KEY_FILE or CRLT_DIR\n", rank);
    return 1;
  }
  printf("%d keyfile %s\n", rank, path);
  printf("%d CRNET_JOB_KEY %s\n", rank,
         getenv("CRNET_JOB_KEY") != NULL ? "set" : "unset");
  struct stat st;
  if (stat(path, &st) != 0) {
    printf("%d keyfile missing\n", rank);
    return 1;
  }
  printf("%d keyfile mode %o\n", rank, (unsigned)(st.st_mode & 07777));
  char dirpath[4096];
  snprintf(dirpath, sizeof dirpath, "%s", path);
  char *slash = strrchr(dirpath, '/');
  if (slash != NULL) {
    *slash = '\0';
    if (stat(dirpath, &st) == 0)
      printf("%d keydir mode %o\n", rank, (unsigned)(st.st_mode & 07777));
  }

  char hex[128] = "";
  FILE *f = fopen(path, "r");
  if (f == NULL || fscanf(f, "%127s", hex) != 1) {
    printf("%d keyfile unreadable\n", rank);
    return 1;
  }
  fclose(f);
  printf("%d key length %zu\n", rank, strlen(hex));

  char out[4096];
  snprintf(out, sizeof out, "%s/key.%d", dir, rank);
  f = fopen(out, "w");
  if (f == NULL)
    return 1;
  fprintf(f, "%s\n", hex);
  fclose(f);

  char proc[64];
  printf("%d key in own cmdline: %d\n", rank,
         file_contains("/proc/self/cmdline", hex));
  printf("%d key in own environ: %d\n", rank,
         file_contains("/proc/self/environ", hex));
  snprintf(proc, sizeof proc, "/proc/%d/cmdline", (int)getppid());
  printf("%d key in parent cmdline: %d\n", rank, file_contains(proc, hex));
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The stranger a rendezvous must drop at its handshake deadline. */
static int mode_silent(void) {
  const char *at = getenv("CRNET_RENDEZVOUS");
  const char *colon = at != NULL ? strrchr(at, ':') : NULL;
  struct sockaddr_in a = {.sin_family = AF_INET};
  char host[64];
  if (rank != 0)
    return 0;
  if (colon == NULL || (size_t)(colon - at) >= sizeof host) {
    fprintf(stderr, "launcher_rank: CRNET_RENDEZVOUS '%s'\n",
            at != NULL ? at : "(unset)");
    return 1;
  }
  memcpy(host, at, (size_t)(colon - at));
  host[colon - at] = '\0';
  a.sin_port = htons((uint16_t)atoi(colon + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    fprintf(stderr, "launcher_rank: cannot connect to %s: %s\n", at,
            strerror(errno));
    return 1;
  }
  double t0 = now_s();
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[256];
    int left = (int)((t0 + 60 - now_s()) * 1000);
    if (left <= 0 || poll(&p, 1, left) <= 0) {
      fprintf(stderr, "launcher_rank: still connected after 60 s\n");
      return 1;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      break;
  }
  printf("0 dropped after %.3f s\n", now_s() - t0);
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  const char *r = getenv("CRNET_RANK");
  const char *s = getenv("CRNET_SIZE");
  rank = r != NULL ? atoi(r) : -1;
  int size = s != NULL ? atoi(s) : -1;
  const char *mode = argc > 1 ? argv[1] : "hello";

  if (strcmp(mode, "stubborn") == 0) {
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    write_pid_file();
    sleep_s(30);
    return 0;
  }
  write_pid_file();

  if (strcmp(mode, "hello") == 0) {
    printf("hello from %d of %d\n", rank, size);
    return 0;
  }
  if (strcmp(mode, "env") == 0) {
    for (int i = 2; i < argc; i++) {
      const char *v = getenv(argv[i]);
      if (v != NULL)
        printf("%d %s=%s\n", rank, argv[i], v);
      else
        printf("%d %s unset\n", rank, argv[i]);
    }
    return 0;
  }
  if (strcmp(mode, "cpus") == 0) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
      return 1;
    printf("%d cpus=", rank);
    for (int cpu = 0, n = 0; cpu < CPU_SETSIZE; cpu++)
      if (CPU_ISSET(cpu, &set))
        printf("%s%d", n++ > 0 ? "," : "", cpu);
    printf("\n");
    return 0;
  }
  if (strcmp(mode, "lines") == 0 && argc > 2)
    return mode_lines(atoi(argv[2]));
  if ((strcmp(mode, "exit") == 0 || strcmp(mode, "raise") == 0) && argc > 3) {
    if (rank == atoi(argv[2])) {
      if (mode[0] == 'e')
        return atoi(argv[3]);
      raise(atoi(argv[3]));
      return 99; /* the signal did not kill us */
    }
    sleep_s(30);
    return 0;
  }
  if (strcmp(mode, "sleep") == 0 && argc > 2) {
    sleep_s((unsigned)atoi(argv[2]));
    return 0;
  }
  if (strcmp(mode, "stdin") == 0) {
    char buf[4096];
    size_t total = 0;
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0)
      total += (size_t)n;
    printf("rank %d read %zu bytes\n", rank, total);
    return 0;
  }
  if (strcmp(mode, "key") == 0)
    return mode_key();
  if (strcmp(mode, "silent") == 0)
    return mode_silent();
  if (strcmp(mode, "yes") == 0) {
    for (long i = 0;; i++)
      printf("rank %d line %ld\n", rank, i);
  }
  fprintf(stderr, "launcher_rank: unknown mode %s\n", mode);
  return 64;
}
