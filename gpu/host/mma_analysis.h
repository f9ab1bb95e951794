#pragma once
// Host-side analysis of the tensor-core probes (docs/gpu.md). One MMA output element is
// D = C + sum_k A_k B_k over the instruction's K; the probe places a probe vector in row 0 of A,
// column 0 of B and C[0][0] (the other entries zero) and reads D[0][0].
//
// Method: the test vectors of Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA
// tensor cores", PeerJ Computer Science 7:e330 (2021), section 3, adapted to our model:
//   kept bits     C = 2^j, one product 1: the largest j with D = 2^j + 1 is the number of fraction
//                 bits the accumulator keeps (23 for an fp32 result, 13 for a 13-bit accumulator);
//   rounding      C = 2^(kept+1), one product 1.5 (0.75 of an ulp): D rounds up under round to
//                 nearest, stays under truncation;
//   chunk         C = 2^(kept+1), products 1 at positions 0 and j: both half an ulp; summed
//                 together before meeting C they make one ulp (D = C + 2), added one by one they
//                 vanish: the smallest j where they vanish is the chunk that sums exactly (k_step);
//   alignment     C = 0, products 2^E, -2^E, 2^(E-s): the largest s at which D = 2^(E-s) is how
//                 far below the largest addend the aligned sum keeps bits ("exact" when every
//                 tested s survives);
//   incoming C    C = 2^(E-s), products 2^E, -2^E: whether C survives the same cancellation;
//   random        vectors of format values with random C: every candidate model's mismatches.
// The model is then chosen in the vocabulary of our accumulator knobs (kernel_spec.h
// accumulator_spec): kind fp32 / truncated (mant_bits) / fp16 / int32 with a k_step, the one with
// no mismatch on every vector above, else the one with the fewest (reported as inexact).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnum::gpu {

/// One probe vector: A row 0 and B column 0 (K values each, exactly representable in the
/// instruction's input format) and C[0][0].
struct mma_vec {
  std::vector<float> a, b;
  double c = 0;  ///< fp32 (or fp16 / int32) value of C
};

/// Evaluates D[0][0] for each vector (as double: fp32, fp16 or int32 values).
using mma_eval = std::function<void(const std::vector<mma_vec>& v, std::vector<double>& d)>;

enum class mma_input { e4m3, e5m2, bf16, fp16, int8 };
enum class mma_acc { fp32, fp16, int32 };

/// A model in the accumulator knobs' vocabulary.
struct acc_model {
  std::string kind;  ///< "fp32", "truncated", "fp16", "int32"
  int mant_bits = 23;
  int k_step = 32;
  /// Returns "kind=truncated mant_bits=13 k_step=32" (knob names of accumulator_spec).
  std::string knobs() const;
  /// D = model(C + A.B): chunks of k_step exact sums, each added to the accumulator and rounded.
  double eval(const mma_vec& v) const;
};

struct mma_analysis {
  std::string instr;
  int K = 0;
  mma_input in = mma_input::e4m3;
  mma_acc acc = mma_acc::fp32;
  // measured facts (-1: not measured for this accumulator)
  int kept_bits = -1;
  std::string rounding;  ///< "nearest" or "toward_zero"
  int exact_chunk = -1;  ///< products summed exactly before meeting the accumulator
  int align_span = -1;   ///< bits kept below the largest addend (max_span_tested: exact)
  int max_span_tested = 0;
  int c_span = -1;         ///< the same for the incoming C: bits of C kept below the products' 2^E
  bool int_wraps = false;  ///< int32: C = 2^31 - 1 plus 1 wraps to -2^31
  // models
  acc_model best;
  uint64_t best_mismatches = 0, vectors = 0;
  std::vector<std::pair<acc_model, uint64_t>> candidates;  ///< every model tried with its mismatches
  std::vector<double> hw;                                  ///< the raw results, in battery order
};

/// Returns the probe battery for an instruction (deterministic).
std::vector<mma_vec> mma_battery(int K, mma_input in, mma_acc acc);
/// Runs the battery through `unit` and analyses it.
mma_analysis analyze_mma(const std::string& instr, int K, mma_input in, mma_acc acc, const mma_eval& unit);
/// The analysis as a JSON object (facts, best model with its knobs, every candidate's mismatches).
std::string to_json(const mma_analysis& a);

}  // namespace attnum::gpu
