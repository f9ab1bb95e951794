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
#include "attnum/core/version.h"
#include "attnum/stats/stats.h"
#include "attnum/study/emulate.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

void write_atomic(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path().empty() ? fs::path(".") : path.parent_path());
  const fs::path tmp = path.string() + fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot write {}", tmp.string());
    f << text;
    f.flush();
    if (!f) fail("cannot write {} (disk full?)", tmp.string());
  }
  fs::rename(tmp, path);
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
  if (!opt.zoo) fail("heads: capture files are not supported by this build yet; use --zoo");
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

std::vector<row> compute_unit(const plan& p, int i) {
  ATTNUM_ASSERT(i >= 0 && i < static_cast<int>(p.units.size()), "unit {} out of range", i);
  const unit& u = p.units[i];
  const auto& opt = p.opt;
  const auto models = zoo_models(opt.zoo_opt);
  const zoo_model& zm = models[u.model];
  std::vector<int> conds;
  for (const auto& c : opt.conditions) conds.push_back(parse_condition_index(c));
  std::vector<row> rows;
  for (int kvh = 0; kvh < zm.n_head_kv; ++kvh) {
    const zoo_group z = zoo_generate(opt.zoo_opt, u.model, u.layer, kvh, u.text);
    const int g = static_cast<int>(z.heads.size()), n = z.n_tok, d = z.d_head;
    std::vector<reference> refs;
    std::vector<predict::context_ptr> ctx;
    for (int h = 0; h < g; ++h) {
      refs.push_back(reference_causal(z.q.data() + static_cast<size_t>(h) * n * d, z.k.data(),
                                      z.v.data(), n, d));
      predict::head_inputs in;
      in.n_q = n, in.n_kv = n, in.d = d;
      in.p = refs[h].p.data(), in.o = refs[h].o.data(), in.row_sum = refs[h].row_sum.data();
      in.v = z.v.data();
      ctx.push_back(predict::make_context(in));
    }
    // rows of this group: [head][kernel][condition]
    const size_t base = rows.size();
    rows.resize(base + static_cast<size_t>(g) * opt.kernels.size() * conds.size());
    for (size_t ki = 0; ki < opt.kernels.size(); ++ki) {
      // The V, P and output terms do not depend on the condition (V is never transformed; P and
      // O are the ideal ones): computed with the first condition, reused for the others.
      std::vector<predict::prediction> vpo(g);
      for (size_t ci = 0; ci < conds.size(); ++ci) {
        const auto runs = run_group(opt.kernels[ki], conds[ci], z.q.data(), z.k.data(),
                                    z.v.data(), g, n, d, opt.rotation_seed);
        for (int h = 0; h < g; ++h) {
          const head_run& r = runs[h];
          const reference& ref = refs[h];
          predict::head_inputs in;
          in.n_q = n, in.n_kv = n, in.d = d;
          in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
          in.q = r.q.data(), in.k = r.k.data(), in.v = z.v.data();
          in.var_q = r.var_q.empty() ? nullptr : r.var_q.data();
          in.var_k = r.var_k.empty() ? nullptr : r.var_k.data();
          in.var_v = r.var_v.empty() ? nullptr : r.var_v.data();
          in.p_cast = r.p_cast;
          in.o_cast = r.o_cast;
          in.out_fmt = r.out_fmt;
          if (ci == 0) vpo[h] = predict::predict_terms(*ctx[h], in, opt.predictor, {false, false, true, true, true});
          predict::prediction pr =
              predict::predict_terms(*ctx[h], in, opt.predictor, {true, true, false, false, false});
          pr.total += vpo[h].total;
          const double rel = pr.o_norm2 > 0 ? std::sqrt(pr.total / pr.o_norm2) : 0.0;
          const err_metrics e = errors(r.o, ref.o, n, d);
          row& w = rows[base + (static_cast<size_t>(h) * opt.kernels.size() + ki) * conds.size() + ci];
          w.model = p.model_names[u.model];
          w.layer = u.layer, w.head = z.heads[h].head, w.kv_head = kvh, w.text = u.text;
          w.kernel = opt.kernels[ki];
          w.condition = kConditionNames[conds[ci]];
          w.rel_err = e.rel_err, w.log_err = std::log1p(e.rel_err);
          w.predicted_rel_err = rel;
          w.max_row_err = e.max_row_err, w.cosine = e.cosine;
        }
      }
    }
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

namespace {
json row_json(const row& r) {
  return json{{"model", r.model},         {"layer", r.layer},
              {"head", r.head},           {"kv_head", r.kv_head},
              {"text", r.text},           {"kernel", r.kernel},
              {"condition", r.condition}, {"rel_err", r.rel_err},
              {"log_err", r.log_err},     {"predicted_rel_err", r.predicted_rel_err},
              {"max_row_err", r.max_row_err}, {"cosine", r.cosine}};
}
row row_from(const json& j) {
  row r;
  r.model = j.at("model"), r.layer = j.at("layer"), r.head = j.at("head");
  r.kv_head = j.at("kv_head"), r.text = j.at("text"), r.kernel = j.at("kernel");
  r.condition = j.at("condition"), r.rel_err = j.at("rel_err"), r.log_err = j.at("log_err");
  r.predicted_rel_err = j.at("predicted_rel_err"), r.max_row_err = j.at("max_row_err");
  r.cosine = j.at("cosine");
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
  for (const auto& r : rows) text += row_json(r).dump() + "\n";
  text += json{{"end", i}, {"n_rows", rows.size()}}.dump() + "\n";  // completeness marker
  write_atomic(unit_path(dir, i), text);
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
  write_atomic(f, saved.dump(2) + "\n");
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
    const int k = ++done;
    if (ctl.progress) {
#pragma omp critical(attnum_study_progress)
      {
        const int w = 40, f = n_todo ? k * w / n_todo : w;
        fmt::print(stderr, "\rheads [{:<{}}] {}/{} units", std::string(f, '#'), w, k, n_todo);
        if (k == n_todo) fmt::print(stderr, "\n");
      }
    }
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

std::optional<double> opt_of(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}
json js(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

// Per-head table from the rows: one entry per (model, layer, head, kernel, transform).
json heads_table(const plan& p, const std::vector<row>& rows) {
  struct acc {
    double log_err = 0, pred = 0;
    int n = 0;
  };
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
    out.push_back(json{{"model", p.model_names[m]}, {"layer", l}, {"head", h},
                       {"kernel", p.opt.kernels[ki]}, {"transform", kConditionNames[c]},
                       {"observed_score", obs}, {"predicted_score", pred},
                       {"harmed", obs > 0}, {"predicted_harmed", pred > 0},
                       {"mean_log_err_plain", lp}, {"mean_log_err_transform", lt},
                       {"mean_pred_log_err_plain", pp}, {"mean_pred_log_err_transform", pt},
                       {"n_texts", a.n},
                       {"tool_version", std::string(tool_version())},
                       {"predictor_version", std::string(predict::kPredictorVersion)}});
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

std::string csv_cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());  // shortest round trip
  return v.dump();
}

std::string to_csv(const json& table, const std::vector<std::string>& cols) {
  std::string s = fmt::format("{}\n", fmt::join(cols, ","));
  for (const auto& r : table) {
    for (size_t c = 0; c < cols.size(); ++c)
      s += (c ? "," : "") + csv_cell(r.contains(cols[c]) ? r[cols[c]] : json(nullptr));
    s += "\n";
  }
  return s;
}

std::string to_jsonl(const json& table) {
  std::string s;
  for (const auto& r : table) s += r.dump() + "\n";
  return s;
}

}  // namespace

json summarize(const json& heads, int n_resamples, uint64_t seed) {
  // Group head rows by (kernel, transform) in first-appearance order.
  std::vector<std::pair<std::string, std::string>> keys;
  std::map<std::pair<std::string, std::string>, std::vector<const json*>> groups;
  for (const auto& h : heads) {
    const auto key = std::make_pair(h.at("kernel").get<std::string>(), h.at("transform").get<std::string>());
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(&h);
  }
  json out = json::array();
  for (const auto& key : keys) {
    const auto& g = groups[key];
    std::vector<double> pred, obs;
    std::vector<uint8_t> harmed;
    std::vector<int> cluster;
    std::map<std::string, int> model_ids;
    for (const json* h : g) {
      pred.push_back(h->at("predicted_score"));
      obs.push_back(h->at("observed_score"));
      harmed.push_back(h->at("harmed").get<bool>());
      const std::string m = h->at("model");
      cluster.push_back(model_ids.emplace(m, static_cast<int>(model_ids.size())).first->second);
    }
    const stats::confusion c = stats::confusion_at(pred, harmed, 0.0);
    auto sub = [&](std::span<const int> idx, int which) -> std::optional<double> {
      std::vector<double> ps, os;
      std::vector<uint8_t> ys;
      for (int i : idx) ps.push_back(pred[i]), os.push_back(obs[i]), ys.push_back(harmed[i]);
      if (which == 0) return stats::roc_auc(ps, ys);
      if (which == 1) return stats::confusion_at(ps, ys, 0.0).precision();
      if (which == 2) return stats::confusion_at(ps, ys, 0.0).recall();
      return stats::spearman(ps, os);
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
  a.summary = summarize(a.heads, p.opt.bootstrap_resamples, p.opt.bootstrap_seed);
  return a;
}

json assemble(const plan& p, const fs::path& dir) {
  const assembled a = assemble_tables(p, dir);
  json rows = json::array();
  for (const auto& r : a.rows) {
    json j = row_json(r);
    j["tool_version"] = std::string(tool_version());
    j["predictor_version"] = std::string(predict::kPredictorVersion);
    rows.push_back(j);
  }
  json meta{{"tool_version", std::string(tool_version())},
            {"predictor_version", std::string(predict::kPredictorVersion)},
            {"command", p.opt.command},
            {"kernels", p.opt.kernels},
            {"conditions", p.opt.conditions},
            {"source", p.opt.zoo ? json("zoo") : json(p.opt.captures)},
            {"kernel_backend", std::string(kernel_backend())},
            {"n_units", p.units.size()},
            {"zoo", {{"n_tok", p.opt.zoo_opt.n_tok}, {"seed", p.opt.zoo_opt.seed},
                     {"n_layer_cap", p.opt.zoo_opt.n_layer_cap}, {"n_texts", p.opt.n_texts}}}};
  write_atomic(dir / "meta.json", meta.dump(2) + "\n");
  write_atomic(dir / "rows.csv", to_csv(rows, kRowColumns));
  write_atomic(dir / "rows.jsonl", to_jsonl(rows));
  write_atomic(dir / "heads.csv", to_csv(a.heads, kHeadColumns));
  write_atomic(dir / "heads.jsonl", to_jsonl(a.heads));
  write_atomic(dir / "summary.json", a.summary.dump(2) + "\n");
  return a.summary;
}

}  // namespace attnum::study
