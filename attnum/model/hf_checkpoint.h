#pragma once
// Hugging Face checkpoint folders: config.json (qwen2 and llama families) with model.safetensors
// or shards listed in model.safetensors.index.json; bf16, fp16 or fp32 tensors, memory-mapped.
#include <string>

#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the config of a Hugging Face config.json (qwen2 / llama families).
config read_hf_config(const std::string& config_json_path);

/// Returns the model in a Hugging Face folder. Every header, offset, dtype and shape is
/// validated; errors name the file and the tensor.
weights load_hf_checkpoint(const std::string& dir);

}  // namespace attnum::model
