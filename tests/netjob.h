/* Jobs of real ranks on loopback for the network tests (test_net,
 * test_security): a test forks the ranks of a job with the environment
 * contract set (rank 0 serving the rendezvous, no launcher), waits for them
 * with a deadline, and reads their exit codes. A rank function's return
 * value is its exit status; err_exit() turns a crnet error into one. */
#ifndef CRNET_TEST_NETJOB_H
#define CRNET_TEST_NETJOB_H

#include <stdbool.h>
#include <sys/types.h>

#include "crnet.h"
#include "handshake.h"
#include "time_scale.h"

#define MAX_RANKS 16

/* Exit codes a rank reports to the test. */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_ERR_BASE 20 /* 20 + (-crnet error) */

typedef int (*rank_fn)(int rank, int size, void *arg);

typedef struct job {
  int size;
  int port;
  char key[2 * CRNET__KEY_BYTES + 1];
  double init_timeout;
  double handshake_timeout; /* CRNET_HANDSHAKE_TIMEOUT; 0: not set */
  bool slurm; /* rank and size in Slurm's variables, not crnet's */
  const char *host;  /* of CRNET_RENDEZVOUS; NULL: 127.0.0.1 */
  bool external_rdv; /* the test serves the rendezvous, not rank 0 */
  pid_t pids[MAX_RANKS];
  int status[MAX_RANKS];
  double exit_time[MAX_RANKS];
} job;

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);
/* A loopback port that was free a moment ago. */
int free_port(void);
/* Every limit in seconds below is multiplied by test_seconds's factor
 * (time_scale.h): a job's init_timeout, wait_job's and report_await's
 * deadlines. */

/* A job of `size` ranks with a fresh key and rendezvous port. */
void job_init(job *j, int size, double init_timeout);

/* job_init with init_timeout as given, not scaled: for a case whose subject
 * is that timeout (it must fire, its value is in the message); the bounds
 * the case checks add scaled slack to it. */
void job_init_exact(job *j, int size, double init_timeout);
/* Sets the environment of `rank` (key: another hex key, or NULL for the
 * job's). Called in the child before the rank function. */
void rank_env(const job *j, int rank, const char *key);
/* Forks `rank`, which runs fn(rank, size, arg) and exits with its value. */
void start_rank(job *j, int rank, rank_fn fn, void *arg, const char *key);
/* Waits for every started rank, up to timeout_s; kills and fails on expiry. */
void wait_job(job *j, double timeout_s);
/* wait_job for ranks first .. first + count - 1 only; on expiry it kills
 * every started rank. */
void wait_ranks(job *j, int first, int count, double timeout_s);
/* Starts every rank with fn and waits. */
void run_job(job *j, rank_fn fn, void *arg, double timeout_s);
/* Checks (ck_assert) that every rank exited EXIT_OK, naming `what`, p and
 * the first rank that did not. */
void expect_all_ok(const job *j, const char *what);
/* A rank's exit status, or -1 if it died by a signal. */
int exit_code(const job *j, int rank);
/* The exit status that stands for crnet error rc. */
int err_exit(int rc);
/* A connected socket to 127.0.0.1:port, or -1. */
int connect_loopback(int port);
/* True once something listens on 127.0.0.1:port (from /proc/net/tcp, so
 * without connecting). */
bool listening_on(int port);

/* What each rank tells the test beyond its exit status, through memory
 * shared by the forked ranks: reports() maps MAX_RANKS of them once and
 * zeroes them (call it in the test before starting the ranks). */
typedef struct rank_report {
  int rc;
  double returned; /* now_s() when the call returned */
  double t_event;  /* a time the rank noted (its kill, its callback) */
  int flag;
  int go; /* report_raise: another rank may go on */
  int pid;  /* the rank's process id, for process_gone_await */
  int seen; /* the rank saw the state its test waits for (a test's own) */
  char errmsg[512];
} rank_report;

rank_report *reports_map(void);
/* One rank tells the others it is past a point (sets `go` in its report);
 * report_await waits (sleeping) until rank's `go` is set, for at most
 * `seconds`: true if it came. Synchronisation without a guessed sleep. */
void report_raise(int rank);
bool report_await(int rank, double seconds);
/* The calling thread's id, for thread_asleep_await. */
pid_t thread_id(void);
/* Waits up to `seconds` until thread tid of this process is asleep ('S' in
 * /proc/self/task/<tid>/stat, twice 5 ms apart): blocked in a wait, not
 * running towards it. True if it was seen so. */
bool thread_asleep_await(pid_t tid, double seconds);
/* Waits up to `seconds` until process pid has ended (a zombie, or gone):
 * its sockets are closed and what it wrote into them is on their way.
 * True if it has. */
bool process_gone_await(pid_t pid, double seconds);
/* Notes a call's result and the comm's message in rank's report (and on
 * stderr when it failed). */
void report_call(int rank, crnet_comm *c, int rc);

#endif
