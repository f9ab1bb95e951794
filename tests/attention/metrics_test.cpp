// The one metrics module: each metric against its closed form on a hand-made output.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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
  EXPECT_DOUBLE_EQ(m.max_abs_err, e1);                             // absolute, over elements
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

}  // namespace
}  // namespace attnum::attention
