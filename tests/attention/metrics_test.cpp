// The one metrics module: each metric against its closed form on a hand-made output.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnum/attention/attend.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/metrics.h"

namespace attnum::attention {
namespace {

TEST(metrics, each_name_has_one_meaning) {
  // rows: ref (3, 4) and (0.1, 0); o off by (0, 0.5) and (0.1, 0): row errors 0.5/5 and 0.1/0.1.
  const std::vector<double> ref = {3, 4, 0.1, 0};
  const std::vector<float> o = {3, 4.5f, 0.2f, 0};
  const error_metrics m = measure(o.data(), ref.data(), 2, 2);
  const double e1 = 4.5 - 4.0, e2 = double(0.2f) - 0.1;
  EXPECT_DOUBLE_EQ(m.rel_err, std::sqrt(e1 * e1 + e2 * e2) / std::sqrt(25.01));
  EXPECT_DOUBLE_EQ(m.log_err, std::log1p(m.rel_err));
  EXPECT_DOUBLE_EQ(m.max_row_err, std::max(e1 / 5.0, e2 / 0.1));  // relative, per row
  EXPECT_DOUBLE_EQ(m.max_abs_err, e1);                            // absolute, over elements
  EXPECT_DOUBLE_EQ(m.cosine, (9 + 4.5 * 4 + double(0.2f) * 0.1) /
                                 (std::sqrt(9 + 4.5 * 4.5 + double(0.2f) * double(0.2f)) * std::sqrt(25.01)));
  // A row whose reference is zero has no relative error; NaN is never hidden.
  const std::vector<double> ref0 = {0, 0, 1, 0};
  const std::vector<float> o0 = {0.5f, 0, 1, 0};
  EXPECT_DOUBLE_EQ(measure(o0.data(), ref0.data(), 2, 2).max_row_err, 0.0);
  const std::vector<float> on = {3, NAN, 0.1f, 0};
  const error_metrics n = measure(on.data(), ref.data(), 2, 2);
  EXPECT_TRUE(std::isnan(n.rel_err) && std::isnan(n.max_row_err) && std::isnan(n.max_abs_err));
}

// Extreme finite scores: one query, one key, s = a. The fp32 kernel's P is exp2 of the rounding
// error of max_scaled = fl(a * eff) (eff = fl(log2 e / sqrt(16))): above 128 it is inf and the
// output NaN (flagged, no metrics), at or below -150 it is 0 and the output 0 (rel_err 1); in
// between the output is V. Each case is predicted here from fp32 arithmetic alone.
TEST(metrics, scores_beyond_2_31_give_what_the_kernels_fp32_exp2_gives) {
  const int d = 16;
  const float eff = 0.25f * 1.44269504f;
  std::vector<float> q(d, 0.0f), k(d, 0.0f), v(d);
  k[0] = 1.0f;
  for (int i = 0; i < d; ++i) v[i] = 0.5f + 0.25f * float(i);
  const kernel_spec spec = preset("fp32");
  int nan_cases = 0, zero_cases = 0, exact_cases = 0;
  for (int i = 0; i < 48; ++i) {
    const float a = std::ldexp(1.0f + float(i) / 48.0f, 34);  // a * eff in [2^32, 2^34): ulp/2 = 2^8 or 2^9
    volatile float prod = a * eff;                            // max_scaled, rounded (no contraction)
    const float r = std::fmaf(a, eff, -prod);                 // the max column's exp2 argument
    q[0] = a;
    const layer_view L{q.data(), k.data(), v.data(), 1, 1, 1, 1, d};
    const attend_result res = attend(spec, L, condition::plain);
    const head_report& h = res.heads[0];
    EXPECT_GE(h.exp2_arg_max, kExp2ArgFp32Limit) << a;
    if (r > 128) {
      ++nan_cases;
      EXPECT_TRUE(std::isnan(res.o[0])) << a << " r " << r;
      EXPECT_TRUE(h.stats.nan_flagged && std::isnan(h.rel_err) && std::isnan(h.cosine)) << a;
    } else if (r <= -150) {
      ++zero_cases;
      for (float x : res.o) EXPECT_EQ(x, 0.0f) << a << " r " << r;
      EXPECT_FALSE(h.stats.nan_flagged);
      EXPECT_DOUBLE_EQ(h.rel_err, 1.0) << a;
    } else if (std::fabs(r) < 100) {
      ++exact_cases;
      for (int c = 0; c < d; ++c) EXPECT_NEAR(res.o[c], v[c], 1e-6 * v[c]) << a << " r " << r;
    }
  }
  EXPECT_GT(nan_cases, 0);
  EXPECT_GT(zero_cases, 0);
  EXPECT_GT(exact_cases, 0);
  // Scores well below 2^31 are far from the limit.
  q[0] = 1e6f;
  const layer_view L{q.data(), k.data(), v.data(), 1, 1, 1, 1, d};
  EXPECT_LT(attend(spec, L, condition::plain).heads[0].exp2_arg_max, kExp2ArgFp32Limit);
}

}  // namespace
}  // namespace attnum::attention
