// Engine tests against independent oracles: the fp64 reference (exact path), closed-form probes
// (one-hot and uniform attention), the P-collapse mechanism, zero-channel guards and flags.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>
#include <cstring>
#include <set>
#include <omp.h>

#include "attention/doc_tables.h"
#include "attention/test_util.h"
#include "attnum/attention/attend.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/metrics.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/format.h"

namespace attnum::attention {
namespace {
using test::random_layer;

template <typename OutT>
double max_rel_vs_ref(const std::vector<OutT>& o, const layer_view& L, bool causal) {
  double worst = 0;
  for (int h = 0; h < L.n_head; ++h) {
    const auto ref = reference_head(L, h, causal);
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.o.size(); ++i) {
      const double e = o[static_cast<size_t>(h) * ref.o.size() + i] - ref.o[i];
      num += e * e, den += ref.o[i] * ref.o[i];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

// The engine in fp64 with every quantization point off: exact attention, any block and order.
TEST(engine_test, exact_path_equals_reference) {
  set_threads(1);
  for (int n : {1, 7, 130}) {
    for (int d : {64, 128}) {
      auto L = random_layer(2, 1, n, n, d, 1000 + n + d, 2.0f);
      for (int bn : {16, 224}) {
        for (bool reverse : {false, true}) {
          for (bool causal : {true, false}) {
            kernel_spec s = exact_spec();
            s.block_n = bn, s.block_m = 64, s.reverse = reverse;
            // Exact path with an fp8 preset's layout knobs (scaled space, sage row sum) too.
            for (bool sage_like : {false, bn == 16}) {
              if (sage_like)
                s.max = max_space::scaled, s.rowsum = rowsum_order::sage_mma, s.pv = pv_mode::fresh_per_block;
              const auto o = run_layer_f64(s, L.view, condition::plain, causal);
              EXPECT_LT(max_rel_vs_ref(o, L.view, causal), 1e-12)
                  << "n " << n << " d " << d << " bn " << bn << " reverse " << reverse << " causal " << causal;
            }
          }
        }
      }
    }
  }
}

// n_q < n_kv: bottom-right causal alignment in both engine and reference.
TEST(engine_test, exact_path_bottom_right_causal) {
  auto L = random_layer(2, 1, 5, 40, 64, 77);
  kernel_spec s = exact_spec();
  s.block_n = 16;
  EXPECT_LT(max_rel_vs_ref(run_layer_f64(s, L.view, condition::plain, true), L.view, true), 1e-12);
  // Query row 0 sees keys 0..35: changing key 36 must not change it.
  auto ref0 = reference_head(L.view, 0, true);
  L.k[36 * 64] += 100.0f;
  auto ref1 = reference_head(L.view, 0, true);
  EXPECT_EQ(ref0.o[0], ref1.o[0]);
  EXPECT_NE(ref0.o[4 * 64], ref1.o[4 * 64]);
}

// Reference against a direct O(n^2 d) double loop (independent of Eigen and the blocking).
TEST(engine_test, reference_matches_plain_loop) {
  auto L = random_layer(1, 1, 9, 9, 64, 5);
  const auto r = reference_head(L.view, 0, true);
  for (int i = 0; i < 9; ++i) {
    std::vector<double> s(i + 1);
    double m = -1e300, l = 0;
    for (int j = 0; j <= i; ++j) {
      double dot = 0;
      for (int c = 0; c < 64; ++c) dot += double(L.q[i * 64 + c]) * L.k[j * 64 + c];
      s[j] = dot / 8.0;
      m = std::max(m, s[j]);
    }
    for (int j = 0; j <= i; ++j) l += std::exp(s[j] - m);
    EXPECT_NEAR(r.lse[i], m + std::log(l), 1e-12);
    for (int c = 0; c < 64; ++c) {
      double o = 0;
      for (int j = 0; j <= i; ++j) o += std::exp(s[j] - m) / l * L.v[j * 64 + c];
      EXPECT_NEAR(r.o[i * 64 + c], o, 1e-12);
    }
  }
}

// One-hot attention (FA3): the output is the cast V row, dequantised, rounded to bf16.
TEST(engine_test, one_hot_returns_cast_v_row) {
  const int n = 37, d = 64, hot = 19;
  auto L = random_layer(1, 1, 1, n, d, 9);
  std::fill(L.q.begin(), L.q.end(), 0.0f);
  std::fill(L.k.begin(), L.k.end(), 0.0f);
  L.q[0] = 30.0f;
  for (int j = 0; j < n; ++j) L.k[j * d] = j == hot ? 30.0f : -30.0f;  // score gap 2*900/8 = 225
  const auto o = run_layer(preset("fa3"), L.view, condition::plain, false);
  double amax = 0;
  for (float x : L.v) amax = std::max(amax, double(std::fabs(x)));
  const float scale = float(amax) / 448.0f;
  for (int c = 0; c < d; ++c) {
    const float v8 = formats::quantize_e4m3_sat(L.v[hot * d + c] / scale);
    EXPECT_EQ(o[c], formats::quantize_bf16(v8 * scale)) << "channel " << c;
  }
}

// Uniform attention (identical keys): the output is the mean of the cast V rows.
TEST(engine_test, uniform_returns_cast_mean) {
  const int n = 16, d = 64;
  auto L = random_layer(1, 1, 1, n, d, 11);
  for (int j = 1; j < n; ++j)
    for (int c = 0; c < d; ++c) L.k[j * d + c] = L.k[c];
  const auto o = run_layer(preset("fa3"), L.view, condition::plain, false);
  double amax = 0;
  for (float x : L.v) amax = std::max(amax, double(std::fabs(x)));
  const float scale = float(amax) / 448.0f;
  for (int c = 0; c < d; ++c) {
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += formats::quantize_e4m3_sat(L.v[j * d + c] / scale);
    EXPECT_EQ(o[c], formats::quantize_bf16(float(sum / n) * scale)) << "channel " << c;
  }
}

// P collapse (kernels.md 6): a strong sink at key 0; forward order with S=1 flushes the non-sink
// P values to zero, reverse order with S=256 does not.
TEST(engine_test, p_collapse_forward_s1_not_reverse_s256) {
  const int n = 1024, d = 64;
  auto L = random_layer(1, 1, 1, n, d, 13, 0.1f);
  L.q[0] = 16.0f;
  L.k[0] = 16.0f;  // sink: score 256/8 = 32 above the others (e^-32 << 2^-10)
  kernel_spec fwd = apply_knobs(preset("fa3"), {"reverse=false", "p_mode=none"});
  kernel_spec rev = apply_knobs(preset("fa3"), {"reverse=true", "p_mode=multiply", "p_scale=256"});
  run_stats a, b;
  std::vector<float> o(d);
  run_head(*prepare_layer(fwd, L.view, condition::plain), 0, false, o.data(), &a);
  run_head(*prepare_layer(rev, L.view, condition::plain), 0, false, o.data(), &b);
  EXPECT_EQ(a.p_count, n);
  EXPECT_GT(a.p_underflow, n - 2) << "forward, S=1";
  // Reverse: only the sink's own block (processed last, kBlockN 160 at d 64) underflows.
  EXPECT_LE(b.p_underflow, 159) << "reverse, S=256";
  EXPECT_GT(b.p_underflow, 100) << "reverse, S=256";
}

// Zero channels: Sage's per-channel V scale has no eps -> NaN, flagged; FA3 guarded.
TEST(engine_test, zero_channel_flagged_or_guarded) {
  const int n = 64, d = 64;
  auto L = random_layer(1, 1, n, n, d, 17);
  for (int t = 0; t < n; ++t) L.v[t * d + 5] = 0.0f;
  run_stats st;
  std::vector<float> o(n * d);
  run_head(*prepare_layer(preset("sage2pp-sm89"), L.view, condition::plain), 0, true, o.data(), &st);
  EXPECT_TRUE(st.nan_flagged);
  EXPECT_TRUE(std::isnan(o[5]));
  EXPECT_FALSE(std::isnan(o[4]));
  run_head(*prepare_layer(preset("fa3"), L.view, condition::plain), 0, true, o.data(), &st);
  EXPECT_FALSE(st.nan_flagged);
  for (float x : o) ASSERT_FALSE(std::isnan(x));
  for (int t = 0; t < n; ++t) L.v[t * d + 5] = 1.0f;
  // All-zero Q and K rows: Sage's eps (1e-7) guards the INT8 scales; FA3 uses scale 1.
  std::fill(L.q.begin(), L.q.end(), 0.0f);
  std::fill(L.k.begin(), L.k.end(), 0.0f);
  for (auto name : {"sage2-sm90", "fa3", "xqa-sm90", "hpcops"}) {
    run_head(*prepare_layer(preset(name), L.view, condition::plain), 0, true, o.data(), &st);
    EXPECT_FALSE(st.nan_flagged) << name;
    for (float x : o) ASSERT_FALSE(std::isnan(x)) << name;
  }
}

// FA3's q_descale is per kv head: query heads of one GQA group share it.
TEST(engine_test, fa3_q_scale_shared_across_gqa_group) {
  auto L = random_layer(4, 2, 8, 8, 64, 19);
  for (int c = 0; c < 8 * 64; ++c) L.q[c] *= 10.0f;  // head 0 larger
  const auto p = prepare_layer(preset("fa3"), L.view, condition::plain);
  EXPECT_EQ(p->q8.row_scale[0], p->q8.row_scale[8]);   // heads 0, 1: group 0
  EXPECT_NE(p->q8.row_scale[0], p->q8.row_scale[16]);  // head 2: group 1
}

// Causal scope: early tokens' scales ignore a later outlier; sequence scope sees it.
TEST(engine_test, causal_scale_scope_ignores_future) {
  auto L = random_layer(1, 1, 256, 256, 64, 23);
  L.v[255 * 64] = 1000.0f;
  kernel_spec s = preset("fa3");
  const auto seq = prepare_layer(s, L.view, condition::plain);
  s.scope = scale_scope::causal;
  const auto cau = prepare_layer(s, L.view, condition::plain);
  EXPECT_FLOAT_EQ(seq->v8.scale(0, 0, 0), 1000.0f / 448.0f);
  EXPECT_LT(cau->v8.scale(0, 0, 0), 10.0f / 448.0f);
  EXPECT_FLOAT_EQ(cau->v8.scale(0, 255, 0), 1000.0f / 448.0f);
}

// Causal scope is generation-like: an outlier in the last token changes no early row's output;
// with the published (sequence) scope it changes every row through the scales. (Sage's smooth_k
// mean stays over the whole sequence, which keeps it exact: Sage presets still see the future.)
TEST(engine_test, causal_scope_output_ignores_future_tokens) {
  const int n = 600, d = 64;
  for (const char* name : {"fa3", "xqa-sm90", "hpcops"}) {
    auto L = random_layer(2, 1, n, n, d, 41);
    kernel_spec cau = preset(name);
    cau.scope = scale_scope::causal;
    const auto a_seq = run_layer(preset(name), L.view, condition::plain, true);
    const auto a_cau = run_layer(cau, L.view, condition::plain, true);
    for (int c = 0; c < d; ++c)
      L.k[(n - 1) * d + c] *= 50.0f, L.v[(n - 1) * d + c] *= 50.0f, L.q[(n - 1) * d + c] *= 50.0f;
    const auto b_seq = run_layer(preset(name), L.view, condition::plain, true);
    const auto b_cau = run_layer(cau, L.view, condition::plain, true);
    const size_t early = 64 * d;  // rows 0..63 of head 0: their CTA never reaches token n-1
    EXPECT_EQ(0, std::memcmp(a_cau.data(), b_cau.data(), early * 4)) << name;
    EXPECT_NE(0, std::memcmp(a_seq.data(), b_seq.data(), early * 4)) << name;
  }
}

// Same result at any thread count (bit for bit).
TEST(engine_test, deterministic_across_threads) {
  auto L = random_layer(2, 1, 300, 300, 64, 29);
  const auto p = prepare_layer(preset("sage2pp-sm89"), L.view, condition::rotate);
  std::vector<float> a(300 * 64), b(300 * 64);
  set_threads(1);
  run_head(*p, 1, true, a.data());
  set_threads(2);
  run_head(*p, 1, true, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// run_heads (attend's and the loss hooks' call): every head's output and P counters are those of
// run_head on that head, for every preset, with fewer, as many and more heads than threads, a
// sub-range of heads, and non-causal; called inside a parallel region it runs on that thread.
// (set_threads caps at the core count: on two cores five heads are more than the threads.)
TEST(engine_test, run_heads_equals_run_head_per_head) {
  const auto L = random_layer(5, 1, 150, 150, 64, 61, 2.0f);
  const size_t per = static_cast<size_t>(150) * 64;
  for (const auto& name : preset_names()) {
    const auto p = prepare_layer(preset(name), L.view, condition::plain);
    for (bool causal : {true, false}) {
      set_threads(1);
      std::vector<float> want(per * 5);
      std::vector<run_stats> want_st(5);
      for (int h = 0; h < 5; ++h) run_head(*p, h, causal, want.data() + per * h, &want_st[h]);
      for (int nt : {1, 2}) {
        set_threads(nt);
        for (auto [h0, h1] : {std::pair{0, 5}, std::pair{1, 3}, std::pair{4, 5}}) {
          std::vector<float> got(per * (h1 - h0), -7.0f);
          std::vector<run_stats> st(h1 - h0);
          run_heads(*p, h0, h1, causal, got.data(), st.data());
          const std::string what = name + (causal ? " causal" : " full") + " threads " + std::to_string(nt) +
                                   " heads " + std::to_string(h0) + ".." + std::to_string(h1);
          EXPECT_EQ(0, std::memcmp(got.data(), want.data() + per * h0, got.size() * 4)) << what;
          for (int h = h0; h < h1; ++h) {
            EXPECT_EQ(st[h - h0].p_count, want_st[h].p_count) << what;
            EXPECT_EQ(st[h - h0].p_underflow, want_st[h].p_underflow) << what;
            EXPECT_EQ(st[h - h0].p_saturated, want_st[h].p_saturated) << what;
            EXPECT_EQ(st[h - h0].nan_flagged, want_st[h].nan_flagged) << what;
          }
        }
      }
    }
  }
  set_threads(2);
  std::vector<float> inside(per * 5);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    run_heads(*prepare_layer(preset("fa3"), L.view, condition::plain), 0, 5, true, inside.data());
  }
  std::vector<float> want(per * 5);
  const auto p = prepare_layer(preset("fa3"), L.view, condition::plain);
  for (int h = 0; h < 5; ++h) run_head(*p, h, true, want.data() + per * h);
  EXPECT_EQ(0, std::memcmp(inside.data(), want.data(), want.size() * 4));
  std::vector<float> one(per);
  EXPECT_THROW(run_heads(*p, 4, 6, true, one.data()), error);
  EXPECT_THROW(run_heads(*p, 3, 2, true, one.data()), error);
  set_threads(0);
}

// run_heads inside an enclosing parallel region that is inactive (the loss step's batch of one
// unit: `parallel if (false)`) still uses the threads, as nested teams whose threads the OpenMP
// runtime may start and end with each region; every head's context points into its builder
// thread's buffers, which must stay alive while the team runs the tiles. Each preset (the
// double-FMA, plane and int8 paths), with stories260K's head size 8 and a larger one: the same bits
// as run_head head by head.
TEST(engine_test, run_heads_in_an_inactive_enclosing_region_equals_run_head) {
  for (int d : {8, 64}) {
    const auto L = random_layer(2, 1, 160, 160, d, 67 + d, 2.0f);
    const size_t per = static_cast<size_t>(160) * d;
    for (const auto& name : preset_names()) {
      const auto p = prepare_layer(preset(name), L.view, condition::plain);
      set_threads(1);
      std::vector<float> want(per * 2);
      for (int h = 0; h < 2; ++h) run_head(*p, h, true, want.data() + per * h);
      set_threads(2);
      std::vector<float> got(per * 2, -7.0f);
      bool outer_active = true;
      const bool enclose = false;
#pragma omp parallel if (enclose)
      {
        outer_active = omp_in_parallel();
        run_heads(*p, 0, 2, true, got.data());
      }
      EXPECT_FALSE(outer_active);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << name << " d " << d;
    }
  }
  set_threads(0);
}

// keep_operands false (attend's call): the casts are the same bits as with the copies kept, for
// every preset and condition (Sage's smooth_k and v1's folded scale change K and Q in place, the
// conditions K and Q); the operands no step changes are not copied; non-finite input still fails.
TEST(engine_test, prepare_without_kept_operands_casts_the_same_bits) {
  const auto L = random_layer(4, 2, 37, 37, 64, 53, 3.0f);
  auto same = [](const operand_cast& a, const operand_cast& b) {
    return a.values.size() == b.values.size() &&
           std::memcmp(a.values.data(), b.values.data(), a.values.size() * 4) == 0 && a.row_scale == b.row_scale &&
           a.col_scale == b.col_scale && a.nan_flagged == b.nan_flagged;
  };
  for (const auto& name : preset_names())
    for (condition cond : {condition::plain, condition::center, condition::rotate, condition::center_rotate}) {
      const kernel_spec s = preset(name);
      const auto kept = prepare_layer(s, L.view, cond);
      const auto lean = prepare_layer(s, L.view, cond, {}, false);
      const std::string what = name + " " + std::string(condition_name(cond));
      EXPECT_TRUE(same(kept->q8, lean->q8)) << what;
      EXPECT_TRUE(same(kept->k8, lean->k8)) << what;
      EXPECT_TRUE(same(kept->v8, lean->v8)) << what;
      EXPECT_TRUE(lean->v.empty()) << what;
      EXPECT_EQ(kept->v.size(), L.v.size()) << what;
      const bool q_changed =
          cond == condition::rotate || cond == condition::center_rotate || s.scaling == score_scaling::dequant_unit;
      EXPECT_EQ(lean->q.empty(), !q_changed) << what;
      if (cond == condition::plain && !(s.smooth_k && s.enabled.k_cast)) {
        EXPECT_TRUE(lean->k.empty()) << what;
      }
    }
  auto M = random_layer(1, 1, 4, 4, 64, 31);
  M.v[7] = INFINITY;
  EXPECT_THROW(prepare_layer(preset("fa3"), M.view, condition::plain, {}, false), error);
}

// The conditions' table (condition.h) says what prepare_layer does: Q changes exactly when the
// condition rotates, K when it centers or rotates, and centering alone leaves every column of K
// with a zero mean over the keys; each name parses back to its condition.
TEST(engine_test, condition_table_says_what_prepare_does) {
  const auto L = random_layer(2, 1, 24, 24, 32, 61, 3.0f);
  kernel_spec s = preset("fa3");
  s.transform_dtype = formats::format::fp32;
  EXPECT_EQ(kNumConditions, 4u);
  for (size_t i = 0; i < kNumConditions; ++i) {
    const auto cond = static_cast<condition>(i);
    const std::string what = kConditions[i].name;
    EXPECT_EQ(parse_condition(kConditions[i].name), cond) << what;
    EXPECT_EQ(condition_name(cond), what);
    const auto p = prepare_layer(s, L.view, cond);
    ASSERT_EQ(p->q.size(), L.q.size()) << what;
    ASSERT_EQ(p->k.size(), L.k.size()) << what;
    const bool q_same = std::memcmp(p->q.data(), L.q.data(), L.q.size() * 4) == 0;
    const bool k_same = std::memcmp(p->k.data(), L.k.data(), L.k.size() * 4) == 0;
    EXPECT_EQ(q_same, !rotates(cond)) << what;
    EXPECT_EQ(k_same, !(centers(cond) || rotates(cond))) << what;
    if (centers(cond) && !rotates(cond))
      for (int c = 0; c < 32; ++c) {
        double m = 0;
        for (int j = 0; j < 24; ++j) m += p->k[static_cast<size_t>(j) * 32 + c];
        EXPECT_NEAR(m / 24, 0.0, 1e-5) << what << " column " << c;
      }
  }
  EXPECT_EQ(condition_list(","), "plain,rotate,center,center+rotate");
}

// attend() into the caller's buffer: the same bits as its own o, which it then leaves empty.
TEST(engine_test, attend_writes_the_same_output_into_a_given_buffer) {
  const auto L = random_layer(4, 2, 50, 50, 64, 59);
  for (const char* name : {"fa3", "sage2pp-sm89", "bf16"}) {
    const auto a = attend(preset(name), L.view, condition::rotate, true, {}, false);
    std::vector<float> out(a.o.size(), -1.0f);
    const auto b = attend(preset(name), L.view, condition::rotate, true, {}, false, out.data());
    EXPECT_TRUE(b.o.empty()) << name;
    ASSERT_EQ(out.size(), static_cast<size_t>(4) * 50 * 64);
    EXPECT_EQ(0, std::memcmp(a.o.data(), out.data(), out.size() * 4)) << name;
    ASSERT_EQ(a.heads.size(), b.heads.size());
    for (size_t h = 0; h < a.heads.size(); ++h) EXPECT_EQ(a.heads[h].stats.p_count, b.heads[h].stats.p_count) << name;
  }
}

TEST(engine_test, bad_input_throws) {
  auto L = random_layer(3, 2, 4, 4, 64, 31);
  EXPECT_THROW(prepare_layer(preset("fa3"), L.view, condition::plain), error);  // 3 % 2
  auto M = random_layer(1, 1, 4, 4, 64, 31);
  M.q[3] = NAN;
  EXPECT_THROW(prepare_layer(preset("fa3"), M.view, condition::plain), error);
  EXPECT_THROW(preset("nope"), error);
  EXPECT_THROW(apply_knobs(preset("generic"), {"nope=1"}), error);
  EXPECT_THROW(apply_knobs(preset("generic"), {"p_mode=bogus"}), error);
  auto N = random_layer(1, 1, 4, 4, 80, 31);
  EXPECT_THROW(prepare_layer(preset("fa3"), N.view, condition::rotate), error);
  EXPECT_THROW(prepare_layer(preset("fa3"), random_layer(1, 1, 4, 4, 512, 1).view, condition::plain), error);
}

TEST(engine_test, stage_attribution_reports_each_stage) {
  auto L = random_layer(1, 1, 64, 64, 64, 37);
  const auto st = stage_attribution(preset("fa3"), L.view, 0);
  ASSERT_EQ(st.size(), 7u);
  for (const auto& s : st) EXPECT_GT(s.rel_err, 0.0) << s.stage;
  EXPECT_GT(st.back().rel_err, st[0].rel_err * 0.5);
  EXPECT_LT(st[1].rel_err, 1e-5);  // fp32 QK accumulation alone
}

// The presets are those docs/kernels.md's "Presets" table lists, one row each.
TEST(engine_test, presets_listed_and_described) {
  const auto names = preset_names();
  const auto section = test::read_doc_section("docs/kernels.md", "## Presets");
  std::vector<std::string> documented;
  for (const auto& row : section.rows) {
    ASSERT_FALSE(row.empty());
    const auto quoted = test::backticked(row[0]);
    ASSERT_EQ(quoted.size(), 1u) << row[0];
    documented.push_back(quoted[0]);
  }
  EXPECT_FALSE(documented.empty()) << "no Presets table in docs/kernels.md";
  EXPECT_EQ(std::set<std::string>(documented.begin(), documented.end()),
            std::set<std::string>(names.begin(), names.end()));
  EXPECT_EQ(documented.size(), names.size()) << "a preset listed twice";
  EXPECT_EQ(to_json(preset("fa3"))["reverse"], true);
  EXPECT_EQ(preset("fa3").tile_for(128).second, 224);
  // FA3's BF16 path widens kBlockN without a causal mask (hopper/tile_size.h)
  EXPECT_EQ(preset("bf16").tile_for(128, true).second, 128);
  EXPECT_EQ(preset("bf16").tile_for(128, false).second, 176);
  // every published kernel names the upstream commit it follows: repo@commit
  for (const auto& n : names) {
    const std::string c = to_json(preset(n))["source_commit"];
    if (n == "fp32" || n == "generic")
      EXPECT_TRUE(c.empty()) << n;
    else
      EXPECT_NE(c.find('@'), std::string::npos) << n << ": '" << c << "'";
  }
}

// A knob the resulting spec's path does not read is refused, naming the knob; the same knob is
// accepted where the path reads it.
TEST(engine_test, knobs_the_path_ignores_are_refused) {
  auto refused = [](const char* name, std::vector<std::string> knobs, const std::string& field) {
    try {
      apply_knobs(preset(name), knobs);
      ADD_FAILURE() << name << ": " << knobs[0] << " accepted";
    } catch (const attnum::error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused("fa3", {"p_scale=448"}, "p_scale");       // exponent_offset: P scaled by 2^p_offset
  refused("xqa-sm90", {"p_offset=8"}, "p_offset");  // multiply
  refused("fa3", {"rescale_before_pv=true"}, "rescale_before_pv");
  refused("fa3", {"pv_acc.mant_bits=12"}, "pv_acc.mant_bits");  // fp32 accumulator
  refused("hpcops", {"fold_dq_first=true"}, "fold_dq_first");
  refused("fa3", {"triton_fp_fusion=true"}, "triton_fp_fusion");
  refused("sage1", {"fma_contract=true"}, "fma_contract");  // triton_block: triton_fp_fusion fuses it
  refused("xqa-sm90", {"fma_contract=true"}, "fma_contract");
  refused("fa3", {"fma_contract_o=true"}, "fma_contract_o");  // O accumulated in place by the MMA
  EXPECT_FALSE(apply_knobs(preset("hpcops"), {"fma_contract=false"}).fma_contract);
  EXPECT_TRUE(apply_knobs(preset("fp32"), {"fma_contract=true"}).fma_contract);
  EXPECT_FALSE(apply_knobs(preset("sage2-sm90"), {"fma_contract_o=false"}).fma_contract_o);
  EXPECT_EQ(apply_knobs(preset("xqa-sm90"), {"p_scale=256"}).p_scale, 256.0f);
  EXPECT_EQ(apply_knobs(preset("fa3"), {"p_mode=multiply", "p_scale=448"}).p_scale, 448.0f);
  EXPECT_EQ(apply_knobs(preset("fa3-acc13"), {"pv_acc.mant_bits=12"}).pv_acc.mant_bits, 12);
}

}  // namespace
}  // namespace attnum::attention
