// The loss study's summary: rows per condition and paired rows, intervals over text windows
// (loss/summary.h).
#include "attnum/loss/summary.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <tuple>
#include <fmt/format.h>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/stats/stats.h"

namespace attnum::loss {
namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

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

}  // namespace attnum::loss
