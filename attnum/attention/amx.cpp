// Exact E4M3 chunk sums on AMX-BF16 tiles: see amx.h for why the sums are exact.
//
// Tiles (palette 1, every tile 16 rows x 64 bytes): tmm0-4 hold the accumulators D_s (kAcc), tmm5
// the A plane (16 rows x 32 bf16), tmm6 the B plane (16 pairs x 16 columns, VNNI layout: the two
// bf16 of a pair are consecutive k).
#include "attnum/attention/amx.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "attnum/attention/engine_detail.h"
#include "attnum/attention/isa.h"

// GCC >= 11 and Clang >= 12 on x86-64 have the AMX intrinsics; the functions that use AVX-512 or
// AMX carry a target attribute (no file-wide flags, so nothing compiled here leaks AVX-512 into
// code shared with other files) and run only after available() said yes.
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define ATTNUM_HAVE_AMX 1
#define ATTNUM_AMX_FN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,amx-tile,amx-bf16,amx-int8")))
#else
#define ATTNUM_HAVE_AMX 0
#endif

#if ATTNUM_HAVE_AMX
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attnum::attention::amx {
namespace {

std::atomic<bool> g_enabled{true};

#if ATTNUM_HAVE_AMX
bool detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx = (d & (1u << 22)) && (d & (1u << 24)) && (d & (1u << 25));  // AMX-BF16, -TILE, -INT8
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));  // F DQ BW VL
  if (!amx || !avx512) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xE6u) != 0xE6u) return false;  // the OS saves the AVX-512 state
  // Linux hands out the 8 KiB tile state only on request (ARCH_REQ_XCOMP_PERM, XTILEDATA).
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#endif

}  // namespace

bool hardware() {
#if ATTNUM_HAVE_AMX
  static const bool hw = detect();
  return hw;
#else
  return false;
#endif
}

bool available() { return isa::active() == isa::path::amx && g_enabled.load(std::memory_order_relaxed); }

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

namespace {
std::atomic<uint64_t> g_runs{0};
}
uint64_t run_count() { return g_runs.load(std::memory_order_relaxed); }

#if ATTNUM_HAVE_AMX
namespace {

struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// GCC's <immintrin.h> AMX wrappers are inline asm that under-declare memory: _tile_loadconfig
// says it reads 8 bytes (the compiler then drops the stores to the rest of the config: SIGILL at
// the first tile instruction in a -march=x86-64 build) and _tile_loadd has no memory operand
// at all (stores to the buffer it reads could be moved past it). These declare what they read.
#define ATTNUM_TILE_LOAD(t, base, stride)                                                 \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(static_cast<const void*>(base)), \
                   "r"(static_cast<long>(stride))                                         \
                   : "memory")

// Tile configuration is per thread: loaded at the start of every run.
ATTNUM_AMX_FN void configure() {
  tile_config cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

// Splits 16 floats into the three planes (bf16 bits; zero outside the element's plane), ORs the
// occupied planes into occ and the lanes that are not E4M3 grid values (or are NaN) into bad.
// NaN lands in plane 2, so it propagates through the tiles as it would through a GEMM.
ATTNUM_AMX_FN inline void split16(__m512 x, __m256i out[3], unsigned& occ, __mmask16& bad) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512 ax = _mm512_abs_ps(x);
  const __mmask16 nz = _mm512_cmp_ps_mask(ax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  const __mmask16 m0 = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(8.0f), _CMP_GE_OQ);
  const __mmask16 m1 = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.125f), _CMP_GE_OQ) & ~m0;
  const __mmask16 m2 = nz & ~(m0 | m1);
  const __m256i bf = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16));
  out[0] = _mm256_maskz_mov_epi16(m0, bf);
  out[1] = _mm256_maskz_mov_epi16(m1, bf);
  out[2] = _mm256_maskz_mov_epi16(m2, bf);
  occ |= (m0 ? 1u : 0u) | (m1 ? 2u : 0u) | (m2 ? 4u : 0u);
  // grid value: at most 3 fraction bits, a multiple of 2^-9, |x| <= 448
  const __m512 s = _mm512_mul_ps(ax, _mm512_set1_ps(512.0f));
  bad |= _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0xFFFFF)) |
         _mm512_cmp_ps_mask(_mm512_roundscale_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), s, _CMP_NEQ_UQ) |
         _mm512_cmp_ps_mask(ax, _mm512_set1_ps(448.0f), _CMP_NLE_UQ);
}

