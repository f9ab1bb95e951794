// Each preset, bit for bit, against the independent plain-loop implementation in preset_oracle.h
// (written from docs/kernels.md), on fresh random inputs: n_tok {1, 7, 128},
// d_head {64, 128}, GQA on and off, causal and not. this file: n_tok 1000 (slow label).
#include <gtest/gtest.h>

#include <cstring>

#include "attention/oracle_check.h"
#include "attention/preset_oracle.h"
#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {
using oracle_check::check_preset;

class preset_oracle_slow_test : public ::testing::TestWithParam<std::string> {};

TEST_P(preset_oracle_slow_test, bit_identical_1000) {
  // n_tok 1000: d 64 with GQA and bf16 output, d 128 without GQA and fp32 output.
  check_preset(GetParam(), 1000, 64, true, true, 9001, false);
  check_preset(GetParam(), 1000, 128, false, true, 9002, true);
}

INSTANTIATE_TEST_SUITE_P(presets, preset_oracle_slow_test, ::testing::ValuesIn(oracle_check::kOraclePresets),
                         oracle_check::preset_param_name());

}  // namespace
}  // namespace attnum::attention
