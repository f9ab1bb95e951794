// Head study: the mechanisms the zoo is built to show (a large concentrated shared key vector is
// harmed by rotation, per-channel outliers are helped), the predictor's accuracy where the first
// order model holds, and the reproducibility of the result files (resume after a kill, threads).
#include "attnum/study/head_study.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "attnum/core/error.h"
#include "cli_util.h"
#include "attnum/core/parallel.h"
#include "attnum/stats/stats.h"
#include "attnum/study/emulate.h"
#include "attnum/study/zoo.h"

using namespace attnum;
namespace fs = std::filesystem;

namespace {

// Mean over texts of log1p(rel_err) and log1p(predicted rel_err) of one head under fa3.
struct errs {
  double obs = 0, pred = 0;
};
errs run_condition(const study::head_params& hp, int cond, int texts) {
  errs e;
  for (int t = 0; t < texts; ++t) {
    const auto z = study::zoo_generate_from({hp}, t);
    const int n = z.n_tok, d = z.d_head;
    const auto ref = study::reference_causal(z.q.data(), z.k.data(), z.v.data(), n, d);
    const auto runs = study::run_group(attention::preset("fa3"), cond, z.q.data(), z.k.data(), z.v.data(), 1, n, d);
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.o.size(); ++i) num += std::pow(runs[0].o[i] - ref.o[i], 2), den += ref.o[i] * ref.o[i];
    predict::head_inputs in;
    in.n_q = n, in.n_kv = n, in.d = d;
    in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
    in.q = runs[0].q.data(), in.k = runs[0].k.data(), in.v = z.v.data();
    in.var_q = runs[0].var_q.data(), in.var_k = runs[0].var_k.data();
    in.var_v = runs[0].var_v.data();
    in.p_cast = runs[0].p_cast;
    const auto p = predict::predict_head(in);
    e.obs += std::log1p(std::sqrt(num / den)) / texts;
    e.pred += std::log1p(p.rel_err) / texts;
  }
  return e;
}

study::head_params base_head() {
  study::head_params p;
  p.d_head = 128, p.n_tok = 256, p.temperature = 2.0, p.seed = 12345;
  return p;
}

}  // namespace

TEST(head_study_test, large_concentrated_shared_key_is_harmed_by_rotation) {
  study::head_params hp = base_head();
  hp.shared_kind = 1, hp.shared_ratio = 30;
  const errs plain = run_condition(hp, 0, 2), rot = run_condition(hp, 1, 2);
  EXPECT_GT(rot.obs - plain.obs, 0) << "observed";
  EXPECT_GT(rot.pred - plain.pred, 0) << "predicted";
  // Centering removes b exactly: center+rotate is not harmed.
  const errs cr = run_condition(hp, 3, 2);
  EXPECT_LT(cr.obs, rot.obs);
}

TEST(head_study_test, per_channel_outliers_are_helped_by_rotation) {
  study::head_params hp = base_head();
  hp.n_outlier = 2, hp.outlier_scale = 16;
  const errs plain = run_condition(hp, 0, 2), rot = run_condition(hp, 1, 2);
  EXPECT_LT(rot.obs - plain.obs, 0) << "observed";
  EXPECT_LT(rot.pred - plain.pred, 0) << "predicted";
}

