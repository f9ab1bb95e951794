// JSON description of a kernel_spec and knob assignments ("knob=value") for the generic kernel.
// The knob names are the JSON field names; operand knobs are "q.fmt", "k.gran", "v.scale_max", ...
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/suggest.h"
#include "attnum/core/file.h"

namespace attnum::attention {
namespace {

template <typename E>
struct enum_names {
  static const std::vector<std::pair<E, const char*>>& get();
};

#define ATTNUM_ENUM_NAMES(E, ...)                                              \
  template <>                                                                  \
  const std::vector<std::pair<E, const char*>>& enum_names<E>::get() {         \
    static const std::vector<std::pair<E, const char*>> v = {__VA_ARGS__};     \
    return v;                                                                  \
  }

using G = granularity;
ATTNUM_ENUM_NAMES(granularity, {G::none, "none"}, {G::tensor, "tensor"}, {G::head, "head"},
                  {G::kv_group, "kv_group"}, {G::block, "block"}, {G::row_group, "row_group"},
                  {G::token, "token"}, {G::channel, "channel"})
ATTNUM_ENUM_NAMES(scale_scope, {scale_scope::sequence, "sequence"}, {scale_scope::causal, "causal"})
ATTNUM_ENUM_NAMES(score_scaling, {score_scaling::fold, "fold"}, {score_scaling::dequant, "dequant"},
                  {score_scaling::dequant_sm, "dequant_sm"}, {score_scaling::dequant_unit, "dequant_unit"})
ATTNUM_ENUM_NAMES(max_space, {max_space::raw, "raw"}, {max_space::scaled, "scaled"})
ATTNUM_ENUM_NAMES(p_scale_mode, {p_scale_mode::none, "none"}, {p_scale_mode::exponent_offset, "exponent_offset"},
                  {p_scale_mode::multiply, "multiply"})
ATTNUM_ENUM_NAMES(rowsum_order, {rowsum_order::sequential, "sequential"}, {rowsum_order::wgmma, "wgmma"},
                  {rowsum_order::sage_mma, "sage_mma"}, {rowsum_order::triton_block, "triton_block"},
                  {rowsum_order::hpcops_block, "hpcops_block"}, {rowsum_order::xqa_warps, "xqa_warps"})
ATTNUM_ENUM_NAMES(causal_align, {causal_align::bottom_right, "bottom_right"}, {causal_align::top_left, "top_left"})
ATTNUM_ENUM_NAMES(acc_kind, {acc_kind::exact, "exact"}, {acc_kind::fp32, "fp32"}, {acc_kind::truncated, "truncated"},
                  {acc_kind::fp16, "fp16"}, {acc_kind::int32, "int32"})
ATTNUM_ENUM_NAMES(pv_mode, {pv_mode::into_o, "into_o"}, {pv_mode::fresh_per_block, "fresh_per_block"})
ATTNUM_ENUM_NAMES(epilogue_mode, {epilogue_mode::combined, "combined"}, {epilogue_mode::separate, "separate"},
                  {epilogue_mode::div_first, "div_first"}, {epilogue_mode::divide, "divide"})
ATTNUM_ENUM_NAMES(formats::rounding, {formats::rounding::nearest_even, "nearest_even"},
                  {formats::rounding::half_away, "half_away"}, {formats::rounding::toward_zero, "toward_zero"})
ATTNUM_ENUM_NAMES(formats::format, {formats::format::e4m3fn, "e4m3fn"}, {formats::format::e5m2, "e5m2"},
                  {formats::format::bf16, "bf16"}, {formats::format::fp16, "fp16"}, {formats::format::int8, "int8"},
                  {formats::format::fp32, "fp32"})

template <typename E>
const char* name_of(E e) {
  for (const auto& [v, n] : enum_names<E>::get())
    if (v == e) return n;
  return "?";
}

template <typename E>
E parse_enum(std::string_view knob, std::string_view text) {
  std::string known;
  for (const auto& [v, n] : enum_names<E>::get()) {
    if (text == n) return v;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  fail("knob {}: unknown value '{}' (expected one of: {})", knob, clip(text), known);
}

double parse_number(std::string_view knob, std::string_view text) {
  std::string t(text);
  if (t == "-inf") return -INFINITY;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size()) fail("knob {}: '{}' is not a number", knob, clip(text));
  return v;
}

bool parse_bool(std::string_view knob, std::string_view text) {
  if (text == "true" || text == "1" || text == "on") return true;
  if (text == "false" || text == "0" || text == "off") return false;
  fail("knob {}: '{}' is not a boolean (true/false)", knob, clip(text));
}

int parse_int(std::string_view knob, std::string_view text) {
  const double v = parse_number(knob, text);
  // Range first: converting a double outside int's range is undefined behaviour.
  if (!(v >= -2147483648.0 && v <= 2147483647.0) || v != std::trunc(v))
    fail("knob {}: '{}' is not an integer in [-2^31, 2^31)", knob, clip(text));
  return static_cast<int>(v);
}

// Knob ranges (docs/reliability.md): checked once after every assignment, before any kernel
// runs, so a bad value is a clear error and never reaches a worker thread.
constexpr int kMaxBlock = 4096;  // block_m / block_n: the largest CTA tile of any kernel is 256

void check_int(const std::string& knob, int v, int lo, int hi) {
  if (v < lo || v > hi) fail("knob {}: {} out of range: expected {} <= {} <= {}", knob, v, lo, knob, hi);
}

// Scales, their divisors and eps are fp32 numbers in a kernel: a value outside fp32's normal
// range (a subnormal, 1e-320, or above 3.4e38) would turn every scale into 0 or Inf.
void check_positive(const std::string& knob, double v) {
  if (!(std::isfinite(v) && v >= std::numeric_limits<float>::min() && v <= std::numeric_limits<float>::max()))
    fail("knob {}: {} must be a positive number in fp32's normal range [{:g}, {:g}]", knob, v,
         std::numeric_limits<float>::min(), std::numeric_limits<float>::max());
}

void validate_operand(const std::string& p, const operand_spec& o) {
  // 0 means the format's max_finite; anything else must be a usable divisor.
  if (o.scale_max != 0) check_positive(p + ".scale_max", o.scale_max);
  if (!(std::isfinite(o.eps) && o.eps >= 0)) fail("knob {}.eps: {} must be finite and >= 0", p, o.eps);
  if (o.eps != 0) check_positive(p + ".eps", o.eps);
  if (o.gran == granularity::block || o.gran == granularity::row_group)
    check_int(p + ".block_rows", o.block_rows, 1, 1 << 20);
  if (o.group_div < 1 || 8 % o.group_div != 0)
    fail("knob {}.group_div: {} must be 1, 2, 4 or 8 (it divides the 8 row groups)", p, o.group_div);
}

void validate_acc(const std::string& p, const accumulator_spec& a) {
  check_int(p + ".k_step", a.k_step, 1, 1 << 16);
  if (a.kind == acc_kind::truncated) check_int(p + ".mant_bits", a.mant_bits, 1, 52);  // unused otherwise
}

// "ieee" or "table:PATH" (the table read now: a bad file fails before any kernel runs).
sfu_choice parse_unit(std::string_view knob, std::string_view text, formats::sfu_kind kind) {
  sfu_choice u;
  if (text == "ieee") return u;
  if (text.substr(0, 6) != "table:" || text.size() == 6)
    fail("knob {}: unknown value '{}' (expected ieee or table:PATH, a table the probe kit wrote)", knob, clip(text));
  u.name = std::string(text);
  u.table = formats::read_sfu_table(std::string(text.substr(6)), kind);
  return u;
}

void validate_knobs(const kernel_spec& s) {
  validate_operand("q", s.q);
  validate_operand("k", s.k);
  validate_operand("v", s.v);
  validate_acc("qk_acc", s.qk_acc);
  validate_acc("pv_acc", s.pv_acc);
  check_int("block_m", s.block_m, 1, kMaxBlock);
  check_int("block_n", s.block_n, 1, kMaxBlock);
  for (const auto& t : s.tiles) {
    check_int("tiles.block_m", t.block_m, 1, kMaxBlock);
    check_int("tiles.block_n", t.block_n, 1, kMaxBlock);
  }
  check_int("masked_tail_blocks", s.masked_tail_blocks, 0, 1 << 20);
  check_positive("p_scale", s.p_scale);
  if (!std::isfinite(s.p_offset)) fail("knob p_offset: {} must be finite", s.p_offset);
  for (const auto& [knob, u] : {std::pair<const char*, const sfu_choice*>{"exp2_unit", &s.exp2_unit},
                                {"rcp_unit", &s.rcp_unit}, {"div_unit", &s.div_unit}})
    if (u->table && s.arith_fp64)
      fail("knob {}: {} models a float32 instruction; the fp64 path (arith_fp64) takes only ieee", knob, u->name);
  if (std::isnan(s.mask_value) || s.mask_value == INFINITY)
    fail("knob mask_value: {} must be finite or -inf", s.mask_value);
}

nlohmann::json operand_json(const operand_spec& o) {
  return {{"fmt", name_of(o.fmt)},           {"gran", name_of(o.gran)},  {"block_rows", o.block_rows},
          {"group_div", o.group_div},        {"scale_max", o.scale_max}, {"eps", o.eps},
          {"rnd", name_of(o.rnd)},           {"multiply_reciprocal", o.multiply_reciprocal}};
}

nlohmann::json acc_json(const accumulator_spec& a) {
  return {{"kind", name_of(a.kind)}, {"mant_bits", a.mant_bits}, {"k_step", a.k_step}};
}

using setter = std::function<void(kernel_spec&, std::string_view, std::string_view)>;

void add_operand_setters(std::map<std::string, setter>& m, const std::string& p, operand_spec kernel_spec::*op) {
  m[p + ".fmt"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).fmt = parse_enum<formats::format>(k, v); };
  m[p + ".gran"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).gran = parse_enum<granularity>(k, v); };
  m[p + ".block_rows"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).block_rows = parse_int(k, v); };
  m[p + ".group_div"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).group_div = parse_int(k, v); };
  m[p + ".scale_max"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).scale_max = parse_number(k, v); };
  m[p + ".eps"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).eps = parse_number(k, v); };
  m[p + ".rnd"] = [op](kernel_spec& s, auto k, auto v) { (s.*op).rnd = parse_enum<formats::rounding>(k, v); };
  m[p + ".multiply_reciprocal"] = [op](kernel_spec& s, auto k, auto v) {
    (s.*op).multiply_reciprocal = parse_bool(k, v);
  };
}

