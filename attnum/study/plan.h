#pragma once
// The head study's plan (docs/study.md): what a study runs (source, kernels, conditions,
// rotation, predictor model) and its deterministic list of work units, plus the configuration
// that identifies it (config_json: what a checkpoint folder, a shard or a merge must match).
//
// Work is divided into units, one per (model, layer, text) of the source: a unit computes every
// head of the layer under every kernel and condition (study/compute.h). A layer is the smallest
// independent unit because scales can span its heads (per tensor, per kv group) and the fp64
// reference of a head is shared by all conditions and kernels.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/attention/condition.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/predict/predictor.h"
#include "attnum/study/zoo.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::study {

/// What the study runs on and how.
struct study_options {
  bool zoo = true;
  zoo_options zoo_opt;
  int n_texts = 3;                    ///< zoo: independent draws of each head's tokens
  std::vector<std::string> captures;  ///< capture files (not zoo)
  /// Transfer: a real kernel's outputs, one file per capture file (same order), with
  /// layers.{l}.o.{condition} [n_head, n_tok, d_head]; kernels then holds the one emulator.
  std::vector<std::string> kernel_outputs;
  /// The kernels, resolved (names unique; a row's `kernel` is the spec's name).
  std::vector<attention::kernel_spec> kernels{attention::preset("fa3")};
  /// The knob assignments applied to every kernel (recorded; plan_from_config applies them again
  /// to the named presets, and the recorded specs must then match).
  std::vector<std::string> knobs;
  std::vector<std::string> conditions = attention::all_condition_names();
  transforms::rotation rotation;  ///< of Q and K under rotate and center+rotate
  predict::options predictor;
  /// "kernel": the predictor models each kernel's own numerics (formats, scales, smooth_k);
  /// a preset name: every kernel is scored with that one fixed model (seed 000's design).
  std::string predictor_model = "kernel";
  int bootstrap_resamples = 1000;
  uint64_t bootstrap_seed = 0xb0075ULL;
  std::string command;  ///< the command line, recorded in meta.json
};

/// What one work unit is, in words (the progress log's first line).
inline constexpr const char* kUnitHelp = "one (model, layer, text) with all its heads under every kernel and condition";

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
  std::vector<std::string> hashes;                  ///< FNV-1a 64 of each file's bytes (hex)
  std::vector<std::string> outputs, output_hashes;  ///< transfer: the kernel outputs per text
};

/// The study's deterministic plan.
struct plan {
  study_options opt;
  std::vector<unit> units;
  std::vector<std::string> model_names;
  std::vector<capture_model> sources;  ///< captures only, one per model
};

/// Returns the plan of a study. Throws attnum::error on bad options (unknown kernel or
/// condition, no plain condition, no source).
plan make_plan(const study_options& opt);

/// Checks a list of conditions: each a known condition (an unknown one is refused with the
/// closest names), none given twice ("tile" is plain's legacy name, so "plain,tile" repeats),
/// and with `needs_transform` (the head study: every score compares a transform with plain) one
/// besides plain among them. `flag` names the list in messages ("--conditions", "conditions").
void check_conditions(const std::vector<std::string>& conditions, bool needs_transform,
                      std::string_view flag = "--conditions");

/// Returns the configuration of a plan: every option that changes a result (tool and predictor
/// versions, source with its files' FNV-1a hashes, kernels with their knobs and specs, conditions,
/// rotation, predictor, bootstrap, unit count). Doubles are written in shortest round-trip form.
nlohmann::json config_json(const plan& p);
/// Returns the plan whose configuration is `config` (config_json's inverse, for a folder's
/// checkpoints/study.json); throws attnum::error naming `what` and the missing or bad field, or
/// the field that differs when the plan rebuilt here has another configuration (another tool or
/// predictor version).
plan plan_from_config(const nlohmann::json& config, const std::string& what);

/// Throws attnum::error naming the first field in which a plan of `plans` differs from the first
/// in more than its predictor model: plans computed together (study/compute.h) must.
void require_predictor_variants(std::span<const plan> plans);

/// The source as recorded in meta.json: "zoo", or each capture file with its hash (and its kernel
/// outputs for transfer).
nlohmann::json source_json(const plan& p);
/// The kernels' names, in order.
std::vector<std::string> kernel_names(const study_options& o);
/// Each kernel's full spec (attention::to_json), in order.
nlohmann::json kernel_specs_json(const study_options& o);

}  // namespace attnum::study
