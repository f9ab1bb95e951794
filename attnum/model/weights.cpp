#include "attnum/model/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
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
  if (c.bos_id >= c.vocab_size)
    fail("{}: bos_token_id {} outside the vocabulary [0, {})", what, c.bos_id, c.vocab_size);
}

matrix::matrix(std::vector<float> values) {
  auto owned = std::make_shared<const std::vector<float>>(std::move(values));
  data_ = reinterpret_cast<const uint8_t*>(owned->data());
  count_ = owned->size();
  owner_ = std::move(owned);
}

matrix::matrix(io::st_dtype dtype, const uint8_t* data, size_t count, std::shared_ptr<const void> owner)
    : dtype_(dtype), data_(data), count_(count), owner_(std::move(owner)) {
  if (dtype != io::st_dtype::F32 && dtype != io::st_dtype::BF16 && dtype != io::st_dtype::F16)
    fail("matrix: dtype {} is not a weight dtype (expected F32, F16 or BF16)", io::dtype_name(dtype));
  if (dtype == io::st_dtype::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) *this = matrix(to_float());
}

matrix matrix::from_bits(io::st_dtype dtype, std::vector<uint16_t> bits) {
  auto owned = std::make_shared<const std::vector<uint16_t>>(std::move(bits));
  const auto* p = reinterpret_cast<const uint8_t*>(owned->data());
  const size_t n = owned->size();  // before the move below (argument order is unspecified)
  return matrix(dtype, p, n, std::move(owned));
}

std::vector<float> matrix::to_float() const {
  std::vector<float> v(count_);
  if (count_) widen(0, count_, v.data());
  return v;
}

namespace {
// m's values as 16-bit codes of `to`: code(index, value) gives each one's.
template <typename Code>
matrix recoded(const matrix& m, io::st_dtype to, Code&& code) {
  std::vector<uint16_t> bits(m.size());
  m.for_each_chunk([&](size_t b, const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) bits[b + i] = code(b + i, x[i]);
    return true;
  });
  return matrix::from_bits(to, std::move(bits));
}

// x's float16 code (RNE); refused, naming element `index` of `what`, where it would be Inf.
uint16_t fp16_code(const std::string& what, size_t index, float x) {
  const uint32_t code = formats::encode(formats::format::fp16, x, formats::rounding::nearest_even, false);
  if ((code & 0x7fffu) >= 0x7c00u)
    fail(
        "{}: element {} = {} is beyond float16's range (65504): the model cannot be held in fp16 "
        "(--linear-precision bf16 or fp32 can)",
        what, index, x);
  return static_cast<uint16_t>(code);
}
}  // namespace

matrix matrix::rounded_to_bf16() const {
  if (dtype_ == io::st_dtype::BF16) return *this;
  return recoded(*this, io::st_dtype::BF16, [](size_t, float x) {
    return static_cast<uint16_t>(std::bit_cast<uint32_t>(formats::quantize_bf16(x)) >> 16);
  });
}

matrix matrix::rounded_to_fp16(const std::string& what) const {
  if (dtype_ == io::st_dtype::F16) return *this;
  return recoded(*this, io::st_dtype::F16, [&](size_t i, float x) { return fp16_code(what, i, x); });
}

bool matrix::operator==(const matrix& o) const {
  if (count_ != o.count_) return false;
  if (data_ == o.data_ && dtype_ == o.dtype_) return true;
  float other[kChunk];
  return for_each_chunk([&](size_t b, const float* x, size_t m) {
    o.widen(b, m, other);
    for (size_t i = 0; i < m; ++i)
      if (!(x[i] == other[i])) return false;
    return true;
  });
}

size_t model_bytes(const config& c, io::st_dtype matrices) {
  const size_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, hd = size_t(c.n_head) * c.d_head,
               kv = size_t(c.n_head_kv) * c.d_head;
  const size_t per_layer_m = 2 * hd * D + 2 * kv * D + 3 * H * D;
  const size_t per_layer_v = 2 * D + (c.qkv_bias ? hd + 2 * kv : 0) + (c.o_bias ? D : 0) +
                             (c.qk_norm ? 2 * size_t(c.d_head) : 0) + (c.mlp_bias ? 2 * H + D : 0);
  const size_t m = V * D * (c.tied_embeddings ? 1 : 2) + c.n_layers * per_layer_m;
  return m * io::dtype_size(matrices) + (D + c.n_layers * per_layer_v) * sizeof(float);
}

