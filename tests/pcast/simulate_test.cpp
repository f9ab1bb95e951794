// Tests of the idealized kernel and the sink simulation: the cast disabled equals fp64, the
// reverse-order guarantee, measured underflow against an independent direct count and the
// exact expectation, determinism across threads, and the saturation condition of a stale max.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/pcast/simulate.h"

namespace attnum::pcast {
namespace {

// Scores of the paper's setup drawn with the standard library (independent of simulate()).
std::vector<float> sink_scores(std::mt19937_64& gen, int n, int k, double delta) {
  std::normal_distribution<double> normal;
  std::vector<float> z(n);
  for (int j = 0; j < n; ++j) z[j] = static_cast<float>(normal(gen) + (j < k ? delta : 0.0));
  return z;
}

TEST(simulate_test, cast_disabled_equals_fp64_reference) {
  std::mt19937_64 gen(3);
  std::normal_distribution<float> normal;
  const int n = 4096, d = 128;
  std::vector<float> v(static_cast<size_t>(n) * d), o(d);
  for (auto& x : v) x = normal(gen);
  for (double delta : {0.0, 8.0, 12.0})
    for (auto order : {block_order::forward, block_order::reverse})
      for (double s : {1.0, 256.0}) {
        const auto z = sink_scores(gen, n, 4, delta);
        const std::vector<double> zd(z.begin(), z.end());
        ideal_row(z.data(), v.data(), n, d, 4, {s, order, 128, false, 0}, o.data(), nullptr);
        const auto ref = reference_row(zd.data(), v.data(), n, d);
        double num = 0, den = 0;
        for (int c = 0; c < d; ++c) {
          num += (o[c] - ref[c]) * (o[c] - ref[c]);
          den += ref[c] * ref[c];
        }
        EXPECT_LT(std::sqrt(num / den), 2e-6) << "delta " << delta << " " << order_name(order);
      }
}

TEST(simulate_test, cast_enabled_is_not_exact) {  // the check above can fail
  std::mt19937_64 gen(4);
  std::normal_distribution<float> normal;
  const int n = 1024, d = 64;
  std::vector<float> v(static_cast<size_t>(n) * d), o(d);
  for (auto& x : v) x = normal(gen);
  const auto z = sink_scores(gen, n, 4, 6.0);
  const std::vector<double> zd(z.begin(), z.end());
  ideal_row(z.data(), v.data(), n, d, 4, {1.0, block_order::forward, 128, true, 0}, o.data(), nullptr);
  const auto ref = reference_row(zd.data(), v.data(), n, d);
  double num = 0, den = 0;
  for (int c = 0; c < d; ++c) {
    num += (o[c] - ref[c]) * (o[c] - ref[c]);
    den += ref[c] * ref[c];
  }
  EXPECT_GT(std::sqrt(num / den), 1e-3);
}

// The paper's guarantee: reverse order with S = 256 leaves no non-sink P at zero for Delta up to
// 12 at N = 4096, outside the sink block. The B - k non-sinks sharing block 0 with the sinks see
// the sink max in either order, so the total is not zero at large Delta (docs/pcast.md).
TEST(simulate_test, reverse_with_scale_256_has_no_underflow_outside_the_sink_block) {
  sim_config c;
  c.deltas = parse_range("0:12:1", "delta");
  c.scales = {256};
  c.orders = {block_order::reverse};
  c.q_rows = 8;
  c.seeds = 3;
  c.seed = 2026;
  const auto rows = simulate(c);
  ASSERT_EQ(rows.size(), c.deltas.size());
  for (const auto& r : rows) {
    EXPECT_EQ(r.underflow_outside_measured, 0.0) << "delta " << r.delta;
    EXPECT_LT(r.underflow_outside_exact, 1e-12);
  }
  EXPECT_GT(rows.back().underflow_measured, 0.005);  // Delta = 12: block 0's non-sinks flush
}

// Every row's measured fraction against (a) a direct count on independent draws with the same
// distribution (running max in fp64, flush test s < m - c) and (b) the exact expectation.
TEST(simulate_test, measured_underflow_matches_direct_count_and_exact) {
  sim_config c;
  c.deltas = {0, 3, 5, 6.5, 8, 10, 12};
  c.n_toks = {2048};
  c.d_head = 32;
  c.q_rows = 12;
  c.seeds = 6;
  const auto rows = simulate(c);
  std::mt19937_64 gen(99);
  const int n = 2048, b = 128, k = 4, direct_rows = 96;
  for (const auto& r : rows) {
    std::vector<double> frac;
    for (int row = 0; row < direct_rows; ++row) {
      const auto z = sink_scores(gen, n, k, r.delta);
      double m = -INFINITY;
      int under = 0;
      for (int t = 0; t < n / b; ++t) {
        const int blk = r.order == block_order::forward ? t : n / b - 1 - t;
        for (int j = blk * b; j < (blk + 1) * b; ++j) m = std::max(m, double(z[j]));
        for (int j = blk * b; j < (blk + 1) * b; ++j)
          under += j >= k && z[j] < m - (10 * std::log(2.0) + std::log(r.scale));
      }
      frac.push_back(double(under) / (n - k));
    }
    double mean = 0, var = 0;
    for (double f : frac) mean += f / direct_rows;
    for (double f : frac) var += (f - mean) * (f - mean) / (direct_rows - 1);
    const double se_sim = r.underflow_sd / std::sqrt(double(r.seeds));
    const double se = std::sqrt(se_sim * se_sim + var / direct_rows);
    const std::string what =
        "delta " + std::to_string(r.delta) + " S " + std::to_string(r.scale) + " " + order_name(r.order);
    EXPECT_NEAR(r.underflow_measured, mean, 5 * se + 2e-4) << what;
    EXPECT_NEAR(r.underflow_measured, r.underflow_exact, 5 * se_sim + 2e-4) << what;
  }
}

TEST(simulate_test, deterministic_across_thread_counts) {
  sim_config c;
  c.deltas = {4, 8};
  c.n_toks = {1024};
  c.q_rows = 4;
  c.seeds = 3;
  attnum::set_threads(1);
  const auto a = simulate(c);
  attnum::set_threads(2);
  const auto b = simulate(c);
  attnum::set_threads(0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].mse, b[i].mse);
    EXPECT_EQ(a[i].underflow_measured, b[i].underflow_measured);
  }
}

