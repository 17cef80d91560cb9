#include "parallel/data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "config/config.h"
#include "timing/step_timer.h"

#include <c10/core/StorageImpl.h>

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
// The block a parameter belongs to: "blocks.N.rest" (GPT) or "model.layers.N.rest"
// (Llama's Hugging Face names) -> N; -1 for a parameter outside the blocks.
int64_t block_of(const std::string& name) {
  for (const std::string prefix : {"blocks.", "model.layers."}) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t end = name.find('.', prefix.size());
    if (end == std::string::npos || end == prefix.size()) return -1;
    int64_t n = 0;
    for (size_t i = prefix.size(); i < end; ++i) {
      if (name[i] < '0' || name[i] > '9') return -1;
      n = n * 10 + (name[i] - '0');
    }
    return n;
  }
  return -1;
}

// ZeRO-2/3 free a bucket's memory and allocate it again in place: the storage keeps its
// identity (every view -- parameters, .grad, autograd's saved tensors -- follows it) and
// only its data pointer changes. The allocator is the storage's own (CPU, or CUDA's caching
// allocator on the current stream), so the c10 memory reporting sees both.
void release_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

bool storage_present(const at::Tensor& t) { return t.storage().nbytes() > 0; }

void allocate_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  if (!s->allocator()) throw RunError("ZeRO-2/3: a bucket without an allocator cannot be freed and reallocated");
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.storage().nbytes()) : 0; }

}  // namespace

FlatLayout::FlatLayout(LanguageModel& model, int64_t bucket_bytes, Communicator* shard_group, int stage)
    : shard_group_(shard_group), stage_(shard_group ? stage : 0) {
  auto named = model.named_parameters();
  if (named.is_empty()) throw RunError("model has no parameters");
  at::TensorOptions opts = named[0].value().options();
  // Reverse registration order ~ the order backward finishes gradients.
  std::vector<size_t> order(named.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;

  std::vector<std::vector<size_t>> groups;  // indices into `named`
  std::vector<int64_t> group_block;
  int64_t bytes = 0;
  // A model that does not call the block hooks keeps every bucket gathered through the step.
  const bool per_block = stage_ >= 3 && sharding() && model.calls_block_hooks();
  for (size_t i : order) {
    const at::Tensor& p = named[i].value();
    if (p.scalar_type() != opts.dtype().toScalarType() || p.device() != opts.device())
      throw RunError("all parameters must share one dtype and device (" + named[i].key() + " differs)");
    int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    // ZeRO-3: one bucket per GPT block whatever its size (gathered and freed as a unit);
    // the other parameters by size as always, never in a block's bucket.
    const int64_t block = per_block ? block_of(named[i].key()) : -1;
    const bool new_block = per_block && (group_block.empty() || group_block.back() != block);
    if (groups.empty() || new_block || (block < 0 && (bucket_bytes == 0 || bytes >= bucket_bytes)))
      groups.emplace_back(), group_block.push_back(block), bytes = 0;
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
    bucket.block = group_block[b];
    // Buckets that ZeRO-2/3 free and allocate again need an allocator (not from_blob memory).
    bucket.params = params_sharded() ? at::zeros({padded}, opts) : flat_zeros(padded, opts);
    bucket.grads = grads_sharded() ? at::zeros({padded}, opts) : flat_zeros(padded, opts);
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
    if (params_sharded()) {  // keep this rank's shard; the full bucket exists only while gathered
      bucket.shard_params = bucket.params.narrow(0, bucket.shard_offset, bucket.shard_numel).clone();
      release_storage(bucket.params);
    }
    if (grads_sharded()) release_storage(bucket.grads);
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
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (grads_present(b)) buckets_[b].grads.zero_();
    else if (!(params_sharded() && buckets_[b].block >= 0)) ensure_grads(b);
  }
}

bool FlatLayout::grads_present(size_t b) const { return storage_present(buckets_[b].grads); }

void FlatLayout::ensure_grads(size_t b) {
  if (grads_present(b)) return;
  allocate_storage(buckets_[b].grads);
  buckets_[b].grads.zero_();
}

void FlatLayout::release_grads(size_t b) {
  if (grads_sharded()) release_storage(buckets_[b].grads);
}

bool FlatLayout::gathered(size_t b) const { return storage_present(buckets_[b].params); }

std::unique_ptr<Work> FlatLayout::gather(size_t b) {
  const Bucket& bucket = buckets_[b];
  allocate_storage(bucket.params);
  return shard_group_->all_gather(bucket.shard_params, bucket.params);  // send and receive never alias
}

void FlatLayout::release_params(size_t b) {
  if (params_sharded()) release_storage(buckets_[b].params);
}

int64_t FlatLayout::param_bytes() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += bytes_of(b.params) + bytes_of(b.shard_params);
  return n;
}

