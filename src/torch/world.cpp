/* The world comm and the comms of the process groups (world.hpp). */
#include "world.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace crnet_torch {

namespace {

std::mutex world_mu;
crnet_comm *world_comm = nullptr;
bool world_closed = false;
std::vector<std::weak_ptr<CommState>> states;

} // namespace

namespace {

/* crnet's bounds are at most 1e6 s (crnet.h); torch's default is 30
 * minutes, and a timedelta may say more. */
double bound(double seconds) {
  if (seconds > 1e6)
    return 1e6;
  return seconds > 0 ? seconds : 0;
}

bool unset(const char *name) {
  const char *env = std::getenv(name);
  return env == nullptr || *env == '\0';
}

} // namespace

crnet_comm *world(double timeout_seconds, const Join *join) {
  std::lock_guard<std::mutex> lock(world_mu);
  if (world_closed)
    throw std::runtime_error("crnet: the torch backend has shut down (at "
                             "exit, or crnet_torch.shutdown()); a process "
                             "joins a crnet job only once");
  if (world_comm != nullptr)
    return world_comm;
  crnet_config cfg;
  crnet_config_init(&cfg);
  /* torch waits on futures (DDP) and in Work.wait(timeout) without calling
   * into crnet: only the progress thread moves requests on then. */
  cfg.progress_thread = CRNET_PROGRESS_THREAD_ON;
  /* torch's timeout of the group (30 minutes by default, as Gloo's), as
   * crnet's bound on every collective of the process. */
  if (unset("CRNET_TIMEOUT"))
    cfg.timeout = bound(timeout_seconds);
  if (join != nullptr) {
    cfg.rank = join->rank;
    cfg.size = join->size;
    cfg.directory = join->directory;
    /* Ranks a scheduler starts may come minutes apart (pods pulling
     * images); torch's timeout is what its user allowed for that. */
    if (unset("CRNET_INIT_TIMEOUT"))
      cfg.init_timeout = bound(timeout_seconds);
  }
  crnet_comm *c = nullptr;
  int rc = crnet_comm_init(&c, &cfg);
  if (rc != 0)
    throw std::runtime_error(
        std::string("crnet: joining the job failed: ") + crnet_err_name(rc) +
        " (" + crnet_strerror(rc) + "): " + crnet_init_errmsg() +
        (join != nullptr
             ? " (through torch's store, as rank " +
                   std::to_string(join->rank) + " of " +
                   std::to_string(join->size) + ")"
             : " (the backend takes its rank, size and rendezvous from "
               "crnet's environment, or from torch's store when "
               "init_process_group makes the default group crnet's: start "
               "the ranks with crlaunch, or with torch's env://)"));
  world_comm = c;
  return world_comm;
}

std::string describe(const crnet_comm *comm, int rc, const std::string &what) {
  std::string msg = "crnet: " + what + " failed: " + crnet_err_name(rc) +
                    " (" + crnet_strerror(rc) + ")";
  const char *why = comm != nullptr ? crnet_comm_errmsg(comm) : "";
  if (why != nullptr && *why != '\0')
    msg += std::string(": ") + why;
  return msg;
}

void throw_crnet(const crnet_comm *comm, int rc, const std::string &what) {
  throw std::runtime_error(describe(comm, rc, what));
}

void register_state(const std::shared_ptr<CommState> &state) {
  std::lock_guard<std::mutex> lock(world_mu);
  std::vector<std::weak_ptr<CommState>> live;
  for (auto &w : states)
    if (!w.expired())
      live.push_back(std::move(w));
  live.push_back(state);
  states.swap(live);
}