std::array<size_t, 3> matrix_elements(const weights& w) {
  if (w.partial) return w.full_elements;
  std::array<size_t, 3> n = {0, 0, 0};
  for_each_tensor(
      w,
      [&](const std::string&, const matrix& m) {
        n[m.dtype() == io::st_dtype::BF16 ? 1 : m.dtype() == io::st_dtype::F16 ? 2 : 0] += m.size();
      },
      [](const std::string&, const std::vector<float>&) {});
  return n;
}

void keep_slice(weights& w, const layer_slice& s) {
  if (s.begin < 0 || s.end > w.cfg.n_layers || s.begin > s.end)
    fail("layers [{}, {}) outside the model's {} layers", s.begin, s.end, w.cfg.n_layers);
  if (!w.partial) w.full_elements = matrix_elements(w), w.partial = true;
  for (int l = 0; l < w.cfg.n_layers; ++l)
    if (l < s.begin || l >= s.end) w.layers[size_t(l)] = layer_weights{};
  if (!s.embeddings && !(s.head && w.classifier.empty())) w.tok_embeddings = matrix{};
  if (!s.head) w.final_norm.clear(), w.classifier = matrix{};
}

size_t weights::bytes() const {
  size_t n = 0;
  for_each_tensor(
      *this, [&](const std::string&, const matrix& m) { n += m.bytes(); },
      [&](const std::string&, const std::vector<float>& v) { n += v.size() * sizeof(float); });
  return n;
}

std::string fingerprint(const weights& w) {
  // What the forward reads besides the weights: every config field (floats as bit patterns).
  const config& c = w.cfg;
  std::string cfg = fmt::format("{} {} {} {} {} {} {} {} {} {:08x} {:08x} {} {} {} {} {} {:08x} {} {}", c.family, c.dim,
                                c.hidden_dim, c.n_layers, c.n_head, c.n_head_kv, c.d_head, c.vocab_size, c.seq_len,
                                std::bit_cast<uint32_t>(c.norm_eps), std::bit_cast<uint32_t>(c.rope_theta), int(c.rope),
                                c.qkv_bias, c.o_bias, c.mlp_bias, c.qk_norm,
                                std::bit_cast<uint32_t>(c.rope_attention_scale), c.tied_embeddings, c.bos_id);
  for (float f : c.inv_freq) cfg += fmt::format(" {:08x}", std::bit_cast<uint32_t>(f));
  cfg += " |";
  for (int s : c.sliding_window) cfg += fmt::format(" {}", s);
  // The data: pieces of at most 16 MiB of every tensor in a fixed order, each hashed on its own.
  struct piece {
    const uint8_t* p;
    size_t n;
    int dtype;  // -1: an fp32 vector
  };
  std::vector<piece> pieces;
  constexpr size_t kPiece = size_t(16) << 20;
  auto add = [&](const uint8_t* p, size_t n, int dtype) {
    pieces.push_back({p, 0, dtype});  // marks the tensor's start (and an empty tensor)
    for (size_t b = 0; b < n; b += kPiece) pieces.push_back({p + b, std::min(kPiece, n - b), dtype});
  };
  for_each_tensor(
      w, [&](const std::string&, const matrix& m) { add(m.data(), m.bytes(), int(m.dtype())); },
      [&](const std::string&, const std::vector<float>& v) {
        add(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float), -1);
      });
  std::vector<uint64_t> h(pieces.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < pieces.size(); ++i) h[i] = core::fnv1a64(pieces[i].p, pieces[i].n);
  uint64_t out = core::fnv1a64(cfg.data(), cfg.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t rec[3] = {uint64_t(int64_t(pieces[i].dtype)), uint64_t(pieces[i].n), h[i]};
    out = core::fnv1a64(rec, sizeof rec, out);
  }
  return fmt::format("{:016x}", out);
}

void round_to_bf16(weights& w) {
  for_each_tensor(
      w,
      [](const std::string&, matrix& m) {
        if (!m.empty()) m = m.rounded_to_bf16();
      },
      [](const std::string&, std::vector<float>& v) {
        for (float& x : v) x = formats::quantize_bf16(x);
      });
}

void round_to_fp16(weights& w) {
  for_each_tensor(
      w,
      [](const std::string& name, matrix& m) {
        if (!m.empty()) m = m.rounded_to_fp16(name);
      },
      [](const std::string& name, std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = static_cast<float>(formats::decode(formats::format::fp16, fp16_code(name, i, v[i])));
      });
}

}  // namespace attnum::model