int64_t FlatLayout::grad_bytes() const {
  int64_t n = 0;
  for (const auto& b : buckets_) {
    n += bytes_of(b.grads);
    if (b.grad_shard.defined() && b.grad_shard.storage().unsafeGetStorageImpl() != b.grads.storage().unsafeGetStorageImpl())
      n += bytes_of(b.grad_shard);  // ZeRO's reduce-scatter output
  }
  return n;
}

std::vector<ParamShard> FlatLayout::param_shards() const {
  std::vector<ParamShard> out;
  for (const ShardPiece& pc : pieces_) {
    const FlatParam& p = params_[pc.param];
    out.push_back({pc.param, buckets_[p.bucket].param_shard().narrow(0, pc.shard_offset, pc.numel), pc.param_offset});
  }
  return out;
}

ZeroThree::ZeroThree(FlatLayout& layout) : layout_(layout), inflight_(layout.buckets().size()) {
  const auto& buckets = layout_.buckets();
  int64_t lo = -1, hi = -1;
  for (const auto& b : buckets)
    if (b.block >= 0) lo = lo < 0 ? b.block : std::min(lo, b.block), hi = std::max(hi, b.block);
  first_block_ = lo < 0 ? 0 : lo;
  bucket_of_block_.assign(lo < 0 ? 0 : static_cast<size_t>(hi - lo + 1), -1);
  for (size_t i = 0; i < buckets.size(); ++i)
    if (buckets[i].block >= 0) bucket_of_block_[static_cast<size_t>(buckets[i].block - first_block_)] = static_cast<int64_t>(i);
}

ZeroThree::~ZeroThree() {
  for (auto& w : inflight_)
    if (w) w->wait();  // the backend must not write into freed memory
}

void ZeroThree::ready(size_t b) {
  TimedInterval timed(Timed::kComm);
  if (!inflight_[b] && !layout_.gathered(b)) inflight_[b] = layout_.gather(b);
  if (inflight_[b]) inflight_[b]->wait(), inflight_[b].reset();
}

void ZeroThree::prefetch(int64_t block) {
  const int64_t k = block - first_block_;
  if (k < 0 || k >= static_cast<int64_t>(bucket_of_block_.size()) || bucket_of_block_[static_cast<size_t>(k)] < 0) return;
  const auto b = static_cast<size_t>(bucket_of_block_[static_cast<size_t>(k)]);
  if (inflight_[b] || layout_.gathered(b)) return;
  TimedInterval timed(Timed::kComm);
  inflight_[b] = layout_.gather(b);
}

void ZeroThree::begin_step() {
  for (size_t b = 0; b < layout_.buckets().size(); ++b)
    if (layout_.buckets()[b].block < 0) ready(b), layout_.ensure_grads(b);
}

void ZeroThree::end_step() {
  for (size_t b = 0; b < layout_.buckets().size(); ++b) {
    if (inflight_[b]) inflight_[b]->wait(), inflight_[b].reset();
    layout_.release_params(b);
  }
}

