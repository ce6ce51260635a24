/* The communicator: one process's membership in a job.
 *
 * A comm owns a private libuv loop (never the application's default loop),
 * the p−1 mesh links, and the sticky error. Blocking calls drive the loop
 * with UV_RUN_ONCE until their requests complete, so a waiting process
 * sleeps in epoll instead of burning a core: oversubscribed machines stay
 * usable.
 *
 * Failure (failure model of DESIGN.md): the first failure a rank notices
 * (a peer's link closing, garbage, a mismatched frame, an ABORT frame, an
 * abort by this rank) becomes the comm's sticky error. The rank then tells
 * every peer it can reach with an ABORT frame and closes its links, so that
 * ranks which were not talking to the failed one notice too, and every
 * blocked call returns.
 */
#ifndef CRNET_COMM_H
#define CRNET_COMM_H

#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "board.h"
#include "crnet.h"
#include "directory.h"
#include "handshake.h"
#include "link.h"
#include "rendezvous.h"
#include "trace.h"
#include "tuning.h"

/* Calls remembered for mismatch messages. */
#define CRNET__CALL_HISTORY 4

/* The bound of a wait's spin score (progress.c, spin). */
#define CRNET__SPIN_SCORE_MAX 8

/* The most rounds the executor keeps in flight (CRNET_ROUNDS_IN_FLIGHT). */
#define CRNET__MAX_ROUNDS_IN_FLIGHT 32

/* What a connection is to the comm. A mesh link in c->peers is DATA; with
 * lazy links (lazy.c) a connection not (yet) in c->peers is one of the
 * others and sits on the comm's list of loose connections. */
enum crnet__peer_role {
  CRNET__PEER_DATA,       /* in c->peers: carries frames */
  CRNET__PEER_OUT,        /* our connection to a lower rank, before ready */
  CRNET__PEER_IN,         /* accepted, handshake not over: who is it? */
  CRNET__PEER_CALL_OUT,   /* our call to a higher rank: "connect to me" */
  CRNET__PEER_CALL_IN,    /* a lower rank's call to us */
};

/* A mesh link and what the comm knows about it. */
typedef struct crnet__peer {
  crnet__link link; /* first: callbacks cast back */
  crnet_comm *comm;
  bool got_bye;     /* the peer has called crnet_comm_destroy */
  bool closed;      /* handles closed */
  uint8_t role;     /* enum crnet__peer_role */
  int32_t rank;     /* the rank an outgoing connection goes to, else -1 */
  uint8_t stream;   /* the stream an outgoing connection is for */
  /* The comm's list of loose connections (lazy links only). */
  struct crnet__peer *loose_prev, *loose_next;
} crnet__peer;

/* Settings after merging crnet_config with the environment. */
typedef struct crnet__settings {
  int rank;
  int size;
  char rdv_host[256];
  int rdv_port;
  bool serve_rendezvous;
  int port_lo, port_hi; /* 0, 0: any port */
  char iface[128];       /* CRNET_IFACE (netaddr.h); "": the kernel's choice */
  double init_timeout;
  double coll_timeout; /* CRNET_TIMEOUT seconds; 0: none */
  double liveness;     /* CRNET_LIVENESS_TIMEOUT seconds; 0: the kernel's */
  double handshake;    /* CRNET_HANDSHAKE_TIMEOUT seconds */
  long spin_us; /* -1: decide from the ranks per host (see wait_plan) */
  int host_cpus; /* CRNET_HOST_CPUS: the CPUs this host's ranks share
                    (crlaunch); 0: this process's own */
  uint64_t stream_piece; /* CRNET_STREAM_PIECE */
  int rounds_in_flight;  /* CRNET_ROUNDS_IN_FLIGHT */
  int streams;           /* CRNET_STREAMS */
  int stream_min;        /* CRNET_STREAMS_MIN_BYTES */
  int socket_buffer;     /* CRNET_SOCKET_BUFFER bytes; 0: the kernel's */
  bool encrypt;          /* CRNET_ENCRYPT: AEAD on every connection */
  bool lazy;             /* CRNET_LAZY_LINKS resolved for this job size */
  int progress;          /* CRNET_PROGRESS_THREAD_*, as set */
  char schedule[CRNET_COLL_COUNT][32]; /* CRNET_*_SCHEDULE, as given */
  char trace[4096]; /* CRNET_TRACE, the rank put in; "": none */
  bool stats;       /* CRNET_STATS */
  int transport;    /* CRNET_TRANSPORT: enum crnet__transport */
  uint32_t shm_ring; /* CRNET_SHM_RING_BYTES; 0: the default */
  uint32_t shm_board;  /* CRNET_SHM_BOARD_BYTES */
  int shm_single_copy; /* CRNET_SHM_SINGLE_COPY: 0, 1, or -1 (auto) */
  int shm_membarrier;  /* CRNET_SHM_MEMBARRIER: 0, 1, or -1 (auto) */
  bool survive;        /* CRNET_ON_FAILURE=continue */
  int restarts;        /* CRNET_RESTARTS */
  int restarted;       /* CRNET_RESTARTED: > 0 on a restarted rank */
  /* A directory (directory.h): PMIx's, or crnet_config.directory. With
   * one, rank 0 publishes the rendezvous unless CRNET_RENDEZVOUS names it
   * (publish_rdv), and a fresh job key unless the job has one
   * (publish_key); the other ranks look up what was published. */
  crnet__directory directory;
  bool have_directory;
  bool publish_rdv, publish_key;
  bool from_slurm; /* rank and size from SLURM_PROCID and SLURM_NTASKS */
} crnet__settings;

