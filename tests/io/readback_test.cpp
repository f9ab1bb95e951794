// Folders read back (resume, merge): bounded JSON parsing, verified unit checkpoints, completion
// markers over checkpoints, loss shards validated field by field (docs/reliability.md).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/hash.h"
#include "attnum/core/same_config.h"
#include "attnum/core/version.h"
#include "attnum/io/json_file.h"
#include "attnum/loss/loss_study.h"
#include "attnum/study/checkpoint.h"
#include "attnum/study/head_study.h"

#include "formats/io_test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path fresh(const std::string& name) { return io_test::fresh_dir("attnum-readback", name); }
using io_test::put;

std::string slurp(const fs::path& p) { return attnum::read_file(p); }

std::string what(auto&& f) { return io_test::error_text(f); }

std::string deep(int levels) { return std::string(size_t(levels), '[') + std::string(size_t(levels), ']'); }

attnum::study::plan small_plan() {
  attnum::study::study_options o;
  o.zoo_opt.n_tok = 16;
  o.zoo_opt.n_layer_cap = 1;
  o.n_texts = 1;
  o.kernels = {attnum::attention::preset("fa3")};
  o.conditions = {"plain", "rotate"};
  o.bootstrap_resamples = 20;
  o.command = "test";
  return attnum::study::make_plan(o);
}

}  // namespace

TEST(readback_test, deep_json_is_refused_by_depth_not_by_the_stack) {
  const fs::path d = fresh("deep");
  put(d / "study.json", deep(300000));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = what([&] { attnum::read_json(d / "study.json"); });
  EXPECT_NE(m.find("nested deeper than 64"), std::string::npos) << m;
  EXPECT_NE(m.find((d / "study.json").string()), std::string::npos) << m;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // Depth inside strings does not count; 64 levels parse.
  EXPECT_NO_THROW(attnum::parse_json_text("[\"" + std::string(1000, '[') + "\"]", "x"));
  EXPECT_NO_THROW(attnum::parse_json_text(deep(64), "x"));
  EXPECT_NE(what([] { attnum::parse_json_text(deep(65), "x"); }), "");
  // A resumed study over a deep checkpoints/study.json: refused naming it.
  put(d / "checkpoints/study.json", "{\"a\":" + deep(300000) + "}");
  const std::string r = what([&] { attnum::study::read_plan(d); });
  EXPECT_NE(r.find("checkpoints/study.json"), std::string::npos) << r;
  EXPECT_NE(r.find("nested deeper"), std::string::npos) << r;
  fs::remove_all(d);
}

TEST(readback_test, fifo_and_non_object_study_files_are_refused_naming_the_file) {
  const fs::path d = fresh("fifo");
  fs::create_directories(d / "checkpoints");
  ASSERT_EQ(::mkfifo((d / "checkpoints/study.json").c_str(), 0600), 0);
  const std::string f = what([&] { attnum::study::read_plan(d); });  // never blocks
  EXPECT_NE(f.find("FIFO"), std::string::npos) << f;
  const attnum::study::plan p = small_plan();
  EXPECT_NE(what([&] { attnum::study::write_plan(d, p); }).find("FIFO"), std::string::npos);
  fs::remove(d / "checkpoints/study.json");
  ASSERT_EQ(::mkfifo(attnum::study::unit_path(d, 0).c_str(), 0600), 0);
  EXPECT_NE(what([&] { attnum::study::read_unit(d, p, 0); }).find("FIFO"), std::string::npos);
  fs::remove(attnum::study::unit_path(d, 0));
  put(d / "checkpoints/study.json", "[]");
  const std::string a = what([&] { attnum::study::read_plan(d); });
  EXPECT_NE(a.find("checkpoints/study.json"), std::string::npos) << a;
  EXPECT_NE(a.find("expected a JSON object"), std::string::npos) << a;
  EXPECT_EQ(a.find("type_error"), std::string::npos) << a;
  const std::string w = what([&] { attnum::study::write_plan(d, p); });
  EXPECT_NE(w.find("checkpoints/study.json"), std::string::npos) << w;
  fs::remove_all(d);
}

