#pragma once
#include <string_view>

namespace attnum {
/// Returns the tool version ("major.minor.patch"), recorded in every result file.
std::string_view tool_version();
}  // namespace attnum
