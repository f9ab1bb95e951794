// Bit-exact encode/decode for the formats in format.h.
//
// One generic algorithm serves every binary floating-point format: write |x| = m * 2^(E - mant)
// with E = max(floor(log2|x|), emin), so that m is the significand on the target grid (an integer
// plus a fraction); round m to an integer k per the rounding mode; the magnitude code is then
// ((E - emin) << mant) + k. That sum is the IEEE-style code in both the normal range (the implicit
// bit of k carries into the exponent field) and the subnormal range (E = emin, k < 2^mant), and a
// carry out of the top binade (k = 2^(mant+1)) lands on the next exponent, also correctly. Every
// step is exact in double (x is a double, m has at most 53 significant bits), so each input is
// rounded exactly once: a float input converted to double first gives the same result.
//
// Overflow, NaN and Inf follow NVIDIA's host conversions in cuda_fp8.hpp / cuda_fp16.hpp /
// cuda_bf16.hpp (the oracle in tests/formats), which implement PTX cvt.rn{.satfinite}:
//   - e4m3fn: |x| > 464 (= 448 + half an ulp) gives NaN (0x7f | sign), or 448 with saturation;
//     +-Inf gives NaN, or +-448 with saturation.
//   - e5m2: |x| >= 61440 gives +-Inf (0x7c), or +-57344 with saturation (Inf too: satfinite).
//   - fp8 NaN: a float NaN gives 0x7f in both formats (__nv_cvt_float_to_fp8 canonicalises it);
//     a double NaN gives sign | 0x7f (e4m3fn) or sign | 0x7e | (top two fraction bits) (e5m2),
//     as __nv_cvt_double_to_fp8.
//   - fp16, bf16: RNE overflow gives +-Inf; NaN gives 0x7fff (no sign), as __float2half_rn and
//     __float2bfloat16_rn. With saturation (PTX .satfinite) overflow and Inf clamp to +-max.
#include "attnum/formats/format.h"

#include <array>
#include <cfloat>
#include <cstring>
#include <limits>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::formats {
namespace {

// The parameters come from the one table, format.h's kFormatInfo.
using layout = format_info;

uint64_t double_bits(double x) { return std::bit_cast<uint64_t>(x); }

// 2^k for |k| <= 1022, built from bits (ldexp is a library call in the hot path).
double pow2(int k) { return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52); }

// The NaN code each format's reference conversion produces for a NaN input.
uint32_t nan_code(format f, double x) {
  const uint64_t u = double_bits(x);
  const uint32_t sign8 = static_cast<uint32_t>(u >> 63) << 7;
  switch (f) {
    case format::e4m3fn:
      return sign8 | 0x7f;
    case format::e5m2:
      return sign8 | 0x7e | static_cast<uint32_t>((u >> 50) & 0x3);
    case format::bf16:
    case format::fp16:
      return 0x7fff;
    case format::fp32:
      return 0x7fc00000u;
    case format::int8:
      return 0;
  }
  return 0;
}

// Rounds the non-negative significand m (exact) to an integer per `r`.
uint64_t round_significand(double m, rounding r) {
  const double k = std::floor(m);
  const double frac = m - k;  // exact: m and k share the exponent range
  auto ki = static_cast<uint64_t>(k);
  switch (r) {
    case rounding::nearest_even:
      if (frac > 0.5 || (frac == 0.5 && (ki & 1u))) ++ki;
      break;
    case rounding::half_away:
      if (frac >= 0.5) ++ki;
      break;
    case rounding::toward_zero:
      break;
  }
  return ki;
}

uint32_t encode_float_format(format f, double x, rounding r, bool saturate) {
  const layout& L = info(f);
  if (std::isnan(x)) return nan_code(f, x);
  const uint32_t sign = std::signbit(x) ? L.sign_bit : 0;
  const double a = std::fabs(x);
  // Overflow: saturation (and IEEE round-toward-zero) give the largest finite value.
  const auto overflow = [&]() -> uint32_t {
    if (saturate || r == rounding::toward_zero) return sign | L.max_code;
    return L.inf_code ? (sign | L.inf_code) : nan_code(f, x);
  };
  if (std::isinf(a)) return saturate ? (sign | L.max_code) : (L.inf_code ? sign | L.inf_code : nan_code(f, x));
  if (a == 0.0) return sign;
  // floor(log2 a) from the exponent field; a double subnormal is far below every format's
  // smallest subnormal, so its exponent field 0 (-1023) still clamps to emin correctly.
  const int e = static_cast<int>((double_bits(a) >> 52) & 0x7ff) - 1023;
  const int E = e < L.min_exponent ? L.min_exponent : e;
  if (E > L.max_exponent) return overflow();
  const double m = a * pow2(L.mantissa_bits - E);  // exact: a power-of-two scaling within range
  const uint64_t k = round_significand(m, r);
  const uint64_t mag = (static_cast<uint64_t>(E - L.min_exponent) << L.mantissa_bits) + k;
  if (mag > L.max_code) return overflow();
  return sign | static_cast<uint32_t>(mag);
}

uint32_t int8_code(double v) {
  const double c = v > 127.0 ? 127.0 : (v < -128.0 ? -128.0 : v);
  return static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(c)));
}

