/* The launcher's shared types: crlaunch's constants, its options, the job
 * and the processes it watches, and the functions its files call across
 * (crlaunch.c, options.c, stats.c, hosts_start.c, agent.c). See crlaunch.c
 * for the lifecycle of a job. Internal to crlaunch.
 */
#ifndef CRNET_LAUNCHER_LAUNCH_H
#define CRNET_LAUNCHER_LAUNCH_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bind.h"
#include "forward.h"
#include "handshake.h"
#include "hosts.h"
#include "remote.h"
#include "rendezvous.h"
#include "settings.h"

#define MAX_RANKS 4096
#define DEFAULT_INIT_TIMEOUT "60"
/* The library accepts an init timeout up to 10^6 s; --timeout is bounded so
 * that its milliseconds fit a uint64_t with room to spare. */
#define MAX_INIT_TIMEOUT_S 1e6
#define MAX_TIMEOUT_S 1e9

/* Grace periods, in milliseconds. */
#define FAILURE_GRACE_MS 1000 /* for the others to print why they fail
                                 (--grace may say) */
#define MAX_GRACE_S 3600
#define MAX_RESTARTS 4096     /* CRNET_RESTARTS's bound (settings.c) */
#define KILL_GRACE_MS 2000    /* between SIGTERM and SIGKILL */
#define SIGNAL_GRACE_MS 10000 /* between a passed-on signal and SIGKILL */
#define DRAIN_MS 1000         /* after the last exit, for pipes to reach EOF */
#define SETTLE_MS 100         /* for the reaping of simultaneous failures */
#define ABANDON_MS 5000       /* after SIGKILL, for an agent to report back */
#define HEARTBEAT_MS 5000     /* crlaunch to its agents, "still here" */
#define SILENCE_MS 60000      /* an agent without a word this long: lost
                                 (CRNET_AGENT_SILENCE, seconds, may say) */

#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_INTERNAL 125
#define EXIT_NOT_STARTED 127

/* The signals crlaunch passes on to the ranks: forwarded_signals, in
 * crlaunch.c. */
#define NSIGNALS ((size_t)3)

extern char **environ;

/* Variables crlaunch sets itself; -x may not override them. NULL-ended. */
extern const char *const crnet__launch_reserved_vars[];

/* The descriptor each rank on this host finds its report socket at
 * (CRNET_LAUNCHER_FD): how crnet_comm_abort() tells crlaunch the code. */
#define REPORT_FD 3

struct options {
  int nranks;
  int tag_output;
  int agent;                   /* --agent: started by crlaunch over SSH */
  int encrypt;                 /* --encrypt */
  int keep_going;              /* --keep-going */
  int restarts;                /* --restart N */
  char restarts_var[32];       /* CRNET_RESTARTS=N for the ranks */
  const char *coll_timeout;    /* --coll-timeout */
  int stats;                   /* --stats: CRNET_STATS=1, print the table */
  int settings;                /* --settings: print them, start nothing */
  crnet__bind_mode bind;       /* --bind */
  int report_bindings;         /* --report-bindings */
  char coll_timeout_var[64];   /* CRNET_TIMEOUT=... for the ranks */
  const char *hosts_spec;      /* --hosts */
  const char *hostfile;        /* --hostfile */
  const char *ssh;             /* --ssh, else CRNET_SSH, else "ssh" */
  const char *remote_crlaunch; /* --remote-crlaunch */
  int slurm;                   /* inside a Slurm allocation: its nodes are
                                  the hosts, srun reaches them */
  crnet__hostlist hosts;       /* from --hosts or --hostfile, placed */
  double timeout_s; /* 0: none */
  uint64_t grace_ms;  /* --grace, else FAILURE_GRACE_MS */
  const char **xvars; /* -x arguments as given */
  int nxvars;
  char **argv;        /* the program and its arguments */
  const char *init_timeout_str;
  double init_timeout_s;
  double handshake_timeout_s; /* CRNET_HANDSHAKE_TIMEOUT, as the ranks get
                                 it: the rendezvous uses it too */
};

struct job;

/* One collective's counters summed over the ranks that reported it. */
struct stats_row {
  char coll[24];
  int nranks;
  uint64_t calls, failed, rounds, sent, received;
  double seconds, seconds_max, wait, reduce;
};
#define MAX_STATS_ROWS 16

/* One rank's totals over its collectives. */
struct rank_stats {
  int seen;
  uint64_t calls, sent, received;
  double seconds;
};

/* A process crlaunch started and watches: one rank on this host, or the
 * SSH session of the agent running `count` ranks on another host. */
