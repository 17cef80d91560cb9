// Straggler detection (issue 38 item 4), the pure part: every window of N steps the ranks'
// compute seconds (step time less the time spent waiting in communication) are compared per
// node; a node slower than the median of the other nodes by more than `threshold` in
// `windows` consecutive windows is named. No MPI here: health.cpp gathers the numbers,
// tests/runner/health_test.cpp feeds this class directly.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace scaleguard::run {

struct StragglerSettings {
  long every = 50;          // steps per window (0 = off)
  double threshold = 0.2;   // slower than the others' median by more than this fraction
  int windows = 3;          // in this many consecutive windows
};

struct NodeVerdict {
  std::string node;
  double ratio = 0;      // node's compute seconds / median of the other nodes' (this window)
  int streak = 0;        // consecutive windows over the threshold, this one included
  bool named = false;    // reached `windows` in this window (named once)
};

class StragglerTracker {
 public:
  explicit StragglerTracker(const StragglerSettings& s) : s_(s) {}
  // One window: each rank's compute seconds and its node's name (same order). A node's time
  // is the mean of its ranks'. Returns every node's verdict, in node-name order; fewer than
  // two nodes: nothing to compare, nothing returned.
  std::vector<NodeVerdict> observe(const std::vector<double>& compute_s, const std::vector<std::string>& node_of_rank);
  // Nodes named so far, in naming order.
  const std::vector<std::string>& named() const { return named_; }
  const StragglerSettings& settings() const { return s_; }

 private:
  StragglerSettings s_;
  std::map<std::string, int> streak_;
  std::vector<std::string> named_;
};

}  // namespace scaleguard::run
