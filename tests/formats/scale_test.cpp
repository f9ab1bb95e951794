// Scaled casts: each granularity against a plain-loop computation written out in the test.
#include "attnum/formats/scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"

namespace {
using namespace attnum::formats;

std::vector<float> matrix(int rows, int cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  for (float& v : x) v = d(rng);
  x[5] = 40.0f;  // an outlier
  return x;
}

// Checks t against scale = amax(members)/fmt_max + eps and grid = cast(x / scale) for the groups
// given as explicit element lists.
void check_groups(const std::vector<float>& x, int cols, const scale_spec& spec, const scaled_tensor& t,
                  const std::vector<std::vector<std::pair<int, int>>>& groups) {
  ASSERT_EQ(t.scales.size(), groups.size());
  const float fmax = static_cast<float>(spec.fmt_max > 0 ? spec.fmt_max : info(spec.fmt).max_finite);
  std::set<std::pair<int, int>> seen;
  for (const auto& g : groups) {
    float amax = 0;
    for (auto [r, c] : g) amax = std::max(amax, std::fabs(x[r * cols + c]));
    const float scale = amax / fmax + spec.eps;
    for (auto [r, c] : g) {
      ASSERT_TRUE(seen.insert({r, c}).second);
      ASSERT_EQ(t.scale_at(r, c), scale) << r << "," << c;
      const float y = x[r * cols + c] / scale;
      float want;
      if (spec.fmt == format::int8) {
        want = spec.rnd == rounding::half_away ? std::trunc(y + (y >= 0 ? 0.5f : -0.5f)) : std::nearbyint(y);
        want = std::clamp(want, -128.0f, 127.0f);
      } else {
        // the kernels' conversion: fp8 satfinite, bf16/fp16 IEEE overflow
        const bool sat = spec.fmt == format::e4m3fn || spec.fmt == format::e5m2;
        want = static_cast<float>(decode(spec.fmt, encode(spec.fmt, y, spec.rnd, sat)));
      }
      ASSERT_EQ(t.grid[r * cols + c], want) << r << "," << c;
      ASSERT_EQ(t.dequant(r, c), want * scale);
    }
  }
  ASSERT_EQ(seen.size(), x.size());
  EXPECT_FALSE(t.has_nan);
}

TEST(scale, tensor_block_token_channel) {
  const int rows = 70, cols = 12;
  const auto x = matrix(rows, cols, 1);
  for (auto gran :
       {scale_granularity::tensor, scale_granularity::block, scale_granularity::token, scale_granularity::channel}) {
    scale_spec s;
    s.gran = gran;
    s.block_rows = 32;
    const auto t = scaled_cast(x.data(), rows, cols, s);
    std::vector<std::vector<std::pair<int, int>>> groups;
    if (gran == scale_granularity::tensor) groups.resize(1);
    if (gran == scale_granularity::block) groups.resize(3);  // rows 0-31, 32-63, 64-69
    if (gran == scale_granularity::token) groups.resize(rows);
    if (gran == scale_granularity::channel) groups.resize(cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const int g = gran == scale_granularity::tensor  ? 0
                      : gran == scale_granularity::block ? r / 32
                      : gran == scale_granularity::token ? r
                                                         : c;
        groups[g].push_back({r, c});
      }
    check_groups(x, cols, s, t, groups);
    EXPECT_EQ(t.dequantized().size(), x.size());
  }
}

TEST(scale, sage_row_groups_int8) {
  const int rows = 96, cols = 8;
  const auto x = matrix(rows, cols, 2);
  // sm89 Q: in each 32-row segment, rows {r, r+8, r+16, r+24}, r = 0..7.
  scale_spec q{format::int8, scale_granularity::row_group, 128, 32, 8, 1, 0, 1e-7f, rounding::half_away};
  std::vector<std::vector<std::pair<int, int>>> gq;
  for (int seg = 0; seg < rows / 32; ++seg)
    for (int r = 0; r < 8; ++r) {
      gq.emplace_back();
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < cols; ++c) gq.back().push_back({seg * 32 + r + 8 * k, c});
    }
  check_groups(x, cols, q, scaled_cast(x.data(), rows, cols, q), gq);
  // sm89 K: in each 64-row segment, 4 groups: rows with r mod 8 in {2t, 2t+1}.
  scale_spec k = q;
  k.group_segment = 64;
  k.group_divisor = 2;
  std::vector<std::vector<std::pair<int, int>>> gk;
  for (int seg = 0; seg < 2; ++seg)
    for (int t = 0; t < 4; ++t) {
      gk.emplace_back();
      for (int r = seg * 64; r < std::min(rows, seg * 64 + 64); ++r)
        if (r % 8 / 2 == t)
          for (int c = 0; c < cols; ++c) gk.back().push_back({r, c});
    }
  check_groups(x, cols, k, scaled_cast(x.data(), rows, cols, k), gk);
}

