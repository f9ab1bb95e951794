// See plane_gemm.h.
#include "attnum/attention/plane_gemm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "attnum/attention/isa.h"
#include "attnum/attention/simd_target.h"
#include "attnum/formats/scale.h"

namespace attnum::attention::planes {

bool enabled() {
  static const bool on = !isa::env_set("ATTNUM_NO_PLANES");
  return on;
}

counters& stats() {
  static thread_local counters c;
  return c;
}

namespace {
// 2^e as a double for the planes' shifts, bounds and scales (|e| far inside the normal range): the
// value std::ldexp gives, without its libm call (some run per chunk, row group, row and term); x *
// pow2(e) equals std::ldexp(x, e): both are x * 2^e rounded once.
constexpr double pow2(int e) { return std::bit_cast<double>(static_cast<uint64_t>(1023 + e) << 52); }
}  // namespace

int shift_for(double amax, int bits) {
  for (int s = 9; s >= 0; --s)
    if (amax * pow2(s) < pow2(bits)) return s;
  return -1;
}

bool choose_shifts(double amax_a, double amax_b, int kn, int& sa, int& sb) {
  if (!(amax_a <= 448.0) || !(amax_b <= 448.0) || kn <= 0 || kn > 32) return false;
  // K gets 14 bits and Q the rest (12 with per-tensor scaled E4M3 and chunks of 32): K's sparse
  // values (|k| < 2^-2, ~0.2% on normal data) cost one scalar term per row, Q's (|q| < 1, ~0.8%)
  // one vector pass over the block's keys; of 13/13, 14/12 and 15/11 this measured fastest.
  sb = shift_for(amax_b, 14);
  if (sb < 0) return false;
  const double b_int = amax_b * pow2(sb), limit = pow2(31);
  for (sa = 9; sa >= 0; --sa)
    if (amax_a * pow2(sa) < 32768.0 && amax_a * pow2(sa) * b_int * kn < limit) return true;
  return false;
}

namespace {

#if ATTNUM_SIMD_KERNELS
// The lanes of `keep` of x as int16 at dst, m of them (whole vectors unmasked, as the load). A
// function of its own, not a lambda: GCC does not give a lambda its enclosing function's target
// attribute, so a lambda of AVX-512 intrinsics compiles only under -march with AVX-512.
ATTNUM_AVX512_FN inline void put_avx512(int16_t* dst, int m, __mmask16 k, __mmask16 keep, __m512 x) {
  const __m256i w = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_maskz_mov_ps(keep, x)));
  if (m == 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), w);
  else
    _mm256_mask_storeu_epi16(dst, k, w);
}

// Vector split of n values (hi and lo as above; lo may be null when only the positions are wanted).
// lo_mask gets one bit per value with a nonzero lo part; false on NaN / off grid.
ATTNUM_AVX512_FN bool split_avx512(const float* x, int n, float s_hi, int16_t* hi, int16_t* lo, uint64_t* lo_mask) {
  const __m512 S = _mm512_set1_ps(s_hi), S9 = _mm512_set1_ps(512.0f), M = _mm512_set1_ps(448.0f);
  bool good = true;
  for (int i = 0; i < n; i += 16) {
    const int m = std::min(16, n - i);
    const __mmask16 k = static_cast<__mmask16>(m == 16 ? 0xFFFF : (1u << m) - 1);
    // whole vectors unmasked (masked stores of full vectors measured slow on Zen 5)
    const __m512 v = m == 16 ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(k, x + i);
    const __m512 y = _mm512_mul_ps(v, S);
    const __mmask16 h =
        _mm512_cmp_ps_mask(_mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), y, _CMP_EQ_OQ);
    const __m512 z = _mm512_mul_ps(v, S9);
    const __mmask16 g =
        _mm512_cmp_ps_mask(_mm512_roundscale_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z, _CMP_EQ_OQ) &
        _mm512_cmp_ps_mask(_mm512_abs_ps(v), M, _CMP_LE_OQ);
    if (static_cast<__mmask16>(~g & k)) good = false;    // NaN, off the grid or above 448
    const __mmask16 l = static_cast<__mmask16>(~h & k);  // not an integer at s_hi (zeros are)
    put_avx512(hi + i, m, k, h, y);
    if (lo) put_avx512(lo + i, m, k, l, z);
    if (lo_mask) lo_mask[i / 64] |= static_cast<uint64_t>(l) << (i % 64);
  }
  return good;
}

ATTNUM_AVX2_FN bool split_avx2(const float* x, int n, float s_hi, int16_t* hi, int16_t* lo, uint64_t* lo_mask) {
  const __m256 S = _mm256_set1_ps(s_hi), S9 = _mm256_set1_ps(512.0f), M = _mm256_set1_ps(448.0f),
               sign = _mm256_set1_ps(-0.0f);
  bool good = true;
  alignas(32) float buf[8];
  alignas(16) int16_t hb[8], lb[8];
  for (int i = 0; i < n; i += 8) {
    const int m = std::min(8, n - i);
    __m256 v;
    if (m == 8) {
      v = _mm256_loadu_ps(x + i);
    } else {
      std::memset(buf, 0, sizeof buf);
      std::memcpy(buf, x + i, sizeof(float) * m);
      v = _mm256_load_ps(buf);
    }
    const __m256 y = _mm256_mul_ps(v, S), z = _mm256_mul_ps(v, S9);
    const __m256 h = _mm256_cmp_ps(_mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), y, _CMP_EQ_OQ);
    const __m256 g =
        _mm256_and_ps(_mm256_cmp_ps(_mm256_round_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z, _CMP_EQ_OQ),
                      _mm256_cmp_ps(_mm256_andnot_ps(sign, v), M, _CMP_LE_OQ));
    if (_mm256_movemask_ps(g) != 0xFF) good = false;
    const int l = _mm256_movemask_ps(h) ^ 0xFF;
    const __m256i yi = _mm256_cvtps_epi32(_mm256_and_ps(y, h)), zi = _mm256_cvtps_epi32(_mm256_andnot_ps(h, z));
    const __m128i h16 = _mm_packs_epi32(_mm256_castsi256_si128(yi), _mm256_extracti128_si256(yi, 1)),
                  l16 = _mm_packs_epi32(_mm256_castsi256_si128(zi), _mm256_extracti128_si256(zi, 1));
    if (m == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + i), h16);
      if (lo) _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + i), l16);
    } else {
      _mm_store_si128(reinterpret_cast<__m128i*>(hb), h16);
      _mm_store_si128(reinterpret_cast<__m128i*>(lb), l16);
      std::memcpy(hi + i, hb, sizeof(int16_t) * m);
      if (lo) std::memcpy(lo + i, lb, sizeof(int16_t) * m);
    }
    if (lo_mask) lo_mask[i / 64] |= static_cast<uint64_t>(l & ((1 << m) - 1)) << (i % 64);
  }
  return good;
}
#endif

