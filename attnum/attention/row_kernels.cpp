// The engine's row-level vector kernels (row_kernels.h), chosen at run time like the chunk GEMMs:
// each carries its ISA in a target attribute (simd_target.h) and runs only when isa::active()
// has that unit. Each does the plain loop's operations in the plain loop's order.
#include "attnum/attention/row_kernels.h"

#include <algorithm>
#include <cmath>

#include "attnum/attention/isa.h"
#include "attnum/attention/simd_target.h"

namespace attnum::attention::rowk {
namespace {

#if ATTNUM_SIMD_KERNELS
// The wgmma row-sum order for two rows at once, lanes 0-7 row a, 8-15 row b: lane 2t holds
// partial l[t]. Per group of 8 columns, adding the group then the group shifted down one float
// (vpsrlq 32) adds p[8g+2t] and then p[8g+2t+1] to lane 2t, in the scalar order; the odd lanes
// collect junk that is never read. Columns past n load as +0, and l + 0 == l (l is never -0).
ATTNUM_AVX512_FN void rowsum_pair_avx512(float* la, float* lb, const float* pa, const float* pb, int n) {
  alignas(64) float init[16] = {la[0], 0, la[1], 0, la[2], 0, la[3], 0, lb[0], 0, lb[1], 0, lb[2], 0, lb[3], 0};
  __m512 L = _mm512_load_ps(init);
  for (int j = 0; j < n; j += 8) {
    const int m = std::min(8, n - j);
    const __mmask8 k = static_cast<__mmask8>(m >= 8 ? 0xFF : (1u << m) - 1);
    const __m512 P = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_maskz_loadu_ps(k, pa + j)),
                                        _mm256_maskz_loadu_ps(k, pb + j), 1);
    L = _mm512_add_ps(L, P);
    L = _mm512_add_ps(L, _mm512_castsi512_ps(_mm512_srli_epi64(_mm512_castps_si512(P), 32)));
  }
  alignas(64) float out[16];
  _mm512_store_ps(out, L);
  for (int t = 0; t < 4; ++t) la[t] = out[2 * t], lb[t] = out[8 + 2 * t];
}

ATTNUM_AVX512_FN void rowsum_rows_avx512(float* l, const float* p, int ldp, int rows, const char* live, int n) {
  int r = 0;
  while (r < rows) {
    if (!live[r]) {
      ++r;
      continue;
    }
    int r2 = r + 1;
    while (r2 < rows && !live[r2]) ++r2;
    float scratch[4] = {0, 0, 0, 0};  // an odd row out pairs with a copy of itself, summed here
    float* lb = r2 < rows ? l + static_cast<size_t>(r2) * 4 : scratch;
    const float* pb = r2 < rows ? p + static_cast<size_t>(r2) * ldp : p + static_cast<size_t>(r) * ldp;
    rowsum_pair_avx512(l + static_cast<size_t>(r) * 4, lb, p + static_cast<size_t>(r) * ldp, pb, n);
    r = r2 + 1;
  }
}

