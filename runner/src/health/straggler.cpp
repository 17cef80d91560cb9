#include "health/straggler.h"

#include <algorithm>

namespace scaleguard::run {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<NodeVerdict> StragglerTracker::observe(const std::vector<double>& compute_s,
                                                   const std::vector<std::string>& node_of_rank) {
  std::map<std::string, std::pair<double, int>> per_node;  // node -> (sum, ranks)
  for (size_t r = 0; r < compute_s.size() && r < node_of_rank.size(); ++r) {
    auto& e = per_node[node_of_rank[r]];
    e.first += compute_s[r];
    e.second += 1;
  }
  std::vector<NodeVerdict> out;
  if (per_node.size() < 2) return out;
  std::map<std::string, double> mean;
  for (const auto& [node, e] : per_node) mean[node] = e.first / e.second;
  for (const auto& [node, t] : mean) {
    std::vector<double> others;
    for (const auto& [other, u] : mean)
      if (other != node) others.push_back(u);
    const double m = median(others);
    NodeVerdict v;
    v.node = node;
    v.ratio = m > 0 ? t / m : 1.0;
    int& streak = streak_[node];
    streak = v.ratio > 1.0 + s_.threshold ? streak + 1 : 0;
    v.streak = streak;
    if (streak >= s_.windows && std::find(named_.begin(), named_.end(), node) == named_.end()) {
      v.named = true;
      named_.push_back(node);
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace scaleguard::run
