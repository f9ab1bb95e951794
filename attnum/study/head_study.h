#pragma once
// The head study (design.md "Conditions and metrics"; docs/results.md for the files; docs/study.md).
//
// In parts, by concern:
//   study/plan.h        what runs: options, the deterministic unit list, the configuration
//   study/compute.h     running one unit: operands, emulation, fp64 reference, metrics, predictor
//   study/rows.h        the row schemas (one field list per row type, for every writer)
//   study/checkpoint.h  the checkpoint folder: configuration check, one file per unit, resume
//   study/summary.h     per-head table, summary with intervals, the result files
// and here the driver that runs them in order (run_study) and the merge of shard folders.
//
// Units are enumerated in a fixed order, computed independently (each by one thread, fixed
// reduction order), checkpointed one file per unit, and assembled into the result files from the
// checkpoints alone: the files are identical whatever process, thread count, shard or resumed run
// computed the units.
//
// API for scale-out (MPI ranks, job-array shards):
//   plan p = make_plan(opt);                      // deterministic unit list + config
//   for (unit u : p.units) if (mine(u)) write_unit(dir, p, u.index, compute_unit(p, u.index));
//   if (all_units_present(p, dir)) assemble(p, dir);
#include <filesystem>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/study/checkpoint.h"
#include "attnum/study/compute.h"
#include "attnum/study/plan.h"
#include "attnum/study/rows.h"
#include "attnum/study/summary.h"

namespace attnum::study {

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
/// The same for studies that differ only in their predictor model (transfer's kernel-aware and
/// fixed predictors), plans[j] into dirs[j]: each missing unit is computed once for all of them
/// (compute_unit), and every folder gets the files run_study(plans[j], dirs[j]) writes. Returns
/// true when every folder's result files were written.
bool run_study(std::span<const plan> plans, std::span<const std::filesystem::path> dirs, const run_controls& ctl = {});

/// Merges shard folders (same study config) into `out`: copies every complete unit checkpoint,
/// then assembles. Throws attnum::error naming a folder with another config or a missing unit.
/// Returns the summary.
nlohmann::json merge(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out);

}  // namespace attnum::study
