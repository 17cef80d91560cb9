#include "config/config.h"

#include <xxhash.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "ckpt/interval.h"
#include "config/hf_config.h"
#include "scaleguard/build_info.h"
#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"

namespace po = boost::program_options;

namespace scaleguard::run {
namespace {

// A floating-point option with its default as --help shows it: the shortest text that reads
// back as the same double ("0.1", not Boost's "0.10000000000000001").
po::typed_value<double>* real_value(double& field) {
  return po::value(&field)->default_value(field, short_double_text(field));
}

po::options_description train_options(Config& c) {
  po::options_description model("Model");
  model.add_options()
    ("model", po::value(&c.model)->default_value(c.model),
     "mlp | gpt | llama (Hugging Face LlamaForCausalLM: RMSNorm, rotary embeddings, SwiGLU, grouped-query "
     "attention, no biases; parameter names as HF's) (script: set by --model-file)")
    ("model-preset", po::value(&c.model_preset)->default_value(c.model_preset),
     "a [model NAME] of the planner's catalog (e.g. llama2-7b, llama3-8b): its arch and shape (layers, hidden, "
     "heads, kv_heads, ffn_hidden, rope_theta, norm_eps, tied, seq, vocab) for every shape key not given")
    ("catalog", po::value(&c.catalog)->default_value(c.catalog),
     "the catalog --model-preset reads (empty: $SCALEGUARD_CATALOG, else the installed configs/catalog.ini)")
    ("model-file", po::value<std::string>()->default_value(""),
     "a TorchScript module (torch.jit.script(model).save(FILE)) to train instead of --model: forward(x) -> output; "
     "loss cross-entropy for integer y, MSE for float y; data parallel, ZeRO-1 and top-k only")
    ("vocab-size", po::value(&c.vocab_size)->default_value(c.vocab_size), "token vocabulary (256 = bytes)")
    ("seq-len", po::value(&c.seq_len)->default_value(c.seq_len), "context length T")
    ("n-layer", po::value(&c.n_layer)->default_value(c.n_layer), "GPT/Llama blocks")
    ("n-head", po::value(&c.n_head)->default_value(c.n_head), "attention (query) heads")
    ("n-embd", po::value(&c.n_embd)->default_value(c.n_embd), "embedding width C")
    ("hidden", po::value(&c.hidden)->default_value(c.hidden), "MLP hidden width")
    ("untied-head", po::value(&c.untied_head)->default_value(c.untied_head)->implicit_value(true),
     "GPT/Llama: own output head (head.weight / lm_head.weight) instead of the token embedding (tied, the "
     "default; Llama presets set it from the catalog's tied key: untied for llama2/llama3)")
    ("n-kv-head", po::value(&c.n_kv_head)->default_value(c.n_kv_head),
     "Llama: key/value heads (grouped-query attention; 1 = multi-query); 0 = n-head")
    ("ffn-hidden", po::value(&c.ffn_hidden)->default_value(c.ffn_hidden),
     "Llama: SwiGLU intermediate size; 0 = Llama's rule 2/3 * 4 * n-embd rounded up to a multiple of 256")
    ("rope-theta", real_value(c.rope_theta), "Llama: rotary embedding base")
    ("norm-eps", real_value(c.norm_eps), "Llama: RMSNorm epsilon")
    ("precision", po::value(&c.precision)->default_value(c.precision),
     "fp32 | bf16: bf16 forward and backward with fp32 master weights, gradients and AdamW state "
     "(what the planner's memory model assumes)")
    ("recompute", po::value(&c.recompute)->default_value(c.recompute),
     "activation recompute: none | selective (attention scores/softmax redone in backward) | full (each GPT "
     "block redone in backward from its input); the plan exports SCALEGUARD_RECOMPUTE");
  po::options_description data("Data");
  data.add_options()
    ("data", po::value(&c.data)->default_value(c.data),
     "token file: `scaleguard-run prep` output, an llm.c .bin (uint16 GPT-2 / uint32 Llama-3 header) or a raw "
     "u16/u32 token array (nanoGPT's train.bin); memory-mapped, shared by the ranks of a node")
    ("data-format", po::value(&c.data_format)->default_value(c.data_format),
     "auto (by the file's header; a directory or .npy: npy; the HDF5 signature: h5) | sg | llmc | u16 | u32 (raw "
     "arrays need --data-vocab) | megatron (Megatron-LM's PREFIX.bin + PREFIX.idx; auto when PREFIX.idx exists) | h5 "
     "(datasets x, y; first dimension = samples) | npy (DIR with x.npy, y.npy)")
    ("data-vocab", po::value(&c.data_vocab)->default_value(c.data_vocab),
     "vocabulary the tokens were made with; must equal vocab-size (0 = not stated; required for u16/u32)")
    ("synthetic", po::value(&c.synthetic)->default_value(c.synthetic),
     "train on this many random tokens (from --seed) instead of --data");
  po::options_description eval("Evaluation (held-out loss; planned by `scaleguard plan --eval-every --eval-tokens`)");
  eval.add_options()
    ("eval-data", po::value(&c.eval_data)->default_value(c.eval_data),
     "held-out data, of the same kind as --data: its first windows are the evaluation set")
    ("eval-every", po::value(&c.eval_every)->default_value(c.eval_every),
     "evaluate after every N-th optimizer step (0 = never)")
    ("eval-tokens", po::value(&c.eval_tokens)->default_value(c.eval_tokens),
     "tokens each evaluation reads (20M, 1e8): rounded up to whole seq-len windows and whole micro-batches "
     "on every data-parallel rank");
  po::options_description optim("Optimisation");
  optim.add_options()
    ("steps", po::value(&c.steps)->default_value(c.steps), "optimizer steps")
    ("global-batch", po::value(&c.global_batch)->default_value(c.global_batch), "samples per step, all ranks")
    ("micro-batch", po::value(&c.micro_batch)->default_value(c.micro_batch),
     "samples per rank per forward (0 = global-batch / dp; smaller = gradient accumulation)")
    ("seed", po::value(&c.seed)->default_value(c.seed), "initialisation and sampling seed")
    ("lr", real_value(c.lr), "peak learning rate")
    ("min-lr-ratio", real_value(c.min_lr_ratio), "cosine floor as a fraction of lr")
    ("warmup", po::value(&c.warmup)->default_value(c.warmup), "linear warm-up steps")
    ("weight-decay", real_value(c.weight_decay), "AdamW decay (matrices only)")
    ("beta1", real_value(c.beta1), "AdamW beta1")
    ("beta2", real_value(c.beta2), "AdamW beta2")
    ("eps", real_value(c.eps), "AdamW epsilon")
    ("grad-clip", real_value(c.grad_clip), "clip the global gradient norm (0 = off)");
  po::options_description par("Parallelism (normally from the plan: SCALEGUARD_STRATEGY, _TP, _PP, _DP, ...)");
  par.add_options()
    ("strategy", po::value(&c.strategy)->default_value(c.strategy), "auto | single | ddp | zero | pipeline | tensor | hybrid")
    ("tp", po::value(&c.tp)->default_value(c.tp), "tensor-parallel degree")
    ("pp", po::value(&c.pp)->default_value(c.pp), "pipeline-parallel degree")
    ("dp", po::value(&c.dp)->default_value(c.dp), "data-parallel degree (0 = world / (tp*pp))")
    ("zero", po::value(&c.zero)->default_value(c.zero),
     "ZeRO stage over the data-parallel group: 0 replicated, 1 optimizer state sharded, 2 + gradients "
     "reduce-scattered into shards, 3 + parameters sharded (gathered per GPT block around its forward and "
     "backward, next block prefetched); 2 and 3 not with pp > 1")
    ("micro-batches", po::value(&c.micro_batches)->default_value(c.micro_batches),
     "micro-batches per rank per step (pipeline: M; 0 = per-rank batch / micro-batch)")
    ("schedule", po::value(&c.schedule)->default_value(c.schedule), "pipeline schedule: 1f1b | gpipe")
    ("bucket-mb", real_value(c.bucket_mb), "gradient bucket size, MB (0 = per parameter)")
    ("no-overlap", po::value(&c.no_overlap)->default_value(c.no_overlap)->implicit_value(true),
     "all-reduce after backward instead of from autograd hooks")
    ("compress", po::value(&c.compress)->default_value(c.compress),
     "data-parallel gradient compression: none | topk:RATIO (Deep Gradient Compression: each rank sends the "
     "RATIO fraction of largest accumulated entries per parameter as (index, value) pairs in one all-gather; the "
     "rest stays in a per-rank residual; local clipping at grad-clip/sqrt(dp)); not with tp, pp or zero")
    ("compress-momentum", real_value(c.compress_momentum),
     "top-k momentum correction: velocity u = m u + g accumulated before selection, masked where sent; "
     "AdamW then runs with beta1 0 (0 = plain residual accumulation, AdamW unchanged)")
    ("compress-warmup", po::value(&c.compress_warmup)->default_value(c.compress_warmup),
     "top-k density warm-up: density = RATIO^((step+1)/W) for the first W steps, then RATIO (-1 = --warmup)");
  po::options_description ckpt("Checkpoints (HDF5 shards; resume from the newest valid one in --ckpt-dir)");
  ckpt.add_options()
    ("ckpt-dir", po::value(&c.ckpt_dir)->default_value(c.ckpt_dir), "checkpoint directory (empty = no checkpoints)")
    ("ckpt-every", po::value(&c.ckpt_every)->default_value(c.ckpt_every),
     "N (exactly the steps divisible by N), Nmin (minutes) or auto (Daly from the measured cost of a save: "
     "sync the save, async the training thread's stall + I/O contention; and the job's MTBF); "
     "empty = ckpt-interval-s, else auto")
    ("ckpt-interval-s", real_value(c.ckpt_interval_s),
     "seconds between saves from the plan (SCALEGUARD_CKPT_INTERVAL_S); used when ckpt-every is empty")
    ("ckpt-async", po::value(&c.ckpt_async)->default_value(c.ckpt_async)->implicit_value(true),
     "on | off: write in a background thread while training goes on")
    ("ckpt-keep", po::value(&c.ckpt_keep)->default_value(c.ckpt_keep), "committed checkpoints to keep (0 = all)")
    ("ckpt-on-error", po::value(&c.ckpt_on_error)->default_value(c.ckpt_on_error),
     "a failed save: stop (exit 1) | continue (log it, keep training)")
    ("ckpt-mtbf-hours", real_value(c.ckpt_mtbf_hours),
     "node MTBF for --ckpt-every auto (0 = the catalog's assumption)")
    ("ckpt-local-dir", po::value(&c.ckpt_local_dir)->default_value(c.ckpt_local_dir),
     "node-local checkpoint directory (instance store, $TMPDIR; %h = host name): --ckpt-every saves go here, "
     "each rank's shard also to a partner node's; --ckpt-dir gets --ckpt-shared-every saves (empty = no local tier)")
    ("ckpt-shared-every", po::value(&c.ckpt_shared_every)->default_value(c.ckpt_shared_every),
     "with --ckpt-local-dir: the shared --ckpt-dir's cadence, N (steps), Nmin or auto (Daly from the shared "
     "save's own measured cost); empty = auto")
    ("ckpt-local-keep", po::value(&c.ckpt_local_keep)->default_value(c.ckpt_local_keep),
     "committed local checkpoints kept on each node (>= 1)")
    ("init-from", po::value(&c.init_from)->default_value(c.init_from),
     "start from these weights: a .safetensors file, or a directory with model.safetensors or "
     "model.safetensors.index.json (as `scaleguard-run export` writes); a checkpoint in --ckpt-dir wins over it. "
     "A directory's config.json (Hugging Face llama/mistral) gives the model's shape: options that disagree are errors");
  po::options_description run("Run time and output");
  run.add_options()
    ("device", po::value(&c.device)->default_value(c.device), "auto | cpu | cuda")
    ("threads", po::value(&c.threads)->default_value(c.threads), "torch threads per rank (0 = cores / local ranks)")
    ("startup-timeout", real_value(c.startup_timeout),
     "seconds the first collectives may take before every rank aborts")
    ("log-every", po::value(&c.log_every)->default_value(c.log_every), "progress and metrics interval, steps")
    ("metrics", po::value(&c.metrics)->default_value(c.metrics), "JSON-lines metrics file (rank 0)")
    ("quiet", po::value(&c.quiet)->default_value(c.quiet)->implicit_value(true), "no progress line")
    ("verbose", po::value(&c.verbose)->default_value(c.verbose)->implicit_value(true),
     "at start-up every rank's line, the whole effective configuration and the setup details (without: one "
     "line of what trains)")
    ("dump-params", po::value(&c.dump_params)->default_value(c.dump_params),
     "rank 0 writes every parameter (name order, float32) to this file at the end")
    ("sample-log", po::value(&c.sample_log)->default_value(c.sample_log),
     "each rank writes the sample ids it trains on to FILE.rank<N>")
    ("memory-report", po::value(&c.memory_report)->default_value(c.memory_report)->implicit_value(true),
     "rank 0 prints the bytes of parameters, gradients and optimizer state and the peak of the tensor memory "
     "allocated during the steps (c10 CPU allocator reporting; CPU runs, best with --threads 1)");
  po::options_description health("Hangs and stragglers (exit 87 on a hang; the launcher restarts in-job)");
  health.add_options()
    ("health-dir", po::value(&c.health_dir)->default_value(c.health_dir),
     "directory for the ranks' heartbeats and the hang and straggler reports the launcher reads (empty = "
     "CKPT_DIR/health; no directory: hangs are still detected, the hung rank is not named)")
    ("hang-detect", po::value(&c.hang_detect)->default_value(c.hang_detect)->implicit_value(true),
     "on | off: the watchdog thread; a section past its limit logs the ranks not progressing and exits 87")
    ("hang-startup-s", real_value(c.hang_startup_s),
     "limit of the start-up (data, model, resume), the first 5 steps and the finish, seconds")
    ("hang-step-floor-s", real_value(c.hang_step_floor_s),
     "a step's limit: max(this, hang-k x the p99 of the last 100 step times), seconds")
    ("hang-ckpt-floor-s", real_value(c.hang_ckpt_floor_s),
     "the checkpoint hook's limit: max(this, hang-k x the p99 of its recent times), seconds")
    ("hang-eval-floor-s", real_value(c.hang_eval_floor_s),
     "an evaluation's limit: max(this, hang-k x the p99 of the recent evaluations), seconds")
    ("hang-k", real_value(c.hang_k), "the learned limits' factor on the p99 of the section's recent times")
    ("straggler-every", po::value(&c.straggler_every)->default_value(c.straggler_every),
     "steps per straggler window: the nodes' compute seconds compared (one small allgather; 0 = off)")
    ("straggler-threshold", real_value(c.straggler_threshold),
     "a node slower than the median of the other nodes by more than this fraction counts in a window")
    ("straggler-windows", po::value(&c.straggler_windows)->default_value(c.straggler_windows),
     "consecutive windows over the threshold before a node is named (log, metrics, HEALTH_DIR/stragglers)");
  po::options_description sched("Learning-rate schedule (warm-up, then a decay whose horizon may outlast --steps)");
  sched.add_options()
    ("lr-schedule", po::value(&c.lr_schedule)->default_value(c.lr_schedule),
     "after --warmup: constant | linear (to lr x min-lr-ratio) | cosine (to lr x min-lr-ratio) | wsd (warm-up, "
     "stable at lr, then a linear decay to lr x min-lr-ratio over the last lr-wsd-decay-fraction of the horizon)")
    ("lr-decay-steps", po::value(&c.lr_decay_steps)->default_value(c.lr_decay_steps),
     "the decay's horizon: the step where it reaches the floor (later steps stay there); keep it when a run is "
     "extended or requeued with another --steps (0 = --steps)")
    ("lr-decay-tokens", po::value(&c.lr_decay_tokens)->default_value(c.lr_decay_tokens),
     "the horizon as tokens (20M, 1e9), at global-batch x seq-len tokens per step, rounded up; not with "
     "lr-decay-steps")
    ("lr-wsd-decay-fraction", po::value(&c.lr_wsd_decay_fraction)->default_value(c.lr_wsd_decay_fraction, "0.2"),
     "wsd: the fraction of the horizon that decays (0, 1]");
  po::options_description logs("Metrics for people (rank 0 writes them; beside --metrics)");
  logs.add_options()
    ("metrics-csv", po::value(&c.metrics_csv)->default_value(c.metrics_csv),
     "CSV file: step,tokens,loss,lr,grad_norm,tokens_per_s,step_ms,eval_loss; a row per logged step, and per "
     "evaluation (only step, tokens, eval_loss)")
    ("tensorboard", po::value(&c.tensorboard)->default_value(c.tensorboard),
     "directory for a TensorBoard event file events.out.tfevents.<time>.<host>: train/loss, train/lr, "
     "train/grad_norm, train/tokens_per_s per logged step, eval/loss per evaluation");
  po::options_description all;
  all.add(model).add(data).add(eval).add(optim).add(par).add(ckpt).add(health).add(run).add(sched).add(logs);
  return all;
}

std::string value_text(const boost::any& v) {
  std::ostringstream s;
  if (auto* p = boost::any_cast<std::string>(&v)) return *p;
  if (auto* p = boost::any_cast<int64_t>(&v)) s << *p;
  else if (auto* p = boost::any_cast<uint64_t>(&v)) s << *p;
  else if (auto* p = boost::any_cast<bool>(&v)) s << (*p ? "true" : "false");
  else if (auto* p = boost::any_cast<double>(&v)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *p);  // exact: the text is hashed across ranks
    s << buf;
  }
  return s.str();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const po::options_description& desc, const std::string& key) {
  std::string best;
  size_t best_d = 3;  // suggest only close names
  for (const auto& o : desc.options()) {
    size_t d = edit_distance(key, o->long_name());
    if (d < best_d) best_d = d, best = o->long_name();
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// The 1-based line of `key = ...` in an INI file, 0 when not found.
int line_of(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line.compare(start, key.size(), key) == 0) return n;
  }
  return 0;
}

// --model-preset NAME: the catalog's [model NAME] (the table the planner plans with) fills
// every shape key that was not given (command line, SCALEGUARD_*, config file).
void apply_preset(const po::variables_map& vm, Config& cfg, std::set<std::string>& filled) {
  std::string path = cfg.catalog;
  if (path.empty()) {
    const char* env = std::getenv("SCALEGUARD_CATALOG");
    path = env && *env ? env : std::string(scaleguard::build_config_dir()) + "/catalog.ini";
  }
  auto cat = scaleguard::load_catalog(path);
  if (!cat) throw RunError("--model-preset " + cfg.model_preset + ": " + cat.error().str());
  const ModelPreset* p = cat.value().find_model(cfg.model_preset);
  if (!p) {
    std::string names;
    for (const auto& m : cat.value().models) names += (names.empty() ? "" : ", ") + m.name;
    throw RunError("--model-preset " + cfg.model_preset + ": no [model " + cfg.model_preset + "] in " + path +
                   " (presets: " + names + ")");
  }
  auto unset = [&vm, &filled](const char* key) {
    const bool was_unset = !vm.count(key) || vm[key].defaulted();
    if (was_unset) filled.insert(key);
    return was_unset;
  };
  auto set_int = [&](const char* key, int64_t& field, int64_t v) {
    if (unset(key)) field = v, cfg.effective[key] = std::to_string(v);
  };
  auto set_double = [&](const char* key, double& field, double v) {
    if (unset(key)) field = v, cfg.effective[key] = value_text(boost::any(v));
  };
  if (unset("model")) cfg.model = cfg.effective["model"] = p->arch;
  set_int("n-layer", cfg.n_layer, p->layers);
  set_int("n-embd", cfg.n_embd, p->hidden);
  set_int("n-head", cfg.n_head, p->heads);
  set_int("seq-len", cfg.seq_len, p->seq);
  set_int("vocab-size", cfg.vocab_size, p->vocab);
  if (p->arch == "llama") {
    set_int("n-kv-head", cfg.n_kv_head, p->kv_heads);
    set_int("ffn-hidden", cfg.ffn_hidden, p->ffn_hidden);
    set_double("rope-theta", cfg.rope_theta, p->rope_theta);
    set_double("norm-eps", cfg.norm_eps, p->norm_eps);
  }
  if (unset("untied-head")) cfg.untied_head = !p->tied, cfg.effective["untied-head"] = p->tied ? "false" : "true";
}

// --init-from DIR with a config.json (a Hugging Face llama directory, or what `export` wrote):
// the model's shape comes from it. A key given on the command line, in SCALEGUARD_*, the
// config file or by --model-preset must agree (an error naming both values otherwise);
// seq-len is the training window, so it may be shorter than max_position_embeddings.
void apply_hf_config(const po::variables_map& vm, const std::set<std::string>& preset_filled, Config& cfg) {
  const auto hf = read_hf_model_config(cfg.init_from);
  if (!hf) return;
  auto given = [&](const std::string& key) {
    return (vm.count(key) && !vm[key].defaulted()) || preset_filled.count(key) > 0;
  };
  auto source = [&](const std::string& key) {
    return preset_filled.count(key) ? "--model-preset " + cfg.model_preset + " sets " + key
                                    : "--" + key;  // command line, SCALEGUARD_*, config file
  };
  if (given("model") && cfg.model != "llama")
    throw RunError(source("model") + " " + cfg.model + ", but " + hf->file + " describes a " + hf->model_type +
                   " model (model_type); leave --model out or give --model llama");
  cfg.model = cfg.effective["model"] = "llama";
  for (const HfKey& k : hf->keys) {
    double now = 0;
    int64_t* int_field = nullptr;
    double* real_field = nullptr;
    if (k.key == "n-embd") int_field = &cfg.n_embd;
    else if (k.key == "n-layer") int_field = &cfg.n_layer;
    else if (k.key == "n-head") int_field = &cfg.n_head;
    else if (k.key == "n-kv-head") int_field = &cfg.n_kv_head;
    else if (k.key == "ffn-hidden") int_field = &cfg.ffn_hidden;
    else if (k.key == "vocab-size") int_field = &cfg.vocab_size;
    else if (k.key == "seq-len") int_field = &cfg.seq_len;
    else if (k.key == "rope-theta") real_field = &cfg.rope_theta;
    else if (k.key == "norm-eps") real_field = &cfg.norm_eps;
    if (int_field) now = static_cast<double>(*int_field);
    else if (real_field) now = *real_field;
    else now = cfg.untied_head ? 1 : 0;  // untied-head
    // 0 means "derive it" for n-kv-head and ffn-hidden: not a value to compare.
    bool is_given = given(k.key) && !((k.key == "n-kv-head" || k.key == "ffn-hidden") && now == 0);
    HfKey mine = k;
    mine.value = now;
    const std::string theirs = hf->file + ": " + k.shown;
    if (is_given && k.key == "seq-len") {  // a training window up to the model's context
      if (now > k.value)
        throw RunError(source(k.key) + " " + hf_value_text(mine) + " is longer than the model's context (" + theirs +
                       "); give --seq-len " + hf_value_text(k) + " or less");
      continue;
    }
    if (is_given) {
      const bool same = k.kind == HfKey::Kind::kReal ? std::fabs(now - k.value) <= 1e-12 * std::fabs(k.value) : now == k.value;
      if (!same)
        throw RunError(source(k.key) + " " + hf_value_text(mine) + " disagrees with " + theirs +
                       " (the weights' shape); leave the option out, --init-from DIR takes the model's shape from its config.json");
      continue;
    }
    if (int_field) *int_field = static_cast<int64_t>(k.value), cfg.effective[k.key] = std::to_string(*int_field);
    else if (real_field) *real_field = k.value, cfg.effective[k.key] = value_text(boost::any(k.value));
    else cfg.untied_head = k.value != 0, cfg.effective[k.key] = cfg.untied_head ? "true" : "false";
  }
  if (hf->sliding_window > 0 && hf->sliding_window < cfg.seq_len)
    throw RunError(hf->file + ": sliding_window = " + std::to_string(hf->sliding_window) + " is shorter than seq-len " +
                   std::to_string(cfg.seq_len) + ": sliding-window attention is not implemented; give --seq-len " +
                   std::to_string(hf->sliding_window) + " or less");
  cfg.shape_from = hf->file;
}

}  // namespace

