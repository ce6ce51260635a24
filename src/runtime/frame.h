/* The frame header: the fixed 56-byte prefix of every message after the
 * handshake, on mesh links and on rendezvous connections alike.
 *
 * Byte order is little-endian, whatever the host. Layout:
 *
 *   offset size field
 *        0    4 magic    "CRNF"
 *        4    1 version  CRNET__FRAME_VERSION
 *        5    1 kind     enum crnet__frame_kind
 *        6    1 coll     crnet_collective of a DATA frame, else 0
 *        7    1 flags    none defined yet; must be 0
 *        8    8 seq      the communicator's collective sequence number
 *       16    4 round    round of the schedule within the collective
 *       20    4 sig      signature of the call (datatype, op, count, ...),
 *                        so mismatched calls are detected, not corrupted
 *       24    8 length   payload bytes that follow the header
 *   the call, in DATA frames (all zero in others):
 *       32    8 count    the call's count argument
 *       40    4 op       crnet_op (reductions), else -1
 *       44    4 root     root rank (bcast, reduce), else -1
 *       48    1 dtype    crnet_datatype
 *       49    1 schedule schedule id (select.c)
 *       50    1 variant  CRNET__CALL_EXCLUSIVE or 0
 *       51    1 reserved zero
 *       52    4 ctx      the communicator's context id (0: the world's), in
 *                        DATA and ABORT frames; 0 in others
 *
 * The signature is what the receiver compares; the call fields are there so
 * that a mismatch can be told in words on both sides ("rank 2 called
 * allreduce of 100 float, sum, schedule ring") instead of as two hashes.
 * They cost 24 bytes a frame, nothing a network of any kind can measure.
 *
 * A receiver decodes with crnet__frame_decode(), which rejects anything that
 * is not a well-formed header of a known kind: the caller then drops the
 * connection (a stranger) or fails the collective (a peer speaking nonsense).
 */
#ifndef CRNET_FRAME_H
#define CRNET_FRAME_H

#include <stdint.h>

#include "bytes.h"
#include "crnet.h"

#define CRNET__FRAME_HEADER_SIZE 56
#define CRNET__FRAME_VERSION 4
#define CRNET__FRAME_MAGIC "CRNF"
/* Context ids are below this (comm.h, CRNET__MAX_CTX). */
#define CRNET__FRAME_CTX_MAX 1024

enum crnet__frame_kind {
  CRNET__FRAME_DATA = 1,  /* collective payload */
  CRNET__FRAME_ABORT = 2, /* payload: i32 error, i32 code, i32 origin rank,
                             u32 flags, text (fail.c) */
  CRNET__FRAME_BYE = 3,   /* orderly close: nothing follows on this link */
  /* Point-to-point messages (p2p.c); seq and round as said there. */
  CRNET__FRAME_MSG = 4,    /* a message sent eagerly: its payload */
  CRNET__FRAME_RTS = 5,    /* a message to rendezvous for: u64 bytes */
  CRNET__FRAME_CTS = 6,    /* the receive is posted: u32 flags */
  CRNET__FRAME_RDATA = 7,  /* the payload of a rendezvous */
  CRNET__FRAME_CREDIT = 8, /* eager bytes given back: u64 */
  /* Moving a same-host link onto shared memory (link_shm.h). */
  CRNET__FRAME_SHM_OFFER = 9,    /* u64 cookie, u32 R, u32 pid, name */
  CRNET__FRAME_SHM_SWITCH = 10,  /* the last frame this way on TCP */
  CRNET__FRAME_SHM_DECLINE = 11, /* text: why not */
  /* crnet_comm_agree (survive.c): seq is the agreement's number on the
   * comm of ctx; payload: u32 flag, u32 flags, ctx mask, a byte per rank of
   * the comm (1: lost). */
  CRNET__FRAME_AGREE = 12,  /* a vote, to the coordinator */
  CRNET__FRAME_DECIDE = 13, /* the decision, from the coordinator */
  /* crnet_comm_grow (collectives/grow.c, runtime/join.c): a survivor tells
   * a restarted rank the comm it joins: ctx is its id; payload: u32 n, then
   * n u32 job slots, the members in rank order. */
  CRNET__FRAME_ADMIT = 14,
  /* A restarted rank tells each rank below it its rendezvous entry
   * (rendezvous.h): where it runs, for the comms it will be in. */
  CRNET__FRAME_JOINER = 15,
  CRNET__FRAME_RENDEZVOUS_REGISTER = 16, /* rank -> rendezvous: its address */
  CRNET__FRAME_RENDEZVOUS_TABLE = 17,    /* rendezvous -> rank: every address */
  CRNET__FRAME_RENDEZVOUS_ERROR = 18,    /* rendezvous -> rank: text */
  CRNET__FRAME_RENDEZVOUS_JOIN = 19,     /* restarted rank -> rendezvous */
  CRNET__FRAME_RENDEZVOUS_JOINED = 20,   /* rendezvous -> restarted rank */
};

/* Bits of crnet__frame_call.variant. */
#define CRNET__CALL_EXCLUSIVE 0x01 /* exscan */

/* What a DATA frame's sender called, for messages. */
typedef struct crnet__frame_call {
  uint64_t count;
  int32_t op;
  int32_t root;
  uint8_t dtype;
  uint8_t schedule;
  uint8_t variant;
} crnet__frame_call;

typedef struct crnet__frame_header {
  uint8_t kind;
  uint8_t coll;
  uint8_t flags;
  uint64_t seq;
  uint32_t round;
  uint32_t sig;
  uint64_t length;
  uint32_t ctx;
  crnet__frame_call call; /* DATA frames only */
} crnet__frame_header;

/* Writes h into out, little-endian. Never fails. */
void crnet__frame_encode(const crnet__frame_header *h,
                         uint8_t out[CRNET__FRAME_HEADER_SIZE]);

/* Reads a header. Returns 0, or CRNET_EIO when the bytes are not a header
 * this version understands (bad magic or version, unknown kind, a DATA frame
 * naming no collective or datatype, coll or call fields set on a non-DATA
 * frame, unknown flags or variant bits, reserved bytes not zero) or when
 * length exceeds max_length. `*why` (may be NULL) then gets a static string
 * naming the first problem found. */
CRNET_NODISCARD int
crnet__frame_decode(const uint8_t in[CRNET__FRAME_HEADER_SIZE],
                    uint64_t max_length, crnet__frame_header *h,
                    const char **why);

#endif
