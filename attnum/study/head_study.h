#pragma once
// The head study (design.md "Conditions and metrics"; docs/results.md for the files; docs/study.md).
//
// Work is divided into units, one per (model, layer, text) of the source: a unit computes every
// head of the layer under every kernel and condition. A layer is the smallest independent unit
// because scales can span its heads (per tensor, per kv group) and the fp64 reference of a head
// is shared by all conditions and kernels. Units are enumerated in a fixed order, computed
// independently (each by one thread, fixed reduction order), checkpointed one file per unit, and
// assembled into the result files from the checkpoints alone: the files are identical whatever
// process, thread count, shard or resumed run computed the units.
//
// API for scale-out (MPI ranks, job-array shards):
//   plan p = make_plan(opt);                      // deterministic unit list + config
//   for (unit u : p.units) if (mine(u)) write_unit(dir, compute_unit(p, u.index));
//   if (all_units_present(p, dir)) assemble(p, dir);
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/attention/kernel_spec.h"
#include "attnum/predict/predictor.h"
#include "attnum/transforms/hadamard.h"
#include "attnum/study/zoo.h"

namespace attnum::study {

/// What the study runs on and how.
struct study_options {
  bool zoo = true;
  zoo_options zoo_opt;
  int n_texts = 3;                      ///< zoo: independent draws of each head's tokens
  std::vector<std::string> captures;    ///< capture files (not zoo)
  /// Transfer: a real kernel's outputs, one file per capture file (same order), with
  /// layers.{l}.o.{condition} [n_head, n_tok, d_head]; kernels then holds the one emulator.
  std::vector<std::string> kernel_outputs;
  /// The kernels, resolved (names unique; a row's `kernel` is the spec's name).
  std::vector<attention::kernel_spec> kernels{attention::preset("fa3")};
  /// The knob assignments applied to every kernel (recorded; read_plan applies them again to the
  /// named presets, and the recorded specs must then match).
  std::vector<std::string> knobs;
  std::vector<std::string> conditions{"plain", "rotate", "center", "center+rotate"};
  transforms::rotation rotation;        ///< of Q and K under rotate and center+rotate
  predict::options predictor;
  /// "kernel": the predictor models each kernel's own numerics (formats, scales, smooth_k);
  /// a preset name: every kernel is scored with that one fixed model (seed 000's design).
  std::string predictor_model = "kernel";
  int bootstrap_resamples = 1000;
  uint64_t bootstrap_seed = 0xb0075ULL;
  std::string command;                  ///< the command line, recorded in meta.json
};

/// One work unit: (model, layer, text).
struct unit {
  int index = 0;
  int model = 0, layer = 0, text = 0;
};

/// A model of the capture source: its capture files, one per text, in the order given.
struct capture_model {
  std::string name;
  int n_layer = 0;
  std::vector<std::string> files;
  std::vector<std::string> hashes;  ///< FNV-1a 64 of each file's bytes (hex)
  std::vector<std::string> outputs, output_hashes;  ///< transfer: the kernel outputs per text
};

/// The study's deterministic plan.
struct plan {
  study_options opt;
  std::vector<unit> units;
  std::vector<std::string> model_names;
  std::vector<capture_model> sources;  ///< captures only, one per model
};

/// One layer's operands: q [n_head, n, d], k and v [n_head_kv, n, d].
struct layer_data {
  std::string model;
  int n_head = 0, n_head_kv = 0, n = 0, d = 0;
  std::vector<float> q, k, v;
};
/// Returns the operands of unit i's layer and text (zoo draw or capture file).
layer_data load_layer(const plan& p, int i);
/// Reads layer l of a capture file; throws attnum::error naming the file and tensor on a bad shape.
layer_data load_capture_layer(const std::string& file, int l);

/// Returns the plan of a study. Throws attnum::error on bad options (unknown kernel or
/// condition, no plain condition, no source).
plan make_plan(const study_options& opt);

/// One row of rows.csv: (model, layer, head, text, kernel, condition).
struct row {
  std::string model;
  int layer = 0, head = 0, kv_head = 0, text = 0;
  std::string kernel, condition;
  double rel_err = 0, log_err = 0, predicted_rel_err = 0, max_row_err = 0, cosine = 0;
  double kernel_rel_err = std::nan("");  ///< transfer: the real kernel's rel_err
  std::string predictor_model = "kernel";  ///< whose numerics predicted_rel_err models
};

/// Returns the rows of unit i (heads in order, then kernels, then conditions).
std::vector<row> compute_unit(const plan& p, int i);

/// Checkpoint file of unit i in dir (dir/checkpoints/unit-NNNNNN.jsonl).
std::filesystem::path unit_path(const std::filesystem::path& dir, int i);
/// Writes a unit's rows atomically (temp file + rename).
void write_unit(const std::filesystem::path& dir, int i, const std::vector<row>& rows);
/// Reads a unit's rows; std::nullopt if absent or incomplete (a killed write leaves only temps).
std::optional<std::vector<row>> read_unit(const std::filesystem::path& dir, int i);
/// Writes dir/checkpoints/study.json (the plan's config); throws attnum::error if one exists
/// with a different config (naming the field).
void write_plan(const std::filesystem::path& dir, const plan& p);
/// Reads a plan back from dir/checkpoints/study.json (for merge).
plan read_plan(const std::filesystem::path& dir);

/// Progress and partial-run controls of run_study.
struct run_controls {
  int shard_index = 0, shard_count = 1;  ///< compute units with index % count == shard_index
  int stop_after = -1;                   ///< test hook: stop after computing this many units
  bool progress = true;                  ///< progress bar on stderr
};

/// Runs (or resumes) the study into dir: computes the missing units of this shard in parallel,
/// checkpoints each, and assembles the result files when every unit is present. Returns true
/// when the result files were written.
bool run_study(const plan& p, const std::filesystem::path& dir, const run_controls& ctl = {});

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
nlohmann::json summarize(const nlohmann::json& heads, int n_resamples, uint64_t seed,
                         bool transfer = false);

/// Returns the printed notes under a summary table: what the intervals are (method, cluster kind
/// and count, undefined resamples), the label rule and the predictor model, as the summary rows
/// record them (one line each distinct setting).
std::string summary_notes(const nlohmann::json& summary);

/// Merges shard folders (same study config) into `out`: copies every complete unit checkpoint,
/// then assembles. Throws attnum::error naming a folder with another config or a missing unit.
/// Returns the summary.
nlohmann::json merge(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out);

}  // namespace attnum::study
