// The attention-sink simulation: the idealized kernel (Algorithm 1), the fp64 reference, sweeps.
#include "attnum/pcast/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"
#include "attnum/core/random.h"
#include "attnum/attention/reference.h"
#include "attnum/formats/format.h"

namespace attnum::pcast {
namespace {

// core::splitmix64 (std::normal_distribution is not portable), with this simulation's normal:
// Box-Muller from two uniforms in (0, 1), one value per call (keeps the stream simple).
struct rng : core::splitmix64 {
  explicit rng(uint64_t seed) : splitmix64(seed) {}
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform_open())) * std::cos(2.0 * std::numbers::pi * uniform_open());
  }
};

// fp64 softmax(z) . v of one row through the project's one reference (attention/reference.h).
std::vector<double> reference_row_d(const double* z, const double* v, int n_tok, int d_head) {
  return attention::reference_from_scores(z, v, 1, n_tok, d_head, false).o;
}

uint64_t mix(uint64_t a, uint64_t b) { return rng{a * 0x2545f4914f6cdd1dULL ^ b}.next(); }

// fp32 dot product with 8 partial sums in a fixed order (deterministic, vectorizable).
float dot_f32(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The data of one (n_tok, seed): per query row the base normals of the scores (sinks get Delta
// added later) or Q and K for the qk source, and V.
struct unit_data {
  int n_tok = 0, d = 0, rows = 0;
  std::vector<double> base;  // inject: [rows, n_tok] sigma * N(0,1)
  std::vector<float> q;      // qk: [rows, d]
  std::vector<float> k0;     // qk: [n_tok, d] sigma * N(0,1) (sinks get (Delta / beta) u added)
  std::vector<float> u;      // qk: unit direction shared by the sink keys and the queries
  std::vector<float> v;      // [n_tok, d] N(0,1)
};

// Queries q = sqrt(d) (beta u + sqrt(1 - beta^2) w) with |w| = 1, w orthogonal to u, so
// q.k / sqrt(d) ~ N(0, sigma^2) for k ~ sigma N(0, I), and a sink key k + (Delta / beta) u adds
// exactly Delta. beta = 1/2 keeps the sink keys' extra norm moderate (2 Delta).
constexpr double kBeta = 0.5;

unit_data make_unit(const sim_config& c, int n_tok, int seed_index) {
  unit_data u;
  u.n_tok = n_tok;
  u.d = c.d_head;
  u.rows = c.q_rows;
  rng r{mix(mix(c.seed, static_cast<uint64_t>(seed_index)), static_cast<uint64_t>(n_tok))};
  const size_t nd = static_cast<size_t>(n_tok) * c.d_head;
  u.v.resize(nd);
  for (auto& x : u.v) x = static_cast<float>(r.normal());
  if (c.source == score_source::inject) {
    u.base.resize(static_cast<size_t>(c.q_rows) * n_tok);
    for (auto& x : u.base) x = c.sigma * r.normal();
    return u;
  }
  const int d = c.d_head;
  std::vector<double> dir(d);
  double norm = 0;
  for (auto& x : dir) {
    x = r.normal();
    norm += x * x;
  }
  u.u.resize(d);
  for (int i = 0; i < d; ++i) u.u[i] = static_cast<float>(dir[i] / std::sqrt(norm));
  u.q.resize(static_cast<size_t>(c.q_rows) * d);
  for (int row = 0; row < c.q_rows; ++row) {
    std::vector<double> w(d);
    double wu = 0, wn = 0;
    for (int i = 0; i < d; ++i) {
      w[i] = r.normal();
      wu += w[i] * u.u[i];
    }
    for (int i = 0; i < d; ++i) {
      w[i] -= wu * u.u[i];
      wn += w[i] * w[i];
    }
    const double a = kBeta, b = std::sqrt(1 - kBeta * kBeta) / std::sqrt(wn);
    for (int i = 0; i < d; ++i)
      u.q[static_cast<size_t>(row) * d + i] = static_cast<float>(std::sqrt(double(d)) * (a * u.u[i] + b * w[i]));
  }
  u.k0.resize(nd);
  for (auto& x : u.k0) x = static_cast<float>(c.sigma * r.normal());
  return u;
}

// Scores of one row for one Delta: fp32 for the kernel, fp64 for the reference.
void row_scores(const sim_config& c, const unit_data& u, int row, double delta, std::vector<float>& zf,
                std::vector<double>& zd, std::vector<float>& ksink) {
  const int n = u.n_tok, d = u.d, k = std::min(c.k_sink, n);
  zf.resize(n);
  zd.resize(n);
  if (c.source == score_source::inject) {
    for (int j = 0; j < n; ++j) {
      zf[j] = static_cast<float>(u.base[static_cast<size_t>(row) * n + j] + (j < k ? delta : 0.0));
      zd[j] = zf[j];  // the reference sees the very same scores
    }
    return;
  }
  const float* q = &u.q[static_cast<size_t>(row) * d];
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(double(d)));
  ksink.resize(static_cast<size_t>(k) * d);
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < d; ++i)
      ksink[static_cast<size_t>(j) * d + i] =
          u.k0[static_cast<size_t>(j) * d + i] + static_cast<float>(delta / kBeta) * u.u[i];
  for (int j = 0; j < n; ++j) {
    const float* kj = j < k ? &ksink[static_cast<size_t>(j) * d] : &u.k0[static_cast<size_t>(j) * d];
    zf[j] = dot_f32(q, kj, d) * inv_sqrt_d;
    double s = 0;
    for (int i = 0; i < d; ++i) s += static_cast<double>(q[i]) * kj[i];
    zd[j] = s / std::sqrt(double(d));
  }
}

