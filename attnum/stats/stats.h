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
#include <limits>
#include <optional>
#include <span>
#include <string>
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
confusion confusion_at(std::span<const double> score, std::span<const uint8_t> label, double threshold = 0.0);

/// Returns Spearman's rho (Pearson correlation of midranks); std::nullopt when n < 2 or either
/// side is constant.
std::optional<double> spearman(std::span<const double> x, std::span<const double> y);

/// A two-sided interval and how it was made (docs/study.md "Intervals").
struct interval {
  std::optional<double> lo, hi;
  int n_clusters = 0;  ///< independent units resampled (clusters, or blocks of a series)
  std::string method;  ///< e.g. "cluster-bootstrap-percentile", "cluster-jackknife-t", "none: ..."
  int dropped = 0;     ///< resamples (or leave-one-out fits) where the statistic was undefined
  /// Why lo and hi are empty (e.g. "zero width: every leave-one-cluster-out value equals the
  /// estimate"); empty when the interval is available.
  std::string reason;
};

/// The scale a jackknife interval is formed on and mapped back from.
enum class ci_scale {
  identity,  ///< estimate +- t se on the statistic itself, truncated to its range
  /// logit((theta - range_lo) / (range_hi - range_lo)): the logit for a statistic in [0, 1]
  /// (AUC, precision, recall), 2 atanh(theta) (Fisher's z, doubled) for one in [-1, 1]
  /// (Spearman). Needs a finite range; see bootstrap_options::logit_count for values on the
  /// range's boundary.
  logit,
  /// log(theta), for a positive statistic (a ratio, a mean KL, an RMS): no interval when the
  /// estimate or a leave-one-out value is <= 0.
  log,
};

/// Options of the cluster bootstrap (and of cluster_interval).
struct bootstrap_options {
  int n_resamples = 1000;
  uint64_t seed = 0xb0075ULL;
  double level = 0.95;
  /// The statistic's range (e.g. [0, 1] for an AUC): a jackknife-t interval is truncated to it.
  double range_lo = -std::numeric_limits<double>::infinity();
  double range_hi = std::numeric_limits<double>::infinity();
  /// Jackknife only: the scale of the interval, and whether it is centred on the jackknife's
  /// bias-corrected estimate G h(theta) - (G-1) mean_g h(theta_(g)) (on that scale) instead of
  /// h(theta).
  ci_scale scale = ci_scale::identity;
  bool bias_correct = false;
  /// Logit scale: the count n behind the statistic (e.g. the predicted-harmed heads behind a
  /// precision); > 0 uses the empirical logit of (u n + 1/2) / (n + 1), u the position in the
  /// range, which is finite on the boundary; 0 the plain logit (no interval when a value lies on
  /// the boundary).
  double logit_count = 0;
};

/// A statistic evaluated on a resample: receives the selected item indices (with repeats).
using statistic_fn = std::function<std::optional<double>(std::span<const int> idx)>;

/// Returns the p-th quantile (p in [0, 1]) of `v` in any order, interpolating linearly between
/// order statistics (R's type 7, numpy's default); NaN for an empty v.
double percentile(std::vector<double> v, double p);

/// Returns the percentile interval of `stat` under resampling whole clusters with replacement
/// (cluster[i] is item i's cluster id). Resamples where the statistic is undefined are skipped
/// and counted (`dropped`); the interval is undefined when fewer than half the resamples give a
/// value. Deterministic: the same inputs and seed give the same interval on any machine (own
/// RNG, no std distributions). Its coverage falls short of nominal with few clusters (it
/// ignores the (G-1)/G shrinkage and the t tails): use cluster_interval.
interval cluster_bootstrap(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt = {});

/// Fewest clusters for which cluster_interval uses the percentile cluster bootstrap; below it
/// the delete-one-cluster jackknife with t(G-1) critical values (docs/study.md "Intervals").
inline constexpr int kMinBootstrapClusters = 30;

