#include "checkpoint/weights.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>  // header-only, in the default include path (ckpt links the target)
#include <set>
#include <sstream>

#include "ckpt/commit_comm.h"
#include "ckpt/reader.h"
#include "checkpoint/hf_files.h"
#include "ckpt/store.h"
#include "config/exit_codes.h"
#include "models/model.h"
#include "scaleguard/safetensors.h"
#include "train/trainer.h"

namespace scaleguard::run {
namespace st = scaleguard::safetensors;
namespace ck = scaleguard::ckpt;
namespace po = boost::program_options;
using json = nlohmann::json;

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// The checkpoint's model configuration: model.config, else the keys of model.name
// ("model=gpt vocab-size=256 ..."), which every manifest has.
std::map<std::string, std::string> config_of(const ck::Manifest& m) {
  if (!m.model_config.empty()) return m.model_config;
  std::map<std::string, std::string> out;
  std::istringstream in(m.model_name);
  std::string word;
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  return out;
}

int64_t int_key(const std::map<std::string, std::string>& c, const std::string& key) {
  auto it = c.find(key);
  if (it == c.end() || it->second.empty()) throw RunError("the checkpoint's model configuration has no '" + key + "'");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw RunError("the checkpoint's model configuration has " + key + "=" + it->second + ", not an integer");
  }
}

double real_key(const std::map<std::string, std::string>& c, const std::string& key) {
  auto it = c.find(key);
  if (it == c.end() || it->second.empty()) throw RunError("the checkpoint's model configuration has no '" + key + "'");
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    throw RunError("the checkpoint's model configuration has " + key + "=" + it->second + ", not a number");
  }
}

at::ScalarType torch_dtype(const std::string& st_dtype) {
  if (st_dtype == "F32") return at::kFloat;
  if (st_dtype == "BF16") return at::kBFloat16;
  if (st_dtype == "F16") return at::kHalf;
  return at::ScalarType::Undefined;
}

// A checkpoint step directory (holds manifest.json), or a --ckpt-dir root: its newest valid one.
ck::Reader open_checkpoint(const std::string& dir) {
  struct stat sb {};
  if (::stat((dir + "/manifest.json").c_str(), &sb) == 0) {
    auto r = ck::Reader::open(dir, {});
    if (!r) throw RunError(r.error().str());
    return std::move(r).value();
  }
  // The store says "resuming from" the one it opens, as training does; export names the
  // checkpoint it exports itself (export_main), so only the skipped ones are logged here.
  ck::Store store(dir, [](const std::string& line) {
    if (line.rfind("resuming from ", 0) != 0) std::fprintf(stderr, "scaleguard-run export: %s\n", line.c_str());
  });
  auto r = store.open_newest_valid({});
  if (!r) throw RunError(r.error().str());
  if (!r->has_value())
    throw RunError(dir + ": no committed checkpoint here (give a step-N directory or a --ckpt-dir that holds one)");
  return std::move(*r.value());
}

}  // namespace

const std::vector<std::string>& model_config_keys() {
  static const std::vector<std::string> keys{"model",     "vocab-size", "seq-len",    "n-layer",  "n-head",
                                             "n-kv-head", "n-embd",     "ffn-hidden", "hidden",   "rope-theta",
                                             "norm-eps",  "untied-head"};
  return keys;
}

