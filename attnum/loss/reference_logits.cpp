#include "attnum/loss/reference_logits.h"

#include <cmath>
#include <fmt/format.h>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/hash.h"
#include "attnum/core/progress.h"
#include "attnum/core/version.h"
#include "attnum/loss/compute.h"
#include "attnum/loss/plan.h"

namespace attnum::loss {
namespace {

constexpr const char* kFormat = "attnum-reference-logits";
constexpr const char* kFormatVersion = "1";

uint64_t ids_hash(std::span<const int> ids) {
  static_assert(sizeof(int) == sizeof(int32_t));
  return core::fnv1a64(ids.data(), ids.size_bytes());
}

// What a run needs the stored logits to have been computed from, as metadata strings.
std::map<std::string, std::string> run_fields(const model::weights& w, const loss_params& p) {
  return {{"weights_fingerprint", fingerprint(w)},           {"reference", p.reference},
          {"linear_precision", std::string(name(p.linear))}, {"n_tokens", std::to_string(p.n_tokens)},
          {"vocab", std::to_string(w.cfg.vocab_size)},       {"tool_version", std::string(tool_version())}};
}

// A non-negative integer metadata field.
int int_field(const std::string& path, const std::map<std::string, std::string>& m, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) fail("{}: reference logits: metadata has no '{}'", path, key);
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(it->second, &used);
  } catch (const std::exception&) {
  }
  if (used != it->second.size() || v < 0 || v > (1L << 30))
    fail("{}: reference logits: metadata '{}' is '{}': expected a count", path, key, clip(it->second, 40));
  return int(v);
}

}  // namespace

reference_logits::reference_logits(const std::string& path) : file_(path) {}

std::shared_ptr<const reference_logits> reference_logits::open(const std::string& path, const model::weights& w,
                                                               const loss_params& p) {
  std::shared_ptr<reference_logits> r(new reference_logits(path));
  const auto& m = r->file_.metadata();
  const auto fmt_it = m.find("format");
  if (fmt_it == m.end() || fmt_it->second != kFormat)
    fail(
        "{}: not a reference-logits file (metadata 'format' is '{}', expected '{}'; write one with attnum loss "
        "--save-reference)",
        path, fmt_it == m.end() ? "" : clip(fmt_it->second, 40), kFormat);
  const auto ver = m.find("format_version");
  if (ver == m.end() || ver->second != kFormatVersion)
    fail("{}: reference logits: format_version '{}', this attnum reads '{}'", path,
         ver == m.end() ? "" : clip(ver->second, 40), kFormatVersion);
  // Every field the logits depend on must be this run's.
  for (const auto& [key, want] : run_fields(w, p)) {
    const auto it = m.find(key);
    const std::string have = it == m.end() ? "(none)" : clip(it->second, 60);
    if (it == m.end() || it->second != want) {
      const char* why = key == "weights_fingerprint" ? " (other weights, or another --linear-precision)"
                        : key == "tool_version"      ? " (recompute it with this version's --save-reference)"
                                                     : "";
      fail("{}: reference logits: {} {} -> this run {}{}: they were computed for another run", path, key, have, want,
           why);
    }
  }
  const int windows = int_field(path, m, "windows");
  const int n = r->n_tokens_ = p.n_tokens;
  const int64_t vocab = w.cfg.vocab_size;
  if (r->file_.tensors().size() != size_t(2) * windows)
    fail("{}: reference logits: {} tensors, expected ids.K and logits.K for each of its {} windows", path,
         r->file_.tensors().size(), windows);
  for (int k = 0; k < windows; ++k) {
    const io::tensor_view* ids = r->file_.find(fmt::format("ids.{}", k));
    const io::tensor_view* lg = r->file_.find(fmt::format("logits.{}", k));
    if (!ids || ids->dtype != io::st_dtype::I32 || ids->shape != std::vector<int64_t>{n})
      fail("{}: reference logits: tensor ids.{}: expected I32 [{}]", path, k, n);
    if (!lg || lg->dtype != io::st_dtype::F32 || lg->shape != std::vector<int64_t>{n, vocab})
      fail("{}: reference logits: tensor logits.{}: expected F32 [{}, {}]", path, k, n, vocab);
    if (reinterpret_cast<uintptr_t>(ids->data) % 4 != 0 || reinterpret_cast<uintptr_t>(lg->data) % 4 != 0)
      fail("{}: reference logits: window {}'s data is not 4-byte aligned (not written by attnum)", path, k);
    r->ids_.push_back(reinterpret_cast<const int32_t*>(ids->data));
    r->logits_.push_back(reinterpret_cast<const float*>(lg->data));
    r->by_hash_.emplace(core::fnv1a64(ids->data, ids->nbytes), k);
  }
  // The file's id: its metadata and every window's ids.
  uint64_t h = core::kFnvOffset;
  for (const auto& [key, value] : m) {
    h = core::fnv1a64(key.data(), key.size() + 1, h);
    h = core::fnv1a64(value.data(), value.size() + 1, h);
  }
  for (int k = 0; k < windows; ++k) h = core::fnv1a64(r->ids_[k], size_t(n) * 4, h);
  r->id_ = fmt::format("{:016x}", h);
  return r;
}

const float* reference_logits::find(std::span<const int> inputs, const std::string& what) const {
  if (int(inputs.size()) == n_tokens_) {
    const auto [lo, hi] = by_hash_.equal_range(ids_hash(inputs));
    for (auto it = lo; it != hi; ++it)
      if (std::equal(inputs.begin(), inputs.end(), ids_[it->second])) return logits_[it->second];
  }
  fail(
      "{}: reference logits: none of its {} windows has the input ids of {} (computed from other texts, "
      "--tokens or --windows): save them with --save-reference for this run",
      path(), ids_.size(), what);
}

int save_reference_logits(const std::string& path, const model::weights& w, const loss_params& p, bool progress) {
  validate(p, w);
  const int n = p.n_tokens, vocab = w.cfg.vocab_size;
  const int windows = int(p.sources.size()) * p.windows;
  std::map<std::string, std::string> meta = run_fields(w, p);
  meta.insert({{"format", std::string(kFormat)},
               {"format_version", std::string(kFormatVersion)},
               {"model", w.id},
               {"windows", std::to_string(windows)}});
  std::vector<io::tensor_layout> layout;
  for (int k = 0; k < windows; ++k) {
    layout.push_back({fmt::format("ids.{}", k), io::st_dtype::I32, {n}});
    layout.push_back({fmt::format("logits.{}", k), io::st_dtype::F32, {n, vocab}});
  }
  io::safetensors_writer out(path, std::move(layout), meta);
  attnum::progress bar("reference", windows, "windows", progress,
                       "the reference forward of one window of --tokens labels of one text");
  for (int s = 0, k = 0; s < int(p.sources.size()); ++s)
    for (int wi = 0; wi < p.windows; ++wi, ++k) {
      const std::span<const int> inputs = window_inputs(p, s, wi);
      const std::vector<float> logits = reference_forward(w, p, inputs);
      for (size_t e = 0; e < logits.size(); ++e)
        if (!std::isfinite(logits[e]))
          fail("{}: the reference logits of source {} window {} hold {} at position {} (token {}): not saved", path, s,
               wi, logits[e], e / vocab, e % vocab);
      static_assert(sizeof(int) == sizeof(int32_t));
      out.write_next(inputs.data(), inputs.size_bytes());
      out.write_next(logits.data(), logits.size() * sizeof(float));
      bar.update(k + 1);
    }
  out.commit();
  return windows;
}

}  // namespace attnum::loss
