// Hostile and broken inputs through the built tool: every case exits 2 with a message
// naming the file and the field, and leaves --out as it found it (docs/reliability.md).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/core/file.h"
#include "attnum/core/hash.h"
#include "attnum/io/npy.h"
#include "attnum/io/safetensors.h"
#include "cli_util.h"

namespace fs = std::filesystem;
using attnum::test::run_attnum;
using attnum::test::run_result;

namespace {

const std::string kData = ATTNUM_DATA_DIR;  // data/ in the repository (stories260K, tok512)

class bad_input : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnum-bad-input-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path file(const std::string& name, const std::string& bytes) const {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // Runs attnum; expects exit 2, every fragment in the message, and `out` not created.
  run_result refused(const std::string& args, std::initializer_list<std::string> fragments,
                     const fs::path& out = {}) const {
    const run_result r = run_attnum(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    for (const auto& f : fragments) EXPECT_NE(r.out.find(f), std::string::npos) << "'" << f << "' in:\n" << r.out;
    EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
    if (!out.empty()) {
      EXPECT_FALSE(fs::exists(out)) << out << " left by: " << args;
    }
    return r;
  }
  // Q, K, V of one small layer as .npy files; returns the attend arguments.
  std::string qkv(int n = 8, int d = 16) const {
    std::vector<float> x(size_t(n) * d);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i)) * 0.5f;
    for (const char* t : {"q", "k", "v"})
      attnum::io::write_npy((dir_ / (std::string(t) + ".npy")).string(), x.data(), {n, d});
    return "attend --q " + (dir_ / "q.npy").string() + " --k " + (dir_ / "k.npy").string() + " --v " +
           (dir_ / "v.npy").string();
  }
  std::string stories() const { return kData + "/stories260K.bin"; }
  // A llama2.c checkpoint: header (7 int32) and a body of the size the header implies.
  fs::path llama2c(const std::string& name, int32_t vocab) const {
    const int32_t h[7] = {8, 8, 1, 2, 2, vocab, 4};
    std::string bytes(reinterpret_cast<const char*>(h), sizeof h);
    const int64_t V = vocab < 0 ? -int64_t(vocab) : vocab;
    // V*D + L*(2D + D*hd + 2*D*kv + hd*D + 3*D*H) + D + 2*freq (+ V*D untied)
    const int64_t floats = V * 8 + (16 + 64 + 128 + 64 + 192) + 8 + 2 * 8 + (vocab < 0 ? V * 8 : 0);
    if (V < 100000) bytes.append(size_t(floats) * 4, '\0');
    return file(name, bytes);
  }
  // A Hugging Face folder with config.json fields overridden by `extra` (JSON members).
  fs::path hf(const std::string& name, const std::string& extra) const {
    const fs::path d = dir_ / name;
    file(name + "/config.json",
         "{\"model_type\": \"llama\", \"intermediate_size\": 16, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 2, \"vocab_size\": 32, " +
             extra + "}");
    return d;
  }
  fs::path dir_;
};

// --- crashes --------------------------------------------------------------------------------

TEST_F(bad_input, tokenizer_json_ids_outside_the_range) {
  ASSERT_TRUE(fs::exists(stories())) << stories();
  const fs::path text = file("t.txt", "Once upon a time");
  const fs::path out = dir_ / "out";
  for (const char* id : {"-1", "-2147483648", "2147483647", "1e3", "true", "\"3\""}) {
    const fs::path tok = file(
        "tok.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": " + std::string(id) + "}, \"merges\": []}}");
    refused("capture --model " + stories() + " --tokens 4 --tokenizer " + tok.string() + " --text " + text.string() +
                " --out " + out.string(),
            {tok.string(), "model.vocab[\"a\"]", "token id"}, out);
  }
  const fs::path tok = file("tok.json",
                            "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                            "\"added_tokens\": [{\"content\": \"<s>\", \"id\": -5}]}");
  refused("capture --model " + stories() + " --tokens 4 --tokenizer " + tok.string() + " --text " + text.string() +
              " --out " + out.string(),
          {tok.string(), "added_tokens[0].id"}, out);
}

TEST_F(bad_input, tokenizer_json_type_errors_name_the_file) {
  ASSERT_TRUE(fs::exists(stories())) << stories();
  const fs::path text = file("t.txt", "Once upon a time");
  for (const std::string& body :
       {std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": "
                    "[{\"content\": 5, \"id\": 1}]}"),
        std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": 7}"),
        std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": 3}"),
        std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}")}) {
    const fs::path tok = file("tok.json", body);
    const run_result r = refused("capture --model " + stories() + " --tokens 4 --tokenizer " + tok.string() +
                                     " --text " + text.string() + " --out " + (dir_ / "out").string(),
                                 {tok.string()}, dir_ / "out");
  }
}

