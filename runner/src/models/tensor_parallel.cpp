#include "models/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "config/config.h"
#include "timing/step_timer.h"

namespace scaleguard::run {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group travels to backward through saved_data, which holds IValues only: store the
// pointer as an integer (the model owns the group and outlives every graph it builds).
int64_t as_int(TpGroup* g) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(g)); }
TpGroup* as_group(AutogradContext* ctx) {
  return reinterpret_cast<TpGroup*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

// Reduced in fp32 whatever the activations' dtype: the MPI backend has no bf16 sum, and a
// bf16 partial sum would round once per rank (bf16 activations come back as bf16).
at::Tensor summed(TpGroup* group, const at::Tensor& t) {
  if (t.scalar_type() != at::kFloat) {
    at::Tensor out = t.to(at::kFloat).contiguous();
    group->all_reduce(out);
    return out.to(t.scalar_type());
  }
  at::Tensor out = t.contiguous().clone();
  group->all_reduce(out);
  return out;
}

struct CopyToParallel : torch::autograd::Function<CopyToParallel> {  // f
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TpGroup* group) {
    ctx->saved_data["group"] = as_int(group);
    return x.view_as(x);  // a new tensor for the graph, same storage
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(as_group(ctx), grads[0]), at::Tensor()};
  }
};

struct ReduceFromParallel : torch::autograd::Function<ReduceFromParallel> {  // g
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& x, TpGroup* group) {
    return summed(group, x);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) { return {grads[0], at::Tensor()}; }
};

// Per-token loss log(sum exp) - logit[target] over logits sharded by vocabulary columns.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets, int64_t first,
                            TpGroup* group) {
    const int64_t n = logits.size(1);
    at::Tensor x = logits.to(at::kFloat);                                    // (N, Vl)
    at::Tensor max = std::get<0>(x.max(1)).contiguous();                     // (N)
    {
      TimedInterval timed(Timed::kComm);
      group->comm()->all_reduce(max, ReduceOp::kMax)->wait();
    }
    at::Tensor shifted = x - max.unsqueeze(1);                               // (N, Vl)
    at::Tensor outside = (targets < first).logical_or(targets >= first + n); // (N) target not on this rank
    at::Tensor local = (targets - first).masked_fill(outside, 0);            // (N)
    at::Tensor target_logit = shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0.0);
    at::Tensor exp = shifted.exp();                                          // (N, Vl)
    at::Tensor sums = at::stack({exp.sum(1), target_logit});                 // (2, N): one all-reduce for both
    group->all_reduce(sums);
    at::Tensor sum_exp = sums[0], picked = sums[1];
    at::Tensor softmax = exp.div_(sum_exp.unsqueeze(1));                     // (N, Vl) this rank's columns
    ctx->save_for_backward({softmax, local, outside});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return sum_exp.log() - picked;                                           // (N)
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();                                      // softmax
    at::Tensor hit = outside_to_one_hot(saved[1], saved[2], grad.size(1));
    grad.sub_(hit).mul_(grads[0].unsqueeze(1));
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
  }
  // (N, Vl) 1 at (i, local[i]) where the target is on this rank, else 0.
  static at::Tensor outside_to_one_hot(const at::Tensor& local, const at::Tensor& outside, int64_t cols) {
    at::Tensor one = at::zeros({local.size(0), cols}, at::TensorOptions(at::kFloat).device(local.device()));
    one.scatter_(1, local.unsqueeze(1), 1.0);
    return one.masked_fill_(outside.unsqueeze(1), 0.0);
  }
};

}  // namespace

at::Tensor vocab_parallel_embedding(const at::Tensor& idx, const at::Tensor& weight, int64_t first, TpGroup& group) {
  const int64_t rows = weight.size(0);
  at::Tensor outside = (idx < first).logical_or(idx >= first + rows);     // (B, T)
  at::Tensor local = (idx - first).masked_fill(outside, 0);
  at::Tensor e = at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);  // (B, T, C)
  return group.g(e);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t first,
                                        TpGroup& group) {
  return VocabParallelCrossEntropy::apply(logits, targets, first, &group).mean();
}

