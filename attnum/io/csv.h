#pragma once
// The one CSV dialect every result file uses (RFC 4180): a header row, comma separators, "\n"
// line ends; a string is quoted (quotes doubled) when it holds a comma, quote, CR or LF; null and
// non-finite numbers are empty cells; floating-point numbers in the shortest form that reads back
// to the same double; booleans as true/false; integers as written; arrays and objects as compact
// JSON, quoted like a string.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnum::io {

/// Returns the field `s` quoted where RFC 4180 needs it.
inline std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

/// Returns one cell for a JSON value (json or ordered_json).
template <typename J>
std::string csv_cell(const J& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_quote(v.template get<std::string>());
  if (v.is_boolean()) return v.template get<bool>() ? "true" : "false";
  if (v.is_number_float()) {
    const double x = v.template get<double>();
    return std::isfinite(x) ? fmt::format("{}", x) : "";
  }
  if (v.is_structured()) return csv_quote(v.dump());
  return v.dump();
}

/// Returns the table: `columns` as the header, then one line per row object (a missing key is an
/// empty cell).
template <typename J>
std::string csv_table(const std::vector<std::string>& columns, const J& rows) {
  std::string out;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (c) out += ',';
    out += csv_quote(columns[c]);
  }
  out += "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c) out += ",";
      const auto it = r.find(columns[c]);
      if (it != r.end()) out += csv_cell(*it);
    }
    out += "\n";
  }
  return out;
}

/// Returns the table whose columns are the keys of the first row, in its order (empty when there
/// are no rows).
template <typename J>
std::string csv_table(const J& rows) {
  if (!rows.is_array() || rows.empty()) return "";
  std::vector<std::string> columns;
  for (auto it = rows[0].begin(); it != rows[0].end(); ++it) columns.push_back(it.key());
  return csv_table(columns, rows);
}

}  // namespace attnum::io
