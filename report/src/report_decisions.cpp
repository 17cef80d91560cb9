// Reading job_submit/scaleguard's decision log (JSON Lines) and summing its refusals,
// rewrites and warnings per rule, user and partition. Bounded and exception-free at the API:
// a hostile or damaged line is skipped with a reason, never trusted and never fatal.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_format.h"
#include "scaleguard/report.h"
#include "scaleguard/report_decisions.h"

namespace scaleguard::report {
namespace {

using nlohmann::json;

// Deeper nesting than this is not a decision (ours is 2 deep); refused before parsing.
constexpr int kMaxDepth = 16;
// Longest kept text per field; longer values are cut at a character boundary.
constexpr std::size_t kMaxName = 256, kMaxChanges = 1024, kMaxMessage = 4096;
constexpr std::size_t kMaxRules = 64, kMaxRuleId = 128;
// GPU-hours above this are corrupt data (a million GPUs for a hundred years is ~1e12).
constexpr double kMaxGpuHours = 1e12;
constexpr std::size_t kKeepSkipped = 5;

Error bad(const std::string& message) { return Error{message, "", 0, "", ""}; }

// Max bracket depth outside strings, or kMaxDepth + 1 as soon as it is exceeded.
int nesting_depth(const std::string& s) {
  int depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) return depth;
      max = std::max(max, depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max;
}

// Optional string field: absent or null -> true and out untouched; not a string -> false.
bool get_string(const json& obj, const char* key, std::string& out, std::size_t max) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = fmt::cut_utf8(it->get_ref<const std::string&>(), max);
  return true;
}

// Optional GPU-hours field: absent or null -> true, `given` false. A number that is negative,
// not finite or absurd -> false.
bool get_hours(const json& obj, const char* key, double& out, bool& given) {
  given = false;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number()) return false;
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || v > kMaxGpuHours) return false;
  out = v;
  given = true;
  return true;
}

std::string type_error(const char* key, const char* want) {
  return std::string("'") + key + "' is not " + want;
}

}  // namespace

Result<std::int64_t> parse_utc_time(const std::string& text) {
  const Error wrong = bad("'" + text + "' is not a UTC time like 2026-12-03T17:50:00Z");
  if (text.size() < 11 || text.size() > 40) return wrong;
  std::string rest = text;
  std::int64_t offset = 0;   // seconds east of UTC
  if (rest.back() == 'Z' || rest.back() == 'z') {
    rest.pop_back();
  } else if (rest.size() > 16 && (rest[rest.size() - 6] == '+' || rest[rest.size() - 6] == '-') &&
             rest[rest.size() - 3] == ':') {
    const std::string zone = rest.substr(rest.size() - 5);
    if (!std::isdigit(static_cast<unsigned char>(zone[0])) ||
        !std::isdigit(static_cast<unsigned char>(zone[1])) ||
        !std::isdigit(static_cast<unsigned char>(zone[3])) ||
        !std::isdigit(static_cast<unsigned char>(zone[4])))
      return wrong;
    const int hh = (zone[0] - '0') * 10 + (zone[1] - '0'), mm = (zone[3] - '0') * 10 + (zone[4] - '0');
    if (hh > 23 || mm > 59) return wrong;
    offset = (hh * 3600 + mm * 60) * (rest[rest.size() - 6] == '-' ? -1 : 1);
    rest.resize(rest.size() - 6);
  } else {
    return wrong;
  }
  // Fractional seconds: "...:SS.fff" (dropped: the log's resolution is a second).
  if (rest.size() > 20 && rest[19] == '.') {
    for (std::size_t i = 20; i < rest.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(rest[i]))) return wrong;
    rest.resize(19);
  }
  auto t = parse_time(rest);
  if (!t) return wrong;
  return *t - offset;
}

std::string format_utc_time(std::int64_t t) { return format_time(t) + "Z"; }

