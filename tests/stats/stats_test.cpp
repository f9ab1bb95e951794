// Statistics against small cases computed by hand (ties included).
#include "attnum/stats/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

using namespace attnum::stats;

TEST(stats_test, midranks_share_ties) {
  const std::vector<double> x{3, 1, 2, 2, 5};
  const auto r = midranks(x);
  EXPECT_EQ(r, (std::vector<double>{4, 1, 2.5, 2.5, 5}));
}

TEST(stats_test, auc_without_ties) {
  // Classic example: positives 0.35, 0.8; negatives 0.1, 0.4. Pairs won: (0.35>0.1),
  // (0.8>0.1), (0.8>0.4) = 3 of 4.
  const std::vector<double> s{0.1, 0.4, 0.35, 0.8};
  const std::vector<uint8_t> y{0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(*roc_auc(s, y), 0.75);
}

TEST(stats_test, auc_counts_ties_half) {
  // Positives {2, 3}, negatives {1, 2}: 2>1 (1), 2=2 (1/2), 3>1 (1), 3>2 (1) -> 3.5/4.
  const std::vector<double> s{1, 2, 2, 3};
  const std::vector<uint8_t> y{0, 1, 0, 1};
  EXPECT_DOUBLE_EQ(*roc_auc(s, y), 0.875);
  // All scores tied: 1/2.
  const std::vector<double> t{7, 7, 7};
  const std::vector<uint8_t> z{1, 0, 0};
  EXPECT_DOUBLE_EQ(*roc_auc(t, z), 0.5);
}

TEST(stats_test, auc_undefined_with_one_class) {
  const std::vector<double> s{1, 2};
  const std::vector<uint8_t> y{0, 0};
  EXPECT_FALSE(roc_auc(s, y).has_value());
}

TEST(stats_test, confusion_at_zero_threshold_is_strict) {
  const std::vector<double> s{-1, 0, 0.5, 2, -0.1};
  const std::vector<uint8_t> y{0, 1, 1, 0, 1};
  const confusion c = confusion_at(s, y, 0.0);
  // Calls: 0.5 (tp), 2 (fp); no call: -1 (tn), 0 (fn: 0 is not > 0), -0.1 (fn).
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.fp, 1);
  EXPECT_EQ(c.fn, 2);
  EXPECT_EQ(c.tn, 1);
  EXPECT_DOUBLE_EQ(*c.precision(), 0.5);
  EXPECT_DOUBLE_EQ(*c.recall(), 1.0 / 3.0);
  const confusion none = confusion_at(s, y, 10.0);
  EXPECT_FALSE(none.precision().has_value());
}

TEST(stats_test, spearman_with_ties) {
  // ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]; deviations from 2.5: dx = [-1.5, 0, 0, 1.5],
  // dy = [-1.5, .5, -.5, 1.5]; sxy = 4.5, sxx = 4.5, syy = 5 -> 4.5 / sqrt(22.5) = 3/sqrt(10).
  const std::vector<double> x{1, 2, 2, 3}, y{10, 30, 20, 40};
  EXPECT_NEAR(*spearman(x, y), 3 / std::sqrt(10.0), 1e-15);
  const std::vector<double> rev{4, 3, 2, 1}, inc{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(*spearman(rev, inc), -1.0);
  const std::vector<double> flat{1, 1, 1, 1};
  EXPECT_FALSE(spearman(flat, inc).has_value());
}

TEST(stats_test, cluster_bootstrap_resamples_clusters) {
  // Two clusters with constant values 0 and 1: a cluster resample's mean is 0, 1/2 or 1, never
  // anything an item-level bootstrap (e.g. 1/4) would give.
  const std::vector<double> v{0, 0, 1, 1};
  const std::vector<int> cl{5, 5, 9, 9};
  std::vector<double> seen;
  auto mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += v[i];
    const double m = s / static_cast<double>(idx.size());
    seen.push_back(m);
    return m;
  };
  const interval a = cluster_bootstrap(cl, mean, {200, 42, 0.95});
  for (double m : seen) EXPECT_TRUE(m == 0 || m == 0.5 || m == 1) << m;
  EXPECT_EQ(*a.lo, 0.0);
  EXPECT_EQ(*a.hi, 1.0);
  const interval b = cluster_bootstrap(cl, mean, {200, 42, 0.95});
  EXPECT_EQ(*a.lo, *b.lo);
  EXPECT_EQ(*a.hi, *b.hi);
}

