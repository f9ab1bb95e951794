// attnum bench study: wall time of the head study (672 zoo heads x 3 texts x 4 conditions, fa3,
// 1024 tokens, predictor included) on the threads given by --threads.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "attnum/core/parallel.h"
#include "attnum/study/head_study.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {

struct bench_args {
  attnum::cli::output_flags output;
  std::string kernel = "fa3";
  int n_tok = 1024, layers = 0, texts = 3;
};

void setup(CLI::App& app) {
  auto a = std::make_shared<bench_args>();
  attnum::cli::add_output_options(app, a->output, "Print {heads, seconds, heads_per_s, ...} as JSON");
  app.add_option("--kernel", a->kernel, "Kernel")->capture_default_str();
  app.add_option("--n-tok", a->n_tok, "Tokens per head")->capture_default_str();
  app.add_option("--layers", a->layers, "Keep the first N layers of each zoo model (0 = all)")->capture_default_str();
  app.add_option("--texts", a->texts, "Texts per head")->capture_default_str();
  app.callback([a] {
    using namespace attnum;
    study::study_options o;
    o.zoo_opt.n_tok = a->n_tok;
    o.zoo_opt.n_layer_cap = a->layers;
    o.n_texts = a->texts;
    o.kernels = {attention::resolve_kernel(a->kernel)};
    o.command = "attnum bench study";
    const study::plan p = study::make_plan(o);
    int heads = 0;
    for (const auto& m : study::zoo_models(o.zoo_opt)) heads += m.n_layer * m.n_head;
    const auto dir =
        std::filesystem::temp_directory_path() / fmt::format("attnum-bench-study-{}", static_cast<long>(::getpid()));
    std::filesystem::remove_all(dir);
    study::run_controls ctl;
    const auto format = a->output.format();
    ctl.progress = format == attnum::io::output_format::table;
    const auto t0 = std::chrono::steady_clock::now();
    study::run_study(p, dir, ctl);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::filesystem::remove_all(dir);
    const double units = static_cast<double>(p.units.size());
    if (format != attnum::io::output_format::table) {
      const std::string doc = fmt::format(
          "[{{\"heads\":{},\"texts\":{},\"conditions\":4,\"kernel\":\"{}\",\"n_tok\":{},"
          "\"threads\":{},\"seconds\":{:.3f},\"heads_per_s\":{:.3f},\"units\":{},"
          "\"units_per_s\":{:.4f}}}]",
          heads, a->texts, a->kernel, a->n_tok, attnum::threads(), s, heads / s, p.units.size(), units / s);
      if (format == attnum::io::output_format::json)
        fmt::print("{}\n", doc);  // the fixed decimals scripts have read
      else
        attnum::cli::print_output(a->output, nlohmann::json::parse(doc));
    } else {
      fmt::print(
          "{} heads x {} texts x 4 conditions ({}, {} tokens) on {} threads: {:.1f} s, "
          "{:.2f} heads/s, {:.3f} units/s\n",
          heads, a->texts, a->kernel, a->n_tok, attnum::threads(), s, heads / s, units / s);
    }
  });
}

}  // namespace
ATTNUM_COMMAND("bench study", "Benchmark: the 672-head zoo study (fa3, 3 texts, 4 conditions)", setup);
