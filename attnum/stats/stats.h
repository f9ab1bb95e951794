#pragma once
// Statistics of the head study: ranking (ROC AUC), classification at a fixed threshold
// (confusion counts, precision, recall), rank correlation (Spearman), and bootstrap intervals
// that resample whole clusters (models, or model x layer), because heads within a model share
// weights, activations and texts and are not independent draws.
//
// Undefined statistics (AUC with one class only, precision with no positive call, Spearman of a
// constant) are std::nullopt, never NaN or a made-up value.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "attnum/core/random.h"

namespace attnum::stats {

/// Returns the midranks (1-based; tied values share the mean of their ranks) of x.
std::vector<double> midranks(std::span<const double> x);

/// Returns the ROC AUC of `score` for the binary `label` (Mann-Whitney U / (n_pos n_neg), ties
/// counted 1/2). std::nullopt when either class is empty.
/// Precondition: score.size() == label.size().
std::optional<double> roc_auc(std::span<const double> score, std::span<const uint8_t> label);

/// Confusion counts of the call `score > threshold` against `label`.
struct confusion {
  int64_t tp = 0, fp = 0, fn = 0, tn = 0;
  /// tp / (tp + fp); std::nullopt with no positive call.
  std::optional<double> precision() const;
  /// tp / (tp + fn); std::nullopt with no positive label.
  std::optional<double> recall() const;
};

/// Returns the confusion counts of `score > threshold` (strict) against `label`.
confusion confusion_at(std::span<const double> score, std::span<const uint8_t> label,
                       double threshold = 0.0);

/// Returns Spearman's rho (Pearson correlation of midranks); std::nullopt when n < 2 or either
/// side is constant.
std::optional<double> spearman(std::span<const double> x, std::span<const double> y);

/// A two-sided percentile interval.
struct interval {
  std::optional<double> lo, hi;
};

/// Options of the cluster bootstrap.
struct bootstrap_options {
  int n_resamples = 1000;
  uint64_t seed = 0xb0075ULL;
  double level = 0.95;
};

/// A statistic evaluated on a resample: receives the selected item indices (with repeats).
using statistic_fn = std::function<std::optional<double>(std::span<const int> idx)>;

/// Returns the percentile interval of `stat` under resampling whole clusters with replacement
/// (cluster[i] is item i's cluster id). Resamples where the statistic is undefined are skipped;
/// the interval is undefined when fewer than half the resamples give a value. Deterministic:
/// the same inputs and seed give the same interval on any machine (own RNG, no std
/// distributions).
interval cluster_bootstrap(std::span<const int> cluster, const statistic_fn& stat,
                           const bootstrap_options& opt = {});

/// SplitMix64: the project's one generator (core/random.h).
using splitmix64 = core::splitmix64;

}  // namespace attnum::stats
