#pragma once
// One layer through a kernel, with each head's errors against the fp64 reference of the
// untransformed operands (what `attnum attend` prints).
#include <string>
#include <vector>

#include "attnum/attention/engine.h"

namespace attnum::attention {

struct head_report {
  int head = 0, kv_head = 0;
  // metrics.h's error_metrics: max_row_err relative (per-row L2, as rows.csv), max_abs_err absolute
  double rel_err = 0, log_err = 0, cosine = 0, max_row_err = 0, max_abs_err = 0;
  /// max over rows of |row max of q.k / sqrt(d)| * log2(e) (fp64 reference; NaN without metrics):
  /// the size of the softmax's exp2 arguments before the max is subtracted
  double exp2_arg_max = 0;
  run_stats stats;
};

/// From |max * scale * log2 e| = 2^31 on, fp32's half ulp is 128: the kernels' max_scaled (that
/// product rounded to fp32) is off by up to 128 (2^(e-24) above), and the max column's exp2
/// argument fmaf(s, scale * log2 e, -max_scaled) is that rounding error, not 0. Its exp2 then
/// overflows to inf (l = inf, O = inf * 0 = NaN) or, from 2^32, may underflow to 0 with every
/// other key (l = 0, O = 0): the kernel's own fp32 arithmetic, as the GPU's FFMA and ex2 run it.
inline constexpr double kExp2ArgFp32Limit = 2147483648.0;

struct attend_result {
  std::vector<float> o;  ///< [n_head, n_q, d_head]; empty when attend wrote to the caller's `out`
  std::vector<head_report> heads;
};

/// Runs every head (in parallel over heads; deterministic) and measures it. Without `with_metrics`
/// the fp64 reference is not computed and the error metrics are NaN (the output and run_stats
/// are the same bits): for callers that want only the kernel's output. With `out` (n_head * n_q *
/// d_head floats) the output goes there instead of into the result's o.
attend_result attend(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal = true,
                     const transform_options& opts = {}, bool with_metrics = true, float* out = nullptr);

/// The warning for scores too large for the kernel's fp32 softmax (`attnum attend` prints it on
/// stderr, Python's attend raises it as a warning): names the head with the largest exp2_arg_max
/// at or above kExp2ArgFp32Limit, how large it is and how far off max_scaled can be, and says what
/// the kernel's arithmetic gives. Empty when no head gets there or the spec computes in fp64
/// (arith_fp64).
std::string large_score_warning(const kernel_spec& spec, const attend_result& r);

/// Whether `cond` rounds some of the given q or k values: a transformed condition (not plain)
/// rounds its operands to the kernel's transform_dtype, while plain uses them as given, so q/k
/// values not representable in transform_dtype make the two unlike (the CLI and Python warn).
bool transform_rounds_inputs(const kernel_spec& spec, const layer_view& layer, condition cond);

}  // namespace attnum::attention