std::string load_safetensors(const std::string& from, std::vector<LoadTarget>& targets, std::vector<std::string>* unused,
                             std::vector<std::string>* skipped) {
  auto w = st::Weights::open(from);
  if (!w) return w.error().str();
  const std::string& origin = w->origin();
  std::set<std::string> used;
  try {
    at::NoGradGuard no_grad;
    for (LoadTarget& t : targets) {
      const st::Weights::Entry* e = w->find(t.name);
      if (!e)
        return origin + ": has no tensor '" + t.name + "' (the model needs it, shape " + shape_text(t.global_shape) +
               "; weights of another model or configuration?)";
      const st::TensorInfo& info = *e->info;
      const std::string where = e->file->path() + ": tensor '" + t.name + "'";
      if (info.shape != t.global_shape)
        return where + " has shape " + shape_text(info.shape) + " but the model's is " + shape_text(t.global_shape);
      const at::ScalarType dtype = torch_dtype(info.dtype);
      if (dtype == at::ScalarType::Undefined)
        return where + " is " + info.dtype + "; --init-from reads F32, BF16 or F16 weights";
      // A view of the mapped bytes (no copy): only the pages of this rank's slice are read.
      const uint8_t* data = e->file->data(info);
      at::Tensor global;
      const auto opts = at::TensorOptions().dtype(dtype);
      if (reinterpret_cast<uintptr_t>(data) % st::dtype_size(info.dtype) == 0) {
        global = at::from_blob(const_cast<uint8_t*>(data), info.shape, opts);
      } else {  // an unaligned tensor (legal in the format, never written by ours): copy it
        global = at::empty(info.shape, opts);
        std::memcpy(global.data_ptr(), data, info.end - info.begin);
      }
      at::Tensor piece = take_slice(global, t.slice);
      if (t.flat_offset >= 0) {  // ZeRO-3: this rank's range of the flattened piece
        if (t.flat_offset + t.local.numel() > piece.numel())
          return where + ": this rank's shard [" + std::to_string(t.flat_offset) + ", +" + std::to_string(t.local.numel()) +
                 ") lies outside its " + std::to_string(piece.numel()) + " elements";
        piece = piece.reshape({-1}).narrow(0, t.flat_offset, t.local.numel());
      }
      if (piece.sizes() != t.local.sizes())
        return where + ": this rank's slice has shape " + shape_text(piece.sizes().vec()) + " but it holds " +
               shape_text(t.local.sizes().vec());
      t.local.copy_(piece);  // converts to the parameter's dtype and device
      used.insert(t.name);
    }
  } catch (const std::exception& e) {
    return origin + ": " + e.what();
  }
  for (const std::string& n : w->names()) {
    if (used.count(n)) continue;
    if (is_buffer_name(n)) {
      if (skipped) skipped->push_back(n);
    } else if (unused) {
      unused->push_back(n);
    }
  }
  return "";
}

bool is_buffer_name(const std::string& name) {
  static const std::string inv_freq = "rotary_emb.inv_freq";
  return name == inv_freq ||
         (name.size() > inv_freq.size() && name.compare(name.size() - inv_freq.size() - 1, std::string::npos, "." + inv_freq) == 0);
}

std::string check_skipped_buffers(const std::string& from, const std::vector<std::string>& skipped, const Config& cfg) {
  if (skipped.empty() || cfg.model != "llama") return "";
  auto w = st::Weights::open(from);
  if (!w) return w.error().str();
  const int64_t D = cfg.n_embd / cfg.n_head;
  for (const std::string& name : skipped) {
    const st::Weights::Entry* e = w->find(name);
    if (!e) continue;
    const st::TensorInfo& info = *e->info;
    const at::ScalarType dtype = torch_dtype(info.dtype);
    const std::string where = e->file->path() + ": buffer '" + name + "'";
    if (dtype == at::ScalarType::Undefined) return where + " is " + info.dtype + ", not F32, BF16 or F16";
    if (info.shape != std::vector<int64_t>{D / 2})
      return where + " has shape " + shape_text(info.shape) + ", but the model's head width " + std::to_string(D) +
             " has " + std::to_string(D / 2) + " rotary frequencies";
    at::Tensor got = at::empty(info.shape, at::TensorOptions().dtype(dtype));
    std::memcpy(got.data_ptr(), e->file->data(info), info.end - info.begin);
    got = got.to(at::kFloat);
    // The runner's table (Llama's Rope): theta^(-2i/D). A bf16 save rounds it to 8 bits.
    at::Tensor want = 1.0 / at::pow(cfg.rope_theta, at::arange(0, D, 2, at::kLong).to(at::kFloat) / D);
    const double tol = dtype == at::kFloat ? 1e-5 : 1e-2;
    at::Tensor rel = ((got - want).abs() / want).max();
    if (rel.item<double>() > tol) {
      char text[160];
      std::snprintf(text, sizeof text, "rope_theta %.9g gives (largest relative difference %.3g)", cfg.rope_theta,
                    rel.item<double>());
      return where + " holds other rotary frequencies than " + text +
             ": another rope_theta, or rope scaling, which the llama model does not implement";
    }
  }
  return "";
}

