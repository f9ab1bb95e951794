#pragma once
// The kernel and rotation flags shared by every command that runs a kernel (attend, heads, study,
// loss, transfer, pcast simulate/overflow/claims): --kernel PRESET[,PRESET...] and repeatable
// --knob KEY=VALUE, resolved once into kernel_spec values (the knobs apply to every listed
// preset), and --rotation SPEC (parsed by study::parse_rotation). An unknown preset, knob or
// value, or a bad rotation file, throws attnum::error (exit 2, naming it).
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/study/plan.h"
#include "attnum/transforms/hadamard.h"
#include "cli/list_option.h"

namespace attnum::cli {

struct kernel_flags {
  std::string kernels;             ///< comma-separated presets
  std::vector<std::string> knobs;  ///< KEY=VALUE, applied to each preset
};

/// Adds `names` (e.g. "--kernel" or "--kernel,--kernels") and --knob to `app`.
inline void add_kernel_options(CLI::App& app, kernel_flags& f, const std::string& names,
                               const std::string& help = "Kernel presets, comma-separated (attnum kernels)") {
  app.add_option(names, f.kernels, help)->capture_default_str();
  app.add_option("--knob", f.knobs,
                 "KEY=VALUE applied to every kernel (names as in attnum kernels --json, e.g. "
                 "transform_dtype=fp32); repeatable");
}

/// Returns the kernel specs of the flags, in the order given.
inline std::vector<attention::kernel_spec> resolve_kernels(const kernel_flags& f) {
  std::vector<attention::kernel_spec> out;
  for (const auto& name : split_list(f.kernels)) out.push_back(attention::resolve_kernel(name, f.knobs));
  if (out.empty()) fail("--kernel: no kernel given");
  return out;
}

/// Returns the conditions of a --conditions list, as given, checked by study::check_conditions
/// (known, none twice, and with `needs_transform` one besides plain).
inline std::vector<std::string> conditions_from_flag(const std::string& list, bool needs_transform) {
  const std::vector<std::string> out = split_list(list);
  study::check_conditions(out, needs_transform);
  return out;
}

/// Adds --rotation to `app` (default: the randomized Hadamard of seed 0x5eed); the value is
/// parsed by study::parse_rotation (study/rotation_spec.h), the one parser of a rotation spec.
inline void add_rotation_option(CLI::App& app, std::string& spec) {
  spec = transforms::rotation().name();
  app.add_option("--rotation", spec,
                 "Rotation of Q and K: random-hadamard:SEED, hadamard (no signs), or FILE.npy "
                 "([d, d] orthogonal float32/float64 R; rows become x·R)")
      ->capture_default_str();
}

}  // namespace attnum::cli