// Loads up to 16 floats (zeros past n).
ATTNUM_AMX_FN inline __m512 load16(const float* p, int n) {
  return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}

ATTNUM_AMX_FN inline void tile_zero(int s) {
  switch (s) {
    case 0:
      _tile_zero(0);
      break;
    case 1:
      _tile_zero(1);
      break;
    case 2:
      _tile_zero(2);
      break;
    case 3:
      _tile_zero(3);
      break;
    default:
      _tile_zero(4);
      break;
  }
}
ATTNUM_AMX_FN inline void tile_dp(int s) {  // D_s += A (tmm5) B (tmm6)
  switch (s) {
    case 0:
      _tile_dpbf16ps(0, 5, 6);
      break;
    case 1:
      _tile_dpbf16ps(1, 5, 6);
      break;
    case 2:
      _tile_dpbf16ps(2, 5, 6);
      break;
    case 3:
      _tile_dpbf16ps(3, 5, 6);
      break;
    default:
      _tile_dpbf16ps(4, 5, 6);
      break;
  }
}
ATTNUM_AMX_FN inline void tile_store(int s, float* dst) {
  switch (s) {
    case 0:
      _tile_stored(0, dst, 64);
      break;
    case 1:
      _tile_stored(1, dst, 64);
      break;
    case 2:
      _tile_stored(2, dst, 64);
      break;
    case 3:
      _tile_stored(3, dst, 64);
      break;
    default:
      _tile_stored(4, dst, 64);
      break;
  }
}

// The accumulator of each plane pair (amx.h): {00}, {01, 10}, {11}, {02, 20}, {12, 21, 22}.
constexpr int kAcc[3][3] = {{0, 1, 3}, {1, 2, 4}, {3, 4, 4}};

// One 16 x 16 output tile of one chunk: D_s = sum over the plane pairs (g, h) of accumulator s of
// A_g B_h, stored to d[s] for the used s; returns the mask of used s. (Rounding the previous
// tile's sums between issuing and storing, to overlap the tile unit with the vector unit, was
// measured: no gain on this CPU, the two do not overlap.)
ATTNUM_AMX_FN inline unsigned tile_sums(unsigned ma, unsigned mb, const uint16_t* const a[3], int lda_bytes,
                                        const uint16_t* const b[3], int ldb_bytes, float (*d)[256]) {
  unsigned used = 0;
  for (int g = 0; g < 3; ++g)
    if (ma >> g & 1)
      for (int h = 0; h < 3; ++h)
        if (mb >> h & 1) used |= 1u << kAcc[g][h];
  if (!used) return 0;
  for (int s = 0; s < 5; ++s)
    if (used >> s & 1) tile_zero(s);
  for (int g = 0; g < 3; ++g) {
    if (!(ma >> g & 1)) continue;
    ATTNUM_TILE_LOAD(5, a[g], lda_bytes);
    for (int h = 0; h < 3; ++h) {
      if (!(mb >> h & 1)) continue;
      ATTNUM_TILE_LOAD(6, b[h], ldb_bytes);
      tile_dp(kAcc[g][h]);
    }
  }
  for (int s = 0; s < 5; ++s)
    if (used >> s & 1) tile_store(s, d[s]);
  return used;
}

// Lane masks of columns [0, nn) over two vectors of 8.
ATTNUM_AMX_FN inline void column_masks(int nn, __mmask8& k0, __mmask8& k1) {
  k0 = static_cast<__mmask8>(nn >= 8 ? 0xFF : (1u << nn) - 1);
  k1 = static_cast<__mmask8>(nn >= 16 ? 0xFF : nn > 8 ? (1u << (nn - 8)) - 1 : 0);
}

// Causal: true when every key of the tile [kj, kj + 16) lies after the last key of every row of
// [ri, ri + rr) (key j is masked for row i when j > i + off): the tile is never read.
inline bool tile_masked(long kj, long ri, int rr, long off) { return kj >= ri + rr + off; }

// Rounding of acc + exact sum, two vectors of 8 doubles at a time.
enum class rk { fp32, truncated, fp16, other };

