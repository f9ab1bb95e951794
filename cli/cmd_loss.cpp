// attnum loss: teacher-forced loss of a model whose attention runs an emulated kernel, against
// a reference attention (docs/model.md). Parses options, calls attnum::pipeline::run_loss_request, prints.
#include <cmath>
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <cstdio>

#include "attnum/attention/condition.h"
#include "attnum/core/error.h"
#include "attnum/core/progress.h"
#include "attnum/loss/loss_study.h"
#include "attnum/pipeline/loss_texts.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"
#include "cli/list_option.h"

namespace {
struct loss_options {
  attnum::cli::kernel_flags kernel{"fa3", {}};
  std::string model, tokenizer, rotation, conditions = attnum::attention::condition_list(",");
  std::string reference = "bf16", linear = "auto", out, save_reference, reference_file;
  std::vector<std::string> texts, token_ids;
  int tokens = 1024, windows = 1;
  std::string shard;  // "I/N"
  bool pipeline_layers = false;
  attnum::cli::output_flags output;
};

void run(const loss_options& o) {
  using namespace attnum::model;
  using namespace attnum::loss;
  attnum::pipeline::loss_request q;
  q.model = o.model, q.tokenizer = o.tokenizer, q.texts = o.texts, q.token_ids = o.token_ids;
  q.tokens = o.tokens, q.windows = o.windows;
  q.kernels = attnum::cli::resolve_kernels(o.kernel);
  q.knobs = o.kernel.knobs;
  q.rotation = attnum::study::parse_rotation(o.rotation);
  q.conditions = attnum::cli::conditions_from_flag(o.conditions, false);
  q.reference = o.reference, q.linear = o.linear;
  q.save_reference = o.save_reference, q.reference_file = o.reference_file;
  q.out = o.out, q.shard = o.shard, q.pipeline_layers = o.pipeline_layers;
  q.command = o.shard.empty() ? fmt::format("attnum loss --kernel {}", o.kernel.kernels)
                              : fmt::format("attnum loss --shard {}", o.shard);
  q.notices = attnum::get_progress_mode() != attnum::progress_mode::never;
  const attnum::pipeline::loss_outcome res = attnum::pipeline::run_loss_request(q);
  if (!o.shard.empty()) {
    fmt::print(stderr, "shard {}: {} units written to {}; combine the shards with attnum merge\n", o.shard,
               res.shard_units, o.out);
    return;
  }
  if (!attnum::scaleout::here().root()) return;
  const auto& rows = res.rows;
  const auto& paired = res.paired;
  const auto& specs = q.kernels;
  const std::string from = !o.reference_file.empty() ? o.reference_file : o.save_reference;
  const std::string reference_note = from.empty() ? "" : " (logits read from " + from + ")";
  if (o.output.format() != attnum::io::output_format::table) {
    // -o json (--json) prints the conditions alone, as it always has; md, csv and jsonl print the
    // paired comparisons as a second table.
    nlohmann::json arr = nlohmann::json::array(), paired_rows = nlohmann::json::array();
    for (const auto& r : rows) arr.push_back(to_json(r));
    for (const auto& r : paired) paired_rows.push_back(to_json(r));
    std::vector<attnum::io::named_rows> tables = {{"loss", arr}};
    if (!paired.empty()) tables.push_back({"loss_paired", paired_rows});
    attnum::cli::print_output(o.output, arr, tables, 2);
    return;
  }
  // An interval "[lo,hi]" in `f`'s format, or "n/a" when it is not available (the JSON's
  // *_ci_reason says why).
  auto ci = [](double lo, double hi, const char* f) {
    return std::isfinite(lo) && std::isfinite(hi)
               ? "[" + fmt::format(fmt::runtime(f), lo) + "," + fmt::format(fmt::runtime(f), hi) + "]"
               : std::string("n/a");
  };
  for (const auto& spec : specs) {
    fmt::print("model {}  kernel {}  reference {}{}  linear {}  labels per condition {}\n", res.model_id, spec.name,
               o.reference, reference_note, rows.empty() ? o.linear : rows[0].linear,
               rows.empty() ? 0 : rows[0].n_labels);
    fmt::print("{:<14} {:>9} {:>9} {:>9} {:>19} {:>10} {:>7} {:>10} {:>10}\n", "condition", "ce_ref", "ce_var",
               "ppl_ratio", "95% interval", "kl_mean", "top1", "dp_p01", "dp_p99");
    for (const auto& r : rows)
      if (r.kernel == spec.name)
        fmt::print("{:<14} {:>9.5f} {:>9.5f} {:>9.5f} {:>19} {:>10.3e} {:>7.4f} {:>10.3e} {:>10.3e}\n", r.condition,
                   r.ce_ref, r.ce_variant, r.ppl_ratio, ci(r.ppl_ratio_lo, r.ppl_ratio_hi, "{:>8.5f}"), r.kl_mean,
                   r.top1_agreement, r.dp_p01, r.dp_p99);
  }
  if (!rows.empty())
    fmt::print(
        "ppl_ratio intervals: {}{} (the text windows are the clusters, so the intervals include "
        "the variation between texts; n/a: none, loss.json's *_ci_reason says why)\n",
        rows[0].ci_method.rfind("none", 0) == 0 ? "" : "95% ", rows[0].ci_method);
  // llama.cpp's --kl-divergence statistics, with the same jackknife's intervals (none for kl_p99).
  if (!rows.empty()) {
    fmt::print(
        "\nKL(ref || variant) over labels, same top-1, RMS dp (llama.cpp's --kl-divergence statistics; 95% intervals "
        "as above)\n");
    fmt::print("{:<14} {:>14} {:>10} {:>21} {:>10} {:>10} {:>10} {:>10} {:>7} {:>17} {:>9} {:>21}\n", "condition",
               "kernel", "kl_mean", "95% interval", "kl_median", "kl_p90", "kl_p99", "kl_max", "top1", "95% interval",
               "dp_rms", "95% interval");
    for (const auto& r : rows)
      fmt::print(
          "{:<14} {:>14} {:>10.3e} {:>21} {:>10.3e} {:>10.3e} {:>10.3e} {:>10.3e} {:>7.4f} "
          "{:>17} {:>9.3e} {:>21}\n",
          r.condition, r.kernel, r.kl_mean, ci(r.kl_mean_lo, r.kl_mean_hi, "{:>9.3e}"), r.kl_p50, r.kl_p90, r.kl_p99,
          r.kl_max, r.top1_agreement, ci(r.top1_agreement_lo, r.top1_agreement_hi, "{:>7.4f}"), r.dp_rms,
          ci(r.dp_rms_lo, r.dp_rms_hi, "{:>9.3e}"));
  }
  if (paired.empty()) return;
  fmt::print("\npaired (a - b, same labels)   {:>14} {:>9} {:>21} {:>10} {:>21} {:>8} {:>6} {:>6}\n", "kernel", "dCE",
             "95% interval", "dKL", "95% interval", "dtop1", "block", "acf1");
  for (const auto& r : paired)
    fmt::print("{:<14} - {:<14} {:>14} {:>9.5f} {:>21} {:>10.3e} {:>21} {:>8.4f} {:>6} {:>6.3f}\n", r.condition_a,
               r.condition_b, r.kernel, r.delta_ce, ci(r.delta_ce_lo, r.delta_ce_hi, "{:>9.5f}"), r.delta_kl,
               ci(r.delta_kl_lo, r.delta_kl_hi, "{:>9.2e}"), r.delta_top1, r.block_length,
               r.ce_diff_lag1_autocorrelation);
  fmt::print(
      "paired intervals: {}{} (n/a: none, loss_paired.json's *_ci_reason says why; block: the "
      "moving-block length the per-token CE differences' autocorrelation needs, recorded, not used)\n",
      paired[0].ci_method.rfind("none", 0) == 0 ? "" : "95% ", paired[0].ci_method);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<loss_options>();
  app.add_option("--model", o->model, "llama2.c checkpoint (.bin), Hugging Face folder or GGUF file")->required();
  app.add_option("--text", o->texts, "Text files (tokenized, BOS first where the model has one)");
  app.add_option("--token-ids", o->token_ids, "Files of whitespace-separated token ids (used as given)");
  app.add_option("--tokenizer", o->tokenizer, "Tokenizer file (default: beside the model)");
  app.add_option("--tokens", o->tokens, "N: labels per window")->capture_default_str();
  app.add_option("--windows", o->windows, "K: windows per file")->capture_default_str();
  attnum::cli::add_kernel_options(app, o->kernel, "--kernel", "Kernel preset of the variant (or fp64)");
  attnum::cli::add_rotation_option(app, o->rotation);
  app.add_option("--conditions", o->conditions, "Comma-separated conditions")->capture_default_str();
  app.add_option("--reference", o->reference, "Reference attention: bf16 or fp64")->capture_default_str();
  app.add_option("--linear-precision", o->linear,
                 "Outside attention: auto (the checkpoint's own dtype), fp32, bf16 or fp16")
      ->capture_default_str();
  app.add_option("--out", o->out,
                 "Write DIR/loss.json, DIR/loss.csv and the paired comparisons DIR/loss_paired.{json,csv}");
  app.add_option(
      "--save-reference", o->save_reference,
      "Compute the reference logits once, write them to FILE (N x vocab x 4 bytes per window), and use them");
  app.add_option("--reference-file", o->reference_file,
                 "Read the reference logits from FILE (written by --save-reference) instead of computing them");
  app.add_option("--shard", o->shard, "Compute shard I of N (I/N) and write DIR/loss-shard-I-of-N.json");
  app.add_flag("--pipeline-layers", o->pipeline_layers,
               "Under mpirun: split the model's layers across the ranks (each holds a contiguous range; "
               "docs/scaleout.md)");
  attnum::cli::add_output_options(app, o->output, "Print a JSON array, one object per condition");
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("loss", "Teacher-forced loss with every attention layer swapped for a kernel", setup);