struct rank {
  struct job *job;
  int index; /* the (first) rank */
  int count; /* 1, or the ranks of a remote host */
  int local; /* a rank here: its place among this host's ranks */
  const crnet__host *host; /* NULL for a rank on this host */
  uv_pipe_t ctl;           /* remote: the session's stdin (remote.h) */
  int ctl_open;
  int closed_streams;      /* of out and err (--restart: restart.c) */
  int judged;              /* remote, --restart: its end was looked at */
  int reported;            /* remote: its agent reported a failed rank: */
  int fail_rank;           /* which, and its pid (status as below) */
  int fail_pid;
  int blamed;              /* the rank its first failure is due to (a
                              "fail" report), or -1 */
  int pid;
  int live;     /* spawned and not yet reaped */
  int failed;   /* reaped with a non-zero status or by a signal */
  int gone_seq; /* when it was first seen going (see
                   crnet__launch_judge_failures) */
  int64_t status;
  int term_signal;
  uv_process_t proc;
  crnet__fwd_stream out;
  crnet__fwd_stream err;
  crnet__fwd_stream rep; /* a rank here: its reports (REPORT_FD) */
};

enum stop_reason {
  RUNNING = 0,
  STOP_FAILURE, /* a rank failed */
  STOP_TIMEOUT, /* --timeout */
  STOP_SIGNAL,  /* crlaunch got a signal */
  STOP_ERROR,   /* crlaunch could not start the job */
  STOP_LOST,    /* agent: crlaunch went away */
};

struct job {
  uv_loop_t loop;
  const struct options *opt;
  struct rank *ranks; /* nprocs of them */
  int nprocs;
  int size;          /* ranks in the job, on every host */
  int nlocal;        /* of them on this host */
  crnet__bind_plan bind; /* their CPUs (bind.h) */
  const char *const *xvars; /* -x settings, or what an agent was sent */
  int nxvars;
  uint64_t grace_ms; /* after a failure, before SIGTERM */
  /* CRNET_ON_FAILURE=continue among the settings (crlaunch --keep-going):
   * a failed rank is reported and the others go on. */
  int keep_going;
  int first_status; /* keep_going: the first non-zero exit status, or 0 */
  int first_signal; /* keep_going: the first signal a rank died of, or 0 */
  int nended_well;  /* keep_going: ranks that exited 0 */
  /* --restart N: ranks lost here are started again while restarts_left
   * > 0; ranks has room for nprocs + restarts entries (a restarted
   * process gets an entry of its own: the lost one's output may still be
   * draining). */
  int restarts, restarts_left;
  int procs_cap; /* entries of ranks */
  /* --restart with remote hosts (restart.c): the session each job index
   * runs in now (NULL: this host), whether it has ended, the rendezvous
   * address each host's sessions get, and the hosts that are gone. */
  struct rank **where;
  uint8_t *ended;
  char (*rdv_of)[INET6_ADDRSTRLEN + 16];
  uint8_t *host_gone;
  const char *init_timeout_str;
  crnet__agent_config *agent; /* agent mode: what crlaunch sent */
  uv_pipe_t ctl_in;           /* agent mode: commands from crlaunch */
  int ctl_in_open;
  uv_timer_t abandon_timer;   /* SIGKILL sent, agents still silent */
  uv_timer_t heartbeat_timer; /* crlaunch: beats to the agents; an agent:
                                 how long crlaunch has been silent */
  char remote_crlaunch[4096]; /* crlaunch's path on the other hosts */
  char report[17];            /* the agents' report marker (remote.h) */
  uint64_t silence_ms;        /* agent: SILENCE_MS or CRNET_AGENT_SILENCE */
  int nlive;          /* ranks spawned and not yet reaped */
  int nstreams;       /* forwarding streams not yet closed */
  int ngone;          /* the last gone_seq given */
  crnet__rendezvous_server *rdv;
  uv_signal_t signals[NSIGNALS];
  uv_timer_t timeout_timer;
  uv_timer_t stop_timer; /* grace, then SIGTERM, then SIGKILL */
  uv_timer_t drain_timer;
  uv_timer_t judge_timer; /* settling before naming the first failure */
  int judging;            /* a failure is reaped, the verdict is pending */
  enum stop_reason stop;
  int exit_code;
  int nsignals;  /* signals received */
  int nstopped;  /* ranks we sent SIGTERM after a failure */
  int aborted;   /* a rank called crnet_comm_abort(); it decided */
  /* The ranks' counters (CRNET_STATS, crlaunch --stats): summed per
   * collective, and per rank; NULL until the first report. */
  struct stats_row *stats;
  int nstats;
  struct rank_stats *rank_stats;
  int finishing; /* handles are being closed */
  char **env;    /* the ranks' environment; env[rank_slot] is CRNET_RANK,
                    env[rank_slot + 1] CRNET_LAUNCHER_FD
                    (crnet__launch_spawn_proc) */
  int env_owned; /* env[env_owned..rank_slot) are ours to free */
  int rank_slot;
  char dir[512];     /* private directory, "" once removed */
  char keyfile[600]; /* key file in it, "" once removed */
  crnet__fwd_sink out;
  crnet__fwd_sink err;
};