TEST(scale, sage_v_per_channel_reciprocal_and_zero_channel) {
  const int rows = 10, cols = 3;
  auto x = matrix(rows, cols, 3);
  for (int r = 0; r < rows; ++r) x[r * cols + 2] = 0.0f;  // an all-zero channel
  scale_spec v;
  v.gran = scale_granularity::channel;
  v.fmt_max = 2.25;
  v.multiply_by_reciprocal = true;
  const auto t = scaled_cast(x.data(), rows, cols, v);
  for (int c = 0; c < 2; ++c) {
    float amax = 0;
    for (int r = 0; r < rows; ++r) amax = std::max(amax, std::fabs(x[r * cols + c]));
    const float recip = 2.25f / amax;
    EXPECT_EQ(t.scales[c], amax / 2.25f);
    for (int r = 0; r < rows; ++r) EXPECT_EQ(t.grid[r * cols + c], quantize_e4m3_sat(x[r * cols + c] * recip));
  }
  EXPECT_TRUE(t.has_nan);  // 0 * (2.25 / 0) is NaN, as in the kernel
  EXPECT_TRUE(std::isnan(t.grid[2]));
  // With an epsilon the zero channel is guarded: scale eps, values 0.
  v.eps = 1e-7f;
  const auto g = scaled_cast(x.data(), rows, cols, v);
  EXPECT_FALSE(g.has_nan);
  EXPECT_EQ(g.scales[2], 1e-7f);
  EXPECT_EQ(g.grid[2], 0.0f);
}

// The one all-zero rule (scale.h): x / scale without eps gives scale 1 and zeros, not NaN.
TEST(scale, all_zero_group_without_eps_is_scale_one) {
  std::vector<float> x = {0.0f, -0.0f, 0.0f, 0.0f, 3.0f, -1.5f};
  scale_spec s;
  s.gran = scale_granularity::token;
  const auto t = scaled_cast(x.data(), 3, 2, s);
  EXPECT_FALSE(t.has_nan);
  EXPECT_EQ(t.scales[0], 1.0f);
  EXPECT_EQ(t.scales[1], 1.0f);
  EXPECT_EQ(t.scales[2], 3.0f / 448.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.grid[i], 0.0f);
  bool nan = false;
  EXPECT_EQ(group_scale(0.0, s, &nan), 1.0f);
  EXPECT_FALSE(nan);
  s.multiply_by_reciprocal = true;  // Sage's V: 0 * (fmt_max / 0) is NaN in the kernel, flagged
  EXPECT_EQ(group_scale(0.0, s, &nan), 0.0f);
  EXPECT_TRUE(nan);
  EXPECT_TRUE(std::isnan(cast_in_group(0.0f, 0.0, 0.0f, s)));
}

