// attnum._core: the thin C++ layer of the Python package (python/attnum/__init__.py is the API
// users see). Every function takes C-contiguous NumPy arrays of the exact dtype it documents
// (the Python layer converts torch tensors and checks shapes first), releases the GIL while it
// computes, and turns attnum::error (bad input) into ValueError with the library's message.
// Written against the public headers only: attention/{attend,kernel_spec,metrics,reference}.h,
// formats/format.h, predict/predictor.h, study/emulate.h (the predictor's operands), pcast/theory.h,
// io/safetensors.h (captures), study/plan.h and pipeline/{distributed,loss_texts,study}.h (heads,
// loss, study: the same entry points and result files as the CLI).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnum/attention/attend.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/metrics.h"
#include "attnum/attention/reference.h"
#include "attnum/core/allocator.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"
#include "attnum/core/progress.h"
#include "attnum/core/version.h"
#include "attnum/formats/format.h"
#include "attnum/io/safetensors.h"
#include "attnum/pcast/theory.h"
#include "attnum/pipeline/capture_texts.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/pipeline/loss_texts.h"
#include "attnum/pipeline/study.h"
#include "attnum/predict/predictor.h"
#include "attnum/study/emulate.h"
#include "attnum/study/plan.h"
#include "attnum/study/rotation_spec.h"

namespace py = pybind11;
using attnum::fail;

