#pragma once
// Readers of the result folders written by `attnum heads|transfer|pcast|loss|study --out DIR`
// (docs/results.md is the contract). Any subset of files is accepted; what is absent is listed.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attnum::report {

/// A table read from CSV or JSON: ordered column names and rows as JSON objects with typed
/// values (numbers, booleans, strings; empty/NaN cells as null).
struct table {
  std::vector<std::string> columns;
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> sources;  ///< files the rows came from
  size_t size() const { return rows.size(); }
};

/// Returns the cells of a CSV file (RFC 4180 quoting); row 0 is the header.
/// Throws attnum::error naming the file and line on unbalanced quotes or ragged rows.
std::vector<std::vector<std::string>> read_csv_cells(const std::filesystem::path& file);

/// Returns a CSV file as a table: numbers parsed, true/false as booleans, ""/nan/null as null.
table read_csv_table(const std::filesystem::path& file);

/// Returns a JSON array-of-objects file (or JSON lines) as a table.
table read_json_table(const std::filesystem::path& file);

/// Everything the report can show, merged over one or more result folders.
struct result_set {
  std::vector<std::string> dirs;
  std::optional<table> heads, rows, summary, pcast_theory, pcast_dp, pcast_simulate, pcast_overflow, loss, loss_paired;
  nlohmann::json meta = nlohmann::json::array();  ///< {dir, meta.json contents}
  std::vector<std::string> absent;                ///< plain sentences naming files not found
};

/// The result subfolders (heads/, transfer/, pcast/, loss/) of a study folder; empty for a
/// folder of one command.
std::vector<std::filesystem::path> study_subfolders(const std::filesystem::path& dir);

/// Reads result folders (heads/transfer, pcast, loss, or a study folder with heads/, pcast/,
/// loss/ inside). A folder with a completion marker is read only for the files it lists.
/// Throws attnum::error if a folder is missing, holds no result file, or a file
/// lacks a required column or has a non-numeric value where a number is required.
result_set read_results(const std::vector<std::filesystem::path>& dirs);

/// Returns the rows of a table as CSV text (header = columns; null as empty; RFC 4180 quoting).
std::string to_csv(const table& t);

}  // namespace attnum::report
