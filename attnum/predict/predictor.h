#pragma once
// The rounding-noise predictor (design.md "The predictor"; docs/predictor.md derives it).
//
// Every quantized element is modelled as its exact value plus an independent zero-mean error of
// variance u^2/12, u = the grid spacing of the scaled cast at that value (element_variance).
// Propagated to first order through scores and softmax, with s_ij = q_i.k_j / sqrt(d):
//   d o_i = sum_j P_ij d s_ij (v_j - o_i) + sum_j P_ij e(v_j) + sum_j e(P_ij) (v_j [- o_i])
// plus the output cast. E||d o_i||^2 splits into independent terms (K, Q, V, P, O); the Q term
// is shared over j and is estimated without bias with seeded Rademacher probes.
// predicted rel_err = sqrt(sum_i E||d o_i||^2) / ||O||_F. No fitted parameters.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attnum/formats/format.h"

namespace attnum::predict {

/// The predictor's version, recorded in every result file. Bump on any change of the model.
/// v1: independent rounding errors (the default).
inline constexpr std::string_view kPredictorVersion = "rn2-transform-dtype-2026.12";
/// v2 (docs/predictor.md "v2 (pre-registered)"): v1 plus the covariance of the rounding errors of
/// values of one channel on one grid (shared_k, shared_v below).
inline constexpr std::string_view kPredictorVersionV2 = "rn3-shared-rounding-2026.12";

/// Which model: `--predictor-version v1|v2`.
enum class version : uint8_t { v1, v2 };
/// Returns the recorded version string of v (kPredictorVersion, kPredictorVersionV2).
std::string_view version_string(version v);
/// Returns "v1" or "v2".
std::string_view version_name(version v);
/// Returns the version named "v1" or "v2"; throws attnum::error naming the flag otherwise.
version parse_version(std::string_view name);
/// Returns the suffix that records v in a result's command line: empty for v1 (so v1's recorded
/// commands are those of before --predictor-version existed), else " --predictor-version v2".
std::string command_suffix(version v);
/// Returns the version whose recorded string is s (nullopt for another string).
std::optional<version> version_from_string(std::string_view s);

/// v2's shared rounding of one channel: the mean over the n(n-1) ordered pairs j != j' of the
/// covariance of the rounding errors of x[j] and x[j'] under a uniformly random grid phase:
/// u^2 (1/12 - t (1 - t) / 2), t = frac(|x_j - x_j'| / u), for two values on the same grid
/// (equal spacings u[j] == u[j'] > 0), and 0 for values on different grids or with u = 0 (not
/// rounded on a grid, e.g. flushed to 0 deterministically). Exact, O(n log n).
double mean_pair_covariance(const double* x, const double* u, int n);

/// Returns the grid spacing of format f at |x| (unscaled grid; subnormal spacing below the
/// normal range; int8: 1; fp32: float spacing).
double grid_spacing(formats::format f, double x);

/// Returns the variance of the rounding error of a scaled cast of x (dequantisation scale
/// `scale`): (scale * spacing(x / scale))^2 / 12, except that a value below half the smallest
/// spacing rounds to 0 deterministically, so its error variance is x^2.
double element_variance(formats::format f, double x, double scale);

/// Fills out[c] = element_variance(f, x[c], row_scale * col_scale[c]) for c < n: one token row
/// of a cast operand whose dequantisation scale is a row scale times per-channel scales (the
/// float product, as the engine forms it); the format's grid is looked up once.
void row_variances(formats::format f, const float* x, float row_scale, const float* col_scale, int n, double* out);

/// How the P matrix is cast (from the kernel_spec).
struct p_cast_model {
  bool enabled = true;
  formats::format fmt = formats::format::e4m3fn;
  double scale = 256;             ///< S: the cast sees S * exp(s_ij - m_i) (2^offset or multiply)
  bool rowsum_from_cast = false;  ///< l from the cast P (error then has the (v_j - o_i) form)
};

/// Inputs for one query head. Shapes: p [n_q, n_kv] (ideal normalized softmax, causal zeros),
/// o [n_q, d] (ideal output), row_sum [n_q] (sum_j exp(s_ij - max_j s_ij)), q [n_q, d] and
/// k [n_kv, d] as the kernel casts them (after the transform), v [n_kv, d], and the per-element
/// error variances var_q, var_k, var_v (same shapes; nullptr = that operand is not cast).
struct head_inputs {
  int n_q = 0, n_kv = 0, d = 0;
  const double* p = nullptr;
  const double* o = nullptr;
  const double* row_sum = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const double* var_q = nullptr;
  const double* var_k = nullptr;
  const double* var_v = nullptr;
  /// v2 [d]: each channel's mean pair covariance (mean_pair_covariance) of K's and V's rounding
  /// errors. nullptr (v1): independent errors. K's shared part cancels in softmax (its variance
  /// is taken out of var_k); V's adds for every row (sum_j P_ij = 1).
  const double* shared_k = nullptr;
  const double* shared_v = nullptr;
  p_cast_model p_cast;
  bool o_cast = true;
  formats::format out_fmt = formats::format::bf16;
};

/// Options of the predictor.
struct options {
  int n_probes = 4;  ///< Rademacher probes for the Q term
  uint64_t probe_seed = 0x9b0beULL;
  /// The model; predict_terms itself follows the inputs (shared_k, shared_v): this says whether
  /// the caller (study/emulate.h) provides them.
  predict::version version = predict::version::v1;
};

/// Expected squared output errors (summed over the head's rows) per term, and the result.
struct prediction {
  double k = 0, q = 0, v = 0, p = 0, o = 0;
  double total = 0;    ///< sum of the terms: E ||O_kernel - O||_F^2
  double o_norm2 = 0;  ///< ||O||_F^2
  double rel_err = 0;  ///< sqrt(total / o_norm2)
};

/// Returns the predicted error of one head. Deterministic (seeded probes, fixed order).
prediction predict_head(const head_inputs& in, const options& opt = {});

/// What depends only on the ideal attention of a head (P, O, V), shared by every condition and
/// kernel: built once per head and text, then passed to predict_terms for each run.
struct head_context;
struct head_context_deleter {
  void operator()(head_context* c) const;
};
using context_ptr = std::unique_ptr<head_context, head_context_deleter>;
/// Returns the context of in.p, in.o, in.row_sum, in.v (other fields unused).
context_ptr make_context(const head_inputs& in);

/// Which terms predict_terms computes (the others are left 0).
struct term_mask {
  bool k = true, q = true, v = true, p = true, o = true;
};
/// Returns the selected terms for `in` (whose p, o, row_sum, v must be the context's);
/// total and rel_err cover the selected terms only.
prediction predict_terms(const head_context& ctx, const head_inputs& in, const options& opt = {}, term_mask mask = {});

}  // namespace attnum::predict
