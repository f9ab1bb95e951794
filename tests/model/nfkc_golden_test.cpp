// NFKC of every code point (surrogates excepted) against data/tokenizer/nfkc-code-points.txt,
// made by tests/model/nfkc_oracle.py with CPython's unicodedata.normalize("NFKC"): a listed code
// point must normalize to its listed form, any other to itself.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "attnum/model/nfc.h"
#include "attnum/model/utf8.h"

namespace {
std::string utf8(char32_t c) {
  std::string s;
  attnum::model::append_utf8(s, c);
  return s;
}

TEST(nfkc_golden_test, every_code_point_matches_cpython) {
  std::ifstream f(std::string(ATTNUM_DATA_DIR) + "/tokenizer/nfkc-code-points.txt");
  ASSERT_TRUE(f) << "data/tokenizer/nfkc-code-points.txt";
  std::unordered_map<char32_t, std::string> want;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string cp;
    ls >> cp;
    std::string out;
    for (std::string h; ls >> h;) out += utf8(char32_t(std::stoul(h, nullptr, 16)));
    want[char32_t(std::stoul(cp, nullptr, 16))] = out;
  }
  ASSERT_GT(want.size(), 4000u);
  int failures = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string in = utf8(c);
    auto it = want.find(c);
    const std::string& expect = it == want.end() ? in : it->second;
    const std::string got = attnum::model::nfkc(in);
    if (got != expect && ++failures <= 20) ADD_FAILURE() << "U+" << std::hex << uint32_t(c);
  }
  EXPECT_EQ(failures, 0);
}
}  // namespace
