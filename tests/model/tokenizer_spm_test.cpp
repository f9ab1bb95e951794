// SentencePiece-style tokenizer.json features on a toy vocabulary, each expectation worked by hand
// from the tokenizers library's source (huggingface/tokenizers@3ba8ad0061a885baf052bbb7bbd22857e73e0c4e):
//   tokenizers/src/pre_tokenizers/metaspace.rs:123-147 (pre_tokenize: spaces replaced; prepended
//     unless the piece starts with the replacement, "first" only at original offset 0; split
//     before each replacement, MergedWithNext), :62-70 (add_prefix_space false needs never)
//   tokenizers/src/normalizers/prepend.rs:18-22 (only a non-empty piece), replace.rs:82-86
//   tokenizers/src/models/bpe/model.rs:465-549 (merge_word: byte_fallback's <0xXX> tokens when all
//     exist, else unk, fused with fuse_unk; no unk_token: the code point is dropped)
// and malformed fields refused naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attnum/model/tokenizer.h"

namespace fs = std::filesystem;

namespace {

// ids: 0 <unk>, 1 <s>, 2 ▁, 3 a, 4 b, 5 ▁a, 6 a▁, 7 <0xC3>, 8 <0xA9>, 9 ab
nlohmann::json toy() {
  nlohmann::json j;
  j["model"] = {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"vocab",
                 {{"<unk>", 0},
                  {"\u2581", 2},
                  {"a", 3},
                  {"b", 4},
                  {"\u2581a", 5},
                  {"a\u2581", 6},
                  {"<0xC3>", 7},
                  {"<0xA9>", 8},
                  {"ab", 9}}},
                {"merges", {"a \u2581", "\u2581 a", "a b"}}};
  j["added_tokens"] = {{{"id", 1}, {"content", "<s>"}}};
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  return j;
}

