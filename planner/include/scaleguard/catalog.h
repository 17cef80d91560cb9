// The hardware and price catalog (configs/catalog.ini): GPU types, AWS instance types, named
// model presets and the modelling assumptions (link utilisation, overlap, MTBF, ...).
// Loaded once (load_catalog in decide.h); read-only afterwards, so sharing it is safe.
#pragma once
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard {

struct GpuType {
  std::string name;                  // "A100-80GB"
  std::vector<std::string> aliases;  // gres types that mean this GPU: "a100", "a100-80gb"
  double memory_gib = 0;
  double tflops_fp32 = 0;            // peak dense TFLOP/s (no sparsity)
  double tflops_fp16 = 0;
  double tflops_bf16 = 0;            // 0 = no bf16 support: bf16 jobs run at fp16 rates
  double nvlink_gb_s = 0;            // total bidirectional NVLink GB/s per GPU; 0 = none
  double pcie_gb_s = 0;              // total bidirectional PCIe GB/s, used without NVLink
  double efficiency = 0;             // achieved / peak of the large matrix multiplies
  double hbm_gb_s = 0;               // GPU memory bandwidth, GB/s; 0 = memory-bound work not modelled
  // Fitted on this cluster's own runs by `scaleguard calibrate --write` and layered on by a
  // catalog override (docs/calibration.md); unset = the catalog's first-principles model.
  double step_overhead_s = -1;       // host seconds per optimizer step; < 0 = [assumptions] step_overhead_s
  double comm_alpha_s = -1;          // seconds per hop of a collective or per point-to-point transfer
                                     // inside a node; < 0 = [assumptions] collective_latency_intra_us
  double comm_beta_gb_s = 0;         // achieved rank-to-rank GB/s inside a node, one direction
                                     // (utilization included); 0 = link x bandwidth_utilization
  double cores = 0;                  // a measured host ([host NAME]): cores its ranks share; ranks beyond
                                     // them (oversubscribed, or a busy machine) compute at cores/ranks
                                     // of the rate each; 0 = one "GPU" per rank, never shared
  bool host = false;                 // a measured CPU host ([host NAME]), not a GPU
  std::string calibrated_by;         // the override file that set any of the above or efficiency
  bool matches(const std::string& gres_type) const;  // name or alias, case-insensitive
};

struct Instance {
  std::string name;        // "p4d.24xlarge"
  std::string gpu;         // GpuType name
  int gpus = 0;            // GPUs per node
  int efa = 0;             // EFA adapters
  double network_gbps = 0; // node network bandwidth, Gbit/s
  // The fabric reduces in its switches (InfiniBand SHARP through NCCL's CollNet/NVLS-tree
  // plugins): an inter-node all-reduce sends each byte once and receives it once, instead
  // of 2(n-1)/n of it each way. Off unless the catalog says so (EFA has no such feature).
  bool in_network_reduction = false;
  double on_demand = 0;    // $/hour for the whole instance
  double spot = 0;         // $/hour, average spot price
};

// A named model shape ("llama2-7b"); params = 0 means "derive from the shape".
// arch = gpt (GPT-2 style: 4h GELU MLP, learned positions, tied head) or llama (Hugging Face
// LlamaForCausalLM: SwiGLU of width ffn_hidden, kv_heads key/value heads, rotary, RMSNorm,
// no biases); scaleguard-run --model-preset builds the same shape.
struct ModelPreset {
  std::string name;
  double params = 0;
  int layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  std::string arch = "gpt";
  int kv_heads = 0;        // resolved at load: heads when not given
  int ffn_hidden = 0;      // llama; resolved at load: llama_ffn_hidden(hidden) when not given
  double rope_theta = 10000, norm_eps = 1e-5;  // llama
  bool tied = true;        // output head = token embedding^T; llama's default: no
};

// Modelling assumptions shared by every plan ([assumptions] section).
struct Assumptions {
  double bandwidth_utilization = 0.7;  // fraction of a link's peak that NCCL collectives reach
  double comm_overlap = 0.8;           // fraction of the last micro-batch's backward that hides DP comm
  double memory_reserved_gib = 1.5;    // CUDA context, NCCL buffers, workspaces
  double memory_fragmentation = 0.10;  // allocator slack on top of everything else
  double node_mtbf_hours = 6300;       // mean time between failures of one node
  double spot_interruption_hours = 256;// mean node-hours between spot interruptions
  double checkpoint_write_gb_s = 2;    // checkpoint write bandwidth per node
  double restart_seconds = 300;        // requeue + reload after a failure
  // In-job restart (train.sbatch restarts on the healthy nodes of its allocation): a failure
  // then costs this instead of restart_seconds (a requeue); 0 = jobs requeue.
  double restart_in_job_seconds = 0;
  // Node-local checkpoints with partner copies (scaleguard-run --ckpt-local-dir): write
  // bandwidth per node of the local disk; 0 = no local tier. With it the planner saves
  // locally at Daly's interval of the local cost (own write + partner copy) and to the shared
  // file system at Daly's interval of its own cost: a failure loses half a local interval.
  double local_checkpoint_write_gb_s = 0;
  // The sharper step-time model (docs/validation.md, "Step-time model"); all 0 = off.
  double elementwise_bytes = 0;        // HBM bytes per token, layer and hidden element (fwd+bwd)
  double score_bytes = 0;              // HBM bytes per attention score element (fwd+bwd), materialized attention
  double step_overhead_s = 0;          // host-side seconds per optimizer step (sync, launch, data hand-off)
  double collective_latency_intra_us = 0;  // per ring/tree hop inside a node
  double collective_latency_inter_us = 0;  // per hop between nodes
  double bucket_mb = 25;               // DDP gradient bucket (PyTorch default 25 MB)
  // The model's own stated error (docs/validation.md: the held-out throughput MAPE bound the
  // validation test enforces). decide() rewrites on a predicted comm ratio or doubling speedup
  // only when it is past the policy threshold by more than this relative band; inside the
  // band the rule warns (issue 29). 0 = judge the point prediction.
  double model_uncertainty = 0;
};

struct Catalog {
  std::string path;
  std::string override_path;         // the calibration override layered on top ("" = none)
  Assumptions assumptions;
  std::vector<GpuType> gpus;
  std::vector<Instance> instances;
  std::vector<ModelPreset> models;
  // nullptr when absent. GPU lookup accepts names and aliases, case-insensitive.
  const GpuType* find_gpu(const std::string& name_or_alias) const;
  const Instance* find_instance(const std::string& name) const;
  const ModelPreset* find_model(const std::string& name) const;
};

// A catalog override (written by `scaleguard calibrate --write`, docs/calibration.md):
// [gpu NAME] sections set efficiency, step_overhead_s, comm_alpha_s, comm_beta_gb_s of a GPU
// type of `cat`; [host NAME] sections add a measured host (one rank = one "GPU") as a GPU
// type and an instance of that name; [calibration] and [source N] sections carry the
// provenance. Errors name the file, line and key; `cat` is unchanged on error.
Result<bool> apply_catalog_override(Catalog& cat, const std::string& override_path);
// load_catalog(path) (decide.h), then the override when `override_path` is not empty.
Result<Catalog> load_catalog(const std::string& path, const std::string& override_path);

}  // namespace scaleguard