/* CRNET_TRANSPORT: how two ranks on one node talk. */
enum crnet__transport {
  CRNET__TRANSPORT_AUTO = 0, /* shared memory, TCP if it cannot be set up */
  CRNET__TRANSPORT_TCP,      /* TCP always */
  CRNET__TRANSPORT_SHM,      /* shared memory, and a pair that cannot fails */
};

/* Context ids: a comm's id travels in every frame it sends (frame.h), so
 * that the comms of a process share its links and a frame of one is never
 * taken for another's. The world comm is context 0; crnet_comm_split and
 * crnet_comm_dup agree on a free id over the parent (comm_split.c). Two
 * comms with one id never share a rank. */
#define CRNET__MAX_CTX CRNET__FRAME_CTX_MAX

/* The collectives layer's part of a comm (collectives/comm_state.h):
 * opaque to the runtime, which makes and frees it only through the hooks
 * below. */
struct crnet__comm_state;

/* What the layer above the runtime (the collective calls) hands it when a
 * job starts (crnet__comm_init): the runtime never calls that layer by
 * name, only through these. */
typedef struct crnet__upper_layer {
  /* Makes c->coll: from the parent's (a comm of split or dup) or, for the
   * world comm (parent NULL), from the job's settings (w->default_schedule).
   * 0 or CRNET_ENOMEM. Under w->mu once other threads may run. */
  int (*state_new)(crnet_comm *c, const crnet_comm *parent);
  /* Frees what state_new made (NULL: nothing). */
  void (*state_free)(struct crnet__comm_state *state);
  /* "allreduce #4 (100 x float, sum, schedule ring)": a call as its frames
   * describe it, in the runtime's mismatch messages. */
  void (*format_call)(uint8_t coll, uint64_t seq, const crnet__frame_call *call,
                      char *buf, size_t n);
} crnet__upper_layer;

/* What the comms of one job in this process share: the loop, the links,
 * the requests in flight and the engine that moves them, the progress
 * thread, the socket to crlaunch. The world comm (crnet_comm_init) owns it;
 * every comm derived from it points to it (c->w) and it outlives them:
 * crnet_comm_destroy refuses the world comm while others are alive. */
