#pragma once
// `attnum study`: the whole study of the seeds, end to end.
//   1. operands: the synthetic head zoo (default), or captures of a real model on texts
//   2. the head study for every kernel and condition, with the predictor and its statistics
//   3. the downstream loss (with a model): every layer's attention swapped for each kernel
//   4. P-cast theory, the dp(S) sawtooth, a short sink simulation and the stale-max side
//   5. the HTML report, summary.json and a summary table
// Every step checkpoints into the output folder, so a killed study resumes where it stopped;
// under mpirun the head and loss steps are divided among the ranks (attnum/pipeline/distributed.h).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/attention/condition.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/predict/predictor.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::pipeline {

/// What `attnum study` runs.
struct study_config {
  std::string model;               ///< llama2.c file or Hugging Face folder; empty: the zoo
  std::string tokenizer;           ///< tokenizer override
  std::vector<std::string> texts;  ///< empty: the three public-domain books
  int tokens = 1024;               ///< tokens per text (capped by the model's context)
  std::vector<attention::kernel_spec> kernels{attention::preset("fa3"), attention::preset("sage2pp-sm89")};
  std::vector<std::string> knobs;  ///< applied to every kernel (recorded)
  transforms::rotation rotation;   ///< of Q and K (heads and loss)
  std::vector<std::string> conditions = attention::all_condition_names();
  std::string linear = "auto";                                ///< linear layers of the model runner
  std::string predictor_model = "kernel";                     ///< head study: "kernel" or one fixed preset
  predict::version predictor_version = predict::version::v1;  ///< head study: the predictor's model
  std::filesystem::path out = "results/study";
  std::optional<std::filesystem::path> assets;  ///< node_modules override for the report
  bool quick_pcast = true;                      ///< short P-cast simulation (3 seeds, 8 query rows)
  bool report = true;
  bool progress = true;
  int zoo_layer_cap = 0;  ///< tests: keep only the first layers of each zoo model
  int zoo_tokens = 1024;  ///< tokens per zoo head
  std::string command;    ///< recorded in the result files
  /// Split the model's layers across the MPI ranks (scaleout/layers.h) for the captures and the
  /// loss; the head study's units are divided among the ranks as without it.
  bool pipeline_layers = false;
};

/// Runs (or resumes) the study; returns summary.json's contents (on rank 0; an empty object on
/// other ranks). Throws attnum::error on bad input.
nlohmann::json run_study(const study_config& c);

/// Returns the printed summary table of a summary.json.
std::string summary_table(const nlohmann::json& summary);

}  // namespace attnum::pipeline
