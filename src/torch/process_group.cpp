/* ProcessGroupCrnet and WorkCrnet (process_group.hpp). */
#include "process_group.hpp"

#include <Python.h>

#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace crnet_torch {

namespace {

using c10d::OpType;

/* A non-NULL address for buffers of no bytes. */
char no_bytes;

[[noreturn]] void fail(const std::string &what, const std::string &msg) {
  throw std::runtime_error("crnet: " + what + ": " + msg);
}

std::size_t nbytes(const at::Tensor &t) {
  return (std::size_t)t.numel() * (std::size_t)t.element_size();
}

void *ptr(const at::Tensor &t) {
  return t.numel() == 0 ? static_cast<void *>(&no_bytes) : t.data_ptr();
}

/* Every tensor crnet sees: defined, strided, dense, on the CPU. */
void check_tensor(const at::Tensor &t, const std::string &what) {
  if (!t.defined())
    fail(what, "an undefined tensor");
  if (t.is_quantized())
    fail(what, "quantized tensors are not supported");
  if (t.layout() != c10::kStrided)
    fail(what, std::string("only dense (strided) tensors are supported, got "
                           "layout ") +
                   c10::str(t.layout()) +
                   " (sparse tensors: send their indices and values)");
  if (!t.device().is_cpu())
    fail(what, "only CPU tensors are supported, got a tensor on " +
                   t.device().str() + " (copy it to the CPU first)");
}

at::Tensor &one_tensor(std::vector<at::Tensor> &tensors,
                       const std::string &what) {
  if (tensors.size() != 1)
    fail(what, "one tensor per call (got " + std::to_string(tensors.size()) +
                   "): crnet runs one process per device");
  check_tensor(tensors[0], what);
  return tensors[0];
}

void same_kind(const at::Tensor &t, const at::Tensor &ref,
               const std::string &what, const char *role) {
  check_tensor(t, what);
  if (t.scalar_type() != ref.scalar_type())
    fail(what, std::string(role) + " has dtype " + c10::toString(t.scalar_type()) +
                   ", expected " + c10::toString(ref.scalar_type()));
}

void same_shape(const at::Tensor &t, const at::Tensor &ref,
                const std::string &what, const char *role) {
  same_kind(t, ref, what, role);
  if (t.numel() != ref.numel())
    fail(what, std::string(role) + " has " + std::to_string(t.numel()) +
                   " elements, expected " + std::to_string(ref.numel()));
}

at::Tensor contiguous(const at::Tensor &t) {
  return t.is_contiguous() ? t : t.contiguous();
}

bool overlap(const at::Tensor &a, const at::Tensor &b) {
  if (a.numel() == 0 || b.numel() == 0)
    return false;
  auto x = reinterpret_cast<std::uintptr_t>(a.data_ptr());
  auto y = reinterpret_cast<std::uintptr_t>(b.data_ptr());
  return x < y + nbytes(b) && y < x + nbytes(a);
}

/* Copies t's elements, in order, to dst. */
void pack(const at::Tensor &t, uint8_t *dst) {
  at::Tensor c = contiguous(t);
  if (c.numel() > 0)
    std::memcpy(dst, c.data_ptr(), nbytes(c));
}

/* Copies nbytes(t) bytes at src into t's elements, in order. */
void unpack(const uint8_t *src, const at::Tensor &t) {
  if (t.numel() == 0)
    return;
  if (t.is_contiguous()) {
    std::memcpy(t.data_ptr(), src, nbytes(t));
    return;
  }
  at::Tensor view = at::from_blob(const_cast<uint8_t *>(src), t.sizes(),
                                  t.options());
  t.copy_(view);
}

at::Tensor byte_buffer(std::size_t n) {
  return at::empty({(int64_t)n}, at::TensorOptions().dtype(at::kByte));
}

/* A reduction as crnet does it: datatype, operator, elements per torch
 * element (2 for complex: real and imaginary parts reduce apart, which is
 * right for SUM only), and whether to divide by the group size after
 * (AVG). */
struct Reduction {
  crnet_datatype dt;
  crnet_op op;
  std::size_t per_element;
  bool average;
};

const char *op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
  case c10d::ReduceOp::SUM: return "SUM";
  case c10d::ReduceOp::AVG: return "AVG";
  case c10d::ReduceOp::PRODUCT: return "PRODUCT";
  case c10d::ReduceOp::MIN: return "MIN";
  case c10d::ReduceOp::MAX: return "MAX";
  case c10d::ReduceOp::BAND: return "BAND";
  case c10d::ReduceOp::BOR: return "BOR";
  case c10d::ReduceOp::BXOR: return "BXOR";
  case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  default: return "an unknown ReduceOp";
  }
}

