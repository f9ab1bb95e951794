// Result-folder readers: CSV quoting, typing, subsets, merges, validation messages; page data.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/report/page.h"
#include "attnum/report/results.h"
#include "report/fixtures.h"

namespace fs = std::filesystem;
using attnum::report::read_results;

namespace {
fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("attnum_results_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(results_test, csv_quoting_and_types) {
  const fs::path d = fresh_dir("csv");
  attnum::test::write_text(d / "t.csv", "a,b,c,d\r\n\"x,y\",\"say \"\"hi\"\"\",1.5,true\n,nan,-3,\"multi\nline\"\n");
  const auto t = attnum::report::read_csv_table(d / "t.csv");
  ASSERT_EQ(t.columns.size(), 4u);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.rows[0]["a"], "x,y");
  EXPECT_EQ(t.rows[0]["b"], "say \"hi\"");
  EXPECT_EQ(t.rows[0]["c"], 1.5);
  EXPECT_EQ(t.rows[0]["d"], true);
  EXPECT_TRUE(t.rows[1]["a"].is_null());
  EXPECT_TRUE(t.rows[1]["b"].is_null());  // NaN has no JSON form: shown blank
  EXPECT_TRUE(t.rows[1]["c"].is_number_integer());
  EXPECT_EQ(t.rows[1]["d"], "multi\nline");
  // Printing and reading back gives the same rows.
  attnum::test::write_text(d / "u.csv", attnum::report::to_csv(t));
  const auto u = attnum::report::read_csv_table(d / "u.csv");
  EXPECT_EQ(u.rows, t.rows);
  fs::remove_all(d);
}

TEST(results_test, ragged_and_unterminated_csv_name_the_file) {
  const fs::path d = fresh_dir("bad");
  attnum::test::write_text(d / "r.csv", "a,b\n1,2\n3\n");
  const std::string m = what_of([&] { attnum::report::read_csv_table(d / "r.csv"); });
  EXPECT_NE(m.find("r.csv"), std::string::npos) << m;
  EXPECT_NE(m.find("row 3"), std::string::npos) << m;
  attnum::test::write_text(d / "q.csv", "a,b\n\"1,2\n");
  EXPECT_NE(what_of([&] { attnum::report::read_csv_table(d / "q.csv"); }).find("unterminated"), std::string::npos);
  fs::remove_all(d);
}

TEST(results_test, reads_a_full_heads_folder) {
  const fs::path d = fresh_dir("heads");
  const int n = attnum::test::write_heads_fixture(d);
  const auto rs = read_results({d});
  ASSERT_TRUE(rs.heads);
  EXPECT_EQ(int(rs.heads->size()), n);
  EXPECT_EQ(n, 2 * 2 * 4 * 3);
  ASSERT_TRUE(rs.rows);
  EXPECT_EQ(rs.rows->size(), size_t(2 * 2 * 4 * 3 * 4));
  ASSERT_TRUE(rs.summary);
  EXPECT_TRUE(rs.summary->rows[1]["auc"].is_null());
  EXPECT_FALSE(rs.pcast_theory);
  EXPECT_FALSE(rs.loss);
  EXPECT_EQ(rs.meta.size(), 1u);
  // The page says what is absent: P cast and loss here.
  bool pcast = false, loss = false;
  for (const auto& a : rs.absent)
    pcast |= a.find("pcast_theory") != std::string::npos, loss |= a.find("loss.json") != std::string::npos;
  EXPECT_TRUE(pcast && loss);
  for (const auto& r : rs.heads->rows) EXPECT_TRUE(r["harmed"].is_boolean());
  fs::remove_all(d);
}

