/* crnet: collective communication for C programs over authenticated TCP links.
 *
 * A program calls crnet_comm_init() once per process; the processes (started by
 * crlaunch, or by any scheduler that sets the environment contract below) find
 * each other through a rendezvous, connect a full mesh of TCP links that are
 * mutually authenticated with a per-job key, and then call collectives.
 *
 * Conventions (as in libuv):
 *   - functions return 0 (CRNET_OK) on success and a negative CRNET_E* code on
 *     failure;
 *   - misuse (a NULL buffer, an unknown datatype, ...) returns CRNET_EINVAL and
 *     changes nothing: the communicator stays usable;
 *   - a failure of the job (a peer gone, a timeout, an abort, a mismatched call)
 *     is sticky: every later call on that communicator returns the same code,
 *     and crnet_comm_errmsg() says which peer, which collective, which round;
 *   - buffers are borrowed for the duration of the call only (nonblocking
 *     calls: until the request completes, see below).
 *
 * Environment contract (read by crnet_comm_init with cfg == NULL, and for any
 * field a crnet_config leaves unset):
 *   CRNET_RANK, CRNET_SIZE           this process's rank and the job size
 *                                    (else SLURM_PROCID, SLURM_NTASKS)
 *   CRNET_RENDEZVOUS                 host:port, [v6addr]:port or
 *                                    name:port of the rendezvous; without
 *                                    crlaunch, rank 0 serves it there (on
 *                                    every interface, dual stack, if the
 *                                    address is not one of its own)
 *   CRNET_JOB_KEY                    the job key, 64 hex digits (32 bytes), or
 *   CRNET_JOB_KEY_FILE               a file holding it (crlaunch uses a file)
 *   CRNET_PORT_RANGE                 lo-hi: ports this process may listen on
 *                                    (the rendezvous port, where rank 0
 *                                    serves it, must be inside)
 *   CRNET_IFACE                      an interface (eth0), a network
 *                                    (10.77.0.0/24, fd77::/64) or one
 *                                    address: every socket of the process
 *                                    binds to its address (docs/MULTIHOST.md)
 *   CRNET_INIT_TIMEOUT               seconds init may take (default 60)
 *   CRNET_DEBUG                      1: log connection events to stderr
 *   CRNET_TUNING_FILE                the cost-model constants the auto
 *                                    schedule uses (read by rank 0 only;
 *                                    default $XDG_CONFIG_HOME/crnet/tuning
 *                                    or ~/.config/crnet/tuning; empty: none;
 *                                    docs/TUNING.md)
 *   CRNET_SPIN_US                    microseconds a wait polls before it
 *                                    sleeps (default 50, adaptive, when the
 *                                    host has a core per rank; else 1000,
 *                                    yielding the core; 0: sleep at once)
 *   CRNET_HOST_CPUS                  the CPUs this host's ranks share, by
 *                                    which the two defaults above (and the
 *                                    progress thread's auto) count cores
 *                                    per rank (crlaunch sets it, having
 *                                    bound each rank to CPUs of its own;
 *                                    default: this process's CPUs)
 *   CRNET_STREAM_PIECE               bytes per piece of a large receive
 *                                    reduced as it arrives (default 65536;
 *                                    0: off)
 *   CRNET_SOCKET_BUFFER              socket buffer bytes per mesh link
 *                                    (default: the kernel's autotuning)
 *   CRNET_TRACE                      a Chrome trace of every call and round
 *                                    of this rank ("%r" or before the
 *                                    extension: the rank)
 *   CRNET_STATS                      1: the counters at destroy, to crlaunch
 *                                    or stderr
 *   CRNET_ROUNDS_IN_FLIGHT           independent rounds of a schedule run
 *                                    at once (default 8; 1 to 32)
 *   CRNET_STREAMS                    TCP connections per pair of ranks
 *                                    (default 1, at most 8; rank 0's value
 *                                    is the job's)
 *   CRNET_STREAMS_MIN_BYTES          a message is split across the streams
 *                                    only into parts of at least this many
 *                                    bytes (default 262144; rank 0's)
 *   CRNET_PROGRESS_THREAD            0, 1 or auto: a thread that moves
 *                                    nonblocking calls on in the background
 *                                    (default auto: on when the host has
 *                                    more cores than ranks of the job)
 *   CRNET_LAZY_LINKS                 0, 1 or auto: connect to a peer only
 *                                    on first use instead of the full mesh
 *                                    at init (default auto: on from 64
 *                                    ranks; rank 0's value is the job's)
 *
 * Network settings that do not fit the host fail init at once with
 * CRNET_EINVAL ("CRNET_IFACE=eth9: no such interface", "... no IPv6
 * address (the rendezvous at [fd77::1]:5000 is IPv6)", "... no local
 * address in this network", a malformed network, a CRNET_PORT_RANGE that
 * does not hold rank 0's rendezvous port); a range with every port in use
 * or a rendezvous port rank 0 cannot listen on, with CRNET_EIO; a
 * rendezvous nobody answers at, with CRNET_ETIMEDOUT after
 * CRNET_INIT_TIMEOUT, naming host:port and the last connection error.
 */
#ifndef CRNET_H
#define CRNET_H

#include <stddef.h>
#include <stdint.h>

#include "crnet_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CRNET_EXTERN __attribute__((visibility("default")))
#define CRNET_NODISCARD __attribute__((warn_unused_result))
#else
#define CRNET_EXTERN
#define CRNET_NODISCARD
#endif

/* The one list of error codes. It generates the enum, crnet_strerror() and
 * crnet_err_name(), so the three never drift apart. */
