#pragma once
// The engine's chunk GEMMs on a double FMA unit (AVX2 or AVX-512, chosen at run time, isa.h):
// register-blocked micro-kernels for C = A B over one k_step chunk (QK: Q rows x K^T, PV: P8 rows
// x V), every output a plain ascending-k sum in double.
//
// Why one ordered double kernel serves both the exact FP8 paths and the ordered paths:
//  * Ordered paths (bf16, fp32, sage1, ...; kernels whose chunk sum the model defines as the
//    ascending double sum): A and B hold floats, so every product a*b has at most 24 + 24 = 48
//    significant bits and is exact in double. fma(a, b, acc) rounds acc + a*b once, exactly as
//    acc + (a*b) with a separate (exact) multiply does: the kernel reproduces the plain loop
//    `acc += double(a) * double(b)` bit for bit, in the same order.
//  * Exact FP8 paths (E4M3 x E4M3 with k_step <= 32, FA3 and friends): every E4M3 value is
//    m * 2^e, |m| <= 15, e in [-9, 5], so every product is a multiple of 2^-18 and the absolute
//    sum of a chunk's 32 products is at most 32 * 448^2 < 2^22.62: every partial sum, in any
//    order, is a multiple of 2^-18 below 2^23, i.e. an integer multiple of 2^-18 with at most
//    41 significant bits < 53: exact in double. So the ascending sum IS the exact chunk sum that
//    the AMX tiles (amx.h) and Eigen's double GEMM also produce.
//  * fp32 FMA with the exponent-plane split of amx.h (planes 0-2 of each operand, five
//    accumulators with products multiples of 2^L and absolute sums below 2^(L+24), so every fp32
//    partial sum is exact; with FMA no product is rounded either, so the tile bounds of amx.h
//    carry over unchanged) is exact as well, but costs one fp32 FMA per occupied plane pair:
//    on per-tensor scaled data nearly every 16 x 32 block holds values from planes 0 and 1 of
//    both operands, i.e. four plane pairs, four fp32 FMAs per product. One double FMA costs two
//    fp32 lanes, so the double kernel is twice as fast and needs no plane split, no occupancy
//    masks and no fallback (NaN propagates as in the ordered loop). docs/speed.md
//    has the measurement.
//
// The kernels pack B (a chunk of kn rows) into doubles once per call, in column panels, and the
// rows of A into doubles; each micro-kernel keeps R x W accumulators in registers over the chunk.

#include <cstdint>
#include <vector>

#include "attnum/attention/causal.h"

