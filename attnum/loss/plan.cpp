// The loss study's plan: parameters checked, the unit list, shards (loss/plan.h).
#include "attnum/loss/plan.h"

#include "attnum/core/error.h"

namespace attnum::loss {
namespace {

// The window's input ids (positions 0..N-1, offset 0) or labels (the next ids, offset 1).
std::span<const int> window_ids(const loss_params& p, int source, int window, int offset) {
  return std::span<const int>(p.sources[source]).subspan(size_t(window) * p.n_tokens + offset, p.n_tokens);
}

}  // namespace

std::span<const int> window_inputs(const loss_params& p, int source, int window) {
  return window_ids(p, source, window, 0);
}

std::span<const int> window_labels(const loss_params& p, int source, int window) {
  return window_ids(p, source, window, 1);
}

void validate(const loss_params& p, const model::weights& w) {
  if (p.n_tokens <= 0) fail("--tokens must be positive, got {}", p.n_tokens);
  if (p.windows <= 0) fail("--windows must be positive, got {}", p.windows);
  if (p.n_tokens > w.cfg.seq_len)
    fail("--tokens {} is larger than the model's context {} ({})", p.n_tokens, w.cfg.seq_len, w.id);
  if (p.sources.empty()) fail("loss: no texts or token-id files");
  if (p.conditions.empty()) fail("--conditions: no condition given");
  const size_t need = size_t(p.windows) * p.n_tokens + 1;
  for (size_t s = 0; s < p.sources.size(); ++s) {
    if (p.sources[s].size() < need)
      fail("{}: {} tokens, but --windows {} x --tokens {} need {} (inputs plus the last label)",
           s < p.source_names.size() ? p.source_names[s] : "source", p.sources[s].size(), p.windows, p.n_tokens, need);
    for (int id : p.sources[s])
      if (id < 0 || id >= w.cfg.vocab_size)
        fail("{}: token id {} outside the vocabulary 0..{}", s < p.source_names.size() ? p.source_names[s] : "source",
             id, w.cfg.vocab_size - 1);
  }
}

std::vector<loss_unit> all_units(const loss_params& p) {
  std::vector<loss_unit> u;
  for (int c = 0; c < int(p.conditions.size()); ++c)
    for (int s = 0; s < int(p.sources.size()); ++s)
      for (int w = 0; w < p.windows; ++w) u.push_back({s, w, c});
  return u;
}

std::vector<loss_unit> shard_units(const loss_params& p, int shard, int n_shards) {
  if (n_shards <= 0 || shard < 0 || shard >= n_shards) fail("--shard {}/{}: expected 0 <= I < N", shard, n_shards);
  std::vector<loss_unit> out;
  for (const loss_unit& u : all_units(p))
    if ((u.source * p.windows + u.window) % n_shards == shard) out.push_back(u);
  return out;
}

}  // namespace attnum::loss
