// attnum attend / kernels / bench attention through the built tool: outputs equal the library's,
// bad input exits 2 with a message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/io/npy.h"
#include "attnum/io/safetensors.h"
#include "cli_util.h"

namespace attnum::attention {
namespace {

attnum::test::run_result run_tool(const std::string& args) { return attnum::test::run_attnum(args); }

class attend_cli_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("attnum_attend_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::filesystem::path dir_;
};

TEST_F(attend_cli_test, output_equals_library_and_rel_err_printed) {
  auto L = test::random_layer(4, 2, 48, 48, 64, 5);
  io::write_npy(path("q.npy"), L.q.data(), {4, 48, 64});
  io::write_npy(path("k.npy"), L.k.data(), {2, 48, 64});
  io::write_npy(path("v.npy"), L.v.data(), {2, 48, 64});
  // stderr apart: these fp32 inputs draw the transform-dtype warning (transform_dtype_test.cpp).
  const auto r =
      attnum::test::run_attnum("attend --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                                   " --kernel sage2pp-sm89 --condition rotate --out " + path("o.npy") + " --json",
                               false);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_GT(rows[0]["rel_err"].get<double>(), 0.0);
  EXPECT_EQ(rows[3]["kv_head"], 1);
  const auto o = io::read_npy(path("o.npy"));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{4, 48, 64}));
  const auto want = run_layer(preset("sage2pp-sm89"), L.view, condition::rotate, true);
  EXPECT_EQ(o.data, want);
}

// One .safetensors file holding tensors q, k, v ([n_tok, d_head]); O written as .safetensors.
TEST_F(attend_cli_test, safetensors_in_and_out) {
  auto L = test::random_layer(1, 1, 40, 40, 128, 8);
  io::write_safetensors(path("qkv.safetensors"), {{"q", {40, 128}, L.q.data(), io::st_dtype::F32},
                                                  {"k", {40, 128}, L.k.data(), io::st_dtype::F32},
                                                  {"v", {40, 128}, L.v.data(), io::st_dtype::F32}});
  const std::string f = path("qkv.safetensors");
  const auto r = run_tool("attend --q " + f + " --k " + f + " --v " + f + " --kernel fa3 --no-causal --out " +
                          path("o.safetensors"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rel_err"), std::string::npos);
  io::safetensors_file o(path("o.safetensors"));
  EXPECT_EQ(o.at("o").shape, (std::vector<int64_t>{40, 128}));
  EXPECT_EQ(o.at("o").to_float(), run_layer(preset("fa3"), L.view, condition::plain, false));
}

TEST_F(attend_cli_test, bad_input_exits_2) {
  auto L = test::random_layer(1, 1, 8, 8, 64, 6);
  io::write_npy(path("q.npy"), L.q.data(), {8, 64});
  io::write_npy(path("k.npy"), L.k.data(), {8, 64});
  io::write_npy(path("v7.npy"), L.v.data(), {7, 64});
  L.v[3] = NAN;
  io::write_npy(path("vnan.npy"), L.v.data(), {8, 64});
  const std::string qk = " --q " + path("q.npy") + " --k " + path("k.npy");
  for (const auto& [args, what] : std::vector<std::pair<std::string, std::string>>{
           {"attend" + qk + " --v " + path("v7.npy") + " --kernel fa3", "shapes differ"},
           {"attend" + qk + " --v " + path("vnan.npy") + " --kernel fa3", "not finite"},
           {"attend" + qk + " --v " + path("k.npy") + " --kernel nope", "unknown kernel preset"},
           {"attend" + qk + " --v " + path("k.npy") + " --knob bogus=1", "unknown knob"},
           {"attend" + qk + " --v " + path("k.npy") + " --kernel fa3 --condition tilt", "unknown condition"}}) {
    const auto r = run_tool(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  }
}

TEST_F(attend_cli_test, kernels_json_lists_presets) {
  const auto r = run_tool("kernels --json");
  ASSERT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j.size(), 13u);
  EXPECT_EQ(j[0]["name"], "fa3");
}

// bench attention --json: the issue-15 fields, the data's Q/K spread echoed, the engine's path
// that `version --json` names, and positive rates (small shapes: a smoke test, not a timing).
TEST_F(attend_cli_test, bench_attention_json_fields_and_qk_std) {
  const auto r = run_tool("bench attention --tokens 64 --d-head 32 --repeats 1 --qk-std 2.5 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  const auto& row = j[0];
  EXPECT_EQ(row["kernel"], "fa3");
  EXPECT_EQ(row["tokens"], 64);
  EXPECT_EQ(row["qk_std"], 2.5);
  for (const char* f : {"gflops", "gemm_gflops", "ratio", "ref_ratio", "ratio_block", "ratio_square"})
    EXPECT_GT(row[f].get<double>(), 0.0) << f;
  const auto v = run_tool("version --json");
  ASSERT_EQ(v.status, 0) << v.out;
  const auto vj = nlohmann::json::parse(v.out);
  EXPECT_EQ(row["isa"], vj["isa"]);
  EXPECT_EQ(row["fp8_sums"], vj["fp8_exact_sums"]);
  EXPECT_NE(row["gemm_source"].get<std::string>().find("Eigen"), std::string::npos);
  const auto flat = run_tool("bench attention --tokens 64 --d-head 32 --repeats 1 --json");
  ASSERT_EQ(flat.status, 0) << flat.out;
  EXPECT_EQ(nlohmann::json::parse(flat.out)[0]["qk_std"], 1.0);
}

}  // namespace
}  // namespace attnum::attention
