#pragma once
// Simulated GPU units for the self-test (scripts/gpu-probe --self-test) and the unit tests: each
// written here from its definition in plain C++, sharing no code with formats/sfu_unit.cpp (the
// rule decoder) or gpu/host/*_analysis.cpp (the discovery), and a plain-loop fp32 flash attention
// that calls them, written from the fp32 preset's steps (kernel_spec.h, engine.cpp's header):
// the oracle `attnum attend --kernel fp32 --knob exp2_unit=table:...` must equal bit for bit.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnum::gpu::sim {

inline float flush(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

/// A table ex2 whose result depends on floor(x) and the top `k` fraction bits only; its
/// significands are 2^(i/2^k) rounded toward zero to 20 bits (not what exp2f gives).
struct table_ex2 {
  int k = 11;
  std::vector<float> g;
  explicit table_ex2(int k_) : k(k_) {
    for (int i = 0; i < (1 << k); ++i) {
      const double v = std::exp2(static_cast<double>(i) / (1 << k));
      g.push_back(static_cast<float>(std::ldexp(std::floor(std::ldexp(v, 20)), -20)));
    }
  }
  float operator()(float x) const {
    x = flush(x);
    if (x != x) return x;
    if (x == INFINITY) return INFINITY;
    if (x == -INFINITY) return 0.0f;
    const double n = std::floor(static_cast<double>(x));
    if (n >= 128) return INFINITY;
    if (n < -127) return 0.0f;
    // frac(x) truncated to k bits, exactly (x - n rounds to 1 in double for a tiny negative x)
    const int i = static_cast<int>(std::floor(std::ldexp(static_cast<double>(x), k)) - n * (1 << k));
    const double y = static_cast<double>(g[i]) * std::exp2(n);
    return y < 0x1p-126 ? 0.0f : (y >= 0x1p128 ? INFINITY : static_cast<float>(y));
  }
};

/// A table rcp on the top `k` significand bits: 1 / (midpoint of the significand's bucket).
struct table_rcp {
  int k = 9;
  std::vector<float> r;
  explicit table_rcp(int k_) : k(k_) {
    for (int i = 0; i < (1 << k); ++i) r.push_back(static_cast<float>(1.0 / (1.0 + (i + 0.5) / (1 << k))));
  }
  float operator()(float x) const {
    x = flush(x);
    if (x != x) return x;
    if (x == 0) return std::copysign(INFINITY, x);
    if (std::isinf(x)) return std::copysign(0.0f, x);
    int e;
    const double m = std::frexp(std::fabs(static_cast<double>(x)), &e);  // [0.5, 1): |x| = 2m 2^(e-1)
    const int i = static_cast<int>((2 * m - 1) * (1 << k));
    const double y = static_cast<double>(r[i]) * std::exp2(-(e - 1));
    const float f = y < 0x1p-126 ? 0.0f : static_cast<float>(y);
    return std::copysign(f, x);
  }
};

/// div.full modelled as the float product a * rcp(b) (flushing a and the result).
struct mul_rcp_div {
  const table_rcp* rcp;
  float operator()(float a, float b) const { return flush(flush(a) * (*rcp)(b)); }
};

/// A truncating tensor-core accumulator: chunks of `chunk` products summed exactly (double:
/// exact for the probes' short significands), each chunk sum added to the accumulator and the
/// result's significand cut to 1 + `bits` bits (round toward zero).
struct trunc_acc {
  int chunk = 16, bits = 13;
  double operator()(const std::vector<float>& a, const std::vector<float>& b, double c) const {
    double acc = c;
    for (size_t k0 = 0; k0 < a.size(); k0 += chunk) {
      double s = 0;
      for (size_t k = k0; k < std::min(a.size(), k0 + chunk); ++k) s += static_cast<double>(a[k]) * b[k];
      const uint64_t u = std::bit_cast<uint64_t>(acc + s) & ~((uint64_t{1} << (52 - bits)) - 1);
      acc = static_cast<float>(std::bit_cast<double>(u));
    }
    return acc;
  }
};

/// The fp32 preset as the engine runs it (causal, bottom-right aligned, block_m = block_n = 128,
/// forward blocks, raw-space max, fp32 QK and PV accumulators with exact chunks of 32 summed in
/// double, sequential row sum, epilogue O * (1/l) or, divide_epilogue, O / l), on one layer:
/// q [H, n, d], k and v [Hkv, n, d]; every exp2 through `ex2`, 1/l through `rcp`, every division
/// through `div`. Optionally Q cast per token to INT8 (scale = amax / 127, x / scale rounded half
/// away from zero): the int8 token Q the self-test sets with knobs.
template <typename Ex2, typename Rcp, typename Div>
std::vector<float> fp32_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                  int H, int Hkv, int n, int d, const Ex2& ex2, const Rcp& rcp, const Div& div,
                                  bool int8_q_token, bool divide_epilogue) {
  const int bm = 128, bn = 128, ks = 32;
  const float sm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float sl2 = static_cast<float>(static_cast<double>(sm) * 1.4426950408889634);
  std::vector<float> out(static_cast<size_t>(H) * n * d);
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / Hkv);
    for (int i = 0; i < n; ++i) {
      const float* qi = &q[(static_cast<size_t>(h) * n + i) * d];
      std::vector<float> qr(qi, qi + d);
      float qs = 1.0f;
      if (int8_q_token) {
        float amax = 0;
        for (float x : qr) amax = std::max(amax, std::fabs(x));
        qs = amax == 0 ? 1.0f : div(amax, 127.0f);
        for (float& x : qr) {
          const float y = div(x, qs);
          float t = std::trunc(y + std::copysign(0.5f, y));
          x = std::min(127.0f, std::max(-128.0f, t));
        }
      }
      const float eff = sl2 * (qs * 1.0f);
      const int nb_all = (n + bn - 1) / bn;
      const int lim = (i / bm + 1) * bm;
      const int nb = std::min(nb_all, (lim + bn - 1) / bn);
      float m = -INFINITY, l = 0;
      std::vector<float> o(d, 0.0f);
      for (int b = 0; b < nb; ++b) {
        const int j0 = b * bn, j1 = std::min(n, j0 + bn);
        std::vector<float> x(j1 - j0);
        for (int j = j0; j < j1; ++j) {
          if (j > i) {
            x[j - j0] = -INFINITY;
            continue;
          }
          float acc = 0;
          for (int c0 = 0; c0 < d; c0 += ks) {
            double s = 0;
            for (int c = c0; c < std::min(d, c0 + ks); ++c)
              s += static_cast<double>(qr[c]) * static_cast<double>(k[(static_cast<size_t>(g) * n + j) * d + c]);
            acc = static_cast<float>(static_cast<double>(acc) + s);
          }
          x[j - j0] = acc;
        }
        float bmax = -INFINITY;
        for (float xv : x) bmax = std::max(bmax, xv);
        const float m_new = std::max(m, bmax);
        const float m_cur = m_new == -INFINITY ? 0.0f : m_new;
        const float max_scaled = m_new == -INFINITY ? 0.0f : std::fmaf(m_new, eff, -0.0f);
        const float alpha = ex2((m - m_cur) * eff);
        std::vector<float> p(x.size());
        for (size_t j = 0; j < x.size(); ++j) p[j] = ex2(std::fmaf(x[j], eff, -max_scaled));
        m = m_new;
        l *= alpha;
        for (float pv : p) l += pv;
        for (float& ov : o) ov *= alpha;
        for (int c0 = j0; c0 < j1; c0 += ks) {
          for (int c = 0; c < d; ++c) {
            double s = 0;
            for (int j = c0; j < std::min(j1, c0 + ks); ++j)
              s += static_cast<double>(p[j - j0]) * static_cast<double>(v[(static_cast<size_t>(g) * n + j) * d + c]);
            o[c] = static_cast<float>(static_cast<double>(o[c]) + s);
          }
        }
      }
      const bool bad = !(l > 0);
      const float inv = bad ? 0.0f : rcp(l);
      for (int c = 0; c < d; ++c)
        out[(static_cast<size_t>(h) * n + i) * d + c] =
            divide_epilogue ? (bad ? 0.0f : div(o[c], l)) * 1.0f : o[c] * (inv * 1.0f);
    }
  }
  return out;
}

}  // namespace attnum::gpu::sim
