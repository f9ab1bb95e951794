#pragma once
// Provenance of a run, recorded in every result folder's meta.json and printed with an internal
// error: when it ran, the command line, the tool version and git commit, the vector paths the
// engine takes (`attnum version --json`), the CPU and the thread count.
#include <nlohmann/json.hpp>

#include <string>

namespace attnum {

/// Records the process's command line (the tool calls this first thing; library use leaves it
/// empty).
void set_command_line(int argc, const char* const* argv);
/// The recorded command line, each argument shell-quoted where it needs to be, joined by spaces.
const std::string& command_line();
/// The CPU's model name (/proc/cpuinfo), or "unknown".
std::string cpu_model();
/// The current UTC time as ISO 8601 with seconds ("2026-12-02T19:03:14Z").
std::string utc_now();
/// {utc_time, command_line, tool_version, git_commit, isa_paths, cpu_model, threads}: the block
/// meta.json records as "run"; isa_paths is attention::isa::paths_json() (the caller's: core/
/// sits above attention/).
nlohmann::json run_info(const nlohmann::json& isa_paths);

}  // namespace attnum
