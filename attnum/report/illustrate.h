#pragma once
// The synthetic illustration of the report (seed 001, section 01): one query, four keys, eight
// channels. The four keys share their first coordinate `common`; exact softmax cancels it (it
// adds q[0]*common/sqrt(d) to every score), but FP8 rounding after a random-sign Hadamard
// rotation may not: rotation spreads the common component over all channels, where the E4M3
// grid (3 fraction bits) can erase the small token-specific differences softmax needs.
//
// Arithmetic (stated on the page): Q and K each get one max-based E4M3 scale (amax/448, in
// float32); x/scale (float32 division) is cast with cvt.rn.satfinite (RNE, saturating at +-448)
// and multiplied back by the scale (exact in fp64); dot products and softmax are in fp64. The
// rotation is x -> (x * signs) H8 / sqrt(8), the study's seeded random-sign Hadamard
// (transforms/hadamard.h with the engine's default seed; for eight channels that seed happens to
// draw eight +1 signs, so it is the plain normalised H8). It is orthogonal and applied to Q and
// K (there is no V here). With `center`, the mean key is subtracted before rotation and before
// the casts of both FP8 conditions; exact weights are computed from the uncentered operands and
// are unchanged by centering in exact arithmetic.
// This stops at attention weights: no P cast, no V, no tiles.
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <vector>

namespace attnum::report {

inline constexpr int kIllustrationDim = 8;
inline constexpr int kIllustrationKeys = 4;

using ivec = std::array<double, kIllustrationDim>;
using ikeys = std::array<ivec, kIllustrationKeys>;
using iweights = std::array<double, kIllustrationKeys>;

/// The numbers of one slider position.
struct illustration {
  double common = 0;    ///< the shared first coordinate of the keys
  bool center = false;  ///< mean key subtracted before rotation and casts
  ivec q{};             ///< the query
  ikeys k{};            ///< the keys as given to the casts (centered when `center`)
  ivec q_fp8{};         ///< FP8 query without rotation (dequantized)
  ikeys k_fp8{};        ///< FP8 keys without rotation (dequantized)
  ivec q_rot{};         ///< rotated query (exact)
  ikeys k_rot{};        ///< rotated keys (exact)
  ivec q_rot_fp8{};     ///< FP8 rotated query, in rotated coordinates (dequantized)
  ikeys k_rot_fp8{};    ///< FP8 rotated keys, in rotated coordinates (dequantized)
  double scale_q = 0, scale_k = 0, scale_q_rot = 0, scale_k_rot = 0;  ///< amax/448 (float32)
  iweights w_exact{};     ///< exact fp64 softmax of the uncentered, unrotated operands
  iweights w_fp8{};       ///< weights from FP8 Q and K without rotation
  iweights w_fp8_rot{};   ///< weights from FP8 Q and K after rotation
  double tv_fp8 = 0;      ///< total variation distance 0.5*sum|w_fp8 - w_exact|
  double tv_fp8_rot = 0;  ///< total variation distance of the rotated condition
};

/// Returns the illustration's numbers for a shared first coordinate `common` (any finite value).
illustration illustrate(double common, bool center);

/// Returns the slider positions embedded in the report: 0, 2, 4, ..., 240.
std::vector<double> illustration_commons();

/// Returns the signs of the illustration's Hadamard rotation (transforms::random_signs(8, seed)).
ivec illustration_signs();

/// Returns the rows printed by `attnum illustrate --json`: one for the query, one per key.
nlohmann::json illustration_rows(const illustration& ill);

/// Returns the compact object embedded in the report for one slider position.
nlohmann::json illustration_json(const illustration& ill);

}  // namespace attnum::report
