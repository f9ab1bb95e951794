#pragma once
// One layer through a kernel, with each head's errors against the fp64 reference of the
// untransformed operands (what `attnum attend` prints).
#include <vector>

#include "attnum/attention/engine.h"

namespace attnum::attention {

struct head_report {
  int head = 0, kv_head = 0;
  // metrics.h's error_metrics: max_row_err relative (per-row L2, as rows.csv), max_abs_err absolute
  double rel_err = 0, log_err = 0, cosine = 0, max_row_err = 0, max_abs_err = 0;
  run_stats stats;
};

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

/// Whether `cond` rounds some of the given q or k values: a transformed condition (not plain)
/// rounds its operands to the kernel's transform_dtype, while plain uses them as given, so q/k
/// values not representable in transform_dtype make the two unlike (the CLI and Python warn).
bool transform_rounds_inputs(const kernel_spec& spec, const layer_view& layer, condition cond);

}  // namespace attnum::attention
