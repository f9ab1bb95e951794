#pragma once
// A decoder-only transformer's configuration and weights (llama and qwen2 families, llama2.c).
// Every matrix is row-major [out, in] as both llama2.c and Hugging Face store it, held in the
// dtype the checkpoint stores (fp32, bf16 or fp16), in place in the mapped checkpoint file when
// it can be; norms and biases (small) are fp32 vectors.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnum/core/hash.h"
#include "attnum/io/safetensors.h"

namespace attnum::model {

/// How RoPE pairs the channels of a head.
enum class rope_style : uint8_t {
  interleaved,  ///< llama2.c / Meta: pairs (2i, 2i+1), frequency theta^(-2i/d_head)
  rotate_half,  ///< Hugging Face: pairs (i, i + d_head/2), same frequencies
};

/// Shapes and conventions of a model.
struct config {
  std::string family;  ///< "llama2c", "llama", "mistral", "qwen2", "qwen3"
  int dim = 0;         ///< hidden size
  int hidden_dim = 0;  ///< MLP intermediate size
  int n_layers = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int d_head = 0;
  int vocab_size = 0;
  int seq_len = 0;  ///< the model's context (max_position_embeddings)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  rope_style rope = rope_style::interleaved;
  bool qkv_bias = false;  ///< q/k/v projections have a bias (qwen2; llama attention_bias)
  bool o_bias = false;    ///< o_proj has a bias (llama/qwen3 attention_bias)
  bool mlp_bias = false;  ///< gate/up/down projections have biases (llama mlp_bias)
  bool qk_norm = false;   ///< qwen3: RMSNorm over head_dim of each q and k head before RoPE
  /// RoPE inverse frequencies per pair [d_head/2]; empty: theta^(-2j/d_head). Set by rope_scaling.
  std::vector<float> inv_freq;
  float rope_attention_scale = 1.0f;  ///< multiplies cos and sin (yarn's attention_factor)
  /// Per layer: sliding-window length (0: full causal). A forward longer than a layer's window
  /// is refused (the attention hook is causal only).
  std::vector<int> sliding_window;
  bool tied_embeddings = true;  ///< classifier = token embedding table
  int bos_id = -1;              ///< token prepended to texts (-1: none)
};

/// A weight matrix's elements (row-major), stored as F32, BF16 or F16 either in memory it owns or
/// in place in a mapped file it keeps mapped. Immutable: copies share the storage. Readers widen
/// ranges to fp32 where they use them (exact for the three dtypes), so a model costs its
/// checkpoint's bytes, not twice them.
class matrix {
 public:
  matrix() = default;
  /// Owns fp32 values (implicit: tests and the llama2.c reader build matrices from vectors).
  matrix(std::vector<float> values);  // NOLINT(google-explicit-constructor)
  /// `count` elements of `dtype` at `data`, kept valid by `owner` (e.g. the mapped file). fp32
  /// data that is not 4-byte aligned is copied (f32() hands out a float pointer).
  matrix(io::st_dtype dtype, const uint8_t* data, size_t count, std::shared_ptr<const void> owner);
  /// Owns 16-bit codes of `dtype` (BF16 or F16).
  static matrix from_bits(io::st_dtype dtype, std::vector<uint16_t> bits);

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  io::st_dtype dtype() const { return dtype_; }
  size_t bytes() const { return count_ * io::dtype_size(dtype_); }
  /// The elements as fp32 in place, or nullptr when they are stored in 16 bits.
  const float* f32() const { return dtype_ == io::st_dtype::F32 ? reinterpret_cast<const float*>(data_) : nullptr; }
  /// Elements [begin, begin + count) widened to fp32 into out.
  void widen(size_t begin, size_t count, float* out) const { io::widen_to_float(dtype_, data_, begin, count, out); }
  float operator[](size_t i) const {
    float v;
    widen(i, 1, &v);
    return v;
  }
  std::vector<float> to_float() const;
  /// Calls fn(begin, values, n) for the elements widened to fp32 in order, at most kChunk at a
  /// time (values valid during the call); fn returns false to stop. Returns whether every chunk
  /// was visited.
  static constexpr size_t kChunk = 4096;
  template <typename F>
  bool for_each_chunk(F&& fn) const {
    float buf[kChunk];
    for (size_t b = 0; b < count_; b += kChunk) {
      const size_t n = count_ - b < kChunk ? count_ - b : kChunk;
      widen(b, n, buf);
      if (!fn(b, static_cast<const float*>(buf), n)) return false;
    }
    return true;
  }
  /// The stored bytes (size() elements of dtype(), little-endian).
  const uint8_t* data() const { return data_; }
  /// The same values rounded to bfloat16 (RNE), stored as BF16 (itself when already BF16).
  matrix rounded_to_bf16() const;
  /// The same values rounded to float16 (RNE), stored as F16 (itself when already F16). Throws
  /// attnum::error, naming `what`, for a value beyond fp16's range (it would become Inf).
  matrix rounded_to_fp16(const std::string& what) const;
  /// Equal values (not storage): a bf16 matrix equals its fp32 widening.
  bool operator==(const matrix& o) const;