typedef struct crnet__world {
  uv_loop_t loop;
  uv_timer_t deadline; /* bounds the current wait */
  bool deadline_passed;
  /* How long a wait polls the loop without sleeping before it sleeps in
   * epoll (0: never polls). Waking a sleeping process costs tens of µs on a
   * VM, so a short poll pays off when every rank of this host has a core of
   * its own, and only then (crnet_comm_init decides). */
  uint64_t spin_ns;
  int spin_score;        /* recent spins: caught (+1) or in vain (-2) */
  bool spin_yield;       /* more ranks than cores: yield while spinning */
  uint32_t spin_skipped; /* waits that slept at once since the last spin */
  uint64_t io_count;     /* link events so far (link.h io_count) */
  /* The job's ranks on this node whose links may move onto shared memory
   * (none with CRNET_TRANSPORT=tcp or encryption): the links a polling
   * wait pumps itself between turns of the loop (progress.c). */
  int32_t *node_ranks;
  int32_t n_node_ranks;
  uint32_t light_turns; /* polling turns since the last turn of the loop */
  bool full_turn_due;   /* a polling wait's next turn is the loop's */
  uint64_t last_full_turn; /* when a polling wait last made it due (ns) */
  uint32_t blind_sends; /* p2p.c: small sends into rings since a turn */
  /* The loop runs without sleeping (uv_run(UV_RUN_NOWAIT)): link.h
   * loop_nowait. */
  bool loop_nowait;
  int transport;         /* enum crnet__transport */
  uint32_t shm_ring;     /* ring bytes of a same-node link (link_shm.h) */
  uint32_t shm_board;    /* CRNET_SHM_BOARD_BYTES (board.h) */
  int shm_single_copy;   /* CRNET_SHM_SINGLE_COPY: 0, 1, -1 (auto) */
  /* Point-to-point requests started and not completed (link.h
   * drain_parked). */
  atomic_uint p2p_live;
  /* The executor reduces a receive of at least 4 pieces piece by piece as
   * it arrives (exec.c); 0 turns that off. */
  uint64_t stream_piece;
  /* Rounds a schedule marks independent are run this many at a time
   * (exec.c; 1: one round after the other). */
  uint32_t rounds_in_flight;
  /* The executor's scratch (TEMP), kept between calls for the next one
   * that needs it (exec.c); under mu. */
  void *temp;
  size_t temp_bytes;
  /* This process's job rank, and the job's ranks: the world comm's p
   * (world_size), and after them CRNET_RESTARTS slots for restarted ranks
   * (join.c), which join as job ranks world_size, world_size + 1, ...
   * Everything indexed by job rank (peers, table, lost, ...) has `size`
   * entries. Without restarts size == world_size. */
  int rank;
  int size;
  int world_size;
  int index;    /* the rank the launcher started this process as (CRNET_RANK):
                   w->rank, but on a restarted rank, whose slot differs */
  uint8_t *key; /* CRNET__KEY_BYTES, in secret memory (secret.h) */
  /* TCP streams per pair of ranks, and the smallest part a message is
   * split into across them (rank 0's CRNET_STREAMS and
   * CRNET_STREAMS_MIN_BYTES, see crnet__exchange_start). */
  uint32_t streams;
  uint64_t stream_min;
  /* The mesh links, by world rank: stream k to rank r is
   * peers[r * streams + k] (NULL for r == rank); size * streams entries. */
  crnet__peer **peers;
  crnet__rendezvous_entry *table; /* everyone's address, host and pid */
  int open_peers;            /* peer links whose handles are not closed */

  /* The mesh listener. Without lazy links it lives only during the
   * bootstrap; with them, for the comm's life (until it fails or is
   * destroyed), since a peer may connect on its first use of this rank at
   * any time. boot is the bootstrap in progress, or NULL. */
  uv_tcp_t listener;
  bool listener_open;
  void *boot;
  /* Lazy links (CRNET_LAZY_LINKS, lazy.c): rank 0's choice is the job's.
   * connecting[r * streams + k] is our outgoing connection of that slot
   * while it is not ready; calling[r] our call to the higher rank r;
   * loose lists every connection not in peers. */
  bool lazy;
  /* Rank 0 keeps its links on TCP (rendezvous.h,
   * crnet__rendezvous_options.tcp): auto prices the job's links as TCP. */
  bool job_tcp;
  bool job_lazy; /* rank 0's CRNET_LAZY_LINKS (board_calls.c) */
  crnet__peer **connecting;
  crnet__peer **calling;
  crnet__peer *loose;
  /* What every lazy link needs when it comes up, kept from the settings. */
  bool encrypt;
  uint64_t liveness_ms;
  /* CRNET_HANDSHAKE_TIMEOUT: how long a connection may take to
   * authenticate at rank 0's rendezvous, at the mesh listener during the
   * bootstrap (capped by the init deadline) and on lazy links. */
  uint64_t handshake_ms;
  int socket_buffer;
  char iface[128];
  uint64_t links_opened; /* mesh links that became ready, for tests */

  /* CRNET_TIMEOUT: the most a collective may take, counted from its start
   * (0: no limit). */
  uint64_t coll_timeout_ms;
  /* The cost model's constants for auto: rank 0's, on every rank. */
  crnet__tuning tuning;
  /* The schedules the settings name per collective (CRNET_*_SCHEDULE, as
   * given): where the world comm's choices start (upper->state_new). */
  char default_schedule[CRNET_COLL_COUNT][32];
  /* The layer above, as crnet__comm_init was given it. */
  const crnet__upper_layer *upper;

  /* The comms alive in this process, by context id (NULL: free), and how
   * many; comm_split.c hands out ids. splits is the number of
   * crnet_comm_split and crnet_comm_dup calls under way here: while one
   * is, a frame that names an id this rank does not know yet may be of the
   * comm it is making (a peer that finished first), and waits. */
  /* Atomic: the loop's owner looks a frame's comm up while another
   * thread's split or destroy may be setting an entry (under mu). */
  struct crnet_comm *_Atomic comms[CRNET__MAX_CTX];
  uint32_t ncomms;
  atomic_uint splits;
  /* Ids a split under way on this rank has proposed (under mu), and the
   * owner's cue to look at parked frames again once a split ends. */
  uint64_t ctx_reserved[CRNET__MAX_CTX / 64];
  atomic_bool recheck_asked;
  /* crnet_cancel marked a request: the engine's next pass advances all. */
  atomic_bool cancel_asked;
  /* Every comm of the job has failed: the links are closed. */
  bool torn_down;
  /* Point-to-point (p2p.c): per job rank, the eager budget and the
   * rendezvous under way (size entries, made at the first message);
   * messages that came for a comm this rank is still making (under mu). */
  struct crnet__p2p_peer *p2p_peers;
  struct crnet__p2p_msg *p2p_orphans;

  /* Requests and who runs the loop (request.h, progress.c). mu guards
   * what threads share: the queue, the states of requests, ownership of
   * the loop, the counters, the sticky errors' fields and the caches. */
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* a request completed, or the loop is free */
  pthread_cond_t thread_cv; /* the progress thread: work, or quit */
  int owner;                /* enum in progress.c: nobody, a caller, the thread */
  pthread_t owner_tid;
  /* Threads waiting to own the loop; changed atomically under mu (the
   * owner reads it without: crnet__loop_wanted). */
  uint32_t wanting;
  uint32_t cv_waiters;      /* threads asleep on cv */
  atomic_uint leaning;      /* waiters asleep on cv while the progress
                               thread moves their requests (progress.c) */
  bool abort_asked;         /* crnet_comm_abort from another thread */
  int abort_asked_code;
  uint32_t in_flight;       /* requests queued or running, of every comm */
  uint32_t in_flight_nb;    /* of them, nonblocking ones: a blocking one
                               has a waiter that drives it, and only these
                               are the progress thread's work */
  atomic_uint queued;       /* requests in the queue: the engine looks at
                               the queue only when there are some */
  struct crnet_request *queue_head, *queue_tail; /* numbered, not begun */
  struct crnet_request *run_head, *run_tail;     /* begun (owner only) */
  struct crnet_request *done_head; /* complete, never waited for */
  struct crnet_request *req_cache; /* freed requests, for reuse */
  uint32_t req_cached;
  bool in_progress;         /* crnet__progress is running (owner only) */
  uint64_t loop_seen_ms;    /* uv_now when the loop last polled */
  bool progress_dirty;      /* a link moved, a link came, a comm failed:
                               the engine has something to look at (owner
                               only; link.h io_flag) */
  uv_prepare_t progress_prepare;
  uv_check_t progress_check;
  /* Requests' board calls that wait for posts (board.h), and the idle
   * handle that keeps the loop from sleeping when one need not wait. */
  struct crnet__board_call *board_waiting;
  uv_idle_t board_idle;
  uint64_t completions;     /* requests completed (the owner's count) */
  uv_async_t kick;          /* wakes the owner: a request was queued */
  uv_timer_t coll_timer;    /* CRNET_TIMEOUT of the oldest request */
  const struct crnet_request *timeout_req; /* whose time ran out once */
  uint64_t timeout_seq;
  bool progress_handles;    /* the handles above exist */
  int progress_mode;        /* CRNET_PROGRESS_THREAD_*, resolved: 0 or 1 */
  bool thread_running, thread_quit;
  pthread_t thread;
  bool report_stats;    /* CRNET_STATS: report them at destroy */
  /* crlaunch's socket (report.h): our own descriptor for it, or -1; what
   * crlaunch says is read while the loop runs. */
  int report_fd;
  uv_poll_t report_poll;
  bool report_listening;
  /* How ranks ended, as crlaunch said: size entries allocated at its
   * first such word. "gone": status and signal; "fail": the rank a rank
   * failed because of (-1 if not said). */
  struct crnet__rank_end {
    int status, signal;
    bool gone;
    int blamed;
  } *rank_end;
  char report_in[128]; /* a line from crlaunch not yet whole */
  size_t report_in_len;
  crnet__trace *trace;  /* CRNET_TRACE, or NULL */
  /* CRNET_ON_FAILURE=continue (survive.c): a lost rank fails only the
   * comms that have it, and the links to the others stay for the
   * survivors' revoke, agree and shrink. lost[j]: job rank j is known lost
   * (size entries; under mu). Agreement frames for a comm this rank is
   * still making wait in early_agree. */
  bool survive;
  uint8_t *lost;
  struct crnet__agree_frame *early_agree;
  /* crnet_comm_revoke from another thread: the comm of the context id
   * (progress.c, on_kick; under mu), or -1. */
  int revoke_asked;
  /* Restarted ranks (join.c). Survivors: admitted[j], newcomer slot j is
   * a member of a comm a grow made (size entries). A newcomer: the
   * admission it waits for (ctx, members), once an ADMIT came. */
  uint8_t *admitted;
  struct crnet__admission *admission;
} crnet__world;