TEST(head_study_test, predictor_within_factor_two_where_first_order_holds) {
  // Heads without a shared key vector (whose rounding is correlated over tokens, which the
  // model's independence assumption does not see; docs/predictor.md): every condition.
  for (int kind = 0; kind < 3; ++kind)
    for (int cond = 0; cond < 4; ++cond) {
      study::head_params hp = base_head();
      hp.d_head = kind == 1 ? 64 : 128;
      hp.sink = kind == 2 ? 6 : 0;
      hp.n_outlier = kind == 1 ? 1 : 0, hp.outlier_scale = 8;
      hp.v_dof = kind == 2 ? 4 : 0;
      hp.seed = 100 + kind;
      const auto z = study::zoo_generate_from({hp}, 0);
      const int n = z.n_tok, d = z.d_head;
      const auto ref = study::reference_causal(z.q.data(), z.k.data(), z.v.data(), n, d);
      const auto r = study::run_group(attention::preset("fa3"), cond, z.q.data(), z.k.data(), z.v.data(), 1, n, d)[0];
      double num = 0, den = 0;
      for (size_t i = 0; i < ref.o.size(); ++i) num += std::pow(r.o[i] - ref.o[i], 2), den += ref.o[i] * ref.o[i];
      predict::head_inputs in;
      in.n_q = n, in.n_kv = n, in.d = d;
      in.p = ref.p.data(), in.o = ref.o.data(), in.row_sum = ref.row_sum.data();
      in.q = r.q.data(), in.k = r.k.data(), in.v = z.v.data();
      in.var_q = r.var_q.data(), in.var_k = r.var_k.data(), in.var_v = r.var_v.data();
      in.p_cast = r.p_cast;
      const double ratio = predict::predict_head(in).rel_err / std::sqrt(num / den);
      EXPECT_GT(ratio, 0.5) << "kind " << kind << " cond " << cond;
      EXPECT_LT(ratio, 2.0) << "kind " << kind << " cond " << cond;
    }
}

namespace {
std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
void expect_same_files(const fs::path& a, const fs::path& b) {
  for (const char* f : {"meta.json", "rows.csv", "rows.jsonl", "heads.csv", "heads.jsonl", "summary.json"}) {
    ASSERT_TRUE(fs::exists(a / f)) << (a / f);
    ASSERT_TRUE(fs::exists(b / f)) << (b / f);
    EXPECT_EQ(attnum::test::comparable_result(a / f), attnum::test::comparable_result(b / f)) << f;
  }
}
study::plan small_plan() {
  study::study_options o;
  o.zoo_opt.n_tok = 32;
  o.zoo_opt.n_layer_cap = 1;
  o.n_texts = 2;
  o.kernels = {attention::preset("fa3")};
  o.conditions = {"plain", "rotate", "center", "center+rotate"};
  o.bootstrap_resamples = 50;
  o.command = "test";
  return study::make_plan(o);
}
fs::path fresh(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnum_study_test_" + name);
  fs::remove_all(d);
  return d;
}
}  // namespace

TEST(head_study_test, killed_and_resumed_run_gives_identical_files) {
  const study::plan p = small_plan();
  ASSERT_EQ(p.units.size(), 12u);  // 6 models x 1 layer x 2 texts
  const fs::path full = fresh("full"), part = fresh("part");
  study::run_controls ctl;
  ctl.progress = false;
  ASSERT_TRUE(study::run_study(p, full, ctl));
  study::run_controls stop = ctl;
  stop.stop_after = 5;  // "killed" after 5 units
  EXPECT_FALSE(study::run_study(p, part, stop));
  EXPECT_FALSE(fs::exists(part / "rows.csv"));
  // A torn checkpoint (a kill during a write leaves a temp file, never a partial unit file) and
  // a truncated one are recomputed.
  std::ofstream(study::unit_path(part, 7)) << "{\"model\":";
  EXPECT_TRUE(study::run_study(p, part, ctl));
  expect_same_files(full, part);
  fs::remove_all(part);
  fs::remove_all(full);
}

