#pragma once
// The attention engine's public entry points. CONTRACT shared by pcast/, predict/, model/ and
// study/: keep these signatures (add fields/functions freely; do not rename or remove).
//
// Layout everywhere: a layer's operands are row-major float arrays
//   q: [n_head, n_q, d_head], k and v: [n_head_kv, n_kv, d_head], o: [n_head, n_q, d_head].
// Query head h uses kv head h / (n_head / n_head_kv) (GQA). Causal masks are bottom-right aligned:
// query row i sees key columns j <= i + n_kv - n_q.
#include <cstdint>
#include <string>
#include <vector>

#include "attnum/attention/kernel_spec.h"

namespace attnum::attention {

/// A non-owning view of one layer's operands.
struct layer_view {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int n_head = 0, n_head_kv = 0, n_q = 0, n_kv = 0, d_head = 0;
};

/// The transform applied to Q and K before the kernel (never to V).
enum class condition : uint8_t { plain, rotate, center, center_rotate };
/// Returns "plain", "rotate", "center", "center+rotate".
std::string_view condition_name(condition c);
/// Parses a condition name ("tile" is accepted as the legacy name of "plain").
condition parse_condition(std::string_view text);

/// Options of the transforms.
struct transform_options {
  uint64_t rotation_seed = 0x5eedULL;  ///< seed of the random-sign diagonal of the Hadamard
  bool causal_center = false;          ///< subtract the causal prefix mean instead of the full mean
};

/// Result of the fp64 reference for one query head.
struct reference_result {
  std::vector<double> o;        ///< [n_q, d_head]
  std::vector<double> row_max;  ///< per row, max of the scaled scores s_ij = q.k / sqrt(d)
  std::vector<double> row_sum;  ///< per row, sum_j exp(s_ij - row_max)
  std::vector<double> lse;      ///< per row, log-sum-exp of the scaled scores
};

/// Returns fp64 attention of query head h (softmax scale 1/sqrt(d_head)).
reference_result reference_head(const layer_view& layer, int h, bool causal = true);

/// A layer prepared for one kernel and condition: transformed and cast operands with their scales.
/// Preparing is per layer because scales can span heads (per tensor, per kv head).
struct prepared_layer;

/// Per-run diagnostics of one head.
struct run_stats {
  int64_t p_underflow = 0;   ///< P values that were > 0 in fp32 and cast to 0
  int64_t p_saturated = 0;   ///< P values whose scaled value exceeded the P format's max
  int64_t p_count = 0;       ///< P values cast (unmasked)
  bool nan_flagged = false;  ///< a NaN arose where the real kernel would produce it (e.g. zero V channel)
};

}  // namespace attnum::attention
