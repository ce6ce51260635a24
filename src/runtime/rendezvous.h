/* The rendezvous: how p processes that know only (rank, size, one address and
 * the job key) learn each other's listening addresses.
 *
 * Each rank connects to the server, runs the handshake (purpose RENDEZVOUS),
 * sends one RENDEZVOUS_REGISTER frame with its mesh address, and waits. When
 * all `size` ranks have registered, the server sends every rank one
 * RENDEZVOUS_TABLE frame holding all addresses, and the ranks close. If the
 * timeout passes first, the server sends RENDEZVOUS_ERROR naming the ranks that
 * never appeared to those that did, and reports the same list to its owner.
 *
 * The server runs on a caller's libuv loop: in crlaunch, or inside rank 0 when
 * a job starts without crlaunch. Connections that fail the handshake, send
 * garbage, register a rank twice or a rank out of range are dropped with a
 * log line; the rendezvous goes on.
 *
 * Payloads (little-endian):
 *   entry (112 bytes): family u8 (4 or 6), reserved u8, port u16, addr 16
 *                     (IPv4 in the first 4), pid u32, host 64 (NUL-padded),
 *                     node 24 (crnet__rendezvous_node_id: which kernel and
 * network namespace the rank runs in; zeros when unknown) tuning
 * (CRNET__TUNING_WIRE_SIZE bytes, tuning.h): the cost model's constants options
 * (8 bytes): streams u32 (TCP streams per pair of ranks, 1 to
 *                     CRNET__MAX_STREAMS), stream_min u32 (the smallest part,
 *                     in bytes, a message is split into across streams)
 *   RENDEZVOUS_REGISTER: rank u32, size u32, entry, tuning, options
 *   RENDEZVOUS_TABLE:    size u32, rank 0's tuning, rank 0's options, then
 * `size` entries in rank order RENDEZVOUS_ERROR:    text (not NUL-terminated)
 *
 * Every rank registers a tuning and options, so that registrations have
 * one size and one validation, but only rank 0's travel on in the table:
 * they are what makes every rank's `auto` pick the same schedules (tuning.h)
 * and every pair of ranks open and use its streams alike. The server drops
 * a registration whose tuning or options do not decode.
 */
#ifndef CRNET_RENDEZVOUS_H
#define CRNET_RENDEZVOUS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "handshake.h"
#include "tuning.h"

#define CRNET__RENDEZVOUS_HOST_BYTES 64
#define CRNET__RENDEZVOUS_NODE_BYTES 24
#define CRNET__RENDEZVOUS_ENTRY_SIZE 112
#define CRNET__RENDEZVOUS_OPTIONS_SIZE 8
#define CRNET__RENDEZVOUS_REGISTER_SIZE                                        \
  (8 + CRNET__RENDEZVOUS_ENTRY_SIZE + CRNET__TUNING_WIRE_SIZE +                \
   CRNET__RENDEZVOUS_OPTIONS_SIZE)
/* The table's bytes before the first entry. */
#define CRNET__RENDEZVOUS_TABLE_HEAD                                           \
  (4 + CRNET__TUNING_WIRE_SIZE + CRNET__RENDEZVOUS_OPTIONS_SIZE)

/* Settings every rank must share; rank 0's are the job's. */
typedef struct crnet__rendezvous_options {
  uint32_t streams;    /* CRNET_STREAMS */
  uint32_t stream_min; /* CRNET_STREAMS_MIN_BYTES */
  uint32_t lazy;       /* CRNET_LAZY_LINKS, resolved: 0 or 1 */
  /* 1: rank 0 keeps its links on TCP (CRNET_TRANSPORT=tcp, or
   * CRNET_ENCRYPT=1), so auto prices the links of one host at TCP's α and
   * β, not shared memory's: every rank must price alike, and rank 0's
   * settings are the job's. */
  uint32_t tcp;
  /* Rank 0's CRNET_SHM_BOARD_BYTES as 0 (off) or log2(bytes) + 1, at most
   * CRNET__RENDEZVOUS_BOARD_MAX: whether a call uses the boards must be
   * alike on every rank (board.h). */
  uint32_t board;
} crnet__rendezvous_options;

#define CRNET__RENDEZVOUS_BOARD_MAX 13 /* 4096 bytes */

/* Little-endian: streams (16 bits), flags (16 bits; bit 0: lazy links, bit
 * 1: tcp, bits 2-5: board, the others zero), stream_min (32 bits). */
void crnet__rendezvous_options_encode(const crnet__rendezvous_options *o,
                                      uint8_t *out);
/* 0, or CRNET_EIO if the bytes are out of range. */
int crnet__rendezvous_options_decode(const uint8_t *in,
                                     crnet__rendezvous_options *o);

typedef struct crnet__rendezvous_entry {
  uint8_t family; /* 4 or 6 */
  uint16_t port;
  uint8_t addr[16];
  uint32_t pid;
  char host[CRNET__RENDEZVOUS_HOST_BYTES];    /* NUL-terminated, for messages */
  uint8_t node[CRNET__RENDEZVOUS_NODE_BYTES]; /* crnet__rendezvous_node_id */
  /* In a table sent to a restarted rank: this rank is known lost (its
   * launcher saw it end), so nobody should connect to it. The reserved
   * byte after the family carries it (1). */
  bool gone;
} crnet__rendezvous_entry;

/* What makes two ranks one host for shared memory: the same kernel boot
 * (/proc/sys/kernel/random/boot_id, 16 bytes) and the same network
 * namespace (the inode of /proc/self/ns/net, 8 bytes little-endian). The
 * host name cannot say it: the namespaces of one machine (the multi-host
 * test bed) share theirs, and so may containers and cloned VMs. Zeros
 * where either cannot be read (another kernel, a /proc that hides it). */
