// The head-study summary's bootstrap clusters: whole models when there are enough of them
// (kMinModelClusters), else (model, layer), so that a one-model study gets a real interval.
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
        out.push_back({{"model", std::string("m").append(std::to_string(m))}, {"layer", l}, {"head", h},
                       {"kernel", "fa3"}, {"transform", "rotate"}, {"observed_score", obs},
                       {"predicted_score", pred}, {"harmed", obs > 0}});
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
  // The interval is the model-cluster bootstrap of the AUC, computed here directly.
  std::vector<double> pred;
  std::vector<uint8_t> harmed;
  std::vector<int> cluster;
  for (const auto& h : heads) {
    pred.push_back(h["predicted_score"]);
    harmed.push_back(h["harmed"].get<bool>());
    cluster.push_back(std::stoi(h["model"].get<std::string>().substr(1)));
  }
  const auto iv = stats::cluster_bootstrap(
      cluster,
      [&](std::span<const int> idx) -> std::optional<double> {
        std::vector<double> p;
        std::vector<uint8_t> y;
        for (int i : idx) p.push_back(pred[i]), y.push_back(harmed[i]);
        return stats::roc_auc(p, y);
      },
      {300, 21, 0.95});
  EXPECT_EQ(s["auc_lo"].get<double>(), *iv.lo);
  EXPECT_EQ(s["auc_hi"].get<double>(), *iv.hi);
}

TEST(summary_test, threshold_is_five_models) {
  EXPECT_EQ(study::summarize(heads_of(4, 3, 4), 50, 1)[0]["cluster"], "model+layer");
  EXPECT_EQ(study::summarize(heads_of(4, 3, 4), 50, 1)[0]["n_clusters"], 12);
  EXPECT_EQ(study::summarize(heads_of(5, 3, 4), 50, 1)[0]["cluster"], "model");
}