std::string skipped_note(const std::vector<std::string>& skipped) {
  if (skipped.empty()) return "";
  std::string note = "skipped " + std::to_string(skipped.size()) + " non-parameter buffer" + (skipped.size() == 1 ? "" : "s") +
                     " in the weights (" + skipped.front() + (skipped.size() > 1 ? ", ..." : "") +
                     "): older Hugging Face saves hold the rotary frequencies; the model computes them from rope_theta "
                     "(checked equal)";
  return note;
}

std::string init_from(Trainer& t, const Launch& l) {
  const Config& cfg = t.config();
  std::vector<LoadTarget> targets;
  if (t.layout().params_sharded()) {  // ZeRO-3: the shards are the only persistent copy
    for (const ParamShard& sh : t.layout().param_shards()) {
      const FlatParam& p = t.parameters()[sh.param];
      targets.push_back({p.name, sh.tensor, p.global_shape, p.slice, sh.offset});
    }
  } else {
    for (const FlatParam& p : t.parameters()) targets.push_back({p.name, p.param, p.global_shape, p.slice});
  }
  std::vector<std::string> unused, skipped;
  std::string error = load_safetensors(cfg.init_from, targets, &unused, &skipped);
  if (error.empty()) error = check_skipped_buffers(cfg.init_from, skipped, cfg);
  // A tensor no rank loaded is not part of this model. One rank cannot tell (a pipeline stage
  // holds only its blocks): rank 0 intersects every rank's unused names. Every rank reaches
  // this collective, failed ones included (marked "\x01": no verdict on names).
  ck::MpiCommitComm comm(l.world_comm);
  std::string names = error.empty() ? "" : "\x01";
  if (error.empty())
    for (const std::string& n : unused) names += n + "\n";
  std::string extra;
  const std::vector<std::string> all = comm.gather(names);
  if (comm.rank() == 0) {
    bool verdict = true;
    std::map<std::string, int> count;
    for (const std::string& other : all) {
      if (other == "\x01") verdict = false;
      for (size_t at = 0, eol; at < other.size(); at = eol + 1) {
        eol = other.find('\n', at);
        if (eol == std::string::npos) break;
        ++count[other.substr(at, eol - at)];
      }
    }
    if (verdict)
      for (const auto& [name, n] : count)
        if (n == static_cast<int>(all.size())) {
          extra = cfg.init_from + ": holds tensor '" + name + "', which this model does not have (weights of another " +
                  "model or configuration?)";
          break;
        }
  }
  extra = comm.broadcast(extra);
  if (!error.empty()) return error;
  if (!extra.empty()) return extra;
  if (l.rank == 0) {
    if (!skipped.empty()) std::fprintf(stderr, "scaleguard-run: note: %s\n", skipped_note(skipped).c_str());
    std::fprintf(stderr, "scaleguard-run: initialised %zu parameters on rank 0 from %s (--init-from%s; optimizer state "
                         "fresh, step 0)\n", targets.size(), cfg.init_from.c_str(),
                 cfg.shape_from.empty() ? "" : ("; model shape from " + cfg.shape_from).c_str());
  }
  return "";
}