void shutdown(std::chrono::milliseconds grace, int abort_code) {
  std::vector<std::shared_ptr<CommState>> open;
  {
    std::lock_guard<std::mutex> lock(world_mu);
    if (world_closed)
      return;
    world_closed = true;
    /* An abort fails every comm made from the world: the calls in flight
     * complete at once, and so do the peers'. */
    if (abort_code != 0 && world_comm != nullptr)
      crnet_comm_abort(world_comm, abort_code);
    for (auto &w : states)
      if (auto s = w.lock())
        open.push_back(std::move(s));
    states.clear();
  }
  for (auto &s : open)
    s->close(grace);
  open.clear();
  crnet_comm *c;
  {
    std::lock_guard<std::mutex> lock(world_mu);
    c = world_comm;
    world_comm = nullptr;
  }
  if (c == nullptr)
    return;
  /* Says goodbye to every peer and waits for theirs, so that no rank
   * leaves while another still needs its links. A comm made from the
   * world that is still alive (a split nobody adopted) makes this refuse:
   * the process then leaves without the goodbye. */
  int rc = crnet_comm_destroy(c);
  if (rc == CRNET_EINVAL)
    std::fprintf(stderr, "crnet_torch: the world comm was not destroyed "
                         "(a comm made from it is still alive)\n");
}

/* --- CommState ------------------------------------------------------------ */

CommState::CommState(crnet_comm *comm, std::string name)
    : comm_(comm), name_(std::move(name)) {}

CommState::~CommState() { close(); }

crnet_comm *CommState::comm_or_throw() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr)
    throw std::runtime_error("crnet: the process group " + name_ +
                             " has shut down (crnet_torch.shutdown(), or "
                             "the interpreter is exiting)");
  return comm_;
}

std::size_t CommState::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_.size();
}

bool CommState::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_ != nullptr;
}

void CommState::begin(const void *key, std::shared_ptr<void> keep) {
  std::lock_guard<std::mutex> lock(mu_);
  started_.push_back(Started{key, std::move(keep)});
}

void CommState::retire(const void *key, crnet_request *req, bool *claimed) {
  std::shared_ptr<void> keep;
  std::lock_guard<std::mutex> lock(mu_);
  bool mine = !*claimed;
  *claimed = true;
  /* Requests mostly complete in the order they started: search from the
   * front. */
  for (auto it = started_.begin(); it != started_.end(); ++it) {
    if (it->key == key) {
      keep = std::move(it->keep);
      started_.erase(it);
      break;
    }
  }
  retired_.push_back(Retired{mine ? req : nullptr, std::move(keep)});
  cv_.notify_all();
}

bool CommState::claim_for_wait(bool *claimed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (*claimed)
    return false;
  *claimed = true;
  waiters_++;
  return true;
}

void CommState::end_wait(bool *claimed, bool refused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (refused)
    *claimed = false;
  waiters_--;
  cv_.notify_all();
}

void CommState::reap() {
  std::vector<Retired> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (retired_.empty())
      return;
    done.swap(retired_);
  }
  std::vector<Retired> later;
  for (auto &r : done) {
    if (r.req != nullptr) {
      int finished = 0;
      /* Complete already; a test frees it unless its callback has not
       * returned yet (then the next reap does). */
      int rc = crnet_test(&r.req, &finished);
      if (!finished && rc != CRNET_EINVAL) {
        later.push_back(std::move(r));
        continue;
      }
    }
  }
  if (!later.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &r : later)
      retired_.push_back(std::move(r));
  }
  /* `done` drops the Works here, outside the lock. */
}

void CommState::close(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(mu_);
  if (comm_ == nullptr)
    return;
  auto idle = [this] { return started_.empty() && waiters_ == 0; };
  bool in_time;
  if (grace == std::chrono::milliseconds::max()) {
    cv_.wait(lock, idle);
    in_time = true;
  } else {
    in_time = cv_.wait_for(lock, grace, idle);
  }
  if (!in_time) {
    std::fprintf(stderr,
                 "crnet_torch: %zu call(s) of process group %s still in "
                 "flight at shutdown after %.1f s: aborting the job\n",
                 started_.size(), name_.c_str(), (double)grace.count() / 1e3);
    crnet_comm_abort(comm_, 1);
    /* The abort completes every request at once. */
    cv_.wait(lock, idle);
  }
  std::vector<Retired> done;
  done.swap(retired_);
  crnet_comm *c = comm_;
  comm_ = nullptr;
  lock.unlock();
  for (auto &r : done)
    if (r.req != nullptr)
      crnet_wait(&r.req); /* complete: returns once its callback has */
  done.clear();
  /* Local for a comm made by dup or split; the sticky error it may
   * return was reported by the calls that met it. */
  crnet_comm_destroy(c);
}

} // namespace crnet_torch
