#pragma once
// The synthetic head zoo: the embedded default data of the head study (nothing downloaded).
//
// Six "models" (groups of heads with shared traits: head size, GQA group, RoPE, the kind of
// shared key vector they tend to have, outlier channels, value tails) of 112 query heads each,
// 672 in all, mirroring the 672 Qwen heads of the seed. Every head is a deterministic function
// of (zoo seed, model, layer, head); every text is an independent draw of its token stream.
//
// The structures it spans, and why each matters to low-precision attention:
//  - attention sink: token 0 takes a large logit in every row (P-cast underflow of the rest);
//  - shared key vector b added to every key: exact softmax cancels q.b, but its rounding does not.
//    Concentrated in one channel (massive-activation-like) with queries nearly orthogonal to it,
//    unrotated FP8 rounds b's channel where q is ~0 (harmless) while rotation spreads b over all
//    channels and its rounding error enters every score: rotation can hurt. Dense b hurts both.
//  - per-channel outliers in Q and K: one channel's large, token-varying products carry
//    relative rounding error 2^-4; rotation averages it over d channels: rotation helps;
//  - RoPE structure (pairs of channels rotating with position); heavy-tailed V (Student t).
#include <cstdint>
#include <string>
#include <vector>

#include "attnum/formats/format.h"

namespace attnum::study {

/// Parameters that made one query head (and its kv head); recorded with every result row.
struct head_params {
  int model = 0, layer = 0, head = 0, kv_head = 0;
  int d_head = 64, n_tok = 1024, group = 1;
  double temperature = 1;         ///< std of the token-specific part of the scores s = q.k/sqrt(d)
  double sink = 0;                ///< extra logit of token 0 (0 = no sink)
  double shared_ratio = 0;        ///< ||b|| / rms ||residual key||
  int shared_kind = 0;            ///< 0 none, 1 concentrated in one channel, 2 dense
  double query_along_shared = 0;  ///< q's component along b's direction, relative to its rms channel
  int n_outlier = 0;              ///< per-channel outliers in Q and K
  double outlier_scale = 1;       ///< std multiplier of the outlier channels
  bool rope = false;
  double v_dof = 0;   ///< Student-t degrees of freedom of V (0 = Gaussian)
  uint64_t seed = 0;  ///< seed of the head's fixed directions (b, sink direction, channels)
};

/// One zoo model: shape and the traits its heads share.
struct zoo_model {
  std::string name;
  int d_head = 64, n_layer = 0, n_head = 0, n_head_kv = 0;
  bool rope = false;
  int shared_kind = 0;      ///< the kind of shared key vector its heads carry (when they do)
  double outlier_rate = 0;  ///< fraction of kv heads with outlier channels
  double v_dof = 0;
};

/// Zoo options; the defaults give the 672-head suite at 1024 tokens.
struct zoo_options {
  int n_tok = 1024;
  int n_layer_cap = 0;  ///< when > 0, keep only the first n layers of each model (small tests)
  uint64_t seed = 0x200ULL;
  /// The operands' dtype: every generated q, k and v value is rounded RNE to it at the end of
  /// generation, as a real model's bf16 activations are (bf16, fp16 or fp32; fp32 gives the zoo
  /// of the versions before it had this option, bit for bit).
  formats::format dtype = formats::format::bf16;
};

/// Returns the zoo's models (honouring n_layer_cap).
std::vector<zoo_model> zoo_models(const zoo_options& opt = {});

/// Returns the parameters of every query head of model m, layer l (n_head entries).
std::vector<head_params> zoo_layer_heads(const zoo_options& opt, int model, int layer);

/// One kv group's operands for one text: q [group, n_tok, d_head], k and v [n_tok, d_head].
struct zoo_group {
  std::vector<head_params> heads;  ///< the group's query heads
  std::vector<float> q, k, v;
  int n_tok = 0, d_head = 0;
};

/// Returns the operands of kv head `kv_head` of (model, layer) for text `text` (deterministic).
zoo_group zoo_generate(const zoo_options& opt, int model, int layer, int kv_head, int text);

/// Builds one group directly from explicit parameters (tests): `heads` share kv head params of
/// heads[0] (sink, shared vector, outliers, rope, v tails, seed); values rounded to `dtype`.
zoo_group zoo_generate_from(const std::vector<head_params>& heads, int text,
                            formats::format dtype = formats::format::bf16);

}  // namespace attnum::study
