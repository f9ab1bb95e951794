// Transfer: outputs made by one of our presets stand in for the real kernel. With the same preset
// as the emulator, the kernel's errors must equal the emulator's bit for bit, every head's
// kernel score its emulated score, and the emulator/kernel Spearman 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "cli_util.h"
#include "attnum/io/safetensors.h"
#include "attnum/study/head_study.h"
#include "attnum/study/zoo.h"

using namespace attnum;
namespace fs = std::filesystem;

namespace {

// Writes one capture file and one kernel-output file (preset `kernel`) per text.
void make_files(const fs::path& dir, int texts, const std::string& kernel, std::vector<std::string>& caps,
                std::vector<std::string>& outs) {
  study::zoo_options zo;
  zo.n_tok = 64;
  const int model = 2, n_layer = 2;  // zoo-c: d 64, 8 heads, 2 kv heads
  for (int t = 0; t < texts; ++t) {
    std::vector<std::vector<float>> keep;
    std::vector<io::tensor_out> cap, out;
    for (int l = 0; l < n_layer; ++l) {
      std::vector<float> q, k, v;
      for (int kvh = 0; kvh < 2; ++kvh) {
        const auto z = study::zoo_generate(zo, model, l, kvh, t);
        q.insert(q.end(), z.q.begin(), z.q.end());
        k.insert(k.end(), z.k.begin(), z.k.end());
        v.insert(v.end(), z.v.begin(), z.v.end());
      }
      const attention::layer_view view{q.data(), k.data(), v.data(), 8, 2, 64, 64, 64};
      keep.push_back(q), keep.push_back(k), keep.push_back(v);
      cap.push_back({fmt::format("layers.{}.q", l), {8, 64, 64}, nullptr});
      cap.push_back({fmt::format("layers.{}.k", l), {2, 64, 64}, nullptr});
      cap.push_back({fmt::format("layers.{}.v", l), {2, 64, 64}, nullptr});
      for (auto c : {attention::condition::plain, attention::condition::rotate}) {
        keep.push_back(attention::run_layer(attention::preset(kernel), view, c));
        out.push_back({fmt::format("layers.{}.o.{}", l, attention::condition_name(c)), {8, 64, 64}, nullptr});
      }
    }
    // Point the tensors at the kept buffers (keep no longer reallocates).
    size_t ki = 0, ci = 0, oi = 0;
    for (int l = 0; l < n_layer; ++l) {
      for (int j = 0; j < 3; ++j) cap[ci++].data = keep[ki++].data();
      for (int j = 0; j < 2; ++j) out[oi++].data = keep[ki++].data();
    }
    caps.push_back((dir / fmt::format("zoo-c__text{}.safetensors", t)).string());
    outs.push_back((dir / fmt::format("zoo-c__text{}.{}.safetensors", t, kernel)).string());
    io::write_safetensors(caps.back(), cap, {{"model", "zoo-c"}, {"text", fmt::format("text{}", t)}});
    io::write_safetensors(outs.back(), out, {{"model", "zoo-c"}, {"kernel", kernel}});
  }
}

// A transfer study of the files with `emulator`, conditions plain and rotate.
study::study_options transfer_options(const std::vector<std::string>& caps, const std::vector<std::string>& outs,
                                      const std::string& emulator) {
  study::study_options o;
  o.zoo = false;
  o.captures = caps;
  o.kernel_outputs = outs;
  o.kernels = {attention::preset(emulator)};
  o.conditions = {"plain", "rotate"};
  o.bootstrap_resamples = 50;
  return o;
}

}  // namespace

