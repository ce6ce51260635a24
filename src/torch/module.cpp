/* _crnet_torch: the C++ half of the torch backend "crnet" (docs/TORCH.md).
 *
 * crnet_torch.py (the Python half) registers the backend and calls these:
 *   world(timeout)            joins the job (once), returns (rank, size)
 *   world_through_store(store, rank, size, timeout)
 *                             the same, through torch's store (store.hpp)
 *   bcast_bytes(data, t)      rank 0's bytes to every rank, on the world
 *                             comm (the "crnet://" store's address)
 *   split(color, key, t)      crnet_comm_split of the world: a SubComm, or
 *                             None for CRNET_UNDEFINED
 *   create_process_group(store, rank, size, timeout, sub, name,
 *                        through_store)
 *                             the ProcessGroup: over `sub`, or over a dup
 *                             of the world (the default group), joining
 *                             the job through `store` with torch's rank
 *                             and size if through_store (store.hpp)
 *   agree(pg, flag)           crnet_comm_agree on a group's comm: (the
 *                             agreed flag, whether a rank was lost)
 *   shrink(pg)                revoke, acknowledge and shrink a group's
 *                             comm: a SubComm of the survivors
 *   grow(pg, size, tries, wait_s)
 *                             crnet_comm_grow of a group's comm, again
 *                             (wait_s apart, at most `tries` times) until
 *                             it has `size` ranks: (a SubComm of a dup of
 *                             it, how many ranks it admitted)
 *   join(timeout)             a restarted rank (crlaunch --restart): the
 *                             world, which a survivors' grow admitted it
 *                             to, as a SubComm of a dup of it
 *   bcast_bytes_sub(sub, data)  bcast_bytes on a SubComm
 *   in_flight(pg), close(pg)  calls in flight on a group; close it now
 *   shutdown(grace, abort)    every group and the world, at exit; with
 *                             abort != 0, aborting the job first
 * Every call that can wait releases the GIL.
 */
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "process_group.hpp"
#include "store.hpp"
#include "world.hpp"

namespace py = pybind11;

namespace {

using crnet_torch::ProcessGroupCrnet;

/* A comm made by split for a new_group, until its process group adopts
 * it (or destroyed with the handle if that never happens). */
class SubComm {
 public:
  explicit SubComm(crnet_comm *c) : comm_(c) {}
  ~SubComm() {
    if (comm_ != nullptr)
      crnet_comm_destroy(comm_);
  }
  SubComm(const SubComm &) = delete;
  SubComm &operator=(const SubComm &) = delete;
  int rank() const { return comm_ != nullptr ? crnet_comm_rank(comm_) : -1; }
  int size() const { return comm_ != nullptr ? crnet_comm_size(comm_) : 0; }
  /* The comm, still owned here; throws once taken. */
  crnet_comm *get() const {
    if (comm_ == nullptr)
      throw std::runtime_error("crnet: this sub-communicator has been used "
                               "by a process group already");
    return comm_;
  }
  crnet_comm *take() {
    crnet_comm *c = comm_;
    comm_ = nullptr;
    if (c == nullptr)
      throw std::runtime_error("crnet: this sub-communicator has been used "
                               "by a process group already");
    return c;
  }

