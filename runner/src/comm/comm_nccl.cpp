// NCCL backend: CUDA tensors, one NCCL communicator and one non-blocking CUDA stream per
// Communicator. Uses only the CUDA runtime, NCCL and ATen's core tensor API; Torch's
// current CUDA stream comes from c10_cuda only when SCALEGUARD_WITH_C10_CUDA is defined (a
// CUDA LibTorch), so this file also compiles against a CPU-only LibTorch (CMake's compile
// check, target scaleguard_comm_nccl_check). NOT RUN ON A GPU YET: see runner/README.md,
// "Verified on a GPU vs only by construction".
//
// Ordering with the training stream (Torch's current stream, the legacy default stream
// without c10_cuda): each operation waits for an event recorded there before it runs on
// the NCCL stream, and wait() makes the training stream wait for the operation's
// completion event, so later kernels see the result without blocking the host.
// Point-to-point operations are stream-ordered the same way (no host synchronisation), and
// batch_p2p() issues several of them as one NCCL group.
//
// Failure handling (issue 15):
//  * start-up: communicators are created non-blocking (ncclConfig_t.blocking = 0) and
//    polled with ncclCommGetAsyncError until ready or past the start-up timeout; the unique
//    id travels over a guarded MPI_Ibcast.
//  * sub-groups come from ncclCommSplit of the parent (no second bootstrap, no unused
//    communicator: the world communicator is the parent of every split).
//  * a watchdog thread polls ncclCommGetAsyncError of every live communicator and the
//    completion event of every operation in flight. An asynchronous error, or an operation
//    older than the collective timeout (SCALEGUARD_NCCL_TIMEOUT_S, default 600 s), makes it
//    print what failed, ncclCommAbort every communicator (so no thread stays blocked on a
//    dead peer) and end the process with kExitCommFailure (exit_codes.h): every rank of the
//    job ends that way (the peers of a dead rank time out or see the abort), and
//    scripts/sbatch/train.sbatch requeues the job on that code to resume from its last
//    checkpoint.
//  * destruction never waits on a peer: ncclCommFinalize is polled under the timeout, and
//    past it (or after an error) the communicator is aborted instead of destroyed.
#include <ATen/core/Tensor.h>
#include <cuda_runtime.h>
#include <nccl.h>

#ifdef SCALEGUARD_WITH_C10_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "config/config.h"
#include "config/exit_codes.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the NCCL backend needs NCCL >= 2.18 (ncclCommSplit, non-blocking communicators)"
#endif

namespace scaleguard::run {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw RunError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(r));
}

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  return end && *end == '\0' && s > 0 ? s : fallback;
}

ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    default: throw RunError(std::string("NCCL backend: unsupported dtype ") + c10::toString(t.scalar_type()));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;  // NCCL >= 2.10
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

// The training stream: Torch's current stream on `device` where c10_cuda is available.
cudaStream_t training_stream(int device) {
#ifdef SCALEGUARD_WITH_C10_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return nullptr;  // the legacy default stream, which Torch uses unless told otherwise
#endif
}

