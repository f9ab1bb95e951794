#include "attnum/predict/predictor.h"

#include <Eigen/Dense>

#include <cmath>

#include "attnum/core/error.h"
#include "attnum/stats/stats.h"

namespace attnum::predict {

namespace {
using mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const mat>;

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
  const double a = std::fabs(x);
  int e = g.emin;
  if (a > 0) {
    int ex;
    std::frexp(a, &ex);  // a = m * 2^ex, m in [0.5, 1): floor(log2 a) = ex - 1
    e = std::max(ex - 1, g.emin);
  }
  return std::ldexp(1.0, e - g.mant);
}

double element_variance(formats::format f, double x, double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) return 0.0;
  const double xs = x / scale;
  const double u = grid_spacing(f, xs);
  // Below half the smallest spacing the cast gives 0: the error is -x exactly.
  if (std::fabs(xs) < 0.5 * u) return x * x;
  return scale * scale * u * u / 12.0;
}

prediction predict_head(const head_inputs& in, const options& opt) {
  const int nq = in.n_q, nk = in.n_kv, d = in.d;
  ATTNUM_ASSERT(nq > 0 && nk > 0 && d > 0 && in.p && in.o && in.v, "predict_head: bad inputs");
  const cmap P(in.p, nq, nk), O(in.o, nq, d);
  const mat V = Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>(in.v, nk, d)
                    .cast<double>();
  prediction r;
  r.o_norm2 = O.squaredNorm();
  const mat P2 = P.cwiseProduct(P);
  // ||v_j - o_i||^2 = ||v_j||^2 - 2 o_i.v_j + ||o_i||^2 (needed by the K and Q terms and by the
  // P term when l comes from the cast P).
  const Eigen::VectorXd v2 = V.rowwise().squaredNorm(), o2 = O.rowwise().squaredNorm();
  const mat OV = O * V.transpose();
  auto dist2 = [&](int i, int j) { return std::max(0.0, v2[j] - 2 * OV(i, j) + o2[i]); };
  const double inv_d = 1.0 / d;
  // 1. K term (independent over j): (1/d) sum_ij P_ij^2 (sum_c q_ic^2 var_k_jc) ||v_j - o_i||^2.
  if (in.var_k && in.q) {
    const mat Q = Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>(in.q, nq, d)
                      .cast<double>();
    const mat A = Q.cwiseProduct(Q) * cmap(in.var_k, nk, d).transpose();
    double s = 0;
    for (int i = 0; i < nq; ++i)
      for (int j = 0; j < nk; ++j)
        if (P2(i, j) != 0) s += P2(i, j) * A(i, j) * dist2(i, j);
    r.k = s * inv_d;
  }
  // 2. Q term (shared over j): (1/d) sum_i sum_c var_q_ic ||A_ic||^2 with
  // A_ic = sum_j P_ij k_jc (v_j - o_i). For a Rademacher z, E[(A_i z)_c^2] = ||A_ic||^2 and
  // (A_i z)_c = [P diag(Vz) K]_ic - (o_i.z) [P K]_ic: one GEMM per probe.
  if (in.var_q && in.k) {
    const mat K = Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>(in.k, nk, d)
                      .cast<double>();
    const int R = std::max(1, opt.n_probes);
    mat B(nk, static_cast<Eigen::Index>(d) * (R + 1));
    B.leftCols(d) = K;
    stats::splitmix64 rng(opt.probe_seed);
    mat Z(d, R);
    for (int t = 0; t < R; ++t)
      for (int e = 0; e < d; ++e) Z(e, t) = (rng.next() >> 63) ? 1.0 : -1.0;
    const mat VZ = V * Z, OZ = O * Z;
    for (int t = 0; t < R; ++t) B.middleCols((t + 1) * d, d) = VZ.col(t).asDiagonal() * K;
    const mat PB = P * B;
    const cmap Sq(in.var_q, nq, d);
    double s = 0;
    for (int t = 0; t < R; ++t)
      for (int i = 0; i < nq; ++i)
        for (int c = 0; c < d; ++c) {
          const double a = PB(i, (t + 1) * d + c) - OZ(i, t) * PB(i, c);
          s += Sq(i, c) * a * a;
        }
    r.q = s * inv_d / R;
  }
  // 3. V term: sum_ij P_ij^2 sum_e var_v_je.
  if (in.var_v) r.v = (P2 * cmap(in.var_v, nk, d).rowwise().sum()).sum();
  // 4. P term: the cast sees x = S * P_ij * l_i (l_i = sum_j exp(s_ij - m_i)); its error,
  // divided by S l_i, moves P_ij, times v_j (fp32 row sum) or (v_j - o_i) (row sum from cast).
  if (in.p_cast.enabled && in.row_sum) {
    double s = 0;
    for (int i = 0; i < nq; ++i) {
      const double sl = in.p_cast.scale * in.row_sum[i];
      for (int j = 0; j < nk; ++j) {
        if (P(i, j) == 0) continue;
        const double var = element_variance(in.p_cast.fmt, sl * P(i, j), 1.0) / (sl * sl);
        s += var * (in.p_cast.rowsum_from_cast ? dist2(i, j) : v2[j]);
      }
    }
    r.p = s;
  }
  // 5. Output cast.
  if (in.o_cast && in.out_fmt != formats::format::fp32) {
    double s = 0;
    for (int i = 0; i < nq; ++i)
      for (int e = 0; e < d; ++e) s += element_variance(in.out_fmt, O(i, e), 1.0);
    r.o = s;
  }
  r.total = r.k + r.q + r.v + r.p + r.o;
  r.rel_err = r.o_norm2 > 0 ? std::sqrt(r.total / r.o_norm2) : 0.0;
  return r;
}

}  // namespace attnum::predict
