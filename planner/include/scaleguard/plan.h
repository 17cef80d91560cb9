// Plans: a layout (tp x pp x dp, ZeRO stage, micro-batch, recompute) on given hardware,
// with its predicted memory, step time, wall time, GPU-hours and cost, and the search that
// climbs the strategy ladder single -> ddp -> zero -> pipeline -> tensor -> hybrid.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scaleguard/catalog.h"
#include "scaleguard/model.h"
#include "scaleguard/result.h"

namespace scaleguard {

enum class Strategy { single, ddp, zero, pipeline, tensor, hybrid };
const char* to_string(Strategy);
Result<Strategy> strategy_from_string(const std::string&);  // canonical names only

struct Layout {
  int tp = 1, pp = 1, dp = 1;
  int zero = 0;          // 0 = none, 1 = optimizer, 2 = + gradients, 3 = + weights
  int micro_batch = 1;   // sequences per micro-batch
  Recompute recompute = Recompute::none;
  // Interleaved 1F1B (Narayanan et al. 2021): each rank holds `interleave` pipeline chunks,
  // shrinking the bubble by that factor for as many times the stage-to-stage traffic.
  // 1 = plain 1F1B. Only used when pinned: the runner executes 1F1B and GPipe.
  int interleave = 1;
  int gpus() const { return tp * pp * dp; }
  Strategy strategy() const;
};

// The hardware a plan runs on (one GPU type, one instance type).
struct Hardware {
  GpuType gpu;
  std::string instance;          // empty when only a GPU type was given
  int gpus_per_node = 8;
  double network_gb_s = 0;       // node network, GB/s (Gbit/s / 8)
  bool in_network_reduction = false;  // the instance's fabric reduces in its switches (catalog)
  double on_demand_gpu_hour = 0; // $ per GPU-hour
  double spot_gpu_hour = 0;
  bool spot = false;             // wall_hours/ckpt interval for spot capacity
  double node_mtbf_hours = 0;    // 0 = the catalog assumption
  Assumptions assume;
};
// Hardware from a catalog instance (gpus_per_node from the instance unless > 0 given).
Result<Hardware> hardware_for(const Catalog&, const std::string& gpu_type,
                              const std::string& instance, int gpus_per_node = 0);

struct Workload {
  ModelSpec model;
  double tokens = 0;             // training tokens
  int global_batch = 0;          // sequences per optimizer step; 0 = default_global_batch()
  // > 0 when global_batch came from the batch law (resolve_batch): the law's tokens before
  // the cap and the rounding, so the plan can say where its batch came from.
  double batch_law_tokens = 0;
  // Periodic evaluation (issue 29 item 2): a forward pass over eval_tokens every
  // eval_interval optimizer steps, on the training layout. 0 = none.
  double eval_interval = 0;      // steps
  double eval_tokens = 0;        // tokens per evaluation
};
// The default global batch (issue 37): DeepSeek LLM (2024)'s fit of the optimal batch
// against compute, B = 0.292 * C^0.3271 tokens with C = model FLOPs of the run, capped at
// kMaxDefaultBatchTokens (4M: Llama 2's batch at every size and Llama 3's starting batch, the
// largest any catalog preset's authors began with) and rounded to a power of two sequences.
// tokens <= 0: a compute-optimal run (20 tokens per parameter, Chinchilla) is assumed.
constexpr double kMaxDefaultBatchTokens = 4194304;
double batch_law_tokens(const ModelSpec&, double tokens);
int default_global_batch(const ModelSpec&, double tokens);
// Fills w.global_batch from the law when it is 0 (and w.batch_law_tokens with the law's
// tokens); a given batch is kept.
void resolve_batch(Workload& w);
// Training FLOPs per token: 6*P for the weights (forward + backward) plus 12*s*h per layer
// for the attention scores and their weighted sum (QK^T and AV, forward + backward; the
// PaLM/Megatron count, causal masking not discounted).
double attention_flops_per_token(const ModelSpec&);
double model_flops_per_token(const ModelSpec&);
// Tokens that take `hours` on one GPU of this type at its calibrated efficiency.
double tokens_for_single_gpu_hours(const ModelSpec&, const GpuType&, double hours);

struct Memory {  // bytes per GPU (worst pipeline stage)
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, overhead = 0;
  // Full-size tensors sharded data parallel materializes for a while (docs/validation.md,
  // "ZeRO-3"): ZeRO-3 the root's weights and gradient, the weights of the block being
  // computed and of the one being prefetched, and one block's full gradient before its
  // reduce-scatter; ZeRO-2 one reduce-scatter bucket of full gradients. 0 for ZeRO 0/1.
  double gathered = 0;
  double states() const { return weights + gradients + optimizer; }  // model states (ZeRO paper)
  double total() const { return weights + gradients + optimizer + activations + gathered + overhead; }
};
Memory memory_per_gpu(const ModelSpec&, const Layout&, int global_batch, const Assumptions&);

// What ZeRO-3 gathers on a rank (per tensor-parallel shard, in parameters), as FSDP2 and
// scaleguard-run do: each transformer block is a unit, gathered before its forward and again
// before its backward and freed after each; the rest -- the embedding, tied with the LM head
// (the root) -- is gathered once per step and kept until the backward has reduced it.
struct ShardUnits {
  double block = 0;  // parameters of one block: (P - vocab*hidden) / layers, / tp
  double root = 0;   // vocab*hidden / tp
  int blocks = 0;    // blocks of the stage
};
ShardUnits shard_units(const ModelSpec&, const Layout&);

struct Plan {
  Layout layout;
  Strategy strategy = Strategy::single;
  int gpus = 1, nodes = 1;
  int global_batch = 0, micro_batches = 0;   // micro_batches per DP rank per step
  double tokens_per_step = 0;      // global_batch x sequence length
  int batch_asked = 0;             // the batch asked for (global_batch rounds it up when dp does not divide it)
  double batch_law_tokens = 0;     // > 0: the batch came from the law (Workload::batch_law_tokens)
  bool fits = false;
  Memory memory;
  double gpu_memory_gib = 0;
  double compute_seconds = 0;      // per step: math at peak*efficiency + memory-bound work
  double memory_bound_seconds = 0; // of which: HBM traffic (GEMM operands, elementwise, scores)
  double tp_comm_seconds = 0, pp_comm_seconds = 0, dp_comm_seconds = 0, dp_exposed_seconds = 0;
  double fixed_seconds = 0;        // per step, not divided by GPUs: optimizer update + host overhead
  double step_seconds = 0;
  double steps = 0;
  double tflops_per_gpu = 0;       // model FLOPs (model_flops_per_token x tokens) per GPU per second / 1e12
  double mfu = 0;
  double comm_ratio = 0;           // exposed communication / compute
  double bubble_fraction = 0;
  double train_hours = 0;          // without failures, evaluations included
  double evaluations = 0;          // evaluations over the run (Workload::eval_interval)
  double eval_hours = 0;           // of train_hours: the forward passes they take
  double ckpt_interval_s = 0;      // Daly's optimum for the chosen capacity
  double ckpt_save_s = 0;
  double job_mtbf_hours = 0;       // mean time between failures of the whole job (chosen capacity)
  double restart_s = 0;            // time lost restarting after a failure
  // Local tier (Assumptions::local_checkpoint_write_gb_s > 0): its save (write + partner
  // copy) and interval; ckpt_* above are then the shared tier's. 0 = no local tier.
  double ckpt_local_save_s = 0;
  double ckpt_local_interval_s = 0;
  double failure_overhead = 0;     // fraction added by checkpoints + lost work + restarts;
                                   // infinite when failures outpace progress (then fits = false)
  double wall_hours = 0;           // with failures, for the chosen capacity
  double gpu_hours = 0;
  double cost_on_demand = 0, cost_spot = 0;   // each with its own failure overhead
  bool has_spot_price = true;      // false: the catalog has no spot price (cost_spot is 0, printed "no spot price")
  // Data-parallel exchange inputs for topk_estimate(): gradient elements per GPU, the
  // bandwidth one rank's exchange gets (bytes/s) and its per-collective latency, HBM bytes/s.
  double dp_elements = 0, dp_bytes = 0, dp_rank_bytes_per_s = 0, dp_hop_s = 0, hbm_bytes_per_s = 0;
  std::vector<std::string> reasons;
};

// Top-k gradient compression (scaleguard-run --compress topk:DENSITY, Deep Gradient
// Compression) for a plain data-parallel plan (dp > 1, no tp/pp/ZeRO: what the runner does).
// Bytes per GPU and step: dense ring all-reduce 2(d-1)/d x N x gradient bytes (the plan's); top-k all-gather
// of k = density x N (int32 index, fp32 value) pairs from every rank: (d-1) x k x 8. The
// all-gather runs after backward (not overlapped); selection adds a memory-bound pass of
// ~32 bytes per gradient element (momentum, residual read + write, the magnitude pass).
struct TopKEstimate {
  bool applies = false;          // plain data parallel with dp > 1
  double density = 0;
  double dense_bytes = 0, topk_bytes = 0;      // per GPU and step
  double dense_exposed_s = 0, topk_comm_s = 0, select_s = 0;
  double step_s = 0;             // the plan's step with top-k instead of the dense exchange
};
TopKEstimate topk_estimate(const Plan&, double density);
// The reason line proposing top-k when the plan is communication-bound (exposed data-parallel
// communication >= 10% of compute) and top-k at `density` cuts the step by >= 10%; "" otherwise.
std::string topk_reason(const Plan&, double density = 0.01);

// The spot side of a cost: "$1,234 spot", "no spot price" (the catalog has none), or
// "no spot estimate (interruptions outpace progress)" -- never "$inf".
std::string spot_cost_text(const Plan&);

// One line per aspect (layout, memory, step, throughput, cost, checkpoints) for reasons[].
std::vector<std::string> describe_plan(const Plan&);

// Whether `interleave` chunks per rank are possible: 1 always; v > 1 needs pp > 1, layers a
// multiple of pp*v, and micro-batches per step a multiple of pp.
bool valid_interleave(const ModelSpec&, const Layout&, int global_batch);

// Predicts one layout; never fails (an impossible layout comes back with fits = false).
Plan evaluate(const Workload&, const Hardware&, const Layout&);

// Choices the user pinned (CLI --tp/--pp/..., --train-strategy).
struct Pins {
  std::optional<int> tp, pp, dp, zero, micro_batch, interleave;
  std::optional<Recompute> recompute;
  std::optional<Strategy> strategy;
};
// What "meets the policy" means for the search.
struct Goals {
  double single_gpu_max_hours = 24;
  double max_comm_ratio = 0.2;
  double min_doubling_speedup = 1.5;
  double distributed_min_gpu_hours = 100;
  double deadline_hours = 0;     // > 0: fewest GPUs that finish within it
  int max_gpus = 65536;
  // The partition's limits (0 = none): the search never proposes more nodes than max_nodes;
  // a run longer than max_time runs in requeued segments (checkpoint, signal, requeue).
  int max_nodes = 0;
  double max_time_hours = 0;
  std::string where;             // "partition gpu-od", named when a limit stops the search
  int max_zero_stage = 3;        // highest ZeRO stage the runner executing the plan implements
  bool explain = true;           // false: no reasons[] (decide() explains only the plan it keeps)
  // The why-ZeRO-3 reason searches the pipeline and tensor rungs to compare; decide() runs
  // inside slurmctld and leaves that to `scaleguard plan` (the two searches were ~60% of it).
  bool compare_rungs = true;
};

// The best plan on exactly `gpus` GPUs: climbs the ladder and takes the first rung with a
// plan that fits and keeps comm_ratio within goals.max_comm_ratio (else the first rung that
// fits at all); within a rung the fastest layout wins. Error when nothing fits.
Result<Plan> best_plan_at(const Workload&, const Hardware&, int gpus, const Pins&, const Goals&);
// The fewest GPUs (from, 2*from, 4*from, ...: powers of two split cleanly) that fit.
Result<Plan> fewest_gpus_plan(const Workload&, const Hardware&, int from, const Pins&, const Goals&);
// Chooses the GPU count too (issue 37): one GPU when it fits and the job is small/short
// enough per the goals; else the fewest GPUs that fit, doubled while the doubling pays
// (speedup >= min_doubling_speedup, comm ratio within max_comm_ratio), the batch can use the
// GPUs (dp < batch) and the partition allows them (max_nodes, max_gpus). With a deadline:
// the fewest GPUs that meet it, or the reason it cannot be met. The reasons name what
// stopped the search.
Result<Plan> choose_plan(const Workload&, const Hardware&, const Pins&, const Goals&);

// Checkpoint interval (seconds) for save time C and MTBF M (both seconds).
double young_interval(double save_s, double mtbf_s);
double daly_interval(double save_s, double mtbf_s);
// What the runner uses: Daly's interval for a job on `gpus` GPUs of nodes with this MTBF.
double young_daly_interval(double save_s, double node_mtbf_hours, int gpus = 1,
                           int gpus_per_node = 8);
// Expected wall-time factor (>= 1) of checkpointing every `interval_s` with save C, restart R
// and MTBF M (seconds): (1 + C/t) / (1 - (t/2 + R)/M); infinity when no progress is expected.
double failure_factor(double interval_s, double save_s, double restart_s, double mtbf_s);

// Multiplies the amount of work (steps, hours, GPU-hours, cost) by `factor`: the layout,
// step time and failure rates do not depend on how many tokens are trained.
void scale_work(Plan&, double factor);

std::string to_json(const Plan&);

}  // namespace scaleguard
