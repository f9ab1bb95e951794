// The rounding-noise predictor against independent oracles: closed-form grid spacings, the
// measured variance of real E4M3 casts, and Monte Carlo propagation of small Gaussian errors
// through the fp64 reference attention (the first-order regime the model assumes).
#include "attnum/predict/predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/stats/stats.h"
#include "attnum/study/emulate.h"

using namespace attnum;
using formats::format;

TEST(predictor_test, grid_spacing_closed_forms) {
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 1.0), 0.125);     // 2^0 * 2^-3
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 300.0), 32.0);    // 2^8 * 2^-3
  EXPECT_EQ(predict::grid_spacing(format::e4m3fn, 0.004), 0x1p-9);  // subnormal spacing
  EXPECT_EQ(predict::grid_spacing(format::e5m2, 1.5), 0.25);
  EXPECT_EQ(predict::grid_spacing(format::bf16, 1.0), 0x1p-7);
  EXPECT_EQ(predict::grid_spacing(format::fp16, 1000.0), 0.5);  // 2^9 * 2^-10
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

predict::prediction predict_case(const mc_case& c, const study::reference& ref, int which, int probes) {
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

// ---- v2: shared rounding (docs/predictor.md "v2 (pre-registered)") ----

namespace {
// Round-to-nearest-even on the grid u Z (the model's rounding; ties have probability 0 here).
double round_on(double x, double u) { return std::nearbyint(x / u) * u; }

// The mean pair covariance by its definition, one pair at a time (O(n^2)).
double pair_covariance_loop(const std::vector<double>& x, const std::vector<double>& u) {
  const int n = static_cast<int>(x.size());
  double s = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || u[a] != u[b] || !(u[a] > 0)) continue;
      const double r = std::fabs(x[a] - x[b]) / u[a], t = r - std::floor(r);
      s += u[a] * u[a] * (1.0 / 12 - t * (1 - t) / 2);
    }
  return s / (static_cast<double>(n) * (n - 1));
}
}  // namespace

TEST(predictor_v2_test, versions_parse_and_record) {
  EXPECT_EQ(predict::parse_version("v1"), predict::version::v1);
  EXPECT_EQ(predict::parse_version("v2"), predict::version::v2);
  EXPECT_THROW(predict::parse_version("v3"), attnum::error);
  EXPECT_EQ(predict::version_string(predict::version::v1), predict::kPredictorVersion);
  EXPECT_EQ(predict::version_string(predict::version::v2), predict::kPredictorVersionV2);
  EXPECT_NE(predict::kPredictorVersion, predict::kPredictorVersionV2);
  EXPECT_EQ(predict::version_from_string(predict::kPredictorVersionV2), predict::version::v2);
  EXPECT_FALSE(predict::version_from_string("rn1-old").has_value());
  EXPECT_EQ(predict::command_suffix(predict::version::v1), "");
  EXPECT_EQ(predict::command_suffix(predict::version::v2), " --predictor-version v2");
}

TEST(predictor_v2_test, mean_pair_covariance_closed_forms) {
  // Equal values on one grid: every pair's errors are identical (t = 0), covariance u^2/12.
  EXPECT_DOUBLE_EQ(
      predict::mean_pair_covariance(std::vector<double>(5, 0.3).data(), std::vector<double>(5, 0.25).data(), 5),
      0.25 * 0.25 / 12);
  // Two groups of m equal values on two grids: the cross pairs are independent.
  const int m = 4;
  std::vector<double> x(2 * m, 1.1), u(2 * m, 0.5);
  for (int j = m; j < 2 * m; ++j) u[j] = 0.125;
  EXPECT_NEAR(predict::mean_pair_covariance(x.data(), u.data(), 2 * m),
              m * (m - 1) * (0.25 + 0.125 * 0.125) / 12 / (2.0 * m * (2 * m - 1)), 1e-15);
  // Half a spacing apart: t = 1/2, covariance -u^2/24; unpaired values (u = 0) count in n only.
  const double xh[] = {0.1, 0.6, 5.0}, uh[] = {1.0, 1.0, 0.0};
  EXPECT_NEAR(predict::mean_pair_covariance(xh, uh, 3), 2 * (-1.0 / 24) / 6, 1e-15);
  EXPECT_EQ(predict::mean_pair_covariance(xh, uh, 1), 0.0);
}

