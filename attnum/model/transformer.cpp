#include "attnum/model/transformer.h"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/format.h"

namespace attnum::model {
namespace {

using row_mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Output features per GEMM work unit: fixed, so the blocking (and rounding) never depends on the
// number of threads.
constexpr int kOutBlock = 256;
// Below this many elements a loop runs on one thread: waking a team costs more than the work.
// (Results do not depend on it: every element is computed the same way on any thread.)
constexpr size_t kParallelMin = 1 << 14;

// An op's output as the run holds it: rounded to bf16 or fp16 (RNE), or as computed in fp32.
inline float round_to(float x, linear_precision p) {
  switch (p) {
    case linear_precision::bf16:
      return formats::quantize_bf16(x);
    case linear_precision::fp16:
      return formats::quantize_fp16(x);
    case linear_precision::fp32:
      break;
  }
  return x;
}

void round_all(std::vector<float>& v, linear_precision p) {
  if (p != linear_precision::fp32)
    for (float& x : v) x = round_to(x, p);
}

// out[i, :] = weight * (x[i, :] / sqrt(mean(x[i, :]^2) + eps)), sequential fp32 sum (run.c).
// x: [n, dim]
void rmsnorm(const float* x, const std::vector<float>& weight, int n, int dim, float eps, linear_precision p,
             float* out) {
#pragma omp parallel for schedule(static) if (size_t(n) * dim > kParallelMin)
  for (int i = 0; i < n; ++i) {
    const float* xi = x + size_t(i) * dim;
    float ss = 0.0f;
    for (int j = 0; j < dim; ++j) ss += xi[j] * xi[j];
    ss = 1.0f / std::sqrt(ss / dim + eps);
    float* oi = out + size_t(i) * dim;
    if (p != linear_precision::fp32) {
      // Hugging Face order: normalize in fp32, cast to the run's dtype, then multiply by the
      // weight held in that dtype.
      for (int j = 0; j < dim; ++j) oi[j] = round_to(weight[j] * round_to(ss * xi[j], p), p);
    } else {
      for (int j = 0; j < dim; ++j) oi[j] = weight[j] * (ss * xi[j]);
    }
  }
}

// cos and sin of position i and pair j, [n, d_head/2] each, computed once per forward.
struct rope_table {
  std::vector<float> cos, sin;
  rope_table(int n, const config& c) : cos(size_t(n) * (c.d_head / 2)), sin(cos.size()) {
    const int half = c.d_head / 2;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < half; ++j) {
        // frequency of pair j: theta^(-2j/d) (run.c: 1.0f / powf(10000.0f, head_dim / (float)head_size)),
        // or the rope_scaling frequencies computed from the config
        const float freq =
            c.inv_freq.empty() ? 1.0f / std::pow(c.rope_theta, float(2 * j) / float(c.d_head)) : c.inv_freq[j];
        const float val = float(i) * freq;
        cos[size_t(i) * half + j] = std::cos(val);
        sin[size_t(i) * half + j] = std::sin(val);
        if (c.rope_attention_scale != 1.0f)  // transformers: cos = emb.cos() * attention_scaling
          cos[size_t(i) * half + j] *= c.rope_attention_scale, sin[size_t(i) * half + j] *= c.rope_attention_scale;
      }
  }
};

// Rotates each head of x [n, n_heads * d_head] in place; row i is position i.
void rope(float* x, int n, int n_heads, const config& c, const rope_table& t, linear_precision p) {
  const int d = c.d_head, half = d / 2;
#pragma omp parallel for schedule(static) if (size_t(n) * n_heads * d > kParallelMin)
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (size_t(i) * n_heads + h) * d;
      for (int j = 0; j < half; ++j) {
        const float fcr = t.cos[size_t(i) * half + j], fci = t.sin[size_t(i) * half + j];
        const int a = c.rope == rope_style::interleaved ? 2 * j : j;
        const int b = c.rope == rope_style::interleaved ? 2 * j + 1 : j + half;
        const float v0 = v[a], v1 = v[b];
        if (p == linear_precision::fp32) {
          v[a] = v0 * fcr - v1 * fci;
          v[b] = v0 * fci + v1 * fcr;
        } else {
          // transformers' apply_rotary_pos_emb in the run's dtype: cos and sin cast to it
          // (`cos.to(dtype=x.dtype)`), then q * cos + rotate_half(q) * sin with every product and
          // the sum rounded (three roundings per output).
          const float cr = round_to(fcr, p), ci = round_to(fci, p);
          v[a] = round_to(round_to(v0 * cr, p) + round_to(-v1 * ci, p), p);
          v[b] = round_to(round_to(v1 * cr, p) + round_to(v0 * ci, p), p);
        }
      }
    }
  }
}

