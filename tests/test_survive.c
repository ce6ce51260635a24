/* Surviving lost ranks (CRNET_ON_FAILURE=continue; crnet.h, survive.c,
 * shrink.c): jobs of forked ranks on loopback in which a rank is killed
 * (SIGKILL, by itself, at a point the case chooses) and the survivors go
 * on:
 *   - lost_rank_shrink: the world's next call fails with CRNET_EPEER
 *     naming the rank; a sub-comm without it goes on; the survivors
 *     revoke, see the same lost rank, acknowledge it, agree and shrink;
 *     the shrunk comm's allreduce is right; no rank hangs;
 *   - coordinator_lost: rank 0, which coordinates agreements, dies before
 *     the agreement: the survivors agree without it (the AND of their
 *     flags), and agree returns CRNET_EPEER until the loss is
 *     acknowledged;
 *   - revoke_ends_calls_on_every_member: with nobody lost, a revoke by one
 *     rank ends the others' allreduce, which waits on it, with
 *     CRNET_EREVOKED; a shrink then gives a comm of every rank;
 *   - revoker_dies: the revoking rank dies as its revoke returns; the
 *     others' allreduce ends (revoked, or the loss), and they shrink;
 *   - agreement_with_deaths: a rank dies inside an agreement (a test hook,
 *     crnet__agree_die_at): the coordinator after telling one rank its
 *     decision (adopted, the flag with the dead coordinator's bits, or,
 *     if that rank took over before it read it, decided anew), the
 *     coordinator before telling anyone (decided anew without it), a voter
 *     once its vote is out (counted or lost); the same on every survivor;
 *   - death_in_a_shrink: the coordinator dies inside a shrink, having told
 *     one rank; the survivors end with a comm of all the others, at once
 *     or after a second shrink;
 *   - requests_and_messages: requests in flight when a rank dies (a receive
 *     from any source, a nonblocking allreduce) end with CRNET_EPEER or,
 *     after a survivor's revoke, CRNET_EREVOKED; messages go on in a comm
 *     without the lost rank and on the shrunk comm;
 *   - kill_in_a_large_message: the sender of a 64 MiB message (the
 *     rendezvous protocol) dies once the receiver has seen its first bytes
 *     arrive and before the last: the receive ends with CRNET_EPEER (or
 *     CRNET_EREVOKED: the third rank revoked first), the buffer part
 *     written; on the shrunk comm a 64 MiB message arrives
 *     whole;
 *   - kill_in_each_collective: a rank killed at a call of a loop of each
 *     collective kind (allreduce, bcast, allgather, alltoall,
 *     reduce_scatter, scan, barrier; 64 KiB, so that calls span rounds);
 *     the survivors shrink and the same collective on the shrunk comm
 *     gives exact results;
 *   - revoke_from_another_thread: a thread revokes the comm while the
 *     main thread sleeps in an allreduce that waits on a live rank, which
 *     has not called yet: the allreduce returns CRNET_EREVOKED at once, and
 *     the other rank's later call too (suite threads: under TSan);
 *   - off_by_default: without the setting agree and shrink refuse, saying
 *     why;
 *   - restarted_rank_joins: with the rendezvous served as crlaunch
 *     --restart serves it (joins allowed, one restart), a restarted rank
 *     that comes before the job started is refused, saying why; the last
 *     rank dies, the survivors grow until a restarted process of it (told
 *     nothing of the loss: it finds the dead rank's address refused) is
 *     admitted as the comm's last rank, whose job rank is the first
 *     restart slot, and an allreduce over all is right; a second restart,
 *     beyond the one allowed, is refused, saying why.
 * CRNET_TRANSPORT (the test's environment) picks shared memory or TCP.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "comm.h"
#include "crnet.h"
#include "netjob.h"

#define FAIL_IF(cond, ...)                                                     \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "rank %d: ", rank);                                      \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      return EXIT_FAIL;                                                        \
    }                                                                          \
  } while (0)

static int init_survive(crnet_comm **c) {
  setenv("CRNET_ON_FAILURE", "continue", 1);
  setenv("CRNET_TIMEOUT", "60", 1); /* a hang fails the case, named */
  return crnet_comm_init(c, NULL);
}

/* Every rank but `me` has finished its first calls (report_raise): a rank
 * that is to die or revoke waits for that, so that what the others have
 * under way is the call the case is about. */
static bool others_past(int me, int size) {
  for (int r = 0; r < size; r++)
    if (r != me && !report_await(r, 30))
      return false;
  return true;
}

/* The lost ranks of c, as "1,3". */
static void lost_list(crnet_comm *c, char *buf, size_t n) {
  int ranks[16], k = crnet_comm_lost(c, ranks, 16);
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < k && i < 16 && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? "," : "", ranks[i]);
}

/* --- lost_rank_shrink ---------------------------------------------------- */

#define VICTIM 3

