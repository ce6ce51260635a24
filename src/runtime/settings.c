/* The table of settings and the one reader of its rows. See settings.h.
 *
 * A row says everything about one variable that the code, crlaunch
 * --settings and docs/SETTINGS.md need: how to parse it (a type and its
 * limits), what an error says, its default, the crnet_config field that
 * wins over it. Parsing is one small function per type; the limits that
 * other modules own (streams, rounds in flight, the shared-memory ring)
 * come from their own constants.
 */
#include "settings.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "handshake.h"
#include "rendezvous.h"
#include "shm.h"

#define CONFIG(kind, field)                                                    \
  .config = CRNET__CONFIG_##kind,                                              \
  .config_offset = offsetof(crnet_config, field),                              \
  .config_field = "crnet_config." #field

/* 0, 1 or auto, as crnet_config's fields number them. */
#define OFF_ON_AUTO(off, on, autom)                                            \
  { {"0", (off)}, {"1", (on)}, {"auto", (autom)}, {NULL, 0} }

/* The longest schedule name (comm.h: crnet__settings.schedule), plus one. */
#define SCHEDULE_NAME_BYTES 32

#define SCHEDULE_ROW(coll, collective)                                         \
  [CRNET__SET_SCHEDULE + CRNET_COLL_##coll] = {                                \
      .name = "CRNET_" #coll "_SCHEDULE",                                      \
      .type = CRNET__SETTING_TEXT,                                             \
      .group = CRNET__READ_INIT,                                               \
      .default_value = "auto",                                                 \
      .max_length = SCHEDULE_NAME_BYTES,                                       \
      .what = "a schedule",                                                    \
      .read_by = "comm.c (names checked by select.c)",                         \
      .doc = "the schedule of " collective ", or auto "                       \
             "(docs/SCHEDULES.md; crnet_comm_set_schedule)"}

