// See fma_gemm.h. The AVX2 and AVX-512 kernels carry target attributes (no file-wide flags) and
// run only when isa::active() picked their path.
#include "attnum/attention/fma_gemm.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnum/attention/isa.h"
#include "attnum/attention/plane_gemm.h"

#include "attnum/attention/simd_target.h"

namespace attnum::attention::fma {
namespace {

#if ATTNUM_SIMD_KERNELS
// Where a call's sums go: C (a plain store, C[r * ldc + j] for row r and column j of the call), or
// rounded into the fp32 accumulators of *acc (fma_gemm.h, fp32_acc).
struct out_t {
  double* C = nullptr;
  int ldc = 0;
  const fp32_acc* acc = nullptr;
};

// The fp32 accumulator step of one value, as the vector epilogues below compute it lane by lane:
// round to nearest fp32 of (the accumulator, or +0 for a fresh one: zero) + the chunk sum.
template <typename A>
inline void round_one(bool zero, A* p, double sum) {
  *p = static_cast<A>(static_cast<float>((zero ? 0.0 : static_cast<double>(*p)) + sum));
}

// Row r of a micro-tile whose w (<= W) valid sums t[0, w) start at column j, rounded into acc one
// by one (the partial panel at the end of a call).
inline void round_row(const fp32_acc& o, bool zero, int r, int j, const double* t, int w) {
  for (int q = 0; q < w; ++q) {
    const size_t i = static_cast<size_t>(r) * o.ld + j + q;
    if (o.f)
      round_one(zero, o.f + i, t[q]);
    else
      round_one(zero, o.d + i, t[q]);
  }
}

// The chunks of one call: the whole of kn for a plain store, else fp32_acc::k_step (fma_gemm.h).
inline int chunk_of(const out_t& o, int kn) { return o.acc && o.acc->k_step > 0 ? o.acc->k_step : kn; }

// What the micro-tile of rows [r, r + R) and columns from j (of the call) computes: -1 when every
// column is causally masked for every row (fp32_acc::mask_after: skipped, its accumulators left as
// they are), else the k from which every product of its rows is +-0 (fp32_acc::k_end: those
// products, and the chunks made only of them, are skipped), kn where neither applies.
inline int tile_limit(const out_t& o, int r, int R, int j, int kn) {
  if (!o.acc) return kn;
  const fp32_acc& a = *o.acc;
  if (j > r + R - 1 + a.mask_after) return -1;
  if (!a.k_end) return kn;
  int lim = 0;
  for (int q = r; q < r + R; ++q) lim = std::max(lim, a.k_end[q]);
  return std::min(lim, kn);
}

// Stores the first m (<= 4, none when m <= 0) lanes of x at c.
ATTNUM_AVX2_FN inline void store4(double* c, int m, __m256d x) {
  if (m >= 4)
    _mm256_storeu_pd(c, x);
  else if (m > 0)
    _mm256_maskstore_pd(c, _mm256_cmpgt_epi64(_mm256_set1_epi64x(m), _mm256_setr_epi64x(0, 1, 2, 3)), x);
}

// ---- AVX2: R rows x 2 vectors of 4 doubles (8 columns); 12 accumulators + 2 B + 1 broadcast
// of the 16 ymm registers, 8 loads per 12 FMAs (4 x 12 would need 16 loads: load-bound).
constexpr int kV2 = 2, kW2 = 4 * kV2, kR2 = 6;

// Row r of an AVX2 micro-tile (x[0..kV2), w valid columns from column j) to its output. The
// rounding: vcvtpd2ps rounds to nearest as the scalar double -> float conversion does (the same
// instruction on one lane), and +0 + sum keeps round_one's sign of zero for a fresh accumulator.
ATTNUM_AVX2_FN inline void put_avx2(const out_t& o, bool first, int r, int j, const __m256d* x, int w) {
  if (!o.acc) {
    double* c = o.C + static_cast<size_t>(r) * o.ldc + j;
    store4(c, w, x[0]);
    store4(c + 4, w - 4, x[1]);
    return;
  }
  const fp32_acc& a = *o.acc;
  if (a.live && !a.live[r]) return;
  const bool zero = a.from_zero && first;
  if (w < kW2) {
    alignas(32) double t[kW2];
    _mm256_store_pd(t, x[0]);
    _mm256_store_pd(t + 4, x[1]);
    round_row(a, zero, r, j, t, w);
    return;
  }
  const size_t i = static_cast<size_t>(r) * a.ld + j;
  ATTNUM_UNROLL for (int v = 0; v < kV2; ++v) {
    if (a.f) {
      float* p = a.f + i + 4 * v;
      const __m256d base = zero ? _mm256_setzero_pd() : _mm256_cvtps_pd(_mm_loadu_ps(p));
      _mm_storeu_ps(p, _mm256_cvtpd_ps(_mm256_add_pd(base, x[v])));
    } else {
      double* p = a.d + i + 4 * v;
      const __m256d base = zero ? _mm256_setzero_pd() : _mm256_loadu_pd(p);
      _mm256_storeu_pd(p, _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_add_pd(base, x[v]))));
    }
  }
}

