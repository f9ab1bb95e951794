#pragma once
// Independent plain-loop implementations of each preset, written from ../shared/docs/kernels.md
// (section.step cited), sharing nothing with the engine but the format casts of formats/format.h.
// Each returns O [n_q, d] of query head h.
#include <cmath>
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
    case acc::fp32: return static_cast<float>(x);
    case acc::rz13: return static_cast<float>(rz_bits(x, 13));
    case acc::fp16: return to_fp16(x);
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
inline double pv_chunk(const std::vector<float>& p8, int j0, int c0, int c1, const std::vector<float>& v, int d, int c) {
  double s = 0;
  for (int j = c0; j < c1; ++j) s += double(p8[j - j0]) * double(v[size_t(j) * d + c]);
  return s;
}

// Q_i . K_j for a fresh accumulator: exact sums of 32 consecutive products, each added into the
// accumulator and rounded once under `model` (kernels.md 1.5; Sage's mma and hpc-ops do the same).
inline double qk_chunks(const head_ops& H, int i, int j, acc model) {
  const int d = H.d;
  double a = 0;
  for (int k0 = 0; k0 < d; k0 += 32) {
    double ch = 0;
    for (int k = k0; k < k0 + 32 && k < d; ++k) ch += double(H.q[size_t(i) * d + k]) * H.k[size_t(j) * d + k];
    a = acc_round(model, a + ch);
  }
  return a;
}