template <rk K>
ATTNUM_AMX_FN inline __m512d round_vec(const accumulator_spec& m, __m512d x, __m512i tmask) {
  if constexpr (K == rk::fp32) {
    return _mm512_cvtps_pd(_mm512_cvtpd_ps(x));
  } else if constexpr (K == rk::fp16) {
    // round_fp16 (engine_detail.h) in vector form: adding c = 2^(e+42), e = max(floor(log2|x|),
    // -14), moves |x| to a binade whose double spacing is the fp16 quantum, so the add rounds RNE
    // and the subtraction is exact; >= 65520 overflows to Inf; Inf and NaN pass through.
    const __m512d sign = _mm512_set1_pd(-0.0);
    const __m512d ax = _mm512_andnot_pd(sign, x);
    const __m512d e = _mm512_max_pd(_mm512_getexp_pd(ax), _mm512_set1_pd(-14.0));
    const __m512i ci = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtpd_epi64(e), _mm512_set1_epi64(1023 + 42)), 52);
    const __m512d c = _mm512_castsi512_pd(ci);
    __m512d r = _mm512_sub_pd(_mm512_add_pd(ax, c), c);
    r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(r, _mm512_set1_pd(65520.0), _CMP_GE_OQ), r, _mm512_set1_pd(INFINITY));
    r = _mm512_or_pd(r, _mm512_and_pd(sign, x));
    const __mmask8 finite = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(INFINITY), _CMP_LT_OQ);
    return _mm512_mask_blend_pd(finite, x, r);
  } else if constexpr (K == rk::truncated) {
    // truncation to <= 23 fraction bits of a value in the normal fp32 range: the float cast that
    // follows in round_acc is exact
    return _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(x), tmask));
  } else {
    alignas(64) double t[8];
    _mm512_store_pd(t, x);
    for (double& v : t) v = round_acc(m, v);
    return _mm512_load_pd(t);
  }
}

// Adds the used D_s rows (row r of each 16 x 16 tile) to a0 (columns 0-7) and a1 (8-15).
ATTNUM_AMX_FN inline void add_sums(unsigned used, const float (*d)[256], int r, __m512d& a0, __m512d& a1) {
  for (int s = 0; s < 5; ++s)
    if (used >> s & 1) {
      a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_load_ps(d[s] + 16 * r)));
      a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_load_ps(d[s] + 16 * r + 8)));
    }
}

// Adds row r of the sparse corrections (16 x 16 doubles; none when corr is null) and clears it
// for the next use.
ATTNUM_AMX_FN inline void add_corr(double* corr, int r, __m512d& a0, __m512d& a1) {
  if (!corr) return;
  double* c = corr + 16 * r;
  a0 = _mm512_add_pd(a0, _mm512_load_pd(c));
  a1 = _mm512_add_pd(a1, _mm512_load_pd(c + 8));
  _mm512_store_pd(c, _mm512_setzero_pd());
  _mm512_store_pd(c + 8, _mm512_setzero_pd());
}

// 8 accumulators as doubles (lanes outside k read as 0), and back.
ATTNUM_AMX_FN inline __m512d load_acc(__mmask8 k, const double* p) { return _mm512_maskz_loadu_pd(k, p); }
ATTNUM_AMX_FN inline __m512d load_acc(__mmask8 k, const float* p) {
  return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, p));
}
ATTNUM_AMX_FN inline void store_acc(__mmask8 k, double* p, __m512d v) { _mm512_mask_storeu_pd(p, k, v); }
ATTNUM_AMX_FN inline void store_acc(__mmask8 k, float* p, __m512d v) {
  _mm256_mask_storeu_ps(p, k, _mm512_cvtpd_ps(v));
}

// Rows r < rr (only those with live[r], when live is given), columns [0, nn):
// acc = model(acc + sum of the used D_s + corrections), from +0 on the first chunk. Float
// accumulators (QK written straight to fp32 scores, PV's O) are exact for the fp32, truncated and
// fp16 models, whose values are floats.
template <rk K, typename Acc>
ATTNUM_AMX_FN void finish_rows(const accumulator_spec& m, Acc* acc, int ld, int rr, int nn, const char* live,
                               bool first, unsigned used, const float (*d)[256], double* corr) {
  __mmask8 k0, k1;
  column_masks(nn, k0, k1);
  const __m512i tmask = _mm512_set1_epi64(m.mant_bits >= 52 ? ~0LL : ~((1LL << (52 - m.mant_bits)) - 1));
  for (int r = 0; r < rr; ++r) {
    if (live && !live[r]) continue;
    Acc* a = acc + static_cast<size_t>(r) * ld;
    __m512d a0 = first ? _mm512_setzero_pd() : load_acc(k0, a);
    __m512d a1 = first ? _mm512_setzero_pd() : load_acc(k1, a + 8);
    add_sums(used, d, r, a0, a1);
    add_corr(corr, r, a0, a1);
    store_acc(k0, a, round_vec<K>(m, a0, tmask));
    store_acc(k1, a + 8, round_vec<K>(m, a1, tmask));
  }
}

