// The budget sync's reading of accounting: the whole-buffer way (sacct's output captured
// whole, parse_sacct, every run kept, then counted: what the sync did before issue 36, and
// what stops at 64 MiB) against the streamed way (SacctLines one line at a time into
// UsageCounter), on the same generated sacct records arriving through a pipe. Each reader
// runs in its own child process, so its peak memory (ru_maxrss) is its own.
//   bench_sync [RECORDS_BASELINE=200000] [RECORDS_STREAM=1000000]
// Prints time and peak memory for both at the baseline size (the whole-buffer reader's
// 64 MiB limit is ~260,000 records) and the streamed reader alone at the larger size.
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "scaleguard/budget.h"
#include "scaleguard/budget_ledger.h"
#include "scaleguard/policy.h"
#include "scaleguard/report.h"

using namespace scaleguard;
namespace bg = scaleguard::budget;

namespace {

// ~250 bytes a record, like sacct's (issue 36): array elements, a quarter in an ungoverned
// partition, a quarter without GPUs.
std::string record(long i) {
  const char D = report::kSacctDelimiter;
  const char* partition = i % 4 == 0 ? "debug" : i % 2 ? "gpu-od" : "gpu-spot";
  const char* tres = i % 4 == 1 ? "billing=8,cpu=8,mem=64G,node=1" : "billing=8,cpu=8,gres/gpu=1,gres/gpu:a100=1,mem=64G,node=1";
  std::string r = std::to_string(100000 + i / 1000) + "_" + std::to_string(i % 1000);
  const std::string user = "user" + std::to_string(i % 400), account = "acct" + std::to_string(i % 500);
  for (const std::string& f : {user, account, std::string(partition), std::string("COMPLETED"),
                               std::string("2026-12-05T10:00:00"), std::string("2026-12-05T10:00:36"), std::string("36"),
                               std::string(tres), std::string(tres), std::string("1"), std::string("0:0"),
                               std::string("gpu-st-p4d-[1-2]"), std::string("scaleguard: accept: single gpus=1 [sg=sg-1733248200-") + std::to_string(i) + "]"})
    r += D + f;
  return r + "\n";
}

struct Setup {
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const bg::Budgets> budgets;
};

Setup load() {
  std::ifstream in(std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini");
  std::string policy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "catalog = catalog.ini";
  if (auto at = policy.find(key); at != std::string::npos)
    policy.replace(at, key.size(), "catalog = " + std::string(SCALEGUARD_SOURCE_DIR) + "/configs/catalog.ini");
  policy += "\n[budgets]\nledger = /tmp/bench-sync-ledger.json\n";
  for (int i = 0; i < 1000; ++i)
    policy += "\n[budget b" + std::to_string(i) + "]\n" +
              (i < 500 ? "account = acct" + std::to_string(i) : "user = user" + std::to_string(i - 500)) +
              "\ngpu_hours = 1e8\nperiod = month\n";
  const std::string path = "/tmp/bench-sync-policy." + std::to_string(getpid()) + ".ini";
  std::ofstream(path) << policy;
  auto p = load_policy(path);
  if (!p) std::fprintf(stderr, "%s\n", p.error().str().c_str()), std::exit(1);
  auto b = bg::load_budgets(path, **p);
  if (!b) std::fprintf(stderr, "%s\n", b.error().str().c_str()), std::exit(1);
  std::remove(path.c_str());
  return {p.value(), b.value()};
}

bg::UsedRun used(const report::Run& r) {
  return {r.job_id, r.account, r.user, r.partition, r.gpus, r.start, r.start < 0 ? -1 : r.start + r.elapsed_s};
}

// The reader: stdin is the pipe. Prints the sum it counted (so nothing is optimized away).
void read_whole(const Setup& s, std::int64_t snap) {
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = read(0, buf, sizeof buf)) > 0;) text.append(buf, n);
  auto runs = report::parse_sacct(text, "bench", nullptr, s.policy->shared_gres);
  std::vector<bg::UsedRun> list;
  for (const auto& r : *runs) list.push_back(used(r));
  bg::Ledger ledger;
  bg::count_budgets(*s.budgets, *s.policy, list, {}, snap, &ledger);
  std::printf("%.2f", ledger.entries.at("b2").used);
}

void read_stream(const Setup& s, std::int64_t snap) {
  bg::UsageCounter counter(*s.budgets, *s.policy, snap);
  report::SacctLines reader(s.policy->shared_gres);
  FILE* in = fdopen(0, "r");
  char* line = nullptr;
  size_t cap = 0;
  bool header = false;
  for (ssize_t n; (n = getline(&line, &cap, in)) > 0;) {
    std::string l(line, n && line[n - 1] == '\n' ? n - 1 : n);
    if (!header) {
      header = reader.header(l).ok();
      continue;
    }
    report::Run partial;
    auto r = reader.record(l, &partial);
    if (!r) counter.unreadable(partial.account, partial.user, partial.partition, r.error().message);
    else if (*r) counter.add(used(**r));
  }
  bg::Ledger ledger;
  counter.finish(&ledger);
  std::printf("%.2f", ledger.entries.at("b2").used);
}

struct Measured { double seconds; long max_rss_kib; };

Measured measure(const Setup& s, long records, bool stream) {
  int p[2];
  if (pipe(p)) std::exit(1);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t writer = fork();
  if (writer == 0) {
    close(p[0]);
    FILE* out = fdopen(p[1], "w");
    std::string header = report::kSacctFormat;
    for (char& c : header)
      if (c == ',') c = report::kSacctDelimiter;
    std::fprintf(out, "%s\n", header.c_str());
    for (long i = 0; i < records; ++i) std::fputs(record(i).c_str(), out);
    std::fclose(out);
    _exit(0);
  }
  const pid_t reader = fork();
  if (reader == 0) {
    close(p[1]);
    dup2(p[0], 0);
    const std::int64_t snap = 1796472000;   // 2026-12-05T12:00:00Z
    std::printf("  (b2 used ");
    stream ? read_stream(s, snap) : read_whole(s, snap);
    std::printf(")");
    std::fflush(stdout);
    _exit(0);
  }
  close(p[0]), close(p[1]);
  int status = 0;
  rusage ru{};
  wait4(reader, &status, 0, &ru);
  waitpid(writer, &status, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {secs, ru.ru_maxrss};
}

}  // namespace

int main(int argc, char** argv) {
  const long base = argc > 1 ? std::atol(argv[1]) : 200000, big = argc > 2 ? std::atol(argv[2]) : 1000000;
  const Setup s = load();
  std::printf("sacct records of ~%zu bytes; 1,000 budgets; each reader in its own process\n", record(123456).size());
  const Measured whole = measure(s, base, false);
  std::printf("\nwhole buffer, %ld records: %.2f s, peak %ld MiB\n", base, whole.seconds, whole.max_rss_kib / 1024);
  const Measured stream = measure(s, base, true);
  std::printf("\nstreamed,     %ld records: %.2f s, peak %ld MiB\n", base, stream.seconds, stream.max_rss_kib / 1024);
  const Measured large = measure(s, big, true);
  std::printf("\nstreamed,     %ld records: %.2f s, peak %ld MiB\n", big, large.seconds, large.max_rss_kib / 1024);
  std::printf("ratio streamed / whole buffer at %ld records: time %.2fx, peak memory %.3fx\n", base,
              stream.seconds / whole.seconds, double(stream.max_rss_kib) / whole.max_rss_kib);
  return 0;
}
