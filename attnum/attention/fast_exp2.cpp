// See fast_exp2.h.
#include "attnum/attention/fast_exp2.h"

#include <bit>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "attnum/attention/isa.h"

#include "attnum/attention/simd_target.h"

namespace attnum::attention::fast {
namespace {

#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
// Bits of 2^(i/32) rounded to the nearest double, minus i << 47 (the exponent part that
// ki << 47 adds back), as glibc's __exp2f_data table; checked by perf_exp2_test.
constexpr uint64_t kTable[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL, 0x3fef72b83c7d517bULL,
    0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL, 0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL,
    0x3feedea64c123422ULL, 0x3feece086061892dULL, 0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL,
    0x3feea47eb03a5585ULL, 0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL, 0x3feee89f995ad3adULL,
    0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL, 0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL,
    0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL};
constexpr double kShift = 0x1.8p+47;  // 1.5 * 2^52 / 32: xd + kShift rounds x to a multiple of 1/32
constexpr double kC0 = 0x1.c6af84b912394p-5, kC1 = 0x1.ebfce50fac4f3p-3, kC2 = 0x1.62e42ff0c52d6p-1;

// The lanes in mask (|x| >= 128, +Inf, NaN) are redone with the scalar exp2f: into a copy of
// the vector results, before anything is stored (in and out may alias).
template <bool FUSED>
void scalar_lanes(unsigned mask, const float* x, float a, float b, float* tmp) {
  for (; mask; mask &= mask - 1) {
    const int l = __builtin_ctz(mask);
    tmp[l] = std::exp2f(FUSED ? std::fmaf(x[l], a, b) : x[l]);
  }
}

#endif

#if ATTNUM_SIMD_KERNELS
struct table_regs {
  __m512i t0, t1, t2, t3;  // entries 0-7, 8-15, 16-23, 24-31
};

// 8 lanes of the main path (|x| < 128).
ATTNUM_AVX512_FN inline __m256 exp2_8(__m256 x, const table_regs& T) {
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
ATTNUM_AVX512_FN void exp2f_vec_t(const float* in, float a, float b, float* out, int n) {
  const table_regs T = {_mm512_loadu_si512(kTable), _mm512_loadu_si512(kTable + 8), _mm512_loadu_si512(kTable + 16),
                        _mm512_loadu_si512(kTable + 24)};
  alignas(64) float tmp[16];
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  // 16 lanes at a time (the float steps at full width, the double steps as two halves); the
  // last group loads and stores only its n % 16 lanes
  for (int i = 0; i < n; i += 16) {
    const bool full = n - i >= 16;
    const __mmask16 k = full ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 in16 = full ? _mm512_loadu_ps(in + i) : _mm512_maskz_loadu_ps(k, in + i);
    const __m512 x = FUSED ? _mm512_fmadd_ps(in16, va, vb) : in16;
    // lanes with |x| >= 128, Inf or NaN (glibc's top12 test) take the scalar path
    const __mmask16 special = k & _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(128.0f), _CMP_NLT_UQ);
    const __m512 xs = _mm512_mask_blend_ps(special, x, _mm512_setzero_ps());
    const __m256 lo = exp2_8(_mm512_castps512_ps256(xs), T);
    const __m256 hi = exp2_8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xs), 1)), T);
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    // x <= -150 (-Inf, the causal mask, and the large negative finite masks of Sage) gives +0, as
    // glibc's exp2f does (2^-150 is half the least subnormal: a tie to even, 0): only the other
    // special lanes go scalar
    const __mmask16 minf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-150.0f), _CMP_LE_OQ);
    y = _mm512_mask_blend_ps(minf, y, _mm512_setzero_ps());
    if (special & ~minf) {
      _mm512_store_ps(tmp, y);
      scalar_lanes<FUSED>(special & ~minf, in + i, a, b, tmp);
      y = _mm512_load_ps(tmp);
    }
    if (full)
      _mm512_storeu_ps(out + i, y);
    else
      _mm512_mask_storeu_ps(out + i, k, y);
  }
}

// AVX2 + FMA: 4 lanes of the main path (|x| < 128) in double, the same operations as exp2_8; the
// table entries come from a gather (AVX2 has no two-register permute).
ATTNUM_AVX2_FN inline __m128 exp2_4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d shift = _mm256_set1_pd(kShift);
  __m256d kd = _mm256_add_pd(xd, shift);
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, shift);
  const __m256d r = _mm256_sub_pd(xd, kd);
  const __m256i t = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable),
                                           _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
  const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
  const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(kC0), _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(kC2), _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  y = _mm256_mul_pd(y, s);
  return _mm256_cvtpd_ps(y);
}

