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
  std::string family;   ///< "llama2c", "llama", "mistral", "qwen2", "qwen3"
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
  bool qkv_bias = false;         ///< q/k/v projections have a bias (qwen2; llama attention_bias)
  bool o_bias = false;           ///< o_proj has a bias (llama/qwen3 attention_bias)
  bool mlp_bias = false;         ///< gate/up/down projections have biases (llama mlp_bias)
  bool qk_norm = false;          ///< qwen3: RMSNorm over head_dim of each q and k head before RoPE
  /// RoPE inverse frequencies per pair [d_head/2]; empty: theta^(-2j/d_head). Set by rope_scaling.
  std::vector<float> inv_freq;
  float rope_attention_scale = 1.0f;  ///< multiplies cos and sin (yarn's attention_factor)
  /// Per layer: sliding-window length (0: full causal). A forward longer than a layer's window
  /// is refused (the attention hook is causal only).
  std::vector<int> sliding_window;
  bool tied_embeddings = true;   ///< classifier = token embedding table
  int bos_id = -1;               ///< token prepended to texts (-1: none)
};

/// One layer's weights.
struct layer_weights {
  std::vector<float> attn_norm;            // [dim]
  std::vector<float> wq, wk, wv, wo;       // [n_head*d_head, dim], [n_kv*d_head, dim] x2, [dim, n_head*d_head]
  std::vector<float> bq, bk, bv;           // empty unless qkv_bias
  std::vector<float> bo;                   // [dim]; empty unless o_bias
  std::vector<float> q_norm, k_norm;       // [d_head]; empty unless qk_norm
  std::vector<float> ffn_norm;             // [dim]
  std::vector<float> w1, w3;               // gate, up: [hidden_dim, dim]
  std::vector<float> w2;                   // down: [dim, hidden_dim]
  std::vector<float> b1, b3, b2;           // [hidden_dim] x2, [dim]; empty unless mlp_bias
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
