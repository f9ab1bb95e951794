#pragma once
// Opens a model by path: a llama2.c checkpoint file (*.bin), a Hugging Face folder
// (config.json + model.safetensors or a sharded index) or a GGUF file, and its tokenizer.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnum/model/tokenizer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

/// Returns the model at `path` (a llama2.c file, a Hugging Face folder or a GGUF file).
weights load_model(const std::string& path);
/// The same holding only the slice slice_of(config) (keep_slice): a layer pipeline's rank reads
/// (and checks) only its own tensors.
weights load_model(const std::string& path, const std::function<layer_slice(const config&)>& slice_of);

/// Returns the model's tokenizer: `override_path` when given; else tok512.bin or tokenizer.bin
/// beside a llama2.c file, tokenizer.json inside a Hugging Face folder, or the tokenizer stored in
/// a GGUF file.
std::unique_ptr<tokenizer> load_tokenizer(const std::string& model_path, const weights& w,
                                          const std::string& override_path = "");

/// Returns the ids of a text file: tokenized, with the model's BOS first where it has one.
std::vector<int> tokenize_file(const std::string& path, const tokenizer& tok, const weights& w);

/// Returns the whitespace-separated ids in a file; throws attnum::error naming the file and the
/// offending word.
std::vector<int> read_token_ids(const std::string& path);

/// The seed's default texts: three public-domain books from Debian packages (Sherlock Holmes,
/// Tom Sawyer, Newton's Opticks). Throws attnum::error naming the missing file.
std::vector<std::string> default_texts();

}  // namespace attnum::model