static int rank_shrink(int rank, int size, void *arg) {
  crnet_comm *c, *sub, *s;
  int v = 1, sum = 0, rc, flag;
  char lost[64];
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  /* A comm without the victim, made while every rank is alive. */
  rc = crnet_comm_split(c, rank == VICTIM ? CRNET_UNDEFINED : 0, rank, &sub);
  FAIL_IF(rc != 0, "split: %d", rc);
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d, sum %d", rc, sum);
  if (rank != VICTIM)
    report_raise(rank);
  else if (others_past(rank, size))
    kill(getpid(), SIGKILL);
  else
    return EXIT_FAIL;
  /* The victim never calls this one. */
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != CRNET_EPEER && rc != CRNET_EREVOKED,
          "allreduce after the loss returned %d (%s)", rc,
          crnet_comm_errmsg(c));
  if (rc == CRNET_EPEER) {
    char want[32];
    snprintf(want, sizeof want, "lost rank %d", VICTIM);
    FAIL_IF(strstr(crnet_comm_errmsg(c), want) == NULL, "message: %s",
            crnet_comm_errmsg(c));
  }
  /* Comms without the victim go on. */
  rc = crnet_allreduce(sub, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size - 1, "sub-comm allreduce: %d, sum %d", rc,
          sum);
  FAIL_IF(crnet_comm_revoke(c) != 0, "revoke");
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != CRNET_EREVOKED, "allreduce on a revoked comm: %d", rc);
  flag = 1;
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != CRNET_EPEER || flag != 1,
          "agree before the ack: %d, flag %d (%s)", rc, flag,
          crnet_comm_errmsg(c));
  lost_list(c, lost, sizeof lost);
  FAIL_IF(strcmp(lost, "3") != 0, "lost ranks: \"%s\"", lost);
  {
    int acked[4] = {-1, -1, -1, -1};
    FAIL_IF(crnet_comm_ack_lost(c, acked, 4) != 1 || acked[0] != VICTIM,
            "ack: %d", acked[0]);
  }
  flag = rank != 1; /* the AND: 0 */
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != 0 || flag != 0, "agree after the ack: %d, flag %d", rc, flag);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0, "shrink: %d (%s)", rc, crnet_comm_errmsg(c));
  FAIL_IF(crnet_comm_size(s) != size - 1 ||
              crnet_comm_rank(s) != (rank < VICTIM ? rank : rank - 1),
          "shrunk comm: rank %d of %d", crnet_comm_rank(s), crnet_comm_size(s));
  v = rank;
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != (size - 1) * size / 2 - VICTIM,
          "allreduce on the shrunk comm: %d, sum %d", rc, sum);
  rc = crnet_barrier(s);
  FAIL_IF(rc != 0, "barrier on the shrunk comm: %d", rc);
  FAIL_IF(crnet_comm_destroy(s) != 0, "destroy shrunk");
  FAIL_IF(crnet_comm_destroy(sub) != 0, "destroy sub");
  crnet_comm_destroy(c);
  return EXIT_OK;
}

static void expect_victim_killed(const job *j, int victim) {
  ck_assert_msg(
      WIFSIGNALED(j->status[victim]) && WTERMSIG(j->status[victim]) == SIGKILL,
      "rank %d was to die by SIGKILL (status 0x%x)", victim, j->status[victim]);
  for (int r = 0; r < j->size; r++)
    ck_assert_msg(r == victim || exit_code(j, r) == EXIT_OK,
                  "survivor %d exited %d", r, exit_code(j, r));
}

START_TEST(lost_rank_shrink) {
  job j;
  reports_map();
  job_init(&j, 5, 20);
  run_job(&j, rank_shrink, NULL, 60);
  expect_victim_killed(&j, VICTIM);
}
END_TEST

/* --- coordinator_lost ---------------------------------------------------- */

static int rank_coordinator(int rank, int size, void *arg) {
  crnet_comm *c, *s;
  int v = 1, sum = 0, rc, flag;
  char lost[64];
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  if (rank != 0)
    report_raise(rank);
  else if (others_past(rank, size))
    kill(getpid(), SIGKILL);
  else
    return EXIT_FAIL;
  /* Straight into the agreement: its coordinator is dead, which some ranks
   * learn only while they wait for its decision. */
  flag = rank == 2 ? 0x6 : 0x7; /* bitwise: 0x6 */
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != CRNET_EPEER || flag != 0x6, "agree: %d, flag %d (%s)", rc,
          flag, crnet_comm_errmsg(c));
  lost_list(c, lost, sizeof lost);
  FAIL_IF(strcmp(lost, "0") != 0, "lost ranks: \"%s\"", lost);
  FAIL_IF(crnet_comm_ack_lost(c, NULL, 0) != 1, "ack");
  flag = 1;
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != 0 || flag != 1, "agree after the ack: %d, flag %d", rc, flag);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_rank(s) != rank - 1, "shrink: %d, rank %d", rc,
          crnet_comm_rank(s));
  v = rank;
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size * (size - 1) / 2,
          "allreduce on the shrunk comm: %d, sum %d", rc, sum);
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(coordinator_lost) {
  job j;
  reports_map();
  job_init(&j, 4, 20);
  run_job(&j, rank_coordinator, NULL, 60);
  expect_victim_killed(&j, 0);
}
END_TEST

/* --- revoke_ends_calls_on_every_member ----------------------------------- */

