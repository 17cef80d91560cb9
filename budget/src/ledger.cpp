// The ledger file: one JSON object written by `scaleguard budget sync`, read by
// job_submit/scaleguard's ledger thread and by `scaleguard budget show` / `report --budgets`.
#include <cmath>
#include <nlohmann/json.hpp>

#include "scaleguard/budget_ledger.h"

namespace scaleguard::budget {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxLedgerBytes = 64u << 20;
constexpr std::size_t kMaxName = 256;
// A day budget's boundaries over the longest ledger_max_age (366 days) and a little more.
constexpr std::size_t kMaxBoundaries = 1024;

bool finite_amount(const json& v, double* out) {
  if (!v.is_number()) return false;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < -1e15 || d > 1e15) return false;
  *out = d;
  return true;
}

bool whole(const json& v, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
  if (!v.is_number_integer()) return false;
  const std::int64_t n = v.get<std::int64_t>();
  if (n < lo || n > hi) return false;
  *out = n;
  return true;
}

bool name(const json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  if (out->empty() || out->size() > kMaxName) return false;
  for (unsigned char c : *out)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::string format_ledger(const Ledger& l) {
  const std::int64_t ms = l.snapshot_ms / 1000 == l.snapshot ? l.snapshot_ms : l.snapshot * 1000;
  json j = {{"format", 1}, {"snapshot", l.snapshot}, {"snapshot_ms", ms}, {"written", l.written}};
  json entries = json::object();
  for (const auto& [n, e] : l.entries)
    entries[n] = {{"identity", e.identity},   {"start", e.window.start},     {"end", e.window.end},
                  {"used", e.used},           {"committed", e.committed},    {"liens", e.liens},
                  {"carry_in", e.carry_in},   {"running", e.running},        {"pending", e.pending},
                  {"burn_per_hour", e.burn_per_hour}};
  for (const auto& [n, e] : l.entries) {
    if (!e.unusable.empty()) entries[n]["unusable"] = e.unusable;
    if (e.boundaries.empty()) continue;
    json b = json::array();
    for (const auto& x : e.boundaries) b.push_back({x.t, x.offset_s});
    entries[n]["boundaries"] = b;
  }
  j["budgets"] = entries;
  j["default_account"] = l.default_account;
  j["accounts"] = l.accounts;
  j["account_tree"] = l.account_parents;
  j["notes"] = l.notes;
  j["jobs"] = l.job_gpu_hours;
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<Ledger> parse_ledger(const std::string& text) {
  const auto bad = [](const std::string& what) { return Error{"malformed ledger: " + what, "", 0, "", ""}; };
  if (text.size() > kMaxLedgerBytes) return bad("larger than 64 MiB");
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("format") || j["format"] != 1) return bad("format is not 1");
  Ledger l;
  constexpr std::int64_t kFar = 1LL << 40;
  if (!j.contains("snapshot") || !whole(j["snapshot"], 0, kFar, &l.snapshot)) return bad("no snapshot time");
  if (j.contains("written") && !whole(j["written"], 0, kFar, &l.written)) return bad("bad written time");
  l.snapshot_ms = l.snapshot * 1000;
  if (j.contains("snapshot_ms") && (!whole(j["snapshot_ms"], 0, kFar * 1000, &l.snapshot_ms) ||
                                    l.snapshot_ms / 1000 != l.snapshot))
    return bad("snapshot_ms is not the snapshot");
  if (!j.contains("budgets") || !j["budgets"].is_object()) return bad("no budgets");
  for (const auto& [n, e] : j["budgets"].items()) {
    if (n.empty() || n.size() > kMaxName || !e.is_object()) return bad("budget '" + n.substr(0, 64) + "'");
    LedgerEntry le;
    std::int64_t running = 0, pending = 0;
    const bool ok = e.contains("identity") && e["identity"].is_string() && e.contains("start") &&
                    whole(e["start"], -kFar, kFar, &le.window.start) && e.contains("end") &&
                    whole(e["end"], -kFar, kFar, &le.window.end) && e.contains("used") &&
                    finite_amount(e["used"], &le.used) && e.contains("committed") &&
                    finite_amount(e["committed"], &le.committed) && e.contains("liens") &&
                    finite_amount(e["liens"], &le.liens) && e.contains("carry_in") &&
                    finite_amount(e["carry_in"], &le.carry_in) && e.contains("running") &&
                    whole(e["running"], 0, 1LL << 31, &running) && e.contains("pending") &&
                    whole(e["pending"], 0, 1LL << 31, &pending) &&
                    (!e.contains("burn_per_hour") || finite_amount(e["burn_per_hour"], &le.burn_per_hour));
    if (!ok || le.window.end <= le.window.start) return bad("budget '" + n.substr(0, 64) + "'");
    if (e.contains("unusable")) {
      if (!e["unusable"].is_string() || e["unusable"].get<std::string>().empty()) return bad("budget '" + n.substr(0, 64) + "' unusable");
      le.unusable = e["unusable"].get<std::string>().substr(0, 1024);
    }
    if (e.contains("boundaries")) {
      // Ascending instants with offsets a zone can have (at most 26 h), bounded in number.
      const json& b = e["boundaries"];
      if (!b.is_array() || b.size() > kMaxBoundaries) return bad("budget '" + n.substr(0, 64) + "' boundaries");
      for (const auto& x : b) {
        Boundary y;
        std::int64_t off = 0;
        if (!x.is_array() || x.size() != 2 || !whole(x[0], -kFar, kFar, &y.t) || !whole(x[1], -93600, 93600, &off) ||
            (!le.boundaries.empty() && y.t <= le.boundaries.back().t))
          return bad("budget '" + n.substr(0, 64) + "' boundaries");
        y.offset_s = static_cast<int>(off);
        le.boundaries.push_back(y);
      }
    }
    le.identity = e["identity"].get<std::string>();
    le.running = static_cast<int>(running);
    le.pending = static_cast<int>(pending);
    l.entries[n] = std::move(le);
  }
  if (j.contains("default_account")) {
    if (!j["default_account"].is_object()) return bad("default_account");
    for (const auto& [u, a] : j["default_account"].items()) {
      std::string acct;
      if (u.empty() || u.size() > kMaxName || !name(a, &acct)) return bad("default_account of '" + u.substr(0, 64) + "'");
      l.default_account[u] = acct;
    }
  }
  if (j.contains("accounts")) {
    if (!j["accounts"].is_object()) return bad("accounts");
    for (const auto& [u, list] : j["accounts"].items()) {
      if (u.empty() || u.size() > kMaxName || !list.is_array()) return bad("accounts of '" + u.substr(0, 64) + "'");
      auto& out = l.accounts[u];
      for (const auto& a : list) {
        std::string acct;
        if (!name(a, &acct)) return bad("accounts of '" + u.substr(0, 64) + "'");
        out.push_back(acct);
      }
    }
  }
  if (j.contains("account_tree")) {
    if (!j["account_tree"].is_object() || j["account_tree"].size() > 1000000) return bad("account_tree");
    for (const auto& [a, list] : j["account_tree"].items()) {
      if (a.empty() || a.size() > kMaxName || !list.is_array() || list.size() > 64)
        return bad("account_tree of '" + a.substr(0, 64) + "'");
      auto& out = l.account_parents[a];
      for (const auto& p : list) {
        std::string parent;
        if (!name(p, &parent)) return bad("account_tree of '" + a.substr(0, 64) + "'");
        out.push_back(parent);
      }
    }
  }
  if (j.contains("jobs")) {
    if (!j["jobs"].is_object()) return bad("jobs");
    for (const auto& [id, v] : j["jobs"].items()) {
      double h = 0;
      if (id.empty() || id.size() > kMaxName || !finite_amount(v, &h)) return bad("job '" + id.substr(0, 64) + "'");
      l.job_gpu_hours[id] = h;
    }
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"])
      if (n.is_string() && l.notes.size() < 100) l.notes.push_back(n.get<std::string>().substr(0, 1024));
  return l;
}

}  // namespace scaleguard::budget
