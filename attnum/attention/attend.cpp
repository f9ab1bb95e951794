#include "attnum/attention/attend.h"

#include <algorithm>

#include "attnum/attention/metrics.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {

attend_result attend(const kernel_spec& spec, const layer_view& layer, condition cond, bool causal,
                     const transform_options& opts) {
  const auto p = prepare_layer(spec, layer, cond, opts);
  attend_result r;
  const size_t per = static_cast<size_t>(layer.n_q) * layer.d_head;
  r.o.assign(per * layer.n_head, 0.0f);
  r.heads.resize(layer.n_head);
  worker_errors errors;  // an error in a worker thread reaches the caller
#pragma omp parallel for schedule(dynamic, 1)
  for (int h = 0; h < layer.n_head; ++h) errors.run([&] {
    head_report& hr = r.heads[h];
    hr.head = h;
    hr.kv_head = p->kv_head(h);
    float* o = r.o.data() + per * h;
    run_head(*p, h, causal, o, &hr.stats);
    const auto ref = reference_head(layer, h, causal);
    hr.rel_err = rel_err(o, ref.o.data(), per);
    hr.log_err = log_err(hr.rel_err);
    hr.cosine = cosine(o, ref.o.data(), per);
    const auto rows = row_max_err(o, ref.o.data(), layer.n_q, layer.d_head);
    for (double e : rows) hr.max_row_err = std::isnan(e) ? e : std::max(hr.max_row_err, e);
  });
  errors.rethrow();
  return r;
}

}  // namespace attnum::attention
