// The SPM tokenizer of GGUF files (tokenizer.ggml.model "llama") on a toy vocabulary, each
// expectation worked by hand from ggml-org/llama.cpp@c392e5094 src/llama-vocab.cpp:
//   :2329-2375 tokenize for SPM (a space before the text and after each special token,
//     spaces escaped to U+2581), :110-233 llm_tokenizer_spm_session (bigrams whose text is a
//     token, highest score first, leftmost among equal scores, :93-98; symbols that are no token
//     as their bytes through byte_to_token, :2783-2800), :2149-2267 (parse_special = false: only
//     user-defined tokens split the text), :2489-2572 token_to_piece;
// and malformed vocabularies refused naming the key. The GGUF files are written here from the
// format's specification (ggml-org/llama.cpp@a458664fc83b6513baea7adafcb0ef0626b006f8 docs/gguf.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <variant>

#include "attnum/core/error.h"
#include "attnum/model/gguf.h"

namespace fs = std::filesystem;

namespace {

// One metadata value: a string, a bool, a uint32, or an array of strings / float32 / int32.
using value =
    std::variant<std::string, bool, uint32_t, std::vector<std::string>, std::vector<float>, std::vector<int32_t>>;

template <typename T>
void put(std::string& out, T x) {
  out.append(reinterpret_cast<const char*>(&x), sizeof x);
}
void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// GGUF v3, no tensors: magic, version, tensor_count, kv_count, then key, type, value per entry
// (types: 4 uint32, 5 int32, 6 float32, 7 bool, 8 string, 9 array), padded to 32 bytes.
std::string gguf_bytes(const std::vector<std::pair<std::string, value>>& kv) {
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, 0);
  put<uint64_t>(out, kv.size());
  for (const auto& [key, v] : kv) {
    put_str(out, key);
    if (const auto* s = std::get_if<std::string>(&v)) {
      put<uint32_t>(out, 8);
      put_str(out, *s);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      put<uint32_t>(out, 7);
      put<uint8_t>(out, *b);
    } else if (const auto* u = std::get_if<uint32_t>(&v)) {
      put<uint32_t>(out, 4);
      put<uint32_t>(out, *u);
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&v)) {
      put<uint32_t>(out, 9), put<uint32_t>(out, 8), put<uint64_t>(out, ss->size());
      for (const auto& s2 : *ss) put_str(out, s2);
    } else if (const auto* fs2 = std::get_if<std::vector<float>>(&v)) {
      put<uint32_t>(out, 9), put<uint32_t>(out, 6), put<uint64_t>(out, fs2->size());
      for (float f : *fs2) put<float>(out, f);
    } else if (const auto* is = std::get_if<std::vector<int32_t>>(&v)) {
      put<uint32_t>(out, 9), put<uint32_t>(out, 5), put<uint64_t>(out, is->size());
      for (int32_t i : *is) put<int32_t>(out, i);
    }
  }
  out.append((32 - out.size() % 32) % 32, '\0');
  return out;
}

// Toy vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the pieces below.
const std::string kSp = "\u2581";
enum : int { kSpace = 259, kA, kB, kSpA, kAB, kSpAB, kExtra, kAA };
struct toy {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  toy() {
    add("<unk>", 0, 2), add("<s>", 0, 3), add("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      add(buf, 0, 6);
    }
    add(kSp, -1, 1), add("a", -2, 1), add("b", -3, 1), add(kSp + "a", -0.5f, 1), add("ab", -0.25f, 1),
        add(kSp + "ab", -0.1f, 1), add("<extra>", 0, 4), add("aa", 0, 1);
  }
  void add(const std::string& t, float s, int32_t ty) { tokens.push_back(t), scores.push_back(s), types.push_back(ty); }
  std::vector<std::pair<std::string, value>> kv() const {
    return {{"general.architecture", std::string("llama")},
            {"tokenizer.ggml.model", std::string("llama")},
            {"tokenizer.ggml.tokens", tokens},
            {"tokenizer.ggml.scores", scores},
            {"tokenizer.ggml.token_type", types},
            {"tokenizer.ggml.bos_token_id", uint32_t(1)}};
  }
};

std::vector<std::pair<std::string, value>> with(std::vector<std::pair<std::string, value>> kv, const std::string& key,
                                                std::optional<value> v) {
  std::vector<std::pair<std::string, value>> out;
  for (auto& e : kv)
    if (e.first != key) out.push_back(std::move(e));
  if (v) out.emplace_back(key, *v);
  return out;
}

