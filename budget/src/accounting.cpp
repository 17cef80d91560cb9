// Counting budgets from Slurm's own view: runs from accounting (sacct, parsed by the caller),
// the queue from squeue (parsed here: what slurmctld may still grant each job), associations
// from sacctmgr. Only partitions the policy governs are counted.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "scaleguard/budget_ledger.h"
#include "scaleguard/envelope.h"

namespace scaleguard::budget {
namespace {

constexpr char kSep = '\x1f';
// Read from slurmctld by squeue -O, in this order. User-influenced text (TRES strings, the
// node list) comes last; every line must have exactly these fields.
const char* const kSqueueFields[] = {"JobArrayID", "UserName", "Account",   "Partition",     "State",
                                     "TimeLimit",  "TimeUsed", "NumNodes",  "MaxNodes",      "NumTasks",
                                     "ntpernode",  "sct",      "OverSubscribe", "tres-alloc", "tres-per-job",
                                     "tres-per-node", "tres-per-task", "tres-per-socket", "ReqNodes", "admin_comment"};
constexpr std::size_t kFields = sizeof kSqueueFields / sizeof *kSqueueFields;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const std::size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

// A name as Slurm prints it (job id, user, account, a partition list): any printable bytes
// (SSSD's user@domain, long partition lists), no control characters, bounded far above
// anything real.
constexpr std::size_t kMaxField = 1u << 16;
bool readable(const std::string& s) {
  if (s.empty() || s.size() > kMaxField) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// Each partition of a comma list.
template <class F>
void each_partition(const std::string& list, F f) {
  std::size_t b = 0;
  while (b <= list.size()) {
    std::size_t e = list.find(',', b);
    if (e == std::string::npos) e = list.size();
    if (e > b) f(list.substr(b, e - b));
    b = e + 1;
  }
}

bool any_governed(const std::string& list, const Policy& policy) {
  bool governed = false;
  each_partition(list, [&](const std::string& p) { governed = governed || policy.find_partition(p); });
  return governed;
}

// "N/A", "" and "0" are unset.
int count_field(const std::string& s, bool* ok) {
  if (s.empty() || s == "N/A" || s == "*") return 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (*end || v < 0 || v > 100000000) *ok = false;
  return static_cast<int>(v);
}

// Slurm durations: "MM:SS", "HH:MM:SS", "D-HH[:MM[:SS]]", minutes alone; -1 = UNLIMITED.
long long duration_s(const std::string& s, bool* ok) {
  if (s == "UNLIMITED" || s == "INFINITE" || s == "NOT_SET") return -1;
  long long days = 0;
  std::string rest = s;
  if (auto dash = s.find('-'); dash != std::string::npos) {
    const std::string d = s.substr(0, dash);   // bounded like the other fields: no overflow below
    if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string::npos) {
      *ok = false;
      return 0;
    }
    days = std::strtoll(d.c_str(), nullptr, 10);
    rest = s.substr(dash + 1);
  }
  std::vector<long long> parts;
  for (const auto& p : split(rest, ':')) {
    if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string::npos) {
      *ok = false;
      return 0;
    }
    parts.push_back(std::strtoll(p.c_str(), nullptr, 10));
  }
  long long h = 0, m = 0, sec = 0;
  if (parts.empty()) {
    *ok = false;
  } else if (s.find('-') != std::string::npos) {   // D-HH, D-HH:MM, D-HH:MM:SS
    if (parts.size() > 3) *ok = false;
    h = parts[0], m = parts.size() > 1 ? parts[1] : 0, sec = parts.size() > 2 ? parts[2] : 0;
  } else if (parts.size() == 1) {
    m = parts[0];
  } else if (parts.size() == 2) {
    m = parts[0], sec = parts[1];
  } else if (parts.size() == 3) {
    h = parts[0], m = parts[1], sec = parts[2];
  } else {
    *ok = false;
  }
  return ((days * 24 + h) * 60 + m) * 60 + sec;
}

bool pending_state(const std::string& s) {
  return s == "PENDING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED" || s == "SPECIAL_EXIT" ||
         s == "RESV_DEL_HOLD";
}
bool running_state(const std::string& s) {
  return s == "RUNNING" || s == "SUSPENDED" || s == "CONFIGURING" || s == "RESIZING" || s == "STOPPED" ||
         s == "SIGNALING";
}

// The scaleguard record id in an AdminComment ("... [sg=ID;...]", the last one), or "".
// job_submit/scaleguard writes it; only admins can set AdminComment.
std::string record_id(const std::string& admin_comment) {
  const auto at = admin_comment.rfind("[sg=");
  if (at == std::string::npos) return "";
  const auto end = admin_comment.find_first_of(";]", at + 4);
  if (end == std::string::npos || end - at - 4 > 64) return "";
  const std::string id = admin_comment.substr(at + 4, end - at - 4);
  for (unsigned char c : id)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return "";
  return id;
}

// The job as slurmctld holds it, read like job_submit reads a submission.
bool read_request(const std::vector<std::string>& f, const Policy& policy, JobRequest* r) {
  bool ok = true;
  const auto gpus = [&](const std::string& text, int* count) {
    if (text.empty() || text == "N/A") return;
    auto g = parse_gpu_tres(text, policy.shared_gres);
    if (!g) ok = false;
    else {
      *count = g->count;
      if (r->gpu_type.empty()) r->gpu_type = g->type;
    }
  };
  gpus(f[14], &r->gpus_total);
  gpus(f[15], &r->gpus_per_node);
  gpus(f[16], &r->gpus_per_task);
  gpus(f[17], &r->gpus_per_socket);
  // --ntasks-per-gpu without a GPU request: slurmctld derived gres/gpu (ntasks / N, or the
  // nodes) and keeps it only in its GRES list, which squeue shows as the requested TRES
  // (tres-alloc of a pending job): the job's GPUs, as job_submit's derive_gpus judged them.
  bool named = false;
  for (int i = 14; i <= 17; ++i)
    if (f[i] != "N/A" && !f[i].empty()) {
      auto g = parse_gpu_tres(f[i]);   // gpu only, as Slurm decides whether to derive
      named = named || !g || g->count > 0;
    }
  if (!named) {
    auto held = parse_held_gpus(f[13], SharedGpuGres{});
    if (!held) ok = false;
    else r->gpus_total = std::max(r->gpus_total, *held);
  }
  r->nodes_min = count_field(f[7], &ok);
  r->nodes_max = count_field(f[8], &ok);
  r->ntasks = count_field(f[9], &ok);
  r->ntasks_per_node = count_field(f[10], &ok);
  r->sockets_per_node = count_field(split(f[11], ':')[0], &ok);
  r->exclusive = f[12] == "NO";
  if (!f[18].empty() && f[18] != "N/A") {
    auto n = count_hostlist(f[18]);
    if (!n) ok = false;
    else r->nodes_listed = *n;
  }
  const long long limit = duration_s(f[5], &ok);
  r->time_limit_min = limit < 0 ? -1 : static_cast<int>(std::min<long long>(limit / 60, 100000000));
  r->partition = f[3];
  return ok;
}

// The longest a job may run in a partition when its own limit is UNLIMITED.
double fallback_hours(const Partition& p) { return (p.max_time_min > 0 ? p.max_time_min : p.default_time_min) / 60.0; }

}  // namespace

