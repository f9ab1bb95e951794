// attnum: the command-line tool. Dispatch only; every subcommand lives in cli/cmd_<name>.cpp.
#include <fmt/core.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "attnum/core/allocator.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/core/version.h"
#include "attnum/scaleout/world.h"
#include "cli/command.h"

namespace attnum::cli {

std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

bool register_command(command c) {
  registry().push_back(std::move(c));
  return true;
}

namespace {
// Finds or creates the subcommand for a space-separated path ("bench attention").
CLI::App* subcommand_for(CLI::App& root, const std::string& path, const std::string& help,
                         std::map<std::string, CLI::App*>& made) {
  std::istringstream words(path);
  std::string word, prefix;
  CLI::App* parent = &root;
  std::vector<std::string> parts;
  while (words >> word) parts.push_back(word);
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += (i ? " " : "") + parts[i];
    auto it = made.find(prefix);
    if (it == made.end()) {
      // A parent with no command of its own ("bench") gets a description naming its children.
      const std::string parent_help =
          parts[i] == "bench" ? "Benchmarks, each a ratio against a baseline run in the same process"
                              : "";
      CLI::App* sub = parent->add_subcommand(parts[i], i + 1 == parts.size() ? help : parent_help);
      if (i + 1 < parts.size()) sub->require_subcommand(1);
      it = made.emplace(prefix, sub).first;
    } else if (i + 1 == parts.size()) {
      it->second->description(help);
    }
    parent = it->second;
  }
  return parent;
}
}  // namespace
}  // namespace attnum::cli

namespace {
// Under MPI every rank parses the same command; only rank 0 writes to stdout (rows, JSON).
int finish(int code) {
  attnum::scaleout::finalize();
  return code;
}
int fatal(const char* what) {
  std::fflush(stdout);
  fmt::print(stderr, "error: {}\n", what);
  // One rank's failure must not leave the others waiting for it.
  if (attnum::scaleout::here().mpi && attnum::scaleout::here().size > 1)
    attnum::scaleout::abort_all(2);
  return finish(2);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace attnum;
  tune_allocator();
  scaleout::init(&argc, &argv);
  if (!scaleout::here().root()) (void)std::freopen("/dev/null", "w", stdout);
  CLI::App app{
      "attnum: how far low-precision attention kernels are from FP64 attention, head by head"};
  app.set_version_flag("--version", std::string("attnum ") + std::string(tool_version()));
  app.require_subcommand(1);
  int n_threads = 0;
  app.add_option("--threads", n_threads, "Threads for parallel loops (0 = all cores)")
      ->capture_default_str();
  // --quiet / --progress anywhere on the line (fallthrough: after the subcommand too).
  bool quiet = false, progress = false;
  app.add_flag("--quiet", quiet, "No progress lines or status messages on stderr");
  app.add_flag("--progress", progress, "Progress lines on stderr even when it is not a terminal");
  app.fallthrough();
  app.parse_complete_callback([&] {
    set_threads(n_threads);
    set_progress_mode(quiet ? progress_mode::never : progress ? progress_mode::always : progress_mode::automatic);
  });
  std::map<std::string, CLI::App*> made;
  // Parents before children so a parent's help text is kept.
  auto& reg = cli::registry();
  std::stable_sort(reg.begin(), reg.end(),
                   [](const cli::command& a, const cli::command& b) { return a.path < b.path; });
  for (const auto& c : reg) {
    CLI::App* sub = cli::subcommand_for(app, c.path, c.help, made);
    c.setup(*sub);
    if (sub->get_allow_extras()) sub->fallthrough(false);  // its extras are its values (cast)
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return finish(app.exit(e));
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return finish(2);
  } catch (const std::exception& e) {
    return fatal(e.what());
  }
  return finish(0);
}