#if ATTNUM_SIMD_KERNELS
// Largest |P| over the live rows of a chunk (NaN skipped).
ATTNUM_AVX512_FN float chunk_amax_avx512(const float* P, int ldp, const char* live, int rows, int kn) {
  __m512 m = _mm512_setzero_ps();
  for (int r = 0; r < rows; ++r) {
    if (!live[r]) continue;
    for (int i = 0; i < kn; i += 16) {
      const int c = std::min(16, kn - i);
      const __mmask16 k = static_cast<__mmask16>(c == 16 ? 0xFFFF : (1u << c) - 1);
      m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(k, P + static_cast<size_t>(r) * ldp + i)), m);
    }
  }
  return _mm512_reduce_max_ps(m);
}

#endif

#if ATTNUM_NEON_KERNELS
// NEON split, 4 values at a time, the same tests as split_avx2 (hi where x * s_hi is an integer,
// the grid check at 2^9 and |x| <= 448); the last group goes through a zero-padded copy. FRINTN
// rounds to nearest even (a value equals its rounding exactly when it is an integer, whatever the
// tie rule); FCVTNS converts the integers exactly (NaN gives 0, but a NaN refuses the split).
bool split_neon(const float* x, int n, float s_hi, int16_t* hi, int16_t* lo, uint64_t* lo_mask) {
  const float32x4_t S = vdupq_n_f32(s_hi), S9 = vdupq_n_f32(512.0f), M = vdupq_n_f32(448.0f), zero = vdupq_n_f32(0.0f);
  uint32x4_t bad = vdupq_n_u32(0);
  alignas(16) float buf[4];
  alignas(16) int16_t hb[4], lb[4];
  alignas(16) uint32_t lm[4];
  for (int i = 0; i < n; i += 4) {
    const int m = std::min(4, n - i);
    float32x4_t v;
    if (m == 4) {
      v = vld1q_f32(x + i);
    } else {
      std::memset(buf, 0, sizeof buf);
      std::memcpy(buf, x + i, sizeof(float) * m);
      v = vld1q_f32(buf);
    }
    const float32x4_t y = vmulq_f32(v, S), z = vmulq_f32(v, S9);
    const uint32x4_t h = vceqq_f32(vrndnq_f32(y), y);
    const uint32x4_t g = vandq_u32(vceqq_f32(vrndnq_f32(z), z), vcleq_f32(vabsq_f32(v), M));
    bad = vorrq_u32(bad, vmvnq_u32(g));
    const uint32x4_t l = vmvnq_u32(h);
    const int16x4_t h16 = vqmovn_s32(vcvtnq_s32_f32(vbslq_f32(h, y, zero)));
    const int16x4_t l16 = vqmovn_s32(vcvtnq_s32_f32(vbslq_f32(l, z, zero)));
    if (m == 4) {
      vst1_s16(hi + i, h16);
      if (lo) vst1_s16(lo + i, l16);
    } else {
      vst1_s16(hb, h16), vst1_s16(lb, l16);
      std::memcpy(hi + i, hb, sizeof(int16_t) * m);
      if (lo) std::memcpy(lo + i, lb, sizeof(int16_t) * m);
    }
    if (lo_mask && vmaxvq_u32(l)) {
      vst1q_u32(lm, l);
      for (int t = 0; t < m; ++t)
        if (lm[t]) lo_mask[(i + t) / 64] |= uint64_t{1} << ((i + t) % 64);
    }
  }
  return vmaxvq_u32(bad) == 0;
}
#endif

// Splits a row; hi[n] (and lo[n] when non-null) written, lo_mask[(n + 63) / 64] cleared first.
bool split_row(const float* x, int n, int shift, int16_t* hi, int16_t* lo, uint64_t* lo_mask) {
  const float s = static_cast<float>(pow2(shift));
  if (lo_mask) std::fill(lo_mask, lo_mask + (n + 63) / 64, uint64_t{0});
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx512))
    return isa::note("plane_split", isa::path::avx512), split_avx512(x, n, s, hi, lo, lo_mask);
  if (isa::at_least(isa::path::avx2))
    return isa::note("plane_split", isa::path::avx2), split_avx2(x, n, s, hi, lo, lo_mask);
#endif
#if ATTNUM_NEON_KERNELS
  if (isa::at_least(isa::path::neon))
    return isa::note("plane_split", isa::path::neon), split_neon(x, n, s, hi, lo, lo_mask);
#endif
  (void)x, (void)n, (void)hi, (void)lo;
  return false;  // no kernels on this path: the builds refuse before splitting
}

// P8 of one PV chunk (rows x kn <= 32, dead rows read as 0) split by split_row into the hi words
// (shift) and lo words (shift 9), kq words per row (the pad of an odd kn is 0); lo_group[r / 8]
// set where rows r hold a lo part.
bool split_chunk(const float* P, int ldp, const char* live, int rows, int kn, int shift, int32_t* hi, int32_t* lo,
                 int kq, char* lo_group) {
  bool good = true;
  for (int r = 0; r < rows; ++r) {
    int16_t* h = reinterpret_cast<int16_t*>(hi + static_cast<size_t>(r) * kq);
    int16_t* l = reinterpret_cast<int16_t*>(lo + static_cast<size_t>(r) * kq);
    // the split writes all kn values of a live row: only dead rows and an odd kn's pad need zeros
    if (!live[r] || kn % 2) std::memset(h, 0, sizeof(int32_t) * kq), std::memset(l, 0, sizeof(int32_t) * kq);
    if (!live[r]) continue;
    uint64_t m = 0;
    good = split_row(P + static_cast<size_t>(r) * ldp, kn, shift, h, l, &m) && good;
    if (m) lo_group[r / 8] = 1;
  }
  return good;
}

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols, strides in elements: 32-bit
// elements (floats, or the planes' int32 words) moved as bits, through memcpy and vector loads
// (no aliasing of one type as another). 8 x 8 blocks through AVX2 shuffles where the path has
// them (unpack, shuffle and lane permutes only move bits), the edges element by element.
#if ATTNUM_SIMD_KERNELS
ATTNUM_AVX2_FN void transpose8x8(const float* src, size_t lds, float* dst, size_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {  // rows i..i+3: columns 4 q + (0, 1, 2, 3) of each 128-bit lane
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

void transpose32(const void* src, size_t lds, int rows, int cols, void* dst, size_t ldd) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  auto at = [](auto* base, size_t i) { return base + 4 * i; };
  int r8 = 0, c8 = 0;
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx2)) {
    isa::note("transpose32", isa::path::avx2);
    r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    for (int c = 0; c < c8; c += 8)  // along dst's rows: each block's 8 stores continue the last ones
      for (int r = 0; r < r8; r += 8)
        transpose8x8(static_cast<const float*>(src) + r * lds + c, lds, static_cast<float*>(dst) + c * ldd + r, ldd);
  }
