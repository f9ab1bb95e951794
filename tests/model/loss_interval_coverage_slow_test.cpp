// Coverage of the intervals the loss tables print (ppl_ratio, kl_mean, kl_p50, kl_p90,
// top1_agreement, dp_rms; the paired dCE, dKL, dtop1) on synthetic per-label results whose text
// windows differ at random: each window shifts the CE difference of each condition (the kernel's
// effect), the KL's level and the top-1 agreement, and labels within a window are AR(1)
// dependent, as neighbouring tokens are. The truth is the statistic of the population of windows
// (closed forms below). At 3, 5 and 10 windows, loss::summarize's and summarize_paired's
// interval (the delete-one-window jackknife, t(G-1), log / logit / identity scale) must cover the
// truth in 92-98% of replications; the moving-block bootstrap over token positions it replaced
// (stats::block_bootstrap, blocks within a window, as the loss study computed it) is measured
// beside it on the first replications and undercovers; so does the jackknife of kl_p99, which
// therefore gets none. Seeds are fixed, so the table printed
// for docs/model.md is the same on every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "attnum/loss/loss_study.h"
#include "attnum/stats/stats.h"

using namespace attnum;

namespace {

// The data-generating process. Per window t: CE-difference shifts v_t ~ N(0, sv^2) (plain) and
// v'_t = rho v_t + sqrt(1 - rho^2) sv N(0, 1) (rotate); KL level w_t ~ N(0, sw^2); agreement
// shift z_t ~ N(0, sz^2). Per label i, AR(1) series e (phi, unit variance):
//   nll_ref = 2 + 0.5 e0;  nll_var = nll_ref + mu + v_t + s e1 (rotate: e1' = rho e1 + ...);
//   kl = exp(m + w_t + sk e2);  top1_same = [e3 < c + z_t];  dp = 0.3 sqrt(kl) N(0, 1).
constexpr int kLabels = 512;  // per window (the study's windows of stories260K)
constexpr double kPhi = 0.5, kRho = 0.5;
constexpr double kMuPlain = 0.03, kMuRotate = 0.01, kSv = 0.03, kS = 0.5;
const double kMPlain = std::log(0.05), kMRotate = std::log(0.04);
constexpr double kSw = 0.2, kSk = 1.2;
constexpr double kCPlain = 1.0, kCRotate = 0.8, kSz = 0.2;

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// An AR(1) series of n values with unit stationary variance.
std::vector<double> ar1(stats::splitmix64& rng, int n) {
  std::vector<double> x(static_cast<size_t>(n));
  const double c = std::sqrt(1 - kPhi * kPhi);
  x[0] = rng.normal();
  for (int i = 1; i < n; ++i) x[static_cast<size_t>(i)] = kPhi * x[static_cast<size_t>(i) - 1] + c * rng.normal();
  return x;
}

// g windows (one source each, as the study passes them), conditions plain (0) and rotate (1).
std::vector<loss::unit_result> draw(stats::splitmix64& rng, int g) {
  std::vector<loss::unit_result> out;
  const double c = std::sqrt(1 - kRho * kRho);
  for (int t = 0; t < g; ++t) {
    const double v = kSv * rng.normal(), v2 = kRho * v + c * kSv * rng.normal();
    const double w = kSw * rng.normal(), z = kSz * rng.normal();
    const auto e0 = ar1(rng, kLabels), e1 = ar1(rng, kLabels), e1b = ar1(rng, kLabels);
    loss::unit_result a, b;
    a.unit = {t, 0, 0}, b.unit = {t, 0, 1};
    for (int cond = 0; cond < 2; ++cond) {
      loss::unit_result& r = cond == 0 ? a : b;
      const auto e2 = ar1(rng, kLabels), e3 = ar1(rng, kLabels);
      for (size_t i = 0; i < static_cast<size_t>(kLabels); ++i) {
        const double ref = 2 + 0.5 * e0[i];
        const double d = cond == 0 ? kMuPlain + v + kS * e1[i] : kMuRotate + v2 + kS * (kRho * e1[i] + c * e1b[i]);
        const double kl = std::exp((cond == 0 ? kMPlain : kMRotate) + w + kSk * e2[i]);
        r.nll_ref.push_back(ref);
        r.nll_var.push_back(ref + d);
        r.kl.push_back(kl);
        r.dp.push_back(0.3 * std::sqrt(kl) * rng.normal());
        r.top1_same.push_back(e3[i] < (cond == 0 ? kCPlain : kCRotate) + z);
      }
    }
    out.push_back(std::move(a)), out.push_back(std::move(b));
  }
  return out;
}

constexpr int kStats = 9;
const char* kNames[kStats] = {"ppl_ratio", "kl_mean",  "kl_p50",   "kl_p90",    "top1_agreement",
                              "dp_rms",    "delta_ce", "delta_kl", "delta_top1"};

// The population values (closed forms of the process above).
std::vector<double> truths() {
  const double ekl = std::exp(kMPlain + (kSw * kSw + kSk * kSk) / 2);
  const double ekl_rot = std::exp(kMRotate + (kSw * kSw + kSk * kSk) / 2);
  const double sd_log = std::sqrt(kSw * kSw + kSk * kSk), z90 = 1.2815515655446004;
  const double top = normal_cdf(kCPlain / std::sqrt(1 + kSz * kSz)),
               top_rot = normal_cdf(kCRotate / std::sqrt(1 + kSz * kSz));
  return {std::exp(kMuPlain),
          ekl,
          std::exp(kMPlain),
          std::exp(kMPlain + z90 * sd_log),
          top,
          0.3 * std::sqrt(ekl),
          kMuRotate - kMuPlain,
          ekl_rot - ekl,
          top_rot - top};
}

struct ci {
  double lo = NAN, hi = NAN;
  bool reported() const { return std::isfinite(lo) && std::isfinite(hi); }
};

// The intervals the loss study prints now (summarize: the plain row; summarize_paired:
// rotate - plain).
std::vector<ci> after(const loss::loss_params& p, const std::vector<loss::unit_result>& res) {
  const loss::loss_row r = loss::summarize(p, "sim", res).at(0);
  const loss::paired_row q = loss::summarize_paired(p, "sim", res).at(0);
  EXPECT_FALSE(std::isfinite(r.kl_p99_lo));  // a high quantile gets none
  EXPECT_FALSE(r.kl_p99_ci_reason.empty());
  return {{r.ppl_ratio_lo, r.ppl_ratio_hi},
          {r.kl_mean_lo, r.kl_mean_hi},
          {r.kl_p50_lo, r.kl_p50_hi},
          {r.kl_p90_lo, r.kl_p90_hi},
          {r.top1_agreement_lo, r.top1_agreement_hi},
          {r.dp_rms_lo, r.dp_rms_hi},
          {q.delta_ce_lo, q.delta_ce_hi},
          {q.delta_kl_lo, q.delta_kl_hi},
          {q.delta_top1_lo, q.delta_top1_hi}};
}

// The intervals the loss study printed before: the percentile moving-block bootstrap over token
// positions, blocks within a window, block length stats::block_length of the CE differences
// (at most a window), 200 resamples (the study's default was 1000; the percentile interval is
// the same up to resampling noise).
std::vector<ci> before(const std::vector<loss::unit_result>& res) {
  std::vector<double> diff, kl, same, dp2, dce, dkl, dtop;
  const size_t g = res.size() / 2;
  for (size_t t = 0; t < g; ++t) {
    const loss::unit_result &a = res[2 * t], &b = res[2 * t + 1];
    for (size_t i = 0; i < a.kl.size(); ++i) {
      diff.push_back(a.nll_var[i] - a.nll_ref[i]), kl.push_back(a.kl[i]), same.push_back(a.top1_same[i]);
      dp2.push_back(a.dp[i] * a.dp[i]);
      dce.push_back(b.nll_var[i] - a.nll_var[i]), dkl.push_back(b.kl[i] - a.kl[i]);
      dtop.push_back(double(b.top1_same[i]) - double(a.top1_same[i]));
    }
  }
  const int n = static_cast<int>(diff.size());
  auto mean = [](const std::vector<double>& x, std::span<const int> idx) {
    double s = 0;
    for (int i : idx) s += x[static_cast<size_t>(i)];
    return s / static_cast<double>(idx.size());
  };
  stats::bootstrap_options bo;
  bo.n_resamples = 200, bo.seed = 0x105505EEDULL;
  auto boot = [&](int block, const stats::statistic_fn& f) {
    const stats::interval iv = stats::block_bootstrap(n, block, f, bo, kLabels);
    return ci{iv.lo.value_or(NAN), iv.hi.value_or(NAN)};
  };
  const int block = std::max(1, std::min(stats::block_length(diff), kLabels));
  const int block_p = std::max(1, std::min(stats::block_length(dce), kLabels));
  auto quantile = [&](double q) {
    return [&kl, q](std::span<const int> idx) -> std::optional<double> {
      std::vector<double> v(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) v[i] = kl[static_cast<size_t>(idx[i])];
      return stats::percentile(std::move(v), q);
    };
  };
  return {boot(block, [&](std::span<const int> idx) { return std::exp(mean(diff, idx)); }),
          boot(block, [&](std::span<const int> idx) { return mean(kl, idx); }),
          boot(block, quantile(0.5)),
          boot(block, quantile(0.9)),
          boot(block, [&](std::span<const int> idx) { return mean(same, idx); }),
          boot(block, [&](std::span<const int> idx) { return std::sqrt(mean(dp2, idx)); }),
          boot(block_p, [&](std::span<const int> idx) { return mean(dce, idx); }),
          boot(block_p, [&](std::span<const int> idx) { return mean(dkl, idx); }),
          boot(block_p, [&](std::span<const int> idx) { return mean(dtop, idx); })};
}

struct tally {
  int covered_before = 0, covered_after = 0, reported_before = 0, reported_after = 0;
};

// The jackknife kl_p99 would get if it had one (log scale, t(G-1), over windows): it undercovers,
// which is why the loss rows give kl_p99 no interval.
bool kl_p99_jackknife_covers(const std::vector<loss::unit_result>& res, double truth) {
  std::vector<double> kl;
  std::vector<int> window;
  for (size_t t = 0; t < res.size() / 2; ++t) {
    kl.insert(kl.end(), res[2 * t].kl.begin(), res[2 * t].kl.end());
    window.insert(window.end(), res[2 * t].kl.size(), static_cast<int>(t));
  }
  stats::bootstrap_options o;
  o.scale = stats::ci_scale::log;
  const stats::interval iv = stats::cluster_jackknife_t(
      window,
      [&](std::span<const int> idx) -> std::optional<double> {
        std::vector<double> v(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) v[i] = kl[static_cast<size_t>(idx[i])];
        return stats::percentile(std::move(v), 0.99);
      },
      o);
  return iv.lo && *iv.lo <= truth && truth <= *iv.hi;
}

}  // namespace

