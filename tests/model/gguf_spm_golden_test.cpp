// The SentencePiece (SPM) tokenizer stored in a GGUF file against every case of llama.cpp's test
// vectors for the Llama 2 vocabulary: ggml-vocab-llama-spm.gguf (vocabulary only, no tensors) and
// its .inp/.out, from ggml-org/llama.cpp@c392e5094 models/. The .out ids are those llama.cpp's
// tests/test-tokenizer-0.cpp checks: common_tokenize(ctx, text, add_special = false,
// parse_special = false) (lines 196, 205), so no BOS, as attnum's encode.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "attnum/model/gguf.h"
#include "model/vocab_vectors.h"

namespace {
const std::string kVocab = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-llama-spm.gguf";

TEST(gguf_spm_golden_test, llama_spm_matches_every_ggml_test_vector) {
  ASSERT_TRUE(std::filesystem::exists(kVocab)) << kVocab;
  auto tok = attnum::model::load_gguf_tokenizer(kVocab);
  EXPECT_EQ(tok->size(), 32000);
  attnum::test::expect_every_vector(*tok, kVocab, true);
}

TEST(gguf_spm_golden_test, a_control_token_in_the_text_is_plain_text) {
  auto tok = attnum::model::load_gguf_tokenizer(kVocab);
  // parse_special = false: "<s>" is not BOS (id 1) but its characters.
  const std::vector<int> ids = tok->encode("<s>");
  EXPECT_TRUE(std::find(ids.begin(), ids.end(), 1) == ids.end());
  EXPECT_EQ(tok->decode(-1, 1), "<s>");
}
}  // namespace
