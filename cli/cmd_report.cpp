// attnum report: one self-contained HTML page from result folders (heads, pcast, loss, study).
#include <fmt/core.h>

#include <filesystem>
#include <optional>

#include "attnum/core/file.h"
#include "attnum/core/error.h"
#include "attnum/report/page.h"
#include "attnum/report/results.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  struct opts {
    std::vector<std::string> results;
    std::string out = "report.html", assets;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--results", o->results, "Result folders (attnum heads/transfer/pcast/loss/study --out DIR)")
      ->required()
      ->expected(1, -1);
  app.add_option("--out", o->out, "Output HTML file (not inside a --results folder)")->capture_default_str();
  app.add_option("--assets", o->assets,
                 "node_modules folder with vega, vega-lite, vega-embed (default: the tool's own "
                 "install or source tree, never the working directory)");
  app.callback([o] {
    std::vector<std::filesystem::path> dirs(o->results.begin(), o->results.end());
    namespace fs = std::filesystem;
    // The page never replaces or lands inside a folder it reads.
    const fs::path out = fs::weakly_canonical(fs::absolute(o->out));
    for (const auto& d : dirs) {
      if (!fs::is_directory(d)) continue;
      const fs::path in = fs::weakly_canonical(fs::absolute(d));
      const auto rel = out.lexically_relative(in);
      if (!rel.empty() && *rel.begin() != "..")
        attnum::fail(
            "report: --out {} is inside the result folder {} it reads; write the page "
            "elsewhere",
            o->out, d.string());
    }
    // A folder a killed run left (no completion marker) is refused (docs/reliability.md), in a
    // study folder each result subfolder too.
    for (const auto& d : dirs) {
      if (!fs::is_directory(d)) continue;
      attnum::require_complete(d, "report");
      for (const auto& sub : attnum::report::study_subfolders(d)) attnum::require_complete(sub, "report");
    }
    attnum::output_guard guard(o->out);
    std::optional<std::filesystem::path> assets;
    if (!o->assets.empty()) assets = o->assets;
    attnum::report::write_report(dirs, o->out, assets);
    guard.commit();
    fmt::print("wrote {}\n", o->out);
  });
}
}  // namespace
ATTNUM_COMMAND("report", "Write one self-contained HTML report from result folders", setup);