static int rank_revoke(int rank, int size, void *arg) {
  crnet_comm *c, *s;
  int v = 1, sum = 0, rc;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  FAIL_IF(crnet_comm_is_revoked(c) != 0, "revoked before the revoke");
  if (rank == 1) {
    /* The others are in (or about to call) an allreduce that waits on
     * this rank. */
    FAIL_IF(!others_past(rank, size), "the others never came");
    FAIL_IF(crnet_comm_revoke(c) != 0, "revoke");
  } else {
    report_raise(rank);
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    FAIL_IF(rc != CRNET_EREVOKED, "allreduce: %d (%s)", rc,
            crnet_comm_errmsg(c));
    FAIL_IF(strstr(crnet_comm_errmsg(c), "revoked by rank 1") == NULL,
            "message: %s", crnet_comm_errmsg(c));
  }
  FAIL_IF(crnet_comm_lost(c, NULL, 0) != 0, "nobody is lost");
  FAIL_IF(crnet_comm_is_revoked(c) != 1, "not revoked after the revoke");
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size || crnet_comm_rank(s) != rank,
          "shrink: %d", rc);
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "allreduce on the new comm: %d", rc);
  crnet_comm_destroy(s);
  rc = crnet_comm_destroy(c);
  FAIL_IF(rc != CRNET_EREVOKED, "destroy of the revoked comm: %d", rc);
  return EXIT_OK;
}

START_TEST(revoke_ends_calls_on_every_member) {
  job j;
  reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_revoke, NULL, 60);
  expect_all_ok(&j, "revoke");
}
END_TEST

/* The revoking rank dies as soon as its revoke returns, while the others
 * are in an allreduce: it ends with the revoke if that got out, with the
 * loss otherwise; the survivors shrink to the two of them. */
static int rank_revoke_and_die(int rank, int size, void *arg) {
  crnet_comm *c, *s;
  int v = 1, sum = 0, rc;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  if (rank == 1) {
    FAIL_IF(!others_past(rank, size), "the others never came");
    FAIL_IF(crnet_comm_revoke(c) != 0, "revoke");
    kill(getpid(), SIGKILL);
  }
  report_raise(rank);
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != CRNET_EREVOKED && rc != CRNET_EPEER, "allreduce: %d (%s)", rc,
          crnet_comm_errmsg(c));
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, NULL, 0);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size - 1 ||
              crnet_comm_rank(s) != (rank == 0 ? 0 : rank - 1),
          "shrink: %d, rank %d of %d", rc, crnet_comm_rank(s),
          crnet_comm_size(s));
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size - 1, "allreduce on the new comm: %d", rc);
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(revoker_dies) {
  job j;
  reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_revoke_and_die, NULL, 60);
  expect_victim_killed(&j, 1);
}
END_TEST

/* --- agreement_with_deaths ----------------------------------------------- */

/* Who dies, and where: arg of rank_agree_death. */
struct death {
  int rank;
  int told; /* crnet__agree_die_at's: ranks told, or -1 (a voter) */
};

/* The shared reports, mapped by the test before it forks the ranks. */
static rank_report *reports;

static int rank_agree_death(int rank, int size, void *arg) {
  const struct death *d = arg;
  crnet_comm *c, *s;
  int v = 1, sum = 0, rc, flag;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  /* The victim's last allreduce data must not die with it unread. */
  if (rank != d->rank)
    report_raise(rank);
  else if (others_past(rank, size))
    crnet__agree_die_at(1, d->told);
  else
    return EXIT_FAIL;
  flag = rank == d->rank ? 0x1 : 0x3;
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != 0 && rc != CRNET_EPEER, "agree: %d (%s)", rc,
          crnet_comm_errmsg(c));
  reports[rank].rc = rc;
  reports[rank].flag = flag;
  /* The same on every survivor, whatever it was: then go on together. */
  crnet_comm_ack_lost(c, NULL, 0);
  flag = 1;
  rc = crnet_comm_agree(c, &flag);
  FAIL_IF(rc != 0 && rc != CRNET_EPEER, "second agree: %d", rc);
  crnet_comm_ack_lost(c, NULL, 0);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size - 1, "shrink: %d, size %d", rc,
          rc == 0 ? crnet_comm_size(s) : -1);
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size - 1, "allreduce on the shrunk comm: %d", rc);
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

/* Runs one death at p = 5; returns the survivors' common (rc, flag), which
 * every survivor must have alike. */
static void agree_death(const struct death *d, int *rc, int *flag) {
  job j;
  reports = reports_map(); /* zeroed: no rank has raised */
  job_init(&j, 5, 20);
  run_job(&j, rank_agree_death, (void *)d, 60);
  expect_victim_killed(&j, d->rank);
  *rc = *flag = -1;
  for (int r = 0; r < j.size; r++) {
    if (r == d->rank)
      continue;
    if (*flag == -1) {
      *rc = reports[r].rc;
      *flag = reports[r].flag;
    }
    ck_assert_msg(reports[r].rc == *rc && reports[r].flag == *flag,
                  "rank %d agreed %d (rc %d), another survivor %d (rc %d)", r,
                  reports[r].flag, reports[r].rc, *flag, *rc);
  }
}

