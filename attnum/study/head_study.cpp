#include "attnum/study/head_study.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "attnum/attention/metrics.h"
#include "attnum/core/error.h"
#include "attnum/core/hash.h"
#include "attnum/core/same_config.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/core/version.h"
#include "attnum/io/safetensors.h"
#include "attnum/stats/stats.h"
#include "attnum/core/file.h"
#include "attnum/study/emulate.h"
#include "attnum/io/csv.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fnv1a_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  uint64_t h = core::kFnvOffset;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = core::fnv1a64(buf.data(), static_cast<size_t>(in.gcount()), h);  // FNV-1a, chained over the chunks
  }
  return fmt::format("{:016x}", h);
}

// Groups capture files by their model id (metadata "model", else the file stem before "__").
std::vector<capture_model> capture_models(const std::vector<std::string>& files,
                                          const std::vector<std::string>& outputs) {
  if (!outputs.empty() && outputs.size() != files.size())
    fail("transfer: {} --kernel-outputs files for {} --captures files (one per capture, same order)",
         outputs.size(), files.size());
  std::vector<capture_model> out;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const std::string& f = files[fi];
    const io::safetensors_file st(f);
    std::string model;
    if (auto it = st.metadata().find("model"); it != st.metadata().end()) model = it->second;
    if (model.empty()) {
      const std::string stem = fs::path(f).stem().string();
      model = stem.substr(0, stem.find("__"));
    }
    int n_layer = 0;
    while (st.find(fmt::format("layers.{}.q", n_layer))) ++n_layer;
    if (n_layer == 0) fail("{}: no tensor layers.0.q (not a capture file?)", f);
    auto it = std::find_if(out.begin(), out.end(), [&](const capture_model& m) { return m.name == model; });
    if (it == out.end()) {
      out.push_back({model, n_layer, {}, {}, {}, {}});
      it = out.end() - 1;
    }
    if (it->n_layer != n_layer)
      fail("{}: {} layers, but another capture of model '{}' has {}", f, n_layer, model, it->n_layer);
    it->files.push_back(f);
    it->hashes.push_back(fnv1a_file(f));
    if (!outputs.empty()) {
      it->outputs.push_back(outputs[fi]);
      it->output_hashes.push_back(fnv1a_file(outputs[fi]));
    }
  }
  return out;
}

}  // namespace

constexpr const char* kShapeNames[] = {"heads", "n_tok", "d_head"};

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

