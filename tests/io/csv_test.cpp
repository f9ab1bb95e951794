// The one CSV dialect of the result files (attnum/io/csv.h), read back by the report's parser.
#include "attnum/io/csv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "attnum/core/file.h"
#include "attnum/report/results.h"

namespace attnum::io {
namespace {

TEST(csv, cells_follow_rfc4180_and_the_result_conventions) {
  EXPECT_EQ(csv_cell(nlohmann::json(nullptr)), "");
  EXPECT_EQ(csv_cell(nlohmann::json("plain")), "plain");
  EXPECT_EQ(csv_cell(nlohmann::json("a,b")), "\"a,b\"");
  EXPECT_EQ(csv_cell(nlohmann::json("say \"hi\"")), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_cell(nlohmann::json("two\nlines")), "\"two\nlines\"");
  EXPECT_EQ(csv_cell(nlohmann::json("cr\r")), "\"cr\r\"");
  EXPECT_EQ(csv_cell(nlohmann::json(true)), "true");
  EXPECT_EQ(csv_cell(nlohmann::json(false)), "false");
  EXPECT_EQ(csv_cell(nlohmann::json(42)), "42");
  EXPECT_EQ(csv_cell(nlohmann::json(-7)), "-7");
  EXPECT_EQ(csv_cell(nlohmann::json(0.1)), "0.1");  // shortest round trip
  EXPECT_EQ(std::stod(csv_cell(nlohmann::json(1.0 / 3.0))), 1.0 / 3.0);
  EXPECT_EQ(csv_cell(nlohmann::ordered_json(2.5e-300)), "2.5e-300");
}

TEST(csv, tables_keep_column_order_and_empty_cells_for_missing_keys) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  rows.push_back({{"kernel", "fa3"}, {"x", 1.5}, {"note", "a,b"}});
  rows.push_back({{"kernel", "sage"}, {"x", nullptr}, {"note", "c"}});
  EXPECT_EQ(csv_table(rows), "kernel,x,note\nfa3,1.5,\"a,b\"\nsage,,c\n");
  const nlohmann::json plain = nlohmann::json::array({{{"b", 2}, {"a", 1}}});
  EXPECT_EQ(csv_table({"a", "missing", "b"}, plain), "a,missing,b\n1,,2\n");
  EXPECT_EQ(csv_table(nlohmann::json::array()), "");
}

TEST(csv, report_parser_reads_what_the_writer_writes) {
  nlohmann::json rows = nlohmann::json::array();
  rows.push_back({{"name", "with, comma"}, {"v", 0.25}, {"q", "quote \" inside"}});
  rows.push_back({{"name", "x"}, {"v", -3}, {"q", ""}});
  const auto dir = std::filesystem::temp_directory_path() / "attnum_csv_test";
  std::filesystem::create_directories(dir);
  const auto f = dir / "t.csv";
  write_file_atomic(f, csv_table({"name", "v", "q"}, rows));
  const auto t = report::read_csv_table(f);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.rows[0]["name"], "with, comma");
  EXPECT_EQ(t.rows[0]["q"], "quote \" inside");
  EXPECT_DOUBLE_EQ(t.rows[0]["v"].get<double>(), 0.25);
  EXPECT_EQ(report::to_csv(t), csv_table({"name", "v", "q"}, t.rows));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace attnum::io
