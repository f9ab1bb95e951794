// attnum merge: combines head-study shard folders (attnum heads --shard I/N --out DIR_I) into the
// files a single run writes.
#include <fmt/core.h>

#include <memory>

#include "attnum/study/head_study.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app.add_option("dirs", *dirs, "Shard folders")->required();
  app.add_option("--out", *out, "Merged result folder")->required();
  app.add_flag("--json", *json, "Print the summary as a JSON array");
  app.callback([dirs, out, json] {
    std::vector<std::filesystem::path> d(dirs->begin(), dirs->end());
    const nlohmann::json summary = attnum::study::merge(d, *out);
    if (*json)
      fmt::print("{}\n", summary.dump());
    else
      fmt::print("merged {} folders into {}: {} summary rows\n", d.size(), *out, summary.size());
  });
}
}  // namespace
ATTNUM_COMMAND("merge", "Merge head-study shard folders into the files of a single run", setup);
