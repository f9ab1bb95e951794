#pragma once
// Measured models of the GPU's approximate float32 instructions: ex2.approx.ftz.f32 (MUFU.EX2),
// rcp.approx.ftz.f32 (MUFU.RCP) and div.full.f32, as a table plus a decoding rule. The probe kit
// (gpu/, docs/gpu.md) writes these files from a GPU's outputs; the kernel_spec knobs exp2_unit,
// rcp_unit and div_unit (`table:PATH`) make the engine call them where the kernels use the
// approximate instruction. This file is the one definition of the table format and of each rule.
//
// File format (text, ASCII, one item per line):
//   attnum-sfu-table 1
//   unit <ex2|rcp|div>
//   rule <ex2_frac|rcp_mant|div_mul_rcp|div_ieee>
//   bits <k>                 (0..23; 0 for div_ieee)
//   entries <n>              (2^k; 0 for div_ieee)
//   note <free text>         (any number, kept as provenance)
//   data
//   <n lines: 8 hex digits, the float32 bits of each entry>
//   end
//
// Rules (every operation on doubles below is exact):
//   ex2_frac (k): a subnormal x counts as 0 (ftz). NaN -> NaN, +inf -> +inf, -inf -> +0. Else
//     n = floor(x), f = x - n in [0, 1), i = floor(f * 2^k), y = entry[i] * 2^n: the result depends
//     only on the integer part of x and the top k bits of its fraction. y >= 2^128 -> +inf, y below
//     the smallest normal (2^-126) -> +0 (ftz).
//   rcp_mant (k): a subnormal x counts as 0 (ftz). NaN -> NaN, +-0 -> +-inf, +-inf -> +-0. Else
//     x = +-(1 + f) 2^e, i = the top k bits of f, y = +-entry[i] * 2^-e: the result's significand
//     depends only on the top k bits of x's significand. |y| below 2^-126 -> +-0 (ftz).
//   div_mul_rcp (k): div(a, b) = float(a' * rcp_mant_k(b)) rounded to nearest even, with a' = a
//     flushed to 0 when subnormal and the result flushed to +-0 when subnormal (entries: the rcp table).
//   div_ieee: div(a, b) = a / b (IEEE, correctly rounded; no flushing).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnum::formats {

enum class sfu_kind : uint8_t { ex2, rcp, div };
enum class sfu_rule : uint8_t { ex2_frac, rcp_mant, div_mul_rcp, div_ieee };

/// Returns "ex2", "rcp", "div" / the rule's name as in the file.
const char* sfu_kind_name(sfu_kind k);
const char* sfu_rule_name(sfu_rule r);

/// One measured unit: the rule and its table (float32 bit patterns).
struct sfu_table {
  sfu_kind kind = sfu_kind::ex2;
  sfu_rule rule = sfu_rule::ex2_frac;
  int bits = 0;
  std::vector<uint32_t> entries;   ///< 2^bits float32 bit patterns (empty for div_ieee)
  std::vector<std::string> notes;  ///< provenance lines ("note ..."), kept as written

  /// The unit's result per its rule (the file comment); only the function of this table's kind
  /// is meaningful: ex2 for ex2_frac, rcp for rcp_mant, div for the div rules.
  float ex2(float x) const;
  float rcp(float x) const;
  float div(float a, float b) const;
  /// Returns an error message when the table is malformed (rule vs kind, bits, entries), else "".
  std::string check() const;
};

/// Reads a table file; throws attnum::error naming the file, the line and the field on bad input,
/// and when the file's unit is not `expect`.
std::shared_ptr<const sfu_table> read_sfu_table(const std::string& path, sfu_kind expect);
/// Writes a table file (the format above); throws attnum::error when it cannot be written or the
/// table fails check(). Written to PATH.tmp and renamed: no partial file on failure.
void write_sfu_table(const std::string& path, const sfu_table& t);

}  // namespace attnum::formats
