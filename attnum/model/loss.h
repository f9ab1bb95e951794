#pragma once
// The loss study: teacher-forced cross-entropy of a model whose every attention layer runs an
// emulated kernel under a condition, against a reference attention, over held-out labels.
//
// Windows: for window w of a token stream, inputs are ids[wN .. wN+N-1] and labels
// ids[wN+1 .. wN+N] (each window starts a fresh context at position 0).
//
// Scale-out: the work is a list of units (source, window, condition). Each unit's
// per-label results are computed independently (compute_window runs the reference once per
// window and any subset of its conditions), and summarize() merges any collection of unit
// results in a canonical order (condition, source, window), so a sharded or MPI run that
// gathers every unit gives bit-identical rows to a single run.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnum/attention/engine.h"
#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

class reference_logits;

/// What to measure.
struct loss_params {
  std::vector<std::vector<int>> sources;                     ///< token id streams (one per text / id file)
  std::vector<std::string> source_names;                     ///< for metadata
  int n_tokens = 1024;                                       ///< N, labels per window
  int windows = 1;                                           ///< K windows per source
  attention::kernel_spec kernel = attention::preset("fa3");  ///< the variant's kernel (resolved)
  std::vector<std::string> knobs;  ///< knobs applied to it (recorded; a merge re-applies them)
  transforms::rotation rotation;   ///< of Q and K under rotate and center+rotate
  std::vector<std::string> conditions = {"plain"};
  std::string reference = "bf16";  ///< "bf16" (emulated native BF16 attention) or "fp64"
  linear_precision linear = linear_precision::bf16;
  /// Recorded in shard and checkpoint parameters; the intervals (a jackknife over text windows)
  /// draw no resamples, so they do not use them.
  int bootstrap_samples = 1000;
  uint64_t bootstrap_seed = 0x105505EEDULL;
  /// The reference's logits read from a file (reference_logits.h) instead of computed: null
  /// computes them (the reference forward of every window).
  std::shared_ptr<const reference_logits> reference_file;
};

/// One work unit.
struct loss_unit {
  int source = 0, window = 0, condition = 0;  ///< condition: index into loss_params::conditions
};

/// Per-label results of one unit (labels in window order).
struct unit_result {
  loss_unit unit;
  std::vector<double> nll_ref, nll_var;  ///< -log p(label) under reference / variant
  std::vector<double> kl;                ///< KL(p_ref || p_var) over the vocabulary
  std::vector<double> dp;                ///< p_var(label) - p_ref(label)
  std::vector<uint8_t> top1_same;        ///< argmax agrees
};

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

/// The fewest text windows (sources x windows) for an interval over them: with fewer, every
/// loss interval is reported as not available (t(1) is 12.7, and one window's spread is no
/// estimate of another's).
inline constexpr int kMinLossWindows = 3;

/// The comparisons loss reports when both conditions ran: center vs plain, rotate vs plain,
/// center+rotate vs rotate, center+rotate vs plain.
inline constexpr const char* kPairedComparisons[][2] = {
    {"center", "plain"}, {"rotate", "plain"}, {"center+rotate", "rotate"}, {"center+rotate", "plain"}};

/// Throws attnum::error unless every source holds windows*N+1 ids and N fits the context.
void validate(const loss_params& p, const weights& w);

/// Returns all units in canonical order (condition-major, then source, then window).
std::vector<loss_unit> all_units(const loss_params& p);

/// Returns the units of shard `shard` of `n_shards` (round-robin over windows, so every shard
/// runs whole windows and computes each reference once): deterministic.
std::vector<loss_unit> shard_units(const loss_params& p, int shard, int n_shards);

/// The input ids of window `window` of source `source` (positions 0..N-1).
std::span<const int> window_inputs(const loss_params& p, int source, int window);

/// The reference forward's logits [N * vocab] of a window's inputs (p.reference attention,
/// p.linear precision): what compute_window compares every condition with.
std::vector<float> reference_forward(const weights& w, const loss_params& p, std::span<const int> inputs);

/// Computes the given units of one window (all share source and window): the reference forward
/// once (or its logits from p.reference_file), then one forward per unit's condition. `w` must already be bf16-rounded
/// when p.linear is bf16 (see round_to_bf16).
std::vector<unit_result> compute_window(const weights& w, const loss_params& p, const std::vector<loss_unit>& units);

/// Computes a list of units (any order), grouping them by window.
std::vector<unit_result> compute_units(const weights& w, const loss_params& p, const std::vector<loss_unit>& units);

/// Merges unit results (any order, any split) into one row per condition.
/// Throws attnum::error when a unit is missing or duplicated.
std::vector<loss_row> summarize(const loss_params& p, const std::string& model_id, std::vector<unit_result> results);

/// Returns the paired rows (kPairedComparisons whose both conditions ran) of the same unit
/// results summarize() takes; deterministic in the same way. Throws like summarize.
std::vector<paired_row> summarize_paired(const loss_params& p, const std::string& model_id,
                                         std::vector<unit_result> results);

/// Runs the whole study in this process: validate, compute_units(all_units), summarize.
std::vector<loss_row> run_loss(const weights& w, const loss_params& p);
/// As run_loss, and the paired rows of the same units into `paired`.
std::vector<loss_row> run_loss(const weights& w, const loss_params& p, std::vector<paired_row>& paired);

/// Returns a paired row as a JSON object (the fields of paired_row plus tool_version).
nlohmann::json to_json(const paired_row& r);
/// Writes DIR/loss_paired.json (an array of paired rows) and DIR/loss_paired.csv atomically.
void write_paired_files(const std::string& dir, const std::vector<paired_row>& rows);

/// Returns a row as a JSON object (fields of docs/results.md plus tool_version).
nlohmann::json to_json(const loss_row& r);
/// Unit results as JSON (round-trip exact: shards write these, the merge reads them).
nlohmann::json to_json(const unit_result& r);
unit_result unit_result_from_json(const nlohmann::json& j);

/// Returns a shard file: the parameters a merge needs (model, kernel, conditions, reference,
/// linear precision, N, K, sources, bootstrap) plus the shard's unit results.
nlohmann::json shard_to_json(const loss_params& p, const std::string& model_id, int shard, int n_shards,
                             const std::vector<unit_result>& results);

/// Merges shard files (any order) into the rows a single run gives, bit for bit. Throws
/// attnum::error when the shards disagree on parameters, or a unit is missing or duplicated.
std::vector<loss_row> merge_shards(const std::vector<nlohmann::json>& shards);

/// Writes DIR/loss-shard-I-of-N.json atomically.
void write_shard_file(const std::string& dir, int shard, int n_shards, const nlohmann::json& j);

/// Reads the shard files in `dirs` (every loss-shard-*.json) and writes DIR/loss.json and
/// DIR/loss.csv as a single run would; returns the rows.
std::vector<loss_row> merge_shard_dirs(const std::vector<std::string>& dirs, const std::string& out);

/// Writes DIR/loss.json and DIR/loss.csv atomically (temp file + rename).
void write_loss_files(const std::string& dir, const std::vector<loss_row>& rows);

/// Per-label statistics of one position: logits of the reference and the variant ([vocab]).
/// Exposed for tests. Returns {nll_ref, nll_var, kl, dp, top1_same}.
struct label_stat {
  double nll_ref, nll_var, kl, dp;
  bool top1_same;
};
label_stat compare_logits(const float* ref, const float* var, int vocab, int label);

}  // namespace attnum::model
