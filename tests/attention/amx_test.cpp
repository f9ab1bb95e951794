// The AMX-BF16 exact chunk sums and the AMX-INT8 integer sums (attention/amx.h) against
// independent oracles: the formats layer's accumulate_dot (exact chunk sums in double-double, one
// rounding per chunk) on E4M3 data that spans every exponent, sits on the accumulator windows'
// bounds, or is sparse in small values; plain integer loops for INT8; and the whole engine with
// the tile path on against the same engine with it off (double or fp32 GEMMs), bit for bit, for
// every preset. Skips where the CPU or OS has no AMX (the engine then never takes this path).
#include "attnum/attention/amx.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/parallel.h"
#include "oracles/accumulator_oracle.h"
#include "attnum/formats/format.h"

namespace attnum::attention {
namespace {

#define REQUIRE_AMX()                                                                        \
  if (!amx::available())                                                                     \
  GTEST_SKIP() << "no AMX-BF16 here (CPU, OS or ATTNUM_NO_AMX): the engine uses its double " \
                  "GEMMs"

enum class dist { gaussian, log_uniform, extremes, max_same_sign };

// E4M3 grid values (as the engine's casts hold them: |x| <= 448).
std::vector<float> e4m3_values(size_t n, uint64_t seed, dist d) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 100.0f);
  std::uniform_real_distribution<float> u(-10.5f, 8.81f);
  std::uniform_int_distribution<int> pick(0, 15);
  // the planes' edges: 448, 8 and 7.5 (planes 0 / 1), 0.125 and 0.1171875 (planes 1 / 2), 2^-9
  const float edges[] = {448.0f, 8.0f, 7.5f, 0.125f, 0.1171875f, 0x1p-9f, 0.0f, 240.0f};
  std::vector<float> v(n);
  for (auto& x : v) {
    const float sign = (rng() & 1) ? -1.0f : 1.0f;
    switch (d) {
      case dist::gaussian:
        x = nd(rng);
        break;
      case dist::log_uniform:
        x = pick(rng) == 0 ? 0.0f : sign * std::exp2(u(rng));
        break;
      case dist::extremes:
        x = sign * edges[pick(rng) % 8];
        break;
      case dist::max_same_sign: {  // each plane at its maximum, one sign: the windows' worst sums
        const float m[] = {448.0f, 7.5f, 0.1171875f};
        x = m[pick(rng) % 3];
        break;
      }
    }
    x = formats::quantize_e4m3_sat(x);
  }
  return v;
}

oracle::accumulator_model model_of(const accumulator_spec& a) {
  attnum::oracle::accumulator_model m;
  m.k_step = a.k_step;
  m.mantissa_bits = a.mant_bits;
  m.kind = a.kind == acc_kind::truncated ? attnum::oracle::accum_kind::truncated
           : a.kind == acc_kind::fp16    ? attnum::oracle::accum_kind::fp16
                                         : attnum::oracle::accum_kind::fp32;
  return m;
}

const accumulator_spec kModels[] = {{acc_kind::fp32, 23, 32}, {acc_kind::truncated, 13, 32}, {acc_kind::fp16, 10, 32}};

template <typename Acc>
void check_qk(int n_q, int n_kv, int d, dist dq, dist dk, uint64_t seed) {
  const auto q = e4m3_values(static_cast<size_t>(n_q) * d, seed, dq);
  const auto k = e4m3_values(static_cast<size_t>(n_kv) * d, seed + 1, dk);
  amx::exact_qk e;
  ASSERT_TRUE(e.build(q.data(), n_q, k.data(), n_kv, d));
  for (const auto& model : kModels) {
    if (std::is_same_v<Acc, float> && model.kind == acc_kind::fp16) continue;
    const auto fm = model_of(model);
    // tiles of up to 64 rows and blocks of 48 keys, as the engine calls it (starts at multiples of
    // 16)
    for (int r0 = 0; r0 < n_q; r0 += 64)
      for (int j0 = 0; j0 < n_kv; j0 += 48) {
        const int rows = std::min(64, n_q - r0), n = std::min(48, n_kv - j0), ld = 48;
        std::vector<Acc> acc(static_cast<size_t>(rows) * ld,
                             Acc(-7));  // not read: the first chunk stores
        e.run(r0, rows, j0, n, model, acc.data(), ld, kNoMask);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n; ++j) {
            const float want = attnum::oracle::accumulate_dot(fm, 0.0f, q.data() + static_cast<size_t>(r0 + r) * d,
                                                              k.data() + static_cast<size_t>(j0 + j) * d, d);
            const float got = static_cast<float>(acc[static_cast<size_t>(r) * ld + j]);
            ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(got))
                << "row " << r0 + r << " key " << j0 + j << " d " << d << " model " << static_cast<int>(model.kind)
                << " want " << want << " got " << got;
          }
      }
  }
}

