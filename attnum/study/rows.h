#pragma once
// The head study's row schemas, written once (docs/results.md): one field list per row type,
// each field with its name and value in one place, used by every writer of that row type (as
// llama-bench keeps one field list per printed row type):
//  - row (rows.csv, rows.jsonl, the unit checkpoints, which `attnum merge` copies);
//  - head_row (heads.csv, heads.jsonl);
//  - the zoo's head parameters (zoo_heads.csv).
// The CSV columns are the list's order; JSON objects hold the same fields.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/predict/predictor.h"
#include "attnum/study/zoo.h"

namespace attnum::study {

/// One row of rows.csv: (model, layer, head, text, kernel, condition).
struct row {
  std::string model;
  int layer = 0, head = 0, kv_head = 0, text = 0;
  std::string kernel, condition;
  double rel_err = 0, log_err = 0, predicted_rel_err = 0, max_row_err = 0, cosine = 0;
  double kernel_rel_err = std::nan("");    ///< transfer: the real kernel's rel_err
  std::string predictor_model = "kernel";  ///< whose numerics predicted_rel_err models
  /// The predictor's version string (predict::version_string; in result files, not checkpoints).
  std::string_view predictor_version = predict::kPredictorVersion;
};

/// Returns a row's fields as a checkpoint line holds them (kernel_rel_err only when set, i.e.
/// transfer; no version fields).
nlohmann::json row_json(const row& r);
/// Returns a row's fields with the tool and predictor versions, as rows.jsonl and rows.csv hold them.
nlohmann::json row_json_versioned(const row& r);
/// Returns the row of a checkpoint line; throws nlohmann::json::exception when a field is missing
/// or of another type (predictor_model and kernel_rel_err may be absent: older checkpoints).
row row_from_json(const nlohmann::json& j);
/// The columns of rows.csv (transfer adds kernel_rel_err).
std::vector<std::string> row_columns(bool transfer);

/// One row of heads.csv: (model, layer, head, kernel, transform) with transform a non-plain
/// condition; scores are means over texts of log1p errors, transform minus plain.
struct head_row {
  std::string model;
  int layer = 0, head = 0;
  std::string kernel, transform;
  double observed_score = 0, predicted_score = 0;
  bool harmed = false, predicted_harmed = false;
  double mean_log_err_plain = 0, mean_log_err_transform = 0;
  double mean_pred_log_err_plain = 0, mean_pred_log_err_transform = 0;
  int n_texts = 0;
  std::optional<double> observed_se;  ///< none with one text (null)
  std::string label;                  ///< harmed, helped or null (study/summary.h head_label)
  /// Transfer only: the same from the real kernel's outputs.
  double kernel_observed_score = 0;
  bool kernel_harmed = false;
  std::optional<double> kernel_observed_se;
  std::string kernel_label;
  std::string predictor_model = "kernel";
  std::string_view predictor_version = predict::kPredictorVersion;  ///< predict::version_string
};

/// Returns a head row as heads.jsonl holds it (the transfer fields only with `transfer`; with
/// the tool and predictor versions).
nlohmann::json head_row_json(const head_row& r, bool transfer);
/// The columns of heads.csv (transfer adds the kernel_* columns).
std::vector<std::string> head_columns(bool transfer);

/// Returns the parameters of zoo head h of `model`, layer `layer`, as zoo_heads.csv holds them
/// (with the tool version).
nlohmann::json zoo_head_json(const std::string& model, int layer, const head_params& h);
/// The columns of zoo_heads.csv.
std::vector<std::string> zoo_head_columns();

}  // namespace attnum::study
