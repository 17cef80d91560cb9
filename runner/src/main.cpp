// scaleguard-run: what `srun --mpi=pmix` or `mpirun` starts on every rank.
//   scaleguard-run prep --input TEXT|JSONL... --output TOKENS.bin [--tokenizer FILE] [--format sg|llmc|llmc-u32|megatron]
//   scaleguard-run train --config FILE.ini [--data TOKENS.bin] [--model mlp|gpt] ...
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "data/arrays.h"
#include "checkpoint/checkpointing.h"
#include "comm/comm.h"
#include "config/config.h"
#include "config/exit_codes.h"
#include "comm/grid.h"
#include "health/health.h"
#include "launch/launch.h"
#include "data/tokens.h"
#include "train/trainer.h"
#include "checkpoint/weights.h"
#include "generate/sample.h"
#include "scaleguard/tokenizer_module.h"

namespace po = boost::program_options;
using namespace scaleguard::run;

namespace {

int prep_main(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string output, format = "sg", tokenizer_path, field = "text", eos;
  unsigned threads = 0;
  po::options_description desc("scaleguard-run prep: token file from text and JSONL files");
  desc.add_options()("help,h", "this help")("input", po::value(&inputs)->multitoken()->required(),
                                             "text files (one document each) and *.jsonl files (a document per line)")(
      "output", po::value(&output)->required(), "token file (megatron: PREFIX, writes PREFIX.bin and PREFIX.idx)")(
      "format", po::value(&format)->default_value(format),
      "sg (scaleguard's; 1-byte tokens without --tokenizer, else uint16; the default without --tokenizer) | llmc (llm.c; uint16, or uint32 above "
      "65536 tokens; the default with --tokenizer) | llmc-u32 (llm.c Llama-3 header, uint32) | megatron (.bin/.idx; with --tokenizer)")(
      "tokenizer", po::value(&tokenizer_path),
      "tokenizer.json (byte-level BPE), a tiktoken ranks file, a SentencePiece tokenizer.model, or a model "
      "directory; without it: bytes")("field", po::value(&field)->default_value(field),
                                       "the JSONL field holding a document's text (with --tokenizer)")(
      "eos", po::value(&eos), "the token after each document: a token's text or id, or none (default: the tokenizer's)")(
      "threads", po::value(&threads)->default_value(0), "tokenizing threads (0: every core)");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return kExitOk;
    }
    po::notify(vm);
    if (!tokenizer_path.empty()) {
      std::vector<const char*> in;
      for (const auto& i : inputs) in.push_back(i.c_str());
      // llm.c's layout by default: it holds uint16 or uint32 ids as the vocabulary needs.
      const std::string fmt = vm["format"].defaulted() ? "llmc" : format;
      const sg_tokenizer_prep_result s = scaleguard::tokenizer::prep_in_module(
          {tokenizer_path.c_str(), in.data(), in.size(), output.c_str(), fmt.c_str(), field.c_str(), eos.c_str(), threads});
      std::fprintf(stderr, "scaleguard-run prep: %s\n", s.description);
      std::fprintf(stderr,
                   "scaleguard-run prep: %llu tokens (%u-byte ids, vocabulary %u) from %llu documents, %.1f MB in %.2f s: "
                   "%.1f MB/s on %u threads -> %s\n",
                   static_cast<unsigned long long>(s.tokens), s.token_bytes, s.vocab_size,
                   static_cast<unsigned long long>(s.documents), s.input_bytes / 1e6, s.seconds,
                   s.input_bytes / 1e6 / std::max(s.seconds, 1e-9), s.threads, s.written);
      if (s.replaced_utf8)
        std::fprintf(stderr, "scaleguard-run prep: %llu invalid UTF-8 sequences replaced by U+FFFD\n",
                     static_cast<unsigned long long>(s.replaced_utf8));
      return kExitOk;
    }
    if (vm.count("eos") || !vm["field"].defaulted() || format == "megatron")
      throw RunError("prep: --eos, --field and --format megatron need --tokenizer");
    uint64_t n = prep_tokens(inputs, output, format);
    std::fprintf(stderr, "scaleguard-run prep: %llu tokens from %zu files -> %s\n", static_cast<unsigned long long>(n),
                 inputs.size(), output.c_str());
    return kExitOk;
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard-run prep: %s (see --help)\n", e.what());
    return kExitUsage;
  } catch (const RunError& e) {
    std::fprintf(stderr, "scaleguard-run %s\n", e.what());
    return kExitError;
  } catch (const std::runtime_error& e) {  // the tokenizer's errors
    std::fprintf(stderr, "scaleguard-run prep: %s\n", e.what());
    return kExitError;
  }
}

