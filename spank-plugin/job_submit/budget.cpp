#include "budget.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "scaleguard/budget_admit.h"
#include "slurm_shim.h"
#include "text.h"
#include "user_names.h"

namespace sg_slurm {
namespace {

namespace bg = scaleguard::budget;
using scaleguard::Action;

constexpr std::size_t kMaxLedgerBytes = 64u << 20;

// The ledger file as last read: identity, size and mtime.
struct FileStamp {
  long long ino = -1, size = -1, mtime_ns = -1;
  bool operator==(const FileStamp& o) const { return ino == o.ino && size == o.size && mtime_ns == o.mtime_ns; }
};

// Reads the ledger as root inside slurmctld: a regular file owned by root or SlurmUser that
// nobody else may write (a user who could write it would give himself an empty budget), no
// symlink, bounded. Returns "" or why it cannot be used.
std::string read_trusted(const std::string& path, std::string* text) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? "there is no budget ledger at " + path + " (run `scaleguard budget sync`)"
                                     : "cannot open the budget ledger " + path + ": " + std::strerror(errno);
  struct stat st {};
  std::string why;
  if (fstat(fd, &st) != 0) why = std::string("cannot stat it: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "it is not a regular file";
  else if (st.st_uid != 0 && st.st_uid != static_cast<uid_t>(slurm_conf.slurm_user_id))
    why = "it is owned by uid " + std::to_string(st.st_uid) + ", not root or SlurmUser";
  else if (st.st_mode & (S_IWGRP | S_IWOTH)) why = "group or others may write it";
  else if (static_cast<std::size_t>(st.st_size) > kMaxLedgerBytes) why = "it is larger than 64 MiB";
  if (why.empty()) {
    text->resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < text->size()) {
      const ssize_t n = read(fd, &(*text)[done], text->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    text->resize(done);
  }
  close(fd);
  return why.empty() ? "" : "the budget ledger " + path + " is not used: " + why;
}

// Everything the ledger thread and the judging threads share.
struct Keeper {
  PolicyHolder* policies = nullptr;
  bg::Gate gate{0};
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  // Ledger thread only:
  std::shared_ptr<const scaleguard::Policy> policy_seen;
  std::shared_ptr<const bg::Budgets> budgets;
  FileStamp stamp;
  std::string state_logged = "(none)";
  std::atomic<std::uint64_t> ledger_loads{0}, ledger_failures{0};   // for metrics
  explicit Keeper(std::int64_t started) : gate(started) {}
};
// Deleted only by stop_budgets() (fini). slurmctld exits without fini(): a static owner would
// destroy a joinable std::thread at exit (std::terminate: a core dump at every shutdown).
Keeper* g_keeper = nullptr;
std::atomic<long long> g_last_unchecked_log{0};

// One pass of the ledger thread: budgets of a changed policy, a changed ledger file, and a
// log line whenever the ledger becomes usable or unusable (and what that means).
void refresh(Keeper& k, bool first) {
  auto policy = k.policies->current();
  if (policy && policy != k.policy_seen) {
    k.policy_seen = policy;
    auto loaded = bg::load_budgets(policy->path, *policy);
    if (!loaded) {
      slurm_error("job_submit/scaleguard: budgets not reloaded, keeping the last good ones: %s",
                  loaded.error().str().c_str());
    } else {
      const bool changed_ledger = !k.budgets || k.budgets->settings.ledger != (*loaded)->settings.ledger;
      k.budgets = loaded.value();
      k.gate.set_budgets(k.budgets, policy);
      if (!first) slurm_info("job_submit/scaleguard: %zu budget(s) from %s", k.budgets->list.size(), policy->path.c_str());
      if (changed_ledger) k.stamp = FileStamp{};
    }
  }
  if (!k.budgets || k.budgets->list.empty()) return;
  const std::string& path = k.budgets->settings.ledger;
  struct stat st {};
  FileStamp now_stamp;
  if (lstat(path.c_str(), &st) == 0)
    now_stamp = {static_cast<long long>(st.st_ino), static_cast<long long>(st.st_size),
                 st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  if (!(now_stamp == k.stamp) || first) {
    k.stamp = now_stamp;
    std::string text;
    std::string why = read_trusted(path, &text);
    if (why.empty()) {
      auto ledger = bg::parse_ledger(text);
      if (ledger) {
        const std::string counted = bg::format_instant(ledger->snapshot);
        k.gate.set_ledger(std::make_shared<const bg::Ledger>(std::move(ledger).value()), "");
        slurm_info("job_submit/scaleguard: budget ledger %s loaded (counted %s)", path.c_str(), counted.c_str());
      } else {
        why = "the budget ledger " + path + " is not used: " + ledger.error().message;
      }
    }
    if (!why.empty()) k.gate.set_ledger(nullptr, why);
    (why.empty() ? k.ledger_loads : k.ledger_failures).fetch_add(1, std::memory_order_relaxed);
  }
  const std::string problem = k.gate.ledger_problem(time(nullptr));
  const std::string state = problem + (k.budgets->settings.fail_open ? " (open)" : " (closed)");
  if (state != k.state_logged) {
    k.state_logged = state;
    if (problem.empty())
      slurm_info("job_submit/scaleguard: budgets enforced with ledger %s", path.c_str());
    else if (k.budgets->settings.fail_open)
      slurm_error("job_submit/scaleguard: %s; failing OPEN (on_stale_ledger = open): jobs under budgets are accepted "
                  "unchecked", problem.c_str());
    else
      slurm_error("job_submit/scaleguard: %s; failing CLOSED (on_stale_ledger = closed): jobs under budgets are refused",
                  problem.c_str());
  }
}

void thread_main(Keeper* k) {
  std::unique_lock<std::mutex> lock(k->mutex);
  while (!k->stopping) {
    k->wake.wait_for(lock, std::chrono::seconds(1));
    if (k->stopping) break;
    lock.unlock();
    try {
      refresh(*k, false);
    } catch (const std::exception& e) {
      slurm_error("job_submit/scaleguard: budget ledger thread: %s", e.what());
    } catch (...) {
      slurm_error("job_submit/scaleguard: budget ledger thread: unknown exception");
    }
    lock.lock();
  }
}

// Names as slurmctld keeps accounts: anything else in --account is refused when budgets exist
// (it would reach the ledger's squeue lines and could forge one).
bool plain_account(const std::string& a) {
  if (a.size() > 64) return false;
  for (unsigned char c : a)
    if (!isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

std::int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

std::string text_of(const char* s) { return s ? std::string(s, strnlen(s, kMaxValue)) : std::string(); }

// The partitions the job runs in after the decision, and the charge of one decision.
bg::Charge charge_of(const scaleguard::JobRequest& r, const scaleguard::Decision& d, const scaleguard::Policy& policy) {
  bg::Charge c;
  c.partition = d.rewrite.partition ? *d.rewrite.partition : r.partition;
  if (c.partition.empty() && policy.default_partition()) c.partition = policy.default_partition()->name;
  c.elements = std::max(1, r.array_tasks);
  c.gpu_hours = d.granted_gpu_hours * c.elements;
  c.gpus = d.rewrite.gpus_total ? *d.rewrite.gpus_total : d.envelope.gpus;
  c.time_limit_min = d.rewrite.time_limit_min && *d.rewrite.time_limit_min > 0 ? *d.rewrite.time_limit_min
                                                                                : d.envelope.time_limit_min;
  return c;
}

std::string findings_json(const bg::Verdict& v, const bg::Charge& c) {
  if (v.findings.empty()) return "";
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : v.findings)
    a.push_back({{"name", f.budget},   {"outcome", bg::to_string(f.outcome)}, {"shadow", f.shadow},
                 {"unchecked", f.unchecked}, {"charge", f.charge},        {"unit", bg::to_string(f.unit)},
                 {"gpu_hours", c.gpu_hours}});
  return a.dump();
}

// Logs what the decision does not show: shadow budgets that would act, and jobs accepted
// unchecked (rate-limited: a stale ledger would otherwise log every submission).
void log_quiet_findings(const bg::Verdict& v, const std::string& who) {
  for (const auto& f : v.findings) {
    if (f.shadow && f.outcome != bg::Outcome::pass)
      slurm_info("job_submit/scaleguard: budget %s (shadow, not enforced) would %s %s: %s", f.budget.c_str(),
                 bg::to_string(f.outcome), who.c_str(), one_line(f.message, kMaxMessage).c_str());
    if (f.unchecked && f.outcome == bg::Outcome::pass) {
      const long long now = time(nullptr);
      if (now - g_last_unchecked_log.exchange(now) >= 60)
        slurm_info("job_submit/scaleguard: %s accepted without a budget check: %s", who.c_str(),
                   one_line(f.message, kMaxMessage).c_str());
    }
  }
}

// The budgets' findings as rule hits (for the decision log and `report --decisions`).
void add_hits(const bg::Verdict& v, scaleguard::Decision* d) {
  for (const auto& f : v.findings) {
    if (f.outcome == bg::Outcome::pass) continue;
    const Action a = f.outcome == bg::Outcome::reject ? Action::reject
                     : f.outcome == bg::Outcome::move ? Action::rewrite
                                                      : Action::warn;
    d->rules.push_back({"budget:" + f.budget, a, f.message});
  }
}

void refuse(scaleguard::Decision* d, const std::string& message) {
  d->action = Action::reject;
  d->message = "scaleguard: " + message;
  d->granted_gpu_hours = 0;
}

}  // namespace

scaleguard::Result<bool> start_budgets(PolicyHolder* policies) {
  // The thread runs without budgets too (and without a policy: PolicyHolder fails closed): a
  // policy loaded later may add some. PolicyHolder has checked the budgets of its policy.
  auto keeper = std::make_unique<Keeper>(static_cast<std::int64_t>(time(nullptr)));
  keeper->policies = policies;
  refresh(*keeper, true);
  if (const auto& budgets = keeper->budgets; budgets && !budgets->list.empty())
    slurm_info("job_submit/scaleguard: %zu budget(s), ledger %s (stale after %lld s, on_stale_ledger = %s)",
               budgets->list.size(), budgets->settings.ledger.c_str(),
               static_cast<long long>(budgets->settings.max_age_s), budgets->settings.fail_open ? "open" : "closed");
  keeper->thread = std::thread(thread_main, keeper.get());
  g_keeper = keeper.release();
  return true;
}

void stop_budgets() {
  if (!g_keeper) return;
  {
    std::lock_guard<std::mutex> lock(g_keeper->mutex);
    g_keeper->stopping = true;
  }
  g_keeper->wake.notify_all();
  if (g_keeper->thread.joinable()) g_keeper->thread.join();
  delete g_keeper;
  g_keeper = nullptr;
}

void retract_budget_charge(std::uint64_t ticket) {
  if (g_keeper) g_keeper->gate.retract(ticket);
}

BudgetResult judge_submission_budgets(const job_desc_msg_t& job, uint32_t uid, const scaleguard::Policy& policy,
                                      const std::string& record_id, scaleguard::JobRequest* request,
                                      scaleguard::Decision* decision) {
  BudgetResult out;
  if (!g_keeper || !g_keeper->gate.has_budgets() || decision->action == Action::reject || !decision->governed)
    return out;
  const std::string asked = text_of(job.account);
  if (!plain_account(asked)) {
    refuse(decision, "--account=" + preview(asked) + ": not an account name (letters, digits, '.', '_', '-')");
    return out;
  }
  const std::string user = user_name(uid);
  const std::int64_t now = now_ms();
  bg::Charge charge = charge_of(*request, *decision, policy);
  charge.user = user.empty() ? std::to_string(uid) : user;
  charge.account = g_keeper->gate.account_of(charge.user, asked);
  charge.record = record_id;
  const std::string who = "job of " + charge.user + " (account " + (charge.account.empty() ? "?" : charge.account) + ")";
  bg::Verdict v = g_keeper->gate.judge(charge, now, true);
  if (decision->shadow) {
    // A partition in shadow mode changes nothing: its budgets only log, like shadow budgets.
    for (auto& f : v.findings) f.shadow = true;
    v.outcome = bg::Outcome::pass;
  }
  log_quiet_findings(v, who);
  add_hits(v, decision);
  if (v.outcome == bg::Outcome::move) {
    // Judged again where the budget sends it: the policy's rules for that partition, then
    // the budgets at its price (a second move there passes; a refusal refuses).
    scaleguard::JobRequest moved = *request;
    moved.partition = v.move_to;
    scaleguard::Decision there = scaleguard::decide(moved, policy);
    const std::string why = v.message();
    if (there.action == Action::reject) {
      refuse(decision, why + " | but partition " + v.move_to + " refuses it: " + there.message);
      out.audit_json = findings_json(v, charge);
      return out;
    }
    bg::Charge moved_charge = charge_of(moved, there, policy);
    moved_charge.user = charge.user, moved_charge.account = charge.account, moved_charge.record = record_id;
    bg::Verdict w = g_keeper->gate.judge(moved_charge, now, true, true);
    log_quiet_findings(w, who);
    add_hits(w, &there);
    there.rules.insert(there.rules.begin(), decision->rules.begin(), decision->rules.end());
    if (w.outcome == bg::Outcome::reject) {
      refuse(&there, why + " | in " + v.move_to + ": " + w.message());
    } else {
      if (there.action != Action::rewrite) there.action = Action::rewrite;
      there.rewrite.partition = v.move_to;
      there.message = why + (w.message().empty() ? "" : " | " + w.message()) +
                      (there.message.empty() ? "" : " | " + there.message);
      out.ticket = w.ticket;
      *request = moved;
    }
    *decision = std::move(there);
    v.findings.insert(v.findings.end(), w.findings.begin(), w.findings.end());
    out.audit_json = findings_json(v, charge);
    return out;
  }
  out.audit_json = findings_json(v, charge);
  if (v.outcome == bg::Outcome::reject) {
    refuse(decision, v.message());
  } else if (v.outcome == bg::Outcome::warn) {
    if (decision->action == Action::accept) {
      decision->action = Action::warn;
      decision->message = v.message();
    } else {
      decision->message += (decision->message.empty() ? "" : " | warning: ") + v.message();
    }
    out.ticket = v.ticket;
  } else {
    out.ticket = v.ticket;
  }
  return out;
}

std::string judge_update_budgets(const job_desc_msg_t& update, void* job_ptr, uint32_t uid,
                                 const std::string& prior_record, const std::string& record_id,
                                 const scaleguard::Policy& policy, const scaleguard::JobRequest& before,
                                 const scaleguard::JobRequest& after, const scaleguard::Decision& decision,
                                 std::string* audit_json) {
  if (!g_keeper || !g_keeper->gate.has_budgets() || !decision.governed) return "";
  const std::string asked = text_of(update.account);
  if (!plain_account(asked)) return "scaleguard: Account=" + preview(asked) + ": not an account name";
  const std::string job_account = text_of(sg_shim::account_of(job_ptr));
  const std::string user = user_name(uid);
  bg::Charge charge = charge_of(after, decision, policy);
  charge.user = user.empty() ? std::to_string(uid) : user;
  charge.account = g_keeper->gate.account_of(charge.user, asked.empty() ? job_account : asked);
  const scaleguard::Decision was = scaleguard::decide(before, policy);
  const bg::Charge prior = charge_of(before, was, policy);
  charge.update = true;
  charge.prior_account = job_account;
  charge.prior_partition = prior.partition;
  charge.prior_gpu_hours = was.action == Action::reject ? 0 : prior.gpu_hours;
  charge.prior_record = prior_record;
  charge.record = record_id;
  bg::Verdict v = g_keeper->gate.judge(charge, now_ms(), true, true);
  log_quiet_findings(v, "update by " + charge.user);
  *audit_json = findings_json(v, charge);
  return v.outcome == bg::Outcome::reject ? "scaleguard: " + v.message() : "";
}

bool budgets_configured() { return g_keeper && g_keeper->gate.has_budgets(); }

std::vector<scaleguard::metrics::BudgetGauge> budget_gauges(std::int64_t now, scaleguard::metrics::LedgerGauge* ledger) {
  std::vector<scaleguard::metrics::BudgetGauge> out;
  if (!g_keeper) return out;
  const bg::Gate::View v = g_keeper->gate.view(now);
  ledger->snapshot = v.snapshot;
  ledger->usable = v.usable;
  ledger->loads = g_keeper->ledger_loads.load(std::memory_order_relaxed);
  ledger->load_failures = g_keeper->ledger_failures.load(std::memory_order_relaxed);
  if (!v.budgets) return out;
  for (std::size_t i = 0; i < v.budgets->list.size(); ++i) {
    const bg::Budget& b = v.budgets->list[i];
    const bg::Standing& s = v.standings[i];
    scaleguard::metrics::BudgetGauge g;
    g.name = b.name, g.account = b.account, g.user = b.user, g.period = bg::to_string(b.period.cycle);
    g.usd = b.unit == bg::Unit::usd, g.shadow = b.shadow, g.checked = v.checked[i];
    g.limit = s.total, g.used = s.used, g.committed = s.committed, g.held = s.liens, g.accepted = s.recent;
    g.start = s.window.start, g.end = s.window.end;
    out.push_back(std::move(g));
  }
  return out;
}

std::string judge_rerun_budgets(uint32_t uid, const std::string& account, const std::string& record_id,
                                std::int64_t requeued_ms, const scaleguard::JobRequest& request,
                                std::string* audit_json) {
  if (!g_keeper || !g_keeper->gate.has_budgets()) return "";
  const auto held = g_keeper->policies->current();
  if (!held) return "";
  const scaleguard::Policy& policy = *held;
  const scaleguard::Decision decision = scaleguard::decide(request, policy);
  if (!decision.governed || decision.shadow || decision.action == Action::reject) return "";
  const std::string user = user_name(uid);
  bg::Charge charge = charge_of(request, decision, policy);
  charge.user = user.empty() ? std::to_string(uid) : user;
  charge.account = g_keeper->gate.account_of(charge.user, account);
  charge.record = record_id;
  charge.rerun = true;
  charge.requeued_ms = requeued_ms;
  bg::Verdict v = g_keeper->gate.judge(charge, now_ms(), true, true);
  log_quiet_findings(v, "new run of a job of " + charge.user);
  *audit_json = findings_json(v, charge);
  return v.outcome == bg::Outcome::reject ? "scaleguard: " + v.message() : "";
}

}  // namespace sg_slurm
