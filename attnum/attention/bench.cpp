// bench_attention: see bench.h. The emulation runs a layer's heads as attend() does (run_heads);
// each GEMM baseline is timed with heads in parallel and with shared slabs, and the faster counts.
#include "attnum/attention/bench.h"

#include <omp.h>

#include <atomic>

#include <Eigen/Dense>
#include <chrono>
#include <random>

#include "attnum/attention/engine.h"
#include "attnum/attention/isa.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {

template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Calls f(head, r0, rows) for every 64-row slab of every head, handed out as the engine hands out
// its tiles (take_home_first: a thread's own head first, largest row index first, then the
// others'). The balanced variant of each baseline, so that the engine's shared tiles are not
// compared with baselines that a slow core holds back.
template <typename F>
void shared_slabs(int heads, int n, F&& f) {
  const int slabs = (n + 63) / 64;
  std::vector<std::atomic<int>> next(heads);
  for (auto& x : next) x.store(0);
#pragma omp parallel
  take_home_first(next, slabs, omp_get_thread_num(), [&](int h, int j) {
    const int r0 = (slabs - 1 - j) * 64;
    f(h, r0, std::min(64, n - r0));
  });
}

// Q, K, V and the outputs of the same-shape GEMMs S = Q K^T, O = S V, per head.
template <typename T>
struct gemm_case {
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<mat> q, k, v, s, o;
  gemm_case(int heads, int n, int d) : q(heads), k(heads), v(heads), s(heads), o(heads) {
    for (int h = 0; h < heads; ++h) {
      q[h] = mat::Random(n, d), k[h] = mat::Random(n, d), v[h] = mat::Random(n, d);
      s[h].resize(n, n), o[h].resize(n, d);
    }
  }
  void run() {
    const int heads = static_cast<int>(q.size());
#pragma omp parallel for schedule(static)
    for (int h = 0; h < heads; ++h) {
      s[h].noalias() = q[h] * k[h].transpose();
      o[h].noalias() = s[h] * v[h];
    }
  }
  // The same GEMMs in 64-row slabs handed out as the engine hands out its tiles (run_heads): a
  // thread keeps to its own head, then helps with the others', so a slower core does not leave
  // the rest idle.
  void run_shared() {
    const int n = static_cast<int>(q[0].rows());
    shared_slabs(static_cast<int>(q.size()), n, [&](int h, int r0, int rows) {
      s[h].middleRows(r0, rows).noalias() = q[h].middleRows(r0, rows) * k[h].transpose();
      o[h].middleRows(r0, rows).noalias() = s[h].middleRows(r0, rows) * v[h];
    });
  }
};

// The same GEMMs cut into the engine's blocks: per head, per 64-row tile and block of bn keys,
// S = Q_tile K_blk^T (64 x bn) and O_tile += S V_blk, over every block (the FLOPs of gemm_case).
struct block_case {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  gemm_case<float>& g;
  int bn;
  std::vector<mat> s, o;
  block_case(gemm_case<float>& g_, int bn_) : g(g_), bn(bn_) {}
  // one 64-row tile of head h over every block (s_t: the thread's scores)
  void tile(int h, int r0, int rows, mat& s_t) {
    const auto& Q = g.q[h];
    const auto& K = g.k[h];
    const auto& V = g.v[h];
    const int n = static_cast<int>(Q.rows());
    o[h].middleRows(r0, rows).setZero();
    for (int j0 = 0; j0 < n; j0 += bn) {
      const int cols = std::min(bn, n - j0);
      s_t.noalias() = Q.middleRows(r0, rows) * K.middleRows(j0, cols).transpose();
      o[h].middleRows(r0, rows).noalias() += s_t * V.middleRows(j0, cols);
    }
  }
  void allocate() {  // (tile() zeroes the rows it computes)
    const int heads = static_cast<int>(g.q.size());
    if (s.empty()) {
      s.resize(heads), o.resize(heads);
      for (int h = 0; h < heads; ++h) o[h].resize(g.q[h].rows(), g.q[h].cols());
    }
  }
  void run() {
    allocate();
    const int heads = static_cast<int>(g.q.size());
#pragma omp parallel for schedule(static)
    for (int h = 0; h < heads; ++h)
      for (int r0 = 0; r0 < g.q[h].rows(); r0 += 64) tile(h, r0, std::min<int>(64, g.q[h].rows() - r0), s[h]);
  }
  void run_shared() {
    allocate();
    std::vector<mat> st(threads());
    shared_slabs(static_cast<int>(g.q.size()), static_cast<int>(g.q[0].rows()),
                 [&](int h, int r0, int rows) { tile(h, r0, rows, st[omp_get_thread_num()]); });
  }
};

