#include "attnum/model/bench.h"

#include <Eigen/Dense>
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include <sys/resource.h>

#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/format.h"
#include "attnum/model/hooks.h"

namespace attnum::model {
namespace {
using row_mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds of the best of `repeats` plain GEMMs y[n, out] = x[n, in] W^T, split over the threads
// in equal column slabs (one Eigen call per thread: the ideal parallel GEMM).
double gemm_seconds(int n, int in, int out, int repeats) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  row_mat x(n, in), w(out, in), y(n, out);
  for (int i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
  for (int i = 0; i < w.size(); ++i) w.data()[i] = u(rng);
  const int t = threads();
  double best = INFINITY;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (int s = 0; s < t; ++s) {
      const int o0 = int(int64_t(out) * s / t), o1 = int(int64_t(out) * (s + 1) / t);
      if (o1 > o0) y.middleCols(o0, o1 - o0).noalias() = x * w.middleRows(o0, o1 - o0).transpose();
    }
    best = std::min(best, now() - t0);
  }
  return best;
}

}  // namespace

config qwen25_config(std::string_view size) {
  config c;
  c.family = "qwen2";
  c.vocab_size = 151936, c.seq_len = 32768, c.norm_eps = 1e-6f, c.rope_theta = 1000000.0f;
  c.rope = rope_style::rotate_half, c.qkv_bias = true, c.tied_embeddings = true, c.bos_id = -1;
  if (size == "0.5b") {
    c.dim = 896, c.hidden_dim = 4864, c.n_layers = 24, c.n_head = 14, c.n_head_kv = 2, c.d_head = 64;
  } else if (size == "1.5b") {
    c.dim = 1536, c.hidden_dim = 8960, c.n_layers = 28, c.n_head = 12, c.n_head_kv = 2, c.d_head = 128;
  } else if (size == "7b") {
    c.dim = 3584, c.hidden_dim = 18944, c.n_layers = 28, c.n_head = 28, c.n_head_kv = 4, c.d_head = 128;
    c.vocab_size = 152064, c.tied_embeddings = false;
  } else {
    fail("bench forward: --shape {}: expected 0.5b, 1.5b or 7b (the Qwen2.5 shapes)", size);
  }
  return c;
}

weights random_weights(const config& c, uint64_t seed, io::st_dtype dtype) {
  validate(c, "random_weights");
  if (dtype != io::st_dtype::F32 && dtype != io::st_dtype::BF16 && dtype != io::st_dtype::F16)
    fail("random_weights: dtype {}: expected F32, BF16 or F16", io::dtype_name(dtype));
  weights w;
  w.cfg = c;
  w.id = "random-" + c.family;
  std::mt19937_64 rng(seed);
  auto fill = [&](size_t n, float scale) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  // The same draws as fill, rounded as they are made.
  auto fill_matrix = [&](size_t n, float scale) -> matrix {
    if (dtype == io::st_dtype::F32) return matrix(fill(n, scale));
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<uint16_t> bits(n);
    for (uint16_t& b : bits)
      b = dtype == io::st_dtype::BF16 ? uint16_t(std::bit_cast<uint32_t>(formats::quantize_bf16(u(rng))) >> 16)
                                      : uint16_t(formats::encode(formats::format::fp16, u(rng)));
    return matrix::from_bits(dtype, std::move(bits));
  };
  const size_t D = c.dim, H = c.hidden_dim, hd = size_t(c.n_head) * c.d_head, kv = size_t(c.n_head_kv) * c.d_head;
  const float sd = 1.0f / std::sqrt(float(D)), sh = 1.0f / std::sqrt(float(H));
  w.tok_embeddings = fill_matrix(c.vocab_size * D, 1.0f);
  for (int l = 0; l < c.n_layers; ++l) {
    layer_weights L;
    L.attn_norm.assign(D, 1.0f), L.ffn_norm.assign(D, 1.0f);
    L.wq = fill_matrix(hd * D, sd), L.wk = fill_matrix(kv * D, sd), L.wv = fill_matrix(kv * D, sd);
    if (c.qkv_bias) L.bq = fill(hd, 0.1f), L.bk = fill(kv, 0.1f), L.bv = fill(kv, 0.1f);
    L.wo = fill_matrix(D * hd, 1.0f / std::sqrt(float(hd)));
    L.w1 = fill_matrix(H * D, sd), L.w3 = fill_matrix(H * D, sd), L.w2 = fill_matrix(D * H, sh);
    w.layers.push_back(std::move(L));
  }
  w.final_norm.assign(D, 1.0f);
  if (!c.tied_embeddings) w.classifier = fill_matrix(c.vocab_size * D, sd);
  return w;
}

size_t peak_rss_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return size_t(u.ru_maxrss) * 1024;  // Linux: kilobytes
}

forward_bench bench_forward(const weights& w, int tokens, linear_precision p, const std::string& attention,
                            int repeats) {
  const config& c = w.cfg;
  std::vector<int> ids(tokens);
  std::mt19937 rng(7);
  for (int& id : ids) id = int(rng() % uint32_t(c.vocab_size));
  forward_options opt;
  opt.linear = p;
  opt.attention =
      attention == "fp32" ? fp32_attention() : kernel_attention(attention::resolve_kernel(attention), "plain");
  forward_bench b;
  b.tokens = tokens, b.threads = threads(), b.attention = attention, b.linear = std::string(name(p));
  b.seconds = INFINITY;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    forward_stats st;
    opt.stats = &st;
    const double t0 = now();
    forward(w, ids, opt);
    const double dt = now() - t0;
    if (dt < b.seconds) {
      b.seconds = dt;
      b.linear_seconds = st.linear_seconds;
      b.linear_gflops = st.linear_flops / st.linear_seconds * 1e-9;
    }
  }
  b.tokens_per_s = tokens / b.seconds;
  // Memory before the baseline GEMMs below allocate their own fp32 operands.
  b.checkpoint_bytes = w.bytes();
  b.activation_bytes = forward_activation_bytes(c, tokens);
  b.peak_rss_bytes = peak_rss_bytes();
  // The same GEMM shapes, each timed once and weighted by how often the forward runs it.
  const int hd = c.n_head * c.d_head, kv = c.n_head_kv * c.d_head;
  const std::map<std::tuple<int, int>, int> shapes = {
      {{c.dim, hd}, c.n_layers},           {{c.dim, kv}, 2 * c.n_layers},
      {{hd, c.dim}, c.n_layers},           {{c.dim, c.hidden_dim}, 2 * c.n_layers},
      {{c.hidden_dim, c.dim}, c.n_layers}, {{c.dim, c.vocab_size}, 1}};
  double gemm_s = 0, flops = 0;
  for (const auto& [shape, count] : shapes) {
    const auto [in, out] = shape;
    gemm_s += count * gemm_seconds(tokens, in, out, 2);
    flops += count * 2.0 * tokens * double(in) * out;
  }
  b.gemm_gflops = flops / gemm_s * 1e-9;
  b.ratio = b.linear_gflops / b.gemm_gflops;
  return b;
}

}  // namespace attnum::model
