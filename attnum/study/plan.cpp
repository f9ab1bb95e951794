// The head study's plan: units, capture sources and the configuration (study/plan.h).
#include "attnum/study/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "attnum/core/hash.h"
#include "attnum/core/file.h"
#include "attnum/core/same_config.h"
#include "attnum/core/version.h"
#include "attnum/io/mapped_file.h"
#include "attnum/io/safetensors.h"
#include "attnum/study/emulate.h"
#include "attnum/study/rows.h"

namespace attnum::study {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The FNV-1a of a file as one open descriptor holds it: mapped_file opens the path once without
// blocking, refuses anything but a regular file by fstat on that descriptor (a FIFO or a symlink
// to /dev/zero never blocks or streams forever) and maps it; the path is never reopened by name.
std::string fnv1a_file(const io::mapped_file& f) { return core::fnv1a_hex(f.data(), f.size()); }

// Groups capture files by their model id (metadata "model", else the file stem before "__").
std::vector<capture_model> capture_models(const std::vector<std::string>& files,
                                          const std::vector<std::string>& outputs) {
  if (!outputs.empty() && outputs.size() != files.size())
    fail("transfer: {} --kernel-outputs files for {} --captures files (one per capture, same order)", outputs.size(),
         files.size());
  std::vector<capture_model> out;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const std::string& f = files[fi];
    const io::safetensors_file st(f);
    std::string model;
    if (auto it = st.metadata().find("model"); it != st.metadata().end()) model = it->second;
    if (model.empty()) {
      const std::string stem = fs::path(f).stem().string();
      model = stem.substr(0, stem.find("__"));
    }
    int n_layer = 0;
    while (st.find(fmt::format("layers.{}.q", n_layer))) ++n_layer;
    if (n_layer == 0) fail("{}: no tensor layers.0.q (not a capture file?)", f);
    auto it = std::find_if(out.begin(), out.end(), [&](const capture_model& m) { return m.name == model; });
    if (it == out.end()) {
      out.push_back({model, n_layer, {}, {}, {}, {}});
      it = out.end() - 1;
    }
    if (it->n_layer != n_layer)
      fail("{}: {} layers, but another capture of model '{}' has {}", f, n_layer, clip(model), it->n_layer);
    it->files.push_back(f);
    it->hashes.push_back(fnv1a_file(st.file()));  // the bytes just parsed
    if (!outputs.empty()) {
      it->outputs.push_back(outputs[fi]);
      it->output_hashes.push_back(fnv1a_file(io::mapped_file(outputs[fi])));
    }
  }
  return out;
}

// An explicit rotation's [d, d] values (null for the Hadamard family, rebuilt from its name).
json rotation_matrix_json(const transforms::rotation& r) {
  return r.dim() > 0 ? json(r.matrix(r.dim())) : json(nullptr);
}

}  // namespace

void check_conditions(const std::vector<std::string>& conditions, bool needs_transform, std::string_view flag) {
  if (conditions.empty()) fail("{}: no condition given", flag);
  std::vector<attention::condition> seen;
  for (const auto& name : conditions) {
    attention::condition c;
    try {
      c = attention::parse_condition(name);
    } catch (const error& e) {
      fail("{}: {}", flag, e.what());
    }
    if (std::find(seen.begin(), seen.end(), c) != seen.end())
      fail("{}: '{}' is given twice ({})", flag, name, clip(fmt::format("{}", fmt::join(conditions, ","))));
    seen.push_back(c);
  }
  if (needs_transform && seen.size() == 1 && seen[0] == attention::condition::plain)
    fail("{} {}: the study compares each transform with plain; add rotate, center or center+rotate", flag,
         clip(conditions[0]));
}

