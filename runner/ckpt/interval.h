// When to save (every N steps, every M minutes, or `auto` = Daly's optimum from the measured
// cost of a save and the MTBF: scaleguard/ckpt_cadence.h, pure) and what to do when a save
// fails; agree_due makes a time-based decision collective.
#pragma once
#include <string>

#include "ckpt/commit_comm.h"
#include "scaleguard/ckpt_cadence.h"
#include "scaleguard/result.h"

namespace scaleguard::ckpt {

enum class OnSaveError { keep_training, stop };
// "continue" | "stop"
Result<OnSaveError> parse_on_save_error(const std::string& text);

// Collective: true on every rank when any rank says due.
bool agree_due(CommitComm& comm, bool due_here);

}  // namespace scaleguard::ckpt