START_TEST(agreement_with_deaths) {
  int rc, flag;
  /* The coordinator told rank 1 and died: its decision (its own bits in
   * the flag, nobody lost) holds if rank 1 read it before it took over,
   * else rank 1 decides anew without it; alike everywhere either way. */
  struct death told_one = {0, 1};
  agree_death(&told_one, &rc, &flag);
  ck_assert_msg((rc == 0 && flag == 0x1) || (rc == CRNET_EPEER && flag == 0x3),
                "told one: rc %d, flag %d", rc, flag);
  printf("agreement_with_deaths: the coordinator told one rank and died: "
         "%s\n", rc == 0 ? "its decision adopted" : "decided anew");
  /* ... and told nobody: the survivors decide without it. */
  struct death told_none = {0, 0};
  agree_death(&told_none, &rc, &flag);
  ck_assert_msg(rc == CRNET_EPEER && flag == 0x3, "told none: rc %d, flag %d",
                rc, flag);
  /* A voter died once its vote was out: counted or lost, alike. */
  struct death voter = {3, -1};
  agree_death(&voter, &rc, &flag);
  ck_assert_msg((rc == 0 && flag == 0x1) || (rc == CRNET_EPEER && flag == 0x3),
                "voter: rc %d, flag %d", rc, flag);
}
END_TEST

/* --- death_in_a_shrink ------------------------------------------------- */

/* Rank 0, the coordinator, dies in the first agreement of a shrink after
 * telling one rank (crnet__agree_die_at): the survivors' shrink returns a
 * comm, the same on all; if the decision had rank 0 still alive, the new
 * comm reports its loss, and a second shrink leaves it out. */
static int rank_shrink_death(int rank, int size, void *arg) {
  crnet_comm *c, *s, *s2;
  int v = 1, sum = 0, rc;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  if (rank != 0)
    report_raise(rank);
  else if (others_past(rank, size))
    crnet__agree_die_at(1, 1); /* the shrink's first agreement */
  else
    return EXIT_FAIL;
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0, "shrink: %d (%s)", rc, crnet_comm_errmsg(c));
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  if (rc != 0) {
    /* Rank 0 was a member of what was decided: lost on the new comm
     * (or revoked there by a survivor that saw it first). */
    FAIL_IF((rc != CRNET_EPEER && rc != CRNET_EREVOKED) ||
                crnet_comm_size(s) != size,
            "allreduce on the first shrunk comm: %d, size %d", rc,
            crnet_comm_size(s));
    crnet_comm_revoke(s);
    crnet_comm_ack_lost(s, NULL, 0);
    rc = crnet_comm_shrink(s, &s2);
    FAIL_IF(rc != 0, "second shrink: %d", rc);
    crnet_comm_destroy(s);
    s = s2;
    rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  }
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size - 1 || sum != size - 1,
          "allreduce on the survivors' comm: %d, size %d, sum %d", rc,
          crnet_comm_size(s), sum);
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(death_in_a_shrink) {
  job j;
  reports_map();
  job_init(&j, 4, 20);
  run_job(&j, rank_shrink_death, NULL, 60);
  expect_victim_killed(&j, 0);
}
END_TEST

/* --- requests_and_messages ---------------------------------------------- */

static int rank_requests(int rank, int size, void *arg) {
  crnet_comm *c, *sub, *s;
  crnet_request *recv_any = NULL, *ar = NULL;
  int v = 1, sum = 0, got = -1, rc, rc_recv, rc_ar;
  const int victim = size - 1;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  rc = crnet_comm_split(c, rank == victim ? CRNET_UNDEFINED : 0, rank, &sub);
  FAIL_IF(rc != 0, "split: %d", rc);
  if (rank == victim) {
    /* Once the others' requests are posted: they wait on this rank. */
    FAIL_IF(!others_past(rank, size), "the others never posted");
    kill(getpid(), SIGKILL);
  }
  /* Nobody sends this message: only the loss can end the receive. */
  rc = crnet_irecv(c, &got, 1, CRNET_INT32, CRNET_ANY_SOURCE, 7, NULL,
                   &recv_any);
  FAIL_IF(rc != 0, "irecv: %d", rc);
  rc = crnet_iallreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM, &ar);
  FAIL_IF(rc != 0, "iallreduce: %d", rc);
  report_raise(rank);
  rc_ar = crnet_wait(&ar);
  rc_recv = crnet_wait(&recv_any);
  FAIL_IF(rc_ar != CRNET_EPEER && rc_ar != CRNET_EREVOKED,
          "iallreduce ended with %d", rc_ar);
  FAIL_IF(rc_recv != CRNET_EPEER && rc_recv != CRNET_EREVOKED,
          "irecv from any source ended with %d (got %d)", rc_recv, got);
  crnet_comm_revoke(c);
  /* Messages between survivors in a comm without the lost rank. */
  if (rank == 0)
    rc = crnet_send(sub, &rank, 1, CRNET_INT32, 1, 3);
  else if (rank == 1)
    rc = crnet_recv(sub, &got, 1, CRNET_INT32, CRNET_ANY_SOURCE, 3, NULL);
  FAIL_IF(rc != 0 || (rank == 1 && got != 0), "message on the sub-comm: %d",
          rc);
  crnet_comm_ack_lost(c, NULL, 0);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0, "shrink: %d", rc);
  /* And on the shrunk comm: a ring of messages. */
  int next = (rank + 1) % (size - 1), prev = (rank + size - 2) % (size - 1);
  rc = crnet_sendrecv(s, &rank, 1, CRNET_INT32, next, 5, &got, 1, CRNET_INT32,
                      CRNET_ANY_SOURCE, 5, NULL);
  FAIL_IF(rc != 0 || got != prev, "ring on the shrunk comm: %d, got %d", rc,
          got);
  crnet_comm_destroy(s);
  crnet_comm_destroy(sub);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(requests_and_messages) {
  job j;
  reports_map();
  job_init(&j, 4, 20);
  run_job(&j, rank_requests, NULL, 60);
  expect_victim_killed(&j, 3);
}
END_TEST