TEST(stats_test, cluster_bootstrap_undefined_statistic) {
  const std::vector<int> cl{0, 1, 2};
  auto undefined = [](std::span<const int>) -> std::optional<double> { return std::nullopt; };
  const interval a = cluster_bootstrap(cl, undefined);
  EXPECT_FALSE(a.lo.has_value());
  EXPECT_FALSE(a.hi.has_value());
}

TEST(stats_test, student_t_quantiles_match_tables) {
  // Two-sided 95% critical values from standard tables (e.g. Abramowitz & Stegun 26.10).
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.30265273, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.77644511, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 5), 2.57058184, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.26215716, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 23), 2.06865761, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.995, 10), 3.16927267, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.025, 5), -2.57058184, 1e-7);
}

TEST(stats_test, jackknife_t_of_a_mean_is_the_cluster_t_interval) {
  // Equal clusters: leave-one-out means are (S - s_g) / (G - 1) per item count, so the jackknife
  // se equals sd(cluster means) / sqrt(G), and the interval is the classic t interval on the
  // cluster means: means 1, 2, 4, 5 -> mean 3, sd sqrt(10/3), se sqrt(10/3)/2.
  const std::vector<double> y{1, 1, 2, 2, 4, 4, 5, 5};
  const std::vector<int> cl{0, 0, 1, 1, 2, 2, 3, 3};
  const auto mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += y[i];
    return s / static_cast<double>(idx.size());
  };
  const interval iv = cluster_jackknife_t(cl, mean);
  const double half = 3.18244631 * std::sqrt(10.0 / 3.0) / 2;  // t(0.975, 3)
  EXPECT_NEAR(*iv.lo, 3 - half, 1e-7);
  EXPECT_NEAR(*iv.hi, 3 + half, 1e-7);
  EXPECT_EQ(iv.n_clusters, 4);
  EXPECT_EQ(iv.method, "cluster-jackknife-t");
  EXPECT_EQ(iv.dropped, 0);
  // Truncated to the statistic's range.
  bootstrap_options o;
  o.range_hi = 4;
  EXPECT_EQ(*cluster_jackknife_t(cl, mean, o).hi, 4.0);
}

TEST(stats_test, jackknife_on_the_log_scale_is_the_t_interval_of_the_logs) {
  // exp of a mean of equal clusters on the log scale: the t interval of the cluster means of
  // the logs (1, 2, 4, 5: centre 3, half-width t(3) sqrt(10/3)/2), exponentiated.
  const std::vector<double> y{1, 1, 2, 2, 4, 4, 5, 5};
  const std::vector<int> cl{0, 0, 1, 1, 2, 2, 3, 3};
  const auto exp_mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += y[i];
    return std::exp(s / static_cast<double>(idx.size()));
  };
  bootstrap_options o;
  o.scale = ci_scale::log;
  const interval iv = cluster_jackknife_t(cl, exp_mean, o);
  const double half = 3.18244631 * std::sqrt(10.0 / 3.0) / 2;  // t(0.975, 3)
  EXPECT_NEAR(*iv.lo, std::exp(3 - half), 1e-7 * std::exp(3 - half));
  EXPECT_NEAR(*iv.hi, std::exp(3 + half), 1e-7 * std::exp(3 + half));
  // A value <= 0 has no log: no interval, with the reason.
  const auto shifted = [&](std::span<const int> idx) -> std::optional<double> { return std::log(*exp_mean(idx)) - 3; };
  const interval none = cluster_jackknife_t(cl, shifted, o);
  EXPECT_FALSE(none.lo || none.hi);
  EXPECT_EQ(none.reason, "a value <= 0 has no log scale");
}

