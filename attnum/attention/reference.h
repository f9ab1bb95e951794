#pragma once
// The fp64 reference attention (the oracle of every error metric), on double operands.
#include "attnum/attention/engine.h"

namespace attnum::attention {

/// Returns fp64 attention of one head: q [n_q, d], k and v [n_kv, d] row-major doubles, softmax
/// scale 1/sqrt(d), causal bottom-right aligned (row i sees j <= i + n_kv - n_q). A row that sees
/// no key gets O = 0, row_max = -inf, row_sum = 0, lse = -inf.
reference_result reference_attention(const double* q, const double* k, const double* v, int n_q, int n_kv,
                                     int d, bool causal = true);

}  // namespace attnum::attention