/* --- kill_in_a_large_message --------------------------------------------- */

#define BIG_BYTES ((size_t)64 << 20)
#define SENTINEL 0x5a

static int rank_large(int rank, int size, void *arg) {
  (void)size;
  crnet_comm *c, *s;
  crnet_request *req = NULL;
  uint8_t *buf = malloc(BIG_BYTES);
  int rc, done = 0;
  (void)arg;
  FAIL_IF(buf == NULL, "out of memory");
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  if (rank == 1) {
    memset(buf, 0x11, BIG_BYTES);
    reports[1].pid = (int)getpid();
    rc = crnet_isend(c, buf, BIG_BYTES, CRNET_BYTE, 0, 9, &req);
    FAIL_IF(rc != 0, "isend: %d", rc);
    /* Driven until rank 0 has seen the first bytes, then killed. */
    while (!report_await(0, 0)) {
      rc = crnet_test(&req, &done);
      FAIL_IF(rc != 0 || done, "the send ended before the kill: %d", rc);
    }
    kill(getpid(), SIGKILL);
  }
  if (rank == 0) {
    memset(buf, SENTINEL, BIG_BYTES);
    rc = crnet_irecv(c, buf, BIG_BYTES, CRNET_BYTE, 1, 9, NULL, &req);
    FAIL_IF(rc != 0, "irecv: %d", rc);
    while (rc == 0 && !done && buf[0] == SENTINEL)
      rc = crnet_test(&req, &done);
    FAIL_IF(rc != 0 || done,
            "the receive ended before its first bytes came: %d", rc);
    /* Nothing more is read until the sender is gone: it stops once the
     * link's buffers are full, far short of the message's end. */
    report_raise(0);
    FAIL_IF(!process_gone_await(reports[1].pid, 30), "rank 1 lives on");
    /* CRNET_EREVOKED when rank 2's revoke comes first. */
    rc = crnet_wait(&req);
    FAIL_IF(rc != CRNET_EPEER && rc != CRNET_EREVOKED,
            "the receive ended with %d (%s)", rc, crnet_comm_errmsg(c));
    FAIL_IF(buf[0] != 0x11 || buf[BIG_BYTES - 1] != SENTINEL,
            "not a partial message: first byte 0x%x, last 0x%x", buf[0],
            buf[BIG_BYTES - 1]);
  } else {
    /* Rank 2 learns of the loss at its next call on c. */
    int v = 1, sum;
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    FAIL_IF(rc != CRNET_EPEER && rc != CRNET_EREVOKED, "allreduce: %d", rc);
  }
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, NULL, 0);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != 2, "shrink: %d", rc);
  if (crnet_comm_rank(s) == 1) {
    memset(buf, 0x22, BIG_BYTES);
    rc = crnet_send(s, buf, BIG_BYTES, CRNET_BYTE, 0, 9);
    FAIL_IF(rc != 0, "send on the shrunk comm: %d", rc);
  } else {
    memset(buf, SENTINEL, BIG_BYTES);
    rc = crnet_recv(s, buf, BIG_BYTES, CRNET_BYTE, 1, 9, NULL);
    FAIL_IF(rc != 0, "recv on the shrunk comm: %d", rc);
    for (size_t i = 0; i < BIG_BYTES; i += 4093)
      FAIL_IF(buf[i] != 0x22, "byte %zu is 0x%x", i, buf[i]);
    FAIL_IF(buf[BIG_BYTES - 1] != 0x22, "the last byte");
  }
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  free(buf);
  return EXIT_OK;
}

START_TEST(kill_in_a_large_message) {
  job j;
  reports = reports_map();
  job_init(&j, 3, 20);
  run_job(&j, rank_large, NULL, 60);
  expect_victim_killed(&j, 1);
}
END_TEST

/* --- kill_in_each_collective -------------------------------------------- */

#define KILL_N 16384 /* int32: 64 KiB a rank */

enum kill_coll { K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_ALLTOALL,
                 K_REDUCE_SCATTER, K_SCAN, K_BARRIER, K_COUNT };
static const char *const kill_coll_names[] = {
    "allreduce", "bcast", "allgather", "alltoall", "reduce_scatter", "scan",
    "barrier"};

/* One call of collective k on c: rank r's data (r + 1 + i); the result's
 * check when `check` (the shrunk comm). 0, the call's error, or 1 for a
 * wrong result. */
