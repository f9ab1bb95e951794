// attnum report: one self-contained HTML page from result folders (heads, pcast, loss, study).
#include <fmt/core.h>

#include <filesystem>
#include <optional>

#include "attnum/core/file.h"
#include "attnum/report/page.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  struct opts {
    std::vector<std::string> results;
    std::string out = "report.html", assets;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--results", o->results,
                 "Result folders (attnum heads/transfer/pcast/loss/study --out DIR)")
      ->required()
      ->expected(1, -1);
  app.add_option("--out", o->out, "Output HTML file")->capture_default_str();
  app.add_option("--assets", o->assets,
                 "node_modules folder with vega, vega-lite, vega-embed (default: found beside "
                 "the tool or the working directory)");
  app.callback([o] {
    std::vector<std::filesystem::path> dirs(o->results.begin(), o->results.end());
    // A folder a killed run left (no completion marker) is refused (docs/reliability.md).
    for (const auto& d : dirs)
      if (std::filesystem::is_directory(d)) attnum::require_complete(d, "report");
    attnum::require_out_outside_inputs(o->out, dirs);
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