const crnet__setting crnet__settings_table[CRNET__SETTING_COUNT] = {
    [CRNET__SET_RANK] = {
        .name = "CRNET_RANK",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_JOB,
        .unset = "0, in a job of one rank",
        .lo = 0,
        .hi = INT32_MAX,
        .what = "a rank",
        .empty_is_value = true,
        CONFIG(CHOICE, rank),
        .read_by = "comm.c",
        .doc = "this process's rank (else Slurm's SLURM_PROCID)"},
    [CRNET__SET_SIZE] = {
        .name = "CRNET_SIZE",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_JOB,
        .unset = "1, a job of one rank",
        .lo = 1,
        .hi = CRNET__MAX_JOB_SIZE,
        .what = "a job size",
        .empty_is_value = true,
        CONFIG(CHOICE, size),
        .read_by = "comm.c",
        .doc = "the number of ranks of the job (else Slurm's SLURM_NTASKS)"},
    [CRNET__SET_PROGRESS_THREAD] = {
        .name = "CRNET_PROGRESS_THREAD",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "auto",
        .words = OFF_ON_AUTO(CRNET_PROGRESS_THREAD_OFF,
                             CRNET_PROGRESS_THREAD_ON,
                             CRNET_PROGRESS_THREAD_AUTO),
        CONFIG(CHOICE, progress_thread),
        .read_by = "comm.c",
        .doc = "a thread that moves nonblocking calls on while the program "
               "computes (auto: when the host has more cores than ranks)"},
    [CRNET__SET_INIT_TIMEOUT] = {
        .name = "CRNET_INIT_TIMEOUT",
        .type = CRNET__SETTING_SECONDS,
        .group = CRNET__READ_INIT,
        .default_value = "60",
        .lo = 0,
        .hi = 1e6,
        .empty_is_value = true,
        CONFIG(SECONDS, init_timeout),
        .read_by = "comm.c, crlaunch",
        .doc = "seconds crnet_comm_init may take"},
    [CRNET__SET_TIMEOUT] = {
        .name = "CRNET_TIMEOUT",
        .type = CRNET__SETTING_SECONDS,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .lo = 0,
        .hi = 1e6,
        .zero = "none",
        CONFIG(SECONDS, timeout),
        .read_by = "comm.c",
        .doc = "seconds one collective may take (crlaunch --coll-timeout)"},
    [CRNET__SET_LIVENESS_TIMEOUT] = {
        .name = "CRNET_LIVENESS_TIMEOUT",
        .type = CRNET__SETTING_SECONDS,
        .group = CRNET__READ_INIT,
        .default_value = "10",
        .lo = 1,
        .hi = 1e6,
        .zero = "the kernel's TCP timeouts",
        .read_by = "comm.c",
        .doc = "seconds a mesh link may go unanswered before the peer counts "
               "as lost (docs/RELIABILITY.md)"},
    /* Generous for a loaded host or a slow WAN link, short enough that a
     * silent stranger holds a connection for little time; a test or a
     * strict deployment may shorten it. */
    [CRNET__SET_HANDSHAKE_TIMEOUT] = {
        .name = "CRNET_HANDSHAKE_TIMEOUT",
        .type = CRNET__SETTING_SECONDS,
        .group = CRNET__READ_INIT,
        .default_value = "10",
        .lo = 0.1,
        .hi = 3600,
        .read_by = "comm.c, crlaunch",
        .doc = "seconds a connection may take to authenticate before the "
               "rendezvous, a mesh listener or a lazy link drops it"},
    [CRNET__SET_SPIN_US] = {
        .name = "CRNET_SPIN_US",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .unset = "50, or 1000 when ranks outnumber cores",
        .unit = "microseconds",
        .lo = 0,
        .hi = 1000000,
        .read_by = "comm.c",
        .doc = "microseconds without link activity a wait polls before it "
               "sleeps (0: off)"},
    [CRNET__SET_HOST_CPUS] = {
        .name = "CRNET_HOST_CPUS",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .unset = "this process's own CPUs",
        .unit = "CPUs",
        .lo = 1,
        .hi = CPU_SETSIZE,
        .read_by = "comm.c",
        .doc = "set by crlaunch: how many CPUs the host's ranks share"},
    [CRNET__SET_STREAM_PIECE] = {
        .name = "CRNET_STREAM_PIECE",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "65536",
        .unit = "bytes",
        .lo = 0,
        .hi = 1 << 30,
        .hi_as_power = true,
        .read_by = "comm.c",
        .doc = "bytes per piece when a large receive is reduced as it "
               "arrives (0: off)"},
    [CRNET__SET_ROUNDS_IN_FLIGHT] = {
        .name = "CRNET_ROUNDS_IN_FLIGHT",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "8",
        .unit = "rounds",
        .lo = 1,
        .hi = CRNET__MAX_ROUNDS_IN_FLIGHT,
        .read_by = "comm.c",
        .doc = "independent rounds of a schedule kept in flight at once"},
    [CRNET__SET_STREAMS] = {
        .name = "CRNET_STREAMS",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "1",
        .unit = "TCP streams per peer",
        .lo = 1,
        .hi = CRNET__MAX_STREAMS,
        .read_by = "comm.c",
        .doc = "TCP connections per pair of ranks (rank 0's is the job's)"},
    [CRNET__SET_STREAMS_MIN_BYTES] = {
        .name = "CRNET_STREAMS_MIN_BYTES",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "262144",
        .unit = "bytes",
        .lo = 1,
        .hi = 1 << 30,
        .hi_as_power = true,
        .read_by = "comm.c",
        .doc = "the smallest part a message is split into across streams"},
    [CRNET__SET_ENCRYPT] = {
        .name = "CRNET_ENCRYPT",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .words = {{"0", 0}, {"1", 1}, {NULL, 0}},
        .read_by = "comm.c",
        .doc = "1: encrypt and authenticate every connection (crlaunch "
               "--encrypt)"},
    [CRNET__SET_LAZY_LINKS] = {
        .name = "CRNET_LAZY_LINKS",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "auto",
        .words = OFF_ON_AUTO(CRNET_LAZY_LINKS_OFF, CRNET_LAZY_LINKS_ON,
                             CRNET_LAZY_LINKS_AUTO),
        CONFIG(CHOICE, lazy_links),
        .read_by = "comm.c",
        .doc = "connect to a peer on first use instead of the full mesh "
               "(auto: from 64 ranks)"},
    [CRNET__SET_SOCKET_BUFFER] = {
        .name = "CRNET_SOCKET_BUFFER",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .unit = "bytes",
        .lo = 0,
        .hi = 1 << 30,
        .hi_as_power = true,
        .read_by = "comm.c",
        .doc = "send and receive buffer bytes per mesh link (0: the "
               "kernel's autotuning)"},
    SCHEDULE_ROW(ALLREDUCE, "crnet_allreduce"),
    SCHEDULE_ROW(REDUCE_SCATTER, "crnet_reduce_scatter"),
    SCHEDULE_ROW(SCAN, "crnet_scan and crnet_exscan"),
    SCHEDULE_ROW(ALLTOALL, "crnet_alltoall"),
    SCHEDULE_ROW(ALLGATHER, "crnet_allgather"),
    SCHEDULE_ROW(BCAST, "crnet_bcast"),
    SCHEDULE_ROW(REDUCE, "crnet_reduce"),
    SCHEDULE_ROW(BARRIER, "crnet_barrier"),
    SCHEDULE_ROW(GATHER, "crnet_gather"),
    SCHEDULE_ROW(SCATTER, "crnet_scatter"),
    SCHEDULE_ROW(ALLTOALLV, "crnet_alltoallv"),
    [CRNET__SET_TRACE] = {
        .name = "CRNET_TRACE",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_INIT,
        .unset = "no trace",
        .max_length = 4096,
        .read_by = "comm.c, trace.c",
        .doc = "a path: a Chrome trace of every call and round, one file "
               "per rank"},
    [CRNET__SET_STATS] = {
        .name = "CRNET_STATS",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .words = {{"0", 0}, {"1", 1}, {NULL, 0}},
        .read_by = "comm.c",
        .doc = "1: report the counters at crnet_comm_destroy (crlaunch "
               "--stats)"},
    [CRNET__SET_TRANSPORT] = {
        .name = "CRNET_TRANSPORT",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "auto",
        .words = {{"auto", CRNET__TRANSPORT_AUTO},
                  {"tcp", CRNET__TRANSPORT_TCP},
                  {"shm", CRNET__TRANSPORT_SHM},
                  {NULL, 0}},
        .read_by = "comm.c",
        .doc = "how ranks of one node talk: shared memory (auto: TCP where "
               "it cannot be set up) or TCP"},
    /* Small rings stay in the caches: on the 2-core VM, 128 KiB against
     * 512 KiB took a 32 KiB allreduce from 8.0 to 5.6 us at p = 2 and from
     * 178 to 76 us at p = 8, a 512 KiB one from 223 to 193 us at p = 4,
     * and 8 MiB ones within 4 % either way (tools/bench/ab_crbench.sh,
     * docs/PERFORMANCE.md); 1 and 4 MiB rings were slower still. */
    [CRNET__SET_SHM_RING_BYTES] = {
        .name = "CRNET_SHM_RING_BYTES",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "131072",
        .unit = "bytes",
        .lo = CRNET__SHM_RING_MIN,
        .hi = CRNET__SHM_RING_MAX,
        .power_of_two = true,
        .read_by = "comm.c",
        .doc = "bytes of each of a same-node link's two rings"},
    [CRNET__SET_SHM_SINGLE_COPY] = {
        .name = "CRNET_SHM_SINGLE_COPY",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "auto",
        .words = OFF_ON_AUTO(0, 1, -1),
        .read_by = "comm.c",
        .doc = "large pieces cross shared memory in one copy (auto: where "
               "every rank of the host has a core)"},
    /* The board's cell holds CRNET__BOARD_DATA bytes (board.h). Where the
     * board stops paying: docs/PERFORMANCE-SHM.md, "Boards". */
    [CRNET__SET_SHM_BOARD_BYTES] = {
        .name = "CRNET_SHM_BOARD_BYTES",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "4096",
        .unit = "bytes",
        .lo = 0,
        .hi = 1 << (CRNET__RENDEZVOUS_BOARD_MAX - 1),
        .power_of_two = true,
        .read_by = "comm.c",
        .doc = "collectives on one host of at most this many bytes "
               "per peer go through shared-memory boards (0: never; rank "
               "0's value is the job's)"},
    [CRNET__SET_SHM_MEMBARRIER] = {
        .name = "CRNET_SHM_MEMBARRIER",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "auto",
        .words = OFF_ON_AUTO(0, 1, -1),
        .read_by = "comm.c",
        .doc = "shared-memory writes skip the full fence and a rank about to "
               "sleep fences its peers with membarrier instead (auto: where "
               "every rank of the host has a core; where the kernel has it)"},
    [CRNET__SET_ON_FAILURE] = {
        .name = "CRNET_ON_FAILURE",
        .type = CRNET__SETTING_WORD,
        .group = CRNET__READ_INIT,
        .default_value = "stop",
        .words = {{"stop", 0}, {"continue", 1}, {NULL, 0}},
        .read_by = "comm.c, fail.c",
        .doc = "continue: a lost rank fails only the comms that have it, "
               "and the survivors may revoke, agree and shrink "
               "(docs/RELIABILITY.md; crlaunch --keep-going); stop: the job "
               "ends with the first lost rank"},
    [CRNET__SET_RESTARTS] = {
        .name = "CRNET_RESTARTS",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .unit = "restarts",
        .lo = 0,
        .hi = 4096,
        .read_by = "comm.c, join.c",
        .doc = "how many lost ranks the job may restart (crlaunch --restart "
               "sets it on every rank; each rank keeps room for that many "
               "newcomers, whom crnet_comm_grow admits)"},
    [CRNET__SET_RESTARTED] = {
        .name = "CRNET_RESTARTED",
        .type = CRNET__SETTING_INTEGER,
        .group = CRNET__READ_INIT,
        .default_value = "0",
        .unit = "restart",
        .lo = 0,
        .hi = 4096,
        .read_by = "comm.c, join.c",
        .doc = "set by crlaunch --restart on a rank it started again (the "
               "job's n-th restart): crnet_comm_init joins the running job "
               "and returns the comm a survivors' crnet_comm_grow admits it "
               "to"},
    [CRNET__SET_RENDEZVOUS] = {
        .name = "CRNET_RENDEZVOUS",
        .type = CRNET__SETTING_HOST_PORT,
        .group = CRNET__READ_PEERS,
        .empty_is_value = true,
        .missing = "no rendezvous address: set CRNET_RENDEZVOUS=host:port "
                   "(crlaunch does this for you)",
        CONFIG(STRING, rendezvous),
        .read_by = "comm.c, bootstrap.c",
        .doc = "where the ranks meet: host:port, [v6addr]:port or name:port"},
    [CRNET__SET_LAUNCHER] = {
        .name = "CRNET_LAUNCHER",
        .type = CRNET__SETTING_FLAG,
        .group = CRNET__READ_PEERS,
        .unset = "rank 0 serves the rendezvous",
        .empty_is_value = true,
        .config_field = "crnet_config.serve_rendezvous",
        .read_by = "comm.c",
        .doc = "set by crlaunch: the rendezvous is served for the ranks"},
    [CRNET__SET_PORT_RANGE] = {
        .name = "CRNET_PORT_RANGE",
        .type = CRNET__SETTING_PORT_RANGE,
        .group = CRNET__READ_PEERS,
        .unset = "any port",
        CONFIG(STRING, port_range),
        .read_by = "comm.c, crlaunch",
        .doc = "lo-hi: the ports a rank may listen on (and rank 0's "
               "rendezvous)"},
    [CRNET__SET_IFACE] = {
        .name = "CRNET_IFACE",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_PEERS,
        .unset = "the kernel's choice",
        .max_length = 128,
        .empty_is_value = true,
        .read_by = "comm.c, netaddr.c, crlaunch",
        .doc = "the interface, network or address every socket binds to"},
    [CRNET__SET_JOB_KEY] = {
        .name = "CRNET_JOB_KEY",
        .type = CRNET__SETTING_KEY,
        .group = CRNET__READ_KEY,
        .unset = "CRNET_JOB_KEY_FILE",
        .empty_is_value = true,
        CONFIG(STRING, job_key_hex),
        .read_by = "comm.c",
        .doc = "the job key, 64 hex digits"},
    [CRNET__SET_JOB_KEY_FILE] = {
        .name = "CRNET_JOB_KEY_FILE",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_KEY,
        .unset = "no job key: an error in a job of 2 ranks or more",
        .empty_is_value = true,
        CONFIG(STRING, job_key_file),
        .read_by = "comm.c",
        .doc = "a file holding the job key (crlaunch writes one)"},
    [CRNET__SET_LAUNCHER_FD] = {
        .name = "CRNET_LAUNCHER_FD",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_ELSEWHERE,
        .unset = "no crlaunch to report to",
        .read_by = "report.c",
        .doc = "set by crlaunch, 3:<inode>: the socket a rank reports on"},
    [CRNET__SET_DEBUG] = {
        .name = "CRNET_DEBUG",
        .type = CRNET__SETTING_FLAG,
        .group = CRNET__READ_ELSEWHERE,
        .unset = "off",
        .read_by = "log.c",
        .doc = "set, and not 0: log connection events to stderr"},
    [CRNET__SET_NO_AESNI] = {
        .name = "CRNET_NO_AESNI",
        .type = CRNET__SETTING_FLAG,
        .group = CRNET__READ_ELSEWHERE,
        .unset = "AES-256-GCM where the CPU has AES-NI",
        .read_by = "seal.c",
        .doc = "set: encrypted links use XChaCha20-Poly1305 (for tests)"},
    [CRNET__SET_NO_F16C] = {
        .name = "CRNET_NO_F16C",
        .type = CRNET__SETTING_FLAG,
        .group = CRNET__READ_ELSEWHERE,
        .unset = "F16C/AVX2 where the CPU has them",
        .read_by = "ops.c",
        .doc = "set: float16 and bfloat16 sums use the portable kernels"},
    [CRNET__SET_TUNING_FILE] = {
        .name = "CRNET_TUNING_FILE",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_ELSEWHERE,
        .unset = "$XDG_CONFIG_HOME/crnet/tuning or ~/.config/crnet/tuning",
        .read_by = "tuning.c",
        .doc = "the tuning file auto reads (rank 0 only; empty: none)"},
    [CRNET__SET_SSH] = {
        .name = "CRNET_SSH",
        .type = CRNET__SETTING_TEXT,
        .group = CRNET__READ_ELSEWHERE,
        .default_value = "ssh",
        .read_by = "crlaunch (options.c)",
        .doc = "the command that reaches another host (--ssh wins)"},
    [CRNET__SET_AGENT_SILENCE] = {
        .name = "CRNET_AGENT_SILENCE",
        .type = CRNET__SETTING_SECONDS,
        .group = CRNET__READ_ELSEWHERE,
        .default_value = "60",
        .lo = 5,
        .hi = 1e6,
        .read_by = "crlaunch (agent.c)",
        .doc = "seconds an agent waits without a heartbeat before it stops "
               "its ranks (more than 5)"},
};

