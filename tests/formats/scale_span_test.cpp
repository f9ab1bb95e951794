// The span forms of the scaled cast (formats/scale.h) against its one-element definition
// cast_in_group (itself checked against NVIDIA's host conversions in format_test and scale_test),
// bit for bit, on wide-range data with NaN, +-0, +-Inf, subnormals and saturating values; and
// prepare_layer's casts, which run through them on threads, bit for bit at 1 and 2 threads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/scale.h"

namespace {
using namespace attnum::formats;

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

// Floats of every binade (random sign, exponent and mantissa, subnormals included) with the
// special values spread among them.
std::vector<float> wide_range(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(n);
  for (float& v : x) {
    const uint32_t sign = static_cast<uint32_t>(rng() & 1u) << 31;
    const auto exponent = static_cast<uint32_t>(rng() % 255);  // 0 (subnormal) .. 254
    const auto mantissa = static_cast<uint32_t>(rng() & 0x7fffffu);
    v = std::bit_cast<float>(sign | exponent << 23 | mantissa);
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            448.0f,
                            464.0f,  // the e4m3fn tie above max: saturates
                            -127.5f,
                            0.5f,
                            -2.5f,
                            65520.0f};  // fp16's overflow tie
  for (size_t i = 0; i < std::size(specials); ++i) x[(i * 37) % n] = specials[i];
  return x;
}

// Data around a scale's range: values x with x / scale spread over the format's grid, its
// subnormals, ties and saturation.
std::vector<float> near_scale(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> e(-20.0f, 20.0f);
  std::vector<float> x(n);
  for (float& v : x) v = (rng() & 1 ? 1.0f : -1.0f) * std::exp2(e(rng)) * scale;
  for (size_t i = 0; i < n; i += 11) x[i] = std::nearbyint(x[i] / scale * 4.0f) * 0.125f * scale;  // ties
  x[0] = 0.0f;
  x[n / 2] = -0.0f;
  return x;
}

void expect_span_equals_element(const std::vector<float>& x, double amax, const scale_spec& spec,
                                const std::string& what) {
  const float scale = group_scale(amax, spec);
  // offsets and lengths that cover the vector loops' heads and tails
  for (size_t off : {size_t{0}, size_t{1}, size_t{3}})
    for (size_t n : {size_t{1}, size_t{7}, size_t{16}, size_t{33}, x.size() - off}) {
      if (off + n > x.size()) continue;
      std::vector<float> out(n, 1.0f);
      cast_span_in_group(x.data() + off, out.data(), n, amax, scale, spec);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(bits(out[i]), bits(cast_in_group(x[off + i], amax, scale, spec)))
            << what << " amax " << amax << " scale " << scale << " x " << x[off + i] << " at " << off + i;
    }
}

std::vector<scale_spec> all_specs() {
  std::vector<scale_spec> specs;
  for (format f : {format::e4m3fn, format::e5m2, format::bf16, format::fp16, format::int8, format::fp32})
    for (rounding r : {rounding::nearest_even, rounding::half_away, rounding::toward_zero})
      for (bool recip : {false, true})
        for (float eps : {0.0f, 1e-7f})
          for (double fmt_max : {0.0, 2.25, 127.0}) {
            scale_spec s;
            s.fmt = f, s.rnd = r, s.multiply_by_reciprocal = recip, s.eps = eps, s.fmt_max = fmt_max;
            specs.push_back(s);
          }
  return specs;
}

std::string name(const scale_spec& s) {
  return std::string(info(s.fmt).name) + " rnd " + std::to_string(static_cast<int>(s.rnd)) + " recip " +
         std::to_string(s.multiply_by_reciprocal) + " eps " + std::to_string(s.eps) + " fmt_max " +
         std::to_string(s.fmt_max);
}

TEST(scale_span, equals_cast_in_group_for_every_format_rounding_and_scale) {
  const auto wide = wide_range(1000, 1);
  for (const scale_spec& s : all_specs()) {
    // group amaxes: all zero (the all-zero rule, with and without eps), tiny, subnormal, the
    // data's own, and large enough that the scale is 1 or the scaled values underflow
    for (double amax : {0.0, 1e-42, 1e-30, 1e-3, 1.0, 448.0, 57344.0, 3e38}) {
      expect_span_equals_element(wide, amax, s, name(s) + " wide");
      const float scale = group_scale(amax, s);
      if (scale > 0 && std::isfinite(scale))
        expect_span_equals_element(near_scale(500, scale, 2), amax, s, name(s) + " near scale");
    }
    // all-zero group: 0 / 1, 0 / eps, and (multiply without eps) 0 * Inf = NaN
    const std::vector<float> zeros = {0.0f, -0.0f, 0.0f, -0.0f, 0.0f, 0.0f, -0.0f, 0.0f, 0.0f};
    expect_span_equals_element(zeros, 0.0, s, name(s) + " zeros");
  }
}

TEST(scale_span, by_operand_equals_cast_in_group_per_element) {
  const size_t n = 301;
  const auto x = wide_range(n, 3);
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<float> e(-40.0f, 40.0f);
  std::vector<double> amax(n);
  for (size_t i = 0; i < n; ++i) amax[i] = i % 17 == 0 ? 0.0 : std::exp2(e(rng));
  for (const scale_spec& s : all_specs()) {
    std::vector<float> scale(n), operand(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      scale[i] = group_scale(amax[i], s);
      operand[i] = group_operand(amax[i], scale[i], s);
    }
    cast_span_by_operand(x.data(), operand.data(), out.data(), n, s);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(bits(out[i]), bits(cast_in_group(x[i], amax[i], scale[i], s))) << name(s) << " at " << i;
  }
}

TEST(scale_span, quantize_span_equals_quantize_value) {
  const auto x = wide_range(777, 5);
  for (format f : {format::e4m3fn, format::e5m2, format::bf16, format::fp16, format::int8, format::fp32})
    for (rounding r : {rounding::nearest_even, rounding::half_away, rounding::toward_zero}) {
      std::vector<float> out(x.size());
      quantize_span(x.data(), out.data(), x.size(), f, r);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(bits(out[i]), bits(quantize_value(f, x[i], r))) << info(f).name << " x " << x[i];
    }
}

// Every 2039th float bit pattern (all binades, NaN payloads, both zeros, Inf), through the span
// forms at scale 1 and the unscaled conversion, for every format and rounding: the span loops'
// conversions (int8 half_away has its own vectorisable truncation) against cast_in_group and
// quantize_value. (Not x / 1.0f in the test: GCC folds that to x, which keeps a signalling NaN
// signalling, where a division by a scale of 1 quiets it.)
TEST(scale_span, strided_sweep_of_all_floats_at_scale_one) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 2039) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (float special :
       {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, -1.5f, 126.5f, -127.5f, -128.5f, 0x1p23f, -0x1p23f, 0x1.000002p23f})
    x.push_back(special);
  std::vector<float> out(x.size());
  for (format f : {format::e4m3fn, format::e5m2, format::bf16, format::fp16, format::int8, format::fp32})
    for (rounding r : {rounding::nearest_even, rounding::half_away, rounding::toward_zero}) {
      scale_spec s;
      s.fmt = f, s.rnd = r;
      cast_span_in_group(x.data(), out.data(), x.size(), 1.0, 1.0f, s);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(bits(out[i]), bits(cast_in_group(x[i], 1.0, 1.0f, s))) << info(f).name << " x " << x[i];
      quantize_span(x.data(), out.data(), x.size(), f, r);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(bits(out[i]), bits(quantize_value(f, x[i], r))) << info(f).name << " x " << x[i];
    }
}

