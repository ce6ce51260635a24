/* The process's crnet world for the torch backend, and the comms its
 * process groups own.
 *
 * One crnet_comm_init per process: the first call that needs crnet (the
 * "crnet://" rendezvous, the default group's creation, a new_group split)
 * joins the job from crnet's environment (CRNET_RANK, CRNET_SIZE,
 * CRNET_RENDEZVOUS, ... as crlaunch sets them), or, without it, through
 * torch's store with torch's rank and size (store.hpp), with the progress
 * thread on: torch waits on futures that nobody else would move. Every process
 * group owns one comm made from the world (crnet_comm_dup for the default
 * group, crnet_comm_split for new_group) inside a CommState, which its
 * Works share; shutdown() closes them all and then the world, at exit.
 *
 * Public API of crnet only (crnet.h). Nothing here touches Python or
 * torch, so that it can be reasoned about alone.
 */
#ifndef CRNET_TORCH_WORLD_HPP
#define CRNET_TORCH_WORLD_HPP

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "crnet.h"

namespace crnet_torch {

/* How to join when crnet's environment does not name the job (torch's
 * launchers, store.hpp): torch's rank and size, and a directory where rank
 * 0 publishes the rendezvous and the key (crnet_config.directory). */
struct Join {
  int rank;
  int size;
  const crnet_directory *directory;
};

/* The world comm, joined on first use with `timeout_seconds` as the
 * collective timeout (crnet_config.timeout) unless CRNET_TIMEOUT is set,
 * which wins; later calls return the same comm and ignore the arguments.
 * Joins from crnet's environment, or through `join` if given, when the
 * init timeout is `timeout_seconds` too unless CRNET_INIT_TIMEOUT is set
 * (torch's timeout bounds the start, as Gloo's does). Blocks up to the
 * init timeout; throws std::runtime_error with crnet_init_errmsg() on
 * failure, and after shutdown(). */
crnet_comm *world(double timeout_seconds, const Join *join = nullptr);

/* "crnet: <what> failed: CRNET_EPEER (a peer process is gone): <the
 * comm's message>"; the message is the calling thread's (crnet.h,
 * crnet_comm_errmsg). */
std::string describe(const crnet_comm *comm, int rc, const std::string &what);

[[noreturn]] void throw_crnet(const crnet_comm *comm, int rc,
                             const std::string &what);

class CommState;

/* Every live CommState, so that shutdown() can close them. */
void register_state(const std::shared_ptr<CommState> &state);

/* Closes every comm (waiting up to `grace` for calls in flight, then
 * aborting the job) and destroys the world, which waits for every rank to
 * leave too. With abort_code != 0 the job is aborted first
 * (crnet_comm_abort): every rank's calls fail at once with
 * CRNET_EABORTED, and crlaunch exits with that code. Idempotent. */
void shutdown(std::chrono::milliseconds grace, int abort_code);

/* One comm and the requests in flight on it: what a process group and its
 * Works share.
 *
 * A request is freed exactly once, by one of two owners: the thread in
 * Work::wait that claims it first (claim_for_wait, then crnet_wait, which
 * returns only after the completion callback has returned), or else the
 * callback hands it over (retire) and the next call started on the group,
 * or close(), frees it (crnet_test / crnet_wait). Each Work is kept alive
 * from its start (begin) until its request is freed, so that the
 * callback's argument is always valid; the reference is type-erased
 * (shared_ptr<void>) so that this file knows nothing of torch. */
class CommState {
 public:
  CommState(crnet_comm *comm, std::string name);
  ~CommState();
  CommState(const CommState &) = delete;
  CommState &operator=(const CommState &) = delete;

  /* The comm; throws once closed, naming the group. */
  crnet_comm *comm_or_throw() const;
  const std::string &name() const { return name_; }

  /* A request has started for `key` (the Work); `keep` holds it. */
  void begin(const void *key, std::shared_ptr<void> keep);

  /* The completion callback of key's request `req` is done with it (the
   * last thing it does). `claimed` is the Work's claim flag, which this
   * state's lock guards: if no wait claimed the request, the state frees
   * it later. */
  void retire(const void *key, crnet_request *req, bool *claimed);

  /* Claims key's request for the calling thread's crnet_wait; false if
   * the callback has retired it already. end_wait() after the wait, with
   * `refused` when crnet refused it (a wait inside a completion callback):
   * the claim is given back, so that the callback or a later wait frees
   * the request. */
  bool claim_for_wait(bool *claimed);
  void end_wait(bool *claimed, bool refused);

  /* Frees the retired requests whose callbacks have returned and drops
   * their Works (never blocks; called at the start of every call). */
  void reap();

  /* Waits for every request in flight (at most `grace`; then aborts the
   * job with crnet_comm_abort, which completes them), frees them and
   * destroys the comm. Idempotent; blocks: call it without the GIL. */
  void close(std::chrono::milliseconds grace = std::chrono::milliseconds::max());

  /* Requests started and not yet retired. */
  std::size_t in_flight() const;
  /* Whether close() has not run yet. */
  bool open() const;

 private:
  struct Retired {
    crnet_request *req; /* to free, or NULL (a wait freed it) */
    std::shared_ptr<void> keep;
  };
  struct Started {
    const void *key;
    std::shared_ptr<void> keep;
  };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  crnet_comm *comm_;
  std::string name_;
  std::vector<Started> started_; /* in start order; few at a time */
  std::size_t waiters_ = 0;      /* threads inside crnet_wait */
  std::vector<Retired> retired_;
};

} // namespace crnet_torch

#endif
