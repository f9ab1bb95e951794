// Result-folder readers: CSV quoting, typing, subsets, merges, validation messages; page data.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <unistd.h>

#include "attnum/core/error.h"
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
  attnum::test::write_text(d / "t.csv",
                           "a,b,c,d\r\n\"x,y\",\"say \"\"hi\"\"\",1.5,true\n,nan,-3,\"multi\nline\"\n");
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
  EXPECT_NE(what_of([&] { attnum::report::read_csv_table(d / "q.csv"); }).find("unterminated"),
            std::string::npos);
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
  for (const auto& a : rs.absent) pcast |= a.find("pcast_theory") != std::string::npos,
                                  loss |= a.find("loss.json") != std::string::npos;
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

TEST(results_test, legacy_tile_label_reads_as_plain) {
  const fs::path d = fresh_dir("tile");
  attnum::test::write_text(d / "rows.csv",
                           "model,layer,head,text,kernel,condition,rel_err\nm,0,0,t,fa3,tile,0.1\n");
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
