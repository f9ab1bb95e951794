#pragma once
// Internals of the engine shared by engine.cpp, prepare.cpp and the tests' independent oracles
// only through the formats layer (tests do NOT include this file: they write their own).
#include <bit>
#include <cmath>
#include <cstdint>

#include "attnum/attention/kernel_spec.h"
#include "attnum/formats/format.h"

namespace attnum::attention {

/// Returns the largest finite value of a format (int8: 127; fp32: FLT_MAX).
inline double formats_max(formats::format f) {
  switch (f) {
    case formats::format::e4m3fn: return 448.0;        // (1 + 6/8) * 2^8
    case formats::format::e5m2: return 57344.0;        // (1 + 3/4) * 2^15
    case formats::format::bf16: return 3.3895313892515355e38;  // (2 - 2^-7) * 2^127
    case formats::format::fp16: return 65504.0;        // (2 - 2^-10) * 2^15
    case formats::format::int8: return 127.0;
    case formats::format::fp32: return 3.4028234663852886e38;
  }
  return 0;
}

/// Returns x cast to format f (saturating fp8, IEEE overflow for bf16/fp16), as a float. The
/// rounding only matters for int8 (fp formats always round to nearest even).
inline float quantize_value(formats::format f, float x, formats::rounding r) {
  switch (f) {
    case formats::format::e4m3fn: return formats::quantize_e4m3_sat(x);
    case formats::format::e5m2: return formats::quantize_e5m2_sat(x);
    case formats::format::bf16: return formats::quantize_bf16(x);
    case formats::format::fp16: return formats::quantize_fp16(x);
    case formats::format::int8: return formats::quantize_int8(x, r);
    case formats::format::fp32: return x;
  }
  return x;
}

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
  if (!std::isfinite(x)) return x;
  const double a = std::fabs(x);
  int e = static_cast<int>(std::bit_cast<uint64_t>(a) >> 52) - 1023;
  e = e < -14 ? -14 : e;
  const double c = std::bit_cast<double>(static_cast<uint64_t>(e + 42 + 1023) << 52);
  const double r = (a + c) - c;
  return std::copysign(r >= 65520.0 ? INFINITY : r, x);  // 65520 = 65504 + half an ulp rounds to 2^16
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