template <typename... Args>
ATTNUM_AMX_FN inline void finish_any(const accumulator_spec& m, Args... args) {
  switch (m.kind) {
    case acc_kind::fp32:
      finish_rows<rk::fp32>(m, args...);
      break;
    case acc_kind::truncated:
      finish_rows<rk::truncated>(m, args...);
      break;
    case acc_kind::fp16:
      finish_rows<rk::fp16>(m, args...);
      break;
    default:
      finish_rows<rk::other>(m, args...);
  }
}

// Collects the plane-2 elements of an operand while its planes are built; gives up (dense) once
// there are more than `limit`.
struct sparse_collector {
  struct raw {
    uint32_t bucket;
    sparse_plane::entry e;
  };
  std::vector<raw> items;
  size_t limit;
  bool dense = false;
  explicit sparse_collector(size_t lim) : limit(lim) { items.reserve(std::min<size_t>(lim, 1 << 16)); }
  // lanes of m2 (plane-2 elements of x[0..15]): element l has bucket bucket(l) and a, b of ab(l)
  template <typename F>
  void add(__mmask16 m2, const float* x, F&& where) {
    if (dense || !m2) return;
    for (unsigned m = m2; m; m &= m - 1) {
      const int l = __builtin_ctz(m);
      if (items.size() >= limit) {
        dense = true;
        return;
      }
      raw r = where(l);
      r.e.v = x[l];
      items.push_back(r);
    }
  }
  // Fills sp (stable counting sort by bucket) unless dense.
  void finish(int n_buckets, sparse_plane& sp) {
    sp.on = !dense;
    sp.off.assign(static_cast<size_t>(n_buckets) + 1, 0);
    sp.e.clear();
    if (dense) return;
    for (const raw& r : items) ++sp.off[r.bucket + 1];
    for (int i = 0; i < n_buckets; ++i) sp.off[i + 1] += sp.off[i];
    sp.e.resize(items.size());
    std::vector<uint32_t> pos(sp.off.begin(), sp.off.end() - 1);
    for (const raw& r : items) sp.e[pos[r.bucket]++] = r.e;
  }
};

// A plane is sparse when at most 1 element in 50 is in it (a correction costs about as much per
// element as a tile product does per 25 elements of a 16 x 32 tile).
constexpr size_t kSparseDiv = 50;
// A chunk of P (16 rows x 32 keys) takes its plane 2 out of the tiles when it has at most this
// many values there (each costs two vector FMAs per channel tile; the plane costs three tile
// products and a diagonal).
constexpr unsigned kSparseP = 16;

ATTNUM_AMX_FN inline __mmask16 plane2_lanes(__m256i p2) { return _mm256_test_epi16_mask(p2, p2); }

}  // namespace

