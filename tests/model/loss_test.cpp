// The loss study: identities (variant == reference gives exactly 1), layer locality of the
// attention hook, sharded merge == single run, per-label statistics against closed forms.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/model/hooks.h"
#include "attnum/loss/loss_study.h"
#include "attnum/model/transformer.h"
#include "tiny_model.h"

namespace {
using namespace attnum::model;
using namespace attnum::loss;

loss_params tiny_params() {
  loss_params p;
  std::mt19937_64 rng(7);
  for (int s = 0; s < 2; ++s) {
    std::vector<int> ids;
    for (int i = 0; i < 2 * 24 + 1; ++i) ids.push_back(int(rng() % 48));
    p.sources.push_back(ids);
    p.source_names.push_back("s" + std::to_string(s));
  }
  p.n_tokens = 24, p.windows = 2, p.kernel = attnum::attention::preset("fa3"), p.conditions = {"plain", "rotate"};
  p.bootstrap_samples = 200;
  return p;
}

TEST(loss_test, ppl_ratio_is_exactly_one_when_variant_equals_reference) {
  weights w = attnum::test::tiny_model(1);
  round_to_bf16(w);
  loss_params p = tiny_params();
  p.kernel = attnum::attention::preset("bf16"), p.conditions = {"plain"};  // the reference is the bf16 preset, plain
  const auto rows = run_loss(w, p);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].n_labels, 2 * 2 * 24);
  EXPECT_EQ(rows[0].ppl_ratio, 1.0);
  // Every window's ratio is 1: a zero-width interval is no interval, and says why.
  EXPECT_TRUE(std::isnan(rows[0].ppl_ratio_lo) && std::isnan(rows[0].ppl_ratio_hi));
  EXPECT_NE(rows[0].ppl_ratio_ci_reason.find("zero width"), std::string::npos) << rows[0].ppl_ratio_ci_reason;
  EXPECT_TRUE(to_json(rows[0])["ppl_ratio_lo"].is_null());
  EXPECT_EQ(rows[0].kl_mean, 0.0);
  EXPECT_EQ(rows[0].top1_agreement, 1.0);
  EXPECT_EQ(rows[0].ce_ref, rows[0].ce_variant);
  // The fp64 reference against the fp64 "kernel" too, in fp32 linear precision.
  weights w32 = attnum::test::tiny_model(1);
  p.reference = "fp64", p.kernel = attnum::attention::exact_spec(), p.linear = linear_precision::fp32;
  EXPECT_EQ(run_loss(w32, p)[0].ppl_ratio, 1.0);
}

TEST(loss_test, a_kernel_that_differs_moves_the_loss) {
  weights w = attnum::test::tiny_model(2);
  round_to_bf16(w);
  loss_params p = tiny_params();
  const auto rows = run_loss(w, p);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows[0].ce_variant, rows[0].ce_ref);
  EXPECT_GT(rows[0].kl_mean, 0.0);
  EXPECT_LE(rows[0].ppl_ratio_lo, rows[0].ppl_ratio);
  EXPECT_GE(rows[0].ppl_ratio_hi, rows[0].ppl_ratio);
  EXPECT_EQ(rows[0].ce_ref, rows[1].ce_ref);  // same reference for every condition
}

TEST(loss_test, swapping_one_layer_keeps_earlier_layers_bit_identical) {
  const weights w = attnum::test::tiny_model(3);
  std::mt19937_64 rng(3);
  std::vector<int> ids(40);
  for (int& id : ids) id = int(rng() % 48);
  const int n_layers = w.cfg.n_layers, D = w.cfg.dim;
  auto residuals = [&](const attention_fn& att) {
    std::vector<std::vector<float>> r(n_layers + 1);
    forward_options opt;
    opt.attention = att;
    opt.on_residual = [&](int l, const float* x) { r[l].assign(x, x + ids.size() * D); };
    forward(w, ids, opt);
    return r;
  };
  const attention_fn base = reference_attention("bf16"),
                     other = kernel_attention(attnum::attention::preset("fa3"), "rotate");
  const auto a = residuals(base);
  for (int swap = 0; swap < n_layers; ++swap) {
    const auto b = residuals([&](int l, const qkv_view& x, float* o) { (l == swap ? other : base)(l, x, o); });
    for (int l = 0; l <= swap; ++l) EXPECT_EQ(a[l], b[l]) << "layer " << l << " swap " << swap;
    EXPECT_NE(a[swap + 1], b[swap + 1]) << "swap " << swap << " changed nothing";
  }
}

