// The byte-level BPE tokenizer stored in a GGUF file with tokenizer.ggml.pre "gpt-2" against every
// case of llama.cpp's test vectors for the GPT-2 vocabulary: ggml-vocab-gpt-2.gguf (vocabulary
// only, no tensors) and its .inp/.out, from ggml-org/llama.cpp@c392e5094 models/. The .out ids are
// those llama.cpp's tests/test-tokenizer-0.cpp checks: common_tokenize(ctx, text, add_special =
// false, parse_special = false) (lines 196, 205), so no BOS, as attnum's encode.
#include <gtest/gtest.h>

#include <filesystem>

#include "attnum/model/gguf.h"
#include "model/vocab_vectors.h"

namespace {
const std::string kVocab = std::string(ATTNUM_DATA_DIR) + "/tokenizer/ggml-vocab-gpt-2.gguf";

TEST(gguf_gpt2_golden_test, gpt2_matches_every_ggml_test_vector) {
  ASSERT_TRUE(std::filesystem::exists(kVocab)) << kVocab;
  auto tok = attnum::model::load_gguf_tokenizer(kVocab);
  EXPECT_EQ(tok->size(), 50257);
  attnum::test::expect_every_vector(*tok, kVocab, true);
}

TEST(gguf_gpt2_golden_test, end_of_text_decodes_as_its_text) {
  auto tok = attnum::model::load_gguf_tokenizer(kVocab);
  // <|endoftext|> (id 50256, token type 3, control) is no byte-level piece: its text as written.
  EXPECT_EQ(tok->decode(-1, 50256), "<|endoftext|>");
}
}  // namespace