#define CRNET_ERRNO_MAP(XX)                                                    \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENOMEM, -2, "out of memory")                                              \
  XX(EPEER, -3, "a peer process is gone")                                      \
  XX(ETIMEDOUT, -4, "timed out")                                               \
  XX(EAUTH, -5, "authentication failed")                                       \
  XX(EMISMATCH, -6, "ranks made mismatched collective calls")                  \
  XX(EUNSUPPORTED, -7, "the chosen schedule cannot do this call")              \
  XX(EABORTED, -8, "the job was aborted")                                      \
  XX(EIO, -9, "network or system error")                                       \
  XX(ETRUNCATE, -10, "message larger than the receive buffer")                 \
  XX(ECANCELED, -11, "the receive was cancelled")                              \
  XX(EREVOKED, -12, "the communicator was revoked")

typedef enum crnet_errno {
  CRNET_OK = 0,
#define CRNET_ERRNO_ENUM_(name, value, msg) CRNET_##name = (value),
  CRNET_ERRNO_MAP(CRNET_ERRNO_ENUM_)
#undef CRNET_ERRNO_ENUM_
} crnet_errno;

/* Element types. CRNET_BYTE is for data that is moved: no built-in operator
 * reduces it, but a user operator may (opaque records only the program
 * knows the layout of). */
typedef enum crnet_datatype {
  CRNET_INT8 = 0,
  CRNET_INT16,
  CRNET_INT32,
  CRNET_INT64,
  CRNET_UINT8,
  CRNET_UINT16,
  CRNET_UINT32,
  CRNET_UINT64,
  CRNET_FLOAT16,  /* IEEE 754 binary16 */
  CRNET_BFLOAT16, /* the upper half of a binary32 */
  CRNET_FLOAT,
  CRNET_DOUBLE,
  CRNET_BYTE,
  CRNET_DATATYPE_COUNT
} crnet_datatype;

/* Reduction operators. Built-in operators are the values below; user
 * operators made by crnet_op_create() get other values. */
typedef int crnet_op;
enum {
  CRNET_SUM = 0,
  CRNET_PROD,
  CRNET_MIN,
  CRNET_MAX,
  CRNET_BAND, /* bitwise: integer types only */
  CRNET_BOR,
  CRNET_BXOR,
  CRNET_LAND, /* logical: result is 0 or 1 */
  CRNET_LOR,
  CRNET_OP_BUILTIN_COUNT
};

/* Collectives, for crnet_comm_set_schedule() and in error messages. */
typedef enum crnet_collective {
  CRNET_COLL_ALLREDUCE = 0,
  CRNET_COLL_REDUCE_SCATTER, /* block and irregular */
  CRNET_COLL_SCAN,           /* scan and exscan */
  CRNET_COLL_ALLTOALL,
  CRNET_COLL_ALLGATHER,
  CRNET_COLL_BCAST,
  CRNET_COLL_REDUCE,
  CRNET_COLL_BARRIER,
  CRNET_COLL_GATHER,
  CRNET_COLL_SCATTER,
  CRNET_COLL_ALLTOALLV,
  CRNET_COLL_COUNT
} crnet_collective;

/* As the send buffer: the operation works in place on the receive buffer.
 * Never a receive buffer, but for the root of crnet_scatter (its block then
 * stays in the send buffer, as MPI_IN_PLACE there); distinct send and
 * receive buffers must not overlap (both: CRNET_EINVAL). A plain void
 * pointer, so that it passes as either kind of buffer. */
#define CRNET_IN_PLACE ((void *)1)

/* A user reduction: inout[i] = in[i] (+) inout[i] for i < count. `in` always
 * holds the contribution of the lower-ranked processes. */
typedef void crnet_user_fn(const void *in, void *inout, size_t count,
                           crnet_datatype dt, void *ctx);

typedef struct crnet_comm crnet_comm;

/* A key-value store that every rank of the job reaches (torch's store, a
 * scheduler's), for a start with neither CRNET_RENDEZVOUS nor a job key
 * (docs/STARTING.md): rank 0 serves the rendezvous on a port of its own
 * choosing and publishes where, with a fresh job key, and the other ranks
 * look both up. Whoever can read the store can read the key: use one that
 * only the job reaches, or give the job a key (CRNET_JOB_KEY_FILE), which
 * is then not published. */
typedef struct crnet_directory {
  /* Rank 0: stores the string value under key. 0, or nonzero if it
   * failed. */
  int (*publish)(void *arg, const char *key, const char *value);
  /* The string stored under key, into value[0..capacity) with its
   * terminating zero, waiting for it up to timeout seconds. 0; CRNET_EIO
   * if the store failed before the timeout (the error then says so rather
   * than that the value never came); else nonzero if it is not there in
   * time, too long, or the store failed. */
  int (*lookup)(void *arg, const char *key, char *value, size_t capacity,
                double timeout);
  void *arg;
} crnet_directory;

/* Settings for crnet_comm_init(). Fill with crnet_config_init() first, so that
 * fields added later keep their defaults; every field left unset (-1, NULL or
 * 0 as noted) is taken from the environment contract above. */
typedef struct crnet_config {
  int rank;                 /* -1: CRNET_RANK */
  int size;                 /* -1: CRNET_SIZE; at most 2^24 */
  const char *rendezvous;   /* NULL: CRNET_RENDEZVOUS ("host:port") */
  const char *job_key_hex;  /* NULL: CRNET_JOB_KEY */
  const char *job_key_file; /* NULL: CRNET_JOB_KEY_FILE */
  const char *port_range;   /* NULL: CRNET_PORT_RANGE ("lo-hi") */
  double init_timeout;      /* seconds, at most 1e6; 0: CRNET_INIT_TIMEOUT,
                               else 60 */
  int serve_rendezvous;     /* -1: rank 0 serves unless crlaunch does */
  double timeout;           /* seconds one collective may take at most
                               (at most 1e6); 0: CRNET_TIMEOUT, else no
                               limit */
  int lazy_links;           /* CRNET_LAZY_LINK_* (-1: CRNET_LAZY_LINKS,
                               else auto); rank 0's is the job's */
  int progress_thread;      /* CRNET_PROGRESS_THREAD_* (-1:
                               CRNET_PROGRESS_THREAD, else auto) */
  const crnet_directory *directory; /* NULL: none, or the PMIx server's
                                       when one started the process; with
                                       one, rank and size are needed too */
} crnet_config;

