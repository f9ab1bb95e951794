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

// `attnum version --json` names the exact-sum path; ATTNUM_NO_AMX forces the double GEMMs.
TEST(version_test, json_reports_fast_paths_and_no_amx_switch) {
  const std::string on = run(ATTNUM_BINARY " version --json");
  EXPECT_NE(on.find("\"version\":\"" + std::string(attnum::tool_version()) + "\""), std::string::npos) << on;
  EXPECT_TRUE(on.find("\"fp8_exact_sums\":\"amx-bf16\"") != std::string::npos ||
              on.find("\"fp8_exact_sums\":\"double-gemm\"") != std::string::npos)
      << on;
  const std::string off = run("ATTNUM_NO_AMX=1 " ATTNUM_BINARY " version --json");
  EXPECT_NE(off.find("\"fp8_exact_sums\":\"double-gemm\""), std::string::npos) << off;
}
