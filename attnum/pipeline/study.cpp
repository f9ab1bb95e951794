#include "attnum/pipeline/study.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "attnum/attention/isa_paths.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/progress.h"
#include "attnum/core/run_info.h"
#include "attnum/core/version.h"
#include "attnum/io/csv.h"
#include "attnum/io/json_file.h"
#include "attnum/model/capture.h"
#include "attnum/model/loader.h"
#include "attnum/loss/loss_study.h"
#include "attnum/model/text_window.h"
#include "attnum/pcast/output.h"
#include "attnum/pcast/simulate.h"
#include "attnum/pcast/theory.h"
#include "attnum/pipeline/capture_texts.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/report/page.h"
#include "attnum/scaleout/layers.h"
#include "attnum/scaleout/world.h"
#include "attnum/study/head_study.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnum::pipeline {
namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void say(const study_config& c, const std::string& line) {
  if (c.progress && get_progress_mode() != progress_mode::never && scaleout::here().root())
    fmt::print(stderr, "study: {}\n", line);
}

// Step 4: P-cast theory, dp(S), a short sink simulation and the stale-max side (rank 0; cheap).
void run_pcast(const study_config& c, const fs::path& dir) {
  if (fs::exists(dir / "pcast_simulate.csv") && fs::exists(dir / "pcast_overflow.csv")) return;
  const pcast::row_shape shape;  // the paper's N 4096, B 128, k_sink 4
  const auto theory =
      pcast::to_json(pcast::theory_table(pcast::parse_range("0:12:0.5", "delta"), {1, 256, 448}, shape), shape);
  const auto dp = pcast::to_json(pcast::dp_table(pcast::parse_range("1:512:0.25", "scale")));
  const auto sim = pcast::to_json(pcast::simulate(pcast::paper_config(c.quick_pcast)));
  const auto over = pcast::overflow_json(pcast::simulate(pcast::overflow_config(c.quick_pcast)));
  pcast::write_results(dir.string(), theory, dp, sim, over);
}

// Step 1 with a model: windows of each text's body (model/text_window.h: after the Project
// Gutenberg header and the front matter), enough of them for the loss's kLossLabels labels, and
// their captures (rank 0 writes them).
constexpr int kLossLabels = 3072;  // seed 000's labels: three 1,024-token windows

struct model_inputs {
  std::vector<std::vector<int>> ids;
  std::vector<std::string> names;
  std::vector<std::string> captures;
  json windows = json::array();  // {text_path, capture, byte_start, byte_end, n_tokens}
  int n = 0;
};

model_inputs capture_model(const study_config& c, const model::weights& w, model::linear_precision lin,
                           const model::tokenizer& tok, const fs::path& dir) {
  model_inputs in;
  const std::vector<std::string> texts = c.texts.empty() ? model::default_texts() : c.texts;
  in.n = c.tokens;
  if (w.cfg.seq_len > 0 && in.n > w.cfg.seq_len) {
    say(c, fmt::format("{} tokens exceed {}'s context of {}: using windows of {}", in.n, w.id, w.cfg.seq_len,
                       w.cfg.seq_len));
    in.n = w.cfg.seq_len;
  }
  const int per_text = model::windows_per_text(kLossLabels, static_cast<int>(texts.size()), in.n);
  if (per_text > 1)
    say(c, fmt::format("{} windows of {} tokens per text ({} labels in all)", per_text, in.n,
                       per_text * in.n * static_cast<int>(texts.size())));
  if (scaleout::here().root()) fs::create_directories(dir);
  attnum::progress bar("capture", static_cast<int64_t>(texts.size()) * per_text, "windows",
                       c.progress && scaleout::here().root(), "one text window through the model, its q, k, v saved");
  for (const auto& t : texts) {
    const std::string bytes = read_file(t);
    const auto windows = model::take_windows(bytes, tok, w.cfg.bos_id, in.n, per_text,
                                             fmt::format("study: text '{}' under {}'s tokenizer", t, w.id));
    const std::string stem = fs::path(t).stem().string();
    for (size_t k = 0; k < windows.size(); ++k) {
      const auto& win = windows[k];
      // one window: the text's own name, as a capture of the whole text is named
      const std::string id = per_text == 1 ? stem : fmt::format("{}.w{}", stem, k + 1);
      const fs::path cap = dir / model::capture_file_name(w.id, id);
      // Under --pipeline-layers every rank takes part in a capture rank 0 still needs.
      const bool needed = c.pipeline_layers
                              ? scaleout::broadcast(scaleout::here().root() && !fs::exists(cap) ? "1" : "0") == "1"
                              : scaleout::here().root() && !fs::exists(cap);
      if (needed) {
        model::capture_source src;
        src.text_id = id;
        // The same provenance `attnum capture` records for a text.
        src.text_hash = model::fnv1a_hex(bytes.data(), bytes.size());
        src.tokenizer = tok.source();
        src.text_path = t;
        src.text_window = model::text_window_json(win);
        const std::span<const int> ids(win.ids.data(), in.n);
        if (!c.pipeline_layers) {
          model::write_capture(w, ids, src, lin, cap.string());
        } else {
          const model::captured_qkv qkv = capture_pipelined(w, ids, lin);
          if (scaleout::here().root()) model::write_capture_file(w, in.n, qkv, src, lin, cap.string());
        }
      }
      in.captures.push_back(cap.string());
      in.names.push_back(per_text == 1 ? t : fmt::format("{} bytes {}..{}", t, win.byte_start, win.byte_end));
      in.ids.push_back(win.ids);
      in.windows.push_back({{"text_path", t},
                            {"capture", cap.string()},
                            {"byte_start", win.byte_start},
                            {"byte_end", win.byte_end},
                            {"n_tokens", in.n}});
      bar.add();
    }
  }
  scaleout::barrier();
  return in;
}

}  // namespace

