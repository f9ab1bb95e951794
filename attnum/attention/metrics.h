#pragma once
// Error metrics of design.md ("Conditions and metrics") and stage attribution: the project's one
// metrics module (attend and the head study report these, with these names and meanings). NaN in
// o gives NaN metrics (never hidden).
#include <cmath>
#include <string>
#include <vector>

#include "attnum/attention/engine.h"

namespace attnum::attention {

/// Returns ||o - ref||_F / ||ref||_F (n values each); NaN in o gives NaN (never hidden).
double rel_err(const float* o, const double* ref, size_t n);
/// Returns log1p(rel_err).
inline double log_err(double rel) { return std::log1p(rel); }
/// Returns, per row, max_c |o - ref| (rows of d values).
std::vector<double> row_max_err(const float* o, const double* ref, int rows, int d);
/// Returns the cosine similarity of o and ref (flattened); 0 when either is all zeros.
double cosine(const float* o, const double* ref, size_t n);

/// Every metric of one output o [rows, d] against its fp64 reference. The names are the result
/// files' and `attend --json`'s fields, with one meaning each:
struct error_metrics {
  double rel_err = 0;      ///< ||o - ref||_F / ||ref||_F
  double log_err = 0;      ///< log1p(rel_err)
  double cosine = 0;       ///< cosine similarity of o and ref (flattened)
  double max_row_err = 0;  ///< relative: max over rows of ||o_i - ref_i||_2 / ||ref_i||_2 (rows with ref_i = 0 skipped)
  double max_abs_err = 0;  ///< absolute: max over all elements of |o - ref|
};
/// Returns the metrics of o against ref (both [rows, d]).
error_metrics measure(const float* o, const double* ref, int rows, int d);

/// One stage of the attribution: the kernel with a single quantization point enabled.
struct stage_error {
  std::string stage;  ///< "qk_cast", "qk_acc", "p_cast", "v_cast", "pv_acc", "o_cast", "all"
  double rel_err = 0;
};

/// Returns the rel_err of query head h of `layer` under `spec` with each quantization point alone
/// (Q/K cast together as "qk_cast"), then with all of them ("all").
std::vector<stage_error> stage_attribution(const kernel_spec& spec, const layer_view& layer, int h,
                                           condition cond = condition::plain, bool causal = true,
                                           const transform_options& opts = {});

}  // namespace attnum::attention
