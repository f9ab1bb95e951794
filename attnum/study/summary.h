#pragma once
// The head study's summary step: from every unit's checkpoint (study/checkpoint.h) to the result
// files (docs/results.md): meta.json, rows.csv/.jsonl, the per-head table heads.csv/.jsonl
// (scores, labels), the per-(kernel, transform) summary.json (AUC, precision, recall, Spearman
// with clustered intervals) and, for the zoo, zoo_heads.csv. The files depend on the checkpoints
// alone, so they are identical whatever process, thread count, shard or resumed run computed
// the units.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/stats/stats.h"
#include "attnum/study/plan.h"
#include "attnum/study/rows.h"

namespace attnum::study {

/// The per-head summary (heads.csv) and per-(kernel, transform) summary (summary.json).
struct assembled {
  std::vector<row> rows;
  nlohmann::json heads = nlohmann::json::array();
  nlohmann::json summary = nlohmann::json::array();
};
/// Returns the assembled tables from all unit checkpoints; throws attnum::error naming the
/// first missing unit.
assembled assemble_tables(const plan& p, const std::filesystem::path& dir);
/// Writes meta.json, rows.*, heads.*, summary.json into dir (atomically); returns the summary.
nlohmann::json assemble(const plan& p, const std::filesystem::path& dir);

/// Fewest models for which the intervals treat whole models as the clusters; with fewer they use
/// (model, layer) clusters (summary field `cluster`: "model" or "model+layer").
inline constexpr int kMinModelClusters = 5;

/// The noise-floor rule of a head's label (docs/study.md "Labels"): with n >= 2 texts, `null`
/// when |observed_score| < t(0.975, n-1) * observed_se (a paired t-test at 5% per head), else
/// `harmed` (score > 0) or `helped`; with one text there is no standard error and the label
/// falls back to the sign (`null` only for a score of exactly 0).
std::string head_label(double score, std::optional<double> se, int n_texts);

/// Summary rows from per-head rows (heads.jsonl objects), with 95% intervals from
/// stats::cluster_interval (jackknife-t below 30 clusters, percentile bootstrap above):
/// clusters are models when there are at least kMinModelClusters, else (model, layer).
/// AUC, precision and recall on all heads (label: score > 0, as seed 000) and on the non-null
/// heads (`*_nonnull`). With `transfer`, labels are the real kernel's (kernel_harmed,
/// kernel_label) and Spearman compares the emulator's observed scores with the kernel's.
/// with_intervals false: the point estimates only (every interval null, reason "not computed").
nlohmann::json summarize(const nlohmann::json& heads, int n_resamples, uint64_t seed, bool transfer = false,
                         bool with_intervals = true);

/// Texts as a factor: adds to each summary row how far its statistics move when one text is left
/// out (`<stat>_loto_min`, `<stat>_loto_max` for auc, precision, recall, spearman and
/// n_harmed_sign: the statistics of the score's sign, whose meaning does not change with the
/// number of texts; `n_texts_loto`, the texts left out one at a time). Nothing with fewer than 2
/// texts. The intervals are conditional on the texts; this is their spread.
void add_text_spread(const plan& p, assembled& a);

/// The interval options of summary statistic `which` (0 AUC, 1 precision, 2 recall, 3 Spearman):
/// its range ([0, 1], Spearman [-1, 1]), the empirical logit scale of that range (Fisher's z
/// for Spearman) with `count` the items behind the statistic (AUC: the smaller class;
/// precision: predicted-harmed heads; recall: harmed heads; Spearman: heads), and the
/// jackknife's bias correction (docs/study.md "Intervals").
stats::bootstrap_options interval_options(int which, int n_resamples, uint64_t seed, double count);
/// Returns that count for statistic `which` on the heads (pred, harmed).
double interval_count(int which, std::span<const double> pred, std::span<const uint8_t> harmed);

/// Returns a summary row's interval of `stat` as the head tables print it: "[lo, hi]" (each
/// with `spec`), "n/a" when the estimate has no interval (`stat_ci_reason` says why, and the
/// notes list it), "" when the statistic itself is undefined.
std::string interval_text(const nlohmann::json& row, const std::string& stat, const char* spec = "{:.3f}");

/// Returns the printed notes under a summary table: what the intervals are (method, cluster kind
/// and count, undefined resamples), the label rule and the predictor model, as the summary rows
/// record them (one line each distinct setting), what `harmed` and `harmed (sign)` count, and
/// every interval reported as n/a with its reason.
std::string summary_notes(const nlohmann::json& summary);

}  // namespace attnum::study
