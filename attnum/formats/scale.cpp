// Scaled casts: group amax, fp32 scale rule, cast in the scaled domain (see scale.h).
#include "attnum/formats/scale.h"

#include <bit>
#include <cmath>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::formats {
namespace {

float format_max(const scale_spec& spec) {
  return static_cast<float>(spec.fmt_max > 0 ? spec.fmt_max : info(spec.fmt).max_finite);
}

int groups_per_segment(const scale_spec& s) { return (s.group_modulus + s.group_divisor - 1) / s.group_divisor; }

void check_spec(const scale_spec& s) {
  if (s.gran == scale_granularity::block && s.block_rows <= 0)
    fail("scale spec: block_rows must be positive, got {}", s.block_rows);
  if (s.gran == scale_granularity::row_group && (s.group_segment <= 0 || s.group_modulus <= 0 || s.group_divisor <= 0))
    fail("scale spec: row_group needs positive segment, modulus and divisor, got {}, {}, {}", s.group_segment,
         s.group_modulus, s.group_divisor);
  if (s.fmt == format::fp32) fail("scale spec: fp32 is not a scaled cast format");
}

}  // namespace

scale_granularity parse_granularity(std::string_view text) {
  if (text == "tensor") return scale_granularity::tensor;
  if (text == "block") return scale_granularity::block;
  if (text == "row_group" || text == "thread") return scale_granularity::row_group;
  if (text == "token") return scale_granularity::token;
  if (text == "channel") return scale_granularity::channel;
  fail("unknown scale granularity '{}': expected tensor, block, row_group, token or channel", clip(text));
}

float group_scale(double amax, const scale_spec& spec, bool* zero_nan) {
  if (amax == 0 && spec.eps == 0) {
    if (zero_nan && spec.multiply_by_reciprocal) *zero_nan = true;
    return spec.multiply_by_reciprocal ? 0.0f : 1.0f;
  }
  const float a = static_cast<float>(amax);
  return (spec.div ? spec.div->div(a, format_max(spec)) : a / format_max(spec)) + spec.eps;
}

float group_operand(double amax, float scale, const scale_spec& spec) {
  if (!spec.multiply_by_reciprocal) return scale;
  // amax 0 without eps: fmt_max / 0 = Inf and 0 * Inf = NaN, as the kernel computes it.
  if (spec.div)
    return spec.eps != 0.0f ? spec.div->div(1.0f, scale) : spec.div->div(format_max(spec), static_cast<float>(amax));
  return spec.eps != 0.0f ? 1.0f / scale : format_max(spec) / static_cast<float>(amax);
}

float scaled_value(float x, double amax, float scale, const scale_spec& spec) {
  const float a = group_operand(amax, scale, spec);
  if (spec.multiply_by_reciprocal) return x * a;
  return spec.div ? spec.div->div(x, a) : x / a;
}

float cast_in_group(float x, double amax, float scale, const scale_spec& spec) {
  return quantize_value(spec.fmt, scaled_value(x, amax, scale, spec), spec.rnd);
}

namespace {

// The span loops: scaled_value's divide or multiply (or none: the unscaled conversion), then
// quantize_value with the format and rounding fixed at compile time, so its switch folds away
// and the loop body is straight-line (the inline quantize_* of format.h are branch-free apart
// from selects). One instantiation per format, rounding (int8 only: the float formats ignore
// it), kind and operand layout.
enum class scaling { divide, multiply, none };

// quantize_int8(y, half_away), bit for bit, written so that GCC vectorises it (std::trunc does
// not vectorise without -fno-trapping-math, and neither does a clamp feeding an int conversion):
// s = y + copysign(0.5, y) as there; trunc(|s|) for |s| < 2^23 is |s| rounded to an integer by
// the 2^23 add (RNE, exact) less 1 where that rounded up; from 2^23 on every float is an integer;
// copysign restores s's sign, also of a zero (trunc(-0.7) = -0). NaN gives +0 as quantize_int8.
// Equal to quantize_int8 on all 2^32 floats (checked once over every bit pattern; scale_span_test
// checks a strided sweep of them).
inline float int8_half_away(float y) {
  const float v = std::isnan(y) ? 0.0f : y;
  const float s = v + std::copysign(0.5f, v);
  const float a = std::fabs(s);
  const float r = (a + 0x1p23f) - 0x1p23f;
  const float f = r > a ? r - 1.0f : r;
  const float t = std::copysign(a < 0x1p23f ? f : a, s);
  return t > 127.0f ? 127.0f : (t < -128.0f ? -128.0f : t);
}

template <format F, rounding R, scaling K, bool kPerElement>
void span_loop(const float* __restrict x, const float* __restrict operand, float a0, float* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float a = kPerElement ? operand[i] : a0;
    float y = x[i];
    if constexpr (K == scaling::divide) y = y / a;
    if constexpr (K == scaling::multiply) y = y * a;
    if constexpr (F == format::int8 && R == rounding::half_away)
      out[i] = int8_half_away(y);
    else
      out[i] = quantize_value(F, y, R);
  }
}

