/* A rank of a job under crlaunch --restart (tests/grow_job.sh) in which
 * ranks die inside crnet_comm_grow, and the job still returns to full
 * size with right answers.
 *
 *   grow_job MODE STEPS
 *
 * Every step is one allreduce of the ranks' (job index + 1) * step on the
 * current comm, checked against the sum it must have, then an agreement
 * on whether the step went well everywhere. At step 3 the last rank of
 * the world kills itself before its allreduce. The survivors revoke and
 * grow the world (no shrink first): its agreements are numbers 4 and 5 of
 * the world comm (one per step before), and MODE says who dies in the
 * first (crnet__agree_die_at, a test hook):
 *   coordinator  rank 0, as coordinator, after telling one rank;
 *   voter        rank 1, once its vote is out;
 *   newcomer     nobody in the grow; the first restarted rank dies right
 *                after it was admitted, before its first allreduce;
 *   none         nobody.
 * Until the comm is back to the world's size the ranks grow it again
 * before each step (a few ms apart, at most TRIES grows that admit nobody,
 * counted in the state, so that every rank stops alike); after a grow
 * that admitted ranks rank 0 sends the state (the step, the running total
 * of the sums, the tries) to all, and newcomers start from it.
 * Exit 0 when every sum and the total are right and the last comm has
 * the world's size; rank 0 of it prints "grown back to P of P". */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "crnet.h"

#define TRIES 400
#define WAIT_US 10000
#define LOST_STEP 3

struct state {
  int64_t step, total, tries;
};

static int64_t sum_for(crnet_comm *c, int64_t step) {
  int64_t s = 0;
  for (int r = 0; r < crnet_comm_size(c); r++) {
    int j = crnet_comm_job_rank(c, r);
    /* A restarted rank takes its predecessor's part: job index, not slot. */
    s += (int64_t)(j < c->w->world_size ? j : c->w->world_size - 1) + 1;
  }
  return s * step;
}

static int64_t my_part(crnet_comm *c, int64_t step) {
  int j = c->w->rank;
  return ((int64_t)(j < c->w->world_size ? j : c->w->world_size - 1) + 1) *
         step;
}

/* Whether g has a rank that `old` has not: a newcomer, which waits for
 * the state. */
static bool admitted_any(crnet_comm *old, crnet_comm *g) {
  for (int r = 0; r < crnet_comm_size(g); r++)
    if (crnet__local_rank(old, crnet_comm_job_rank(g, r)) < 0)
      return true;
  return false;
}

/* Grows *comm back to `size` ranks, sending the state after each grow
 * that admitted ranks. 0, or 1 when a grow fails. */
static int grow_back(crnet_comm **comm, crnet_comm *base, int size,
                     struct state *st) {
  while (crnet_comm_size(*comm) < size && st->tries < TRIES) {
    crnet_comm *g;
    int rc = crnet_comm_grow(*comm, &g);
    bool news;
    if (rc != 0) {
      fprintf(stderr, "grow_job: crnet_comm_grow: %s: %s\n", crnet_strerror(rc),
              crnet_comm_errmsg(*comm));
      return 1;
    }
    news = admitted_any(*comm, g);
    if (*comm != base)
      crnet_comm_destroy(*comm);
    *comm = g;
    if (news) {
      if (crnet_bcast(g, st, 3, CRNET_INT64, 0) != 0)
        return 0; /* lost again: the next step finds out */
    } else {
      st->tries++;
      usleep(WAIT_US);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "none";
  int steps = argc > 2 ? atoi(argv[2]) : 8;
  const char *restarted = getenv("CRNET_RESTARTED");
  int newcomer = restarted != NULL && atoi(restarted) > 0;
  struct state st = {1, 0, 0};
  crnet_comm *base, *comm;
  int rc, size, wrong = 0;

  rc = crnet_comm_init(&base, NULL);
  if (rc != 0) {
    fprintf(stderr, "grow_job: crnet_comm_init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    return 1;
  }
  comm = base;
  size = base->w->world_size;
  if (!newcomer && strcmp(mode, "coordinator") == 0 && base->w->rank == 0)
    crnet__agree_die_at(LOST_STEP + 1, 1);
  if (!newcomer && strcmp(mode, "voter") == 0 && base->w->rank == 1)
    crnet__agree_die_at(LOST_STEP + 1, -1);
  if (crnet_comm_joined(base) == 1) {
    if (crnet_bcast(base, &st, 3, CRNET_INT64, 0) != 0) {
      fprintf(stderr, "grow_job: the state: %s\n", crnet_comm_errmsg(base));
      return 1;
    }
    if (strcmp(mode, "newcomer") == 0 && atoi(restarted) == 1)
      raise(SIGKILL);
  }
  while (st.step <= steps) {
    int64_t mine, total = 0;
    int ok, flag;
    if (crnet_comm_size(comm) < size && grow_back(&comm, base, size, &st))
      return 1;
    if (st.step == LOST_STEP && !newcomer && base->w->rank == size - 1)
      raise(SIGKILL);
    mine = my_part(comm, st.step);
    rc = crnet_allreduce(comm, &mine, &total, 1, CRNET_INT64, CRNET_SUM);
    ok = rc == 0;
    if (!ok)
      crnet_comm_revoke(comm);
    flag = ok;
    rc = crnet_comm_agree(comm, &flag);
    if (rc == 0 && flag) {
      if (total != sum_for(comm, st.step)) {
        fprintf(stderr, "grow_job: step %lld: sum %lld, not %lld\n",
                (long long)st.step, (long long)total,
                (long long)sum_for(comm, st.step));
        wrong++;
      }
      st.total += total;
      st.step++;
      continue;
    }
    if (rc != 0 && rc != CRNET_EPEER) {
      fprintf(stderr, "grow_job: crnet_comm_agree: %s: %s\n",
              crnet_strerror(rc), crnet_comm_errmsg(comm));
      return 1;
    }
    /* Straight to a grow of the failed comm: the lost ranks are left out,
     * the restarted ones that are ready come in. */
    crnet_comm *g;
    crnet_comm_revoke(comm);
    crnet_comm_ack_lost(comm, NULL, 0);
    rc = crnet_comm_grow(comm, &g);
    if (rc != 0) {
      fprintf(stderr, "grow_job: crnet_comm_grow: %s: %s\n", crnet_strerror(rc),
              crnet_comm_errmsg(comm));
      return 1;
    }
    bool news = admitted_any(comm, g);
    if (comm != base)
      crnet_comm_destroy(comm);
    comm = g;
    if (news && crnet_bcast(g, &st, 3, CRNET_INT64, 0) != 0)
      continue; /* lost again: the step fails and is redone */
  }
  if (crnet_comm_size(comm) != size) {
    fprintf(stderr, "grow_job: ended on %d of %d ranks\n",
            crnet_comm_size(comm), size);
    wrong++;
  }
  if (crnet_comm_rank(comm) == 0)
    printf("grown back to %d of %d; %s\n", crnet_comm_size(comm), size,
           wrong == 0 ? "every sum right" : "SOME SUMS WRONG");
  if (comm != base)
    crnet_comm_destroy(comm);
  crnet_comm_destroy(base);
  return wrong == 0 ? 0 : 1;
}
