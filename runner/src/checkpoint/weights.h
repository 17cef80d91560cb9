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
std::string load_safetensors(const std::string& from, std::vector<LoadTarget>& targets,
                             std::vector<std::string>* unused);

// --init-from for a trainer. Collective over the world (the extra-tensor verdict needs every
// rank's names): "" or this rank's error; call any_failed() after it on every rank.
std::string init_from(Trainer& t, const Launch& l);

// config.json text for a llama model from its configuration keys (as model.config in a
// checkpoint manifest holds them) and its tensors' shapes (HF names); throws RunError.
std::string hf_llama_config(const std::map<std::string, std::string>& model_config,
                            const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& torch_dtype);

int export_main(const std::vector<std::string>& args);
int logits_main(const std::vector<std::string>& args);

// The configuration keys that define a model (saved as model.config in checkpoints).
const std::vector<std::string>& model_config_keys();

}  // namespace scaleguard::run