Reduction reduction(const at::Tensor &t, const c10d::ReduceOp &rop,
                    const std::string &what) {
  const auto op = rop.op_;
  const std::string name = std::string("ReduceOp.") + op_name(op);
  const at::ScalarType st = t.scalar_type();
  Reduction r{CRNET_BYTE, CRNET_SUM, 1, false};
  bool floating = false, complex = false, boolean = false;
  switch (st) {
  case at::kFloat: r.dt = CRNET_FLOAT; floating = true; break;
  case at::kDouble: r.dt = CRNET_DOUBLE; floating = true; break;
  case at::kHalf: r.dt = CRNET_FLOAT16; floating = true; break;
  case at::kBFloat16: r.dt = CRNET_BFLOAT16; floating = true; break;
  case at::kComplexFloat: r.dt = CRNET_FLOAT; r.per_element = 2; complex = true; break;
  case at::kComplexDouble: r.dt = CRNET_DOUBLE; r.per_element = 2; complex = true; break;
  case at::kChar: r.dt = CRNET_INT8; break;
  case at::kShort: r.dt = CRNET_INT16; break;
  case at::kInt: r.dt = CRNET_INT32; break;
  case at::kLong: r.dt = CRNET_INT64; break;
  case at::kByte: r.dt = CRNET_UINT8; break;
  case at::kBool: r.dt = CRNET_UINT8; boolean = true; break;
  default:
    fail(what, std::string("dtype ") + c10::toString(st) +
                   " cannot be reduced (float32, float64, float16, "
                   "bfloat16, complex64/128, int8, int16, int32, int64, "
                   "uint8 and bool can)");
  }
  if (complex && op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG)
    fail(what, name + " on complex tensors is not defined (SUM and AVG are)");
  switch (op) {
  case c10d::ReduceOp::SUM:
    r.op = boolean ? CRNET_LOR : CRNET_SUM;
    break;
  case c10d::ReduceOp::AVG:
    if (!floating && !complex)
      fail(what, name + " needs a floating-point or complex tensor, got " +
                     c10::toString(st) + " (use SUM and divide)");
    r.op = CRNET_SUM;
    r.average = true;
    break;
  case c10d::ReduceOp::PRODUCT:
    r.op = boolean ? CRNET_LAND : CRNET_PROD;
    break;
  case c10d::ReduceOp::MIN:
    r.op = boolean ? CRNET_LAND : CRNET_MIN;
    break;
  case c10d::ReduceOp::MAX:
    r.op = boolean ? CRNET_LOR : CRNET_MAX;
    break;
  case c10d::ReduceOp::BAND:
  case c10d::ReduceOp::BOR:
  case c10d::ReduceOp::BXOR:
    if (floating || complex)
      fail(what, name + " needs an integer or bool tensor, got " +
                     c10::toString(st));
    r.op = op == c10d::ReduceOp::BAND  ? (boolean ? CRNET_LAND : CRNET_BAND)
           : op == c10d::ReduceOp::BOR ? (boolean ? CRNET_LOR : CRNET_BOR)
                                       : CRNET_BXOR;
    break;
  default:
    fail(what, name + " is not supported (PREMUL_SUM is NCCL's)");
  }
  return r;
}

/* After the call: divide (AVG) and copy into the caller's tensor if crnet
 * worked on a copy. NULL when there is nothing to do. */
std::function<void()> finish_output(const at::Tensor &user,
                                    const at::Tensor &buf, bool average,
                                    int size) {
  bool copy = !user.is_same(buf);
  if (!average && !copy)
    return nullptr;
  return [user, buf, average, size, copy]() mutable {
    if (average)
      buf.div_(size);
    if (copy)
      user.copy_(buf);
  };
}

/* Releases the GIL for the scope if this thread holds it: a group's
 * destructor may wait for the progress thread, whose callbacks may need
 * it (futures with Python callbacks). */
