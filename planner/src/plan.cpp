// The first-principles models: memory per GPU, step time, failures and cost of one layout.
// No strings and no allocation here: the search calls evaluate() thousands of times.
#include <algorithm>
#include <cmath>
#include <limits>

#include "scaleguard/plan.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {
constexpr double kGiB = 1024.0 * 1024 * 1024;

double weight_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }
double grad_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }
// Mixed precision keeps an fp32 master copy next to the optimizer's moments.
double optimizer_bytes(Precision p, Optimizer o) {
  const double moments = o == Optimizer::adam ? 8 : 4;
  return p == Precision::fp32 ? moments : moments + 4;
}
double activation_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }
}  // namespace

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::single: return "single";
    case Strategy::ddp: return "ddp";
    case Strategy::zero: return "zero";
    case Strategy::pipeline: return "pipeline";
    case Strategy::tensor: return "tensor";
    case Strategy::hybrid: return "hybrid";
  }
  return "?";
}

Result<Strategy> strategy_from_string(const std::string& s) {
  for (Strategy st : {Strategy::single, Strategy::ddp, Strategy::zero, Strategy::pipeline,
                      Strategy::tensor, Strategy::hybrid})
    if (s == to_string(st)) return st;
  Error e;
  e.message = "unknown strategy '" + s + "'";
  e.hint = "one of single, ddp, zero, pipeline, tensor, hybrid";
  return e;
}

bool valid_interleave(const ModelSpec& m, const Layout& l, int global_batch) {
  if (l.interleave == 1) return true;
  // Megatron's interleaved schedule: pp > 1, layers split evenly into pp*v chunks, and a
  // number of micro-batches per step that is a multiple of pp.
  const int local = (global_batch + l.dp - 1) / l.dp;
  const int mb = std::max(1, (local + l.micro_batch - 1) / l.micro_batch);
  return l.interleave > 1 && l.pp > 1 && m.layers % (l.pp * l.interleave) == 0 && mb % l.pp == 0;
}

Strategy Layout::strategy() const {
  if (tp > 1 && pp > 1) return Strategy::hybrid;
  if (tp > 1) return Strategy::tensor;
  if (pp > 1) return Strategy::pipeline;
  if (dp == 1) return Strategy::single;
  return zero > 0 ? Strategy::zero : Strategy::ddp;
}

Result<Hardware> hardware_for(const Catalog& cat, const std::string& gpu_type,
                              const std::string& instance, int gpus_per_node) {
  Hardware hw;
  hw.assume = cat.assumptions;
  const Instance* inst = nullptr;
  if (!instance.empty()) {
    inst = cat.find_instance(instance);
    if (!inst) {
      std::vector<std::string> names;
      for (const auto& i : cat.instances) names.push_back(i.name);
      std::string near = text::closest(instance, names);
      return Error{"unknown instance type '" + instance + "'", cat.path, 0, "instance",
                   near.empty() ? "see the [instance NAME] sections of the catalog" : "did you mean '" + near + "'?"};
    }
  }
  const GpuType* gpu = nullptr;
  if (!gpu_type.empty()) {
    gpu = cat.find_gpu(gpu_type);
    if (!gpu) {
      std::vector<std::string> names;
      for (const auto& g : cat.gpus) names.push_back(g.name);
      std::string near = text::closest(gpu_type, names);
      return Error{"unknown GPU type '" + gpu_type + "'", cat.path, 0, "gpu-type",
                   near.empty() ? "see the [gpu NAME] sections of the catalog" : "did you mean '" + near + "'?"};
    }
    if (inst && !text::iequals(inst->gpu, gpu->name))
      return Error{"instance " + inst->name + " has " + inst->gpu + " GPUs, not " + gpu->name, "", 0,
                   "gpu-type", "drop --gpu-type or pick a matching instance"};
  } else if (inst) {
    gpu = cat.find_gpu(inst->gpu);
  } else {
    return Error{"no GPU type given", "", 0, "gpu-type", "pass --gpu-type (e.g. A100-80GB) or --instance"};
  }
  if (!inst) {  // price a bare GPU type by its largest instance
    for (const auto& i : cat.instances)
      if (text::iequals(i.gpu, gpu->name) && (!inst || i.gpus > inst->gpus)) inst = &i;
    if (!inst)
      return Error{"no instance type in the catalog has " + gpu->name + " GPUs", cat.path, 0, "gpu-type",
                   "add an [instance NAME] with gpu = " + gpu->name};
  }
  hw.gpu = *gpu;
  hw.instance = inst->name;
  hw.gpus_per_node = gpus_per_node > 0 ? gpus_per_node : inst->gpus;
  hw.network_gb_s = inst->network_gbps / 8;
  hw.in_network_reduction = inst->in_network_reduction;
  hw.on_demand_gpu_hour = inst->on_demand / inst->gpus;
  hw.spot_gpu_hour = inst->spot / inst->gpus;
  return hw;
}

