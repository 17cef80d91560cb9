#include "ckpt/interval.h"

namespace scaleguard::ckpt {

Result<OnSaveError> parse_on_save_error(const std::string& text) {
  if (text == "continue") return OnSaveError::keep_training;
  if (text == "stop") return OnSaveError::stop;
  return Error{"on_save_error '" + text + "' is not continue|stop", "", 0, "on_save_error",
               "continue keeps training without that checkpoint, stop exits with the error"};
}

bool agree_due(CommitComm& comm, bool due_here) { return comm.all_min(due_here ? 0 : 1) == 0; }

}  // namespace scaleguard::ckpt
