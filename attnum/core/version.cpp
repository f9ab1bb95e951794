#include "attnum/core/version.h"

#include "attnum/core/git_commit.h"  // generated at build time (cmake/git_commit.cmake)

namespace attnum {
std::string_view tool_version() { return ATTNUM_VERSION_STRING; }
std::string_view git_commit() { return ATTNUM_GIT_COMMIT; }
}  // namespace attnum
