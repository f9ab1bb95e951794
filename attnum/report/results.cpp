// Readers of result folders (docs/results.md).
#include "attnum/report/results.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/csv.h"
#include "attnum/io/json_file.h"

namespace attnum::report {
namespace fs = std::filesystem;
namespace {

// A result file's bytes: regular files only (a FIFO or device is refused without blocking), at
// most kMaxJsonBytes, the bound of every JSON file attnum reads back (result CSVs share it).
std::string slurp(const fs::path& file) { return read_file(file, kMaxJsonBytes); }

bool is_integer_text(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size() || s.size() - i > 15) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// A CSV cell as a typed JSON value.
nlohmann::json typed(const std::string& s) {
  if (s.empty() || s == "null" || s == "None" || s == "NA") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (is_integer_text(s)) return std::strtoll(s.c_str(), nullptr, 10);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size()) {
    if (!std::isfinite(v)) return nullptr;  // JSON has no NaN/Inf: shown as blank
    return v;
  }
  return s;
}

struct spec {
  const char* name;  // "heads"
  const char* csv;   // "heads.csv"
  const char* json;  // "heads.jsonl" or "loss.json"
  std::vector<const char*> required;
  std::vector<const char*> numeric;  // required numeric (null allowed)
  std::vector<const char*> boolean;  // normalised to true/false (0/1 accepted)
};

const std::vector<spec>& specs() {
  static const std::vector<spec> s = {
      {"heads",
       "heads.csv",
       "heads.jsonl",
       {"model", "layer", "head", "kernel", "transform", "observed_score", "predicted_score", "harmed"},
       {"layer", "head", "observed_score", "predicted_score"},
       {"harmed", "predicted_harmed", "kernel_harmed"}},
      {"rows",
       "rows.csv",
       "rows.jsonl",
       {"model", "layer", "head", "text", "kernel", "condition", "rel_err"},
       {"layer", "head", "rel_err"},
       {}},
      {"summary", nullptr, "summary.json", {"kernel", "transform"}, {}, {}},
      {"pcast_theory",
       "pcast_theory.csv",
       nullptr,
       {"delta", "scale", "underflow_fraction"},
       {"delta", "scale", "underflow_fraction"},
       {}},
      {"pcast_dp", "pcast_dp.csv", nullptr, {"scale", "dp"}, {"scale", "dp"}, {}},
      {"pcast_simulate",
       "pcast_simulate.csv",
       nullptr,
       {"delta", "scale", "order", "underflow_measured", "mse"},
       {"delta", "scale", "underflow_measured", "mse"},
       {}},
      {"pcast_overflow", "pcast_overflow.csv", nullptr, {"delta", "scale"}, {"delta", "scale"}, {}},
      {"loss", "loss.csv", "loss.json", {"condition", "kernel", "ppl_ratio"}, {"ppl_ratio"}, {}},
      {"loss_paired",
       "loss_paired.csv",
       "loss_paired.json",
       {"kernel", "condition_a", "condition_b", "delta_ce"},
       {"delta_ce"},
       {}},
  };
  return s;
}

// Checks required columns and value types; normalises booleans and the legacy "tile" label.
void validate(table& t, const spec& sp, const fs::path& file) {
  for (const char* c : sp.required)
    if (std::find(t.columns.begin(), t.columns.end(), c) == t.columns.end())
      fail("{}: missing column '{}' (docs/results.md lists the columns of {})", file.string(), c,
           file.filename().string());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    auto& row = t.rows[r];
    for (const char* c : sp.numeric) {
      const auto& v = row[c];
      if (!v.is_null() && !v.is_number())
        fail("{}: row {}, field '{}': expected a number, got {}", file.string(), r + 1, c, io::json_brief(v));
    }
    // A head's label is the text "null" for a head within its noise floor; the CSV reader
    // reads that cell as a null value, so it is put back (a label is never absent in a row that
    // has the column).
    if (std::string(sp.name) == "heads")
      for (const char* c : {"label", "kernel_label"})
        if (row.contains(c) && row[c].is_null()) row[c] = "null";
    for (const char* c : sp.boolean) {
      if (!row.contains(c)) continue;
      auto& v = row[c];
      if (v.is_number_integer() && (v == 0 || v == 1)) v = v == 1;
      if (!v.is_boolean() && !v.is_null())
        fail("{}: row {}, field '{}': expected true or false, got {}", file.string(), r + 1, c, io::json_brief(v));
    }
    for (const char* c : {"condition", "transform"})
      if (row.contains(c) && row[c] == "tile") row[c] = "plain";  // legacy unrotated label
  }
}

