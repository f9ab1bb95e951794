// The head-study summary's clusters: whole models when there are enough of them
// (kMinModelClusters), else (model, layer), so that a one-model study gets a real interval; the
// interval method follows the cluster count (jackknife-t below 30 clusters); labels with a
// noise floor.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "attnum/stats/stats.h"
#include "attnum/study/head_study.h"

using namespace attnum;
using nlohmann::json;

namespace {

// Synthetic per-head rows (heads.jsonl objects) of one kernel and transform: the predictor
// ranks most heads right, with layer-dependent mistakes so that resamples differ.
json heads_of(int n_models, int n_layers, int n_heads) {
  json out = json::array();
  stats::splitmix64 rng(7);
  for (int m = 0; m < n_models; ++m)
    for (int l = 0; l < n_layers; ++l)
      for (int h = 0; h < n_heads; ++h) {
        const double obs = rng.uniform() - 0.5;
        const double pred = obs + (rng.uniform() - 0.5) * 0.3 * (1 + l % 3);
        out.push_back({{"model", std::string("m").append(std::to_string(m))},
                       {"layer", l},
                       {"head", h},
                       {"kernel", "fa3"},
                       {"transform", "rotate"},
                       {"observed_score", obs},
                       {"predicted_score", pred},
                       {"harmed", obs > 0}});
      }
  return out;
}

}  // namespace

TEST(summary_test, one_model_clusters_by_layer_and_gives_a_real_interval) {
  const json s = study::summarize(heads_of(1, 8, 6), 400, 11)[0];
  EXPECT_EQ(s["cluster"], "model+layer");
  EXPECT_EQ(s["n_clusters"], 8);
  EXPECT_EQ(s["n_models"], 1);
  for (const char* f : {"auc", "spearman", "precision", "recall"}) {
    const std::string lo = std::string(f) + "_lo", hi = std::string(f) + "_hi";
    ASSERT_TRUE(s[lo].is_number() && s[hi].is_number()) << f;
    EXPECT_LT(s[lo].get<double>(), s[hi].get<double>()) << f;  // not the degenerate [x, x]
    EXPECT_LE(s[lo].get<double>(), s[f].get<double>()) << f;
    EXPECT_GE(s[hi].get<double>(), s[f].get<double>()) << f;
  }
}

TEST(summary_test, many_models_cluster_by_model_as_before) {
  const json heads = heads_of(6, 4, 5);
  const json s = study::summarize(heads, 300, 21)[0];
  EXPECT_EQ(s["cluster"], "model");
  EXPECT_EQ(s["n_clusters"], 6);
  EXPECT_EQ(s["ci_method"], "cluster-jackknife-t");  // 6 clusters: no percentile bootstrap
  EXPECT_EQ(s["ci_dropped"], 0);
  // The interval is the model-cluster jackknife-t of the AUC, computed here directly.
  std::vector<double> pred;
  std::vector<uint8_t> harmed;
  std::vector<int> cluster;
  for (const auto& h : heads) {
    pred.push_back(h["predicted_score"]);
    harmed.push_back(h["harmed"].get<bool>());
    cluster.push_back(std::stoi(h["model"].get<std::string>().substr(1)));
  }
  // The study's options: logit scale of [0, 1] (empirical, over the heads), bias-corrected.
  const stats::bootstrap_options bo = study::interval_options(0, 300, 21, static_cast<double>(pred.size()));
  EXPECT_EQ(bo.scale, stats::ci_scale::logit);
  EXPECT_TRUE(bo.bias_correct);
  const auto iv = stats::cluster_jackknife_t(
      cluster,
      [&](std::span<const int> idx) -> std::optional<double> {
        std::vector<double> p;
        std::vector<uint8_t> y;
        for (int i : idx) p.push_back(pred[i]), y.push_back(harmed[i]);
        return stats::roc_auc(p, y);
      },
      bo);
  EXPECT_EQ(s["auc_lo"].get<double>(), *iv.lo);
  EXPECT_EQ(s["auc_hi"].get<double>(), *iv.hi);
}

TEST(summary_test, threshold_is_five_models) {
  EXPECT_EQ(study::summarize(heads_of(4, 3, 4), 50, 1)[0]["cluster"], "model+layer");
  EXPECT_EQ(study::summarize(heads_of(4, 3, 4), 50, 1)[0]["n_clusters"], 12);
  EXPECT_EQ(study::summarize(heads_of(5, 3, 4), 50, 1)[0]["cluster"], "model");
}

