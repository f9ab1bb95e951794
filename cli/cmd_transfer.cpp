// attnum transfer: does the emulator's verdict (and the predictor's, kernel-aware and fixed) transfer
// to a real kernel? Reads the kernel's outputs for the same captures and scores them like the
// emulator.
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/io/safetensors.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/emulate.h"
#include "attnum/study/head_study.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"
#include "cli/predictor_option.h"

namespace {

struct transfer_args {
  std::vector<std::string> captures, outputs;
  attnum::cli::kernel_flags kernel{"fa3", {}};
  std::string rotation;
  std::string predictor_model = "fa3", predictor_version = "v1";
  std::string out;
  bool quiet = false;
  attnum::cli::output_flags output;
};

std::string cell(const nlohmann::json& s, const std::string& k) {
  auto f = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:.3f}", v.get<double>());
  };
  return fmt::format("{} {}", f(s[k]), attnum::study::interval_text(s, k));
}

void setup(CLI::App& app) {
  auto a = std::make_shared<transfer_args>();
  app.add_option("--captures", a->captures, "Capture files (safetensors), one per (model, text)")->required();
  app.add_option("--kernel-outputs", a->outputs,
                 "The real kernel's outputs, one file per capture (same order): "
                 "layers.{l}.o.{condition} [n_head, n_tok, d_head]")
      ->required();
  attnum::cli::add_kernel_options(app, a->kernel, "--kernel,--emulator", "Preset that emulates the kernel");
  attnum::cli::add_rotation_option(app, a->rotation);
  app.add_option("--predictor-model", a->predictor_model,
                 "The fixed predictor (that preset's numerics, fixed across kernels: the design "
                 "of seed 000) reported "
                 "next to the kernel-aware one (which models the emulator); kernel: the "
                 "kernel-aware one only")
      ->capture_default_str();
  attnum::cli::add_predictor_version_option(app, a->predictor_version);
  app.add_option("--out", a->out, "Result folder (resumes from its checkpoints)");
  attnum::cli::add_output_options(app, a->output, "Print the summary as a JSON array");
  app.add_flag("--quiet", a->quiet, "No progress bar");
  app.callback([a] {
    using namespace attnum;
    // The conditions are those the kernel outputs hold (layer 0 of the first file).
    std::vector<std::string> conds;
    {
      const io::safetensors_file st(a->outputs.front());
      for (const char* c : study::kConditionNames)
        if (st.find(fmt::format("layers.0.o.{}", c))) conds.push_back(c);
    }
    if (conds.empty() || conds.front() != "plain")
      fail("{}: needs layers.0.o.plain and at least one of rotate, center, center+rotate", a->outputs.front());
    if (conds.size() < 2) fail("{}: only the plain condition: nothing to compare", a->outputs.front());
    study::study_options o;
    o.zoo = false;
    o.captures = a->captures;
    o.kernel_outputs = a->outputs;
    o.kernels = attnum::cli::resolve_kernels(a->kernel);
    if (o.kernels.size() != 1)
      fail("transfer: --kernel takes the one preset that emulates the kernel, got {}", attnum::clip(a->kernel.kernels));
    o.knobs = a->kernel.knobs;
    o.rotation = attnum::study::parse_rotation(a->rotation);
    o.conditions = conds;
    o.command = "attnum transfer --kernel " + a->kernel.kernels;
    for (const auto& k : a->kernel.knobs) o.command += " --knob " + k;
    o.command += " --rotation " + a->rotation;
    o.predictor.version = predict::parse_version(a->predictor_version);
    o.command += attnum::predict::command_suffix(o.predictor.version);
    // The kernel-aware predictor (it models the emulator) in DIR; the fixed one, when asked
    // for, in DIR/fixed-PRESET. Both score the same heads against the same kernel labels, from
    // one run of the units (study::run_study computes each unit once for both).
    const bool with_fixed = a->predictor_model != "kernel";
    std::vector<study::plan> plans{study::make_plan(o)};
    if (with_fixed) {
      study::study_options f = o;
      f.predictor_model = a->predictor_model;
      f.command += " --predictor-model " + a->predictor_model;
      plans.push_back(study::make_plan(f));  // validates before any output
    }
    {
      std::vector<std::filesystem::path> in(a->captures.begin(), a->captures.end());
      in.insert(in.end(), a->outputs.begin(), a->outputs.end());
      require_out_outside_inputs(a->out, in);
    }
    std::filesystem::path dir = a->out, tmp;
    if (dir.empty()) {
      tmp = private_temp_dir("transfer");
      dir = tmp;
    }
    output_guard guard(scaleout::here().root() ? dir : std::filesystem::path());  // docs/reliability.md
    if (scaleout::here().root()) begin_output_dir(dir);
    const std::filesystem::path fixed_dir = dir / ("fixed-" + a->predictor_model);
    const std::vector<std::filesystem::path> dirs{dir, fixed_dir};
    pipeline::run_heads(plans, std::span(dirs).first(plans.size()), 0, 1, !a->quiet);
    if (!attnum::scaleout::here().root()) return;
    nlohmann::json summary = attnum::io::read_json_file(dir / "summary.json");
    if (with_fixed) {
      // Side by side: the fixed predictor's numbers as fixed_* fields of each row.
      const nlohmann::json fixed = attnum::io::read_json_file(fixed_dir / "summary.json");
      for (auto& s : summary)
        for (const auto& t : fixed)
          if (t["transform"] == s["transform"]) {
            s["fixed_predictor_model"] = t["predictor_model"];
            for (const char* k : {"auc", "precision", "recall", "auc_nonnull", "precision_nonnull", "recall_nonnull"})
              for (const std::string suf : {"", "_lo", "_hi", "_ci_reason"})
                s[std::string("fixed_") + k + suf] = t.value(k + suf, nlohmann::json());
            for (const char* k : {"n_predicted_harmed", "tp", "fp", "fn", "tn", "spearman_predicted"})
              s[std::string("fixed_") + k] = t[k];
          }
      write_file_atomic(dir / "transfer_summary.json", summary.dump(2) + "\n");
    }
    if (tmp.empty()) write_complete_marker(dir, o.command);
    guard.commit();
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    if (attnum::cli::print_output(a->output, summary)) return;
    fmt::print("{:<14} {:>6} {:>9} {:>14} {:>5}  {:<10} {:>9} {:<21} {:<21} {:<21}\n", "transform", "heads", "harmed",
               "harmed (sign)", "null", "predictor", "pred harm", "AUC", "precision", "recall");
    for (const auto& s : summary) {
      const std::string harmed = fmt::format("{}/{}", s["n_label_harmed"].get<int>(), s["n_heads"].get<int>());
      const std::string sign = fmt::format("{}/{}", s["n_harmed"].get<int>(), s["n_heads"].get<int>());
      fmt::print("{:<14} {:>6} {:>9} {:>14} {:>5}  {:<10} {:>9} {:<21} {:<21} {:<21}\n",
                 s["transform"].get<std::string>(), s["n_heads"].get<int>(), harmed, sign, s["n_null"].get<int>(),
                 "kernel", s["n_predicted_harmed"].get<int>(), cell(s, "auc"), cell(s, "precision"), cell(s, "recall"));
      if (with_fixed)
        fmt::print("{:<14} {:>6} {:>9} {:>14} {:>5}  {:<10} {:>9} {:<21} {:<21} {:<21}\n", "", "", "", "", "",
                   a->predictor_model, s["fixed_n_predicted_harmed"].get<int>(), cell(s, "fixed_auc"),
                   cell(s, "fixed_precision"), cell(s, "fixed_recall"));
    }
    fmt::print("emulator {}; labels from the kernel outputs; Spearman emulator/kernel:", a->kernel.kernels);
    for (const auto& s : summary)
      fmt::print(" {} {}", s["transform"].get<std::string>(), cell(s, "spearman_emulator_kernel"));
    fmt::print("\n{}", study::summary_notes(summary));
    if (with_fixed)
      fmt::print("predictor rows: kernel = models the emulator ({}); {} = one fixed model\n", a->kernel.kernels,
                 a->predictor_model);
  });
}

}  // namespace
ATTNUM_COMMAND("transfer", "Transfer of the head study to a real kernel's outputs", setup);
