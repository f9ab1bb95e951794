// Tensor-core probe analysis (mma_analysis.h). Standard C++ only (g++ and nvcc's host compiler).
#include "gpu/host/mma_analysis.h"

#include <cmath>
#include <cstdio>
#include <random>

namespace attnum::gpu {
namespace {

int mant_bits_of(mma_input in) {
  switch (in) {
    case mma_input::e4m3:
      return 3;
    case mma_input::e5m2:
      return 2;
    case mma_input::bf16:
      return 7;
    case mma_input::fp16:
      return 10;
    case mma_input::int8:
      return 0;
  }
  return 0;
}
// The exponent of the smallest power of two the format holds (subnormals included).
int min_exp_of(mma_input in) {
  switch (in) {
    case mma_input::e4m3:
      return -9;
    case mma_input::e5m2:
      return -16;
    case mma_input::bf16:
      return -126;
    case mma_input::fp16:
      return -24;
    case mma_input::int8:
      return 0;
  }
  return 0;
}

long double rz_bits(long double x, int frac) {  // toward zero to `frac` fraction bits
  if (x == 0) return 0;
  int e;
  std::frexp(x, &e);
  return std::ldexp(std::trunc(std::ldexp(x, frac + 1 - e)), e - frac - 1);
}
long double rne_fp16(long double x) {
  if (x == 0) return 0;
  int e;
  std::frexp(x, &e);
  const int q = std::max(e - 11, -24);
  const long double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  return std::fabs(r) >= 65520.0L ? std::copysign(INFINITY, x) : r;
}

// The layout of the battery: offsets of each group (analyze_mma reads them back).
struct layout {
  int E = 16, n_kept = 0, s_max = 0;
  size_t kept = 0, round = 0, chunk = 0, align = 0, cin = 0, wrap = 0, random = 0, end = 0;
};

layout layout_of(int K, mma_input in, mma_acc acc) {
  layout L;
  const bool f16 = acc == mma_acc::fp16;
  L.E = f16 ? 7 : 16;
  L.n_kept = f16 ? 15 : 40;
  const int min_prod = 2 * min_exp_of(in);
  L.s_max = std::min(60, L.E - std::max(min_prod, f16 ? -24 : -126));
  size_t at = 0;
  if (acc == mma_acc::int32) {
    L.wrap = at;
    at += 1;
  } else {
    L.kept = at, at += L.n_kept;
    L.round = at, at += 1;
    L.chunk = at, at += K - 1;
    L.align = at, at += L.s_max;
    L.cin = at, at += L.s_max;
  }
  L.random = at, at += 256;
  L.end = at;
  return L;
}

mma_vec zero_vec(int K) { return {std::vector<float>(K, 0.0f), std::vector<float>(K, 0.0f), 0.0}; }
// product 2^x as a * b with both factors powers of two the format holds
void put_pow2(mma_vec& v, int pos, int x, float sign = 1.0f) {
  const int ea = (x >= 0) ? (x + 1) / 2 : -((-x) / 2), eb = x - ea;
  v.a[pos] = sign * std::ldexp(1.0f, ea);
  v.b[pos] = std::ldexp(1.0f, eb);
}

}  // namespace

std::string acc_model::knobs() const {
  return "kind=" + kind + " mant_bits=" + std::to_string(mant_bits) + " k_step=" + std::to_string(k_step);
}

double acc_model::eval(const mma_vec& v) const {
  const int K = static_cast<int>(v.a.size());
  if (kind == "int32") {
    int64_t s = static_cast<int64_t>(v.c);
    for (int k = 0; k < K; ++k) s += static_cast<int64_t>(v.a[k]) * static_cast<int64_t>(v.b[k]);
    return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(s))));
  }
  long double acc = v.c;
  for (int k0 = 0; k0 < K; k0 += k_step) {
    long double s = 0;  // exact on the battery: products of short significands, spans below 64 bits
    for (int k = k0; k < std::min(K, k0 + k_step); ++k) s += static_cast<long double>(v.a[k]) * v.b[k];
    const long double x = acc + s;
    if (kind == "fp32")
      acc = static_cast<float>(x);
    else if (kind == "truncated")
      acc = static_cast<float>(rz_bits(x, mant_bits));
    else
      acc = rne_fp16(x);
  }
  return static_cast<double>(acc);
}

