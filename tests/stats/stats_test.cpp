// Statistics against small cases computed by hand (ties included).
#include "attnum/stats/stats.h"

#include <gtest/gtest.h>

#include <cmath>
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