plan make_plan(const study_options& opt) {
  plan p;
  p.opt = opt;
  if (opt.kernels.empty()) fail("heads: --kernel needs at least one kernel");
  for (size_t i = 0; i < opt.kernels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (opt.kernels[i].name == opt.kernels[j].name) fail("heads: kernel '{}' is given twice", opt.kernels[i].name);
  if (opt.predictor_model != "kernel") {
    const auto known = attention::preset_names();
    if (std::find(known.begin(), known.end(), opt.predictor_model) == known.end())
      fail("heads: --predictor-model: expected kernel or a preset ({}), got '{}'", fmt::join(known, ", "),
           opt.predictor_model);
  }
  bool plain = false;
  for (const auto& c : opt.conditions) plain |= parse_condition_index(c) == 0;
  if (!plain) fail("heads: --conditions must include plain (scores are relative to it)");
  if (opt.zoo) {
    if (opt.n_texts < 1) fail("heads: need at least one text");
    const auto models = zoo_models(opt.zoo_opt);
    bool rotates = false;
    for (const auto& c : opt.conditions) rotates |= parse_condition_index(c) % 2 == 1;  // rotate, center+rotate
    for (size_t m = 0; m < models.size(); ++m) {
      if (rotates) opt.rotation.check(models[m].d_head);  // a user matrix of another d: exit 2 now
      p.model_names.push_back(models[m].name);
      for (int l = 0; l < models[m].n_layer; ++l)
        for (int t = 0; t < opt.n_texts; ++t)
          p.units.push_back({static_cast<int>(p.units.size()), static_cast<int>(m), l, t});
    }
    return p;
  }
  if (opt.captures.empty()) fail("heads: no capture files");
  p.sources = capture_models(opt.captures, opt.kernel_outputs);
  for (size_t m = 0; m < p.sources.size(); ++m) {
    p.model_names.push_back(p.sources[m].name);
    for (int l = 0; l < p.sources[m].n_layer; ++l)
      for (int t = 0; t < static_cast<int>(p.sources[m].files.size()); ++t)
        p.units.push_back({static_cast<int>(p.units.size()), static_cast<int>(m), l, t});
  }
  return p;
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

// ---------------------------------------------------------------------------------------------
// Checkpoints

namespace {
json source_json(const plan& p) {
  if (p.opt.zoo) return "zoo";
  json files = json::array();
  for (const auto& m : p.sources)
    for (size_t t = 0; t < m.files.size(); ++t)
    {
      json f{{"model", m.name}, {"text", t}, {"file", m.files[t]}, {"fnv1a64", m.hashes[t]}};
      if (!m.outputs.empty())
        f["kernel_outputs"] = m.outputs[t], f["kernel_outputs_fnv1a64"] = m.output_hashes[t];
      files.push_back(f);
    }
  return files;
}

// The per-row schema, written once: every field of a row (rows.csv, rows.jsonl and the unit
// checkpoints, which the merge copies) with how it is written and read back. kernel_rel_err is
// transfer-only (written when set); predictor_model reads back as "kernel" from checkpoints
// written before it existed.
struct row_field {
  const char* name;
  json (*get)(const row&);
  void (*set)(row&, const json&);
  bool transfer_only = false;  ///< a column of transfer studies only, written when set
  bool optional = false;       ///< may be absent when read back (older checkpoints)
};
#define ATTNUM_ROW_FIELD(f) \
  row_field { #f, [](const row& r) { return json(r.f); }, [](row& r, const json& j) { j.get_to(r.f); } }
const std::vector<row_field>& row_fields() {
  static const std::vector<row_field> fields = {
      ATTNUM_ROW_FIELD(model),         ATTNUM_ROW_FIELD(layer),
      ATTNUM_ROW_FIELD(head),          ATTNUM_ROW_FIELD(kv_head),
      ATTNUM_ROW_FIELD(text),          ATTNUM_ROW_FIELD(kernel),
      ATTNUM_ROW_FIELD(condition),     ATTNUM_ROW_FIELD(rel_err),
      ATTNUM_ROW_FIELD(log_err),       ATTNUM_ROW_FIELD(predicted_rel_err),
      ATTNUM_ROW_FIELD(max_row_err),   ATTNUM_ROW_FIELD(cosine),
      row_field{"kernel_rel_err", [](const row& r) { return json(r.kernel_rel_err); },
                [](row& r, const json& j) { j.get_to(r.kernel_rel_err); }, true, true},
      row_field{"predictor_model", [](const row& r) { return json(r.predictor_model); },
                [](row& r, const json& j) { j.get_to(r.predictor_model); }, false, true}};
  return fields;
}
#undef ATTNUM_ROW_FIELD
// Version columns every result row ends with.
const std::vector<std::string> kVersionColumns = {"tool_version", "predictor_version"};

// The row's fields; kernel_rel_err only when set (transfer).
json row_json_full(const row& r) {
  json j = json::object();
  for (const auto& f : row_fields())
    if (!f.transfer_only || !std::isnan(r.kernel_rel_err)) j[f.name] = f.get(r);
  return j;
}
row row_from(const json& j) {
  row r;
  for (const auto& f : row_fields())
    if (!f.optional || j.contains(f.name)) f.set(r, j.at(f.name));  // at(): throws if absent
  return r;
}
std::vector<std::string> kernel_names(const study_options& o) {
  std::vector<std::string> v;
  for (const auto& k : o.kernels) v.push_back(k.name);
  return v;
}
json kernel_specs_json(const study_options& o) {
  json a = json::array();
  for (const auto& k : o.kernels) a.push_back(attention::to_json(k));
  return a;
}
// An explicit rotation's [d, d] values (null for the Hadamard family, rebuilt from its name).
json rotation_matrix_json(const transforms::rotation& r) {
  return r.dim() > 0 ? json(r.matrix(r.dim())) : json(nullptr);
}
// The columns of rows.csv.
std::vector<std::string> row_columns(bool transfer) {
  std::vector<std::string> c;
  for (const auto& f : row_fields())
    if (transfer || !f.transfer_only) c.push_back(f.name);
  c.insert(c.end(), kVersionColumns.begin(), kVersionColumns.end());
  return c;
}
// Doubles are written in shortest round-trip form: reading a checkpoint back gives the same bits.
json config_json(const plan& p) {
  const auto& o = p.opt;
  return json{{"tool_version", std::string(tool_version())},
              {"predictor_version", std::string(predict::kPredictorVersion)},
              {"kernel_backend", std::string(kernel_backend())},
              {"source", o.zoo ? "zoo" : "captures"},
              {"zoo_n_tok", o.zoo_opt.n_tok},
              {"zoo_n_layer_cap", o.zoo_opt.n_layer_cap},
              {"zoo_seed", o.zoo_opt.seed},
              {"zoo_dtype", std::string(formats::info(o.zoo_opt.dtype).name)},
              {"n_texts", o.n_texts},
              {"captures", o.captures},
              {"kernel_outputs", o.kernel_outputs},
              {"source_files", source_json(p)},
              {"kernels", kernel_names(o)},
              {"knobs", o.knobs},
              {"kernel_specs", kernel_specs_json(o)},
              {"conditions", o.conditions},
              {"rotation", o.rotation.name()},
              {"rotation_matrix", rotation_matrix_json(o.rotation)},
              {"n_probes", o.predictor.n_probes},
              {"probe_seed", o.predictor.probe_seed},
              {"predictor_model", o.predictor_model},
              {"bootstrap_resamples", o.bootstrap_resamples},
              {"bootstrap_seed", o.bootstrap_seed},
              {"n_units", p.units.size()}};
}
}  // namespace

fs::path unit_path(const fs::path& dir, int i) {
  return dir / "checkpoints" / fmt::format("unit-{:06d}.jsonl", i);
}

void write_unit(const fs::path& dir, int i, const std::vector<row>& rows) {
  std::string text;
  for (const auto& r : rows) text += row_json_full(r).dump() + "\n";
  text += json{{"end", i}, {"n_rows", rows.size()}}.dump() + "\n";  // completeness marker
  write_file_atomic(unit_path(dir, i), text);
}

std::optional<std::vector<row>> read_unit(const fs::path& dir, int i) {
  std::ifstream f(unit_path(dir, i));
  if (!f) return std::nullopt;
  std::vector<row> rows;
  std::string line;
  bool complete = false;
  try {
    while (std::getline(f, line)) {
      const json j = json::parse(line);
      if (j.contains("end")) {
        complete = j.at("end") == i && j.at("n_rows") == rows.size();
        break;
      }
      rows.push_back(row_from(j));
    }
  } catch (const std::exception&) {
    return std::nullopt;  // a torn or foreign file: recompute the unit
  }
  if (!complete) return std::nullopt;
  return rows;
}

void write_plan(const fs::path& dir, const plan& p) {
  const fs::path f = dir / "checkpoints" / "study.json";
  const json cfg = config_json(p);
  if (fs::exists(f)) {
    std::ifstream in(f);
    json old;
    try {
      old = json::parse(in);
    } catch (const std::exception& e) {
      fail("{}: not a study config ({})", f.string(), e.what());
    }
    core::require_same_config(old, cfg, f.string(), "use another --out or remove the folder", {"command"});
    return;
  }
  json saved = cfg;
  saved["command"] = p.opt.command;
  write_file_atomic(f, saved.dump(2) + "\n");
}

plan read_plan(const fs::path& dir) {
  const fs::path f = dir / "checkpoints" / "study.json";
  std::ifstream in(f);
  if (!in) fail("{}: missing (not a head-study folder?)", f.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    fail("{}: bad JSON ({})", f.string(), e.what());
  }
  study_options o;
  try {
    o.zoo = j.at("source") == "zoo";
    o.zoo_opt.n_tok = j.at("zoo_n_tok");
    o.zoo_opt.n_layer_cap = j.at("zoo_n_layer_cap");
    o.zoo_opt.seed = j.at("zoo_seed");
    o.zoo_opt.dtype = formats::parse_format(j.at("zoo_dtype").get<std::string>());
    o.n_texts = j.at("n_texts");
    o.captures = j.at("captures").get<std::vector<std::string>>();
    o.kernel_outputs = j.at("kernel_outputs").get<std::vector<std::string>>();
    o.knobs = j.at("knobs").get<std::vector<std::string>>();
    o.kernels.clear();
    for (const auto& k : j.at("kernels").get<std::vector<std::string>>())
      o.kernels.push_back(attention::apply_knobs(attention::preset(k), o.knobs));
    o.conditions = j.at("conditions").get<std::vector<std::string>>();
    const std::string rot = j.at("rotation");
    if (j.at("rotation_matrix").is_null()) {
      auto r = transforms::rotation::parse_builtin(rot);
      if (!r) fail("{}: rotation '{}' has no rotation_matrix", f.string(), rot);
      o.rotation = *r;
    } else {
      const auto m = j.at("rotation_matrix").get<std::vector<double>>();
      const auto d = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(m.size()))));
      o.rotation = transforms::rotation::from_matrix(m, {d, d}, rot);
    }
    o.predictor.n_probes = j.at("n_probes");
    o.predictor.probe_seed = j.at("probe_seed");
    o.predictor_model = j.value("predictor_model", "kernel");
    o.bootstrap_resamples = j.at("bootstrap_resamples");
    o.bootstrap_seed = j.at("bootstrap_seed");
    o.command = j.value("command", "");
  } catch (const json::exception& e) {
    fail("{}: missing or bad field ({})", f.string(), e.what());
  }
  plan p = make_plan(o);
  core::require_same_config(j, config_json(p), f.string(), "written by a different tool or predictor version",
                            {"command"});
  return p;
}

