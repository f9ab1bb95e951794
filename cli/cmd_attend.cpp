// attnum attend: one layer's Q/K/V (.npy or .safetensors; [n_tok, d_head] or [n_head, n_tok, d_head])
// through a kernel; prints rel_err per head against the fp64 reference and writes O (--out) in
// the input's layout, by the file's extension.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/attention/condition.h"
#include "attnum/attention/attend.h"
#include "attnum/attention/metrics.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/npy.h"
#include "attnum/io/safetensors.h"
#include "attnum/study/rotation_spec.h"
#include "cli/command.h"
#include "cli/kernel_option.h"
#include "cli/output_option.h"

namespace {

using attnum::fail;

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

struct loaded {
  size_t rank = 0;  // of the file's array (2 or 3)
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// .npy: the array; .safetensors: the only tensor, or the one named `name` (q, k, v);
// FILE.safetensors:TENSOR: that tensor (e.g. a capture's layers.1.q).
loaded load(const std::string& arg, const std::string& name) {
  loaded l;
  const auto [path, tensor] = attnum::io::split_tensor_path(arg);
  if (ends_with(path, ".npy")) {
    auto a = attnum::io::read_npy(path);
    l.shape = a.shape, l.data = std::move(a.data);
  } else if (ends_with(path, ".safetensors")) {
    attnum::io::safetensors_file f(path);
    const attnum::io::tensor_view* t = tensor.empty() ? f.find(name) : &f.at(tensor);
    if (!t && f.tensors().size() == 1) t = &f.tensors().begin()->second;
    if (!t)
      fail("{}: expected a single tensor or one named '{}' (or name one: {}:TENSOR)", path, attnum::clip(name), path);
    l.shape = t->shape, l.data = t->to_float();
  } else {
    fail("{}: expected a .npy or .safetensors file (or FILE.safetensors:TENSOR)", arg);
  }
  l.rank = l.shape.size();
  if (l.shape.size() == 2) l.shape.insert(l.shape.begin(), 1);
  if (l.shape.size() != 3)
    fail("{}: expected shape [n_tok, d_head] or [n_head, n_tok, d_head], got {} dims", path, l.shape.size());
  static const char* const kDims[] = {"n_head", "n_tok", "d_head"};
  for (int i = 0; i < 3; ++i)  // every count is an int: 1 <= n < 2^31
    if (l.shape[i] < 1 || l.shape[i] > INT32_MAX)
      fail("{}: {} = {}: expected 1 <= {} < 2^31", path, kDims[i], l.shape[i], kDims[i]);
  return l;
}

struct opts {
  std::string q, k, v, condition = "plain", out, rotation;
  attnum::cli::kernel_flags kernel;
  std::string seed;  // legacy --seed N: --rotation random-hadamard:N
  bool no_causal = false, stages = false;
  attnum::cli::output_flags output;
  bool causal_center = false;
};

void run(const opts& o) {
  using namespace attnum::attention;
  if (o.kernel.kernels.empty() && o.kernel.knobs.empty())
    fail("attend: give --kernel PRESET or --knob NAME=VALUE flags");
  attnum::cli::kernel_flags kf = o.kernel;
  if (kf.kernels.empty()) kf.kernels = "generic";
  const auto specs = attnum::cli::resolve_kernels(kf);
  if (specs.size() != 1) fail("attend: --kernel takes one preset here, got {}", attnum::clip(kf.kernels));
  const kernel_spec& spec = specs.front();
  const condition cond = parse_condition(o.condition);
  if (!o.seed.empty() && o.rotation != attnum::transforms::rotation().name())
    fail("attend: give --rotation or the legacy --seed, not both");
  const transform_options topt{attnum::study::parse_rotation(o.seed.empty() ? o.rotation : "random-hadamard:" + o.seed),
                               o.causal_center};
  // Every argument is checked before anything is written; a failed run leaves --out as it was.
  if (!o.out.empty() && !ends_with(o.out, ".npy") && !ends_with(o.out, ".safetensors"))
    fail("--out {}: expected a .npy or .safetensors file name", o.out);
  attnum::require_out_outside_inputs(o.out, {o.q, o.k, o.v});
  attnum::output_guard guard(o.out);
  const auto q = load(o.q, "q"), k = load(o.k, "k"), v = load(o.v, "v");
  if (k.shape != v.shape) fail("attend: --k {} and --v {} shapes differ", o.k, o.v);
  if (q.shape[2] != k.shape[2]) fail("attend: d_head of --q ({}) and --k ({}) differ", q.shape[2], k.shape[2]);
  if (q.shape[0] % k.shape[0] != 0)
    fail("attend: --q has {} heads, not a multiple of --k's {} (GQA)", q.shape[0], k.shape[0]);
  const layer_view lv{q.data.data(),   k.data.data(),   v.data.data(),   int(q.shape[0]),
                      int(k.shape[0]), int(q.shape[1]), int(k.shape[1]), int(q.shape[2])};
  // Transformed operands are rounded to transform_dtype; untransformed ones are used as given.
  if (transform_rounds_inputs(spec, lv, cond)) {
    fmt::print(stderr,
               "warning: --q/--k hold values that are not {0}: the transformed operands are rounded to {0} "
               "(transform_dtype) but plain ones are used as given; round the inputs to {0} or pass "
               "--knob transform_dtype=fp32 for a like-for-like comparison with plain\n",
               attnum::formats::info(spec.transform_dtype).name);
  }
  const auto r = attend(spec, lv, cond, !o.no_causal, topt);
  bool nan = false;
  for (const auto& h : r.heads) nan |= h.stats.nan_flagged;
  if (!o.out.empty()) {
    std::vector<int64_t> shape = {q.shape[0], q.shape[1], q.shape[2]};
    if (q.rank == 2) shape.erase(shape.begin());  // same layout as the input
    if (ends_with(o.out, ".npy"))
      attnum::io::write_npy(o.out, r.o.data(), shape);
    else if (ends_with(o.out, ".safetensors"))
      attnum::io::write_safetensors(o.out, {{"o", shape, r.o.data(), attnum::io::st_dtype::F32}},
                                    {{"kernel", spec.name},
                                     {"condition", std::string(condition_name(cond))},
                                     {"transform_dtype", std::string(attnum::formats::info(spec.transform_dtype).name)},
                                     {"rotation", topt.rotation.name()}});
    else
      fail("--out {}: expected a .npy or .safetensors file name", o.out);
  }
  guard.commit();
  // Scores too large for the kernel's fp32 softmax: say what the kernel's arithmetic gives.
  if (const std::string big = large_score_warning(spec, r); !big.empty())
    fmt::print(stderr, "warning: {}\n", big);
  else if (nan)
    fmt::print(stderr,
               "warning: NaN in the output where the real kernel produces it (nan_flagged; e.g. an all-zero V channel "
               "without eps)\n");
  std::vector<std::vector<stage_error>> stages;
  if (o.stages)
    for (int h = 0; h < lv.n_head; ++h) stages.push_back(stage_attribution(spec, lv, h, cond, !o.no_causal, topt));
  if (o.output.format() != attnum::io::output_format::table) {
    nlohmann::json rows = nlohmann::json::array();
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
    for (const auto& h : r.heads)
      rows.push_back({{"head", h.head},
                      {"kv_head", h.kv_head},
                      {"kernel", spec.name},
                      {"condition", std::string(condition_name(cond))},
                      {"knobs", o.kernel.knobs},
                      {"transform_dtype", attnum::formats::info(spec.transform_dtype).name},
                      {"rotation", topt.rotation.name()},
                      {"rel_err", num(h.rel_err)},
                      {"log_err", num(h.log_err)},
                      {"cosine", num(h.cosine)},
                      {"max_row_err", num(h.max_row_err)},
                      {"max_abs_err", num(h.max_abs_err)},
                      {"exp2_arg_max", num(h.exp2_arg_max)},
                      {"p_count", h.stats.p_count},
                      {"p_underflow", h.stats.p_underflow},
                      {"p_saturated", h.stats.p_saturated},
                      {"nan_flagged", h.stats.nan_flagged}});
    for (size_t h = 0; h < stages.size(); ++h)
      for (const auto& st : stages[h]) rows[h]["stage_rel_err"][st.stage] = num(st.rel_err);
    attnum::cli::print_output(o.output, rows);
    return;
  }
  fmt::print("kernel {} condition {} {} transform_dtype {} rotation {}\n", spec.name, condition_name(cond),
             o.no_causal ? "non-causal" : "causal", attnum::formats::info(spec.transform_dtype).name,
             topt.rotation.name());
  fmt::print("{:>5} {:>7} {:>12} {:>12} {:>10} {:>12}\n", "head", "kv_head", "rel_err", "log_err", "cosine",
             "p_underflow");
  for (const auto& h : r.heads)
    fmt::print("{:>5} {:>7} {:>12.4e} {:>12.4e} {:>10.6f} {:>12}{}\n", h.head, h.kv_head, h.rel_err, h.log_err,
               h.cosine, h.stats.p_underflow, h.stats.nan_flagged ? "  NaN flagged" : "");
  for (size_t h = 0; h < stages.size(); ++h) {
    fmt::print("head {} stage rel_err:", h);
    for (const auto& st : stages[h]) fmt::print("  {} {:.3e}", st.stage, st.rel_err);
    fmt::print("\n");
  }
}

void setup(CLI::App& app) {
  auto o = std::make_shared<opts>();
  app.add_option("--q", o->q, "Q (.npy or .safetensors)")->required();
  app.add_option("--k", o->k, "K (.npy or .safetensors)")->required();
  app.add_option("--v", o->v, "V (.npy or .safetensors)")->required();
  attnum::cli::add_kernel_options(app, o->kernel, "--kernel", "Kernel preset (attnum kernels; generic if only --knob)");
  app.add_option("--condition", o->condition, attnum::attention::condition_list(", "))->capture_default_str();
  attnum::cli::add_rotation_option(app, o->rotation);
  app.add_option("--seed", o->seed, "Rotation seed (legacy: --rotation random-hadamard:SEED)");
  app.add_flag("--causal-center", o->causal_center, "Center keys by the causal prefix mean");
  app.add_flag("--no-causal", o->no_causal, "Non-causal attention");
  app.add_option("--out", o->out, "Write O (.npy or .safetensors)");
  attnum::cli::add_output_options(app, o->output, "Print JSON rows");
  app.add_flag("--stages", o->stages, "Also each quantization point alone (stage attribution)");
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("attend", "Run one layer's Q/K/V through a kernel; rel_err per head vs fp64", setup);