/* --- the parsers, one per type ------------------------------------------- */

static int parse_long(const char *v, long lo, long hi, long *out) {
  char *end;
  long x;
  errno = 0;
  x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    return -1;
  *out = x;
  return 0;
}

int crnet__settings_host_port(const char *v, char *host, size_t hostlen,
                              int *port) {
  const char *colon, *port_text;
  size_t n;
  long p;
  if (v[0] == '[') {
    const char *close = strchr(v, ']');
    if (close == NULL || close[1] != ':')
      return -1;
    n = (size_t)(close - v - 1);
    if (n == 0 || n >= hostlen)
      return -1;
    memcpy(host, v + 1, n);
    port_text = close + 2;
  } else {
    colon = strrchr(v, ':');
    if (colon == NULL)
      return -1;
    n = (size_t)(colon - v);
    if (n == 0 || n >= hostlen)
      return -1;
    memcpy(host, v, n);
    port_text = colon + 1;
  }
  host[n] = '\0';
  if (parse_long(port_text, 1, 65535, &p) != 0)
    return -1;
  *port = (int)p;
  return 0;
}

static bool is_power_of_two(long x) { return x > 0 && (x & (x - 1)) == 0; }

/* An integer limit as errors write it. */
static void format_limit(double x, bool as_power, char *buf, size_t len) {
  long v = (long)x;
  int k = 0;
  if (as_power && is_power_of_two(v)) {
    while ((1L << k) < v)
      k++;
    snprintf(buf, len, "2^%d", k);
  } else {
    snprintf(buf, len, "%ld", v);
  }
}

