// `scaleguard decide`: exactly what job_submit/scaleguard decides for a job (same decide()).
// Exit code 0 accept/warn, 3 rewrite, 4 reject (1 config error, 2 usage error).
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>

#include "common.h"
#include "scaleguard/measurement.h"
#include "scaleguard/model.h"
#include "scaleguard/probe_store.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

// A Slurm GPU count that may carry a type: "8" or "a100:8".
bool gpu_option(const po::variables_map& vm, const char* name, int& count, std::string& type) {
  if (!vm.count(name)) return true;
  // Slurm wants the count here ("--gpus=a100" is an sbatch error, not one GPU of type a100).
  const std::string value = vm[name].as<std::string>();
  const std::string count_text = value.substr(value.rfind(':') + 1);
  if (count_text.empty() || count_text.find_first_not_of("0123456789") != std::string::npos) {
    std::fprintf(stderr, "scaleguard decide: --%s=%s: expected N or TYPE:N, e.g. 8 or a100:8\n", name, value.c_str());
    return false;
  }
  auto t = parse_gpu_tres("gpu:" + value);
  if (!t) {
    std::fprintf(stderr, "scaleguard decide: --%s: %s (%s)\n", name, t.error().message.c_str(), t.error().hint.c_str());
    return false;
  }
  count = t.value().count;
  if (!t.value().type.empty()) type = t.value().type;
  return true;
}

