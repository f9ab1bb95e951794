#pragma once
// Key centering: subtract the mean key. With the full-sequence mean every score of a query row
// shifts by the same q.mean, so softmax (and exact attention) is unchanged. The causal prefix
// mean (mean of keys 0..j subtracted from key j) is what a generating kernel can know at step j;
// it shifts each column differently and is NOT exactly invariant (an option for studies).
#include <cstdint>

#include "attnum/formats/format.h"

namespace attnum::transforms {

/// Subtracts the per-channel mean over the n_tok rows of k [n_tok, d] in place (double sums in
/// ascending token order), or the causal prefix mean with `causal_prefix`.
void center_keys(double* k, int n_tok, int d, bool causal_prefix = false);
/// Same for float rows: means and differences in double, each result rounded once (RNE) to `out`
/// (fp32, bf16 or fp16).
void center_keys(float* k, int n_tok, int d, bool causal_prefix = false, formats::format out = formats::format::fp32);

}  // namespace attnum::transforms
