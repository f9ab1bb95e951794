#pragma once
// Internals of the engine shared by engine.cpp, prepare.cpp and the tests' independent oracles
// only through the formats layer (tests do NOT include this file: they write their own).
#include <bit>
#include <cmath>
#include <cstdint>

#include "attnum/attention/kernel_spec.h"
#include "attnum/formats/format.h"

namespace attnum::attention {

// The kernels' conversions (fp8 satfinite, bf16/fp16 RNE with IEEE overflow, int8 per rounding).
using formats::quantize_value;

/// Returns x (finite double) rounded toward zero to `mant` fraction bits (normal range).
inline double truncate_bits(double x, int mant) {
  if (mant >= 52) return x;
  uint64_t u = std::bit_cast<uint64_t>(x);
  u &= ~((uint64_t{1} << (52 - mant)) - 1);
  return std::bit_cast<double>(u);
}

/// Returns x rounded to the fp16 grid, ties to even, overflow to +-inf (as __float2half_rn).
/// Adding c = 2^(e+42) moves |x| in [2^e, 2^(e+1)) into a binade whose double spacing is the fp16
/// quantum 2^(e-10) (e >= -14: subnormals share 2^-24), so the add rounds RNE; subtracting is exact.
inline double round_fp16(double x) {
  constexpr formats::format_info I = formats::info(formats::format::fp16);
  constexpr double kOverflow = I.max_finite + 0.5 * (1u << (I.max_exponent - I.mantissa_bits));  // 65520
  if (!std::isfinite(x)) return x;
  const double a = std::fabs(x);
  int e = static_cast<int>(std::bit_cast<uint64_t>(a) >> 52) - 1023;
  e = e < I.min_exponent ? I.min_exponent : e;
  const double c = std::bit_cast<double>(static_cast<uint64_t>(e + (52 - I.mantissa_bits) + 1023) << 52);
  const double r = (a + c) - c;
  return std::copysign(r >= kOverflow ? INFINITY : r, x);  // max + half an ulp rounds to 2^16
}

/// Accumulator model applied to acc + exact chunk sum (the sum formed in double).
inline double round_acc(const accumulator_spec& a, double x) {
  switch (a.kind) {
    case acc_kind::exact: return x;
    case acc_kind::int32: return x;  // integer sums are exact; the float conversion is separate
    case acc_kind::fp32: return static_cast<float>(x);
    case acc_kind::truncated: return static_cast<float>(truncate_bits(x, a.mant_bits));
    case acc_kind::fp16: return round_fp16(x);
  }
  return x;
}

}  // namespace attnum::attention