json run_study(const study_config& c) {
  const auto t_all = clock_type::now();
  const bool root = scaleout::here().root();
  if (c.kernels.empty()) fail("study: --kernels is empty");
  if (c.pipeline_layers && c.model.empty())
    fail("study --pipeline-layers needs --model (it splits a model's layers; the synthetic zoo has none)");
  model::check_linear_precision(c.linear);
  if (root) fs::create_directories(c.out);
  json timings = json::object();

  study::study_options so;
  so.kernels = c.kernels;
  so.knobs = c.knobs;
  so.rotation = c.rotation;
  so.conditions = c.conditions;
  so.predictor_model = c.predictor_model;
  so.predictor.version = c.predictor_version;
  so.command = c.command;
  std::optional<model::weights> w;
  std::unique_ptr<model::tokenizer> tok;
  model_inputs inputs;
  model::linear_precision lp{};  // the model runner's, resolved once from the checkpoint
  if (!c.model.empty()) {
    auto t0 = clock_type::now();
    say(c, fmt::format("loading {}", clip(c.model)));
    // Under --pipeline-layers each rank reads only its layers (scaleout/layers.h).
    w = c.pipeline_layers ? scaleout::load_my_layers(c.model, true) : model::load_model(c.model);
    tok = model::load_tokenizer(c.model, *w, c.tokenizer);
    lp = model::resolve_linear_precision(c.linear, *w);
    {  // Refused up front when the weights and the larger of the capture's and the loss's
       // activations cannot fit (docs/model.md, "Weights in memory").
      const int n = w->cfg.seq_len > 0 ? std::min(c.tokens, w->cfg.seq_len) : c.tokens;
      model::check_memory(
          *w, lp, std::max(model::capture_activation_bytes(w->cfg, n), model::loss_activation_bytes(w->cfg, n, false)),
          fmt::format("study: {} with windows of {} tokens", w->id, n));
    }
    model::prepare_weights(*w, lp);
    say(c, "capturing Q, K, V");
    inputs = capture_model(c, *w, lp, *tok, c.out / "captures");
    so.zoo = false;
    so.captures = inputs.captures;
    timings["capture_s"] = seconds_since(t0);
  } else {
    so.zoo = true;
    so.zoo_opt.n_tok = c.zoo_tokens;
    so.zoo_opt.n_layer_cap = c.zoo_layer_cap;
  }

  // Step 2: the head study.
  auto t0 = clock_type::now();
  std::vector<std::string> names;
  for (const auto& k : c.kernels) names.push_back(k.name);
  say(c, fmt::format("head study: {} x {} on {}", fmt::join(names, ","), fmt::join(c.conditions, ","),
                     so.zoo ? "the synthetic zoo" : c.model));
  run_heads(study::make_plan(so), c.out / "heads", 0, 1, c.progress);
  // Each finished step's folder gets its completion marker, so that it can be read on its own.
  if (root) write_complete_marker(c.out / "heads", c.command + " (heads step)");
  timings["heads_s"] = seconds_since(t0);

  // Step 3: the downstream loss.
  json loss_rows = json::array(), loss_paired = json::array();
  if (w) {
    t0 = clock_type::now();
    model::forward_stats linear_time;  // the linear layers' share of the loss forwards (timings)
    std::vector<loss::loss_row> rows;
    for (const auto& k : c.kernels) {
      loss::loss_params p;
      p.sources = inputs.ids;
      p.source_names = inputs.names;
      p.n_tokens = inputs.n;
      p.kernel = k;
      p.knobs = c.knobs;
      p.rotation = c.rotation;
      p.conditions = c.conditions;
      p.linear = lp;
      p.stats = &linear_time;
      if (c.pipeline_layers) p.forward = scaleout::forward_pipeline_shared;
      loss::validate(p, *w);
      say(c, fmt::format("loss: {} on {} texts x {} labels", k.name, p.sources.size(), p.n_tokens));
      auto r = run_loss(*w, p, w->id, c.out / "loss" / k.name, 0, 1, c.progress, nullptr, c.pipeline_layers);
      if (root) write_complete_marker(c.out / "loss" / k.name, c.command + " (loss step, " + k.name + ")");
      rows.insert(rows.end(), r.begin(), r.end());
      // Paired rows (center - plain, ...) written by run_loss beside the kernel's checkpoints.
      if (root && fs::exists(c.out / "loss" / k.name / "loss_paired.json"))
        for (const auto& j : io::read_json_file(c.out / "loss" / k.name / "loss_paired.json")) loss_paired.push_back(j);
    }
    if (root) loss::write_loss_files((c.out / "loss").string(), rows);
    if (root) {
      write_file_atomic(c.out / "loss" / "loss_paired.json", loss_paired.dump(2) + "\n");
      write_file_atomic(c.out / "loss" / "loss_paired.csv", io::csv_table(loss_paired));
      write_complete_marker(c.out / "loss", c.command + " (loss step)");
    }
    for (const auto& r : rows) loss_rows.push_back(loss::to_json(r));
    timings["loss_s"] = seconds_since(t0);
    timings["loss_linear_s"] = linear_time.linear_seconds;
  }
  if (!root) return json::object();

  // Step 4: P-cast.
  t0 = clock_type::now();
  say(c, "P-cast theory and a short sink simulation");
  run_pcast(c, c.out / "pcast");
  write_complete_marker(c.out / "pcast", c.command + " (pcast step)");
  timings["pcast_s"] = seconds_since(t0);

  // meta.json (provenance: time, command line, version and commit, vector paths, CPU, threads) in
  // the study folder and the step folders that have none of their own (heads/ writes its own).
  {
    const json meta{{"run", run_info(attention::isa::paths_json())}, {"tool_version", std::string(tool_version())}};
    for (const fs::path& d : {c.out, c.out / "pcast", c.out / "loss"})
      if (fs::is_directory(d)) write_file_atomic(d / "meta.json", meta.dump(2) + "\n");
  }
  // Step 5: the report and the summary.
  json summary;
  summary["tool_version"] = std::string(tool_version());
  summary["source"] = c.model.empty() ? json("zoo") : json(c.model);
  if (w) summary["text_windows"] = inputs.windows;
  summary["kernels"] = names;
  summary["knobs"] = c.knobs;
  summary["rotation"] = c.rotation.name();
  summary["conditions"] = c.conditions;
  summary["heads"] = io::read_json_file(c.out / "heads" / "summary.json");
  summary["loss"] = loss_rows;
  summary["loss_paired"] = loss_paired;
  summary["report"] = nullptr;
  if (c.report) {
    t0 = clock_type::now();
    std::vector<fs::path> dirs{c.out / "heads", c.out / "pcast"};
    if (w) dirs.push_back(c.out / "loss");
    const fs::path html = c.out / "report.html";
    report::write_report(dirs, html, c.assets);
    summary["report"] = fs::absolute(html).lexically_normal().string();
    timings["report_s"] = seconds_since(t0);
  }
  timings["total_s"] = seconds_since(t_all);
  summary["timings"] = timings;
  write_file_atomic(c.out / "summary.json", summary.dump(2) + "\n");
  return summary;
}

