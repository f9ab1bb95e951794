#pragma once
// Test oracle: accumulator models for the two GEMMs of attention (S = Q K^T and O += P V),
// written independently of the engine's round_acc (attention/engine_detail.h), which the tests
// check against it.
//
// Semantics (the reference the engine must match bit for bit, however it vectorises):
//   - Products a*b are formed exactly (they are exact in double for fp8, int8, fp16, bf16 and
//     fp32 operands: at most 2 x 24 significant bits).
//   - The products are taken in ascending index order, in chunks of k_step consecutive products
//     (the last chunk may be shorter). For each chunk, the exact sum acc + sum(chunk) is formed
//     and rounded ONCE into the accumulator:
//       fp32       round to nearest even fp32. k_step 1 is ordinary sequential FMA accumulation,
//                  acc = fmaf(a[i], b[i], acc).
//       truncated  round toward zero to `mantissa_bits` fraction bits, keeping the fp32 exponent
//                  range (subnormal quantum 2^(-126-mantissa_bits)). Hopper FP8 WGMMA keeps about
//                  13 bits: "multi-term summation followed by a single final rounding (RZ)"
//                  (kernels.md section 0; DeepSeek-V3 3.3.2; arXiv 2512.07004); k_step = 32 (one
//                  wgmma K step for 8-bit operands).
//       fp16       round to nearest even fp16, overflow to +-Inf (mma ... .f16 accumulators, Sage
//                  v1's tl.dot(out_dtype=float16)).
//   - The exact chunk sum is held as a double-double (TwoSum) and rounded to double by round-to-odd,
//     so the single rounding into the accumulator is correct (53 >= 24 + 2 bits). The double-double
//     is exact for fp8 and int8 operands (every e4m3 product is a multiple of 2^-18 below 2^18)
//     and whenever the chunk's terms and rounding errors fit in about 100 bits; beyond that (wide
//     bf16/fp32 exponent spreads) it is accurate to about 2^-100 relative.
#include <cstdint>
#include <string_view>

namespace attnum::oracle {

enum class accum_kind : uint8_t { fp32, truncated, fp16 };

struct accumulator_model {
  accum_kind kind = accum_kind::fp32;
  int mantissa_bits = 23;  ///< truncated: fraction bits kept (1..23)
  int k_step = 1;          ///< products summed exactly before each rounding (>= 1)
};

/// Parses "fp32", "fp16", "truncated" (also "trunc13" style: truncated with 13 bits) into kind
/// and mantissa bits; throws attnum::error otherwise.
accumulator_model parse_accumulator(std::string_view text, int k_step = 1);

/// Rounds an exact sum into the accumulator format of `m` (see the file comment).
float round_accumulator(const accumulator_model& m, double exact_sum);

/// Returns x rounded toward zero to `bits` fraction bits (0..23), with the fp32 exponent range
/// (also for subnormals). NaN and Inf are returned unchanged.
float truncate_mantissa(float x, int bits);

/// Returns c + sum_i a[i] * b[i * stride_b] (i = 0..n-1) under model m, in ascending i.
float accumulate_dot(const accumulator_model& m, float c, const float* a, const float* b, int n, int stride_b = 1);

}  // namespace attnum::oracle
