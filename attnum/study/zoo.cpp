#include "attnum/study/zoo.h"

#include <algorithm>
#include <cmath>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/stats/stats.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::study {

using stats::splitmix64;

namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  splitmix64 r(a ^ (b * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
  return r.next();
}

// Student t with nu degrees of freedom from normals (nu integer: chi^2 as a sum of squares),
// scaled to unit variance so heavy tails do not change the value scale.
double student_t(splitmix64& r, double nu) {
  const double z = r.normal();
  if (nu <= 0) return z;
  const int k = static_cast<int>(nu);
  double chi2 = 0;
  for (int i = 0; i < k; ++i) {
    const double g = r.normal();
    chi2 += g * g;
  }
  const double t = z / std::sqrt(chi2 / nu);
  return nu > 2 ? t * std::sqrt((nu - 2) / nu) : t;
}

std::vector<double> random_unit(splitmix64& r, int d) {
  std::vector<double> u(d);
  double n2 = 0;
  for (auto& x : u) {
    x = r.normal();
    n2 += x * x;
  }
  for (auto& x : u) x /= std::sqrt(n2);
  return u;
}

// RoPE (rotate-half convention of Llama/Qwen): channel pairs (c, c + d/2) rotate by
// pos * base^(-2c/d), base 10000.
void apply_rope(float* x, int n, int d) {
  const int half = d / 2;
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < half; ++c) {
      const double ang = t * std::pow(10000.0, -2.0 * c / d);
      const double cs = std::cos(ang), sn = std::sin(ang);
      const double a = x[t * d + c], b = x[t * d + c + half];
      x[t * d + c] = static_cast<float>(a * cs - b * sn);
      x[t * d + c + half] = static_cast<float>(a * sn + b * cs);
    }
}

}  // namespace

std::vector<zoo_model> zoo_models(const zoo_options& opt) {
  // Checked here, where every zoo path starts: a count outside its range is a clear error.
  if (opt.n_tok < 1) fail("zoo: --n-tok {}: expected a token count >= 1", opt.n_tok);
  if (opt.n_layer_cap < 0) fail("zoo: --layers {}: expected 0 (all) or a positive count", opt.n_layer_cap);
  // The largest group: 16 query heads + K + V of 128 channels, fp32 operands and fp64 reference.
  check_alloc(checked_mul(uint64_t(opt.n_tok), 18ull * 128 * (4 + 8)), fmt::format("zoo: --n-tok {}", opt.n_tok));
  // 112 query heads per model: 14 layers x 8 heads (d 64) or 7 layers x 16 heads (d 128).
  std::vector<zoo_model> m = {
      {"zoo-a-d64-mha", 64, 14, 8, 8, false, 1, 0.10, 0},    {"zoo-b-d64-gqa2", 64, 14, 8, 4, true, 2, 0.25, 5},
      {"zoo-c-d64-gqa4", 64, 14, 8, 2, true, 1, 0.40, 3},    {"zoo-d-d128-gqa2", 128, 7, 16, 8, true, 1, 0.20, 0},
      {"zoo-e-d128-gqa4", 128, 7, 16, 4, false, 2, 0.50, 4}, {"zoo-f-d128-gqa8", 128, 7, 16, 2, true, 1, 0.30, 3},
  };
  if (opt.n_layer_cap > 0)
    for (auto& x : m) x.n_layer = std::min(x.n_layer, opt.n_layer_cap);
  return m;
}

std::vector<head_params> zoo_layer_heads(const zoo_options& opt, int model, int layer) {
  const auto models = zoo_models(opt);
  if (model < 0 || model >= static_cast<int>(models.size()) || layer < 0 || layer >= models[model].n_layer)
    fail("zoo: no model {} layer {}", model, layer);
  const zoo_model& zm = models[model];
  const int group = zm.n_head / zm.n_head_kv;
  std::vector<head_params> out;
  for (int h = 0; h < zm.n_head; ++h) {
    const int kvh = h / group;
    // kv-head traits from the kv head's seed, query traits from the query head's.
    splitmix64 rk(mix(mix(opt.seed, model * 1000 + layer), kvh));
    splitmix64 rq(mix(mix(opt.seed, model * 1000 + layer), 1000 + h));
    head_params p;
    p.model = model, p.layer = layer, p.head = h, p.kv_head = kvh;
    p.d_head = zm.d_head, p.n_tok = opt.n_tok, p.group = group;
    p.seed = mix(mix(opt.seed, model * 1000 + layer), 7777 + kvh);
    p.rope = zm.rope;
    p.v_dof = zm.v_dof;
    // Sink strength: none in a third of the kv heads, else 2..10 logits.
    const double us = rk.uniform();
    p.sink = us < 1.0 / 3 ? 0 : 2 + 8 * rk.uniform();
    // Shared key vector: in 70% of kv heads, log-uniform ratio 0.3..40, the model's kind.
    if (rk.uniform() < 0.7) {
      p.shared_kind = zm.shared_kind;
      p.shared_ratio = 0.3 * std::pow(40 / 0.3, rk.uniform());
    } else {
      rk.uniform();
    }
    if (rk.uniform() < zm.outlier_rate) {
      p.n_outlier = 1 + static_cast<int>(rk.below(3));
      p.outlier_scale = 4 + 28 * rk.uniform();
    } else {
      rk.uniform();
    }
    p.temperature = 0.5 + 2.5 * rq.uniform();
    // Queries are nearly orthogonal to b (as measured in real heads): a small component.
    p.query_along_shared = 0.3 * rq.uniform();
    out.push_back(p);
  }
  return out;
}

