// Hugging Face folders: a tiny random Qwen2-shaped checkpoint written here (own safetensors
// writer, BF16/F16/F32 tensors, single file and sharded index) loads, and its forward matches an
// independent plain-loop double implementation (rotate_half RoPE, q/k/v bias, GQA, tied
// embeddings). Broken folders give errors naming the file and the tensor, exit 2 via the CLI.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/model/hf_checkpoint.h"
#include "attnum/model/loader.h"
#include "attnum/model/transformer.h"

namespace {
namespace fs = std::filesystem;
using vec = std::vector<double>;

struct tensor {
  std::vector<int64_t> shape;
  vec data;
  std::string dtype = "F32";
};
using tensors = std::map<std::string, tensor>;

// Values k/128 * 2^-e are exact in bf16, fp16 and fp32, so every dtype stores the same numbers.
vec random_exact(size_t n, std::mt19937& rng, int e) {
  std::uniform_int_distribution<int> k(-127, 127);
  vec v(n);
  for (double& x : v) x = std::ldexp(k(rng) / 128.0, -e);
  return v;
}

std::string encode(const tensor& t) {
  std::string out;
  for (double x : t.data) {
    const float f = float(x);
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if (t.dtype == "F32") {
      out.append(reinterpret_cast<const char*>(&f), 4);
    } else if (t.dtype == "BF16") {
      const uint16_t b = uint16_t(u >> 16);  // exact: the low half is zero for these values
      out.append(reinterpret_cast<const char*>(&b), 2);
    } else {  // F16 of an exactly representable normal value (or zero)
      uint16_t h = uint16_t((u >> 16) & 0x8000);
      if (f != 0.0f) h |= uint16_t((((u >> 23) & 0xff) - 112) << 10 | ((u >> 13) & 0x3ff));
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return out;
}

void write_safetensors(const fs::path& path, const tensors& ts) {
  nlohmann::json h;
  std::string body;
  for (const auto& [name, t] : ts) {
    const std::string b = encode(t);
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {body.size(), body.size() + b.size()}}};
    body += b;
  }
  const std::string header = h.dump();
  const uint64_t n = header.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << body;
}

// What a tiny checkpoint has: the family and its optional parts.
struct family_opts {
  std::string family = "qwen2";
  bool qkv_bias = true, o_bias = false, mlp_bias = false, qk_norm = false, tied = true;
  int dh = 8;
  nlohmann::json extra = nlohmann::json::object();  // config fields added as given
};

struct tiny_qwen {
  int D = 32, H = 48, L = 2, nh = 4, nkv = 2, dh = 8, V = 40;
  double eps = 1e-6, theta = 10000.0;
  family_opts o;
  tensors ts;
  std::vector<double> inv_freq;  // RoPE frequency of pair i (reference's own, see below)
  double attn_scale = 1.0;       // multiplies cos and sin
  explicit tiny_qwen(unsigned seed, family_opts opts = {}) : dh(opts.dh), o(std::move(opts)) {
    std::mt19937 rng(seed);
    auto add = [&](const std::string& name, std::vector<int64_t> shape, int e, const char* dtype) {
      size_t n = 1;
      for (auto s : shape) n *= size_t(s);
      ts[name] = {shape, random_exact(n, rng, e), dtype};
    };
    add("model.embed_tokens.weight", {V, D}, 0, "BF16");
    for (int l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const char* dt = l == 0 ? "F16" : "F32";
      add(p + "input_layernorm.weight", {D}, 0, dt);
      add(p + "post_attention_layernorm.weight", {D}, 0, dt);
      add(p + "self_attn.q_proj.weight", {nh * dh, D}, 1, dt);
      add(p + "self_attn.k_proj.weight", {nkv * dh, D}, 1, dt);
      add(p + "self_attn.v_proj.weight", {nkv * dh, D}, 1, "BF16");
      if (o.qkv_bias) {
        add(p + "self_attn.q_proj.bias", {nh * dh}, 1, dt);
        add(p + "self_attn.k_proj.bias", {nkv * dh}, 1, dt);
        add(p + "self_attn.v_proj.bias", {nkv * dh}, 1, dt);
      }
      if (o.qk_norm) {
        add(p + "self_attn.q_norm.weight", {dh}, 1, dt);
        add(p + "self_attn.k_norm.weight", {dh}, 1, dt);
        for (auto* n : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"})
          for (double& x : ts[p + n].data) x += 1.0;
      }
      add(p + "self_attn.o_proj.weight", {D, nh * dh}, 1, dt);
      if (o.o_bias) add(p + "self_attn.o_proj.bias", {D}, 1, dt);
      add(p + "mlp.gate_proj.weight", {H, D}, 1, dt);
      add(p + "mlp.up_proj.weight", {H, D}, 1, dt);
      add(p + "mlp.down_proj.weight", {D, H}, 1, dt);
      if (o.mlp_bias) {
        add(p + "mlp.gate_proj.bias", {H}, 1, dt);
        add(p + "mlp.up_proj.bias", {H}, 1, dt);
        add(p + "mlp.down_proj.bias", {D}, 1, dt);
      }
    }
    add("model.norm.weight", {D}, 0, "F32");
    for (auto* n : {"model.norm.weight"})
      for (double& x : ts[n].data) x += 1.0;
    if (!o.tied) add("lm_head.weight", {V, D}, 1, "BF16");
    for (int i = 0; i < dh / 2; ++i) inv_freq.push_back(std::pow(theta, -2.0 * i / dh));
  }
  nlohmann::json config() const {
    nlohmann::json c = {{"model_type", o.family},
                        {"hidden_size", D},
                        {"intermediate_size", H},
                        {"num_hidden_layers", L},
                        {"num_attention_heads", nh},
                        {"num_key_value_heads", nkv},
                        {"rms_norm_eps", eps},
                        {"rope_theta", theta},
                        {"vocab_size", V},
                        {"tie_word_embeddings", o.tied},
                        {"max_position_embeddings", 64},
                        {"hidden_act", "silu"},
                        {"rope_scaling", nullptr}};
    if (dh != D / nh) c["head_dim"] = dh;
    for (auto it = o.extra.begin(); it != o.extra.end(); ++it) c[it.key()] = it.value();
    return c;
  }
  void write(const fs::path& dir, bool sharded, const tensors* override_ts = nullptr) const {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config().dump(2);
    const tensors& t = override_ts ? *override_ts : ts;
    if (!sharded) return write_safetensors(dir / "model.safetensors", t);
    tensors a, b;
    nlohmann::json map;
    for (const auto& [name, x] : t) {
      const bool first = name.find("layers.1.") == std::string::npos && name != "model.norm.weight";
      (first ? a : b)[name] = x;
      map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors(dir / "model-00001-of-00002.safetensors", a);
    write_safetensors(dir / "model-00002-of-00002.safetensors", b);
    std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  }

  // Plain loops in double, written from the Hugging Face modeling code's definitions (Qwen2,
  // Qwen3 q_norm/k_norm, Llama biases).
  std::vector<vec> forward(const std::vector<int>& ids) const {
    const int n = int(ids.size());
    auto W = [&](const std::string& name) -> const vec& { return ts.at(name).data; };
    auto matvec = [](const vec& w, const vec& x, int out) {
      vec y(out, 0.0);
      const size_t in = x.size();
      for (int o = 0; o < out; ++o)
        for (size_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
      return y;
    };
    auto add_bias = [&](vec& y, const std::string& name) {
      for (size_t i = 0; i < y.size(); ++i) y[i] += W(name)[i];
    };
    auto rmsnorm = [&](const vec& x, const vec& w) {
      double ss = 0;
      for (double v : x) ss += v * v;
      const double r = 1.0 / std::sqrt(ss / x.size() + eps);
      vec y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * r;
      return y;
    };
    auto head_norm = [&](vec& x, int heads, const vec& w) {  // Qwen3: RMSNorm over each head
      for (int h = 0; h < heads; ++h) {
        const vec y = rmsnorm(vec(x.begin() + h * dh, x.begin() + (h + 1) * dh), w);
        std::copy(y.begin(), y.end(), x.begin() + h * dh);
      }
    };
    auto rope = [&](vec& x, int heads, int pos) {  // rotate_half: pairs (i, i + d/2)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < dh / 2; ++i) {
          const double a = pos * inv_freq[i], c = std::cos(a) * attn_scale, s = std::sin(a) * attn_scale;
          double& x1 = x[h * dh + i];
          double& x2 = x[h * dh + i + dh / 2];
          const double y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
          x1 = y1, x2 = y2;
        }
    };
    std::vector<vec> x(n);
    for (int t = 0; t < n; ++t)
      x[t] = vec(W("model.embed_tokens.weight").begin() + ids[t] * D,
                 W("model.embed_tokens.weight").begin() + (ids[t] + 1) * D);
    for (int l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<vec> q(n), k(n), v(n);
      for (int t = 0; t < n; ++t) {
        const vec h = rmsnorm(x[t], W(p + "input_layernorm.weight"));
        q[t] = matvec(W(p + "self_attn.q_proj.weight"), h, nh * dh);
        k[t] = matvec(W(p + "self_attn.k_proj.weight"), h, nkv * dh);
        v[t] = matvec(W(p + "self_attn.v_proj.weight"), h, nkv * dh);
        if (o.qkv_bias) {
          add_bias(q[t], p + "self_attn.q_proj.bias");
          add_bias(k[t], p + "self_attn.k_proj.bias");
          add_bias(v[t], p + "self_attn.v_proj.bias");
        }
        if (o.qk_norm)
          head_norm(q[t], nh, W(p + "self_attn.q_norm.weight")), head_norm(k[t], nkv, W(p + "self_attn.k_norm.weight"));
        rope(q[t], nh, t), rope(k[t], nkv, t);
      }
      for (int t = 0; t < n; ++t) {
        vec o_(nh * dh, 0.0);
        for (int h = 0; h < nh; ++h) {
          const int g = h / (nh / nkv);
          vec s(t + 1);
          double m = -INFINITY, z = 0;
          for (int j = 0; j <= t; ++j) {
            s[j] = 0;
            for (int c = 0; c < dh; ++c) s[j] += q[t][h * dh + c] * k[j][g * dh + c];
            s[j] /= std::sqrt(double(dh));
            m = std::max(m, s[j]);
          }
          for (int j = 0; j <= t; ++j) z += s[j] = std::exp(s[j] - m);
          for (int j = 0; j <= t; ++j)
            for (int c = 0; c < dh; ++c) o_[h * dh + c] += s[j] / z * v[j][g * dh + c];
        }
        vec a = matvec(W(p + "self_attn.o_proj.weight"), o_, D);
        if (o.o_bias) add_bias(a, p + "self_attn.o_proj.bias");
        for (int i = 0; i < D; ++i) x[t][i] += a[i];
        const vec h2 = rmsnorm(x[t], W(p + "post_attention_layernorm.weight"));
        vec g = matvec(W(p + "mlp.gate_proj.weight"), h2, H), u = matvec(W(p + "mlp.up_proj.weight"), h2, H);
        if (o.mlp_bias) add_bias(g, p + "mlp.gate_proj.bias"), add_bias(u, p + "mlp.up_proj.bias");
        for (int i = 0; i < H; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        vec d = matvec(W(p + "mlp.down_proj.weight"), g, D);
        if (o.mlp_bias) add_bias(d, p + "mlp.down_proj.bias");
        for (int i = 0; i < D; ++i) x[t][i] += d[i];
      }
    }
    std::vector<vec> logits(n);
    const char* head = o.tied ? "model.embed_tokens.weight" : "lm_head.weight";
    for (int t = 0; t < n; ++t) logits[t] = matvec(W(head), rmsnorm(x[t], W("model.norm.weight")), V);
    return logits;
  }
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("attnum_hf_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

std::string load_error(const fs::path& dir) {
  try {
    attnum::model::load_model(dir.string());
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_matches_plain_loops(const tiny_qwen& m, const fs::path& dir) {
  const attnum::model::weights w = attnum::model::load_model(dir.string());
  EXPECT_EQ(w.cfg.family, "qwen2");
  EXPECT_TRUE(w.cfg.qkv_bias);
  EXPECT_EQ(w.cfg.bos_id, -1);
  EXPECT_EQ(w.cfg.rope, attnum::model::rope_style::rotate_half);
  std::vector<int> ids;
  for (int i = 0; i < 20; ++i) ids.push_back((i * 13 + 5) % m.V);
  const std::vector<float> got = attnum::model::forward(w, ids);
  const std::vector<vec> want = m.forward(ids);
  double worst = 0, scale = 0;
  for (int t = 0; t < 20; ++t)
    for (int v = 0; v < m.V; ++v) {
      worst = std::max(worst, std::fabs(got[t * m.V + v] - want[t][v]));
      scale = std::max(scale, std::fabs(want[t][v]));
    }
  // fp32 forward against double loops: a few fp32 ulps of the largest logit per op.
  EXPECT_LT(worst, 1e-5 * scale * 16) << "worst |diff| " << worst << ", max |logit| " << scale;
  EXPECT_GT(scale, 0.1);
}

// Mean cross-entropy of next-token labels from logits rows (double).
template <typename Row>
double mean_ce(const std::vector<int>& ids, int V, Row row) {
  double ce = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    double m = -INFINITY, z = 0;
    for (int v = 0; v < V; ++v) m = std::max(m, row(t, v));
    for (int v = 0; v < V; ++v) z += std::exp(row(t, v) - m);
    ce += m + std::log(z) - row(t, ids[t + 1]);
  }
  return ce / double(ids.size() - 1);
}

// Loads the folder, runs the fp32 forward over n tokens and compares logits and CE with the
// reference loops. Returns the relative CE difference.
double expect_family_matches(const tiny_qwen& m, const fs::path& dir, int n = 20) {
  m.write(dir, false);
  const attnum::model::weights w = attnum::model::load_model(dir.string());
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 13 + 5) % m.V);
  const std::vector<float> got = attnum::model::forward(w, ids);
  const std::vector<vec> want = m.forward(ids);
  double worst = 0, scale = 0;
  for (int t = 0; t < n; ++t)
    for (int v = 0; v < m.V; ++v) {
      worst = std::max(worst, std::fabs(got[t * m.V + v] - want[t][v]));
      scale = std::max(scale, std::fabs(want[t][v]));
    }
  EXPECT_LT(worst, 1e-5 * scale * 16) << "worst |diff| " << worst << ", max |logit| " << scale;
  const double ce_got = mean_ce(ids, m.V, [&](size_t t, int v) { return double(got[t * m.V + v]); });
  const double ce_want = mean_ce(ids, m.V, [&](size_t t, int v) { return want[t][v]; });
  const double rel = std::fabs(ce_got - ce_want) / ce_want;
  EXPECT_LT(rel, 1e-7) << "CE " << ce_got << " vs " << ce_want;
  fs::remove_all(dir);
  return rel;
}

// The reference's RoPE frequencies for each rope_scaling type, written from transformers'
// modeling_rope_utils definitions (_compute_linear/llama3/yarn_parameters).
std::vector<double> default_freq(double theta, int dh) {
  std::vector<double> f;
  for (int i = 0; i < dh / 2; ++i) f.push_back(1.0 / std::pow(theta, double(2 * i) / dh));
  return f;
}

TEST(hf_checkpoint_test, qwen3_q_norm_k_norm_head_dim_match_plain_loops) {
  // head_dim 12 != hidden_size / heads = 8; no biases; untied head.
  tiny_qwen m(21, {.family = "qwen3",
                   .qkv_bias = false,
                   .qk_norm = true,
                   .tied = false,
                   .dh = 12,
                   .extra = {{"attention_bias", false},
                             {"use_sliding_window", false},
                             {"sliding_window", nullptr},
                             {"max_window_layers", 28}}});
  const fs::path cfg_dir = temp_dir("qwen3cfg");
  m.write(cfg_dir, false);
  const attnum::model::config c = attnum::model::read_hf_config((cfg_dir / "config.json").string());
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.d_head, 12);
  EXPECT_EQ(c.bos_id, -1);
  fs::remove_all(cfg_dir);
  expect_family_matches(m, temp_dir("qwen3"));
  // attention_bias: q/k/v/o biases
  tiny_qwen b(
      22, {.family = "qwen3", .qkv_bias = true, .o_bias = true, .qk_norm = true, .extra = {{"attention_bias", true}}});
  expect_family_matches(b, temp_dir("qwen3b"));
}

TEST(hf_checkpoint_test, llama_attention_bias_and_mlp_bias_match_plain_loops) {
  tiny_qwen m(23, {.family = "llama",
                   .qkv_bias = true,
                   .o_bias = true,
                   .mlp_bias = true,
                   .tied = false,
                   .extra = {{"attention_bias", true},
                             {"mlp_bias", true},
                             {"pretraining_tp", 1},
                             {"architectures", {"LlamaForCausalLM"}},
                             {"torch_dtype", "bfloat16"},
                             {"transformers_version", "4.45.0"},
                             {"use_cache", true},
                             {"eos_token_id", {1, 2}},
                             {"bos_token_id", 3},
                             {"initializer_range", 0.02},
                             {"attention_dropout", 0.0}}});
  expect_family_matches(m, temp_dir("llamabias"));
  // Without the biases the o_proj/mlp bias tensors would be unread: refused by name.
  tiny_qwen none(23, {.family = "llama", .qkv_bias = true, .o_bias = true, .mlp_bias = true, .tied = false});
  const fs::path dir = temp_dir("llamaextra");
  none.write(dir, false);
  const std::string e = load_error(dir);
  EXPECT_NE(e.find("model.layers.0.mlp.down_proj.bias is not read"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, rope_scaling_types_match_plain_loops) {
  const fs::path dir = temp_dir("rope");
  const auto base = default_freq(10000.0, 8);  // wavelengths 6.3, 63, 628, 6283
  {                                            // linear: inv_freq / factor
    tiny_qwen m(31, {.family = "llama",
                     .qkv_bias = false,
                     .extra = {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}}});
    for (int i = 0; i < 4; ++i) m.inv_freq[i] = base[i] / 4.0;
    expect_family_matches(m, dir);
  }
  {  // dynamic NTK at lengths within max_position_embeddings: the default frequencies
    tiny_qwen m(
        32,
        {.family = "llama", .qkv_bias = false, .extra = {{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}}});
    expect_family_matches(m, dir);
  }
  {  // llama3 with original context 1024, low 1, high 4: wavelengths 6.3 and 63 < 256 kept,
     // 628 in [256, 1024] smoothed, 6283 > 1024 divided by the factor
    tiny_qwen m(33, {.family = "llama",
                     .qkv_bias = false,
                     .extra = {{"rope_scaling",
                                {{"rope_type", "llama3"},
                                 {"factor", 8.0},
                                 {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 1024}}}}});
    const double wl2 = 2 * M_PI / base[2], smooth = (1024 / wl2 - 1.0) / (4.0 - 1.0);
    m.inv_freq = {base[0], base[1], (1 - smooth) * base[2] / 8 + smooth * base[2], base[3] / 8};
    expect_family_matches(m, dir);
  }
  {  // yarn, factor 4, context 64, dim 8: correction range [floor(-0.497), ceil(1.008)] = [0, 2]
    tiny_qwen m(34, {.family = "qwen2", .extra = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}});
    for (int i = 0; i < 4; ++i) {
      const double ramp = std::clamp(i / 2.0, 0.0, 1.0);  // 0, 0.5, 1, 1
      m.inv_freq[i] = base[i] / 4 * ramp + base[i] * (1 - ramp);
    }
    m.attn_scale = 0.1 * std::log(4.0) + 1.0;
    expect_family_matches(m, dir);
  }
  {  // yarn with mscale / mscale_all_dim and original_max_position_embeddings 16 (= 64 / 4)
    tiny_qwen m(35, {.family = "qwen2",
                     .extra = {{"rope_scaling",
                                {{"rope_type", "yarn"},
                                 {"factor", 4.0},
                                 {"original_max_position_embeddings", 16},
                                 {"mscale", 0.707},
                                 {"mscale_all_dim", 1.0},
                                 {"beta_fast", 16},
                                 {"beta_slow", 2}}}}});
    // correction dims: 8 ln(16 / (r 2 pi)) / (2 ln 1e4) for r = 16, 2: -0.80 -> 0, 0.105 -> 1
    const double lo = 0, hi = 1;
    for (int i = 0; i < 4; ++i) {
      const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
      m.inv_freq[i] = base[i] / 4 * ramp + base[i] * (1 - ramp);
    }
    m.attn_scale = (0.1 * 0.707 * std::log(4.0) + 1) / (0.1 * 1.0 * std::log(4.0) + 1);
    expect_family_matches(m, dir);
  }
}

TEST(hf_checkpoint_test, mistral_and_sliding_windows) {
  const fs::path dir = temp_dir("mistral");
  // sliding_window 4096 over 20 tokens: plain causal attention
  tiny_qwen m(41, {.family = "mistral",
                   .qkv_bias = false,
                   .tied = false,
                   .extra = {{"sliding_window", 4096}, {"bos_token_id", 1}}});
  expect_family_matches(m, dir);
  // A window shorter than the forward is refused, naming the field.
  tiny_qwen s(42, {.family = "mistral", .qkv_bias = false, .tied = false, .extra = {{"sliding_window", 10}}});
  s.write(dir, false);
  const attnum::model::weights w = attnum::model::load_model(dir.string());
  EXPECT_EQ(w.cfg.bos_id, 1);
  std::vector<int> ids(20, 3);
  try {
    attnum::model::forward(w, ids);
    ADD_FAILURE() << "20 tokens over a window of 10 ran";
  } catch (const attnum::error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding window of 10"), std::string::npos) << e.what();
  }
  ids.resize(10);
  EXPECT_NO_THROW(attnum::model::forward(w, ids));
  // qwen2: use_sliding_window with max_window_layers 1 makes layer 1 windowed.
  tiny_qwen q(43, {.extra = {{"use_sliding_window", true}, {"sliding_window", 8}, {"max_window_layers", 1}}});
  q.write(dir, false);
  const attnum::model::config c = attnum::model::read_hf_config((dir / "config.json").string());
  EXPECT_EQ(c.sliding_window, (std::vector<int>{0, 8}));
  // use_sliding_window false: sliding_window is ignored, as transformers does.
  tiny_qwen off(44, {.extra = {{"use_sliding_window", false}, {"sliding_window", 8}, {"max_window_layers", 1}}});
  expect_family_matches(off, dir);
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, unsupported_fields_and_tensors_are_refused_by_name) {
  const fs::path dir = temp_dir("refuse");
  tiny_qwen m(51);
  auto config_error = [&](nlohmann::json extra) {
    m.o.extra = std::move(extra);
    m.write(dir, false);
    return load_error(dir);
  };
  auto expect_has = [](const std::string& e, const std::string& want) {
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  };
  expect_has(config_error({{"quantization_config", {{"quant_method", "gptq"}}}}), "field quantization_config");
  expect_has(config_error({{"attention_bias", true}}), "field attention_bias");  // qwen2 has no such field
  expect_has(config_error({{"partial_rotary_factor", 0.5}}), "field partial_rotary_factor");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "longrope"}, {"factor", 2}}}}),
             "rope_type 'longrope' not supported");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "linear"}, {"factor", -2}}}}), "factor = -2");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "linear"}, {"factor", "2"}}}}), "factor = \"2\"");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "linear"}}}}), "missing field factor");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2}, {"low_freq_factor", 1}}}}),
             "field low_freq_factor");
  expect_has(config_error({{"rope_scaling", {{"factor", 2}}}}), "missing rope_type");
  expect_has(config_error({{"rope_scaling",
                            {{"rope_type", "llama3"},
                             {"factor", 8},
                             {"low_freq_factor", 4},
                             {"high_freq_factor", 1},
                             {"original_max_position_embeddings", 8192}}}}),
             "high_freq_factor 1 must exceed low_freq_factor 4");
  expect_has(config_error(
                 {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 32}}}}),
             "transformers versions disagree");
  expect_has(config_error({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}, {"attention_factor", 0}}}}),
             "attention_factor = 0");
  expect_has(config_error({{"rope_scaling", 4}}), "rope_scaling: expected an object");
  expect_has(config_error({{"rope_theta", -1}}), "rope_theta = -1");
  expect_has(config_error({{"rope_theta", 1e300}}), "rope_theta = 1e+300");
  expect_has(config_error({{"use_sliding_window", true}, {"layer_types", {"full_attention"}}}), "layer_types");
  expect_has(config_error({{"use_sliding_window", true}, {"max_window_layers", 0}}), "sliding_window is missing");
  expect_has(config_error({{"pretraining_tp", 2}}), "pretraining_tp");  // qwen2: unknown field
  m.o.extra = nlohmann::json::object();
  // An extra tensor is refused by name.
  tensors t = m.ts;
  t["model.layers.0.self_attn.rotary_emb.inv_freq"] = {{4}, {1, 0.1, 0.01, 0.001}, "F32"};
  m.write(dir, false, &t);
  expect_has(load_error(dir), "tensor model.layers.0.self_attn.rotary_emb.inv_freq is not read");
  // A tied checkpoint's stored lm_head must be the embedding table.
  t = m.ts;
  t["lm_head.weight"] = t["model.embed_tokens.weight"];
  m.write(dir, false, &t);
  EXPECT_EQ(load_error(dir), "(no error)");
  t["lm_head.weight"].data[0] += 0.5;
  m.write(dir, false, &t);
  expect_has(load_error(dir), "lm_head.weight differs");
  // The CLI exits 2 naming the field.
  m.o.extra = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", -4}}}};
  m.write(dir, false);
  std::ofstream(dir / "ids.txt") << "1 2 3 4 5 6 7 8 9";
  const std::string cmd = std::string(ATTNUM_BINARY) + " loss --model " + dir.string() + " --token-ids " +
                          (dir / "ids.txt").string() + " --tokens 4 --kernel fa3 --conditions plain 2>" +
                          (dir / "err.txt").string();
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
  std::ifstream f(dir / "err.txt");
  const std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  expect_has(err, "rope_scaling: factor = -4");
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, single_file_forward_matches_plain_loops) {
  tiny_qwen m(11);
  const fs::path dir = temp_dir("single");
  m.write(dir, false);
  expect_matches_plain_loops(m, dir);
  fs::remove_all(dir);
}