namespace {
std::string num(const json& j, const char* key, const char* f = "{:.3f}") {
  if (!j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_number_integer()) return std::to_string(j[key].get<long long>());
  return fmt::format(fmt::runtime(f), j[key].get<double>());
}
std::string interval(const json& j, const char* stat) {
  std::string t = study::interval_text(j, stat);
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  return t;
}
// The line under the loss tables: how their intervals were made (the rows' n_text_windows).
std::string loss_intervals_line(const json& rows) {
  if (rows.empty()) return "";
  if (!rows[0].contains("n_text_windows"))  // rows written before the field existed: their method
    return fmt::format("Loss intervals: 95% {}.\n", rows[0].value("ci_method", std::string("(not recorded)")));
  const int g = rows[0].value("n_text_windows", 0);
  if (g < loss::kMinLossWindows)
    return fmt::format("Loss intervals: n/a, {} text window{} (an interval over text windows needs at least {}).\n", g,
                       g == 1 ? "" : "s", loss::kMinLossWindows);
  return fmt::format(
      "Loss intervals: 95% delete-one-window jackknife over the {} text windows with t({}) critical "
      "values (ppl_ratio on the log scale), so they include the variation between texts; n/a: none "
      "(loss.json's *_ci_reason says why).\n",
      g, g - 1);
}
}  // namespace