void crnet__setting_accepts(int id, char *buf, size_t len) {
  const crnet__setting *row = &crnet__settings_table[id];
  char hi[32];
  size_t used;
  if (row->what != NULL) {
    snprintf(buf, len, "%s", row->what);
    return;
  }
  switch (row->type) {
  case CRNET__SETTING_INTEGER:
    format_limit(row->hi, row->hi_as_power, hi, sizeof hi);
    if (row->power_of_two && row->lo == 0)
      snprintf(buf, len, "0 or a power of two up to %s", hi);
    else if (row->power_of_two)
      snprintf(buf, len, "a power of two from %ld to %s", (long)row->lo, hi);
    else
      snprintf(buf, len, "a number of %s (%ld to %s)", row->unit,
               (long)row->lo, hi);
    break;
  case CRNET__SETTING_SECONDS:
    if (row->zero != NULL && row->lo > 0)
      snprintf(buf, len, "a number of seconds (%g or more; 0: %s)", row->lo,
               row->zero);
    else if (row->zero != NULL)
      snprintf(buf, len, "a number of seconds (0: %s)", row->zero);
    else if (row->lo > 0)
      snprintf(buf, len, "a number of seconds from %g to %g", row->lo,
               row->hi);
    else
      snprintf(buf, len, "a number of seconds");
    break;
  case CRNET__SETTING_WORD:
    /* "0, 1 or auto" */
    buf[0] = '\0';
    for (int k = 0; row->words[k].word != NULL; k++) {
      const char *sep = k == 0                          ? ""
                        : row->words[k + 1].word == NULL ? " or "
                                                         : ", ";
      used = strlen(buf);
      snprintf(buf + used, len - used, "%s%s", sep, row->words[k].word);
    }
    break;
  case CRNET__SETTING_TEXT:
    snprintf(buf, len, "shorter than %zu bytes", row->max_length);
    break;
  case CRNET__SETTING_HOST_PORT:
    snprintf(buf, len, "host:port");
    break;
  case CRNET__SETTING_PORT_RANGE:
    snprintf(buf, len, "lo-hi with 1 <= lo <= hi <= 65535");
    break;
  case CRNET__SETTING_KEY:
    snprintf(buf, len, "64 hex digits");
    break;
  case CRNET__SETTING_FLAG:
    snprintf(buf, len, "anything: set or not");
    break;
  }
}

