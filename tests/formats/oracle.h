#pragma once
// Independent oracles for the format tests: NVIDIA's host conversions (cuda_fp8.h, cuda_bf16.h,
// cuda_fp16.h) where /usr/local/cuda/include exists, and a brute-force nearest-value reference
// built from the bit layouts alone (it shares no code with attnum/formats).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#if defined(ATTNUM_HAVE_CUDA_HOST_HEADERS)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "attnum/formats/format.h"

namespace oracle {
using attnum::formats::format;

struct bits_layout {
  int bits, exp_bits, mant_bits;
  bool ieee_specials;  // all-ones exponent is Inf/NaN (else only S.1111.111 is NaN: e4m3fn)
};

inline bits_layout layout(format f) {
  switch (f) {
    case format::e4m3fn:
      return {8, 4, 3, false};
    case format::e5m2:
      return {8, 5, 2, true};
    case format::bf16:
      return {16, 8, 7, true};
    case format::fp16:
      return {16, 5, 10, true};
    default:
      return {32, 8, 23, true};
  }
}

/// Value of a code from the bit layout (textbook formula; NaN for NaN codes).
inline double value_of(format f, uint32_t code) {
  const bits_layout L = layout(f);
  const int bias = (1 << (L.exp_bits - 1)) - 1;
  const uint32_t sign = code >> (L.bits - 1) & 1u;
  const uint32_t e = code >> L.mant_bits & ((1u << L.exp_bits) - 1);
  const uint32_t m = code & ((1u << L.mant_bits) - 1);
  const uint32_t e_all = (1u << L.exp_bits) - 1;
  double v;
  if (L.ieee_specials && e == e_all) {
    v = m ? NAN : INFINITY;
  } else if (!L.ieee_specials && e == e_all && m == (1u << L.mant_bits) - 1) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - L.mant_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -L.mant_bits), static_cast<int>(e) - bias);
  }
  return sign ? -v : v;
}

/// Brute-force RNE reference: nearest finite value, ties to the even code; beyond the largest
/// finite value, the format continues one more grid step (480 for e4m3fn, 2^(emax+1) otherwise)
/// and a result on that step is overflow.
struct nearest_reference {
  format f;
  std::vector<double> values;  // positive finite values, ascending (index == magnitude code)
  double beyond;               // the next grid value above the max

  explicit nearest_reference(format fmt) : f(fmt) {
    const bits_layout L = layout(fmt);
    for (uint32_t c = 0; c < (1u << (L.bits - 1)); ++c) {
      const double v = value_of(fmt, c);
      if (!std::isfinite(v)) break;
      values.push_back(v);
    }
    const double top = values.back(), below = values[values.size() - 2];
    beyond = top + (top - below);
  }
  /// Returns the magnitude code for |x| (finite), or nullopt on overflow (non-saturating).
  /// mode: 0 nearest-even, 1 half-away-from-zero, 2 toward zero.
  std::optional<uint32_t> magnitude_code(double a, int mode = 0) const {
    auto it = std::lower_bound(values.begin(), values.end(), a);
    const auto max_code = static_cast<uint32_t>(values.size() - 1);
    uint32_t lo, hi;
    double hi_value;
    if (it == values.end()) {  // above the max: the next step up is overflow
      lo = max_code;
      hi = max_code + 1;
      hi_value = beyond;
    } else {
      hi = static_cast<uint32_t>(it - values.begin());
      if (*it == a || hi == 0) return hi;
      lo = hi - 1;
      hi_value = values[hi];
    }
    const double mid = (values[lo] + hi_value) / 2;  // exact: few significant bits
    uint32_t pick;
    if (mode == 2)
      pick = lo;
    else if (a < mid)
      pick = lo;
    else if (a > mid)
      pick = hi;
    else
      pick = mode == 1 ? hi : ((lo & 1u) ? hi : lo);
    if (pick > max_code) return std::nullopt;
    return pick;
  }
};

#if defined(ATTNUM_HAVE_CUDA_HOST_HEADERS)
inline constexpr bool kHaveCuda = true;
inline uint32_t cuda_encode(format f, float x, bool saturate) {
  const auto sat = saturate ? __NV_SATFINITE : __NV_NOSAT;
  switch (f) {
    case format::e4m3fn:
      return __nv_cvt_float_to_fp8(x, sat, __NV_E4M3);
    case format::e5m2:
      return __nv_cvt_float_to_fp8(x, sat, __NV_E5M2);
    case format::bf16:
      return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
    case format::fp16:
      return static_cast<__half_raw>(__float2half_rn(x)).x;
    default:
      return 0;
  }
}
inline uint32_t cuda_encode(format f, double x, bool saturate) {
  const auto sat = saturate ? __NV_SATFINITE : __NV_NOSAT;
  switch (f) {
    case format::e4m3fn:
      return __nv_cvt_double_to_fp8(x, sat, __NV_E4M3);
    case format::e5m2:
      return __nv_cvt_double_to_fp8(x, sat, __NV_E5M2);
    case format::bf16:
      return static_cast<__nv_bfloat16_raw>(__double2bfloat16(x)).x;
    case format::fp16:
      return static_cast<__half_raw>(__double2half(x)).x;
    default:
      return 0;
  }
}
inline double cuda_decode(format f, uint32_t code) {
  switch (f) {
    case format::e4m3fn:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
    case format::e5m2:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E5M2)));
    case format::bf16: {
      __nv_bfloat16_raw r;
      r.x = static_cast<unsigned short>(code);
      return __bfloat162float(__nv_bfloat16(r));
    }
    case format::fp16: {
      __half_raw r;
      r.x = static_cast<unsigned short>(code);
      return __half2float(__half(r));
    }
    default:
      return 0;
  }
}
#else
inline constexpr bool kHaveCuda = false;
// Never called (every use is under `if constexpr (kHaveCuda)`); declared so the tests compile.
inline uint32_t cuda_encode(format, float, bool) { std::abort(); }
inline uint32_t cuda_encode(format, double, bool) { std::abort(); }
inline double cuda_decode(format, uint32_t) { std::abort(); }
#endif

/// The float formats with an NVIDIA host conversion.
inline constexpr format kFloatFormats[] = {format::e4m3fn, format::e5m2, format::bf16, format::fp16};

}  // namespace oracle
