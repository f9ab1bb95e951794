// Google Benchmark of prepare_layer (the condition's transform, Sage's smooth_k and the scaled
// casts of Q, K and V) at n 1024, d 128, plain condition, for a few presets, 2 and 32 heads
// (one kv head per query head), on 1 and 2 threads, with the CLI's allocator settings. Counter "Melem/s" = Q, K and V
// elements prepared per second.
//   prepare_bench --benchmark_filter=fa3 --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/allocator.h"
#include "attnum/core/parallel.h"

namespace {
using namespace attnum::attention;

void bm_prepare(benchmark::State& state, const char* kernel) {
  const int heads = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const int n = 1024, d = 128;
  std::vector<float> q(static_cast<size_t>(heads) * n * d), k(q.size()), v(q.size());
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = nd(rng);
  const layer_view lv{q.data(), k.data(), v.data(), heads, heads, n, n, d};
  attnum::set_threads(threads);
  for (auto _ : state) benchmark::DoNotOptimize(prepare_layer(preset(kernel), lv, condition::plain));
  state.counters["Melem/s"] =
      benchmark::Counter(3.0 * static_cast<double>(q.size()) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_CAPTURE(bm_prepare, fa3, "fa3")->ArgsProduct({{2, 32}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_prepare, sage2pp_sm89, "sage2pp-sm89")
    ->ArgsProduct({{2, 32}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_prepare, xqa_sm90, "xqa-sm90")
    ->ArgsProduct({{2, 32}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_prepare, bf16, "bf16")
    ->ArgsProduct({{2, 32}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The allocator settings of the CLI and the Python module (core/allocator.h): without them each
// iteration faults the prepared layer's fresh pages in again, which costs more than the casts here.
int main(int argc, char** argv) {
  attnum::tune_allocator();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