// ---- 1. FlashAttention-3 family: raw max, Check_inf, reverse order, PV into O (pipelined) ----
// Also FlashInfer (3.x: P*448 multiply, rescale before PV) and native bf16 (no offset).
struct fa3_like {
  bool acc13 = false;
  enum { fa3, flashinfer, bf16 } kind = fa3;
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
    for (int hh = h0; hh < h1; ++hh) qa = std::max(qa, amax_of(L.q.data() + size_t(hh) * lv.n_q * d, size_t(lv.n_q) * d));
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
    if (d <= 64) bm = 192, bn = 160; else if (d <= 96) bm = 192, bn = 128; else if (d <= 128) bm = 128, bn = 224;
  } else if (cfg.kind == fa3_like::flashinfer) {  // 3.2
    if (d <= 64) bm = 192, bn = 128; else if (d <= 128) bm = 128, bn = 192;
  }
  const acc model = cfg.acc13 ? acc::rz13 : acc::fp32;
  const float sm = float(1.0 / std::sqrt(double(d)));
  float sl2;
  if (cfg.kind == fa3_like::fa3) sl2 = float(double(sm) * std::numbers::log2e) * (qd * kd);  // 1.2
  // FlashInfer hopper/variants.cuh StandardFP8Attention: q_scale * k_scale * sm_scale * log2e,
  // evaluated left to right in float.
  else if (cfg.kind == fa3_like::flashinfer) sl2 = ((qd * kd) * sm) * 1.44269504f;
  else sl2 = float(double(sm) * std::numbers::log2e);
  const float off = cfg.kind == fa3_like::fa3 ? 8.0f : 0.0f;       // 1.8 Max_offset
  const float pmul = cfg.kind == fa3_like::flashinfer ? 448.0f : 1.0f;  // 3.5
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int nb = n_blocks_for(i, H.n_q, H.n_kv, bm, bn, causal);
    float m = -INFINITY, lt[4] = {0, 0, 0, 0};
    std::vector<float> O(d, 0.0f), p8_prev;
    int prev_j0 = -1, prev_j1 = -1;
    auto gemm_pv = [&](const std::vector<float>& p8, int j0, int j1) {  // O += P8 V, K=32 steps (1.12)
      for (int c0 = j0; c0 < j1; c0 += 32)
        for (int c = 0; c < d; ++c) O[c] = float(acc_round(model, double(O[c]) + pv_chunk(p8, j0, c0, std::min(j1, c0 + 32), H.v, d, c)));
    };
    for (int n = nb - 1; n >= 0 && last >= 0; --n) {  // 1.4 reverse
      const int j0 = n * bn, j1 = std::min(H.n_kv, j0 + bn);
      std::vector<float> S(j1 - j0);
      for (int j = j0; j < j1; ++j) {  // 1.5 fresh accumulator, chunks of 32 over d
        const double a = qk_chunks(H, i, j, model);
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
      for (float& x : lt) x *= alpha;
      for (size_t j = 0; j < S.size(); ++j) lt[(j % 8) / 2] += P[j];  // 1.10 thread columns 2t, 2t+1, 2t+8...
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
    const int last = causal ? i + nk - nq : nk - 1;
    const int N = n_blocks_for(i, nq, nk, cfg.cta_q, cfg.cta_k, causal);
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
        if (masked_block) x[j - j0] = j > last ? -5e6f : Sf * dq, eff[j - j0] = sl2;  // 2a.8
        else x[j - j0] = Sf, eff[j - j0] = sl2 * dq;
        mt = std::max(mt, std::fmaf(x[j - j0], eff[j - j0], -8.807f));  // 2a.9
      }
      const float mn = std::max(m, mt);
      const float alpha = std::exp2f(m - mn);
      m = mn;
      for (float& e : dl) e *= alpha;
      for (float& o : O) o *= alpha;
      std::vector<float> P(cfg.cta_k, 0.0f), P8(n);
      for (int jj = 0; jj < n; ++jj) {
        P[jj] = std::exp2f(std::fmaf(x[jj], eff[jj], -m));
        P8[jj] = quantize_e4m3_sat(P[jj]);  // 2a.11
      }
      for (int f = 0; f < cfg.cta_k / 16; ++f)  // 2a.10
        for (int t = 0; t < 4; ++t) {
          const int b0 = 16 * f + 2 * t;
          dl[t] += P[b0] + P[b0 + 1] + P[b0 + 8] + P[b0 + 9];
        }
      for (int c = 0; c < d; ++c) {  // 2a.12 fresh accumulator per block, K=32 steps, then fp32 add
        double a = 0;
        for (int c0 = j0; c0 < j1; c0 += 32) a = acc_round(model, a + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
        O[c] += float(a);
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

// ---- 4. XQA sm90: per-tensor scales, one K/V scale, raw max, P*448, forward 64-token tiles ----
inline std::vector<float> run_xqa(const test::layer_data& L, int h, bool causal) {
  head_ops H = head_of(L, h);
  const int d = H.d;
  float qsc = amax_of(L.q.data(), L.q.size()) / 448.0f;
  float kvsc = std::max(amax_of(L.k.data(), L.k.size()), amax_of(L.v.data(), L.v.size())) / 448.0f;  // 4.1
  if (qsc == 0) qsc = 1;
  if (kvsc == 0) kvsc = 1;
  for (float& e : H.q) e = quantize_e4m3_sat(e / qsc);
  for (float& e : H.k) e = quantize_e4m3_sat(e / kvsc);
  for (float& e : H.v) e = quantize_e4m3_sat(e / kvsc);
  const float qk_scale = (qsc * kvsc) * float(1.0 / std::sqrt(double(d)));  // 4.1
  const float log2e = 1.44269504f;
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int N = n_blocks_for(i, H.n_q, H.n_kv, 64, 64, causal);
    float m = -INFINITY, l = 0;
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N && last >= 0; ++b) {
      const int j0 = b * 64, j1 = std::min(H.n_kv, j0 + 64);
      std::vector<float> x(j1 - j0);
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        const double a = qk_chunks(H, i, j, acc::fp32);
        x[j - j0] = j > last ? -INFINITY : float(a) * qk_scale;
        mx = std::max(mx, x[j - j0]);
      }
      const float cur = mx == -INFINITY ? 0.0f : mx;
      const float alpha = std::exp2f((m - cur) * log2e);
      m = mx;
      const float ms = mx == -INFINITY ? 0.0f : mx * log2e;
      l *= alpha;
      for (float& o : O) o *= alpha;
      std::vector<float> P8(x.size());
      for (size_t j = 0; j < x.size(); ++j) {
        const float p = std::exp2f(std::fmaf(x[j], log2e, -ms));  // 4.3
        l += p;
        P8[j] = quantize_e4m3_sat(p * 448.0f);
      }
      for (int c = 0; c < d; ++c)
        for (int c0 = j0; c0 < j1; c0 += 32) O[c] = float(double(O[c]) + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
    }
    const float xvo = (1.0f / 448.0f) * kvsc;  // 4.4
    for (int c = 0; c < d; ++c) {
      float o = O[c];
      o *= (l > 0 ? 1.0f / l : 0.0f);
      o *= xvo;
      out[size_t(i) * d + c] = out_cast(o);
    }
  }
  return out;
}

// ---- 5. hpc-ops: Q, K per token per head, V per head; scaled max; P*256 (or S=1 before 2026-05) ----
inline std::vector<float> run_hpcops(const test::layer_data& L, int h, bool causal, bool s1) {
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
  per_token(H.k, H.n_kv, ks);
  float vsc = amax_of(H.v.data(), H.v.size()) / 448.0f;
  if (vsc == 0) vsc = 1;
  for (float& e : H.v) e = quantize_e4m3_sat(e / vsc);
  const float c2 = float(1.0 / std::sqrt(double(d))) * 1.44269504f;  // 5.2
  const float S = s1 ? 1.0f : 256.0f;
  std::vector<float> out(size_t(H.n_q) * d);
  for (int i = 0; i < H.n_q; ++i) {
    const int last = causal ? i + H.n_kv - H.n_q : H.n_kv - 1;
    const int N = n_blocks_for(i, H.n_q, H.n_kv, 128, 128, causal);
    float m = -INFINITY, lt[4] = {0, 0, 0, 0};
    std::vector<float> O(d, 0.0f);
    for (int b = 0; b < N && last >= 0; ++b) {  // 5.5 forward
      const int j0 = b * 128, j1 = std::min(H.n_kv, j0 + 128);
      std::vector<float> x(j1 - j0);
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        const double a = qk_chunks(H, i, j, acc::fp32);
        x[j - j0] = j > last ? -INFINITY : float(a) * (qs[i] * ks[j]);  // 5.2
        mx = std::max(mx, x[j - j0] * c2);                              // 5.3
      }
      const float alpha = mx == -INFINITY ? 1.0f : std::exp2f(m - mx);
      m = mx;
      for (float& e : lt) e *= alpha;
      for (float& o : O) o *= alpha;
      std::vector<float> P8(x.size());
      for (size_t j = 0; j < x.size(); ++j) {
        const float p = std::exp2f(std::fmaf(x[j], c2, -(m == -INFINITY ? 0.0f : m)));
        lt[(j % 8) / 2] += p;
        P8[j] = quantize_e4m3_sat(p * S);
      }
      for (int c = 0; c < d; ++c) {
        if (s1) {  // before 82d80e8: straight into O
          for (int c0 = j0; c0 < j1; c0 += 32) O[c] = float(double(O[c]) + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
        } else {  // 5.4 fresh fp32 tile, then O += tile
          double a = 0;
          for (int c0 = j0; c0 < j1; c0 += 32) a = float(a + pv_chunk(P8, j0, c0, std::min(j1, c0 + 32), H.v, d, c));
          O[c] += float(a);
        }
      }
    }
    const float l = (lt[0] + lt[2]) + (lt[1] + lt[3]);
    const float veff = s1 ? vsc : (1.0f / 256.0f) * vsc;  // 5.6
    for (int c = 0; c < d; ++c) {
      float o = O[c];
      o *= (l > 0 ? 1.0f / l : 0.0f);
      o *= veff;
      out[size_t(i) * d + c] = out_cast(o);
    }
  }
  return out;
}

// ---- 2b. SageAttention v1-style Triton (sageattn_qk_int8_pv_fp16_triton) ----
// quant_per_block.py: Q *= sm_scale*1.44269504 (a Python double passed as the fp32 argument), per
// block of 128 (Q) / 64 (K) rows scale = max|x|/127, x/scale + 0.5*sign then truncate;
// core.py: smooth_k (k - mean over tokens, in the input dtype, bf16 here), V in fp16.
// attn_qk_int8_per_block{,_causal}.py _attn_fwd_inner, per 64-key block (forward):
//   qk = float(dot) * q_scale * k_scale; causal diagonal stage: qk + where(mask, 0, -1e6);
//   m = max(m, rowmax qk); p = exp2(qk - m); alpha = exp2(m_prev - m); l = l*alpha + sum p;
//   acc = acc*alpha + dot(fp16(p), v, out_dtype=fp16); O = acc / l, then the output cast.
// Modelled choices of the preset ([I] in docs/kernels.md): tl.sum in ascending column order;
// the fp16 dot as exact 16-product chunks each added and rounded once to fp16; keys past n_kv
// are absent (Triton's masked load leaves them undefined).
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
    const int last = causal ? i + nk - nq : nk - 1;
    const int N = n_blocks_for(i, nq, nk, 128, 64, causal);
    float m = -INFINITY, l = 1.0f;  // l starts at 1 and is zeroed by the first alpha = 0
    std::vector<float> acc(d, 0.0f);
    for (int b = 0; b < N; ++b) {
      const int j0 = b * 64, j1 = std::min(nk, j0 + 64), n = j1 - j0;
      std::vector<float> qk(n);
      float mx = m;
      for (int j = j0; j < j1; ++j) {
        long long S = 0;
        for (int c = 0; c < d; ++c) S += (long long)H.q[size_t(i) * d + c] * (long long)H.k[size_t(j) * d + c];
        float x = float(S) * qs[i] * ks[j];
        if (causal && j > last) x += -1.0e6f;
        qk[j - j0] = x;
        mx = std::max(mx, x);
      }
      const float alpha = std::exp2f(m - mx);
      m = mx;
      std::vector<float> p(n);
      l *= alpha;
      for (int jj = 0; jj < n; ++jj) {
        p[jj] = std::exp2f(qk[jj] - m);
        l += p[jj];
      }
      for (float& a : acc) a *= alpha;
      for (int c = 0; c < d; ++c) {
        double a16 = 0;  // the dot's fp16 accumulator, fresh per block
        for (int c0 = 0; c0 < n; c0 += 16) {
          double ch = 0;
          for (int jj = c0; jj < std::min(n, c0 + 16); ++jj) ch += to_fp16(p[jj]) * double(H.v[size_t(j0 + jj) * d + c]);
          a16 = to_fp16(a16 + ch);
        }
        acc[c] += float(a16);
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

}  // namespace attnum::attention::oracle
