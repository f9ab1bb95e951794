#pragma once
// Throughput of the emulation and of the fp64 reference against Eigen GEMMs of the same shapes
// on the same threads, measured in one run (design.md "Performance").
#include <string>

namespace attnum::attention {

struct bench_result {
  std::string kernel;
  int tokens = 0, d_head = 0, heads = 0, threads = 0;
  double gflops = 0;        ///< emulation: useful causal FLOPs (QK^T and PV, 2 n^2 d per head) / s
  double gemm_gflops = 0;   ///< fp32 Eigen GEMMs S = Q K^T and O = P V (4 n^2 d per head) / s
  double ratio = 0;         ///< gflops / gemm_gflops
  double ref_gflops = 0;    ///< fp64 reference, useful causal FLOPs / s
  double dgemm_gflops = 0;  ///< the same GEMMs in fp64
  double ref_ratio = 0;     ///< ref_gflops / dgemm_gflops
};

/// Runs `kernel` on one head per thread (at least 2 heads) of random causal attention with
/// n tokens and head dim d; each timing is the best of `repeats`, the four timings interleaved
/// within each repeat.
bench_result bench_attention(const std::string& kernel, int tokens, int d_head, int repeats = 5);

}  // namespace attnum::attention