// [n, heads, d] <-> [heads, n, d]
void to_head_major(const float* x, int n, int heads, int d, float* out) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < n; ++i) std::copy_n(x + (size_t(i) * heads + h) * d, d, out + (size_t(h) * n + i) * d);
}
void to_token_major(const float* x, int n, int heads, int d, float* out) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < n; ++i) std::copy_n(x + (size_t(h) * n + i) * d, d, out + (size_t(i) * heads + h) * d);
}

// y = x W^T (+ bias), rounded to bf16 (fp16) in bf16 (fp16) mode (fp32 accumulation inside the GEMM). y is a
// buffer reused across layers: fresh multi-megabyte allocations cost page faults per call.
void project(const std::vector<float>& x, int n, int in, const matrix& w, const std::vector<float>& bias, int out,
             linear_precision p, forward_stats* stats, std::vector<float>& y) {
  const auto t0 = std::chrono::steady_clock::now();
  y.resize(size_t(n) * out);
  linear(x.data(), n, in, w, out, y.data());
  if (!bias.empty()) {
#pragma omp parallel for schedule(static) if (size_t(n) * out > kParallelMin)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < out; ++j) y[size_t(i) * out + j] += bias[j];
  }
  round_all(y, p);
  if (stats) {
    stats->linear_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats->linear_flops += 2.0 * n * in * double(out);
  }
}

void add_residual(std::vector<float>& x, const std::vector<float>& d, linear_precision p) {
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = round_to(x[i] + d[i], p);
  }
}

// Causal attention of one head in type T (run.c's loop: scores, max-subtracted softmax, P.V).
// q: [n, d], k, v: [n, d] (this head's kv head), o: [n, d]
template <typename T>
void attend_head(const float* q, const float* k, const float* v, int n, int d, float* o) {
  std::vector<T> att(n), acc(d);
  const T scale = T(1) / std::sqrt(T(d));
  for (int i = 0; i < n; ++i) {
    T mx = -INFINITY;
    for (int j = 0; j <= i; ++j) {
      T s = 0;
      for (int c = 0; c < d; ++c) s += T(q[size_t(i) * d + c]) * T(k[size_t(j) * d + c]);
      att[j] = s * scale;
      mx = std::max(mx, att[j]);
    }
    T sum = 0;
    for (int j = 0; j <= i; ++j) sum += att[j] = std::exp(att[j] - mx);
    std::fill(acc.begin(), acc.end(), T(0));
    for (int j = 0; j <= i; ++j) {
      const T a = att[j] / sum;
      for (int c = 0; c < d; ++c) acc[c] += a * T(v[size_t(j) * d + c]);
    }
    for (int c = 0; c < d; ++c) o[size_t(i) * d + c] = float(acc[c]);
  }
}

template <typename T>
attention_fn plain_attention() {
  return [](int, const qkv_view& x, float* o) {
    const int group = x.n_head / x.n_head_kv;
    const size_t hs = size_t(x.n_tok) * x.d_head;
#pragma omp parallel for schedule(dynamic) if (size_t(x.n_head) * x.n_tok * x.n_tok * x.d_head > (1u << 18))
    for (int h = 0; h < x.n_head; ++h)
      attend_head<T>(x.q + h * hs, x.k + (h / group) * hs, x.v + (h / group) * hs, x.n_tok, x.d_head, o + h * hs);
  };
}

}  // namespace

