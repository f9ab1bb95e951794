// attnum pcast theory|dp|simulate|overflow|bound: the P-cast analysis of arXiv 2606.06521.
// Parsing and printing only; the numerics are in attnum/pcast/.
#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/progress.h"
#include "attnum/pcast/output.h"
#include "attnum/pcast/simulate.h"
#include "attnum/pcast/theory.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"

namespace {
using attnum::pcast::parse_list;
using json = nlohmann::ordered_json;

// Prints rows in the format asked for (cli/output_option.h), by default as an aligned text table of
// the given columns.
void print_rows(const json& rows, const attnum::cli::output_flags& output, const std::vector<std::string>& columns) {
  if (attnum::cli::print_output(output, rows)) return;
  std::vector<size_t> width;
  for (const auto& c : columns) width.push_back(std::max<size_t>(12, c.size() + 2));
  for (const auto& r : rows)  // strings ("forward S=256") can be wider than their header
    for (size_t i = 0; i < columns.size(); ++i)
      if (r.at(columns[i]).is_string()) width[i] = std::max(width[i], r.at(columns[i]).get<std::string>().size() + 2);
  for (size_t i = 0; i < columns.size(); ++i) fmt::print("{:>{}}", columns[i], width[i]);
  fmt::print("\n");
  for (const auto& r : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      const auto& v = r.at(columns[i]);
      if (v.is_number_float())
        fmt::print("{:>{}.6g}", v.get<double>(), width[i]);
      else if (v.is_null())
        fmt::print("{:>{}}", "nan", width[i]);
      else if (v.is_string())
        fmt::print("{:>{}}", v.get<std::string>(), width[i]);
      else
        fmt::print("{:>{}}", v.dump(), width[i]);
    }
    fmt::print("\n");
  }
}

// The progress line (core/progress.h), made at the first report of each simulation (the total
// is known then; `pcast all` runs two simulations through the same callback).
attnum::pcast::progress_fn progress_bar(const char* what) {
  struct state {
    std::unique_ptr<attnum::progress> bar;
    int64_t total = -1, done = 0;
  };
  auto st = std::make_shared<state>();
  return [what, st](int64_t done, int64_t total) {
    if (!st->bar || total != st->total || done < st->done) {
      st->bar.reset();  // finishes the previous line
      st->bar = std::make_unique<attnum::progress>(what, total, "steps", true,
                                                   "one (token count, seed, delta) of the simulation");
      st->total = total;
    }
    st->done = done;
    st->bar->update(done);
  };
}

std::vector<attnum::pcast::block_order> parse_orders(const std::string& text) {
  std::vector<attnum::pcast::block_order> v;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      v.push_back(attnum::pcast::parse_order(text.substr(start, i - start).c_str()));
      start = i + 1;
    }
  return v;
}

std::vector<int> to_ints(const std::vector<double>& x, const char* what) {
  std::vector<int> v;
  for (double d : x) {
    if (d != std::floor(d) || d < 1 || d > 1e9)
      attnum::fail("pcast: {} {}: expected an integer in [1, 1000000000]", what, d);
    v.push_back(static_cast<int>(d));
  }
  return v;
}

