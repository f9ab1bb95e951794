#include "attnum/model/hf_checkpoint.h"

#include <filesystem>
#include <map>
#include <memory>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/io/safetensors.h"

namespace attnum::model {
namespace fs = std::filesystem;
namespace {
using io::dtype_name;
using io::read_json_file;
using io::safetensors_file;
using io::st_dtype;
using io::tensor_view;

template <typename T>
T field(const nlohmann::json& j, const std::string& path, const char* key) {
  if (!j.contains(key) || j[key].is_null()) fail("{}: missing field {}", path, key);
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: field {} has the wrong type ({})", path, key, io::json_brief(j[key]));
  }
}

// An integer field: an exact JSON integer (not 16.5, not true, not 1e30) in [lo, hi].
int int_field(const nlohmann::json& j, const std::string& path, const char* key, int64_t lo, int64_t hi) {
  if (!j.contains(key) || j[key].is_null()) fail("{}: missing field {}", path, key);
  const nlohmann::json& v = j[key];
  const bool in_range = v.is_number_integer() &&
                        (v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi) && int64_t(v.get<uint64_t>()) >= lo
                                                : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
  if (!in_range) fail("{}: field {} = {}: expected an integer in [{}, {}]", path, key, io::json_brief(v), lo, hi);
  return static_cast<int>(v.get<int64_t>());
}

int int_field_or(const nlohmann::json& j, const std::string& path, const char* key, int64_t lo, int64_t hi,
                 int dflt) {
  return j.contains(key) && !j[key].is_null() ? int_field(j, path, key, lo, hi) : dflt;
}

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;  // every count is an int

template <typename T>
T field_or(const nlohmann::json& j, const std::string& path, const char* key, T dflt) {
  return j.contains(key) && !j[key].is_null() ? field<T>(j, path, key) : dflt;
}

// The tensors of a checkpoint: name -> the shard that holds it.
class tensor_set {
 public:
  explicit tensor_set(const fs::path& dir) {
    const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
      const nlohmann::json j = read_json_file(index.string());
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        fail("{}: missing object weight_map", index.string());
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it->is_string()) fail("{}: weight_map[{}] is not a file name", index.string(), it.key());
        const std::string file = it->get<std::string>();
        // A shard name must stay inside the model folder (never "../x" or "/etc/x").
        const fs::path shard = path_inside(dir, file, fmt::format("{}: weight_map[{}]", index.string(), it.key()));
        if (!files_.count(file)) files_[file] = std::make_unique<safetensors_file>(shard.string());
        where_[it.key()] = files_[file].get();
      }
    } else if (fs::exists(single)) {
      files_["model.safetensors"] = std::make_unique<safetensors_file>(single.string());
      for (const auto& [name, t] : files_.begin()->second->tensors()) where_[name] = files_.begin()->second.get();
    } else {
      fail("{}: no model.safetensors or model.safetensors.index.json", dir.string());
    }
  }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  // Returns the tensor as fp32 after checking its shape.
  std::vector<float> get(const std::string& name, std::vector<int64_t> shape) const {
    auto it = where_.find(name);
    if (it == where_.end()) fail("checkpoint: missing tensor {}", name);
    const safetensors_file& r = *it->second;
    const tensor_view* t = r.find(name);
    if (!t) fail("{}: missing tensor {} (listed in the index)", r.path(), name);
    if (t->shape != shape)
      fail("{}: tensor {} has shape [{}], expected [{}]", r.path(), name, fmt::join(t->shape, ", "),
           fmt::join(shape, ", "));
    // Weights are floating point; an integer tensor under a weight's name is a broken checkpoint.
    if (t->dtype != st_dtype::F32 && t->dtype != st_dtype::F16 && t->dtype != st_dtype::BF16)
      fail("{}: tensor {}: dtype {} not supported (expected F32, F16 or BF16)", r.path(), name,
           dtype_name(t->dtype));
    return t->to_float();
  }

 private:
  std::map<std::string, std::unique_ptr<safetensors_file>> files_;
  std::map<std::string, const safetensors_file*> where_;
};

}  // namespace

