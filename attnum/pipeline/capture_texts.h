#pragma once
// `attnum capture` as a library call (the CLI and Python's attnum.capture): post-RoPE Q/K/V of
// every layer of a model, one safetensors file per text or token-id file (model/capture.h).
#include <span>
#include <string>
#include <vector>

#include "attnum/model/capture.h"

namespace attnum::pipeline {

struct capture_request {
  std::string model, tokenizer, out, linear = "auto";
  std::vector<std::string> texts, token_ids;  ///< text files (tokenized) or token-id files
  int tokens = 1024;                          ///< the first N tokens of each
  bool progress = true;                       ///< the progress line (core/progress.h)
  /// Split the model's layers across the MPI ranks (scaleout/layers.h): rank r holds only its
  /// layers, the residual stream flows from rank to rank, and rank 0 gathers every layer's
  /// operands and writes the files (the same bytes as one process).
  bool pipeline_layers = false;
};

/// Checks every input, then writes one capture file per source into r.out (a failed run leaves
/// it as it was); returns the written paths in the order given (on rank 0; other ranks of a
/// layer pipeline return none). Throws attnum::error on bad input.
std::vector<std::string> capture_texts(const capture_request& r);

/// A layer pipeline's capture of one token window (every rank calls it; w holds the rank's slice):
/// every rank runs its layers, ranks 1.. send their layers' q, k, v to rank 0, which receives them
/// rank by rank, layer by layer, and returns them all (other ranks return only their own).
model::captured_qkv capture_pipelined(const model::weights& w, std::span<const int> ids, model::linear_precision p);

}  // namespace attnum::pipeline
