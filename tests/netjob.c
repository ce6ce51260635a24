/* See netjob.h. */
#include "netjob.h"

#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  port = ntohs(a.sin_port);
  close(fd);
  return port;
}

void job_init_exact(job *j, int size, double init_timeout) {
  uint8_t key[CRNET__KEY_BYTES];
  memset(j, 0, sizeof *j);
  j->size = size;
  j->port = free_port();
  j->init_timeout = init_timeout;
  crnet__key_generate(key);
  crnet__key_to_hex(key, j->key);
  crnet__wipe(key, sizeof key);
}

void job_init(job *j, int size, double init_timeout) {
  job_init_exact(j, size, test_seconds(init_timeout));
}

void rank_env(const job *j, int rank, const char *key) {
  char v[64];
  snprintf(v, sizeof v, "%d", rank);
  setenv(j->slurm ? "SLURM_PROCID" : "CRNET_RANK", v, 1);
  snprintf(v, sizeof v, "%d", j->size);
  setenv(j->slurm ? "SLURM_NTASKS" : "CRNET_SIZE", v, 1);
  if (j->slurm) {
    unsetenv("CRNET_RANK");
    unsetenv("CRNET_SIZE");
  }
  snprintf(v, sizeof v, "%s:%d", j->host != NULL ? j->host : "127.0.0.1",
           j->port);
  setenv("CRNET_RENDEZVOUS", v, 1);
  snprintf(v, sizeof v, "%g", j->init_timeout);
  setenv("CRNET_INIT_TIMEOUT", v, 1);
  if (j->handshake_timeout > 0) {
    snprintf(v, sizeof v, "%g", j->handshake_timeout);
    setenv("CRNET_HANDSHAKE_TIMEOUT", v, 1);
  }
  setenv("CRNET_JOB_KEY", key != NULL ? key : j->key, 1);
  if (j->external_rdv)
    setenv("CRNET_LAUNCHER", "1", 1);
  else
    unsetenv("CRNET_LAUNCHER");
  unsetenv("CRNET_JOB_KEY_FILE");
}

void start_rank(job *j, int rank, rank_fn fn, void *arg,
                       const char *key) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* If the test process dies (Check's timeout), take the ranks along. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rank_env(j, rank, key);
    _exit(fn(rank, j->size, arg));
  }
  j->pids[rank] = pid;
}

void wait_job(job *j, double timeout_s) {
  wait_ranks(j, 0, j->size, timeout_s);
}

void wait_ranks(job *j, int first, int count, double timeout_s) {
  timeout_s = test_seconds(timeout_s);
  double deadline = now_s() + timeout_s;
  int left = 0;
  for (int r = first; r < first + count; r++)
    left += j->pids[r] > 0;
  while (left > 0) {
    bool reaped = false;
    /* Rank by rank, so that other children of the test (a rendezvous it
     * serves, a relay) are left alone. */
    for (int r = first; r < first + count; r++) {
      int st;
      if (j->pids[r] > 0 && waitpid(j->pids[r], &st, WNOHANG) == j->pids[r]) {
        j->status[r] = st;
        j->exit_time[r] = now_s();
        j->pids[r] = -1;
        left--;
        reaped = true;
      }
    }
    if (reaped)
      continue;
    if (now_s() > deadline) {
      for (int r = 0; r < j->size; r++) {
        if (j->pids[r] > 0) {
          kill(j->pids[r], SIGKILL);
          waitpid(j->pids[r], NULL, 0);
        }
      }
      ck_abort_msg("%d rank(s) still running after %g s: hung", left,
                   timeout_s);
    }
    usleep(2000);
  }
}

void run_job(job *j, rank_fn fn, void *arg, double timeout_s) {
  for (int r = 0; r < j->size; r++)
    start_rank(j, r, fn, arg, NULL);
  wait_job(j, timeout_s);
}

int exit_code(const job *j, int rank) {
  return WIFEXITED(j->status[rank]) ? WEXITSTATUS(j->status[rank]) : -1;
}

int err_exit(int rc) { return rc == 0 ? EXIT_OK : EXIT_ERR_BASE - rc; }

int connect_loopback(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool listening_on(int port) {
  FILE *f = fopen("/proc/net/tcp", "r");
  char line[512], want[32];
  bool found = false;
  if (f == NULL)
    return false;
  snprintf(want, sizeof want, "0100007F:%04X", port);
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char local[64], remote[64];
    unsigned state;
    if (sscanf(line, "%*d: %63s %63s %x", local, remote, &state) == 3 &&
        strcmp(local, want) == 0 && state == 0x0A)
      found = true;
  }
  fclose(f);
  return found;
}

static rank_report *shared_reports;

rank_report *reports_map(void) {
  if (shared_reports == NULL) {
    void *m = mmap(NULL, sizeof *shared_reports * MAX_RANKS,
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(m != MAP_FAILED, "mmap failed");
    shared_reports = m;
  }
  memset(shared_reports, 0, sizeof *shared_reports * MAX_RANKS);
  return shared_reports;
}

void report_raise(int rank) {
  __atomic_store_n(&shared_reports[rank].go, 1, __ATOMIC_RELEASE);
}

bool report_await(int rank, double seconds) {
  double until = now_s() + test_seconds(seconds);
  while (__atomic_load_n(&shared_reports[rank].go, __ATOMIC_ACQUIRE) == 0) {
    if (now_s() > until)
      return false;
    usleep(1000);
  }
  return true;
}

pid_t thread_id(void) { return (pid_t)syscall(SYS_gettid); }

/* Field 3 of a /proc stat file (the scheduler state), or 0 if there is no
 * such file (the process is gone). */
static char proc_state(const char *path) {
  FILE *f = fopen(path, "r");
  char line[512], *close_paren, state = 0;
  if (f == NULL)
    return 0;
  /* The command name (field 2) is in parentheses and may hold spaces. */
  if (fgets(line, sizeof line, f) != NULL &&
      (close_paren = strrchr(line, ')')) != NULL && close_paren[1] == ' ')
    state = close_paren[2];
  fclose(f);
  return state;
}

bool thread_asleep_await(pid_t tid, double seconds) {
  double until = now_s() + seconds;
  char path[64];
  int asleep = 0;
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  /* Twice in a row, 5 ms apart: a thread that blocks only for a moment on
   * its way (a lock another thread holds) is running again by then. */
  while ((asleep = proc_state(path) == 'S' ? asleep + 1 : 0) < 2) {
    if (now_s() > until)
      return false;
    usleep(5000);
  }
  return true;
}

bool process_gone_await(pid_t pid, double seconds) {
  double until = now_s() + seconds;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (;;) {
    char st = proc_state(path);
    if (st == 0 || st == 'Z' || st == 'X')
      return true;
    if (now_s() > until)
      return false;
    usleep(1000);
  }
}

void report_call(int rank, crnet_comm *c, int rc) {
  rank_report *r = &shared_reports[rank];
  r->rc = rc;
  r->returned = now_s();
  snprintf(r->errmsg, sizeof r->errmsg, "%s", crnet_comm_errmsg(c));
  if (rc != 0)
    fprintf(stderr, "rank %d: %s: %s\n", rank, crnet_err_name(rc),
            crnet_comm_errmsg(c));
}

void expect_all_ok(const job *j, const char *what) {
  for (int r = 0; r < j->size; r++)
    ck_assert_msg(exit_code(j, r) == EXIT_OK,
                  "%s: p=%d rank %d exited %d (its stderr says why)", what,
                  j->size, r, exit_code(j, r));
}