TEST(amx_exact, qk_matches_chunk_oracle_on_every_distribution) {
  REQUIRE_AMX();
  uint64_t seed = 11;
  for (dist dq : {dist::gaussian, dist::log_uniform, dist::extremes, dist::max_same_sign})
    for (dist dk : {dist::gaussian, dist::log_uniform, dist::extremes, dist::max_same_sign})
      for (int d : {32, 80, 128}) {
        check_qk<double>(37, 50, d, dq, dk, ++seed);
        check_qk<float>(70, 33, d, dq, dk, ++seed);
      }
}

TEST(amx_exact, qk_causal_skip_zeroes_only_fully_masked_tiles) {
  REQUIRE_AMX();
  const int n = 96, d = 64;
  const auto q = e4m3_values(static_cast<size_t>(n) * d, 5, dist::log_uniform);
  const auto k = e4m3_values(static_cast<size_t>(n) * d, 6, dist::gaussian);
  amx::exact_qk e;
  ASSERT_TRUE(e.build(q.data(), n, k.data(), n, d));
  const accumulator_spec model{acc_kind::fp32, 23, 32};
  std::vector<double> acc(64 * 96, -1.0);
  e.run(0, 64, 0, 96, model, acc.data(), 96, 0);  // key j masked for row i when j > i
  for (int r = 0; r < 64; ++r)
    for (int j = 0; j < 96; ++j) {
      const bool skipped = (j / 16) * 16 >= (r / 16) * 16 + 16;  // the whole 16 x 16 tile is masked
      const double want =
          skipped ? 0.0
                  : attnum::oracle::accumulate_dot(model_of(model), 0.0f, q.data() + static_cast<size_t>(r) * d,
                                                   k.data() + static_cast<size_t>(j) * d, d);
      ASSERT_EQ(acc[static_cast<size_t>(r) * 96 + j], want) << "row " << r << " key " << j;
    }
}

TEST(amx_exact, small_value_plane_sparse_and_dense_give_the_same_sums) {
  REQUIRE_AMX();
  // Gaussian data has few values below 1/8 (Q's plane 2 goes to the sparse list); log-uniform
  // data has many (it stays in the tiles). Mixing a sparse Q with both kinds of K covers both.
  check_qk<double>(130, 70, 128, dist::gaussian, dist::log_uniform, 99);
  check_qk<double>(130, 70, 128, dist::log_uniform, dist::gaussian, 98);
}

TEST(amx_exact, rejects_values_off_the_e4m3_grid) {
  REQUIRE_AMX();
  std::vector<float> q(16 * 32, 1.0f), k(16 * 32, 1.0f);
  q[5] = 1.0625f;  // 4 fraction bits
  amx::exact_qk e;
  EXPECT_FALSE(e.build(q.data(), 16, k.data(), 16, 32));
  q[5] = 480.0f;  // above 448
  EXPECT_FALSE(e.build(q.data(), 16, k.data(), 16, 32));
  q[5] = 0x1p-10f;  // below the smallest subnormal
  EXPECT_FALSE(e.build(q.data(), 16, k.data(), 16, 32));
  q[5] = 0.5f;
  EXPECT_TRUE(e.build(q.data(), 16, k.data(), 16, 32));
}

