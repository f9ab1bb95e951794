// The head study's compute step: one unit under every kernel and condition (study/compute.h).
#include "attnum/study/compute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>

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
    if (t->shape.size() != 3)
      fail("{}: tensor {} has {} dims, expected [heads, n_tok, d_head]", file, t->name, t->shape.size());
  for (const auto* t : {&q, &k, &v})  // every count is an int >= 1 (docs/reliability.md)
    for (size_t i = 0; i < 3; ++i)
      if (t->shape[i] < 1 || t->shape[i] > INT32_MAX)
        fail("{}: tensor {}: {} = {}: expected 1 <= {} < 2^31", file, t->name, kShapeNames[i], t->shape[i],
             kShapeNames[i]);
  L.n_head = static_cast<int>(q.shape[0]), L.n = static_cast<int>(q.shape[1]), L.d = static_cast<int>(q.shape[2]);
  L.n_head_kv = static_cast<int>(k.shape[0]);
  if (k.shape != v.shape || k.shape[1] != L.n || k.shape[2] != L.d || L.n_head_kv == 0 || L.n_head % L.n_head_kv != 0)
    fail("{}: layer {}: q {}x{}x{}, k/v must be [n_head_kv, {}, {}] with n_head a multiple of n_head_kv", file, l,
         L.n_head, L.n, L.d, L.n, L.d);
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