std::string hf_llama_config(const std::map<std::string, std::string>& c,
                            const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& torch_dtype,
                            std::optional<int64_t> bos, std::optional<int64_t> eos) {
  // Sizes from the tensors themselves where they fix them (a default like ffn-hidden=0 or
  // n-kv-head=0 is resolved by the model, not in the configuration), the rest from the keys.
  auto shape = [&](const std::string& name) -> const std::vector<int64_t>& {
    auto it = shapes.find(name);
    if (it == shapes.end() || it->second.size() != 2) throw RunError("the checkpoint has no 2-d " + name);
    return it->second;
  };
  const auto& embed = shape("model.embed_tokens.weight");
  const int64_t heads = int_key(c, "n-head"), hidden = embed[1];
  if (heads <= 0 || hidden % heads != 0) throw RunError("n-head " + std::to_string(heads) + " does not divide " + std::to_string(hidden));
  int64_t layers = 0;
  while (shapes.count("model.layers." + std::to_string(layers) + ".input_layernorm.weight")) ++layers;
  if (layers != int_key(c, "n-layer"))
    throw RunError("the checkpoint holds " + std::to_string(layers) + " layers, its configuration says n-layer=" +
                   c.at("n-layer"));
  json j = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_size", hidden},
            {"intermediate_size", shape("model.layers.0.mlp.gate_proj.weight")[0]},
            {"num_attention_heads", heads},
            {"num_key_value_heads", shape("model.layers.0.self_attn.k_proj.weight")[0] / (hidden / heads)},
            {"num_hidden_layers", layers},
            {"rms_norm_eps", real_key(c, "norm-eps")},
            {"rope_theta", real_key(c, "rope-theta")},
            {"vocab_size", embed[0]},
            {"max_position_embeddings", int_key(c, "seq-len")},
            {"tie_word_embeddings", shapes.count("lm_head.weight") == 0},
            {"torch_dtype", torch_dtype},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"initializer_range", 0.02},
            {"use_cache", true}};
  if (bos) j["bos_token_id"] = *bos;
  if (eos) j["eos_token_id"] = *eos;
  return j.dump(2) + "\n";
}

CheckpointModel read_checkpoint_model(const std::string& ckpt) {
  ck::Reader reader = open_checkpoint(ckpt);
  return {reader.dir(), reader.manifest().step, config_of(reader.manifest())};
}