bool run_study(const plan& p, const fs::path& dir, const run_controls& ctl) {
  if (ctl.shard_count < 1 || ctl.shard_index < 0 || ctl.shard_index >= ctl.shard_count)
    fail("--shard: expected I/N with 0 <= I < N, got {}/{}", ctl.shard_index, ctl.shard_count);
  write_plan(dir, p);
  std::vector<int> todo;
  for (const auto& u : p.units)
    if (u.index % ctl.shard_count == ctl.shard_index && !read_unit(dir, u.index)) todo.push_back(u.index);
  if (ctl.stop_after >= 0 && static_cast<int>(todo.size()) > ctl.stop_after) todo.resize(ctl.stop_after);
  std::atomic<int> done{0};
  const int n_todo = static_cast<int>(todo.size());
  attnum::progress bar("heads", n_todo, "units", ctl.progress);
  std::string first_error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(attnum::threads())
  for (int t = 0; t < n_todo; ++t) {
    try {
      const std::vector<row> rows = compute_unit(p, todo[t]);
      write_unit(dir, todo[t], rows);
    } catch (const std::exception& e) {
#pragma omp critical(attnum_study_error)
      if (first_error.empty()) first_error = e.what();
    }
    bar.update(++done);
  }
  if (!first_error.empty()) fail("heads: {}", first_error);
  for (const auto& u : p.units)
    if (!read_unit(dir, u.index)) return false;
  assemble(p, dir);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Assembly

namespace {

json js(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

// Per-head table from the rows: one entry per (model, layer, head, kernel, transform).
json heads_table(const plan& p, const std::vector<row>& rows) {
  struct acc {
    double log_err = 0, pred = 0, kernel = 0;
    int n = 0;
    std::vector<double> log_errs, kernel_errs;  ///< per text, in text order
  };
  const bool transfer = !p.opt.kernel_outputs.empty();
  // key: model index, layer, head, kernel index, condition index -> sums over texts (in the
  // fixed order of the units, so the sums are reproducible).
  std::map<std::tuple<int, int, int, int, int>, acc> sums;
  std::map<std::string, int> model_index;
  for (size_t m = 0; m < p.model_names.size(); ++m) model_index[p.model_names[m]] = static_cast<int>(m);
  for (const auto& r : rows) {
    const int ki = static_cast<int>(
        std::find_if(p.opt.kernels.begin(), p.opt.kernels.end(), [&](const auto& k) { return k.name == r.kernel; }) -
        p.opt.kernels.begin());
    auto& a = sums[{model_index.at(r.model), r.layer, r.head, ki, parse_condition_index(r.condition)}];
    a.log_err += r.log_err;
    a.pred += std::log1p(r.predicted_rel_err);
    a.kernel += std::log1p(r.kernel_rel_err);
    a.log_errs.push_back(r.log_err);
    a.kernel_errs.push_back(std::log1p(r.kernel_rel_err));
    a.n += 1;
  }
  // The standard error of a score from the per-text paired differences (transform - plain of
  // the same text): sd(d) / sqrt(n); none with one text.
  auto paired_se = [](const std::vector<double>& t, const std::vector<double>& b) {
    std::vector<double> dt(t.size());
    for (size_t i = 0; i < t.size(); ++i) dt[i] = t[i] - b[i];
    return stats::mean_and_se(dt).se;
  };
  json out = json::array();
  for (const auto& [key, a] : sums) {
    const auto [m, l, h, ki, c] = key;
    if (c == 0) continue;
    const acc& b = sums.at({m, l, h, ki, 0});
    const double lt = a.log_err / a.n, lp = b.log_err / b.n;
    const double pt = a.pred / a.n, pp = b.pred / b.n;
    const double obs = lt - lp, pred = pt - pp;
    const std::optional<double> se = paired_se(a.log_errs, b.log_errs);
    json row{{"model", p.model_names[m]}, {"layer", l}, {"head", h},
                       {"kernel", p.opt.kernels[ki].name}, {"transform", kConditionNames[c]},
                       {"observed_score", obs}, {"predicted_score", pred},
                       {"harmed", obs > 0}, {"predicted_harmed", pred > 0},
                       {"mean_log_err_plain", lp}, {"mean_log_err_transform", lt},
                       {"mean_pred_log_err_plain", pp}, {"mean_pred_log_err_transform", pt},
                       {"n_texts", a.n},
                       {"observed_se", se ? json(*se) : json(nullptr)},
                       {"label", head_label(obs, se, a.n)},
                       {"predictor_model", p.opt.predictor_model},
                       {"tool_version", std::string(tool_version())},
                       {"predictor_version", std::string(predict::kPredictorVersion)}};
    if (transfer) {
      const double ks = a.kernel / a.n - b.kernel / b.n;
      const std::optional<double> kse = paired_se(a.kernel_errs, b.kernel_errs);
      row["kernel_observed_score"] = ks;
      row["kernel_harmed"] = ks > 0;
      row["kernel_observed_se"] = kse ? json(*kse) : json(nullptr);
      row["kernel_label"] = head_label(ks, kse, a.n);
    }
    out.push_back(row);
  }
  return out;
}

const std::vector<std::string> kHeadColumns = {
    "model", "layer", "head", "kernel", "transform", "observed_score", "predicted_score",
    "harmed", "predicted_harmed", "mean_log_err_plain", "mean_log_err_transform",
    "mean_pred_log_err_plain", "mean_pred_log_err_transform", "n_texts", "observed_se", "label",
    "predictor_model", "tool_version", "predictor_version"};
const std::vector<std::string> kTransferHeadColumns = {
    "model", "layer", "head", "kernel", "transform", "observed_score", "predicted_score",
    "harmed", "predicted_harmed", "mean_log_err_plain", "mean_log_err_transform",
    "mean_pred_log_err_plain", "mean_pred_log_err_transform", "n_texts", "observed_se", "label",
    "kernel_observed_score", "kernel_harmed", "kernel_observed_se", "kernel_label",
    "predictor_model", "tool_version", "predictor_version"};

std::string to_csv(const json& table, const std::vector<std::string>& cols) { return io::csv_table(cols, table); }

std::string to_jsonl(const json& table) {
  std::string s;
  for (const auto& r : table) s += r.dump() + "\n";
  return s;
}

// The parameters that made every zoo head (the zoo records them; the report can join on
// model, layer, head).
std::string zoo_heads_csv(const plan& p) {
  std::string s =
      "model,layer,head,kv_head,d_head,n_tok,group,temperature,sink,shared_ratio,shared_kind,"
      "query_along_shared,n_outlier,outlier_scale,rope,v_dof,seed,tool_version\n";
  const char* kinds[] = {"none", "concentrated", "dense"};
  const auto models = zoo_models(p.opt.zoo_opt);
  for (size_t m = 0; m < models.size(); ++m)
    for (int l = 0; l < models[m].n_layer; ++l)
      for (const auto& h : zoo_layer_heads(p.opt.zoo_opt, static_cast<int>(m), l))
        s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:016x},{}\n",
                         models[m].name, l, h.head, h.kv_head, h.d_head, h.n_tok, h.group,
                         h.temperature, h.sink, h.shared_ratio, kinds[h.shared_kind],
                         h.query_along_shared, h.n_outlier, h.outlier_scale,
                         h.rope ? "true" : "false", h.v_dof, h.seed, tool_version());
  return s;
}

}  // namespace