// Scores built from fp32 Q and K follow the same statistics as injected ones.
TEST(simulate_test, qk_source_matches_exact_expectation) {
  sim_config c;
  c.deltas = {6, 9};
  c.scales = {1, 256};
  c.n_toks = {2048};
  c.q_rows = 16;
  c.seeds = 4;
  c.source = score_source::qk;
  for (const auto& r : simulate(c)) {
    const double se = r.underflow_sd / std::sqrt(double(r.seeds));
    EXPECT_NEAR(r.underflow_measured, r.underflow_exact, 5 * se + 2e-4)
        << "delta " << r.delta << " S " << r.scale << " " << order_name(r.order);
    EXPECT_GT(r.mse, 0.0);
  }
}

// A lazy rescale (the max follows only when a block raises it by more than tau log2 units) lets
// S * P exceed 448 exactly when log2 S + tau > log2 448 = 8.807.
TEST(simulate_test, stale_max_saturation_condition) {
  EXPECT_FALSE(can_saturate(256, 0.75));
  EXPECT_TRUE(can_saturate(256, 0.81));
  EXPECT_FALSE(can_saturate(448, 0));
  EXPECT_TRUE(can_saturate(256, 4));
  sim_config c;
  c.deltas = {0, 4, 5, 6};
  c.scales = {256};
  c.thresholds = {0, 0.75, 4};
  c.n_toks = {2048};
  c.q_rows = 8;
  c.seeds = 2;
  for (const auto& r : simulate(c)) {
    if (!can_saturate(r.scale, r.threshold)) {
      EXPECT_EQ(r.saturated_fraction, 0.0) << "tau " << r.threshold << " delta " << r.delta;
    }
  }
  // Reverse order, tau = 4, Delta = 5: the sink block raises the max by about Delta + 1 - 3.4,
  // under 4 ln 2 = 2.77, so the max stays stale and sink P saturate.
  c.deltas = {5};
  c.thresholds = {4};
  c.orders = {block_order::reverse};
  const auto rows = simulate(c);
  EXPECT_GT(rows[0].sink_saturated_fraction, 0.3);
}

}  // namespace
}  // namespace attnum::pcast

