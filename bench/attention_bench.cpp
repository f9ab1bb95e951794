// Google Benchmark of the attention emulation (one head, causal), the fp64 reference and the
// Eigen GEMMs of the same shapes. Counter "GFLOPs" = useful causal FLOPs (2 n^2 d per head for
// QK^T and PV) per second; the GEMM counts its full 4 n^2 d. `attnum bench attention` runs the
// same comparison on all threads in one process.
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <random>

#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/parallel.h"

namespace {
using namespace attnum::attention;

struct data {
  std::vector<float> q, k, v;
  layer_view view;
  data(int n, int d) : q(size_t(n) * d), k(q.size()), v(q.size()) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto* x : {&q, &k, &v})
      for (auto& e : *x) e = nd(rng);
    view = {q.data(), k.data(), v.data(), 1, 1, n, n, d};
  }
};

void bm_emulation(benchmark::State& state, const char* kernel) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  attnum::set_threads(1);
  data D(n, d);
  const auto p = prepare_layer(preset(kernel), D.view, condition::plain);
  std::vector<float> o(size_t(n) * d);
  for (auto _ : state) {
    run_head(*p, 0, true, o.data());
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_reference(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  data D(n, d);
  for (auto _ : state) benchmark::DoNotOptimize(reference_head(D.view, 0, true));
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

template <typename T>
void bm_gemm(benchmark::State& state) {
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  mat q = mat::Random(n, d), k = mat::Random(n, d), v = mat::Random(n, d), s(n, n), o(n, d);
  for (auto _ : state) {
    s.noalias() = q * k.transpose();
    o.noalias() = s * v;
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(4.0 * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_CAPTURE(bm_emulation, fa3, "fa3")->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_emulation, fa3_acc13, "fa3-acc13")->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_emulation, sage2pp_sm89, "sage2pp-sm89")->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_emulation, bf16, "bf16")->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_reference)->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_gemm<float>)->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_gemm<double>)->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
