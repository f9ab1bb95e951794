#pragma once
// The attention engine's public entry points. CONTRACT shared by pcast/, predict/, model/ and
// study/: keep these signatures (add fields/functions freely; do not rename or remove).
//
// Layout everywhere: a layer's operands are row-major float arrays
//   q: [n_head, n_q, d_head], k and v: [n_head_kv, n_kv, d_head], o: [n_head, n_q, d_head].
// Query head h uses kv head h / (n_head / n_head_kv) (GQA). Causal masks are bottom-right aligned:
// query row i sees key columns j <= i + n_kv - n_q.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnum/attention/chunk_sums.h"
#include "attnum/attention/condition.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/allocator.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::attention {

/// A non-owning view of one layer's operands.
struct layer_view {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int n_head = 0, n_head_kv = 0, n_q = 0, n_kv = 0, d_head = 0;
};

/// Options of the transforms.
struct transform_options {
  transforms::rotation rotation;  ///< the rotation of Q and K (default random-hadamard:0x5eed)
  bool causal_center = false;     ///< subtract the causal prefix mean instead of the full mean
};

/// Result of the fp64 reference for one query head.
struct reference_result {
  std::vector<double> o;        ///< [n_q, d_head]
  std::vector<double> row_max;  ///< per row, max of the scaled scores s_ij = q.k / sqrt(d)
  std::vector<double> row_sum;  ///< per row, sum_j exp(s_ij - row_max)
  std::vector<double> lse;      ///< per row, log-sum-exp of the scaled scores
  std::vector<double> p;        ///< [n_q, n_kv] the normalized softmax (0 where masked); only when asked
};

/// Returns fp64 attention of query head h (softmax scale 1/sqrt(d_head)).
reference_result reference_head(const layer_view& layer, int h, bool causal = true);

/// One operand after its cast: values on the format's grid (before dequantisation) and the
/// dequantisation scale of every element: scale(h, t, c) = row_scale[h*n_tok + t] *
/// col_scale[(h*n_col_blocks + t/col_block)*d_head + c]. The value the kernel means is
/// values[(h*n_tok + t)*d_head + c] * scale(h, t, c). An unscaled operand has all scales 1.
struct operand_cast {
  int n_heads = 0, n_tok = 0, d_head = 0;
  int n_col_blocks = 1,
      col_block = 1;  ///< channel scales per token block (causal scope); col_block >= n_tok when 1 block
  /// [n_heads, n_tok, d_head] (resize leaves new elements unset: prepare_layer writes every one)
  std::vector<float, no_init_allocator<float>> values;
  std::vector<float> row_scale;  ///< [n_heads, n_tok]
  /// [n_heads, n_tok] max |values| of each row, NaN skipped (formats::span_amax), where the cast
  /// kept it (row-wise and per-channel scales: taken while the row is in cache); else empty.
  std::vector<float> row_amax;
  std::vector<float> col_scale;  ///< [n_heads, n_col_blocks, d_head]
  bool nan_flagged = false;      ///< a group with amax 0 and no eps: the real kernel gives NaN
  /// Returns the dequantisation scale of element (h, t, c).
  float scale(int h, int t, int c) const {
    return row_scale[static_cast<size_t>(h) * n_tok + t] *
           col_scale[(static_cast<size_t>(h) * n_col_blocks + t / col_block) * d_head + c];
  }
  /// Returns max |values| (NaN skipped) over head h's tokens [t0, t1): from row_amax when kept,
  /// else one pass over the values. The same value either way (a max of maxima).
  float amax(int h, int t0, int t1) const;
};

/// A layer prepared for one kernel and condition: transformed and cast operands with their scales.
/// Preparing is per layer because scales can span heads (per tensor, per kv head).
struct prepared_layer {
  kernel_spec spec;
  condition cond = condition::plain;
  int n_head = 0, n_head_kv = 0, n_q = 0, n_kv = 0, d_head = 0;
  /// The fp32 operands the kernel casts: after the condition's transform (and Sage's smooth_k
  /// for k), layout as layer_view. Without keep_operands (prepare_layer) an operand that no step
  /// changes is left empty: its cast read the caller's array.
  std::vector<float> q, k, v;
  operand_cast q8, k8, v8;  ///< the casts (values equal q/k/v where a cast is off)
  /// What steps after the transform did to q and k (the predictor's model of the transform's own
  /// rounding needs the values it rounded): Sage's smooth_k subtracted k_mean [n_head_kv, d]
  /// (empty without smooth_k); Sage v1 multiplied q by q_factor (1 otherwise).
  std::vector<float> k_mean;
  float q_factor = 1;
  /// Returns the kv head of query head h.
  int kv_head(int h) const { return h / (n_head / n_head_kv); }
};

/// Returns the layer transformed by `cond` and cast as `spec` says. Throws attnum::error on bad
/// dims (d_head 0, n_head not a multiple of n_head_kv, ...) or non-finite values. keep_operands
/// false: q, k and v are copied only where a step changes them (callers that need only the casts,
/// as attend(): one fresh copy of each operand fewer); the casts are the same bits either way.
std::shared_ptr<const prepared_layer> prepare_layer(const kernel_spec& spec, const layer_view& layer, condition cond,
                                                    const transform_options& opts = {}, bool keep_operands = true);

/// Per-run diagnostics of one head.
struct run_stats {
  int64_t p_underflow = 0;   ///< P values that were > 0 in fp32 and cast to 0
  int64_t p_saturated = 0;   ///< P values whose scaled value exceeded the P format's max
  int64_t p_count = 0;       ///< P values cast (unmasked)
  bool nan_flagged = false;  ///< a NaN arose where the real kernel would produce it (e.g. zero V channel)
  /// What gave the head's chunk sums (chunk_sums.h): chosen per head from the ISA path and the
  /// operands; every kind gives the same bits, so this says only how fast the head ran.
  qk_kind qk = qk_kind::ordered_loop;
  pv_kind pv = pv_kind::ordered_loop;
};

/// Runs the kernel on query head h of a prepared layer: o is [n_q, d_head] (fp32 values of the
/// kernel's output format). Deterministic; thread-safe (run heads in parallel freely).
void run_head(const prepared_layer& layer, int h, bool causal, float* o, run_stats* stats = nullptr);
/// Heads [h0, h1) into o + (h - h0) * n_q * d_head, stats (if given) one entry per head: the same
/// bits as run_head on each, with all threads sharing the heads' row tiles (faster than heads in
/// parallel when there are few heads or the cores run at different speeds). Call it from outside
/// a parallel region; inside one it runs on the calling thread.
void run_heads(const prepared_layer& layer, int h0, int h1, bool causal, float* o, run_stats* stats = nullptr);
/// Same with a double output: with spec.arith_fp64 the fp64 result is not rounded to float
/// (exact_spec() then matches reference_head to ~1e-15).
void run_head(const prepared_layer& layer, int h, bool causal, double* o, run_stats* stats = nullptr);

/// The engine's accumulator step for float accumulators, a[i] = model(a[i] + c[i]) with c[i] an
/// exact chunk sum (the sum formed in double, then rounded per m.kind: fp32, truncated, fp16, ...),
/// as the emulation runs it (vectorised where the build allows). Exposed for its tests.
void accumulate_chunk(const accumulator_spec& m, float* a, const double* c, int n);

/// Convenience: prepares and runs every head; returns o [n_head, n_q, d_head].
/// Same as run_layer with double outputs (see run_head).
std::vector<double> run_layer_f64(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal = true,
                                  const transform_options& opts = {});
std::vector<float> run_layer(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal = true,
                             const transform_options& opts = {});

}  // namespace attnum::attention
