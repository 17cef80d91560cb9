// Exit codes of scaleguard-run; sbatch templates and the requeue logic test for them.
// man/scaleguard-run.1 lists every one (tests/docs/man_test.py exit-codes checks it).
#pragma once

namespace scaleguard::run {

constexpr int kExitOk = 0;           // trained every step
constexpr int kExitError = 1;        // bad input or configuration; every rank exits with it
// A start-up collective (rank discovery, the configuration check) did not complete within
// --startup-timeout: another rank failed or never started; MPI_Abort ends every rank.
constexpr int kExitStartupTimeout = 2;
constexpr int kExitUsage = 64;       // unknown verb or option (EX_USAGE)
// SIGUSR1/SIGTERM: all ranks agreed to stop at a step boundary after the after-step hook
// ran (the hook that saves the checkpoint). The job should be requeued to resume.
constexpr int kExitStoppedAfterCheckpoint = 85;
// The NCCL watchdog (comm_nccl.cpp) saw an asynchronous NCCL error or a collective past
// SCALEGUARD_NCCL_TIMEOUT_S, or NCCL start-up did not finish within --startup-timeout:
// the rank aborted its communicators and exited. Every rank of the job ends this way (the
// peers of a dead or hung rank time out too). Nothing was saved at this point; the job
// should be requeued to resume from its last checkpoint (scripts/sbatch/train.sbatch does,
// a bounded number of times).
constexpr int kExitCommFailure = 86;
// The hang watchdog (health/health.h): a section (start-up, step, checkpoint, evaluation) ran
// past its limit on this rank, usually because another rank stopped progressing; the rank
// logged which one (and its stacks where local), wrote CKPT_DIR/health/hang and exited.
// Nothing was saved; the launcher restarts the job in its allocation (train.sbatch).
constexpr int kExitHang = 87;

}  // namespace scaleguard::run