/* A communicator: a group of the job's ranks, numbered 0..size-1, with its
 * own calls, schedule choices, counters and sticky error, on the links of
 * the world it belongs to. */
struct crnet_comm {
  crnet__world *w;
  uint32_t ctx;   /* context id: 0 for the world comm */
  int rank;       /* in this comm */
  int size;
  /* This comm's rank r is the job's world[r]; the job's rank j is this
   * comm's local[j], or -1 for a rank outside it (w->size entries). NULL
   * for the world comm, where the two are the same. */
  int32_t *world;
  int32_t *local;

  int err; /* sticky error, 0 if none */
  char errmsg[512];
  size_t errmsg_reason_len; /* the part of errmsg that is relayed to peers */
  int abort_code;
  int err_origin; /* the rank at fault (world rank), -1 if unknown */

  /* The collectives layer's state of this comm (see above): set when the
   * comm is made, freed with it. */
  struct crnet__comm_state *coll;
  /* The host of each rank of this comm (size entries, hosts numbered from
   * 0 in order of their first rank) and how many hosts: the layout the
   * two-level schedules work with. NULL until the first collective call
   * asks (crnet__comm_hosts); under mu. */
  int32_t *host;
  int32_t nhosts;
  /* The last call begun on the loop (its sequence number), for frames
   * that come early and mismatch messages. */
  uint64_t seq;
  int last_coll; /* the last collective begun, or -1 */
  bool parked_ahead; /* a DATA frame of a later call waits on some link */
  /* The call completed last and its last round, for failures noticed
   * between calls (owner only). */
  uint64_t done_seq;
  uint8_t done_coll;
  uint32_t done_round;
  uint64_t seq_issued; /* the last sequence number given a request */
  /* The board slot this comm's ranks agreed on (board.h), or -1, and the
   * board calls made on it (alike on every rank: their parity picks the
   * cell). */
  int32_t board_slot;
  uint64_t board_calls;
  uint64_t board_done; /* the last board call complete here */
  /* The peers whose posts of that call it did not wait for, and the call:
   * the next board call waits for them before it writes (board.h). */
  uint64_t board_owed_peers;
  crnet__board_ident board_owed;
  /* Calls the library made on the comm before the program's first (the
   * boards' agreement): messages number the program's calls from 1. */
  uint64_t call_shift;
  uint32_t in_flight;  /* this comm's requests queued or running */
  /* Counters (crnet_comm_coll_stats, crnet_comm_peer_stats): per
   * collective, and per peer (size entries, by this comm's ranks); the
   * executor adds the time a call waits and reduces to call_wait_ns and
   * call_reduce_ns. */
  crnet_coll_stats coll_stats[CRNET_COLL_COUNT];
  crnet_peer_stats *peer_stats;
  /* The last few calls, so that a frame of a call this rank has finished
   * can be told against what this rank called then. */
  struct {
    uint64_t seq;
    int coll;
    crnet__frame_call call;
  } history[CRNET__CALL_HISTORY];
  /* Point-to-point (p2p.c; the loop's owner only): receives posted and not
   * matched yet, and messages come and not received yet, each in order. */
  struct crnet__p2p_req *p2p_posted, *p2p_posted_tail;
  struct crnet__p2p_msg *p2p_unexp, *p2p_unexp_tail;
  /* crnet_comm_agree's votes and decisions (survive.c), made at first
   * use; under w->mu. */
  struct crnet__agree *agree;
  /* A restarted rank: the comm its crnet_comm_init returned owns the
   * world comm, which crnet_comm_destroy of this one destroys too. */
  struct crnet_comm *owned_world;
};

