// attnum pcast through the built tool: the contract fields, row counts, --out files, errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include "cli_util.h"

namespace {

using result = attnum::test::run_result;
result run(const std::string& args) { return attnum::test::run_attnum(args, false); }

void expect_fields(const nlohmann::json& rows, std::initializer_list<const char*> fields) {
  ASSERT_TRUE(rows.is_array());
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows)
    for (const char* f : fields) EXPECT_TRUE(r.contains(f)) << f;
}

TEST(pcast_cli_test, theory_contract) {
  const auto r = run("pcast theory --delta 0:12:0.5 --scale 1,256,448 --k-sink 4 --json");
  ASSERT_EQ(r.status, 0);
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows.size(), 75u);
  expect_fields(rows, {"delta", "scale", "k_sink", "delta_k", "underflow_fraction", "delta_c"});
  EXPECT_EQ(rows.back()["delta"], 12.0);
  EXPECT_NEAR(rows[0]["delta_k"].get<double>(), 1.0293753730, 1e-9);
}

TEST(pcast_cli_test, dp_contract) {
  const auto r = run("pcast dp --scale 1:512:1 --json");
  ASSERT_EQ(r.status, 0);
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows.size(), 512u);
  expect_fields(rows, {"scale", "dp"});
  EXPECT_EQ(rows[255]["dp"], 0.0625);  // S = 256
}

TEST(pcast_cli_test, simulate_contract_and_out_files) {
  const auto dir = std::filesystem::temp_directory_path() / "attnum_pcast_cli_test";
  std::filesystem::remove_all(dir);
  const auto r = run("pcast simulate --delta 0,8 --scale 1,256 --n-tok 512 --d-head 32 --rows 4 "
                     "--seeds 2 --json --out " + dir.string());
  ASSERT_EQ(r.status, 0);
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows.size(), 8u);  // 2 deltas x 2 scales x 2 orders
  expect_fields(rows, {"delta", "scale", "order", "underflow_measured", "underflow_predicted", "mse",
                       "mse_sd", "seeds", "kernel", "n_tok", "d_head", "block"});
  std::ifstream f(dir / "pcast_simulate.csv");
  ASSERT_TRUE(f.good());
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header.rfind("delta,scale,order,kernel,underflow_measured,underflow_predicted,mse,mse_sd,"
                         "seeds,n_tok,d_head,block", 0), 0u) << header;
  int lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  EXPECT_EQ(lines, 8);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::filesystem::remove_all(dir);
}

TEST(pcast_cli_test, bad_input_exits_2) {
  EXPECT_EQ(run("pcast theory --delta 1:0:1").status, 2);
  EXPECT_EQ(run("pcast dp --scale abc").status, 2);
  EXPECT_EQ(run("pcast simulate --delta 1 --order sideways").status, 2);
  EXPECT_EQ(run("pcast simulate --delta 1 --scale 0").status, 2);
}

}  // namespace