TEST(readback_test, messages_quote_at_most_about_200_bytes_of_a_value) {
  const json stored = {{"kernels", std::string(2 << 20, 'x')}};
  const json current = {{"kernels", "fa3"}};
  const std::string m = what([&] { attnum::core::require_same_config(stored, current, "f.json", "hint"); });
  EXPECT_NE(
      m.find("f.json: the stored configuration differs from this run's in 1 field (stored -> this run): kernels:"),
      std::string::npos)
      << m.substr(0, 300);
  EXPECT_LT(m.size(), 600u);
  const std::string bad = "{\"a\": \"" + std::string(2 << 20, 'y') + "\x01\"}";
  const std::string e = what([&] { attnum::parse_json_text(bad, "g.json"); });
  EXPECT_NE(e.find("g.json: not valid JSON"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 600u);
}

// A 100 KB string in a field of checkpoints/study.json (or a 100 KB key): refused naming the file
// and the field, quoting at most ~200 bytes of it.
TEST(readback_test, huge_strings_in_study_json_are_clipped_naming_the_field) {
  const fs::path d = fresh("huge-fields");
  const attnum::study::plan p = small_plan();
  attnum::study::write_plan(d, p);
  const json good = attnum::read_json(d / "checkpoints/study.json");
  const std::string v(100000, 'z');
  struct edit {
    std::string field;
    json value;
  };
  for (const edit& e :
       {edit{"zoo_dtype", v}, edit{"kernels", json::array({v})}, edit{"knobs", json::array({v})},
        edit{"knobs", json::array({"qk_acc.k_step=" + v})}, edit{"conditions", json::array({"plain", v})},
        edit{"rotation", "random-hadamard:" + v}, edit{"predictor_model", v}, edit{v, 1}}) {
    json j = good;
    j[e.field] = e.value;
    put(d / "checkpoints/study.json", j.dump());
    const std::string m = what([&] { attnum::study::read_plan(d); });
    // the field as named in the file, or as the flag that sets it
    std::string field = e.field.size() > 100 ? e.field.substr(0, 100) : e.field;
    if (field == "predictor_model") field = "--predictor-model";
    EXPECT_NE(m.find("checkpoints/study.json"), std::string::npos) << m.substr(0, 600);
    EXPECT_NE(m.find(field), std::string::npos) << field.substr(0, 20) << ": " << m.substr(0, 600);
    EXPECT_LT(m.size(), 1024u) << m.substr(0, 600);
  }
  fs::remove_all(d);
}

TEST(readback_test, unit_checkpoints_are_verified_on_resume) {
  const attnum::study::plan p = small_plan();
  ASSERT_GE(p.units.size(), 2u);
  const fs::path d = fresh("units");
  attnum::study::run_controls ctl;
  ctl.progress = false;
  ASSERT_TRUE(attnum::study::run_study(p, d, ctl));
  const fs::path u0 = attnum::study::unit_path(d, 0), u1 = attnum::study::unit_path(d, 1);
  const std::string good0 = slurp(u0), good1 = slurp(u1);
  ASSERT_TRUE(attnum::study::read_unit(d, p, 0));
  // Changed numbers (one digit of a rel_err): the rows hash says so.
  std::string changed = good0;
  const size_t at = changed.find("\"rel_err\":");
  ASSERT_NE(at, std::string::npos);
  const size_t digit = changed.find_first_of("123456789", at + 10);
  changed[digit] = changed[digit] == '9' ? '1' : char(changed[digit] + 1);
  put(u0, changed);
  std::string m = what([&] { attnum::study::read_unit(d, p, 0); });
  EXPECT_NE(m.find("rows changed"), std::string::npos) << m;
  EXPECT_NE(m.find(u0.string()), std::string::npos) << m;
  EXPECT_NE(what([&] { attnum::study::run_study(p, d, ctl); }), "") << "resume must refuse it";
  // Another unit's file (its own marker intact) under unit 0's name.
  put(u0, good1);
  m = what([&] { attnum::study::read_unit(d, p, 0); });
  EXPECT_NE(m.find("unit 0"), std::string::npos) << m;
  // Another unit's rows with unit 0's marker and a recomputed hash: the rows name their unit.
  {
    const std::string rows1 = good1.substr(0, good1.rfind("{\"end\""));
    const json marker = {{"end", 0},
                         {"n_rows", std::count(rows1.begin(), rows1.end(), '\n')},
                         {"unit", attnum::study::unit_key(p, 0)},
                         {"rows_fnv1a", attnum::core::fnv1a_hex(rows1.data(), rows1.size())}};
    put(u0, rows1 + marker.dump() + "\n");
    m = what([&] { attnum::study::read_unit(d, p, 0); });
    EXPECT_NE(m.find("another unit"), std::string::npos) << m;
  }
  // An empty unit with a valid marker.
  {
    const json marker = {{"end", 0},
                         {"n_rows", 0},
                         {"unit", attnum::study::unit_key(p, 0)},
                         {"rows_fnv1a", attnum::core::fnv1a_hex("", 0)}};
    put(u0, marker.dump() + "\n");
    m = what([&] { attnum::study::read_unit(d, p, 0); });
    EXPECT_NE(m.find("no rows"), std::string::npos) << m;
  }
  // A torn file (no marker) is recomputed; the rerun gives the same bytes.
  put(u0, good0.substr(0, good0.size() / 2));
  EXPECT_FALSE(attnum::study::read_unit(d, p, 0));
  ASSERT_TRUE(attnum::study::run_study(p, d, ctl));
  EXPECT_EQ(slurp(u0), good0);
  fs::remove_all(d);
}

TEST(readback_test, completion_marker_lists_checkpoints_so_merge_sees_changed_shards) {
  const attnum::study::plan p = small_plan();
  const fs::path d = fresh("shard");
  attnum::study::run_controls ctl;
  ctl.progress = false;
  ctl.shard_index = 0, ctl.shard_count = 2;
  EXPECT_FALSE(attnum::study::run_study(p, d, ctl));
  attnum::write_complete_marker(d, "test shard");
  const json marker = attnum::read_json(d / attnum::kCompleteMarker);
  EXPECT_TRUE(marker["files"].contains("checkpoints/study.json")) << marker.dump();
  EXPECT_TRUE(marker["files"].contains("checkpoints/unit-000000.jsonl")) << marker.dump();
  EXPECT_NO_THROW(attnum::require_complete(d, "merge"));
  std::ofstream(attnum::study::unit_path(d, 0), std::ios::app) << "\n";
  const std::string m = what([&] { attnum::require_complete(d, "merge"); });
  EXPECT_NE(m.find("checkpoints/unit-000000.jsonl"), std::string::npos) << m;
  fs::remove_all(d);
}

namespace {
attnum::loss::loss_params loss_params_2() {
  attnum::loss::loss_params p;
  p.sources = {{1, 2, 3, 4, 5}};
  p.source_names = {"t"};
  p.n_tokens = 2;
  p.windows = 1;
  p.conditions = {"plain"};
  p.bootstrap_samples = 10;
  return p;
}
json loss_shard(const std::function<void(json&)>& edit = {}) {
  attnum::loss::unit_result r;
  r.unit = {0, 0, 0};
  r.nll_ref = {1.0, 2.0}, r.nll_var = {1.5, 2.5}, r.kl = {0.1, 0.2}, r.dp = {-0.1, 0.05}, r.top1_same = {1, 0};
  json s = attnum::loss::shard_to_json(loss_params_2(), "m", 0, 1, {r});
  if (edit) edit(s);
  return s;
}
}  // namespace

TEST(readback_test, loss_shards_are_validated_field_by_field) {
  EXPECT_EQ(attnum::loss::merge_shards({loss_shard()}).size(), 1u);
  auto refused = [](const std::function<void(json&)>& edit, const std::string& fragment) {
    const std::string m = what([&] { attnum::loss::merge_shards({loss_shard(edit)}); });
    EXPECT_NE(m.find(fragment), std::string::npos) << fragment << " in: " << m;
  };
  refused([](json& s) { s["units"][0]["nll_var"] = {1.0}; }, "nll_var holds 1 values, nll_ref 2");
  refused([](json& s) { s["units"][0]["top1_same"] = {4, 1}; }, "top1_same 4");
  refused([](json& s) { s["units"][0]["dp"] = {1.5, 0}; }, "dp 1.5");
  refused([](json& s) { s["units"][0]["nll_ref"] = {-1.0, 1.0}; }, "nll_ref -1");
  refused(
      [](json& s) {
        for (const char* k : {"nll_ref", "nll_var", "kl", "dp", "top1_same"}) s["units"][0][k] = json::array();
      },
      "no labels");
  refused(
      [](json& s) {
        for (const char* k : {"nll_ref", "nll_var", "kl", "dp"}) s["units"][0][k] = {0.5};
        s["units"][0]["top1_same"] = {1};
      },
      "with 1 labels does not fit");
  refused([](json& s) { s["tool_version"] = "0.0.1"; }, "written by attnum \"0.0.1\"");
  refused([](json& s) { s["params"]["n_sources"] = 1000000000000; }, "n_sources 1000000000000");
  // Every field of params is read inside the validation (the fuzzer found "model" read outside it).
  refused([](json& s) { s["params"].erase("model"); }, "shard parameters: ");
  refused([](json& s) { s["params"]["model"] = 7; }, "shard parameters: ");
  refused([](json& s) { s["params"]["rotation"] = json::array(); }, "shard parameters: ");
  refused([](json& s) { s["kind"] = 1; }, "not an attnum loss shard file");
  // Integers must be JSON integers in range: nlohmann casts a float to int (undefined behaviour
  // for 6.7e35, which the fuzzer sent) and wraps an out-of-range integer.
  refused([](json& s) { s["units"][0]["source"] = 6.66667e+35; }, "loss unit result: source = 6.66667e+35");
  refused([](json& s) { s["units"][0]["window"] = 1.5; }, "loss unit result: window = 1.5");
  refused([](json& s) { s["units"][0]["condition"] = 4294967296LL; }, "condition = 4294967296");
  refused([](json& s) { s["units"][0]["top1_same"] = {1e300, 0}; }, "top1_same = 1e+300");
  refused([](json& s) { s["units"][0]["top1_same"] = {256, 0}; }, "top1_same = 256");
  refused([](json& s) { s["params"]["windows"] = -1e40; }, "params.windows = -1e+40");
  refused([](json& s) { s["params"]["bootstrap_seed"] = -1; }, "params.bootstrap_seed = -1");
}

TEST(readback_test, json_get_takes_integers_only_within_the_type) {
  int i = 0;
  uint8_t b = 0;
  uint64_t u = 0;
  attnum::io::json_get(json(-5), i, "i");
  EXPECT_EQ(i, -5);
  attnum::io::json_get(json(18446744073709551615ULL), u, "u");
  EXPECT_EQ(u, 18446744073709551615ULL);
  attnum::io::json_get(json(255), b, "b");
  EXPECT_EQ(b, 255);
  EXPECT_NE(what([&] { attnum::io::json_get(json(2147483648LL), i, "i"); }).find("i = 2147483648"), std::string::npos);
  EXPECT_NE(what([&] { attnum::io::json_get(json(-2147483649LL), i, "i"); }).find("expected an integer"),
            std::string::npos);
  EXPECT_NE(what([&] { attnum::io::json_get(json(3.0), i, "i"); }).find("i = 3"), std::string::npos);
  EXPECT_NE(what([&] { attnum::io::json_get(json("3"), i, "i"); }).find("expected an integer"), std::string::npos);
  EXPECT_NE(what([&] { attnum::io::json_get(json(-1), u, "u"); }).find("u = -1"), std::string::npos);
  std::vector<int> v;
  attnum::io::json_get(json({1, 2}), v, "v");
  EXPECT_EQ(v, (std::vector<int>{1, 2}));
  EXPECT_NE(what([&] { attnum::io::json_get(json(1), v, "v"); }).find("expected an array"), std::string::npos);
}