double batch_law_tokens(const ModelSpec& m, double tokens) {
  if (!(tokens > 0)) tokens = 20 * m.params;  // compute-optimal (Chinchilla) when not given
  const double flops = model_flops_per_token(m) * tokens;
  return 0.292 * std::pow(flops, 0.3271);  // DeepSeek LLM (2024), eq. 1: fitted on 1e17..3e20 FLOPs
}

int default_global_batch(const ModelSpec& m, double tokens) {
  const double law = std::min(batch_law_tokens(m, tokens), kMaxDefaultBatchTokens);
  // Powers of two sequences, as practitioners pick them (and they split evenly over
  // power-of-two data-parallel degrees): the nearest on a log scale.
  const double seqs = std::max(1.0, law / m.seq);
  return 1 << std::clamp(static_cast<int>(std::lround(std::log2(seqs))), 0, 24);
}

void resolve_batch(Workload& w) {
  if (w.global_batch > 0) return;
  w.global_batch = default_global_batch(w.model, w.tokens);
  w.batch_law_tokens = batch_law_tokens(w.model, w.tokens);
}

double attention_flops_per_token(const ModelSpec& m) { return 12.0 * m.seq * m.hidden * m.layers; }

double model_flops_per_token(const ModelSpec& m) { return 6 * m.params + attention_flops_per_token(m); }

static double peak_tflops(const GpuType& g, Precision p) {
  if (p == Precision::fp32) return g.tflops_fp32;
  if (p == Precision::bf16 && g.tflops_bf16 > 0) return g.tflops_bf16;
  return g.tflops_fp16;
}

double tokens_for_single_gpu_hours(const ModelSpec& m, const GpuType& g, double hours) {
  return hours * 3600 * peak_tflops(g, m.precision) * 1e12 * g.efficiency / model_flops_per_token(m);
}

// Parameters on the GPU holding the most: its share of the layers plus the embedding (the
// first stage); an untied llama's lm_head sits on the last stage, so with one stage both.
static double params_per_gpu(const ModelSpec& m, const Layout& l) {
  const double emb = m.embedding_params();
  const double emb_stage = l.pp > 1 && m.llama() && !m.tied ? double(m.vocab) * m.hidden : emb;
  return std::max(0.0, m.params - emb) / (l.tp * l.pp) + emb_stage / l.tp;
}

Memory memory_per_gpu(const ModelSpec& m, const Layout& l, int global_batch, const Assumptions& a) {
  Memory mem;
  const double params = params_per_gpu(m, l);
  mem.weights = params * weight_bytes(m.precision) / (l.zero >= 3 ? l.dp : 1);
  mem.gradients = params * grad_bytes(m.precision) / (l.zero >= 2 ? l.dp : 1);
  mem.optimizer = params * optimizer_bytes(m.precision, m.optimizer) / (l.zero >= 1 ? l.dp : 1);

  const int local = (global_batch + l.dp - 1) / l.dp;
  const int micro_batches = std::max(1, (local + l.micro_batch - 1) / l.micro_batch);
  const double s = m.seq, b = l.micro_batch, h = m.hidden, heads = m.heads;
  const double scale = activation_bytes(m.precision) / 2;  // the formula counts 16-bit values
  // Korthikanti et al. 2022: s*b*h*(34 + 5*a*s/h) bytes per layer, split by tensor (and
  // sequence) parallelism; selective recompute and fused (flash) attention drop the 5*a*s/h
  // attention part; full recompute keeps only each layer's input (2*s*b*h) plus one
  // layer's working set.
  // Llama (no dropout, SwiGLU of width f, g = kv_heads/heads): attention 6 + 4g (qkv
  // input, q and k after rotation, k and v at kv width, o_proj input), two RMSNorm inputs 4,
  // MLP 2 + 8f/h (gate/up input, gate, up, silu(gate), the product), scores 2*a*s/h (the
  // softmax output only: no dropout mask or dropout output).
  const double g = m.llama() ? double(m.kv_heads) / m.heads : 1;
  const double values = m.llama() ? 12 + 4 * g + 8.0 * m.ffn_hidden / h : 34;
  const double scores = m.flash_attention ? 0 : (m.llama() ? 2 : 5) * heads * s / h;
  const double layer_full = s * b * h * (values + scores) / l.tp * scale;
  double per_layer = layer_full, working = 0;
  if (l.recompute == Recompute::selective) per_layer = s * b * h * values / l.tp * scale;
  if (l.recompute == Recompute::full) per_layer = 2 * s * b * h / l.tp * scale, working = layer_full;
  const int layers_stage = (m.layers + l.pp - 1) / l.pp;
  // 1F1B: the first stage keeps up to pp micro-batches in flight; interleaving v chunks
  // per rank raises that by 1 + (p-1)/(p*v) (Korthikanti et al. 2022, sec. 4.2.3).
  const int in_flight = l.pp > 1 ? std::min(micro_batches, l.pp) : 1;
  const double interleaved = l.interleave > 1 ? 1 + double(l.pp - 1) / (l.pp * l.interleave) : 1;
  const double logits = 4 * s * b * m.vocab / l.tp;  // fp32 logits of the last stage
  mem.activations = layers_stage * in_flight * per_layer * interleaved + working + logits;
  // Sharded data parallel's transient full-size tensors (docs/validation.md, "ZeRO-3").
  // ZeRO-3 gathers a block before it computes and frees it after; with the next block
  // prefetched while this one computes, two blocks are whole at once, next to the root
  // (embedding/LM head, kept for the step), and in the backward the root's full gradient
  // (it accumulates from the head and the embedding) and the block's until its
  // reduce-scatter has run. ZeRO-2 keeps one bucket of full gradients being reduce-scattered.
  if (l.zero >= 3 && l.dp > 1) {
    const ShardUnits u = shard_units(m, l);
    const double whole = u.root + std::min(2, u.blocks) * u.block;
    mem.gathered = whole * weight_bytes(m.precision) + (u.root + u.block) * grad_bytes(m.precision);
  } else if (l.zero == 2 && l.dp > 1) {
    mem.gathered = std::min(params * grad_bytes(m.precision), a.bucket_mb * 1e6);
  }
  // The caching allocator's slack (memory_fragmentation) applies to all of it, the
  // gathered buffers included: they are freed and re-allocated every unit.
  mem.overhead = a.memory_reserved_gib * kGiB +
                 a.memory_fragmentation * (mem.states() + mem.activations + mem.gathered);
  return mem;
}