TEST(stats_test, jackknife_counts_undefined_leave_outs_and_gives_no_interval) {
  // The statistic is undefined without cluster 2: one dropped fit, no interval.
  const std::vector<int> cl{0, 1, 2};
  const auto stat = [](std::span<const int> idx) -> std::optional<double> {
    for (int i : idx)
      if (i == 2) return static_cast<double>(idx.size());
    return std::nullopt;
  };
  const interval iv = cluster_jackknife_t(cl, stat);
  EXPECT_EQ(iv.dropped, 1);
  EXPECT_FALSE(iv.lo.has_value());
  // One cluster: no interval, and the method says why.
  const std::vector<int> one{0, 0};
  const interval none = cluster_interval(one, stat);
  EXPECT_FALSE(none.lo.has_value());
  EXPECT_EQ(none.method.rfind("none", 0), 0u);
}

TEST(stats_test, bootstrap_counts_undefined_resamples) {
  // Undefined whenever item 0 is missing from a resample of 4 singleton clusters: about
  // (3/4)^4 = 32% of resamples.
  const std::vector<int> cl{0, 1, 2, 3};
  const auto stat = [](std::span<const int> idx) -> std::optional<double> {
    for (int i : idx)
      if (i == 0) return 1.0;
    return std::nullopt;
  };
  const interval iv = cluster_bootstrap(cl, stat, {1000, 5, 0.95});
  EXPECT_GT(iv.dropped, 250);
  EXPECT_LT(iv.dropped, 380);
  EXPECT_TRUE(iv.lo.has_value());
}

TEST(stats_test, block_length_follows_the_autocorrelation) {
  // AR(1) with phi = 0.9: the autocorrelation stays above 2/sqrt(n) for tens of lags, so the
  // blocks are long; white noise gets the n^(1/3) floor.
  splitmix64 rng(11);
  std::vector<double> ar(4000), white(4000);
  double x = 0;
  for (size_t i = 0; i < ar.size(); ++i) {
    x = 0.9 * x + rng.normal();
    ar[i] = x;
    white[i] = rng.normal();
  }
  const std::vector<double> r = autocorrelation(ar, 3);
  EXPECT_NEAR(r[1], 0.9, 0.03);
  EXPECT_EQ(r[0], 1.0);
  EXPECT_GT(block_length(ar), 40);
  EXPECT_EQ(block_length(white), 16);  // ceil(4000^(1/3)) = 16
}

TEST(stats_test, block_bootstrap_widens_for_dependent_series) {
  // Mean of an AR(1) series: the block bootstrap's interval is much wider than the i.i.d.
  // bootstrap's (block 1), which ignores the dependence.
  splitmix64 rng(3);
  std::vector<double> ar(2000);
  double x = 0;
  for (double& v : ar) v = x = 0.8 * x + rng.normal();
  const auto mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += ar[i];
    return s / static_cast<double>(idx.size());
  };
  const interval blocks = block_bootstrap(2000, block_length(ar), mean, {400, 1, 0.95});
  const interval iid = block_bootstrap(2000, 1, mean, {400, 1, 0.95});
  EXPECT_GT(*blocks.hi - *blocks.lo, 2.0 * (*iid.hi - *iid.lo));
  EXPECT_EQ(iid.n_clusters, 2000);
}

TEST(stats_test, block_bootstrap_keeps_blocks_inside_segments) {
  // 3 segments of 10 items and a tail of 4 (n 34), blocks of 4: every block of every resample
  // starts at a position whose 4 items lie in one segment, every admissible start is drawn, and
  // a segment as long as the series gives the unsegmented resamples.
  const int n = 34, seg = 10, block = 4;
  std::set<int> starts;
  bool crossed = false;
  const auto record = [&](std::span<const int> idx) -> std::optional<double> {
    for (size_t b = 0; b < idx.size(); b += block) {
      const int s = idx[b];
      starts.insert(s);
      const size_t len = std::min<size_t>(block, idx.size() - b);
      for (size_t j = 0; j < len; ++j) crossed |= idx[b + j] != s + int(j);
      crossed |= (s / seg) != ((s + block - 1) / seg) || s + block > n;
    }
    return 0.0;
  };
  const interval iv = block_bootstrap(n, block, record, {2000, 7, 0.95}, seg);
  EXPECT_FALSE(crossed);
  std::set<int> admissible;
  for (int s = 0; s + block <= n; ++s)
    if (s / seg == (s + block - 1) / seg) admissible.insert(s);
  EXPECT_EQ(starts, admissible);  // 3 x 7 + 1 starts; 30..33 is the tail's one block
  EXPECT_NE(iv.method.find("within segments of 10"), std::string::npos) << iv.method;
  std::vector<std::vector<int>> a, b;
  const auto keep = [](std::vector<std::vector<int>>& into) {
    return [&into](std::span<const int> idx) -> std::optional<double> {
      into.emplace_back(idx.begin(), idx.end());
      return 0.0;
    };
  };
  block_bootstrap(n, block, keep(a), {50, 9, 0.95});
  block_bootstrap(n, block, keep(b), {50, 9, 0.95}, n);
  EXPECT_EQ(a, b);
}

