// attnum bench forward: tokens/s of the teacher-forced forward of a Qwen2.5-shaped model with
// random weights, the linear layers' GEMM rate against plain Eigen GEMMs, and the peak resident
// memory against the weights' bytes.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/model/bench.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
struct bench_options {
  int tokens = 1024, layers = 0, repeats = 1;
  std::string linear = "fp32", attention = "fp32", shape = "0.5b", weights = "fp32";
  attnum::cli::output_flags output;
};

void run(const bench_options& o) {
  using namespace attnum::model;
  if (o.tokens < 1) attnum::fail("bench forward: --tokens {}: expected >= 1", o.tokens);
  if (o.layers < 0) attnum::fail("bench forward: --layers {}: expected >= 0 (0: all of the model's)", o.layers);
  config c = qwen25_config(o.shape);
  if (o.layers > 0) c.n_layers = o.layers;
  if (o.weights != "fp32" && o.weights != "bf16")
    attnum::fail("bench forward: --weights {}: expected fp32 or bf16", attnum::clip(o.weights));
  const linear_precision p = parse_linear_precision(o.linear);
  // bf16 (fp16) linear layers round the weights to bf16 (fp16) anyway: generate them so.
  const std::string held = p == linear_precision::fp32 ? o.weights : std::string(name(p));
  const auto dtype = held == "bf16"   ? attnum::io::st_dtype::BF16
                     : held == "fp16" ? attnum::io::st_dtype::F16
                                      : attnum::io::st_dtype::F32;
  // Refused up front: the weights, the forward's activations and the baseline GEMM's largest
  // fp32 operands (the classifier's [vocab, dim]).
  const size_t base = sizeof(float) * (size_t(c.vocab_size) * c.dim + size_t(o.tokens) * (c.dim + c.vocab_size));
  attnum::check_alloc(model_bytes(c, dtype) + forward_activation_bytes(c, o.tokens) + base,
                      fmt::format("bench forward --shape {} --weights {} --tokens {}", o.shape, held, o.tokens));
  weights w = random_weights(c, 42, dtype);
  prepare_weights(w, p);
  const forward_bench b = bench_forward(w, o.tokens, p, o.attention, o.repeats);
  const nlohmann::json j = {{"model", "qwen2.5-" + o.shape + "-shape"},
                            {"layers", c.n_layers},
                            {"tokens", b.tokens},
                            {"threads", b.threads},
                            {"attention", b.attention},
                            {"linear", b.linear},
                            {"seconds", b.seconds},
                            {"tokens_per_s", b.tokens_per_s},
                            {"linear_seconds", b.linear_seconds},
                            {"linear_gflops", b.linear_gflops},
                            {"gemm_gflops", b.gemm_gflops},
                            {"ratio", b.ratio},
                            {"weights", held},
                            {"checkpoint_bytes", b.checkpoint_bytes},
                            {"activation_bytes", b.activation_bytes},
                            {"peak_rss_bytes", b.peak_rss_bytes},
                            {"rss_ratio", double(b.peak_rss_bytes) / double(b.checkpoint_bytes + b.activation_bytes)}};
  if (attnum::cli::print_output(o.output, nlohmann::json::array({j}), 2)) return;
  fmt::print("Qwen2.5-{} shape ({} layers, {} weights), {} tokens, {} threads, attention {}, linear {}\n", o.shape,
             c.n_layers, held, b.tokens, b.threads, b.attention, b.linear);
  fmt::print(
      "forward {:.2f} s = {:.1f} tokens/s; linear layers {:.2f} s at {:.1f} GFLOP/s = {:.0f}% of "
      "Eigen GEMM ({:.1f} GFLOP/s)\n",
      b.seconds, b.tokens_per_s, b.linear_seconds, b.linear_gflops, 100 * b.ratio, b.gemm_gflops);
  fmt::print("peak resident {:.2f} GB = {:.2f}x (weights {:.2f} GB + forward activations {:.2f} GB)\n",
             b.peak_rss_bytes * 1e-9, double(b.peak_rss_bytes) / double(b.checkpoint_bytes + b.activation_bytes),
             b.checkpoint_bytes * 1e-9, b.activation_bytes * 1e-9);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<bench_options>();
  app.add_option("--tokens", o->tokens, "Window length")->capture_default_str();
  app.add_option("--shape", o->shape, "Qwen2.5 shape: 0.5b, 1.5b or 7b")->capture_default_str();
  app.add_option("--weights", o->weights,
                 "Weight storage: fp32 or bf16 (bf16 or fp16 linear precision implies its own)")
      ->capture_default_str();
  app.add_option("--layers", o->layers, "Override the number of layers (0: the shape's)")->capture_default_str();
  app.add_option("--linear-precision", o->linear, "fp32, bf16 or fp16")->capture_default_str();
  app.add_option("--attention", o->attention, "fp32, fp64 or a kernel preset")->capture_default_str();
  app.add_option("--repeats", o->repeats, "Best of N forwards")->capture_default_str();
  attnum::cli::add_output_options(app, o->output, "Print JSON");
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("bench forward", "Forward tokens/s (Qwen2.5 shapes, random weights) vs GEMM rate, peak memory", setup);
