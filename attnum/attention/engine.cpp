// The one emulation engine: runs any kernel_spec on one query head, row by row. The steps below
// are numbered as in docs/kernels.md, which gives each preset's upstream line per step.
//
// Per query row i (rows are independent; kBlockM only sets which KV blocks a row's CTA visits):
//   for each KV block b in the CTA's range, in the spec's order:
//     1. S_j   = QK accumulator (k_step chunks, each chunk's exact sum added and rounded once)
//     2. x_j, eff_j from the score scaling (fold / dequant / dequant_sm / dequant_unit); masked
//        columns get the mask value (on raw S, or on x for Sage)
//     3. running max m (raw or scaled space), alpha, P_j = exp2(fmaf(x_j, eff, -m')) with the
//        exponent offset folded in m'
//     4. l partials *= alpha; l += P (fp32 P or the cast P) in the kernel's thread order
//     5. P8 = cast(P or P*S); O *= alpha; O += P8 V (into O through the accumulator model at each
//        k_step, or a fresh accumulator per block added to O in fp32)
//   epilogue: l from the partials; inv = 1/l (0 when l is 0 or NaN); O *= inv and the V scale
//   (divided by S in multiply mode); output cast.
//
// exp2: CPU exp2f is correctly rounded in glibc for most inputs, whereas MUFU.EX2 (ex2.approx) is
// not (kernels.md 0): expect rare E4M3 boundary flips against hardware. 1/l: IEEE division where
// the kernels use rcp.approx (Sage, hpc-ops): 1 ulp differences possible. The knobs exp2_unit,
// rcp_unit and div_unit replace these operations by a GPU-measured table (formats/sfu_unit.h;
// the sites: sfu_exp2, the epilogue's inv and divisions, make_ctx's v_scale / S, the casts).
// The T = double instantiation (spec.arith_fp64) replaces every fp32 step by fp64 and exp2f by
// exp2: with every quantization point off it is exact attention up to fp64 rounding.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <bit>
#include <cassert>
#include <cstring>
#include <numbers>
#include <memory>
#include <numeric>

#include "attnum/attention/causal.h"
#include "attnum/attention/chunk_sums.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/engine_detail.h"
#include "attnum/attention/fast_exp2.h"
#include "attnum/attention/row_kernels.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/scale.h"

