// Error metrics and stage attribution (design.md "Conditions and metrics").
#include "attnum/attention/metrics.h"

#include <algorithm>
#include <cmath>

#include "attnum/core/error.h"

namespace attnum::attention {

double rel_err(const float* o, const double* ref, size_t n) {
  double num = 0, den = 0;  // sums in double, ascending index (deterministic)
  for (size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(o[i]) - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num) / std::sqrt(den) : (num > 0 || std::isnan(num) ? std::sqrt(num) / 0.0 : 0.0);
}

std::vector<double> row_max_err(const float* o, const double* ref, int rows, int d) {
  std::vector<double> out(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) {
      const double e =
          std::fabs(static_cast<double>(o[static_cast<size_t>(r) * d + c]) - ref[static_cast<size_t>(r) * d + c]);
      out[r] = std::isnan(e) ? e : std::max(out[r], e);
    }
  return out;
}

double cosine(const float* o, const double* ref, size_t n) {
  double dot = 0, a = 0, b = 0;
  for (size_t i = 0; i < n; ++i) {
    dot += o[i] * ref[i];
    a += static_cast<double>(o[i]) * o[i];
    b += ref[i] * ref[i];
  }
  return (a > 0 && b > 0) ? dot / (std::sqrt(a) * std::sqrt(b)) : 0.0;
}

error_metrics measure(const float* o, const double* ref, int rows, int d) {
  error_metrics m;
  const size_t n = static_cast<size_t>(rows) * d;
  m.rel_err = rel_err(o, ref, n);
  m.log_err = log_err(m.rel_err);
  m.cosine = cosine(o, ref, n);
  const auto abs_rows = row_max_err(o, ref, rows, d);
  for (int r = 0; r < rows; ++r) {
    double rn = 0, rd = 0;
    for (int c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(r) * d + c;
      const double e = static_cast<double>(o[i]) - ref[i];
      rn += e * e, rd += ref[i] * ref[i];
    }
    // NaN stays NaN (std::max would drop it depending on the argument order)
    if (std::isnan(rn) || std::isnan(m.max_row_err))
      m.max_row_err = NAN;
    else if (rd > 0)
      m.max_row_err = std::max(m.max_row_err, std::sqrt(rn / rd));
    m.max_abs_err = std::isnan(abs_rows[r]) || std::isnan(m.max_abs_err) ? NAN : std::max(m.max_abs_err, abs_rows[r]);
  }
  return m;
}

std::vector<stage_error> stage_attribution(const kernel_spec& spec, const layer_view& layer, int h, condition cond,
                                           bool causal, const transform_options& opts) {
  const auto ref = reference_head(layer, h, causal);
  const size_t n = static_cast<size_t>(layer.n_q) * layer.d_head;
  std::vector<float> o(n);
  auto run = [&](const quant_points& pts) {
    const auto p = prepare_layer(spec.with_points(pts), layer, cond, opts);
    run_head(*p, h, causal, o.data());
    return rel_err(o.data(), ref.o.data(), n);
  };
  quant_points none{false, false, false, false, false, false, false};
  std::vector<stage_error> out;
  auto one = [&](const char* name, bool quant_points::*a, bool quant_points::*b) {
    quant_points p = none;
    p.*a = true;
    if (b) p.*b = true;
    out.push_back({name, run(p)});
  };
  one("qk_cast", &quant_points::q_cast, &quant_points::k_cast);
  one("qk_acc", &quant_points::qk_acc, nullptr);
  one("p_cast", &quant_points::p_cast, nullptr);
  one("v_cast", &quant_points::v_cast, nullptr);
  one("pv_acc", &quant_points::pv_acc, nullptr);
  one("o_cast", &quant_points::o_cast, nullptr);
  out.push_back({"all", run(quant_points{})});
  return out;
}

}  // namespace attnum::attention
