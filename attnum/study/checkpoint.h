#pragma once
// The head study's checkpoints (docs/study.md "Checkpoints and resume"): DIR/checkpoints/study.json
// holds the plan's configuration (study/plan.h config_json) and one file per finished unit
// (unit-NNNNNN.jsonl, rows in study/rows.h's schema, then a completeness marker naming the unit
// and holding the FNV-1a hash of the row lines), each written atomically. A run in a folder of
// another configuration is refused naming the field; a resumed, sharded or merged run reads the
// finished units back (verified: hash, unit, one row per head, kernel and condition) and
// computes only the missing ones.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attnum/study/plan.h"
#include "attnum/study/rows.h"

namespace attnum::study {

/// Checkpoint file of unit i in dir (dir/checkpoints/unit-NNNNNN.jsonl).
std::filesystem::path unit_path(const std::filesystem::path& dir, int i);
/// The key of unit i of a plan as its checkpoint records it: "MODEL layer L text T".
std::string unit_key(const plan& p, int i);
/// The text of unit i's checkpoint file: one JSON line per row, then the completeness marker
/// {"end": i, "n_rows": N, "unit": unit_key, "rows_fnv1a": hash of the row lines}.
std::string unit_text(const plan& p, int i, const std::vector<row>& rows);
/// Writes a unit's rows atomically (temp file + rename): unit_text at unit_path.
void write_unit(const std::filesystem::path& dir, const plan& p, int i, const std::vector<row>& rows);
/// Reads a unit's rows; std::nullopt if absent or incomplete (no completeness marker). A
/// complete file that does not verify (rows hash, unit key, rows of another unit or study, no
/// rows, a head, kernel or condition missing or twice) is refused: attnum::error naming the file.
std::optional<std::vector<row>> read_unit(const std::filesystem::path& dir, const plan& p, int i);
/// Writes dir/checkpoints/study.json (the plan's config); throws attnum::error if one exists
/// with a different config (naming the field).
void write_plan(const std::filesystem::path& dir, const plan& p);
/// Reads a plan back from dir/checkpoints/study.json (for merge).
plan read_plan(const std::filesystem::path& dir);

}  // namespace attnum::study