TEST(transfer_test, same_preset_as_kernel_transfers_exactly) {
  const fs::path dir = fs::temp_directory_path() / "attnum_transfer_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> caps, outs;
  make_files(dir, 2, "fa3", caps, outs);
  study::study_options o = transfer_options(caps, outs, "fa3");
  const study::plan p = study::make_plan(o);
  ASSERT_EQ(p.units.size(), 4u);  // 1 model x 2 layers x 2 texts
  study::run_controls ctl;
  ctl.progress = false;
  ASSERT_TRUE(study::run_study(p, dir / "out", ctl));
  const auto a = study::assemble_tables(p, dir / "out");
  ASSERT_EQ(a.rows.size(), 2u * 2 * 8 * 2);
  for (const auto& r : a.rows) EXPECT_EQ(r.kernel_rel_err, r.rel_err) << r.layer << " " << r.head;
  int harmed = 0;
  for (const auto& h : a.heads) {
    EXPECT_EQ(h["kernel_observed_score"], h["observed_score"]);
    harmed += h["harmed"].get<bool>();
  }
  ASSERT_EQ(a.summary.size(), 1u);
  const auto& s = a.summary[0];
  EXPECT_EQ(s["n_heads"], 16);
  EXPECT_EQ(s["n_harmed"], harmed);
  EXPECT_EQ(s["n_harmed_emulator"], harmed);
  EXPECT_DOUBLE_EQ(s["spearman"].get<double>(), 1.0);

  // The command: same numbers through attnum transfer --json.
  std::string cmd = std::string(ATTNUM_BINARY) + " transfer --quiet --json --emulator fa3 --captures";
  for (const auto& c : caps) cmd += " " + c;
  cmd += " --kernel-outputs";
  for (const auto& c : outs) cmd += " " + c;
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, pipe)) text.append(buf, k);
  ASSERT_EQ(pclose(pipe), 0) << text;
  const auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["n_harmed"], harmed);
  EXPECT_EQ(j[0]["transform"], "rotate");
  // Side by side: the kernel-aware predictor (models the emulator, fa3) and the fixed one
  // (default fa3): the same model here, so the same numbers.
  EXPECT_EQ(j[0]["predictor_model"], "kernel");
  EXPECT_EQ(j[0]["fixed_predictor_model"], "fa3");
  for (const char* f : {"auc", "precision", "recall"}) EXPECT_EQ(j[0][std::string("fixed_") + f], j[0][f]) << f;
  EXPECT_EQ(j[0]["fixed_n_predicted_harmed"], j[0]["n_predicted_harmed"]);
  for (const auto& h : a.heads) {
    EXPECT_EQ(h["kernel_label"], h["label"]);  // the kernel is the emulator: same noise floor
    EXPECT_EQ(h["kernel_observed_se"], h["observed_se"]);
  }

  // A different kernel (sage2pp-sm89 outputs, fa3 emulator): errors differ, the files still work.
  std::vector<std::string> caps2, outs2;
  const fs::path dir2 = dir / "sage";
  fs::create_directories(dir2);
  make_files(dir2, 1, "sage2pp-sm89", caps2, outs2);
  o.captures = caps2, o.kernel_outputs = outs2;
  const study::plan p2 = study::make_plan(o);
  ASSERT_TRUE(study::run_study(p2, dir2 / "out", ctl));
  const auto b = study::assemble_tables(p2, dir2 / "out");
  int differ = 0;
  for (const auto& r : b.rows) differ += r.kernel_rel_err != r.rel_err;
  EXPECT_GT(differ, 0);
  fs::remove_all(dir);
}

