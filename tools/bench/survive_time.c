/* survive_time: what surviving a lost rank costs, in a job started by
 * crlaunch --keep-going (docs/RELIABILITY.md, "Surviving lost ranks").
 *
 *   crlaunch --keep-going -n P survive_time VICTIM SEED KILLFILE
 *
 * First, with every rank alive, the cost of an agreement against an 8-byte
 * allreduce on the same comm: ROUNDS of each, interleaved in blocks, the
 * medians of the blocks (rank 0 prints "agree <agree s> <allreduce s>").
 * Then every rank loops 8-byte allreduces; rank VICTIM writes the time
 * (CLOCK_REALTIME, shared by the processes of one host) to KILLFILE and
 * kills itself with SIGKILL before call number 5 + SEED mod 20. Each
 * survivor, once a call fails, does what examples/survive.c does (revoke,
 * ack, agree, shrink) and one allreduce on the shrunk comm, then prints
 * "survived <seconds from the kill to that allreduce's return> <seconds
 * its shrink took> <the shrunk comm's size>". tools/bench/survive_time.sh
 * runs it over many kills and prints medians and maxima. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "crnet.h"

#define ROUNDS 200
#define BLOCK 20

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Agree against allreduce, alive: medians of BLOCK-call blocks. */
static int agree_cost(crnet_comm *c, double *agree, double *allreduce) {
  double ta[ROUNDS / BLOCK], tr[ROUNDS / BLOCK];
  int64_t x = 1, y;
  for (int b = 0; b < ROUNDS / BLOCK; b++) {
    double t0 = wall_s();
    for (int i = 0; i < BLOCK; i++) {
      int flag = 1;
      if (crnet_comm_agree(c, &flag) != 0 || flag != 1)
        return 1;
    }
    double t1 = wall_s();
    for (int i = 0; i < BLOCK; i++)
      if (crnet_allreduce(c, &x, &y, 1, CRNET_INT64, CRNET_SUM) != 0)
        return 1;
    double t2 = wall_s();
    ta[b] = (t1 - t0) / BLOCK;
    tr[b] = (t2 - t1) / BLOCK;
  }
  qsort(ta, ROUNDS / BLOCK, sizeof ta[0], by_value);
  qsort(tr, ROUNDS / BLOCK, sizeof tr[0], by_value);
  *agree = ta[ROUNDS / BLOCK / 2];
  *allreduce = tr[ROUNDS / BLOCK / 2];
  return 0;
}

int main(int argc, char **argv) {
  crnet_comm *c, *s = NULL;
  double killed = 0, t_agree, t_allreduce, t_shrink, done;
  int64_t x = 1, y;
  int victim, when, rc, flag;
  FILE *f;

  if (argc != 4) {
    fprintf(stderr, "usage: survive_time VICTIM SEED KILLFILE\n");
    return 2;
  }
  victim = atoi(argv[1]);
  when = 5 + atoi(argv[2]) % 20;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "survive_time: %s\n", crnet_init_errmsg());
    return 1;
  }
  if (agree_cost(c, &t_agree, &t_allreduce) != 0) {
    fprintf(stderr, "survive_time: agree or allreduce failed: %s\n",
            crnet_comm_errmsg(c));
    return 1;
  }
  if (crnet_comm_rank(c) == 0)
    printf("agree %.9f %.9f\n", t_agree, t_allreduce);
  for (int i = 0;; i++) {
    if (crnet_comm_rank(c) == victim && i == when) {
      f = fopen(argv[3], "w");
      if (f == NULL || fprintf(f, "%.6f\n", wall_s()) < 0 || fclose(f) != 0)
        return 1;
      raise(SIGKILL);
    }
    rc = crnet_allreduce(c, &x, &y, 1, CRNET_INT64, CRNET_SUM);
    if (rc != 0)
      break;
  }
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, NULL, 0);
  flag = 1;
  crnet_comm_agree(c, &flag);
  double t0 = wall_s();
  rc = crnet_comm_shrink(c, &s);
  t_shrink = wall_s() - t0;
  if (rc == 0)
    rc = crnet_allreduce(s, &x, &y, 1, CRNET_INT64, CRNET_SUM);
  done = wall_s();
  if (rc != 0) {
    fprintf(stderr, "survive_time: %s\n", crnet_strerror(rc));
    return 1;
  }
  f = fopen(argv[3], "r");
  if (f == NULL || fscanf(f, "%lf", &killed) != 1)
    return 1;
  fclose(f);
  printf("survived %.6f %.6f %d\n", done - killed, t_shrink,
         crnet_comm_size(s));
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return 0;
}
