// attnum version: prints the tool version (same as --version) and which fast paths this machine
// runs (they never change results: each is bit-identical to its fallback), machine-readable with
// --json.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/attention/amx.h"
#include "attnum/attention/fast_exp2.h"
#include "attnum/core/version.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  app.callback([json] {
    const bool amx = attnum::attention::amx::available();
    const bool exp2 = attnum::attention::fast::exp2f_vector_active();
    if (*json) {
      const nlohmann::json j = {{"version", attnum::tool_version()},
                                {"fp8_exact_sums", amx ? "amx-bf16" : "double-gemm"},
                                {"exp2f", exp2 ? "avx512" : "scalar"}};
      fmt::print("{}\n", j.dump());
    } else {
      fmt::print("attnum {}\n", attnum::tool_version());
      fmt::print("exact FP8 chunk sums: {}\n",
                 amx ? "AMX-BF16 tiles" : "double GEMMs (no AMX-BF16 here, or ATTNUM_NO_AMX)");
      fmt::print("exp2f: {}\n", exp2 ? "AVX-512 (bit-identical to libm)" : "scalar libm");
    }
  });
}
}  // namespace
ATTNUM_COMMAND("version", "Print the tool version and the fast paths this machine runs", setup);
