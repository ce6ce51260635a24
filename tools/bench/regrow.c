/* regrow: losing ranks and growing back, over and over, in a job started
 * by crlaunch --restart (docs/RELIABILITY.md, "Growing back").
 *
 *   crlaunch --restart K -n P regrow K DIR [STEPS]
 *
 * K cycles. In cycle c every rank runs allreduces of 8 bytes (each one
 * checked); before the cycle's step 3 the rank at comm position
 * (P - 1 - c) mod P writes the time (CLOCK_REALTIME, shared by the
 * processes of one host) to DIR/kill.<c> and kills itself with SIGKILL.
 * crlaunch starts it again. The others, once a call fails, revoke,
 * acknowledge and grow (crnet_comm_grow) until the comm has P ranks again
 * (every GROW_WAIT_US, at most GROW_TRIES grows that admit nobody per
 * regrow, counted in the state so that all stop alike); after a grow that
 * admitted ranks, rank 0 sends the state (cycle,
 * step, tries, the sums so far), and the first allreduce on the whole comm
 * ends the cycle: rank 0 prints "regrown <cycle> <seconds from the kill>".
 * After STEPS steps (default 6) per cycle and K cycles, rank 0 checks the
 * running sum of every allreduce and prints "done <P> <K>"; exit 0 when
 * every sum was right. tools/bench/regrow.sh prints medians and maxima.
 * The ranks share the machine's cores as crlaunch binds them. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crnet.h"

#define GROW_TRIES 3000
#define GROW_WAIT_US 2000
#define KILL_STEP 3

struct state {
  int64_t cycle, step;
  int64_t tries;     /* grows of this regrow that admitted nobody */
  int64_t total;     /* the sum of every allreduce so far */
  int64_t size;      /* the job's */
  int64_t regrowing; /* a rank was lost; the comm is not whole again yet */
};

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether g has a rank that `old` has not. */
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

static double kill_time(const char *dir, int64_t cycle) {
  char path[512];
  double t = 0;
  snprintf(path, sizeof path, "%s/kill.%lld", dir, (long long)cycle);
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    if (fscanf(f, "%lf", &t) != 1)
      t = 0;
    fclose(f);
  }
  return t;
}

int main(int argc, char **argv) {
  int cycles = argc > 1 ? atoi(argv[1]) : 3;
  const char *dir = argc > 2 ? argv[2] : "/tmp";
  int steps = argc > 3 ? atoi(argv[3]) : 6;
  struct state st = {0, 0, 0, 0, 0, 0};
  crnet_comm *base, *comm;
  int rc, wrong = 0;

  if (steps <= KILL_STEP) {
    fprintf(stderr, "regrow: STEPS must exceed %d\n", KILL_STEP);
    return 2;
  }
  rc = crnet_comm_init(&base, NULL);
  if (rc != 0) {
    fprintf(stderr, "regrow: crnet_comm_init: %s\n", crnet_init_errmsg());
    return 1;
  }
  comm = base;
  st.size = crnet_comm_size(base);
  if (crnet_comm_joined(base) == 1 &&
      crnet_bcast(base, &st, 6, CRNET_INT64, 0) != 0) {
    fprintf(stderr, "regrow: the state: %s\n", crnet_comm_errmsg(base));
    return 1;
  }
  while (st.cycle < cycles) {
    int64_t one = 1, sum = 0;
    int ok, flag, p = (int)st.size;
    if (st.step == KILL_STEP && !st.regrowing &&
        crnet_comm_rank(comm) == (int)((p - 1 - st.cycle % p + p) % p)) {
      char path[512];
      snprintf(path, sizeof path, "%s/kill.%lld", dir, (long long)st.cycle);
      FILE *f = fopen(path, "w");
      if (f != NULL) {
        fprintf(f, "%.9f\n", wall_s());
        fclose(f);
      }
      raise(SIGKILL);
    }
    rc = crnet_allreduce(comm, &one, &sum, 1, CRNET_INT64, CRNET_SUM);
    ok = rc == 0 && sum == crnet_comm_size(comm);
    if (rc != 0)
      crnet_comm_revoke(comm);
    flag = rc == 0;
    rc = crnet_comm_agree(comm, &flag);
    if (rc == 0 && flag) {
      if (!ok) {
        fprintf(stderr, "regrow: cycle %lld step %lld: sum %lld on %d ranks\n",
                (long long)st.cycle, (long long)st.step, (long long)sum,
                crnet_comm_size(comm));
        wrong++;
      }
      /* Flushed at once: this rank may be the next to die. */
      if (st.regrowing && crnet_comm_rank(comm) == 0) {
        printf("regrown %lld %.6f\n", (long long)st.cycle,
               wall_s() - kill_time(dir, st.cycle));
        fflush(stdout);
      }
      if (st.regrowing)
        st.tries = 0; /* each regrow has GROW_TRIES of its own */
      st.regrowing = 0;
      st.total += sum;
      if (++st.step == steps) {
        st.step = 0;
        st.cycle++;
      }
      continue;
    }
    if (rc != 0 && rc != CRNET_EPEER) {
      fprintf(stderr, "regrow: crnet_comm_agree: %s\n",
              crnet_comm_errmsg(comm));
      return 1;
    }
    /* Lost: grow until whole again. */
    crnet_comm_revoke(comm);
    crnet_comm_ack_lost(comm, NULL, 0);
    st.regrowing = 1;
    do {
      crnet_comm *g;
      int news;
      rc = crnet_comm_grow(comm, &g);
      if (rc != 0) {
        fprintf(stderr, "regrow: crnet_comm_grow: %s\n",
                crnet_comm_errmsg(comm));
        return 1;
      }
      news = admitted_any(comm, g);
      if (comm != base)
        crnet_comm_destroy(comm);
      comm = g;
      if (news) {
        if (crnet_bcast(g, &st, 6, CRNET_INT64, 0) != 0)
          break; /* lost again: the next step fails */
      } else {
        st.tries++;
        usleep(GROW_WAIT_US);
      }
    } while (crnet_comm_size(comm) < st.size && st.tries < GROW_TRIES);
  }
  if (st.total != (int64_t)cycles * steps * st.size) {
    fprintf(stderr, "regrow: the running sum %lld is not %lld\n",
            (long long)st.total, (long long)cycles * steps * st.size);
    wrong++;
  }
  if (crnet_comm_rank(comm) == 0)
    printf("done %d %d %s\n", crnet_comm_size(comm), cycles,
           wrong == 0 ? "right" : "WRONG");
  if (comm != base)
    crnet_comm_destroy(comm);
  crnet_comm_destroy(base);
  return wrong == 0 ? 0 : 1;
}
