#include "attnum/pipeline/distributed.h"

#include <fmt/core.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/io/json_file.h"
#include "attnum/loss/reference_logits.h"
#include "attnum/scaleout/world.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnum::pipeline {
namespace {

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + " ";
  return s;
}

std::vector<int> split_ints(const std::string& s) {
  std::vector<int> v;
  std::istringstream in(s);
  int x;
  while (in >> x) v.push_back(x);
  return v;
}

}  // namespace

bool run_heads(const study::plan& p, const fs::path& dir, int shard_index, int shard_count, bool progress) {
  return run_heads(std::span<const study::plan>(&p, 1), std::span<const fs::path>(&dir, 1), shard_index, shard_count,
                   progress);
}

bool run_heads(std::span<const study::plan> plans, std::span<const fs::path> dirs, int shard_index, int shard_count,
               bool progress) {
  const auto& world = scaleout::here();
  if (!world.mpi || world.size == 1) {
    study::run_controls ctl;
    ctl.shard_index = shard_index, ctl.shard_count = shard_count, ctl.progress = progress;
    return study::run_study(plans, dirs, ctl);
  }
  if (shard_count != 1) fail("--shard and mpirun do not combine: use one or the other");
  // Rank 0 owns the folders: it checks the plans against an earlier run and lists missing units.
  std::string todo_text;
  if (world.root()) {
    study::require_predictor_variants(plans);
    for (size_t j = 0; j < plans.size(); ++j) study::write_plan(dirs[j], plans[j]);
    std::vector<int> todo;
    for (const auto& u : plans.front().units)
      for (size_t j = 0; j < dirs.size(); ++j)
        if (!study::read_unit(dirs[j], plans[j], u.index)) {
          todo.push_back(u.index);
          break;
        }
    todo_text = join_ints(todo);
  }
  const std::vector<int> todo = split_ints(scaleout::broadcast(todo_text));
  attnum::progress bar("heads", static_cast<int64_t>(todo.size()), "units", progress && world.root(), study::kUnitHelp);
  scaleout::distribute(
      todo,
      [&](int i) -> std::string {
        const auto rows = study::compute_unit(plans, i);
        if (world.root()) {
          for (size_t j = 0; j < dirs.size(); ++j) study::write_unit(dirs[j], plans[j], i, rows[j]);
          return {};
        }
        json files = json::array();  // each plan's unit file, written by rank 0
        for (size_t j = 0; j < rows.size(); ++j) files.push_back(study::unit_text(plans[j], i, rows[j]));
        return files.dump();
      },
      [&](int i, const std::string& bytes) {
        if (bytes.empty()) return;  // rank 0 wrote its own unit already
        const json files = json::parse(bytes);
        for (size_t j = 0; j < dirs.size(); ++j) {
          const fs::path f = study::unit_path(dirs[j], i);
          fs::create_directories(f.parent_path());
          write_file_atomic(f, files.at(j).get<std::string>());
        }
      },
      attnum::threads(), [&bar](int d, int) { bar.update(d); });
  if (!world.root()) return false;
  for (size_t j = 0; j < plans.size(); ++j) study::assemble(plans[j], dirs[j]);
  return true;
}

fs::path loss_window_path(const fs::path& dir, int source, int window) {
  return dir / "checkpoints" / fmt::format("window-{:03d}-{:05d}.json", source, window);
}

namespace {

json params_json(const loss::loss_params& p, const std::string& model_id) {
  json j = {{"model", model_id},
            {"kernel", p.kernel.name},
            {"knobs", p.knobs},
            {"kernel_spec", attention::to_json(p.kernel)},
            {"rotation", p.rotation.name()},
            {"conditions", p.conditions},
            {"n_tokens", p.n_tokens},
            {"windows", p.windows},
            {"reference", p.reference},
            {"linear_precision", std::string(model::name(p.linear))},
            {"bootstrap_samples", p.bootstrap_samples},
            {"bootstrap_seed", p.bootstrap_seed},
            {"source_names", p.source_names},
            {"n_sources", p.sources.size()}};
  // A run resumed with other reference logits (or none) is another study.
  if (p.reference_file) j["reference_logits"] = p.reference_file->id();
  return j;
}

// Checks (or writes) dir/checkpoints/loss-params.json so that a resumed run is the same study.
void check_params(const fs::path& dir, const json& want) {
  const fs::path f = dir / "checkpoints" / "loss-params.json";
  if (fs::exists(f)) {
    const json have = io::read_json_file(f);
    if (!have.is_object()) fail("{}: expected a JSON object (the loss parameters)", f.string());
    auto q = [](const json& v) { return clip(v.dump(-1, ' ', false, json::error_handler_t::replace)); };
    for (auto it = want.begin(); it != want.end(); ++it)
      if (!have.contains(it.key()) || have[it.key()] != it.value())
        fail("'{}': field '{}' is {} in the earlier run, {} now: use another --out folder", f.string(), clip(it.key()),
             q(have.value(it.key(), json())), q(it.value()));
    for (auto it = have.begin(); it != have.end(); ++it)
      if (!want.contains(it.key()))
        fail("'{}': field '{}' is {} in the earlier run, absent now: use another --out folder", f.string(),
             clip(it.key()), q(it.value()));
    return;
  }
  fs::create_directories(f.parent_path());
  write_file_atomic(f, want.dump(2) + "\n");
}

// A window's checkpoint: one verified unit result per condition, of this window and study.
std::vector<loss::unit_result> read_window(const fs::path& f, const loss::loss_params& p, int source, int window) {
  const json arr = io::read_json_file(f);
  if (!arr.is_array() || arr.size() != p.conditions.size())
    fail("{}: expected an array of {} unit results (one per condition)", f.string(), p.conditions.size());
  std::vector<loss::unit_result> out;
  for (size_t c = 0; c < arr.size(); ++c) {
    try {
      out.push_back(loss::unit_result_from_json(arr[c]));
    } catch (const error& e) {
      fail("{}: {}", f.string(), e.what());
    }
    const auto& r = out.back();
    if (r.unit.source != source || r.unit.window != window || r.unit.condition != static_cast<int>(c) ||
        r.nll_ref.size() != static_cast<size_t>(p.n_tokens))
      fail(
          "{}: holds source {} window {} condition {} with {} labels, expected source {} window {} "
          "condition {} with {}: remove it to recompute",
          f.string(), r.unit.source, r.unit.window, r.unit.condition, r.nll_ref.size(), source, window, c, p.n_tokens);
  }
  return out;
}

}  // namespace

