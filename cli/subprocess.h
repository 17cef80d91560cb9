// Running Slurm's client commands (sacct, squeue, sacctmgr) from the CLI: an argument vector
// (execvp, no shell), stdout captured up to a bound, stderr kept for the error message.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scaleguard/report.h"

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

// Runs the command and hands each line of its stdout (without the newline) to `each` as it
// arrives, in memory bounded by `max_line`: a longer line is handed over cut to max_line bytes
// with cut = true (the rest is dropped). Throws Failure like run_capture (cannot run, non-zero
// exit); exceptions from `each` stop the command and propagate.
void run_lines(const Command& command, std::size_t max_line,
               const std::function<void(const std::string& line, bool cut)>& each);

// The sacct query for every run of every job that ran between `since` and `until`
// (YYYY-MM-DDTHH:MM:SS in the clock sacct prints), in report.h's columns and delimiter, one
// record per run (-D). `steps`: with the job steps (their exit codes tell checkpointed stops).
// `format`: the columns (the report asks for kSacctReportFormat). docs/report.md explains each option.
std::vector<std::string> sacct_runs_arguments(const std::string& since, const std::string& until, bool steps,
                                              const char* format = report::kSacctFormat);

}  // namespace scaleguard::cli
