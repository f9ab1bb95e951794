#pragma once
// Host-side analysis of the SFU probes (docs/gpu.md): given a unit's outputs on float32 inputs
// (the GPU's, or a simulated unit's in the self-test), discover its structure and write the
// compact table of formats/sfu_unit.h that reproduces every evaluated output.
//
// Hypotheses, tested in this order (each one verified on every input of the domain):
//   ex2.approx.ftz.f32, rule ex2_frac(k): the result is entry[top k bits of frac(x)] * 2^floor(x)
//     (ftz). The table is read on the basis x = 1 + i 2^-23 (every fraction with 23 bits); k is
//     the smallest for which the basis is constant on runs of 2^(23-k) fractions.
//   rcp.approx.ftz.f32, rule rcp_mant(k): the result is +-entry[top k bits of the significand]
//     * 2^-exponent (ftz); basis x = 1 + i 2^-23, k found the same way.
//   div.full.f32: H1 div_mul_rcp (float(a * rcp(b)) with the measured rcp table), H2 div_ieee
//     (correctly rounded a / b), on structured samples of (a, b).
// When no hypothesis holds, the analysis reports how many inputs differ and keeps the first
// kMaxDump of them (input, hardware output, the hypothesis' output): no table is written then.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attnum/formats/sfu_unit.h"

namespace attnum::gpu {

/// Evaluates a unary unit: out[i] = unit(bits in[i]) as float32 bit patterns, for i < n.
using unary_eval = std::function<void(const uint32_t* in, uint32_t* out, size_t n)>;
/// Evaluates a binary unit: out[i] = unit(a[i], b[i]).
using binary_eval = std::function<void(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n)>;

inline constexpr size_t kMaxDump = 64;

struct mismatch {
  uint32_t a = 0, b = 0;       ///< input(s) (b unused for unary units)
  uint32_t hw = 0, model = 0;  ///< the unit's output and the hypothesis' output
};

/// The outcome of one hypothesis on the domain.
struct hypothesis_result {
  std::string name;  ///< e.g. "ex2_frac(k=12)", "div_ieee"
  uint64_t evaluated = 0, mismatches = 0;
  std::vector<mismatch> dump;  ///< the first kMaxDump mismatches
};

struct sfu_analysis {
  std::string unit;                      ///< "ex2.approx.ftz.f32", ...
  bool found = false;                    ///< a hypothesis reproduced every evaluated output
  formats::sfu_table table;              ///< the table of the hypothesis that held (found)
  std::vector<hypothesis_result> tried;  ///< every hypothesis with its counts, in order
  hypothesis_result ieee;                ///< the emulator's ieee model (exp2f, 1/x, a/b) on the same inputs
};

/// The inputs a unary analysis verifies on: every `stride`-th bit pattern from 0 (stride 1: all
/// 2^32), plus the basis. Threads: the host threads the verification loop uses (0: all).
struct unary_domain {
  uint64_t stride = 1;
  int threads = 0;
};

/// Two values agree when their bits are equal or both are NaN (the GPU's NaN is canonical,
/// ours need not be; NaN payloads never reach an attention output).
inline bool same_output(uint32_t x, uint32_t y) {
  const bool nx = (x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu);
  const bool ny = (y & 0x7F800000u) == 0x7F800000u && (y & 0x7FFFFFu);
  return x == y || (nx && ny);
}

sfu_analysis analyze_ex2(const unary_eval& unit, const unary_domain& domain);
sfu_analysis analyze_rcp(const unary_eval& unit, const unary_domain& domain);
/// `rcp` is the rcp analysis' table (H1 needs it); samples: structured_div_samples().
sfu_analysis analyze_div(const binary_eval& unit, const formats::sfu_table* rcp,
                         const std::vector<std::pair<uint32_t, uint32_t>>& samples);
/// Structured (a, b) samples for div.full: every 2^(23-mant_bits)-th significand of b over a set
/// of exponents (small, 1, near 2^126 where the scaling of div.full matters, subnormal), times a
/// set of numerators (1, significands of several binades, signs, zero, inf, NaN).
std::vector<std::pair<uint32_t, uint32_t>> structured_div_samples(int mant_bits);

/// Writes the analysis as a JSON object (no trailing newline): unit, found, hypotheses with
/// counts and dumps, the ieee comparison, and the table's rule and size when found.
std::string to_json(const sfu_analysis& a);

}  // namespace attnum::gpu
