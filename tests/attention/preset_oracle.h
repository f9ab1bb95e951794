#pragma once
// Plain-loop implementations of each preset, sharing nothing with the engine but the format casts
// of formats/format.h. The Sage v1, XQA and hpc-ops oracles, and the FMA contractions of the FA3
// family and Sage2, quote the upstream lines they follow (repo@commit path:line); the other steps
// cite docs/kernels.md's section.step, whose table gives the upstream line. Each returns O [n_q, d] of query head h.
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "attention/test_util.h"
#include "attnum/formats/format.h"

namespace attnum::attention::oracle {

using formats::quantize_bf16;
using formats::quantize_e4m3_sat;

/// When true the oracles skip the final bf16 cast (compared with the engine's o_cast off): the
/// fp32 output exposes 1-ulp differences (row-sum order, epilogue order) that bf16 hides.
inline bool g_out_fp32 = false;
inline float out_cast(float o) { return g_out_fp32 ? o : quantize_bf16(o); }

// ---- accumulator models (kernels.md 0): exact chunk sum, one rounding ----
inline double rz_bits(double x, int frac) {  // round toward zero to `frac` fraction bits
  if (x == 0) return 0;
  int e;
  std::frexp(x, &e);  // x = f 2^e, f in [0.5, 1): 1 + frac significant bits
  return std::ldexp(std::trunc(std::ldexp(x, frac + 1 - e)), e - frac - 1);
}
inline double to_fp16(double x) {  // RNE to binary16 (normal and subnormal), never overflows here
  if (x == 0) return 0;
  int e;
  std::frexp(x, &e);
  const int q = std::max(e - 11, -24);  // quantum 2^(e-1-10), subnormal quantum 2^-24
  return std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
}
enum class acc { fp32, rz13, fp16 };
inline double acc_round(acc a, double x) {
  switch (a) {
    case acc::fp32:
      return static_cast<float>(x);
    case acc::rz13:
      return static_cast<float>(rz_bits(x, 13));
    case acc::fp16:
      return to_fp16(x);
  }
  return x;
}

struct head_ops {  // one head's operands as fp32
  int n_q, n_kv, d;
  std::vector<float> q, k, v;  // [n_q, d], [n_kv, d], [n_kv, d]
};

inline head_ops head_of(const test::layer_data& L, int h) {
  const auto& lv = L.view;
  const int g = h / (lv.n_head / lv.n_head_kv), d = lv.d_head;
  head_ops o{lv.n_q, lv.n_kv, d, {}, {}, {}};
  o.q.assign(L.q.begin() + size_t(h) * lv.n_q * d, L.q.begin() + size_t(h + 1) * lv.n_q * d);
  o.k.assign(L.k.begin() + size_t(g) * lv.n_kv * d, L.k.begin() + size_t(g + 1) * lv.n_kv * d);
  o.v.assign(L.v.begin() + size_t(g) * lv.n_kv * d, L.v.begin() + size_t(g + 1) * lv.n_kv * d);
  return o;
}

inline float amax_of(const float* x, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Blocks a query row's CTA visits (FA3 block.h:23-33; Sage N = ceil(min(kv,(bx+1)CTA_Q)/CTA_K)).
inline int n_blocks_for(int i, int n_q, int n_kv, int bm, int bn, bool causal) {
  const int all = (n_kv + bn - 1) / bn;
  if (!causal) return all;
  const int lim = (i / bm + 1) * bm + n_kv - n_q;
  return std::max(0, std::min(all, (lim + bn - 1) / bn));
}

// Exact sum of P8_j * V_jc over j in [c0, c1) (fp8 products: exact in double).
inline double pv_chunk(const std::vector<float>& p8, int j0, int c0, int c1, const std::vector<float>& v, int d,
                       int c) {
  double s = 0;
  for (int j = c0; j < c1; ++j) s += double(p8[j - j0]) * double(v[size_t(j) * d + c]);
  return s;
}

// Q_i . K_j for a fresh accumulator: exact sums of `step` consecutive products (the mma's K: 32 for
// FP8 and INT8, 16 for BF16), each added into the accumulator and rounded once under `model`
// (kernels.md 1.5; Sage's mma and hpc-ops do the same).
inline double qk_chunks(const head_ops& H, int i, int j, acc model, int step = 32) {
  const int d = H.d;
  double a = 0;
  for (int k0 = 0; k0 < d; k0 += step) {
    double ch = 0;
    for (int k = k0; k < k0 + step && k < d; ++k) ch += double(H.q[size_t(i) * d + k]) * H.k[size_t(j) * d + k];
    a = acc_round(model, a + ch);
  }
  return a;
}

// ---- 1. FlashAttention-3 family: raw max, Check_inf, reverse order, PV into O (pipelined) ----
// Also FlashInfer (3.x: P*448 multiply, rescale before PV) and native bf16 (no offset).
struct fa3_like {
  bool acc13 = false;
  enum { fa3, flashinfer, bf16 } kind = fa3;
  bool fma = true;  // nvcc's contraction of the row-sum rescale with the first add (fma_contract)
};

inline std::vector<float> run_fa3_like(const test::layer_data& L, int h, bool causal, fa3_like cfg) {
  const auto& lv = L.view;
  head_ops H = head_of(L, h);
  const int d = H.d, g = h / (lv.n_head / lv.n_head_kv), gs = lv.n_head / lv.n_head_kv;
  float qd = 1, kd = 1, vd = 1;
  if (cfg.kind == fa3_like::bf16) {
    for (auto* x : {&H.q, &H.k, &H.v})
      for (float& e : *x) e = quantize_bf16(e);
  } else {
    // FA3: q_descale per (b, h_k) over the group's query heads (1.1); FlashInfer: per qo head (3.1).
    float qa = 0;
    const int h0 = cfg.kind == fa3_like::fa3 ? g * gs : h, h1 = cfg.kind == fa3_like::fa3 ? (g + 1) * gs : h + 1;
    for (int hh = h0; hh < h1; ++hh)
      qa = std::max(qa, amax_of(L.q.data() + size_t(hh) * lv.n_q * d, size_t(lv.n_q) * d));
    qd = qa / 448.0f, kd = amax_of(H.k.data(), H.k.size()) / 448.0f, vd = amax_of(H.v.data(), H.v.size()) / 448.0f;
    if (qd == 0) qd = 1;
    if (kd == 0) kd = 1;
    if (vd == 0) vd = 1;
    for (float& e : H.q) e = quantize_e4m3_sat(e / qd);
    for (float& e : H.k) e = quantize_e4m3_sat(e / kd);
    for (float& e : H.v) e = quantize_e4m3_sat(e / vd);
  }
  int bm = 128, bn = 128;
  if (cfg.kind == fa3_like::fa3) {  // 1.3
    if (d <= 64)
      bm = 192, bn = 160;
    else if (d <= 96)
      bm = 192, bn = 128;
    else if (d <= 128)
      bm = 128, bn = 224;
  } else if (cfg.kind == fa3_like::flashinfer) {  // 3.2
    if (d <= 64)
      bm = 192, bn = 128;
    else if (d <= 128)
      bm = 128, bn = 192;
  } else {  // FA3 bf16: flash-attention@07602adc hopper/tile_size.h tile_size_fwd_sm90, element_size 2
    if (d <= 64)
      bm = 192, bn = causal ? 128 : 192;  // `return {192, is_causal ? 128 : ... 192, ...}`
    else if (d <= 96)
      bm = 192, bn = 144;
    else if (d <= 128)
      bm = 128, bn = causal ? 128 : 176;  // `{128, is_causal || ... ? 128 : 176, ...}`
    else if (d <= 192)
      bm = 128, bn = 112;
    else
      bm = 128, bn = 80;
  }
  const acc model = cfg.acc13 ? acc::rz13 : acc::fp32;
  // wgmma's K: 32 for E4M3 operands, 16 for BF16 (cute SM90_64xNx16_F32BF16BF16)
  const int ks = cfg.kind == fa3_like::bf16 ? 16 : 32;
  const float sm = float(1.0 / std::sqrt(double(d)));
  float sl2;
  if (cfg.kind == fa3_like::fa3) sl2 = float(double(sm) * std::numbers::log2e) * (qd * kd);  // 1.2
  // FlashInfer hopper/variants.cuh StandardFP8Attention: q_scale * k_scale * sm_scale * log2e,
  // evaluated left to right in float.
  else if (cfg.kind == fa3_like::flashinfer)
    sl2 = ((qd * kd) * sm) * 1.44269504f;
  else
    sl2 = float(double(sm) * std::numbers::log2e);
  const float off = cfg.kind == fa3_like::fa3 ? 8.0f : 0.0f;            // 1.8 Max_offset
  const float pmul = cfg.kind == fa3_like::flashinfer ? 448.0f : 1.0f;  // 3.5
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int nb = n_blocks_for(i, H.n_q, H.n_kv, bm, bn, causal);
    float m = -INFINITY, lt[4] = {0, 0, 0, 0};
    std::vector<float> O(d, 0.0f), p8_prev;
    int prev_j0 = -1, prev_j1 = -1;
    auto gemm_pv = [&](const std::vector<float>& p8, int j0, int j1) {  // O += P8 V, K-steps of ks (1.12)
      for (int c0 = j0; c0 < j1; c0 += ks)
        for (int c = 0; c < d; ++c)
          O[c] = float(acc_round(model, double(O[c]) + pv_chunk(p8, j0, c0, std::min(j1, c0 + ks), H.v, d, c)));
    };
    for (int n = nb - 1; n >= 0 && last >= 0; --n) {  // 1.4 reverse
      const int j0 = n * bn, j1 = std::min(H.n_kv, j0 + bn);
      std::vector<float> S(j1 - j0);
      for (int j = j0; j < j1; ++j) {  // 1.5 fresh accumulator, chunks of ks over d
        const double a = qk_chunks(H, i, j, model, ks);
        S[j - j0] = j > last ? -INFINITY : float(a);  // 1.6
      }
      float mx = m;
      for (float s : S) mx = std::max(mx, s);  // 1.7 raw max
      const float cur = mx == -INFINITY ? 0.0f : mx;
      const float alpha = std::exp2f((m - cur) * sl2);  // 1.9
      const float max_scaled = mx == -INFINITY ? 0.0f : std::fmaf(mx, sl2, -off);
      m = mx;
      std::vector<float> P(S.size()), P8(S.size());
      for (size_t j = 0; j < S.size(); ++j) {
        P[j] = std::exp2f(std::fmaf(S[j], sl2, -max_scaled));  // 1.8
        P8[j] = cfg.kind == fa3_like::bf16 ? quantize_bf16(P[j]) : quantize_e4m3_sat(P[j] * pmul);
      }
      // 1.10 thread t holds columns 2t, 2t+1, 2t+8, 2t+9, ... Dao-AILab/flash-attention@0251105a
      // hopper/softmax.h:120 `row_sum(mi) *= scores_scale(mi);` then :134 reduce_sum with
      // zero_init=false, hopper/utils.h:30 `summary(mi) = op(summary(mi), tensor(mi, ni))` in column
      // order (FlashInfer@fb28d72 include/flashinfer/attention/hopper/attention_updater.cuh:210,
      // then :64 and :67 the same). Built with --use_fast_math and no --fmad=false, nvcc contracts the
      // multiply with the thread's first add into one fma (cfg.fma; PTX of the pattern, kernels.md).
      for (int t = 0; t < 4; ++t) {
        bool first = true;
        if (!cfg.fma) lt[t] *= alpha;
        for (size_t g = 0; 8 * g + 2 * t < S.size(); ++g)
          for (size_t e = 0; e < 2 && 8 * g + 2 * t + e < S.size(); ++e) {
            const float pj = P[8 * g + 2 * t + e];
            lt[t] = cfg.fma && first ? std::fmaf(lt[t], alpha, pj) : lt[t] + pj;
            first = false;
          }
        if (cfg.fma && first) lt[t] *= alpha;  // no column: the rescale alone
      }
      // 1.12 pipelined: O += P8_prev V_prev, then O *= alpha_n (FlashInfer: rescale first, 3.6;
      // the same sequence of operations)
      if (prev_j0 >= 0) gemm_pv(p8_prev, prev_j0, prev_j1);
      for (float& o : O) o *= alpha;
      p8_prev = P8, prev_j0 = j0, prev_j1 = j1;
    }
    if (prev_j0 >= 0) gemm_pv(p8_prev, prev_j0, prev_j1);
    const float l = (lt[0] + lt[2]) + (lt[1] + lt[3]);  // 1.14 quad reduce xor 2, xor 1
    for (int c = 0; c < d; ++c) {
      float o = O[c];
      if (cfg.kind == fa3_like::flashinfer) {
        const float scale_pv = vd / 448.0f;  // 3.1
        o *= l > 0 ? scale_pv / l : 0.0f;    // 3.7
      } else {
        const float inv = (l == 0 || l != l) ? 0.0f : 1.0f / l;
        o *= inv * vd;
      }
      out[size_t(i) * d + c] = out_cast(o);
    }
  }
  return out;
}

// ---- 2. SageAttention2 (2a, 2b): INT8 per-thread QK, smooth_k, per-channel FP8 V ----
struct sage_cfg {
  int warp_q = 32, blk_k = 64, cta_q = 128, cta_k = 64;
  float v_max = 2.25f;
  bool fp16_pv = true;  // sm89 fp32+fp16; else fp32 (or rz13) fresh per block
  bool acc13 = false;
  // KV blocks at the end of the row's range that dequantise first (x = S*dq, eff = sl2), causal or
  // not: sm89 qk_int_sv_f8_cuda_sm89.cuh runs iter 1..N-2 folded, then a "second last iter" and a
  // last iter (2); sm90 qk_int_sv_f8_cuda_sm90.cuh only peels the last iteration (1).
  int tail_blocks = 2;
  bool fma = true;    // nvcc's contraction of `d *= o_scale` with the first tile's add (fma_contract)
  bool fma_o = true;  // and of `RO *= o_scale` with `RO += RO_temp` (fma_contract_o)
};

inline float sage_int8(float x, float scale) {  // x/scale + 0.5 sign, truncate (2a.3)
  float y = std::trunc(x / scale + (x >= 0 ? 0.5f : -0.5f));
  return std::max(-128.0f, std::min(127.0f, y));
}

inline std::vector<float> run_sage2(const test::layer_data& L, int h, bool causal, sage_cfg cfg, bool* nan_flag) {
  head_ops H = head_of(L, h);
  const int d = H.d, nq = H.n_q, nk = H.n_kv;
  // 2a.2 smooth_k: k - mean over tokens, rounded to bf16 (the captures' dtype)
  for (int c = 0; c < d; ++c) {
    double s = 0;
    for (int t = 0; t < nk; ++t) s += H.k[size_t(t) * d + c];
    const float km = quantize_bf16(float(s / nk));
    for (int t = 0; t < nk; ++t) H.k[size_t(t) * d + c] = quantize_bf16(H.k[size_t(t) * d + c] - km);
  }
  // 2a.3 Q groups: rows {r, r+8, ...} of each warp_q-row segment; 2a.4 K: row mod 8 in {2t, 2t+1}
  // of each blk_k-row block.
  auto quant_groups = [&](std::vector<float>& x, int n, int seg, bool pairs, std::vector<float>& scale) {
    scale.assign(n, 0.0f);
    for (int s0 = 0; s0 < n; s0 += seg)
      for (int grp = 0; grp < (pairs ? 4 : 8); ++grp) {
        float a = 0;
        for (int t = s0; t < std::min(n, s0 + seg); ++t)
          if ((pairs ? (t % 8) / 2 : t % 8) == grp) a = std::max(a, amax_of(x.data() + size_t(t) * d, d));
        const float sc = a / 127.0f + 1e-7f;
        for (int t = s0; t < std::min(n, s0 + seg); ++t)
          if ((pairs ? (t % 8) / 2 : t % 8) == grp) {
            scale[t] = sc;
            for (int c = 0; c < d; ++c) x[size_t(t) * d + c] = sage_int8(x[size_t(t) * d + c], sc);
          }
      }
  };
  std::vector<float> qs, ks, vs(d);
  quant_groups(H.q, nq, cfg.warp_q, false, qs);
  quant_groups(H.k, nk, cfg.blk_k, true, ks);
  *nan_flag = false;
  for (int c = 0; c < d; ++c) {  // 2a.5 per channel, no eps
    float a = 0;
    for (int t = 0; t < nk; ++t) a = std::max(a, std::fabs(H.v[size_t(t) * d + c]));
    vs[c] = a / cfg.v_max;
    const float mul = cfg.v_max / a;
    if (a == 0) *nan_flag = true;
    for (int t = 0; t < nk; ++t) H.v[size_t(t) * d + c] = quantize_e4m3_sat(H.v[size_t(t) * d + c] * mul);
  }
  const float sm = float(1.0 / std::sqrt(double(d)));
  const float sl2 = sm * 1.44269504f;  // 2a.8
  const acc model = cfg.fp16_pv ? acc::fp16 : (cfg.acc13 ? acc::rz13 : acc::fp32);
  std::vector<float> out(size_t(nq) * d);
  for (int i = 0; i < nq; ++i) {
    // top-left causal mask: `kv_idx > q_idx` masked (SageAttention@d1a57a5 csrc/qattn/
    // attn_utils.cuh:308-310), num_iterations = div_ceil(min(kv_len, (bx + 1) * CTA_Q), CTA_K)
    // (qk_int_sv_f8_cuda_sm89.cuh:222-226)
    const int last = causal ? i : nk - 1;
    const int N = ((causal ? std::min(nk, (i / cfg.cta_q + 1) * cfg.cta_q) : nk) + cfg.cta_k - 1) / cfg.cta_k;
    float m = -5e6f, dl[4] = {1, 1, 1, 1};  // 2a.9 initial values
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N; ++b) {  // 2a.6 forward
      const bool masked_block = b >= N - cfg.tail_blocks;
      const int j0 = b * cfg.cta_k, j1 = std::min(nk, j0 + cfg.cta_k), n = j1 - j0;
      std::vector<float> x(n), eff(n);
      float mt = -INFINITY;
      for (int j = j0; j < j1; ++j) {
        long long S = 0;  // 2a.7 exact
        for (int c = 0; c < d; ++c) S += (long long)H.q[size_t(i) * d + c] * (long long)H.k[size_t(j) * d + c];
        const float Sf = float(S), dq = qs[i] * ks[j];
        if (masked_block)
          x[j - j0] = j > last ? -5e6f : Sf * dq, eff[j - j0] = sl2;  // 2a.8
        else
          x[j - j0] = Sf, eff[j - j0] = sl2 * dq;
        mt = std::max(mt, std::fmaf(x[j - j0], eff[j - j0], -8.807f));  // 2a.9
      }
      const float mn = std::max(m, mt);
      const float alpha = std::exp2f(m - mn);
      m = mn;
      // SageAttention@d1a57a5 csrc/qattn/attn_utils.cuh:400 `d[fq][k] *= o_scale;` and :414 `RO[fq][fv]
      // [k * 2 + 0] *= o_scale;` (update_mdo); the adds below follow them. setup.py:57 builds with
      // --use_fast_math and no --fmad=false: nvcc contracts each multiply with the add that consumes
      // it (PTX of the pattern, kernels.md), so they are applied there when cfg.fma / cfg.fma_o.
      if (!cfg.fma)
        for (float& e : dl) e *= alpha;
      if (!cfg.fma_o)
        for (float& o : O) o *= alpha;
      std::vector<float> P(cfg.cta_k, 0.0f), P8(n);
      for (int jj = 0; jj < n; ++jj) {
        P[jj] = std::exp2f(std::fmaf(x[jj], eff[jj], -m));
        P8[jj] = quantize_e4m3_sat(P[jj]);  // 2a.11
      }
      // 2a.10 qk_int_sv_f8_cuda_sm90.cu:317 / attn_utils.cuh:551 `d[fq][0] += (RS[fq][fk][0] +
      // RS[fq][fk][1] + RS[fq][fk][4] + RS[fq][fk][5]);` per 16-column tile fk; the fk = 0 add is
      // the one fused with `d *= o_scale`
      for (int f = 0; f < cfg.cta_k / 16; ++f)
        for (int t = 0; t < 4; ++t) {
          const int b0 = 16 * f + 2 * t;
          const float s4 = P[b0] + P[b0 + 1] + P[b0 + 8] + P[b0 + 9];
          dl[t] = cfg.fma && f == 0 ? std::fmaf(dl[t], alpha, s4) : dl[t] + s4;
        }
      // 2a.12 fresh accumulator per block, K=32 steps, then sm90.cu:353 `RO[fq][fv][k] +=
      // RO_temp[fq][fv][k];` (sm89 fp16 tile: attn_utils.cuh:970 `RO[i][j][k * 2 + 0] +=
      // RO_tmp_float[0];`), fused with the rescale when cfg.fma_o
      for (int c = 0; c < d; ++c) {
        double a = 0;
        for (int c0 = j0; c0 < j1; c0 += 32)
          a = acc_round(model, a + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
        O[c] = cfg.fma_o ? std::fmaf(O[c], alpha, float(a)) : O[c] + float(a);
      }
    }
    const float D = (dl[0] + dl[1]) + (dl[2] + dl[3]);  // 2a.13
    for (int c = 0; c < d; ++c) {
      float o = O[c];
      o *= (D > 0 ? 1.0f / D : 0.0f);
      o *= vs[c];
      out[size_t(i) * d + c] = last >= 0 ? out_cast(o) : 0.0f;
    }
  }
  return out;
}

// ---- 4. XQA sm90 (NVIDIA/TensorRT-LLM@014dadcdfc44 cpp/kernels/xqa/mha_sm90.cu, SWAP_AB path) ----
// Q: F16QToF8Converter::store `CacheElem{fp16Data[i]}`: bf16 Q straight to E4M3 (satfinite), no
//    scale. K, V: one kvCacheScale (modelled as amax(K, V) / 448).
// `float const qkScale = qScale * kvCacheScale[0] * rsqrtf(validElemsPerHead)` (qScale 1; rsqrtf
//    modelled as the correctly rounded 1/sqrt(d)); `acc = acc * qkScale`.
// computeWarpGrpColMax_sync: running max over tiles (gemm0CurrentSeqMax, raw scaled scores).
// warpGrpOnlineSoftmax: `bias = maxVal * log2e; elem = exp2f(elem * log2e - bias)` (fmaf).
// computeWarpColSum: per thread rows 8i + quad of its warp's 16 tokens, then `x +=
//    __shfl_xor_sync(~0U, x, xorMask)` for 16, 8, 4.
// rescaleGemm1AccForNewColMax_sync: `scaleVec = expf(accColMax - xColMax)`, `acc(m, n)(i, j) *=
//    scale`, `accColSum = accColSum * scaleVec`, then `accColSum + xColSum[i]` for i = 0..3.
// `acc = acc * kE4M3_MAX` before the E4M3 cast; PV into the O accumulator (K = 32 per gmma).
// finalizeAndWriteOut_sync: `regOutScale = __frcp_rn(regColSum) * xvoScale; rescaleAcc(acc,
//    regOutScale)`, xvoScale = xScale * kvCacheScale[0] * oScale, xScale = 1.f / kE4M3_MAX.
inline std::vector<float> run_xqa(const test::layer_data& L, int h, bool causal) {
  head_ops H = head_of(L, h);
  const int d = H.d;
  float kvsc = std::max(amax_of(L.k.data(), L.k.size()), amax_of(L.v.data(), L.v.size())) / 448.0f;
  if (kvsc == 0) kvsc = 1;
  for (float& e : H.q) e = quantize_e4m3_sat(e);
  for (float& e : H.k) e = quantize_e4m3_sat(e / kvsc);
  for (float& e : H.v) e = quantize_e4m3_sat(e / kvsc);
  const float qk_scale = (1.0f * kvsc) * float(1.0 / std::sqrt(double(d)));
  const float log2e = 1.44269504f;
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int N = n_blocks_for(i, H.n_q, H.n_kv, 64, 64, causal);
    float m = -INFINITY, l = 0;
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N && last >= 0; ++b) {
      const int j0 = b * 64, j1 = std::min(H.n_kv, j0 + 64);
      std::vector<float> x(64, -INFINITY);  // tokens past n_kv: masked
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        const double a = qk_chunks(H, i, j, acc::fp32);
        x[j - j0] = j > last ? -INFINITY : float(a) * qk_scale;
        mx = std::max(mx, x[j - j0]);
      }
      const float alpha = mx == -INFINITY ? 1.0f : std::exp(m - mx);
      m = mx;
      const float bias = mx == -INFINITY ? 0.0f : mx * log2e;
      std::vector<float> P(64), P8(j1 - j0);
      for (int t = 0; t < 64; ++t) P[t] = std::exp2f(std::fmaf(x[t], log2e, -bias));
      for (int j = j0; j < j1; ++j) P8[j - j0] = quantize_e4m3_sat(P[j - j0] * 448.0f);
      float acc_sum = l * alpha;
      for (int w = 0; w < 4; ++w) {  // warp w: tokens 16w .. 16w+15
        float lane[8];
        for (int q = 0; q < 8; ++q) lane[q] = P[16 * w + q] + P[16 * w + 8 + q];
        float a16[8], a8[8], a4[8];
        for (int q = 0; q < 8; ++q) a16[q] = lane[q] + lane[q ^ 4];  // lane ^ 16 = quad ^ 4
        for (int q = 0; q < 8; ++q) a8[q] = a16[q] + a16[q ^ 2];
        for (int q = 0; q < 8; ++q) a4[q] = a8[q] + a8[q ^ 1];
        acc_sum = acc_sum + a4[0];
      }
      l = acc_sum;
      for (float& o : O) o *= alpha;
      for (int c = 0; c < d; ++c)
        for (int c0 = j0; c0 < j1; c0 += 32)
          O[c] = float(double(O[c]) + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
    }
    const float xvo = (1.0f / 448.0f) * kvsc;
    const float out_scale = (l > 0 ? 1.0f / l : 0.0f) * xvo;
    for (int c = 0; c < d; ++c) out[size_t(i) * d + c] = out_cast(O[c] * out_scale);
  }
  return out;
}

