// fp64 reference attention: two-pass softmax on Eigen double GEMMs, blocked over query rows so
// memory stays O(block * n_kv). Rows are independent, so the result does not depend on blocking
// beyond the GEMM's own (deterministic, single-threaded) summation order.
#include "attnum/attention/reference.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::attention {
namespace {
using mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const mat>;
constexpr int kRowBlock = 256;
}  // namespace

namespace {
// One row block [r0, r1) whose scaled scores against keys [0, n_cols) are in s: softmax per row
// (max-subtracted, ascending sum), P into r.p when asked, then O = P V for the block.
void finish_block(Eigen::Map<mat>& s, Eigen::Map<mat>& o, const cmap& V, int r0, int r1, int n_cols, int n_q, int n_kv,
                  int d, bool causal, reference_result& r) {
  for (int i = r0; i < r1; ++i) {
    const int last = causal ? std::min(n_cols - 1, i + n_kv - n_q) : n_cols - 1;
    auto row = s.row(i - r0);
    if (last < 0) {
      row.setZero();
      continue;
    }
    // Eigen's vectorised exp (within ~1 ulp in double): far below any tolerance we test. It takes
    // a scalar path for the elements before the first aligned packet, so the score buffer is
    // allocated aligned: which path an element takes then depends on its index only, never on
    // the heap (or the thread count).
    auto seen = row.head(last + 1).array();
    const double m = seen.maxCoeff();
    seen = (seen - m).exp();
    double l = 0;
    for (int j = 0; j <= last; ++j) l += row(j);  // ascending order
    for (int j = last + 1; j < n_cols; ++j) row(j) = 0;
    r.row_max[i] = m;
    r.row_sum[i] = l;
    r.lse[i] = m + std::log(l);
    row /= l;
    if (!r.p.empty())
      for (int j = 0; j < n_cols; ++j) r.p[static_cast<size_t>(i) * n_kv + j] = row(j);
  }
  o.noalias() = s * V.topRows(n_cols);
  for (int i = r0; i < r1; ++i)
    for (int c = 0; c < d; ++c) r.o[static_cast<size_t>(i) * d + c] = o(i - r0, c);
}

reference_result empty_result(int n_q, int n_kv, int d, bool want_p) {
  reference_result r;
  r.o.assign(static_cast<size_t>(n_q) * d, 0.0);
  r.row_max.assign(n_q, -std::numeric_limits<double>::infinity());
  r.row_sum.assign(n_q, 0.0);
  r.lse.assign(n_q, -std::numeric_limits<double>::infinity());
  if (want_p) r.p.assign(static_cast<size_t>(n_q) * n_kv, 0.0);
  return r;
}

// Runs `scores(r0, r1, n_cols, s)` (fills the block's scaled scores) and finish_block per block.
template <typename F>
reference_result run_blocks(const double* v, int n_q, int n_kv, int d, bool causal, bool want_p, F scores) {
  reference_result r = empty_result(n_q, n_kv, d, want_p);
  if (n_q == 0 || n_kv == 0) return r;
  cmap V(v, n_kv, d);
  // Buffers sized once: resizing per block would fault in fresh pages every time.
  std::vector<double, Eigen::aligned_allocator<double>> sbuf(static_cast<size_t>(std::min(n_q, kRowBlock)) * n_kv);
  std::vector<double> obuf(static_cast<size_t>(std::min(n_q, kRowBlock)) * d);
  for (int r0 = 0; r0 < n_q; r0 += kRowBlock) {
    const int r1 = std::min(n_q, r0 + kRowBlock);
    // keys seen by the block: [0, n_cols)
    const int n_cols = causal ? std::min(n_kv, r1 + n_kv - n_q) : n_kv;
    if (n_cols <= 0) continue;
    Eigen::Map<mat> s(sbuf.data(), r1 - r0, n_cols), o(obuf.data(), r1 - r0, d);
    scores(r0, r1, n_cols, s);
    finish_block(s, o, V, r0, r1, n_cols, n_q, n_kv, d, causal, r);
  }
  return r;
}
}  // namespace

reference_result reference_attention(const double* q, const double* k, const double* v, int n_q, int n_kv, int d,
                                     bool causal, bool want_p) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  cmap K(k, n_kv, d);
  return run_blocks(v, n_q, n_kv, d, causal, want_p, [&](int r0, int r1, int n_cols, Eigen::Map<mat>& s) {
    cmap Q(q + static_cast<int64_t>(r0) * d, r1 - r0, d);
    s.noalias() = Q * K.topRows(n_cols).transpose();  // a GEMM (a scaled product expression would not be one)
    s *= scale;
  });
}

reference_result reference_from_scores(const double* sc, const double* v, int n_q, int n_kv, int d, bool causal,
                                       bool want_p) {
  return run_blocks(v, n_q, n_kv, d, causal, want_p, [&](int r0, int r1, int n_cols, Eigen::Map<mat>& s) {
    for (int i = r0; i < r1; ++i)
      for (int j = 0; j < n_cols; ++j) s(i - r0, j) = sc[static_cast<size_t>(i) * n_kv + j];
  });
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

}  // namespace attnum::attention
