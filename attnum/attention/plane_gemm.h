#pragma once
// Exact E4M3 x E4M3 chunk sums on the integer units of AVX2 and AVX-512 (vpmaddwd + vpaddd) and
// of AArch64 NEON (vmlal_s16: int16 products accumulated in int32 lanes): the engine's fast path
// for FA3-style QK and PV chunks without AMX (isa.h), replacing the double-FMA kernels of
// fma_gemm.h (on NEON, Eigen's double GEMMs) where the data allows. Same bits: every chunk sum is
// the exact sum.
//
// The split. Every E4M3 value is an integer multiple of 2^-9 of magnitude <= 448. For a shift s in
// [0, 9] an operand splits into x = hi + lo: hi = x where x * 2^s is an integer (x's quantum is at
// least 2^-s: the large values), lo = x elsewhere (the small ones, |x| < 2^(3-s)). The hi plane is
// held as int16 integers x * 2^s. Shifts are chosen per operand so that for one chunk of kn <= 32
// products |a_int| * |b_int| * kn < 2^31: a vpmaddwd lane (a0 b0 + a1 b1, exact in int32) and
// every vpaddd partial sum of the chunk stay below 2^31, so the int32 chunk sum of the hi planes
// is exact, in any order, and times 2^-(sa+sb) (a power of two) it is exact in double.
//
// The rest of a chunk sum is sum(a_lo b) + sum(a_hi b_lo) (a b = a_hi b_hi + a_lo b + a_hi b_lo):
//  * A = Q (QK, one head): lo is sparse (|q| < 1 with the shifts below on per-tensor scaled data,
//    about 1% of the values): a list per row, each entry adding a_lo * B(k, j) over the block's keys,
//    B(k, .) read back from B's own planes (its hi integers times 2^-sb, or its sparse lo values:
//    a value is one or the other), so no float copy of B is kept; likewise a_hi in the a_hi * b_lo
//    terms below is read from A's hi plane.
//  * A = P8 (PV, one chunk of a tile; the shift sp chosen per group of 8 rows from the group's
//    largest value): a second dense int16 plane P_lo * 2^9 (< 2^(12 - sp) since P_lo < 2^(3 - sp)),
//    run only for the groups holding such values (none where sp = 9: every E4M3 value is then hi).
//  * B lo (K or V, one head) is sparse (below 2^-2 for K's 14-bit plane, 2^-1 for V's 13-bit one:
//    0.2-0.4% of normal data): a list per k, each entry adding a_hi(r, k) * b_lo (QK) or
//    P8(r, k) * b_lo (PV) over the rows.
// Every term is a product of two E4M3 values (a multiple of 2^-18) and every partial sum of a
// chunk, whatever the grouping, is bounded by the chunk's absolute sum <= 32 * 448^2 < 2^22.62: a
// multiple of 2^-18 below 2^23 has at most 41 significant bits, so the double additions of the
// int32 part and the correction terms are exact. The result equals the ascending double sum of
// fma_gemm.h (the exact sum) bit for bit, including the sign of zero: all paths give +0.
//
// Refusals (the caller then runs the double kernels): a NaN or a value off the E4M3 grid in the
// operand (build: whole head; PV: that chunk), more than 1/8 of an operand's values in its sparse
// lo list (speed only), a chunk longer than 32 or starting at an odd k, a block start off the
// panel grid, or the scalar ISA path.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnum/attention/causal.h"

