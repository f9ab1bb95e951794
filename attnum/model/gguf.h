#pragma once
// llama.cpp's GGUF model files (versions 2 and 3): general.architecture llama, qwen2 or qwen3;
// tensors F32, F16, BF16 (read in place, memory-mapped) and Q8_0 (dequantised to fp32 exactly as
// ggml does); the tokenizer stored in the file: byte-level BPE (tokenizer.ggml.model "gpt2") or
// llama.cpp's SentencePiece tokenizer ("llama").
// Every count, length, offset, alignment, dimension and tensor range is validated before use;
// metadata keys and tensors the forward does not implement are refused by name. docs/model.md
// lists what is read and what is refused.
#include <memory>
#include <string>

#include "attnum/model/tokenizer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

/// True when `path` names a GGUF file: a regular file whose first four bytes are "GGUF". (The
/// loader also sends any `*.gguf` path here, so a broken one is named as a GGUF file.)
bool is_gguf_file(const std::string& path);

/// Returns the model in a GGUF file, in Hugging Face conventions (rotate-half RoPE: the q/k rows
/// that llama.cpp's converter permutes for the llama architecture are put back), so a GGUF and
/// the Hugging Face folder it was converted from give the same forward. Throws attnum::error
/// naming the file and the key or tensor.
weights load_gguf(const std::string& path);

/// Returns the tokenizer stored in a GGUF file (tokenizer.ggml.*): byte-level BPE ("gpt2") or
/// SentencePiece ("llama", see tokenizer_llamacpp_spm.h). Reads only the metadata, so a
/// vocabulary-only file (no tensors) will do. encode adds no BOS: load_gguf's config::bos_id says
/// whether the model prepends one (tokenizer.ggml.add_bos_token; absent: llama and SPM yes).
std::unique_ptr<tokenizer> load_gguf_tokenizer(const std::string& path);

}  // namespace attnum::model