void add_acc_setters(std::map<std::string, setter>& m, const std::string& p, accumulator_spec kernel_spec::*a) {
  m[p + ".kind"] = [a](kernel_spec& s, auto k, auto v) { (s.*a).kind = parse_enum<acc_kind>(k, v); };
  m[p + ".mant_bits"] = [a](kernel_spec& s, auto k, auto v) { (s.*a).mant_bits = parse_int(k, v); };
  m[p + ".k_step"] = [a](kernel_spec& s, auto k, auto v) { (s.*a).k_step = parse_int(k, v); };
}

const std::map<std::string, setter>& setters() {
  static const std::map<std::string, setter> m = [] {
    std::map<std::string, setter> m;
    add_operand_setters(m, "q", &kernel_spec::q);
    add_operand_setters(m, "k", &kernel_spec::k);
    add_operand_setters(m, "v", &kernel_spec::v);
    add_acc_setters(m, "qk_acc", &kernel_spec::qk_acc);
    add_acc_setters(m, "pv_acc", &kernel_spec::pv_acc);
    m["scope"] = [](kernel_spec& s, auto k, auto v) { s.scope = parse_enum<scale_scope>(k, v); };
    m["smooth_k"] = [](kernel_spec& s, auto k, auto v) { s.smooth_k = parse_bool(k, v); };
    m["smooth_k_round"] = [](kernel_spec& s, auto k, auto v) { s.smooth_k_round = parse_enum<formats::format>(k, v); };
    m["sl2_in_double"] = [](kernel_spec& s, auto k, auto v) { s.sl2_in_double = parse_bool(k, v); };
    m["fold_dq_first"] = [](kernel_spec& s, auto k, auto v) { s.fold_dq_first = parse_bool(k, v); };
    m["scaling"] = [](kernel_spec& s, auto k, auto v) { s.scaling = parse_enum<score_scaling>(k, v); };
    m["max"] = [](kernel_spec& s, auto k, auto v) { s.max = parse_enum<max_space>(k, v); };
    m["mask_value"] = [](kernel_spec& s, auto k, auto v) { s.mask_value = static_cast<float>(parse_number(k, v)); };
    m["mask_on_x"] = [](kernel_spec& s, auto k, auto v) { s.mask_on_x = parse_bool(k, v); };
    m["masked_tail_blocks"] = [](kernel_spec& s, auto k, auto v) { s.masked_tail_blocks = parse_int(k, v); };
    m["p_fmt"] = [](kernel_spec& s, auto k, auto v) { s.p_fmt = parse_enum<formats::format>(k, v); };
    m["p_mode"] = [](kernel_spec& s, auto k, auto v) { s.p_mode = parse_enum<p_scale_mode>(k, v); };
    m["p_scale"] = [](kernel_spec& s, auto k, auto v) { s.p_scale = static_cast<float>(parse_number(k, v)); };
    m["p_offset"] = [](kernel_spec& s, auto k, auto v) { s.p_offset = static_cast<float>(parse_number(k, v)); };
    m["rowsum_from_cast"] = [](kernel_spec& s, auto k, auto v) { s.rowsum_from_cast = parse_bool(k, v); };
    m["rowsum"] = [](kernel_spec& s, auto k, auto v) { s.rowsum = parse_enum<rowsum_order>(k, v); };
    m["block_n"] = [](kernel_spec& s, auto k, auto v) { s.block_n = parse_int(k, v); s.tiles.clear(); };
    m["block_m"] = [](kernel_spec& s, auto k, auto v) { s.block_m = parse_int(k, v); s.tiles.clear(); };
    m["reverse"] = [](kernel_spec& s, auto k, auto v) { s.reverse = parse_bool(k, v); };
    m["kv_shared_scale"] = [](kernel_spec& s, auto k, auto v) { s.kv_shared_scale = parse_bool(k, v); };
    m["rescale_before_pv"] = [](kernel_spec&, auto k, auto) {
      fail("knob {}: not settable: it is recorded only (both pipelines compute O <- O*alpha_b, then O += P_b V_b)", k);
    };
    m["causal_align"] = [](kernel_spec& s, auto k, auto v) { s.causal_diag = parse_enum<causal_align>(k, v); };
    m["alpha_expf"] = [](kernel_spec& s, auto k, auto v) { s.alpha_expf = parse_bool(k, v); };
    m["triton_fp_fusion"] = [](kernel_spec& s, auto k, auto v) { s.triton_fp_fusion = parse_bool(k, v); };
    m["fma_contract"] = [](kernel_spec& s, auto k, auto v) { s.fma_contract = parse_bool(k, v); };
    m["fma_contract_o"] = [](kernel_spec& s, auto k, auto v) { s.fma_contract_o = parse_bool(k, v); };
    m["pv"] = [](kernel_spec& s, auto k, auto v) { s.pv = parse_enum<pv_mode>(k, v); };
    m["epilogue"] = [](kernel_spec& s, auto k, auto v) { s.epilogue = parse_enum<epilogue_mode>(k, v); };
    m["out_fmt"] = [](kernel_spec& s, auto k, auto v) { s.out_fmt = parse_enum<formats::format>(k, v); };
    m["transform_dtype"] = [](kernel_spec& s, auto k, auto v) {
      const auto f = parse_enum<formats::format>(k, v);
      if (f != formats::format::fp32 && f != formats::format::bf16 && f != formats::format::fp16)
        fail("knob {}: '{}' is not a transform dtype (expected one of: bf16, fp16, fp32)", k, clip(v));
      s.transform_dtype = f;
    };
    m["exp2_unit"] = [](kernel_spec& s, auto k, auto v) { s.exp2_unit = parse_unit(k, v, formats::sfu_kind::ex2); };
    m["rcp_unit"] = [](kernel_spec& s, auto k, auto v) { s.rcp_unit = parse_unit(k, v, formats::sfu_kind::rcp); };
    m["div_unit"] = [](kernel_spec& s, auto k, auto v) { s.div_unit = parse_unit(k, v, formats::sfu_kind::div); };
    m["arith_fp64"] = [](kernel_spec& s, auto k, auto v) { s.arith_fp64 = parse_bool(k, v); };
    const std::pair<const char*, bool quant_points::*> points[] = {
        {"q_cast", &quant_points::q_cast}, {"k_cast", &quant_points::k_cast}, {"v_cast", &quant_points::v_cast},
        {"qk_acc_on", &quant_points::qk_acc}, {"p_cast", &quant_points::p_cast},
        {"pv_acc_on", &quant_points::pv_acc}, {"o_cast", &quant_points::o_cast}};
    for (const auto& point : points) {
      const auto p = point.second;  // a copy: clang 14 cannot capture a structured binding
      m[std::string("enabled.") + point.first] = [p](kernel_spec& s, auto k, auto v) { s.enabled.*p = parse_bool(k, v); };
    }
    return m;
  }();
  return m;
}

}  // namespace

