// attnum study: the whole study of the seeds end to end (attnum/pipeline/study.h).
#include <fmt/core.h>

#include "attnum/attention/condition.h"
#include "attnum/pipeline/study.h"
#include "attnum/scaleout/world.h"
#include "attnum/core/file.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"
#include "cli/list_option.h"
#include "cli/predictor_option.h"

namespace {
struct study_flags {
  attnum::pipeline::study_config c;
  attnum::cli::kernel_flags kernel{"fa3,sage2pp-sm89", {}};
  std::string rotation, conditions = attnum::attention::condition_list(",");
  std::string out = "results/study", assets, predictor_version = "v1";
  bool full_pcast = false, no_report = false, quiet = false;
  attnum::cli::output_flags output;
};

void setup(CLI::App& app) {
  auto f = std::make_shared<study_flags>();
  app.add_option("--model", f->c.model,
                 "llama2.c checkpoint (.bin), Hugging Face folder or GGUF file (default: the synthetic zoo)");
  app.add_option("--text", f->c.texts,
                 "Text files (default: Sherlock Holmes, Tom Sawyer, Opticks from Debian packages)");
  app.add_option("--tokenizer", f->c.tokenizer, "Tokenizer file (default: beside the model)");
  app.add_option("--tokens", f->c.tokens, "Tokens per text (capped by the model's context)")->capture_default_str();
  attnum::cli::add_kernel_options(app, f->kernel, "--kernel,--kernels");
  attnum::cli::add_rotation_option(app, f->rotation);
  app.add_option("--conditions", f->conditions, "Conditions")->capture_default_str();
  app.add_option("--predictor-model", f->c.predictor_model,
                 "Head study: kernel (model each kernel's numerics) or a preset (e.g. fa3: that "
                 "preset's numerics, fixed across kernels, the design of seed 000)")
      ->capture_default_str();
  attnum::cli::add_predictor_version_option(app, f->predictor_version);
  app.add_option("--linear-precision", f->c.linear,
                 "Model runner outside attention: auto (the checkpoint's own dtype), fp32, bf16 or fp16")
      ->capture_default_str();
  app.add_option("--out", f->out, "Output folder (resumes what is there)")->capture_default_str();
  app.add_option("--assets", f->assets, "node_modules folder with Vega (report)");
  app.add_option("--zoo-layers", f->c.zoo_layer_cap, "Keep only the first N layers of each zoo model");
  app.add_option("--zoo-tokens", f->c.zoo_tokens, "Tokens per zoo head")->capture_default_str();
  app.add_flag("--full-pcast", f->full_pcast, "Full P-cast simulation (16 seeds, 64 rows)");
  app.add_flag("--no-report", f->no_report, "Skip the HTML report");
  app.add_flag("--pipeline-layers", f->c.pipeline_layers,
               "Under mpirun: split the model's layers across the ranks for the captures and the loss (each "
               "holds a contiguous range; docs/scaleout.md)");
  app.add_flag("--quiet", f->quiet, "No progress on stderr");
  attnum::cli::add_output_options(app, f->output, "Print summary.json instead of the table");
  app.callback([f] {
    auto& c = f->c;
    c.kernels = attnum::cli::resolve_kernels(f->kernel);
    c.knobs = f->kernel.knobs;
    c.rotation = attnum::study::parse_rotation(f->rotation);
    c.conditions = attnum::cli::conditions_from_flag(f->conditions, true);
    c.out = f->out;
    if (!f->assets.empty()) c.assets = f->assets;
    c.quick_pcast = !f->full_pcast;
    c.report = !f->no_report;
    c.progress = !f->quiet;
    c.predictor_version = attnum::predict::parse_version(f->predictor_version);
    c.command = "attnum study" + attnum::predict::command_suffix(c.predictor_version);
    // A failed run leaves --out as it found it; the completion marker is written last.
    {  // --out never equal to or inside what the run reads
      std::vector<std::filesystem::path> in{c.model, c.tokenizer};
      in.insert(in.end(), c.texts.begin(), c.texts.end());
      attnum::require_out_outside_inputs(c.out, in);
    }
    const bool root = attnum::scaleout::here().root();
    attnum::output_guard guard(root ? c.out : std::filesystem::path());
    if (root) attnum::begin_output_dir(c.out);
    const nlohmann::json s = attnum::pipeline::run_study(c);
    if (!root) return;
    attnum::write_complete_marker(c.out, c.command);
    guard.commit();
    // md, csv and jsonl: the head summary, then the loss tables a model study has.
    std::vector<attnum::io::named_rows> tables = {{"heads", s["heads"]}};
    for (const char* t : {"loss", "loss_paired"})
      if (s.contains(t) && !s[t].empty()) tables.push_back({t, s[t]});
    if (!attnum::cli::print_output(f->output, s, tables, 2)) fmt::print("{}", attnum::pipeline::summary_table(s));
  });
}
}  // namespace
ATTNUM_COMMAND("study", "The whole study end to end: heads, predictor, loss, P-cast, report", setup);
