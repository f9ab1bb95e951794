#pragma once
// The loss study's shard files and their merge (loss/loss_study.h): a shard (`attnum loss
// --shard I/N`, an MPI rank) writes its units' per-label results with the parameters a merge
// needs; the merge reads any set of them and gives the rows a single run gives, bit for bit.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnum/loss/compute.h"
#include "attnum/loss/plan.h"
#include "attnum/loss/rows.h"

namespace attnum::loss {

/// Unit results as JSON (round-trip exact: shards write these, the merge reads them).
nlohmann::json to_json(const unit_result& r);
unit_result unit_result_from_json(const nlohmann::json& j);

/// Returns a shard file: the parameters a merge needs (model, kernel, conditions, reference,
/// linear precision, N, K, sources, bootstrap) plus the shard's unit results.
nlohmann::json shard_to_json(const loss_params& p, const std::string& model_id, int shard, int n_shards,
                             const std::vector<unit_result>& results);

/// Merges shard files (any order) into the rows a single run gives, bit for bit. Throws
/// attnum::error when the shards disagree on parameters, or a unit is missing or duplicated.
std::vector<loss_row> merge_shards(const std::vector<nlohmann::json>& shards);

/// Writes DIR/loss-shard-I-of-N.json atomically.
void write_shard_file(const std::string& dir, int shard, int n_shards, const nlohmann::json& j);

/// Reads the shard files in `dirs` (every loss-shard-*.json) and writes DIR/loss.{json,csv} and
/// DIR/loss_paired.{json,csv} as a single run would; returns the rows.
std::vector<loss_row> merge_shard_dirs(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace attnum::loss
