#include "attnum/core/version.h"

#include "attnum/core/version_generated.h"

namespace attnum {
std::string_view tool_version() { return ATTNUM_VERSION_STRING; }
}  // namespace attnum
