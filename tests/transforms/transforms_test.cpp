// Rotations and key centering: orthogonality against the explicit Sylvester matrix, invariance of
// fp64 attention (1e-12) under rotation, centering and both; the default's signs rebuilt from the
// documented recipe; explicit matrices (validation, the default's own matrix bit for bit, a dense
// matrix against an independent long-double product); rounding to the transform dtype against the
// brute-force nearest-value reference of tests/formats/oracle.h.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attnum/attention/reference.h"
#include "attnum/core/error.h"
#include "attnum/transforms/centering.h"
#include "attnum/transforms/hadamard.h"
#include "formats/oracle.h"

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

// Independent RNE rounding of a double to bf16/fp16 (brute-force nearest value; no attnum code).
float oracle_round(formats::format f, double x) {
  if (f == formats::format::fp32) return static_cast<float>(x);
  static const oracle::nearest_reference bf(formats::format::bf16), hf(formats::format::fp16);
  const auto& ref = f == formats::format::bf16 ? bf : hf;
  const auto code = ref.magnitude_code(std::fabs(x));
  const double v = code ? ref.values[*code] : INFINITY;
  return static_cast<float>(std::copysign(v, x));
}

TEST(transforms_test, round_to_matches_nearest_reference) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-8, 8);
  for (auto f : {formats::format::bf16, formats::format::fp16})
    for (int i = 0; i < 20000; ++i) {
      double x = std::ldexp(u(rng), static_cast<int>(rng() % 20) - 10);
      if (i % 4 == 0) {  // an exact tie between two bf16/fp16 values, and one double ulp either side
        const double a = oracle_round(f, x), ulp = formats::ulp(f, a);
        x = a + ulp / 2 + (i % 3 - 1) * std::ldexp(std::fabs(a), -52);
      }
      ASSERT_EQ(round_to(f, x), oracle_round(f, x)) << formats::info(f).name << " " << x;
    }
  EXPECT_EQ(round_to(formats::format::fp16, 70000.0), INFINITY);  // IEEE overflow, as torch .half()
  EXPECT_THROW(check_transform_dtype(formats::format::e4m3fn, "t"), error);
}

// The default rebuilt from docs (hadamard.h / kernels.md): splitmix64 from state = seed, the top
// bit of each output a minus sign, R = diag(s) H_d / sqrt(d).
TEST(transforms_test, default_rotation_is_the_documented_matrix) {
  for (int d : {8, 64, 128}) {
    uint64_t state = kDefaultRotationSeed;
    std::vector<double> s(d);
    for (auto& x : s) {
      uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      x = (z >> 63) ? -1.0 : 1.0;
    }
    const auto R = rotation().matrix(d);
    const auto H = rotation::hadamard().matrix(d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) {
        const double h = (__builtin_popcount(i & j) & 1) ? -1.0 : 1.0;
        ASSERT_EQ(R[i * d + j], s[i] * h * (1.0 / std::sqrt(double(d)))) << d << " " << i << " " << j;
        ASSERT_EQ(H[i * d + j], h * (1.0 / std::sqrt(double(d))));
      }
  }
  EXPECT_EQ(rotation().name(), "random-hadamard:24301");
  EXPECT_EQ(rotation::parse_builtin("random-hadamard:0x5eed")->matrix(16), rotation().matrix(16));
  EXPECT_EQ(rotation::parse_builtin("hadamard")->name(), "hadamard");
  EXPECT_FALSE(rotation::parse_builtin("r.npy"));
  EXPECT_THROW(rotation::parse_builtin("random-hadamard:12x"), error);
}

// The default's own matrix given as an explicit [d, d] float64 matrix: identical bits (rotation
// and rounding), also for d = 128 whose 1/sqrt(d) is inexact.
TEST(transforms_test, explicit_default_matrix_gives_identical_bits) {
  for (int d : {64, 128}) {
    const int rows = 50;
    auto x0 = randn(size_t(rows) * d, 21);
    std::vector<float> x(x0.begin(), x0.end());
    const rotation file = rotation::from_matrix(rotation().matrix(d), {d, d}, "R.npy");
    EXPECT_EQ(file.name(), "R.npy");
    EXPECT_EQ(file.dim(), d);
    for (auto f : {formats::format::fp32, formats::format::bf16}) {
      auto a = x, b = x;
      rotation().apply(a.data(), rows, d, f);
      file.apply(b.data(), rows, d, f);
      ASSERT_EQ(a, b) << d;
    }
  }
}

