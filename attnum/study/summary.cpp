// The head study's summary step: per-head table, summary, result files (study/summary.h).
#include "attnum/study/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <tuple>

#include "attnum/attention/isa_paths.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/run_info.h"
#include "attnum/core/version.h"
#include "attnum/io/csv.h"
#include "attnum/stats/stats.h"
#include "attnum/study/checkpoint.h"
#include "attnum/study/emulate.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

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
    head_row r;
    r.model = p.model_names[m], r.layer = l, r.head = h;
    r.kernel = p.opt.kernels[ki].name, r.transform = kConditionNames[c];
    r.mean_log_err_transform = a.log_err / a.n, r.mean_log_err_plain = b.log_err / b.n;
    r.mean_pred_log_err_transform = a.pred / a.n, r.mean_pred_log_err_plain = b.pred / b.n;
    r.observed_score = r.mean_log_err_transform - r.mean_log_err_plain;
    r.predicted_score = r.mean_pred_log_err_transform - r.mean_pred_log_err_plain;
    r.harmed = r.observed_score > 0, r.predicted_harmed = r.predicted_score > 0;
    r.n_texts = a.n;
    r.observed_se = paired_se(a.log_errs, b.log_errs);
    r.label = head_label(r.observed_score, r.observed_se, a.n);
    r.predictor_model = p.opt.predictor_model;
    r.predictor_version = predict::version_string(p.opt.predictor.version);
    if (transfer) {
      r.kernel_observed_score = a.kernel / a.n - b.kernel / b.n;
      r.kernel_harmed = r.kernel_observed_score > 0;
      r.kernel_observed_se = paired_se(a.kernel_errs, b.kernel_errs);
      r.kernel_label = head_label(r.kernel_observed_score, r.kernel_observed_se, a.n);
    }
    out.push_back(head_row_json(r, transfer));
  }
  return out;
}

std::string to_csv(const json& table, const std::vector<std::string>& cols) { return io::csv_table(cols, table); }

std::string to_jsonl(const json& table) {
  std::string s;
  for (const auto& r : table) s += r.dump() + "\n";
  return s;
}

// The parameters that made every zoo head (the zoo records them; the report can join on
// model, layer, head).
std::string zoo_heads_csv(const plan& p) {
  json heads = json::array();
  const auto models = zoo_models(p.opt.zoo_opt);
  for (size_t m = 0; m < models.size(); ++m)
    for (int l = 0; l < models[m].n_layer; ++l)
      for (const auto& h : zoo_layer_heads(p.opt.zoo_opt, static_cast<int>(m), l))
        heads.push_back(zoo_head_json(models[m].name, l, h));
  return to_csv(heads, zoo_head_columns());
}

}  // namespace

stats::bootstrap_options interval_options(int which, int n_resamples, uint64_t seed, double count) {
  stats::bootstrap_options bo{n_resamples, seed, 0.95};
  bo.range_lo = which == 3 ? -1.0 : 0.0, bo.range_hi = 1.0;
  bo.scale = stats::ci_scale::logit;
  bo.bias_correct = true;
  bo.logit_count = count;
  return bo;
}

double interval_count(int which, std::span<const double> pred, std::span<const uint8_t> harmed) {
  double n_pred = 0, n_pos = 0;
  for (size_t i = 0; i < pred.size(); ++i) n_pred += pred[i] > 0, n_pos += harmed[i] != 0;
  const double n = static_cast<double>(pred.size());
  if (which == 1) return n_pred;
  if (which == 2) return n_pos;
  return n;
}

std::string head_label(double score, std::optional<double> se, int n_texts) {
  if (se && n_texts >= 2) {
    const double crit = stats::student_t_quantile(0.975, n_texts - 1);
    if (std::fabs(score) < crit * *se || score == 0) return "null";
  } else if (score == 0) {
    return "null";
  }
  return score > 0 ? "harmed" : "helped";
}