// Exact int8 rounding of a double (int8 always saturates: cvt.rni.sat.s8 has no overflow value).
uint32_t encode_int8(double x, rounding r) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(x);
  if (a >= 256.0) return int8_code(x);
  const double k = static_cast<double>(round_significand(a, r));
  return int8_code(std::copysign(k, x));
}

}  // namespace

format parse_format(std::string_view text) {
  struct alias {
    std::string_view name;
    format f;
  };
  static constexpr alias kAliases[] = {
      {"e4m3fn", format::e4m3fn},    {"float8_e4m3fn", format::e4m3fn},
      {"e4m3", format::e4m3fn},      {"e5m2", format::e5m2},
      {"float8_e5m2", format::e5m2}, {"bf16", format::bf16},
      {"bfloat16", format::bf16},    {"fp16", format::fp16},
      {"float16", format::fp16},     {"f16", format::fp16},
      {"int8", format::int8},        {"i8", format::int8},
      {"fp32", format::fp32},        {"float32", format::fp32},
      {"f32", format::fp32},
  };
  for (const auto& a : kAliases)
    if (a.name == text) return a.f;
  fail("unknown number format '{}': expected one of e4m3fn, e5m2, bf16, fp16, int8, fp32", clip(text));
}

uint32_t encode(format f, double x, rounding r, bool saturate) {
  if (f == format::int8) return encode_int8(x, r);
  return encode_float_format(f, x, r, saturate);
}

uint32_t encode(format f, float x, rounding r, bool saturate) {
  if (f == format::int8) {
    if (r == rounding::half_away) {
      // SageAttention's fp32 arithmetic (quant_per_thread.py: x += 0.5*sign; .to(int8)): the
      // float add can round (e.g. 0.49999997f + 0.5f == 1.0f), so this differs from the exact
      // half-away rounding of encode(int8, double) just below some half-integers.
      return int8_code(static_cast<double>(quantize_int8(x, r)));
    }
    return encode_int8(static_cast<double>(x), r);
  }
  // cuda_fp8.hpp's float path first replaces any NaN by the canonical 0x7fffffff, so a float
  // NaN gives 0x7f in both fp8 formats (the double path keeps sign and payload bits).
  if (std::isnan(x)) return nan_code(f, std::bit_cast<double>(0x7fffffffe0000000ull));
  // float -> double is exact, so this is a single rounding of x.
  return encode_float_format(f, static_cast<double>(x), r, saturate);
}

double decode(format f, uint32_t code) {
  if (f == format::int8) return static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(code)));
  const layout& L = info(f);
  const bool neg = (code & L.sign_bit) != 0;
  const uint32_t mag = code & (L.sign_bit - 1);
  double v;
  if (f == format::e4m3fn && mag == 0x7f) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f != format::e4m3fn && mag >= L.inf_code) {
    v = mag == L.inf_code ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    const uint32_t biased = mag >> L.mantissa_bits;
    const uint32_t frac = mag & ((1u << L.mantissa_bits) - 1);
    v = biased == 0 ? std::ldexp(static_cast<double>(frac), L.min_exponent - L.mantissa_bits)
                    : std::ldexp(static_cast<double>(frac | (1u << L.mantissa_bits)),
                                 static_cast<int>(biased) - 1 + L.min_exponent - L.mantissa_bits);
  }
  return neg ? -v : v;
}

double ulp(format f, double x) {
  if (f == format::int8) return 1.0;
  if (std::isnan(x)) return x;
  const layout& L = info(f);
  const double a = std::fabs(x);
  int E = L.min_exponent;
  if (std::isinf(a)) {
    E = L.max_exponent;
  } else if (a != 0.0) {
    int e2 = 0;
    std::frexp(a, &e2);
    E = e2 - 1 < L.min_exponent ? L.min_exponent : (e2 - 1 > L.max_exponent ? L.max_exponent : e2 - 1);
  }
  return std::ldexp(1.0, E - L.mantissa_bits);
}

float quantize(format f, float x, rounding r, bool saturate) {
  switch (f) {
    case format::fp32:
      if (r == rounding::nearest_even && !saturate) return x;
      break;
    case format::e4m3fn:
      if (r == rounding::nearest_even && saturate) return quantize_e4m3_sat(x);
      break;
    case format::e5m2:
      if (r == rounding::nearest_even && saturate) return quantize_e5m2_sat(x);
      break;
    case format::fp16:
      if (r == rounding::nearest_even && !saturate) return quantize_fp16(x);
      break;
    case format::bf16:
      if (r == rounding::nearest_even && !saturate) return quantize_bf16(x);
      break;
    case format::int8:
      if (r != rounding::toward_zero) return quantize_int8(x, r);
      break;
  }
  if (f == format::fp32) {
    // Only saturation or a non-default rounding can change a float: both are the identity on
    // finite floats; saturation clamps Inf.
    if (std::isinf(x) && saturate) return std::copysign(FLT_MAX, x);
    return x;
  }
  return static_cast<float>(decode(f, encode(f, x, r, saturate)));
}

}  // namespace attnum::formats
