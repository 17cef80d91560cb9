// `scaleguard probe`: measure how a model really scales before it asks for many GPUs (issue 16).
// Runs scaleguard-run on 1 rank, then on 2 ranks (2 nodes when the allocation has them), at
// the same per-rank micro-batch, reads the runner's metrics, and stores speedup, comm ratio,
// step times and peak memory in the probe store, where decide() (CLI and job_submit) finds them.
// The probe's cost (ranks x wall time) is bounded by a GPU-hour budget it stops within.
// A record keeps the hardware it was measured on (issue 37): the device the ranks used (from
// the runner's own log) and the GPU type; it is stored only under an instance of that hardware,
// so a CPU run never becomes a GPU instance's measurement.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "common.h"
#include "scaleguard/measurement.h"
#include "scaleguard/model.h"
#include "scaleguard/probe_store.h"
#include "verbs.h"
#include "scaleguard/build_info.h"

namespace scaleguard::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The runner beside this binary (build tree: ../runner/, installed: same directory), else PATH.
std::string default_runner() {
  if (const char* v = std::getenv("SCALEGUARD_RUN"); v && *v) return v;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    for (const std::string& c : {dir + "/../runner/scaleguard-run", dir + "/scaleguard-run"})
      if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "scaleguard-run";
}

struct RunResult {
  bool ok = false;
  bool stopped = false;          // the budget ran out: stopped with SIGTERM
  double wall_s = 0;
  std::vector<double> step_ms, comm_ms;
  double peak_bytes = 0;
  std::string log;               // path of its output
};

// The run in flight: SIGINT/SIGTERM to the probe are passed on to its process group, so an
// interrupted probe leaves no launcher or rank behind.
volatile sig_atomic_t g_child_pgid = 0;
extern "C" void forward_signal(int sig) {
  if (g_child_pgid > 0) kill(-g_child_pgid, SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

// Runs argv with stdout+stderr into `log`; SIGTERM to its process group after `limit_s`
// (the runner stops at the end of the step and exits 85), SIGKILL 20 s later.
int spawn(const std::vector<std::string>& argv, const std::string& log, double limit_s, bool& stopped) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  g_child_pgid = pid;
  const double start = now_s();
  int status = 0;
  bool termed = false;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    const double t = now_s() - start;
    if (!termed && t > limit_s) kill(-pid, SIGTERM), termed = stopped = true;
    if (termed && t > limit_s + 20) kill(-pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  g_child_pgid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void read_metrics(const std::string& path, RunResult& r) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j.contains("step_ms")) continue;
    if (j["step"].get<long long>() < 2) continue;  // the first step warms caches and allocators
    r.step_ms.push_back(j["step_ms"].get<double>());
    r.comm_ms.push_back(j.value("comm_ms", 0.0));
  }
}

void read_memory(const std::string& log, RunResult& r) {
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  static const std::regex re(
      "parameters ([0-9]+), gradients ([0-9]+), optimizer state ([0-9]+) bytes; step peak ([0-9]+) bytes");
  std::smatch m;
  const std::string text = ss.str();
  if (std::regex_search(text, m, re))
    r.peak_bytes = std::stod(m[1]) + std::stod(m[2]) + std::stod(m[3]) + std::stod(m[4]);
}

// The device the ranks trained on, from the runner's "rank R/W ... device cuda|cpu" lines:
// "" when a log has none or the ranks disagree.
std::string ranks_device(const std::vector<std::string>& logs) {
  static const std::regex re("scaleguard-run: rank [0-9]+/[0-9]+ .* device (cuda|cpu) threads");
  std::string device;
  for (const auto& log : logs) {
    std::ifstream in(log);
    bool any = false;
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, re)) continue;
      any = true;
      if (device.empty()) device = m[1];
      else if (device != m[1]) return "";
    }
    if (!any) return "";
  }
  return device;
}

// The catalog GPU type whose name's words ("A100", "40GB") all appear in `reported` (what
// nvidia-smi names it: "NVIDIA A100-SXM4-40GB"); "" when none or more than one does.
std::string gpu_type_named(const Catalog& cat, const std::string& reported) {
  auto words = [](const std::string& s) {
    std::vector<std::string> out;
    std::string w;
    for (char c : s + " ") {
      if (std::isalnum(static_cast<unsigned char>(c))) w += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      else if (!w.empty()) out.push_back(w), w.clear();
    }
    return out;
  };
  const auto have = words(reported);
  std::string found;
  for (const auto& g : cat.gpus) {
    if (g.host) continue;
    const auto need = words(g.name);
    bool all = !need.empty();
    for (const auto& w : need) all = all && std::find(have.begin(), have.end(), w) != have.end();
    if (!all) continue;
    if (!found.empty()) return "";
    found = g.name;
  }
  return found;
}