TEST(predictor_v2_test, mean_pair_covariance_matches_pair_loop_and_random_phase_rounding) {
  stats::splitmix64 r(5);
  // A tight cluster (spread 0.05 u) with a few values on a second grid and an unpaired one.
  const int n = 40;
  std::vector<double> x(n), u(n, 1.0 / 64);
  for (int j = 0; j < n; ++j) x[j] = 3.0 + 0.05 / 64 * r.normal();
  for (int j = 0; j < 6; ++j) u[j] = 1.0 / 128;
  u[7] = 0;
  const double fast = predict::mean_pair_covariance(x.data(), u.data(), n);
  EXPECT_NEAR(fast / pair_covariance_loop(x, u), 1.0, 1e-9);
  // Independent oracle: real rounding of x + phase on each grid, the phase uniform (the model's
  // assumption), the mean over pairs of the products of errors, averaged over phases.
  const int trials = 20000;
  double acc = 0;
  for (int t = 0; t < trials; ++t) {
    const double phi = r.uniform();
    std::vector<double> e(n, 0.0);
    for (int j = 0; j < n; ++j)
      if (u[j] > 0) {
        const double y = x[j] + phi * u[j];
        e[j] = round_on(y, u[j]) - y;
      }
    double s = 0, tot = 0;  // sum over ordered pairs on one grid: (sum_g e)^2 - sum e^2 per grid
    for (double g : {1.0 / 64, 1.0 / 128}) {
      double eg = 0, e2 = 0;
      for (int j = 0; j < n; ++j)
        if (u[j] == g) eg += e[j], e2 += e[j] * e[j];
      s += eg * eg - e2;
    }
    tot = s / (static_cast<double>(n) * (n - 1));
    acc += tot;
  }
  // Strongly shared: at least half of u^2/12 on the main grid's share of the pairs.
  EXPECT_GT(fast, 0.5 * (1.0 / 64) * (1.0 / 64) / 12 * (33.0 * 32) / (40.0 * 39));
  EXPECT_NEAR(acc / trials / fast, 1.0, 0.03) << "mc " << acc / trials << " closed form " << fast;
  // Spread over many cells: the pairs' covariances average out (|cbar| far below u^2/12).
  std::vector<double> xs(400), us(400, 1.0 / 64);
  for (auto& y : xs) y = 3.0 + 0.5 * r.normal();
  EXPECT_LT(std::fabs(predict::mean_pair_covariance(xs.data(), us.data(), 400)), 0.02 / 64 / 64 / 12);
}

namespace {
// A head whose keys share a large component in every channel: k_jc = b_c + r_jc, the spread of
// r a fraction `spread` of the grid spacing u (all keys on one grid per channel).
struct shared_case {
  int n = 32, d = 8;
  double u = 1.0 / 256;
  std::vector<float> q, k, v;
};
shared_case make_shared_case(uint64_t seed, double spread) {
  shared_case c;
  stats::splitmix64 r(seed);
  const size_t m = static_cast<size_t>(c.n) * c.d;
  c.q.resize(m), c.k.resize(m), c.v.resize(m);
  for (auto& y : c.q) y = static_cast<float>(1.5 * r.normal());
  for (auto& y : c.v) y = static_cast<float>(r.normal());
  std::vector<double> b(c.d);
  for (auto& y : b) y = 1.0 + r.uniform();  // one binade: [1, 2) (the keys' grid is u there)
  for (int j = 0; j < c.n; ++j)
    for (int e = 0; e < c.d; ++e) c.k[j * c.d + e] = static_cast<float>(b[e] + spread * c.u * r.normal());
  return c;
}
}  // namespace

