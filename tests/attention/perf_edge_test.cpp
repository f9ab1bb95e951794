// The engine's fast paths (vector exp2f, fp32 INT8 GEMM, 4x32 ordered kernel, skipped masked
// columns and all-zero P8 chunks, 16-lane block max) against the independent oracle, bit for bit,
// on inputs that stress them: rows of zeros (zero scores: the max fold's +-0 tie), sparse and
// wide-range operands, n_q != n_kv, sizes off the tile grid, and 1 vs 2 threads.
#include <gtest/gtest.h>

#include <cstring>

#include "attention/oracle_check.h"
#include "attention/preset_oracle.h"
#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {

using oracle_check::expect_same_bits;
using oracle_check::oracle_run;

// Zeroes some whole Q rows and K rows, sparsifies the rest, and spreads magnitudes over many
// binades (tiny E4M3 subnormals next to saturated values).
void stress(test::layer_data& L, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<float> ex(-12.0f, 6.0f);
  const int d = L.view.d_head;
  for (auto* vec : {&L.q, &L.k, &L.v})
    for (size_t i = 0; i < vec->size(); ++i) {
      const int c = pick(rng);
      if ((i / d) % 5 == 2)
        (*vec)[i] = 0;  // whole zero rows
      else if (c < 3)
        (*vec)[i] = 0;
      else if (c < 5)
        (*vec)[i] *= std::exp2(ex(rng));
    }
  test::refresh(L);
}

void check(const std::string& name, int n_q, int n_kv, int d, bool causal, uint64_t seed, int threads) {
  auto L = test::random_layer(2, 1, n_q, n_kv, d, seed, 1.5f);
  if (seed % 2) stress(L, seed);
  set_threads(threads);
  const auto p = prepare_layer(preset(name), L.view, condition::plain);
  std::vector<float> o(static_cast<size_t>(n_q) * d);
  for (int h = 0; h < 2; ++h) {
    run_head(*p, h, causal, o.data());
    std::ostringstream what;
    what << name << " n_q " << n_q << " n_kv " << n_kv << " d " << d << " causal " << causal << " seed " << seed
         << " threads " << threads << " head " << h;
    expect_same_bits(o, oracle_run(name, L, h, causal), d, what.str());
  }
  set_threads(1);
}

class perf_edge_test : public ::testing::TestWithParam<std::string> {};

TEST_P(perf_edge_test, stressed_inputs_bit_identical) {
  uint64_t seed = 900;
  for (auto [n_q, n_kv] : {std::pair{97, 97}, {33, 250}, {230, 230}})
    for (bool causal : {true, false})
      for (int threads : {1, 2}) {
        ++seed;  // odd seeds get the stressed operands
        check(GetParam(), n_q, n_kv, seed % 4 < 2 ? 64 : 128, causal, seed, threads);
      }
}

INSTANTIATE_TEST_SUITE_P(presets, perf_edge_test,
                         ::testing::Values("fa3", "fa3-acc13", "bf16", "sage2pp-sm89", "hpcops"),
                         oracle_check::preset_param_name());

}  // namespace
}  // namespace attnum::attention