#endif
  for (int r = 0; r < rows; ++r)
    for (int c = r < r8 ? c8 : 0; c < cols; ++c) std::memcpy(at(d, c * ldd + r), at(s, r * lds + c), 4);
}

template <typename F>
void for_each_bit(const uint64_t* mask, int n, F&& f) {
  for (int w = 0; w * 64 < n; ++w)
    for (uint64_t m = mask[w]; m; m &= m - 1) f(w * 64 + __builtin_ctzll(m));
}

#if ATTNUM_SIMD_KERNELS
// ---- int16 pair kernels: C (=|+=) scale * sum over q < kq of the pair dot products of a row's
// words a[r * lda + q] with the panel's words b[q * W + j]. vpmaddwd multiplies the int16 halves
// and adds the two products into an int32 lane, vpaddd accumulates (exact: see plane_gemm.h).
// (vpmaddwd + vpaddd rather than VNNI's vpdpwssd: on the Zen 5 measured, vpdpwssd zmm sustained
// 2.3-2.7 G/s against 4.9 G/s for the pair, i.e. half the products per second.)
constexpr int kW5 = 32, kR5 = 8, kW2 = 16, kR2 = 4;

// The full 8-row kernel's loop is one asm block with the 16 accumulators pinned in zmm16-31: with
// intrinsics (arrays or named variables, even with an asm statement per row) GCC 12 copies every
// accumulator between registers each k pair and spills two of them to the stack, measured at a
// third of the kernel's time. Fewer rows (tile edges) take the intrinsics loop.

// Converts one int32 vector of sums to doubles times scale, stored to (or added to) w <= 16 values of c.
ATTNUM_AVX512_FN inline void store16(double* c, int w, __m512i v, __m512d sc, bool add) {
  ATTNUM_UNROLL for (int h = 0; h < 2; ++h) {
    const int m = std::clamp(w - 8 * h, 0, 8);
    if (!m) continue;
    const __mmask8 k = static_cast<__mmask8>((1u << m) - 1);
    const __m256i half = h ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v);
    __m512d d = _mm512_mul_pd(_mm512_cvtepi32_pd(half), sc);
    if (add) d = _mm512_add_pd(d, _mm512_maskz_loadu_pd(k, c + 8 * h));
    _mm512_mask_storeu_pd(c + 8 * h, k, d);
  }
}

// The sums of R rows x 32 columns (acc[r][v][l]: column 16 v + l) to doubles times sc, stored to
// (ADD: added to) a whole panel of C.
template <int R, bool ADD>
ATTNUM_AVX512_FN inline void panel16(const int32_t (*acc)[2][16], double* C, int ldc, __m512d sc) {
  ATTNUM_UNROLL for (int r = 0; r < R; ++r) ATTNUM_UNROLL for (int v = 0; v < 4; ++v) {
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(&acc[r][v / 2][8 * (v % 2)]));
    double* c = C + static_cast<size_t>(r) * ldc + 8 * v;
    __m512d d = _mm512_mul_pd(_mm512_cvtepi32_pd(x), sc);
    if constexpr (ADD) d = _mm512_add_pd(d, _mm512_loadu_pd(c));
    _mm512_storeu_pd(c, d);
  }
}