TEST(stats_test, mean_and_se) {
  const std::vector<double> x{1, 2, 3, 6};
  const mean_se m = mean_and_se(x);
  EXPECT_DOUBLE_EQ(m.mean, 3);
  EXPECT_DOUBLE_EQ(*m.se, std::sqrt(14.0 / 3.0 / 4.0));
  const std::vector<double> one{2};
  EXPECT_FALSE(mean_and_se(one).se.has_value());
}

TEST(stats_test, jackknife_on_the_logit_scale_with_bias_correction) {
  // Four clusters of proportions 0.2, 0.4, 0.5, 0.7 (10 items each): the leave-one-out
  // proportions are (S - s_g) / 30 with S = 18, i.e. 16/30, 14/30, 13/30, 11/30; on the logit
  // scale with bias correction the centre is 4 logit(0.45) - 3 mean(logit(loo)).
  std::vector<double> y;
  std::vector<int> cl;
  const int ones[] = {2, 4, 5, 7};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 10; ++i) y.push_back(i < ones[c] ? 1 : 0), cl.push_back(c);
  const auto mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += y[i];
    return s / static_cast<double>(idx.size());
  };
  bootstrap_options o;
  o.range_lo = 0, o.range_hi = 1, o.scale = ci_scale::logit, o.bias_correct = true;
  const interval iv = cluster_jackknife_t(cl, mean, o);
  auto logit = [](double p) { return std::log(p / (1 - p)); };
  const double z[] = {logit(16 / 30.0), logit(14 / 30.0), logit(13 / 30.0), logit(11 / 30.0)};
  const double zbar = (z[0] + z[1] + z[2] + z[3]) / 4;
  double ss = 0;
  for (double v : z) ss += (v - zbar) * (v - zbar);
  const double se = std::sqrt(ss * 3 / 4), centre = 4 * logit(0.45) - 3 * zbar;
  const double t = 3.18244631;  // t(0.975, 3)
  EXPECT_NEAR(*iv.lo, 1 / (1 + std::exp(-(centre - t * se))), 1e-9);
  EXPECT_NEAR(*iv.hi, 1 / (1 + std::exp(-(centre + t * se))), 1e-9);
  EXPECT_TRUE(iv.reason.empty());
  // Asymmetric about the estimate (the logit scale), inside (0, 1).
  EXPECT_GT(*iv.lo, 0.0);
  EXPECT_LT(*iv.hi, 1.0);
}

TEST(stats_test, zero_width_jackknife_is_no_interval) {
  // Every cluster has the same proportion: every leave-one-out value equals the estimate.
  const std::vector<double> y{1, 0, 1, 0, 1, 0};
  const std::vector<int> cl{0, 0, 1, 1, 2, 2};
  const auto mean = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += y[i];
    return s / static_cast<double>(idx.size());
  };
  const interval iv = cluster_interval(cl, mean);
  EXPECT_FALSE(iv.lo.has_value());
  EXPECT_EQ(iv.reason, "zero width: every leave-one-cluster-out value equals the estimate");
  // On the plain logit scale an estimate of 1 has no interval either; the empirical logit
  // (logit_count) is finite there.
  const std::vector<double> one{1, 1, 1, 1, 1, 0};
  const auto mean1 = [&](std::span<const int> idx) -> std::optional<double> {
    double s = 0;
    for (int i : idx) s += one[i];
    return s / static_cast<double>(idx.size());
  };
  bootstrap_options o;
  o.range_lo = 0, o.range_hi = 1, o.scale = ci_scale::logit;
  const interval plain = cluster_jackknife_t(cl, mean1, o);
  EXPECT_FALSE(plain.lo.has_value());
  EXPECT_NE(plain.reason.find("boundary"), std::string::npos) << plain.reason;
  o.logit_count = 6;
  const interval emp = cluster_jackknife_t(cl, mean1, o);
  ASSERT_TRUE(emp.lo.has_value());
  EXPECT_LT(*emp.lo, *emp.hi);
  EXPECT_LE(*emp.hi, 1.0);
}

