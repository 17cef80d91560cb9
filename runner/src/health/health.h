// The hang watchdog and the straggler check of one rank (issue 38 item 4).
//
// Hangs. The training thread says which section it is in (enter()) and how long finished
// intervals took (record()); a watchdog thread wakes every second, writes this rank's
// heartbeat (DIR/rank-<R>: node, pid, step, section, wall clock) and compares the time spent
// in the current section with its limit (limits.h: learned from the run's own times). Past
// it the rank is hung, or waits for a peer that is: the watchdog reads every rank's
// heartbeat, names the ranks whose heartbeat stopped (a SIGSTOP'd or frozen process stops its
// watchdog thread too) or that lag behind, writes DIR/hang for the launcher (the first rank
// to get there; the suspect's node on its first line), logs the stacks of suspects on its own
// node (gdb -batch when installed, else /proc/PID/stack and wchan), and exits the process with
// kExitHang (87): scripts/sbatch/train.sbatch restarts the job in its allocation.
// The watchdog never calls MPI: it works while the training thread is stuck inside it.
//
// Stragglers. add_compute() collects this rank's compute seconds per step (the step less
// what it waited for in communication); every `every` steps one small allgather (on the
// training thread, collective over the world) compares the nodes (straggler.h). A node named
// is appended to DIR/stragglers, which the launcher excludes at the next restart when the job
// has spare nodes.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "health/limits.h"
#include "health/straggler.h"
#include "launch/launch.h"

namespace scaleguard::run {

struct HealthSettings {
  bool watchdog = true;      // --hang-detect
  std::string dir;           // heartbeats and reports (--health-dir, else CKPT_DIR/health); empty: none
  LimitSettings limits;
  StragglerSettings straggler;
  double tick_s = 1;         // heartbeat and check period
};

class Health {
 public:
  // Collective over l.world_comm (every rank's node name). Starts the watchdog in the
  // start-up section.
  Health(const HealthSettings& s, const Launch& l);
  ~Health();
  Health(const Health&) = delete;
  Health& operator=(const Health&) = delete;

  // The training thread enters a section (its clock starts now).
  void enter(Section s, int64_t step);
  // A finished interval of a section, to learn its limit from.
  void record(Section s, double seconds);
  // This step's compute seconds. Every straggler.every steps: collective over the world;
  // returns each node's verdict for the window (empty otherwise).
  std::vector<NodeVerdict> add_compute(int64_t step, double compute_s);

  const std::string& node() const { return node_; }      // SLURMD_NODENAME, else the host name
  const std::string& dir() const { return s_.dir; }
  const StragglerSettings& straggler() const { return s_.straggler; }
  std::string limit_text(Section s) const;               // "12 s (max(floor ..., ...))"

 private:
  void watch();
  void write_heartbeat();
  [[noreturn]] void hung(Section s, int64_t step, double waited, double limit);

  HealthSettings s_;
  const Launch& l_;
  std::string node_;   // Slurm's node name (several slurmd may share a host: the dev cluster)
  std::string host_;   // where /proc and gdb reach: stacks are taken of suspects on this host
  std::vector<std::string> node_of_rank_;
  int hb_fd_ = -1;
  mutable std::mutex mu_;  // limits_
  SectionLimits limits_;
  StragglerTracker straggler_;
  double window_s_ = 0;    // compute seconds summed in the current window
  std::atomic<int> section_{static_cast<int>(Section::kStartup)};
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> since_ns_{0};   // steady clock at enter()
  std::atomic<double> since_wall_{0};  // wall clock at enter(), for the heartbeat
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace scaleguard::run
