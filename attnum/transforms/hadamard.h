#pragma once
// Rotations of Q and K rows (y = x·R, R orthogonal, the same R for Q and K, never V): (QR)(KR)^T =
// QK^T, so exact attention is unchanged while the low-precision casts see other values.
//
// The default is FlashAttention-3's "incoherent processing" (arXiv 2407.08608 §3.3), a randomized
// Hadamard R = diag(s) H_d / sqrt(d):
//   - H_d is the Sylvester Walsh-Hadamard matrix, H_d[i][j] = (-1)^popcount(i & j);
//   - s = random_signs(d, seed): a splitmix64 stream started at state = seed; for i = 0..d-1 the
//     state advances by 0x9e3779b97f4a7c15, z = mix(state) (xor-shift 30, * 0xbf58476d1ce4e5b9,
//     xor-shift 27, * 0x94d049bb133111eb, xor-shift 31) and s_i = -1 if z's top bit is set, else +1
//     (so the signs of a smaller d are a prefix of a larger d's);
//   - the row is computed in double as y = fwht(x ∘ s) * (1.0 / sqrt(double(d))): the unnormalised
//     fast Walsh-Hadamard transform (butterflies h = 1, 2, 4, ...), then one multiply per element.
// The default seed is kDefaultRotationSeed = 0x5eed (24301).
//
// Head dims that are not a power of two (80, 96, ...) have no Sylvester Hadamard matrix; instead
// of an undocumented construction we throw attnum::error naming the head dim (a user matrix,
// rotation::from_matrix, has no such limit).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnum/formats/format.h"

namespace attnum::transforms {

inline constexpr uint64_t kDefaultRotationSeed = 0x5eedULL;

/// Returns d random signs (+1/-1) from `seed` (splitmix64 as described above).
std::vector<double> random_signs(int d, uint64_t seed);

/// In-place unnormalised fast Walsh-Hadamard transform of x[0..d). Precondition: d a power of two.
void fwht(double* x, int d);

/// The rotation applied to Q and K: a Hadamard-family matrix R = diag(s) H_d * c (computed with
/// the fast transform) or an explicit orthogonal [d, d] matrix (a plain product in double).
class rotation {
 public:
  /// The default: random-hadamard:0x5eed.
  rotation() = default;
  /// diag(random_signs(d, seed)) H_d / sqrt(d); name "random-hadamard:SEED" (decimal).
  static rotation random_hadamard(uint64_t seed);
  /// H_d / sqrt(d) (no signs); name "hadamard".
  static rotation hadamard();
  /// An explicit matrix r [d, d] (row-major: row i holds R[i][0..d)); `source` (a file name) is
  /// its name and is named in every error. Throws attnum::error if r is not [d, d], has a
  /// non-finite entry, or is not orthogonal (max |R R^T - I| > 1e-6). A matrix that is exactly
  /// diag(s) H_d * c (every entry s_i * H_d[i][j] * c, bit for bit) is run with the fast
  /// transform, as the default is: the default's own matrix in float64 gives identical bits.
  static rotation from_matrix(const std::vector<double>& r, const std::vector<int64_t>& shape, std::string source);
  /// Parses "random-hadamard:SEED" (SEED decimal or 0x hex) or "hadamard"; std::nullopt where
  /// `spec` is neither (a file name, for the caller to read). Throws attnum::error on a bad SEED.
  static std::optional<rotation> parse_builtin(std::string_view spec);

  /// "random-hadamard:SEED", "hadamard" or the matrix's source.
  const std::string& name() const { return name_; }
  /// The head dim of an explicit matrix; 0 for the Hadamard family (any power of two).
  int dim() const { return d_; }
  /// Throws attnum::error where this rotation cannot rotate rows of head dim d (naming the
  /// matrix's source and both dims, or the head dim that is not a power of two).
  void check(int d) const;
  /// Returns R [d, d] row-major (for tests, illustrations and to save the default as a file).
  std::vector<double> matrix(int d) const;

  /// Rotates `rows` rows of x [rows, d] in place: each row becomes x·R computed in double, then
  /// rounded once (RNE, IEEE overflow) to `out` (fp32, bf16 or fp16).
  void apply(float* x, int64_t rows, int d, formats::format out = formats::format::fp32) const;
  /// Same for double rows (no rounding).
  void apply(double* x, int64_t rows, int d) const;

 private:
  enum class kind : uint8_t { random_hadamard, hadamard, hadamard_signs, dense };
  std::vector<double> signs(int d) const;
  void row(const double* x, double* y, int d, const std::vector<double>& s) const;
  kind kind_ = kind::random_hadamard;
  uint64_t seed_ = kDefaultRotationSeed;
  std::string name_ = "random-hadamard:24301";
  int d_ = 0;
  double norm_ = 0;                               ///< hadamard_signs: c
  std::shared_ptr<const std::vector<double>> m_;  ///< hadamard_signs: s [d]; dense: R [d, d]
};

/// Rotates rows with the randomized Hadamard of `seed` (rotation::random_hadamard(seed).apply).
void rotate_rows(double* x, int64_t rows, int d, uint64_t seed);
void rotate_rows(float* x, int64_t rows, int d, uint64_t seed);

/// Returns x rounded (RNE; IEEE overflow to Inf) to `f`, one of fp32, bf16, fp16: the dtype of
/// the transformed operands (kernel_spec::transform_dtype).
float round_to(formats::format f, double x);
/// Rounds n floats in place to `f` (a no-op for fp32).
void round_all(float* x, size_t n, formats::format f);
/// Throws attnum::error naming `what` unless f is fp32, bf16 or fp16.
void check_transform_dtype(formats::format f, std::string_view what);

}  // namespace attnum::transforms
