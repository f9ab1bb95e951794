#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "attnum/core/version.h"
#include "cli_util.h"

TEST(version_test, cli_prints_library_version) {
  const auto r = attnum::test::run_command(ATTNUM_BINARY " --version");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "attnum " + std::string(attnum::tool_version()) + "\n");
}

namespace {
std::string run(const std::string& cmd) {
  const auto r = attnum::test::run_command(cmd);
  return r.status == 0 ? r.out : "exit status " + std::to_string(r.status) + ": " + r.out;
}
}  // namespace

// `attnum version --json` names the exact-sum path; ATTNUM_NO_AMX leaves the tiles, and
// ATTNUM_ISA=scalar forces the double GEMMs.
TEST(version_test, json_reports_fast_paths_and_no_amx_switch) {
  const std::string on = run(ATTNUM_BINARY " version --json");
  EXPECT_NE(on.find("\"version\":\"" + std::string(attnum::tool_version()) + "\""), std::string::npos) << on;
  bool known = false;
  for (const char* v : {"amx-bf16", "int16-planes-avx512", "int16-planes-avx2", "int16-planes-neon",
                        "double-fma-avx512", "double-fma-avx2", "double-gemm"})
    known = known || on.find("\"fp8_exact_sums\":\"" + std::string(v) + "\"") != std::string::npos;
  EXPECT_TRUE(known) << on;
  const std::string off = run("ATTNUM_NO_AMX=1 " ATTNUM_BINARY " version --json");
  EXPECT_EQ(off.find("\"fp8_exact_sums\":\"amx-bf16\""), std::string::npos) << off;
  EXPECT_EQ(off.find("\"isa\":\"amx\""), std::string::npos) << off;
  const std::string scalar = run("ATTNUM_ISA=scalar " ATTNUM_BINARY " version --json");
  EXPECT_NE(scalar.find("\"fp8_exact_sums\":\"double-gemm\""), std::string::npos) << scalar;
  EXPECT_NE(scalar.find("\"exp2f\":\"scalar\""), std::string::npos) << scalar;
  // ATTNUM_NO_PLANES: the double-FMA kernels instead of the int16 planes (vector paths only)
  const std::string np = run("ATTNUM_NO_AMX=1 ATTNUM_NO_PLANES=1 " ATTNUM_BINARY " version --json");
  EXPECT_EQ(np.find("int16-planes"), std::string::npos) << np;
  if (off.find("\"isa\":\"scalar\"") == std::string::npos) {
    EXPECT_NE(off.find("int16-planes"), std::string::npos) << off;
    EXPECT_NE(np.find("double-fma"), std::string::npos) << np;
  }
}
