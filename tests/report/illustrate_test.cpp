// The illustration's numbers against an independent fp64 computation written here: the
// Hadamard matrix built by Kronecker products, and E4M3 rounding by nearest search over the
// table of all finite E4M3 values (ties to the even code), not the library's fast cast.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "attnum/transforms/hadamard.h"
#include "attnum/report/illustrate.h"

namespace {
using attnum::report::ivec;
constexpr int kD = 8, kN = 4;

// All non-negative finite E4M3FN values in code order (code c: exponent c>>3, mantissa c&7).
std::vector<double> e4m3_table() {
  std::vector<double> v;
  for (int c = 0; c < 127; ++c) {  // 127 = 0x7f is NaN
    int e = c >> 3, m = c & 7;
    v.push_back(e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7));
  }
  return v;
}

// Nearest E4M3 value to x (saturating at 448), ties to the even code.
double round_e4m3(double x) {
  static const std::vector<double> t = e4m3_table();
  double a = std::min(std::fabs(x), 448.0);
  size_t best = 0;
  for (size_t c = 1; c < t.size(); ++c) {
    double dc = std::fabs(t[c] - a), db = std::fabs(t[best] - a);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return std::copysign(t[best], x);
}

std::vector<std::vector<double>> hadamard8() {
  std::vector<std::vector<double>> h = {{1.0}};
  while (h.size() < kD) {
    size_t n = h.size();
    std::vector<std::vector<double>> g(2 * n, std::vector<double>(2 * n));
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        g[i][j] = g[i][j + n] = g[i + n][j] = h[i][j];
        g[i + n][j + n] = -h[i][j];
      }
    h = g;
  }
  return h;
}

ivec rot(const ivec& x) {
  static const auto h = hadamard8();
  const ivec s = attnum::report::illustration_signs();
  ivec y{};
  for (int i = 0; i < kD; ++i)
    for (int j = 0; j < kD; ++j) y[i] += h[i][j] * s[j] * x[j] / std::sqrt(8.0);
  return y;
}

// Casts vectors with one amax/448 scale (float32 scale, float32 division, as the page states).
std::vector<ivec> cast(const std::vector<ivec>& v) {
  float amax = 0;
  for (auto& r : v)
    for (double x : r) amax = std::max(amax, std::fabs(float(x)));
  float s = amax / 448.0f;
  std::vector<ivec> out = v;
  for (auto& r : out)
    for (double& x : r) x = round_e4m3(double(float(x) / s)) * double(s);
  return out;
}

std::array<double, kN> softmax(const ivec& q, const std::vector<ivec>& k) {
  std::array<double, kN> w{}, s{};
  for (int j = 0; j < kN; ++j)
    for (int i = 0; i < kD; ++i) s[j] += q[i] * k[j][i] / std::sqrt(8.0);
  double m = std::max(std::max(s[0], s[1]), std::max(s[2], s[3])), sum = 0;
  for (int j = 0; j < kN; ++j) sum += (w[j] = std::exp(s[j] - m));
  for (double& x : w) x /= sum;
  return w;
}

void check_against_oracle(double common, bool center) {
  SCOPED_TRACE(testing::Message() << "common " << common << " center " << center);
  const auto ill = attnum::report::illustrate(common, center);
  std::vector<ivec> k(ill.k.begin(), ill.k.end());
  std::vector<ivec> orig = k;
  for (int j = 0; j < kN; ++j) {
    if (!center) {
      EXPECT_EQ(k[j][0], common);
    }
  }
  if (center) {  // the keys given to the casts have zero mean per channel
    for (int i = 0; i < kD; ++i) {
      double m = 0;
      for (auto& r : k) m += r[i];
      EXPECT_NEAR(m, 0.0, 1e-12);
    }
  }
  // Exact weights: from the uncentered keys (first coordinate = common).
  std::vector<ivec> uncentered = k;
  if (center) {
    const auto plain = attnum::report::illustrate(common, false);
    uncentered.assign(plain.k.begin(), plain.k.end());
  }
  const auto w_exact = softmax(ill.q, uncentered);
  const auto q8 = cast({ill.q})[0];
  const auto k8 = cast(k);
  const auto w8 = softmax(q8, k8);
  std::vector<ivec> kr;
  for (auto& r : k) kr.push_back(rot(r));
  const auto qr8 = cast({rot(ill.q)})[0];
  const auto kr8 = cast(kr);
  const auto wr8 = softmax(qr8, kr8);
  double tv = 0, tvr = 0;
  for (int j = 0; j < kN; ++j) {
    EXPECT_NEAR(ill.w_exact[j], w_exact[j], 1e-12);
    EXPECT_NEAR(ill.w_fp8[j], w8[j], 1e-12);
    EXPECT_NEAR(ill.w_fp8_rot[j], wr8[j], 1e-12);
    for (int i = 0; i < kD; ++i) {
      EXPECT_NEAR(ill.k_fp8[j][i], k8[j][i], 1e-12 * (1 + std::fabs(k8[j][i])));
      EXPECT_NEAR(ill.k_rot_fp8[j][i], kr8[j][i], 1e-12 * (1 + std::fabs(kr8[j][i])));
    }
    tv += std::fabs(w8[j] - w_exact[j]) / 2;
    tvr += std::fabs(wr8[j] - w_exact[j]) / 2;
  }
  for (int i = 0; i < kD; ++i) EXPECT_NEAR(ill.q_rot_fp8[i], qr8[i], 1e-12);
  EXPECT_NEAR(ill.tv_fp8, tv, 1e-12);
  EXPECT_NEAR(ill.tv_fp8_rot, tvr, 1e-12);
}
}  // namespace

