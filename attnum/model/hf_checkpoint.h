#pragma once
// Hugging Face checkpoint folders: config.json (llama, mistral, qwen2 and qwen3 families) with
// model.safetensors or shards listed in model.safetensors.index.json; bf16, fp16 or fp32 tensors,
// memory-mapped. Config fields and tensors the forward does not implement are refused by name.
#include <string>

#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the config of a Hugging Face config.json (llama / mistral / qwen2 / qwen3), with the
/// RoPE frequencies of its rope_scaling and its per-layer sliding windows.
config read_hf_config(const std::string& config_json_path);

/// Returns the model in a Hugging Face folder. Every header, offset, dtype and shape is
/// validated; errors name the file and the tensor.
weights load_hf_checkpoint(const std::string& dir);

}  // namespace attnum::model
