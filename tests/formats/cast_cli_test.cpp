// attnum cast, run as a process (ATTNUM_BINARY): the contract and error handling.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include "cli_util.h"

namespace {

using result = attnum::test::run_result;
result run(const std::string& args) { return attnum::test::run_attnum(args); }

TEST(cast_cli, json_contract) {
  // The example: 0.3 -> 0x2a (0.3125), 448 -> 0x7e, -1e-3 -> 0x81 (-2^-9).
  const result r = run("cast --to e4m3fn --json 0.3 448 -1e-3");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["code"], "0x2a");
  EXPECT_EQ(j[0]["decoded"], 0.3125);
  EXPECT_EQ(j[0]["input"], 0.3);
  EXPECT_EQ(j[1]["code"], "0x7e");
  EXPECT_EQ(j[1]["decoded"], 448.0);
  EXPECT_EQ(j[2]["code"], "0x81");
  EXPECT_EQ(j[2]["decoded"], -0.001953125);
}

TEST(cast_cli, text_lines_and_formats) {
  EXPECT_EQ(run("cast --to e4m3fn 0.3 -1e-3").out, "0.3 0x2a 0.3125\n-1e-3 0x81 -0.001953125\n");
  EXPECT_EQ(run("cast --to bf16 1 -2").out, "1 0x3f80 1\n-2 0xc000 -2\n");
  EXPECT_EQ(run("cast --to fp16 65504 0.1").out, "65504 0x7bff 65504\n0.1 0x2e66 0.0999755859\n");
  EXPECT_EQ(run("cast --to int8 -1 2.5").out, "-1 0xff -1\n2.5 0x02 2\n");
  EXPECT_EQ(run("cast --to int8 --round away 2.5").out, "2.5 0x03 3\n");
  EXPECT_EQ(run("cast --to e5m2 1e6").out, "1e6 0x7b 57344\n");
  EXPECT_EQ(run("cast --to e5m2 --no-saturate 1e6").out, "1e6 0x7c inf\n");
  EXPECT_EQ(run("cast --to e4m3fn --no-saturate 1000").out, "1000 0x7f nan\n");
  // Scaled: 3/0.5 = 6 is on the grid, decoded back times the scale.
  EXPECT_EQ(run("cast --to e4m3fn --scale 0.5 3").out, "3 0x4c 3\n");
}

TEST(cast_cli, bad_input_exits_two_naming_it) {
  result r = run("cast --to e4m3fn not-a-number");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("not-a-number"), std::string::npos) << r.out;
  r = run("cast --to e4m3fn 1 2x");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out.find("1 0x38"), std::string::npos) << "partial output: " << r.out;
  EXPECT_NE(r.out.find("2x"), std::string::npos) << r.out;
  EXPECT_EQ(run("cast --to e7m0 1").status, 2);
  EXPECT_EQ(run("cast --to e4m3fn --scale 0 1").status, 2);
  EXPECT_EQ(run("cast --to e4m3fn").status, 2);
}

}  // namespace