config read_hf_config(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  config c;
  c.family = field<std::string>(j, path, "model_type");
  if (c.family != "qwen2" && c.family != "llama")
    fail("{}: model_type '{}' not supported (expected qwen2 or llama)", path, c.family);
  c.dim = int_field(j, path, "hidden_size", 1, kMaxDim);
  c.hidden_dim = int_field(j, path, "intermediate_size", 1, kMaxDim);
  c.n_layers = int_field(j, path, "num_hidden_layers", 1, kMaxDim);
  c.n_head = int_field(j, path, "num_attention_heads", 1, kMaxDim);
  c.n_head_kv = int_field_or(j, path, "num_key_value_heads", 1, kMaxDim, c.n_head);
  c.vocab_size = int_field(j, path, "vocab_size", 1, kMaxDim);
  c.seq_len = int_field_or(j, path, "max_position_embeddings", 1, kMaxDim, 2048);
  c.d_head = int_field_or(j, path, "head_dim", 1, kMaxDim, c.dim / c.n_head);
  c.norm_eps = field_or<float>(j, path, "rms_norm_eps", 1e-6f);
  c.rope_theta = field_or<float>(j, path, "rope_theta", 10000.0f);
  c.rope = rope_style::rotate_half;  // HF's rotate_half convention for both families
  c.tied_embeddings = field_or<bool>(j, path, "tie_word_embeddings", false);
  // qwen2 always has q/k/v biases; llama has them with attention_bias.
  c.qkv_bias = c.family == "qwen2" || field_or<bool>(j, path, "attention_bias", false);
  // Qwen2 tokenizers add no BOS; llama tokenizers prepend bos_token_id.
  c.bos_id = c.family == "llama" ? int_field_or(j, path, "bos_token_id", 0, c.vocab_size - 1, 1) : -1;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail("{}: rope_scaling {} is not supported", path, io::json_brief(j["rope_scaling"]));
  if (field_or<std::string>(j, path, "hidden_act", "silu") != "silu")
    fail("{}: hidden_act '{}' not supported (expected silu)", path, j["hidden_act"].get<std::string>());
  validate(c, path);
  return c;
}

weights load_hf_checkpoint(const std::string& dir_path) {
  const fs::path dir(dir_path);
  weights w;
  w.cfg = read_hf_config((dir / "config.json").string());
  const config& c = w.cfg;
  const tensor_set ts(dir);
  const int64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, hd = int64_t(c.n_head) * c.d_head,
                kv = int64_t(c.n_head_kv) * c.d_head;
  w.tok_embeddings = ts.get("model.embed_tokens.weight", {V, D});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    layer_weights L;
    L.attn_norm = ts.get(p + "input_layernorm.weight", {D});
    L.wq = ts.get(p + "self_attn.q_proj.weight", {hd, D});
    L.wk = ts.get(p + "self_attn.k_proj.weight", {kv, D});
    L.wv = ts.get(p + "self_attn.v_proj.weight", {kv, D});
    if (c.qkv_bias) {
      L.bq = ts.get(p + "self_attn.q_proj.bias", {hd});
      L.bk = ts.get(p + "self_attn.k_proj.bias", {kv});
      L.bv = ts.get(p + "self_attn.v_proj.bias", {kv});
    }
    L.wo = ts.get(p + "self_attn.o_proj.weight", {D, hd});
    L.ffn_norm = ts.get(p + "post_attention_layernorm.weight", {D});
    L.w1 = ts.get(p + "mlp.gate_proj.weight", {H, D});
    L.w3 = ts.get(p + "mlp.up_proj.weight", {H, D});
    L.w2 = ts.get(p + "mlp.down_proj.weight", {D, H});
    w.layers.push_back(std::move(L));
  }
  w.final_norm = ts.get("model.norm.weight", {D});
  if (!c.tied_embeddings) w.classifier = ts.get("lm_head.weight", {V, D});
  w.id = fs::absolute(dir).lexically_normal().filename().string();
  if (w.id.empty()) w.id = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  // Provenance: hash of config.json only (hashing gigabytes of weights per run is too slow).
  const std::string text = read_file(dir / "config.json");
  w.source_hash = fnv1a_hex(text.data(), text.size());
  return w;
}

}  // namespace attnum::model
