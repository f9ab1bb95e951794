// The head study's row schemas: one field list per row type (study/rows.h).
#include "attnum/study/rows.h"

#include <fmt/format.h>

#include "attnum/core/version.h"
#include "attnum/io/json_file.h"
#include "attnum/io/row_field.h"
#include "attnum/predict/predictor.h"

namespace attnum::study {

using nlohmann::json;

namespace {

template <typename R>
using field = io::row_field<R>;
using io::tool_version_json;

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

#define ATTNUM_FIELD(R, f)                                                                           \
  field<R> {                                                                                         \
#f, [](const R& r) { return json(r.f); }, [](R & r, const json& j) { io::json_get(j, r.f, #f); } \
  }

// rows.csv / rows.jsonl / checkpoints. kernel_rel_err is transfer-only (written when set);
// predictor_model reads back as "kernel" from checkpoints written before it existed.
const std::vector<field<row>>& row_fields() {
  static const std::vector<field<row>> fields = {
      ATTNUM_FIELD(row, model),
      ATTNUM_FIELD(row, layer),
      ATTNUM_FIELD(row, head),
      ATTNUM_FIELD(row, kv_head),
      ATTNUM_FIELD(row, text),
      ATTNUM_FIELD(row, kernel),
      ATTNUM_FIELD(row, condition),
      ATTNUM_FIELD(row, rel_err),
      ATTNUM_FIELD(row, log_err),
      ATTNUM_FIELD(row, predicted_rel_err),
      ATTNUM_FIELD(row, max_row_err),
      ATTNUM_FIELD(row, cosine),
      field<row>{"kernel_rel_err", [](const row& r) { return json(r.kernel_rel_err); },
                 [](row& r, const json& j) { j.get_to(r.kernel_rel_err); }, true, true},
      field<row>{"predictor_model", [](const row& r) { return json(r.predictor_model); },
                 [](row& r, const json& j) { j.get_to(r.predictor_model); }, false, true},
      field<row>{"tool_version", [](const row&) { return tool_version_json(); }, nullptr, false, false, true},
      field<row>{"predictor_version", [](const row& r) { return json(std::string(r.predictor_version)); }, nullptr,
                 false, false, true}};
  return fields;
}

// heads.csv / heads.jsonl.
const std::vector<field<head_row>>& head_fields() {
  using H = head_row;
  static const std::vector<field<H>> fields = {
      ATTNUM_FIELD(H, model),
      ATTNUM_FIELD(H, layer),
      ATTNUM_FIELD(H, head),
      ATTNUM_FIELD(H, kernel),
      ATTNUM_FIELD(H, transform),
      ATTNUM_FIELD(H, observed_score),
      ATTNUM_FIELD(H, predicted_score),
      ATTNUM_FIELD(H, harmed),
      ATTNUM_FIELD(H, predicted_harmed),
      ATTNUM_FIELD(H, mean_log_err_plain),
      ATTNUM_FIELD(H, mean_log_err_transform),
      ATTNUM_FIELD(H, mean_pred_log_err_plain),
      ATTNUM_FIELD(H, mean_pred_log_err_transform),
      ATTNUM_FIELD(H, n_texts),
      field<H>{"observed_se", [](const H& r) { return optional_json(r.observed_se); }},
      ATTNUM_FIELD(H, label),
      field<H>{"kernel_observed_score", [](const H& r) { return json(r.kernel_observed_score); }, nullptr, true},
      field<H>{"kernel_harmed", [](const H& r) { return json(r.kernel_harmed); }, nullptr, true},
      field<H>{"kernel_observed_se", [](const H& r) { return optional_json(r.kernel_observed_se); }, nullptr, true},
      field<H>{"kernel_label", [](const H& r) { return json(r.kernel_label); }, nullptr, true},
      ATTNUM_FIELD(H, predictor_model),
      field<H>{"tool_version", [](const H&) { return tool_version_json(); }, nullptr, false, false, true},
      field<H>{"predictor_version", [](const H& r) { return json(std::string(r.predictor_version)); }, nullptr, false,
               false, true}};
  return fields;
}

// zoo_heads.csv: a head's parameters with its model's name.
struct zoo_head {
  const std::string& model;
  int layer;
  const head_params& h;
};
const std::vector<field<zoo_head>>& zoo_head_fields() {
  using Z = zoo_head;
  static const char* kinds[] = {"none", "concentrated", "dense"};
#define ATTNUM_ZOO_FIELD(f)                    \
  field<Z> {                                   \
#f, [](const Z& z) { return json(z.h.f); } \
  }
  static const std::vector<field<Z>> fields = {
      field<Z>{"model", [](const Z& z) { return json(z.model); }},
      field<Z>{"layer", [](const Z& z) { return json(z.layer); }},
      ATTNUM_ZOO_FIELD(head),
      ATTNUM_ZOO_FIELD(kv_head),
      ATTNUM_ZOO_FIELD(d_head),
      ATTNUM_ZOO_FIELD(n_tok),
      ATTNUM_ZOO_FIELD(group),
      ATTNUM_ZOO_FIELD(temperature),
      ATTNUM_ZOO_FIELD(sink),
      ATTNUM_ZOO_FIELD(shared_ratio),
      field<Z>{"shared_kind", [](const Z& z) { return json(kinds[z.h.shared_kind]); }},
      ATTNUM_ZOO_FIELD(query_along_shared),
      ATTNUM_ZOO_FIELD(n_outlier),
      ATTNUM_ZOO_FIELD(outlier_scale),
      ATTNUM_ZOO_FIELD(rope),
      ATTNUM_ZOO_FIELD(v_dof),
      field<Z>{"seed", [](const Z& z) { return json(fmt::format("{:016x}", z.h.seed)); }},
      field<Z>{"tool_version", [](const Z&) { return tool_version_json(); }, nullptr, false, false, true}};
#undef ATTNUM_ZOO_FIELD
  return fields;
}
#undef ATTNUM_FIELD

// The object of r: the transfer fields only with `transfer`, the versions only with `versions`.
template <typename R>
json fields_json(const std::vector<field<R>>& fields, const R& r, bool transfer, bool versions) {
  json j = json::object();
  for (const auto& f : fields)
    if ((transfer || !f.transfer_only) && (versions || !f.version)) j[f.name] = f.get(r);
  return j;
}

template <typename R>
std::vector<std::string> field_names(const std::vector<field<R>>& fields, bool transfer) {
  std::vector<std::string> c;
  for (const auto& f : fields)
    if (transfer || !f.transfer_only) c.push_back(f.name);
  return c;
}

}  // namespace

json row_json(const row& r) { return fields_json(row_fields(), r, !std::isnan(r.kernel_rel_err), false); }

json row_json_versioned(const row& r) { return fields_json(row_fields(), r, !std::isnan(r.kernel_rel_err), true); }

row row_from_json(const json& j) {
  row r;
  for (const auto& f : row_fields())
    if (!f.version && (!f.optional || j.contains(f.name))) f.set(r, j.at(f.name));  // at(): throws if absent
  return r;
}

std::vector<std::string> row_columns(bool transfer) { return field_names(row_fields(), transfer); }

json head_row_json(const head_row& r, bool transfer) { return fields_json(head_fields(), r, transfer, true); }

std::vector<std::string> head_columns(bool transfer) { return field_names(head_fields(), transfer); }

json zoo_head_json(const std::string& model, int layer, const head_params& h) {
  return fields_json(zoo_head_fields(), zoo_head{model, layer, h}, false, true);
}

std::vector<std::string> zoo_head_columns() { return field_names(zoo_head_fields(), false); }

}  // namespace attnum::study
