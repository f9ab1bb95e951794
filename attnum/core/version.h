#pragma once
#include <string_view>

namespace attnum {
/// Returns the tool version ("major.minor.patch"), recorded in every result file.
std::string_view tool_version();
/// Returns the git commit the tool was built from (the checkout's HEAD when the build was
/// configured), or "unknown" when built outside a git checkout.
std::string_view git_commit();
}  // namespace attnum
