// The printed forms of result rows (attnum/io/table_format.h) and the -o/--output flag every
// table-printing command takes: csv reads back through the report's CSV parser, md is a pipe
// table with one line per row, jsonl is one object per line equal to the rows of -o json, and
// -o json is --json byte for byte. `loss -o csv` prints exactly the loss.csv and
// loss_paired.csv it writes.
#include "attnum/io/table_format.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/report/results.h"
#include "cli_util.h"

namespace attnum::io {
namespace {
namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::run_attnum;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ordered_json sample_rows() {
  return ordered_json::parse(R"([
    {"kernel": "fa3", "rel_err": 0.0123456789, "n": 3, "note": "a|b, \"c\"", "ok": true},
    {"kernel": "sage1", "rel_err": null, "n": 12, "extra": [1, 2]}
  ])");
}

TEST(table_format, names_parse_and_unknown_ones_are_refused_with_a_suggestion) {
  for (size_t i = 0; i < output_format_names().size(); ++i)
    EXPECT_EQ(static_cast<size_t>(parse_output_format(output_format_names()[i])), i);
  try {
    parse_output_format("mdd");
    FAIL() << "mdd accepted";
  } catch (const error& e) {
    EXPECT_STREQ(e.what(), "unknown format 'mdd': did you mean 'md'?");
  }
  EXPECT_THROW(parse_output_format("xml"), error);
}

TEST(table_format, columns_are_every_key_in_order_of_first_appearance) {
  EXPECT_EQ(row_columns(sample_rows()), (std::vector<std::string>{"kernel", "rel_err", "n", "note", "ok", "extra"}));
  EXPECT_EQ(row_columns(ordered_json::object({{"b", 1}, {"a", 2}})), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(row_columns(ordered_json::array()).empty());
}

TEST(table_format, csv_reads_back_through_the_report_parser) {
  const std::string csv = format_tables({{"", sample_rows()}}, output_format::csv);
  const auto dir = fs::temp_directory_path() / fmt::format("attnum-table-format-{}", ::getpid());
  fs::create_directories(dir);
  write_file_atomic(dir / "t.csv", csv);
  const report::table t = report::read_csv_table(dir / "t.csv");
  fs::remove_all(dir);
  EXPECT_EQ(t.columns, row_columns(sample_rows()));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0]["note"], "a|b, \"c\"");
  EXPECT_DOUBLE_EQ(t.rows[0]["rel_err"].get<double>(), 0.0123456789);  // full precision
  EXPECT_TRUE(t.rows[1]["rel_err"].is_null());
  EXPECT_EQ(t.rows[1]["extra"], "[1,2]");  // a nested value is one quoted cell
  EXPECT_EQ(lines_of(csv).size(), 3u);
}

TEST(table_format, md_is_a_pipe_table_with_numeric_columns_right_aligned) {
  const auto md = lines_of(format_tables({{"", sample_rows()}}, output_format::md));
  ASSERT_EQ(md.size(), 4u);  // header, rule, two rows
  EXPECT_EQ(md[0].substr(0, 10), "| kernel |");
  // kernel and note are text (left), rel_err and n numbers (right, "---:").
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream in(line.substr(1));
    for (std::string c; std::getline(in, c, '|');) out.push_back(c);
    return out;
  };
  const auto rule = cells(md[1]);
  ASSERT_EQ(rule.size(), 6u);
  EXPECT_NE(rule[0].back(), ':');
  EXPECT_EQ(rule[1].substr(rule[1].size() - 2), ": ");
  EXPECT_EQ(rule[2].substr(rule[2].size() - 2), ": ");
  EXPECT_NE(md[2].find(" 0.0123457 |"), std::string::npos) << md[2];  // six significant digits
  EXPECT_NE(md[2].find("a\\|b, \"c\""), std::string::npos) << md[2];  // | escaped
  EXPECT_NE(md[3].find("[1,2]"), std::string::npos) << md[3];
  for (const auto& l : md) EXPECT_EQ(l.size(), md[0].size()) << "padded columns: " << l;
}

TEST(table_format, several_tables_are_named) {
  const ordered_json a = ordered_json::parse(R"([{"x": 1}])"), b = ordered_json::parse(R"([{"y": "q"}, {"y": "r"}])");
  EXPECT_EQ(format_tables({{"first", a}, {"second", b}}, output_format::csv), "x\n1\n\ny\nq\nr\n");
  EXPECT_EQ(format_tables({{"first", a}, {"second", b}}, output_format::jsonl),
            "{\"x\":1,\"table\":\"first\"}\n{\"y\":\"q\",\"table\":\"second\"}\n{\"y\":\"r\",\"table\":\"second\"}\n");
  EXPECT_EQ(format_tables({{"first", a}}, output_format::jsonl), "{\"x\":1}\n");
  const std::string md = format_tables({{"first", a}, {"second", b}}, output_format::md);
  EXPECT_EQ(md.rfind("**first**\n\n| ", 0), 0u) << md;
  EXPECT_NE(md.find("\n\n**second**\n\n| y   |"), std::string::npos) << md;
}