namespace {

using f32_array = py::array_t<float, py::array::c_style>;
using f64_array = py::array_t<double, py::array::c_style>;

// OpenMP's thread count is per calling thread: every computing call applies the count that
// set_threads stored (0 = all cores), whichever Python thread it runs on.
std::atomic<int> g_threads{0};

struct compute_scope {
  py::gil_scoped_release release;
  compute_scope() { attnum::set_threads(g_threads.load()); }
};

// Shapes: [n_head, n_tok, d_head] (the Python layer adds the head axis to 2-D arrays).
struct dims {
  int n_head = 0, n_tok = 0, d = 0;
};
dims dims_of(const f32_array& a, const char* name) {
  if (a.ndim() != 3) fail("{}: expected shape [n_head, n_tok, d_head], got {} dims", name, a.ndim());
  return {static_cast<int>(a.shape(0)), static_cast<int>(a.shape(1)), static_cast<int>(a.shape(2))};
}

attnum::attention::layer_view layer_of(const f32_array& q, const f32_array& k, const f32_array& v) {
  const dims dq = dims_of(q, "q"), dk = dims_of(k, "k"), dv = dims_of(v, "v");
  if (dk.n_head != dv.n_head || dk.n_tok != dv.n_tok || dk.d != dv.d)
    fail("k {}x{}x{} and v {}x{}x{}: shapes differ", dk.n_head, dk.n_tok, dk.d, dv.n_head, dv.n_tok, dv.d);
  if (dq.d != dk.d) fail("d_head of q ({}) and k ({}) differ", dq.d, dk.d);
  if (dq.n_head == 0 || dk.n_head == 0 || dq.n_tok == 0 || dk.n_tok == 0 || dq.d == 0)
    fail("q {}x{}x{}, k {}x{}x{}: every dimension must be at least 1", dq.n_head, dq.n_tok, dq.d, dk.n_head, dk.n_tok,
         dk.d);
  if (dq.n_head % dk.n_head != 0) fail("q has {} heads, not a multiple of k's {} (GQA)", dq.n_head, dk.n_head);
  return {q.data(), k.data(), v.data(), dq.n_head, dk.n_head, dq.n_tok, dk.n_tok, dq.d};
}

// The rotation named as the CLI's --rotation ("" = the default random-sign Hadamard), or a
// [d, d] float64 matrix (rows become x·R) when `matrix` is not None.
attnum::transforms::rotation rotation_of(const std::string& spec, const py::object& matrix = py::none()) {
  if (!matrix.is_none()) {
    const auto m = matrix.cast<f64_array>();
    const std::vector<int64_t> shape(m.shape(), m.shape() + m.ndim());
    return attnum::transforms::rotation::from_matrix(std::vector<double>(m.data(), m.data() + m.size()), shape,
                                                     "rotation");
  }
  return spec.empty() ? attnum::transforms::rotation() : attnum::study::parse_rotation(spec);
}

// Knobs as "name=value" assignments on top of the preset (attnum attend --kernel --knob).
attnum::attention::kernel_spec spec_of(const std::string& kernel, const std::vector<std::string>& knobs) {
  using namespace attnum::attention;
  return apply_knobs(preset(kernel.empty() ? "generic" : kernel), knobs);
}

py::dict attend(const f32_array& q, const f32_array& k, const f32_array& v, const std::string& kernel,
                const std::string& condition, const std::vector<std::string>& knobs, bool causal,
                const std::string& rotation, bool causal_center, bool stages, bool measure,
                const py::object& rotation_matrix) {
  using namespace attnum::attention;
  const layer_view lv = layer_of(q, k, v);
  const kernel_spec spec = spec_of(kernel, knobs);
  const attnum::attention::condition cond = parse_condition(condition);
  const transform_options topt{rotation_of(rotation, rotation_matrix), causal_center};
  f32_array o({lv.n_head, lv.n_q, lv.d_head});
  attend_result r;
  std::vector<std::vector<stage_error>> st;
  bool rounds = false;
  {
    compute_scope scope;
    rounds = transform_rounds_inputs(spec, lv, cond);
    r = attend(spec, lv, cond, causal, topt, measure, o.mutable_data());  // straight into the array
    if (stages && measure)
      for (int h = 0; h < lv.n_head; ++h) st.push_back(stage_attribution(spec, lv, h, cond, causal, topt));
  }
  const auto n = static_cast<py::ssize_t>(r.heads.size());
  f64_array rel(n), log_err(n), cos(n), max_row(n), exp2_arg(n);
  py::array_t<int64_t> kv(n), p_count(n), p_under(n), p_sat(n);
  py::array_t<bool> nan(n);
  for (py::ssize_t h = 0; h < n; ++h) {
    const head_report& hr = r.heads[h];
    rel.mutable_at(h) = hr.rel_err, log_err.mutable_at(h) = hr.log_err, cos.mutable_at(h) = hr.cosine;
    max_row.mutable_at(h) = hr.max_row_err, kv.mutable_at(h) = hr.kv_head, exp2_arg.mutable_at(h) = hr.exp2_arg_max;
    p_count.mutable_at(h) = hr.stats.p_count, p_under.mutable_at(h) = hr.stats.p_underflow;
    p_sat.mutable_at(h) = hr.stats.p_saturated, nan.mutable_at(h) = hr.stats.nan_flagged;
  }
  // Stage attribution: one array [n_head] per stage, in the library's stage order.
  py::dict stage_dict;
  for (size_t i = 0; !st.empty() && i < st[0].size(); ++i) {
    f64_array a(n);
    for (py::ssize_t h = 0; h < n; ++h) a.mutable_at(h) = st[h][i].rel_err;
    stage_dict[py::str(st[0][i].stage)] = a;
  }
  py::dict out;
  out["o"] = o;
  out["rel_err"] = rel, out["log_err"] = log_err, out["cosine"] = cos, out["max_row_err"] = max_row;
  out["kv_head"] = kv, out["p_count"] = p_count, out["p_underflow"] = p_under, out["p_saturated"] = p_sat;
  out["nan_flagged"] = nan, out["stages"] = stage_dict;
  out["kernel"] = to_json(spec).dump();
  out["condition"] = std::string(condition_name(cond));
  out["rotation"] = topt.rotation.name();
  out["transform_rounds_inputs"] = rounds;  // the CLI's transform_dtype warning
  out["exp2_arg_max"] = exp2_arg;
  out["large_score_warning"] = large_score_warning(spec, r);  // the CLI's, word for word ("" when none)
  out["transform_dtype"] = std::string(attnum::formats::info(spec.transform_dtype).name);
  return out;
}

// A capture file (or any safetensors file): its metadata and every tensor as float32, in the
// file's order of names.
py::dict load_capture(const std::string& path) {
  const attnum::io::safetensors_file f(path);
  py::dict meta;
  for (const auto& [k, v] : f.metadata()) meta[py::str(k)] = v;
  py::list tensors;
  for (const auto& [name, t] : f.tensors()) {
    const std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    f32_array a(shape);
    {
      py::gil_scoped_release release;
      t.to_float(a.mutable_data());
    }
    tensors.append(py::make_tuple(name, std::string(attnum::io::dtype_name(t.dtype)), a));
  }
  py::dict out;
  out["metadata"] = meta, out["tensors"] = tensors;
  return out;
}

std::vector<attnum::attention::kernel_spec> specs_of(const std::vector<std::string>& kernels,
                                                     const std::vector<std::string>& knobs) {
  std::vector<attnum::attention::kernel_spec> out;
  for (const auto& k : kernels) out.push_back(attnum::attention::resolve_kernel(k, knobs));
  if (out.empty()) fail("kernels: no kernel given");
  return out;
}

// Progress lines on stderr (core/progress.h) unless quiet: drawn even when stderr is not a
// terminal (a notebook's log), as the log form.
struct progress_scope {
  attnum::progress_mode saved = attnum::get_progress_mode();
  explicit progress_scope(bool on) {
    attnum::set_progress_mode(on ? attnum::progress_mode::always : attnum::progress_mode::never);
  }
  ~progress_scope() { attnum::set_progress_mode(saved); }
};

// The head study into `out` (`attnum heads ... --out OUT`): the same plan, checkpoints, result
// files and completion marker; `command` is the CLI line of the same study (meta.json).
void heads(const std::vector<std::string>& captures, bool zoo, const std::vector<std::string>& kernels,
           const std::vector<std::string>& knobs, const std::string& rotation, const py::object& rotation_matrix,
           const std::string& zoo_dtype, const std::vector<std::string>& conditions, int n_tok, int layers, int texts,
           const std::string& predictor_model, const std::string& predictor_version, const std::string& out,
           bool progress) {
  using namespace attnum;
  if (zoo == !captures.empty()) fail("heads: give exactly one of zoo=True or captures=[...]");
  if (texts < 1) fail("heads: texts={}: expected a count >= 1", texts);
  if (n_tok < 1) fail("heads: n_tok={}: expected a count >= 1", n_tok);
  if (layers < 0) fail("heads: layers={}: expected 0 (all) or a count >= 1", layers);
  study::check_conditions(conditions, true, "conditions");
  study::study_options o;
  o.zoo = zoo;
  o.captures = captures;
  o.zoo_opt.n_tok = n_tok;
  o.zoo_opt.n_layer_cap = layers;
  o.n_texts = texts;
  o.kernels = specs_of(kernels, knobs);
  o.knobs = knobs;
  o.rotation = rotation_of(rotation, rotation_matrix);
  o.zoo_opt.dtype = formats::parse_format(zoo_dtype);
  o.conditions = conditions;
  o.predictor_model = predictor_model;
  o.predictor.version = predict::parse_version(predictor_version);
  // The CLI line of the same study (cli/cmd_heads.cpp records it in meta.json the same way).
  std::string knob_flags;
  for (const auto& k : knobs) knob_flags += " --knob " + k;
  o.command = fmt::format("attnum heads {} --kernel {}{} --rotation {}{} --conditions {} --predictor-model {}",
                          zoo ? "--zoo" : "--captures ...", fmt::join(kernels, ","), knob_flags,
                          rotation.empty() ? o.rotation.name() : rotation, zoo ? " --zoo-dtype " + zoo_dtype : "",
                          fmt::join(conditions, ","), predictor_model);
  o.command += predict::command_suffix(o.predictor.version);
  compute_scope scope;  // the plan hashes the capture files: without the GIL too
  const study::plan p = study::make_plan(o);
  const progress_scope ps(progress);
  output_guard guard(out);
  begin_output_dir(out);
  if (!pipeline::run_heads(p, out, 0, 1, progress)) fail("heads: the study did not complete");
  write_complete_marker(out, o.command);
  guard.commit();
}

// `attnum capture`: one capture file per text into `out`; returns their paths.
std::vector<std::string> capture(const std::string& model, const std::vector<std::string>& texts,
                                 const std::vector<std::string>& token_ids, const std::string& tokenizer, int tokens,
                                 const std::string& linear, const std::string& out, bool progress) {
  attnum::pipeline::capture_request r;
  r.model = model, r.texts = texts, r.token_ids = token_ids, r.tokenizer = tokenizer, r.tokens = tokens;
  r.linear = linear, r.out = out, r.progress = progress;
  compute_scope scope;
  const progress_scope ps(progress);
  return attnum::pipeline::capture_texts(r);
}

// `attnum loss ... --out OUT`: the loss of each kernel into `out` (the CLI's files).
void loss(const std::string& model, const std::vector<std::string>& texts, const std::vector<std::string>& token_ids,
          const std::string& tokenizer, int tokens, int windows, const std::vector<std::string>& kernels,
          const std::vector<std::string>& knobs, const std::string& rotation, const py::object& rotation_matrix,
          const std::vector<std::string>& conditions, const std::string& reference, const std::string& linear,
          const std::string& save_reference, const std::string& reference_file, const std::string& out, bool progress) {
  using namespace attnum;
  study::check_conditions(conditions, false, "conditions");
  pipeline::loss_request r;
  r.model = model, r.texts = texts, r.token_ids = token_ids, r.tokenizer = tokenizer;
  r.tokens = tokens, r.windows = windows;
  r.kernels = specs_of(kernels, knobs);
  r.knobs = knobs;
  r.rotation = rotation_of(rotation, rotation_matrix);
  r.conditions = conditions;
  r.reference = reference, r.linear = linear;
  r.save_reference = save_reference, r.reference_file = reference_file;
  r.out = out;
  r.command = fmt::format("attnum loss --kernel {}", fmt::join(kernels, ","));  // as cli/cmd_loss.cpp records it
  r.progress = r.notices = progress;
  compute_scope scope;
  const progress_scope ps(progress);
  (void)pipeline::run_loss_request(r);
}

// The whole study into `out` (`attnum study ... --out OUT`).
void study(const std::string& model, const std::vector<std::string>& texts, const std::string& tokenizer, int tokens,
           const std::vector<std::string>& kernels, const std::vector<std::string>& knobs, const std::string& rotation,
           const py::object& rotation_matrix, const std::vector<std::string>& conditions,
           const std::string& predictor_model, const std::string& predictor_version, const std::string& linear,
           const std::string& out, bool report, bool full_pcast, int zoo_layers, int zoo_tokens, bool progress) {
  using namespace attnum;
  study::check_conditions(conditions, true, "conditions");
  pipeline::study_config c;
  c.model = model, c.texts = texts, c.tokenizer = tokenizer, c.tokens = tokens;
  c.kernels = specs_of(kernels, knobs);
  c.knobs = knobs;
  c.rotation = rotation_of(rotation, rotation_matrix);
  c.conditions = conditions;
  c.predictor_model = predictor_model;
  c.predictor_version = predict::parse_version(predictor_version);
  c.linear = linear;
  c.out = out;
  c.report = report;
  c.quick_pcast = !full_pcast;
  c.zoo_layer_cap = zoo_layers;
  c.zoo_tokens = zoo_tokens;
  c.progress = progress;
  c.command = "attnum study" + predict::command_suffix(c.predictor_version);
  compute_scope scope;
  const progress_scope ps(progress);
  output_guard guard(c.out);
  begin_output_dir(c.out);
  (void)pipeline::run_study(c);
  write_complete_marker(c.out, c.command);
  guard.commit();
}

f64_array reference(const f32_array& q, const f32_array& k, const f32_array& v, bool causal) {
  using namespace attnum::attention;
  const layer_view lv = layer_of(q, k, v);
  f64_array o({lv.n_head, lv.n_q, lv.d_head});
  double* dst = o.mutable_data();
  compute_scope scope;
  const size_t hd = static_cast<size_t>(lv.n_q) * lv.d_head;
  for (int h = 0; h < lv.n_head; ++h) {
    const reference_result r = reference_head(lv, h, causal);
    std::copy(r.o.begin(), r.o.end(), dst + h * hd);
  }
  return o;
}

// The predictor's expected rel_err per head, built as the head study builds it (study/emulate.h:
// the transformed operands and the casts' rounding variances; the causal fp64 reference's P).
f64_array predict(const f32_array& q, const f32_array& k, const f32_array& v, const std::string& kernel,
                  const std::string& condition, const std::string& rotation, const py::object& rotation_matrix) {
  const attnum::attention::layer_view lv = layer_of(q, k, v);
  if (lv.n_q != lv.n_kv) fail("predict: q has {} tokens and k {}; the predictor needs the same count", lv.n_q, lv.n_kv);
  const int cond = attnum::study::parse_condition_index(condition);
  const int n = lv.n_q, d = lv.d_head, group = lv.n_head / lv.n_head_kv;
  const size_t hd = static_cast<size_t>(n) * d;
  f64_array out(lv.n_head);
  double* dst = out.mutable_data();
  compute_scope scope;
  const auto run =
      attnum::study::prepare_run(spec_of(kernel, {}), cond, {lv.q, lv.k, lv.v, lv.n_head, lv.n_head_kv, n, d},
                                 {rotation_of(rotation, rotation_matrix), false});
  for (int h = 0; h < lv.n_head; ++h) {
    const float* qh = lv.q + h * hd;
    const float* kh = lv.k + (h / group) * hd;
    const float* vh = lv.v + (h / group) * hd;
    const attnum::study::reference ref = attnum::study::reference_causal(qh, kh, vh, n, d);
    const attnum::study::head_run r = attnum::study::run_prepared(*run, h);
    attnum::predict::head_inputs in;
    in.n_q = n, in.n_kv = n, in.d = d;
    in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
    in.q = r.q.data(), in.k = r.k.data(), in.v = vh;
    in.var_q = r.var_q.empty() ? nullptr : r.var_q.data();
    in.var_k = r.var_k.empty() ? nullptr : r.var_k.data();
    in.var_v = r.var_v.empty() ? nullptr : r.var_v.data();
    in.p_cast = r.p_cast, in.o_cast = r.o_cast, in.out_fmt = r.out_fmt;
    const attnum::predict::prediction p = attnum::predict::predict_head(in);
    dst[h] = p.o_norm2 > 0 ? std::sqrt(p.total / p.o_norm2) : 0.0;
  }
  return out;
}

// attnum cast: code = encode(f, x / S), decoded = decode(code) * S, in double (cli/cmd_cast.cpp).
py::tuple cast(const f64_array& x, const std::string& to, bool saturate, double scale, const std::string& round) {
  using namespace attnum::formats;
  const format f = parse_format(to);
  if (f == format::fp32) fail("cast: to='fp32' is the identity; expected e4m3fn, e5m2, bf16, fp16 or int8");
  if (!(scale > 0) || !std::isfinite(scale)) fail("cast: scale {}: expected a positive finite number", scale);
  rounding r;
  if (round == "rne" || round == "nearest_even")
    r = rounding::nearest_even;
  else if (round == "away" || round == "half_away")
    r = rounding::half_away;
  else if (round == "rz" || round == "toward_zero")
    r = rounding::toward_zero;
  else
    fail("cast: round '{}': expected rne, away or rz", round);
  const std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
  const bool wide = info(f).bits > 8;
  py::array codes = wide ? py::array(py::dtype::of<uint16_t>(), shape) : py::array(py::dtype::of<uint8_t>(), shape);
  f64_array decoded(shape);
  const py::ssize_t n = x.size();
  const double* src = x.data();
  double* dec = decoded.mutable_data();
  void* cp = codes.mutable_data();
  {
    py::gil_scoped_release release;
    for (py::ssize_t i = 0; i < n; ++i) {
      const uint32_t c = encode(f, src[i] / scale, r, saturate);
      dec[i] = decode(f, c) * scale;
      if (wide)
        static_cast<uint16_t*>(cp)[i] = static_cast<uint16_t>(c);
      else
        static_cast<uint8_t*>(cp)[i] = static_cast<uint8_t>(c);
    }
  }
  return py::make_tuple(codes, decoded);
}

std::string kernels_json() {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& name : attnum::attention::preset_names())
    rows.push_back(attnum::attention::to_json(attnum::attention::preset(name)));
  return rows.dump();
}