std::vector<loss::loss_row> run_loss(const model::weights& w, const loss::loss_params& p, const std::string& model_id,
                                     const fs::path& dir, int shard_index, int shard_count, bool progress,
                                     std::vector<loss::paired_row>* paired, bool pipeline_layers) {
  const auto& world = scaleout::here();
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count)
    fail("--shard {}/{}: expected 0 <= I < N", shard_index, shard_count);
  if (world.mpi && world.size > 1 && shard_count != 1) fail("--shard and mpirun do not combine: use one or the other");
  const int n_windows = static_cast<int>(p.sources.size()) * p.windows;
  const bool keep = !dir.empty();
  std::string todo_text;
  if (world.root()) {
    std::vector<int> todo;
    if (keep) check_params(dir, params_json(p, model_id));
    for (int k = 0; k < n_windows; ++k)
      if (k % shard_count == shard_index && !(keep && fs::exists(loss_window_path(dir, k / p.windows, k % p.windows))))
        todo.push_back(k);
    todo_text = join_ints(todo);
  }
  const std::vector<int> todo = split_ints(scaleout::broadcast(todo_text));
  std::map<int, std::vector<loss::unit_result>> got;  // rank 0 without a folder keeps them here
  attnum::progress bar("loss", static_cast<int64_t>(todo.size()), "windows", progress && world.root(),
                       "one window of --tokens labels of one text, run under every condition");
  auto compute = [&](int k) -> std::string {
    std::vector<loss::loss_unit> units;
    for (int c = 0; c < static_cast<int>(p.conditions.size()); ++c) units.push_back({k / p.windows, k % p.windows, c});
    json arr = json::array();
    for (const auto& r : loss::compute_window(w, p, units)) arr.push_back(loss::to_json(r));
    return arr.dump();
  };
  auto store = [&](int k, const std::string& bytes) {
    if (keep) {
      const fs::path f = loss_window_path(dir, k / p.windows, k % p.windows);
      fs::create_directories(f.parent_path());
      write_file_atomic(f, bytes);
    } else {
      std::vector<loss::unit_result> rs;
      for (const auto& j : json::parse(bytes)) rs.push_back(loss::unit_result_from_json(j));
      got[k] = std::move(rs);
    }
  };
  if (pipeline_layers) {  // every rank runs every window's forward passes together; rank 0 stores
    for (size_t i = 0; i < todo.size(); ++i) {
      const std::string bytes = compute(todo[i]);
      if (world.root()) store(todo[i], bytes), bar.update(static_cast<int64_t>(i + 1));
    }
  } else {
    // Windows run one at a time per rank: a window's forward passes are parallel inside.
    scaleout::distribute(todo, compute, store, 1, [&bar](int d, int) { bar.update(d); });
  }
  if (!world.root() || shard_count != 1) return {};
  std::vector<loss::unit_result> all;
  for (int k = 0; k < n_windows; ++k) {
    std::vector<loss::unit_result> rs =
        keep ? read_window(loss_window_path(dir, k / p.windows, k % p.windows), p, k / p.windows, k % p.windows)
             : got.at(k);
    all.insert(all.end(), rs.begin(), rs.end());
  }
  // Paired comparisons between conditions (DIR/loss_paired.json) where there is a folder.
  if (keep || paired) {
    std::vector<loss::paired_row> pr = loss::summarize_paired(p, model_id, all);
    if (keep) loss::write_paired_files(dir.string(), pr);
    if (paired) *paired = std::move(pr);
  }
  return loss::summarize(p, model_id, std::move(all));
}

}  // namespace attnum::pipeline