namespace attnum::attention::planes {

/// False when ATTNUM_NO_PLANES is set (and not "0"): the engine then runs the double-FMA kernels
/// (fma_gemm.h) for these sums, to measure the difference. Read once.
bool enabled();

/// Panel width (columns) of the active path's plane kernels: 32 on avx512 / amx, 16 on avx2, 8 on
/// neon, 0 on scalar (no kernels).
int panel_width();

/// The dense kernels on their own: C[r * ldc + j] = the int32 sum over q < kq of the int16 pair
/// products a[r * lda + q] . b[panel(j)][q][j % W] (each word holds two int16 values, low half
/// first; b in column panels of W = panel_width() words, panel p at b + p * pstride), converted to
/// double, for r < rows, j < n. Exact when every partial sum of a row-column pair stays inside
/// int32 (the caller's bound, e.g. Sage's INT8 QK: d * 2^14 < 2^31). Nothing on the scalar path.
void pair_gemm(const int32_t* a, size_t lda, int rows, const int32_t* b, size_t pstride, int kq, int n, double* C,
               int ldc);

/// Largest shift s in [0, 9] with amax * 2^s < 2^bits (0 when even s = 0 does not fit).
int shift_for(double amax, int bits);

/// A = Q of one head: hi plane as int16 pairs, hi values as floats, lo as a sparse list per row.
struct plane_a {
  bool ok = false;
  int rows = 0, k = 0, k2 = 0, shift = 0;
  int32_t max_int = 0;            // largest |hi| integer
  std::vector<int32_t> hi;        // [rows][k2]: (hi[2q], hi[2q+1]) as one int32 word, 0 where lo
  std::vector<int> lo_ptr, lo_k;  // CSR by row, k ascending
  std::vector<float> lo_v;
  /// Splits A (rows x k, row stride ld) with the given shift; ok false on NaN, off-grid values or
  /// a dense lo plane. amax: formats::span_amax of A where the caller has it (one pass less over
  /// the operand), negative to compute it here.
  void build(const float* A, int ld, int rows, int k, int shift, double amax = -1);
};

/// B = K^T (QK, transposed: B(kk, j) = src[j * ld + kk]) or V (PV: B(kk, j) = src[kk * ld + j]) of
/// one head: hi plane in column panels of int16 pairs along k, lo as a sparse list per k.
struct plane_b {
  bool ok = false;
  int W = 0, k = 0, n = 0, k2 = 0, shift = 0;
  int32_t max_int = 0;
  std::vector<int32_t> p;         // [panel][k2][W]: (B(2q, j), B(2q+1, j)) as one int32 word, 0 where lo
  std::vector<int> lo_ptr, lo_j;  // CSR by k, j ascending
  std::vector<float> lo_v;
  /// amax as for plane_a::build.
  void build(const float* B, int ld, bool transposed, int k_rows, int n_cols, int shift, double amax = -1);
};

/// Called by qk_chunk / pv_chunk for each group of rows as soon as its sums are complete (rows
/// [r, r + nr) of the call, C pointing at row r, columns [0, n) written): the caller rounds them
/// into its accumulators while they are in cache.
struct row_sink {
  void* ctx = nullptr;
  void (*fn)(void* ctx, int r, int nr, const double* C, int ldc, int n) = nullptr;
};
template <typename F>
row_sink make_sink(F& f) {
  return {&f, [](void* c, int r, int nr, const double* C, int ldc, int n) { (*static_cast<F*>(c))(r, nr, C, ldc, n); }};
}

/// Shifts for a QK pair (B gets up to 14 bits, A the rest of the int32 budget for kn products);
/// false when no pair fits.
bool choose_shifts(double amax_a, double amax_b, int kn, int& sa, int& sb);

/// C[r * ldc + j] = exact sum over k in [k0, k0 + kn) of A(r0 + r, k) B(k, j0 + j), r < rows,
/// j < n. False (nothing written) when a or b is not ok, kn > 32, k0 odd, kn odd before the end of
/// k, j0 off the panel grid, or the active path differs from b's.
/// Causal skip: column j is masked for row r when j > r + mask_after (call-relative). A group of
/// rows writes, and hands its sink, only the columns [0, n_g) that hold every unmasked column of
/// its rows; the columns after are left as they are (for callers that give every masked score
/// the mask value before reading it, as the engine's softmax does).
bool qk_chunk(const plane_a& a, const plane_b& b, int r0, int rows, int k0, int kn, int j0, int n, double* C, int ldc,
              row_sink sink = {}, long mask_after = kNoMask);

/// PV: C[r * ldc + j] = exact sum over t in [0, kn) of P[r * ldp + t] V(k0 + t, j), r < rows, j <
/// v.n, for the rows with live[r]; the other rows of C get unspecified values (their P is not
/// checked). P holds E4M3 values >= 0 or NaN. False (nothing written) when a live P value is NaN or
/// off the grid, or as qk_chunk. A group of rows stops its products at the last nonzero P of its
/// live rows (the causally masked tail): V's planes hold finite values, so the products after are
/// +-0 and the exact sum is the same.
bool pv_chunk(const float* P, int ldp, const char* live, int rows, int k0, int kn, const plane_b& v, double* C, int ldc,
              row_sink sink = {});

/// Counters of this thread (tests: which branches ran).
struct counters {
  long qk_chunks = 0, pv_chunks = 0, pv_lo_passes = 0, a_lo_terms = 0, b_lo_terms = 0, pv_refused = 0;
};
counters& stats();

}  // namespace attnum::attention::planes