ShardUnits shard_units(const ModelSpec& m, const Layout& l) {
  ShardUnits u;
  const double emb = m.embedding_params();  // an untied llama: embed_tokens and lm_head
  u.root = emb / l.tp;
  u.block = m.layers > 0 ? std::max(0.0, m.params - emb) / m.layers / l.tp : 0;
  u.blocks = (m.layers + l.pp - 1) / l.pp;
  return u;
}

double young_interval(double save_s, double mtbf_s) { return std::sqrt(2 * save_s * mtbf_s); }

double daly_interval(double save_s, double mtbf_s) {
  if (save_s >= 2 * mtbf_s) return mtbf_s;
  const double x = save_s / (2 * mtbf_s);
  return std::sqrt(2 * save_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - save_s;
}

double young_daly_interval(double save_s, double node_mtbf_hours, int gpus, int gpus_per_node) {
  const int nodes = std::max(1, (gpus + std::max(1, gpus_per_node) - 1) / std::max(1, gpus_per_node));
  return daly_interval(save_s, node_mtbf_hours * 3600 / nodes);
}

double failure_factor(double interval_s, double save_s, double restart_s, double mtbf_s) {
  const double lost = (interval_s / 2 + restart_s) / mtbf_s;  // expected loss per second of run
  if (lost >= 1 || interval_s <= 0) return std::numeric_limits<double>::infinity();
  return (1 + save_s / interval_s) / (1 - lost);
}

Plan evaluate(const Workload& w, const Hardware& hw, const Layout& l) {
  Plan p;
  p.layout = l;
  p.strategy = l.strategy();
  p.gpus = l.gpus();
  const int gpn = std::max(1, hw.gpus_per_node);
  p.nodes = (p.gpus + gpn - 1) / gpn;
  p.gpu_memory_gib = hw.gpu.memory_gib;
  const ModelSpec& m = w.model;
  const int B = w.global_batch > 0 ? w.global_batch : default_global_batch(m, w.tokens);
  // Data parallelism never grows past the batch: each rank needs at least one sequence.
  const bool valid = l.tp >= 1 && l.pp >= 1 && l.dp >= 1 && l.dp <= B && l.micro_batch >= 1 && l.tp <= gpn &&
                     m.heads % l.tp == 0 && l.pp <= m.layers && l.zero >= 0 && l.zero <= 3 &&
                     (l.zero == 0 || l.dp > 1) && valid_interleave(m, l, B);
  const int local = (B + l.dp - 1) / l.dp;
  const int mb = std::max(1, (local + l.micro_batch - 1) / l.micro_batch);
  p.micro_batches = mb;
  p.global_batch = mb * l.micro_batch * l.dp;  // rounded up to whole micro-batches per rank
  p.batch_asked = B;
  p.batch_law_tokens = w.global_batch > 0 ? w.batch_law_tokens : batch_law_tokens(m, w.tokens);
  p.memory = memory_per_gpu(m, l, B, hw.assume);
  p.fits = valid && p.memory.total() <= hw.gpu.memory_gib * kGiB;

  const double peak = peak_tflops(hw.gpu, m.precision);
  // A measured host's ranks share its cores (catalog override, docs/calibration.md).
  const double ranks_here = std::min(p.gpus, gpn);
  const double share = hw.gpu.cores > 0 ? std::min(1.0, hw.gpu.cores / ranks_here) : 1.0;
  const double rate = peak * 1e12 * hw.gpu.efficiency * share;  // FLOP/s per GPU on large matrix multiplies
  const double tokens_step = double(p.global_batch) * m.seq;
  p.tokens_per_step = tokens_step;
  const double model_flops = model_flops_per_token(m) * tokens_step;
  // Recompute repeats forward work: full = the whole forward (2P + the attention core's
  // 4*s*h per layer); selective = the attention core only.
  const double attention_forward = attention_flops_per_token(m) / 3 * tokens_step;
  double flops = model_flops;
  if (l.recompute == Recompute::full) flops += 2 * m.params * tokens_step + attention_forward;
  if (l.recompute == Recompute::selective) flops += attention_forward;
  const double math_seconds = flops / p.gpus / rate;
  const Assumptions& a = hw.assume;
  const int layers_stage = (m.layers + l.pp - 1) / l.pp;

  // Memory-bound work (docs/validation.md, "Step-time model"): kernels whose time is set by
  // HBM traffic, not FLOPs. This is what makes narrow models and small micro-batches slower
  // per FLOP than the wide ones `efficiency` is calibrated on. Off when hbm_gb_s = 0.
  double memory_seconds = 0;
  if (hw.gpu.hbm_gb_s > 0) {
    const double hbm = hw.gpu.hbm_gb_s * 1e9;
    const double ridge = rate / hbm;  // FLOP per byte at which memory takes as long as math
    // 1. GEMM operands: an (M x K)(K x N) multiply moves 2(MK + KN + MN) bytes for 2MKN
    //    FLOPs, i.e. 1/M + 1/K + 1/N bytes per FLOP. M = tokens of a micro-batch; over a
    //    layer's four weight multiplies (FLOP-weighted) 1/K + 1/N averages (1 + tp/3)/h.
    const double weight_flops = (l.recompute == Recompute::full ? 8 : 6) * m.params * tokens_step;
    const double weight_seconds = weight_flops / p.gpus / rate;
    const double M = double(l.micro_batch) * m.seq;
    memory_seconds += weight_seconds * ridge * (1.0 / M + (1.0 + l.tp / 3.0) / m.hidden);
    // 2. Elementwise kernels (layer norms, bias+GeLU, dropout, residual adds): a fixed number
    //    of passes over each token's hidden vector per layer, fwd + bwd; a recomputed
    //    forward repeats its third of them.
    const double tokens_gpu = tokens_step / l.dp;
    const double again = l.recompute == Recompute::full ? 4.0 / 3 : 1.0;
    memory_seconds += tokens_gpu * layers_stage * a.elementwise_bytes * m.hidden / l.tp * again / hbm;
    // 3. Materialized attention: every score of the a x s matrix per token is written,
    //    softmaxed, dropped out and read back (fwd + bwd). Fused (flash) attention keeps
    //    them on chip.
    if (!m.flash_attention) {
      const double again_scores = l.recompute != Recompute::none ? 4.0 / 3 : 1.0;
      memory_seconds += tokens_gpu * layers_stage * a.score_bytes * (double(m.heads) / l.tp) * m.seq *
                        again_scores / hbm;
    }
  }
  p.memory_bound_seconds = memory_seconds;
  p.compute_seconds = math_seconds + memory_seconds;

  const double util = hw.assume.bandwidth_utilization;
  const double intra_link = hw.gpu.nvlink_gb_s > 0 ? hw.gpu.nvlink_gb_s : hw.gpu.pcie_gb_s;
  // A calibrated GPU type (catalog override) brings its own achieved bandwidth and latency.
  const double intra = hw.gpu.comm_beta_gb_s > 0 ? hw.gpu.comm_beta_gb_s * 1e9    // per direction, bytes/s
                                                 : intra_link / 2 * 1e9 * util;
  const double alpha = std::max(0.0, hw.gpu.comm_alpha_s);  // per hop / transfer inside a node, seconds
  const double inter = hw.network_gb_s * 1e9 * util;  // per node, bytes/s
  const int g = std::min(p.gpus, gpn);                // GPUs of this job on one node
  const double act = activation_bytes(m.precision);
  const double sbh = double(m.seq) * l.micro_batch * m.hidden;

  // Tensor parallel: 4 all-reduces of s*b*h per layer and micro-batch (2 forward, 2
  // backward; +2 when the forward is recomputed), over NVLink, not overlapped.
  if (l.tp > 1) {
    const double per_ar = 2.0 * (l.tp - 1) / l.tp * sbh * act / intra + 2.0 * (l.tp - 1) * alpha;
    const int n_ar = l.recompute == Recompute::full ? 6 : 4;
    p.tp_comm_seconds = double(layers_stage) * mb * n_ar * per_ar;
  }
  // Pipeline: one activation (forward) and one gradient (backward) per micro-batch and
  // stage boundary; stages are tp*dp ranks apart, so they sit on another node when tp*dp
  // fills one, sharing its network with the node's other GPUs.
  if (l.pp > 1) {
    const double bytes = sbh * act / l.tp;
    const double bw = l.tp * l.dp >= gpn ? inter / g : intra;
    const double latency = bw == intra ? alpha : 0;
    p.pp_comm_seconds = 2.0 * mb * (bytes / bw + latency) * l.interleave;  // every chunk boundary is crossed
  }
  // Data parallel (issue 29: from first principles at scale). The collective NCCL runs for a
  // DP group of d ranks, m of them on each of n nodes (d = n*m):
  //  - one node: a ring over NVLink, 2(d-1)/d of the bytes per rank;
  //  - several: hierarchical -- reduce-scatter inside the node over NVLink ((m-1)/m), an
  //    all-reduce of each rank's 1/m shard between nodes (2(n-1)/n of bytes/m), all-gather
  //    inside the node ((m-1)/m). Between nodes each GPU has its share of the node's network
  //    (rails x per-rail bandwidth = the catalog's network_gbps, over the node's g GPUs: every
  //    GPU of the node is in some DP group and they all reduce at once).
  // Gradients are reduced in the precision they are trained in (2 bytes mixed, 4 fp32).
  // ZeRO-1/2 (the distributed optimizer) reduce-scatters the gradients and all-gathers the
  // updated weights: the same bytes as the all-reduce, in two halves that overlap different
  // work (below). ZeRO-3 (docs/validation.md, "ZeRO-3") keeps only shards, so every
  // micro-batch all-gathers each block's weights before its forward and again before its
  // backward and reduce-scatters its gradient after: three collectives of half an all-reduce
  // per block, 1.5x the DDP bytes and 1.5 all-reduce latencies per block, per micro-batch.
  // The root (embedding/LM head) is gathered once per step and reduce-scattered once: 1x.
  const double params_gpu = params_per_gpu(m, l);
  if (l.dp > 1) {
    const double grad_b = params_gpu * grad_bytes(m.precision);
    const bool zero3 = l.zero == 3;
    const ShardUnits u = shard_units(m, l);
    const double blocks_b = zero3 ? std::max(0.0, params_gpu - u.root) * grad_bytes(m.precision) : 0;
    const double root_b = grad_b - blocks_b;  // ZeRO-3: the root; otherwise everything
    const double bytes = zero3 ? 1.5 * blocks_b : grad_b;  // ZeRO-3: the blocks, per micro-batch
    const int per_node = std::max(1, std::min(l.dp, g / l.tp));  // m
    const int dp_nodes = (l.dp + per_node - 1) / per_node;         // n
    // Latency (alpha-beta): each collective pays a start-up per hop. A ring has 2(d-1) hops;
    // NCCL's tree 2*log2(nodes) between nodes plus a chain inside each.
    const double intra_us = hw.gpu.comm_alpha_s >= 0 ? hw.gpu.comm_alpha_s * 1e6 : a.collective_latency_intra_us;
    const double inter_us = a.collective_latency_inter_us;
    const double ring_us = 2.0 * ((l.dp - dp_nodes) * intra_us + (dp_nodes > 1 ? dp_nodes * inter_us : (dp_nodes - 1) * intra_us));
    const double tree_us = 2.0 * (std::ceil(std::log2(double(dp_nodes))) * inter_us + (per_node - 1) * intra_us);
    // DDP all-reduces in buckets (each one a collective); ZeRO-3 gathers and reduces per
    // block: 3 collectives of d-1 hops each, i.e. 1.5 all-reduce latencies per block.
    const double bucket = a.bucket_mb * 1e6;
    const double calls = zero3 ? 1.5 * u.blocks : std::max(1.0, std::ceil(bytes / bucket));
    // Seconds per byte of the all-reduce of a rank's `bytes` (reduce + gather). Inside a node:
    // the NVLink ring. Across nodes NCCL picks the faster of a flat ring (every node's network
    // carries 2(d-1)/d of the bytes for each of its g/m DP groups) and the hierarchical
    // (tree) schedule (2(n-1)/n of each rank's 1/m shard, plus the NVLink phases).
    double seconds_per_byte = 0, hop_s = 0;
    if (l.tp * l.dp <= g) {
      seconds_per_byte = 2.0 * (l.dp - 1) / l.dp / intra;
      hop_s = std::min(ring_us, tree_us) * 1e-6;
    } else {
      const double share = inter / g;  // this GPU's part of the node's network, bytes/s
      const double ring_spb = 2.0 * (l.dp - 1) / l.dp / (share * per_node);
      const double tree_spb = 2.0 * (per_node - 1) / per_node / intra +
                              2.0 * (dp_nodes - 1) / dp_nodes / per_node / share;
      const double ring_s = bytes * ring_spb + calls * ring_us * 1e-6;
      const double tree_s = bytes * tree_spb + calls * tree_us * 1e-6;
      seconds_per_byte = ring_s <= tree_s ? ring_spb : tree_spb;
      hop_s = (ring_s <= tree_s ? ring_us : tree_us) * 1e-6;
      if (hw.in_network_reduction) {
        // In-network reduction (SHARP): the NVLink phases as in the tree, and each rank's
        // shard goes up to the switches once and comes back reduced once (full duplex), one
        // hop up and one down.
        const double sharp_spb = 2.0 * (per_node - 1) / per_node / intra + 1.0 / per_node / share;
        const double sharp_us = 2.0 * (inter_us + (per_node - 1) * intra_us);
        if (bytes * sharp_spb + calls * sharp_us * 1e-6 < std::min(ring_s, tree_s))
          seconds_per_byte = sharp_spb, hop_s = sharp_us * 1e-6;
      }
    }
    const double per_pass = bytes * seconds_per_byte + calls * hop_s;  // ZeRO-3: one micro-batch's blocks
    const double root_s = zero3 ? root_b * seconds_per_byte + std::max(1.0, std::ceil(root_b / bucket)) * hop_s : 0;
    p.dp_comm_seconds = zero3 ? mb * per_pass + root_s : per_pass;
    // Overlap. Earlier micro-batches accumulate locally, so only the last micro-batch's
    // backward can hide the gradient reduction (`comm_overlap` of it), and never the last
    // bucket: it is reduced after the backward pass has ended. With pipelining the first
    // stage finishes last (1F1B), so its reduction is the one on the critical path.
    const double per_mb = p.compute_seconds / mb;
    const double backward_share = l.recompute == Recompute::full ? 6.0 / 8 : 4.0 / 6;
    const double window = hw.assume.comm_overlap * backward_share * per_mb;
    const double tail = std::min(bytes, bucket) * seconds_per_byte + hop_s;
    if (zero3) {
      // Prefetch: block i+1's all-gather runs while block i computes, so per pass the exposed
      // part is max(0, comm - comm_overlap x compute) summed over blocks (uniform blocks: the
      // pass's totals), never less than what nothing can hide: the first block's gather of
      // the forward and the last one's reduce-scatter of the backward. The forward carries a
      // third of the blocks' traffic (one gather), the backward two thirds (gather +
      // reduce-scatter). The root's gather opens the step and its reduce-scatter closes it
      // (the embedding's gradient is complete only when the backward ends): exposed.
      const double forward_share = l.recompute == Recompute::full ? 2.0 / 8 : 2.0 / 6;
      const double fwd_window = hw.assume.comm_overlap * forward_share * per_mb;
      const double unit_s = u.blocks > 0 ? u.block * weight_bytes(m.precision) * seconds_per_byte / 2 + hop_s / 2 : 0;
      p.dp_exposed_seconds = mb * (std::max(unit_s, per_pass / 3 - fwd_window) +
                                   std::max(unit_s, per_pass * 2 / 3 - window)) +
                             root_s;
    } else if (l.zero == 1 || l.zero == 2) {
      // Distributed optimizer (Megatron-Core's overlap-grad-reduce + overlap-param-gather):
      // the gradient reduce-scatter hides behind the last backward as above; the weight
      // all-gather (its half of the bytes) behind the next step's first forward, bucket by
      // bucket, the first bucket exposed. A framework that reduces after the backward
      // (comm_overlap = 0) overlaps neither.
      const double half = p.dp_comm_seconds / 2;
      const double forward_share = l.recompute == Recompute::full ? 2.0 / 8 : 2.0 / 6;
      const double fwd_window = hw.assume.comm_overlap * forward_share * per_mb;
      const double half_tail = std::min(bytes, bucket) * seconds_per_byte / 2 + hop_s;
      p.dp_exposed_seconds = std::max(half_tail, half - window) + std::max(half_tail, half - fwd_window);
    } else {
      p.dp_exposed_seconds = std::max(tail, p.dp_comm_seconds - window);
    }
    p.dp_elements = params_gpu;
    p.dp_bytes = bytes;
    p.dp_rank_bytes_per_s = 2.0 * (l.dp - 1) / l.dp / seconds_per_byte;
    p.dp_hop_s = hop_s;
  }
  p.hbm_bytes_per_s = hw.gpu.hbm_gb_s * 1e9;
  // Fixed per step, whatever the GPU count: the optimizer update streams its (ZeRO-sharded)
  // state, gradient and weights through HBM once (read + write), and the host spends
  // step_overhead_s on loss/grad-norm syncs, launching the update and the data hand-off.
  if (hw.gpu.hbm_gb_s > 0) {
    const double update_bytes = 2 * optimizer_bytes(m.precision, m.optimizer) + grad_bytes(m.precision) +
                                weight_bytes(m.precision);
    p.fixed_seconds = params_gpu / (l.zero >= 1 ? l.dp : 1) * update_bytes / (hw.gpu.hbm_gb_s * 1e9);
  }
  p.fixed_seconds += hw.gpu.step_overhead_s >= 0 ? hw.gpu.step_overhead_s : a.step_overhead_s;

  // Bubble (p-1)/(v*m + p-1): v interleaved chunks make each fill/drain slot v times shorter.
  const double slots = double(l.interleave) * mb;
  p.bubble_fraction = double(l.pp - 1) / (slots + l.pp - 1);
  p.step_seconds = (p.compute_seconds + p.tp_comm_seconds) * (slots + l.pp - 1) / slots +
                   p.pp_comm_seconds + p.dp_exposed_seconds + p.fixed_seconds;
  p.comm_ratio = (p.tp_comm_seconds + p.pp_comm_seconds + p.dp_exposed_seconds) / p.compute_seconds;
  p.steps = w.tokens / tokens_step;
  p.train_hours = p.steps * p.step_seconds / 3600;
  // Evaluation: a forward pass on the training layout, no gradients, no optimizer. Per token
  // it costs the plain forward's share of the step's math and memory-bound work (the
  // forward is a third of the FLOPs and of the elementwise and score passes, less when the
  // step recomputes), the forward's TP all-reduces (2 per layer of the step's 4, or 6 with
  // full recompute) and the same pipeline fill and drain.
  if (w.eval_interval > 0 && w.eval_tokens > 0) {
    const double forward_compute = p.compute_seconds * (model_flops / 3) / flops;
    const double forward_tp = p.tp_comm_seconds * 2 / (l.recompute == Recompute::full ? 6 : 4);
    const double eval_step = (forward_compute + forward_tp) * (slots + l.pp - 1) / slots + p.pp_comm_seconds / 2;
    p.evaluations = std::floor(p.steps / w.eval_interval);
    p.eval_hours = p.evaluations * w.eval_tokens / tokens_step * eval_step / 3600;
    p.train_hours += p.eval_hours;
  }
  p.tflops_per_gpu = model_flops / p.step_seconds / p.gpus / 1e12;
  p.mfu = p.tflops_per_gpu / peak;

  // Failures: the job fails when any of its nodes does (spot adds interruptions); it
  // checkpoints weights + optimizer state at Daly's interval and loses half an interval
  // plus a restart per failure.
  const double node_mtbf = hw.node_mtbf_hours > 0 ? hw.node_mtbf_hours : a.node_mtbf_hours;
  const double state = m.params * (weight_bytes(m.precision) + optimizer_bytes(m.precision, m.optimizer));
  p.ckpt_save_s = std::max(1.0, state / (a.checkpoint_write_gb_s * 1e9 * p.nodes));
  const double mtbf_od = node_mtbf * 3600 / p.nodes;
  const double mtbf_spot = 3600 / (p.nodes / node_mtbf + p.nodes / a.spot_interruption_hours);
  const double t_od = daly_interval(p.ckpt_save_s, mtbf_od);
  const double t_spot = daly_interval(p.ckpt_save_s, mtbf_spot);
  // In-job restart: a failure costs the restart in the allocation, not a requeue.
  const double restart = a.restart_in_job_seconds > 0 ? a.restart_in_job_seconds : a.restart_seconds;
  double f_od = failure_factor(t_od, p.ckpt_save_s, restart, mtbf_od);
  double f_spot = failure_factor(t_spot, p.ckpt_save_s, restart, mtbf_spot);
  if (a.local_checkpoint_write_gb_s > 0) {
    // Two tiers: local saves (own write + the partner copy, each node's share) at Daly's
    // interval of their cost bound the work a failure loses; the shared saves at Daly's
    // interval of theirs only add their own cost.
    p.ckpt_local_save_s = std::max(0.1, 2 * state / (a.local_checkpoint_write_gb_s * 1e9 * p.nodes));
    auto two_tier = [&](double mtbf, double t_shared) {
      const double t_local = daly_interval(p.ckpt_local_save_s, mtbf);
      const double lost = (t_local / 2 + restart) / mtbf;
      if (lost >= 1 || t_local <= 0) return std::numeric_limits<double>::infinity();
      return (1 + p.ckpt_local_save_s / t_local + p.ckpt_save_s / t_shared) / (1 - lost);
    };
    f_od = two_tier(mtbf_od, t_od);
    f_spot = two_tier(mtbf_spot, t_spot);
    p.ckpt_local_interval_s = daly_interval(p.ckpt_local_save_s, hw.spot ? mtbf_spot : mtbf_od);
  }
  const double f = hw.spot ? f_spot : f_od;
  p.ckpt_interval_s = hw.spot ? t_spot : t_od;
  p.job_mtbf_hours = (hw.spot ? mtbf_spot : mtbf_od) / 3600;
  p.restart_s = restart;
  p.failure_overhead = f - 1;
  p.wall_hours = p.train_hours * f;
  p.gpu_hours = p.wall_hours * p.gpus;
  p.cost_on_demand = p.train_hours * f_od * p.gpus * hw.on_demand_gpu_hour;
  p.cost_spot = p.train_hours * f_spot * p.gpus * hw.spot_gpu_hour;
  p.has_spot_price = hw.spot_gpu_hour > 0;
  if (!std::isfinite(f)) p.fits = false;  // failures outpace progress: never choose it
  return p;
}

std::string spot_cost_text(const Plan& p) {
  if (!p.has_spot_price) return "no spot price";
  if (!std::isfinite(p.cost_spot)) return "no spot estimate (interruptions outpace progress)";
  return text::money(p.cost_spot) + " spot";
}

void scale_work(Plan& p, double factor) {
  p.steps *= factor;
  p.train_hours *= factor;
  p.evaluations *= factor;
  p.eval_hours *= factor;
  p.wall_hours *= factor;
  p.gpu_hours *= factor;
  p.cost_on_demand *= factor;
  p.cost_spot *= factor;
}

TopKEstimate topk_estimate(const Plan& p, double density) {
  TopKEstimate t;
  const Layout& l = p.layout;
  t.density = density;
  t.applies = l.dp > 1 && l.tp == 1 && l.pp == 1 && l.zero == 0 && p.dp_rank_bytes_per_s > 0 && density > 0;
  if (!t.applies) return t;
  const double k = std::ceil(density * p.dp_elements);
  t.dense_bytes = 2.0 * (l.dp - 1) / l.dp * p.dp_bytes;  // what dp_comm_seconds moves
  t.topk_bytes = (l.dp - 1) * k * (4 + 4);               // int32 index + fp32 value (the runner's)
  t.dense_exposed_s = p.dp_exposed_seconds;
  t.topk_comm_s = t.topk_bytes / p.dp_rank_bytes_per_s + p.dp_hop_s;  // one collective
  t.select_s = p.hbm_bytes_per_s > 0 ? p.dp_elements * 32 / p.hbm_bytes_per_s : 0;
  t.step_s = p.step_seconds - p.dp_exposed_seconds + t.topk_comm_s + t.select_s;
  return t;
}

std::string topk_reason(const Plan& p, double density) {
  const TopKEstimate t = topk_estimate(p, density);
  if (!t.applies || p.compute_seconds <= 0) return "";
  const double share = p.dp_exposed_seconds / p.compute_seconds;
  if (share < 0.1 || t.step_s > 0.9 * p.step_seconds) return "";
  auto mb = [](double b) { return text::format(b >= 1e8 ? "%.0f MB" : "%.3g MB", b / 1e6); };
  return text::format("communication %.0f%% of compute on %.3g Gb/s per GPU: top-k compression at %g%% "
                      "(--compress topk:%g) would cut the gradient exchange from %s to %s per GPU and step and "
                      "the step from %.3g s to %.3g s (selection +%.2g ms; residuals, momentum correction and "
                      "density warm-up as in Deep Gradient Compression keep the loss close)",
                      100 * share, p.dp_rank_bytes_per_s * 8 / 1e9, 100 * density, density, mb(t.dense_bytes).c_str(),
                      mb(t.topk_bytes).c_str(), p.step_seconds, t.step_s, t.select_s * 1e3);
}

}  // namespace scaleguard
