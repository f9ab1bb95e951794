#include "attnum/model/hf_checkpoint.h"

#include <filesystem>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
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

int int_field_or(const nlohmann::json& j, const std::string& path, const char* key, int64_t lo, int64_t hi, int dflt) {
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
        if (!files_.count(file)) files_[file] = std::make_shared<const safetensors_file>(shard.string());
        where_[it.key()] = files_[file];
      }
    } else if (fs::exists(single)) {
      files_["model.safetensors"] = std::make_shared<const safetensors_file>(single.string());
      for (const auto& [name, t] : files_.begin()->second->tensors()) where_[name] = files_.begin()->second;
    } else {
      fail("{}: no model.safetensors or model.safetensors.index.json", dir.string());
    }
  }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  // Fails naming the first tensor that get() never read: the forward would ignore it.
  void check_all_read() const {
    for (const auto& [name, file] : where_)
      if (!read_.count(name))
        fail("{}: tensor {} is not read by the {} forward pass (unsupported checkpoint)", file->path(), name, family_);
  }
  std::string family_;
  // Returns the tensor as fp32 after checking its shape.
  std::vector<float> get(const std::string& name, std::vector<int64_t> shape) const {
    return view(name, std::move(shape)).to_float();
  }
  // Returns the tensor in place, as stored (the matrix keeps its shard mapped).
  matrix get_matrix(const std::string& name, std::vector<int64_t> shape) const {
    const tensor_view& t = view(name, std::move(shape));
    return matrix(t.dtype, t.data, size_t(t.numel()), where_.at(name));
  }

 private:
  const tensor_view& view(const std::string& name, std::vector<int64_t> shape) const {
    auto it = where_.find(name);
    if (it == where_.end()) fail("checkpoint: missing tensor {}", name);
    read_.insert(name);
    const safetensors_file& r = *it->second;
    const tensor_view* t = r.find(name);
    if (!t) fail("{}: missing tensor {} (listed in the index)", r.path(), name);
    if (t->shape != shape)
      fail("{}: tensor {} has shape [{}], expected [{}]", r.path(), name, fmt::join(t->shape, ", "),
           fmt::join(shape, ", "));
    // Weights are floating point; an integer tensor under a weight's name is a broken checkpoint.
    if (t->dtype != st_dtype::F32 && t->dtype != st_dtype::F16 && t->dtype != st_dtype::BF16)
      fail("{}: tensor {}: dtype {} not supported (expected F32, F16 or BF16)", r.path(), name, dtype_name(t->dtype));
    return *t;
  }

  std::map<std::string, std::shared_ptr<const safetensors_file>> files_;
  std::map<std::string, std::shared_ptr<const safetensors_file>> where_;
  mutable std::set<std::string> read_;
};

}  // namespace