ATTNUM_AMX_FN bool exact_qk::build(const float* q, int n_q, const float* k, int n_kv, int d) {
  dp_ = (d + 31) / 32 * 32;
  const int nch = dp_ / 32, qt = (n_q + 15) / 16, kt = (n_kv + 15) / 16;
  // Every element of a row below n_q (n_kv) is written below, so only the padding rows are
  // cleared: the storage is reused from head to head without a memset.
  for (auto& p : q_) {
    p.resize(static_cast<size_t>(qt) * 16 * dp_);
    std::fill(p.begin() + static_cast<size_t>(n_q) * dp_, p.end(), uint16_t{0});
  }
  for (auto& p : k_) {
    p.resize(static_cast<size_t>(kt) * 16 * dp_);
    if (n_kv % 16)  // the padding keys of the last tile: columns n_kv % 16 .. 15 of every pair row
      for (size_t pr = static_cast<size_t>(n_kv / 16) * (dp_ / 2); pr < static_cast<size_t>(kt) * (dp_ / 2); ++pr)
        std::fill(p.begin() + static_cast<std::ptrdiff_t>((pr * 16 + n_kv % 16) * 2),
                  p.begin() + static_cast<std::ptrdiff_t>((pr + 1) * 32), uint16_t{0});
  }
  qmask_.assign(static_cast<size_t>(qt) * nch, 0);
  kmask_.assign(static_cast<size_t>(kt) * nch, 0);
  __mmask16 bad = 0;
  __m256i pl[3];
  sparse_collector qc(static_cast<size_t>(n_q) * d / kSparseDiv);
  for (int r = 0; r < n_q; ++r)
    for (int c = 0; c < dp_; c += 16) {
      unsigned occ = 0;
      const float* x = q + static_cast<size_t>(r) * d + c;
      split16(load16(x, std::max(0, std::min(16, d - c))), pl, occ, bad);
      for (int g = 0; g < 3; ++g)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q_[g].data() + static_cast<size_t>(r) * dp_ + c), pl[g]);
      qmask_[static_cast<size_t>(r / 16) * nch + c / 32] |= static_cast<uint8_t>(occ);
      qc.add(plane2_lanes(pl[2]), x, [&](int l) {
        return sparse_collector::raw{static_cast<uint32_t>((r / 16) * nch + (c + l) / 32),
                                     {static_cast<uint8_t>(r % 16), static_cast<uint8_t>((c + l) % 32), 0.0f}};
      });
    }
  // K as B: element (k index 2p + i, column n) of the tile of keys [16 t, 16 t + 16) sits at
  // ((t * dp/2 + p) * 16 + n) * 2 + i.
  alignas(32) uint32_t pairs[3][8];
  for (int j = 0; j < n_kv; ++j)
    for (int c = 0; c < dp_; c += 16) {
      unsigned occ = 0;
      const float* x = k + static_cast<size_t>(j) * d + c;
      split16(load16(x, std::max(0, std::min(16, d - c))), pl, occ, bad);
      kmask_[static_cast<size_t>(j / 16) * nch + c / 32] |= static_cast<uint8_t>(occ);

      for (int g = 0; g < 3; ++g) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(pairs[g]), pl[g]);
        auto* dst = reinterpret_cast<uint32_t*>(k_[g].data());
        const size_t base = (static_cast<size_t>(j / 16) * (dp_ / 2) + c / 2) * 16 + j % 16;
        for (int p = 0; p < 8; ++p) dst[base + static_cast<size_t>(p) * 16] = pairs[g][p];
      }
    }
  if (bad) {
    for (auto* v : {&q_, &k_})
      for (auto& p : *v) p = {};
    return false;
  }
  qc.finish(qt * nch, qs_);
  if (qs_.on)  // plane 2 of Q leaves the tiles: run() adds Q2 K from the lists
    for (auto& m : qmask_) m &= 3;
  return true;
}

void exact_qk::run(int r0, int rows, int j0, int n, const accumulator_spec& model, double* acc, int ld,
                   long causal_off) const {
  run_t(r0, rows, j0, n, model, acc, ld, causal_off);
}
void exact_qk::run(int r0, int rows, int j0, int n, const accumulator_spec& model, float* acc, int ld,
                   long causal_off) const {
  run_t(r0, rows, j0, n, model, acc, ld, causal_off);
}