TEST(results_test, subsets_merge_and_study_layout) {
  const fs::path p = fresh_dir("pcast"), s = fresh_dir("study");
  attnum::test::write_pcast_fixture(p);
  auto rs = read_results({p});
  EXPECT_FALSE(rs.heads);
  ASSERT_TRUE(rs.pcast_theory && rs.pcast_dp && rs.pcast_simulate);
  EXPECT_EQ(rs.pcast_theory->size(), 50u);
  // A study folder: heads/, pcast/, loss/ inside; merged with the pcast folder above.
  attnum::test::write_heads_fixture(s / "heads");
  attnum::test::write_pcast_fixture(s / "pcast");
  attnum::test::write_loss_fixture(s / "loss");
  rs = read_results({s, p});
  ASSERT_TRUE(rs.heads && rs.loss);
  EXPECT_EQ(rs.pcast_theory->size(), 100u);  // both folders' rows
  EXPECT_EQ(rs.loss->size(), 4u);            // loss.csv preferred over loss.json: one file read
  EXPECT_TRUE(rs.absent.empty());
  fs::remove_all(p);
  fs::remove_all(s);
}

TEST(results_test, study_folder_top_level_and_marker_listed_files_only) {
  const fs::path s = fresh_dir("studytop");
  attnum::test::write_study_fixture(s);
  // The study's own summary.json (an object) is not read as a head summary.
  auto rs = read_results({s});
  ASSERT_TRUE(rs.heads && rs.summary && rs.loss && rs.pcast_theory);
  EXPECT_EQ(rs.summary->size(), 2u);  // heads/summary.json's rows
  EXPECT_EQ(rs.meta.size(), 2u);      // the top's meta.json and the heads'
  EXPECT_TRUE(rs.absent.empty());
  // A file added to a finished folder after its marker is not the run's output: ignored.
  attnum::test::write_text(s / "pcast" / "loss.json", "[{\"condition\":\"plain\",\"kernel\":\"x\",\"ppl_ratio\":9}]\n");
  rs = read_results({s});
  EXPECT_EQ(rs.loss->size(), 4u);
  // A folder without a marker (a library caller's own output) is read whole.
  const fs::path bare = fresh_dir("bare");
  attnum::test::write_text(bare / "loss.json", "[{\"condition\":\"plain\",\"kernel\":\"x\",\"ppl_ratio\":9}]\n");
  EXPECT_EQ(read_results({bare}).loss->size(), 1u);
  fs::remove_all(s);
  fs::remove_all(bare);
}

TEST(results_test, deep_json_refused_before_it_is_built) {
  const fs::path d = fresh_dir("deep");
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  attnum::test::write_text(d / "loss.json", deep + "\n");
  std::string m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("loss.json"), std::string::npos) << m.substr(0, 300);
  EXPECT_NE(m.find("deeper than 64"), std::string::npos) << m.substr(0, 300);
  fs::remove(d / "loss.json");
  attnum::test::write_pcast_fixture(d);
  attnum::test::write_text(d / "meta.json", "{\"a\":" + deep + "}\n");
  attnum::write_complete_marker(d, "test");  // meta.json is the run's
  m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("meta.json"), std::string::npos) << m.substr(0, 300);
  EXPECT_NE(m.find("deeper than 64"), std::string::npos) << m.substr(0, 300);
  // 64 levels are a result file's business.
  attnum::test::write_text(d / "meta.json", std::string(63, '[') + "{}" + std::string(63, ']') + "\n");
  attnum::write_complete_marker(d, "test");
  EXPECT_EQ(read_results({d}).meta.size(), 1u);
  fs::remove_all(d);
}

TEST(results_test, oversized_files_refused_before_they_are_read) {
  // Sparse files past the 1 GiB bound of every file attnum reads back: refused by their size,
  // CSV and JSON alike, without reading (or allocating) a byte of them.
  const fs::path d = fresh_dir("big");
  for (const char* name : {"rows.csv", "loss.json"}) {
    attnum::test::write_text(d / name, "");
    fs::resize_file(d / name, attnum::kMaxJsonBytes + 1);
    const std::string m = what_of([&] { read_results({d}); });
    EXPECT_NE(m.find(name), std::string::npos) << m;
    EXPECT_NE(m.find("more than the 1024 MiB"), std::string::npos) << m;
    fs::remove(d / name);
  }
  // A JSONL result's bad line is named by its number.
  attnum::test::write_text(d / "rows.jsonl", "{\"kernel\": \"fa3\"}\n{\"kernel\": fa3}\n");
  const std::string m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("rows.jsonl line 2: not valid JSON"), std::string::npos) << m;
  fs::remove_all(d);
}

