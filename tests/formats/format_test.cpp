// Bit-exact formats against independent oracles: the bit-layout formula and a brute-force nearest
// value search (oracle.h), and NVIDIA's host conversions where cuda_fp8.h is available.
#include "attnum/formats/format.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>

#include "attnum/core/error.h"
#include "formats/oracle.h"

namespace {
using namespace attnum::formats;

uint32_t code_count(format f) { return 1u << info(f).bits; }
uint32_t sign_bit(format f) { return 1u << (info(f).bits - 1); }

// The reference code for x (finite or Inf, not NaN) under RNE with the given saturation.
uint32_t reference_code(const oracle::nearest_reference& ref, double x, bool saturate) {
  const format f = ref.f;
  const uint32_t sign = std::signbit(x) ? sign_bit(f) : 0;
  const auto max_code = static_cast<uint32_t>(ref.values.size() - 1);
  std::optional<uint32_t> mag;
  if (!std::isinf(x)) mag = ref.magnitude_code(std::fabs(x));
  if (mag) return sign | *mag;
  if (saturate) return sign | max_code;
  return f == format::e4m3fn ? (sign | 0x7f) : (sign | (max_code + 1));  // NaN / Inf
}

// Dense float sample: every 16381st bit pattern, plus the midpoints of each format's grid and
// their float neighbours (the values where rounding decides).
std::vector<float> dense_floats() {
  std::vector<float> xs;
  for (uint64_t u = 0; u < (1ull << 32); u += 16381) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  for (format f : oracle::kFloatFormats) {
    oracle::nearest_reference ref(f);
    auto add_mid = [&](double mid) {
      const float m = static_cast<float>(mid);
      for (float v : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY)}) {
        xs.push_back(v);
        xs.push_back(-v);
      }
    };
    for (size_t i = 0; i + 1 < ref.values.size(); ++i) add_mid((ref.values[i] + ref.values[i + 1]) / 2);
    add_mid((ref.values.back() + ref.beyond) / 2);
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 448.0f, 464.0f, 57344.0f,
                  61440.0f, 65504.0f, 65520.0f})
    xs.push_back(v);
  return xs;
}

const std::vector<float>& sample() {
  static const std::vector<float> xs = dense_floats();
  return xs;
}

class float_format : public ::testing::TestWithParam<format> {};

TEST_P(float_format, decode_matches_bit_layout_for_every_code) {
  const format f = GetParam();
  for (uint32_t c = 0; c < code_count(f); ++c) {
    const double want = oracle::value_of(f, c), got = decode(f, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << c;
    } else {
      ASSERT_EQ(std::bit_cast<uint64_t>(want), std::bit_cast<uint64_t>(got)) << std::hex << c;
    }
    if constexpr (oracle::kHaveCuda) {
      const double cu = oracle::cuda_decode(f, c);
      if (std::isnan(cu))
        EXPECT_TRUE(std::isnan(got)) << std::hex << c;
      else
        ASSERT_EQ(cu, got) << std::hex << c;
    }
  }
}

TEST_P(float_format, every_code_round_trips) {
  const format f = GetParam();
  for (uint32_t c = 0; c < code_count(f); ++c) {
    const double v = decode(f, c);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(decode(f, encode(f, v)))) << std::hex << c;
      continue;
    }
    ASSERT_EQ(encode(f, v, rounding::nearest_even, false), c) << std::hex << c;
    ASSERT_EQ(encode(f, static_cast<float>(v), rounding::nearest_even, false), c) << std::hex << c;
    for (rounding r : {rounding::half_away, rounding::toward_zero})
      if (std::isfinite(v)) {
        ASSERT_EQ(encode(f, v, r, true), c) << std::hex << c;
      }
  }
}

TEST_P(float_format, dense_floats_match_nearest_value_reference) {
  const format f = GetParam();
  oracle::nearest_reference ref(f);
  for (float x : sample()) {
    if (std::isnan(x)) continue;
    for (bool sat : {true, false})
      ASSERT_EQ(encode(f, x, rounding::nearest_even, sat), reference_code(ref, x, sat))
          << info(f).name << " x=" << x << " sat=" << sat;
  }
}

