// The head study's checkpoints: the configuration file and one file per unit (study/checkpoint.h).
#include "attnum/study/checkpoint.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <tuple>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/hash.h"
#include "attnum/core/same_config.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path unit_path(const fs::path& dir, int i) { return dir / "checkpoints" / fmt::format("unit-{:06d}.jsonl", i); }

std::string unit_key(const plan& p, int i) {
  ATTNUM_ASSERT(i >= 0 && i < static_cast<int>(p.units.size()), "unit {} of {}", i, p.units.size());
  const unit& u = p.units[static_cast<size_t>(i)];
  return fmt::format("{} layer {} text {}", p.model_names[static_cast<size_t>(u.model)], u.layer, u.text);
}

namespace {
std::string row_lines(const std::vector<row>& rows) {
  std::string text;
  for (const auto& r : rows) text += row_json(r).dump() + "\n";
  return text;
}

// Throws unless `rows` are exactly unit i's: its model, layer and text, the plan's predictor,
// and one row per (head, kernel, condition) of the plan's kernels and conditions.
void verify_rows(const plan& p, int i, const std::vector<row>& rows, const std::string& file) {
  const unit& u = p.units[static_cast<size_t>(i)];
  const std::string& model = p.model_names[static_cast<size_t>(u.model)];
  if (rows.empty()) fail("{}: unit {} ({}) holds no rows: remove the file to recompute it", file, i, unit_key(p, i));
  std::set<std::string> kernels, conditions(p.opt.conditions.begin(), p.opt.conditions.end());
  for (const auto& k : p.opt.kernels) kernels.insert(k.name);
  std::set<int> heads;
  std::set<std::tuple<int, std::string, std::string>> seen;
  for (size_t n = 0; n < rows.size(); ++n) {
    const row& r = rows[n];
    if (r.model != model || r.layer != u.layer || r.text != u.text)
      fail(
          "{}: row {} belongs to {} layer {} text {}, not to unit {} ({}): the file is another "
          "unit's; remove it to recompute",
          file, n + 1, clip(r.model, 80), r.layer, r.text, i, unit_key(p, i));
    if (!kernels.count(r.kernel) || !conditions.count(r.condition) || r.predictor_model != p.opt.predictor_model)
      fail(
          "{}: row {} has kernel '{}', condition '{}', predictor '{}', which this study does not run: "
          "the file is another study's; remove it to recompute",
          file, n + 1, clip(r.kernel, 80), clip(r.condition, 80), clip(r.predictor_model, 80));
    if (!seen.insert({r.head, r.kernel, r.condition}).second)
      fail("{}: head {} kernel {} condition {} appears twice", file, r.head, r.kernel, r.condition);
    heads.insert(r.head);
  }
  if (rows.size() != heads.size() * kernels.size() * conditions.size())
    fail(
        "{}: {} rows for {} heads x {} kernels x {} conditions: rows are missing; remove the file "
        "to recompute",
        file, rows.size(), heads.size(), kernels.size(), conditions.size());
}
}  // namespace

std::string unit_text(const plan& p, int i, const std::vector<row>& rows) {
  const std::string lines = row_lines(rows);
  return lines +
         json{{"end", i},
              {"n_rows", rows.size()},
              {"unit", unit_key(p, i)},
              {"rows_fnv1a", core::fnv1a_hex(lines.data(), lines.size())}}
             .dump() +
         "\n";  // completeness marker
}

void write_unit(const fs::path& dir, const plan& p, int i, const std::vector<row>& rows) {
  write_file_atomic(unit_path(dir, i), unit_text(p, i, rows));
}

std::optional<std::vector<row>> read_unit(const fs::path& dir, const plan& p, int i) {
  const fs::path path = unit_path(dir, i);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  const std::string file = path.string();
  const std::string text = read_file(path);  // regular files only, never blocking
  if (text.size() > kMaxJsonBytes) fail("{}: more than {} MiB", file, kMaxJsonBytes >> 20);
  std::vector<row> rows;
  json marker;
  size_t at = 0, rows_end = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) return std::nullopt;  // no marker line: a torn file, recomputed
    json j;
    try {
      j = parse_json_text(std::string_view(text).substr(at, end - at), file);
    } catch (const error&) {
      return std::nullopt;  // a torn or foreign line: recompute the unit
    }
    if (j.is_object() && j.contains("end")) {
      marker = std::move(j);
      rows_end = at;
      break;
    }
    try {
      rows.push_back(row_from_json(j));
      rows.back().predictor_version = predict::version_string(p.opt.predictor.version);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    at = end + 1;
  }
  if (marker.is_null()) return std::nullopt;
  const std::string key = unit_key(p, i);
  if (marker.value("end", json()) != i || !marker.contains("unit") || !marker.contains("rows_fnv1a"))
    fail(
        "{}: the completeness marker does not name unit {} ({}) with its rows hash: the file is "
        "another unit's or an earlier version's; remove it to recompute",
        file, i, key);
  if (marker["unit"] != key)
    fail("{}: holds unit {}, not unit {} ({}): remove it to recompute", file,
         clip(marker["unit"].dump(-1, ' ', false, json::error_handler_t::replace), 80), i, key);
  if (marker.value("n_rows", json()) != rows.size())
    fail("{}: the marker counts {} rows, the file holds {}: remove it to recompute", file,
         clip(marker.value("n_rows", json()).dump(), 40), rows.size());
  const std::string hash = core::fnv1a_hex(text.data(), rows_end);
  if (marker["rows_fnv1a"] != hash)
    fail(
        "{}: the rows changed after the run wrote them (FNV-1a {}, the marker records {}): remove "
        "the file to recompute the unit",
        file, hash, clip(marker["rows_fnv1a"].dump(), 40));
  verify_rows(p, i, rows, file);
  return rows;
}

void write_plan(const fs::path& dir, const plan& p) {
  const fs::path f = dir / "checkpoints" / "study.json";
  const json cfg = config_json(p);
  if (fs::exists(fs::symlink_status(f))) {
    const json old = read_json(f);
    core::require_same_config(old, cfg, f.string(), "use another --out or remove the folder", {"command"});
    return;
  }
  json saved = cfg;
  saved["command"] = p.opt.command;
  write_file_atomic(f, saved.dump(2) + "\n");
}

plan read_plan(const fs::path& dir) {
  const fs::path f = dir / "checkpoints" / "study.json";
  if (!fs::exists(fs::symlink_status(f))) fail("{}: missing (not a head-study folder?)", f.string());
  const json j = read_json(f);
  if (!j.is_object()) fail("{}: expected a JSON object (a study configuration)", f.string());
  return plan_from_config(j, f.string());
}

}  // namespace attnum::study