/* ---- options.c: the command line ------------------------------------- */

/* Fills opt. Returns -1 to go on, or the exit status to stop with. */
int crnet__launch_parse_options(struct options *opt, int argc, char **argv);

/* A positive number of seconds up to max (fractions allowed), or -1. */
double crnet__launch_parse_seconds(const char *s, double max);

/* The length of the name in "NAME=..." or "NAME". */
int crnet__launch_var_name_len(const char *s);

/* "NAME=..." or "NAME" names `name`. */
int crnet__launch_names_var(const char *entry, const char *name, size_t len);

/* ---- crlaunch.c: process setup, key file, environment ---------------- */

/* Raises the descriptor limit as far as nranks ranks need and the hard
 * limit allows. */
void crnet__launch_raise_fd_limit(int nranks);

/* Removes the key file and its private directory, if not yet removed. */
void crnet__launch_remove_key_file(struct job *job);

/* Makes the private directory and writes the key into it. 0 or -1 (said). */
int crnet__launch_write_key_file(struct job *job,
                                 const uint8_t key[CRNET__KEY_BYTES]);

/* An entry of our environment the ranks do not inherit from us: crlaunch
 * sets it, or -x (an agent: crlaunch's list) does. */
int crnet__launch_skip_inherited(const struct job *job, const char *entry);

/* A string of vasprintf's making, or NULL. */
char *crnet__launch_str_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The ranks' environment in job->env, for a rendezvous at `rendezvous`. 0
 * or -1 (said). */
int crnet__launch_build_env(struct job *job, const char *rendezvous);

/* crlaunch --settings: every setting of the table (settings.h) as the
 * ranks would get it, one line each on stdout, "NAME=value (default)",
 * "(from the environment)", "(from -x)", "(set by crlaunch)"...; a bad
 * value on stderr with the library's message. 0, or EXIT_USAGE if any
 * value is bad. */
int crnet__launch_print_settings(const struct options *opt);

/* Reads setting `id` (settings.h) over the ranks' environment as
 * --settings shows it (the first -x entry naming it, else crlaunch's own
 * environment, else the default) with the library's parser, for a
 * setting crlaunch itself must follow. 0, or CRNET_EINVAL with the
 * library's message in err. */
int crnet__launch_rank_setting(const struct options *opt, int id,
                               crnet__setting_value *out, char *err,
                               size_t errlen);

/* ---- crlaunch.c: stopping -------------------------------------------- */

/* "" for 1, else "s". */
const char *crnet__launch_plural(int n);

/* Frees a write of crnet__launch_ctl_send, once done. */
void crnet__launch_on_ctl_written(uv_write_t *w, int status);

/* Writes bytes to a remote host's agent. `data` is copied. */
void crnet__launch_ctl_send(struct rank *r, const void *data, size_t len);

/* Says one line to every rank, here and through the agents ("abort",
 * "fail", "gone"). */