std::unique_ptr<attnum::model::tokenizer> load_json(const nlohmann::json& j) {
  const fs::path p = fs::temp_directory_path() / ("attnum-spm-unit-" + std::to_string(::getpid()) + ".json");
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

using ids = std::vector<int>;

TEST(tokenizer_spm_test, metaspace_split_and_prepend_schemes) {
  nlohmann::json j = toy();
  // "a a" -> "▁a▁a"; split: "▁a" "▁a".
  EXPECT_EQ(load_json(j)->encode("a a"), (ids{5, 5}));
  // Unsplit, one word ▁ a ▁ a: "a ▁" (rank 0) merges first, then nothing: ▁, a▁, a.
  j["pre_tokenizer"]["split"] = false;
  EXPECT_EQ(load_json(j)->encode("a a"), (ids{2, 6, 3}));
  // Already starting with the replacement: nothing prepended (" a" -> "▁a", not "▁▁a").
  EXPECT_EQ(load_json(j)->encode(" a"), (ids{5}));
  // always: the piece after an added token gets one too; first: only the piece at offset 0.
  EXPECT_EQ(load_json(j)->encode("<s>a"), (ids{1, 5}));
  j["pre_tokenizer"]["prepend_scheme"] = "first";
  EXPECT_EQ(load_json(j)->encode("<s>a"), (ids{1, 3}));
  EXPECT_EQ(load_json(j)->encode("a<s>a"), (ids{5, 1, 3}));
  // never, split: "a▁a" -> "a" "▁a" (a new piece begins at each replacement).
  j["pre_tokenizer"]["prepend_scheme"] = "never";
  j["pre_tokenizer"]["split"] = true;
  EXPECT_EQ(load_json(j)->encode("a a"), (ids{3, 5}));
  // "a  a" -> "a▁▁a" -> "a" "▁" "▁a".
  EXPECT_EQ(load_json(j)->encode("a  a"), (ids{3, 2, 5}));
  // The default scheme is always; the legacy add_prefix_space true changes nothing.
  j["pre_tokenizer"].erase("prepend_scheme");
  j["pre_tokenizer"]["add_prefix_space"] = true;
  // "▁ab": "▁ a" (rank 1) before "a b" (rank 2), then "▁a b" is no merge.
  EXPECT_EQ(load_json(j)->encode("ab"), (ids{5, 4}));
  // add_prefix_space false with prepend_scheme never: accepted.
  j["pre_tokenizer"]["add_prefix_space"] = false;
  j["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(load_json(j)->encode("ab"), (ids{9}));
}

TEST(tokenizer_spm_test, byte_fallback_unk_and_fuse_unk) {
  nlohmann::json j = toy();
  j["pre_tokenizer"]["prepend_scheme"] = "never";
  // "é" (C3 A9) is not in the vocabulary: its two byte tokens.
  EXPECT_EQ(load_json(j)->encode("\u00e9a"), (ids{7, 8, 3}));
  // "ë" (C3 AB): <0xAB> is absent, so the unknown token; two in a row fuse into one.
  EXPECT_EQ(load_json(j)->encode("\u00eb\u00eba"), (ids{0, 3}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load_json(j)->encode("\u00eb\u00eba"), (ids{0, 0, 3}));
  // Without byte_fallback "é" is unknown too.
  j["model"]["byte_fallback"] = false;
  EXPECT_EQ(load_json(j)->encode("\u00e9a"), (ids{0, 3}));
  // Without an unknown token the code point is dropped.
  j["model"]["unk_token"] = nullptr;
  EXPECT_EQ(load_json(j)->encode("\u00e9a\u00eb"), (ids{3}));
}

TEST(tokenizer_spm_test, prepend_and_replace_normalizers) {
  nlohmann::json j = toy();
  j.erase("pre_tokenizer");  // with a Prepend or Replace normalizer: no pre-tokenization
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
  // "a a" -> "▁a▁a", one word: ▁, a▁, a (as Metaspace without split).
  EXPECT_EQ(load_json(j)->encode("a a"), (ids{2, 6, 3}));
  // Prepend acts on every non-empty piece between added tokens, never on an empty one.
  EXPECT_EQ(load_json(j)->encode("<s>a"), (ids{1, 5}));
  EXPECT_EQ(load_json(j)->encode("a<s>"), (ids{5, 1}));
  // decode: "▁" as a space, a byte token as its byte.
  const auto tok = load_json(j);
  EXPECT_EQ(tok->decode(-1, 5), " a");
  EXPECT_EQ(tok->decode(-1, 7), "\xC3");
  // A Regex pattern: runs of "b" become one "a".
  j["normalizer"]["normalizers"][1] = {{"type", "Replace"}, {"pattern", {{"Regex", "b+"}}}, {"content", "a"}};
  EXPECT_EQ(load_json(j)->encode("bbb"), (ids{5}));
  EXPECT_EQ(load_json(j)->encode("abba"), (ids{5, 3, 3}));  // "▁aaa": ▁a a a
}

TEST(tokenizer_spm_test, malformed_fields_are_refused_by_name) {
  auto expect_has = [](const nlohmann::json& j, const std::string& want) {
    const std::string e = load_error(j);
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  };
  nlohmann::json j = toy();
  j["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  expect_has(j, "pre_tokenizer.prepend_scheme = \"sometimes\"");
  j = toy();
  j["pre_tokenizer"]["replacement"] = "ab";
  expect_has(j, "pre_tokenizer.replacement = \"ab\"");
  j = toy();
  j["pre_tokenizer"].erase("replacement");
  expect_has(j, "pre_tokenizer.replacement");
  j = toy();
  j["pre_tokenizer"]["split"] = "yes";
  expect_has(j, "pre_tokenizer.split = \"yes\"");
  j = toy();
  j["pre_tokenizer"]["add_prefix_space"] = false;  // with prepend_scheme always
  expect_has(j, "pre_tokenizer.add_prefix_space = false");
  j = toy();
  j["pre_tokenizer"]["shift"] = 1;
  expect_has(j, "pre_tokenizer.shift = 1");
  j = toy();
  j["model"]["byte_fallback"] = "true";
  expect_has(j, "model.byte_fallback = \"true\"");
  j = toy();
  j["model"]["fuse_unk"] = 1;
  expect_has(j, "model.fuse_unk = 1");
  j = toy();
  j["model"]["unk_token"] = 5;
  expect_has(j, "model.unk_token = 5");
  j = toy();
  j["model"]["unk_token"] = "<nope>";
  expect_has(j, "model.unk_token = \"<nope>\": not in model.vocab");
  j = toy();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}};
  expect_has(j, "normalizer.content");
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", 3}}}, {"content", "x"}};
  expect_has(j, "normalizer.pattern.Regex = 3");
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(?<=a)b"}}}, {"content", "x"}};
  expect_has(j, "normalizer.pattern.Regex: regex: a lookbehind");
  j["normalizer"] = {{"type", "Prepend"}, {"prepend", 7}};
  expect_has(j, "normalizer.prepend = 7");
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFD"}}}}};
  expect_has(j, "normalizer.normalizers[1].type = \"NFD\"");
  j["normalizer"] = {{"type", "NFKC"}, {"form", 1}};
  expect_has(j, "normalizer.form = 1");
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_has(j, "normalizer.type = \"Lowercase\"");
  j = toy();
  j["pre_tokenizer"] = {{"type", "Whitespace"}, {"split", true}};
  expect_has(j, "pre_tokenizer.split = true not supported (unknown field)");
  j = toy();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}, {"x", 1}}}}};
  expect_has(j, "pre_tokenizer.pretokenizers[0].x = 1");
  j = toy();
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  expect_has(j, "pre_tokenizer.type = \"BertPreTokenizer\"");
  j = toy();
  j["model"]["continuing_subword_prefix"] = 5;
  expect_has(j, "model.continuing_subword_prefix = 5: expected a string or null");
  j = toy();
  j["model"]["end_of_word_suffix"] = true;
  expect_has(j, "model.end_of_word_suffix = true: expected a string or null");
  j = toy();
  j["added_tokens"] = {{{"id", 1}, {"content", "<s>"}, {"normalized", "no"}}};
  expect_has(j, "added_tokens[0].normalized = \"no\": expected true or false");
  for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
    j = toy();
    j["added_tokens"] = {{{"id", 1}, {"content", "<s>"}, {flag, true}}};
    expect_has(j, "added_tokens[0]." + std::string(flag) + " = true is not supported");
    j["added_tokens"][0][flag] = 1;
    expect_has(j, "added_tokens[0]." + std::string(flag) + " = 1: expected true or false");
    j["added_tokens"][0][flag] = false;  // as every shipped file: read
    EXPECT_NO_THROW(load_json(j)) << flag;
  }
}

}  // namespace