 private:
  crnet_comm *comm_;
};

std::pair<int, int> world_rank_size(double timeout) {
  crnet_comm *w = crnet_torch::world(timeout);
  return {crnet_comm_rank(w), crnet_comm_size(w)};
}

std::pair<int, int>
world_through_store(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                    int size, double timeout) {
  crnet_comm *w = crnet_torch::world_through_store(store, rank, size, timeout);
  return {crnet_comm_rank(w), crnet_comm_size(w)};
}

/* Rank 0's bytes to every rank of comm w (nullptr: the world's). */
py::bytes bcast_bytes_on(crnet_comm *w, const py::object &data,
                         double timeout) {
  std::string buf;
  bool have = !data.is_none();
  if (have)
    buf = data.cast<std::string>();
  {
    py::gil_scoped_release nogil;
    if (w == nullptr)
      w = crnet_torch::world(timeout);
    if ((crnet_comm_rank(w) == 0) != have)
      throw std::runtime_error("crnet: bcast_bytes: rank 0, and only rank 0, "
                               "passes the data");
    int64_t n = (int64_t)buf.size();
    int rc = crnet_bcast(w, &n, 1, CRNET_INT64, 0);
    if (rc == 0) {
      buf.resize((std::size_t)n);
      rc = crnet_bcast(w, buf.empty() ? &n : static_cast<void *>(&buf[0]),
                       buf.size(), CRNET_BYTE, 0);
    }
    if (rc != 0)
      crnet_torch::throw_crnet(w, rc, "the store's address from rank 0");
  }
  return py::bytes(buf);
}

py::bytes bcast_bytes(const py::object &data, double timeout) {
  return bcast_bytes_on(nullptr, data, timeout);
}

std::shared_ptr<SubComm> split(int color, int key, double timeout) {
  crnet_comm *w = crnet_torch::world(timeout);
  crnet_comm *c = nullptr;
  int rc = crnet_comm_split(w, color, key, &c);
  if (rc != 0)
    crnet_torch::throw_crnet(w, rc, "new_group (crnet_comm_split)");
  if (c == nullptr)
    return nullptr;
  return std::make_shared<SubComm>(c);
}

c10::intrusive_ptr<c10d::ProcessGroup>
create_process_group(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                     int size, double timeout,
                     const std::shared_ptr<SubComm> &sub,
                     const std::string &name, bool through_store) {
  crnet_comm *c = nullptr;
  if (sub) {
    if (sub->rank() != rank || sub->size() != size)
      throw std::runtime_error(
          "crnet: " + name + ": torch's group rank " + std::to_string(rank) +
          " of " + std::to_string(size) + " is not the sub-communicator's " +
          std::to_string(sub->rank()) + " of " + std::to_string(sub->size()));
    c = sub->take();
  } else {
    crnet_comm *w =
        through_store
            ? crnet_torch::world_through_store(store, rank, size, timeout)
            : crnet_torch::world(timeout);
    int wr = crnet_comm_rank(w), ws = crnet_comm_size(w);
    if (rank != wr || size != ws)
      throw std::runtime_error(
          "crnet: torch's rank " + std::to_string(rank) + " of " +
          std::to_string(size) + " is not crnet's rank " +
          std::to_string(wr) + " of " + std::to_string(ws) +
          " (CRNET_RANK, CRNET_SIZE): the backend takes ranks from crnet's "
          "environment; start the job with crlaunch and let "
          "init_process_group take rank and world_size from it, or pass "
          "the same ones");
    /* The default group gets a comm of its own, so that its calls (from
     * any thread torch makes them on) never share numbering with the
     * world's, which serves the rendezvous and the splits. */
    int rc = crnet_comm_dup(w, &c);
    if (rc != 0)
      crnet_torch::throw_crnet(w, rc, "init_process_group (crnet_comm_dup)");
  }
  return c10::make_intrusive<ProcessGroupCrnet>(c, rank, size, name);
}

ProcessGroupCrnet &as_crnet(const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
  auto *p = dynamic_cast<ProcessGroupCrnet *>(pg.get());
  if (p == nullptr)
    throw std::invalid_argument("not a crnet process group");
  return *p;
}

/* Surviving lost ranks (CRNET_ON_FAILURE=continue, crlaunch --keep-going):
 * the agreed flag and whether the survivors counted a rank lost that not
 * all had acknowledged (which every caller then acknowledges, alike). */
std::pair<int, bool> agree(const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
                           int flag) {
  crnet_comm *c = as_crnet(pg).comm();
  int rc = crnet_comm_agree(c, &flag);
  if (rc != 0 && rc != CRNET_EPEER)
    crnet_torch::throw_crnet(c, rc, "agree (crnet_comm_agree)");
  if (rc == CRNET_EPEER)
    crnet_comm_ack_lost(c, nullptr, 0);
  return {flag, rc == CRNET_EPEER};
}

/* A comm of the group's survivors, for the group that replaces it. */
std::shared_ptr<SubComm>
shrink(const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
  crnet_comm *c = as_crnet(pg).comm(), *s = nullptr;
  crnet_comm_revoke(c);
  crnet_comm_ack_lost(c, nullptr, 0);
  int rc = crnet_comm_shrink(c, &s);
  if (rc != 0)
    crnet_torch::throw_crnet(c, rc, "shrink (crnet_comm_shrink)");
  return std::make_shared<SubComm>(s);
}

/* Whether job rank j is a member of comm c. */
bool has_job_rank(const crnet_comm *c, int j) {
  for (int r = 0; r < crnet_comm_size(c); r++)
    if (crnet_comm_job_rank(c, r) == j)
      return true;
  return false;
}

/* The group's comm grown back (crnet_comm_grow), and a dup of it for the
 * group that replaces it: a restarted rank's join() dups the same comm,
 * so both sides make the same calls on it. Every survivor sees the same
 * sizes and counts the same tries, so all stop alike. */
std::pair<std::shared_ptr<SubComm>, int>
grow(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, int size, int tries,
     double wait_s) {
  crnet_comm *c = as_crnet(pg).comm(), *g = nullptr, *d = nullptr;
  if (crnet_comm_lost(c, nullptr, 0) > 0 || crnet_comm_is_revoked(c) == 1) {
    crnet_comm_revoke(c);
    crnet_comm_ack_lost(c, nullptr, 0);
  }
  int rc = crnet_comm_grow(c, &g);
  for (int t = 0; rc == 0 && crnet_comm_size(g) < size && t < tries; t++) {
    crnet_comm *next = nullptr;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    rc = crnet_comm_grow(g, &next);
    if (rc == 0) {
      crnet_comm_destroy(g);
      g = next;
    }
  }
  if (rc != 0) {
    if (g != nullptr)
      crnet_comm_destroy(g);
    crnet_torch::throw_crnet(c, rc, "grow (crnet_comm_grow)");
  }
  int admitted = 0;
  for (int r = 0; r < crnet_comm_size(g); r++)
    admitted += !has_job_rank(c, crnet_comm_job_rank(g, r));
  rc = crnet_comm_dup(g, &d);
  crnet_comm_destroy(g);
  if (rc != 0)
    crnet_torch::throw_crnet(c, rc, "grow (crnet_comm_dup)");
  return {std::make_shared<SubComm>(d), admitted};
}

/* A restarted rank: joins (crnet_comm_init returns once a survivors' grow
 * admitted it) and dups that comm, as the survivors' grow() does. */
std::shared_ptr<SubComm> join(double timeout_seconds) {
  crnet_comm *w = crnet_torch::world(timeout_seconds), *d = nullptr;
  if (crnet_comm_joined(w) != 1)
    throw std::runtime_error(
        "crnet: join_default_group is for a rank crlaunch --restart started "
        "again (CRNET_RESTARTED); this one started with the job");
  int rc = crnet_comm_dup(w, &d);
  if (rc != 0)
    crnet_torch::throw_crnet(w, rc, "join (crnet_comm_dup)");
  return std::make_shared<SubComm>(d);
}

} // namespace