TEST_P(float_format, dense_floats_other_roundings_match_reference) {
  const format f = GetParam();
  oracle::nearest_reference ref(f);
  const uint32_t max_code = static_cast<uint32_t>(ref.values.size() - 1);
  for (float x : sample()) {
    if (std::isnan(x) || std::isinf(x)) continue;
    const uint32_t sign = std::signbit(x) ? sign_bit(f) : 0;
    // Double and float overloads agree (float -> double is exact; one rounding either way).
    ASSERT_EQ(encode(f, x), encode(f, static_cast<double>(x))) << x;
    const auto away = ref.magnitude_code(std::fabs(x), 1);
    ASSERT_EQ(encode(f, x, rounding::half_away, true), sign | (away ? *away : max_code)) << x;
    const auto rz = ref.magnitude_code(std::fabs(x), 2);
    ASSERT_TRUE(rz.has_value());
    ASSERT_EQ(encode(f, x, rounding::toward_zero, false), sign | *rz) << x;
  }
}

TEST_P(float_format, dense_floats_match_cuda_host_conversions) {
  if constexpr (!oracle::kHaveCuda) GTEST_SKIP() << "no /usr/local/cuda/include/cuda_fp8.h";
  const format f = GetParam();
  const bool fp8 = f == format::e4m3fn || f == format::e5m2;
  for (float x : sample()) {
    for (bool sat : {true, false}) {
      if (!fp8 && sat) continue;  // bf16/fp16 host casts have no satfinite variant
      ASSERT_EQ(encode(f, x, rounding::nearest_even, sat), oracle::cuda_encode(f, x, sat))
          << info(f).name << " x=" << x << " sat=" << sat;
    }
  }
}

// Doubles just off a midpoint by less than half a float ulp: a detour through float would round
// them onto the midpoint and then to even (double rounding).
std::vector<double> double_sample(format f) {
  oracle::nearest_reference ref(f);
  std::vector<double> xs;
  std::mt19937_64 rng(7);
  for (size_t i = 0; i + 1 < ref.values.size(); ++i) {
    const double mid = (ref.values[i] + ref.values[i + 1]) / 2;
    for (double d :
         {mid, mid * (1 + 0x1p-40), mid * (1 - 0x1p-40), std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)}) {
      xs.push_back(d);
      xs.push_back(-d);
    }
  }
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<double>(rng()));
  return xs;
}

TEST_P(float_format, doubles_round_once_against_reference_and_cuda) {
  const format f = GetParam();
  oracle::nearest_reference ref(f);
  const bool fp8 = f == format::e4m3fn || f == format::e5m2;
  for (double x : double_sample(f)) {
    if (std::isnan(x)) continue;
    for (bool sat : {true, false}) {
      const uint32_t got = encode(f, x, rounding::nearest_even, sat);
      ASSERT_EQ(got, reference_code(ref, x, sat)) << info(f).name << " x=" << x << " sat=" << sat;
      if constexpr (oracle::kHaveCuda)
        if (fp8 || !sat) {
          ASSERT_EQ(got, oracle::cuda_encode(f, x, sat)) << info(f).name << " x=" << x;
        }
    }
  }
}

TEST_P(float_format, na_n_inputs_give_na_n) {
  const format f = GetParam();
  for (uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xffffffffu}) {
    const float x = std::bit_cast<float>(u);
    for (bool sat : {true, false}) {
      const uint32_t c = encode(f, x, rounding::nearest_even, sat);
      EXPECT_TRUE(std::isnan(decode(f, c)));
      if constexpr (oracle::kHaveCuda) {
        EXPECT_EQ(c, oracle::cuda_encode(f, x, sat)) << std::hex << u;
      }
    }
  }
}

TEST_P(float_format, monotone_and_sign_symmetric) {
  const format f = GetParam();
  std::vector<float> xs;
  for (float x : sample())
    if (!std::isnan(x)) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  double prev = -INFINITY;
  for (float x : xs) {
    const double q = decode(f, encode(f, x));
    ASSERT_GE(q, prev) << x;
    prev = q;
    const uint32_t c = encode(f, x), cn = encode(f, -x);
    ASSERT_EQ(c ^ cn, sign_bit(f)) << x;
  }
}

