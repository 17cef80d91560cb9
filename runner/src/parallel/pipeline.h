// Pipeline parallel: the GPT's blocks split into pp contiguous stages, micro-batches
// flowing through them with a 1F1B or GPipe schedule. Activations go forward and their
// gradients backward point to point over the grid's pp communicator; the loss lives on
// the last stage. Gradient sync over dp, the tied-embedding sum between the first and last
// stage and clipping over all stages (clip_grad_norm summed over the pp group) are the
// trainer's.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>
#include <vector>

#include "config/config.h"
#include "parallel/data_parallel.h"
#include "comm/grid.h"
#include "models/model.h"

namespace scaleguard::run {

// Forward FLOPs per token of each piece of the GPT (the backward is ~2x each, so ratios are
// what matters): a block 24*C^2 (qkv, proj, fc, proj matmuls) + 4*T*C (scores and their
// weighted sum, counting the full causal square as the kernels compute it); the embedding
// 2*C (gather + position add, memory-bound, tiny); the head 2*C*V (logits) + the loss
// over V per position. The planner exposes no per-layer cost, hence this formula.
struct StageCosts {
  double embedding = 0, block = 0, head = 0;
};
StageCosts stage_costs(const Config& cfg);

// Block boundaries b[0] = 0 <= b[1] <= ... <= b[pp] = n_layer: stage s runs blocks
// [b[s], b[s+1]), at least one each, chosen to minimise the most expensive stage (the
// embedding counts on stage 0, the head on the last). Throws RunError when pp > n_layer.
std::vector<int64_t> split_stages(const StageCosts& costs, int64_t n_layer, int pp);

struct PipelineStep {
  double loss_sum = 0;  // sum of the micro-batch mean losses (last stage; 0 elsewhere)
  int64_t send_bytes = 0;  // activations and gradients this stage sent to its neighbours
  // The stage's forward and backward compute and the whole schedule are timed on
  // step_timer() as Timed::kPipelineBusy and Timed::kPipeline.
};

class Pipeline {
 public:
  // model: this stage's part. scale: the factor each micro-batch loss is multiplied by
  // before backward (1 / (micro-batches x dp)).
  Pipeline(const Config& cfg, ProcessGrid& grid, LanguageModel& model, at::Device device);

  // Runs forward and backward of `micro_batches` micro-batches. batch(u) returns (inputs,
  // targets) of micro-batch u (used on the first and last stage only); before_backward(u)
  // runs before each backward (the data-parallel sync flag). Every stage of the pp group
  // must call this together.
  PipelineStep run(const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch,
                   const std::function<void(int64_t)>& before_backward, double scale);
  // Forward only (evaluation, under no-grad): `micro_batches` micro-batches through the
  // stages, each stage sending its activations on at once. Returns the sum of the
  // micro-batch mean losses on the last stage, 0 elsewhere. Collective over the pp group.
  double evaluate(int64_t micro_batches, const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch);

 private:
  struct InFlight {
    at::Tensor input;   // received activations (requires grad) or token ids on stage 0
    at::Tensor output;  // activations to send, or the scaled loss on the last stage
  };
  at::Tensor recv_forward();
  // The sends count their bytes in out.send_bytes.
  void send_forward(const at::Tensor& activations, PipelineStep& out);
  at::Tensor recv_backward();
  at::Tensor activation_buffer() const;  // for a receive: (micro, T, C) in wire_dtype_ on the device
  void send_backward(const InFlight& f, PipelineStep& out);
  void exchange(const std::vector<P2P>& ops, PipelineStep& out);  // one batch_p2p
  // input: the received activations (undefined on the first stage, which reads batch(u)).
  InFlight forward(int64_t u, at::Tensor input, const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch, double scale,
                   PipelineStep& out, bool send = true);
  void backward(int64_t u, InFlight& f, const at::Tensor& grad, const std::function<void(int64_t)>& before_backward,
                PipelineStep& out);

  const Config& cfg_;
  ProcessGrid& grid_;
  LanguageModel& model_;
  at::Device device_;
  at::ScalarType wire_dtype_;  // what stages exchange: the compute dtype (fp32 or bf16)
};

// Every parameter of the whole model, sorted by name, on every stage of the pp group
// (collective over it): what checksums and parameter dumps use with pp > 1. The last
// stage's tied copy of "wte.weight" is left out (the first stage's is the parameter).
// With tp_group (tp x pp) each stage first gathers its tensors' tp slices, so every rank
// gets the whole model (collective over the tp group too).
std::vector<std::pair<std::string, at::Tensor>> gather_parameters(const FlatLayout& layout, const LanguageModel& model,
                                                                  Communicator& pp_group, Communicator* tp_group = nullptr);

}  // namespace scaleguard::run