std::string summary_table(const json& s) {
  std::string out;
  out += fmt::format(
      "Head study ({}): a head is harmed when its mean log1p(rel_err) under the "
      "transform exceeds plain's by more than its noise floor\n",
      s.value("source", json("")).dump());
  out += fmt::format("{:<14} {:<14} {:>6} {:>7} {:>14} {:>5} {:>6} {:>15} {:>6} {:>6} {:>8} {:>15}\n", "kernel",
                     "transform", "heads", "harmed", "harmed (sign)", "null", "AUC", "95% CI", "prec", "recall",
                     "spearman", "95% CI");
  for (const auto& r : s.at("heads"))
    out += fmt::format("{:<14} {:<14} {:>6} {:>7} {:>14} {:>5} {:>6} {:>15} {:>6} {:>6} {:>8} {:>15}\n",
                       r.value("kernel", ""), r.value("transform", ""), num(r, "n_heads"), num(r, "n_label_harmed"),
                       num(r, "n_harmed"), num(r, "n_null"), num(r, "auc"), interval(r, "auc"),
                       num(r, "precision", "{:.2f}"), num(r, "recall", "{:.2f}"), num(r, "spearman"),
                       interval(r, "spearman"));
  out += study::summary_notes(s.at("heads"));
  if (!s.at("loss").empty()) {
    out += "\nDownstream loss: exp(CE_variant - CE_ref) against emulated native BF16 attention\n";
    out += fmt::format("{:<14} {:<14} {:>8} {:>10} {:>21} {:>10} {:>7}\n", "kernel", "condition", "labels", "ppl_ratio",
                       "95% CI", "kl_mean", "top1");
    for (const auto& r : s.at("loss"))
      out += fmt::format(
          "{:<14} {:<14} {:>8} {:>10} {:>21} {:>10} {:>7}\n", r.value("kernel", ""), r.value("condition", ""),
          num(r, "n_labels"), num(r, "ppl_ratio", "{:.4f}"),
          !r["ppl_ratio_lo"].is_number()
              ? std::string("n/a")
              : fmt::format("[{:.4f},{:.4f}]", r["ppl_ratio_lo"].get<double>(), r["ppl_ratio_hi"].get<double>()),
          num(r, "kl_mean", "{:.2e}"), num(r, "top1_agreement", "{:.4f}"));
    if (s.contains("loss_paired") && !s["loss_paired"].empty()) {
      out += "Paired on the same labels (a - b): is the difference between conditions real?\n";
      out +=
          fmt::format("{:<14} {:<28} {:>9} {:>21} {:>10} {:>8}\n", "kernel", "a - b", "dCE", "95% CI", "dKL", "dtop1");
      for (const auto& r : s["loss_paired"])
        out += fmt::format(
            "{:<14} {:<28} {:>9} {:>21} {:>10} {:>8}\n", r.value("kernel", ""),
            r.value("condition_a", "") + " - " + r.value("condition_b", ""), num(r, "delta_ce", "{:+.4f}"),
            !r["delta_ce_lo"].is_number()
                ? std::string("n/a")
                : fmt::format("[{:+.4f},{:+.4f}]", r["delta_ce_lo"].get<double>(), r["delta_ce_hi"].get<double>()),
            num(r, "delta_kl", "{:+.2e}"), num(r, "delta_top1", "{:+.4f}"));
    }
    out += loss_intervals_line(s.at("loss"));
  }
  if (s.contains("report") && !s["report"].is_null())
    out += fmt::format("\nReport: {}\n", s["report"].get<std::string>());
  return out;
}

}  // namespace attnum::pipeline
