// attnum report over a study folder and its refusals: a study folder (and several) is an input;
// an unfinished subfolder, and an --out equal to or inside an input folder, exit 2 and write
// nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli_util.h"
#include "report/fixtures.h"

namespace fs = std::filesystem;
using attnum::test::run_attnum;

namespace {

class report_cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnum-report-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(report_cli, study_folders_are_inputs) {
  const fs::path a = dir_ / "a", b = dir_ / "b", html = dir_ / "r.html";
  attnum::test::write_study_fixture(a);
  attnum::test::write_study_fixture(b);
  const auto r = run_attnum("report --results " + a.string() + " " + b.string() + " --out " + html.string());
  if (r.status != 0 && r.out.find("Vega runtime") != std::string::npos) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(html));
}

TEST_F(report_cli, unfinished_study_subfolder_refused) {
  const fs::path a = dir_ / "a", html = dir_ / "r.html";
  attnum::test::write_study_fixture(a);
  fs::remove(a / "loss" / "complete.json");
  const auto r = run_attnum("report --results " + a.string() + " --out " + html.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find((a / "loss").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("complete.json"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(html));
}

TEST_F(report_cli, out_inside_or_equal_to_an_input_refused) {
  const fs::path a = dir_ / "a", p = dir_ / "p";
  attnum::test::write_study_fixture(a);
  attnum::test::write_pcast_fixture(p);
  const std::string before = attnum::read_file(a / "heads" / "summary.json");
  for (const fs::path& out : {a / "heads" / "summary.json", a / "report2.html", a, p / "x" / "r.html",
                              fs::path(a.string() + "/heads/../r.html")}) {
    const auto r = run_attnum("report --results " + p.string() + " " + a.string() + " --out " + out.string());
    EXPECT_EQ(r.status, 2) << out << "\n" << r.out;
    EXPECT_NE(r.out.find("inside the result folder"), std::string::npos) << r.out;
  }
  EXPECT_EQ(attnum::read_file(a / "heads" / "summary.json"), before);
  EXPECT_FALSE(fs::exists(a / "report2.html"));
  EXPECT_FALSE(fs::exists(p / "x"));
}

}  // namespace

namespace {
TEST_F(report_cli, working_directory_node_modules_never_inlined) {
  // A downloaded folder shipping its own "Vega runtime": never read from the working directory.
  const fs::path hostile = dir_ / "download", res = dir_ / "res", html = dir_ / "r.html";
  for (const char* f :
       {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js", "vega-embed/build/vega-embed.min.js"})
    attnum::test::write_text(hostile / "node_modules" / f, "window.HOSTILE_ASSET_RAN = 1;\n");
  attnum::test::write_pcast_fixture(res);
  const auto r = attnum::test::run_command("cd '" + hostile.string() + "' && env -u ATTNUM_ASSETS " + ATTNUM_BINARY +
                                           " report --results " + res.string() + " --out " + html.string() + " 2>&1");
  if (r.status != 0 && r.out.find("Vega runtime") != std::string::npos) {
    // No runtime in the tool's own tree: the hostile one must not have been tried either.
    EXPECT_EQ(r.out.find(hostile.string()), std::string::npos) << r.out;
    GTEST_SKIP() << r.out;
  }
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(attnum::read_file(html).find("HOSTILE_ASSET_RAN"), std::string::npos);
}
}  // namespace

namespace {
TEST_F(report_cli, altered_asset_refused_and_scripts_allowed_by_hash_only) {
  const fs::path nm = fs::path(ATTNUM_SOURCE_DIR) / "node_modules";
  if (!fs::exists(nm / "vega/build/vega.min.js")) GTEST_SKIP() << "node_modules absent (npm ci)";
  const fs::path res = dir_ / "res", html = dir_ / "r.html", alt = dir_ / "alt" / "node_modules";
  attnum::test::write_pcast_fixture(res);
  auto r = run_attnum("report --results " + res.string() + " --out " + html.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string page = attnum::read_file(html);
  const size_t csp = page.find("Content-Security-Policy\" content=\"");
  ASSERT_NE(csp, std::string::npos);
  const std::string policy = page.substr(csp, page.find('>', csp) - csp);
  const size_t ss = policy.find("script-src");
  ASSERT_NE(ss, std::string::npos) << policy;
  const std::string script_src = policy.substr(ss, policy.find(';', ss) - ss);
  EXPECT_EQ(script_src.find("unsafe-inline"), std::string::npos) << script_src;
  size_t n_hash = 0;
  for (size_t p = 0; (p = script_src.find("'sha256-", p)) != std::string::npos; ++p) ++n_hash;
  size_t n_script = 0;
  for (size_t p = 0; (p = page.find("<script>", p)) != std::string::npos; ++p) ++n_script;
  EXPECT_EQ(n_hash, n_script);  // one hash per inline script, nothing else allowed
  // A copy of the runtime with one byte more: refused, nothing written.
  for (const char* f :
       {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js", "vega-embed/build/vega-embed.min.js"})
    attnum::test::write_text(alt / f, attnum::read_file(nm / f));
  attnum::test::write_text(alt / "vega/build/vega.min.js", attnum::read_file(nm / "vega/build/vega.min.js") + " ");
  const fs::path html2 = dir_ / "r2.html";
  r = run_attnum("report --results " + res.string() + " --assets " + alt.string() + " --out " + html2.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("SHA-256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vega.min.js"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(html2));
}
}  // namespace