void check_tp_heads(const Config& cfg, int64_t tp) {
  if (tp <= 1 || cfg.model != "llama") return;
  const int64_t kv = cfg.n_kv_head > 0 ? cfg.n_kv_head : cfg.n_head;
  if (kv % tp != 0 || cfg.n_head % tp != 0)
    throw RunError("tensor parallel: tp=" + std::to_string(tp) + " does not divide n-kv-head=" + std::to_string(kv) +
                   " (and n-head=" + std::to_string(cfg.n_head) +
                   "): each rank holds whole key/value heads and the query heads that read them; choose a tp that "
                   "divides n-kv-head");
  if (cfg.ffn_hidden % tp != 0)
    throw RunError("tensor parallel: tp=" + std::to_string(tp) + " does not divide ffn-hidden=" +
                   std::to_string(cfg.ffn_hidden) + " (the SwiGLU columns are split over tp ranks)");
}

std::string Config::effective_text() const {
  std::string out;
  for (const auto& [k, v] : effective) out += k + "=" + v + "\n";
  return out;
}

std::string short_double_text(double v) {
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

uint64_t Config::hash() const {
  std::string text = effective_text();
  return XXH3_64bits(text.data(), text.size());
}

bool parse_train_args(const std::vector<std::string>& args, Config& cfg) {
  po::options_description desc = train_options(cfg);
  std::string config_file;
  po::options_description generic("General");
  generic.add_options()("help,h", "this help")(
      "config", po::value(&config_file), "INI file with the keys below (key = value)");
  po::options_description cli;
  cli.add(generic).add(desc);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(cli).run(), vm);
  } catch (const po::error& e) {
    throw RunError(std::string("command line: ") + e.what() + "; see `scaleguard-run train --help`");
  }
  if (vm.count("help")) {
    std::cout << "usage: scaleguard-run train [--config FILE.ini] [options]\n"
                 "Precedence: command line > SCALEGUARD_<KEY> environment (e.g. SCALEGUARD_DP,\n"
                 "SCALEGUARD_MICRO_BATCH) > config file > defaults.\n"
              << cli << "\n";
    return false;
  }
  // SCALEGUARD_MICRO_BATCH -> micro-batch; variables that name no option are not ours
  // (SCALEGUARD_DEV_DIR, SCALEGUARD_GPUS, ...) and are skipped.
  auto env_name = [&desc](const std::string& var) -> std::string {
    const std::string prefix = "SCALEGUARD_";
    if (var.compare(0, prefix.size(), prefix) != 0) return "";
    std::string name = var.substr(prefix.size());
    for (char& ch : name) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
    return desc.find_nothrow(name, false) ? name : "";
  };
  try {
    po::store(po::parse_environment(desc, env_name), vm);
  } catch (const po::error& e) {
    throw RunError(std::string("SCALEGUARD_* environment: ") + e.what());
  }
  if (vm.count("config")) {
    config_file = vm["config"].as<std::string>();
    std::ifstream in(config_file);
    if (!in) throw RunError("cannot read config file '" + config_file + "'");
    try {
      po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), vm);
    } catch (const po::unknown_option& e) {
      std::string key = e.get_option_name();
      int line = line_of(config_file, key);
      throw RunError(config_file + (line ? ":" + std::to_string(line) : "") + ": unknown key '" + key +
                     "'" + did_you_mean(desc, key) + "; keys are listed by `scaleguard-run train --help`");
    } catch (const po::error& e) {
      throw RunError(config_file + ": " + e.what());
    }
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw RunError(e.what());
  }
  for (const auto& [key, value] : vm)
    if (key != "help") cfg.effective[key] = value_text(value.value());

  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw RunError("invalid configuration: " + what);
  };
  std::set<std::string> preset_filled;
  if (!cfg.model_preset.empty()) apply_preset(vm, cfg, preset_filled);
  if (!cfg.init_from.empty()) apply_hf_config(vm, preset_filled, cfg);
  // --model-file: the model is the user's TorchScript module ("script"); its path stays in
  // effective["model-file"] (so it is part of the hashed configuration).
  if (!cfg.effective["model-file"].empty()) cfg.model = cfg.effective["model"] = "script";
  require(cfg.model != "script" || !cfg.effective["model-file"].empty(), "model script needs --model-file FILE.pt");
  require(cfg.model == "mlp" || cfg.model == "gpt" || cfg.model == "llama" || cfg.model == "script",
          "model must be mlp, gpt or llama (or a --model-file), not '" + cfg.model + "'");
  require(cfg.vocab_size > 0 && cfg.seq_len > 0 && cfg.n_layer > 0 && cfg.n_head > 0 && cfg.n_embd > 0 &&
              cfg.hidden > 0,
          "model sizes (vocab-size, seq-len, n-layer, n-head, n-embd, hidden) must be positive");
  require(cfg.n_embd % cfg.n_head == 0, "n-embd must be a multiple of n-head");
  require(cfg.n_kv_head >= 0 && cfg.ffn_hidden >= 0 && cfg.rope_theta > 0 && cfg.norm_eps > 0,
          "n-kv-head >= 0, ffn-hidden >= 0, rope-theta > 0, norm-eps > 0");
  if (cfg.model == "llama") {
    // Resolved values in the effective configuration: it is hashed across ranks and names
    // the model in checkpoints.
    if (cfg.n_kv_head == 0) cfg.n_kv_head = cfg.n_head;
    if (cfg.ffn_hidden == 0) cfg.ffn_hidden = scaleguard::llama_ffn_hidden(cfg.n_embd);  // the planner's rule
    cfg.effective["n-kv-head"] = std::to_string(cfg.n_kv_head);
    cfg.effective["ffn-hidden"] = std::to_string(cfg.ffn_hidden);
    require(cfg.n_head % cfg.n_kv_head == 0,
            "n-kv-head=" + std::to_string(cfg.n_kv_head) + " must divide n-head=" + std::to_string(cfg.n_head) +
                " (each key/value head serves n-head/n-kv-head query heads)");
    require((cfg.n_embd / cfg.n_head) % 2 == 0,
            "Llama's rotary embeddings need an even head width n-embd/n-head, not " +
                std::to_string(cfg.n_embd / cfg.n_head));
  }
  require(cfg.steps > 0 && cfg.global_batch > 0 && cfg.micro_batch >= 0, "steps and global-batch must be positive");
  require(cfg.lr > 0 && cfg.warmup >= 0 && cfg.grad_clip >= 0 && cfg.bucket_mb >= 0 && cfg.log_every > 0,
          "lr > 0, warmup >= 0, grad-clip >= 0, bucket-mb >= 0, log-every > 0");
  require(cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda", "device must be auto, cpu or cuda");
  require(cfg.threads >= 0 && cfg.startup_timeout > 0, "threads >= 0 and startup-timeout > 0");
  require(cfg.tp >= 1 && cfg.pp >= 1 && cfg.dp >= 0 && cfg.zero >= 0 && cfg.micro_batches >= 0,
          "tp >= 1, pp >= 1, dp >= 0, zero >= 0, micro-batches >= 0");
  require(cfg.schedule == "1f1b" || cfg.schedule == "gpipe", "schedule must be 1f1b or gpipe, not '" + cfg.schedule + "'");
  require(cfg.precision == "fp32" || cfg.precision == "bf16", "precision must be fp32 or bf16, not '" + cfg.precision + "'");
  require(cfg.recompute == "none" || cfg.recompute == "selective" || cfg.recompute == "full",
          "recompute must be none, selective or full, not '" + cfg.recompute + "'");
  require(cfg.ckpt_keep >= 0 && cfg.ckpt_interval_s >= 0 && cfg.ckpt_mtbf_hours >= 0,
          "ckpt-keep >= 0, ckpt-interval-s >= 0, ckpt-mtbf-hours >= 0");
  require(cfg.ckpt_on_error == "stop" || cfg.ckpt_on_error == "continue",
          "ckpt-on-error must be stop or continue, not '" + cfg.ckpt_on_error + "'");
  require(cfg.ckpt_local_keep >= 1, "ckpt-local-keep >= 1");
  require(cfg.ckpt_local_dir.empty() || !cfg.ckpt_dir.empty(),
          "ckpt-local-dir needs ckpt-dir (the shared tier that survives losing a node and its partner)");
  if (!cfg.ckpt_shared_every.empty()) {
    auto every = ckpt::parse_interval(cfg.ckpt_shared_every);
    require(every.ok(), every.ok() ? "" : "ckpt-shared-every: " + every.error().message + " (" + every.error().hint + ")");
  }
  if (!cfg.ckpt_every.empty()) {
    auto every = ckpt::parse_interval(cfg.ckpt_every);
    require(every.ok(), every.ok() ? "" : "ckpt-every: " + every.error().message + " (" + every.error().hint + ")");
  }
  require(cfg.data_format == "auto" || cfg.data_format == "sg" || cfg.data_format == "llmc" ||
              cfg.data_format == "u16" || cfg.data_format == "u32" || cfg.data_format == "h5" || cfg.data_format == "npy" ||
              cfg.data_format == "megatron",
          "data-format must be auto, sg, llmc, u16, u32, megatron, h5 or npy, not '" + cfg.data_format + "'");
  require(cfg.data_vocab >= 0, "data-vocab >= 0");
  require(cfg.hang_startup_s > 0 && cfg.hang_step_floor_s > 0 && cfg.hang_ckpt_floor_s > 0 && cfg.hang_eval_floor_s > 0 &&
              cfg.hang_k > 0,
          "hang-startup-s, hang-step-floor-s, hang-ckpt-floor-s, hang-eval-floor-s and hang-k must be positive");
  require(cfg.straggler_every >= 0 && cfg.straggler_threshold > 0 && cfg.straggler_windows >= 1,
          "straggler-every >= 0, straggler-threshold > 0 and straggler-windows >= 1");
  require(cfg.compress == "none" || cfg.compress.compare(0, 5, "topk:") == 0,
          "compress must be none or topk:RATIO (e.g. topk:0.01), not '" + cfg.compress + "'");
  if (cfg.compress != "none") {
    char* end = nullptr;
    const double r = std::strtod(cfg.compress.c_str() + 5, &end);
    require(cfg.compress.size() > 5 && end && *end == '\0' && r > 0 && r <= 1,
            "compress: '" + cfg.compress + "': the density after topk: must be a number in (0, 1], e.g. topk:0.01");
  }
  require(cfg.compress_momentum >= 0 && cfg.compress_momentum < 1 && cfg.compress_warmup >= -1,
          "compress-momentum in [0, 1), compress-warmup >= -1");
  require(cfg.data_vocab == 0 || cfg.data_vocab == cfg.vocab_size,
          "the data's vocabulary (data-vocab " + std::to_string(cfg.data_vocab) + ") does not match the model's vocab-size " +
              std::to_string(cfg.vocab_size) + "; set --vocab-size " + std::to_string(cfg.data_vocab));
  require(cfg.data.empty() != (cfg.synthetic == 0),
          "give exactly one of --data TOKENS.bin (from `scaleguard-run prep`) or --synthetic N");
  require(cfg.eval_every >= 0, "eval-every >= 0");
  require(cfg.eval_every == 0 || !cfg.eval_data.empty(),
          "--eval-every " + std::to_string(cfg.eval_every) + " needs --eval-data (the held-out data to evaluate on)");
  require(cfg.eval_data.empty() || cfg.eval_every > 0,
          "--eval-data needs --eval-every N: after how many optimizer steps to evaluate");
  const std::string& ls = cfg.lr_schedule;
  require(ls == "constant" || ls == "linear" || ls == "cosine" || ls == "wsd",
          "lr-schedule must be constant, linear, cosine or wsd, not '" + ls + "'");
  require(cfg.lr_decay_steps >= 0, "lr-decay-steps >= 0");
  require(cfg.lr_decay_steps == 0 || cfg.lr_decay_tokens.empty(),
          "give one decay horizon: --lr-decay-steps " + std::to_string(cfg.lr_decay_steps) + " or --lr-decay-tokens " +
              cfg.lr_decay_tokens + ", not both");
  if (!cfg.lr_decay_tokens.empty()) {
    const auto t = scaleguard::parse_count(cfg.lr_decay_tokens);
    require(t.ok() && t.value() >= 1 && t.value() <= 1e18,
            "lr-decay-tokens: '" + cfg.lr_decay_tokens + "' is not a token count from 1 to 1e18 (e.g. 20M or 1e9)");
  }
  require(cfg.lr_wsd_decay_fraction > 0 && cfg.lr_wsd_decay_fraction <= 1, "lr-wsd-decay-fraction in (0, 1]");
  const auto eval_tokens = scaleguard::parse_count(cfg.eval_tokens);
  require(eval_tokens.ok() && eval_tokens.value() >= 1 && eval_tokens.value() <= 1e15,
          "eval-tokens: '" + cfg.eval_tokens + "' is not a token count from 1 to 1e15 (e.g. 20M or 1e8)");
  return true;
}