std::string load_checkpoint_params(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& params) {
  try {
    ck::Reader reader = open_checkpoint(dir);
    std::set<std::string> want;
    at::NoGradGuard no_grad;
    for (const auto& [name, p] : params) {
      want.insert(name);
      auto t = reader.read_whole("params/" + name);
      if (!t) return reader.dir() + ": " + t.error().str();
      if (t->sizes() != p.sizes())
        return reader.dir() + ": parameter '" + name + "' has shape " + shape_text(t->sizes().vec()) +
               " but the model's is " + shape_text(p.sizes().vec());
      at::Tensor(p).copy_(*t);
    }
    for (const std::string& name : reader.tensor_names())
      if (name.rfind("params/", 0) == 0 && !want.count(ck::base_name(name).substr(7)))
        return reader.dir() + ": holds parameter '" + ck::base_name(name).substr(7) + "', which this model does not have";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

int export_main(const std::vector<std::string>& args) {
  std::string ckpt, output, dtype = "fp32";
  std::vector<std::string> tokenizer;
  double max_shard_gb = 5;
  po::options_description desc(
      "scaleguard-run export: a checkpoint's parameters as safetensors (+ config.json for llama)");
  desc.add_options()("help,h", "this help")("ckpt", po::value(&ckpt)->required(),
                                             "a checkpoint (step-N directory) or a --ckpt-dir (its newest valid one)")(
      "output", po::value(&output)->required(), "directory to write (created)")(
      "dtype", po::value(&dtype)->default_value(dtype), "fp32 | bf16")(
      "max-shard-gb", po::value(&max_shard_gb)->default_value(max_shard_gb, short_double_text(max_shard_gb)),
      "above this size (GB, 10^9 bytes) the weights are split into model-0000K-of-0000N.safetensors + "
      "model.safetensors.index.json")(
      "tokenizer", po::value(&tokenizer)->multitoken()->composing(),
      "tokenizer files to put beside the weights: a directory (its tokenizer.json, tokenizer.model, "
      "tokenizer_config.json, special_tokens_map.json, generation_config.json) or files; default: those of the "
      "directory the run was started from (train --init-from DIR), if it holds any");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return kExitOk;
    }
    po::notify(vm);
    if (dtype != "fp32" && dtype != "bf16") throw po::error("--dtype must be fp32 or bf16, not '" + dtype + "'");
    if (!(max_shard_gb > 0)) throw po::error("--max-shard-gb must be positive");
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard-run export: %s (see --help)\n", e.what());
    return kExitUsage;
  }
  try {
    ck::Reader reader = open_checkpoint(ckpt);
    const ck::Manifest& m = reader.manifest();
    std::fprintf(stderr, "scaleguard-run export: exporting checkpoint %s (step %lld) to directory %s\n", reader.dir().c_str(),
                 static_cast<long long>(m.step), output.c_str());
    const auto config = config_of(m);
    const std::string model = config.count("model") ? config.at("model") : "";
    std::vector<st::TensorSpec> specs;
    const std::string st_dtype = dtype == "bf16" ? "BF16" : "F32";
    const at::ScalarType to = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    for (const std::string& name : reader.tensor_names()) {
      if (name.rfind("params/", 0) != 0) continue;
      const std::string base = ck::base_name(name);
      if (base != name) continue;  // "params/x@1": another box of params/x
      specs.push_back({base.substr(7), st_dtype, reader.global_shape(base)});
    }
    // A tensor that only exists as "@k" boxes (no plain name) is still exported.
    for (const std::string& name : reader.tensor_names()) {
      const std::string base = ck::base_name(name);
      if (name.rfind("params/", 0) != 0 || base == name) continue;
      bool have = false;
      for (const auto& s : specs) have = have || s.name == base.substr(7);
      if (!have) specs.push_back({base.substr(7), st_dtype, reader.global_shape(name)});
    }
    if (specs.empty()) throw RunError(reader.dir() + ": holds no parameters");
    std::error_code ec;
    std::filesystem::create_directories(output, ec);
    if (ec) throw RunError("cannot create '" + output + "': " + ec.message());
    std::map<std::string, std::string> meta{{"scaleguard_checkpoint", reader.dir()},
                                            {"scaleguard_step", std::to_string(m.step)}};
    for (const auto& [k, v] : config) meta["scaleguard." + k] = v;
    st::Fetch fetch = [&](const st::TensorSpec& spec, std::vector<uint8_t>& out) -> std::string {
      auto t = reader.read_whole("params/" + spec.name);
      if (!t) return t.error().str();
      at::Tensor c = t->to(to).contiguous();
      if (static_cast<size_t>(c.nbytes()) != out.size()) return "has " + std::to_string(c.nbytes()) + " bytes";
      std::memcpy(out.data(), c.data_ptr(), out.size());
      return "";
    };
    const auto max_bytes = static_cast<uint64_t>(max_shard_gb * 1e9);
    auto files = st::write_model(output, specs, fetch, max_bytes, meta);
    if (!files) throw RunError(files.error().str());
    std::string what;
    for (const auto& f : *files) what += (what.empty() ? "" : ", ") + f;
    // The tokenizer: the files named by --tokenizer, else those of the run's --init-from
    // directory (the checkpoint records it), so a round trip keeps the model's tokenizer.
    std::vector<std::string> sources = tokenizer;
    auto init_dir = config.find("init-from");
    if (sources.empty() && init_dir != config.end() && !tokenizer_files_in(init_dir->second).empty())
      sources.push_back(init_dir->second);
    const TokenizerCopy tok = copy_tokenizer_files(sources, output, !tokenizer.empty());
    auto write_text = [&output](const std::string& name, const std::string& text) {
      std::ofstream f(output + "/" + name + ".tmp");
      f << text;
      f.close();
      if (!f || std::rename((output + "/" + name + ".tmp").c_str(), (output + "/" + name).c_str()) != 0)
        throw RunError("cannot write " + output + "/" + name);
    };
    if (model == "llama") {
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const auto& spec : specs) shapes[spec.name] = spec.shape;
      write_text("config.json", hf_llama_config(config, shapes, dtype == "bf16" ? "bfloat16" : "float32", tok.bos, tok.eos));
      what += ", config.json (LlamaForCausalLM)";
      if (tok.generation_config_from.empty()) {
        write_text("generation_config.json", generation_config_json(tok.bos, tok.eos));
        what += ", generation_config.json";
      } else {
        what += ", generation_config.json (copied from " + tok.generation_config_from + ")";
      }
    } else {
      std::filesystem::remove(output + "/config.json", ec);  // never leave an earlier export's config beside these
      std::fprintf(stderr, "scaleguard-run export: model '%s' is exported under the runner's own parameter names "
                           "(not a Hugging Face architecture; no config.json); --init-from reads it back\n",
                   model.c_str());
    }
    for (const std::string& name : tok.copied) what += ", " + name;
    std::fprintf(stderr, "scaleguard-run export: %zu tensors of step %lld (%s, tp=%d pp=%d dp=%d) -> %s: %s\n",
                 specs.size(), static_cast<long long>(m.step), m.strategy.c_str(), m.tp, m.pp, m.dp, output.c_str(),
                 what.c_str());
    if (!tok.copied.empty())
      std::fprintf(stderr, "scaleguard-run export: tokenizer from %s%s\n", tok.from.c_str(),
                   tokenizer.empty() ? " (the run's --init-from directory)" : "");
    else
      std::fprintf(stderr, "scaleguard-run export: no tokenizer files (byte-level tokens as `prep` makes them, or "
                           "give --tokenizer DIR|FILE)\n");
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaleguard-run export: %s\n", e.what());
    return kExitError;
  }
}

