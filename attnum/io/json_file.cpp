#include "attnum/io/json_file.h"

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::io {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

}  // namespace attnum::io
