#include "attnum/model/loss.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/same_config.h"
#include "attnum/core/file.h"
#include "attnum/core/version.h"
#include "attnum/model/reference_logits.h"
#include "attnum/io/json_file.h"
#include "attnum/model/hooks.h"
#include "attnum/model/reference_logits.h"
#include "attnum/stats/stats.h"
#include "attnum/io/csv.h"

namespace attnum::model {
namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

// The window's input ids (positions 0..N-1) and labels (the next ids).
std::span<const int> window_ids(const loss_params& p, const loss_unit& u, int offset) {
  return std::span<const int>(p.sources[u.source]).subspan(size_t(u.window) * p.n_tokens + offset, p.n_tokens);
}

}  // namespace

std::span<const int> window_inputs(const loss_params& p, int source, int window) {
  return window_ids(p, {source, window, 0}, 0);
}

std::vector<float> reference_forward(const weights& w, const loss_params& p, std::span<const int> inputs) {
  forward_options opt;
  opt.linear = p.linear;
  opt.attention = reference_attention(p.reference);
  return forward(w, inputs, opt);
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

void validate(const loss_params& p, const weights& w) {
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

std::vector<unit_result> compute_window(const weights& w, const loss_params& p, const std::vector<loss_unit>& units) {
  if (units.empty()) return {};
  const int vocab = w.cfg.vocab_size, n = p.n_tokens;
  std::span<const int> inputs = window_ids(p, units[0], 0), labels = window_ids(p, units[0], 1);
  std::vector<float> computed;
  const float* ref = nullptr;
  if (p.reference_file) {
    ref = p.reference_file->find(inputs, fmt::format("source {} window {}", units[0].source, units[0].window));
  } else {
    computed = reference_forward(w, p, inputs);
    ref = computed.data();
  }
  forward_options opt;
  opt.linear = p.linear;
  std::vector<unit_result> out;
  for (const loss_unit& u : units) {
    ATTNUM_ASSERT(u.source == units[0].source && u.window == units[0].window, "mixed windows");
    opt.attention = kernel_attention(p.kernel, p.conditions[u.condition], {p.rotation, false});
    const std::vector<float> var = forward(w, inputs, opt);
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

std::vector<unit_result> compute_units(const weights& w, const loss_params& p, const std::vector<loss_unit>& units) {
  std::map<std::pair<int, int>, std::vector<loss_unit>> by_window;
  for (const loss_unit& u : units) by_window[{u.source, u.window}].push_back(u);
  std::vector<unit_result> out;
  for (const auto& [key, us] : by_window)
    for (unit_result& r : compute_window(w, p, us)) out.push_back(std::move(r));
  return out;
}

namespace {
// Sorts unit results into canonical order (condition, source, window) and checks that every unit
// is there once.
void canonical_order(const loss_params& p, std::vector<unit_result>& results) {
  auto key = [](const loss_unit& u) { return std::tuple(u.condition, u.source, u.window); };
  std::sort(results.begin(), results.end(),
            [&](const unit_result& a, const unit_result& b) { return key(a.unit) < key(b.unit); });
  const std::vector<loss_unit> want = all_units(p);
  if (results.size() != want.size())
    fail("loss merge: {} unit results, expected {} (missing or duplicated units)", results.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (key(results[i].unit) != key(want[i]))
      fail("loss merge: unit (condition {}, source {}, window {}) missing or duplicated", want[i].condition,
           want[i].source, want[i].window);
}

// Per-label results of one condition, concatenated in canonical order (source, window, position).
struct condition_labels {
  std::vector<double> nr, nv, kl, dp, same;
  std::vector<int> window;  ///< each label's text window: its unit's index in canonical order
};
condition_labels labels_of(const std::vector<unit_result>& results, size_t c, size_t per) {
  condition_labels L;
  for (size_t i = c * per; i < (c + 1) * per; ++i) {
    const unit_result& r = results[i];
    L.nr.insert(L.nr.end(), r.nll_ref.begin(), r.nll_ref.end());
    L.nv.insert(L.nv.end(), r.nll_var.begin(), r.nll_var.end());
    L.kl.insert(L.kl.end(), r.kl.begin(), r.kl.end());
    L.dp.insert(L.dp.end(), r.dp.begin(), r.dp.end());
    for (uint8_t t : r.top1_same) L.same.push_back(t);
    L.window.insert(L.window.end(), r.nll_ref.size(), int(i - c * per));
  }
  return L;
}

// Mean of x[i] over a resample's indices.
std::optional<double> resample_mean(const std::vector<double>& x, std::span<const int> idx) {
  if (idx.empty()) return std::nullopt;
  double s = 0;
  for (int i : idx) s += x[i];
  return s / double(idx.size());
}

// The block length of a series of labels that is one segment of p.n_tokens labels per text
// window: stats::block_length's, at most one window (a block never crosses a window's end).
int window_block_length(const loss_params& p, std::span<const double> x) {
  return std::max(1, std::min(stats::block_length(x), p.n_tokens));
}
// The text windows (sources x windows) are the intervals' clusters (condition_labels::window).
int n_text_windows(const loss_params& p) { return int(p.sources.size()) * p.windows; }

// One interval over text windows: the delete-one-window jackknife with t(G-1) critical values
// on `scale` (stats::cluster_jackknife_t), or none with the reason (fewer than
// kMinLossWindows windows, zero width, a value off the scale).
struct text_ci {
  double lo = NAN, hi = NAN;
  std::string reason;
  int dropped = 0;
};
text_ci interval_over_texts(const loss_params& p, const std::vector<int>& cluster, const stats::statistic_fn& stat,
                            stats::ci_scale scale, double range_lo = -INFINITY, double range_hi = INFINITY,
                            double logit_count = 0) {
  text_ci out;
  const int g = n_text_windows(p);
  if (g < kMinLossWindows) {
    out.reason = fmt::format("{} text window{}: an interval over text windows needs at least {}", g, g == 1 ? "" : "s",
                             kMinLossWindows);
    return out;
  }
  stats::bootstrap_options o;
  o.scale = scale, o.range_lo = range_lo, o.range_hi = range_hi, o.logit_count = logit_count;
  const stats::interval iv = stats::cluster_jackknife_t(cluster, stat, o);
  out.dropped = iv.dropped;
  if (iv.lo && iv.hi)
    out.lo = *iv.lo, out.hi = *iv.hi;
  else
    out.reason = iv.reason.empty() ? iv.method : iv.reason;
  return out;
}

// The method string of the rows' intervals.
std::string text_ci_method(const loss_params& p, const char* scales) {
  const int g = n_text_windows(p);
  if (g < kMinLossWindows)
    return fmt::format("none: {} text window{} (an interval over text windows needs at least {})", g, g == 1 ? "" : "s",
                       kMinLossWindows);
  return fmt::format("delete-one-window-jackknife-t (t({}) over {} text windows; {})", g - 1, g, scales);
}

// A bound as JSON: null when the interval is not available.
nlohmann::json bound(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }
// A reason as JSON: null when the interval is available.
nlohmann::json reason(const std::string& r) { return r.empty() ? nlohmann::json(nullptr) : nlohmann::json(r); }

// kl_p99's reason for no interval.
constexpr const char* kNoHighQuantileInterval =
    "no interval: the delete-one-window jackknife of a high quantile undercovers (simulated coverage 0.93, "
    "0.92, 0.91 at 3, 5, 10 windows: docs/model.md)";
}  // namespace

std::vector<loss_row> summarize(const loss_params& p, const std::string& model_id, std::vector<unit_result> results) {
  canonical_order(p, results);
  std::vector<loss_row> rows;
  const size_t per = results.size() / p.conditions.size();
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    condition_labels L = labels_of(results, c, per);
    const std::vector<double>&nr = L.nr, &nv = L.nv, &kl = L.kl;
    std::vector<double>& dp = L.dp;
    double same = 0;
    for (double t : L.same) same += t;
    loss_row row;
    row.condition = p.conditions[c], row.kernel = p.kernel.name, row.model = model_id;
    row.knobs = p.knobs, row.rotation = p.rotation.name();
    row.transform_dtype = formats::info(p.kernel.transform_dtype).name;
    row.reference = p.reference, row.linear = std::string(name(p.linear));
    row.n_labels = int64_t(nr.size());
    row.ce_ref = mean(nr), row.ce_variant = mean(nv);
    row.ppl_ratio = std::exp(row.ce_variant - row.ce_ref);
    // Intervals over text windows: the windows are the clusters, because a text shifts the
    // loss and the kernel's effect on it for all its labels, and neighbouring labels' dependence
    // stays inside a window. The statistics are the pooled ones; the delete-one-window
    // jackknife forms the interval on a variance-stabilising scale with t(G-1) critical values.
    std::vector<double> diff(nr.size());
    for (size_t i = 0; i < diff.size(); ++i) diff[i] = nv[i] - nr[i];
    const std::vector<int>& cluster = L.window;
    row.block_length = window_block_length(p, diff);
    row.n_text_windows = n_text_windows(p), row.n_blocks = row.n_text_windows;
    row.ci_method = text_ci_method(p,
                                   "log scale for ppl_ratio, kl_mean, kl_p50, kl_p90 and dp_rms, logit for "
                                   "top1_agreement; none for kl_p99");
    row.kl_mean = mean(kl);
    row.top1_agreement = double(same) / double(nr.size());
    double sq = 0;
    for (double x : dp) sq += x * x;
    row.dp_mean = mean(dp), row.dp_rms = std::sqrt(sq / double(dp.size()));
    std::vector<double> dp2(dp.size());
    for (size_t i = 0; i < dp.size(); ++i) dp2[i] = dp[i] * dp[i];
    auto set = [](const text_ci& ci, double& lo, double& hi, std::string& why) {
      lo = ci.lo, hi = ci.hi, why = ci.reason;
    };
    const text_ci ppl = interval_over_texts(
        p, cluster,
        [&](std::span<const int> idx) -> std::optional<double> {
          const auto m = resample_mean(diff, idx);
          return m ? std::optional<double>(std::exp(*m)) : std::nullopt;
        },
        stats::ci_scale::log, 0.0);
    set(ppl, row.ppl_ratio_lo, row.ppl_ratio_hi, row.ppl_ratio_ci_reason);
    row.ci_dropped = ppl.dropped;
    auto mean_of = [](const std::vector<double>& x) {
      return [&x](std::span<const int> idx) { return resample_mean(x, idx); };
    };
    auto percentile_of = [&kl](double q) {
      return [&kl, q](std::span<const int> idx) -> std::optional<double> {
        if (idx.empty()) return std::nullopt;
        std::vector<double> v(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) v[i] = kl[size_t(idx[i])];
        return stats::percentile(std::move(v), q);
      };
    };
    const auto log_scale = stats::ci_scale::log;
    set(interval_over_texts(p, cluster, mean_of(kl), log_scale, 0.0), row.kl_mean_lo, row.kl_mean_hi,
        row.kl_mean_ci_reason);
    set(interval_over_texts(p, cluster, percentile_of(0.50), log_scale, 0.0), row.kl_p50_lo, row.kl_p50_hi,
        row.kl_p50_ci_reason);
    set(interval_over_texts(p, cluster, percentile_of(0.90), log_scale, 0.0), row.kl_p90_lo, row.kl_p90_hi,
        row.kl_p90_ci_reason);
    row.kl_p99_lo = row.kl_p99_hi = NAN, row.kl_p99_ci_reason = kNoHighQuantileInterval;
    set(interval_over_texts(p, cluster, mean_of(L.same), stats::ci_scale::logit, 0.0, 1.0, double(nr.size())),
        row.top1_agreement_lo, row.top1_agreement_hi, row.top1_agreement_ci_reason);
    set(interval_over_texts(
            p, cluster,
            [&dp2](std::span<const int> idx) -> std::optional<double> {
              const auto m = resample_mean(dp2, idx);
              return m ? std::optional<double>(std::sqrt(*m)) : std::nullopt;
            },
            log_scale, 0.0),
        row.dp_rms_lo, row.dp_rms_hi, row.dp_rms_ci_reason);
    row.kl_min = *std::min_element(kl.begin(), kl.end()), row.kl_max = *std::max_element(kl.begin(), kl.end());
    row.kl_p50 = stats::percentile(kl, 0.50), row.kl_p90 = stats::percentile(kl, 0.90);
    row.kl_p99 = stats::percentile(kl, 0.99), row.kl_p999 = stats::percentile(kl, 0.999);
    std::sort(dp.begin(), dp.end());
    row.dp_min = dp.front(), row.dp_max = dp.back();
    row.dp_p01 = stats::percentile(dp, 0.01), row.dp_p10 = stats::percentile(dp, 0.10);
    row.dp_p50 = stats::percentile(dp, 0.50), row.dp_p90 = stats::percentile(dp, 0.90);
    row.dp_p99 = stats::percentile(dp, 0.99);
    rows.push_back(row);
  }
  return rows;
}

std::vector<paired_row> summarize_paired(const loss_params& p, const std::string& model_id,
                                         std::vector<unit_result> results) {
  canonical_order(p, results);
  const size_t per = results.size() / p.conditions.size();
  auto index = [&](const char* name) {
    const auto it = std::find(p.conditions.begin(), p.conditions.end(), name);
    return it == p.conditions.end() ? -1 : int(it - p.conditions.begin());
  };
  std::vector<paired_row> rows;
  for (const auto& cmp : kPairedComparisons) {
    const int a = index(cmp[0]), b = index(cmp[1]);
    if (a < 0 || b < 0) continue;
    const condition_labels A = labels_of(results, size_t(a), per), B = labels_of(results, size_t(b), per);
    const size_t n = A.nv.size();
    std::vector<double> dce(n), dkl(n), dtop(n);
    for (size_t i = 0; i < n; ++i)
      dce[i] = A.nv[i] - B.nv[i], dkl[i] = A.kl[i] - B.kl[i], dtop[i] = A.same[i] - B.same[i];
    paired_row r;
    r.kernel = p.kernel.name, r.condition_a = cmp[0], r.condition_b = cmp[1], r.model = model_id;
    r.n_labels = int64_t(n);
    r.delta_ce = mean(dce), r.delta_kl = mean(dkl), r.delta_top1 = mean(dtop);
    r.block_length = window_block_length(p, dce);
    r.ce_diff_lag1_autocorrelation = stats::autocorrelation(dce, 1).back();
    // The delete-one-window jackknife of each mean difference (identity scale, t(G-1)).
    const std::vector<int>& cluster = A.window;
    r.n_text_windows = n_text_windows(p), r.n_blocks = r.n_text_windows;
    r.ci_method = text_ci_method(p, "identity scale");
    auto ci = [&](const std::vector<double>& x, double& lo, double& hi, std::string& why, double range) {
      const text_ci iv = interval_over_texts(
          p, cluster, [&](std::span<const int> idx) { return resample_mean(x, idx); }, stats::ci_scale::identity,
          -range, range);
      lo = iv.lo, hi = iv.hi, why = iv.reason, r.ci_dropped += iv.dropped;
    };
    ci(dce, r.delta_ce_lo, r.delta_ce_hi, r.delta_ce_ci_reason, INFINITY);
    ci(dkl, r.delta_kl_lo, r.delta_kl_hi, r.delta_kl_ci_reason, INFINITY);
    ci(dtop, r.delta_top1_lo, r.delta_top1_hi, r.delta_top1_ci_reason, 1.0);
    rows.push_back(r);
  }
  return rows;
}

std::vector<loss_row> run_loss(const weights& w, const loss_params& p) {
  validate(p, w);
  return summarize(p, w.id, compute_units(w, p, all_units(p)));
}

std::vector<loss_row> run_loss(const weights& w, const loss_params& p, std::vector<paired_row>& paired) {
  validate(p, w);
  std::vector<unit_result> results = compute_units(w, p, all_units(p));
  paired = summarize_paired(p, w.id, results);
  return summarize(p, w.id, std::move(results));
}

nlohmann::json to_json(const paired_row& r) {
  return {{"kernel", r.kernel},
          {"condition_a", r.condition_a},
          {"condition_b", r.condition_b},
          {"n_labels", r.n_labels},
          {"delta_ce", r.delta_ce},
          {"delta_ce_lo", bound(r.delta_ce_lo)},
          {"delta_ce_hi", bound(r.delta_ce_hi)},
          {"delta_ce_ci_reason", reason(r.delta_ce_ci_reason)},
          {"delta_kl", r.delta_kl},
          {"delta_kl_lo", bound(r.delta_kl_lo)},
          {"delta_kl_hi", bound(r.delta_kl_hi)},
          {"delta_kl_ci_reason", reason(r.delta_kl_ci_reason)},
          {"delta_top1", r.delta_top1},
          {"delta_top1_lo", bound(r.delta_top1_lo)},
          {"delta_top1_hi", bound(r.delta_top1_hi)},
          {"delta_top1_ci_reason", reason(r.delta_top1_ci_reason)},
          {"ce_diff_lag1_autocorrelation", r.ce_diff_lag1_autocorrelation},
          {"block_length", r.block_length},
          {"n_blocks", r.n_blocks},
          {"n_text_windows", r.n_text_windows},
          {"ci_method", r.ci_method},
          {"ci_level", 0.95},
          {"ci_dropped", r.ci_dropped},
          {"model", r.model},
          {"tool_version", std::string(tool_version())}};
}

namespace {
// Writes DIR/STEM.json (a JSON array of the rows' objects) and DIR/STEM.csv atomically.
template <typename Row>
void write_table_files(const std::string& dir, const std::string& stem, const std::vector<Row>& rows) {
  std::filesystem::create_directories(dir);
  nlohmann::json arr = nlohmann::json::array();
  for (const Row& r : rows) arr.push_back(to_json(r));
  write_file_atomic(dir + "/" + stem + ".json", arr.dump(2) + "\n");
  write_file_atomic(dir + "/" + stem + ".csv", io::csv_table(arr));
}
}  // namespace

void write_paired_files(const std::string& dir, const std::vector<paired_row>& rows) {
  write_table_files(dir, "loss_paired", rows);
}

nlohmann::json to_json(const loss_row& r) {
  return {{"condition", r.condition},
          {"kernel", r.kernel},
          {"n_labels", r.n_labels},
          {"ce_ref", r.ce_ref},
          {"ce_variant", r.ce_variant},
          {"ppl_ratio", r.ppl_ratio},
          {"ppl_ratio_lo", bound(r.ppl_ratio_lo)},
          {"ppl_ratio_hi", bound(r.ppl_ratio_hi)},
          {"ppl_ratio_ci_reason", reason(r.ppl_ratio_ci_reason)},
          {"kl_mean", r.kl_mean},
          {"kl_mean_lo", bound(r.kl_mean_lo)},
          {"kl_mean_hi", bound(r.kl_mean_hi)},
          {"kl_mean_ci_reason", reason(r.kl_mean_ci_reason)},
          {"kl_p50", r.kl_p50},
          {"kl_p50_lo", bound(r.kl_p50_lo)},
          {"kl_p50_hi", bound(r.kl_p50_hi)},
          {"kl_p50_ci_reason", reason(r.kl_p50_ci_reason)},
          {"kl_p90", r.kl_p90},
          {"kl_p90_lo", bound(r.kl_p90_lo)},
          {"kl_p90_hi", bound(r.kl_p90_hi)},
          {"kl_p90_ci_reason", reason(r.kl_p90_ci_reason)},
          {"kl_p99", r.kl_p99},
          {"kl_p99_lo", bound(r.kl_p99_lo)},
          {"kl_p99_hi", bound(r.kl_p99_hi)},
          {"kl_p99_ci_reason", reason(r.kl_p99_ci_reason)},
          {"kl_p999", r.kl_p999},
          {"kl_min", r.kl_min},
          {"kl_max", r.kl_max},
          {"top1_agreement", r.top1_agreement},
          {"top1_agreement_lo", bound(r.top1_agreement_lo)},
          {"top1_agreement_hi", bound(r.top1_agreement_hi)},
          {"top1_agreement_ci_reason", reason(r.top1_agreement_ci_reason)},
          {"dp_mean", r.dp_mean},
          {"dp_rms", r.dp_rms},
          {"dp_rms_lo", bound(r.dp_rms_lo)},
          {"dp_rms_hi", bound(r.dp_rms_hi)},
          {"dp_rms_ci_reason", reason(r.dp_rms_ci_reason)},
          {"dp_min", r.dp_min},
          {"dp_p01", r.dp_p01},
          {"dp_p10", r.dp_p10},
          {"dp_p50", r.dp_p50},
          {"dp_p90", r.dp_p90},
          {"dp_p99", r.dp_p99},
          {"dp_max", r.dp_max},
          {"model", r.model},
          {"reference", r.reference},
          {"linear_precision", r.linear},
          {"knobs", fmt::format("{}", fmt::join(r.knobs, ";"))},
          {"transform_dtype", r.transform_dtype},
          {"rotation", r.rotation},
          {"ci_method", r.ci_method},
          {"ci_level", 0.95},
          {"block_length", r.block_length},
          {"n_blocks", r.n_blocks},
          {"n_text_windows", r.n_text_windows},
          {"ci_dropped", r.ci_dropped},
          {"tool_version", std::string(tool_version())}};
}

nlohmann::json to_json(const unit_result& r) {
  return {{"source", r.unit.source},
          {"window", r.unit.window},
          {"condition", r.unit.condition},
          {"nll_ref", r.nll_ref},
          {"nll_var", r.nll_var},
          {"kl", r.kl},
          {"dp", r.dp},
          {"top1_same", r.top1_same}};
}

unit_result unit_result_from_json(const nlohmann::json& j) {
  try {
    unit_result r;
    r.unit = {j.at("source").get<int>(), j.at("window").get<int>(), j.at("condition").get<int>()};
    j.at("nll_ref").get_to(r.nll_ref);
    j.at("nll_var").get_to(r.nll_var);
    j.at("kl").get_to(r.kl);
    j.at("dp").get_to(r.dp);
    j.at("top1_same").get_to(r.top1_same);
    const size_t n = r.nll_ref.size();
    const std::string unit = fmt::format("loss unit result (source {}, window {}, condition {})", r.unit.source,
                                         r.unit.window, r.unit.condition);
    if (r.unit.source < 0 || r.unit.window < 0 || r.unit.condition < 0) fail("{}: negative index", unit);
    if (n == 0) fail("{}: no labels", unit);
    for (const auto& [name, len] : {std::pair{"nll_var", r.nll_var.size()}, std::pair{"kl", r.kl.size()},
                                    std::pair{"dp", r.dp.size()}, std::pair{"top1_same", r.top1_same.size()}})
      if (len != n) fail("{}: {} holds {} values, nll_ref {}", unit, name, len, n);
    for (size_t i = 0; i < n; ++i) {
      // -log p >= 0, KL >= 0 (up to rounding), p_var - p_ref in [-1, 1], agreement 0 or 1.
      if (!std::isfinite(r.nll_ref[i]) || r.nll_ref[i] < 0 || !std::isfinite(r.nll_var[i]) || r.nll_var[i] < 0)
        fail("{}: label {}: nll_ref {} / nll_var {}: expected finite values >= 0", unit, i, r.nll_ref[i], r.nll_var[i]);
      if (!std::isfinite(r.kl[i]) || r.kl[i] < -1e-6)
        fail("{}: label {}: kl {}: expected a finite value >= 0", unit, i, r.kl[i]);
      if (!(r.dp[i] >= -1 && r.dp[i] <= 1))
        fail("{}: label {}: dp {}: expected a difference of probabilities in [-1, 1]", unit, i, r.dp[i]);
      if (r.top1_same[i] > 1) fail("{}: label {}: top1_same {}: expected 0 or 1", unit, i, int(r.top1_same[i]));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("loss unit result: {}", clip(e.what()));
  }
}

nlohmann::json shard_to_json(const loss_params& p, const std::string& model_id, int shard, int n_shards,
                             const std::vector<unit_result>& results) {
  nlohmann::json units = nlohmann::json::array();
  for (const unit_result& r : results) units.push_back(to_json(r));
  nlohmann::json j = {{"kind", "attnum-loss-shard"},
                      {"tool_version", std::string(tool_version())},
                      {"params",
                       {{"model", model_id},
                        {"kernel", p.kernel.name},
                        {"knobs", p.knobs},
                        {"transform_dtype", formats::info(p.kernel.transform_dtype).name},
                        {"rotation", p.rotation.name()},
                        {"conditions", p.conditions},
                        {"reference", p.reference},
                        {"linear_precision", std::string(name(p.linear))},
                        {"n_tokens", p.n_tokens},
                        {"windows", p.windows},
                        {"sources", p.source_names},
                        {"n_sources", p.sources.size()},
                        {"bootstrap_samples", p.bootstrap_samples},
                        {"bootstrap_seed", p.bootstrap_seed}}},
                      {"shard", shard},
                      {"n_shards", n_shards},
                      {"units", units}};
  // Shards that read reference logits merge only with shards that read the same file.
  if (p.reference_file) j["params"]["reference_logits"] = p.reference_file->id();
  return j;
}

namespace {
// The parameters and every unit result of a set of shard files (checked to agree).
struct merged_shards {
  loss_params p;
  std::string model;
  std::vector<unit_result> all;
  std::string rotation;  ///< as recorded (a rotation file need not be here)
};
merged_shards read_shards(const std::vector<nlohmann::json>& shards) {
  if (shards.empty()) fail("loss merge: no shard files");
  nlohmann::json params;
  std::vector<unit_result> all;
  for (size_t i = 0; i < shards.size(); ++i) {
    const nlohmann::json& s = shards[i];
    if (!s.is_object() || !s.contains("kind") || s["kind"] != "attnum-loss-shard" || !s.contains("params") ||
        !s.contains("units"))
      fail("loss merge: shard {} is not an attnum loss shard file", i);
    if (s.value("tool_version", nlohmann::json()) != std::string(tool_version()))
      fail(
          "loss merge: shard {} was written by attnum {}, this is {}: rerun the shard with this "
          "version",
          i, clip(s.value("tool_version", nlohmann::json()).dump(), 40), tool_version());
    if (!s["params"].is_object() || !s["units"].is_array())
      fail("loss merge: shard {}: params must be an object and units an array", i);
    if (i == 0)
      params = s["params"];
    else
      core::require_same_config(params, s["params"], fmt::format("loss merge: shard {}", i),
                                "it was run with different parameters than shard 0");
    for (const auto& u : s["units"]) all.push_back(unit_result_from_json(u));
  }
  loss_params p;
  std::string model, rotation;
  try {
    model = params.at("model").get<std::string>();
    rotation = params.value("rotation", std::string());  // as recorded (a rotation file need not be here)
    p.knobs = params.at("knobs").get<std::vector<std::string>>();
    p.kernel = attention::resolve_kernel(params.at("kernel").get<std::string>(), p.knobs);
    p.conditions = params.at("conditions").get<std::vector<std::string>>();
    p.reference = params.at("reference").get<std::string>();
    p.linear = parse_linear_precision(params.at("linear_precision").get<std::string>());
    p.n_tokens = params.at("n_tokens").get<int>();
    p.windows = params.at("windows").get<int>();
    p.source_names = params.at("sources").get<std::vector<std::string>>();
    const size_t n_sources = params.at("n_sources").get<size_t>();
    if (n_sources != p.source_names.size())
      fail("loss merge: shard parameters: n_sources {} but {} source names", n_sources, p.source_names.size());
    p.sources.resize(n_sources);
    p.bootstrap_samples = params.at("bootstrap_samples").get<int>();
    p.bootstrap_seed = params.at("bootstrap_seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail("loss merge: shard parameters: {}", clip(e.what()));
  }
  if (p.n_tokens < 1 || p.windows < 1 || p.conditions.empty() || p.sources.empty() ||
      p.source_names.size() != p.sources.size())
    fail(
        "loss merge: shard parameters: n_tokens {}, windows {}, {} conditions, {} sources ({} named): "
        "expected positive counts and one name per source",
        p.n_tokens, p.windows, p.conditions.size(), p.sources.size(), p.source_names.size());
  for (const unit_result& r : all)
    if (r.nll_ref.size() != static_cast<size_t>(p.n_tokens) || r.unit.source >= static_cast<int>(p.sources.size()) ||
        r.unit.window >= p.windows || r.unit.condition >= static_cast<int>(p.conditions.size()))
      fail(
          "loss merge: unit (source {}, window {}, condition {}) with {} labels does not fit the "
          "parameters ({} sources, {} windows, {} conditions, n_tokens {})",
          r.unit.source, r.unit.window, r.unit.condition, r.nll_ref.size(), p.sources.size(), p.windows,
          p.conditions.size(), p.n_tokens);
  return {std::move(p), std::move(model), std::move(all), std::move(rotation)};
}
}  // namespace

std::vector<loss_row> merge_shards(const std::vector<nlohmann::json>& shards) {
  merged_shards m = read_shards(shards);
  auto rows = summarize(m.p, m.model, std::move(m.all));
  if (!m.rotation.empty())
    for (auto& r : rows) r.rotation = m.rotation;  // a file need not be here
  return rows;
}

void write_shard_file(const std::string& dir, int shard, int n_shards, const nlohmann::json& j) {
  std::filesystem::create_directories(dir);
  write_file_atomic(fmt::format("{}/loss-shard-{}-of-{}.json", dir, shard, n_shards), j.dump() + "\n");
}

std::vector<loss_row> merge_shard_dirs(const std::vector<std::string>& dirs, const std::string& out) {
  std::vector<std::string> files;
  for (const auto& d : dirs) {
    if (!std::filesystem::is_directory(d)) fail("{}: not a folder", d);
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("loss-shard-", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> shards;
  for (const auto& f : files) shards.push_back(io::read_json_file(f));
  merged_shards m = read_shards(shards);
  const std::vector<loss_row> rows = summarize(m.p, m.model, m.all);
  write_loss_files(out, rows);
  write_paired_files(out, summarize_paired(m.p, m.model, std::move(m.all)));
  return rows;
}

void write_loss_files(const std::string& dir, const std::vector<loss_row>& rows) {
  write_table_files(dir, "loss", rows);
}

}  // namespace attnum::model