std::map<std::string, std::string> parse_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// Every rank must train the same configuration: compare hashes; on a mismatch rank 0's
// text is broadcast so each differing rank can say which keys differ.
std::string config_mismatch(const Launch& l, const Config& cfg) {
  uint64_t mine = cfg.hash();
  std::vector<uint64_t> all(static_cast<size_t>(l.world));
  MPI_Request req;
  MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, l.world_comm, &req);
  wait_or_abort(l, &req, "configuration hash exchange");
  bool same = true;
  for (uint64_t h : all) same = same && h == all[0];
  if (same) return "";
  std::string text = cfg.effective_text();
  long len = static_cast<long>(text.size());
  MPI_Ibcast(&len, 1, MPI_LONG, 0, l.world_comm, &req);
  wait_or_abort(l, &req, "configuration exchange");
  std::string root(static_cast<size_t>(len), '\0');
  if (l.rank == 0) root = text;
  MPI_Ibcast(root.data(), static_cast<int>(len), MPI_CHAR, 0, l.world_comm, &req);
  wait_or_abort(l, &req, "configuration exchange");
  if (mine == all[0]) return "";
  auto a = parse_lines(root), b = parse_lines(text);
  std::string diff;
  for (const auto& [k, v] : b)
    if (a[k] != v) diff += (diff.empty() ? "" : ", ") + k + "=" + v + " (rank 0: " + a[k] + ")";
  return "configuration differs from rank 0: " + diff +
         "; every rank must get the same file, options and SCALEGUARD_* environment";
}

HealthSettings health_settings(const Config& cfg) {
  HealthSettings h;
  h.watchdog = cfg.hang_detect;
  h.dir = !cfg.health_dir.empty() ? cfg.health_dir : cfg.ckpt_dir.empty() ? "" : cfg.ckpt_dir + "/health";
  h.limits.startup_s = cfg.hang_startup_s;
  h.limits.step_floor_s = cfg.hang_step_floor_s;
  h.limits.ckpt_floor_s = cfg.hang_ckpt_floor_s;
  h.limits.eval_floor_s = cfg.hang_eval_floor_s;
  h.limits.k = cfg.hang_k;
  h.straggler.every = static_cast<long>(cfg.straggler_every);
  h.straggler.threshold = cfg.straggler_threshold;
  h.straggler.windows = static_cast<int>(cfg.straggler_windows);
  return h;
}