TEST(summary_test, thirty_clusters_use_the_percentile_bootstrap) {
  const json s = study::summarize(heads_of(2, 15, 6), 200, 3)[0];
  EXPECT_EQ(s["n_clusters"], 30);
  EXPECT_EQ(s["ci_method"], "cluster-bootstrap-percentile");
  const json t = study::summarize(heads_of(1, 29, 6), 200, 3)[0];
  EXPECT_EQ(t["ci_method"], "cluster-jackknife-t");
}

TEST(summary_test, noise_floor_label_rule) {
  // n = 3 texts: t(0.975, 2) = 4.303; a score of 4 se is null, 4.4 se is not.
  EXPECT_EQ(study::head_label(0.4, 0.1, 3), "null");
  EXPECT_EQ(study::head_label(0.44, 0.1, 3), "harmed");
  EXPECT_EQ(study::head_label(-0.44, 0.1, 3), "helped");
  // Many texts: about 2 se (t(0.975, 99) = 1.984).
  EXPECT_EQ(study::head_label(0.199, 0.1, 100), "harmed");
  EXPECT_EQ(study::head_label(0.197, 0.1, 100), "null");
  // One text: no standard error; the sign decides, 0 is null.
  EXPECT_EQ(study::head_label(1e-9, std::nullopt, 1), "harmed");
  EXPECT_EQ(study::head_label(-1e-9, std::nullopt, 1), "helped");
  EXPECT_EQ(study::head_label(0.0, std::nullopt, 1), "null");
}

TEST(summary_test, null_heads_are_counted_and_excluded_from_the_nonnull_statistics) {
  json heads = heads_of(6, 2, 10);
  // Mark every head with |score| < 0.2 null: the non-null AUC uses the others only.
  int n_null = 0;
  std::vector<double> pred;
  std::vector<uint8_t> y;
  for (auto& h : heads) {
    const double obs = h["observed_score"];
    const bool null = std::fabs(obs) < 0.2;
    h["label"] = null ? "null" : (obs > 0 ? "harmed" : "helped");
    h["observed_se"] = 0.05;
    h["predictor_model"] = "fa3";
    n_null += null;
    if (!null) pred.push_back(h["predicted_score"]), y.push_back(obs > 0);
  }
  const json s = study::summarize(heads, 100, 5)[0];
  EXPECT_EQ(s["n_null"], n_null);
  EXPECT_GT(n_null, 0);
  EXPECT_EQ(s["n_nonnull"].get<int>() + n_null, 120);
  EXPECT_EQ(s["auc_nonnull"].get<double>(), *stats::roc_auc(pred, y));
  EXPECT_EQ(s["predictor_model"], "fa3");
  EXPECT_TRUE(s["se_available"].get<bool>());
  // Dropping near-zero scores makes the ranking easier.
  EXPECT_GT(s["auc_nonnull"].get<double>(), s["auc"].get<double>());
  for (const char* f : {"precision_nonnull", "recall_nonnull"}) EXPECT_TRUE(s[f].is_number()) << f;
  // The non-null heads here are ranked perfectly (AUC 1 in every leave-one-model-out fit): a
  // zero-width interval, reported as none with its reason.
  EXPECT_EQ(s["auc_nonnull"], 1.0);
  EXPECT_TRUE(s["auc_nonnull_lo"].is_null());
  EXPECT_EQ(s["auc_nonnull_ci_reason"], "zero width: every leave-one-cluster-out value equals the estimate");
}

TEST(summary_test, harmed_headline_is_the_label_and_the_sign_count_is_beside_it) {
  json heads = heads_of(6, 2, 10);
  int sign = 0, label = 0;
  for (auto& h : heads) {
    const double obs = h["observed_score"];
    h["label"] = std::fabs(obs) < 0.2 ? "null" : (obs > 0 ? "harmed" : "helped");
    h["observed_se"] = 0.05;
    sign += obs > 0, label += h["label"] == "harmed";
  }
  const json s = study::summarize(heads, 100, 5)[0];
  EXPECT_LT(label, sign);
  EXPECT_EQ(s["n_label_harmed"], label);
  EXPECT_EQ(s["n_harmed_sign"], sign);
  EXPECT_EQ(s["n_harmed"], sign);  // kept for scripts: the sign count
  const std::string notes = study::summary_notes(json::array({s}));
  EXPECT_NE(notes.find("harmed (sign)"), std::string::npos);
  EXPECT_NE(notes.find("not distinguishable from 0 at this noise"), std::string::npos);
}