TEST(output_flag, every_format_of_cast_and_the_json_spelling) {
  const std::string args = "cast --to e4m3fn 1 -0.3 500";
  const auto json_old = run_attnum(args + " --json", false), json_new = run_attnum(args + " -o json", false);
  ASSERT_EQ(json_old.status, 0) << json_old.out;
  EXPECT_EQ(json_new.out, json_old.out);
  const auto rows = ordered_json::parse(json_old.out);
  ASSERT_EQ(rows.size(), 3u);
  const auto jsonl = run_attnum(args + " --output jsonl", false);
  ASSERT_EQ(jsonl.status, 0);
  const auto lines = lines_of(jsonl.out);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ordered_json::parse(lines[i]), rows[i]);
  const auto csv = run_attnum(args + " -o csv", false);
  ASSERT_EQ(csv.status, 0);
  EXPECT_EQ(csv.out, format_tables({{"", rows}}, output_format::csv));
  EXPECT_EQ(lines_of(csv.out)[0], "input,code,decoded");
  const auto md = run_attnum(args + " -o md", false);
  ASSERT_EQ(md.status, 0);
  EXPECT_EQ(lines_of(md.out).size(), 5u) << md.out;
  const auto table = run_attnum(args, false), table_named = run_attnum(args + " -o table", false);
  EXPECT_EQ(table_named.out, table.out);
  EXPECT_EQ(lines_of(table.out)[0].rfind("1 0x38", 0), 0u) << table.out;
}

TEST(output_flag, bad_formats_and_two_formats_are_refused_before_any_work) {
  auto r = run_attnum("kernels -o mdd");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("unknown format 'mdd': did you mean 'md'?"), std::string::npos) << r.out;
  r = run_attnum("kernels --json -o csv");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;  // CLI11 names both flags
  EXPECT_NE(r.out.find("--json"), std::string::npos) << r.out;
  // A study with an unknown format stops at parsing: no folder appears.
  const auto dir = fs::temp_directory_path() / fmt::format("attnum-output-flag-{}", ::getpid());
  r = run_attnum("study --out " + dir.string() + " -o xml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(output_flag, every_table_command_takes_it) {
  // Quick commands: each prints rows in every format; jsonl has one line per -o json row.
  for (const std::string args : {"kernels", "pcast theory --delta 2,6 --scale 1,448", "pcast dp", "illustrate"}) {
    const auto j = run_attnum(args + " -o json", false);
    ASSERT_EQ(j.status, 0) << args << ": " << j.out;
    const auto rows = ordered_json::parse(j.out);
    const auto l = run_attnum(args + " -o jsonl", false);
    ASSERT_EQ(l.status, 0) << args;
    EXPECT_EQ(lines_of(l.out).size(), rows.size()) << args;
    const auto c = run_attnum(args + " -o csv", false);
    ASSERT_EQ(c.status, 0) << args;
    EXPECT_EQ(c.out, format_tables({{"", rows}}, output_format::csv)) << args;
    const auto m = run_attnum(args + " -o md", false);
    ASSERT_EQ(m.status, 0) << args;
    EXPECT_EQ(lines_of(m.out).size(), rows.size() + 2) << args << ": " << m.out;
  }
}

TEST(output_flag, loss_csv_is_the_files_it_writes) {
  const auto dir = fs::temp_directory_path() / fmt::format("attnum-loss-csv-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path text = dir / "story.txt";
  write_file_atomic(text,
                    "Once upon a time, there was a little girl named Lily. She loved to play in the park "
                    "with her big red ball. One day, she saw a dog.\n");
  const auto r =
      run_attnum("loss --model " ATTNUM_DATA_DIR "/stories260K.bin --text " + text.string() +
                     " --tokens 24 --conditions plain,rotate --kernel fa3 --out " + (dir / "out").string() + " -o csv",
                 false);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, slurp(dir / "out" / "loss.csv") + "\n" + slurp(dir / "out" / "loss_paired.csv"));
  EXPECT_EQ(lines_of(r.out).size(), 3u + 1u + 2u) << r.out;  // header + 2 conditions, gap, header + 1 pair
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attnum::io
