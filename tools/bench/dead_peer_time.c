/* dead_peer_time: how long after a rank dies the others' calls fail, in a
 * job started by crlaunch (docs/RELIABILITY.md, "Dead peers").
 *
 *   crlaunch -n P dead_peer_time VICTIM SEED KILLFILE
 *
 * Every rank loops allreduces of 256 KiB (doubles, sum). Rank VICTIM writes
 * the time (CLOCK_REALTIME, shared by the processes of one host) to
 * KILLFILE and kills itself with SIGKILL before call number 5 + SEED mod
 * 20; every other rank prints "failed <seconds since the kill> <error>"
 * when its call fails. tools/bench/dead_peer_time.sh runs it for several
 * builds, interleaved, and prints the median and maximum. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "crnet.h"

#define COUNT (32 * 1024) /* doubles: 256 KiB */

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  crnet_comm *c;
  double *in, *out, killed = 0;
  int victim, when, rc;
  FILE *f;

  if (argc != 4) {
    fprintf(stderr, "usage: dead_peer_time VICTIM SEED KILLFILE\n");
    return 2;
  }
  victim = atoi(argv[1]);
  when = 5 + atoi(argv[2]) % 20;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "dead_peer_time: %s\n", crnet_init_errmsg());
    return 1;
  }
  in = calloc(COUNT, sizeof *in);
  out = calloc(COUNT, sizeof *out);
  if (in == NULL || out == NULL)
    return 1;
  for (int i = 0;; i++) {
    if (crnet_comm_rank(c) == victim && i == when) {
      f = fopen(argv[3], "w");
      if (f == NULL || fprintf(f, "%.6f\n", wall_s()) < 0 || fclose(f) != 0)
        return 1;
      raise(SIGKILL);
    }
    rc = crnet_allreduce(c, in, out, COUNT, CRNET_DOUBLE, CRNET_SUM);
    if (rc != 0)
      break;
  }
  double failed = wall_s();
  f = fopen(argv[3], "r");
  if (f == NULL || fscanf(f, "%lf", &killed) != 1)
    killed = failed; /* no kill time: the line says 0 */
  if (f != NULL)
    fclose(f);
  printf("failed %.6f %s\n", failed - killed, crnet_comm_errmsg(c));
  crnet_comm_destroy(c);
  free(in);
  free(out);
  return 1;
}
