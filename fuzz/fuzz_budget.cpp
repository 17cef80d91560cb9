// budget/'s readers: parse_squeue (squeue lines carry user-influenced text: TRES strings, the
// node list, accounts without enforcement) and parse_ledger (read inside slurmctld), then the
// Gate judging a job on whatever ledger parsed. Input: the whole file, read as both.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "fuzz_common.h"
#include "scaleguard/budget.h"
#include "scaleguard/budget_admit.h"
#include "scaleguard/budget_ledger.h"

namespace bg = scaleguard::budget;

namespace {

struct Fixture {
  std::shared_ptr<const scaleguard::Policy> policy;
  std::shared_ptr<const bg::Budgets> budgets;
};

// The shipped policy with a budget of each kind, in a private temp dir.
const Fixture& fixture() {
  static const Fixture f = [] {
    char dir[] = "/tmp/scaleguard-fuzz-budget-XXXXXX";
    if (!mkdtemp(dir)) sg_fuzz::fail("mkdtemp");
    const std::string path = std::string(dir) + "/policy.ini";
    std::ifstream in(sg_fuzz::config_dir() + "/policy.ini");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("catalog = catalog.ini"), 21, "catalog = " + sg_fuzz::config_dir() + "/catalog.ini");
    text += "\n[budgets]\nledger = /nonexistent/ledger.json\n"
            "[budget a]\naccount = ml\ngpu_hours = 100\nactions = 80% warn, 90% move gpu-spot, 100% reject\n"
            "[budget u]\nuser = alice\ndollars = 50\nperiod = week\ncarry_over = 0.5\n"
            "[budget p]\naccount = ml\nuser = alice\ngpu_hours = 5\nperiod = 2026-01-01..2026-12-31\nmode = shadow\n";
    std::ofstream(path) << text;
    Fixture fx;
    auto p = scaleguard::load_policy(path);
    if (!p) sg_fuzz::fail("policy", p.error().str());
    fx.policy = p.value();
    auto b = bg::load_budgets(path, *fx.policy);
    if (!b) sg_fuzz::fail("budgets", b.error().str());
    fx.budgets = b.value();
    unlink(path.c_str());
    rmdir(dir);
    return fx;
  }();
  return f;
}

bool printable(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& fx = fixture();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& q : bg::parse_squeue(text, *fx.policy)) {
    SG_FUZZ_CHECK(std::isfinite(q.gpu_hours) && q.gpu_hours >= 0, q.job_id);
    SG_FUZZ_CHECK(printable(q.account) && printable(q.user) && printable(q.partition), q.job_id);
  }
  auto ledger = bg::parse_ledger(text);
  if (!ledger) return 0;
  bg::Gate gate(0);
  gate.set_budgets(fx.budgets, fx.policy);
  gate.set_ledger(std::make_shared<const bg::Ledger>(ledger.value()), "");
  const std::int64_t now_ms = (ledger->snapshot + 30) * 1000;
  const bg::Charge charge(bg::effective_account(*ledger, "alice", "ML"), "alice", "gpu-od", 16, 8, 120, 1);
  const bg::Verdict v = gate.judge(charge, now_ms, true);
  SG_FUZZ_CHECK(printable(v.message()), v.message());
  gate.retract(v.ticket);
  return 0;
}
