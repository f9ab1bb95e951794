// Coverage of the intervals the head study prints (AUC, precision, recall, Spearman and the
// non-null AUC, precision, recall) on synthetic heads whose clusters (models) differ at random:
// each model shifts the harm rate, offsets the predictor and scales the predictor's noise, so
// heads within a model are dependent as in the study. The truth is the statistic of the
// population of models (one very large draw). At 5, 6, 10 and 24 clusters, the study's interval
// (study::interval_options: delete-one-cluster jackknife, logit scale, bias-corrected, t(G-1))
// must cover the truth in 92-98% of replications; the plain jackknife-t it replaced is measured
// beside it and undercovers at 5 clusters. Seeds are fixed, so the table printed for docs/study.md
// is the same on every run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "attnum/stats/stats.h"
#include "attnum/study/summary.h"

using namespace attnum;
using namespace attnum::stats;

namespace {

struct heads {
  std::vector<double> pred, obs;
  std::vector<uint8_t> harmed, nonnull;
  std::vector<int> cluster;
};

// g models of 20..79 heads. Model effects: harm-rate shift a ~ N(0, 0.8^2) on the true effect,
// predictor offset b ~ N(0, 1), predictor noise scale exp(N(0, 0.5^2)). Head: true effect
// x ~ N(a, 1); observed score x + tau e with per-head noise tau = 0.5 exp(N(0, 0.3^2)); predicted
// x + b + 0.8 s e'; harmed = observed > 0; non-null = |observed| > 2 tau (the noise floor).
heads draw(splitmix64& rng, int g, int min_size = 20, int size_range = 60) {
  heads d;
  for (int c = 0; c < g; ++c) {
    const double a = 0.8 * rng.normal(), b = 1.0 * rng.normal(), s = std::exp(0.5 * rng.normal());
    const int m = min_size + static_cast<int>(rng.below(static_cast<uint64_t>(size_range)));
    for (int i = 0; i < m; ++i) {
      const double x = a + rng.normal();
      const double tau = 0.5 * std::exp(0.3 * rng.normal());
      const double o = x + tau * rng.normal();
      d.obs.push_back(o);
      d.pred.push_back(x + b + 0.8 * s * rng.normal());
      d.harmed.push_back(o > 0);
      d.nonnull.push_back(std::fabs(o) > 2 * tau);
      d.cluster.push_back(c);
    }
  }
  return d;
}

constexpr int kStats = 7;
const char* kNames[kStats] = {"auc",         "precision",         "recall",        "spearman",
                              "auc_nonnull", "precision_nonnull", "recall_nonnull"};

// Statistic k on the items idx, as study::summarize computes it.
std::optional<double> statistic(const heads& d, int k, std::span<const int> idx) {
  const bool nn = k >= 4;
  const int w = nn ? k - 4 : k;
  std::vector<double> p, o;
  std::vector<uint8_t> y;
  for (int i : idx) {
    if (nn && !d.nonnull[i]) continue;
    p.push_back(d.pred[i]), o.push_back(d.obs[i]), y.push_back(d.harmed[i]);
  }
  if (w == 0) return roc_auc(p, y);
  if (w == 1) return confusion_at(p, y, 0.0).precision();
  if (w == 2) return confusion_at(p, y, 0.0).recall();
  return spearman(p, o);
}

struct tally {
  int covered_before = 0, covered_after = 0, reported_before = 0, reported_after = 0;
};

}  // namespace

TEST(summary_interval_coverage_slow_test, every_printed_interval_covers_92_to_98_percent) {
  // The truth: the statistics of 20,000 models of 20 heads (the population the models are drawn
  // from; model sizes are independent of the effects, so they do not change it).
  double truth[kStats];
  {
    splitmix64 rng(0x7e57ULL);
    const heads big = draw(rng, 20000, 20, 1);
    std::vector<int> all(big.pred.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    for (int k = 0; k < kStats; ++k) truth[k] = *statistic(big, k, all);
  }
  std::printf("truth:");
  for (int k = 0; k < kStats; ++k) std::printf(" %s %.4f", kNames[k], truth[k]);
  std::printf("\n| clusters | replications |");
  for (int k = 0; k < kStats; ++k) std::printf(" %s before / after |", kNames[k]);
  std::printf("\n");
  for (int g : {5, 6, 10, 24}) {
    const int reps = g < 20 ? 1000 : 500;
    splitmix64 rng(0xc0de00ULL + static_cast<uint64_t>(g));
    tally t[kStats];
    for (int r = 0; r < reps; ++r) {
      const heads d = draw(rng, g);
      for (int k = 0; k < kStats; ++k) {
        const int w = k >= 4 ? k - 4 : k;
        // The leave-one-out fits are computed once and replayed for the second interval.
        std::vector<std::optional<double>> memo;
        size_t next = 0;
        auto record = [&](std::span<const int> idx) {
          memo.push_back(statistic(d, k, idx));
          return memo.back();
        };
        auto replay = [&](std::span<const int>) { return memo[next++]; };
        bootstrap_options before{0, 0, 0.95};
        before.range_lo = w == 3 ? -1.0 : 0.0, before.range_hi = 1.0;
        const interval b = cluster_jackknife_t(d.cluster, record, before);
        std::vector<double> ps;
        std::vector<uint8_t> ys;
        for (size_t i = 0; i < d.pred.size(); ++i)
          if (k < 4 || d.nonnull[i]) ps.push_back(d.pred[i]), ys.push_back(d.harmed[i]);
        const interval a =
            cluster_jackknife_t(d.cluster, replay, study::interval_options(w, 0, 0, study::interval_count(w, ps, ys)));
        ASSERT_EQ(next, memo.size());
        if (b.lo) t[k].reported_before++, t[k].covered_before += *b.lo <= truth[k] && truth[k] <= *b.hi;
        if (a.lo) t[k].reported_after++, t[k].covered_after += *a.lo <= truth[k] && truth[k] <= *a.hi;
      }
    }
    std::printf("| %d | %d |", g, reps);
    for (int k = 0; k < kStats; ++k) {
      const double before = static_cast<double>(t[k].covered_before) / t[k].reported_before;
      const double after = static_cast<double>(t[k].covered_after) / t[k].reported_after;
      std::printf(" %.3f / %.3f |", before, after);
      // Coverage among the intervals reported, and (almost) every replication reports one, so
      // it is not bought by withholding the hard cases.
      EXPECT_GE(t[k].reported_after, reps * 95 / 100) << kNames[k] << " G=" << g;
      EXPECT_GE(after, 0.92) << kNames[k] << " G=" << g;
      EXPECT_LE(after, 0.98) << kNames[k] << " G=" << g;
      // The plain jackknife-t falls short with 5 models under model effects (non-null AUC).
      if (g == 5 && k == 4) {
        EXPECT_LT(before, 0.90) << kNames[k];
      }
    }
    std::printf("\n");
  }
}
