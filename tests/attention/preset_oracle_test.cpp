// Each preset, bit for bit, against the independent plain-loop implementation in preset_oracle.h
// (written from ../shared/docs/kernels.md), on fresh random inputs: n_tok {1, 7, 128},
// d_head {64, 128}, GQA on and off, causal and not. n_tok 1000 is in preset_oracle_slow_test.
#include <gtest/gtest.h>

#include <cstring>

#include "attention/oracle_check.h"
#include "attention/preset_oracle.h"
#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {
using oracle_check::check_preset;
using oracle_check::oracle_run;


// The comparison can fail: a preset with one knob changed differs from its oracle.
TEST(preset_oracle_sensitivity, changed_knob_is_detected) {
  set_threads(1);
  const std::pair<const char*, const char*> cases[] = {
      {"fa3", "reverse=false"}, {"fa3", "rowsum=sequential"}, {"sage2pp-sm89", "p_offset=8"},
      {"sage2pp-sm89", "masked_tail_blocks=0"}, {"xqa-sm90", "p_scale=256"}, {"hpcops", "pv=into_o"},
      {"flashinfer-sm90", "epilogue=combined"}, {"fa3-acc13", "pv_acc.mant_bits=14"}};
  for (const auto& [name, knob] : cases) {
    auto L = test::random_layer(2, 1, 200, 200, 64, 4242, 1.5f);
    oracle::g_out_fp32 = true;
    const auto p = prepare_layer(apply_knobs(preset(name), {knob, "enabled.o_cast=false"}), L.view, condition::plain);
    std::vector<float> o(200 * 64);
    size_t bad = 0;
    for (int h = 0; h < 2; ++h) {
      run_head(*p, h, true, o.data());
      const auto want = oracle_run(name, L, h, true);
      for (size_t i = 0; i < o.size(); ++i) bad += std::memcmp(&o[i], &want[i], 4) != 0;
    }
    EXPECT_GT(bad, 0u) << name << " with " << knob << " still matches its oracle";
    oracle::g_out_fp32 = false;
  }
}

class preset_oracle_test : public ::testing::TestWithParam<std::string> {};

TEST_P(preset_oracle_test, bit_identical_small) {
  set_threads(1);
  uint64_t seed = 100;
  for (int n : {1, 7, 128})
    for (int d : {64, 128})
      for (bool gqa : {false, true})
        for (bool causal : {true, false}) {
          check_preset(GetParam(), n, d, gqa, causal, ++seed);
          check_preset(GetParam(), n, d, gqa, causal, seed, true);
        }
}

INSTANTIATE_TEST_SUITE_P(presets, preset_oracle_test,
                         ::testing::ValuesIn(oracle_check::kOraclePresets),
                         oracle_check::preset_param_name());

}  // namespace
}  // namespace attnum::attention
