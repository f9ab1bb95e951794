// attnum version: prints the tool version (same as --version) and which fast paths this machine
// runs (they never change results: each is bit-identical to its fallback), machine-readable with
// --json.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <string>

#include "attnum/attention/amx.h"
#include "attnum/attention/fast_exp2.h"
#include "attnum/attention/isa.h"
#include "attnum/core/version.h"
#include "attnum/model/transformer.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  app.callback([json] {
    namespace isa = attnum::attention::isa;
    const bool amx = attnum::attention::amx::available();
    const std::string exp2 = attnum::attention::fast::exp2f_path();
    const std::string path(isa::name(isa::active())), sums(isa::fp8_sums());
    std::vector<std::string> supported;
    for (auto p : isa::supported_paths()) supported.emplace_back(isa::name(p));
    const std::string int8(isa::int8_sums());
    if (*json) {
      const nlohmann::json j = {{"version", attnum::tool_version()},
                                {"isa", path},
                                {"isa_supported", supported},
                                {"fp8_exact_sums", sums},
                                {"int8_qk_sums", int8},
                                {"exp2f", exp2},
                                {"forward_simd", std::string(attnum::model::forward_simd())}};
      fmt::print("{}\n", j.dump());
    } else {
      std::string sup;
      for (const auto& s : supported) sup += (sup.empty() ? "" : " ") + s;
      fmt::print("attnum {}\n", attnum::tool_version());
      fmt::print("isa: {} (supported here: {}; ATTNUM_ISA forces one)\n", path, sup);
      fmt::print("exact FP8 chunk sums: {}\n",
                 amx                     ? "AMX-BF16 tiles"
                 : sums == "double-gemm" ? "double GEMMs (scalar path)"
                 : sums.rfind("int16-planes", 0) == 0
                     ? fmt::format("int16 exponent-plane kernels ({}; {} where they refuse)",
                                   path == "amx" ? "avx512" : path, path == "neon" ? "double GEMMs" : "double-FMA")
                     : fmt::format("double-FMA chunk kernels ({})", path == "amx" ? "avx512" : path));
      fmt::print("INT8 QK sums: {}\n", amx                   ? std::string("AMX-INT8 tiles")
                                       : int8 == "fp32-gemm" ? std::string("fp32 GEMM (exact integer sums)")
                                                             : int8 + " (exact int32 sums)");
      fmt::print("exp2f: {}\n", exp2 == "scalar" ? std::string("scalar libm") : exp2 + " (bit-identical to libm)");
      fmt::print("forward GEMMs: Eigen's {} kernels (the model forward's last bits depend on them)\n",
                 attnum::model::forward_simd());
    }
  });
}
}  // namespace
ATTNUM_COMMAND("version", "Print the tool version and the fast paths this machine runs", setup);