// ---- 5. hpc-ops SM90 FP8 prefill (Tencent/hpc-ops@6e2eced src/attention/prefill/kernels.cuh) ----
// variant 0: API default QPERTOKEN_PERHEAD_KPERTENSOR_VPERTENSOR (hpc/attention.py:159), kernel
//   :969: `tQS[im] = sQS(...) * kscale` (:1279), `tAttr_mn(im, in) *= tQS[im]` (:1325, -inf at
//   `icol > irow` :1322), P `*= kFp8PrefillPScale` (256, :1347), PV into a fresh tile `tOr`
//   (:1378), `tYr(i) += tOr(i)` (:1403), `tYr(i) * vscale_eff`, vscale_eff = vscale * (1/256) (:1424).
// variant 1: the per-token K / per-head V kernel (:1461): `tAttr_mn(im, in) *= tQS[im] * tKS[in]`
//   (:1850), `vscale = vscale_ptr[ihead_kv]` (:1779).
// variant 2: the kernel before 4b402c8 (hpc-ops@e363e86 kernels.cuh:1273-1306,1358,1402,1428):
//   per-token Q, per-tensor K and V, P cast unscaled, PV straight into tYr, `tYr(i) * vscale`.
// online_softmax (:61-93): `row_max = warp_4lane_reduce_max_xor(row_max) * one_over_dk_log2e`,
//   `exp2f_ftz(tAttr * one_over_dk_log2e - gMax)` (fmaf), `float row_sum = 0.f; row_sum += p`
//   (:68,82), `gSum = gSum * scale + row_sum` (:86), `tYr_mn *= scale`.
// final_online_softmax (:48-59): warp_4lane_reduce_sum_xor (utils.cuh:405-409: xor 1 then xor 2),
//   `one_over_gsum = rcpf_ftz(gSum)` (modelled as 1/l), `tYr *= one_over_gsum`.
// one_over_dk_log2e = 1.f / sqrtf(float(num_dim_qk)) * kLog2e (warp_spec_with_kvcache_fp8_dim128.cu).
inline std::vector<float> run_hpcops(const test::layer_data& L, int h, bool causal, int variant) {
  head_ops H = head_of(L, h);
  const int d = H.d;
  auto per_token = [&](std::vector<float>& x, int n, std::vector<float>& sc) {
    sc.assign(n, 1.0f);
    for (int t = 0; t < n; ++t) {
      float a = amax_of(x.data() + size_t(t) * d, d) / 448.0f;
      if (a == 0) a = 1;
      sc[t] = a;
      for (int c = 0; c < d; ++c) x[size_t(t) * d + c] = quantize_e4m3_sat(x[size_t(t) * d + c] / a);
    }
  };
  std::vector<float> qs, ks;
  per_token(H.q, H.n_q, qs);
  float vsc;
  if (variant == 1) {
    per_token(H.k, H.n_kv, ks);
    vsc = amax_of(H.v.data(), H.v.size()) / 448.0f;  // this kv head's V
  } else {
    const float kt = amax_of(L.k.data(), L.k.size()) / 448.0f;  // all heads of the layer
    ks.assign(H.n_kv, kt);
    for (float& e : H.k) e = quantize_e4m3_sat(e / kt);
    vsc = amax_of(L.v.data(), L.v.size()) / 448.0f;
  }
  if (vsc == 0) vsc = 1;
  for (float& e : H.v) e = quantize_e4m3_sat(e / vsc);
  const float c2 = (1.0f / std::sqrt(float(d))) * 1.44269504f;
  const bool s1 = variant == 2;
  const float S = s1 ? 1.0f : 256.0f;
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int N = n_blocks_for(i, H.n_q, H.n_kv, 128, 128, causal);
    float m = -INFINITY, lt[4] = {0, 0, 0, 0};
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N && last >= 0; ++b) {
      const int j0 = b * 128, j1 = std::min(H.n_kv, j0 + 128);
      std::vector<float> x(j1 - j0);
      float mx = -INFINITY;
      for (int j = j0; j < j1; ++j) {
        const double a = qk_chunks(H, i, j, acc::fp32);
        x[j - j0] = j > last ? -INFINITY : float(a) * (qs[i] * ks[j]);
        mx = std::max(mx, x[j - j0]);
      }
      mx = std::max(m, mx * c2);
      const float alpha = mx == -INFINITY ? 1.0f : std::exp2f(m - mx);
      m = mx;
      float row_sum[4] = {0, 0, 0, 0};
      std::vector<float> P8(x.size());
      for (size_t j = 0; j < x.size(); ++j) {
        const float p = std::exp2f(std::fmaf(x[j], c2, -(m == -INFINITY ? 0.0f : m)));
        row_sum[(j % 8) / 2] += p;
        P8[j] = quantize_e4m3_sat(p * S);
      }
      // kernels.cuh:86 `gSum(im) = gSum(im) * scale + row_sum`, contracted to one fmaf by nvcc's
      // default --fmad=true (the preset's fma_contract).
      for (int t = 0; t < 4; ++t) lt[t] = std::fmaf(lt[t], alpha, row_sum[t]);
      // :90 `tYr * scale` then :1403 `tYr(i) += tOr(i)`: one fmaf under nvcc's contraction
      // (fma_contract_o); hpcops-s1 rescales O and accumulates PV into it.
      if (s1)
        for (float& o : O) o *= alpha;
      for (int c = 0; c < d; ++c) {
        if (s1) {
          for (int c0 = j0; c0 < j1; c0 += 32)
            O[c] = float(double(O[c]) + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
        } else {
          double a = 0;
          for (int c0 = j0; c0 < j1; c0 += 32) a = float(a + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
          O[c] = std::fmaf(O[c], alpha, float(a));
        }
      }
    }
    const float l = (lt[0] + lt[1]) + (lt[2] + lt[3]);
    const float veff = s1 ? vsc : (1.0f / 256.0f) * vsc;
    for (int c = 0; c < d; ++c) {
      float o = O[c];
      o *= (l > 0 ? 1.0f / l : 0.0f);
      o *= veff;
      out[size_t(i) * d + c] = out_cast(o);
    }
  }
  return out;
}