std::vector<std::string> squeue_arguments() {
  std::string format;
  for (const char* field : kSqueueFields) format += std::string(format.empty() ? "" : ",") + field + ":0" + kSep;
  // -r: one line per array element; every state (filtered here).
  return {"-h", "-r", "-t", "all", "-O", format};
}

bool read_squeue_line(const std::string& line, const Policy& policy, QueuedJob* out) {
  auto f = split(line, kSep);
  if (f.size() == kFields + 1 && f.back().empty()) f.pop_back();
  QueuedJob q;
  // An unreadable line is kept, with what it names as far as it can be read, unless it
  // plainly cannot be governed (its state or partitions say so): budgets it could touch are
  // then marked unusable, never silently left out.
  const auto unreadable = [&](const std::string& why) {
    if (f.size() > 4 && readable(f[4]) && !pending_state(f[4]) && !running_state(f[4])) return false;
    if (f.size() > 3 && readable(f[3]) && !any_governed(f[3], policy)) return false;
    q.job_id = f.size() > 0 && readable(f[0]) ? f[0] : "";
    q.user = f.size() > 1 && readable(f[1]) ? f[1] : "";
    q.account = f.size() > 2 && readable(f[2]) ? f[2] : "";
    q.partition = f.size() > 3 && readable(f[3]) ? f[3] : "";
    q.unreadable = why.substr(0, 200);
    *out = std::move(q);
    return true;
  };
  if (f.size() != kFields)
    return unreadable("has " + std::to_string(f.size()) + " fields, not " + std::to_string(kFields));
  const bool pending = pending_state(f[4]), running = running_state(f[4]);
  if (!pending && !running) return false;
  if (!readable(f[0]) || !readable(f[1]) || !readable(f[2]) || !readable(f[3]))
    return unreadable("unexpected characters in job id, user, account or partition");
  if (!any_governed(f[3], policy)) return false;   // not governed: budgets do not count it
  q.job_id = f[0], q.user = f[1], q.account = f[2], q.partition = f[3];
  q.running = running;
  JobRequest r;
  if (!read_request(f, policy, &r)) return unreadable("unreadable job request of job " + q.job_id);
  // What Slurm holds now (running: allocated; pending: requested), GPUs as the policy counts them.
  auto held = parse_held_gpus(f[13], policy.shared_gres);
  if (!held) return unreadable("unreadable TRES of job " + q.job_id);
  if (running) {
    bool ok = true;
    const long long limit = duration_s(f[5], &ok), used = duration_s(f[6], &ok);
    if (!ok) return unreadable("unreadable time limit or time used of job " + q.job_id);
    const Partition* part = policy.find_partition(q.partition);
    if (!part) return false;   // runs in an ungoverned partition of its list
    const double left_h = limit < 0 ? std::max(0.0, fallback_hours(*part) - used / 3600.0)
                                    : std::max(0LL, limit - used) / 3600.0;
    // A GRES accounting does not track (shard or mps without AccountingStorageTRES) is
    // missing from the allocation: then the request's envelope in its partition.
    r.partition = part->name;
    const int gpus = *held > 0 ? *held : envelope_of(r, *part).gpus;
    q.gpu_hours = gpus * left_h;
    q.whole_gpu_hours = gpus * (limit < 0 ? fallback_hours(*part) : limit / 3600.0);
  } else {
    // The most Slurm may grant in any governed partition of its list, never less than what
    // it holds requested.
    each_partition(q.partition, [&](const std::string& name) {
      const Partition* part = policy.find_partition(name);
      if (!part) return;
      JobRequest one = r;
      one.partition = part->name;
      const Envelope env = envelope_of(one, *part);
      const double hours = env.time_limit_min > 0 ? env.hours() : fallback_hours(*part);
      q.gpu_hours = std::max(q.gpu_hours, std::max(env.gpus, *held) * hours);
    });
    q.whole_gpu_hours = q.gpu_hours;
  }
  q.record = record_id(f[19]);
  *out = std::move(q);
  return true;
}

