// Weights in and out as safetensors (runner/ckpt's scaleguard/safetensors.h holds the format):
//   scaleguard-run export --ckpt DIR --output OUT/ [--dtype fp32|bf16] [--max-shard-gb G]
//       any HDF5 checkpoint (any tp x pp x dp layout: each parameter assembled from its boxes
//       by ckpt::Reader::read_whole) -> OUT/model.safetensors (or shards + index.json); a
//       llama model also gets OUT/config.json in Hugging Face's LlamaForCausalLM keys. GPT and
//       MLP checkpoints are exported under the runner's own names (not an HF architecture).
//   scaleguard-run train ... --init-from FILE|DIR
//       every parameter of the model from safetensors, each rank reading only what it holds.
//   scaleguard-run logits --config ... --init-from FILE|DIR --tokens T0,T1,... --output F
//       one process: the full model's logits for one sequence, float32 (T, V) row-major.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "launch/launch.h"
#include "models/tensor_parallel.h"

namespace scaleguard::run {

class Trainer;

// What a rank loads: the global parameter `name` of `global_shape`, of which `local` is the
// piece `slice` (take_slice(global, slice) has local's shape), or a flat range of it.
struct LoadTarget {
  std::string name;
  at::Tensor local;
  std::vector<int64_t> global_shape;
  Slice slice;
  // >= 0 (ZeRO-3): `local` is elements [flat_offset, flat_offset + local.numel()) of the
  // flattened piece, not the piece itself.
  int64_t flat_offset = -1;
};

// Loads every target from `from` (a .safetensors file, or a directory with model.safetensors
// or model.safetensors.index.json): shape checked against the global shape, dtype F32/BF16/F16
// converted to the target's, only the target's slice read (the file is mapped; the pages of
// other slices are not touched). Local: returns "" or the first error (naming the tensor),
// and fills `unused` with the file's tensors no target asked for.
// `skipped` gets the file's non-parameter buffers (is_buffer_name), which are never unused.
std::string load_safetensors(const std::string& from, std::vector<LoadTarget>& targets,
                             std::vector<std::string>* unused, std::vector<std::string>* skipped = nullptr);

// A tensor of a weights file that is a buffer, not a parameter: `rotary_emb.inv_freq` (what
// older Hugging Face Llama saves hold, per layer or once). Loading skips them with a note.
bool is_buffer_name(const std::string& name);

// The skipped buffers must agree with the model: a llama's rotary_emb.inv_freq must be the
// model's theta^(-2i/D) (within bf16 rounding): "" or the error naming the buffer.
std::string check_skipped_buffers(const std::string& from, const std::vector<std::string>& skipped, const Config& cfg);

// The note a loader logs for the skipped buffers ("" when there are none).
std::string skipped_note(const std::vector<std::string>& skipped);

// --init-from for a trainer. Collective over the world (the extra-tensor verdict needs every
// rank's names): "" or this rank's error; call any_failed() after it on every rank.
std::string init_from(Trainer& t, const Launch& l);

// config.json text for a llama model from its configuration keys (as model.config in a
// checkpoint manifest holds them) and its tensors' shapes (HF names); throws RunError.
std::string hf_llama_config(const std::map<std::string, std::string>& model_config,
                            const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& torch_dtype,
                            std::optional<int64_t> bos = std::nullopt, std::optional<int64_t> eos = std::nullopt);

// A checkpoint's model for one process (`sample`): the checkpoint directory it resolved to
// (a step-N directory, or a --ckpt-dir's newest valid one), its step and the configuration
// keys it recorded (model.config; older checkpoints: model.name's keys; "init-from" when the
// run started from weights). Throws RunError.
struct CheckpointModel {
  std::string dir;
  int64_t step = 0;
  std::map<std::string, std::string> config;
};
CheckpointModel read_checkpoint_model(const std::string& ckpt);

// Copies every parameter of `params` (full names, whole tensors) from the checkpoint's
// params/* (assembled from any layout's pieces); "" or the error (a missing, mis-shaped or
// extra parameter named).
std::string load_checkpoint_params(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& params);

int export_main(const std::vector<std::string>& args);
int logits_main(const std::vector<std::string>& args);

// The configuration keys that define a model (saved as model.config in checkpoints).
const std::vector<std::string>& model_config_keys();

}  // namespace scaleguard::run
