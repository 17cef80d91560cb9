// Budget admission (budget_admit.h): the Gate judges a job against every budget that counts
// it, with the ledger's numbers and its own record of what it accepted since the ledger's
// snapshot, and words what the user reads.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scaleguard/budget_admit.h"

namespace scaleguard::budget {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string slurm_time(long long minutes) {
  char buf[48];
  if (minutes >= 24 * 60)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:00", minutes / 1440, minutes / 60 % 24, minutes % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld:00", minutes / 60, minutes % 60);
  return buf;
}

std::string percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

std::string shape_of(const Charge& c) {
  std::string s = std::to_string(c.gpus) + " GPU" + (c.gpus == 1 ? "" : "s") + " x " + slurm_time(c.time_limit_min);
  return c.elements > 1 ? std::to_string(c.elements) + " array elements of " + s : s;
}

std::string period_of(const Budget& b, const Standing& s) {
  return std::string(b.period.cycle == Cycle::range ? "range " : std::string(to_string(b.period.cycle)) + " ") +
         (b.period.zone.empty() ? "" : "in " + b.period.zone + " ") + format_instant(s.window.start, s.start_offset_s) +
         " .. " + format_instant(s.window.end, s.end_offset_s);
}

// The numbers behind a budget's fill, in its unit.
std::string fill_text(const Budget& b, const Standing& s) {
  auto n = [&](double v) { return b.unit == Unit::usd ? format_amount(Unit::usd, v) : format_number(v); };
  std::string t = "used " + n(s.used) + (s.rolled_over ? " (new period: the ledger is from the last one)" : "") +
                  ", committed " + n(s.committed) + " by " + std::to_string(s.running) + " running job(s), " +
                  n(s.liens) + " held by " + std::to_string(s.pending) + " pending job(s)";
  if (s.recent > 0) t += ", " + n(s.recent) + " accepted since the last sync";
  return t;
}

// Largest --time (at the job's GPUs) and --gpus (at its time) that fit `room` GPU-hours.
std::string what_fits(const Charge& c, double room_gpu_hours) {
  const int elements = std::max(1, c.elements);
  if (room_gpu_hours <= 0 || c.gpus <= 0) return "";
  std::string s;
  const long long minutes = static_cast<long long>(std::floor(room_gpu_hours / (c.gpus * elements) * 60));
  if (minutes >= 1 && minutes < c.time_limit_min)
    s = "--time=" + slurm_time(minutes) + " with " + std::to_string(c.gpus) + " GPU" + (c.gpus == 1 ? "" : "s");
  const double hours = c.time_limit_min / 60.0;
  if (hours > 0) {
    const long long gpus = static_cast<long long>(std::floor(room_gpu_hours / (hours * elements)));
    if (gpus >= 1 && gpus < c.gpus)
      s += (s.empty() ? "" : ", or ") + ("--gpus=" + std::to_string(gpus) + " for " + slurm_time(c.time_limit_min));
  }
  return s;
}

// Spot partitions of the same GPU type where the job would fit this budget.
std::string spot_that_fits(const Budget& b, const Policy& policy, const Charge& c, double before, double limit) {
  const Partition* here = policy.find_partition(c.partition.substr(0, c.partition.find(',')));
  std::string out;
  for (const auto& p : policy.partitions) {
    if (p.capacity != Capacity::spot || p.name == c.partition || (here && p.gpu.name != here->gpu.name)) continue;
    const double cost = amount(b, policy, c.gpu_hours, p.name);
    if (before + cost > limit) continue;
    out += (out.empty() ? "" : ", ") + ("--partition=" + p.name) +
           (b.counts(p.name) ? " (" + format_amount(b.unit, cost) + " at spot prices)" : " (not counted by this budget)");
  }
  return out;
}

}  // namespace

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::warn: return "warn";
    case Outcome::move: return "move";
    case Outcome::reject: return "reject";
  }
  return "?";
}

