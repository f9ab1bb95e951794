#include "attnum/io/table_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "attnum/core/error.h"
#include "attnum/core/suggest.h"
#include "attnum/io/csv.h"

namespace attnum::io {
namespace {

using json = nlohmann::ordered_json;

const json& as_array(const json& rows, json& holder) {
  if (rows.is_array()) return rows;
  holder = json::array();
  if (!rows.is_null()) holder.push_back(rows);
  return holder;
}

/// A Markdown cell: six significant digits for floats (the text tables' precision), integers and
/// strings as they are, `|` escaped, nested values as compact JSON, null and non-finite empty.
std::string md_cell(const json& v) {
  std::string s;
  if (v.is_null()) return s;
  if (v.is_string()) {
    s = v.get<std::string>();
  } else if (v.is_boolean()) {
    s = v.get<bool>() ? "true" : "false";
  } else if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!std::isfinite(x)) return s;
    s = fmt::format("{:.6g}", x);
  } else {
    s = v.dump();
  }
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += '\\';
    out += ch == '\n' || ch == '\r' ? ' ' : ch;
  }
  return out;
}

std::string md_table(const json& rows) {
  const auto columns = row_columns(rows);
  if (columns.empty()) return "";
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(columns.size(), 3);
  std::vector<bool> numeric(columns.size(), true);
  for (size_t c = 0; c < columns.size(); ++c) width[c] = std::max(width[c], columns[c].size());
  for (const auto& r : rows) {
    auto& line = cells.emplace_back();
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto it = r.find(columns[c]);
      line.push_back(it == r.end() ? "" : md_cell(*it));
      if (it != r.end() && !it->is_null() && !it->is_number()) numeric[c] = false;
      width[c] = std::max(width[c], line.back().size());
    }
  }
  // Appends only: GCC 12 reports a false -Wrestrict on `"literal" + std::string(...)` at -O3.
  const auto cell = [&](std::string& out, const std::string& s, size_t c) {
    out += ' ';
    if (!numeric[c]) out += s;
    out.append(width[c] - s.size(), ' ');
    if (numeric[c]) out += s;
    out += " |";
  };
  std::string out = "|";
  for (size_t c = 0; c < columns.size(); ++c) cell(out, columns[c], c);
  out += "\n|";
  for (size_t c = 0; c < columns.size(); ++c) {
    out += ' ';
    out.append(numeric[c] ? width[c] - 1 : width[c], '-');
    out += numeric[c] ? ": |" : " |";
  }
  out += "\n";
  for (const auto& line : cells) {
    out += "|";
    for (size_t c = 0; c < columns.size(); ++c) cell(out, line[c], c);
    out += "\n";
  }
  return out;
}

}  // namespace

const std::vector<std::string>& output_format_names() {
  static const std::vector<std::string> names = {"table", "md", "csv", "json", "jsonl"};
  return names;
}

output_format parse_output_format(const std::string& name) {
  const auto& names = output_format_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    const std::string hint = did_you_mean(name, names);
    throw error(hint.empty() ? fmt::format("unknown format '{}' (formats: {})", name, fmt::join(names, ", "))
                             : fmt::format("unknown format '{}': {}", name, hint));
  }
  return static_cast<output_format>(it - names.begin());
}

std::vector<std::string> row_columns(const json& rows_in) {
  json holder;
  const json& rows = as_array(rows_in, holder);
  std::vector<std::string> columns;
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (auto it = r.begin(); it != r.end(); ++it)
      if (std::find(columns.begin(), columns.end(), it.key()) == columns.end()) columns.push_back(it.key());
  }
  return columns;
}

std::string format_tables(const std::vector<named_rows>& tables, output_format f) {
  ATTNUM_ASSERT(f == output_format::md || f == output_format::csv || f == output_format::jsonl,
                "format_tables: md, csv or jsonl");
  const bool named = tables.size() > 1;
  std::string out;
  for (size_t t = 0; t < tables.size(); ++t) {
    json holder;
    const json& rows = as_array(tables[t].rows, holder);
    if (f == output_format::jsonl) {
      for (json r : rows) {
        if (named) r["table"] = tables[t].name;
        out += r.dump() + "\n";
      }
      continue;
    }
    if (t) out += "\n";
    if (f == output_format::md) {
      if (named) {
        out += "**";
        out += tables[t].name;
        out += "**\n\n";
      }
      out += md_table(rows);
    } else {
      const auto columns = row_columns(rows);
      if (!columns.empty()) out += csv_table(columns, rows);
    }
  }
  return out;
}

}  // namespace attnum::io