TEST(head_study_test, one_and_two_threads_and_shards_give_identical_files) {
  const study::plan p = small_plan();
  const fs::path one = fresh("t1"), two = fresh("t2"), sh = fresh("sh");
  study::run_controls ctl;
  ctl.progress = false;
  attnum::set_threads(1);
  ASSERT_TRUE(study::run_study(p, one, ctl));
  attnum::set_threads(2);
  ASSERT_TRUE(study::run_study(p, two, ctl));
  expect_same_files(one, two);
  // Three shards into one folder, in any order: the last one assembles.
  for (int s : {2, 0, 1}) {
    study::run_controls c = ctl;
    c.shard_index = s, c.shard_count = 3;
    EXPECT_EQ(study::run_study(p, sh, c), s == 1);
  }
  expect_same_files(one, sh);
  // Three shards into three folders, merged (attnum merge): the same files; a missing shard fails.
  std::vector<fs::path> parts;
  for (int s = 0; s < 3; ++s) {
    parts.push_back(fresh("part" + std::to_string(s)));
    study::run_controls c = ctl;
    c.shard_index = s, c.shard_count = 3;
    EXPECT_FALSE(study::run_study(p, parts.back(), c));
  }
  const fs::path merged = fresh("merged"), partial = fresh("partial");
  study::merge(parts, merged);
  expect_same_files(one, merged);
  EXPECT_THROW(study::merge({parts[0], parts[2]}, partial), attnum::error);
  for (const auto& d : {one, two, sh, merged, partial}) fs::remove_all(d);
  for (const auto& d : parts) fs::remove_all(d);
}

TEST(head_study_test, a_folder_from_another_config_is_refused) {
  const study::plan p = small_plan();
  const fs::path d = fresh("cfg");
  study::run_controls ctl;
  ctl.progress = false;
  ctl.stop_after = 0;
  study::run_study(p, d, ctl);
  study::study_options o = p.opt;
  o.n_texts = 3;
  EXPECT_THROW(study::run_study(study::make_plan(o), d, ctl), attnum::error);
  fs::remove_all(d);
}

TEST(head_study_test, zoo_is_deterministic_and_records_parameters) {
  study::zoo_options zo;
  zo.n_tok = 32;
  int n_heads = 0;
  for (const auto& zm : study::zoo_models(zo)) n_heads += zm.n_layer * zm.n_head;
  EXPECT_EQ(n_heads, 672);
  const auto a = study::zoo_generate(zo, 2, 3, 1, 0), b = study::zoo_generate(zo, 2, 3, 1, 0);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.k, b.k);
  const auto c = study::zoo_generate(zo, 2, 3, 1, 1);
  EXPECT_NE(a.k, c.k);            // another text is another draw
  EXPECT_EQ(a.heads.size(), 4u);  // model c: 8 heads, 2 kv heads
  EXPECT_EQ(a.heads[0].kv_head, 1);
}

// run_prepared computes only the parts asked for, and those parts are the full run's bits: the
// output alone (what the rows' errors need) and the casts' operands alone (what a fixed predictor
// model needs; the kernel's emulation is then not run).
TEST(head_study_test, run_prepared_computes_only_the_parts_asked_for) {
  study::zoo_options zo;
  zo.n_tok = 64;
  const auto z = study::zoo_generate(zo, 2, 0, 0, 0);  // model c: d 64, 4 query heads per kv head
  const int g = static_cast<int>(z.heads.size());
  for (const char* kernel : {"fa3", "sage2pp-sm89"}) {
    const auto run =
        study::prepare_run(attention::preset(kernel), 3, {z.q.data(), z.k.data(), z.v.data(), g, 1, 64, 64});
    for (int h = 0; h < g; ++h) {
      const study::head_run full = study::run_prepared(*run, h);
      ASSERT_EQ(full.o.size(), 64u * 64u);
      ASSERT_FALSE(full.var_q.empty() || full.var_k.empty() || full.var_v.empty());
      const study::head_run out = study::run_prepared(*run, h, {true, false, false, false});
      EXPECT_EQ(out.o, full.o);
      EXPECT_TRUE(out.q.empty() && out.k.empty() && out.var_q.empty() && out.var_k.empty() && out.var_v.empty());
      const study::head_run ops = study::run_prepared(*run, h, {false, true, true, h == 0});
      EXPECT_TRUE(ops.o.empty());
      EXPECT_EQ(ops.q, full.q);
      EXPECT_EQ(ops.k, full.k);
      EXPECT_EQ(ops.var_q, full.var_q);
      EXPECT_EQ(ops.var_v, full.var_v);
      EXPECT_EQ(ops.var_k.empty(), h != 0);
      if (h == 0) {
        EXPECT_EQ(ops.var_k, full.var_k);
      }
      EXPECT_EQ(ops.p_cast.enabled, full.p_cast.enabled);
      EXPECT_EQ(ops.p_cast.scale, full.p_cast.scale);
      EXPECT_EQ(ops.out_fmt, full.out_fmt);
    }
  }
}

