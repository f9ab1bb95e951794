#pragma once
// The loss study's summary (loss/loss_study.h): unit results (any order, any split) merged in a
// canonical order (condition, source, window) into one row per condition and the paired rows,
// with intervals over the text windows, so that a sharded or MPI run that gathers every unit gives
// bit-identical rows to a single run.
#include <string>
#include <vector>

#include "attnum/loss/compute.h"
#include "attnum/loss/plan.h"
#include "attnum/loss/rows.h"

namespace attnum::loss {

/// The fewest text windows (sources x windows) for an interval over them: with fewer, every
/// loss interval is reported as not available (t(1) is 12.7, and one window's spread is no
/// estimate of another's).
inline constexpr int kMinLossWindows = 3;

/// The comparisons loss reports when both conditions ran: center vs plain, rotate vs plain,
/// center+rotate vs rotate, center+rotate vs plain.
inline constexpr const char* kPairedComparisons[][2] = {
    {"center", "plain"}, {"rotate", "plain"}, {"center+rotate", "rotate"}, {"center+rotate", "plain"}};

/// Merges unit results (any order, any split) into one row per condition.
/// Throws attnum::error when a unit is missing or duplicated.
std::vector<loss_row> summarize(const loss_params& p, const std::string& model_id, std::vector<unit_result> results);

/// Returns the paired rows (kPairedComparisons whose both conditions ran) of the same unit
/// results summarize() takes; deterministic in the same way. Throws like summarize.
std::vector<paired_row> summarize_paired(const loss_params& p, const std::string& model_id,
                                         std::vector<unit_result> results);

}  // namespace attnum::loss