TEST(stats_test, clusters_with_events_counts_clusters_with_two_or_more) {
  const std::vector<int> cl{0, 0, 0, 1, 1, 2, 2, 2};
  const std::vector<uint8_t> ev{1, 1, 0, 1, 0, 1, 1, 1};
  EXPECT_EQ(clusters_with_events(cl, ev), 2);  // clusters 0 (2 events) and 2 (3); 1 has one
}

TEST(stats_test, benjamini_hochberg_step_up) {
  // m = 5, q = 0.05: thresholds 0.01, 0.02, 0.03, 0.04, 0.05. Sorted p: 0.001 (ok), 0.03 (> 0.02),
  // 0.035 (> 0.03), 0.04 (<= 0.04: the largest rank that passes), 0.5: the step-up rejects the
  // first four although ranks 2 and 3 fail on their own.
  const std::vector<double> p{0.5, 0.035, 0.001, 0.04, 0.03};
  EXPECT_EQ(benjamini_hochberg(p, 0.05), (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  const std::vector<double> none{0.2, 0.3};
  EXPECT_EQ(benjamini_hochberg(none, 0.05), (std::vector<uint8_t>{0, 0}));
}

TEST(stats_test, t_test_p_value_and_power) {
  // t = t(0.975, 2) has p = 0.05 exactly; power at ncp 0 is the level.
  EXPECT_NEAR(t_test_p_value(4.30265273, 2), 0.05, 1e-8);
  EXPECT_NEAR(t_test_p_value(-4.30265273, 2), 0.05, 1e-8);
  EXPECT_NEAR(t_test_power(0, 2), 0.05, 1e-9);
  // Many degrees of freedom: the normal approximation 1.95996 + 0.84162 = 2.80158 se.
  EXPECT_NEAR(detectable_effect_se(1e6), 2.80158, 1e-3);
  // Two degrees of freedom (3 texts): checked by simulation, T' = (Z + d) / sqrt(chi2_2 / 2),
  // rejecting |T'| > 4.30265: the power at the returned d is 0.80 (100,000 draws, sd 0.0013).
  const double d = detectable_effect_se(2);
  EXPECT_GT(d, 4.30265273);
  splitmix64 rng(99);
  int hit = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal(), a = rng.normal(), b = rng.normal();
    const double t = (z + d) / std::sqrt((a * a + b * b) / 2);
    hit += std::fabs(t) > 4.30265273;
  }
  EXPECT_NEAR(static_cast<double>(hit) / n, 0.80, 0.004) << "d = " << d;
}

TEST(stats_test, percentile_is_type_7_in_any_order) {
  // numpy.percentile (linear): [1, 2, 3, 4] at 0.5 -> 2.5, at 0.25 -> 1.75, at 1 -> 4.
  EXPECT_DOUBLE_EQ(attnum::stats::percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(attnum::stats::percentile({4, 1, 3, 2}, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(attnum::stats::percentile({4, 1, 3, 2}, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(attnum::stats::percentile({4, 1, 3, 2}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(attnum::stats::percentile({7}, 0.3), 7.0);
  EXPECT_TRUE(std::isnan(attnum::stats::percentile({}, 0.5)));
  // Against a sort: the same value for shuffled data with ties.
  std::vector<double> v;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1001; ++i) v.push_back(double(rng() % 97));
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  for (double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    const double pos = q * 1000, f = pos - std::floor(pos);
    const size_t lo = size_t(std::floor(pos));
    EXPECT_EQ(attnum::stats::percentile(v, q), s[lo] + f * (s[lo + 1] - s[lo])) << q;
  }
}