TEST(results_test, fifo_refused_without_blocking) {
  const fs::path d = fresh_dir("fifo");
  ASSERT_EQ(::mkfifo((d / "loss.json").c_str(), 0600), 0);
  const std::string m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("FIFO"), std::string::npos) << m;
  fs::remove_all(d);
}

TEST(results_test, answer_words_follow_the_intervals) {
  attnum::report::result_set rs;
  attnum::report::table sum, loss, paired;
  sum.rows = nlohmann::json::parse(R"([
    {"kernel":"fa3","transform":"rotate","n_heads":672,"n_label_harmed":197,"n_harmed":386,
     "auc":0.9,"auc_lo":0.78,"auc_hi":1.0},
    {"kernel":"fa3","transform":"center","n_heads":672,"n_label_harmed":3,"n_harmed":300,
     "n_harmed_sign":301,"auc":0.55,"auc_lo":0.45,"auc_hi":0.65},
    {"kernel":"sage","transform":"rotate","n_heads":10,"n_harmed":4,"auc":0.3,"auc_lo":0.1,"auc_hi":0.45},
    {"kernel":"sage","transform":"center","n_heads":10,"n_harmed":0,"auc":null}])");
  loss.rows = nlohmann::json::parse(R"([
    {"model":"m","kernel":"fa3","condition":"rotate","ppl_ratio":1.0004,"ppl_ratio_lo":0.999,"ppl_ratio_hi":1.002},
    {"model":"m","kernel":"fa3","condition":"center","ppl_ratio":0.99,"ppl_ratio_lo":0.98,"ppl_ratio_hi":0.995}])");
  paired.rows = nlohmann::json::parse(R"([
    {"kernel":"fa3","condition_a":"rotate","condition_b":"plain","delta_ce":0.0004,"delta_ce_lo":-0.0001,"delta_ce_hi":0.0009},
    {"kernel":"fa3","condition_a":"center","condition_b":"plain","delta_ce":-0.01,"delta_ce_lo":-0.02,"delta_ce_hi":-0.005}])");
  rs.summary = sum;
  rs.loss = loss;
  rs.loss_paired = paired;
  const auto a = attnum::report::answer(rs);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0]["text"],
            "fa3, rotate: 197 of 672 heads harmed above the noise floor (386 by sign "
            "alone); predictor AUC 0.90 [0.78, 1.00], better than chance");
  EXPECT_EQ(a[0]["loss"][0]["text"],
            "loss on m: perplexity ratio to the reference 1.000 [0.999, 1.002]; "
            "paired with plain, CE 0.0004 [-0.0001, 0.0009] nats, not "
            "distinguishable from plain");
  // n_harmed_sign, where present, is the sign count; an interval across 0.5 claims nothing.
  EXPECT_EQ(a[1]["n_harmed_sign"], 301);
  EXPECT_NE(a[1]["text"].get<std::string>().find("(301 by sign alone); predictor AUC 0.55 [0.45, 0.65], "
                                                 "not distinguishable from chance"),
            std::string::npos);
  EXPECT_NE(a[1]["loss"][0]["text"].get<std::string>().find("better than plain"), std::string::npos);
  EXPECT_EQ(a[2]["text"],
            "sage, rotate: 4 of 10 heads harmed by sign (no noise floor in these "
            "results); predictor AUC 0.30 [0.10, 0.45], worse than chance");
  EXPECT_TRUE(a[2]["loss"].empty());
  EXPECT_NE(a[3]["text"].get<std::string>().find("no predictor AUC"), std::string::npos);
}