zoo_group zoo_generate_from(const std::vector<head_params>& heads, int text, formats::format dtype) {
  ATTNUM_ASSERT(!heads.empty(), "zoo_generate_from: no heads");
  const head_params& kv = heads.front();
  const int n = kv.n_tok, d = kv.d_head, g = static_cast<int>(heads.size());
  zoo_group z;
  z.heads = heads;
  z.n_tok = n, z.d_head = d;
  z.q.assign(static_cast<size_t>(g) * n * d, 0.f);
  z.k.assign(static_cast<size_t>(n) * d, 0.f);
  z.v.assign(static_cast<size_t>(n) * d, 0.f);
  // 1. Fixed directions of the kv head (independent of the text).
  splitmix64 dir(kv.seed);
  std::vector<double> b_dir(d, 0.0);
  if (kv.shared_kind == 1)
    b_dir[dir.below(d)] = 1;
  else
    b_dir = random_unit(dir, d);
  std::vector<double> sink_dir = random_unit(dir, d);
  double dot = 0, nn = 0;  // make the sink direction orthogonal to b (independent structures)
  for (int c = 0; c < d; ++c) dot += sink_dir[c] * b_dir[c];
  for (int c = 0; c < d; ++c) nn += std::pow(sink_dir[c] - dot * b_dir[c], 2);
  for (int c = 0; c < d; ++c) sink_dir[c] = (sink_dir[c] - dot * b_dir[c]) / std::sqrt(nn);
  std::vector<double> ch_scale(d, 1.0);
  for (int i = 0; i < kv.n_outlier; ++i) ch_scale[dir.below(d)] = kv.outlier_scale;
  // 2. Token-specific keys (residual, unit variance per channel, outliers scaled) and values.
  splitmix64 rt(mix(kv.seed, 0x7e57 + text));
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) {
      z.k[t * d + c] = static_cast<float>(rt.normal() * ch_scale[c]);
      z.v[t * d + c] = static_cast<float>(student_t(rt, kv.v_dof));
    }
  // 3. Queries per head: residual with the same outlier channels, scaled so the token-specific
  // score part has std `temperature`: var(s) = sum_c ch_scale_c^4 / d before scaling.
  double var_s = 0;
  for (int c = 0; c < d; ++c) var_s += std::pow(ch_scale[c], 4) / d;
  for (int hh = 0; hh < g; ++hh) {
    float* q = z.q.data() + static_cast<size_t>(hh) * n * d;
    splitmix64 rq(mix(heads[hh].seed ^ static_cast<uint64_t>(heads[hh].head), 0x9e + text));
    const double tau = heads[hh].temperature / std::sqrt(var_s);
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < d; ++c) q[t * d + c] = static_cast<float>(rq.normal() * ch_scale[c] * tau);
    // RoPE first: b and the sink lean are post-RoPE structure, as in the captures.
    if (kv.rope) apply_rope(q, n, d);
    for (int t = 0; t < n; ++t) {
      double along = 0;
      for (int c = 0; c < d; ++c) along += q[t * d + c] * b_dir[c];
      // Nearly orthogonal to b: remove the component along b, keep a small random one.
      const double keep = heads[hh].query_along_shared * tau * rq.normal();
      // Sink: every query leans along sink_dir so that q.k_0 gains about `sink` logits.
      const double lean = kv.sink > 0 ? 2.0 : 0.0;
      for (int c = 0; c < d; ++c) q[t * d + c] += static_cast<float>((keep - along) * b_dir[c] + lean * sink_dir[c]);
    }
  }
  if (kv.rope) apply_rope(z.k.data(), n, d);
  // 4. Post-RoPE additions to the keys: the sink key and the shared vector b.
  if (kv.sink > 0) {
    // q . sink_dir = 2 (the lean) and k_0 gains sink*sqrt(d)/2 along it: + sink in s = q.k/sqrt(d).
    for (int c = 0; c < d; ++c)
      z.k[c] += static_cast<float>(kv.sink * std::sqrt(static_cast<double>(d)) / 2.0 * sink_dir[c]);
  }
  if (kv.shared_kind != 0 && kv.shared_ratio > 0) {
    double rms = 0;  // rms residual key norm
    for (int c = 0; c < d; ++c) rms += ch_scale[c] * ch_scale[c];
    const double norm_b = kv.shared_ratio * std::sqrt(rms);
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < d; ++c) z.k[t * d + c] += static_cast<float>(norm_b * b_dir[c]);
  }
  // 5. The operand dtype (a real model's activations are bf16): one RNE rounding of each value.
  transforms::check_transform_dtype(dtype, "zoo dtype");
  for (auto* x : {&z.q, &z.k, &z.v}) transforms::round_all(x->data(), x->size(), dtype);
  return z;
}

zoo_group zoo_generate(const zoo_options& opt, int model, int layer, int kv_head, int text) {
  const auto all = zoo_layer_heads(opt, model, layer);
  std::vector<head_params> heads;
  for (const auto& p : all)
    if (p.kv_head == kv_head) heads.push_back(p);
  if (heads.empty()) fail("zoo: no kv head {} in model {} layer {}", kv_head, model, layer);
  return zoo_generate_from(heads, text, opt.dtype);
}

}  // namespace attnum::study