PYBIND11_MODULE(_crnet_torch, m) {
  m.doc() = "crnet's torch.distributed backend (C++ half); use crnet_torch";
  py::class_<SubComm, std::shared_ptr<SubComm>>(m, "SubComm")
      .def_property_readonly("rank", &SubComm::rank)
      .def_property_readonly("size", &SubComm::size);
  m.def("world", &world_rank_size, py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def("world_through_store", &world_through_store, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def("bcast_bytes", &bcast_bytes, py::arg("data"), py::arg("timeout"));
  m.def(
      "bcast_bytes_sub",
      [](const std::shared_ptr<SubComm> &sub, const py::object &data) {
        return bcast_bytes_on(sub->get(), data, 0);
      },
      py::arg("sub"), py::arg("data"));
  m.def("agree", &agree, py::arg("pg"), py::arg("flag"),
        py::call_guard<py::gil_scoped_release>());
  m.def("shrink", &shrink, py::arg("pg"),
        py::call_guard<py::gil_scoped_release>());
  m.def("grow", &grow, py::arg("pg"), py::arg("size"), py::arg("tries"),
        py::arg("wait_s"), py::call_guard<py::gil_scoped_release>());
  m.def("join", &join, py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def("split", &split, py::arg("color"), py::arg("key"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def("create_process_group", &create_process_group, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("sub"),
        py::arg("name"), py::arg("through_store") = false,
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "in_flight",
      [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
        return as_crnet(pg).in_flight();
      },
      py::arg("pg"));
  m.def(
      "close",
      [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
        as_crnet(pg).close();
      },
      py::arg("pg"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "shutdown",
      [](double grace, int abort_code) {
        crnet_torch::shutdown(std::chrono::milliseconds((int64_t)(grace * 1e3)),
                              abort_code);
      },
      py::arg("grace"), py::arg("abort_code") = 0,
      py::call_guard<py::gil_scoped_release>());
  m.attr("UNDEFINED") = CRNET_UNDEFINED;
  m.attr("crnet_version") = CRNET_VERSION_STRING;
}