namespace {
std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

// attnum transfer scores the kernel-aware and a fixed predictor side by side from one run of the
// units (each unit computed once for both, run_study's plans overload): every file of both folders
// is the file a run of that study alone writes; a folder resumed with one of them complete gives
// the same; plans that differ in more than the predictor model are refused.
TEST(transfer_test, kernel_aware_and_fixed_predictors_from_one_run_equal_two_runs) {
  const fs::path dir = fs::temp_directory_path() / "attnum_transfer_once_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> caps, outs;
  make_files(dir, 2, "sage2pp-sm89", caps, outs);
  study::study_options o = transfer_options(caps, outs, "sage2pp-sm89");
  o.command = "transfer";
  study::study_options f = o;
  f.predictor_model = "fa3";
  f.command = "transfer --predictor-model fa3";
  const std::vector<study::plan> plans{study::make_plan(o), study::make_plan(f)};
  study::run_controls ctl;
  ctl.progress = false;
  const std::vector<fs::path> together{dir / "aware", dir / "aware" / "fixed-fa3"};
  ASSERT_TRUE(study::run_study(plans, together, ctl));
  ASSERT_TRUE(study::run_study(plans[0], dir / "alone-aware", ctl));
  ASSERT_TRUE(study::run_study(plans[1], dir / "alone-fixed", ctl));
  const std::vector<std::string> files = {"meta.json",
                                          "rows.csv",
                                          "rows.jsonl",
                                          "heads.csv",
                                          "heads.jsonl",
                                          "summary.json",
                                          "checkpoints/study.json",
                                          "checkpoints/unit-000000.jsonl",
                                          "checkpoints/unit-000003.jsonl"};
  for (const auto& name : files) {
    ASSERT_TRUE(fs::exists(together[0] / name)) << name;
    EXPECT_EQ(attnum::test::comparable_result(together[0] / name),
              attnum::test::comparable_result(dir / "alone-aware" / name))
        << name;
    EXPECT_EQ(attnum::test::comparable_result(together[1] / name),
              attnum::test::comparable_result(dir / "alone-fixed" / name))
        << name;
  }
  // The two predictors differ here (sage2pp-sm89 vs an fa3 model), so the comparison can fail.
  EXPECT_NE(slurp(together[0] / "rows.csv"), slurp(together[1] / "rows.csv"));
  // Resumed: the fixed folder lost two units and its result files; the aware one is complete.
  fs::remove(study::unit_path(together[1], 1));
  fs::remove(study::unit_path(together[1], 2));
  fs::remove(together[1] / "rows.csv");
  ASSERT_TRUE(study::run_study(plans, together, ctl));
  for (const auto& name : files)
    EXPECT_EQ(attnum::test::comparable_result(together[1] / name),
              attnum::test::comparable_result(dir / "alone-fixed" / name))
        << name;
  EXPECT_EQ(slurp(together[1] / "checkpoints/unit-000001.jsonl"),
            slurp(dir / "alone-fixed/checkpoints/unit-000001.jsonl"));
  // Another study (another rotation) cannot share the units: refused naming the field.
  study::study_options other = f;
  other.rotation = *transforms::rotation::parse_builtin("hadamard");
  const std::vector<study::plan> mixed{plans[0], study::make_plan(other)};
  try {
    study::run_study(mixed, std::vector<fs::path>{dir / "m0", dir / "m1"}, ctl);
    ADD_FAILURE() << "plans with another rotation were run together";
  } catch (const attnum::error& e) {
    EXPECT_NE(std::string(e.what()).find("rotation"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(transfer_test, mismatched_outputs_are_refused) {
  study::study_options o;
  o.zoo = false;
  o.captures = {"a.safetensors", "b.safetensors"};
  o.kernel_outputs = {"a.out.safetensors"};
  EXPECT_THROW(study::make_plan(o), attnum::error);
}

TEST(transfer_test, zero_value_channel_under_per_channel_scale_fails_loudly) {
  // Sage's per-channel V scale has no epsilon: an all-zero channel gives NaN in the real kernel.
  // The study must say so, not write NaN scores.
  const fs::path dir = fs::temp_directory_path() / "attnum_transfer_nan_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  study::zoo_options zo;
  zo.n_tok = 32;
  auto z = study::zoo_generate(zo, 0, 0, 0, 0);  // 1 query head, 1 kv head, d 64
  for (int t = 0; t < 32; ++t) z.v[t * 64 + 5] = 0.0f;
  const std::string f = (dir / "m__t.safetensors").string();
  io::write_safetensors(f,
                        {{"layers.0.q", {1, 32, 64}, z.q.data()},
                         {"layers.0.k", {1, 32, 64}, z.k.data()},
                         {"layers.0.v", {1, 32, 64}, z.v.data()}},
                        {{"model", "m"}});
  study::study_options o;
  o.zoo = false;
  o.captures = {f};
  o.kernels = {attention::preset("sage2pp-sm89")};
  o.conditions = {"plain", "rotate"};
  const study::plan p = study::make_plan(o);
  study::run_controls ctl;
  ctl.progress = false;
  EXPECT_THROW(study::run_study(p, dir / "out", ctl), attnum::error);
  EXPECT_FALSE(fs::exists(dir / "out" / "rows.csv"));
  // fa3 (per-head V scale) has no such problem on the same file.
  o.kernels = {attention::preset("fa3")};
  EXPECT_TRUE(study::run_study(study::make_plan(o), dir / "out2", ctl));
  fs::remove_all(dir);
}