// One micro-tile over the chunks of kn (chunk_of), up to lim (tile_limit): each chunk's sums
// from +0, then to the output.
template <int R>
ATTNUM_AVX2_FN void micro_avx2(const double* a, size_t lda, int kn, int lim, const double* b, const out_t& o, int r0,
                               int j0, int w) {
  const int ks = chunk_of(o, kn);
  for (int c0 = 0; c0 < lim; c0 += ks) {
    __m256d acc[R][kV2];
    ATTNUM_UNROLL for (int r = 0; r < R; ++r) ATTNUM_UNROLL for (int v = 0; v < kV2; ++v) acc[r][v] =
        _mm256_setzero_pd();
    for (int k = c0, c1 = std::min(lim, c0 + ks); k < c1; ++k) {
      const double* bk = b + static_cast<size_t>(k) * kW2;
      const __m256d b0 = _mm256_loadu_pd(bk), b1 = _mm256_loadu_pd(bk + 4);
      ATTNUM_UNROLL for (int r = 0; r < R; ++r) {
        const __m256d x = _mm256_broadcast_sd(a + r * lda + k);
        acc[r][0] = _mm256_fmadd_pd(x, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_pd(x, b1, acc[r][1]);
      }
    }
    ATTNUM_UNROLL for (int r = 0; r < R; ++r) put_avx2(o, c0 == 0, r0 + r, j0, acc[r], w);
  }
}

// ---- AVX-512: R rows x 4 vectors of 8 doubles (32 columns); 24 accumulators + 4 B + 1 broadcast
// of the 32 zmm registers.
constexpr int kV5 = 4, kW5 = 8 * kV5, kR5 = 6;

// Row r of an AVX-512 micro-tile to its output, as put_avx2.
ATTNUM_AVX512_FN inline void put_avx512(const out_t& o, bool first, int r, int j, const __m512d* x, int w) {
  if (!o.acc) {
    double* c = o.C + static_cast<size_t>(r) * o.ldc + j;
    if (w == kW5) {
      ATTNUM_UNROLL for (int v = 0; v < kV5; ++v) _mm512_storeu_pd(c + 8 * v, x[v]);
    } else {
      ATTNUM_UNROLL for (int v = 0; v < kV5; ++v) {
        const int m = std::clamp(w - 8 * v, 0, 8);
        _mm512_mask_storeu_pd(c + 8 * v, static_cast<__mmask8>((1u << m) - 1), x[v]);
      }
    }
    return;
  }
  const fp32_acc& a = *o.acc;
  if (a.live && !a.live[r]) return;
  const bool zero = a.from_zero && first;
  if (w < kW5) {
    alignas(64) double t[kW5];
    ATTNUM_UNROLL for (int v = 0; v < kV5; ++v) _mm512_store_pd(t + 8 * v, x[v]);
    round_row(a, zero, r, j, t, w);
    return;
  }
  const size_t i = static_cast<size_t>(r) * a.ld + j;
  ATTNUM_UNROLL for (int v = 0; v < kV5; ++v) {
    if (a.f) {
      float* p = a.f + i + 8 * v;
      const __m512d base = zero ? _mm512_setzero_pd() : _mm512_cvtps_pd(_mm256_loadu_ps(p));
      _mm256_storeu_ps(p, _mm512_cvtpd_ps(_mm512_add_pd(base, x[v])));
    } else {
      double* p = a.d + i + 8 * v;
      const __m512d base = zero ? _mm512_setzero_pd() : _mm512_loadu_pd(p);
      _mm512_storeu_pd(p, _mm512_cvtps_pd(_mm512_cvtpd_ps(_mm512_add_pd(base, x[v]))));
    }
  }
}

template <int R>
ATTNUM_AVX512_FN void micro_avx512(const double* a, size_t lda, int kn, int lim, const double* b, const out_t& o,
                                   int r0, int j0, int w) {
  const int ks = chunk_of(o, kn);
  for (int c0 = 0; c0 < lim; c0 += ks) {
    __m512d acc[R][kV5];
    ATTNUM_UNROLL for (int r = 0; r < R; ++r) ATTNUM_UNROLL for (int v = 0; v < kV5; ++v) acc[r][v] =
        _mm512_setzero_pd();
    for (int k = c0, c1 = std::min(lim, c0 + ks); k < c1; ++k) {
      const double* bk = b + static_cast<size_t>(k) * kW5;
      const __m512d b0 = _mm512_loadu_pd(bk), b1 = _mm512_loadu_pd(bk + 8), b2 = _mm512_loadu_pd(bk + 16),
                    b3 = _mm512_loadu_pd(bk + 24);
      ATTNUM_UNROLL for (int r = 0; r < R; ++r) {
        const __m512d x = _mm512_set1_pd(a[r * lda + k]);
        acc[r][0] = _mm512_fmadd_pd(x, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_pd(x, b1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_pd(x, b2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_pd(x, b3, acc[r][3]);
      }
    }
    ATTNUM_UNROLL for (int r = 0; r < R; ++r) put_avx512(o, c0 == 0, r0 + r, j0, acc[r], w);
  }
}

// A micro-kernel of the table below: rows [r0, r0 + R) of A (a at row r0) against one panel.
using micro_fn = void (*)(const double* a, size_t lda, int kn, int lim, const double* b, const out_t& o, int r0, int j0,
                          int w);

// A (rows x kn doubles, row stride lda) against B's column panels of W (panel q at pb + q *
// pstride): panel by panel, groups of up to R rows through micro[rows - 1], the micro-tiles that
// tile_limit skips left out.
template <int W, int R>
void drive(const micro_fn (&micro)[R], const double* pa, size_t lda, int rows, int kn, const double* pb, size_t pstride,
           int n, const out_t& o) {
  for (int q = 0; q * W < n; ++q) {
    const int j0 = q * W, w = std::min(W, n - j0);
    const double* b = pb + static_cast<size_t>(q) * pstride;
    for (int r = 0; r < rows; r += R) {
      const int nr = std::min(R, rows - r), lim = tile_limit(o, r, nr, j0, kn);
      if (lim >= 0) micro[nr - 1](pa + r * lda, lda, kn, lim, b, o, r, j0, w);
    }
  }
}

#endif

}  // namespace

#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
namespace {
// ---- INT8 QK: int16 pairs of consecutive k in one int32 word. A as [rows][d2] words, B as key
// panels [panel][d2][W] words (zero past n and past d), W = planes::panel_width(): the layout of
// the plane kernels (plane_gemm.h), which compute these sums (vpmaddwd + vpaddd, exact in int32).
inline int32_t pair16(float lo, float hi) {
  return static_cast<int32_t>(static_cast<uint16_t>(static_cast<int16_t>(lo)) |
                              static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int16_t>(hi))) << 16);
}

void pack_i8_rows(const float* A, int lda, int rows, int d, std::vector<int32_t>& out) {
  const int d2 = (d + 1) / 2;
  out.resize(static_cast<size_t>(rows) * d2);
  for (int r = 0; r < rows; ++r) {
    const float* row = A + static_cast<size_t>(r) * lda;
    int32_t* dst = out.data() + static_cast<size_t>(r) * d2;
    for (int q = 0; q < d / 2; ++q) dst[q] = pair16(row[2 * q], row[2 * q + 1]);
    if (d % 2) dst[d2 - 1] = pair16(row[d - 1], 0.0f);
  }
}

void pack_i8_panels(const float* B, int ldb, int n, int d, int W, std::vector<int32_t>& out) {
  const int d2 = (d + 1) / 2, np = (n + W - 1) / W;
  out.assign(static_cast<size_t>(np) * d2 * W, 0);
  for (int j = 0; j < n; ++j) {
    const float* row = B + static_cast<size_t>(j) * ldb;
    int32_t* dst = out.data() + static_cast<size_t>(j / W) * d2 * W + j % W;
    for (int q = 0; q < d2; ++q)
      dst[static_cast<size_t>(q) * W] = pair16(row[2 * q], 2 * q + 1 < d ? row[2 * q + 1] : 0.0f);
  }
}

}  // namespace
#endif

// The key panel width of the INT8 sums: the plane kernels' (0 on the scalar path). Every int32
// partial sum is at most d * 2^14 < 2^31 for d < 2^17.
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
namespace {
int i8_width(int d) { return d < (1 << 17) ? planes::panel_width() : 0; }
}  // namespace
#endif

bool int8_gemm_nt(const float* A, int lda, const float* B, int ldb, int rows, int n, int d, double* C, int ldc) {
  static thread_local packed_i8_b kb;  // storage reused from call to call
  kb.build(B, ldb, n, d);
  return int8_gemm_nt(A, lda, kb, 0, rows, n, C, ldc);
}

void packed_i8_b::build(const float* B, int ldb, int n_, int d_) {
  W = 0, n = n_, d = d_, d2 = (d_ + 1) / 2;
  p.clear();
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  W = i8_width(d);
  if (W) pack_i8_panels(B, ldb, n, d, W, p);
#else
  (void)B, (void)ldb;
#endif
}

void packed_i8_a::build(const float* A, int lda, int rows_, int d_) {
  W = 0, rows = rows_, d = d_, d2 = (d_ + 1) / 2;
  p.clear();
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  W = i8_width(d);
  if (W) pack_i8_rows(A, lda, rows, d, p);
#else
  (void)A, (void)lda;
#endif
}

bool int8_gemm_nt(const packed_i8_a& A, int r0, int rows, const packed_i8_b& B, int j0, int n, double* C, int ldc) {
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  const int W = i8_width(B.d);
  if (!W || B.W != W || A.W != W || A.d != B.d || j0 % W || j0 + n > B.n || r0 + rows > A.rows) return false;
  if (rows <= 0 || n <= 0) return true;
  planes::pair_gemm(A.p.data() + static_cast<size_t>(r0) * A.d2, A.d2, rows,
                    B.p.data() + static_cast<size_t>(j0 / W) * B.d2 * W, static_cast<size_t>(B.d2) * W, B.d2, n, C,
                    ldc);
  return true;
#else
  (void)A, (void)r0, (void)rows, (void)B, (void)j0, (void)n, (void)C, (void)ldc;
  return false;
#endif
}

bool int8_gemm_nt(const float* A, int lda, const packed_i8_b& B, int j0, int rows, int n, double* C, int ldc) {
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  if (!B.W || B.W != i8_width(B.d) || j0 % B.W || j0 + n > B.n) return false;
  static thread_local packed_i8_a a;
  a.build(A, lda, rows, B.d);
  return int8_gemm_nt(a, 0, rows, B, j0, n, C, ldc);
#else
  (void)A, (void)lda, (void)B, (void)j0, (void)rows, (void)n, (void)C, (void)ldc;
  return false;
#endif
}

#if ATTNUM_SIMD_KERNELS
namespace {
// The active path's kernels on A (rows x kn doubles, row stride lda) and B's panels.
void run_kernels(int W, const double* a, size_t lda, int rows, int kn, const double* b, size_t pstride, int n,
                 const out_t& o) {
  static constexpr micro_fn k5[kR5] = {micro_avx512<1>, micro_avx512<2>, micro_avx512<3>,
                                       micro_avx512<4>, micro_avx512<5>, micro_avx512<6>};
  static constexpr micro_fn k2[kR2] = {micro_avx2<1>, micro_avx2<2>, micro_avx2<3>,
                                       micro_avx2<4>, micro_avx2<5>, micro_avx2<6>};
  if (W == kW5)
    isa::note("fma_gemm", isa::path::avx512), drive<kW5>(k5, a, lda, rows, kn, b, pstride, n, o);
  else
    isa::note("fma_gemm", isa::path::avx2), drive<kW2>(k2, a, lda, rows, kn, b, pstride, n, o);
}

// Rows [0, rows) of A as doubles in thread-local storage (packed_a): columns [0, kn) of A, row
// stride kn.
const double* rows_as_double(const float* A, int lda, int rows, int kn) {
  static thread_local packed_a a;
  a.build(A, lda, rows, kn);
  return a.p.data();
}

// A packed call (ranges checked by the caller) on A's doubles and B's panels.
bool packed_call(const double* a, size_t lda, const packed_b& B, int k0, int kn, int j0, int n, int rows,
                 const out_t& o) {
  const size_t pstride = static_cast<size_t>(B.k) * B.W;
  run_kernels(B.W, a, lda, rows, kn,
              B.p.data() + static_cast<size_t>(j0 / B.W) * pstride + static_cast<size_t>(k0) * B.W, pstride, n, o);
  return true;
}
}  // namespace
#endif

bool ordered_gemm(const float* A, int lda, const float* B, int ldb, int rows, int n, int kn, double* C, int ldc) {
#if ATTNUM_SIMD_KERNELS
  if (rows <= 0 || n <= 0) return true;
  if (!panel_width()) return false;
  static thread_local packed_b b;  // B as the packed calls hold it: [panel][k][W], zero past n
  b.build(B, ldb, false, kn, n);
  return packed_call(rows_as_double(A, lda, rows, kn), kn, b, 0, kn, 0, n, rows, out_t{C, ldc, nullptr});
#else
  (void)A, (void)lda, (void)B, (void)ldb, (void)rows, (void)n, (void)kn, (void)C, (void)ldc;
  return false;
#endif
}

int panel_width() {
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx512)) return kW5;
  if (isa::at_least(isa::path::avx2)) return kW2;