nlohmann::json to_json(const kernel_spec& s) {
  nlohmann::json tiles = nlohmann::json::array();
  for (const auto& t : s.tiles)
    tiles.push_back({{"d_max", t.d_max}, {"block_m", t.block_m}, {"block_n", t.block_n},
                     {"block_n_noncausal", t.block_n_noncausal > 0 ? t.block_n_noncausal : t.block_n}});
  const auto& e = s.enabled;
  return {{"name", s.name},
          {"description", s.description},
          {"source_commit", s.source_commit},
          {"q", operand_json(s.q)},
          {"k", operand_json(s.k)},
          {"v", operand_json(s.v)},
          {"scope", name_of(s.scope)},
          {"smooth_k", s.smooth_k},
          {"smooth_k_round", name_of(s.smooth_k_round)},
          {"arith_fp64", s.arith_fp64},
          {"sl2_in_double", s.sl2_in_double},
          {"fold_dq_first", s.fold_dq_first},
          {"scaling", name_of(s.scaling)},
          {"max", name_of(s.max)},
          {"mask_value", std::isinf(s.mask_value) ? nlohmann::json("-inf") : nlohmann::json(s.mask_value)},
          {"mask_on_x", s.mask_on_x},
          {"masked_tail_blocks", s.masked_tail_blocks},
          {"p_fmt", name_of(s.p_fmt)},
          {"p_mode", name_of(s.p_mode)},
          {"p_scale", s.p_scale},
          {"p_offset", s.p_offset},
          {"rowsum_from_cast", s.rowsum_from_cast},
          {"rowsum", name_of(s.rowsum)},
          {"block_n", s.block_n},
          {"block_m", s.block_m},
          {"tiles", tiles},
          {"kv_shared_scale", s.kv_shared_scale},
          {"reverse", s.reverse},
          {"rescale_before_pv", s.rescale_before_pv},
          {"causal_align", name_of(s.causal_diag)},
          {"alpha_expf", s.alpha_expf},
          {"triton_fp_fusion", s.triton_fp_fusion},
          {"fma_contract", s.fma_contract},
          {"fma_contract_o", s.fma_contract_o},
          {"qk_acc", acc_json(s.qk_acc)},
          {"pv_acc", acc_json(s.pv_acc)},
          {"pv", name_of(s.pv)},
          {"epilogue", name_of(s.epilogue)},
          {"out_fmt", name_of(s.out_fmt)},
          {"transform_dtype", name_of(s.transform_dtype)},
          {"exp2_unit", s.exp2_unit.name},
          {"rcp_unit", s.rcp_unit.name},
          {"div_unit", s.div_unit.name},
          {"enabled",
           {{"q_cast", e.q_cast}, {"k_cast", e.k_cast}, {"v_cast", e.v_cast}, {"qk_acc_on", e.qk_acc},
            {"p_cast", e.p_cast}, {"pv_acc_on", e.pv_acc}, {"o_cast", e.o_cast}}}};
}

