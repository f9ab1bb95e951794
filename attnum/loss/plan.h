#pragma once
// The loss study's plan (loss/loss_study.h): what it measures (loss_params, checked by validate)
// and its deterministic list of work units, whole or one shard's.
//
// Windows: for window w of a token stream, inputs are ids[wN .. wN+N-1] and labels
// ids[wN+1 .. wN+N] (each window starts a fresh context at position 0).
//
// Scale-out: the work is a list of units (source, window, condition), enumerated in canonical
// order (condition-major, then source, then window); a shard runs whole windows.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attnum/attention/kernel_spec.h"
#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::loss {

class reference_logits;

/// What to measure.
struct loss_params {
  std::vector<std::vector<int>> sources;                     ///< token id streams (one per text / id file)
  std::vector<std::string> source_names;                     ///< for metadata
  int n_tokens = 1024;                                       ///< N, labels per window
  int windows = 1;                                           ///< K windows per source
  attention::kernel_spec kernel = attention::preset("fa3");  ///< the variant's kernel (resolved)
  std::vector<std::string> knobs;  ///< knobs applied to it (recorded; a merge re-applies them)
  transforms::rotation rotation;   ///< of Q and K under rotate and center+rotate
  std::vector<std::string> conditions = {"plain"};
  std::string reference = "bf16";  ///< "bf16" (emulated native BF16 attention) or "fp64"
  model::linear_precision linear = model::linear_precision::bf16;
  /// Recorded in shard and checkpoint parameters; the intervals (a jackknife over text windows)
  /// draw no resamples, so they do not use them.
  int bootstrap_samples = 1000;
  uint64_t bootstrap_seed = 0x105505EEDULL;
  /// The reference's logits read from a file (loss/reference_logits.h) instead of computed: null
  /// computes them (the reference forward of every window).
  std::shared_ptr<const reference_logits> reference_file;
  /// The forward pass of every reference and variant (empty: model::forward). A layer pipeline's
  /// (scaleout/layers.h: every rank calls it, every rank gets the last rank's logits) is the only
  /// other; it computes the same logits.
  std::function<std::vector<float>(const model::weights&, std::span<const int>, const model::forward_options&)> forward;
  /// Accumulates the linear layers' time and FLOPs over this process's forwards when set (the
  /// study reports them beside its step times); not a parameter of the results.
  model::forward_stats* stats = nullptr;
};

/// One work unit.
struct loss_unit {
  int source = 0, window = 0, condition = 0;  ///< condition: index into loss_params::conditions
};

/// Throws attnum::error unless every source holds windows*N+1 ids and N fits the context.
void validate(const loss_params& p, const model::weights& w);

/// Returns all units in canonical order (condition-major, then source, then window).
std::vector<loss_unit> all_units(const loss_params& p);

/// Returns the units of shard `shard` of `n_shards` (round-robin over windows, so every shard
/// runs whole windows and computes each reference once): deterministic.
std::vector<loss_unit> shard_units(const loss_params& p, int shard, int n_shards);

/// The input ids of window `window` of source `source` (positions 0..N-1).
std::span<const int> window_inputs(const loss_params& p, int source, int window);
/// The labels of window `window` of source `source` (the ids after the inputs).
std::span<const int> window_labels(const loss_params& p, int source, int window);

}  // namespace attnum::loss