// Partial results of one (unit, delta, variant).
struct partial {
  kernel_counts counts;
  double sumsq = 0;
};

struct variant {
  double scale;
  block_order order;
  double threshold;
};

double sample_sd(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  double m = 0, s = 0;
  for (double v : x) m += v;
  m /= static_cast<double>(x.size());
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

void check_config(const sim_config& c) {
  if (c.d_head < 1 || c.k_sink < 0 || c.block < 1 || c.q_rows < 1 || c.seeds < 1)
    fail(
        "pcast simulate: d_head {} k_sink {} block {} q_rows {} seeds {}: expected d_head, "
        "block, q_rows, seeds >= 1 and k_sink >= 0",
        c.d_head, c.k_sink, c.block, c.q_rows, c.seeds);
  for (int n : c.n_toks) {
    if (n < 1 || n < c.k_sink) fail("pcast simulate: n_tok {}: expected >= max(1, k_sink)", n);
    // One unit holds V [n_tok, d_head] and the scores of q_rows rows: keep it under ~2 GiB.
    if (int64_t(n) * (int64_t(c.d_head) + 2 * int64_t(c.q_rows)) > (int64_t(1) << 28))
      fail(
          "pcast simulate: n_tok {} x (d_head {} + 2 rows {}) is too large for one unit "
          "(expected under 2^28 values)",
          n, c.d_head, c.q_rows);
  }
  for (double s : c.scales)
    if (!(s > 0) || !std::isfinite(s)) fail("pcast simulate: scale {}: expected > 0", s);
  for (double t : c.thresholds)
    if (!(t >= 0) || !std::isfinite(t)) fail("pcast simulate: threshold {}: expected >= 0", t);
  if (!(c.sigma > 0)) fail("pcast simulate: sigma {}: expected > 0", c.sigma);
  if (c.deltas.empty() || c.scales.empty() || c.orders.empty() || c.n_toks.empty() || c.thresholds.empty())
    fail("pcast simulate: empty sweep (deltas, scales, orders, n_toks and thresholds need values)");
}

// The static P scale of a preset: S for multiply, 2^offset for an exponent offset, else 1.
double preset_scale(const attention::kernel_spec& k) {
  if (k.p_mode == attention::p_scale_mode::multiply) return k.p_scale;
  if (k.p_mode == attention::p_scale_mode::exponent_offset) return std::exp2(double(k.p_offset));
  return 1.0;
}

// Runs a preset through the engine on one (unit, delta): every query row at once (one head,
// non-causal), adding counts and squared error against the fp64 reference into pt.
void run_preset(const sim_config& c, const attention::kernel_spec& spec, const unit_data& u, double delta,
                partial& pt) {
  const int n = u.n_tok, d = u.d, k = std::min(c.k_sink, n);
  std::vector<float> kmat = u.k0;
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < d; ++i) kmat[static_cast<size_t>(j) * d + i] += static_cast<float>(delta / kBeta) * u.u[i];
  attention::layer_view view{u.q.data(), kmat.data(), u.v.data(), 1, 1, u.rows, n, d};
  const auto prep = attention::prepare_layer(spec, view, attention::condition::plain);
  std::vector<float> o(static_cast<size_t>(u.rows) * d);
  attention::run_stats st;
  attention::run_head(*prep, 0, false, o.data(), &st);
  pt.counts.cast_count += st.p_count;
  pt.counts.non_sink += st.p_count - static_cast<int64_t>(k) * u.rows;
  pt.counts.underflow += st.p_underflow;  // sinks sit at the running max: they never flush
  pt.counts.saturated += st.p_saturated;
  std::vector<float> zf, ks;
  std::vector<double> zd;
  const std::vector<double> vd(u.v.begin(), u.v.end());
  for (int row = 0; row < u.rows; ++row) {
    row_scores(c, u, row, delta, zf, zd, ks);
    const auto ref = reference_row_d(zd.data(), vd.data(), n, d);
    for (int i = 0; i < d; ++i) {
      const double e = o[static_cast<size_t>(row) * d + i] - ref[i];
      pt.sumsq += e * e;
    }
  }
}