linear_precision parse_linear_precision(std::string_view text) {
  if (text == "fp32") return linear_precision::fp32;
  if (text == "bf16") return linear_precision::bf16;
  if (text == "fp16") return linear_precision::fp16;
  fail("--linear-precision: expected auto, fp32, bf16 or fp16, got '{}'", clip(text));
}

std::string_view name(linear_precision p) {
  switch (p) {
    case linear_precision::bf16:
      return "bf16";
    case linear_precision::fp16:
      return "fp16";
    case linear_precision::fp32:
      break;
  }
  return "fp32";
}

linear_precision checkpoint_precision(const weights& w) {
  const auto [f32, bf16, f16] = matrix_elements(w);  // a pipeline rank's: the whole checkpoint's
  if (f16 > f32 && f16 > bf16) return linear_precision::fp16;
  if (bf16 > f32 && bf16 >= f16) return linear_precision::bf16;
  return linear_precision::fp32;
}

void check_linear_precision(std::string_view text) {
  if (text != "auto") parse_linear_precision(text);
}

linear_precision resolve_linear_precision(std::string_view text, const weights& w) {
  return text == "auto" ? checkpoint_precision(w) : parse_linear_precision(text);
}

void prepare_weights(weights& w, linear_precision p) {
  if (p == linear_precision::bf16) round_to_bf16(w);
  if (p == linear_precision::fp16) round_to_fp16(w);
}

attention_fn fp32_attention() { return plain_attention<float>(); }

void linear(const float* x, int n, int in, const float* w, int out, float* y) {
  Eigen::Map<const row_mat> xm(x, n, in);
  Eigen::Map<row_mat> ym(y, n, out);
  const int blocks = (out + kOutBlock - 1) / kOutBlock;
#pragma omp parallel for schedule(dynamic) if (size_t(n) * in * out > 64 * kParallelMin)
  for (int b = 0; b < blocks; ++b) {
    const int o0 = b * kOutBlock, m = std::min(kOutBlock, out - o0);
    Eigen::Map<const row_mat> wb(w + size_t(o0) * in, m, in);
    ym.middleCols(o0, m).noalias() = xm * wb.transpose();
  }
}

void linear(const float* x, int n, int in, const matrix& w, int out, float* y) {
  if (w.size() != size_t(out) * in) fail("linear: weight of {} elements for [{}, {}]", w.size(), out, in);
  if (const float* wf = w.f32()) return linear(x, n, in, wf, out, y);
  Eigen::Map<const row_mat> xm(x, n, in);
  Eigen::Map<row_mat> ym(y, n, out);
  const int blocks = (out + kOutBlock - 1) / kOutBlock;
  // The same blocks and the same Eigen product as the fp32 path, on a widened copy of the block
  // (one per thread, reused): the values and the arithmetic are the same, so is every bit.
#pragma omp parallel if (size_t(n) * in * out > 64 * kParallelMin)
  {
    std::vector<float> panel;
#pragma omp for schedule(dynamic)
    for (int b = 0; b < blocks; ++b) {
      const int o0 = b * kOutBlock, m = std::min(kOutBlock, out - o0);
      panel.resize(size_t(m) * in);
      w.widen(size_t(o0) * in, size_t(m) * in, panel.data());
      Eigen::Map<const row_mat> wb(panel.data(), m, in);
      ym.middleCols(o0, m).noalias() = xm * wb.transpose();
    }
  }
}

size_t weight_bytes(const weights& w, linear_precision p) {
  if (w.partial && p != linear_precision::fp32) {  // a pipeline rank's slice, its matrices in 16 bits
    size_t n = 0;
    for_each_tensor(
        w, [&](const std::string&, const matrix& m) { n += m.size() * 2; },
        [&](const std::string&, const std::vector<float>& v) { n += v.size() * sizeof(float); });
    return n;
  }
  if (p == linear_precision::bf16) return model_bytes(w.cfg, io::st_dtype::BF16);
  if (p == linear_precision::fp16) return model_bytes(w.cfg, io::st_dtype::F16);
  return w.bytes();
}

size_t capture_activation_bytes(const config& c, int n) {
  const size_t hd = size_t(c.n_head) * c.d_head, kvd = size_t(c.n_head_kv) * c.d_head;
  return forward_activation_bytes(c, n) + sizeof(float) * size_t(c.n_layers) * size_t(n) * (hd + 2 * kvd);
}

