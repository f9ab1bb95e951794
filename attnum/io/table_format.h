#pragma once
// The printed forms of a command's result rows (`-o table|md|csv|json|jsonl`, as llama-bench
// spells them). `table` is each command's own text table and `json` its JSON document, both
// printed by the command; this file writes the three row-wise forms from JSON rows, so every
// command prints them the same way:
//   csv    the result files' dialect (io/csv.h): a header, then one line per row;
//   md     a GitHub-flavoured Markdown table, numeric columns right-aligned;
//   jsonl  one compact JSON object per line.
// A command with more than one table (loss: conditions and paired comparisons) names each one: md
// prints the name in bold above its table, csv separates the tables by one empty line, and jsonl
// adds the name to each object as its "table" field.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnum::io {

enum class output_format { table, md, csv, json, jsonl };

/// The names the option takes, in order: "table", "md", "csv", "json", "jsonl".
const std::vector<std::string>& output_format_names();

/// Parses a format name; throws attnum::error (listing the names) for anything else.
output_format parse_output_format(const std::string& name);

/// One table of result rows: `rows` is a JSON array of objects (an object alone is one row). Keys
/// keep their order (a nlohmann::json's are sorted, an ordered_json's as inserted).
struct named_rows {
  std::string name;
  nlohmann::ordered_json rows;
};

/// Returns the columns of `rows`: every key, in the order of first appearance.
std::vector<std::string> row_columns(const nlohmann::ordered_json& rows);

/// Returns the tables in `f`, which must be md, csv or jsonl. Table names are written only when
/// there is more than one table.
std::string format_tables(const std::vector<named_rows>& tables, output_format f);

}  // namespace attnum::io
