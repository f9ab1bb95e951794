// attnum loss: teacher-forced loss of a model whose attention runs an emulated kernel, against
// a reference attention (docs/model.md). Parses options, calls attnum::model, prints.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <cstdio>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/progress.h"
#include "attnum/model/loader.h"
#include "attnum/model/loss.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"
#include "cli/list_option.h"

namespace {
struct loss_options {
  attnum::cli::kernel_flags kernel{"fa3", {}};
  std::string model, tokenizer, rotation, conditions = "plain,rotate,center,center+rotate";
  std::string reference = "bf16", linear = "bf16", out;
  std::vector<std::string> texts, token_ids;
  int tokens = 1024, windows = 1;
  std::string shard;  // "I/N"
  attnum::cli::output_flags output;
};

void run(const loss_options& o) {
  using namespace attnum::model;
  if (o.texts.empty() == o.token_ids.empty() && !o.token_ids.empty())
    attnum::fail("loss: give --text or --token-ids, not both");
  // Flags first: a bad flag is refused before the model is read.
  {  // --out never equal to or inside what the run reads
    std::vector<std::filesystem::path> in{o.model, o.tokenizer};
    in.insert(in.end(), o.texts.begin(), o.texts.end());
    in.insert(in.end(), o.token_ids.begin(), o.token_ids.end());
    attnum::require_out_outside_inputs(o.out, in);
  }
  loss_params p;
  const auto specs = attnum::cli::resolve_kernels(o.kernel);
  p.n_tokens = o.tokens, p.windows = o.windows, p.kernel = specs.front(), p.knobs = o.kernel.knobs;
  p.rotation = attnum::study::parse_rotation(o.rotation);
  p.conditions = attnum::cli::conditions_from_flag(o.conditions, false);
  p.reference = o.reference;
  if (p.reference != "bf16" && p.reference != "fp64")
    attnum::fail("--reference: expected bf16 or fp64, got '{}'", p.reference);
  p.linear = parse_linear_precision(o.linear);
  weights w = load_model(o.model);
  // Windows longer than the model's context are clamped to it, as attnum study does.
  if (w.cfg.seq_len > 0 && p.n_tokens > w.cfg.seq_len) {
    if (attnum::get_progress_mode() != attnum::progress_mode::never && attnum::scaleout::here().root())
      fmt::print(stderr, "loss: {} tokens exceed {}'s context of {}: using windows of {}\n", p.n_tokens, w.id,
                 w.cfg.seq_len, w.cfg.seq_len);
    p.n_tokens = w.cfg.seq_len;
  }
  if (!o.token_ids.empty()) {
    for (const auto& f : o.token_ids) p.sources.push_back(read_token_ids(f)), p.source_names.push_back(f);
  } else {
    auto tok = load_tokenizer(o.model, w, o.tokenizer);
    for (const auto& f : o.texts.empty() ? default_texts() : o.texts)
      p.sources.push_back(tokenize_file(f, *tok, w)), p.source_names.push_back(f);
  }
  validate(p, w);
  if (p.linear == linear_precision::bf16) round_to_bf16(w);
  if (!o.shard.empty()) {
    // A job-array shard: compute this shard's units and write them for a later merge.
    const auto sh = attnum::scaleout::parse_shard(o.shard);
    if (o.out.empty()) attnum::fail("--shard needs --out DIR");
    if (attnum::scaleout::here().size > 1) attnum::fail("--shard and mpirun do not combine");
    if (specs.size() != 1) attnum::fail("loss --shard: give one --kernel per shard run, got {}", o.kernel.kernels);
    const auto units = shard_units(p, sh.index, sh.count);
    attnum::output_guard guard(o.out);  // docs/reliability.md: a failed run leaves --out as it was
    attnum::begin_output_dir(o.out);
    const nlohmann::json j = shard_to_json(p, w.id, sh.index, sh.count, compute_units(w, p, units));
    write_shard_file(o.out, sh.index, sh.count, j);
    attnum::write_complete_marker(o.out, fmt::format("attnum loss --shard {}", o.shard));
    guard.commit();
    fmt::print(stderr, "shard {}/{}: {} units written to {}; combine the shards with attnum merge\n",
               sh.index, sh.count, units.size(), o.out);
    return;
  }
  // Under mpirun the windows are divided among the ranks; rank 0 gathers and prints.
  // Several kernels: one run each (checkpoints under --out/KERNEL), rows in the order given.
  const bool mpi = attnum::scaleout::here().size > 1;
  attnum::output_guard guard(attnum::scaleout::here().root() ? o.out : std::string());
  if (!o.out.empty() && attnum::scaleout::here().root()) attnum::begin_output_dir(o.out);
  // Paired comparisons (kPairedComparisons) come from a single-process run.
  std::vector<loss_row> rows;
  std::vector<paired_row> paired;
  for (const auto& spec : specs) {
    p.kernel = spec;
    const std::string dir = specs.size() > 1 && !o.out.empty() ? o.out + "/" + spec.name : o.out;
    const auto r = mpi ? attnum::pipeline::run_loss(w, p, w.id, dir, 0, 1, false) : run_loss(w, p, paired);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  if (!attnum::scaleout::here().root()) return;
  if (!o.out.empty()) {
    write_loss_files(o.out, rows);
    // --json keeps its top-level array (one object per condition); the paired rows go to
    // DIR/loss_paired.json (docs/results.md).
    if (!paired.empty()) write_paired_files(o.out, paired);
    attnum::write_complete_marker(o.out, fmt::format("attnum loss --kernel {}", o.kernel.kernels));
  }
  guard.commit();
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
  for (const auto& spec : specs) {
    fmt::print("model {}  kernel {}  reference {}  linear {}  labels per condition {}\n", w.id,
               spec.name, p.reference, o.linear, rows.empty() ? 0 : rows[0].n_labels);
    fmt::print("{:<14} {:>9} {:>9} {:>9} {:>19} {:>10} {:>7} {:>10} {:>10}\n", "condition", "ce_ref",
               "ce_var", "ppl_ratio", "95% interval", "kl_mean", "top1", "dp_p01", "dp_p99");
    for (const auto& r : rows)
      if (r.kernel == spec.name)
        fmt::print("{:<14} {:>9.5f} {:>9.5f} {:>9.5f} [{:>8.5f},{:>8.5f}] {:>10.3e} {:>7.4f} {:>10.3e} {:>10.3e}\n",
                   r.condition, r.ce_ref, r.ce_variant, r.ppl_ratio, r.ppl_ratio_lo, r.ppl_ratio_hi,
                   r.kl_mean, r.top1_agreement, r.dp_p01, r.dp_p99);
  }
  if (!rows.empty())
    fmt::print("ppl_ratio intervals: 95% {}, {} blocks of {} positions (from the autocorrelation of "
               "the per-token CE differences)\n",
               rows[0].ci_method, rows[0].n_blocks, rows[0].block_length);
  // llama.cpp's --kl-divergence statistics, with the same block bootstrap's intervals.
  if (!rows.empty()) {
    fmt::print("\nKL(ref || variant) over labels, same top-1, RMS dp (llama.cpp's --kl-divergence statistics; 95% intervals as above)\n");
    fmt::print("{:<14} {:>14} {:>10} {:>21} {:>10} {:>10} {:>10} {:>10} {:>7} {:>17} {:>9} {:>21}\n", "condition",
               "kernel", "kl_mean", "95% interval", "kl_median", "kl_p90", "kl_p99", "kl_max", "top1",
               "95% interval", "dp_rms", "95% interval");
    for (const auto& r : rows)
      fmt::print("{:<14} {:>14} {:>10.3e} [{:>9.3e},{:>9.3e}] {:>10.3e} {:>10.3e} {:>10.3e} {:>10.3e} {:>7.4f} "
                 "[{:>7.4f},{:>7.4f}] {:>9.3e} [{:>9.3e},{:>9.3e}]\n",
                 r.condition, r.kernel, r.kl_mean, r.kl_mean_lo, r.kl_mean_hi, r.kl_p50, r.kl_p90, r.kl_p99,
                 r.kl_max, r.top1_agreement, r.top1_agreement_lo, r.top1_agreement_hi, r.dp_rms, r.dp_rms_lo,
                 r.dp_rms_hi);
  }
  if (paired.empty()) return;
  fmt::print("\npaired (a - b, same labels)   {:>14} {:>9} {:>21} {:>10} {:>21} {:>8} {:>6} {:>6}\n",
             "kernel", "dCE", "95% interval", "dKL", "95% interval", "dtop1", "block", "acf1");
  for (const auto& r : paired)
    fmt::print("{:<14} - {:<14} {:>14} {:>9.5f} [{:>9.5f},{:>9.5f}] {:>10.3e} [{:>9.2e},{:>9.2e}] {:>8.4f} {:>6} {:>6.3f}\n",
               r.condition_a, r.condition_b, r.kernel, r.delta_ce, r.delta_ce_lo, r.delta_ce_hi, r.delta_kl,
               r.delta_kl_lo, r.delta_kl_hi, r.delta_top1, r.block_length,
               r.ce_diff_lag1_autocorrelation);
  fmt::print("paired intervals: 95% moving-block bootstrap over token positions (block length "
             "from the autocorrelation of the per-token CE differences)\n");
}

void setup(CLI::App& app) {
  auto o = std::make_shared<loss_options>();
  app.add_option("--model", o->model, "llama2.c checkpoint (.bin) or Hugging Face folder")->required();
  app.add_option("--text", o->texts, "Text files (tokenized, BOS first where the model has one)");
  app.add_option("--token-ids", o->token_ids, "Files of whitespace-separated token ids (used as given)");
  app.add_option("--tokenizer", o->tokenizer, "Tokenizer file (default: beside the model)");
  app.add_option("--tokens", o->tokens, "N: labels per window")->capture_default_str();
  app.add_option("--windows", o->windows, "K: windows per file")->capture_default_str();
  attnum::cli::add_kernel_options(app, o->kernel, "--kernel", "Kernel preset of the variant (or fp64)");
  attnum::cli::add_rotation_option(app, o->rotation);
  app.add_option("--conditions", o->conditions, "Comma-separated conditions")->capture_default_str();
  app.add_option("--reference", o->reference, "Reference attention: bf16 or fp64")->capture_default_str();
  app.add_option("--linear-precision", o->linear, "Outside attention: bf16 or fp32")->capture_default_str();
  app.add_option("--out", o->out, "Write DIR/loss.json, DIR/loss.csv and the paired comparisons DIR/loss_paired.{json,csv}");
  app.add_option("--shard", o->shard, "Compute shard I of N (I/N) and write DIR/loss-shard-I-of-N.json");
  attnum::cli::add_output_options(app, o->output, "Print a JSON array, one object per condition");
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("loss", "Teacher-forced loss with every attention layer swapped for a kernel", setup);
