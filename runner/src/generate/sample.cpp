#include "generate/sample.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "checkpoint/hf_files.h"
#include "checkpoint/weights.h"
#include "config/exit_codes.h"
#include "generate/choose.h"
#include "launch/launch.h"
#include "models/model.h"
#include "scaleguard/tokenizer_module.h"

namespace scaleguard::run {
namespace {

const char* kUsage =
    "usage: scaleguard-run sample (--ckpt CKPT_DIR | --init-from DIR|FILE [shape options]) --prompt TEXT\n"
    "         [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--device auto|cpu|cuda]\n"
    "         [--tokenizer bytes|FILE|DIR] [--no-cache]\n"
    "Text from a trained model, one process (no MPI). The model's shape comes from the checkpoint or the\n"
    "directory's config.json; a .safetensors file alone needs train's shape options (--model, --n-layer, ...).\n"
    "  --ckpt DIR            a checkpoint (step-N directory) or a --ckpt-dir (its newest valid one)\n"
    "  --init-from DIR|FILE  exported or Hugging Face weights (safetensors)\n"
    "  --prompt TEXT         the text to continue (its last seq-len tokens are the context)\n"
    "  --max-new-tokens N    tokens to generate (default 64)\n"
    "  --temperature T       0 = greedy (default); > 0 samples from softmax(logits / T)\n"
    "  --top-k K             sample only among the K most likely tokens (0 = off, default)\n"
    "  --top-p P             sample only among the most likely tokens whose probabilities reach P (1 = off)\n"
    "  --seed S              the sampling seed (train's --seed; default 1337): a seed gives the same text\n"
    "  --device D            auto | cpu | cuda (train's --device)\n"
    "  --tokenizer T         bytes (byte-level, what prep makes without --tokenizer), or a tokenizer file or\n"
    "                        directory (tokenizer.json, tokenizer.model, a tiktoken file); default: the one beside\n"
    "                        the weights (or a checkpoint's --init-from directory), else bytes. Generation stops\n"
    "                        at its end-of-text token\n"
    "  --no-cache            recompute the whole window for every token instead of the llama's KV cache\n"
    "  --print-ids           also print the new tokens' ids (standard error)\n";

// Text <-> token ids: byte-level (id = byte value, what `prep` makes without a tokenizer),
// or a tokenizer file through tokenizer/'s module (SentencePiece, byte-level BPE).
class Codec {
 public:
  static std::unique_ptr<Codec> bytes() { return std::unique_ptr<Codec>(new Codec(nullptr)); }
  static std::unique_ptr<Codec> file(const std::string& path) {
    return std::unique_ptr<Codec>(new Codec(std::make_unique<tokenizer::ModuleTokenizer>(path)));
  }
  std::vector<uint32_t> encode(const std::string& text) const {
    if (tok_) return tok_->encode(text);
    std::vector<uint32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<uint32_t>& ids) const {
    if (tok_) return tok_->decode(ids);
    std::string out;
    for (uint32_t id : ids) out += static_cast<char>(id);
    return out;
  }
  uint32_t vocab_size() const { return tok_ ? tok_->vocab_size() : 256; }
  std::optional<uint32_t> eos() const {
    if (tok_ && tok_->has_eos()) return tok_->eos();
    return std::nullopt;
  }
  std::string describe() const { return tok_ ? tok_->describe() : "byte-level tokens"; }

