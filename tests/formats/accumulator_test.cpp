// Accumulator models against plain loops, closed forms and hand-computed cases.
#include "oracles/accumulator_oracle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"

namespace {
using namespace attnum::formats;
using namespace attnum::oracle;

std::vector<float> random_floats(int n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(accumulator, fp32_step_one_is_an_fma_loop) {
  const auto a = random_floats(1000, 1), b = random_floats(3000, 2, 3.0f);
  for (int stride : {1, 3}) {
    float want = 0.5f;
    for (int i = 0; i < 1000; ++i) want = std::fmaf(a[i], b[i * stride], want);
    const float got = accumulate_dot({accum_kind::fp32, 23, 1}, 0.5f, a.data(), b.data(), 1000, stride);
    EXPECT_EQ(got, want);
  }
}

TEST(accumulator, fp32_chunks_round_once_against_exact_e4m3_sums) {
  // Products of e4m3 values are multiples of 2^-18 below 2^18: exact in double, and so are sums
  // of a few thousand of them. The reference is therefore a plain double loop per chunk.
  std::vector<float> a = random_floats(777, 3, 40.0f), b = random_floats(777, 4, 40.0f);
  for (float& x : a) x = quantize_e4m3_sat(x);
  for (float& x : b) x = quantize_e4m3_sat(x);
  for (int k : {1, 4, 32, 1000}) {
    float acc = -3.25f;
    for (int i0 = 0; i0 < 777; i0 += k) {
      double s = acc;
      for (int i = i0; i < std::min(777, i0 + k); ++i) s += static_cast<double>(a[i]) * b[i];
      acc = static_cast<float>(s);
    }
    EXPECT_EQ(accumulate_dot({accum_kind::fp32, 23, k}, -3.25f, a.data(), b.data(), 777), acc) << k;
  }
}

TEST(accumulator, single_rounding_of_the_exact_sum_not_of_a_double_sum) {
  // 1 + 2^-24 + 2^-80: the exact sum lies above the fp32 midpoint 1 + 2^-24, so RN gives
  // 1 + 2^-23; summing in double first would lose 2^-80 and round the tie to even, 1.0.
  const float a[] = {0x1p-24f, 0x1p-40f}, b[] = {1.0f, 0x1p-40f};
  EXPECT_EQ(accumulate_dot({accum_kind::fp32, 23, 2}, 1.0f, a, b, 2), 1.0f + 0x1p-23f);
  // Truncation: 2 - 2^-80 must truncate to below 2 (1.111..1 in 13 bits), not to 2.
  const float c[] = {1.0f, -0x1p-40f}, d[] = {1.0f, 0x1p-40f};
  EXPECT_EQ(accumulate_dot({accum_kind::truncated, 13, 2}, 0.0f + 1.0f, c, d, 2), 2.0f - 0x1p-13f);
}

TEST(accumulator, truncated_hand_computed) {
  // 2 fraction bits: the grid in [1, 2) is 1, 1.25, 1.5, 1.75.
  const float a[] = {1.0f, 1.0f, 1.0f}, b[] = {1.0f, 0.2f, 0.3f};
  // k_step 1: 1 -> 1 + 0.2 = 1.2 -> 1.0 -> 1.0 + 0.3 = 1.3 -> 1.25.
  EXPECT_EQ(accumulate_dot({accum_kind::truncated, 2, 1}, 0.0f, a, b, 3), 1.25f);
  // k_step 3: 1.5 exactly (up to the float 0.2f + 0.3f error, which is below the grid) -> 1.5.
  EXPECT_EQ(accumulate_dot({accum_kind::truncated, 2, 3}, 0.0f, a, b, 3), 1.5f);
  // Toward zero on the negative side: -1.3 -> -1.25.
  const float na[] = {-1.0f, -1.0f, -1.0f};
  EXPECT_EQ(accumulate_dot({accum_kind::truncated, 2, 1}, 0.0f, na, b, 3), -1.25f);
  // 13 bits against floor(x * 2^13) / 2^13 in [1, 2).
  for (float x : {1.0f, 1.2345678f, 1.99999988f, 1.5f + 0x1p-14f}) {
    EXPECT_EQ(truncate_mantissa(x, 13), std::floor(x * 8192.0f) / 8192.0f) << x;
    EXPECT_EQ(truncate_mantissa(-x, 13), -std::floor(x * 8192.0f) / 8192.0f) << x;
    EXPECT_EQ(round_accumulator({accum_kind::truncated, 13, 1}, x), std::floor(x * 8192.0f) / 8192.0f);
  }
  EXPECT_EQ(truncate_mantissa(3.0e-39f, 2), std::floor(3.0e-39 / 0x1p-128) * 0x1p-128);  // subnormal grid
  EXPECT_TRUE(std::isinf(truncate_mantissa(INFINITY, 5)));
  EXPECT_TRUE(std::isnan(truncate_mantissa(NAN, 5)));
  EXPECT_EQ(truncate_mantissa(1.7f, 23), 1.7f);
}

TEST(accumulator, fp16_rounds_to_nearest_even_and_overflows) {
  const accumulator_model h{accum_kind::fp16, 10, 1};
  const float one[] = {1.0f, 1.0f};
  const float x1[] = {1.0f, 0.0f}, x3[] = {3.0f, 0.0f};
  // fp16 spacing in [2048, 4096) is 2: 2049 ties to even 2048; 2051 ties to 2052.
  EXPECT_EQ(accumulate_dot(h, 2048.0f, one, x1, 1), 2048.0f);
  EXPECT_EQ(accumulate_dot(h, 2048.0f, one, x3, 1), 2052.0f);
  const float big[] = {60000.0f, 60000.0f};
  EXPECT_TRUE(std::isinf(accumulate_dot(h, 0.0f, big, one, 2)));
  EXPECT_EQ(accumulate_dot(h, 0.0f, big, one, 1), 60000.0f);
  EXPECT_EQ(round_accumulator(h, 65519.0), 65504.0f);
  EXPECT_TRUE(std::isinf(round_accumulator(h, -65520.0)));
  EXPECT_EQ(round_accumulator(h, 0.1), static_cast<float>(decode(format::fp16, encode(format::fp16, 0.1))));
}

// Once the fp16 accumulator overflows, later chunks add finite sums to Inf: IEEE gives Inf of
// the same sign (a double-double exact sum would give NaN).
TEST(accumulator, overflowed_accumulator_stays_infinite) {
  const accumulator_model h{accum_kind::fp16, 10, 2};
  const float a[] = {60000.0f, 60000.0f, -1.0f, 3.0f, -70000.0f, 5.0f};
  const float b[] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const float r = accumulate_dot(h, 0.0f, a, b, 6);
  EXPECT_TRUE(std::isinf(r) && r > 0) << r;
  EXPECT_TRUE(std::isnan(accumulate_dot(h, NAN, a, b, 6)));
  EXPECT_EQ(accumulate_dot(h, -INFINITY, a, b, 6), -INFINITY);
}

TEST(accumulator, parse) {
  EXPECT_EQ(parse_accumulator("fp32").kind, accum_kind::fp32);
  EXPECT_EQ(parse_accumulator("fp16").kind, accum_kind::fp16);
  const auto t = parse_accumulator("trunc13", 32);
  EXPECT_EQ(t.kind, accum_kind::truncated);
  EXPECT_EQ(t.mantissa_bits, 13);
  EXPECT_EQ(t.k_step, 32);
  EXPECT_EQ(parse_accumulator("truncated").mantissa_bits, 13);
  EXPECT_THROW(parse_accumulator("trunc99"), attnum::error);
  EXPECT_THROW(parse_accumulator("bf16"), attnum::error);
}

}  // namespace