Result<AuditRecord> parse_decision_line(const std::string& line) {
  if (line.size() > kMaxDecisionLine)
    return bad("longer than " + std::to_string(kMaxDecisionLine / 1024) + " KiB");
  if (nesting_depth(line) > kMaxDepth)
    return bad("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  try {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad("not JSON");
    if (!j.is_object()) return bad("not a JSON object");
    AuditRecord r;

    const auto ts = j.find("ts");
    if (ts == j.end()) return bad("no 'ts'");
    if (!ts->is_string()) return bad(type_error("ts", "a string"));
    auto t = parse_utc_time(ts->get_ref<const std::string&>());
    if (!t) return bad("'ts': " + t.error().message);
    r.ts = *t;

    const auto action = j.find("action");
    if (action == j.end()) return bad("no 'action'");
    if (!action->is_string()) return bad(type_error("action", "a string"));
    r.action = action->get<std::string>();
    if (r.action != "accept" && r.action != "warn" && r.action != "rewrite" && r.action != "reject")
      return bad("'action' is '" + fmt::cut_utf8(r.action, 32) +
                 "', not accept, warn, rewrite or reject");

    std::string mode;
    if (!get_string(j, "mode", mode, 32)) return bad(type_error("mode", "a string"));
    if (!mode.empty() && mode != "enforce" && mode != "shadow")
      return bad("'mode' is '" + mode + "', not enforce or shadow");
    bool enforced = mode != "shadow";
    if (const auto e = j.find("enforced"); e != j.end() && !e->is_null()) {
      if (!e->is_boolean()) return bad(type_error("enforced", "true or false"));
      enforced = enforced && e->get<bool>();
    }
    r.shadow = !enforced;

    const std::pair<const char*, std::string*> strings[] = {
        {"id", &r.id}, {"event", &r.event}, {"user", &r.user}, {"partition", &r.partition}};
    for (const auto& [key, out] : strings)
      if (!get_string(j, key, *out, kMaxName)) return bad(type_error(key, "a string"));
    if (!get_string(j, "changes", r.changes, kMaxChanges)) return bad(type_error("changes", "a string"));
    if (!get_string(j, "message", r.message, kMaxMessage)) return bad(type_error("message", "a string"));
    if (const auto job = j.find("job"); job != j.end() && !job->is_null()) {
      if (job->is_string()) r.job = fmt::cut_utf8(job->get<std::string>(), kMaxName);
      else if (job->is_number_unsigned()) r.job = std::to_string(job->get<std::uint64_t>());
      else return bad(type_error("job", "a string"));
    }
    if (const auto uid = j.find("uid"); uid != j.end() && !uid->is_null()) {
      if (!uid->is_number_unsigned() || uid->get<std::uint64_t>() > 0xffffffffu)
        return bad(type_error("uid", "a user id (0 to 4294967295)"));
      r.uid = static_cast<std::int64_t>(uid->get<std::uint64_t>());
    }
    if (const auto rules = j.find("rules"); rules != j.end() && !rules->is_null()) {
      if (!rules->is_array()) return bad(type_error("rules", "an array of rule ids"));
      for (const auto& rule : *rules) {
        if (!rule.is_string() || rule.get_ref<const std::string&>().empty())
          return bad(type_error("rules", "an array of rule ids"));
        if (r.rules.size() < kMaxRules) r.rules.push_back(fmt::cut_utf8(rule.get<std::string>(), kMaxRuleId));
      }
    }

    double envelope_h = 0;
    bool envelope_given = false;
    if (const auto env = j.find("envelope"); env != j.end() && !env->is_null()) {
      if (!env->is_object()) return bad(type_error("envelope", "an object"));
      for (const char* key : {"nodes", "gpus_per_node", "gpus", "hours", "array_tasks"}) {
        double unused = 0;
        bool given = false;
        if (!get_hours(*env, key, unused, given))
          return bad(std::string("'envelope.") + key + "' is not a number from 0 to 1e12");
      }
      if (!get_hours(*env, "gpu_hours", envelope_h, envelope_given))
        return bad("'envelope.gpu_hours' is not a number from 0 to 1e12");
    }
    bool judged_given = false, granted_given = false, avoided_given = false;
    if (!get_hours(j, "judged_gpu_hours", r.judged_gpu_hours, judged_given))
      return bad("'judged_gpu_hours' is not a number from 0 to 1e12");
    if (!judged_given) r.judged_gpu_hours = envelope_given ? envelope_h : 0;
    if (!get_hours(j, "granted_gpu_hours", r.granted_gpu_hours, granted_given))
      return bad("'granted_gpu_hours' is not a number from 0 to 1e12");
    if (!get_hours(j, "avoided_gpu_hours", r.avoided_gpu_hours, avoided_given))
      return bad("'avoided_gpu_hours' is not a number from 0 to 1e12");
    if (!granted_given)
      r.granted_gpu_hours = r.action == "reject" ? 0
                            : avoided_given      ? std::max(0.0, r.judged_gpu_hours - r.avoided_gpu_hours)
                                                 : r.judged_gpu_hours;
    if (!avoided_given) r.avoided_gpu_hours = std::max(0.0, r.judged_gpu_hours - r.granted_gpu_hours);
    return r;
  } catch (const std::exception& e) {
    // Not expected (types are checked before every get), but a log line never stops the report.
    return bad(std::string("unreadable: ") + fmt::cut_utf8(e.what(), 200));
  }
}