template <scaling K, bool kPerElement>
void span_cast(format f, rounding r, const float* x, const float* operand, float a0, float* out, size_t n) {
  constexpr rounding kRne = rounding::nearest_even;
  switch (f) {
    case format::e4m3fn:
      return span_loop<format::e4m3fn, kRne, K, kPerElement>(x, operand, a0, out, n);
    case format::e5m2:
      return span_loop<format::e5m2, kRne, K, kPerElement>(x, operand, a0, out, n);
    case format::bf16:
      return span_loop<format::bf16, kRne, K, kPerElement>(x, operand, a0, out, n);
    case format::fp16:
      return span_loop<format::fp16, kRne, K, kPerElement>(x, operand, a0, out, n);
    case format::fp32:
      return span_loop<format::fp32, kRne, K, kPerElement>(x, operand, a0, out, n);
    case format::int8:
      switch (r) {
        case rounding::nearest_even:
          return span_loop<format::int8, kRne, K, kPerElement>(x, operand, a0, out, n);
        case rounding::half_away:
          return span_loop<format::int8, rounding::half_away, K, kPerElement>(x, operand, a0, out, n);
        case rounding::toward_zero:
          return span_loop<format::int8, rounding::toward_zero, K, kPerElement>(x, operand, a0, out, n);
      }
  }
  ATTNUM_ASSERT(false, "span_cast: format or rounding out of range");
}

// A build for a portable x86-64 baseline (ATTNUM_NATIVE off) still runs the span loops at the
// CPU's vector width: GCC compiles each span function (with everything it calls inlined) for
// AVX2 and for AVX-512 (x86-64-v4) beside the baseline and picks one when the library loads
// (ifunc: CPUID and the OS's register support). The same operations in each, hence the same bits.
// Builds for AVX-512 (-march=native there) or for another CPU need no clones.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && !defined(__AVX512F__)
#define ATTNUM_SPAN_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4"), flatten))
#else
#define ATTNUM_SPAN_CLONES
#endif

}  // namespace

ATTNUM_SPAN_CLONES
void cast_span_in_group(const float* x, float* out, size_t n, double amax, float scale, const scale_spec& spec) {
  const float a = group_operand(amax, scale, spec);
  if (spec.div && !spec.multiply_by_reciprocal) {  // the measured division, element by element
    for (size_t i = 0; i < n; ++i) out[i] = quantize_value(spec.fmt, spec.div->div(x[i], a), spec.rnd);
    return;
  }
  if (spec.multiply_by_reciprocal)
    span_cast<scaling::multiply, false>(spec.fmt, spec.rnd, x, nullptr, a, out, n);
  else
    span_cast<scaling::divide, false>(spec.fmt, spec.rnd, x, nullptr, a, out, n);
}

ATTNUM_SPAN_CLONES
void cast_span_by_operand(const float* x, const float* operand, float* out, size_t n, const scale_spec& spec) {
  if (spec.div && !spec.multiply_by_reciprocal) {
    for (size_t i = 0; i < n; ++i) out[i] = quantize_value(spec.fmt, spec.div->div(x[i], operand[i]), spec.rnd);
    return;
  }
  if (spec.multiply_by_reciprocal)
    span_cast<scaling::multiply, true>(spec.fmt, spec.rnd, x, operand, 0.0f, out, n);
  else
    span_cast<scaling::divide, true>(spec.fmt, spec.rnd, x, operand, 0.0f, out, n);
}

