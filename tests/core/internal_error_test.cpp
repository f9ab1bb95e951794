// An internal error (a failed ATTNUM_ASSERT, here on a worker thread through the test hook
// ATTNUM_TEST_INTERNAL_ERROR) prints the failed check, the command line, the settings and a
// request to report it, and exits with status 3: never a bare abort, never bad input's 2.
#include <gtest/gtest.h>

#include <string>

#include "attnum/core/error.h"
#include "attnum/core/version.h"
#include "cli_util.h"

TEST(internal_error_test, reports_command_settings_and_hint_and_exits_3) {
  const auto r = attnum::test::run_command("ATTNUM_TEST_INTERNAL_ERROR=1 " ATTNUM_BINARY
                                           " --threads 2 study --out '/nonexistent/a b' 2>&1 >/dev/null");
  EXPECT_EQ(r.status, attnum::kInternalErrorStatus) << r.out;
  EXPECT_EQ(r.status, 3);
  auto has = [&](const std::string& s) { return r.out.find(s) != std::string::npos; };
  EXPECT_TRUE(has("internal error: test hook ATTNUM_TEST_INTERNAL_ERROR (1 + 1 != 3)")) << r.out;
  EXPECT_TRUE(has(std::string("command: ") + ATTNUM_BINARY + " --threads 2 study --out '/nonexistent/a b'\n")) << r.out;
  EXPECT_TRUE(has("settings: attnum " + std::string(attnum::tool_version()) + " (commit " +
                  std::string(attnum::git_commit()) + ")"))
      << r.out;
  EXPECT_TRUE(has(", threads ")) << r.out;
  EXPECT_TRUE(has(", isa ")) << r.out;
  EXPECT_TRUE(has("environment:")) << r.out;
  EXPECT_TRUE(has("This is a bug in attnum")) << r.out;
  EXPECT_TRUE(has("please report it with the command and settings above")) << r.out;
  // reported once, though it came from a worker thread
  EXPECT_EQ(r.out.find("internal error:"), r.out.rfind("internal error:")) << r.out;
}

TEST(internal_error_test, the_hook_off_leaves_the_command_alone) {
  const auto r = attnum::test::run_command("ATTNUM_TEST_INTERNAL_ERROR=0 " ATTNUM_BINARY " version 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}