/* crnet_config.progress_thread: whether nonblocking calls (crnet_iX) get
 * a background thread that moves them on while the program computes and
 * makes no crnet call (ON), or progress only inside crnet calls (OFF), or
 * ON when this host has a core to spare for it, more cores than ranks of
 * the job on it (AUTO). The thread starts at the first nonblocking call,
 * so a program of blocking calls never has one, and it sleeps while no
 * request is in flight. */
#define CRNET_PROGRESS_THREAD_OFF 0
#define CRNET_PROGRESS_THREAD_ON 1
#define CRNET_PROGRESS_THREAD_AUTO 2

/* crnet_config.lazy_links: connect the full mesh at init (OFF), or connect
 * to a peer only when a collective first needs it (ON), or ON from
 * CRNET_LAZY_LINKS_AUTO_MIN ranks (AUTO). */
#define CRNET_LAZY_LINKS_OFF 0
#define CRNET_LAZY_LINKS_ON 1
#define CRNET_LAZY_LINKS_AUTO 2
#define CRNET_LAZY_LINKS_AUTO_MIN 64

CRNET_EXTERN void crnet_config_init(crnet_config *cfg);

/* Joins the job: rendezvous, full mesh, authentication. Returns when every
 * link is up (with lazy links, CRNET_LAZY_LINKS: once every rank's address
 * is known; links then come on first use), or fails within the init
 * timeout naming the ranks that never appeared. On failure *comm is NULL; crnet_init_errmsg() tells why.
 * If SIGPIPE has its default action, init sets it to be ignored, so that a
 * peer's death is an error code and not the end of this process. A process
 * is one rank: CRNET_EINVAL, changing nothing, while a world comm of this
 * process is open (make more comms with crnet_comm_dup or crnet_comm_split),
 * and after it was destroyed in a crlaunch job (its job key is gone). */
CRNET_EXTERN CRNET_NODISCARD int crnet_comm_init(crnet_comm **comm,
                                                 const crnet_config *cfg);

/* The reason the last crnet_comm_init() of this thread failed. */
CRNET_EXTERN const char *crnet_init_errmsg(void);

/* Leaves the job in order: every rank's data is delivered and the links close
 * without a reset. Returns the communicator's sticky error, if any. NULL is a
 * no-op.
 *
 * A comm made by crnet_comm_split or crnet_comm_dup is destroyed locally
 * (no goodbye: its peers need nothing from it once its calls are over),
 * in any order with the others made from the same world; the comm of
 * crnet_comm_init goes last: destroying it while any comm made from it is
 * alive returns CRNET_EINVAL and changes nothing. A comm with requests in
 * flight is refused the same way. */
CRNET_EXTERN int crnet_comm_destroy(crnet_comm *comm);

CRNET_EXTERN int crnet_comm_rank(const crnet_comm *comm);
CRNET_EXTERN int crnet_comm_size(const crnet_comm *comm);

/* The rank in the job (in the comm of crnet_comm_init) of this comm's rank
 * `rank`, as MPI_Group_translate_ranks gives it: what tells which ranks
 * two comms of one job share. -1 if comm is NULL or rank is not in
 * 0..size-1. Local: no message. */
CRNET_EXTERN int crnet_comm_job_rank(const crnet_comm *comm, int rank);

/* The host of the comm's rank `rank`: hosts are numbered 0, 1, ... in the
 * order of their first rank in the comm, alike on every rank of it. Ranks
 * of one host share a kernel boot and a network namespace (the ranks whose
 * links go through shared memory; the namespaces of the multi-host test
 * bed are hosts of their own). What MPI_Comm_split_type's
 * MPI_COMM_TYPE_SHARED splits by. Returns the host, CRNET_EINVAL (comm
 * NULL, rank not in 0..size-1) or CRNET_ENOMEM. Local: no message. */
CRNET_EXTERN int crnet_comm_host(const crnet_comm *comm, int rank);

/* crnet_comm_split's color for a rank that joins no new comm. */
#define CRNET_UNDEFINED (-32766)

/* Sub-communicators, as MPI_Comm_split and MPI_Comm_dup. Collective over
 * `comm`: every rank of it calls, in the same order as its other calls on
 * it. Ranks that pass the same color >= 0 form one new comm, numbered by
 * key, ties by their rank in `comm`; a rank that passes CRNET_UNDEFINED
 * gets *newcomm = NULL. crnet_comm_dup makes a comm of the same ranks in
 * the same order. The new comm has its own calls, schedule choices (copied
 * from `comm`), counters and sticky error, and shares the links of the
 * comm of crnet_comm_init: its frames name it (a context id agreed by the
 * split), so calls of different comms may be in flight at once, in any
 * order across comms, from any threads. A rank lost fails every comm that
 * has it, and only those; an abort fails every comm. At most 1023 comms
 * made this way are alive at once in a job (CRNET_ENOMEM beyond).
 * CRNET_EINVAL for a color < 0 other than CRNET_UNDEFINED, or NULL
 * pointers; the comm's sticky error if it has failed. */
CRNET_EXTERN int crnet_comm_split(crnet_comm *comm, int color, int key,
                                  crnet_comm **newcomm);
CRNET_EXTERN int crnet_comm_dup(crnet_comm *comm, crnet_comm **newcomm);

/* Fails every rank fast: their pending and later calls return CRNET_EABORTED
 * and crnet_comm_abort_code() gives `code`. Returns; the caller should then
 * exit. Under crlaunch, crlaunch names this rank and exits with `code` (its
 * low 8 bits, or 1 if they are 0), whatever status the ranks exit with. */