size_t loss_activation_bytes(const config& c, int n, bool reference_mapped) {
  return forward_activation_bytes(c, n) + (reference_mapped ? 0 : sizeof(float) * size_t(n) * c.vocab_size);
}

void check_memory(const weights& w, linear_precision p, size_t activation_bytes, const std::string& what) {
  const size_t wb = weight_bytes(w, p);
  try {
    check_alloc(wb > UINT64_MAX - activation_bytes ? UINT64_MAX : wb + activation_bytes, what);
  } catch (const error& e) {
    const double gib = double(uint64_t{1} << 30);
    fail("{} (weights {:.3g} GiB as {}, activations {:.3g} GiB: docs/model.md, \"Weights in memory\")", e.what(),
         double(wb) / gib, p == linear_precision::fp32 ? "stored" : name(p), double(activation_bytes) / gib);
  }
}

std::string_view forward_simd() {
#if defined(EIGEN_VECTORIZE_AVX512)
  return "avx512+fma";
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
  return "avx2+fma";
#elif defined(EIGEN_VECTORIZE_AVX)
  return "avx";
#elif defined(EIGEN_VECTORIZE_SSE2)
  return "sse2";
#elif defined(EIGEN_VECTORIZE_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

size_t forward_activation_bytes(const config& c, int n) {
  const size_t D = c.dim, H = c.hidden_dim, hd = size_t(c.n_head) * c.d_head, kvd = size_t(c.n_head_kv) * c.d_head;
  const size_t per_token = 3 * D + 5 * hd + 4 * kvd + (c.qk_norm ? hd + kvd : 0) + 2 * H + c.vocab_size + c.d_head;
  return sizeof(float) * (size_t(n) * per_token + size_t(threads()) * kOutBlock * std::max({D, H, hd}));
}

namespace {
void check_tokens(const config& c, int n) {
  if (n == 0) fail("forward: no tokens");
  if (n > c.seq_len)
    fail("{} tokens exceed the model's context of {} (seq_len / max_position_embeddings)", n, c.seq_len);
  for (size_t l = 0; l < c.sliding_window.size(); ++l)
    if (c.sliding_window[l] > 0 && n > c.sliding_window[l])
      fail(
          "{} tokens exceed layer {}'s sliding window of {} (config.json sliding_window): windowed "
          "attention is not implemented; use at most {} tokens",
          n, l, c.sliding_window[l], c.sliding_window[l]);
}
}  // namespace

std::vector<float> embed(const weights& w, std::span<const int> tokens) {
  const config& c = w.cfg;
  const int n = static_cast<int>(tokens.size()), D = c.dim;
  check_tokens(c, n);
  std::vector<float> x(size_t(n) * D);
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      fail("token id {} at position {} outside the vocabulary 0..{}", tokens[i], i, c.vocab_size - 1);
    w.tok_embeddings.widen(size_t(tokens[i]) * D, D, x.data() + size_t(i) * D);
  }
  return x;
}