void ZeroThree::gather_unblocked() {
  for (size_t b = 0; b < layout_.buckets().size(); ++b)
    if (layout_.buckets()[b].block < 0) ready(b);
}

void ZeroThree::gather_all() {
  for (size_t b = 0; b < layout_.buckets().size(); ++b) ready(b);
}

void ZeroThree::before_forward(int64_t block) {
  const auto b = static_cast<size_t>(bucket_of_block_.at(static_cast<size_t>(block - first_block_)));
  ready(b);
  prefetch(block + 1);  // overlaps this block's compute
}

void ZeroThree::after_forward(int64_t block) {
  layout_.release_params(static_cast<size_t>(bucket_of_block_.at(static_cast<size_t>(block - first_block_))));
}

void ZeroThree::before_backward(int64_t block) {
  const auto b = static_cast<size_t>(bucket_of_block_.at(static_cast<size_t>(block - first_block_)));
  ready(b);
  layout_.ensure_grads(b);  // first backward of the step: allocated, zeroed; later: accumulates
  prefetch(block - 1);
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
      bw_pending_(layout.buckets().size()), work_(layout.buckets().size()) {
  const char* sync = std::getenv("SCALEGUARD_DP_BARRIER_BEFORE_COMM");
  barrier_before_comm_ = sync && std::strcmp(sync, "1") == 0;
  if (layout_.shard_group() && layout_.shard_group()->size() != group_.size())
    throw RunError("ZeRO: the layout is sharded over another group than the data-parallel one");
  const auto& params = layout_.params();
  bucket_of_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    bucket_of_[i] = params[i].bucket;
    // ZeRO-3 needs the hooks also without overlap: they free each block's gathered parameters.
    if ((!overlap_ || group_.size() == 1) && !layout_.params_sharded()) continue;
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
  if (layout_.params_sharded())
    for (size_t b = 0; b < bw_pending_.size(); ++b) bw_pending_[b] = static_cast<int>(layout_.members(b).size());
  if (!sync) return;
  for (size_t b = 0; b < pending_.size(); ++b) pending_[b] = static_cast<int>(layout_.members(b).size());
  next_launch_ = 0;
}

void DataParallel::on_ready(size_t param_index) {
  const size_t bucket = bucket_of_[param_index];
  // ZeRO-3: the block's backward is done with its parameters once all their gradients
  // accumulated (AccumulateGrad runs after every node that used them).
  if (layout_.params_sharded() && --bw_pending_[bucket] == 0 && layout_.buckets()[bucket].block >= 0)
    layout_.release_params(bucket);
  if (!sync_ || !overlap_ || group_.size() == 1) return;
  TimedInterval timed(Timed::kComm);  // on a GPU ~0: launching and testing do not stall the stream
  if (--pending_[bucket] == 0) launch_ready_prefix();
  // Open MPI progresses non-blocking collectives only inside MPI calls: poke the ones in
  // flight so they advance while backward keeps computing.
  for (size_t b = 0; b < next_launch_; ++b)
    if (work_[b] && work_[b]->test()) work_[b].reset(), finished(b);
}

void DataParallel::finished(size_t b) { layout_.release_grads(b); }

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
  for (size_t b = 0; b < work_.size(); ++b)
    if (work_[b]) work_[b]->wait(), work_[b].reset(), finished(b);
  for (; next_launch_ < pending_.size(); ++next_launch_)
    group_.all_reduce_now(layout_.buckets()[next_launch_].grads, ReduceOp::kSum);
  sync_ = false;
}

void DataParallel::broadcast_parameters() {
  // ZeRO-3 ranks hold different shards (each initialised as the whole model, then cut).
  if (group_.size() == 1 || layout_.params_sharded()) return;
  for (const auto& b : layout_.buckets()) group_.broadcast(b.params, 0)->wait();
}

}  // namespace scaleguard::run
