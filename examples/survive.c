/* survive: a computation that loses a rank and finishes on the others.
 *
 *   crlaunch --keep-going -n 4 ./survive [steps] [lost_ranks] [lost_step]
 *
 * Each step sums f(i, step) over i = 1..N, the items dealt out over the
 * ranks of the current comm, with one allreduce, and checks the sum. At
 * lost_step (default: half way), each of lost_ranks (a comma-separated
 * list; default: the last rank; -1: none) kills itself with SIGKILL, as a
 * preempted VM would vanish.
 *
 * The survivors' way through (docs/RELIABILITY.md): after each step they
 * agree on whether it succeeded everywhere (crnet_comm_agree: one flag,
 * the same answer on every survivor). If it did not (a rank was lost, or
 * another survivor revoked the comm), they revoke the comm, acknowledge the
 * lost ranks, shrink to a comm of the survivors, and redo the step there:
 * the data of a step is recomputed from the items, so nothing is lost with
 * the rank. Rank 0 of the last comm prints the ranks lost. Exit 0 when
 * every sum was right. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <crnet.h>

#define N 100000

/* This rank's share of sum(i * step), i = 1..N, on a comm of p ranks. */
static int64_t partial(int rank, int p, int step) {
  int64_t s = 0;
  for (int64_t i = 1 + rank; i <= N; i += p)
    s += i * step;
  return s;
}

/* Whether job rank `rank` is in the comma-separated list. */
static int listed(const char *list, int rank) {
  char *end;
  for (const char *p = list; *p != '\0'; p = *end == ',' ? end + 1 : end) {
    long r = strtol(p, &end, 10);
    if (end == p)
      return 0;
    if (r == rank)
      return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  crnet_comm *world, *comm;
  int steps = argc > 1 ? atoi(argv[1]) : 10;
  int lost_step = argc > 3 ? atoi(argv[3]) : steps / 2;
  char last[16];
  const char *lost_ranks;
  int rc, wrong = 0, redone = 0;

  rc = crnet_comm_init(&world, NULL);
  if (rc != 0) {
    fprintf(stderr, "crnet_comm_init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    return 1;
  }
  snprintf(last, sizeof last, "%d", crnet_comm_size(world) - 1);
  lost_ranks = argc > 2 ? argv[2] : last;
  comm = world;
  for (int step = 1; step <= steps;) {
    int64_t mine, total = 0;
    int ok, flag;
    if (step == lost_step &&
        listed(lost_ranks, crnet_comm_job_rank(comm, crnet_comm_rank(comm))))
      kill(getpid(), SIGKILL);
    mine = partial(crnet_comm_rank(comm), crnet_comm_size(comm), step);
    rc = crnet_allreduce(comm, &mine, &total, 1, CRNET_INT64, CRNET_SUM);
    ok = rc == 0;
    if (!ok)
      crnet_comm_revoke(comm); /* no survivor stays in this step alone */
    flag = ok;
    rc = crnet_comm_agree(comm, &flag);
    if (rc == 0 && flag) {
      if (total != (int64_t)step * N * (N + 1) / 2) {
        fprintf(stderr, "step %d: sum %lld is wrong\n", step,
                (long long)total);
        wrong++;
      }
      step++;
      continue;
    }
    if (rc == CRNET_EINVAL) {
      fprintf(stderr, "survive: %s: start the job with crlaunch --keep-going "
                      "(or CRNET_ON_FAILURE=continue)\n",
              crnet_comm_errmsg(comm));
      return 2;
    }
    if (rc != 0 && rc != CRNET_EPEER) {
      fprintf(stderr, "crnet_comm_agree: %s: %s\n", crnet_strerror(rc),
              crnet_comm_errmsg(comm));
      return 1;
    }
    /* Someone failed the step: go on without the lost ranks. */
    crnet_comm *shrunk;
    crnet_comm_revoke(comm);
    crnet_comm_ack_lost(comm, NULL, 0);
    rc = crnet_comm_shrink(comm, &shrunk);
    if (rc != 0) {
      fprintf(stderr, "crnet_comm_shrink: %s: %s\n", crnet_strerror(rc),
              crnet_comm_errmsg(comm));
      return 1;
    }
    if (comm != world)
      crnet_comm_destroy(comm);
    comm = shrunk;
    redone++;
  }
  if (crnet_comm_rank(comm) == 0) {
    int lost[64], n = crnet_comm_lost(world, lost, 64);
    printf("%d steps on %d of %d ranks, %d step%s redone, ranks lost:", steps,
           crnet_comm_size(comm), crnet_comm_size(world), redone,
           redone == 1 ? "" : "s");
    for (int i = 0; i < n && i < 64; i++)
      printf(" %d", lost[i]);
    printf("%s; every sum %s\n", n == 0 ? " none" : "",
           wrong == 0 ? "right" : "checked: SOME WRONG");
  }
  if (comm != world)
    crnet_comm_destroy(comm);
  crnet_comm_destroy(world);
  return wrong == 0 ? 0 : 1;
}
