// Accumulator models (see accumulator_oracle.h for the semantics and citations).
#include "oracles/accumulator_oracle.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <string>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/core/file.h"

namespace attnum::oracle {
using namespace attnum::formats;
namespace {

// Knuth's TwoSum: s + err == a + b exactly (round-to-nearest, no overflow).
inline void two_sum(double a, double b, double& s, double& err) {
  s = a + b;
  const double bb = s - a;
  err = (a - (s - bb)) + (b - bb);
}

// Rounds hi + lo (hi = RN(hi + lo)) to double with round-to-odd: the result lies in the same open
// interval between neighbouring doubles as the exact value, so one later rounding to <= 51 bits is
// correct for RN and RZ alike.
inline double round_to_odd(double hi, double lo) {
  if (lo == 0.0 || !std::isfinite(hi)) return hi;
  const uint64_t u = std::bit_cast<uint64_t>(hi);
  if (u & 1u) return hi;
  return std::nextafter(hi, lo > 0 ? INFINITY : -INFINITY);
}

// RZ of a double to `bits` fraction bits with the fp32 exponent range.
float truncate_double(double x, int bits) {
  if (!std::isfinite(x) || x == 0.0) return static_cast<float>(x);
  const double a = std::fabs(x);
  int e2 = 0;
  std::frexp(a, &e2);
  const int E = e2 - 1 < -126 ? -126 : e2 - 1;
  const double q = std::ldexp(1.0, E - bits);
  double t = std::floor(a / q) * q;                                  // a/q exact (power-of-two scaling)
  const double top = std::ldexp(2.0 - std::ldexp(1.0, -bits), 127);  // largest kept value
  t = t > top ? top : t;
  return static_cast<float>(std::copysign(t, x));  // exact: t has <= bits+1 significant bits
}

}  // namespace

accumulator_model parse_accumulator(std::string_view text, int k_step) {
  accumulator_model m;
  m.k_step = k_step;
  if (text == "fp32") return m;
  if (text == "fp16") {
    m.kind = accum_kind::fp16;
    m.mantissa_bits = 10;
    return m;
  }
  if (text.substr(0, 5) == "trunc") {
    m.kind = accum_kind::truncated;
    m.mantissa_bits = 13;
    std::string_view rest = text.substr(5);
    if (rest.substr(0, 5) == "ated") rest = rest.substr(4);
    if (!rest.empty()) {
      int bits = 0;
      for (char ch : rest) {
        if (ch < '0' || ch > '9') fail("accumulator '{}': expected fp32, fp16 or truncN", clip(text));
        bits = bits * 10 + (ch - '0');
        if (bits > 23) break;
      }
      if (bits < 1 || bits > 23) fail("accumulator '{}': mantissa bits must be 1..23", clip(text));
      m.mantissa_bits = bits;
    }
    return m;
  }
  fail("unknown accumulator '{}': expected fp32, fp16, truncated or truncN (N = 1..23)", clip(text));
}

float truncate_mantissa(float x, int bits) {
  ATTNUM_ASSERT(bits >= 0 && bits <= 23, "truncate_mantissa: bits {}", bits);
  if (!std::isfinite(x)) return x;
  // Clearing the low 23-bits fraction bits is RZ to the target grid for normal floats, and for
  // subnormals it keeps the quantum 2^(-149 + 23 - bits) = 2^(-126 - bits): the fp32 range.
  const uint32_t mask = ~((1u << (23 - bits)) - 1u);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & mask);
}

float round_accumulator(const accumulator_model& m, double exact_sum) {
  switch (m.kind) {
    case accum_kind::fp32:
      return static_cast<float>(exact_sum);
    case accum_kind::truncated:
      return truncate_double(exact_sum, m.mantissa_bits);
    case accum_kind::fp16:
      return static_cast<float>(decode(format::fp16, encode(format::fp16, exact_sum, rounding::nearest_even, false)));
  }
  return static_cast<float>(exact_sum);
}

float accumulate_dot(const accumulator_model& m, float c, const float* a, const float* b, int n, int stride_b) {
  ATTNUM_ASSERT(m.k_step >= 1, "accumulate_dot: k_step {}", m.k_step);
  if (m.kind == accum_kind::fp32 && m.k_step == 1) {
    float acc = c;
    for (int i = 0; i < n; ++i) acc = std::fmaf(a[i], b[static_cast<int64_t>(i) * stride_b], acc);
    return acc;
  }
  float acc = c;
  for (int i0 = 0; i0 < n; i0 += m.k_step) {
    // An infinite (overflowed fp16) or NaN accumulator absorbs every finite chunk sum, as IEEE
    // addition does (products of floats are finite in double); TwoSum would turn it into NaN.
    if (!std::isfinite(acc)) break;
    const int i1 = i0 + m.k_step < n ? i0 + m.k_step : n;
    double hi = acc, lo = 0.0;
    for (int i = i0; i < i1; ++i) {
      const double p = static_cast<double>(a[i]) * b[static_cast<int64_t>(i) * stride_b];
      double s, err;
      two_sum(hi, p, s, err);
      hi = s;
      lo += err;
    }
    double s, err;
    two_sum(hi, lo, s, err);  // renormalise so that hi = RN(hi + lo)
    acc = round_accumulator(m, round_to_odd(s, err));
  }
  return acc;
}

}  // namespace attnum::oracle