std::string knobs_json(const std::string& kernel, const std::vector<std::string>& knobs) {
  return attnum::attention::to_json(spec_of(kernel, knobs)).dump();
}

// pcast theory: one array per field of theory_row, deltas outer.
py::dict pcast_theory(const std::vector<double>& deltas, const std::vector<double>& scales, int n_tok, int block,
                      int k_sink) {
  if (n_tok < 1 || block < 1 || k_sink < 1 || k_sink > n_tok)
    fail("pcast.theory: n_tok {}, block {}, k_sink {}: expected n_tok >= 1, block >= 1, 1 <= k_sink <= n_tok", n_tok,
         block, k_sink);
  std::vector<attnum::pcast::theory_row> rows;
  {
    compute_scope scope;
    rows = attnum::pcast::theory_table(deltas, scales, {n_tok, block, k_sink});
  }
  const auto n = static_cast<py::ssize_t>(rows.size());
  f64_array delta(n), scale(n), dk(n), fraction(n), exact(n), dc(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    delta.mutable_at(i) = rows[i].delta, scale.mutable_at(i) = rows[i].scale, dk.mutable_at(i) = rows[i].delta_k;
    fraction.mutable_at(i) = rows[i].underflow_fraction, exact.mutable_at(i) = rows[i].underflow_exact;
    dc.mutable_at(i) = rows[i].delta_c;
  }
  py::dict out;
  out["delta"] = delta, out["scale"] = scale, out["delta_k"] = dk, out["underflow_fraction"] = fraction;
  out["underflow_exact"] = exact, out["delta_c"] = dc;
  return out;
}

