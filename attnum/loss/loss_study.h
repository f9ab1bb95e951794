#pragma once
// The loss study: teacher-forced cross-entropy of a model whose every attention layer runs an
// emulated kernel under a condition, against a reference attention, over held-out labels
// (docs/model.md; docs/results.md for the files).
//
// In parts, by concern:
//   loss/plan.h              what runs: parameters, windows, the deterministic unit list, shards
//   loss/reference_logits.h  the reference's logits saved once and read back
//   loss/compute.h           running units: the reference and variant forwards, per-label results
//   loss/rows.h              the row schemas (one field list per row type, for every writer)
//   loss/summary.h           rows per condition and paired rows, intervals over text windows
//   loss/shards.h            shard files and their merge
// and here the driver that runs them in order in one process (run_loss).
//
// Scale-out: each unit's per-label results are computed independently (compute_window runs the
// reference once per window and any subset of its conditions), and summarize() merges any
// collection of unit results in a canonical order (condition, source, window), so a sharded or
// MPI run that gathers every unit gives bit-identical rows to a single run.
#include <vector>

#include "attnum/loss/compute.h"
#include "attnum/loss/plan.h"
#include "attnum/loss/reference_logits.h"
#include "attnum/loss/rows.h"
#include "attnum/loss/shards.h"
#include "attnum/loss/summary.h"
#include "attnum/model/weights.h"

namespace attnum::loss {

/// Runs the whole study in this process: validate, compute_units(all_units), summarize.
std::vector<loss_row> run_loss(const model::weights& w, const loss_params& p);
/// As run_loss, and the paired rows of the same units into `paired`.
std::vector<loss_row> run_loss(const model::weights& w, const loss_params& p, std::vector<paired_row>& paired);

}  // namespace attnum::loss
