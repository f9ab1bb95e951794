#pragma once
// Tokenizers: llama2.c's tokenizer.bin (sentencepiece-style BPE by merge scores, byte fallback)
// and Hugging Face tokenizer.json BPE, byte-level or SentencePiece-converted (its pre-tokenizer
// splits run on model/regex.h).
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnum::model {

/// Text <-> token ids.
class tokenizer {
 public:
  virtual ~tokenizer() = default;
  /// Returns the ids of `text` (no BOS; callers add the model's BOS).
  virtual std::vector<int> encode(std::string_view text) const = 0;
  /// Returns the text of token `id` following token `prev` (-1 at the start).
  virtual std::string decode(int prev, int id) const = 0;
  /// Returns the number of tokens.
  virtual int size() const = 0;
  /// Returns a provenance string: file name and content hash.
  const std::string& source() const { return source_; }

 protected:
  std::string source_;
};

/// Loads a llama2.c tokenizer file (int32 max_token_length, then per token: float score,
/// int32 length, bytes) with `vocab_size` tokens; throws attnum::error naming the file.
std::unique_ptr<tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size);

/// Loads a Hugging Face tokenizer.json holding a BPE model: byte-level (Qwen2, Llama 3, GPT-2
/// style) or converted from SentencePiece (Llama 2, Mistral, TinyLlama: Metaspace or a
/// Prepend/Replace normalizer, byte_fallback). Throws attnum::error naming the file and field.
std::unique_ptr<tokenizer> load_hf_tokenizer(const std::string& path);

/// The pre-tokenizer split regexes of Qwen2 and of Llama 3 (the same but for \p{N}{1,3}: digits
/// in runs of up to three), as their tokenizer.json files write them; make_bpe_tokenizer uses
/// them for llama.cpp's pre-tokenizer names qwen2 and llama-bpe.
inline constexpr const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline constexpr const char* kLlama3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/// GPT-2's split as llama.cpp writes it for LLAMA_VOCAB_PRE_TYPE_GPT2 (ggml-org/llama.cpp@c392e5094
/// src/llama-vocab.cpp:340-347): GPT-2's own pattern without its final |\s+, which changes no
/// split (a lone whitespace code point before a non-space, all that branch would add, is isolated
/// as text between matches; llama.cpp runs this exact string as its hand-written
/// unicode_regex_split_custom_gpt2, src/unicode.cpp:236-352, 558-559); make_bpe_tokenizer uses it
/// for the pre-tokenizer name gpt-2.
inline constexpr const char* kLlamaCppGpt2Split =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

/// A byte-level BPE vocabulary held by another container (a GGUF file's tokenizer.ggml.*).
struct bpe_vocab {
  std::vector<std::pair<std::string, int>> tokens;  ///< the BPE model's vocabulary: piece, id
  std::vector<std::string> merges;                  ///< "a b", by rank
  std::vector<std::pair<std::string, int>> added;   ///< added tokens, split out of the text first
  std::string pre;                                  ///< llama.cpp's pre-tokenizer name: "qwen2", "llama-bpe", "gpt-2"
};

/// The tokenizer of `v`, as load_hf_tokenizer builds it from the equivalent tokenizer.json
/// ("qwen2": Qwen2's split and NFC; "llama-bpe": Llama 3's split and ignore_merges; "gpt-2":
/// GPT-2's split, no normalizer, merges applied). Errors name
/// `what`; `source` is the provenance string. Throws attnum::error for another pre-tokenizer.
std::unique_ptr<tokenizer> make_bpe_tokenizer(const bpe_vocab& v, const std::string& what, const std::string& source);

}  // namespace attnum::model