static int parse_seconds(const crnet__setting *row, const char *v,
                         crnet__setting_value *out) {
  char *end;
  double t = strtod(v, &end);
  if (end == v || *end != '\0' || !(t >= 0) || t > row->hi ||
      (t == 0 && row->zero == NULL) || (t > 0 && t < row->lo))
    return -1;
  out->seconds = t;
  return 0;
}

static int parse_word(const crnet__setting *row, const char *v,
                      crnet__setting_value *out) {
  for (int k = 0; row->words[k].word != NULL; k++)
    if (strcmp(v, row->words[k].word) == 0) {
      out->number = row->words[k].value;
      return 0;
    }
  return -1;
}

/* lo-hi. Two errors: not of that shape, and out of range. */
static int parse_port_range(const char *name, const char *v,
                            crnet__setting_value *out, char *err,
                            size_t errlen) {
  char lo[16], hi[16];
  const char *dash = strchr(v, '-');
  size_t n = dash != NULL ? (size_t)(dash - v) : 0;
  if (dash == NULL || n == 0 || n >= sizeof lo ||
      strlen(dash + 1) >= sizeof hi) {
    snprintf(err, errlen, "%s='%s' is not lo-hi", name, v);
    return CRNET_EINVAL;
  }
  memcpy(lo, v, n);
  lo[n] = '\0';
  snprintf(hi, sizeof hi, "%s", dash + 1);
  if (parse_long(lo, 1, 65535, &out->number) != 0 ||
      parse_long(hi, 1, 65535, &out->high) != 0 || out->number > out->high) {
    snprintf(err, errlen, "%s='%s' is not lo-hi with 1 <= lo <= hi <= 65535",
             name, v);
    return CRNET_EINVAL;
  }
  return 0;
}

