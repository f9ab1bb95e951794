// fast::exp2f_array against std::exp2f, bit for bit: the engine's P = exp2f(...) relies on it.
// Dense samples here; every float in perf_exp2_slow_test.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "attnum/attention/fast_exp2.h"

namespace attnum::attention {
namespace {

void expect_same(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  fast::exp2f_array(x.data(), y.data(), static_cast<int>(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp2f(x[i]);
    if (std::isnan(want) && std::isnan(y[i])) continue;
    if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(y[i]) && ++bad <= 5)
      ADD_FAILURE() << "exp2f(" << std::hexfloat << x[i] << ") = " << want << ", array gives " << y[i];
  }
  EXPECT_EQ(bad, 0);
}

TEST(perf_exp2, consecutive_floats_around_softmax_range) {
  // 2^20 consecutive floats from a few starting points in the range P's arguments take
  std::vector<float> x;
  for (float start : {-0.5f, -7.25f, -20.0f, -126.5f, 0.0f, 3.0f})
    for (uint32_t u = std::bit_cast<uint32_t>(start), i = 0; i < (1u << 17); ++i)
      x.push_back(std::bit_cast<float>(u + i));
  expect_same(x);
}

TEST(perf_exp2, random_and_special_inputs) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-160.0f, 140.0f);
  std::vector<float> x(1 << 18);
  for (auto& v : x) v = u(rng);
  // specials and range edges, at every lane position (odd length exercises the scalar tail)
  for (float s : {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, 128.0f, -128.0f, 127.99999f, -127.99999f, -149.0f, -150.0f,
                  -151.0f, 1e-30f, -1e-30f, 0x1p-32f, 1.0f / 64, -1.0f / 64, 0.015625f * 3})
    for (int k = 0; k < 9; ++k) x.push_back(s);
  expect_same(x);
  // random bit patterns over the whole float range
  std::vector<float> b(1 << 18);
  for (auto& v : b) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  expect_same(b);
}

// exp2f_fma_array(x, a, b) == exp2f(fmaf(x, a, b)) bit for bit, as the fused FA3 softmax pass
// uses it: scores times a scale minus a max, with the causal mask's -Inf among them.
TEST(perf_exp2, fused_fma_matches_scalar) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  std::vector<float> x(1 << 16);
  for (auto& v : x) v = nd(rng);
  for (float s : {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, 1e30f, -1e30f, 300.0f, -300.0f})
    for (int k = 0; k < 17; ++k) x.push_back(s);
  for (auto [a, b] :
       {std::pair{0.12752f, -3.5f}, std::pair{1.0f, 0.0f}, std::pair{0.0883883f, -41.0f}, std::pair{2.5f, 7.0f}}) {
    for (int n : {static_cast<int>(x.size()), 1, 7, 15, 16, 17, 31}) {
      std::vector<float> y(n);
      fast::exp2f_fma_array(x.data(), a, b, y.data(), n);
      int bad = 0;
      for (int i = 0; i < n; ++i) {
        const float want = std::exp2f(std::fmaf(x[i], a, b));
        if (std::isnan(want) && std::isnan(y[i])) continue;
        if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(y[i]) && ++bad <= 5)
          ADD_FAILURE() << "exp2f(fmaf(" << x[i] << ", " << a << ", " << b << ")) = " << want << ", fused gives "
                        << y[i];
      }
      EXPECT_EQ(bad, 0) << "n " << n;
    }
  }
}

// In place (in == out), as the engine calls it, with lanes that take the scalar path.
TEST(perf_exp2, in_place_with_scalar_lanes) {
  std::vector<float> x;
  for (int i = 0; i < 1000; ++i)
    x.push_back(i % 7 == 3 ? (i % 2 ? 200.0f : -300.0f) : (i % 11 == 5 ? NAN : -0.37f * i));
  std::vector<float> y = x;
  fast::exp2f_array(y.data(), y.data(), static_cast<int>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp2f(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(y[i])) << "x " << x[i] << " at " << i;
  }
}

TEST(perf_exp2, vector_path_active_on_this_machine) {
  // Not a correctness condition (the scalar fallback is exact too), but the engine's speed
  // depends on it: report when the self-check rejected the vector path.
  if (!fast::exp2f_vector_active()) GTEST_SKIP() << "vector exp2f path inactive (no AVX-512 or a different libm)";
  SUCCEED();
}

}  // namespace
}  // namespace attnum::attention
