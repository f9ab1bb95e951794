// Randomized Hadamard and key centering: orthogonality against the explicit Sylvester matrix, and
// invariance of fp64 attention (1e-12) under rotation, centering and both.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attnum/attention/reference.h"
#include "attnum/core/error.h"
#include "attnum/transforms/centering.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::transforms {
namespace {

std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> x(n);
  for (auto& e : x) e = nd(rng);
  return x;
}

// H[i][j] = (-1)^popcount(i & j) (Sylvester): the FWHT equals the explicit product.
TEST(transforms_test, fwht_matches_sylvester_matrix) {
  const int d = 32;
  auto x = randn(d, 1);
  auto y = x;
  fwht(y.data(), d);
  for (int i = 0; i < d; ++i) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
    EXPECT_NEAR(y[i], s, 1e-12);
  }
}

TEST(transforms_test, rotation_is_orthogonal_and_seeded) {
  const int d = 64;
  auto x = randn(2 * d, 2);
  auto y = x;
  rotate_rows(y.data(), 2, d, 7);
  double n0 = 0, n1 = 0, dot0 = 0, dot1 = 0;
  for (int c = 0; c < d; ++c) {
    n0 += x[c] * x[c], n1 += y[c] * y[c];
    dot0 += x[c] * x[d + c], dot1 += y[c] * y[d + c];
  }
  EXPECT_NEAR(n0, n1, 1e-12 * n0);
  EXPECT_NEAR(dot0, dot1, 1e-12 * n0);
  auto z = x;
  rotate_rows(z.data(), 2, d, 8);
  EXPECT_NE(z[0], y[0]);  // another seed, another matrix
  EXPECT_EQ(random_signs(d, 7), random_signs(d, 7));
  EXPECT_THROW(rotate_rows(x.data(), 1, 80, 7), error);
  EXPECT_THROW(rotate_rows(x.data(), 1, 96, 7), error);
}

TEST(transforms_test, attention_invariant_under_rotate_center_both) {
  for (int d : {64, 128}) {
    const int n = 70;
    auto q = randn(size_t(n) * d, 3), k = randn(size_t(n) * d, 4, 2.0), v = randn(size_t(n) * d, 5);
    for (int t = 0; t < n; ++t) k[size_t(t) * d + 3] += 6.0;  // a shared key offset
    const auto ref = attention::reference_attention(q.data(), k.data(), v.data(), n, n, d, true);
    for (int mode = 0; mode < 3; ++mode) {
      auto q2 = q, k2 = k;
      if (mode != 0) center_keys(k2.data(), n, d);
      if (mode != 1) {
        rotate_rows(q2.data(), n, d, 11);
        rotate_rows(k2.data(), n, d, 11);
      }
      const auto r = attention::reference_attention(q2.data(), k2.data(), v.data(), n, n, d, true);
      double num = 0, den = 0;
      for (size_t i = 0; i < ref.o.size(); ++i) num += std::pow(r.o[i] - ref.o[i], 2), den += ref.o[i] * ref.o[i];
      EXPECT_LT(std::sqrt(num / den), 1e-12) << "mode " << mode << " d " << d;
    }
  }
}

TEST(transforms_test, centering_full_and_causal_prefix) {
  const int n = 5, d = 2;
  std::vector<double> k = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50};
  auto a = k;
  center_keys(a.data(), n, d);
  EXPECT_DOUBLE_EQ(a[0], -2.0);
  EXPECT_DOUBLE_EQ(a[9], 20.0);
  auto b = k;
  center_keys(b.data(), n, d, true);
  EXPECT_DOUBLE_EQ(b[0], 0.0);              // 1 - 1
  EXPECT_DOUBLE_EQ(b[2 * d], 3.0 - 2.0);    // 3 - mean(1,2,3)
  EXPECT_DOUBLE_EQ(b[4 * d + 1], 50 - 30);  // 50 - mean(10..50)
}

}  // namespace
}  // namespace attnum::transforms
