// attnum illustrate: the numbers of the report's synthetic illustration at one slider position.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnum/report/illustrate.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
void print_vec(const char* label, const attnum::report::ivec& v) {
  fmt::print("  {:<22}", label);
  for (double x : v) fmt::print(" {:9.4f}", x);
  fmt::print("\n");
}

void setup(CLI::App& app) {
  struct opts {
    double common = 4;
    bool center = false;
    attnum::cli::output_flags output;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--common", o->common, "Shared first coordinate of the four keys")->capture_default_str();
  app.add_flag("--center", o->center, "Subtract the mean key before rotation and the casts");
  attnum::cli::add_output_options(app, o->output, "Print a JSON array of rows (query, then keys)");
  app.callback([o] {
    const auto ill = attnum::report::illustrate(o->common, o->center);
    if (attnum::cli::print_output(o->output, attnum::report::illustration_rows(ill))) return;
    fmt::print("common {}  center {}  (one query, four keys, eight channels; E4M3 max-based scales)\n", ill.common,
               ill.center);
    fmt::print("{:<4} {:>10} {:>12} {:>16}\n", "key", "exact", "fp8", "fp8 rotated");
    for (int j = 0; j < attnum::report::kIllustrationKeys; ++j)
      fmt::print("k{:<3} {:10.6f} {:12.6f} {:16.6f}\n", j + 1, ill.w_exact[j], ill.w_fp8[j], ill.w_fp8_rot[j]);
    fmt::print("total variation      {:12.6f} {:16.6f}\n", ill.tv_fp8, ill.tv_fp8_rot);
    fmt::print("vectors:\n");
    print_vec("q", ill.q);
    print_vec("q fp8", ill.q_fp8);
    print_vec("q fp8 (rotated)", ill.q_rot_fp8);
    for (int j = 0; j < attnum::report::kIllustrationKeys; ++j) {
      print_vec(fmt::format("k{}", j + 1).c_str(), ill.k[j]);
      print_vec(fmt::format("k{} fp8", j + 1).c_str(), ill.k_fp8[j]);
      print_vec(fmt::format("k{} fp8 (rotated)", j + 1).c_str(), ill.k_rot_fp8[j]);
    }
  });
}
}  // namespace
ATTNUM_COMMAND("illustrate", "Print the numbers of the report's synthetic illustration", setup);