// Matrices stay as the checkpoint stores them, in place in the mapped shards: the model costs its
// checkpoint's bytes, keeps working after the files are unlinked (the mapping holds them), and
// its forward equals the forward of the same values widened to fp32.
TEST(hf_checkpoint_test, weights_are_held_as_stored_in_the_mapped_files) {
  using attnum::io::st_dtype;
  tiny_qwen m(14);
  const fs::path dir = temp_dir("in_place");
  m.write(dir, true);
  attnum::model::weights w = attnum::model::load_model(dir.string());
  EXPECT_EQ(w.tok_embeddings.dtype(), st_dtype::BF16);
  EXPECT_EQ(w.layers[0].wq.dtype(), st_dtype::F16);
  EXPECT_EQ(w.layers[1].wq.dtype(), st_dtype::F32);
  EXPECT_EQ(w.layers[0].wv.dtype(), st_dtype::BF16);
  size_t stored = 0;  // the tensors' bytes as written, 2 or 4 per element
  for (const auto& [name, t] : m.ts) stored += t.data.size() * (t.dtype == std::string("F32") ? 4 : 2);
  size_t norms16 = 0;  // norms and biases in 16 bits on disk, fp32 in memory
  for (const auto& [name, t] : m.ts)
    if (t.shape.size() == 1 && t.dtype != std::string("F32")) norms16 += t.data.size() * 2;
  EXPECT_EQ(w.bytes(), stored + norms16);
  std::vector<int> ids;
  for (int i = 0; i < 20; ++i) ids.push_back((i * 13 + 5) % m.V);
  const std::vector<float> before = attnum::model::forward(w, ids);
  fs::remove_all(dir);
  EXPECT_EQ(attnum::model::forward(w, ids), before);
  attnum::model::weights f = w;
  f.tok_embeddings = attnum::model::matrix(w.tok_embeddings.to_float());
  for (auto& l : f.layers)
    for (auto* x : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) *x = attnum::model::matrix(x->to_float());
  EXPECT_EQ(attnum::model::forward(f, ids), before);
}