/* The number a message gives call seq of comm c: the program's count. */
static inline uint64_t crnet__call_number(const struct crnet_comm *c,
                                          uint64_t seq) {
  return seq > c->call_shift ? seq - c->call_shift : seq;
}

/* Fills c->host and c->nhosts if they are not yet: ranks are on one host
 * when they registered the same node at the rendezvous (rendezvous.h:
 * same kernel boot and network namespace); a rank whose node is unknown
 * is a host of its own. 0 or CRNET_ENOMEM. Under c->w->mu. */
int crnet__comm_hosts(crnet_comm *c);

/* The job's rank of this comm's rank r, and this comm's rank of the job's
 * rank j (-1: not a member). */
static inline int crnet__world_rank(const crnet_comm *c, int r) {
  return c->world != NULL ? c->world[r] : r;
}
static inline int crnet__local_rank(const crnet_comm *c, int j) {
  return c->local != NULL ? c->local[j] : j < c->size ? j : -1;
}


/* --- derived comms (crnet_comm_split, crnet_comm_dup: split.c) ---------
 *
 * A context id for a new comm is agreed over its parent: each rank offers
 * the ids it neither uses nor has offered to another split under way
 * (crnet__ctx_offer), the ranks keep the lowest id all offered, and each
 * reserves it; if a concurrent split on some rank took it meanwhile, they
 * agree to try again. crnet__split_enter / _leave bracket the agreement:
 * while a split is under way, a frame that names an id this rank does not
 * know yet waits (a peer that finished first may already use the new
 * comm); after it, such a frame is a mismatch. */
#define CRNET__CTX_WORDS (CRNET__MAX_CTX / 64)
void crnet__split_enter(crnet_comm *parent);
void crnet__split_leave(crnet_comm *parent);
void crnet__ctx_offer(crnet_comm *parent, uint64_t mask[CRNET__CTX_WORDS]);
bool crnet__ctx_reserve(crnet_comm *parent, uint32_t id);
void crnet__ctx_release(crnet_comm *parent, uint32_t id);
/* The lowest id set in mask, or 0 (the world's: none free). */
uint32_t crnet__ctx_lowest(const uint64_t mask[CRNET__CTX_WORDS]);
/* A derived comm in two steps, so that everything it needs is allocated
 * before the ranks agree on it (split.c): a rank that is out of memory
 * fails before its first message, never between the others' success and
 * its own. crnet__comm_derive_new allocates a comm of at most max_size
 * ranks, its collective state made from the parent's (upper->state_new):
 * 0 with *out, or CRNET_ENOMEM. crnet__comm_derive_finish makes it the comm
 * of context id `ctx` (reserved) whose rank r is the job's world[r] (size
 * entries, at most max_size, this rank at `rank`); the reservation becomes
 * the comm's. It cannot fail. crnet__comm_derive_discard frees one that
 * was never finished (NULL: nothing). */
int crnet__comm_derive_new(crnet_comm *parent, int max_size, crnet_comm **out);
void crnet__comm_derive_finish(crnet_comm *c, uint32_t ctx, int rank, int size,
                               const int32_t *world);
void crnet__comm_derive_discard(crnet_comm *c);

/* --- surviving lost ranks (survive.c) -------------------------------------
 *
 * crnet__agree: the fault-tolerant agreement under crnet_comm_agree and
 * crnet_comm_shrink. Over the members of c not known lost, *flag becomes
 * the AND of their flags, ctx (if not NULL) the AND of their masks, and
 * lost[r] (c->size entries, if not NULL) 1 for every rank the survivors
 * counted lost, alike on every rank that returns 0. CRNET_ENOMEM,
 * CRNET_ETIMEDOUT (CRNET_TIMEOUT ran out), or the world's failure when its
 * links are gone. The caller owns the loop. */
