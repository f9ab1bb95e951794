#include "attnum/model/weights.h"

#include <fmt/format.h>

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
  if (!(c.norm_eps > 0.0f)) fail("{}: rms_norm_eps must be positive", what);
  if (!(c.rope_theta > 0.0f)) fail("{}: rope_theta must be positive", what);
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
    for (auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.ffn_norm,
                    &l.w1, &l.w2, &l.w3})
      round_vec(*v);
  }
}

}  // namespace attnum::model
