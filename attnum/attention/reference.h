#pragma once
// The fp64 reference attention (the oracle of every error metric), on double operands: the one
// reference of the project (the engine's tests, the head study, the P-cast simulation).
#include "attnum/attention/engine.h"

namespace attnum::attention {

/// Returns fp64 attention of one head: q [n_q, d], k and v [n_kv, d] row-major doubles, softmax
/// scale 1/sqrt(d), causal bottom-right aligned (row i sees j <= i + n_kv - n_q). A row that sees
/// no key gets O = 0, row_max = -inf, row_sum = 0, lse = -inf. With want_p, also the normalized
/// softmax P [n_q, n_kv] (zeros where masked).
reference_result reference_attention(const double* q, const double* k, const double* v, int n_q, int n_kv, int d,
                                     bool causal = true, bool want_p = false);

/// The same from given scaled scores s [n_q, n_kv] (row-major; s_ij = q_i.k_j / sqrt(d) or any
/// other logits): softmax per row (causal as above), O = P V. row_max and lse are of these scores.
reference_result reference_from_scores(const double* s, const double* v, int n_q, int n_kv, int d, bool causal = true,
                                       bool want_p = false);

}  // namespace attnum::attention