std::vector<mma_vec> mma_battery(int K, mma_input in, mma_acc acc) {
  const layout L = layout_of(K, in, acc);
  std::vector<mma_vec> out(L.end, zero_vec(K));
  if (acc == mma_acc::int32) {
    out[L.wrap].c = 2147483647.0;
    out[L.wrap].a[0] = out[L.wrap].b[0] = 1;
  } else {
    for (int j = 1; j <= L.n_kept; ++j) {
      auto& v = out[L.kept + j - 1];
      v.c = std::ldexp(1.0, j);
      v.a[0] = v.b[0] = 1;
    }
    // rounding and chunk vectors use kept = the largest j tested for which the model could be
    // asked; analyze_mma rebuilds them at the measured kept bits (mma_battery is called twice)
  }
  std::mt19937_64 rng(0x5eed);
  const int mb = mant_bits_of(in);
  auto value = [&]() -> float {
    if (in == mma_input::int8) return static_cast<float>(static_cast<int>(rng() % 255) - 127);
    const float m = 1.0f + static_cast<float>(rng() % (1u << mb)) / static_cast<float>(1u << mb);
    const int e = static_cast<int>(rng() % 7) - 3;
    return ((rng() & 1) ? -1.0f : 1.0f) * std::ldexp(m, e);
  };
  for (size_t i = L.random; i < L.end; ++i) {
    auto& v = out[i];
    for (int k = 0; k < K; ++k) v.a[k] = value(), v.b[k] = value();
    if (acc == mma_acc::int32)
      v.c = static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000);
    else if (acc == mma_acc::fp16)
      v.c = static_cast<double>(
          rne_fp16(std::ldexp(static_cast<long double>(rng() % 2048), -5) * ((rng() & 1) ? -1 : 1)));
    else
      v.c = static_cast<double>(std::ldexp(static_cast<float>(rng() % (1u << 24)), -18)) * ((rng() & 1) ? -1 : 1);
  }
  return out;
}