// INT8 QK: exact int32 sums (as doubles) against a plain integer loop, extremes included.
TEST(amx_exact, int8_qk_matches_integer_dot_products) {
  REQUIRE_AMX();
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<int> u(-128, 127), pick(0, 3);
  for (int d : {16, 64, 80, 128, 200}) {
    const int n_q = 37, n_kv = 50;
    std::vector<float> q(static_cast<size_t>(n_q) * d), k(static_cast<size_t>(n_kv) * d);
    for (auto* v : {&q, &k})
      for (auto& x : *v) x = static_cast<float>(pick(rng) == 0 ? (rng() & 1 ? 127 : -128) : u(rng));
    amx::int8_qk e;
    ASSERT_TRUE(e.build(q.data(), n_q, k.data(), n_kv, d));
    for (int r0 = 0; r0 < n_q; r0 += 32)
      for (int j0 = 0; j0 < n_kv; j0 += 48) {
        const int rows = std::min(32, n_q - r0), n = std::min(48, n_kv - j0);
        std::vector<double> acc(static_cast<size_t>(rows) * 48, -1.0);
        e.run(r0, rows, j0, n, acc.data(), 48, kNoMask);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n; ++j)
            ASSERT_EQ(acc[static_cast<size_t>(r) * 48 + j], test::int8_dot(q, r0 + r, k, j0 + j, d)) << "d " << d;
      }
  }
  std::vector<float> q(16 * 16, 3.0f), k(16 * 16, -5.0f);
  amx::int8_qk e;
  q[7] = 2.5f;  // not an integer
  EXPECT_FALSE(e.build(q.data(), 16, k.data(), 16, 16));
  q[7] = 128.0f;  // out of range
  EXPECT_FALSE(e.build(q.data(), 16, k.data(), 16, 16));
  q[7] = -128.0f;
  EXPECT_TRUE(e.build(q.data(), 16, k.data(), 16, 16));
}

void check_pv(int rows, int n_kv, int d, int j0, int n, dist dp, dist dv, uint64_t seed) {
  const auto v = e4m3_values(static_cast<size_t>(n_kv) * d, seed, dv);
  auto p = e4m3_values(static_cast<size_t>(rows) * 64, seed + 1, dp);
  for (auto& x : p) x = std::fabs(x);  // P >= 0
  std::vector<char> live(rows, 1);
  live[3 % rows] = 0;
  amx::exact_pv e;
  ASSERT_TRUE(e.build(v.data(), n_kv, d));
  for (const auto& model : kModels) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<float> acc(static_cast<size_t>(rows) * d);
    for (auto& a : acc) a = formats::quantize_fp16(static_cast<float>(rng() % 2001) - 1000.0f) / 8.0f;
    const auto before = acc;
    ASSERT_TRUE(e.run(p.data(), 64, rows, live.data(), j0, n, model, acc.data(), d));
    for (int r = 0; r < rows; ++r)
      for (int ch = 0; ch < d; ++ch) {
        const size_t at = static_cast<size_t>(r) * d + ch;
        const float want = live[r] ? attnum::oracle::accumulate_dot(model_of(model), before[at],
                                                                    p.data() + static_cast<size_t>(r) * 64,
                                                                    v.data() + static_cast<size_t>(j0) * d + ch, n, d)
                                   : before[at];
        ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(acc[at]))
            << "row " << r << " channel " << ch << " model " << static_cast<int>(model.kind);
      }
  }
}

TEST(amx_exact, pv_matches_chunk_oracle) {
  REQUIRE_AMX();
  uint64_t seed = 40;
  for (dist dp : {dist::gaussian, dist::log_uniform, dist::extremes, dist::max_same_sign})
    for (dist dv : {dist::gaussian, dist::log_uniform, dist::extremes, dist::max_same_sign}) {
      check_pv(37, 150, 64, 32, 64, dp, dv, ++seed);   // two whole chunks
      check_pv(20, 150, 80, 96, 50, dp, dv, ++seed);   // a short last chunk (keys past n read as 0)
      check_pv(16, 131, 128, 128, 3, dp, dv, ++seed);  // past the end of V's padding-free part
    }
}

