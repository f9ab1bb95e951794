#pragma once
// A decoder-only transformer's configuration and weights (llama and qwen2 families, llama2.c).
// Every matrix is row-major [out, in] as both llama2.c and Hugging Face store it, held in fp32
// (bf16/fp16 checkpoints widen exactly).
#include <cstdint>
#include <string>
#include <vector>

#include "attnum/core/hash.h"

namespace attnum::model {

/// How RoPE pairs the channels of a head.
enum class rope_style : uint8_t {
  interleaved,  ///< llama2.c / Meta: pairs (2i, 2i+1), frequency theta^(-2i/d_head)
  rotate_half,  ///< Hugging Face: pairs (i, i + d_head/2), same frequencies
};

/// Shapes and conventions of a model.
struct config {
  std::string family;   ///< "llama2c", "llama", "qwen2"
  int dim = 0;          ///< hidden size
  int hidden_dim = 0;   ///< MLP intermediate size
  int n_layers = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int d_head = 0;
  int vocab_size = 0;
  int seq_len = 0;      ///< the model's context (max_position_embeddings)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  rope_style rope = rope_style::interleaved;
  bool qkv_bias = false;         ///< qwen2: q/k/v projections have a bias
  bool tied_embeddings = true;   ///< classifier = token embedding table
  int bos_id = -1;               ///< token prepended to texts (-1: none)
};

/// One layer's weights.
struct layer_weights {
  std::vector<float> attn_norm;            // [dim]
  std::vector<float> wq, wk, wv, wo;       // [n_head*d_head, dim], [n_kv*d_head, dim] x2, [dim, n_head*d_head]
  std::vector<float> bq, bk, bv;           // empty unless qkv_bias
  std::vector<float> ffn_norm;             // [dim]
  std::vector<float> w1, w3;               // gate, up: [hidden_dim, dim]
  std::vector<float> w2;                   // down: [dim, hidden_dim]
};

/// A loaded model.
struct weights {
  config cfg;
  std::string id;           ///< model name (file or folder name)
  std::string source_hash;  ///< FNV-1a 64 of the checkpoint bytes (hex), for result metadata
  std::vector<float> tok_embeddings;  // [vocab, dim]
  std::vector<layer_weights> layers;
  std::vector<float> final_norm;      // [dim]
  std::vector<float> classifier;      // [vocab, dim]; empty when tied
  /// Returns the classifier matrix (the embedding table when tied).
  const std::vector<float>& output_matrix() const {
    return classifier.empty() ? tok_embeddings : classifier;
  }
};

/// Throws attnum::error (naming `what`) unless the config's shapes are positive and consistent.
void validate(const config& c, const std::string& what);

/// Rounds every weight to bfloat16 (RNE), as a model held in bf16 on a GPU.
void round_to_bf16(weights& w);

/// The FNV-1a 64-bit hash of bytes as 16 hex digits (core/hash.h; cheap, for provenance only).
using core::fnv1a_hex;

}  // namespace attnum::model
