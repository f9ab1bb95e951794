#pragma once
// JSON files (config.json, tokenizer.json, shard and checkpoint files): read whole, parsed, and
// every failure names the file.
#include <filesystem>
#include <nlohmann/json.hpp>

namespace attnum::io {

/// Returns the parsed content of a JSON file. Throws attnum::error "PATH: cannot read: ..." or
/// "PATH: not valid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace attnum::io