// span_amax against a plain loop: max |x| in double, NaN skipped (std::max keeps the first
// argument when the comparison is false).
TEST(scale_span, amax_equals_plain_loop_and_skips_na_n) {
  auto x = wide_range(1000, 6);
  for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{64}, size_t{999}, size_t{1000}}) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(x[i])));
    EXPECT_EQ(static_cast<double>(span_amax(x.data(), n)), m) << n;
  }
  const std::vector<float> y = {-0.0f, std::nanf(""), -3.5f, std::numeric_limits<float>::denorm_min(), 2.0f};
  EXPECT_EQ(span_amax(y.data(), y.size()), 3.5f);
  const std::vector<float> z = {-std::numeric_limits<float>::infinity(), std::nanf(""), 1.0f};
  EXPECT_EQ(span_amax(z.data(), z.size()), std::numeric_limits<float>::infinity());
  const std::vector<float> sub = {-std::numeric_limits<float>::denorm_min(), 0.0f};
  EXPECT_EQ(span_amax(sub.data(), sub.size()), std::numeric_limits<float>::denorm_min());
}

// span_all_finite against std::isfinite at every position of a span, Inf of both signs and NaN
// payloads (quiet, signalling, negative), with the largest finite value and subnormals finite.
TEST(scale_span, all_finite_equals_isfinite_at_every_position) {
  const float bad[] = {std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::nanf(""),
                       -std::nanf(""),
                       std::numeric_limits<float>::signaling_NaN(),
                       std::bit_cast<float>(0x7f800001u)};
  std::vector<float> x(77);  // finite patterns over every exponent (0: subnormal .. 254)
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::bit_cast<float>(
        static_cast<uint32_t>((i % 2) << 31 | (i * 37 % 255) << 23 | (i * 2654435761u & 0x7fffffu)));
  x[5] = std::numeric_limits<float>::max(), x[6] = -std::numeric_limits<float>::denorm_min();
  for (float v : x) ASSERT_TRUE(std::isfinite(v));
  EXPECT_TRUE(span_all_finite(x.data(), x.size()));
  EXPECT_TRUE(span_all_finite(x.data(), 0));
  for (float b : bad)
    for (size_t at : {size_t{0}, size_t{31}, size_t{76}}) {
      auto y = x;
      y[at] = b;
      EXPECT_FALSE(span_all_finite(y.data(), y.size())) << at;
      EXPECT_EQ(span_all_finite(y.data(), at), true) << at;  // the span before it
    }
}