CRNET_EXTERN int crnet_comm_abort(crnet_comm *comm, int code);

/* Surviving the loss of ranks (docs/RELIABILITY.md). By default a lost rank
 * ends the job (CRNET_ON_FAILURE=stop). With CRNET_ON_FAILURE=continue
 * (crlaunch --keep-going) it fails only the comms that have it: their
 * pending and later calls return CRNET_EPEER naming the rank; comms without
 * it go on. The survivors of such a comm then revoke, agree and shrink.
 *
 * crnet_comm_revoke: every member's pending and later calls on comm end with
 * CRNET_EREVOKED, quickly, even those that wait on a live peer (the word
 * spreads from every member that hears it, so it arrives even if the
 * revoking rank dies). Only crnet_comm_agree, crnet_comm_shrink,
 * crnet_comm_lost, crnet_comm_ack_lost and crnet_comm_destroy still work on
 * a revoked comm. Returns 0 (revoking twice is no error), CRNET_EINVAL for a
 * NULL comm. Any thread. */
CRNET_EXTERN int crnet_comm_revoke(crnet_comm *comm);
/* 1 if comm has been revoked (by any member, as far as this process has
 * heard), else 0; CRNET_EINVAL for NULL. Local: no message. */
CRNET_EXTERN int crnet_comm_is_revoked(const crnet_comm *comm);

/* The ranks of comm this process knows to be lost (comm ranks, ascending)
 * into ranks[0..max-1]; returns how many there are (which may exceed max),
 * or CRNET_EINVAL. Local: no message. */
CRNET_EXTERN int crnet_comm_lost(const crnet_comm *comm, int *ranks, int max);

/* Acknowledges the ranks crnet_comm_lost gives now: crnet_comm_agree then
 * no longer fails because of them. Returns how many are acknowledged, and
 * puts them (comm ranks, ascending) into ranks[0..max-1] (ranks may be NULL
 * with max 0); CRNET_EINVAL. */
CRNET_EXTERN int crnet_comm_ack_lost(crnet_comm *comm, int *ranks, int max);

/* A fault-tolerant agreement among the survivors of comm, which may have
 * failed or been revoked: *flag becomes the bitwise AND of every surviving
 * member's *flag (0 and 1: a logical AND), alike on every rank that
 * returns, even when ranks die during it. Returns 0, or CRNET_EPEER when
 * the survivors count a rank lost that not every survivor had acknowledged
 * (crnet_comm_ack_lost) before the call: the same return on every
 * survivor; *flag still holds the agreed value, and every survivor then
 * knows those lost ranks (crnet_comm_lost). CRNET_EINVAL for NULL
 * arguments. Collective over the survivors; blocking. */
CRNET_EXTERN int crnet_comm_agree(crnet_comm *comm, int *flag);

/* A new comm of comm's survivors, in their order in comm, with its own
 * context id and schedules (auto prices them for the new size); built even
 * when more ranks die during it (the new comm then reports them). Works on
 * a failed or revoked comm. Collective over the survivors; blocking. 0,
 * CRNET_EINVAL, CRNET_ENOMEM (no context id free on every survivor). */
CRNET_EXTERN int crnet_comm_shrink(crnet_comm *comm, crnet_comm **newcomm);

/* Growing back (crlaunch --restart N: docs/RELIABILITY.md). A lost rank is
 * started again; its crnet_comm_init joins the running job, links to every
 * survivor and waits (up to CRNET_INIT_TIMEOUT) until a grow admits it, and
 * returns the comm it was admitted to. crnet_comm_grow makes that comm: as
 * crnet_comm_shrink, a new comm of comm's survivors in their order, and
 * after them every restarted rank that has linked to each survivor and
 * joined no comm yet, in the order they joined the job. Works on a failed
 * or revoked comm; collective over the survivors (the newcomers take part
 * from inside their crnet_comm_init); blocking. With no newcomer waiting it
 * makes what crnet_comm_shrink would. Grow one comm at a time: a newcomer
 * joins the first comm admitting it. 0, CRNET_EINVAL, CRNET_ENOMEM. */
CRNET_EXTERN int crnet_comm_grow(crnet_comm *comm, crnet_comm **newcomm);

/* 1 if comm is the comm crnet_comm_init returned to a restarted rank (it
 * joined a running job: the survivors may hold state it needs), else 0;
 * CRNET_EINVAL for NULL. Local: no message. */
CRNET_EXTERN int crnet_comm_joined(const crnet_comm *comm);

/* The sticky error's explanation; without one, the reason the calling
 * thread's last call on this comm returned CRNET_EINVAL or
 * CRNET_EUNSUPPORTED, if it gave one ("" otherwise). Valid until the
 * thread's next call on the communicator. */
CRNET_EXTERN const char *crnet_comm_errmsg(const crnet_comm *comm);

/* The code given to crnet_comm_abort() by whichever rank aborted, or 0. */
CRNET_EXTERN int crnet_comm_abort_code(const crnet_comm *comm);

CRNET_EXTERN const char *crnet_strerror(int err);
CRNET_EXTERN const char *crnet_err_name(int err);

/* Size in bytes of one element; 0 for an unknown datatype. */
CRNET_EXTERN size_t crnet_datatype_size(crnet_datatype dt);
CRNET_EXTERN const char *crnet_datatype_name(crnet_datatype dt);
CRNET_EXTERN const char *crnet_op_name(crnet_op op);
CRNET_EXTERN const char *crnet_collective_name(crnet_collective coll);

/* User operators. `commutative` = 0 restricts the op to order-preserving
 * schedules. A user operator takes any datatype, CRNET_BYTE included.
 * Operators are process-wide and may be used on any comm. Every
 * rank must create (and free) its operators in the same order, so that the
 * same handle means the same operator everywhere: calls are checked across
 * ranks by handle. */
