// The head study's driver: run (or resume) a plan's units, then assemble; merge shard folders.
#include "attnum/study/head_study.h"

#include <fmt/format.h>
#include <omp.h>

#include <atomic>
#include <string>

#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/core/same_config.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

bool run_study(const plan& p, const fs::path& dir, const run_controls& ctl) {
  return run_study(std::span<const plan>(&p, 1), std::span<const fs::path>(&dir, 1), ctl);
}

bool run_study(std::span<const plan> plans, std::span<const fs::path> dirs, const run_controls& ctl) {
  ATTNUM_ASSERT(!plans.empty() && plans.size() == dirs.size(), "run_study: {} plans for {} folders", plans.size(),
                dirs.size());
  if (ctl.shard_count < 1 || ctl.shard_index < 0 || ctl.shard_index >= ctl.shard_count)
    fail("--shard: expected I/N with 0 <= I < N, got {}/{}", ctl.shard_index, ctl.shard_count);
  require_predictor_variants(plans);
  for (size_t j = 0; j < plans.size(); ++j) write_plan(dirs[j], plans[j]);
  // A unit missing from any folder is computed (for all of them: the same bits).
  auto missing = [&](int i) {
    for (size_t j = 0; j < dirs.size(); ++j)
      if (!read_unit(dirs[j], plans[j], i)) return true;
    return false;
  };
  std::vector<int> todo;
  for (const auto& u : plans.front().units)
    if (u.index % ctl.shard_count == ctl.shard_index && missing(u.index)) todo.push_back(u.index);
  if (ctl.stop_after >= 0 && static_cast<int>(todo.size()) > ctl.stop_after) todo.resize(ctl.stop_after);
  std::atomic<int> done{0};
  const int n_todo = static_cast<int>(todo.size());
  attnum::progress bar("heads", n_todo, "units", ctl.progress, study::kUnitHelp);
  std::string first_error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(attnum::threads())
  for (int t = 0; t < n_todo; ++t) {
    try {
      const std::vector<std::vector<row>> rows = compute_unit(plans, todo[t]);
      for (size_t j = 0; j < dirs.size(); ++j) write_unit(dirs[j], plans[j], todo[t], rows[j]);
    } catch (const std::exception& e) {
#pragma omp critical(attnum_study_error)
      if (first_error.empty()) first_error = e.what();
    }
    bar.update(++done);
  }
  if (!first_error.empty()) fail("heads: {}", first_error);
  for (const auto& u : plans.front().units)
    if (missing(u.index)) return false;
  for (size_t j = 0; j < plans.size(); ++j) assemble(plans[j], dirs[j]);
  return true;
}

json merge(const std::vector<fs::path>& dirs, const fs::path& out) {
  if (dirs.empty()) fail("merge: no shard folders");
  const plan p = read_plan(dirs.front());
  for (const auto& d : dirs) {
    const plan q = read_plan(d);
    core::require_same_config(config_json(q), config_json(p), fmt::format("merge: {}", d.string()),
                              fmt::format("it holds another study than {}", dirs.front().string()));
  }
  write_plan(out, p);
  for (const auto& u : p.units) {
    if (read_unit(out, p, u.index)) continue;
    for (const auto& d : dirs)
      if (auto rows = read_unit(d, p, u.index)) {
        write_unit(out, p, u.index, *rows);
        break;
      }
  }
  return assemble(p, out);
}

}  // namespace attnum::study