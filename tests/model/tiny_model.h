#pragma once
// A tiny random llama-shaped model for tests, made in memory with a seeded generator.
#include <cstdint>
#include <random>

#include "attnum/model/weights.h"

namespace attnum::test {

inline std::vector<float> random_vec(size_t n, std::mt19937_64& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

/// Returns a random model: dim 32, 3 layers, 4 heads, 2 kv heads (d_head 8), vocab 48, context 64.
inline model::weights tiny_model(uint64_t seed, bool qkv_bias = false,
                                 model::rope_style rope = model::rope_style::interleaved) {
  std::mt19937_64 rng(seed);
  model::weights w;
  model::config& c = w.cfg;
  c.family = "test", c.dim = 32, c.hidden_dim = 48, c.n_layers = 3, c.n_head = 4, c.n_head_kv = 2;
  c.d_head = 8, c.vocab_size = 48, c.seq_len = 64, c.rope = rope, c.qkv_bias = qkv_bias;
  c.tied_embeddings = false, c.bos_id = 1;
  const size_t D = c.dim, H = c.hidden_dim, hd = c.n_head * c.d_head, kv = c.n_head_kv * c.d_head;
  w.id = "tiny";
  w.tok_embeddings = random_vec(c.vocab_size * D, rng, 1.0f);
  for (int l = 0; l < c.n_layers; ++l) {
    model::layer_weights L;
    L.attn_norm = random_vec(D, rng, 0.2f);
    for (float& x : L.attn_norm) x += 1.0f;
    L.ffn_norm = L.attn_norm;
    L.wq = random_vec(hd * D, rng, 0.5f), L.wk = random_vec(kv * D, rng, 0.5f);
    L.wv = random_vec(kv * D, rng, 0.5f), L.wo = random_vec(D * hd, rng, 0.3f);
    if (qkv_bias) L.bq = random_vec(hd, rng, 0.3f), L.bk = random_vec(kv, rng, 0.3f), L.bv = random_vec(kv, rng, 0.3f);
    L.w1 = random_vec(H * D, rng, 0.3f), L.w3 = random_vec(H * D, rng, 0.3f), L.w2 = random_vec(D * H, rng, 0.3f);
    w.layers.push_back(L);
  }
  w.final_norm = random_vec(D, rng, 0.2f);
  for (float& x : w.final_norm) x += 1.0f;
  w.classifier = random_vec(c.vocab_size * D, rng, 0.5f);
  return w;
}

}  // namespace attnum::test