int crnet__agree(crnet_comm *c, uint32_t *flag,
                 uint64_t ctx[CRNET__FRAME_CTX_MAX / 64], uint8_t *lost);
/* The same with the newcomers (join.c): join (w->size - w->world_size
 * entries, one per restart slot) goes in as this rank's view
 * (crnet__join_waiting) and comes out as the AND of every survivor's: the
 * newcomers linked to all of them. */
int crnet__agree_join(crnet_comm *c, uint32_t *flag,
                      uint64_t ctx[CRNET__FRAME_CTX_MAX / 64], uint8_t *lost,
                      uint8_t *join);
/* Agreement frames (AGREE, DECIDE) from job rank `via`. */
void crnet__agree_on_frame(crnet__world *w, int via,
                           const crnet__frame_header *h,
                           const uint8_t *payload);
/* Job rank j is lost (fail.c, survive mode): ranks that decided an
 * agreement tell its coordinator's successor what was decided. */
void crnet__agree_rank_lost(crnet__world *w, int j);
/* Frees a comm's agreement state, and the world's waiting frames. */
void crnet__agree_free(crnet_comm *c);
void crnet__agree_world_free(crnet__world *w);
/* A link to a peer just became ready: every comm that has failed but still
 * needs its links (fail.c) and has the peer tells it why, with a
 * non-final ABORT frame, as tell_members told the links ready then. */
void crnet__world_tell_new_link(crnet__world *w, crnet__link *l);
/* Test hook (test_survive): this process kills itself (SIGKILL) in its
 * agreement number seq on any comm: as the coordinator after telling
 * `told` ranks the decision, or as a voter (told < 0) once its vote is
 * out. seq 0: never (the default). */
void crnet__agree_die_at(uint64_t seq, int told);
/* Revokes c now: the caller owns the loop (crnet_comm_revoke). */
void crnet__comm_revoke_now(crnet_comm *c);
/* crnet_comm_revoke from a thread that does not own the loop while another
 * waits on it: the owner revokes at once (progress.c). */
void crnet__revoke_by_owner(crnet_comm *c);

/* --- restarted ranks (join.c) ---------------------------------------------
 *
 * crnet__join: a restarted rank whose bootstrap gave it its slot and the
 * table (world is its world comm): links to every lower slot not gone,
 * waits until an ADMIT names the comm a survivors' grow admitted it to (or
 * the init deadline, a uv_now value, passes), and makes that comm: *out,
 * which owns world. 0, or an error with its text in err.
 * crnet__join_waiting: a survivor's view of the restart slots (join[k] for
 * job rank w->world_size + k): 1 for a newcomer linked on every stream,
 * not lost, admitted to no comm yet. crnet__join_admit: after a grow made
 * nc, tells each newcomer among its members (an ADMIT frame) and marks it
 * admitted. crnet__join_on_admit: an ADMIT frame from job rank via. The
 * loop's owner runs all of them. */
int crnet__join(crnet_comm *world, uint64_t deadline, crnet_comm **out,
                char *err, size_t errlen);
void crnet__join_waiting(crnet__world *w, uint8_t *join);
void crnet__join_admit(crnet_comm *nc);
void crnet__join_on_admit(crnet__world *w, int via,
                          const crnet__frame_header *h, const uint8_t *payload);
/* How link l travels: shared memory for a peer on this node, else TCP
 * (comm.c; once the peer's table entry is known). */
void crnet__world_choose_carriage(crnet__world *w, crnet__link *l);
/* A JOINER frame: restarted rank `via` says where it runs. */
void crnet__join_on_entry(crnet__world *w, int via,
                          const crnet__frame_header *h, const uint8_t *payload);

/* crnet_comm_init (crnet.h), with the layer above: the collectives define
 * crnet_comm_init to call this with theirs (collectives/comm_state.c). */
int crnet__comm_init(crnet_comm **out, const crnet_config *cfg,
                     const crnet__upper_layer *upper);

/* --- point-to-point (p2p.c) ----------------------------------------------
 * The links' callbacks for MSG and RDATA headers (on_message) and for the
 * other point-to-point frames (MSG read whole, RTS, CTS, CREDIT). */
crnet__recv_req *crnet__p2p_on_message(crnet__link *l,
                                       const crnet__frame_header *h);
void crnet__p2p_on_control(crnet__link *l, const crnet__frame_header *h,
                           const uint8_t *payload);
/* A new comm takes the messages that came for it while it was being made
 * (mu held). */
void crnet__p2p_adopt(crnet_comm *c);
/* Job rank j said goodbye: it sends nothing more. A receive posted that
 * names it, or a send waiting for its answer (CTS), could never complete:
 * then every comm that has j fails, as a send to a rank that left does
 * (receives posted later fail the same way when they begin). */