template <typename Acc>
ATTNUM_AMX_FN void exact_qk::run_t(int r0, int rows, int j0, int n, const accumulator_spec& model, Acc* acc, int ld,
                                   long causal_off) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  isa::note("amx", isa::path::amx);
  configure();
  const int nch = dp_ / 32;
  alignas(64) float dbuf[5][256];
  alignas(64) double corr[256] = {};  // sparse plane-2 terms, [row][key]; cleared as they are used
  // Q2 K for the tile (qt, jt) and chunk c, exact in double (8-bit by 8-bit products; sums are
  // multiples of 2^-18 far below 2^53): row e.a of the tile gets q * K[keys of jt][k]. The K
  // values come from the tile planes (one of the three holds each value, the others are 0).
  auto corrections = [&](int qt, int jt, int c, int rr, double* cr) ATTNUM_AMX_FN {
    if (!qs_.on) return false;
    const size_t bkt = static_cast<size_t>(qt) * nch + c;
    bool any = false;
    for (uint32_t i = qs_.off[bkt]; i < qs_.off[bkt + 1]; ++i) {
      const auto& e = qs_.e[i];
      if (e.a >= rr) continue;
      const size_t at = (static_cast<size_t>(jt) * (dp_ / 2) + (32 * c + e.b) / 2) * 32;  // pair row: [key][2]
      const __m512i w =
          _mm512_or_si512(_mm512_or_si512(_mm512_load_si512(k_[0].data() + at), _mm512_load_si512(k_[1].data() + at)),
                          _mm512_load_si512(k_[2].data() + at));
      const __m512 kv = _mm512_castsi512_ps(
          e.b % 2 ? _mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))) : _mm512_slli_epi32(w, 16));
      const __m512d q = _mm512_set1_pd(e.v);
      double* row = cr + 16 * e.a;
      _mm512_store_pd(row, _mm512_fmadd_pd(q, _mm512_cvtps_pd(_mm512_castps512_ps256(kv)), _mm512_load_pd(row)));
      _mm512_store_pd(
          row + 8,
          _mm512_fmadd_pd(q, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(kv), 1))),
                          _mm512_load_pd(row + 8)));
      any = true;
    }
    return any;
  };
  for (int kt = 0; kt < n; kt += 16) {  // a key tile's planes stay in L1 over the row tiles
    const int nn = std::min(16, n - kt), jt = (j0 + kt) / 16;
    for (int rt = 0; rt < rows; rt += 16) {
      const int rr = std::min(16, rows - rt), qt = (r0 + rt) / 16;
      Acc* out = acc + static_cast<size_t>(rt) * ld + kt;
      if (tile_masked(static_cast<long>(j0) + kt, static_cast<long>(r0) + rt, rr, causal_off)) {
        for (int r = 0; r < rr; ++r) std::fill_n(out + static_cast<size_t>(r) * ld, nn, Acc(0));
        continue;
      }
      for (int c = 0; c < nch; ++c) {
        const uint16_t* a[3];
        const uint16_t* b[3];
        for (int g = 0; g < 3; ++g) {
          a[g] = q_[g].data() + static_cast<size_t>(qt) * 16 * dp_ + 32 * c;
          b[g] = k_[g].data() + (static_cast<size_t>(jt) * (dp_ / 2) + 16 * c) * 32;
        }
        const unsigned used = tile_sums(qmask_[static_cast<size_t>(qt) * nch + c],
                                        kmask_[static_cast<size_t>(jt) * nch + c], a, dp_ * 2, b, 64, dbuf);
        const bool any = corrections(qt, jt, c, rr, corr);
        if (used || any || c == 0)  // nothing to add: acc + 0 rounds to acc
          finish_any(model, out, ld, rr, nn, nullptr, c == 0, used, dbuf, any ? corr : nullptr);
      }
    }
  }
}

ATTNUM_AMX_FN bool exact_pv::build(const float* v, int n_kv, int d) {
  if (d % 16) return false;
  d_ = d;
  const int n_pad = (n_kv + 31) / 32 * 32;
  const int nt = d / 16;
  for (auto& p : v_) {  // pairs below ceil(n_kv / 2) are all written below
    p.resize(static_cast<size_t>(n_pad) * d);
    std::fill(p.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>((n_kv + 1) / 2) * d * 2), p.end(),
              uint16_t{0});
  }
  vmask_.assign(static_cast<size_t>(n_pad / 32) * nt, 0);
  __mmask16 bad = 0;
  __m256i p0[3], p1[3];
  v_src_ = v;
  for (int j = 0; j < n_kv; j += 2)
    for (int c = 0; c < d; c += 16) {
      unsigned occ = 0;
      for (int jj = j; jj < std::min(j + 2, n_kv); ++jj) {
        const float* x = v + static_cast<size_t>(jj) * d + c;
        __m256i* pl = jj == j ? p0 : p1;
        split16(_mm512_loadu_ps(x), pl, occ, bad);
      }
      if (j + 1 >= n_kv) p1[0] = p1[1] = p1[2] = _mm256_setzero_si256();
      vmask_[static_cast<size_t>(j / 32) * nt + c / 16] |= static_cast<uint8_t>(occ);
      for (int g = 0; g < 3; ++g) {
        const __m512i w =
            _mm512_or_si512(_mm512_cvtepu16_epi32(p0[g]), _mm512_slli_epi32(_mm512_cvtepu16_epi32(p1[g]), 16));
        _mm512_storeu_si512(v_[g].data() + (static_cast<size_t>(j / 2) * d + c) * 2, w);
      }
    }
  if (bad) {
    for (auto& p : v_) p = {};
    return false;
  }
  return true;
}

