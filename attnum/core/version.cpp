#include "attnum/core/version.h"



namespace attnum {
std::string_view tool_version() { return ATTNUM_VERSION_STRING; }
std::string_view git_commit() { return ATTNUM_GIT_COMMIT; }
}  // namespace attnum
