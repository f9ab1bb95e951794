#include "attnum/predict/predictor.h"

#include <Eigen/Dense>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/stats/stats.h"

namespace attnum::predict {

namespace {
using matf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmapf = Eigen::Map<const matf>;
using cmapd = Eigen::Map<const Eigen::Matrix<double, -1, -1, Eigen::RowMajor>>;

// Fraction bits and smallest normal exponent of a format (formats::info, the one table).
struct grid {
  int mant, emin;
};
grid grid_of(formats::format f) { return {formats::info(f).mantissa_bits, formats::info(f).min_exponent}; }
}  // namespace

namespace {
// Spacing on grid g (int8: g.mant < 0 marks the unit grid). floor(log2 |x|) from the double's
// exponent field (0 and double subnormals fall below every format's emin); 2^(e - mant) is then
// built from its bits: exact and branch-light, since this runs for every element of P.
inline double spacing_on(grid g, double x) {
  if (g.mant < 0) return 1.0;
  const uint64_t bits = std::bit_cast<uint64_t>(x) & 0x7fffffffffffffffULL;
  int e = static_cast<int>(bits >> 52) - 1023;
  e = std::max(e, g.emin);
  return std::bit_cast<double>(static_cast<uint64_t>(e - g.mant + 1023) << 52);
}
inline grid grid_for(formats::format f) { return f == formats::format::int8 ? grid{-1, 0} : grid_of(f); }
// element_variance with the format's grid looked up once (hot loops).
inline double variance_on(grid g, double x, double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) return 0.0;
  const double xs = x / scale;
  const double u = spacing_on(g, xs);
  // Below half the smallest spacing the cast gives 0: the error is -x exactly.
  if (std::fabs(xs) < 0.5 * u) return x * x;
  return scale * scale * u * u / 12.0;
}
}  // namespace

std::string_view version_string(version v) { return v == version::v2 ? kPredictorVersionV2 : kPredictorVersion; }
std::string_view version_name(version v) { return v == version::v2 ? "v2" : "v1"; }

version parse_version(std::string_view name) {
  if (name == "v1") return version::v1;
  if (name == "v2") return version::v2;
  fail("--predictor-version: expected v1 ({}) or v2 ({}), got '{}'", kPredictorVersion, kPredictorVersionV2, name);
}

std::string command_suffix(version v) {
  return v == version::v1 ? std::string() : " --predictor-version " + std::string(version_name(v));
}

std::optional<version> version_from_string(std::string_view s) {
  for (version v : {version::v1, version::v2})
    if (s == version_string(v)) return v;
  return std::nullopt;
}

double mean_pair_covariance(const double* x, const double* u, int n) {
  if (n < 2) return 0.0;
  // (spacing, fractional part of x / spacing) of every value on a grid. Within one grid the
  // pair's t (1 - t) depends only on |f_a - f_b| (t(1-t) is symmetric in t <-> 1 - t), so after
  // sorting, sum_{a<b} g(f_b - f_a) with g(t) = t - t^2 comes from prefix sums.
  thread_local std::vector<std::pair<double, double>> uf;
  uf.clear();
  for (int j = 0; j < n; ++j) {
    if (!(u[j] > 0) || !std::isfinite(u[j]) || !std::isfinite(x[j])) continue;
    const double r = x[j] / u[j];
    uf.emplace_back(u[j], r - std::floor(r));
  }
  std::sort(uf.begin(), uf.end());
  double total = 0;  // sum over unordered pairs on one grid of their covariance
  for (size_t a = 0; a < uf.size();) {
    size_t b = a;
    double s1 = 0, s2 = 0, g = 0;
    for (; b < uf.size() && uf[b].first == uf[a].first; ++b) {
      const double f = uf[b].second, m = static_cast<double>(b - a);
      g += (m * f - s1) - (m * f * f - 2.0 * f * s1 + s2);
      s1 += f, s2 += f * f;
    }
    const double m = static_cast<double>(b - a), w = uf[a].first;
    total += w * w * (m * (m - 1) / 2.0 / 12.0 - g / 2.0);
    a = b;
  }
  return 2.0 * total / (static_cast<double>(n) * (n - 1));
}

