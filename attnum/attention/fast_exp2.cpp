// See fast_exp2.h.
#include "attnum/attention/fast_exp2.h"

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#endif

namespace attnum::attention::fast {
namespace {

#if defined(__AVX512F__)
// Bits of 2^(i/32) rounded to the nearest double, minus i << 47 (the exponent part that
// ki << 47 adds back), as glibc's __exp2f_data table; checked by perf_exp2_test.
constexpr uint64_t kTable[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL};
constexpr double kShift = 0x1.8p+47;  // 1.5 * 2^52 / 32: xd + kShift rounds x to a multiple of 1/32
constexpr double kC0 = 0x1.c6af84b912394p-5, kC1 = 0x1.ebfce50fac4f3p-3, kC2 = 0x1.62e42ff0c52d6p-1;

struct table_regs {
  __m512i t0, t1, t2, t3;  // entries 0-7, 8-15, 16-23, 24-31
};

// 8 lanes of the main path (|x| < 128).
inline __m256 exp2_8(__m256 x, const table_regs& T) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d shift = _mm512_set1_pd(kShift);
  __m512d kd = _mm512_add_pd(xd, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, shift);
  const __m512d r = _mm512_sub_pd(xd, kd);
  // table[ki % 32]: permutex2var uses the low 4 index bits over two registers; bit 4 picks the half
  const __m512i lo = _mm512_permutex2var_epi64(T.t0, ki, T.t1), hi = _mm512_permutex2var_epi64(T.t2, ki, T.t3);
  const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
  const __m512i t = _mm512_mask_blend_epi64(upper, lo, hi);
  const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
  const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(kC0), _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(kC2), _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(z, r2, y);
  y = _mm512_mul_pd(y, s);
  return _mm512_cvtpd_ps(y);
}

// exp2f of fmaf(in[i], a, b) (FUSED) or of in[i].
template <bool FUSED>
void exp2f_vec_t(const float* in, float a, float b, float* out, int n) {
  const table_regs T = {_mm512_loadu_si512(kTable), _mm512_loadu_si512(kTable + 8), _mm512_loadu_si512(kTable + 16),
                        _mm512_loadu_si512(kTable + 24)};
  auto arg = [&](float v) { return FUSED ? std::fmaf(v, a, b) : v; };
  // The lanes in mask (|x| >= 128, +Inf, NaN) are redone with the scalar exp2f: into a copy of
  // the vector results, before anything is stored (in and out may alias).
  auto scalar_lanes = [&](unsigned mask, const float* x, float* tmp) {
    for (; mask; mask &= mask - 1) {
      const int l = __builtin_ctz(mask);
      tmp[l] = std::exp2f(arg(x[l]));
    }
  };
  alignas(64) float tmp[16];
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  // 16 lanes at a time (the float steps at full width, the double steps as two halves); the
  // last group loads and stores only its n % 16 lanes
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 in16 = _mm512_maskz_loadu_ps(k, in + i);
    const __m512 x = FUSED ? _mm512_fmadd_ps(in16, va, vb) : in16;
    // lanes with |x| >= 128, Inf or NaN (glibc's top12 test) take the scalar path
    const __mmask16 special = k & _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(128.0f), _CMP_NLT_UQ);
    const __m512 xs = _mm512_mask_blend_ps(special, x, _mm512_setzero_ps());
    const __m256 lo = exp2_8(_mm512_castps512_ps256(xs), T);
    const __m256 hi = exp2_8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xs), 1)), T);
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    // -Inf (the causal mask) gives +0, as exp2f(-Inf): only the other special lanes go scalar
    const __mmask16 minf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    y = _mm512_mask_blend_ps(minf, y, _mm512_setzero_ps());
    if (special & ~minf) {
      _mm512_store_ps(tmp, y);
      scalar_lanes(special & ~minf, in + i, tmp);
      y = _mm512_load_ps(tmp);
    }
    _mm512_mask_storeu_ps(out + i, k, y);
  }
}

void exp2f_vec(const float* in, float* out, int n) { exp2f_vec_t<false>(in, 0.0f, 0.0f, out, n); }

bool self_check() {
  // A fixed sweep over (-130, 10) with irregular steps, plus exact multiples of 1/32 and ties.
  constexpr int kN = 4096;
  alignas(64) float x[kN], y[kN];
  uint32_t s = 12345u;
  for (int i = 0; i < kN; ++i) {
    s = s * 1664525u + 1013904223u;
    const float u = static_cast<float>(s >> 8) * 0x1p-24f;
    x[i] = i % 4 == 0 ? static_cast<float>(i / 4 - 512) / 32.0f : -130.0f + 140.0f * u;
  }
  x[1] = -INFINITY, x[kN - 3] = -INFINITY, x[2] = INFINITY, x[3] = -200.0f;
  exp2f_vec(x, y, kN);
  for (int i = 0; i < kN; ++i)
    if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(std::exp2f(x[i]))) return false;
  return true;
}
#endif

bool vector_ok() {
#if defined(__AVX512F__)
  static const bool ok = self_check();
  return ok;
#else
  return false;
#endif
}

}  // namespace

bool exp2f_vector_active() { return vector_ok(); }

void exp2f_fma_array(const float* x, float a, float b, float* out, int n) {
#if defined(__AVX512F__)
  if (vector_ok()) {
    exp2f_vec_t<true>(x, a, b, out, n);
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] = std::exp2f(std::fmaf(x[i], a, b));
}

void exp2f_array(const float* in, float* out, int n) {
#if defined(__AVX512F__)
  if (vector_ok()) {
    exp2f_vec(in, out, n);
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] = std::exp2f(in[i]);
}

}  // namespace attnum::attention::fast