class GilRelease {
 public:
  GilRelease() {
    if (Py_IsInitialized() && PyGILState_Check())
      state_ = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (state_ != nullptr)
      PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease &) = delete;
  GilRelease &operator=(const GilRelease &) = delete;

 private:
  PyThreadState *state_ = nullptr;
};

} // namespace

/* --- WorkCrnet ------------------------------------------------------------ */

WorkCrnet::WorkCrnet(std::shared_ptr<CommState> state, int rank,
                     c10d::OpType type, const char *profiling_title,
                     const c10::optional<std::vector<at::Tensor>> &inputs,
                     std::vector<at::Tensor> outputs, std::string what)
    : c10d::Work(rank, type, profiling_title, inputs),
      state_(std::move(state)), outputs_(std::move(outputs)),
      what_(std::move(what)) {}

void WorkCrnet::callback(crnet_request *req, int status, void *arg) {
  static_cast<WorkCrnet *>(arg)->on_complete(req, status);
}

void WorkCrnet::on_complete(crnet_request *req, int st) noexcept {
  std::exception_ptr eptr;
  try {
    bool receive = opType_ == OpType::RECV || opType_ == OpType::RECVANYSOURCE;
    if (st == 0 && receive && status.bytes != expect_bytes)
      throw std::runtime_error("crnet: " + what_ + ": received " +
                               std::to_string(status.bytes) +
                               " bytes from rank " +
                               std::to_string(status.source) +
                               ", the tensor has " +
                               std::to_string(expect_bytes));
    if (st == 0 && post) {
      at::NoGradGuard no_grad;
      post();
    } else if (st == CRNET_ETRUNCATE) {
      throw std::runtime_error(
          "crnet: " + what_ + " failed: CRNET_ETRUNCATE: the message is "
          "larger than the tensor (" + std::to_string(expect_bytes) +
          " bytes); it was dropped");
    } else if (st != 0) {
      throw std::runtime_error(describe(comm_, st, what_));
    }
  } catch (...) {
    eptr = std::current_exception();
  }
  finish(eptr);
  c10::intrusive_ptr<c10::ivalue::Future> f;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_ && !future_done_) {
      future_done_ = true;
      f = future_;
    }
  }
  if (f)
    complete_future(f);
  /* Last: after this the Work may be freed by another thread. */
  state_->retire(this, req, &claimed_);
}

void WorkCrnet::complete_future(
    const c10::intrusive_ptr<c10::ivalue::Future> &f) {
  /* exception_ and completed_ no longer change once finish() ran. */
  if (exception_)
    f->setError(exception_);
  else
    f->markCompleted(c10::IValue(outputs_));
}

bool WorkCrnet::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout && state_->claim_for_wait(&claimed_)) {
    crnet_request *r = req_;
    int rc = crnet_wait(&r);
    /* EINVAL with the request untouched (r still set): crnet will not wait
     * here, inside a completion callback. */
    bool refused = rc == CRNET_EINVAL && r != nullptr;
    state_->end_wait(&claimed_, refused);
    if (refused && !isCompleted())
      throw std::runtime_error(
          "crnet: Work.wait() from a completion callback (a future's "
          "then()) on a call that is not complete would never return: " +
          std::string(crnet_comm_errmsg(comm_)));
  }
  return c10d::Work::wait(timeout);
}

int WorkCrnet::sourceRank() const {
  if (!any_source)
    return c10d::Work::sourceRank();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_)
    throw std::runtime_error("crnet: recv from any source: the source is "
                             "known once the receive is complete (wait "
                             "first)");
  return status.source;
}

std::vector<at::Tensor> WorkCrnet::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkCrnet::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> f;
  bool complete_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_)
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()));
    if (completed_ && !future_done_) {
      future_done_ = true;
      complete_now = true;
    }
    f = future_;
  }
  if (complete_now)
    complete_future(f);
  return f;
}

/* --- ProcessGroupCrnet ---------------------------------------------------- */

ProcessGroupCrnet::ProcessGroupCrnet(crnet_comm *comm, int rank, int size,
                                     std::string name)
    : c10d::ProcessGroup(rank, size),
      state_(std::make_shared<CommState>(comm, std::move(name))) {
  register_state(state_);
  init();
}

