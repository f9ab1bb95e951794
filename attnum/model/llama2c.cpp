#include "attnum/model/llama2c.h"

#include <cstring>
#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/io/mapped_file.h"

namespace attnum::model {
namespace {
using io::mapped_file;

// Reads consecutive fp32 arrays from the mapped body, checking each against the file length.
struct cursor {
  const mapped_file& f;
  size_t pos;
  std::vector<float> take(size_t n, const char* name) {
    size_t bytes = n * sizeof(float);
    if (pos + bytes > f.size() || bytes / sizeof(float) != n)
      fail("{}: truncated: tensor {} needs {} bytes at offset {}, file has {}", f.path(), name, bytes, pos, f.size());
    std::vector<float> v(n);
    std::memcpy(v.data(), f.data() + pos, bytes);
    pos += bytes;
    return v;
  }
  void skip(size_t n, const char* name) {
    size_t bytes = n * sizeof(float);
    if (pos + bytes > f.size()) fail("{}: truncated: {} needs {} bytes at offset {}", f.path(), name, bytes, pos);
    pos += bytes;
  }
};

// Splits a stacked [n_layers * per] array into the layers' fields.
template <typename Field>
void split(std::vector<float> all, size_t per, std::vector<layer_weights>& layers, Field layer_weights::*field) {
  for (size_t l = 0; l < layers.size(); ++l)
    layers[l].*field = std::vector<float>(all.begin() + l * per, all.begin() + (l + 1) * per);
}

}  // namespace

weights load_llama2c(const std::string& path) {
  mapped_file f(path);
  constexpr size_t kHeader = 7 * sizeof(int32_t);
  if (f.size() < kHeader) fail("{}: truncated: {} bytes, the llama2.c header needs {}", path, f.size(), kHeader);
  int32_t h[7];
  std::memcpy(h, f.data(), kHeader);
  weights w;
  config& c = w.cfg;
  c.family = "llama2c";
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_head = h[3];
  c.n_head_kv = h[4];
  c.tied_embeddings = h[5] > 0;
  // Negated in 64 bits: -INT32_MIN overflows an int32 (and is refused by validate as too large).
  const int64_t vocab = h[5] < 0 ? -int64_t(h[5]) : int64_t(h[5]);
  if (vocab > INT32_MAX) fail("{}: vocab_size {} out of range (llama2.c header)", path, h[5]);
  c.vocab_size = static_cast<int>(vocab);
  c.seq_len = h[6];
  c.d_head = c.n_head > 0 ? c.dim / c.n_head : 0;
  c.norm_eps = 1e-5f;  // run.c rmsnorm: ss += 1e-5f
  c.rope_theta = 10000.0f;
  c.rope = rope_style::interleaved;
  c.bos_id = 1;
  validate(c, path + " (llama2.c header)");
  if (c.dim % c.n_head != 0) fail("{}: dim {} is not a multiple of n_heads {}", path, c.dim, c.n_head);
  // Sizes in floats; check the whole body before allocating anything.
  const size_t L = c.n_layers, D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  const size_t kv = size_t(c.n_head_kv) * c.d_head, hd = size_t(c.n_head) * c.d_head;
  const size_t freq = size_t(c.seq_len) * c.d_head / 2;
  // In 128 bits: header fields up to 2^31 each must not wrap the product (a lying header).
  using u128 = unsigned __int128;
  const u128 expect128 = u128(V) * D +
                         u128(L) * (2 * u128(D) + u128(D) * hd + 2 * u128(D) * kv + u128(hd) * D + 3 * u128(D) * H) +
                         D + 2 * u128(freq) + (c.tied_embeddings ? 0 : u128(V) * D);
  if (expect128 > u128(f.size()))
    fail("{}: truncated or lying header: the header implies more weight bytes than the file's {}", path,
         f.size() - kHeader);
  const size_t expect = static_cast<size_t>(expect128);
  size_t have = (f.size() - kHeader) / sizeof(float);
  if (have < expect || (f.size() - kHeader) % sizeof(float) != 0)
    fail("{}: truncated or lying header: the header implies {} weight bytes, the file has {}", path, expect * 4,
         f.size() - kHeader);
  if (have > expect)
    fail("{}: {} trailing bytes after the weights the header describes (wrong header?)", path, (have - expect) * 4);
  cursor cur{f, kHeader};
  w.tok_embeddings = cur.take(V * D, "token_embedding_table");
  w.layers.resize(L);
  using lw = layer_weights;
  split(cur.take(L * D, "rms_att_weight"), D, w.layers, &lw::attn_norm);
  split(cur.take(L * hd * D, "wq"), hd * D, w.layers, &lw::wq);
  split(cur.take(L * kv * D, "wk"), kv * D, w.layers, &lw::wk);
  split(cur.take(L * kv * D, "wv"), kv * D, w.layers, &lw::wv);
  split(cur.take(L * D * hd, "wo"), D * hd, w.layers, &lw::wo);
  split(cur.take(L * D, "rms_ffn_weight"), D, w.layers, &lw::ffn_norm);
  split(cur.take(L * H * D, "w1"), H * D, w.layers, &lw::w1);
  split(cur.take(L * D * H, "w2"), D * H, w.layers, &lw::w2);
  split(cur.take(L * H * D, "w3"), H * D, w.layers, &lw::w3);
  w.final_norm = cur.take(D, "rms_final_weight");
  cur.skip(2 * freq, "freq_cis_real/freq_cis_imag");  // unused: RoPE is recomputed (run.c too)
  if (!c.tied_embeddings) w.classifier = cur.take(V * D, "wcls");
  w.id = std::filesystem::path(path).stem().string();
  w.source_hash = fnv1a_hex(f.data(), f.size());
  return w;
}

}  // namespace attnum::model
