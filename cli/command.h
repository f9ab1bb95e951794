#pragma once
// Subcommand registry: each cli/cmd_<name>.cpp registers itself with ATTNUM_COMMAND, so adding a
// subcommand never edits main.cpp. A path with spaces ("bench attention") nests under a parent.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace attnum::cli {

/// Adds options and a callback to the subcommand `app`.
using setup_fn = std::function<void(CLI::App& app)>;

struct command {
  std::string path;  // "cast", "pcast theory", "bench attention"
  std::string help;
  setup_fn setup;
};

/// Returns the registry of subcommands (filled by static registration).
std::vector<command>& registry();

/// Registers a subcommand; returns true (for static initialisation).
bool register_command(command c);

}  // namespace attnum::cli

#define ATTNUM_CLI_CONCAT2(a, b) a##b
#define ATTNUM_CLI_CONCAT(a, b) ATTNUM_CLI_CONCAT2(a, b)
/// Registers a subcommand at static-initialisation time.
#define ATTNUM_COMMAND(path, help, setup)                                 \
  static const bool ATTNUM_CLI_CONCAT(attnum_cmd_registered_, __LINE__) = \
      ::attnum::cli::register_command({path, help, setup})
