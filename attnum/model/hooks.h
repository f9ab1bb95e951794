#pragma once
// Attention hooks for the forward pass: the fp64 reference or any kernel preset of the engine
// under any condition.
#include <string_view>

#include "attnum/attention/engine.h"
#include "attnum/model/transformer.h"

namespace attnum::model {

/// Returns the reference attention: "fp64" (every operation in double) or "bf16" (the engine's
/// native BF16 flash-attention preset, condition plain). Throws attnum::error otherwise.
attention_fn reference_attention(std::string_view reference);

/// Returns a hook running `kernel` under `condition` ("plain", "rotate", "center",
/// "center+rotate") with the transforms' options; the spec named "fp64" (attention::exact_spec)
/// is the fp64 reference.
attention_fn kernel_attention(const attention::kernel_spec& kernel, std::string_view condition,
                              const attention::transform_options& topt = {});

}  // namespace attnum::model
