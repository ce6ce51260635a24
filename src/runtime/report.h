/* The socket between a rank and crlaunch (CRNET_LAUNCHER_FD).
 *
 * Up, one line per report: "abort <rank> <code>" from crnet_comm_abort(),
 * "fail <rank> <origin>" when this rank's failure is due to another rank,
 * "stats ..." at destroy with CRNET_STATS. Down, from crlaunch to every
 * rank: "abort <rank> <code>" when some rank aborted the job, so that each
 * rank learns it even when no link reaches it from the aborting rank (lazy
 * links, or a link still in its handshake); "fail <rank> <origin>" when a
 * rank failed because of another and "gone <rank> <status> <signal>" when
 * a rank's process exited non-zero or was killed, so that a rank that lost
 * that peer can say why it left. What comes down is read only while the
 * rank runs its loop, inside crnet calls: nothing polls. */
#ifndef CRNET_REPORT_H
#define CRNET_REPORT_H

#include <stdbool.h>
#include <stddef.h>

struct crnet_comm;

/* Finds crlaunch's socket (before the comm opens any socket of its own)
 * and keeps a descriptor of its own for it. Without one, or with one that
 * is not what CRNET_LAUNCHER_FD says, the rank has no launcher to talk to,
 * which is fine. */
void crnet__report_find(struct crnet_comm *c);

/* Starts reading what crlaunch says, on the comm's loop (after
 * uv_loop_init). */
void crnet__report_listen(struct crnet_comm *c);

/* Sends one line up. False when there is no launcher. */
bool crnet__report_send(const struct crnet_comm *c, const char *line);

/* Reads what crlaunch has said already, now, without waiting: a rank that
 * relays the loss of a peer first looks whether that peer aborted. */
void crnet__report_check(struct crnet_comm *c);

/* Rank `lost` is lost (its connection ended or failed): waits, at most
 * CRNET__REPORT_VERDICT_MS and only while crlaunch can be heard, for
 * crlaunch's word on it. "abort" fails the comm with CRNET_EABORTED and
 * the code (the peer left because it aborted); otherwise why it left goes
 * into how[] ("rank 3 failed because of rank 5, then exited with status
 * 1", "rank 3 was killed by signal 9 (Killed)"), "" if nothing was said.
 * Returns the rank at fault: the one `lost` failed because of, if said,
 * else `lost`. crlaunch says "gone" as soon as it reaps the process, and
 * "fail" before that, so a peer that died or failed costs a few
 * milliseconds here; one that closed its links without either, or a
 * partition, costs the whole wait. Blocks the loop meanwhile: the rank is
 * failing anyway, and what it waits for does not come through the loop. */
int crnet__report_await(struct crnet_comm *c, int lost, char *how,
                        size_t howlen);

#define CRNET__REPORT_VERDICT_MS 250

/* Stops reading, before the loop closes (the descriptor is closed with
 * the comm). */
void crnet__report_close(struct crnet_comm *c);

#endif