// One n x n x n fp32 GEMM per head (thread).
struct square_case {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<mat> a, b, c;
  square_case(int heads, int n) : a(heads), b(heads), c(heads) {
    for (int h = 0; h < heads; ++h) a[h] = mat::Random(n, n), b[h] = mat::Random(n, n), c[h].resize(n, n);
  }
  void run() {
    const int heads = static_cast<int>(a.size());
#pragma omp parallel for schedule(static)
    for (int h = 0; h < heads; ++h) c[h].noalias() = a[h] * b[h];
  }
  void run_shared() {
    shared_slabs(static_cast<int>(a.size()), static_cast<int>(a[0].rows()), [&](int h, int r0, int rows) {
      c[h].middleRows(r0, rows).noalias() = a[h].middleRows(r0, rows) * b[h];
    });
  }
};

}  // namespace

bench_result bench_attention(const std::string& kernel, int tokens, int d, int repeats, double qk_std) {
  if (tokens <= 0 || d <= 0) fail("bench attention: --tokens {} and --d-head {} must be positive", tokens, d);
  if (!(qk_std >= 0.01 && qk_std <= 100.0))
    fail("bench attention: --qk-std {}: expected a number in [0.01, 100]", qk_std);
  {
    // What the cases below hold at once, per head: Q, K, V in fp32 and fp64, the operands of the
    // emulation and its output; the n x n scores of the fp32, fp64 and square GEMMs; refused up
    // front ("needs N GiB") rather than failing (or swapping) part way.
    const double heads = std::max(2, threads()), n = tokens;
    const double bytes = heads * (n * d * (3 * (4 + 8) + 4 * 4) + n * n * (4 + 8 + 3 * 4));
    check_alloc(bytes < 1.8e19 ? static_cast<uint64_t>(bytes) : UINT64_MAX, "bench attention");
  }
  const kernel_spec& spec = preset(kernel);
  bench_result r;
  r.kernel = kernel, r.tokens = tokens, r.d_head = d, r.threads = threads();
  r.heads = std::max(2, r.threads);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(r.heads) * tokens * d;
  std::vector<float> q(n), k(n), v(n);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = nd(rng);
  r.qk_std = qk_std;
  if (qk_std != 1)
    for (auto* x : {&q, &k})
      for (auto& e : *x) e = static_cast<float>(e * qk_std);
  const layer_view lv{q.data(), k.data(), v.data(), r.heads, r.heads, tokens, tokens, d};
  const auto p = prepare_layer(spec, lv, condition::plain);
  std::vector<float> o(n);
  const double useful = 2.0 * tokens * static_cast<double>(tokens) * d * r.heads;  // causal QK + PV
  const double full = 2.0 * useful;
  gemm_case<float> sg(r.heads, tokens, d);
  gemm_case<double> dg(r.heads, tokens, d);
  block_case bg(sg, spec.tile_for(d).second);
  square_case qg(r.heads, tokens);
  r.isa = isa::name(isa::active());
  r.fp8_sums = isa::fp8_sums();
  r.gemm_source = std::string("Eigen ") + std::to_string(EIGEN_WORLD_VERSION) + "." +
                  std::to_string(EIGEN_MAJOR_VERSION) + " fp32 (" + Eigen::SimdInstructionSetsInUse() + ")";
  // The timings interleave within each repeat, so a busy spell on a shared machine hits
  // all of them alike; each is the best over the repeats.
  double t_emu = 1e300, t_ref = 1e300, t_sgemm = 1e300, t_dgemm = 1e300, t_block = 1e300, t_square = 1e300;
  for (int rep = 0; rep < repeats; ++rep) {
    t_emu = std::min(t_emu, seconds([&] {
                       run_heads(*p, 0, r.heads, true, o.data());  // as attend() and the loss hooks run a layer
                     }));
    // each baseline: the better of heads in parallel and shared slabs (the engine's scheduling)
    t_sgemm = std::min({t_sgemm, seconds([&] { sg.run(); }), seconds([&] { sg.run_shared(); })});
    t_ref = std::min(t_ref, seconds([&] {
#pragma omp parallel for schedule(dynamic, 1)
                       for (int h = 0; h < r.heads; ++h) (void)reference_head(lv, h, true);
                     }));
    t_dgemm = std::min({t_dgemm, seconds([&] { dg.run(); }), seconds([&] { dg.run_shared(); })});
    t_block = std::min({t_block, seconds([&] { bg.run(); }), seconds([&] { bg.run_shared(); })});
    t_square = std::min({t_square, seconds([&] { qg.run(); }), seconds([&] { qg.run_shared(); })});
  }
  r.gflops = useful / t_emu * 1e-9;
  r.gemm_gflops = full / t_sgemm * 1e-9;
  r.ratio = r.gflops / r.gemm_gflops;
  r.ref_gflops = useful / t_ref * 1e-9;
  r.dgemm_gflops = full / t_dgemm * 1e-9;
  r.ref_ratio = r.ref_gflops / r.dgemm_gflops;
  r.block_gemm_gflops = full / t_block * 1e-9;
  r.ratio_block = r.gflops / r.block_gemm_gflops;
  r.square_gemm_gflops = 2.0 * tokens * static_cast<double>(tokens) * tokens * r.heads / t_square * 1e-9;
  r.ratio_square = r.gflops / r.square_gemm_gflops;
  return r;
}

}  // namespace attnum::attention
