// attnum: the command-line tool. Dispatch only; every subcommand lives in cli/cmd_<name>.cpp.
#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <sstream>
#include <thread>

#include "attnum/attention/isa_paths.h"
#include "attnum/core/allocator.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/core/suggest.h"
#include "attnum/core/run_info.h"
#include "attnum/core/version.h"
#include "attnum/io/mapped_file.h"
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
          parts[i] == "bench" ? "Benchmarks, each a ratio against a baseline run in the same process" : "";
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

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) out.push_back(s->get_name());
  return out;
}

// The words of the command line that name subcommands are checked before parsing, so a
// mistyped one ("attnum atend") is named with the closest commands instead of CLI11's "A
// subcommand is required". Walks down while the current command has subcommands; at the top
// the only option with a value is --threads.
void check_subcommands(CLI::App& root, int argc, char** argv) {
  CLI::App* cur = &root;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return;
    if (!a.empty() && a[0] == '-') {
      if (cur == &root && a == "--threads") ++i;
      continue;
    }
    const auto names = subcommand_names(*cur);
    if (names.empty()) return;
    CLI::App* next = nullptr;
    for (CLI::App* s : cur->get_subcommands([](const CLI::App*) { return true; }))
      if (s->check_name(a)) next = s;
    if (!next) {
      const std::string where = cur == &root ? "attnum" : "attnum " + cur->get_name();
      const std::string hint = did_you_mean(a, names);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      fail("{}: unknown command '{}'{} (commands: {})", where, clip(a), hint.empty() ? "" : ": " + hint, list);
    }
    cur = next;
  }
}

// For a flag CLI11 did not expect, the closest flags of the command it was given to (and the
// global ones), or "" when the extras are not flags.
std::string unexpected_flags(CLI::App& root) {
  CLI::App* cur = &root;
  std::string path = "attnum";
  for (;;) {
    const auto parsed = cur->get_subcommands();
    if (parsed.empty()) break;
    cur = parsed.front();
    path += " " + cur->get_name();
  }
  std::vector<std::string> flags;
  for (CLI::App* a : {cur, &root})
    for (const CLI::Option* o : a->get_options())
      for (const auto& n : o->get_lnames()) flags.push_back("--" + n);
  std::string out;
  for (const auto& extra : root.remaining(true)) {
    if (extra.size() < 3 || extra.compare(0, 2, "--") != 0) continue;
    const std::string word = extra.substr(0, extra.find('='));
    const std::string hint = did_you_mean(word, flags);
    out += fmt::format("{}{}: unknown flag {}{}", out.empty() ? "" : "\n", path, clip(word),
                       hint.empty() ? "" : ": " + hint);
  }
  if (!out.empty()) out += fmt::format(" ({} --help lists its flags)", path);
  return out;
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
  if (attnum::scaleout::here().mpi && attnum::scaleout::here().size > 1) attnum::scaleout::abort_all(2);
  return finish(2);
}

// What an internal error prints besides the failed check (core/error.h): the command as typed
// and the settings a bug report needs.
std::string internal_error_context() {
  const nlohmann::json r = attnum::run_info(attnum::attention::isa::paths_json());
  const auto& p = r["isa_paths"];
  std::string env;
  for (const char* v : {"ATTNUM_ISA", "ATTNUM_NO_AMX", "ATTNUM_NO_PLANES", "OMP_NUM_THREADS", "OMP_DYNAMIC"})
    if (const char* x = std::getenv(v)) env += fmt::format(" {}={}", v, x);
  return fmt::format(
      "command: {}\nsettings: attnum {} (commit {}), threads {}, isa {} (fp8 sums {}, int8 sums {}, exp2f {}), "
      "cpu {}\nenvironment:{}\n",
      r["command_line"].get<std::string>(), r["tool_version"].get<std::string>(), r["git_commit"].get<std::string>(),
      r["threads"].get<int>(), p["isa"].get<std::string>(), p["fp8_exact_sums"].get<std::string>(),
      p["int8_qk_sums"].get<std::string>(), p["exp2f"].get<std::string>(), r["cpu_model"].get<std::string>(),
      env.empty() ? std::string(" (no ATTNUM_* or OMP_* settings)") : env);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace attnum;
  tune_allocator();
  io::report_mapped_file_faults();
  set_command_line(argc, argv);
  scaleout::init(&argc, &argv);
  if (!scaleout::here().root()) (void)std::freopen("/dev/null", "w", stdout);
  CLI::App app{"attnum: how far low-precision attention kernels are from FP64 attention, head by head"};
  app.set_version_flag("--version", std::string("attnum ") + std::string(tool_version()));
  // CLI11's own messages ("Could not convert: --threads = VALUE", "The following argument was
  // not expected: VALUE") quote the value whole: the message is cut to ~300 bytes (attnum's
  // own errors quote ~200 bytes of a value).
  // Set before the subcommands are added: each copies its parent's.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    const CLI::Error clipped(e.get_name(), clip(e.what(), 300), e.get_exit_code());
    return CLI::FailureMessage::simple(a, clipped);
  });
  app.require_subcommand(1);
  int n_threads = 0;
  app.add_option("--threads", n_threads, "Threads for parallel loops (0 = all cores)")->capture_default_str();
  // --quiet / --progress anywhere on the line (fallthrough: after the subcommand too).
  bool quiet = false, progress = false;
  app.add_flag("--quiet", quiet, "No progress lines or status messages on stderr");
  app.add_flag("--progress", progress, "Progress lines on stderr even when it is not a terminal");
  app.fallthrough();
  app.parse_complete_callback([&] {
    set_threads(n_threads);
    set_progress_mode(quiet ? progress_mode::never : progress ? progress_mode::always : progress_mode::automatic);
    set_internal_error_context(internal_error_context, [](int code) {
      if (scaleout::here().mpi && scaleout::here().size > 1) scaleout::abort_all(code);
    });
    // Test hook: ATTNUM_TEST_INTERNAL_ERROR=1 fails a check on a worker thread, to test the report.
    if (const char* t = std::getenv("ATTNUM_TEST_INTERNAL_ERROR"); t && std::string(t) == "1")
      std::thread([] { ATTNUM_ASSERT(false, "test hook ATTNUM_TEST_INTERNAL_ERROR ({} + {} != {})", 1, 1, 3); }).join();
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
    cli::check_subcommands(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return finish(app.exit(e));
  } catch (const CLI::ExtrasError& e) {
    const std::string flags = cli::unexpected_flags(app);
    if (flags.empty())
      app.exit(e);
    else
      return fatal(flags.c_str());
    return finish(2);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return finish(2);
  } catch (const std::bad_alloc&) {
    return fatal(
        "out of memory: an allocation failed (a ulimit or other processes leave less memory than the "
        "machine has; ATTNUM_MAX_ALLOC_GIB sets the limit attnum checks its sizes against up front)");
  } catch (const attnum::error& e) {
    return fatal(e.what());
  } catch (const std::exception& e) {
    // Not attnum's own (a std::filesystem error quotes its paths whole): cut like CLI11's.
    return fatal(clip(e.what(), 300).c_str());
  }
  return finish(0);
}
