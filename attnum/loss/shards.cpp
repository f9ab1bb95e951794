// The loss study's shard files and their merge (loss/shards.h).
#include "attnum/loss/shards.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/same_config.h"
#include "attnum/core/version.h"
#include "attnum/formats/format.h"
#include "attnum/io/json_file.h"
#include "attnum/loss/reference_logits.h"
#include "attnum/loss/summary.h"

namespace attnum::loss {

nlohmann::json to_json(const unit_result& r) {
  return {{"source", r.unit.source},
          {"window", r.unit.window},
          {"condition", r.unit.condition},
          {"nll_ref", r.nll_ref},
          {"nll_var", r.nll_var},
          {"kl", r.kl},
          {"dp", r.dp},
          {"top1_same", r.top1_same}};
}

unit_result unit_result_from_json(const nlohmann::json& j) {
  try {
    unit_result r;
    io::json_get(j.at("source"), r.unit.source, "loss unit result: source");
    io::json_get(j.at("window"), r.unit.window, "loss unit result: window");
    io::json_get(j.at("condition"), r.unit.condition, "loss unit result: condition");
    j.at("nll_ref").get_to(r.nll_ref);
    j.at("nll_var").get_to(r.nll_var);
    j.at("kl").get_to(r.kl);
    j.at("dp").get_to(r.dp);
    io::json_get(j.at("top1_same"), r.top1_same, "loss unit result: top1_same");
    const size_t n = r.nll_ref.size();
    const std::string unit = fmt::format("loss unit result (source {}, window {}, condition {})", r.unit.source,
                                         r.unit.window, r.unit.condition);
    if (r.unit.source < 0 || r.unit.window < 0 || r.unit.condition < 0) fail("{}: negative index", unit);
    if (n == 0) fail("{}: no labels", unit);
    for (const auto& [name, len] : {std::pair{"nll_var", r.nll_var.size()}, std::pair{"kl", r.kl.size()},
                                    std::pair{"dp", r.dp.size()}, std::pair{"top1_same", r.top1_same.size()}})
      if (len != n) fail("{}: {} holds {} values, nll_ref {}", unit, name, len, n);
    for (size_t i = 0; i < n; ++i) {
      // -log p >= 0, KL >= 0 (up to rounding), p_var - p_ref in [-1, 1], agreement 0 or 1.
      if (!std::isfinite(r.nll_ref[i]) || r.nll_ref[i] < 0 || !std::isfinite(r.nll_var[i]) || r.nll_var[i] < 0)
        fail("{}: label {}: nll_ref {} / nll_var {}: expected finite values >= 0", unit, i, r.nll_ref[i], r.nll_var[i]);
      if (!std::isfinite(r.kl[i]) || r.kl[i] < -1e-6)
        fail("{}: label {}: kl {}: expected a finite value >= 0", unit, i, r.kl[i]);
      if (!(r.dp[i] >= -1 && r.dp[i] <= 1))
        fail("{}: label {}: dp {}: expected a difference of probabilities in [-1, 1]", unit, i, r.dp[i]);
      if (r.top1_same[i] > 1) fail("{}: label {}: top1_same {}: expected 0 or 1", unit, i, int(r.top1_same[i]));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("loss unit result: {}", clip(e.what()));
  }
}

nlohmann::json shard_to_json(const loss_params& p, const std::string& model_id, int shard, int n_shards,
                             const std::vector<unit_result>& results) {
  nlohmann::json units = nlohmann::json::array();
  for (const unit_result& r : results) units.push_back(to_json(r));
  nlohmann::json j = {{"kind", "attnum-loss-shard"},
                      {"tool_version", std::string(tool_version())},
                      {"params",
                       {{"model", model_id},
                        {"kernel", p.kernel.name},
                        {"knobs", p.knobs},
                        {"transform_dtype", formats::info(p.kernel.transform_dtype).name},
                        {"rotation", p.rotation.name()},
                        {"conditions", p.conditions},
                        {"reference", p.reference},
                        {"linear_precision", std::string(name(p.linear))},
                        {"n_tokens", p.n_tokens},
                        {"windows", p.windows},
                        {"sources", p.source_names},
                        {"n_sources", p.sources.size()},
                        {"bootstrap_samples", p.bootstrap_samples},
                        {"bootstrap_seed", p.bootstrap_seed}}},
                      {"shard", shard},
                      {"n_shards", n_shards},
                      {"units", units}};
  // Shards that read reference logits merge only with shards that read the same file.
  if (p.reference_file) j["params"]["reference_logits"] = p.reference_file->id();
  return j;
}

namespace {
// The parameters and every unit result of a set of shard files (checked to agree).
struct merged_shards {
  loss_params p;
  std::string model;
  std::vector<unit_result> all;
  std::string rotation;  ///< as recorded (a rotation file need not be here)
};
merged_shards read_shards(const std::vector<nlohmann::json>& shards) {
  if (shards.empty()) fail("loss merge: no shard files");
  nlohmann::json params;
  std::vector<unit_result> all;
  for (size_t i = 0; i < shards.size(); ++i) {
    const nlohmann::json& s = shards[i];
    if (!s.is_object() || !s.contains("kind") || s["kind"] != "attnum-loss-shard" || !s.contains("params") ||
        !s.contains("units"))
      fail("loss merge: shard {} is not an attnum loss shard file", i);
    if (s.value("tool_version", nlohmann::json()) != std::string(tool_version()))
      fail(
          "loss merge: shard {} was written by attnum {}, this is {}: rerun the shard with this "
          "version",
          i, clip(s.value("tool_version", nlohmann::json()).dump(), 40), tool_version());
    if (!s["params"].is_object() || !s["units"].is_array())
      fail("loss merge: shard {}: params must be an object and units an array", i);
    if (i == 0)
      params = s["params"];
    else
      core::require_same_config(params, s["params"], fmt::format("loss merge: shard {}", i),
                                "it was run with different parameters than shard 0");
    for (const auto& u : s["units"]) all.push_back(unit_result_from_json(u));
  }
  loss_params p;
  std::string model, rotation;
  try {
    model = params.at("model").get<std::string>();
    rotation = params.value("rotation", std::string());  // as recorded (a rotation file need not be here)
    p.knobs = params.at("knobs").get<std::vector<std::string>>();
    p.kernel = attention::resolve_kernel(params.at("kernel").get<std::string>(), p.knobs);
    p.conditions = params.at("conditions").get<std::vector<std::string>>();
    p.reference = params.at("reference").get<std::string>();
    p.linear = model::parse_linear_precision(params.at("linear_precision").get<std::string>());
    io::json_get(params.at("n_tokens"), p.n_tokens, "params.n_tokens");
    io::json_get(params.at("windows"), p.windows, "params.windows");
    p.source_names = params.at("sources").get<std::vector<std::string>>();
    size_t n_sources = 0;
    io::json_get(params.at("n_sources"), n_sources, "params.n_sources");
    if (n_sources != p.source_names.size())
      fail("loss merge: shard parameters: n_sources {} but {} source names", n_sources, p.source_names.size());
    p.sources.resize(n_sources);
    io::json_get(params.at("bootstrap_samples"), p.bootstrap_samples, "params.bootstrap_samples");
    io::json_get(params.at("bootstrap_seed"), p.bootstrap_seed, "params.bootstrap_seed");
  } catch (const nlohmann::json::exception& e) {
    fail("loss merge: shard parameters: {}", clip(e.what()));
  }
  if (p.n_tokens < 1 || p.windows < 1 || p.conditions.empty() || p.sources.empty() ||
      p.source_names.size() != p.sources.size())
    fail(
        "loss merge: shard parameters: n_tokens {}, windows {}, {} conditions, {} sources ({} named): "
        "expected positive counts and one name per source",
        p.n_tokens, p.windows, p.conditions.size(), p.sources.size(), p.source_names.size());
  for (const unit_result& r : all)
    if (r.nll_ref.size() != static_cast<size_t>(p.n_tokens) || r.unit.source >= static_cast<int>(p.sources.size()) ||
        r.unit.window >= p.windows || r.unit.condition >= static_cast<int>(p.conditions.size()))
      fail(
          "loss merge: unit (source {}, window {}, condition {}) with {} labels does not fit the "
          "parameters ({} sources, {} windows, {} conditions, n_tokens {})",
          r.unit.source, r.unit.window, r.unit.condition, r.nll_ref.size(), p.sources.size(), p.windows,
          p.conditions.size(), p.n_tokens);
  return {std::move(p), std::move(model), std::move(all), std::move(rotation)};
}
}  // namespace

std::vector<loss_row> merge_shards(const std::vector<nlohmann::json>& shards) {
  merged_shards m = read_shards(shards);
  auto rows = summarize(m.p, m.model, std::move(m.all));
  if (!m.rotation.empty())
    for (auto& r : rows) r.rotation = m.rotation;  // a file need not be here
  return rows;
}

void write_shard_file(const std::string& dir, int shard, int n_shards, const nlohmann::json& j) {
  std::filesystem::create_directories(dir);
  write_file_atomic(fmt::format("{}/loss-shard-{}-of-{}.json", dir, shard, n_shards), j.dump() + "\n");
}

std::vector<loss_row> merge_shard_dirs(const std::vector<std::string>& dirs, const std::string& out) {
  std::vector<std::string> files;
  for (const auto& d : dirs) {
    if (!std::filesystem::is_directory(d)) fail("{}: not a folder", d);
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("loss-shard-", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> shards;
  for (const auto& f : files) shards.push_back(io::read_json_file(f));
  merged_shards m = read_shards(shards);
  const std::vector<loss_row> rows = summarize(m.p, m.model, m.all);
  write_loss_files(out, rows);
  write_paired_files(out, summarize_paired(m.p, m.model, std::move(m.all)));
  return rows;
}

}  // namespace attnum::loss
