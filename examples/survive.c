/* survive: a computation that loses a rank and finishes on the others,
 * or, started with crlaunch --restart, grows back to full size.
 *
 *   crlaunch --keep-going -n 4 ./survive [steps] [lost_ranks] [lost_step]
 *   crlaunch --restart 1 -n 4 ./survive [steps] [lost_ranks] [lost_step] grow
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
 * every sum was right, and the running total of every step's sum (the
 * state a rank keeps) is too.
 *
 * With "grow" the survivors grow instead of shrinking (crnet_comm_grow):
 * crlaunch --restart starts each lost rank again, and its crnet_comm_init
 * returns once a grow has admitted it. Until the comm is back to full
 * size the survivors grow again before each step, waiting a little
 * between tries, and give up after GROW_TRIES grows that admitted nobody
 * in the whole run (the count is part of the state, so every rank stops
 * alike). After a grow that admitted ranks, rank 0 sends the state (the
 * step, the running total, the size and the count) to everyone: the
 * newcomers start from it. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <crnet.h>

#define N 100000
#define GROW_TRIES 300
#define GROW_WAIT_US 10000

/* The state the ranks carry from step to step. */
struct state {
  int64_t step;
  int64_t total; /* the sum of every step's sum so far */
  int64_t size;  /* the job's size: what growing back aims at */
  int64_t tries; /* grows so far that admitted nobody */
};

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

/* Whether g has a rank that `old` has not: a newcomer, which waits for
 * the state. */
static int admitted_any(const crnet_comm *old, const crnet_comm *g) {
  for (int r = 0; r < crnet_comm_size(g); r++) {
    int j = crnet_comm_job_rank(g, r), known = 0;
    for (int q = 0; q < crnet_comm_size(old) && !known; q++)
      known = crnet_comm_job_rank(old, q) == j;
    if (!known)
      return 1;
  }
  return 0;
}

/* Grows comm until it has st->size ranks or GROW_TRIES tries have passed;
 * after a grow that admitted ranks, rank 0's state goes to every rank. 0,
 * or an error said on stderr. */
static int grow_back(crnet_comm **comm, crnet_comm *base, struct state *st) {
  while (st->tries < GROW_TRIES && crnet_comm_size(*comm) < st->size) {
    crnet_comm *grown;
    int rc = crnet_comm_grow(*comm, &grown), news;
    if (rc != 0) {
      fprintf(stderr, "crnet_comm_grow: %s: %s\n", crnet_strerror(rc),
              crnet_comm_errmsg(*comm));
      return rc;
    }
    news = admitted_any(*comm, grown);
    if (*comm != base)
      crnet_comm_destroy(*comm);
    *comm = grown;
    if (news) {
      rc = crnet_bcast(grown, st, 4, CRNET_INT64, 0);
      if (rc != 0)
        return 0; /* lost again: the next step finds out */
    } else {
      st->tries++;
      usleep(GROW_WAIT_US); /* the restarted rank is still on its way */
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  crnet_comm *world, *comm;
  int steps = argc > 1 ? atoi(argv[1]) : 10;
  int lost_step = argc > 3 ? atoi(argv[3]) : steps / 2;
  int grow = argc > 4 && strcmp(argv[4], "grow") == 0;
  char last[16];
  const char *lost_ranks;
  int rc, wrong = 0, redone = 0;
  struct state st = {1, 0, 0, 0};

  rc = crnet_comm_init(&world, NULL);
  if (rc != 0) {
    fprintf(stderr, "crnet_comm_init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    return 1;
  }
  st.size = crnet_comm_size(world);
  snprintf(last, sizeof last, "%d", (int)st.size - 1);
  lost_ranks = argc > 2 ? argv[2] : last;
  comm = world;
  /* A restarted rank: where the others are comes from rank 0. */
  if (crnet_comm_joined(comm) == 1 &&
      (rc = crnet_bcast(comm, &st, 4, CRNET_INT64, 0)) != 0) {
    fprintf(stderr, "survive: the state after joining: %s: %s\n",
            crnet_strerror(rc), crnet_comm_errmsg(comm));
    return 1;
  }
  while (st.step <= steps) {
    int step = (int)st.step;
    int64_t mine, total = 0;
    int ok, flag;
    if (grow && crnet_comm_size(comm) < st.size &&
        grow_back(&comm, world, &st) != 0)
      return 1;
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
      st.total += total;
      st.step++;
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
    /* Someone failed the step: go on without the lost ranks (grow_back
     * takes restarted ones in before the next try). */
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
  if (st.total != (int64_t)steps * (steps + 1) / 2 * N * (N + 1) / 2) {
    fprintf(stderr, "the running total %lld is wrong\n", (long long)st.total);
    wrong++;
  }
  if (crnet_comm_rank(comm) == 0) {
    int lost[64], n = crnet_comm_lost(world, lost, 64);
    printf("%d steps on %d of %d ranks, %d step%s redone, ranks lost:", steps,
           crnet_comm_size(comm), (int)st.size, redone, redone == 1 ? "" : "s");
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