// The one start-up line without --verbose: model, strategy and layout, ranks, data, steps,
// checkpoints, and the configuration's hash (--verbose prints what it hashes).
std::string start_line(const Config& cfg, const Launch& l, bool cuda, int threads) {
  std::string model = cfg.model == "script" ? "script " + cfg.effective.at("model-file")
                                            : cfg.model + " (" + std::to_string(cfg.n_layer) + " layers x " +
                                                  std::to_string(cfg.n_embd) + ", " + std::to_string(cfg.n_head) +
                                                  " heads, seq " + std::to_string(cfg.seq_len) + ", vocab " +
                                                  std::to_string(cfg.vocab_size) + ")";
  std::string layout = "dp=" + std::to_string(cfg.dp) + " tp=" + std::to_string(cfg.tp) + " pp=" + std::to_string(cfg.pp);
  if (cfg.zero > 0) layout += " ZeRO-" + std::to_string(cfg.zero);
  if (cfg.pp > 1) layout += " " + cfg.schedule;
  if (cfg.compress != "none") layout += " " + cfg.compress;
  if (cfg.precision != "fp32") layout += " " + cfg.precision;
  std::string data = cfg.synthetic > 0 ? "synthetic (" + std::to_string(cfg.synthetic) + " tokens)"
                                       : cfg.data + (cfg.data_format == "auto" ? "" : " (" + cfg.data_format + ")");
  std::string ckpt = "no checkpoints";
  if (!cfg.ckpt_dir.empty()) {
    std::string every = !cfg.ckpt_every.empty() ? cfg.ckpt_every
                        : cfg.ckpt_interval_s > 0 ? short_double_text(cfg.ckpt_interval_s) + " s"
                                                  : "auto";
    ckpt = "checkpoints " + cfg.ckpt_dir + " every " + every + ", keep " + std::to_string(cfg.ckpt_keep);
  }
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cfg.hash()));
  return "train " + model + " | strategy " + cfg.strategy + ": " + layout + " | " + std::to_string(l.world) +
         " ranks on " + std::to_string(l.nodes) + (l.nodes == 1 ? " node" : " nodes") + ", " + (cuda ? "cuda" : "cpu") +
         ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per rank | data " + data + " | " +
         std::to_string(cfg.steps) + " steps of " + std::to_string(cfg.global_batch) + " samples | " + ckpt +
         " | config " + hash + " (--verbose: all of it)";
}

