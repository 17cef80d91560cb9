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

namespace scaleguard::run {

enum class ReduceOp { kSum, kAvg, kMax };

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
  // in: size() * out.numel() elements; rank r receives reduced block r in out.
  virtual std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) = 0;
  // out: size() * in.numel() elements, block r from rank r.
  virtual std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) = 0;
  virtual std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) = 0;
  virtual void send(const at::Tensor& t, int dst, int tag) = 0;
  virtual void recv(const at::Tensor& t, int src, int tag) = 0;
  virtual void barrier() = 0;
  // Sub-group of the ranks passing the same color, ordered by key (MPI_Comm_split).
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) const = 0;
};

// CPU tensors over MPI (non-blocking MPI collectives). Works on a private duplicate of
// `comm`, so its traffic never matches messages of other libraries on the same ranks.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

#ifdef SCALEGUARD_WITH_NCCL
// CUDA tensors on `device` over NCCL; the unique id is broadcast over `comm` (MPI).
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, int device);
#endif

}  // namespace scaleguard::run
