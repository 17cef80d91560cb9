#include "common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include "scaleguard/build_info.h"
#include "scaleguard/text.h"

namespace scaleguard::cli {

namespace {
std::string config_path(const po::variables_map& vm, const char* option, const char* env, const char* file) {
  return config_file(vm.count(option) ? vm[option].as<std::string>() : std::string(), env, file);
}
}  // namespace

std::string policy_path(const po::variables_map& vm) {
  return config_path(vm, "policy", "SCALEGUARD_POLICY", "policy.ini");
}
std::string catalog_path(const po::variables_map& vm) {
  return config_path(vm, "catalog", "SCALEGUARD_CATALOG", "catalog.ini");
}

std::string config_file(const std::string& given, const char* env, const char* fallback) {
  if (!given.empty()) return given;
  if (const char* v = std::getenv(env); v && *v) return v;
  return fallback ? std::string(build_config_dir()) + "/" + fallback : std::string();
}

std::string calibration_path(const po::variables_map& vm) {
  if (vm.count("calibration")) return vm["calibration"].as<std::string>();
  if (const char* e = std::getenv("SCALEGUARD_CALIBRATION"); e && *e) return e;
  return "";
}

std::optional<int> parse_args(int argc, char** argv, const po::options_description& desc, po::variables_map& vm,
                              const char* usage) {
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard %s: %s\n%s (see --help)\n", argv[0], e.what(), usage);
    return 2;
  }
  return std::nullopt;
}

void print_error(const char* verb, const Error& e) { std::fprintf(stderr, "scaleguard %s: %s\n", verb, e.str().c_str()); }

std::optional<int> int_option(const po::variables_map& vm, const char* name, int lo, int hi) {
  const std::string text = vm[name].as<std::string>();
  auto v = parse_count(text);
  if (!v || v.value() != std::floor(v.value()) || v.value() < lo || v.value() > hi) {
    std::fprintf(stderr, "scaleguard: --%s=%s: expected a whole number from %d to %d\n", name, text.c_str(), lo, hi);
    return std::nullopt;
  }
  return static_cast<int>(v.value());
}

void add_workload_options(po::options_description& desc) {
  desc.add_options()
      ("model", po::value<std::string>()->required(), "model spec: 350M, 7B, llama2-7b, layers=..,hidden=..,heads=..")
      ("tokens", po::value<std::string>(), "training tokens, e.g. 40B")
      ("single-gpu-hours", po::value<std::string>(), "or: hours the run takes on one GPU, e.g. 11h, 2w")
      ("gpu-type", po::value<std::string>(), "GPU type from the catalog, e.g. A100-80GB")
      ("instance", po::value<std::string>(), "instance type from the catalog, e.g. p4d.24xlarge")
      ("gpus", po::value<std::string>(), "GPU count (default: the planner chooses)")
      ("gpus-per-node", po::value<std::string>(), "GPUs per node (default: the instance's)")
      ("global-batch", po::value<std::string>(), "sequences per optimizer step, a constraint (default: DeepSeek LLM's batch law for the run, at most 4M tokens)")
      ("seq", po::value<std::string>(), "sequence length (default: the model's)")
      ("eval-every", po::value<std::string>(), "evaluate every N optimizer steps (with --eval-tokens)")
      ("eval-tokens", po::value<std::string>(), "tokens per evaluation, forward only, e.g. 20M")
      ("precision", po::value<std::string>(), "fp32, fp16 or bf16 (default bf16)")
      ("optimizer", po::value<std::string>(), "adam or sgd (default adam)")
      ("tp", po::value<std::string>(), "pin tensor-parallel degree")
      ("pp", po::value<std::string>(), "pin pipeline-parallel degree")
      ("dp", po::value<std::string>(), "pin data-parallel degree")
      ("zero", po::value<std::string>(), "pin ZeRO stage 0-3")
      ("max-zero-stage", po::value<std::string>(),
       "highest ZeRO stage to consider, 0-3 (default 3, as the shipped policy: scaleguard-run implements "
       "all of them; 1 plans for a runner that shards only the optimizer state)")
      ("micro-batch", po::value<std::string>(), "pin micro-batch size (sequences)")
      ("recompute", po::value<std::string>(), "pin activation recompute: none, selective, full")
      ("interleave", po::value<std::string>(), "interleaved pipeline: chunks per rank (default 1 = plain 1F1B)")
      ("strategy", po::value<std::string>(), "pin the strategy: single, ddp, zero, pipeline, tensor, hybrid")
      ("deadline", po::value<std::string>(), "wall hours you can wait (the planner adds GPUs to meet it)")
      ("mtbf-hours", po::value<std::string>(), "node MTBF (default: the catalog's)")
      ("spot", "price and plan for spot capacity")
      ("policy", po::value<std::string>(),
       "plan inside this cluster policy's partition: its GPUs, max_nodes, max_time and rules (default "
       "$SCALEGUARD_POLICY; without --instance/--gpu-type the installed configs/policy.ini)")
      ("partition,p", po::value<std::string>(), "partition of the policy (default: the policy's default partition)")
      ("catalog", po::value<std::string>(), "catalog file (default $SCALEGUARD_CATALOG or configs/catalog.ini)")
      ("calibration", po::value<std::string>(),
       "catalog override written by scaleguard calibrate (default $SCALEGUARD_CALIBRATION)")
      ("json", "machine-readable output");
}

