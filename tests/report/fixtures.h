#pragma once
// Small result folders written by the tests themselves, following docs/results.md, so the report
// tests do not wait for (or depend on) the producers. Values come from closed-form formulas; the
// per-head scores are computed here from the per-text rows, as docs/results.md defines them.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnum/core/file.h"

namespace attnum::test {

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

struct fixture_shape {
  std::vector<std::string> models = {"toy-a", "toy-b"};
  int layers = 2, heads = 4;
  std::vector<std::string> texts = {"sherlock", "sawyer", "opticks"};
  std::vector<std::string> kernels = {"fa3"};
};

// rel_err of (model m, layer l, head h, text t, condition c): rotation hurts heads with
// (l + h) odd, centering always helps a little.
inline double fixture_rel_err(int m, int l, int h, int t, int c, bool predicted) {
  const double base = 0.02 * (1 + 0.3 * h + 0.2 * l + 0.1 * m) * (1 + 0.07 * t);
  const double rot = ((l + h) % 2) ? 1.0 + 0.5 * (h + 1) : 0.8;
  const double f[4] = {1.0, rot, 0.9, 0.85 * rot};
  return base * f[c] * (predicted ? 1.1 + 0.01 * t : 1.0);
}

/// Writes heads (rows.csv, heads.csv, summary.json, meta.json) into dir.
inline int write_heads_fixture(const std::filesystem::path& dir, const fixture_shape& s = {}) {
  const char* conds[4] = {"plain", "rotate", "center", "center+rotate"};
  std::string rows =
      "model,layer,head,kv_head,text,kernel,condition,rel_err,log_err,predicted_rel_err,"
      "max_row_err,cosine,tool_version,predictor_version\n";
  std::string heads =
      "model,layer,head,kernel,transform,observed_score,predicted_score,harmed,predicted_harmed,"
      "mean_log_err_plain,mean_log_err_transform,mean_pred_log_err_plain,"
      "mean_pred_log_err_transform,n_texts,observed_se,label,predictor_model,tool_version,"
      "predictor_version\n";
  int n_heads = 0;
  for (size_t m = 0; m < s.models.size(); ++m)
    for (int l = 0; l < s.layers; ++l)
      for (int h = 0; h < s.heads; ++h)
        for (const auto& k : s.kernels) {
          double mean[4] = {}, pmean[4] = {};
          for (int c = 0; c < 4; ++c)
            for (size_t t = 0; t < s.texts.size(); ++t) {
              const double e = fixture_rel_err(int(m), l, h, int(t), c, false);
              const double p = fixture_rel_err(int(m), l, h, int(t), c, true);
              rows +=
                  fmt::format("{},{},{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},0.1.0,p1\n", s.models[m], l,
                              h, h / 2, s.texts[t], k, conds[c], e, std::log1p(e), p, 2 * e, 1 - e * e / 2);
              mean[c] += std::log1p(e) / double(s.texts.size());
              pmean[c] += std::log1p(p) / double(s.texts.size());
            }
          for (int c = 1; c < 4; ++c) {
            const double obs = mean[c] - mean[0], pred = pmean[c] - pmean[0];
            // Head 0 of every layer lies within its noise floor (label null).
            const char* label = h == 0 ? "null" : obs > 0 ? "harmed" : "helped";
            heads += fmt::format(
                "{},{},{},{},{},{:.17g},{:.17g},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{},0.01,{},kernel,0.1.0,p1\n",
                s.models[m], l, h, k, conds[c], obs, pred, obs > 0, pred > 0, mean[0], mean[c], pmean[0], pmean[c],
                s.texts.size(), label);
            ++n_heads;
          }
        }
  write_text(dir / "rows.csv", rows);
  write_text(dir / "heads.csv", heads);
  write_text(dir / "summary.json",
             "[{\"kernel\":\"fa3\",\"transform\":\"rotate\",\"n_heads\":16,\"n_harmed\":8,\"auc\":0.93,"
             "\"auc_lo\":0.8,\"auc_hi\":1.0,\"precision\":0.8,\"precision_lo\":0.5,\"precision_hi\":1.0,"
             "\"recall\":1.0,\"recall_lo\":0.7,\"recall_hi\":1.0,\"spearman\":0.9,\"spearman_lo\":0.7,"
             "\"spearman_hi\":0.97,\"tp\":8,\"fp\":2,\"fn\":0,\"tn\":6,\"n_models\":2,\"cluster\":\"model\","
             "\"n_clusters\":2,\"ci_method\":\"cluster-jackknife-t\",\"ci_dropped\":0,\"n_null\":4,"
             "\"predictor_model\":\"fa3\",\"auc_nonnull\":0.95,\"auc_nonnull_lo\":0.85,\"auc_nonnull_hi\":1.0},\n"
             "{\"kernel\":\"fa3\",\"transform\":\"center\",\"n_heads\":16,\"n_harmed\":0,\"auc\":null,"
             "\"auc_lo\":null,\"auc_hi\":null,\"precision\":null,\"precision_lo\":null,\"precision_hi\":null,"
             "\"recall\":null,\"recall_lo\":null,\"recall_hi\":null,\"spearman\":0.5,\"spearman_lo\":0.1,"
             "\"spearman_hi\":0.8,\"tp\":0,\"fp\":0,\"fn\":0,\"tn\":16,\"n_models\":2}]\n");
  write_text(dir / "meta.json",
             "{\"tool_version\":\"0.1.0\",\"predictor_version\":\"p1\",\"command\":\"fixture written by "
             "the report tests\",\"kernels\":[\"fa3\"],\"conditions\":[\"plain\",\"rotate\",\"center\","
             "\"center+rotate\"],\"source\":\"zoo\"}\n");
  attnum::write_complete_marker(dir, "test fixture");
  return n_heads;
}

inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// Writes pcast_theory.csv, pcast_dp.csv, pcast_simulate.csv into dir.
inline void write_pcast_fixture(const std::filesystem::path& dir) {
  std::string th = "delta,scale,k_sink,delta_k,underflow_fraction,underflow_exact,delta_c\n";
  std::string sim =
      "delta,scale,order,kernel,underflow_measured,underflow_predicted,mse,mse_sd,seeds,n_tok,d_head,block\n";
  for (double S : {1.0, 256.0}) {
    const double dc = 6.93 + std::log(S) - 1.03;
    for (int i = 0; i <= 24; ++i) {
      const double d = 0.5 * i, f = normal_cdf(d - dc);
      th += fmt::format("{},{},4,1.03,{:.17g},{:.17g},{:.17g}\n", d, S, f, f, dc);
    }
    for (int i = 0; i <= 6; ++i)
      for (const char* order : {"forward", "reverse"}) {
        const double d = 2.0 * i, f = normal_cdf(d - dc) * (order[0] == 'f' ? 1.0 : 0.0);
        sim += fmt::format("{},{},{},generic,{:.17g},{:.17g},{:.17g},{:.17g},8,4096,64,128\n", d, S, order, f, f,
                           1e-6 * (1 + 50 * f), 1e-7);
      }
  }
  std::string dp = "scale,dp\n";
  for (int i = -16; i <= 40; ++i) {  // dp(S) = max(top-binade ulp, subnormal ulp)/S, S = 2^(i/4)
    const double S = std::exp2(i / 4.0);
    const int n = int(std::floor(std::log2(S)));
    const double top = std::exp2(std::max(n - 1, -6) - 3);  // ulp of [2^(n-1), 2^n): 2^(n-1-3)
    dp += fmt::format("{:.17g},{:.17g}\n", S, std::max(top, std::exp2(-9)) / S);
  }
  write_text(dir / "pcast_theory.csv", th);
  write_text(dir / "pcast_simulate.csv", sim);
  write_text(dir / "pcast_dp.csv", dp);
  attnum::write_complete_marker(dir, "test fixture");  // a finished folder (docs/reliability.md)
}

/// Writes loss.json and loss.csv into dir.
inline void write_loss_fixture(const std::filesystem::path& dir) {
  const char* conds[4] = {"plain", "rotate", "center", "center+rotate"};
  const double ratio[4] = {1.071, 2.032, 1.018, 1.056};
  std::string csv =
      "condition,kernel,n_labels,ce_ref,ce_variant,ppl_ratio,ppl_ratio_lo,ppl_ratio_hi,kl_mean,top1_agreement,dp_p50,"
      "dp_p90,dp_p99,model,reference\n";
  std::string json = "[";
  for (int c = 0; c < 4; ++c) {
    const double ce = 2.5, cv = ce + std::log(ratio[c]);
    csv += fmt::format("{},fa3,3072,{},{:.17g},{},{},{},{},{},0.001,0.01,0.05,toy-a,bf16\n", conds[c], ce, cv, ratio[c],
                       ratio[c] * 0.97, ratio[c] * 1.03, 0.01 * (c + 1), 0.99 - 0.01 * c);
    json += fmt::format(
        "{}{{\"condition\":\"{}\",\"kernel\":\"fa3\",\"n_labels\":3072,\"ce_ref\":{},"
        "\"ce_variant\":{:.17g},\"ppl_ratio\":{},\"ppl_ratio_lo\":{},\"ppl_ratio_hi\":{},"
        "\"kl_mean\":{},\"top1_agreement\":{},\"dp_p50\":0.001,\"dp_p90\":0.01,"
        "\"dp_p99\":0.05,\"model\":\"toy-a\",\"reference\":\"bf16\"}}",
        c ? "," : "", conds[c], ce, cv, ratio[c], ratio[c] * 0.97, ratio[c] * 1.03, 0.01 * (c + 1), 0.99 - 0.01 * c);
  }
  write_text(dir / "loss.csv", csv);
  write_text(dir / "loss.json", json + "]\n");
  write_text(dir / "loss_paired.csv",
             "kernel,condition_a,condition_b,n_labels,delta_ce,delta_ce_lo,delta_ce_hi,delta_kl,"
             "delta_kl_lo,delta_kl_hi,delta_kl_ci_reason,delta_top1,delta_top1_lo,delta_top1_hi,block_length\n"
             "fa3,center,plain,3072,-0.05,-0.09,-0.01,-0.01,-0.012,-0.008,,0.01,0.0,0.02,24\n"
             "fa3,rotate,plain,3072,0.64,0.6,0.68,0.01,,,zero width,-0.01,-0.02,0.0,30\n");
  attnum::write_complete_marker(dir, "test fixture");
}

/// Writes the layout `attnum study --out dir` leaves: heads/, pcast/, loss/ (each with its
/// completion marker) and, at the top, the study's summary.json (an object), meta.json and the
/// top marker.
inline void write_study_fixture(const std::filesystem::path& dir) {
  write_heads_fixture(dir / "heads");
  write_pcast_fixture(dir / "pcast");
  write_loss_fixture(dir / "loss");
  write_text(dir / "summary.json", "{\"tool_version\":\"0.1.0\",\"source\":\"zoo\",\"heads\":[],\"loss\":[]}\n");
  write_text(dir / "meta.json", "{\"tool_version\":\"0.1.0\",\"command\":\"attnum study\"}\n");
  attnum::write_complete_marker(dir, "test fixture");
}

}  // namespace attnum::test
