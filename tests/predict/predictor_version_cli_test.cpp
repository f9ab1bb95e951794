// --predictor-version v1|v2 through the built tool (docs/predictor.md): the version string each
// result file records, the observed side unchanged, another version's folder refused on resume
// and on merge, and a bad name refused with exit status 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attnum/predict/predictor.h"
#include "cli_util.h"

namespace fs = std::filesystem;
using attnum::test::run_attnum;

namespace {
const std::string kSmall =
    "heads --zoo --n-tok 48 --layers 1 --texts 2 --quiet --kernel sage2pp-sm89 --conditions plain,rotate,center ";
std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::vector<nlohmann::json> jsonl(const fs::path& f) {
  std::vector<nlohmann::json> v;
  std::istringstream in(slurp(f));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}
}  // namespace

TEST(predictor_version_cli_test, records_version_and_refuses_other_versions) {
  const fs::path base = fs::temp_directory_path() / "attnum_predictor_version_cli_test";
  fs::remove_all(base);
  const std::string v1s(attnum::predict::kPredictorVersion), v2s(attnum::predict::kPredictorVersionV2);
  const fs::path d1 = base / "v1", d2 = base / "v2";
  ASSERT_EQ(run_attnum(kSmall + "--out " + d1.string()).status, 0);
  ASSERT_EQ(run_attnum(kSmall + "--predictor-version v2 --out " + d2.string()).status, 0);
  for (const auto& [d, v] : {std::pair{d1, v1s}, std::pair{d2, v2s}}) {
    const auto meta = nlohmann::json::parse(slurp(d / "meta.json"));
    EXPECT_EQ(meta["predictor_version"], v) << d;
    for (const auto& s : nlohmann::json::parse(slurp(d / "summary.json"))) EXPECT_EQ(s["predictor_version"], v);
    for (const auto& h : jsonl(d / "heads.jsonl")) EXPECT_EQ(h["predictor_version"], v);
    for (const auto& r : jsonl(d / "rows.jsonl")) EXPECT_EQ(r["predictor_version"], v);
    EXPECT_EQ(meta["command"].get<std::string>().find("--predictor-version v2") != std::string::npos, v == v2s);
  }
  // The observed side does not depend on the predictor; the predictions do (Sage's K casts
  // share their per-block grids, so v2's shared terms are not all 0).
  const auto h1 = jsonl(d1 / "heads.jsonl"), h2 = jsonl(d2 / "heads.jsonl");
  ASSERT_EQ(h1.size(), h2.size());
  int differ = 0;
  for (size_t i = 0; i < h1.size(); ++i) {
    EXPECT_EQ(h1[i]["observed_score"], h2[i]["observed_score"]);
    differ += h1[i]["predicted_score"] != h2[i]["predicted_score"];
  }
  EXPECT_GT(differ, 0);
  // Resuming a folder of the other version: refused (exit 2), the folder left as it was.
  const std::string summary2 = slurp(d2 / "summary.json");
  const auto resume = run_attnum(kSmall + "--out " + d2.string());
  EXPECT_EQ(resume.status, 2) << resume.out;
  EXPECT_NE(resume.out.find("predictor_version"), std::string::npos) << resume.out;
  EXPECT_EQ(slurp(d2 / "summary.json"), summary2);
  EXPECT_EQ(run_attnum(kSmall + "--predictor-version v2 --out " + d2.string()).status, 0);  // its own: resumes
  // Shards of different versions do not merge.
  ASSERT_EQ(run_attnum(kSmall + "--shard 0/2 --out " + (base / "s0").string()).status, 0);
  ASSERT_EQ(run_attnum(kSmall + "--predictor-version v2 --shard 1/2 --out " + (base / "s1").string()).status, 0);
  const auto merged = run_attnum("merge " + (base / "s0").string() + " " + (base / "s1").string() + " --out " +
                                 (base / "merged").string());
  EXPECT_EQ(merged.status, 2) << merged.out;
  EXPECT_EQ(run_attnum(kSmall + "--predictor-version v3").status, 2);
  EXPECT_EQ(run_attnum("study --predictor-version 2 --out " + (base / "st").string()).status, 2);
  fs::remove_all(base);
}
