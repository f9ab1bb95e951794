#pragma once
// --predictor-version v1|v2 (docs/predictor.md): one option for every command that takes
// --predictor-model (heads, study, transfer).
#include <CLI/CLI.hpp>

#include <string>

#include "attnum/predict/predictor.h"

namespace attnum::cli {

/// Adds --predictor-version to `app`, read into `name` (default v1).
inline void add_predictor_version_option(CLI::App& app, std::string& name) {
  app.add_option("--predictor-version", name,
                 "Predictor: v1 (independent rounding, " + std::string(predict::kPredictorVersion) +
                     ") or v2 (shared rounding within a grid, " + std::string(predict::kPredictorVersionV2) +
                     "; docs/predictor.md)")
      ->capture_default_str();
}

}  // namespace attnum::cli