void check_against_world(Config& cfg, int world) {
  const std::string& s = cfg.strategy;
  if (s != "auto" && s != "single" && s != "ddp" && s != "zero" && s != "pipeline" && s != "tensor" && s != "hybrid")
    throw RunError("unknown strategy '" + s + "' (auto | single | ddp | zero | pipeline | tensor | hybrid)");
  // Tensor parallel and ZeRO (issue 6 part A): what the model and optimizer can take.
  if (cfg.zero > 3)
    throw RunError("the plan asks for zero=" + std::to_string(cfg.zero) + ": ZeRO stages are 0, 1, 2 and 3");
  // ZeRO-2/3 with pipeline stages: the pipeline's micro-batch schedule would need the
  // stage's blocks gathered per micro-batch and the tied embedding summed on shards; not yet.
  if (cfg.zero >= 2 && cfg.pp > 1)
    throw RunError("ZeRO-" + std::to_string(cfg.zero) + " with pipeline stages (pp=" + std::to_string(cfg.pp) +
                   ") is not implemented: use --zero 1 with pp, or zero 2/3 with tp x dp only");
  // A TorchScript module is opaque: no layer split to place on stages, no matrices to slice,
  // and its ops are the user's (no bf16 casts or recompute of ours inside).
  if (cfg.model == "script" && (cfg.tp > 1 || cfg.pp > 1))
    throw RunError("--model-file: tensor parallel (tp=" + std::to_string(cfg.tp) + ") and pipeline parallel (pp=" +
                   std::to_string(cfg.pp) + ") need the built-in gpt model: a TorchScript module is one opaque forward "
                   "with no layers to place on stages and no matrices to slice; use data parallel (ZeRO-1, top-k)");
  if (cfg.model == "script" && (cfg.precision != "fp32" || cfg.recompute != "none"))
    throw RunError("--model-file: precision " + cfg.precision + " / recompute " + cfg.recompute +
                   " are implemented inside the built-in models only; a TorchScript module runs fp32 as saved, "
                   "recompute none");
  if (cfg.tp > 1 && cfg.model != "gpt" && cfg.model != "llama")
    throw RunError("tensor parallel (tp=" + std::to_string(cfg.tp) + ") needs the gpt or llama model, not " + cfg.model);
  check_tp_heads(cfg, cfg.tp);  // llama: tp divides n-kv-head, n-head and ffn-hidden
  if (cfg.tp > 1 && cfg.n_head % cfg.tp != 0)
    throw RunError("tensor parallel: tp=" + std::to_string(cfg.tp) + " does not divide n-head=" +
                   std::to_string(cfg.n_head) + " (each rank holds whole attention heads)");
  // Under ZeRO-1 each stage holds only its shard of the reduced wte gradient, and the two
  // stages' shards cover different elements: the tied sum across stages needs whole tensors.
  if (cfg.zero >= 1 && cfg.pp > 1 && (cfg.model == "gpt" || cfg.model == "llama") && !cfg.untied_head)
    throw RunError("ZeRO-1 with pipeline stages (pp=" + std::to_string(cfg.pp) +
                   ") needs --untied-head: the tied embedding's gradient is not summed across stages on shards yet");
  // Top-k compression replaces the dense data-parallel all-reduce of whole buckets only.
  if (cfg.compress != "none" && (cfg.tp > 1 || cfg.pp > 1 || cfg.zero > 0))
    throw RunError("--compress " + cfg.compress + " is implemented for plain data parallel only, not with tp=" +
                   std::to_string(cfg.tp) + ", pp=" + std::to_string(cfg.pp) + ", zero=" + std::to_string(cfg.zero) +
                   " (tensor/pipeline traffic is not compressed, and ZeRO-1 reduce-scatters shards); use --compress none "
                   "or plain data parallel");
  if (s == "single" && world != 1)
    throw RunError("strategy=single but " + std::to_string(world) + " ranks were launched");
  if (cfg.pp > 1 && cfg.model != "gpt" && cfg.model != "llama")
    throw RunError("pipeline parallel (pp=" + std::to_string(cfg.pp) + ") needs the gpt or llama model, not " + cfg.model);
  if (cfg.pp > cfg.n_layer)
    throw RunError("pp=" + std::to_string(cfg.pp) + " stages need at least as many blocks, but n-layer=" +
                   std::to_string(cfg.n_layer));
  const int64_t tp_pp = cfg.tp * cfg.pp;
  if (cfg.dp == 0) {
    if (world % tp_pp != 0)
      throw RunError(std::to_string(world) + " ranks cannot form a grid of tp=" + std::to_string(cfg.tp) + " x pp=" +
                     std::to_string(cfg.pp) + " x dp (not a multiple of tp*pp=" + std::to_string(tp_pp) + ")");
    cfg.dp = world / tp_pp;
  }
  if (cfg.dp * tp_pp != world)
    throw RunError("the plan says dp=" + std::to_string(cfg.dp) + " x tp=" + std::to_string(cfg.tp) + " x pp=" +
                   std::to_string(cfg.pp) + " = " + std::to_string(cfg.dp * tp_pp) + " ranks, but " +
                   std::to_string(world) + " were launched; launch tp*pp*dp ranks or fix --tp/--pp/--dp (SCALEGUARD_*)");
  if (cfg.global_batch % cfg.dp != 0)
    throw RunError("global-batch " + std::to_string(cfg.global_batch) + " is not divisible by dp=" +
                   std::to_string(cfg.dp));
  int64_t per_rank = cfg.global_batch / cfg.dp;
  if (cfg.micro_batches > 0 && cfg.micro_batch == 0) {
    if (per_rank % cfg.micro_batches != 0)
      throw RunError("micro-batches " + std::to_string(cfg.micro_batches) + " does not divide the per-rank batch " +
                     std::to_string(per_rank) + " (global-batch / dp)");
    cfg.micro_batch = per_rank / cfg.micro_batches;
  }
  if (cfg.micro_batch == 0) cfg.micro_batch = per_rank;
  if (per_rank % cfg.micro_batch != 0)
    throw RunError("micro-batch " + std::to_string(cfg.micro_batch) + " does not divide the per-rank batch " +
                   std::to_string(per_rank) + " (global-batch / dp)");
  if (cfg.micro_batches > 0 && cfg.micro_batches * cfg.micro_batch != per_rank)
    throw RunError("micro-batches " + std::to_string(cfg.micro_batches) + " x micro-batch " +
                   std::to_string(cfg.micro_batch) + " != the per-rank batch " + std::to_string(per_rank) +
                   " (global-batch / dp); give one of the two");
  cfg.micro_batches = per_rank / cfg.micro_batch;
}

}  // namespace scaleguard::run