template <int R>
ATTNUM_AVX512_FN void micro5(const int32_t* a, size_t lda, const int32_t* b, int kq, double* C, int ldc, int w,
                             double scale, bool add) {
  static_assert(R >= 1 && R <= 8);
  alignas(64) int32_t acc[8][2][16];
  if constexpr (R == 8) {
    if (kq > 0) {
      // 16 accumulators in zmm16-31, B in zmm0-1, the broadcast in zmm2, the pair products in zmm3;
      // row r's word at p0 + r * lda (rows 3-5 from p1 = p0 + 3 lda, rows 6-7 from p2 = p0 + 6 lda).
      const char* p0 = reinterpret_cast<const char*>(a);
      const char* p1 = p0 + 3 * lda * sizeof(int32_t);
      const char* p2 = p0 + 6 * lda * sizeof(int32_t);
      const char* pb = reinterpret_cast<const char*>(b);
      const size_t ld = lda * sizeof(int32_t);
      long n = kq;
#define ATTNUM_ROW(addr, c0, c1)                                      \
  "vpbroadcastd " addr                                                \
  ", %%zmm2\n\t"                                                      \
  "vpmaddwd %%zmm0, %%zmm2, %%zmm3\n\tvpaddd %%zmm3, %%" c0 ", %%" c0 \
  "\n\t"                                                              \
  "vpmaddwd %%zmm1, %%zmm2, %%zmm3\n\tvpaddd %%zmm3, %%" c1 ", %%" c1 "\n\t"
      __asm__ volatile(
          "vpxord %%zmm16, %%zmm16, %%zmm16\n\tvmovdqa64 %%zmm16, %%zmm17\n\tvmovdqa64 %%zmm16, %%zmm18\n\t"
          "vmovdqa64 %%zmm16, %%zmm19\n\tvmovdqa64 %%zmm16, %%zmm20\n\tvmovdqa64 %%zmm16, %%zmm21\n\t"
          "vmovdqa64 %%zmm16, %%zmm22\n\tvmovdqa64 %%zmm16, %%zmm23\n\tvmovdqa64 %%zmm16, %%zmm24\n\t"
          "vmovdqa64 %%zmm16, %%zmm25\n\tvmovdqa64 %%zmm16, %%zmm26\n\tvmovdqa64 %%zmm16, %%zmm27\n\t"
          "vmovdqa64 %%zmm16, %%zmm28\n\tvmovdqa64 %%zmm16, %%zmm29\n\tvmovdqa64 %%zmm16, %%zmm30\n\t"
          "vmovdqa64 %%zmm16, %%zmm31\n\t"
          "1:\n\t"
          "vmovdqu32 (%[pb]), %%zmm0\n\tvmovdqu32 64(%[pb]), %%zmm1\n\t"
          ATTNUM_ROW("(%[p0])", "zmm16", "zmm17")
          ATTNUM_ROW("(%[p0],%[ld],1)", "zmm18", "zmm19")
          ATTNUM_ROW("(%[p0],%[ld],2)", "zmm20", "zmm21")
          ATTNUM_ROW("(%[p1])", "zmm22", "zmm23")
          ATTNUM_ROW("(%[p1],%[ld],1)", "zmm24", "zmm25")
          ATTNUM_ROW("(%[p1],%[ld],2)", "zmm26", "zmm27")
          ATTNUM_ROW("(%[p2])", "zmm28", "zmm29")
          ATTNUM_ROW("(%[p2],%[ld],1)", "zmm30", "zmm31")
          "add $4, %[p0]\n\tadd $4, %[p1]\n\tadd $4, %[p2]\n\tadd $128, %[pb]\n\t"
          "dec %[n]\n\tjnz 1b\n\t"
          "vmovdqa64 %%zmm16, 0(%[acc])\n\tvmovdqa64 %%zmm17, 64(%[acc])\n\t"
          "vmovdqa64 %%zmm18, 128(%[acc])\n\tvmovdqa64 %%zmm19, 192(%[acc])\n\t"
          "vmovdqa64 %%zmm20, 256(%[acc])\n\tvmovdqa64 %%zmm21, 320(%[acc])\n\t"
          "vmovdqa64 %%zmm22, 384(%[acc])\n\tvmovdqa64 %%zmm23, 448(%[acc])\n\t"
          "vmovdqa64 %%zmm24, 512(%[acc])\n\tvmovdqa64 %%zmm25, 576(%[acc])\n\t"
          "vmovdqa64 %%zmm26, 640(%[acc])\n\tvmovdqa64 %%zmm27, 704(%[acc])\n\t"
          "vmovdqa64 %%zmm28, 768(%[acc])\n\tvmovdqa64 %%zmm29, 832(%[acc])\n\t"
          "vmovdqa64 %%zmm30, 896(%[acc])\n\tvmovdqa64 %%zmm31, 960(%[acc])\n\t"
          : [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2), [pb] "+r"(pb), [n] "+r"(n)
          : [ld] "r"(ld), [acc] "r"(&acc[0][0][0])
          : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",
            "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
#undef ATTNUM_ROW
    } else {
      std::memset(acc, 0, sizeof acc);
    }
  } else {
    __m512i c[R][2];
    for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm512_setzero_si512();
    for (int q = 0; q < kq; ++q) {
      const __m512i b0 = _mm512_loadu_si512(b + static_cast<size_t>(q) * kW5),
                    b1 = _mm512_loadu_si512(b + static_cast<size_t>(q) * kW5 + 16);
      for (int r = 0; r < R; ++r) {
        const __m512i x = _mm512_set1_epi32(a[static_cast<size_t>(r) * lda + q]);
        c[r][0] = _mm512_add_epi32(c[r][0], _mm512_madd_epi16(x, b0));
        c[r][1] = _mm512_add_epi32(c[r][1], _mm512_madd_epi16(x, b1));
      }
    }
    for (int r = 0; r < R; ++r) _mm512_store_si512(acc[r][0], c[r][0]), _mm512_store_si512(acc[r][1], c[r][1]);
  }
  const __m512d sc = _mm512_set1_pd(scale);
  if (w == kW5) {  // a whole panel: straight-line stores (the general ones below were half the time at kq 16)
    add ? panel16<R, true>(acc, C, ldc, sc) : panel16<R, false>(acc, C, ldc, sc);
    return;
  }
  for (int r = 0; r < R; ++r) {
    store16(C + static_cast<size_t>(r) * ldc, w, _mm512_load_si512(acc[r][0]), sc, add);
    store16(C + static_cast<size_t>(r) * ldc + 16, w - 16, _mm512_load_si512(acc[r][1]), sc, add);
  }
}

ATTNUM_AVX2_FN inline void store8(double* c, int w, __m256i v, __m256d sc, bool add) {
  ATTNUM_UNROLL for (int h = 0; h < 2; ++h) {
    const int m = std::clamp(w - 4 * h, 0, 4);
    if (!m) continue;
    const __m128i half = h ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
    __m256d d = _mm256_mul_pd(_mm256_cvtepi32_pd(half), sc);
    if (m == 4) {  // whole vectors unmasked: vmaskmovpd stores are slow on AMD's cores
      if (add) d = _mm256_add_pd(d, _mm256_loadu_pd(c + 4 * h));
      _mm256_storeu_pd(c + 4 * h, d);
      continue;
    }
    const __m256i k = _mm256_cmpgt_epi64(_mm256_set1_epi64x(m), _mm256_setr_epi64x(0, 1, 2, 3));
    if (add) d = _mm256_add_pd(d, _mm256_maskload_pd(c + 4 * h, k));
    _mm256_maskstore_pd(c + 4 * h, k, d);
  }
}

// As panel16 for R rows x 16 columns (acc[r][v][l]: column 8 v + l).
template <int R, bool ADD>
ATTNUM_AVX2_FN inline void panel8(const int32_t (*acc)[2][8], double* C, int ldc, __m256d sc) {
  ATTNUM_UNROLL for (int r = 0; r < R; ++r) ATTNUM_UNROLL for (int v = 0; v < 4; ++v) {
    const __m128i x = _mm_load_si128(reinterpret_cast<const __m128i*>(&acc[r][v / 2][4 * (v % 2)]));
    double* c = C + static_cast<size_t>(r) * ldc + 4 * v;
    __m256d d = _mm256_mul_pd(_mm256_cvtepi32_pd(x), sc);
    if constexpr (ADD) d = _mm256_add_pd(d, _mm256_loadu_pd(c));
    _mm256_storeu_pd(c, d);
  }
}

template <int R>
ATTNUM_AVX2_FN void micro2(const int32_t* a, size_t lda, const int32_t* b, int kq, double* C, int ldc, int w,
                           double scale, bool add) {
  static_assert(R >= 1 && R <= 4);
  alignas(32) int32_t acc[4][2][8];
  if constexpr (R == 4) {
    if (kq > 0) {
      // as micro5: 8 accumulators in ymm8-15, B in ymm0-1, the broadcast in ymm2, products in ymm3
      const char* p0 = reinterpret_cast<const char*>(a);
      const char* p1 = p0 + 3 * lda * sizeof(int32_t);
      const char* pb = reinterpret_cast<const char*>(b);
      const size_t ld = lda * sizeof(int32_t);
      long n = kq;
#define ATTNUM_ROW(addr, c0, c1)                                      \
  "vpbroadcastd " addr                                                \
  ", %%ymm2\n\t"                                                      \
  "vpmaddwd %%ymm0, %%ymm2, %%ymm3\n\tvpaddd %%ymm3, %%" c0 ", %%" c0 \
  "\n\t"                                                              \
  "vpmaddwd %%ymm1, %%ymm2, %%ymm3\n\tvpaddd %%ymm3, %%" c1 ", %%" c1 "\n\t"
      __asm__ volatile(
          "vpxor %%ymm8, %%ymm8, %%ymm8\n\tvmovdqa %%ymm8, %%ymm9\n\tvmovdqa %%ymm8, %%ymm10\n\t"
          "vmovdqa %%ymm8, %%ymm11\n\tvmovdqa %%ymm8, %%ymm12\n\tvmovdqa %%ymm8, %%ymm13\n\t"
          "vmovdqa %%ymm8, %%ymm14\n\tvmovdqa %%ymm8, %%ymm15\n\t"
          "1:\n\t"
          "vmovdqu (%[pb]), %%ymm0\n\tvmovdqu 32(%[pb]), %%ymm1\n\t"
          ATTNUM_ROW("(%[p0])", "ymm8", "ymm9")
          ATTNUM_ROW("(%[p0],%[ld],1)", "ymm10", "ymm11")
          ATTNUM_ROW("(%[p0],%[ld],2)", "ymm12", "ymm13")
          ATTNUM_ROW("(%[p1])", "ymm14", "ymm15")
          "add $4, %[p0]\n\tadd $4, %[p1]\n\tadd $64, %[pb]\n\t"
          "dec %[n]\n\tjnz 1b\n\t"
          "vmovdqa %%ymm8, 0(%[acc])\n\tvmovdqa %%ymm9, 32(%[acc])\n\t"
          "vmovdqa %%ymm10, 64(%[acc])\n\tvmovdqa %%ymm11, 96(%[acc])\n\t"
          "vmovdqa %%ymm12, 128(%[acc])\n\tvmovdqa %%ymm13, 160(%[acc])\n\t"
          "vmovdqa %%ymm14, 192(%[acc])\n\tvmovdqa %%ymm15, 224(%[acc])\n\t"
          : [p0] "+r"(p0), [p1] "+r"(p1), [pb] "+r"(pb), [n] "+r"(n)
          : [ld] "r"(ld), [acc] "r"(&acc[0][0][0])
          : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
            "xmm14", "xmm15");
#undef ATTNUM_ROW
    } else {
      std::memset(acc, 0, sizeof acc);
    }
  } else {
    __m256i c[R][2];
    for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm256_setzero_si256();
    for (int q = 0; q < kq; ++q) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + static_cast<size_t>(q) * kW2)),
                    b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + static_cast<size_t>(q) * kW2 + 8));
      for (int r = 0; r < R; ++r) {
        const __m256i x = _mm256_set1_epi32(a[static_cast<size_t>(r) * lda + q]);
        c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(x, b0));
        c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(x, b1));
      }
    }
    for (int r = 0; r < R; ++r)
      _mm256_store_si256(reinterpret_cast<__m256i*>(acc[r][0]), c[r][0]),
          _mm256_store_si256(reinterpret_cast<__m256i*>(acc[r][1]), c[r][1]);
  }
  const __m256d sc = _mm256_set1_pd(scale);
  if (w == kW2) {  // a whole panel: straight-line stores, as micro5
    add ? panel8<R, true>(acc, C, ldc, sc) : panel8<R, false>(acc, C, ldc, sc);
    return;
  }
  for (int r = 0; r < R; ++r) {
    store8(C + static_cast<size_t>(r) * ldc, w, _mm256_load_si256(reinterpret_cast<const __m256i*>(acc[r][0])), sc,
           add);
    store8(C + static_cast<size_t>(r) * ldc + 8, w - 8, _mm256_load_si256(reinterpret_cast<const __m256i*>(acc[r][1])),
           sc, add);
  }
}

