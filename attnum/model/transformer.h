#pragma once
// Teacher-forced forward of a decoder-only transformer (llama / qwen2 / llama2.c) over a window
// of tokens at positions 0..n-1. Projections, RoPE, RMSNorm and the SwiGLU MLP are fixed; the
// attention of every layer goes through one hook, so any kernel emulation can be swapped in.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "attnum/model/weights.h"

namespace attnum::model {

/// Precision of everything outside attention.
enum class linear_precision : uint8_t {
  fp32,  ///< fp32 weights and activations
  bf16,  ///< native BF16 as on a GPU: bf16 weights and activations, fp32 accumulation, every
         ///< op's output rounded to bf16 (precondition: weights passed through prepare_weights)
  fp16,  ///< native FP16, the same with fp16 in place of bf16 (transformers' torch_dtype=float16)
};
/// Parses "fp32", "bf16" or "fp16"; throws attnum::error otherwise.
linear_precision parse_linear_precision(std::string_view text);
/// Returns "fp32", "bf16" or "fp16".
std::string_view name(linear_precision p);
/// The checkpoint's own precision: the dtype that stores most of its matrix elements (F16: fp16,
/// BF16: bf16, F32 and dequantised GGUF types: fp32).
linear_precision checkpoint_precision(const weights& w);
/// Resolves a --linear-precision value for w: "auto" is checkpoint_precision(w), anything else
/// parse_linear_precision. Throws attnum::error for another value.
linear_precision resolve_linear_precision(std::string_view text, const weights& w);
/// Throws attnum::error unless text is "auto", "fp32", "bf16" or "fp16" (a flag checked before
/// the model is read).
void check_linear_precision(std::string_view text);
/// Holds w's weights as a run under p does: rounded to bf16 (round_to_bf16) or fp16
/// (round_to_fp16); as stored under fp32.
void prepare_weights(weights& w, linear_precision p);

/// One layer's post-RoPE attention operands, in the engine's layout:
/// q [n_head, n_tok, d_head], k and v [n_head_kv, n_tok, d_head] (row-major floats).
struct qkv_view {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int n_head = 0, n_head_kv = 0, n_tok = 0, d_head = 0;
};

/// The attention hook: writes layer `layer`'s causal attention output o [n_head, n_tok, d_head].
/// Query head h reads kv head h / (n_head / n_head_kv); softmax scale 1/sqrt(d_head).
using attention_fn = std::function<void(int layer, const qkv_view& x, float* o)>;

/// Returns fp32 causal attention (plain loops, as llama2.c's run.c computes it).
attention_fn fp32_attention();

/// Time spent in the linear layers (projections, MLP, classifier: GEMM plus bias and rounding).
struct forward_stats {
  double linear_seconds = 0;
  double linear_flops = 0;  ///< 2 * n * in * out per projection
};

/// Options of one forward pass.
struct forward_options {
  linear_precision linear = linear_precision::fp32;
  attention_fn attention;  ///< empty: fp32_attention()
  /// Called with each layer's operands before attention (capture).
  std::function<void(int layer, const qkv_view& x)> on_qkv;
  /// Called with the residual stream [n_tok, dim] entering layer l; l = n_layers is the stream
  /// after the last layer (before the final norm).
  std::function<void(int layer, const float* x)> on_residual;
  forward_stats* stats = nullptr;  ///< accumulates linear-layer time when set
};

/// Returns the logits [n_tok, vocab] of the teacher-forced forward of `tokens` (positions
/// 0..n-1). Bit-identical at any thread count. Throws attnum::error for an id outside the
/// vocabulary or more tokens than the model's context.
std::vector<float> forward(const weights& w, std::span<const int> tokens, const forward_options& opt = {});

/// forward() in three parts, as a layer pipeline runs them across ranks (scaleout/layers.h); the
/// three in sequence are forward() itself, the same arithmetic bit for bit:
/// - embed: the residual stream [n_tok, dim] entering layer 0 (checks the tokens as forward does);
/// - forward_layers: layers [begin, end) applied to the residual x of n tokens in place (calling
///   opt's hooks for those layers only);
/// - classify: on_residual(n_layers), the final norm and the classifier: the logits [n_tok, vocab].
std::vector<float> embed(const weights& w, std::span<const int> tokens);
void forward_layers(const weights& w, int n, std::vector<float>& x, int begin, int end, const forward_options& opt);
std::vector<float> classify(const weights& w, int n, const std::vector<float>& x, const forward_options& opt);

/// Returns the bytes forward() allocates for n tokens besides the weights: the residual and its
/// norm, q/k/v and their head-major copies, the MLP's two hidden rows, the logits, the RoPE table
/// and one widening panel per thread: 4 * (n * (3 D + 5 hd + 4 kvd [+ hd + kvd with q/k norms]
/// + 2 H + V + d_head) + threads * 256 * max(D, H, hd)), hd = n_head d_head, kvd = n_kv d_head.
/// The attention hook's own scratch (a kernel emulation's tiles) is not included.
size_t forward_activation_bytes(const config& c, int n);

/// The bytes the weights hold once the run has prepared them: as stored, or with every matrix in
/// BF16 under linear_precision::bf16 (round_to_bf16; model_bytes(c, BF16)), F16 under fp16.
size_t weight_bytes(const weights& w, linear_precision p);

/// What a command holds besides the weights (docs/model.md, "Weights in memory"):
/// - capture: the forward's activations plus the captured post-RoPE Q/K/V of every layer in fp32
///   until the file is written, 4 * n_layers * n * (hd + 2 kvd);
/// - loss: the forward's activations plus the reference's logits, kept while the window's
///   conditions run, 4 * n * V (none when they are read from a mapped --reference-file: those
///   pages are the file's, not the process's).
size_t capture_activation_bytes(const config& c, int n);
size_t loss_activation_bytes(const config& c, int n, bool reference_mapped);

/// Throws attnum::error, naming `what`, the weights' and the activations' bytes, when the weights
/// plus `activation_bytes` exceed what this machine can hold (max_alloc_bytes; up front, before
/// any forward).
void check_memory(const weights& w, linear_precision p, size_t activation_bytes, const std::string& what);

/// The vector instructions of the forward's GEMMs (Eigen's kernels, fixed when attnum is compiled:
/// -march=native): "avx512+fma", "avx2+fma", "avx", "sse2", "neon" or "scalar". Eigen's register
/// blocking and accumulator splits follow the packet width, so the logits' last bits (and
/// everything computed from a capture or a loss) depend on it, though never on the thread count.
std::string_view forward_simd();

/// Returns y[n, out] = x[n, in] * W^T for W row-major [out, in] (Eigen GEMM over fixed blocks of
/// output features, so the result does not depend on the thread count).
void linear(const float* x, int n, int in, const float* w, int out, float* y);
/// The same for W held as stored (F32 in place; BF16/F16 widened to fp32 one block of output
/// features at a time inside the GEMM: exact, so the result equals the fp32 matrix's bit for bit).
void linear(const float* x, int n, int in, const matrix& w, int out, float* y);

/// Returns the greedy continuation: starting from `prompt`, appends the argmax token `steps`
/// times (full teacher-forced recomputation per step; for tests and demos).
std::vector<int> greedy(const weights& w, std::vector<int> prompt, int steps, const forward_options& opt = {});

}  // namespace attnum::model