int train_main(int argc, char** argv, const std::vector<std::string>& args) {
  install_stop_handlers();  // before anything slow: a signal during start-up still counts
  Config cfg;
  std::string error;
  try {
    if (!parse_train_args(args, cfg)) return kExitOk;  // --help
  } catch (const RunError& e) {
    error = e.what();
  }
  Launch l = init_mpi(&argc, &argv, cfg.startup_timeout);
  auto fail = [] {
    MPI_Finalize();
    return kExitError;
  };
  if (any_failed(l, error, "configuration")) return fail();
  if (any_failed(l, config_mismatch(l, cfg), "configuration check")) return fail();
  try {
    check_against_world(cfg, l.world);
    error = check_launcher_env(l);
  } catch (const RunError& e) {
    error = e.what();
  }
  if (any_failed(l, error, "plan")) return fail();

  int threads = choose_threads(l, static_cast<int>(cfg.threads));
  at::set_num_threads(threads);
  // Which device trains. A GPU this build cannot use must not silently leave the job
  // training on the CPU: device=auto fails then, --device cpu trains on the CPU on purpose.
  std::string gpu_evidence;
  const bool gpu_seen = gpu_visible(&gpu_evidence);
  bool cuda = false;
#ifdef SCALEGUARD_WITH_NCCL
  const bool torch_cuda = torch::cuda::is_available();
  cuda = cfg.device == "cuda" || (cfg.device == "auto" && torch_cuda);
  if (cuda && !torch_cuda)
    error = "device=cuda but no CUDA device is visible to this rank (CUDA_VISIBLE_DEVICES, driver)";
  else if (cfg.device == "auto" && gpu_seen && !torch_cuda)
    error = "a GPU is visible (" + gpu_evidence + ") but LibTorch cannot use it (driver or CUDA runtime mismatch?): "
            "fix the node, or pass --device cpu to train on the CPU on purpose";
#else
  if (cfg.device == "cuda")
    error = "device=cuda but this scaleguard-run was built without the NCCL backend (a CPU-only LibTorch, or no "
            "NCCL at build time; see runner/README.md)";
  else if (cfg.device == "auto" && gpu_seen)
    error = "a GPU is visible (" + gpu_evidence + ") but this scaleguard-run was built without the NCCL backend "
            "(a CPU-only LibTorch, or no NCCL at build time): device=auto would train on the CPU. Rebuild against a "
            "CUDA LibTorch and NCCL (runner/README.md), or pass --device cpu to train on the CPU on purpose";
#endif
  cuda = cuda && error.empty();
  if (any_failed(l, error, "device")) return fail();
  // Start-up: one line from rank 0 of what trains; every rank's line, the whole effective
  // configuration and the setup details (trainer, checkpoints) only with --verbose.
  if (cfg.verbose)
    std::fprintf(stderr, "scaleguard-run: rank %d/%d local %d/%d node %d/%d host %s pid %d device %s threads %d\n",
                 l.rank, l.world, l.local_rank, l.local_size, l.node, l.nodes, l.host.c_str(),
                 static_cast<int>(getpid()), cuda ? "cuda" : "cpu", threads);
  if (l.rank == 0) {
    if (cfg.verbose)
      std::fprintf(stderr, "scaleguard-run: effective configuration (hash %016llx):\n%s",
                   static_cast<unsigned long long>(cfg.hash()), cfg.effective_text().c_str());
    else
      std::fprintf(stderr, "scaleguard-run: %s\n", start_line(cfg, l, cuda, threads).c_str());
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads * l.local_size > online && !std::getenv("OMP_WAIT_POLICY"))
      std::fprintf(stderr, "scaleguard-run: warning: %d threads x %d local ranks > %ld cores; set "
                           "OMP_WAIT_POLICY=passive or fewer --threads (spinning threads collapse throughput)\n",
                   threads, l.local_size, online);
  }

  int rc = kExitError;
  {
    // The hang watchdog from here on (start-up: data, model, resume), and the straggler check.
    // Declared first: destroyed after the trainer, before MPI_Finalize.
    std::unique_ptr<Health> health = std::make_unique<Health>(health_settings(cfg), l);  // collective
    if (l.rank == 0 && cfg.verbose)
      std::fprintf(stderr, "scaleguard-run: hang watchdog %s; heartbeats %s; straggler windows of %lld steps\n",
                   cfg.hang_detect ? ("on, start-up limit " + health->limit_text(Section::kStartup)).c_str() : "off",
                   health->dir().empty() ? "none (no --health-dir or --ckpt-dir)" : health->dir().c_str(),
                   static_cast<long long>(cfg.straggler_every));
    std::unique_ptr<Trainer> trainer;
    ProcessGrid grid;
    try {
      // HDF5 / npy arrays (arrays.h): the trainer samples their rows; the token view is unused.
      std::shared_ptr<ArrayData> arrays;
      if (cfg.synthetic == 0 && ArrayData::applies(cfg.data, cfg.data_format)) {
        arrays = ArrayData::open(cfg.data, cfg.data_format);
        if (l.rank == 0 && cfg.verbose) std::fprintf(stderr, "scaleguard-run: data %s\n", arrays->describe().c_str());
      }
      Tokens tokens = arrays || cfg.synthetic > 0
                          ? Tokens::synthetic(arrays ? static_cast<uint64_t>(cfg.seq_len) + 1 : static_cast<uint64_t>(cfg.synthetic),
                                              cfg.vocab_size, cfg.seed)
                          : Tokens::open(cfg.data, cfg.vocab_size, cfg.data_format, cfg.data_vocab);
      if (tokens.size() <= static_cast<uint64_t>(cfg.seq_len))
        throw RunError("the data has " + std::to_string(tokens.size()) + " tokens, fewer than seq-len + 1 = " +
                       std::to_string(cfg.seq_len + 1));
      std::unique_ptr<Communicator> world;
      at::Device device(at::kCPU);
#ifdef SCALEGUARD_WITH_NCCL
      if (cuda) {  // one GPU per local rank
        int gpu = l.local_rank % static_cast<int>(torch::cuda::device_count());
        device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpu));
        world = make_nccl_communicator(MPI_COMM_WORLD, gpu, cfg.startup_timeout);
      }