TEST(loss_test, shards_merged_equal_the_single_run_bit_for_bit) {
  weights w = attnum::test::tiny_model(4);
  round_to_bf16(w);
  const loss_params p = tiny_params();
  const auto single = run_loss(w, p);
  std::vector<unit_result> all;
  for (int shard = 0; shard < 3; ++shard)
    for (const unit_result& r : compute_units(w, p, shard_units(p, shard, 3)))
      all.push_back(unit_result_from_json(nlohmann::json::parse(to_json(r).dump())));  // via files
  const auto merged = summarize(p, w.id, all);
  ASSERT_EQ(merged.size(), single.size());
  for (size_t i = 0; i < single.size(); ++i) EXPECT_EQ(to_json(merged[i]).dump(), to_json(single[i]).dump());
  all.pop_back();
  EXPECT_THROW(summarize(p, w.id, all), attnum::error);
}

TEST(loss_test, forward_is_bit_identical_at_any_thread_count) {
  weights w = attnum::test::tiny_model(5);
  std::vector<int> ids(33);
  for (int i = 0; i < 33; ++i) ids[i] = (i * 7) % 48;
  forward_options opt;
  opt.attention = kernel_attention(attnum::attention::preset("fa3"), "center+rotate");
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = forward(w, ids, opt);
  omp_set_num_threads(2);
  const auto two = forward(w, ids, opt);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(loss_test, compare_logits_matches_closed_forms) {
  // Two tokens: p_ref = softmax(0, log 3) = (1/4, 3/4); p_var = softmax(0, 0) = (1/2, 1/2).
  const float ref[2] = {0.0f, float(std::log(3.0))}, var[2] = {0.0f, 0.0f};
  const label_stat s = compare_logits(ref, var, 2, 0);
  EXPECT_NEAR(s.nll_ref, std::log(4.0), 1e-7);
  EXPECT_NEAR(s.nll_var, std::log(2.0), 1e-12);
  EXPECT_NEAR(s.dp, 0.5 - 0.25, 1e-7);
  EXPECT_NEAR(s.kl, 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5), 1e-7);
  EXPECT_FALSE(s.top1_same);  // argmax 1 vs 0 (first of a tie)
}

TEST(loss_test, bad_parameters_are_errors) {
  const weights w = attnum::test::tiny_model(6);
  loss_params p = tiny_params();
  p.n_tokens = 65;  // context 64
  EXPECT_THROW(validate(p, w), attnum::error);
  p = tiny_params();
  p.windows = 3;  // sources hold 2 windows
  EXPECT_THROW(validate(p, w), attnum::error);
  p = tiny_params();
  p.sources[0][5] = 48;  // outside the vocabulary
  EXPECT_THROW(validate(p, w), attnum::error);
  EXPECT_THROW(attnum::attention::resolve_kernel("no-such-kernel"), attnum::error);
  EXPECT_THROW(kernel_attention(attnum::attention::preset("fa3"), "sideways"), attnum::error);
  EXPECT_THROW(parse_linear_precision("fp8"), attnum::error);
}
// Paired rows from synthetic unit results: the differences are the per-label means (a plain
// loop here), the intervals contain them, and a known autocorrelated difference series gets
// longer blocks and a wider CE interval than independent labels would.
}  // namespace

