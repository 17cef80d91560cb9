// JSON output: plans (hand-written: decide() builds one per call and must stay fast) and
// decisions (nlohmann_json: only the CLI and the plugins' logging call it).
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {
void escape_into(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += text::format("\\u%04x", c);
        else out += c;
    }
  }
  out += '"';
}
void field(std::string& out, const char* key, double v) {
  out += '"';
  out += key;
  out += "\":";
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
  if (std::isfinite(v) && res.ec == std::errc()) out.append(buf, res.ptr);
  else out += "null";
  out += ',';
}
void field(std::string& out, const char* key, const std::string& v) {
  out += '"';
  out += key;
  out += "\":";
  escape_into(out, v);
  out += ',';
}
}  // namespace

std::string to_json(const Plan& p) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::string out;
  out.reserve(1024 + 128 * p.reasons.size());
  out += '{';
  field(out, "strategy", std::string(to_string(p.strategy)));
  field(out, "tp", p.layout.tp);
  field(out, "pp", p.layout.pp);
  field(out, "dp", p.layout.dp);
  field(out, "zero", p.layout.zero);
  field(out, "micro_batch", p.layout.micro_batch);
  field(out, "recompute", std::string(to_string(p.layout.recompute)));
  field(out, "interleave", p.layout.interleave);
  field(out, "gpus", p.gpus);
  field(out, "nodes", p.nodes);
  out += std::string("\"fits\":") + (p.fits ? "true" : "false") + ",";
  field(out, "memory_per_gpu_gib", p.memory.total() / kGiB);
  out += "\"memory_gib\":{";
  field(out, "weights", p.memory.weights / kGiB);
  field(out, "gradients", p.memory.gradients / kGiB);
  field(out, "optimizer", p.memory.optimizer / kGiB);
  field(out, "activations", p.memory.activations / kGiB);
  field(out, "gathered", p.memory.gathered / kGiB);
  field(out, "overhead", p.memory.overhead / kGiB);
  out.back() = '}';
  out += ',';
  field(out, "gpu_memory_gib", p.gpu_memory_gib);
  field(out, "global_batch", p.global_batch);
  field(out, "micro_batches", p.micro_batches);
  field(out, "batch_asked", p.batch_asked);
  field(out, "tokens_per_step", p.tokens_per_step);
  field(out, "batch_source", std::string(p.batch_law_tokens > 0 ? "law" : "given"));
  if (p.batch_law_tokens > 0) field(out, "batch_law_tokens", p.batch_law_tokens);
  field(out, "step_seconds", p.step_seconds);
  field(out, "compute_seconds", p.compute_seconds);
  field(out, "tp_comm_seconds", p.tp_comm_seconds);
  field(out, "pp_comm_seconds", p.pp_comm_seconds);
  field(out, "dp_comm_seconds", p.dp_comm_seconds);
  field(out, "dp_exposed_seconds", p.dp_exposed_seconds);
  field(out, "steps", p.steps);
  field(out, "tflops_per_gpu", p.tflops_per_gpu);
  field(out, "mfu", p.mfu);
  field(out, "comm_ratio", p.comm_ratio);
  field(out, "bubble_fraction", p.bubble_fraction);
  field(out, "train_hours", p.train_hours);
  field(out, "evaluations", p.evaluations);
  field(out, "eval_hours", p.eval_hours);
  field(out, "failure_overhead", p.failure_overhead);
  field(out, "ckpt_interval_s", p.ckpt_interval_s);
  field(out, "ckpt_save_s", p.ckpt_save_s);
  field(out, "wall_hours", p.wall_hours);
  field(out, "gpu_hours", p.gpu_hours);
  out += "\"cost_usd\":{";
  field(out, "on_demand", p.cost_on_demand);
  field(out, "spot", p.has_spot_price ? p.cost_spot : std::nan(""));
  out.back() = '}';
  // "no spot price" / "no spot estimate (...)" instead of a silent null (issue 37).
  if (!p.has_spot_price || !std::isfinite(p.cost_spot)) {
    out += ',';
    field(out, "spot_note", spot_cost_text(p));
    out.pop_back();
  }
  out += ",\"reasons\":[";
  for (size_t i = 0; i < p.reasons.size(); ++i) {
    if (i) out += ',';
    escape_into(out, p.reasons[i]);
  }
  out += "]}";
  return out;
}

std::string to_json(const Decision& d) {
  nlohmann::json j;
  j["action"] = to_string(d.action);
  j["rules"] = nlohmann::json::array();
  for (const auto& r : d.rules) j["rules"].push_back({{"id", r.id}, {"action", to_string(r.action)}, {"detail", r.detail}});
  j["summary"] = d.summary;
  j["message"] = d.message;
  if (d.model_band > 0) j["model_band"] = d.model_band;
  j["plan"] = d.plan_json.empty() ? nlohmann::json(nullptr) : nlohmann::json::parse(d.plan_json, nullptr, false);
  nlohmann::json rw = nlohmann::json::object();
  if (d.rewrite.gpus_total) rw["gpus"] = *d.rewrite.gpus_total;
  if (d.rewrite.gpus_per_node) rw["gpus_per_node"] = *d.rewrite.gpus_per_node;
  if (d.rewrite.nodes) rw["nodes"] = *d.rewrite.nodes;
  if (d.rewrite.time_limit_min) rw["time_limit_min"] = *d.rewrite.time_limit_min;
  if (d.rewrite.partition) rw["partition"] = *d.rewrite.partition;
  if (d.rewrite.requeue) rw["requeue"] = true;
  if (d.rewrite.signal_before_s > 0) rw["signal_before_s"] = d.rewrite.signal_before_s;
  j["rewrite"] = rw;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : d.plan_env) env[k] = v;
  j["env"] = env;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // user bytes may be any
}

}  // namespace scaleguard
