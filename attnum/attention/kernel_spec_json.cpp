// JSON description of a kernel_spec and knob assignments ("knob=value"), both driven by the knob
// table (knob_table.h), built here. The knob names are the JSON field names; operand knobs are
// "q.fmt", "k.gran", "v.scale_max", ...
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/knob_table.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/suggest.h"

namespace attnum::attention {
namespace {

template <typename E>
struct enum_names {
  static const std::vector<std::pair<E, const char*>>& get();
};

#define ATTNUM_ENUM_NAMES(E, ...)                                          \
  template <>                                                              \
  const std::vector<std::pair<E, const char*>>& enum_names<E>::get() {     \
    static const std::vector<std::pair<E, const char*>> v = {__VA_ARGS__}; \
    return v;                                                              \
  }

using G = granularity;
ATTNUM_ENUM_NAMES(granularity, {G::none, "none"}, {G::tensor, "tensor"}, {G::head, "head"}, {G::kv_group, "kv_group"},
                  {G::block, "block"}, {G::row_group, "row_group"}, {G::token, "token"}, {G::channel, "channel"})
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

// ---- building the knob table ----

// Where a knob's value lives in a kernel_spec: one of its members, or a member of a member
// (q.fmt, qk_acc.kind, enabled.p_cast). Called on a const spec it gives a const reference.
template <typename T>
struct member {
  T kernel_spec::*m;
  template <typename S>
  auto& operator()(S& s) const {
    return s.*m;
  }
};
template <typename O, typename T>
struct nested {
  O kernel_spec::*o;
  T O::*m;
  template <typename S>
  auto& operator()(S& s) const {
    return (s.*o).*m;
  }
};
template <typename T>
member<T> at(T kernel_spec::*m) {
  return {m};
}
template <typename O, typename T>
nested<O, T> at(O kernel_spec::*o, T O::*m) {
  return {o, m};
}

// The text and JSON forms of the plain value types: booleans, integers, numbers, enums.
template <typename T>
constexpr bool plain_value = std::is_same_v<T, bool> || std::is_same_v<T, int> || std::is_same_v<T, double> ||
                             std::is_same_v<T, float> || std::is_enum_v<T>;

template <typename T>
T parse_value(std::string_view knob, std::string_view text) {
  if constexpr (std::is_same_v<T, bool>)
    return parse_bool(knob, text);
  else if constexpr (std::is_same_v<T, int>)
    return parse_int(knob, text);
  else if constexpr (std::is_same_v<T, double>)
    return parse_number(knob, text);
  else if constexpr (std::is_same_v<T, float>)
    return static_cast<float>(parse_number(knob, text));
  else
    return parse_enum<T>(knob, text);
}

template <typename T>
nlohmann::json print_value(const T& v) {
  if constexpr (std::is_enum_v<T>)
    return name_of(v);
  else
    return v;
}

template <typename T>
std::vector<std::string> choices_of() {
  std::vector<std::string> out;
  if constexpr (std::is_same_v<T, bool>)
    out = {"true", "false"};
  else if constexpr (std::is_enum_v<T>)
    for (const auto& [v, n] : enum_names<T>::get()) out.emplace_back(n);
  return out;
}

// One row under construction: field(NAME, at(...)) gives the plain parse and print of the
// member's type; the calls after it add a custom parse or print, the range check and the
// condition under which the path reads the knob.
template <typename At>
class row {
 public:
  using T = std::remove_cvref_t<decltype(std::declval<At>()(std::declval<kernel_spec&>()))>;

