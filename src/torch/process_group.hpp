/* ProcessGroupCrnet: torch.distributed's c10d::ProcessGroup (torch 1.13)
 * over one crnet comm, and WorkCrnet, the Work each call returns.
 *
 * Every operation checks its tensors, maps them to one nonblocking crnet
 * call (crnet_iX) on the group's comm and returns at once; a completion
 * callback (crnet_request_on_complete), run by crnet's progress thread or
 * by a thread waiting in crnet, finishes the Work: it copies results to
 * where torch wants them (lists of tensors, non-contiguous tensors),
 * divides for AVG, marks the Work complete and completes its future
 * (DDP waits on the futures). Nothing of a collective runs in wait():
 * wait() only waits, on the request itself (crnet_wait, the lowest
 * latency) or, with a timeout, on the Work's condition variable.
 *
 * Tensors: CPU and strided only (sparse, quantized and other devices
 * raise RuntimeError before anything is sent); non-contiguous tensors go
 * through a contiguous copy. Data that is only moved (broadcast, gathers,
 * all-to-all, send/recv) travels as bytes, so every dtype works; the
 * reductions map torch's dtypes and ReduceOps onto crnet's (reduction()
 * in process_group.cpp, table in docs/TORCH.md).
 */
#ifndef CRNET_TORCH_PROCESS_GROUP_HPP
#define CRNET_TORCH_PROCESS_GROUP_HPP

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crnet.h"
#include "world.hpp"

namespace crnet_torch {

class WorkCrnet final : public c10d::Work {
 public:
  WorkCrnet(std::shared_ptr<CommState> state, int rank, c10d::OpType type,
            const char *profiling_title,
            const c10::optional<std::vector<at::Tensor>> &inputs,
            std::vector<at::Tensor> outputs, std::string what);
  ~WorkCrnet() override = default;

  /* Without a timeout: crnet_wait on the request, unless its callback has
   * handed it over already (then it is complete). With one: waits on the
   * Work's completion, which the progress thread brings. */
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /* Set before the request starts, read by the callback. */
  std::vector<at::Tensor> keep;      /* buffers crnet reads or writes */
  std::vector<std::size_t> counts[2]; /* count arrays of vector calls */
  crnet_status status{};             /* a receive's */
  bool any_source = false;           /* recvAnysource: sourceRank() */
  std::size_t expect_bytes = 0;      /* a receive's size */
  std::function<void()> post;        /* on success, on the completing thread */

  /* crnet_request_fn: finishes the Work (see the file's comment). */
  static void callback(crnet_request *req, int status, void *arg);

 private:
  friend class ProcessGroupCrnet;
  void on_complete(crnet_request *req, int status) noexcept;
  void complete_future(const c10::intrusive_ptr<c10::ivalue::Future> &f);

  std::shared_ptr<CommState> state_;
  crnet_comm *comm_ = nullptr; /* for messages; valid while in flight */
  crnet_request *req_ = nullptr;
  bool claimed_ = false; /* guarded by state_'s lock */
  std::vector<at::Tensor> outputs_;
  std::string what_;
  /* Made on demand (most Works are only waited for), completed once by the
   * callback or by getFuture, whichever comes second; guarded by mutex_. */
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool future_done_ = false;
};

class ProcessGroupCrnet final : public c10d::ProcessGroup {
 public:
  /* Takes `comm` (a dup or split of the world). */
  ProcessGroupCrnet(crnet_comm *comm, int rank, int size, std::string name);
  /* Waits for the calls in flight, then destroys the comm. */
  ~ProcessGroupCrnet() override;

  const std::string getBackendName() const override { return "crnet"; }

  c10::intrusive_ptr<c10d::Work>
  broadcast(std::vector<at::Tensor> &tensors,
            const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce(std::vector<at::Tensor> &tensors,
            const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  reduce(std::vector<at::Tensor> &tensors,
         const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allgather(std::vector<std::vector<at::Tensor>> &outputs,
            std::vector<at::Tensor> &inputs,
            const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _allgather_base(at::Tensor &output, at::Tensor &input,
                  const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  gather(std::vector<std::vector<at::Tensor>> &outputs,
         std::vector<at::Tensor> &inputs,
         const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  scatter(std::vector<at::Tensor> &outputs,
          std::vector<std::vector<at::Tensor>> &inputs,
          const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter(std::vector<at::Tensor> &outputs,
                 std::vector<std::vector<at::Tensor>> &inputs,
                 const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  alltoall_base(at::Tensor &output, at::Tensor &input,
                std::vector<int64_t> &output_splits,
                std::vector<int64_t> &input_splits,
                const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
           const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  barrier(const c10d::BarrierOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors,
                                      int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors,
                                      int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                               int tag) override;

  /* The group's comm (crnet_torch's agree and shrink); throws once
   * closed. */
  crnet_comm *comm() const { return state_->comm_or_throw(); }
  /* Calls started and not yet complete (tests). */
  std::size_t in_flight() const { return state_->in_flight(); }
  /* Closes the comm now (waiting for calls in flight); later calls raise. */
  void close() { state_->close(); }

 private:
  c10::intrusive_ptr<WorkCrnet>
  make_work(c10d::OpType type, const char *title, const char *what,
            const std::vector<at::Tensor> *inputs,
            std::vector<at::Tensor> outputs);
  /* Starts `call` for `w` (which must have its buffers in w->keep) and
   * returns w; throws, having started nothing, if crnet refuses. */
  c10::intrusive_ptr<c10d::Work>
  start(const c10::intrusive_ptr<WorkCrnet> &w,
        const std::function<int(crnet_comm *, crnet_request **)> &call);

  std::shared_ptr<CommState> state_;
};

} // namespace crnet_torch

#endif
