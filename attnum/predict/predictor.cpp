#include "attnum/predict/predictor.h"

#include <Eigen/Dense>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/stats/stats.h"

namespace attnum::predict {

namespace {
using matf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmapf = Eigen::Map<const matf>;
using cmapd = Eigen::Map<const Eigen::Matrix<double, -1, -1, Eigen::RowMajor>>;

// Fraction bits and smallest normal exponent of the floating formats (OCP OFP8, IEEE 754).
struct grid {
  int mant, emin;
};
grid grid_of(formats::format f) {
  using formats::format;
  switch (f) {
    case format::e4m3fn: return {3, -6};
    case format::e5m2: return {2, -14};
    case format::bf16: return {7, -126};
    case format::fp16: return {10, -14};
    case format::fp32: return {23, -126};
    case format::int8: return {0, 0};
  }
  return {23, -126};
}
}  // namespace

double grid_spacing(formats::format f, double x) {
  if (f == formats::format::int8) return 1.0;
  const grid g = grid_of(f);
  // floor(log2 |x|) from the double's exponent field (0 and double subnormals fall below every
  // format's emin); 2^(e - mant) is then built from its bits: exact and branch-light, since this
  // runs for every element of P.
  const uint64_t bits = std::bit_cast<uint64_t>(x) & 0x7fffffffffffffffULL;
  int e = static_cast<int>(bits >> 52) - 1023;
  e = std::max(e, g.emin);
  return std::bit_cast<double>(static_cast<uint64_t>(e - g.mant + 1023) << 52);
}

double element_variance(formats::format f, double x, double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) return 0.0;
  const double xs = x / scale;
  const double u = grid_spacing(f, xs);
  // Below half the smallest spacing the cast gives 0: the error is -x exactly.
  if (std::fabs(xs) < 0.5 * u) return x * x;
  return scale * scale * u * u / 12.0;
}
// The ideal attention of one head in float (the predictor estimates variances: float is ample).
struct head_context {
  int nq = 0, nk = 0, d = 0;
  bool lower = false;  ///< P is lower triangular (causal, n_q == n_kv): triangular products
  matf P, O, V;
  matf D;              ///< ||v_j - o_i||^2
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
}  // namespace

void head_context_deleter::operator()(head_context* c) const { delete c; }

context_ptr make_context(const head_inputs& in) {
  const int nq = in.n_q, nk = in.n_kv, d = in.d;
  ATTNUM_ASSERT(nq > 0 && nk > 0 && d > 0 && in.p && in.o && in.v && in.row_sum,
                "predict: bad inputs");
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
  // D_ij = ||v_j - o_i||^2 = ||o_i||^2 + ||v_j||^2 - 2 o_i.v_j (only the causal triangle is read).
  c->D = c->O * c->V.transpose();
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < (c->lower ? i + 1 : nk); ++j)
      c->D(i, j) = std::max(0.0f, o2[i] + c->v2[j] - 2.0f * c->D(i, j));
  return c;
}

namespace {

// (1/d) sum_ij P_ij^2 (sum_c q_ic^2 var_k_jc) ||v_j - o_i||^2: independent over j.
double k_term(const head_context& c, const head_inputs& in) {
  const matf Q = cmapf(in.q, c.nq, c.d);
  const matf SK = cmapd(in.var_k, c.nk, c.d).cast<float>();
  const matf A = Q.cwiseProduct(Q) * SK.transpose();
  double s = 0;
  for (int i = 0; i < c.nq; ++i) {
    const int jend = c.lower ? i + 1 : c.nk;
    double si = 0;
    for (int j = 0; j < jend; ++j) {
      const double pij = c.P(i, j);
      si += pij * pij * static_cast<double>(A(i, j)) * c.D(i, j);
    }
    s += si;
  }
  return s / c.d;
}

// (1/d) sum_i sum_c var_q_ic ||A_ic||^2, A_ic = sum_j P_ij k_jc (v_j - o_i) in R^d. For a
// Rademacher z, E[(A_i z)_c^2] = ||A_ic||^2 and (A_i z)_c = [P diag(Vz) K]_ic - (o_i.z)[P K]_ic:
// R probes cost one GEMM P [K, diag(Vz_1) K, ...].
double q_term(const head_context& c, const head_inputs& in, const options& opt) {
  const int d = c.d, R = std::max(1, opt.n_probes);
  const matf K = cmapf(in.k, c.nk, d);
  stats::splitmix64 rng(opt.probe_seed);
  matf Z(d, R);
  for (int t = 0; t < R; ++t)
    for (int e = 0; e < d; ++e) Z(e, t) = (rng.next() >> 63) ? 1.0f : -1.0f;
  const matf VZ = c.V * Z, OZ = c.O * Z;
  matf B(c.nk, static_cast<Eigen::Index>(d) * (R + 1));
  B.leftCols(d) = K;
  for (int t = 0; t < R; ++t) B.middleCols((t + 1) * d, d) = VZ.col(t).asDiagonal() * K;
  matf PB;
  if (c.lower) PB = c.P.triangularView<Eigen::Lower>() * B;
  else PB = c.P * B;
  const cmapd Sq(in.var_q, c.nq, d);
  double s = 0;
  for (int t = 0; t < R; ++t)
    for (int i = 0; i < c.nq; ++i)
      for (int e = 0; e < d; ++e) {
        const double a = static_cast<double>(PB(i, (t + 1) * d + e)) -
                         static_cast<double>(OZ(i, t)) * PB(i, e);
        s += Sq(i, e) * a * a;
      }
  return s / d / R;
}

// sum_ij P_ij^2 sum_e var_v_je.
double v_term(const head_context& c, const head_inputs& in) {
  std::vector<double> sv(c.nk, 0.0);
  for (int j = 0; j < c.nk; ++j)
    for (int e = 0; e < c.d; ++e) sv[j] += in.var_v[static_cast<size_t>(j) * c.d + e];
  double s = 0;
  for (int i = 0; i < c.nq; ++i)
    for (int j = 0; j < (c.lower ? i + 1 : c.nk); ++j) s += c.p[i * c.nk + j] * c.p[i * c.nk + j] * sv[j];
  return s;
}

// The cast sees x = S * P_ij * l_i (l_i = sum_j exp(s_ij - m_i)); its error divided by S l_i
// moves P_ij, times v_j (fp32 row sum) or (v_j - o_i) (row sum from the cast P).
double p_term(const head_context& c, const head_inputs& in) {
  double s = 0;
  for (int i = 0; i < c.nq; ++i) {
    const double sl = in.p_cast.scale * c.row_sum[i];
    for (int j = 0; j < (c.lower ? i + 1 : c.nk); ++j) {
      const double pij = c.p[i * c.nk + j];
      if (pij == 0) continue;
      const double var = element_variance(in.p_cast.fmt, sl * pij, 1.0) / (sl * sl);
      s += var * (in.p_cast.rowsum_from_cast ? static_cast<double>(c.D(i, j)) : c.v2[j]);
    }
  }
  return s;
}

double o_term(const head_context& c, const head_inputs& in) {
  double s = 0;
  for (int i = 0; i < c.nq * c.d; ++i) s += element_variance(in.out_fmt, c.o[i], 1.0);
  return s;
}

}  // namespace

prediction predict_terms(const head_context& c, const head_inputs& in, const options& opt,
                         term_mask mask) {
  prediction r;
  for (int i = 0; i < c.nq * c.d; ++i) r.o_norm2 += c.o[i] * c.o[i];
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
