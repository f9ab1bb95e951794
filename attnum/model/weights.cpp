#include "attnum/model/weights.h"

#include <fmt/format.h>

#include <cmath>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"

namespace attnum::model {

void validate(const config& c, const std::string& what) {
  auto positive = [&](int v, const char* name) {
    if (v <= 0) fail("{}: {} must be positive, got {}", what, name, v);
  };
  positive(c.dim, "dim (hidden_size)");
  positive(c.hidden_dim, "hidden_dim (intermediate_size)");
  positive(c.n_layers, "n_layers (num_hidden_layers)");
  positive(c.n_head, "n_heads (num_attention_heads)");
  positive(c.n_head_kv, "n_kv_heads (num_key_value_heads)");
  positive(c.vocab_size, "vocab_size");
  positive(c.seq_len, "seq_len (max_position_embeddings)");
  positive(c.d_head, "head_dim");
  if (c.n_head % c.n_head_kv != 0)
    fail("{}: n_heads {} is not a multiple of n_kv_heads {}", what, c.n_head, c.n_head_kv);
  if (c.d_head % 2 != 0) fail("{}: head_dim {} must be even for RoPE", what, c.d_head);
  if (!(c.norm_eps > 0.0f && std::isfinite(c.norm_eps))) fail("{}: rms_norm_eps must be finite and positive", what);
  if (!(c.rope_theta > 0.0f && std::isfinite(c.rope_theta))) fail("{}: rope_theta must be finite and positive", what);
  if (!c.inv_freq.empty() && c.inv_freq.size() != size_t(c.d_head / 2))
    fail("{}: {} RoPE frequencies for head_dim {}", what, c.inv_freq.size(), c.d_head);
  for (float f : c.inv_freq)
    if (!(f > 0.0f && std::isfinite(f))) fail("{}: RoPE inverse frequency {} must be finite and positive", what, f);
  if (!(c.rope_attention_scale > 0.0f && std::isfinite(c.rope_attention_scale)))
    fail("{}: RoPE attention factor {} must be finite and positive", what, c.rope_attention_scale);
  if (!c.sliding_window.empty() && c.sliding_window.size() != size_t(c.n_layers))
    fail("{}: {} sliding windows for {} layers", what, c.sliding_window.size(), c.n_layers);
  if (c.bos_id >= c.vocab_size) fail("{}: bos_token_id {} outside the vocabulary [0, {})", what, c.bos_id, c.vocab_size);
}

namespace {
void round_vec(std::vector<float>& v) {
  for (float& x : v) x = formats::quantize_bf16(x);
}
}  // namespace

void round_to_bf16(weights& w) {
  round_vec(w.tok_embeddings);
  round_vec(w.final_norm);
  round_vec(w.classifier);
  for (auto& l : w.layers) {
    for (auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.bo, &l.ffn_norm,
                    &l.q_norm, &l.k_norm, &l.w1, &l.w2, &l.w3, &l.b1, &l.b2, &l.b3})
      round_vec(*v);
  }
}

}  // namespace attnum::model