int crnet__setting_parse(int id, const char *name, const char *text,
                         crnet__setting_value *out, char *err, size_t errlen) {
  const crnet__setting *row = &crnet__settings_table[id];
  char accepts[128];
  int rc = 0;
  out->text = text;
  switch (row->type) {
  case CRNET__SETTING_INTEGER:
    rc = parse_long(text, (long)row->lo, (long)row->hi, &out->number);
    /* A power of two, or 0 where 0 is allowed (it turns a thing off). */
    if (rc == 0 && row->power_of_two && !is_power_of_two(out->number) &&
        !(out->number == 0 && row->lo == 0))
      rc = -1;
    break;
  case CRNET__SETTING_SECONDS:
    rc = parse_seconds(row, text, out);
    break;
  case CRNET__SETTING_WORD:
    rc = parse_word(row, text, out);
    break;
  case CRNET__SETTING_TEXT:
    if (row->max_length > 0 && strlen(text) >= row->max_length) {
      /* A long path is cut short: the message is about its length. */
      if (row->what == NULL) {
        snprintf(err, errlen, "%s='%.40s...' is too long", name, text);
        return CRNET_EINVAL;
      }
      rc = -1;
    }
    break;
  case CRNET__SETTING_HOST_PORT: {
    char host[256];
    int port;
    rc = crnet__settings_host_port(text, host, sizeof host, &port);
    out->number = port;
    break;
  }
  case CRNET__SETTING_PORT_RANGE:
    return parse_port_range(name, text, out, err, errlen);
  case CRNET__SETTING_KEY: {
    /* The key itself is load_settings' to keep, in secret memory: this
     * only says whether it is one, and forgets it. */
    uint8_t key[CRNET__KEY_BYTES];
    rc = crnet__key_parse_hex(text, key);
    crnet__wipe(key, sizeof key);
    if (rc != 0) {
      snprintf(err, errlen, "%s is not 64 hex digits", name);
      return CRNET_EINVAL;
    }
    break;
  }
  case CRNET__SETTING_FLAG:
    break;
  }
  if (rc != 0) {
    crnet__setting_accepts(id, accepts, sizeof accepts);
    snprintf(err, errlen, "%s='%s' is not %s", name, text, accepts);
    return CRNET_EINVAL;
  }
  return 0;
}

