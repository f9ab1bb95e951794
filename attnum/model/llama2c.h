#pragma once
// llama2.c checkpoints (karpathy/llama2.c run.c, "legacy" version 0 format): a Config header of
// 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
// vocab_size means the classifier is stored separately), then fp32 weights in run.c's order.
#include <string>

#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the model in a llama2.c checkpoint. Every size is checked against the file length;
/// bad input throws attnum::error naming the file and the field.
weights load_llama2c(const std::string& path);

}  // namespace attnum::model
