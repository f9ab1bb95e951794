#pragma once
// The loss study's row schemas, written once (docs/results.md, `attnum loss`): one field list per
// row type, each field with its name and value in one place, used by every writer of that row
// type (as study/rows.h keeps the head study's):
//  - loss_row (loss.json, loss.csv, the study's summary.json "loss");
//  - paired_row (loss_paired.json, loss_paired.csv, summary.json "loss_paired").
// JSON objects hold the fields by name (nlohmann::json keeps its keys sorted); the CSV columns
// are the same names in the same order.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnum::loss {

/// One output row per condition (docs/results.md, `attnum loss`).
struct loss_row {
  std::string condition, kernel, model, reference, linear;
  std::vector<std::string> knobs;         ///< applied to the kernel's preset
  std::string transform_dtype, rotation;  ///< of the kernel's transformed Q and K
  int64_t n_labels = 0;
  double ce_ref = 0, ce_variant = 0, ppl_ratio = 0, ppl_ratio_lo = 0, ppl_ratio_hi = 0;
  double kl_mean = 0, top1_agreement = 0;
  double dp_mean = 0, dp_rms = 0, dp_min = 0, dp_p01 = 0, dp_p10 = 0, dp_p50 = 0, dp_p90 = 0, dp_p99 = 0, dp_max = 0;
  /// The per-label KL(p_ref || p_var) distribution as llama.cpp's `--kl-divergence` reports it:
  /// median, 90th, 99th and 99.9th percentiles, extremes.
  double kl_p50 = 0, kl_p90 = 0, kl_p99 = 0, kl_p999 = 0, kl_min = 0, kl_max = 0;
  /// 95% intervals of kl_mean, kl_p50, kl_p90, top1_agreement and dp_rms: the same
  /// delete-one-window jackknife as ppl_ratio (log scale; logit for top1_agreement). kl_p99
  /// has none (NaN, with the reason): the jackknife of a high quantile undercovers
  /// (docs/model.md); nor do kl_p999, kl_min and kl_max.
  double kl_mean_lo = 0, kl_mean_hi = 0, kl_p50_lo = 0, kl_p50_hi = 0, kl_p90_lo = 0, kl_p90_hi = 0, kl_p99_lo = 0,
         kl_p99_hi = 0, top1_agreement_lo = 0, top1_agreement_hi = 0, dp_rms_lo = 0, dp_rms_hi = 0;
  /// Why an interval is not available (its bounds NaN, null in JSON): e.g. fewer than
  /// kMinLossWindows text windows, or zero width; empty when it is.
  std::string ppl_ratio_ci_reason, kl_mean_ci_reason, kl_p50_ci_reason, kl_p90_ci_reason, kl_p99_ci_reason,
      top1_agreement_ci_reason, dp_rms_ci_reason;
  /// The intervals: the delete-one-window jackknife with t(n_text_windows - 1) critical values,
  /// the text windows (sources x windows) as clusters, on a variance-stabilising scale (log for
  /// ppl_ratio). block_length is the moving-block length the per-token CE differences'
  /// autocorrelation would need (stats::block_length; recorded, not used by the intervals);
  /// n_blocks the independent units of the interval, the text windows.
  std::string ci_method;
  int n_text_windows = 0;
  int block_length = 0, n_blocks = 0, ci_dropped = 0;
};

/// A paired comparison of two conditions on the same labels (docs/results.md): differences of
/// per-label results, condition_a minus condition_b, with 95% delete-one-window jackknife
/// intervals (t(n_text_windows - 1), the text windows as clusters, on the differences' own
/// scale).
struct paired_row {
  std::string kernel, condition_a, condition_b, model;
  int64_t n_labels = 0;
  double delta_ce = 0, delta_ce_lo = 0, delta_ce_hi = 0;        ///< mean nll_a - nll_b
  double delta_kl = 0, delta_kl_lo = 0, delta_kl_hi = 0;        ///< kl_mean_a - kl_mean_b
  double delta_top1 = 0, delta_top1_lo = 0, delta_top1_hi = 0;  ///< top-1 agreement a - b
  double ce_diff_lag1_autocorrelation = 0;
  /// Why an interval is not available (bounds NaN, null in JSON); empty when it is.
  std::string delta_ce_ci_reason, delta_kl_ci_reason, delta_top1_ci_reason;
  std::string ci_method;
  int n_text_windows = 0;
  int block_length = 0, n_blocks = 0, ci_dropped = 0;
};

/// Returns a row as a JSON object (fields of docs/results.md plus tool_version).
nlohmann::json to_json(const loss_row& r);
/// The columns of loss.csv: the fields of to_json(loss_row), in the objects' (name) order.
std::vector<std::string> loss_columns();
/// Writes DIR/loss.json and DIR/loss.csv atomically (temp file + rename).
void write_loss_files(const std::string& dir, const std::vector<loss_row>& rows);

/// Returns a paired row as a JSON object (the fields of paired_row plus tool_version).
nlohmann::json to_json(const paired_row& r);
/// The columns of loss_paired.csv: the fields of to_json(paired_row), in the objects' (name) order.
std::vector<std::string> paired_columns();
/// Writes DIR/loss_paired.json (an array of paired rows) and DIR/loss_paired.csv atomically.
void write_paired_files(const std::string& dir, const std::vector<paired_row>& rows);

}  // namespace attnum::loss