std::string effective_account(const Ledger& ledger, const std::string& user, const std::string& asked_raw) {
  const std::string asked = lower(asked_raw);
  const auto assoc = ledger.accounts.find(user);
  if (!asked.empty()) {
    if (assoc == ledger.accounts.end()) return asked;   // no association at all: Slurm keeps it
    if (std::find(assoc->second.begin(), assoc->second.end(), asked) != assoc->second.end()) return asked;
  }
  const auto d = ledger.default_account.find(user);
  return d == ledger.default_account.end() ? "" : d->second;
}

std::string Verdict::message() const {
  std::string out;
  for (const auto& f : findings)
    if (!f.shadow && !f.message.empty() && f.outcome != Outcome::pass)
      out += (out.empty() ? "" : " | ") + f.message;
  return out;
}

Standing standing_of(const Budget& b, const LedgerEntry* e, std::int64_t now, double recent) {
  Standing s;
  s.recent = recent;
  s.total = b.limit;
  const bool zoned = !b.period.zone.empty() && b.period.cycle != Cycle::range;
  // A zoned period's window and the offsets its ends are written in, from `list`.
  auto zoned_window = [&](const std::vector<Boundary>& list, std::int64_t t) {
    s.window = window_in(list, t, &s.start_offset_s, &s.end_offset_s);
    s.covered = s.window.known();
  };
  s.start_offset_s = s.end_offset_s = b.period.utc_offset_s;
  if (zoned) zoned_window(b.period.boundaries, now);
  else s.window = window_at(b.period, now);
  if (!e) return s;
  s.known = true;
  s.window = e->window;   // the period counted
  if (zoned) {
    s.covered = true;
    s.start_offset_s = s.end_offset_s = 0;   // UTC unless the list has the window's ends
    if (window_in(e->boundaries, e->window.start).end == e->window.end)
      window_in(e->boundaries, e->window.start, &s.start_offset_s, &s.end_offset_s);
  }
  s.total = b.limit + e->carry_in;
  s.used = e->used, s.committed = e->committed, s.liens = e->liens;
  s.running = e->running, s.pending = e->pending;
  if (b.period.cycle != Cycle::range && now >= e->window.end) {
    // What running jobs used since the boundary is inside their commitment; the carry-in of
    // the new period is unknown until the next sync (none is counted: it never lets more in).
    s.rolled_over = true;
    if (zoned) zoned_window(e->boundaries, now);
    else s.window = window_at(b.period, now);
    s.used = 0;
    s.total = b.limit;
  }
  return s;
}

void Gate::set_budgets(std::shared_ptr<const Budgets> budgets, std::shared_ptr<const Policy> policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  budgets_ = std::move(budgets);
  policy_ = std::move(policy);
}

void Gate::set_ledger(std::shared_ptr<const Ledger> ledger, const std::string& problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_ = std::move(ledger);
  ledger_problem_ = ledger_ ? "" : problem;
  if (!ledger_) return;
  tree_ledger_ = ledger_;
  const std::int64_t cutoff = ledger_->snapshot_ms;
  records_.erase(std::remove_if(records_.begin(), records_.end(), [&](const Record& r) { return r.t_ms < cutoff; }),
                 records_.end());
  recent_.clear();
  for (const auto& r : records_) add_recent_locked(r, 1);
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.t_ms < cutoff ? held_.erase(it) : std::next(it);
}

void Gate::add_recent_locked(const Record& r, double sign) {
  for (const auto& [name, a] : r.amounts) recent_[name] += sign * a;
}

void Gate::retract(std::uint64_t ticket) {
  if (ticket == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    if (it->ticket != ticket) continue;
    add_recent_locked(*it, -1);
    records_.erase(std::next(it).base());
    return;
  }
}

bool Gate::has_budgets() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return budgets_ && !budgets_->list.empty();
}

std::string Gate::account_of(const std::string& user, const std::string& asked) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_ ? effective_account(*ledger_, user, asked) : lower(asked);
}

