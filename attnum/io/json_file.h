#pragma once
// JSON files (config.json, tokenizer.json, shard and checkpoint files): read whole, parsed, and
// every failure names the file.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace attnum::io {

/// Returns the parsed content of a JSON file: attnum::read_json (regular files only, never
/// blocking; at most kMaxJsonBytes and kMaxJsonDepth levels). Throws attnum::error "PATH:
/// cannot read: ..." or "PATH: not valid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path);

/// Returns a short description of a JSON value for error messages: scalars as JSON text (at most
/// 80 characters), arrays and objects by kind and size, never their (possibly deeply nested or
/// huge) content.
std::string json_brief(const nlohmann::json& v);

}  // namespace attnum::io
