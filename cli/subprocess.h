// Running Slurm's client commands (sacct, squeue, sacctmgr) from the CLI: an argument vector
// (execvp, no shell), stdout captured up to a bound, stderr kept for the error message.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace scaleguard::cli {

// A runtime failure a verb reports on stderr with exit status 1.
struct Failure {
  std::string message;
};

struct Command {
  explicit Command(std::vector<std::string> a) : args(std::move(a)) {}
  std::vector<std::string> args;         // args[0] is looked up in PATH
  std::vector<std::string> env;          // NAME=value set in the child only (e.g. TZ=UTC)
  std::size_t max_bytes = 64u << 20;     // more output is a Failure
  std::string missing_hint;              // added to "X not found in PATH: install slurm-client on this host"
  std::string too_big_hint;              // added to "X printed more than N MiB"
};

// The command's stdout; throws Failure when it cannot run, prints too much or exits non-zero.
std::string run_capture(const Command& command);

// The sacct query for every run of every job that ran between `since` and `until`
// (YYYY-MM-DDTHH:MM:SS in the clock sacct prints), in report.h's columns and delimiter, one
// record per run (-D). `steps`: with the job steps (their exit codes tell checkpointed stops).
// docs/report.md explains each option.
std::vector<std::string> sacct_runs_arguments(const std::string& since, const std::string& until, bool steps);

}  // namespace scaleguard::cli
