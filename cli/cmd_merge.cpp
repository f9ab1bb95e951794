// attnum merge: combines shard folders (attnum heads --shard I/N --out DIR_I, and loss shards
// loss-shard-I-of-N.json) into the files a single run writes.
#include <fmt/core.h>

#include <memory>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/loss/loss_study.h"
#include "attnum/study/head_study.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
void setup(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto output = std::make_shared<attnum::cli::output_flags>();
  app.add_option("dirs", *dirs, "Shard folders")->required();
  app.add_option("--out", *out, "Merged result folder")->required();
  attnum::cli::add_output_options(app, *output, "Print the summary as a JSON array");
  app.callback([dirs, out, output] {
    const bool table = output->format() == attnum::io::output_format::table;
    namespace fs = std::filesystem;
    std::vector<fs::path> d(dirs->begin(), dirs->end());
    attnum::require_out_outside_inputs(*out, d);
    bool heads = false, loss = false;
    for (const auto& x : d) {
      if (!fs::is_directory(x)) attnum::fail("merge: {} is not a folder", x.string());
      heads |= fs::exists(x / "checkpoints" / "study.json");
      for (const auto& e : fs::directory_iterator(x)) loss |= e.path().filename().string().rfind("loss-shard-", 0) == 0;
    }
    if (!heads && !loss)
      attnum::fail(
          "merge: no head-study checkpoints (checkpoints/study.json) or loss shards "
          "(loss-shard-I-of-N.json) in {}",
          fmt::join(*dirs, ", "));
    // Only finished shards merge (a killed shard has no completion marker); a failed merge
    // leaves --out as it found it (docs/reliability.md).
    for (const auto& x : d) attnum::require_complete(x, "merge");
    attnum::output_guard guard(*out);
    attnum::begin_output_dir(*out);
    nlohmann::json printed = nlohmann::json::array();
    if (heads) {
      const nlohmann::json summary = attnum::study::merge(d, *out);
      for (const auto& s : summary) printed.push_back(s);
    }
    if (loss) {
      const auto rows = attnum::loss::merge_shard_dirs(*dirs, *out);
      if (table) fmt::print("loss: {} rows merged\n", rows.size());
    }
    attnum::write_complete_marker(*out, fmt::format("attnum merge {}", fmt::join(*dirs, " ")));
    guard.commit();
    if (!attnum::cli::print_output(*output, printed) && heads)
      fmt::print("heads: merged {} folders into {}: {} summary rows\n", d.size(), *out, printed.size());
  });
}
}  // namespace
ATTNUM_COMMAND("merge", "Merge head-study shard folders into the files of a single run", setup);