// A CUDA event that frees itself; shared by a Work handle and the watchdog.
struct Event {
  cudaEvent_t e = nullptr;
  Event() { check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// One NCCL communicator as the watchdog sees it.
struct CommState {
  ncclComm_t comm = nullptr;
  std::string name;  // "tp group of 2 (rank 0)"
  struct Op {
    std::shared_ptr<Event> done;
    Clock::time_point start;
    std::string what;
    at::Tensor keep;  // buffers stay allocated until the operation finished
  };
  std::mutex mu;
  std::deque<Op> in_flight;
  std::atomic<bool> aborted{false};
};

// Process-wide watchdog: one thread for every communicator of this rank.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog();  // never destroyed: the thread may outlive main()
    return *w;
  }
  void add(const std::shared_ptr<CommState>& c, int device) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(c);
    device_ = device;
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { loop(); }).detach();
    }
  }
  void remove(const CommState* c) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = comms_.begin(); it != comms_.end(); ++it)
      if (it->get() == c) {
        comms_.erase(it);
        return;
      }
  }
  double timeout_s() const { return timeout_s_; }
  // Aborts every communicator of this rank and ends the process (never returns).
  [[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr,
                 "scaleguard-run: NCCL failure: %s; aborting every NCCL communicator of this rank and exiting %d "
                 "(the job should be requeued to resume from its last checkpoint)\n",
                 why.c_str(), kExitCommFailure);
    std::fflush(stderr);
    std::vector<std::shared_ptr<CommState>> comms;
    {
      std::lock_guard<std::mutex> lock(mu_);
      comms = comms_;
    }
    for (auto& c : comms)
      if (!c->aborted.exchange(true)) ncclCommAbort(c->comm);
    std::_Exit(kExitCommFailure);
  }

 private:
  Watchdog() : timeout_s_(env_seconds("SCALEGUARD_NCCL_TIMEOUT_S", 600)) {}
  void loop() {
    bool device_set = false;
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::vector<std::shared_ptr<CommState>> comms;
      int device;
      {
        std::lock_guard<std::mutex> lock(mu_);
        comms = comms_;
        device = device_;
      }
      if (!device_set && device >= 0) device_set = cudaSetDevice(device) == cudaSuccess;
      for (auto& c : comms) {
        if (c->aborted) continue;
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &state);
        if (r != ncclSuccess) fail(c->name + ": ncclCommGetAsyncError: " + ncclGetErrorString(r));
        if (state != ncclSuccess && state != ncclInProgress)
          fail(c->name + ": asynchronous NCCL error: " + ncclGetErrorString(state) + " (" +
               ncclGetLastError(c->comm) + ")");
        std::lock_guard<std::mutex> lock(c->mu);
        while (!c->in_flight.empty()) {
          auto& op = c->in_flight.front();
          cudaError_t q = cudaEventQuery(op.done->e);
          if (q == cudaSuccess) {
            c->in_flight.pop_front();
            continue;
          }
          if (q != cudaErrorNotReady) fail(c->name + ": " + op.what + ": " + cudaGetErrorString(q));
          double age = std::chrono::duration<double>(Clock::now() - op.start).count();
          if (age > timeout_s_)
            fail(c->name + ": " + op.what + " did not finish within " + std::to_string(static_cast<long>(timeout_s_)) +
                 " s (SCALEGUARD_NCCL_TIMEOUT_S): a peer died, hangs or never issued it");
          break;  // in stream order: the later ones are younger
        }
      }
    }
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<CommState>> comms_;
  int device_ = -1;
  bool thread_started_ = false;
  double timeout_s_;
};

// Polls a non-blocking communicator until it is ready (ncclSuccess), past `deadline` it is
// aborted and the rank fails like on any other NCCL error.
void settle(const std::shared_ptr<CommState>& c, ncclResult_t r, const std::string& what, Clock::time_point deadline,
            double timeout_s) {
  if (r != ncclSuccess && r != ncclInProgress)
    Watchdog::get().fail(c->name + ": " + what + ": " + ncclGetErrorString(r));
  ncclResult_t state = r;
  while (state == ncclInProgress) {
    if (Clock::now() > deadline)
      Watchdog::get().fail(c->name + ": " + what + " did not complete within " +
                           std::to_string(static_cast<long>(timeout_s)) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (ncclCommGetAsyncError(c->comm, &state) != ncclSuccess) state = ncclSystemError;
  }
  if (state != ncclSuccess) Watchdog::get().fail(c->name + ": " + what + ": " + ncclGetErrorString(state));
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<Event> done, cudaStream_t training) : done_(std::move(done)), training_(training) {}
  bool test() override { return cudaEventQuery(done_->e) == cudaSuccess; }
  void wait() override { check(cudaStreamWaitEvent(training_, done_->e, 0), "cudaStreamWaitEvent"); }

 private:
  std::shared_ptr<Event> done_;
  cudaStream_t training_;
};

