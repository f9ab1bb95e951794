#include "attnum/pipeline/capture_texts.h"

#include <filesystem>
#include <fmt/core.h>
#include <memory>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/progress.h"
#include "attnum/model/capture.h"
#include "attnum/model/loader.h"
#include "attnum/scaleout/layers.h"
#include "attnum/scaleout/world.h"

namespace attnum::pipeline {
namespace {
constexpr int kCaptureTag = 102;
}  // namespace

model::captured_qkv capture_pipelined(const model::weights& w, std::span<const int> ids, model::linear_precision p) {
  const auto& c = w.cfg;
  const auto& me = scaleout::here();
  model::captured_qkv cap;
  scaleout::forward_pipeline(w, ids, model::capture_options(p, cap, c.n_layers), false);
  const size_t n = ids.size(), nq = size_t(c.n_head) * n * c.d_head, nk = size_t(c.n_head_kv) * n * c.d_head;
  if (me.size == 1) return cap;
  if (me.rank != 0) {
    const model::layer_slice s = scaleout::split_layers(c.n_layers, me.rank, me.size);
    for (int l = s.begin; l < s.end; ++l) {
      scaleout::send_floats(cap.q[l].data(), nq, 0, kCaptureTag);
      scaleout::send_floats(cap.k[l].data(), nk, 0, kCaptureTag);
      scaleout::send_floats(cap.v[l].data(), nk, 0, kCaptureTag);
    }
    return cap;
  }
  for (int r = 1; r < me.size; ++r) {
    const model::layer_slice s = scaleout::split_layers(c.n_layers, r, me.size);
    for (int l = s.begin; l < s.end; ++l) {
      cap.q[l].resize(nq), cap.k[l].resize(nk), cap.v[l].resize(nk);
      scaleout::recv_floats(cap.q[l].data(), nq, r, kCaptureTag);
      scaleout::recv_floats(cap.k[l].data(), nk, r, kCaptureTag);
      scaleout::recv_floats(cap.v[l].data(), nk, r, kCaptureTag);
    }
  }
  return cap;
}

namespace {
std::string file_hash(const std::string& path) {
  const std::string s = read_file(path);
  return model::fnv1a_hex(s.data(), s.size());
}
}  // namespace

std::vector<std::string> capture_texts(const capture_request& o) {
  using namespace attnum::model;
  namespace fs = std::filesystem;
  if (o.texts.empty() && o.token_ids.empty()) fail("capture: give --text FILE... or --token-ids FILE...");
  {  // --out never equal to or inside what the run reads
    std::vector<std::filesystem::path> in{o.model, o.tokenizer};
    in.insert(in.end(), o.texts.begin(), o.texts.end());
    in.insert(in.end(), o.token_ids.begin(), o.token_ids.end());
    require_out_outside_inputs(o.out, in);
  }
  // Under --pipeline-layers each rank reads only its layers (and rank 0 the embeddings); the
  // classifier is never needed (a capture stops at the last layer's attention operands).
  weights w = o.pipeline_layers ? scaleout::load_my_layers(o.model, false) : load_model(o.model);
  const bool root = scaleout::here().root();
  if (o.tokens <= 0) fail("--tokens must be positive, got {}", o.tokens);
  if (o.tokens > w.cfg.seq_len) fail("--tokens {} is larger than the model's context {}", o.tokens, w.cfg.seq_len);
  const linear_precision p = resolve_linear_precision(o.linear, w);
  std::unique_ptr<tokenizer> tok;
  if (!o.texts.empty()) tok = load_tokenizer(o.model, w, o.tokenizer);
  // Read and check every input before writing anything.
  struct job {
    std::vector<int> ids;
    capture_source src;
  };
  std::vector<job> jobs;
  for (const auto& f : o.texts)
    jobs.push_back({tokenize_file(f, *tok, w), {fs::path(f).stem().string(), file_hash(f), tok->source(), "", ""}});
  for (const auto& f : o.token_ids)
    jobs.push_back({read_token_ids(f), {fs::path(f).stem().string(), file_hash(f), "token-ids", "", ""}});
  for (auto& j : jobs) {
    if (static_cast<int>(j.ids.size()) < o.tokens)
      fail("{}: {} tokens, --tokens asks for {}", j.src.text_id, j.ids.size(), o.tokens);
    j.ids.resize(o.tokens);
  }
  // Refused up front when the weights and the capture's activations cannot fit (docs/model.md).
  check_memory(w, p, capture_activation_bytes(w.cfg, o.tokens),
               fmt::format("capture: {} with {} tokens", w.id, o.tokens));
  prepare_weights(w, p);
  if (o.pipeline_layers) {  // only rank 0 touches the output folder
    std::vector<std::string> written;
    std::unique_ptr<output_guard> guard;
    if (root) {
      guard = std::make_unique<output_guard>(o.out);
      begin_output_dir(o.out);
    }
    progress bar("capture", static_cast<int64_t>(jobs.size()), "texts", o.progress && root,
                 "one text through the model's layers on every rank, its q, k, v saved");
    for (const job& j : jobs) {
      const captured_qkv cap = capture_pipelined(w, j.ids, p);
      if (root) {
        written.push_back((fs::path(o.out) / capture_file_name(w.id, j.src.text_id)).string());
        write_capture_file(w, static_cast<int>(j.ids.size()), cap, j.src, p, written.back());
      }
      bar.add();
    }
    if (guard) guard->commit();
    return written;
  }
  output_guard guard(o.out);  // docs/reliability.md: a failed run leaves --out as it was
  begin_output_dir(o.out);
  std::vector<std::string> written;
  {
    progress bar("capture", static_cast<int64_t>(jobs.size()), "texts", o.progress,
                 "one text through the model, its q, k, v saved");
    for (const job& j : jobs) {
      written.push_back((fs::path(o.out) / capture_file_name(w.id, j.src.text_id)).string());
      write_capture(w, j.ids, j.src, p, written.back());
      bar.add();
    }
  }
  // No completion marker here: users pass the folder's files as --captures DIR/* (each file is
  // written atomically and read whole, so a killed capture leaves no half file).
  guard.commit();
  return written;
}

}  // namespace attnum::pipeline
