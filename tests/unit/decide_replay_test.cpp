// Replays a corpus of decisions against golden files (issue 41: decide() must not change when
// its rules move). Every request of fuzz/corpus/fuzz_decide/ (read as the fuzz_decide harness
// reads it, fuzz/decide_request.h) and of data/replay/requests.txt (configs/examples/, the live
// tests' requests, probe measurements) is judged under configs/policy.ini and each policy of
// data/replay/, and everything decide() returns -- action, rules, summary, message, rewrite,
// bounds, envelope, plan env, the plan JSON -- is compared byte for byte with
// data/replay/golden/<corpus>/<request>.txt.
//
// An intended change of behaviour rewrites the goldens, and their diff is what to review:
//   SCALEGUARD_REPLAY_WRITE=1 build/tests/unit/unit_tests --gtest_filter='DecideReplay.*'
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "scaleguard/measurement.h"
#include "scaleguard/model.h"
#include "scaleguard/text.h"
#include "test_support.h"

#if SCALEGUARD_FUZZED_DATA_PROVIDER
#include "decide_request.h"
#endif

namespace scaleguard {
namespace {

const std::string kReplay = std::string(SCALEGUARD_TEST_DATA) + "/replay";

// The policies every request is judged under: label (in the golden file) and path.
const std::vector<std::pair<std::string, std::string>>& policies() {
  static const std::vector<std::pair<std::string, std::string>> list = {
      {"configs/policy.ini", test::source("configs/policy.ini")},
      {"replay/variants.ini", kReplay + "/variants.ini"},
      {"replay/rules_off.ini", kReplay + "/rules_off.ini"},
  };
  return list;
}

const Policy& policy(size_t i) {
  static std::vector<std::shared_ptr<const Policy>> loaded = [] {
    std::vector<std::shared_ptr<const Policy>> out;
    for (const auto& [label, path] : policies()) {
      auto p = load_policy(path);
      if (!p) ADD_FAILURE() << label << ": " << p.error().str();
      out.push_back(p ? p.value() : nullptr);
    }
    return out;
  }();
  if (!loaded.at(i)) std::abort();
  return *loaded.at(i);
}

// One line per field; bytes outside printable ASCII escaped, so goldens are plain text.
std::string esc(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out;
}

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string opt(const std::optional<int>& v) { return v ? std::to_string(*v) : "-"; }

std::string dump(const Decision& d) {
  std::ostringstream o;
  const Envelope& e = d.envelope;
  o << "action " << to_string(d.action) << "\ngoverned " << d.governed << "\nshadow " << d.shadow << "\n";
  o << "envelope nodes=" << e.nodes << " gpus_per_node=" << e.gpus_per_node << " gpus=" << e.gpus
    << " time_limit_min=" << e.time_limit_min << " bound_max_nodes=" << opt(e.bound_max_nodes)
    << " bound_time_min=" << opt(e.bound_time_min) << " how=" << esc(e.how) << "\n";
  o << "granted_gpu_hours " << num(d.granted_gpu_hours) << "\nbound_max_nodes " << opt(d.bound_max_nodes)
    << "\nbound_time_min " << opt(d.bound_time_min) << "\nmodel_band " << num(d.model_band) << "\n";
  for (const auto& r : d.rules) o << "rule " << esc(r.id) << " " << to_string(r.action) << " " << esc(r.detail) << "\n";
  o << "summary " << esc(d.summary) << "\nmessage " << esc(d.message) << "\n";
  const Rewrite& w = d.rewrite;
  o << "rewrite gpus_total=" << opt(w.gpus_total) << " gpus_per_node=" << opt(w.gpus_per_node)
    << " nodes=" << opt(w.nodes) << " time_limit_min=" << opt(w.time_limit_min)
    << " partition=" << (w.partition ? esc(*w.partition) : "-") << " requeue=" << w.requeue
    << " signal_before_s=" << w.signal_before_s << "\n";
  for (const auto& [k, v] : d.plan_env) o << "env " << esc(k) << "=" << esc(v) << "\n";
  o << "plan_json " << esc(d.plan_json) << "\n";
  return o.str();
}

// Every policy's decision for one request: the content of its golden file.
std::string replay(const JobRequest& job) {
  std::string out;
  for (size_t i = 0; i < policies().size(); ++i)
    out += "== " + policies()[i].first + "\n" + dump(decide(job, policy(i)));
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Compares (or, with SCALEGUARD_REPLAY_WRITE set, writes) each request's golden file; every
// golden file must belong to a request, so a corpus file removed takes its golden with it.
void check_goldens(const std::string& corpus, const std::map<std::string, JobRequest>& requests) {
  const std::string dir = kReplay + "/golden/" + corpus;
  const bool write = std::getenv("SCALEGUARD_REPLAY_WRITE") != nullptr;
  if (write) std::system(("mkdir -p '" + dir + "'").c_str());
  ASSERT_FALSE(requests.empty()) << corpus;
  int differ = 0;
  for (const auto& [name, job] : requests) {
    const std::string path = dir + "/" + name + ".txt";
    const std::string got = replay(job);
    if (write) {
      std::ofstream(path, std::ios::binary) << got;
      continue;
    }
    const std::string want = read_file(path);
    if (got == want) continue;
    ++differ;
    // The first line that differs, with the policy it is under.
    std::istringstream g(got), w(want);
    std::string gl, wl, under;
    int line = 0;
    while (true) {
      const bool more_g = static_cast<bool>(std::getline(g, gl)), more_w = static_cast<bool>(std::getline(w, wl));
      ++line;
      if (!more_g && !more_w) break;
      if (more_g && gl.rfind("== ", 0) == 0) under = gl;
      if (!more_g || !more_w || gl != wl) {
        ADD_FAILURE() << corpus << "/" << name << " differs from " << path << " at line " << line << " (" << under
                      << ")\n  golden: " << (more_w ? wl : "<end>") << "\n  now:    " << (more_g ? gl : "<end>");
        break;
      }
    }
  }
  for (const auto& file : names_in(dir)) {
    const std::string name = file.size() > 4 ? file.substr(0, file.size() - 4) : file;
    if (write && !requests.count(name)) std::remove((dir + "/" + file).c_str());
    else EXPECT_TRUE(requests.count(name)) << "golden " << dir << "/" << file << " has no request: remove it";
  }
  EXPECT_EQ(differ, 0) << differ << " of " << requests.size() << " " << corpus
                       << " decisions changed; if intended, rerun with SCALEGUARD_REPLAY_WRITE=1 and review the diff";
}

// A probe record from "trust:admin,nodes:2,speedup:1.31,comm:0.12[,age_h:H,gpu:G,instance:I,fp:F]".
Measurement measurement(const std::string& spec, const JobRequest& job) {
  Measurement m;
  auto model = parse_model_spec(job.model, test::real_catalog());
  m.fingerprint = model ? model_fingerprint(model.value()) : "";
  m.instance = "p4d.24xlarge";
  m.device = "cuda";
  m.gpu = "A100-40GB";
  m.micro_batch = 8;
  m.time = job.now - 3600;
  m.date = "2026-12-04";
  m.version = "0.1.0";
  m.job_id = "12";
  m.user = "alice";
  for (const auto& item : text::split(spec, ',')) {
    const auto colon = item.find(':');
    const std::string k = item.substr(0, colon), v = item.substr(colon + 1);
    if (k == "trust") m.trust = v == "own" ? Trust::own : Trust::admin;
    else if (k == "ranks") m.ranks = std::stoi(v);
    else if (k == "nodes") m.nodes = std::stoi(v);
    else if (k == "speedup") m.speedup = std::stod(v);
    else if (k == "comm") m.comm_ratio = std::stod(v);
    else if (k == "age_h") m.time = job.now - static_cast<long long>(std::stod(v) * 3600);
    else if (k == "gpu") m.gpu = v;
    else if (k == "instance") m.instance = v;
    else if (k == "fp") m.fingerprint = v;
    else ADD_FAILURE() << "measurement: unknown field " << k;
  }
  return m;
}

JobRequest parse_request(const std::string& line, std::string& name) {
  std::istringstream in(line);
  in >> name;
  JobRequest j;
  std::vector<std::string> measured;
  std::string field;
  while (in >> field) {
    const auto eq = field.find('=');
    const std::string k = field.substr(0, eq), v = eq == std::string::npos ? "" : field.substr(eq + 1);
    std::map<std::string, int*> ints = {
        {"gpus_total", &j.gpus_total}, {"gpus_per_node", &j.gpus_per_node}, {"gpus_per_task", &j.gpus_per_task},
        {"gpus_per_socket", &j.gpus_per_socket}, {"nodes_min", &j.nodes_min}, {"nodes_max", &j.nodes_max},
        {"ntasks", &j.ntasks}, {"time_limit_min", &j.time_limit_min}, {"nodes_listed", &j.nodes_listed},
        {"ntasks_per_node", &j.ntasks_per_node}, {"sockets_per_node", &j.sockets_per_node},
        {"array_tasks", &j.array_tasks}, {"het_component", &j.het_component},
        {"checkpoint_signal_s", &j.checkpoint_signal_s}, {"ckpt_interval_min", &j.ckpt_interval_min},
        {"ntasks_per_gpu", &j.ntasks_per_gpu}, {"spare_nodes", &j.spare_nodes}};
    std::map<std::string, double*> doubles = {
        {"het_prior_gpu_hours", &j.het_prior_gpu_hours}, {"tokens", &j.tokens},
        {"single_gpu_hours", &j.single_gpu_hours}, {"deadline_hours", &j.deadline_hours},
        {"eval_interval", &j.eval_interval}, {"eval_tokens", &j.eval_tokens}};
    std::map<std::string, std::string*> texts = {{"gpu_type", &j.gpu_type}, {"partition", &j.partition},
                                                 {"user", &j.user}, {"model", &j.model},
                                                 {"strategy", &j.strategy}, {"ckpt_dir", &j.ckpt_dir}};
    std::map<std::string, bool*> flags = {{"exclusive", &j.exclusive}, {"requeue", &j.requeue}, {"probe", &j.probe}};
    if (ints.count(k)) *ints[k] = std::stoi(v);
    else if (doubles.count(k)) *doubles[k] = std::stod(v);
    else if (texts.count(k)) *texts[k] = v;
    else if (flags.count(k)) *flags[k] = v == "1";
    else if (k == "now") j.now = std::stoll(v);
    else if (k == "alternate_partitions") j.alternate_partitions = text::split(v, ',');
    else if (k == "measurement") measured.push_back(v);
    else ADD_FAILURE() << name << ": unknown field " << k;
  }
  for (const auto& m : measured) j.measurements.push_back(measurement(m, j));
  return j;
}

}  // namespace

TEST(DecideReplay, RequestsMatchTheirGoldenDecisions) {
  std::ifstream f(kReplay + "/requests.txt");
  ASSERT_TRUE(f) << kReplay << "/requests.txt";
  std::map<std::string, JobRequest> requests;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string name;
    JobRequest j = parse_request(line, name);
    EXPECT_TRUE(requests.emplace(name, j).second) << "request " << name << " twice";
  }
  check_goldens("requests", requests);
}

TEST(DecideReplay, FuzzCorpusMatchesItsGoldenDecisions) {
#if SCALEGUARD_FUZZED_DATA_PROVIDER
  const std::string dir = test::source("fuzz/corpus/fuzz_decide");
  std::map<std::string, JobRequest> requests;
  for (const auto& name : names_in(dir)) {
    const std::string bytes = read_file(dir + "/" + name);
    FuzzedDataProvider in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    requests[name] = sg_fuzz::draw_decide_request(in);
  }
  check_goldens("fuzz_decide", requests);
#else
  GTEST_SKIP() << "fuzzer/FuzzedDataProvider.h not found (libclang-rt-14-dev): the fuzz corpus is not replayed";
#endif
}

}  // namespace scaleguard