static int one_call(crnet_comm *c, int k, int32_t *a, int32_t *b, bool check) {
  int r = crnet_comm_rank(c), p = crnet_comm_size(c), rc = 0;
  size_t n = KILL_N;
  for (size_t i = 0; i < n; i++)
    a[i] = (int32_t)(r + 1 + (int)(i % 7));
  switch (k) {
  case K_ALLREDUCE:
    rc = crnet_allreduce(c, a, b, n, CRNET_INT32, CRNET_SUM);
    for (size_t i = 0; check && rc == 0 && i < n; i++)
      if (b[i] != (int32_t)(p * (p + 1) / 2 + p * (int)(i % 7)))
        return 1;
    break;
  case K_BCAST:
    rc = crnet_bcast(c, a, n, CRNET_INT32, 0);
    for (size_t i = 0; check && rc == 0 && i < n; i++)
      if (a[i] != (int32_t)(1 + (int)(i % 7)))
        return 1;
    break;
  case K_ALLGATHER:
    rc = crnet_allgather(c, a, b, n / (size_t)p, CRNET_INT32);
    for (int q = 0; check && rc == 0 && q < p; q++)
      if (b[(size_t)q * (n / (size_t)p)] != q + 1)
        return 1;
    break;
  case K_ALLTOALL:
    rc = crnet_alltoall(c, a, b, n / (size_t)p, CRNET_INT32);
    for (int q = 0; check && rc == 0 && q < p; q++)
      if (b[(size_t)q * (n / (size_t)p)] !=
          (int32_t)(q + 1 + (int)(((size_t)r * (n / (size_t)p)) % 7)))
        return 1;
    break;
  case K_REDUCE_SCATTER:
    rc = crnet_reduce_scatter_block(c, a, b, n / (size_t)p, CRNET_INT32,
                                    CRNET_SUM);
    for (size_t i = 0; check && rc == 0 && i < n / (size_t)p; i++)
      if (b[i] != (int32_t)(p * (p + 1) / 2 +
                            p * (int)(((size_t)r * (n / (size_t)p) + i) % 7)))
        return 1;
    break;
  case K_SCAN:
    rc = crnet_scan(c, a, b, n, CRNET_INT32, CRNET_SUM);
    for (size_t i = 0; check && rc == 0 && i < n; i++)
      if (b[i] != (int32_t)((r + 1) * (r + 2) / 2 + (r + 1) * (int)(i % 7)))
        return 1;
    break;
  default:
    rc = crnet_barrier(c);
  }
  return rc;
}

static int rank_kill_coll(int rank, int size, void *arg) {
  int k = (int)(intptr_t)arg, rc = 0;
  const int victim = 2;
  int32_t *a = calloc(KILL_N, sizeof *a), *b = calloc(KILL_N, sizeof *b);
  crnet_comm *c, *s;
  FAIL_IF(a == NULL || b == NULL, "memory");
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  /* The victim dies before its call 3, while the others wait in theirs
   * (a bcast's root, which only sends, may finish its call: the ranks'
   * small allreduce after each call stops the loop for all alike). */
  for (int i = 0; i < 50 && rc == 0; i++) {
    int32_t go = 1;
    if (rank == victim && i == 3)
      kill(getpid(), SIGKILL);
    rc = one_call(c, k, a, b, false);
    if (rc == 0)
      rc = crnet_allreduce(c, CRNET_IN_PLACE, &go, 1, CRNET_INT32, CRNET_MIN);
  }
  FAIL_IF(rc != CRNET_EPEER && rc != CRNET_EREVOKED, "%s: loop ended with %d",
          kill_coll_names[k], rc);
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, NULL, 0);
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size - 1, "%s: shrink: %d",
          kill_coll_names[k], rc);
  for (int i = 0; i < 3; i++) {
    rc = one_call(s, k, a, b, true);
    FAIL_IF(rc != 0, "%s on the shrunk comm: %s", kill_coll_names[k],
            rc == 1 ? "a wrong result" : crnet_strerror(rc));
  }
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  free(a);
  free(b);
  return EXIT_OK;
}

START_TEST(kill_in_each_collective) {
  for (int k = 0; k < K_COUNT; k++) {
    job j;
    job_init(&j, 5, 20);
    run_job(&j, rank_kill_coll, (void *)(intptr_t)k, 60);
    expect_victim_killed(&j, 2);
  }
}
END_TEST

/* --- revoke_from_another_thread ------------------------------------------ */

struct revoker {
  crnet_comm *c;
  pid_t main_tid;
  int rc;
};

static void *revoke_thread(void *arg) {
  struct revoker *rv = arg;
  /* The main thread is blocked in its allreduce, asleep in the loop. */
  rv->rc = thread_asleep_await(rv->main_tid, 30) ? crnet_comm_revoke(rv->c)
                                                 : CRNET_ETIMEDOUT;
  return NULL;
}

