#pragma once
// llama.cpp's SentencePiece tokenizer (LLAMA_VOCAB_TYPE_SPM, tokenizer.ggml.model "llama": Llama 2,
// Mistral, TinyLlama GGUF files), as llama.cpp runs it: spaces escaped to U+2581, a space prefix,
// bigram merges by score, byte fallback through <0xXX> tokens, user-defined tokens split out first.
#include <memory>
#include <string>
#include <vector>

#include "attnum/model/tokenizer.h"

namespace attnum::model {

/// An SPM vocabulary as a GGUF file stores it (tokenizer.ggml.*), already validated by the caller
/// (same lengths, no duplicate token texts, no NaN score, byte tokens spelled <0xXX>).
struct spm_vocab {
  std::vector<std::string> tokens;  ///< id -> text (empty texts already renamed [EMPTY_<id>])
  std::vector<float> scores;        ///< id -> score (tokenizer.ggml.scores)
  std::vector<int> types;           ///< id -> llama_token_type: 0 undefined, 1 normal, 2 unknown,
                                    ///< 3 control, 4 user-defined, 5 unused, 6 byte
  bool add_space_prefix = true;     ///< tokenizer.ggml.add_space_prefix (default true for SPM)
};

/// The tokenizer of `v`. encode(text) is llama.cpp's tokenize(text, add_special = false,
/// parse_special = false): no BOS (callers add the model's BOS, config::bos_id); control and
/// unknown tokens written in the text are plain text; user-defined tokens are split out. decode
/// is token_to_piece with special tokens rendered as their text; decode(-1, id) (the first token
/// of a text) drops the one leading space the space prefix put there, as llama_detokenize does for
/// the first token. Errors name `what` (e.g. "model.gguf: tokenizer.ggml"); `source` is the
/// provenance string.
std::unique_ptr<tokenizer> make_spm_tokenizer(spm_vocab v, const std::string& what, const std::string& source);

}  // namespace attnum::model
