// The effective training configuration of one rank.
// Precedence: command line > SCALEGUARD_* environment (the plan the SPANK plugin exports)
// > --config FILE.ini > defaults. Unknown keys in the file are errors.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace scaleguard::run {

// Every error the runner reports to the user; main() prints what() and exits non-zero.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Config {
  // model
  std::string model = "gpt";       // mlp | gpt | llama (script: --model-file)
  std::string model_preset;        // a [model NAME] of the catalog: its shape (and arch) for unset keys
  std::string catalog;             // the catalog --model-preset reads (empty: $SCALEGUARD_CATALOG, else the installed one)
  int64_t vocab_size = 256;        // byte-level tokens
  int64_t seq_len = 64;            // T: context length (GPT) / window (MLP)
  int64_t n_layer = 2;             // GPT blocks
  int64_t n_head = 4;
  int64_t n_embd = 64;             // C
  int64_t hidden = 512;            // MLP hidden width
  bool untied_head = false;        // GPT/Llama: separate output head (head / lm_head) instead of the embedding^T
  // Llama (Hugging Face LlamaForCausalLM): GQA, SwiGLU, rotary embeddings, RMSNorm
  int64_t n_kv_head = 0;           // key/value heads (GQA; 1 = MQA); 0 = n_head
  int64_t ffn_hidden = 0;          // SwiGLU width; 0 = scaleguard::llama_ffn_hidden(n_embd) (planner/model.h)
  double rope_theta = 10000;       // rotary base
  double norm_eps = 1e-5;          // RMSNorm epsilon
  // precision and memory (the plan's memory model: bf16 with fp32 masters, its recompute)
  std::string precision = "fp32";  // fp32 | bf16 (mixed: bf16 compute, fp32 masters and optimizer state)
  std::string recompute = "none";  // none | selective (attention core) | full (every block); SCALEGUARD_RECOMPUTE
  // data
  std::string data;                // token file: prep's, llm.c's (.bin) or a raw u16/u32 array
  std::string data_format = "auto";  // auto | sg | llmc | u16 | u32 (tokens.h)
  int64_t data_vocab = 0;          // the data's vocabulary; 0 = not stated (required for u16/u32)
  int64_t synthetic = 0;           // >0: use this many random tokens instead of --data
  // evaluation: a forward pass over held-out data every eval_every steps
  std::string eval_data;           // same kinds as --data (tokens, or arrays when --data is arrays)
  int64_t eval_every = 0;          // steps; 0 = no evaluation
  std::string eval_tokens = "1M";  // tokens per evaluation (a count: 20M, 1e8): whole windows, whole micro-batches
  // optimisation
  int64_t steps = 100;
  int64_t global_batch = 32;       // B: samples per optimizer step over all ranks
  int64_t micro_batch = 0;         // per rank per forward; 0 = global_batch / dp
  uint64_t seed = 1337;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;       // cosine decays to lr * this
  int64_t warmup = 10;             // linear warm-up steps
  // learning-rate schedule (lr_schedule.h): its horizon independent of --steps when given
  std::string lr_schedule = "cosine";  // constant | linear | cosine | wsd
  int64_t lr_decay_steps = 0;      // the decay ends here; 0 = steps (or lr_decay_tokens)
  std::string lr_decay_tokens;     // the same horizon as a token count (20M, 1e9); empty = not given
  double lr_wsd_decay_fraction = 0.2;  // wsd: the last fraction of the horizon decays
  double weight_decay = 0.1;       // applied to matrices and embeddings only
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;          // global norm; 0 = off
  // parallelism (the plan)
  std::string strategy = "auto";   // auto | single | ddp (others: later issues)
  int64_t tp = 1, pp = 1;
  int64_t dp = 0;                  // 0 = world / (tp * pp)
  int64_t zero = 0;
  int64_t micro_batches = 0;       // per rank per step (pipeline: M); 0 = per-rank batch / micro-batch
  std::string schedule = "1f1b";   // pipeline schedule: 1f1b | gpipe
  double bucket_mb = 25;           // 0 = one bucket per parameter (unbucketed)
  bool no_overlap = false;         // all-reduce after backward instead of from hooks
  // top-k gradient compression (compress.h): none | topk:RATIO; DGC momentum correction and warm-up
  std::string compress = "none";
  double compress_momentum = 0.9;  // momentum correction (0: plain residual accumulation)
  int64_t compress_warmup = -1;    // steps of exponential density warm-up; -1 = --warmup
  // runtime
  std::string device = "auto";     // auto | cpu | cuda
  int64_t threads = 0;             // torch threads per rank; 0 = cores / local ranks
  double startup_timeout = 60;     // seconds for the first collectives before MPI_Abort
  // checkpoints (checkpointing.h; the plan exports SCALEGUARD_CKPT_DIR and _CKPT_INTERVAL_S)
  std::string ckpt_dir;            // empty: no checkpoints
  std::string ckpt_every;          // N (steps) | Nmin | auto; empty: ckpt-interval-s, else auto
  double ckpt_interval_s = 0;      // the plan's interval in seconds (used when ckpt-every is empty)
  bool ckpt_async = true;          // write in a background thread while training goes on
  int64_t ckpt_keep = 3;           // committed checkpoints kept (0 = all)
  std::string ckpt_on_error = "stop";  // a failed save: stop | continue
  double ckpt_mtbf_hours = 0;      // node MTBF for `auto`; 0 = the catalog's assumption
  std::string ckpt_local_dir;      // node-local checkpoints + partner copies (empty: none); %h = host name
  std::string ckpt_shared_every;   // with ckpt_local_dir: the shared tier's cadence N|Nmin|auto (empty = auto)
  int64_t ckpt_local_keep = 2;     // committed local checkpoints kept per node
  // hangs and stragglers (health/health.h, issue 38 item 4)
  std::string health_dir;          // heartbeats, hang and straggler reports; empty: CKPT_DIR/health (none without)
  bool hang_detect = true;         // the watchdog thread (exit 87 past a section's limit)
  double hang_startup_s = 600;     // start-up, the first steps, the finish
  double hang_step_floor_s = 120;  // a step's limit: max(this, hang-k x p99 of recent steps)
  double hang_ckpt_floor_s = 600;  // the after-step hook's (checkpoint) limit floor
  double hang_eval_floor_s = 600;  // an evaluation's limit floor
  double hang_k = 5;               // limit = max(floor, k x p99)
  int64_t straggler_every = 50;    // steps per straggler window (0 = off)
  double straggler_threshold = 0.2;  // a node slower than the others' median by more than this
  int64_t straggler_windows = 3;   // in this many consecutive windows: named
  // output
  int64_t log_every = 10;
  std::string metrics;             // JSON lines, rank 0
  std::string metrics_csv;         // CSV, rank 0: one row per logged step or evaluation
  std::string tensorboard;         // directory for rank 0's TensorBoard event file
  bool quiet = false;              // no progress line
  bool verbose = false;            // start-up: every rank's line, the effective configuration, setup details
  std::string init_from;           // safetensors file or directory: initial weights (a checkpoint in ckpt_dir wins)
  std::string shape_from;          // not a key: "DIR/config.json" when --init-from DIR's config.json gave the shape
  std::string dump_params;         // rank 0 writes all parameters (name order) at the end
  std::string sample_log;          // every rank appends the sample ids it trains on
  bool memory_report = false;      // rank 0 prints its state bytes and the steps' peak tensor memory

  // key=value lines, sorted by key: what rank 0 prints and what ranks hash and compare.
  std::map<std::string, std::string> effective;
  std::string effective_text() const;
  uint64_t hash() const;
};

// Llama under tensor parallel: tp must divide n-kv-head (and n-head) and ffn-hidden; a
// RunError naming both numbers otherwise. Nothing for other models or tp = 1.
void check_tp_heads(const Config& cfg, int64_t tp);

// The shortest decimal text that reads back as exactly v ("0.1", "1e-05"): what --help shows
// as a floating-point option's default.
std::string short_double_text(double v);

// Parses `train` arguments (argv after the verb). Throws RunError with a clear message;
// returns false (and prints usage to stdout) for --help.
bool parse_train_args(const std::vector<std::string>& args, Config& cfg);

// Checks the configuration against the launched world (strategy, dp*tp*pp == world,
// batch divisibility) and fills dp, micro_batch and micro_batches. Throws RunError.
void check_against_world(Config& cfg, int world);

}  // namespace scaleguard::run