// The same for one row in a ymm: lane 2t holds l[t].
ATTNUM_AVX2_FN void rowsum_one_avx2(float* l, const float* p, int n) {
  alignas(32) float init[8] = {l[0], 0, l[1], 0, l[2], 0, l[3], 0};
  __m256 L = _mm256_load_ps(init);
  for (int j = 0; j < n; j += 8) {
    const int m = std::min(8, n - j);
    const __m256 P = m == 8 ? _mm256_loadu_ps(p + j)
                            : _mm256_maskload_ps(p + j, _mm256_cmpgt_epi32(_mm256_set1_epi32(m),
                                                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    L = _mm256_add_ps(L, P);
    L = _mm256_add_ps(L, _mm256_castsi256_ps(_mm256_srli_epi64(_mm256_castps_si256(P), 32)));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, L);
  for (int t = 0; t < 4; ++t) l[t] = out[2 * t];
}

ATTNUM_AVX2_FN void rowsum_rows_avx2(float* l, const float* p, int ldp, int rows, const char* live, int n) {
  for (int r = 0; r < rows; ++r)
    if (live[r]) rowsum_one_avx2(l + static_cast<size_t>(r) * 4, p + static_cast<size_t>(r) * ldp, n);
}

// vmaxps(x, a) is (x > a) ? x : a, which is acc < x ? x : acc for every x, NaN included. Lanes
// hold no NaN (max_ps keeps a on NaN): a tree reduction gives the fold's value; the caller
// settles the sign of a zero result with the plain loop.
ATTNUM_AVX512_FN float fold_max_avx512(const float* v, int n, float init) {
  __m512 a = _mm512_set1_ps(init);
  int i = 0;
  for (; i + 16 <= n; i += 16) a = _mm512_max_ps(_mm512_loadu_ps(v + i), a);
  float m = _mm512_reduce_max_ps(a);
  for (; i < n; ++i) m = std::max(m, v[i]);
  return m;
}

ATTNUM_AVX2_FN float fold_max_avx2(const float* v, int n, float init) {
  __m256 a = _mm256_set1_ps(init);
  int i = 0;
  for (; i + 8 <= n; i += 8) a = _mm256_max_ps(_mm256_loadu_ps(v + i), a);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a);
  float m = lanes[0];
  for (int l = 1; l < 8; ++l) m = std::max(m, lanes[l]);
  for (; i < n; ++i) m = std::max(m, v[i]);
  return m;
}

// round_fp16 (engine_detail.h) of a[i] + c[i], 4 lanes at a time: the same operations in the same
// order (max_pd(x, lo) is x > lo ? x : lo, as round_fp16's select).
ATTNUM_AVX2_FN int round_add_fp16_avx2(float* a, const double* c, int n) {
  const __m256d sign = _mm256_set1_pd(-0.0), expo = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FF0000000000000LL)),
                lo = _mm256_set1_pd(0x1p-14), lift = _mm256_set1_pd(0x1p42), over = _mm256_set1_pd(65520.0),
                inf = _mm256_set1_pd(INFINITY);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d x = _mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + i)), _mm256_loadu_pd(c + i));
    const __m256d ax = _mm256_andnot_pd(sign, x);
    const __m256d cc = _mm256_mul_pd(_mm256_max_pd(_mm256_and_pd(ax, expo), lo), lift);
    __m256d r = _mm256_sub_pd(_mm256_add_pd(ax, cc), cc);
    r = _mm256_blendv_pd(r, inf, _mm256_cmp_pd(r, over, _CMP_GE_OQ));
    const __m256d y = _mm256_or_pd(r, _mm256_and_pd(x, sign));
    _mm_storeu_ps(a + i, _mm256_cvtpd_ps(_mm256_blendv_pd(x, y, _mm256_cmp_pd(ax, inf, _CMP_LT_OQ))));
  }
  return i;
}
#endif

}  // namespace

bool has_wgmma_rowsum() {
#if ATTNUM_SIMD_KERNELS
  return isa::at_least(isa::path::avx2);
#else
  return false;
#endif
}

bool wgmma_rowsum_rows([[maybe_unused]] float* l, [[maybe_unused]] const float* p, [[maybe_unused]] int ldp,
                       [[maybe_unused]] int rows, [[maybe_unused]] const char* live, [[maybe_unused]] int n) {
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx512)) {
    isa::note("wgmma_rowsum", isa::path::avx512);
    rowsum_rows_avx512(l, p, ldp, rows, live, n);
    return true;
  }
  if (isa::at_least(isa::path::avx2)) {
    isa::note("wgmma_rowsum", isa::path::avx2);
    rowsum_rows_avx2(l, p, ldp, rows, live, n);
    return true;
  }
#endif
  return false;
}

bool fold_max([[maybe_unused]] const float* v, [[maybe_unused]] int n, [[maybe_unused]] float init,
              [[maybe_unused]] float* out) {
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx512)) {
    isa::note("fold_max", isa::path::avx512);
    *out = fold_max_avx512(v, n, init);
    return true;
  }
  if (isa::at_least(isa::path::avx2)) {
    isa::note("fold_max", isa::path::avx2);
    *out = fold_max_avx2(v, n, init);
    return true;
  }
#endif
  return false;
}

int round_add_fp16([[maybe_unused]] float* a, [[maybe_unused]] const double* c, [[maybe_unused]] int n) {
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx2)) {
    isa::note("round_add_fp16", isa::path::avx2);  // an AVX2 kernel on the avx512 and amx paths too
    return round_add_fp16_avx2(a, c, n);
  }
#endif
  return 0;
}

}  // namespace attnum::attention::rowk
