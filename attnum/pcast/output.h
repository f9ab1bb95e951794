#pragma once
// Row tables of pcast as JSON arrays and CSV files (docs/results.md: pcast_theory.csv,
// pcast_dp.csv, pcast_simulate.csv, pcast_overflow.csv). Field order is the column order.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "attnum/pcast/simulate.h"
#include "attnum/pcast/theory.h"

namespace attnum::pcast {

/// Returns the rows as a JSON array of objects (NaN as null), columns in file order.
nlohmann::ordered_json to_json(const std::vector<theory_row>& rows, const row_shape& shape);
nlohmann::ordered_json to_json(const std::vector<dp_row>& rows);
nlohmann::ordered_json to_json(const std::vector<sim_row>& rows);
/// The overflow view of simulation rows (offset = log2 S, the exponent offset).
nlohmann::ordered_json overflow_json(const std::vector<sim_row>& rows);
/// The paper-claim rows (paired MSE ratios).
nlohmann::ordered_json to_json(const std::vector<claim_row>& rows);
/// The reverse-order bound rows.
nlohmann::ordered_json to_json(const std::vector<reverse_bound_row>& rows);

/// Returns a JSON array of objects as CSV text (header from the first row's keys; null and NaN as
/// empty cells; strings quoted when they hold a comma or quote; an object or array value, such as
/// kernel_spec, as its JSON text).
std::string to_csv(const nlohmann::ordered_json& rows);

/// Writes DIR/pcast_theory.csv, pcast_dp.csv, pcast_simulate.csv, pcast_overflow.csv (each only
/// when its table is non-empty).
void write_results(const std::string& dir, const nlohmann::ordered_json& theory, const nlohmann::ordered_json& dp,
                   const nlohmann::ordered_json& simulate, const nlohmann::ordered_json& overflow);

/// Runs the default theory table (Delta 0..12 step 0.5, S 1/256/448, k 4), dp(S) for S = 1..512,
/// the paper's simulation and the overflow sweep (paper_config / overflow_config with `quick`)
/// and writes all four CSV files into dir. What `attnum study` calls.
void write_all(const std::string& dir, bool quick, const progress_fn& progress = {});

}  // namespace attnum::pcast