namespace {
TEST(loss_test, bf16_linear_precision_rounds_every_op_and_stays_close_to_fp32) {
  const weights w32 = attnum::test::tiny_model(8);
  weights w16 = w32;
  round_to_bf16(w16);
  std::vector<int> ids(30);
  for (int i = 0; i < 30; ++i) ids[i] = (11 * i + 2) % 48;
  forward_options o32, o16;
  o32.attention = o16.attention = reference_attention("fp64");
  o16.linear = linear_precision::bf16;
  bool qkv_on_grid = true;
  o16.on_qkv = [&](int, const qkv_view& x) {
    for (int i = 0; i < x.n_head * x.n_tok * x.d_head; ++i)
      qkv_on_grid &= attnum::formats::quantize_bf16(x.q[i]) == x.q[i];
  };
  const auto a = forward(w32, ids, o32), b = forward(w16, ids, o16);
  EXPECT_TRUE(qkv_on_grid);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(attnum::formats::quantize_bf16(b[i]), b[i]) << "logit " << i << " not bf16";
    num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
  }
  // bf16 carries 8 significant bits (unit roundoff 2^-9 ~ 0.2%); a few layers of rounded ops
  // stay within a few percent but must differ from fp32.
  EXPECT_LT(std::sqrt(num / den), 0.05);
  EXPECT_GT(num, 0.0);
}
// Paired rows from synthetic unit results: the differences are the per-label means (a plain
// loop here), the intervals contain them, and a known autocorrelated difference series gets
// longer blocks and a wider CE interval than independent labels would.
}  // namespace

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(loss_test, shard_files_merged_write_the_single_run_files) {
  weights w = attnum::test::tiny_model(9);
  round_to_bf16(w);
  const loss_params p = tiny_params();
  const std::string base =
      std::filesystem::temp_directory_path() / ("attnum_loss_shards_" + std::to_string(::getpid()));
  write_loss_files(base + "/single", run_loss(w, p));
  for (int i = 0; i < 3; ++i)
    write_shard_file(base + "/shards", i, 3, shard_to_json(p, w.id, i, 3, compute_units(w, p, shard_units(p, i, 3))));
  std::vector<paired_row> paired;
  run_loss(w, p, paired);
  write_paired_files(base + "/single", paired);
  merge_shard_dirs({base + "/shards"}, base + "/merged");
  EXPECT_EQ(slurp(base + "/single/loss.json"), slurp(base + "/merged/loss.json"));
  EXPECT_EQ(slurp(base + "/single/loss_paired.json"), slurp(base + "/merged/loss_paired.json"));
  EXPECT_EQ(slurp(base + "/single/loss.csv"), slurp(base + "/merged/loss.csv"));
  // A shard run with other parameters is refused.
  loss_params q = p;
  q.kernel = attnum::attention::preset("sage1");
  write_shard_file(base + "/shards", 0, 3, shard_to_json(q, w.id, 0, 3, {}));
  EXPECT_THROW(merge_shard_dirs({base + "/shards"}, base + "/merged2"), attnum::error);
  std::filesystem::remove_all(base);
}
// Paired rows from synthetic unit results: the differences are the per-label means (a plain
// loop here), the intervals contain them, and a known autocorrelated difference series gets
// a longer block length and a wider CE interval than independent labels would.
TEST(loss_test, paired_rows_from_known_unit_results) {
  loss_params p;
  p.n_tokens = 100, p.windows = 10, p.kernel = attnum::attention::preset("fa3");
  p.conditions = {"plain", "rotate", "center", "center+rotate"};
  p.sources = {std::vector<int>(1001, 1)};
  p.source_names = {"s"};
  p.bootstrap_samples = 400;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  std::vector<unit_result> results;
  // center's NLL = plain's + 0.01 + AR(1) noise (phi 0.8); others independent noise.
  std::vector<double> base(1000), ar(1000);
  double x = 0;
  for (int i = 0; i < 1000; ++i) base[i] = 2 + 0.1 * g(rng), ar[i] = x = 0.8 * x + 0.05 * g(rng);
  for (int c = 0; c < 4; ++c)
    for (int wdw = 0; wdw < 10; ++wdw) {
      unit_result r;
      r.unit = {0, wdw, c};
      for (int i = 0; i < 100; ++i) {
        const int k = wdw * 100 + i;
        const double nv = base[k] + (c == 2 ? 0.01 + ar[k] : c == 0 ? 0.0 : 0.02 * g(rng));
        r.nll_ref.push_back(base[k]);
        r.nll_var.push_back(nv);
        r.kl.push_back(c == 2 ? 0.001 : 0.002);
        r.dp.push_back(0);
        r.top1_same.push_back(c == 2 ? (k % 10 != 0) : (k % 5 != 0));
      }
      results.push_back(r);
    }
  const std::vector<paired_row> rows = summarize_paired(p, "m", results);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].condition_a, "center");
  EXPECT_EQ(rows[0].condition_b, "plain");
  EXPECT_EQ(rows[3].condition_a, "center+rotate");
  EXPECT_EQ(rows[3].condition_b, "plain");
  double d = 0;
  for (int k = 0; k < 1000; ++k) d += 0.01 + ar[k];
  EXPECT_NEAR(rows[0].delta_ce, d / 1000, 1e-12);
  EXPECT_LE(rows[0].delta_ce_lo, rows[0].delta_ce);
  EXPECT_GE(rows[0].delta_ce_hi, rows[0].delta_ce);
  EXPECT_NEAR(rows[0].delta_kl, -0.001, 1e-15);
  EXPECT_NEAR(rows[0].delta_top1, 0.9 - 0.8, 1e-12);
  EXPECT_EQ(rows[0].n_labels, 1000);
  EXPECT_GT(rows[0].block_length, 10);  // AR(1) 0.8: dependence over ~15 lags
  EXPECT_NEAR(rows[0].ce_diff_lag1_autocorrelation, 0.8, 0.06);
  EXPECT_EQ(rows[1].block_length, 10);  // independent noise: the ceil(1000^(1/3)) floor
  // The window means of the AR(1) difference spread about sqrt((1+phi)/(1-phi)) = 3x as far as
  // i.i.d. labels' would; the interval over windows sees it.
  const double sd = 0.05 / std::sqrt(1 - 0.64), iid_half = 1.96 * sd / std::sqrt(1000.0);
  EXPECT_GT(rows[0].delta_ce_hi - rows[0].delta_ce_lo, 2 * 2 * iid_half);
  EXPECT_EQ(rows[0].ci_method, "delete-one-window-jackknife-t (t(9) over 10 text windows; identity scale)");
  EXPECT_EQ(rows[0].n_text_windows, 10);
  EXPECT_TRUE(rows[0].delta_ce_ci_reason.empty());
  // The per-condition rows: the same jackknife over windows (ppl_ratio on the log scale).
  const std::vector<loss_row> ratios = summarize(p, "m", results);
  EXPECT_GT(ratios[2].block_length, 10);
  EXPECT_EQ(ratios[2].ci_method.rfind("delete-one-window-jackknife-t (t(9) over 10 text windows", 0), 0u)
      << ratios[2].ci_method;
  // The interval is the t(9) interval of the windows' log ratios (a plain loop here: the
  // windows have equal sizes, so the jackknife of the pooled mean is the t interval of their
  // means).
  {
    std::vector<double> m(10, 0.0);
    for (int k = 0; k < 1000; ++k) m[size_t(k / 100)] += (0.01 + ar[size_t(k)]) / 100;
    double mu = 0, ss = 0;
    for (double v : m) mu += v / 10;
    for (double v : m) ss += (v - mu) * (v - mu);
    const double se = std::sqrt(ss / 9 / 10), t9 = 2.2621571627409915;
    EXPECT_NEAR(ratios[2].ppl_ratio_lo, std::exp(mu - t9 * se), 1e-12);
    EXPECT_NEAR(ratios[2].ppl_ratio_hi, std::exp(mu + t9 * se), 1e-12);
    EXPECT_NEAR(rows[0].delta_ce_lo, mu - t9 * se, 1e-12);
  }
  {
    loss_params short_windows = p;
    short_windows.n_tokens = 8;  // the same labels read as 125 windows of 8
    EXPECT_EQ(summarize_paired(short_windows, "m", results)[0].block_length, 8);
    EXPECT_EQ(summarize(short_windows, "m", results)[2].block_length, 8);
  }
  EXPECT_LE(ratios[2].ppl_ratio_lo, ratios[2].ppl_ratio);
  EXPECT_GE(ratios[2].ppl_ratio_hi, ratios[2].ppl_ratio);
  // Only the comparisons whose two conditions ran.
  p.conditions = {"plain", "center"};
  std::vector<unit_result> two;
  for (const auto& r : results)
    if (r.unit.condition == 0 || r.unit.condition == 2) {
      two.push_back(r);
      two.back().unit.condition = r.unit.condition == 0 ? 0 : 1;
    }
  const auto pc = summarize_paired(p, "m", two);
  ASSERT_EQ(pc.size(), 1u);
  EXPECT_EQ(pc[0].delta_ce, rows[0].delta_ce);
}
TEST(loss_test, kl_distribution_and_intervals_from_known_unit_results) {
  // llama.cpp's --kl-divergence statistics from per-label values whose order statistics are known:
  // KL over 1,000 labels is a permutation of (1..1000) * 1e-4, so its type-7 percentile at q is
  // (1 + 999 q) * 1e-4; top-1 agrees at random 9 times in 10; dp alternates +-0.1 (RMS 0.1).
  loss_params p;
  p.n_tokens = 100, p.windows = 10, p.kernel = attnum::attention::preset("fa3"), p.conditions = {"plain"};
  p.sources = {std::vector<int>(1001, 1)};
  p.source_names = {"s"};
  std::vector<int> order(1000);
  for (int i = 0; i < 1000; ++i) order[i] = i + 1;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(11));
  std::mt19937_64 rng(12);
  std::normal_distribution<double> g;
  std::vector<unit_result> results;
  int agree = 0;
  for (int wdw = 0; wdw < 10; ++wdw) {
    unit_result r;
    r.unit = {0, wdw, 0};
    for (int i = 0; i < 100; ++i) {
      const int k = wdw * 100 + i;
      r.nll_ref.push_back(2.0);
      r.nll_var.push_back(2.0 + 0.01 * g(rng));
      r.kl.push_back(order[k] * 1e-4);
      r.dp.push_back(k % 2 ? 0.1 : -0.1);
      r.top1_same.push_back(rng() % 10 != 0);
      agree += r.top1_same.back();
    }
    results.push_back(r);
  }
  const loss_row r = summarize(p, "m", results).at(0);
  auto q = [](double x) { return (1 + 999 * x) * 1e-4; };
  EXPECT_NEAR(r.kl_mean, 500.5e-4, 1e-15);
  EXPECT_NEAR(r.kl_p50, q(0.50), 1e-15);
  EXPECT_NEAR(r.kl_p90, q(0.90), 1e-15);
  EXPECT_NEAR(r.kl_p99, q(0.99), 1e-15);
  EXPECT_NEAR(r.kl_p999, q(0.999), 1e-15);
  EXPECT_DOUBLE_EQ(r.kl_min, 1e-4);
  EXPECT_DOUBLE_EQ(r.kl_max, 1000e-4);
  EXPECT_DOUBLE_EQ(r.top1_agreement, agree / 1000.0);
  EXPECT_NEAR(r.dp_rms, 0.1, 1e-15);
  // Every interval brackets its statistic and has width; a constant series' (dp_rms: 0.1 in
  // every window) has zero width and so none; kl_p99, a high quantile, has none.
  for (const auto& [v, lo, hi] :
       {std::tuple{r.kl_mean, r.kl_mean_lo, r.kl_mean_hi}, std::tuple{r.kl_p50, r.kl_p50_lo, r.kl_p50_hi},
        std::tuple{r.kl_p90, r.kl_p90_lo, r.kl_p90_hi},
        std::tuple{r.top1_agreement, r.top1_agreement_lo, r.top1_agreement_hi}}) {
    EXPECT_LT(lo, v);
    EXPECT_GT(hi, v);
  }
  EXPECT_TRUE(std::isnan(r.dp_rms_lo) && std::isnan(r.dp_rms_hi));
  EXPECT_NE(r.dp_rms_ci_reason.find("zero width"), std::string::npos) << r.dp_rms_ci_reason;
  EXPECT_TRUE(std::isnan(r.kl_p99_lo) && std::isnan(r.kl_p99_hi));
  EXPECT_NE(r.kl_p99_ci_reason.find("high quantile"), std::string::npos) << r.kl_p99_ci_reason;
  EXPECT_TRUE(r.kl_mean_ci_reason.empty() && r.ppl_ratio_ci_reason.empty());
  // The median of a uniform sample's 95% interval: about +-1.96 sqrt(0.25/1000) in quantile
  // terms (order statistics; windows are random subsets here), times t(9)/1.96 = 1.15, here
  // within a factor of two of that.
  const double half = 1.96 * std::sqrt(0.25 / 1000) * 999e-4;
  EXPECT_GT(r.kl_p50_hi - r.kl_p50_lo, half);
  EXPECT_LT(r.kl_p50_hi - r.kl_p50_lo, 4 * half);
  // The binomial interval of top-1 agreement, same order: 1.96 sqrt(0.09/1000) each side.
  const double th = 1.96 * std::sqrt(r.top1_agreement * (1 - r.top1_agreement) / 1000);
  EXPECT_GT(r.top1_agreement_hi - r.top1_agreement_lo, th);
  EXPECT_LT(r.top1_agreement_hi - r.top1_agreement_lo, 4 * th);
  // In the files: every new field; an interval that is not available has null bounds and a
  // reason, one that is has numbers and a null reason.
  const nlohmann::json j = to_json(r);
  for (const char* k : {"kl_p50", "kl_p50_lo", "kl_p50_hi", "kl_p90", "kl_p99", "kl_p999", "kl_max", "kl_min",
                        "kl_mean_lo", "kl_mean_hi", "top1_agreement_lo", "top1_agreement_hi", "dp_rms_lo", "dp_rms_hi",
                        "n_text_windows", "block_length", "n_blocks", "ci_method", "ci_dropped"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"dp_rms", "kl_p99"}) {
    EXPECT_TRUE(j[std::string(k) + "_lo"].is_null() && j[std::string(k) + "_hi"].is_null()) << k;
    EXPECT_TRUE(j[std::string(k) + "_ci_reason"].is_string()) << k;
  }
  for (const char* k : {"ppl_ratio", "kl_mean", "kl_p50", "kl_p90", "top1_agreement"}) {
    EXPECT_TRUE(j[std::string(k) + "_lo"].is_number() && j[std::string(k) + "_hi"].is_number()) << k;
    EXPECT_TRUE(j[std::string(k) + "_ci_reason"].is_null()) << k;
  }
  EXPECT_EQ(j["n_text_windows"], 10);
}

