// A user's own model as TorchScript (--model-file model.pt, saved from torch.jit.script).
//
// The module's forward takes the batch's x and returns the output; the loss is
// cross-entropy (fp32) when y is integer (class labels: output (B, C) or (B, C, ...) with
// y (B) or (B, ...)) and mean squared error when y is float (output shaped like y).
// Its parameters keep their named_parameters() names ("conv1.weight", ...): the flat
// buckets, data parallel, ZeRO-1, top-k and checkpoints key on them like on the built-in
// models. Refused with the reason: traced modules (torch.jit.trace records one path through
// Python, not the module's code), frozen modules (torch.jit.freeze folds the parameters into
// constants: nothing left to train), modules without parameters, and modules with buffers
// (BatchNorm running statistics: not synchronised over data parallel nor checkpointed yet).
// Loading turns the JIT graph optimizer (profiling executor, fusers) off for the process so
// forward and backward run the same kernels at every step: resumed runs stay bit-exact.
#pragma once
#include <memory>
#include <string>

#include "models/model.h"

namespace scaleguard::run {

std::shared_ptr<LanguageModel> load_script_model(const std::string& path);

}  // namespace scaleguard::run
