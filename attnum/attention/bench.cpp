// bench_attention: see bench.h. Heads run in parallel, one per thread, as a study runs them.
#include "attnum/attention/bench.h"

#include <omp.h>

#include <Eigen/Dense>
#include <chrono>
#include <random>

#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"

namespace attnum::attention {
namespace {

template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
};

}  // namespace

bench_result bench_attention(const std::string& kernel, int tokens, int d, int repeats) {
  if (tokens <= 0 || d <= 0) fail("bench attention: --tokens {} and --d-head {} must be positive", tokens, d);
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
  const layer_view lv{q.data(), k.data(), v.data(), r.heads, r.heads, tokens, tokens, d};
  const auto p = prepare_layer(spec, lv, condition::plain);
  std::vector<float> o(n);
  const double useful = 2.0 * tokens * static_cast<double>(tokens) * d * r.heads;  // causal QK + PV
  const double full = 2.0 * useful;
  gemm_case<float> sg(r.heads, tokens, d);
  gemm_case<double> dg(r.heads, tokens, d);
  // The four timings interleave within each repeat, so a busy spell on a shared machine hits
  // all of them alike; each is the best over the repeats.
  double t_emu = 1e300, t_ref = 1e300, t_sgemm = 1e300, t_dgemm = 1e300;
  for (int rep = 0; rep < repeats; ++rep) {
    t_emu = std::min(t_emu, seconds([&] {
#pragma omp parallel for schedule(dynamic, 1)
      for (int h = 0; h < r.heads; ++h) run_head(*p, h, true, o.data() + static_cast<size_t>(h) * tokens * d);
    }));
    t_sgemm = std::min(t_sgemm, seconds([&] { sg.run(); }));
    t_ref = std::min(t_ref, seconds([&] {
#pragma omp parallel for schedule(dynamic, 1)
      for (int h = 0; h < r.heads; ++h) (void)reference_head(lv, h, true);
    }));
    t_dgemm = std::min(t_dgemm, seconds([&] { dg.run(); }));
  }
  r.gflops = useful / t_emu * 1e-9;
  r.gemm_gflops = full / t_sgemm * 1e-9;
  r.ratio = r.gflops / r.gemm_gflops;
  r.ref_gflops = useful / t_ref * 1e-9;
  r.dgemm_gflops = full / t_dgemm * 1e-9;
  r.ref_ratio = r.ref_gflops / r.dgemm_gflops;
  return r;
}

}  // namespace attnum::attention