// Fewer than kMinLossWindows text windows: no interval anywhere, each with the reason, null
// bounds in both files' JSON and "n/a" wherever a table prints them.
TEST(loss_test, too_few_text_windows_give_no_interval_with_the_reason) {
  loss_params p;
  p.n_tokens = 50, p.windows = 2, p.kernel = attnum::attention::preset("fa3"), p.conditions = {"plain", "rotate"};
  p.sources = {std::vector<int>(101, 1)};
  p.source_names = {"s"};
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  std::vector<unit_result> results;
  for (int c = 0; c < 2; ++c)
    for (int wdw = 0; wdw < 2; ++wdw) {
      unit_result r;
      r.unit = {0, wdw, c};
      for (int i = 0; i < 50; ++i) {
        r.nll_ref.push_back(2.0);
        r.nll_var.push_back(2.0 + 0.1 * g(rng));
        r.kl.push_back(0.01 * (1 + std::fabs(g(rng))));
        r.dp.push_back(0.01 * g(rng));
        r.top1_same.push_back(rng() % 4 != 0);
      }
      results.push_back(r);
    }
  const loss_row r = summarize(p, "m", results).at(0);
  const paired_row q = summarize_paired(p, "m", results).at(0);
  EXPECT_EQ(r.n_text_windows, 2);
  EXPECT_EQ(r.ci_method, "none: 2 text windows (an interval over text windows needs at least 3)");
  const std::string why = "2 text windows: an interval over text windows needs at least 3";
  for (const std::string& reason :
       {r.ppl_ratio_ci_reason, r.kl_mean_ci_reason, r.kl_p50_ci_reason, r.kl_p90_ci_reason, r.top1_agreement_ci_reason,
        r.dp_rms_ci_reason, q.delta_ce_ci_reason, q.delta_kl_ci_reason, q.delta_top1_ci_reason})
    EXPECT_EQ(reason, why);
  const nlohmann::json j = to_json(r), k = to_json(q);
  for (const char* s : {"ppl_ratio", "kl_mean", "kl_p50", "kl_p90", "kl_p99", "top1_agreement", "dp_rms"}) {
    EXPECT_TRUE(j[std::string(s) + "_lo"].is_null() && j[std::string(s) + "_hi"].is_null()) << s;
    EXPECT_TRUE(j[std::string(s) + "_ci_reason"].is_string()) << s;
  }
  for (const char* s : {"delta_ce", "delta_kl", "delta_top1"}) {
    EXPECT_TRUE(k[std::string(s) + "_lo"].is_null() && k[std::string(s) + "_hi"].is_null()) << s;
    EXPECT_EQ(k[std::string(s) + "_ci_reason"], why) << s;
  }
  // The statistics themselves are there.
  EXPECT_TRUE(j["ppl_ratio"].is_number() && k["delta_ce"].is_number());
  // Three windows: intervals again.
  p.windows = 3, p.sources = {std::vector<int>(151, 1)};
  for (int c = 0; c < 2; ++c) {
    unit_result extra = results[size_t(c) * 2];
    extra.unit = {0, 2, c};
    for (double& v : extra.nll_var) v += 0.05 * (c + 1);
    results.push_back(extra);
  }
  const loss_row r3 = summarize(p, "m", results).at(0);
  EXPECT_TRUE(std::isfinite(r3.ppl_ratio_lo) && r3.ppl_ratio_lo < r3.ppl_ratio && r3.ppl_ratio < r3.ppl_ratio_hi);
  EXPECT_EQ(to_json(r3)["ppl_ratio_ci_reason"], nullptr);
}
}  // namespace