namespace attnum::attention::fma {

/// C[r * ldc + j] = sum over k in [0, kn) of double(A[r * lda + k]) * double(B[k * ldb + j]),
/// ascending k from +0, for r < rows, j < n. Returns false (and writes nothing) when the active
/// ISA path (isa.h) has no vector kernel: the caller runs its scalar loop.
bool ordered_gemm(const float* A, int lda, const float* B, int ldb, int rows, int n, int kn, double* C, int ldc);

/// The column panel width of the active path's double kernels (0 on the scalar path).
int panel_width();

/// B packed once for many calls (K of a head for QK, V for PV): doubles in column panels of the
/// active path's width, [panel][k][W], zero past n. Empty (W == 0) on the scalar path.
struct packed_b {
  int W = 0, k = 0, n = 0;
  std::vector<double> p;
  /// B(kk, j) for kk < k_rows, j < n_cols is B[kk * ldb + j], or B[j * ldb + kk] when transposed.
  void build(const float* B, int ldb, bool transposed, int k_rows, int n_cols);
};

/// ordered_gemm with B = rows [k0, k0 + kn) and columns [j0, j0 + n) of a packed B. Returns false
/// (nothing written) when the active path differs from the one B was packed for, j0 is not a
/// multiple of the panel width, or the range leaves B: the caller takes the unpacked call.
bool ordered_gemm(const float* A, int lda, const packed_b& B, int k0, int kn, int j0, int n, int rows, double* C,
                  int ldc);

/// A's rows as doubles, built once for many calls (Q of a head: every block and chunk of its tiles
/// reads it instead of converting its rows again).
struct packed_a {
  int rows = 0, k = 0;
  std::vector<double> p;  // [rows][k]
  void build(const float* A, int lda, int rows, int k);
};

/// The packed call with rows [r0, r0 + rows) of a packed A (columns [k0, k0 + kn)). Also false
/// when those rows or columns leave A.
bool ordered_gemm(const packed_a& A, int r0, const packed_b& B, int k0, int kn, int j0, int n, int rows, double* C,
                  int ldc);

/// The fp32 accumulator model (kernel_spec.h, acc_kind::fp32) fused into the kernels' epilogue:
/// instead of storing a chunk's sums, a packed call sets for r < rows with live[r] (every r when
/// live is null) and j < n
///   acc(r, j) = float(acc(r, j) + sum(r, j))   (float(+0 + sum(r, j)) when from_zero),
/// the sum added in double and rounded to nearest fp32 once, as the engine's round_add does with
/// the stored sums; acc(r, j) is f[r * ld + j] or d[r * ld + j] (exactly one of f and d set; d
/// holds fp32 values as doubles). Same bits as the store followed by that rounding, one pass
/// over the sums fewer.
///
/// With k_step > 0 one call covers several chunks: kn splits into chunks of k_step from k0 (the
/// last one shorter where k_step does not divide kn), each summed from +0 and rounded into acc
/// in ascending order, from_zero applying to the first chunk only. Every accumulator sees the
/// same operations in the same order as one call per chunk, so the bits are the same; the
/// kernels keep a micro-tile's rows and panel in L1 across the chunks instead of leaving and
/// re-entering them per chunk (measured: 4.4 -> 6.2 G 256-bit FMAs/s on AVX2, kernels.md).
struct fp32_acc {
  float* f = nullptr;
  double* d = nullptr;
  int ld = 0;
  bool from_zero = false;
  const char* live = nullptr;
  int k_step = 0;  ///< chunk length (0: the whole call is one chunk)
  /// Causal skip (QK): column j of the call is masked for row r when j > r + mask_after. A
  /// micro-tile whose every column is masked for every one of its rows is not computed and its
  /// accumulators keep whatever they held: only for callers that replace every masked score
  /// before reading it (the engine's softmax does).
  long mask_after = kNoMask;
  /// Trailing zeros (PV): for each row r of the call, every product of k >= k_end[r] is +-0 (the
  /// caller's promise: P = +-0 there and B finite; 0 for a row that is not live). A micro-tile
  /// stops at the largest k_end of its rows, and chunks that start there are not rounded at all.
  /// Same bits: a chunk's ascending double sum starts at +0 and is never -0 (x + -x is +0 in
  /// round-to-nearest), so adding +-0 leaves it unchanged, and acc + (+0) rounds back to acc (a
  /// running fp32 accumulator is never -0 either). Refused (false) together with from_zero.
  const int* k_end = nullptr;
};

/// The packed calls with the sums rounded into out (false also when out sets both or neither of
/// f and d).
bool ordered_gemm(const float* A, int lda, const packed_b& B, int k0, int kn, int j0, int n, int rows,
                  const fp32_acc& out);
bool ordered_gemm(const packed_a& A, int r0, const packed_b& B, int k0, int kn, int j0, int n, int rows,
                  const fp32_acc& out);

/// Sage's INT8 QK: C[r * ldc + j] = sum over k < d of A[r * lda + k] * B[j * ldb + k] (A and B hold
/// integers in [-128, 127] as floats; B is K, one key per row), exact: every product is at most
/// 2^14 in magnitude and an int32 sum of d of them stays below 2^31 for d < 2^17, so vpmaddwd on
/// sign-extended int16 pairs (the plane kernels of plane_gemm.h, AVX2 and AVX-512) gives the exact
/// integer in any order; stored as doubles (exact). Returns false when the active path has no
/// kernel (or d >= 2^17).
bool int8_gemm_nt(const float* A, int lda, const float* B, int ldb, int rows, int n, int d, double* C, int ldc);

/// K of a head packed once for int8_gemm_nt (int16 pair panels of the plane kernels' width), so
/// that the blocks of every tile read it instead of packing their keys again. W == 0 where
/// int8_gemm_nt has no kernel.
struct packed_i8_b {
  int W = 0, n = 0, d = 0, d2 = 0;
  std::vector<int32_t> p;
  /// B holds n keys of d integers in [-128, 127] as floats, row stride ldb.
  void build(const float* B, int ldb, int n, int d);
};

/// Q of a head packed once: rows of d integers in [-128, 127] as int16 pairs [rows][d2].
struct packed_i8_a {
  int W = 0, rows = 0, d = 0, d2 = 0;
  std::vector<int32_t> p;
  void build(const float* A, int lda, int rows, int d);
};

/// int8_gemm_nt against keys [j0, j0 + n) of a packed K. False (nothing written) when the active
/// path differs from the one B was packed for or j0 is off its panel grid.
bool int8_gemm_nt(const float* A, int lda, const packed_i8_b& B, int j0, int rows, int n, double* C, int ldc);

/// The same for rows [r0, r0 + rows) of a packed Q (also false when A and B differ in d or width).
bool int8_gemm_nt(const packed_i8_a& A, int r0, int rows, const packed_i8_b& B, int j0, int n, double* C, int ldc);

}  // namespace attnum::attention::fma