/// Returns the delete-one-cluster jackknife interval: with h the scale's map (opt.scale),
/// centre +- t(level, G-1) * se_J on that scale, mapped back, where se_J^2 = (G-1)/G
/// sum_g (h(theta_(g)) - mean)^2 (the CR3 / jackknife variance; Cameron & Miller 2015) and the
/// centre is h(theta), or the bias-corrected G h(theta) - (G-1) mean (opt.bias_correct);
/// truncated to [range_lo, range_hi]. Undefined (lo, hi empty, `reason` says why, `dropped`
/// counting the leave-one-out fits without a value) when the statistic is undefined on the
/// whole sample or on any leave-one-out sample, with fewer than 2 clusters, when every
/// leave-one-out value equals the estimate (a zero-width interval is no interval), or on the
/// plain logit scale (logit_count 0) when a value lies on the range's boundary.
interval cluster_jackknife_t(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt = {});

/// The study's interval: the jackknife-t with fewer than kMinBootstrapClusters clusters, the
/// percentile cluster bootstrap with more; none (method says why) with fewer than 2 clusters.
/// A zero-width result (lo == hi) is reported as no interval, with the reason.
interval cluster_interval(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt = {});

/// The fewest events (e.g. harmed heads) a cluster must hold to count towards an interval, and
/// the fewest such clusters: below them the study reports no interval (docs/study.md
/// "Intervals": a statistic whose events sit in one cluster has no between-cluster spread).
inline constexpr int kMinEventsPerCluster = 2;
inline constexpr int kMinEventClusters = 2;

/// Returns the number of clusters (cluster[i] is item i's id) holding at least
/// kMinEventsPerCluster items with event[i] set.
int clusters_with_events(std::span<const int> cluster, std::span<const uint8_t> event);

/// A statistic of a series evaluated on a resample given as its item indices (with repeats).
/// Returns the percentile interval of `stat` under the moving-block bootstrap of a series of n
/// items (Kunsch 1989): each resample concatenates blocks of `block_len` consecutive items
/// whose starts are uniform in [0, n - block_len], trimmed to n items. n_clusters reports the
/// blocks per resample; undefined resamples are counted in `dropped`.
/// segment_len > 0: the series is consecutive segments of segment_len items (the last may be
/// shorter), e.g. one per text window, and no block crosses from one segment into the next:
/// starts are uniform over the positions whose whole block lies inside one segment
/// (block_len <= segment_len). segment_len 0 or >= n is one series (the same resamples).
interval block_bootstrap(int n, int block_len, const statistic_fn& stat, const bootstrap_options& opt = {},
                         int segment_len = 0);

/// Returns the sample autocorrelation of x at lags 0..max_lag (biased estimator, divisor n).
std::vector<double> autocorrelation(std::span<const double> x, int max_lag);

/// Returns the block length of the moving-block bootstrap for a series x: twice the first lag
/// at which the sample autocorrelation falls inside +-2/sqrt(n) (the dependence must fit
/// inside a block), at least ceil(n^(1/3)) (the order that minimises the variance estimator's
/// error, Hall, Horowitz & Jing 1995), at most n/4.
int block_length(std::span<const double> x);

/// Returns the quantile function of Student's t with df > 0 degrees of freedom at p in (0, 1)
/// (Boost.Math).
double student_t_quantile(double p, double df);

/// Returns the two-sided p-value of a t statistic with df > 0 degrees of freedom.
double t_test_p_value(double t, double df);

/// Returns the power of the two-sided t-test at `level` (e.g. 0.05) with df degrees of freedom
/// when the true effect is `ncp` standard errors: P(|T'| > t(1 - level/2, df)), T' noncentral t
/// (Boost.Math).
double t_test_power(double ncp, double df, double level = 0.05);

/// Returns the smallest effect, in standard errors, that the two-sided t-test at `level` with
/// df degrees of freedom detects with probability `power` (the noncentrality where
/// t_test_power reaches it; bisection to 1e-10).
double detectable_effect_se(double df, double power = 0.8, double level = 0.05);

/// Returns which of the p-values the Benjamini-Hochberg procedure rejects at false-discovery
/// rate q: all p_(i) with i <= k, k the largest rank with p_(k) <= k q / m (m = p.size()).
std::vector<uint8_t> benjamini_hochberg(std::span<const double> p, double q = 0.05);

/// Mean and standard error (sd / sqrt(n), sd with divisor n - 1) of x; se empty when n < 2.
struct mean_se {
  double mean = 0;
  std::optional<double> se;
};
mean_se mean_and_se(std::span<const double> x);

/// SplitMix64: the project's one generator (core/random.h).
using splitmix64 = core::splitmix64;

}  // namespace attnum::stats
