#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "attnum/core/version.h"

TEST(version_test, cli_prints_library_version) {
  FILE* p = popen(ATTNUM_BINARY " --version", "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0);
  EXPECT_EQ(out, "attnum " + std::string(attnum::tool_version()) + "\n");
}