std::vector<QueuedJob> parse_squeue(const std::string& text, const Policy& policy) {
  std::vector<QueuedJob> out;
  for (const auto& line : split(text, '\n')) {
    QueuedJob q;
    if (!line.empty() && read_squeue_line(line, policy, &q)) out.push_back(std::move(q));
  }
  return out;
}

void parse_default_accounts(const std::string& text, Ledger* ledger) {
  for (const auto& line : split(text, '\n')) {
    const auto f = split(line, '|');
    if (f.size() >= 2 && readable(f[0]) && readable(f[1])) ledger->default_account[f[0]] = f[1];
  }
}

void parse_associations(const std::string& text, Ledger* ledger) {
  for (const auto& line : split(text, '\n')) {
    const auto f = split(line, '|');
    if (f.size() < 2 || !readable(f[0]) || !readable(f[1])) continue;   // account-level rows have no user
    auto& list = ledger->accounts[f[0]];
    if (std::find(list.begin(), list.end(), f[1]) == list.end()) list.push_back(f[1]);
  }
}

std::vector<std::string> account_tree_arguments() {
  return {"-n", "-P", "show", "assoc", "format=Account,ParentName,User"};
}

void parse_account_tree(const std::string& text, Ledger* ledger) {
  for (const auto& line : split(text, '\n')) {
    const auto f = split(line, '|');
    // User rows name their account as parent (or nothing): only account rows shape the tree.
    if (f.size() < 3 || !readable(f[0]) || !f[2].empty() || f[0].size() > 256) continue;
    std::string account = f[0];
    for (char& c : account) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto& parents = ledger->account_parents[account];
    if (f[1].empty() || !readable(f[1]) || f[1].size() > 256) continue;
    std::string parent = f[1];
    for (char& c : parent) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (parent != account && std::find(parents.begin(), parents.end(), parent) == parents.end()) parents.push_back(parent);
  }
}

std::int64_t earliest_start(const Budgets& budgets, std::int64_t snapshot) {
  std::int64_t earliest = snapshot;
  for (const auto& b : budgets.list) {
    Window w = window_at(b.period, snapshot);
    if (b.carry_over > 0) w = previous_window(b.period, w);
    if (w.known()) earliest = std::min(earliest, w.start);   // a zoned period without boundaries is not counted
  }
  return earliest;
}

UsageCounter::UsageCounter(const Budgets& budgets, const Policy& policy, std::int64_t snapshot, const AccountTree* tree)
    : budgets_(budgets), policy_(policy), snapshot_(snapshot), tree_(tree), sums_(budgets.list.size()) {
  for (std::size_t i = 0; i < budgets.list.size(); ++i) {
    sums_[i].now = window_at(budgets.list[i].period, snapshot);
    sums_[i].before = previous_window(budgets.list[i].period, sums_[i].now);
  }
}