template <bool FUSED>
ATTNUM_AVX2_FN void exp2f_avx2_t(const float* in, float a, float b, float* out, int n) {
  alignas(32) float tmp[8], buf[8];
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int i = 0; i < n; i += 8) {
    const int m = std::min(8, n - i);
    const float* src = in + i;
    if (m < 8) {  // the last group: through a zero-padded copy
      for (int l = 0; l < 8; ++l) buf[l] = l < m ? in[i + l] : 0.0f;
      src = buf;
    }
    const __m256 in8 = _mm256_loadu_ps(src);
    const __m256 x = FUSED ? _mm256_fmadd_ps(in8, va, vb) : in8;
    // lanes with |x| >= 128, Inf or NaN take the scalar path; x <= -150 (-Inf included) gives +0
    const __m256 special = _mm256_cmp_ps(_mm256_and_ps(x, absmask), _mm256_set1_ps(128.0f), _CMP_NLT_UQ);
    const __m256 minf = _mm256_cmp_ps(x, _mm256_set1_ps(-150.0f), _CMP_LE_OQ);
    const __m256 xs = _mm256_andnot_ps(special, x);
    __m256 y = _mm256_set_m128(exp2_4(_mm256_extractf128_ps(xs, 1)), exp2_4(_mm256_castps256_ps128(xs)));
    y = _mm256_andnot_ps(minf, y);
    const unsigned rest = static_cast<unsigned>(_mm256_movemask_ps(_mm256_andnot_ps(minf, special))) & ((1u << m) - 1);
    if (rest) {
      _mm256_store_ps(tmp, y);
      scalar_lanes<FUSED>(rest, src, a, b, tmp);
      y = _mm256_load_ps(tmp);
    }
    if (m == 8) {  // a full group goes straight out (copying it through tmp stalled every store)
      _mm256_storeu_ps(out + i, y);
    } else {
      _mm256_store_ps(tmp, y);
      for (int l = 0; l < m; ++l) out[i + l] = tmp[l];
    }
  }
}

#endif

#if ATTNUM_NEON_KERNELS
// NEON: 2 lanes of the main path (|x| < 128) in double, the same operations as exp2_8 (vfmaq_f64(a,
// b, c) is the fused a + b c); the table entries read by index.
inline float64x2_t exp2_2(float64x2_t xd) {
  const float64x2_t shift = vdupq_n_f64(kShift);
  float64x2_t kd = vaddq_f64(xd, shift);
  const uint64x2_t ki = vreinterpretq_u64_f64(kd);
  kd = vsubq_f64(kd, shift);
  const float64x2_t r = vsubq_f64(xd, kd);
  const uint64x2_t t =
      vcombine_u64(vcreate_u64(kTable[vgetq_lane_u64(ki, 0) & 31]), vcreate_u64(kTable[vgetq_lane_u64(ki, 1) & 31]));
  const float64x2_t s = vreinterpretq_f64_u64(vaddq_u64(t, vshlq_n_u64(ki, 47)));
  const float64x2_t z = vfmaq_f64(vdupq_n_f64(kC1), r, vdupq_n_f64(kC0));
  const float64x2_t r2 = vmulq_f64(r, r);
  float64x2_t y = vfmaq_f64(vdupq_n_f64(1.0), r, vdupq_n_f64(kC2));
  y = vfmaq_f64(y, z, r2);
  return vmulq_f64(y, s);
}