void add_counts(kernel_counts& a, const kernel_counts& b) {
  a.non_sink += b.non_sink;
  a.underflow += b.underflow;
  a.non_sink_outside += b.non_sink_outside;
  a.underflow_outside += b.underflow_outside;
  a.cast_count += b.cast_count;
  a.saturated += b.saturated;
  a.sink_saturated += b.sink_saturated;
}

// The paper's prediction (forward: F; reverse: Phi(E[pre-sink max] - c)) and our exact one.
void fill_predictions(sim_row& r, const sim_config& c, const row_shape& shape, double max_mean) {
  if (r.order == block_order::forward)
    r.underflow_predicted = underflow_closed_form(r.delta, r.scale, c.k_sink);
  else
    r.underflow_predicted = 0.5 * std::erfc(-(max_mean - flush_threshold(r.scale)) / std::numbers::sqrt2);
  // The exact expectation assumes unit-variance scores and an exact running max.
  if (c.sigma == 1.0 && r.threshold == 0 && c.exact_applies) {
    r.underflow_exact = underflow_exact(r.delta, r.scale, shape, r.order);
    r.underflow_outside_exact = underflow_exact_outside_sink_block(r.delta, r.scale, shape, r.order);
  } else {
    r.underflow_exact = r.underflow_outside_exact = std::nan("");
  }
}

// Pools the per-seed partials of each (n_tok, delta, variant) into one row.
std::vector<sim_row> combine_rows(const sim_config& c, const std::vector<variant>& vars,
                                  const std::vector<partial>& parts) {
  const int nd = static_cast<int>(c.deltas.size()), nv = static_cast<int>(vars.size());
  std::vector<sim_row> rows;
  for (size_t ni = 0; ni < c.n_toks.size(); ++ni) {
    const int n_tok = c.n_toks[ni];
    const row_shape shape{n_tok, c.block, c.k_sink};
    // The paper's reverse-order formula with the pre-sink max set to its mean.
    const reverse_bound_row rb = reverse_bound(std::max(1, n_tok - c.k_sink), 1.0);
    for (int di = 0; di < nd; ++di)
      for (int vi = 0; vi < nv; ++vi) {
        const variant& va = vars[vi];
        kernel_counts sum;
        std::vector<double> mse, under;
        for (int sd = 0; sd < c.seeds; ++sd) {
          const int unit = static_cast<int>(ni) * c.seeds + sd;
          const partial& pt = parts[(static_cast<size_t>(unit) * nd + di) * nv + vi];
          mse.push_back(pt.sumsq / (static_cast<double>(c.q_rows) * c.d_head));
          under.push_back(pt.counts.non_sink ? double(pt.counts.underflow) / double(pt.counts.non_sink) : 0.0);
          add_counts(sum, pt.counts);
        }
        sim_row r;
        r.delta = c.deltas[di];
        r.scale = va.scale;
        r.order = va.order;
        r.threshold = va.threshold;
        auto frac = [](int64_t a, int64_t b) { return b ? double(a) / double(b) : 0.0; };
        r.underflow_measured = frac(sum.underflow, sum.non_sink);
        r.underflow_sd = sample_sd(under);
        r.underflow_outside_measured = frac(sum.underflow_outside, sum.non_sink_outside);
        r.saturated_fraction = frac(sum.saturated, sum.cast_count);
        r.sink_saturated_fraction =
            frac(sum.sink_saturated, static_cast<int64_t>(std::min(c.k_sink, n_tok)) * c.q_rows * c.seeds);
        fill_predictions(r, c, shape, rb.max_mean);
        double m = 0;
        for (double x : mse) m += x;
        r.mse = m / static_cast<double>(mse.size());
        r.mse_sd = sample_sd(mse);
        r.mse_per_seed = mse;
        r.seeds = c.seeds;
        r.n_tok = n_tok;
        r.d_head = c.d_head;
        r.block = c.block;
        r.k_sink = c.k_sink;
        r.sigma = c.sigma;
        rows.push_back(r);
      }
  }
  return rows;
}

}  // namespace

