/* A link's same-host carriage: its frames through shared memory.
 *
 * Two ranks on one host (same kernel boot, same network namespace: see
 * crnet__rendezvous_same_node) first connect over TCP and authenticate as every
 * pair does (link.h). Then the link moves its byte stream of frames, one
 * direction at a time, into the two rings of a shared segment (shm.h); the
 * TCP connection stays open, carries nothing more, and is how either side
 * learns that the other has gone (its end comes as it always does, when a
 * process exits or is killed).
 *
 * Set-up (the lower rank of the pair creates, the higher attaches):
 *
 *   creator                                   attacher
 *   segment (memfd, sealed) + two eventfds,
 *   an abstract Unix socket listening
 *   ----- SHM_OFFER (cookie, R, name) on TCP --------------------------->
 *                                             connects to the name; the
 *                                             listener's SO_PEERCRED must
 *                                             be the creator's pid and uid
 *   accepts; the connection's SO_PEERCRED
 *   must be the attacher's registered pid
 *   and our uid, else it is closed (a
 *   stranger) and the listener waits on;
 *   ----- memfd and both eventfds (SCM_RIGHTS) ------------------------->
 *                                             attaches (seals, size,
 *                                             cookie: shm.h); from here
 *                                             on writes into ring 1
 *   <---- SHM_SWITCH on TCP, its last frame there -----------------------
 *   reads ring 1 after it; from here on
 *   writes into ring 0
 *   ----- SHM_SWITCH on TCP, its last frame there ---------------------->
 *                                             reads ring 0 after it
 *
 * Either side may answer SHM_DECLINE (with a reason) instead, and the pair
 * stays on TCP; frames keep flowing on TCP throughout, so nothing waits
 * for the set-up. The abstract socket's name is visible to every process
 * in the network namespace, so the name is no secret: the credentials the
 * kernel gives for a Unix connection are what keeps strangers out, and the
 * segment's descriptor only ever travels over a connection that passed
 * that check. A memfd has no name anywhere, so nothing is left behind
 * however the processes end.
 *
 * After the switch the link's reader and writer run exactly as on TCP (the
 * same frame parser, the same checks): this file only moves the bytes,
 * through the functions below that stand in for libuv's stream calls.
 * Large pieces of a write (16 KiB and more) cross in one copy where the
 * kernel lets the reader copy out of the writer's memory
 * (process_vm_readv, probed at set-up): the ring then carries their
 * address, and the write completes once the reader has copied them
 * (link_shm.c, "Single copy"). Where it does not, or with
 * CRNET_SHM_SINGLE_COPY=0, every byte goes through the rings.
 *
 * Waiting. Before the loop sleeps, each shared-memory link announces the
 * sleep on the rings it waits on (shm.h's protocol), and the peer rings
 * this side's doorbell, an eventfd in the loop's epoll set, only then. A
 * loop that only polls (the owner's flag loop_nowait) announces nothing,
 * so a spinning pair exchanges frames without a system call. */
#ifndef CRNET_LINK_SHM_H
#define CRNET_LINK_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"

typedef struct crnet__link crnet__link;
typedef struct crnet__link_shm crnet__link_shm;

/* Whether the link writes into (tx) or reads from (rx) shared memory. */
bool crnet__link_shm_tx(const crnet__link *l);
bool crnet__link_shm_rx(const crnet__link *l);

/* SHM_OFFER, SHM_SWITCH or SHM_DECLINE has been read on the link. */
void crnet__link_shm_control(crnet__link *l, const crnet__frame_header *h,
                             const uint8_t *payload);

/* The stream calls of a link whose writing (tx) or reading (rx) has
 * switched: as uv_write, uv_try_write and uv_read_start / _stop, with the
 * same callbacks and the same promises (a write's callback runs later,
 * from the loop, never from inside the call). A write inline_only goes
 * through the ring whole, never by address (see "Single copy" in
 * link_shm.c). */
int crnet__link_shm_write(crnet__link *l, uv_write_t *w, const uv_buf_t *b,
                          unsigned n, uv_write_cb cb, bool inline_only);
int crnet__link_shm_try_write(crnet__link *l, const uv_buf_t *b, unsigned n);
void crnet__link_shm_read_start(crnet__link *l, uv_alloc_cb alloc,
                                uv_read_cb read);
void crnet__link_shm_read_stop(crnet__link *l);
/* The link's segment while it is mapped on both sides and the link is not
 * closing (its board sides: board.h), else NULL. */
struct crnet__shm *crnet__link_shm_segment(crnet__link *l);
/* Whether the link's move onto shared memory is over, one way or the other
 * (or never began): no longer offered, connecting or waiting. */
bool crnet__link_shm_settled(const crnet__link *l);
/* Rings the peer's doorbell (board.h: a poster that found the peer
 * asleep). Nothing if the segment is not live. */
void crnet__link_shm_ring_peer(crnet__link *l);

/* Whether the peer has written into the ring what this side has not read
 * yet (a piece by address included). */
bool crnet__link_shm_unread(crnet__link *l);

/* Bytes written but not in the ring yet. */
uint64_t crnet__link_shm_queued(const crnet__link *l);

/* One turn of the carriage outside the event loop (what its idle handle
 * does): bytes written go into the ring, bytes come out of it to the
 * reader, finished writes complete. For a polling wait that stays out of
 * the loop on most of its turns (progress.c). True if anything moved. */
bool crnet__link_shm_pump(crnet__link *l);

/* Link l ends (its peer closed, or the connection broke): first, every
 * other shared-memory link of its loop hands over what its ring holds.
 * A peer's last frames (an ABORT saying why the job ends) may wait there,
 * written before the end that is seen now; on TCP alone they would have
 * been read first. */
void crnet__link_shm_drain_loop(crnet__link *l);

/* The link ends while its reader waits parked on TCP with the peer's
 * SHM_SWITCH staged behind the parked frame (link.c): what the peer wrote
 * since is in the ring, unread, and may hold the ABORT that says why it
 * left. Hands the first ABORT found there to the owner's on_control;
 * whether there was one. */
bool crnet__link_shm_staged_abort(crnet__link *l);

/* Shuts the TCP connection down (uv_shutdown, with req and cb) once every
 * queued byte is in the ring: the peer takes the connection's end as the
 * end of the stream once it has read the ring empty. 0 or a libuv error. */
int crnet__link_shm_shutdown(crnet__link *l, uv_shutdown_t *req,
                             uv_shutdown_cb cb);

/* The link is closing: closes the carriage's handles (each counted in
 * l->handles_open, closed through crnet__link_handle_closed). */
void crnet__link_shm_close(crnet__link *l);

/* The link's handles are all closed: cancels what was queued (callbacks
 * with UV_ECANCELED), unmaps, closes the descriptors, frees. */
void crnet__link_shm_free(crnet__link *l);

#endif
