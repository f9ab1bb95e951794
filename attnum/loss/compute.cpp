// The loss study's computation: forwards and per-label comparisons (loss/compute.h).
#include "attnum/loss/compute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <fmt/format.h>

#include "attnum/core/error.h"
#include "attnum/loss/reference_logits.h"
#include "attnum/model/hooks.h"
#include "attnum/model/transformer.h"

namespace attnum::loss {
namespace {
// One forward pass of the study with `attention` in every layer and p's linear precision and
// statistics: p.forward (a layer pipeline's) when set, else model::forward.
std::vector<float> run_forward(const model::weights& w, const loss_params& p, std::span<const int> inputs,
                               model::attention_fn attention) {
  model::forward_options opt;
  opt.linear = p.linear;
  opt.stats = p.stats;
  opt.attention = std::move(attention);
  return p.forward ? p.forward(w, inputs, opt) : model::forward(w, inputs, opt);
}
}  // namespace

std::vector<float> reference_forward(const model::weights& w, const loss_params& p, std::span<const int> inputs) {
  return run_forward(w, p, inputs, model::reference_attention(p.reference));
}

label_stat compare_logits(const float* ref, const float* var, int vocab, int label) {
  // log-softmax in double: logp(v) = x_v - (m + log sum exp(x - m))
  auto lse = [vocab](const float* x, int& arg) {
    arg = int(std::max_element(x, x + vocab) - x);
    const double m = x[arg];
    double s = 0;
    for (int v = 0; v < vocab; ++v) s += std::exp(double(x[v]) - m);
    return m + std::log(s);
  };
  int arg_ref, arg_var;
  const double lse_ref = lse(ref, arg_ref), lse_var = lse(var, arg_var);
  double kl = 0;  // KL(p_ref || p_var) = sum p_ref (logp_ref - logp_var)
  for (int v = 0; v < vocab; ++v) {
    const double lr = double(ref[v]) - lse_ref, lv = double(var[v]) - lse_var;
    kl += std::exp(lr) * (lr - lv);
  }
  label_stat s;
  s.nll_ref = lse_ref - double(ref[label]);
  s.nll_var = lse_var - double(var[label]);
  s.kl = kl;
  s.dp = std::exp(-s.nll_var) - std::exp(-s.nll_ref);
  s.top1_same = arg_ref == arg_var;
  return s;
}

std::vector<unit_result> compute_window(const model::weights& w, const loss_params& p,
                                        const std::vector<loss_unit>& units) {
  if (units.empty()) return {};
  const int vocab = w.cfg.vocab_size, n = p.n_tokens;
  std::span<const int> inputs = window_inputs(p, units[0].source, units[0].window),
                       labels = window_labels(p, units[0].source, units[0].window);
  std::vector<float> computed;
  const float* ref = nullptr;
  if (p.reference_file) {
    ref = p.reference_file->find(inputs, fmt::format("source {} window {}", units[0].source, units[0].window));
  } else {
    computed = reference_forward(w, p, inputs);
    ref = computed.data();
  }
  std::vector<unit_result> out;
  for (const loss_unit& u : units) {
    ATTNUM_ASSERT(u.source == units[0].source && u.window == units[0].window, "mixed windows");
    const std::vector<float> var =
        run_forward(w, p, inputs, model::kernel_attention(p.kernel, p.conditions[u.condition], {p.rotation, false}));
    // A NaN or infinite logit has no loss (its argmax would be meaningless): refuse the position.
    for (const auto& [logits, which] : {std::pair{ref, "reference"}, std::pair{var.data(), "kernel"}})
      for (size_t e = 0; e < size_t(n) * vocab; ++e)
        if (!std::isfinite(logits[e]))
          fail(
              "loss: source {} window {} condition {}: the {} logits at position {} hold {} (token {}): "
              "no loss for a non-finite logit row",
              u.source, u.window, p.conditions[u.condition], which, e / vocab, logits[e], e % vocab);
    unit_result r;
    r.unit = u;
    r.nll_ref.resize(n), r.nll_var.resize(n), r.kl.resize(n), r.dp.resize(n), r.top1_same.resize(n);
#pragma omp parallel for schedule(static) if (size_t(n) * vocab > (1u << 16))
    for (int i = 0; i < n; ++i) {
      const label_stat s = compare_logits(ref + size_t(i) * vocab, var.data() + size_t(i) * vocab, vocab, labels[i]);
      r.nll_ref[i] = s.nll_ref, r.nll_var[i] = s.nll_var, r.kl[i] = s.kl, r.dp[i] = s.dp;
      r.top1_same[i] = s.top1_same;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<unit_result> compute_units(const model::weights& w, const loss_params& p,
                                       const std::vector<loss_unit>& units) {
  std::map<std::pair<int, int>, std::vector<loss_unit>> by_window;
  for (const loss_unit& u : units) by_window[{u.source, u.window}].push_back(u);
  std::vector<unit_result> out;
  for (const auto& [key, us] : by_window)
    for (unit_result& r : compute_window(w, p, us)) out.push_back(std::move(r));
  return out;
}

}  // namespace attnum::loss
