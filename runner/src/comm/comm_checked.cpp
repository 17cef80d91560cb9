// Device check for communicators (SCALEGUARD_CHECK_COMM=1): a decorator that refuses any
// tensor that is not on the training device before the backend sees it. The NCCL backend
// refuses host tensors anyway, but only on a GPU; this makes the same mistake fail on CPU
// CI (tests/runner/comm_device_check.sh), see comm.h for how a CPU "device" is told apart.
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "config/config.h"

namespace scaleguard::run {
namespace {

class CheckedCommunicator : public Communicator {
 public:
  CheckedCommunicator(std::unique_ptr<Communicator> inner, at::Device device, std::vector<at::ScalarType> cpu_dtypes)
      : inner_(std::move(inner)), device_(device), cpu_dtypes_(std::move(cpu_dtypes)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend() const override { return inner_->backend(); }

  std::unique_ptr<Work> all_reduce(const at::Tensor& t, ReduceOp op) override {
    check(t, "all_reduce");
    return inner_->all_reduce(t, op);
  }
  void all_reduce_now(const at::Tensor& t, ReduceOp op) override {
    check(t, "all_reduce");
    inner_->all_reduce_now(t, op);
  }
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) override {
    check(in, "reduce_scatter (input)"), check(out, "reduce_scatter (output)");
    return inner_->reduce_scatter(in, out, op);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& in, const at::Tensor& out) override {
    check(in, "all_gather (input)"), check(out, "all_gather (output)");
    return inner_->all_gather(in, out);
  }
  std::unique_ptr<Work> broadcast(const at::Tensor& t, int root) override {
    check(t, "broadcast");
    return inner_->broadcast(t, root);
  }
  void send(const at::Tensor& t, int dst, int tag) override {
    check(t, "send");
    inner_->send(t, dst, tag);
  }
  void recv(const at::Tensor& t, int src, int tag) override {
    check(t, "recv");
    inner_->recv(t, src, tag);
  }
  void batch_p2p(const std::vector<P2P>& ops) override {
    for (const P2P& op : ops) check(op.t, op.send ? "send (batched)" : "recv (batched)");
    inner_->batch_p2p(ops);  // keeps the backend's grouping
  }
  void barrier() override { inner_->barrier(); }
  std::vector<std::string> all_gather_host(const std::string& mine) override { return inner_->all_gather_host(mine); }
  std::unique_ptr<Communicator> split(int color, int key) const override {
    return std::make_unique<CheckedCommunicator>(inner_->split(color, key), device_, cpu_dtypes_);
  }

 private:
  void check(const at::Tensor& t, const char* op) const {
    std::string problem;
    if (!t.defined()) problem = "an undefined tensor";
    else if (t.device() != device_) problem = "a tensor on " + t.device().str();
    else if (device_.is_cpu() && std::find(cpu_dtypes_.begin(), cpu_dtypes_.end(), t.scalar_type()) == cpu_dtypes_.end())
      problem = std::string("a ") + c10::toString(t.scalar_type()) + " CPU tensor (on a CPU run only " +
                dtype_list() + " tensors come from the training device; anything else was made on the host)";
    else if (!t.is_contiguous()) problem = "a non-contiguous tensor";
    if (problem.empty()) return;
    throw RunError(std::string("communicator device check (SCALEGUARD_CHECK_COMM): ") + op + " got " + problem +
                   " of shape " + shape(t) + "; the " + inner_->backend() + " group of " + std::to_string(size()) +
                   " ranks only takes contiguous tensors on the training device " + device_.str());
  }
  std::string dtype_list() const {
    std::string s;
    for (at::ScalarType d : cpu_dtypes_) s += (s.empty() ? "" : " or ") + std::string(c10::toString(d));
    return s;
  }
  static std::string shape(const at::Tensor& t) {
    if (!t.defined()) return "[]";
    std::string s = "[";
    for (int64_t d : t.sizes()) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
    return s + "]";
  }

  std::unique_ptr<Communicator> inner_;
  at::Device device_;
  std::vector<at::ScalarType> cpu_dtypes_;
};

}  // namespace

std::unique_ptr<Communicator> make_device_checked_communicator(std::unique_ptr<Communicator> inner, at::Device device,
                                                               std::vector<at::ScalarType> cpu_dtypes) {
  return std::make_unique<CheckedCommunicator>(std::move(inner), device, std::move(cpu_dtypes));
}

}  // namespace scaleguard::run
