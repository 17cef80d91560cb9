#include "data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "config.h"
#include "step_timer.h"

namespace scaleguard::run {
namespace {
// A zeroed flat buffer. On the CPU one of 2 MB or more gets its own 2 MB-aligned memory with
// transparent huge pages requested (MADV_HUGEPAGE: honoured when THP is "madvise" or "always"):
// the all-reduce's single-copy transfer (Open MPI's CMA) pins and walks the peer's pages
// and the reduction streams through them, and with 4 KB pages a 9 MB bucket costs twice as
// long (BENCHMARKS.md, Runner data parallel). Where the kernel has no huge page to give,
// the memory is ordinary pages and nothing else changes.
at::Tensor flat_zeros(int64_t numel, const at::TensorOptions& opts) {
  constexpr size_t kHuge = 2u << 20;
  const size_t bytes = static_cast<size_t>(numel) * opts.dtype().itemsize();
  if (!opts.device().is_cpu() || bytes < kHuge) return at::zeros({numel}, opts);
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* mem = std::aligned_alloc(kHuge, rounded);
  if (!mem) throw std::bad_alloc();
  madvise(mem, rounded, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  std::memset(mem, 0, rounded);
  return torch::from_blob(mem, {numel}, [](void* m) { std::free(m); }, opts);
}
}  // namespace

FlatLayout::FlatLayout(LanguageModel& model, int64_t bucket_bytes, Communicator* shard_group)
    : shard_group_(shard_group) {
  auto named = model.named_parameters();
  if (named.is_empty()) throw RunError("model has no parameters");
  at::TensorOptions opts = named[0].value().options();
  // Reverse registration order ~ the order backward finishes gradients.
  std::vector<size_t> order(named.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;

  std::vector<std::vector<size_t>> groups;  // indices into `named`
  int64_t bytes = 0;
  for (size_t i : order) {
    const at::Tensor& p = named[i].value();
    if (p.scalar_type() != opts.dtype().toScalarType() || p.device() != opts.device())
      throw RunError("all parameters must share one dtype and device (" + named[i].key() + " differs)");
    int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    if (groups.empty() || bucket_bytes == 0 || bytes >= bucket_bytes) groups.emplace_back(), bytes = 0;
    groups.back().push_back(i);
    bytes += size;
  }

  const int64_t shards = shard_group_ ? shard_group_->size() : 1;
  const int64_t shard_index = shard_group_ ? shard_group_->rank() : 0;
  torch::NoGradGuard no_grad;
  std::vector<FlatParam> unsorted;
  for (size_t b = 0; b < groups.size(); ++b) {
    int64_t n = 0;
    for (size_t i : groups[b]) n += named[i].value().numel();
    int64_t padded = (n + shards - 1) / shards * shards;  // equal shards; the padding stays 0
    Bucket bucket;
    bucket.params = flat_zeros(padded, opts);
    bucket.grads = flat_zeros(padded, opts);
    bucket.shard_numel = padded / shards;
    bucket.shard_offset = shard_index * bucket.shard_numel;
    bucket.grad_shard = shards == 1 ? bucket.grads : flat_zeros(bucket.shard_numel, opts);
    int64_t off = 0;
    for (size_t i : groups[b]) {
      at::Tensor p = named[i].value();
      int64_t k = p.numel();
      at::Tensor pview = bucket.params.narrow(0, off, k).view(p.sizes());
      pview.copy_(p);
      p.set_data(pview);  // the parameter now lives in the bucket
      p.mutable_grad() = bucket.grads.narrow(0, off, k).view(p.sizes());
      const std::string& name = named[i].key();
      Slice slice = model.slice_of(name);
      unsorted.push_back({name, p, b, off, k, p.dim() >= 2, global_shape(p.sizes(), slice), slice,
                          model.counts_in_norm(name)});
      off += k;
    }
    buckets_.push_back(std::move(bucket));
  }
  std::sort(unsorted.begin(), unsorted.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  params_ = std::move(unsorted);
  members_.resize(buckets_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatParam& p = params_[i];
    members_[p.bucket].push_back(i);
    const Bucket& bucket = buckets_[p.bucket];
    int64_t lo = std::max(p.offset, bucket.shard_offset);
    int64_t hi = std::min(p.offset + p.numel, bucket.shard_offset + bucket.shard_numel);
    if (lo < hi) pieces_.push_back({i, lo - p.offset, lo - bucket.shard_offset, hi - lo});
  }
}

void FlatLayout::zero_grad() {
  for (auto& b : buckets_) b.grads.zero_();
}

// Runs after AccumulateGrad has added this step's gradient into the bucket view.
struct DataParallel::ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(DataParallel* dp, size_t index) : dp_(dp), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    dp_->on_ready(index_);
    return outputs;
  }
  DataParallel* dp_;
  size_t index_;
};

DataParallel::DataParallel(FlatLayout& layout, Communicator& group, bool overlap)
    : layout_(layout), group_(group), overlap_(overlap), pending_(layout.buckets().size()),
      work_(layout.buckets().size()) {
  const char* sync = std::getenv("SCALEGUARD_DP_BARRIER_BEFORE_COMM");
  barrier_before_comm_ = sync && std::strcmp(sync, "1") == 0;
  if (layout_.shard_group() && layout_.shard_group()->size() != group_.size())
    throw RunError("ZeRO: the layout is sharded over another group than the data-parallel one");
  const auto& params = layout_.params();
  bucket_of_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    bucket_of_[i] = params[i].bucket;
    if (!overlap_ || group_.size() == 1) continue;
    auto acc = torch::autograd::impl::grad_accumulator(params[i].param);
    acc->add_post_hook(std::make_unique<ReadyHook>(this, i));
    accumulators_.push_back(std::move(acc));
  }
}

DataParallel::~DataParallel() {
  for (auto& w : work_)
    if (w) w->wait();  // MPI must not write into freed buckets
}

void DataParallel::begin_backward(bool sync) {
  sync_ = sync;
  if (!sync) return;
  for (size_t b = 0; b < pending_.size(); ++b) pending_[b] = static_cast<int>(layout_.members(b).size());
  next_launch_ = 0;
}

void DataParallel::on_ready(size_t param_index) {
  if (!sync_) return;
  TimedInterval timed(Timed::kComm);  // on a GPU ~0: launching and testing do not stall the stream
  if (--pending_[bucket_of_[param_index]] == 0) launch_ready_prefix();
  // Open MPI progresses non-blocking collectives only inside MPI calls: poke the ones in
  // flight so they advance while backward keeps computing.
  for (size_t b = 0; b < next_launch_; ++b)
    if (work_[b] && work_[b]->test()) work_[b].reset();
}

size_t DataParallel::first_blocking() const {
  // Reduce-scatter (ZeRO-1) stays non-blocking. Otherwise the buckets that finish() would
  // wait for at once anyway go through the blocking all-reduce (comm.h: about 2x faster than
  // MPI_Iallreduce on 2 ranks): all of them without overlap, the last one with overlap (it
  // is ready only when backward ends). Fixed by index, never by timing, so every rank makes
  // the same blocking / non-blocking choice for each bucket (the two never match in MPI).
  if (layout_.shard_group()) return pending_.size();
  return overlap_ ? pending_.size() - 1 : 0;
}

void DataParallel::launch_ready_prefix() {
  const size_t end = first_blocking();
  while (next_launch_ < end && pending_[next_launch_] == 0) launch(next_launch_++);
}

void DataParallel::launch(size_t b) {
  const Bucket& bucket = layout_.buckets()[b];
  work_[b] = layout_.shard_group() ? group_.reduce_scatter(bucket.grads, bucket.grad_shard, ReduceOp::kSum)
                                   : group_.all_reduce(bucket.grads, ReduceOp::kSum);
}

void DataParallel::finish() {
  if (group_.size() == 1) return;
  // Benchmark diagnostic (bench/runner/run.sh): without it comm_ms also holds the time this
  // rank waits for a slower one to finish backward; the barrier takes that wait out of it.
  if (barrier_before_comm_) group_.barrier();
  TimedInterval timed(Timed::kComm);
  // Buckets whose hooks never fired (parameters unused this step) still hold valid (zero)
  // gradients and must be summed so every rank issues the same collectives.
  const size_t end = first_blocking();
  while (next_launch_ < end) launch(next_launch_++);
  for (auto& w : work_)
    if (w) w->wait(), w.reset();
  for (; next_launch_ < pending_.size(); ++next_launch_)
    group_.all_reduce_now(layout_.buckets()[next_launch_].grads, ReduceOp::kSum);
  sync_ = false;
}

void DataParallel::broadcast_parameters() {
  if (group_.size() == 1) return;
  for (const auto& b : layout_.buckets()) group_.broadcast(b.params, 0)->wait();
}

}  // namespace scaleguard::run