TEST_F(bad_input, tokenizer_json_sentencepiece_fields_malformed) {
  ASSERT_TRUE(fs::exists(stories())) << stories();
  const fs::path text = file("t.txt", "Once upon a time");
  const fs::path out = dir_ / "out";
  const std::string model = "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []";
  for (const auto& [body, field] : std::initializer_list<std::pair<std::string, std::string>>{
           {"{" + model +
                "}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", "
                "\"prepend_scheme\": \"sometimes\"}}",
            "pre_tokenizer.prepend_scheme"},
           {"{" + model + "}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": 5}}",
            "pre_tokenizer.replacement"},
           {"{" + model + "}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"split\": 1}}",
            "pre_tokenizer.split"},
           {"{" + model + ", \"byte_fallback\": \"yes\"}}", "model.byte_fallback"},
           {"{" + model + ", \"unk_token\": \"<unk>\"}}", "model.unk_token"},
           {"{" + model +
                "}, \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": 3}}",
            "normalizer.content"},
           {"{" + model + "}, \"normalizer\": {\"type\": \"NFKD\"}}", "normalizer.type"},
           {"{" + model + ", \"continuing_subword_prefix\": 1}}", "model.continuing_subword_prefix"},
           {"{" + model + ", \"end_of_word_suffix\": []}}", "model.end_of_word_suffix"},
           {"{" + model + "}, \"pre_tokenizer\": {\"type\": \"Whitespace\", \"x\": 1}}", "pre_tokenizer.x"},
           {"{" + model + "}, \"added_tokens\": [{\"id\": 0, \"content\": \"a\", \"normalized\": 1}]}",
            "added_tokens[0].normalized"}}) {
    const fs::path tok = file("tok.json", body);
    refused("capture --model " + stories() + " --tokens 4 --tokenizer " + tok.string() + " --text " + text.string() +
                " --out " + out.string(),
            {tok.string(), field}, out);
  }
}

TEST_F(bad_input, tokenizer_json_split_regex_malformed_or_unsupported) {
  ASSERT_TRUE(fs::exists(stories())) << stories();
  const fs::path text = file("t.txt", "Once upon a time");
  const fs::path out = dir_ / "out";
  for (const auto& [re, construct] :
       std::initializer_list<std::pair<std::string, std::string>>{{"[a", "a class without its ']'"},
                                                                  {"(?<=a)b", "a lookbehind"},
                                                                  {"\\\\p{Han}", "\\p{Han}"},
                                                                  {"a{3,2}", "m < n"},
                                                                  {"(a", "')'"},
                                                                  {"^a", "anchor"},
                                                                  {"a*", "can match the empty string"}}) {
    const fs::path tok = file("tok.json",
                              "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                              "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                              "\"pattern\": {\"Regex\": \"" +
                                  re +
                                  "\"}, \"behavior\": \"Isolated\"}, "
                                  "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}}");
    refused("capture --model " + stories() + " --tokens 4 --tokenizer " + tok.string() + " --text " + text.string() +
                " --out " + out.string(),
            {tok.string(), "pre_tokenizer.pretokenizers[0].pattern.Regex", construct}, out);
  }
}

TEST_F(bad_input, zoo_token_counts_outside_the_range) {
  const fs::path out = dir_ / "out";
  refused("heads --zoo --n-tok 0 --quiet --out " + out.string(), {"--n-tok 0"}, out);
  refused("heads --zoo --n-tok -8 --quiet --out " + out.string(), {"--n-tok -8"}, out);
  refused("heads --zoo --n-tok 2000000000 --quiet --out " + out.string(), {"--n-tok 2000000000", "needs", "GiB"}, out);
  refused("heads --zoo --layers -1 --quiet --out " + out.string(), {"--layers -1"}, out);
  refused("heads --zoo --texts 0 --quiet --out " + out.string(), {"--texts 0"}, out);
}

TEST_F(bad_input, pcast_and_bench_sizes_outside_the_range) {
  const fs::path out = dir_ / "out";
  for (const char* n : {"0", "-3", "2147483647", "1.5"})
    refused(std::string("pcast simulate --quick --n-tok ") + n + " --out " + out.string(),
            {"--n-tok", n, "expected an integer in [1, 1000000000]"}, out);
  refused("pcast bound --n-tok 0", {"--n-tok 0"});
  refused("pcast claims --quick --kernel fa3 --out " + out.string(), {"pcast claims", "--kernel", "fa3"}, out);
  refused("pcast simulate --quick --n-tok 1000000000 --out " + out.string(), {"n_tok 1000000000", "too large"}, out);
  refused("bench attention --tokens 10000000", {"bench attention", "needs", "GiB"});
  refused("bench attention --d-head 100000000", {"bench attention", "needs", "GiB"});
  refused("bench attention --tokens -1", {"--tokens -1"});
  refused("bench attention --qk-std 0", {"--qk-std", "0"});
  refused("bench attention --qk-std nan", {"--qk-std", "nan", "expected a number in [0.01, 100]"});
  refused("bench attention --qk-std inf", {"--qk-std"});
  refused("bench forward --tokens -4", {"--tokens -4", "expected >= 1"});
  refused("bench forward --tokens 0", {"--tokens 0"});
  refused("bench forward --layers -2", {"--layers -2"});
  refused("bench forward --shape 3b", {"--shape 3b", "expected 0.5b, 1.5b or 7b"});
  refused("bench forward --weights fp8", {"--weights fp8", "expected fp32 or bf16"});
}