// A fixed predictor model that is not among the kernels (its emulation output is never computed)
// predicts exactly what the kernel-aware predictor predicts for that preset run as the kernel; the
// rows' own errors are the kernel's.
TEST(head_study_test, fixed_predictor_without_its_emulation_equals_the_kernel_aware_one) {
  study::study_options o;
  o.zoo_opt.n_tok = 48;
  o.zoo_opt.n_layer_cap = 1;
  o.n_texts = 1;
  o.conditions = {"plain", "rotate", "center+rotate"};
  o.kernels = {attention::preset("fa3")};
  study::study_options fixed = o, aware_fa3 = o, aware_xqa = o;
  fixed.predictor_model = "xqa-sm90";
  aware_xqa.kernels = {attention::preset("xqa-sm90")};
  const study::plan pf = study::make_plan(fixed), pa = study::make_plan(aware_fa3), px = study::make_plan(aware_xqa);
  for (int i : {0, 2, 5}) {  // models a, c and f (d 128 and 64, GQA groups)
    const auto rf = study::compute_unit(pf, i), ra = study::compute_unit(pa, i), rx = study::compute_unit(px, i);
    ASSERT_EQ(rf.size(), ra.size());
    ASSERT_EQ(rf.size(), rx.size());
    for (size_t r = 0; r < rf.size(); ++r) {
      EXPECT_EQ(rf[r].predictor_model, "xqa-sm90");
      EXPECT_EQ(rf[r].predicted_rel_err, rx[r].predicted_rel_err) << "unit " << i << " row " << r;
      EXPECT_EQ(rf[r].rel_err, ra[r].rel_err) << "unit " << i << " row " << r;
      EXPECT_EQ(rf[r].cosine, ra[r].cosine);
      EXPECT_NE(rf[r].rel_err, rx[r].rel_err);  // fa3's errors, not xqa-sm90's
    }
  }
}

// The row schemas are written once: rows.csv and heads.csv headers are the field lists,
// rows.jsonl and heads.jsonl objects hold exactly those fields, and a checkpoint row reads back
// to the same row.
TEST(head_study_test, result_files_follow_the_one_field_list_per_row_type) {
  const study::plan p = small_plan();
  const fs::path d = fresh("schema");
  study::run_controls ctl;
  ctl.progress = false;
  ASSERT_TRUE(study::run_study(p, d, ctl));
  auto header = [&](const char* f) {
    std::istringstream in(slurp(d / f));
    std::string line;
    std::getline(in, line);
    return line;
  };
  auto joined = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  EXPECT_EQ(header("rows.csv"), joined(study::row_columns(false)));
  EXPECT_EQ(header("heads.csv"), joined(study::head_columns(false)));
  EXPECT_EQ(header("zoo_heads.csv"), joined(study::zoo_head_columns()));
  for (const auto& [file, cols] :
       {std::pair{"rows.jsonl", study::row_columns(false)}, std::pair{"heads.jsonl", study::head_columns(false)}}) {
    std::istringstream in(slurp(d / file));
    int n = 0;
    for (std::string line; std::getline(in, line); ++n) {
      const nlohmann::json j = nlohmann::json::parse(line);
      std::vector<std::string> keys;
      for (const auto& [k, v] : j.items()) keys.push_back(k);
      std::vector<std::string> want = cols;
      std::sort(want.begin(), want.end());
      EXPECT_EQ(keys, want) << file;
    }
    EXPECT_GT(n, 0) << file;
  }
  // Transfer columns: the kernel_* fields, before predictor_model.
  const auto t = study::head_columns(true);
  EXPECT_EQ(t.size(), study::head_columns(false).size() + 4);
  EXPECT_EQ(*(std::find(t.begin(), t.end(), "kernel_label") + 1), "predictor_model");
  const auto rows = study::read_unit(d, p, 3);
  ASSERT_TRUE(rows && !rows->empty());
  for (const auto& r : *rows) EXPECT_EQ(study::row_json(study::row_from_json(study::row_json(r))), study::row_json(r));
  fs::remove_all(d);
}