// prepare_layer's casts (values, row and column scales, NaN flag) and transformed operands are
// the same bits on 1 and 2 threads, for presets covering each granularity (kv_group, head,
// row_group, channel, tensor with one K/V scale, token, block, none), Sage's smooth_k and
// dequant_unit, and the causal scale scope; the layer is large enough that the loops split.
TEST(scale_span, prepare_layer_same_bits_on_one_and_two_threads) {
  using namespace attnum::attention;
  const int n_head = 4, n_head_kv = 2, n = 256, d = 64;  // K and V: 2^15 elements, the threads' minimum
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> q(static_cast<size_t>(n_head) * n * d), k(static_cast<size_t>(n_head_kv) * n * d), v(k.size());
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = nd(rng);
  q[17] = 900.0f;                                                        // an outlier row
  for (int t = 0; t < n; ++t) v[static_cast<size_t>(t) * d + 5] = 0.0f;  // an all-zero V channel (Sage: NaN, flagged)
  const layer_view lv{q.data(), k.data(), v.data(), n_head, n_head_kv, n, n, d};
  const int threads_before = attnum::threads();
  for (const char* kernel : {"fa3", "sage2pp-sm89", "xqa-sm90", "bf16", "sage1", "hpcops"})
    for (const char* scope : {"sequence", "causal"}) {
      const kernel_spec spec = resolve_kernel(kernel, {std::string("scope=") + scope});
      const std::string k(kernel);
      for (condition cond : {condition::plain, condition::center}) {
        if (cond == condition::center && k != "fa3" && k != "sage1") continue;  // centering is not this test's subject
        attnum::set_threads(1);
        const auto one = prepare_layer(spec, lv, cond);
        attnum::set_threads(2);
        const auto two = prepare_layer(spec, lv, cond);
        const std::string what = std::string(kernel) + " scope " + scope + " " + std::string(condition_name(cond));
        auto same = [&](const auto& a, const auto& b, const char* field) {  // vectors of float (any allocator)
          ASSERT_EQ(a.size(), b.size()) << what << " " << field;
          for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(bits(a[i]), bits(b[i])) << what << " " << field << " " << i;
        };
        same(one->q, two->q, "q");
        same(one->k, two->k, "k");
        same(one->v, two->v, "v");
        for (auto [a, b, op] :
             {std::tuple{&one->q8, &two->q8, "q8"}, {&one->k8, &two->k8, "k8"}, {&one->v8, &two->v8, "v8"}}) {
          same(a->values, b->values, op);
          same(a->row_scale, b->row_scale, op);
          same(a->col_scale, b->col_scale, op);
          EXPECT_EQ(a->nan_flagged, b->nan_flagged) << what << " " << op;
          EXPECT_EQ(a->n_col_blocks, b->n_col_blocks) << what << " " << op;
        }
      }
    }
  attnum::set_threads(threads_before);
}