void crnet__p2p_peer_left(crnet__world *w, int j);
/* After a split: messages for a comm that was not made are a mismatch. */
void crnet__p2p_check_orphans(crnet__world *w);
/* Whether a posted receive could be matched by a send of this very process
 * (one from its own rank, or from any source), which another thread may
 * start at any time: then a loop with no handle left is still waiting for
 * something (owner only; progress.c, wait_for_kick). */
bool crnet__p2p_awaits_local(crnet__world *w);
/* Frees what is left of a comm's messages (destroy), and the world's. */
void crnet__p2p_comm_free(crnet_comm *c);
void crnet__p2p_world_free(crnet__world *w);

/* The link slot of stream k to rank r, and the number of slots. */
static inline crnet__peer **crnet__comm_link(crnet_comm *c, int r, int k) {
  return &c->w->peers[(size_t)r * c->w->streams + (size_t)k];
}
static inline int crnet__comm_nlinks(const crnet_comm *c) {
  return c->w->size * (int)c->w->streams;
}

/* The address of a rank's table entry. 0, or CRNET_EINVAL if the entry
 * holds no usable address (bootstrap.c). */
int crnet__entry_to_sockaddr(const crnet__rendezvous_entry *e,
                             struct sockaddr_storage *ss);

/* Lazy links (lazy.c). All run on the loop's owner and never block.
 *
 * crnet__lazy_accept takes a pending connection off the listener (its
 * connection callback, after the table has come).
 * crnet__lazy_want starts connecting to rank r if no link to it exists
 * yet and nothing is under way: a higher rank connects every stream; a
 * lower rank calls the higher one, which then connects. It returns at once.
 * crnet__lazy_close_all closes the listener (unless the bootstrap still
 * runs) and every loose connection; with the comm failed, an ABORT frame
 * goes first on the loose connections that can carry one. Idempotent. */
void crnet__lazy_accept(crnet_comm *c);
void crnet__lazy_want(crnet_comm *c, int r);
void crnet__lazy_close_all(crnet_comm *c, const void *abort_msg,
                           size_t abort_len);
/* The program comes back to crnet (a call, or destroy) after computing:
 * connections in their handshake get their deadline anew, counting from
 * now, since their answers may have been waiting unread meanwhile; only if
 * the loop has not run for a while (LAZY_RESUME_GAP_MS). */
void crnet__lazy_resume(crnet_comm *c);
/* Whether every stream to r has a link in c->peers. */
bool crnet__lazy_linked(const crnet_comm *c, int r);
/* A link just put in c->peers: apply the per-link settings (liveness,
 * socket buffers) that init applies to the mesh's links. */
void crnet__comm_link_settings(crnet_comm *c, crnet__link *l);

/* Joins the job: rendezvous, mesh, handshakes. Fills c->peers and c->table.
 * On failure returns a negative code with the reason in err. */
int crnet__bootstrap(crnet_comm *c, const crnet__settings *s, char *err,
                     size_t errlen);

/* The callbacks every mesh link uses once established. */
extern const crnet__link_callbacks crnet__peer_callbacks;

/* Failures (fail.c; the loop's owner only). crnet__comm_fail records
 * comm c's sticky error (the first one wins), tells c's members with an
 * ABORT frame naming c, and closes the links no comm alive needs. origin
 * is the job rank at fault, or -1 if unknown. */
