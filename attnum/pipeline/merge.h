#pragma once
// Merging job-array shards: each shard folder holds the unit checkpoints it computed; the merge
// gathers them into one folder and assembles the files a single run writes.
#include <filesystem>
#include <string>
#include <vector>

namespace attnum::pipeline {

/// Merges shard folders of one head study (checkpoints/study.json) or one loss study
/// (checkpoints/loss-params.json) into `out`; returns "head study" or "loss study". Throws
/// attnum::error when the folders disagree about the study, or a unit is in none of them.
std::string merge_folders(const std::vector<std::filesystem::path>& dirs,
                          const std::filesystem::path& out);

}  // namespace attnum::pipeline
