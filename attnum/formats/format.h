#pragma once
// Bit-exact number formats: float8_e4m3fn, float8_e5m2, bfloat16, float16, int8 (and float32 as
// the identity). Every quantization point in the emulator calls into this header.
//
//   format          bits  exp  mant  bias  max finite        min normal  min subnormal  inf  NaN
//   float8_e4m3fn     8    4     3     7   448 = 1.75*2^8    2^-6        2^-9           no   S.1111.111
//   float8_e5m2       8    5     2    15   57344 = 1.75*2^15 2^-14       2^-16          yes  exp=11111, m!=0
//   bfloat16         16    8     7   127   (2-2^-7)*2^127    2^-126      2^-133         yes
//   float16          16    5    10    15   65504             2^-14       2^-24          yes
//   int8              8    -     -     -   127 (two's complement, -128..127), no NaN/Inf
//
// OCP OFP8 spec:
// https://www.opencompute.org/documents/ocp-8-bit-floating-point-specification-ofp8-revision-1-0-2023-12-01-pdf-1
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attnum::formats {

enum class format : uint8_t { e4m3fn, e5m2, bf16, fp16, int8, fp32 };

/// How a value between two grid points is resolved.
enum class rounding : uint8_t {
  nearest_even,  ///< IEEE round-to-nearest, ties to even (cvt.rn, cvt.rni)
  half_away,     ///< round half away from zero (SageAttention's x/scale + 0.5*sign, truncate)
  toward_zero,   ///< truncation (accumulator models)
};

/// Static description of a format: the one table of format parameters (the casts below, the
/// engine's scales and accumulators, the predictor's grids and the illustration all read it).
struct format_info {
  std::string_view name;  ///< "e4m3fn", "e5m2", "bf16", "fp16", "int8", "fp32"
  int bits;               ///< storage bits
  int mantissa_bits;      ///< explicit fraction bits (0 for int8)
  int min_exponent;       ///< exponent of the smallest normal value (int8: 0)
  int max_exponent;       ///< exponent of the largest finite binade (int8: 0)
  double max_finite;      ///< largest finite value
  bool has_inf;           ///< whether overflow without saturation gives Inf (else NaN)
  bool is_integer;        ///< int8
  uint32_t max_code;      ///< magnitude code of the largest finite value (int8: 127)
  uint32_t inf_code;      ///< magnitude code of Inf (0: none)
  uint32_t sign_bit;      ///< the sign bit of a code (int8: 0x80, two's complement)
};

/// The formats' parameters, indexed by `format` (OCP OFP8 1.0, IEEE 754, bfloat16).
inline constexpr std::array<format_info, 6> kFormatInfo = {{
    {"e4m3fn", 8, 3, -6, 8, 448.0, false, false, 0x7e, 0, 0x80},
    {"e5m2", 8, 2, -14, 15, 57344.0, true, false, 0x7b, 0x7c, 0x80},
    {"bf16", 16, 7, -126, 127, 0x1.fep127, true, false, 0x7f7f, 0x7f80, 0x8000},
    {"fp16", 16, 10, -14, 15, 65504.0, true, false, 0x7bff, 0x7c00, 0x8000},
    {"int8", 8, 0, 0, 0, 127.0, false, true, 127, 0, 0x80},
    {"fp32", 32, 23, -126, 127, 0x1.fffffep127, true, false, 0x7f7fffff, 0x7f800000, 0x80000000u},
}};

/// Returns the description of a format.
constexpr const format_info& info(format f) { return kFormatInfo[static_cast<size_t>(f)]; }

/// Parses "e4m3fn", "e5m2", "bf16", "fp16", "int8", "fp32" (also "float8_e4m3fn", "bfloat16",
/// "float16", "float32"); throws attnum::error naming the text otherwise.
format parse_format(std::string_view text);

/// Returns the code of the value nearest to x in format f (ties per `r`). With `saturate`,
/// finite values beyond the range clamp to +-max_finite (satfinite, which also clamps +-Inf);
/// without it they become Inf (e5m2, bf16, fp16) or NaN (e4m3fn); toward_zero never overflows.
/// NaN maps to the NaN code of NVIDIA's host conversions (float NaN: 0x7f for fp8, 0x7fff for
/// bf16/fp16; see format.cpp); int8 maps NaN to 0 and always saturates.
/// Precondition: f != fp32 (use std::bit_cast).
uint32_t encode(format f, double x, rounding r = rounding::nearest_even, bool saturate = true);
/// Same for a float input (single rounding; no detour through double changes any result).
uint32_t encode(format f, float x, rounding r = rounding::nearest_even, bool saturate = true);

/// Returns the value of a code (int8: the integer).
double decode(format f, uint32_t code);

/// Returns the spacing of format f's grid at |x|: the distance between the two representable
/// values around |x| (the subnormal spacing below the normal range; 1 for int8).
double ulp(format f, double x);

/// Returns the grid spacing at x for a scaled cast (x/scale cast, then times scale): scale*ulp(x/scale).
inline double ulp_scaled(format f, double x, double scale) { return scale * ulp(f, x / scale); }

// ---------------------------------------------------------------------------------------------
// Fast inline quantization of float values: returns decode(encode(x)) as a float, bit-exact with
// encode/decode, for the emulator's hot loops. Tested against encode/decode on all float inputs.

namespace detail {
// Round |a| (finite, >= 0, a <= 2^(emax+1)) to a grid with `kMant` fraction bits whose smallest
// normal exponent is kEmin, ties to even. Adding c = 2^23 * quantum moves |a| into the binade
// [c, 2c) whose float spacing is exactly the quantum, so the float add rounds RNE at the target
// grid; subtracting c is exact.
template <int kMant, int kEmin>
inline float round_grid_rne(float a) {
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  int e = static_cast<int>(bits >> 23) - 127;  // floor(log2 a) for normal floats
  e = e < kEmin ? kEmin : e;
  const uint32_t c_bits = static_cast<uint32_t>(e - kMant + 23 + 127) << 23;
  const float c = std::bit_cast<float>(c_bits);
  return (a + c) - c;
}
}  // namespace detail

namespace detail {
// x rounded RNE to format f's grid with saturation at its max (fp8's satfinite).
template <format F>
inline float quantize_sat(float x) {
  constexpr format_info I = info(F);
  constexpr float kMax = static_cast<float>(I.max_finite);
  if (std::isnan(x)) return x;
  float a = std::fabs(x);
  a = a > kMax ? kMax : a;  // saturate first: max is on the grid, so RNE(min(a, max)) is right
  return std::copysign(round_grid_rne<I.mantissa_bits, I.min_exponent>(a), x);
}
}  // namespace detail

/// Returns x rounded to float8_e4m3fn (RNE, satfinite): cvt.rn.satfinite.e4m3x2.f32.
inline float quantize_e4m3_sat(float x) { return detail::quantize_sat<format::e4m3fn>(x); }

/// Returns x rounded to float8_e5m2 (RNE, satfinite).
inline float quantize_e5m2_sat(float x) { return detail::quantize_sat<format::e5m2>(x); }

/// Returns x rounded to float16 (RNE; overflow to Inf as IEEE does, i.e. __float2half_rn).
inline float quantize_fp16(float x) {
  constexpr format_info I = info(format::fp16);
  // max + half an ulp (65504 + 16 = 65520): the tie rounds to even, which is 2^16, i.e. Inf.
  constexpr float kOverflow = static_cast<float>(I.max_finite + 0.5 * (1u << (I.max_exponent - I.mantissa_bits)));
  if (std::isnan(x)) return x;
  float a = std::fabs(x);
  if (a >= kOverflow) return std::copysign(INFINITY, x);
  return std::copysign(detail::round_grid_rne<I.mantissa_bits, I.min_exponent>(a), x);
}

/// Returns x rounded to bfloat16 (RNE; __float2bfloat16_rn). NaN stays NaN.
inline float quantize_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xffff0000u);
}