/* --- reading a row -------------------------------------------------------- */

int crnet__setting_read(int id, const crnet_config *cfg,
                        crnet__setting_lookup *lookup, void *arg,
                        crnet__setting_value *out, char *err, size_t errlen) {
  const crnet__setting *row = &crnet__settings_table[id];
  const char *text = NULL;
  int rc;
  memset(out, 0, sizeof *out);
  out->source = CRNET__FROM_ENVIRONMENT;
  if (cfg != NULL) {
    /* memcpy: the field's type is the row's kind, read without casting
     * the config's pointer to another struct member's type. */
    const char *field = (const char *)cfg + row->config_offset;
    int choice;
    double seconds;
    switch (row->config) {
    case CRNET__CONFIG_NONE:
      break;
    case CRNET__CONFIG_CHOICE:
      memcpy(&choice, field, sizeof choice);
      if (choice >= 0) {
        out->source = CRNET__FROM_CONFIG;
        out->number = choice;
        return 0;
      }
      break;
    case CRNET__CONFIG_SECONDS:
      memcpy(&seconds, field, sizeof seconds);
      if (seconds > 0) {
        out->source = CRNET__FROM_CONFIG;
        out->seconds = seconds;
        return 0;
      }
      break;
    case CRNET__CONFIG_STRING:
      memcpy(&text, field, sizeof text);
      if (text != NULL)
        out->source = CRNET__FROM_CONFIG;
      break;
    }
  }
  if (out->source != CRNET__FROM_CONFIG)
    text = lookup(row->name, arg);
  if (text != NULL && (text[0] != '\0' || row->empty_is_value))
    return crnet__setting_parse(id, row->name, text, out, err, errlen);
  if (row->missing != NULL) {
    snprintf(err, errlen, "%s", row->missing);
    return CRNET_EINVAL;
  }
  if (row->default_value == NULL) {
    out->source = CRNET__FROM_NONE;
    out->text = NULL;
    return 0;
  }
  out->source = CRNET__FROM_DEFAULT;
  rc = crnet__setting_parse(id, row->name, row->default_value, out, err,
                            errlen);
  /* tests/test_settings.c parses every default. */
  return rc;
}

int crnet__settings_read(enum crnet__setting_group group,
                         const crnet_config *cfg,
                         crnet__setting_lookup *lookup, void *arg,
                         crnet__setting_value values[CRNET__SETTING_COUNT],
                         char *err, size_t errlen) {
  return crnet__settings_read_except(group, -1, cfg, lookup, arg, values, err,
                                     errlen);
}

int crnet__settings_read_except(
    enum crnet__setting_group group, int except, const crnet_config *cfg,
    crnet__setting_lookup *lookup, void *arg,
    crnet__setting_value values[CRNET__SETTING_COUNT], char *err,
    size_t errlen) {
  for (int id = 0; id < CRNET__SETTING_COUNT; id++) {
    if (crnet__settings_table[id].group != group)
      continue;
    if (id == except) {
      values[id].source = CRNET__FROM_NONE;
      values[id].text = NULL;
      continue;
    }
    int rc = crnet__setting_read(id, cfg, lookup, arg, &values[id], err,
                                 errlen);
    if (rc != 0)
      return rc;
  }
  return 0;
}