struct temp_gguf {
  fs::path p;
  explicit temp_gguf(const std::vector<std::pair<std::string, value>>& kv) {
    static int n = 0;
    p = fs::temp_directory_path() /
        ("attnum-gguf-spm-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".gguf");
    std::ofstream(p, std::ios::binary) << gguf_bytes(kv);
  }
  ~temp_gguf() { fs::remove(p); }
};

std::unique_ptr<attnum::model::tokenizer> load(const std::vector<std::pair<std::string, value>>& kv) {
  temp_gguf f(kv);
  return attnum::model::load_gguf_tokenizer(f.p.string());
}

std::string load_error(const std::vector<std::pair<std::string, value>>& kv) {
  try {
    load(kv);
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "(no error)";
}

using ids = std::vector<int>;

TEST(gguf_spm_test, merges_by_score_with_a_space_prefix) {
  auto tok = load(toy().kv());
  // "▁ab": "ab" (-0.25) beats "▁a" (-0.5), then "▁ab" (-0.1).
  EXPECT_EQ(tok->encode("ab"), (ids{kSpAB}));
  // "▁a▁b": only "▁a" is a token.
  EXPECT_EQ(tok->encode("a b"), (ids{kSpA, kSpace, kB}));
  EXPECT_EQ(tok->encode(""), ids{});
  // Equal scores ("aa" twice): the leftmost first, so "▁aaa" is ▁, aa, a (not ▁a, aa).
  EXPECT_EQ(tok->encode("aaa"), (ids{kSpace, kAA, kA}));
}

TEST(gguf_spm_test, unknown_characters_fall_back_to_byte_tokens) {
  auto tok = load(toy().kv());
  EXPECT_EQ(tok->encode("\u00e9"), (ids{kSpace, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->decode(kSpace, 3 + 0xC3), "\xC3");
}

TEST(gguf_spm_test, user_defined_tokens_split_the_text_control_tokens_do_not) {
  auto tok = load(toy().kv());
  // After a special token the next piece gets its own space prefix.
  EXPECT_EQ(tok->encode("a<extra>b"), (ids{kSpA, kExtra, kSpace, kB}));
  const ids s = tok->encode("<s>");
  EXPECT_TRUE(std::find(s.begin(), s.end(), 1) == s.end());
  EXPECT_EQ(s.front(), kSpace);
}

TEST(gguf_spm_test, add_space_prefix_false_adds_no_space) {
  auto tok = load(with(toy().kv(), "tokenizer.ggml.add_space_prefix", value(false)));
  EXPECT_EQ(tok->encode("ab"), (ids{kAB}));
  EXPECT_EQ(tok->decode(-1, kSpA), " a");  // nothing to strip: no prefix was added
}

TEST(gguf_spm_test, decode_drops_the_prefix_space_of_the_first_token) {
  auto tok = load(toy().kv());
  EXPECT_EQ(tok->decode(-1, kSpA), "a");
  EXPECT_EQ(tok->decode(kA, kSpA), " a");
  EXPECT_EQ(tok->decode(-1, 1), "<s>");
  EXPECT_EQ(tok->decode(-1, kExtra), "<extra>");
  EXPECT_THROW(tok->decode(-1, 1000), attnum::error);
}

TEST(gguf_spm_test, a_missing_byte_token_is_an_error_naming_the_key) {
  toy t;
  t.tokens[3 + 0xC3] = "<0xc3>";  // lower case: not the token byte_to_token looks for
  t.types[3 + 0xC3] = 1;
  auto tok = load(t.kv());
  try {
    tok->encode("\u00e9");
    FAIL() << "no error";
  } catch (const attnum::error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens: no token <0xC3>"), std::string::npos) << e.what();
  }
}

TEST(gguf_spm_test, malformed_vocabularies_are_refused_naming_the_key) {
  const auto kv = toy().kv();
  const size_t n = toy().tokens.size();
  auto has = [](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  has(load_error(with(kv, "tokenizer.ggml.scores", std::nullopt)), "missing metadata key tokenizer.ggml.scores");
  has(load_error(with(kv, "tokenizer.ggml.scores", value(std::vector<float>(n - 1, 0.0f)))),
      fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", n - 1, n));
  has(load_error(with(kv, "tokenizer.ggml.scores", value(std::vector<int32_t>(n, 0)))),
      "metadata tokenizer.ggml.scores: expected an array of float32");
  has(load_error(with(kv, "tokenizer.ggml.token_type", value(std::vector<int32_t>(n + 1, 1)))),
      fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", n + 1, n));
  toy t;
  t.types[kA] = 6;
  has(load_error(t.kv()),
      fmt::format("tokenizer.ggml.token_type[{}] = 6 (byte) but tokenizer.ggml.tokens[{}]", kA, kA));
  t = toy();
  t.types[kA] = 9;
  has(load_error(t.kv()), fmt::format("tokenizer.ggml.token_type[{}] = 9", kA));
  t = toy();
  t.tokens[kB] = "a";
  has(load_error(t.kv()), fmt::format("tokenizer.ggml.tokens[{}] repeats token {}", kB, kA));
  t = toy();
  t.scores[kB] = std::nanf("");
  has(load_error(t.kv()), fmt::format("tokenizer.ggml.scores[{}] is NaN", kB));
  has(load_error(with(kv, "general.name", value(std::string("Phi-3 mini")))), "general.name 'Phi-3 mini'");
  has(load_error(with(kv, "tokenizer.ggml.model", value(std::string("bert")))), "tokenizer.ggml.model 'bert'");
}

}  // namespace