// Loss intervals recorded as not available (null bounds, a reason): the answer says n/a and
// claims no difference from plain.
TEST(results_test, loss_intervals_not_available_read_as_n_a) {
  attnum::report::result_set rs;
  attnum::report::table sum, loss, paired;
  sum.rows = nlohmann::json::parse(R"([{"kernel":"fa3","transform":"rotate","n_heads":10,"n_harmed":4,"auc":null}])");
  loss.rows = nlohmann::json::parse(R"([{"model":"m","kernel":"fa3","condition":"rotate","ppl_ratio":1.0004,
    "ppl_ratio_lo":null,"ppl_ratio_hi":null,"ppl_ratio_ci_reason":"2 text windows: an interval over text windows needs at least 3"}])");
  paired.rows =
      nlohmann::json::parse(R"([{"kernel":"fa3","condition_a":"rotate","condition_b":"plain","delta_ce":0.0004,
    "delta_ce_lo":null,"delta_ce_hi":null,"delta_ce_ci_reason":"2 text windows: an interval over text windows needs at least 3"}])");
  rs.summary = sum;
  rs.loss = loss;
  rs.loss_paired = paired;
  const auto a = attnum::report::answer(rs);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0]["loss"].size(), 1u);
  EXPECT_EQ(a[0]["loss"][0]["text"],
            "loss on m: perplexity ratio to the reference 1.000 [n/a]; paired with plain, "
            "CE 0.0004 [n/a] nats, no interval");
  EXPECT_FALSE(a[0]["loss"][0].contains("ppl_ratio_lo"));
  EXPECT_EQ(a[0]["loss"][0]["delta_ce_verdict"], "no interval");
}

TEST(results_test, legacy_tile_label_reads_as_plain) {
  const fs::path d = fresh_dir("tile");
  attnum::test::write_text(d / "rows.csv", "model,layer,head,text,kernel,condition,rel_err\nm,0,0,t,fa3,tile,0.1\n");
  const auto rs = read_results({d});
  EXPECT_EQ(rs.rows->rows[0]["condition"], "plain");
  fs::remove_all(d);
}

TEST(results_test, errors_name_folder_file_and_field) {
  const fs::path d = fresh_dir("err");
  EXPECT_NE(what_of([&] { read_results({d / "nope"}); }).find("no such folder"), std::string::npos);
  EXPECT_NE(what_of([&] { read_results({d}); }).find("no result file"), std::string::npos);
  attnum::test::write_text(d / "heads.csv", "model,layer,head,kernel,transform,observed_score\nm,0,0,k,rotate,0.1\n");
  std::string m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("heads.csv"), std::string::npos) << m;
  EXPECT_NE(m.find("predicted_score"), std::string::npos) << m;
  attnum::test::write_text(d / "heads.csv",
                           "model,layer,head,kernel,transform,observed_score,predicted_score,harmed\n"
                           "m,0,0,k,rotate,high,0.1,true\n");
  m = what_of([&] { read_results({d}); });
  EXPECT_NE(m.find("observed_score"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a number"), std::string::npos) << m;
  fs::remove_all(d);
}

TEST(results_test, page_data_orders_heads_and_summarises_texts) {
  const fs::path d = fresh_dir("page");
  attnum::test::write_heads_fixture(d);
  const auto data = attnum::report::page_data(read_results({d}));
  const auto& rows = data["heads"]["rows"];
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_GE(rows[i - 1]["observed_score"].get<double>(), rows[i]["observed_score"].get<double>());
  // exp(mean log1p) - 1 recomputed here from the fixture's formula.
  const auto& det = data["details"]["toy-b|1|2|fa3"];
  ASSERT_EQ(det["texts"].size(), 3u);
  ASSERT_EQ(det["conditions"][1]["condition"], "rotate");
  double s = 0;
  for (int t = 0; t < 3; ++t) s += std::log1p(attnum::test::fixture_rel_err(1, 1, 2, t, 1, false));
  EXPECT_NEAR(det["conditions"][1]["geo"].get<double>(), std::expm1(s / 3), 1e-15);
  EXPECT_EQ(data["illustration"]["plain"].size(), data["illustration"]["commons"].size());
  fs::remove_all(d);
}
