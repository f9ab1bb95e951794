#pragma once
// Randomized Hadamard rotation (FlashAttention-3's "incoherent processing", arXiv 2407.08608
// §3.3): M = diag(s) * H_d / sqrt(d), s a seeded vector of random signs, H_d the Sylvester
// Walsh-Hadamard matrix. M is orthogonal, so (QM)(KM)^T = QK^T: applied to Q and K (never V) it
// leaves exact attention unchanged. Cost O(d log d) per row (fast Walsh-Hadamard transform).
//
// Head dims that are not a power of two (80, 96, ...) have no Sylvester Hadamard matrix; instead
// of an undocumented construction we throw attnum::error naming the head dim.
#include <cstdint>
#include <vector>

namespace attnum::transforms {

/// Returns d random signs (+1/-1) from `seed` (splitmix64; the same seed gives the same signs).
std::vector<double> random_signs(int d, uint64_t seed);

/// In-place unnormalised fast Walsh-Hadamard transform of x[0..d). Precondition: d a power of two.
void fwht(double* x, int d);

/// Rotates each of `rows` rows of x [rows, d] in place: x_r <- (x_r * s) H / sqrt(d), computed in
/// double. Throws attnum::error if d is not a power of two.
void rotate_rows(double* x, int64_t rows, int d, uint64_t seed);
/// Same for float rows (computed in double, rounded once to float).
void rotate_rows(float* x, int64_t rows, int d, uint64_t seed);

}  // namespace attnum::transforms