at::Tensor take_slice(const at::Tensor& global, const Slice& s) {
  if (s.whole()) return global;
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& group : global.chunk(s.interleave, s.dim))
    pieces.push_back(group.chunk(s.parts, s.dim)[static_cast<size_t>(s.index)]);
  return at::cat(pieces, s.dim).contiguous();
}

at::Tensor gather_slices(const at::Tensor& local, const Slice& s, Communicator& group) {
  if (s.whole()) return local;
  if (group.size() != s.parts) throw RunError("gather_slices: the group does not hold every piece");
  at::Tensor mine = local.contiguous();
  at::Tensor all = at::empty({s.parts * mine.numel()}, mine.options());
  group.all_gather(mine.view({-1}), all)->wait();
  std::vector<std::vector<at::Tensor>> by_group(static_cast<size_t>(s.interleave));  // [group][rank]
  for (const at::Tensor& piece : all.chunk(s.parts))
    for (int64_t g = 0; g < s.interleave; ++g)
      by_group[static_cast<size_t>(g)].push_back(piece.view(mine.sizes()).chunk(s.interleave, s.dim)[static_cast<size_t>(g)]);
  std::vector<at::Tensor> groups;
  for (const auto& pieces : by_group) groups.push_back(at::cat(pieces, s.dim));
  return at::cat(groups, s.dim);
}

std::vector<int64_t> global_shape(at::IntArrayRef local, const Slice& s) {
  std::vector<int64_t> shape(local.begin(), local.end());
  if (!s.whole()) shape[static_cast<size_t>(s.dim)] *= s.parts;
  return shape;
}

at::Tensor TpGroup::f(const at::Tensor& x) { return size() == 1 ? x : CopyToParallel::apply(x, this); }

at::Tensor TpGroup::g(const at::Tensor& x) { return size() == 1 ? x : ReduceFromParallel::apply(x, this); }

void TpGroup::all_reduce(const at::Tensor& t) {
  TimedInterval timed(Timed::kComm);
  comm_->all_reduce(t, ReduceOp::kSum)->wait();
}

ParallelLinear::ParallelLinear(int64_t in, int64_t out, Split split, TpGroup* group, int64_t interleave, bool bias)
    : split_(split), group_(group), interleave_(interleave) {
  const int64_t n = group->size();
  if ((split == Split::kColumn && out % (n * interleave) != 0) || (split == Split::kRow && in % n != 0))
    throw RunError("tensor parallel: a " + std::to_string(in) + " -> " + std::to_string(out) +
                   " layer cannot be split over tp=" + std::to_string(n) + " ranks");
  int64_t local_in = split == Split::kRow ? in / n : in;
  int64_t local_out = split == Split::kColumn ? out / n : out;
  weight_ = register_parameter("weight", at::empty({local_out, local_in}));
  if (bias) bias_ = register_parameter("bias", at::zeros({local_out}));
}

at::Tensor ParallelLinear::forward(const at::Tensor& x) {
  // Mixed precision: the fp32 master weights cast to the activations' dtype (bf16) for this
  // use; autograd casts their gradients back, so .grad (the flat bucket) stays fp32.
  const at::ScalarType dt = x.scalar_type();
  const at::Tensor w = weight_.scalar_type() == dt ? weight_ : weight_.to(dt);
  const at::Tensor b = !bias_.defined() || bias_.scalar_type() == dt ? bias_ : bias_.to(dt);
  if (group_->size() == 1 || split_ == Split::kNone) return at::linear(x, w, b);
  if (split_ == Split::kColumn) return at::linear(group_->f(x), w, b);
  at::Tensor y = group_->g(at::linear(x, w));
  return b.defined() ? y + b : y;  // the bias once, after the sum
}

Slice ParallelLinear::weight_slice() const {
  if (group_->size() == 1 || split_ == Split::kNone) return {};
  if (split_ == Split::kColumn) return {0, group_->size(), group_->rank(), interleave_};
  return {1, group_->size(), group_->rank(), 1};
}

Slice ParallelLinear::bias_slice() const {
  if (group_->size() == 1 || split_ != Split::kColumn) return {};
  return {0, group_->size(), group_->rank(), interleave_};
}

}  // namespace scaleguard::run
