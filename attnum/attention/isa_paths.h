#pragma once
// The engine's fast paths as one JSON object, as `attnum version --json` prints them and
// meta.json records them (core/run_info.h).
#include <nlohmann/json.hpp>

namespace attnum::attention::isa {
/// {isa, isa_supported, fp8_exact_sums, int8_qk_sums, exp2f}: isa.h's active path, the supported
/// paths, fp8_sums(), int8_sums() and fast_exp2.h's exp2f_path().
nlohmann::json paths_json();
}  // namespace attnum::attention::isa