#endif

#if ATTNUM_NEON_KERNELS
// ---- NEON: panels of 8 columns. No int16 pair-dot instruction: each word of A (a0 = A(r, 2q),
// a1 = A(r, 2q + 1)) is broadcast to [a0 a1 a0 a1 ...] and multiplied lane by lane with the
// panel's words [B(2q, j) B(2q + 1, j) B(2q, j + 1) ...] by vmlal_s16 / vmlal_high_s16 (int16 x
// int16 products accumulated in int32 lanes): lane 2t of an accumulator sums the even-k products
// of column j + t, lane 2t + 1 the odd-k ones, and one vpaddq_s32 at the end adds the two. Every
// one of these partial sums is a partial sum of the chunk's products, so the bound of
// plane_gemm.h (|a_int| |b_int| kn < 2^31) keeps each exact in int32, as for vpmaddwd.
constexpr int kWn = 8, kRn = 4;

template <int R>
void micron(const int32_t* a, size_t lda, const int32_t* b, int kq, double* C, int ldc, int w, double scale, bool add) {
  static_assert(R >= 1 && R <= kRn);
  int32x4_t acc[R][4];  // [row][columns 2v, 2v + 1 as (even k, odd k) lane pairs]
  ATTNUM_UNROLL for (int r = 0; r < R; ++r) ATTNUM_UNROLL for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_s32(0);
  for (int q = 0; q < kq; ++q) {
    const int16x8_t b0 = vreinterpretq_s16_s32(vld1q_s32(b + static_cast<size_t>(q) * kWn)),
                    b1 = vreinterpretq_s16_s32(vld1q_s32(b + static_cast<size_t>(q) * kWn + 4));
    ATTNUM_UNROLL for (int r = 0; r < R; ++r) {
      const int16x8_t x = vreinterpretq_s16_s32(vld1q_dup_s32(a + static_cast<size_t>(r) * lda + q));
      acc[r][0] = vmlal_s16(acc[r][0], vget_low_s16(b0), vget_low_s16(x));
      acc[r][1] = vmlal_high_s16(acc[r][1], b0, x);
      acc[r][2] = vmlal_s16(acc[r][2], vget_low_s16(b1), vget_low_s16(x));
      acc[r][3] = vmlal_high_s16(acc[r][3], b1, x);
    }
  }
  const float64x2_t sc = vdupq_n_f64(scale);
  for (int r = 0; r < R; ++r) {
    alignas(16) double out[kWn];
    const int32x4_t s0 = vpaddq_s32(acc[r][0], acc[r][1]), s1 = vpaddq_s32(acc[r][2], acc[r][3]);
    const int32x4_t s[2] = {s0, s1};
    for (int h = 0; h < 2; ++h) {
      vst1q_f64(out + 4 * h, vmulq_f64(vcvtq_f64_s64(vmovl_s32(vget_low_s32(s[h]))), sc));
      vst1q_f64(out + 4 * h + 2, vmulq_f64(vcvtq_f64_s64(vmovl_high_s32(s[h])), sc));
    }
    double* c = C + static_cast<size_t>(r) * ldc;
    if (add)
      for (int j = 0; j < w; ++j) c[j] += out[j];
    else
      std::memcpy(c, out, sizeof(double) * w);
  }
}

#endif

// The dense kernels' loop: panels of W columns, groups of up to R rows, each group through
// micro[rows - 1] (the path's micro-kernel for that many rows).
using micro_fn = void (*)(const int32_t* a, size_t lda, const int32_t* b, int kq, double* C, int ldc, int w,
                          double scale, bool add);
