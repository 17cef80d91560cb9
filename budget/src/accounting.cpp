// Counting budgets from Slurm's own view: runs from accounting (sacct, parsed by the caller),
// the queue from squeue (parsed here: what slurmctld may still grant each job), associations
// from sacctmgr. Only partitions the policy governs are counted.
#include <algorithm>
#include <cmath>

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
                                     "tres-per-node", "tres-per-task", "tres-per-socket", "ReqNodes"};
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

bool plain(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-' && c != ',' && c != '+' && c != '[' && c != ']')
      return false;
  return true;
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

// gres/gpu in an allocation's TRES ("cpu=1,node=1,gres/gpu=4,gres/gpu:a100=4"): the untyped
// entry, else the typed ones summed.
int allocated_gpus(const std::string& tres) {
  int untyped = -1;
  long typed = 0;
  for (const auto& item : split(tres, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = item.substr(0, eq);
    // Clamped so that a hostile or corrupt sacct line cannot overflow the sum.
    const long n = std::clamp(std::strtol(item.c_str() + eq + 1, nullptr, 10), 0L, 1000000L);
    if (key == "gres/gpu") untyped = static_cast<int>(n);
    else if (key.rfind("gres/gpu:", 0) == 0) typed = std::min(typed + n, 1000000L);
  }
  return untyped >= 0 ? untyped : static_cast<int>(typed);
}

bool pending_state(const std::string& s) {
  return s == "PENDING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED" || s == "SPECIAL_EXIT" ||
         s == "RESV_DEL_HOLD";
}
bool running_state(const std::string& s) {
  return s == "RUNNING" || s == "SUSPENDED" || s == "CONFIGURING" || s == "RESIZING" || s == "STOPPED" ||
         s == "SIGNALING";
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

std::vector<QueuedJob> parse_squeue(const std::string& text, const Policy& policy, std::vector<std::string>* notes) {
  std::vector<QueuedJob> out;
  int skipped = 0, line_no = 0;
  std::string first_skip;
  for (const auto& line : split(text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    auto f = split(line, kSep);
    if (f.size() == kFields + 1 && f.back().empty()) f.pop_back();
    const auto skip = [&](const std::string& why) {
      if (++skipped == 1) first_skip = "line " + std::to_string(line_no) + ": " + why;
    };
    if (f.size() != kFields) {
      skip("has " + std::to_string(f.size()) + " fields, not " + std::to_string(kFields));
      continue;
    }
    const bool pending = pending_state(f[4]), running = running_state(f[4]);
    if (!pending && !running) continue;
    if (!plain(f[0]) || !plain(f[1]) || !plain(f[2]) || !plain(f[3])) {
      skip("unexpected characters in job id, user, account or partition");
      continue;
    }
    QueuedJob q;
    q.job_id = f[0], q.user = f[1], q.account = f[2], q.partition = f[3];
    q.running = running;
    bool ok = true;
    if (running) {
      const Partition* part = policy.find_partition(q.partition);
      if (!part) continue;   // not governed: budgets do not count it
      const long long limit = duration_s(f[5], &ok), used = duration_s(f[6], &ok);
      if (!ok) {
        skip("unreadable time limit or time used");
        continue;
      }
      const double left_h = limit < 0 ? std::max(0.0, fallback_hours(*part) - used / 3600.0)
                                      : std::max(0LL, limit - used) / 3600.0;
      q.gpu_hours = allocated_gpus(f[13]) * left_h;
    } else {
      JobRequest r;
      if (!read_request(f, policy, &r)) {
        skip("unreadable job request of job " + q.job_id);
        continue;
      }
      // The most Slurm may grant in any governed partition of its list.
      bool governed = false;
      std::size_t b = 0;
      while (b <= q.partition.size()) {
        std::size_t e = q.partition.find(',', b);
        if (e == std::string::npos) e = q.partition.size();
        if (const Partition* part = policy.find_partition(q.partition.substr(b, e - b))) {
          governed = true;
          JobRequest one = r;
          one.partition = part->name;
          const Envelope env = envelope_of(one, *part);
          const double hours = env.time_limit_min > 0 ? env.hours() : fallback_hours(*part);
          q.gpu_hours = std::max(q.gpu_hours, env.gpus * hours);
        }
        b = e + 1;
      }
      if (!governed) continue;
    }
    out.push_back(std::move(q));
  }
  if (skipped > 0 && notes)
    notes->push_back("squeue: skipped " + std::to_string(skipped) + " job line(s) (first: " + first_skip + ")");
  return out;
}

void parse_default_accounts(const std::string& text, Ledger* ledger) {
  for (const auto& line : split(text, '\n')) {
    const auto f = split(line, '|');
    if (f.size() >= 2 && plain(f[0]) && plain(f[1])) ledger->default_account[f[0]] = f[1];
  }
}

void parse_associations(const std::string& text, Ledger* ledger) {
  for (const auto& line : split(text, '\n')) {
    const auto f = split(line, '|');
    if (f.size() < 2 || !plain(f[0]) || !plain(f[1])) continue;   // account-level rows have no user
    auto& list = ledger->accounts[f[0]];
    if (std::find(list.begin(), list.end(), f[1]) == list.end()) list.push_back(f[1]);
  }
}

std::int64_t earliest_start(const Budgets& budgets, std::int64_t snapshot) {
  std::int64_t earliest = snapshot;
  for (const auto& b : budgets.list) {
    Window w = window_at(b.period, snapshot);
    if (b.carry_over > 0) w = previous_window(b.period, w);
    earliest = std::min(earliest, w.start);
  }
  return earliest;
}

void count_budgets(const Budgets& budgets, const Policy& policy, const std::vector<UsedRun>& runs,
                   const std::vector<QueuedJob>& queue, std::int64_t snapshot, Ledger* ledger) {
  struct Sums {
    Window now, before;
    double used = 0, used_before = 0, committed = 0, liens = 0;
    int running = 0, pending = 0;
  };
  std::vector<Sums> sums(budgets.list.size());
  for (std::size_t i = 0; i < budgets.list.size(); ++i) {
    sums[i].now = window_at(budgets.list[i].period, snapshot);
    sums[i].before = previous_window(budgets.list[i].period, sums[i].now);
  }
  const auto overlap_h = [](std::int64_t a, std::int64_t b, std::int64_t lo, std::int64_t hi) {
    const std::int64_t s = std::max(a, lo), e = std::min(b, hi);
    return e > s ? (e - s) / 3600.0 : 0.0;
  };
  for (const auto& run : runs) {
    if (run.start < 0 || run.gpus <= 0 || !policy.find_partition(run.partition)) continue;
    const std::int64_t end = run.end < 0 ? snapshot : std::min(run.end, snapshot);
    for (int i : budgets.applying(run.account, run.user)) {
      const Budget& b = budgets.list[i];
      Sums& s = sums[i];
      s.used += amount(b, policy, run.gpus * overlap_h(run.start, end, s.now.start, std::min(s.now.end, snapshot)), run.partition);
      if (b.carry_over > 0)
        s.used_before += amount(b, policy, run.gpus * overlap_h(run.start, end, s.before.start, s.before.end), run.partition);
    }
  }
  for (const auto& q : queue) {
    for (int i : budgets.applying(q.account, q.user)) {
      const Budget& b = budgets.list[i];
      if (!b.counts(q.partition) || q.gpu_hours <= 0) continue;
      const double a = amount(b, policy, q.gpu_hours, q.partition);
      if (q.running) sums[i].committed += a, ++sums[i].running;
      else sums[i].liens += a, ++sums[i].pending;
    }
  }
  for (std::size_t i = 0; i < budgets.list.size(); ++i) {
    const Budget& b = budgets.list[i];
    const Sums& s = sums[i];
    LedgerEntry e;
    e.identity = b.identity();
    e.window = s.now;
    e.used = s.used;
    e.committed = s.committed;
    e.liens = s.liens;
    e.running = s.running;
    e.pending = s.pending;
    if (b.carry_over > 0) e.carry_in = std::clamp(b.limit - s.used_before, 0.0, b.carry_over * b.limit);
    const double elapsed_h = (std::min(snapshot, s.now.end) - s.now.start) / 3600.0;
    e.burn_per_hour = elapsed_h > 1.0 / 60 ? s.used / elapsed_h : 0;
    ledger->entries[b.name] = e;
  }
}

}  // namespace scaleguard::budget
