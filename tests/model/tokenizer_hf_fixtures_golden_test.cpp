// Small tokenizer.json fixtures (data/tokenizer/hf-<name>.json: Whitespace and WhitespaceSplit,
// alone and in a Sequence; added tokens with normalized true and false; the BPE model's
// continuing_subword_prefix and end_of_word_suffix) against the ids of the Hugging Face tokenizers
// library itself (the Rust crate through npm @anush008/tokenizers), written with the fixtures by
// tests/model/hf_tokenizers_oracle.cjs; and the Whitespace pre-tokenizer's word and space classes
// of every code point against data/tokenizer/hf-word-space.txt from the same library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/core/file.h"
#include "attnum/model/regex.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/utf8.h"
#include "model/vocab_vectors.h"

namespace fs = std::filesystem;

namespace {
const std::string kDir = std::string(ATTNUM_DATA_DIR) + "/tokenizer/";

void expect_fixture(const std::string& name) {
  const auto tok = attnum::model::load_hf_tokenizer(kDir + "hf-" + name + ".json");
  const auto [inputs, want] = attnum::test::read_vocab_vectors(kDir + "hf.inp", kDir + "hf-" + name + ".out");
  ASSERT_EQ(inputs.size(), want.size());
  ASSERT_GT(inputs.size(), 20u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> got = tok->encode(inputs[i]);
    EXPECT_EQ(got, want[i]) << name << " case " << i << ": '" << inputs[i] << "'";
    failures += got != want[i];
  }
  EXPECT_EQ(failures, 0) << "of " << inputs.size() << " cases";
}

TEST(tokenizer_hf_fixtures_golden_test, whitespace) { expect_fixture("whitespace"); }
TEST(tokenizer_hf_fixtures_golden_test, whitespace_split) { expect_fixture("whitespace-split"); }
TEST(tokenizer_hf_fixtures_golden_test, sequence_digits_whitespace) { expect_fixture("sequence-digits-whitespace"); }
TEST(tokenizer_hf_fixtures_golden_test, sequence_split_whitespace_split) {
  expect_fixture("sequence-split-whitespace-split");
}
TEST(tokenizer_hf_fixtures_golden_test, sequence_whitespace_split_metaspace) {
  expect_fixture("sequence-whitespace-split-metaspace");
}
TEST(tokenizer_hf_fixtures_golden_test, added_tokens_normalized_with_prepend_replace) {
  expect_fixture("added-normalized");
}
TEST(tokenizer_hf_fixtures_golden_test, added_tokens_normalized_with_nfkc_and_whitespace) {
  expect_fixture("added-normalized-whitespace");
}
TEST(tokenizer_hf_fixtures_golden_test, continuing_subword_prefix) { expect_fixture("prefix"); }
TEST(tokenizer_hf_fixtures_golden_test, end_of_word_suffix) { expect_fixture("suffix"); }
TEST(tokenizer_hf_fixtures_golden_test, prefix_and_suffix) { expect_fixture("prefix-suffix"); }
TEST(tokenizer_hf_fixtures_golden_test, prefix_with_byte_fallback_and_fuse_unk) {
  expect_fixture("prefix-byte-fallback");
}

// Every code point through Whitespace: "a" c "a" with the vocabulary a, ##a, [UNK] and the prefix
// "##" is a ##a-ended word of three ([a, UNK, ##a]) when c is a word character, two words a when
// c is a space, three words ([a, UNK, a]) otherwise. Code points unassigned in attnum's Unicode 14
// tables are skipped (the library's tables are newer).
TEST(tokenizer_hf_fixtures_golden_test, whitespace_word_and_space_classes_of_every_code_point) {
  std::vector<char> want(0x110000, 'P');
  std::istringstream in(attnum::read_file(kDir + "hf-word-space.txt"));
  int ranges = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    char kind = 0;
    unsigned first = 0, last = 0;
    ls >> kind >> std::hex >> first >> last;
    ASSERT_TRUE(ls && last < want.size()) << line;
    for (unsigned c = first; c <= last; ++c) want[c] = kind;
    ++ranges;
  }
  ASSERT_GT(ranges, 500);
  const nlohmann::json j = {{"model",
                             {{"type", "BPE"},
                              {"vocab", {{"[UNK]", 0}, {"a", 1}, {"##a", 2}}},
                              {"merges", nlohmann::json::array()},
                              {"unk_token", "[UNK]"},
                              {"continuing_subword_prefix", "##"}}},
                            {"pre_tokenizer", {{"type", "Whitespace"}}}};
  const fs::path p = fs::temp_directory_path() / ("attnum-ws-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  struct rm {
    fs::path p;
    ~rm() { fs::remove(p); }
  } guard{p};
  int checked = 0, failures = 0;
  for (char32_t block = 0; block < 0x110000; block += 0x10000) {
    const auto tok = attnum::model::load_hf_tokenizer(p.string());  // a fresh cache per plane
    for (char32_t c = block; c < block + 0x10000; ++c) {
      if ((c >= 0xD800 && c <= 0xDFFF) || c == 'a' || attnum::model::unicode_category(c) == 29) continue;
      std::string text = "a";
      attnum::model::append_utf8(text, c);
      text += "a";
      const std::vector<int> ids = tok->encode(text);
      const char got = ids == std::vector<int>{1, 0, 2}   ? 'W'
                       : ids == std::vector<int>{1, 1}    ? 'S'
                       : ids == std::vector<int>{1, 0, 1} ? 'P'
                                                          : '?';
      ++checked;
      if (got != want[c] && ++failures <= 20)
        ADD_FAILURE() << "U+" << std::hex << uint32_t(c) << ": " << got << ", the library: " << want[c];
    }
  }
  EXPECT_EQ(failures, 0) << "of " << checked;
  EXPECT_GT(checked, 250000);
}

}  // namespace
