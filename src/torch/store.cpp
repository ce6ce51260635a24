/* Joining through torch's store (store.hpp).
 *
 * crnet_comm_init calls publish (rank 0) and lookup (the others) on the
 * thread that joins, before crnet has any thread of its own; the calls
 * reach the store from there. torch's C++ stores (TCPStore, FileStore,
 * HashStore, PrefixStore) need no GIL; a store written in Python (a
 * subclass of dist.Store) goes through pybind11's trampoline, which takes
 * the GIL itself, so the caller must not hold it.
 *
 * The values are the job key and the rendezvous's addresses: neither is
 * ever logged here, and the store's errors that reach the message name
 * keys only. */
#include "store.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "world.hpp"

namespace crnet_torch {

namespace {

/* crnet's keys ("crnet.key", "crnet.rendezvous") go under this prefix of
 * the backend's store, itself torch's PrefixStore of the group, so that
 * they meet neither torch's keys nor another program's. */
const char *const kPrefix = "crnet_torch";

/* The store as a crnet_directory, and what it last said when it failed
 * (an exception cannot cross crnet's C code). */
class StoreDirectory {
public:
  explicit StoreDirectory(const c10::intrusive_ptr<c10d::Store> &store)
      : store_(c10::make_intrusive<c10d::PrefixStore>(kPrefix, store)) {
    dir_.publish = &StoreDirectory::publish;
    dir_.lookup = &StoreDirectory::lookup;
    dir_.arg = this;
  }
  const crnet_directory *directory() const { return &dir_; }
  const std::string &failure() const { return failure_; }

private:
  static int publish(void *arg, const char *key, const char *value) {
    auto *self = static_cast<StoreDirectory *>(arg);
    try {
      self->store_->set(
          key, std::vector<uint8_t>(value, value + std::strlen(value)));
      return 0;
    } catch (...) {
      self->remember(std::string("setting ") + key);
      return 1;
    }
  }

  static int lookup(void *arg, const char *key, char *value, size_t capacity,
                    double timeout) {
    auto *self = static_cast<StoreDirectory *>(arg);
    /* The store's own wait bounds the lookup: crnet's init timeout,
     * torch's timeout unless CRNET_INIT_TIMEOUT says otherwise. At least
     * a millisecond: torch reads 0 as "no timeout". */
    auto ms = std::chrono::milliseconds(
        timeout * 1e3 < 1 ? 1 : (int64_t)(timeout * 1e3));
    auto start = std::chrono::steady_clock::now();
    try {
      self->store_->wait({key}, ms);
      std::vector<uint8_t> v = self->store_->get(key);
      if (v.size() >= capacity ||
          std::memchr(v.data(), '\0', v.size()) != nullptr) {
        self->failure_ = std::string("its ") + key +
                         " is not a string shorter than " +
                         std::to_string(capacity) + " bytes";
        return 1;
      }
      std::memcpy(value, v.data(), v.size());
      value[v.size()] = '\0';
      return 0;
    } catch (...) {
      self->remember(std::string("waiting for ") + key);
      /* torch's stores throw alike when the wait timed out and when the
       * store failed (rank 0's TCPStore gone with rank 0): the time says
       * which, for crnet's message. */
      auto waited = std::chrono::steady_clock::now() - start;
      return waited < ms * 9 / 10 ? CRNET_EIO : CRNET_ETIMEDOUT;
    }
  }

  /* What the exception in flight says, without torch's C++ backtrace. */
  void remember(const std::string &what) {
    try {
      throw;
    } catch (const c10::Error &e) {
      failure_ = what + ": " + first_line(e.what_without_backtrace());
    } catch (const std::exception &e) {
      failure_ = what + ": " + first_line(e.what());
    } catch (...) {
      failure_ = what + ": an unknown exception";
    }
  }

  static std::string first_line(const char *text) {
    std::string s(text);
    auto nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  crnet_directory dir_{};
  std::string failure_;
};

} // namespace

crnet_comm *world_through_store(const c10::intrusive_ptr<c10d::Store> &store,
                                int rank, int size, double timeout_seconds) {
  if (!store)
    throw std::invalid_argument("crnet: no store to join the job through");
  StoreDirectory dir(store);
  Join join{rank, size, dir.directory()};
  try {
    return world(timeout_seconds, &join);
  } catch (const std::runtime_error &e) {
    if (dir.failure().empty())
      throw;
    throw std::runtime_error(std::string(e.what()) + "; torch's store, " +
                             dir.failure());
  }
}

} // namespace crnet_torch