void crnet__comm_fail(crnet_comm *c, int err, int origin, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails every comm that has job rank j with the same message (a link to j
 * that cannot be used: garbage, a failed handshake, an unusable address),
 * j the rank at fault; but for CRNET_ENOMEM, which is this rank's own. */
void crnet__world_fail_peer(crnet__world *w, int j, int err, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

/* Fails every comm. */
void crnet__world_fail_all(crnet__world *w, int err, int origin,
                           const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Job rank j is lost (its connection closed or failed): every comm that
 * has it fails with CRNET_EPEER, "lost rank r on host (addr) during
 * allreduce #4 round 2: why", after crlaunch's word on j if it comes
 * within CRNET__REPORT_VERDICT_MS. Comms without j go on. */
void crnet__world_lost(crnet__world *w, int j, const char *why);

/* Asks every link with a parked frame whether it may wait on (a call
 * began, a comm was made). */
void crnet__world_recheck_parked(crnet__world *w);

/* This rank aborts the job (crnet_comm_abort; the loop's owner only):
 * tells crlaunch, then fails every comm with CRNET_EABORTED. */
void crnet__comm_abort_now(crnet_comm *c, int code);

/* Every comm fails with CRNET_EABORTED for an abort by job rank `rank`
 * with `code` (this rank's own, or one crlaunch tells of): "rank 2 aborted
 * the job with code 7", and crnet_comm_abort_code() gives `code`. */
void crnet__comm_fail_aborted(crnet_comm *c, int rank, int code);

/* A link that became ready after this rank failed (its handshake was under
 * way when the failure was told): sends it the ABORT the others got and
 * closes it gently, so that the peer learns the reason instead of reading
 * only the end of the connection. */
void crnet__comm_tell_late_link(crnet_comm *c, crnet__link *l);

/* Runs the loop until done(arg) is true, or timeout_ms passes (0: no limit).
 * Returns 0 or CRNET_ETIMEDOUT. It does not look at the sticky error; done()
 * should. */
int crnet__comm_run_until(crnet_comm *c, bool (*done)(void *), void *arg,
                          uint64_t timeout_ms);
/* The same, for a done() that may become true without an event of the
 * loop: before the loop sleeps, may_sleep(arg, true) announces the sleep
 * and returns false if done() is true meanwhile (no sleep then); after,
 * may_sleep(arg, false) withdraws the announcement. */
int crnet__comm_run_until_hooked(crnet_comm *c, bool (*done)(void *), void *arg,
                                 uint64_t timeout_ms,
                                 bool (*may_sleep)(void *, bool));

/* An exchange: the send and the receive of one round of a request (either
 * may be absent: -1), posted on the pair's links as soon as the links exist
 * and the order of calls between the two ranks allows (request.h), and
 * complete once libuv has let go of every part.
 *
 * crnet__exchange_init prepares it and posts nothing. crnet__exchange_post
 * posts what may be posted now, the receive first; it returns whether it posted
 * anything. crnet__exchange_complete says whether every part has been posted
 * and is done; once the comm has failed it takes posted receives back and
 * gives up the parts not posted, so that it becomes true soon.
 * crnet__exchange_received is the number of bytes of the receive that have
 * arrived in order (a later part that came early does not count until the
 * parts before it are in). crnet__exchange_end, after completion, frees what
 * the exchange allocated and fails the comm if a part failed; it returns 0
 * if every part was posted and succeeded, else the sticky error. The iov arrays
 * and the memory they name must live until completion. */
typedef struct crnet__exchange_id {
  uint8_t coll;
  uint64_t seq;
  uint32_t sig;
  crnet__frame_call call;
} crnet__exchange_id;

typedef struct crnet__exchange {
  crnet_comm *c;
  struct crnet_request *req; /* NULL: outside requests (tests) */
  crnet__exchange_id id;
  uint32_t round;
  int to, from;
  const crnet__iov *siov, *riov;
  uint32_t sn, rn;
  uint64_t slen, rlen;
  bool send_posted, recv_posted;
  bool recv_counted; /* the request's count of receives from `from` */
  bool dropped;      /* the comm failed: nothing more is posted */
  /* A message of at least 2 * c->stream_min bytes travels in parts, one per
   * stream (at most c->streams, each at least stream_min bytes, in order:
   * part k is stream k's); smaller ones in one part on stream 0. */
  uint32_t nsend; /* parts sent (0: no send) */
  uint32_t nrecv; /* parts posted to receive (0: no receive) */
  crnet__send_req send[CRNET__MAX_STREAMS];
  crnet__recv_req recv[CRNET__MAX_STREAMS];
  crnet__link *recv_link[CRNET__MAX_STREAMS];
  crnet__iov *recv_iov; /* the parts' scatter lists, when split (heap) */
} crnet__exchange;

int crnet__exchange_init(crnet_comm *c, crnet__exchange *x,
                         struct crnet_request *req,
                         const crnet__exchange_id *id, int to,
                         const crnet__iov *siov, uint32_t sn, int from,
                         const crnet__iov *riov, uint32_t rn, uint32_t round);
bool crnet__exchange_post(crnet__exchange *x);
bool crnet__exchange_posted(const crnet__exchange *x);
bool crnet__exchange_complete(crnet__exchange *x);
uint64_t crnet__exchange_received(const crnet__exchange *x);
int crnet__exchange_end(crnet__exchange *x);

/* For the runtime's tests, with no request in flight: sends `slen` bytes
 * to rank `to` while receiving `rlen` bytes from rank `from` (either may be
 * -1), as round `round` of call number `seq` with signature `sig`, and
 * waits until both are done. 0 or the sticky error. */
int crnet__sendrecv(crnet_comm *c, uint64_t seq, int to, const void *sbuf,
                    uint64_t slen, int from, void *rbuf, uint64_t rlen,
                    uint32_t round, uint32_t sig);

/* A request begins on the loop (progress.c): notes it as the last call
 * begun, for frames that come early and mismatch messages. */
void crnet__comm_begin_call(crnet_comm *c, uint8_t coll, uint64_t seq,
                            const crnet__frame_call *call);

/* Why the last call of this thread on c failed without failing the job
 * (CRNET_EINVAL, CRNET_EUNSUPPORTED), for crnet_comm_errmsg: a buffer of
 * CRNET__CALLMSG bytes of the calling thread's own, now about c. */
#define CRNET__CALLMSG 256
char *crnet__callmsg(const crnet_comm *c);
void crnet__set_callmsg(const crnet_comm *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "rank 3 on host (1.2.3.4:5678), rank 5 ...": the peers this rank waits
 * for (posted receives first, then sends the kernel has not taken), or
 * "no peer (this rank's own work)" (progress.c). */
void crnet__list_awaited(crnet_comm *c, char *buf, size_t n);

/* " during allreduce #4 round 2" (the oldest call in flight), or "". */
void crnet__describe_call(const crnet_comm *c, char *buf, size_t n);

/* "rank 3 on host (1.2.3.4:5678)" for messages. */
void crnet__describe_rank(const crnet_comm *c, int rank, char *buf, size_t n);

#endif