TEST(amx_exact, pv_nan_in_a_live_row_falls_back_untouched) {
  REQUIRE_AMX();
  const auto v = e4m3_values(64 * 32, 1, dist::gaussian);
  std::vector<float> p(16 * 64, 1.0f), acc(16 * 32, 2.0f);
  std::vector<char> live(16, 1);
  amx::exact_pv e;
  ASSERT_TRUE(e.build(v.data(), 64, 32));
  p[5 * 64 + 7] = NAN;
  EXPECT_FALSE(e.run(p.data(), 64, 16, live.data(), 0, 64, {acc_kind::fp32, 23, 32}, acc.data(), 32));
  for (float a : acc) ASSERT_EQ(a, 2.0f);
  live[5] = 0;  // a dead row's NaN is never read
  EXPECT_TRUE(e.run(p.data(), 64, 16, live.data(), 0, 64, {acc_kind::fp32, 23, 32}, acc.data(), 32));
}

TEST(amx_exact, engine_with_tiles_equals_engine_without) {
  REQUIRE_AMX();
  set_threads(1);
  int compared = 0;
  for (const auto& name : preset_names()) {
    const kernel_spec& s = preset(name);
    for (int n : {1, 7, 130, 300})
      for (int d : {64, 80, 128})
        for (bool causal : {true, false})
          for (bool wide : {false, true}) {
            auto L = wide ? test::wide_layer(4, 2, n, d, 1000 + n + d)
                          : test::random_layer(4, 2, n, n, d, 2000 + n + d, 3.0f);
            const uint64_t before = amx::run_count();
            const auto with = run_layer(s, L.view, condition::plain, causal);
            const bool used = amx::run_count() > before;
            amx::set_enabled(false);
            const auto without = run_layer(s, L.view, condition::plain, causal);
            amx::set_enabled(true);
            ASSERT_EQ(with.size(), without.size());
            for (size_t i = 0; i < with.size(); ++i)
              ASSERT_EQ(std::bit_cast<uint32_t>(with[i]), std::bit_cast<uint32_t>(without[i]))
                  << name << " n " << n << " d " << d << " causal " << causal << " wide " << wide << " at " << i;
            compared += used;
          }
  }
  EXPECT_GT(compared, 0) << "no preset took the tile path";
}

// Bottom-right causal alignment (n_q < n_kv, one query row as in decoding), head
// dimensions that are not multiples of 32 or 16 (QK chunks padded; PV falls back when d % 16 != 0),
// GQA, and the rotated / centred conditions.
TEST(amx_exact, engine_with_tiles_equals_engine_without_on_odd_shapes) {
  REQUIRE_AMX();
  set_threads(2);
  for (const char* name : {"fa3", "fa3-acc13", "sage2-sm90", "xqa-sm90", "sage2pp-sm89"})
    for (auto [n_q, n_kv] : {std::pair{37, 130}, std::pair{1, 77}, std::pair{64, 300}})
      for (int d : {40, 48, 256})
        for (condition cond : {condition::plain, condition::center_rotate}) {
          if (cond != condition::plain && (d & (d - 1))) continue;  // the Hadamard needs a power of two
          auto L = test::random_layer(4, 2, n_q, n_kv, d, 77 + n_q + d, 2.0f);
          L.k[5] = 700.0f, L.v[9] = -0.001f;
          test::refresh(L);
          const auto with = run_layer(preset(name), L.view, cond, true);
          amx::set_enabled(false);
          const auto without = run_layer(preset(name), L.view, cond, true);
          amx::set_enabled(true);
          for (size_t i = 0; i < with.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(with[i]), std::bit_cast<uint32_t>(without[i]))
                << name << " n_q " << n_q << " n_kv " << n_kv << " d " << d << " at " << i;
        }
  set_threads(1);
}

TEST(amx_exact, fa3_takes_the_tile_path) {
  REQUIRE_AMX();
  auto L = test::random_layer(1, 1, 256, 256, 128, 3);
  const uint64_t before = amx::run_count();
  (void)run_layer(preset("fa3"), L.view, condition::plain, true);
  EXPECT_GT(amx::run_count(), before);
}

}  // namespace
}  // namespace attnum::attention
