// Run provenance (core/run_info.h): the command line as a shell reads it back, and the "run"
// block every result folder's meta.json records.
#include <gtest/gtest.h>

#include <filesystem>
#include <cctype>
#include <string>

#include "attnum/core/run_info.h"
#include "attnum/core/version.h"
#include "cli_util.h"

namespace fs = std::filesystem;

TEST(run_info_test, command_line_is_shell_quoted) {
  const char* argv[] = {"attnum", "study", "--out", "a b", "--knob", "x=it's", ""};
  attnum::set_command_line(7, argv);
  EXPECT_EQ(attnum::command_line(), "attnum study --out 'a b' --knob 'x=it'\\''s' ''");
  EXPECT_EQ(attnum::test::run_command("printf '%s|' " + attnum::command_line()).out,
            "attnum|study|--out|a b|--knob|x=it's||");
}

TEST(run_info_test, git_commit_is_a_hash_or_unknown) {
  const std::string c(attnum::git_commit());
  const std::string hash = c.substr(0, c.size() - (c.ends_with("-dirty") ? 6 : 0));
  EXPECT_TRUE(c == "unknown" || (hash.size() == 40 && hash.find_first_not_of("0123456789abcdef") == std::string::npos))
      << c;
}

TEST(run_info_test, meta_json_records_the_run) {
  const fs::path d = fs::temp_directory_path() / "attnum_run_info_test";
  fs::remove_all(d);
  const std::string args =
      "--threads 1 heads --zoo --n-tok 32 --layers 1 --texts 1 --quiet --kernels fa3 "
      "--conditions plain,rotate --out " +
      d.string();
  const auto r = attnum::test::run_attnum(args);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto meta = nlohmann::json::parse(attnum::test::run_command("cat " + (d / "meta.json").string()).out);
  ASSERT_TRUE(meta.contains("run")) << meta.dump();
  const auto& run = meta["run"];
  // ISO 8601 UTC: 20YY-MM-DDThh:mm:ssZ (digits where the mask has 9)
  const std::string t = run["utc_time"].get<std::string>(), mask = "2099-99-99T99:99:99Z";
  bool iso = t.size() == mask.size();
  for (size_t i = 0; iso && i < t.size(); ++i)
    iso = mask[i] == '9' ? std::isdigit(static_cast<unsigned char>(t[i])) != 0 : t[i] == mask[i];
  EXPECT_TRUE(iso) << run.dump();
  EXPECT_EQ(run["command_line"], std::string(ATTNUM_BINARY) + " " + args);
  EXPECT_EQ(run["tool_version"], std::string(attnum::tool_version()));
  EXPECT_EQ(run["git_commit"], std::string(attnum::git_commit()));
  EXPECT_EQ(run["threads"], 1);
  EXPECT_FALSE(run["cpu_model"].get<std::string>().empty());
  // the same paths `attnum version --json` prints
  const auto v = nlohmann::json::parse(attnum::test::run_attnum("version --json", false).out);
  for (const char* k : {"isa", "isa_supported", "fp8_exact_sums", "int8_qk_sums", "exp2f"})
    EXPECT_EQ(run["isa_paths"][k], v[k]) << k;
  fs::remove_all(d);
}