void ideal_row(const float* z, const float* v, int n_tok, int d_head, int k_sink, const kernel_options& opt, float* o,
               kernel_counts* counts) {
  // z: [n_tok] scaled scores, v: [n_tok, d_head], o: [d_head]
  ATTNUM_ASSERT(n_tok >= 1 && opt.block >= 1, "ideal_row: n_tok {} block {}", n_tok, opt.block);
  const float s = static_cast<float>(opt.scale);
  const float lazy = static_cast<float>(opt.rescale_threshold * std::numbers::ln2);
  const int nb = (n_tok + opt.block - 1) / opt.block;
  std::vector<float> p(opt.block), acc(d_head);
  std::fill(o, o + d_head, 0.0f);
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  kernel_counts cnt;
  for (int t = 0; t < nb; ++t) {
    const int b = opt.order == block_order::forward ? t : nb - 1 - t;
    const int lo = b * opt.block, hi = std::min(n_tok, lo + opt.block);
    float m_loc = z[lo];
    for (int j = lo + 1; j < hi; ++j) m_loc = std::max(m_loc, z[j]);
    // The max moves when the block raises it (by more than tau ln 2 with a lazy rescale).
    const float m_new = (m == -std::numeric_limits<float>::infinity() || m_loc - m > lazy) ? std::max(m, m_loc) : m;
    const float alpha = std::exp(m - m_new);
    float sum = 0.0f;
    for (int j = lo; j < hi; ++j) sum += (p[j - lo] = std::exp(z[j] - m_new));
    l = alpha * l + sum;
    std::fill(acc.begin(), acc.end(), 0.0f);
    const bool sink_block = lo < k_sink;
    for (int j = lo; j < hi; ++j) {
      const float ps = p[j - lo] * s;
      const float p8 = opt.cast ? formats::quantize_e4m3_sat(ps) : ps;
      const bool sink = j < k_sink;
      cnt.cast_count++;
      if (ps > 448.0f) (sink ? cnt.sink_saturated : cnt.saturated)++;
      if (!sink) {
        cnt.non_sink++;
        cnt.underflow += p8 == 0.0f;
        if (!sink_block) {
          cnt.non_sink_outside++;
          cnt.underflow_outside += p8 == 0.0f;
        }
      }
      if (p8 == 0.0f) continue;  // adding 0 * v changes nothing
      const float* vj = v + static_cast<size_t>(j) * d_head;
      for (int c = 0; c < d_head; ++c) acc[c] += p8 * vj[c];
    }
    for (int c = 0; c < d_head; ++c) o[c] = alpha * o[c] + acc[c];
    m = m_new;
  }
  const float denom = s * l;
  for (int c = 0; c < d_head; ++c) o[c] /= denom;
  cnt.saturated += cnt.sink_saturated;
  if (counts) add_counts(*counts, cnt);
}

std::vector<double> reference_row(const double* z, const float* v, int n_tok, int d_head) {
  const std::vector<double> vd(v, v + static_cast<size_t>(n_tok) * d_head);
  return reference_row_d(z, vd.data(), n_tok, d_head);
}