// ---- 2b. SageAttention v1 Triton (thu-ml/SageAttention@d1a57a5, sageattn_qk_int8_pv_fp16_triton) ----
// quant_per_block.py: Q *= sm_scale*1.44269504 (a Python double passed as the fp32 argument), per
// block of 128 (Q) / 64 (K) rows scale = max|x|/127, x/scale + 0.5*sign then truncate;
// core.py: smooth_k (k - mean over tokens, in the input dtype, bf16 here), V in fp16.
// sageattention/triton/attn_qk_int8_per_block.py _attn_fwd_inner, per 64-key block (forward):
//   :45 `qk = tl.dot(q, k).to(tl.float32) * (q_scale * k_scale)`
//   :55-57 `m_ij = tl.maximum(m_i, tl.max(qk, 1)); qk = qk - m_ij[:, None]; p = tl.math.exp2(qk)`
//   :58-61 `l_ij = tl.sum(p, 1); alpha = tl.math.exp2(m_i - m_ij); l_i = l_i * alpha + l_ij`
//   :63-68 `acc = acc * alpha[:, None]; p = p.to(tl.float16); acc += tl.dot(p, v, out_dtype=tl.float16)`
//   :111-112 m_i = -inf, l_i = 1; :122 `acc = acc / l_i[:, None]`.
// attn_qk_int8_per_block_causal.py: :28-35 blocks [0, start_m*BLOCK_M) then [start_m*BLOCK_M,
//   (start_m+1)*BLOCK_M); :45-46 `mask &= offs_m[:, None] >= (start_n + offs_n[None, :])`,
//   `qk += tl.where(mask, 0, float('-inf'))`: top-left (key j visible to row i iff j <= i).
// Triton compiles with enable_fp_fusion=True: `l_i * alpha + l_ij` and `acc * alpha + float(dot)`
// are fmaf; `qk * s + where(mask, 0, -inf)` is fmaf(S, dq, 0), the same as S * dq.
// tl.sum(p, 1): per thread columns 8g+2t, 8g+2t+1 ascending, then the quad's tree xor 2, xor 1
// (inferred from Triton's reduce lowering); the fp16 dot as exact 16-product chunks each added and
// rounded once to fp16 (inferred); keys past n_kv are absent.
inline std::vector<float> run_sage1(const test::layer_data& L, int h, bool causal) {
  head_ops H = head_of(L, h);
  const int d = H.d, nq = H.n_q, nk = H.n_kv;
  for (int c = 0; c < d; ++c) {  // smooth_k
    double s = 0;
    for (int t = 0; t < nk; ++t) s += H.k[size_t(t) * d + c];
    const float km = quantize_bf16(float(s / nk));
    for (int t = 0; t < nk; ++t) H.k[size_t(t) * d + c] = quantize_bf16(H.k[size_t(t) * d + c] - km);
  }
  const float qmul = float(1.0 / std::sqrt(double(d)) * 1.44269504);
  for (float& e : H.q) e *= qmul;
  auto per_block = [&](std::vector<float>& x, int n, int blk, std::vector<float>& sc) {
    sc.assign(n, 0.0f);
    for (int t0 = 0; t0 < n; t0 += blk) {
      const int t1 = std::min(n, t0 + blk);
      const float scale = amax_of(x.data() + size_t(t0) * d, size_t(t1 - t0) * d) / 127.0f;
      for (int t = t0; t < t1; ++t) {
        sc[t] = scale;
        for (int c = 0; c < d; ++c) {
          float y = x[size_t(t) * d + c] / scale;
          y += 0.5f * (y >= 0 ? 1.0f : -1.0f);  // fp32 add, then .to(int8) truncates
          x[size_t(t) * d + c] = std::max(-128.0f, std::min(127.0f, std::trunc(y)));
        }
      }
    }
  };
  std::vector<float> qs, ks;
  per_block(H.q, nq, 128, qs);
  per_block(H.k, nk, 64, ks);
  for (float& e : H.v) e = float(to_fp16(e));
  std::vector<float> out(size_t(nq) * d);
  for (int i = 0; i < nq; ++i) {
    const int last = causal ? i : nk - 1;  // top-left
    const int n_keys = causal ? std::min(nk, (i / 128 + 1) * 128) : nk;
    const int N = (n_keys + 63) / 64;
    float m = -INFINITY, l = 1.0f;
    std::vector<float> acc(d, 0.0f);
    for (int b = 0; b < N; ++b) {
      const int j0 = b * 64, j1 = std::min(nk, j0 + 64), n = j1 - j0;
      std::vector<float> qk(n);
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        long long S = 0;
        for (int c = 0; c < d; ++c) S += (long long)H.q[size_t(i) * d + c] * (long long)H.k[size_t(j) * d + c];
        const float x = j > last ? -INFINITY : float(S) * (qs[i] * ks[j]);
        qk[j - j0] = x;
        mx = std::max(mx, x);
      }
      std::vector<float> p(n);
      float part[4] = {0, 0, 0, 0};
      for (int jj = 0; jj < n; ++jj) {
        p[jj] = std::exp2f(qk[jj] - mx);
        part[(jj % 8) / 2] += p[jj];
      }
      const float l_ij = (part[0] + part[2]) + (part[1] + part[3]);
      const float alpha = std::exp2f(m - mx);
      l = std::fmaf(l, alpha, l_ij);
      m = mx;
      for (int c = 0; c < d; ++c) {
        double a16 = 0;  // the dot's fp16 accumulator, fresh per block
        for (int c0 = 0; c0 < n; c0 += 16) {
          double ch = 0;
          for (int jj = c0; jj < std::min(n, c0 + 16); ++jj)
            ch += to_fp16(p[jj]) * double(H.v[size_t(j0 + jj) * d + c]);
          a16 = to_fp16(a16 + ch);
        }
        acc[c] = std::fmaf(acc[c], alpha, float(a16));
      }
    }
    for (int c = 0; c < d; ++c) out[size_t(i) * d + c] = out_cast(l > 0 ? acc[c] / l : 0.0f);
  }
  return out;
}