TEST_F(bad_input, threads_above_the_cores_are_capped_negative_refused) {
  const std::string args = qkv();
  const run_result r = run_attnum("--threads 100000 " + args + " --kernel fa3");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("capped"), std::string::npos) << r.out;
  refused("--threads -3 " + args + " --kernel fa3", {"--threads -3"});
}

// --- aborts from worker threads, knob ranges --------------------------------------------------

TEST_F(bad_input, knobs_outside_their_range_are_refused_before_any_work) {
  const std::string args = qkv();
  const fs::path out = dir_ / "o.npy";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pv_acc.k_step=0", "pv_acc.k_step"},
      {"qk_acc.k_step=-1", "qk_acc.k_step"},
      {"block_n=1000000000", "block_n"},
      {"block_m=0", "block_m"},
      {"p_scale=nan", "p_scale"},
      {"p_scale=0", "p_scale"},
      {"p_scale=-1", "p_scale"},
      {"k.scale_max=-448", "k.scale_max"},
      {"k.group_div=0", "k.group_div"},
      {"k.group_div=3", "k.group_div"},
      {"qk_acc.kind=truncated --knob qk_acc.mant_bits=99", "qk_acc.mant_bits"},
      {"block_n=1e300", "block_n"},
      {"mask_value=nan", "mask_value"},
      {"k.eps=-1", "k.eps"}};
  for (const auto& [knob, field] : cases)
    refused(args + " --kernel fa3 --knob " + knob + " --out " + out.string(), {field}, out);
}

// --- security: file references inside a model folder ----------------------------------------

TEST_F(bad_input, shard_names_must_stay_inside_the_model_folder) {
  const std::string secret = "root:x:0:0:SECRET-BYTES";
  file("outside/secret.safetensors", std::string("\x10\0\0\0\0\0\0\0", 8) + secret);
  for (const std::string& name :
       {std::string("../outside/secret.safetensors"), std::string("../../../../../../etc/passwd"),
        (dir_ / "outside/secret.safetensors").string(), std::string("a/../../x")}) {
    const fs::path m = hf("m", "\"hidden_size\": 8");
    file("m/model.safetensors.index.json", "{\"weight_map\": {\"model.embed_tokens.weight\": \"" + name + "\"}}");
    const fs::path ids = file("ids.txt", "1 2 3 4");
    const run_result r = refused("capture --model " + m.string() + " --token-ids " + ids.string() +
                                     " --tokens 4 --out " + (dir_ / "out").string(),
                                 {"model.safetensors.index.json", "weight_map"}, dir_ / "out");
    EXPECT_EQ(r.out.find("SECRET"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("root:"), std::string::npos) << r.out;
  }
}

// --- wrong results with exit 0 ----------------------------------------------------------------

TEST_F(bad_input, hf_config_integers_must_be_exact_and_in_range) {
  const fs::path ids = file("ids.txt", "1 2 3 4");
  for (const char* v : {"4294967312", "16.5", "true", "1e30", "-16", "0", "\"16\"", "2147483648"}) {
    const fs::path m = hf("m", "\"hidden_size\": " + std::string(v));
    refused("capture --model " + m.string() + " --token-ids " + ids.string() + " --out " + (dir_ / "out").string(),
            {"config.json", "hidden_size", "expected an integer"}, dir_ / "out");
    fs::remove_all(m);
  }
  const fs::path m = hf("m", "\"hidden_size\": 16, \"num_key_value_heads\": true");
  refused("capture --model " + m.string() + " --token-ids " + ids.string() + " --out " + (dir_ / "out").string(),
          {"config.json", "num_key_value_heads"}, dir_ / "out");
}

TEST_F(bad_input, llama2c_vocab_out_of_range) {
  const fs::path ids = file("ids.txt", "1 2 3 4");
  for (int32_t vocab : {INT32_MIN, 0}) {
    const fs::path m = llama2c("m.bin", vocab);
    refused("capture --model " + m.string() + " --token-ids " + ids.string() + " --tokens 4 --out " +
                (dir_ / "out").string(),
            {m.string(), "vocab_size"}, dir_ / "out");
  }
}

TEST_F(bad_input, tokenizer_larger_than_the_model_vocabulary) {
  ASSERT_TRUE(fs::exists(stories())) << stories();
  const fs::path m = llama2c("m.bin", 300);
  const fs::path text = file("t.txt", "Once upon a time");
  refused("capture --model " + m.string() + " --tokenizer " + kData + "/tok512.bin --text " + text.string() +
              " --tokens 4 --out " + (dir_ / "out").string(),
          {"tok512.bin", "vocab_size 300"}, dir_ / "out");
}

TEST_F(bad_input, tokenizer_nan_scores) {
  const fs::path m = llama2c("m.bin", 300);
  std::string tok(4, '\0');
  const int32_t max_len = 4;
  std::memcpy(tok.data(), &max_len, 4);
  for (int i = 0; i < 300; ++i) {
    const float score = i == 7 ? NAN : -float(i);
    const int32_t len = 1;
    tok.append(reinterpret_cast<const char*>(&score), 4).append(reinterpret_cast<const char*>(&len), 4);
    tok.push_back(char('a' + i % 26));
  }
  const fs::path t = file("tok.bin", tok);
  const fs::path text = file("t.txt", "abc");
  refused("capture --model " + m.string() + " --tokenizer " + t.string() + " --text " + text.string() +
              " --tokens 1 --out " + (dir_ / "out").string(),
          {t.string(), "token 7", "NaN"}, dir_ / "out");
}

TEST_F(bad_input, cast_of_the_smallest_subnormal_gives_a_code) {
  const run_result r = run_attnum("cast --to e4m3fn --json 4.9e-324");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"code\":\"0x00\""), std::string::npos) << r.out;
  refused("cast --to e4m3fn 1e999", {"1e999", "range"});
}