namespace {

// A real number field: a JSON number (not a bool or a string), finite, within (lo, hi] or [lo, hi].
double number_field(const nlohmann::json& j, const std::string& where, const std::string& key, double lo, double hi,
                    bool lo_open) {
  const nlohmann::json& v = j[key];
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                  (lo_open ? v.get<double>() > lo : v.get<double>() >= lo) && v.get<double>() <= hi;
  if (!ok)
    fail("{}: {} = {}: expected a finite number in {}{}, {}]", where, key, io::json_brief(v), lo_open ? "(" : "[", lo,
         hi);
  return v.get<double>();
}

bool has(const nlohmann::json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// config.json fields that do not change the forward pass (metadata, generation and training-only
// settings: attention_dropout is inactive in evaluation).
const std::set<std::string> kHarmless = {"_name_or_path",
                                         "architectures",
                                         "torch_dtype",
                                         "dtype",
                                         "transformers_version",
                                         "bos_token_id",
                                         "eos_token_id",
                                         "pad_token_id",
                                         "unk_token_id",
                                         "use_cache",
                                         "initializer_range",
                                         "attention_dropout",
                                         "output_attentions",
                                         "output_hidden_states",
                                         "return_dict",
                                         "tokenizer_class",
                                         "model_type"};

// Fields each family reads (and this loader implements).
const std::map<std::string, std::set<std::string>> kUsed = {
    {"llama",
     {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
      "hidden_act", "attention_bias", "mlp_bias", "pretraining_tp"}},
    {"mistral",
     {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
      "hidden_act", "sliding_window"}},
    {"qwen2",
     {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
      "hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
    {"qwen3",
     {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
      "hidden_act", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
};

// RoPE frequencies of rope_scaling, as transformers' modeling_rope_utils computes them
// (docs/model.md cites each formula). Sets c.inv_freq and c.rope_attention_scale.
void apply_rope_scaling(const nlohmann::json& rs, const std::string& path, config& c) {
  const std::string where = path + ": rope_scaling";
  if (!rs.is_object()) fail("{}: expected an object or null, got {}", where, io::json_brief(rs));
  // "type" is the older spelling of "rope_type"; transformers accepts either.
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (!rs.contains(k)) continue;
    if (!rs[k].is_string()) fail("{}.{} = {}: expected a string", where, k, io::json_brief(rs[k]));
    if (!type.empty() && type != rs[k].get<std::string>())
      fail("{}: rope_type '{}' and type '{}' disagree", where, clip(type), clip(rs[k].get<std::string>()));
    type = rs[k].get<std::string>();
  }
  if (type.empty()) fail("{}: missing rope_type", where);
  static const std::map<std::string, std::set<std::string>> keys = {
      {"default", {}},
      {"linear", {"factor"}},
      {"dynamic", {"factor"}},
      {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
      {"yarn",
       {"factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
        "original_max_position_embeddings", "truncate"}}};
  const auto kt = keys.find(type);
  if (kt == keys.end())
    fail("{}: rope_type '{}' not supported (expected default, linear, dynamic, llama3 or yarn)", where, clip(type));
  for (auto it = rs.begin(); it != rs.end(); ++it)
    if (it.key() != "rope_type" && it.key() != "type" && !kt->second.count(it.key()))
      fail("{}: field {} = {} not supported for rope_type '{}'", where, clip(it.key()), io::json_brief(it.value()),
           type);
  auto num = [&](const char* key, double lo, double hi, bool lo_open) {
    if (!has(rs, key)) fail("{}: missing field {} (rope_type '{}')", where, key, type);
    return number_field(rs, where, key, lo, hi, lo_open);
  };
  auto num_or = [&](const char* key, double lo, double hi, bool lo_open, double dflt) {
    return has(rs, key) ? number_field(rs, where, key, lo, hi, lo_open) : dflt;
  };
  const int dim = c.d_head, half = dim / 2;
  const double base = c.rope_theta;
  // default: inv_freq[j] = 1 / base^(2j/dim)
  std::vector<double> inv(half);
  for (int j = 0; j < half; ++j) inv[j] = 1.0 / std::pow(base, double(2 * j) / dim);
  double attention = 1.0;
  if (type == "linear") {
    const double factor = num("factor", 0, 1e9, true);
    for (double& f : inv) f /= factor;
  } else if (type == "dynamic") {
    // Dynamic NTK: base * ((factor * L / max_pos) - (factor - 1))^(dim/(dim-2)) with
    // L = max(seq_len, max_position_embeddings); a forward never exceeds max_position_embeddings,
    // so L = max_position_embeddings and the frequencies are the default ones.
    num("factor", 0, 1e9, true);
  } else if (type == "llama3") {
    const double factor = num("factor", 0, 1e9, true), low = num("low_freq_factor", 0, 1e9, true),
                 high = num("high_freq_factor", 0, 1e9, true),
                 old_ctx = num("original_max_position_embeddings", 0, kMaxDim, true);
    if (!(high > low)) fail("{}: high_freq_factor {} must exceed low_freq_factor {}", where, high, low);
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    for (double& f : inv) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / factor;                      // low frequencies: interpolated
      } else if (wavelen >= high_wavelen) {  // medium: smooth blend
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }  // high frequencies unchanged
    }
  } else if (type == "yarn") {
    double factor = num("factor", 0, 1e9, true);
    double old_ctx = c.seq_len;
    if (has(rs, "original_max_position_embeddings")) {
      old_ctx = number_field(rs, where, "original_max_position_embeddings", 0, kMaxDim, true);
      // Newer transformers use max_position_embeddings / original_max_position_embeddings as the
      // factor, older ones the factor field: only a config where both agree means one thing.
      if (std::fabs(c.seq_len / old_ctx - factor) > 1e-12 * factor)
        fail(
            "{}: factor {} differs from max_position_embeddings / original_max_position_embeddings = {} / {}; "
            "transformers versions disagree on which one applies",
            where, factor, c.seq_len, old_ctx);
      factor = c.seq_len / old_ctx;
    }
    auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (has(rs, "attention_factor")) {
      attention = num("attention_factor", 0, 1e9, true);
    } else {
      const double ms = num_or("mscale", 0, 1e9, false, 0), ms_all = num_or("mscale_all_dim", 0, 1e9, false, 0);
      attention = ms != 0 && ms_all != 0 ? mscale_of(factor, ms) / mscale_of(factor, ms_all) : mscale_of(factor, 1);
    }
    double beta_fast = num_or("beta_fast", 0, 1e9, false, 0), beta_slow = num_or("beta_slow", 0, 1e9, false, 0);
    if (beta_fast == 0) beta_fast = 32;  // transformers: `get("beta_fast") or 32`
    if (beta_slow == 0) beta_slow = 1;
    bool truncate = true;
    if (has(rs, "truncate")) {
      if (!rs["truncate"].is_boolean())
        fail("{}: truncate = {}: expected true or false", where, io::json_brief(rs["truncate"]));
      truncate = rs["truncate"].get<bool>();
    }
    auto correction_dim = [&](double rotations) {
      return dim * std::log(old_ctx / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    double lo = correction_dim(beta_fast), hi = correction_dim(beta_slow);
    if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0), hi = std::min(hi, double(dim - 1));
    if (lo == hi) hi += 0.001;
    for (int j = 0; j < half; ++j) {
      const double ramp = std::clamp((j - lo) / (hi - lo), 0.0, 1.0);
      const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
      const double pos = std::pow(base, double(2 * j) / dim);
      inv[j] = 1.0 / (factor * pos) * (1 - extrapolation) + 1.0 / pos * extrapolation;
    }
  }
  c.inv_freq.assign(inv.begin(), inv.end());
  c.rope_attention_scale = float(attention);
}

// Per layer sliding windows of the qwen2/qwen3 and mistral configs (0: full causal).
void read_sliding_window(const nlohmann::json& j, const std::string& path, config& c) {
  c.sliding_window.assign(c.n_layers, 0);
  if (c.family == "llama") return;
  const int window = has(j, "sliding_window") ? int_field(j, path, "sliding_window", 1, kMaxDim) : 0;
  if (c.family == "mistral") {  // every layer, when set
    std::fill(c.sliding_window.begin(), c.sliding_window.end(), window);
    return;
  }
  // qwen2 / qwen3: layers i >= max_window_layers, or those layer_types names, when
  // use_sliding_window is true (otherwise transformers sets sliding_window to None).
  const bool use = field_or<bool>(j, path, "use_sliding_window", false);
  std::vector<bool> sliding(c.n_layers, false);
  if (has(j, "layer_types")) {
    const nlohmann::json& t = j["layer_types"];
    if (!t.is_array() || t.size() != size_t(c.n_layers))
      fail("{}: layer_types = {}: expected an array of {} strings", path, io::json_brief(t), c.n_layers);
    for (int l = 0; l < c.n_layers; ++l) {
      if (t[l] != "full_attention" && t[l] != "sliding_attention")
        fail("{}: layer_types[{}] = {}: expected \"full_attention\" or \"sliding_attention\"", path, l,
             io::json_brief(t[l]));
      sliding[l] = t[l] == "sliding_attention";
    }
  } else {
    const int first = int_field_or(j, path, "max_window_layers", 0, kMaxDim, 28);
    for (int l = first; l < c.n_layers; ++l) sliding[l] = true;
  }
  if (!use) {
    if (has(j, "layer_types") && std::count(sliding.begin(), sliding.end(), true))
      fail("{}: layer_types names sliding_attention layers but use_sliding_window is false", path);
    return;
  }
  if (window == 0 && std::count(sliding.begin(), sliding.end(), true))
    fail("{}: use_sliding_window is true but sliding_window is missing", path);
  for (int l = 0; l < c.n_layers; ++l) c.sliding_window[l] = sliding[l] ? window : 0;
}

}  // namespace

config read_hf_config(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  config c;
  c.family = field<std::string>(j, path, "model_type");
  const auto used = kUsed.find(c.family);
  if (used == kUsed.end())
    fail("{}: model_type '{}' not supported (expected llama, mistral, qwen2 or qwen3)", path, clip(c.family));
  // Every field is either read below or known not to change the forward pass.
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kHarmless.count(it.key()) && !used->second.count(it.key()))
      fail("{}: field {} = {} is not supported for model_type '{}' (it may change the forward pass)", path,
           clip(it.key()), io::json_brief(it.value()), c.family);
  c.dim = int_field(j, path, "hidden_size", 1, kMaxDim);
  c.hidden_dim = int_field(j, path, "intermediate_size", 1, kMaxDim);
  c.n_layers = int_field(j, path, "num_hidden_layers", 1, kMaxDim);
  c.n_head = int_field(j, path, "num_attention_heads", 1, kMaxDim);
  c.n_head_kv = int_field_or(j, path, "num_key_value_heads", 1, kMaxDim, c.n_head);
  c.vocab_size = int_field(j, path, "vocab_size", 1, kMaxDim);
  c.seq_len = int_field_or(j, path, "max_position_embeddings", 1, kMaxDim, 2048);
  c.d_head = int_field_or(j, path, "head_dim", 1, kMaxDim, c.dim / c.n_head);
  c.norm_eps = has(j, "rms_norm_eps") ? float(number_field(j, path, "rms_norm_eps", 0, 1, true)) : 1e-6f;
  c.rope_theta = has(j, "rope_theta") ? float(number_field(j, path, "rope_theta", 0, 1e30, true)) : 10000.0f;
  c.rope = rope_style::rotate_half;  // HF's rotate_half convention for every family
  c.tied_embeddings = field_or<bool>(j, path, "tie_word_embeddings", false);
  const bool attention_bias = field_or<bool>(j, path, "attention_bias", false);
  // qwen2 always has q/k/v biases (and none on o_proj); llama and qwen3 have all four with
  // attention_bias; mistral has none.
  c.qkv_bias = c.family == "qwen2" || attention_bias;
  c.o_bias = attention_bias;
  c.mlp_bias = field_or<bool>(j, path, "mlp_bias", false);
  c.qk_norm = c.family == "qwen3";
  if (has(j, "pretraining_tp") && int_field(j, path, "pretraining_tp", 1, kMaxDim) != 1)
    fail("{}: pretraining_tp = {} not supported (expected 1)", path, io::json_brief(j["pretraining_tp"]));
  // Qwen tokenizers add no BOS; llama and mistral tokenizers prepend bos_token_id.
  const bool bos = c.family == "llama" || c.family == "mistral";
  c.bos_id = bos ? int_field_or(j, path, "bos_token_id", 0, c.vocab_size - 1, 1) : -1;
  if (field_or<std::string>(j, path, "hidden_act", "silu") != "silu")
    fail("{}: hidden_act '{}' not supported (expected silu)", path, clip(j["hidden_act"].get<std::string>()));
  if (c.d_head % 2 != 0) fail("{}: head_dim {} must be even for RoPE", path, c.d_head);
  if (has(j, "rope_scaling")) apply_rope_scaling(j["rope_scaling"], path, c);
  read_sliding_window(j, path, c);
  validate(c, path);
  return c;
}

weights load_hf_checkpoint(const std::string& dir_path) {
  const fs::path dir(dir_path);
  weights w;
  w.cfg = read_hf_config((dir / "config.json").string());
  const config& c = w.cfg;
  tensor_set ts(dir);
  ts.family_ = c.family;
  const int64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, hd = int64_t(c.n_head) * c.d_head,
                kv = int64_t(c.n_head_kv) * c.d_head;
  w.tok_embeddings = ts.get_matrix("model.embed_tokens.weight", {V, D});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    layer_weights L;
    L.attn_norm = ts.get(p + "input_layernorm.weight", {D});
    L.wq = ts.get_matrix(p + "self_attn.q_proj.weight", {hd, D});
    L.wk = ts.get_matrix(p + "self_attn.k_proj.weight", {kv, D});
    L.wv = ts.get_matrix(p + "self_attn.v_proj.weight", {kv, D});
    if (c.qkv_bias) {
      L.bq = ts.get(p + "self_attn.q_proj.bias", {hd});
      L.bk = ts.get(p + "self_attn.k_proj.bias", {kv});
      L.bv = ts.get(p + "self_attn.v_proj.bias", {kv});
    }
    if (c.qk_norm) {
      L.q_norm = ts.get(p + "self_attn.q_norm.weight", {c.d_head});
      L.k_norm = ts.get(p + "self_attn.k_norm.weight", {c.d_head});
    }
    L.wo = ts.get_matrix(p + "self_attn.o_proj.weight", {D, hd});
    if (c.o_bias) L.bo = ts.get(p + "self_attn.o_proj.bias", {D});
    L.ffn_norm = ts.get(p + "post_attention_layernorm.weight", {D});
    L.w1 = ts.get_matrix(p + "mlp.gate_proj.weight", {H, D});
    L.w3 = ts.get_matrix(p + "mlp.up_proj.weight", {H, D});
    L.w2 = ts.get_matrix(p + "mlp.down_proj.weight", {D, H});
    if (c.mlp_bias) {
      L.b1 = ts.get(p + "mlp.gate_proj.bias", {H});
      L.b3 = ts.get(p + "mlp.up_proj.bias", {H});
      L.b2 = ts.get(p + "mlp.down_proj.bias", {D});
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = ts.get("model.norm.weight", {D});
  if (!c.tied_embeddings) w.classifier = ts.get_matrix("lm_head.weight", {V, D});
  // transformers ties lm_head to the embedding table; a stored copy must be that table.
  if (c.tied_embeddings && ts.has("lm_head.weight") && ts.get_matrix("lm_head.weight", {V, D}) != w.tok_embeddings)
    fail("{}: tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight", dir_path);
  ts.check_all_read();
  w.id = fs::absolute(dir).lexically_normal().filename().string();
  if (w.id.empty()) w.id = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  // Provenance: hash of config.json only (hashing gigabytes of weights per run is too slow).
  const std::string text = read_file(dir / "config.json");
  w.source_hash = fnv1a_hex(text.data(), text.size());
  return w;
}

}  // namespace attnum::model
