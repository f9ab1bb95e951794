// fp64 reference attention: two-pass softmax on Eigen double GEMMs, blocked over query rows so
// memory stays O(block * n_kv). Rows are independent, so the result does not depend on blocking
// beyond the GEMM's own (deterministic, single-threaded) summation order.
#include "attnum/attention/reference.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "attnum/core/error.h"

namespace attnum::attention {
namespace {
using mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const mat>;
constexpr int kRowBlock = 256;
}  // namespace

reference_result reference_attention(const double* q, const double* k, const double* v, int n_q, int n_kv, int d,
                                     bool causal) {
  reference_result r;
  r.o.assign(static_cast<size_t>(n_q) * d, 0.0);
  r.row_max.assign(n_q, -std::numeric_limits<double>::infinity());
  r.row_sum.assign(n_q, 0.0);
  r.lse.assign(n_q, -std::numeric_limits<double>::infinity());
  if (n_q == 0 || n_kv == 0) return r;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  cmap K(k, n_kv, d), V(v, n_kv, d);
  // Buffers sized once: resizing per block would fault in fresh pages every time.
  std::vector<double> sbuf(static_cast<size_t>(std::min(n_q, kRowBlock)) * n_kv), obuf(static_cast<size_t>(std::min(n_q, kRowBlock)) * d);
  for (int r0 = 0; r0 < n_q; r0 += kRowBlock) {
    const int r1 = std::min(n_q, r0 + kRowBlock);
    // q: [r1-r0, d]; keys seen by the block: [0, n_cols)
    int n_cols = causal ? std::min(n_kv, r1 + n_kv - n_q) : n_kv;
    if (n_cols <= 0) continue;
    cmap Q(q + static_cast<int64_t>(r0) * d, r1 - r0, d);
    Eigen::Map<mat> s(sbuf.data(), r1 - r0, n_cols), o(obuf.data(), r1 - r0, d);
    s.noalias() = Q * K.topRows(n_cols).transpose();  // a GEMM (a scaled product expression would not be one)
    s *= scale;
    for (int i = r0; i < r1; ++i) {
      const int last = causal ? std::min(n_cols - 1, i + n_kv - n_q) : n_cols - 1;
      auto row = s.row(i - r0);
      if (last < 0) {
        row.setZero();
        continue;
      }
      // std::exp one element at a time: Eigen's vectorised exp takes a scalar path for the
      // elements before the first aligned packet, so its bits depended on where the buffer
      // happened to lie in memory (they differed between thread counts and between calls).
      const double m = row.head(last + 1).maxCoeff();
      for (int j = 0; j <= last; ++j) row(j) = std::exp(row(j) - m);
      double l = 0;
      for (int j = 0; j <= last; ++j) l += row(j);  // ascending order
      for (int j = last + 1; j < n_cols; ++j) row(j) = 0;
      r.row_max[i] = m;
      r.row_sum[i] = l;
      r.lse[i] = m + std::log(l);
      row /= l;
    }
    o.noalias() = s * V.topRows(n_cols);
    for (int i = r0; i < r1; ++i)
      for (int c = 0; c < d; ++c) r.o[static_cast<size_t>(i) * d + c] = o(i - r0, c);
  }
  return r;
}

reference_result reference_head(const layer_view& layer, int h, bool causal) {
  if (h < 0 || h >= layer.n_head) fail("reference_head: head {} out of range [0, {})", h, layer.n_head);
  if (layer.n_head_kv <= 0 || layer.n_head % layer.n_head_kv != 0)
    fail("reference_head: n_head {} is not a multiple of n_head_kv {}", layer.n_head, layer.n_head_kv);
  const int g = h / (layer.n_head / layer.n_head_kv);
  const int d = layer.d_head;
  std::vector<double> q(layer.q + static_cast<int64_t>(h) * layer.n_q * d,
                        layer.q + static_cast<int64_t>(h + 1) * layer.n_q * d);
  std::vector<double> k(layer.k + static_cast<int64_t>(g) * layer.n_kv * d,
                        layer.k + static_cast<int64_t>(g + 1) * layer.n_kv * d);
  std::vector<double> v(layer.v + static_cast<int64_t>(g) * layer.n_kv * d,
                        layer.v + static_cast<int64_t>(g + 1) * layer.n_kv * d);
  return reference_attention(q.data(), k.data(), v.data(), layer.n_q, layer.n_kv, d, causal);
}

std::string_view condition_name(condition c) {
  switch (c) {
    case condition::plain: return "plain";
    case condition::rotate: return "rotate";
    case condition::center: return "center";
    case condition::center_rotate: return "center+rotate";
  }
  return "?";
}

condition parse_condition(std::string_view text) {
  if (text == "plain" || text == "tile") return condition::plain;
  if (text == "rotate") return condition::rotate;
  if (text == "center") return condition::center;
  if (text == "center+rotate") return condition::center_rotate;
  fail("unknown condition '{}' (expected plain, rotate, center or center+rotate)", text);
}

}  // namespace attnum::attention