  row(std::string name, At a) : at_(a) {
    k_.name = std::move(name);
    if constexpr (plain_value<T>) {
      k_.choices = choices_of<T>();
      print([](const T& v) { return print_value(v); });
      parse([](std::string_view knob, std::string_view text) { return parse_value<T>(knob, text); });
    }
  }
  row& print(std::function<nlohmann::json(const T&)> f) {
    k_.print = [a = at_, f](const kernel_spec& s) { return f(a(s)); };
    return *this;
  }
  row& parse(std::function<T(std::string_view knob, std::string_view text)> f) {
    k_.parse = [a = at_, f, n = k_.name](kernel_spec& s, std::string_view text) { a(s) = f(n, text); };
    return *this;
  }
  row& choices(std::vector<std::string> c) {
    k_.choices = std::move(c);
    return *this;
  }
  row& check(std::function<void(const std::string& knob, const T& v, const kernel_spec& s)> f) {
    k_.check = [a = at_, f, n = k_.name](const kernel_spec& s) { f(n, a(s), s); };
    return *this;
  }
  // Read only where `reads` holds (`cond` says when, as the refusal and the docs say it).
  row& only_with(std::function<bool(const kernel_spec&)> reads, const std::string& cond) {
    k_.read_when = "only with " + cond;
    k_.unused = [reads, why = k_.name + " is read only with " + cond](const kernel_spec& s) {
      return reads(s) ? std::string() : why;
    };
    return *this;
  }
  // A boolean whose `true` is modelled only where `reads` holds.
  row& true_needs(std::function<bool(const kernel_spec&)> reads, const std::string& cond) {
    static_assert(std::is_same_v<T, bool>);
    k_.read_when = "true needs " + cond;
    k_.unused = [a = at_, reads, why = k_.name + " needs " + cond](const kernel_spec& s) {
      return a(s) && !reads(s) ? why : std::string();
    };
    return *this;
  }
  row& replaces_tiles() {
    k_.replaces_tiles = true;
    return *this;
  }
  operator knob() const {
    knob k = k_;
    if (!k.unused) k.unused = [](const kernel_spec&) { return std::string(); };
    return k;
  }

