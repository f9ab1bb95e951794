#pragma once
// `attnum capture` as a library call (the CLI and Python's attnum.capture): post-RoPE Q/K/V of
// every layer of a model, one safetensors file per text or token-id file (model/capture.h).
#include <string>
#include <vector>

namespace attnum::pipeline {

struct capture_request {
  std::string model, tokenizer, out, linear = "auto";
  std::vector<std::string> texts, token_ids;  ///< text files (tokenized) or token-id files
  int tokens = 1024;                          ///< the first N tokens of each
  bool progress = true;                       ///< the progress line (core/progress.h)
};

/// Checks every input, then writes one capture file per source into r.out (a failed run leaves
/// it as it was); returns the written paths in the order given. Throws attnum::error on bad input.
std::vector<std::string> capture_texts(const capture_request& r);

}  // namespace attnum::pipeline
