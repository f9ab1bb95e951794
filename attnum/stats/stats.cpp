#include "attnum/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attnum/core/error.h"

namespace attnum::stats {

std::vector<double> midranks(std::span<const double> x) {
  const size_t n = x.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && x[order[j + 1]] == x[order[i]]) ++j;
    // Positions i..j (0-based) tie: each gets the mean of ranks i+1..j+1.
    const double r = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t t = i; t <= j; ++t) rank[order[t]] = r;
    i = j + 1;
  }
  return rank;
}

std::optional<double> roc_auc(std::span<const double> score, std::span<const uint8_t> label) {
  ATTNUM_ASSERT(score.size() == label.size(), "roc_auc: {} scores, {} labels", score.size(),
                label.size());
  const std::vector<double> r = midranks(score);
  double n_pos = 0, rank_sum = 0;
  for (size_t i = 0; i < r.size(); ++i)
    if (label[i]) {
      n_pos += 1;
      rank_sum += r[i];
    }
  const double n_neg = static_cast<double>(r.size()) - n_pos;
  if (n_pos == 0 || n_neg == 0) return std::nullopt;
  // U = rank sum of positives - n_pos (n_pos + 1) / 2; midranks count each tie as 1/2.
  return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg);
}

std::optional<double> confusion::precision() const {
  if (tp + fp == 0) return std::nullopt;
  return static_cast<double>(tp) / static_cast<double>(tp + fp);
}

std::optional<double> confusion::recall() const {
  if (tp + fn == 0) return std::nullopt;
  return static_cast<double>(tp) / static_cast<double>(tp + fn);
}

confusion confusion_at(std::span<const double> score, std::span<const uint8_t> label,
                       double threshold) {
  ATTNUM_ASSERT(score.size() == label.size(), "confusion_at: size mismatch");
  confusion c;
  for (size_t i = 0; i < score.size(); ++i) {
    const bool call = score[i] > threshold;
    if (call && label[i]) ++c.tp;
    else if (call) ++c.fp;
    else if (label[i]) ++c.fn;
    else ++c.tn;
  }
  return c;
}

std::optional<double> spearman(std::span<const double> x, std::span<const double> y) {
  ATTNUM_ASSERT(x.size() == y.size(), "spearman: size mismatch");
  const size_t n = x.size();
  if (n < 2) return std::nullopt;
  const std::vector<double> rx = midranks(x), ry = midranks(y);
  const double mean = (static_cast<double>(n) + 1) / 2;  // midranks always average (n+1)/2
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

namespace {
// Percentile of sorted values with linear interpolation (type 7, as numpy's default).
double percentile(const std::vector<double>& sorted, double p) {
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return sorted[lo] + f * (sorted[hi] - sorted[lo]);
}
}  // namespace

interval cluster_bootstrap(std::span<const int> cluster, const statistic_fn& stat,
                           const bootstrap_options& opt) {
  // Group item indices by cluster id, clusters in ascending id order (deterministic).
  std::vector<int> ids(cluster.begin(), cluster.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::vector<int>> members(ids.size());
  for (size_t i = 0; i < cluster.size(); ++i) {
    const size_t c = std::lower_bound(ids.begin(), ids.end(), cluster[i]) - ids.begin();
    members[c].push_back(static_cast<int>(i));
  }
  interval out;
  if (members.empty()) return out;
  splitmix64 rng(opt.seed);
  std::vector<double> values;
  std::vector<int> idx;
  for (int b = 0; b < opt.n_resamples; ++b) {
    idx.clear();
    for (size_t c = 0; c < members.size(); ++c) {
      const auto& m = members[rng.below(members.size())];
      idx.insert(idx.end(), m.begin(), m.end());
    }
    if (auto v = stat(idx); v && std::isfinite(*v)) values.push_back(*v);
  }
  if (values.size() * 2 < static_cast<size_t>(opt.n_resamples) || values.empty()) return out;
  std::sort(values.begin(), values.end());
  const double a = (1 - opt.level) / 2;
  out.lo = percentile(values, a);
  out.hi = percentile(values, 1 - a);
  return out;
}

}  // namespace attnum::stats