static int rank_revoke_thread(int rank, int size, void *arg) {
  crnet_comm *c, *s;
  int v = 1, sum = 0, rc;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  if (rank == 0) {
    struct revoker rv = {c, thread_id(), -1};
    pthread_t t;
    FAIL_IF(pthread_create(&t, NULL, revoke_thread, &rv) != 0, "thread");
    /* Rank 1 calls only once this has returned: it waits on a live rank. */
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    pthread_join(t, NULL);
    report_raise(rank);
    FAIL_IF(rv.rc != 0, "revoke from the thread: %d", rv.rc);
    FAIL_IF(rc != CRNET_EREVOKED, "allreduce: %d (%s)", rc,
            crnet_comm_errmsg(c));
  } else {
    FAIL_IF(!report_await(0, 30), "rank 0 never returned");
    /* Rank 0's data for that allreduce left before its revoke, which
     * follows it on the link: this rank's may complete with it, as a call
     * may that ends before a revoke arrives. The next one cannot. */
    rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    if (rc == 0)
      rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
    FAIL_IF(rc != CRNET_EREVOKED, "allreduce after the revoke: %d", rc);
  }
  rc = crnet_comm_shrink(c, &s);
  FAIL_IF(rc != 0 || crnet_comm_size(s) != size, "shrink: %d", rc);
  rc = crnet_allreduce(s, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "allreduce on the new comm: %d", rc);
  crnet_comm_destroy(s);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(revoke_from_another_thread) {
  job j;
  reports_map();
  job_init(&j, 2, 20);
  run_job(&j, rank_revoke_thread, NULL, 60);
  expect_all_ok(&j, "revoke from a thread");
}
END_TEST

/* --- off_by_default ------------------------------------------------------ */

static int rank_off(int rank, int size, void *arg) {
  crnet_comm *c, *s = NULL;
  int flag = 1;
  (void)arg;
  (void)size;
  unsetenv("CRNET_ON_FAILURE");
  FAIL_IF(crnet_comm_init(&c, NULL) != 0, "init");
  FAIL_IF(crnet_comm_agree(c, &flag) != CRNET_EINVAL, "agree");
  FAIL_IF(strstr(crnet_comm_errmsg(c), "CRNET_ON_FAILURE=continue") == NULL,
          "message: %s", crnet_comm_errmsg(c));
  FAIL_IF(crnet_comm_shrink(c, &s) != CRNET_EINVAL || s != NULL, "shrink");
  FAIL_IF(crnet_comm_agree(NULL, &flag) != CRNET_EINVAL ||
              crnet_comm_agree(c, NULL) != CRNET_EINVAL ||
              crnet_comm_shrink(c, NULL) != CRNET_EINVAL ||
              crnet_comm_revoke(NULL) != CRNET_EINVAL ||
              crnet_comm_is_revoked(NULL) != CRNET_EINVAL ||
              crnet_comm_is_revoked(c) != 0 ||
              crnet_comm_lost(NULL, NULL, 0) != CRNET_EINVAL ||
              crnet_comm_lost(c, NULL, 1) != CRNET_EINVAL ||
              crnet_comm_ack_lost(NULL, NULL, 0) != CRNET_EINVAL ||
              crnet_comm_ack_lost(c, NULL, 1) != CRNET_EINVAL,
          "bad arguments");
  /* Still a working comm: the refusals changed nothing. */
  FAIL_IF(crnet_barrier(c) != 0, "barrier");
  crnet_comm_destroy(c);
  return EXIT_OK;
}

/* --- restarted_rank_joins ------------------------------------------------- */

#define GROW_TRIES 1000

static void on_joins_done(crnet__rendezvous_server *srv, int status,
                          const int *missing, int nmissing, void *arg) {
  (void)srv;
  (void)missing;
  (void)nmissing;
  (void)arg;
  (void)status; /* the server stays open for joins */
}

/* Serves job j's rendezvous in a child, as crlaunch --restart does: it
 * stays open after the table, for `restarts` joins, until killed. */
static pid_t serve_joins(const job *j, int restarts) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    uint8_t key[CRNET__KEY_BYTES];
    crnet__rendezvous_server *srv;
    uv_loop_t loop;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (crnet__key_parse_hex(j->key, key) != 0 || uv_loop_init(&loop) != 0 ||
        crnet__rendezvous_server_start(&srv, &loop, key, j->size, NULL, j->port,
                                       j->init_timeout, 10, on_joins_done,
                                       NULL) != 0 ||
        crnet__rendezvous_server_allow_joins(srv, restarts) != 0)
      _exit(2);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(0);
  }
  return pid;
}

/* A restarted process of job index `index`, the job's restart `k`, in
 * j->pids[slot]. */
static void start_restarted(job *j, int slot, int index, int k, rank_fn fn) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char v[16];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rank_env(j, index, NULL);
    snprintf(v, sizeof v, "%d", k);
    setenv("CRNET_RESTARTED", v, 1);
    _exit(fn(index, j->size, NULL));
  }
  j->pids[slot] = pid;
}

/* A restarted process the rendezvous must refuse, saying `want`. */
static int refused(int rank, const char *want) {
  crnet_comm *c;
  int rc = init_survive(&c);
  FAIL_IF(rc == 0, "a restarted process was let in");
  FAIL_IF(strstr(crnet_init_errmsg(), want) == NULL, "init: %s",
          crnet_init_errmsg());
  return EXIT_OK;
}

static int rank_too_early(int rank, int size, void *arg) {
  (void)size;
  (void)arg;
  return refused(rank, "a restarted rank came before every rank had started");
}

static int rank_one_too_many(int rank, int size, void *arg) {
  (void)size;
  (void)arg;
  return refused(rank, "rank 2 restarted, but the job's 1 restart has been "
                       "used");
}

/* The restarted process: crnet_comm_init returns the comm it was admitted
 * to, as its last rank. */