TEST(summary_test, degenerate_intervals_are_not_available_with_the_reason) {
  // Six models; heads 0-3 of models m0 and m1 are harmed and the predictor ranks every harmed
  // head above every unharmed one: AUC, precision and recall are 1 in every leave-one-model-out
  // fit (zero width). Only m0's harmed heads are above the noise floor, so the non-null
  // statistics' harmed heads sit in one model (too few events).
  json heads = json::array();
  for (int m = 0; m < 6; ++m)
    for (int h = 0; h < 8; ++h) {
      const bool harmed = m < 2 && h < 4;
      const double obs = harmed ? 0.5 + h : -0.5 - h - m;
      const double pred = harmed ? obs : -0.5 - (h * 7 + m * 3) % 11;
      heads.push_back({{"model", std::string("m").append(std::to_string(m))},
                       {"layer", 0},
                       {"head", h},
                       {"kernel", "fa3"},
                       {"transform", "rotate"},
                       {"observed_score", obs},
                       {"predicted_score", pred},
                       {"harmed", harmed},
                       {"observed_se", 0.1},
                       {"label", harmed ? (m == 0 ? "harmed" : "null") : "helped"}});
    }
  const json s = study::summarize(heads, 100, 5)[0];
  for (const char* f : {"auc", "precision", "recall"}) {
    EXPECT_EQ(s[f], 1.0) << f;
    EXPECT_TRUE(s[std::string(f) + "_lo"].is_null() && s[std::string(f) + "_hi"].is_null()) << f;
    EXPECT_EQ(s[std::string(f) + "_ci_reason"], "zero width: every leave-one-cluster-out value equals the estimate")
        << f;
    EXPECT_EQ(study::interval_text(s, f), "n/a");
  }
  ASSERT_TRUE(s["auc_nonnull"].is_number());
  EXPECT_TRUE(s["auc_nonnull_lo"].is_null());
  EXPECT_EQ(s["auc_nonnull_ci_reason"], "fewer than 2 clusters with at least 2 harmed heads");
  // Spearman still has its interval (every model has heads and the ranks differ).
  EXPECT_TRUE(s["spearman_lo"].is_number());
  EXPECT_TRUE(s["spearman_ci_reason"].is_null());
  EXPECT_EQ(study::interval_text(s, "spearman").front(), '[');
  const std::string notes = study::summary_notes(json::array({s}));
  EXPECT_NE(notes.find("interval n/a (zero width: every leave-one-cluster-out value equals the estimate): "
                       "fa3 rotate auc, fa3 rotate precision, fa3 rotate recall"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("fa3 rotate auc_nonnull"), std::string::npos) << notes;
}

TEST(summary_test, benjamini_hochberg_set_and_detectable_effect) {
  // 48 heads with se 0.1 over 3 texts: 5 with t = 50 (p about 8e-4, below BH's 5 * 0.05 / 48),
  // 3 with t = -60, the rest with t = 0.5.
  json heads = heads_of(6, 1, 8);
  int i = 0;
  for (auto& h : heads) {
    const double t = i < 5 ? 50 : i < 8 ? -60 : 0.5;
    h["observed_score"] = 0.1 * t;
    h["observed_se"] = 0.1;
    h["n_texts"] = 3;
    h["label"] = study::head_label(0.1 * t, 0.1, 3);
    ++i;
  }
  const json s = study::summarize(heads, 100, 5)[0];
  EXPECT_EQ(s["n_bh_harmed"], 5);
  EXPECT_EQ(s["n_bh_helped"], 3);
  EXPECT_EQ(s["bh_fdr"], 0.05);
  // The per-head test at 3 texts labels 5.65 se with 80% power (stats_test checks the power by
  // simulation); every se is 0.1.
  EXPECT_NEAR(s["detectable_effect_80_se"].get<double>(), 5.6535, 1e-4);
  EXPECT_NEAR(s["detectable_effect_80_median"].get<double>(), 0.56535, 1e-5);
  // Without standard errors there is no test: the fields are null.
  const json u = study::summarize(heads_of(6, 1, 8), 100, 5)[0];
  EXPECT_TRUE(u["n_bh_harmed"].is_null());
  EXPECT_TRUE(u["detectable_effect_80_median"].is_null());
}
