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

struct tiny_qwen {
  int D = 32, H = 48, L = 2, nh = 4, nkv = 2, dh = 8, V = 40;
  double eps = 1e-6, theta = 10000.0;
  tensors ts;
  explicit tiny_qwen(unsigned seed) {
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
      add(p + "self_attn.q_proj.bias", {nh * dh}, 1, dt);
      add(p + "self_attn.k_proj.bias", {nkv * dh}, 1, dt);
      add(p + "self_attn.v_proj.bias", {nkv * dh}, 1, dt);
      add(p + "self_attn.o_proj.weight", {D, nh * dh}, 1, dt);
      add(p + "mlp.gate_proj.weight", {H, D}, 1, dt);
      add(p + "mlp.up_proj.weight", {H, D}, 1, dt);
      add(p + "mlp.down_proj.weight", {D, H}, 1, dt);
    }
    add("model.norm.weight", {D}, 0, "F32");
    for (auto* n : {"model.norm.weight"}) for (double& x : ts[n].data) x += 1.0;
  }
  nlohmann::json config() const {
    return {{"model_type", "qwen2"}, {"hidden_size", D}, {"intermediate_size", H},
            {"num_hidden_layers", L}, {"num_attention_heads", nh}, {"num_key_value_heads", nkv},
            {"rms_norm_eps", eps}, {"rope_theta", theta}, {"vocab_size", V},
            {"tie_word_embeddings", true}, {"max_position_embeddings", 64},
            {"hidden_act", "silu"}, {"rope_scaling", nullptr}};
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

  // Plain loops in double, written from the Hugging Face Qwen2 modeling code's definitions.
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
    auto rmsnorm = [&](const vec& x, const vec& w) {
      double ss = 0;
      for (double v : x) ss += v * v;
      const double r = 1.0 / std::sqrt(ss / x.size() + eps);
      vec y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * r;
      return y;
    };
    auto rope = [&](vec& x, int heads, int pos) {  // rotate_half: pairs (i, i + d/2)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < dh / 2; ++i) {
          const double a = pos * std::pow(theta, -2.0 * i / dh);
          double& x1 = x[h * dh + i];
          double& x2 = x[h * dh + i + dh / 2];
          const double y1 = x1 * std::cos(a) - x2 * std::sin(a), y2 = x2 * std::cos(a) + x1 * std::sin(a);
          x1 = y1, x2 = y2;
        }
    };
    std::vector<vec> x(n);
    for (int t = 0; t < n; ++t) x[t] = vec(W("model.embed_tokens.weight").begin() + ids[t] * D,
                                           W("model.embed_tokens.weight").begin() + (ids[t] + 1) * D);
    for (int l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<vec> q(n), k(n), v(n);
      for (int t = 0; t < n; ++t) {
        const vec h = rmsnorm(x[t], W(p + "input_layernorm.weight"));
        q[t] = matvec(W(p + "self_attn.q_proj.weight"), h, nh * dh);
        k[t] = matvec(W(p + "self_attn.k_proj.weight"), h, nkv * dh);
        v[t] = matvec(W(p + "self_attn.v_proj.weight"), h, nkv * dh);
        for (int i = 0; i < nh * dh; ++i) q[t][i] += W(p + "self_attn.q_proj.bias")[i];
        for (int i = 0; i < nkv * dh; ++i) k[t][i] += W(p + "self_attn.k_proj.bias")[i], v[t][i] += W(p + "self_attn.v_proj.bias")[i];
        rope(q[t], nh, t), rope(k[t], nkv, t);
      }
      for (int t = 0; t < n; ++t) {
        vec o(nh * dh, 0.0);
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
            for (int c = 0; c < dh; ++c) o[h * dh + c] += s[j] / z * v[j][g * dh + c];
        }
        const vec a = matvec(W(p + "self_attn.o_proj.weight"), o, D);
        for (int i = 0; i < D; ++i) x[t][i] += a[i];
        const vec h2 = rmsnorm(x[t], W(p + "post_attention_layernorm.weight"));
        vec g = matvec(W(p + "mlp.gate_proj.weight"), h2, H), u = matvec(W(p + "mlp.up_proj.weight"), h2, H);
        for (int i = 0; i < H; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const vec d = matvec(W(p + "mlp.down_proj.weight"), g, D);
        for (int i = 0; i < D; ++i) x[t][i] += d[i];
      }
    }
    std::vector<vec> logits(n);
    for (int t = 0; t < n; ++t)
      logits[t] = matvec(W("model.embed_tokens.weight"), rmsnorm(x[t], W("model.norm.weight")), V);
    return logits;
  }
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("attnum_hf_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
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

TEST(hf_checkpoint_test, single_file_forward_matches_plain_loops) {
  tiny_qwen m(11);
  const fs::path dir = temp_dir("single");
  m.write(dir, false);
  expect_matches_plain_loops(m, dir);
  fs::remove_all(dir);
}

TEST(hf_checkpoint_test, sharded_index_forward_matches_plain_loops) {
  tiny_qwen m(12);
  const fs::path dir = temp_dir("sharded");
  m.write(dir, true);
  expect_matches_plain_loops(m, dir);
  fs::remove_all(dir);
}

std::string load_error(const fs::path& dir) {
  try {
    attnum::model::load_model(dir.string());
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "(no error)";
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
  nlohmann::json c = {{"model_type", "llama"}, {"hidden_size", 64}, {"intermediate_size", 128},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
                      {"vocab_size", 100}, {"bos_token_id", 7}, {"max_position_embeddings", 256}};
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
