// Each preset, bit for bit, against the independent plain-loop implementation in preset_oracle.h
// (written from ../shared/docs/kernels.md), on fresh random inputs: n_tok {1, 7, 128},
// d_head {64, 128}, GQA on and off, causal and not. this file: n_tok 1000 (slow label).
#include <gtest/gtest.h>

#include <cstring>

#include "attention/preset_oracle.h"
#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {

std::vector<float> oracle_run(const std::string& name, const test::layer_data& L, int h, bool causal) {
  bool nan = false;
  if (name == "fa3") return oracle::run_fa3_like(L, h, causal, {false, oracle::fa3_like::fa3});
  if (name == "fa3-acc13") return oracle::run_fa3_like(L, h, causal, {true, oracle::fa3_like::fa3});
  if (name == "flashinfer-sm90") return oracle::run_fa3_like(L, h, causal, {false, oracle::fa3_like::flashinfer});
  if (name == "bf16") return oracle::run_fa3_like(L, h, causal, {false, oracle::fa3_like::bf16});
  if (name == "sage2pp-sm89") return oracle::run_sage2(L, h, causal, {32, 64, 128, 64, 2.25f, true, false}, &nan);
  if (name == "sage2-sm90") return oracle::run_sage2(L, h, causal, {16, 128, 64, 128, 448.0f, false, false}, &nan);
  if (name == "sage2-sm90-acc13") return oracle::run_sage2(L, h, causal, {16, 128, 64, 128, 448.0f, false, true}, &nan);
  if (name == "xqa-sm90") return oracle::run_xqa(L, h, causal);
  if (name == "hpcops") return oracle::run_hpcops(L, h, causal, false);
  if (name == "hpcops-s1") return oracle::run_hpcops(L, h, causal, true);
  ADD_FAILURE() << "no oracle for " << name;
  return {};
}

void check_preset(const std::string& name, int n, int d, bool gqa, bool causal, uint64_t seed, bool out_fp32 = false) {
  const int n_head = gqa ? 4 : 2, n_kv_head = gqa ? 2 : 2;
  auto L = test::random_layer(n_head, n_kv_head, n, n, d, seed, 1.5f);
  kernel_spec spec = preset(name);
  spec.enabled.o_cast = !out_fp32;
  oracle::g_out_fp32 = out_fp32;
  const auto p = prepare_layer(spec, L.view, condition::plain);
  std::vector<float> o(size_t(n) * d);
  for (int h = 0; h < n_head; ++h) {
    run_head(*p, h, causal, o.data());
    const auto want = oracle_run(name, L, h, causal);
    ASSERT_EQ(want.size(), o.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o.size(); ++i)
      if (std::memcmp(&o[i], &want[i], 4) != 0 && !bad++) first = i;
    EXPECT_EQ(bad, 0u) << name << " n " << n << " d " << d << " gqa " << gqa << " causal " << causal << " fp32 out " << out_fp32 << " head " << h
                       << ": first mismatch at " << first << " (row " << first / d << "): engine " << o[first]
                       << " oracle " << want[first];
  }
}

class preset_oracle_slow_test : public ::testing::TestWithParam<std::string> {};

TEST_P(preset_oracle_slow_test, bit_identical_1000) {
  // n_tok 1000: d 64 with GQA and bf16 output, d 128 without GQA and fp32 output.
  check_preset(GetParam(), 1000, 64, true, true, 9001, false);
  check_preset(GetParam(), 1000, 128, false, true, 9002, true);
}

INSTANTIATE_TEST_SUITE_P(presets, preset_oracle_slow_test,
                         ::testing::Values("fa3", "fa3-acc13", "flashinfer-sm90", "bf16", "sage2pp-sm89", "sage2-sm90",
                                           "sage2-sm90-acc13", "xqa-sm90", "hpcops", "hpcops-s1"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace attnum::attention
