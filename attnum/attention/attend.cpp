#include "attnum/attention/attend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "attnum/attention/metrics.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {

attend_result attend(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal,
                     const transform_options& opts, bool with_metrics, float* out) {
  const auto p = prepare_layer(spec, layer, cond, opts, /*keep_operands=*/false);
  attend_result r;
  const size_t per = static_cast<size_t>(layer.n_q) * layer.d_head;
  if (!out) {
    r.o.assign(per * layer.n_head, 0.0f);
    out = r.o.data();
  }
  r.heads.resize(layer.n_head);
  std::vector<run_stats> stats(layer.n_head);
  run_heads(*p, 0, layer.n_head, causal, out, stats.data());  // every thread on the heads' tiles
  worker_errors errors;                                       // an error in a worker thread reaches the caller
#pragma omp parallel for schedule(dynamic, 1) if (with_metrics)
  for (int h = 0; h < layer.n_head; ++h)
    errors.run([&] {
      head_report& hr = r.heads[h];
      hr.head = h;
      hr.kv_head = p->kv_head(h);
      hr.stats = stats[h];
      if (!with_metrics) {
        hr.rel_err = hr.log_err = hr.cosine = hr.max_row_err = hr.max_abs_err = hr.exp2_arg_max = std::nan("");
        return;
      }
      const auto ref = reference_head(layer, h, causal);
      for (const double m : ref.row_max)  // rows that see no key have max -inf
        if (std::isfinite(m)) hr.exp2_arg_max = std::max(hr.exp2_arg_max, std::fabs(m) * std::numbers::log2e);
      const error_metrics m = measure(out + per * h, ref.o.data(), layer.n_q, layer.d_head);
      hr.rel_err = m.rel_err, hr.log_err = m.log_err, hr.cosine = m.cosine;
      hr.max_row_err = m.max_row_err, hr.max_abs_err = m.max_abs_err;
      // A non-finite output element or metric is flagged and has no error or cosine.
      bool finite = std::isfinite(m.rel_err) && std::isfinite(m.log_err) && std::isfinite(m.cosine) &&
                    std::isfinite(m.max_row_err) && std::isfinite(m.max_abs_err);
      for (size_t e = 0; finite && e < per; ++e) finite = std::isfinite(out[per * h + e]);
      if (!finite) {
        hr.stats.nan_flagged = true;
        hr.rel_err = hr.log_err = hr.cosine = hr.max_row_err = hr.max_abs_err = std::nan("");
      }
    });
  errors.rethrow();
  return r;
}

std::string large_score_warning(const kernel_spec& spec, const attend_result& r) {
  const head_report* big = nullptr;
  for (const auto& h : r.heads)
    if (!spec.arith_fp64 && h.exp2_arg_max >= kExp2ArgFp32Limit && (!big || h.exp2_arg_max > big->exp2_arg_max))
      big = &h;
  if (!big) return "";
  return fmt::format(
      "head {}: |q.k / sqrt(d)| * log2(e) reaches {:.3g}, beyond 2^31: the kernel's softmax runs in fp32, where "
      "max_scaled (the row max times scale * log2 e) is off by up to {:.3g}, so exp2 of the max column overflows "
      "to inf (output NaN, nan_flagged) or underflows to 0 with every key (output 0), as the GPU computes it; "
      "scale --q or --k down for a meaningful error",
      big->head, big->exp2_arg_max, std::ldexp(1.0, std::ilogb(big->exp2_arg_max) - 24));
}

bool transform_rounds_inputs(const kernel_spec& spec, const layer_view& layer, condition cond) {
  if (cond == condition::plain || spec.transform_dtype == formats::format::fp32) return false;
  auto exact = [&](const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (transforms::round_to(spec.transform_dtype, x[i]) != x[i]) return false;
    return true;
  };
  const size_t d = static_cast<size_t>(layer.d_head);
  return !exact(layer.q, static_cast<size_t>(layer.n_head) * layer.n_q * d) ||
         !exact(layer.k, static_cast<size_t>(layer.n_head_kv) * layer.n_kv * d);
}

}  // namespace attnum::attention
