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
  t.merges = {
      {"a", "a"},   {"a", "b"}, {"aa", "a"},      {"b", "c"}, {"ab", "c"}, {"aa", "aa"}, {"c", "a"},
      {"aaa", "a"}, {"b", "b"}, {"aaaa", "aaaa"}, {"c", "c"}, {"ca", "b"}, {"bc", "a"},  {"aaaaaaaa", "aaaaaaaa"},
      {"cc", "c"},  {"a", "c"}};
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
  for (const std::string& s :
       {std::string(1500, 'a'), std::string(1499, 'a') + "b", std::string(1, 'c').append(1001, 'a')})
    EXPECT_EQ(tok->encode(s), oracle(t, s)) << s.size();
}

// tokenizer.json fields: the Llama 3 split regex (\p{N}{1,3}) and ignore_merges, against
// hand-worked expectations; unsupported pre-tokenizers and model flags are refused by name.
const char* const kQwen2Re = attnum::model::kQwen2Split;
const char* const kLlama3Re = attnum::model::kLlama3Split;

nlohmann::json digits_tokenizer(const char* regex, bool ignore_merges) {
  nlohmann::json j;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", ignore_merges}};
  // ids: 0-9 digits, 10 a, 11 b, 12 c, 13 "Ġ" (space), then merged symbols
  nlohmann::json v;
  for (int d = 0; d < 10; ++d) v[std::string(1, char('0' + d))] = d;
  v["a"] = 10, v["b"] = 11, v["c"] = 12, v["\u0120"] = 13, v["12"] = 14, v["123"] = 15, v["45"] = 16;
  v["\u0120a"] = 17, v["\u0120ab"] = 18, v["\u0120abc"] = 19;  // no merge builds "Ġabc"
  j["model"]["vocab"] = v;
  j["model"]["merges"] = {"1 2", "12 3", "4 5", "\u0120 a", "\u0120a b"};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  return j;
}

std::unique_ptr<attnum::model::tokenizer> load_json(const nlohmann::json& j) {
  const fs::path p = fs::temp_directory_path() / ("attnum-bpe-flags-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  struct rm {
    fs::path p;
    ~rm() { fs::remove(p); }
  } guard{p};
  return attnum::model::load_hf_tokenizer(p.string());
}

std::string load_error(const nlohmann::json& j) {
  try {
    load_json(j);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(tokenizer_bpe_test, llama3_digit_runs_and_ignore_merges) {
  // Qwen2: one digit per pre-token; " abc" merged to Ġab + c.
  EXPECT_EQ(load_json(digits_tokenizer(kQwen2Re, false))->encode("12345 abc"),
            (std::vector<int>{1, 2, 3, 4, 5, 18, 12}));
  // Llama 3: digits in runs of up to three ("123", "45"); ignore_merges takes "Ġabc" whole.
  EXPECT_EQ(load_json(digits_tokenizer(kLlama3Re, true))->encode("12345 abc"), (std::vector<int>{15, 16, 19}));
  EXPECT_EQ(load_json(digits_tokenizer(kLlama3Re, true))->encode("1234567"),
            (std::vector<int>{15, 16, 6, 7}));  // 123 456 7
  EXPECT_EQ(load_json(digits_tokenizer(kLlama3Re, false))->encode("12345 abc"), (std::vector<int>{15, 16, 18, 12}));
}

TEST(tokenizer_bpe_test, unsupported_tokenizer_fields_are_refused_by_name) {
  auto expect_has = [](const std::string& e, const std::string& want) {
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  };
  nlohmann::json j = digits_tokenizer(kQwen2Re, false);
  j["model"]["dropout"] = 0.1;
  expect_has(load_error(j), "model.dropout = 0.1");
  j = digits_tokenizer(kQwen2Re, false);
  j["model"]["ignore_merges"] = 1;
  expect_has(load_error(j), "model.ignore_merges = 1");
  j = digits_tokenizer(kQwen2Re, false);
  j["model"]["continuing_subword_prefix"] = {"##"};
  expect_has(load_error(j), "model.continuing_subword_prefix = an array of 1 items: expected a string or null");
  j = digits_tokenizer(R"((?<= )\p{L}+| ?\p{N}+)", false);
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[0].pattern.Regex: regex: a lookbehind");
  j = digits_tokenizer(R"( ?\p{L}*)", false);
  expect_has(load_error(j), "can match the empty string");
  j = digits_tokenizer(kQwen2Re, false);
  j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[1].add_prefix_space = true");
  j = digits_tokenizer(kQwen2Re, false);
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[0].behavior = \"Sideways\"");
  j = digits_tokenizer(kQwen2Re, false);
  j["pre_tokenizer"]["pretokenizers"][0].erase("behavior");
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[0].behavior = null");
  j = digits_tokenizer(kQwen2Re, false);
  j["pre_tokenizer"]["pretokenizers"][0]["invert"] = "yes";
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[0].invert");
  j = digits_tokenizer(kQwen2Re, false);
  std::swap(j["pre_tokenizer"]["pretokenizers"][0], j["pre_tokenizer"]["pretokenizers"][1]);
  expect_has(load_error(j), "pre_tokenizer.pretokenizers[0].type = \"ByteLevel\"");
  j = digits_tokenizer(kQwen2Re, false);
  j["pre_tokenizer"] = {{"type", "CharDelimiterSplit"}, {"delimiter", " "}};
  expect_has(load_error(j), "pre_tokenizer.type = \"CharDelimiterSplit\"");
}

// Split's behaviours, invert, Digits and ByteLevel's own regex, seen through which bytes may merge:
// the merges "a b", "b b", "a a", "1 2" join two symbols only inside one piece. The expected
// pieces follow the tokenizers library's NormalizedString::split (tokenizers/src/tokenizer/
// normalizer.rs): matches and the text between them, invert swaps the two, Isolated keeps both,
// Removed drops the matches, MergedWithPrevious/Next joins a match to the piece before/after,
// Contiguous joins neighbouring matches; Digits is a split on char::is_numeric (Isolated when
// individual_digits, else Contiguous).
nlohmann::json behaviour_tokenizer(nlohmann::json steps) {
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}};
  // ids: 0 a, 1 b, 2 c, 3 1, 4 2, 5 Ġ (space), 6 ab, 7 bb, 8 aa, 9 12, 10 Ġa, 11 ., 12 aĠ
  j["model"]["vocab"] = {{"a", 0},  {"b", 1},  {"c", 2},  {"1", 3},        {"2", 4},  {"\u0120", 5},  {"ab", 6},
                         {"bb", 7}, {"aa", 8}, {"12", 9}, {"\u0120a", 10}, {".", 11}, {"a\u0120", 12}};
  j["model"]["merges"] = {"a b", "b b", "a a", "1 2", "\u0120 a", "a \u0120"};
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  return j;
}
nlohmann::json split(const char* re, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", behavior}, {"invert", invert}};
}
std::vector<int> encode_with(nlohmann::json steps, const std::string& text) {
  return load_json(behaviour_tokenizer(std::move(steps)))->encode(text);
}