 private:
  At at_;
  knob k_;
};

template <typename At>
row<At> field(std::string name, At a) {
  return row<At>(std::move(name), a);
}

// The quantizer of operand `p` (q, k or v).
void add_operand(std::vector<knob>& t, const std::string& p, operand_spec kernel_spec::*op) {
  using O = operand_spec;
  auto gran_is = [op](std::initializer_list<granularity> gs) {
    return [op, v = std::vector<granularity>(gs)](const kernel_spec& s) {
      return std::find(v.begin(), v.end(), (s.*op).gran) != v.end();
    };
  };
  // 0 means the format's max_finite; anything else must be a usable divisor.
  t.push_back(
      field(p + ".scale_max", at(op, &O::scale_max)).check([](const std::string& k, double v, const kernel_spec&) {
        if (v != 0) check_positive(k, v);
      }));
  t.push_back(field(p + ".eps", at(op, &O::eps)).check([](const std::string& k, double v, const kernel_spec&) {
    if (!(std::isfinite(v) && v >= 0)) fail("knob {}: {} must be finite and >= 0", k, v);
    if (v != 0) check_positive(k, v);
  }));
  const auto blocked = gran_is({granularity::block, granularity::row_group});
  t.push_back(field(p + ".block_rows", at(op, &O::block_rows))
                  .check([blocked](const std::string& k, int v, const kernel_spec& s) {
                    if (blocked(s)) check_int(k, v, 1, 1 << 20);
                  })
                  .only_with(blocked, p + ".gran=block or row_group"));
  t.push_back(field(p + ".group_div", at(op, &O::group_div))
                  .check([](const std::string& k, int v, const kernel_spec&) {
                    if (v < 1 || 8 % v != 0)
                      fail("knob {}: {} must be 1, 2, 4 or 8 (it divides the 8 row groups)", k, v);
                  })
                  .only_with(gran_is({granularity::row_group}), p + ".gran=row_group"));
  t.push_back(field(p + ".fmt", at(op, &O::fmt)));
  t.push_back(field(p + ".gran", at(op, &O::gran)));
  t.push_back(field(p + ".rnd", at(op, &O::rnd)));
  t.push_back(field(p + ".multiply_reciprocal", at(op, &O::multiply_reciprocal)));
}

// The accumulator model `p` (qk_acc or pv_acc).
void add_accumulator(std::vector<knob>& t, const std::string& p, accumulator_spec kernel_spec::*acc) {
  using A = accumulator_spec;
  const auto truncated = [acc](const kernel_spec& s) { return (s.*acc).kind == acc_kind::truncated; };
  t.push_back(field(p + ".k_step", at(acc, &A::k_step)).check([](const std::string& k, int v, const kernel_spec&) {
    check_int(k, v, 1, 1 << 16);
  }));
  t.push_back(field(p + ".mant_bits", at(acc, &A::mant_bits))
                  .check([truncated](const std::string& k, int v, const kernel_spec& s) {
                    if (truncated(s)) check_int(k, v, 1, 52);  // unused otherwise
                  })
                  .only_with(truncated, p + ".kind=truncated"));
  t.push_back(field(p + ".kind", at(acc, &A::kind)));
}

// The approximate-instruction unit `name`: "ieee" or "table:PATH" (read when set).
void add_unit(std::vector<knob>& t, const std::string& name, sfu_choice kernel_spec::*u, formats::sfu_kind kind) {
  t.push_back(field(name, at(u))
                  .parse([kind](std::string_view k, std::string_view v) { return parse_unit(k, v, kind); })
                  .print([](const sfu_choice& c) { return nlohmann::json(c.name); })
                  .check([](const std::string& k, const sfu_choice& c, const kernel_spec& s) {
                    if (c.table && s.arith_fp64)
                      fail("knob {}: {} models a float32 instruction; the fp64 path (arith_fp64) takes only ieee", k,
                           c.name);
                  }));
}

std::vector<knob> build_knob_table() {
  using K = kernel_spec;
  std::vector<knob> t;
  // Rows with a range check first, in the order the checks have always run.
  add_operand(t, "q", &K::q);
  add_operand(t, "k", &K::k);
  add_operand(t, "v", &K::v);
  add_accumulator(t, "qk_acc", &K::qk_acc);
  add_accumulator(t, "pv_acc", &K::pv_acc);
  const auto block = [](const std::string& k, int v, const K&) { check_int(k, v, 1, kMaxBlock); };
  t.push_back(field("block_m", at(&K::block_m)).check(block).replaces_tiles());
  t.push_back(field("block_n", at(&K::block_n)).check(block).replaces_tiles());
  const auto fold = [](const K& s) { return s.scaling == score_scaling::fold; };
  t.push_back(field("masked_tail_blocks", at(&K::masked_tail_blocks))
                  .check([](const std::string& k, int v, const K&) { check_int(k, v, 0, 1 << 20); })
                  .only_with(fold, "scaling=fold"));
  t.push_back(field("p_scale", at(&K::p_scale))
                  .check([](const std::string& k, float v, const K&) { check_positive(k, v); })
                  .only_with([](const K& s) { return s.p_mode == p_scale_mode::multiply; },
                             "p_mode=multiply (exponent_offset scales P by 2^p_offset; none by 1)"));
  t.push_back(
      field("p_offset", at(&K::p_offset))
          .check([](const std::string& k, float v, const K&) {
            if (!std::isfinite(v)) fail("knob {}: {} must be finite", k, v);
          })
          .only_with([](const K& s) { return s.p_mode == p_scale_mode::exponent_offset; }, "p_mode=exponent_offset"));
  add_unit(t, "exp2_unit", &K::exp2_unit, formats::sfu_kind::ex2);
  add_unit(t, "rcp_unit", &K::rcp_unit, formats::sfu_kind::rcp);
  add_unit(t, "div_unit", &K::div_unit, formats::sfu_kind::div);
  t.push_back(field("mask_value", at(&K::mask_value))
                  .print([](float v) { return std::isinf(v) ? nlohmann::json("-inf") : nlohmann::json(v); })
                  .check([](const std::string& k, float v, const K&) {
                    if (std::isnan(v) || v == INFINITY) fail("knob {}: {} must be finite or -inf", k, v);
                  }));
  // Every other value the parse accepts is in range.
  t.push_back(field("scope", at(&K::scope)));
  t.push_back(field("smooth_k", at(&K::smooth_k)));
  t.push_back(field("smooth_k_round", at(&K::smooth_k_round))
                  .only_with([](const K& s) { return s.smooth_k; }, "smooth_k=true"));
  t.push_back(field("arith_fp64", at(&K::arith_fp64)));
  t.push_back(field("sl2_in_double", at(&K::sl2_in_double)));
  t.push_back(field("fold_dq_first", at(&K::fold_dq_first)).only_with(fold, "scaling=fold"));
  t.push_back(field("scaling", at(&K::scaling)));
  t.push_back(field("max", at(&K::max)));
  t.push_back(field("mask_on_x", at(&K::mask_on_x)));
  t.push_back(field("p_fmt", at(&K::p_fmt)));
  t.push_back(field("p_mode", at(&K::p_mode)));
  t.push_back(field("rowsum_from_cast", at(&K::rowsum_from_cast)));
  t.push_back(field("rowsum", at(&K::rowsum)));
  t.push_back(field("kv_shared_scale", at(&K::kv_shared_scale)));
  t.push_back(field("reverse", at(&K::reverse)));
  t.push_back(field("causal_align", at(&K::causal_diag)));
  t.push_back(field("alpha_expf", at(&K::alpha_expf))
                  .true_needs([](const K& s) { return s.max == max_space::raw; }, "max=raw"));
  t.push_back(field("triton_fp_fusion", at(&K::triton_fp_fusion))
                  .true_needs([](const K& s) { return s.rowsum == rowsum_order::triton_block; },
                              "rowsum=triton_block (the block sum it fuses)"));
  t.push_back(
      field("fma_contract", at(&K::fma_contract))
          .true_needs(
              [](const K& s) { return s.rowsum != rowsum_order::triton_block && s.rowsum != rowsum_order::xqa_warps; },
              "rowsum=sequential, wgmma, sage_mma or hpcops_block (the row-sum update it contracts)"));
  t.push_back(field("fma_contract_o", at(&K::fma_contract_o))
                  .true_needs([](const K& s) { return s.pv == pv_mode::fresh_per_block; },
                              "pv=fresh_per_block (the fresh PV tile it adds onto O*alpha)"));
  t.push_back(field("pv", at(&K::pv)));
  t.push_back(field("epilogue", at(&K::epilogue)));
  t.push_back(field("out_fmt", at(&K::out_fmt)));
  t.push_back(field("transform_dtype", at(&K::transform_dtype))
                  .choices({"bf16", "fp16", "fp32"})
                  .parse([](std::string_view k, std::string_view v) {
                    const auto f = parse_enum<formats::format>(k, v);
                    if (f != formats::format::fp32 && f != formats::format::bf16 && f != formats::format::fp16)
                      fail("knob {}: '{}' is not a transform dtype (expected one of: bf16, fp16, fp32)", k, clip(v));
                    return f;
                  }));
  using P = quant_points;
  t.push_back(field("enabled.q_cast", at(&K::enabled, &P::q_cast)));
  t.push_back(field("enabled.k_cast", at(&K::enabled, &P::k_cast)));
  t.push_back(field("enabled.v_cast", at(&K::enabled, &P::v_cast)));
  t.push_back(field("enabled.qk_acc_on", at(&K::enabled, &P::qk_acc)));
  t.push_back(field("enabled.p_cast", at(&K::enabled, &P::p_cast)));
  t.push_back(field("enabled.pv_acc_on", at(&K::enabled, &P::pv_acc)));
  t.push_back(field("enabled.o_cast", at(&K::enabled, &P::o_cast)));
  return t;
}

constexpr const char* kRescaleBeforePv = "rescale_before_pv";

// Range checks (docs/reliability.md), once after every assignment, before any kernel runs, so a
// bad value is a clear error and never reaches a worker thread.
void validate_knobs(const kernel_spec& s) {
  for (const knob& k : knob_table())
    if (k.check) k.check(s);
  for (const auto& t : s.tiles) {  // not settable (block_m / block_n replace them): checked all the same
    check_int("tiles.block_m", t.block_m, 1, kMaxBlock);
    check_int("tiles.block_n", t.block_n, 1, kMaxBlock);
  }
}

// The names `--knob` knows: the table's, and rescale_before_pv (refused), sorted.
const std::vector<std::string>& knob_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{kRescaleBeforePv};
    for (const knob& k : knob_table()) v.push_back(k.name);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

}  // namespace

const std::vector<knob>& knob_table() {
  static const std::vector<knob> t = build_knob_table();
  return t;
}

const knob* find_knob(std::string_view name) {
  for (const knob& k : knob_table())
    if (k.name == name) return &k;
  return nullptr;
}

const std::vector<non_knob_field>& non_knob_fields() {
  static const std::vector<non_knob_field> v = {
      {"name", "the preset's name (--kernel)"},
      {"description", "the preset's description"},
      {"source_commit", "the upstream repo@commit the preset follows"},
      {"tiles", "the preset's tile per head dim; not settable: setting block_m or block_n drops them"},
      {kRescaleBeforePv, "recorded only: both pipelines give O <- O*alpha_b, then O += P_b V_b; setting it is refused"},
  };
  return v;
}

nlohmann::json to_json(const kernel_spec& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const knob& k : knob_table()) {
    const auto dot = k.name.find('.');
    if (dot == std::string::npos)
      j[k.name] = k.print(s);
    else
      j[k.name.substr(0, dot)][k.name.substr(dot + 1)] = k.print(s);
  }
  // The fields that are not knobs (non_knob_fields).
  j["name"] = s.name;
  j["description"] = s.description;
  j["source_commit"] = s.source_commit;
  nlohmann::json tiles = nlohmann::json::array();
  for (const auto& t : s.tiles)
    tiles.push_back({{"d_max", t.d_max},
                     {"block_m", t.block_m},
                     {"block_n", t.block_n},
                     {"block_n_noncausal", t.block_n_noncausal > 0 ? t.block_n_noncausal : t.block_n}});
  j["tiles"] = tiles;
  j[kRescaleBeforePv] = s.rescale_before_pv;
  return j;
}

