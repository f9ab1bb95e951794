#include "attnum/study/emulate.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

#include "attnum/attention/engine.h"
#include "attnum/attention/reference.h"
#include "attnum/core/error.h"

namespace attnum::study {

namespace {
using matd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmapf = Eigen::Map<const matf>;
}  // namespace

int parse_condition_index(std::string_view text) { return static_cast<int>(attention::parse_condition(text)); }

reference reference_causal(const float* q, const float* k, const float* v, int n, int d) {
  const size_t nd = static_cast<size_t>(n) * d;
  const std::vector<double> qd(q, q + nd), kd(k, k + nd), vd(v, v + nd);
  return attention::reference_attention(qd.data(), kd.data(), vd.data(), n, n, d, true, true);
}

namespace {

// Rounding variances of one cast operand head h: [n, d] from the engine's pre-cast values and
// per-element dequantisation scales. Empty when the cast is off or the format is fp32.
std::vector<double> cast_variances(const attention::operand_cast& c, const std::vector<float>& x, formats::format fmt,
                                   bool enabled, int h) {
  if (!enabled || fmt == formats::format::fp32) return {};
  const int n = c.n_tok, d = c.d_head;
  std::vector<double> var(static_cast<size_t>(n) * d);
  const float* xh = x.data() + static_cast<size_t>(h) * n * d;
  // c.scale(h, t, e) = row_scale * col_scale with the row and column-block lookups hoisted.
  for (int t = 0; t < n; ++t)
    predict::row_variances(fmt, xh + static_cast<size_t>(t) * d, c.row_scale[static_cast<size_t>(h) * n + t],
                           c.col_scale.data() + (static_cast<size_t>(h) * c.n_col_blocks + t / c.col_block) * d, d,
                           var.data() + static_cast<size_t>(t) * d);
  return var;
}

// Predictor v2: per channel, the mean pair covariance of the cast's rounding errors of operand
// head h (values on one grid: equal spacings, scale * spacing(x / scale); a value flushed to 0
// rounds deterministically and pairs with nothing). Empty when the cast is off or fp32.
std::vector<double> cast_shared(const attention::operand_cast& c, const std::vector<float>& x, formats::format fmt,
                                bool enabled, int h) {
  if (!enabled || fmt == formats::format::fp32) return {};
  const int n = c.n_tok, d = c.d_head;
  const float* xh = x.data() + static_cast<size_t>(h) * n * d;
  std::vector<double> shared(d), xs(n), us(n);
  for (int e = 0; e < d; ++e) {
    for (int t = 0; t < n; ++t) {
      const double v = xh[static_cast<size_t>(t) * d + e], sc = c.scale(h, t, e);
      xs[t] = v;
      const double u = sc > 0 && std::isfinite(sc) ? sc * predict::grid_spacing(fmt, v / sc) : 0.0;
      us[t] = std::fabs(v) < 0.5 * u ? 0.0 : u;
    }
    shared[e] = predict::mean_pair_covariance(xs.data(), us.data(), n);
  }
  return shared;
}

// The transform's own rounding: a condition that transforms an operand stores it in the kernel's
// transform_dtype before the cast (attention/prepare.cpp step 1), so the cast sees the exact
// transformed value plus that rounding. Its variance is the uniform model's on the dtype's grid,
// at the value that was rounded (before Sage's smooth_k subtracted `mean` [d], or before Sage v1
// multiplied by `factor`), independent of the cast's rounding (the grids are not aligned: an INT8
// step of amax/127 is about bf16's spacing near amax), so the two variances add. A cast to the
// transform dtype itself adds no rounding of its own: there the cast's model already is this one.
void add_transform_rounding(std::vector<double>& var, const float* x, const float* mean, float factor,
                            formats::format td, formats::format cast_fmt, bool cast_enabled, int n, int d) {
  if (td == formats::format::fp32 || (cast_enabled && cast_fmt == td)) return;
  if (var.empty()) var.assign(static_cast<size_t>(n) * d, 0.0);
  const double f = factor;
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(t) * d + c;
      const double rounded = (static_cast<double>(x[i]) + (mean ? mean[c] : 0.0)) / f;
      var[i] += predict::element_variance(td, rounded, 1.0) * f * f;
    }
}

// Predictor v2: the transform rounding's shared part (add_transform_rounding's grid and value),
// added to `shared` [d] (the two roundings are independent: their covariances add).
void add_transform_shared(std::vector<double>& shared, const float* x, const float* mean, float factor,
                          formats::format td, formats::format cast_fmt, bool cast_enabled, int n, int d) {
  if (td == formats::format::fp32 || (cast_enabled && cast_fmt == td)) return;
  if (shared.empty()) shared.assign(d, 0.0);
  const double f = factor;
  std::vector<double> xs(n), us(n);
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < n; ++t) {
      const double rounded = (static_cast<double>(x[static_cast<size_t>(t) * d + c]) + (mean ? mean[c] : 0.0)) / f;
      const double u = predict::grid_spacing(td, rounded);
      xs[t] = rounded;
      us[t] = std::fabs(rounded) < 0.5 * u ? 0.0 : u;
    }
    shared[c] += predict::mean_pair_covariance(xs.data(), us.data(), n) * f * f;
  }
}

}  // namespace