ProcessGroupCrnet::~ProcessGroupCrnet() {
  /* Closed already at exit (crnet_torch.shutdown), before the interpreter
   * went away: nothing to wait for, and no GIL to touch. */
  if (!state_->open())
    return;
  GilRelease nogil;
  state_->close();
}

c10::intrusive_ptr<WorkCrnet>
ProcessGroupCrnet::make_work(OpType type, const char *title, const char *what,
                             const std::vector<at::Tensor> *inputs,
                             std::vector<at::Tensor> outputs) {
  c10::optional<std::vector<at::Tensor>> in;
  if (inputs != nullptr)
    in = *inputs;
  return c10::make_intrusive<WorkCrnet>(state_, getRank(), type, title, in,
                                        std::move(outputs), what);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCrnet::start(
    const c10::intrusive_ptr<WorkCrnet> &w,
    const std::function<int(crnet_comm *, crnet_request **)> &call) {
  crnet_comm *c = state_->comm_or_throw();
  /* Requests completed since the last call are freed here, on the
   * program's thread. */
  state_->reap();
  crnet_request *req = nullptr;
  int rc = call(c, &req);
  if (rc != 0)
    throw_crnet(c, rc, w->what_);
  w->comm_ = c;
  w->req_ = req;
  c10::intrusive_ptr<WorkCrnet> ref = w;
  state_->begin(w.get(), std::shared_ptr<void>(w.get(), [ref](void *) mutable {
                  ref.reset();
                }));
  /* Runs the callback at once, here, if the call is complete already. */
  rc = crnet_request_on_complete(req, &WorkCrnet::callback, w.get());
  if (rc != 0) {
    /* Only a second callback is refused, and this request has none. */
    int st = crnet_wait(&req);
    w->on_complete(nullptr, st);
  }
  return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::allreduce(std::vector<at::Tensor> &tensors,
                             const c10d::AllreduceOptions &opts) {
  const std::string what = "allreduce";
  at::Tensor &t = one_tensor(tensors, what);
  Reduction r = reduction(t, opts.reduceOp, what);
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::ALLREDUCE, "crnet:all_reduce", what.c_str(),
                     &tensors, {t});
  w->keep = {buf};
  w->post = finish_output(t, buf, r.average, getSize());
  void *p = ptr(buf);
  std::size_t n = (std::size_t)buf.numel() * r.per_element;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_iallreduce(c, CRNET_IN_PLACE, p, n, r.dt, r.op, q);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCrnet::allreduce_coalesced(
    std::vector<at::Tensor> &tensors,
    const c10d::AllreduceCoalescedOptions &opts) {
  const std::string what = "allreduce_coalesced";
  if (tensors.empty())
    fail(what, "no tensors");
  for (auto &t : tensors)
    same_kind(t, tensors[0], what, "a tensor");
  Reduction r = reduction(tensors[0], opts.reduceOp, what);
  std::size_t total = 0;
  for (auto &t : tensors)
    total += nbytes(t);
  at::Tensor flat = byte_buffer(total);
  auto *base = flat.data_ptr<uint8_t>();
  std::size_t off = 0;
  for (auto &t : tensors) {
    pack(t, base + off);
    off += nbytes(t);
  }
  auto w = make_work(OpType::ALLREDUCE_COALESCED, "crnet:all_reduce_coalesced",
                     what.c_str(), &tensors, tensors);
  w->keep = {flat};
  std::vector<at::Tensor> outs = tensors;
  bool average = r.average;
  int size = getSize();
  w->post = [outs, flat, average, size]() {
    const uint8_t *src = flat.data_ptr<uint8_t>();
    for (const auto &t : outs) {
      unpack(src, t);
      src += nbytes(t);
      if (average)
        t.div_(size);
    }
  };
  std::size_t n = total / (std::size_t)tensors[0].element_size() * r.per_element;
  void *p = ptr(flat);
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_iallreduce(c, CRNET_IN_PLACE, p, n, r.dt, r.op, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::broadcast(std::vector<at::Tensor> &tensors,
                             const c10d::BroadcastOptions &opts) {
  const std::string what = "broadcast";
  at::Tensor &t = one_tensor(tensors, what);
  if (opts.rootTensor != 0)
    fail(what, "rootTensor must be 0 (one tensor per process)");
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::BROADCAST, "crnet:broadcast", what.c_str(),
                     &tensors, {t});
  w->keep = {buf};
  w->post = finish_output(t, buf, false, getSize());
  void *p = ptr(buf);
  std::size_t n = nbytes(buf);
  int root = (int)opts.rootRank;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_ibcast(c, p, n, CRNET_BYTE, root, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::reduce(std::vector<at::Tensor> &tensors,
                          const c10d::ReduceOptions &opts) {
  const std::string what = "reduce";
  at::Tensor &t = one_tensor(tensors, what);
  if (opts.rootTensor != 0)
    fail(what, "rootTensor must be 0 (one tensor per process)");
  Reduction r = reduction(t, opts.reduceOp, what);
  int root = (int)opts.rootRank;
  bool at_root = root == getRank();
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::REDUCE, "crnet:reduce", what.c_str(), &tensors,
                     {t});
  w->keep = {buf};
  if (at_root)
    w->post = finish_output(t, buf, r.average, getSize());
  void *p = ptr(buf);
  std::size_t n = (std::size_t)buf.numel() * r.per_element;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    /* The root reduces into its own tensor; the others' stay as they
     * were. */
    return at_root ? crnet_ireduce(c, CRNET_IN_PLACE, p, n, r.dt, r.op, root, q)
                   : crnet_ireduce(c, p, nullptr, n, r.dt, r.op, root, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                             std::vector<at::Tensor> &inputs,
                             const c10d::AllgatherOptions &) {
  const std::string what = "allgather";
  at::Tensor &in = one_tensor(inputs, what);
  if (outputs.size() != 1 || outputs[0].size() != (std::size_t)getSize())
    fail(what, "expected one list of " + std::to_string(getSize()) +
                   " output tensors");
  for (auto &o : outputs[0])
    same_shape(o, in, what, "an output tensor");
  std::size_t n = nbytes(in);
  at::Tensor send = contiguous(in);
  at::Tensor flat = byte_buffer(n * (std::size_t)getSize());
  auto w = make_work(OpType::ALLGATHER, "crnet:all_gather", what.c_str(),
                     &inputs, outputs[0]);
  w->keep = {send, flat};
  std::vector<at::Tensor> outs = outputs[0];
  w->post = [outs, flat, n]() {
    const uint8_t *src = flat.data_ptr<uint8_t>();
    for (const auto &o : outs) {
      unpack(src, o);
      src += n;
    }
  };
  void *s = ptr(send), *d = ptr(flat);
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_iallgather(c, s, d, n, CRNET_BYTE, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::_allgather_base(at::Tensor &output, at::Tensor &input,
                                   const c10d::AllgatherOptions &) {
  const std::string what = "_allgather_base";
  check_tensor(input, what);
  same_kind(output, input, what, "the output tensor");
  if (output.numel() != input.numel() * getSize())
    fail(what, "the output tensor has " + std::to_string(output.numel()) +
                   " elements, expected " + std::to_string(getSize()) +
                   " x " + std::to_string(input.numel()));
  std::size_t n = nbytes(input);
  at::Tensor out = contiguous(output);
  at::Tensor send = input;
  bool in_place = false;
  if (out.is_same(output) && input.is_contiguous() && n > 0 &&
      static_cast<uint8_t *>(input.data_ptr()) ==
          static_cast<uint8_t *>(out.data_ptr()) + n * (std::size_t)getRank()) {
    /* all_gather_into_tensor(out, out.chunk(p)[rank]): in place. */
    in_place = true;
  } else if (!input.is_contiguous() || overlap(input, out)) {
    send = input.clone(at::MemoryFormat::Contiguous);
  }
  auto w = make_work(OpType::_ALLGATHER_BASE, "crnet:_all_gather_base",
                     what.c_str(), nullptr, {output});
  w->keep = {send, out};
  w->post = finish_output(output, out, false, getSize());
  void *s = in_place ? CRNET_IN_PLACE : ptr(send);
  void *d = ptr(out);
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_iallgather(c, s, d, n, CRNET_BYTE, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::gather(std::vector<std::vector<at::Tensor>> &outputs,
                          std::vector<at::Tensor> &inputs,
                          const c10d::GatherOptions &opts) {
  const std::string what = "gather";
  at::Tensor &in = one_tensor(inputs, what);
  int root = (int)opts.rootRank;
  bool at_root = root == getRank();
  std::size_t n = nbytes(in);
  std::vector<at::Tensor> outs;
  if (at_root) {
    if (outputs.size() != 1 || outputs[0].size() != (std::size_t)getSize())
      fail(what, "the root expects one list of " + std::to_string(getSize()) +
                     " output tensors");
    for (auto &o : outputs[0])
      same_shape(o, in, what, "an output tensor");
    outs = outputs[0];
  } else if (!outputs.empty() && !outputs[0].empty()) {
    fail(what, "only the root (rank " + std::to_string(root) +
                   ") takes output tensors");
  }
  at::Tensor send = contiguous(in);
  at::Tensor flat = byte_buffer(at_root ? n * (std::size_t)getSize() : 0);
  auto w = make_work(OpType::GATHER, "crnet:gather", what.c_str(), &inputs,
                     outs);
  w->keep = {send, flat};
  if (at_root)
    w->post = [outs, flat, n]() {
      const uint8_t *src = flat.data_ptr<uint8_t>();
      for (const auto &o : outs) {
        unpack(src, o);
        src += n;
      }
    };
  void *s = ptr(send);
  void *d = at_root ? ptr(flat) : nullptr;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_igather(c, s, d, n, CRNET_BYTE, root, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::scatter(std::vector<at::Tensor> &outputs,
                           std::vector<std::vector<at::Tensor>> &inputs,
                           const c10d::ScatterOptions &opts) {
  const std::string what = "scatter";
  at::Tensor &out = one_tensor(outputs, what);
  int root = (int)opts.rootRank;
  bool at_root = root == getRank();
  std::size_t n = nbytes(out);
  at::Tensor flat = byte_buffer(at_root ? n * (std::size_t)getSize() : 0);
  if (at_root) {
    if (inputs.size() != 1 || inputs[0].size() != (std::size_t)getSize())
      fail(what, "the root expects one list of " + std::to_string(getSize()) +
                     " input tensors");
    uint8_t *dst = flat.data_ptr<uint8_t>();
    for (auto &i : inputs[0]) {
      same_shape(i, out, what, "an input tensor");
      pack(i, dst);
      dst += n;
    }
  } else if (!inputs.empty() && !inputs[0].empty()) {
    fail(what, "only the root (rank " + std::to_string(root) +
                   ") takes input tensors");
  }
  at::Tensor recv = contiguous(out);
  auto w = make_work(OpType::SCATTER, "crnet:scatter", what.c_str(), nullptr,
                     {out});
  w->keep = {flat, recv};
  w->post = finish_output(out, recv, false, getSize());
  void *s = at_root ? ptr(flat) : nullptr;
  void *d = ptr(recv);
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_iscatter(c, s, d, n, CRNET_BYTE, root, q);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCrnet::reduce_scatter(
    std::vector<at::Tensor> &outputs,
    std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts) {
  const std::string what = "reduce_scatter";
  at::Tensor &out = one_tensor(outputs, what);
  if (inputs.size() != 1 || inputs[0].size() != (std::size_t)getSize())
    fail(what, "expected one list of " + std::to_string(getSize()) +
                   " input tensors");
  Reduction r = reduction(out, opts.reduceOp, what);
  auto &ins = inputs[0];
  std::size_t total = 0;
  bool equal = true;
  for (auto &i : ins) {
    same_kind(i, out, what, "an input tensor");
    total += nbytes(i);
    equal = equal && i.numel() == out.numel();
  }
  if (ins[(std::size_t)getRank()].numel() != out.numel())
    fail(what, "this rank's input tensor has " +
                   std::to_string(ins[(std::size_t)getRank()].numel()) +
                   " elements, its output " + std::to_string(out.numel()));
  at::Tensor flat = byte_buffer(total);
  uint8_t *dst = flat.data_ptr<uint8_t>();
  for (auto &i : ins) {
    pack(i, dst);
    dst += nbytes(i);
  }
  at::Tensor recv = contiguous(out);
  auto w = make_work(OpType::REDUCE_SCATTER, "crnet:reduce_scatter",
                     what.c_str(), nullptr, {out});
  w->keep = {flat, recv};
  w->post = finish_output(out, recv, r.average, getSize());
  for (auto &i : ins)
    w->counts[0].push_back((std::size_t)i.numel() * r.per_element);
  void *s = ptr(flat), *d = ptr(recv);
  const std::size_t *counts = w->counts[0].data();
  std::size_t n = (std::size_t)out.numel() * r.per_element;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return equal ? crnet_ireduce_scatter_block(c, s, d, n, r.dt, r.op, q)
                 : crnet_ireduce_scatter(c, s, d, counts, r.dt, r.op, q);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCrnet::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input,
    const c10d::ReduceScatterOptions &opts) {
  const std::string what = "_reduce_scatter_base";
  check_tensor(input, what);
  same_kind(output, input, what, "the output tensor");
  if (input.numel() != output.numel() * getSize())
    fail(what, "the input tensor has " + std::to_string(input.numel()) +
                   " elements, expected " + std::to_string(getSize()) +
                   " x " + std::to_string(output.numel()));
  Reduction r = reduction(output, opts.reduceOp, what);
  at::Tensor send = contiguous(input);
  at::Tensor recv = contiguous(output);
  if (overlap(send, recv))
    recv = at::empty_like(output, at::MemoryFormat::Contiguous);
  auto w = make_work(OpType::_REDUCE_SCATTER_BASE, "crnet:_reduce_scatter_base",
                     what.c_str(), nullptr, {output});
  w->keep = {send, recv};
  w->post = finish_output(output, recv, r.average, getSize());
  void *s = ptr(send), *d = ptr(recv);
  std::size_t n = (std::size_t)output.numel() * r.per_element;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_ireduce_scatter_block(c, s, d, n, r.dt, r.op, q);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCrnet::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &output_splits,
    std::vector<int64_t> &input_splits, const c10d::AllToAllOptions &) {
  const std::string what = "alltoall_base";
  check_tensor(input, what);
  same_kind(output, input, what, "the output tensor");
  const int p = getSize();
  at::Tensor send = contiguous(input);
  at::Tensor recv = contiguous(output);
  if (overlap(send, recv))
    send = input.clone(at::MemoryFormat::Contiguous);
  auto w = make_work(OpType::ALLTOALL_BASE, "crnet:all_to_all", what.c_str(),
                     nullptr, {output});
  w->keep = {send, recv};
  w->post = finish_output(output, recv, false, p);
  void *s = ptr(send), *d = ptr(recv);
  if (output_splits.empty() && input_splits.empty()) {
    if (input.numel() % p != 0 || output.numel() != input.numel())
      fail(what, "without split sizes, input and output must have the same "
                 "number of elements, a multiple of the group size " +
                     std::to_string(p) + " (got " +
                     std::to_string(input.numel()) + " and " +
                     std::to_string(output.numel()) + ")");
    std::size_t n = nbytes(send) / (std::size_t)p;
    return start(w, [&](crnet_comm *c, crnet_request **q) {
      return crnet_ialltoall(c, s, d, n, CRNET_BYTE, q);
    });
  }
  /* Splits count rows (dimension 0); crnet counts bytes. */
  auto byte_counts = [&](const at::Tensor &t, const std::vector<int64_t> &splits,
                         const char *role, std::vector<std::size_t> &out) {
    int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    std::size_t row_bytes =
        rows > 0 ? nbytes(t) / (std::size_t)rows : 0;
    if (splits.empty()) {
      if (rows % p != 0)
        fail(what, std::string("the ") + role + " tensor's " +
                       std::to_string(rows) +
                       " rows do not split evenly into " + std::to_string(p));
      out.assign((std::size_t)p, (std::size_t)(rows / p) * row_bytes);
      return;
    }
    if (splits.size() != (std::size_t)p)
      fail(what, std::string(role) + "_split_sizes has " +
                     std::to_string(splits.size()) + " entries, expected " +
                     std::to_string(p));
    int64_t sum = 0;
    for (int64_t v : splits) {
      if (v < 0)
        fail(what, std::string("a negative ") + role + " split size");
      sum += v;
    }
    if (sum != rows)
      fail(what, std::string(role) + "_split_sizes add up to " +
                     std::to_string(sum) + ", the tensor has " +
                     std::to_string(rows) + " rows");
    out.clear();
    for (int64_t v : splits)
      out.push_back((std::size_t)v * row_bytes);
  };
  byte_counts(input, input_splits, "input", w->counts[0]);
  byte_counts(output, output_splits, "output", w->counts[1]);
  const std::size_t *sc = w->counts[0].data(), *rc = w->counts[1].data();
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_ialltoallv(c, s, sc, nullptr, d, rc, nullptr, CRNET_BYTE, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::alltoall(std::vector<at::Tensor> &outputs,
                            std::vector<at::Tensor> &inputs,
                            const c10d::AllToAllOptions &) {
  const std::string what = "alltoall";
  const std::size_t p = (std::size_t)getSize();
  if (outputs.size() != p || inputs.size() != p)
    fail(what, "expected " + std::to_string(p) +
                   " input and output tensors, got " +
                   std::to_string(inputs.size()) + " and " +
                   std::to_string(outputs.size()));
  for (auto &t : inputs)
    check_tensor(t, what);
  for (auto &t : outputs)
    same_kind(t, inputs[0], what, "an output tensor");
  auto w = make_work(OpType::ALLTOALL, "crnet:all_to_all", what.c_str(),
                     nullptr, outputs);
  std::size_t in_total = 0, out_total = 0;
  for (std::size_t j = 0; j < p; j++) {
    w->counts[0].push_back(nbytes(inputs[j]));
    w->counts[1].push_back(nbytes(outputs[j]));
    in_total += nbytes(inputs[j]);
    out_total += nbytes(outputs[j]);
  }
  at::Tensor flat_in = byte_buffer(in_total), flat_out = byte_buffer(out_total);
  uint8_t *dst = flat_in.data_ptr<uint8_t>();
  for (auto &t : inputs) {
    pack(t, dst);
    dst += nbytes(t);
  }
  w->keep = {flat_in, flat_out};
  std::vector<at::Tensor> outs = outputs;
  w->post = [outs, flat_out]() {
    const uint8_t *src = flat_out.data_ptr<uint8_t>();
    for (const auto &o : outs) {
      unpack(src, o);
      src += nbytes(o);
    }
  };
  void *s = ptr(flat_in), *d = ptr(flat_out);
  const std::size_t *sc = w->counts[0].data(), *rc = w->counts[1].data();
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_ialltoallv(c, s, sc, nullptr, d, rc, nullptr, CRNET_BYTE, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::barrier(const c10d::BarrierOptions &) {
  auto w = make_work(OpType::BARRIER, "crnet:barrier", "barrier", nullptr, {});
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_ibarrier(c, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::send(std::vector<at::Tensor> &tensors, int dst, int tag) {
  const std::string what = "send";
  at::Tensor &t = one_tensor(tensors, what);
  if (tag < 0)
    fail(what, "tag " + std::to_string(tag) + " is negative");
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::SEND, "crnet:send", what.c_str(), &tensors, {});
  w->keep = {buf};
  void *p = ptr(buf);
  std::size_t n = nbytes(buf);
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_isend(c, p, n, CRNET_BYTE, dst, tag, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::recv(std::vector<at::Tensor> &tensors, int src, int tag) {
  const std::string what = "recv";
  at::Tensor &t = one_tensor(tensors, what);
  if (tag < 0)
    fail(what, "tag " + std::to_string(tag) + " is negative");
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::RECV, "crnet:recv", what.c_str(), nullptr, {t});
  w->keep = {buf};
  w->expect_bytes = nbytes(buf);
  w->post = finish_output(t, buf, false, getSize());
  void *p = ptr(buf);
  std::size_t n = nbytes(buf);
  crnet_status *status = &w->status;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_irecv(c, p, n, CRNET_BYTE, src, tag, status, q);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCrnet::recvAnysource(std::vector<at::Tensor> &tensors, int tag) {
  const std::string what = "recv from any source";
  at::Tensor &t = one_tensor(tensors, what);
  if (tag < 0)
    fail(what, "tag " + std::to_string(tag) + " is negative");
  at::Tensor buf = contiguous(t);
  auto w = make_work(OpType::RECVANYSOURCE, "crnet:recvAnySource",
                     what.c_str(), nullptr, {t});
  w->keep = {buf};
  w->any_source = true;
  w->expect_bytes = nbytes(buf);
  w->post = finish_output(t, buf, false, getSize());
  void *p = ptr(buf);
  std::size_t n = nbytes(buf);
  crnet_status *status = &w->status;
  return start(w, [&](crnet_comm *c, crnet_request **q) {
    return crnet_irecv(c, p, n, CRNET_BYTE, CRNET_ANY_SOURCE, tag, status, q);
  });
}

} // namespace crnet_torch
