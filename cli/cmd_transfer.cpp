// attnum transfer: does the emulator's verdict (and the unchanged predictor's) transfer to a real
// kernel? Reads the kernel's outputs for the same captures and scores them like the emulator.
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/io/safetensors.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/emulate.h"
#include "attnum/study/head_study.h"
#include "cli/command.h"
#include "cli/kernel_option.h"

namespace {

struct transfer_args {
  std::vector<std::string> captures, outputs;
  attnum::cli::kernel_flags kernel{"fa3", {}};
  std::string rotation;
  std::string out;
  bool json = false, quiet = false;
};

std::string cell(const nlohmann::json& s, const std::string& k) {
  auto f = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:.3f}", v.get<double>());
  };
  return fmt::format("{} [{}, {}]", f(s[k]), f(s[k + "_lo"]), f(s[k + "_hi"]));
}

void setup(CLI::App& app) {
  auto a = std::make_shared<transfer_args>();
  app.add_option("--captures", a->captures, "Capture files (safetensors), one per (model, text)")
      ->required();
  app.add_option("--kernel-outputs", a->outputs,
                 "The real kernel's outputs, one file per capture (same order): "
                 "layers.{l}.o.{condition} [n_head, n_tok, d_head]")
      ->required();
  attnum::cli::add_kernel_options(app, a->kernel, "--kernel,--emulator", "Preset that emulates the kernel");
  attnum::cli::add_rotation_option(app, a->rotation);
  app.add_option("--out", a->out, "Result folder (resumes from its checkpoints)");
  app.add_flag("--json", a->json, "Print the summary as a JSON array");
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
      fail("{}: needs layers.0.o.plain and at least one of rotate, center, center+rotate",
           a->outputs.front());
    if (conds.size() < 2) fail("{}: only the plain condition: nothing to compare", a->outputs.front());
    study::study_options o;
    o.zoo = false;
    o.captures = a->captures;
    o.kernel_outputs = a->outputs;
    o.kernels = attnum::cli::resolve_kernels(a->kernel);
    if (o.kernels.size() != 1) fail("transfer: --kernel takes the one preset that emulates the kernel, got {}", a->kernel.kernels);
    o.knobs = a->kernel.knobs;
    o.rotation = attnum::cli::parse_rotation(a->rotation);
    o.conditions = conds;
    o.command = "attnum transfer --kernel " + a->kernel.kernels;
    for (const auto& k : a->kernel.knobs) o.command += " --knob " + k;
    o.command += " --rotation " + a->rotation;
    const study::plan p = study::make_plan(o);
    std::filesystem::path dir = a->out, tmp;
    if (dir.empty()) {
      tmp = std::filesystem::temp_directory_path() /
            fmt::format("attnum-transfer-{}", static_cast<long>(::getpid()));
      dir = tmp;
    }
    output_guard guard(scaleout::here().root() ? dir : std::filesystem::path());  // docs/reliability.md
    begin_output_dir(dir);
    pipeline::run_heads(p, dir, 0, 1, !a->quiet);
    if (!attnum::scaleout::here().root()) return;
    const nlohmann::json summary = attnum::io::read_json_file(dir / "summary.json");
    if (tmp.empty()) write_complete_marker(dir, o.command);
    guard.commit();
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    if (a->json) {
      fmt::print("{}\n", summary.dump());
      return;
    }
    fmt::print("{:<14} {:>6} {:>14} {:<21} {:<21} {:<21} {:<21}\n", "transform", "heads",
               "harmed kernel", "AUC (predictor)", "precision", "recall", "Spearman emu/kernel");
    for (const auto& s : summary)
      fmt::print("{:<14} {:>6} {:>14} {:<21} {:<21} {:<21} {:<21}\n",
                 s["transform"].get<std::string>(), s["n_heads"].get<int>(),
                 fmt::format("{}/{}", s["n_harmed"].get<int>(), s["n_heads"].get<int>()),
                 cell(s, "auc"), cell(s, "precision"), cell(s, "recall"), cell(s, "spearman"));
    fmt::print("emulator {}; labels from the kernel outputs; intervals: 95% bootstrap over models\n",
               a->kernel.kernels);
  });
}

}  // namespace
ATTNUM_COMMAND("transfer", "Transfer of the head study to a real kernel's outputs", setup);
