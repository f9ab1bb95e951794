// attnum pcast through the built tool: the contract fields, row counts, --out files, errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "attnum/report/results.h"
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
  const auto r =
      run("pcast simulate --delta 0,8 --scale 1,256 --n-tok 512 --d-head 32 --rows 4 "
          "--seeds 2 --json --out " +
          dir.string());
  ASSERT_EQ(r.status, 0);
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows.size(), 8u);  // 2 deltas x 2 scales x 2 orders
  expect_fields(rows, {"delta", "scale", "order", "underflow_measured", "underflow_predicted", "mse", "mse_sd", "seeds",
                       "kernel", "n_tok", "d_head", "block"});
  std::ifstream f(dir / "pcast_simulate.csv");
  ASSERT_TRUE(f.good());
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header.rfind("delta,scale,order,kernel,underflow_measured,underflow_predicted,mse,mse_sd,"
                         "seeds,n_tok,d_head,block",
                         0),
            0u)
      << header;
  int lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  EXPECT_EQ(lines, 8);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::filesystem::remove_all(dir);
}

// --kernel/--knob rows record the knobs and each kernel's resolved spec (the JSON of `attnum
// kernels --json` with the knob applied), in --json output and in the CSV file (one cell, read
// back by the report's CSV reader); the idealized kernel's rows have neither.
TEST(pcast_cli_test, simulate_records_the_knobs_and_the_resolved_kernel_spec) {
  const auto dir = std::filesystem::temp_directory_path() / "attnum_pcast_cli_knobs";
  std::filesystem::remove_all(dir);
  const std::string c = "pcast simulate --delta 0,6 --n-tok 256 --d-head 32 --rows 4 --seeds 2 ";
  const auto r = run(c + "--kernel fa3,xqa-sm90 --knob enabled.q_cast=false --json --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto listed = run("kernels --json");
  ASSERT_EQ(listed.status, 0);
  std::map<std::string, nlohmann::json> expected;  // the presets with the knob applied
  for (auto k : nlohmann::json::parse(listed.out)) {
    ASSERT_TRUE(k["enabled"]["q_cast"].get<bool>()) << k["name"];  // so the knob changes the spec
    k["enabled"]["q_cast"] = false;
    expected[k["name"].get<std::string>()] = k;
  }
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);  // 2 deltas x 2 kernels (each kernel's own S and order)
  for (const auto& row : rows) {
    EXPECT_EQ(row["knobs"], "enabled.q_cast=false");
    ASSERT_TRUE(row["kernel_spec"].is_object()) << row.dump();
    EXPECT_EQ(row["kernel_spec"], expected.at(row["kernel"].get<std::string>())) << row["kernel"];
  }
  EXPECT_EQ(rows[0]["kernel"], "fa3");
  EXPECT_EQ(rows[3]["kernel"], "xqa-sm90");
  const auto cells = attnum::report::read_csv_cells(dir / "pcast_simulate.csv");
  ASSERT_EQ(cells.size(), 5u);
  const auto& header = cells[0];
  const auto col = std::find(header.begin(), header.end(), "kernel_spec") - header.begin();
  const auto kcol = std::find(header.begin(), header.end(), "knobs") - header.begin();
  ASSERT_LT(col, static_cast<long>(header.size()));
  ASSERT_LT(kcol, static_cast<long>(header.size()));
  for (size_t i = 1; i < cells.size(); ++i) {
    ASSERT_EQ(cells[i].size(), header.size());
    EXPECT_EQ(nlohmann::json::parse(cells[i][col]), rows[i - 1]["kernel_spec"]);
    EXPECT_EQ(cells[i][kcol], "enabled.q_cast=false");
  }
  // The idealized kernel: no knobs, no spec.
  const auto ideal = run(c + "--scale 256 --order reverse --json");
  ASSERT_EQ(ideal.status, 0) << ideal.out;
  for (const auto& row : nlohmann::json::parse(ideal.out)) {
    EXPECT_EQ(row["kernel"], "ideal");
    EXPECT_EQ(row["knobs"], "");
    EXPECT_TRUE(row["kernel_spec"].is_null());
  }
  std::filesystem::remove_all(dir);
}

TEST(pcast_cli_test, bad_input_exits_2) {
  EXPECT_EQ(run("pcast theory --delta 1:0:1").status, 2);
  EXPECT_EQ(run("pcast dp --scale abc").status, 2);
  EXPECT_EQ(run("pcast simulate --delta 1 --order sideways").status, 2);
  EXPECT_EQ(run("pcast simulate --delta 1 --scale 0").status, 2);
}

}  // namespace
