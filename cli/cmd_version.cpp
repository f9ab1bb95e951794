// attnum version: prints the tool version (same as --version), machine-readable with --json.
#include <fmt/core.h>

#include "attnum/core/version.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  app.callback([json] {
    if (*json)
      fmt::print("{{\"version\":\"{}\"}}\n", attnum::tool_version());
    else
      fmt::print("attnum {}\n", attnum::tool_version());
  });
}
}  // namespace
ATTNUM_COMMAND("version", "Print the tool version", setup);
