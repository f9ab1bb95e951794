// The rounding-noise predictor against independent oracles: closed-form grid spacings, the
// measured variance of real E4M3 casts, and Monte Carlo propagation of small Gaussian errors
// through the fp64 reference attention (the first-order regime the model assumes).
#include "attnum/predict/predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnum/stats/stats.h"
#include "attnum/study/emulate.h"

using namespace attnum;
using formats::format;

TEST(predictor_test, grid_spacing_closed_forms) {
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 1.0), 0.125);         // 2^0 * 2^-3
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 300.0), 32.0);        // 2^8 * 2^-3
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 0.004), 0x1p-9);      // subnormal spacing
  EXPECT_EQ(predict::grid_spacing(format::e5m2, 1.5), 0.25);
  EXPECT_EQ(predict::grid_spacing(format::bf16, 1.0), 0x1p-7);
  EXPECT_EQ(predict::grid_spacing(format::fp16, 1000.0), 0.5);          // 2^9 * 2^-10
  EXPECT_EQ(predict::grid_spacing(format::int8, 3.0), 1.0);
}

TEST(predictor_test, element_variance_matches_measured_e4m3_casts) {
  // x uniform in [1, 2) * scale: the E4M3 error is uniform on a grid of spacing 0.125 * scale.
  stats::splitmix64 r(1);
  const double scale = 0.37;
  double sum2 = 0, pred = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = (1 + r.uniform()) * scale;
    const double q = formats::quantize_e4m3_sat(static_cast<float>(x / scale)) * scale;
    sum2 += (q - x) * (q - x);
    pred += predict::element_variance(format::e4m3fn, x, scale);
  }
  EXPECT_NEAR(sum2 / pred, 1.0, 0.02);
  // Below half the smallest subnormal the cast flushes to 0: the error is x itself.
  EXPECT_EQ(predict::element_variance(format::e4m3fn, 1e-4, 1.0), 1e-8);
}

namespace {
struct mc_case {
  int n = 24, d = 8;
  std::vector<float> q, k, v;
  std::vector<double> var_q, var_k, var_v;
};

mc_case make_case(uint64_t seed) {
  mc_case c;
  stats::splitmix64 r(seed);
  const size_t m = static_cast<size_t>(c.n) * c.d;
  for (auto* x : {&c.q, &c.k, &c.v}) {
    x->resize(m);
    for (auto& y : *x) y = static_cast<float>(1.5 * r.normal());
  }
  for (auto* x : {&c.var_q, &c.var_k, &c.var_v}) {
    x->resize(m);
    for (auto& y : *x) y = 1e-9 * (0.2 + r.uniform());  // small: first order is exact enough
  }
  return c;
}

// Monte Carlo E||O(x + e) - O(x)||^2 with e ~ N(0, var) on one operand (0 q, 1 k, 2 v).
double monte_carlo(const mc_case& c, int which, int trials) {
  const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
  stats::splitmix64 r(99 + which);
  double acc = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<float> x[3] = {c.q, c.k, c.v};
    const std::vector<double>* var[3] = {&c.var_q, &c.var_k, &c.var_v};
    // Perturb in double, evaluate in double: keep the operands in float but add the noise to
    // the reference's fp64 inputs by passing the perturbed copy (noise >> float spacing? no:
    // float spacing ~1e-7 relative, noise std ~3e-5, so the float rounding is negligible).
    for (size_t i = 0; i < x[which].size(); ++i)
      x[which][i] = static_cast<float>(x[which][i] + std::sqrt((*var[which])[i]) * r.normal());
    const auto pert = study::reference_causal(x[0].data(), x[1].data(), x[2].data(), c.n, c.d);
    for (size_t i = 0; i < ref.o.size(); ++i) acc += std::pow(pert.o[i] - ref.o[i], 2);
  }
  return acc / trials;
}

predict::prediction predict_case(const mc_case& c, const study::reference& ref, int which,
                                 int probes) {
  predict::head_inputs in;
  in.n_q = c.n, in.n_kv = c.n, in.d = c.d;
  in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
  in.q = c.q.data(), in.k = c.k.data(), in.v = c.v.data();
  in.var_q = which == 0 ? c.var_q.data() : nullptr;
  in.var_k = which == 1 ? c.var_k.data() : nullptr;
  in.var_v = which == 2 ? c.var_v.data() : nullptr;
  in.p_cast.enabled = false;
  in.o_cast = false;
  predict::options opt;
  opt.n_probes = probes;
  return predict::predict_head(in, opt);
}
}  // namespace

TEST(predictor_test, k_q_v_terms_match_monte_carlo_propagation) {
  const mc_case c = make_case(7);
  const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
  const char* names[] = {"q", "k", "v"};
  for (int which = 0; which < 3; ++which) {
    const double mc = monte_carlo(c, which, 600);
    const predict::prediction p = predict_case(c, ref, which, 256);
    const double term = which == 0 ? p.q : which == 1 ? p.k : p.v;
    EXPECT_GT(term, 0) << names[which];
    EXPECT_NEAR(term / mc, 1.0, 0.12) << names[which] << " term " << term << " mc " << mc;
    EXPECT_DOUBLE_EQ(p.total, term);
  }
}

TEST(predictor_test, q_term_probes_are_unbiased_and_seeded) {
  const mc_case c = make_case(11);
  const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
  const double many = predict_case(c, ref, 0, 4096).q;
  const double few_a = predict_case(c, ref, 0, 4).q, few_b = predict_case(c, ref, 0, 4).q;
  EXPECT_EQ(few_a, few_b);  // deterministic
  EXPECT_NEAR(few_a / many, 1.0, 0.5);
  EXPECT_NEAR(predict_case(c, ref, 0, 1024).q / many, 1.0, 0.05);
}

TEST(predictor_test, output_cast_term_is_bf16_spacing) {
  const mc_case c = make_case(3);
  const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
  predict::head_inputs in;
  in.n_q = c.n, in.n_kv = c.n, in.d = c.d;
  in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data(), in.v = c.v.data();
  in.p_cast.enabled = false;
  const auto p = predict::predict_head(in);
  // Measured: cast the ideal O to bf16. Sum of squared errors over ~200 values: within 35%.
  double meas = 0;
  for (double o : ref.o) meas += std::pow(formats::quantize_bf16(static_cast<float>(o)) - o, 2);
  EXPECT_NEAR(p.o / meas, 1.0, 0.35);
}
