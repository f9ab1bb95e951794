#include "attnum/model/capture.h"

#include <fmt/format.h>

#include "attnum/core/version.h"
#include "attnum/model/hooks.h"
#include "attnum/io/safetensors.h"

namespace attnum::model {

forward_options capture_options(linear_precision p, captured_qkv& cap, int n_layers) {
  cap.q.assign(n_layers, {}), cap.k.assign(n_layers, {}), cap.v.assign(n_layers, {});
  forward_options opt;
  opt.linear = p;
  opt.attention = reference_attention("bf16");
  opt.on_qkv = [&cap](int l, const qkv_view& x) {
    const size_t nq = size_t(x.n_head) * x.n_tok * x.d_head, nk = size_t(x.n_head_kv) * x.n_tok * x.d_head;
    cap.q[l].assign(x.q, x.q + nq), cap.k[l].assign(x.k, x.k + nk), cap.v[l].assign(x.v, x.v + nk);
  };
  return opt;
}

void write_capture_file(const weights& w, int n, const captured_qkv& cap, const capture_source& src, linear_precision p,
                        const std::string& path) {
  const config& c = w.cfg;
  // Copies of each layer's operands, stored in BF16, or in F16 under fp16 linear precision, where
  // they are float16 values (the rounding (RNE) happens in io::write_safetensors; in bf16 and fp16
  // mode they are on the grid already).
  const io::st_dtype stored = p == linear_precision::fp16 ? io::st_dtype::F16 : io::st_dtype::BF16;
  std::vector<io::tensor_out> out;
  for (int l = 0; l < c.n_layers; ++l) {
    out.push_back({fmt::format("layers.{}.q", l), {c.n_head, n, c.d_head}, cap.q[l].data(), stored});
    out.push_back({fmt::format("layers.{}.k", l), {c.n_head_kv, n, c.d_head}, cap.k[l].data(), stored});
    out.push_back({fmt::format("layers.{}.v", l), {c.n_head_kv, n, c.d_head}, cap.v[l].data(), stored});
  }
  std::map<std::string, std::string> meta = {{"format", "attnum-capture-1"},
                                             {"model", w.id},
                                             {"model_hash", w.source_hash},
                                             {"text", src.text_id},
                                             {"text_hash", src.text_hash},
                                             {"tokenizer", src.tokenizer},
                                             {"n_tok", std::to_string(n)},
                                             {"linear_precision", std::string(name(p))},
                                             {"attention", "bf16"},
                                             {"n_layers", std::to_string(c.n_layers)},
                                             {"n_head", std::to_string(c.n_head)},
                                             {"n_head_kv", std::to_string(c.n_head_kv)},
                                             {"d_head", std::to_string(c.d_head)},
                                             {"tool_version", std::string(tool_version())}};
  if (!src.text_path.empty()) meta["text_path"] = src.text_path;
  if (!src.text_window.empty()) meta["text_window"] = src.text_window;
  io::write_safetensors(path, out, meta);
}

void write_capture(const weights& w, std::span<const int> ids, const capture_source& src, linear_precision p,
                   const std::string& path) {
  captured_qkv cap;
  forward(w, ids, capture_options(p, cap, w.cfg.n_layers));
  write_capture_file(w, static_cast<int>(ids.size()), cap, src, p, path);
}

std::string capture_file_name(const std::string& model_id, const std::string& text_id) {
  std::string s = model_id + "__" + text_id;
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) ch = '_';
  return s + ".safetensors";
}

}  // namespace attnum::model