// ---- fp32 flash attention (the fp32 preset and generic's defaults): no casts, forward 128-key
// blocks, raw max with -inf masking, sl2 = float(double(sm) * log2e), sequential row sum, fp32
// accumulators (32-product chunks) with PV into O, O * (1/l), fp32 output ----
inline std::vector<float> run_fp32(const test::layer_data& L, int h, bool causal) {
  head_ops H = head_of(L, h);
  const int d = H.d;
  const float sl2 = float(double(float(1.0 / std::sqrt(double(d)))) * std::numbers::log2e);
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int N = n_blocks_for(i, H.n_q, H.n_kv, 128, 128, causal);
    float m = -INFINITY, l = 0;
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N && last >= 0; ++b) {
      const int j0 = b * 128, j1 = std::min(H.n_kv, j0 + 128);
      std::vector<float> S(j1 - j0);
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        S[j - j0] = j > last ? -INFINITY : float(qk_chunks(H, i, j, acc::fp32));
        mx = std::max(mx, S[j - j0]);
      }
      const float cur = mx == -INFINITY ? 0.0f : mx;
      const float alpha = std::exp2f((m - cur) * sl2);
      const float ms = mx == -INFINITY ? 0.0f : mx * sl2;
      m = mx;
      l *= alpha;
      for (float& o : O) o *= alpha;
      std::vector<float> P(S.size());
      for (size_t j = 0; j < S.size(); ++j) {
        P[j] = std::exp2f(std::fmaf(S[j], sl2, -ms));
        l += P[j];
      }
      for (int c = 0; c < d; ++c)
        for (int c0 = j0; c0 < j1; c0 += 32) {
          double ch = 0;
          for (int j = c0; j < std::min(j1, c0 + 32); ++j) ch += double(P[j - j0]) * H.v[size_t(j) * d + c];
          O[c] = float(double(O[c]) + ch);
        }
    }
    const float inv = (l == 0 || l != l) ? 0.0f : 1.0f / l;
    for (int c = 0; c < d; ++c) out[size_t(i) * d + c] = O[c] * inv;
  }
  return out;
}

