#include "attnum/io/json_file.h"

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::io {

nlohmann::json read_json_file(const std::filesystem::path& path) { return read_json(path); }

std::string json_brief(const nlohmann::json& v) {
  if (v.is_array()) return fmt::format("an array of {} items", v.size());
  if (v.is_object()) return fmt::format("an object of {} fields", v.size());
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace attnum::io
