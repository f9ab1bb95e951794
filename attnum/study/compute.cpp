// The head study's compute step: one unit under every kernel and condition (study/compute.h).
#include "attnum/study/compute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "attnum/attention/metrics.h"
#include "attnum/core/error.h"
#include "attnum/io/safetensors.h"
#include "attnum/study/emulate.h"

namespace attnum::study {

namespace {
constexpr const char* kShapeNames[] = {"heads", "n_tok", "d_head"};
}  // namespace

layer_data load_capture_layer(const std::string& file, int l) {
  const io::safetensors_file st(file);
  layer_data L;
  if (auto it = st.metadata().find("model"); it != st.metadata().end()) L.model = it->second;
  const auto& q = st.at(fmt::format("layers.{}.q", l));
  const auto& k = st.at(fmt::format("layers.{}.k", l));
  const auto& v = st.at(fmt::format("layers.{}.v", l));
  for (const auto* t : {&q, &k, &v})
    if (t->shape.size() != 3) fail("{}: tensor {} has {} dims, expected [heads, n_tok, d_head]", file, t->name, t->shape.size());
  for (const auto* t : {&q, &k, &v})  // every count is an int >= 1 (docs/reliability.md)
    for (size_t i = 0; i < 3; ++i)
      if (t->shape[i] < 1 || t->shape[i] > INT32_MAX)
        fail("{}: tensor {}: {} = {}: expected 1 <= {} < 2^31", file, t->name, kShapeNames[i], t->shape[i], kShapeNames[i]);
  L.n_head = static_cast<int>(q.shape[0]), L.n = static_cast<int>(q.shape[1]), L.d = static_cast<int>(q.shape[2]);
  L.n_head_kv = static_cast<int>(k.shape[0]);
  if (k.shape != v.shape || k.shape[1] != L.n || k.shape[2] != L.d || L.n_head_kv == 0 ||
      L.n_head % L.n_head_kv != 0)
    fail("{}: layer {}: q {}x{}x{}, k/v must be [n_head_kv, {}, {}] with n_head a multiple of n_head_kv",
         file, l, L.n_head, L.n, L.d, L.n, L.d);
  L.q = q.to_float(), L.k = k.to_float(), L.v = v.to_float();
  for (const auto* x : {&L.q, &L.k, &L.v})
    for (float y : *x)
      if (!std::isfinite(y)) fail("{}: layer {}: non-finite value in q, k or v", file, l);
  return L;
}

layer_data load_layer(const plan& p, int i) {
  ATTNUM_ASSERT(i >= 0 && i < static_cast<int>(p.units.size()), "unit {} out of range", i);
  const unit& u = p.units[i];
  layer_data L;
  L.model = p.model_names[u.model];
  if (!p.opt.zoo) {
    L = load_capture_layer(p.sources[u.model].files[u.text], u.layer);
    L.model = p.model_names[u.model];
    return L;
  }
  const zoo_model zm = zoo_models(p.opt.zoo_opt)[u.model];
  L.n_head = zm.n_head, L.n_head_kv = zm.n_head_kv, L.n = p.opt.zoo_opt.n_tok, L.d = zm.d_head;
  const size_t hd = static_cast<size_t>(L.n) * L.d;
  L.q.resize(hd * L.n_head), L.k.resize(hd * L.n_head_kv), L.v.resize(hd * L.n_head_kv);
  for (int kvh = 0; kvh < zm.n_head_kv; ++kvh) {
    const zoo_group z = zoo_generate(p.opt.zoo_opt, u.model, u.layer, kvh, u.text);
    const int g = static_cast<int>(z.heads.size());
    std::copy(z.q.begin(), z.q.end(), L.q.begin() + static_cast<size_t>(kvh) * g * hd);
    std::copy(z.k.begin(), z.k.end(), L.k.begin() + kvh * hd);
    std::copy(z.v.begin(), z.v.end(), L.v.begin() + kvh * hd);
  }
  return L;
}

std::vector<row> compute_unit(const plan& p, int i) {
  const unit& u = p.units[i];
  const auto& opt = p.opt;
  const layer_data L = load_layer(p, i);
  std::vector<int> conds;
  for (const auto& c : opt.conditions) conds.push_back(parse_condition_index(c));
  const int n = L.n, d = L.d, group = L.n_head / L.n_head_kv;
  const size_t hd = static_cast<size_t>(n) * d;
  // 1. Prepare the layer once per (kernel, condition): scales can span its heads. A fixed
  //    predictor model gets its own runs (one per condition): its predictions are the same for
  //    every kernel.
  const layer_operands ops{L.q.data(), L.k.data(), L.v.data(), L.n_head, L.n_head_kv, n, d};
  std::vector<std::shared_ptr<const prepared_run>> runs;
  for (const auto& k : opt.kernels)
    for (int c : conds) runs.push_back(prepare_run(k, c, ops, {opt.rotation, false}));
  // The fixed model is the named preset with the run's knobs (e.g. transform_dtype) applied.
  const bool fixed = opt.predictor_model != "kernel";
  std::vector<std::shared_ptr<const prepared_run>> fixed_runs;
  if (fixed) {
    const auto spec = attention::apply_knobs(attention::preset(opt.predictor_model), opt.knobs);
    for (int c : conds) fixed_runs.push_back(prepare_run(spec, c, ops, {opt.rotation, false}));
  }
  // Transfer: the real kernel's outputs of this layer, per condition.
  const bool transfer = !opt.kernel_outputs.empty();
  std::vector<std::vector<float>> kernel_o(conds.size());
  if (transfer) {
    const std::string& file = p.sources[u.model].outputs[u.text];
    const io::safetensors_file st(file);
    for (size_t ci = 0; ci < conds.size(); ++ci) {
      const auto& t = st.at(fmt::format("layers.{}.o.{}", u.layer, kConditionNames[conds[ci]]));
      if (t.shape != std::vector<int64_t>{L.n_head, n, d})
        fail("{}: tensor {} must be [{}, {}, {}] like the capture's q", file, t.name, L.n_head, n, d);
      kernel_o[ci] = t.to_float();
    }
  }
  // 2. Per head: the fp64 reference and the predictor's context once, then every run.
  std::vector<row> rows;
  // var_k per (kernel, condition) of the current kv head: the group's query heads share it.
  std::vector<std::vector<double>> var_k(runs.size()), fixed_var_k(fixed_runs.size());
  for (int h = 0; h < L.n_head; ++h) {
    const int kvh = h / group;
    const bool new_kv = h % group == 0;
    const float* qh = L.q.data() + h * hd;
    const float* kh = L.k.data() + kvh * hd;
    const float* vh = L.v.data() + kvh * hd;
    const reference ref = reference_causal(qh, kh, vh, n, d);
    predict::head_inputs base;
    base.n_q = n, base.n_kv = n, base.d = d;
    base.p = ref.p.data(), base.o = ref.o.data(), base.row_sum = ref.row_sum.data(), base.v = vh;
    const predict::context_ptr ctx = predict::make_context(base);
    // The predicted rel_err of one run (r) of condition ci. The V, P and output terms do not
    // depend on the condition (V is never transformed; P and O are the ideal ones): computed
    // with the first condition (into vpo), reused for the others.
    auto predict_run = [&](const head_run& r, const std::vector<double>& vk, size_t ci,
                           predict::prediction& vpo) {
      predict::head_inputs in = base;
      in.q = r.q.data(), in.k = r.k.data();
      in.var_q = r.var_q.empty() ? nullptr : r.var_q.data();
      in.var_k = vk.empty() ? nullptr : vk.data();
      in.var_v = r.var_v.empty() ? nullptr : r.var_v.data();
      in.p_cast = r.p_cast;
      in.o_cast = r.o_cast;
      in.out_fmt = r.out_fmt;
      if (ci == 0) vpo = predict::predict_terms(*ctx, in, opt.predictor, {false, false, true, true, true});
      predict::prediction pr =
          predict::predict_terms(*ctx, in, opt.predictor, {true, true, false, false, false});
      pr.total += vpo.total;
      if (!std::isfinite(pr.total)) pr.total = std::nan("");
      return pr.o_norm2 > 0 ? std::sqrt(pr.total / pr.o_norm2) : 0.0;
    };
    std::vector<double> fixed_pred(conds.size());
    if (fixed) {
      predict::prediction vpo;
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        head_run r = run_prepared(*fixed_runs[ci], h, ci == 0, new_kv);
        if (new_kv) fixed_var_k[ci] = std::move(r.var_k);
        fixed_pred[ci] = predict_run(r, fixed_var_k[ci], ci, vpo);
      }
    }
    for (size_t ki = 0; ki < opt.kernels.size(); ++ki) {
      predict::prediction vpo;
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        const size_t ri = ki * conds.size() + ci;
        // A fixed predictor needs no variances of the kernel's own casts.
        head_run r = run_prepared(*runs[ri], h, !fixed && ci == 0, !fixed && new_kv);
        if (new_kv && !fixed) var_k[ri] = std::move(r.var_k);
        const double pred = fixed ? fixed_pred[ci] : predict_run(r, var_k[ri], ci, vpo);
        const attention::error_metrics e = attention::measure(r.o.data(), ref.o.data(), n, d);
        if (!std::isfinite(e.rel_err) || !std::isfinite(pred))
          fail("model {} layer {} head {} text {}: kernel {} under {} gives a non-finite output or "
               "prediction (the real kernel would too, e.g. an all-zero V channel with an "
               "unguarded per-channel scale)",
               L.model, u.layer, h, u.text, opt.kernels[ki].name, kConditionNames[conds[ci]]);
        row w;
        w.model = L.model;
        w.layer = u.layer, w.head = h, w.kv_head = kvh, w.text = u.text;
        w.kernel = opt.kernels[ki].name;
        w.condition = kConditionNames[conds[ci]];
        w.rel_err = e.rel_err, w.log_err = std::log1p(e.rel_err);
        w.predicted_rel_err = pred;
        w.max_row_err = e.max_row_err, w.cosine = e.cosine;
        w.predictor_model = opt.predictor_model;
        if (transfer) {
          const std::vector<float> ko(kernel_o[ci].begin() + h * hd, kernel_o[ci].begin() + (h + 1) * hd);
          w.kernel_rel_err = attention::measure(ko.data(), ref.o.data(), n, d).rel_err;
        }
        rows.push_back(std::move(w));
      }
    }
  }
  return rows;
}

}  // namespace attnum::study
