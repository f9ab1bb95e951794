#pragma once
// The output flags shared by every command that prints a table: -o/--output FORMAT (table, md,
// csv, json, jsonl; io/table_format.h) and --json, kept as the spelling of `-o json`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/io/table_format.h"

namespace attnum::cli {

struct output_flags {
  std::string name = "table";
  bool json = false;
  /// The format asked for (--json is -o json).
  io::output_format format() const { return json ? io::output_format::json : io::parse_output_format(name); }
};

/// Adds -o/--output and --json (described by `json_help`) to `app`. An unknown format, or --json
/// with -o, is refused while the command line is parsed, before any work.
inline void add_output_options(CLI::App& app, output_flags& f, const std::string& json_help) {
  auto* o = app.add_option("-o,--output", f.name,
                           "Printed form: table (the text table), md, csv (the result files' dialect), "
                           "json (as --json) or jsonl (one object per line)")
                ->capture_default_str()
                ->check([](const std::string& s) {
                  try {
                    io::parse_output_format(s);
                    return std::string();
                  } catch (const std::exception& e) {
                    return std::string(e.what());
                  }
                });
  app.add_flag("--json", f.json, json_help + " (the same as -o json)")->excludes(o);
}

/// Prints `tables` when the format is md, csv or jsonl and `json_doc` when it is json; returns
/// false (printing nothing) for table, which the command prints itself.
inline bool print_output(const output_flags& f, const nlohmann::ordered_json& json_doc,
                         const std::vector<io::named_rows>& tables, int json_indent = -1) {
  const io::output_format format = f.format();
  if (format == io::output_format::table) return false;
  if (format == io::output_format::json)
    fmt::print("{}\n", json_doc.dump(json_indent));
  else
    fmt::print("{}", io::format_tables(tables, format));
  return true;
}

/// The same for a command whose JSON document is its one table of rows.
inline bool print_output(const output_flags& f, const nlohmann::ordered_json& rows, int json_indent = -1) {
  return print_output(f, rows, {{"", rows}}, json_indent);
}

}  // namespace attnum::cli