f64_array pcast_dp(const std::vector<double>& scales) {
  for (double s : scales)
    if (!(s > 0) || !std::isfinite(s)) fail("pcast.dp: scale {}: expected a positive finite number", s);
  f64_array out(static_cast<py::ssize_t>(scales.size()));
  for (size_t i = 0; i < scales.size(); ++i) out.mutable_at(i) = attnum::pcast::dp(scales[i]);
  return out;
}

py::dict pcast_reverse_bound(int64_t n_tok, double scale) {
  if (n_tok < 1) fail("pcast.reverse_bound: n_tok {}: expected >= 1", n_tok);
  if (!(scale > 0) || !std::isfinite(scale))
    fail("pcast.reverse_bound: scale {}: expected a positive finite number", scale);
  const attnum::pcast::reverse_bound_row r = attnum::pcast::reverse_bound(n_tok, scale);
  py::dict out;
  out["n_tok"] = r.n_tok, out["scale"] = r.scale, out["flush"] = r.flush, out["max_mean"] = r.max_mean;
  out["sqrt_2_ln_n"] = r.sqrt_2_ln_n, out["max_q999999"] = r.max_q999999, out["p_underflow"] = r.p_underflow;
  out["expected_count"] = r.expected_count, out["paper_m"] = r.paper_m;
  return out;
}