kernel_spec resolve_kernel(std::string_view name, const std::vector<std::string>& knobs) {
  return apply_knobs(name == "fp64" ? exact_spec() : preset(name), knobs);
}

kernel_spec apply_knobs(kernel_spec spec, const std::vector<std::string>& assignments) {
  for (const auto& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos) fail("knob '{}': expected knob=value", clip(a));
    std::string name = a.substr(0, eq), value = a.substr(eq + 1);
    if (name == kRescaleBeforePv)
      fail("knob {}: not settable: it is recorded only (both pipelines compute O <- O*alpha_b, then O += P_b V_b)",
           name);
    const knob* k = find_knob(name);
    if (!k) {
      const auto& names = knob_names();
      const std::string hint = did_you_mean(name, names);
      if (!hint.empty())
        fail("unknown knob '{}': {} (attnum kernels --json lists all {})", clip(name), hint, names.size());
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      fail("unknown knob '{}' (known: {})", clip(name), known);
    }
    k->parse(spec, value);
    if (k->replaces_tiles) spec.tiles.clear();
  }
  if (!assignments.empty()) validate_knobs(spec);
  for (const auto& a : assignments) {  // a knob the resulting spec's path does not read is refused
    const std::string name = a.substr(0, a.find('='));
    if (const auto why = find_knob(name)->unused(spec); !why.empty())
      fail("knob {}: kernel {} does not use it: {}", name, spec.name, why);
  }
  return spec;
}

}  // namespace attnum::attention
