#pragma once
// Reference logits computed once and reused (`attnum loss --save-reference FILE`, then
// `--reference-file FILE`; llama.cpp's --kl-divergence-base): the fp32 logits of the reference
// forward of every window, stored exactly, so that a run reading them gives the numbers a run
// computing them gives, bit for bit (on the same CPU: docs/model.md, "Where results depend on
// the CPU").
//
// The file is a safetensors file. Window k (0, 1, ...) is two tensors: "ids.k" I32 [N], the
// window's input ids, and "logits.k" F32 [N, vocab]. Its __metadata__ holds format
// "attnum-reference-logits", format_version "1", tool_version, model (the model's id),
// weights_fingerprint (model/weights.h `fingerprint`), reference ("bf16" or "fp64"),
// linear_precision, n_tokens, vocab and windows (the count). A run finds each of its windows by
// its input ids, so one file serves any subset or order of the windows it holds (shards, MPI
// ranks, fewer texts).
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnum/io/safetensors.h"
#include "attnum/model/weights.h"

namespace attnum::loss {

struct loss_params;

/// A reference-logits file, mapped and checked against a run.
class reference_logits {
 public:
  /// Maps `path` and checks it against the run: its format, then the model (fingerprint of the
  /// weights as the run uses them), the reference attention, the linear precision, N and the
  /// vocabulary. Throws attnum::error naming the file and the field that differs (stored ->
  /// this run).
  static std::shared_ptr<const reference_logits> open(const std::string& path, const model::weights& w,
                                                      const loss_params& p);

  /// The stored logits [n_tokens * vocab] of the window whose input ids are `inputs`. Throws
  /// attnum::error naming the file and `what` (e.g. "source 0 window 2") when it holds none.
  const float* find(std::span<const int> inputs, const std::string& what) const;

  const std::string& path() const { return file_.path(); }
  /// Names the file's content for checkpoints and shard files: FNV-1a 64 of its metadata and of
  /// every window's input ids (16 hex digits).
  const std::string& id() const { return id_; }
  int windows() const { return int(ids_.size()); }

 private:
  explicit reference_logits(const std::string& path);
  io::safetensors_file file_;
  std::vector<const int32_t*> ids_;
  std::vector<const float*> logits_;
  std::unordered_multimap<uint64_t, int> by_hash_;  ///< FNV-1a 64 of a window's ids -> k
  int n_tokens_ = 0;
  std::string id_;
};

/// Computes the reference forward of every window of `p` (sources in order, windows in order)
/// and writes them to `path` atomically, a window at a time (a file of windows x N x vocab x 4
/// bytes; memory: one window's logits). Refuses non-finite logits. `progress` draws the progress
/// line. Returns the number of windows written.
int save_reference_logits(const std::string& path, const model::weights& w, const loss_params& p, bool progress);

}  // namespace attnum::loss