std::string head_label(double score, std::optional<double> se, int n_texts) {
  if (se && n_texts >= 2) {
    const double crit = stats::student_t_quantile(0.975, n_texts - 1);
    if (std::fabs(score) < crit * *se || score == 0) return "null";
  } else if (score == 0) {
    return "null";
  }
  return score > 0 ? "harmed" : "helped";
}

json summarize(const json& heads, int n_resamples, uint64_t seed, bool transfer) {
  // Group head rows by (kernel, transform) in first-appearance order.
  std::vector<std::pair<std::string, std::string>> keys;
  std::map<std::pair<std::string, std::string>, std::vector<const json*>> groups;
  std::map<std::string, int> all_models;
  for (const auto& h : heads) {
    const auto key = std::make_pair(h.at("kernel").get<std::string>(), h.at("transform").get<std::string>());
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(&h);
    all_models.emplace(h.at("model").get<std::string>(), 0);
  }
  // Clusters: whole models when there are enough of them; with fewer (one captured model, say)
  // (model, layer) clusters: layers share a model's weights and texts, so this is the weaker
  // assumption, and it is recorded in every summary row (`cluster`, `n_clusters`). The interval
  // method follows from the cluster count (stats::cluster_interval, docs/study.md "Intervals").
  const bool by_model = static_cast<int>(all_models.size()) >= kMinModelClusters;
  const char* label_key = transfer ? "kernel_label" : "label";
  const char* se_key = transfer ? "kernel_observed_se" : "observed_se";
  json out = json::array();
  for (const auto& key : keys) {
    const auto& g = groups[key];
    std::vector<double> pred, obs, emu;
    std::vector<uint8_t> harmed, nonnull;
    std::vector<int> cluster;
    std::map<std::string, int> model_ids;
    std::map<std::pair<std::string, int>, int> cluster_ids;
    int64_t n_null = 0, n_helped = 0, n_label_harmed = 0;
    bool se_available = true;
    std::string predictor_model = "kernel";
    for (const json* h : g) {
      pred.push_back(h->at("predicted_score"));
      // Transfer: labels from the real kernel; Spearman of emulator vs kernel effects (the
      // "obs" slot then holds the kernel's score and "pred" stays the predictor's for AUC).
      harmed.push_back(h->at(transfer ? "kernel_harmed" : "harmed").get<bool>());
      obs.push_back(h->at(transfer ? "kernel_observed_score" : "observed_score"));
      emu.push_back(h->at("observed_score"));
      // Heads written before the noise floor have no label: their sign is their label.
      const std::string label =
          h->contains(label_key) ? h->at(label_key).get<std::string>() : (harmed.back() ? "harmed" : "helped");
      nonnull.push_back(label != "null");
      n_null += label == "null", n_helped += label == "helped", n_label_harmed += label == "harmed";
      se_available &= h->contains(se_key) && !h->at(se_key).is_null();
      predictor_model = h->value("predictor_model", "kernel");
      const std::string m = h->at("model");
      model_ids.emplace(m, static_cast<int>(model_ids.size()));
      const auto ck = std::make_pair(m, by_model ? 0 : h->at("layer").get<int>());
      cluster.push_back(cluster_ids.emplace(ck, static_cast<int>(cluster_ids.size())).first->second);
    }
    const stats::confusion c = stats::confusion_at(pred, harmed, 0.0);
    // Statistic `which` on the items idx; only_nonnull drops the null heads first.
    auto sub = [&](std::span<const int> idx, int which, bool only_nonnull) -> std::optional<double> {
      std::vector<double> ps, os, es;
      std::vector<uint8_t> ys;
      for (int i : idx) {
        if (only_nonnull && !nonnull[i]) continue;
        ps.push_back(pred[i]), os.push_back(obs[i]), es.push_back(emu[i]), ys.push_back(harmed[i]);
      }
      if (which == 0) return stats::roc_auc(ps, ys);
      if (which == 1) return stats::confusion_at(ps, ys, 0.0).precision();
      if (which == 2) return stats::confusion_at(ps, ys, 0.0).recall();
      return transfer ? stats::spearman(es, os) : stats::spearman(ps, os);
    };
    json s{{"kernel", key.first}, {"transform", key.second},
           {"n_heads", g.size()}, {"n_harmed", c.tp + c.fn}};
    const char* names[] = {"auc", "precision", "recall", "spearman"};
    std::vector<int> all(g.size());
    for (size_t i = 0; i < g.size(); ++i) all[i] = static_cast<int>(i);
    int64_t dropped = 0;
    std::string method;
    for (int nn = 0; nn < 2; ++nn)
      for (int w = 0; w < (nn ? 3 : 4); ++w) {
        const std::string name = std::string(names[w]) + (nn ? "_nonnull" : "");
        s[name] = js(sub(all, w, nn == 1));
        stats::bootstrap_options bo{n_resamples, seed + static_cast<uint64_t>(w), 0.95};
        bo.range_lo = w == 3 ? -1.0 : 0.0, bo.range_hi = 1.0;
        const stats::interval iv = stats::cluster_interval(
            cluster, [&](std::span<const int> idx) { return sub(idx, w, nn == 1); }, bo);
        s[name + "_lo"] = js(iv.lo);
        s[name + "_hi"] = js(iv.hi);
        s[name + "_ci_dropped"] = iv.dropped;
        if (nn == 0) dropped += iv.dropped;
        method = iv.method;
      }
    s["tp"] = c.tp, s["fp"] = c.fp, s["fn"] = c.fn, s["tn"] = c.tn;
    s["n_models"] = model_ids.size();
    s["cluster"] = by_model ? "model" : "model+layer";
    s["n_clusters"] = cluster_ids.size();
    s["ci_method"] = method;
    s["ci_level"] = 0.95;
    s["ci_dropped"] = dropped;
    s["predictor_model"] = predictor_model;
    s["n_predicted_harmed"] = c.tp + c.fp;
    s["n_null"] = n_null;
    s["n_helped"] = n_helped;
    s["n_label_harmed"] = n_label_harmed;
    s["n_nonnull"] = n_helped + n_label_harmed;
    {
      std::vector<double> pn;
      std::vector<uint8_t> yn;
      for (size_t i = 0; i < g.size(); ++i)
        if (nonnull[i]) pn.push_back(pred[i]), yn.push_back(harmed[i]);
      const stats::confusion cn = stats::confusion_at(pn, yn, 0.0);
      s["n_predicted_harmed_nonnull"] = cn.tp + cn.fp;
      s["fp_nonnull"] = cn.fp;
    }
    s["se_available"] = se_available;
    s["label_rule"] = se_available
                          ? "null if |score| < t(0.975, n_texts-1) * se (paired over texts), else sign"
                          : "sign of the score (one text: no standard error; null only if 0)";
    if (transfer) {
      s["emulator"] = key.first;
      s["kernel"] = "kernel-outputs";
      s["spearman_predicted"] = js(stats::spearman(pred, obs));
      int64_t emu_harmed = 0;
      for (double e : emu) emu_harmed += e > 0;
      s["n_harmed_emulator"] = emu_harmed;
    }
    s["tool_version"] = std::string(tool_version());
    s["predictor_version"] = std::string(predict::kPredictorVersion);
    out.push_back(s);
  }
  return out;
}