TEST(scale, saturation_count_and_errors) {
  std::vector<float> x = {1.0f, -1.0f, 0.5f, 0.25f};
  scale_spec s;
  s.fmt_max = 1000;  // scaled values 1000, -1000, 500 exceed 448; 250 does not
  const auto t = scaled_cast(x.data(), 1, 4, s);
  EXPECT_EQ(t.saturated, 3);
  EXPECT_EQ(t.grid[0], 448.0f);
  EXPECT_EQ(group_scale(448.0, scale_spec{}), 1.0f);
  // int8's range is [-128, 127]: with fmt_max 128 and amax 128 the scale is 1, so -128 fits and
  // 127.5 lies outside (it saturates to 127).
  scale_spec i8;
  i8.fmt = format::int8;
  i8.fmt_max = 128;
  std::vector<float> xi = {-128.0f, 127.5f, 100.0f};
  const auto ti = scaled_cast(xi.data(), 1, 3, i8);
  EXPECT_EQ(ti.scales[0], 1.0f);
  EXPECT_EQ(ti.saturated, 1);
  EXPECT_EQ(ti.grid[0], -128.0f);
  EXPECT_EQ(ti.grid[1], 127.0f);
  scale_spec bad;
  bad.gran = scale_granularity::block;
  bad.block_rows = 0;
  EXPECT_THROW(scaled_cast(x.data(), 1, 4, bad), attnum::error);
  EXPECT_EQ(parse_granularity("channel"), scale_granularity::channel);
  EXPECT_THROW(parse_granularity("head"), attnum::error);
}

// The engine casts through this scaled cast: a prepared layer's per-head K (fa3), Sage's
// per-thread INT8 Q groups and per-channel V (sage2pp-sm89) equal scaled_cast of the same head.
TEST(scale, engine_uses_the_one_scaled_cast) {
  const int n = 70, d = 16;
  const auto q = matrix(n, d, 11), k = matrix(n, d, 12);
  auto v = matrix(n, d, 13);
  for (int r = 0; r < n; ++r) v[r * d + 3] = 0.0f;  // an all-zero V channel: NaN, flagged
  const attnum::attention::layer_view lv{q.data(), k.data(), v.data(), 1, 1, n, n, d};
  using attnum::attention::preset;
  const auto fa3 = prepare_layer(preset("fa3"), lv, attnum::attention::condition::plain);
  const auto kt = scaled_cast(k.data(), n, d, scale_spec{});
  EXPECT_EQ(std::vector<float>(fa3->k8.values.begin(), fa3->k8.values.end()), kt.grid);
  for (int t = 0; t < n; ++t) EXPECT_EQ(fa3->k8.row_scale[t], kt.scales[0]);
  const auto sage = prepare_layer(preset("sage2pp-sm89"), lv, attnum::attention::condition::plain);
  scale_spec qs;
  qs.fmt = format::int8, qs.gran = scale_granularity::row_group, qs.eps = 1e-7f, qs.rnd = rounding::half_away;
  qs.group_segment = 32, qs.group_modulus = 8, qs.group_divisor = 1, qs.fmt_max = 127;
  const auto qt = scaled_cast(q.data(), n, d, qs);
  EXPECT_EQ(std::vector<float>(sage->q8.values.begin(), sage->q8.values.end()), qt.grid);
  for (int t = 0; t < n; ++t) EXPECT_EQ(sage->q8.row_scale[t], qt.scale_at(t, 0));
  scale_spec vs;
  vs.gran = scale_granularity::channel, vs.fmt_max = 2.25, vs.multiply_by_reciprocal = true;
  const auto vt = scaled_cast(v.data(), n, d, vs);
  EXPECT_TRUE(vt.has_nan);
  EXPECT_TRUE(sage->v8.nan_flagged);
  for (size_t i = 0; i < vt.grid.size(); ++i)
    EXPECT_TRUE(sage->v8.values[i] == vt.grid[i] || (std::isnan(sage->v8.values[i]) && std::isnan(vt.grid[i]))) << i;
  for (int c = 0; c < d; ++c) EXPECT_EQ(sage->v8.col_scale[c], vt.scales[c]);
}

}  // namespace