class NcclCommunicator : public Communicator {
 public:
  // World communicator: collective over `mpi` (owned: freed with this object).
  NcclCommunicator(MPI_Comm mpi, int device, double startup_timeout_s) : NcclCommunicator(mpi, device, startup_timeout_s, 0) {
    auto deadline = after(startup_timeout_s_);
    ncclUniqueId id;
    if (rank_ == 0 && ncclGetUniqueId(&id) != ncclSuccess) throw RunError("NCCL: ncclGetUniqueId failed");
    MPI_Request req;
    MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, mpi_, &req);
    for (int done = 0;;) {  // guarded: rank 0 may have died before sending
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (Clock::now() > deadline) {
        std::fprintf(stderr, "scaleguard-run: rank %d: NCCL unique id did not arrive within %.0f s\n", rank_,
                     startup_timeout_s_);
        std::fflush(stderr);
        std::_Exit(kExitCommFailure);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ncclConfig_t config = nonblocking_config();
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
    adopt(comm, "world");
    settle(state_, r, "ncclCommInitRankConfig", deadline, startup_timeout_s_);
  }
  ~NcclCommunicator() override {
    Watchdog::get().remove(state_.get());
    if (state_->comm && !state_->aborted.exchange(true)) {
      // Finalize flushes outstanding work; a dead peer must not block here: abort instead.
      auto deadline = after(Watchdog::get().timeout_s());
      ncclResult_t state = ncclCommFinalize(state_->comm);
      while (state == ncclInProgress && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (ncclCommGetAsyncError(state_->comm, &state) != ncclSuccess) state = ncclSystemError;
      }
      if (state == ncclSuccess) ncclCommDestroy(state_->comm);
      else ncclCommAbort(state_->comm);
    }
    if (stream_) cudaStreamDestroy(stream_);
    MPI_Comm_free(&mpi_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce(const at::Tensor& t, ReduceOp op) override {
    check_tensor(t);
    begin();
    enqueue(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), nccl_op(op),
                          state_->comm, stream_),
            "ncclAllReduce");
    return end("all_reduce", t);
  }
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) override {
    check_tensor(in), check_tensor(out);
    if (in.numel() != out.numel() * size_) throw RunError("reduce_scatter: input must hold size() output blocks");
    begin();
    enqueue(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), nccl_type(out),
                              nccl_op(op), state_->comm, stream_),
            "ncclReduceScatter");
    keep_extra_ = in;
    return end("reduce_scatter", out);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) override {
    check_tensor(in), check_tensor(out);
    if (out.numel() != in.numel() * size_) throw RunError("all_gather: output must hold size() input blocks");
    begin();
    enqueue(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), nccl_type(in), state_->comm,
                          stream_),
            "ncclAllGather");
    keep_extra_ = in;
    return end("all_gather", out);
  }
  std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) override {
    check_tensor(t);
    begin();
    enqueue(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), root,
                          state_->comm, stream_),
            "ncclBroadcast");
    return end("broadcast", t);
  }
  // Stream-ordered like the collectives: the training stream waits for the transfer, the
  // host does not (NCCL matches point-to-point operations by order, not by tag).
  void send(const at::Tensor& t, int dst, int tag) override { batch_p2p({{true, t, dst, tag}}); }
  void recv(const at::Tensor& t, int src, int tag) override { batch_p2p({{false, t, src, tag}}); }
  void batch_p2p(const std::vector<P2P>& ops) override {
    if (ops.empty()) return;
    for (const P2P& op : ops) check_tensor(op.t);
    begin();
    enqueue(ncclGroupStart(), "ncclGroupStart");
    for (const P2P& op : ops) {
      size_t n = static_cast<size_t>(op.t.numel());
      if (op.send) enqueue(ncclSend(op.t.data_ptr(), n, nccl_type(op.t), op.peer, state_->comm, stream_), "ncclSend");
      else enqueue(ncclRecv(op.t.data_ptr(), n, nccl_type(op.t), op.peer, state_->comm, stream_), "ncclRecv");
    }
    enqueue(ncclGroupEnd(), "ncclGroupEnd");
    std::vector<at::Tensor> keep;
    for (const P2P& op : ops) keep.push_back(op.t);
    for (size_t i = 1; i < keep.size(); ++i) pending_keep_.push_back(keep[i]);
    end(ops.size() == 1 ? (ops[0].send ? "send" : "recv") : "grouped send/recv", keep[0])->wait();
  }
  void barrier() override {
    // Everything queued so far, then the ranks; both bounded by the collective timeout
    // through the watchdog (a stream that never drains shows up there).
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    MPI_Barrier(mpi_);
  }
  std::vector<std::string> all_gather_host(const std::string& mine) override {
    return mpi_all_gather_strings(mpi_, mine);
  }
  // ncclCommSplit of this communicator (collective over it, like MPI_Comm_split, which
  // makes the matching MPI communicator for host metadata and barriers).
  std::unique_ptr<Communicator> split(int color, int key) const override {
    MPI_Comm sub;
    MPI_Comm_split(mpi_, color, key, &sub);
    auto child = std::unique_ptr<NcclCommunicator>(new NcclCommunicator(sub, device_, startup_timeout_s_, 0));
    auto deadline = after(startup_timeout_s_);
    ncclConfig_t config = nonblocking_config();
    ncclComm_t comm = nullptr;
    // The parent must be idle before a split in non-blocking mode.
    settle(state_, ncclInProgress, "wait before ncclCommSplit", deadline, startup_timeout_s_);
    ncclResult_t r = ncclCommSplit(state_->comm, color, key, &comm, &config);
    child->adopt(comm, "group " + std::to_string(color));
    settle(child->state_, r, "ncclCommSplit", deadline, startup_timeout_s_);
    return child;
  }

 private:
  NcclCommunicator(MPI_Comm mpi, int device, double startup_timeout_s, int /*private*/)
      : mpi_(mpi), device_(device), startup_timeout_s_(startup_timeout_s), state_(std::make_shared<CommState>()) {
    MPI_Comm_rank(mpi_, &rank_);
    MPI_Comm_size(mpi_, &size_);
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  void adopt(ncclComm_t comm, const std::string& what) {
    state_->comm = comm;
    state_->name = "NCCL " + what + " of " + std::to_string(size_) + " ranks (rank " + std::to_string(rank_) + ")";
    Watchdog::get().add(state_, device_);
  }
  void check_tensor(const at::Tensor& t) const {
    if (!t.is_cuda() || t.get_device() != device_)
      throw RunError("NCCL backend: tensor on " + t.device().str() + ", expected cuda:" + std::to_string(device_));
    if (!t.is_contiguous()) throw RunError("NCCL backend: tensor must be contiguous");
  }
  // A non-blocking communicator may answer ncclInProgress: poll it ready before the next call.
  void enqueue(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return;
    auto deadline = after(Watchdog::get().timeout_s());
    settle(state_, r, what, deadline, Watchdog::get().timeout_s());
  }
  // Orders the operation after the work already queued on the training stream.
  std::shared_ptr<Event> begin() {
    training_ = training_stream(device_);
    auto ready = std::make_shared<Event>();
    check(cudaEventRecord(ready->e, training_), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, ready->e, 0), "cudaStreamWaitEvent");
    return ready;  // destroyed at once: destruction is deferred until the event completed
  }
  std::unique_ptr<Work> end(const char* what, const at::Tensor& keep) {
    auto done = std::make_shared<Event>();
    check(cudaEventRecord(done->e, stream_), "cudaEventRecord");
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      // The watchdog times the operation and holds its buffers until the event fired, so
      // the caching allocator cannot hand them out while NCCL still uses them.
      state_->in_flight.push_back({done, Clock::now(), what, keep});
      if (keep_extra_.defined()) state_->in_flight.push_back({done, Clock::now(), what, keep_extra_});
      for (auto& t : pending_keep_) state_->in_flight.push_back({done, Clock::now(), what, t});
    }
    keep_extra_ = at::Tensor();
    pending_keep_.clear();
    return std::make_unique<NcclWork>(done, training_);
  }

  MPI_Comm mpi_;
  int device_;
  double startup_timeout_s_;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<CommState> state_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t training_ = nullptr;
  at::Tensor keep_extra_;
  std::vector<at::Tensor> pending_keep_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, int device, double startup_timeout_s) {
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  return std::make_unique<NcclCommunicator>(dup, device, startup_timeout_s);
}

}  // namespace scaleguard::run
