// Megatron-style tensor parallelism: linear layers whose weight is split across the
// tensor-parallel group, and the paired operators that make the split exact.
//
// A column-parallel layer (attention qkv, MLP fc) splits the output features: each rank
// computes its slice of the output from the whole input. A row-parallel layer (attention and
// MLP proj) splits the input features: each rank multiplies its slice of the input and the
// partial products are summed. Put together (column then row) each rank holds whole heads
// and whole MLP columns, and one block needs two all-reduces forward and two backward:
//   f: identity forward, all-reduce of the gradient backward (before the column layer:
//      every rank's slice contributes to the gradient of the shared input);
//   g: all-reduce forward, identity backward (after the row layer).
// Biases of row-parallel layers, layer norms and embeddings are replicated; f and g keep
// their gradients identical on every tensor-parallel rank.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

#include "comm/comm.h"

namespace scaleguard::run {

// Which piece of a global parameter a rank holds: dimension `dim` of the global tensor is
// cut into `interleave` equal groups (3 for the fused q|k|v), each group into `parts` equal
// pieces, and the rank holds piece `index` of every group, concatenated in group order.
// parts = 1: the whole tensor.
struct Slice {
  int64_t dim = 0, parts = 1, index = 0, interleave = 1;
  bool whole() const { return parts == 1; }
};

// This rank's piece of `global` (a copy when sliced).
at::Tensor take_slice(const at::Tensor& global, const Slice& s);
// The global tensor from every rank's piece: the inverse of take_slice, collective over
// `group` (rank r of it holds piece r). For checksums, dumps and re-slicing checkpoints.
at::Tensor gather_slices(const at::Tensor& local, const Slice& s, Communicator& group);
// The global shape of a parameter whose local piece has shape `local`.
std::vector<int64_t> global_shape(at::IntArrayRef local, const Slice& s);

// The tensor-parallel group as layers see it. nullptr communicator = one rank (no traffic).
class TpGroup {
 public:
  explicit TpGroup(Communicator* comm) : comm_(comm) {}
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }
  at::Tensor f(const at::Tensor& x);  // identity forward, all-reduce backward
  at::Tensor g(const at::Tensor& x);  // all-reduce forward, identity backward
  Communicator* comm() const { return comm_; }
  // In-place sum over the group; the time counts as communication (step_timer.h).
  void all_reduce(const at::Tensor& t);

 private:
  Communicator* comm_;
};

// Vocabulary-parallel embedding (Megatron): `weight` holds rows [first, first + rows) of
// the (V, C) table. Tokens outside them look up zeros; the all-reduce (g) sums the one rank
// that holds each token's row with zeros elsewhere, so every rank gets exactly the full
// lookup, and the backward (identity) gives each rank the gradient of its own rows only.
at::Tensor vocab_parallel_embedding(const at::Tensor& idx, const at::Tensor& weight, int64_t first, TpGroup& group);

// Mean cross-entropy of logits sharded over the vocabulary: logits (N, V/tp) on each rank,
// columns [first, first + V/tp) of the whole (N, V); targets (N) global ids. No rank
// builds the (N, V) logits: all-reduces of the row max, of the sum of exponentials and of
// the target's logit (each (N) floats) give log-sum-exp minus the target logit. Backward:
// softmax minus the one-hot target, on this rank's columns. In fp32 whatever the logits'
// dtype.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t first,
                                        TpGroup& group);

enum class Split { kNone, kColumn, kRow };

// y = x W^T + b with W (out, in) split by `split` over `group`: kColumn holds out/size
// output features (in `interleave` groups, see Slice), kRow holds in/size input features
// and adds the replicated bias after the sum. Parameters are "weight" and "bias", like
// torch::nn::Linear (bias = false: "weight" only, as Llama's projections); the model
// initialises them.
class ParallelLinear : public torch::nn::Module {
 public:
  ParallelLinear(int64_t in, int64_t out, Split split, TpGroup* group, int64_t interleave = 1, bool bias = true);
  at::Tensor forward(const at::Tensor& x);
  Slice weight_slice() const;
  Slice bias_slice() const;

 private:
  Split split_;
  TpGroup* group_;
  int64_t interleave_;
  at::Tensor weight_, bias_;  // bias_ undefined without a bias
};

}  // namespace scaleguard::run
