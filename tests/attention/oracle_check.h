#pragma once
// The bit-for-bit check of a preset against its independent oracle (preset_oracle.h), shared by
// preset_oracle_test and preset_oracle_slow_test.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "attention/preset_oracle.h"
#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"

// Shared by preset_oracle_test and preset_oracle_slow_test: runs the oracle of a preset, and
// checks the engine against it bit for bit on a random layer.
namespace attnum::attention::oracle_check {
inline std::vector<float> oracle_run(const std::string& name, const test::layer_data& L, int h, bool causal) {
  const auto it = oracle::oracles().find(name);
  if (it == oracle::oracles().end()) {
    ADD_FAILURE() << "no oracle for " << name << " (tests/attention/preset_oracle.h oracles())";
    return {};
  }
  return it->second(L, h, causal);
}

// Expects got == want bit for bit; on a mismatch reports how many differ and the first one
// (with its row, d columns per row), after `what`.
inline void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, int d,
                             const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0 && !bad++) first = i;
  EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first << " (row " << first / d << "): engine " << got[first]
                     << " oracle " << want[first];
}

// n_kv < 0: n_kv = n (self-attention); else n_q = n keys n_kv (the causal diagonal's alignment matters).
inline void check_preset(const std::string& name, int n, int d, bool gqa, bool causal, uint64_t seed,
                         bool out_fp32 = false, int n_kv = -1) {
  const int n_head = gqa ? 4 : 2, n_kv_head = gqa ? 2 : 2;
  if (n_kv < 0) n_kv = n;
  auto L = test::random_layer(n_head, n_kv_head, n, n_kv, d, seed, 1.5f);
  kernel_spec spec = preset(name);
  spec.enabled.o_cast = !out_fp32;
  oracle::g_out_fp32 = out_fp32;
  const auto p = prepare_layer(spec, L.view, condition::plain);
  std::vector<float> o(size_t(n) * d);
  for (int h = 0; h < n_head; ++h) {
    run_head(*p, h, causal, o.data());
    std::ostringstream what;
    what << name << " n " << n << " n_kv " << n_kv << " d " << d << " gqa " << gqa << " causal " << causal
         << " fp32 out " << out_fp32 << " head " << h;
    expect_same_bits(o, oracle_run(name, L, h, causal), d, what.str());
  }
}

// Every preset (oracle_run fails the test for a preset without an oracle), and a gtest name
// for a preset parameter ("fa3-acc13" -> "fa3_acc13"), shared by the oracle test suites.
inline const std::vector<std::string> kOraclePresets = preset_names();
struct preset_param_name {
  std::string operator()(const ::testing::TestParamInfo<std::string>& info) const {
    std::string s = info.param;
    for (char& c : s)
      if (c == '-') c = '_';
    return s;
  }
};
}  // namespace attnum::attention::oracle_check
