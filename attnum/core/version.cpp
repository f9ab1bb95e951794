#include "attnum/core/version.h"



namespace attnum {
std::string_view tool_version() { return ATTNUM_VERSION_STRING; }
}  // namespace attnum