TEST(hf_checkpoint_test, sharded_index_forward_matches_plain_loops) {
  tiny_qwen m(12);
  const fs::path dir = temp_dir("sharded");
  m.write(dir, true);
  expect_matches_plain_loops(m, dir);
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, broken_folders_name_the_file_and_the_tensor) {
  tiny_qwen m(13);
  const fs::path dir = temp_dir("broken");
  tensors t = m.ts;
  t.erase("model.layers.1.mlp.up_proj.weight");
  m.write(dir, false, &t);
  EXPECT_NE(load_error(dir).find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << load_error(dir);
  t = m.ts;
  t["model.layers.0.self_attn.k_proj.weight"].shape = {8, 64};  // same bytes, wrong shape
  m.write(dir, false, &t);
  std::string e = load_error(dir);
  EXPECT_NE(e.find("k_proj.weight has shape [8, 64], expected [16, 32]"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  // Truncated: cut the file short.
  m.write(dir, false);
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") - 100);
  e = load_error(dir);
  EXPECT_NE(e.find("outside the"), std::string::npos) << e;
  // Lying header length.
  {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t huge = 1ull << 40;
    f.write(reinterpret_cast<const char*>(&huge), 8);
  }
  e = load_error(dir);
  EXPECT_NE(e.find("header length"), std::string::npos) << e;
  // Config: missing field, unsupported family.
  m.write(dir, false);
  nlohmann::json c = m.config();
  c.erase("hidden_size");
  std::ofstream(dir / "config.json") << c.dump();
  e = load_error(dir);
  EXPECT_NE(e.find("config.json: missing field hidden_size"), std::string::npos) << e;
  c = m.config();
  c["model_type"] = "gpt2";
  std::ofstream(dir / "config.json") << c.dump();
  EXPECT_NE(load_error(dir).find("gpt2"), std::string::npos);
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, cli_exits_2_with_a_clear_message) {
  tiny_qwen m(14);
  const fs::path dir = temp_dir("cli");
  tensors t = m.ts;
  t.erase("model.norm.weight");
  m.write(dir, false, &t);
  std::ofstream(dir / "ids.txt") << "1 2 3 4 5 6 7 8 9";
  const std::string cmd = std::string(ATTNUM_BINARY) + " loss --model " + dir.string() + " --token-ids " +
                          (dir / "ids.txt").string() + " --tokens 4 --kernel fa3 --conditions plain 2>" +
                          (dir / "err.txt").string();
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream f(dir / "err.txt");
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("error: "), std::string::npos) << err;
  EXPECT_NE(err.find("model.norm.weight"), std::string::npos) << err;
  fs::remove_all(dir);
}
TEST(hf_checkpoint_test, llama_config_conventions) {
  const fs::path dir = temp_dir("llama");
  fs::create_directories(dir);
  nlohmann::json c = {{"model_type", "llama"},  {"hidden_size", 64},        {"intermediate_size", 128},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
                      {"vocab_size", 100},      {"bos_token_id", 7},        {"max_position_embeddings", 256}};
  std::ofstream(dir / "config.json") << c.dump();
  attnum::model::config cfg = attnum::model::read_hf_config((dir / "config.json").string());
  EXPECT_EQ(cfg.bos_id, 7);
  EXPECT_FALSE(cfg.qkv_bias);
  EXPECT_FALSE(cfg.tied_embeddings);
  EXPECT_EQ(cfg.d_head, 8);
  EXPECT_EQ(cfg.rope_theta, 10000.0f);
  EXPECT_EQ(cfg.rope, attnum::model::rope_style::rotate_half);
  c["attention_bias"] = true;
  c["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}};
  std::ofstream(dir / "config.json") << c.dump();
  EXPECT_THROW(attnum::model::read_hf_config((dir / "config.json").string()), attnum::error);
  c.erase("rope_scaling");
  std::ofstream(dir / "config.json") << c.dump();
  EXPECT_TRUE(attnum::model::read_hf_config((dir / "config.json").string()).qkv_bias);
  c["num_key_value_heads"] = 3;  // 8 heads not a multiple of 3
  std::ofstream(dir / "config.json") << c.dump();
  EXPECT_THROW(attnum::model::read_hf_config((dir / "config.json").string()), attnum::error);
  fs::remove_all(dir);
}
}  // namespace