struct prepared_run {
  attention::kernel_spec spec;
  std::shared_ptr<const attention::prepared_layer> layer;
  int cond = 0;  ///< the condition (kConditionNames index)
};

std::shared_ptr<const prepared_run> prepare_run(const attention::kernel_spec& kernel, int cond, const layer_operands& x,
                                                const attention::transform_options& topt) {
  if (cond < 0 || cond > 3) fail("bad condition index {}", cond);
  auto r = std::make_shared<prepared_run>();
  r->spec = kernel;
  r->cond = cond;
  attention::layer_view view{x.q, x.k, x.v, x.n_head, x.n_head_kv, x.n, x.n, x.d};
  r->layer = attention::prepare_layer(r->spec, view, static_cast<attention::condition>(cond), topt);
  return r;
}

head_run run_prepared(const prepared_run& run, int h, const head_parts& parts) {
  const auto& L = *run.layer;
  const auto& spec = run.spec;
  const auto& en = spec.enabled;
  const int n = L.n_q, d = L.d_head, kvh = L.kv_head(h);
  const size_t hd = static_cast<size_t>(n) * d;
  head_run r;
  if (parts.output) {
    r.o.resize(hd);
    attention::run_head(L, h, true, r.o.data());
  }
  if (!parts.operands) return r;
  r.q.assign(L.q.begin() + h * hd, L.q.begin() + (h + 1) * hd);
  r.k.assign(L.k.begin() + kvh * hd, L.k.begin() + (kvh + 1) * hd);
  r.var_q = cast_variances(L.q8, L.q, spec.q.fmt, en.q_cast, h);
  if (parts.var_k) r.var_k = cast_variances(L.k8, L.k, spec.k.fmt, en.k_cast, kvh);
  // Q is transformed by the rotations, K by every condition but plain (prepare.cpp step 1).
  const auto c = static_cast<attention::condition>(run.cond);
  if (attention::rotates(c))
    add_transform_rounding(r.var_q, r.q.data(), nullptr, L.q_factor, spec.transform_dtype, spec.q.fmt, en.q_cast, n, d);
  const float* k_mean = L.k_mean.empty() ? nullptr : L.k_mean.data() + static_cast<size_t>(kvh) * d;
  if (parts.var_k && attention::transforms_k(c))
    add_transform_rounding(r.var_k, r.k.data(), k_mean, 1.0f, spec.transform_dtype, spec.k.fmt, en.k_cast, n, d);
  if (parts.var_v) r.var_v = cast_variances(L.v8, L.v, spec.v.fmt, en.v_cast, kvh);
  if (parts.shared && parts.var_k) {
    r.shared_k = cast_shared(L.k8, L.k, spec.k.fmt, en.k_cast, kvh);
    if (c != attention::condition::plain)
      add_transform_shared(r.shared_k, r.k.data(), k_mean, 1.0f, spec.transform_dtype, spec.k.fmt, en.k_cast, n, d);
  }
  if (parts.shared && parts.var_v) r.shared_v = cast_shared(L.v8, L.v, spec.v.fmt, en.v_cast, kvh);
  // The P cast sees S * exp(s - m): S = 2^offset (exponent offset) or the multiplier.
  r.p_cast.enabled = en.p_cast && spec.p_fmt != formats::format::fp32;
  r.p_cast.fmt = spec.p_fmt;
  r.p_cast.scale = spec.p_mode == attention::p_scale_mode::exponent_offset
                       ? std::exp2(static_cast<double>(spec.p_offset))
                   : spec.p_mode == attention::p_scale_mode::multiply ? static_cast<double>(spec.p_scale)
                                                                      : 1.0;
  r.p_cast.rowsum_from_cast = spec.rowsum_from_cast;
  r.o_cast = en.o_cast;
  r.out_fmt = spec.out_fmt;
  return r;
}

std::string_view kernel_backend() { return "engine"; }

std::vector<head_run> run_group(const attention::kernel_spec& kernel, int cond, const float* q, const float* k,
                                const float* v, int g, int n, int d, const attention::transform_options& topt) {
  const auto run = prepare_run(kernel, cond, {q, k, v, g, 1, n, d}, topt);
  std::vector<head_run> runs;
  for (int h = 0; h < g; ++h) runs.push_back(run_prepared(*run, h));
  return runs;
}

}  // namespace attnum::study
