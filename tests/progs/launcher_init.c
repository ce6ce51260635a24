/* launcher_init: a rank that really uses crnet, for the crlaunch tests.
 *
 *   launcher_init ok            init, one allreduce, destroy; "rank R ok"
 *   launcher_init skip R        rank R never calls init (sleeps 30 s)
 *   launcher_init die R CODE [MS]
 *                               after init rank R exits CODE at once; the
 *                               others wait MS milliseconds (default 0), then
 *                               their allreduce must fail, and they exit 1
 *   launcher_init abort R CODE [OTHERS]
 *                               after init rank R calls crnet_comm_abort(CODE),
 *                               waits 300 ms and exits 0; the others' allreduce
 *                               must fail with CRNET_EABORTED and the code, and
 *                               they exit OTHERS (default 1) at once, so
 *                               before rank R. With LAUNCHER_INIT_OWN_SOCKET
 *                               set, every rank first opens a socket pair of
 *                               its own (at descriptors 3 and 4 if a wrapper
 *                               closed 3): nothing of crnet's may arrive on
 *                               it (exit 98 if something does).
 *                               With LAUNCHER_INIT_FAKE_LAUNCHER="l1|l2|..."
 *                               set, every rank talks to a socket of its own
 *                               instead of crlaunch's, on which the lines
 *                               l1, l2, ... wait "from crlaunch"
 *   launcher_init kill R        after init rank R kills itself with SIGKILL;
 *                               the others as for die
 *
 * With CRLT_DIR set, every rank first creates CRLT_DIR/pid.R.PID.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crnet.h"

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  int target = argc > 2 ? atoi(argv[2]) : -1;
  const char *r = getenv("CRNET_RANK");
  int rank = r != NULL ? atoi(r) : -1;

  const char *dir = getenv("CRLT_DIR");
  if (dir != NULL) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%d.%d", dir, rank, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
      close(fd);
  }

  if (strcmp(mode, "skip") == 0 && rank == target) {
    unsigned left = 30;
    while (left > 0)
      left = sleep(left);
    return 0;
  }

  int own[2] = {-1, -1};
  if (getenv("LAUNCHER_INIT_OWN_SOCKET") != NULL &&
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, own) != 0)
    return 97;

  const char *fake = getenv("LAUNCHER_INIT_FAKE_LAUNCHER");
  int fake_fd[2] = {-1, -1};
  if (fake != NULL) {
    char var[64], lines[1024];
    struct stat st;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fake_fd) != 0 ||
        fstat(fake_fd[0], &st) != 0)
      return 97;
    snprintf(var, sizeof var, "%d:%llu", fake_fd[0],
             (unsigned long long)st.st_ino);
    setenv("CRNET_LAUNCHER_FD", var, 1);
    snprintf(lines, sizeof lines, "%s", fake);
    for (char *l = strtok(lines, "|"); l != NULL; l = strtok(NULL, "|"))
      if (write(fake_fd[1], l, strlen(l)) < 0 || write(fake_fd[1], "\n", 1) < 0)
        return 97;
  }

  crnet_comm *comm;
  int rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "rank %d: crnet_comm_init: %s: %s\n", rank,
            crnet_strerror(rc), crnet_init_errmsg());
    return 1;
  }
  if (strcmp(mode, "die") == 0 && rank == target)
    _exit(argc > 3 ? atoi(argv[3]) : 5);
  if (strcmp(mode, "kill") == 0 && rank == target)
    raise(SIGKILL);
  if (strcmp(mode, "abort") == 0 && rank == target) {
    crnet_comm_abort(comm, argc > 3 ? atoi(argv[3]) : 1);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    if (own[0] >= 0) {
      char got[64];
      ssize_t n = read(own[1], got, sizeof got - 1);
      if (n > 0 || (n < 0 && errno != EAGAIN)) {
        got[n > 0 ? n : 0] = '\0';
        fprintf(stderr, "rank %d: its own socket (fd %d) got \"%s\"\n", rank,
                own[0], got);
        return 98;
      }
    }
    crnet_comm_destroy(comm);
    return 0;
  }
  if (strcmp(mode, "kill") == 0)
    mode = "die";
  if (strcmp(mode, "die") == 0 && argc > 4) {
    long ms = atol(argv[4]);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }

  int64_t mine = crnet_comm_rank(comm) + 1, total = 0;
  int64_t size = crnet_comm_size(comm);
  rc = crnet_allreduce(comm, &mine, &total, 1, CRNET_INT64, CRNET_SUM);
  if (strcmp(mode, "abort") == 0) {
    int code = argc > 3 ? atoi(argv[3]) : 1;
    int ok = rc == CRNET_EABORTED && crnet_comm_abort_code(comm) == code;
    fprintf(stderr, "rank %d: allreduce: %s (code %d): %s\n", rank,
            crnet_err_name(rc), crnet_comm_abort_code(comm),
            crnet_comm_errmsg(comm));
    crnet_comm_destroy(comm);
    return !ok ? 99 : argc > 4 ? atoi(argv[4]) : 1;
  }
  if (rc != 0) {
    fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, crnet_strerror(rc),
            crnet_comm_errmsg(comm));
    crnet_comm_destroy(comm);
    return 1;
  }
  if (total != size * (size + 1) / 2) {
    fprintf(stderr, "rank %d: allreduce gave %lld\n", rank, (long long)total);
    crnet_comm_destroy(comm);
    return 1;
  }
  rc = crnet_comm_destroy(comm);
  if (rc != 0) {
    fprintf(stderr, "rank %d: destroy: %s\n", rank, crnet_strerror(rc));
    return 1;
  }
  printf("rank %d ok\n", rank);
  return 0;
}