 private:
  io::st_dtype dtype_ = io::st_dtype::F32;
  const uint8_t* data_ = nullptr;
  size_t count_ = 0;
  std::shared_ptr<const void> owner_;
};

/// One layer's weights.
struct layer_weights {
  std::vector<float> attn_norm;       // [dim]
  matrix wq, wk, wv, wo;              // [n_head*d_head, dim], [n_kv*d_head, dim] x2, [dim, n_head*d_head]
  std::vector<float> bq, bk, bv;      // empty unless qkv_bias
  std::vector<float> bo;              // [dim]; empty unless o_bias
  std::vector<float> q_norm, k_norm;  // [d_head]; empty unless qk_norm
  std::vector<float> ffn_norm;        // [dim]
  matrix w1, w3;                      // gate, up: [hidden_dim, dim]
  matrix w2;                          // down: [dim, hidden_dim]
  std::vector<float> b1, b3, b2;      // [hidden_dim] x2, [dim]; empty unless mlp_bias
};

/// A loaded model.
struct weights {
  config cfg;
  std::string id;           ///< model name (file or folder name)
  std::string source_hash;  ///< FNV-1a 64 of the checkpoint bytes (hex), for result metadata
  matrix tok_embeddings;    // [vocab, dim]
  std::vector<layer_weights> layers;
  std::vector<float> final_norm;  // [dim]
  matrix classifier;              // [vocab, dim]; empty when tied
  /// Set by keep_slice: only a pipeline rank's part of the model is held, the other tensors are
  /// empty, and full_elements counts the whole checkpoint's matrix elements stored as F32, BF16
  /// and F16 (so checkpoint_precision is the whole model's on every rank).
  bool partial = false;
  std::array<size_t, 3> full_elements = {0, 0, 0};
  /// Returns the classifier matrix (the embedding table when tied).
  const matrix& output_matrix() const { return classifier.empty() ? tok_embeddings : classifier; }
  /// Bytes the weights hold (matrices in their stored dtype, norms and biases in fp32): about the
  /// checkpoint's size, and the resident memory the model needs once every page is touched.
  size_t bytes() const;
};

/// Calls on_matrix(name, m) for every matrix and on_vector(name, v) for every norm and bias of
/// `w` (const or not), in one fixed order: tok_embeddings; per layer "layers.L." + wq wk wv wo w1
/// w3 w2, then attn_norm bq bk bv bo ffn_norm q_norm k_norm b1 b3 b2; final_norm; classifier.
/// Absent tensors (an untied classifier, biases a family lacks) come as empty ones. Every walk
/// over the weights (bytes, bf16 rounding, the fingerprint, the loader's finiteness check) is
/// this one.
template <typename W, typename M, typename V>
void for_each_tensor(W& w, M&& on_matrix, V&& on_vector) {
  on_matrix(std::string("tok_embeddings"), w.tok_embeddings);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    auto& L = w.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    on_matrix(p + "wq", L.wq), on_matrix(p + "wk", L.wk), on_matrix(p + "wv", L.wv), on_matrix(p + "wo", L.wo);
    on_matrix(p + "w1", L.w1), on_matrix(p + "w3", L.w3), on_matrix(p + "w2", L.w2);
    on_vector(p + "attn_norm", L.attn_norm), on_vector(p + "bq", L.bq), on_vector(p + "bk", L.bk);
    on_vector(p + "bv", L.bv), on_vector(p + "bo", L.bo), on_vector(p + "ffn_norm", L.ffn_norm);
    on_vector(p + "q_norm", L.q_norm), on_vector(p + "k_norm", L.k_norm), on_vector(p + "b1", L.b1);
    on_vector(p + "b3", L.b3), on_vector(p + "b2", L.b2);
  }
  on_vector(std::string("final_norm"), w.final_norm);
  on_matrix(std::string("classifier"), w.classifier);
}

/// The part of a model one rank of a layer pipeline holds (scaleout/layers.h): layers
/// [begin, end), the embedding table when it embeds the tokens (the first rank) and the final norm
/// and classifier when it computes the logits (the last rank; a tied classifier keeps the table).
struct layer_slice {
  int begin = 0, end = 0;
  bool embeddings = true, head = true;
};

/// The matrix elements of w stored as F32, BF16 and F16, in that order: the whole checkpoint's
/// (full_elements) when w is a pipeline rank's slice.
std::array<size_t, 3> matrix_elements(const weights& w);

/// Drops every tensor of w outside s (they become empty; the mapped pages of a dropped tensor are
/// never touched, so the process holds only its slice) and marks w partial. Throws attnum::error
/// for a range outside 0..n_layers.
void keep_slice(weights& w, const layer_slice& s);

/// Bytes a model of shape c holds with its matrices stored as `matrices` (F32, BF16 or F16) and
/// norms and biases in fp32: weights::bytes() of such a model, known before it exists.
size_t model_bytes(const config& c, io::st_dtype matrices);

/// Throws attnum::error (naming `what`) unless the config's shapes are positive and consistent.
void validate(const config& c, const std::string& what);

/// Rounds every weight to bfloat16 (RNE), as a model held in bf16 on a GPU: matrices become BF16
/// (half the memory of fp32), vectors keep fp32 storage of bf16 values.
void round_to_bf16(weights& w);

/// Rounds every weight to float16 (RNE), as a model held in fp16 on a GPU (a checkpoint stored
/// in F16 is unchanged): matrices become F16, vectors keep fp32 storage of fp16 values. Throws
/// attnum::error naming the tensor for a value beyond fp16's range (65504).
void round_to_fp16(weights& w);

/// A fingerprint of the model as the forward uses it (16 hex digits): FNV-1a 64 over its
/// configuration and every matrix's dtype and stored bytes and every vector, hashed in fixed
/// pieces on all threads and chained in order (the same at any thread count). Reading every
/// byte costs about a second per GB on two cores; it names what reference logits were computed
/// from.
std::string fingerprint(const weights& w);

/// The FNV-1a 64-bit hash of bytes as 16 hex digits (core/hash.h; cheap, for provenance only).
using core::fnv1a_hex;

}  // namespace attnum::model
