#pragma once
// The study's bridge to the kernels: for one kv group (query heads sharing a kv head) and one
// condition, returns each head's kernel output and what the predictor needs about the casts
// (the transformed pre-cast operands and every element's rounding variance). Also the fp64
// reference with its full P matrix, computed once per head and text and shared by all
// conditions and kernels.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnum/attention/engine.h"
#include "attnum/predict/predictor.h"

namespace attnum::study {

/// The conditions of design.md, in their canonical order (attention/engine.h's names).
using attention::kConditionNames;
/// Returns the index of a condition name ("tile" is the legacy name of "plain"); throws
/// attnum::error naming the text otherwise.
int parse_condition_index(std::string_view text);

/// fp64 causal reference of one head with its P: attention/reference.h's, whose fields p [n, n]
/// (zeros above the diagonal), o [n, d] and row_sum the study reads.
using reference = attention::reference_result;
/// Returns the fp64 causal reference of float operands q, k, v [n, d] (untransformed), with P.
reference reference_causal(const float* q, const float* k, const float* v, int n, int d);

/// One head's run under a kernel and condition.
struct head_run {
  std::vector<float> o;                     ///< [n, d] kernel output (values of its output format)
  std::vector<float> q, k;                  ///< [n, d] transformed operands before the cast
  std::vector<double> var_q, var_k, var_v;  ///< per-element rounding variances (empty: no cast)
  /// Predictor v2 [d]: per channel, the mean pair covariance of K's (cast and transform dtype) and
  /// V's rounding errors (predict::mean_pair_covariance; empty: not asked for or no rounding).
  std::vector<double> shared_k, shared_v;
  predict::p_cast_model p_cast;
  bool o_cast = true;
  formats::format out_fmt = formats::format::bf16;
};

/// Returns the name of the backend that runs kernels ("engine").
std::string_view kernel_backend();

/// One layer prepared for one kernel and condition (opaque; scales span the layer's heads as the
/// kernel's granularity says).
struct prepared_run;
/// Layer operands: q [n_head, n, d], k and v [n_head_kv, n, d].
struct layer_operands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int n_head = 0, n_head_kv = 0, n = 0, d = 0;
};
/// Prepares (transforms and casts) a layer for `kernel` under condition `cond` (index into
/// kConditionNames) with the transforms' options (the rotation).
std::shared_ptr<const prepared_run> prepare_run(const attention::kernel_spec& kernel, int cond,
                                                const layer_operands& layer,
                                                const attention::transform_options& topt = {});
/// What a caller needs of one head's run; what is not asked for is left empty and not computed.
struct head_parts {
  /// o: the kernel's output, the one part that runs the kernel's emulation (the head's errors).
  bool output = true;
  /// q, k, var_q and the P-cast and output models: the predictor's inputs about the casts.
  bool operands = true;
  /// var_v (with operands): V is never transformed, so once per head, not per condition.
  bool var_v = true;
  /// var_k (with operands): K is shared by a kv group, so once per kv head, not per query head.
  bool var_k = true;
  /// shared_k and shared_v (predictor v2), each with var_k and var_v.
  bool shared = false;
};
/// Runs query head h of a prepared layer (causal), computing the parts asked for.
head_run run_prepared(const prepared_run& run, int h, const head_parts& parts = {});

/// Convenience: runs `kernel` under condition `cond` (index into kConditionNames) on one kv group:
/// q [g, n, d], k and v [n, d]. Returns g head runs.
std::vector<head_run> run_group(const attention::kernel_spec& kernel, int cond, const float* q, const float* k,
                                const float* v, int g, int n, int d, const attention::transform_options& topt = {});

}  // namespace attnum::study
