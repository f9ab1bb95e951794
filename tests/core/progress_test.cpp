// The one progress line (core/progress.h): its text (percentage, count, rate, elapsed, remaining),
// when it is drawn (terminal, --progress, --quiet), and the CLI's global flags.
#include "attnum/core/progress.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cli_util.h"

namespace {

TEST(progress_test, durations) {
  EXPECT_EQ(attnum::format_duration(0), "0:00");
  EXPECT_EQ(attnum::format_duration(59.4), "0:59");
  EXPECT_EQ(attnum::format_duration(61), "1:01");
  EXPECT_EQ(attnum::format_duration(3600 + 5 * 60 + 7), "1:05:07");
  EXPECT_EQ(attnum::format_duration(-1), "?");
  EXPECT_EQ(attnum::format_duration(1.0 / 0.0), "?");
}

TEST(progress_test, text_has_rate_elapsed_and_remaining) {
  // 50 of 200 units in 25 s: 2 units/s, 150 left -> 75 s.
  const std::string line = attnum::progress_text("heads", 50, 200, 25.0, "units");
  EXPECT_EQ(line, "heads  25% [#######.......................] 50/200 units  2 units/s  elapsed 0:25  left 1:15");
  // Slower than one unit a second: still units per second (one rate unit), three digits.
  EXPECT_NE(attnum::progress_text("loss", 1, 4, 8.0, "windows").find("0.125 windows/s  elapsed 0:08  left 0:24"),
            std::string::npos);
  EXPECT_NE(attnum::progress_text("loss", 3000, 4000, 8.0, "windows").find(" 375 windows/s "), std::string::npos);
  // Without the bar (the log form).
  EXPECT_EQ(attnum::progress_text("heads", 50, 200, 25.0, "units", false),
            "heads  25% 50/200 units  2 units/s  elapsed 0:25  left 1:15");
  // Nothing done yet: no rate and no estimate.
  EXPECT_EQ(attnum::progress_text("capture", 0, 3, 1.0, "texts"),
            "capture   0% [..............................] 0/3 texts  elapsed 0:01");
  EXPECT_NE(attnum::progress_text("x", 3, 3, 3.0, "steps").find("100% [##############################] 3/3"),
            std::string::npos);
}

TEST(progress_test, drawn_only_when_wanted) {
  attnum::set_progress_mode(attnum::progress_mode::never);
  testing::internal::CaptureStderr();
  {
    attnum::progress bar("quiet", 3);
    EXPECT_FALSE(bar.enabled());
    bar.add(3);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  attnum::set_progress_mode(attnum::progress_mode::always);
  testing::internal::CaptureStderr();
  {
    attnum::progress bar("loud", 3, "steps");
    attnum::progress off("off", 3, "steps", false);  // the command's own --quiet wins
    for (int i = 0; i < 3; ++i) bar.add(), off.add();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("3/3 steps"), std::string::npos) << err;
  EXPECT_EQ(err.find("off"), std::string::npos) << err;
  EXPECT_EQ(err.back(), '\n');
  attnum::set_progress_mode(attnum::progress_mode::automatic);
}

TEST(progress_test, log_lines_when_not_a_terminal) {
  // The captured stderr is a file, not a terminal: plain lines, a header saying what a unit is,
  // and at most one line per 5% (or 10 s) however many updates come.
  attnum::set_progress_mode(attnum::progress_mode::always);
  testing::internal::CaptureStderr();
  {
    attnum::progress bar("heads", 1000, "units", true, "one (model, layer, text)");
    for (int i = 0; i < 1000; ++i) bar.add();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  attnum::set_progress_mode(attnum::progress_mode::automatic);
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_EQ(err.find('['), std::string::npos) << err;  // no bar in a log
  EXPECT_EQ(err.rfind("heads: 1000 units to do (one unit: one (model, layer, text))\n", 0), 0u) << err;
  const auto lines = std::count(err.begin(), err.end(), '\n');
  EXPECT_GE(lines, 2) << err;
  EXPECT_LE(lines, 1 + 20 + 1) << err;  // header, one per 5%, the first update
  EXPECT_NE(err.find("heads 100% 1000/1000 units"), std::string::npos) << err;
  EXPECT_EQ(err.find("1000/1000"), err.rfind("1000/1000")) << "the final line once: " << err;
}

TEST(progress_test, log_rate_bound) {
  using attnum::progress_log_due;
  EXPECT_TRUE(progress_log_due(1, 1000, -1, 0));      // the first update
  EXPECT_FALSE(progress_log_due(49, 1000, 1, 9.9));   // under 5% and 10 s
  EXPECT_TRUE(progress_log_due(51, 1000, 1, 0));      // 5% since the last line
  EXPECT_TRUE(progress_log_due(2, 1000, 1, 10));      // 10 s since the last line
  EXPECT_TRUE(progress_log_due(1000, 1000, 999, 0));  // the end
  EXPECT_TRUE(progress_log_due(2, 3, 1, 0));          // small totals: every unit
}

TEST(progress_test, cli_flags) {
  const std::string sim = "pcast simulate --quick --delta 4 --n-tok 128 --rows 1 --seeds 1 --json";
  // Not a terminal: no progress line by default.
  auto r = attnum::test::run_command(std::string(ATTNUM_BINARY) + " " + sim + " 2>&1 >/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("elapsed"), std::string::npos) << r.out;
  // --progress: drawn anyway, before or after the subcommand.
  for (const std::string& args : {"--progress " + sim, sim + " --progress"}) {
    r = attnum::test::run_command(std::string(ATTNUM_BINARY) + " " + args + " 2>&1 >/dev/null");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("pcast simulate 100%"), std::string::npos) << args << ": " << r.out;
    EXPECT_NE(r.out.find("elapsed"), std::string::npos) << r.out;
  }
  // --quiet anywhere wins over --progress.
  r = attnum::test::run_command(std::string(ATTNUM_BINARY) + " --progress " + sim + " --quiet 2>&1 >/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "");
}

}  // namespace