#endif
  return 0;
}

void packed_b::build(const float* B, int ldb, bool transposed, int k_rows, int n_cols) {
  W = panel_width(), k = k_rows, n = n_cols;
  if (!W) return;
  const int np = (n + W - 1) / W;
  p.resize(static_cast<size_t>(np) * k * W);
  for (int q = 0; q < np; ++q) {
    const int j0 = q * W, w = std::min(W, n - j0);
    double* dst = p.data() + static_cast<size_t>(q) * k * W;
    if (transposed) {  // B(kk, j) = src[j * ldb + kk]: one source row per column
      for (int j = 0; j < W; ++j)
        for (int kk = 0; kk < k; ++kk)
          dst[static_cast<size_t>(kk) * W + j] = j < w ? B[static_cast<size_t>(j0 + j) * ldb + kk] : 0.0;
    } else {
      for (int kk = 0; kk < k; ++kk)
        for (int j = 0; j < W; ++j)
          dst[static_cast<size_t>(kk) * W + j] = j < w ? B[static_cast<size_t>(kk) * ldb + j0 + j] : 0.0;
    }
  }
}

void packed_a::build(const float* A, int lda, int rows_, int k_) {
  rows = rows_, k = k_;
  p.resize(static_cast<size_t>(rows) * k);
  for (int r = 0; r < rows; ++r)
    for (int kk = 0; kk < k; ++kk) p[static_cast<size_t>(r) * k + kk] = A[static_cast<size_t>(r) * lda + kk];
}

