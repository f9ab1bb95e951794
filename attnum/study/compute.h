#pragma once
// The head study's compute step: one unit (model, layer, text) of a plan (study/plan.h) run
// under every kernel and condition: the layer's operands (zoo draw or capture file), the fp64
// reference and the predictor's context once per head, the kernel emulations
// (study/emulate.h), the metrics (attention/metrics.h) and the predictor, into rows
// (study/rows.h). Each unit is independent and deterministic (one thread, fixed order).
#include <span>
#include <string>
#include <vector>

#include "attnum/study/plan.h"
#include "attnum/study/rows.h"

namespace attnum::study {

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

/// Returns the rows of unit i (heads in order, then kernels, then conditions).
std::vector<row> compute_unit(const plan& p, int i);
/// Returns the rows of unit i for each of `plans` (in order), plans that differ only in their
/// predictor model (transfer scores the kernel-aware and a fixed predictor side by side): the
/// operands, fp64 references and kernel emulations are computed once for all of them. Each
/// plan's rows are those compute_unit(plan, i) returns.
std::vector<std::vector<row>> compute_unit(std::span<const plan> plans, int i);

}  // namespace attnum::study