/// Returns x rounded to an int8 value as a float: `r` half_away (Sage: x + 0.5*sign, truncate)
/// or nearest_even (cvt.rni.sat.s8.f32), saturating to [-128, 127]; NaN gives 0.
inline float quantize_int8(float x, rounding r) {
  if (std::isnan(x)) return 0.0f;
  float y = r == rounding::half_away ? std::trunc(x + std::copysign(0.5f, x)) : std::nearbyint(x);
  return y > 127.0f ? 127.0f : (y < -128.0f ? -128.0f : y);
}

/// Returns x converted to format f as the kernels convert it, as a float: fp8 with cvt.rn.satfinite,
/// bf16 and fp16 RNE with IEEE overflow to Inf (__float2bfloat16_rn, __float2half_rn), int8 per
/// `r` (saturating), fp32 unchanged. The rounding `r` only matters for int8.
inline float quantize_value(format f, float x, rounding r = rounding::nearest_even) {
  switch (f) {
    case format::e4m3fn:
      return quantize_e4m3_sat(x);
    case format::e5m2:
      return quantize_e5m2_sat(x);
    case format::bf16:
      return quantize_bf16(x);
    case format::fp16:
      return quantize_fp16(x);
    case format::int8:
      return quantize_int8(x, r);
    case format::fp32:
      return x;
  }
  return x;
}

/// Returns x rounded to format f with RNE (half_away for int8 when asked) and saturation policy.
float quantize(format f, float x, rounding r = rounding::nearest_even, bool saturate = true);

}  // namespace attnum::formats