CRNET_EXTERN CRNET_NODISCARD int crnet_op_create(crnet_op *op,
                                                 crnet_user_fn *fn, void *ctx,
                                                 int commutative);
CRNET_EXTERN int crnet_op_free(crnet_op *op);

/* --- counters ---------------------------------------------------------------
 *
 * Every comm counts, for this rank, since crnet_comm_init or the last
 * crnet_comm_stats_reset: per collective the calls and their cost, per peer
 * the payload bytes and messages exchanged. Counting costs a few clock
 * reads per round. CRNET_STATS=1 sends them to crlaunch at
 * crnet_comm_destroy (crlaunch --stats prints the job's table), or without
 * crlaunch prints one line per collective on stderr. CRNET_TRACE=path
 * writes every call and round as a Chrome trace (docs/USING.md). */
typedef struct crnet_coll_stats {
  uint64_t calls;          /* calls that ran (refused arguments not counted) */
  uint64_t failed;         /* of which returned an error */
  uint64_t rounds;         /* rounds of their schedules */
  uint64_t bytes_sent;     /* payload this rank sent ... */
  uint64_t bytes_received; /* ... and received in them */
  double seconds;          /* time inside the calls */
  double wait_seconds;     /* of which waiting for messages */
  double reduce_seconds;   /* of which reducing and copying */
} crnet_coll_stats;

typedef struct crnet_peer_stats {
  uint64_t bytes_sent;     /* payload to that peer */
  uint64_t bytes_received; /* payload from it */
  uint64_t messages_sent;
  uint64_t messages_received;
} crnet_peer_stats;

/* The counters of collective `coll` (scan and exscan count as
 * CRNET_COLL_SCAN; both reduce-scatter calls as CRNET_COLL_REDUCE_SCATTER),
 * or of this rank's traffic with rank `peer`. 0 or CRNET_EINVAL. */
CRNET_EXTERN int crnet_comm_coll_stats(const crnet_comm *comm,
                                       crnet_collective coll,
                                       crnet_coll_stats *out);
CRNET_EXTERN int crnet_comm_peer_stats(const crnet_comm *comm, int peer,
                                       crnet_peer_stats *out);
/* Sets every counter to zero. 0 or CRNET_EINVAL. */
CRNET_EXTERN int crnet_comm_stats_reset(crnet_comm *comm);

/* What carries this rank's frames to rank `peer` of comm now. Two ranks
 * on one node start on TCP and move to shared memory within the first
 * milliseconds (CRNET_TRANSPORT); ranks on different nodes use TCP. */
typedef enum crnet_link_kind {
  CRNET_LINK_NONE = 0, /* no link yet (CRNET_LAZY_LINKS), or it has closed */
  CRNET_LINK_TCP = 1,
  CRNET_LINK_SHM = 2,  /* shared memory, both ways */
  CRNET_LINK_SELF = 3, /* peer is this rank */
} crnet_link_kind;
/* 0 or CRNET_EINVAL. */
CRNET_EXTERN int crnet_comm_peer_link(const crnet_comm *comm, int peer,
                                      crnet_link_kind *out);

/* recv = send_0 (+) send_1 (+) ... (+) send_{p-1}, element-wise, on every
 * rank, bitwise identical everywhere. send may be CRNET_IN_PLACE. */
CRNET_EXTERN int crnet_allreduce(crnet_comm *comm, const void *send,
                                 void *recv, size_t count, crnet_datatype dt,
                                 crnet_op op);

/* W[r] = the reduction over all ranks of their block r: rank r gets
 * recvcount elements. send holds p·recvcount elements in rank-block order;
 * with CRNET_IN_PLACE the input is in recv (p·recvcount elements) and the
 * result lands at its start. */
CRNET_EXTERN int crnet_reduce_scatter_block(crnet_comm *comm, const void *send,
                                            void *recv, size_t recvcount,
                                            crnet_datatype dt, crnet_op op);

/* The same with blocks of different sizes: rank r gets recvcounts[r]
 * elements; every rank passes the same recvcounts. */
CRNET_EXTERN int crnet_reduce_scatter(crnet_comm *comm, const void *send,
                                      void *recv, const size_t recvcounts[],
                                      crnet_datatype dt, crnet_op op);

/* Prefix sums in rank order: recv of rank r = send_0 (+) ... (+) send_r
 * (scan, inclusive) or send_0 (+) ... (+) send_{r-1} (exscan; rank 0's recv
 * is left untouched, but must still be a buffer of count elements, as on
 * every rank, so that one mistake is caught alike everywhere). send may be
 * CRNET_IN_PLACE. Non-commutative operators
 * are fine: every schedule that does prefix sums keeps rank order. Both
 * calls use the schedule chosen for CRNET_COLL_SCAN. */
CRNET_EXTERN int crnet_scan(crnet_comm *comm, const void *send, void *recv,
                            size_t count, crnet_datatype dt, crnet_op op);
CRNET_EXTERN int crnet_exscan(crnet_comm *comm, const void *send, void *recv,
                              size_t count, crnet_datatype dt, crnet_op op);

/* Personalized all-to-all: block j of send (count elements, at j·count)
 * goes to rank j, and block j of recv comes from rank j. With
 * CRNET_IN_PLACE the blocks to send are in recv and are replaced. */
CRNET_EXTERN int crnet_alltoall(crnet_comm *comm, const void *send, void *recv,
                                size_t count, crnet_datatype dt);

/* recv = the count elements of rank 0, then of rank 1, ...; with
 * CRNET_IN_PLACE each rank's contribution is already at its place in recv. */
CRNET_EXTERN int crnet_allgather(crnet_comm *comm, const void *send,
                                 void *recv, size_t count, crnet_datatype dt);

/* buf of every rank = buf of root. */
CRNET_EXTERN int crnet_bcast(crnet_comm *comm, void *buf, size_t count,
                             crnet_datatype dt, int root);

