// NCCL backend: CUDA tensors, one NCCL communicator and one non-blocking CUDA stream per
// Communicator. Uses only the CUDA runtime, NCCL and ATen's core tensor API (no c10 CUDA
// headers), so it compiles against a CPU-only LibTorch too (CMake's compile check).
//
// Ordering with the training stream: Torch's default stream is the legacy default stream
// (stream 0). Each operation waits for an event recorded there before it runs on the NCCL
// stream, and wait() makes stream 0 wait for the operation's completion event, so later
// kernels see the result without blocking the host. Buckets are allocated once and live
// as long as the trainer, so the caching allocator never reuses them mid-operation.
#include <ATen/core/Tensor.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "comm.h"
#include "config.h"

namespace scaleguard::run {
namespace {

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw RunError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(r));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw RunError(std::string("NCCL: ") + what + ": " + ncclGetErrorString(r));
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

class NcclWork : public Work {
 public:
  NcclWork(cudaEvent_t done, at::Tensor keep) : done_(done), keep_(std::move(keep)) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  bool test() override { return cudaEventQuery(done_) == cudaSuccess; }
  void wait() override { check(cudaStreamWaitEvent(nullptr, done_, 0), "cudaStreamWaitEvent"); }

 private:
  cudaEvent_t done_;
  at::Tensor keep_;
};

class NcclCommunicator : public Communicator {
 public:
  // Collective over `mpi` (owned: freed with this object).
  NcclCommunicator(MPI_Comm mpi, int device) : mpi_(mpi), device_(device) {
    MPI_Comm_rank(mpi_, &rank_);
    MPI_Comm_size(mpi_, &size_);
    check(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi_);
    check(ncclCommInitRank(&nccl_, size_, id, rank_), "ncclCommInitRank");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(nccl_);
    cudaStreamDestroy(stream_);
    MPI_Comm_free(&mpi_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce(const at::Tensor& t, ReduceOp op) override {
    check_tensor(t);
    cudaEvent_t done = begin();
    check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), nccl_op(op), nccl_,
                        stream_),
          "ncclAllReduce");
    return end(done, t);
  }
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) override {
    check_tensor(in), check_tensor(out);
    if (in.numel() != out.numel() * size_) throw RunError("reduce_scatter: input must hold size() output blocks");
    cudaEvent_t done = begin();
    check(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), nccl_type(out),
                            nccl_op(op), nccl_, stream_),
          "ncclReduceScatter");
    return end(done, out);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) override {
    check_tensor(in), check_tensor(out);
    if (out.numel() != in.numel() * size_) throw RunError("all_gather: output must hold size() input blocks");
    cudaEvent_t done = begin();
    check(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), nccl_type(in), nccl_, stream_),
          "ncclAllGather");
    return end(done, out);
  }
  std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) override {
    check_tensor(t);
    cudaEvent_t done = begin();
    check(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), root, nccl_, stream_),
          "ncclBroadcast");
    return end(done, t);
  }
  // Point-to-point is blocking like the MPI backend's: the host returns once it is done.
  void send(const at::Tensor& t, int dst, int /*tag: NCCL matches by order*/) override {
    check_tensor(t);
    cudaEvent_t done = begin();
    check(ncclSend(t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), dst, nccl_, stream_), "ncclSend");
    end(done, t);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void recv(const at::Tensor& t, int src, int /*tag*/) override {
    check_tensor(t);
    cudaEvent_t done = begin();
    check(ncclRecv(t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), src, nccl_, stream_), "ncclRecv");
    end(done, t)->wait();
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void barrier() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    MPI_Barrier(mpi_);
  }
  // The sub-group gets its own MPI communicator and an NCCL communicator bootstrapped over
  // it (works with every NCCL version, unlike ncclCommSplit).
  std::unique_ptr<Communicator> split(int color, int key) const override {
    MPI_Comm sub;
    MPI_Comm_split(mpi_, color, key, &sub);
    return std::make_unique<NcclCommunicator>(sub, device_);
  }

 private:
  void check_tensor(const at::Tensor& t) const {
    if (!t.is_cuda() || t.get_device() != device_)
      throw RunError("NCCL backend: tensor on " + t.device().str() + ", expected cuda:" + std::to_string(device_));
    if (!t.is_contiguous()) throw RunError("NCCL backend: tensor must be contiguous");
  }
  // Orders the operation after the work already queued on the training stream.
  cudaEvent_t begin() {
    cudaEvent_t ready, done;
    check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(ready, nullptr), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);  // destruction is deferred until the event completes
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    return done;
  }
  std::unique_ptr<Work> end(cudaEvent_t done, const at::Tensor& keep) {
    check(cudaEventRecord(done, stream_), "cudaEventRecord");
    return std::make_unique<NcclWork>(done, keep);
  }

  MPI_Comm mpi_;
  int device_;
  int rank_ = 0, size_ = 1;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, int device) {
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  return std::make_unique<NcclCommunicator>(dup, device);
}

}  // namespace scaleguard::run
