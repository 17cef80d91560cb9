// load_budgets(): the policy file's [budgets] and [budget NAME] sections -> Budgets.
// Same conventions as the rest of the policy: unknown keys, malformed values and values out of
// range are errors naming file, line and key with a hint.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scaleguard/budget.h"
#include "scaleguard/ini.h"

namespace scaleguard::budget {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= s.size()) {
    std::size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (auto item = trim(s.substr(b, e - b)); !item.empty()) out.push_back(item);
    b = e + 1;
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Names as Slurm keeps them (accounts, users, partitions, budgets): letters, digits, . _ -
bool plain_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// A user name as Slurm takes it from the system: also SSSD's user@domain.
bool user_name(const std::string& s) {
  const auto at = s.find('@');
  return at == std::string::npos ? plain_name(s)
                                 : s.size() <= 128 && plain_name(s.substr(0, at)) && plain_name(s.substr(at + 1));
}

const ini::Entry* entry_of(const ini::File& f, const std::string& section, const char* key) {
  for (const auto& e : f.entries)
    if (e.section == section && e.key == key) return &e;
  return nullptr;
}

Result<std::vector<Threshold>> parse_actions(const ini::File& f, const ini::Entry& e, const Policy& policy) {
  const char* forms = "comma list of PERCENT% ACTION: warn, reject or move PARTITION (e.g. 80% warn, 100% reject)";
  std::vector<Threshold> out;
  for (const auto& item : split_list(e.value)) {
    std::vector<std::string> words;
    std::size_t b = 0;
    while (b < item.size()) {
      std::size_t w = item.find_first_not_of(" \t", b);
      if (w == std::string::npos) break;
      std::size_t end = item.find_first_of(" \t", w);
      if (end == std::string::npos) end = item.size();
      words.push_back(item.substr(w, end - w));
      b = end;
    }
    if (words.size() < 2 || words[0].back() != '%') return f.error_at(e, "malformed action '" + item + "'", forms);
    char* end = nullptr;
    const std::string pct = words[0].substr(0, words[0].size() - 1);
    const double p = std::strtod(pct.c_str(), &end);
    if (pct.empty() || *end || !(p > 0 && p <= 1000))
      return f.error_at(e, "'" + words[0] + "' is not a percentage of the budget", "1% to 1000%");
    Threshold t;
    t.percent = p;
    const std::string act = lower(words[1]);
    if (act == "warn" && words.size() == 2) t.act = Act::warn;
    else if (act == "reject" && words.size() == 2) t.act = Act::reject;
    else if (act == "move" && words.size() == 3) {
      t.act = Act::move;
      t.partition = words[2];
      if (!policy.find_partition(t.partition))
        return f.error_at(e, "move to partition '" + t.partition + "', which the policy does not describe",
                          "name a [partition NAME] of this policy (a low-priority or spot partition)");
    } else {
      return f.error_at(e, "malformed action '" + item + "'", forms);
    }
    for (const auto& o : out)
      if (o.percent == t.percent) return f.error_at(e, "two actions at " + words[0], "one action per threshold");
    out.push_back(t);
  }
  if (out.empty()) return f.error_at(e, "no actions", forms);
  std::sort(out.begin(), out.end(), [](const Threshold& a, const Threshold& b) { return a.percent < b.percent; });
  return out;
}

// "month", "week", ..., or "FROM..TO" (both inclusive when they are dates). `zone`: the
// budget's time zone ("" = UTC): a cycle starts at its wall-clock time; a range, whose ends are
// instants, names their offsets under a zone.
Result<bool> parse_period(const ini::File& f, const ini::Entry& e, const ini::Entry* start, const std::string& zone,
                          Period& p) {
  const std::string v = lower(trim(e.value));
  const auto dots = v.find("..");
  if (dots != std::string::npos) {
    if (start) return f.error_at(*start, "a date range has no start key", "write period = FROM..TO alone");
    const std::string from = trim(e.value.substr(0, dots)), to = trim(e.value.substr(dots + 2));
    if (!zone.empty() && (!names_offset(from) || !names_offset(to)))
      return f.error_at(e, "a date range under timezone " + zone + " without the offsets of its ends",
                        "write both ends with their UTC offset (2026-12-01T00:00+01:00..2027-01-01T00:00+01:00), or "
                        "timezone = UTC for this budget");
    auto a = parse_instant(from, &p.utc_offset_s);
    if (!a) return f.error_at(e, a.error().message, a.error().hint);
    int to_offset = 0;
    auto b = parse_instant(to, &to_offset);
    if (!b) return f.error_at(e, b.error().message, b.error().hint);
    p.cycle = Cycle::range;
    p.anchor = *a;
    // A bare date ends with its day.
    p.range_end = *b + (to.size() == 10 ? 86400 : 0);
    if (p.range_end <= p.anchor) return f.error_at(e, "the range ends before it starts", "FROM..TO with TO after FROM");
    return true;
  }
  if (v == "day") p.cycle = Cycle::day;
  else if (v == "week") p.cycle = Cycle::week;
  else if (v == "month") p.cycle = Cycle::month;
  else if (v == "quarter") p.cycle = Cycle::quarter;
  else return f.error_at(e, "unknown period '" + e.value + "'", "day, week, month, quarter or FROM..TO (2026-12-01..2026-12-31)");
  // Without a start: days at 00:00 UTC, weeks on Mondays, months on the 1st, quarters in
  // January, April, July and October.
  // Zoned: the same, at the zone's wall-clock time (the anchor counts its seconds).
  p.anchor = p.cycle == Cycle::week ? 4 * 86400 : 0;
  p.zone = zone;
  if (start) {
    if (!zone.empty() && names_offset(trim(start->value)))
      return f.error_at(*start, "start '" + trim(start->value) + "' names an offset, under timezone " + zone,
                        "write the wall-clock time in " + zone + " without Z or +HH:MM (e.g. 2026-01-15T06:00)");
    auto a = parse_instant(trim(start->value), &p.utc_offset_s);
    if (!a) return f.error_at(*start, a.error().message, a.error().hint);
    p.anchor = *a;
  }
  return true;
}

Result<Budget> parse_budget(const ini::File& f, const ini::Section& sec, const Policy& policy,
                            const std::string& default_zone) {
  const std::string h = "budget " + sec.name;
  Error head{"", f.path, sec.line, "[" + h + "]", ""};
  if (!plain_name(sec.name))
    return head.message = "budget name '" + sec.name + "' is not a plain name",
           head.hint = "letters, digits, '.', '_' and '-', at most 64", head;
  Budget b;
  b.name = sec.name;
  b.line = sec.line;
  b.shadow = policy.shadow;
  std::string period = "month", start, actions = "80% warn, 100% reject", partitions, mode, timezone;
  double gpu_hours = 0, dollars = 0;
  auto ok = ini::bind(f, h, sec.line,
                      {{"account", ini::Field::text, &b.account, 0, 0, false, "a Slurm account"},
                       {"user", ini::Field::text, &b.user, 0, 0, false, "a user name"},
                       {"gpu_hours", ini::Field::number, &gpu_hours, 0.001, 1e12, false, "GPU-hours per period"},
                       {"dollars", ini::Field::number, &dollars, 0.01, 1e12, false, "dollars per period"},
                       {"period", ini::Field::text, &period, 0, 0, false, "day, week, month, quarter or FROM..TO"},
                       {"start", ini::Field::text, &start, 0, 0, false, "when a period starts, e.g. 2026-01-15"},
                       {"timezone", ini::Field::text, &timezone, 0, 0, false,
                        "the IANA time zone whose wall clock the periods follow, e.g. Europe/Berlin"},
                       {"carry_over", ini::Field::number, &b.carry_over, 0, 1, false,
                        "fraction of the limit unused budget may add to the next period (0 = none)"},
                       {"grace", ini::Field::number, &b.grace, 0, 1, false,
                        "fraction of the budget a job may overrun the reject/move thresholds by"},
                       {"actions", ini::Field::text, &actions, 0, 0, false, "80% warn, 100% reject"},
                       {"partitions", ini::Field::text, &partitions, 0, 0, false, "partitions counted (default all)"},
                       {"mode", ini::Field::text, &mode, 0, 0, false, "enforce or shadow"}});
  if (!ok) return ok.error();
  b.account = lower(trim(b.account));   // slurmctld lowercases accounts
  b.user = trim(b.user);
  if (b.account.empty() && b.user.empty())
    return head.message = "a budget needs an account, a user or both", head.hint = "account = ml, user = alice", head;
  if (!b.account.empty() && !plain_name(b.account))
    return f.error_at(*entry_of(f, h, "account"), "'" + b.account + "' is not an account name", "e.g. ml-team");
  if (!b.user.empty() && !user_name(b.user))
    return f.error_at(*entry_of(f, h, "user"), "'" + b.user + "' is not a user name", "e.g. alice or alice@corp.example");
  const auto* gh = entry_of(f, h, "gpu_hours");
  const auto* usd = entry_of(f, h, "dollars");
  if (!gh == !usd)
    return head.message = gh ? "both gpu_hours and dollars" : "no limit",
           head.hint = "give the budget in gpu_hours = N or in dollars = N", head;
  b.unit = gh ? Unit::gpu_hours : Unit::usd;
  b.limit = gh ? gpu_hours : dollars;
  std::string zone = default_zone;
  if (const auto* tz = entry_of(f, h, "timezone"); tz && !zone_name(trim(tz->value), &zone))
    return f.error_at(*tz, "'" + trim(tz->value) + "' is not a time zone name",
                      "an IANA time zone such as Europe/Berlin or America/New_York (UTC when left out)");
  const auto* start_entry = entry_of(f, h, "start");
  if (const auto* pe = entry_of(f, h, "period")) {
    if (auto r = parse_period(f, *pe, start_entry, zone, b.period); !r) return r.error();
  } else {
    ini::Entry dflt{h, "period", period, sec.line};
    if (auto r = parse_period(f, dflt, start_entry, zone, b.period); !r) return r.error();
  }
  if (b.period.cycle == Cycle::range && b.carry_over > 0)
    return f.error_at(*entry_of(f, h, "carry_over"), "a date range has no next period to carry over to",
                      "leave carry_over out");
  ini::Entry act_entry{h, "actions", actions, sec.line};
  auto thresholds = parse_actions(f, entry_of(f, h, "actions") ? *entry_of(f, h, "actions") : act_entry, policy);
  if (!thresholds) return thresholds.error();
  b.thresholds = std::move(thresholds).value();
  for (auto& p : split_list(partitions)) {
    if (!policy.find_partition(p))
      return f.error_at(*entry_of(f, h, "partitions"), "partition '" + p + "' is not in the policy",
                        "list [partition NAME] sections of this policy");
    b.partitions.push_back(p);
  }
  if (const auto* me = entry_of(f, h, "mode")) {
    const std::string m = lower(trim(me->value));
    if (m == "shadow") b.shadow = true;
    else if (m == "enforce") b.shadow = false;
    else return f.error_at(*me, "unknown mode '" + me->value + "'", "enforce (act) or shadow (judge and log only)");
  }
  return b;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent_text(double p) { return fixed(p, p == std::floor(p) ? 0 : 1) + "%"; }

}  // namespace

const char* to_string(Unit u) { return u == Unit::usd ? "dollars" : "GPU-hours"; }
const char* to_string(Cycle c) {
  switch (c) {
    case Cycle::day: return "day";
    case Cycle::week: return "week";
    case Cycle::month: return "month";
    case Cycle::quarter: return "quarter";
    case Cycle::range: return "range";
  }
  return "?";
}
const char* to_string(Act a) {
  switch (a) {
    case Act::warn: return "warn";
    case Act::move: return "move";
    case Act::reject: return "reject";
  }
  return "?";
}

std::string Budget::scope() const {
  if (!account.empty() && !user.empty()) return "user " + user + " in account " + account;
  return account.empty() ? "user " + user : "account " + account;
}

std::string Budget::identity() const {
  if (!identity_text.empty()) return identity_text;
  std::string id = "a=" + account + ";u=" + user + ";unit=" + to_string(unit) + ";cycle=" + to_string(period.cycle) +
                   ";anchor=" + std::to_string(period.anchor) + ";off=" + std::to_string(period.utc_offset_s) +
                   ";end=" + std::to_string(period.range_end) + ";p=";
  for (const auto& p : partitions) id += p + ",";
  if (!period.zone.empty()) id += ";tz=" + period.zone;   // absent for UTC: older ledgers stay usable
  return id;
}

bool Budget::counts(const std::string& list) const {
  if (partitions.empty()) return true;
  for (const auto& p : split_list(list))
    if (std::find(partitions.begin(), partitions.end(), p) != partitions.end()) return true;
  return false;
}

std::vector<std::string> enclosing_accounts(const AccountTree* tree, const std::string& account) {
  std::vector<std::string> out;
  if (account.empty()) return out;
  out.push_back(account);
  // Breadth first over the parents; `out` doubles as the visited list (cycles end here).
  for (std::size_t i = 0; tree && i < out.size() && out.size() < 64; ++i) {
    const auto it = tree->find(out[i]);
    if (it == tree->end()) continue;
    for (const auto& parent : it->second)
      if (out.size() < 64 && std::find(out.begin(), out.end(), parent) == out.end()) out.push_back(parent);
  }
  return out;
}

std::vector<int> Budgets::applying(const std::string& account, const std::string& user, const AccountTree* tree) const {
  std::vector<int> out;
  auto add = [&](const std::unordered_map<std::string, std::vector<int>>& index, const std::string& key) {
    if (auto it = index.find(key); it != index.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  };
  for (const auto& a : enclosing_accounts(tree, account)) {
    add(by_account, a);
    if (!user.empty()) add(by_pair, a + '\x1f' + user);
  }
  if (!user.empty()) add(by_user, user);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int Budgets::find(const std::string& name) const {
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) return static_cast<int>(i);
  return -1;
}

Result<std::shared_ptr<const Budgets>> load_budgets(const std::string& path, const Policy& policy) {
  try {
    auto file = ini::read(path);
    if (!file) return file.error();
    const ini::File& f = file.value();
    auto out = std::make_shared<Budgets>();
    const ini::Section* settings = nullptr;
    for (const auto& sec : f.sections) {
      if (sec.kind != "budgets") continue;
      if (!sec.name.empty())
        return Error{"[budgets] takes no name", f.path, sec.line, "[budgets " + sec.name + "]",
                     "write [budgets] for the ledger settings and [budget NAME] per budget"};
      settings = &sec;
    }
    // The budgets' time zone, before the budgets that follow it.
    if (const auto* tz = entry_of(f, "budgets", "timezone"); tz && !zone_name(trim(tz->value), &out->settings.timezone))
      return f.error_at(*tz, "'" + trim(tz->value) + "' is not a time zone name",
                        "an IANA time zone such as Europe/Berlin or America/New_York (UTC when left out)");
    for (const auto& sec : f.sections) {
      if (sec.kind == "budget") {
        if (out->find(sec.name) >= 0)
          return Error{"a second budget named " + sec.name, f.path, sec.line, "[budget " + sec.name + "]",
                       "give each budget its own name"};
        auto b = parse_budget(f, sec, policy, out->settings.timezone);
        if (!b) return b.error();
        b.value().identity_text = b->identity();   // judged per submission: built once
        out->list.push_back(std::move(b).value());
      }
    }
    std::string max_age, on_stale, timezone;
    if (settings) {
      auto ok = ini::bind(f, "budgets", settings->line,
                          {{"ledger", ini::Field::text, &out->settings.ledger, 0, 0, false,
                            "absolute path `scaleguard budget sync` writes, e.g. /var/lib/scaleguard/budget-ledger.json"},
                           {"ledger_max_age", ini::Field::text, &max_age, 0, 0, false, "a duration, e.g. 15m"},
                           {"on_stale_ledger", ini::Field::text, &on_stale, 0, 0, false, "closed or open"},
                           {"timezone", ini::Field::text, &timezone, 0, 0, false,
                            "the IANA time zone of every budget's periods, e.g. Europe/Berlin (default UTC)"}});
      if (!ok) return ok.error();
      const std::string& l = out->settings.ledger;
      if (!l.empty() && (l.front() != '/' || l.find("..") != std::string::npos || l.size() > 1024))
        return f.error_at(*entry_of(f, "budgets", "ledger"), "ledger must be an absolute path without '..'",
                          "e.g. /var/lib/scaleguard/budget-ledger.json");
      if (!max_age.empty()) {
        auto hours = parse_hours(max_age);
        if (!hours || *hours <= 0 || *hours > 24 * 366)
          return f.error_at(*entry_of(f, "budgets", "ledger_max_age"), "malformed ledger_max_age '" + max_age + "'",
                            "a duration like 15m or 1h: a little over the sync timer's interval");
        out->settings.max_age_s = static_cast<std::int64_t>(std::llround(*hours * 3600));
      }
      if (!on_stale.empty()) {
        const std::string v = lower(trim(on_stale));
        if (v == "open") out->settings.fail_open = true;
        else if (v != "closed")
          return f.error_at(*entry_of(f, "budgets", "on_stale_ledger"), "unknown on_stale_ledger '" + on_stale + "'",
                            "closed (refuse jobs under budgets) or open (accept them unchecked)");
      }
    }
    if (!out->list.empty() && out->settings.ledger.empty())
      return Error{"budgets without a ledger", f.path, settings ? settings->line : out->list.front().line, "[budgets] ledger",
                   "add [budgets] with ledger = /var/lib/scaleguard/budget-ledger.json"};
    for (std::size_t i = 0; i < out->list.size(); ++i) {
      const Budget& b = out->list[i];
      const int n = static_cast<int>(i);
      if (!b.account.empty() && !b.user.empty()) out->by_pair[b.account + '\x1f' + b.user].push_back(n);
      else if (!b.account.empty()) out->by_account[b.account].push_back(n);
      else out->by_user[b.user].push_back(n);
    }
    return std::shared_ptr<const Budgets>(std::move(out));
  } catch (const std::exception& ex) {
    return Error{std::string("internal error: ") + ex.what(), path, 0, "", ""};
  }
}

std::string describe(const Budgets& budgets, std::int64_t now) {
  if (budgets.list.empty() && budgets.settings.ledger.empty()) return "";
  std::string out = "budgets: ledger " + budgets.settings.ledger + ", stale after " +
                    fixed(budgets.settings.max_age_s / 60.0, 0) + " min; a missing or stale ledger " +
                    (budgets.settings.fail_open ? "accepts jobs unchecked (on_stale_ledger = open)\n"
                                                : "refuses jobs under budgets (on_stale_ledger = closed)\n");
  if (!budgets.settings.timezone.empty())
    out += "budgets: periods at the wall clock of " + budgets.settings.timezone + " unless a budget names its own timezone\n";
  for (const auto& b : budgets.list) {
    out += "budget " + b.name + ": " + b.scope() + ", " + format_amount(b.unit, b.limit);
    const Window w = window_at(b.period, now);
    const int off = b.period.utc_offset_s;
    if (b.period.cycle == Cycle::range) {
      out += " from " + format_instant(w.start, off) + " to " + format_instant(w.end, off) +
             (now < w.start ? " (not yet)" : now >= w.end ? " (expired)" : "");
    } else if (!b.period.zone.empty()) {
      out += std::string(" per ") + to_string(b.period.cycle) + " in " + b.period.zone +
             (w.known() ? " (now " + format_instant(w.start, offset_at(b.period, w.start)) + " .. " +
                              format_instant(w.end, offset_at(b.period, w.end)) + ")"
                        : " (its periods come from the tz database: `scaleguard policy check` and the sync)");
    } else {
      out += std::string(" per ") + to_string(b.period.cycle) + " (now " + format_instant(w.start, off) + " .. " +
             format_instant(w.end, off) + ")";
    }
    if (b.carry_over > 0) out += ", carry-over up to " + percent_text(100 * b.carry_over);
    if (b.grace > 0) out += ", grace " + percent_text(100 * b.grace);
    out += ":";
    for (std::size_t i = 0; i < b.thresholds.size(); ++i) {
      const auto& t = b.thresholds[i];
      out += (i ? ", " : " ") + percent_text(t.percent) + " " + to_string(t.act) + (t.partition.empty() ? "" : " " + t.partition);
    }
    if (!b.partitions.empty()) {
      out += "; partitions";
      for (std::size_t i = 0; i < b.partitions.size(); ++i) out += (i ? ", " : " ") + b.partitions[i];
    }
    out += b.shadow ? "; mode shadow (judged and logged, never refused)\n" : "\n";
  }
  return out;
}

double usd_per_gpu_hour(const Policy& policy, const std::string& partitions) {
  double price = -1;
  const std::string list = partitions.empty() && policy.default_partition() ? policy.default_partition()->name : partitions;
  for (const auto& name : split_list(list)) {
    const Partition* p = policy.find_partition(name);
    if (!p || p->inst.gpus <= 0) continue;
    const double per_instance = p->capacity == Capacity::spot ? p->inst.spot : p->inst.on_demand;
    price = std::max(price, per_instance / p->inst.gpus);
  }
  return price;
}

double amount(const Budget& b, const Policy& policy, double gpu_hours, const std::string& partitions) {
  const std::string list = partitions.empty() && policy.default_partition() ? policy.default_partition()->name : partitions;
  std::string counted;
  for (const auto& p : split_list(list))
    if (b.counts(p) && policy.find_partition(p)) counted += (counted.empty() ? "" : ",") + p;
  if (counted.empty()) return 0;
  if (b.unit == Unit::gpu_hours) return gpu_hours;
  const double price = usd_per_gpu_hour(policy, counted);
  return price > 0 ? gpu_hours * price : 0;
}

std::string format_number(double v) { return fixed(v, std::fabs(v) < 1 && v != 0 ? 4 : 2); }

std::string format_amount(Unit unit, double v) {
  if (unit == Unit::gpu_hours) return format_number(v) + " GPU-hours";
  std::string digits = fixed(std::fabs(v), 2);
  std::string whole = digits.substr(0, digits.size() - 3), grouped;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  return std::string(v < 0 ? "-$" : "$") + grouped + digits.substr(digits.size() - 3);
}

}  // namespace scaleguard::budget
