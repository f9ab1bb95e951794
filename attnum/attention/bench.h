#pragma once
// Throughput of the emulation and of the fp64 reference against Eigen GEMMs of the same shapes
// on the same threads, measured in one run (design.md "Performance").
#include <string>

namespace attnum::attention {

struct bench_result {
  std::string kernel;
  int tokens = 0, d_head = 0, heads = 0, threads = 0;
  double qk_std = 1;        ///< standard deviation of the random Q and K entries
  double gflops = 0;        ///< emulation: useful causal FLOPs (QK^T and PV, 2 n^2 d per head) / s
  double gemm_gflops = 0;   ///< fp32 Eigen GEMMs S = Q K^T and O = P V (4 n^2 d per head) / s
  double ratio = 0;         ///< gflops / gemm_gflops
  double ref_gflops = 0;    ///< fp64 reference, useful causal FLOPs / s
  double dgemm_gflops = 0;  ///< the same GEMMs in fp64
  double ref_ratio = 0;     ///< ref_gflops / dgemm_gflops
  // The baselines a user would compare against: the same fp32 FLOPs as the engine's
  // blocks (64 query rows x block_n keys, S = Q K^T then O += S V per block, every block), and a
  // square n x n x n fp32 GEMM per thread; ratio_* = gflops over each.
  double block_gemm_gflops = 0, ratio_block = 0;
  double square_gemm_gflops = 0, ratio_square = 0;
  std::string isa;          ///< the engine's instruction-set path (isa.h)
  std::string fp8_sums;     ///< what gives the exact FP8 chunk sums on that path
  std::string gemm_source;  ///< the baseline GEMMs: Eigen fp32 and the SIMD it was compiled for
};

/// Runs `kernel` on one head per thread (at least 2 heads) of random causal attention with
/// n tokens and head dim d; each timing is the best of `repeats`, the four timings interleaved
/// within each repeat. Q and K entries are N(0, qk_std^2), V's N(0, 1): the scores' standard
/// deviation is about qk_std^2, so qk_std 1 gives a flat softmax and 2-3 a peaked one (most
/// probabilities tiny, as in trained models' heads), which costs the FP8 presets' exact P V sums a
/// second plane pass on more row groups (plane_gemm.h).
bench_result bench_attention(const std::string& kernel, int tokens, int d_head, int repeats = 5, double qk_std = 1);

}  // namespace attnum::attention