// Texts as a factor: each summary row's *_loto_min/_max are the range, over the texts, of the
// statistic of the study without that text, recomputed here by a plain loop from rows.jsonl's
// rows (per head: mean over the kept texts of log1p errors, transform minus plain).
TEST(head_study_test, leave_one_text_out_ranges_match_a_plain_loop) {
  study::plan p = small_plan();
  {
    study::study_options o = p.opt;
    o.n_texts = 3;
    o.kernels = {attention::preset("fa3"), attention::preset("sage2pp-sm89")};
    p = study::make_plan(o);
  }
  const fs::path d = fresh("loto");
  study::run_controls ctl;
  ctl.progress = false;
  ASSERT_TRUE(study::run_study(p, d, ctl));
  const study::assembled a = study::assemble_tables(p, d);
  ASSERT_EQ(a.summary.size(), 6u);  // 2 kernels x 3 transforms
  for (const nlohmann::json& s : a.summary) {
    const std::string kernel = s["kernel"], transform = s["transform"];
    ASSERT_EQ(s["n_texts_loto"], 3);
    std::vector<double> aucs, rhos, harmed, recalls;
    for (int left = 0; left < 3; ++left) {
      // (model, layer, head) -> [transform, plain] sums of observed and predicted log1p errors
      std::map<std::tuple<std::string, int, int>, std::array<double, 4>> sum;
      std::map<std::tuple<std::string, int, int>, int> n;
      for (const study::row& r : a.rows) {
        if (r.text == left || r.kernel != kernel || (r.condition != transform && r.condition != "plain")) continue;
        auto& v = sum[{r.model, r.layer, r.head}];
        const int at = r.condition == "plain" ? 2 : 0;
        v[at] += r.log_err, v[at + 1] += std::log1p(r.predicted_rel_err);
        n[{r.model, r.layer, r.head}] += r.condition == "plain";
      }
      std::vector<double> obs, pred;
      std::vector<uint8_t> pos;
      for (const auto& [key, v] : sum) {
        const double k = n[key];
        obs.push_back(v[0] / k - v[2] / k), pred.push_back(v[1] / k - v[3] / k), pos.push_back(obs.back() > 0);
      }
      aucs.push_back(stats::roc_auc(pred, pos).value_or(NAN));
      rhos.push_back(stats::spearman(pred, obs).value_or(NAN));
      harmed.push_back(std::count(pos.begin(), pos.end(), 1));
      double tp = 0;
      for (size_t i = 0; i < pos.size(); ++i) tp += pos[i] && pred[i] > 0;
      if (harmed.back() > 0) recalls.push_back(tp / harmed.back());
    }
    const auto lo_hi = [](std::vector<double> x) {
      return std::make_pair(*std::min_element(x.begin(), x.end()), *std::max_element(x.begin(), x.end()));
    };
    const auto [auc_lo, auc_hi] = lo_hi(aucs);
    const auto [rho_lo, rho_hi] = lo_hi(rhos);
    const auto [h_lo, h_hi] = lo_hi(harmed);
    EXPECT_NEAR(s["auc_loto_min"].get<double>(), auc_lo, 1e-12) << kernel << " " << transform;
    EXPECT_NEAR(s["auc_loto_max"].get<double>(), auc_hi, 1e-12) << kernel << " " << transform;
    EXPECT_NEAR(s["spearman_loto_min"].get<double>(), rho_lo, 1e-12) << kernel << " " << transform;
    EXPECT_NEAR(s["spearman_loto_max"].get<double>(), rho_hi, 1e-12) << kernel << " " << transform;
    EXPECT_EQ(s["n_harmed_sign_loto_min"].get<double>(), h_lo);
    EXPECT_EQ(s["n_harmed_sign_loto_max"].get<double>(), h_hi);
    if (recalls.empty()) {
      EXPECT_TRUE(s["recall_loto_min"].is_null());
    } else {
      const auto [r_lo, r_hi] = lo_hi(recalls);
      EXPECT_NEAR(s["recall_loto_min"].get<double>(), r_lo, 1e-12) << kernel << " " << transform;
      EXPECT_NEAR(s["recall_loto_max"].get<double>(), r_hi, 1e-12) << kernel << " " << transform;
    }
  }
  // One text: no range.
  {
    study::study_options o = p.opt;
    o.n_texts = 1;
    const study::plan one = study::make_plan(o);
    const fs::path d1 = fresh("loto1");
    ASSERT_TRUE(study::run_study(one, d1, ctl));
    EXPECT_FALSE(study::assemble_tables(one, d1).summary[0].contains("auc_loto_min"));
    fs::remove_all(d1);
  }
  fs::remove_all(d);
}