/* recv of root = the reduction of everyone's send (recv is ignored
 * elsewhere). CRNET_IN_PLACE only at the root: its input is in recv. */
CRNET_EXTERN int crnet_reduce(crnet_comm *comm, const void *send, void *recv,
                              size_t count, crnet_datatype dt, crnet_op op,
                              int root);

/* Returns once every rank has entered it. */
CRNET_EXTERN int crnet_barrier(crnet_comm *comm);

/* The rooted and vector shapes, as MPI's (counts in elements).
 *
 * gather: the root's recv gets p blocks of count elements, block r from
 * rank r's send (recv is ignored elsewhere and may be NULL); CRNET_IN_PLACE
 * as the root's send: its block is in recv already. scatter: rank r's recv
 * gets block r of the root's send (p blocks of count; send is ignored
 * elsewhere); CRNET_IN_PLACE as the root's recv: its block stays in send.
 * Schedules "binomial" (a tree, ceil(log2 p) rounds) and "linear" (the
 * root and every rank directly).
 *
 * allgatherv: every rank's recv gets recvcounts[r] elements from rank r at
 * displs[r] (displs NULL: packed in rank order); sendcount must be
 * recvcounts[rank]; CRNET_IN_PLACE as send: this rank's block is at its
 * place in recv. The allgather schedules (CRNET_COLL_ALLGATHER) take the
 * irregular blocks; displacements that are not packed cost one copy of the
 * result at the end.
 *
 * alltoallv: this rank sends sendcounts[j] elements from send +
 * sdispls[j] to rank j and receives recvcounts[j] elements from rank j at
 * recv + rdispls[j] (a NULL displs array: packed by the counts). Every pair
 * must agree (rank j's sendcounts[i] is rank i's recvcounts[j]): a
 * disagreement is a mismatch. Schedules "pairwise" (several exchanges in
 * flight) and "ring" (one at a time). */
CRNET_EXTERN int crnet_gather(crnet_comm *comm, const void *send, void *recv,
                              size_t count, crnet_datatype dt, int root);
CRNET_EXTERN int crnet_scatter(crnet_comm *comm, const void *send, void *recv,
                               size_t count, crnet_datatype dt, int root);
CRNET_EXTERN int crnet_allgatherv(crnet_comm *comm, const void *send,
                                  size_t sendcount, void *recv,
                                  const size_t recvcounts[],
                                  const size_t displs[], crnet_datatype dt);
CRNET_EXTERN int crnet_alltoallv(crnet_comm *comm, const void *send,
                                 const size_t sendcounts[],
                                 const size_t sdispls[], void *recv,
                                 const size_t recvcounts[],
                                 const size_t rdispls[], crnet_datatype dt);

/* --- nonblocking calls ------------------------------------------------------
 *
 * Every collective crnet_X has a nonblocking twin crnet_iX with the same
 * arguments plus `req`: it checks the arguments as crnet_X does (a bad one
 * returns CRNET_EINVAL, sends nothing and makes no request), starts the
 * call and returns 0 with *req set, or the comm's sticky error with *req
 * NULL. The call then runs while the program goes on; crnet_wait(&req)
 * returns its result, the same as crnet_X's, bit for bit. crnet_X is
 * exactly crnet_iX followed by crnet_wait (a small call among ranks of one
 * host may run on the shared-memory boards, CRNET_SHM_BOARD_BYTES, the
 * blocking and the nonblocking form alike; the blocking one then has no
 * request).
 *
 * As in MPI-3:
 *   - the buffers belong to crnet until the request completes: the program
 *     must not write the send buffer, nor read or write the receive buffer,
 *     before its wait (or test) returns;
 *   - every rank starts the collectives of a comm in the same order,
 *     blocking and nonblocking calls counted alike (calls are numbered as
 *     they start, and a rank that starts another call under the same number
 *     gets CRNET_EMISMATCH); with several threads, the program orders the
 *     starts of one comm itself, the same on every rank;
 *   - any number of requests may be in flight on a comm; they complete as
 *     the network allows, and may be waited for in any order.
 *
 * Progress. Every crnet call on a comm moves all its requests on. With a
 * progress thread (crnet_config.progress_thread, CRNET_PROGRESS_THREAD)
 * they also move on while the program computes and calls nothing; without
 * one, only inside crnet calls (crnet_test is the cheap one).
 *
 * Threads. Any thread may start, test and wait for the requests of a comm,
 * with or without a progress thread; two comms are independent. A request
 * is waited for (or successfully tested) by one thread only, once: the
 * wait frees it and sets the handle to NULL. crnet_comm_destroy must not
 * run while another thread uses the comm, and refuses (CRNET_EINVAL,
 * changing nothing) while requests are in flight: wait for them first, or
 * crnet_comm_abort, which completes them with CRNET_EABORTED. Requests
 * that are complete but were never waited for are freed by destroy.
 *
 * Failure. A lost peer, an abort, a mismatch, or a CRNET_TIMEOUT (counted
 * from each request's start) fails the comm: every request in flight
 * completes with the sticky error, and crnet_comm_errmsg says why. */
typedef struct crnet_request crnet_request;

/* Called once when a request completes, on the thread that completes it
 * (the progress thread, or a thread in a crnet call on the comm), or at
 * once by crnet_request_on_complete if the request is complete already.
 * status is what the wait will return. It may start requests and test
 * others, but must not wait for a request that is not complete, nor wait
 * for or test its own (its wait after the callback returns is immediate). */
typedef void crnet_request_fn(crnet_request *req, int status, void *arg);

CRNET_EXTERN int crnet_iallreduce(crnet_comm *comm, const void *send,
                                  void *recv, size_t count, crnet_datatype dt,
                                  crnet_op op, crnet_request **req);
