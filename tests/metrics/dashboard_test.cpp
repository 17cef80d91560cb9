// configs/grafana/scaleguard.json against what the code writes: every PromQL expression names
// only metric families metrics/ renders (histograms with their _bucket/_sum/_count), groups
// by labels those families have, and the dashboard shows each thing issue 40 asks for.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "metrics_sample.h"

namespace {

struct Emitted {
  std::set<std::string> names, labels;
};

// Names and label names of every sample line of an exposition text.
Emitted emitted(const std::string& text) {
  Emitted e;
  std::istringstream in(text);
  std::string line;
  const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)=")");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    e.names.insert(line.substr(0, line.find_first_of("{ ")));
    for (std::sregex_iterator it(line.begin(), line.end(), label), end; it != end; ++it) e.labels.insert((*it)[1]);
  }
  return e;
}

void collect(const nlohmann::json& j, std::vector<std::string>* exprs) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "expr" && it.value().is_string()) exprs->push_back(it.value());
      else collect(it.value(), exprs);
    }
  } else if (j.is_array()) {
    for (const auto& x : j) collect(x, exprs);
  }
}

std::vector<std::string> dashboard_exprs(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  auto j = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  std::vector<std::string> exprs;
  collect(j, &exprs);
  return exprs;
}

// What is wrong with the expressions ("" when nothing): a scaleguard_ name the code does not
// write, an expression naming none, a label in by/without (...) or {...} no family has.
std::string check(const std::vector<std::string>& exprs, const Emitted& e) {
  std::string problems;
  const std::regex name(R"(\bscaleguard_[a-zA-Z0-9_]+)"), grouping(R"(\b(?:by|without)\s*\(([^)]*)\))"),
      matcher(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=))"), word(R"([a-zA-Z_][a-zA-Z0-9_]*)");
  for (const auto& x : exprs) {
    int named = 0;
    for (std::sregex_iterator it(x.begin(), x.end(), name), end; it != end; ++it, ++named)
      if (!e.names.count(it->str())) problems += "unknown metric " + it->str() + " in: " + x + "\n";
    if (named == 0) problems += "no scaleguard metric in: " + x + "\n";
    std::vector<std::string> used;
    for (std::sregex_iterator it(x.begin(), x.end(), grouping), end; it != end; ++it) {
      std::string list = (*it)[1];
      for (std::sregex_iterator l(list.begin(), list.end(), word), le; l != le; ++l)
        used.push_back(l->str());
    }
    for (std::size_t open = x.find('{'); open != std::string::npos; open = x.find('{', open + 1)) {
      const std::string inside = x.substr(open + 1, x.find('}', open) - open - 1);
      for (std::sregex_iterator it(inside.begin(), inside.end(), matcher), end; it != end; ++it) used.push_back((*it)[1]);
    }
    for (const auto& l : used)
      if (!e.labels.count(l)) problems += "unknown label " + l + " in: " + x + "\n";
  }
  return problems;
}

const std::string kDashboard = std::string(SCALEGUARD_SOURCE_DIR) + "/configs/grafana/scaleguard.json";

}  // namespace

TEST(Dashboard, ExpressionsNameOnlyWhatTheCodeWrites) {
  const auto exprs = dashboard_exprs(kDashboard);
  ASSERT_GE(exprs.size(), 6u);
  EXPECT_EQ(check(exprs, emitted(sample_exposition())), "");
}

TEST(Dashboard, ShowsWhatAdminsWatch) {
  std::string all;
  for (const auto& x : dashboard_exprs(kDashboard)) all += x + "\n";
  for (const char* needed :
       {"scaleguard_decisions_total", "scaleguard_rule_hits_total", "scaleguard_avoided_gpu_seconds_total",
        "scaleguard_budget_used_gpu_seconds", "scaleguard_budget_left_gpu_seconds",
        "scaleguard_budget_ledger_snapshot_timestamp_seconds", "scaleguard_decision_duration_seconds_bucket",
        "histogram_quantile(0.5", "histogram_quantile(0.99"})
    EXPECT_NE(all.find(needed), std::string::npos) << "the dashboard has no panel with " << needed;
}

// The check must be able to fail: a misspelt metric, a made-up label, a bare expression.
TEST(Dashboard, CheckCatchesUnknownNamesAndLabels) {
  const Emitted e = emitted(sample_exposition());
  EXPECT_NE(check({"sum(rate(scaleguard_decision_total[5m]))"}, e), "");
  EXPECT_NE(check({"sum by (queue) (rate(scaleguard_decisions_total[5m]))"}, e), "");
  EXPECT_NE(check({"scaleguard_decisions_total{reason=\"x\"}"}, e), "");
  EXPECT_NE(check({"up"}, e), "");
  EXPECT_EQ(check({"sum by (partition, rule) (increase(scaleguard_rule_hits_total{outcome=\"reject\"}[1h]))"}, e), "");
}