 private:
  explicit Codec(std::unique_ptr<tokenizer::ModuleTokenizer> t) : tok_(std::move(t)) {}
  std::unique_ptr<tokenizer::ModuleTokenizer> tok_;
};

}  // namespace

int sample_main(const std::vector<std::string>& all_args) {
  // sample's own options; the rest are train's (shape keys, --init-from, --seed, --device).
  std::string ckpt, prompt, tokenizer, text;
  bool have_prompt = false, no_cache = false, print_ids = false;
  Choice choice;
  int64_t max_new = 64;
  std::vector<std::string> args;
  try {
    for (size_t i = 0; i < all_args.size(); ++i) {
      const std::string& a = all_args[i];
      const std::string name = a.substr(0, a.find('='));
      auto value = [&]() -> std::string {
        if (a.find('=') != std::string::npos) return a.substr(a.find('=') + 1);
        if (i + 1 >= all_args.size()) throw RunError(name + " needs a value");
        return all_args[++i];
      };
      auto number = [&](const std::string& v) {
        size_t used = 0;
        double d = 0;
        try {
          d = std::stod(v, &used);
        } catch (const std::exception&) {
        }
        if (used == 0 || used != v.size()) throw RunError(name + " " + v + ": not a number");
        return d;
      };
      if (name == "--help" || name == "-h") {
        std::cout << kUsage;
        return kExitOk;
      } else if (name == "--ckpt") {
        ckpt = value();
      } else if (name == "--prompt") {
        prompt = value(), have_prompt = true;
      } else if (name == "--tokenizer") {
        tokenizer = value();
      } else if (name == "--max-new-tokens") {
        max_new = static_cast<int64_t>(number(value()));
      } else if (name == "--temperature") {
        choice.temperature = number(value());
      } else if (name == "--top-k") {
        choice.top_k = static_cast<int64_t>(number(value()));
      } else if (name == "--top-p") {
        choice.top_p = number(value());
      } else if (name == "--no-cache") {
        no_cache = true;
      } else if (name == "--print-ids") {
        print_ids = true;
      } else {
        args.push_back(a);
      }
    }
    if (!have_prompt || prompt.empty()) throw RunError("sample needs --prompt TEXT (at least one token to continue)");
    if (max_new < 0) throw RunError("--max-new-tokens must be >= 0");
    if (auto bad = check_choice(choice); !bad.empty()) throw RunError(bad);
  } catch (const RunError& e) {
    std::fprintf(stderr, "scaleguard-run sample: %s (see --help)\n", e.what());
    return kExitUsage;
  }

  try {
    auto given = [&args](const std::string& key) {
      for (const std::string& a : args)
        if (a == "--" + key || a.rfind("--" + key + "=", 0) == 0) return true;
      return false;
    };
    // A checkpoint: its recorded model keys, unless given; the weights' origin for the tokenizer.
    CheckpointModel from_ckpt;
    std::string weights_dir;  // where a tokenizer beside the weights would be
    if (!ckpt.empty()) {
      if (given("init-from")) throw RunError("give --ckpt or --init-from, not both");
      from_ckpt = read_checkpoint_model(ckpt);
      for (const std::string& key : model_config_keys())
        if (auto it = from_ckpt.config.find(key); it != from_ckpt.config.end() && !given(key))
          args.push_back("--" + key + "=" + it->second);
      if (auto it = from_ckpt.config.find("init-from"); it != from_ckpt.config.end()) weights_dir = it->second;
    }
    if (!given("data") && !given("synthetic")) args.insert(args.end(), {"--synthetic", "100000"});  // no data is read
    Config cfg;
    if (!parse_train_args(args, cfg)) return kExitOk;
    if (ckpt.empty() && cfg.init_from.empty()) throw RunError("sample needs --ckpt CKPT_DIR or --init-from DIR|FILE");
    if (!cfg.init_from.empty()) weights_dir = cfg.init_from;
    if (cfg.model != "gpt" && cfg.model != "llama")
      throw RunError("sample generates with the gpt and llama models, not " + cfg.model);

    // The device: as train chooses it, without a silent CPU fallback on a GPU node.
    std::string evidence;
    const bool torch_cuda = torch::cuda::is_available();
    at::Device device(at::kCPU);
    if (cfg.device == "cuda" || (cfg.device == "auto" && torch_cuda)) {
      if (!torch_cuda) throw RunError("--device cuda but this LibTorch sees no CUDA device (a CPU-only build, or none visible)");
      device = at::Device(at::kCUDA, 0);
    } else if (cfg.device == "auto" && gpu_visible(&evidence)) {
      throw RunError("a GPU is visible (" + evidence + ") but this LibTorch cannot use it: pass --device cpu to "
                     "sample on the CPU on purpose");
    }

    // The tokenizer: bytes, or a file beside the weights (or the checkpoint's --init-from
    // directory), or the one named.
    if (tokenizer.empty()) {
      auto found = tokenizer_files_in(weights_dir);
      tokenizer = found.empty() ? "bytes" : found.front();
    }
    std::unique_ptr<Codec> codec;
    if (tokenizer == "bytes") {
      codec = Codec::bytes();
      if (cfg.vocab_size != 256)
        throw RunError("a vocabulary of " + std::to_string(cfg.vocab_size) + " tokens is not byte-level (256): give "
                       "the model's --tokenizer");
    } else {
      try {
        codec = Codec::file(tokenizer);
      } catch (const std::runtime_error& e) {
        throw RunError("--tokenizer " + tokenizer + ": " + e.what());
      }
      if (codec->vocab_size() > cfg.vocab_size)
        throw RunError(tokenizer + " has " + std::to_string(codec->vocab_size()) + " tokens, more than the model's "
                       "vocabulary of " + std::to_string(cfg.vocab_size) + ": not the model's tokenizer");
    }

    // The model, its weights, the device.
    auto model = make_model(cfg);
    const auto params = sorted_parameters(*model);
    std::string source;
    if (!ckpt.empty()) {
      if (auto e = load_checkpoint_params(from_ckpt.dir, params); !e.empty()) throw RunError(e);
      source = from_ckpt.dir + " (step " + std::to_string(from_ckpt.step) + ")";
    } else {
      std::vector<LoadTarget> targets;
      for (auto& [name, p] : params) targets.push_back({name, p, p.sizes().vec(), Slice{}});
      std::vector<std::string> unused, skipped;
      if (auto e = load_safetensors(cfg.init_from, targets, &unused, &skipped); !e.empty()) throw RunError(e);
      if (!unused.empty())
        throw RunError(cfg.init_from + ": holds tensor '" + unused.front() + "', which this model does not have");
      if (auto e = check_skipped_buffers(cfg.init_from, skipped, cfg); !e.empty()) throw RunError(e);
      if (!skipped.empty()) std::fprintf(stderr, "scaleguard-run sample: note: %s\n", skipped_note(skipped).c_str());
      source = cfg.init_from + (cfg.shape_from.empty() ? "" : " (shape from " + cfg.shape_from + ")");
    }
    model->to(device);
    model->set_evaluating(true);
    at::NoGradGuard no_grad;

    std::vector<int64_t> ids;
    for (uint32_t id : codec->encode(prompt)) ids.push_back(id);
    const size_t prompt_tokens = ids.size();
    if (ids.empty()) throw RunError("the prompt encodes to no tokens");
    // What is printed: the prompt as given, then the text the new tokens add to the prompt's
    // (decoded whole each time: a character may span tokens, and SentencePiece spaces
    // depend on what precedes them), written as soon as it extends what was written.
    auto decode_all = [&] { return codec->decode(std::vector<uint32_t>(ids.begin(), ids.end())); };
    const std::string prompt_text = decode_all();
    std::string written;
    auto write_new = [&](bool last) {
      const std::string all = decode_all();
      if (all.compare(0, prompt_text.size(), prompt_text) != 0) return;  // the prompt's text changed: wait
      const std::string text = all.substr(prompt_text.size());
      if (text.compare(0, written.size(), written) == 0) {
        std::cout << text.substr(written.size()) << std::flush;
        written = text;
      } else if (last) {
        std::cout << "\n" << text << std::flush;  // never seen: what was written was taken back
      }
    };
    const std::optional<uint32_t> eos = codec->eos();
    bool stopped = false;
    std::string new_ids;
    std::mt19937_64 rng(cfg.seed);
    const bool cached = !no_cache && model->supports_kv_cache();
    KvCache cache;
    std::cout << prompt << std::flush;
    const auto t0 = std::chrono::steady_clock::now();
    int64_t recomputed = 0;  // tokens generated after the window filled (no cache past seq-len)
    for (int64_t n = 0; n < max_new; ++n) {
      at::Tensor logits;  // (1, T, V): the last row predicts the next token
      const int64_t total = static_cast<int64_t>(ids.size());
      if (cached && total <= cfg.seq_len) {
        // The cache holds positions [0, cache.length); feed the rest (the prompt, then one token).
        std::vector<int64_t> fresh(ids.begin() + cache.length, ids.end());
        at::Tensor x = at::tensor(fresh, at::kLong).view({1, static_cast<int64_t>(fresh.size())}).to(device);
        logits = model->forward_cached(x, cache);
      } else {
        // Recompute: the last seq-len tokens, from position 0 (a sliding window past seq-len).
        const int64_t T = std::min<int64_t>(total, cfg.seq_len);
        std::vector<int64_t> window(ids.end() - T, ids.end());
        at::Tensor x = at::tensor(window, at::kLong).view({1, T}).to(device);
        logits = model->forward(x);
        if (cached || total > cfg.seq_len) ++recomputed;
      }
      at::Tensor row = logits.select(1, logits.size(1) - 1).reshape({-1}).to(at::kCPU, at::kFloat).contiguous();
      std::vector<float> v(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
      const int64_t next = choose_token(v, choice, rng);
      new_ids += (new_ids.empty() ? "" : ",") + std::to_string(next);
      if (eos && next == static_cast<int64_t>(*eos)) {  // the end of the text: not printed
        stopped = true;
        break;
      }
      if (next >= static_cast<int64_t>(codec->vocab_size()))
        throw RunError("the model chose token " + std::to_string(next) + ", which " + codec->describe() +
                       " does not have (vocabulary " + std::to_string(codec->vocab_size()) + ")");
      ids.push_back(next);
      write_new(false);
    }
    write_new(true);
    std::cout << "\n" << std::flush;
    if (print_ids) std::fprintf(stderr, "scaleguard-run sample: new token ids %s\n", new_ids.c_str());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string how = choice.temperature == 0 ? "greedy" : "temperature " + short_double_text(choice.temperature);
    if (choice.temperature > 0 && choice.top_k > 0) how += ", top-k " + std::to_string(choice.top_k);
    if (choice.temperature > 0 && choice.top_p < 1) how += ", top-p " + short_double_text(choice.top_p);
    if (choice.temperature > 0) how += ", seed " + std::to_string(cfg.seed);
    std::string mode = cached ? "KV cache" : "recomputing the window";
    if (recomputed > 0 && cached) mode += "; " + std::to_string(recomputed) + " tokens past seq-len recomputed";
    const long long made = static_cast<long long>(ids.size() - prompt_tokens);
    std::fprintf(stderr,
                 "scaleguard-run sample: %lld new tokens%s after a %zu-token prompt from %s: %s model, %s, %s, %s, %s, "
                 "%.3f s\n",
                 made, stopped ? " (then the end-of-text token)" : "", prompt_tokens, source.c_str(), cfg.model.c_str(),
                 device.str().c_str(), codec->describe().c_str(), how.c_str(), mode.c_str(), s);
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaleguard-run sample: %s\n", e.what());
    return kExitError;
  }
}

}  // namespace scaleguard::run