Gate::View Gate::view(std::int64_t now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  View v;
  v.budgets = budgets_;
  v.snapshot = ledger_ ? ledger_->snapshot : 0;
  v.usable = problem_locked(now).empty();
  if (!budgets_) return v;
  for (const auto& b : budgets_->list) {
    const LedgerEntry* e = nullptr;
    if (ledger_)
      if (auto it = ledger_->entries.find(b.name); it != ledger_->entries.end() && it->second.identity == b.identity_text)
        e = &it->second;
    const auto r = recent_.find(b.name);
    v.standings.push_back(standing_of(b, e, now, r == recent_.end() ? 0 : r->second));
    v.checked.push_back(v.usable && e && e->unusable.empty() && v.standings.back().covered);
  }
  return v;
}

std::string Gate::ledger_problem(std::int64_t now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return problem_locked(now);
}

std::string Gate::problem_locked(std::int64_t now) const {
  if (!ledger_) return ledger_problem_;
  const std::int64_t age = now - ledger_->snapshot;
  if (budgets_ && age > budgets_->settings.max_age_s)
    return "the budget ledger is " + std::to_string(age / 60) + " min old (synced " + format_instant(ledger_->snapshot) +
           ", stale after " + std::to_string(budgets_->settings.max_age_s / 60) + " min): is `scaleguard budget sync` running?";
  if (ledger_->snapshot < started_at_)
    return "the budget ledger (synced " + format_instant(ledger_->snapshot) + ") predates slurmctld's start at " +
           format_instant(started_at_) + ": jobs accepted in between are unknown until the next `scaleguard budget sync`";
  return "";
}

