// `attnum report` end to end: writes fixture result folders, runs the tool, then drives the page
// in headless Chromium with tests/report/browser_check.mjs (playwright-core from node_modules,
// Debian's /usr/bin/chromium). Screenshots and exported files are left under
// <build>/tests/report_browser_artifacts/browser/ for a person to look at.
// Without chromium, node or node_modules the browser test skips, except under CI=true where it
// fails: CI must run it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "report/fixtures.h"
#include "cli_util.h"

namespace fs = std::filesystem;

namespace {
// Runs a shell command, capturing stdout and stderr together.
attnum::test::run_result run(const std::string& cmd) { return attnum::test::run_command(cmd + " 2>&1"); }

std::string q(const fs::path& p) { return std::string("'").append(p.string()) + "'"; }

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// Each test's own folder, so one test never deletes another's screenshots.
fs::path artifacts(const std::string& test) {
  fs::path d = fs::current_path() / "report_browser_artifacts" / test;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
}  // namespace

TEST(report_browser_test, page_works_in_headless_chromium) {
  const fs::path src = ATTNUM_SOURCE_DIR;
  const fs::path chromium = std::getenv("ATTNUM_CHROMIUM") ? std::getenv("ATTNUM_CHROMIUM") : "/usr/bin/chromium";
  std::string missing;
  if (!fs::exists(chromium)) missing.append(" ").append(chromium.string());
  if (run("command -v node").status != 0) missing += " node";
  if (!fs::exists(src / "node_modules/playwright-core/package.json")) missing += " node_modules/playwright-core";
  if (!fs::exists(src / "node_modules/vega/build/vega.min.js")) missing += " node_modules/vega";
  if (!missing.empty()) {
    if (under_ci()) FAIL() << "CI=true but missing:" << missing << " (run scripts/setup: npm ci)";
    GTEST_SKIP() << "browser test skipped, missing:" << missing << " (run `npm ci`; CI=true makes this a failure)";
  }
  const fs::path art = artifacts("browser"), full = art / "results-full", pcast = art / "results-pcast";
  attnum::test::write_heads_fixture(full);
  attnum::test::write_pcast_fixture(full);
  attnum::test::write_loss_fixture(full);
  attnum::test::write_pcast_fixture(pcast);
  const fs::path bin = ATTNUM_BINARY;
  auto r = run(q(bin) + " report --results " + q(full) + " --out " + q(art / "report.html"));
  ASSERT_EQ(r.status, 0) << r.out;
  r = run(q(bin) + " report --results " + q(pcast) + " --out " + q(art / "report-pcast.html"));
  ASSERT_EQ(r.status, 0) << r.out;
  r = run("node " + q(src / "tests/report/browser_check.mjs") + " --page " + q(art / "report.html") + " --subset " +
          q(art / "report-pcast.html") + " --fixture " + q(full) + " --binary " + q(bin) + " --out " + q(art));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("browser_check: all passed"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

TEST(report_browser_test, page_is_self_contained) {
  // No URL the browser would fetch: no src= or href= to http(s), no <link> stylesheets.
  const fs::path art = artifacts("self_contained"), dir = art / "results";
  attnum::test::write_loss_fixture(dir);
  const fs::path out = art / "loss-only.html";
  auto r = run(q(ATTNUM_BINARY) + " report --results " + q(dir) + " --out " + q(out));
  if (r.status != 0 && r.out.find("Vega runtime") != std::string::npos && !under_ci())
    GTEST_SKIP() << "node_modules absent: " << r.out;
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream in(out);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(html.size(), 500000u);  // the Vega runtime is inlined
  for (const char* bad : {"src=\"http", "href=\"http", "<link", "src='http", "@import"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
}

TEST(report_browser_test, bad_input_exits_2_without_writing) {
  const fs::path art = artifacts("bad_input");
  const fs::path out = art / "never.html";
  auto r = run(q(ATTNUM_BINARY) + " report --results " + q(art / "missing") + " --out " + q(out));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --results"), std::string::npos) << r.out;
  attnum::test::write_loss_fixture(art / "ok");
  r = run(q(ATTNUM_BINARY) + " report --results " + q(art / "ok") + " --assets " + q(art / "nowhere") + " --out " +
          q(out));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--assets"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(report_browser_test, illustrate_json_has_the_contract_fields) {
  auto r = run(q(ATTNUM_BINARY) + " illustrate --common 4 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* f : {"\"w_exact\"", "\"w_fp8\"", "\"w_fp8_rot\"", "\"tv_fp8\"", "\"tv_fp8_rot\"", "\"rotated_fp8\""})
    EXPECT_NE(r.out.find(f), std::string::npos) << f;
  r = run(q(ATTNUM_BINARY) + " illustrate --common nan");
  EXPECT_NE(r.status, 0);
}