namespace {

// Why the spec's path ignores `knob` (empty when it is used): setting such a knob is refused.
std::string ignored_reason(const kernel_spec& s, const std::string& knob) {
  if (knob == "p_scale" && s.p_mode != p_scale_mode::multiply)
    return "p_scale is read only with p_mode=multiply (exponent_offset scales P by 2^p_offset; none by 1)";
  if (knob == "p_offset" && s.p_mode != p_scale_mode::exponent_offset)
    return "p_offset is read only with p_mode=exponent_offset";
  if (knob == "fold_dq_first" && s.scaling != score_scaling::fold) return "fold_dq_first is read only with scaling=fold";
  if (knob == "masked_tail_blocks" && s.scaling != score_scaling::fold)
    return "masked_tail_blocks is read only with scaling=fold";
  if (knob == "smooth_k_round" && !s.smooth_k) return "smooth_k_round is read only with smooth_k=true";
  if (knob == "alpha_expf" && s.alpha_expf && s.max != max_space::raw) return "alpha_expf needs max=raw";
  if (knob == "triton_fp_fusion" && s.triton_fp_fusion && s.rowsum != rowsum_order::triton_block)
    return "triton_fp_fusion needs rowsum=triton_block (the block sum it fuses)";
  if (knob == "fma_contract" && s.fma_contract &&
      (s.rowsum == rowsum_order::triton_block || s.rowsum == rowsum_order::xqa_warps))
    return "fma_contract needs rowsum=sequential, wgmma, sage_mma or hpcops_block (the row-sum update it contracts)";
  if (knob == "fma_contract_o" && s.fma_contract_o && s.pv != pv_mode::fresh_per_block)
    return "fma_contract_o needs pv=fresh_per_block (the fresh PV tile it adds onto O*alpha)";
  for (const auto& [p, a] : {std::pair{"qk_acc", &s.qk_acc}, std::pair{"pv_acc", &s.pv_acc}})
    if (knob == std::string(p) + ".mant_bits" && a->kind != acc_kind::truncated)
      return knob + " is read only with " + p + ".kind=truncated";
  for (const auto& [p, o] : {std::pair{"q", &s.q}, std::pair{"k", &s.k}, std::pair{"v", &s.v}}) {
    if (knob == std::string(p) + ".block_rows" && o->gran != granularity::block && o->gran != granularity::row_group)
      return knob + " is read only with " + p + ".gran=block or row_group";
    if (knob == std::string(p) + ".group_div" && o->gran != granularity::row_group)
      return knob + " is read only with " + p + ".gran=row_group";
  }
  return {};
}

}  // namespace