json summarize(const json& heads, int n_resamples, uint64_t seed, bool transfer, bool with_intervals) {
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
    std::string predictor_version(predict::kPredictorVersion);
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
      predictor_version = h->value("predictor_version", std::string(predict::kPredictorVersion));
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
    // n_harmed: the sign count (score > 0, seed 000's "harmed", kept for scripts), also written
    // as n_harmed_sign; the headline count is n_label_harmed (above the noise floor).
    json s{{"kernel", key.first},
           {"transform", key.second},
           {"n_heads", g.size()},
           {"n_harmed", c.tp + c.fn},
           {"n_harmed_sign", c.tp + c.fn}};
    const char* names[] = {"auc", "precision", "recall", "spearman"};
    std::vector<int> all(g.size());
    for (size_t i = 0; i < g.size(); ++i) all[i] = static_cast<int>(i);
    int64_t dropped = 0;
    std::string method;
    for (int nn = 0; nn < 2; ++nn)
      for (int w = 0; w < (nn ? 3 : 4); ++w) {
        const std::string name = std::string(names[w]) + (nn ? "_nonnull" : "");
        s[name] = js(sub(all, w, nn == 1));
        // The heads the statistic sees, their clusters and events.
        std::vector<int> cl;
        std::vector<double> ps;
        std::vector<uint8_t> ys, ev_a, ev_b;  // the statistic's events (and the other class, AUC)
        for (size_t i = 0; i < g.size(); ++i) {
          if (nn && !nonnull[i]) continue;
          cl.push_back(cluster[i]), ps.push_back(pred[i]), ys.push_back(harmed[i]);
          ev_a.push_back(w == 1 ? pred[i] > 0 : w == 3 ? 1 : harmed[i]);
          ev_b.push_back(!harmed[i]);
        }
        stats::interval iv;
        if (!with_intervals) {
          iv.reason = "not computed";
        } else {
          iv = stats::cluster_interval(
              cluster, [&](std::span<const int> idx) { return sub(idx, w, nn == 1); },
              interval_options(w, n_resamples, seed + static_cast<uint64_t>(w), interval_count(w, ps, ys)));
          // Too few events in too few clusters: no interval, whatever the resamples gave.
          const char* what = w == 1 ? "predicted-harmed heads" : w == 3 ? "heads" : "harmed heads";
          const int ka = stats::clusters_with_events(cl, ev_a);
          const int kb = w == 0 ? stats::clusters_with_events(cl, ev_b) : stats::kMinEventClusters;
          if (ka < stats::kMinEventClusters || kb < stats::kMinEventClusters) {
            iv.lo.reset(), iv.hi.reset();
            iv.reason =
                fmt::format("fewer than {} clusters with at least {} {}", stats::kMinEventClusters,
                            stats::kMinEventsPerCluster, ka < stats::kMinEventClusters ? what : "unharmed heads");
          }
        }
        s[name + "_lo"] = js(iv.lo);
        s[name + "_hi"] = js(iv.hi);
        s[name + "_ci_reason"] = iv.lo ? json(nullptr) : json(iv.reason);
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
    // Labels with known power, and a multiple-testing-aware set: per head the two-sided paired
    // t-test's p-value (df = n_texts - 1) and the smallest effect it labels with 80% power at
    // the head's observed se; over the heads of this (kernel, transform) the Benjamini-Hochberg
    // set at FDR 5%.
    {
      const char* score_key = transfer ? "kernel_observed_score" : "observed_score";
      std::vector<double> pv, score, detectable;
      std::map<int, double> d80;  // df -> detectable effect in se
      for (const json* h : g) {
        const auto se = h->find(se_key);
        const int n_texts = h->value("n_texts", 0);
        if (se == h->end() || se->is_null() || n_texts < 2) continue;
        const double sev = se->get<double>(), sc = h->at(score_key).get<double>();
        const int df = n_texts - 1;
        if (!d80.count(df)) d80[df] = stats::detectable_effect_se(df, 0.8, 0.05);
        detectable.push_back(d80[df] * sev);
        // A zero se: the score is exactly known (p 0 unless the score is 0).
        pv.push_back(sev > 0 ? stats::t_test_p_value(sc / sev, df) : (sc == 0 ? 1.0 : 0.0));
        score.push_back(sc);
      }
      s["bh_fdr"] = 0.05;
      if (se_available && !pv.empty() && pv.size() == g.size()) {
        const std::vector<uint8_t> rej = stats::benjamini_hochberg(pv, 0.05);
        int64_t bh_h = 0, bh_p = 0;
        for (size_t i = 0; i < rej.size(); ++i) bh_h += rej[i] && score[i] > 0, bh_p += rej[i] && score[i] < 0;
        s["n_bh_harmed"] = bh_h, s["n_bh_helped"] = bh_p;
        std::sort(detectable.begin(), detectable.end());
        const size_t n = detectable.size();
        s["detectable_effect_80_median"] =
            n % 2 ? detectable[n / 2] : 0.5 * (detectable[n / 2 - 1] + detectable[n / 2]);
        s["detectable_effect_80_se"] = d80.size() == 1 ? json(d80.begin()->second) : json(nullptr);
      } else {
        s["n_bh_harmed"] = nullptr, s["n_bh_helped"] = nullptr;
        s["detectable_effect_80_median"] = nullptr, s["detectable_effect_80_se"] = nullptr;
      }
    }
    s["se_available"] = se_available;
    s["label_rule"] = se_available ? "null if |score| < t(0.975, n_texts-1) * se (paired over texts), else sign"
                                   : "sign of the score (one text: no standard error; null only if 0)";
    if (transfer) {
      s["emulator"] = key.first;
      s["kernel"] = "kernel-outputs";
      // `spearman` compares emulator and kernel here (predicted vs observed in heads): the
      // explicit name, with `spearman` kept as its alias for scripts.
      for (const std::string suf : {"", "_lo", "_hi", "_ci_reason", "_ci_dropped"})
        s["spearman_emulator_kernel" + suf] = s["spearman" + suf];
      s["spearman_predicted"] = js(stats::spearman(pred, obs));
      int64_t emu_harmed = 0;
      for (double e : emu) emu_harmed += e > 0;
      s["n_harmed_emulator"] = emu_harmed;
    }
    s["tool_version"] = std::string(tool_version());
    s["predictor_version"] = predictor_version;
    out.push_back(s);
  }
  return out;
}