template <int W, int R>
void drive(const micro_fn (&micro)[R], const int32_t* a, size_t lda, int rows, const int32_t* b, size_t pstride, int kq,
           int n, double* C, int ldc, double scale, bool add) {
  for (int p = 0; p * W < n; ++p) {
    const int w = std::min(W, n - p * W);
    const int32_t* bp = b + static_cast<size_t>(p) * pstride;
    for (int r = 0; r < rows; r += R)
      micro[std::min(R, rows - r) - 1](a + static_cast<size_t>(r) * lda, lda, bp, kq,
                                       C + static_cast<size_t>(r) * ldc + p * W, ldc, w, scale, add);
  }
}

// The dense pass of a chunk on the active path (the caller checked panel_width() == W).
void gemm(int W, const int32_t* a, size_t lda, int rows, const int32_t* b, size_t pstride, int kq, int n, double* C,
          int ldc, double scale, bool add) {
#if ATTNUM_SIMD_KERNELS
  static constexpr micro_fn k5[kR5] = {micro5<1>, micro5<2>, micro5<3>, micro5<4>,
                                       micro5<5>, micro5<6>, micro5<7>, micro5<8>};
  static constexpr micro_fn k2[kR2] = {micro2<1>, micro2<2>, micro2<3>, micro2<4>};
  if (W == kW5)
    return isa::note("plane_gemm", isa::path::avx512),
           drive<kW5>(k5, a, lda, rows, b, pstride, kq, n, C, ldc, scale, add);
  if (W == kW2)
    return isa::note("plane_gemm", isa::path::avx2),
           drive<kW2>(k2, a, lda, rows, b, pstride, kq, n, C, ldc, scale, add);
#endif
#if ATTNUM_NEON_KERNELS
  static constexpr micro_fn kn[kRn] = {micron<1>, micron<2>, micron<3>, micron<4>};
  if (W == kWn)
    return isa::note("plane_gemm", isa::path::neon),
           drive<kWn>(kn, a, lda, rows, b, pstride, kq, n, C, ldc, scale, add);
#endif
  (void)W, (void)a, (void)lda, (void)rows, (void)b, (void)pstride, (void)kq, (void)n, (void)C, (void)ldc, (void)scale,
      (void)add;
}

}  // namespace

namespace {
struct lo_term {  // one sparse B value of a chunk: its k (relative where noted), column, value
  int k, j;
  double v;
};
}  // namespace

void pair_gemm(const int32_t* a, size_t lda, int rows, const int32_t* b, size_t pstride, int kq, int n, double* C,
               int ldc) {
  gemm(panel_width(), a, lda, rows, b, pstride, kq, n, C, ldc, 1.0, false);
}

int panel_width() {
#if ATTNUM_SIMD_KERNELS
  if (isa::at_least(isa::path::avx512)) return kW5;
  if (isa::at_least(isa::path::avx2)) return kW2;
#endif
#if ATTNUM_NEON_KERNELS
  if (isa::at_least(isa::path::neon)) return kWn;
#endif
  return 0;
}

namespace {
// The largest hi integer of a [rows][cols] matrix (row stride ld) at shift s: floor(amax * 2^s),
// amax given (>= 0) or computed.
int32_t max_hi(const float* x, int ld, int rows, int cols, int s, double amax) {
  double m = amax;
  if (m < 0) {
    m = 0;
    if (ld == cols)
      m = formats::span_amax(x, static_cast<size_t>(rows) * cols);
    else
      for (int r = 0; r < rows; ++r)
        m = std::max(
            m, static_cast<double>(formats::span_amax(x + static_cast<size_t>(r) * ld, static_cast<size_t>(cols))));
  }
  return static_cast<int32_t>(std::min(m * pow2(s), 2147483647.0));
}
}  // namespace

void plane_a::build(const float* A, int ld, int rows_, int k_, int shift_, double amax) {
  ok = false;
  rows = rows_, k = k_, k2 = (k_ + 1) / 2, shift = shift_, max_int = 0;
  lo_ptr.assign(1, 0), lo_k.clear(), lo_v.clear();
  if (panel_width() == 0 || shift < 0 || shift > 9 || rows < 0 || k <= 0) return;
  hi.resize(static_cast<size_t>(rows) * k2);  // every row's k2 words written below (kept storage: no zero fill)
  max_int = max_hi(A, ld, rows, k, shift, amax);
  std::vector<int16_t> h(2 * static_cast<size_t>(k2), 0);
  std::vector<uint64_t> mask((k + 63) / 64);
  const size_t limit = static_cast<size_t>(rows) * k / 8;
  bool good = true;
  for (int r = 0; r < rows && good; ++r) {
    const float* x = A + static_cast<size_t>(r) * ld;
    good = split_row(x, k, shift, h.data(), nullptr, mask.data());
    std::memcpy(hi.data() + static_cast<size_t>(r) * k2, h.data(), sizeof(int32_t) * k2);
    for_each_bit(mask.data(), k, [&](int i) { lo_k.push_back(i), lo_v.push_back(x[i]); });
    lo_ptr.push_back(static_cast<int>(lo_k.size()));
    if (lo_k.size() > limit) good = false;
  }
  ok = good;
}

