#pragma once
// The head study and the loss study across MPI ranks (attnum/scaleout/world.h): every rank
// computes its round-robin share of the missing units with its own threads; rank 0 stores each
// unit's checkpoint as it arrives and writes exactly the files a single-process run writes.
// Without MPI (or with one rank) these are the single-process runs.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "attnum/loss/loss_study.h"
#include "attnum/model/weights.h"
#include "attnum/study/head_study.h"

namespace attnum::pipeline {

/// Runs or resumes the head study into dir across all ranks (or this shard of a job array when
/// shard_count > 1, in which case `attnum merge` assembles); returns true on rank 0 when the
/// result files were written.
bool run_heads(const study::plan& p, const std::filesystem::path& dir, int shard_index = 0, int shard_count = 1,
               bool progress = true);
/// The same for studies that differ only in their predictor model, plans[j] into dirs[j], each
/// unit computed once for all (study::run_study's overload).
bool run_heads(std::span<const study::plan> plans, std::span<const std::filesystem::path> dirs, int shard_index = 0,
               int shard_count = 1, bool progress = true);

/// Runs or resumes the loss study across all ranks, one work item per (source, window) with all
/// its conditions, checkpointed in dir/checkpoints/ when dir is given (so a killed `attnum
/// study` resumes); returns the rows on rank 0 (empty on other ranks). With shard_count > 1 it
/// computes only this shard's windows into dir and returns no rows. (`attnum loss --shard` writes
/// loss::write_shard_file files instead, which `attnum merge` combines.) The paired comparisons
/// go to dir/loss_paired.{json,csv} when dir is given, and into *paired (rank 0) when given.
/// With pipeline_layers every rank runs every window (each forward pass flows through all ranks,
/// p.forward being scaleout::forward_pipeline_shared) and rank 0 stores them.
std::vector<loss::loss_row> run_loss(const model::weights& w, const loss::loss_params& p, const std::string& model_id,
                                     const std::filesystem::path& dir, int shard_index = 0, int shard_count = 1,
                                     bool progress = true, std::vector<loss::paired_row>* paired = nullptr,
                                     bool pipeline_layers = false);

/// Loss checkpoint folder layout: dir/checkpoints/loss-params.json and window-S-W.json.
std::filesystem::path loss_window_path(const std::filesystem::path& dir, int source, int window);

}  // namespace attnum::pipeline
