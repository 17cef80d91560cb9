// Model specs -> ModelSpec (shape, precision, optimizer, pinned recompute).
#include <cctype>
#include <cmath>

#include "parse_number.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "scaleguard/text.h"

namespace scaleguard {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
  }
  return "?";
}
const char* to_string(Optimizer o) { return o == Optimizer::adam ? "adam" : "sgd"; }
const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

namespace {
Error spec_error(std::string message, std::string hint, std::string field = "") {
  Error e;
  e.message = std::move(message);
  e.hint = std::move(hint);
  e.field = std::move(field);
  return e;
}
}  // namespace

Result<Precision> parse_precision(const std::string& s) {
  const auto t = text::lower(text::trim(s));
  if (t == "fp32") return Precision::fp32;
  if (t == "fp16") return Precision::fp16;
  if (t == "bf16") return Precision::bf16;
  return spec_error("unknown precision '" + s + "'", "one of fp32, fp16, bf16", "precision");
}
Result<Optimizer> parse_optimizer(const std::string& s) {
  const auto t = text::lower(text::trim(s));
  if (t == "adam" || t == "adamw") return Optimizer::adam;
  if (t == "sgd") return Optimizer::sgd;
  return spec_error("unknown optimizer '" + s + "'", "one of adam, sgd", "optimizer");
}
Result<Recompute> parse_recompute(const std::string& s) {
  const auto t = text::lower(text::trim(s));
  if (t == "none") return Recompute::none;
  if (t == "selective") return Recompute::selective;
  if (t == "full") return Recompute::full;
  return spec_error("unknown recompute '" + s + "'", "one of none, selective, full", "recompute");
}

double gpt_params(int layers, int hidden, int seq, int vocab) {
  const double L = layers, h = hidden;
  return 12 * L * h * h + 13 * L * h + (double(vocab) + seq) * h;
}

double llama_params(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab, bool tied) {
  const double L = layers, h = hidden, kv = double(kv_heads) * (hidden / heads), f = ffn_hidden;
  return L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h + double(vocab) * h * (tied ? 1 : 2);
}

int llama_ffn_hidden(int hidden) {
  const long raw = 2L * (4L * hidden) / 3;
  return static_cast<int>((raw + 255) / 256 * 256);
}

constexpr double kMinParams = 1e5, kMaxParams = 1e14;  // 100K .. 100T

Result<ModelSpec> derive_shape(double params) {
  if (!(params >= kMinParams && params <= kMaxParams))
    return spec_error(text::format("%g parameters is out of range", params),
                      "models from 100K to 100T parameters, e.g. 350M, 7B, 1.5T");
  ModelSpec m;
  m.params = params;
  m.seq = 2048;
  m.vocab = 51200;
  // Aspect ratio hidden/layers grows slowly with size (GPT-3: 43 at 350M, 128 at 175B).
  const double ratio = 32 * std::pow(params / 1e8, 1.0 / 6);
  const double h_exact = std::cbrt(params * ratio / 12);
  const int step = params < 1e9 ? 64 : 128;
  m.hidden = std::max(step, static_cast<int>(std::lround(h_exact / step)) * step);
  const double body = params - double(m.vocab + m.seq) * m.hidden;  // non-embedding params
  m.layers = std::max(1, static_cast<int>(std::lround(body / (12.0 * m.hidden * m.hidden))));
  m.heads = m.hidden >= 2048 ? m.hidden / 128 : m.hidden / 64;
  return m;
}