std::string interval_text(const json& row, const std::string& stat, const char* spec) {
  const auto v = row.find(stat);
  if (v == row.end() || v->is_null()) return "";
  const auto lo = row.find(stat + "_lo"), hi = row.find(stat + "_hi");
  if (lo == row.end() || hi == row.end() || lo->is_null() || hi->is_null()) return "n/a";
  return fmt::format("[{}, {}]", fmt::format(fmt::runtime(spec), lo->get<double>()),
                     fmt::format(fmt::runtime(spec), hi->get<double>()));
}

namespace {
// The notes' line on the texts: the largest move of AUC and of Spearman over the summary's rows
// when one text is left out (add_text_spread's *_loto_min/_max).
std::string texts_line(const json& summary, int64_t n_texts) {
  double auc = 0, rho = 0;
  for (const auto& r : summary)
    for (const auto& [stat, m] : {std::pair<const char*, double*>{"auc", &auc}, {"spearman", &rho}}) {
      if (!r.contains(stat) || !r[stat].is_number()) continue;
      const double v = r[stat].get<double>();
      for (const char* end : {"_loto_min", "_loto_max"}) {
        const auto e = r.find(std::string(stat) + end);
        if (e != r.end() && e->is_number()) *m = std::max(*m, std::fabs(e->get<double>() - v));
      }
    }
  return fmt::format(
      "texts: leaving out one of the {} texts moves AUC by up to {:.3f} and Spearman by up to "
      "{:.3f} (each row's *_loto_min/_max in summary.json); the intervals are conditional on "
      "these texts",
      n_texts, auc, rho);
}
}  // namespace

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
      what = fmt::format(
          "95% delete-one-cluster jackknife with t({}) critical values over {} {}, "
          "bias-corrected, on the logit scale (Fisher's z for Spearman) "
          "(fewer than {} clusters: no percentile bootstrap)",
          n - 1, n, kind, stats::kMinBootstrapClusters);
    else if (method == "cluster-bootstrap-percentile")
      what = fmt::format("95% percentile bootstrap resampling {} {} with replacement", n, kind);
    else
      what = fmt::format("{} ({} {})", method, n, kind);
    add(fmt::format("intervals: {}", what));
    dropped += s.value("ci_dropped", int64_t{0});
    add(fmt::format("labels: {}", s.value("label_rule", "sign of the score")));
    if (s.contains("detectable_effect_80_se") && s["detectable_effect_80_se"].is_number())
      add(
          fmt::format("power: the per-head test labels an effect of {:.2f} se with 80% power (the "
                      "median head's: detectable_effect_80_median); Benjamini-Hochberg at FDR 5% "
                      "over each row's heads: n_bh_harmed, n_bh_helped in summary.json",
                      s["detectable_effect_80_se"].get<double>()));
    if (s.contains("n_label_harmed"))
      add("harmed: heads labelled harmed (above the noise floor); harmed (sign): heads with a "
          "positive score, noise or not (seed 000's count; n_harmed_sign); null: not "
          "distinguishable from 0 at this noise");
    if (s.contains("n_texts_loto")) add(texts_line(summary, s["n_texts_loto"].get<int64_t>()));
    const std::string pm = s.value("predictor_model", "kernel");
    add(pm == "kernel" ? std::string("predictor: models each kernel's own numerics (kernel-aware)")
                       : fmt::format("predictor: one fixed model ({}) for every kernel", pm));
  }
  // Intervals reported as n/a, grouped by reason.
  std::vector<std::pair<std::string, std::string>> na;  // reason, "kernel transform stat, ..."
  for (const auto& s : summary)
    for (const char* stat :
         {"auc", "precision", "recall", "spearman", "auc_nonnull", "precision_nonnull", "recall_nonnull"}) {
      const auto r = s.find(std::string(stat) + "_ci_reason");
      if (r == s.end() || !r->is_string() || !s.contains(stat) || s[stat].is_null()) continue;
      const std::string where = fmt::format("{} {} {}", s.value("kernel", ""), s.value("transform", ""), stat);
      auto it = std::find_if(na.begin(), na.end(), [&](const auto& e) { return e.first == r->get<std::string>(); });
      if (it == na.end())
        na.emplace_back(r->get<std::string>(), where);
      else
        it->second += ", " + where;
    }
  for (const auto& [reason, where] : na) add(fmt::format("interval n/a ({}): {}", reason, where));
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  out += fmt::format("undefined statistics in resamples or leave-one-out fits (ci_dropped, all rows): {}\n", dropped);
  return out;
}