// The oracle of each preset, by preset name: a new preset adds its oracle above and its row here
// (preset_oracle_test checks that the names are exactly the presets of kernel_spec.cpp).
using oracle_fn = std::vector<float> (*)(const test::layer_data& L, int h, bool causal);
inline const std::map<std::string, oracle_fn>& oracles() {
  static const std::map<std::string, oracle_fn> m = {
      {"fa3",
       [](const test::layer_data& L, int h, bool c) {
         return run_fa3_like(L, h, c, {false, fa3_like::fa3});
       }},
      {"fa3-acc13",
       [](const test::layer_data& L, int h, bool c) {
         return run_fa3_like(L, h, c, {true, fa3_like::fa3});
       }},
      {"flashinfer-sm90",
       [](const test::layer_data& L, int h, bool c) {
         return run_fa3_like(L, h, c, {false, fa3_like::flashinfer});
       }},
      {"bf16",
       [](const test::layer_data& L, int h, bool c) {
         return run_fa3_like(L, h, c, {false, fa3_like::bf16});
       }},
      {"sage2pp-sm89",
       [](const test::layer_data& L, int h, bool c) {
         bool nan = false;
         return run_sage2(L, h, c, {32, 64, 128, 64, 2.25f, true, false, 2}, &nan);
       }},
      {"sage2-sm90",
       [](const test::layer_data& L, int h, bool c) {
         bool nan = false;
         return run_sage2(L, h, c, {16, 128, 64, 128, 448.0f, false, false, 1}, &nan);
       }},
      {"sage2-sm90-acc13",
       [](const test::layer_data& L, int h, bool c) {
         bool nan = false;
         return run_sage2(L, h, c, {16, 128, 64, 128, 448.0f, false, true, 1}, &nan);
       }},
      {"sage1", [](const test::layer_data& L, int h, bool c) { return run_sage1(L, h, c); }},
      {"fp32", [](const test::layer_data& L, int h, bool c) { return run_fp32(L, h, c); }},
      {"generic", [](const test::layer_data& L, int h, bool c) { return run_fp32(L, h, c); }},
      {"xqa-sm90", [](const test::layer_data& L, int h, bool c) { return run_xqa(L, h, c); }},
      {"hpcops", [](const test::layer_data& L, int h, bool c) { return run_hpcops(L, h, c, 0); }},
      {"hpcops-kpertoken", [](const test::layer_data& L, int h, bool c) { return run_hpcops(L, h, c, 1); }},
      {"hpcops-s1", [](const test::layer_data& L, int h, bool c) { return run_hpcops(L, h, c, 2); }},
  };
  return m;
}

}  // namespace attnum::attention::oracle
