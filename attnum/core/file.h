#pragma once
// Files every layer writes and reads: atomic writes (a killed run never leaves a half-written
// result) and whole-file reads with errors that name the file.
#include <filesystem>
#include <string>
#include <string_view>

namespace attnum {

/// Writes `bytes` to `path` atomically: a temp file in the same folder (created if needed),
/// flushed and fsynced, then renamed over `path`. Throws attnum::error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// Returns the whole content of a file. Throws attnum::error naming the path.
std::string read_file(const std::filesystem::path& path);

}  // namespace attnum