#if ATTNUM_SIMD_KERNELS
namespace {
bool fits(const packed_b& B, int k0, int kn, int j0, int n) {
  return B.W != 0 && B.W == panel_width() && j0 % B.W == 0 && k0 >= 0 && kn >= 0 && k0 + kn <= B.k && j0 >= 0 &&
         j0 + n <= B.n;
}
bool fits(const packed_a& A, int r0, int rows, int k0, int kn) {
  return r0 >= 0 && r0 + rows <= A.rows && k0 >= 0 && k0 + kn <= A.k;
}
// exactly one of f and d; k_end only on running accumulators (a skipped chunk leaves acc as it is)
bool usable(const fp32_acc& out) { return !out.f != !out.d && !(out.k_end && out.from_zero) && out.k_step >= 0; }
}  // namespace
#endif

bool ordered_gemm(const float* A, int lda, const packed_b& B, int k0, int kn, int j0, int n, int rows, double* C,
                  int ldc) {
#if ATTNUM_SIMD_KERNELS
  if (!fits(B, k0, kn, j0, n)) return false;
  if (rows <= 0 || n <= 0) return true;
  return packed_call(rows_as_double(A, lda, rows, kn), kn, B, k0, kn, j0, n, rows, out_t{C, ldc, nullptr});
#else
  (void)A, (void)lda, (void)B, (void)k0, (void)kn, (void)j0, (void)n, (void)rows, (void)C, (void)ldc;
  return false;
#endif
}