// The input check runs on threads (one per operand) and still names the first non-finite element
// of q before k before v, as the serial order does; also where prepare_layer leaves the check of
// an operand it does not copy to that operand's cast (keep_operands false: plain fa3 copies none,
// rotate copies q and k, Sage's smooth_k copies k; V per channel under Sage), in any mix.
TEST(scale_span, prepare_layer_names_the_first_non_finite_input_on_threads) {
  using namespace attnum::attention;
  const int n = 512, d = 64;
  const int threads_before = attnum::threads();
  attnum::set_threads(2);
  struct run {
    const char* kernel;
    condition cond;
    bool keep;
  };
  for (const run& c :
       {run{"fa3", condition::plain, true}, run{"fa3", condition::plain, false}, run{"fa3", condition::rotate, false},
        run{"sage2pp-sm89", condition::plain, false}, run{"sage2pp-sm89", condition::center, false}}) {
    std::vector<float> q(static_cast<size_t>(n) * d, 0.5f), k(q.size(), 0.5f), v(q.size(), 0.5f);
    const layer_view lv{q.data(), k.data(), v.data(), 1, 1, n, n, d};
    auto message = [&] {
      try {
        prepare_layer(preset(c.kernel), lv, c.cond, {}, c.keep);
      } catch (const attnum::error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    const std::string what =
        std::string(c.kernel) + " " + std::string(condition_name(c.cond)) + (c.keep ? " kept" : "");
    v[5] = std::numeric_limits<float>::infinity();
    k[30000] = std::nanf("");
    k[30001] = std::numeric_limits<float>::infinity();
    EXPECT_NE(message().find("input k: element 30000 is not finite"), std::string::npos) << what << ": " << message();
    q[20000] = -std::numeric_limits<float>::infinity();
    EXPECT_NE(message().find("input q: element 20000 is not finite (-inf)"), std::string::npos)
        << what << ": " << message();
    q[20000] = 0.0f, k[30000] = 0.0f, k[30001] = 0.0f;
    EXPECT_NE(message().find("input v: element 5 is not finite"), std::string::npos) << what << ": " << message();
    v[5] = 0.5f;
    q[7] = std::nanf("");
    EXPECT_NE(message().find("input q: element 7 is not finite (nan)"), std::string::npos) << what << ": " << message();
    q[7] = 0.5f;
    EXPECT_EQ(message(), "no error") << what;
  }
  attnum::set_threads(threads_before);
}

// prepare_layer's per-channel V under the causal scope against a plain loop written from the
// rule (kernels.md: the amax of a block's channel covers the tokens up to the block's end),
// through the one-element cast_in_group.
TEST(scale_span, prepare_layer_causal_channel_scales_match_plain_loop) {
  using namespace attnum::attention;
  const int n = 200, d = 16;
  std::mt19937_64 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n) * d), k(q.size()), v(q.size());
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = nd(rng);
  v[150 * d + 2] = 50.0f;  // a late outlier: only the blocks from token 150's on see it
  const layer_view lv{q.data(), k.data(), v.data(), 1, 1, n, n, d};
  const kernel_spec spec = resolve_kernel("sage2pp-sm89", {"scope=causal"});
  const auto p = prepare_layer(spec, lv, condition::plain);
  const auto [bm, bn] = spec.tile_for(d);
  scale_spec rule;
  rule.fmt = spec.v.fmt, rule.fmt_max = spec.v.scale_max, rule.eps = static_cast<float>(spec.v.eps);
  rule.rnd = spec.v.rnd, rule.multiply_by_reciprocal = spec.v.multiply_reciprocal;
  ASSERT_EQ(p->v8.col_block, bn);
  for (int c = 0; c < d; ++c)
    for (int t = 0; t < n; ++t) {
      const int end = std::min(n, (t / bn + 1) * bn);
      double amax = 0;
      for (int u = 0; u < end; ++u) amax = std::max(amax, static_cast<double>(std::fabs(v[u * d + c])));
      const float s = group_scale(amax, rule);
      ASSERT_EQ(p->v8.scale(0, t, c), s) << t << "," << c;
      ASSERT_EQ(bits(p->v8.values[t * d + c]), bits(cast_in_group(v[t * d + c], amax, s, rule))) << t << "," << c;
    }
}

}  // namespace