std::vector<std::vector<row>> compute_unit(std::span<const plan> plans, int i) {
  ATTNUM_ASSERT(!plans.empty(), "compute_unit: no plan");
  const plan& p = plans.front();
  for (const plan& q : plans)
    ATTNUM_ASSERT(q.units.size() == p.units.size() && q.opt.conditions == p.opt.conditions &&
                      kernel_names(q.opt) == kernel_names(p.opt) && q.opt.kernel_outputs == p.opt.kernel_outputs,
                  "compute_unit: plans computed together must differ in their predictor model only");
  const unit& u = p.units[i];
  const auto& opt = p.opt;
  const layer_data L = load_layer(p, i);
  std::vector<int> conds;
  for (const auto& c : opt.conditions) conds.push_back(parse_condition_index(c));
  const int n = L.n, d = L.d, group = L.n_head / L.n_head_kv;
  const size_t hd = static_cast<size_t>(n) * d;
  // The predictor models of the plans: the kernel-aware one (its inputs are each kernel run's
  // casts) and the fixed ones (one preset each; the same predictions for every kernel).
  bool aware = false;
  std::vector<std::string> fixed_models;
  std::vector<int> model_of(plans.size(), -1);  // -1: kernel-aware, else into fixed_models
  for (size_t j = 0; j < plans.size(); ++j) {
    const std::string& m = plans[j].opt.predictor_model;
    if (m == "kernel") {
      aware = true;
      continue;
    }
    auto it = std::find(fixed_models.begin(), fixed_models.end(), m);
    if (it == fixed_models.end()) it = fixed_models.insert(fixed_models.end(), m);
    model_of[j] = static_cast<int>(it - fixed_models.begin());
  }
  // 1. Prepare the layer once per (kernel, condition): scales can span its heads. A fixed
  //    predictor model gets its own runs (one per condition) unless it is one of the kernels.
  const layer_operands ops{L.q.data(), L.k.data(), L.v.data(), L.n_head, L.n_head_kv, n, d};
  std::vector<std::shared_ptr<const prepared_run>> runs;
  for (const auto& k : opt.kernels)
    for (int c : conds) runs.push_back(prepare_run(k, c, ops, {opt.rotation, false}));
  // The fixed model is the named preset with the run's knobs (e.g. transform_dtype) applied.
  std::vector<std::vector<std::shared_ptr<const prepared_run>>> fixed_runs(fixed_models.size());
  for (size_t f = 0; f < fixed_models.size(); ++f) {
    const auto spec = attention::apply_knobs(attention::preset(fixed_models[f]), opt.knobs);
    const nlohmann::json spec_json = attention::to_json(spec);
    size_t same = opt.kernels.size();
    for (size_t ki = 0; ki < opt.kernels.size() && same == opt.kernels.size(); ++ki)
      if (attention::to_json(opt.kernels[ki]) == spec_json) same = ki;
    for (size_t ci = 0; ci < conds.size(); ++ci)
      fixed_runs[f].push_back(same < opt.kernels.size() ? runs[same * conds.size() + ci]
                                                        : prepare_run(spec, conds[ci], ops, {opt.rotation, false}));
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
  std::vector<std::vector<row>> rows(plans.size());
  // var_k per (kernel, condition) of the current kv head: the group's query heads share it.
  std::vector<std::vector<double>> var_k(runs.size()), shared_k(runs.size());
  std::vector<std::vector<std::vector<double>>> fixed_var_k(fixed_models.size(),
                                                            std::vector<std::vector<double>>(conds.size()));
  auto fixed_shared_k = fixed_var_k;
  // Predictor v2: the runs also give each channel's shared rounding of K and V.
  const bool shared = opt.predictor.version == predict::version::v2;
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
    auto predict_run = [&](const head_run& r, const std::vector<double>& vk, const std::vector<double>& sk, size_t ci,
                           predict::prediction& vpo) {
      predict::head_inputs in = base;
      in.q = r.q.data(), in.k = r.k.data();
      in.var_q = r.var_q.empty() ? nullptr : r.var_q.data();
      in.var_k = vk.empty() ? nullptr : vk.data();
      in.var_v = r.var_v.empty() ? nullptr : r.var_v.data();
      in.shared_k = sk.empty() ? nullptr : sk.data();
      in.shared_v = r.shared_v.empty() ? nullptr : r.shared_v.data();
      in.p_cast = r.p_cast;
      in.o_cast = r.o_cast;
      in.out_fmt = r.out_fmt;
      if (ci == 0) vpo = predict::predict_terms(*ctx, in, opt.predictor, {false, false, true, true, true});
      predict::prediction pr = predict::predict_terms(*ctx, in, opt.predictor, {true, true, false, false, false});
      pr.total += vpo.total;
      if (!std::isfinite(pr.total)) pr.total = std::nan("");
      return pr.o_norm2 > 0 ? std::sqrt(pr.total / pr.o_norm2) : 0.0;
    };
    // A fixed model needs its casts' operands and variances, never its output.
    std::vector<std::vector<double>> fixed_pred(fixed_models.size(), std::vector<double>(conds.size()));
    for (size_t f = 0; f < fixed_models.size(); ++f) {
      predict::prediction vpo;
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        head_run r = run_prepared(*fixed_runs[f][ci], h, {false, true, ci == 0, new_kv, shared});
        if (new_kv) fixed_var_k[f][ci] = std::move(r.var_k), fixed_shared_k[f][ci] = std::move(r.shared_k);
        fixed_pred[f][ci] = predict_run(r, fixed_var_k[f][ci], fixed_shared_k[f][ci], ci, vpo);
      }
    }
    for (size_t ki = 0; ki < opt.kernels.size(); ++ki) {
      predict::prediction vpo;
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        const size_t ri = ki * conds.size() + ci;
        // The kernel's output always (the row's errors); its casts only for the kernel-aware
        // predictor.
        head_run r = run_prepared(*runs[ri], h, {true, aware, aware && ci == 0, aware && new_kv, shared});
        if (new_kv && aware) var_k[ri] = std::move(r.var_k), shared_k[ri] = std::move(r.shared_k);
        const double aware_pred = aware ? predict_run(r, var_k[ri], shared_k[ri], ci, vpo) : std::nan("");
        const attention::error_metrics e = attention::measure(r.o.data(), ref.o.data(), n, d);
        double kernel_rel_err = std::nan("");
        if (transfer) {
          const std::vector<float> ko(kernel_o[ci].begin() + h * hd, kernel_o[ci].begin() + (h + 1) * hd);
          kernel_rel_err = attention::measure(ko.data(), ref.o.data(), n, d).rel_err;
        }
        for (size_t j = 0; j < plans.size(); ++j) {
          const double pred = model_of[j] < 0 ? aware_pred : fixed_pred[model_of[j]][ci];
          if (!std::isfinite(e.rel_err) || !std::isfinite(pred))
            fail(
                "model {} layer {} head {} text {}: kernel {} under {} gives a non-finite output or "
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
          w.predictor_model = plans[j].opt.predictor_model;
          w.predictor_version = predict::version_string(opt.predictor.version);
          w.kernel_rel_err = kernel_rel_err;
          rows[j].push_back(std::move(w));
        }
      }
    }
  }
  return rows;
}

std::vector<row> compute_unit(const plan& p, int i) { return compute_unit(std::span<const plan>(&p, 1), i).front(); }

}  // namespace attnum::study