#endif
      if (!world) world = make_mpi_communicator(MPI_COMM_WORLD);
      if (check_comm_requested()) {
        // bf16: the pipeline's stage-to-stage tensors are bf16 (pipeline.cpp).
        std::vector<at::ScalarType> dtypes{at::kFloat};
        if (cfg.precision == "bf16") dtypes.push_back(at::kBFloat16);
        std::string which;
        for (at::ScalarType d : dtypes) which += (which.empty() ? " of dtype " : " or ") + std::string(c10::toString(d));
        world = make_device_checked_communicator(std::move(world), device, dtypes);
        if (l.rank == 0)
          std::fprintf(stderr, "scaleguard-run: communicator device check on (SCALEGUARD_CHECK_COMM): only %s tensors%s\n",
                       device.str().c_str(), device.is_cpu() ? which.c_str() : "");
      }
      grid = make_grid(std::move(world), static_cast<int>(cfg.tp), static_cast<int>(cfg.dp), static_cast<int>(cfg.pp));
      trainer = std::make_unique<Trainer>(cfg, l, grid, std::move(tokens), device, std::move(arrays));
      trainer->health = health.get();
    } catch (const std::exception& e) {  // RunError, or torch's c10::Error for a bad shape
      error = e.what();
    }
    // On failure fall through: the communicators must be freed before MPI_Finalize.
    std::unique_ptr<Checkpointing> ckpt;  // declared after the trainer: freed before it
    bool ready = !any_failed(l, error, "data and model");
    if (ready && !cfg.ckpt_dir.empty()) {
      ckpt = std::make_unique<Checkpointing>(cfg, l);  // collective
      ready = !any_failed(l, ckpt->prepare(), "checkpoint directory") &&
              !any_failed(l, ckpt->resume(*trainer), "checkpoint resume") &&
              !any_failed(l, ckpt->reserve(*trainer), "checkpoint host memory");
      trainer->hooks.after_step = [&ckpt](Trainer& t, bool stopping) { ckpt->after_step(t, stopping); };
      trainer->hooks.before_update = [&ckpt](const at::Tensor& x) { ckpt->before_update(x); };
    }
    // --init-from: the starting weights, unless a checkpoint was resumed (it is newer: the run
    // was started from these weights before and has trained since).
    if (ready && !cfg.init_from.empty()) {
      if (ckpt && ckpt->resumed()) {
        if (l.rank == 0)
          std::fprintf(stderr, "scaleguard-run: --init-from %s ignored: resumed from the checkpoint in %s, which wins\n",
                       cfg.init_from.c_str(), cfg.ckpt_dir.c_str());
      } else {
        std::string init_error;
        try {
          init_error = init_from(*trainer, l);  // collective
        } catch (const std::exception& e) {
          init_error = e.what();
        }
        ready = !any_failed(l, init_error, "--init-from");
      }
    }
    if (ready) {
      try {
        rc = trainer->run();
      } catch (const CheckpointStop& e) {
        // Every rank throws this at the same step: a clean exit, no abort needed.
        if (l.rank == 0) std::fprintf(stderr, "scaleguard-run: %s\n", e.what());
        rc = kExitError;
      } catch (const std::exception& e) {
        // Peers may be inside a collective already: only an abort ends them reliably.
        std::fprintf(stderr, "scaleguard-run: rank %d: error during training: %s\n", l.rank, e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, kExitError);
      }
    }
  }
  MPI_Finalize();
  return rc;
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: scaleguard-run prep --input TEXT|JSONL... --output TOKENS.bin [--tokenizer FILE] [--format sg|llmc|llmc-u32|megatron]\n"
               "       scaleguard-run train [--config FILE.ini] [options]   (--help lists them)\n"
               "       scaleguard-run export --ckpt DIR --output OUT/ [--dtype fp32|bf16] [--max-shard-gb G]\n"
               "       scaleguard-run logits [train options] --init-from WEIGHTS --tokens T0,T1,... --output FILE\n"
               "       scaleguard-run sample --ckpt DIR | --init-from DIR --prompt TEXT [--max-new-tokens N] "
               "[--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
               "Start train under mpirun/srun --mpi=pmix, one rank per GPU or CPU slot.\n");
}

}  // namespace

int main(int argc, char** argv) {
  tune_malloc();
  if (argc < 2) {
    usage(stderr);
    return kExitUsage;
  }
  std::string verb = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (verb == "prep") return prep_main(args);
  if (verb == "train") return train_main(argc, argv, args);
  if (verb == "export") return export_main(args);
  if (verb == "logits") return logits_main(args);
  if (verb == "sample") return sample_main(args);
  if (verb == "--help" || verb == "-h" || verb == "help") {
    usage(stdout);
    return kExitOk;
  }
  std::fprintf(stderr, "scaleguard-run: unknown verb '%s'\n", verb.c_str());
  usage(stderr);
  return kExitUsage;
}
