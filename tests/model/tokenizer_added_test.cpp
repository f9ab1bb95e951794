// Added tokens of a tokenizer.json split out of the text longest-first at each position: the
// trie walk against the definition (compare every added token at every position), and a
// tokenizer with 100k added tokens encoding 100 KB quickly (comparing every added token at
// every position took 10^10 comparisons there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/model/tokenizer.h"

namespace fs = std::filesystem;

namespace {

std::unique_ptr<attnum::model::tokenizer> make(const std::vector<std::string>& added) {
  nlohmann::json j;
  j["model"]["type"] = "BPE";
  j["model"]["vocab"] = {{"a", 0}, {"b", 1}, {"c", 2}};
  j["model"]["merges"] = nlohmann::json::array();
  j["added_tokens"] = nlohmann::json::array();
  for (size_t k = 0; k < added.size(); ++k) j["added_tokens"].push_back({{"content", added[k]}, {"id", 100 + int(k)}});
  const fs::path p = fs::temp_directory_path() / ("attnum-added-test-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  auto tok = attnum::model::load_hf_tokenizer(p.string());
  fs::remove(p);
  return tok;
}

// The definition: at each position the longest added token that starts there (the first listed
// among equal strings), else the character joins the plain text, which is encoded without them.
std::vector<int> oracle(const attnum::model::tokenizer& tok, const std::vector<std::string>& added,
                        const std::string& text) {
  std::vector<int> ids;
  std::string plain;
  auto flush = [&] {
    const auto p = tok.encode(plain);
    ids.insert(ids.end(), p.begin(), p.end());
    plain.clear();
  };
  for (size_t i = 0; i < text.size();) {
    int best = -1;
    for (size_t k = 0; k < added.size(); ++k)
      if (text.compare(i, added[k].size(), added[k]) == 0 && (best < 0 || added[k].size() > added[size_t(best)].size()))
        best = int(k);
    if (best < 0) {
      plain += text[i++];
      continue;
    }
    flush();
    ids.push_back(100 + best);
    i += added[size_t(best)].size();
  }
  flush();
  return ids;
}

}  // namespace

TEST(tokenizer_added_test, trie_matches_longest_first_definition) {
  const std::vector<std::string> added = {"ab", "abc", "bca", "c", "abcab", "ba", "abcabcab"};
  const auto tok = make(added);
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    std::string s;
    for (size_t i = 0, n = 1 + rng() % 40; i < n; ++i) s.push_back("abc"[rng() % 3]);
    ASSERT_EQ(tok->encode(s), oracle(*tok, added, s)) << s;
  }
  for (size_t k = 0; k < added.size(); ++k) EXPECT_EQ(tok->decode(0, 100 + int(k)), added[k]);
}

TEST(tokenizer_added_test, many_added_tokens_stay_fast) {
  // 100k distinct added tokens "c" + 19 letters of a/b, a 100 KB text.
  std::vector<std::string> added;
  for (int k = 0; k < 100000; ++k) {
    std::string s = "c";
    for (int b = 0; b < 19; ++b) s.push_back((k >> b) & 1 ? 'b' : 'a');
    added.push_back(s);
  }
  const auto tok = make(added);
  std::string text;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) text.push_back("aab"[rng() % 3]);
  text.replace(1000, added[12345].size(), added[12345]);
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok->encode(text);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 100 + 12345), 1);
}