// What nvidia-smi calls this node's first GPU ("" without one).
std::string nvidia_smi_name() {
  FILE* p = popen("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", "r");
  if (!p) return "";
  char line[256] = {0};
  std::string name = fgets(line, sizeof line, p) ? line : "";
  pclose(p);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Setup {
  std::string runner, launcher, device, workdir;
  ModelSpec model;
  int micro_batch = 1, threads = 1, nodes_avail = 1;
};

RunResult run_one(const Setup& s, int ranks, int nodes, int steps, double limit_s, const std::string& tag) {
  RunResult r;
  const std::string metrics = s.workdir + "/" + tag + ".jsonl";
  r.log = s.workdir + "/" + tag + ".log";
  std::vector<std::string> argv;
  if (s.launcher == "srun") {
    argv = {"srun", "--mpi=pmix", "-N" + std::to_string(nodes), "-n" + std::to_string(ranks),
            "--ntasks-per-node=" + std::to_string((ranks + nodes - 1) / nodes), "--kill-on-bad-exit=1"};
  } else {
    argv = {"mpirun", "-np", std::to_string(ranks), "--bind-to", "none"};
  }
  const long long tokens = std::max<long long>(200000, 4LL * (s.model.seq + 1) * s.micro_batch * ranks * (steps + 2));
  for (const std::string& a :
       {s.runner, std::string("train"), std::string("--model"), std::string("gpt"), std::string("--n-layer"),
        std::to_string(s.model.layers), std::string("--n-head"), std::to_string(s.model.heads),
        std::string("--n-embd"), std::to_string(s.model.hidden), std::string("--seq-len"),
        std::to_string(s.model.seq), std::string("--vocab-size"), std::to_string(s.model.vocab),
        std::string("--precision"), std::string(s.model.precision == Precision::fp32 ? "fp32" : "bf16"),
        std::string("--synthetic"), std::to_string(tokens), std::string("--micro-batch"),
        std::to_string(s.micro_batch), std::string("--global-batch"), std::to_string(s.micro_batch * ranks),
        std::string("--steps"), std::to_string(steps), std::string("--warmup"), std::string("0"),
        std::string("--log-every"), std::string("1"), std::string("--metrics"), metrics, std::string("--quiet"),
        std::string("--verbose"),   // every rank's "device cuda|cpu" line (ranks_device)
        std::string("--memory-report"), std::string("--device"), s.device, std::string("--threads"),
        std::to_string(s.threads)})
    argv.push_back(a);
  const double t0 = now_s();
  const int rc = spawn(argv, r.log, limit_s, r.stopped);
  r.wall_s = now_s() - t0;
  read_metrics(metrics, r);
  read_memory(r.log, r);
  r.ok = (rc == 0 || (r.stopped && rc == 85) || r.stopped) && r.step_ms.size() >= 2;
  return r;
}


int run(int argc, char** argv) {
  po::options_description desc("scaleguard probe options");
  desc.add_options()("help,h", "this help")
      ("model", po::value<std::string>(),
       "model spec, as --train-model (default $SCALEGUARD_TRAIN_MODEL, else the job's --train-model)")
      ("policy", po::value<std::string>(), "policy file (default $SCALEGUARD_POLICY or configs/policy.ini)")
      ("catalog", po::value<std::string>(), "catalog file (default: the policy's)")
      ("store", po::value<std::string>(), "probe store directory (default: the policy's probe_store)")
      ("no-store", "measure and print only")
      ("instance", po::value<std::string>(), "instance type to file the record under (default: the partition's)")
      ("partition,p", po::value<std::string>(), "partition whose instance type applies (default $SLURM_JOB_PARTITION, else the policy's default)")
      ("gpu", po::value<std::string>(), "catalog GPU type a CUDA probe ran on, when nvidia-smi cannot say (checked against the instance's)")
      ("micro-batch", po::value<int>()->default_value(1), "per-rank micro-batch of both runs")
      ("steps", po::value<int>()->default_value(0), "steps per run (0 = from a warm-up and the budget, 4..40)")
      ("max-gpu-hours", po::value<double>(),
       "budget: GPUs x wall time of all runs (default $SCALEGUARD_PROBE_MAX_GPU_HOURS, else the policy's probe_max_gpu_hours)")
      ("launcher", po::value<std::string>()->default_value("auto"), "auto (srun inside a Slurm job, else mpirun), srun or mpirun")
      ("runner", po::value<std::string>(), "scaleguard-run binary (default $SCALEGUARD_RUN, beside scaleguard, or PATH)")
      ("device", po::value<std::string>()->default_value("auto"), "auto | cpu | cuda (passed to scaleguard-run)")
      ("threads", po::value<int>()->default_value(1), "threads per rank (1: ranks, not threads, are compared)")
      ("workdir", po::value<std::string>(), "where the runs' logs and metrics go (default a new directory in $TMPDIR)")
      ("json", "machine-readable output");
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard probe --model SPEC [--policy FILE] [--partition P | --instance TYPE] [--store DIR]\n"
      "                        [--max-gpu-hours H] [--steps N] [--micro-batch M] [--launcher auto|srun|mpirun]\n"
      "                        [--runner PATH] [--device auto|cpu|cuda] [--gpu TYPE] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto policy = load_policy(policy_path(vm), vm.count("catalog") ? vm["catalog"].as<std::string>() : "");
  if (!policy) {
    print_error("probe", policy.error());
    return 1;
  }
  const Policy& pol = *policy.value();
  // Inside a `sbatch --train-probe --train-model=SPEC` job the option is in the environment.
  const std::string spec = vm.count("model") ? vm["model"].as<std::string>()
                                             : env_or("SCALEGUARD_TRAIN_MODEL",
                                                      env_or("_SLURM_SPANK_OPTION_scaleguard_train_model", ""));
  if (spec.empty()) {
    std::fprintf(stderr, "scaleguard probe: --model is required\n%s\n", usage);
    return 2;
  }
  auto model = parse_model_spec(spec, pol.catalog);
  if (!model) {
    print_error("probe", model.error());
    return 2;
  }
  Setup s;
  s.model = model.value();
  s.micro_batch = vm["micro-batch"].as<int>();
  s.threads = vm["threads"].as<int>();
  s.device = vm["device"].as<std::string>();
  s.runner = vm.count("runner") ? vm["runner"].as<std::string>() : default_runner();
  const int steps_opt = vm["steps"].as<int>();
  if (s.micro_batch < 1 || s.micro_batch > 4096 || (steps_opt != 0 && steps_opt < 3) || steps_opt > 10000 ||
      s.threads < 0 || s.threads > 1024) {
    std::fprintf(stderr, "scaleguard probe: --micro-batch (1..4096), --steps (0 or 3..10000) or --threads out of range\n");
    return 2;
  }
  const bool in_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  s.launcher = vm["launcher"].as<std::string>();
  if (s.launcher == "auto") s.launcher = in_slurm ? "srun" : "mpirun";
  if (s.launcher != "srun" && s.launcher != "mpirun") {
    std::fprintf(stderr, "scaleguard probe: --launcher: expected auto, srun or mpirun\n");
    return 2;
  }
  s.nodes_avail = std::max(1, std::atoi(env_or("SLURM_JOB_NUM_NODES", "1").c_str()));
  const int nodes = s.launcher == "srun" && s.nodes_avail >= 2 ? 2 : 1;

  // Instance type: --instance, else the partition's in the policy (--partition, inside a job
  // its partition, else the policy's default), and the hardware a record of it must come from.
  std::string instance = vm.count("instance") ? vm["instance"].as<std::string>() : "";
  if (instance.empty()) {
    const std::string pname = vm.count("partition") ? vm["partition"].as<std::string>() : env_or("SLURM_JOB_PARTITION", "");
    const Partition* part = pname.empty() ? pol.default_partition() : pol.find_partition(pname);
    if (!part) {
      std::fprintf(stderr, "scaleguard probe: partition '%s' is not in the policy %s: give --partition or --instance\n",
                   pname.c_str(), pol.path.c_str());
      return 2;
    }
    instance = part->inst.name;
  }
  const Instance* inst = pol.catalog.find_instance(instance);
  const GpuType* want = inst ? pol.catalog.find_gpu(inst->gpu) : nullptr;
  if (!want) {
    std::fprintf(stderr, "scaleguard probe: instance type '%s' is not in the catalog %s\n", instance.c_str(),
                 pol.catalog.path.c_str());
    return 2;
  }
  const bool storing = !vm.count("no-store");
  // A device the instance does not have: refused before the budget is spent (issue 37).
  if (storing && (s.device == "cpu" || s.device == "cuda") && s.device != device_of(*want)) {
    std::fprintf(stderr,
                 "scaleguard probe: a %s measurement is not stored as %s's: its hardware is %s (%s). A probe measures "
                 "the hardware it runs on; probe on that hardware (--device %s), or measure only with --no-store\n",
                 s.device == "cpu" ? "CPU" : "GPU", instance.c_str(), want->host ? "a CPU host" : "GPU", want->name.c_str(),
                 device_of(*want));
    return 2;
  }
  double budget_h = pol.probe_max_gpu_hours;
  if (const char* b = std::getenv("SCALEGUARD_PROBE_MAX_GPU_HOURS"); b && *b) budget_h = std::atof(b);
  if (vm.count("max-gpu-hours")) budget_h = vm["max-gpu-hours"].as<double>();
  if (!(budget_h > 0) || budget_h > 1e6) {
    std::fprintf(stderr, "scaleguard probe: no budget: give --max-gpu-hours (> 0)\n");
    return 2;
  }
  const std::string store = vm.count("store") ? vm["store"].as<std::string>() : pol.probe_store;
  if (store.empty() && !vm.count("no-store")) {
    std::fprintf(stderr, "scaleguard probe: no probe store: the policy has no probe_store; give --store DIR or --no-store\n");
    return 2;
  }
  if (vm.count("workdir")) {
    s.workdir = vm["workdir"].as<std::string>();
    mkdir(s.workdir.c_str(), 0700);
  } else {
    std::string tmpl = env_or("TMPDIR", "/tmp") + "/scaleguard-probe.XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("scaleguard probe: mkdtemp");
      return 1;
    }
    s.workdir = tmpl;
  }

  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);
  // 1. Warm-up on one rank: the step time sizes the runs within the budget.
  const double budget_s = budget_h * 3600;
  double spent_s = 0;  // GPU-seconds: ranks x wall
  std::fprintf(stderr, "scaleguard probe: %s (%d layers, hidden %d, seq %d) on %s, budget %.4g GPU-hours, %s\n",
               spec.c_str(), s.model.layers, s.model.hidden, s.model.seq, instance.c_str(), budget_h, s.launcher.c_str());
  int steps = steps_opt;
  if (steps == 0) {
    RunResult warm = run_one(s, 1, 1, 4, budget_s * 0.2, "warmup");
    spent_s += warm.wall_s;
    if (!warm.ok) {
      std::fprintf(stderr, "scaleguard probe: the warm-up run %s (see %s)\n",
                   warm.stopped ? "used up a fifth of the budget before 3 steps" : "failed", warm.log.c_str());
      return 1;
    }
    const double t1_guess = median(warm.step_ms) / 1e3;
    const double startup_s = std::max(0.0, warm.wall_s - t1_guess * 4);
    // The 1-rank run may take a quarter of what is left; the 2-rank run gets the rest, halved.
    const double left = budget_s - spent_s;
    steps = static_cast<int>(std::floor((0.25 * left - startup_s) / std::max(t1_guess, 1e-3)));
    steps = std::min(40, steps);
    if (steps < 4) {
      std::fprintf(stderr,
                   "scaleguard probe: the budget (%.4g GPU-hours) leaves room for fewer than 4 steps of %.3g s: "
                   "ask for a larger probe budget or a smaller --micro-batch\n",
                   budget_h, t1_guess);
      return 1;
    }
  }
  // 2. One rank, then two at the same per-rank micro-batch; both stop within the budget.
  RunResult one = run_one(s, 1, 1, steps, std::max(1.0, (budget_s - spent_s) * 0.4), "ranks1");
  spent_s += one.wall_s;
  RunResult two;
  if (one.ok) {
    two = run_one(s, 2, nodes, steps, std::max(1.0, (budget_s - spent_s) / 2), "ranks2");
    spent_s += 2 * two.wall_s;
  }
  if (!one.ok || !two.ok) {
    const RunResult& bad = one.ok ? two : one;
    std::fprintf(stderr, "scaleguard probe: the %s run %s (see %s)\n", one.ok ? "2-rank" : "1-rank",
                 bad.stopped ? "used up the budget before 3 steps" : "failed", bad.log.c_str());
    return 1;
  }
  Measurement m;
  m.fingerprint = model_fingerprint(s.model);
  m.instance = instance;
  // The hardware it ran on: the ranks' own device, and for CUDA the GPU type (--gpu, else
  // nvidia-smi's name mapped to the catalog); a CPU run is labelled with the host instance's
  // name when the instance is a measured host, else "cpu".
  m.device = ranks_device({one.log, two.log});
  if (m.device.empty()) {
    std::fprintf(stderr, "scaleguard probe: cannot tell which device the ranks trained on (see %s, %s): nothing stored\n",
                 one.log.c_str(), two.log.c_str());
    return 1;
  }
  std::string reported_gpu;
  if (m.device == "cuda") {
    if (vm.count("gpu")) {
      const GpuType* g = pol.catalog.find_gpu(vm["gpu"].as<std::string>());
      if (!g || g->host) {
        std::fprintf(stderr, "scaleguard probe: --gpu: '%s' is not a GPU type of the catalog\n", vm["gpu"].as<std::string>().c_str());
        return 2;
      }
      m.gpu = g->name;
    } else {
      reported_gpu = nvidia_smi_name();
      m.gpu = gpu_type_named(pol.catalog, reported_gpu);
    }
  } else {
    m.gpu = want->host ? want->name : "cpu";
  }
  if (storing && !measurement_matches(m, *want)) {
    std::fprintf(stderr,
                 "scaleguard probe: measured on %s (%s), not on %s's %s: not stored (a measurement judges only the "
                 "hardware it ran on)%s\n",
                 m.device.c_str(),
                 m.gpu.empty() ? ("GPU not identified: nvidia-smi says '" + reported_gpu + "'").c_str() : m.gpu.c_str(),
                 instance.c_str(), want->name.c_str(),
                 m.gpu.empty() && m.device == "cuda" ? "; name the GPU type with --gpu" : "");
    return 1;
  }
  if (m.gpu.empty()) m.gpu = "unknown";
  m.ranks = 2;
  m.nodes = nodes;
  m.micro_batch = s.micro_batch;
  m.step_s_1 = median(one.step_ms) / 1e3;
  m.step_s_n = median(two.step_ms) / 1e3;
  m.speedup = 2 * m.step_s_1 / m.step_s_n;  // 2 ranks do twice the samples per step
  const double comm = median(two.comm_ms) / 1e3;
  m.comm_ratio = comm / std::max(1e-6, m.step_s_n - comm);
  m.peak_bytes = std::max(one.peak_bytes, two.peak_bytes);
  m.gpu_hours = spent_s / 3600;
  m.time = static_cast<long long>(std::time(nullptr));
  m.date = utc_text(m.time, "%Y-%m-%d");
  m.version = build_version();
  m.job_id = env_or("SLURM_JOB_ID", "");
  m.user = env_or("USER", std::to_string(getuid()));
  std::string path;
  if (storing) {
    auto w = probe::write_record(store, m, spec);
    if (!w) {
      print_error("probe", w.error());
      return 1;
    }
    path = w.value();
  }
  if (vm.count("json")) {
    nlohmann::json j = {{"fingerprint", m.fingerprint}, {"instance", m.instance}, {"device", m.device},
                        {"gpu", m.gpu}, {"ranks", m.ranks},
                        {"nodes", m.nodes}, {"micro_batch", m.micro_batch}, {"steps", steps},
                        {"step_s_1", m.step_s_1}, {"step_s_n", m.step_s_n}, {"speedup", m.speedup},
                        {"comm_ratio", m.comm_ratio}, {"peak_bytes", m.peak_bytes}, {"gpu_hours", m.gpu_hours},
                        {"budget_gpu_hours", budget_h}, {"stopped_by_budget", one.stopped || two.stopped},
                        {"date", m.date}, {"job_id", m.job_id}, {"record", path}};
    std::cout << j.dump() << "\n";
  } else {
    std::printf("probe %s on %s (%s, %s): 1 rank %.1f ms/step, 2 ranks%s %.1f ms/step (comm %.1f ms)\n", spec.c_str(),
                instance.c_str(), m.device.c_str(), m.gpu.c_str(), m.step_s_1 * 1e3, nodes > 1 ? " on 2 nodes" : "", m.step_s_n * 1e3, comm * 1e3);
    std::printf("speedup %.2fx, comm ratio %.2f, peak memory %.0f MiB (rank 0)\n", m.speedup, m.comm_ratio,
                m.peak_bytes / 1048576);
    std::printf("cost %.4f GPU-hours of %.4g allowed (%d steps per run%s)\n", m.gpu_hours, budget_h, steps,
                one.stopped || two.stopped ? ", stopped by the budget" : "");
    if (!path.empty()) std::printf("record %s\n", path.c_str());
  }
  return 0;
}

const bool registered =
    register_verb({"probe", "measure a model's real 1 -> 2 GPU scaling and store it for the policy", run});

}  // namespace
}  // namespace scaleguard::cli
