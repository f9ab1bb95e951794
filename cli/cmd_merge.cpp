// attnum merge DIR... --out DIR: combines the folders of a job array's shards (`--shard I/N` of
// attnum heads or attnum loss) into exactly the files a single run writes.
#include <fmt/core.h>

#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/pipeline/merge.h"
#include "cli/command.h"

namespace {
void setup(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  app.add_option("dirs", *dirs, "Shard folders (all of one study)")->required();
  app.add_option("--out", *out, "Folder to write the merged result files into")->required();
  app.callback([dirs, out] {
    std::vector<std::filesystem::path> in(dirs->begin(), dirs->end());
    const std::string what = attnum::pipeline::merge_folders(in, *out);
    fmt::print(stderr, "merge: {} from {} folders written to {}\n", what, in.size(), *out);
  });
}
}  // namespace
ATTNUM_COMMAND("merge", "Combine shard folders (--shard I/N) into the files of a single run", setup);