TEST(tokenizer_bpe_test, split_behaviours_invert_digits_and_byte_level_regex) {
  using ids = std::vector<int>;
  EXPECT_EQ(encode_with(nlohmann::json::array(), "abab"), (ids{6, 6}));  // one piece: a b, a b merge
  // Pattern "b" on "abba": matches b, b; between them a, (nothing), a.
  EXPECT_EQ(encode_with({split("b", "Isolated")}, "abba"), (ids{0, 1, 1, 0}));         // a|b|b|a
  EXPECT_EQ(encode_with({split("b", "Removed")}, "abba"), (ids{0, 0}));                // a, a
  EXPECT_EQ(encode_with({split("b", "MergedWithPrevious")}, "abba"), (ids{6, 1, 0}));  // ab|b|a
  EXPECT_EQ(encode_with({split("b", "MergedWithNext")}, "abba"), (ids{0, 1, 1, 0}));   // a|b|ba: b a no merge
  EXPECT_EQ(encode_with({split("a", "MergedWithNext")}, "abab"), (ids{6, 6}));         // ab|ab
  EXPECT_EQ(encode_with({split("b", "Contiguous")}, "abba"), (ids{0, 7, 0}));          // a|bb|a
  // invert: the text between matches becomes the match.
  EXPECT_EQ(encode_with({split("b", "Removed", true)}, "abba"), (ids{1, 1}));                   // the b's stay
  EXPECT_EQ(encode_with({split("b", "MergedWithPrevious", true)}, "abba"), (ids{0, 1, 1, 0}));  // a|b|ba
  // Digits
  EXPECT_EQ(encode_with({{{"type", "Digits"}, {"individual_digits", true}}}, "a12"), (ids{0, 3, 4}));
  EXPECT_EQ(encode_with({{{"type", "Digits"}, {"individual_digits", false}}}, "a12"), (ids{0, 9}));
  // Split then Digits: each applies to the pieces of the one before.
  EXPECT_EQ(encode_with({split("a", "Removed", true), {{"type", "Digits"}, {"individual_digits", false}}}, "aa12"),
            (ids{0, 0}));
  // ByteLevel with use_regex: GPT-2's split makes "a b" two pieces, "a" and " b", so the merge
  // "a Ġ" (which joins them when the text is one piece) cannot apply.
  nlohmann::json j = behaviour_tokenizer(nlohmann::json::array());
  EXPECT_EQ(load_json(j)->encode("a b"), (ids{12, 1}));
  j["pre_tokenizer"]["pretokenizers"][0]["use_regex"] = true;
  EXPECT_EQ(load_json(j)->encode("a b"), (ids{0, 5, 1}));
  j["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}};  // use_regex defaults to true
  EXPECT_EQ(load_json(j)->encode("a b"), (ids{0, 5, 1}));
  // A String pattern is a literal: "." splits at the dot only (as a regex it would match every character).
  nlohmann::json lit = split("", "Isolated");
  lit["pattern"] = {{"String", "."}};
  EXPECT_EQ(encode_with({lit}, "ab.ab"), (ids{6, 11, 6}));
  EXPECT_EQ(encode_with({split(".", "Isolated")}, "ab.ab"), (ids{0, 1, 11, 0, 1}));
}

}  // namespace
