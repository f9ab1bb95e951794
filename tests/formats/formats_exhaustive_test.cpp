// Every one of the 2^32 float inputs, for every format: encode against NVIDIA's host conversions
// (or the brute-force nearest-value reference where cuda_fp8.h is absent), and the inline fast
// quantize_* functions against decode(encode(x)), the contract the engine relies on.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <vector>

#include "attnum/formats/format.h"
#include "formats/oracle.h"

namespace {
using namespace attnum::formats;

struct check {
  format f;
  bool saturate;
};

// Runs `fn(x)` (returning true when x passes) on all floats in parallel; returns the number of
// failures and the first failing bit pattern.
template <typename Fn>
void all_floats(const char* what, Fn fn) {
  constexpr int64_t kChunks = 1 << 12;
  std::atomic<int64_t> failures{0};
  std::atomic<uint32_t> first{0};
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t chunk = 0; chunk < kChunks; ++chunk) {
    int64_t local = 0;
    uint32_t local_first = 0;
    const uint64_t begin = static_cast<uint64_t>(chunk) << 20, end = begin + (1u << 20);
    for (uint64_t u = begin; u < end; ++u) {
      const auto bits = static_cast<uint32_t>(u);
      if (!fn(std::bit_cast<float>(bits))) {
        if (local++ == 0) local_first = bits;
      }
    }
    if (local) {
      if (failures.fetch_add(local) == 0) first = local_first;
    }
  }
  EXPECT_EQ(failures.load(), 0) << what << ": first failing input bits 0x" << std::hex << first.load();
}

// decode() of every code as a float, so that the checks below stay cheap.
std::vector<float> decode_table(format f) {
  std::vector<float> t(1u << info(f).bits);
  for (uint32_t c = 0; c < t.size(); ++c) t[c] = static_cast<float>(decode(f, c));
  return t;
}

bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

TEST(formats_exhaustive, encode_matches_oracle_for_every_float) {
  const check checks[] = {{format::e4m3fn, true}, {format::e4m3fn, false}, {format::e5m2, true},
                          {format::e5m2, false},  {format::bf16, false},   {format::fp16, false}};
  for (const check c : checks) {
    const std::string what = std::string(info(c.f).name) + (c.saturate ? " satfinite" : " no-saturate");
    if constexpr (oracle::kHaveCuda) {
      all_floats(what.c_str(), [&](float x) {
        return encode(c.f, x, rounding::nearest_even, c.saturate) == oracle::cuda_encode(c.f, x, c.saturate);
      });
    } else {
      const oracle::nearest_reference ref(c.f);
      const uint32_t sign = 1u << (info(c.f).bits - 1), max_code = static_cast<uint32_t>(ref.values.size() - 1);
      all_floats(what.c_str(), [&](float x) {
        const uint32_t got = encode(c.f, x, rounding::nearest_even, c.saturate);
        if (std::isnan(x)) return std::isnan(decode(c.f, got));
        const uint32_t s = std::signbit(x) ? sign : 0;
        const auto mag = std::isinf(x) ? std::nullopt : ref.magnitude_code(std::fabs(x));
        const uint32_t want = mag                     ? (s | *mag)
                              : c.saturate            ? (s | max_code)
                              : c.f == format::e4m3fn ? (s | 0x7f)
                                                      : (s | (max_code + 1));
        return got == want;
      });
    }
  }
}

TEST(formats_exhaustive, inline_quantize_equals_decode_of_encode_for_every_float) {
  const auto e4 = decode_table(format::e4m3fn), e5 = decode_table(format::e5m2);
  const auto bf = decode_table(format::bf16), hf = decode_table(format::fp16);
  all_floats("quantize_e4m3_sat", [&](float x) { return same(quantize_e4m3_sat(x), e4[encode(format::e4m3fn, x)]); });
  all_floats("quantize_e5m2_sat", [&](float x) { return same(quantize_e5m2_sat(x), e5[encode(format::e5m2, x)]); });
  all_floats("quantize_bf16", [&](float x) {
    return same(quantize_bf16(x), bf[encode(format::bf16, x, rounding::nearest_even, false)]);
  });
  all_floats("quantize_fp16", [&](float x) {
    return same(quantize_fp16(x), hf[encode(format::fp16, x, rounding::nearest_even, false)]);
  });
  all_floats("quantize_int8", [&](float x) {
    for (rounding r : {rounding::half_away, rounding::nearest_even}) {
      // Numeric equality: quantize_int8 returns -0.0 for negative inputs that round to 0 (the
      // integer has no sign of zero); every other result must be identical.
      const auto code = static_cast<int8_t>(static_cast<uint8_t>(encode(format::int8, x, r)));
      if (quantize_int8(x, r) != static_cast<float>(code)) return false;
    }
    return true;
  });
}

}  // namespace