namespace {

void count(DecisionCounts& c, const AuditRecord& r, double usd_per_gpu_hour) {
  ++c.decisions;
  if (r.action == "accept") ++c.accepted;
  else if (r.action == "warn") ++c.warned;
  else if (r.action == "rewrite") ++c.rewritten;
  else ++c.refused;
  c.judged_gpu_hours += r.judged_gpu_hours;
  c.avoided_gpu_hours += r.avoided_gpu_hours;
  c.avoided_usd += r.avoided_gpu_hours * usd_per_gpu_hour;
}

std::string user_key(const AuditRecord& r) {
  if (!r.user.empty()) return r.user;
  if (r.uid >= 0) return "uid " + std::to_string(r.uid);
  return "(unknown)";
}

class Summarizer {
 public:
  explicit Summarizer(const DecisionOptions& o) : options_(o) {}

  void line(int number, const std::string& text, bool unterminated) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) return;
    ++report_.lines;
    auto rec = parse_decision_line(text);
    if (!rec) {
      skip(number, rec.error().message +
                       (unterminated ? " (the last line has no newline: still being written?)" : ""));
      return;
    }
    add(rec.value(), number);
  }

  void too_long(int number) {
    ++report_.lines;
    skip(number, "longer than " + std::to_string(kMaxDecisionLine / 1024) + " KiB");
  }

  void skip(int number, const std::string& reason) {
    ++report_.skipped;
    if (report_.first_skipped.size() < kKeepSkipped) report_.first_skipped.push_back({number, reason});
  }

  DecisionReport finish() {
    report_.priced = !options_.usd_per_gpu_hour.empty();
    report_.unpriced.assign(unpriced_.begin(), unpriced_.end());
    report_.since = options_.since >= 0 ? options_.since : first_;
    report_.until = options_.until >= 0 ? options_.until : (last_ >= 0 ? last_ + 1 : -1);
    return std::move(report_);
  }

 private:
  void add(AuditRecord& r, int number) {
    r.line = number;
    if ((options_.since >= 0 && r.ts < options_.since) || (options_.until >= 0 && r.ts >= options_.until)) {
      ++report_.outside_window;
      return;
    }
    first_ = first_ < 0 ? r.ts : std::min(first_, r.ts);
    last_ = std::max(last_, r.ts);
    DecisionGroups& g = r.shadow ? report_.shadow : report_.enforced;
    // A job that listed partitions runs in whichever starts it: the cheapest is claimed.
    double usd = -1;
    if (!options_.usd_per_gpu_hour.empty()) {
      std::istringstream names(r.partition);
      for (std::string name; std::getline(names, name, ',');)
        if (const auto price = options_.usd_per_gpu_hour.find(name); price != options_.usd_per_gpu_hour.end())
          usd = usd < 0 ? price->second : std::min(usd, price->second);
      if (usd < 0 && r.avoided_gpu_hours > 0) unpriced_.insert(r.partition.empty() ? "(none)" : r.partition);
    }
    usd = std::max(usd, 0.0);
    count(g.total, r, usd);
    if (r.action == "accept") return;
    if (r.rules.empty()) count(g.by_rule["(none)"], r, usd);
    for (const auto& rule : r.rules) count(g.by_rule[rule], r, usd);
    count(g.by_user[user_key(r)], r, usd);
    count(g.by_partition[r.partition.empty() ? "(none)" : r.partition], r, usd);

    if (r.avoided_gpu_hours <= 0 || options_.largest == 0) return;
    auto& top = report_.largest;
    if (top.size() == options_.largest && r.avoided_gpu_hours <= top.back().avoided_gpu_hours) return;
    // Largest first; among equals, the earlier line first.
    const auto at = std::upper_bound(top.begin(), top.end(), r.avoided_gpu_hours,
                                     [](double v, const AuditRecord& x) { return v > x.avoided_gpu_hours; });
    top.insert(at, std::move(r));
    if (top.size() > options_.largest) top.pop_back();
  }

  DecisionOptions options_;
  DecisionReport report_;
  std::set<std::string> unpriced_;
  std::int64_t first_ = -1, last_ = -1;
};

}  // namespace

DecisionReport summarize_decisions(std::istream& in, const DecisionOptions& options) {
  Summarizer s(options);
  std::string line;
  bool oversize = false;
  int number = 1;
  char buf[65536];
  for (;;) {
    in.read(buf, sizeof buf);
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    const char* p = buf;
    const char* end = buf + n;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = nl ? nl : end;
      if (!oversize) {
        line.append(p, static_cast<std::size_t>(stop - p));
        if (line.size() > kMaxDecisionLine) {
          oversize = true;
          line.clear();
          line.shrink_to_fit();
        }
      }
      if (!nl) break;
      if (oversize) s.too_long(number);
      else s.line(number, line, false);
      line.clear();
      oversize = false;
      ++number;
      p = nl + 1;
    }
  }
  if (oversize) s.too_long(number);
  else if (!line.empty()) s.line(number, line, true);
  return s.finish();
}

DecisionReport summarize_decisions(const std::string& text, const DecisionOptions& options) {
  std::istringstream in(text);
  return summarize_decisions(in, options);
}

}  // namespace scaleguard::report
