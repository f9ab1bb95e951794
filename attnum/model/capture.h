#pragma once
// Capture of post-RoPE Q, K, V (design.md "Files"): one safetensors file per (model, text) with
// layers.{l}.q [n_head, n_tok, d_head], layers.{l}.k and layers.{l}.v [n_head_kv, n_tok, d_head]
// in bf16, as the kernel sees them, and __metadata__ {format, model, text, n_tok, model_hash,
// text_hash, tokenizer, linear_precision, n_layers, n_head, n_head_kv, d_head, tool_version}, plus
// text_path (the file read) and text_window (a JSON string {"byte_start": B, "byte_end": E}: the
// bytes whose tokens the capture holds) where the writer knows them.
#include <map>
#include <span>
#include <string>
#include <vector>

#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"

namespace attnum::model {

/// Identifies what was captured (goes into __metadata__).
struct capture_source {
  std::string text_id;      ///< e.g. the text file's stem
  std::string text_hash;    ///< FNV-1a of the text bytes (or of the id file)
  std::string tokenizer;    ///< tokenizer provenance
  std::string text_path;    ///< the text file read (metadata text_path; empty: not recorded)
  std::string text_window;  ///< {"byte_start": B, "byte_end": E} (metadata text_window; empty: not recorded)
};

/// Runs the teacher-forced forward of `ids` (the model's native BF16 reference attention, linear
/// layers at precision p; weights already rounded when p is bf16) and writes the capture file
/// atomically to `path`.
void write_capture(const weights& w, std::span<const int> ids, const capture_source& src, linear_precision p,
                   const std::string& path);

/// The post-RoPE operands of every layer, [n_layers] each (a layer pipeline's rank fills only its
/// own layers; the others stay empty).
struct captured_qkv {
  std::vector<std::vector<float>> q, k, v;
};
/// The forward options of a capture (write_capture's): linear layers at p, the BF16 reference
/// attention, each layer's q, k, v copied into cap (sized for n_layers here).
forward_options capture_options(linear_precision p, captured_qkv& cap, int n_layers);
/// Writes the capture file of n tokens from every layer's operands in cap (write_capture's file).
void write_capture_file(const weights& w, int n, const captured_qkv& cap, const capture_source& src, linear_precision p,
                        const std::string& path);

/// Returns the file name of a capture: "<model>__<text>.safetensors" (unsafe characters -> '_').
std::string capture_file_name(const std::string& model_id, const std::string& text_id);

}  // namespace attnum::model
