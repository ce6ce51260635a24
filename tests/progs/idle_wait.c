/* idle_wait: a rank blocked in a collective must not burn its core.
 *
 *   crlaunch -n P idle_wait [MS [nb]]
 *
 * Rank 0 sleeps MS milliseconds (default 1500) before it enters a barrier;
 * every other rank enters at once and measures the CPU time (user + system,
 * getrusage) it spends waiting there against the wall time. A rank that
 * polls instead of sleeping uses about as much CPU as wall time; one that
 * sleeps in epoll (after at most the short bounded spin of comm.c) uses
 * next to nothing. The ranks then share their figures with an allreduce
 * (MAX), and rank 0 prints one line with the largest share and exits 1 if
 * it is above MAX_SHARE. Not a speed test: the bound is the difference
 * between sleeping and polling, a factor of ten and more.
 *
 * With `nb` the waiting ranks start the barrier with crnet_ibarrier and
 * then wait for it: with the progress thread on, the wait may lean on the
 * thread, which then polls for it (progress.c), and the same bound holds
 * for the process, the thread included.
 *
 * With IDLE_WAIT_READY set, every rank prints "idle_wait: rank R ready" on
 * stdout once the first barrier is over (every rank is past init), so that
 * a script can act while they wait, without guessing how long init takes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "crnet.h"

#define MAX_SHARE 0.10

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A barrier: crnet_barrier, or with `nb` crnet_ibarrier and, pause_ms
 * later, crnet_wait. */
static int barrier(crnet_comm *comm, bool nonblocking, long pause_ms) {
  crnet_request *req = NULL;
  struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
  int rc;
  if (!nonblocking)
    return crnet_barrier(comm);
  rc = crnet_ibarrier(comm, &req);
  if (rc == 0 && pause_ms > 0)
    nanosleep(&pause, NULL);
  return rc == 0 ? crnet_wait(&req) : rc;
}

int main(int argc, char **argv) {
  long ms = argc > 1 ? atol(argv[1]) : 1500;
  bool nonblocking = argc > 2 && strcmp(argv[2], "nb") == 0;
  crnet_comm *comm;
  double share[2] = {0, 0}; /* CPU / wall of the wait; the wall time */
  int rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "idle_wait: init: %s\n", crnet_init_errmsg());
    return 1;
  }
  /* Line everyone up first, so that the measured wait is rank 0's sleep
   * (with `nb` by a nonblocking barrier: the progress thread starts). */
  rc = barrier(comm, nonblocking, 0);
  if (rc == 0 && getenv("IDLE_WAIT_READY") != NULL) {
    printf("idle_wait: rank %d ready\n", crnet_comm_rank(comm));
    fflush(stdout);
  }
  if (rc == 0 && crnet_comm_rank(comm) == 0) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    rc = crnet_barrier(comm);
  } else if (rc == 0) {
    double c0 = cpu_s(), w0 = wall_s();
    /* With `nb`, waited for only once the progress thread (started by the
     * barrier above) has taken the loop for it, so that the wait finds
     * the thread at work and leans on it. */
    rc = barrier(comm, nonblocking, 50);
    share[1] = wall_s() - w0;
    share[0] = (cpu_s() - c0) / share[1];
  }
  if (rc == 0)
    rc = crnet_allreduce(comm, CRNET_IN_PLACE, share, 2, CRNET_DOUBLE,
                         CRNET_MAX);
  if (rc != 0) {
    fprintf(stderr, "idle_wait: %s: %s\n", crnet_strerror(rc),
            crnet_comm_errmsg(comm));
    crnet_comm_destroy(comm);
    return 1;
  }
  if (crnet_comm_rank(comm) == 0)
    printf("idle_wait: p=%d: waiting ranks used at most %.4f of a core "
           "over %.2f s (bound %.2f)\n",
           crnet_comm_size(comm), share[0], share[1], MAX_SHARE);
  rc = crnet_comm_destroy(comm);
  if (share[1] < ms * 1e-3 * 0.5) {
    fprintf(stderr, "idle_wait: the wait took %.3f s, not about %ld ms\n",
            share[1], ms);
    return 1;
  }
  return rc != 0 || share[0] > MAX_SHARE ? 1 : 0;
}
