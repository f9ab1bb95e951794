// The head study's checkpoints: the configuration file and one file per unit (study/checkpoint.h).
#include "attnum/study/checkpoint.h"

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/same_config.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path unit_path(const fs::path& dir, int i) {
  return dir / "checkpoints" / fmt::format("unit-{:06d}.jsonl", i);
}

std::string unit_text(int i, const std::vector<row>& rows) {
  std::string text;
  for (const auto& r : rows) text += row_json(r).dump() + "\n";
  text += json{{"end", i}, {"n_rows", rows.size()}}.dump() + "\n";  // completeness marker
  return text;
}

void write_unit(const fs::path& dir, int i, const std::vector<row>& rows) {
  write_file_atomic(unit_path(dir, i), unit_text(i, rows));
}

std::optional<std::vector<row>> read_unit(const fs::path& dir, int i) {
  std::ifstream f(unit_path(dir, i));
  if (!f) return std::nullopt;
  std::vector<row> rows;
  std::string line;
  bool complete = false;
  try {
    while (std::getline(f, line)) {
      const json j = json::parse(line);
      if (j.contains("end")) {
        complete = j.at("end") == i && j.at("n_rows") == rows.size();
        break;
      }
      rows.push_back(row_from_json(j));
    }
  } catch (const std::exception&) {
    return std::nullopt;  // a torn or foreign file: recompute the unit
  }
  if (!complete) return std::nullopt;
  return rows;
}

void write_plan(const fs::path& dir, const plan& p) {
  const fs::path f = dir / "checkpoints" / "study.json";
  const json cfg = config_json(p);
  if (fs::exists(f)) {
    std::ifstream in(f);
    json old;
    try {
      old = json::parse(in);
    } catch (const std::exception& e) {
      fail("{}: not a study config ({})", f.string(), e.what());
    }
    core::require_same_config(old, cfg, f.string(), "use another --out or remove the folder", {"command"});
    return;
  }
  json saved = cfg;
  saved["command"] = p.opt.command;
  write_file_atomic(f, saved.dump(2) + "\n");
}

plan read_plan(const fs::path& dir) {
  const fs::path f = dir / "checkpoints" / "study.json";
  std::ifstream in(f);
  if (!in) fail("{}: missing (not a head-study folder?)", f.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    fail("{}: bad JSON ({})", f.string(), e.what());
  }
  return plan_from_config(j, f.string());
}

}  // namespace attnum::study