TEST_P(float_format, ulp_is_the_gap_to_the_next_code) {
  const format f = GetParam();
  for (uint32_t c = 0; c + 1 < sign_bit(f); ++c) {
    const double v = decode(f, c), next = decode(f, c + 1);
    if (!std::isfinite(next)) break;
    ASSERT_EQ(ulp(f, v), next - v) << std::hex << c;
    ASSERT_EQ(ulp(f, -v), next - v) << std::hex << c;
    ASSERT_EQ(ulp_scaled(f, v * 0.25, 0.25), (next - v) * 0.25);
  }
}

TEST_P(float_format, inline_quantize_equals_decode_of_encode) {
  const format f = GetParam();
  for (float x : sample()) {
    const float ref = static_cast<float>(decode(f, encode(f, x)));  // saturating RNE
    const float ref_nosat = static_cast<float>(decode(f, encode(f, x, rounding::nearest_even, false)));
    float got = 0, got_nosat = 0;
    switch (f) {
      case format::e4m3fn:
        got = quantize_e4m3_sat(x);
        got_nosat = ref_nosat;
        break;
      case format::e5m2:
        got = quantize_e5m2_sat(x);
        got_nosat = ref_nosat;
        break;
      case format::fp16:
        got = ref;
        got_nosat = quantize_fp16(x);
        break;
      case format::bf16:
        got = ref;
        got_nosat = quantize_bf16(x);
        break;
      default:
        break;
    }
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got) && std::isnan(got_nosat));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref)) << info(f).name << " " << x;
    ASSERT_EQ(std::bit_cast<uint32_t>(got_nosat), std::bit_cast<uint32_t>(ref_nosat)) << info(f).name << " " << x;
    ASSERT_EQ(std::bit_cast<uint32_t>(quantize(f, x)), std::bit_cast<uint32_t>(ref));
    ASSERT_EQ(std::bit_cast<uint32_t>(quantize(f, x, rounding::nearest_even, false)),
              std::bit_cast<uint32_t>(ref_nosat));
  }
}

INSTANTIATE_TEST_SUITE_P(All, float_format, ::testing::ValuesIn(oracle::kFloatFormats),
                         [](const auto& p) { return std::string(attnum::formats::info(p.param).name); });

TEST(format, info_and_parse) {
  EXPECT_EQ(info(format::e4m3fn).max_finite, 448.0);
  EXPECT_EQ(info(format::e5m2).max_finite, 57344.0);
  EXPECT_EQ(info(format::fp16).max_finite, 65504.0);
  EXPECT_EQ(info(format::bf16).max_finite, std::ldexp(255.0, 120));
  EXPECT_EQ(info(format::int8).max_finite, 127.0);
  for (format f : {format::e4m3fn, format::e5m2, format::bf16, format::fp16, format::int8, format::fp32})
    EXPECT_EQ(parse_format(info(f).name), f);
  EXPECT_EQ(parse_format("float8_e4m3fn"), format::e4m3fn);
  EXPECT_EQ(parse_format("bfloat16"), format::bf16);
  EXPECT_THROW(parse_format("e4m3fnuz"), attnum::error);
}

TEST(format, e4m3_saturation_and_flush_boundaries) {
  const auto e = [](double x, bool sat = true) { return encode(format::e4m3fn, x, rounding::nearest_even, sat); };
  EXPECT_EQ(e(448), 0x7eu);
  EXPECT_EQ(e(464), 0x7eu);                                // tie between 448 (even) and 480: 448
  EXPECT_EQ(e(std::nextafter(464.0, 1e9), false), 0x7fu);  // NaN without saturation
  EXPECT_EQ(e(std::nextafter(464.0, 1e9)), 0x7eu);
  EXPECT_EQ(e(1e30), 0x7eu);
  EXPECT_EQ(e(-1e30), 0xfeu);
  EXPECT_EQ(e(INFINITY), 0x7eu);  // satfinite clamps Inf
  EXPECT_EQ(e(INFINITY, false), 0x7fu);
  EXPECT_EQ(e(0x1p-10), 0x00u);  // at half the smallest subnormal: tie to 0
  EXPECT_EQ(e(-0x1p-10), 0x80u);
  EXPECT_EQ(e(std::nextafter(0x1p-10, 1.0)), 0x01u);
  EXPECT_EQ(e(0x1p-9), 0x01u);
  EXPECT_EQ(e(0x3p-10), 0x02u);  // 1.5 * 2^-9: tie between codes 1 and 2 -> 2
  EXPECT_EQ(e(0.3), 0x2au);
  EXPECT_EQ(e(-1e-3), 0x81u);
}

