#pragma once
// Throughput of the teacher-forced forward, with the linear layers' rate compared, in the same
// run and on the same threads, with plain Eigen GEMMs of the same shapes.
#include <cstdint>
#include <string>

#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the shape of Qwen2.5-0.5B (hidden 896, 24 layers, 14 heads, 2 kv heads, d_head 64,
/// intermediate 4864, vocab 151936, qkv bias, tied embeddings, rope theta 1e6).
config qwen25_05b_config();

/// Returns a model of shape c with seeded random weights (uniform, scaled 1/sqrt(fan-in)).
weights random_weights(const config& c, uint64_t seed);

/// One measurement.
struct forward_bench {
  int tokens = 0, threads = 0;
  std::string attention, linear;
  double seconds = 0, tokens_per_s = 0;
  double linear_seconds = 0, linear_gflops = 0;  ///< linear layers inside the forward
  double gemm_gflops = 0;  ///< Eigen GEMMs of the same shapes and FLOPs, same threads
  double ratio = 0;        ///< linear_gflops / gemm_gflops
};

/// Times the forward of `tokens` random ids (best of `repeats`) with attention hook `attention`
/// ("fp32", "fp64" or a kernel preset, condition plain).
forward_bench bench_forward(const weights& w, int tokens, linear_precision p,
                            const std::string& attention, int repeats);

}  // namespace attnum::model