void plane_b::build(const float* B, int ld, bool transposed, int k_rows, int n_cols, int shift_, double amax) {
  ok = false;
  W = panel_width(), k = k_rows, n = n_cols, k2 = (k_rows + 1) / 2, shift = shift_, max_int = 0;
  lo_ptr.assign(1, 0), lo_j.clear(), lo_v.clear();
  if (W == 0 || shift < 0 || shift > 9 || k <= 0 || n <= 0) return;
  const int np = (n + W - 1) / W;
  // kept storage (no zero fill from head to head): every word of a whole panel is written below,
  // a partial last panel gets its zeros past n here
  p.resize(static_cast<size_t>(np) * k2 * W);
  if (n % W) std::fill(p.begin() + static_cast<std::ptrdiff_t>(np - 1) * k2 * W, p.end(), 0);
  max_int = transposed ? max_hi(B, ld, n, k, shift, amax) : max_hi(B, ld, k, n, shift, amax);
  const size_t limit = static_cast<size_t>(k) * n / 8;
  bool good = true;
  if (transposed) {  // one source row per column j (a key), k values along it
    // a panel's W keys are split into hs ([key][2 k2] int16, the odd k's partner 0) and then
    // written panel row by panel row: contiguous stores instead of one word per 4 W bytes
    std::vector<int16_t> hs(static_cast<size_t>(W) * 2 * k2, 0);
    std::vector<uint64_t> mask((k + 63) / 64);
    std::vector<int> count(k + 1, 0);
    std::vector<std::pair<int, int>> ent;  // (kk, j)
    for (int j0 = 0; j0 < n && good; j0 += W) {
      const int w = std::min(W, n - j0);
      for (int jj = 0; jj < w && good; ++jj) {
        const int j = j0 + jj;
        good = split_row(B + static_cast<size_t>(j) * ld, k, shift, hs.data() + static_cast<size_t>(jj) * 2 * k2,
                         nullptr, mask.data());
        for_each_bit(mask.data(), k, [&](int i) { ent.emplace_back(i, j), ++count[i + 1]; });
        if (ent.size() > limit) good = false;
      }
      // the w keys' words ([jj][k2]) transposed into the panel ([q][W])
      transpose32(hs.data(), k2, w, k2, p.data() + static_cast<size_t>(j0 / W) * k2 * W, W);
    }
    if (good) {
      for (int i = 0; i < k; ++i) count[i + 1] += count[i];
      lo_ptr.assign(count.begin(), count.end());
      lo_j.resize(ent.size()), lo_v.resize(ent.size());
      std::vector<int> at(count.begin(), count.end() - 1);
      for (const auto& [kk, j] : ent) {  // entries arrive by ascending j: each k's list stays sorted
        const int e = at[kk]++;
        lo_j[e] = j, lo_v[e] = B[static_cast<size_t>(j) * ld + kk];
      }
    }
  } else {  // one source row per k
    std::vector<int16_t> h0(n), h1(n);
    std::vector<uint64_t> mask((n + 63) / 64);
    for (int q = 0; q < k2 && good; ++q) {
      for (int half = 0; half < 2 && good; ++half) {
        const int kk = 2 * q + half;
        std::vector<int16_t>& h = half ? h1 : h0;
        if (kk >= k) {
          std::fill(h.begin(), h.end(), int16_t{0});
          continue;
        }
        const float* x = B + static_cast<size_t>(kk) * ld;
        good = split_row(x, n, shift, h.data(), nullptr, mask.data());
        for_each_bit(mask.data(), n, [&](int j) { lo_j.push_back(j), lo_v.push_back(x[j]); });
        lo_ptr.push_back(static_cast<int>(lo_j.size()));
        if (lo_j.size() > limit) good = false;
      }
      if (!good) break;
      for (int j0 = 0; j0 < n; j0 += W) {
        int32_t* dst = p.data() + (static_cast<size_t>(j0 / W) * k2 + q) * W;
        const int w = std::min(W, n - j0);
        for (int j = 0; j < w; ++j)
          dst[j] = static_cast<int32_t>(static_cast<uint16_t>(h0[j0 + j]) |
                                        static_cast<uint32_t>(static_cast<uint16_t>(h1[j0 + j])) << 16);
      }
    }
  }
  ok = good;
}

namespace {
// One int16 half of a plane word (value 2q in the low half, 2q + 1 in the high one) as an
// integer: up = 16 for the low half, 0 for the high one (shifted up, then arithmetically down).
inline int32_t half_of(int32_t word, int up) { return static_cast<int32_t>(static_cast<uint32_t>(word) << up) >> 16; }

// c[j] += v * B(kk, j0 + j) for j < n, B's row kk read from b's planes: every value of B is
// either its hi integer times 2^-shift (the hi plane; no lo entry) or a lo entry (hi integer 0),
// so column j takes v * hi * 2^-shift (formed as hi * (v * 2^-shift): a power of two, exact) and,
// at a lo entry, v * lo. Both products are exact (E4M3 x E4M3), the other part's product is +-0,
// and adding +-0 to C changes no bit (C is never -0: its sums start at +0 and a rounded sum is -0
// only when both addends are), so C gets the same bits as from one product v * B(kk, j).
void add_b_row(const plane_b& b, int kk, int j0, int n, double v, double* c) {
  const double vs = v * pow2(-b.shift);
  const int up = 16 * (1 - kk % 2);
  const size_t pstride = static_cast<size_t>(b.k2) * b.W;
  const int32_t* row = b.p.data() + static_cast<size_t>(j0 / b.W) * pstride + static_cast<size_t>(kk / 2) * b.W;
  for (int j = 0; j < n; j += b.W, row += pstride) {
    const int w = std::min(b.W, n - j);
    double* cj = c + j;
    for (int t = 0; t < w; ++t) cj[t] += static_cast<double>(half_of(row[t], up)) * vs;
  }
  for (int e = b.lo_ptr[kk]; e < b.lo_ptr[kk + 1]; ++e) {
    const int j = b.lo_j[e] - j0;
    if (j < 0) continue;
    if (j >= n) break;
    c[j] += v * static_cast<double>(b.lo_v[e]);
  }
}
}  // namespace

bool qk_chunk(const plane_a& a, const plane_b& b, int r0, int rows, int k0, int kn, int j0, int n, double* C, int ldc,
              row_sink sink, long mask_after) {
  if (!a.ok || !b.ok || b.W != panel_width() || a.k != b.k || kn <= 0 || kn > 32 || k0 % 2 ||
      (kn % 2 && k0 + kn != a.k) || k0 + kn > a.k || j0 % b.W || j0 + n > b.n || r0 < 0 || r0 + rows > a.rows)
    return false;
  if (static_cast<double>(a.max_int) * b.max_int * kn >= 2147483648.0) return false;
  if (rows <= 0 || n <= 0) return true;
  auto& st = stats();
  ++st.qk_chunks;
  const double scale = pow2(-(a.shift + b.shift));
  // the chunk's sparse B values in the block (a_hi * b_lo terms), each times 2^-sa (exact): the
  // terms multiply A's hi integers, so a term is a_hi * b_lo exactly
  static thread_local std::vector<lo_term> terms;
  terms.clear();
  for (int kk = k0; kk < k0 + kn; ++kk)
    for (int e = b.lo_ptr[kk]; e < b.lo_ptr[kk + 1]; ++e) {
      const int j = b.lo_j[e];
      if (j < j0) continue;
      if (j >= j0 + n) break;
      terms.push_back({kk, j - j0, static_cast<double>(b.lo_v[e]) * pow2(-a.shift)});
    }
  // 8 rows at a time, each group finished (dense pass, corrections, sink) while its rows of C are
  // in L1; the chunk's B panels stay in L1 across the groups.
  const int32_t* bp = b.p.data() + static_cast<size_t>(j0 / b.W) * b.k2 * b.W + static_cast<size_t>(k0 / 2) * b.W;
  for (int g = 0; g < rows; g += 8) {
    const int nr = std::min(8, rows - g);
    // columns [0, ng): every column some row of the group does not mask (j <= g + nr - 1 + mask_after)
    const int ng = static_cast<int>(std::clamp(g + nr + mask_after, 0L, static_cast<long>(n)));
    double* Cg = C + static_cast<size_t>(g) * ldc;
    gemm(b.W, a.hi.data() + static_cast<size_t>(r0 + g) * a.k2 + k0 / 2, a.k2, nr, bp, static_cast<size_t>(b.k2) * b.W,
         (kn + 1) / 2, ng, Cg, ldc, scale, false);
    for (int r = g; r < g + nr; ++r) {
      double* c = C + static_cast<size_t>(r) * ldc;
      // a_lo * B over the block's keys (B's row read back from its planes)
      for (int e = a.lo_ptr[r0 + r]; e < a.lo_ptr[r0 + r + 1]; ++e) {
        const int kk = a.lo_k[e];
        if (kk < k0) continue;
        if (kk >= k0 + kn) break;
        add_b_row(b, kk, j0, ng, a.lo_v[e], c);
        st.a_lo_terms += ng;
      }
    }
    // the a_hi * b_lo terms, each over the group's rows (term outermost: its fields are read once;
    // every C value still takes its terms in list order); a_hi is A's hi integer (0 where A is lo)
    const int32_t* h0 = a.hi.data() + static_cast<size_t>(r0 + g) * a.k2;
    for (const lo_term& t : terms) {
      if (t.j >= ng) continue;
      const int32_t* h = h0 + t.k / 2;
      const int up = 16 * (1 - t.k % 2);
      double* c = Cg + t.j;
      for (int r = 0; r < nr; ++r)
        c[static_cast<size_t>(r) * ldc] += static_cast<double>(half_of(h[static_cast<size_t>(r) * a.k2], up)) * t.v;
    }
    st.b_lo_terms += static_cast<long>(terms.size()) * nr;
    if (sink.fn) sink.fn(sink.ctx, g, nr, Cg, ldc, ng);
  }
  return true;
}