ATTNUM_AMX_FN bool exact_pv::run(const float* p8, int ldp, int rows, const char* live, int j0, int n,
                                 const accumulator_spec& model, float* acc, int ld) const {
  for (int r = 0; r < rows; ++r) {  // NaN anywhere in a live row: the caller's ordered path
    if (!live[r]) continue;
    const float* p = p8 + static_cast<size_t>(r) * ldp;
    for (int j = 0; j < n; j += 16) {
      const __m512 x = load16(p + j, std::min(16, n - j));
      if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) return false;
    }
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  isa::note("amx", isa::path::amx);
  configure();
  const int nt = d_ / 16;
  alignas(64) float dbuf[5][256];
  alignas(64) uint16_t pa[3][16 * 32];  // the chunk of P as three planes
  alignas(64) double corr[256] = {};    // sparse plane-2 terms of P, [row][channel]
  sparse_plane::entry sp[kSparseP];     // a = row, b = key in the chunk
  __m256i pl[3];
  for (int rt = 0; rt < rows; rt += 16) {
    const int rr = std::min(16, rows - rt);
    for (int c0 = 0; c0 < n; c0 += 32) {
      const int cn = std::min(32, n - c0);
      unsigned ma = 0, n2 = 0;
      __mmask16 bad = 0;  // dead rows may hold stale values: their sums are never stored
      for (int r = 0; r < 16; ++r)
        for (int h = 0; h < 2; ++h) {
          const int m = r < rr ? std::max(0, std::min(16, cn - 16 * h)) : 0;
          unsigned occ = 0;
          split16(load16(p8 + static_cast<size_t>(rt + std::min(r, rr - 1)) * ldp + c0 + 16 * h, m), pl, occ, bad);
          if (r < rr && live[rt + r]) {
            ma |= occ;
            n2 += static_cast<unsigned>(__builtin_popcount(plane2_lanes(pl[2])));
          }
          for (int g = 0; g < 3; ++g) _mm256_store_si256(reinterpret_cast<__m256i*>(pa[g] + r * 32 + 16 * h), pl[g]);
        }
      const int ci = (j0 + c0) / 32;
      const uint16_t* a[3] = {pa[0], pa[1], pa[2]};
      // A few plane-2 P values (live rows): out of the tiles, added as P2 V rows in double.
      int n_sp = 0;
      if (n2 > 0 && n2 <= kSparseP) {
        for (int r = 0; r < rr; ++r) {
          if (!live[rt + r]) continue;
          for (int h = 0; h < 2; ++h) {
            const __m256i p2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(pa[2] + r * 32 + 16 * h));
            for (unsigned m = plane2_lanes(p2); m; m &= m - 1) {
              const int l = __builtin_ctz(m), j = 16 * h + l;
              sp[n_sp++] = {static_cast<uint8_t>(r), static_cast<uint8_t>(j),
                            p8[static_cast<size_t>(rt + r) * ldp + c0 + j]};
            }
          }
        }
        ma &= 3;
      }
      for (int t = 0; t < nt; ++t) {
        const uint16_t* b[3];
        for (int g = 0; g < 3; ++g) b[g] = v_[g].data() + (static_cast<size_t>(j0 + c0) / 2 * d_ + 16 * t) * 2;
        const unsigned used = tile_sums(ma, vmask_[static_cast<size_t>(ci) * nt + t], a, 64, b, d_ * 4, dbuf);
        for (int i = 0; i < n_sp; ++i) {  // P2 x V rows, exact in double (live rows only)
          const auto& e = sp[i];
          const float* vr = v_src_ + static_cast<size_t>(j0 + c0 + e.b) * d_ + 16 * t;
          const __m512d p = _mm512_set1_pd(e.v);
          double* row = corr + 16 * e.a;
          _mm512_store_pd(row, _mm512_fmadd_pd(p, _mm512_cvtps_pd(_mm256_loadu_ps(vr)), _mm512_load_pd(row)));
          _mm512_store_pd(row + 8,
                          _mm512_fmadd_pd(p, _mm512_cvtps_pd(_mm256_loadu_ps(vr + 8)), _mm512_load_pd(row + 8)));
        }
        if (used || n_sp)  // nothing to add: acc + 0 rounds to acc
          finish_any(model, acc + static_cast<size_t>(rt) * ld + 16 * t, ld, rr, 16, live + rt, false, used, dbuf,
                     n_sp ? corr : nullptr);
      }
    }
  }
  return true;
}