TEST_F(bad_input, nan_output_is_never_reported_as_error_zero) {
  // All-zero V: the fp64 reference is 0, and sage2pp-sm89's per-channel V scale (no eps) makes
  // the output NaN. Its rel_err must not read 0 (it was: 0 / 0 was taken as exact).
  std::vector<float> q(2 * 16 * 8), k(16 * 8), v(16 * 8, 0.0f);
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(std::sin(0.7 * double(i)));
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(std::cos(0.3 * double(i)));
  const fs::path cap = dir_ / "m__t.safetensors";
  attnum::io::write_safetensors(cap.string(),
                                {{"layers.0.q", {2, 16, 8}, q.data(), attnum::io::st_dtype::BF16},
                                 {"layers.0.k", {1, 16, 8}, k.data(), attnum::io::st_dtype::BF16},
                                 {"layers.0.v", {1, 16, 8}, v.data(), attnum::io::st_dtype::BF16}},
                                {{"model", "m"}});
  const fs::path out = dir_ / "out";
  const run_result r = run_attnum("heads --captures " + cap.string() +
                                  " --kernel sage2pp-sm89 --conditions plain,rotate --quiet --out " + out.string());
  ASSERT_TRUE(r.status == 0 || r.status == 2) << r.out;
  if (r.status == 2) return;  // refusing is allowed; reading 0 is not
  std::ifstream in(out / "rows.csv");
  std::string header, line;
  std::getline(in, header);
  size_t col = 0, at = 0;
  for (size_t p = 0; (p = header.find(',', at)) != std::string::npos && header.substr(at, p - at) != "rel_err";
       at = p + 1)
    ++col;
  int rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    for (size_t b = 0, e; b <= line.size(); b = e + 1) {
      e = line.find(',', b);
      if (e == std::string::npos) e = line.size();
      cells.push_back(line.substr(b, e - b));
    }
    ASSERT_LT(col, cells.size()) << header;
    const std::string& cell = cells[col];
    EXPECT_TRUE(cell.empty() || std::isnan(std::strtod(cell.c_str(), nullptr)) ||
                std::strtod(cell.c_str(), nullptr) > 0)
        << "rel_err '" << cell << "' for a NaN output: " << line;
    ++rows;
  }
  EXPECT_GT(rows, 0);
}

// --- denial of service ----------------------------------------------------------------------

