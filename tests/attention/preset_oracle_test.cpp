// Each preset, bit for bit, against the independent plain-loop implementation in preset_oracle.h
// (written from docs/kernels.md), on fresh random inputs: n_tok {1, 7, 128},
// d_head {64, 128}, GQA on and off, causal and not. n_tok 1000 is in preset_oracle_slow_test.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "attention/oracle_check.h"
#include "attention/preset_oracle.h"
#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {
using oracle_check::check_preset;
using oracle_check::oracle_run;

// The oracles are named by preset: every preset of kernel_spec.cpp has one, and every oracle is
// a preset's (a renamed or removed preset leaves no stale oracle behind).
TEST(preset_oracle_registry, oracles_are_exactly_the_presets) {
  std::set<std::string> presets, with_oracle;
  for (const auto& n : preset_names()) presets.insert(n);
  for (const auto& [n, fn] : oracle::oracles()) with_oracle.insert(n);
  EXPECT_EQ(with_oracle, presets);
}

// The comparison can fail: a preset with one knob changed differs from its oracle. d 128 where
// the knob only matters when 1/sqrt(d) is not a power of two (FlashInfer's scale order); the
// non-causal cases check the masked-tail rule that holds whatever the causal flag.
TEST(preset_oracle_sensitivity, changed_knob_is_detected) {
  set_threads(1);
  struct knob_case {
    const char *name, *knob;
    int d;
    bool causal;
  };
  const knob_case cases[] = {{"fa3", "reverse=false", 64, true},
                             {"fa3", "rowsum=sequential", 64, true},
                             {"sage2pp-sm89", "p_offset=8", 64, true},
                             {"sage2pp-sm89", "masked_tail_blocks=0", 64, true},
                             {"sage2pp-sm89", "masked_tail_blocks=1", 64, false},
                             {"sage2-sm90", "masked_tail_blocks=2", 64, false},
                             {"sage2-sm90", "masked_tail_blocks=2", 64, true},
                             {"xqa-sm90", "p_scale=256", 64, true},
                             {"hpcops", "pv=into_o", 64, true},
                             {"flashinfer-sm90", "epilogue=combined", 64, true},
                             {"flashinfer-sm90", "fold_dq_first=false", 128, true},
                             {"fa3-acc13", "pv_acc.mant_bits=14", 64, true},
                             {"sage1", "pv_acc.k_step=32", 64, true},
                             {"sage1", "smooth_k=false", 64, false},
                             {"fp32", "rowsum=wgmma", 64, true},
                             {"generic", "reverse=true", 64, false},
                             {"sage1", "triton_fp_fusion=false", 64, true},
                             {"xqa-sm90", "alpha_expf=false", 64, true},
                             {"xqa-sm90", "epilogue=separate", 64, true},
                             {"xqa-sm90", "rowsum=sequential", 64, true},
                             {"xqa-sm90", "q.gran=tensor", 64, true},
                             {"hpcops", "rowsum=wgmma", 64, true},
                             {"hpcops", "k.gran=token", 64, true},
                             {"bf16", "block_n=128", 128, false},
                             {"hpcops", "fma_contract=false", 64, true},
                             {"fa3", "fma_contract=false", 64, true},
                             {"flashinfer-sm90", "fma_contract=false", 64, true},
                             {"bf16", "fma_contract=false", 64, false},
                             {"sage2-sm90", "fma_contract=false", 64, true},
                             {"sage2-sm90", "fma_contract_o=false", 64, true},
                             {"sage2pp-sm89", "fma_contract=false", 64, true},
                             {"sage2pp-sm89", "fma_contract_o=false", 64, true}};
  for (const auto& [name, knob, d, causal] : cases) {
    auto L = test::random_layer(2, 1, 200, 200, d, 4242, 1.5f);
    oracle::g_out_fp32 = true;
    const auto p = prepare_layer(apply_knobs(preset(name), {knob, "enabled.o_cast=false"}), L.view, condition::plain);
    std::vector<float> o(size_t(200) * d);
    size_t bad = 0;
    for (int h = 0; h < 2; ++h) {
      run_head(*p, h, causal, o.data());
      const auto want = oracle_run(name, L, h, causal);
      for (size_t i = 0; i < o.size(); ++i) bad += std::memcmp(&o[i], &want[i], 4) != 0;
    }
    EXPECT_GT(bad, 0u) << name << " with " << knob << " (d " << d << ", causal " << causal
                       << ") still matches its oracle";
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

// n_q < n_kv (the queries are the last n_q tokens): where the causal diagonal sits (top-left for
// Sage, which counts q_idx from 0; bottom-right for the others) and blocks past it.
TEST_P(preset_oracle_test, bit_identical_cross_lengths) {
  set_threads(1);
  uint64_t seed = 900;
  for (const auto& [nq, nk] : {std::pair{7, 150}, std::pair{70, 200}})
    for (bool causal : {true, false}) check_preset(GetParam(), nq, 64, true, causal, ++seed, true, nk);
}

INSTANTIATE_TEST_SUITE_P(presets, preset_oracle_test, ::testing::ValuesIn(oracle_check::kOraclePresets),
                         oracle_check::preset_param_name());

}  // namespace
}  // namespace attnum::attention