void forward_layers(const weights& w, int n, std::vector<float>& x, int begin, int end, const forward_options& opt) {
  const config& c = w.cfg;
  const int D = c.dim, d = c.d_head;
  const int hd = c.n_head * d, kvd = c.n_head_kv * d;
  const linear_precision p = opt.linear;
  check_tokens(c, n);
  if (begin < 0 || end > c.n_layers || begin > end)
    fail("forward: layers [{}, {}) outside the model's {} layers", begin, end, c.n_layers);
  if (x.size() != size_t(n) * D) fail("forward: residual of {} values for {} tokens of {}", x.size(), n, D);
  const attention_fn attention = opt.attention ? opt.attention : fp32_attention();
  const rope_table rope_tab(n, c);
  std::vector<float> xb(x.size()), qh(size_t(n) * hd), kh(size_t(n) * kvd), vh(size_t(n) * kvd), oh(size_t(n) * hd),
      o(size_t(n) * hd);
  std::vector<float> q, k, v, qn, kn, h1, h3, delta;  // reused by every layer
  for (int l = begin; l < end; ++l) {
    const layer_weights& L = w.layers[l];
    if (opt.on_residual) opt.on_residual(l, x.data());
    // 1. attention block: norm, projections, RoPE, the hook, output projection
    rmsnorm(x.data(), L.attn_norm, n, D, c.norm_eps, p, xb.data());
    project(xb, n, D, L.wq, L.bq, hd, p, opt.stats, q);
    project(xb, n, D, L.wk, L.bk, kvd, p, opt.stats, k);
    project(xb, n, D, L.wv, L.bv, kvd, p, opt.stats, v);
    if (c.qk_norm) {  // qwen3: RMSNorm over each head's d_head channels, before RoPE
      qn.resize(q.size()), kn.resize(k.size());
      rmsnorm(q.data(), L.q_norm, n * c.n_head, d, c.norm_eps, p, qn.data());
      rmsnorm(k.data(), L.k_norm, n * c.n_head_kv, d, c.norm_eps, p, kn.data());
      q.swap(qn), k.swap(kn);
    }
    rope(q.data(), n, c.n_head, c, rope_tab, p);
    rope(k.data(), n, c.n_head_kv, c, rope_tab, p);
    to_head_major(q.data(), n, c.n_head, d, qh.data());
    to_head_major(k.data(), n, c.n_head_kv, d, kh.data());
    to_head_major(v.data(), n, c.n_head_kv, d, vh.data());
    const qkv_view view{qh.data(), kh.data(), vh.data(), c.n_head, c.n_head_kv, n, d};
    if (opt.on_qkv) opt.on_qkv(l, view);
    attention(l, view, oh.data());
    to_token_major(oh.data(), n, c.n_head, d, o.data());
    round_all(o, p);
    project(o, n, hd, L.wo, L.bo, D, p, opt.stats, delta);
    add_residual(x, delta, p);
    // 2. MLP block: norm, SwiGLU (silu(x W1) * x W3) W2
    rmsnorm(x.data(), L.ffn_norm, n, D, c.norm_eps, p, xb.data());
    project(xb, n, D, L.w1, L.b1, c.hidden_dim, p, opt.stats, h1);
    project(xb, n, D, L.w3, L.b3, c.hidden_dim, p, opt.stats, h3);
    for (size_t i = 0; i < h1.size(); ++i) {
      float s = h1[i] * (1.0f / (1.0f + std::exp(-h1[i])));
      h1[i] = round_to(s, p) * h3[i];
    }
    round_all(h1, p);
    project(h1, n, c.hidden_dim, L.w2, L.b2, D, p, opt.stats, delta);
    add_residual(x, delta, p);
  }
}

std::vector<float> classify(const weights& w, int n, const std::vector<float>& x, const forward_options& opt) {
  const config& c = w.cfg;
  const int D = c.dim;
  if (x.size() != size_t(n) * D) fail("forward: residual of {} values for {} tokens of {}", x.size(), n, D);
  if (opt.on_residual) opt.on_residual(c.n_layers, x.data());
  std::vector<float> xb(x.size());
  rmsnorm(x.data(), w.final_norm, n, D, c.norm_eps, opt.linear, xb.data());
  std::vector<float> logits;
  project(xb, n, D, w.output_matrix(), {}, c.vocab_size, opt.linear, opt.stats, logits);
  return logits;
}

std::vector<float> forward(const weights& w, std::span<const int> tokens, const forward_options& opt) {
  const int n = static_cast<int>(tokens.size());
  std::vector<float> x = embed(w, tokens);
  forward_layers(w, n, x, 0, w.cfg.n_layers, opt);
  return classify(w, n, x, opt);
}

std::vector<int> greedy(const weights& w, std::vector<int> prompt, int steps, const forward_options& opt) {
  for (int s = 0; s < steps; ++s) {
    std::vector<float> logits = forward(w, prompt, opt);
    const float* last = logits.data() + (prompt.size() - 1) * size_t(w.cfg.vocab_size);
    prompt.push_back(int(std::max_element(last, last + w.cfg.vocab_size) - last));
  }
  return prompt;
}

}  // namespace attnum::model