TEST(illustrate_test, signs_are_the_studys_rotation_signs) {
  // The illustration uses the same seeded sign diagonal as the study (engine's default seed).
  const uint64_t seed = attnum::transforms::kDefaultRotationSeed;
  const ivec s = attnum::report::illustration_signs();
  const auto ref = attnum::transforms::random_signs(kD, seed);
  for (int i = 0; i < kD; ++i) EXPECT_EQ(s[i], ref[i]);
  // The page says the 8-channel prefix is all +1 while wider heads get mixed signs: check it.
  const auto wide = attnum::transforms::random_signs(128, seed);
  int plus = 0;
  for (double x : wide) plus += x > 0;
  EXPECT_GT(plus, 32);
  EXPECT_LT(plus, 96);
}

TEST(illustrate_test, matches_independent_fp64_oracle_at_every_slider_position) {
  for (double c : attnum::report::illustration_commons()) {
    check_against_oracle(c, false);
    check_against_oracle(c, true);
  }
  check_against_oracle(-37.5, false);
  check_against_oracle(1000, true);
}

TEST(illustrate_test, exact_weights_do_not_depend_on_the_common_coordinate) {
  // The common coordinate adds q[0]*common/sqrt(8) to every score; softmax cancels it.
  const auto base = attnum::report::illustrate(0, false);
  for (double c : {2.0, 50.0, 240.0}) {
    const auto ill = attnum::report::illustrate(c, false);
    for (int j = 0; j < kN; ++j) EXPECT_NEAR(ill.w_exact[j], base.w_exact[j], 1e-12);
    const auto cen = attnum::report::illustrate(c, true);
    for (int j = 0; j < kN; ++j) EXPECT_EQ(cen.w_exact[j], ill.w_exact[j]);
  }
}

TEST(illustrate_test, rotation_harms_a_large_common_coordinate_and_centering_removes_it) {
  // The mechanism the page shows: at common = 200 the rotated FP8 weights move far more mass
  // than the unrotated ones; centering makes the keys independent of `common`.
  const auto big = attnum::report::illustrate(200, false);
  EXPECT_GT(big.tv_fp8_rot, 5 * big.tv_fp8);
  const auto cen = attnum::report::illustrate(200, true);
  const auto cen0 = attnum::report::illustrate(0, true);
  for (int j = 0; j < kN; ++j) EXPECT_NEAR(cen.w_fp8_rot[j], cen0.w_fp8_rot[j], 1e-12);
}

TEST(illustrate_test, rejects_non_finite_common) {
  EXPECT_THROW(attnum::report::illustrate(NAN, false), attnum::error);
  EXPECT_THROW(attnum::report::illustrate(INFINITY, true), attnum::error);
}

TEST(illustrate_test, json_rows_hold_query_and_four_keys) {
  const auto rows = attnum::report::illustration_rows(attnum::report::illustrate(4, false));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0]["vector"], "q");
  EXPECT_TRUE(rows[0]["w_exact"].is_null());
  double sum = 0;
  for (int j = 1; j <= 4; ++j) sum += rows[j]["w_fp8_rot"].get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
}
