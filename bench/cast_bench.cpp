// Cast throughput: float -> float8_e4m3fn on a 1M-element array, against a plain float copy of the
// same array in the same run (printed at the end as a ratio of times: 1.0 = as fast as a copy).
//   cast_e4m3_inline  quantize_e4m3_sat (the engine's hot-loop cast: float in, grid value out)
//   encode_e4m3       encode() to uint8 codes (the bit-exact reference path)
//   cast_e4m3_scaled  x * (1/scale) then quantize_e4m3_sat (a per-tensor scaled cast)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "attnum/formats/format.h"

namespace {
using namespace attnum::formats;
constexpr size_t kN = 1 << 20;

const std::vector<float>& input() {
  static const std::vector<float> x = [] {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> d(0.0f, 100.0f);
    std::vector<float> v(kN);
    for (float& e : v) e = d(rng);
    return v;
  }();
  return x;
}

void copy(benchmark::State& st) {
  const auto& x = input();
  std::vector<float> y(kN);
  for (auto _ : st) {
    std::copy(x.begin(), x.end(), y.begin());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kN));
}

void cast_e4m3_inline(benchmark::State& st) {
  const auto& x = input();
  std::vector<float> y(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) y[i] = quantize_e4m3_sat(x[i]);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kN));
}

void cast_e4m3_scaled(benchmark::State& st) {
  const auto& x = input();
  std::vector<float> y(kN);
  const float inv_scale = 448.0f / 400.0f;
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) y[i] = quantize_e4m3_sat(x[i] * inv_scale);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kN));
}

void encode_e4m3(benchmark::State& st) {
  const auto& x = input();
  std::vector<uint8_t> y(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) y[i] = static_cast<uint8_t>(encode(format::e4m3fn, x[i]));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kN));
}

BENCHMARK(copy)->Unit(benchmark::kMicrosecond);
BENCHMARK(cast_e4m3_inline)->Unit(benchmark::kMicrosecond);
BENCHMARK(cast_e4m3_scaled)->Unit(benchmark::kMicrosecond);
BENCHMARK(encode_e4m3)->Unit(benchmark::kMicrosecond);

// Console output plus the time per iteration of each benchmark, for the ratios.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0) seconds[r.benchmark_name()] = r.GetAdjustedRealTime();
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ratio_reporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  const auto it = rep.seconds.find("copy");
  if (it != rep.seconds.end() && it->second > 0) {
    std::printf("\nTime ratio to a plain float copy of %zu floats (same run):\n", kN);
    for (const auto& [name, t] : rep.seconds)
      if (name != "copy") std::printf("  %-18s %6.2fx\n", name.c_str(), t / it->second);
  }
  benchmark::Shutdown();
  return 0;
}
