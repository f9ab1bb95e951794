#pragma once
// Internals of the engine shared by engine.cpp, chunk_sums.cpp, prepare.cpp and the tests' independent oracles
// only through the formats layer (tests do NOT include this file: they write their own).
#include <bit>
#include <cmath>
#include <cstdint>

#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/row_kernels.h"
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
/// Written without branches so that loops over it vectorise: 2^e is |x| with its mantissa bits
/// cleared (0 for 0 and for double subnormals), raised to the fp16 minimum 2^-14 by a max; an
/// infinite or NaN x (where c is Inf and r NaN) is returned as is by the final select.
inline double round_fp16(double x) {
  constexpr formats::format_info I = formats::info(formats::format::fp16);
  constexpr double kOverflow = I.max_finite + 0.5 * (1u << (I.max_exponent - I.mantissa_bits));  // 65520
  constexpr double kMin = 1.0 / (1u << -I.min_exponent),
                   kLift = static_cast<double>(uint64_t{1} << (52 - I.mantissa_bits));
  const double a = std::fabs(x);
  const double p2 = std::bit_cast<double>(std::bit_cast<uint64_t>(a) & 0x7FF0000000000000ULL);
  const double c = (p2 > kMin ? p2 : kMin) * kLift;  // 2^(max(e, -14) + 42), exact
  const double r = (a + c) - c;
  const double y = std::copysign(r >= kOverflow ? INFINITY : r, x);  // max + half an ulp rounds to 2^16
  return std::isfinite(x) ? y : x;
}

/// Accumulator model applied to acc + exact chunk sum (the sum formed in double).
inline double round_acc(const accumulator_spec& a, double x) {
  switch (a.kind) {
    case acc_kind::exact:
      return x;
    case acc_kind::int32:
      return x;  // integer sums are exact; the float conversion is separate
    case acc_kind::fp32:
      return static_cast<float>(x);
    case acc_kind::truncated:
      return static_cast<float>(truncate_bits(x, a.mant_bits));
    case acc_kind::fp16:
      return round_fp16(x);
  }
  return x;
}

// a[i] = model(a[i] + c[i]) for i < n, with the model's switch hoisted out of the loop so the
// common cases (fp32, truncation) vectorise. kFromZero: a[i] is taken as +0 and not read (a fresh
// accumulator: the first chunk of a QK sum).
template <bool kFromZero = false, typename A>
void round_add(const accumulator_spec& m, A* a, const double* c, int n) {
  auto at = [a](int i) { return kFromZero ? 0.0 : static_cast<double>(a[i]); };
  switch (m.kind) {
    case acc_kind::fp32:
      for (int i = 0; i < n; ++i) a[i] = static_cast<A>(static_cast<float>(at(i) + c[i]));
      break;
    case acc_kind::truncated: {
      const uint64_t mask = m.mant_bits >= 52 ? ~uint64_t{0} : ~((uint64_t{1} << (52 - m.mant_bits)) - 1);
      for (int i = 0; i < n; ++i) {
        const uint64_t u = std::bit_cast<uint64_t>(at(i) + c[i]) & mask;
        a[i] = static_cast<A>(static_cast<float>(std::bit_cast<double>(u)));
      }
      break;
    }
    case acc_kind::fp16: {
      int i = 0;
      if constexpr (std::is_same_v<A, float> && !kFromZero) i = rowk::round_add_fp16(a, c, n);
      for (; i < n; ++i) a[i] = static_cast<A>(round_fp16(at(i) + c[i]));
      break;
    }
    default:
      for (int i = 0; i < n; ++i) a[i] = static_cast<A>(round_acc(m, at(i) + c[i]));
  }
}

// round_add over rows [0, nr) of a block: accumulator row r at a + r * lda, its sums at c + r *
// ldc, nc of each. One call over the whole block where both are contiguous (nc == lda == ldc): an
// element-wise step, so the same bits as row by row, without a call's set-up per row.
template <bool kFromZero = false, typename A>
void round_add_rows(const accumulator_spec& m, A* a, int lda, const double* c, int ldc, int nc, int nr) {
  if (nc == lda && nc == ldc) return round_add<kFromZero>(m, a, c, nr * nc);
  for (int r = 0; r < nr; ++r)
    round_add<kFromZero>(m, a + static_cast<size_t>(r) * lda, c + static_cast<size_t>(r) * ldc, nc);
}

}  // namespace attnum::attention
