// Tests of the P-cast closed forms against independent oracles: known order-statistic values,
// Monte Carlo of the actual E4M3 cast, and the E4M3 grid read through formats.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/pcast/theory.h"

namespace attnum::pcast {
namespace {

double phi_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

TEST(theory_test, delta_k_known_values) {
  EXPECT_NEAR(delta_k(1), 0.0, 1e-12);
  EXPECT_NEAR(delta_k(2), 1.0 / std::sqrt(std::numbers::pi), 1e-12);
  // E[max of 3] = 3 / (2 sqrt(pi)) (closed form), E[max of 4] = 1.0293753730 (order-statistic tables).
  EXPECT_NEAR(delta_k(3), 1.5 / std::sqrt(std::numbers::pi), 1e-12);
  EXPECT_NEAR(delta_k(4), 1.0293753730, 1e-9);
  EXPECT_THROW(delta_k(0), attnum::error);
}

TEST(theory_test, flush_constant_is_exact_10_ln_2) {
  EXPECT_DOUBLE_EQ(kLn2Times10, 10.0 * std::log(2.0));
  EXPECT_DOUBLE_EQ(kLn448, std::log(448.0));
  // The flush threshold is half the smallest subnormal: the cast itself says so.
  EXPECT_EQ(formats::quantize_e4m3_sat(std::ldexp(1.0f, -10)), 0.0f);
  EXPECT_GT(formats::quantize_e4m3_sat(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0.0f);
}

TEST(theory_test, delta_c_is_where_f_is_one_half) {
  for (double s : {1.0, 256.0, 448.0}) {
    EXPECT_NEAR(underflow_closed_form(delta_c(s, 4), s, 4), 0.5, 1e-12);
    EXPECT_NEAR(delta_c(s, 4), 10 * std::log(2.0) + std::log(s) - 1.0293753730, 1e-9);
  }
}

// F(Delta, S) is the probability that the E4M3 cast of S * exp(s - m) is zero when the running
// max m is set to Delta + delta_k. Monte Carlo of the real cast (fp32 exp, quantize_e4m3_sat).
TEST(theory_test, closed_form_matches_monte_carlo_of_the_cast) {
  std::mt19937_64 gen(42);
  std::normal_distribution<double> normal;
  const int n = 200000;
  for (double delta : {5.0, 6.5, 8.0}) {
    for (double s : {1.0, 256.0}) {
      const double m = delta + delta_k(4);
      int zeros = 0;
      for (int i = 0; i < n; ++i) {
        const float p = std::exp(static_cast<float>(normal(gen)) - static_cast<float>(m));
        zeros += formats::quantize_e4m3_sat(p * static_cast<float>(s)) == 0.0f;
      }
      const double f = underflow_closed_form(delta, s, 4), mc = double(zeros) / n;
      const double se = std::sqrt(std::max(f * (1 - f), 1e-6) / n);
      EXPECT_NEAR(mc, f, 5 * se + 1e-5) << "delta " << delta << " S " << s;
    }
  }
}

// The exact expectation against a direct simulation of the running max (fp64 scores, no
// kernel): forward and reverse order, N = 512, B = 64.
TEST(theory_test, exact_expectation_matches_direct_running_max_count) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  const row_shape shape{512, 64, 4};
  const int rows = 1500;
  for (double delta : {4.0, 7.0, 10.0})
    for (double s : {1.0, 256.0})
      for (auto order : {block_order::forward, block_order::reverse}) {
        std::vector<double> frac;
        for (int r = 0; r < rows; ++r) {
          std::vector<double> z(shape.n_tok);
          for (int j = 0; j < shape.n_tok; ++j) z[j] = normal(gen) + (j < shape.k_sink ? delta : 0);
          const int nb = shape.n_tok / shape.block;
          double m = -INFINITY;
          int under = 0;
          for (int t = 0; t < nb; ++t) {
            const int b = order == block_order::forward ? t : nb - 1 - t;
            for (int j = b * shape.block; j < (b + 1) * shape.block; ++j) m = std::max(m, z[j]);
            for (int j = b * shape.block; j < (b + 1) * shape.block; ++j)
              under += j >= shape.k_sink && z[j] < m - flush_threshold(s);
          }
          frac.push_back(double(under) / (shape.n_tok - shape.k_sink));
        }
        double mean = 0, var = 0;
        for (double f : frac) mean += f / rows;
        for (double f : frac) var += (f - mean) * (f - mean) / (rows - 1);
        const double exact = underflow_exact(delta, s, shape, order);
        EXPECT_NEAR(mean, exact, 5 * std::sqrt(var / rows) + 1e-6)
            << "delta " << delta << " S " << s << " " << order_name(order);
      }
}

TEST(theory_test, dp_is_two_to_minus_four_at_powers_of_two) {
  for (int k = 0; k <= 8; ++k) EXPECT_EQ(dp(std::ldexp(1.0, k)), 0.0625) << "S = 2^" << k;
}

TEST(theory_test, dp_is_larger_off_powers_of_two_and_above_448) {
  for (int s = 1; s <= 1024; ++s) {
    if ((s & (s - 1)) == 0 && s <= 256) continue;
    EXPECT_GT(dp(s), 0.0625) << "S = " << s;
  }
  for (double s = 1.0 / 64; s < 448; s *= 1.0137) {  // a geometric walk that avoids 2^k
    if (std::exp2(std::round(std::log2(s))) == s) continue;
    EXPECT_GT(dp(s), 0.0625) << "S = " << s;
  }
  // 448: the top interval [416, 448] has spacing 32 (binade [256, 512), 3 mantissa bits).
  EXPECT_DOUBLE_EQ(dp(448), 32.0 / 448);
  EXPECT_NEAR(dp(448) / dp(256), 8.0 / 7, 1e-12);  // the dutch summary's "14% higher"
}

TEST(theory_test, reverse_bound_values) {
  const auto r = reverse_bound(1000000, 256);
  EXPECT_NEAR(r.sqrt_2_ln_n, 5.2565, 1e-4);
  EXPECT_NEAR(r.paper_m, 2 * std::log(1e6) + 1, 1e-12);
  // E[max of 1e6 normals] = 4.8629 (independent Riemann sum of 1 - Phi^N).
  EXPECT_NEAR(r.max_mean, 4.8629, 2e-3);
  EXPECT_NEAR(r.flush, 18 * std::log(2.0), 1e-12);  // 10 ln 2 + ln 256 = 12.477
  // P(M_N > q) = 1e-6.
  EXPECT_NEAR(1 - std::pow(phi_cdf(r.max_q999999), 1e6), 1e-6, 1e-8);
  EXPECT_LT(r.p_underflow, phi_cdf(r.max_q999999 - r.flush) + 1e-6);
  EXPECT_LT(r.expected_count, 1e-5);
}

TEST(theory_test, parse_range_is_inclusive_and_checks_input) {
  EXPECT_EQ(parse_range("0:12:0.5", "x").size(), 25u);
  const auto v = parse_range("0:1:0.1", "x");
  ASSERT_EQ(v.size(), 11u);
  EXPECT_NEAR(v.back(), 1.0, 1e-12);
  EXPECT_EQ(parse_list("1,256,448", "x"), (std::vector<double>{1, 256, 448}));
  EXPECT_EQ(parse_range("1:512:1", "x").size(), 512u);
  EXPECT_THROW(parse_range("1:2", "x"), attnum::error);
  EXPECT_THROW(parse_range("1:2:0", "x"), attnum::error);
  EXPECT_THROW(parse_range("a", "x"), attnum::error);
  EXPECT_THROW(parse_range("3:2:1", "x"), attnum::error);
  EXPECT_EQ(theory_table(parse_range("0:12:0.5", "d"), {1, 256, 448}, row_shape{}).size(), 75u);
}

}  // namespace
}  // namespace attnum::pcast