void append(std::optional<table>& into, table t) {
  if (!into) {
    into = std::move(t);
    return;
  }
  for (auto& c : t.columns)
    if (std::find(into->columns.begin(), into->columns.end(), c) == into->columns.end()) into->columns.push_back(c);
  for (auto& r : t.rows) into->rows.push_back(std::move(r));
  for (auto& s : t.sources) into->sources.push_back(s);
}

std::optional<table>& slot(result_set& rs, const std::string& name) {
  if (name == "heads") return rs.heads;
  if (name == "rows") return rs.rows;
  if (name == "summary") return rs.summary;
  if (name == "pcast_theory") return rs.pcast_theory;
  if (name == "pcast_dp") return rs.pcast_dp;
  if (name == "pcast_simulate") return rs.pcast_simulate;
  if (name == "pcast_overflow") return rs.pcast_overflow;
  if (name == "loss_paired") return rs.loss_paired;
  return rs.loss;
}

// The file names a folder's completion marker lists, or nullopt when it has no marker (a
// folder written by a caller of read_results that does not mark its output).
std::optional<std::set<std::string>> marker_files(const fs::path& dir) {
  const fs::path m = dir / kCompleteMarker;
  if (!fs::exists(m)) return std::nullopt;
  const nlohmann::json j = read_json(m);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object())
    fail("{}: expected an object with an object 'files'", m.string());
  std::set<std::string> names;
  for (auto it = j["files"].begin(); it != j["files"].end(); ++it) names.insert(it.key());
  return names;
}

// Reads the known files of one folder; returns how many it found. A folder with a completion
// marker is read only for the files the marker lists (anything else is not the run's output).
// `only_meta` reads meta.json alone (a study folder's top level: its summary.json is the
// study's, not a head summary).
int read_folder(result_set& rs, const fs::path& dir, bool only_meta = false) {
  int found = 0;
  const auto listed = marker_files(dir);
  auto has = [&](const char* name) { return fs::exists(dir / name) && (!listed || listed->count(name)); };
  for (const auto& sp : only_meta ? std::vector<spec>{} : specs()) {
    fs::path file;
    if (sp.csv && has(sp.csv))
      file = dir / sp.csv;
    else if (sp.json && has(sp.json))
      file = dir / sp.json;
    else
      continue;
    table t = file.extension() == ".csv" ? read_csv_table(file) : read_json_table(file);
    validate(t, sp, file);
    append(slot(rs, sp.name), std::move(t));
    ++found;
  }
  if (has("meta.json")) {
    const nlohmann::json m = read_json(dir / "meta.json");
    rs.meta.push_back({{"dir", dir.string()}, {"meta", m}});
  }
  return found;
}

}  // namespace

std::vector<std::vector<std::string>> read_csv_cells(const fs::path& file) {
  const std::string text = slurp(file);
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        cell += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cell += c, line += c == '\n';
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(cell)), cell.clear(), any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !cell.empty()) row.push_back(std::move(cell)), out.push_back(std::move(row));
      cell.clear(), row.clear(), any = false, ++line;
    } else {
      cell += c, any = true;
    }
  }
  if (quoted) fail("{}: line {}: unterminated quoted field", file.string(), line);
  if (any || !cell.empty()) row.push_back(std::move(cell)), out.push_back(std::move(row));
  if (out.empty()) fail("{}: empty file (expected a header row)", file.string());
  for (size_t r = 1; r < out.size(); ++r)
    if (out[r].size() != out[0].size())
      fail("{}: row {} has {} fields, the header has {}", file.string(), r + 1, out[r].size(), out[0].size());
  return out;
}