TEST(format, e5m2_and_half_overflow) {
  EXPECT_EQ(encode(format::e5m2, 57344.0), 0x7bu);
  EXPECT_EQ(encode(format::e5m2, 61439.0, rounding::nearest_even, false), 0x7bu);
  EXPECT_EQ(encode(format::e5m2, 61440.0, rounding::nearest_even, false), 0x7cu);  // tie to even: Inf
  EXPECT_EQ(encode(format::e5m2, 61440.0), 0x7bu);
  EXPECT_EQ(encode(format::fp16, 65519.0, rounding::nearest_even, false), 0x7bffu);
  EXPECT_EQ(encode(format::fp16, 65520.0, rounding::nearest_even, false), 0x7c00u);
  EXPECT_EQ(encode(format::fp16, 65520.0), 0x7bffu);
  EXPECT_EQ(encode(format::bf16, 1e39, rounding::nearest_even, false), 0x7f80u);
  EXPECT_EQ(encode(format::bf16, -1e39), 0xff7fu);
}

TEST(format, ties_to_even) {
  // 1 + 2^-4 is the midpoint of 1 and 1.125 in e4m3fn: even code 0x38 (1.0).
  EXPECT_EQ(decode(format::e4m3fn, encode(format::e4m3fn, 1.0625)), 1.0);
  EXPECT_EQ(decode(format::e4m3fn, encode(format::e4m3fn, 1.1875)), 1.25);
  EXPECT_EQ(decode(format::e4m3fn, encode(format::e4m3fn, 1.0625, rounding::half_away)), 1.125);
  EXPECT_EQ(decode(format::e4m3fn, encode(format::e4m3fn, 1.1, rounding::toward_zero)), 1.0);
  EXPECT_EQ(decode(format::bf16, encode(format::bf16, 1.0 + 0x1p-8)), 1.0);
  EXPECT_EQ(decode(format::bf16, encode(format::bf16, 1.0 + 0x3p-8)), 1.0 + 0x1p-6);
}

TEST(format, int8_half_away_versus_nearest_even) {
  const auto q = [](double x, rounding r) { return decode(format::int8, encode(format::int8, x, r)); };
  for (auto [x, away, even] : std::vector<std::tuple<double, double, double>>{{0.5, 1, 0},
                                                                              {1.5, 2, 2},
                                                                              {2.5, 3, 2},
                                                                              {-2.5, -3, -2},
                                                                              {-0.5, -1, 0},
                                                                              {126.5, 127, 126},
                                                                              {127.4, 127, 127},
                                                                              {200, 127, 127},
                                                                              {-128.4, -128, -128},
                                                                              {-300, -128, -128},
                                                                              {0.49, 0, 0}}) {
    EXPECT_EQ(q(x, rounding::half_away), away) << x;
    EXPECT_EQ(q(x, rounding::nearest_even), even) << x;
    EXPECT_EQ(quantize_int8(static_cast<float>(x), rounding::half_away), away) << x;
    EXPECT_EQ(quantize_int8(static_cast<float>(x), rounding::nearest_even), even) << x;
  }
  EXPECT_EQ(encode(format::int8, -1.0), 0xffu);
  EXPECT_EQ(encode(format::int8, std::nan("")), 0u);
  // Sage's fp32 "x + 0.5*sign" rounds 0.49999997f + 0.5f up to 1.0f; the exact rule gives 0.
  const float just_below_half = std::nextafter(0.5f, 0.0f);
  EXPECT_EQ(decode(format::int8, encode(format::int8, just_below_half, rounding::half_away)), 1.0);
  EXPECT_EQ(decode(format::int8, encode(format::int8, static_cast<double>(just_below_half), rounding::half_away)), 0.0);
}

TEST(format, int8_inline_quantize_equals_decode_of_encode) {
  for (float x : sample())
    for (rounding r : {rounding::half_away, rounding::nearest_even}) {
      const float ref = static_cast<float>(decode(format::int8, encode(format::int8, x, r)));
      ASSERT_EQ(quantize_int8(x, r), ref) << x;
      ASSERT_EQ(quantize(format::int8, x, r), ref) << x;
    }
}

}  // namespace
