/* streams_check: the mesh has CRNET_STREAMS TCP connections per pair of
 * ranks, and large messages still arrive whole and right across them.
 *
 *   crlaunch -n P [-x CRNET_STREAMS=S] streams_check EXPECTED_STREAMS
 *   crlaunch -n P streams_check lazy
 *
 * After init every rank counts its open TCP sockets (/proc/self/fd entries
 * that are IPv4 or IPv6 sockets: not crlaunch's report socket,
 * CRNET_LAUNCHER_FD, nor the Unix sockets that set up shared memory
 * between ranks of this host in the background): the
 * rendezvous connection and the listener are closed by then, so what is
 * left is the mesh, EXPECTED_STREAMS · (P − 1) links. The
 * job-wide value is rank 0's, so a test may set CRNET_STREAMS on rank 0
 * only and expect it everywhere. Then an allreduce and an all-to-all of
 * 1 MiB per rank (split into parts across the streams when their messages
 * are large enough, see CRNET_STREAMS_MIN_BYTES) are checked element by
 * element. Exits 0 when every rank agrees.
 *
 * `lazy`: the job is expected to run with lazy links (CRNET_LAZY_LINKS, by
 * default from p = 64 on): after init a rank holds its listener and the
 * links that ranks already in their allreduce made to it, and after the
 * allreduce the schedule's peers (about 2 log2 p) and the listener: both
 * far fewer than the p - 1 sockets of a full mesh. The all-to-all is left
 * out there: pairwise all-to-all needs every link.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crnet.h"

#define COUNT (256 * 1024) /* floats: 1 MiB */

static int count_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  char path[300], target[64];
  /* "3:<inode>"; the library keeps a descriptor of its own for it too,
   * so the report socket is told by its inode. */
  const char *report = getenv("CRNET_LAUNCHER_FD");
  const char *colon = report != NULL ? strchr(report, ':') : NULL;
  char report_target[64] = "";
  int n = 0;
  if (colon != NULL)
    snprintf(report_target, sizeof report_target, "socket:[%s]", colon + 1);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    ssize_t len;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = '\0';
      int domain = 0;
      socklen_t dlen = sizeof domain;
      if (strncmp(target, "socket:", 7) != 0 ||
          strcmp(target, report_target) == 0 ||
          getsockopt(atoi(e->d_name), SOL_SOCKET, SO_DOMAIN, &domain,
                     &dlen) != 0)
        continue;
      n += domain == AF_INET || domain == AF_INET6;
    }
  }
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  crnet_comm *comm;
  int lazy = argc > 1 && strcmp(argv[1], "lazy") == 0;
  int expected = argc > 1 && !lazy ? atoi(argv[1]) : 1;
  int rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "streams_check: init: %s\n", crnet_init_errmsg());
    return 1;
  }
  int rank = crnet_comm_rank(comm), p = crnet_comm_size(comm);
  int sockets = count_sockets();
  float *v = malloc(sizeof *v * COUNT);
  float *a = malloc(sizeof *a * COUNT), *b = malloc(sizeof *b * COUNT);
  int64_t wrong[2] = {0, 0}; /* wrong sockets count, wrong elements */
  if (v == NULL || a == NULL || b == NULL) {
    fprintf(stderr, "streams_check: out of memory\n");
    return 1;
  }
  if (lazy && (sockets < 1 || sockets >= p - 1)) {
    fprintf(stderr,
            "streams_check: rank %d has %d sockets after init, expected its "
            "listener and fewer links than a full mesh's %d (lazy links)\n",
            rank, sockets, p - 1);
    wrong[0] = 1;
  } else if (!lazy && sockets != expected * (p - 1)) {
    fprintf(stderr,
            "streams_check: rank %d has %d sockets, expected %d streams x %d "
            "peers\n",
            rank, sockets, expected, p - 1);
    wrong[0] = 1;
  }
  for (int i = 0; i < COUNT; i++)
    v[i] = (float)((i % 1000) + rank);
  rc = crnet_allreduce(comm, v, b, COUNT, CRNET_FLOAT, CRNET_SUM);
  for (int i = 0; rc == 0 && i < COUNT; i++) {
    /* sum over r of (i % 1000 + r): exact in float at these sizes */
    float want = (float)(p * (i % 1000) + p * (p - 1) / 2);
    wrong[1] += b[i] != want;
  }
  int after = lazy ? count_sockets() : 0;
  if (lazy && (after < 2 || after >= p)) {
    fprintf(stderr,
            "streams_check: rank %d has %d sockets after an allreduce, "
            "expected a few links and the listener, fewer than a full "
            "mesh's %d\n",
            rank, after, p - 1);
    wrong[0] = 1;
  }
  /* All-to-all: element j of block d from rank s is s * 1000000 + j. */
  uint64_t block = COUNT / (uint64_t)p;
  for (int d = 0; rc == 0 && d < p; d++)
    for (uint64_t j = 0; j < block; j++)
      a[d * block + j] = (float)(rank * 1000000 + (int)(j % 100000));
  if (rc == 0 && !lazy)
    rc = crnet_alltoall(comm, a, b, block, CRNET_FLOAT);
  for (int s = 0; rc == 0 && !lazy && s < p; s++)
    for (uint64_t j = 0; j < block; j++)
      wrong[1] += b[s * block + j] != (float)(s * 1000000 + (int)(j % 100000));
  if (rc == 0)
    rc = crnet_allreduce(comm, CRNET_IN_PLACE, wrong, 2, CRNET_INT64,
                         CRNET_SUM);
  if (rc != 0) {
    fprintf(stderr, "streams_check: %s: %s\n", crnet_strerror(rc),
            crnet_comm_errmsg(comm));
    crnet_comm_destroy(comm);
    return 1;
  }
  if (rank == 0 && lazy)
    printf("streams_check: p=%d: lazy links: %d socket(s) after init, %d "
           "after an allreduce on rank 0 (a full mesh: %d), %lld rank(s) "
           "with another count, %lld wrong element(s)\n",
           p, sockets, after, p - 1, (long long)wrong[0],
           (long long)wrong[1]);
  else if (rank == 0)
    printf("streams_check: p=%d: %d socket(s) per rank (%d per peer), %lld "
           "rank(s) with another count, %lld wrong element(s)\n",
           p, sockets, sockets / (p > 1 ? p - 1 : 1), (long long)wrong[0],
           (long long)wrong[1]);
  free(v);
  free(a);
  free(b);
  rc = crnet_comm_destroy(comm);
  return rc != 0 || wrong[0] != 0 || wrong[1] != 0 ? 1 : 0;
}