std::optional<PlanSetup> plan_setup(const char* verb, const po::variables_map& vm) {
  PlanSetup s;
  auto text_opt = [&](const char* k) { return vm.count(k) ? vm[k].as<std::string>() : std::string(); };
  // The policy, as decide reads it: --policy, else $SCALEGUARD_POLICY; with no hardware named
  // at all, the installed policy (its default partition's hardware). --instance or --gpu-type
  // alone is a what-if outside any cluster.
  const char* env_policy = std::getenv("SCALEGUARD_POLICY");
  const bool hardware_named = vm.count("instance") || vm.count("gpu-type");
  if (vm.count("policy") || (env_policy && *env_policy) || !hardware_named) {
    auto pol = load_policy(policy_path(vm), text_opt("catalog"), calibration_path(vm));
    if (!pol) return print_error(verb, pol.error()), std::nullopt;
    s.policy = pol.value();
    s.partition = vm.count("partition") ? s.policy->find_partition(text_opt("partition")) : s.policy->default_partition();
    if (!s.partition)
      return print_error(verb, Error{vm.count("partition") ? "partition '" + text_opt("partition") + "' is not in the policy"
                                                           : std::string("the policy has no default partition"),
                                     s.policy->path, 0, "partition", "name one with --partition"}),
             std::nullopt;
    s.catalog = s.policy->catalog;
  } else if (vm.count("partition")) {
    return print_error(verb, Error{"--partition needs a policy", "", 0, "partition", "add --policy FILE"}), std::nullopt;
  } else {
    auto cat = load_catalog(catalog_path(vm), calibration_path(vm));
    if (!cat) return print_error(verb, cat.error()), std::nullopt;
    s.catalog = std::move(cat).value();
  }
  auto model = parse_model_spec(vm["model"].as<std::string>(), s.catalog);
  if (!model) return print_error(verb, model.error()), std::nullopt;
  s.workload.model = model.value();
  if (vm.count("precision")) {
    auto p = parse_precision(text_opt("precision"));
    if (!p) return print_error(verb, p.error()), std::nullopt;
    s.workload.model.precision = p.value();
  }
  if (vm.count("optimizer")) {
    auto o = parse_optimizer(text_opt("optimizer"));
    if (!o) return print_error(verb, o.error()), std::nullopt;
    s.workload.model.optimizer = o.value();
  }
  if (vm.count("seq")) {
    auto v = int_option(vm, "seq", 16, 1 << 20);
    if (!v) return std::nullopt;
    s.workload.model.seq = *v;
  }
  auto gpn = vm.count("gpus-per-node") ? int_option(vm, "gpus-per-node", 1, 64) : std::optional<int>(0);
  if (!gpn) return std::nullopt;
  if (s.partition) {
    // The partition's hardware; a named instance or GPU type must be the partition's.
    const Partition& part = *s.partition;
    if (vm.count("instance") && text_opt("instance") != part.inst.name)
      return print_error(verb, Error{"partition " + part.name + " has " + part.inst.name + ", not " + text_opt("instance"),
                                     s.policy->path, 0, "instance", "drop --instance, or pick the partition that has it (--partition)"}),
             std::nullopt;
    if (vm.count("gpu-type") && !part.gpu.matches(text_opt("gpu-type")))
      return print_error(verb, Error{"partition " + part.name + " has " + part.gpu.name + " GPUs, not " + text_opt("gpu-type"),
                                     s.policy->path, 0, "gpu-type", "drop --gpu-type, or pick another --partition"}),
             std::nullopt;
    s.hardware = partition_hardware(*s.policy, part);
    if (*gpn > 0) s.hardware.gpus_per_node = *gpn;
    s.goals = partition_goals(*s.policy, part);
    s.hardware.spot = s.hardware.spot || vm.count("spot") > 0;
  } else {
    auto hw = hardware_for(s.catalog, text_opt("gpu-type"), text_opt("instance"), *gpn);
    if (!hw) return print_error(verb, hw.error()), std::nullopt;
    s.hardware = hw.value();
    s.hardware.spot = vm.count("spot") > 0;
  }
  if (vm.count("mtbf-hours")) {
    auto h = parse_hours(text_opt("mtbf-hours"));
    if (!h) return print_error(verb, Error{h.error().message, "", 0, "--mtbf-hours", h.error().hint}), std::nullopt;
    s.hardware.node_mtbf_hours = h.value();
  }
  if (vm.count("global-batch")) {
    auto v = int_option(vm, "global-batch", 1, 1 << 24);
    if (!v) return std::nullopt;
    s.workload.global_batch = *v;
  }
  if (vm.count("eval-every") != vm.count("eval-tokens"))
    return print_error(verb, Error{"--eval-every and --eval-tokens go together", "", 0, "",
                                   "e.g. --eval-every 1000 --eval-tokens 20M: 20M tokens every 1000 steps"}),
           std::nullopt;
  if (vm.count("eval-every")) {
    auto every = int_option(vm, "eval-every", 1, kMaxEvalEvery);
    if (!every) return std::nullopt;
    auto t = parse_count(text_opt("eval-tokens"));
    if (t && !(t.value() > 0)) t = Error{"must be positive", "", 0, "", "e.g. 20M"};
    if (!t) return print_error(verb, Error{t.error().message, "", 0, "--eval-tokens", t.error().hint}), std::nullopt;
    s.workload.eval_interval = *every;
    s.workload.eval_tokens = t.value();
  }
  if (vm.count("gpus")) {
    auto v = int_option(vm, "gpus", 1, s.goals.max_gpus);
    if (!v) return std::nullopt;
    s.gpus = *v;
    // A plan the cluster would refuse is never proposed: say what it allows.
    if (s.gpus > s.max_gpus())
      return print_error(verb, Error{text::format("%d GPUs is more than partition %s allows: %d node(s) x %d GPUs (max_nodes)",
                                                  s.gpus, s.partition->name.c_str(), s.partition->max_nodes,
                                                  s.hardware.gpus_per_node),
                                     s.policy->path, 0, "gpus", text::format("ask for at most %d GPUs", s.max_gpus())}),
             std::nullopt;
  }
  for (auto [name, slot, hi] : {std::tuple{"tp", &s.pins.tp, 64}, std::tuple{"pp", &s.pins.pp, 1000},
                                std::tuple{"dp", &s.pins.dp, 65536}, std::tuple{"micro-batch", &s.pins.micro_batch, 1 << 16},
                                std::tuple{"interleave", &s.pins.interleave, 64}}) {
    if (!vm.count(name)) continue;
    auto v = int_option(vm, name, 1, hi);
    if (!v) return std::nullopt;
    *slot = *v;
  }
  // Like decide() under the shipped policy (max_zero_stage = 3, what scaleguard-run
  // executes), or the policy's; --max-zero-stage 1 plans for a runner that shards only the
  // optimizer state.
  if (!s.policy) s.goals.max_zero_stage = 3;
  if (vm.count("max-zero-stage")) {
    auto v = int_option(vm, "max-zero-stage", 0, 3);
    if (!v) return std::nullopt;
    s.goals.max_zero_stage = *v;
  }
  if (vm.count("zero")) {
    const std::string z = text_opt("zero");
    if (z != "0" && z != "1" && z != "2" && z != "3")
      return print_error(verb, Error{"--zero=" + z + " is not a ZeRO stage", "", 0, "", "0, 1, 2 or 3"}), std::nullopt;
    s.pins.zero = z[0] - '0';
    if (*s.pins.zero > s.goals.max_zero_stage)
      return print_error(verb, Error{"--zero=" + z + " is above --max-zero-stage " + std::to_string(s.goals.max_zero_stage) +
                                         " (scaleguard-run implements ZeRO stages up to 1)",
                                     "", 0, "", "add --max-zero-stage " + z + " to plan for a runner that implements it"}),
             std::nullopt;
  }
  if (vm.count("recompute")) {
    auto r = parse_recompute(text_opt("recompute"));
    if (!r) return print_error(verb, r.error()), std::nullopt;
    s.pins.recompute = r.value();
  }
  if (vm.count("strategy")) {
    auto st = parse_strategy(text_opt("strategy"));
    if (!st) return print_error(verb, st.error()), std::nullopt;
    if (st.value() != "auto") s.pins.strategy = strategy_from_string(st.value()).value();
  }
  if (vm.count("deadline")) {
    auto h = parse_hours(text_opt("deadline"));
    if (!h) return print_error(verb, Error{h.error().message, "", 0, "--deadline", h.error().hint}), std::nullopt;
    s.goals.deadline_hours = h.value();
  }
  if (vm.count("tokens") && vm.count("single-gpu-hours"))
    return print_error(verb, Error{"give --tokens or --single-gpu-hours, not both", "", 0, "", ""}), std::nullopt;
  if (vm.count("tokens")) {
    auto t = parse_count(text_opt("tokens"));
    if (!t) return print_error(verb, Error{t.error().message, "", 0, "--tokens", t.error().hint}), std::nullopt;
    s.workload.tokens = t.value();
  } else if (vm.count("single-gpu-hours")) {
    auto h = parse_hours(text_opt("single-gpu-hours"));
    if (!h) return print_error(verb, Error{h.error().message, "", 0, "--single-gpu-hours", h.error().hint}), std::nullopt;
    // The batch from the law on the first-principles estimate of those hours (as decide()
    // sizes it), then tokens scaled so the one-GPU plan (whatever recompute it needs) takes
    // exactly that long.
    Workload sized = s.workload;
    sized.tokens = tokens_for_single_gpu_hours(s.workload.model, s.hardware.gpu, h.value());
    resolve_batch(sized);
    s.workload.global_batch = sized.global_batch, s.workload.batch_law_tokens = sized.batch_law_tokens;
    Workload per_1e9 = s.workload;
    per_1e9.tokens = 1e9;
    auto one = best_plan_at(per_1e9, s.hardware, 1, Pins{}, s.goals);
    s.workload.tokens = one ? 1e9 * h.value() / one.value().train_hours
                            : tokens_for_single_gpu_hours(s.workload.model, s.hardware.gpu, h.value());
  } else {
    return print_error(verb, Error{"how much training? give --tokens or --single-gpu-hours", "", 0, "", ""}),
           std::nullopt;
  }
  resolve_batch(s.workload);  // one batch for every plan this verb shows (as decide() does)
  if (s.pins.tp && s.pins.pp && s.pins.dp) {
    const long long n = 1LL * *s.pins.tp * *s.pins.pp * *s.pins.dp;
    if (s.gpus > 0 && n != s.gpus)
      return print_error(verb, Error{"--tp x --pp x --dp != --gpus", "", 0, "", "make them agree or drop --gpus"}),
             std::nullopt;
    if (n > s.goals.max_gpus) return print_error(verb, Error{"tp x pp x dp is too large", "", 0, "", ""}), std::nullopt;
    s.gpus = static_cast<int>(n);
  }
  return s;
}

int PlanSetup::max_gpus() const {
  if (!partition || partition->max_nodes <= 0) return goals.max_gpus;
  return static_cast<int>(std::min<long long>(goals.max_gpus, 1LL * partition->max_nodes * hardware.gpus_per_node));
}

std::string utc_text(std::int64_t t, const char* format) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  return std::strftime(buf, sizeof buf, format, &tm) ? buf : "";
}

}  // namespace scaleguard::cli