namespace attnum::attention {
namespace {

inline float fma_t(float a, float b, float c) { return std::fmaf(a, b, c); }
inline double fma_t(double a, double b, double c) { return std::fma(a, b, c); }
inline float exp2_t(float x) { return std::exp2f(x); }
inline double exp2_t(double x) { return std::exp2(x); }
// In place p[i] = exp2(p[i]): the float case runs the vector exp2f, bit-identical to exp2f.
inline void exp2_inplace(float* p, int n) { fast::exp2f_array(p, p, n); }
inline void exp2_inplace(double* p, int n) {
  for (int i = 0; i < n; ++i) p[i] = std::exp2(p[i]);
}

// Everything constant over the rows of one head.
template <typename T>
struct head_ctx {
  const prepared_layer* L;
  int h, g, d, n_q, n_kv, bm, bn;
  bool causal;
  long causal_off = 0;  // causal: key j is masked for row i when j > i + causal_off (causal.h)
  kernel_spec s;        // effective spec (disabled points resolved)
  T sm, sl2, offset, p_scale;
  const float* qs;            // [n_q] Q row scales
  const float* ks;            // [n_kv]
  std::vector<float> v;       // [n_kv, d] V dequantised, when its scale varies over tokens
  const float* vp = nullptr;  // [n_kv, d] V fed to PV: the cast values, or v
  std::vector<T> vs;          // [d] V scale applied in the epilogue (with 1/S in multiply mode)
  bool v_nan = false;
  bool v_finite = true;  // every value of vp finite: pv_tile may skip products of P8 = +-0
  // The chunk sums of S = Q K^T and of P8 V, each from the backend make_ctx chose for this head
  // (chunk_sums.h: AMX tiles, int16 planes, double-FMA kernels, the ordered loop or Eigen). Their
  // packed operands live in the thread-local storage of the thread that built the context, reused
  // from head to head (no fresh pages per head); run_heads_t builds one context per thread and the
  // workers only read them.
  qk_sums qk;
  pv_sums pv;
  // The QK of the AMX tiles, the int16 planes or the packed double-FMA kernels (qk.float_scores())
  // rounds its fp32 scores straight into the x buffer of the fused FA3 softmax path (fold_raw_row),
  // skipping a pass and half the accumulator bytes: fp32/truncated accumulators hold float values
  // anyway, and acc + sum is formed in double from the float as from the same value held as a double.
  // (The scalar path keeps the double accumulators: the reference the other paths are tested on.)
  bool qk_to_x = false;
  // The measured units of exp2_unit / rcp_unit / div_unit (float path only; null: ieee).
  const formats::sfu_table* ex2 = nullptr;
  const formats::sfu_table* rcp = nullptr;
  const formats::sfu_table* dv = nullptr;
};

// exp2 through the spec's exp2_unit: the measured table where one is set, else exp2f / exp2.
template <typename T>
inline T sfu_exp2(const head_ctx<T>& c, T x) {
  if constexpr (std::is_same_v<T, float>)
    if (c.ex2) return c.ex2->ex2(x);
  return exp2_t(x);
}
// In place p[i] = exp2(p[i]) through the unit (ieee: the vector exp2f path).
template <typename T>
inline void sfu_exp2_inplace(const head_ctx<T>& c, T* p, int n) {
  if constexpr (std::is_same_v<T, float>)
    if (c.ex2) {
      for (int i = 0; i < n; ++i) p[i] = c.ex2->ex2(p[i]);
      return;
    }
  exp2_inplace(p, n);
}
// a / b through the spec's div_unit; 1 / b through its rcp_unit.
template <typename T>
inline T sfu_div(const head_ctx<T>& c, T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    if (c.dv) return c.dv->div(a, b);
  return a / b;
}
template <typename T>
inline T sfu_rcp(const head_ctx<T>& c, T b) {
  if constexpr (std::is_same_v<T, float>)
    if (c.rcp) return c.rcp->rcp(b);
  return T(1) / b;
}

constexpr int kTileRows = 64;  // divides every preset's block_m (64, 128, 192)

// Resolves the quantization points into the spec the loop runs.
kernel_spec effective_spec(const kernel_spec& in) {
  kernel_spec s = in;
  const auto& e = in.enabled;
  const accumulator_spec off = {in.arith_fp64 ? acc_kind::exact : acc_kind::fp32, 23, in.qk_acc.k_step};
  if (!e.qk_acc) s.qk_acc = off;
  if (!e.pv_acc) s.pv_acc = {off.kind, 23, in.pv_acc.k_step};
  if (!e.p_cast) {
    s.p_fmt = formats::format::fp32;
    s.p_mode = p_scale_mode::none;
  }
  if (!e.o_cast) s.out_fmt = formats::format::fp32;
  if (s.qk_acc.k_step <= 0 || s.pv_acc.k_step <= 0) fail("kernel {}: accumulator k_step must be positive", s.name);
  return s;
}

template <typename T>
head_ctx<T> make_ctx(const prepared_layer& L, int h, bool causal) {
  head_ctx<T> c;
  c.L = &L;
  c.h = h;
  c.g = L.kv_head(h);
  c.d = L.d_head, c.n_q = L.n_q, c.n_kv = L.n_kv;
  std::tie(c.bm, c.bn) = L.spec.tile_for(c.d, causal);
  c.causal = causal;
  c.s = effective_spec(L.spec);
  // bottom-right: j <= i + n_kv - n_q; top-left (Sage: attn_qk_int8_per_block_causal.py:45
  // `offs_m >= start_n + offs_n`, qk_int_sv_f8_cuda_sm89.cuh `kv_idx > q_idx` masked): j <= i
  c.causal_off = c.s.causal_diag == causal_align::top_left ? 0L : static_cast<long>(c.n_kv) - c.n_q;
  if constexpr (std::is_same_v<T, float>) {
    c.ex2 = c.s.exp2_unit.table.get();
    c.rcp = c.s.rcp_unit.table.get();
    c.dv = c.s.div_unit.table.get();
  }
  const double sm = 1.0 / std::sqrt(static_cast<double>(c.d));
  c.sm = static_cast<T>(sm);
  if (std::is_same_v<T, double>)
    c.sl2 = static_cast<T>(sm * std::numbers::log2e);
  else
    c.sl2 = c.s.sl2_in_double ? static_cast<T>(static_cast<double>(static_cast<float>(sm)) * std::numbers::log2e)
                              : static_cast<T>(static_cast<float>(sm) * 1.44269504f);
  c.offset = c.s.p_mode == p_scale_mode::exponent_offset ? static_cast<T>(c.s.p_offset) : T(0);
  c.p_scale = c.s.p_mode == p_scale_mode::multiply ? static_cast<T>(c.s.p_scale) : T(1);
  const size_t qoff = static_cast<size_t>(h) * c.n_q, koff = static_cast<size_t>(c.g) * c.n_kv;
  c.qs = L.q8.row_scale.data() + qoff;
  c.ks = L.k8.row_scale.data() + koff;
  // V scale: per channel in the epilogue when constant over tokens, else dequantise V up front.
  const auto& v8 = L.v8;
  bool uniform = v8.n_col_blocks == 1;
  for (int t = 1; t < c.n_kv && uniform; ++t) uniform = v8.row_scale[koff + t] == v8.row_scale[koff];
  c.vs.assign(c.d, T(1));
  if (uniform) {
    c.vp = v8.values.data() + koff * c.d;
    for (int k = 0; k < c.d; ++k) c.vs[k] = static_cast<T>(c.n_kv > 0 ? v8.scale(c.g, 0, k) : 1.0f);
  } else {
    c.v.assign(v8.values.begin() + koff * c.d, v8.values.begin() + (koff + c.n_kv) * c.d);
    c.vp = c.v.data();
    for (int t = 0; t < c.n_kv; ++t)
      for (int k = 0; k < c.d; ++k) c.v[static_cast<size_t>(t) * c.d + k] *= v8.scale(c.g, t, k);
  }
  // 1/S: FlashInfer scale_pv = v_scale / 448 (3.1); XQA (1/448) * kvCacheScale (4.4) and
  // hpc-ops vscale * (1/256) (5.1) multiply by the reciprocal.
  if (c.s.p_mode == p_scale_mode::multiply && !c.s.rowsum_from_cast)
    for (auto& x : c.vs)
      x = c.s.epilogue == epilogue_mode::div_first ? static_cast<T>(sfu_div(c, x, c.p_scale))
                                                   : static_cast<T>((T(1) / c.p_scale) * x);
  c.v_nan = v8.nan_flagged;
  c.v_finite = formats::span_all_finite(c.vp, static_cast<size_t>(c.n_kv) * c.d);
  c.qk = qk_sums::make(L, h, c.s, std::gcd(c.bm, kTileRows), c.bn);
  c.pv = pv_sums::make(L, c.g, c.s, c.bn, c.vp, uniform, std::is_same_v<T, float>);
  // Raw-space max needs one eff per row: with K scales varying over keys, dequantise S first.
  if (c.s.max == max_space::raw && c.s.scaling == score_scaling::fold)
    for (int t = 1; t < c.n_kv; ++t)
      if (c.ks[t] != c.ks[0]) {
        c.s.scaling = score_scaling::dequant;
        break;
      }
  // (after the line above: the fused path needs the fold scaling for every block and row)
  if constexpr (std::is_same_v<T, float>)
    c.qk_to_x = c.qk.float_scores() && (c.s.qk_acc.kind == acc_kind::fp32 || c.s.qk_acc.kind == acc_kind::truncated) &&
                c.s.scaling == score_scaling::fold && c.s.max == max_space::raw && !c.s.mask_on_x &&
                c.s.masked_tail_blocks == 0;
  return c;
}

// Row-sum partials in the kernel's thread order (kernels.md 1.10, 2a.10).
template <typename T>
void add_rowsum(const head_ctx<T>& c, T* l, const T* p, int n_cols) {
  switch (c.s.rowsum) {
    case rowsum_order::sequential:
      for (int j = 0; j < n_cols; ++j) l[0] += p[j];
      break;
    case rowsum_order::wgmma:  // thread t holds columns 8g+2t, 8g+2t+1 in ascending order
      for (int j = 0; j < n_cols; ++j) l[(j % 8) / 2] += p[j];
      break;
    case rowsum_order::sage_mma:  // d_t += P0+P1+P4+P5 per 16-column tile
      for (int f = 0; f * 16 < n_cols; ++f)
        for (int t = 0; t < 4; ++t) {
          auto at = [&](int j) { return j < n_cols ? p[j] : T(0); };
          const int b = 16 * f + 2 * t;
          l[t] += at(b) + at(b + 1) + at(b + 8) + at(b + 9);
        }
      break;
    case rowsum_order::triton_block:
    case rowsum_order::hpcops_block:
    case rowsum_order::xqa_warps:
      ATTNUM_ASSERT(false, "add_rowsum: the block orders go to block_rowsum");
  }
}

template <typename T>
T final_rowsum(const head_ctx<T>& c, const T* l) {
  switch (c.s.rowsum) {
    case rowsum_order::sequential:
      return l[0];
    case rowsum_order::wgmma:
      return (l[0] + l[2]) + (l[1] + l[3]);  // quad reduce xor 2, xor 1
    case rowsum_order::sage_mma:
      return (l[0] + l[1]) + (l[2] + l[3]);  // xor 1, xor 2
    // hpc-ops final_online_softmax: warp_4lane_reduce_sum_xor, `x += shfl_xor(x, 1); x +=
    // shfl_xor(x, 2)` (hpc-ops@6e2eced src/utils/utils.cuh:405-409; prefill/kernels.cuh:51)
    case rowsum_order::hpcops_block:
      return (l[0] + l[1]) + (l[2] + l[3]);
    case rowsum_order::triton_block:
    case rowsum_order::xqa_warps:
      return l[0];  // reduced per block
  }
  return l[0];
}

// The leading columns of a row's n that rescale_rowsum adds (0 without fma_contract).
template <typename T>
int rescale_rowsum_columns(const head_ctx<T>& c, int n) {
  if (!c.s.fma_contract || n <= 0) return 0;
  switch (c.s.rowsum) {
    case rowsum_order::sequential:
      return 1;
    case rowsum_order::wgmma:
      return std::min(n, 8);
    case rowsum_order::sage_mma:
      return std::min(n, 16);
    default:
      return 0;
  }
}

// Step 4's rescale of the partials by alpha. With fma_contract, nvcc contracts `l *= alpha` with
// the first add that follows it into one FMA (a multiply whose only use is that add): FA3
// `row_sum(mi) *= scores_scale(mi)` (flash-attention@0251105a hopper/softmax.h:120) then
// reduce_sum's `summary(mi) = op(summary(mi), tensor(mi, ni))` (hopper/utils.h:30); FlashInfer
// attention_updater.cuh:210 then :64; Sage `d[fq][k] *= o_scale` (SageAttention@d1a57a5
// csrc/qattn/attn_utils.cuh:400) then `d[fq][0] += (RS[0] + RS[1] + RS[4] + RS[5])`
// (qk_int_sv_f8_cuda_sm90.cu:317, attn_utils.cuh:551). Returns the number of leading columns of
// p already added (whole groups of the order: the rest continues at p + that count).
template <typename T>
int rescale_rowsum(const head_ctx<T>& c, T* l, const T* p, int n, T alpha) {
  if (!c.s.fma_contract || n <= 0) {
    for (int t = 0; t < 4; ++t) l[t] *= alpha;
    return 0;
  }
  switch (c.s.rowsum) {
    case rowsum_order::sequential:
      l[0] = fma_t(l[0], alpha, p[0]);
      for (int t = 1; t < 4; ++t) l[t] *= alpha;
      break;
    case rowsum_order::wgmma:  // thread t's first column is 2t; its second, 2t+1, completes the group
      for (int t = 0; t < 4; ++t) {
        const int j = 2 * t;
        l[t] = j < n ? fma_t(l[t], alpha, p[j]) : l[t] * alpha;
        if (j + 1 < n) l[t] += p[j + 1];
      }
      break;
    case rowsum_order::sage_mma:  // the first 16-column tile's ((P0+P1)+P4)+P5 is the addend
      for (int t = 0; t < 4; ++t) {
        auto at = [&](int j) { return j < n ? p[j] : T(0); };
        const int b = 2 * t;
        l[t] = fma_t(l[t], alpha, at(b) + at(b + 1) + at(b + 8) + at(b + 9));
      }
      break;
    default:
      ATTNUM_ASSERT(false, "rescale_rowsum: the block orders go to block_rowsum");
  }
  return rescale_rowsum_columns(c, n);
}

// Whether the order updates l once per block from the block's own sum (block_rowsum) rather
// than scaling the partials and adding each P into them (add_rowsum).
inline bool block_rowsum_order(rowsum_order o) {
  return o == rowsum_order::triton_block || o == rowsum_order::hpcops_block || o == rowsum_order::xqa_warps;
}

template <typename T>
bool fused_o_rescale(const head_ctx<T>& c) {
  return (c.s.triton_fp_fusion || c.s.fma_contract_o) && c.s.pv == pv_mode::fresh_per_block;
}

// Step 4 for the block orders: l from the block's sums of P and the rescale factor alpha.
template <typename T>
void block_rowsum(const head_ctx<T>& c, T* l, const T* p, int n, T alpha) {
  switch (c.s.rowsum) {
    case rowsum_order::triton_block: {
      // Sage v1 `l_ij = tl.sum(p, 1)` (attn_qk_int8_per_block.py:58): the mma layout gives thread t
      // of a quad columns 8g+2t, 8g+2t+1, summed in ascending order, then the quad's shuffle tree
      // xor 2, xor 1 [inferred from Triton's reduce lowering]; `l_i = l_i * alpha + l_ij` (:61) is
      // one fmaf under enable_fp_fusion (the default: Triton sets LLVM's FP-op fusion to Fast).
      T t4[4] = {T(0), T(0), T(0), T(0)};
      for (int j = 0; j < n; ++j) t4[(j % 8) / 2] += p[j];
      const T bs = (t4[0] + t4[2]) + (t4[1] + t4[3]);
      l[0] = c.s.triton_fp_fusion ? fma_t(l[0], alpha, bs) : l[0] * alpha + bs;
      break;
    }
    case rowsum_order::hpcops_block: {
      // hpc-ops online_softmax (hpc-ops@6e2eced src/attention/prefill/kernels.cuh:68,82,86):
      // `float row_sum = 0.f; ... row_sum += tAttr_mn(im, in);` over the thread's columns, then
      // `gSum(im) = gSum(im) * scale + row_sum`: one fmaf as nvcc contracts it (fma_contract), or
      // a multiply and an add as written
      T t4[4] = {T(0), T(0), T(0), T(0)};
      for (int j = 0; j < n; ++j) t4[(j % 8) / 2] += p[j];
      for (int t = 0; t < 4; ++t) l[t] = c.s.fma_contract ? fma_t(l[t], alpha, t4[t]) : l[t] * alpha + t4[t];
      break;
    }
    case rowsum_order::xqa_warps: {
      // XQA computeWarpColSum (TensorRT-LLM@014dadcd cpp/kernels/xqa/mha_sm90.cu): a thread adds
      // its two tokens (rows 8i + quad of its warp's 16), then `x += __shfl_xor_sync(~0U, x,
      // xorMask)` for xorMask 16, 8, 4; rescaleGemm1AccForNewColMax_sync: `accColSum = accColSum *
      // scaleVec`, then `accColSum = accColSum + xColSum[i]` for the warps i = 0..3 in order.
      auto at = [&](int j) { return j < n ? p[j] : T(0); };
      T acc = l[0] * alpha;
      for (int w = 0; w * 16 < n; ++w) {
        T sq[8];
        for (int q = 0; q < 8; ++q) sq[q] = at(16 * w + q) + at(16 * w + q + 8);
        for (int q = 0; q < 4; ++q) sq[q] = sq[q] + sq[q + 4];  // xor 16: lanes of quads q, q+4
        for (int q = 0; q < 2; ++q) sq[q] = sq[q] + sq[q + 2];  // xor 8
        acc = acc + (sq[0] + sq[1]);                            // xor 4, then onto the sum
      }
      l[0] = acc;
      break;
    }
    default:
      break;
  }
}

// Whether run_tile adds the row sums of a whole tile at once (wgmma_rowsum_rows) instead of
// softmax_row doing it row by row: where the active path has the vector kernel (row_kernels.h).
template <typename T>
bool wgmma_rowsum_tile(const head_ctx<T>& c) {
  return std::is_same_v<T, float> && c.s.rowsum == rowsum_order::wgmma && rowk::has_wgmma_rowsum();
}

// Row sums of the live rows of a tile for one block (see wgmma_rowsum_tile).
template <typename T>
void wgmma_rowsum_rows(T* l, const T* p, int ldp, int rows, const std::vector<char>& live, int n) {
  if constexpr (std::is_same_v<T, float>) {
    [[maybe_unused]] const bool done = rowk::wgmma_rowsum_rows(l, p, ldp, rows, live.data(), n);
    assert(done);  // wgmma_rowsum_tile said the kernel is there
  }
}

// Scratch of one tile of rows: per row r, bn scores and d outputs.
template <typename T>
struct tile_buf {
  int bn, d;
  std::vector<double> sacc;      // [rows, bn] QK accumulators
  std::vector<T> x, eff, p, p8;  // [rows, bn]
  std::vector<T> o, acc;         // [rows, d]
  std::vector<T> m, l;           // [rows], [rows, 4]
  std::vector<T> alpha;          // [rows] the rescale factor of the current block
  std::vector<int> p_end;        // [rows] per row: P8 is +-0 from this column of the block on
  chunk_scratch sums;            // the chunk-sum backends' scratch (chunk_sums.h)
  tile_buf(int bn_, int d_)
      : bn(bn_),
        d(d_),
        sacc(kTileRows * bn_),
        x(kTileRows * bn_),
        eff(kTileRows * bn_),
        p(kTileRows * bn_),
        p8(kTileRows * bn_),
        o(kTileRows * d_),
        acc(kTileRows * d_),
        m(kTileRows),
        l(kTileRows * 4),
        alpha(kTileRows),
        p_end(kTileRows) {}
};

}  // namespace

void accumulate_chunk(const accumulator_spec& m, float* a, const double* c, int n) { round_add(m, a, c, n); }

namespace {

// Step 1 for rows [r0, r1): sacc[r][jj]. Only keys [j0, jc) are computed: the keys from jc on are
// masked for every row of the tile (causal), and a masked score is replaced by the mask value
// before any use, so its accumulator is left 0.
template <typename T>
void qk_tile(const head_ctx<T>& c, int r0, int r1, int j0, int j1, int jc, tile_buf<T>& b) {
  const int rows = r1 - r0, n = jc - j0;
  if (!c.qk_to_x)  // (with qk_to_x the scores go to x, whose masked columns the softmax fills)
    for (int r = 0; r < rows; ++r)
      std::fill(b.sacc.begin() + static_cast<size_t>(r) * b.bn + std::max(n, 0),
                b.sacc.begin() + static_cast<size_t>(r) * b.bn + (j1 - j0), 0.0);
  if (n <= 0) return;
  const long off = c.causal ? c.causal_off : kNoMask;  // key j masked for row i when j > i + off (causal.h)
  float* x = nullptr;  // the fp32 scores straight into x (qk_to_x), else the accumulators in sacc
  if constexpr (std::is_same_v<T, float>)
    if (c.qk_to_x) x = b.x.data();
  c.qk.run(r0, rows, j0, n, off, c.s.qk_acc, b.sacc.data(), x, b.bn, b.sums);
  if (c.s.qk_acc.kind == acc_kind::int32 && std::is_same_v<T, float>)  // __int2float_rz (2a.7)
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) {
        double& a = b.sacc[static_cast<size_t>(r) * b.bn + j];
        a = static_cast<float>(truncate_bits(a, 23));
      }
}

// Step 5 for rows [r0, r1): O (or a fresh accumulator) += P8 V for keys [j0, j1), chunks of
// k_step from j0.
template <typename T>
void pv_tile(const head_ctx<T>& c, int rows, int j0, int j1, const std::vector<char>& live, tile_buf<T>& b) {
  const int d = c.d, ks = c.s.pv_acc.k_step;
  const bool fresh = c.s.pv == pv_mode::fresh_per_block;
  std::vector<T>& acc = fresh ? b.acc : b.o;
  if (fresh) std::fill(b.acc.begin(), b.acc.begin() + static_cast<size_t>(rows) * d, T(0));
  // Chunks whose P8 is +-0 in every live row (the causally masked tail) are skipped: with V
  // finite their products are +-0, their exact chunk sum is +0 (GEMMs and the plain loop start
  // from +0, and +0 + -0 = +0), and acc + (+0) rounds back to acc in every accumulator model,
  // since an accumulator is never -0 (it starts at +0 and a rounded sum is -0 only when both
  // addends are). NaN P8 counts as nonzero. A V holding NaN or Inf skips nothing: 0 * NaN and
  // 0 * Inf are NaN in the kernel's MMA over the whole block. p_end[r]: row r's P8 is +-0 from
  // there on (0 for a row that is not live), for the backends' fused fp32 call (chunk_sums.h).
  int n_nz = 0;
  for (int r = 0; r < rows; ++r) {
    int& e = b.p_end[r];
    e = 0;
    if (!live[r]) continue;
    const T* p8 = b.p8.data() + static_cast<size_t>(r) * b.bn;
    for (e = j1 - j0; e > 0 && p8[e - 1] == 0;) --e;
    n_nz = std::max(n_nz, e);
  }
  if (!c.v_finite) n_nz = j1 - j0;
  // O through a rounding model that is not idempotent on O*alpha (truncated, fp16): the hardware
  // still adds the zero chunks' +0 into O and rounds, so nothing is skipped
  if (!fresh && c.s.pv_acc.kind != acc_kind::fp32 && c.s.pv_acc.kind != acc_kind::exact) n_nz = j1 - j0;
  const int n = std::min(j1 - j0, (n_nz + ks - 1) / ks * ks);  // whole chunks from j0
  c.pv.run(b.p8.data(), b.bn, rows, live.data(), j0, n, c.s.pv_acc, acc.data(), d,
           c.v_finite ? b.p_end.data() : nullptr, b.sums);
  if (fresh && fused_o_rescale(c)) {
    // Sage v1 `acc = acc * alpha[:, None]; acc += tl.dot(p, v, out_dtype=tl.float16)`
    // (attn_qk_int8_per_block.py:63,68): one fmaf under Triton's enable_fp_fusion. Sage2
    // `RO[fq][fv][k * 2 + 0] *= o_scale` (attn_utils.cuh:414) and `RO[fq][fv][k] += RO_temp[fq][fv][k]`
    // (qk_int_sv_f8_cuda_sm90.cu:353; sm89 fp16 tile: attn_utils.cuh:970): one fmaf as nvcc
    // contracts them (fma_contract_o)
    for (int r = 0; r < rows; ++r)
      if (live[r]) {
        T* o = b.o.data() + static_cast<size_t>(r) * d;
        const T* a = b.acc.data() + static_cast<size_t>(r) * d;
        for (int k = 0; k < d; ++k) o[k] = fma_t(o[k], b.alpha[r], a[k]);
      }
  } else if (fresh) {
    for (int r = 0; r < rows; ++r)
      if (live[r])
        for (int k = 0; k < d; ++k) b.o[static_cast<size_t>(r) * d + k] += b.acc[static_cast<size_t>(r) * d + k];
  }
}

// P8 = cast(P * p_scale) over one block row, the format's switch hoisted out of the loop so each
// case vectorises; counts over the first n_live (unmasked) columns.
template <typename T, typename Q>
__attribute__((flatten)) void cast_p_loop(Q quant, const T* p, T* p8, T p_scale, int n, int n_live, double fmax,
                                          run_stats& st) {
  for (int jj = 0; jj < n; ++jj) p8[jj] = quant(p[jj] * p_scale);
  int under = 0, sat = 0;  // a block has < 2^31 columns: 32-bit counts vectorise without widening
  for (int jj = 0; jj < n_live; ++jj) {
    const T ps = p[jj] * p_scale;
    under += (p[jj] > 0 && p8[jj] == 0);
    sat += (static_cast<double>(ps) > fmax);
  }
  st.p_count += n_live, st.p_underflow += under, st.p_saturated += sat;
}

template <typename T>
void cast_p(const head_ctx<T>& c, const T* p, T* p8, int n, int n_live, run_stats& st) {
  using formats::format;
  const format f = c.s.p_fmt;
  const double fmax = formats::info(f).max_finite;
  // Each cast named directly (not through a function pointer), so it inlines into the loop and
  // the loop vectorises: through a pointer GCC's inliner may leave a call per value.
  switch (f) {
    case format::fp32:
      cast_p_loop([](T v) { return v; }, p, p8, c.p_scale, n, n_live, fmax, st);
      break;
    case format::e4m3fn:
      cast_p_loop([](T v) { return static_cast<T>(formats::quantize_e4m3_sat(static_cast<float>(v))); }, p, p8,
                  c.p_scale, n, n_live, fmax, st);
      break;
    case format::bf16:
      cast_p_loop([](T v) { return static_cast<T>(formats::quantize_bf16(static_cast<float>(v))); }, p, p8, c.p_scale,
                  n, n_live, fmax, st);
      break;
    case format::fp16:
      cast_p_loop([](T v) { return static_cast<T>(formats::quantize_fp16(static_cast<float>(v))); }, p, p8, c.p_scale,
                  n, n_live, fmax, st);
      break;
    default:
      cast_p_loop(
          [f](T v) {
            return static_cast<T>(quantize_value(f, static_cast<float>(v), formats::rounding::nearest_even));
          },
          p, p8, c.p_scale, n, n_live, fmax, st);
  }
}

// Returns std::max folded over v[0..n) from init, in order, bit for bit. std::max(a, b) is
// (a < b) ? b : a: the fold yields the largest non-NaN value (init when there is none), the first
// of equal ones. Equal values have equal bits except +0 and -0, so any grouping of the fold gives
// the same bits unless the result is a zero: then the plain loop decides. 16 lanes vectorise; the
// float case runs row_kernels.h's kernel where the active path has one.
template <typename T>
T fold_max(const T* v, int n, T init) {
  constexpr int kL = 16;
  auto seq = [&] {
    T m = init;
    for (int i = 0; i < n; ++i) m = std::max(m, v[i]);
    return m;
  };
  if (n < 2 * kL) return seq();
  if constexpr (std::is_same_v<T, float>)
    if (float m; rowk::fold_max(v, n, init, &m)) return m == 0 ? seq() : m;
  T acc[kL];
  int i = 0;
  std::fill(acc, acc + kL, init);
  for (; i + kL <= n; i += kL)
    for (int l = 0; l < kL; ++l) acc[l] = acc[l] < v[i + l] ? v[i + l] : acc[l];
  T m = init;
  for (int l = 0; l < kL; ++l) m = std::max(m, acc[l]);
  for (; i < n; ++i) m = std::max(m, v[i]);
  return m == 0 ? seq() : m;
}

// Steps 5a, 4 and 5b of a row once P is known (shared by both softmax paths).
template <typename T>
void finish_row(const head_ctx<T>& c, int r, int n, int live_cols, T alpha, const T* p, T* p8v, tile_buf<T>& b,
                run_stats& st, int n_same = -1) {
  // 5a. P cast. p[n_same, n) holds one value (a masked tail): cast once and copied (a cast is a
  // function of its argument: the same bits as casting each)
  const int n_cast = n_same < 0 ? n : std::min(n, n_same + 1);
  cast_p(c, p, p8v, n_cast, std::clamp(live_cols, 0, n_cast), st);
  if (n_cast < n) std::fill(p8v + n_cast, p8v + n, p8v[n_cast - 1]);
  // 4. row sum
  T* l = b.l.data() + static_cast<size_t>(r) * 4;
  if (block_rowsum_order(c.s.rowsum)) {
    block_rowsum(c, l, c.s.rowsum_from_cast ? p8v : p, n, alpha);
  } else {
    const T* ps = c.s.rowsum_from_cast ? p8v : p;
    const int k0 = rescale_rowsum(c, l, ps, n, alpha);
    if (!wgmma_rowsum_tile<T>(c)) add_rowsum(c, l, ps + k0, n - k0);  // else run_tile adds the rest
  }
  // 5b. O rescale (the PV add follows in pv_tile); the fused form O = fmaf(O, alpha, PV) of
  // Triton's enable_fp_fusion and of fma_contract_o is done in pv_tile
  b.alpha[r] = alpha;
  if (fused_o_rescale(c)) return;
  T* o = b.o.data() + static_cast<size_t>(r) * c.d;
  for (int k = 0; k < c.d; ++k) o[k] *= alpha;
}

// Steps 2-3 of the common case (FA3: fold scaling, raw-space max, mask on S), fused: x = S (the
// mask value on masked columns), no per-column eff (it is one value: make_ctx dequantises first
// when K scales vary), and P = exp2f(fmaf(x, eff, -max_scaled)) in one pass. Same operations as
// the general path, in the same order.
inline void fold_raw_row(const head_ctx<float>& c, int r, int n, int n_live, const double* sacc, float eff, float* x,
                         float* p, float* p8v, int live_cols, tile_buf<float>& b, run_stats& st) {
  if (!c.qk_to_x)  // else the QK already wrote the fp32 scores into x
    for (int jj = 0; jj < n_live; ++jj) x[jj] = static_cast<float>(sacc[jj]);
  // The masked columns [n_live, n) all hold the mask value mv, so they share one P: computed once
  // (the fold below is std::max applied in order, which is idempotent: the masked columns change
  // the live columns' fold as one max with mv does; the exp2f and the cast are functions of their
  // arguments). Same bits as the whole row through each step.
  const float mv = static_cast<float>(c.s.mask_value);
  float bmax = fold_max(x, n_live, -INFINITY);
  if (n_live < n) bmax = std::max(bmax, mv);
  float& m = b.m[r];
  const float m_new = std::max(m, bmax);
  const float m_cur = m_new == -INFINITY ? 0.0f : m_new;
  const float max_scaled = m_new == -INFINITY ? 0.0f : std::fmaf(m_new, eff, -c.offset);
  const float alpha = sfu_exp2(c, (m - m_cur) * eff);
  if (c.ex2) {  // the measured unit on the same arguments
    for (int jj = 0; jj < n_live; ++jj) p[jj] = c.ex2->ex2(std::fmaf(x[jj], eff, -max_scaled));
    if (n_live < n) p[n_live] = c.ex2->ex2(std::fmaf(mv, eff, -max_scaled));
  } else {
    fast::exp2f_fma_array(x, eff, -max_scaled, p, n_live);
    if (n_live < n) fast::exp2f_fma_array(&mv, eff, -max_scaled, p + n_live, 1);
  }
  if (n_live < n) std::fill(p + n_live + 1, p + n, p[n_live]);
  m = m_new;
  finish_row(c, r, n, live_cols, alpha, p, p8v, b, st, n_live);
}

// Steps 2-4 and the O rescale for row i (tile row r) on block [j0, j1).
template <typename T>
void softmax_row(const head_ctx<T>& c, int i, int r, int blk, int nbmax, int j0, int j1, tile_buf<T>& b,
                 run_stats& st) {
  const kernel_spec& s = c.s;
  const int n = j1 - j0, last = c.causal ? static_cast<int>(i + c.causal_off) : c.n_kv - 1;
  const int n_tail = s.masked_tail_blocks;  // whatever the causal flag (sm89 2, sm90 1)
  const size_t base = static_cast<size_t>(r) * b.bn;
  T* x = b.x.data() + base;
  T* effv = b.eff.data() + base;
  T* p = b.p.data() + base;
  T* p8v = b.p8.data() + base;
  const double* sacc = b.sacc.data() + base;
  // 2. scaling (Sage's masked tail blocks dequantise first, kernels.md 2a.8)
  const score_scaling sc =
      (blk >= nbmax - n_tail && s.scaling == score_scaling::fold) ? score_scaling::dequant : s.scaling;
  const T qs = static_cast<T>(c.qs[i]);
  const T log2e = std::is_same_v<T, double> ? static_cast<T>(std::numbers::log2e) : static_cast<T>(1.44269504f);
  // fold: eff = sl2*dq, or ((q_scale*k_scale)*sm_scale)*log2e left to right (FlashInfer)
  auto fold_eff = [&](T dq) { return s.fold_dq_first ? (dq * c.sm) * log2e : c.sl2 * dq; };
  // The masked columns are a suffix: [n_live, n). The switch is hoisted so each loop vectorises.
  const int n_live = std::clamp(last - j0 + 1, 0, n);
  const float* ks = c.ks + j0;
  auto scale_loop = [&](auto f) {
    for (int jj = 0; jj < n_live; ++jj) f(static_cast<T>(sacc[jj]), static_cast<T>(ks[jj]), x[jj], effv[jj]);
    for (int jj = n_live; jj < n; ++jj) {
      f(s.mask_on_x ? static_cast<T>(sacc[jj]) : static_cast<T>(s.mask_value), static_cast<T>(ks[jj]), x[jj], effv[jj]);
      if (s.mask_on_x) x[jj] = static_cast<T>(s.mask_value);
    }
  };
  if constexpr (std::is_same_v<T, float>) {
    if (sc == score_scaling::fold && s.max == max_space::raw && !s.mask_on_x) {
      fold_raw_row(c, r, n, n_live, sacc, fold_eff(qs * static_cast<T>(ks[0])), x, p, p8v, last - j0 + 1, b, st);
      return;
    }
  }
  switch (sc) {
    case score_scaling::fold:
      scale_loop([&](T S, T k, T& xv, T& eff) { xv = S, eff = fold_eff(qs * k); });
      break;
    case score_scaling::dequant:
      scale_loop([&](T S, T k, T& xv, T& eff) { xv = S * (qs * k), eff = c.sl2; });
      break;
    case score_scaling::dequant_sm:
      scale_loop([&](T S, T k, T& xv, T& eff) { xv = S * ((qs * k) * c.sm), eff = log2e; });
      break;
    // Sage v1: qk = tl.dot(q, k).to(tl.float32) * (q_scale * k_scale)
    // (SageAttention@d1a57a5 sageattention/triton/attn_qk_int8_per_block.py:45, _causal.py:41); the
    // mask add that follows (`qk += tl.where(mask, 0, -inf)`, :53 / _causal.py:46) fuses into
    // fmaf(S, dq, 0), which rounds as S * dq does.
    default:
      scale_loop([&](T S, T k, T& xv, T& eff) { xv = S * (qs * k), eff = T(1); });
      break;
  }
  // the max over the block, in raw or scaled space (p holds the candidates until step 3 refills it)
  const T* cand = x;
  if (s.max != max_space::raw) {
    for (int jj = 0; jj < n; ++jj) p[jj] = fma_t(x[jj], effv[jj], -c.offset);
    cand = p;
  }
  const T bmax = fold_max(cand, n, T(-INFINITY));
  // 3. max, alpha, P
  T& m = b.m[r];
  const T m_new = std::max(m, bmax);
  T alpha;
  if (s.max == max_space::raw) {  // FA3 softmax.h:67-120 with Check_inf
    const T eff = effv[0];
    const T m_cur = m_new == -INFINITY ? T(0) : m_new;
    const T max_scaled = m_new == -INFINITY ? T(0) : fma_t(m_new, eff, -c.offset);
    // XQA rescaleGemm1AccForNewColMax_sync: scaleVec = expf(accColMax - xColMax) on the maxima of
    // the qkScale-scaled scores (TensorRT-LLM@014dadcd cpp/kernels/xqa/mha_sm90.cu, "auto const
    // scaleVec = expf(accColMax - xColMax)")
    if (s.alpha_expf)
      alpha = m_new == -INFINITY ? T(1) : std::exp(m - m_new);
    else
      alpha = sfu_exp2(c, (m - m_cur) * eff);
    for (int jj = 0; jj < n; ++jj) p[jj] = fma_t(x[jj], eff, -max_scaled);
  } else {  // Sage update_mdo / hpc-ops online_softmax
    const T m_sub = m_new == -INFINITY ? T(0) : m_new;
    alpha = m_new == -INFINITY ? T(1) : sfu_exp2(c, m - m_new);
    for (int jj = 0; jj < n; ++jj) p[jj] = fma_t(x[jj], effv[jj], -m_sub);
  }
  sfu_exp2_inplace(c, p, n);  // P = exp2(argument), the whole block at once
  m = m_new;
  finish_row(c, r, n, last - j0 + 1, alpha, p, p8v, b, st);
}

// Epilogue of row i (tile row r) (kernels.md 1.14, 2a.13, 3.7, 4.4, 5.6).
template <typename T, typename OutT>
void epilogue_row(const head_ctx<T>& c, int i, int r, bool live, tile_buf<T>& b, OutT* out) {
  const kernel_spec& s = c.s;
  const int d = c.d;
  const T lt = live ? final_rowsum(c, b.l.data() + static_cast<size_t>(r) * 4) : T(0);
  const bool bad = !(lt > 0);
  const T inv = bad ? T(0) : sfu_rcp(c, lt);
  const T* ob = b.o.data() + static_cast<size_t>(r) * d;
  const T* vsc = c.vs.data();
  OutT* dst = out + static_cast<size_t>(i) * d;
  // the mode's switch hoisted out of the loop so that each case vectorises (it was a branch per
  // output, 3% of fa3)
  auto scale = [&](auto f) {
    for (int k = 0; k < d; ++k) {
      const T o = f(ob[k], vsc[k]);
      dst[k] = std::is_same_v<OutT, double> ? static_cast<OutT>(o) : static_cast<OutT>(static_cast<float>(o));
    }
  };
  switch (s.epilogue) {
    case epilogue_mode::combined:
      scale([&](T o, T vs) { return o * (inv * vs); });
      break;
    case epilogue_mode::separate:
      scale([&](T o, T vs) { return (o * inv) * vs; });
      break;
    case epilogue_mode::div_first:
      scale([&](T o, T vs) { return o * (bad ? T(0) : sfu_div(c, vs, lt)); });
      break;
    case epilogue_mode::divide:
      scale([&](T o, T vs) { return (bad ? T(0) : sfu_div(c, o, lt)) * vs; });
      break;
  }
  // output cast, the format's switch hoisted out of the loop so the common cases vectorise
  OutT* orow = out + static_cast<size_t>(i) * d;
  auto cast = [&](auto q) {
    for (int k = 0; k < d; ++k) orow[k] = static_cast<OutT>(q(static_cast<float>(orow[k])));
  };
  switch (s.out_fmt) {
    case formats::format::fp32:
      break;
    case formats::format::bf16:
      cast(formats::quantize_bf16);
      break;
    case formats::format::fp16:
      cast(formats::quantize_fp16);
      break;
    default:
      cast([&](float v) { return quantize_value(s.out_fmt, v, formats::rounding::nearest_even); });
  }
}

// Rows [r0, r1) lie in one CTA (kTileRows divides block_m), so they visit the same blocks.
template <typename T, typename OutT>
void run_tile(const head_ctx<T>& c, int r0, int r1, OutT* out, tile_buf<T>& b, run_stats& st) {
  const kernel_spec& s = c.s;
  const int rows = r1 - r0;
  const int nbt = (c.n_kv + c.bn - 1) / c.bn;
  int nbmax = nbt;
  if (c.causal) {  // FA3 block.h:23-33 / Sage N = ceil(min(kv, (bx+1)*CTA_Q)/CTA_K)
    const long lim = static_cast<long>(r0 / c.bm + 1) * c.bm + c.causal_off;
    nbmax = static_cast<int>(std::clamp<long>((lim + c.bn - 1) / c.bn, 0, nbt));
  }
  std::vector<char> live(rows);
  for (int r = 0; r < rows; ++r) live[r] = (c.causal ? r0 + r + c.causal_off : c.n_kv - 1) >= 0;
  std::fill(b.o.begin(), b.o.begin() + static_cast<size_t>(rows) * c.d, T(0));
  std::fill(b.l.begin(), b.l.end(), T(0));
  const bool finite_mask = std::isfinite(s.mask_value);
  std::fill(b.m.begin(), b.m.end(),
            (s.max == max_space::scaled && finite_mask) ? static_cast<T>(s.mask_value) : T(-INFINITY));
  for (int step = 0; step < nbmax; ++step) {
    const int blk = s.reverse ? nbmax - 1 - step : step;
    const int j0 = blk * c.bn, j1 = std::min(c.n_kv, j0 + c.bn);
    const int jc =
        c.causal ? static_cast<int>(std::clamp<long>(r1 + c.causal_off, j0, j1)) : j1;  // 1 + last key of row r1-1
    qk_tile(c, r0, r1, j0, j1, jc, b);
    for (int r = 0; r < rows; ++r)
      if (live[r]) softmax_row(c, r0 + r, r, blk, nbmax, j0, j1, b, st);
    if (wgmma_rowsum_tile(c)) {
      // the columns rescale_rowsum added (the first group of 8 under fma_contract) are skipped
      const int k0 = rescale_rowsum_columns(c, j1 - j0);
      wgmma_rowsum_rows(b.l.data(), (s.rowsum_from_cast ? b.p8 : b.p).data() + k0, b.bn, rows, live, j1 - j0 - k0);
    }
    pv_tile(c, rows, j0, j1, live, b);
  }
  for (int r = 0; r < rows; ++r) epilogue_row(c, r0 + r, r, live[r], b, out);
}

// Heads [h0, h1) (run_head: one head) with their row tiles shared by the threads: a batch of
// heads, one per thread of a team, is set up together (each thread builds one head's context,
// whose planes live in that thread's thread-local buffers, as with run_head in a loop over
// heads), then every thread takes its own head's tiles and, when they run out, the others'
// (take_home_first). Heads in parallel leave a thread idle when its head ends first (fewer heads
// than threads, or a slower core); sharing does not. Each tile's bits and the integer counts do
// not depend on which thread runs a tile, nor in which order.
//
// The contexts are built and read in one parallel region: a context points into the
// thread-local buffers of the thread that built it, and a team's threads are not guaranteed to
// outlive their region (inside an enclosing parallel region, even an inactive one, libgomp
// starts a nested team's threads afresh and ends them with the region, freeing their
// thread-local storage).
template <typename T, typename OutT>
void run_heads_t(const prepared_layer& L, int h0, int h1, bool causal, OutT* o, run_stats* stats) {
  const int n_threads = omp_in_parallel() ? 1 : threads();
  const size_t per = static_cast<size_t>(L.n_q) * L.d_head;
  for (int b0 = h0; b0 < h1;) {
    int nb = std::min(h1 - b0, n_threads);
    std::vector<head_ctx<T>> ctx;
    std::vector<run_stats> total;
    std::vector<std::atomic<int>> next;  // each head's tiles handed out, last (causal: largest) first
    int tile = 0, n_tiles = 0;
    worker_errors errors;  // an error in a worker thread reaches the caller
#pragma omp parallel num_threads(n_threads)
    {
      // A team smaller than asked (OMP_DYNAMIC) makes the batch smaller.
#pragma omp single
      {
        nb = std::min(nb, omp_get_num_threads());
        ctx.resize(nb);
        next = std::vector<std::atomic<int>>(nb);
      }
      const int t = omp_get_thread_num();
      // context i on thread i only: two contexts built on one thread would share its buffers
      if (t < nb) errors.run([&] { ctx[t] = make_ctx<T>(L, b0 + t, causal); });
#pragma omp barrier
#pragma omp single
      errors.run([&] {
        tile = std::gcd(ctx[0].bm, kTileRows);  // tiles never straddle a CTA (bm: the spec's)
        n_tiles = (L.n_q + tile - 1) / tile;
        total.resize(nb);
        for (int i = 0; i < nb; ++i) {
          total[i].nan_flagged = ctx[i].v_nan || L.q8.nan_flagged || L.k8.nan_flagged;
          total[i].qk = ctx[i].qk.kind(), total[i].pv = ctx[i].pv.kind();
        }
        for (auto& x : next) x.store(0);
      });
      // scratch reused across heads on this thread (fresh pages cost more than the work here)
      static thread_local std::unique_ptr<tile_buf<T>> cached;
      errors.run([&] {
        if (!cached || cached->bn != ctx[0].bn || cached->d != ctx[0].d)
          cached = std::make_unique<tile_buf<T>>(ctx[0].bn, ctx[0].d);
      });
      std::vector<run_stats> st(nb);
      take_home_first(next, n_tiles, t, [&](int i, int j) {  // (no tiles when a context failed)
        errors.run([&] {
          const int tt = n_tiles - 1 - j;
          run_tile(ctx[i], tt * tile, std::min(L.n_q, (tt + 1) * tile), o + per * (b0 - h0 + i), *cached, st[i]);
        });
      });
#pragma omp critical
      if (!total.empty())
        for (int i = 0; i < nb; ++i) {  // integer counts: the sum does not depend on the order
          total[i].p_count += st[i].p_count;
          total[i].p_underflow += st[i].p_underflow;
          total[i].p_saturated += st[i].p_saturated;
        }
    }  // the contexts' buffers stay alive up to here: every thread has finished its tiles
    errors.rethrow();
    if (stats) std::copy(total.begin(), total.end(), stats + (b0 - h0));
    b0 += nb;
  }
}

template <typename OutT>
void run_head_any(const prepared_layer& L, int h, bool causal, OutT* o, run_stats* stats) {
  if (h < 0 || h >= L.n_head) fail("run_head: head {} out of range [0, {})", h, L.n_head);
  if (L.spec.arith_fp64)
    run_heads_t<double>(L, h, h + 1, causal, o, stats);
  else
    run_heads_t<float>(L, h, h + 1, causal, o, stats);
}

template <typename OutT>
std::vector<OutT> run_layer_any(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal,
                                const transform_options& opts) {
  const auto p = prepare_layer(spec, layer, cond, opts);
  std::vector<OutT> o(static_cast<size_t>(layer.n_head) * layer.n_q * layer.d_head);
  for (int h = 0; h < layer.n_head; ++h)
    run_head_any(*p, h, causal, o.data() + static_cast<size_t>(h) * layer.n_q * layer.d_head, nullptr);
  return o;
}

}  // namespace

void run_head(const prepared_layer& L, int h, bool causal, float* o, run_stats* stats) {
  run_head_any(L, h, causal, o, stats);
}
void run_head(const prepared_layer& L, int h, bool causal, double* o, run_stats* stats) {
  run_head_any(L, h, causal, o, stats);
}

void run_heads(const prepared_layer& L, int h0, int h1, bool causal, float* o, run_stats* stats) {
  if (h0 < 0 || h1 > L.n_head || h0 > h1) fail("run_heads: heads [{}, {}) out of range [0, {})", h0, h1, L.n_head);
  if (L.spec.arith_fp64)
    run_heads_t<double>(L, h0, h1, causal, o, stats);
  else
    run_heads_t<float>(L, h0, h1, causal, o, stats);
}

std::vector<float> run_layer(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal,
                             const transform_options& opts) {
  return run_layer_any<float>(spec, layer, cond, causal, opts);
}
std::vector<double> run_layer_f64(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal,
                                  const transform_options& opts) {
  return run_layer_any<double>(spec, layer, cond, causal, opts);
}

}  // namespace attnum::attention