TEST_F(bad_input, fifo_is_refused_without_blocking) {
  const std::string args = qkv();
  const fs::path fifo = dir_ / "q.npy";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // timeout: a regression blocks forever; 124 would be its status.
  const run_result r =
      attnum::test::run_command("timeout 60 " + std::string(ATTNUM_BINARY) + " " + args + " --kernel fa3 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("FIFO"), std::string::npos) << r.out;
  const fs::path ids = dir_ / "ids.txt";
  ASSERT_EQ(::mkfifo(ids.c_str(), 0600), 0);
  const fs::path m = llama2c("m.bin", 300);
  const run_result r2 = attnum::test::run_command("timeout 60 " + std::string(ATTNUM_BINARY) + " capture --model " +
                                                  m.string() + " --token-ids " + ids.string() + " --tokens 4 --out " +
                                                  (dir_ / "out").string() + " 2>&1");
  EXPECT_EQ(r2.status, 2) << r2.out;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

// A study's inputs are hashed (checkpoints/study.json) from the descriptor that was checked, never
// reopened by name: a FIFO or a symlink to /dev/zero as a capture or kernel-output file is refused
// at once (no hang), naming it; a good capture's recorded hash is that of its bytes.
TEST_F(bad_input, capture_hashes_read_one_descriptor_fifo_and_dev_zero_refused) {
  std::vector<float> q(2 * 4 * 8, 0.25f), kv(1 * 4 * 8, 0.5f);
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(int(i % 7) - 3) * 0.125f;
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = float(int(i % 5) - 2) * 0.25f;
  std::vector<fs::path> caps, outs;
  for (const char* t : {"a", "b"}) {
    caps.push_back(dir_ / (std::string("m__") + t + ".safetensors"));
    attnum::io::write_safetensors(caps.back().string(),
                                  {{"layers.0.q", {2, 4, 8}, q.data(), attnum::io::st_dtype::F32},
                                   {"layers.0.k", {1, 4, 8}, kv.data(), attnum::io::st_dtype::F32},
                                   {"layers.0.v", {1, 4, 8}, kv.data(), attnum::io::st_dtype::F32}},
                                  {{"model", "m"}});
    outs.push_back(dir_ / (std::string("o__") + t + ".safetensors"));
    attnum::io::write_safetensors(outs.back().string(),
                                  {{"layers.0.o.plain", {2, 4, 8}, q.data(), attnum::io::st_dtype::F32},
                                   {"layers.0.o.rotate", {2, 4, 8}, q.data(), attnum::io::st_dtype::F32}},
                                  {});
  }
  const fs::path out = dir_ / "out";
  const std::string heads =
      "heads --kernel fa3 --conditions plain,rotate --quiet --out " + out.string() + " --captures ";
  ASSERT_EQ(run_attnum(heads + caps[0].string()).status, 0);
  const nlohmann::json study = attnum::read_json(out / "checkpoints" / "study.json");
  const std::string bytes = attnum::read_file(caps[0]);
  EXPECT_EQ(study["source_files"][0]["fnv1a64"], attnum::core::fnv1a_hex(bytes.data(), bytes.size())) << study.dump();
  fs::remove_all(out);

  const fs::path fifo = dir_ / "fifo.safetensors", zero = dir_ / "zero.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", zero);
  const std::string timeout = "timeout 60 " + std::string(ATTNUM_BINARY) + " ";
  for (const fs::path& bad : {fifo, zero}) {
    const char* why = bad == fifo ? "FIFO" : "not a regular file";
    // as a capture
    run_result r = attnum::test::run_command(timeout + heads + caps[0].string() + " " + bad.string() + " 2>&1");
    EXPECT_EQ(r.status, 2) << r.out;  // 124: it hung
    EXPECT_NE(r.out.find(bad.string()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out));
    // as the second kernel-output file (the first is read for its conditions; this one only hashed)
    r = attnum::test::run_command(timeout + "transfer --quiet --json --emulator fa3 --captures " + caps[0].string() +
                                  " " + caps[1].string() + " --kernel-outputs " + outs[0].string() + " " +
                                  bad.string() + " 2>&1");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(bad.string()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
  }
}

// --- partial folders ------------------------------------------------------------------------

TEST_F(bad_input, capture_error_mid_run_leaves_no_folder_heads_no_checkpoints) {
  // A capture whose layer 0 K and V disagree: found when the unit is computed, after the
  // study's checkpoints/study.json was written.
  std::vector<float> q(2 * 4 * 8, 0.25f), k(1 * 4 * 8, 0.5f), v(1 * 3 * 8, 0.5f);
  const fs::path cap = dir_ / "m__t.safetensors";
  attnum::io::write_safetensors(cap.string(),
                                {{"layers.0.q", {2, 4, 8}, q.data(), attnum::io::st_dtype::BF16},
                                 {"layers.0.k", {1, 4, 8}, k.data(), attnum::io::st_dtype::BF16},
                                 {"layers.0.v", {1, 3, 8}, v.data(), attnum::io::st_dtype::BF16}},
                                {{"model", "m"}});
  const fs::path out = dir_ / "out";
  refused("heads --captures " + cap.string() + " --kernel fa3 --conditions plain,rotate --quiet --out " + out.string(),
          {cap.string(), "layer 0"}, out);
  // Without --out: the temporary attnum-heads-PID folder goes too.
  const fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  const run_result r = attnum::test::run_command("TMPDIR=" + tmp.string() + " " + ATTNUM_BINARY + " heads --captures " +
                                                 cap.string() + " --kernel fa3 --conditions plain,rotate --quiet 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(fs::is_empty(tmp)) << "left in TMPDIR: " << fs::directory_iterator(tmp)->path();
  // An existing --out keeps what was there (an earlier run's files) and gains nothing.
  fs::create_directories(out);
  file("out/keep.txt", "earlier");
  refused("heads --captures " + cap.string() + " --kernel fa3 --conditions plain,rotate --quiet --out " + out.string(),
          {cap.string()});
  EXPECT_TRUE(fs::exists(out / "keep.txt"));
  EXPECT_FALSE(fs::exists(out / "checkpoints"));
}

TEST_F(bad_input, shapes_out_of_range_printed_unsigned) {
  // [0, 2^64-1]: zero elements, but a dimension no count can hold.
  const std::string header = "{\"q\":{\"dtype\":\"F32\",\"shape\":[0,18446744073709551615],\"data_offsets\":[0,0]}}";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  const fs::path q = file("q.safetensors", bytes + header);
  const std::string args = qkv();
  refused("attend --q " + q.string() + " --k " + (dir_ / "k.npy").string() + " --v " + (dir_ / "v.npy").string() +
              " --kernel fa3",
          {q.string(), "18446744073709551615"});
}

TEST_F(bad_input, unclear_messages_now_name_the_problem) {
  const std::string args = qkv();
  // --text or --token-ids on a folder
  const fs::path m = llama2c("m.bin", 300);
  const fs::path ids_dir = dir_ / "ids";
  fs::create_directories(ids_dir);
  refused("capture --model " + m.string() + " --token-ids " + ids_dir.string() + " --tokens 4 --out " +
              (dir_ / "out").string(),
          {ids_dir.string(), "is a folder"}, dir_ / "out");
  if (fs::exists(stories()))
    refused(
        "capture --model " + stories() + " --text " + ids_dir.string() + " --tokens 4 --out " + (dir_ / "out").string(),
        {ids_dir.string(), "is a folder"}, dir_ / "out");
  // An --out whose folder cannot be created: the system's reason, not "No such file".
  const fs::path blocker = file("blocker", "a file, not a folder");
  const run_result r =
      refused(args + " --kernel fa3 --out " + (blocker / "o.npy").string(), {"blocker", "Not a directory"});
  EXPECT_EQ(r.out.find("No such file"), std::string::npos) << r.out;
}

// A 100 KB value in a flag, a knob or a file's field: the message quotes at most ~200 bytes of it
// (attnum::clip; CLI11's own messages are cut where main prints them) and still names the field.
TEST_F(bad_input, huge_values_are_clipped_in_messages) {
  const std::string v(100000, 'x');
  const fs::path out = dir_ / "out";
  const std::string args = qkv();
  auto clipped = [&](const std::string& a, std::initializer_list<std::string> fragments, size_t limit = 1024) {
    const run_result r = refused(a, fragments, out);
    EXPECT_LT(r.out.size(), limit) << r.out.substr(0, 600);
    EXPECT_NE(r.out.find("bytes)"), std::string::npos) << "the length of the value: " << r.out.substr(0, 600);
  };
  // attnum's own checks of flag values
  clipped(args + " --kernel " + v, {"unknown kernel preset"});
  clipped(args + " --kernel fa3," + v, {"unknown kernel preset"});
  clipped(args + " --kernel fa3 --knob " + v, {"knob", "expected knob=value"});
  clipped(args + " --kernel fa3 --knob " + v + "=1", {"unknown knob", "known:"}, 1024 + 1024);  // lists the 70 knobs
  clipped(args + " --kernel fa3 --knob qk_acc.k_step=" + v, {"knob qk_acc.k_step", "not a number"});
  clipped(args + " --kernel fa3 --knob qk_acc.kind=" + v, {"knob qk_acc.kind", "unknown value"});
  clipped(args + " --kernel fa3 --knob exp2_unit=" + v, {"knob exp2_unit", "unknown value"});
  clipped(args + " --kernel fa3 --knob transform_dtype=" + v, {"knob transform_dtype"});
  clipped("heads --zoo --quiet --conditions plain," + v + " --out " + out.string(),
          {"--conditions", "unknown condition"});
  clipped("heads --zoo --quiet --predictor-model " + v + " --out " + out.string(), {"--predictor-model"});
  clipped("heads --zoo --quiet --rotation random-hadamard:" + v + " --out " + out.string(), {"--rotation", "SEED"});
  clipped("heads --zoo --quiet --shard " + v + " --out " + out.string(), {"--shard"});
  clipped("study --quiet --model " + v + " --out " + out.string(), {"no such model file", "File name too long"});
  clipped("cast --to " + v + " 1", {"unknown number format"});
  clipped("cast --to e4m3fn " + v, {"cast", "is not a number"});
  clipped(v, {"unknown command"});
  clipped(args + " --" + v, {"unknown flag"});
  // CLI11's own parse errors
  clipped("--threads " + v + " kernels", {"--threads"});
  clipped("heads --zoo --quiet --n-tok " + v + " --out " + out.string(), {"--n-tok"});
  clipped("kernels " + v, {"not expected"});
}

// --- a finished folder says so ----------------------------------------------------------------

TEST_F(bad_input, completion_marker_written_last_and_required) {
  const std::string small =
      "heads --zoo --n-tok 16 --layers 1 --texts 1 --quiet --kernel fa3 --conditions plain,rotate ";
  const fs::path a = dir_ / "a", b = dir_ / "b", merged = dir_ / "merged";
  // A temp file of a killed run whose token the folder's lock file records goes on the next
  // run; user files named like temp files stay.
  file("a/.attnum-lock", "00000000deadbeef\n");
  file("a/checkpoints/unit-000000.jsonl.attnum-tmp-00000000deadbeef", "half");
  file("a/notes.tmp.4000000", "user");
  file("a/sub/draft.tmp.99999", "user");
  ASSERT_EQ(run_attnum(small + "--shard 0/2 --out " + a.string()).status, 0);
  EXPECT_FALSE(fs::exists(a / "checkpoints/unit-000000.jsonl.attnum-tmp-00000000deadbeef"));
  EXPECT_TRUE(fs::exists(a / "notes.tmp.4000000"));
  EXPECT_TRUE(fs::exists(a / "sub/draft.tmp.99999"));
  EXPECT_FALSE(fs::exists(a / ".attnum-lock"));
  EXPECT_TRUE(fs::exists(a / "complete.json"));
  // Merging one shard of two: units are missing; --out is not created.
  refused("merge " + a.string() + " --out " + merged.string(), {}, merged);
  ASSERT_EQ(run_attnum(small + "--shard 1/2 --out " + b.string()).status, 0);
  // A shard killed before its marker is refused by merge.
  fs::remove(b / "complete.json");
  refused("merge " + a.string() + " " + b.string() + " --out " + merged.string(), {b.string(), "complete.json"},
          merged);
  ASSERT_EQ(run_attnum(small + "--shard 1/2 --out " + b.string()).status, 0);
  ASSERT_EQ(run_attnum("merge " + a.string() + " " + b.string() + " --out " + merged.string()).status, 0);
  ASSERT_TRUE(fs::exists(merged / "complete.json"));
  // report refuses a folder without the marker, or whose files changed after it.
  const fs::path html = dir_ / "r.html";
  std::ofstream(merged / "summary.json", std::ios::app) << " ";
  refused("report --results " + merged.string() + " --out " + html.string(), {"summary.json", "changed"}, html);
  fs::remove(merged / "complete.json");
  refused("report --results " + merged.string() + " --out " + html.string(), {merged.string(), "complete.json"}, html);
}

// A symlink to /dev/zero or a FIFO in place of a file of a folder read back (report, merge,
// resume): refused at once, naming the file, without reading it (memory capped at 2 GiB here).
TEST_F(bad_input, dev_zero_and_fifo_in_a_result_folder_refused_naming_the_file) {
  const std::string small =
      "heads --zoo --n-tok 16 --layers 1 --texts 1 --quiet --kernel fa3 --conditions plain,rotate ";
  const fs::path full = dir_ / "full", s0 = dir_ / "s0", s1 = dir_ / "s1";
  ASSERT_EQ(run_attnum(small + "--out " + full.string()).status, 0);
  ASSERT_EQ(run_attnum(small + "--shard 0/2 --out " + s0.string()).status, 0);
  ASSERT_EQ(run_attnum(small + "--shard 1/2 --out " + s1.string()).status, 0);
  // Replaces `name` in a copy of `src` by a /dev/zero symlink or a FIFO; returns the copy.
  auto spoiled = [&](const fs::path& src, const std::string& name, bool fifo) {
    const fs::path d = dir_ / "spoiled";
    fs::remove_all(d);
    fs::copy(src, d, fs::copy_options::recursive);
    fs::remove(d / name);
    if (fifo)
      EXPECT_EQ(::mkfifo((d / name).c_str(), 0600), 0);
    else
      fs::create_symlink("/dev/zero", d / name);
    return d;
  };
  auto check = [&](const std::string& args, const fs::path& file, bool fifo, const fs::path& out) {
    const auto t0 = std::chrono::steady_clock::now();
#if defined(__SANITIZE_ADDRESS__)
    const std::string cap;  // ASan reserves terabytes of address space: no ulimit -v there (the time check stays)
#else
    const std::string cap = "ulimit -v 2097152; ";
#endif
    const run_result r =
        attnum::test::run_command(cap + "timeout 60 " + std::string(ATTNUM_BINARY) + " " + args + " 2>&1");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << args;
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    for (const std::string& f : {file.string(), std::string(fifo ? "is a FIFO" : "is not a regular file"),
                                 std::string("expected a regular file")})
      EXPECT_NE(r.out.find(f), std::string::npos) << "'" << f << "' in:\n" << args << "\n" << r.out;
    if (!out.empty()) {
      EXPECT_FALSE(fs::exists(out)) << out << " left by: " << args;
    }
  };
  const fs::path html = dir_ / "r.html", merged = dir_ / "merged";
  for (const bool fifo : {false, true}) {
    for (const char* name : {"summary.json", "complete.json", "checkpoints/unit-000000.jsonl"}) {
      const fs::path d = spoiled(full, name, fifo);
      check("report --results " + d.string() + " --out " + html.string(), d / name, fifo, html);
    }
    for (const char* name : {"checkpoints/study.json", "checkpoints/unit-000000.jsonl"}) {
      const fs::path d = spoiled(s0, name, fifo);
      check("merge " + d.string() + " " + s1.string() + " --out " + merged.string(), d / name, fifo, merged);
      fs::remove(d / "complete.json");  // a killed run, resumed
      check(small + "--shard 0/2 --out " + d.string(), d / name, fifo, {});
    }
  }
}

// --- non-finite numbers are refused or flagged, never summarised ------------------------------

TEST_F(bad_input, non_finite_weights_refused_and_non_finite_outputs_flagged) {
  // One NaN embedding weight (llama2.c: the embedding table follows the 28-byte header).
  const fs::path m = llama2c("nan.bin", 300);
  {
    std::fstream f(m, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(28 + 4 * 5);
    const float nan = std::nanf("");
    f.write(reinterpret_cast<const char*>(&nan), 4);
  }
  refused("capture --model " + m.string() + " --token-ids " + file("ids.txt", "1 2 3 4").string() +
              " --tokens 4 --out " + (dir_ / "out").string(),
          {m.string(), "tok_embeddings[5]", "nan"}, dir_ / "out");
  // Finite but huge q: a NaN output is flagged and has no metrics, and the warning names the cause.
  const int n = 8, d = 16;
  std::vector<float> q(size_t(n) * d), k(q.size()), v(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = (i % 3 == 0 ? -1.2e10f : 1.2e10f) * float(1 + i % 5);
    k[i] = float(int(i % 7) - 3) * 0.5f;
    v[i] = float(int(i % 5) - 2) * 0.25f;
  }
  attnum::io::write_npy((dir_ / "q.npy").string(), q.data(), {1, n, d});
  attnum::io::write_npy((dir_ / "k.npy").string(), k.data(), {1, n, d});
  attnum::io::write_npy((dir_ / "v.npy").string(), v.data(), {1, n, d});
  const std::string huge = "attend --q " + (dir_ / "q.npy").string() + " --k " + (dir_ / "k.npy").string() + " --v " +
                           (dir_ / "v.npy").string();
  // exp2_arg_max of --json, by plain fp64 loops: max over rows of |row max of q.k / sqrt(d)| * log2 e
  // (causal, so row i sees keys 0..i).
  auto exp2_arg_max = [&] {
    double out = 0;
    for (int i = 0; i < n; ++i) {
      double row_max = -INFINITY;
      for (int j = 0; j <= i; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(q[size_t(i) * d + c]) * double(k[size_t(j) * d + c]);
        row_max = std::max(row_max, s / std::sqrt(double(d)));
      }
      out = std::max(out, std::fabs(row_max) * 1.4426950408889634);
    }
    return out;
  };
  for (const char* kernel : {"fp32", "bf16", "fa3"}) {
    const run_result r = run_attnum(huge + " --kernel " + kernel + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json rows = nlohmann::json::parse(r.out.substr(r.out.find('[')));
    int flagged = 0;
    for (const auto& h : rows) {
      const bool finite = h["rel_err"].is_number() && h["cosine"].is_number();
      flagged += h["nan_flagged"].get<bool>();
      EXPECT_EQ(h["nan_flagged"].get<bool>(), !finite) << kernel << " " << h.dump();
      if (h["nan_flagged"].get<bool>()) {
        for (const char* f : {"rel_err", "log_err", "cosine", "max_row_err", "max_abs_err"})
          EXPECT_TRUE(h[f].is_null()) << kernel << " " << f;
      }
    }
    if (std::string(kernel) == "fp32") {
      EXPECT_EQ(flagged, 1) << "fp32 overflows here: " << r.out;
    }
    ASSERT_TRUE(rows[0]["exp2_arg_max"].is_number()) << r.out;  // measured even where the output is NaN
    EXPECT_NEAR(rows[0]["exp2_arg_max"].get<double>(), exp2_arg_max(), 1e-12 * exp2_arg_max()) << kernel;
    EXPECT_GE(rows[0]["exp2_arg_max"].get<double>(), 2147483648.0) << kernel;
    // The cause is named: scores beyond 2^31 for the kernel's fp32 exp2 (max_scaled off by 2^12).
    for (const char* want : {"warning: head 0:", "reaches 8.22e+10, beyond 2^31", "off by up to 4.1e+03",
                             "overflows to inf", "underflows to 0", "scale --q or --k down"})
      EXPECT_NE(r.out.find(want), std::string::npos) << kernel << ": " << want << "\n" << r.out;
  }
  // The same shape with scores below 2^31: finite, measured, no such warning.
  for (float& x : q) x *= 1e-4f;
  attnum::io::write_npy((dir_ / "q.npy").string(), q.data(), {1, n, d});
  {
    const run_result r = run_attnum(huge + " --kernel fp32 --json");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out.find("beyond 2^31"), std::string::npos) << r.out;
    const nlohmann::json rows = nlohmann::json::parse(r.out.substr(r.out.find('[')));
    EXPECT_FALSE(rows[0]["nan_flagged"].get<bool>()) << r.out;
    EXPECT_LT(rows[0]["rel_err"].get<double>(), 1e-6) << r.out;
    EXPECT_NEAR(rows[0]["exp2_arg_max"].get<double>(), exp2_arg_max(), 1e-12 * exp2_arg_max()) << r.out;
    EXPECT_LT(rows[0]["exp2_arg_max"].get<double>(), 2147483648.0) << r.out;
  }
  refused(huge + " --kernel fa3 --knob q.scale_max=1e-320", {"q.scale_max", "normal range"});
  refused(huge + " --kernel fa3 --knob v.eps=1e-45", {"v.eps", "normal range"});
}

// --- a result folder has one writer, and no output lands in an input ---------------------------

TEST_F(bad_input, second_run_into_a_locked_folder_and_out_inside_an_input_refused) {
  const fs::path d = dir_ / "D";
  fs::create_directories(d);
  file("D/earlier.csv", "another run's file");
  {
    const int fd = ::open((d / ".attnum-lock").c_str(), O_RDWR | O_CREAT, 0644);  // a running writer
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    refused("pcast dp --out " + d.string(), {d.string(), "another attnum run is writing into this folder"});
    ::close(fd);
  }
  EXPECT_TRUE(fs::exists(d / "earlier.csv"));
  EXPECT_FALSE(fs::exists(d / "pcast_dp.csv"));
  ASSERT_EQ(run_attnum("pcast dp --out " + d.string()).status, 0);  // unlocked now
  EXPECT_FALSE(fs::exists(d / ".attnum-lock")) << "a finished folder holds only results";
  // --out equal to or inside what the run reads.
  refused("report --results " + d.string() + " --out " + (d / "pcast_dp.csv").string(), {"inside the result folder"});
  EXPECT_NE(attnum::read_file(d / "pcast_dp.csv").find(","), std::string::npos) << "the result is kept";
  refused("merge " + d.string() + " --out " + d.string(), {"is the input"});
  const fs::path m = llama2c("m.bin", 300);
  refused("capture --model " + m.string() + " --token-ids " + file("ids.txt", "1 2 3 4").string() +
              " --tokens 4 --out " + m.string(),
          {"is the input"});
}

}  // namespace