void check_k_sink(int k_sink) {
  if (k_sink < 1) fail("pcast: k_sink {}: expected >= 1", k_sink);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "attnum's C++ core (use the attnum package, not this module)";
  attnum::tune_allocator();  // core/allocator.h: heads allocate megabytes each; keep them off mmap
  // Bad input is attnum::error: a ValueError carrying the library's message (as the CLI prints it).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const attnum::error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("version", [] { return std::string(attnum::tool_version()); });
  m.def("set_threads", [](int n) {
    if (n < 0) fail("set_threads: {}: expected 0 (all cores) or a positive count", n);
    g_threads = n;
    attnum::set_threads(n);
  });
  m.def("threads", [] {
    attnum::set_threads(g_threads.load());
    return attnum::threads();
  });
  m.def("attend", &attend);
  m.def("load_capture", &load_capture);
  m.def("heads", &heads);
  m.def("study", &study);
  m.def("capture", &capture);
  m.def("loss", &loss);
  m.def("conditions", [] {  // condition.h's table: name, centers, rotates
    py::list out;
    for (const auto& c : attnum::attention::kConditions) {
      py::dict d;
      d["name"] = c.name, d["centers"] = c.centers, d["rotates"] = c.rotates;
      out.append(d);
    }
    return out;
  });
  m.def("check_conditions", [](const std::vector<std::string>& c, bool needs_transform) {
    attnum::study::check_conditions(c, needs_transform, "conditions");
  });
  m.def("reference", &reference);
  m.def("predict", &predict);
  m.def("cast", &cast);
  m.def("kernels_json", &kernels_json);
  m.def("knobs_json", &knobs_json);
  m.def("preset_names", &attnum::attention::preset_names);
  m.def("pcast_theory", &pcast_theory);
  m.def("pcast_dp", &pcast_dp);
  m.def("pcast_reverse_bound", &pcast_reverse_bound);
  m.def("pcast_delta_k", [](int k_sink) {
    check_k_sink(k_sink);
    return attnum::pcast::delta_k(k_sink);
  });
  m.def("pcast_delta_c", [](double scale, int k_sink) {
    check_k_sink(k_sink);
    return attnum::pcast::delta_c(scale, k_sink);
  });
  m.def("pcast_underflow_closed_form", [](double delta, double scale, int k_sink) {
    check_k_sink(k_sink);
    return attnum::pcast::underflow_closed_form(delta, scale, k_sink);
  });
  m.def("pcast_underflow_exact", [](double delta, double scale, int n_tok, int block, int k_sink,
                                    const std::string& order) {
    if (n_tok < 1 || block < 1 || k_sink < 1 || k_sink > n_tok)
      fail(
          "pcast.underflow_exact: n_tok {}, block {}, k_sink {}: expected n_tok >= 1, block >= 1, 1 <= k_sink <= n_tok",
          n_tok, block, k_sink);
    const auto o = attnum::pcast::parse_order(order.c_str());
    py::gil_scoped_release release;
    return attnum::pcast::underflow_exact(delta, scale, {n_tok, block, k_sink}, o);
  });
}
