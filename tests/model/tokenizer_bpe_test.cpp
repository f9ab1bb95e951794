// The heap-based byte-level BPE merge (O(n log n) per pre-token) against a plain-loop oracle
// that rescans for the lowest-ranked leftmost pair after every merge (the definition, O(n^2)).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/model/tokenizer.h"

namespace fs = std::filesystem;

namespace {

struct toy {
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::map<std::string, int> vocab;
};

// Merges over the letters a, b, c (GPT-2's byte alphabet maps ASCII letters to themselves).
toy make_toy() {
  toy t;
  t.merges = {{"a", "a"}, {"a", "b"}, {"aa", "a"}, {"b", "c"}, {"ab", "c"}, {"aa", "aa"},
              {"c", "a"}, {"aaa", "a"}, {"b", "b"}, {"aaaa", "aaaa"}, {"c", "c"}, {"ca", "b"},
              {"bc", "a"}, {"aaaaaaaa", "aaaaaaaa"}, {"cc", "c"}, {"a", "c"}};
  int id = 0;
  for (const char* s : {"a", "b", "c"}) t.vocab[s] = id++;
  for (const auto& [x, y] : t.merges)
    if (!t.vocab.count(x + y)) t.vocab[x + y] = id++;
  return t;
}

// The definition: merge the lowest-ranked adjacent pair (leftmost among equals) until none.
std::vector<int> oracle(const toy& t, const std::string& text) {
  std::map<std::pair<std::string, std::string>, int> rank;
  for (size_t r = 0; r < t.merges.size(); ++r) rank.emplace(t.merges[r], int(r));
  std::vector<std::string> sym;
  for (char c : text) sym.emplace_back(1, c);
  for (;;) {
    int best = -1;
    size_t at = 0;
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      auto it = rank.find({sym[k], sym[k + 1]});
      if (it != rank.end() && (best < 0 || it->second < best)) best = it->second, at = k;
    }
    if (best < 0) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + long(at) + 1);
  }
  std::vector<int> ids;
  for (const auto& s : sym) ids.push_back(t.vocab.at(s));
  return ids;
}

TEST(tokenizer_bpe_test, heap_merge_matches_the_rescanning_definition) {
  const toy t = make_toy();
  nlohmann::json j;
  j["model"]["type"] = "BPE";
  j["model"]["vocab"] = t.vocab;
  j["model"]["merges"] = nlohmann::json::array();
  for (const auto& [x, y] : t.merges) j["model"]["merges"].push_back(x + " " + y);
  const fs::path p = fs::temp_directory_path() / ("attnum-bpe-test-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  const auto tok = attnum::model::load_hf_tokenizer(p.string());
  fs::remove(p);
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 1000; ++trial) {
    const size_t n = 1 + rng() % 64;
    std::string s;
    // Skewed toward 'a' so long runs (the quadratic case) appear.
    for (size_t i = 0; i < n; ++i) s.push_back("aaaabc"[rng() % 6]);
    ASSERT_EQ(tok->encode(s), oracle(t, s)) << s;
  }
  for (const std::string& s : {std::string(1500, 'a'), std::string(1499, 'a') + "b", "c" + std::string(1001, 'a')})
    EXPECT_EQ(tok->encode(s), oracle(t, s)) << s.size();
}

}  // namespace