TEST(predictor_v2_test, v2_equals_v1_where_the_shared_terms_vanish) {
  const mc_case c = make_case(7);
  const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
  predict::head_inputs in;
  in.n_q = c.n, in.n_kv = c.n, in.d = c.d;
  in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
  in.q = c.q.data(), in.k = c.k.data(), in.v = c.v.data();
  in.var_q = c.var_q.data(), in.var_k = c.var_k.data(), in.var_v = c.var_v.data();
  const auto v1 = predict::predict_head(in);
  const std::vector<double> zero(c.d, 0.0);
  in.shared_k = zero.data(), in.shared_v = zero.data();
  const auto v2 = predict::predict_head(in);
  EXPECT_EQ(v2.k, v1.k);
  EXPECT_EQ(v2.q, v1.q);
  EXPECT_EQ(v2.v, v1.v);
  EXPECT_EQ(v2.total, v1.total);
  // A shared V covariance s adds n_q * sum_e s_e and takes s_e out of each variance (closed form).
  std::vector<double> sv(c.d, 2e-10);
  in.shared_v = sv.data();
  double p2 = 0;
  for (int i = 0; i < c.n; ++i)
    for (int j = 0; j <= i; ++j) p2 += ref.p[i * c.n + j] * ref.p[i * c.n + j];
  EXPECT_NEAR(predict::predict_head(in).v, v1.v - p2 * c.d * 2e-10 + c.n * c.d * 2e-10, 1e-12 * v1.v);
}

TEST(predictor_v2_test, k_term_matches_random_phase_rounding_of_shared_keys) {
  // Oracle: the keys rounded for real on their grid with a uniformly random phase per channel
  // (the phase shifts every key of a channel by the same amount: exact attention is unchanged),
  // propagated through the fp64 reference. v1 counts every key's error as independent and
  // over-predicts; v2 takes out the shared part.
  for (const double spread : {0.02, 0.08}) {
    const shared_case c = make_shared_case(21, spread);
    const auto ref = study::reference_causal(c.q.data(), c.k.data(), c.v.data(), c.n, c.d);
    stats::splitmix64 r(3);
    const int trials = 3000;
    double mc = 0;
    std::vector<float> kr(c.k.size());
    for (int t = 0; t < trials; ++t) {
      for (int e = 0; e < c.d; ++e) {
        const double phi = r.uniform() * c.u;
        for (int j = 0; j < c.n; ++j) {
          const double y = c.k[j * c.d + e] + phi;
          kr[j * c.d + e] = static_cast<float>(round_on(y, c.u) - phi);  // the error, on the unshifted key
        }
      }
      const auto pert = study::reference_causal(c.q.data(), kr.data(), c.v.data(), c.n, c.d);
      for (size_t i = 0; i < ref.o.size(); ++i) mc += std::pow(pert.o[i] - ref.o[i], 2);
    }
    mc /= trials;
    // The predictor's inputs as study/emulate.cpp forms them: v1's variances, and per channel
    // the mean pair covariance of the keys on their grid.
    std::vector<double> var_k(c.k.size()), shared(c.d), xs(c.n), us(c.n, c.u);
    for (auto& y : var_k) y = c.u * c.u / 12;
    for (int e = 0; e < c.d; ++e) {
      for (int j = 0; j < c.n; ++j) xs[j] = c.k[j * c.d + e];
      shared[e] = predict::mean_pair_covariance(xs.data(), us.data(), c.n);
    }
    predict::head_inputs in;
    in.n_q = c.n, in.n_kv = c.n, in.d = c.d;
    in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
    in.q = c.q.data(), in.k = c.k.data(), in.v = c.v.data();
    in.var_k = var_k.data();
    in.p_cast.enabled = false;
    in.o_cast = false;
    const double v1 = predict::predict_head(in).k;
    in.shared_k = shared.data();
    const double v2 = predict::predict_head(in).k;
    EXPECT_GT(v1 / mc, 2.0) << "spread " << spread << ": v1 " << v1 << " mc " << mc;
    EXPECT_NEAR(v2 / mc, 1.0, 0.35) << "spread " << spread << ": v2 " << v2 << " mc " << mc;
  }
}