int run(int argc, char** argv) {
  po::options_description desc("scaleguard decide options");
  desc.add_options()("help,h", "this help")
      ("policy", po::value<std::string>(), "policy file (default $SCALEGUARD_POLICY or configs/policy.ini)")
      ("catalog", po::value<std::string>(), "catalog file (default: the policy's)")
      ("calibration", po::value<std::string>(),
       "catalog override written by scaleguard calibrate (default $SCALEGUARD_CALIBRATION, else the policy's)")
      ("gpus,G", po::value<std::string>(), "GPUs for the job: N or TYPE:N")
      ("gres", po::value<std::string>(), "generic resources per node: gpu:N, gpu:TYPE:N")
      ("gpus-per-node", po::value<std::string>(), "GPUs per node: N or TYPE:N")
      ("gpus-per-task", po::value<std::string>(), "GPUs per task: N or TYPE:N")
      ("nodes,N", po::value<std::string>(), "nodes: N or MIN-MAX")
      ("ntasks,n", po::value<std::string>(), "tasks")
      ("time,t", po::value<std::string>(), "time limit in Slurm's forms")
      ("partition,p", po::value<std::string>(), "partition (default: the policy's default)")
      ("user", po::value<std::string>(), "user name (for messages)")
      ("train-model", po::value<std::string>(), "model spec")
      ("train-tokens", po::value<std::string>(), "training tokens")
      ("train-single-gpu-hours", po::value<std::string>(), "hours on one GPU")
      ("train-strategy", po::value<std::string>(), "auto|single|ddp|zero|pipeline|tensor|hybrid")
      ("train-deadline", po::value<std::string>(), "wall hours you can wait")
      ("train-ckpt-dir", po::value<std::string>(), "checkpoint directory")
      ("train-ckpt-interval", po::value<std::string>(), "auto or minutes")
      ("train-probe", "a --train-probe job: judged on the probe budget")
      ("train-eval-every", po::value<std::string>(), "steps between evaluations (with --train-eval-tokens)")
      ("train-eval-tokens", po::value<std::string>(), "tokens per evaluation: 20M, 1e8")
      ("spare-nodes", po::value<std::string>(),
       "--train-spare-nodes: nodes of the job kept idle for in-job restarts (planned without, charged with)")
      ("train-spare-nodes", po::value<std::string>(), "the same as --spare-nodes")
      ("store", po::value<std::string>(), "probe store to read measurements from (default: the policy's probe_store)")
      ("no-probes", "ignore probe measurements (judge on the model alone)")
      ("json", "machine-readable output");
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard decide [--policy FILE] [--gpus N] [--gres gpu:N] [--nodes N] [--time T] [--partition P]\n"
      "                         [--train-model SPEC --train-tokens N | --train-single-gpu-hours H] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto policy = load_policy(policy_path(vm), vm.count("catalog") ? vm["catalog"].as<std::string>() : "",
                            calibration_path(vm));
  if (!policy) {
    print_error("decide", policy.error());
    return 1;
  }
  auto text_opt = [&](const char* k) { return vm.count(k) ? vm[k].as<std::string>() : std::string(); };
  auto fail = [](const char* option, const Error& e) {
    std::fprintf(stderr, "scaleguard decide: --%s: %s%s\n", option, e.message.c_str(),
                 e.hint.empty() ? "" : (" (" + e.hint + ")").c_str());
    return 2;
  };
  JobRequest job;
  if (!gpu_option(vm, "gpus", job.gpus_total, job.gpu_type) ||
      !gpu_option(vm, "gpus-per-node", job.gpus_per_node, job.gpu_type) ||
      !gpu_option(vm, "gpus-per-task", job.gpus_per_task, job.gpu_type))
    return 2;
  if (vm.count("gres")) {
    auto t = parse_gpu_tres(text_opt("gres"));
    if (!t) return fail("gres", t.error());
    job.gpus_per_node = t.value().count;
    if (!t.value().type.empty()) job.gpu_type = t.value().type;
  }
  if (vm.count("nodes")) {
    const std::string n = text_opt("nodes");
    const auto dash = n.find('-');
    auto lo = parse_count(n.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : parse_count(n.substr(dash + 1));
    if (!lo || !hi || lo.value() > 100000 || hi.value() > 100000 || lo.value() > hi.value())
      return fail("nodes", Error{"'" + n + "' is not a node count", "", 0, "", "N or MIN-MAX, e.g. 2 or 1-4"});
    job.nodes_min = static_cast<int>(lo.value());
    job.nodes_max = static_cast<int>(hi.value());
  }
  if (vm.count("ntasks")) {
    auto v = int_option(vm, "ntasks", 1, 1 << 20);
    if (!v) return 2;
    job.ntasks = *v;
  }
  if (vm.count("time")) {
    auto m = parse_slurm_minutes(text_opt("time"));
    if (!m) return fail("time", m.error());
    job.time_limit_min = m.value();
  }
  job.partition = text_opt("partition");
  job.user = text_opt("user");
  job.model = text_opt("train-model");
  if (vm.count("train-tokens")) {
    auto t = parse_count(text_opt("train-tokens"));
    if (!t) return fail("train-tokens", t.error());
    job.tokens = t.value();
  }
  if (vm.count("train-single-gpu-hours")) {
    auto h = parse_hours(text_opt("train-single-gpu-hours"));
    if (!h) return fail("train-single-gpu-hours", h.error());
    job.single_gpu_hours = h.value();
  }
  if (vm.count("train-strategy")) {
    auto s = parse_strategy(text_opt("train-strategy"));
    if (!s) return fail("train-strategy", s.error());
    job.strategy = s.value();
  }
  if (vm.count("train-deadline")) {
    auto h = parse_hours(text_opt("train-deadline"));
    if (!h) return fail("train-deadline", h.error());
    job.deadline_hours = h.value();
  }
  if (vm.count("train-eval-every")) {
    auto v = int_option(vm, "train-eval-every", 1, kMaxEvalEvery);
    if (!v) return 2;
    job.eval_interval = *v;
  }
  if (vm.count("train-eval-tokens")) {
    auto t = parse_count(text_opt("train-eval-tokens"));
    if (t && !(t.value() > 0)) t = Error{"must be positive", "", 0, "", "e.g. 20M"};
    if (!t) return fail("train-eval-tokens", t.error());
    job.eval_tokens = t.value();
  }
  for (const char* name : {"spare-nodes", "train-spare-nodes"}) {
    if (!vm.count(name)) continue;
    auto v = int_option(vm, name, 0, kMaxSpareNodes);
    if (!v) return 2;
    if (job.spare_nodes > 0 && *v != job.spare_nodes) {
      std::fprintf(stderr, "scaleguard decide: --spare-nodes and --train-spare-nodes differ\n");
      return 2;
    }
    job.spare_nodes = *v;
  }
  job.ckpt_dir = text_opt("train-ckpt-dir");
  job.probe = vm.count("train-probe") > 0;
  if (vm.count("train-ckpt-interval") && text_opt("train-ckpt-interval") != "auto") {
    auto v = int_option(vm, "train-ckpt-interval", 1, 525600);
    if (!v) return 2;
    job.ckpt_interval_min = *v;
  }
  // What probes measured, read as job_submit reads it: root's and trusted_users' records for
  // everyone, the caller's own for the caller.
  const std::string store = vm.count("store") ? text_opt("store") : policy.value()->probe_store;
  if (!store.empty() && !job.model.empty() && !vm.count("no-probes")) {
    if (auto m = parse_model_spec(job.model, policy.value()->catalog)) {
      std::vector<uid_t> admins{0};
      for (const auto& u : policy.value()->trusted_users) {
        passwd pw{}, *out = nullptr;
        char buf[2048];
        if (u.find_first_not_of("0123456789") == std::string::npos && !u.empty() && u.size() < 10)
          admins.push_back(static_cast<uid_t>(std::stoul(u)));
        else if (getpwnam_r(u.c_str(), &pw, buf, sizeof buf, &out) == 0 && out)
          admins.push_back(out->pw_uid);
      }
      probe::StoreReader reader;
      probe::ReadReport report;
      job.measurements = reader.lookup(store, model_fingerprint(m.value()), getuid(), admins, &report);
      job.now = static_cast<long long>(std::time(nullptr));
      for (const auto& p : report.problems) std::fprintf(stderr, "scaleguard decide: %s\n", p.c_str());
    }
  }
  const Decision d = decide(job, *policy.value());
  if (vm.count("json")) {
    std::cout << to_json(d) << "\n";
  } else {
    std::printf("%s\n\n%s\n", d.summary.c_str(), d.message.c_str());
    if (!d.rules.empty()) std::printf("\nrules:\n");
    for (const auto& r : d.rules) std::printf("  %-30s %-7s %s\n", r.id.c_str(), to_string(r.action), r.detail.c_str());
    if (d.action == Action::rewrite) {
      std::printf("\nrewrite:");
      if (d.rewrite.gpus_total) std::printf(" --gpus=%d", *d.rewrite.gpus_total);
      if (d.rewrite.gpus_per_node) std::printf(" --gpus-per-node=%d", *d.rewrite.gpus_per_node);
      if (d.rewrite.nodes) std::printf(" --nodes=%d", *d.rewrite.nodes);
      if (d.rewrite.time_limit_min) std::printf(" --time=%d", *d.rewrite.time_limit_min);
      if (d.rewrite.partition) std::printf(" --partition=%s", d.rewrite.partition->c_str());
      if (d.rewrite.requeue) std::printf(" --requeue");
      if (d.rewrite.signal_before_s > 0) std::printf(" --signal=B:USR1@%d", d.rewrite.signal_before_s);
      std::printf("\n");
    }
    if (!d.plan_env.empty()) std::printf("\nenvironment:\n");
    for (const auto& [k, v] : d.plan_env) std::printf("  %s=%s\n", k.c_str(), v.c_str());
  }
  switch (d.action) {
    case Action::accept:
    case Action::warn: return 0;
    case Action::rewrite: return 3;
    case Action::reject: return 4;
  }
  return 1;
}

const bool registered = register_verb({"decide", "what job_submit/scaleguard decides for a job (exit 0/3/4)", run});

}  // namespace
}  // namespace scaleguard::cli
