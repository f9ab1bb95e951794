#pragma once
// Throughput of the teacher-forced forward, with the linear layers' rate compared, in the same
// run and on the same threads, with plain Eigen GEMMs of the same shapes.
#include <cstdint>
#include <string>
#include <string_view>

#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the shape of Qwen2.5 `size` from its config.json: "0.5b" (hidden 896, 24 layers, 14
/// heads, 2 kv heads, d_head 64, intermediate 4864, tied embeddings), "1.5b" (1536, 28, 12, 2,
/// 128, 8960, tied) or "7b" (3584, 28, 28, 4, 128, 18944, untied); all with qkv bias, rope theta
/// 1e6, rms eps 1e-6, vocab 151936 (7b: 152064). Throws attnum::error for any other size.
config qwen25_config(std::string_view size);

/// Returns a model of shape c with seeded random weights (uniform, scaled 1/sqrt(fan-in)), its
/// matrices stored as `dtype` (F32, or BF16 holding the RNE rounding of the same values, made a
/// chunk at a time so that a 7B shape never exists in fp32).
weights random_weights(const config& c, uint64_t seed, io::st_dtype dtype = io::st_dtype::F32);

/// Peak resident memory of this process so far (getrusage; 0 where unavailable).
size_t peak_rss_bytes();

/// One measurement.
struct forward_bench {
  int tokens = 0, threads = 0;
  std::string attention, linear;
  double seconds = 0, tokens_per_s = 0;
  double linear_seconds = 0, linear_gflops = 0;  ///< linear layers inside the forward
  double gemm_gflops = 0;                        ///< Eigen GEMMs of the same shapes and FLOPs, same threads
  double ratio = 0;                              ///< linear_gflops / gemm_gflops
  size_t checkpoint_bytes = 0;                   ///< the weights' bytes as held (weights::bytes)
  size_t peak_rss_bytes = 0;                     ///< the process's peak resident memory after the forwards
  size_t activation_bytes = 0;                   ///< forward_activation_bytes for the shape and tokens
};

/// Times the forward of `tokens` random ids (best of `repeats`) with attention hook `attention`
/// ("fp32", "fp64" or a kernel preset, condition plain).
forward_bench bench_forward(const weights& w, int tokens, linear_precision p, const std::string& attention,
                            int repeats);

}  // namespace attnum::model