void setup_theory(CLI::App& app) {
  struct opts {
    std::string delta = "0:12:0.5", scale = "1,256,448", out;
    int k_sink = 4, n_tok = 4096, block = 128;
    attnum::cli::output_flags output;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--delta", o->delta, "Sink strengths A:B:STEP (inclusive) or a list")->capture_default_str();
  app.add_option("--scale", o->scale, "Static P scales S, comma-separated")->capture_default_str();
  app.add_option("--k-sink", o->k_sink, "Sink tokens k")->capture_default_str();
  app.add_option("--n-tok", o->n_tok, "Keys per row N (for underflow_exact)")->capture_default_str();
  app.add_option("--block", o->block, "KV block size B (for underflow_exact)")->capture_default_str();
  app.add_option("--out", o->out, "Write DIR/pcast_theory.csv");
  attnum::cli::add_output_options(app, o->output, "Print a JSON array of rows");
  app.callback([o] {
    const attnum::pcast::row_shape shape{o->n_tok, o->block, o->k_sink};
    if (o->k_sink < 1) attnum::fail("pcast theory: --k-sink {}: expected >= 1", o->k_sink);
    const auto rows = attnum::pcast::to_json(
        attnum::pcast::theory_table(parse_list(o->delta, "--delta"), parse_list(o->scale, "--scale"), shape), shape);
    attnum::write_result_dir(o->out, "attnum pcast", [&] { attnum::pcast::write_results(o->out, rows, {}, {}, {}); });
    print_rows(rows, o->output,
               {"delta", "scale", "k_sink", "delta_k", "underflow_fraction", "underflow_exact", "delta_c"});
  });
}

void setup_dp(CLI::App& app) {
  struct opts {
    std::string scale = "1:512:1", out;
    attnum::cli::output_flags output;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--scale", o->scale, "Scales A:B:STEP or a list")->capture_default_str();
  app.add_option("--out", o->out, "Write DIR/pcast_dp.csv");
  attnum::cli::add_output_options(app, o->output, "Print a JSON array of rows");
  app.callback([o] {
    const auto rows = attnum::pcast::to_json(attnum::pcast::dp_table(parse_list(o->scale, "--scale")));
    attnum::write_result_dir(o->out, "attnum pcast", [&] { attnum::pcast::write_results(o->out, {}, rows, {}, {}); });
    print_rows(rows, o->output, {"scale", "dp"});
  });
}

// Options shared by simulate and overflow; defaults come from the library's configs.
struct sim_opts {
  std::string delta, scale, order, threshold, n_tok, source = "inject", out;
  attnum::cli::kernel_flags kernel;                                // empty: the idealized kernel
  int d_head = 128, k_sink = 4, block = 128, rows = 0, seeds = 0;  // rows, seeds 0: not given
  uint64_t seed = 1;
  double sigma = 1.0;
  bool quick = false, no_cast = false;
  attnum::cli::output_flags output;
};

void add_sim_options(CLI::App& app, sim_opts& o) {
  app.add_option("--delta", o.delta, "Sink strengths A:B:STEP or a list");
  app.add_option("--scale", o.scale, "Static P scales S, comma-separated");
  app.add_option("--order", o.order, "Block orders: forward,reverse");
  app.add_option("--threshold", o.threshold, "Lazy-rescale thresholds tau in log2 units (0: exact max)");
  app.add_option("--n-tok", o.n_tok, "Keys per row N (a list sweeps N)");
  app.add_option("--d-head", o.d_head, "Head dimension d")->capture_default_str();
  app.add_option("--k-sink", o.k_sink, "Sink tokens k")->capture_default_str();
  app.add_option("--block", o.block, "KV block size B")->capture_default_str();
  // Counts given explicitly must be >= 1 (0 is not "the default").
  auto count = [](int& dst, const char* flag) {
    return [&dst, flag](int v) {
      if (v < 1) attnum::fail("pcast: {} {}: expected a count >= 1", flag, v);
      dst = v;
    };
  };
  app.add_option_function<int>("--rows", count(o.rows, "--rows"), "Query rows per seed (default 64, quick 8)");
  app.add_option_function<int>("--seeds", count(o.seeds, "--seeds"), "Independent data sets (default 16, quick 3)");
  app.add_option("--seed", o.seed, "Base seed")->capture_default_str();
  app.add_option("--sigma", o.sigma, "Std of the score noise (theory assumes 1)")->capture_default_str();
  app.add_option("--source", o.source, "Scores: inject (drawn) or qk (fp32 Q and K built to give them)")
      ->capture_default_str();
  attnum::cli::add_kernel_options(app, o.kernel, "--kernel",
                                  "Run kernel presets (fa3, xqa-sm90, hpcops, ...; comma-separated) through "
                                  "the engine instead of the idealized kernel; S, order and block are the preset's");
  app.add_flag("--quick", o.quick, "A short run (fewer seeds and rows)");
  app.add_flag("--no-cast", o.no_cast, "Disable the P cast (the kernel then matches fp64)");
  app.add_option("--out", o.out, "Write the CSV into DIR");
  attnum::cli::add_output_options(app, o.output, "Print a JSON array of rows");
}

// The kernels of --kernel/--knob (one config per kernel), or the idealized kernel alone.
std::vector<std::optional<attnum::attention::kernel_spec>> sim_kernels(const sim_opts& o) {
  if (o.kernel.kernels.empty()) {
    if (!o.kernel.knobs.empty()) attnum::fail("pcast: --knob needs --kernel");
    return {std::nullopt};
  }
  std::vector<std::optional<attnum::attention::kernel_spec>> out;
  for (auto& k : attnum::cli::resolve_kernels(o.kernel)) out.emplace_back(std::move(k));
  return out;
}

// Runs `run` once per kernel and concatenates the rows.
template <typename F>
std::vector<attnum::pcast::sim_row> per_kernel(const sim_opts& o, attnum::pcast::sim_config c, F run) {
  std::vector<attnum::pcast::sim_row> rows;
  for (const auto& k : sim_kernels(o)) {
    c.kernel = k;
    auto r = run(c);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return rows;
}

attnum::pcast::sim_config make_config(const sim_opts& o, attnum::pcast::sim_config c) {
  if (!o.delta.empty()) c.deltas = parse_list(o.delta, "--delta");
  if (!o.scale.empty()) c.scales = parse_list(o.scale, "--scale");
  if (!o.order.empty()) c.orders = parse_orders(o.order);
  if (!o.threshold.empty()) c.thresholds = parse_list(o.threshold, "--threshold");
  if (!o.n_tok.empty()) c.n_toks = to_ints(parse_list(o.n_tok, "--n-tok"), "--n-tok");
  if (o.d_head < 1) attnum::fail("pcast: --d-head {}: expected a dimension >= 1", o.d_head);
  if (o.block < 1) attnum::fail("pcast: --block {}: expected a block size >= 1", o.block);
  c.d_head = o.d_head;
  c.k_sink = o.k_sink;
  c.block = o.block;
  if (o.rows) c.q_rows = o.rows;
  if (o.seeds) c.seeds = o.seeds;
  c.seed = o.seed;
  c.sigma = o.sigma;
  if (o.source == "inject")
    c.source = attnum::pcast::score_source::inject;
  else if (o.source == "qk")
    c.source = attnum::pcast::score_source::qk;
  else
    attnum::fail("pcast: --source '{}': expected inject or qk", attnum::clip(o.source));
  c.cast = !o.no_cast;
  c.knobs = o.kernel.knobs;  // recorded in the rows with each kernel's resolved spec
  return c;
}

void setup_simulate(CLI::App& app) {
  auto o = std::make_shared<sim_opts>();
  add_sim_options(app, *o);
  app.callback([o] {
    const auto c = make_config(*o, attnum::pcast::paper_config(o->quick));
    const auto rows = attnum::pcast::to_json(per_kernel(*o, c, [&](const attnum::pcast::sim_config& ck) {
      return attnum::pcast::simulate(ck, progress_bar("pcast simulate"));
    }));
    attnum::write_result_dir(o->out, "attnum pcast", [&] { attnum::pcast::write_results(o->out, {}, {}, rows, {}); });
    print_rows(rows, o->output,
               {"delta", "scale", "order", "underflow_measured", "underflow_predicted", "underflow_exact", "mse",
                "mse_sd", "seeds"});
  });
}

void setup_overflow(CLI::App& app) {
  auto o = std::make_shared<sim_opts>();
  add_sim_options(app, *o);
  app.callback([o] {
    const auto c = make_config(*o, attnum::pcast::overflow_config(o->quick));
    const auto rows = attnum::pcast::overflow_json(per_kernel(*o, c, [&](const attnum::pcast::sim_config& ck) {
      return attnum::pcast::simulate(ck, progress_bar("pcast overflow"));
    }));
    attnum::write_result_dir(o->out, "attnum pcast", [&] { attnum::pcast::write_results(o->out, {}, {}, {}, rows); });
    print_rows(rows, o->output,
               {"delta", "scale", "offset", "threshold", "order", "saturated_fraction", "sink_saturated_fraction",
                "can_saturate", "mse", "mse_sd"});
  });
}

void setup_claims(CLI::App& app) {
  auto o = std::make_shared<sim_opts>();
  add_sim_options(app, *o);
  app.callback([o] {
    auto c = make_config(*o, attnum::pcast::paper_config(o->quick));
    // The claims compare static scales S and block orders of the idealized kernel; a preset
    // fixes both, so --kernel would be ignored: refused instead.
    if (!o->kernel.kernels.empty() || !o->kernel.knobs.empty())
      attnum::fail(
          "pcast claims: --kernel/--knob {}: the claims compare the idealized kernel's static scales and "
          "block orders, which a preset fixes (use pcast simulate --kernel)",
          o->kernel.kernels.empty() ? "(knob)" : attnum::clip(o->kernel.kernels));
    const auto rows = attnum::pcast::to_json(attnum::pcast::paper_claims(c, progress_bar("pcast claims")));
    attnum::write_result_dir(o->out, "attnum pcast claims", [&] {
      attnum::write_file_atomic(o->out + "/pcast_claims.csv", attnum::pcast::to_csv(rows));
    });
    print_rows(rows, o->output,
               {"claim", "n_tok", "delta", "numerator", "denominator", "ratio", "ratio_lo", "ratio_hi", "seeds"});
  });
}

void setup_all(CLI::App& app) {
  struct opts {
    std::string out;
    bool quick = false;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--out", o->out, "Folder for pcast_theory/dp/simulate/overflow.csv")->required();
  app.add_flag("--quick", o->quick, "Short simulation and overflow sweeps");
  app.callback([o] {
    attnum::write_result_dir(o->out, "attnum pcast all",
                             [&] { attnum::pcast::write_all(o->out, o->quick, progress_bar("pcast all")); });
    fmt::print("wrote {}/pcast_theory.csv, pcast_dp.csv, pcast_simulate.csv, pcast_overflow.csv\n", o->out);
  });
}

void setup_bound(CLI::App& app) {
  struct opts {
    std::string n_tok = "1024,4096,16384,65536,262144,1000000", scale = "1,256,448";
    attnum::cli::output_flags output;
  };
  auto o = std::make_shared<opts>();
  app.add_option("--n-tok", o->n_tok, "Sequence lengths N")->capture_default_str();
  app.add_option("--scale", o->scale, "Static P scales S")->capture_default_str();
  attnum::cli::add_output_options(app, o->output, "Print a JSON array of rows");
  app.callback([o] {
    std::vector<attnum::pcast::reverse_bound_row> rows;
    for (double s : parse_list(o->scale, "--scale"))
      for (int n : to_ints(parse_list(o->n_tok, "--n-tok"), "--n-tok"))
        rows.push_back(attnum::pcast::reverse_bound(n, s));
    print_rows(attnum::pcast::to_json(rows), o->output,
               {"n_tok", "scale", "flush", "max_mean", "sqrt_2_ln_n", "max_q999999", "p_underflow", "expected_count",
                "paper_m"});
  });
}
}  // namespace

ATTNUM_COMMAND("pcast", "P-cast analysis (arXiv 2606.06521): theory, dp, simulate, overflow, bound",
               [](CLI::App& app) { app.require_subcommand(1); });
ATTNUM_COMMAND("pcast theory", "Closed forms: delta_k, F(Delta, S), Delta_c, the exact expectation", setup_theory);
ATTNUM_COMMAND("pcast dp", "dp(S): normalized worst-case E4M3 step over P in [0, 1]", setup_dp);
ATTNUM_COMMAND("pcast simulate", "The attention-sink simulation (idealized kernel vs fp64)", setup_simulate);
ATTNUM_COMMAND("pcast overflow", "Stale running max (lazy rescale): S*P saturation at 448", setup_overflow);
ATTNUM_COMMAND("pcast claims", "The paper's MSE claims as paired ratios over seeds (N 1024/4096/16384)", setup_claims);
ATTNUM_COMMAND("pcast all", "Write all four pcast result files (theory, dp, simulate, overflow)", setup_all);
ATTNUM_COMMAND("pcast bound", "Reverse-order underflow bound for N up to 1e6", setup_bound);
