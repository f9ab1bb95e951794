#pragma once
// Scaled casts: x -> cast(x / scale) with one scale per group of elements, as the low-precision
// attention kernels quantize Q, K and V (kernels.md sections 1-6).
//
// This is the project's one scaled cast: the engine (attention/prepare.cpp) casts every scaled
// operand through group_scale and the span forms of cast_in_group, with its own grouping over
// heads and tokens.
//
// Scale rule (every kernel in kernels.md): scale = amax / fmt_max + eps, in fp32 as the kernel
// computes it, where amax = max |x| over the group. The cast operand is x / scale (fp32 divide),
// or with multiply_by_reciprocal x * (fmt_max / amax) (SageAttention's V: fused.cu MeanScaleKernel;
// with an eps, x * (1 / scale)). The conversion is the kernels' (formats::quantize_value: fp8
// satfinite, bf16/fp16 RNE with IEEE overflow, int8 per `rnd`). The grid value is what the tensor
// core multiplies; the kernel multiplies the product by the scales afterwards.
//
// All-zero groups (amax == 0), the one rule:
//   - with eps > 0: scale = eps, every value casts to 0;
//   - without eps, x / scale: scale = 1 and every value casts to 0 (0/0 would be NaN; a caller
//     computing FA3-style descales from amax passes 1 for an all-zero tensor, and FA3 treats a
//     missing descale as 1);
//   - without eps, multiply_by_reciprocal: the kernel computes 0 * (fmt_max / 0) = NaN (Sage's V
//     has no epsilon, kernels.md 2a.5): scale 0, the NaN stays in the grid and the group is
//     flagged (`has_nan`; the engine's operand_cast::nan_flagged): callers must report it.
// A NaN input also sets has_nan.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnum/formats/format.h"
#include "attnum/formats/sfu_unit.h"

