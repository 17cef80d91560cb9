// One collective interface; backends live beside it (comm_mpi.cpp for CPU tensors,
// comm_nccl.cpp for CUDA tensors). Strategies talk only to Communicator, so data, tensor
// and pipeline parallel code does not care which library moves the bytes.
//
// All operations work in place on contiguous tensors on the backend's device. The
// collective ones are non-blocking: they return a Work handle; the result is valid after
// wait() (or once test() returned true). Every rank of the communicator must issue the
// same collectives in the same order.
#pragma once
#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

namespace scaleguard::run {

enum class ReduceOp { kSum, kAvg, kMax };

// One point-to-point operation of a batch_p2p() call.
struct P2P {
  bool send;  // false: receive into t
  at::Tensor t;
  int peer;
  int tag;
};

class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;  // drives progress; true once finished (then wait() is free)
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;

  virtual std::unique_ptr<Work> all_reduce(const at::Tensor& t, ReduceOp op) = 0;
  // The same, finished on return, for a caller that would wait at once anyway. MPI uses the
  // blocking MPI_Allreduce there: Open MPI 4.1 runs MPI_Iallreduce in libnbc, which on fewer
  // than 4 ranks or in place always picks reduce-to-root + broadcast (two serial transfers
  // of the whole buffer); the blocking call's tuned algorithm takes about half the time for
  // megabyte gradients on 2 ranks (BENCHMARKS.md, Runner data parallel).
  virtual void all_reduce_now(const at::Tensor& t, ReduceOp op) { all_reduce(t, op)->wait(); }
  // in: size() * out.numel() elements; rank r receives reduced block r in out.
  virtual std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) = 0;
  // out: size() * in.numel() elements, block r from rank r.
  virtual std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) = 0;
  virtual std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) = 0;
  virtual void send(const at::Tensor& t, int dst, int tag) = 0;
  virtual void recv(const at::Tensor& t, int src, int tag) = 0;
  // Several sends and receives that may progress together (NCCL: one ncclGroupStart/End, so
  // a pipeline stage's send and receive to and from a neighbour run at once). The default
  // runs them one by one in the given order, which must then be deadlock-free by itself.
  virtual void batch_p2p(const std::vector<P2P>& ops) {
    for (const P2P& op : ops) op.send ? send(op.t, op.peer, op.tag) : recv(op.t, op.peer, op.tag);
  }
  virtual void barrier() = 0;
  // Host metadata (names, shapes, sizes) from every rank, in rank order. Goes over the
  // communicator's MPI side channel on every backend: host bytes never go through NCCL,
  // and the tensor operations above only ever see tensors on the training device.
  virtual std::vector<std::string> all_gather_host(const std::string& mine) = 0;
  // Sub-group of the ranks passing the same color, ordered by key (MPI_Comm_split).
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) const = 0;
};

// CPU tensors over MPI (non-blocking MPI collectives). Works on a private duplicate of
// `comm`, so its traffic never matches messages of other libraries on the same ranks.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

// all_gather_host over an MPI communicator (blocking; both backends use it).
std::vector<std::string> mpi_all_gather_strings(MPI_Comm comm, const std::string& mine);

// Device check (SCALEGUARD_CHECK_COMM=1, comm_checked.cpp): wraps `inner` (and every group
// split from it) so that each tensor operation refuses a tensor that is not on `device`, or
// not contiguous, with an error naming the operation, before the backend sees it. On a GPU
// that is the whole check. On the CPU a tensor made on the host (at::full(..., kDouble))
// and one on the training "device" share at::kCPU, so with a CPU `device` the check also
// requires one of `cpu_dtypes`, the training dtypes: the runner moves only float32 tensors
// (and bf16 stage-to-stage tensors under --precision bf16) between ranks, and host-made
// scalars, sizes and text (double, int64, bytes) are caught there.
std::unique_ptr<Communicator> make_device_checked_communicator(std::unique_ptr<Communicator> inner, at::Device device,
                                                               std::vector<at::ScalarType> cpu_dtypes);

#ifdef SCALEGUARD_WITH_NCCL
// CUDA tensors on `device` over NCCL; the unique id is broadcast over `comm` (MPI). Creating
// it and every split() is bounded by `startup_timeout_s`, each operation by
// SCALEGUARD_NCCL_TIMEOUT_S (a watchdog; see comm_nccl.cpp): past either, or on an
// asynchronous NCCL error, the rank aborts its communicators and exits kExitCommFailure.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, int device, double startup_timeout_s);
#endif

}  // namespace scaleguard::run
