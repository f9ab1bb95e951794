// attnum heads / merge / bench study through the built tool: the JSON contract, exit status 2 on
// bad input, and --shard I/N + attnum merge giving the single run's files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include "cli_util.h"

namespace fs = std::filesystem;

namespace {
using result = attnum::test::run_result;
result run(const std::string& args) { return attnum::test::run_attnum(args, false); }
std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
const std::string kSmall = "heads --zoo --n-tok 32 --layers 1 --texts 2 --quiet --kernel fa3 ";
}  // namespace

TEST(heads_cli_test, json_summary_contract) {
  const result r = run(kSmall + "--conditions plain,rotate,center,center+rotate --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);  // one per transform
  for (const auto& s : j)
    for (const char* f : {"kernel", "transform", "n_heads", "n_harmed", "auc", "precision",
                          "recall", "spearman", "auc_lo", "auc_hi", "tp", "fp", "fn", "tn", "n_models"})
      EXPECT_TRUE(s.contains(f)) << f;
  EXPECT_EQ(j[0]["n_heads"], 72);
  EXPECT_EQ(j[0]["n_models"], 6);
}

TEST(heads_cli_test, bad_input_exits_2) {
  EXPECT_EQ(run(kSmall + "--kernel no-such-kernel --conditions plain,rotate").status, 2);
  EXPECT_EQ(run(kSmall + "--conditions rotate").status, 2);
  EXPECT_EQ(run(kSmall + "--conditions plain,sideways").status, 2);
  EXPECT_EQ(run("heads --kernel fa3").status, 2);  // neither --zoo nor --captures
  EXPECT_EQ(run(kSmall + "--conditions plain,rotate --shard 3/2 --out /tmp/x").status, 2);
  EXPECT_EQ(run("heads --captures /nonexistent.safetensors --kernel fa3").status, 2);
  EXPECT_EQ(run("merge /nonexistent --out /tmp/attnum_merge_none").status, 2);
}

TEST(heads_cli_test, shards_merged_equal_single_run) {
  const fs::path base = fs::temp_directory_path() / "attnum_heads_cli_test";
  fs::remove_all(base);
  const std::string c = kSmall + "--conditions plain,rotate ";
  ASSERT_EQ(run(c + "--out " + (base / "single").string()).status, 0);
  std::string dirs;
  for (int s = 0; s < 3; ++s) {
    const fs::path d = base / std::string("s").append(std::to_string(s));
    ASSERT_EQ(run(c + "--shard " + std::to_string(s) + "/3 --out " + d.string()).status, 0);
    EXPECT_FALSE(fs::exists(d / "rows.csv"));
    dirs.append(" ").append(d.string());
  }
  ASSERT_EQ(run("merge" + dirs + " --out " + (base / "merged").string()).status, 0);
  for (const char* f : {"meta.json", "rows.csv", "rows.jsonl", "heads.csv", "heads.jsonl",
                        "summary.json", "zoo_heads.csv"})
    EXPECT_EQ(slurp(base / "single" / f), slurp(base / "merged" / f)) << f;
  fs::remove_all(base);
}
