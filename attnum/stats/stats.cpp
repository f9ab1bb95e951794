#include "attnum/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

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
  ATTNUM_ASSERT(score.size() == label.size(), "roc_auc: {} scores, {} labels", score.size(), label.size());
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

confusion confusion_at(std::span<const double> score, std::span<const uint8_t> label, double threshold) {
  ATTNUM_ASSERT(score.size() == label.size(), "confusion_at: size mismatch");
  confusion c;
  for (size_t i = 0; i < score.size(); ++i) {
    const bool call = score[i] > threshold;
    if (call && label[i])
      ++c.tp;
    else if (call)
      ++c.fp;
    else if (label[i])
      ++c.fn;
    else
      ++c.tn;
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

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double a = v[lo];
  if (lo + 1 >= v.size()) return a;
  // The next order statistic: the least of the values the selection put above v[lo].
  const double b = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end());
  return a + (pos - static_cast<double>(lo)) * (b - a);
}

namespace {
// Item indices grouped by cluster id, clusters in ascending id order (deterministic).
std::vector<std::vector<int>> cluster_members(std::span<const int> cluster) {
  std::vector<int> ids(cluster.begin(), cluster.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::vector<int>> members(ids.size());
  for (size_t i = 0; i < cluster.size(); ++i) {
    const size_t c = std::lower_bound(ids.begin(), ids.end(), cluster[i]) - ids.begin();
    members[c].push_back(static_cast<int>(i));
  }
  return members;
}

// Percentile interval of the defined resample values (fewer than half defined: undefined).
void percentile_interval(std::vector<double>& values, int n_resamples, double level, interval& out) {
  out.dropped = n_resamples - static_cast<int>(values.size());
  if (values.size() * 2 < static_cast<size_t>(n_resamples) || values.empty()) return;
  const double a = (1 - level) / 2;
  out.lo = percentile(values, a);
  out.hi = percentile(values, 1 - a);
}
}  // namespace

interval cluster_bootstrap(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt) {
  const std::vector<std::vector<int>> members = cluster_members(cluster);
  interval out;
  out.n_clusters = static_cast<int>(members.size());
  out.method = "cluster-bootstrap-percentile";
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
  percentile_interval(values, opt.n_resamples, opt.level, out);
  return out;
}

interval cluster_jackknife_t(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt) {
  const std::vector<std::vector<int>> members = cluster_members(cluster);
  const int g = static_cast<int>(members.size());
  interval out;
  out.n_clusters = g;
  out.method = "cluster-jackknife-t";
  if (g < 2) {
    out.method = "none: fewer than 2 clusters";
    out.reason = "fewer than 2 clusters";
    return out;
  }
  std::vector<int> all(cluster.size());
  std::iota(all.begin(), all.end(), 0);
  const std::optional<double> full = stat(all);
  std::vector<double> loo;
  std::vector<int> idx;
  for (int leave = 0; leave < g; ++leave) {
    idx.clear();
    for (int c = 0; c < g; ++c)
      if (c != leave) idx.insert(idx.end(), members[c].begin(), members[c].end());
    if (auto v = stat(idx); v && std::isfinite(*v))
      loo.push_back(*v);
    else
      ++out.dropped;
  }
  if (!full || !std::isfinite(*full)) {
    out.reason = "the statistic is undefined on the whole sample";
    return out;
  }
  if (out.dropped > 0) {
    out.reason = fmt::format("the statistic is undefined without {} of the {} clusters", out.dropped, g);
    return out;
  }
  if (std::all_of(loo.begin(), loo.end(), [&](double v) { return v == *full; })) {
    out.reason = "zero width: every leave-one-cluster-out value equals the estimate";
    return out;
  }
  const bool logit = opt.scale == ci_scale::logit;
  if (logit) {
    ATTNUM_ASSERT(std::isfinite(opt.range_lo) && std::isfinite(opt.range_hi) && opt.range_lo < opt.range_hi,
                  "cluster_jackknife_t: the logit scale needs a finite range");
    if (opt.logit_count <= 0 && (*full <= opt.range_lo || *full >= opt.range_hi)) {
      out.reason =
          fmt::format("the estimate {} is on the boundary of the range [{}, {}]", *full, opt.range_lo, opt.range_hi);
      return out;
    }
    if (opt.logit_count <= 0 &&
        std::any_of(loo.begin(), loo.end(), [&](double v) { return v <= opt.range_lo || v >= opt.range_hi; })) {
      out.reason = fmt::format("a leave-one-cluster-out value is on the boundary of the range [{}, {}]", opt.range_lo,
                               opt.range_hi);
      return out;
    }
  }
  if (opt.scale == ci_scale::log &&
      (*full <= 0 || std::any_of(loo.begin(), loo.end(), [](double v) { return v <= 0; }))) {
    out.reason = "a value <= 0 has no log scale";
    return out;
  }
  // The empirical logit: u = (theta - lo) / w squeezed to (u n + 1/2) / (n + 1), finite on the
  // boundary (Cox 1970); n = 0 is the plain logit.
  const double w = opt.range_hi - opt.range_lo, n = std::max(0.0, opt.logit_count);
  const bool log_scale = opt.scale == ci_scale::log;
  auto h = [&](double v) {
    if (log_scale) return std::log(v);
    if (!logit) return v;
    double u = (v - opt.range_lo) / w;
    if (n > 0) u = (u * n + 0.5) / (n + 1);
    return std::log(u / (1 - u));
  };
  auto h_inv = [&](double z) {
    if (log_scale) return std::exp(z);
    if (!logit) return z;
    const double u = 1 / (1 + std::exp(-z));
    return opt.range_lo + w * (n > 0 ? (u * (n + 1) - 0.5) / n : u);
  };
  double mean = 0;
  for (double& v : loo) mean += v = h(v);
  mean /= g;
  double ss = 0;
  for (double v : loo) ss += (v - mean) * (v - mean);
  const double se = std::sqrt(ss * (g - 1) / g);
  const double centre = opt.bias_correct ? g * h(*full) - (g - 1) * mean : h(*full);
  const double t = student_t_quantile(0.5 + opt.level / 2, g - 1);
  out.lo = std::max(opt.range_lo, h_inv(centre - t * se));
  out.hi = std::min(opt.range_hi, h_inv(centre + t * se));
  if (!(*out.lo < *out.hi)) {  // a spread too small to show at double precision
    out.lo.reset(), out.hi.reset();
    out.reason = "zero width: the leave-one-cluster-out values barely differ";
  }
  return out;
}

interval cluster_interval(std::span<const int> cluster, const statistic_fn& stat, const bootstrap_options& opt) {
  const int g = static_cast<int>(cluster_members(cluster).size());
  if (g < kMinBootstrapClusters) return cluster_jackknife_t(cluster, stat, opt);
  interval out = cluster_bootstrap(cluster, stat, opt);
  if (!out.lo) {
    out.reason = fmt::format("undefined in {} of {} resamples", out.dropped, opt.n_resamples);
  } else if (*out.lo == *out.hi) {
    out.lo.reset(), out.hi.reset();
    out.reason = "zero width: every resample gives the estimate";
  }
  return out;
}

int clusters_with_events(std::span<const int> cluster, std::span<const uint8_t> event) {
  ATTNUM_ASSERT(cluster.size() == event.size(), "clusters_with_events: size mismatch");
  int n = 0;
  for (const auto& m : cluster_members(cluster)) {
    int k = 0;
    for (int i : m) k += event[i] != 0;
    n += k >= kMinEventsPerCluster;
  }
  return n;
}

interval block_bootstrap(int n, int block_len, const statistic_fn& stat, const bootstrap_options& opt,
                         int segment_len) {
  if (segment_len <= 0 || segment_len > n) segment_len = n;
  ATTNUM_ASSERT(n >= 1 && block_len >= 1 && block_len <= segment_len, "block_bootstrap: n {}, block {}, segment {}", n,
                block_len, segment_len);
  interval out;
  out.n_clusters = (n + block_len - 1) / block_len;
  out.method = segment_len == n ? fmt::format("moving-block-bootstrap-percentile (block {})", block_len)
                                : fmt::format("moving-block-bootstrap-percentile (block {}, within segments of {})",
                                              block_len, segment_len);
  // The admissible starts, numbered segment by segment: segment k contributes
  // len_k - block_len + 1 of them (none when it is shorter than a block).
  const uint64_t per_full = static_cast<uint64_t>(segment_len - block_len + 1);
  const int n_full = n / segment_len, tail = n - n_full * segment_len;
  const uint64_t n_starts =
      per_full * static_cast<uint64_t>(n_full) + (tail >= block_len ? static_cast<uint64_t>(tail - block_len + 1) : 0);
  splitmix64 rng(opt.seed);
  std::vector<double> values;
  std::vector<int> idx;
  for (int b = 0; b < opt.n_resamples; ++b) {
    idx.clear();
    while (static_cast<int>(idx.size()) < n) {
      const uint64_t r = rng.below(n_starts);
      const int s = static_cast<int>(r / per_full) * segment_len + static_cast<int>(r % per_full);
      for (int j = 0; j < block_len && static_cast<int>(idx.size()) < n; ++j) idx.push_back(s + j);
    }
    if (auto v = stat(idx); v && std::isfinite(*v)) values.push_back(*v);
  }
  percentile_interval(values, opt.n_resamples, opt.level, out);
  return out;
}

std::vector<double> autocorrelation(std::span<const double> x, int max_lag) {
  const size_t n = x.size();
  std::vector<double> r(static_cast<size_t>(std::max(max_lag, 0)) + 1, 0.0);
  if (n == 0) return r;
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  double c0 = 0;
  for (double v : x) c0 += (v - mean) * (v - mean);
  if (c0 == 0) {
    r[0] = 1;
    return r;
  }
  for (size_t k = 0; k < r.size(); ++k) {
    double c = 0;
    for (size_t i = 0; i + k < n; ++i) c += (x[i] - mean) * (x[i + k] - mean);
    r[k] = c / c0;
  }
  return r;
}

int block_length(std::span<const double> x) {
  const int n = static_cast<int>(x.size());
  if (n < 4) return 1;
  const int cap = std::max(1, n / 4);
  const std::vector<double> r = autocorrelation(x, cap);
  const double band = 2.0 / std::sqrt(static_cast<double>(n));
  int first = cap;
  for (int k = 1; k <= cap; ++k)
    if (std::fabs(r[k]) < band) {
      first = k;
      break;
    }
  const int floor_len = static_cast<int>(std::ceil(std::cbrt(static_cast<double>(n))));
  return std::min(cap, std::max(floor_len, 2 * first));
}

double student_t_quantile(double p, double df) {
  ATTNUM_ASSERT(p > 0 && p < 1 && df > 0, "student_t_quantile: p {}, df {}", p, df);
  return boost::math::quantile(boost::math::students_t(df), p);
}

double t_test_p_value(double t, double df) {
  ATTNUM_ASSERT(df > 0 && !std::isnan(t), "t_test_p_value: t {}, df {}", t, df);
  return 2 * boost::math::cdf(boost::math::complement(boost::math::students_t(df), std::fabs(t)));
}

double t_test_power(double ncp, double df, double level) {
  ATTNUM_ASSERT(df > 0 && level > 0 && level < 1, "t_test_power: df {}, level {}", df, level);
  const double c = student_t_quantile(1 - level / 2, df);
  const boost::math::non_central_t d(df, ncp);
  return boost::math::cdf(boost::math::complement(d, c)) + boost::math::cdf(d, -c);
}

double detectable_effect_se(double df, double power, double level) {
  ATTNUM_ASSERT(power > level && power < 1, "detectable_effect_se: power {}", power);
  double lo = 0, hi = 1;
  while (t_test_power(hi, df, level) < power) hi *= 2;
  while (hi - lo > 1e-10) {
    const double mid = 0.5 * (lo + hi);
    (t_test_power(mid, df, level) < power ? lo : hi) = mid;
  }
  return hi;
}

std::vector<uint8_t> benjamini_hochberg(std::span<const double> p, double q) {
  const size_t m = p.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  size_t k = 0;  // rejections: the largest rank i (1-based) with p_(i) <= i q / m
  for (size_t i = 0; i < m; ++i)
    if (p[order[i]] <= static_cast<double>(i + 1) * q / static_cast<double>(m)) k = i + 1;
  std::vector<uint8_t> reject(m, 0);
  for (size_t i = 0; i < k; ++i) reject[order[i]] = 1;
  return reject;
}

mean_se mean_and_se(std::span<const double> x) {
  mean_se r;
  const size_t n = x.size();
  if (n == 0) return r;
  for (double v : x) r.mean += v;
  r.mean /= static_cast<double>(n);
  if (n < 2) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  r.se = std::sqrt(ss / static_cast<double>(n - 1) / static_cast<double>(n));
  return r;
}

}  // namespace attnum::stats
