// attnum bench attention: GFLOP/s of the emulation and the fp64 reference vs Eigen GEMMs.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/attention/bench.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
struct opts {
  std::string kernel = "fa3";
  int tokens = 1024, d_head = 128, repeats = 5;
  double qk_std = 1;
  attnum::cli::output_flags output;
};
void setup(CLI::App& app) {
  auto o = std::make_shared<opts>();
  app.add_option("--kernel", o->kernel, "Kernel preset")->capture_default_str();
  app.add_option("--tokens", o->tokens, "Tokens (n_q = n_kv)")->capture_default_str();
  app.add_option("--d-head", o->d_head, "Head dimension")->capture_default_str();
  app.add_option("--repeats", o->repeats, "Best of N interleaved timings of each (a busy machine needs more)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--qk-std", o->qk_std,
                 "Standard deviation of the random Q and K entries (scores' std about its square: 1 flat, 2-3 a "
                 "peaked softmax as in trained heads)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100.0));
  attnum::cli::add_output_options(app, o->output, "Print JSON");
  app.callback([o] {
    const auto r = attnum::attention::bench_attention(o->kernel, o->tokens, o->d_head, o->repeats, o->qk_std);
    if (o->output.format() != attnum::io::output_format::table) {
      nlohmann::json row = {{"kernel", r.kernel},
                            {"tokens", r.tokens},
                            {"d_head", r.d_head},
                            {"heads", r.heads},
                            {"threads", r.threads},
                            {"qk_std", r.qk_std},
                            {"gflops", r.gflops},
                            {"gemm_gflops", r.gemm_gflops},
                            {"ratio", r.ratio},
                            {"ref_gflops", r.ref_gflops},
                            {"dgemm_gflops", r.dgemm_gflops},
                            {"ref_ratio", r.ref_ratio},
                            {"block_gemm_gflops", r.block_gemm_gflops},
                            {"ratio_block", r.ratio_block},
                            {"square_gemm_gflops", r.square_gemm_gflops},
                            {"ratio_square", r.ratio_square},
                            {"isa", r.isa},
                            {"fp8_sums", r.fp8_sums},
                            {"gemm_source", r.gemm_source}};
      attnum::cli::print_output(o->output, nlohmann::json::array({row}));
      return;
    }
    fmt::print("kernel {} tokens {} d_head {} heads {} threads {} qk_std {} isa {} (FP8 sums: {})\n", r.kernel,
               r.tokens, r.d_head, r.heads, r.threads, r.qk_std, r.isa, r.fp8_sums);
    fmt::print("baseline GEMMs: {}\n", r.gemm_source);
    fmt::print("emulation  {:8.2f} GFLOP/s  fp32 GEMM {:8.2f} GFLOP/s  ratio {:.3f}\n", r.gflops, r.gemm_gflops,
               r.ratio);
    fmt::print("reference  {:8.2f} GFLOP/s  fp64 GEMM {:8.2f} GFLOP/s  ratio {:.3f}\n", r.ref_gflops, r.dgemm_gflops,
               r.ref_ratio);
    fmt::print("emulation vs fp32 GEMM in the engine's blocks {:8.2f} GFLOP/s  ratio {:.3f}\n", r.block_gemm_gflops,
               r.ratio_block);
    fmt::print("emulation vs square {}^3 fp32 GEMM          {:8.2f} GFLOP/s  ratio {:.3f}\n", r.tokens,
               r.square_gemm_gflops, r.ratio_square);
  });
}
}  // namespace
ATTNUM_COMMAND("bench attention", "Throughput of the attention emulation and the fp64 reference vs Eigen GEMMs", setup);