table read_csv_table(const fs::path& file) {
  const auto cells = read_csv_cells(file);
  table t;
  t.columns = cells[0];
  t.sources = {file.string()};
  for (size_t r = 1; r < cells.size(); ++r) {
    nlohmann::json row = nlohmann::json::object();
    for (size_t c = 0; c < t.columns.size(); ++c) row[t.columns[c]] = typed(cells[r][c]);
    t.rows.push_back(std::move(row));
  }
  return t;
}

table read_json_table(const fs::path& file) {
  const std::string text = slurp(file);
  table t;
  t.sources = {file.string()};
  auto add = [&](nlohmann::json o, size_t where) {
    if (!o.is_object()) fail("{}: entry {}: expected a JSON object", file.string(), where);
    for (auto it = o.begin(); it != o.end(); ++it)
      if (std::find(t.columns.begin(), t.columns.end(), it.key()) == t.columns.end()) t.columns.push_back(it.key());
    t.rows.push_back(std::move(o));
  };
  if (file.extension() == ".jsonl") {
    std::istringstream in(text);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n)
      if (line.find_first_not_of(" \t\r") != std::string::npos)
        add(parse_json_text(line, fmt::format("{} line {}", file.string(), n)), n);
  } else {
    auto j = parse_json_text(text, file.string());
    if (!j.is_array()) fail("{}: expected a JSON array of objects", file.string());
    for (size_t i = 0; i < j.size(); ++i) add(std::move(j[i]), i + 1);
  }
  return t;
}

std::vector<fs::path> study_subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* sub : {"heads", "transfer", "pcast", "loss"})
    if (fs::is_directory(dir / sub)) out.push_back(dir / sub);
  return out;
}

result_set read_results(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) fail("report: give at least one result folder with --results DIR");
  result_set rs;
  for (const auto& dir : dirs) {
    if (!fs::is_directory(dir)) fail("--results {}: no such folder", dir.string());
    rs.dirs.push_back(dir.string());
    const auto subs = study_subfolders(dir);
    // A study folder's top level holds the study's summary (not a table), meta.json and the
    // page; its results are in the subfolders.
    int found = read_folder(rs, dir, !subs.empty());
    for (const auto& sub : subs) found += read_folder(rs, sub);
    if (found == 0)
      fail(
          "--results {}: no result file found (expected heads.csv, rows.csv, summary.json, "
          "pcast_*.csv or loss.json, or a study folder with heads/, pcast/, loss/)",
          dir.string());
  }
  const std::pair<const std::optional<table>*, const char*> expected[] = {
      {&rs.heads, "heads.csv (per-head scores): the measured-heads plot and the inspector are empty"},
      {&rs.rows, "rows.csv (per-text errors): opening a head shows its summary only"},
      {&rs.summary, "summary.json (AUC and counts): no AUC is shown"},
      {&rs.pcast_theory, "pcast_theory.csv: no theory curve for the P cast"},
      {&rs.pcast_simulate, "pcast_simulate.csv: no P-cast simulation points or MSE"},
      {&rs.pcast_dp, "pcast_dp.csv: no dp(S) sawtooth"},
      {&rs.loss, "loss.json (downstream loss): no loss table"}};
  for (const auto& [t, what] : expected)
    if (!*t) rs.absent.push_back(fmt::format("No {}", what));
  return rs;
}

std::string to_csv(const table& t) { return io::csv_table(t.columns, t.rows); }

}  // namespace attnum::report