kernel_spec resolve_kernel(std::string_view name, const std::vector<std::string>& knobs) {
  return apply_knobs(name == "fp64" ? exact_spec() : preset(name), knobs);
}

kernel_spec apply_knobs(kernel_spec spec, const std::vector<std::string>& assignments) {
  for (const auto& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos) fail("knob '{}': expected knob=value", clip(a));
    std::string knob = a.substr(0, eq), value = a.substr(eq + 1);
    auto it = setters().find(knob);
    if (it == setters().end()) {
      std::vector<std::string> names;
      for (const auto& [n, _] : setters()) names.push_back(n);
      const std::string hint = did_you_mean(knob, names);
      if (!hint.empty())
        fail("unknown knob '{}': {} (attnum kernels --json lists all {})", clip(knob), hint, names.size());
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      fail("unknown knob '{}' (known: {})", clip(knob), known);
    }
    it->second(spec, knob, value);
  }
  if (!assignments.empty()) validate_knobs(spec);
  for (const auto& a : assignments) {  // a knob the resulting spec's path does not read is refused
    const std::string knob = a.substr(0, a.find('='));
    if (const auto why = ignored_reason(spec, knob); !why.empty())
      fail("knob {}: kernel {} does not use it: {}", knob, spec.name, why);
  }
  return spec;
}

}  // namespace attnum::attention