CRNET_EXTERN int crnet_ireduce_scatter_block(crnet_comm *comm,
                                             const void *send, void *recv,
                                             size_t recvcount,
                                             crnet_datatype dt, crnet_op op,
                                             crnet_request **req);
CRNET_EXTERN int crnet_ireduce_scatter(crnet_comm *comm, const void *send,
                                       void *recv, const size_t recvcounts[],
                                       crnet_datatype dt, crnet_op op,
                                       crnet_request **req);
CRNET_EXTERN int crnet_iscan(crnet_comm *comm, const void *send, void *recv,
                             size_t count, crnet_datatype dt, crnet_op op,
                             crnet_request **req);
CRNET_EXTERN int crnet_iexscan(crnet_comm *comm, const void *send, void *recv,
                               size_t count, crnet_datatype dt, crnet_op op,
                               crnet_request **req);
CRNET_EXTERN int crnet_ialltoall(crnet_comm *comm, const void *send,
                                 void *recv, size_t count, crnet_datatype dt,
                                 crnet_request **req);
CRNET_EXTERN int crnet_iallgather(crnet_comm *comm, const void *send,
                                  void *recv, size_t count, crnet_datatype dt,
                                  crnet_request **req);
CRNET_EXTERN int crnet_ibcast(crnet_comm *comm, void *buf, size_t count,
                              crnet_datatype dt, int root,
                              crnet_request **req);
CRNET_EXTERN int crnet_ireduce(crnet_comm *comm, const void *send, void *recv,
                               size_t count, crnet_datatype dt, crnet_op op,
                               int root, crnet_request **req);
CRNET_EXTERN int crnet_ibarrier(crnet_comm *comm, crnet_request **req);
CRNET_EXTERN int crnet_igather(crnet_comm *comm, const void *send, void *recv,
                               size_t count, crnet_datatype dt, int root,
                               crnet_request **req);
CRNET_EXTERN int crnet_iscatter(crnet_comm *comm, const void *send,
                                void *recv, size_t count, crnet_datatype dt,
                                int root, crnet_request **req);
CRNET_EXTERN int crnet_iallgatherv(crnet_comm *comm, const void *send,
                                   size_t sendcount, void *recv,
                                   const size_t recvcounts[],
                                   const size_t displs[], crnet_datatype dt,
                                   crnet_request **req);
CRNET_EXTERN int crnet_ialltoallv(crnet_comm *comm, const void *send,
                                  const size_t sendcounts[],
                                  const size_t sdispls[], void *recv,
                                  const size_t recvcounts[],
                                  const size_t rdispls[], crnet_datatype dt,
                                  crnet_request **req);

/* Waits until *req completes, frees it, sets *req to NULL and returns its
 * result. CRNET_EINVAL (changing nothing) for a NULL or freed request, or
 * when called where waiting could never end (see crnet_request_fn). */
CRNET_EXTERN int crnet_wait(crnet_request **req);

/* Moves the comm's requests on without sleeping. If *req is complete: as
 * crnet_wait, and *done = 1; else returns 0 with *done = 0. */
CRNET_EXTERN int crnet_test(crnet_request **req, int *done);

/* Waits for every request of reqs[0..n) (NULL entries are skipped), frees
 * them all and sets them to NULL, also when some fail; returns 0, or the
 * result of the first (in array order) that failed. All must be of comms
 * made from one crnet_comm_init (the world, its splits and dups; collectives
 * and messages alike). CRNET_EINVAL (changing nothing) for a freed request
 * or a request given twice. */
CRNET_EXTERN int crnet_waitall(int n, crnet_request *reqs[]);

/* Waits until one of reqs[0..n) completes (NULL entries are skipped),
 * frees it, sets it to NULL and *index to its position; returns its
 * result. With no request at all: 0 and *index = -1. All must be of comms
 * made from one crnet_comm_init. */
CRNET_EXTERN int crnet_waitany(int n, crnet_request *reqs[], int *index);

/* Calls fn(req, status, arg) once when req completes (see
 * crnet_request_fn). One callback per request: CRNET_EINVAL for a second. */
CRNET_EXTERN int crnet_request_on_complete(crnet_request *req,
                                           crnet_request_fn *fn, void *arg);

/* --- point-to-point messages -----------------------------------------------
 *
 * As MPI's: a message goes from one rank of a comm to another, with a tag
 * (0 to CRNET_TAG_MAX); a receive names its source and tag, or
 * CRNET_ANY_SOURCE / CRNET_ANY_TAG. Messages from one source to one
 * receiver on one comm are received in the order they were sent, among
 * those a receive can match (non-overtaking). A receive posted before its
 * message arrives gets it straight into its buffer. A message sent before
 * its receive is posted waits at the receiver: up to CRNET_EAGER_BYTES
 * bytes (and a budget of CRNET_EAGER_BUDGET bytes per sender, see below)
 * it is sent at once and kept; beyond, only its announcement travels, and
 * the data follows once the receive is posted (rendezvous): no amount of
 * unexpected traffic exhausts a receiver's memory. A message longer than
 * the receive buffer fails that receive with CRNET_ETRUNCATE (naming both
 * sizes) and is dropped whole, so the next message is intact; the send
 * succeeds. Messages to oneself work the same way. crnet_send returns once
 * the buffer may be reused (an eager message is with the kernel; a large
 * one has been received): a send to a rank that never receives it may
 * wait forever, as in MPI. CRNET_TIMEOUT bounds collectives, not
 * point-to-point calls; a lost peer, an abort or a failure of the comm
 * completes them with its error, and so does a peer that left
 * (crnet_comm_destroy) while a message from it was awaited, or before a
 * receive naming it began (CRNET_EPEER). isend and irecv return requests of the
 * same kind as the nonblocking collectives (crnet_wait, crnet_test, ...);
 * their buffers must stay untouched until completion. */
