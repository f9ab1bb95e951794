#pragma once
// Comma-separated list options (--kernels fa3,sage2pp-sm89, --conditions plain,rotate): one
// splitter for every subcommand so they all accept the same spelling.
#include <sstream>
#include <string>
#include <vector>

namespace attnum::cli {

/// Splits "a,b,,c" into {"a", "b", "c"}: empty items (doubled or trailing commas) are dropped,
/// items are kept verbatim (no trimming).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace attnum::cli