template <bool FUSED>
void exp2f_neon_t(const float* in, float a, float b, float* out, int n) {
  alignas(16) float tmp[4], buf[4];
  alignas(16) uint32_t rest_lanes[4];
  const float32x4_t va = vdupq_n_f32(a), vb = vdupq_n_f32(b), zero = vdupq_n_f32(0.0f);
  for (int i = 0; i < n; i += 4) {
    const int m = std::min(4, n - i);
    const float* src = in + i;
    if (m < 4) {  // the last group: through a zero-padded copy
      for (int l = 0; l < 4; ++l) buf[l] = l < m ? in[i + l] : 0.0f;
      src = buf;
    }
    const float32x4_t in4 = vld1q_f32(src);
    const float32x4_t x = FUSED ? vfmaq_f32(vb, in4, va) : in4;  // fmaf(in, a, b)
    // lanes with |x| >= 128, Inf or NaN take the scalar path; x <= -150 (-Inf included) gives +0
    const uint32x4_t special = vmvnq_u32(vcltq_f32(vabsq_f32(x), vdupq_n_f32(128.0f)));
    const uint32x4_t minf = vcleq_f32(x, vdupq_n_f32(-150.0f));
    const float32x4_t xs = vbslq_f32(special, zero, x);
    const float32x2_t lo = vcvt_f32_f64(exp2_2(vcvt_f64_f32(vget_low_f32(xs))));
    float32x4_t y = vcvt_high_f32_f64(lo, exp2_2(vcvt_high_f64_f32(xs)));
    y = vbslq_f32(minf, zero, y);
    const uint32x4_t rest = vbicq_u32(special, minf);
    if (vmaxvq_u32(rest)) {
      vst1q_f32(tmp, y);
      vst1q_u32(rest_lanes, rest);
      unsigned mask = 0;
      for (int l = 0; l < m; ++l) mask |= rest_lanes[l] ? 1u << l : 0u;
      scalar_lanes<FUSED>(mask, src, a, b, tmp);
      y = vld1q_f32(tmp);
    }
    if (m == 4) {
      vst1q_f32(out + i, y);
    } else {
      vst1q_f32(tmp, y);
      for (int l = 0; l < m; ++l) out[i + l] = tmp[l];
    }
  }
}
#endif

#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
enum class vec { none, avx2, avx512, neon };

void exp2f_run(vec v, bool fused, const float* in, float a, float b, float* out, int n) {
  isa::note("exp2f", v == vec::avx512 ? isa::path::avx512 : v == vec::avx2 ? isa::path::avx2 : isa::path::neon);
#if ATTNUM_SIMD_KERNELS
  if (v == vec::avx512)
    fused ? exp2f_vec_t<true>(in, a, b, out, n) : exp2f_vec_t<false>(in, a, b, out, n);
  else
    fused ? exp2f_avx2_t<true>(in, a, b, out, n) : exp2f_avx2_t<false>(in, a, b, out, n);
#else
  (void)v;
  fused ? exp2f_neon_t<true>(in, a, b, out, n) : exp2f_neon_t<false>(in, a, b, out, n);
#endif
}

bool self_check(vec v) {
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
  exp2f_run(v, false, x, 0.0f, 0.0f, y, kN - 5);  // a masked last group too
  for (int i = 0; i < kN - 5; ++i)
    if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(std::exp2f(x[i]))) return false;
  return true;
}
#endif

// The vector path the active ISA (isa.h) runs, where it passed its self-check on this libm.
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
vec vector_path() {
#if ATTNUM_NEON_KERNELS
  if (isa::at_least(isa::path::neon)) {
    static const bool ok = self_check(vec::neon);
    if (ok) return vec::neon;
  }
#endif
  if (isa::at_least(isa::path::avx512)) {
    static const bool ok = self_check(vec::avx512);
    if (ok) return vec::avx512;
  }
  if (isa::at_least(isa::path::avx2)) {
    static const bool ok = self_check(vec::avx2);
    if (ok) return vec::avx2;
  }
  return vec::none;
}
#endif

}  // namespace

const char* exp2f_path() {
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  switch (vector_path()) {
    case vec::avx512:
      return "avx512";
    case vec::avx2:
      return "avx2";
    case vec::neon:
      return "neon";
    case vec::none:
      break;
  }
#endif
  return "scalar";
}

bool exp2f_vector_active() { return std::string_view(exp2f_path()) != "scalar"; }

void exp2f_fma_array(const float* x, float a, float b, float* out, int n) {
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  if (const vec v = vector_path(); v != vec::none) {
    exp2f_run(v, true, x, a, b, out, n);
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] = std::exp2f(std::fmaf(x[i], a, b));
}

void exp2f_array(const float* in, float* out, int n) {
#if ATTNUM_SIMD_KERNELS || ATTNUM_NEON_KERNELS
  if (const vec v = vector_path(); v != vec::none) {
    exp2f_run(v, false, in, 0.0f, 0.0f, out, n);
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] = std::exp2f(in[i]);
}

}  // namespace attnum::attention::fast
