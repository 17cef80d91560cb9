// docs/policy.md and the planner's rule table cannot drift (issue 41): the doc's [rules] table
// lists every rule the policy knows (RuleId, in its order), and its "Order of judgement" lists
// are the two ordered tables decide() runs (rule_order(), planner/src/rules/table.cpp), names
// and order.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.h"

namespace scaleguard {
namespace {

std::vector<std::string> doc_lines() {
  std::ifstream f(test::source("docs/policy.md"));
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  return lines;
}

// The first cell (`id`) of each row of the table whose header starts with `header`.
std::vector<std::string> table_ids(const std::vector<std::string>& lines, const std::string& header) {
  std::vector<std::string> ids;
  size_t i = 0;
  while (i < lines.size() && lines[i].rfind(header, 0) != 0) ++i;
  const std::regex row(R"(^\| `([a-z_0-9]+)` \|)");
  for (i += 2; i < lines.size() && !lines[i].empty() && lines[i][0] == '|'; ++i) {
    std::smatch m;
    ids.push_back(std::regex_search(lines[i], m, row) ? m[1].str() : "<unreadable row: " + lines[i] + ">");
  }
  return ids;
}

// The numbered list ("1. `name`...") after the line that starts with `intro`, in the
// "Order of judgement" paragraph; the numbers must count 1, 2, 3 ...
std::vector<std::string> order_list(const std::vector<std::string>& lines, const std::string& intro) {
  size_t i = 0;
  while (i < lines.size() && lines[i].rfind("**Order of judgement.**", 0) != 0) ++i;
  while (i < lines.size() && lines[i].rfind(intro, 0) != 0) ++i;
  std::vector<std::string> names;
  const std::regex item(R"(^([0-9]+)\. `([a-z_0-9]+)`)");
  for (++i; i < lines.size(); ++i) {
    std::smatch m;
    if (lines[i].empty() && names.empty()) continue;
    if (!std::regex_search(lines[i], m, item)) break;
    EXPECT_EQ(std::stoi(m[1].str()), static_cast<int>(names.size()) + 1) << lines[i];
    names.push_back(m[2].str());
  }
  return names;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

TEST(RuleTable, DocRulesTableListsEveryRuleInOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < kRuleCount; ++i) ids.push_back(to_string(static_cast<RuleId>(i)));
  const auto doc = table_ids(doc_lines(), "| rule id | default | fires when | rewrite does |");
  EXPECT_EQ(joined(doc), joined(ids)) << "docs/policy.md's [rules] table and RuleId (policy.h) differ";
}

TEST(RuleTable, DocOrderOfJudgementIsTheRuleTable) {
  const auto lines = doc_lines();
  const auto on_request = order_list(lines, "On the request");
  const auto on_plan = order_list(lines, "On the plan");
  EXPECT_EQ(joined(on_request), joined(rule_order(Basis::request)))
      << "docs/policy.md \"Order of judgement\", on the request, and planner/src/rules/table.cpp differ";
  EXPECT_EQ(joined(on_plan), joined(rule_order(Basis::plan)))
      << "docs/policy.md \"Order of judgement\", on the plan, and planner/src/rules/table.cpp differ";
}

// Every name in the tables is a rule the policy knows, or one of the two steps that judge rules
// together; every rule is judged on the plan.
TEST(RuleTable, EveryStepIsARuleOrAJointStep) {
  std::set<std::string> rules;
  for (int i = 0; i < kRuleCount; ++i) rules.insert(to_string(static_cast<RuleId>(i)));
  std::set<std::string> planned;
  for (const Basis basis : {Basis::request, Basis::plan})
    for (const auto& name : rule_order(basis)) {
      EXPECT_TRUE(rules.count(name) || name == "measured" || name == "caps") << name;
      if (basis == Basis::plan) planned.insert(name);
    }
  for (const auto& r : rules) EXPECT_TRUE(planned.count(r)) << r << " is never judged on a plan";
}

}  // namespace scaleguard