#define CRNET_ANY_SOURCE (-1)
#define CRNET_ANY_TAG (-1)
#define CRNET_TAG_MAX 0x7fffffff
#define CRNET_EAGER_BYTES (64 * 1024)
#define CRNET_EAGER_BUDGET (4 * 1024 * 1024)

/* What a receive got: its source (rank in the comm), tag and size. */
typedef struct crnet_status {
  int source;
  int tag;
  size_t bytes;
  int error; /* the receive's result (0, CRNET_ETRUNCATE, ...) */
} crnet_status;

CRNET_EXTERN int crnet_send(crnet_comm *comm, const void *buf, size_t count,
                            crnet_datatype dt, int dest, int tag);
/* status may be NULL. */
CRNET_EXTERN int crnet_recv(crnet_comm *comm, void *buf, size_t count,
                            crnet_datatype dt, int source, int tag,
                            crnet_status *status);
/* A send and a receive at once (neither waits for the other to start). */
CRNET_EXTERN int crnet_sendrecv(crnet_comm *comm, const void *sendbuf,
                                size_t sendcount, crnet_datatype sendtype,
                                int dest, int sendtag, void *recvbuf,
                                size_t recvcount, crnet_datatype recvtype,
                                int source, int recvtag, crnet_status *status);
CRNET_EXTERN int crnet_isend(crnet_comm *comm, const void *buf, size_t count,
                             crnet_datatype dt, int dest, int tag,
                             crnet_request **req);
/* Synchronous sends (MPI_Ssend, MPI_Issend): complete only once the
 * receiver has posted the receive that takes the message, whatever its
 * size (the message is announced and its data waits at the sender, as a
 * large one's always does), so a completed one says the receiver has
 * reached it. A synchronous send to a rank that never receives it never
 * completes; one to oneself completes when this rank's receive takes it. */
CRNET_EXTERN int crnet_ssend(crnet_comm *comm, const void *buf, size_t count,
                             crnet_datatype dt, int dest, int tag);
CRNET_EXTERN int crnet_issend(crnet_comm *comm, const void *buf, size_t count,
                              crnet_datatype dt, int dest, int tag,
                              crnet_request **req);
/* status (may be NULL) is filled when the request completes, before its
 * wait returns: it must stay valid until then. */
CRNET_EXTERN int crnet_irecv(crnet_comm *comm, void *buf, size_t count,
                             crnet_datatype dt, int source, int tag,
                             crnet_status *status, crnet_request **req);

/* Cancels a receive (crnet_irecv) that no message has matched yet: it
 * completes with CRNET_ECANCELED (its status's error too), its buffer
 * untouched, and the messages it would have taken go to later receives.
 * A receive already matched, and a send, complete as they would have:
 * like MPI_Cancel, it asks and the request's completion says what
 * happened. The request must still be waited for (or tested) as any
 * other; cancelling it again before then is harmless. Any thread, but as
 * with every request not while another thread's wait or test may complete
 * and free it: a thread may cancel a receive another thread waits for only
 * when no message can match it meanwhile (the wait then ends with
 * CRNET_ECANCELED). 0, or CRNET_EINVAL for a handle that is not a request
 * in flight, or a collective's (a collective cannot be cancelled: every
 * rank takes part in it). */
CRNET_EXTERN int crnet_cancel(crnet_request *req);

/* Whether a message that crnet_recv(comm, ..., source, tag, ...) would take
 * has come, without taking it: its source, tag and size go to status (may
 * be NULL), and the next receive that matches it gets it (unless another
 * thread receives it first). crnet_probe waits until such a message has
 * come; crnet_iprobe looks, lets the comm's loop run once, looks again,
 * and sets *flag to 1 (status filled) or 0 (status untouched), so a loop
 * of crnet_iprobe calls moves messages on. A message whose receive is
 * already posted goes to that receive and is never seen here. Failures are
 * those of crnet_recv, a rank that left included. */
CRNET_EXTERN int crnet_probe(crnet_comm *comm, int source, int tag,
                             crnet_status *status);
CRNET_EXTERN int crnet_iprobe(crnet_comm *comm, int source, int tag,
                              int *flag, crnet_status *status);

/* Chooses the schedule for one collective on this comm: "auto" (the
 * default), "circulant", "circulant-doubling", "circulant-linear",
 * "circulant-sqrt", "ring", ... Every rank must choose alike. The environment
 * variable CRNET_<COLLECTIVE>_SCHEDULE (e.g. CRNET_ALLREDUCE_SCHEDULE) sets
 * the initial choice. CRNET_EINVAL for an unknown name, CRNET_EUNSUPPORTED
 * for a schedule that cannot do that collective on this comm's number of
 * ranks (crnet_comm_errmsg says why; the choice before stays). A schedule
 * that cannot serve a particular call (a non-commutative operator on a
 * schedule that reorders operands) makes that call return
 * CRNET_EUNSUPPORTED. */
CRNET_EXTERN int crnet_comm_set_schedule(crnet_comm *comm,
                                         crnet_collective coll,
                                         const char *name);

/* The schedule the comm's last started call of the collective ran: the
 * name crnet_comm_set_schedule chose, or, under "auto", the one auto
 * picked for that call ("circulant", "ring", ...; a static string). NULL
 * before the comm's first call of that collective, and for a NULL comm or
 * an unknown collective. crbench prints it beside "auto". */
CRNET_EXTERN const char *crnet_comm_last_schedule(const crnet_comm *comm,
                                                  crnet_collective coll);

/* The schedules this library has, for crnet_comm_set_schedule: the
 * index-th (from 0) of those that can do `coll`, or, with coll =
 * CRNET_COLL_COUNT, of all of them; NULL past the last, for a negative
 * index and for an unknown collective. "auto" is not among them. A static
 * string; the order stays the same from one call to the next. */
CRNET_EXTERN const char *crnet_schedule_name(crnet_collective coll,
                                             int index);

#ifdef __cplusplus
}
#endif

#endif /* CRNET_H */
