// The loss study's row schemas: one field list per row type (loss/rows.h).
#include "attnum/loss/rows.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "attnum/core/file.h"
#include "attnum/core/version.h"
#include "attnum/io/csv.h"
#include "attnum/io/row_field.h"

namespace attnum::loss {

using nlohmann::json;

namespace {

template <typename R>
using field = io::row_field<R>;
using io::tool_version_json;

// A bound as JSON: null when the interval is not available.
json bound(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
// A reason as JSON: null when the interval is available.
json reason(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }

// Every interval is a 95% interval.
json ci_level_json() { return 0.95; }

// A member as it is; an interval's bound (null when not available); an interval's reason (null
// when it is available).
#define ATTNUM_FIELD(R, f)                   \
  field<R> {                                 \
#f, [](const R& r) { return json(r.f); } \
  }
#define ATTNUM_BOUND(R, f)                    \
  field<R> {                                  \
#f, [](const R& r) { return bound(r.f); } \
  }
#define ATTNUM_REASON(R, f)                    \
  field<R> {                                   \
#f, [](const R& r) { return reason(r.f); } \
  }

// loss.json / loss.csv.
const std::vector<field<loss_row>>& loss_fields() {
  using L = loss_row;
  static const std::vector<field<L>> fields = {
      ATTNUM_FIELD(L, condition),
      ATTNUM_FIELD(L, kernel),
      ATTNUM_FIELD(L, n_labels),
      ATTNUM_FIELD(L, ce_ref),
      ATTNUM_FIELD(L, ce_variant),
      ATTNUM_FIELD(L, ppl_ratio),
      ATTNUM_BOUND(L, ppl_ratio_lo),
      ATTNUM_BOUND(L, ppl_ratio_hi),
      ATTNUM_REASON(L, ppl_ratio_ci_reason),
      ATTNUM_FIELD(L, kl_mean),
      ATTNUM_BOUND(L, kl_mean_lo),
      ATTNUM_BOUND(L, kl_mean_hi),
      ATTNUM_REASON(L, kl_mean_ci_reason),
      ATTNUM_FIELD(L, kl_p50),
      ATTNUM_BOUND(L, kl_p50_lo),
      ATTNUM_BOUND(L, kl_p50_hi),
      ATTNUM_REASON(L, kl_p50_ci_reason),
      ATTNUM_FIELD(L, kl_p90),
      ATTNUM_BOUND(L, kl_p90_lo),
      ATTNUM_BOUND(L, kl_p90_hi),
      ATTNUM_REASON(L, kl_p90_ci_reason),
      ATTNUM_FIELD(L, kl_p99),
      ATTNUM_BOUND(L, kl_p99_lo),
      ATTNUM_BOUND(L, kl_p99_hi),
      ATTNUM_REASON(L, kl_p99_ci_reason),
      ATTNUM_FIELD(L, kl_p999),
      ATTNUM_FIELD(L, kl_min),
      ATTNUM_FIELD(L, kl_max),
      ATTNUM_FIELD(L, top1_agreement),
      ATTNUM_BOUND(L, top1_agreement_lo),
      ATTNUM_BOUND(L, top1_agreement_hi),
      ATTNUM_REASON(L, top1_agreement_ci_reason),
      ATTNUM_FIELD(L, dp_mean),
      ATTNUM_FIELD(L, dp_rms),
      ATTNUM_BOUND(L, dp_rms_lo),
      ATTNUM_BOUND(L, dp_rms_hi),
      ATTNUM_REASON(L, dp_rms_ci_reason),
      ATTNUM_FIELD(L, dp_min),
      ATTNUM_FIELD(L, dp_p01),
      ATTNUM_FIELD(L, dp_p10),
      ATTNUM_FIELD(L, dp_p50),
      ATTNUM_FIELD(L, dp_p90),
      ATTNUM_FIELD(L, dp_p99),
      ATTNUM_FIELD(L, dp_max),
      ATTNUM_FIELD(L, model),
      ATTNUM_FIELD(L, reference),
      field<L>{"linear_precision", [](const L& r) { return json(r.linear); }},
      field<L>{"knobs", [](const L& r) { return json(fmt::format("{}", fmt::join(r.knobs, ";"))); }},
      ATTNUM_FIELD(L, transform_dtype),
      ATTNUM_FIELD(L, rotation),
      ATTNUM_FIELD(L, ci_method),
      field<L>{"ci_level", [](const L&) { return ci_level_json(); }},
      ATTNUM_FIELD(L, block_length),
      ATTNUM_FIELD(L, n_blocks),
      ATTNUM_FIELD(L, n_text_windows),
      ATTNUM_FIELD(L, ci_dropped),
      field<L>{"tool_version", [](const L&) { return tool_version_json(); }}};
  return fields;
}

// loss_paired.json / loss_paired.csv.
const std::vector<field<paired_row>>& paired_fields() {
  using P = paired_row;
  static const std::vector<field<P>> fields = {ATTNUM_FIELD(P, kernel),
                                               ATTNUM_FIELD(P, condition_a),
                                               ATTNUM_FIELD(P, condition_b),
                                               ATTNUM_FIELD(P, n_labels),
                                               ATTNUM_FIELD(P, delta_ce),
                                               ATTNUM_BOUND(P, delta_ce_lo),
                                               ATTNUM_BOUND(P, delta_ce_hi),
                                               ATTNUM_REASON(P, delta_ce_ci_reason),
                                               ATTNUM_FIELD(P, delta_kl),
                                               ATTNUM_BOUND(P, delta_kl_lo),
                                               ATTNUM_BOUND(P, delta_kl_hi),
                                               ATTNUM_REASON(P, delta_kl_ci_reason),
                                               ATTNUM_FIELD(P, delta_top1),
                                               ATTNUM_BOUND(P, delta_top1_lo),
                                               ATTNUM_BOUND(P, delta_top1_hi),
                                               ATTNUM_REASON(P, delta_top1_ci_reason),
                                               ATTNUM_FIELD(P, ce_diff_lag1_autocorrelation),
                                               ATTNUM_FIELD(P, block_length),
                                               ATTNUM_FIELD(P, n_blocks),
                                               ATTNUM_FIELD(P, n_text_windows),
                                               ATTNUM_FIELD(P, ci_method),
                                               field<P>{"ci_level", [](const P&) { return ci_level_json(); }},
                                               ATTNUM_FIELD(P, ci_dropped),
                                               ATTNUM_FIELD(P, model),
                                               field<P>{"tool_version", [](const P&) { return tool_version_json(); }}};
  return fields;
}
#undef ATTNUM_FIELD
#undef ATTNUM_BOUND
#undef ATTNUM_REASON

template <typename R>
json fields_json(const std::vector<field<R>>& fields, const R& r) {
  json j = json::object();
  for (const auto& f : fields) j[f.name] = f.get(r);
  return j;
}

// The names in the order a JSON object of the row holds them (nlohmann::json sorts its keys).
template <typename R>
std::vector<std::string> field_names(const std::vector<field<R>>& fields) {
  std::vector<std::string> c;
  for (const auto& f : fields) c.push_back(f.name);
  std::sort(c.begin(), c.end());
  return c;
}

// Writes DIR/STEM.json (a JSON array of the rows' objects) and DIR/STEM.csv atomically; no rows
// give an empty CSV file (no header line).
template <typename R>
void write_table_files(const std::string& dir, const std::string& stem, const std::vector<field<R>>& fields,
                       const std::vector<R>& rows) {
  std::filesystem::create_directories(dir);
  json arr = json::array();
  for (const R& r : rows) arr.push_back(fields_json(fields, r));
  write_file_atomic(dir + "/" + stem + ".json", arr.dump(2) + "\n");
  write_file_atomic(dir + "/" + stem + ".csv", rows.empty() ? std::string() : io::csv_table(field_names(fields), arr));
}

}  // namespace

json to_json(const loss_row& r) { return fields_json(loss_fields(), r); }

std::vector<std::string> loss_columns() { return field_names(loss_fields()); }

void write_loss_files(const std::string& dir, const std::vector<loss_row>& rows) {
  write_table_files(dir, "loss", loss_fields(), rows);
}

json to_json(const paired_row& r) { return fields_json(paired_fields(), r); }

std::vector<std::string> paired_columns() { return field_names(paired_fields()); }

void write_paired_files(const std::string& dir, const std::vector<paired_row>& rows) {
  write_table_files(dir, "loss_paired", paired_fields(), rows);
}

}  // namespace attnum::loss