int logits_main(const std::vector<std::string>& all_args) {
  // Its own options, the rest are train's (the model's shape keys, --init-from).
  std::string tokens_text, output;
  std::vector<std::string> args;
  for (size_t i = 0; i < all_args.size(); ++i) {
    const std::string& a = all_args[i];
    auto value = [&](std::string& dst) {
      if (a.find('=') != std::string::npos) dst = a.substr(a.find('=') + 1);
      else if (i + 1 < all_args.size()) dst = all_args[++i];
    };
    if (a == "--tokens" || a.rfind("--tokens=", 0) == 0) value(tokens_text);
    else if (a == "--output" || a.rfind("--output=", 0) == 0) value(output);
    else args.push_back(a);
  }
  bool has_data = false;
  for (const std::string& a : args)
    has_data = has_data || a.rfind("--data", 0) == 0 || a.rfind("--synthetic", 0) == 0;
  if (!has_data) args.insert(args.end(), {"--synthetic", "100000"});  // train's check; no data is read
  try {
    Config cfg;
    if (!parse_train_args(args, cfg)) return kExitOk;
    if (tokens_text.empty() || output.empty()) throw RunError("logits needs --tokens T0,T1,... and --output FILE");
    if (cfg.init_from.empty()) throw RunError("logits needs --init-from FILE|DIR (the weights)");
    std::vector<int64_t> ids;
    std::stringstream in(tokens_text);
    for (std::string tok; std::getline(in, tok, ',');) {
      const long long v = std::stoll(tok);
      if (v < 0 || v >= cfg.vocab_size) throw RunError("token " + tok + " outside the vocabulary");
      ids.push_back(v);
    }
    if (ids.empty() || static_cast<int64_t>(ids.size()) > cfg.seq_len)
      throw RunError("--tokens needs 1 to seq-len tokens");
    auto model = make_model(cfg);
    std::vector<LoadTarget> targets;
    for (auto& [name, p] : sorted_parameters(*model)) targets.push_back({name, p, p.sizes().vec(), Slice{}});
    std::vector<std::string> unused, skipped;
    if (auto e = load_safetensors(cfg.init_from, targets, &unused, &skipped); !e.empty()) throw RunError(e);
    if (auto e = check_skipped_buffers(cfg.init_from, skipped, cfg); !e.empty()) throw RunError(e);
    if (!unused.empty()) throw RunError(cfg.init_from + ": holds tensor '" + unused.front() + "', which this model does not have");
    at::NoGradGuard no_grad;
    at::Tensor idx = at::tensor(ids, at::kLong).view({1, static_cast<int64_t>(ids.size())});
    at::Tensor logits = model->forward(idx).to(at::kFloat).contiguous();
    std::ofstream f(output, std::ios::binary);
    f.write(static_cast<const char*>(logits.data_ptr()), static_cast<std::streamsize>(logits.nbytes()));
    if (!f) throw RunError("cannot write " + output);
    std::fprintf(stderr, "scaleguard-run logits: %s -> %s (float32, %s)\n", tokens_text.c_str(), output.c_str(),
                 shape_text(logits.sizes().vec()).c_str());
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaleguard-run logits: %s\n", e.what());
    return kExitError;
  }
}

}  // namespace scaleguard::run