std::string summary_notes(const json& summary) {
  std::vector<std::string> lines;
  int64_t dropped = 0;
  auto add = [&](std::string l) {
    if (std::find(lines.begin(), lines.end(), l) == lines.end()) lines.push_back(std::move(l));
  };
  for (const auto& s : summary) {
    const std::string method = s.value("ci_method", "cluster-bootstrap-percentile");
    const int64_t n = s.value("n_clusters", 0);
    const std::string kind = s.value("cluster", "model") == "model" ? "models" : "(model, layer) pairs";
    std::string what;
    if (method == "cluster-jackknife-t")
      what = fmt::format("95% delete-one-cluster jackknife with t({}) critical values over {} {} "
                         "(fewer than {} clusters: no percentile bootstrap)",
                         n - 1, n, kind, stats::kMinBootstrapClusters);
    else if (method == "cluster-bootstrap-percentile")
      what = fmt::format("95% percentile bootstrap resampling {} {} with replacement", n, kind);
    else
      what = fmt::format("{} ({} {})", method, n, kind);
    add(fmt::format("intervals: {}", what));
    dropped += s.value("ci_dropped", int64_t{0});
    add(fmt::format("labels: {}", s.value("label_rule", "sign of the score")));
    const std::string pm = s.value("predictor_model", "kernel");
    add(pm == "kernel" ? std::string("predictor: models each kernel's own numerics (kernel-aware)")
                       : fmt::format("predictor: one fixed model ({}) for every kernel", pm));
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  out += fmt::format("undefined statistics in resamples or leave-one-out fits (ci_dropped, all rows): {}\n",
                     dropped);
  return out;
}

assembled assemble_tables(const plan& p, const fs::path& dir) {
  assembled a;
  for (const auto& u : p.units) {
    auto rows = read_unit(dir, u.index);
    if (!rows) fail("{}: missing or incomplete unit {} (model {}, layer {}, text {})",
                    unit_path(dir, u.index).string(), u.index, p.model_names[u.model], u.layer, u.text);
    a.rows.insert(a.rows.end(), rows->begin(), rows->end());
  }
  a.heads = heads_table(p, a.rows);
  a.summary = summarize(a.heads, p.opt.bootstrap_resamples, p.opt.bootstrap_seed,
                        !p.opt.kernel_outputs.empty());
  return a;
}

json assemble(const plan& p, const fs::path& dir) {
  const assembled a = assemble_tables(p, dir);
  json rows = json::array();
  for (const auto& r : a.rows) {
    json j = row_json_full(r);
    j["tool_version"] = std::string(tool_version());
    j["predictor_version"] = std::string(predict::kPredictorVersion);
    rows.push_back(j);
  }
  json meta{{"tool_version", std::string(tool_version())},
            {"predictor_version", std::string(predict::kPredictorVersion)},
            {"command", p.opt.command},
            {"kernels", kernel_names(p.opt)},
            {"knobs", p.opt.knobs},
            {"kernel_specs", kernel_specs_json(p.opt)},
            {"rotation", p.opt.rotation.name()},
            {"kernel_outputs", p.opt.kernel_outputs},
            {"conditions", p.opt.conditions},
            {"predictor_model", p.opt.predictor_model},
            {"source", source_json(p)},
            {"kernel_backend", std::string(kernel_backend())},
            {"n_units", p.units.size()},
            {"zoo", {{"n_tok", p.opt.zoo_opt.n_tok}, {"seed", p.opt.zoo_opt.seed},
                     {"dtype", formats::info(p.opt.zoo_opt.dtype).name},
                     {"n_layer_cap", p.opt.zoo_opt.n_layer_cap}, {"n_texts", p.opt.n_texts}}}};
  write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
  const bool transfer = !p.opt.kernel_outputs.empty();
  write_file_atomic(dir / "rows.csv", to_csv(rows, row_columns(transfer)));
  write_file_atomic(dir / "rows.jsonl", to_jsonl(rows));
  write_file_atomic(dir / "heads.csv", to_csv(a.heads, transfer ? kTransferHeadColumns : kHeadColumns));
  write_file_atomic(dir / "heads.jsonl", to_jsonl(a.heads));
  write_file_atomic(dir / "summary.json", a.summary.dump(2) + "\n");
  if (p.opt.zoo) write_file_atomic(dir / "zoo_heads.csv", zoo_heads_csv(p));
  return a.summary;
}

json merge(const std::vector<fs::path>& dirs, const fs::path& out) {
  if (dirs.empty()) fail("merge: no shard folders");
  const plan p = read_plan(dirs.front());
  for (const auto& d : dirs) {
    const plan q = read_plan(d);
    core::require_same_config(config_json(q), config_json(p), fmt::format("merge: {}", d.string()),
                              fmt::format("it holds another study than {}", dirs.front().string()));
  }
  write_plan(out, p);
  for (const auto& u : p.units) {
    if (read_unit(out, u.index)) continue;
    for (const auto& d : dirs)
      if (auto rows = read_unit(d, u.index)) {
        write_unit(out, u.index, *rows);
        break;
      }
  }
  return assemble(p, out);
}

}  // namespace attnum::study
