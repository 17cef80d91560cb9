// Exit codes of scaleguard-run; sbatch templates and the requeue logic test for them.
#pragma once

namespace scaleguard::run {

constexpr int kExitOk = 0;           // trained every step
constexpr int kExitError = 1;        // bad input or configuration; every rank exits with it
constexpr int kExitUsage = 64;       // unknown verb or option (EX_USAGE)
// SIGUSR1/SIGTERM: all ranks agreed to stop at a step boundary after the after-step hook
// ran (the hook that saves the checkpoint). The job should be requeued to resume.
constexpr int kExitStoppedAfterCheckpoint = 85;

}  // namespace scaleguard::run