namespace attnum::pcast {
namespace {

// A preset through the engine: fp32 (no casts) reproduces the fp64 reference; fa3 (reverse,
// S = 2^8 as an exponent offset, FP8 Q/K/V) flushes non-sinks only in the sink block.
TEST(simulate_test, kernel_presets_through_the_engine) {
  sim_config c;
  c.deltas = {0, 10};
  c.n_toks = {1024};
  c.d_head = 64;
  c.q_rows = 8;
  c.seeds = 2;
  c.kernel = attention::preset("fp32");
  for (const auto& r : simulate(c)) {
    EXPECT_EQ(r.kernel, "fp32");
    EXPECT_LT(r.mse, 1e-12) << "delta " << r.delta;
    EXPECT_EQ(r.underflow_measured, 0.0);
  }
  c.kernel = attention::preset("fa3");
  const auto rows = simulate(c);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].order, block_order::reverse);
  EXPECT_EQ(rows[0].scale, 256.0);
  EXPECT_EQ(rows[0].underflow_measured, 0.0);
  EXPECT_GT(rows[1].underflow_measured, 0.0);  // the sink block's own non-sinks
  EXPECT_LT(rows[1].underflow_measured, 0.06);
  EXPECT_GT(rows[0].mse, 1e-7);  // FP8 Q, K, V: not exact
}

TEST(simulate_test, bad_config_throws) {
  sim_config c;
  c.deltas = {1};
  c.block = 0;
  EXPECT_THROW(simulate(c), attnum::error);
  c.block = 128;
  c.scales = {-1};
  EXPECT_THROW(simulate(c), attnum::error);
  c.scales = {1};
  EXPECT_THROW(attention::resolve_kernel("no-such-kernel"), attnum::error);
}

}  // namespace
}  // namespace attnum::pcast

namespace attnum::pcast {
namespace {

// The engine and the idealized kernel agree on the same fp32 Q and K: hpcops-s1 (forward,
// S = 1 multiply, l from fp32 P) with its Q/K casts off flushes the same non-sink P.
TEST(simulate_test, engine_and_ideal_kernel_flush_the_same_values) {
  sim_config c;
  c.deltas = {4, 6, 8};
  c.n_toks = {2048};
  c.d_head = 64;
  c.q_rows = 8;
  c.seeds = 2;
  c.source = score_source::qk;
  c.scales = {1};
  c.orders = {block_order::forward};
  const auto ideal = simulate(c);
  c.kernel = attention::resolve_kernel("hpcops-s1", {"enabled.q_cast=false", "enabled.k_cast=false"});
  const auto engine = simulate(c);
  ASSERT_EQ(ideal.size(), engine.size());
  for (size_t i = 0; i < ideal.size(); ++i) {
    EXPECT_EQ(engine[i].order, block_order::forward);
    EXPECT_EQ(engine[i].scale, 1.0);
    EXPECT_GT(ideal[i].underflow_measured, 0.0);
    EXPECT_NEAR(engine[i].underflow_measured, ideal[i].underflow_measured, 1e-3 * ideal[i].underflow_measured)
        << "delta " << ideal[i].delta;
  }
}

}  // namespace
}  // namespace attnum::pcast
