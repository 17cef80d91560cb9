// load_policy(): configs/policy.ini -> Policy (global settings, [rules], [partition NAME]).
#include <algorithm>
#include <cmath>

#include "scaleguard/ini.h"
#include "parse_number.h"
#include "scaleguard/policy.h"
#include "scaleguard/text.h"

namespace scaleguard {

const char* to_string(Action a) {
  switch (a) {
    case Action::accept: return "accept";
    case Action::warn: return "warn";
    case Action::rewrite: return "rewrite";
    case Action::reject: return "reject";
  }
  return "?";
}

bool Rewrite::empty() const {
  return !gpus_total && !gpus_per_node && !nodes && !time_limit_min && !partition && !requeue &&
         signal_before_s == 0;
}

const char* to_string(RuleId r) {
  switch (r) {
    case RuleId::one_gpu_type: return "one_gpu_type";
    case RuleId::multi_node_fabric: return "multi_node_fabric";
    case RuleId::must_fit_memory: return "must_fit_memory";
    case RuleId::distributed_min_gpu_hours: return "distributed_min_gpu_hours";
    case RuleId::single_gpu_max_hours: return "single_gpu_max_hours";
    case RuleId::consider_distributed_hours: return "consider_distributed_hours";
    case RuleId::max_comm_ratio: return "max_comm_ratio";
    case RuleId::min_doubling_speedup: return "min_doubling_speedup";
    case RuleId::max_job_gpu_hours: return "max_job_gpu_hours";
    case RuleId::max_array_gpu_hours: return "max_array_gpu_hours";
    case RuleId::checkpoint_required_gpu_hours: return "checkpoint_required_gpu_hours";
    case RuleId::time_limit_fits: return "time_limit_fits";
    case RuleId::count_: break;
  }
  return "?";
}

bool rule_has_threshold(RuleId r) {
  return !(r == RuleId::one_gpu_type || r == RuleId::multi_node_fabric || r == RuleId::must_fit_memory ||
           r == RuleId::time_limit_fits);
}

const char* to_string(Capacity c) { return c == Capacity::spot ? "spot" : "on-demand"; }
const char* to_string(Fabric f) {
  switch (f) {
    case Fabric::efa: return "efa";
    case Fabric::ib: return "ib";
    case Fabric::ethernet: return "ethernet";
    case Fabric::none: return "none";
  }
  return "?";
}

Rules default_rules() {
  Rules r;
  auto set = [&](RuleId id, double threshold, Action action) {
    r[static_cast<int>(id)] = Rule{threshold, action, true};
  };
  // Thresholds from the cost articles (docs/policy.md cites each).
  set(RuleId::one_gpu_type, 0, Action::reject);
  set(RuleId::multi_node_fabric, 0, Action::reject);
  set(RuleId::must_fit_memory, 0, Action::reject);
  set(RuleId::distributed_min_gpu_hours, 100, Action::reject);
  set(RuleId::single_gpu_max_hours, 24, Action::reject);
  set(RuleId::consider_distributed_hours, 72, Action::warn);
  set(RuleId::max_comm_ratio, 0.2, Action::rewrite);
  set(RuleId::min_doubling_speedup, 1.5, Action::rewrite);
  set(RuleId::max_job_gpu_hours, 100000, Action::reject);
  set(RuleId::max_array_gpu_hours, 100000, Action::reject);
  set(RuleId::checkpoint_required_gpu_hours, 100, Action::rewrite);
  set(RuleId::time_limit_fits, 0, Action::warn);
  return r;
}

const Partition* Policy::find_partition(const std::string& name) const {
  for (const auto& p : partitions)
    if (p.name == name) return &p;
  return nullptr;
}

const Partition* Policy::default_partition() const {
  for (const auto& p : partitions)
    if (p.is_default) return &p;
  return nullptr;
}

namespace {

Result<Action> parse_action(const std::string& s) {
  if (s == "reject") return Action::reject;
  if (s == "rewrite") return Action::rewrite;
  if (s == "warn") return Action::warn;
  return Error{"unknown action '" + s + "'", "", 0, "", "one of reject, rewrite, warn (or off)"};
}

// "THRESHOLD ACTION", "ACTION", "THRESHOLD" (keeps the action) or "off".
Result<bool> parse_rule(const ini::File& f, const ini::Entry& e, RuleId id, Rule& rule) {
  const std::string forms = rule_has_threshold(id) ? "write '" + e.key + " = THRESHOLD ACTION' (e.g. 100 reject), "
                                                     "'THRESHOLD', 'ACTION' or 'off'"
                                                   : "write '" + e.key + " = ACTION' (reject, rewrite, warn) or 'off'";
  std::vector<std::string> words;
  for (auto& w : text::split(e.value, ' '))
    if (!w.empty()) words.push_back(text::lower(w));
  if (words.empty() || words.size() > 2) return f.error_at(e, "malformed rule '" + e.value + "'", forms);
  if (words.size() == 1 && words[0] == "off") {
    rule.enabled = false;
    return true;
  }
  rule.enabled = true;
  size_t i = 0;
  if (auto v = parse_number(words[0])) {
    if (!rule_has_threshold(id)) return f.error_at(e, "rule " + e.key + " takes no threshold", forms);
    if (*v < 0 || *v > 1e9) return f.error_at(e, "threshold '" + words[0] + "' is out of range", "use 0 to 1e9");
    if (id == RuleId::max_comm_ratio && *v > 10) return f.error_at(e, "a comm ratio above 10 means nothing", "e.g. 0.2");
    rule.threshold = *v;
    i = 1;
  } else if (rule_has_threshold(id) && words.size() == 2) {
    return f.error_at(e, "'" + words[0] + "' is not a threshold", forms);
  }
  if (i < words.size()) {
    auto a = parse_action(words[i]);
    if (!a) return f.error_at(e, a.error().message, a.error().hint);
    rule.action = a.value();
  }
  return true;
}

// Applies the rule keys of one section to `rules`; the other keys go to `rest`.
Result<bool> apply_rules(const ini::File& f, const std::string& section, Rules& rules) {
  for (const auto& e : f.entries) {
    if (e.section != section) continue;
    for (int i = 0; i < kRuleCount; ++i) {
      if (e.key == to_string(static_cast<RuleId>(i))) {
        auto ok = parse_rule(f, e, static_cast<RuleId>(i), rules[i]);
        if (!ok) return ok.error();
      }
    }
  }
  return true;
}

bool is_rule_key(const std::string& key) {
  for (int i = 0; i < kRuleCount; ++i)
    if (key == to_string(static_cast<RuleId>(i))) return true;
  return false;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

Result<bool> parse_mode(const ini::File& f, const std::string& section, bool& shadow) {
  for (const auto& e : f.entries) {
    if (e.section != section || e.key != "mode") continue;
    const std::string v = text::lower(text::trim(e.value));
    if (v == "shadow") shadow = true;
    else if (v == "enforce") shadow = false;
    else return f.error_at(e, "unknown mode '" + e.value + "'", "enforce (judge and act) or shadow (judge and log only)");
  }
  return true;
}

// "shard:8, mps:100": how many units of each shared GPU GRES make one GPU; "off" ignores them.
Result<bool> parse_shared_gres(const ini::File& f, const std::string& value, SharedGpuGres& out) {
  const ini::Entry* at = nullptr;
  for (const auto& e : f.entries)
    if (e.section.empty() && e.key == "shared_gpu_gres") at = &e;
  if (!at) return true;
  out = SharedGpuGres{0, 0};
  if (text::lower(text::trim(value)) == "off") return true;
  const std::string forms = "write shard:UNITS_PER_GPU, mps:UNITS_PER_GPU (e.g. shard:1, mps:100) or off";
  for (auto item : text::split(value, ',')) {
    item = text::trim(item);
    if (item.empty()) continue;
    auto colon = item.find(':');
    auto n = colon == std::string::npos ? std::nullopt : parse_integer(item.substr(colon + 1));
    if (!n || *n < 1 || *n > 1000000) return f.error_at(*at, "malformed shared GRES '" + item + "'", forms);
    const std::string name = item.substr(0, colon);
    if (name == "shard") out.shard_per_gpu = static_cast<int>(*n);
    else if (name == "mps") out.mps_per_gpu = static_cast<int>(*n);
    else return f.error_at(*at, "unknown shared GPU GRES '" + name + "'", forms);
  }
  return true;
}

Result<int> time_key(const ini::File& f, const std::string& section, const std::string& key, int& out) {
  for (const auto& e : f.entries) {
    if (e.section != section || e.key != key) continue;
    auto m = parse_slurm_minutes(e.value);
    if (!m) return f.error_at(e, m.error().message, m.error().hint);
    out = m.value() < 0 ? 0 : m.value();  // INFINITE = no maximum
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Policy>> load_policy(const std::string& path, const std::string& catalog_override,
                                                  const std::string& calibration) {
  try {
    auto file = ini::read(path);
    if (!file) return file.error();
    const ini::File& f = file.value();
    auto policy = std::make_shared<Policy>();
    policy->path = path;
    policy->rules = default_rules();

    // Global keys.
    std::string catalog_path, calibration_path, roots, mode, trusted, shared_gres, probe_age;
    double mtbf = 0;
    auto ok = ini::bind(f, "", 1, {
        {"catalog", ini::Field::text, &catalog_path, 0, 0, false, "path of the catalog, relative to this file"},
        {"calibration", ini::Field::text, &calibration_path, 0, 0, false,
         "catalog override from scaleguard calibrate --write, relative to this file"},
        {"checkpoint_roots", ini::Field::text, &roots, 0, 0, false, "comma list of directories, e.g. /scratch,/fsx"},
        {"node_mtbf_hours", ini::Field::number, &mtbf, 1, 1e7, false, "hours"},
        {"signal_before_s", ini::Field::integer, &policy->signal_before_s, 10, 86400, false, "seconds"},
        {"max_zero_stage", ini::Field::integer, &policy->max_zero_stage, 0, 3, false,
         "0-3: 3 for scaleguard-run, DeepSpeed or FSDP; 1 for a runner that shards only the optimizer state"},
        {"max_job_runs", ini::Field::integer, &policy->max_job_runs, 0, 1000000, false,
         "runs of one batch job over its life, requeues included (0 = no limit)"},
        {"mode", ini::Field::text, &mode, 0, 0, false, "enforce or shadow"},
        {"trusted_users", ini::Field::text, &trusted, 0, 0, false, "comma list of user names or uids, e.g. root,slurm"},
        {"audit_file", ini::Field::text, &policy->audit_file, 0, 0, false, "absolute path of a JSON-lines file"},
        {"shared_gpu_gres", ini::Field::text, &shared_gres, 0, 0, false, "shard:N, mps:N or off"},
        {"probe_store", ini::Field::text, &policy->probe_store, 0, 0, false,
         "absolute directory for scaleguard probe's records, e.g. /fsx/scaleguard/probes"},
        {"probe_max_age", ini::Field::text, &probe_age, 0, 0, false, "a duration like 30d, 72h"},
        {"probe_max_gpu_hours", ini::Field::number, &policy->probe_max_gpu_hours, 0, 1e6, false,
         "GPU-hours a --train-probe job may take (0 = no absolute cap)"},
        {"probe_max_fraction", ini::Field::number, &policy->probe_max_fraction, 0, 1, false,
         "fraction of the training job's GPU-hours, e.g. 0.02 (0 = off)"}});
    if (!ok) return ok.error();
    if (auto r = parse_mode(f, "", policy->shadow); !r) return r.error();
    if (auto r = parse_shared_gres(f, shared_gres, policy->shared_gres); !r) return r.error();
    for (auto& u : text::split(trusted, ',')) {
      u = text::trim(u);
      if (u.empty()) continue;
      if (u.size() > 64 || u.find_first_of(" \t/") != std::string::npos)
        for (const auto& e : f.entries)
          if (e.section.empty() && e.key == "trusted_users")
            return f.error_at(e, "malformed user '" + u + "'", "user names or numeric uids, comma separated");
      policy->trusted_users.push_back(u);
    }
    if (!policy->audit_file.empty() &&
        (policy->audit_file.front() != '/' || policy->audit_file.find("..") != std::string::npos))
      for (const auto& e : f.entries)
        if (e.section.empty() && e.key == "audit_file")
          return f.error_at(e, "audit_file must be an absolute path without '..'", "e.g. /var/log/slurm/scaleguard-audit.jsonl");
    auto global_entry = [&](const char* key) -> const ini::Entry* {
      for (const auto& e : f.entries)
        if (e.section.empty() && e.key == key) return &e;
      return nullptr;
    };
    if (!policy->probe_store.empty() &&
        (policy->probe_store.front() != '/' || policy->probe_store.find("..") != std::string::npos ||
         policy->probe_store.size() > 1024))
      return f.error_at(*global_entry("probe_store"), "probe_store must be an absolute path without '..'",
                        "e.g. /fsx/scaleguard/probes (owned by root, mode 1777)");
    if (!probe_age.empty()) {
      auto h = parse_hours(probe_age);
      if (!h || h.value() <= 0)
        return f.error_at(*global_entry("probe_max_age"), "malformed probe_max_age '" + probe_age + "'",
                          "a duration like 30d, 72h or 90m");
      policy->probe_max_age_s = h.value() * 3600;
    }
    policy->node_mtbf_hours = mtbf;
    for (auto& r : text::split(roots, ',')) {
      if (r.empty()) continue;
      if (r.front() != '/' || r.find("..") != std::string::npos) {
        for (const auto& e : f.entries)
          if (e.section.empty() && e.key == "checkpoint_roots")
            return f.error_at(e, "checkpoint root '" + r + "' is not an absolute path", "write /scratch,/fsx");
      }
      policy->checkpoint_roots.push_back(r);
    }

    // The catalog: override, else the policy's key (relative to the policy), else beside it.
    std::string cat = catalog_override;
    if (cat.empty()) cat = catalog_path.empty() ? "catalog.ini" : catalog_path;
    if (catalog_override.empty() && cat.front() != '/') cat = dir_of(path) + "/" + cat;
    std::string cal = calibration.empty() ? calibration_path : calibration;
    if (calibration.empty() && !cal.empty() && cal.front() != '/') cal = dir_of(path) + "/" + cal;
    auto catalog = load_catalog(cat, cal);
    if (!catalog) return catalog.error();
    policy->catalog = std::move(catalog).value();

    for (const auto& sec : f.sections) {
      const std::string h = sec.kind + (sec.name.empty() ? "" : " " + sec.name);
      Error head{"", f.path, sec.line, "[" + h + "]", ""};
      if (sec.kind == "rules") {
        if (!sec.name.empty()) return head.message = "[rules] takes no name", head.hint = "write [rules]", head;
        for (const auto& e : f.entries)
          if (e.section == h && !is_rule_key(e.key)) {
            std::vector<std::string> ids;
            for (int i = 0; i < kRuleCount; ++i) ids.push_back(to_string(static_cast<RuleId>(i)));
            std::string near = text::closest(e.key, ids);
            return f.error_at(e, "unknown rule '" + e.key + "'",
                              near.empty() ? "see docs/policy.md for the rule ids" : "did you mean '" + near + "'?");
          }
        if (auto r = apply_rules(f, h, policy->rules); !r) return r.error();
      } else if (sec.kind != "partition" && sec.kind != "budget" && sec.kind != "budgets") {
        // [budgets] and [budget NAME] belong to budget/ (load_budgets checks them): a
        // decision never reads them, so they are not parsed here.
        head.message = "unknown section kind '" + sec.kind + "'";
        head.hint = "sections are [rules], [partition NAME], [budgets] and [budget NAME]";
        return head;
      }
    }

    for (const auto& sec : f.sections) {
      if (sec.kind != "partition") continue;
      const std::string h = "partition " + sec.name;
      Error head{"", f.path, sec.line, "[" + h + "]", ""};
      if (sec.name.empty()) return head.message = "partition without a name", head.hint = "write [partition gpu-od]", head;
      Partition part;
      part.name = sec.name;
      part.shadow = policy->shadow;
      std::string part_mode;
      std::string capacity = "on-demand", fabric = "efa", dtime, mtime;
      std::vector<ini::Field> fields = {
          {"instance", ini::Field::text, &part.instance, 0, 0, true, "an [instance NAME] of the catalog"},
          {"capacity", ini::Field::text, &capacity, 0, 0, false, "on-demand or spot"},
          {"fabric", ini::Field::text, &fabric, 0, 0, false, "efa, ib, ethernet or none"},
          {"default_time", ini::Field::text, &dtime, 0, 0, false, "Slurm time, e.g. 1:00:00"},
          {"max_time", ini::Field::text, &mtime, 0, 0, false, "Slurm time, e.g. 2-00:00:00"},
          {"default", ini::Field::yes_no, &part.is_default, 0, 0, false, "yes or no"},
          {"max_nodes", ini::Field::integer, &part.max_nodes, 1, 100000, false, "nodes in the partition (its MaxNodes or size)"},
          {"exclusive", ini::Field::yes_no, &part.exclusive, 0, 0, false, "yes when slurm.conf says OverSubscribe=EXCLUSIVE"},
          {"mode", ini::Field::text, &part_mode, 0, 0, false, "enforce or shadow"},
          {"topk_compression", ini::Field::text, &part.topk_compression, 0, 0, false, "auto, require or forbid"}};
      // Rule overrides are checked by apply_rules; bind() must not call them unknown.
      std::string ignored[kRuleCount];
      for (int i = 0; i < kRuleCount; ++i)
        fields.push_back({to_string(static_cast<RuleId>(i)), ini::Field::text, &ignored[i], 0, 0, false, "rule"});
      if (auto r = ini::bind(f, h, sec.line, fields); !r) return r.error();
      auto entry = [&](const char* key) -> const ini::Entry* {
        for (const auto& e : f.entries)
          if (e.section == h && e.key == key) return &e;
        return nullptr;
      };
      if (auto r = parse_mode(f, h, part.shadow); !r) return r.error();
      if (capacity == "spot") part.capacity = Capacity::spot;
      else if (capacity != "on-demand") return f.error_at(*entry("capacity"), "unknown capacity '" + capacity + "'", "on-demand or spot");
      if (fabric == "efa") part.fabric = Fabric::efa;
      else if (fabric == "ib") part.fabric = Fabric::ib;
      else if (fabric == "ethernet") part.fabric = Fabric::ethernet;
      else if (fabric == "none") part.fabric = Fabric::none;
      else return f.error_at(*entry("fabric"), "unknown fabric '" + fabric + "'", "efa, ib, ethernet or none");
      if (part.topk_compression != "auto" && part.topk_compression != "require" && part.topk_compression != "forbid")
        return f.error_at(*entry("topk_compression"), "unknown topk_compression '" + part.topk_compression + "'",
                          "auto (propose it when communication-bound), require or forbid");
      if (auto r = time_key(f, h, "default_time", part.default_time_min); !r) return r.error();
      if (auto r = time_key(f, h, "max_time", part.max_time_min); !r) return r.error();
      if (part.default_time_min == 0) part.default_time_min = part.max_time_min > 0 ? part.max_time_min : 60;
      if (part.max_time_min > 0 && part.default_time_min > part.max_time_min)
        return f.error_at(*entry("default_time"), "default_time is longer than max_time", "shorten default_time");
      const Instance* inst = policy->catalog.find_instance(part.instance);
      if (!inst) {
        std::vector<std::string> names;
        for (const auto& i : policy->catalog.instances) names.push_back(i.name);
        std::string near = text::closest(part.instance, names);
        return f.error_at(*entry("instance"), "instance type '" + part.instance + "' is not in the catalog " + policy->catalog.path,
                          near.empty() ? "add it to the catalog" : "did you mean '" + near + "'?");
      }
      part.inst = *inst;
      part.gpu = *policy->catalog.find_gpu(inst->gpu);
      part.rules = policy->rules;
      if (auto r = apply_rules(f, h, part.rules); !r) return r.error();
      if (part.is_default && policy->default_partition())
        return head.message = "a second default partition", head.hint = "set default = yes on one partition only", head;
      policy->partitions.push_back(std::move(part));
    }
    if (policy->partitions.empty())
      return Error{"no [partition NAME] section", path, 0, "", "describe at least one partition"};
    if (!policy->default_partition())
      return Error{"no default partition", path, 0, "default", "set default = yes on one partition"};
    return std::shared_ptr<const Policy>(std::move(policy));
  } catch (const std::exception& ex) {
    return Error{std::string("internal error: ") + ex.what(), path, 0, "", ""};
  }
}

std::string describe(const Policy& p) {
  std::string out = "policy " + p.path + "\ncatalog " + p.catalog.path + "\n";
  if (!p.catalog.override_path.empty()) out += "calibration " + p.catalog.override_path + "\n";
  out += "checkpoint roots:";
  for (const auto& r : p.checkpoint_roots) out += " " + r;
  out += p.checkpoint_roots.empty() ? " (none: any directory)\n" : "\n";
  const double mtbf = p.node_mtbf_hours > 0 ? p.node_mtbf_hours : p.catalog.assumptions.node_mtbf_hours;
  out += "node MTBF " + text::num(mtbf, 0) + " h, signal " + std::to_string(p.signal_before_s) + " s before the end\n";
  out += "plans use ZeRO stages up to " + std::to_string(p.max_zero_stage) + " (max_zero_stage)\n";
  out += std::string("mode ") + (p.shadow ? "shadow (judge and log, change nothing)" : "enforce") + "\n";
  out += "shared GPU GRES: " +
         (p.shared_gres.shard_per_gpu > 0 ? "shard:" + std::to_string(p.shared_gres.shard_per_gpu) : std::string("shard ignored")) +
         ", " + (p.shared_gres.mps_per_gpu > 0 ? "mps:" + std::to_string(p.shared_gres.mps_per_gpu) : std::string("mps ignored")) + "\n";
  if (!p.trusted_users.empty()) {
    out += "trusted for updates:";
    for (const auto& u : p.trusted_users) out += " " + u;
    out += "\n";
  }
  if (!p.audit_file.empty()) out += "audit file " + p.audit_file + "\n";
  out += "probes: " + (p.probe_store.empty() ? std::string("no store (measurements not used)") : "store " + p.probe_store) +
         ", max age " + text::num(p.probe_max_age_s / 86400, 3) + " d, a probe job at most " +
         (p.probe_max_gpu_hours > 0 ? text::num(p.probe_max_gpu_hours, 3) + " GPU-hours" : std::string("(no absolute cap)")) +
         (p.probe_max_fraction > 0 ? " and " + text::num(100 * p.probe_max_fraction, 3) + "% of the training job's" : std::string()) +
         "\n";
  for (const auto& part : p.partitions) {
    out += "\n[partition " + part.name + "]" + (part.is_default ? " (default)" : "") + "\n";
    const double price = part.capacity == Capacity::spot ? part.inst.spot : part.inst.on_demand;
    out += "  " + part.inst.name + ": " + std::to_string(part.inst.gpus) + "x " + part.gpu.name + ", " +
           to_string(part.capacity) + text::format(" $%.2f/h ($%.3f per GPU-hour), fabric ", price, price / part.inst.gpus) +
           to_string(part.fabric) + "\n";
    out += "  default_time " + std::to_string(part.default_time_min) + " min, max_time " +
           (part.max_time_min > 0 ? std::to_string(part.max_time_min) + " min" : std::string("none")) +
           (part.max_nodes > 0 ? ", max_nodes " + std::to_string(part.max_nodes) : std::string()) +
           (part.exclusive ? ", exclusive nodes" : "") + (part.shadow != p.shadow ? (part.shadow ? ", mode shadow" : ", mode enforce") : "") +
           (part.topk_compression != "auto" ? ", topk_compression " + part.topk_compression : std::string()) + "\n";
    for (int i = 0; i < kRuleCount; ++i) {
      const Rule& r = part.rules[i];
      const auto id = static_cast<RuleId>(i);
      out += text::format("  %-30s ", to_string(id));
      if (!r.enabled) out += "off\n";
      else out += (rule_has_threshold(id) ? text::num(r.threshold, 3) + " " : std::string()) + to_string(r.action) + "\n";
    }
  }
  return out;
}

}  // namespace scaleguard