ATTNUM_SPAN_CLONES
void quantize_span(const float* x, float* out, size_t n, format f, rounding r) {
  span_cast<scaling::none, false>(f, r, x, nullptr, 1.0f, out, n);
}

ATTNUM_SPAN_CLONES
float span_amax(const float* x, size_t n) {
  // For a float with the sign bit cleared, the order of |x| is the order of its bits as an
  // unsigned integer (+0 lowest, Inf highest); NaN patterns lie above Inf's and are mapped to 0.
  // An integer max vectorises; a float max reduction would not without -ffast-math (nor, with
  // GCC 12, a select feeding the max: hence the mask).
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    u &= 0u - static_cast<uint32_t>(u <= 0x7f800000u);
    m = u > m ? u : m;
  }
  return std::bit_cast<float>(m);
}

bool span_all_finite(const float* x, size_t n) {
  uint32_t bad = 0;  // the exponent field all ones: Inf or NaN
  for (size_t i = 0; i < n; ++i)
    bad |= static_cast<uint32_t>((std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u);
  return bad == 0;
}

int64_t group_count(int rows, int cols, const scale_spec& s) {
  switch (s.gran) {
    case scale_granularity::tensor:
      return 1;
    case scale_granularity::block:
      return (rows + s.block_rows - 1) / s.block_rows;
    case scale_granularity::row_group:
      return static_cast<int64_t>((rows + s.group_segment - 1) / s.group_segment) * groups_per_segment(s);
    case scale_granularity::token:
      return rows;
    case scale_granularity::channel:
      return cols;
  }
  return 1;
}

int64_t group_of(int r, int c, int rows, int cols, const scale_spec& s) {
  switch (s.gran) {
    case scale_granularity::tensor:
      return 0;
    case scale_granularity::block:
      return r / s.block_rows;
    case scale_granularity::row_group: {
      const int in_segment = ((r % s.group_segment) % s.group_modulus) / s.group_divisor;
      return static_cast<int64_t>(r / s.group_segment) * groups_per_segment(s) + in_segment;
    }
    case scale_granularity::token:
      return r;
    case scale_granularity::channel:
      return c;
  }
  return 0;
}

std::vector<float> scaled_tensor::dequantized() const {
  std::vector<float> out(grid.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[static_cast<size_t>(r) * cols + c] = dequant(r, c);
  return out;
}

scaled_tensor scaled_cast(const float* x, int rows, int cols, const scale_spec& spec) {
  check_spec(spec);
  if (rows < 0 || cols < 0) fail("scaled_cast: negative shape [{}, {}]", rows, cols);
  scaled_tensor t;
  t.rows = rows;
  t.cols = cols;
  t.spec = spec;
  const auto n_groups = static_cast<size_t>(group_count(rows, cols, spec));
  t.amax.assign(n_groups, 0.0f);
  t.scales.assign(n_groups, 0.0f);
  t.grid.assign(static_cast<size_t>(rows) * cols, 0.0f);
  // Pass 1: amax per group (max is exact, so the order does not matter).
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = x[static_cast<size_t>(r) * cols + c];
      if (std::isnan(v)) t.has_nan = true;
      float& m = t.amax[static_cast<size_t>(group_of(r, c, rows, cols, spec))];
      m = std::fabs(v) > m ? std::fabs(v) : m;
    }
  // Pass 2: scales (the all-zero rule flags NaN groups).
  for (size_t g = 0; g < n_groups; ++g) t.scales[g] = group_scale(t.amax[g], spec, &t.has_nan);
  // Pass 3: cast in the scaled domain; `saturated` counts scaled values beyond the format's range
  // ([-128, 127] for int8), measured on the same scaled value the cast converts.
  const double hi = info(spec.fmt).max_finite, lo = spec.fmt == format::int8 ? -128.0 : -hi;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      const auto g = static_cast<size_t>(group_of(r, c, rows, cols, spec));
      const float y = scaled_value(x[i], t.amax[g], t.scales[g], spec);
      if (std::isnan(y)) t.has_nan = true;
      if (y > hi || y < lo) ++t.saturated;
      t.grid[i] = quantize_value(spec.fmt, y, spec.rnd);
    }
  return t;
}

}  // namespace attnum::formats