mma_analysis analyze_mma(const std::string& instr, int K, mma_input in, mma_acc acc, const mma_eval& unit) {
  mma_analysis a;
  a.instr = instr, a.K = K, a.in = in, a.acc = acc;
  const layout L = layout_of(K, in, acc);
  std::vector<mma_vec> bat = mma_battery(K, in, acc);
  std::vector<double> hw;
  if (acc != mma_acc::int32) {
    // stage 1: the kept bits, then the vectors that depend on them
    std::vector<mma_vec> first(bat.begin() + L.kept, bat.begin() + L.kept + L.n_kept);
    unit(first, hw);
    a.kept_bits = 0;
    for (int j = 1; j <= L.n_kept && hw[j - 1] == std::ldexp(1.0, j) + 1; ++j) a.kept_bits = j;
    const int kb = std::max(1, std::min(a.kept_bits, L.n_kept - 1));
    const double C = std::ldexp(1.0, kb + 1);
    auto& r = bat[L.round];
    r.c = C, r.a[0] = 1.5f, r.b[0] = 1;
    for (int j = 1; j < K; ++j) {
      auto& v = bat[L.chunk + j - 1];
      v.c = C, v.a[0] = v.b[0] = 1, v.a[j] = v.b[j] = 1;
    }
    for (int s = 1; s <= L.s_max; ++s) {
      auto& v = bat[L.align + s - 1];
      put_pow2(v, 0, L.E), put_pow2(v, 1, L.E, -1.0f), put_pow2(v, 2, L.E - s);
      auto& w = bat[L.cin + s - 1];
      put_pow2(w, 0, L.E), put_pow2(w, 1, L.E, -1.0f);
      w.c = std::ldexp(1.0, L.E - s);
    }
  }
  unit(bat, hw);
  a.hw = hw;
  a.vectors = bat.size();
  if (acc == mma_acc::int32) {
    a.int_wraps = hw[L.wrap] == -2147483648.0;
  } else {
    const int kb = std::max(1, std::min(a.kept_bits, L.n_kept - 1));
    const double C = std::ldexp(1.0, kb + 1);
    a.rounding = hw[L.round] == C + 2 ? "nearest" : hw[L.round] == C ? "toward_zero" : "other";
    a.exact_chunk = K;
    for (int j = 1; j < K; ++j)
      if (hw[L.chunk + j - 1] != C + 2) {
        a.exact_chunk = j;
        break;
      }
    a.max_span_tested = L.s_max;
    a.align_span = 0;
    for (int s = 1; s <= L.s_max && hw[L.align + s - 1] == std::ldexp(1.0, L.E - s); ++s) a.align_span = s;
    a.c_span = 0;
    for (int s = 1; s <= L.s_max && hw[L.cin + s - 1] == std::ldexp(1.0, L.E - s); ++s) a.c_span = s;
  }
  // candidate models, in preference order (ties keep the first)
  std::vector<acc_model> models;
  std::vector<int> steps;
  for (int k = K; k >= 1; k /= 2)
    if (K % k == 0) steps.push_back(k);
  if (acc == mma_acc::int32) {
    models.push_back({"int32", 0, K});
  } else if (acc == mma_acc::fp16) {
    for (int k : steps) models.push_back({"fp16", 10, k});
  } else {
    for (int k : steps) models.push_back({"fp32", 23, k});
    for (int mb = 23; mb >= 8; --mb)
      for (int k : steps) models.push_back({"truncated", mb, k});
  }
  bool have = false;
  for (const auto& m : models) {
    uint64_t bad = 0;
    for (size_t i = 0; i < bat.size(); ++i) {
      const double d = m.eval(bat[i]);
      bad += !(d == hw[i] || (std::isnan(d) && std::isnan(hw[i])));
    }
    a.candidates.push_back({m, bad});
    if (!have || bad < a.best_mismatches) a.best = m, a.best_mismatches = bad, have = true;
  }
  return a;
}

std::string to_json(const mma_analysis& a) {
  static const char* ins[] = {"e4m3", "e5m2", "bf16", "fp16", "int8"};
  static const char* accs[] = {"fp32", "fp16", "int32"};
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\"instr\": \"%s\", \"K\": %d, \"input\": \"%s\", \"acc\": \"%s\", \"facts\": {\"kept_bits\": %d, "
      "\"rounding\": \"%s\", \"exact_chunk\": %d, \"align_span\": %d, \"c_span\": %d, \"max_span_tested\": %d, "
      "\"int_wraps\": %s}, \"model\": {\"kind\": \"%s\", \"mant_bits\": %d, \"k_step\": %d, \"knobs\": \"%s\", "
      "\"exact\": %s, \"mismatches\": %llu, \"vectors\": %llu}, \"candidates\": [",
      a.instr.c_str(), a.K, ins[static_cast<int>(a.in)], accs[static_cast<int>(a.acc)], a.kept_bits, a.rounding.c_str(),
      a.exact_chunk, a.align_span, a.c_span, a.max_span_tested, a.int_wraps ? "true" : "false", a.best.kind.c_str(),
      a.best.mant_bits, a.best.k_step, a.best.knobs().c_str(), a.best_mismatches == 0 ? "true" : "false",
      static_cast<unsigned long long>(a.best_mismatches), static_cast<unsigned long long>(a.vectors));
  std::string o = buf;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s{\"knobs\": \"%s\", \"mismatches\": %llu}", i ? ", " : "",
                  a.candidates[i].first.knobs().c_str(), static_cast<unsigned long long>(a.candidates[i].second));
    o += buf;
  }
  o += "], \"raw\": [";
  for (size_t i = 0; i < a.hw.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.17g", i ? ", " : "", a.hw[i]);
    o += buf;
  }
  o += "]}";
  return o;
}

}  // namespace attnum::gpu