Verdict Gate::judge(const Charge& charge, std::int64_t now_ms, bool record, bool moved) {
  const std::int64_t now = now_ms >= 0 ? now_ms / 1000 : -((-now_ms + 999) / 1000);
  std::lock_guard<std::mutex> lock(mutex_);
  Verdict v;
  if (!budgets_ || budgets_->list.empty() || !policy_) return v;
  const Budgets& budgets = *budgets_;
  const Policy& policy = *policy_;
  const std::string problem = problem_locked(now);
  const bool open = budgets.settings.fail_open;
  const std::string mode = open ? "; jobs under budgets are accepted unchecked (on_stale_ledger = open)"
                                : "; jobs under budgets are refused until it is fresh (on_stale_ledger = closed): "
                                  "ask your administrator";
  Record rec;
  auto unchecked = [&](const std::string& budget, bool shadow, const std::string& why) {
    Finding f;
    f.budget = budget;
    f.shadow = shadow;
    f.unchecked = true;
    f.outcome = open ? Outcome::pass : Outcome::reject;
    f.message = "budgets cannot be checked: " + why + mode;
    v.findings.push_back(f);
  };
  // An account slurmctld will pick that the ledger cannot name could be any account budget's.
  if (charge.account.empty() && (!budgets.by_account.empty() || !budgets.by_pair.empty())) {
    bool shadow_only = true;
    for (const auto& b : budgets.list) shadow_only = shadow_only && (b.account.empty() || b.shadow);
    unchecked("(account)", shadow_only,
              problem.empty() ? "the job's account is not known to the ledger (no --account, and user " + charge.user +
                                    " has no default account in it yet)"
                              : problem);
  }
  // Sub-accounts: an account's budgets count its sub-accounts' jobs (the ledger's tree). An
  // account the tree does not hold (created since the sync) could be under any account budget.
  const AccountTree* tree = tree_ledger_ ? &tree_ledger_->account_parents : nullptr;
  if (tree && !tree->empty() && !charge.account.empty() && !tree->count(charge.account)) {
    bool any = false, shadow_only = true;
    for (const auto& b : budgets.list)
      if (!b.account.empty() && b.account != charge.account) any = true, shadow_only = shadow_only && b.shadow;
    if (any)
      unchecked("(account tree)", shadow_only,
                problem.empty() ? "account " + charge.account + " is not in the ledger's account tree (created since the "
                                  "last `scaleguard budget sync`?), so the budgets of the accounts above it are unknown"
                                : problem);
  }
  // An update's "before": what the budgets hold for the job now (see Charge::prior_record).
  double prior = charge.prior_gpu_hours;
  std::int64_t prior_basis_ms = 0;   // since when `prior` is held (Held::basis_ms); the record: unknown
  if (charge.update && !charge.prior_record.empty()) {
    if (auto h = held_.find(charge.prior_record); h != held_.end()) {
      prior = h->second.gpu_hours, prior_basis_ms = h->second.basis_ms;
    } else if (ledger_ && problem.empty()) {
      if (auto l = ledger_->job_gpu_hours.find(charge.prior_record); l != ledger_->job_gpu_hours.end()) {
        // The ledger counts a job requeued up to a second before its snapshot (the rerun rule below).
        prior = l->second, prior_basis_ms = ledger_->snapshot_ms - 1001;
      }
    }
  }
  // A rerun: what the budgets hold for the job as waiting for this run (see Charge::rerun).
  if (charge.rerun) {
    prior = 0;
    if (auto h = held_.find(charge.record); h != held_.end() && h->second.basis_ms >= charge.requeued_ms)
      prior = h->second.gpu_hours;
    else if (ledger_ && problem.empty() && ledger_->snapshot_ms > charge.requeued_ms + 1000) {
      // Counted while it waited for this run: its lien is what the ledger holds for it, or
      // (a ledger without per-job amounts) the envelope, which is what a pending job's lien is.
      const auto l = ledger_->job_gpu_hours.find(charge.record);
      prior = l != ledger_->job_gpu_hours.end() ? l->second : charge.gpu_hours;
    }
  }
  for (int i : budgets.applying(charge.account, charge.user, tree)) {
    const Budget& b = budgets.list[i];
    // A range not yet begun judges too: a job held now can be released inside it (issue 36,
    // class 6). Only an ended range no longer counts.
    const bool ended = b.period.cycle == Cycle::range && now >= b.period.range_end;
    if (ended || !b.counts(charge.partition)) continue;
    double a = amount(b, policy, charge.gpu_hours, charge.partition);
    if (charge.update) {
      const auto before = budgets.applying(charge.prior_account, charge.user, tree);
      if (std::find(before.begin(), before.end(), i) != before.end() && b.counts(charge.prior_partition))
        a = std::max(0.0, a - amount(b, policy, prior, charge.prior_partition));
      if (a <= 0) continue;   // the update adds nothing here
    } else if (charge.rerun) {
      a = std::max(0.0, a - amount(b, policy, prior, charge.partition));   // judged even at 0
    }
    rec.amounts.emplace_back(b.name, a);
    const LedgerEntry* e = nullptr;
    if (problem.empty() && ledger_) {
      auto it = ledger_->entries.find(b.name);
      if (it != ledger_->entries.end() && it->second.identity == b.identity_text) e = &it->second;
    }
    if (!e) {
      unchecked(b.name, b.shadow,
                problem.empty() ? "the ledger has not counted budget " + b.name + " (new or changed since the last sync)"
                                : problem);
      continue;
    }
    // The sync met a line it could not read that could be this budget's: its numbers may be
    // short. Like a stale ledger, for this budget alone (issue 36, class 8).
    if (!e->unusable.empty()) {
      unchecked(b.name, b.shadow, "the last sync could not count budget " + b.name + ": " + e->unusable);
      continue;
    }
    const auto r = recent_.find(b.name);
    const Standing s = standing_of(b, e, now, r == recent_.end() ? 0 : r->second);
    // A zoned budget past the boundaries the ledger lists: slurmctld cannot tell its period.
    if (!s.covered) {
      unchecked(b.name, b.shadow,
                "budget " + b.name + " follows the wall clock of " + b.period.zone + " and the ledger lists its periods " +
                    (e->boundaries.empty() ? std::string("not at all")
                                           : "only up to " + format_instant(e->boundaries.back().t, e->boundaries.back().offset_s)) +
                    " (slurmctld has no time zone database; run `scaleguard budget sync`)");
      continue;
    }
    Finding f;
    f.budget = b.name;
    f.shadow = b.shadow;
    f.unit = b.unit;
    f.before = s.fill();
    f.charge = a;
    f.total = s.total;
    const double after = f.before + a;
    const Threshold* hit = nullptr;
    for (const auto& t : b.thresholds) {
      const double level = s.total * (t.percent / 100 + (t.act == Act::warn ? 0 : b.grace));
      if (after > level * (1 + 1e-12) && (!hit || t.act >= hit->act)) hit = &t;
    }
    if (!hit || (hit->act == Act::move && moved)) continue;
    const std::string via = !b.account.empty() && b.account != charge.account ? ", which covers sub-account " + charge.account : "";
    const std::string head = "budget " + b.name + " (" + b.scope() + via + ", " + period_of(b, s) + ", " +
                             format_amount(b.unit, s.total) + (s.total != b.limit ? " with carry-over" : "") + "): ";
    const std::string resets = b.period.cycle == Cycle::range ? "; the range ends " + format_instant(s.window.end, s.end_offset_s)
                                                              : "; resets " + format_instant(s.window.end, s.end_offset_s);
    if (hit->act == Act::warn) {
      f.outcome = Outcome::warn;
      f.message = head + "this job brings it to " + percent(after, s.total) + " (" + fill_text(b, s) + ", this job " +
                  format_amount(b.unit, a) + "; warn at " + percent(hit->percent, 100) + ")" + resets;
    } else if (hit->act == Act::move) {
      f.outcome = Outcome::move;
      f.partition = hit->partition;
      f.message = head + "this job would bring it to " + percent(after, s.total) + " (" + fill_text(b, s) + ", this job " +
                  format_amount(b.unit, a) + "): moved to partition " + hit->partition + " (move at " +
                  percent(hit->percent, 100) + ")" + resets;
    } else {
      f.outcome = Outcome::reject;
      const double limit = s.total * (hit->percent / 100 + b.grace);
      const double price = b.unit == Unit::usd ? std::max(1e-9, a / std::max(1e-9, charge.gpu_hours)) : 1;
      const std::string fits = what_fits(charge, (limit - f.before) / price);
      const std::string spot = spot_that_fits(b, policy, charge, f.before, limit);
      f.message = head + (charge.update  ? "this update (to " + shape_of(charge) + ", " + format_amount(b.unit, a) + " more)"
                          : charge.rerun ? "this new run of the job (" + shape_of(charge) + ", " +
                                               format_amount(b.unit, amount(b, policy, charge.gpu_hours, charge.partition)) +
                                               (a + 1e-9 < amount(b, policy, charge.gpu_hours, charge.partition)
                                                    ? ", of which " + format_amount(b.unit, a) + " not yet held for it)"
                                                    : ")")
                                         : "this job (" + shape_of(charge) + ", " + format_amount(b.unit, a) + ")") +
                  " does not fit: " +
                  fill_text(b, s) + " leave " + format_amount(b.unit, std::max(0.0, limit - f.before)) +
                  (b.grace > 0 ? " (grace included)" : "") + resets + "." +
                  (fits.empty() && spot.empty() ? " Nothing this size fits before then."
                                                : " Fits now: " + fits + (fits.empty() || spot.empty() ? "" : "; or ") + spot + ".");
    }
    v.findings.push_back(std::move(f));
  }
  for (const auto& f : v.findings) {
    if (f.shadow || f.outcome <= v.outcome) continue;
    v.outcome = f.outcome;
    if (f.outcome == Outcome::move) v.move_to = f.partition;
  }
  if (record && (v.outcome == Outcome::pass || v.outcome == Outcome::warn)) {
    if (!rec.amounts.empty()) {
      rec.t_ms = now_ms;
      rec.ticket = v.ticket = next_ticket_++;
      add_recent_locked(rec, 1);
      records_.push_back(std::move(rec));
    }
    if (!charge.record.empty())
      held_[charge.record] = charge.update ? Held{now_ms, std::max(prior, charge.gpu_hours), prior_basis_ms}
                                           : Held{now_ms, charge.gpu_hours, now_ms};
  }
  return v;
}

}  // namespace scaleguard::budget
