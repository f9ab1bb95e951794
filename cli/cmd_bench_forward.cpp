// attnum bench forward: tokens/s of the teacher-forced forward of a Qwen2.5-0.5B-shaped model
// with random weights, and the linear layers' GEMM rate against plain Eigen GEMMs.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/model/bench.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
struct bench_options {
  int tokens = 1024, layers = 0, repeats = 1;
  std::string linear = "fp32", attention = "fp32";
  attnum::cli::output_flags output;
};

void run(const bench_options& o) {
  using namespace attnum::model;
  if (o.tokens < 1) attnum::fail("bench forward: --tokens {}: expected >= 1", o.tokens);
  if (o.layers < 0) attnum::fail("bench forward: --layers {}: expected >= 0 (0: all of the model's)", o.layers);
  config c = qwen25_05b_config();
  if (o.layers > 0) c.n_layers = o.layers;
  weights w = random_weights(c, 42);
  const linear_precision p = parse_linear_precision(o.linear);
  if (p == linear_precision::bf16) round_to_bf16(w);
  const forward_bench b = bench_forward(w, o.tokens, p, o.attention, o.repeats);
  const nlohmann::json j = {{"model", "qwen2.5-0.5b-shape"}, {"layers", c.n_layers}, {"tokens", b.tokens},
                            {"threads", b.threads}, {"attention", b.attention}, {"linear", b.linear},
                            {"seconds", b.seconds}, {"tokens_per_s", b.tokens_per_s},
                            {"linear_seconds", b.linear_seconds}, {"linear_gflops", b.linear_gflops},
                            {"gemm_gflops", b.gemm_gflops}, {"ratio", b.ratio}};
  if (attnum::cli::print_output(o.output, nlohmann::json::array({j}), 2)) return;
  fmt::print("Qwen2.5-0.5B shape ({} layers), {} tokens, {} threads, attention {}, linear {}\n",
             c.n_layers, b.tokens, b.threads, b.attention, b.linear);
  fmt::print("forward {:.2f} s = {:.1f} tokens/s; linear layers {:.2f} s at {:.1f} GFLOP/s = {:.0f}% of "
             "Eigen GEMM ({:.1f} GFLOP/s)\n", b.seconds, b.tokens_per_s, b.linear_seconds,
             b.linear_gflops, 100 * b.ratio, b.gemm_gflops);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<bench_options>();
  app.add_option("--tokens", o->tokens, "Window length")->capture_default_str();
  app.add_option("--layers", o->layers, "Override the number of layers (0: 24)")->capture_default_str();
  app.add_option("--linear-precision", o->linear, "fp32 or bf16")->capture_default_str();
  app.add_option("--attention", o->attention, "fp32, fp64 or a kernel preset")->capture_default_str();
  app.add_option("--repeats", o->repeats, "Best of N forwards")->capture_default_str();
  attnum::cli::add_output_options(app, o->output, "Print JSON");
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("bench forward", "Forward tokens/s (Qwen2.5-0.5B shape, random weights) vs GEMM rate", setup);
