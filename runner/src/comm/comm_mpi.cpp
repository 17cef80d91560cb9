// MPI backend: CPU tensors, non-blocking collectives (MPI_I*) behind Work handles;
// all_reduce_now is the blocking MPI_Allreduce (see comm.h).
#include <ATen/core/Tensor.h>

#include <climits>
#include <string>

#include "comm/comm.h"
#include "config/config.h"

namespace scaleguard::run {
namespace {

MPI_Datatype mpi_type(const at::Tensor& t, bool reducing) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kChar: return MPI_INT8_T;
    case at::kHalf:
    case at::kBFloat16:
      // No MPI arithmetic type: fine to move as 16-bit words, not to reduce.
      if (!reducing) return MPI_UINT16_T;
      break;
    default: break;
  }
  throw RunError(std::string("MPI backend: unsupported dtype ") + c10::toString(t.scalar_type()) +
                 (reducing ? " for a reduction" : ""));
}

int count_of(const at::Tensor& t) {
  if (!t.device().is_cpu()) throw RunError("MPI backend: tensor is on " + t.device().str() + ", expected CPU");
  if (!t.is_contiguous()) throw RunError("MPI backend: tensor must be contiguous");
  if (t.numel() > INT_MAX) throw RunError("MPI backend: tensor larger than 2^31 elements; split it");
  return static_cast<int>(t.numel());
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

class MpiWork : public Work {
 public:
  // MPI has no average: sum, then divide the result by the group size when finished.
  MpiWork(MPI_Request req, at::Tensor result, int divide_by)
      : req_(req), result_(std::move(result)), divide_by_(divide_by) {}
  ~MpiWork() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);  // never free a live buffer
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Test(&req_, &done, MPI_STATUS_IGNORE);
    if (done) finish();
    return done != 0;
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    MPI_Wait(&req_, MPI_STATUS_IGNORE);
    finish();
  }

 private:
  void finish() {
    req_ = MPI_REQUEST_NULL;
    if (divide_by_ > 1) result_.div_(divide_by_);
  }
  MPI_Request req_;
  at::Tensor result_;  // also keeps the buffer alive while MPI uses it
  int divide_by_;
};

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm owned) : comm_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce(const at::Tensor& t, ReduceOp op) override {
    check_float_avg(t, op);
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t), mpi_type(t, true), mpi_op(op), comm_, &req);
    return std::make_unique<MpiWork>(req, t, op == ReduceOp::kAvg ? size_ : 1);
  }
  void all_reduce_now(const at::Tensor& t, ReduceOp op) override {
    check_float_avg(t, op);
    MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t), mpi_type(t, true), mpi_op(op), comm_);
    if (op == ReduceOp::kAvg && size_ > 1) t.div_(size_);
  }
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) override {
    check_float_avg(out, op);
    if (in.numel() != out.numel() * size_ || in.scalar_type() != out.scalar_type())
      throw RunError("reduce_scatter: input must hold size() blocks of the output's dtype and size");
    MPI_Request req;
    count_of(in);
    MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), count_of(out), mpi_type(out, true), mpi_op(op), comm_,
                              &req);
    return std::make_unique<MpiWork>(req, out, op == ReduceOp::kAvg ? size_ : 1);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) override {
    if (out.numel() != in.numel() * size_ || in.scalar_type() != out.scalar_type())
      throw RunError("all_gather: output must hold size() blocks of the input's dtype and size");
    MPI_Request req;
    count_of(out);
    MPI_Iallgather(in.data_ptr(), count_of(in), mpi_type(in, false), out.data_ptr(), count_of(in),
                   mpi_type(in, false), comm_, &req);
    return std::make_unique<MpiWork>(req, out, 1);
  }
  std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) override {
    MPI_Request req;
    MPI_Ibcast(t.data_ptr(), count_of(t), mpi_type(t, false), root, comm_, &req);
    return std::make_unique<MpiWork>(req, t, 1);
  }
  void send(const at::Tensor& t, int dst, int tag) override {
    MPI_Send(t.data_ptr(), count_of(t), mpi_type(t, false), dst, tag, comm_);
  }
  void recv(const at::Tensor& t, int src, int tag) override {
    MPI_Recv(t.data_ptr(), count_of(t), mpi_type(t, false), src, tag, comm_, MPI_STATUS_IGNORE);
  }
  void barrier() override { MPI_Barrier(comm_); }
  std::vector<std::string> all_gather_host(const std::string& mine) override {
    return mpi_all_gather_strings(comm_, mine);
  }
  std::unique_ptr<Communicator> split(int color, int key) const override {
    MPI_Comm sub;
    MPI_Comm_split(comm_, color, key, &sub);
    return std::make_unique<MpiCommunicator>(sub);
  }

 private:
  static void check_float_avg(const at::Tensor& t, ReduceOp op) {
    if (op == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type()))
      throw RunError("all-reduce average needs a floating-point tensor");
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::vector<std::string> mpi_all_gather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (mine.size() > static_cast<size_t>(INT_MAX)) throw RunError("all_gather_host: over 2 GiB of metadata");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
  }
  if (total > INT_MAX) throw RunError("all_gather_host: over 2 GiB of metadata");
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, comm);
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  return std::make_unique<MpiCommunicator>(dup);
}

}  // namespace scaleguard::run
