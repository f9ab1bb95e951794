// pcast tables as JSON and CSV; the files are written with attnum::write_file_atomic.
#include "attnum/pcast/output.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/version.h"
#include "attnum/io/csv.h"

namespace attnum::pcast {
namespace {
// NaN -> null (nlohmann would write null for NaN anyway; explicit keeps CSV and JSON alike).
nlohmann::ordered_json num(double x) {
  return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
}
std::string version() { return std::string(tool_version()); }
// The knobs as loss.csv writes them (";"-joined KEY=VALUE).
std::string knobs(const sim_row& r) { return fmt::format("{}", fmt::join(r.knobs, ";")); }
// The kernel's spec as a JSON object (null for the idealized kernel).
nlohmann::ordered_json spec(const sim_row& r) {
  return r.kernel_spec.is_null() ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json::parse(r.kernel_spec.dump());
}
}  // namespace

nlohmann::ordered_json to_json(const std::vector<theory_row>& rows, const row_shape& shape) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    a.push_back({{"delta", r.delta},
                 {"scale", r.scale},
                 {"k_sink", r.k_sink},
                 {"delta_k", r.delta_k},
                 {"underflow_fraction", num(r.underflow_fraction)},
                 {"underflow_exact", num(r.underflow_exact)},
                 {"delta_c", r.delta_c},
                 {"n_tok", shape.n_tok},
                 {"block", shape.block},
                 {"tool_version", version()}});
  return a;
}

nlohmann::ordered_json to_json(const std::vector<dp_row>& rows) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows) a.push_back({{"scale", r.scale}, {"dp", r.dp}, {"tool_version", version()}});
  return a;
}

nlohmann::ordered_json to_json(const std::vector<sim_row>& rows) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    a.push_back({{"delta", r.delta},
                 {"scale", r.scale},
                 {"order", order_name(r.order)},
                 {"kernel", r.kernel},
                 {"underflow_measured", r.underflow_measured},
                 {"underflow_predicted", num(r.underflow_predicted)},
                 {"mse", r.mse},
                 {"mse_sd", r.mse_sd},
                 {"seeds", r.seeds},
                 {"n_tok", r.n_tok},
                 {"d_head", r.d_head},
                 {"block", r.block},
                 {"k_sink", r.k_sink},
                 {"underflow_sd", r.underflow_sd},
                 {"underflow_exact", num(r.underflow_exact)},
                 {"underflow_outside_measured", num(r.underflow_outside_measured)},
                 {"underflow_outside_exact", num(r.underflow_outside_exact)},
                 {"saturated_fraction", r.saturated_fraction},
                 {"threshold", r.threshold},
                 {"sigma", r.sigma},
                 {"knobs", knobs(r)},
                 {"kernel_spec", spec(r)},
                 {"tool_version", version()}});
  return a;
}

nlohmann::ordered_json overflow_json(const std::vector<sim_row>& rows) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    a.push_back({{"delta", r.delta},
                 {"scale", r.scale},
                 {"offset", std::log2(r.scale)},
                 {"saturated_fraction", r.saturated_fraction},
                 {"threshold", r.threshold},
                 {"order", order_name(r.order)},
                 {"sink_saturated_fraction", num(r.sink_saturated_fraction)},
                 {"can_saturate", can_saturate(r.scale, r.threshold)},
                 {"mse", r.mse},
                 {"mse_sd", r.mse_sd},
                 {"underflow_measured", r.underflow_measured},
                 {"seeds", r.seeds},
                 {"n_tok", r.n_tok},
                 {"d_head", r.d_head},
                 {"block", r.block},
                 {"k_sink", r.k_sink},
                 {"sigma", r.sigma},
                 {"kernel", r.kernel},
                 {"knobs", knobs(r)},
                 {"kernel_spec", spec(r)},
                 {"tool_version", version()}});
  return a;
}

nlohmann::ordered_json to_json(const std::vector<claim_row>& rows) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    a.push_back({{"claim", r.claim},
                 {"n_tok", r.n_tok},
                 {"delta", r.delta},
                 {"numerator", r.numerator},
                 {"denominator", r.denominator},
                 {"ratio", r.ratio},
                 {"ratio_lo", r.ratio_lo},
                 {"ratio_hi", r.ratio_hi},
                 {"mse_num", r.mse_num},
                 {"mse_den", r.mse_den},
                 {"seeds", r.seeds},
                 {"tool_version", version()}});
  return a;
}

nlohmann::ordered_json to_json(const std::vector<reverse_bound_row>& rows) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    a.push_back({{"n_tok", r.n_tok},
                 {"scale", r.scale},
                 {"flush", r.flush},
                 {"max_mean", r.max_mean},
                 {"sqrt_2_ln_n", r.sqrt_2_ln_n},
                 {"max_q999999", r.max_q999999},
                 {"p_underflow", r.p_underflow},
                 {"expected_count", r.expected_count},
                 {"paper_m", r.paper_m},
                 {"tool_version", version()}});
  return a;
}

std::string to_csv(const nlohmann::ordered_json& rows) {
  nlohmann::ordered_json flat = rows;  // a structured cell (kernel_spec) is written as its JSON text
  for (auto& r : flat)
    for (auto& v : r)
      if (v.is_structured()) v = v.dump();
  return io::csv_table(flat);
}

void write_results(const std::string& dir, const nlohmann::ordered_json& theory, const nlohmann::ordered_json& dp,
                   const nlohmann::ordered_json& simulate, const nlohmann::ordered_json& overflow) {
  const std::filesystem::path d(dir);
  if (!theory.empty()) write_file_atomic((d / "pcast_theory.csv").string(), to_csv(theory));
  if (!dp.empty()) write_file_atomic((d / "pcast_dp.csv").string(), to_csv(dp));
  if (!simulate.empty()) write_file_atomic((d / "pcast_simulate.csv").string(), to_csv(simulate));
  if (!overflow.empty()) write_file_atomic((d / "pcast_overflow.csv").string(), to_csv(overflow));
}

void write_all(const std::string& dir, bool quick, const progress_fn& progress) {
  const row_shape shape{};
  const auto theory = to_json(theory_table(parse_range("0:12:0.5", "delta"), {1, 256, 448}, shape), shape);
  const auto dps = to_json(dp_table(parse_range("1:512:1", "scale")));
  const auto sim = to_json(simulate(paper_config(quick), progress));
  const auto over = overflow_json(simulate(overflow_config(quick), progress));
  write_results(dir, theory, dps, sim, over);
}

}  // namespace attnum::pcast