static int rank_newcomer(int rank, int size, void *arg) {
  crnet_comm *c;
  int v = 1, sum = 0, rc;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  FAIL_IF(crnet_comm_joined(c) != 1 || crnet_comm_rank(c) != size - 1 ||
              crnet_comm_size(c) != size ||
              crnet_comm_job_rank(c, size - 1) != size,
          "admitted as rank %d of %d, job rank %d", crnet_comm_rank(c),
          crnet_comm_size(c), crnet_comm_job_rank(c, crnet_comm_rank(c)));
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "allreduce: %d, sum %d", rc, sum);
  rc = crnet_comm_destroy(c); /* the world with it: c is gone either way */
  FAIL_IF(rc != 0, "destroy: %s", crnet_strerror(rc));
  return EXIT_OK;
}

static int rank_regrow(int rank, int size, void *arg) {
  crnet_comm *c, *g = NULL;
  int v = 1, sum = 0, rc, tries = 0;
  (void)arg;
  FAIL_IF(init_survive(&c) != 0, "init: %s", crnet_init_errmsg());
  FAIL_IF(crnet_comm_joined(c) != 0, "joined on an original rank");
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "first allreduce: %d", rc);
  if (rank != size - 1)
    report_raise(rank);
  else if (others_past(rank, size))
    kill(getpid(), SIGKILL);
  else
    return EXIT_FAIL;
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != CRNET_EPEER && rc != CRNET_EREVOKED, "allreduce: %d", rc);
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, NULL, 0);
  /* Grown until the restarted rank is in (every survivor sees the same
   * sizes, so all stop alike). */
  do {
    crnet_comm *next;
    rc = crnet_comm_grow(g != NULL ? g : c, &next);
    FAIL_IF(rc != 0, "grow: %d (%s)", rc, crnet_comm_errmsg(c));
    if (g != NULL)
      crnet_comm_destroy(g);
    g = next;
    if (crnet_comm_size(g) < size)
      usleep(10000);
  } while (crnet_comm_size(g) < size && ++tries < GROW_TRIES);
  FAIL_IF(crnet_comm_size(g) != size || crnet_comm_rank(g) != rank,
          "grown to rank %d of %d after %d tries", crnet_comm_rank(g),
          crnet_comm_size(g), tries);
  FAIL_IF(crnet_comm_joined(g) != 0, "joined on a survivor");
  rc = crnet_allreduce(g, &v, &sum, 1, CRNET_INT32, CRNET_SUM);
  FAIL_IF(rc != 0 || sum != size, "allreduce on the grown comm: %d, sum %d", rc,
          sum);
  crnet_comm_destroy(g);
  crnet_comm_destroy(c);
  return EXIT_OK;
}

START_TEST(restarted_rank_joins) {
  job j;
  pid_t server;
  int st;
  reports_map();
  job_init(&j, 3, 20);
  j.external_rdv = true;
  setenv("CRNET_RESTARTS", "1", 1);
  server = serve_joins(&j, 1);
  start_restarted(&j, 3, 2, 1, rank_too_early);
  wait_ranks(&j, 3, 1, 30);
  ck_assert_msg(exit_code(&j, 3) == EXIT_OK, "the early restart: %d",
                exit_code(&j, 3));
  for (int r = 0; r < 3; r++)
    start_rank(&j, r, rank_regrow, NULL, NULL);
  ck_assert_int_eq(waitpid(j.pids[2], &st, 0), j.pids[2]);
  j.pids[2] = 0;
  ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                "rank 2 was to die by SIGKILL (status 0x%x)", st);
  start_restarted(&j, 4, 2, 1, rank_newcomer);
  wait_ranks(&j, 0, 2, 60);
  wait_ranks(&j, 4, 1, 60);
  for (int r = 0; r < 5; r++)
    ck_assert_msg(r == 2 || r == 3 || exit_code(&j, r) == EXIT_OK,
                  "process %d exited %d", r, exit_code(&j, r));
  start_restarted(&j, 5, 2, 2, rank_one_too_many);
  wait_ranks(&j, 5, 1, 30);
  ck_assert_msg(exit_code(&j, 5) == EXIT_OK, "the restart too many: %d",
                exit_code(&j, 5));
  kill(server, SIGKILL);
  waitpid(server, &st, 0);
  unsetenv("CRNET_RESTARTS");
}
END_TEST

START_TEST(off_by_default) {
  job j;
  job_init(&j, 2, 20);
  run_job(&j, rank_off, NULL, 60);
  expect_all_ok(&j, "off by default");
}
END_TEST

static Suite *survive_suite(void) {
  Suite *s = suite_create("survive");
  TCase *tc = tcase_create("survive");
  tcase_set_timeout(tc, test_seconds(200));
  tcase_add_test(tc, off_by_default);
  tcase_add_test(tc, revoke_ends_calls_on_every_member);
  tcase_add_test(tc, revoke_from_another_thread);
  tcase_add_test(tc, requests_and_messages);
  tcase_add_test(tc, death_in_a_shrink);
  tcase_add_test(tc, kill_in_each_collective);
  tcase_add_test(tc, agreement_with_deaths);
  tcase_add_test(tc, lost_rank_shrink);
  tcase_add_test(tc, coordinator_lost);
  tcase_add_test(tc, restarted_rank_joins);
  tcase_add_test(tc, kill_in_a_large_message);
  tcase_add_test(tc, revoker_dies);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(survive_suite()); }
