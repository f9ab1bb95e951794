// The report reads what the producers really write: small `attnum heads --zoo`, `attnum pcast all
// --quick` and (with data/) `attnum loss` runs, then `attnum report` over all of them.
// Checks the embedded data against the producers' files: one heads row per heads.csv row, every
// P-cast and loss row present. (Slow label: a few seconds of head study and simulation.)
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "attnum/report/results.h"
#include "cli_util.h"

namespace fs = std::filesystem;

namespace {
int run(const std::string& cmd, std::string* out = nullptr) {
  const auto r = attnum::test::run_command(cmd + " 2>&1");
  if (out) *out = r.out;
  return r.status;
}

size_t data_lines(const fs::path& csv) {
  std::ifstream in(csv);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n - 1;  // header
}

// The JSON embedded in the page (<script type="application/json" id="attnum-data">).
nlohmann::json embedded(const fs::path& html) {
  std::ifstream in(html);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string open = "<script type=\"application/json\" id=\"attnum-data\">";
  const size_t a = s.find(open), b = s.find("</script>", a);
  if (a == std::string::npos || b == std::string::npos) return nullptr;
  return nlohmann::json::parse(s.substr(a + open.size(), b - a - open.size()));
}
}  // namespace

TEST(report_integration_slow_test, report_reads_the_producers_folders) {
  const fs::path dir = fs::current_path() / "report_integration_artifacts";
  fs::remove_all(dir);
  const std::string bin = std::string("'") + ATTNUM_BINARY + "'";
  std::string out;
  ASSERT_EQ(run(bin + " --threads 2 heads --zoo --n-tok 128 --layers 1 --texts 2 --quiet --out '" +
                    (dir / "heads").string() + "'",
                &out),
            0)
      << out;
  ASSERT_EQ(run(bin + " --threads 2 pcast all --quick --out '" + (dir / "pcast").string() + "'", &out), 0) << out;
  std::string results = std::string("'").append((dir / "heads").string()) + "' '" + (dir / "pcast").string() + "'";
  // stories260K ships in data/; the book comes from a Debian package (scripts/setup).
  const fs::path data_dir = ATTNUM_DATA_DIR;
  const fs::path book = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt";
  ASSERT_EQ(run(bin + " --threads 2 loss --model '" + (data_dir / "stories260K.bin").string() + "' --tokenizer '" +
                    (data_dir / "tok512.bin").string() + "' --text '" + book.string() + "' --tokens 128 --out '" +
                    (dir / "loss").string() + "'",
                &out),
            0)
      << out;
  results += " '" + (dir / "loss").string() + "'";
  const fs::path html = dir / "report.html";
  const int rc = run(bin + " report --results " + results + " --out '" + html.string() + "'", &out);
  if (rc != 0 && out.find("Vega runtime") != std::string::npos) GTEST_SKIP() << out;
  ASSERT_EQ(rc, 0) << out;
  const auto data = embedded(html);
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["heads"]["rows"].size(), data_lines(dir / "heads/heads.csv"));
  EXPECT_EQ(data["summary"]["rows"].size(), nlohmann::json::parse(std::ifstream(dir / "heads/summary.json")).size());
  for (const char* t : {"pcast_theory", "pcast_dp", "pcast_simulate", "pcast_overflow"})
    EXPECT_EQ(data[t]["rows"].size(), data_lines(dir / "pcast" / (std::string(t) + ".csv"))) << t;
  // Every head of heads.csv has its per-text details from rows.csv.
  for (const auto& r : data["heads"]["rows"]) {
    const std::string key = r["model"].get<std::string>() + "|" + r["layer"].dump() + "|" + r["head"].dump() + "|" +
                            r["kernel"].get<std::string>();
    ASSERT_TRUE(data["details"].contains(key)) << key;
    EXPECT_EQ(data["details"][key]["conditions"].size(), 4u) << key;
  }
  EXPECT_EQ(data["loss"]["rows"].size(), data_lines(dir / "loss/loss.csv"));
}