bool ordered_gemm(const float* A, int lda, const packed_b& B, int k0, int kn, int j0, int n, int rows,
                  const fp32_acc& out) {
#if ATTNUM_SIMD_KERNELS
  if (!fits(B, k0, kn, j0, n) || !usable(out)) return false;
  if (rows <= 0 || n <= 0) return true;
  return packed_call(rows_as_double(A, lda, rows, kn), kn, B, k0, kn, j0, n, rows, out_t{nullptr, 0, &out});
#else
  (void)A, (void)lda, (void)B, (void)k0, (void)kn, (void)j0, (void)n, (void)rows, (void)out;
  return false;
#endif
}

bool ordered_gemm(const packed_a& A, int r0, const packed_b& B, int k0, int kn, int j0, int n, int rows, double* C,
                  int ldc) {
#if ATTNUM_SIMD_KERNELS
  if (!fits(B, k0, kn, j0, n) || !fits(A, r0, rows, k0, kn)) return false;
  if (rows <= 0 || n <= 0) return true;
  return packed_call(A.p.data() + static_cast<size_t>(r0) * A.k + k0, A.k, B, k0, kn, j0, n, rows,
                     out_t{C, ldc, nullptr});
#else
  (void)A, (void)r0, (void)B, (void)k0, (void)kn, (void)j0, (void)n, (void)rows, (void)C, (void)ldc;
  return false;
#endif
}

bool ordered_gemm(const packed_a& A, int r0, const packed_b& B, int k0, int kn, int j0, int n, int rows,
                  const fp32_acc& out) {
#if ATTNUM_SIMD_KERNELS
  if (!fits(B, k0, kn, j0, n) || !fits(A, r0, rows, k0, kn) || !usable(out)) return false;
  if (rows <= 0 || n <= 0) return true;
  return packed_call(A.p.data() + static_cast<size_t>(r0) * A.k + k0, A.k, B, k0, kn, j0, n, rows,
                     out_t{nullptr, 0, &out});
#else
  (void)A, (void)r0, (void)B, (void)k0, (void)kn, (void)j0, (void)n, (void)rows, (void)out;
  return false;
#endif
}

}  // namespace attnum::attention::fma