void crnet__launch_tell_ranks(struct job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sends sig to every rank not yet reaped; returns how many ranks. */
int crnet__launch_signal_live(struct job *job, int sig);

/* SIGTERM to every rank not yet reaped, SIGKILL KILL_GRACE_MS later. */
void crnet__launch_terminate(struct job *job);

/* Begins stopping the job; the first reason sets the exit status. */
void crnet__launch_job_stop(struct job *job, enum stop_reason reason,
                            int exit_code);

/* An agent: one report line to crlaunch on our stderr (remote.h). */
void crnet__launch_report_up(struct job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- crlaunch.c: callbacks, who failed first, a rank's abort --------- */

/* The rendezvous server is done: every rank came, or some never did. */
void crnet__launch_on_rdv_done(crnet__rendezvous_server *srv, int status,
                               const int *missing, int nmissing, void *arg);

/* Names the first failure and stops the job, if a verdict is pending. */
void crnet__launch_judge_failures(struct job *job);
/* --keep-going: a rank was lost, and the job goes on; `who` is named in a
 * line ("rank 3 (pid 42) was killed by signal 9 ...; the others go on"),
 * unless NULL. Its status or signal may become the exit status. */
void crnet__launch_lost_going_on(struct job *job, const char *who,
                                 int status, int term_signal);

/* Gives r its place in the order of going, at the first sign of it. */
void crnet__launch_mark_gone(struct rank *r);

/* The settling time after a failure is over: the verdict. */
void crnet__launch_on_settled(uv_timer_t *t);

/* A signal we got: passed on to every rank; a second one kills them. */
void crnet__launch_pass_signal(struct job *job, int signum);

/* Rank `rank` (pid, of r) called crnet_comm_abort(): the verdict. */
void crnet__launch_job_aborted(struct job *job, struct rank *r, int rank,
                               int pid, int code);

/* Rank `rank` (of r) failed because of rank `origin`. */
void crnet__launch_take_blame(struct job *job, struct rank *r, int rank,
                              int origin);

/* ---- crlaunch.c: starting, the job ----------------------------------- */

/* Spawns r's process, its output forwarded. 0 or a libuv error code. */
int crnet__launch_spawn_proc(struct job *job, struct rank *r, char **args,
                             char **env, int in, const char *prefix,
                             int detached);

/* One rank on this host. 0 or a libuv error code. */
int crnet__launch_spawn_rank(struct job *job, struct rank *r, char **argv);
int crnet__launch_spawn_rank_as(struct job *job, struct rank *r, char **argv,
                                const char *extra);
/* --restart: job index `index` (its place `local` among this host's
 * ranks) started again here as the job's restart k, with CRNET_RESTARTED=k,
 * in an entry of its own (a lost process's output may still drain). */
void crnet__launch_start_again(struct job *job, int index, int local, int k);
/* --restart (restart.c): a rank of this host was lost: started again
 * here if a restart is left. */
void crnet__launch_restart_local(struct job *job, struct rank *r);
/* --restart: rank `index` (pid `pid`) of remote host session r was lost;
 * its agent starts it again if a restart is left. */
void crnet__launch_restart_remote(struct job *job, struct rank *r, int index,
                                  int pid);
/* --restart with remote hosts: where each rank runs, which have ended
 * (the agents' "end" reports), and a session that is over (its process
 * reaped, its streams closed): its ranks that had not ended are named, and
 * start again on the next host. track: 0 or -1 (out of memory).
 * session_over: how many ranks had not ended, or -1 while r is not over
 * (or was judged before). */
int crnet__launch_restart_track(struct job *job);
void crnet__launch_restart_untrack(struct job *job);
void crnet__launch_rank_ended(struct job *job, int index);
int crnet__launch_session_over(struct job *job, struct rank *r);

/* Runs a job, or an agent's share of one (agent not NULL), to its end.
 * Returns the exit status. */
int crnet__launch_job_run(const struct options *opt,
                          crnet__agent_config *agent);

/* ---- stats.c: the counters, crlaunch --stats ------------------------- */

/* A rank's "stats" line, for a rank in [first, first + count): summed, or
 * passed on by an agent. 0, or -1 if malformed. */
int crnet__launch_take_stats(struct job *job, const char *line, int first,
                             int count);

/* crlaunch --stats: the table of the counters the ranks reported. */
void crnet__launch_print_stats(struct job *job);

/* ---- hosts_start.c: starting a job over several hosts ---------------- */

/* The environment sent to the agents, n entries: a fresh NULL-terminated
 * list, or NULL when out of memory. */
char **crnet__launch_remote_env(struct job *job, int *n);

/* "addr:port", or "[addr]:port" for IPv6. */
void crnet__launch_format_rendezvous(char *buf, size_t len, const char *addr,
                                     int port);

/* Serves the rendezvous on `bind` at a port of CRNET_PORT_RANGE, or any.
 * Returns the port, or -1 (said). */
int crnet__launch_serve_rendezvous(struct job *job, const uint8_t *key,
                                   const char *bind);

/* The SSH session of host r->host, its configuration on its stdin. 0 or a
 * libuv error code. */
int crnet__launch_spawn_remote(struct job *job, struct rank *r,
                               const uint8_t *key, const char *rendezvous,
                               char **env, int nenv);

/* The rendezvous address of each process in src and the one to listen
 * on in bind. 0 or -1 (said). */
int crnet__launch_plan_addresses(struct job *job, char (*src)[INET6_ADDRSTRLEN],
                                 char *bind, size_t bind_len);

/* Every HEARTBEAT_MS: a byte to each agent, "still here". */
void crnet__launch_on_heartbeat(uv_timer_t *t);

/* ---- agent.c: the agent on a remote host ----------------------------- */

/* An agent: the ranks of this host, as crlaunch asked. */
void crnet__launch_agent_start(struct job *job);

/* crlaunch --agent: read what crlaunch sent, then run this host's ranks. */
int crnet__launch_agent_main(const struct options *opt);

#endif