assembled assemble_tables(const plan& p, const fs::path& dir) {
  assembled a;
  for (const auto& u : p.units) {
    auto rows = read_unit(dir, p, u.index);
    if (!rows)
      fail("{}: missing or incomplete unit {} (model {}, layer {}, text {})", unit_path(dir, u.index).string(), u.index,
           p.model_names[u.model], u.layer, u.text);
    a.rows.insert(a.rows.end(), rows->begin(), rows->end());
  }
  a.heads = heads_table(p, a.rows);
  a.summary = summarize(a.heads, p.opt.bootstrap_resamples, p.opt.bootstrap_seed, !p.opt.kernel_outputs.empty());
  add_text_spread(p, a);
  return a;
}

void add_text_spread(const plan& p, assembled& a) {
  std::set<int> texts;
  for (const auto& r : a.rows) texts.insert(r.text);
  if (texts.size() < 2) return;
  const bool transfer = !p.opt.kernel_outputs.empty();
  std::vector<json> left_out;  // the summary without text t, for each t
  for (const int t : texts) {
    std::vector<row> kept;
    for (const auto& r : a.rows)
      if (r.text != t) kept.push_back(r);
    left_out.push_back(summarize(heads_table(p, kept), 0, 0, transfer, false));
  }
  for (size_t i = 0; i < a.summary.size(); ++i) {
    json& s = a.summary[i];
    for (const char* stat : {"auc", "precision", "recall", "spearman", "n_harmed_sign"}) {
      json lo, hi;  // null until a defined value (integers stay integers)
      for (const json& l : left_out) {
        // The same heads in the same order give the same (kernel, transform) rows.
        ATTNUM_ASSERT(i < l.size() && l[i]["transform"] == s["transform"], "leave-one-text-out row {}", i);
        const json& v = l[i][stat];
        if (!v.is_number()) continue;
        if (lo.is_null() || v.get<double>() < lo.get<double>()) lo = v;
        if (hi.is_null() || v.get<double>() > hi.get<double>()) hi = v;
      }
      s[std::string(stat) + "_loto_min"] = lo;
      s[std::string(stat) + "_loto_max"] = hi;
    }
    s["n_texts_loto"] = texts.size();
  }
}

json assemble(const plan& p, const fs::path& dir) {
  const assembled a = assemble_tables(p, dir);
  json rows = json::array();
  for (const auto& r : a.rows) rows.push_back(row_json_versioned(r));
  json meta{{"run", run_info(attention::isa::paths_json())},
            {"tool_version", std::string(tool_version())},
            {"predictor_version", std::string(predict::version_string(p.opt.predictor.version))},
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
            {"zoo",
             {{"n_tok", p.opt.zoo_opt.n_tok},
              {"seed", p.opt.zoo_opt.seed},
              {"dtype", formats::info(p.opt.zoo_opt.dtype).name},
              {"n_layer_cap", p.opt.zoo_opt.n_layer_cap},
              {"n_texts", p.opt.n_texts}}}};
  write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
  const bool transfer = !p.opt.kernel_outputs.empty();
  write_file_atomic(dir / "rows.csv", to_csv(rows, row_columns(transfer)));
  write_file_atomic(dir / "rows.jsonl", to_jsonl(rows));
  write_file_atomic(dir / "heads.csv", to_csv(a.heads, head_columns(transfer)));
  write_file_atomic(dir / "heads.jsonl", to_jsonl(a.heads));
  write_file_atomic(dir / "summary.json", a.summary.dump(2) + "\n");
  if (p.opt.zoo) write_file_atomic(dir / "zoo_heads.csv", zoo_heads_csv(p));
  return a.summary;
}

}  // namespace attnum::study