// The kernel-aware predictor sees the transform's own rounding (kernel_spec::transform_dtype):
// on the zoo's first layer under Sage (INT8 Q/K, whose step near a group's amax is about bf16's
// spacing), switching the transform dtype from fp32 to bf16 moves the median head's predicted
// score by at least half of the observed move, in the same direction; the plain condition does
// not transform, so its predicted errors do not move at all.
TEST(head_study_test, predicted_scores_follow_the_transform_dtype) {
  std::map<std::string, std::vector<nlohmann::json>> heads;
  std::map<std::string, std::vector<study::row>> rows;
  for (const std::string td : {"bf16", "fp32"}) {
    study::study_options o;
    o.zoo_opt.n_tok = 256;
    o.zoo_opt.n_layer_cap = 1;
    o.n_texts = 1;
    o.knobs = {"transform_dtype=" + td};
    o.kernels = {attention::apply_knobs(attention::preset("sage2pp-sm89"), o.knobs)};
    o.conditions = {"plain", "rotate"};
    o.bootstrap_resamples = 20;
    o.command = "test";
    const study::plan p = study::make_plan(o);
    const fs::path d = fresh("td_" + td);
    study::run_controls ctl;
    ctl.progress = false;
    ASSERT_TRUE(study::run_study(p, d, ctl));
    const study::assembled a = study::assemble_tables(p, d);
    heads[td] = std::vector<nlohmann::json>(a.heads.begin(), a.heads.end());
    rows[td] = a.rows;
    fs::remove_all(d);
  }
  ASSERT_EQ(heads["bf16"].size(), heads["fp32"].size());
  std::vector<double> obs, pred;
  for (size_t i = 0; i < heads["bf16"].size(); ++i) {
    const auto &b = heads["bf16"][i], &f = heads["fp32"][i];
    ASSERT_EQ(b["head"], f["head"]);
    obs.push_back(b["observed_score"].get<double>() - f["observed_score"].get<double>());
    pred.push_back(b["predicted_score"].get<double>() - f["predicted_score"].get<double>());
  }
  const auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
  };
  const double mo = median(obs), mp = median(pred);
  EXPECT_GT(mo, 0) << "bf16 transform rounding should harm the rotated heads under Sage";
  EXPECT_GE(mp, 0.5 * mo) << "observed median shift " << mo << ", predicted " << mp;
  EXPECT_LE(mp, 2.0 * mo) << "observed median shift " << mo << ", predicted " << mp;
  // plain: the same predicted errors bit for bit under either transform dtype.
  for (size_t i = 0; i < rows["bf16"].size(); ++i) {
    if (rows["bf16"][i].condition != "plain") continue;
    EXPECT_EQ(rows["bf16"][i].predicted_rel_err, rows["fp32"][i].predicted_rel_err) << i;
  }
}