void crnet__rendezvous_node_id(uint8_t out[CRNET__RENDEZVOUS_NODE_BYTES]);

/* True when a and b name the same node and it is known (not zeros). */
bool crnet__rendezvous_same_node(const crnet__rendezvous_entry *a,
                                 const crnet__rendezvous_entry *b);

/* True when a and b run on the same kernel (its boot id known and equal):
 * whatever their namespaces or host names, they share its cores. */
bool crnet__rendezvous_same_kernel(const crnet__rendezvous_entry *a,
                                   const crnet__rendezvous_entry *b);

void crnet__rendezvous_entry_encode(const crnet__rendezvous_entry *e,
                                    uint8_t *out);
/* 0, or CRNET_EIO if the bytes are not an entry (bad family, ...). */
int crnet__rendezvous_entry_decode(const uint8_t *in,
                                   crnet__rendezvous_entry *e);
/* "host (1.2.3.4:5678)" into buf, for messages. */
void crnet__rendezvous_entry_format(const crnet__rendezvous_entry *e, char *buf,
                                    size_t n);

/* A RENDEZVOUS_TABLE payload of len bytes as a rank of a job of `size` ranks
 * receives it: the entries go to entries[0..size), rank 0's tuning to
 * *tuning (its source named `source`, as crnet__tuning_decode) and rank 0's
 * options to *options. 0, or CRNET_EIO when the payload is not a table of
 * this job, with *why saying what is wrong ("a malformed table", ...);
 * entries may then be partly written, *tuning and *options are not. */
int crnet__rendezvous_table_decode(const uint8_t *in, uint64_t len,
                                   int32_t size, const char *source,
                                   crnet__rendezvous_entry *entries,
                                   crnet__tuning *tuning,
                                   crnet__rendezvous_options *options,
                                   const char **why);

typedef struct crnet__rendezvous_server crnet__rendezvous_server;

/* Called once, from the loop. status 0: every rank got the table.
 * CRNET_ETIMEDOUT: missing[0..nmissing-1] never registered. The arrays are
 * valid during the call only. The server may be closed inside the callback. */
typedef void (*crnet__rendezvous_done_cb)(crnet__rendezvous_server *srv,
                                          int status, const int *missing,
                                          int nmissing, void *arg);

/* Listens on bind_host (numeric IPv4/IPv6, or NULL for 127.0.0.1) at `port`
 * (0: any) and serves a job of `size` ranks. timeout_s bounds the wait for
 * registrations; handshake_s (CRNET_HANDSHAKE_TIMEOUT, > 0) is the time
 * each connection has to authenticate before it is dropped. 0 or a
 * negative code (CRNET_EIO when it cannot listen, CRNET_EINVAL for bad
 * arguments, CRNET_ENOMEM). */
int crnet__rendezvous_server_start(crnet__rendezvous_server **out,
                                   uv_loop_t *loop,
                                   const uint8_t key[CRNET__KEY_BYTES],
                                   int size, const char *bind_host, int port,
                                   double timeout_s, double handshake_s,
                                   crnet__rendezvous_done_cb cb, void *arg);

/* The same on a socket address (IPv4 or IPv6, port 0: any). The wildcard
 * :: is dual stack: it takes IPv4 clients too, where the host allows it.
 * When it cannot listen, returns CRNET_EIO with the system's reason in why
 * ("address already in use"); why may be NULL. */
int crnet__rendezvous_server_listen(crnet__rendezvous_server **out,
                                    uv_loop_t *loop,
                                    const uint8_t key[CRNET__KEY_BYTES],
                                    int size, const struct sockaddr *addr,
                                    double timeout_s, double handshake_s,
                                    crnet__rendezvous_done_cb cb, void *arg,
                                    char *why, size_t why_len);

/* The port the server listens on (useful after port 0). */
int crnet__rendezvous_server_port(const crnet__rendezvous_server *srv);

/* Restarted ranks (crlaunch --restart, runtime/join.c). After the table
 * went out, a server that allows joins keeps listening: a restarted rank
 * sends RENDEZVOUS_JOIN (the payload of a REGISTER, its job index as the
 * rank), and gets RENDEZVOUS_JOINED: u32 slot, then a table of slot + 1
 * entries (as RENDEZVOUS_TABLE's, entries of lost ranks marked gone). The
 * slot is the newcomer's job rank: size + k for the k-th join, in the
 * order they come, so that each newcomer knows every rank below it, and
 * connects to them all (the higher rank of a pair opens its links, as in
 * the mesh). At most `restarts` joins; later ones get RENDEZVOUS_ERROR. A
 * join before the table went out gets RENDEZVOUS_ERROR too (the job has
 * not started: it fails as a whole). 0 or CRNET_ENOMEM. */
int crnet__rendezvous_server_allow_joins(crnet__rendezvous_server *srv,
                                         int restarts);

/* The launcher saw the process `pid`, started as job index `index`, end:
 * its slot (the index itself, or a slot a restart of that index joined
 * as) is marked gone in the tables restarted ranks get from now on. pid 0:
 * every process of that index (a host that is gone, whose pids the
 * launcher never learnt). */
void crnet__rendezvous_server_lost(crnet__rendezvous_server *srv, int index,
                                   uint32_t pid);

/* Stops serving, closes every connection, wipes the key and frees the server
 * once libuv has closed its handles (so keep running the loop). Safe to call
 * from the done callback. */
void crnet__rendezvous_server_close(crnet__rendezvous_server *srv);

#endif
