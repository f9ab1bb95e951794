// The CLI's messages for mistakes a user makes: did-you-mean for commands, presets, knobs,
// conditions, flags and tensors (core/suggest.h); a rerun into a folder of another configuration
// names the fields that differ; FILE.safetensors:TENSOR selects one tensor; repeated conditions,
// a study of plain alone and explicit zero counts are refused before any work. Exit 2 for each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "attention/test_util.h"
#include "attnum/core/suggest.h"
#include "attnum/io/safetensors.h"
#include "cli_util.h"

namespace {
namespace fs = std::filesystem;
using attnum::test::run_attnum;

TEST(suggest, edit_distance_and_closest_names) {
  EXPECT_EQ(attnum::edit_distance("atend", "attend"), 1u);
  EXPECT_EQ(attnum::edit_distance("simulte", "simulate"), 1u);
  EXPECT_EQ(attnum::edit_distance("rotaet", "rotate"), 1u);  // a swap costs one
  EXPECT_EQ(attnum::edit_distance("", "abc"), 3u);
  EXPECT_EQ(attnum::edit_distance("kitten", "sitting"), 3u);
  const std::vector<std::string> presets = {"fa3",   "fa3-acc13", "sage2pp-sm89", "sage2-sm90", "sage2-sm90-acc13",
                                            "sage1", "xqa-sm90"};
  EXPECT_EQ(attnum::closest_names("sage2", presets),
            (std::vector<std::string>{"sage2pp-sm89", "sage2-sm90", "sage2-sm90-acc13"}));
  EXPECT_EQ(attnum::closest_names("fa4", presets), (std::vector<std::string>{"fa3"}));
  EXPECT_TRUE(attnum::closest_names("nope", presets).empty());
  EXPECT_EQ(attnum::did_you_mean("xqa", presets), "did you mean 'xqa-sm90'?");
  EXPECT_EQ(attnum::did_you_mean("zzzzzz", presets), "");
}

struct case_ {
  std::string args, want;
};

TEST(cli_messages, did_you_mean) {
  for (const case_& c : std::vector<case_>{
           {"atend", "attnum: unknown command 'atend': did you mean 'attend'?"},
           {"kernel", "attnum: unknown command 'kernel': did you mean 'kernels'?"},
           {"--threads 2 atend", "did you mean 'attend'?"},
           {"pcast simulte", "attnum pcast: unknown command 'simulte': did you mean 'simulate'?"},
           {"heads --zoo --kernel sage2",
            "unknown kernel preset 'sage2': did you mean 'sage2pp-sm89', 'sage2-sm90' or 'sage2-sm90-acc13'?"},
           {"heads --zoo --knob transform_dtpe=fp32", "unknown knob 'transform_dtpe': did you mean 'transform_dtype'?"},
           {"heads --zoo --condtion rotate", "attnum heads: unknown flag --condtion: did you mean '--conditions'?"},
           {"heads --zoo --conditions plain,rotat", "unknown condition 'rotat': did you mean 'rotate'?"},
       }) {
    const auto r = run_attnum(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ": " << r.out;
    EXPECT_LT(r.out.size(), 400u) << c.args << ": a suggestion, not every name: " << r.out;
  }
  // Nothing close: the list of what exists.
  auto r = run_attnum("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown command 'frobnicate' (commands: attend,"), std::string::npos) << r.out;
  r = run_attnum("heads --zoo --kernel zzzz");
  EXPECT_NE(r.out.find("(known: fa3, fa3-acc13,"), std::string::npos) << r.out;
  // The right names still work.
  EXPECT_EQ(run_attnum("kernels").status, 0);
  EXPECT_EQ(run_attnum("pcast dp --scale 448").status, 0);
}

TEST(cli_messages, refused_before_any_work) {
  for (const case_& c : std::vector<case_>{
           {"heads --zoo --conditions plain,rotate,rotate", "--conditions: 'rotate' is given twice"},
           {"heads --zoo --conditions plain,tile", "--conditions: 'tile' is given twice"},
           {"heads --zoo --conditions plain", "--conditions plain: the study compares each transform with plain"},
           {"study --conditions plain --out /nonexistent/never", "--conditions plain: the study compares"},
           {"pcast simulate --quick --seeds 0", "pcast: --seeds 0: expected a count >= 1"},
           {"pcast simulate --quick --rows 0", "pcast: --rows 0: expected a count >= 1"},
           {"pcast overflow --quick --seeds -3", "pcast: --seeds -3: expected a count >= 1"},
           // sizes estimated before any allocation (was an abort from an int overflow, and bad_alloc)
           {"pcast simulate --quick --rows 2000000000", "(d_head 128 + 2 rows 2000000000) is too large for one unit"},
           {"pcast simulate --quick --seeds 2000000000",
            "2000000000 seeds x 1 n_tok x 25 deltas x 6 variants (partial sums) needs 17881.4 GiB"},
           {"pcast overflow --quick --seeds 2000000000", "2000000000 seeds x 1 n_tok x 13 deltas x 12 variants"},
           {"heads --zoo --texts 100000000 --quiet", "--texts 100000000 (6300000000 units, 268800000000 rows) needs"},
           {"loss --model /nonexistent.bin --conditions plain,plain", "--conditions: 'plain' is given twice"},
       }) {
    const auto r = run_attnum(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ": " << r.out;
  }
}

// A unit of pcast simulate per thread: estimated first; an allocation that fails anyway in a worker
// thread (a ulimit below the machine's memory) is an error (exit 2), never an abort.
TEST(cli_messages, unit_memory_estimated_and_a_failed_allocation_in_a_worker_is_an_error) {
  auto r = attnum::test::run_command("ATTNUM_MAX_ALLOC_GIB=0.5 " + std::string(ATTNUM_BINARY) +
                                     " --threads 1 pcast simulate --quick --rows 30000 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("pcast simulate: 1 threads x one unit of n_tok 4096 x (d_head 128 + 2 rows 30000) needs "
                       "0.939 GiB, more than the limit of 0.5 GiB"),
            std::string::npos)
      << r.out;
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of address space: no ulimit -v";
#endif
  r = attnum::test::run_command("ulimit -v 600000; timeout 60 " + std::string(ATTNUM_BINARY) +
                                " pcast simulate --quick --rows 30000 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: out of memory: an allocation failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
}

class cli_files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnum_cli_messages_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
};

// A capture-like file of several layers: FILE:layers.1.q picks one tensor, and gives the same
// result as files holding that tensor alone.
TEST_F(cli_files, file_colon_tensor) {
  auto L0 = attnum::attention::test::random_layer(2, 1, 32, 32, 64, 3);
  auto L1 = attnum::attention::test::random_layer(2, 1, 32, 32, 64, 4);
  using attnum::io::st_dtype;
  attnum::io::write_safetensors(path("cap.safetensors"), {{"layers.0.q", {2, 32, 64}, L0.q.data(), st_dtype::F32},
                                                          {"layers.0.k", {1, 32, 64}, L0.k.data(), st_dtype::F32},
                                                          {"layers.0.v", {1, 32, 64}, L0.v.data(), st_dtype::F32},
                                                          {"layers.1.q", {2, 32, 64}, L1.q.data(), st_dtype::F32},
                                                          {"layers.1.k", {1, 32, 64}, L1.k.data(), st_dtype::F32},
                                                          {"layers.1.v", {1, 32, 64}, L1.v.data(), st_dtype::F32}});
  attnum::io::write_safetensors(path("q.safetensors"), {{"q", {2, 32, 64}, L1.q.data(), st_dtype::F32}});
  attnum::io::write_safetensors(path("k.safetensors"), {{"k", {1, 32, 64}, L1.k.data(), st_dtype::F32}});
  attnum::io::write_safetensors(path("v.safetensors"), {{"v", {1, 32, 64}, L1.v.data(), st_dtype::F32}});
  const std::string cap = path("cap.safetensors");
  const auto picked = run_attnum(
      "attend --q " + cap + ":layers.1.q --k " + cap + ":layers.1.k --v " + cap + ":layers.1.v --kernel fa3 --json",
      false);
  ASSERT_EQ(picked.status, 0) << picked.out;
  const auto alone = run_attnum("attend --q " + path("q.safetensors") + " --k " + path("k.safetensors") + " --v " +
                                    path("v.safetensors") + " --kernel fa3 --json",
                                false);
  ASSERT_EQ(alone.status, 0) << alone.out;
  const auto a = nlohmann::json::parse(picked.out), b = nlohmann::json::parse(alone.out);
  ASSERT_EQ(a.size(), 2u);
  for (size_t h = 0; h < 2; ++h) EXPECT_EQ(a[h]["rel_err"], b[h]["rel_err"]) << h;
  // Without a name the file of six tensors is ambiguous; a misspelt name gets the closest.
  auto r = run_attnum("attend --q " + cap + " --k " + cap + " --v " + cap + " --kernel fa3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("or name one: " + cap + ":TENSOR"), std::string::npos) << r.out;
  r = run_attnum("attend --q " + cap + ":layers.1.qq --k " + cap + ":layers.1.k --v " + cap +
                 ":layers.1.v --kernel fa3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("no tensor 'layers.1.qq': did you mean 'layers.1.q'?"), std::string::npos) << r.out;
}

// A rerun into a folder written with other settings names each differing field, old -> new.
TEST_F(cli_files, rerun_mismatch_names_the_fields) {
  const std::string base = "heads --zoo --layers 1 --texts 1 --n-tok 64 --quiet --out " + path("h");
  ASSERT_EQ(run_attnum(base + " --kernel fa3 --conditions plain,rotate").status, 0);
  const auto r = run_attnum(base + " --kernel fa3 --conditions plain,center");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("conditions[1]: \"rotate\" -> \"center\""), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 600u) << r.out;
}

}  // namespace
