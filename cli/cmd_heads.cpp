// attnum heads: the head study (which heads does a transform harm, and does the predictor know?).
#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "attnum/attention/condition.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/head_study.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"
#include "cli/predictor_option.h"
#include "cli/list_option.h"

namespace {

std::string fmt_opt(const nlohmann::json& v, const char* spec = "{:.3f}") {
  return v.is_null() ? std::string("-") : fmt::format(fmt::runtime(spec), v.get<double>());
}

struct heads_args {
  std::vector<std::string> captures;
  bool zoo = false;
  attnum::cli::kernel_flags kernel{"fa3", {}};
  std::string rotation, zoo_dtype = "bf16";
  std::string conditions = attnum::attention::condition_list(",");
  std::string out;
  std::string shard;
  std::string predictor_model = "kernel", predictor_version = "v1";
  bool quiet = false;
  attnum::cli::output_flags output;
  int n_tok = 1024, layers = 0, texts = 3;
};

void print_summary(const nlohmann::json& summary) {
  fmt::print("{:<14} {:<14} {:>6} {:>7} {:>14} {:>5}  {:<21} {:<21} {:<21} {:<21} {:<21}\n", "kernel", "transform",
             "heads", "harmed", "harmed (sign)", "null", "AUC [95% CI]", "precision", "recall", "Spearman",
             "AUC non-null");
  for (const auto& s : summary) {
    auto cell = [&](const std::string& k) {
      return fmt::format("{} {}", fmt_opt(s[k]), attnum::study::interval_text(s, k));
    };
    fmt::print("{:<14} {:<14} {:>6} {:>7} {:>14} {:>5}  {:<21} {:<21} {:<21} {:<21} {:<21}\n",
               s["kernel"].get<std::string>(), s["transform"].get<std::string>(), s["n_heads"].get<int>(),
               s.value("n_label_harmed", 0), s["n_harmed"].get<int>(), s.value("n_null", 0), cell("auc"),
               cell("precision"), cell("recall"), cell("spearman"), cell("auc_nonnull"));
  }
  fmt::print("{}", attnum::study::summary_notes(summary));
}

void setup(CLI::App& app) {
  auto a = std::make_shared<heads_args>();
  app.add_option("--captures", a->captures, "Capture files (safetensors), one per (model, text)");
  app.add_flag("--zoo", a->zoo, "Use the embedded synthetic head zoo (672 heads)");
  attnum::cli::add_kernel_options(app, a->kernel, "--kernel,--kernels");
  attnum::cli::add_rotation_option(app, a->rotation);
  app.add_option("--zoo-dtype", a->zoo_dtype,
                 "Zoo: operand dtype bf16, fp16 or fp32 (fp32: the zoo before transform_dtype)")
      ->capture_default_str();
  app.add_option("--conditions", a->conditions, "Conditions: " + attnum::attention::condition_list(","))
      ->capture_default_str();
  app.add_option("--out", a->out, "Result folder (resumes from its checkpoints)");
  app.add_option("--shard", a->shard, "I/N: compute only units with index % N == I (job arrays)");
  app.add_option("--n-tok", a->n_tok, "Zoo: tokens per head")->capture_default_str();
  app.add_option("--layers", a->layers, "Zoo: keep the first N layers of each model (0 = all)")->capture_default_str();
  app.add_option("--texts", a->texts, "Zoo: texts (independent token draws) per head")->capture_default_str();
  app.add_option("--predictor-model", a->predictor_model,
                 "kernel: model each kernel's own numerics; PRESET (e.g. fa3): that preset's "
                 "numerics, fixed across kernels (the design of seed 000)")
      ->capture_default_str();
  attnum::cli::add_predictor_version_option(app, a->predictor_version);
  attnum::cli::add_output_options(app, a->output, "Print the summary as a JSON array");
  app.add_flag("--quiet", a->quiet, "No progress bar");
  app.callback([a] {
    using namespace attnum;
    if (a->zoo == !a->captures.empty()) fail("heads: give exactly one of --zoo or --captures");
    if (a->texts < 1) fail("heads: --texts {}: expected a count >= 1", a->texts);
    study::study_options o;
    o.zoo = a->zoo;
    o.captures = a->captures;
    o.zoo_opt.n_tok = a->n_tok;
    o.zoo_opt.n_layer_cap = a->layers;
    o.n_texts = a->texts;
    o.kernels = attnum::cli::resolve_kernels(a->kernel);
    o.knobs = a->kernel.knobs;
    o.rotation = attnum::study::parse_rotation(a->rotation);
    o.zoo_opt.dtype = formats::parse_format(a->zoo_dtype);
    o.conditions = attnum::cli::conditions_from_flag(a->conditions, true);
    o.predictor_model = a->predictor_model;
    o.predictor.version = predict::parse_version(a->predictor_version);
    std::string knobs;
    for (const auto& k : a->kernel.knobs) knobs += " --knob " + k;
    o.command = fmt::format("attnum heads {} --kernel {}{} --rotation {}{} --conditions {} --predictor-model {}",
                            a->zoo ? "--zoo" : "--captures ...", a->kernel.kernels, knobs, a->rotation,
                            a->zoo ? " --zoo-dtype " + a->zoo_dtype : "", a->conditions, a->predictor_model);
    o.command += attnum::predict::command_suffix(o.predictor.version);
    const study::plan p = study::make_plan(o);
    study::run_controls ctl;
    ctl.progress = !a->quiet;
    if (!a->shard.empty()) {
      const scaleout::shard sh = scaleout::parse_shard(a->shard);  // strict I/N, 0 <= I < N (as loss)
      ctl.shard_index = sh.index, ctl.shard_count = sh.count;
      if (a->out.empty()) fail("--shard needs --out (shards are merged with attnum merge)");
    }
    require_out_outside_inputs(a->out, std::vector<std::filesystem::path>(a->captures.begin(), a->captures.end()));
    std::filesystem::path dir = a->out;
    std::filesystem::path tmp;
    if (dir.empty()) {
      tmp = private_temp_dir("heads");  // also removes those of killed runs
      dir = tmp;
    }
    // A failed run leaves --out as it found it (rank 0 owns the folder); stale temp files of
    // killed runs go; the completion marker is written last (docs/reliability.md).
    output_guard guard(scaleout::here().root() ? dir : std::filesystem::path());
    if (scaleout::here().root()) begin_output_dir(dir);
    // Under mpirun every rank computes its share; rank 0 writes the files (pipeline/distributed.h).
    const bool complete = pipeline::run_heads(p, dir, ctl.shard_index, ctl.shard_count, ctl.progress);
    if (!scaleout::here().root()) return;
    if (!complete) {
      write_complete_marker(dir, fmt::format("{} --shard {}", o.command, a->shard));
      guard.commit();
      fmt::print(stderr, "heads: shard {}/{} done; merge the shard folders with attnum merge\n", ctl.shard_index,
                 ctl.shard_count);
      return;
    }
    const nlohmann::json summary = attnum::io::read_json_file(dir / "summary.json");
    if (tmp.empty()) write_complete_marker(dir, o.command);  // a temporary folder goes whole
    guard.commit();
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& s : summary) arr.push_back(s);
    if (!attnum::cli::print_output(a->output, arr)) print_summary(summary);
  });
}

}  // namespace
ATTNUM_COMMAND("heads", "Head study: which heads a transform harms, and the predictor's call", setup);
