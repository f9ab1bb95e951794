#pragma once
// Reading the Markdown tables of a document under the source tree, for tests that check a list in
// docs/ against the code (knob_table_test: the knobs; engine_test: the presets).
#include <fstream>
#include <string>
#include <vector>

namespace attnum::attention::test {

/// A document's section: its text and the body rows of its tables (each row's cells, trimmed).
struct doc_section {
  bool found = false;
  std::string text;
  std::vector<std::vector<std::string>> rows;
};

/// Section `heading` (a whole line such as "## Knobs", up to the next "## " line) of `path`,
/// relative to the source tree.
inline doc_section read_doc_section(const std::string& path, const std::string& heading) {
  doc_section out;
  std::ifstream in(std::string(ATTNUM_SOURCE_DIR) + "/" + path);
  std::string line;
  bool inside = false, body = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == heading;
    if (!inside) continue;
    out.found = true;
    out.text += line + "\n";
    if (line.empty() || line[0] != '|') {
      body = false;
      continue;
    }
    if (line.rfind("|---", 0) == 0 || line.rfind("| ---", 0) == 0) {  // the separator: body rows follow
      body = true;
      continue;
    }
    if (!body) continue;  // a header row
    std::vector<std::string> cells;
    std::string cell;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] != '|') {
        cell += line[i];
        continue;
      }
      const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
      cell.clear();
    }
    out.rows.push_back(cells);
  }
  return out;
}

/// The `quoted` words of a cell, in order.
inline std::vector<std::string> backticked(const std::string& s) {
  std::vector<std::string> out;
  for (size_t a = s.find('`'); a != std::string::npos; a = s.find('`', a + 1)) {
    const size_t b = s.find('`', a + 1);
    if (b == std::string::npos) break;
    out.push_back(s.substr(a + 1, b - a - 1));
    a = b;
  }
  return out;
}

}  // namespace attnum::attention::test