ATTNUM_AMX_FN bool int8_qk::build(const float* q, int n_q, const float* k, int n_kv, int d) {
  dp_ = (d + 63) / 64 * 64;
  const int qt = (n_q + 15) / 16, kt = (n_kv + 15) / 16;
  q_.assign(static_cast<size_t>(qt) * 16 * dp_, 0);
  k_.assign(static_cast<size_t>(kt) * 16 * dp_, 0);
  __mmask16 bad = 0;
  // integers in [-128, 127]: the int8 conversion reads back the same float
  auto to_i8 = [&](const float* x, int m) ATTNUM_AMX_FN {
    const __m512 v = load16(x, m);
    const __m512i i = _mm512_cvttps_epi32(v);
    bad |= _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(i), v, _CMP_NEQ_UQ) |
           _mm512_cmp_epi32_mask(i, _mm512_set1_epi32(-128), _MM_CMPINT_LT) |
           _mm512_cmp_epi32_mask(i, _mm512_set1_epi32(127), _MM_CMPINT_NLE);
    return _mm512_cvtepi32_epi8(i);
  };
  for (int r = 0; r < n_q; ++r)
    for (int c = 0; c < d; c += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q_.data() + static_cast<size_t>(r) * dp_ + c),
                       to_i8(q + static_cast<size_t>(r) * d + c, std::min(16, d - c)));
  // K as B: element (k index 4p + i, column n) of the tile of keys [16 t, 16 t + 16) sits at
  // ((t * dp/4 + p) * 16 + n) * 4 + i.
  alignas(16) uint32_t quads[4];
  for (int j = 0; j < n_kv; ++j)
    for (int c = 0; c < d; c += 16) {
      _mm_store_si128(reinterpret_cast<__m128i*>(quads),
                      to_i8(k + static_cast<size_t>(j) * d + c, std::min(16, d - c)));
      auto* dst = reinterpret_cast<uint32_t*>(k_.data());
      const size_t base = (static_cast<size_t>(j / 16) * (dp_ / 4) + c / 4) * 16 + j % 16;
      for (int p = 0; p < 4; ++p) dst[base + static_cast<size_t>(p) * 16] = quads[p];
    }
  if (bad) {
    q_ = {}, k_ = {};
    return false;
  }
  return true;
}

ATTNUM_AMX_FN void int8_qk::run(int r0, int rows, int j0, int n, double* acc, int ld, long causal_off) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  isa::note("amx", isa::path::amx);
  configure();
  alignas(64) int32_t out[256];
  for (int kt = 0; kt < n; kt += 16) {
    const int nn = std::min(16, n - kt), jt = (j0 + kt) / 16;
    __mmask8 k0, k1;
    column_masks(nn, k0, k1);
    for (int rt = 0; rt < rows; rt += 16) {
      const int rr = std::min(16, rows - rt), qt = (r0 + rt) / 16;
      double* a = acc + static_cast<size_t>(rt) * ld + kt;
      if (tile_masked(static_cast<long>(j0) + kt, static_cast<long>(r0) + rt, rr, causal_off)) {
        for (int r = 0; r < rr; ++r) std::fill_n(a + static_cast<size_t>(r) * ld, nn, 0.0);
        continue;
      }
      _tile_zero(0);
      for (int c = 0; c < dp_; c += 64) {
        ATTNUM_TILE_LOAD(5, q_.data() + static_cast<size_t>(qt) * 16 * dp_ + c, dp_);
        ATTNUM_TILE_LOAD(6, k_.data() + (static_cast<size_t>(jt) * (dp_ / 4) + c / 4) * 64, 64);
        _tile_dpbssd(0, 5, 6);
      }
      _tile_stored(0, out, 64);
      for (int r = 0; r < rr; ++r) {  // int32 -> double is exact
        const __m512i v = _mm512_load_si512(out + 16 * r);
        _mm512_mask_storeu_pd(a + static_cast<size_t>(r) * ld, k0, _mm512_cvtepi32_pd(_mm512_castsi512_si256(v)));
        _mm512_mask_storeu_pd(a + static_cast<size_t>(r) * ld + 8, k1,
                              _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1)));
      }
    }
  }
}

#else  // no AMX in this build: available() is false and nothing here runs

bool exact_qk::build(const float*, int, const float*, int, int) { return false; }
void exact_qk::run(int, int, int, int, const accumulator_spec&, double*, int, long) const {}
void exact_qk::run(int, int, int, int, const accumulator_spec&, float*, int, long) const {}
bool exact_pv::build(const float*, int, int) { return false; }
bool int8_qk::build(const float*, int, const float*, int, int) { return false; }
void int8_qk::run(int, int, int, int, double*, int, long) const {}
bool exact_pv::run(const float*, int, int, const char*, int, int, const accumulator_spec&, float*, int) const {
  return false;
}

#endif

}  // namespace attnum::attention::amx