double grid_spacing(formats::format f, double x) { return spacing_on(grid_for(f), x); }

double element_variance(formats::format f, double x, double scale) { return variance_on(grid_for(f), x, scale); }

void row_variances(formats::format f, const float* x, float row_scale, const float* col_scale, int n, double* out) {
  const grid g = grid_for(f);
  for (int c = 0; c < n; ++c) out[c] = variance_on(g, x[c], row_scale * col_scale[c]);
}
// The ideal attention of one head in float (the predictor estimates variances: float is ample).
struct head_context {
  int nq = 0, nk = 0, d = 0;
  bool lower = false;  ///< P is lower triangular (causal, n_q == n_kv): block-causal products
  matf P, O, V;
  matf D;              ///< ||v_j - o_i||^2 (causal triangle)
  matf W;              ///< P_ij^2 ||v_j - o_i||^2: the K term's condition-independent weight
  double o_norm2 = 0;  ///< ||O||_F^2 (fp64 O)
  Eigen::VectorXf v2;  ///< ||v_j||^2
  const double* p = nullptr;
  const double* row_sum = nullptr;
  const double* o = nullptr;
};

namespace {
Eigen::VectorXf row_norms2(const matf& m) {
  Eigen::VectorXf r(m.rows());
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    float s = 0;
    for (Eigen::Index c = 0; c < m.cols(); ++c) s += m(i, c) * m(i, c);
    r[i] = s;
  }
  return r;
}

// out = P B for a P with zeros above the diagonal when `lower`: row blocks of kBlock rows times
// only the key rows they can see (general GEMMs on the causal blocks; Eigen's triangular
// product is several times slower). Each output row's sum runs over the same keys in the same
// packed order whatever the thread count.
constexpr int kBlock = 128;
void causal_product(const matf& P, const Eigen::Ref<const matf>& B, bool lower, matf& out) {
  out.resize(P.rows(), B.cols());
  if (!lower) {
    out.noalias() = P * B;
    return;
  }
  const Eigen::Index n = P.rows();
  for (Eigen::Index i0 = 0; i0 < n; i0 += kBlock) {
    const Eigen::Index m = std::min<Eigen::Index>(kBlock, n - i0), jend = i0 + m;
    out.middleRows(i0, m).noalias() = P.block(i0, 0, m, jend) * B.topRows(jend);
  }
}
}  // namespace

void head_context_deleter::operator()(head_context* c) const { delete c; }

context_ptr make_context(const head_inputs& in) {
  const int nq = in.n_q, nk = in.n_kv, d = in.d;
  ATTNUM_ASSERT(nq > 0 && nk > 0 && d > 0 && in.p && in.o && in.v && in.row_sum, "predict: bad inputs");
  context_ptr c(new head_context);
  c->nq = nq, c->nk = nk, c->d = d;
  c->P = cmapd(in.p, nq, nk).cast<float>();
  c->O = cmapd(in.o, nq, d).cast<float>();
  c->V = cmapf(in.v, nk, d);
  c->p = in.p, c->row_sum = in.row_sum, c->o = in.o;
  c->lower = nq == nk;
  for (int i = 0; i < nq && c->lower; ++i)
    for (int j = i + 1; j < nk; ++j)
      if (in.p[static_cast<size_t>(i) * nk + j] != 0) {
        c->lower = false;
        break;
      }
  // Reductions as plain loops: Eigen's vectorized reductions peel to the data's alignment, so
  // their summation order (and last bits) would depend on where malloc put the buffer.
  c->v2 = row_norms2(c->V);
  const Eigen::VectorXf o2 = row_norms2(c->O);
  for (int i = 0; i < nq * d; ++i) c->o_norm2 += in.o[i] * in.o[i];
  // D_ij = ||v_j - o_i||^2 = ||o_i||^2 + ||v_j||^2 - 2 o_i.v_j (only the causal triangle is
  // read); W_ij = P_ij^2 D_ij (zeros above the diagonal, like P).
  // O V^T on the causal blocks only (entries above the diagonal are never read).
  const matf Vt = c->V.transpose();
  c->D.resize(nq, nk);
  if (!c->lower) c->D.noalias() = c->O * Vt;
  for (Eigen::Index i0 = 0; c->lower && i0 < nq; i0 += kBlock) {
    const Eigen::Index m = std::min<Eigen::Index>(kBlock, nq - i0), jend = i0 + m;
    c->D.block(i0, 0, m, jend).noalias() = c->O.middleRows(i0, m) * Vt.leftCols(jend);
  }
  c->W.setZero(nq, nk);
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < (c->lower ? i + 1 : nk); ++j) {
      const float dij = std::max(0.0f, o2[i] + c->v2[j] - 2.0f * c->D(i, j));
      c->D(i, j) = dij;
      c->W(i, j) = c->P(i, j) * c->P(i, j) * dij;
    }
  return c;
}