TEST(loss_interval_coverage_slow_test, every_printed_loss_interval_covers_92_to_98_percent) {
  const std::vector<double> truth = truths();
  std::printf("truth:");
  for (int k = 0; k < kStats; ++k) std::printf(" %s %.5g", kNames[k], truth[static_cast<size_t>(k)]);
  std::printf("\n| text windows | replications (before) |");
  for (int k = 0; k < kStats; ++k) std::printf(" %s before / after |", kNames[k]);
  std::printf(" kl_p99 (jackknife, not printed) |\n");
  const double kl_p99_truth = std::exp(kMPlain + 2.3263478740408408 * std::sqrt(kSw * kSw + kSk * kSk));
  for (int g : {3, 5, 10}) {
    const int reps = 1000, reps_before = 200;
    loss::loss_params p;
    p.n_tokens = kLabels, p.windows = 1, p.conditions = {"plain", "rotate"};
    p.sources.assign(static_cast<size_t>(g), std::vector<int>(kLabels + 1, 0));
    p.source_names.assign(static_cast<size_t>(g), "w");
    stats::splitmix64 rng(0x1055c0deULL + static_cast<uint64_t>(g));
    tally t[kStats];
    int p99_covered = 0;
    for (int r = 0; r < reps; ++r) {
      const std::vector<loss::unit_result> res = draw(rng, g);
      p99_covered += kl_p99_jackknife_covers(res, kl_p99_truth);
      const std::vector<ci> a = after(p, res);
      for (size_t k = 0; k < kStats; ++k)
        if (a[k].reported()) t[k].reported_after++, t[k].covered_after += a[k].lo <= truth[k] && truth[k] <= a[k].hi;
      if (r >= reps_before) continue;
      const std::vector<ci> b = before(res);
      for (size_t k = 0; k < kStats; ++k)
        if (b[k].reported()) t[k].reported_before++, t[k].covered_before += b[k].lo <= truth[k] && truth[k] <= b[k].hi;
    }
    std::printf("| %d | %d (%d) |", g, reps, reps_before);
    for (int k = 0; k < kStats; ++k) {
      const double before_cov = static_cast<double>(t[k].covered_before) / t[k].reported_before;
      const double after_cov = static_cast<double>(t[k].covered_after) / t[k].reported_after;
      std::printf(" %.3f / %.3f |", before_cov, after_cov);
      // Coverage among the intervals reported, and every replication reports one, so it is not
      // bought by withholding the hard cases.
      EXPECT_EQ(t[k].reported_after, reps) << kNames[k] << " G=" << g;
      EXPECT_GE(after_cov, 0.92) << kNames[k] << " G=" << g;
      EXPECT_LE(after_cov, 0.98) << kNames[k] << " G=" << g;
      // The bootstrap over token positions ignores the windows' shifts and undercovers where
      // they do not cancel (in delta_kl and delta_top1 the shared KL and agreement shifts
      // mostly do: 0.91-0.96 there).
      if (k < 7) {
        EXPECT_LT(before_cov, 0.9) << kNames[k] << " G=" << g;
      }
    }
    const double p99 = static_cast<double>(p99_covered) / reps;
    std::printf(" %.3f |\n", p99);
    // No interval for kl_p99: the jackknife misses the band at some window count.
    if (g == 10) {
      EXPECT_LT(p99, 0.92);
    }
  }
}