bool can_saturate(double scale, double threshold) { return std::log(scale) + threshold * std::numbers::ln2 > kLn448; }

std::vector<sim_row> simulate(const sim_config& config, const progress_fn& progress) {
  check_config(config);
  sim_config c = config;
  const attention::kernel_spec* spec = c.kernel ? &*c.kernel : nullptr;
  if (spec) {
    c.source = score_source::qk;
    c.scales = {preset_scale(*spec)};
    c.orders = {spec->reverse ? block_order::reverse : block_order::forward};
    c.thresholds = {0};
    c.block = spec->tile_for(c.d_head).second;
    // The flush threshold 2^-10 is E4M3's: other P formats have no closed form here.
    c.exact_applies = spec->p_fmt == formats::format::e4m3fn && spec->enabled.p_cast;
  }
  std::vector<variant> vars;
  for (double s : c.scales)
    for (auto o : c.orders)
      for (double t : c.thresholds) vars.push_back({s, o, t});
  const int nd = static_cast<int>(c.deltas.size()), nv = static_cast<int>(vars.size());
  const int nn = static_cast<int>(c.n_toks.size());
  // parts[unit][delta][variant]: its size estimated first ("needs N GiB")
  const uint64_t n_units = checked_mul(uint64_t(nn), uint64_t(c.seeds));
  check_alloc(
      checked_mul(checked_mul(n_units, checked_mul(uint64_t(nd), uint64_t(nv))), sizeof(partial)),
      fmt::format("pcast simulate: {} seeds x {} n_tok x {} deltas x {} variants (partial sums)", c.seeds, nn, nd, nv));
  if (n_units > uint64_t(std::numeric_limits<int>::max()))
    fail("pcast simulate: {} seeds x {} n_tok: more than 2^31 units", c.seeds, nn);
  const int units = static_cast<int>(n_units);
  // Each thread holds one unit at a time: the injected scores (4 bytes x rows x n_tok, twice for
  // the engine's copy) and V and K in fp32 and fp64 with the engine's copies (48 bytes x n_tok x
  // d_head).
  const int max_n_tok = *std::max_element(c.n_toks.begin(), c.n_toks.end());
  check_alloc(checked_mul(uint64_t(std::min(attnum::threads(), units)),
                          checked_mul(uint64_t(max_n_tok), 8 * uint64_t(c.q_rows) + 48 * uint64_t(c.d_head))),
              fmt::format("pcast simulate: {} threads x one unit of n_tok {} x (d_head {} + 2 rows {})",
                          std::min(attnum::threads(), units), max_n_tok, c.d_head, c.q_rows));
  std::vector<partial> parts(static_cast<size_t>(units) * nd * nv);
  int64_t done = 0;
  const int64_t total = static_cast<int64_t>(units) * nd;
  worker_errors errors;  // an error in a worker thread reaches the caller (never terminate)
#pragma omp parallel for schedule(dynamic, 1) num_threads(attnum::threads())
  for (int unit = 0; unit < units; ++unit)
    errors.run([&] {
      const int n_tok = c.n_toks[unit / c.seeds];
      const unit_data data = make_unit(c, n_tok, unit % c.seeds);
      std::vector<float> zf, ksink, o(c.d_head);
      std::vector<double> zd;
      const std::vector<double> vd(data.v.begin(), data.v.end());
      for (int di = 0; di < nd; ++di) {
        if (spec) run_preset(c, *spec, data, c.deltas[di], parts[(static_cast<size_t>(unit) * nd + di) * nv]);
        for (int row = 0; row < c.q_rows && !spec; ++row) {
          row_scores(c, data, row, c.deltas[di], zf, zd, ksink);
          const auto ref = reference_row_d(zd.data(), vd.data(), n_tok, c.d_head);
          for (int vi = 0; vi < nv; ++vi) {
            kernel_options opt{vars[vi].scale, vars[vi].order, c.block, c.cast, vars[vi].threshold};
            partial& pt = parts[(static_cast<size_t>(unit) * nd + di) * nv + vi];
            ideal_row(zf.data(), data.v.data(), n_tok, c.d_head, c.k_sink, opt, o.data(), &pt.counts);
            for (int i = 0; i < c.d_head; ++i) pt.sumsq += (o[i] - ref[i]) * (o[i] - ref[i]);
          }
        }
#pragma omp critical(attnum_pcast_progress)
        {
          ++done;
          if (progress) progress(done, total);
        }
      }
    });
  errors.rethrow();
  auto rows = combine_rows(c, vars, parts);
  if (spec)
    for (auto& r : rows) {  // the engine reports totals only, not per-block or per-sink counts
      r.kernel = spec->name;
      r.knobs = c.knobs;
      r.kernel_spec = attention::to_json(*spec);
      r.underflow_outside_measured = r.sink_saturated_fraction = std::nan("");
    }
  return rows;
}