Result<ModelSpec> parse_model_spec(const std::string& raw, const Catalog& catalog) {
  const std::string forms =
      "a count (350M, 7B, 1.5T), a preset (gpt2, llama2-7b, ...) or "
      "layers=N,hidden=N,heads=N[,seq=N,vocab=N]; options precision=, optimizer=, recompute=, attention=";
  if (raw.size() > 256 || text::has_control(raw)) return spec_error("malformed model spec", forms, "model");
  const std::string t = text::trim(raw);
  if (t.empty()) return spec_error("empty model spec", forms, "model");

  ModelSpec m;
  bool have_base = false;
  int layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0, kv_heads = 0, ffn_hidden = 0;
  std::string tied;  // "" = the arch's default
  bool llama_keys = false;  // kv_heads=, ffn_hidden= or tied= written in the spec
  double params = 0;
  auto items = text::split(t, ',');
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      if (i != 0) return spec_error("'" + item + "' must be key=value", forms, "model");
      if (const ModelPreset* p = catalog.find_model(item)) {
        m.name = p->name;
        layers = p->layers, hidden = p->hidden, heads = p->heads, seq = p->seq, vocab = p->vocab;
        params = p->params;
        m.arch = p->arch, kv_heads = p->kv_heads, ffn_hidden = p->ffn_hidden, m.tied = p->tied;
        have_base = true;
        continue;
      }
      auto count = parse_count(item);
      if (!count && (std::isdigit(static_cast<unsigned char>(item[0])) || item[0] == '-' || item[0] == '.'))
        return spec_error(count.error().message, forms, "model");  // a malformed or absurd count
      if (!count) {
        std::vector<std::string> names;
        for (const auto& p : catalog.models) names.push_back(p.name);
        std::string near = text::closest(item, names);
        return spec_error("'" + item + "' is neither a parameter count nor a known preset",
                          near.empty() ? forms : "did you mean '" + near + "'?", "model");
      }
      auto shape = derive_shape(count.value());
      if (!shape) return Error{shape.error().message, "", 0, "model", shape.error().hint};
      m = shape.value();
      m.name = item;
      layers = m.layers, hidden = m.hidden, heads = m.heads, seq = m.seq, vocab = m.vocab;
      params = m.params;
      have_base = true;
      continue;
    }
    const std::string key = text::lower(text::trim(item.substr(0, eq)));
    const std::string value = text::trim(item.substr(eq + 1));
    auto int_value = [&](int lo, int hi, int& out) -> Result<bool> {
      auto v = parse_integer(value);
      if (!v || *v < lo || *v > hi)
        return spec_error(key + "=" + value + " is out of range",
                          text::format("%s is a whole number from %d to %d", key.c_str(), lo, hi), "model");
      out = static_cast<int>(*v);
      return true;
    };
    Result<bool> ok = true;
    if (key == "layers") ok = int_value(1, 1000, layers);
    else if (key == "hidden") ok = int_value(64, 262144, hidden);
    else if (key == "heads") ok = int_value(1, 4096, heads);
    else if (key == "seq") ok = int_value(16, 1 << 20, seq);
    else if (key == "vocab") ok = int_value(2, 10000000, vocab);
    else if (key == "kv_heads") ok = int_value(1, 4096, kv_heads), llama_keys = true;
    else if (key == "ffn_hidden") ok = int_value(1, 4194304, ffn_hidden), llama_keys = true;
    else if (key == "arch") {
      if (value != "gpt" && value != "llama") return spec_error("unknown arch '" + value + "'", "gpt or llama", "model");
      if (value != m.arch) m.tied = value == "gpt";
      m.arch = value;
    } else if (key == "tied") {
      if (value != "yes" && value != "no") return spec_error("tied=" + value + ": expected yes or no", "", "model");
      tied = value;
      llama_keys = true;
    } else if (key == "params") {
      auto p = parse_count(value);
      if (!p) return spec_error("params=" + value + ": " + p.error().message, p.error().hint, "model");
      params = p.value();
    } else if (key == "precision") {
      auto p = parse_precision(value);
      if (!p) return p.error();
      m.precision = p.value();
    } else if (key == "optimizer") {
      auto o = parse_optimizer(value);
      if (!o) return o.error();
      m.optimizer = o.value();
    } else if (key == "recompute") {
      auto r = parse_recompute(value);
      if (!r) return r.error();
      m.recompute = r.value();
    } else if (key == "attention") {
      if (value != "flash" && value != "standard")
        return spec_error("unknown attention '" + value + "'", "standard or flash", "model");
      m.flash_attention = value == "flash";
    } else {
      return spec_error("unknown model key '" + key + "'",
                        "keys: layers, hidden, heads, seq, vocab, params, arch, kv_heads, ffn_hidden, tied, precision, "
                        "optimizer, recompute, attention",
                        "model");
    }
    if (!ok) return ok.error();
  }
  if (!have_base) {
    if (layers == 0 || hidden == 0)
      return spec_error("an explicit shape needs layers= and hidden=", forms, "model");
    if (heads == 0) heads = hidden >= 2048 ? hidden / 128 : std::max(1, hidden / 64);
    if (seq == 0) seq = 2048;
    if (vocab == 0) vocab = 51200;
    m.name = "custom";
  }
  if (heads > hidden || hidden % heads != 0)
    return spec_error(text::format("hidden=%d is not a multiple of heads=%d", hidden, heads),
                      "choose heads that divide hidden", "model");
  m.layers = layers, m.hidden = hidden, m.heads = heads, m.seq = seq, m.vocab = vocab;
  if (!tied.empty()) m.tied = tied == "yes";
  if (m.llama()) {
    m.kv_heads = kv_heads > 0 ? kv_heads : heads;
    m.ffn_hidden = ffn_hidden > 0 ? ffn_hidden : llama_ffn_hidden(hidden);
    if (heads % m.kv_heads != 0)
      return spec_error(text::format("kv_heads=%d does not divide heads=%d", m.kv_heads, heads),
                        "each key/value head serves heads/kv_heads query heads", "model");
    // The exact count of the shape (what scaleguard-run builds), never a stated round figure.
    m.params = llama_params(layers, hidden, heads, m.kv_heads, m.ffn_hidden, vocab, m.tied);
  } else {
    if (llama_keys)
      return spec_error("kv_heads, ffn_hidden and tied need arch=llama", "add arch=llama", "model");
    m.params = params > 0 && have_base ? params : gpt_params(layers, hidden, seq, vocab);
    if (params > 0 && !have_base) m.params = params;
  }
  if (!(m.params >= kMinParams && m.params <= kMaxParams))
    return spec_error(text::format("%g parameters is out of range", m.params),
                      "models from 100K to 100T parameters", "model");
  return m;
}

Result<std::string> validate_model_spec(const std::string& text_in, const Catalog& catalog) {
  auto m = parse_model_spec(text_in, catalog);
  if (!m) return m.error();
  const ModelSpec& s = m.value();
  return text::format("%s: %.3g parameters, %d layers, hidden %d, %d heads, seq %d, vocab %d, %s, %s",
                      s.name.c_str(), s.params, s.layers, s.hidden, s.heads, s.seq, s.vocab,
                      to_string(s.precision), to_string(s.optimizer));
}

}  // namespace scaleguard
