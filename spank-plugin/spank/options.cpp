// The --train-* options: one table (name, SCALEGUARD_* default, help, accepted forms), one
// callback, and the validation the submitting host does with the planner's own parsers.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <unistd.h>

#include "plugin.h"
#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

namespace scaleguard::spank {
namespace {

constexpr std::size_t kMaxValue = 4096;

const std::vector<Option> kOptions = {
    {"train-model", "SCALEGUARD_TRAIN_MODEL", "SPEC",
     "[scaleguard] model to train: size (350M, 7B), preset (llama2-7b) or shape (layers=..,hidden=..)",
     "a parameter count like 350M or 7B, a catalog preset like llama2-7b, or layers=N,hidden=N,heads=N[,seq=N,vocab=N]"},
    {"train-tokens", "SCALEGUARD_TRAIN_TOKENS", "COUNT", "[scaleguard] training tokens (40B, 1.5T)",
     "a positive count with an optional K/M/B/T suffix, like 40B, 1.5T or 3e11"},
    {"train-single-gpu-hours", "SCALEGUARD_TRAIN_SINGLE_GPU_HOURS", "HOURS",
     "[scaleguard] hours the job would take on one GPU",
     "a duration like 11, 11h, 90m, 2d or 1-12:00:00"},
    {"train-strategy", "SCALEGUARD_TRAIN_STRATEGY", "auto|single|ddp|zero|pipeline|tensor|hybrid",
     "[scaleguard] parallel strategy (default auto: the planner chooses)",
     "one of auto, single, ddp, zero, pipeline, tensor, hybrid"},
    {"train-deadline", "SCALEGUARD_TRAIN_DEADLINE", "HOURS", "[scaleguard] wall-clock hours you can wait",
     "a duration like 11, 11h, 90m, 2d or 1-12:00:00"},
    {"train-ckpt-dir", "SCALEGUARD_TRAIN_CKPT_DIR", "PATH",
     "[scaleguard] checkpoint directory (created on the nodes, owned by you)",
     "an absolute path of letters, digits and / . _ - + @, without '..', inside the policy's checkpoint roots"},
    {"train-ckpt-interval", "SCALEGUARD_TRAIN_CKPT_INTERVAL", "auto|MINUTES",
     "[scaleguard] checkpoint interval (auto: Young/Daly from the cluster MTBF)",
     "auto or a whole number of minutes from 1 to 525600"},
    {"train-probe", "SCALEGUARD_TRAIN_PROBE", "",
     "[scaleguard] a short probe job: run `scaleguard probe` to measure how --train-model scales (judged on the probe budget)",
     "a flag without a value (SCALEGUARD_TRAIN_PROBE=1, yes or on)", 0},
    // Appended: an option's index is its val, which slurmstepd gets back (old ones keep theirs).
    {"train-eval-every", "SCALEGUARD_TRAIN_EVAL_EVERY", "STEPS",
     "[scaleguard] steps between evaluations, counted in the job's hours (with --train-eval-tokens)",
     "a whole number of steps from 1 to 1073741824"},
    {"train-eval-tokens", "SCALEGUARD_TRAIN_EVAL_TOKENS", "COUNT",
     "[scaleguard] tokens each evaluation reads (20M, 1e8; with --train-eval-every)",
     "a positive count with an optional K/M/B/T suffix, like 20M or 1e8"},
    {"train-spare-nodes", "SCALEGUARD_TRAIN_SPARE_NODES", "N",
     "[scaleguard] nodes of the allocation kept idle to replace a failed one (in-job restart; counted in the job's "
     "GPU-hours, not in the plan's layout)",
     "a whole number of nodes from 0 to 1024"},
};

std::map<std::string, std::string> values;  // option name -> last value given

// A short printable prefix of a hostile value, safe to put into a log line.
std::string shown(const std::string& value) {
  std::string out;
  for (std::size_t i = 0; i < value.size() && i < 40; ++i)
    out += std::isprint(static_cast<unsigned char>(value[i])) ? value[i] : '?';
  return value.size() > 40 ? out + "..." : out;
}


bool check_minutes(const std::string& value, std::string& why) {
  if (value == "auto") return true;
  if (value.size() > 6 || !std::all_of(value.begin(), value.end(), ::isdigit)) return why = "not a number of minutes", false;
  const long minutes = std::stol(value);
  if (minutes < 1 || minutes > 525600) return why = "out of range", false;
  return true;
}

bool check_steps(const std::string& value, std::string& why) {
  if (value.empty() || value.size() > 10 || !std::all_of(value.begin(), value.end(), ::isdigit))
    return why = "not a whole number of steps", false;
  const long long steps = std::stoll(value);
  if (steps < 1 || steps > kMaxEvalEvery) return why = "out of range", false;
  return true;
}

// Per-option check with the planner's parsers; `why` is the reason on failure.
bool check(const std::string& name, const std::string& value, std::string& why) {
  auto from = [&](const auto& result) {
    if (!result.ok()) why = result.error().message;
    return result.ok();
  };
  if (name == "train-tokens" || name == "train-eval-tokens") {
    const auto n = parse_count(value);
    if (n.ok() && !(*n > 0)) return why = "must be positive", false;
    return from(n);
  }
  if (name == "train-single-gpu-hours" || name == "train-deadline") return from(parse_hours(value));
  if (name == "train-strategy") return from(parse_strategy(value));
  if (name == "train-ckpt-interval") return check_minutes(value, why);
  if (name == "train-eval-every") return check_steps(value, why);
  if (name == "train-spare-nodes") {
    if (value.empty() || value.size() > 4 || !std::all_of(value.begin(), value.end(), ::isdigit))
      return why = "not a whole number of nodes", false;
    if (std::stol(value) > 1024) return why = "out of range", false;
    return true;
  }
  if (name == "train-probe") {
    if (value == "1" || value == "yes" || value == "on") return true;
    return why = "not 1, yes or on", false;
  }
  std::string error;
  if (name == "train-ckpt-dir") {
    std::vector<std::string> roots;
    if (!checkpoint_roots(roots, error)) return why = error, false;
    // The submitting user's view of what exists already: a fast, friendly refusal of a
    // directory someone else owns or planted; the nodes check again as they create it.
    return check_ckpt_dir(value, roots, why) && walk_ckpt_dir(value, roots, getuid(), getgid(), false, why);
  }
  // train-model: sizes and shapes parse alone; preset names need the catalog.
  const auto p = policy(error);
  if (!p) return why = "cannot load the policy to check it: " + error, false;
  return from(validate_model_spec(value, p->catalog));
}

int on_option(int val, const char* optarg, int remote) {
  return guarded("option", [&]() -> int {
    if (val < 0 || static_cast<std::size_t>(val) >= kOptions.size()) return kFail;
    const Option& opt = kOptions[static_cast<std::size_t>(val)];
    const std::string value = opt.has_arg == 0 ? "1" : optarg ? optarg : "";
    // slurmstepd re-runs the callback with what the submitting host already accepted;
    // the checkpoint directory is checked again there against the node's filesystem.
    std::string error;
    if (!remote && !validate(opt, value, "", error)) {
      slurm_error("%s", error.c_str());
      return kFail;
    }
    values[opt.name] = value;
    return 0;
  });
}

}  // namespace

// Loaded once per process, only when a value needs it (most submissions never do).
std::shared_ptr<const Policy> policy(std::string& error) {
  static std::shared_ptr<const Policy> loaded;
  static std::string load_error;
  if (!loaded && load_error.empty()) {
    auto result = load_policy(config().policy, config().catalog);
    if (result.ok()) loaded = result.value();
    else load_error = result.error().str();
  }
  error = load_error;
  return loaded;
}

const std::vector<Option>& options() { return kOptions; }

std::string option_value(const std::string& name) {
  const auto it = values.find(name);
  return it == values.end() ? std::string() : it->second;
}

std::string forwarded_name(const Option& opt) {
  std::string name = std::string("_SLURM_SPANK_OPTION_scaleguard_") + opt.name;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

bool checkpoint_roots(std::vector<std::string>& roots, std::string& error) {
  const auto p = policy(error);
  if (!p) return error = "cannot load the policy: " + error, false;
  roots = p->checkpoint_roots;
  return true;
}

bool validate(const Option& opt, const std::string& value, const std::string& source, std::string& error) {
  std::string why;
  bool ok = false;
  if (value.empty()) why = "empty value";
  else if (value.size() > kMaxValue) why = "longer than 4096 bytes";
  else if (std::any_of(value.begin(), value.end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); }))
    why = "control character (newline, tab, ...) in value";
  else ok = check(opt.name, value, why);
  if (ok) return true;
  const std::string where = source.empty() ? std::string("--") + opt.name : source + " (default for --" + opt.name + ")";
  error = "scaleguard: " + where + "='" + shown(value) + "': " + why + "; accepted: " + opt.accepted;
  return false;
}

int register_options(spank_t sp) {
  // Slurm keeps a pointer to each entry: they must outlive the call (static storage).
  static std::vector<spank_option> table(kOptions.size());
  for (std::size_t i = 0; i < kOptions.size(); ++i) {
    const Option& o = kOptions[i];
    table[i] = {const_cast<char*>(o.name), o.has_arg ? const_cast<char*>(o.arginfo) : nullptr,
                const_cast<char*>(o.usage), o.has_arg,
                static_cast<int>(i), on_option};
    if (spank_option_register(sp, &table[i]) != ESPANK_SUCCESS) {
      slurm_error("scaleguard: cannot register --%s", o.name);
      return kFail;
    }
  }
  return 0;
}

}  // namespace scaleguard::spank
