#include "models/script_model.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <ATen/ATen.h>

namespace scaleguard::run {
namespace {

class ScriptModel : public LanguageModel {
 public:
  explicit ScriptModel(torch::jit::Module m) : m_(std::move(m)) {
    m_.train(true);
    // Mirror the module's parameter tensors (the same tensors, not copies) into this
    // nn::Module under their hierarchical names: the flat layout moves them into its buckets
    // with set_data, which the script module then sees.
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) {
      torch::nn::Module* node = this;
      std::string name = p.name;
      size_t dot;
      while ((dot = name.find('.')) != std::string::npos) {
        const std::string part = name.substr(0, dot);
        name = name.substr(dot + 1);
        auto children = node->named_children();
        if (auto* c = children.find(part)) {
          node = c->get();
        } else {
          node = node->register_module(part, std::make_shared<torch::nn::Module>()).get();
        }
      }
      node->register_parameter(name, p.value, p.value.requires_grad());
    }
  }
  at::Tensor forward(const at::Tensor& input) override {
    c10::IValue out = m_.forward({input});
    if (!out.isTensor())
      throw RunError("--model-file: forward must return one tensor (the logits or output), not " +
                     out.tagKind());
    return out.toTensor();
  }
  at::Tensor cross_entropy(const at::Tensor& out, const at::Tensor& targets) override {
    at::Tensor o = out.to(at::kFloat);
    if (at::isFloatingType(targets.scalar_type())) {
      if (o.sizes() != targets.sizes())
        throw RunError("--model-file: float targets y " + shape(targets) + " take the mean squared error, but the "
                       "model's output is " + shape(o) + " (it must have y's shape)");
      return at::mse_loss(o, targets);
    }
    if (o.dim() != targets.dim() + 1 || o.size(0) != targets.size(0))
      throw RunError("--model-file: integer targets y " + shape(targets) + " take cross-entropy over classes, but the "
                     "model's output is " + shape(o) + " (it must be (B, classes, ...) for y (B, ...))");
    return at::cross_entropy_loss(o, targets);
  }
  bool predicts_every_position() const override { return false; }
  void set_evaluating(bool on) override { m_.train(!on); }

 private:
  static std::string shape(const at::Tensor& t) {
    std::string s = "(";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + ")";
  }
  torch::jit::Module m_;
};

// torch.jit.trace records the Python call stack of each traced op as its source: the
// tracer's frames (torch/jit/_trace.py, trace_module) appear in the forward graph's source
// ranges ("...torch/jit/_trace.py(976): trace_module"). Scripted code carries the module's
// own source text instead. Needs the archive's debug info (torch.jit.save keeps it).
bool traced(const torch::jit::Module& m) {
  auto graph = m.get_method("forward").graph();
  for (const torch::jit::Node* n : graph->nodes()) {
    // str() shows the original range (from the archive's debug_pkl) that generated the
    // serialized code's range, as Python's Node.sourceRange() does.
    const std::string text = n->sourceRange().str();
    if (text.find("torch/jit/_trace.py") != std::string::npos || text.find("): trace_module") != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<LanguageModel> load_script_model(const std::string& path) {
  // No profiling executor, no fusers, no graph optimisation: the same ops at every step.
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::getProfilingMode() = false;
  torch::jit::getExecutorMode() = false;
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, at::kCPU);
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw RunError("--model-file " + path + ": cannot load as TorchScript (save it with torch.jit.script(model).save(...)): " +
                   what.substr(0, what.find('\n')));
  }
  if (!m.find_method("forward"))
    throw RunError("--model-file " + path + ": the module has no forward method");
  if (traced(m))
    throw RunError("--model-file " + path + ": a traced module (torch.jit.trace) is refused: tracing records one path "
                   "through the Python code for one example input (data-dependent control flow, shapes and the "
                   "training/eval switch are baked in); save torch.jit.script(model) instead");
  size_t n_params = 0, n_trainable = 0;
  for (const auto& p : m.named_parameters(true)) {
    ++n_params;
    if (p.value.requires_grad()) ++n_trainable;
  }
  if (n_params == 0)
    throw RunError("--model-file " + path + ": the module has no parameters: a frozen module (torch.jit.freeze folds "
                   "the weights into constants) or one without weights cannot be trained; save "
                   "torch.jit.script(model) before freezing");
  if (n_trainable != n_params)
    throw RunError("--model-file " + path + ": " + std::to_string(n_params - n_trainable) +
                   " parameters have requires_grad=False; scaleguard-run trains every parameter");
  std::string buffers;
  for (const auto& b : m.named_buffers(true)) buffers += (buffers.empty() ? "" : ", ") + b.name;
  if (!buffers.empty())
    throw RunError("--model-file " + path + ": the module has buffers (" + buffers + "), e.g. BatchNorm running "
                   "statistics: they are neither synchronised over data-parallel ranks nor checkpointed by this "
                   "scaleguard-run yet; use a module without buffers (GroupNorm/LayerNorm instead of BatchNorm)");
  for (const auto& p : m.named_parameters(true))
    if (p.value.scalar_type() != at::kFloat)
      throw RunError("--model-file " + path + ": parameter " + p.name + " is " +
                     std::string(c10::toString(p.value.scalar_type())) + "; float32 parameters only");
  return std::make_shared<ScriptModel>(std::move(m));
}

}  // namespace scaleguard::run