void UsageCounter::add(const UsedRun& run) {
  if (run.start < 0 || run.gpus <= 0 || !policy_.find_partition(run.partition)) return;
  const auto overlap_h = [](std::int64_t a, std::int64_t b, std::int64_t lo, std::int64_t hi) {
    const std::int64_t s = std::max(a, lo), e = std::min(b, hi);
    return e > s ? (e - s) / 3600.0 : 0.0;
  };
  const std::int64_t end = run.end < 0 ? snapshot_ : std::min(run.end, snapshot_);
  for (int i : budgets_.applying(run.account, run.user, tree_)) {
    const Budget& b = budgets_.list[i];
    Sums& s = sums_[i];
    s.used += amount(b, policy_, run.gpus * overlap_h(run.start, end, s.now.start, std::min(s.now.end, snapshot_)), run.partition);
    if (b.carry_over > 0)
      s.used_before += amount(b, policy_, run.gpus * overlap_h(run.start, end, s.before.start, s.before.end), run.partition);
  }
}

void UsageCounter::add(const QueuedJob& q) {
  if (!q.unreadable.empty()) {
    unreadable(q.account, q.user, q.partition, "squeue: job " + (q.job_id.empty() ? "?" : q.job_id) + ": " + q.unreadable);
    return;
  }
  if (!q.record.empty()) jobs_[q.record] += q.whole_gpu_hours;   // array elements share one record
  for (int i : budgets_.applying(q.account, q.user, tree_)) {
    const Budget& b = budgets_.list[i];
    if (!b.counts(q.partition) || q.gpu_hours <= 0) continue;
    const double a = amount(b, policy_, q.gpu_hours, q.partition);
    if (q.running) sums_[i].committed += a, ++sums_[i].running;
    else sums_[i].liens += a, ++sums_[i].pending;
  }
}

void UsageCounter::unreadable(const std::string& account, const std::string& user, const std::string& partition,
                              const std::string& why) {
  // Every budget the record could be charged to: an unknown account, user or partition
  // could be any; a known account, its own budgets and those of the accounts above it.
  const auto enclosing = enclosing_accounts(tree_, account);
  for (std::size_t i = 0; i < budgets_.list.size(); ++i) {
    const Budget& b = budgets_.list[i];
    const bool could = (account.empty() || b.account.empty() ||
                        std::find(enclosing.begin(), enclosing.end(), b.account) != enclosing.end()) &&
                       (user.empty() || b.user.empty() || b.user == user) &&
                       (partition.empty() || b.counts(partition));
    if (could && sums_[i].unusable.empty()) sums_[i].unusable = why.substr(0, 300);
  }
}

void UsageCounter::finish(Ledger* ledger) const {
  for (std::size_t i = 0; i < budgets_.list.size(); ++i) {
    const Budget& b = budgets_.list[i];
    const Sums& s = sums_[i];
    if (!s.now.known()) {   // a zoned period without the tz database's boundaries (budget/zone)
      ledger->notes.push_back("budget " + b.name + " not counted: its periods in " + b.period.zone +
                              " were not worked out (no boundaries from the time zone database)");
      continue;
    }
    LedgerEntry e;
    e.identity = b.identity();
    e.window = s.now;
    // A zoned budget's boundaries from its window on: slurmctld rolls it over with them.
    for (const auto& x : b.period.boundaries)
      if (x.t >= s.now.start) e.boundaries.push_back(x);
    e.used = s.used;
    e.committed = s.committed;
    e.liens = s.liens;
    e.running = s.running;
    e.pending = s.pending;
    e.unusable = s.unusable;
    if (b.carry_over > 0) e.carry_in = std::clamp(b.limit - s.used_before, 0.0, b.carry_over * b.limit);
    const double elapsed_h = (std::min(snapshot_, s.now.end) - s.now.start) / 3600.0;
    e.burn_per_hour = elapsed_h > 1.0 / 60 ? s.used / elapsed_h : 0;
    ledger->entries[b.name] = e;
  }
  ledger->job_gpu_hours = jobs_;
}

void count_budgets(const Budgets& budgets, const Policy& policy, const std::vector<UsedRun>& runs,
                   const std::vector<QueuedJob>& queue, std::int64_t snapshot, Ledger* ledger) {
  UsageCounter counter(budgets, policy, snapshot, &ledger->account_parents);
  for (const auto& run : runs) counter.add(run);
  for (const auto& q : queue) counter.add(q);
  counter.finish(ledger);
}

}  // namespace scaleguard::budget