namespace {

// (1/d) sum_ij P_ij^2 (sum_c q_ic^2 var_k_jc) ||v_j - o_i||^2 (independent over j)
// = (1/d) sum_ic q_ic^2 [W Var(K)]_ic with the context's W_ij = P_ij^2 ||v_j - o_i||^2: one
// block-causal GEMM with an [n, d] result instead of an [n, n] one.
double k_term(const head_context& c, const head_inputs& in) {
  thread_local matf SK, WS;
  SK = cmapd(in.var_k, c.nk, c.d).cast<float>();
  // v2: the part shared by every key of a channel cancels in softmax.
  if (in.shared_k)
    for (int j = 0; j < c.nk; ++j)
      for (int e = 0; e < c.d; ++e)
        SK(j, e) = static_cast<float>(std::max(0.0, in.var_k[static_cast<size_t>(j) * c.d + e] - in.shared_k[e]));
  causal_product(c.W, SK, c.lower, WS);
  thread_local std::vector<double> acc;
  acc.assign(c.d, 0.0);  // per-channel partial sums: a fixed order that vectorizes over c
  for (int i = 0; i < c.nq; ++i) {
    const float* q = in.q + static_cast<size_t>(i) * c.d;
    const float* ws = WS.data() + static_cast<size_t>(i) * c.d;
    for (int e = 0; e < c.d; ++e) {
      const double qe = q[e];
      acc[e] += qe * qe * static_cast<double>(ws[e]);
    }
  }
  double s = 0;
  for (double a : acc) s += a;
  return s / c.d;
}

// (1/d) sum_i sum_c var_q_ic ||A_ic||^2, A_ic = sum_j P_ij k_jc (v_j - o_i) in R^d. For a
// Rademacher z, E[(A_i z)_c^2] = ||A_ic||^2 and (A_i z)_c = [P diag(Vz) K]_ic - (o_i.z)[P K]_ic:
// R probes cost one GEMM P [K, diag(Vz_1) K, ...].
double q_term(const head_context& c, const head_inputs& in, const options& opt) {
  const int d = c.d, R = std::max(1, opt.n_probes);
  const cmapf K(in.k, c.nk, d);
  stats::splitmix64 rng(opt.probe_seed);
  matf Z(d, R);
  for (int t = 0; t < R; ++t)
    for (int e = 0; e < d; ++e) Z(e, t) = (rng.next() >> 63) ? 1.0f : -1.0f;
  const matf VZ = c.V * Z, OZ = c.O * Z;
  // Scratch reused across calls of this thread: no page faults for fresh [n, 5d] buffers.
  thread_local matf B, PB;
  B.resize(c.nk, static_cast<Eigen::Index>(d) * (R + 1));
  B.leftCols(d) = K;
  for (int t = 0; t < R; ++t) B.middleCols((t + 1) * d, d) = VZ.col(t).asDiagonal() * K;
  causal_product(c.P, B, c.lower, PB);
  thread_local std::vector<double> acc;
  acc.assign(d, 0.0);  // per-channel partial sums in a fixed order (i, then t)
  for (int i = 0; i < c.nq; ++i) {
    const float* pb = PB.data() + static_cast<size_t>(i) * PB.cols();
    const double* sq = in.var_q + static_cast<size_t>(i) * d;
    for (int t = 0; t < R; ++t) {
      const double oz = OZ(i, t);
      const float* pbt = pb + static_cast<size_t>(t + 1) * d;
      for (int e = 0; e < d; ++e) {
        const double a = static_cast<double>(pbt[e]) - oz * static_cast<double>(pb[e]);
        acc[e] += sq[e] * a * a;
      }
    }
  }
  double s = 0;
  for (double a : acc) s += a;
  return s / d / R;
}

// sum_ij P_ij^2 sum_e var_v_je. v2: sum_ij P_ij^2 sum_e (var_v_je - cbar_e) + n_q sum_e cbar_e
// (equicorrelated errors: the shared part moves every row by sum_j P_ij = 1 times itself).
double v_term(const head_context& c, const head_inputs& in) {
  std::vector<double> sv(c.nk, 0.0);
  for (int j = 0; j < c.nk; ++j)
    for (int e = 0; e < c.d; ++e) {
      const double var = in.var_v[static_cast<size_t>(j) * c.d + e];
      sv[j] += in.shared_v ? std::max(0.0, var - in.shared_v[e]) : var;
    }
  double s = 0;
  if (in.shared_v)
    for (int e = 0; e < c.d; ++e) s += c.nq * in.shared_v[e];
  for (int i = 0; i < c.nq; ++i)
    for (int j = 0; j < (c.lower ? i + 1 : c.nk); ++j) s += c.p[i * c.nk + j] * c.p[i * c.nk + j] * sv[j];
  // A variance: a negative mean covariance (chance anticorrelation) never makes it negative.
  return in.shared_v ? std::max(0.0, s) : s;
}

// The cast sees x = S * P_ij * l_i (l_i = sum_j exp(s_ij - m_i)); its error divided by S l_i
// moves P_ij, times v_j (fp32 row sum) or (v_j - o_i) (row sum from the cast P).
double p_term(const head_context& c, const head_inputs& in) {
  const grid g = grid_for(in.p_cast.fmt);
  double s = 0;
  for (int i = 0; i < c.nq; ++i) {
    const double sl = in.p_cast.scale * c.row_sum[i];
    for (int j = 0; j < (c.lower ? i + 1 : c.nk); ++j) {
      const double pij = c.p[static_cast<size_t>(i) * c.nk + j];
      if (pij == 0) continue;
      const double var = variance_on(g, sl * pij, 1.0) / (sl * sl);
      s += var * (in.p_cast.rowsum_from_cast ? static_cast<double>(c.D(i, j)) : c.v2[j]);
    }
  }
  return s;
}

double o_term(const head_context& c, const head_inputs& in) {
  const grid g = grid_for(in.out_fmt);
  double s = 0;
  for (int i = 0; i < c.nq * c.d; ++i) s += variance_on(g, c.o[i], 1.0);
  return s;
}

}  // namespace

prediction predict_terms(const head_context& c, const head_inputs& in, const options& opt, term_mask mask) {
  prediction r;
  r.o_norm2 = c.o_norm2;
  if (mask.k && in.var_k && in.q) r.k = k_term(c, in);
  if (mask.q && in.var_q && in.k) r.q = q_term(c, in, opt);
  if (mask.v && in.var_v) r.v = v_term(c, in);
  if (mask.p && in.p_cast.enabled) r.p = p_term(c, in);
  if (mask.o && in.o_cast && in.out_fmt != formats::format::fp32) r.o = o_term(c, in);
  r.total = r.k + r.q + r.v + r.p + r.o;
  r.rel_err = r.o_norm2 > 0 ? std::sqrt(r.total / r.o_norm2) : 0.0;
  return r;
}

prediction predict_head(const head_inputs& in, const options& opt) {
  const context_ptr c = make_context(in);
  return predict_terms(*c, in, opt);
}

}  // namespace attnum::predict