namespace attnum::formats {

/// Which elements share one scale, for a row-major [rows, cols] matrix (rows = tokens,
/// cols = channels). Per head / per kv head: call scaled_cast once per head's matrix (tensor).
enum class scale_granularity : uint8_t {
  tensor,     ///< one scale for the whole matrix
  block,      ///< one per block of block_rows consecutive rows (Sage v1 per_block, hpc-ops)
  row_group,  ///< SageAttention per-thread groups (see scale_spec)
  token,      ///< one per row
  channel,    ///< one per column (Sage V per_channel)
};

/// Parses "tensor", "block", "row_group" (or "thread"), "token", "channel"; throws otherwise.
scale_granularity parse_granularity(std::string_view text);

struct scale_spec {
  format fmt = format::e4m3fn;
  scale_granularity gran = scale_granularity::tensor;
  int block_rows = 128;  ///< block: rows per block
  /// row_group: rows are cut into segments of group_segment rows; row r of a segment belongs to
  /// group ((r % group_segment) % group_modulus) / group_divisor of that segment, so a segment
  /// holds group_modulus / group_divisor groups. Sage sm89 Q: 32, 8, 1 (8 groups per 32 rows,
  /// rows {r, r+8, r+16, r+24}); sm89 K: 64, 8, 2 (4 groups per 64 rows, r mod 8 in {2t, 2t+1});
  /// sm90 Q: 16, 8, 1; sm90 K: 128, 8, 2.
  int group_segment = 32;
  int group_modulus = 8;
  int group_divisor = 1;
  double fmt_max = 0;                     ///< the value amax maps to; 0 = the format's max (Sage 2++ V: 2.25)
  float eps = 0;                          ///< added to the scale (Sage int8: amax/127 + 1e-7)
  rounding rnd = rounding::nearest_even;  ///< int8 only (float formats round to nearest even)
  bool multiply_by_reciprocal = false;    ///< x * (fmt_max/amax) instead of x / scale
  /// Every division of the rule (amax / fmt_max, x / scale, fmt_max / amax, 1 / scale) through
  /// this measured unit (div.full.f32, sfu_unit.h) instead of IEEE division; null: IEEE.
  const sfu_table* div = nullptr;
};

/// Returns the scale of a group with max |x| = amax: float(amax) / float(fmt_max) + eps in fp32,
/// or the all-zero rule of the file comment (sets *zero_nan where the group casts to NaN).
float group_scale(double amax, const scale_spec& spec, bool* zero_nan = nullptr);
/// Returns one element of a group in the scaled domain, before the conversion: x / scale or,
/// with multiply_by_reciprocal, x * (fmt_max / amax) (x * (1 / scale) with an eps).
float scaled_value(float x, double amax, float scale, const scale_spec& spec);
/// Returns the constant of a group's scaled value: the divisor `scale` (x / scale) or, with
/// multiply_by_reciprocal, the factor fmt_max / amax (1 / scale with an eps) of x * factor.
float group_operand(double amax, float scale, const scale_spec& spec);
/// Returns one element of a group cast: quantize_value(fmt, scaled_value(...), rnd). The
/// definition of the scaled cast; the span forms below give the same bits for every element.
float cast_in_group(float x, double amax, float scale, const scale_spec& spec);

// Span forms of the scaled cast for the hot loops (the engine's prepare_layer): the format, the
// rounding and the multiply-or-divide choice are decided once per call and each group's
// operand once per group, so the loop over elements is straight-line and vectorised; the
// arithmetic per element is the one of cast_in_group (same divide or multiply, same conversion,
// NaN, saturation and rounding), so every element has the same bits. out must not overlap x.

/// out[i] = cast_in_group(x[i], amax, scale, spec) for i < n: n elements of one group.
void cast_span_in_group(const float* x, float* out, size_t n, double amax, float scale, const scale_spec& spec);
/// out[i] = cast_in_group(x[i], amax_i, scale_i, spec) where operand[i] = group_operand(amax_i,
/// scale_i, spec): n elements of n groups (a row under per-channel scales).
void cast_span_by_operand(const float* x, const float* operand, float* out, size_t n, const scale_spec& spec);
/// out[i] = quantize_value(f, x[i], r) for i < n: the unscaled conversion of a span.
void quantize_span(const float* x, float* out, size_t n, format f, rounding r);
/// Returns max |x[i]| over i < n (0 for n = 0); NaN elements are skipped (callers that must
/// flag NaN check for it). Exact, so the same for any order or split of the span.
float span_amax(const float* x, size_t n);

/// True when every x[i] (i < n) is finite (no Inf, no NaN); an integer test that vectorises.
bool span_all_finite(const float* x, size_t n);

/// Returns the number of scale groups of a [rows, cols] matrix under `spec`.
int64_t group_count(int rows, int cols, const scale_spec& spec);
/// Returns the group (index into scaled_tensor::scales) of element (r, c).
int64_t group_of(int r, int c, int rows, int cols, const scale_spec& spec);

/// A matrix cast with scales: element (r, c) stands for grid[r*cols + c] * scale_at(r, c).
struct scaled_tensor {
  int rows = 0;
  int cols = 0;
  scale_spec spec;
  std::vector<float> grid;    ///< [rows, cols] values on the format's grid (scaled domain)
  std::vector<float> scales;  ///< one per group, see group_of
  std::vector<float> amax;    ///< one per group: max |x| of the group
  bool has_nan = false;       ///< a NaN input or a zero group without eps (see file comment)
  int64_t saturated = 0;      ///< elements whose scaled value lay outside the format's finite range

  int64_t group(int r, int c) const { return group_of(r, c, rows, cols, spec); }
  float scale_at(int r, int c) const { return scales[static_cast<size_t>(group(r, c))]; }
  /// grid * scale in fp32 (what the kernel's epilogue multiplies).
  float dequant(int r, int c) const { return grid[static_cast<size_t>(r) * cols + c] * scale_at(r, c); }
  /// All of dequant as a [rows, cols] matrix.
  std::vector<float> dequantized() const;
};

/// Casts the row-major [rows, cols] matrix x with the scales of `spec`. Single-threaded and
/// deterministic; callers parallelise over heads.
scaled_tensor scaled_cast(const float* x, int rows, int cols, const scale_spec& spec);

}  // namespace attnum::formats