plan make_plan(const study_options& opt) {
  plan p;
  p.opt = opt;
  if (opt.kernels.empty()) fail("heads: --kernel needs at least one kernel");
  for (size_t i = 0; i < opt.kernels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (opt.kernels[i].name == opt.kernels[j].name) fail("heads: kernel '{}' is given twice", opt.kernels[i].name);
  if (opt.predictor_model != "kernel") {
    const auto known = attention::preset_names();
    if (std::find(known.begin(), known.end(), opt.predictor_model) == known.end())
      fail("heads: --predictor-model: expected kernel or a preset ({}), got '{}'", fmt::join(known, ", "),
           clip(opt.predictor_model));
  }
  check_conditions(opt.conditions, true);
  bool plain = false;
  for (const auto& c : opt.conditions) plain |= parse_condition_index(c) == 0;
  if (!plain) fail("heads: --conditions must include plain (scores are relative to it)");
  if (opt.zoo) {
    if (opt.n_texts < 1) fail("heads: need at least one text");
    const auto models = zoo_models(opt.zoo_opt);
    bool rotates = false;
    for (const auto& c : opt.conditions) rotates |= attention::rotates(attention::parse_condition(c));
    // The units and the rows the study holds in memory (one per head, kernel and condition of
    // every unit), estimated before any of them is allocated.
    uint64_t n_units = 0, n_rows = 0;
    for (const auto& m : models) {
      const uint64_t u = checked_mul(uint64_t(m.n_layer), uint64_t(opt.n_texts));
      n_units = std::min<uint64_t>(UINT64_MAX / 2, n_units + u);
      n_rows = std::min<uint64_t>(UINT64_MAX / 2, n_rows + checked_mul(checked_mul(u, uint64_t(m.n_head)),
                                                                       opt.kernels.size() * opt.conditions.size()));
    }
    const uint64_t unit_bytes = checked_mul(n_units, sizeof(unit)), row_bytes = checked_mul(n_rows, sizeof(row));
    check_alloc(unit_bytes > UINT64_MAX - row_bytes ? UINT64_MAX : unit_bytes + row_bytes,
                fmt::format("heads: --texts {} ({} units, {} rows)", opt.n_texts, n_units, n_rows));
    if (n_units > uint64_t(std::numeric_limits<int>::max()))
      fail("heads: --texts {} gives {} units, more than {}", opt.n_texts, n_units, std::numeric_limits<int>::max());
    for (size_t m = 0; m < models.size(); ++m) {
      if (rotates) opt.rotation.check(models[m].d_head);  // a user matrix of another d: exit 2 now
      p.model_names.push_back(models[m].name);
      for (int l = 0; l < models[m].n_layer; ++l)
        for (int t = 0; t < opt.n_texts; ++t)
          p.units.push_back({static_cast<int>(p.units.size()), static_cast<int>(m), l, t});
    }
    return p;
  }
  if (opt.captures.empty()) fail("heads: no capture files");
  p.sources = capture_models(opt.captures, opt.kernel_outputs);
  for (size_t m = 0; m < p.sources.size(); ++m) {
    p.model_names.push_back(p.sources[m].name);
    for (int l = 0; l < p.sources[m].n_layer; ++l)
      for (int t = 0; t < static_cast<int>(p.sources[m].files.size()); ++t)
        p.units.push_back({static_cast<int>(p.units.size()), static_cast<int>(m), l, t});
  }
  return p;
}

json source_json(const plan& p) {
  if (p.opt.zoo) return "zoo";
  json files = json::array();
  for (const auto& m : p.sources)
    for (size_t t = 0; t < m.files.size(); ++t) {
      json f{{"model", m.name}, {"text", t}, {"file", m.files[t]}, {"fnv1a64", m.hashes[t]}};
      if (!m.outputs.empty()) f["kernel_outputs"] = m.outputs[t], f["kernel_outputs_fnv1a64"] = m.output_hashes[t];
      files.push_back(f);
    }
  return files;
}

std::vector<std::string> kernel_names(const study_options& o) {
  std::vector<std::string> v;
  for (const auto& k : o.kernels) v.push_back(k.name);
  return v;
}
json kernel_specs_json(const study_options& o) {
  json a = json::array();
  for (const auto& k : o.kernels) a.push_back(attention::to_json(k));
  return a;
}

// Doubles are written in shortest round-trip form: reading a checkpoint back gives the same bits.
json config_json(const plan& p) {
  const auto& o = p.opt;
  return json{{"tool_version", std::string(tool_version())},
              {"predictor_version", std::string(predict::version_string(o.predictor.version))},
              {"kernel_backend", std::string(kernel_backend())},
              {"source", o.zoo ? "zoo" : "captures"},
              {"zoo_n_tok", o.zoo_opt.n_tok},
              {"zoo_n_layer_cap", o.zoo_opt.n_layer_cap},
              {"zoo_seed", o.zoo_opt.seed},
              {"zoo_dtype", std::string(formats::info(o.zoo_opt.dtype).name)},
              {"n_texts", o.n_texts},
              {"captures", o.captures},
              {"kernel_outputs", o.kernel_outputs},
              {"source_files", source_json(p)},
              {"kernels", kernel_names(o)},
              {"knobs", o.knobs},
              {"kernel_specs", kernel_specs_json(o)},
              {"conditions", o.conditions},
              {"rotation", o.rotation.name()},
              {"rotation_matrix", rotation_matrix_json(o.rotation)},
              {"n_probes", o.predictor.n_probes},
              {"probe_seed", o.predictor.probe_seed},
              {"predictor_model", o.predictor_model},
              {"bootstrap_resamples", o.bootstrap_resamples},
              {"bootstrap_seed", o.bootstrap_seed},
              {"n_units", p.units.size()}};
}

void require_predictor_variants(std::span<const plan> plans) {
  for (const plan& q : plans)
    core::require_same_config(config_json(plans.front()), config_json(q), "heads",
                              "studies computed together differ in their predictor model only", {"predictor_model"});
}

plan plan_from_config(const json& j, const std::string& what) {
  study_options o;
  // A value this tool would refuse as a flag is refused naming the file and the field.
  auto field = [&](const char* name, auto&& parse) {
    try {
      return parse();
    } catch (const error& e) {
      fail("{}: field {}: {}", what, name, e.what());
    }
  };
  try {
    o.zoo = j.at("source") == "zoo";
    o.zoo_opt.n_tok = j.at("zoo_n_tok");
    o.zoo_opt.n_layer_cap = j.at("zoo_n_layer_cap");
    o.zoo_opt.seed = j.at("zoo_seed");
    o.zoo_opt.dtype = field("zoo_dtype", [&] { return formats::parse_format(j.at("zoo_dtype").get<std::string>()); });
    o.n_texts = j.at("n_texts");
    o.captures = j.at("captures").get<std::vector<std::string>>();
    o.kernel_outputs = j.at("kernel_outputs").get<std::vector<std::string>>();
    o.knobs = j.at("knobs").get<std::vector<std::string>>();
    o.kernels.clear();
    for (const auto& k : j.at("kernels").get<std::vector<std::string>>())
      o.kernels.push_back(
          field("kernels and knobs", [&] { return attention::apply_knobs(attention::preset(k), o.knobs); }));
    o.conditions = j.at("conditions").get<std::vector<std::string>>();
    check_conditions(o.conditions, true, what + ": field conditions");
    const std::string rot = j.at("rotation");
    if (j.at("rotation_matrix").is_null()) {
      auto r = field("rotation", [&] { return transforms::rotation::parse_builtin(rot); });
      if (!r) fail("{}: rotation '{}' has no rotation_matrix", what, clip(rot));
      o.rotation = *r;
    } else {
      const auto m = j.at("rotation_matrix").get<std::vector<double>>();
      const auto d = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(m.size()))));
      o.rotation = field("rotation_matrix", [&] { return transforms::rotation::from_matrix(m, {d, d}, rot); });
    }
    o.predictor.n_probes = j.at("n_probes");
    o.predictor.probe_seed = j.at("probe_seed");
    // Another predictor version's string (or an unknown one) stays v1 here: the check below then
    // refuses the folder, naming predictor_version.
    if (auto v = predict::version_from_string(j.at("predictor_version").get<std::string>())) o.predictor.version = *v;
    o.predictor_model = j.value("predictor_model", "kernel");
    o.bootstrap_resamples = j.at("bootstrap_resamples");
    o.bootstrap_seed = j.at("bootstrap_seed");
    o.command = j.value("command", "");
  } catch (const json::exception& e) {
    fail("{}: missing or bad field ({})", what, clip(e.what()));
  }
  plan p = [&] {
    try {
      return make_plan(o);
    } catch (const error& e) {
      fail("{}: {}", what, e.what());
    }
  }();
  core::require_same_config(j, config_json(p), what, "written by a different tool or predictor version", {"command"});
  return p;
}

}  // namespace attnum::study
