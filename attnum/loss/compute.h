#pragma once
// The loss study's computation (loss/loss_study.h): per-label results of units, each window's
// reference forward run once (or its logits read from a file) and one forward per condition; the
// forward pass itself is model/transformer.h's, its attention model/hooks.h's.
#include <cstdint>
#include <span>
#include <vector>

#include "attnum/loss/plan.h"
#include "attnum/model/weights.h"

namespace attnum::loss {

/// Per-label results of one unit (labels in window order).
struct unit_result {
  loss_unit unit;
  std::vector<double> nll_ref, nll_var;  ///< -log p(label) under reference / variant
  std::vector<double> kl;                ///< KL(p_ref || p_var) over the vocabulary
  std::vector<double> dp;                ///< p_var(label) - p_ref(label)
  std::vector<uint8_t> top1_same;        ///< argmax agrees
};

/// The reference forward's logits [N * vocab] of a window's inputs (p.reference attention,
/// p.linear precision): what compute_window compares every condition with.
std::vector<float> reference_forward(const model::weights& w, const loss_params& p, std::span<const int> inputs);

/// Computes the given units of one window (all share source and window): the reference forward
/// once (or its logits from p.reference_file), then one forward per unit's condition. `w` must already be bf16-rounded
/// when p.linear is bf16 (see round_to_bf16).
std::vector<unit_result> compute_window(const model::weights& w, const loss_params& p,
                                        const std::vector<loss_unit>& units);

/// Computes a list of units (any order), grouping them by window.
std::vector<unit_result> compute_units(const model::weights& w, const loss_params& p,
                                       const std::vector<loss_unit>& units);

/// Per-label statistics of one position: logits of the reference and the variant ([vocab]).
/// Exposed for tests. Returns {nll_ref, nll_var, kl, dp, top1_same}.
struct label_stat {
  double nll_ref, nll_var, kl, dp;
  bool top1_same;
};
label_stat compare_logits(const float* ref, const float* var, int vocab, int label);

}  // namespace attnum::loss