bool pv_chunk(const float* P, int ldp, const char* live, int rows, int k0, int kn, const plane_b& v, double* C, int ldc,
              row_sink sink) {
  if (!v.ok || v.W != panel_width() || kn <= 0 || kn > 32 || k0 % 2 || (kn % 2 && k0 + kn != v.k) || k0 + kn > v.k)
    return false;
  if (rows <= 0) return true;
  auto& st = stats();
  // Each group of 8 rows gets P's shift from its own largest live value (NaN is skipped here; the
  // split below refuses it): hi integers below cap = min(limit, 2^15); lo ones are x * 2^9 with
  // |x| < 2^(3 - sp), below 2^(12 - sp). A group whose values all lie below 2^(13 - 9) (rows far
  // from their running max in these keys: most groups of a peaked softmax) takes every value into
  // its hi plane at shift 9 (E4M3's quantum) and needs no second pass; one shift for the whole
  // chunk would give every group the largest row's.
  const double limit = 2147483648.0 / (static_cast<double>(std::max(v.max_int, 1)) * kn);
  const double cap = std::min(limit, 32768.0);
  const int n_groups = (rows + 7) / 8;
  static thread_local std::vector<int> shift;
  shift.resize(n_groups);
  for (int g = 0; g < n_groups; ++g) {
    const int r0 = 8 * g, nr = std::min(8, rows - r0);
    const float* pg = P + static_cast<size_t>(r0) * ldp;
    double gmax = 0;
#if ATTNUM_SIMD_KERNELS
    if (v.W == kW5)
      isa::note("chunk_amax", isa::path::avx512), gmax = chunk_amax_avx512(pg, ldp, live + r0, nr, kn);
    else
#endif
      for (int r = 0; r < nr; ++r)
        if (live[r0 + r])
          gmax = std::max(gmax, static_cast<double>(
                                    formats::span_amax(pg + static_cast<size_t>(r) * ldp, static_cast<size_t>(kn))));
    int sp = 9;
    while (sp >= 0 && !(gmax * pow2(sp) < cap)) --sp;
    if (sp < 0 || !(pow2(12 - sp) <= cap)) return ++st.pv_refused, false;
    shift[g] = sp;
  }
  const int kq = (kn + 1) / 2;
  static thread_local std::vector<int32_t> hi, lo;
  static thread_local std::vector<char> groups;
  hi.resize(static_cast<size_t>(rows) * kq), lo.resize(static_cast<size_t>(rows) * kq);
  groups.assign(n_groups, 0);
  bool good = true;
  for (int g = 0; g < n_groups && good; ++g) {
    const size_t r0 = static_cast<size_t>(8 * g);
    good = split_chunk(P + r0 * ldp, ldp, live + r0, std::min(8, rows - 8 * g), kn, shift[g], hi.data() + r0 * kq,
                       lo.data() + r0 * kq, kq, groups.data() + g);
  }
  if (!good) return ++st.pv_refused, false;
  ++st.pv_chunks;
  const int32_t* b = v.p.data() + static_cast<size_t>(k0 / 2) * v.W;
  const size_t pstride = static_cast<size_t>(v.k2) * v.W;
  static thread_local std::vector<lo_term> terms;  // the chunk's sparse V values (P * v_lo terms)
  terms.clear();
  for (int kk = k0; kk < k0 + kn; ++kk)
    for (int e = v.lo_ptr[kk]; e < v.lo_ptr[kk + 1]; ++e)
      terms.push_back({kk - k0, v.lo_j[e], static_cast<double>(v.lo_v[e])});
  const double s_lo = pow2(-(9 + v.shift));
  for (int g = 0; g < rows; g += 8) {  // 8 rows at a time, as qk_chunk
    const int nr = std::min(8, rows - g);
    double* Cg = C + static_cast<size_t>(g) * ldc;
    // the group's products up to its live rows' last nonzero P (in whole pairs); the rest are +-0
    int ke = 0;
    for (int r = g; r < g + nr; ++r) {
      if (!live[r]) continue;
      const float* pr = P + static_cast<size_t>(r) * ldp;
      int e = kn;
      while (e > ke && pr[e - 1] == 0) --e;
      ke = std::max(ke, e);
    }
    const int kq_g = (ke + 1) / 2;
    gemm(v.W, hi.data() + static_cast<size_t>(g) * kq, kq, nr, b, pstride, kq_g, v.n, Cg, ldc,
         pow2(-(shift[g / 8] + v.shift)), false);
    if (groups[g / 8] && kq_g > 0) {
      ++st.pv_lo_passes;
      gemm(v.W, lo.data() + static_cast<size_t>(g) * kq, kq, nr, b, pstride, kq_g, v.n, Cg, ldc, s_lo, true);
    }
    // the P * v_lo terms over the group's rows, dead ones too (their C is never read); term
    // outermost as in qk_chunk
    const float* pg = P + static_cast<size_t>(g) * ldp;
    for (const lo_term& t : terms) {
      if (t.k >= ke) continue;
      const float* pk = pg + t.k;
      double* c = Cg + t.j;
      for (int r = 0; r < nr; ++r)
        c[static_cast<size_t>(r) * ldc] += static_cast<double>(pk[static_cast<size_t>(r) * ldp]) * t.v;
    }
    st.b_lo_terms += static_cast<long>(terms.size()) * nr;
    if (sink.fn) sink.fn(sink.ctx, g, nr, Cg, ldc, v.n);
  }
  return true;
}

}  // namespace attnum::attention::planes