// A dense orthogonal matrix (not of the Hadamard family): y = x·R in double then one rounding,
// against a long-double product rounded by the independent oracle.
TEST(transforms_test, dense_rotation_is_x_times_r_rounded_once) {
  const int d = 32, rows = 40;
  // R = (H / sqrt(d)) G, G a Givens rotation of channels (1, 5) by 0.3 rad: orthogonal, dense.
  auto R = rotation::hadamard().matrix(d);
  const double c = std::cos(0.3), sn = std::sin(0.3);
  for (int i = 0; i < d; ++i) {
    const double a = R[i * d + 1], b = R[i * d + 5];
    R[i * d + 1] = c * a - sn * b, R[i * d + 5] = sn * a + c * b;
  }
  const rotation rot = rotation::from_matrix(R, {d, d}, "givens.npy");
  auto x0 = randn(size_t(rows) * d, 22, 3.0);
  for (auto f : {formats::format::fp32, formats::format::bf16, formats::format::fp16}) {
    std::vector<float> x(x0.begin(), x0.end());
    const auto in = x;
    rot.apply(x.data(), rows, d, f);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < d; ++j) {
        long double y = 0;
        for (int i = 0; i < d; ++i) y += static_cast<long double>(in[r * d + i]) * R[i * d + j];
        ASSERT_EQ(x[r * d + j], oracle_round(f, static_cast<double>(y)))
            << formats::info(f).name << " " << r << " " << j;
      }
  }
}

TEST(transforms_test, explicit_matrix_validation_names_the_file_and_problem) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto I4 = rotation::hadamard().matrix(4);
  EXPECT_NE(message([&] {
              rotation::from_matrix(std::vector<double>(12, 0.0), {3, 4}, "a.npy");
            }).find("a.npy: a rotation must be a square"),
            std::string::npos);
  EXPECT_NE(message([&] { rotation::from_matrix(I4, {16}, "b.npy"); }).find("square"), std::string::npos);
  auto bad = I4;
  bad[5] = NAN;
  EXPECT_NE(message([&] {
              rotation::from_matrix(bad, {4, 4}, "c.npy");
            }).find("c.npy: rotation entry [1, 1] is not finite"),
            std::string::npos);
  bad = I4;
  for (auto& e : bad) e *= 1.00001;  // |R R^T - I| = 2e-5
  EXPECT_NE(message([&] {
              rotation::from_matrix(bad, {4, 4}, "d.npy");
            }).find("d.npy: rotation is not orthogonal"),
            std::string::npos);
  for (auto& e : bad) e = e / 1.00001 * (1 + 1e-8);  // within 1e-6: accepted
  EXPECT_EQ(message([&] { rotation::from_matrix(bad, {4, 4}, "e.npy"); }), "no error");
  const rotation r4 = rotation::from_matrix(I4, {4, 4}, "f.npy");
  EXPECT_NE(message([&] { r4.check(8); }).find("f.npy: the rotation is [4, 4] but the head dim is 8"),
            std::string::npos);
  EXPECT_NE(message([] { rotation().check(96); }).find("head dim 96 is not a power of two"), std::string::npos);
  // A [3, 3] permutation: no power of two needed for an explicit matrix.
  const rotation p3 = rotation::from_matrix({0, 1, 0, 0, 0, 1, 1, 0, 0}, {3, 3}, "p.npy");
  std::vector<float> x = {1, 2, 3};
  p3.apply(x.data(), 1, 3);
  EXPECT_EQ(x, (std::vector<float>{3, 1, 2}));
}

// Centering into bf16: each result is the oracle's rounding of x - mean (mean in double).
TEST(transforms_test, centering_rounds_once_to_the_transform_dtype) {
  const int n = 33, d = 16;
  auto k0 = randn(size_t(n) * d, 23, 2.0);
  std::vector<float> k(k0.begin(), k0.end());
  for (bool causal : {false, true}) {
    auto a = k;
    center_keys(a.data(), n, d, causal, formats::format::bf16);
    for (int c = 0; c < d; ++c) {
      double sum = 0;
      for (int t = 0; t < n; ++t) {
        sum += k[t * d + c];
        double mean = sum / (t + 1);
        if (!causal) {
          mean = 0;
          for (int u = 0; u < n; ++u) mean += k[u * d + c];
          mean /= n;
        }
        ASSERT_EQ(a[t * d + c], oracle_round(formats::format::bf16, k[t * d + c] - mean)) << causal << " " << t;
      }
    }
  }
}

}  // namespace
}  // namespace attnum::transforms