sim_config paper_config(bool quick) {
  sim_config c;
  c.deltas = parse_range("0:12:0.5", "delta");
  if (quick) {
    c.seeds = 3;
    c.q_rows = 8;
  }
  return c;
}

sim_config overflow_config(bool quick) {
  sim_config c;
  c.deltas = parse_range("0:12:1", "delta");
  c.scales = {256, 448};
  c.thresholds = {0, 0.75, 4};
  if (quick) {
    c.seeds = 3;
    c.q_rows = 8;
  }
  return c;
}

namespace {
std::string variant_name(const sim_row& r) { return fmt::format("{} S={}", order_name(r.order), r.scale); }
}  // namespace

claim_row paired_ratio(const sim_row& num, const sim_row& den) {
  ATTNUM_ASSERT(num.mse_per_seed.size() == den.mse_per_seed.size() && !num.mse_per_seed.empty(),
                "paired_ratio: rows from different sweeps");
  std::vector<double> logs;
  for (size_t i = 0; i < num.mse_per_seed.size(); ++i)
    logs.push_back(std::log(num.mse_per_seed[i] / den.mse_per_seed[i]));
  double m = 0;
  for (double x : logs) m += x / static_cast<double>(logs.size());
  const double se = sample_sd(logs) / std::sqrt(static_cast<double>(logs.size()));
  claim_row c;
  c.n_tok = num.n_tok;
  c.delta = num.delta;
  c.numerator = variant_name(num);
  c.denominator = variant_name(den);
  c.ratio = std::exp(m);
  c.ratio_lo = std::exp(m - 1.96 * se);
  c.ratio_hi = std::exp(m + 1.96 * se);
  c.mse_num = num.mse;
  c.mse_den = den.mse;
  c.seeds = static_cast<int>(logs.size());
  return c;
}

std::vector<claim_row> paper_claims(const sim_config& base, const progress_fn& progress) {
  sim_config c = base;
  c.deltas = parse_range("0:12:1", "delta");
  c.scales = {1, 256, 448};
  c.orders = {block_order::forward, block_order::reverse};
  c.thresholds = {0};
  c.n_toks = {1024, 4096, 16384};
  c.kernel.reset();
  const auto rows = simulate(c, progress);
  auto find = [&](int n, double delta, double s, block_order o) -> const sim_row& {
    for (const auto& r : rows)
      if (r.n_tok == n && r.delta == delta && r.scale == s && r.order == o) return r;
    ATTNUM_ASSERT(false, "paper_claims: missing row");
  };
  const auto fwd = block_order::forward, rev = block_order::reverse;
  std::vector<claim_row> out;
  auto add = [&](const char* name, int n, double d, double s1, block_order o1, double s2, block_order o2) {
    claim_row r = paired_ratio(find(n, d, s1, o1), find(n, d, s2, o2));
    r.claim = name;
    out.push_back(r);
  };
  for (double d : c.deltas) add("reverse_fix", 4096, d, 1, fwd, 256, rev);
  for (double d : c.deltas) add("both_fixes", 4096, d, 256, fwd, 256, rev);
  for (int n : c.n_toks)
    for (double d : c.deltas) add("s256_vs_s448", n, d, 448, fwd, 256, fwd);
  for (int n : c.n_toks)
    for (double d : {4.0, 5.0, 6.0, 7.0, 8.0}) add("gain_vs_n", n, d, 1, fwd, 256, rev);
  return out;
}

}  // namespace attnum::pcast
