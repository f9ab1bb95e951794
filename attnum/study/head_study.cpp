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

#include "attnum/core/error.h"
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
  uint64_t h = 0xcbf29ce484222325ULL;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      h = (h ^ static_cast<uint8_t>(buf[i])) * 0x100000001b3ULL;
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

layer_data load_capture_layer(const std::string& file, int l) {
  const io::safetensors_file st(file);
  layer_data L;
  if (auto it = st.metadata().find("model"); it != st.metadata().end()) L.model = it->second;
  const auto& q = st.at(fmt::format("layers.{}.q", l));
  const auto& k = st.at(fmt::format("layers.{}.k", l));
  const auto& v = st.at(fmt::format("layers.{}.v", l));
  for (const auto* t : {&q, &k, &v})
    if (t->shape.size() != 3) fail("{}: tensor {} has {} dims, expected [heads, n_tok, d_head]", file, t->name, t->shape.size());
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
  const auto known = study_kernel_names();
  for (const auto& k : opt.kernels)
    if (std::find(known.begin(), known.end(), k) == known.end())
      fail("heads: kernel '{}' is not available (known: {})", k, fmt::join(known, ", "));
  bool plain = false;
  for (const auto& c : opt.conditions) plain |= parse_condition_index(c) == 0;
  if (!plain) fail("heads: --conditions must include plain (scores are relative to it)");
  if (opt.zoo) {
    if (opt.n_texts < 1) fail("heads: need at least one text");
    const auto models = zoo_models(opt.zoo_opt);
    for (size_t m = 0; m < models.size(); ++m) {
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

namespace {

// Error metrics of a kernel output o (float) against the fp64 reference (both [n, d]).
struct err_metrics {
  double rel_err, max_row_err, cosine;
};
err_metrics errors(const std::vector<float>& o, const std::vector<double>& ref, int n, int d) {
  double num = 0, den = 0, dot = 0, o2 = 0, max_row = 0;
  for (int i = 0; i < n; ++i) {
    double rn = 0, rd = 0;
    for (int c = 0; c < d; ++c) {
      const double a = o[i * d + c], b = ref[i * d + c];
      rn += (a - b) * (a - b), rd += b * b, dot += a * b, o2 += a * a;
    }
    num += rn, den += rd;
    if (rd > 0) max_row = std::max(max_row, std::sqrt(rn / rd));
  }
  const double cos = (o2 > 0 && den > 0) ? dot / std::sqrt(o2 * den) : 0.0;
  return {den > 0 ? std::sqrt(num / den) : 0.0, max_row, cos};
}

}  // namespace

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
  // 1. Prepare the layer once per (kernel, condition): scales can span its heads.
  std::vector<std::shared_ptr<const prepared_run>> runs;
  for (const auto& k : opt.kernels)
    for (int c : conds)
      runs.push_back(prepare_run(k, c, {L.q.data(), L.k.data(), L.v.data(), L.n_head, L.n_head_kv, n, d},
                                 opt.rotation_seed));
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
  std::vector<std::vector<double>> var_k(runs.size());
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
    for (size_t ki = 0; ki < opt.kernels.size(); ++ki) {
      // The V, P and output terms do not depend on the condition (V is never transformed; P and
      // O are the ideal ones): computed with the first condition, reused for the others.
      predict::prediction vpo;
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        const size_t ri = ki * conds.size() + ci;
        head_run r = run_prepared(*runs[ri], h, ci == 0, new_kv);
        if (new_kv) var_k[ri] = std::move(r.var_k);
        predict::head_inputs in = base;
        in.q = r.q.data(), in.k = r.k.data();
        in.var_q = r.var_q.empty() ? nullptr : r.var_q.data();
        in.var_k = var_k[ri].empty() ? nullptr : var_k[ri].data();
        in.var_v = r.var_v.empty() ? nullptr : r.var_v.data();
        in.p_cast = r.p_cast;
        in.o_cast = r.o_cast;
        in.out_fmt = r.out_fmt;
        if (ci == 0) vpo = predict::predict_terms(*ctx, in, opt.predictor, {false, false, true, true, true});
        predict::prediction pr =
            predict::predict_terms(*ctx, in, opt.predictor, {true, true, false, false, false});
        pr.total += vpo.total;
        const err_metrics e = errors(r.o, ref.o, n, d);
        if (!std::isfinite(e.rel_err) || !std::isfinite(pr.total))
          fail("model {} layer {} head {} text {}: kernel {} under {} gives a non-finite output or "
               "prediction (the real kernel would too, e.g. an all-zero V channel with an "
               "unguarded per-channel scale)",
               L.model, u.layer, h, u.text, opt.kernels[ki], kConditionNames[conds[ci]]);
        row w;
        w.model = L.model;
        w.layer = u.layer, w.head = h, w.kv_head = kvh, w.text = u.text;
        w.kernel = opt.kernels[ki];
        w.condition = kConditionNames[conds[ci]];
        w.rel_err = e.rel_err, w.log_err = std::log1p(e.rel_err);
        w.predicted_rel_err = pr.o_norm2 > 0 ? std::sqrt(pr.total / pr.o_norm2) : 0.0;
        w.max_row_err = e.max_row_err, w.cosine = e.cosine;
        if (transfer) {
          const std::vector<float> ko(kernel_o[ci].begin() + h * hd, kernel_o[ci].begin() + (h + 1) * hd);
          w.kernel_rel_err = errors(ko, ref.o, n, d).rel_err;
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

json row_json(const row& r) {
  return json{{"model", r.model},         {"layer", r.layer},
              {"head", r.head},           {"kv_head", r.kv_head},
              {"text", r.text},           {"kernel", r.kernel},
              {"condition", r.condition}, {"rel_err", r.rel_err},
              {"log_err", r.log_err},     {"predicted_rel_err", r.predicted_rel_err},
              {"max_row_err", r.max_row_err}, {"cosine", r.cosine}};
}
json row_json_full(const row& r) {
  json j = row_json(r);
  if (!std::isnan(r.kernel_rel_err)) j["kernel_rel_err"] = r.kernel_rel_err;
  return j;
}
row row_from(const json& j) {
  row r;
  r.model = j.at("model"), r.layer = j.at("layer"), r.head = j.at("head");
  r.kv_head = j.at("kv_head"), r.text = j.at("text"), r.kernel = j.at("kernel");
  r.condition = j.at("condition"), r.rel_err = j.at("rel_err"), r.log_err = j.at("log_err");
  r.predicted_rel_err = j.at("predicted_rel_err"), r.max_row_err = j.at("max_row_err");
  r.cosine = j.at("cosine");
  if (j.contains("kernel_rel_err")) r.kernel_rel_err = j.at("kernel_rel_err");
  return r;
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
              {"n_texts", o.n_texts},
              {"captures", o.captures},
              {"kernel_outputs", o.kernel_outputs},
              {"source_files", source_json(p)},
              {"kernels", o.kernels},
              {"conditions", o.conditions},
              {"rotation_seed", o.rotation_seed},
              {"n_probes", o.predictor.n_probes},
              {"probe_seed", o.predictor.probe_seed},
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
    for (auto it = cfg.begin(); it != cfg.end(); ++it)
      if (!old.contains(it.key()) || old[it.key()] != it.value())
        fail("{}: field '{}' is {} but this run has {}; use another --out or remove the folder",
             f.string(), it.key(), old.value(it.key(), json()).dump(), it.value().dump());
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
    o.n_texts = j.at("n_texts");
    o.captures = j.at("captures").get<std::vector<std::string>>();
    o.kernel_outputs = j.at("kernel_outputs").get<std::vector<std::string>>();
    o.kernels = j.at("kernels").get<std::vector<std::string>>();
    o.conditions = j.at("conditions").get<std::vector<std::string>>();
    o.rotation_seed = j.at("rotation_seed");
    o.predictor.n_probes = j.at("n_probes");
    o.predictor.probe_seed = j.at("probe_seed");
    o.bootstrap_resamples = j.at("bootstrap_resamples");
    o.bootstrap_seed = j.at("bootstrap_seed");
    o.command = j.value("command", "");
  } catch (const json::exception& e) {
    fail("{}: missing or bad field ({})", f.string(), e.what());
  }
  plan p = make_plan(o);
  if (config_json(p) != [&] {
        json c = j;
        c.erase("command");
        return c;
      }())
    fail("{}: written by a different tool or predictor version", f.string());
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
  };
  const bool transfer = !p.opt.kernel_outputs.empty();
  // key: model index, layer, head, kernel index, condition index -> sums over texts (in the
  // fixed order of the units, so the sums are reproducible).
  std::map<std::tuple<int, int, int, int, int>, acc> sums;
  std::map<std::string, int> model_index;
  for (size_t m = 0; m < p.model_names.size(); ++m) model_index[p.model_names[m]] = static_cast<int>(m);
  for (const auto& r : rows) {
    const int ki = static_cast<int>(std::find(p.opt.kernels.begin(), p.opt.kernels.end(), r.kernel) -
                                    p.opt.kernels.begin());
    auto& a = sums[{model_index.at(r.model), r.layer, r.head, ki, parse_condition_index(r.condition)}];
    a.log_err += r.log_err;
    a.pred += std::log1p(r.predicted_rel_err);
    a.kernel += std::log1p(r.kernel_rel_err);
    a.n += 1;
  }
  json out = json::array();
  for (const auto& [key, a] : sums) {
    const auto [m, l, h, ki, c] = key;
    if (c == 0) continue;
    const acc& b = sums.at({m, l, h, ki, 0});
    const double lt = a.log_err / a.n, lp = b.log_err / b.n;
    const double pt = a.pred / a.n, pp = b.pred / b.n;
    const double obs = lt - lp, pred = pt - pp;
    json row{{"model", p.model_names[m]}, {"layer", l}, {"head", h},
                       {"kernel", p.opt.kernels[ki]}, {"transform", kConditionNames[c]},
                       {"observed_score", obs}, {"predicted_score", pred},
                       {"harmed", obs > 0}, {"predicted_harmed", pred > 0},
                       {"mean_log_err_plain", lp}, {"mean_log_err_transform", lt},
                       {"mean_pred_log_err_plain", pp}, {"mean_pred_log_err_transform", pt},
                       {"n_texts", a.n},
                       {"tool_version", std::string(tool_version())},
                       {"predictor_version", std::string(predict::kPredictorVersion)}};
    if (transfer) {
      const double ks = a.kernel / a.n - b.kernel / b.n;
      row["kernel_observed_score"] = ks;
      row["kernel_harmed"] = ks > 0;
    }
    out.push_back(row);
  }
  return out;
}

const std::vector<std::string> kRowColumns = {
    "model", "layer", "head", "kv_head", "text", "kernel", "condition", "rel_err", "log_err",
    "predicted_rel_err", "max_row_err", "cosine", "tool_version", "predictor_version"};
const std::vector<std::string> kHeadColumns = {
    "model", "layer", "head", "kernel", "transform", "observed_score", "predicted_score",
    "harmed", "predicted_harmed", "mean_log_err_plain", "mean_log_err_transform",
    "mean_pred_log_err_plain", "mean_pred_log_err_transform", "n_texts", "tool_version",
    "predictor_version"};
const std::vector<std::string> kTransferRowColumns = {
    "model", "layer", "head", "kv_head", "text", "kernel", "condition", "rel_err", "log_err",
    "predicted_rel_err", "max_row_err", "cosine", "kernel_rel_err", "tool_version",
    "predictor_version"};
const std::vector<std::string> kTransferHeadColumns = {
    "model", "layer", "head", "kernel", "transform", "observed_score", "predicted_score",
    "harmed", "predicted_harmed", "mean_log_err_plain", "mean_log_err_transform",
    "mean_pred_log_err_plain", "mean_pred_log_err_transform", "n_texts",
    "kernel_observed_score", "kernel_harmed", "tool_version", "predictor_version"};

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
  // Bootstrap clusters: whole models when there are enough of them for a resample of models to
  // mean something; with fewer (one captured model, say) a model resample is nearly always the
  // same set and the interval degenerates to a point, so (model, layer) clusters are used:
  // layers share a model's weights and texts, so this is the weaker assumption, and it is
  // recorded in every summary row (`cluster`, `n_clusters`).
  const bool by_model = static_cast<int>(all_models.size()) >= kMinModelClusters;
  json out = json::array();
  for (const auto& key : keys) {
    const auto& g = groups[key];
    std::vector<double> pred, obs, emu;
    std::vector<uint8_t> harmed;
    std::vector<int> cluster;
    std::map<std::string, int> model_ids;
    std::map<std::pair<std::string, int>, int> cluster_ids;
    for (const json* h : g) {
      pred.push_back(h->at("predicted_score"));
      // Transfer: labels from the real kernel; Spearman of emulator vs kernel effects (the
      // "obs" slot then holds the kernel's score and "pred" stays the predictor's for AUC).
      harmed.push_back(h->at(transfer ? "kernel_harmed" : "harmed").get<bool>());
      obs.push_back(h->at(transfer ? "kernel_observed_score" : "observed_score"));
      emu.push_back(h->at("observed_score"));
      const std::string m = h->at("model");
      model_ids.emplace(m, static_cast<int>(model_ids.size()));
      const auto ck = std::make_pair(m, by_model ? 0 : h->at("layer").get<int>());
      cluster.push_back(cluster_ids.emplace(ck, static_cast<int>(cluster_ids.size())).first->second);
    }
    const stats::confusion c = stats::confusion_at(pred, harmed, 0.0);
    auto sub = [&](std::span<const int> idx, int which) -> std::optional<double> {
      std::vector<double> ps, os, es;
      std::vector<uint8_t> ys;
      for (int i : idx) ps.push_back(pred[i]), os.push_back(obs[i]), es.push_back(emu[i]), ys.push_back(harmed[i]);
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
    for (int w = 0; w < 4; ++w) {
      s[names[w]] = js(sub(all, w));
      const stats::interval iv = stats::cluster_bootstrap(
          cluster, [&](std::span<const int> idx) { return sub(idx, w); },
          {n_resamples, seed + static_cast<uint64_t>(w), 0.95});
      s[std::string(names[w]) + "_lo"] = js(iv.lo);
      s[std::string(names[w]) + "_hi"] = js(iv.hi);
    }
    s["tp"] = c.tp, s["fp"] = c.fp, s["fn"] = c.fn, s["tn"] = c.tn;
    s["n_models"] = model_ids.size();
    s["cluster"] = by_model ? "model" : "model+layer";
    s["n_clusters"] = cluster_ids.size();
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
            {"kernels", p.opt.kernels},
            {"kernel_outputs", p.opt.kernel_outputs},
            {"conditions", p.opt.conditions},
            {"source", source_json(p)},
            {"kernel_backend", std::string(kernel_backend())},
            {"n_units", p.units.size()},
            {"zoo", {{"n_tok", p.opt.zoo_opt.n_tok}, {"seed", p.opt.zoo_opt.seed},
                     {"n_layer_cap", p.opt.zoo_opt.n_layer_cap}, {"n_texts", p.opt.n_texts}}}};
  write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
  const bool transfer = !p.opt.kernel_outputs.empty();
  write_file_atomic(dir / "rows.csv", to_csv(rows, transfer ? kTransferRowColumns : kRowColumns));
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
    if (config_json(q) != config_json(p))
      fail("merge: {} holds another study than {} (compare their checkpoints/study.json)",
           d.string(), dirs.front().string());
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
